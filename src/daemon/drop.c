/* SPDX-License-Identifier: Apache-2.0 */
/* warrend's drop to its own user (drop.h, docs/privsep.md phase 5). */
#include "daemon/drop.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <grp.h>
#include <linux/mount.h>
#include <linux/sched.h>
#include <pwd.h>
#include <sched.h>
#include <seccomp.h>
#include <stdio.h>
#include <string.h>
#include <sys/capability.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "basic/log.h"
#include "basic/macro.h"
#include "sandbox/uids.h"

#ifndef AT_RECURSIVE
#define AT_RECURSIVE 0x8000
#endif

int drop_user_lookup(const char *name, struct drop_user *ret, struct wr_err *e) {
        if (!name || !*name || strlen(name) >= sizeof(ret->name))
                return err_set(e, -EINVAL, "--user: expected a user name (e.g. warren)");
        errno = 0;
        struct passwd *pw = getpwnam(name);
        if (!pw)
                return err_set(e, errno ? -errno : -ENOENT,
                               "--user %s: no such user; create it (scripts/warren-user.sh %s "
                               "makes a system user without a login shell)",
                               name, name);
        if (pw->pw_uid == 0 || pw->pw_gid == 0)
                return err_set(e, -EPERM,
                               "--user %s: uid %u gid %u: dropping to root is no drop; use an "
                               "unprivileged system user (scripts/warren-user.sh)",
                               name, (unsigned) pw->pw_uid, (unsigned) pw->pw_gid);
        *ret = (struct drop_user){.uid = pw->pw_uid, .gid = pw->pw_gid};
        snprintf(ret->name, sizeof(ret->name), "%s", name);
        return 0;
}

/* ---- the state dir's owner ---- */

/* lchown name (in dfd) to u, then, while depth > 0, what it holds (depth
 * -1: all of it). Never follows a symlink, never crosses a mount (st_dev
 * against the parent's). */
static int own_at(int dfd, const char *name, dev_t dev, int depth, const struct drop_user *u,
                  struct wr_err *e) {
        struct stat st;
        if (fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
                return errno == ENOENT ? 0 : err_set(e, -errno, "state dir: %s: %m", name);
        if (st.st_dev != dev)
                return 0; /* a mount: not ours to give */
        if ((st.st_uid != u->uid || st.st_gid != u->gid) &&
            fchownat(dfd, name, u->uid, u->gid, AT_SYMLINK_NOFOLLOW) < 0)
                return err_set(e, -errno, "state dir: chown %s to %s: %m", name, u->name);
        if (!S_ISDIR(st.st_mode) || depth == 0)
                return 0;
        int fd = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0)
                return err_set(e, -errno, "state dir: open %s: %m", name);
        DIR *d = fdopendir(fd);
        if (!d) {
                int r = -errno;
                close(fd);
                return err_set(e, r, "state dir: %s: %s", name, strerror(-r));
        }
        int r = 0;
        struct dirent *de;
        while (r == 0 && (de = readdir(d)))
                if (strcmp(de->d_name, ".") && strcmp(de->d_name, ".."))
                        r = own_at(dirfd(d), de->d_name, st.st_dev, depth < 0 ? -1 : depth - 1, u,
                                   e);
        closedir(d);
        return r;
}

/* Each directory above the state dir must let u through (search
 * permission), or nothing after the drop reaches it. */
static int reachable(const char *state_dir, const struct drop_user *u, struct wr_err *e) {
        char p[PATH_MAX];
        snprintf(p, sizeof(p), "%s", state_dir);
        for (char *s = strrchr(p, '/'); s; s = strrchr(p, '/')) {
                *s = 0;
                const char *dir = *p ? p : "/";
                struct stat st;
                if (stat(dir, &st) < 0)
                        return err_set(e, -errno, "%s: %m", dir);
                bool x = st.st_uid == u->uid   ? st.st_mode & S_IXUSR
                         : st.st_gid == u->gid ? st.st_mode & S_IXGRP
                                               : st.st_mode & S_IXOTH;
                if (!x)
                        return err_set(e, -EACCES,
                                       "state dir %s: user %s cannot reach it: %s is mode %04o "
                                       "owned by %u:%u; chmod o+x %s, or pick a --state-dir "
                                       "%s can reach",
                                       state_dir, u->name, dir, (unsigned) (st.st_mode & 07777),
                                       (unsigned) st.st_uid, (unsigned) st.st_gid, dir, u->name);
                if (!*p)
                        break;
        }
        return 0;
}

