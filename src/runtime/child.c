/* SPDX-License-Identifier: Apache-2.0 */
/* The privileged path: what the sandbox's first process does between
 * clone3() and exec of warren-init. One file on purpose, to be audited
 * whole.
 *
 * Runs in fresh mount, pid, uts, ipc, net (and cgroup) namespaces as PID 1,
 * still as full root, with the host's filesystem visible. It builds the
 * root (overlayfs), mounts what a sandbox needs inside it, pivots into it,
 * drops privileges and execs warren-init from a sealed memfd.
 *
 * Rules here:
 *  - async-signal-safe only: raw syscalls and snprintf, no malloc, no locks
 *    (the parent may be multi-threaded; clone3 runs no atfork handlers);
 *  - the image is hostile: every target inside the new root is resolved
 *    with openat2(RESOLVE_IN_ROOT | RESOLVE_NO_SYMLINKS), created when
 *    missing, replaced when it is a symlink or of the wrong type (the
 *    replacement lands in the sandbox's own upper dir), its inode type
 *    checked on the opened fd, and mounted by fd (new mount API: fsopen /
 *    fsmount / open_tree / move_mount), never by a path string;
 *  - any failure is reported as a struct wr_err over err_fd, then _exit. */

#include <errno.h>
#include <fcntl.h>
#include <linux/capability.h>
#include <linux/seccomp.h>
#include <net/if.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "runtime/runtime-internal.h"

#define RES_STRICT (RESOLVE_IN_ROOT | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS)
#define RES_IN_ROOT (RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS)
#define FD_FLOOR 10

static const struct rt_child *C; /* for fail(): set once at entry */

_printf_(2, 3) _noreturn_ static void fail(int err, const char *fmt, ...) {
        struct wr_err e;
        memset(&e, 0, sizeof(e));
        e.code = -(err > 0 ? err : EIO);
        e.fault = WR_FAULT_SERVICE;
        char what[WR_ERR_MSG_MAX];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(what, sizeof(what), fmt, ap);
        va_end(ap);
        const char *desc = strerrordesc_np(-e.code);
        snprintf(e.msg, sizeof(e.msg), "%s: %s", what, desc ? desc : "unknown error");
        if (C) {
                ssize_t w = write(C->err_fd, &e, sizeof(e));
                (void) w;
        }
        _exit(127);
}

/* ---- mounting by fd ---- */

struct opt {
        const char *key, *val;
};

/* A detached mount of a new filesystem instance. */
static int fs_new(const char *type, const struct opt *opts, unsigned attrs) {
        int fs = sys_fsopen(type, FSOPEN_CLOEXEC);
        if (fs < 0)
                fail(errno, "fsopen %s", type);
        if (sys_fsconfig(fs, RT_FSCONFIG_SET_STRING, "source", type, 0) < 0)
                fail(errno, "configure %s: source", type);
        for (; opts && opts->key; opts++)
                if (sys_fsconfig(fs, opts->val ? RT_FSCONFIG_SET_STRING : RT_FSCONFIG_SET_FLAG,
                                 opts->key, opts->val, 0) < 0)
                        fail(errno, "configure %s: %s", type, opts->key);
        if (sys_fsconfig(fs, RT_FSCONFIG_CMD_CREATE, NULL, NULL, 0) < 0)
                fail(errno, "create %s instance", type);
        int m = sys_fsmount(fs, FSMOUNT_CLOEXEC, attrs);
        if (m < 0)
                fail(errno, "fsmount %s", type);
        close(fs);
        return m;
}

static void attach(int mnt, int target, const char *what) {
        if (sys_move_mount(mnt, "", target, "", MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH) <
            0)
                fail(errno, "mount %s", what);
        close(mnt);
}

/* Clone the mount tree at dfd/path (path "" = dfd itself) and set attrs. */
static int bind_clone(int dfd, const char *path, bool recursive, unsigned attrs, const char *what) {
        unsigned fl = OPEN_TREE_CLONE | O_CLOEXEC | (path[0] ? 0 : AT_EMPTY_PATH) |
                      (recursive ? AT_RECURSIVE : 0);
        int t = sys_open_tree(dfd, path, fl);
        if (t < 0)
                fail(errno, "bind %s", what);
        if (attrs) {
                struct rt_mount_attr a = {.attr_set = attrs};
                if (sys_mount_setattr(t, "", AT_EMPTY_PATH | (recursive ? AT_RECURSIVE : 0), &a) <
                    0)
                        fail(errno, "set attributes of %s", what);
        }
        return t;
}

/* ---- resolving targets inside the new root ---- */

enum kind { K_DIR, K_FILE };

static bool kind_ok(mode_t m, enum kind k) {
        return k == K_DIR ? S_ISDIR(m) : S_ISREG(m);
}

