/* SPDX-License-Identifier: Apache-2.0 */
/* The sandbox security policy: the capabilities kept and the seccomp
 * allowlist. Built once per process in the parent (libcap, libseccomp) and
 * applied by the child with raw syscalls, so that nothing between clone
 * and exec allocates memory or takes a lock.
 *
 * seccomp: an allowlist modelled on Docker's default profile (moby
 * profiles/seccomp/default.json), default action EPERM, foreign
 * architectures killed (native arch only: no 32-bit/x32 entry points).
 * Differences from Docker, on purpose:
 *  - ptrace, process_vm_readv/writev, pidfd_getfd: denied (Docker allows
 *    them on kernels >= 4.8). Every sandbox process runs as root with the
 *    same capabilities as init, so the ptrace access check alone would let
 *    a workload attach to init; denying the syscalls is the simple, robust
 *    answer (init is also non-dumpable). Cost: strace/gdb do not work.
 *  - io_uring_*: denied (as in Docker since 2023).
 *  - socket(AF_VSOCK): EPERM; clone with any CLONE_NEW* flag: EPERM;
 *    clone3: ENOSYS so that libc falls back to clone, whose flags can be
 *    inspected.
 *  - Nothing that needs a dropped capability (mount, chroot, sethostname,
 *    ...) is listed.
 *  - Syscalls newer than the libseccomp in use: the harmless ones are
 *    allowed by number, the rest get ENOSYS (not EPERM) so that programs
 *    fall back (x86_64 only). */

#include <errno.h>
#include <fcntl.h>
#include <linux/sched.h>
#include <pthread.h>
#include <seccomp.h>
#include <stdlib.h>
#include <string.h>
#include <sys/capability.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "runtime/runtime-internal.h"

const char *const rt_caps_keep_names[] = {
        "cap_chown",  "cap_dac_override", "cap_fsetid",           "cap_fowner", "cap_setgid",
        "cap_setuid", "cap_setpcap",      "cap_net_bind_service", "cap_kill",   NULL,
};

