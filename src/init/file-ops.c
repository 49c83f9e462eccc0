/* SPDX-License-Identifier: Apache-2.0 */
/* The file operations warren-init does for the daemon (file-ops.h). The
 * sandbox may rewrite its tree at any moment; nothing here trusts a path
 * beyond what openat2 resolves inside the root, and the last component is
 * never followed. */
#include "init/file-ops.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "basic/rmrf.h"

/* a path, its parent and leaf split apart (one byte more) */
#define FOP_BUF (CTL_PATH_MAX + 2)

#ifndef SYS_fchmodat2
#define SYS_fchmodat2 452
#endif

#ifndef RENAME_NOREPLACE
#define RENAME_NOREPLACE (1 << 0)
#endif

static int resolve(int root, const char *path, uint64_t flags, uint64_t mode) {
        /* openat2 is strict: O_PATH takes no O_NOCTTY */
        if (!(flags & O_PATH))
                flags |= O_NOCTTY;
        struct open_how how = {.flags = flags | O_CLOEXEC,
                               .mode = mode,
                               .resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS};
        int fd;
        do
                fd = (int) syscall(SYS_openat2, root, path, &how, sizeof(how));
        while (fd < 0 && errno == EAGAIN); /* a rename raced the lookup */
        return fd < 0 ? -errno : fd;
}

/* A direct child of dirfd, never through a symlink or another mount. */
static int child(int dirfd, const char *name, uint64_t flags) {
        struct open_how how = {.flags = flags | O_NOFOLLOW | O_CLOEXEC,
                               .resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS |
                                          RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV};
        int fd = (int) syscall(SYS_openat2, dirfd, name, &how, sizeof(how));
        return fd < 0 ? -errno : fd;
}

int init_fop_open(int root, const struct init_file_open *f, int *ret_fd) {
        uint64_t fl = 0;
        if (f->flags & CTL_FOPEN_PATH)
                fl |= O_PATH;
        if (f->flags & CTL_FOPEN_READ)
                fl |= O_RDONLY;
        if (f->flags & CTL_FOPEN_WRITE)
                fl |= O_WRONLY;
        if (f->flags & CTL_FOPEN_RDWR)
                fl |= O_RDWR;
        if (f->flags & CTL_FOPEN_CREATE)
                fl |= O_CREAT;
        if (f->flags & CTL_FOPEN_EXCL)
                fl |= O_EXCL;
        if (f->flags & CTL_FOPEN_TRUNC)
                fl |= O_TRUNC;
        if (f->flags & CTL_FOPEN_DIRECTORY)
                fl |= O_DIRECTORY;
        if (f->flags & CTL_FOPEN_NOFOLLOW)
                fl |= O_NOFOLLOW;
        if (!(f->flags & CTL_FOPEN_PATH))
                fl |= O_NONBLOCK; /* a FIFO must not block init */

        int fd = resolve(root, f->path, fl, (fl & O_CREAT) ? 0600 : 0);
        if (fd < 0)
                return fd;
        if (!(f->flags & CTL_FOPEN_PATH)) {
                struct stat st;
                if (fstat(fd, &st) < 0 || !(S_ISREG(st.st_mode) || S_ISDIR(st.st_mode)) ||
                    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK) < 0) {
                        close(fd);
                        return -EINVAL;
                }
        }
        if (f->flags & CTL_FOPEN_CREATE) {
                /* the file is new (CREATE implies EXCL): its owner and the
                 * exact mode, whatever the umask (chown first: it clears
                 * set-id bits) */
                if (((f->flags & CTL_FOPEN_OWNER) && fchown(fd, f->uid, f->gid) < 0) ||
                    fchmod(fd, f->mode) < 0) {
                        int r = -errno;
                        close(fd);
                        return r;
                }
        }
        *ret_fd = fd;
        return 0;
}

/* Split path (absolute) into its parent (buf, NUL-terminated) and its
 * last component (*leaf, inside buf); trailing slashes ignored. */
