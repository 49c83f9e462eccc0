/* SPDX-License-Identifier: Apache-2.0 */
/* warren-egress's confinement: everything it will ever need (the passed
 * sockets, the c-ares channels, the loops) exists before this runs; after
 * it the process is an unprivileged user in an empty root, without
 * capabilities, under no_new_privs and a seccomp allowlist that permits
 * network I/O on IPv4/IPv6 sockets, pipes for splice, epoll and memory
 * without PROT_EXEC - no open(2), no exec, no unix sockets, no mount,
 * no ptrace. */

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/sched.h>
#include <sched.h>
#include <seccomp.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "basic/confine.h"
#include "egress/egress.h"

static int install_seccomp(struct wr_err *e) {
        static const int allow[] = {
                SCMP_SYS(read),
                SCMP_SYS(write),
                SCMP_SYS(readv),
                SCMP_SYS(writev),
                SCMP_SYS(close),
                SCMP_SYS(recvfrom),
                SCMP_SYS(sendto),
                SCMP_SYS(recvmsg),
                SCMP_SYS(sendmsg),
                SCMP_SYS(recvmmsg),
                SCMP_SYS(sendmmsg),
                SCMP_SYS(shutdown),
                SCMP_SYS(accept4),
                SCMP_SYS(connect),
                SCMP_SYS(getsockopt),
                SCMP_SYS(setsockopt),
                SCMP_SYS(getsockname),
                SCMP_SYS(getpeername),
                SCMP_SYS(splice),
                SCMP_SYS(pipe2),
                SCMP_SYS(fcntl),
                SCMP_SYS(epoll_create1),
                SCMP_SYS(epoll_ctl),
                SCMP_SYS(epoll_wait),
                SCMP_SYS(epoll_pwait),
                SCMP_SYS(eventfd2),
                SCMP_SYS(poll),
                SCMP_SYS(ppoll),
                SCMP_SYS(clock_gettime),
                SCMP_SYS(clock_nanosleep),
                SCMP_SYS(nanosleep),
                SCMP_SYS(gettimeofday),
                SCMP_SYS(getrandom),
                SCMP_SYS(futex),
                SCMP_SYS(munmap),
                SCMP_SYS(mremap),
                SCMP_SYS(madvise),
                SCMP_SYS(brk),
                SCMP_SYS(rt_sigreturn),
                SCMP_SYS(rt_sigprocmask),
                SCMP_SYS(sigaltstack),
                SCMP_SYS(exit),
                SCMP_SYS(exit_group),
                SCMP_SYS(getpid),
                SCMP_SYS(gettid),
                SCMP_SYS(tgkill),
                SCMP_SYS(sched_yield),
                SCMP_SYS(restart_syscall),
                SCMP_SYS(set_robust_list),
                SCMP_SYS(rseq),
                SCMP_SYS(fstat),
                SCMP_SYS(newfstatat),
                SCMP_SYS(lseek),
                SCMP_SYS(sched_getaffinity),
                SCMP_SYS(getuid),
                SCMP_SYS(geteuid),
                SCMP_SYS(getgid),
                SCMP_SYS(getegid),
                SCMP_SYS(uname),
                SCMP_SYS(prlimit64),
        };
        int r;
        scmp_filter_ctx ctx =
                confine_seccomp_new(SCMP_ACT_ERRNO(EPERM), allow, ELEMENTSOF(allow), &r);
        if (!ctx)
                return err_set(e, r, "seccomp: %s", strerror(-r));
        /* sockets: IPv4 and IPv6 only (upstream DNS, outbound TCP) */
        if (r == 0)
                r = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(socket), 1,
                                     SCMP_A0(SCMP_CMP_EQ, AF_INET));
        if (r == 0)
                r = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(socket), 1,
                                     SCMP_A0(SCMP_CMP_EQ, AF_INET6));
        /* ioctl: FIONBIO / FIOCLEX / FIONREAD only (libuv, c-ares) */
        if (r == 0)
                r = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(ioctl), 1,
                                     SCMP_A1(SCMP_CMP_EQ, FIONBIO));
        if (r == 0)
                r = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(ioctl), 1,
                                     SCMP_A1(SCMP_CMP_EQ, FIOCLEX));
        if (r == 0)
                r = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(ioctl), 1,
                                     SCMP_A1(SCMP_CMP_EQ, FIONREAD));
        /* threads only (pthread_create): clone with CLONE_THREAD; clone3's
         * flags live in memory the filter cannot read, so it answers ENOSYS
         * and glibc falls back to clone */
        if (r == 0)
                r = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(clone), 1,
                                     SCMP_A0(SCMP_CMP_MASKED_EQ, CLONE_THREAD, CLONE_THREAD));
        if (r == 0)
                r = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(ENOSYS), SCMP_SYS(clone3), 0);
        if (r == 0)
                r = seccomp_load(ctx);
        seccomp_release(ctx);
        return r < 0 ? err_set(e, r, "seccomp: %s", strerror(-r)) : 0;
}

int egress_confine(struct wr_err *e) {
        if (geteuid() != 0)
                return err_set(e, -EPERM,
                               "warren-egress must be started as root (it confines itself)");
        uid_t uid = 0;
        gid_t gid = 0;
        int r = confine_ids(egress_cfg.user, egress_cfg.group, &uid, &gid, e);
        if (r < 0)
                return r;
        r = confine_root_check(egress_cfg.root, e);
        if (r < 0)
                return r;
        /* file descriptors: a few per connection (client, upstream, 2 pipes x 2) */
        struct rlimit nofile = {.rlim_cur = 65536, .rlim_max = 65536};
        if (setrlimit(RLIMIT_NOFILE, &nofile) < 0)
                (void) 0; /* keep the inherited limit */
        struct rlimit zero = {0, 0};
        if (setrlimit(RLIMIT_CORE, &zero) < 0 || setrlimit(RLIMIT_MEMLOCK, &zero) < 0 ||
            setrlimit(RLIMIT_MSGQUEUE, &zero) < 0)
                return err_set(e, -errno, "setrlimit: %m");
        r = confine_drop(egress_cfg.root, uid, gid, e);
        if (r < 0)
                return r;
        return install_seccomp(e);
}
