/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* sandbox: the daemon's live sandboxes, driven from the event loop.
 *
 * This module owns every running sandbox of the daemon: it records the
 * sandbox in SQLite before and after each step (store/), starts it
 * (runtime/), keeps one control connection to its warren-init, runs exec
 * sessions (pipes or a PTY, output streamed with back-pressure), enforces
 * lifetimes, and terminates sandboxes (SIGTERM, grace period, SIGKILL of
 * the whole sandbox, everything freed).
 *
 * Its input is plain C: a struct sbx_spec (what the sandbox should be,
 * validated by sbx_spec_check) and an image already resolved to its layers
 * and config (image/: img_resolve). Nothing here knows protobuf; the API
 * layer (api/spec.c, api/sandboxes.c, api/exec.c) turns requests into
 * specs and results into messages, and any other caller (an image builder,
 * functions, another compute class) creates sandboxes the same way.
 *
 * Files: spec.c (the spec, env vectors, pure checks), create.c, pool.c
 * (warm pool), recover.c (re-attach after a restart), lifecycle.c (control
 * connection, lifetimes, terminate, teardown), manager.c (the manager,
 * lookups, metrics), exec*.c (exec sessions), user.c (users by name).
 * Everything runs on the loop thread. */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <uv.h>

#include "basic/err.h"
#include "runtime/runtime.h"

struct store;
struct priv_client;
struct store_sandbox;
struct img_store;
struct img_info;
struct sbx_manager;
struct sbx_exec;

#define SBX_BUILD_MIN_FREE_DEFAULT (2ull << 30)
#define SBX_DEFAULT_DISK (10ull << 30) /* warrend --default-disk */

struct sbx_manager_config {
        uv_loop_t *loop;
        struct store *store;
        /* Where the warm pool looks up the default image's layers, to
         * build roots ahead for it (NULL: no roots ahead). */
        struct img_store *images;
        const char *state_dir;
        /* Host path of the static warren-init binary. */
        const char *init_path;
        /* Image used when a spec names none. */
        const char *default_image;
        /* sbx_manager_free stops every sandbox (the old behaviour, for
         * tests) instead of leaving them running for the next warrend. */
        bool terminate_on_exit;
        /* Sandboxes prestarted ahead (rt_sandbox_prestart), refilled in the
         * background; 0 = no pool. */
        unsigned warm_pool;
        /* The writable layer of a sandbox whose spec gives no disk size
         * (rt_limits.disk_bytes: an ext4 image of this size); 0 =
         * unbounded (the upper dir on the state dir's file system). A
         * spec may ask for more: this is a default, not a cap. */
        uint64_t default_disk;
        /* Sandboxes run without user namespaces (--userns=off): their
         * root is the host's root. Default: each in its own, on a uid
         * range of its own (uids.h). */
        bool userns_off;
        /* Build steps (build.h) are stopped when the file system holding
         * state_dir has less than this free (their writable layers live
         * there: sparse images, or unbounded dirs); 0 = no guard. */
        uint64_t build_min_free;
        /* The default network (network.h): the sandbox range ("a.b.c.d/p";
         * NULL or "" = the default, 100.96.0.0/16 or the next free /16;
         * "none" = sandboxes get only a loopback, as before) and the
         * resolver sandboxes are told about (NULL = the host's
         * nameservers, "" = none). A range that overlaps the host's
         * routes fails sbx_manager_new. */
        const char *sandbox_cidr;
        const char *upstream_dns;
        /* warren-egress (docs/network.md): its path (NULL = no egress
         * process: no policies, the resolver named as above), the host's
         * ports that must stay out of sandboxes' reach (warrend's own
         * listeners), NULL-terminated host addresses to deny besides
         * those getifaddrs lists. */
        const char *egress_path;
        const uint16_t *deny_ports;
        size_t n_deny_ports;
        /* TLS interception: warren-signer (NULL: none) and the bundle
         * intercepted upstreams are verified against (NULL: the host's;
         * the tests give the fake internet's CA) */
        const char *signer_path;
        const char *egress_upstream_ca;
        /* Privilege separation (--privsep, docs/privsep.md): the host side
         * of every teardown (the cgroups, the dir, the veth's host end)
         * is asked of warren-priv through this client instead of done in
         * this process. NULL: done here. Must outlive the manager. */
        struct priv_client *priv;
};

