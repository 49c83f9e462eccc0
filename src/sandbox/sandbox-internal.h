/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* Internals shared by the sandbox module's files: the live sandbox
 * (struct sbx), the manager, and the calls between spec.c, create.c,
 * pool.c, recover.c, lifecycle.c, manager.c and exec.c. */

#include <stdbool.h>
#include <stdint.h>

#include <uv.h>

#include "sandbox/journal.h"
#include "sandbox/sandbox.h"
#include "runtime/runtime.h"
#include "sandbox/network.h"
#include "sandbox/uids.h"
#include "store/store.h"

struct rt_sandbox;
struct rt_ctl_msg;

enum sbx_state {
        SBX_RUNNING = 0,
        SBX_TERMINATING = 1,
        SBX_DEAD = 2,
};

struct sbx_waiter {
        sbx_terminate_done_fn done;
        void *userdata;
        struct sbx_waiter *next;
};

/* One live sandbox. Made by sbx_new (create, recovery), put on the
 * manager's list by sbx_arm, freed once dead and every handle closed
 * (before sbx_arm: sbx_free). */
/* PATH of every process unless the image's Env sets one */
#define DEFAULT_PATH "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

struct sbx {
        struct sbx_manager *m;
        struct sbx *next;
        char id[32];
        char *name;
        char *image_id;
        struct rt_sandbox *rt;
        enum sbx_state state;
        int handles; /* uv handles not yet closed */

        /* Control connection to warren-init. */
        int ctl_fd;
        uv_poll_t ctl_poll;
        int pidfd;          /* our own pidfd of init (polled, so non-blocking) */
        uv_poll_t pid_poll; /* readable once init exited */
        uv_timer_t timer;   /* lifetime, then termination grace / settle checks */
        int64_t expires_ns;
        uint64_t term_deadline; /* uv_now() ms when SIGKILL is due */
        const char *term_reason;
        enum store_sandbox_status final_status; /* TERMINATED or FAILED; 0 = TERMINATED */
        struct sbx_waiter *waiters;
        /* teardown (rt_sandbox_destroy) on a worker thread: cgroup rmdir
         * can wait ~10 ms on cgroup_mutex (a cgroup v1 migration elsewhere
         * holds it through an RCU grace period), the loop must not */
        uv_work_t teardown;
        int teardown_r;
        struct wr_err teardown_err;
        bool end_recorded; /* the row says TERMINATED/FAILED (record_end) */
        /* sbx_mono_ns() when the terminate was asked, init was killed,
         * reaped (the debug line of record_end); 0 = not asked */
        uint64_t term_tp[3];

        /* Process defaults. */
        char **env; /* NULL-terminated "K=V" (may hold secret values: wiped) */
        char *workdir;
        uint32_t uid, gid;

        /* its /30 of the default network (network.h); -1: none */
        int32_t net_slot;
        /* its user namespace range (uids.h); -1: none (--userns=off) */
        int32_t uid_slot;
        /* registered with warren-egress (POLICY_DEL at the end); in the
         * table's open4 set (no policy); the self-check passed */
        bool egress_registered, egress_open, egress_enforced;
        /* every process frozen (PauseSandbox; the cgroup freezer is the
         * truth: recovery reads it back) */
        bool paused;
        /* its ssh-agent beside it (managed SSH; ssh.c), -EBADF: none */
        int ssh_pidfd;

        struct sbx_exec *execs;
        uint64_t next_exec_id;
        /* the change journal (journal.h): opened on first use; every exec
         * journaled (CreateSandbox journal_execs) */
        struct sbx_journal *journal;
        bool journal_all;
        /* a build step's sandbox; the disk guard stopped it (diskguard.c) */
        bool build_step, disk_stopped;
        /* its warren-init predates exec holds (recovery asked): execs are
         * spawned without, and do not survive a restart */
        bool init_no_holds;
        /* re-attached while paused: its execs are picked up at the resume
         * (a frozen init cannot answer) */
        bool exec_recover_pending;
        /* a K8S sandbox's exec side (sbx_remote_attach): no runtime, no
         * pidfd, no timer; ctl_fd is warrend's end of the relay bridge
         * (src/k8s/bridge.c); its exec spools live in remote_dir. Found
         * only by exec (sbx_find_exec), never by host-only features */
        bool remote;
        char *remote_dir;
        /* spawn requests in flight, for the exec start latency metric */
        struct {
                uint64_t id, sent_ns;
        } spawn_times[8];
};