/* Split "a/b/c" into parent "a/b" (or ".") and last "c" inside buf. */
static void split(const char *rel, char *parent, size_t psize, const char **last) {
        const char *s = strrchr(rel, '/');
        if (!s) {
                snprintf(parent, psize, ".");
                *last = rel;
                return;
        }
        snprintf(parent, psize, "%.*s", (int) (s - rel), rel);
        *last = s + 1;
}

/* Make rel (relative to rootfd; every component but the last must already
 * be a real directory) an inode of kind k and return an O_PATH fd to it.
 * A symlink or an inode of another kind at rel is replaced (removed, then
 * created afresh). A missing entry is created. The returned fd's type is
 * checked, so a mount through it lands exactly on what was checked. */
static int target(int rootfd, const char *rel, enum kind k, mode_t mode) {
        char parent[256];
        const char *last;
        split(rel, parent, sizeof(parent), &last);
        int pfd = sys_openat2(rootfd, parent, O_PATH | O_DIRECTORY | O_CLOEXEC, RES_STRICT);
        if (pfd < 0)
                fail(errno, "resolve /%s in the sandbox root", parent);
        struct stat st;
        if (fstatat(pfd, last, &st, AT_SYMLINK_NOFOLLOW) == 0) {
                /* hostile or odd image: a symlink (e.g. /proc -> /) or a file
                 * where a directory belongs. Replace it in the upper layer. */
                if (!kind_ok(st.st_mode, k) &&
                    unlinkat(pfd, last, S_ISDIR(st.st_mode) ? AT_REMOVEDIR : 0) < 0)
                        fail(errno, "replace /%s (not a %s)", rel,
                             k == K_DIR ? "directory" : "file");
        } else if (errno != ENOENT) {
                fail(errno, "stat /%s", rel);
        }
        if (k == K_DIR) {
                if (mkdirat(pfd, last, mode) < 0 && errno != EEXIST)
                        fail(errno, "mkdir /%s", rel);
        } else {
                int f = openat(pfd, last, O_WRONLY | O_CREAT | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY,
                               mode);
                if (f < 0)
                        fail(errno, "create /%s", rel);
                close(f);
        }
        int t = openat(pfd, last, O_PATH | O_NOFOLLOW | O_CLOEXEC);
        if (t < 0)
                fail(errno, "open /%s", rel);
        if (fstat(t, &st) < 0 || !kind_ok(st.st_mode, k))
                fail(ENOTDIR, "/%s changed type under us", rel);
        close(pfd);
        return t;
}

/* Open an existing path inside the root (fresh kernel filesystems such as
 * /proc), refusing symlinks. -1 with errno ENOENT when absent. */
static int existing(int rootfd, const char *rel) {
        return sys_openat2(rootfd, rel, O_PATH | O_NOFOLLOW | O_CLOEXEC, RES_STRICT);
}

/* ---- the steps ---- */

static void join_cgroups(const struct rt_child *c) {
        for (size_t i = 0; i < c->n_cg_fds; i++)
                if (write(c->cg_fds[i], "0", 1) != 1)
                        fail(errno, "join cgroup");
        if (c->unshare_cgroupns && unshare(CLONE_NEWCGROUP) < 0)
                fail(errno, "unshare cgroup namespace");
}

/* Writable-layer limit: upper and work live on a size-capped tmpfs over
 * <dir>/upper, mounted in the sandbox's own mount namespace (nothing on
 * the host side; it goes away with the namespace). */
static void mount_scratch(const struct rt_child *c) {
        if (!c->scratch)
                return;
        if (mount("warren-upper", c->scratch, "tmpfs", MS_NOSUID | MS_NODEV, c->scratch_opt) < 0)
                fail(errno, "mount the writable layer's tmpfs (%s)", c->scratch_opt);
        if (mkdir(c->upper, 0755) < 0)
                fail(errno, "mkdir %s", c->upper);
        if (mkdir(c->work, 0700) < 0)
                fail(errno, "mkdir %s", c->work);
}

/* Attach the detached mount m at c->rootfs. The mount point is looked up
 * in this (new) mount namespace: an fd opened by the parent points into
 * the host's. */
