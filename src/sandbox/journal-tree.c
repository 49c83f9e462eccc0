/* SPDX-License-Identifier: Apache-2.0 */
/* The change journal's file-system core: see journal-tree.h. */
#include "sandbox/journal-tree.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "basic/macro.h"

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

static bool opaque_dir(int fd) {
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
                                out->v[out->n - 1].opaque = opaque_dir(cfd);
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
                if (opaque_dir(next))
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
