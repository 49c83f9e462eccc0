/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* Per-sandbox cgroups, v1 and v2 behind one interface (internal to runtime).
 *
 * v1: /sys/fs/cgroup/{memory,cpu,cpuacct,pids,freezer}/warren/<id> (cpuacct
 *     optional; co-mounted controllers share one dir). A process joins by
 *     writing "0" to each cgroup.procs fd from rt_cgroup_join_fds().
 * v2: <root>/warren/<id> with memory, cpu and pids enabled in the
 *     subtree_control of <root> and <root>/warren; a process is started in
 *     it with clone3(CLONE_INTO_CGROUP, rt_cgroup_dirfd()). <root> is
 *     /sys/fs/cgroup on a pure v2 host, /sys/fs/cgroup/unified on a hybrid
 *     one (where controllers are usually bound to v1: then only limits
 *     that need no controller work, and asking for others fails). */

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "basic/err.h"
#include "runtime/runtime.h"

#define RT_CGROUP_PARENT "warren"
#define RT_CGROUP_V1_MAX 5

struct rt_cgroup;

/* Resolve mode AUTO to V1 or V2 for this host and report the hierarchy
 * root in root (size PATH_MAX may be NULL). Returns the resolved mode, or
 * -ENOENT (no usable cgroup hierarchy) with a message in e. */
int rt_cgroup_detect(enum rt_cgroup_mode mode, char *root, size_t root_size, struct wr_err *e);

/* Create the cgroup(s) for sandbox id and apply limits (0 = default; a
 * NULL limits means "no limits at all", used by tests on hosts without
 * controllers). Returns 0 and *ret, -EEXIST if they already exist,
 * -ENOENT/-EOPNOTSUPP when a needed controller is missing (message names
 * it), other negative errno from the filesystem. On failure nothing
 * created is left. */
int rt_cgroup_create(const char *id, enum rt_cgroup_mode mode, const struct rt_limits *limits,
                     struct rt_cgroup **ret, struct wr_err *e);

/* (Re)apply limits (0 = default) to existing cgroup(s): a warm-pool
 * sandbox gets its request's limits this way. */
int rt_cgroup_set_limits(struct rt_cgroup *cg, const struct rt_limits *limits, struct wr_err *e);

/* Open the existing cgroup(s) of sandbox id (recovery, cleanup by id).
 * Returns 0, -ENOENT when none exists. */
int rt_cgroup_open(const char *id, enum rt_cgroup_mode mode, struct rt_cgroup **ret,
                   struct wr_err *e);

/* RT_CGROUP_V1 or RT_CGROUP_V2. */
enum rt_cgroup_mode rt_cgroup_mode_of(const struct rt_cgroup *cg);

/* v2: an O_DIRECTORY fd of the cgroup (owned by cg) for CLONE_INTO_CGROUP;
 * v1: -EBADF. */
int rt_cgroup_dirfd(const struct rt_cgroup *cg);

/* v1: store up to max O_WRONLY|O_CLOEXEC fds of the cgroup.procs files
 * (owned by cg) in fds; writing "0" to each moves the writer in. Returns
 * how many (0 on v2). */
size_t rt_cgroup_join_fds(const struct rt_cgroup *cg, int *fds, size_t max);

/* Close the fds of rt_cgroup_join_fds() once nothing will join any more
 * (a live sandbox holds fewer fds). */
void rt_cgroup_close_join_fds(struct rt_cgroup *cg);

/* Freeze (on) or thaw every process of the cgroup (v2 cgroup.freeze, v1
 * the freezer controller: -EOPNOTSUPP without it). Freezing waits up to
 * ~100 ms for the kernel to report it done. 0 or -errno. */
int rt_cgroup_freeze(struct rt_cgroup *cg, bool on);
/* 1 when the cgroup is (being) frozen, 0 when not, -errno. */
int rt_cgroup_frozen(const struct rt_cgroup *cg);

/* Send sig to every process in the cgroup. SIGKILL on v2 uses cgroup.kill
 * when the kernel has it; otherwise (and on v1) the cgroup is frozen, each
 * pid of cgroup.procs is signalled and the cgroup thawed, so that no
 * process can fork past the kill. Returns the number of processes
 * signalled (cgroup.kill: 0) or negative errno. */
int rt_cgroup_kill(struct rt_cgroup *cg, int sig);

/* Number of processes in the cgroup (reads cgroup.procs), or -errno. */
int rt_cgroup_nprocs(const struct rt_cgroup *cg);

/* Usage counters; fields the host cannot report stay 0. */
int rt_cgroup_usage(const struct rt_cgroup *cg, struct rt_usage *u);

/* Processes the kernel's OOM killer killed in the cgroup so far (v2
 * memory.events, v1 memory.oom_control "oom_kill N"). -ENOENT without a
 * memory controller, -ENODATA when the kernel does not count them. */
int rt_cgroup_oom_kills(const struct rt_cgroup *cg, uint64_t *ret);

/* Remove the cgroup dir(s). Waits briefly (bounded, ~1 s) for exiting
 * processes to leave; -EBUSY if some remain. Idempotent. */
int rt_cgroup_remove(struct rt_cgroup *cg, struct wr_err *e);

/* Close fds and free; does not remove anything. Accepts NULL. */
void rt_cgroup_free(struct rt_cgroup *cg);
DEFINE_TRIVIAL_CLEANUP_FUNC(struct rt_cgroup *, rt_cgroup_free);
