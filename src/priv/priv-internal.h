/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* Inside warren-priv: what main.c (the server, phase 1) and lifecycle.c
 * (phase 2: the sandbox handles it owns) share. */

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>

#include "priv/priv-proto.h"
#include "runtime/runtime.h"

/* main.c: open path (checked by priv_path_check) below the state dir */
int priv_open_beneath(const char *path, int flags);

/* lifecycle.c: --state-dir and --init (must be called before serving) */
int priv_lifecycle_init(const char *state_dir, const char *init_path);

/* lifecycle.c: rt_prepare's result at start as HELLO_REPLY.host_check (0
 * fine, else a positive errno; 0 without --init: nothing was asked) */
uint32_t priv_lifecycle_host_check(void);

/* lifecycle.c: phase 5: give sandboxes/<id> itself (not what it holds)
 * to the state dir's owner when that is not root (a warrend that drops
 * to it): its exec spool, and the paths through it warrend opens (bind
 * sources such as the managed ssh dir). A failure is logged. */
void priv_sandbox_dir_give(const char *id);

/* lifecycle.c: phase 5: true and *ret the group of the state dir's owner
 * when warrend drops to it (the state dir is not root's). */
bool priv_drop_gid(gid_t *ret);

/* lifecycle.c: carry out a phase-2 request (types 6..11) with the fds it
 * came with (taken over: closed here). On success with an answer of
 * SANDBOX_CREATED: 1, *created filled and out_fds[0..2) owned by the
 * caller (init's pidfd, a connected ctl socket); 0: answer res (err 0 or
 * set). */
int priv_lifecycle_run(const struct priv_req *req, int *fds, size_t n_fds, struct priv_result *res,
                       struct priv_created *created, int out_fds[2]);

/* lifecycle.c: the handle warren-priv owns for t (same id, pid, start
 * time), marked busy (a SIGNAL or FREEZE uses it instead of attaching);
 * NULL when it owns none. Give it back with priv_owned_put. */
struct rt_sandbox *priv_owned_get(const struct priv_target *t);
void priv_owned_put(struct rt_sandbox *sb);

/* ---- phase 3: volumes and spawn-beside (types 19..22) ---- */

/* What such a request answers besides a RESULT: VOLUME_MOUNTED's fd (the
 * mount's root), SPAWNED's pidfd and pid. */
struct priv_volssh_out {
        int fd; /* -EBADF: none (answer the RESULT) */
        int32_t pid;
};

/* volume.c: true for types 19..22 */
bool priv_volssh_type(uint32_t type);

/* volume.c: carry out such a request with the fds it came with (taken
 * over: closed here). res->err set on failure; else o->fd >= 0 when the
 * answer carries one (the caller sends and closes it). */
void priv_volssh_run(const struct priv_req *req, int *fds, size_t n_fds, struct priv_result *res,
                     struct priv_volssh_out *o);

/* spawn.c: SANDBOX_SPAWN_BESIDE (fds: cwd, stdin, stdout, stderr; not
 * closed here) and SSH_DIR_PREPARE. */
void priv_spawn_beside_run(const struct priv_spawn_beside *s, const int *fds, size_t n_fds,
                           struct priv_result *res, struct priv_volssh_out *o);
void priv_ssh_dir_run(const struct priv_ssh_dir *d, struct priv_result *res);
/* main.c: the checked target of a request (a handle warren-priv owns,
 * one it attached and cached, or attached now: pid, start time, cgroup
 * checked); res filled when it fails. Give it back with priv_target_put. */
#define PRIV_SLOT_OWNED (-2) /* *slot of priv_target_get: a handle warren-priv owns */
int priv_target_get(const struct priv_target *t, struct rt_sandbox **ret, int *slot,
                    struct priv_result *res);
void priv_target_put(struct rt_sandbox *sb, int slot);

/* upper.c (phase 4b): find warren-upper next to this executable (at start). */
int priv_upper_init(void);
/* upper.c: carry out an UPPER_PACK with its fd (the spool; taken over).
 * 0 with *out filled (its counters are the caller's), or <0 with res. */
int priv_upper_run(const struct priv_req *req, int *fds, size_t n_fds, struct priv_result *res,
                   struct priv_upper_packed *out);
/* upper.c (phase 4b-2): carry out an UPPER_SESSION: warren-upper started
 * in session mode, a thread of its own answering its OPAQUE questions and
 * reaping it; *ret_fd: warrend's end of the session socket (the caller
 * sends it with the answer and closes it). 0 or the failure in res. */
int priv_upper_session_run(const struct priv_req *req, struct priv_result *res,
                           struct priv_upper_started *out, int *ret_fd);

/* helpers.c (phase 3: HELPER_START, UNPACK_START): find the helper
 * binaries and warren-fetch's chroot (once, at start). */
void priv_helpers_init(const char *state_dir);

/* helpers.c: carry out a HELPER_START or UNPACK_START with the fds it came
 * with (taken over: closed here). 1: started, *started filled (pid, start
 * time) and *ret_pidfd the helper's pidfd (the caller's); 0: answer res
 * (err set, nothing started). */
int priv_helpers_run(const struct priv_req *req, int *fds, size_t n_fds, struct priv_result *res,
                     struct priv_helper_started *started, int *ret_pidfd);

/* layer.c (phase 5: LAYER_COMMIT, LAYER_REMOVE): true for types 25..26 */
bool priv_layer_type(uint32_t type);
/* layer.c: carry out such a request (no fds); res->value / res->err set
 * as priv-proto.h says. */
void priv_layer_run(const struct priv_req *req, struct priv_result *res);

/* lifecycle.c: a memfd sealed against every change (F_SEAL_SEAL | SHRINK
 * | GROW | WRITE) of exactly len bytes: its content in *ret (heap, the
 * caller's). -EACCES (not sealed), -EINVAL (size), errors name what. */
int priv_memfd_read(int fd, size_t len, const char *what, char **ret, struct wr_err *e);

/* volfile.c (phase 5: VOLFILE_OPEN, VOLFILE_OP, VOLFILE_LIST): true for
 * types 27..29 */
bool priv_volfile_type(uint32_t type);
/* volfile.c: carry out such a request with its fd (the paths' memfd;
 * closed here). The answer's type: PRIV_RESULT (res: err and value set on
 * failure, value the wr_status), or PRIV_VOLFILE_OPENED / _STATED /
 * _LISTED with *out filled (its counters are the caller's) and *ret_fd
 * (OPENED, LISTED: the caller sends and closes it; else -EBADF). */
uint32_t priv_volfile_run(const struct priv_req *req, int *fds, size_t n_fds,
                          struct priv_result *res, struct priv_reply *out, int *ret_fd);
