/* SPDX-License-Identifier: Apache-2.0 */
/* Pure helpers of the runtime: ids, sizes, paths, safe recursive removal. */

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "runtime/runtime-internal.h"

bool rt_id_valid(const char *id) {
        if (!id || !id[0])
                return false;
        size_t n = strlen(id);
        if (n > 64)
                return false;
        for (size_t i = 0; i < n; i++) {
                char ch = id[i];
                bool alnum = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
                             (ch >= '0' && ch <= '9');
                if (!alnum && (i == 0 || (ch != '-' && ch != '_' && ch != '.')))
                        return false;
        }
        return true;
}

int rt_memory_parse(const char *s, uint64_t *ret) {
        if (!s || !*s || *s < '0' || *s > '9')
                return -EINVAL;
        char *end;
        errno = 0;
        unsigned long long v = strtoull(s, &end, 10);
        if (errno == ERANGE)
                return -ERANGE;
        unsigned shift = 0;
        switch (*end) {
        case 0:
                break;
        case 'k':
        case 'K':
                shift = 10;
                end++;
                break;
        case 'm':
        case 'M':
                shift = 20;
                end++;
                break;
        case 'g':
        case 'G':
                shift = 30;
                end++;
                break;
        case 't':
        case 'T':
                shift = 40;
                end++;
                break;
        case 'b':
        case 'B':
                break;
        default:
                return -EINVAL;
        }
        if (shift && *end == 'i')
                end++;
        if ((*end == 'B' || *end == 'b') && (shift || end[1] == 0))
                end++;
        if (*end)
                return -EINVAL;
        if (v == 0)
                return -ERANGE;
        if (shift && v > (UINT64_MAX >> shift))
                return -ERANGE;
        *ret = (uint64_t) v << shift;
        return 0;
}

int rt_cpu_parse(const char *s, uint32_t *ret_millicores) {
        if (!s || !*s || *s < '0' || *s > '9')
                return -EINVAL;
        size_t n = strlen(s);
        uint64_t v = 0;
        if (s[n - 1] == 'm') {
                for (size_t i = 0; i + 1 < n; i++) {
                        if (s[i] < '0' || s[i] > '9')
                                return -EINVAL;
                        v = v * 10 + (uint64_t) (s[i] - '0');
                        if (v > 1000000000ULL)
                                return -ERANGE;
                }
        } else {
                const char *p = s;
                while (*p >= '0' && *p <= '9') {
                        v = v * 10 + (uint64_t) (*p++ - '0');
                        if (v > 1000000ULL)
                                return -ERANGE;
                }
                v *= 1000;
                if (*p == '.') {
                        p++;
                        unsigned scale = 100, digits = 0;
                        if (*p < '0' || *p > '9')
                                return -EINVAL;
                        while (*p >= '0' && *p <= '9') {
                                if (++digits > 3)
                                        return -EINVAL;
                                v += (uint64_t) (*p++ - '0') * scale;
                                scale /= 10;
                        }
                }
                if (*p)
                        return -EINVAL;
        }
        if (v == 0 || v > 1000000000ULL)
                return -ERANGE;
        *ret_millicores = (uint32_t) v;
        return 0;
}

int rt_overlay_escape(const char *path, char *buf, size_t size) {
        size_t o = 0;
        for (const char *p = path; *p; p++) {
                bool esc = *p == '\\' || *p == ':' || *p == ',';
                if (o + (esc ? 2 : 1) >= size)
                        return -ENAMETOOLONG;
                if (esc)
                        buf[o++] = '\\';
                buf[o++] = *p;
        }
        if (o >= size)
                return -ENAMETOOLONG;
        buf[o] = 0;
        return (int) o;
}

bool rt_target_valid(const char *p) {
        if (!p || p[0] != '/' || strlen(p) >= PATH_MAX)
                return false;
        const char *c = p + 1;
        for (;;) {
                const char *slash = strchr(c, '/');
                size_t len = slash ? (size_t) (slash - c) : strlen(c);
                if (len == 0)
                        return false; /* "//", trailing '/', or "/" */
                if ((len == 1 && c[0] == '.') || (len == 2 && c[0] == '.' && c[1] == '.'))
                        return false;
                if (!slash)
                        return true;
                c = slash + 1;
        }
}

/* Removing a tree the sandbox built: any depth and width, with a
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
                if (streq(de->d_name, ".") || streq(de->d_name, ".."))
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

int rt_rm_rf_at(int dirfd, const char *name) {
        struct stat st;
        if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
                return errno == ENOENT ? 0 : -errno;
        return rm_entry(dirfd, name, st.st_dev);
}
