/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* runtime: create and destroy isolated sandboxes.
 *
 * A sandbox is one warren-init process (PID 1 of a fresh pid namespace) in
 * new mount, pid, uts, ipc, net and cgroup namespaces, on an overlayfs root
 * (read-only image layers + a writable upper dir), inside its own cgroup(s),
 * with a reduced capability set, no_new_privs and a seccomp allowlist. The
 * daemon talks to init over the control socket at rt_sandbox_ctl_path()
 * (protocol: src/init/ctl-proto.h, client: src/runtime/ctl.h).
 *
 * Control socket contract with warren-init: before clone the runtime binds a
 * listening AF_UNIX SOCK_SEQPACKET socket at <cfg->dir>/ctl.sock (mode 0600;
 * the host path is not reachable from inside the sandbox) and hands it to
 * init as fd 3 (not CLOEXEC). init runs with argv ["warren-init"] and an
 * environment holding only WARREN_SANDBOX_ID=<id>. Its stdin is /dev/null;
 * stdout/stderr are /dev/null or cfg->log_fd.
 *
 * Threading: functions on one struct rt_sandbox must not run concurrently;
 * different sandboxes may be created from different threads. No function
 * waits for a grace period: rt_sandbox_create() returns once init has been
 * exec'd (a few ms), rt_sandbox_destroy() only SIGKILLs and reaps. Graceful
 * stop = rt_sandbox_kill(SIGTERM), wait on rt_sandbox_pidfd() in the event
 * loop with a timer, then rt_sandbox_destroy().
 *
 * The library does everything in the child between clone and exec with raw
 * syscalls only (no malloc, no locks), so it is safe to call from a
 * multi-threaded process. Requires root (CAP_SYS_ADMIN in the initial user
 * namespace), Linux >= 5.12 (openat2, the new mount API, mount_setattr,
 * pidfds) and overlayfs; user namespaces (cfg->uid_count) need Linux >=
 * 6.8 (idmapped layers under overlayfs, its lowerdir+) and an image store
 * on a filesystem that supports idmapped mounts (ext4, xfs, btrfs, tmpfs).
 * cgroups v1 (legacy/hybrid layout) and v2 are both supported behind the
 * same interface. */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "basic/err.h"

/* Defaults taken when a limit is 0. */
#define RT_DEFAULT_MEMORY (1ULL << 30)  /* 1 GiB, swap off */
#define RT_DEFAULT_CPU 1000u            /* millicores: one core */
#define RT_DEFAULT_PIDS 1024u           /* cgroup pids.max */
#define RT_DEFAULT_TMPFS (256ULL << 20) /* /tmp; /run and /dev/shm get 64 MiB */
#define RT_DEFAULT_NOFILE 1024u         /* RLIMIT_NOFILE soft and hard */
#define RT_DISK_MIN (8ULL << 20)        /* the smallest writable layer (ext4 image) */
#define RT_DISK_MAX (8ULL << 40)        /* and the largest (a sparse file: not reserved) */

/* Resource limits; 0 selects the default above. */
struct rt_limits {
        uint64_t memory_bytes;   /* memory limit; swap is disabled */
        uint32_t cpu_millicores; /* CFS quota: 500 = half a core */
        uint32_t pids_max;       /* processes and threads */
        uint64_t tmp_bytes;      /* size of the /tmp tmpfs */
        uint32_t nofile;         /* RLIMIT_NOFILE (clamped to the caller's hard limit) */
        /* Size of the writable layer; 0 = unbounded (upper and work dirs
         * on the host file system of cfg->dir). When set (at least
         * RT_DISK_MIN), upper and work live on a sparse ext4 image of this
         * size, <dir>/disk.img, on a self-clearing loop device, mounted
         * detached by the runtime and attached over <dir>/upper inside the
         * sandbox's mount namespace only: writes past it fail with ENOSPC,
         * the host file system holds at most the image, and nothing of it
         * is RAM. A warm-pool claim must ask for the prestart's size. */
        uint64_t disk_bytes;
};

