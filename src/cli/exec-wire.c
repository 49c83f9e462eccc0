/* SPDX-License-Identifier: Apache-2.0 */
#include "cli/exec-wire.h"

#include <stdbool.h>

#include "rpc/grpc.h"

int cli_exec_output_parse(const uint8_t *msg, size_t len, int *stream, const uint8_t **data,
                          size_t *n) {
        const uint8_t *p = msg, *end = msg + len;
        struct grpc_pb_field f;
        /* ExecResponse: exactly one field, stdout = 2 or stderr = 3. */
        if (grpc_pb_next(&p, end, &f) != 1 || f.type != 2 || (f.num != 2 && f.num != 3) || p != end)
                return 0;
        int which = f.num == 2 ? 1 : 2;
        /* ExecOutput: data = 1 (bytes), offset = 2 (uint64), each at most
         * once; an absent data is empty. */
        const uint8_t *q = f.data, *qend = f.data + f.len;
        const uint8_t *d = NULL;
        size_t dn = 0;
        bool seen_data = false, seen_offset = false;
        for (;;) {
                int r = grpc_pb_next(&q, qend, &f);
                if (r == 0)
                        break;
                if (r < 0)
                        return 0;
                if (f.num == 1 && f.type == 2 && !seen_data) {
                        seen_data = true;
                        d = f.data;
                        dn = f.len;
                } else if (f.num == 2 && f.type == 0 && !seen_offset)
                        seen_offset = true;
                else
                        return 0;
        }
        *stream = which;
        *data = d;
        *n = dn;
        return 1;
}