#define SBX_POOL_JOBS 2

struct sbx_pool_entry {
        char id[32];
        struct rt_sandbox *rt; /* rt_sandbox_prestart()ed */
        int32_t net_slot;      /* its /30 (veth made at the prestart); -1: none */
        struct rt_net net;
        int32_t uid_slot; /* its user namespace range; -1: none */
};

struct sbx_manager {
        struct bld *builds; /* build.c: running builds (identical ones wait on these) */
        uv_loop_t *loop;
        struct store *store;
        struct img_store *images;
        char *state_dir;
        char *init_path;
        char *default_image;
        uint64_t default_disk; /* sbx_manager_config.default_disk */
        char *disk_templates;  /* state_dir/disk-templates (rt_sandbox_config) */
        struct sbx *list;
        bool freeing;
        bool terminate_on_exit; /* sbx_manager_free stops sandboxes */
        struct sbx_metrics metrics;
        /* warm pool (--warm-pool N) */
        struct sbx_pool_entry *pool; /* pool_target slots, pool_n filled */
        size_t pool_n, pool_target;
        uv_timer_t pool_timer; /* refills in the background */
        bool pool_timer_open;
        /* prestarts run on worker threads, up to SBX_POOL_JOBS at once
         * (on cgroup v1 each waits ~10-20 ms for an RCU grace period;
         * those of concurrent ones overlap) */
        struct sbx_pool_job {
                uv_work_t work;
                struct sbx_manager *m;
                bool busy;
                struct sbx_pool_entry entry;
                struct wr_err err;
                char **layers;           /* the worker's copy of pool_layers */
                const char *resolv_conf; /* the network's, or resolv_buf */
                char resolv_buf[256];
                bool layers_failed; /* its try with them failed */
                uint64_t work_ns;   /* how long the prestart took (debug log) */
        } pool_jobs[SBX_POOL_JOBS];
        unsigned pool_busy; /* jobs running */
        /* the layers the pool builds roots for ahead (those of the last
         * image a sandbox was created from; NULL-terminated, owned) */
        char **pool_layers;
        enum rt_cgroup_mode cgroup_mode;
        struct priv_client *priv; /* sbx_manager_config.priv */
        /* --privsep, phase 2: a new warren-priv (the last one died) is
         * told of every running sandbox (SANDBOX_ATTACH, on a worker) */
        uv_async_t priv_restarted;
        bool priv_restarted_open;
        unsigned priv_jobs; /* re-attach jobs running */
        /* the default network; NULL: sandboxes get only a loopback */
        struct sbx_network *net;
        /* user namespace ranges; NULL: sandboxes run without (--userns=off) */
        struct sbx_uids *uids;
        /* host-wide: per slot an flock'ed fd of SBX_UIDS_LOCK_DIR/<slot>
         * while it is ours (-1: not held), the dir (-1: no locking) */
        int *uid_locks;
        int uid_lock_dir;
        unsigned net_jobs; /* sbx_net_retire deletions in flight */
        /* exec.c's state: sessions, log size, chunk pool */
        struct sbx_exec_state *exec;
        /* cleanup.c: host cleanup retried after a failed teardown */
        struct sbx_cleanup *cleanups;
        struct sbx_cleanup *cleanup_current; /* on the worker */
        uv_timer_t cleanup_timer;
        bool cleanup_timer_open;
        /* diskguard.c: build steps stopped below build_min_free */
        uint64_t build_min_free;
        uv_timer_t disk_timer;
        bool disk_timer_open;
        uv_work_t cleanup_work;
        int cleanup_r;
        struct wr_err cleanup_err;
        /* sandbox identity (sbx_manager_set_identity); NULL: refused */
        sbx_identity_issue_fn identity_issue;
        void *identity_userdata;
        char *identity_api_dir;
};

/* --- diskguard.c --- */
/* A build step's sandbox runs: watch the free space of the state dir's
 * file system (every SBX_DISK_TICK_MS) while any does; below
 * build_min_free, every running build step's sandbox is terminated and
 * marked disk_stopped. */
void sbx_diskguard_watch(struct sbx_manager *m);
/* Was sandbox id (live or ending) stopped by the guard? */
bool sbx_disk_stopped(struct sbx_manager *m, const char *id);
/* Stop the timer and wait for its close (sbx_manager_free). */
void sbx_diskguard_free(struct sbx_manager *m);