/* Which cgroup hierarchy to use. AUTO: v2 when /sys/fs/cgroup is cgroup2,
 * else v1 (legacy or hybrid layout). V2 on a hybrid host uses the unified
 * hierarchy mounted at /sys/fs/cgroup/unified (then limits are refused
 * unless their controllers are available there). */
enum rt_cgroup_mode {
        RT_CGROUP_AUTO = 0,
        RT_CGROUP_V1 = 1,
        RT_CGROUP_V2 = 2,
};

/* ---- the mount table ----
 *
 * What a sandbox gets inside its root beyond the image, as a list applied
 * in order (like bubblewrap's setup ops). Every target is an absolute path
 * in the sandbox, resolved inside the root (symlinks in its parent dirs
 * are followed but never out of the root, missing parent dirs are made,
 * a symlink or wrong-type inode at the target itself is replaced, never
 * followed) and mounted by fd. Later entries go on top of earlier ones
 * (a target under an earlier entry's target lands inside that mount).
 * The runtime puts its own entries first (/tmp, /run, /etc/hostname,
 * /etc/hosts, /etc/resolv.conf, built from the config's other fields),
 * then cfg->mounts. */
enum rt_mount_kind {
        /* A host directory, regular file or socket (source or source_fd),
         * cloned by the runtime on the host side before the sandbox runs
         * (not recursive: mounts below the source are not included). The
         * target is made a directory or a regular file to match. */
        RT_MOUNT_BIND = 1,
        /* A new tmpfs of size bytes (> 0), its root dir of mode. */
        RT_MOUNT_TMPFS = 2,
        /* A regular file holding data[0..len) with mode, on a small tmpfs
         * of its own (never on the host's disk), bind-mounted onto the
         * target. For secrets, CA bundles, configs; RO makes it
         * read-only. */
        RT_MOUNT_FILE = 3,
        /* data[0..len) written into the sandbox's writable layer at the
         * target (a file the sandbox may change or delete; mode applies
         * when it is created, an existing file keeps its own). flags must
         * be 0. /etc/hostname, /etc/hosts, /etc/resolv.conf. */
        RT_MOUNT_COPY = 4,
};

/* rt_mount.flags (mount attributes; COPY takes none) */
#define RT_MOUNT_RO (1u << 0)
#define RT_MOUNT_NOSUID (1u << 1)
#define RT_MOUNT_NODEV (1u << 2)
#define RT_MOUNT_NOEXEC (1u << 3)
/* BIND, in a sandbox with a user namespace: an idmapped mount, the
 * source's file ids are the sandbox's (0 on disk is root inside, what it
 * writes is stored with its ids): for the sandbox's own data (volumes).
 * Refused when the source's filesystem cannot be idmapped. Without it a
 * bind shows host ownership through the namespace (host root's files as
 * 65534). No effect without a user namespace. */
#define RT_MOUNT_IDMAP (1u << 4)

#define RT_MOUNTS_MAX 64                /* entries in cfg->mounts */
#define RT_MOUNT_DATA_MAX (256u << 10)  /* FILE/COPY content of one entry */
#define RT_MOUNTS_DATA_MAX (512u << 10) /* FILE/COPY content of all entries */

struct rt_mount {
        enum rt_mount_kind kind;
        /* Absolute path in the sandbox: no "." / ".." / empty components,
         * not "/", not /proc, /dev, /sys or below them. */
        const char *target;
        unsigned flags; /* RT_MOUNT_* */
        /* BIND: absolute host path (its last component is not followed),
         * or NULL and source_fd: an fd (> 2, O_PATH is enough; not taken
         * over) naming it. */
        const char *source;
        int source_fd;
        /* FILE, COPY: content (may hold NUL bytes), len <=
         * RT_MOUNT_DATA_MAX. */
        const void *data;
        size_t len;
        uint64_t size; /* TMPFS: size in bytes, > 0 */
        /* TMPFS: mode of its root (0 = 0755); FILE, COPY: file mode (0 =
         * 0644); permission bits and sticky/setgid only. */
        mode_t mode;
};

