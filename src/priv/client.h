/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* warrend's side of warren-priv (docs/privsep.md): starts it, supervises
 * it, and sends it the requests of priv-proto.h.
 *
 * priv_client_new starts `warren-priv --sock-fd N --state-dir DIR` with
 * one end of a new SOCK_SEQPACKET pair and a thread of its own that
 * watches the process (its pidfd): when warren-priv dies it is reaped,
 * logged and started again at once (at most once a second while it keeps
 * dying). Requests may come from any thread (the sandbox manager's
 * workers, the event loop), several at once: each a datagram out (under a
 * mutex) and its answer back, matched by id by the supervisor thread (the
 * socket's only reader) and handed to the waiting caller, with no time
 * limit (a teardown's removal takes as long as the tree it removes;
 * warren-priv runs up to 8 at once, so one long removal does not hold up
 * the others). A request whose warren-priv died under it fails
 * cleanly (-EIO, "warren-priv died during SANDBOX_CLEANUP") without a
 * retry (the caller's own retry path runs: every request of this
 * version is idempotent); a request made while none runs waits (up to
 * 5 s) for the next start. Sandboxes do not depend on warren-priv: its
 * death ends no sandbox. */

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "basic/err.h"
#include "priv/priv-proto.h"

struct priv_client;

/* Start warren-priv at path for state_dir (absolute) and the thread that
 * supervises it; the first HELLO is answered before this returns. */
int priv_client_new(const char *path, const char *state_dir, struct priv_client **ret,
                    struct wr_err *e);

/* Phase 2 (docs/privsep.md): the same, and every warren-priv it starts
 * gets --init init_path (the warren-init it runs as each sandbox's init;
 * NULL: none, the lifecycle requests are then refused). */
int priv_client_new_init(const char *path, const char *state_dir, const char *init_path,
                         struct priv_client **ret, struct wr_err *e);

/* Phase 5 (warrend --user): the same as priv_client_new_init, but no
 * supervisor thread yet, so that the thread is born after the drop (in
 * warrend's own mount namespace, with the emptied bounding set: unshare
 * and the bounding set are per thread). Nothing but the start's HELLO may
 * be asked until priv_client_supervise. */
int priv_client_new_held(const char *path, const char *state_dir, const char *init_path,
                         struct priv_client **ret, struct wr_err *e);

/* Start the supervisor thread of a client from priv_client_new_held (0
 * when it runs already). 0 or -errno with e. */
int priv_client_supervise(struct priv_client *c, struct wr_err *e);

/* Stop the supervisor, close the socket (warren-priv exits), reap it
 * (SIGKILL after 2 s) and free c. NULL ok. */
void priv_client_free(struct priv_client *c);

/* SANDBOX_CLEANUP for sandbox id whose dir (absolute, below the state
 * dir) is dir: as rt_sandbox_cleanup(id, dir, cgroup_mode). 0 or -errno
 * with e. */
int priv_sandbox_cleanup(struct priv_client *c, const char *id, const char *dir, int cgroup_mode,
                         struct wr_err *e);

/* LINK_DELETE: as rt_net_link_delete(name): 1 deleted, 0 none, -errno. */
int priv_link_delete(struct priv_client *c, const char *name, struct wr_err *e);

/* SANDBOX_SIGNAL / SANDBOX_FREEZE of a running sandbox named by t (id,
 * init's pid and start time, cgroup mode): as rt_sandbox_kill(sig) and
 * rt_sandbox_freeze(on) on a handle of it. -ESRCH when t is not (any
 * more) the sandbox's init. 0 or -errno with e. */
int priv_sandbox_signal(struct priv_client *c, const struct priv_target *t, int sig,
                        struct wr_err *e);
int priv_sandbox_freeze(struct priv_client *c, const struct priv_target *t, bool on,
                        struct wr_err *e);

/* ---- phase 2: the sandbox lifecycle (docs/privsep.md) ---- */

/* What warren-priv answers for a sandbox it holds: init's pid and start
 * time, init's pidfd and a connected ctl socket (both the caller's). */
struct priv_sandbox {
        pid_t pid;
        uint64_t start_time;
        int pidfd;
        int ctl_fd;
};

/* SANDBOX_CREATE (prestart false) or SANDBOX_PRESTART of cfg (struct
 * rt_sandbox_config; dir below the state dir, layers below its layers/,
 * binds opened here and passed as fds, the rest in a sealed memfd): as
 * rt_sandbox_create / rt_sandbox_prestart, warren-priv keeping the
 * handle. 0 with *ret, or -errno with e (nothing is left of it). */
struct rt_sandbox_config;
int priv_sandbox_create(struct priv_client *c, const struct rt_sandbox_config *cfg, bool prestart,
                        struct priv_sandbox *ret, struct wr_err *e);

/* SANDBOX_START of the prestarted sandbox cfg->id: as rt_sandbox_start
 * (-ESTALE: warren-priv has no such prestart any more, or it broke). */
int priv_sandbox_start(struct priv_client *c, const struct rt_sandbox_config *cfg,
                       struct wr_err *e);

/* priv_sandbox_start in two halves: _begin sends it (0, *ret the
 * request in flight), _end waits for its answer and frees *ret (the
 * caller must call it once after a successful _begin). The caller works
 * meanwhile (records the sandbox while its root is mounted). */
struct priv_start;
int priv_sandbox_start_begin(struct priv_client *c, const struct rt_sandbox_config *cfg,
                             struct priv_start **ret, struct wr_err *e);
int priv_sandbox_start_end(struct priv_client *c, struct priv_start *st, struct wr_err *e);

/* SANDBOX_DESTROY: kill, reap and remove sandbox t->id (t->pid 0: not
 * known); peer: its veth's host end to delete with it (NULL: leave it). */
int priv_sandbox_destroy(struct priv_client *c, const struct priv_target *t, const char *peer,
                         struct wr_err *e);

/* SANDBOX_ATTACH (ctl false) or CTL_CONNECT (ctl true) of the running
 * sandbox t: *ret as for a create. */
int priv_sandbox_attach(struct priv_client *c, const struct priv_target *t, bool ctl,
                        struct priv_sandbox *ret, struct wr_err *e);

/* fn(userdata) from the supervisor thread each time a warren-priv was
 * started again after one died (not at the first start), once it
 * answered its HELLO: the owner then names its running sandboxes to it
 * (SANDBOX_ATTACH). fn must not block nor make requests (post work to a
 * thread of its own). fn NULL: none. */
void priv_client_on_restart(struct priv_client *c, void (*fn)(void *userdata), void *userdata);

/* Phase 5: when warren-priv dies, call fn(userdata) once (on the
 * supervisor thread, nothing locked) instead of starting another: a
 * warrend that dropped to its user cannot start a root process. If fn
 * returns, the supervisor restarts as before. */
void priv_client_on_lost(struct priv_client *c, void (*fn)(void *userdata), void *userdata);
/* Phase 3, the network (priv-proto.h NFT_*, NET_CONNECT): as the nft.h
 * functions of the same names (nftab_*) with warren-priv doing them:
 * 0 or -errno with e; priv_nft_tables returns how many names (warren's
 * tables only) in a NULL-terminated malloc'd vector the caller frees. */
int priv_nft_table_apply(struct priv_client *c, const char *table, uint32_t base, uint8_t prefix,
                         uint16_t proxy_port, uint16_t dns_port, struct wr_err *e);
int priv_nft_class_set(struct priv_client *c, const char *table, uint32_t addr, unsigned from,
                       unsigned to, struct wr_err *e);
int priv_nft_tables(struct priv_client *c, char ***ret, struct wr_err *e);
int priv_nft_table_remove(struct priv_client *c, const char *table, struct wr_err *e);

/* NET_CONNECT: a TCP socket (non-blocking, O_CLOEXEC, TCP_NODELAY) made
 * in the network namespace of the sandbox t names and connected to addr
 * (host byte order):port from there, into *ret_fd (the caller's). Returns
 * 1 when connected, 0 when the connect is in progress (wait for POLLOUT,
 * then read SO_ERROR), or -errno: -ESRCH when t is not that sandbox's
 * init, the connect's own error (e.g. -ECONNREFUSED) when it failed at
 * once. */
int priv_net_connect(struct priv_client *c, const struct priv_target *t, uint32_t addr,
                     uint16_t port, int *ret_fd, struct wr_err *e);

/* ---- phase 3: the helpers (priv-proto.h HELPER_START, UNPACK_START) ----
 * warren-priv starts the helper and is its parent; the caller gets its pid,
 * start time and pidfd (the caller's: watch it for the exit, signal it;
 * there is nothing to reap). The fds are sent, not closed. 0 or -errno with
 * e (nothing started). */
struct priv_helper {
        pid_t pid;
        uint64_t start_time;
        int pidfd;
};
int priv_helper_start(struct priv_client *c, const struct priv_helper_start *h, const int *fds,
                      size_t n_fds, struct priv_helper *ret, struct wr_err *e);

/* UNPACK_START: warren-unpack into dir (absolute, <state>/layers/tmp/<name>)
 * with tar_fd as its stdin and report_fd as its fd 4. */
int priv_unpack_start(struct priv_client *c, const char *dir, int tar_fd, int report_fd,
                      struct priv_helper *ret, struct wr_err *e);

/* A warren-signer of role (PRIV_SIGNER_*) keeping the key in key_fd (closed
 * here whatever happens), as signer/spawn.h's signer_start: *ret_sock is
 * warrend's end of its new SOCK_SEQPACKET pair, *ret_pidfd its pidfd. */
int priv_signer_start(struct priv_client *c, uint32_t role, int key_fd, pid_t *ret_pid,
                      int *ret_pidfd, int *ret_sock, struct wr_err *e);

/* HELPER_START FETCH: warren-fetch with sock (warrend keeps the other end
 * of its SOCK_SEQPACKET pair) and the configs' sealed memfds (-1: none),
 * --loopback-only when loopback_only; it is bound with REQ_BIND. The fds
 * are sent, not closed. *ret_pidfd: the caller's. 0 or -errno with e. */
int priv_fetch_start(struct priv_client *c, int sock, int registry_config_fd, int docker_config_fd,
                     bool loopback_only, pid_t *ret_pid, int *ret_pidfd, struct wr_err *e);

/* warren-egress's --upstream-dns syntax (IP, IP:PORT, [IPv6]:PORT; port 53
 * by default) into h's upstream fields. 0 or -EINVAL. */
int priv_upstream_parse(const char *s, struct priv_helper_start *h);

/* HELLO: warren-priv's own counters (a round trip). */
/* Phase 4b, UPPER_PACK: the upper dir of the sandbox t (checked as
 * SANDBOX_SIGNAL's) written as a layer tar to spool_fd (a regular file
 * open for writing; not closed) by warren-upper in the sandbox's user
 * namespace; *ret: the pack's stats (image.h: struct img_pack_stats) and
 * warren-priv's counters. 0 or the failure with e (EPERM: the sandbox has
 * no user namespace). Blocks: call it from a worker. */
int priv_upper_pack(struct priv_client *c, const struct priv_target *t, int spool_fd,
                    struct priv_upper_packed *ret, struct wr_err *e);

/* Phase 4b-2, UPPER_SESSION: a warren-upper for the sandbox t (checked as
 * SANDBOX_SIGNAL's) in its user namespace; *ret_sock (the caller's)
 * speaks the session's messages (priv_upper_call); closing it ends the
 * helper. *ret_pid (may be NULL): the helper's pid. 0 or -errno with e.
 * Blocks: call it from a worker. */
int priv_upper_session(struct priv_client *c, const struct priv_target *t, int *ret_sock,
                       pid_t *ret_pid, struct wr_err *e);

/* One request of the session: op (encoded with priv_upper_op_encode: a
 * field it refuses is -EINVAL) with fd (WALK, PUT; else -1; not closed),
 * its answer decoded into *rep within timeout_ms. OPEN: *ret_fd the
 * file's fd (the caller's; not checked here beyond what the decoder
 * does). 0, the request's own failure (DONE {err}: -err with its msg), or
 * -EPROTO / -ETIMEDOUT / -EIO (the session is broken: close it). */
int priv_upper_call(int sock, const struct priv_upper_op *op, int fd, int timeout_ms,
                    struct priv_upper_reply *rep, int *ret_fd, struct wr_err *e);

int priv_hello(struct priv_client *c, struct priv_hello_reply *ret, struct wr_err *e);

/* What warrend knows without a round trip (metrics): the running
 * warren-priv's pid (0 = none), how many were started, its counters as of
 * its last answer, and the requests that failed because it died. */
struct priv_client_stats {
        pid_t pid;
        uint64_t starts;
        uint64_t served[PRIV_REQ_TYPES];
        uint64_t served_total;
        uint64_t refused;
        uint64_t lost;
};
void priv_client_stats(struct priv_client *c, struct priv_client_stats *ret);

/* ---- phase 3: volumes and spawn-beside (priv-proto.h types 19..22) ---- */

/* VOLUME_MOUNT of the volume dir (absolute, below the state dir's
 * volumes/: <state>/volumes/<env>/<name>): its image attached and mounted
 * at dir/mnt; *ret_fd (the caller's) an O_PATH fd of the mount's root,
 * where data/ and .staging/ exist (.staging/ emptied). 0 or -errno. */
int priv_volume_mount(struct priv_client *c, const char *dir, uint32_t flags, int *ret_fd,
                      struct wr_err *e);

/* VOLUME_UNMOUNT of the same dir: every mount at dir/mnt detached. 1 when
 * there was one, 0 none, or -errno. */
int priv_volume_unmount(struct priv_client *c, const char *dir, struct wr_err *e);

/* SANDBOX_SPAWN_BESIDE: run kind (enum priv_beside_kind) beside the
 * sandbox t as uid:gid with fds[0..4) (cwd: the sandbox's ssh dir;
 * stdin, stdout, stderr: pipes, sockets or /dev/null). *ret_pidfd (the
 * caller's; the process is warren-priv's child, which reaps it: read its
 * status with priv_pidfd_status) and *ret_pid (may be NULL). */
int priv_sandbox_spawn_beside(struct priv_client *c, const struct priv_target *t, uint32_t kind,
                              uid_t uid, gid_t gid, const int fds[4], int *ret_pidfd,
                              pid_t *ret_pid, struct wr_err *e);

/* The wait status (as waitpid's) of the exited process of pidfd, which
 * another process reaps: polled until its exit is recorded (up to ms).
 * -EAGAIN when it is not, -EOPNOTSUPP when the kernel has no
 * PIDFD_INFO_EXIT (Linux < 6.15). */
int priv_pidfd_status(int pidfd, int ms);

/* SSH_DIR_PREPARE: <state>/sandboxes/<id>/ssh made, 0700, owned by the
 * agent's uid of uid_slot (-1: nobody). 0 or -errno. */
int priv_ssh_dir_prepare(struct priv_client *c, const char *id, int32_t uid_slot, struct wr_err *e);

/* ---- phase 5: layer storage (priv-proto.h types 25..26) ---- */

/* LAYER_COMMIT: <state>/layers/tmp/<tmp_name> moved to
 * <state>/layers/sha256/<hex> (RENAME_NOREPLACE) by warren-priv.
 * PRIV_LAYER_MOVED, PRIV_LAYER_EXISTED (the tmp tree stays: remove it),
 * PRIV_LAYER_ROOT_SSH (refused: the tree holds /root/.ssh; nothing
 * moved), or -errno with e (-EINVAL: a name the decoder would refuse). */
int priv_layer_commit(struct priv_client *c, const char *tmp_name, const char *hex,
                      struct wr_err *e);

/* LAYER_REMOVE: <state>/layers/tmp/<name> (dir PRIV_LAYER_DIR_TMP) or
 * <state>/layers/sha256/<name> (PRIV_LAYER_DIR_SHA256) removed by
 * warren-priv. 1 removed, 0 there was none, or -errno with e. */
int priv_layer_remove(struct priv_client *c, uint32_t dir, const char *name, struct wr_err *e);

/* ---- phase 5: volume files (priv-proto.h types 27..29) ---- */

/* One VOLFILE request on the mounted volume dir (<state>/volumes/<env>/
 * <name>): op (enum priv_volfile_op) on path (and LIST's after, limit;
 * PUT's and COMMIT's mode; COMMIT's and ABORT's tmp; NULL where none
 * belongs), the paths sent in a sealed memfd. *rep: the answer
 * (VOLFILE_OPENED, _STATED, _LISTED or RESULT as priv-proto.h says);
 * *ret_fd (OPENED's file, LISTED's memfd: the caller's). 0 (REMOVE,
 * ABORT: RESULT.value), or -errno with e, whose status is the one the
 * file API chose in warren-priv (NOT_FOUND, FAILED_PRECONDITION, ...). */
struct priv_reply;
int priv_volfile(struct priv_client *c, const char *dir, uint32_t op, const char *path,
                 const char *after, mode_t mode, uint32_t limit, const char *tmp,
                 struct priv_reply *rep, int *ret_fd, struct wr_err *e);
