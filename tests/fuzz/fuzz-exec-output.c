/* SPDX-License-Identifier: Apache-2.0 */
/* libFuzzer target: the CLI's in-place reading of Exec output messages
 * (from the server: untrusted by the client) and the protobuf wire reader
 * under it. Differential: whatever cli_exec_output_parse accepts,
 * protobuf-c must parse to the same stream and bytes. */
#include <stdlib.h>
#include <string.h>

#include "cli/exec-wire.h"
#include "rpc/grpc.h"
#include "warren/v1/sandboxes.pb-c.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        /* The wire reader stays inside its input and always advances. */
        const uint8_t *p = data, *end = data + size;
        struct grpc_pb_field f;
        for (;;) {
                const uint8_t *before = p;
                int r = grpc_pb_next(&p, end, &f);
                if (r <= 0)
                        break;
                if (p <= before || p > end || f.num == 0)
                        abort();
                if (f.type == 2 && (f.data < data || f.data + f.len > end))
                        abort();
        }

        int stream;
        const uint8_t *d;
        size_t n;
        if (!cli_exec_output_parse(data, size, &stream, &d, &n))
                return 0;
        Warren__V1__ExecResponse *m = warren__v1__exec_response__unpack(NULL, size, data);
        if (!m)
                abort();
        const Warren__V1__ExecOutput *o = NULL;
        if (stream == 1 && m->kind_case == WARREN__V1__EXEC_RESPONSE__KIND_STDOUT)
                o = m->stdout;
        else if (stream == 2 && m->kind_case == WARREN__V1__EXEC_RESPONSE__KIND_STDERR)
                o = m->stderr;
        if (!o || o->data.len != n || (n && memcmp(o->data.data, d, n) != 0))
                abort();
        warren__v1__exec_response__free_unpacked(m, NULL);
        return 0;
}
