/* SPDX-License-Identifier: Apache-2.0 */
/* The user namespace ranges of sandboxes (uids.h). */
#include "sandbox/uids.h"

#include <errno.h>

int sbx_uids_alloc(struct sbx_uids *u, int32_t *ret) {
        if (u->n_used >= SBX_UIDS_SLOTS)
                return -ENOSPC;
        for (uint32_t i = 0; i < SBX_UIDS_SLOTS; i++) {
                uint32_t s = (u->next + i) % SBX_UIDS_SLOTS;
                if (!u->used[s]) {
                        u->used[s] = 1;
                        u->n_used++;
                        u->next = (s + 1) % SBX_UIDS_SLOTS;
                        *ret = (int32_t) s;
                        return 0;
                }
        }
        return -ENOSPC;
}

void sbx_uids_release(struct sbx_uids *u, int32_t slot) {
        if (slot < 0 || (uint32_t) slot >= SBX_UIDS_SLOTS || !u->used[slot])
                return;
        u->used[slot] = 0;
        u->n_used--;
}

int sbx_uids_adopt(struct sbx_uids *u, uint32_t base, int32_t *ret) {
        if (base < SBX_UIDS_BASE || (base - SBX_UIDS_BASE) % SBX_UIDS_COUNT != 0 ||
            (base - SBX_UIDS_BASE) / SBX_UIDS_COUNT >= SBX_UIDS_SLOTS)
                return -EINVAL;
        uint32_t s = (base - SBX_UIDS_BASE) / SBX_UIDS_COUNT;
        *ret = (int32_t) s;
        if (u->used[s])
                return -EEXIST;
        u->used[s] = 1;
        u->n_used++;
        return 0;
}
