/* SPDX-License-Identifier: Apache-2.0 */
/* warren-priv, phase 4b: the upper-dir reader (docs/privsep.md "Phase 4,
 * the upper-dir reader"). UPPER_PACK: the target checked as SANDBOX_SIGNAL's,
 * its upper dir opened here (below the state dir; its disk image's
 * mounted when it has one), then a short-lived warren-upper (upper-main.c)
 * joins the sandbox's user namespace and packs the tree into the spool
 * warrend passed. What runs here with root: the open of the upper dir,
 * the fork and exec, and one fgetxattr(trusted.overlay.opaque) per
 * directory warren-upper hands back (checked to be a directory of the
 * same file system first). */
#include "priv/priv-internal.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "basic/log.h"
#include "basic/macro.h"

static char upper_path[PATH_MAX]; /* warren-upper, next to this executable */

int priv_upper_init(void) {
        char self[PATH_MAX];
        ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
        if (n <= 0)
                return -errno;
        self[n] = 0;
        char *slash = strrchr(self, '/');
        if (!slash)
                return -EINVAL;
        *slash = 0;
        snprintf(upper_path, sizeof(upper_path), "%s/warren-upper", self);
        if (access(upper_path, X_OK) < 0) {
                log_warn("warren-priv: %s: %m (UPPER_PACK will fail)", upper_path);
                return -errno;
        }
        return 0;
}

static int fail(struct priv_result *res, int r, const char *fmt, ...)
        __attribute__((format(printf, 3, 4)));
static int fail(struct priv_result *res, int r, const char *fmt, ...) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(res->msg, sizeof(res->msg), fmt, ap);
        va_end(ap);
        res->err = r < 0 ? -r : EIO;
        return r;
}

/* In the child, before exec: only async-signal-safe calls. fds[0..4)
 * become 3..6, every other fd is closed. */
static void child_exec(const int fds[4]) {
        int high[4];
        for (int i = 0; i < 4; i++)
                if ((high[i] = fcntl(fds[i], F_DUPFD, 16)) < 0)
                        _exit(127);
        for (int i = 0; i < 4; i++)
                if (dup2(high[i], 3 + i) < 0)
                        _exit(127);
        (void) syscall(SYS_close_range, 7, ~0u, 0);
        sigset_t all;
        sigemptyset(&all);
        (void) sigprocmask(SIG_SETMASK, &all, NULL);
        char *argv[] = {"warren-upper", NULL};
        char *envp[] = {NULL};
        execve(upper_path, argv, envp);
        _exit(127);
}

/* Answer warren-upper's questions until its DONE; *done filled. */
static int converse(int sock, dev_t dev, struct priv_upper_msg *done, struct priv_result *res) {
        for (;;) {
                uint8_t buf[sizeof(struct priv_upper_msg) + 1];
                int fds[PRIV_FDS_MAX];
                size_t n_fds = 0;
                long n = priv_recv(sock, buf, sizeof(buf), fds, &n_fds, 0);
                if (n <= 0)
                        return fail(res, n < 0 ? (int) n : -EIO,
                                    "warren-upper ended without an answer%s%s", n < 0 ? ": " : "",
                                    n < 0 ? strerror((int) -n) : "");
                struct priv_upper_msg m;
                struct wr_err e = {0};
                int r = priv_upper_msg_decode(buf, (size_t) n, n_fds, &m, &e);
                if (r < 0) {
                        priv_close_fds(fds, n_fds);
                        return fail(res, -EPROTO, "refused from warren-upper: %s", e.msg);
                }
                if (m.kind == PRIV_UPPER_Q_DONE) {
                        *done = m;
                        return 0;
                }
                /* OPAQUE: a directory of the upper dir's file system, the
                 * one xattr read, nothing else */
                struct stat st;
                unsigned char a = 0;
                char v[2];
                if (fstat(fds[0], &st) < 0 || !S_ISDIR(st.st_mode) || st.st_dev != dev) {
                        close(fds[0]);
                        return fail(res, -EPROTO,
                                    "refused from warren-upper: an fd that is not a directory of "
                                    "the upper dir's file system");
                }
                a = fgetxattr(fds[0], "trusted.overlay.opaque", v, sizeof(v)) == 1 && v[0] == 'y';
                close(fds[0]);
                if (send(sock, &a, 1, MSG_NOSIGNAL) != 1)
                        return fail(res, -errno, "warren-upper: answer: %m");
        }
}

int priv_upper_run(const struct priv_req *req, int *fds, size_t n_fds, struct priv_result *res,
                   struct priv_upper_packed *out) {
        const struct priv_upper_pack *u = &req->upper_pack;
        _cleanup_close_ int spool = n_fds == 1 ? fds[0] : -EBADF;
        _cleanup_close_ int pidfd = -EBADF, dirfd = -EBADF, upper = -EBADF, disk = -EBADF;
        struct stat st;
        int fl = fcntl(spool, F_GETFL);
        if (fstat(spool, &st) < 0 || !S_ISREG(st.st_mode) || fl < 0 || (fl & O_ACCMODE) == O_RDONLY)
                return fail(res, -EBADF,
                            "UPPER_PACK: the spool is not a regular file open for "
                            "writing");
        /* the target, checked; its pidfd is all the helper needs of it */
        struct rt_sandbox *sb = NULL;
        int slot;
        if (priv_target_get(&u->t, &sb, &slot, res) < 0)
                return -res->err;
        int pf = rt_sandbox_pidfd(sb);
        pidfd = pf >= 0 ? fcntl(pf, F_DUPFD_CLOEXEC, 3) : -ESRCH;
        priv_target_put(sb, slot);
        if (pidfd < 0)
                return fail(res, -ESRCH, "sandbox %s is gone", u->t.id);
        char dir[PRIV_PATH_MAX];
        snprintf(dir, sizeof(dir), "%s/%s", PRIV_ROOT_SANDBOXES, u->t.id);
        struct wr_err e = {0};
        if ((dirfd = priv_open_beneath(dir, O_RDONLY)) < 0)
                return fail(res, dirfd, "open %s: %s", dir, strerror(-dirfd));
        disk = -1;
        if ((upper = rt_upper_open_at(dirfd, dir, &disk, &e)) < 0)
                return fail(res, upper, "%s", e.msg);
        struct stat ust;
        if (fstat(upper, &ust) < 0)
                return fail(res, -errno, "stat the upper dir of %s: %m", dir);
        int sp[2];
        if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sp) < 0)
                return fail(res, -errno, "UPPER_PACK: socketpair: %m");
        pid_t pid = fork();
        if (pid == 0) {
                int cfds[4] = {upper, pidfd, spool, sp[1]};
                child_exec(cfds);
        }
        close(sp[1]);
        if (pid < 0) {
                close(sp[0]);
                return fail(res, -errno, "UPPER_PACK: fork: %m");
        }
        struct priv_upper_msg done = {0};
        int r = converse(sp[0], ust.st_dev, &done, res);
        close(sp[0]);
        if (r < 0)
                (void) kill(pid, SIGKILL);
        int status = 0;
        while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
                ;
        if (r < 0)
                return r;
        if (done.err)
                return fail(res, -done.err, "warren-upper: %s", done.msg);
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
                return fail(res, -EIO, "warren-upper: exit status 0x%x", status);
        *out = (struct priv_upper_packed){.entries = done.entries,
                                          .bytes = done.bytes,
                                          .whiteouts = done.whiteouts,
                                          .opaque = done.opaque,
                                          .skipped = done.skipped};
        return 0;
}