/* --- manager.c --- */
/* A user namespace range for a new sandbox or pool entry: its slot in
 * *ret, -1 with --userns=off; RESOURCE_EXHAUSTED when every range is
 * taken. Loop thread. */
int sbx_uid_slot_alloc(struct sbx_manager *m, int32_t *ret, struct wr_err *e);
/* Free it again (its sandbox is torn down). < 0: nothing. Loop thread. */
void sbx_uid_slot_release(struct sbx_manager *m, int32_t slot);
/* Recovery: the range starting at base is a sandbox's of ours (still
 * running, or its cleanup pending): taken again, here and host-wide.
 * Returns its slot, or -1 (none, not one of ours: logged). */
int32_t sbx_uid_slot_adopt(struct sbx_manager *m, uint32_t base, const char *id);
/* Set cfg's range for slot (-1: none). */
void sbx_uid_slot_config(int32_t slot, struct rt_sandbox_config *cfg);
/* The running sandbox called key (id or name), or an error: -ENOENT
 * (unknown: NOT_FOUND), -EBUSY (not running, or terminating:
 * FAILED_PRECONDITION). (exec.c) */
int sbx_running(struct sbx_manager *m, const char *key, struct sbx **ret, struct wr_err *e);
/* Like sbx_find_live, remote (K8S) sandboxes included: for exec only. */
struct sbx *sbx_find_exec(struct sbx_manager *m, const char *key);
/* The sandbox's dir (the runtime's, or a remote one's); NULL: none. */
const char *sbx_dir(const struct sbx *sb);
/* The live (not DEAD) sandbox whose id or name is key, or NULL. */
struct sbx *sbx_find_live(struct sbx_manager *m, const char *key);

/* The host side of a sandbox's teardown, by warren-priv when the manager
 * has one (--privsep), else here: rt_sandbox_cleanup(id, dir) and
 * rt_net_link_delete(name), with their returns. Any thread. */
int sbx_host_cleanup(struct sbx_manager *m, const char *id, const char *dir, struct wr_err *e);
int sbx_link_delete(struct sbx_manager *m, const char *name, struct wr_err *e);
/* rt_sandbox_destroy(rt), its host side by warren-priv with --privsep
 * (rt_sandbox_release, SANDBOX_CLEANUP, LINK_DELETE when the handle still
 * owns its veth). Any thread; the same returns. */
int sbx_rt_destroy(struct sbx_manager *m, struct rt_sandbox *rt, struct wr_err *e);
/* rt_sandbox_kill(rt, sig) and rt_sandbox_freeze(rt, on), by warren-priv
 * with --privsep (SANDBOX_SIGNAL, SANDBOX_FREEZE: it re-attaches the
 * sandbox by id, init's pid and start time), with their returns. */
int sbx_rt_kill(struct sbx_manager *m, struct rt_sandbox *rt, int sig);
/* Phase 2 of --privsep (docs/privsep.md): the lifecycle through
 * warren-priv, which holds the sandboxes (init's parent); rt is then a
 * handle of rt_sandbox_adopt (pid, pidfd, start time, cgroups to read).
 * Without --privsep each is the runtime call it names, in process.
 * create/prestart: rt_sandbox_create/prestart; start_send/start_wait:
 * with --privsep one SANDBOX_START in flight between them (*ticket: the
 * caller must start_wait once after a successful start_send, also on its
 * failure paths, before a destroy); attach: rt_sandbox_attach (recovery); ctl_connect: a ctl
 * connection (the one warren-priv handed over with the handle, else
 * CTL_CONNECT); kill_wait: rt_sandbox_kill_wait (SIGKILL by warren-priv,
 * the exit seen on the pidfd). */
int sbx_rt_create(struct sbx_manager *m, const struct rt_sandbox_config *cfg, bool prestart,
                  struct rt_sandbox **ret, struct wr_err *e);
struct priv_start;
int sbx_rt_start_send(struct sbx_manager *m, struct rt_sandbox *rt,
                      const struct rt_sandbox_config *cfg, struct priv_start **ticket,
                      struct wr_err *e);
int sbx_rt_start_wait(struct sbx_manager *m, struct rt_sandbox *rt, struct priv_start **ticket,
                      struct wr_err *e);
