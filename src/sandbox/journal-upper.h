/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* The journal's session with warren-upper (docs/privsep.md "Phase 4b-2,
 * the journal through warren-upper, as built"): under --privsep the
 * journal (journal.c) reads and writes a sandbox's upper dir through a
 * warren-upper that warren-priv starts in the sandbox's user namespace
 * (UPPER_SESSION), never itself. One session per unit of journal work
 * (a walk before or after an exec, a rollback): opened on the worker,
 * closed when the work is done (warren-upper then exits).
 *
 * Threading: blocking; worker threads only. Errors: negative errno with
 * the context in struct wr_err; -EPROTO / -ETIMEDOUT / -EIO mean the
 * session is broken (close it). */

#include <stdint.h>

#include "basic/err.h"
#include "sandbox/journal-tree.h"

struct sbx_manager;
struct sbx_upper_ref;

/* A session for the sandbox ref names: the socket (the caller's: close it
 * to end the session), or -errno with e. */
int jup_open(struct sbx_manager *m, const struct sbx_upper_ref *ref, struct wr_err *e);

/* The upper dir walked by warren-upper, decoded with jt_tree_decode into
 * out (zeroed by the caller; owners are the sandbox's ids). */
int jup_walk(int sock, struct jt_tree *out, struct wr_err *e);

/* The regular file path of the upper dir, opened read-only by
 * warren-upper: its fd (the caller's; not yet checked against the walk:
 * the caller fstats it) or -errno. */
int jup_open_file(int sock, const char *path, struct wr_err *e);

/* One of the rollback's writes (PRIV_UPPER_OP_REMOVE, MKDIR, ATTRS, PUT
 * with src_fd, SYMLINK with link) through the sandbox's root; a's ids the
 * sandbox's own. 0 or -errno with e. */
int jup_op(int sock, uint32_t op, const char *path, const struct jt_attrs *a, const char *link,
           int src_fd, struct wr_err *e);
