/* SPDX-License-Identifier: Apache-2.0 */
/* The privileged path: what the sandbox's first process does between
 * clone3() and exec of warren-init. One file on purpose, to be audited
 * whole.
 *
 * Runs in fresh mount, pid, uts, ipc, net (and cgroup) namespaces as PID 1,
 * still as full root, with the host's filesystem visible. It builds the
 * root (overlayfs), mounts what a sandbox needs inside it, pivots into it,
 * joins the sandbox's user namespace when it has one (made here; see "the
 * user namespace"), drops privileges and execs warren-init from a sealed
 * memfd.
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
 *  - what the request adds (tmpfs, files, binds of host paths, /etc
 *    files) is one table, applied in one loop (table_apply) under the same
 *    rules; bind sources arrive as mounts the parent cloned on the host
 *    side, the sandbox never names a host path;
 *  - any failure is reported as a struct wr_err over err_fd, then _exit. */

#include <errno.h>
#include <fcntl.h>
#include <linux/capability.h>
#include <linux/if_link.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <linux/seccomp.h>
#include <linux/veth.h>
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
#include <sys/wait.h>
#include <unistd.h>

#include "runtime/runtime-internal.h"

#define RES_STRICT (RESOLVE_IN_ROOT | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS)
#define RES_IN_ROOT (RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS)
#define FD_FLOOR 10

static const struct rt_child *C; /* for fail(): set once at entry */

/* The user namespace (see "the user namespace" below): its fd once made
 * (-EBADF: the sandbox has none), its base as a mount option value. */
static bool ids_on;            /* C->uid_count > 0 */
static int userns_fd = -EBADF; /* made once the stage's /proc is there */
static char id_base_str[16];

static bool idmap(int m, const char *what);
static int layer_idmapped(const char *path, char *buf, size_t size);

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
        /* in a user namespace every tmpfs's root belongs to the sandbox's
         * root (uid_base), as it does to the host's root without one */
        if (ids_on && streq(type, "tmpfs") &&
            (sys_fsconfig(fs, RT_FSCONFIG_SET_STRING, "uid", id_base_str, 0) < 0 ||
             sys_fsconfig(fs, RT_FSCONFIG_SET_STRING, "gid", id_base_str, 0) < 0))
                fail(errno, "configure %s: uid/gid", type);
        if (sys_fsconfig(fs, RT_FSCONFIG_CMD_CREATE, NULL, NULL, 0) < 0)
                fail(errno, "create %s instance", type);
        int m = sys_fsmount(fs, FSMOUNT_CLOEXEC, attrs);
        if (m < 0)
                fail(errno, "fsmount %s", type);
        close(fs);
        return m;
}

/* Move the mount mnt (detached, or attached elsewhere) onto the inode
 * target is an O_PATH fd of. mnt stays open and names the mount. */
static void move_onto(int mnt, int target, const char *what) {
        if (sys_move_mount(mnt, "", target, "", MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH) <
            0)
                fail(errno, "mount %s", what);
}

