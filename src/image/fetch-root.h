/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* warren-fetch's chroot (docs/images.md "Where a pull runs"): a root-owned
 * directory, read-only to the helper, holding only etc/hosts,
 * etc/resolv.conf (copies of the host's) and an etc/nsswitch.conf
 * ("hosts: files dns") for name resolution. warrend prepares it (one per
 * state dir: <state_dir>/fetch-root, so one writer) before it starts a
 * helper, or with --privsep warren-priv does (under a mutex of its own);
 * the helper only checks it. */

#include "basic/err.h"

/* Create root and root/etc when missing (mode 0755), refuse them unless
 * owned by root and not group/other writable, rewrite each etc file that
 * differs from what it should hold (temp file + rename), and remove stale
 * temp files a killed writer left. Errors: -EINVAL (not absolute), -EPERM
 * (ownership/mode), -errno of the file system, naming the path. */
int img_fetch_root_prepare(const char *root, struct wr_err *e);

/* root and root/etc exist, are directories owned by root and not
 * group/other writable. -ENOENT / -EPERM naming the path. */
int img_fetch_root_check(const char *root, struct wr_err *e);
