/* SPDX-License-Identifier: Apache-2.0 */
/* The one tree remover: sandbox teardown, image stores and warren-unpack
 * all remove trees that untrusted code or input shaped. */
#include "basic/rmrf.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Removing a tree a sandbox or a hostile tar built: any depth and width, with a
 * constant number of fds (one directory open at a time), never following
 * symlinks, never descending into another mount. The walk goes down into
 * the first non-empty subdirectory and back up through ".." once a
 * directory is empty; each step up checks that ".." is the directory it
 * came from (dev/ino kept on a heap stack), so a tree moved under our feet
 * ends the walk (-EBUSY) instead of deleting elsewhere. */

struct rm_frame {
        dev_t dev;
        ino_t ino;
};

/* Delete the entries of the open directory fd: files go, empty
 * subdirectories go, the first non-empty one is returned in *down (an
 * O_DIRECTORY fd, its identity in *st). 0: nothing left to descend into
 * (the dir may still hold what could not be removed: *err says why). */
static int rm_scan(int fd, dev_t dev, int *down, struct stat *st, int *err) {
        *down = -EBADF;
        int dup_fd = fcntl(fd, F_DUPFD_CLOEXEC, 3);
        if (dup_fd < 0)
                return -errno;
        DIR *d = fdopendir(dup_fd);
        if (!d) {
                close(dup_fd);
                return -errno;
        }
        rewinddir(d);
        struct dirent *de;
        int r = 0;
        while ((de = readdir(d))) {
                if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
                        continue;
                struct stat est;
                if (fstatat(fd, de->d_name, &est, AT_SYMLINK_NOFOLLOW) < 0) {
                        if (errno != ENOENT && *err == 0)
                                *err = -errno;
                        continue;
                }
                if (!S_ISDIR(est.st_mode)) {
                        if (unlinkat(fd, de->d_name, 0) < 0 && errno != ENOENT && *err == 0)
                                *err = -errno;
                        continue;
                }
                if (est.st_dev != dev) {
                        if (*err == 0)
                                *err = -EBUSY; /* a mount point: never descend */
                        continue;
                }
                if (unlinkat(fd, de->d_name, AT_REMOVEDIR) == 0 || errno == ENOENT)
                        continue;
                if (errno != ENOTEMPTY && errno != EEXIST && errno != EACCES && errno != EPERM) {
                        if (*err == 0)
                                *err = -errno;
                        continue;
                }
                int cfd = openat(fd, de->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                if (cfd < 0) {
                        if (errno != ENOENT && *err == 0)
                                *err = -errno;
                        continue;
                }
                if (fstat(cfd, st) < 0 || st->st_ino != est.st_ino || st->st_dev != est.st_dev) {
                        close(cfd);
                        if (*err == 0)
                                *err = -EBUSY; /* replaced or mounted over under our feet */
                        continue;
                }
                /* the overlayfs workdir's "work" subdir is mode 000: fix up */
                if ((st->st_mode & 0700) != 0700)
                        (void) fchmod(cfd, (st->st_mode & 07777) | 0700);
                *down = cfd;
                r = 1;
                break;
        }
        closedir(d);
        return r;
}

/* Empty the directory fd (not removed itself). */
static int rm_tree(int fd, const struct stat *top) {
        size_t cap = 64, depth = 0;
        struct rm_frame *stack = malloc(cap * sizeof(*stack));
        if (!stack)
                return -ENOMEM;
        int cur = fcntl(fd, F_DUPFD_CLOEXEC, 3);
        if (cur < 0) {
                free(stack);
                return -errno;
        }
        stack[0] = (struct rm_frame){top->st_dev, top->st_ino};
        int err = 0, r = 0;
        for (;;) {
                int down;
                struct stat st;
                int s = rm_scan(cur, top->st_dev, &down, &st, &err);
                if (s < 0) {
                        r = s;
                        break;
                }
                if (s == 1) {
                        if (depth + 1 == cap) {
                                struct rm_frame *ns = reallocarray(stack, cap * 2, sizeof(*stack));
                                if (!ns) {
                                        close(down);
                                        r = -ENOMEM;
                                        break;
                                }
                                stack = ns;
                                cap *= 2;
                        }
                        stack[++depth] = (struct rm_frame){st.st_dev, st.st_ino};
                        close(cur);
                        cur = down;
                        continue;
                }
                if (depth == 0)
                        break; /* the top is as empty as it gets */
                /* back up: the parent must be the one we came from */
                int up = openat(cur, "..", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                struct stat ust;
                if (up < 0 || fstat(up, &ust) < 0 || ust.st_dev != stack[depth - 1].dev ||
                    ust.st_ino != stack[depth - 1].ino) {
                        if (up >= 0)
                                close(up);
                        r = -EBUSY;
                        break;
                }
                close(cur);
                cur = up;
                depth--;
                /* a child that could not be emptied stays; do not loop on
                 * it forever: one failure ends the walk */
                if (err < 0) {
                        r = err;
                        break;
                }
        }
        close(cur);
        free(stack);
        return r < 0 ? r : err;
}

static int rm_entry(int dirfd, const char *name, dev_t dev) {
        struct stat st;
        if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
                return errno == ENOENT ? 0 : -errno;
        if (!S_ISDIR(st.st_mode))
                return unlinkat(dirfd, name, 0) < 0 && errno != ENOENT ? -errno : 0;
        if (st.st_dev != dev)
                return -EBUSY; /* a mount point: never descend */
        int fd = openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0)
                return errno == ENOENT ? 0 : -errno;
        struct stat st2;
        if (fstat(fd, &st2) < 0 || st2.st_ino != st.st_ino || st2.st_dev != st.st_dev) {
                close(fd);
                return -EBUSY; /* replaced or mounted over under our feet */
        }
        if ((st.st_mode & 0700) != 0700)
                (void) fchmod(fd, (st.st_mode & 07777) | 0700);
        int r = rm_tree(fd, &st2);
        close(fd);
        if (r < 0)
                return r;
        return unlinkat(dirfd, name, AT_REMOVEDIR) < 0 && errno != ENOENT ? -errno : 0;
}

int rm_rf_at(int dirfd, const char *name) {
        struct stat st;
        if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
                return errno == ENOENT ? 0 : -errno;
        return rm_entry(dirfd, name, st.st_dev);
}
