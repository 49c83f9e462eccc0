/* SPDX-License-Identifier: Apache-2.0 */
/* Sealed memfds for helper processes (memfd.h). */
#include "basic/memfd.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include "basic/macro.h"

int memfd_sealed(const char *name, const char *what, const struct iovec *iov, size_t n, int *ret_fd,
                 struct wr_err *e) {
        _cleanup_close_ int fd = memfd_create(name, MFD_CLOEXEC | MFD_ALLOW_SEALING);
        if (fd < 0)
                return err_set(e, -errno, "%s: memfd_create: %m", what);
        for (size_t i = 0; i < n; i++) {
                const char *p = iov[i].iov_base;
                size_t left = iov[i].iov_len;
                while (left > 0) {
                        ssize_t k = RETRY_EINTR(write(fd, p, left));
                        if (k <= 0)
                                return err_set(e, k < 0 ? -errno : -EIO, "%s: write the memfd: %m",
                                               what);
                        p += k;
                        left -= (size_t) k;
                }
        }
        if (fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_SEAL) < 0 ||
            lseek(fd, 0, SEEK_SET) != 0)
                return err_set(e, -errno, "%s: seal the memfd: %m", what);
        *ret_fd = TAKE_FD(fd);
        return 0;
}
