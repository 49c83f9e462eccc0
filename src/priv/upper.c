/* SPDX-License-Identifier: Apache-2.0 */
/* warren-priv, phase 4b: the upper-dir reader (docs/privsep.md "Phase 4,
 * the upper-dir reader"). UPPER_PACK: the target checked as SANDBOX_SIGNAL's,
 * its upper dir opened here (below the state dir; its disk image's
 * mounted when it has one), then a short-lived warren-upper (upper-main.c)
 * joins the sandbox's user namespace and packs the tree into the spool
 * warrend passed. What runs here with root: the open of the upper dir,
 * the spawn of warren-upper, and one fgetxattr(trusted.overlay.opaque) per
 * directory warren-upper hands back (checked to be a directory of the
 * same file system first). */
#include "priv/priv-internal.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <pthread.h>
#include <stdlib.h>
#include <time.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "basic/log.h"
#include "basic/macro.h"

static char upper_path[PATH_MAX];

static double now_ms(void) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (double) ts.tv_sec * 1e3 + (double) ts.tv_nsec / 1e6;
} /* warren-upper, next to this executable */

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

/* Start warren-upper (argv[1] = mode, or none) with fds[0..n) as its
 * 3..3+n and nothing else open (posix_spawn: CLONE_VM | CLONE_VFORK, no
 * copy of this process's page tables; an empty signal mask and default
 * handlers). Its pid or <0. */
static pid_t spawn_upper(const int *fds, int n, const char *mode) {
        int high[8] = {-1, -1, -1, -1, -1, -1, -1, -1};
        pid_t pid = -1;
        int r = n <= 8 ? 0 : -EINVAL;
        for (int i = 0; i < n && r == 0; i++)
                if ((high[i] = fcntl(fds[i], F_DUPFD_CLOEXEC, 16)) < 0)
                        r = -errno;
        posix_spawn_file_actions_t fa;
        posix_spawnattr_t at;
        if (r == 0 && (r = -posix_spawn_file_actions_init(&fa)) == 0) {
                for (int i = 0; i < n && r == 0; i++)
                        r = -posix_spawn_file_actions_adddup2(&fa, high[i], 3 + i);
                if (r == 0)
                        r = -posix_spawn_file_actions_addclosefrom_np(&fa, 3 + n);
                if (r == 0 && (r = -posix_spawnattr_init(&at)) == 0) {
                        sigset_t none, all;
                        sigemptyset(&none);
                        sigfillset(&all);
                        (void) posix_spawnattr_setsigmask(&at, &none);
                        (void) posix_spawnattr_setsigdefault(&at, &all);
                        (void) posix_spawnattr_setflags(&at, POSIX_SPAWN_SETSIGMASK |
                                                                     POSIX_SPAWN_SETSIGDEF);
                        char *argv[] = {"warren-upper", (char *) mode, NULL};
                        char *envp[] = {NULL};
                        r = -posix_spawn(&pid, upper_path, &fa, &at, argv, envp);
                        posix_spawnattr_destroy(&at);
                }
                posix_spawn_file_actions_destroy(&fa);
        }
        for (int i = 0; i < n; i++)
                if (high[i] >= 0)
                        close(high[i]);
        return r < 0 ? r : pid;
}

/* Answer warren-upper's questions until its DONE; *done filled; *first:
 * when its first message came. done NULL (a session): until it closes
 * the socket (0), a DONE being refused. */
