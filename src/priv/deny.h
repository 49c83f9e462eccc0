/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* warren-priv's own seccomp filter: a denylist of kernel interfaces that
 * neither warren-priv nor anything it starts (the runtime's clone child
 * before it execs warren-init, warren-init, the sandboxes' workloads, the
 * helpers) ever needs, but that its capabilities (CAP_SYS_ADMIN,
 * CAP_DAC_READ_SEARCH, ...) would otherwise open: loading kernel code
 * (modules, kexec, bpf), handle-based opens that bypass the mount tree
 * (open_by_handle_at: the "shocker" escape), keyrings, perf, swap, reboot,
 * the clock, io_uring, userfaultfd, ptrace and cross-process memory
 * access. Each answers EPERM.
 *
 * Why a denylist and not an allowlist: the filter is inherited across
 * fork and exec by every sandbox warren-priv clones, whose own allowlist
 * (src/runtime/policy.c) stacks on top; an allowlist here would have to
 * be the union of every syscall a workload may make. None of the names
 * below is in the sandboxes' allowlist (tests/unit/test-priv-deny.c
 * checks it against rt_policy_allowed()), so no sandbox loses anything. */

#include <stddef.h>

#include "basic/err.h"

/* The denied syscalls' names, NULL-terminated (for tests and docs). */
extern const char *const priv_deny_names[];

/* Load the filter into every thread of the calling process (TSYNC).
 * Requires no_new_privs (or CAP_SYS_ADMIN). A name this libseccomp or
 * architecture does not know is skipped. */
int priv_deny_load(struct wr_err *e);