static const char *const allow[] = {
        "accept",
        "accept4",
        "access",
        "adjtimex",
        "alarm",
        "arch_prctl",
        "bind",
        "brk",
        "cachestat",
        "capget",
        "capset",
        "chdir",
        "chmod",
        "chown",
        "chown32",
        "clock_adjtime",
        "clock_adjtime64",
        "clock_getres",
        "clock_getres_time64",
        "clock_gettime",
        "clock_gettime64",
        "clock_nanosleep",
        "clock_nanosleep_time64",
        "close",
        "close_range",
        "connect",
        "copy_file_range",
        "creat",
        "dup",
        "dup2",
        "dup3",
        "epoll_create",
        "epoll_create1",
        "epoll_ctl",
        "epoll_ctl_old",
        "epoll_pwait",
        "epoll_pwait2",
        "epoll_wait",
        "epoll_wait_old",
        "eventfd",
        "eventfd2",
        "execve",
        "execveat",
        "exit",
        "exit_group",
        "faccessat",
        "faccessat2",
        "fadvise64",
        "fadvise64_64",
        "fallocate",
        "fanotify_mark",
        "fchdir",
        "fchmod",
        "fchmodat",
        "fchmodat2",
        "fchown",
        "fchown32",
        "fchownat",
        "fcntl",
        "fcntl64",
        "fdatasync",
        "fgetxattr",
        "flistxattr",
        "flock",
        "fork",
        "fremovexattr",
        "fsetxattr",
        "fstat",
        "fstat64",
        "fstatat64",
        "fstatfs",
        "fstatfs64",
        "fsync",
        "ftruncate",
        "ftruncate64",
        "futex",
        "futex_requeue",
        "futex_time64",
        "futex_wait",
        "futex_waitv",
        "futex_wake",
        "futimesat",
        "get_mempolicy",
        "get_robust_list",
        "get_thread_area",
        "getcpu",
        "getcwd",
        "getdents",
        "getdents64",
        "getegid",
        "getegid32",
        "geteuid",
        "geteuid32",
        "getgid",
        "getgid32",
        "getgroups",
        "getgroups32",
        "getitimer",
        "getpeername",
        "getpgid",
        "getpgrp",
        "getpid",
        "getppid",
        "getpriority",
        "getrandom",
        "getresgid",
        "getresgid32",
        "getresuid",
        "getresuid32",
        "getrlimit",
        "getrusage",
        "getsid",
        "getsockname",
        "getsockopt",
        "gettid",
        "gettimeofday",
        "getuid",
        "getuid32",
        "getxattr",
        "inotify_add_watch",
        "inotify_init",
        "inotify_init1",
        "inotify_rm_watch",
        "io_cancel",
        "io_destroy",
        "io_getevents",
        "io_pgetevents",
        "io_pgetevents_time64",
        "io_setup",
        "io_submit",
        "ioctl",
        "ioprio_get",
        "ioprio_set",
        "ipc",
        "kill",
        "landlock_add_rule",
        "landlock_create_ruleset",
        "landlock_restrict_self",
        "lchown",
        "lchown32",
        "lgetxattr",
        "link",
        "linkat",
        "listen",
        "listxattr",
        "llistxattr",
        "_llseek",
        "lremovexattr",
        "lseek",
        "lsetxattr",
        "lstat",
        "lstat64",
        "madvise",
        "map_shadow_stack",
        "mbind",
        "membarrier",
        "memfd_create",
        "memfd_secret",
        "mincore",
        "mkdir",
        "mkdirat",
        "mknod",
        "mknodat",
        "mlock",
        "mlock2",
        "mlockall",
        "mmap",
        "mmap2",
        "mprotect",
        "mq_getsetattr",
        "mq_notify",
        "mq_open",
        "mq_timedreceive",
        "mq_timedreceive_time64",
        "mq_timedsend",
        "mq_timedsend_time64",
        "mq_unlink",
        "mremap",
        "msgctl",
        "msgget",
        "msgrcv",
        "msgsnd",
        "msync",
        "munlock",
        "munlockall",
        "munmap",
        "nanosleep",
        "newfstatat",
        "_newselect",
        "open",
        "openat",
        "openat2",
        "pause",
        "pidfd_open",
        "pidfd_send_signal",
        "pipe",
        "pipe2",
        "pkey_alloc",
        "pkey_free",
        "pkey_mprotect",
        "poll",
        "ppoll",
        "ppoll_time64",
        "prctl",
        "pread64",
        "preadv",
        "preadv2",
        "prlimit64",
        "process_mrelease",
        "pselect6",
        "pselect6_time64",
        "pwrite64",
        "pwritev",
        "pwritev2",
        "read",
        "readahead",
        "readlink",
        "readlinkat",
        "readv",
        "recv",
        "recvfrom",
        "recvmmsg",
        "recvmmsg_time64",
        "recvmsg",
        "remap_file_pages",
        "removexattr",
        "rename",
        "renameat",
        "renameat2",
        "restart_syscall",
        "rmdir",
        "rseq",
        "rt_sigaction",
        "rt_sigpending",
        "rt_sigprocmask",
        "rt_sigqueueinfo",
        "rt_sigreturn",
        "rt_sigsuspend",
        "rt_sigtimedwait",
        "rt_sigtimedwait_time64",
        "rt_tgsigqueueinfo",
        "sched_get_priority_max",
        "sched_get_priority_min",
        "sched_getaffinity",
        "sched_getattr",
        "sched_getparam",
        "sched_getscheduler",
        "sched_rr_get_interval",
        "sched_rr_get_interval_time64",
        "sched_setaffinity",
        "sched_setattr",
        "sched_setparam",
        "sched_setscheduler",
        "sched_yield",
        "seccomp",
        "select",
        "semctl",
        "semget",
        "semop",
        "semtimedop",
        "semtimedop_time64",
        "send",
        "sendfile",
        "sendfile64",
        "sendmmsg",
        "sendmsg",
        "sendto",
        "set_mempolicy",
        "set_robust_list",
        "set_thread_area",
        "set_tid_address",
        "setfsgid",
        "setfsgid32",
        "setfsuid",
        "setfsuid32",
        "setgid",
        "setgid32",
        "setgroups",
        "setgroups32",
        "setitimer",
        "setpgid",
        "setpriority",
        "setregid",
        "setregid32",
        "setresgid",
        "setresgid32",
        "setresuid",
        "setresuid32",
        "setreuid",
        "setreuid32",
        "setrlimit",
        "setsid",
        "setsockopt",
        "setuid",
        "setuid32",
        "setxattr",
        "shmat",
        "shmctl",
        "shmdt",
        "shmget",
        "shutdown",
        "sigaltstack",
        "signalfd",
        "signalfd4",
        "sigprocmask",
        "sigreturn",
        "socketpair",
        "splice",
        "stat",
        "stat64",
        "statfs",
        "statfs64",
        "statx",
        "symlink",
        "symlinkat",
        "sync",
        "sync_file_range",
        "syncfs",
        "sysinfo",
        "tee",
        "tgkill",
        "time",
        "timer_create",
        "timer_delete",
        "timer_getoverrun",
        "timer_gettime",
        "timer_gettime64",
        "timer_settime",
        "timer_settime64",
        "timerfd_create",
        "timerfd_gettime",
        "timerfd_gettime64",
        "timerfd_settime",
        "timerfd_settime64",
        "times",
        "tkill",
        "truncate",
        "truncate64",
        "ugetrlimit",
        "umask",
        "uname",
        "unlink",
        "unlinkat",
        "utime",
        "utimensat",
        "utimensat_time64",
        "utimes",
        "vfork",
        "vmsplice",
        "wait4",
        "waitid",
        "waitpid",
        "write",
        "writev",
        NULL,
};

