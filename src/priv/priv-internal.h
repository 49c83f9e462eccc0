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

/* helpers.c (phase 3: HELPER_START, UNPACK_START): find the helper
 * binaries (once, at start). */
void priv_helpers_init(void);

/* helpers.c: carry out a HELPER_START or UNPACK_START with the fds it came
 * with (taken over: closed here). 1: started, *started filled (pid, start
 * time) and *ret_pidfd the helper's pidfd (the caller's); 0: answer res
 * (err set, nothing started). */
int priv_helpers_run(const struct priv_req *req, int *fds, size_t n_fds, struct priv_result *res,
                     struct priv_helper_started *started, int *ret_pidfd);