/* The sandbox's network beyond the loopback: a veth pair made by the
 * sandbox's first process from inside its new network namespace (one
 * RTM_NEWLINK; the peer is created directly in the caller's network
 * namespace, never moved), with addr/prefix and a default route via
 * gateway inside, and on the peer gateway/prefix. IPv6 is off on both
 * ends (no address is generated). */
struct rt_net {
        char peer[16];    /* the host end's name (1-15 chars, [A-Za-z0-9_.-]) */
        uint32_t addr;    /* the sandbox's address (network byte order) */
        uint32_t gateway; /* the host end's address (network byte order) */
        uint8_t prefix;   /* 1..31: both addresses in one prefix of this length */
};

struct rt_sandbox_config {
        /* Sandbox id: [A-Za-z0-9][A-Za-z0-9_.-]{0,63}; names the cgroup. */
        const char *id;
        /* Host dir of this sandbox (created if missing, mode 0700):
         * upper/, work/, rootfs/, ctl.sock. Must be on a filesystem that can
         * hold an overlayfs upper dir (ext4, xfs, btrfs; not overlayfs).
         * rt_sandbox_destroy() removes it entirely. */
        const char *dir;
        /* Where the template of this sandbox's writable layer is kept (one
         * sparse image per size, made on first use, then copied: ~0.3 ms
         * instead of a mkfs; see limits.disk_bytes); NULL = no template:
         * a mkfs.ext4 of the sandbox's own (~30 ms). */
        const char *disk_template_dir;
        /* Read-only lower dirs, top-most first; at least one. */
        const char *const *layers;
        size_t n_layers;
        /* Hostname; NULL = the id. */
        const char *hostname;
        /* Host path of the static warren-init binary. */
        const char *init_path;
        struct rt_limits limits;
        /* Content of /etc/resolv.conf in the sandbox; NULL = a file that
         * names no resolver. */
        const char *resolv_conf;
        /* fd that receives init's stdout and stderr (debugging); values
         * <= 2 mean /dev/null. Not taken over. */
        int log_fd;
        enum rt_cgroup_mode cgroup_mode;
        /* Apply no cgroup limits (only processes are grouped and killed).
         * For hosts whose cgroup v2 hierarchy has no controllers; tests. */
        bool unlimited;
        /* Mounts of the caller (volumes, a CA bundle, an agent socket,
         * secret files), applied after the runtime's own entries; see
         * struct rt_mount. The array and what it points to are only read
         * during the call (bind sources are opened then). */
        const struct rt_mount *mounts;
        size_t n_mounts;
        /* NULL: loopback only. Else the veth pair above (made by the child
         * before it parks, for a prestart; a claim's net is ignored, the
         * prestart's stays). /etc/hosts then names the hostname with
         * net->addr instead of 127.0.1.1. */
        const struct rt_net *net;
        /* User namespace: with uid_count > 0 the sandbox runs in a user
         * namespace of its own that maps ids 0..uid_count-1 inside to
         * uid_base..uid_base+uid_count-1 on the host (gids alike); its
         * root is an unprivileged host uid. The image layers are mounted
         * idmapped (shared and unchanged on disk: file ids 0.. on disk are
         * 0.. inside), the upper dir and everything the runtime makes
         * (tmpfs roots, files, dirs) is owned by uid_base (root inside),
         * bind sources are idmapped when their filesystem allows it (else
         * their files show as the overflow id, 65534). What the sandbox
         * writes to its writable layer is owned by its range on the host.
         * The other namespaces stay owned by the host's user namespace:
         * root inside has no capability over its network, mounts or
         * hostname (binding ports below 1024 is opened to every uid of the
         * sandbox instead: net.ipv4.ip_unprivileged_port_start=0 in its
         * network namespace). A prestart's range stays (a claim's is
         * ignored). 0: no user namespace (sandbox root is host root). */
        uint32_t uid_base, uid_count;
};

