/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* Phase 5 of privilege separation (docs/privsep.md "Phase 5, as built"):
 * warrend --privsep --user NAME starts as root, does what must happen
 * before the drop (the state dir and its lock, raise_nofile, warren-priv,
 * the listeners), then becomes NAME for good:
 *
 *   own mount namespace (slave of the host's): every mount read-only
 *   except the state dir, /dev and /proc; supplementary groups cleared,
 *   setresgid/setresuid to NAME; the bounding, ambient, inheritable,
 *   permitted and effective sets empty; no_new_privs; not dumpable; a
 *   seccomp allowlist (every thread; anything else EPERM: mount,
 *   namespaces, ptrace, bpf, modules, kexec, keyrings, ...).
 *
 * Root required; call once, from the main thread, before any thread
 * other than warren-priv's supervisor exists. */

#include <stdbool.h>
#include <sys/types.h>

#include "basic/err.h"

struct drop_user {
        uid_t uid;
        gid_t gid;
        char name[64];
};

/* Look NAME up (passwd; its primary group). -ENOENT naming the fix
 * (scripts/warren-user.sh) when there is no such user, -EPERM for uid or
 * gid 0 (dropping to root is no drop). */
int drop_user_lookup(const char *name, struct drop_user *ret, struct wr_err *e);

/* Give the state dir to u: the dir itself and what warrend writes there
 * (warren.db and its journal files, images/, keys/, ca/, identity-api/,
 * the directory levels of layers/ and volumes/, ...), never following a
 * symlink or crossing a mount. Left alone: sandboxes/ (warren-priv's),
 * fetch-root/ (warren-fetch's chroot must stay root's), the trees inside
 * layers/ (unpacked files keep their owners) and inside
 * volumes/<id>/ (a volume's own files); sandboxes/ becomes root:u 0751
 * (warrend lists it, warren-priv writes it). 0 or negative errno with e. */
int drop_state_dir_own(const char *state_dir, const struct drop_user *u, struct wr_err *e);

/* The drop itself (above). 0, or a negative errno with e: warrend must
 * then not start (a half-dropped daemon is worse than none). */
int drop_apply(const char *state_dir, const struct drop_user *u, struct wr_err *e);