/* Create the manager and recover a previous warrend's sandboxes: every row
 * the store lists as live whose init still runs (same pid, start time and
 * cgroup as recorded) is re-attached (control connection, process
 * defaults, lifetime re-armed; an expired one is terminated at once);
 * everything else is freed (rt_sandbox_cleanup) and its row marked
 * TERMINATED (FAILED when it was still PENDING) with a reason; leftover
 * sandbox dirs without a live row are removed.
 * Returns 0 or a negative errno with e filled. *ret is the caller's
 * (sbx_manager_free). */
int sbx_manager_new(const struct sbx_manager_config *cfg, struct sbx_manager **ret,
                    struct wr_err *e);

/* End every exec session and free the manager. Sandboxes keep running and
 * stay recorded live for the next warrend, unless terminate_on_exit was
 * set: then each is stopped (SIGKILL; recorded TERMINATED "warrend shut
 * down"). NULL ok. */
void sbx_manager_free(struct sbx_manager *m);

/* Sandbox identity (sbx_spec.identity): issue makes the sandbox's token
 * directory on the host (a directory of its own holding the file "token"
 * with its first identity token), puts its path into dir (size bytes) and
 * keeps it rotated; api_dir is the host directory holding the socket
 * SBX_IDENTITY_API_SOCK that serves the API to sandboxes. A create with
 * identity mounts both read-only (SBX_IDENTITY_DIR, SBX_IDENTITY_API_DIR)
 * and sets WARREN_WEB_IDENTITY_TOKEN_FILE, WARREN_API_SERVER and
 * WARREN_ENVIRONMENT (unless the spec's env sets them). Never set:
 * identity is refused (FAILED_PRECONDITION). issue returns 0 or a
 * negative errno with e filled. */
#define SBX_IDENTITY_DIR "/run/warren/identity"
#define SBX_IDENTITY_TOKEN_FILE SBX_IDENTITY_DIR "/token"
#define SBX_IDENTITY_API_DIR "/run/warren/api"
#define SBX_IDENTITY_API_SOCK "warren.sock"
typedef int (*sbx_identity_issue_fn)(void *userdata, const char *id, const char *environment,
                                     char *dir, size_t size, struct wr_err *e);
/* -ENOMEM or 0. */
int sbx_manager_set_identity(struct sbx_manager *m, sbx_identity_issue_fn issue, void *userdata,
                             const char *api_dir);

/* --- the spec: what a sandbox should be --- */

struct sbx_tag {
        char *key; /* non-empty */
        char *value;
};

/* A sandbox as asked for, in plain C. Every pointer is heap-owned by the
 * spec (sbx_spec_free); NULL/0 means "the default" as noted. Build it
 * with sbx_spec_new and the setters below, or fill it directly, then
 * check it once with sbx_spec_check. */