struct rt_usage {
        double cpu_seconds;
        uint64_t memory_bytes;      /* current */
        uint64_t memory_peak_bytes; /* 0 when the kernel does not track it */
        uint32_t pids;
};

struct rt_sandbox;

/* Create and start a sandbox as described by cfg (which is copied; the
 * caller keeps ownership of its strings). On success *ret owns: the
 * sandbox's cgroup(s), the init process (reaped by rt_sandbox_destroy()),
 * its pidfd, and cfg->dir with its contents; init is running (exec'd).
 * Errors (negative errno, context in e, "create sandbox: ..."):
 *   -EINVAL bad config (id, missing layers/init_path), -ENODEV overlayfs
 *   missing, -ENOENT/-EOPNOTSUPP cgroup controller missing, -EEXIST a
 *   cgroup for this id exists, -ENAMETOOLONG, any errno of a failing step
 *   in the child ("create sandbox: mount /proc: Operation not permitted").
 * On failure nothing is left behind (cgroups, init, mounts) except cfg->dir
 * itself when it existed before the call. */
int rt_sandbox_create(const struct rt_sandbox_config *cfg, struct rt_sandbox **ret,
                      struct wr_err *e);

/* Warm pool, step 1: everything of rt_sandbox_create() that does not
 * depend on the image or the request: the dir, control socket, cgroups
 * (with cfg->limits, normally the defaults), namespaces and the child,
 * which joins the cgroups (on v1 that costs an RCU grace period: paid
 * here, ahead), mounts /proc (masked), /dev and /sys on a private stage,
 * brings the loopback up and then waits for step 2. When cfg->layers are
 * given (n_layers may be 0) it also builds the root ahead: the overlay of
 * those layers with the stage's mounts moved in and the mount table
 * applied (/tmp of cfg->limits.tmp_bytes, /run, /etc written for
 * cfg->hostname and resolv_conf, cfg->mounts); step 2 then applies its
 * own table on top, skipping the entries that are identical, or builds a
 * new root when it names other layers (compared by path order and
 * dev/ino) or leaves out a target the prestart's table used (the
 * writable layer is the prestart's: step 2 must ask for its size).
 * Returns once the child is parked (a failure on the way is this call's
 * error; on v1 expect 10-20 ms, mostly waiting: run it on a worker
 * thread). Only cfg->id, dir, init_path, cgroup_mode, log_fd, layers,
 * hostname, resolv_conf, limits.tmp_bytes, limits.disk_bytes,
 * disk_template_dir, mounts and unlimited are used now. The handle can
 * be destroyed like any other (nothing runs in it but the waiting
 * child). */
int rt_sandbox_prestart(const struct rt_sandbox_config *cfg, struct rt_sandbox **ret,
                        struct wr_err *e);

/* Warm pool, step 2: finish a prestarted sandbox as cfg says (same id and
 * dir; limits are re-applied to its cgroups, layers/hostname/tmp size/
 * disk/nofile/resolv.conf/mounts sent to the child, with the bind sources
 * opened here, and the child mounts the root and execs init). Returns like rt_sandbox_create(); on
 * failure call rt_sandbox_destroy(). SIGPIPE must be ignored by the caller (the child may be gone).
 */
int rt_sandbox_start(struct rt_sandbox *sb, const struct rt_sandbox_config *cfg, struct wr_err *e);

/* rt_sandbox_start() in two halves, so that the caller can do its own
 * work while the child mounts the root and execs init:
 * rt_sandbox_start_send() checks cfg, re-applies the limits and hands the
 * rest to the parked child (does not wait); rt_sandbox_start_wait() waits
 * until init runs (0) or the child failed (its error). The control socket
 * accepts connections from the prestart on (init picks them up once it
 * runs), and rt_sandbox_pid()/rt_sandbox_start_time() already name init.
 * _send() returns -ESTALE when the prestarted child is gone (it failed
 * while preparing, or was killed): the handle is then only good for
 * rt_sandbox_destroy(); create the sandbox afresh. After any other _send()
 * error, or a _wait() error, call rt_sandbox_destroy(). */