#if defined(__x86_64__)
/* Syscalls newer than some libseccomp releases, by x86_64 number. */
static const struct {
        int nr;
        bool allow; /* false: ENOSYS */
} newer[] = {
        {451, true},  /* cachestat */
        {452, true},  /* fchmodat2 */
        {453, true},  /* map_shadow_stack */
        {454, true},  /* futex_wake */
        {455, true},  /* futex_wait */
        {456, true},  /* futex_requeue */
        {457, false}, /* statmount */
        {458, false}, /* listmount */
        {459, false}, /* lsm_get_self_attr */
        {460, false}, /* lsm_set_self_attr */
        {461, false}, /* lsm_list_modules */
        {462, true},  /* mseal */
        {463, true},  /* setxattrat */
        {464, true},  /* getxattrat */
        {465, true},  /* listxattrat */
        {466, true},  /* removexattrat */
        {467, false}, /* open_tree_attr */
        {468, false}, /* file_getattr */
        {469, false}, /* file_setattr */
};
#define NEWER_ENOSYS_FROM 470
#define NEWER_ENOSYS_TO 520
#endif

#define CLONE_NS_MASK                                                                              \
        (CLONE_NEWNS | CLONE_NEWUTS | CLONE_NEWIPC | CLONE_NEWUSER | CLONE_NEWPID | CLONE_NEWNET | \
         CLONE_NEWCGROUP)

bool rt_policy_allows(const char *name) {
        static const char *const conditional[] = {"clone", "socket", "personality", NULL};
        for (size_t i = 0; allow[i]; i++)
                if (!strcmp(allow[i], name))
                        return true;
        for (size_t i = 0; conditional[i]; i++)
                if (!strcmp(conditional[i], name))
                        return true;
        return false;
}

static int add(scmp_filter_ctx ctx, uint32_t action, int nr, unsigned n,
               const struct scmp_arg_cmp *cmp) {
        return seccomp_rule_add_array(ctx, action, nr, n, cmp);
}

static int build_filter(struct sock_fprog *prog, struct wr_err *e) {
        scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_ERRNO(EPERM));
        int r;
        if (!ctx)
                return err_set(e, -ENOMEM, "seccomp_init failed");
        r = seccomp_attr_set(ctx, SCMP_FLTATR_ACT_BADARCH, SCMP_ACT_KILL_PROCESS);
        if (r < 0)
                goto fail;
        /* we set no_new_privs ourselves, right before loading */
        r = seccomp_attr_set(ctx, SCMP_FLTATR_CTL_NNP, 0);
        if (r < 0)
                goto fail;
        /* a binary tree over the syscall numbers instead of a linear
         * list: every syscall of the sandbox and the kernel's per-filter
         * cache setup (run once per syscall number when the filter is
         * attached, i.e. on every sandbox start) walk O(log n) jumps
         * instead of up to ~350 */
        r = seccomp_attr_set(ctx, SCMP_FLTATR_CTL_OPTIMIZE, 2);
        if (r < 0)
                goto fail;

        for (size_t i = 0; allow[i]; i++) {
                int nr = seccomp_syscall_resolve_name(allow[i]);
                if (nr == __NR_SCMP_ERROR)
                        continue; /* not a syscall on this arch, or unknown here */
                if (nr < 0)
                        continue; /* a pseudo-syscall of another arch */
                r = add(ctx, SCMP_ACT_ALLOW, nr, 0, NULL);
                if (r < 0) {
                        seccomp_release(ctx);
                        return err_set(e, r, "seccomp rule for %s: %s", allow[i], strerror(-r));
                }
        }

        /* clone: only without namespace flags (flags are arg 0 on x86_64,
         * aarch64, riscv; arg 1 on s390 which is not supported here) */
        struct scmp_arg_cmp c_clone = SCMP_A0(SCMP_CMP_MASKED_EQ, CLONE_NS_MASK, 0);
        if ((r = add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(clone), 1, &c_clone)) < 0)
                goto fail;
        if ((r = add(ctx, SCMP_ACT_ERRNO(ENOSYS), SCMP_SYS(clone3), 0, NULL)) < 0)
                goto fail;
        struct scmp_arg_cmp c_sock = SCMP_A0(SCMP_CMP_NE, AF_VSOCK);
        if ((r = add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(socket), 1, &c_sock)) < 0)
                goto fail;
        static const uint64_t personas[] = {0x0, 0x8, 0x20000, 0x20008, 0xffffffff};
        for (size_t i = 0; i < ELEMENTSOF(personas); i++) {
                struct scmp_arg_cmp c = SCMP_A0(SCMP_CMP_EQ, personas[i]);
                if ((r = add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(personality), 1, &c)) < 0)
                        goto fail;
        }
