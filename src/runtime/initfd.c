/* SPDX-License-Identifier: Apache-2.0 */
/* warren-init as a sealed memfd: the sandbox executes a copy that nobody can
 * write (F_SEAL_WRITE|SHRINK|GROW|SEAL), never the host file, so a workload
 * that opens /proc/1/exe for writing (CVE-2019-5736 style) gets EPERM and
 * the next sandbox is unaffected. Loaded once per process per path. */

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/sendfile.h>
#include <sys/stat.h>
#include <unistd.h>

#include "runtime/runtime-internal.h"

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static int cached_fd = -EBADF;
static char cached_path[PATH_MAX];
static struct stat cached_st;

static int load(const char *path, struct stat *ret_st, struct wr_err *e) {
        _cleanup_close_ int src = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
        if (src < 0)
                return err_set(e, -errno, "open init %s: %m", path);
        struct stat st;
        if (fstat(src, &st) < 0)
                return err_set(e, -errno, "stat init %s: %m", path);
        if (!S_ISREG(st.st_mode) || !(st.st_mode & 0111))
                return err_set(e, -EACCES, "init %s is not an executable file", path);
        if (st.st_size <= 0 || st.st_size > (256 << 20))
                return err_set(e, -EFBIG, "init %s has an unreasonable size", path);

        _cleanup_close_ int fd =
                memfd_create("warren-init", MFD_CLOEXEC | MFD_ALLOW_SEALING | MFD_EXEC);
        if (fd < 0 && errno == EINVAL) /* kernels before 6.3 know no MFD_EXEC */
                fd = memfd_create("warren-init", MFD_CLOEXEC | MFD_ALLOW_SEALING);
        if (fd < 0)
                return err_set(e, -errno, "memfd_create: %m");
        off_t off = 0;
        while (off < st.st_size) {
                ssize_t n = sendfile(fd, src, &off, (size_t) (st.st_size - off));
                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0)
                        return err_set(e, -errno, "copy init into memfd: %m");
                if (n == 0)
                        return err_set(e, -EIO, "init %s shrank while copying", path);
        }
        if (fchmod(fd, 0555) < 0)
                return err_set(e, -errno, "chmod memfd: %m");
        if (fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_SEAL) < 0)
                return err_set(e, -errno, "seal memfd: %m");
        *ret_st = st;
        return TAKE_FD(fd);
}

int rt_init_memfd(const char *path, struct wr_err *e) {
        struct stat st;
        int r;
        if (!path || !path[0])
                return err_set(e, -EINVAL, "no init path");
        pthread_mutex_lock(&lock);
        /* reuse the cache while the file is unchanged (rebuilt binaries in
         * tests and upgrades are picked up) */
        if (cached_fd >= 0 && streq(cached_path, path) && stat(path, &st) == 0 &&
            st.st_ino == cached_st.st_ino && st.st_dev == cached_st.st_dev &&
            st.st_mtim.tv_sec == cached_st.st_mtim.tv_sec &&
            st.st_mtim.tv_nsec == cached_st.st_mtim.tv_nsec && st.st_size == cached_st.st_size) {
                r = cached_fd;
                goto out;
        }
        r = load(path, &st, e);
        if (r < 0)
                goto out;
        /* the old fd may still be in use by a concurrent create in another
         * thread: keep it (leaks one fd per binary change, bounded) */
        cached_fd = r;
        snprintf(cached_path, sizeof(cached_path), "%s", path);
        cached_st = st;
out:
        pthread_mutex_unlock(&lock);
        return r;
}