int rt_sandbox_start_send(struct rt_sandbox *sb, const struct rt_sandbox_config *cfg,
                          struct wr_err *e);
int rt_sandbox_start_wait(struct rt_sandbox *sb, struct wr_err *e);

/* The host pid of the sandbox's init; 0 after it was reaped. */
pid_t rt_sandbox_pid(const struct rt_sandbox *sb);

/* A pidfd for init (owned by sb; do not close). Pollable: readable once
 * init exited. -EBADF after rt_sandbox_destroy(). */
int rt_sandbox_pidfd(const struct rt_sandbox *sb);

/* Host path of the control socket (<dir>/ctl.sock). Owned by sb. */
const char *rt_sandbox_ctl_path(const struct rt_sandbox *sb);

/* The sandbox's id and host dir. Owned by sb. */
const char *rt_sandbox_id(const struct rt_sandbox *sb);
const char *rt_sandbox_dir(const struct rt_sandbox *sb);

/* Remove the writable layers' templates (and a crash's half-made ones)
 * from dir (rt_sandbox_config.disk_template_dir): while no create runs (a
 * template is made again on first use). */
void rt_disk_sweep(const char *dir);

/* The overlay's upper dir of the running sandbox, from the host: an
 * O_RDONLY | O_DIRECTORY fd (the caller's). On the host file system
 * (<dir>/upper, or <dir>/upper.1 when a pool entry's root was rebuilt)
 * or in the writable layer's image (its mount is opened again for a
 * sandbox a previous warrend made). Negative errno with e filled. */
int rt_sandbox_upper_open(struct rt_sandbox *sb, struct wr_err *e);
/* The same from a sandbox's dir opened at dirfd (dir: its name, for
 * messages): its disk image's upper dir (mounted once into *disk_fd, a
 * detached mount the caller closes; -1 on entry: not yet) or its
 * "upper[.1]". warren-priv's UPPER_PACK. */
int rt_upper_open_at(int dirfd, const char *dir, int *disk_fd, struct wr_err *e);

/* Send a signal. SIGKILL goes to every process of the sandbox (cgroup.kill
 * on v2, freeze + kill each pid + thaw on v1, and init's pidfd); any other
 * signal goes to init only, which forwards it. Does not wait.
 * Returns 0, -ESRCH when init is already gone (SIGKILL: still 0), or the
 * errno of the failing write. */
int rt_sandbox_kill(struct rt_sandbox *sb, int sig);

/* Pause (on) or resume every process of the sandbox with the cgroup
 * freezer: a paused sandbox uses no CPU; signals stay pending until it is
 * resumed (SIGKILL through rt_sandbox_kill still ends it). 0 or -errno
 * with a message in e (-EOPNOTSUPP: no freezer on this host). */
int rt_sandbox_freeze(struct rt_sandbox *sb, bool on, struct wr_err *e);
/* 1 when the sandbox is paused, 0 when not, -errno. */
int rt_sandbox_frozen(const struct rt_sandbox *sb);

/* Non-blocking: reap init if it has exited. Returns 1 and stores its wait
 * status in *status (may be NULL) when init is (now or already) reaped, 0
 * while it runs, negative errno on failure. */
int rt_sandbox_reap(struct rt_sandbox *sb, int *status);

/* ---- processes beside a sandbox ----
 *
 * A host process that belongs to a sandbox without being inside it: it
 * runs in warrend's namespaces and root (it never sees the sandbox's
 * files or processes, and they never see it), as an unprivileged uid/gid
 * with no supplementary groups, no capabilities and no_new_privs, in the
 * sandbox's cgroup(s): it counts against the sandbox's limits, and every
 * kill of the sandbox (terminate, the lifetime, rt_sandbox_destroy, a
 * restarted daemon's rt_sandbox_cleanup) kills it with the rest. For
 * per-sandbox helpers that must hold what the sandbox may use but not
 * read (its ssh-agent and the keys in it). */
