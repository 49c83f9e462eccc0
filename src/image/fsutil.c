/* SPDX-License-Identifier: Apache-2.0 */
/* dirfd-based file system helpers for trees that hostile tars produced:
 * nothing here follows a symlink found in such a tree. */
#include "image/image-internal.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

void img_random_name(char *buf) {
        uint8_t b[8];
        if (getrandom(b, sizeof(b), 0) != (ssize_t) sizeof(b)) {
                /* getrandom on Linux >= 3.17 does not fail for 8 bytes */
                struct timespec ts;
                clock_gettime(CLOCK_MONOTONIC, &ts);
                uint64_t v = (uint64_t) ts.tv_nsec ^ ((uint64_t) getpid() << 32);
                memcpy(b, &v, sizeof(b));
        }
        for (size_t i = 0; i < sizeof(b); i++)
                snprintf(buf + 2 * i, 3, "%02x", b[i]);
}

int img_rootfs_root_ssh(int root_fd) {
        struct open_how how = {
                .flags = O_PATH | O_CLOEXEC,
                .resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV,
        };
        int fd = (int) syscall(SYS_openat2, root_fd, "root/.ssh", &how, sizeof(how));
        if (fd >= 0) {
                close(fd);
                return 1;
        }
        /* ENOENT/ENOTDIR: absent. Anything odd (ELOOP...) counts as present:
         * refusing is the safe answer; EACCES is told apart for the caller */
        if (errno == EACCES)
                return -EACCES;
        return errno != ENOENT && errno != ENOTDIR;
}

bool img_rootfs_has_root_ssh(int root_fd) {
        return img_rootfs_root_ssh(root_fd) != 0;
}

int img_mkdir_p(const char *path, mode_t mode) {
        char buf[4096];
        if (!path || path[0] != '/' || strlen(path) >= sizeof(buf))
                return -EINVAL;
        strcpy(buf, path);
        for (char *p = buf + 1;; p++) {
                if (*p == '/' || *p == '\0') {
                        char c = *p;
                        *p = '\0';
                        if (mkdir(buf, mode) < 0 && errno != EEXIST)
                                return -errno;
                        *p = c;
                        if (c == '\0')
                                break;
                }
        }
        struct stat st;
        if (stat(path, &st) < 0)
                return -errno;
        return S_ISDIR(st.st_mode) ? 0 : -ENOTDIR;
}
