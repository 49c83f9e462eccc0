/* SPDX-License-Identifier: Apache-2.0 */
/* The file API of a volume. A sandbox may write anything into a volume
 * at any time (symlinks to /, FIFOs, a directory swapped for a symlink
 * between two calls), so no path string is ever resolved from the host's
 * root: every lookup is openat2 on the volume's data dir with
 * RESOLVE_IN_ROOT (a symlink or ".." never climbs out of it),
 * RESOLVE_NO_MAGICLINKS and RESOLVE_NO_XDEV, the last step is done on a
 * directory fd with *at() calls that do not follow, and a file is
 * checked with fstat on the very fd that is read. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "volume/volume.h"

#define streq(a, b) (strcmp((a), (b)) == 0)
#define INVALID(e, ...)                                                                            \
        err_setx(e, -EINVAL, WR_STATUS_INVALID_ARGUMENT, WR_FAULT_CLIENT, __VA_ARGS__)
#define PRECONDITION(e, code, ...)                                                                 \
        err_setx(e, code, WR_STATUS_FAILED_PRECONDITION, WR_FAULT_CLIENT, __VA_ARGS__)

#define RESOLVE (RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV)
#define LIST_DEPTH_MAX 512

static int openat2_in(int dirfd, const char *path, uint64_t flags) {
        struct open_how how = {.flags = flags | O_CLOEXEC, .resolve = RESOLVE};
        int fd;
        do
                fd = (int) syscall(SYS_openat2, dirfd, path, &how, sizeof(how));
        while (fd < 0 && errno == EAGAIN); /* a rename raced the lookup */
        return fd < 0 ? -errno : fd;
}

static void closedirp(DIR **d) {
        if (*d)
                closedir(*d);
}

/* The parent of a normalized, non-empty path ("" for the root), heap. */
static char *dir_dup(const char *norm) {
        const char *slash = strrchr(norm, '/');
        return slash ? strndup(norm, (size_t) (slash - norm)) : strdup("");
}

/* The last component of a normalized, non-empty path, borrowed. */
static const char *leaf_of(const char *norm) {
        const char *slash = strrchr(norm, '/');
        return slash ? slash + 1 : norm;
}

/* Make the missing components of dir (normalized, non-empty), each in
 * its parent, each opened from the volume's root; the last one opened
 * O_RDONLY | O_DIRECTORY, or a negative errno. */
static int mkdirs_open(int data_fd, const char *dir) {
        _cleanup_free_ char *prefix = strdup(dir);
        if (!prefix)
                return -ENOMEM;
        _cleanup_close_ int parent = openat2_in(data_fd, ".", O_RDONLY | O_DIRECTORY);
        if (parent < 0)
                return parent;
        for (char *p = prefix;;) {
                size_t n = strcspn(p, "/");
                char saved = p[n];
                p[n] = 0;
                int fd = openat2_in(data_fd, prefix, O_RDONLY | O_DIRECTORY);
                if (fd == -ENOENT) {
                        if (mkdirat(parent, p, 0755) < 0 && errno != EEXIST)
                                return -errno;
                        fd = openat2_in(data_fd, prefix, O_RDONLY | O_DIRECTORY);
                }
                p[n] = saved;
                if (fd < 0 || !saved)
                        return fd;
                safe_close(parent);
                parent = fd;
                p += n + 1;
        }
}

/* The directory dir (normalized; "" = the root) of the volume, opened
 * O_RDONLY | O_DIRECTORY. mkdirs: make missing components (mode 0755). */
static int dir_open(int data_fd, const char *dir, bool mkdirs, const char *field,
                    struct wr_err *e) {
        int fd = openat2_in(data_fd, *dir ? dir : ".", O_RDONLY | O_DIRECTORY);
        if (fd == -ENOENT && mkdirs)
                fd = mkdirs_open(data_fd, dir);
        if (fd >= 0)
                return fd;
        switch (fd) {
        case -ENOTDIR:
        case -EEXIST:
                return PRECONDITION(e, -ENOTDIR, "%s: a component of \"%.80s\" is not a directory",
                                    field, dir);
        case -ENOENT:
                return err_setx(e, -ENOENT, WR_STATUS_NOT_FOUND, WR_FAULT_CLIENT,
                                "%s: directory \"%.80s\" not found", field, dir);
        case -ELOOP:
        case -EXDEV:
                return PRECONDITION(e, fd, "%s: \"%.80s\" goes through too many symlinks", field,
                                    dir);
        case -ENOSPC:
        case -EDQUOT:
                return err_setx(e, -ENOSPC, WR_STATUS_RESOURCE_EXHAUSTED, WR_FAULT_CLIENT,
                                "%s: the volume is full (bytes or files)", field);
        default:
                return err_set(e, fd, "%s: open \"%.80s\": %s", field, dir, strerror(-fd));
        }
}

