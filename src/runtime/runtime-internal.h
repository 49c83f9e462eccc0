/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* Internals of src/runtime: raw syscall wrappers, the child's arguments,
 * the security policy (capabilities + seccomp) and small helpers. */

#include <linux/filter.h>
#include <linux/openat2.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "basic/err.h"
#include "basic/rmrf.h"
#include "runtime/cgroup.h"
#include "runtime/runtime.h"

#define streq(a, b) (strcmp((a), (b)) == 0)

/* PTYs one sandbox may hold at once (devpts max=; the host-wide pool,
 * kernel.pty.max, is shared by every devpts instance). */
#define RT_PTYS_MAX_STR "256"

/* Per-process bounds on per-user kernel budgets (see child.c). */
#define RT_SIGPENDING_MAX 4096
#define RT_MSGQUEUE_MAX (256u << 10)

/* ---- syscalls glibc 2.36 does not wrap (or wraps with clashing headers) */

#ifndef CLONE_PIDFD
#define CLONE_PIDFD 0x00001000
#endif
#ifndef CLONE_INTO_CGROUP
#define CLONE_INTO_CGROUP 0x200000000ULL
#endif
#ifndef CLOSE_RANGE_CLOEXEC
#define CLOSE_RANGE_CLOEXEC (1U << 2)
#endif
#ifndef MFD_EXEC
#define MFD_EXEC 0x0010U
#endif
#ifndef MOVE_MOUNT_F_EMPTY_PATH
#define MOVE_MOUNT_F_EMPTY_PATH 0x00000004
#endif
#ifndef MOVE_MOUNT_T_EMPTY_PATH
#define MOVE_MOUNT_T_EMPTY_PATH 0x00000040
#endif
#ifndef OPEN_TREE_CLONE
#define OPEN_TREE_CLONE 1
#endif
#ifndef FSMOUNT_CLOEXEC
#define FSMOUNT_CLOEXEC 0x00000001
#endif
#ifndef MOUNT_ATTR_RDONLY
#define MOUNT_ATTR_RDONLY 0x00000001
#define MOUNT_ATTR_NOSUID 0x00000002
#define MOUNT_ATTR_NODEV 0x00000004
#define MOUNT_ATTR_NOEXEC 0x00000008
#endif
#ifndef MOUNT_ATTR_IDMAP
#define MOUNT_ATTR_IDMAP 0x00100000
#endif
#ifndef FSOPEN_CLOEXEC
#define FSOPEN_CLOEXEC 0x00000001
#endif
#ifndef AT_RECURSIVE
#define AT_RECURSIVE 0x8000
#endif
/* fsconfig commands (enum fsconfig_command) */
#define RT_FSCONFIG_SET_FLAG 0
#define RT_FSCONFIG_SET_STRING 1
#define RT_FSCONFIG_CMD_CREATE 6

struct rt_mount_attr {
        uint64_t attr_set;
        uint64_t attr_clr;
        uint64_t propagation;
        uint64_t userns_fd;
};

struct rt_clone_args {
        uint64_t flags;
        uint64_t pidfd;
        uint64_t child_tid;
        uint64_t parent_tid;
        uint64_t exit_signal;
        uint64_t stack;
        uint64_t stack_size;
        uint64_t tls;
        uint64_t set_tid;
        uint64_t set_tid_size;
        uint64_t cgroup;
};

static inline int sys_openat2(int dirfd, const char *path, uint64_t flags, uint64_t resolve) {
        struct open_how how = {.flags = flags, .resolve = resolve};
        return (int) syscall(SYS_openat2, dirfd, path, &how, sizeof(how));
}
static inline int sys_fsopen(const char *fs, unsigned flags) {
        return (int) syscall(SYS_fsopen, fs, flags);
}
static inline int sys_fsconfig(int fd, unsigned cmd, const char *key, const void *val, int aux) {
        return (int) syscall(SYS_fsconfig, fd, cmd, key, val, aux);
}
static inline int sys_fsmount(int fd, unsigned flags, unsigned attrs) {
        return (int) syscall(SYS_fsmount, fd, flags, attrs);
}
static inline int sys_move_mount(int from_dfd, const char *from, int to_dfd, const char *to,
                                 unsigned flags) {
        return (int) syscall(SYS_move_mount, from_dfd, from, to_dfd, to, flags);
}
static inline int sys_open_tree(int dfd, const char *path, unsigned flags) {
        return (int) syscall(SYS_open_tree, dfd, path, flags);
}
static inline int sys_mount_setattr(int dfd, const char *path, unsigned flags,
                                    struct rt_mount_attr *attr) {
        return (int) syscall(SYS_mount_setattr, dfd, path, flags, attr, sizeof(*attr));
}
static inline long sys_clone3(struct rt_clone_args *args) {
        return syscall(SYS_clone3, args, sizeof(*args));
}
static inline int sys_pivot_root(const char *new_root, const char *put_old) {
        return (int) syscall(SYS_pivot_root, new_root, put_old);
}
static inline int sys_pidfd_send_signal(int pidfd, int sig) {
        return (int) syscall(SYS_pidfd_send_signal, pidfd, sig, NULL, 0);
}
static inline int sys_close_range(unsigned first, unsigned last, unsigned flags) {
        return (int) syscall(SYS_close_range, first, last, flags);
}