struct rt_beside {
        const char *path;  /* absolute path of the program (execve, no PATH search) */
        char *const *argv; /* argv[0] included; NULL-terminated */
        char *const *envp; /* the whole environment; NULL-terminated */
        int cwd_fd;        /* > 2: a directory to start in (fchdir before dropping
                            * privileges, so it may sit below dirs the uid cannot
                            * traverse); otherwise "/" */
        int stdin_fd;      /* > 2: its stdin; otherwise /dev/null (same for the next two) */
        int stdout_fd;
        int stderr_fd;
        uid_t uid; /* not 0 */
        gid_t gid; /* not 0 */
};

/* Start b beside sandbox sb (which must be running). Returns 0 once the
 * program was exec'd, with *ret_pidfd (O_CLOEXEC; the caller owns it and
 * must reap the process: waitid(P_PIDFD, ..., WEXITED); it sends no
 * SIGCHLD) and *ret_pid (may be NULL). Errors: -EINVAL (uid/gid 0, a
 * relative path), -ESRCH (sb destroyed), the errno of the failed step in
 * the child ("exec /usr/bin/ssh-agent: No such file or directory"). */
int rt_sandbox_spawn_beside(struct rt_sandbox *sb, const struct rt_beside *b, int *ret_pidfd,
                            pid_t *ret_pid, struct wr_err *e);

/* The first step of rt_sandbox_destroy alone: SIGKILL init (and with it
 * every process of its pid namespace; a paused sandbox is thawed) and wait
 * until it is reaped. The rest (veth, cgroups with any process left in
 * them, the dir) is then rt_sandbox_destroy's. 0 or -errno with e. */
int rt_sandbox_kill_wait(struct rt_sandbox *sb, struct wr_err *e);

/* Tear the sandbox down: SIGKILL every process, reap init (SIGKILLed
 * processes die promptly; no grace period is waited), delete the host end
 * of its veth (cfg->net; ~10-30 ms, an RCU grace period), remove the cgroups,
 * unmount anything left on the host side and remove cfg->dir recursively
 * (never following symlinks or crossing into other mounts). Idempotent:
 * calling it again after success returns 0. sb stays valid until
 * rt_sandbox_free(). Errors: negative errno with context in e (a step that
 * failed can be retried by calling again). */
int rt_sandbox_destroy(struct rt_sandbox *sb, struct wr_err *e);

/* The name of the host end of the sandbox's veth while the handle owns it
 * (cfg->net was given, rt_sandbox_net_disown() was not called and
 * rt_sandbox_destroy() did not delete it yet), else NULL. Owned by sb. */
const char *rt_sandbox_net_peer(const struct rt_sandbox *sb);

/* rt_sandbox_destroy() for a caller that has the host side done elsewhere
 * (warren-priv's SANDBOX_CLEANUP and LINK_DELETE, docs/privsep.md):
 * rt_sandbox_kill_wait(), then drop what the handle holds of the sandbox
 * (the writable layer's mount, the cgroups' fds, the pidfd) without
 * touching the host: the veth's host end, the cgroups and the dir are
 * left for rt_sandbox_cleanup(id, dir) and rt_net_link_delete() (in
 * that order after this call). Counts as destroyed. 0 or -errno with e
 * (from the kill). */
int rt_sandbox_release(struct rt_sandbox *sb, struct wr_err *e);

/* The caller deletes the host end of the sandbox's veth itself (later,
 * off the critical path: rt_net_link_delete): rt_sandbox_destroy() then
 * leaves it (the kernel takes it down with the netns, in the background).
 * No-op without a veth. */
void rt_sandbox_net_disown(struct rt_sandbox *sb);

/* Free the handle. Does not stop the sandbox (a daemon that exits leaves
 * sandboxes running); call rt_sandbox_destroy() first to stop it. Closes
 * the pidfd. Accepts NULL. */
void rt_sandbox_free(struct rt_sandbox *sb);