static enum vol_file_kind kind_of(mode_t m) {
        return S_ISREG(m)   ? VOL_FILE_REGULAR
               : S_ISDIR(m) ? VOL_FILE_DIRECTORY
               : S_ISLNK(m) ? VOL_FILE_SYMLINK
                            : VOL_FILE_OTHER;
}

static int file_fill(const char *path, const struct stat *st, struct vol_file *ret) {
        *ret = (struct vol_file){
                .kind = kind_of(st->st_mode),
                .size = S_ISREG(st->st_mode) || S_ISLNK(st->st_mode) ? (uint64_t) st->st_size : 0,
                .mode = st->st_mode & 07777,
                .mtime_ns = (int64_t) st->st_mtim.tv_sec * 1000000000LL + st->st_mtim.tv_nsec,
                .path = strdup(path),
        };
        return ret->path ? 0 : -ENOMEM;
}

/* ---- PutFile ---- */

struct vol_put {
        int stage_fd, parent_fd, fd;
        char *path; /* normalized */
        const char *leaf;
        char tmp[VOL_PUT_TMP_MAX];
        mode_t mode;
        uint64_t size, flushed;
        bool committed;
        /* vol_put_remote: the temp file is another process's (warren-priv's)
         * to commit or remove; stage_fd and parent_fd are not used */
        const struct vol_put_ops *ops;
        void *ops_data;
};

/* Writeback is started every this many bytes while a file arrives, so the
 * fsync at the commit has little left to do. */
#define PUT_WRITEBACK (8u << 20)

void vol_put_free(struct vol_put *p) {
        if (!p)
                return;
        if (p->ops) {
                if (!p->committed)
                        p->ops->abort(p->ops_data, p->tmp);
                if (p->ops->release)
                        p->ops->release(p->ops_data);
        } else if (p->fd >= 0 && !p->committed)
                (void) unlinkat(p->stage_fd, p->tmp, 0);
        safe_close(p->fd);
        safe_close(p->stage_fd);
        safe_close(p->parent_fd);
        free(p->path);
        free(p);
}

static void vol_put_freep(struct vol_put **p) {
        vol_put_free(*p);
}

static int full(struct wr_err *e) {
        return err_setx(e, -ENOSPC, WR_STATUS_RESOURCE_EXHAUSTED, WR_FAULT_CLIENT,
                        "the volume is full (its bytes or files quota); remove files or use a "
                        "bigger volume");
}

/* A new vol_put for path (normalized into it) with its parent dir made
 * and opened and stage_fd dup'd; the leaf must not be a directory. */
