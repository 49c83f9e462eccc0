/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* The file operations of the control protocol (FILE_OPEN, FILE_MKDIR ..
 * FILE_LIST, ctl-proto.h), done on a root directory fd: warren-init runs
 * them on its own root ("/"), as the sandbox's root inside the sandbox
 * (phase 4a-2 of privilege separation, docs/privsep.md); the daemon's
 * unit tests run the very same code on a plain directory (files.h:
 * sbx_fs without a control connection).
 *
 * Every path is resolved with openat2(root, path, RESOLVE_IN_ROOT |
 * RESOLVE_NO_MAGICLINKS): a symlink (absolute or relative) or ".." never
 * leads out of the root. The last component of a path is handled with
 * *at() calls on its parent's fd that never follow it. Ids (uid, gid) are
 * taken as they are: inside the sandbox for init.
 *
 * libc only (warren-init is static and links nothing else but
 * basic/rmrf.c). Every function returns 0 or a negative errno and touches
 * nothing but the file system under root. */

#include <stdint.h>

#include "init/ctl-proto.h"
#include "init/init-proto.h"

/* FILE_OPEN: *ret_fd (CLOEXEC, the caller's). A non-PATH open reaches a
 * regular file or a directory only (-EINVAL), opened O_NONBLOCK |
 * O_NOCTTY first. CREATE: the exact mode, then OWNER's fchown. */
int init_fop_open(int root, const struct init_file_open *f, int *ret_fd);

/* FILE_MKDIR, FILE_REMOVE, FILE_RENAME, FILE_SYMLINK (type) as decoded
 * (init_req_decode). The last component must name an entry: "/", "." and
 * ".." are refused (-EINVAL). Errors as the kernel gives them, and: MKDIR
 * -EEXIST (without PARENTS, or not a directory); REMOVE -ENOTEMPTY (not
 * RECURSIVE), -EBUSY (a mount point, here or below); RENAME -ESTALE (EXPECT
 * and from is another inode). */
int init_fop_do(int root, uint32_t type, const struct init_file_op *op);

/* FILE_LIST: one level of directory op->path into a new sealed memfd
 * (*ret_memfd, CLOEXEC, the caller's) of ret->count entries (ctl-proto.h:
 * struct ctl_file_entry, name, link target), at most CTL_FILE_LIST_MAX
 * (ret->truncated when there were more); ret->fs_type: the directory's
 * file system. Entries that vanish while it is read are left out. */
int init_fop_list(int root, const struct init_file_op *op, struct ctl_file_listed *ret,
                  int *ret_memfd);
