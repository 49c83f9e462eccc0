/* SPDX-License-Identifier: Apache-2.0 */
#include "sandbox/user.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/openat2.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "basic/macro.h"

/* A decimal uint32 below UINT32_MAX (-1 is "unset" for setuid), the whole
 * of [s, s + n). */
static bool parse_id(const char *s, size_t n, uint32_t *ret) {
        if (n == 0 || n > 10)
                return false;
        uint64_t v = 0;
        for (size_t i = 0; i < n; i++) {
                if (s[i] < '0' || s[i] > '9')
                        return false;
                v = v * 10 + (uint64_t) (s[i] - '0');
        }
        if (v >= UINT32_MAX)
                return false;
        *ret = (uint32_t) v;
        return true;
}

/* Split the line [p, end) at ':' into at most max fields. Returns the
 * count. */
static size_t split(const char *p, const char *end, const char **f, size_t *fl, size_t max) {
        size_t n = 0;
        while (n < max) {
                const char *c = memchr(p, ':', (size_t) (end - p));
                const char *e = c ? c : end;
                f[n] = p;
                fl[n] = (size_t) (e - p);
                n++;
                if (!c)
                        break;
                p = c + 1;
        }
        return n;
}

/* Call fn for each line of buf; stop when it returns nonzero. */
static int each_line(const char *buf, size_t len, int (*fn)(const char *, const char *, void *),
                     void *arg) {
        const char *p = buf, *end = buf + len;
        while (p < end) {
                const char *nl = memchr(p, '\n', (size_t) (end - p));
                const char *le = nl ? nl : end;
                if (le > p && *p != '#') {
                        int r = fn(p, le, arg);
                        if (r)
                                return r;
                }
                p = nl ? nl + 1 : end;
        }
        return 0;
}

struct pw_query {
        const char *name;
        uint32_t uid;
        struct sbx_user *ret;
};

static int pw_line(const char *p, const char *end, void *arg) {
        struct pw_query *q = arg;
        const char *f[7];
        size_t fl[7];
        if (split(p, end, f, fl, 7) != 7)
                return 0;
        uint32_t uid, gid;
        if (!parse_id(f[2], fl[2], &uid) || !parse_id(f[3], fl[3], &gid))
                return 0;
        if (q->name ? fl[0] != strlen(q->name) || memcmp(f[0], q->name, fl[0]) != 0 : uid != q->uid)
                return 0;
        q->ret->uid = uid;
        q->ret->gid = gid;
        q->ret->home[0] = 0;
        if (fl[5] > 0 && fl[5] < sizeof(q->ret->home) && f[5][0] == '/' &&
            !memchr(f[5], 0, fl[5])) {
                memcpy(q->ret->home, f[5], fl[5]);
                q->ret->home[fl[5]] = 0;
        }
        return 1;
}

int sbx_passwd_find(const char *buf, size_t len, const char *name, uint32_t uid,
                    struct sbx_user *ret) {
        struct pw_query q = {.name = name, .uid = uid, .ret = ret};
        return each_line(buf, len, pw_line, &q);
}

struct gr_query {
        const char *name;
        uint32_t *gid;
};

static int gr_line(const char *p, const char *end, void *arg) {
        struct gr_query *q = arg;
        const char *f[4];
        size_t fl[4];
        if (split(p, end, f, fl, 4) < 3)
                return 0;
        uint32_t gid;
        if (!parse_id(f[2], fl[2], &gid))
                return 0;
        if (fl[0] != strlen(q->name) || memcmp(f[0], q->name, fl[0]) != 0)
                return 0;
        *q->gid = gid;
        return 1;
}

int sbx_group_find(const char *buf, size_t len, const char *name, uint32_t *gid) {
        struct gr_query q = {.name = name, .gid = gid};
        return each_line(buf, len, gr_line, &q);
}

/* Read etc/<name> of the tree at root_fd: a regular file, resolved inside
 * the tree, never blocking on a FIFO, at most SBX_USER_FILE_MAX bytes.
 * Returns the length (*ret malloc'd), -ENOENT when missing, -EBADFD when
 * something else is there (an overlay whiteout, a FIFO, a directory), or
 * another negative errno. */
static ssize_t read_etc(int root_fd, const char *path, char **ret) {
        struct open_how how = {
                .flags = O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY,
                .resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS,
        };
        _cleanup_close_ int fd = (int) syscall(SYS_openat2, root_fd, path, &how, sizeof(how));
        if (fd < 0 && errno == EACCES) {
                /* a dropped warrend (--user) may not open a whiteout (a
                 * 0/0 device of mode 0): what is there decides */
                how.flags = O_PATH | O_CLOEXEC;
                _cleanup_close_ int p = (int) syscall(SYS_openat2, root_fd, path, &how, sizeof(how));
                struct stat st;
                if (p >= 0 && fstat(p, &st) == 0 && !S_ISREG(st.st_mode))
                        return -EBADFD;
                return -EACCES;
        }
        if (fd < 0)
                return errno == ENOENT ? -ENOENT : errno == ENXIO ? -EBADFD : -errno;
        return sbx_etc_read(fd, ret);
}

ssize_t sbx_etc_read(int fd, char **ret) {
        struct stat st;
        if (fstat(fd, &st) < 0)
                return -errno;
        if (!S_ISREG(st.st_mode))
                return -EBADFD;
        if (st.st_size > SBX_USER_FILE_MAX)
                return -EFBIG;
        size_t cap = (size_t) st.st_size;
        char *buf = malloc(cap + 1);
        if (!buf)
                return -ENOMEM;
        size_t n = 0;
        while (n < cap) {
                ssize_t k = read(fd, buf + n, cap - n);
                if (k < 0 && errno == EINTR)
                        continue;
                if (k <= 0)
                        break;
                n += (size_t) k;
        }
        *ret = buf;
        return (ssize_t) n;
}

