/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* Internals shared by manager.c (sandboxes) and exec.c (exec sessions). */

#include <stdbool.h>
#include <stdint.h>

#include <uv.h>

#include "sandbox/sandbox.h"

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

/* One live sandbox. Owned by the manager's list; freed once dead and every
 * handle closed. */
struct sbx {
        struct sbx_manager *m;
        struct sbx *next;
        char id[32];
        char *name;
        char *image_id;
        struct rt_sandbox *rt;
        int state;   /* enum sbx_state */
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
        int final_status; /* STORE_SANDBOX_TERMINATED or _FAILED */
        struct sbx_waiter *waiters;
        /* teardown (rt_sandbox_destroy) on a worker thread: cgroup rmdir
         * can wait ~10 ms on cgroup_mutex (a cgroup v1 migration elsewhere
         * holds it through an RCU grace period), the loop must not */
        uv_work_t teardown;
        int teardown_r;
        struct wr_err teardown_err;

        /* Process defaults. */
        char **env; /* NULL-terminated "K=V" */
        char *workdir;
        uint32_t uid, gid;

        struct sbx_exec *execs;
        uint64_t next_exec_id;
        /* spawn requests in flight, for the exec start latency metric */
        struct {
                uint64_t id, sent_ns;
        } spawn_times[8];
};

#define SBX_POOL_JOBS 2

struct sbx_pool_entry {
        char id[32];
        struct rt_sandbox *rt; /* rt_sandbox_prestart()ed */
};

struct sbx_manager {
        uv_loop_t *loop;
        struct store *store;
        struct img_store *images;
        char *state_dir;
        char *init_path;
        char *default_image;
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
                char **layers;      /* the worker's copy of pool_layers */
                bool layers_failed; /* its try with them failed */
        } pool_jobs[SBX_POOL_JOBS];
        unsigned pool_busy; /* jobs running */
        /* the layers the pool builds roots for ahead (those of the last
         * image a sandbox was created from; NULL-terminated, owned) */
        char **pool_layers;
        int cgroup_mode; /* enum rt_cgroup_mode */
        /* exec.c's state: sessions, log size, chunk pool */
        struct sbx_exec_state *exec;
};

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

/* manager.c */
struct sbx *sbx_find_live(struct sbx_manager *m, const char *key);
/* Send a request to init, waiting briefly when its socket queue is full. */
int sbx_ctl_send_spawn(struct sbx *sb, const void *req, const int stdio[3]);
int sbx_ctl_send_signal(struct sbx *sb, uint64_t target, int signo, bool group);
int sbx_ctl_send_resize(struct sbx *sb, uint64_t id, unsigned cols, unsigned rows);
/* Environment helpers: set "K=V" in a NULL-terminated heap vector. */
int sbx_env_set(char ***env, const char *kv);
char **sbx_env_dup(char *const *env);
void sbx_env_free(char **env);
