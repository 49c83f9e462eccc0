/* SPDX-License-Identifier: Apache-2.0 */
/* libFuzzer target for the request-body framing of kept-alive plain-HTTP
 * connections (src/egress/http-stream.c): bytes a sandbox sends. The first
 * byte picks chunked or a Content-Length and how the input is cut into
 * reads; the result must not depend on the cuts. */

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "egress/http-stream.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int run(const uint8_t *buf, size_t size, uint8_t sel, size_t step, size_t *ret_used) {
        struct egress_http_body b;
        egress_http_body_start(&b, sel & 1, (sel >> 1) * 37u);
        size_t off = 0;
        while (off < size && b.state != EGRESS_HTTP_AT_HEAD) {
                size_t used, n = size - off < step ? size - off : step;
                if (egress_http_body_scan(&b, buf + off, n, &used) < 0)
                        return -1;
                if (used > n)
                        abort();
                off += used;
                if (used < n && b.state != EGRESS_HTTP_AT_HEAD)
                        abort(); /* stops early only at the end of the body */
        }
        *ret_used = off;
        return b.state == EGRESS_HTTP_AT_HEAD ? 1 : 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        if (size < 1)
                return 0;
        uint8_t sel = data[0];
        uint8_t *buf = malloc(size - 1 ? size - 1 : 1);
        if (!buf)
                return 0;
        memcpy(buf, data + 1, size - 1);
        size_t u1 = 0, u2 = 0;
        int r1 = run(buf, size - 1, sel, size, &u1);
        int r2 = run(buf, size - 1, sel, 1 + (sel % 5), &u2);
        if (r1 != r2 || (r1 >= 0 && u1 != u2))
                abort();
        free(buf);
        return 0;
}