static int split(const char *path, char buf[FOP_BUF], const char **leaf) {
        size_t len = strlen(path);
        if (len >= CTL_PATH_MAX)
                return -ENAMETOOLONG;
        memcpy(buf, path, len + 1);
        while (len > 1 && buf[len - 1] == '/')
                buf[--len] = 0;
        char *slash = strrchr(buf, '/');
        if (!slash)
                return -EINVAL;
        const char *l = slash + 1;
        if (!*l || strcmp(l, ".") == 0 || strcmp(l, "..") == 0)
                return -EINVAL;
        /* the parent: "/" for "/x", the prefix otherwise; leaf after it */
        memmove(slash + 2, l, strlen(l) + 1);
        slash[1] = 0;
        *leaf = slash + 2;
        return 0;
}

/* The parent directory of path, O_PATH, and its last component. */
static int parent_open(int root, const char *path, char buf[FOP_BUF], const char **leaf) {
        int r = split(path, buf, leaf);
        if (r < 0)
                return r;
        return resolve(root, buf, O_PATH | O_DIRECTORY, 0);
}

/* mkdir name in dirfd: mode exactly, owned by uid:gid when owner. */
static int mkdir_owned(int dirfd, const char *name, uint32_t mode, bool owner, uint32_t uid,
                       uint32_t gid) {
        /* born with (at most 0755 of) its mode, not 0700 first: a watcher
         * that is not its owner (a dropped warrend's inotify, files Watch)
         * adds its watch as the CREATE event arrives */
        if (mkdirat(dirfd, name, mode & 0755) < 0)
                return -errno;
        int d = child(dirfd, name, O_RDONLY | O_DIRECTORY);
        if (d < 0)
                return d;
        int r = 0;
        if ((owner && fchown(d, uid, gid) < 0) || fchmod(d, mode) < 0)
                r = -errno;
        close(d);
        return r;
}

/* Every missing directory of dir (absolute), 0755, owned like op asks. */
static int parents_make(int root, const char *dir, const struct init_file_op *op) {
        char prefix[CTL_PATH_MAX];
        size_t len = strlen(dir);
        if (len >= sizeof(prefix))
                return -ENAMETOOLONG;
        memcpy(prefix, dir, len + 1);
        for (size_t i = 0; i < len;) {
                while (i < len && prefix[i] == '/')
                        i++;
                if (i >= len)
                        break;
                size_t n = strcspn(prefix + i, "/");
                char saved = prefix[i + n];
                prefix[i + n] = 0;
                int fd = resolve(root, prefix, O_PATH | O_DIRECTORY, 0);
                if (fd == -ENOENT) {
                        /* its parent: the prefix before this component */
                        char c = prefix[i];
                        prefix[i] = 0;
                        int p = resolve(root, i ? prefix : "/", O_PATH | O_DIRECTORY, 0);
                        prefix[i] = c;
                        if (p < 0)
                                return p;
                        int r = mkdir_owned(p, prefix + i, 0755, op->flags & CTL_FOP_OWNER, op->uid,
                                            op->gid);
                        close(p);
                        if (r < 0 && r != -EEXIST)
                                return r;
                        fd = resolve(root, prefix, O_PATH | O_DIRECTORY, 0);
                }
                if (fd < 0)
                        return fd;
                close(fd);
                prefix[i + n] = saved;
                i += n;
        }
        return 0;
}

static int do_mkdir(int root, const struct init_file_op *op) {
        char buf[FOP_BUF];
        const char *leaf;
        int r = split(op->path, buf, &leaf);
        if (r < 0)
                return r;
        if ((op->flags & CTL_FOP_PARENTS) && (r = parents_make(root, buf, op)) < 0)
                return r;
        int d = resolve(root, buf, O_PATH | O_DIRECTORY, 0);
        if (d < 0)
                return d;
        r = mkdir_owned(d, leaf, op->mode, op->flags & CTL_FOP_OWNER, op->uid, op->gid);
        if (r == -EEXIST && (op->flags & CTL_FOP_PARENTS)) {
                /* a directory there (or a symlink to one inside the root,
                 * as the lookup of a parent takes it): done; a dangling
                 * symlink or a file: that lookup's error */
                int x = resolve(root, op->path, O_PATH | O_DIRECTORY, 0);
                r = x < 0 ? x : 0;
                if (x >= 0)
                        close(x);
        }
        close(d);
        return r;
}

