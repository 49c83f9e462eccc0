/* SPDX-License-Identifier: Apache-2.0 */
/* sbx_fs_open (files.h): the one part of the file API that touches the
 * live sandboxes: a running sandbox's root fd, user and working dir, taken
 * on the loop. The operations themselves (files.c) work on that fd alone,
 * so they are unit tested and fuzzed on a plain directory. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "basic/macro.h"
#include "sandbox/files.h"
#include "sandbox/sandbox-internal.h"

/* ---- the sandbox (loop thread) ---- */

int sbx_root_fd(struct sbx *sb) {
        pid_t pid = sb->rt ? rt_sandbox_pid(sb->rt) : 0;
        if (pid <= 0 || sb->pidfd < 0)
                return -ESRCH;
        char path[64];
        snprintf(path, sizeof(path), "/proc/%d/root", (int) pid);
        _cleanup_close_ int fd = open(path, O_PATH | O_DIRECTORY | O_CLOEXEC);
        if (fd < 0)
                return -errno;
        if (syscall(SYS_pidfd_send_signal, sb->pidfd, 0, NULL, 0) < 0)
                return -ESRCH;
        return TAKE_FD(fd);
}

int sbx_fs_open(struct sbx_manager *m, const char *key, struct sbx_fs *ret, struct wr_err *e) {
        *ret = (struct sbx_fs){.root_fd = -EBADF, .pidfd = -EBADF};
        struct sbx *sb;
        int r = sbx_running(m, key, &sb, e);
        if (r < 0)
                return r;
        int fd = sbx_root_fd(sb);
        if (fd < 0)
                return err_setx(e, fd, WR_STATUS_FAILED_PRECONDITION, WR_FAULT_CLIENT,
                                "sandbox %s is not running (create a new one)", sb->id);
        ret->workdir = strdup(sb->workdir && *sb->workdir ? sb->workdir : "/");
        if (!ret->workdir) {
                close(fd);
                return err_set(e, -ENOMEM, "out of memory");
        }
        ret->root_fd = fd;
        ret->pidfd = fcntl(sb->pidfd, F_DUPFD_CLOEXEC, 3);
        if (ret->pidfd < 0) {
                r = -errno;
                sbx_fs_clear(ret);
                return err_set(e, r, "dup init's pidfd: %s", strerror(-r));
        }
        snprintf(ret->id, sizeof(ret->id), "%s", sb->id);
        ret->uid = sb->uid;
        ret->gid = sb->gid;
        if (sb->uid_slot >= 0) {
                ret->id_base = sbx_uids_base(sb->uid_slot);
                ret->id_count = SBX_UIDS_COUNT;
        }
        return 0;
}
