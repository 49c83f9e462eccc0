/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* Starting a warren-signer (used by warrend: the egress CA's signer for
 * warren-egress, src/sandbox/egress.c; the key keepers,
 * src/daemon/keeper.c). */

#include <sys/types.h>

#include "basic/err.h"

/* Start `path key_flag <key_fd> --sock-fd N --log-level info --log-format
 * <warrend's>` with a new SOCK_SEQPACKET pair: the child gets key_fd and
 * one end (only those two fds lose close-on-exec, in the child); key_fd is
 * closed here whatever happens. *ret_pid is the child (the caller reaps
 * it), *ret_sock the other end (close-on-exec). */
int signer_start(const char *path, const char *key_flag, int key_fd, pid_t *ret_pid, int *ret_sock,
                 struct wr_err *e);