/* Clean up after a sandbox this process holds no handle for (daemon
 * restart: its init died, or it is not wanted any more): SIGKILL every
 * process in its cgroup (repeatedly until empty), remove the cgroup(s) and
 * dir (may be NULL). Idempotent; 0 when nothing is left. */
int rt_sandbox_cleanup(const char *id, const char *dir, enum rt_cgroup_mode mode, struct wr_err *e);

/* Re-attach to a running sandbox this process did not create (daemon
 * restart): opens a pidfd for pid and checks that it is really the
 * sandbox's init: its start time (field 22 of /proc/<pid>/stat, clock
 * ticks since boot; 0 = do not check) equals start_time and it is a member
 * of the sandbox's cgroup; then opens the cgroup(s). The handle works like
 * one from rt_sandbox_create() except that init is not a child of the
 * caller: rt_sandbox_reap() reports exit through the pidfd (status
 * SIGKILL, the real one went to init's parent) and rt_sandbox_destroy()
 * waits for it on the pidfd (bounded, 5 s). dir is the sandbox's host dir
 * (as given to create). Errors: -ESRCH (init gone, or pid is another
 * process now), -ENOENT (cgroup missing), -EINVAL, -ENOMEM. */
int rt_sandbox_attach(const char *id, const char *dir, pid_t pid, uint64_t start_time,
                      enum rt_cgroup_mode mode, struct rt_sandbox **ret, struct wr_err *e);

/* A handle of a sandbox another process holds (warren-priv under
 * --privsep, docs/privsep.md): built from init's pidfd and a connected
 * ctl socket (ctl_fd, may be -1; for rt_sandbox_ctl_take) that process
 * handed over (both taken over, closed on failure too), its pid and start time
 * (checked again here) and net (may be NULL: the veth's host end the
 * handle owns, for rt_sandbox_net_peer/net_disown). It reads: pid, pidfd,
 * start time, ctl path, usage, OOM kills, frozen, reap (exit through the
 * pidfd, as for an attached handle); the cgroups are opened for reading.
 * It refuses every privileged act (kill, kill_wait, freeze, start,
 * destroy: -EPERM); rt_sandbox_release only drops it. Errors: -EINVAL,
 * -ESRCH (pid gone or another process), -ENOENT (no cgroup), -ENOMEM. */
int rt_sandbox_adopt(const char *id, const char *dir, pid_t pid, uint64_t start_time, int pidfd,
                     int ctl_fd, const struct rt_net *net, enum rt_cgroup_mode mode,
                     struct rt_sandbox **ret, struct wr_err *e);

/* The ctl socket rt_sandbox_adopt was given (the caller's now; once), or
 * -ENOENT. */
int rt_sandbox_ctl_take(struct rt_sandbox *sb);

/* True for a handle of rt_sandbox_adopt. */
bool rt_sandbox_remote(const struct rt_sandbox *sb);

/* Start time of init (clock ticks since boot, as rt_sandbox_attach checks
 * it), to be recorded at create. -ESRCH once reaped. */
int rt_sandbox_start_time(const struct rt_sandbox *sb, uint64_t *ret);

/* Start time of any pid (field 22 of /proc/<pid>/stat). -ESRCH when gone. */
int rt_proc_start_time(pid_t pid, uint64_t *ret);

/* Current resource usage from the cgroup. Returns 0 or negative errno. */
int rt_sandbox_usage(const struct rt_sandbox *sb, struct rt_usage *u);

/* Processes of the sandbox the kernel's OOM killer killed so far. 0, or
 * -ENOENT (no memory cgroup) / -ENODATA (kernel does not count). */
int rt_sandbox_oom_kills(const struct rt_sandbox *sb, uint64_t *ret);

/* Check what the host lacks for sandboxes (root, overlayfs, openat2, new
 * mount API, cgroup controllers for mode). Returns 0, or a negative errno
 * with a clear message in e. Cheap after the first call. */
int rt_host_check(enum rt_cgroup_mode mode, struct wr_err *e);