int sbx_rt_attach(struct sbx_manager *m, const char *id, const char *dir, pid_t pid,
                  uint64_t start_time, struct rt_sandbox **ret, struct wr_err *e);
int sbx_rt_ctl_connect(struct sbx_manager *m, struct rt_sandbox *rt, int *ret_fd, struct wr_err *e);
int sbx_rt_kill_wait(struct sbx_manager *m, struct rt_sandbox *rt, struct wr_err *e);
int sbx_rt_freeze(struct sbx_manager *m, struct rt_sandbox *rt, bool on, struct wr_err *e);

/* Phase 4b (--privsep): the upper dir of sb is read by warren-priv's
 * warren-upper in the sandbox's user namespace, not by warrend. The
 * request's target (filled) for sbx_upper_pack, or FAILED_PRECONDITION
 * naming --userns=off for a sandbox without a user namespace (what: the
 * operation, for the message). Without --privsep: -ENOENT, nothing set
 * (read it in process). */
struct sbx_upper_ref {
        char id[72]; /* = PRIV_ID_MAX */
        int32_t pid;
        uint32_t cgroup_mode;
        uint64_t start_time;
};
int sbx_upper_ref(struct sbx_manager *m, struct sbx *sb, const char *what,
                  struct sbx_upper_ref *ret, struct wr_err *e);
/* UPPER_PACK: the tree as a layer tar into spool_fd (owners as the sandbox
 * sees them, as img_pack_dir_ids with its range). From a worker. */
struct img_pack_stats;
int sbx_upper_pack(struct sbx_manager *m, const struct sbx_upper_ref *ref, int spool_fd,
                   struct img_pack_stats *stats, struct wr_err *e);
/* CLOCK_MONOTONIC in ns. */
uint64_t sbx_mono_ns(void);
/* sb's overlay upper dir (O_RDONLY|O_DIRECTORY) for reading its writable
 * layer from the host (snapshots, the journal), on the host's file system
 * or on the sandbox's disk image; errors prefixed with `what`.
 * (snapshot.c) */
int sbx_upper_open(struct sbx *sb, const char *what, struct wr_err *e);
/* An O_PATH fd of sb's root as its init sees it (its mount namespace:
 * volumes and /tmp included); the pidfd check after the open proves the
 * pid was init's all along (not reused). -ESRCH when init is gone. */
int sbx_root_fd(struct sbx *sb);
/* <state>/sandboxes/<id> into buf. -ENAMETOOLONG. */
int sbx_dir_path(const struct sbx_manager *m, const char *id, char *buf, size_t size);

/* --- lifecycle.c --- */
/* A new sandbox struct for id (no fds, no handles yet; the fields a
 * caller sets after it are name, image_id, rt, ctl_fd, process defaults).
 * -ENOMEM. Free with sbx_free until sbx_arm succeeded. */
int sbx_new(struct sbx_manager *m, const char *id, int64_t expires_ns, struct sbx **ret);
/* Free a sandbox whose uv handles are closed or were never armed: its fds,
 * runtime handle (not destroyed) and strings. NULL ok. */
void sbx_free(struct sbx *sb);
static inline void sbx_freep(struct sbx **sb) {
        sbx_free(*sb);
}
/* sb->rt and sb->ctl_fd are set: take a pidfd of our own, start polling
 * init's exit and the control connection, arm the lifetime, link sb into
 * the manager's list. Consumes sb either way: on success the manager owns
 * it; on failure the sandbox is destroyed (rt_sandbox_destroy) and sb is
 * freed (at once, or once the handles opened are closed). */
int sbx_arm(struct sbx *sb, struct wr_err *e);
/* Kill what is left, free the runtime's resources (on a worker thread),
 * record the end (sb->final_status, sb->term_reason), call the waiters,
 * close handles. Idempotent. */
void sbx_finalize(struct sbx *sb);
/* Let go of sb without stopping it (daemon shutdown): its exec streams
 * end, handles close, the sandbox keeps running. */
void sbx_detach(struct sbx *sb);
/* Delete the host end of slot's veth on a worker thread (with open4, its
 * address leaves the table's open4 set first), then free the
 * slot (the sandbox is gone: its runtime handle was disowned of it). Loop
 * thread; slot < 0 or no network: nothing. */