static void attach_at_rootfs(const struct rt_child *c, int m, const char *what) {
        int mp = open(c->rootfs, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (mp < 0)
                fail(errno, "open %s", c->rootfs);
        if (sys_move_mount(m, "", mp, "", MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH) < 0)
                fail(errno, "mount %s on %s", what, c->rootfs);
        close(mp);
}

static int mount_root(const struct rt_child *c) {
        const struct rt_sandbox_config *cfg = c->cfg;
        int fs = sys_fsopen("overlay", FSOPEN_CLOEXEC);
        if (fs < 0)
                fail(errno, "fsopen overlay");
        if (sys_fsconfig(fs, RT_FSCONFIG_SET_STRING, "source", "warren", 0) < 0)
                fail(errno, "configure overlay: source");
        /* one layer at a time (Linux >= 6.8: no option-length limit, no
         * escaping); older kernels get the joined, escaped string */
        bool plus = true;
        for (size_t i = 0; i < cfg->n_layers && plus; i++)
                if (sys_fsconfig(fs, RT_FSCONFIG_SET_STRING, "lowerdir+", cfg->layers[i], 0) < 0) {
                        if (i == 0 && errno == EINVAL)
                                plus = false;
                        else
                                fail(errno, "overlay layer %s", cfg->layers[i]);
                }
        if (!plus && sys_fsconfig(fs, RT_FSCONFIG_SET_STRING, "lowerdir", c->lowerdir, 0) < 0)
                fail(errno, "overlay lowerdir");
        if (sys_fsconfig(fs, RT_FSCONFIG_SET_STRING, "upperdir", c->upper, 0) < 0)
                fail(errno, "overlay upperdir %s", c->upper);
        if (sys_fsconfig(fs, RT_FSCONFIG_SET_STRING, "workdir", c->work, 0) < 0)
                fail(errno, "overlay workdir %s", c->work);
        if (sys_fsconfig(fs, RT_FSCONFIG_CMD_CREATE, NULL, NULL, 0) < 0)
                fail(errno, "mount overlay (is %s on a filesystem overlayfs accepts as upper?)",
                     c->upper);
        int m = sys_fsmount(fs, FSMOUNT_CLOEXEC, MOUNT_ATTR_NODEV);
        if (m < 0)
                fail(errno, "fsmount overlay");
        close(fs);
        attach_at_rootfs(c, m, "overlay");
        /* m now names the root of the attached overlay */
        return m;
}

static void mount_proc(int rootfd) {
        int t = target(rootfd, "proc", K_DIR, 0555);
        attach(fs_new("proc", NULL, MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | MOUNT_ATTR_NOEXEC), t,
               "/proc");
        close(t);
}

static const char *const masked[] = {
        "acpi",          "asound",      "interrupts", "kcore",      "keys",
        "latency_stats", "sched_debug", "scsi",       "timer_list", "timer_stats",
};
static const char *const proc_ro[] = {"bus", "fs", "irq", "sys", "sysrq-trigger"};

static void mask_path(int rootfd, const char *rel) {
        int t = existing(rootfd, rel);
        if (t < 0) {
                if (errno == ENOENT)
                        return;
                fail(errno, "resolve /%s", rel);
        }
        struct stat st;
        if (fstat(t, &st) < 0)
                fail(errno, "stat /%s", rel);
        int m;
        if (S_ISDIR(st.st_mode)) {
                static const struct opt o[] = {{"size", "0"}, {"mode", "0555"}, {NULL, NULL}};
                m = fs_new("tmpfs", o,
                           MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV |
                                   MOUNT_ATTR_NOEXEC);
        } else {
                m = bind_clone(AT_FDCWD, "/dev/null", false,
                               MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NOEXEC,
                               "/dev/null");
        }
        char what[128];
        snprintf(what, sizeof(what), "mask /%s", rel);
        attach(m, t, what);
        close(t);
}

static void proc_harden(int rootfd) {
        char rel[64];
        for (size_t i = 0; i < ELEMENTSOF(masked); i++) {
                snprintf(rel, sizeof(rel), "proc/%s", masked[i]);
                mask_path(rootfd, rel);
        }
        for (size_t i = 0; i < ELEMENTSOF(proc_ro); i++) {
                snprintf(rel, sizeof(rel), "proc/%s", proc_ro[i]);
                int t = existing(rootfd, rel);
                if (t < 0) {
                        if (errno == ENOENT)
                                continue;
                        fail(errno, "resolve /%s", rel);
                }
                int m = bind_clone(t, "", true,
                                   MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV |
                                           MOUNT_ATTR_NOEXEC,
                                   rel);
                attach(m, t, rel);
                close(t);
        }
}

static const char *const devices[] = {"null", "zero", "full", "random", "urandom", "tty"};

static void mount_dev(int rootfd) {
        int t = target(rootfd, "dev", K_DIR, 0755);
        static const struct opt o[] = {{"mode", "0755"}, {"size", "65536k"}, {NULL, NULL}};
        attach(fs_new("tmpfs", o, MOUNT_ATTR_NOSUID | MOUNT_ATTR_NOEXEC), t, "/dev");
        close(t);
        /* everything below is our fresh tmpfs: no hostile content */
        int dev = existing(rootfd, "dev");
        if (dev < 0)
                fail(errno, "open /dev");
        char src[32], rel[32];
        for (size_t i = 0; i < ELEMENTSOF(devices); i++) {
                snprintf(src, sizeof(src), "/dev/%s", devices[i]);
                snprintf(rel, sizeof(rel), "dev/%s", devices[i]);
                int f = target(rootfd, rel, K_FILE, 0666);
                attach(bind_clone(AT_FDCWD, src, false, MOUNT_ATTR_NOSUID | MOUNT_ATTR_NOEXEC, src),
                       f, rel);
                close(f);
        }
        static const struct {
                const char *target, *name;
        } links[] = {
                {"pts/ptmx", "ptmx"},          {"/proc/self/fd", "fd"},
                {"/proc/self/fd/0", "stdin"},  {"/proc/self/fd/1", "stdout"},
                {"/proc/self/fd/2", "stderr"},
        };
        for (size_t i = 0; i < ELEMENTSOF(links); i++)
                if (symlinkat(links[i].target, dev, links[i].name) < 0)
                        fail(errno, "symlink /dev/%s", links[i].name);

        t = target(rootfd, "dev/pts", K_DIR, 0755);
        static const struct opt pts[] = {
                {"newinstance", NULL}, {"ptmxmode", "0666"}, {"mode", "0620"}, {NULL, NULL}};
        attach(fs_new("devpts", pts, MOUNT_ATTR_NOSUID | MOUNT_ATTR_NOEXEC), t, "/dev/pts");
        close(t);

        t = target(rootfd, "dev/shm", K_DIR, 01777);
        static const struct opt shm[] = {{"mode", "1777"}, {"size", "65536k"}, {NULL, NULL}};
        attach(fs_new("tmpfs", shm, MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | MOUNT_ATTR_NOEXEC), t,
               "/dev/shm");
        close(t);

        t = target(rootfd, "dev/mqueue", K_DIR, 0755);
        attach(fs_new("mqueue", NULL, MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | MOUNT_ATTR_NOEXEC), t,
               "/dev/mqueue");
        close(t);
        close(dev);
}

static void mount_sys(int rootfd) {
        int t = target(rootfd, "sys", K_DIR, 0555);
        attach(fs_new("sysfs", NULL,
                      MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | MOUNT_ATTR_NOEXEC),
               t, "/sys");
        close(t);
        mask_path(rootfd, "sys/firmware");
}

static void mount_tmpfs(int rootfd, const char *rel, const char *mode, const char *size) {
        int t = target(rootfd, rel, K_DIR, 0755);
        const struct opt o[] = {{"mode", mode}, {"size", size}, {NULL, NULL}};
        char what[32];
        snprintf(what, sizeof(what), "/%s", rel);
        attach(fs_new("tmpfs", o, MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV), t, what);
        close(t);
}

/* Write content to /etc/<name> inside the root (upper layer). /etc may be
 * a symlink inside the root (followed, but never out of it); the file
 * itself is replaced when it is a symlink or not a regular file. */
static void write_etc(int rootfd, const char *name, const char *content) {
        int etc = sys_openat2(rootfd, "etc", O_PATH | O_DIRECTORY | O_CLOEXEC, RES_IN_ROOT);
        if (etc < 0 && errno == ENOENT) {
                if (mkdirat(rootfd, "etc", 0755) < 0)
                        fail(errno, "mkdir /etc");
                etc = sys_openat2(rootfd, "etc", O_PATH | O_DIRECTORY | O_CLOEXEC, RES_STRICT);
        }
        if (etc < 0)
                fail(errno, "open /etc");
        struct stat st;
        if (fstatat(etc, name, &st, AT_SYMLINK_NOFOLLOW) == 0 && !S_ISREG(st.st_mode) &&
            unlinkat(etc, name, S_ISDIR(st.st_mode) ? AT_REMOVEDIR : 0) < 0)
                fail(errno, "replace /etc/%s", name);
        int f = openat(etc, name, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY,
                       0644);
        if (f < 0)
                fail(errno, "write /etc/%s", name);
        size_t n = strlen(content);
        if (write(f, content, n) != (ssize_t) n)
                fail(errno ? errno : EIO, "write /etc/%s", name);
        close(f);
        close(etc);
}

static void loopback_up(void) {
        int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
        if (s < 0)
                fail(errno, "socket for loopback");
        struct ifreq ifr;
        memset(&ifr, 0, sizeof(ifr));
        memcpy(ifr.ifr_name, "lo", 3);
        if (ioctl(s, SIOCGIFFLAGS, &ifr) < 0)
                fail(errno, "get loopback flags");
        ifr.ifr_flags |= IFF_UP;
        if (ioctl(s, SIOCSIFFLAGS, &ifr) < 0)
                fail(errno, "bring loopback up");
        close(s);
}

static void enter_root(int rootfd) {
        if (fchdir(rootfd) < 0)
                fail(errno, "chdir into rootfs");
        /* stack the old root on top of the new one, then detach it */
        if (sys_pivot_root(".", ".") < 0)
                fail(errno, "pivot_root");
        if (umount2(".", MNT_DETACH) < 0)
                fail(errno, "detach old root");
        if (chdir("/") < 0)
                fail(errno, "chdir /");
}

static void setup_fds(const struct rt_child *c) {
        int null0 = open("/dev/null", O_RDWR | O_CLOEXEC | O_NOCTTY);
        if (null0 < 0)
                fail(errno, "open /dev/null");
        /* above 0-3, which it is about to fill (a parked child has closed
         * everything, so open() may return 3) */
        int null = fcntl(null0, F_DUPFD_CLOEXEC, FD_FLOOR);
        if (null < 0)
                fail(errno, "move /dev/null fd");
        close(null0);
        int out = c->log_fd > 2 ? c->log_fd : null;
        if (dup2(null, 0) < 0 || dup2(out, 1) < 0 || dup2(out, 2) < 0)
                fail(errno, "set up init's stdio");
        if (dup2(c->ctl_fd, 3) < 0) /* dup2 clears FD_CLOEXEC on the copy */
                fail(errno, "pass control socket as fd 3");
        close(null);
}

static void drop_caps(const struct rt_child *c) {
        const struct rt_policy *p = c->policy;
        for (int cap = 0; cap <= p->cap_last; cap++)
                if (!(p->caps_keep & (1ULL << cap)) && prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) < 0 &&
                    errno != EINVAL)
                        fail(errno, "drop capability %d from the bounding set", cap);
        if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) < 0 && errno != EINVAL)
                fail(errno, "clear ambient capabilities");
        struct __user_cap_header_struct h = {.version = _LINUX_CAPABILITY_VERSION_3, .pid = 0};
        struct __user_cap_data_struct d[2];
        memset(d, 0, sizeof(d));
        d[0].effective = d[0].permitted = (uint32_t) p->caps_keep;
        d[1].effective = d[1].permitted = (uint32_t) (p->caps_keep >> 32);
        if (syscall(SYS_capset, &h, d) < 0)
                fail(errno, "set capabilities");
}

