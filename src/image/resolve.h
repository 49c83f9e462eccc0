/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* Image sources: a reference turned into a stored image, the step every
 * sandbox create goes through before sbx_create. Stored images answer at
 * once; others are pulled (later: built) and then answer from the loop.
 * Threads: the loop thread only. */

#include <stdbool.h>
#include <uv.h>

#include "basic/err.h"
#include "image/image.h"

struct img_resolve;

/* The end of an asynchronous resolve. r = 0: info is the image (the
 * callee's: img_info_free). r < 0: e says why, with the status to answer
 * (the pull's: NOT_FOUND, UNAVAILABLE, UNAUTHENTICATED, DATA_LOSS ...).
 * The handle is freed right after the callback returns. */
typedef void (*img_resolve_done_fn)(int r, struct img_info *info, const struct wr_err *e,
                                    void *userdata);

enum img_resolve_flags {
        /* Only what is stored: never pull (the daemon's default image is
         * built or imported locally). */
        IMG_RESOLVE_NO_PULL = 1 << 0,
};

/* Resolve ref on store s: as given (name, id, id prefix), then under the
 * local name a pull stores it as ("ubuntu" → "ubuntu:latest"). When
 * neither is stored and flags allow, pull it (img_pull_start on loop).
 * Returns 1 with *ret_info (the caller's: img_info_free) when the image is
 * stored: done is not called. Returns 0 when a pull started: done runs
 * once, later, from the loop, unless img_resolve_cancel; *ret_op (may be
 * NULL) is the handle. Errors (done not called): -ENOENT with NOT_FOUND
 * naming the image and how to get it (not stored and IMG_RESOLVE_NO_PULL),
 * -EINVAL for a malformed reference or ambiguous id prefix, the pull's
 * start errors, -ENOMEM. */
int img_resolve(struct img_store *s, uv_loop_t *loop, const char *ref, unsigned flags,
                img_resolve_done_fn done, void *userdata, struct img_info **ret_info,
                struct img_resolve **ret_op, struct wr_err *e);

/* Stop waiting: done does not run and the handle is freed (a shared pull
 * goes on for its other waiters). Not from inside done. NULL ok. */
void img_resolve_cancel(struct img_resolve *op);