void sbx_net_retire(struct sbx_manager *m, int32_t slot, bool open4);
/* Remove the entrypoint's output file of sandbox id. */
void sbx_entrypoint_log_remove(struct sbx_manager *m, const char *id);
/* Send a request to init, waiting briefly when its socket queue is full. */
int sbx_ctl_send_spawn(struct sbx *sb, const void *req, const int stdio[3]);
int sbx_ctl_send_signal(struct sbx *sb, uint64_t target, int signo, bool group);
int sbx_ctl_send_resize(struct sbx *sb, uint64_t id, unsigned cols, unsigned rows);
/* Process defaults as "uid\0gid\0workdir\0K=V\0K=V\0..." for the store
 * (sealed there: they may hold secrets); *ret is wiped and freed by the
 * caller (erase_and_free_n). And back, into sb. -ENOMEM, -EBADMSG. */
int sbx_process_encode(const struct sbx *sb, char **ret, size_t *len);
int sbx_process_decode(struct sbx *sb, const char *buf, size_t len);

/* --- pool.c --- */
/* Take a prestarted entry (its id into id, its handle returned), or NULL
 * when the pool is empty; schedules the refill. */
struct rt_sandbox *sbx_pool_take(struct sbx_manager *m, char *id, size_t size,
                                 int32_t *ret_net_slot, int32_t *ret_uid_slot);
/* The pool builds its next roots for these layers (a copy is kept). */
void sbx_pool_expect(struct sbx_manager *m, const char *const *layers, size_t n);
/* Start the pool: build roots ahead for the default image when it is
 * stored. -ENOMEM. */
int sbx_pool_start(struct sbx_manager *m);
/* Tear down every idle entry and stop refilling. */
void sbx_pool_stop(struct sbx_manager *m);
/* True while the pool has work in flight (sbx_manager_free waits). */
bool sbx_pool_busy(const struct sbx_manager *m);

/* --- recover.c --- */
/* Re-attach a previous warrend's sandboxes, clean up the rest. */
void sbx_recover(struct sbx_manager *m);

/* --- create.c --- */
/* Register sb (its slot's address) with warren-egress in mode (0 = OPEN)
 * with the policy's wire form and the rules; OPEN without rules: into the
 * table's open4 set; OPEN with rules (credentials without a policy): into
 * pass4; a policy: in neither. Used by create and recovery. -errno with
 * e. */
int sbx_egress_attach(struct sbx *sb, int mode, const uint8_t *wire, size_t len,
                      const uint8_t *rules, size_t rules_len, struct wr_err *e);
/* ca-bundle.c: the CA bundle of an intercepted sandbox. The image's own
 * bundle (the first of sbx_ca_bundle_paths it holds as a file) + the
 * egress CA's certificate (+ the previous one) written to
 * <state_dir>/egress-bundles/<image>.crt (its path in path); present[i]
 * says which of the paths the image has (the create mounts the bundle
 * read-only over each, or over the first when it has none). */
#define SBX_CA_BUNDLE_PATHS 3
extern const char *const sbx_ca_bundle_paths[SBX_CA_BUNDLE_PATHS];
struct img_info;
int sbx_ca_bundle(const char *state_dir, const struct img_info *img, char *path, size_t size,
                  bool present[SBX_CA_BUNDLE_PATHS], struct wr_err *e);

/* <dir>/egress-rules.sealed: a sandbox's rules (net_rules wire form:
 * per-host rules, credentials with their secret values, detectors,
 * managed SSH destinations), sealed with the secrets key (store_seal,
 * bound to the sandbox's id), for recovery. read: opens it (the caller
 * wipes and frees *ret_wire), or an older warrend's <dir>/egress-rules
 * (the secret-free part in the clear); 0 with *ret_wire NULL when there
 * is none. */
int sbx_egress_rules_write(struct sbx *sb, const uint8_t *wire, size_t len, struct wr_err *e);
int sbx_egress_rules_read(struct sbx_manager *m, const char *id, const char *dir,
                          uint8_t **ret_wire, size_t *ret_len, struct wr_err *e);

/* Undo sbx_egress_attach (POLICY_DEL, out of open4). Idempotent. */
void sbx_egress_detach(struct sbx *sb);
/* The policy file of a sandbox dir (<dir>/egress-policy: u32 mode, then
 * the wire form), written at create and read by recovery. */