static int hoist(int fd) {
        if (fd < 0)
                return fd;
        int n = fcntl(fd, F_DUPFD_CLOEXEC, FD_FLOOR);
        if (n < 0)
                fail(errno, "move fd");
        return n;
}

/* hoist() for an fd of our own: the original is closed. */
static int hoist_close(int fd) {
        int n = hoist(fd);
        close(fd);
        return n;
}

/* Close every fd but 0-2 and the n in keep. */
static void close_others(const int *keep, size_t n) {
        unsigned lo = 3;
        for (;;) {
                unsigned next = ~0u; /* lowest kept fd >= lo */
                for (size_t i = 0; i < n; i++)
                        if (keep[i] >= (int) lo && (unsigned) keep[i] < next)
                                next = (unsigned) keep[i];
                if (next > lo)
                        (void) sys_close_range(lo, next == ~0u ? ~0u : next - 1, 0);
                if (next == ~0u)
                        return;
                lo = next + 1;
        }
}

static void loopback_up(void);

/* ---- the stage: kernel filesystems mounted before the root exists ----
 *
 * Everything a sandbox mounts that does not come from the image (/proc
 * with its masks, /dev, /sys, /run, /tmp) is mounted first on a small
 * private tmpfs, the stage, attached at <dir>/rootfs in the child's own
 * mount namespace; the loopback comes up here too. A warm-pool child does
 * this before it parks, so that taking it only mounts the overlay (on top
 * of the stage), moves each prepared mount onto its target inside the
 * root (resolved and checked there as always) and writes /etc. A plain
 * create runs the same steps back to back. The emptied stage stays behind
 * in the old root and goes away with it (pivot_root + detach). */