static int do_remove(int root, const struct init_file_op *op) {
        char buf[FOP_BUF];
        const char *leaf;
        int d = parent_open(root, op->path, buf, &leaf);
        if (d < 0)
                return d;
        struct stat st;
        int r = 0;
        if (fstatat(d, leaf, &st, AT_SYMLINK_NOFOLLOW) < 0)
                r = -errno;
        else if (unlinkat(d, leaf, S_ISDIR(st.st_mode) ? AT_REMOVEDIR : 0) < 0)
                r = -errno;
        if ((r == -ENOTEMPTY || r == -EEXIST) && (op->flags & CTL_FOP_RECURSIVE))
                r = rm_rf_at(d, leaf);
        close(d);
        return r == -EEXIST ? -ENOTEMPTY : r;
}

static int do_rename(int root, const struct init_file_op *op) {
        char fbuf[FOP_BUF], tbuf[FOP_BUF];
        const char *fleaf, *tleaf;
        int fd = parent_open(root, op->path, fbuf, &fleaf);
        if (fd < 0)
                return fd;
        int td = parent_open(root, op->path2, tbuf, &tleaf);
        if (td < 0) {
                close(fd);
                return td;
        }
        int r = 0;
        struct stat st;
        if (op->flags & CTL_FOP_EXPECT) {
                if (fstatat(fd, fleaf, &st, AT_SYMLINK_NOFOLLOW) < 0)
                        r = -errno;
                else if ((uint64_t) st.st_dev != op->dev || (uint64_t) st.st_ino != op->ino)
                        r = -ESTALE;
        }
        if (r == 0 && (op->flags & CTL_FOP_CHMOD)) {
                /* a regular file (never a symlink's target): its inode */
                int f = child(fd, fleaf, O_PATH);
                struct stat fst;
                char p[64];
                if (f < 0)
                        r = f;
                else if (fstat(f, &fst) < 0)
                        r = -errno;
                else if (!S_ISREG(fst.st_mode) ||
                         ((op->flags & CTL_FOP_EXPECT) &&
                          ((uint64_t) fst.st_dev != op->dev || (uint64_t) fst.st_ino != op->ino)))
                        r = S_ISREG(fst.st_mode) ? -ESTALE : -EINVAL;
                else if (syscall(SYS_fchmodat2, f, "", op->mode, AT_EMPTY_PATH) < 0) {
                        /* fchmodat2 (Linux 6.6) takes the O_PATH fd itself;
                         * before it, through /proc */
                        r = -errno;
                        if (r == -ENOSYS && snprintf(p, sizeof(p), "/proc/self/fd/%d", f) > 0)
                                r = chmod(p, op->mode) < 0 ? -errno : 0;
                }
                if (f >= 0)
                        close(f);
        }
        if (r == 0 && syscall(SYS_renameat2, fd, fleaf, td, tleaf,
                              (op->flags & CTL_FOP_NOREPLACE) ? RENAME_NOREPLACE : 0) < 0)
                r = -errno;
        close(fd);
        close(td);
        return r;
}

static int do_symlink(int root, const struct init_file_op *op) {
        char buf[FOP_BUF];
        const char *leaf;
        int d = parent_open(root, op->path, buf, &leaf);
        if (d < 0)
                return d;
        int r = 0;
        if (symlinkat(op->path2, d, leaf) < 0)
                r = -errno;
        else if ((op->flags & CTL_FOP_OWNER) &&
                 fchownat(d, leaf, op->uid, op->gid, AT_SYMLINK_NOFOLLOW) < 0) {
                r = -errno;
                (void) unlinkat(d, leaf, 0);
        }
        close(d);
        return r;
}