/* Do the once-per-process work up front (daemon start-up) so that the
 * first rt_sandbox_create() does not pay it (~3-4 ms): build the seccomp
 * filter and capability set, load init_path into the sealed memfd, run
 * rt_host_check(mode). Returns 0 or negative errno with context in e. */
int rt_prepare(const char *init_path, enum rt_cgroup_mode mode, struct wr_err *e);

/* --- pure helpers (no side effects; also used by API glue and tools) --- */

/* Check a mount table as rt_sandbox_create() does before anything is made
 * (so an API layer can reject a request with the same message): at most
 * RT_MOUNTS_MAX entries; each a known kind with known flags (none for
 * COPY), a valid target (see struct rt_mount), a BIND source that is an
 * absolute path or an fd > 2, a TMPFS size > 0, FILE/COPY content within
 * RT_MOUNT_DATA_MAX (all together within RT_MOUNTS_DATA_MAX), a mode
 * within 07777. Returns 0, or -EINVAL with the entry named in e
 * ("mount 2 (/proc/x): target is under /proc"). Does not touch the
 * host: a missing bind source fails at create (its errno). */
int rt_mounts_check(const struct rt_mount *mounts, size_t n, struct wr_err *e);

/* True when id is a valid sandbox id (see rt_sandbox_config.id). */
bool rt_id_valid(const char *id);

/* Parse a memory size: bytes ("1048576"), or a number with a suffix
 * k/K/Ki, m/M/Mi, g/G/Gi, t/T/Ti (all binary, 1024-based; "B" after it is
 * accepted). Returns 0, or -EINVAL (malformed), -ERANGE (overflow, or 0). */
int rt_memory_parse(const char *s, uint64_t *ret);

/* Parse CPU: cores ("2", "0.5", up to 3 decimals) or millicores ("500m").
 * Returns 0 and millicores, or -EINVAL / -ERANGE (0 or > 1,000,000 cores). */
int rt_cpu_parse(const char *s, uint32_t *ret_millicores);

/* --- host-side network plumbing (netlink.c; the caller's namespace) --- */

/* Delete the link called name (a veth: both ends go). Returns 1 when it
 * was deleted, 0 when there was none, or a negative errno with context in
 * e. Deleting a veth waits for an RCU grace period (~10-30 ms): call it
 * off the event loop. */
int rt_net_link_delete(const char *name, struct wr_err *e);

/* Names of the links whose name starts with prefix, up to max of them
 * into names; *ret_n = how many there are (may exceed max). 0 or negative
 * errno. */
int rt_net_links(const char *prefix, char (*names)[16], size_t max, size_t *ret_n,
                 struct wr_err *e);

/* One IPv4 route of any table, as rt_net_routes4() lists them. */
struct rt_route4 {
        uint32_t dst;   /* network byte order; 0 with prefix 0 = default */
        uint8_t prefix; /* rtm_dst_len */
        uint8_t type;   /* RTN_* (unicast, local, broadcast, blackhole, ...) */
        uint32_t table; /* RT_TABLE_* or a number */
        int oif;        /* 0 = none */
        char dev[16];   /* name of oif, "" = none */
};

/* Every IPv4 route of every table (the local table holds the host's own
 * addresses), up to max into out; *ret_n = how many there are. 0 or
 * negative errno. */
int rt_net_routes4(struct rt_route4 *out, size_t max, size_t *ret_n, struct wr_err *e);

/* A TCP socket (non-blocking, O_CLOEXEC, TCP_NODELAY) made in the network
 * namespace of the process pidfd names and connected from there to addr
 * (host byte order):port, into *ret_fd (the caller's). A short-lived
 * thread joins the namespace (setns affects the calling thread only: the
 * caller never leaves its own); needs CAP_SYS_ADMIN over that namespace.
 * Returns 1 when connected, 0 when the connect is in progress (wait for
 * POLLOUT, then read SO_ERROR), or a negative errno (setns's, socket's,
 * or the connect's own, e.g. -ECONNREFUSED). Any thread. */
int rt_net_connect_in(int pidfd, uint32_t addr, uint16_t port, int *ret_fd);