struct stage {
        int proc, dev, sys, tmp, run; /* O_PATH fds: roots of the prepared mounts */
        char tmp_opt[32];             /* size of the prepared /tmp */
};

static int stage_open(int stagefd, const char *rel) {
        int fd = sys_openat2(stagefd, rel, O_PATH | O_NOFOLLOW | O_DIRECTORY | O_CLOEXEC,
                             RES_STRICT);
        if (fd < 0)
                fail(errno, "open the prepared /%s", rel);
        return hoist_close(fd);
}

static void stage_prepare(const struct rt_child *c, struct stage *st) {
        static const struct opt o[] = {{"mode", "0700"}, {"size", "64k"}, {NULL, NULL}};
        int m = fs_new("tmpfs", o, MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | MOUNT_ATTR_NOEXEC);
        attach_at_rootfs(c, m, "the stage");
        /* m names the root of the attached stage: a fresh tmpfs, nothing
         * hostile in it */
        mount_proc(m);
        proc_harden(m);
        mount_dev(m);
        mount_sys(m);
        mount_tmpfs(m, "tmp", "1777", c->tmp_opt);
        mount_tmpfs(m, "run", "0755", "65536k");
        st->proc = stage_open(m, "proc");
        st->dev = stage_open(m, "dev");
        st->sys = stage_open(m, "sys");
        st->tmp = stage_open(m, "tmp");
        st->run = stage_open(m, "run");
        memcpy(st->tmp_opt, c->tmp_opt, sizeof(st->tmp_opt));
        close(m);
        loopback_up();
}