struct sbx_spec {
        char *image_ref;   /* NULL: the daemon's default image */
        char *environment; /* NULL: the default environment (store.h) */
        char *name;        /* NULL: unnamed */
        char *hostname;    /* NULL: the name, else the id */
        char *workdir;     /* NULL: the image's WorkingDir, else "/" */
        /* The main process; NULL: the image's Entrypoint + Cmd. Empty
         * (argv[0] NULL): none. */
        char **entrypoint;
        /* "K=V" set on top of the image's environment, in order (later
         * wins); values of secrets included, so the vector is wiped when
         * freed. */
        char **env;
        struct rt_limits limits; /* 0 = the runtime's defaults */
        int64_t lifetime_ns;     /* 0: no limit */
        struct sbx_tag *tags;
        size_t n_tags;
        /* Extra mounts (volumes, secret files, sockets ...), applied after
         * the runtime's own (runtime.h: struct rt_mount, checked with
         * rt_mounts_check). The spec owns the array and each entry's
         * target, source and data (data is wiped when freed: a secret file
         * may be one); source_fd is not used in a spec. */
        struct rt_mount *mounts;
        size_t n_mounts;
        /* Managed SSH destinations (ssh.h), keys included (wiped when
         * freed); their /root/.ssh files and SSH_AUTH_SOCK are in mounts
         * and env already. The agent's directory is mounted by the create. */
        struct sbx_ssh_dest *ssh;
        size_t n_ssh;
        /* Loopback only: no veth, no address, no resolver (a plain create,
         * never a warm-pool entry: those have their veth made ahead). */
        bool block_network;
        /* a build step's sandbox: stopped by the disk guard (build.h) */
        bool build_step;
        /* journal every exec (journal.h) */
        bool journal_execs;
        /* a workload identity token file (sbx_manager_set_identity) */
        bool identity;
        /* Egress policy (docs/network.md): 0 = none (the sandbox is
         * registered OPEN with warren-egress: its DNS goes through the
         * resolver, its TCP through NAT); EGRESS_MODE_ENFORCE (2) with
         * the policy's wire form (net_policy_serialize) in net_policy; or
         * EGRESS_MODE_LEARN (3), no bytes. A policy holds no secrets. */
        int net_mode;
        uint8_t *net_policy;
        size_t net_policy_len;
        /* Per-host rules and credentials (net_rules_serialize; secret
         * values inside, wiped with the spec): the hosts whose TLS
         * warren-egress intercepts. With net_mode 0 (credentials without
         * a policy) the sandbox is registered OPEN and put in the table's
         * pass4 set (its TCP goes through the proxy, the rest as without a
         * policy). Sealed with the secrets key into the
         * sandbox's dir for recovery. NULL = none. */
        uint8_t *net_rules;
        size_t net_rules_len;
        /* the rules name hosts whose TLS is intercepted (rules,
         * credentials, detectors): the sandbox gets the CA bundle. False
         * when they hold only managed SSH destinations. */
        bool net_intercept;
        /* What GetSandbox shows of the request later: opaque bytes the
         * store keeps with the row (the API stores the request without
         * inline secret values). May be NULL. */
        uint8_t *record;
        size_t record_len;
};

/* A new empty spec (every field "default"). -ENOMEM. */
int sbx_spec_new(struct sbx_spec **ret);

/* Free the spec and everything it holds; env values are wiped first.
 * NULL ok. */
void sbx_spec_free(struct sbx_spec *s);
static inline void sbx_spec_freep(struct sbx_spec **s) {
        sbx_spec_free(*s);
}

/* Check the fields whose rules are the sandbox's own (name, hostname,
 * workdir, env names, tags, lifetime, mounts). Returns 0, or -EINVAL with
 * INVALID_ARGUMENT in e naming the field and the fix ("name: ... is not
 * valid: use ..."). Limits and the image are checked where they are
 * parsed and resolved. */
int sbx_spec_check(const struct sbx_spec *s, struct wr_err *e);

/* Append a deep copy of m to s->mounts (target, source and data copied).
 * -ENOMEM, -E2BIG past RT_MOUNTS_MAX. */
int sbx_spec_mount_add(struct sbx_spec *s, const struct rt_mount *m);

/* Set "K=V" in a NULL-terminated heap vector (replacing an earlier K;
 * the old string is wiped). -EINVAL without '=' or with an empty name,
 * -ENOMEM. */
int sbx_env_set(char ***env, const char *kv);
/* A deep copy of env (NULL on ENOMEM). */
char **sbx_env_dup(char *const *env);
/* Wipe and free every string, then the vector. NULL ok. */
void sbx_env_free(char **env);
static inline void sbx_env_freep(char ***env) {
        sbx_env_free(*env);
}

/* Set "k=v" in a NULL-terminated heap vector "K=V" (replacing an earlier
 * k). The copy of the old value, if replaced, is wiped. -ENOMEM, -EINVAL
 * (k empty). */
