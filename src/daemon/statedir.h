/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* The state directory of warrend:
 *
 *   warren.db       SQLite store (0600)       layers/     layer store (0700)
 *   images/         image configs (0700)      volumes/    volume trees (0700)
 *   sandboxes/      per-sandbox dirs (0711)   ca/         egress CA (0700)
 *   keys/           secrets key (0700)        warrend.lock  one daemon per dir
 */

#include "basic/err.h"

/* Create (mode 0711, parents 0755) or check the state dir at path and its
 * layout, make sure it is a writable directory, and take its lock. On
 * success *ret_abs is the absolute path (caller frees) and *ret_lock_fd the
 * locked fd (caller closes at exit). Errors, each with a one-line message:
 * -ENOTDIR (path or a part of the layout is not a directory), -EROFS /
 * -EACCES (not writable), -EBUSY (another warrend holds the lock), or the
 * errno of the failed mkdir. */
int daemon_state_dir_prepare(const char *path, char **ret_abs, int *ret_lock_fd, struct wr_err *e);

/* Create the parent directory of a unix socket path (mode 0755, with its
 * parents). Returns 0 or a negative errno with a message. */
int daemon_socket_dir_prepare(const char *socket_path, struct wr_err *e);
