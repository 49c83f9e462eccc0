/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* The user namespace ranges of sandboxes (runtime.h: rt_sandbox_config
 * uid_base/uid_count): SBX_UIDS_SLOTS ranges of SBX_UIDS_COUNT host ids
 * each from SBX_UIDS_BASE, one per sandbox (or warm-pool entry) from its
 * create until its teardown finished. Past the range systemd gives
 * containers (524288..1879048191) and below its foreign range
 * (2147352576..) and 2^31: 1879048192 + slot * 65536. Given out round
 * robin (a freed range is reused last). Pure: no daemon state, the
 * loop thread's (not thread-safe). Ids inside <-> on the host: basic/idmap.h. */

#include <stdbool.h>
#include <stdint.h>

#define SBX_UIDS_BASE 1879048192u /* 0x70000000 */
#define SBX_UIDS_COUNT 65536u
#define SBX_UIDS_SLOTS 4094u
/* Where warrends on one host lock the ranges they use (one file per slot,
 * flock held while in use): two daemons never share a range. */
#define SBX_UIDS_LOCK_DIR "/run/warren/uid-ranges"

struct sbx_uids {
        uint8_t used[SBX_UIDS_SLOTS];
        uint32_t next; /* where the next search starts */
        uint32_t n_used;
};

/* A free slot, marked used: 0 and its index, or -ENOSPC. */
int sbx_uids_alloc(struct sbx_uids *u, int32_t *ret);
/* Free slot (< 0: nothing). */
void sbx_uids_release(struct sbx_uids *u, int32_t slot);
/* Mark the slot whose range starts at base used (recovery: a sandbox
 * recorded with it). Returns the slot, or -EINVAL (not the first id of a
 * range), -EEXIST (used already: the slot is returned in *ret all the
 * same). */
int sbx_uids_adopt(struct sbx_uids *u, uint32_t base, int32_t *ret);
/* The first host id of slot. */
static inline uint32_t sbx_uids_base(int32_t slot) {
        return SBX_UIDS_BASE + (uint32_t) slot * SBX_UIDS_COUNT;
}