/* The sandbox's cgroup(s) (owned by sb), NULL once destroyed. */
struct rt_cgroup *rt_sandbox_cgroup(const struct rt_sandbox *sb);

/* ---- security policy (policy.c), built once per process ---- */

struct rt_policy {
        struct sock_fprog prog; /* seccomp filter, filter memory owned here */
        uint64_t caps_keep;     /* bit n = capability n stays */
        int cap_last;           /* highest capability the kernel knows */
};

/* The process-wide policy, built on first use (thread-safe). The result is
 * owned by the library and never freed. Returns 0 or negative errno. */
int rt_policy_get(const struct rt_policy **ret, struct wr_err *e);

/* Names of the capabilities a sandbox keeps, NULL-terminated. */
extern const char *const rt_caps_keep_names[];

/* Whether the sandboxes' seccomp filter allows the syscall name at all
 * (unconditionally, or for some arguments: clone, socket, personality).
 * warren-priv's denylist must not name any of them (src/priv/deny.h). */
bool rt_policy_allows(const char *name);

/* ---- warren-init from a sealed memfd (initfd.c) ---- */

/* A sealed, executable memfd holding the file at path, loaded once per
 * process and cached per path (a different path replaces the cache).
 * The fd stays owned by the cache (O_CLOEXEC). Returns fd or -errno. */
int rt_init_memfd(const char *path, struct wr_err *e);

/* ---- the bounded writable layer (disk.c) ---- */

#define RT_DISK_IMAGE "disk.img"
#define RT_DISK_UPPER "u"         /* the overlay's upper dir in the image's root */
#define RT_DISK_WORK "w"          /* and its work dir */
#define RT_DISK_TEMPLATE ".disk-" /* <template dir>/.disk-<bytes>.img: the template of a size */

/* Make the writable layer of bytes in the sandbox dir (dirfd, path dir):
 * a sparse ext4 image <dir>/disk.img on a self-clearing loop device,
 * mounted detached, u/ and w/ made in its root. The image is a copy of
 * a template of that size in template_dir (NULL: no template, a mkfs of
 * its own), made by the first
 * call for a size (mkfs: ~30 ms; then ~0.3 ms). Returns the mount's fd
 * (O_CLOEXEC) or a negative errno with e filled; on failure the image
 * file may be left in dir (the caller removes the dir). Blocking. */
int rt_disk_make(int dirfd, const char *dir, const char *template_dir, uint64_t bytes,
                 struct wr_err *e);

/* The writable layer of a sandbox that runs (made by a previous warrend):
 * its image's loop device mounted again, detached, sharing the
 * superblock in use. -ENOENT: the sandbox has no image; -ESRCH: no loop
 * device backs it. */
int rt_disk_open(int dirfd, const char *dir, struct wr_err *e);

/* Close the layer's mount *fd of a sandbox that is gone (its processes
 * dead), shutting its file system down first so that nothing it left
 * dirty is written out. Never for a sandbox that runs on. */
void rt_disk_drop(int *fd);

/* ---- the start message (mount.c) ----
 *
 * Everything the child needs that depends on the request: the overlay
 * (layers, upper/work dirs, the disk limit), hostname, RLIMIT_NOFILE and
 * the whole mount table (the runtime's own entries, then the caller's).
 * Encoded once by the parent. A plain create and a prestart hand the
 * buffer to the child in memory (it is a copy of the parent); a warm-pool
 * claim sends it over the park socket, with the BIND sources (detached
 * mounts the parent cloned) as SCM_RIGHTS. The child decodes it in place
 * with rt_start_decode() either way.
 *
 * Layout: struct rt_start_hdr; NUL-terminated hostname, upper, work,
 * scratch ("" = no disk limit: the upper dir is on the host's file
 * system), lowerdir, then n_layers layer paths; then
 * n_mounts records: struct rt_start_rec, the target and its NUL, len bytes
 * of data. Integers in host order (both ends are this binary). */

#define RT_START_MAGIC 0x7761726fu
#define RT_PARK_MAX 1048576
#define RT_PARK_MAX_LAYERS 500
#define RT_TABLE_OWN 5 /* /tmp, /run, /etc/hostname, /etc/hosts, /etc/resolv.conf */
#define RT_TABLE_MAX (RT_TABLE_OWN + RT_MOUNTS_MAX)
#define RT_HOSTS_MAX 512
#define RT_START_FDS_MAX (RT_MOUNTS_MAX + 1) /* the BIND sources and the writable layer */

struct rt_start_hdr {
        uint32_t magic;
        uint32_t n_layers;
        uint32_t n_mounts;
        uint32_t n_fds;  /* BIND sources passed along */
        uint64_t nofile; /* RLIMIT_NOFILE soft = hard */
        /* 1 + the index in the passed fds of the writable layer's mount
         * (rt_disk_make), which the child attaches at scratch; 0 = none
         * (no disk limit, or a claim: the prestart's is attached) */
        uint64_t scratch_fd;
        uint64_t reserved; /* must be 0 */
};