int sbx_env_set2(char ***env, const char *k, const char *v);

/* Free a NULL-terminated vector of strings. NULL ok. */
void sbx_argv_free(char **v);
static inline void sbx_argv_freep(char ***v) {
        sbx_argv_free(*v);
}

/* A NULL-terminated copy of v (n strings, or up to NULL when n is 0);
 * NULL when v is NULL, or on ENOMEM. */
char **sbx_argv_dup(const char *const *v, size_t n);

/* The value of name in env, or NULL. Borrowed from env. */
const char *sbx_env_find(char *const *env, const char *name);

/* True when s is a valid sandbox name: 1-63 of [a-z0-9-_.], starting with
 * a letter or digit. */
bool sbx_name_valid(const char *s);

/* True when s is a valid environment variable name (letters, digits, _ . -,
 * not starting with a digit). */
bool sbx_env_name_valid(const char *s);

/* True when s is a hostname the runtime takes: 1-64 printable ASCII
 * characters, no space and no '/'. */
bool sbx_hostname_valid(const char *s);

/* Parse a duration: "3600s", "90m", "2h", "1d", "1500ms" or plain seconds
 * (fractions allowed). Returns 0 and nanoseconds, -EINVAL (malformed, 0
 * or negative), -ERANGE (too long). */
int sbx_duration_parse(const char *s, int64_t *ret_ns);

/* Latency histogram (Prometheus style): counts[i] = observations
 * <= sbx_histogram_bounds[i] seconds, not cumulative; the last bucket is
 * +Inf. */
#define SBX_HIST_BUCKETS 14
extern const double sbx_histogram_bounds[SBX_HIST_BUCKETS - 1];
struct sbx_histogram {
        uint64_t counts[SBX_HIST_BUCKETS];
        uint64_t count;
        double sum;
};

/* Add one observation of seconds. */
void sbx_histogram_observe(struct sbx_histogram *h, double seconds);

struct sbx_metrics {
        struct sbx_histogram create;     /* sbx_create, request to RUNNING */
        struct sbx_histogram exec_start; /* spawn request to process running */
        uint64_t created, create_failed, recovered, recovery_ended;
        uint64_t teardown_failed; /* teardowns whose host cleanup was retried later */
};

/* The manager's counters (owned by it). */
const struct sbx_metrics *sbx_manager_metrics(const struct sbx_manager *m);

/* Open a TCP connection to port on the loopback of running sandbox key
 * (id or name), made inside its network namespace (tunnels). *ret_fd is
 * non-blocking, O_CLOEXEC, connecting (EINPROGRESS): wait for writable
 * and check SO_ERROR. Errors: NOT_FOUND, FAILED_PRECONDITION (not
 * running), INVALID_ARGUMENT (port 0), UNAVAILABLE. */
int sbx_tcp_connect(struct sbx_manager *m, const char *key, uint16_t port, int *ret_fd,
                    struct wr_err *e);

/* Ended sandboxes whose host cleanup (cgroups, dir) is still being retried. */
size_t sbx_manager_cleanup_pending(const struct sbx_manager *m);

/* Sandboxes prepared ahead in the warm pool and idle now. */
size_t sbx_manager_pool_size(const struct sbx_manager *m);

/* Number of sandboxes currently running. */
size_t sbx_manager_running(const struct sbx_manager *m);

/* True when a live sandbox uses image id (DeleteImage refuses then). */
bool sbx_manager_image_in_use(const char *image_id, void *manager);

/* The image reference spec (may be NULL) asks for: its image_ref, else the daemon's
 * default image. Borrowed from spec or m. */
const char *sbx_image_ref(const struct sbx_manager *m, const struct sbx_spec *spec);

/* True when ref is the daemon's default image (built or imported locally,
 * never pulled on demand). */
bool sbx_image_is_default(const struct sbx_manager *m, const char *ref);