/* move_onto(), then close mnt. */
static void attach(int mnt, int target, const char *what) {
        move_onto(mnt, target, what);
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

/* In a user namespace: make name under dirfd ("" = dirfd itself), which
 * this process just created as the host's root, the sandbox root's
 * (uid_base) instead. */
static void own(int dirfd, const char *name, const char *what) {
        if (!ids_on)
                return;
        uid_t id = (uid_t) C->uid_base;
        if (fchownat(dirfd, name, id, (gid_t) id,
                     AT_SYMLINK_NOFOLLOW | (name[0] ? 0 : AT_EMPTY_PATH)) < 0)
                fail(errno, "chown %s to the sandbox's root", what);
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

/* Make last (under the directory pfd; rel names it in messages) an inode
 * of kind k and return an O_PATH fd to it. A symlink or an inode of
 * another kind is replaced (removed, then created afresh; the whiteout
 * and the new inode land in the sandbox's upper dir), a missing entry is
 * created. The returned fd's type is checked, so a mount through it lands
 * exactly on what was checked. */
static int leaf(int pfd, const char *last, const char *rel, enum kind k, mode_t mode) {
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
                if (mkdirat(pfd, last, mode) == 0)
                        own(pfd, last, rel);
                else if (errno != EEXIST)
                        fail(errno, "mkdir /%s", rel);
        } else {
                int f = openat(pfd, last,
                               O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY,
                               mode);
                if (f >= 0) {
                        own(f, "", rel);
                        close(f);
                } else if (errno != EEXIST) {
                        fail(errno, "create /%s", rel);
                }
        }
        int t = openat(pfd, last, O_PATH | O_NOFOLLOW | O_CLOEXEC);
        if (t < 0)
                fail(errno, "open /%s", rel);
        if (fstat(t, &st) < 0 || !kind_ok(st.st_mode, k))
                fail(ENOTDIR, "/%s changed type under us", rel);
        return t;
}

/* leaf() for rel relative to rootfd, whose every component but the last
 * must already be a real directory (no symlink is followed). */
static int target(int rootfd, const char *rel, enum kind k, mode_t mode) {
        char parent[256];
        const char *last;
        split(rel, parent, sizeof(parent), &last);
        int pfd = sys_openat2(rootfd, parent, O_PATH | O_DIRECTORY | O_CLOEXEC, RES_STRICT);
        if (pfd < 0)
                fail(errno, "resolve /%s in the sandbox root", parent);
        int t = leaf(pfd, last, rel, k, mode);
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

/* Writable-layer limit: upper and work live on the sandbox's ext4 image
 * (disk.c), which the parent mounted detached; attach it over
 * <dir>/upper in the sandbox's own mount namespace (the first message
 * only: a claim finds it there). */
static void mount_scratch(const struct rt_start *s) {
        if (s->scratch_fd < 0)
                return;
        int mp = open(s->scratch, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (mp < 0)
                fail(errno, "open %s", s->scratch);
        attach(s->scratch_fd, mp, "the writable layer");
        close(mp);
        /* u/ and w/ come with the image (disk.c's template); the upper
         * root belongs to the sandbox's root */
        own(AT_FDCWD, s->upper, s->upper);
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

static int mount_root(const struct rt_child *c, const struct rt_start *s) {
        int fs = sys_fsopen("overlay", FSOPEN_CLOEXEC);
        if (fs < 0)
                fail(errno, "fsopen overlay");
        if (sys_fsconfig(fs, RT_FSCONFIG_SET_STRING, "source", "warren", 0) < 0)
                fail(errno, "configure overlay: source");
        /* one layer at a time (Linux >= 6.8: no option-length limit, no
         * escaping); older kernels get the joined, escaped string */
        bool plus = true;
        for (size_t i = 0; i < s->n_layers && plus; i++) {
                /* in a user namespace: the layer through an idmapped mount */
                char idm[32];
                int lfd = ids_on ? layer_idmapped(s->layers[i], idm, sizeof(idm)) : -EBADF;
                if (sys_fsconfig(fs, RT_FSCONFIG_SET_STRING, "lowerdir+",
                                 lfd >= 0 ? idm : s->layers[i], 0) < 0) {
                        if (i == 0 && errno == EINVAL && lfd < 0)
                                plus = false;
                        else if (lfd >= 0 && errno == EINVAL)
                                fail(errno,
                                     "overlay layer %s (user namespaces need overlayfs "
                                     "lowerdir+ and idmapped layers: Linux >= 6.8)",
                                     s->layers[i]);
                        else
                                fail(errno, "overlay layer %s", s->layers[i]);
                }
                if (lfd >= 0)
                        close(lfd);
        }
        if (!plus && sys_fsconfig(fs, RT_FSCONFIG_SET_STRING, "lowerdir", s->lowerdir, 0) < 0)
                fail(errno, "overlay lowerdir");
        if (sys_fsconfig(fs, RT_FSCONFIG_SET_STRING, "upperdir", s->upper, 0) < 0)
                fail(errno, "overlay upperdir %s", s->upper);
        if (sys_fsconfig(fs, RT_FSCONFIG_SET_STRING, "workdir", s->work, 0) < 0)
                fail(errno, "overlay workdir %s", s->work);
        /* volatile: no syncfs of the whole upper file system when the
         * sandbox's mount namespace goes (that sync was most of a
         * terminate's time), and fsync inside the sandbox does not reach
         * the disk. The writable layer does not outlive the host: nothing
         * ever mounts this upper dir again after a crash. Older kernels
         * without the option run without it. */
        (void) sys_fsconfig(fs, RT_FSCONFIG_SET_FLAG, "volatile", NULL, 0);
        if (sys_fsconfig(fs, RT_FSCONFIG_CMD_CREATE, NULL, NULL, 0) < 0)
                fail(errno, "mount overlay (is %s on a filesystem overlayfs accepts as upper?)",
                     s->upper);
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

/* Docker's masked /proc paths, and past them: the host's physical memory
 * map and page state, kernel allocator state (kpageflags, kpagecount,
 * kpagecgroup, slabinfo, vmallocinfo, iomem, ioports, pagetypeinfo,
 * zoneinfo: heap-spray and KASLR aids). */
static const char *const masked[] = {
        "acpi",          "asound",      "interrupts",   "kcore",      "keys",
        "latency_stats", "sched_debug", "scsi",         "timer_list", "timer_stats",
        "kpageflags",    "kpagecount",  "kpagecgroup",  "slabinfo",   "vmallocinfo",
        "iomem",         "ioports",     "pagetypeinfo", "zoneinfo",
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
        for (size_t i = 0; i < ELEMENTSOF(links); i++) {
                if (symlinkat(links[i].target, dev, links[i].name) < 0)
                        fail(errno, "symlink /dev/%s", links[i].name);
                own(dev, links[i].name, links[i].name);
        }

        t = target(rootfd, "dev/pts", K_DIR, 0755);
        /* max=: each sandbox its own bound; the host-wide pool
         * (kernel.pty.max, ~4096) is shared by every devpts instance */
        static const struct opt pts[] = {{"newinstance", NULL},
                                         {"ptmxmode", "0666"},
                                         {"mode", "0620"},
                                         {"max", RT_PTYS_MAX_STR},
                                         {NULL, NULL}};
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
        /* the host's disks and their partitions */
        mask_path(rootfd, "sys/block");
        mask_path(rootfd, "sys/class/block");
        mask_path(rootfd, "sys/dev/block");
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

/* ---- the network: a veth pair made from inside ----
 *
 * One batch of netlink requests on a socket of the new network namespace
 * creates eth0 (ifindex 2: the namespace is fresh, lo is 1) with its peer
 * made directly in the caller's namespace (IFLA_NET_NS_FD; moving a link
 * between namespaces costs ~30 ms, creating it there nothing extra), turns
 * IPv6 address generation off, adds the address, brings it up and adds
 * the default route; a second batch, on the NETLINK_ROUTE socket the
 * parent opened in its own namespace, does the same for the peer (IPv6
 * off, the gateway address, up). Every request is acknowledged; the first
 * error fails the create naming its step. */

#define NL_MSG_MAX 512
#define NL_BATCH 5
#define ETH0_INDEX 2

struct nl_batch {
        size_t n;
        const char *what[NL_BATCH];
        union {
                struct nlmsghdr h;
                char buf[NL_MSG_MAX];
        } msg[NL_BATCH];
};

static struct nl_batch nlb; /* static: no large stack frames here */

/* Start request n+1 of b: type, flags, the fixed header hdr. */
static struct nlmsghdr *nl_new(struct nl_batch *b, const char *what, unsigned short type,
                               unsigned short flags, const void *hdr, size_t hdr_len) {
        struct nlmsghdr *h = &b->msg[b->n].h;
        memset(b->msg[b->n].buf, 0, NL_MSG_MAX);
        h->nlmsg_len = (uint32_t) NLMSG_LENGTH(hdr_len);
        h->nlmsg_type = type;
        h->nlmsg_flags = (unsigned short) (NLM_F_REQUEST | NLM_F_ACK | flags);
        h->nlmsg_seq = (uint32_t) b->n + 1;
        memcpy(NLMSG_DATA(h), hdr, hdr_len);
        b->what[b->n++] = what;
        return h;
}

static struct rtattr *nl_attr(struct nlmsghdr *h, unsigned short type, const void *data,
                              size_t len) {
        size_t off = NLMSG_ALIGN(h->nlmsg_len), alen = RTA_LENGTH(len);
        if (off + RTA_ALIGN(alen) > NL_MSG_MAX)
                fail(E2BIG, "network: netlink request too long");
        struct rtattr *a = (struct rtattr *) ((char *) h + off);
        a->rta_type = type;
        a->rta_len = (unsigned short) alen;
        if (len)
                memcpy(RTA_DATA(a), data, len);
        h->nlmsg_len = (uint32_t) (off + RTA_ALIGN(alen));
        return a;
}

static void nl_nest_end(struct nlmsghdr *h, struct rtattr *nest) {
        nest->rta_len = (unsigned short) ((char *) h + h->nlmsg_len - (char *) nest);
}

static void nl_attr_str(struct nlmsghdr *h, unsigned short type, const char *s) {
        nl_attr(h, type, s, strlen(s) + 1);
}

/* IPv6 off: no address is generated for the link (set before it is up). */
static void nl_no_ipv6(struct nlmsghdr *h) {
        struct rtattr *af = nl_attr(h, IFLA_AF_SPEC, NULL, 0);
        struct rtattr *in6 = nl_attr(h, AF_INET6, NULL, 0);
        uint8_t mode = 1; /* IN6_ADDR_GEN_MODE_NONE */
        nl_attr(h, IFLA_INET6_ADDR_GEN_MODE, &mode, sizeof(mode));
        nl_nest_end(h, in6);
        nl_nest_end(h, af);
}

static void nl_link_set(struct nl_batch *b, const char *what, int index, bool up) {
        struct ifinfomsg ifi = {.ifi_family = AF_UNSPEC, .ifi_index = index};
        if (up)
                ifi.ifi_flags = ifi.ifi_change = IFF_UP;
        struct nlmsghdr *h = nl_new(b, what, RTM_NEWLINK, 0, &ifi, sizeof(ifi));
        if (!up)
                nl_no_ipv6(h);
}

static void nl_addr_add(struct nl_batch *b, const char *what, int index, uint32_t addr,
                        uint8_t prefix) {
        struct ifaddrmsg ifa = {.ifa_family = AF_INET,
                                .ifa_prefixlen = prefix,
                                .ifa_scope = RT_SCOPE_UNIVERSE,
                                .ifa_index = (unsigned) index};
        struct nlmsghdr *h =
                nl_new(b, what, RTM_NEWADDR, NLM_F_CREATE | NLM_F_EXCL, &ifa, sizeof(ifa));
        nl_attr(h, IFA_LOCAL, &addr, sizeof(addr));
        nl_attr(h, IFA_ADDRESS, &addr, sizeof(addr));
}

/* Send the batch, read every acknowledgement; the first error fails.
 * Returns the ifindex of the last RTM_NEWLINK reply seen (a GETLINK), or
 * 0. Empties the batch. */
static int nl_run(int fd, struct nl_batch *b) {
        struct sockaddr_nl sa = {.nl_family = AF_NETLINK};
        struct iovec iov[NL_BATCH];
        for (size_t i = 0; i < b->n; i++)
                iov[i] =
                        (struct iovec){.iov_base = b->msg[i].buf, .iov_len = b->msg[i].h.nlmsg_len};
        struct msghdr mh = {
                .msg_name = &sa, .msg_namelen = sizeof(sa), .msg_iov = iov, .msg_iovlen = b->n};
        if (sendmsg(fd, &mh, 0) < 0)
                fail(errno, "network: %s", b->what[0]);
        int index = 0;
        size_t acked = 0;
        static char rbuf[8192] __attribute__((aligned(NLMSG_ALIGNTO)));
        while (acked < b->n) {
                ssize_t n = recv(fd, rbuf, sizeof(rbuf), 0);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n <= 0)
                        fail(n < 0 ? errno : EIO, "network: read netlink reply");
                size_t len = (size_t) n;
                for (struct nlmsghdr *h = (struct nlmsghdr *) rbuf; NLMSG_OK(h, len);
                     h = NLMSG_NEXT(h, len)) {
                        size_t seq = h->nlmsg_seq;
                        const char *what = seq >= 1 && seq <= b->n ? b->what[seq - 1] : "netlink";
                        if (h->nlmsg_type == RTM_NEWLINK &&
                            h->nlmsg_len >= NLMSG_LENGTH(sizeof(struct ifinfomsg))) {
                                index = ((struct ifinfomsg *) NLMSG_DATA(h))->ifi_index;
                        } else if (h->nlmsg_type == NLMSG_ERROR) {
                                const struct nlmsgerr *er = NLMSG_DATA(h);
                                if (er->error < 0)
                                        fail(-er->error, "network: %s", what);
                                acked++;
                        }
                }
        }
        b->n = 0;
        return index;
}

static void net_setup(struct rt_child *c) {
        if (!c->has_net)
                return;
        const struct rt_net *net = &c->net;
        int nl = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE);
        if (nl < 0)
                fail(errno, "network: netlink socket");
        struct nl_batch *b = &nlb;
        b->n = 0;

        /* eth0 here, its peer in the host's namespace */
        struct ifinfomsg ifi = {.ifi_family = AF_UNSPEC, .ifi_index = ETH0_INDEX};
        struct nlmsghdr *h = nl_new(b, "create veth eth0", RTM_NEWLINK, NLM_F_CREATE | NLM_F_EXCL,
                                    &ifi, sizeof(ifi));
        nl_attr_str(h, IFLA_IFNAME, "eth0");
        struct rtattr *li = nl_attr(h, IFLA_LINKINFO, NULL, 0);
        nl_attr_str(h, IFLA_INFO_KIND, "veth");
        struct rtattr *data = nl_attr(h, IFLA_INFO_DATA, NULL, 0);
        struct ifinfomsg peer = {.ifi_family = AF_UNSPEC};
        struct rtattr *pa = nl_attr(h, VETH_INFO_PEER, &peer, sizeof(peer));
        nl_attr_str(h, IFLA_IFNAME, net->peer);
        uint32_t nsfd = (uint32_t) c->host_ns_fd;
        nl_attr(h, IFLA_NET_NS_FD, &nsfd, sizeof(nsfd));
        nl_nest_end(h, pa);
        nl_nest_end(h, data);
        nl_nest_end(h, li);
        nl_link_set(b, "eth0: IPv6 off", ETH0_INDEX, false);
        nl_addr_add(b, "eth0: address", ETH0_INDEX, net->addr, net->prefix);
        nl_link_set(b, "eth0: up", ETH0_INDEX, true);
        struct rtmsg rt = {.rtm_family = AF_INET,
                           .rtm_table = RT_TABLE_MAIN,
                           .rtm_protocol = RTPROT_BOOT,
                           .rtm_scope = RT_SCOPE_UNIVERSE,
                           .rtm_type = RTN_UNICAST,
                           .rtm_flags = RTNH_F_ONLINK};
        h = nl_new(b, "eth0: default route", RTM_NEWROUTE, NLM_F_CREATE | NLM_F_EXCL, &rt,
                   sizeof(rt));
        nl_attr(h, RTA_GATEWAY, &net->gateway, sizeof(net->gateway));
        uint32_t oif = ETH0_INDEX;
        nl_attr(h, RTA_OIF, &oif, sizeof(oif));
        nl_run(nl, b);
        close(nl);
        /* ICMP echo without CAP_NET_RAW (ping sockets), for every group of
         * this network namespace only, as Docker does; what leaves is the
         * host's table's to decide. In a user namespace: every group of
         * the sandbox's range (it reads "0 <count-1>" inside). Best effort:
         * a failed write keeps the kernel's default (nobody). */
        int pg = open("/proc/sys/net/ipv4/ping_group_range", O_WRONLY | O_CLOEXEC);
        if (pg >= 0) {
                char range[48];
                int n = ids_on ? snprintf(range, sizeof(range), "%u %u", c->uid_base,
                                          c->uid_base + c->uid_count - 1)
                               : snprintf(range, sizeof(range), "0 2147483647");
                (void) !write(pg, range, (size_t) n);
                close(pg);
        }

        /* the peer, on the host's side */
        struct ifinfomsg q = {.ifi_family = AF_UNSPEC};
        h = nl_new(b, "find the host end", RTM_GETLINK, 0, &q, sizeof(q));
        nl_attr_str(h, IFLA_IFNAME, net->peer);
        int pidx = nl_run(c->host_nl_fd, b);
        if (pidx <= 0)
                fail(ENODEV, "network: the host end %s is missing", net->peer);
        nl_link_set(b, "host end: IPv6 off", pidx, false);
        nl_addr_add(b, "host end: address", pidx, net->gateway, net->prefix);
        nl_link_set(b, "host end: up", pidx, true);
        nl_run(c->host_nl_fd, b);
        close(c->host_nl_fd);
        close(c->host_ns_fd);
        c->host_nl_fd = c->host_ns_fd = -EBADF;
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

/* ---- the stage: kernel filesystems mounted before the root exists ----
 *
 * The kernel filesystems a sandbox gets (/proc with its masks, /dev,
 * /sys) are mounted first on a small private tmpfs, the stage, attached
 * at <dir>/rootfs in the child's own mount namespace; the loopback comes
 * up here too. A warm-pool child does this before it parks. Building the
 * root mounts the overlay on top of the stage and moves each prepared
 * mount onto its target inside the root (resolved and checked there as
 * always). The stage also holds the small tmpfs of each FILE entry. The
 * emptied stage stays behind in the old root and goes away with it
 * (pivot_root + detach). */

struct stage {
        int proc, dev, sys; /* O_PATH fds: roots of the prepared mounts */
};

static int stage_root = -EBADF; /* the stage itself */

/* st_dev of the kernel filesystems of the sandbox: a table entry whose
 * target resolves into one of them (through a symlink of the image) is
 * refused, as a target string under /proc, /dev or /sys is. */
static dev_t kernel_devs[8];
static size_t n_kernel_devs;

static void kernel_dev_add(int dirfd, const char *rel) {
        struct stat st;
        if (fstatat(dirfd, rel, &st, AT_EMPTY_PATH) < 0)
                fail(errno, "stat the prepared /%s", rel[0] ? rel : "dev");
        if (n_kernel_devs < ELEMENTSOF(kernel_devs))
                kernel_devs[n_kernel_devs++] = st.st_dev;
}

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
        st->proc = stage_open(m, "proc");
        st->dev = stage_open(m, "dev");
        st->sys = stage_open(m, "sys");
        kernel_dev_add(st->proc, "");
        kernel_dev_add(st->sys, "");
        kernel_dev_add(st->dev, "");
        kernel_dev_add(st->dev, "pts");
        kernel_dev_add(st->dev, "shm");
        kernel_dev_add(st->dev, "mqueue");
        stage_root = hoist_close(m);
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

/* ---- the user namespace ----
 *
 * With c->uid_count > 0 the sandbox runs in a user namespace of its own
 * that maps ids 0..uid_count-1 inside to uid_base.. on the host. The
 * namespaces clone3 made stay owned by the host's user namespace, and
 * everything up to the exec is done as the host's root, as without one;
 * the new user namespace is joined last (userns_enter), so root inside
 * holds capabilities only there: over no mount, network, hostname or
 * other namespace of its own. What the sandbox sees is made its own on
 * the way: the image layers through idmapped mounts (shared and unchanged
 * on disk), the upper dir (the parent chowns it), every tmpfs root (in
 * fs_new), file and dir made here (own()) owned by uid_base, bind
 * sources idmapped when their filesystem allows it.
 *
 * The namespace itself comes from a helper that shares our memory,
 * made with CLONE_NEWUSER alone: we write its maps (as the host's root
 * any range may be mapped; setgroups stays allowed), open its namespace
 * and kill it. Its pid is one of our pid namespace: the stage's /proc
 * names it. */

static char userns_stack[16384] __attribute__((aligned(64)));

static int userns_hold(void *arg) {
        (void) arg;
        for (;;)
                pause();
        return 0;
}

static void userns_make(const struct rt_child *c, int procfd) {
        pid_t pid = (pid_t) clone(userns_hold, userns_stack + sizeof(userns_stack),
                                  CLONE_VM | CLONE_NEWUSER, NULL);
        if (pid < 0)
                fail(errno, "create the user namespace");
        char rel[48], map[48];
        int n = snprintf(map, sizeof(map), "0 %u %u\n", c->uid_base, c->uid_count);
        static const char *const maps[] = {"uid_map", "gid_map"};
        int fd = -EBADF, err = 0;
        for (size_t i = 0; i < ELEMENTSOF(maps) && !err; i++) {
                snprintf(rel, sizeof(rel), "%d/%s", (int) pid, maps[i]);
                int f = openat(procfd, rel, O_WRONLY | O_CLOEXEC);
                if (f < 0 || write(f, map, (size_t) n) != n)
                        err = errno ? errno : EIO;
                if (f >= 0)
                        close(f);
        }
        if (!err) {
                snprintf(rel, sizeof(rel), "%d/ns/user", (int) pid);
                fd = openat(procfd, rel, O_RDONLY | O_CLOEXEC);
                err = fd < 0 ? errno : 0;
        }
        (void) kill(pid, SIGKILL);
        (void) waitpid(pid, NULL, __WALL);
        if (err)
                fail(err, "set up the user namespace (%s)", map);
        userns_fd = hoist_close(fd);
        /* the network namespace is the host's user namespace's: root
         * inside cannot use CAP_NET_BIND_SERVICE there; ports below 1024
         * are opened to every uid of the sandbox instead */
        int f = open("/proc/sys/net/ipv4/ip_unprivileged_port_start", O_WRONLY | O_CLOEXEC);
        if (f < 0 || write(f, "0", 1) != 1)
                fail(errno, "set net.ipv4.ip_unprivileged_port_start");
        close(f);
}

/* Give the detached mount m the sandbox's id mapping (ids 0.. on disk are
 * 0.. inside). False when its filesystem cannot be idmapped, or m already
 * is: m is left as it was. */
static bool idmap(int m, const char *what) {
        if (userns_fd < 0)
                return true;
        struct rt_mount_attr a = {.attr_set = MOUNT_ATTR_IDMAP, .userns_fd = (uint64_t) userns_fd};
        if (sys_mount_setattr(m, "", AT_EMPTY_PATH, &a) == 0)
                return true;
        if (errno == EINVAL || errno == EPERM || errno == EOPNOTSUPP)
                return false;
        fail(errno, "idmap %s", what);
}

/* The layer dir path as the sandbox sees it: an idmapped clone, attached
 * on the stage (overlayfs takes lower layers of our mount namespace only).
 * Returns an fd naming it, and "/proc/self/fd/<fd>" in buf. */
static int layer_idmapped(const char *path, char *buf, size_t size) {
        static unsigned serial;
        int t = bind_clone(AT_FDCWD, path, false, 0, path);
        if (!idmap(t, path))
                fail(EOPNOTSUPP,
                     "layer %s: its filesystem cannot be idmapped (user namespaces need the "
                     "image store on ext4, xfs, btrfs or tmpfs; or run warrend --userns=off)",
                     path);
        char name[16];
        snprintf(name, sizeof(name), "l%u", serial++);
        if (mkdirat(stage_root, name, 0700) < 0)
                fail(errno, "layer %s: a dir on the stage", path);
        int mp = openat(stage_root, name, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (mp < 0)
                fail(errno, "layer %s: open its dir on the stage", path);
        move_onto(t, mp, path);
        close(mp);
        t = hoist_close(t);
        snprintf(buf, size, "/proc/self/fd/%d", t);
        return t;
}

/* Join the user namespace and become its root (uid/gid 0 inside,
 * uid_base outside; no supplementary groups). After pivot_root: every
 * step before needed the host's root. setns grants every capability in
 * it; drop_caps() then keeps the usual few. Raw syscalls: glibc's set*id
 * would signal the threads of the process we were cloned from. */
static void userns_enter(void) {
        if (userns_fd < 0)
                return;
        if (syscall(SYS_setns, userns_fd, CLONE_NEWUSER) < 0)
                fail(errno, "join the user namespace");
        close(userns_fd);
        userns_fd = -EBADF;
        if (syscall(SYS_setresgid, 0, 0, 0) < 0)
                fail(errno, "setresgid in the user namespace");
        if (syscall(SYS_setgroups, 0, NULL) < 0)
                fail(errno, "setgroups in the user namespace");
        if (syscall(SYS_setresuid, 0, 0, 0) < 0)
                fail(errno, "setresuid in the user namespace");
}

/* ---- the mount table ----
 *
 * The runtime's own entries (/tmp, /run, /etc/hostname, /etc/hosts,
 * /etc/resolv.conf) and the caller's, applied in order by table_apply():
 * one loop, one case per kind. Targets are checked strings (rt_mounts_check
 * in the parent); here they are resolved inside the root: parent dirs with
 * RESOLVE_IN_ROOT (an image's symlink is followed, never out of the root;
 * missing dirs are made; landing in /proc, /dev or /sys is refused), the
 * target itself with leaf() (never followed, replaced). */

/* Open the parent dir rel ("." = the root) of the target of entry what. */
static int entry_parent(int rootfd, const char *rel, const char *what) {
        int fd = sys_openat2(rootfd, rel, O_PATH | O_DIRECTORY | O_CLOEXEC, RES_IN_ROOT);
        if (fd < 0 && errno == ENOENT) {
                /* make what is missing, one component at a time; each is
                 * resolved from the root again (it may be an image's
                 * symlink to an existing dir) */
                char pre[PATH_MAX];
                size_t n = strlen(rel);
                if (n >= sizeof(pre))
                        fail(ENAMETOOLONG, "mount %s", what);
                int cur = sys_openat2(rootfd, ".", O_PATH | O_DIRECTORY | O_CLOEXEC, RES_STRICT);
                if (cur < 0)
                        fail(errno, "mount %s: open the sandbox root", what);
                size_t start = 0;
                for (size_t i = 0; i <= n; i++) {
                        if (rel[i] != '/' && rel[i] != 0)
                                continue;
                        memcpy(pre, rel, i);
                        pre[i] = 0;
                        const char *name = pre + start;
                        start = i + 1;
                        int next = sys_openat2(rootfd, pre, O_PATH | O_DIRECTORY | O_CLOEXEC,
                                               RES_IN_ROOT);
                        if (next < 0 && errno == ENOENT) {
                                /* missing, or a dangling symlink: a new dir */
                                struct stat st;
                                if (fstatat(cur, name, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
                                    S_ISLNK(st.st_mode) && unlinkat(cur, name, 0) < 0)
                                        fail(errno, "mount %s: replace /%s", what, pre);
                                if (mkdirat(cur, name, 0755) == 0)
                                        own(cur, name, pre);
                                else if (errno != EEXIST)
                                        fail(errno, "mount %s: mkdir /%s", what, pre);
                                next = sys_openat2(cur, name, O_PATH | O_DIRECTORY | O_CLOEXEC,
                                                   RES_STRICT);
                        }
                        if (next < 0)
                                fail(errno, "mount %s: resolve /%s in the sandbox root", what, pre);
                        close(cur);
                        cur = next;
                }
                fd = cur;
        }
        if (fd < 0)
                fail(errno, "mount %s: resolve /%s in the sandbox root", what, rel);
        struct stat st;
        if (fstat(fd, &st) < 0)
                fail(errno, "mount %s: stat /%s", what, rel);
        for (size_t i = 0; i < n_kernel_devs; i++)
                if (st.st_dev == kernel_devs[i])
                        fail(EINVAL, "mount %s: /%s resolves into /proc, /dev or /sys", what, rel);
        return fd;
}

static void write_all(int fd, const void *data, size_t len, const char *what) {
        const char *p = data;
        while (len > 0) {
                ssize_t n = write(fd, p, len);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n <= 0)
                        fail(n < 0 ? errno : EIO, "write %s", what);
                p += n;
                len -= (size_t) n;
        }
}

/* RT_MOUNT_COPY: write the content into the root (its upper layer). The
 * file is replaced when it is a symlink or not a regular file. */
static void copy_write(int rootfd, const struct rt_mount *m) {
        char parent[PATH_MAX];
        const char *last;
        split(m->target + 1, parent, sizeof(parent), &last);
        int pfd = entry_parent(rootfd, parent, m->target);
        struct stat st;
        if (fstatat(pfd, last, &st, AT_SYMLINK_NOFOLLOW) == 0 && !S_ISREG(st.st_mode) &&
            unlinkat(pfd, last, S_ISDIR(st.st_mode) ? AT_REMOVEDIR : 0) < 0)
                fail(errno, "replace %s", m->target);
        int f = openat(pfd, last, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY,
                       m->mode ? m->mode : 0644);
        if (f < 0)
                fail(errno, "write %s", m->target);
        if (fstat(f, &st) < 0 || !S_ISREG(st.st_mode))
                fail(EINVAL, "write %s: not a regular file", m->target);
        own(f, "", m->target);
        write_all(f, m->data, m->len, m->target);
        close(f);
        close(pfd);
}

/* RT_MOUNT_TMPFS: a new, detached tmpfs. */
static int tmpfs_new(const struct rt_mount *m) {
        char size[24], mode[8];
        snprintf(size, sizeof(size), "%llu", (unsigned long long) m->size);
        snprintf(mode, sizeof(mode), "%o", (unsigned) (m->mode ? m->mode : 0755));
        const struct opt o[] = {{"mode", mode}, {"size", size}, {NULL, NULL}};
        return fs_new("tmpfs", o, rt_mount_attrs(m->flags));
}

/* RT_MOUNT_FILE: the content in a file on a tmpfs of its own (attached on
 * the stage, so the file can be cloned on any kernel), cloned as a
 * detached bind with the entry's attributes. */
static int file_new(const struct rt_mount *m) {
        static unsigned serial;
        char size[24], name[16];
        snprintf(size, sizeof(size), "%zu", (m->len / 4096 + 1) * 4096);
        snprintf(name, sizeof(name), "f%u", serial++);
        const struct opt o[] = {{"mode", "0700"}, {"size", size}, {NULL, NULL}};
        /* the bind inherits the tmpfs's attributes: the entry's, but
         * writable until the file is written */
        unsigned attrs = rt_mount_attrs(m->flags);
        int fs = fs_new("tmpfs", o, attrs & ~MOUNT_ATTR_RDONLY);
        if (mkdirat(stage_root, name, 0700) < 0)
                fail(errno, "mount %s: a dir on the stage", m->target);
        int mp = openat(stage_root, name, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (mp < 0)
                fail(errno, "mount %s: open its dir on the stage", m->target);
        attach(fs, mp, m->target);
        close(mp);
        int dir = openat(stage_root, name, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (dir < 0)
                fail(errno, "mount %s: open its tmpfs", m->target);
        int f = openat(dir, "data", O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY,
                       0600);
        if (f < 0)
                fail(errno, "mount %s: create its file", m->target);
        write_all(f, m->data, m->len, m->target);
        own(f, "", m->target);
        if (fchmod(f, m->mode ? m->mode : 0644) < 0)
                fail(errno, "mount %s: chmod", m->target);
        close(f);
        int t = bind_clone(dir, "data", false, attrs, m->target);
        close(dir);
        return t;
}

/* What the target of a mount entry must be. */
static enum kind entry_kind(const struct rt_entry *en) {
        switch (en->m.kind) {
        case RT_MOUNT_TMPFS:
                return K_DIR;
        case RT_MOUNT_BIND:
                return S_ISDIR(en->type) ? K_DIR : K_FILE;
        case RT_MOUNT_FILE:
        case RT_MOUNT_COPY:
                return K_FILE;
        }
        return K_FILE;
}

/* Move mnt onto the target of en (made an inode of the right kind inside
 * the root). mnt stays open. */
static void put(int rootfd, const struct rt_entry *en, int mnt) {
        const struct rt_mount *m = &en->m;
        char parent[PATH_MAX];
        const char *last;
        split(m->target + 1, parent, sizeof(parent), &last);
        int pfd = entry_parent(rootfd, parent, m->target);
        enum kind k = entry_kind(en);
        int t = leaf(pfd, last, m->target + 1, k, k == K_DIR ? 0755 : 0644);
        move_onto(mnt, t, m->target);
        close(t);
        close(pfd);
}

/* What the prestart built ahead (a warm-pool child given layers). */
static struct {
        bool built;
        const struct rt_start *s; /* the prestart's start message */
        int mnt[RT_TABLE_MAX];    /* per entry of s: its mount, in the root (or -EBADF) */
        bool taken[RT_TABLE_MAX]; /* matched by an entry of the claim */
        int proc, dev, sys;       /* the stage's mounts, in the root */
} prep;

/* The entry of the prestart's table identical to en and not matched yet,
 * or -1. */
static int prep_find(const struct rt_entry *en) {
        if (!prep.built)
                return -1;
        for (size_t j = 0; j < prep.s->n_mounts; j++)
                if (!prep.taken[j] && rt_entry_same(&prep.s->mounts[j], en))
                        return (int) j;
        return -1;
}

static bool path_under(const char *p, const char *dir) {
        size_t n = strlen(dir);
        return strncmp(p, dir, n) == 0 && (p[n] == 0 || p[n] == '/');
}

/* Apply the table s, in order, inside the root: each entry's mount is
 * made (or taken over from the prestart) and moved onto its target, a
 * COPY is written. reuse: rootfd is the root the prestart built, so an
 * entry identical to one it applied is skipped (unless an entry applied
 * here before covers its target). Otherwise an identical entry's mount
 * from the prestart is moved here instead of being made again. keep:
 * store each entry's mount fd (the prestart) instead of closing it. */
static void table_apply(int rootfd, const struct rt_start *s, bool reuse, int *keep) {
        /* (RT_MOUNT_IDMAP binds are idmapped here, as they are moved in) */
        const char *done[RT_TABLE_MAX];
        size_t n_done = 0;
        for (size_t i = 0; i < s->n_mounts; i++) {
                const struct rt_entry *en = &s->mounts[i];
                const struct rt_mount *m = &en->m;
                int mnt = -EBADF, p = prep_find(en);
                if (p >= 0) {
                        bool covered = false;
                        for (size_t j = 0; j < n_done; j++)
                                covered = covered || path_under(m->target, done[j]);
                        if (reuse && !covered) { /* already in place */
                                prep.taken[p] = true;
                                if (m->kind == RT_MOUNT_BIND)
                                        close(m->source_fd);
                                continue;
                        }
                        if (!reuse && prep.mnt[p] >= 0) {
                                prep.taken[p] = true;
                                mnt = prep.mnt[p];
                                prep.mnt[p] = -EBADF;
                        }
                }
                done[n_done++] = m->target;
                switch (m->kind) {
                case RT_MOUNT_COPY:
                        copy_write(rootfd, m);
                        continue;
                case RT_MOUNT_TMPFS:
                        if (mnt < 0)
                                mnt = tmpfs_new(m);
                        break;
                case RT_MOUNT_FILE:
                        if (mnt < 0)
                                mnt = file_new(m);
                        break;
                case RT_MOUNT_BIND:
                        /* the parent's clone of the source */
                        if (mnt < 0) {
                                mnt = m->source_fd;
                                if ((m->flags & RT_MOUNT_IDMAP) && !idmap(mnt, m->target))
                                        fail(EOPNOTSUPP,
                                             "mount %s: its filesystem cannot be idmapped (for "
                                             "the sandbox's user namespace)",
                                             m->target);
                        } else {
                                close(m->source_fd);
                        }
                        break;
                default:
                        fail(EINVAL, "mount %s: unknown kind %d", m->target, (int) m->kind);
                }
                put(rootfd, en, mnt);
                if (keep)
                        keep[i] = hoist_close(mnt);
                else
                        close(mnt);
        }
}

/* ---- the root, built ahead when the layers are known ----
 *
 * A warm-pool child given layers at the prestart (the image the pool
 * expects) builds the whole root before it parks: overlay on top of the
 * stage, the prepared mounts moved in, the prestart's table applied.
 * Taking it then checks that the request names the very same layer
 * directories (path order and dev/ino, so a re-imported image is not
 * mistaken for the old one) and a table with an entry of
 * the same kind at every target the prestart used (else something of the
 * prestart would stay); the claim's table is then applied on top, skipping
 * what is identical (the writable layer is the prestart's: the parent
 * only hands out an entry whose disk size is the one asked for).
 * Anything else is a mismatch: a new overlay goes on
 * top of the prepared root (with upper and work dirs of its own), the
 * prepared mounts (and those of identical entries) move on into it, and
 * the prepared overlay goes away with the old root. */

struct layer_id {
        dev_t dev;
        ino_t ino;
};

static struct layer_id prep_ids[RT_PARK_MAX_LAYERS];
static char upper_alt[PATH_MAX], work_alt[PATH_MAX];

/* Mount the overlay on top of what is at c->rootfs, move the stage's
 * mounts into it and apply the table. Consumes the stage's fds. Returns
 * the root. */
static int root_build(const struct rt_child *c, const struct rt_start *s, struct stage *st,
                      int *keep) {
        int rootfd = mount_root(c, s);
        stage_move(rootfd, st->proc, "proc", 0555);
        stage_move(rootfd, st->dev, "dev", 0755);
        stage_move(rootfd, st->sys, "sys", 0555);
        st->proc = st->dev = st->sys = -EBADF;
        table_apply(rootfd, s, false, keep);
        return rootfd;
}

static void layer_ids(const struct rt_start *s, struct layer_id *ids) {
        for (size_t i = 0; i < s->n_layers; i++) {
                struct stat sb;
                if (stat(s->layers[i], &sb) < 0)
                        fail(errno, "layer %s", s->layers[i]);
                ids[i] = (struct layer_id){sb.st_dev, sb.st_ino};
        }
}

/* At the prestart: build the root for the layers we were given. */
static int root_prepare(const struct rt_child *c, const struct rt_start *s, struct stage *st) {
        layer_ids(s, prep_ids);
        /* keep a handle on each mount: a mismatch moves them on */
        prep.proc = hoist(st->proc);
        prep.dev = hoist(st->dev);
        prep.sys = hoist(st->sys);
        for (size_t i = 0; i < ELEMENTSOF(prep.mnt); i++)
                prep.mnt[i] = -EBADF;
        int rootfd = root_build(c, s, st, prep.mnt);
        prep.s = s;
        prep.built = true;
        return rootfd;
}

/* At the claim: is the prepared root the one asked for? */
static bool root_matches(const struct rt_start *s) {
        if (!prep.built || s->n_layers != prep.s->n_layers)
                return false;
        for (size_t i = 0; i < s->n_layers; i++) {
                struct stat sb;
                if (stat(s->layers[i], &sb) < 0 || sb.st_dev != prep_ids[i].dev ||
                    sb.st_ino != prep_ids[i].ino)
                        return false;
        }
        for (size_t j = 0; j < prep.s->n_mounts; j++) {
                const struct rt_entry *a = &prep.s->mounts[j];
                bool found = false;
                for (size_t i = 0; i < s->n_mounts && !found; i++) {
                        const struct rt_entry *b = &s->mounts[i];
                        found = streq(a->m.target, b->m.target) &&
                                (a->m.kind == RT_MOUNT_COPY) == (b->m.kind == RT_MOUNT_COPY) &&
                                entry_kind(a) == entry_kind(b);
                }
                if (!found)
                        return false;
        }
        return true;
}

/* At the claim, it does not: a new root on top of it, with upper and
 * work dirs of their own (beside the prepared ones, on the same file
 * system: the host's or the writable layer's), and the prepared mounts
 * moved on into it. */
static int root_rebuild(const struct rt_child *c, struct rt_start *s, struct stage *st) {
        int n1 = snprintf(upper_alt, sizeof(upper_alt), "%s.1", s->upper);
        int n2 = snprintf(work_alt, sizeof(work_alt), "%s.1", s->work);
        if (n1 < 0 || (size_t) n1 >= sizeof(upper_alt) || n2 < 0 || (size_t) n2 >= sizeof(work_alt))
                fail(ENAMETOOLONG, "upper dir path");
        if (mkdir(upper_alt, 0755) < 0 && errno != EEXIST)
                fail(errno, "mkdir %s", upper_alt);
        own(AT_FDCWD, upper_alt, upper_alt);
        if (mkdir(work_alt, 0700) < 0 && errno != EEXIST)
                fail(errno, "mkdir %s", work_alt);
        s->upper = upper_alt;
        s->work = work_alt;
        st->proc = prep.proc;
        st->dev = prep.dev;
        st->sys = prep.sys;
        return root_build(c, s, st, NULL);
}

/* ---- the warm pool's claim ---- */

static struct rt_start first;       /* a create's or prestart's start message */
static struct rt_start claim;       /* a claim's */
static char park_buf[RT_PARK_MAX];  /* the claim's message */
static int park_fds[RT_MOUNTS_MAX]; /* and its bind sources */

/* Wait for the claim's start message and its fds (see rt_start). */
static struct rt_start *park_receive(struct rt_child *c, const struct stage *st, int rootfd) {
        /* hold nothing of the daemon's while parked: not its other pipes
         * (EOF must reach the other parked children when it dies), not
         * its state dir lock */
        int keep[16 + RT_TABLE_MAX];
        size_t nk = 0;
        const int mine[] = {c->err_fd,  c->ctl_fd, c->init_fd, c->log_fd, c->park_fd,
                            stage_root, st->proc,  st->dev,    st->sys,   rootfd,
                            prep.proc,  prep.dev,  prep.sys,   userns_fd};
        for (size_t i = 0; i < ELEMENTSOF(mine); i++)
                keep[nk++] = mine[i];
        for (size_t i = 0; prep.built && i < prep.s->n_mounts; i++)
                keep[nk++] = prep.mnt[i];
        close_others(keep, nk);
        /* tell rt_sandbox_prestart that we are ready: a report with code 0 */
        struct wr_err ready;
        memset(&ready, 0, sizeof(ready));
        if (write(c->err_fd, &ready, sizeof(ready)) != (ssize_t) sizeof(ready))
                fail(errno ? errno : EIO, "report ready");
        size_t got = 0, n_fds = 0;
        for (;;) {
                union {
                        char buf[CMSG_SPACE(sizeof(int) * RT_MOUNTS_MAX)];
                        struct cmsghdr align;
                } u;
                struct iovec iov = {.iov_base = park_buf + got, .iov_len = sizeof(park_buf) - got};
                struct msghdr mh = {.msg_iov = &iov,
                                    .msg_iovlen = 1,
                                    .msg_control = u.buf,
                                    .msg_controllen = sizeof(u.buf)};
                ssize_t n = recvmsg(c->park_fd, &mh, MSG_CMSG_CLOEXEC);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0)
                        fail(errno, "read the pool config");
                for (struct cmsghdr *cm = CMSG_FIRSTHDR(&mh); cm; cm = CMSG_NXTHDR(&mh, cm)) {
                        if (cm->cmsg_level != SOL_SOCKET || cm->cmsg_type != SCM_RIGHTS)
                                continue;
                        size_t k = (cm->cmsg_len - CMSG_LEN(0)) / sizeof(int);
                        if (k > ELEMENTSOF(park_fds) - n_fds)
                                fail(E2BIG, "pool config: too many fds");
                        memcpy(park_fds + n_fds, CMSG_DATA(cm), k * sizeof(int));
                        n_fds += k;
                }
                if (mh.msg_flags & MSG_CTRUNC)
                        fail(E2BIG, "pool config: too many fds");
                if (n == 0)
                        break;
                got += (size_t) n;
                if (got == sizeof(park_buf))
                        fail(E2BIG, "pool config too large");
        }
        if (got == 0)
                _exit(0); /* the pool let go of this entry */
        close(c->park_fd);
        c->park_fd = -EBADF;
        for (size_t i = 0; i < n_fds; i++) /* off 0-3, which stdio and fd 3 take */
                park_fds[i] = hoist_close(park_fds[i]);
        if (rt_start_decode(park_buf, got, park_fds, n_fds, &claim) < 0 || claim.n_layers == 0)
                fail(EINVAL, "pool config malformed");
        return &claim;
}

void rt_child_run(const struct rt_child *arg) {
        struct rt_child c = *arg;
        C = &c;
        ids_on = c.uid_count > 0;
        snprintf(id_base_str, sizeof(id_base_str), "%u", c.uid_base);
        /* the descriptors we keep must not sit where stdio and fd 3 go */
        c.err_fd = hoist(c.err_fd);
        c.ctl_fd = hoist(c.ctl_fd);
        c.init_fd = hoist(c.init_fd);
        if (c.has_net) {
                c.host_ns_fd = hoist_close(c.host_ns_fd);
                c.host_nl_fd = hoist_close(c.host_nl_fd);
        }
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
        /* the parent's message, in our copy of its memory; its bind
         * sources are our copies of its fds (all above 3: they are
         * consumed before stdio is set up) */
        struct rt_start *s = &first;
        if (rt_start_decode(c.msg, c.msg_len, c.fds, c.n_fds, s) < 0)
                fail(EINVAL, "start message malformed");
        struct stage st;
        stage_prepare(&c, &st);
        mount_scratch(s);
        if (ids_on)
                userns_make(&c, st.proc);
        net_setup(&c);
        int rootfd = -EBADF;
        if (c.park_fd < 0) {
                rootfd = root_build(&c, s, &st, NULL);
        } else {
                if (s->n_layers > 0)
                        rootfd = root_prepare(&c, s, &st);
                s = park_receive(&c, &st, rootfd);
                if (rootfd < 0) {
                        rootfd = root_build(&c, s, &st, NULL);
                } else if (root_matches(s)) {
                        table_apply(rootfd, s, true, NULL);
                } else {
                        close(rootfd);
                        rootfd = root_rebuild(&c, s, &st);
                }
        }
        if (sethostname(s->hostname, strlen(s->hostname)) < 0)
                fail(errno, "sethostname");
        enter_root(rootfd);
        close(rootfd);

        setup_fds(&c);
        struct rlimit nofile = {.rlim_cur = (rlim_t) s->nofile, .rlim_max = (rlim_t) s->nofile};
        if (setrlimit(RLIMIT_NOFILE, &nofile) < 0)
                fail(errno, "set RLIMIT_NOFILE");
        /* Pending signals and POSIX message queue bytes are counted per
         * host user (without a user namespace a sandbox's root is the
         * host's root): the sandbox's own limits bound how much of that
         * user's budget it can take. */
        static const struct {
                int res;
                rlim_t v;
                const char *name;
        } bounds[] = {
                {RLIMIT_SIGPENDING, RT_SIGPENDING_MAX, "RLIMIT_SIGPENDING"},
                {RLIMIT_MSGQUEUE, RT_MSGQUEUE_MAX, "RLIMIT_MSGQUEUE"},
        };
        for (size_t i = 0; i < ELEMENTSOF(bounds); i++) {
                struct rlimit rl = {.rlim_cur = bounds[i].v, .rlim_max = bounds[i].v};
                if (setrlimit(bounds[i].res, &rl) < 0)
                        fail(errno, "set %s", bounds[i].name);
        }
        userns_enter();
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
