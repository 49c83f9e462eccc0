/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* The per-exec change journal and rollback (docs/journal.md, "Change
 * journal"). For an exec started with journaling, warrend walks the
 * sandbox's writable layer (the overlay upper dir) before the process
 * starts and again when it exits; the difference is what the exec
 * created, modified, deleted or changed the mode/owner of. Before the
 * exec starts, the bytes of every regular file of the writable layer are
 * kept in the sandbox's journal object store (deduplicated by inode and
 * change time, so only what changed since the last journaled exec is
 * copied), which is what RollbackExec writes back; files of the image's
 * read-only layers need no copy (they never change).
 *
 * Under --privsep warrend touches none of the writable layer itself:
 * every walk, file read and rollback write goes through a warren-upper
 * session in the sandbox's user namespace (journal-upper.h, UPPER_SESSION;
 * docs/privsep.md "Phase 4b-2"), the same decisions made here either way.
 *
 * What it sees: the writable layer only (not /tmp and /run, which are
 * tmpfs, nor volumes), every process's changes between the exec's start
 * and its exit (a concurrent exec's changes to the same files count for
 * both). Rollback goes through the sandbox's own root (openat2
 * RESOLVE_IN_ROOT, never leaving the overlay mount) while the sandbox is
 * frozen, and is refused when a path changed again after the exec
 * (another exec, or the running sandbox), unless forced.
 *
 * Limits: the last SBX_JOURNAL_KEEP journals per sandbox; the object store
 * holds up to its budget (files beyond it make the journal unable to roll
 * those paths back, and say so). Journals live in memory and in the sandbox's dir:
 * a warrend restart forgets them.
 *
 * Threading: the manager's loop thread; walks, copies and rollbacks run
 * on worker threads, results come back through callbacks on the loop.
 * Errors: negative errno with the context (and gRPC status) in struct
 * wr_err. */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "basic/err.h"
#include "sandbox/journal-tree.h"

struct sbx_manager;
struct sbx;

#define SBX_JOURNAL_KEEP 32

/* The walk before an exec is done: token identifies it for
 * sbx_journal_bind / sbx_journal_cancel; sandbox_id is the sandbox's id
 * (the request may have named it). r < 0: failed (e says why). */
typedef void (*sbx_journal_begun_fn)(int r, uint64_t token, const char *sandbox_id,
                                     const struct wr_err *e, void *userdata);

/* Prepare journaling for an exec in the running sandbox `sandbox` (id or
 * name): walk its writable layer and save file bytes, on a worker.
 * Errors (then fn is not called): -ENOENT, -EBUSY not running, -ENOMEM,
 * the upper dir's (sbx_upper_open). */
int sbx_journal_begin(struct sbx_manager *m, const char *sandbox, sbx_journal_begun_fn fn,
                      void *userdata, struct wr_err *e);

/* The exec for which token was begun started as exec_id. */
void sbx_journal_bind(struct sbx_manager *m, const char *sandbox_id, uint64_t token,
                      const char *exec_id);

/* The exec for which token was begun did not start: forget it. */
void sbx_journal_cancel(struct sbx_manager *m, const char *sandbox_id, uint64_t token);

/* Is journaling every exec of this sandbox on (CreateSandbox journal_execs)? */
bool sbx_journal_all(struct sbx_manager *m, const char *sandbox);

/* What the exec changed. running: it has not exited yet (the changes so
 * far); complete: false when paths were left out (walk limits) or file
 * bytes could not be kept (rollback refuses those). v is borrowed for the
 * call. r < 0: e says why. */
typedef void (*sbx_journal_changes_fn)(int r, const struct jt_change *v, size_t n, bool running,
                                       bool complete, const struct wr_err *e, void *userdata);

/* The changes of exec_id in sandbox. Errors (fn not called): -ENOENT
 * (sandbox, or no journal for that exec: NOT_FOUND naming it), -ENOMEM. */
int sbx_journal_changes(struct sbx_manager *m, const char *sandbox, const char *exec_id,
                        sbx_journal_changes_fn fn, void *userdata, struct wr_err *e);

/* Rollback done: v lists the paths restored (borrowed for the call). */
typedef void (*sbx_journal_rollback_fn)(int r, const struct jt_change *v, size_t n,
                                        const struct wr_err *e, void *userdata);

/* Restore the sandbox's writable layer, for the paths exec_id changed, to
 * their state before it ran. Refused (FAILED_PRECONDITION) while the exec
 * runs, after it was rolled back, and — unless force — when a path was
 * changed again since (the error names it). Errors (fn not called):
 * -ENOENT, -EBUSY, -ENOMEM; later ones reach fn. */
int sbx_journal_rollback(struct sbx_manager *m, const char *sandbox, const char *exec_id,
                         bool force, sbx_journal_rollback_fn fn, void *userdata, struct wr_err *e);

/* --- for the rest of src/sandbox --- */

/* Exec exec_id of sb exited: take the walk after it (if journaled). */
void sbx_journal_exec_ended(struct sbx *sb, const char *exec_id);

/* Journal every exec of sb from now on. */
void sbx_journal_set_all(struct sbx *sb, bool on);

/* sb goes away: drop its journals (work in flight ends with an error). */
void sbx_journal_free(struct sbx *sb);