/* Create and start a sandbox as spec says (checked with sbx_spec_check
 * here too), from img (resolved by the caller: img_resolve; borrowed for
 * the call). On success fills *ret (the stored row, status RUNNING;
 * caller clears it with store_sandbox_clear). Errors: -EINVAL
 * (INVALID_ARGUMENT naming the field), -EEXIST (name taken), -ENOENT /
 * FAILED_PRECONDITION (the image's USER does not exist in it), runtime
 * errors. On failure nothing is left running and the row, if written,
 * says FAILED with the reason. */
int sbx_create(struct sbx_manager *m, const struct sbx_spec *spec, const struct img_info *img,
               struct store_sandbox *ret, struct wr_err *e);

/* Load the sandbox called key (an id "sb-..." or a name) into *ret (caller
 * clears). -ENOENT when unknown. */
int sbx_lookup(struct sbx_manager *m, const char *key, struct store_sandbox *ret, struct wr_err *e);

/* 1 when live sandbox id runs under a network policy whose enforcement
 * the create's self-check proved (or recovery registered again), 0 when
 * it runs without one, -ENOENT when it is not live. */
int sbx_egress_enforced(struct sbx_manager *m, const char *id);
/* Resources detected in the sandbox's intercepted traffic (pull request
 * URLs; resource_detectors), borrowed until the next call. -ENOENT when
 * none are known (no egress, or the sandbox is unknown to it). */
int sbx_detected_resources(struct sbx_manager *m, const char *id, const char *const **ret,
                           size_t *ret_n);

/* The network events of sandbox id (live, or ended and still kept):
 * sandbox/egress.h sbx_egress_events. -ENOENT when there are none. */
struct sbx_egress_event;
int sbx_network_events(struct sbx_manager *m, const char *id, uint64_t after_seq, size_t limit,
                       struct sbx_egress_event **ret, size_t *ret_n, uint64_t *ret_last);

/* Pause (on) or resume running sandbox key (id or name); its id in
 * id_out (32 bytes). Idempotent. Errors: NOT_FOUND, FAILED_PRECONDITION
 * (not running; no freezer on this host). */
int sbx_set_paused(struct sbx_manager *m, const char *key, bool on, char *id_out, struct wr_err *e);
/* 1 when live sandbox id is paused, 0 when not, -ENOENT when not live. */
int sbx_paused(struct sbx_manager *m, const char *id);

/* A snapshot ended: r = 0 with the committed image (borrowed for the
 * call), or r < 0 with e. Runs on the loop. */
struct img_info;
typedef void (*sbx_snapshot_done_fn)(int r, const struct img_info *img, const struct wr_err *e,
                                     void *userdata);
/* Snapshot running sandbox key (snapshot.c): its writable layer as a new
 * layer on its image, committed as an image named name (NULL or "":
 * unnamed). The sandbox is frozen while the layer is read, then runs on.
 * Returns 0 when started (done runs once, later), or an error (done not
 * called): NOT_FOUND, FAILED_PRECONDITION (not running). */
int sbx_snapshot(struct sbx_manager *m, const char *key, const char *name,
                 sbx_snapshot_done_fn done, void *userdata, struct wr_err *e);

/* ---- the image builder (build.c) ---- */

enum sbx_build_step_kind {
        SBX_STEP_RUN = 1,    /* argv in a build sandbox; its writable layer is the new layer */
        SBX_STEP_FILE = 2,   /* files as a new layer */
        SBX_STEP_CONFIG = 3, /* the image's config changed, same layers */
};

/* One file of a FILE step. */
struct sbx_build_file {
        char *path; /* absolute, or relative to the image's working dir at that step */
        uint8_t *data;
        size_t len;
        mode_t mode; /* 0 = 0644 */
        uid_t uid;
        gid_t gid;
};

