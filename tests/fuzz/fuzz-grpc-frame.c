/* SPDX-License-Identifier: Apache-2.0 */
/* libFuzzer target: the incremental gRPC message decoder. The first byte
 * picks a chunk size; the stream is fed in those chunks and must decode to
 * exactly what feeding it whole decodes to. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "rpc/grpc.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

struct acc {
        size_t n, bytes;
        uint64_t sum;
};

static int count(void *ud, uint8_t *msg, size_t len) {
        struct acc *a = ud;
        a->n++;
        a->bytes += len;
        for (size_t i = 0; i < len; i++)
                a->sum = a->sum * 31 + msg[i];
        free(msg);
        return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        if (size < 1)
                return 0;
        size_t step = (size_t) data[0] % 17 + 1;
        data++;
        size--;
        struct grpc_decoder whole = {.max = 1 << 16}, parts = {.max = 1 << 16};
        struct acc a = {0}, b = {0};
        int ra = grpc_decoder_feed(&whole, data, size, count, &a);
        int rb = 0;
        for (size_t off = 0; off < size && rb == 0; off += step)
                rb = grpc_decoder_feed(&parts, data + off, size - off < step ? size - off : step,
                                       count, &b);
        if (ra != rb || a.n != b.n || a.bytes != b.bytes || a.sum != b.sum)
                abort();
        if (ra == 0 && grpc_decoder_partial(&whole) != grpc_decoder_partial(&parts))
                abort();
        grpc_decoder_reset(&whole);
        grpc_decoder_reset(&parts);
        return 0;
}