/* True when the tree's etc/ is an opaque overlay directory (it hides the
 * layers below). */
static bool etc_opaque(int root_fd) {
        struct open_how how = {
                .flags = O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NONBLOCK,
                .resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS,
        };
        _cleanup_close_ int fd = (int) syscall(SYS_openat2, root_fd, "etc", &how, sizeof(how));
        char v[2];
        return fd >= 0 && fgetxattr(fd, "trusted.overlay.opaque", v, sizeof(v)) == 1 && v[0] == 'y';
}

/* Look a name (or uid) up in etc/passwd (group: etc/group) of the first
 * tree in roots that has the file, as overlayfs would show it: a
 * whiteout or an opaque etc/ ends the search. */
/* Where etc/passwd and etc/group come from: trees (roots), or the
 * files' contents read already (etc). */
struct etc_src {
        const int *roots;
        size_t n_roots;
        const struct sbx_etc *etc;
};

static int lookup(const struct etc_src *src, bool group, const char *name, uint32_t id,
                  struct sbx_user *u, uint32_t *gid) {
        if (src->etc) {
                const char *buf = group ? src->etc->group : src->etc->passwd;
                ssize_t n = group ? src->etc->group_len : src->etc->passwd_len;
                if (n == -ENOENT || n == -EBADFD)
                        return 0;
                if (n < 0)
                        return (int) n;
                return group ? sbx_group_find(buf, (size_t) n, name, gid)
                             : sbx_passwd_find(buf, (size_t) n, name, id, u);
        }
        const int *roots = src->roots;
        size_t n_roots = src->n_roots;
        for (size_t i = 0; i < n_roots; i++) {
                _cleanup_free_ char *buf = NULL;
                ssize_t n = read_etc(roots[i], group ? "etc/group" : "etc/passwd", &buf);
                if (n == -EBADFD)
                        return 0;
                if (n == -ENOENT) {
                        if (etc_opaque(roots[i]))
                                return 0;
                        continue;
                }
                if (n < 0)
                        return (int) n;
                return group ? sbx_group_find(buf, (size_t) n, name, gid)
                             : sbx_passwd_find(buf, (size_t) n, name, id, u);
        }
        return 0;
}

static int resolve(const struct etc_src *src, const char *spec, const char *what,
                   struct sbx_user *ret, struct wr_err *e);

int sbx_user_resolve(const int *roots, size_t n_roots, const char *spec, const char *what,
                     struct sbx_user *ret, struct wr_err *e) {
        struct etc_src src = {.roots = roots, .n_roots = n_roots};
        return resolve(&src, spec, what, ret, e);
}

int sbx_user_resolve_etc(const struct sbx_etc *etc, const char *spec, const char *what,
                         struct sbx_user *ret, struct wr_err *e) {
        struct etc_src src = {.etc = etc};
        return resolve(&src, spec, what, ret, e);
}

static int resolve(const struct etc_src *src, const char *spec, const char *what,
                   struct sbx_user *ret, struct wr_err *e) {
        *ret = (struct sbx_user){0};
        if (!spec || !*spec)
                return 0;
        const char *colon = strchr(spec, ':');
        size_t ul = colon ? (size_t) (colon - spec) : strlen(spec);
        const char *gs = colon ? colon + 1 : NULL;
        char name[256];
        if (ul == 0 || ul >= sizeof(name) || (gs && (!*gs || strlen(gs) >= sizeof(name))) ||
            (gs && strchr(gs, ':')))
                return err_setx(e, -EINVAL, WR_STATUS_INVALID_ARGUMENT, WR_FAULT_CLIENT,
                                "%s: \"%s\" is not a user (give NAME, UID, NAME:GROUP or "
                                "UID:GID)",
                                what, spec);
        memcpy(name, spec, ul);
        name[ul] = 0;

        uint32_t uid;
        struct sbx_user pw = {0};
        int r;
        if (parse_id(name, ul, &uid)) {
                r = lookup(src, false, NULL, uid, &pw, NULL);
                if (r < 0)
                        return err_set(e, r, "%s: reading the sandbox's /etc/passwd", what);
                ret->uid = uid;
                ret->gid = r ? pw.gid : uid;
                if (r)
                        memcpy(ret->home, pw.home, sizeof(ret->home));
        } else {
                r = lookup(src, false, name, 0, &pw, NULL);
                if (r < 0)
                        return err_set(e, r, "%s: reading the sandbox's /etc/passwd", what);
                if (r == 0 && strcmp(name, "root") == 0)
                        /* root needs no entry (images without /etc/passwd) */
                        pw = (struct sbx_user){.home = "/root"};
                else if (r == 0)
                        return err_setx(e, -ENOENT, WR_STATUS_INVALID_ARGUMENT, WR_FAULT_CLIENT,
                                        "%s: no user \"%s\" in the sandbox's /etc/passwd (give "
                                        "a numeric uid, or add the user to the image)",
                                        what, name);
                *ret = pw;
        }
        if (gs) {
                uint32_t gid;
                if (!parse_id(gs, strlen(gs), &gid)) {
                        r = lookup(src, true, gs, 0, NULL, &gid);
                        if (r < 0)
                                return err_set(e, r, "%s: reading the sandbox's /etc/group", what);
                        if (r == 0)
                                return err_setx(e, -ENOENT, WR_STATUS_INVALID_ARGUMENT,
                                                WR_FAULT_CLIENT,
                                                "%s: no group \"%s\" in the sandbox's "
                                                "/etc/group (give a numeric gid)",
                                                what, gs);
                }
                ret->gid = gid;
        }
        return 0;
}
