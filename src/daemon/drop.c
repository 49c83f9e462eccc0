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

/* The seccomp filter of the dropped warrend: allowed by default, EPERM
 * for what a process without capabilities has no business asking (most
 * would fail on capabilities anyway; the filter makes the kernel code
 * behind them unreachable), on every thread (TSYNC). */
static int seccomp_install(struct wr_err *e) {
        static const int deny[] = {
                SCMP_SYS(mount),
                SCMP_SYS(umount2),
                SCMP_SYS(pivot_root),
                SCMP_SYS(chroot),
                SCMP_SYS(open_tree),
                SCMP_SYS(move_mount),
                SCMP_SYS(fsopen),
                SCMP_SYS(fsconfig),
                SCMP_SYS(fsmount),
                SCMP_SYS(fspick),
                SCMP_SYS(mount_setattr),
                SCMP_SYS(setns),
                SCMP_SYS(unshare),
#if !WR_ASAN /* LeakSanitizer's leak check at exit */
                SCMP_SYS(ptrace),
#endif
                SCMP_SYS(process_vm_readv),
                SCMP_SYS(process_vm_writev),
                SCMP_SYS(kcmp),
                SCMP_SYS(bpf),
                SCMP_SYS(perf_event_open),
                SCMP_SYS(userfaultfd),
                SCMP_SYS(kexec_load),
                SCMP_SYS(kexec_file_load),
                SCMP_SYS(init_module),
                SCMP_SYS(finit_module),
                SCMP_SYS(delete_module),
                SCMP_SYS(reboot),
                SCMP_SYS(swapon),
                SCMP_SYS(swapoff),
                SCMP_SYS(acct),
                SCMP_SYS(quotactl),
                SCMP_SYS(syslog),
                SCMP_SYS(iopl),
                SCMP_SYS(ioperm),
                SCMP_SYS(settimeofday),
                SCMP_SYS(clock_settime),
                SCMP_SYS(clock_adjtime),
                SCMP_SYS(adjtimex),
                SCMP_SYS(sethostname),
                SCMP_SYS(setdomainname),
                SCMP_SYS(add_key),
                SCMP_SYS(request_key),
                SCMP_SYS(keyctl),
                SCMP_SYS(name_to_handle_at),
                SCMP_SYS(open_by_handle_at),
                SCMP_SYS(lookup_dcookie),
                SCMP_SYS(vhangup),
                SCMP_SYS(personality),
                SCMP_SYS(setuid),
                SCMP_SYS(setgid),
                SCMP_SYS(setreuid),
                SCMP_SYS(setregid),
                SCMP_SYS(setresuid),
                SCMP_SYS(setresgid),
                SCMP_SYS(setgroups),
                SCMP_SYS(setfsuid),
                SCMP_SYS(setfsgid),
                SCMP_SYS(capset),
        };
        scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_ALLOW);
        if (!ctx)
                return err_set(e, -ENOMEM, "seccomp: out of memory");
        int r = seccomp_attr_set(ctx, SCMP_FLTATR_CTL_TSYNC, 1);
        /* a binary tree of syscall numbers, not a list walked on every
         * syscall of the daemon */
        if (r == 0)
                r = seccomp_attr_set(ctx, SCMP_FLTATR_CTL_OPTIMIZE, 2);
        for (size_t i = 0; i < ELEMENTSOF(deny) && r == 0; i++)
                r = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), deny[i], 0);
        /* clone: processes and threads, never a new namespace (one rule
         * per flag: any of them set is refused); clone3's flags live in
         * memory the filter cannot read: ENOSYS, and glibc falls back to
         * clone (CLONE_NEWTIME exists only for clone3) */
        static const uint64_t ns[] = {CLONE_NEWNS,  CLONE_NEWUTS, CLONE_NEWIPC,   CLONE_NEWUSER,
                                      CLONE_NEWPID, CLONE_NEWNET, CLONE_NEWCGROUP};
        for (size_t i = 0; i < ELEMENTSOF(ns) && r == 0; i++)
                r = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(clone), 1,
                                     SCMP_A0(SCMP_CMP_MASKED_EQ, ns[i], ns[i]));
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
