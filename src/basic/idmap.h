/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* Ids of a sandbox in a user namespace: ids 0..count-1 inside are
 * base..base+count-1 on the host (runtime.h: uid_base/uid_count; the same
 * map for gids). base 0: no user namespace, the same ids both sides.
 * For host-side code that reads or writes a sandbox's files (the file
 * API, snapshots) and must show and take ids as the sandbox sees them. */

#include <stdint.h>

#define WR_ID_OVERFLOW 65534u /* the kernel's overflowuid/gid: "nobody" */

/* The id inside of host id h: the overflow id when h is not mapped. */
static inline uint32_t wr_id_inside(uint32_t h, uint32_t base, uint32_t count) {
        if (!base)
                return h;
        return h >= base && h - base < count ? h - base : WR_ID_OVERFLOW;
}

/* The host id of id i inside: ids past the range become the overflow id
 * inside (they cannot exist there). */
static inline uint32_t wr_id_host(uint32_t i, uint32_t base, uint32_t count) {
        if (!base)
                return i;
        return base + (i < count ? i : WR_ID_OVERFLOW);
}