/* Move a prepared mount (with what is mounted below it) onto rel inside
 * the root. Consumes from. */
static void stage_move(int rootfd, int from, const char *rel, mode_t mode) {
        int t = target(rootfd, rel, K_DIR, mode);
        char what[32];
        snprintf(what, sizeof(what), "/%s", rel);
        attach(from, t, what);
        close(t);
}

/* ---- the root, built ahead when the layers are known ----
 *
 * A warm-pool child given layers at the prestart (the image the pool
 * expects) builds the whole root before it parks: overlay on top of the
 * stage, the prepared mounts moved in, /etc written for the prestart's
 * hostname. Taking it then checks that the request names the very same
 * layer directories (path order and dev/ino, so a re-imported image is
 * not mistaken for the old one) and no disk limit; /tmp of another size
 * and /etc files with other content are redone. Anything else is a
 * mismatch: a new overlay goes on top of the prepared root (with upper
 * and work dirs of its own), the prepared mounts move on into it, and the
 * prepared overlay goes away with the old root. */

struct layer_id {
        dev_t dev;
        ino_t ino;
};

static struct {
        bool built;
        struct stage mounts; /* second fds of the stage's mounts, now in the root */
        size_t n_layers;
        struct layer_id ids[RT_PARK_MAX_LAYERS];
        char hostname[72];
        char hosts[RT_HOSTS_MAX];
        const char *resolv_conf; /* the prestart's string (our copy of its memory) */
        char tmp_opt[32];
} prep;

static char upper_alt[PATH_MAX], work_alt[PATH_MAX];

static void copy_str(char *dst, size_t size, const char *src, const char *what) {
        size_t n = strlen(src);
        if (n >= size)
                fail(E2BIG, "%s too long", what);
        memcpy(dst, src, n + 1);
}

/* Mount the overlay on top of what is at c->rootfs, move the stage's
 * mounts into it and write /etc. Consumes the stage. Returns the root. */
static int root_build(const struct rt_child *c, struct stage *st) {
        mount_scratch(c);
        int rootfd = mount_root(c);
        stage_move(rootfd, st->proc, "proc", 0555);
        stage_move(rootfd, st->dev, "dev", 0755);
        stage_move(rootfd, st->sys, "sys", 0555);
        if (streq(c->tmp_opt, st->tmp_opt)) {
                stage_move(rootfd, st->tmp, "tmp", 0755);
        } else { /* another size than prepared: a new one */
                close(st->tmp);
                mount_tmpfs(rootfd, "tmp", "1777", c->tmp_opt);
        }
        stage_move(rootfd, st->run, "run", 0755);
        st->proc = st->dev = st->sys = st->tmp = st->run = -1;
        write_etc(rootfd, "hostname", c->hostname);
        write_etc(rootfd, "hosts", c->hosts);
        write_etc(rootfd, "resolv.conf", c->resolv_conf);
        return rootfd;
}

static void layer_ids(const struct rt_child *c, struct layer_id *ids) {
        for (size_t i = 0; i < c->cfg->n_layers; i++) {
                struct stat sb;
                if (stat(c->cfg->layers[i], &sb) < 0)
                        fail(errno, "layer %s", c->cfg->layers[i]);
                ids[i] = (struct layer_id){sb.st_dev, sb.st_ino};
        }
}