struct sbx_build_step {
        enum sbx_build_step_kind kind;
        char *desc;   /* for the log ("RUN pip install numpy") */
        uint8_t *key; /* canonical bytes of the step (cache key input) */
        size_t key_len;
        char **argv;     /* RUN */
        char **run_env;  /* RUN: "K=V" for the command only (Dockerfile ARGs), or NULL */
        bool needs_root; /* RUN: refused unless the image's user is root (apt_install) */
        struct sbx_build_file *files; /* FILE */
        size_t n_files;
        char *workdir; /* CONFIG: each NULL / false = unchanged; relative: to the current one */
        char *user;
        char **env; /* "K=V", NULL-terminated */
        bool has_entrypoint, has_cmd;
        char **entrypoint, **cmd;
        char **labels; /* "K=V" merged into the image's labels */
        char **ports;  /* "80/tcp" added to the exposed ports */
        bool has_shell;
        char **shell;
        char *stop_signal;
        bool has_healthcheck;
        char **hc_test;
        int64_t hc_interval_ns, hc_timeout_ns, hc_start_period_ns, hc_start_interval_ns;
        int hc_retries;
};

struct sbx_build_spec {
        char *base; /* image reference (stored) */
        struct sbx_build_step *steps;
        size_t n_steps;
        double step_timeout_secs; /* per RUN step; 0 = none */
        uint8_t spec_key[32];     /* sha256 of the whole request: identical builds run once */
        bool has_spec_key;
};

void sbx_build_spec_free(struct sbx_build_spec *s);

struct sbx_build;
typedef void (*sbx_build_log_fn)(const char *line, void *userdata);
/* r = 0 with the image (borrowed for the call), or r < 0 with e. */
typedef void (*sbx_build_done_fn)(int r, const struct img_info *img, const struct wr_err *e,
                                  void *userdata);

/* Build spec (taken over: freed by the build) on the base image (must be
 * stored); log gets each line (step headers, the steps' output, cache
 * hits), done runs once at the end unless the build is cancelled. *ret
 * (may be NULL) is a handle for sbx_build_cancel until done. Errors
 * before it starts (done not called): NOT_FOUND (base), ... */
int sbx_build(struct sbx_manager *m, struct sbx_build_spec *spec, sbx_build_log_fn log,
              sbx_build_done_fn done, void *userdata, struct sbx_build **ret, struct wr_err *e);

/* Stop a build (its build sandbox is ended, nothing of the running step
 * is kept); done is not called. */
void sbx_build_cancel(struct sbx_build *b);

/* Fill u for a running sandbox; -ENOENT when it is not running. */
int sbx_usage(struct sbx_manager *m, const char *id, struct rt_usage *u);

typedef void (*sbx_terminate_done_fn)(int r, const struct wr_err *e, void *userdata);

/* Terminate the sandbox with id: SIGTERM to every process, then after
 * grace_ms SIGKILL of the whole sandbox; its execs end with reason
 * SANDBOX_TERMINATED; everything it held is freed; the row becomes
 * TERMINATED. done runs on the loop once that is over (also when the
 * sandbox had already ended: r = 0 at once). Returns 0 when done will be
 * called, or a negative errno (-ENOENT unknown id) and done is not called. */
int sbx_terminate(struct sbx_manager *m, const char *id, uint64_t grace_ms,
                  sbx_terminate_done_fn done, void *userdata, struct wr_err *e);

/* The exec side of a K8S sandbox (src/k8s): ctl_fd is warrend's end of the
 * relay bridge, which speaks the control protocol like a local warren-init
 * (src/k8s/relay-mux.h). Execs on sandbox id then work as on the host
 * class; execs that init held are picked up again (a re-attach after a
 * restart or a redial). A previous attachment of id is left first. Takes
 * ctl_fd. Processes get PATH (the usual default: the image's Env is the
 * cluster's business), HOME=/root unless set, then env (the spec's). Loop
 * thread. */
int sbx_remote_attach(struct sbx_manager *m, const char *id, int ctl_fd, const char *workdir,
                      char *const *env, struct wr_err *e);

/* Forget sandbox id's exec side: ended (the sandbox is over: its execs end
 * SANDBOX_TERMINATED, their spools go) or not (held execs wait for the
 * next attach). No-op when not attached. */
void sbx_remote_detach(struct sbx_manager *m, const char *id, bool ended);
