/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* A sealed memfd holding bytes handed to a helper process (a key for
 * warren-signer): the only way a key travels between processes. */

#include <stddef.h>
#include <sys/uio.h>

#include "basic/err.h"

/* Make a memfd named name (close-on-exec) holding the n pieces of iov in
 * order, sealed against any change (F_SEAL_SHRINK|GROW|WRITE|SEAL), read
 * position 0. *ret_fd is the caller's; the caller wipes its own copies of
 * the bytes. Errors name `what`. */
int memfd_sealed(const char *name, const char *what, const struct iovec *iov, size_t n, int *ret_fd,
                 struct wr_err *e);