/* The host-wide lock dirs warrends of this host share (the network
 * ranges, sandbox/network.c; the uid ranges, sandbox/uids.h): each dir
 * and its lock files given to u (a root warrend still opens them; a
 * dropped one could not open root's 0600 ones). */
static const struct {
        const char *name; /* in /run/warren */
        mode_t mode;
} host_locks[] = {{"net", 0755}, {"uid-ranges", 0700}};

static int host_locks_own(const struct drop_user *u, struct wr_err *e) {
        (void) mkdir("/run/warren", 0755);
        _cleanup_close_ int pfd = open("/run/warren", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (pfd < 0)
                return err_set(e, -errno, "/run/warren: %m");
        for (size_t i = 0; i < ELEMENTSOF(host_locks); i++) {
                const char *n = host_locks[i].name;
                if (mkdirat(pfd, n, host_locks[i].mode) < 0 && errno != EEXIST)
                        return err_set(e, -errno, "/run/warren/%s: %m", n);
                struct stat st;
                if (fstatat(pfd, n, &st, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISDIR(st.st_mode))
                        return err_set(e, -ENOTDIR, "/run/warren/%s is not a directory", n);
                int r = own_at(pfd, n, st.st_dev, 1, u, e);
                if (r < 0)
                        return r;
        }
        return 0;
}

int drop_state_dir_own(const char *state_dir, const struct drop_user *u, struct wr_err *e) {
        int r0 = reachable(state_dir, u, e);
        if (r0 < 0)
                return r0;
        r0 = host_locks_own(u, e);
        if (r0 < 0)
                return r0;
        /* how deep each top-level entry is given to u; anything not named:
         * all of it (warren.db*, images/, keys/, ca/, identity-api/, ...) */
        static const struct {
                const char *name;
                int depth;
        } limits[] = {
                {"sandboxes", -2}, /* warren-priv's: left as it is */
                /* warren-fetch's chroot: root's, or the helper refuses it */
                {"fetch-root", -2},
                {"layers", 2},  /* layers/, sha256/ and tmp/, each layer's dir */
                {"volumes", 1}, /* volumes/ and each volume's dir, not its files */
        };
        _cleanup_close_ int dfd = open(state_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (dfd < 0)
                return err_set(e, -errno, "state dir %s: %m", state_dir);
        struct stat st;
        if (fstat(dfd, &st) < 0)
                return err_set(e, -errno, "state dir %s: %m", state_dir);
        if (fchown(dfd, u->uid, u->gid) < 0)
                return err_set(e, -errno, "state dir %s: chown to %s: %m", state_dir, u->name);
        int dfd2 = fcntl(dfd, F_DUPFD_CLOEXEC, 3);
        DIR *d = dfd2 >= 0 ? fdopendir(dfd2) : NULL;
        if (!d) {
                int r = -errno;
                if (dfd2 >= 0)
                        close(dfd2);
                return err_set(e, r, "state dir %s: %s", state_dir, strerror(-r));
        }
        int r = 0;
        struct dirent *de;
        while (r == 0 && (de = readdir(d))) {
                if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
                        continue;
                int depth = -1;
                for (size_t i = 0; i < ELEMENTSOF(limits); i++)
                        if (!strcmp(de->d_name, limits[i].name))
                                depth = limits[i].depth;
                if (depth == -2 && !strcmp(de->d_name, "sandboxes")) {
                        /* warren-priv's, but listed by warrend (recovery
                         * finds the dirs of sandboxes it has no row of):
                         * root's, group u's, mode 0751 */
                        if (fchownat(dirfd(d), "sandboxes", 0, u->gid, AT_SYMLINK_NOFOLLOW) < 0 ||
                            fchmodat(dirfd(d), "sandboxes", 0751, 0) < 0)
                                r = err_set(e, -errno, "state dir: sandboxes: %m");
                        continue;
                }
                if (depth == -2)
                        continue;
                r = own_at(dirfd(d), de->d_name, st.st_dev, depth, u, e);
        }
        closedir(d);
        return r;
}

/* ---- the drop ---- */

static int sys_mount_setattr(const char *path, unsigned flags, uint64_t set, uint64_t clr) {
        struct mount_attr a = {.attr_set = set, .attr_clr = clr};
        return (int) syscall(SYS_mount_setattr, AT_FDCWD, path, flags, &a, sizeof(a));
}

/* A mount namespace of its own, a slave of the host's (sandbox and volume
 * mounts warren-priv makes later still show), every mount read-only but
 * the state dir and the host-wide lock dirs (host_locks; each a
 * recursive bind of itself), /dev and /proc. */
static int mount_ns(const char *state_dir, struct wr_err *e) {
        /* only this thread's fs: warren-priv's supervisor thread (started
         * before the drop) stays in the host's namespace */
        if (unshare(CLONE_NEWNS) < 0)
                return err_set(e, -errno, "unshare(CLONE_NEWNS): %m");
        if (mount(NULL, "/", NULL, MS_REC | MS_SLAVE, NULL) < 0)
                return err_set(e, -errno, "make / a recursive slave: %m");
        const char *const own[] = {state_dir, "/run/warren/net", SBX_UIDS_LOCK_DIR};
        for (size_t i = 0; i < ELEMENTSOF(own); i++)
                if (mount(own[i], own[i], NULL, MS_BIND | MS_REC, NULL) < 0)
                        return err_set(e, -errno, "bind %s onto itself: %m", own[i]);
        if (sys_mount_setattr("/", AT_RECURSIVE, MOUNT_ATTR_RDONLY, 0) < 0)
                return err_set(e, -errno, "make every mount read-only: %m");
        static const char *const writable[] = {"/dev", "/proc"};
        for (size_t i = 0; i < ELEMENTSOF(writable); i++)
                if (sys_mount_setattr(writable[i], AT_RECURSIVE, 0, MOUNT_ATTR_RDONLY) < 0 &&
                    errno != ENOENT && errno != EINVAL)
                        return err_set(e, -errno, "%s read-write: %m", writable[i]);
        for (size_t i = 0; i < ELEMENTSOF(own); i++)
                if (sys_mount_setattr(own[i], AT_RECURSIVE, 0, MOUNT_ATTR_RDONLY) < 0)
                        return err_set(e, -errno, "%s read-write: %m", own[i]);
        return 0;
}

/* The seccomp filter of the dropped warrend: an allowlist, on every
 * thread (TSYNC), every other syscall EPERM. The set is what warrend
 * itself (glibc, libuv, nghttp2, OpenSSL, SQLite, protobuf-c, jansson,
 * pthreads) and the programs it still runs after the drop (mkfs.ext4 for
 * disk templates, through posix_spawn) were seen to ask for under the e2e
 * suite run dropped (`WARREN_DROP=1`), recorded with
 * WARREN_SECCOMP_RECORD=1 (below), plus their obvious siblings (the *at
 * form of a call, the 64-bit form). Not in it, among others: every mount
 * call, pivot_root, chroot, setns, unshare, ptrace (but in ASan builds),
 * process_vm_*, kcmp, bpf, perf_event_open, userfaultfd, the module and
 * kexec calls, reboot, swapon/off, acct, quotactl, syslog, iopl/ioperm,
 * the clock setters, the keyring, name_to_handle_at/open_by_handle_at,
 * set*id, capset, personality, io_uring, *xattr writes. */
static const int drop_allowed[] = {
        /* files */
        SCMP_SYS(read),
        SCMP_SYS(write),
        SCMP_SYS(readv),
        SCMP_SYS(writev),
        SCMP_SYS(pread64),
        SCMP_SYS(pwrite64),
        SCMP_SYS(preadv),
        SCMP_SYS(pwritev),
        SCMP_SYS(preadv2),
        SCMP_SYS(pwritev2),
        SCMP_SYS(open),
        SCMP_SYS(openat),
        SCMP_SYS(openat2),
        SCMP_SYS(creat),
        SCMP_SYS(close),
        SCMP_SYS(close_range),
        SCMP_SYS(dup),
        SCMP_SYS(dup2),
        SCMP_SYS(dup3),
        SCMP_SYS(stat),
        SCMP_SYS(fstat),
        SCMP_SYS(lstat),
        SCMP_SYS(newfstatat),
        SCMP_SYS(statx),
        SCMP_SYS(statfs),
        SCMP_SYS(fstatfs),
        SCMP_SYS(lseek),
        SCMP_SYS(access),
        SCMP_SYS(faccessat),
        SCMP_SYS(faccessat2),
        SCMP_SYS(fcntl),
        SCMP_SYS(flock),
        SCMP_SYS(fsync),
        SCMP_SYS(fdatasync),
        SCMP_SYS(sync_file_range),
        SCMP_SYS(syncfs),
        SCMP_SYS(truncate),
        SCMP_SYS(ftruncate),
        SCMP_SYS(fallocate),
        SCMP_SYS(fadvise64),
        SCMP_SYS(getdents),
        SCMP_SYS(getdents64),
        SCMP_SYS(getcwd),
        SCMP_SYS(chdir),
        SCMP_SYS(fchdir),
        SCMP_SYS(rename),
        SCMP_SYS(renameat),
        SCMP_SYS(renameat2),
        SCMP_SYS(mkdir),
        SCMP_SYS(mkdirat),
        SCMP_SYS(rmdir),
        SCMP_SYS(link),
        SCMP_SYS(linkat),
        SCMP_SYS(unlink),
        SCMP_SYS(unlinkat),
        SCMP_SYS(symlink),
        SCMP_SYS(symlinkat),
        SCMP_SYS(readlink),
        SCMP_SYS(readlinkat),
        SCMP_SYS(chmod),
        SCMP_SYS(fchmod),
        SCMP_SYS(fchmodat),
        SCMP_SYS(chown),
        SCMP_SYS(fchown),
        SCMP_SYS(fchownat),
        SCMP_SYS(lchown),
        SCMP_SYS(umask),
        SCMP_SYS(utimensat),
        SCMP_SYS(utimes),
        SCMP_SYS(copy_file_range),
        SCMP_SYS(sendfile),
        SCMP_SYS(splice),
        SCMP_SYS(tee),
        SCMP_SYS(memfd_create),
        SCMP_SYS(ioctl),
        SCMP_SYS(getxattr),
        SCMP_SYS(fgetxattr),
        SCMP_SYS(lgetxattr),
        SCMP_SYS(listxattr),
        SCMP_SYS(flistxattr),
        SCMP_SYS(llistxattr),
        SCMP_SYS(pipe),
        SCMP_SYS(pipe2),
        SCMP_SYS(mknodat),
        SCMP_SYS(mknod), /* FIFOs only: no CAP_MKNOD for devices */
        /* memory */
        SCMP_SYS(brk),
        SCMP_SYS(mmap),
        SCMP_SYS(munmap),
        SCMP_SYS(mremap),
        SCMP_SYS(mprotect),
        SCMP_SYS(madvise),
        SCMP_SYS(msync),
        SCMP_SYS(mincore),
        SCMP_SYS(membarrier),
        SCMP_SYS(mlock),
        SCMP_SYS(munlock),
        /* events, time, signals */
        SCMP_SYS(poll),
        SCMP_SYS(ppoll),
        SCMP_SYS(select),
        SCMP_SYS(pselect6),
        SCMP_SYS(epoll_create),
        SCMP_SYS(epoll_create1),
        SCMP_SYS(epoll_ctl),
        SCMP_SYS(epoll_wait),
        SCMP_SYS(epoll_pwait),
        SCMP_SYS(epoll_pwait2),
        SCMP_SYS(eventfd),
        SCMP_SYS(eventfd2),
        SCMP_SYS(signalfd),
        SCMP_SYS(signalfd4),
        SCMP_SYS(timerfd_create),
        SCMP_SYS(timerfd_settime),
        SCMP_SYS(timerfd_gettime),
        SCMP_SYS(inotify_init1),
        SCMP_SYS(inotify_add_watch),
        SCMP_SYS(inotify_rm_watch),
        SCMP_SYS(nanosleep),
        SCMP_SYS(clock_nanosleep),
        SCMP_SYS(clock_gettime),
        SCMP_SYS(clock_getres),
        SCMP_SYS(gettimeofday),
        SCMP_SYS(time),
        SCMP_SYS(times),
        SCMP_SYS(rt_sigaction),
        SCMP_SYS(rt_sigprocmask),
        SCMP_SYS(rt_sigreturn),
        SCMP_SYS(rt_sigtimedwait),
        SCMP_SYS(rt_sigpending),
        SCMP_SYS(rt_sigsuspend),
        SCMP_SYS(sigaltstack),
        SCMP_SYS(restart_syscall),
        SCMP_SYS(alarm),
        SCMP_SYS(pause),
        /* processes and threads (clone: below) */
        SCMP_SYS(fork),
        SCMP_SYS(vfork),
        SCMP_SYS(execve),
        SCMP_SYS(execveat),
        SCMP_SYS(exit),
        SCMP_SYS(exit_group),
        SCMP_SYS(wait4),
        SCMP_SYS(waitid),
        SCMP_SYS(kill),
        SCMP_SYS(tgkill),
        SCMP_SYS(tkill),
        SCMP_SYS(pidfd_open),
        SCMP_SYS(pidfd_send_signal),
        SCMP_SYS(pidfd_getfd),
        SCMP_SYS(futex),
        SCMP_SYS(futex_waitv),
        SCMP_SYS(set_robust_list),
        SCMP_SYS(get_robust_list),
        SCMP_SYS(set_tid_address),
        SCMP_SYS(rseq),
        SCMP_SYS(arch_prctl),
        SCMP_SYS(prctl),
        SCMP_SYS(sched_yield),
        SCMP_SYS(sched_getaffinity),
        SCMP_SYS(sched_setaffinity),
        SCMP_SYS(sched_getparam),
        SCMP_SYS(sched_getscheduler),
        SCMP_SYS(sched_get_priority_max),
        SCMP_SYS(sched_get_priority_min),
        SCMP_SYS(getpriority),
        SCMP_SYS(setpriority),
        SCMP_SYS(getcpu),
        SCMP_SYS(getpid),
        SCMP_SYS(getppid),
        SCMP_SYS(gettid),
        SCMP_SYS(getuid),
        SCMP_SYS(geteuid),
        SCMP_SYS(getgid),
        SCMP_SYS(getegid),
        SCMP_SYS(getgroups),
        SCMP_SYS(getresuid),
        SCMP_SYS(getresgid),
        SCMP_SYS(getpgrp),
        SCMP_SYS(getpgid),
        SCMP_SYS(getsid),
        SCMP_SYS(setsid),
        SCMP_SYS(setpgid),
        SCMP_SYS(capget),
        SCMP_SYS(getrlimit),
        SCMP_SYS(setrlimit),
        SCMP_SYS(prlimit64),
        SCMP_SYS(getrusage),
        SCMP_SYS(sysinfo),
        SCMP_SYS(uname),
        SCMP_SYS(getrandom),
        SCMP_SYS(ioprio_get),
        /* sockets */
        SCMP_SYS(socket),
        SCMP_SYS(socketpair),
        SCMP_SYS(connect),
        SCMP_SYS(accept),
        SCMP_SYS(accept4),
        SCMP_SYS(bind),
        SCMP_SYS(listen),
        SCMP_SYS(getsockname),
        SCMP_SYS(getpeername),
        SCMP_SYS(sendto),
        SCMP_SYS(recvfrom),
        SCMP_SYS(sendmsg),
        SCMP_SYS(recvmsg),
        SCMP_SYS(sendmmsg),
        SCMP_SYS(recvmmsg),
        SCMP_SYS(shutdown),
        SCMP_SYS(setsockopt),
        SCMP_SYS(getsockopt),
#if WR_ASAN /* LeakSanitizer's leak check at exit */
        SCMP_SYS(ptrace),
#endif
};

/* WARREN_SECCOMP_RECORD=1 (in warrend's environment; for recording the
 * set above, never for production): a syscall outside the list is
 * allowed and logged by the kernel (SCMP_ACT_LOG: "audit: type=1326 …
 * syscall=N" in the kernel log), not refused. */
static bool seccomp_record(void) {
        const char *v = getenv("WARREN_SECCOMP_RECORD");
        return v && strcmp(v, "1") == 0;
}

static int seccomp_install(struct wr_err *e) {
        bool record = seccomp_record();
        if (record)
                log_warn("WARREN_SECCOMP_RECORD=1: syscalls outside warrend's allowlist are "
                         "logged by the kernel, not refused (for recording the list only)");
        scmp_filter_ctx ctx = seccomp_init(record ? SCMP_ACT_LOG : SCMP_ACT_ERRNO(EPERM));
        if (!ctx)
                return err_set(e, -ENOMEM, "seccomp: out of memory");
        int r = seccomp_attr_set(ctx, SCMP_FLTATR_CTL_TSYNC, 1);
        /* a binary tree of syscall numbers, not a list walked on every
         * syscall of the daemon */
        if (r == 0)
                r = seccomp_attr_set(ctx, SCMP_FLTATR_CTL_OPTIMIZE, 2);
        for (size_t i = 0; i < ELEMENTSOF(drop_allowed) && r == 0; i++)
                /* a name this architecture lacks (open on arm64, ...)
                 * resolves to a negative pseudo number: skipped */
                if (drop_allowed[i] >= 0)
                        r = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, drop_allowed[i], 0);
        /* clone: processes and threads, never a new namespace; clone3's
         * flags live in memory the filter cannot read: ENOSYS, and glibc
         * falls back to clone (CLONE_NEWTIME exists only for clone3) */
        const uint64_t ns = CLONE_NEWNS | CLONE_NEWUTS | CLONE_NEWIPC | CLONE_NEWUSER |
                            CLONE_NEWPID | CLONE_NEWNET | CLONE_NEWCGROUP;
        if (r == 0)
                r = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(clone), 1,
                                     SCMP_A0(SCMP_CMP_MASKED_EQ, ns, 0));
        if (r == 0)
                r = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(ENOSYS), SCMP_SYS(clone3), 0);
        if (r == 0)
                r = seccomp_load(ctx);
        seccomp_release(ctx);
        return r < 0 ? err_set(e, r, "seccomp: %s", strerror(-r)) : 0;
}