static int put_new(int data_fd, int stage_fd, const char *path, mode_t mode, struct vol_put **ret,
                   struct wr_err *e) {
        _cleanup_(vol_put_freep) struct vol_put *p = calloc(1, sizeof(*p));
        if (!p)
                return -ENOMEM;
        p->stage_fd = p->parent_fd = p->fd = -EBADF;
        p->mode = (mode & 07777) ? (mode & 07777) : 0644;
        int r = vol_path_normalize(path, &p->path);
        if (r < 0)
                return r;
        if (!*p->path)
                return INVALID(e, "meta.path: names the volume's root; give a file's path");
        _cleanup_free_ char *dir = dir_dup(p->path);
        if (!dir)
                return -ENOMEM;
        p->leaf = leaf_of(p->path);
        if ((p->parent_fd = dir_open(data_fd, dir, true, "meta.path", e)) < 0)
                return p->parent_fd;
        struct stat st;
        if (fstatat(p->parent_fd, p->leaf, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(st.st_mode))
                return PRECONDITION(e, -EISDIR, "meta.path: \"%.80s\" is a directory", p->path);
        if ((p->stage_fd = fcntl(stage_fd, F_DUPFD_CLOEXEC, 3)) < 0)
                return err_set(e, -errno, "dup: %m");
        *ret = TAKE_PTR(p);
        return 0;
}

int vol_put_begin(int data_fd, int stage_fd, const char *path, mode_t mode, struct vol_put **ret,
                  struct wr_err *e) {
        _cleanup_(vol_put_freep) struct vol_put *p = NULL;
        int r = put_new(data_fd, stage_fd, path, mode, &p, e);
        if (r < 0)
                return r;
        for (int tries = 0; p->fd < 0; tries++) {
                uint64_t rnd = 0;
                if (getrandom(&rnd, sizeof(rnd), GRND_NONBLOCK) < 0)
                        rnd = (uint64_t) tries * 7919u + (uint64_t) getpid();
                snprintf(p->tmp, sizeof(p->tmp), "put-%016llx", (unsigned long long) rnd);
                p->fd = openat(p->stage_fd, p->tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
                if (p->fd < 0 && (errno != EEXIST || tries > 8)) {
                        if (errno == ENOSPC || errno == EDQUOT)
                                return full(e);
                        return err_set(e, -errno, "create a temp file: %m");
                }
        }
        *ret = TAKE_PTR(p);
        return 0;
}

int vol_put_write(struct vol_put *p, const void *buf, size_t n, struct wr_err *e) {
        const char *b = buf;
        while (n > 0) {
                ssize_t w = write(p->fd, b, n);
                if (w < 0 && errno == EINTR)
                        continue;
                if (w < 0) {
                        if (errno == ENOSPC || errno == EDQUOT)
                                return full(e);
                        return err_set(e, -errno, "write %s: %m", p->path);
                }
                b += w;
                n -= (size_t) w;
                p->size += (uint64_t) w;
        }
        if (p->size - p->flushed >= PUT_WRITEBACK) {
                (void) sync_file_range(p->fd, (off_t) p->flushed, (off_t) (p->size - p->flushed),
                                       SYNC_FILE_RANGE_WRITE);
                p->flushed = p->size;
        }
        return 0;
}

int vol_put_commit(struct vol_put *p, struct vol_file *ret, struct wr_err *e) {
        if (p->ops) {
                int r = p->ops->commit(p->ops_data, p->tmp, p->path, p->mode, ret, e);
                if (r >= 0)
                        p->committed = true;
                return r;
        }
        if (fchmod(p->fd, p->mode) < 0)
                return err_set(e, -errno, "chmod %s: %m", p->path);
        if (fsync(p->fd) < 0) {
                if (errno == ENOSPC || errno == EDQUOT)
                        return full(e);
                return err_set(e, -errno, "fsync %s: %m", p->path);
        }
        if (renameat(p->stage_fd, p->tmp, p->parent_fd, p->leaf) < 0) {
                if (errno == EISDIR || errno == ENOTEMPTY || errno == EEXIST)
                        return PRECONDITION(e, -EISDIR, "meta.path: \"%.80s\" is a directory",
                                            p->path);
                if (errno == ENOSPC || errno == EDQUOT)
                        return full(e);
                return err_set(e, -errno, "rename into %s: %m", p->path);
        }
        p->committed = true;
        if (fsync(p->parent_fd) < 0)
                return err_set(e, -errno, "fsync the directory of %s: %m", p->path);
        struct stat st;
        if (fstat(p->fd, &st) < 0)
                return err_set(e, -errno, "stat %s: %m", p->path);
        return file_fill(p->path, &st, ret);
}

int vol_put_take(struct vol_put *p, int *ret_fd, char tmp[VOL_PUT_TMP_MAX]) {
        int fd = fcntl(p->fd, F_DUPFD_CLOEXEC, 3);
        if (fd < 0)
                return -errno;
        memcpy(tmp, p->tmp, VOL_PUT_TMP_MAX);
        p->committed = true; /* the temp file stays: the taker's now */
        *ret_fd = fd;
        return 0;
}

int vol_put_resume(int data_fd, int stage_fd, const char *tmp, const char *path, mode_t mode,
                   struct vol_put **ret, struct wr_err *e) {
        if (!vol_put_tmp_ok(tmp))
                return err_set(e, -EINVAL, "not a temp file's name");
        _cleanup_(vol_put_freep) struct vol_put *p = NULL;
        int r = put_new(data_fd, stage_fd, path, mode, &p, e);
        if (r < 0) {
                (void) unlinkat(stage_fd, tmp, 0);
                return r;
        }
        snprintf(p->tmp, sizeof(p->tmp), "%s", tmp);
        p->fd = openat(p->stage_fd, tmp, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
        struct stat st;
        if (p->fd < 0 || fstat(p->fd, &st) < 0)
                return err_set(e, -errno, "open the temp file of %.80s: %m", p->path);
        if (!S_ISREG(st.st_mode))
                return err_set(e, -EINVAL, "the temp file of %.80s is not a regular file",
                               p->path);
        *ret = TAKE_PTR(p);
        return 0;
}

int vol_put_remote(int fd, const char *tmp, const char *path, mode_t mode,
                   const struct vol_put_ops *ops, void *ops_data, struct vol_put **ret) {
        struct vol_put *p = calloc(1, sizeof(*p));
        if (!p)
                return -ENOMEM;
        p->stage_fd = p->parent_fd = -EBADF;
        p->fd = fd;
        p->mode = (mode & 07777) ? (mode & 07777) : 0644;
        snprintf(p->tmp, sizeof(p->tmp), "%s", tmp);
        p->ops = ops;
        p->ops_data = ops_data;
        if (vol_path_normalize(path, &p->path) < 0) {
                p->fd = -EBADF; /* the caller's on failure */
                p->ops = NULL;
                vol_put_free(p);
                return -ENOMEM;
        }
        *ret = p;
        return 0;
}

/* ---- reading, stat, remove ---- */

static int open_err(int r, const char *field, const char *path, struct wr_err *e) {
        switch (r) {
        case -ENOENT:
                return err_setx(e, -ENOENT, WR_STATUS_NOT_FOUND, WR_FAULT_CLIENT,
                                "%s: \"%.80s\" not found", field, path);
        case -ENOTDIR:
                return PRECONDITION(e, r, "%s: a component of \"%.80s\" is not a directory", field,
                                    path);
        case -ELOOP:
        case -EXDEV:
                return PRECONDITION(e, r, "%s: \"%.80s\" goes through too many symlinks", field,
                                    path);
        case -EACCES:
        case -ENXIO:
        case -EPERM:
                /* a device node on the nodev mount, a socket */
                return PRECONDITION(e, -EINVAL, "%s: \"%.80s\" is not a regular file", field, path);
        default:
                return err_set(e, r, "%s: open \"%.80s\": %s", field, path, strerror(-r));
        }
}

int vol_file_open(int data_fd, const char *path, int *ret_fd, struct stat *st, struct wr_err *e) {
        _cleanup_free_ char *norm = NULL;
        int r = vol_path_normalize(path, &norm);
        if (r < 0)
                return r;
        /* O_NONBLOCK: a FIFO opens at once (and is refused below) */
        _cleanup_close_ int fd =
                openat2_in(data_fd, *norm ? norm : ".", O_RDONLY | O_NONBLOCK | O_NOCTTY);
        if (fd < 0)
                return open_err(fd, "path", norm, e);
        if (fstat(fd, st) < 0)
                return err_set(e, -errno, "stat %s: %m", norm);
        if (S_ISDIR(st->st_mode))
                return PRECONDITION(e, -EISDIR, "path: \"%.80s\" is a directory", norm);
        if (!S_ISREG(st->st_mode))
                return PRECONDITION(e, -EINVAL, "path: \"%.80s\" is not a regular file", norm);
        int fl = fcntl(fd, F_GETFL);
        if (fl >= 0)
                (void) fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
        *ret_fd = TAKE_FD(fd);
        return 0;
}

/* The parent dir of a normalized non-empty path, and its leaf. */
static int parent_open(int data_fd, const char *norm, const char **leaf, struct wr_err *e) {
        _cleanup_free_ char *dir = dir_dup(norm);
        if (!dir)
                return -ENOMEM;
        *leaf = leaf_of(norm);
        return dir_open(data_fd, dir, false, "path", e);
}

int vol_file_stat(int data_fd, const char *path, struct vol_file *ret, struct wr_err *e) {
        _cleanup_free_ char *norm = NULL;
        int r = vol_path_normalize(path, &norm);
        if (r < 0)
                return r;
        struct stat st;
        if (!*norm) {
                _cleanup_close_ int fd = openat2_in(data_fd, ".", O_PATH | O_DIRECTORY);
                if (fd < 0 || fstat(fd, &st) < 0)
                        return err_set(e, fd < 0 ? fd : -errno, "stat the volume's root");
                return file_fill("", &st, ret);
        }
        const char *leaf;
        _cleanup_close_ int dir = parent_open(data_fd, norm, &leaf, e);
        if (dir < 0)
                return dir;
        if (fstatat(dir, leaf, &st, AT_SYMLINK_NOFOLLOW) < 0)
                return open_err(-errno, "path", norm, e);
        return file_fill(norm, &st, ret);
}

int vol_file_remove(int data_fd, const char *path, struct wr_err *e) {
        _cleanup_free_ char *norm = NULL;
        int r = vol_path_normalize(path, &norm);
        if (r < 0)
                return r;
        if (!*norm)
                return INVALID(e, "path: names the volume's root; delete the volume instead");
        const char *leaf;
        _cleanup_close_ int dir = parent_open(data_fd, norm, &leaf, e);
        if (dir < 0)
                return dir;
        if (unlinkat(dir, leaf, 0) == 0)
                return 0;
        if (errno == EISDIR && unlinkat(dir, leaf, AT_REMOVEDIR) == 0)
                return 0;
        if (errno == ENOTEMPTY || errno == EEXIST)
                return PRECONDITION(e, -ENOTEMPTY, "path: directory \"%.80s\" is not empty", norm);
        return open_err(-errno, "path", norm, e);
}

/* ---- listing ---- */

/* Is dir an ancestor of p (p under dir/)? */
static bool is_ancestor(const char *dir, const char *p) {
        size_t n = strlen(dir);
        return strncmp(dir, p, n) == 0 && p[n] == '/';
}

struct lister {
        const char *after;
        size_t limit;
        struct vol_file *out;
        size_t n, cap;
        bool more;
};

static int name_cmp(const void *a, const void *b) {
        return strcmp(*(char *const *) a, *(char *const *) b);
}

static int list_dir(struct lister *l, int dfd, const char *base, int depth) {
        if (depth > LIST_DEPTH_MAX)
                return 0;
        int dup_fd = openat(dfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (dup_fd < 0)
                return -errno;
        _cleanup_(closedirp) DIR *d = fdopendir(dup_fd);
        if (!d) {
                close(dup_fd);
                return -errno;
        }
        char **names = NULL;
        size_t n = 0, cap = 0;
        int r = 0;
        struct dirent *de;
        while ((de = readdir(d))) {
                if (streq(de->d_name, ".") || streq(de->d_name, ".."))
                        continue;
                if (n == cap) {
                        cap = cap ? cap * 2 : 64;
                        char **nn = realloc(names, cap * sizeof(*names));
                        if (!nn) {
                                r = -ENOMEM;
                                goto done;
                        }
                        names = nn;
                }
                if (!(names[n] = strdup(de->d_name))) {
                        r = -ENOMEM;
                        goto done;
                }
                n++;
        }
        if (n > 1)
                qsort(names, n, sizeof(*names), name_cmp);
        for (size_t i = 0; i < n && !l->more; i++) {
                _cleanup_free_ char *path = NULL;
                if (asprintf(&path, "%s%s%s", base, *base ? "/" : "", names[i]) < 0) {
                        r = -ENOMEM;
                        break;
                }
                bool descend_only = false;
                if (l->after && *l->after) {
                        if (is_ancestor(path, l->after))
                                descend_only = true;
                        else if (vol_path_cmp(path, l->after) <= 0)
                                continue;
                }
                struct stat st;
                if (fstatat(dfd, names[i], &st, AT_SYMLINK_NOFOLLOW) < 0)
                        continue; /* gone meanwhile */
                if (S_ISDIR(st.st_mode)) {
                        struct open_how how = {
                                .flags = O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC,
                                .resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_XDEV |
                                           RESOLVE_NO_MAGICLINKS,
                        };
                        int sub = (int) syscall(SYS_openat2, dfd, names[i], &how, sizeof(how));
                        if (sub < 0)
                                continue;
                        r = list_dir(l, sub, path, depth + 1);
                        close(sub);
                        if (r < 0)
                                break;
                        continue;
                }
                if (descend_only)
                        continue;
                if (l->n == l->limit) {
                        l->more = true;
                        break;
                }
                if (l->n == l->cap) {
                        size_t c = l->cap ? l->cap * 2 : 64;
                        struct vol_file *nf = realloc(l->out, c * sizeof(*nf));
                        if (!nf) {
                                r = -ENOMEM;
                                break;
                        }
                        l->out = nf;
                        l->cap = c;
                }
                if ((r = file_fill(path, &st, &l->out[l->n])) < 0)
                        break;
                l->n++;
        }
done:
        for (size_t i = 0; i < n; i++)
                free(names[i]);
        free(names);
        return r;
}

int vol_files_list(int data_fd, const char *prefix, const char *after, size_t limit,
                   struct vol_file **ret, size_t *n_ret, bool *more, struct wr_err *e) {
        *ret = NULL;
        *n_ret = 0;
        *more = false;
        _cleanup_free_ char *norm = NULL, *after_norm = NULL;
        int r = vol_path_normalize(prefix, &norm);
        if (r < 0 || (after && (r = vol_path_normalize(after, &after_norm)) < 0))
                return r;
        _cleanup_close_ int dir = dir_open(data_fd, norm, false, "prefix", e);
        if (dir < 0)
                return dir;
        struct lister l = {.after = after_norm, .limit = limit ? limit : 1000};
        r = list_dir(&l, dir, norm, 0);
        if (r < 0) {
                vol_files_free(l.out, l.n);
                return err_set(e, r, "list files: %s", strerror(-r));
        }
        *ret = l.out;
        *n_ret = l.n;
        *more = l.more;
        return 0;
}
