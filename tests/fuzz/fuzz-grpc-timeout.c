/* SPDX-License-Identifier: Apache-2.0 */
/* libFuzzer target: grpc-timeout parsing; whatever parses must format back
 * to a value that parses to at least as long a timeout. */
#include <stdint.h>
#include <stdlib.h>

#include "rpc/grpc.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        uint64_t ms;
        if (grpc_timeout_parse((const char *) data, size, &ms) < 0)
                return 0;
        char buf[32];
        size_t n = grpc_timeout_format(ms, buf, sizeof(buf));
        uint64_t back;
        if (grpc_timeout_parse(buf, n, &back) < 0)
                abort();
        if (back < ms && back != 99999999ULL * 3600000ULL)
                abort();
        return 0;
}
