/* SPDX-License-Identifier: Apache-2.0 */
/* Processes beside a sandbox (runtime.h: rt_sandbox_spawn_beside): a
 * program started by the root daemon as an unprivileged user inside the
 * sandbox's cgroups. Privileged path, audited whole: between clone and
 * execve the child only makes raw syscalls on fds the parent prepared
 * (the daemon is multi-threaded: no allocation, no locks, no stdio), and
 * it drops every privilege before it runs anything it did not write. */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <linux/sched.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "basic/macro.h"
#include "runtime/runtime-internal.h"

/* What the child needs, all prepared by the parent. */
struct beside_child {
        const struct rt_beside *b;
        int join_fds[RT_CGROUP_V1_MAX]; /* v1: cgroup.procs, O_WRONLY ("0" moves the writer) */
        size_t n_join;
        int null_fd; /* /dev/null, O_RDWR */
        int err_fd;  /* write end of the error pipe (O_CLOEXEC: EOF = exec'd) */
};

/* Report the failed step (an int errno and a short word) and exit. */
_noreturn_ static void child_fail(int fd, int err, const char *step) {
        char buf[64];
        size_t n = strnlen(step, sizeof(buf) - sizeof(int));
        memcpy(buf, &err, sizeof(int));
        memcpy(buf + sizeof(int), step, n);
        (void) !write(fd, buf, sizeof(int) + n);
        _exit(127);
}

_noreturn_ static void child_run(const struct beside_child *c) {
        const struct rt_beside *b = c->b;
        /* v1: join each hierarchy (v2 was joined by clone3 itself) */
        for (size_t i = 0; i < c->n_join; i++)
                if (write(c->join_fds[i], "0", 1) != 1)
                        child_fail(c->err_fd, errno, "join the sandbox's cgroup");
        int in = b->stdin_fd > 2 ? b->stdin_fd : c->null_fd;
        int out = b->stdout_fd > 2 ? b->stdout_fd : c->null_fd;
        int err = b->stderr_fd > 2 ? b->stderr_fd : c->null_fd;
        if (dup2(in, 0) < 0 || dup2(out, 1) < 0 || dup2(err, 2) < 0)
                child_fail(c->err_fd, errno, "set up stdio");
        if (b->cwd_fd > 2 ? fchdir(b->cwd_fd) < 0 : chdir("/") < 0)
                child_fail(c->err_fd, errno, "change directory");
        /* the error pipe survives as the only fd above 2 (it is CLOEXEC) */
        int efd = c->err_fd;
        if (efd != 3) {
                if (dup3(efd, 3, O_CLOEXEC) < 0)
                        child_fail(efd, errno, "move the error pipe");
                efd = 3;
        }
        if (sys_close_range(4, ~0U, 0) < 0)
                child_fail(efd, errno, "close fds");
        /* raw syscalls: glibc's wrappers apply a set*id to every thread of
         * the process (a signal to each, then a wait), and this child of a
         * raw clone3 still has the parent's list of threads it does not
         * have: the wrapper waits forever */
        if (syscall(SYS_setgroups, 0, NULL) < 0 ||
            syscall(SYS_setresgid, b->gid, b->gid, b->gid) < 0 ||
            syscall(SYS_setresuid, b->uid, b->uid, b->uid) < 0)
                child_fail(efd, errno, "drop privileges");
        if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
                child_fail(efd, errno, "set no_new_privs");
        /* a default disposition and an empty mask for the program */
        struct sigaction dfl = {.sa_handler = SIG_DFL};
        for (int sig = 1; sig < NSIG; sig++)
                (void) sigaction(sig, &dfl, NULL);
        sigset_t none;
        sigemptyset(&none);
        (void) sigprocmask(SIG_SETMASK, &none, NULL);
        execve(b->path, b->argv, b->envp);
        child_fail(efd, errno, "exec");
}

int rt_sandbox_spawn_beside(struct rt_sandbox *sb, const struct rt_beside *b, int *ret_pidfd,
                            pid_t *ret_pid, struct wr_err *e) {
        if (!b->path || b->path[0] != '/' || !b->argv || !b->argv[0] || !b->envp)
                return err_set(e, -EINVAL, "start beside the sandbox: bad program");
        if (b->uid == 0 || b->gid == 0)
                return err_set(e, -EINVAL, "start %s beside the sandbox: never as root", b->path);
        struct rt_cgroup *own = rt_sandbox_cgroup(sb);
        if (!own)
                return err_set(e, -ESRCH, "start %s: the sandbox is gone", b->path);
        /* the join fds of the create may be closed by now: open the
         * sandbox's cgroups again */
        struct rt_cgroup *cg = NULL;
        int r = rt_cgroup_open(rt_sandbox_id(sb), rt_cgroup_mode_of(own), &cg, e);
        if (r < 0)
                return err_prefix(e, r, "start %s", b->path);
        struct beside_child c = {.b = b, .null_fd = -EBADF, .err_fd = -EBADF};
        int errpipe[2] = {-EBADF, -EBADF};
        int pidfd = -EBADF;
        c.n_join = rt_cgroup_join_fds(cg, c.join_fds, ELEMENTSOF(c.join_fds));
        c.null_fd = open("/dev/null", O_RDWR | O_CLOEXEC);
        if (c.null_fd < 0) {
                r = err_set(e, -errno, "start %s: open /dev/null: %m", b->path);
                goto out;
        }
        if (pipe2(errpipe, O_CLOEXEC) < 0) {
                r = err_set(e, -errno, "start %s: pipe: %m", b->path);
                goto out;
        }
        c.err_fd = errpipe[1];
        struct rt_clone_args args = {
                .flags = CLONE_PIDFD,
                .exit_signal = 0, /* no SIGCHLD: reaped through the pidfd */
                .pidfd = (uint64_t) (uintptr_t) &pidfd,
        };
        if (rt_cgroup_mode_of(cg) == RT_CGROUP_V2) {
                args.flags |= CLONE_INTO_CGROUP;
                args.cgroup = (uint64_t) rt_cgroup_dirfd(cg);
        }
        sigset_t all, old;
        sigfillset(&all);
        pthread_sigmask(SIG_SETMASK, &all, &old);
        long pid = sys_clone3(&args);
        if (pid == 0)
                child_run(&c); /* never returns */
        int clone_errno = errno;
        pthread_sigmask(SIG_SETMASK, &old, NULL);
        closep(&errpipe[1]);
        if (pid < 0) {
                r = err_set(e, -clone_errno, "start %s: clone3: %s", b->path,
                            strerror(clone_errno));
                goto out;
        }
        /* EOF: exec'd; else the child's errno and step */
        char buf[64];
        ssize_t n = RETRY_EINTR(read(errpipe[0], buf, sizeof(buf)));
        if (n >= (ssize_t) sizeof(int)) {
                int err;
                memcpy(&err, buf, sizeof(int));
                siginfo_t si;
                (void) RETRY_EINTR(waitid(P_PIDFD, (id_t) pidfd, &si, WEXITED));
                r = err_set(e, err > 0 ? -err : -EIO, "start %s: %.*s: %s", b->path,
                            (int) (n - (ssize_t) sizeof(int)), buf + sizeof(int),
                            strerror(err > 0 ? err : EIO));
                closep(&pidfd);
                goto out;
        }
        *ret_pidfd = TAKE_FD(pidfd);
        if (ret_pid)
                *ret_pid = (pid_t) pid;
        r = 0;
out:
        closep(&errpipe[0]);
        closep(&errpipe[1]);
        closep(&c.null_fd);
        rt_cgroup_free(cg);
        return r;
}
