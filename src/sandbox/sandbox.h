/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* sandbox: the daemon's live sandboxes, driven from the event loop.
 *
 * This module owns every running sandbox of the daemon: it resolves the
 * image (image/), records the sandbox in SQLite before and after each step
 * (store/), starts it (runtime/), keeps one control connection to its
 * warren-init, runs exec sessions (pipes or a PTY, output streamed with
 * back-pressure), enforces lifetimes, and terminates sandboxes (SIGTERM,
 * grace period, SIGKILL of the whole sandbox, everything freed).
 *
 * The API layer (api/sandboxes.c, api/exec.c) is glue on top of it: it
 * turns protobuf requests into these calls and callbacks into responses.
 * Everything runs on the loop thread. */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <uv.h>

#include "basic/err.h"
#include "warren/v1/sandboxes.pb-c.h"

struct store;
struct store_sandbox;
struct img_store;
struct sbx_manager;
struct sbx_exec;

struct sbx_manager_config {
        uv_loop_t *loop;
        struct store *store;
        struct img_store *images;
        const char *state_dir;
        /* Host path of the static warren-init binary. */
        const char *init_path;
        /* Image used when a CreateSandbox request names none. */
        const char *default_image;
        /* sbx_manager_free stops every sandbox (the old behaviour, for
         * tests) instead of leaving them running for the next warrend. */
        bool terminate_on_exit;
        /* Sandboxes prestarted ahead (rt_sandbox_prestart), refilled in the
         * background; 0 = no pool. */
        unsigned warm_pool;
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

/* True when s is a valid sandbox name: 1-63 of [a-z0-9-_.], starting with
 * a letter or digit. */
bool sbx_name_valid(const char *s);

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
};

/* The manager's counters (owned by it). */
const struct sbx_metrics *sbx_manager_metrics(const struct sbx_manager *m);

/* Sandboxes prepared ahead in the warm pool and idle now. */
size_t sbx_manager_pool_size(const struct sbx_manager *m);

/* Number of sandboxes currently running. */
size_t sbx_manager_running(const struct sbx_manager *m);

/* True when a live sandbox uses image id (DeleteImage refuses then). */
bool sbx_manager_image_in_use(const char *image_id, void *manager);

/* Create and start a sandbox as req says. On success fills *ret (the
 * stored row, status RUNNING; caller clears it with store_sandbox_clear).
 * Errors: -EINVAL (INVALID_ARGUMENT naming the field), -ENOENT (image or
 * secret unknown), -EEXIST (name taken), -EOPNOTSUPP (unsupported option,
 * e.g. the K8S compute class), runtime errors. On failure nothing is left
 * running and the row, if written, says FAILED with the reason. */
int sbx_create(struct sbx_manager *m, const Warren__V1__CreateSandboxRequest *req,
               struct store_sandbox *ret, struct wr_err *e);

/* The image reference req asks for (the daemon's default image when it
 * names none); NULL for a declarative build. Borrowed from req or m. */
const char *sbx_image_ref(const struct sbx_manager *m, const Warren__V1__CreateSandboxRequest *req);

/* True when ref is the daemon's default image (never pulled on demand). */
bool sbx_image_is_default(const struct sbx_manager *m, const char *ref);

/* True when ref resolves to a stored image, as given or under the local
 * name a pull stores it as ("ubuntu" → "ubuntu:latest"). The API pulls
 * images on demand when this is false, then calls sbx_create. */
bool sbx_image_present(struct sbx_manager *m, const char *ref);

/* Load the sandbox called key (an id "sb-..." or a name) into *ret (caller
 * clears). -ENOENT when unknown. */
int sbx_lookup(struct sbx_manager *m, const char *key, struct store_sandbox *ret, struct wr_err *e);

/* Fill usage for a running sandbox; -ENOENT when it is not running. */
int sbx_usage(struct sbx_manager *m, const char *id, Warren__V1__ResourceUsage *u);

typedef void (*sbx_terminate_done_fn)(int r, const struct wr_err *e, void *userdata);

/* Terminate the sandbox with id: SIGTERM to every process, then after
 * grace_ms SIGKILL of the whole sandbox; its execs end with reason
 * SANDBOX_TERMINATED; everything it held is freed; the row becomes
 * TERMINATED. done runs on the loop once that is over (also when the
 * sandbox had already ended: r = 0 at once). Returns 0 when done will be
 * called, or a negative errno (-ENOENT unknown id) and done is not called. */
int sbx_terminate(struct sbx_manager *m, const char *id, uint64_t grace_ms,
                  sbx_terminate_done_fn done, void *userdata, struct wr_err *e);
