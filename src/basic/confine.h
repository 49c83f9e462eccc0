/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* The privilege drop the confined helpers (warren-egress, warren-signer)
 * share: an empty root, a user that is not root, no capabilities, no way
 * back. Each helper adds its own rlimits before and its own seccomp
 * allowlist after. Errors name the flag the value came from (--root,
 * --uid, --gid). */

#include <seccomp.h>
#include <stddef.h>
#include <sys/types.h>

#include "basic/err.h"

/* user and group: a name or a number; group NULL: user's passwd group.
 * -ENOENT for an unknown name, -EPERM for uid or gid 0. */
int confine_ids(const char *user, const char *group, uid_t *uid, gid_t *gid, struct wr_err *e);

/* dir must be absolute, owned by root, not group/other writable and empty
 * (created, parents too, mode 0755, when missing). */
int confine_root_check(const char *dir, struct wr_err *e);

/* chroot into root, drop the bounding and ambient sets, become uid/gid
 * with no supplementary groups, prove uid 0 cannot come back, clear every
 * capability, set no_new_privs and make the process not dumpable. Root
 * (with CAP_SETPCAP) required; call confine_root_check() first. */
int confine_drop(const char *root, uid_t uid, gid_t gid, struct wr_err *e);

/* A seccomp filter answering def (SCMP_ACT_ERRNO(EPERM), or
 * SCMP_ACT_KILL_PROCESS to prove a list is enough) to all but the n
 * syscalls in allow[] and mmap/mprotect without PROT_EXEC (memory, never
 * executable). The caller adds its own conditional rules, then
 * seccomp_load()s and seccomp_release()s it. NULL on failure, *r the
 * negative errno. */
scmp_filter_ctx confine_seccomp_new(uint32_t def, const int *allow, size_t n, int *r);
