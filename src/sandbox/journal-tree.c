/* SPDX-License-Identifier: Apache-2.0 */
/* The change journal's file-system core: see journal-tree.h. */
#include "sandbox/journal-tree.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "basic/macro.h"
#include "basic/relpath.h"
#include "basic/rmrf.h"

#define WALK_DEPTH 256
#define WALK_PATH 4095

static bool is_whiteout(const struct stat *st) {
        return S_ISCHR(st->st_mode) && st->st_rdev == makedev(0, 0);
}

static uint8_t type_of(const struct stat *st) {
        if (is_whiteout(st))
                return JT_WHITEOUT;
        if (S_ISREG(st->st_mode))
                return JT_FILE;
        if (S_ISDIR(st->st_mode))
                return JT_DIR;
        if (S_ISLNK(st->st_mode))
                return JT_LINK;
        return JT_OTHER;
}

static int64_t ns_of(struct timespec ts) {
        return (int64_t) ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* The target of the symlink name in dir (NULL when unreadable). */
static char *read_link(int dir, const char *name) {
        char buf[PATH_MAX];
        ssize_t n = readlinkat(dir, name, buf, sizeof(buf) - 1);
        if (n < 0)
                return strdup("");
        buf[n] = 0;
        return strdup(buf);
}

static int opaque_dir(int fd, void *ud) {
        (void) ud;
        char v[4];
        ssize_t n = fgetxattr(fd, "trusted.overlay.opaque", v, sizeof(v));
        return n == 1 && v[0] == 'y';
}

static int push(struct jt_tree *t, const char *path, const struct stat *st, int dir,
                const char *name) {
        if (t->n == t->cap) {
                size_t cap = t->cap ? t->cap * 2 : 256;
                struct jt_ent *v = realloc(t->v, cap * sizeof(*v));
                if (!v)
                        return -ENOMEM;
                t->v = v;
                t->cap = cap;
        }
        struct jt_ent *x = &t->v[t->n];
        *x = (struct jt_ent){
                .type = type_of(st),
                .mode = st->st_mode,
                .uid = wr_id_inside(st->st_uid, t->id_base, t->id_count),
                .gid = wr_id_inside(st->st_gid, t->id_base, t->id_count),
                .dev = st->st_dev,
                .ino = st->st_ino,
                .size = (uint64_t) st->st_size,
                .mtime_ns = ns_of(st->st_mtim),
                .ctime_ns = ns_of(st->st_ctim),
        };
        if (!(x->path = strdup(path)))
                return -ENOMEM;
        if (x->type == JT_LINK && !(x->link = read_link(dir, name))) {
                free(x->path);
                return -ENOMEM;
        }
        t->n++;
        return 0;
}

struct frame {
        DIR *d;
        size_t len; /* of this dir's own path ("" for the top) */
};

static int cmp_ent(const void *a, const void *b) {
        return strcmp(((const struct jt_ent *) a)->path, ((const struct jt_ent *) b)->path);
}

int jt_walk(int root_fd, size_t max_entries, struct jt_tree *out, struct wr_err *e) {
        return jt_walk_opaque(root_fd, max_entries, opaque_dir, NULL, out, e);
}

int jt_walk_opaque(int root_fd, size_t max_entries, jt_opaque_fn opaque, void *ud,
                   struct jt_tree *out, struct wr_err *e) {
        struct frame stack[WALK_DEPTH];
        size_t depth = 0;
        char path[WALK_PATH + 1];
        int r = 0;

        int fd = openat(root_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (fd < 0)
                return err_set(e, -errno, "journal: open the writable layer: %m");
        DIR *d = fdopendir(fd);
        if (!d) {
                r = -errno;
                close(fd);
                return err_set(e, r, "journal: read the writable layer: %m");
        }
        stack[depth++] = (struct frame){.d = d, .len = 0};
        path[0] = 0;
        while (depth > 0) {
                struct frame *f = &stack[depth - 1];
                errno = 0;
                struct dirent *de = readdir(f->d);
                if (!de) {
                        if (errno != 0) {
                                path[f->len] = 0;
                                r = err_set(e, -errno, "journal: read %s: %m",
                                            f->len ? path : "the writable layer");
                                break;
                        }
                        closedir(f->d);
                        depth--;
                        continue;
                }
                if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
                        continue;
                path[f->len] = 0;
                size_t base = f->len, nl = strlen(de->d_name);
                if (base + (base ? 1 : 0) + nl > WALK_PATH) {
                        out->truncated = true;
                        continue;
                }
                if (out->n >= max_entries) {
                        out->truncated = true;
                        break;
                }
                int dfd = dirfd(f->d);
                struct stat st;
                if (fstatat(dfd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
                        continue; /* gone meanwhile */
                char *p = path + base;
                if (base)
                        *p++ = '/';
                memcpy(p, de->d_name, nl + 1);
                if ((r = push(out, path, &st, dfd, de->d_name)) < 0) {
                        err_set(e, r, "journal: out of memory");
                        break;
                }
                if (S_ISDIR(st.st_mode)) {
                        int cfd = openat(dfd, de->d_name,
                                         O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                        DIR *cd = NULL;
                        if (cfd >= 0) {
                                struct stat cst;
                                if (fstat(cfd, &cst) < 0 || cst.st_ino != st.st_ino ||
                                    cst.st_dev != st.st_dev) {
                                        close(cfd); /* swapped meanwhile */
                                        cfd = -1;
                                }
                        }
                        if (cfd >= 0) {
                                int o = opaque(cfd, ud);
                                if (o < 0) {
                                        close(cfd);
                                        r = err_set(e, o, "journal: is %s opaque: %s", path,
                                                    strerror(-o));
                                        break;
                                }
                                out->v[out->n - 1].opaque = o > 0;
                                if (depth == WALK_DEPTH) {
                                        out->truncated = true;
                                        close(cfd);
                                        cfd = -1;
                                } else if (!(cd = fdopendir(cfd))) {
                                        close(cfd);
                                        cfd = -1;
                                }
                        }
                        if (cd) {
                                stack[depth++] = (struct frame){.d = cd, .len = strlen(path)};
                                continue;
                        }
                }
                path[base] = 0;
        }
        while (depth > 0)
                closedir(stack[--depth].d);
        if (r < 0)
                return r;
        qsort(out->v, out->n, sizeof(out->v[0]), cmp_ent);
        return 0;
}

void jt_tree_free(struct jt_tree *t) {
        if (!t)
                return;
        for (size_t i = 0; i < t->n; i++) {
                free(t->v[i].path);
                free(t->v[i].link);
        }
        free(t->v);
        *t = (struct jt_tree){0};
}

const struct jt_ent *jt_find(const struct jt_tree *t, const char *path) {
        size_t lo = 0, hi = t->n;
        while (lo < hi) {
                size_t mid = lo + (hi - lo) / 2;
                int c = strcmp(t->v[mid].path, path);
                if (c == 0)
                        return &t->v[mid];
                if (c < 0)
                        lo = mid + 1;
                else
                        hi = mid;
        }
        return NULL;
}

void jt_state_clear(struct jt_state *s) {
        free(s->link);
        *s = (struct jt_state){0};
}

static void state_from_stat(struct jt_state *s, const struct stat *st, int layer) {
        *s = (struct jt_state){
                .type = type_of(st),
                .layer = layer,
                .mode = st->st_mode,
                .uid = st->st_uid,
                .gid = st->st_gid,
                .ino = st->st_ino,
                .size = (uint64_t) st->st_size,
                .mtime_ns = ns_of(st->st_mtim),
                .ctime_ns = ns_of(st->st_ctim),
                .dev = st->st_dev,
        };
}

int jt_layer_lookup(int layer_fd, const char *path, struct jt_state *st) {
        _cleanup_close_ int cur = openat(layer_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (cur < 0)
                return 0;
        bool below_hidden = false;
        const char *p = path;
        for (;;) {
                const char *slash = strchr(p, '/');
                size_t len = slash ? (size_t) (slash - p) : strlen(p);
                char name[NAME_MAX + 1];
                if (len == 0 || len > NAME_MAX)
                        return 0;
                memcpy(name, p, len);
                name[len] = 0;
                struct stat s;
                if (fstatat(cur, name, &s, AT_SYMLINK_NOFOLLOW) < 0)
                        return below_hidden ? -ENOENT : 0;
                if (is_whiteout(&s))
                        return -ENOENT;
                if (!slash) {
                        state_from_stat(st, &s, 0);
                        if (st->type == JT_LINK && !(st->link = read_link(cur, name)))
                                return -ENOMEM;
                        return 1;
                }
                if (!S_ISDIR(s.st_mode))
                        return -ENOENT; /* a file here hides the dirs below */
                int next = openat(cur, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                if (next < 0)
                        return below_hidden ? -ENOENT : 0;
                if (opaque_dir(next, NULL) > 0)
                        below_hidden = true;
                close(cur);
                cur = next;
                p = slash + 1;
        }
}

int jt_state_of(const struct jt_tree *upper, const int *lower_fds, size_t n_lower, const char *path,
                struct jt_state *ret) {
        *ret = (struct jt_state){.type = JT_ABSENT, .layer = -1};
        bool lower_hidden = false;
        /* the upper tree's dirs on the way: a whiteout or a non-dir hides
         * the path, an opaque dir hides the layers below */
        char prefix[WALK_PATH + 1];
        size_t plen = strlen(path);
        if (plen > WALK_PATH)
                return 0;
        for (const char *s = strchr(path, '/'); s; s = strchr(s + 1, '/')) {
                memcpy(prefix, path, (size_t) (s - path));
                prefix[s - path] = 0;
                const struct jt_ent *d = jt_find(upper, prefix);
                if (!d)
                        continue;
                if (d->type != JT_DIR)
                        return 0;
                if (d->opaque)
                        lower_hidden = true;
        }
        const struct jt_ent *x = jt_find(upper, path);
        if (x) {
                if (x->type == JT_WHITEOUT)
                        return 0;
                *ret = (struct jt_state){
                        .type = x->type,
                        .layer = -1,
                        .mode = x->mode,
                        .uid = x->uid,
                        .gid = x->gid,
                        .ino = x->ino,
                        .size = x->size,
                        .mtime_ns = x->mtime_ns,
                        .ctime_ns = x->ctime_ns,
                        .dev = x->dev,
                        .saved = x->saved,
                };
                if (x->link && !(ret->link = strdup(x->link)))
                        return -ENOMEM;
                return 0;
        }
        if (lower_hidden)
                return 0;
        for (size_t k = 0; k < n_lower; k++) {
                struct jt_state s = {0};
                int r = jt_layer_lookup(lower_fds[k], path, &s);
                if (r == -ENOMEM)
                        return r;
                if (r < 0)
                        return 0;
                if (r > 0) {
                        s.layer = (int) k;
                        *ret = s;
                        return 0;
                }
        }
        return 0;
}

unsigned jt_compare(const struct jt_state *a, const struct jt_state *b) {
        if (a->type == JT_ABSENT && b->type == JT_ABSENT)
                return 0;
        if (a->type == JT_ABSENT)
                return JT_CREATED;
        if (b->type == JT_ABSENT)
                return JT_DELETED;
        unsigned k = 0;
        if (a->type != b->type)
                return JT_MODIFIED;
        switch (a->type) {
        case JT_FILE:
                if (a->size != b->size || a->mtime_ns != b->mtime_ns ||
                    (a->layer == -1 && b->layer == -1 &&
                     (a->ino != b->ino || a->ctime_ns != b->ctime_ns) &&
                     (a->mode & 07777) == (b->mode & 07777) && a->uid == b->uid &&
                     a->gid == b->gid))
                        k |= JT_MODIFIED;
                break;
        case JT_LINK:
                if (strcmp(a->link ? a->link : "", b->link ? b->link : ""))
                        k |= JT_MODIFIED;
                break;
        case JT_OTHER:
                if ((a->mode & S_IFMT) != (b->mode & S_IFMT))
                        k |= JT_MODIFIED;
                break;
        default:
                break;
        }
        if ((a->mode & 07777) != (b->mode & 07777) || a->uid != b->uid || a->gid != b->gid)
                k |= JT_MODE;
        return k;
}

void jt_changes_free(struct jt_change *v, size_t n) {
        for (size_t i = 0; i < n && v; i++) {
                free(v[i].path);
                jt_state_clear(&v[i].before);
                jt_state_clear(&v[i].after);
        }
        free(v);
}

int jt_diff(const struct jt_tree *pre, const struct jt_tree *post, const int *lower_fds,
            size_t n_lower, struct jt_change **ret, size_t *n, struct wr_err *e) {
        struct jt_change *v = NULL;
        size_t nv = 0, cap = 0, i = 0, j = 0;
        int r = 0;
        while (i < pre->n || j < post->n) {
                const char *p;
                int c = i == pre->n    ? 1
                        : j == post->n ? -1
                                       : strcmp(pre->v[i].path, post->v[j].path);
                if (c < 0)
                        p = pre->v[i++].path;
                else if (c > 0)
                        p = post->v[j++].path;
                else {
                        /* unchanged entries of the upper dir: nothing to look up */
                        const struct jt_ent *a = &pre->v[i], *b = &post->v[j];
                        p = a->path;
                        i++, j++;
                        if (a->type == b->type && a->ino == b->ino && a->ctime_ns == b->ctime_ns &&
                            a->mtime_ns == b->mtime_ns && a->size == b->size &&
                            a->mode == b->mode && a->opaque == b->opaque &&
                            a->type != JT_WHITEOUT &&
                            (a->type != JT_LINK || !strcmp(a->link, b->link)))
                                continue;
                }
                struct jt_state s0 = {0}, s1 = {0};
                if ((r = jt_state_of(pre, lower_fds, n_lower, p, &s0)) < 0 ||
                    (r = jt_state_of(post, lower_fds, n_lower, p, &s1)) < 0) {
                        jt_state_clear(&s0);
                        jt_state_clear(&s1);
                        break;
                }
                unsigned k = jt_compare(&s0, &s1);
                if (!k) {
                        jt_state_clear(&s0);
                        jt_state_clear(&s1);
                        continue;
                }
                if (nv == cap) {
                        size_t nc = cap ? cap * 2 : 16;
                        struct jt_change *nvv = realloc(v, nc * sizeof(*v));
                        if (!nvv) {
                                jt_state_clear(&s0);
                                jt_state_clear(&s1);
                                r = -ENOMEM;
                                break;
                        }
                        v = nvv;
                        cap = nc;
                }
                v[nv] = (struct jt_change){.kinds = k, .before = s0, .after = s1};
                if (!(v[nv].path = strdup(p))) {
                        jt_state_clear(&v[nv].before);
                        jt_state_clear(&v[nv].after);
                        r = -ENOMEM;
                        break;
                }
                nv++;
        }
        if (r < 0) {
                jt_changes_free(v, nv);
                return err_set(e, r, "journal: out of memory");
        }
        *ret = v;
        *n = nv;
        return 0;
}

void jt_object_name(uint64_t dev, uint64_t ino, int64_t ctime_ns, uint64_t size, char *buf,
                    size_t size_buf) {
        snprintf(buf, size_buf, "%" PRIu64 "-%" PRIu64 "-%" PRId64 "-%" PRIu64, dev, ino, ctime_ns,
                 size);
}

/* --- the walk on the wire --- */

#define WIRE_HDR 24
#define WIRE_ENT 64

static void put32(uint8_t *p, uint32_t v) {
        memcpy(p, &v, 4);
}
static void put64(uint8_t *p, uint64_t v) {
        memcpy(p, &v, 8);
}
static uint32_t get32(const uint8_t *p) {
        uint32_t v;
        memcpy(&v, p, 4);
        return v;
}
static uint64_t get64(const uint8_t *p) {
        uint64_t v;
        memcpy(&v, p, 8);
        return v;
}
static uint16_t get16(const uint8_t *p) {
        uint16_t v;
        memcpy(&v, p, 2);
        return v;
}

int jt_tree_encode(const struct jt_tree *t, uint8_t **ret, size_t *len) {
        size_t n = WIRE_HDR;
        for (size_t i = 0; i < t->n; i++) {
                size_t pl = strlen(t->v[i].path), ll = t->v[i].link ? strlen(t->v[i].link) : 0;
                if (pl == 0 || pl > WALK_PATH || ll > WALK_PATH)
                        return -EINVAL;
                n += WIRE_ENT + pl + ll;
        }
        uint8_t *b = calloc(1, n), *p = b + WIRE_HDR;
        if (!b)
                return -ENOMEM;
        put32(b, JT_WIRE_MAGIC);
        put32(b + 4, 1);
        put64(b + 8, t->n);
        put32(b + 16, t->truncated ? 1 : 0);
        for (size_t i = 0; i < t->n; i++) {
                const struct jt_ent *x = &t->v[i];
                uint16_t pl = (uint16_t) strlen(x->path),
                         ll = (uint16_t) (x->link ? strlen(x->link) : 0);
                p[0] = x->type;
                p[1] = x->opaque;
                memcpy(p + 2, &pl, 2);
                memcpy(p + 4, &ll, 2);
                put32(p + 8, x->mode);
                put32(p + 12, x->uid);
                put32(p + 16, x->gid);
                put64(p + 24, x->dev);
                put64(p + 32, x->ino);
                put64(p + 40, x->size);
                put64(p + 48, (uint64_t) x->mtime_ns);
                put64(p + 56, (uint64_t) x->ctime_ns);
                memcpy(p + WIRE_ENT, x->path, pl);
                if (ll)
                        memcpy(p + WIRE_ENT + pl, x->link, ll);
                p += WIRE_ENT + pl + ll;
        }
        *ret = b;
        *len = n;
        return 0;
}

static bool mode_fits(uint8_t type, uint32_t mode) {
        switch (type) {
        case JT_FILE:
                return S_ISREG(mode);
        case JT_DIR:
                return S_ISDIR(mode);
        case JT_LINK:
                return S_ISLNK(mode);
        case JT_WHITEOUT:
                return S_ISCHR(mode);
        case JT_OTHER:
                return S_ISCHR(mode) || S_ISBLK(mode) || S_ISFIFO(mode) || S_ISSOCK(mode);
        }
        return false;
}

int jt_tree_decode(const void *buf, size_t len, size_t max_entries, struct jt_tree *out,
                   struct wr_err *e) {
        const uint8_t *b = buf, *end = b + len, *p = b + WIRE_HDR;
        out->v = NULL;
        out->n = out->cap = 0;
        out->truncated = false;
        if (len < WIRE_HDR)
                return err_set(e, -EPROTO, "journal walk: %zu bytes", len);
        uint64_t n = get64(b + 8);
        uint32_t trunc = get32(b + 16);
        if (get32(b) != JT_WIRE_MAGIC || get32(b + 4) != 1 || trunc > 1 || get32(b + 20))
                return err_set(e, -EPROTO, "journal walk: bad header");
        if (n > max_entries || n > (len - WIRE_HDR) / WIRE_ENT)
                return err_set(e, -EPROTO, "journal walk: %llu entries", (unsigned long long) n);
        int r = 0;
        if (n && !(out->v = calloc(n, sizeof(*out->v))))
                return err_set(e, -ENOMEM, "journal walk: out of memory");
        out->cap = n;
        out->truncated = trunc;
        for (uint64_t i = 0; i < n; i++) {
                if ((size_t) (end - p) < WIRE_ENT) {
                        r = err_set(e, -EPROTO, "journal walk: entry %llu cut short",
                                    (unsigned long long) i);
                        goto fail;
                }
                uint8_t type = p[0], opaque = p[1];
                uint16_t pl = get16(p + 2), ll = get16(p + 4);
                struct jt_ent x = {
                        .type = type,
                        .opaque = opaque,
                        .mode = get32(p + 8),
                        .uid = get32(p + 12),
                        .gid = get32(p + 16),
                        .dev = get64(p + 24),
                        .ino = get64(p + 32),
                        .size = get64(p + 40),
                        .mtime_ns = (int64_t) get64(p + 48),
                        .ctime_ns = (int64_t) get64(p + 56),
                };
                if (get16(p + 6) || get32(p + 20) || type < JT_FILE || type > JT_WHITEOUT ||
                    opaque > 1 || (opaque && type != JT_DIR) || !mode_fits(type, x.mode) ||
                    x.uid > 65535 || x.gid > 65535 || (ll && type != JT_LINK) || ll > WALK_PATH) {
                        r = err_set(e, -EINVAL, "journal walk: entry %llu refused",
                                    (unsigned long long) i);
                        goto fail;
                }
                if ((size_t) (end - p) - WIRE_ENT < (size_t) pl + ll) {
                        r = err_set(e, -EPROTO, "journal walk: entry %llu cut short",
                                    (unsigned long long) i);
                        goto fail;
                }
                const char *path = (const char *) p + WIRE_ENT, *link = path + pl;
                if (!wr_relpath_ok(path, pl, WALK_PATH) || memchr(link, 0, ll)) {
                        r = err_set(e, -EINVAL, "journal walk: entry %llu: path refused",
                                    (unsigned long long) i);
                        goto fail;
                }
                if (!(x.path = strndup(path, pl)) ||
                    (type == JT_LINK && !(x.link = strndup(link, ll)))) {
                        free(x.path);
                        r = err_set(e, -ENOMEM, "journal walk: out of memory");
                        goto fail;
                }
                out->v[out->n++] = x;
                if (out->n > 1 && strcmp(out->v[out->n - 2].path, x.path) >= 0) {
                        r = err_set(e, -EINVAL, "journal walk: entry %llu out of order",
                                    (unsigned long long) i);
                        goto fail;
                }
                p += WIRE_ENT + pl + ll;
        }
        if (p != end) {
                r = err_set(e, -EPROTO, "journal walk: %zu bytes after the last entry",
                            (size_t) (end - p));
                goto fail;
        }
        return 0;
fail : {
        uint32_t base = out->id_base, count = out->id_count;
        jt_tree_free(out);
        out->id_base = base;
        out->id_count = count;
        return r;
}
}

/* --- a rollback's writes --- */

static int sys_openat2(int dirfd, const char *path, uint64_t flags, uint64_t resolve) {
        struct open_how how = {.flags = flags, .resolve = resolve};
        int fd = (int) syscall(SYS_openat2, dirfd, path, &how, sizeof(how));
        return fd < 0 ? -errno : fd;
}

int jt_copy_fd(int from, int to) {
        for (;;) {
                ssize_t n = copy_file_range(from, NULL, to, NULL, 1 << 30, 0);
                if (n == 0)
                        return 0;
                if (n > 0)
                        continue;
                if (errno == EINTR)
                        continue;
                if (errno != EXDEV && errno != EOPNOTSUPP && errno != ENOSYS && errno != EINVAL &&
                    errno != EPERM)
                        return -errno;
                break;
        }
        char buf[65536];
        for (;;) {
                ssize_t n = read(from, buf, sizeof(buf));
                if (n == 0)
                        return 0;
                if (n < 0) {
                        if (errno == EINTR)
                                continue;
                        return -errno;
                }
                for (ssize_t off = 0; off < n;) {
                        ssize_t w = write(to, buf + off, (size_t) (n - off));
                        if (w < 0) {
                                if (errno == EINTR)
                                        continue;
                                return -errno;
                        }
                        off += w;
                }
        }
}

int jt_open_file(int upper_fd, const char *path) {
        int fd = sys_openat2(upper_fd, path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC,
                             RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS |
                                     RESOLVE_NO_XDEV);
        struct stat st;
        if (fd >= 0 && (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode))) {
                close(fd);
                return -EINVAL;
        }
        return fd;
}

/* The parent dir of path in the root (O_RDONLY, a directory); *name
 * points at the last component. */
static int parent_fd(int root_fd, const char *path, const char **name) {
        const char *slash = strrchr(path, '/');
        char dir[PATH_MAX];
        if (!slash) {
                *name = path;
                snprintf(dir, sizeof(dir), ".");
        } else {
                if ((size_t) (slash - path) >= sizeof(dir))
                        return -ENAMETOOLONG;
                memcpy(dir, path, (size_t) (slash - path));
                dir[slash - path] = 0;
                *name = slash + 1;
        }
        return sys_openat2(root_fd, dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC,
                           RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV |
                                   RESOLVE_NO_SYMLINKS);
}

static int set_attrs_fd(int fd, const struct jt_attrs *a) {
        if (fchown(fd, a->uid, a->gid) < 0 || fchmod(fd, a->mode & 07777) < 0)
                return -errno;
        return 0;
}

static void tmp_name(char *buf, size_t size) {
        snprintf(buf, size, ".warren-rollback-%d-%lx", (int) getpid(), (unsigned long) random());
}

int jt_op_remove(int root_fd, const char *path) {
        const char *name;
        _cleanup_close_ int d = parent_fd(root_fd, path, &name);
        if (d == -ENOENT)
                return 0;
        if (d < 0)
                return d;
        return rm_rf_at(d, name);
}

/* Owner and mode of name in dir d (not followed). */
static int attrs_at(int d, const char *name, const struct jt_attrs *a) {
        _cleanup_close_ int fd = openat(d, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
        return fd < 0 ? -errno : set_attrs_fd(fd, a);
}

int jt_op_attrs(int root_fd, const char *path, const struct jt_attrs *a) {
        const char *name;
        _cleanup_close_ int d = parent_fd(root_fd, path, &name);
        return d < 0 ? d : attrs_at(d, name, a);
}

int jt_op_mkdir(int root_fd, const char *path, const struct jt_attrs *a) {
        const char *name;
        _cleanup_close_ int d = parent_fd(root_fd, path, &name);
        if (d < 0)
                return d;
        if (mkdirat(d, name, 0700) < 0 && errno != EEXIST)
                return -errno;
        return attrs_at(d, name, a);
}

int jt_op_put(int root_fd, const char *path, int src_fd, const struct jt_attrs *a) {
        const char *name;
        _cleanup_close_ int d = parent_fd(root_fd, path, &name);
        if (d < 0)
                return d;
        char tmp[64];
        tmp_name(tmp, sizeof(tmp));
        _cleanup_close_ int dst =
                openat(d, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
        if (dst < 0)
                return -errno;
        int r = jt_copy_fd(src_fd, dst);
        struct timespec ts[2] = {
                {.tv_nsec = UTIME_OMIT},
                {.tv_sec = a->mtime_ns / 1000000000, .tv_nsec = a->mtime_ns % 1000000000}};
        if (r == 0 && (r = set_attrs_fd(dst, a)) == 0 && futimens(dst, ts) < 0)
                r = -errno;
        if (r == 0 && renameat(d, tmp, d, name) < 0)
                r = -errno;
        if (r < 0)
                (void) unlinkat(d, tmp, 0);
        return r;
}

int jt_op_symlink(int root_fd, const char *path, const char *target, const struct jt_attrs *a) {
        const char *name;
        _cleanup_close_ int d = parent_fd(root_fd, path, &name);
        if (d < 0)
                return d;
        char tmp[64];
        tmp_name(tmp, sizeof(tmp));
        if (symlinkat(target, d, tmp) < 0)
                return -errno;
        if (fchownat(d, tmp, a->uid, a->gid, AT_SYMLINK_NOFOLLOW) < 0 ||
            renameat(d, tmp, d, name) < 0) {
                int r = -errno;
                (void) unlinkat(d, tmp, 0);
                return r;
        }
        return 0;
}
