/* SPDX-License-Identifier: Apache-2.0 */
/* libFuzzer target: a sandbox's /etc/passwd and /etc/group (written by the
 * sandbox, read by warrend for `exec --user NAME`). Input: a name up to
 * the first NUL, then the file. */
#include <stdlib.h>
#include <string.h>

#include "sandbox/user.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        const uint8_t *nul = memchr(data, 0, size);
        if (!nul || nul - data > 255)
                return 0;
        char name[256];
        memcpy(name, data, (size_t) (nul - data));
        name[nul - data] = 0;
        const char *buf = (const char *) nul + 1;
        size_t len = size - (size_t) (nul - data) - 1;

        struct sbx_user u;
        memset(&u, 0xaa, sizeof(u));
        if (sbx_passwd_find(buf, len, name, 0, &u) == 1) {
                if (u.uid == UINT32_MAX || u.gid == UINT32_MAX)
                        abort();
                size_t h = strnlen(u.home, sizeof(u.home));
                if (h == sizeof(u.home) || (h && u.home[0] != '/'))
                        abort();
                /* The same entry is found by its uid (or an earlier one
                 * with that uid). */
                struct sbx_user v;
                if (sbx_passwd_find(buf, len, NULL, u.uid, &v) != 1 || v.uid != u.uid)
                        abort();
        }
        uint32_t gid = 7;
        if (sbx_group_find(buf, len, name, &gid) == 1 && gid == UINT32_MAX)
                abort();
        return 0;
}
