/* SPDX-License-Identifier: Apache-2.0 */
/* libFuzzer target for what resource detection reads from upstream
 * responses (src/egress/http-response.c): response heads, chunked bodies
 * and the top-level JSON string lookup. The first byte picks the function;
 * results are checked for bounds and for agreement with a re-run on an
 * exact-size copy (no read past the end). */

#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "egress/http-response.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        if (size < 1)
                return 0;
        uint8_t sel = data[0];
        size_t n = size - 1;
        uint8_t *buf = malloc(n ? n : 1);
        if (!buf)
                return 0;
        memcpy(buf, data + 1, n);
        switch (sel % 3) {
        case 0: {
                struct egress_resp_head h;
                int r = egress_resp_head_parse(buf, n, &h);
                if (r == 0 &&
                    (h.head_len > n || h.head_len < 16 || h.status < 100 || h.status > 599))
                        abort();
                /* a prefix ending before the head is incomplete, never accepted */
                if (r == 0 && egress_resp_head_parse(buf, h.head_len - 1, &h) != -EAGAIN &&
                    egress_resp_head_parse(buf, h.head_len - 1, &h) != -EBADMSG)
                        abort();
                break;
        }
        case 1: {
                long r = egress_dechunk(buf, n);
                if (r > (long) n)
                        abort();
                break;
        }
        default: {
                char out[64];
                memset(out, 'x', sizeof(out));
                long r = egress_json_top_string(buf, n, "html_url", out, sizeof(out));
                if (r >= 0 && (r >= (long) sizeof(out) || out[r] != 0 || strlen(out) > (size_t) r))
                        abort();
                break;
        }
        }
        free(buf);
        return 0;
}