/* At the prestart: build the root for the layers we were given. */
static int root_prepare(const struct rt_child *c, struct stage *st) {
        layer_ids(c, prep.ids);
        prep.n_layers = c->cfg->n_layers;
        /* keep a handle on each mount: a mismatch moves them on */
        prep.mounts = *st;
        prep.mounts.proc = hoist(st->proc);
        prep.mounts.dev = hoist(st->dev);
        prep.mounts.sys = hoist(st->sys);
        prep.mounts.tmp = hoist(st->tmp);
        prep.mounts.run = hoist(st->run);
        int rootfd = root_build(c, st);
        copy_str(prep.hostname, sizeof(prep.hostname), c->hostname, "hostname");
        copy_str(prep.hosts, sizeof(prep.hosts), c->hosts, "hosts");
        copy_str(prep.tmp_opt, sizeof(prep.tmp_opt), c->tmp_opt, "tmp option");
        prep.resolv_conf = c->resolv_conf;
        prep.built = true;
        return rootfd;
}

/* At the claim: is the prepared root the one asked for? */
static bool root_matches(const struct rt_child *c) {
        if (!prep.built || c->scratch || c->cfg->n_layers != prep.n_layers)
                return false;
        for (size_t i = 0; i < prep.n_layers; i++) {
                struct stat sb;
                if (stat(c->cfg->layers[i], &sb) < 0 || sb.st_dev != prep.ids[i].dev ||
                    sb.st_ino != prep.ids[i].ino)
                        return false;
        }
        return true;
}

/* At the claim, the prepared root fits: redo what differs. */
static void root_update(const struct rt_child *c, int rootfd) {
        if (!streq(c->tmp_opt, prep.tmp_opt)) /* on top of the prepared one */
                mount_tmpfs(rootfd, "tmp", "1777", c->tmp_opt);
        if (!streq(c->hostname, prep.hostname))
                write_etc(rootfd, "hostname", c->hostname);
        if (!streq(c->hosts, prep.hosts))
                write_etc(rootfd, "hosts", c->hosts);
        if (!streq(c->resolv_conf, prep.resolv_conf))
                write_etc(rootfd, "resolv.conf", c->resolv_conf);
}

/* At the claim, it does not: a new root on top of it, with upper and
 * work dirs of their own (unless on the disk limit's tmpfs), and the
 * prepared mounts moved on into it. */
static int root_rebuild(struct rt_child *c, struct stage *st) {
        if (!c->scratch) {
                int n1 = snprintf(upper_alt, sizeof(upper_alt), "%s.1", c->upper);
                int n2 = snprintf(work_alt, sizeof(work_alt), "%s.1", c->work);
                if (n1 < 0 || (size_t) n1 >= sizeof(upper_alt) || n2 < 0 ||
                    (size_t) n2 >= sizeof(work_alt))
                        fail(ENAMETOOLONG, "upper dir path");
                if (mkdir(upper_alt, 0755) < 0 && errno != EEXIST)
                        fail(errno, "mkdir %s", upper_alt);
                if (mkdir(work_alt, 0700) < 0 && errno != EEXIST)
                        fail(errno, "mkdir %s", work_alt);
                c->upper = upper_alt;
                c->work = work_alt;
        }
        *st = prep.mounts;
        return root_build(c, st);
}

static char park_buf[RT_PARK_MAX];
static const char *park_layers[RT_PARK_MAX_LAYERS];
static struct rt_sandbox_config park_cfg;

