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
#include "runtime/cgroup.h"
#include "runtime/runtime.h"

#define streq(a, b) (strcmp((a), (b)) == 0)

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

/* ---- warren-init from a sealed memfd (initfd.c) ---- */

/* A sealed, executable memfd holding the file at path, loaded once per
 * process and cached per path (a different path replaces the cache).
 * The fd stays owned by the cache (O_CLOEXEC). Returns fd or -errno. */
int rt_init_memfd(const char *path, struct wr_err *e);

/* ---- the child between clone and exec (child.c) ---- */

#define RT_HOSTS_MAX 512

struct rt_child {
        const struct rt_sandbox_config *cfg;
        const struct rt_policy *policy;
        int err_fd;                   /* write end of the CLOEXEC error pipe */
        int ctl_fd;                   /* listening control socket; becomes fd 3 */
        int init_fd;                  /* sealed memfd of warren-init */
        int log_fd;                   /* > 2: init's stdout/stderr; else /dev/null */
        int cg_fds[RT_CGROUP_V1_MAX]; /* v1: cgroup.procs to join */
        size_t n_cg_fds;
        bool unshare_cgroupns; /* v1: cgroup ns after joining */
        const char *rootfs;    /* <dir>/rootfs, the overlay mount point */
        const char *upper;     /* <dir>/upper */
        const char *work;      /* <dir>/work */
        /* disk limit: a size-capped tmpfs mounted here (in the sandbox's
         * mount namespace) holds upper and work; NULL = no limit */
        const char *scratch;
        char scratch_opt[64]; /* "size=N,mode=0755" */
        const char *lowerdir; /* legacy "l1:l2" option, escaped (fallback) */
        const char *hostname;
        char hosts[RT_HOSTS_MAX]; /* /etc/hosts content */
        const char *resolv_conf;  /* /etc/resolv.conf content */
        char tmp_opt[32];         /* size= for /tmp */
        struct rlimit nofile;
        char env_id[96]; /* WARREN_SANDBOX_ID=<id> */
        /* warm pool (rt_sandbox_prestart): >= 0 = after joining the
         * cgroups, wait for the rest of the config on this pipe (the
         * RT_PARK_* message rt_sandbox_start sends); EOF = _exit(0) */
        int park_fd;
};

/* The message a parked child reads: the header, then NUL-terminated
 * strings: hostname, hosts, resolv_conf, tmp_opt, upper, work, scratch
 * ("" = none), scratch_opt, lowerdir, then n_layers layer paths. */
#define RT_PARK_MAGIC 0x7761726eu
#define RT_PARK_MAX 1048576
#define RT_PARK_MAX_LAYERS 500
struct rt_park_hdr {
        uint32_t magic;
        uint32_t n_layers;
        uint64_t nofile;
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

/* Remove name (file or directory tree) under dirfd without following
 * symlinks and without descending into other mounts (-EBUSY then).
 * ENOENT counts as success. Returns 0 or negative errno. */
int rt_rm_rf_at(int dirfd, const char *name);