static int converse(int sock, dev_t dev, struct priv_upper_msg *done, struct priv_result *res,
                    double *first) {
        for (;;) {
                uint8_t buf[sizeof(struct priv_upper_msg) + 1];
                int fds[PRIV_FDS_MAX];
                size_t n_fds = 0;
                long n = priv_recv(sock, buf, sizeof(buf), fds, &n_fds, 0);
                if (*first == 0)
                        *first = now_ms();
                if (n == 0 && !done)
                        return 0;
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
                        if (!done)
                                return fail(res, -EPROTO,
                                            "refused from warren-upper: DONE in "
                                            "a session");
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

/* The target t, checked: a dup of its init's pidfd (all the helper needs
 * of it) and its upper dir: through the handle when warren-priv owns it
 * (its disk image's mount is kept there), else opened from the state dir
 * (a sandbox attached after a restart: its disk image found on its loop
 * device and mounted for this request; *dirfd and *disk hold what that
 * opened, the caller's to close). *ust: the upper dir's stat. */
static int open_target(const struct priv_target *t, int *pidfd, int *upper, int *dirfd, int *disk,
                       struct stat *ust, struct priv_result *res) {
        struct rt_sandbox *sb = NULL;
        int slot;
        struct wr_err e = {0};
        if (priv_target_get(t, &sb, &slot, res) < 0)
                return -res->err;
        int pf = rt_sandbox_pidfd(sb);
        *pidfd = pf >= 0 ? fcntl(pf, F_DUPFD_CLOEXEC, 3) : -ESRCH;
        if (*pidfd >= 0 && slot == PRIV_SLOT_OWNED)
                *upper = rt_sandbox_upper_open(sb, &e);
        priv_target_put(sb, slot);
        if (*pidfd < 0)
                return fail(res, -ESRCH, "sandbox %s is gone", t->id);
        if (*upper == -EBADF) {
                char dir[PRIV_PATH_MAX];
                snprintf(dir, sizeof(dir), "%s/%s", PRIV_ROOT_SANDBOXES, t->id);
                if ((*dirfd = priv_open_beneath(dir, O_RDONLY)) < 0)
                        return fail(res, *dirfd, "open %s: %s", dir, strerror(-*dirfd));
                *disk = -1;
                *upper = rt_upper_open_at(*dirfd, dir, disk, &e);
        }
        if (*upper < 0)
                return fail(res, *upper, "%s", e.msg);
        if (fstat(*upper, ust) < 0)
                return fail(res, -errno, "stat the upper dir of %s: %m", t->id);
        return 0;
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
        struct stat ust;
        int r0 = open_target(&u->t, &pidfd, &upper, &dirfd, &disk, &ust, res);
        if (r0 < 0)
                return r0;
        int sp[2];
        if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sp) < 0)
                return fail(res, -errno, "UPPER_PACK: socketpair: %m");
        int cfds[4] = {upper, pidfd, spool, sp[1]};
        double t0 = now_ms(), t1 = 0;
        pid_t pid = spawn_upper(cfds, 4, NULL);
        close(sp[1]);
        if (pid < 0) {
                close(sp[0]);
                return fail(res, pid, "UPPER_PACK: start %s: %s", upper_path, strerror(-pid));
        }
        struct priv_upper_msg done = {0};
        int r = converse(sp[0], ust.st_dev, &done, res, &t1);
        double t2 = now_ms();
        close(sp[0]);
        if (r < 0)
                (void) kill(pid, SIGKILL);
        int status = 0;
        while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
                ;
        log_debug("warren-priv: UPPER_PACK %s: warren-upper's first word after %.2f ms, done "
                  "after %.2f ms, reaped after %.2f ms",
                  u->t.id, t1 - t0, t2 - t0, now_ms() - t0);
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

/* ---- phase 4b-2: the journal's session ---- */

struct session {
        int sock; /* warren-upper's questions */
        pid_t pid;
        dev_t dev;
        char id[PRIV_ID_MAX];
};

/* Answer the session's OPAQUE questions until warren-upper closes its
 * socket (it exits when warrend closes the session), then reap it. */
static void *session_thread(void *arg) {
        struct session *s = arg;
        struct priv_result res = {0};
        double first = 0, t0 = now_ms();
        int r = converse(s->sock, s->dev, NULL, &res, &first);
        close(s->sock);
        if (r < 0) {
                log_warn("warren-priv: UPPER_SESSION %s: %s; killing warren-upper", s->id, res.msg);
                (void) kill(s->pid, SIGKILL);
        }
        int status = 0;
        while (waitpid(s->pid, &status, 0) < 0 && errno == EINTR)
                ;
        log_debug("warren-priv: UPPER_SESSION %s: warren-upper %d ended after %.2f ms (status "
                  "0x%x)",
                  s->id, (int) s->pid, now_ms() - t0, status);
        free(s);
        return NULL;
}

int priv_upper_session_run(const struct priv_req *req, struct priv_result *res,
                           struct priv_upper_started *out, int *ret_fd) {
        const struct priv_upper_session *u = &req->upper_session;
        _cleanup_close_ int pidfd = -EBADF, dirfd = -EBADF, upper = -EBADF, disk = -EBADF,
                            root = -EBADF;
        struct stat ust;
        int r = open_target(&u->t, &pidfd, &upper, &dirfd, &disk, &ust, res);
        if (r < 0)
                return r;
        /* the sandbox's root as its init sees it, for the rollback's
         * writes; the pidfd proves the pid was that init's all along */
        char p[64];
        snprintf(p, sizeof(p), "/proc/%d/root", (int) u->t.pid);
        root = open(p, O_PATH | O_DIRECTORY | O_CLOEXEC);
        if (root < 0)
                return fail(res, -errno, "UPPER_SESSION: open %s: %m", p);
        if (syscall(SYS_pidfd_send_signal, pidfd, 0, NULL, 0) < 0)
                return fail(res, -ESRCH, "sandbox %s is gone", u->t.id);
        int q[2] = {-1, -1}, w[2] = {-1, -1};
        if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, q) < 0 ||
            socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, w) < 0) {
                r = fail(res, -errno, "UPPER_SESSION: socketpair: %m");
                priv_close_fds(q, q[0] >= 0 ? 2 : 0);
                return r;
        }
        struct session *s = calloc(1, sizeof(*s));
        int cfds[5] = {upper, pidfd, root, q[1], w[1]};
        pid_t pid = s ? spawn_upper(cfds, 5, "session") : -ENOMEM;
        close(q[1]);
        close(w[1]);
        if (pid < 0) {
                close(q[0]);
                close(w[0]);
                free(s);
                return fail(res, pid, "UPPER_SESSION: start %s: %s", upper_path, strerror(-pid));
        }
        *s = (struct session){.sock = q[0], .pid = pid, .dev = ust.st_dev};
        memcpy(s->id, u->t.id, sizeof(s->id));
        pthread_attr_t attr;
        pthread_t th;
        bool started = pthread_attr_init(&attr) == 0;
        if (started) {
                (void) pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
                started = pthread_create(&th, &attr, session_thread, s) == 0;
                pthread_attr_destroy(&attr);
        }
        if (!started) {
                (void) kill(pid, SIGKILL);
                while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
                        ;
                close(q[0]);
                close(w[0]);
                free(s);
                return fail(res, -EAGAIN, "UPPER_SESSION: no thread for warren-upper");
        }
        *out = (struct priv_upper_started){.pid = pid};
        *ret_fd = w[0];
        return 0;
}