int sbx_egress_policy_write(const char *dir, int mode, const uint8_t *wire, size_t len,
                            struct wr_err *e);
int sbx_egress_policy_read(const char *dir, int *ret_mode, uint8_t **ret_wire, size_t *ret_len);
/* A fresh random id "sb-" + 16 hex digits. -errno of getrandom. */
int sbx_make_id(char *buf, size_t size);

/* exec.c: messages from init for exec sessions, and the end of a sandbox.
 * Loop thread. */
#include "sandbox/exec.h"

/* Init confirmed (err = 0, pid) or failed (err, a positive errno) the
 * spawn of exec id of sb; pty_fd is the PTY master of a PTY exec (taken:
 * closed when not used). An id no session of sb has is ignored. */
void sbx_exec_on_spawned(struct sbx *sb, uint64_t id, int pid, int err, int pty_fd);
/* Exec id of sb exited with status (as from waitpid); it finishes once its
 * output is read to the end. Unknown ids are ignored. */
void sbx_exec_on_exited(struct sbx *sb, uint64_t id, int status);
/* Force every exec of sb to end now (the sandbox is gone), with reason
 * when its process had not ended yet (SBX_EXIT_UNSPECIFIED: derived from
 * the state of the sandbox). Output already in the pipes is kept as far as
 * the log takes it. */
void sbx_exec_abort_all(struct sbx *sb, enum sbx_exit_reason reason);
/* warrend stops and leaves sb running: sessions that init holds end their
 * client's stream (on_detached) and are let go without an exit, their
 * spool kept for the next warrend; the others end as in abort_all. */
void sbx_exec_leave_all(struct sbx *sb);
/* sb was re-attached after a restart (sb->ctl_fd connected; before the
 * loop runs, or when a sandbox paused at recovery is resumed): pick its
 * execs up again from init's holds and the spools in
 * <sandbox dir>/execs (docs/exec.md "Across restarts"). Sets
 * sb->init_no_holds when init predates holds. Failures are logged. */
void sbx_exec_recover(struct sbx *sb);

/* --- managed SSH (ssh.c; ssh.h) --- */

/* Make <dir> (0700, may exist) and <dir>/ssh owned by the agent's user
 * (mode 0700): the agent's directory, bind-mounted read-only into the
 * sandbox at SBX_SSH_DIR. */
int sbx_ssh_dir_prepare(const char *dir, int32_t uid_slot, struct wr_err *e);
/* sbx_ssh_dir_prepare for sb (dir: its dir), by warren-priv with
 * --privsep (SSH_DIR_PREPARE). */
int sbx_ssh_dir_prepare_sb(struct sbx *sb, const char *dir, struct wr_err *e);
/* The sandbox behind rt as warren-priv names it (id, init's pid and
 * start time, cgroup mode). -ESRCH once init is reaped. */
struct priv_target;
int sbx_priv_target(const struct sbx_manager *m, const struct rt_sandbox *rt,
                    struct priv_target *t);

struct sbx_ssh_dest;
/* Start sb's ssh-agent beside it and load the n keys (sb->rt running);
 * sb->ssh_pidfd owns the agent (sbx_ssh_reap). n = 0: nothing. Errors
 * name the alias (FAILED_PRECONDITION for an unusable key). */
int sbx_ssh_start(struct sbx *sb, const struct sbx_ssh_dest *d, size_t n, struct wr_err *e);

/* SIGKILL and reap sb's agent (after the sandbox was destroyed). */
void sbx_ssh_reap(struct sbx *sb);

/* --- cleanup.c --- */

/* A teardown of sandbox id failed (why): record the end with status and
 * "reason (host cleanup pending: ...)", count it, and retry removing its
 * cgroups and dir in the background until done (then the row's reason is
 * reason again). dir NULL: left to the next start's recovery. */
void sbx_cleanup_later(struct sbx_manager *m, const char *id, const char *dir, int status,
                       const char *reason, const struct wr_err *why);
/* The same, and its user namespace range stays taken until done. */
void sbx_cleanup_later_uids(struct sbx_manager *m, const char *id, const char *dir, int status,
                            const char *reason, const struct wr_err *why, int32_t uid_slot);
/* Cleanups still pending. */
size_t sbx_cleanup_pending(const struct sbx_manager *m);
/* At manager free: wait for a running attempt, drop the rest. */
void sbx_cleanup_stop(struct sbx_manager *m);