int drop_apply(const char *state_dir, const struct drop_user *u, struct wr_err *e) {
        if (geteuid() != 0)
                return err_set(e, -EPERM, "--user: warrend must start as root to drop");
        int r = mount_ns(state_dir, e);
        if (r < 0)
                return err_prefix(e, r, "--user %s", u->name);
        /* the bounding set, while CAP_SETPCAP is still held (this thread;
         * threads made from now on inherit it) */
        for (int c = 0; c <= CAP_LAST_CAP; c++)
                if (prctl(PR_CAPBSET_DROP, c, 0, 0, 0) < 0 && errno != EINVAL)
                        return err_set(e, -errno, "--user %s: drop bounding capability %d: %m",
                                       u->name, c);
        (void) prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0);
        /* glibc applies these to every thread */
        if (setgroups(0, NULL) < 0 || setresgid(u->gid, u->gid, u->gid) < 0 ||
            setresuid(u->uid, u->uid, u->uid) < 0)
                return err_set(e, -errno, "--user %s: drop to uid %u gid %u: %m", u->name,
                               (unsigned) u->uid, (unsigned) u->gid);
        if (setuid(0) == 0)
                return err_set(e, -EPERM, "--user %s: could regain uid 0", u->name);
        cap_t caps = cap_init(); /* all clear, the inheritable set too */
        if (!caps || cap_set_proc(caps) < 0) {
                r = -errno;
                if (caps)
                        cap_free(caps);
                return err_set(e, r, "--user %s: clear capabilities: %s", u->name, strerror(-r));
        }
        cap_free(caps);
        if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
                return err_set(e, -errno, "--user %s: no_new_privs: %m", u->name);
        /* no ptrace and no /proc/PID/mem for another process of the same
         * user (the secrets key and tokens warrend holds) */
        if (prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) < 0)
                return err_set(e, -errno, "--user %s: not dumpable: %m", u->name);
        r = seccomp_install(e);
        if (r < 0)
                return err_prefix(e, r, "--user %s", u->name);
        log_info("dropped to user %s (uid %u gid %u): no capabilities, no_new_privs, seccomp, "
                 "every mount read-only but %s, /dev and /proc",
                 u->name, (unsigned) u->uid, (unsigned) u->gid, state_dir);
        return 0;
}
