/* SPDX-License-Identifier: Apache-2.0 */
/* libFuzzer target for sbx_spool_meta_decode: the .meta file of an exec's
 * spool (sandbox/exec-spool.h), read back by a restarted warrend. Anything
 * accepted must satisfy the documented invariants and re-encode to the
 * same header and argv. */

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "sandbox/exec-spool.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        /* Copy so that reads past the end are caught by ASan. */
        uint8_t *buf = malloc(size ? size : 1);
        if (!buf)
                return 0;
        memcpy(buf, data, size);
        struct sbx_spool_meta m;
        if (sbx_spool_meta_decode(buf, size, &m) == 0) {
                if (!m.argv || !m.argv[0] || !m.argv[0][0] || m.argv[m.hdr.argc])
                        abort();
                for (size_t i = 0; i < m.n_runs; i++)
                        if ((m.runs[i].stream != 1 && m.runs[i].stream != 2) ||
                            (i && m.runs[i].offset < m.runs[i - 1].offset))
                                abort();
                uint8_t *out = NULL;
                int n = sbx_spool_meta_encode(&m.hdr, m.argv, &out);
                if (n < 0 || (size_t) n > size || memcmp(out, buf, (size_t) n) != 0)
                        abort();
                free(out);
                sbx_spool_meta_done(&m);
        }
        free(buf);
        return 0;
}