int init_fop_do(int root, uint32_t type, const struct init_file_op *op) {
        switch (type) {
        case CTL_FILE_MKDIR:
                return do_mkdir(root, op);
        case CTL_FILE_REMOVE:
                return do_remove(root, op);
        case CTL_FILE_RENAME:
                return do_rename(root, op);
        case CTL_FILE_SYMLINK:
                return do_symlink(root, op);
        default:
                return -EOPNOTSUPP;
        }
}

/* Write all of buf to fd. */
static int write_all(int fd, const void *buf, size_t n) {
        const char *b = buf;
        while (n > 0) {
                ssize_t k = write(fd, b, n);
                if (k < 0 && errno == EINTR)
                        continue;
                if (k < 0)
                        return -errno;
                b += k;
                n -= (size_t) k;
        }
        return 0;
}

#define LIST_BUF (64u * 1024)

int init_fop_list(int root, const struct init_file_op *op, struct ctl_file_listed *ret,
                  int *ret_memfd) {
        *ret = (struct ctl_file_listed){0};
        int fd = resolve(root, op->path,
                         O_RDONLY | O_DIRECTORY | ((op->flags & CTL_FOP_NOFOLLOW) ? O_NOFOLLOW : 0),
                         0);
        if (fd < 0)
                return fd;
        struct statfs sf;
        if (fstatfs(fd, &sf) < 0) {
                int r = -errno;
                close(fd);
                return r;
        }
        int mfd = memfd_create("warren-list", MFD_CLOEXEC | MFD_ALLOW_SEALING);
        char *out = malloc(LIST_BUF);
        int dup_fd = fcntl(fd, F_DUPFD_CLOEXEC, 3);
        DIR *dir = dup_fd >= 0 ? fdopendir(dup_fd) : NULL;
        int r = mfd < 0 ? -errno : !out || !dir ? -ENOMEM : 0;
        if (!dir && dup_fd >= 0)
                close(dup_fd);
        size_t used = 0;
        uint32_t count = 0;
        struct dirent *de;
        while (r == 0 && (de = readdir(dir))) {
                const char *name = de->d_name;
                if (strcmp(name, ".") == 0 || strcmp(name, "..") == 0)
                        continue;
                size_t nl = strlen(name);
                struct stat st;
                if (nl > CTL_FILE_NAME_MAX || fstatat(fd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
                        continue; /* gone meanwhile */
                if (count == CTL_FILE_LIST_MAX) {
                        ret->truncated = 1;
                        break;
                }
                char link[CTL_PATH_MAX];
                ssize_t ll = 0;
                if (S_ISLNK(st.st_mode) && (ll = readlinkat(fd, name, link, sizeof(link) - 1)) < 0)
                        ll = 0;
                struct ctl_file_entry e = {
                        .mode = st.st_mode,
                        .uid = st.st_uid,
                        .gid = st.st_gid,
                        .name_len = (uint16_t) nl,
                        .link_len = (uint16_t) ll,
                        .size = (uint64_t) st.st_size,
                        .mtime_ns = (int64_t) st.st_mtim.tv_sec * 1000000000LL + st.st_mtim.tv_nsec,
                };
                size_t need = sizeof(e) + nl + (size_t) ll;
                if (used + need > LIST_BUF) {
                        if ((r = write_all(mfd, out, used)) < 0)
                                break;
                        used = 0;
                }
                memcpy(out + used, &e, sizeof(e));
                memcpy(out + used + sizeof(e), name, nl);
                memcpy(out + used + sizeof(e) + nl, link, (size_t) ll);
                used += need;
                count++;
        }
        if (r == 0 && used)
                r = write_all(mfd, out, used);
        if (r == 0 &&
            fcntl(mfd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_SEAL) < 0)
                r = -errno;
        if (dir)
                closedir(dir);
        free(out);
        close(fd);
        if (r < 0) {
                if (mfd >= 0)
                        close(mfd);
                *ret = (struct ctl_file_listed){0};
                return r;
        }
        ret->count = count;
        ret->fs_type = (uint64_t) sf.f_type;
        *ret_memfd = mfd;
        return 0;
}