struct rt_start_rec {
        uint32_t kind, flags, mode;
        uint32_t fd;   /* BIND: index into the passed fds */
        uint64_t size; /* TMPFS */
        uint64_t len;  /* FILE, COPY: bytes of data after the target */
        uint64_t dev, ino;
        uint32_t type; /* BIND: S_IFMT of the source */
        uint32_t reserved;
};

/* One entry of the table. */
struct rt_entry {
        struct rt_mount m; /* BIND: source NULL, source_fd the fd */
        uint64_t dev, ino; /* BIND: the source's identity (what "the same
                            * entry" means for the warm pool) */
        uint32_t type;     /* BIND: S_IFMT of the source */
};

/* The decoded message. Strings and data point into the buffer. */
struct rt_start {
        uint64_t nofile;
        /* the writable layer's mount, to attach at scratch: encoding, its
         * index in the fds; decoded, the fd; negative: none */
        int scratch_fd;
        const char *hostname;
        const char *upper, *work;
        const char *scratch; /* NULL: no disk limit */
        const char *lowerdir;
        size_t n_layers;
        const char *layers[RT_PARK_MAX_LAYERS];
        size_t n_mounts;
        struct rt_entry mounts[RT_TABLE_MAX];
        size_t n_fds; /* BIND entries: source_fd is an index below this */
};

/* Encode s (BIND entries carry the index of their fd in source_fd, all
 * below s->n_fds) into a new buffer *ret (malloc'd, the caller frees) of
 * *ret_len bytes. Returns 0, -E2BIG (over RT_PARK_MAX or a limit of the
 * format) or -ENOMEM. */
int rt_start_encode(const struct rt_start *s, char **ret, size_t *ret_len);

/* Decode buf[0..len) into *out, in place: out's strings and data point
 * into buf, which must stay. BIND entries get fds[their index]. Checks
 * the structure (magic, counts, every string and record inside buf, kinds
 * known, fd indexes below n_fds == the header's count); the entries
 * themselves were checked by the sender. No allocation, async-signal-safe
 * (the child uses it). Returns 0 or -EBADMSG. */
int rt_start_decode(const char *buf, size_t len, const int *fds, size_t n_fds,
                    struct rt_start *out);

/* Do a and b describe the same mount (kind, target, flags, mode, size,
 * content; for BIND the same source inode and type)? */
bool rt_entry_same(const struct rt_entry *a, const struct rt_entry *b);

/* MOUNT_ATTR_* for RT_MOUNT_* flags. */
unsigned rt_mount_attrs(unsigned flags);

/* ---- the child between clone and exec (child.c) ---- */

struct rt_child {
        const struct rt_policy *policy;
        int err_fd;                   /* write end of the CLOEXEC error pipe */
        int ctl_fd;                   /* listening control socket; becomes fd 3 */
        int init_fd;                  /* sealed memfd of warren-init */
        int log_fd;                   /* > 2: init's stdout/stderr; else /dev/null */
        int cg_fds[RT_CGROUP_V1_MAX]; /* v1: cgroup.procs to join */
        size_t n_cg_fds;
        bool unshare_cgroupns; /* v1: cgroup ns after joining */
        const char *rootfs;    /* <dir>/rootfs, the overlay mount point */
        char env_id[96];       /* WARREN_SANDBOX_ID=<id> */
        /* the start message (see above) and its BIND sources */
        const char *msg;
        size_t msg_len;
        const int *fds;
        size_t n_fds;
        /* warm pool (rt_sandbox_prestart): >= 0 = after preparing, wait
         * on this socket for the claim's start message (and its fds);
         * EOF = _exit(0) */
        int park_fd;
        /* the network (cfg->net): has_net, the veth to make, an fd of the
         * caller's network namespace (the peer goes there) and a
         * NETLINK_ROUTE socket opened in it (to set up the peer); both
         * closed once the veth is up, before the child parks */
        bool has_net;
        struct rt_net net;
        int host_ns_fd;
        int host_nl_fd;
        /* the user namespace (cfg->uid_count > 0; see child.c) */
        uint32_t uid_base, uid_count;
};

/* Set everything up inside the new namespaces and exec warren-init. Never
 * returns: on failure writes a struct wr_err to c->err_fd and _exit()s. Uses
 * only async-signal-safe calls (no malloc). */
_noreturn_ void rt_child_run(const struct rt_child *c);

/* ---- helpers (util.c) ---- */

/* Escape a path for overlayfs' legacy lowerdir=: '\\', ':' and ',' get a
 * backslash. Returns the length written (without NUL) or -ENAMETOOLONG. */
int rt_overlay_escape(const char *path, char *buf, size_t size);

/* True when p is a sane in-sandbox absolute path: starts with '/', no
 * empty, "." or ".." component, no trailing '/', < PATH_MAX. ("/" itself
 * is not a valid target.) */
bool rt_target_valid(const char *p);