/* Warm pool: wait for the rest of the config (see struct rt_park_hdr). */
static void park_receive(struct rt_child *c, const struct stage *st, int rootfd) {
        /* hold nothing of the daemon's while parked: not its other pipes
         * (EOF must reach the other parked children when it dies), not
         * its state dir lock */
        int keep[] = {c->err_fd,       c->ctl_fd,       c->init_fd,      c->log_fd,
                      c->park_fd,      st->proc,        st->dev,         st->sys,
                      st->tmp,         st->run,         rootfd,          prep.mounts.proc,
                      prep.mounts.dev, prep.mounts.sys, prep.mounts.tmp, prep.mounts.run};
        close_others(keep, ELEMENTSOF(keep));
        /* tell rt_sandbox_prestart that we are ready: a report with code 0 */
        struct wr_err ready;
        memset(&ready, 0, sizeof(ready));
        if (write(c->err_fd, &ready, sizeof(ready)) != (ssize_t) sizeof(ready))
                fail(errno ? errno : EIO, "report ready");
        size_t got = 0;
        for (;;) {
                ssize_t n = read(c->park_fd, park_buf + got, sizeof(park_buf) - 1 - got);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0)
                        fail(errno, "read the pool config");
                if (n == 0)
                        break;
                got += (size_t) n;
                if (got >= sizeof(park_buf) - 1)
                        fail(E2BIG, "pool config too large");
        }
        if (got == 0)
                _exit(0); /* the pool let go of this entry */
        close(c->park_fd);
        c->park_fd = -1;
        park_buf[got] = 0;
        struct rt_park_hdr h;
        if (got < sizeof(h))
                fail(EINVAL, "pool config truncated");
        memcpy(&h, park_buf, sizeof(h));
        if (h.magic != RT_PARK_MAGIC || h.n_layers == 0 || h.n_layers > RT_PARK_MAX_LAYERS)
                fail(EINVAL, "pool config malformed");
        const char *p = park_buf + sizeof(h), *end = park_buf + got;
        const char *s[9];
        for (size_t i = 0; i < 9 + h.n_layers; i++) {
                if (p >= end)
                        fail(EINVAL, "pool config truncated");
                if (i < 9)
                        s[i] = p;
                else
                        park_layers[i - 9] = p;
                p += strlen(p) + 1;
        }
        park_cfg = *c->cfg;
        park_cfg.hostname = s[0];
        park_cfg.layers = park_layers;
        park_cfg.n_layers = h.n_layers;
        park_cfg.resolv_conf = s[2];
        c->cfg = &park_cfg;
        c->hostname = s[0];
        size_t hl = strlen(s[1]);
        if (hl >= sizeof(c->hosts))
                fail(EINVAL, "pool config: hosts too long");
        memcpy(c->hosts, s[1], hl + 1);
        c->resolv_conf = s[2];
        size_t tl = strlen(s[3]);
        if (tl >= sizeof(c->tmp_opt))
                fail(EINVAL, "pool config: tmp option too long");
        memcpy(c->tmp_opt, s[3], tl + 1);
        c->upper = s[4];
        c->work = s[5];
        c->scratch = s[6][0] ? s[6] : NULL;
        size_t sl = strlen(s[7]);
        if (sl >= sizeof(c->scratch_opt))
                fail(EINVAL, "pool config: scratch option too long");
        memcpy(c->scratch_opt, s[7], sl + 1);
        c->lowerdir = s[8];
        c->nofile.rlim_cur = c->nofile.rlim_max = (rlim_t) h.nofile;
}

void rt_child_run(const struct rt_child *arg) {
        struct rt_child c = *arg;
        C = &c;
        /* the descriptors we keep must not sit where stdio and fd 3 go */
        c.err_fd = hoist(c.err_fd);
        c.ctl_fd = hoist(c.ctl_fd);
        c.init_fd = hoist(c.init_fd);
        if (c.park_fd >= 0)
                c.park_fd = hoist(c.park_fd);
        if (c.log_fd > 2)
                c.log_fd = hoist(c.log_fd);

        /* no controlling terminal (TIOCSTI into a host tty), not dumpable
         * while host fds are open, default signal dispositions for init */
        if (setsid() < 0)
                fail(errno, "setsid");
        if (prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) < 0)
                fail(errno, "set non-dumpable");
        for (int sig = 1; sig < _NSIG; sig++) {
                if (sig == SIGKILL || sig == SIGSTOP)
                        continue;
                struct sigaction sa = {.sa_handler = SIG_DFL};
                (void) sigaction(sig, &sa, NULL);
        }

        join_cgroups(&c);
        if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
                fail(errno, "make mounts private");
        struct stage st;
        stage_prepare(&c, &st);
        int rootfd = -1;
        if (c.park_fd < 0) {
                rootfd = root_build(&c, &st);
        } else {
                if (c.cfg->n_layers > 0)
                        rootfd = root_prepare(&c, &st);
                park_receive(&c, &st, rootfd);
                if (rootfd < 0) {
                        rootfd = root_build(&c, &st);
                } else if (root_matches(&c)) {
                        root_update(&c, rootfd);
                } else {
                        close(rootfd);
                        rootfd = root_rebuild(&c, &st);
                }
        }
        if (sethostname(c.hostname, strlen(c.hostname)) < 0)
                fail(errno, "sethostname");
        enter_root(rootfd);
        close(rootfd);

        setup_fds(&c);
        if (setrlimit(RLIMIT_NOFILE, &c.nofile) < 0)
                fail(errno, "set RLIMIT_NOFILE");
        drop_caps(&c);
        if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
                fail(errno, "set no_new_privs");
        /* every fd but 0-3 is closed by the exec (err_fd, init_fd included) */
        if (sys_close_range(4, ~0U, CLOSE_RANGE_CLOEXEC) < 0)
                fail(errno, "close_range");
        sigset_t none;
        sigemptyset(&none);
        if (sigprocmask(SIG_SETMASK, &none, NULL) < 0)
                fail(errno, "unblock signals");

        /* seccomp last: from here on only the allowlist works */
        if (syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &c.policy->prog) < 0)
                fail(errno, "install seccomp filter");
        char *const argv[] = {(char *) "warren-init", NULL};
        char *const envp[] = {c.env_id, NULL};
        syscall(SYS_execveat, c.init_fd, "", argv, envp, AT_EMPTY_PATH);
        fail(errno, "exec warren-init");
}