#if defined(__x86_64__)
        if (seccomp_arch_native() == SCMP_ARCH_X86_64) {
                bool known[NEWER_ENOSYS_TO] = {0};
                for (size_t i = 0; i < ELEMENTSOF(newer); i++) {
                        known[newer[i].nr] = true;
                        /* a name libseccomp knows was handled by the list */
                        char *name =
                                seccomp_syscall_resolve_num_arch(SCMP_ARCH_NATIVE, newer[i].nr);
                        bool named = name != NULL;
                        free(name);
                        if (named && newer[i].allow)
                                continue;
                        r = add(ctx, newer[i].allow ? SCMP_ACT_ALLOW : SCMP_ACT_ERRNO(ENOSYS),
                                newer[i].nr, 0, NULL);
                        if (r < 0 && r != -EEXIST)
                                goto fail;
                }
                for (int nr = NEWER_ENOSYS_FROM; nr < NEWER_ENOSYS_TO; nr++) {
                        if (known[nr])
                                continue;
                        r = add(ctx, SCMP_ACT_ERRNO(ENOSYS), nr, 0, NULL);
                        if (r < 0 && r != -EEXIST)
                                goto fail;
                }
        }
#endif

        /* export the BPF program through a memfd (libseccomp 2.5 has no
         * export-to-memory) */
        int fd = memfd_create("warren-seccomp", MFD_CLOEXEC);
        if (fd < 0) {
                r = -errno;
                goto fail;
        }
        r = seccomp_export_bpf(ctx, fd);
        seccomp_release(ctx);
        ctx = NULL;
        struct stat st;
        if (r >= 0 && fstat(fd, &st) < 0)
                r = -errno;
        if (r < 0) {
                close(fd);
                return err_set(e, r, "export seccomp filter: %s", strerror(-r));
        }
        if (st.st_size <= 0 || st.st_size % sizeof(struct sock_filter) != 0 ||
            st.st_size / sizeof(struct sock_filter) > BPF_MAXINSNS) {
                close(fd);
                return err_set(e, -E2BIG, "seccomp filter has an unusable size (%lld bytes)",
                               (long long) st.st_size);
        }
        struct sock_filter *f = malloc((size_t) st.st_size);
        if (!f) {
                close(fd);
                return err_set(e, -ENOMEM, "out of memory");
        }
        ssize_t n = pread(fd, f, (size_t) st.st_size, 0);
        close(fd);
        if (n != st.st_size) {
                free(f);
                return err_set(e, -EIO, "read back seccomp filter");
        }
        prog->filter = f;
        prog->len = (unsigned short) (st.st_size / sizeof(struct sock_filter));
        return 0;
fail:
        if (ctx)
                seccomp_release(ctx);
        return err_set(e, r, "build seccomp filter: %s", strerror(-r));
}

static int build_caps(struct rt_policy *p, struct wr_err *e) {
        p->caps_keep = 0;
        for (size_t i = 0; rt_caps_keep_names[i]; i++) {
                cap_value_t v;
                if (cap_from_name(rt_caps_keep_names[i], &v) < 0 || v < 0 || v > 63)
                        return err_set(e, -EINVAL, "unknown capability %s", rt_caps_keep_names[i]);
                p->caps_keep |= 1ULL << v;
        }
        int bits = cap_max_bits();
        p->cap_last = bits > 0 ? bits - 1 : CAP_LAST_CAP;
        if (p->cap_last > 63)
                p->cap_last = 63;
        return 0;
}

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct rt_policy policy;
static bool policy_ready;

int rt_policy_get(const struct rt_policy **ret, struct wr_err *e) {
        int r = 0;
        pthread_mutex_lock(&lock);
        if (!policy_ready) {
                struct rt_policy p = {0};
                r = build_caps(&p, e);
                if (r >= 0)
                        r = build_filter(&p.prog, e);
                if (r >= 0) {
                        policy = p;
                        policy_ready = true;
                }
        }
        pthread_mutex_unlock(&lock);
        if (r < 0)
                return r;
        *ret = &policy;
        return 0;
}
