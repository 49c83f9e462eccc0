/* SPDX-License-Identifier: Apache-2.0 */
/* libFuzzer target: grpc-message percent-decoding (untrusted, from peers)
 * and encoding; encode(x) is printable ASCII and decode(encode(x)) == x. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "rpc/grpc.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        char *dec = NULL, *enc = NULL, *back = NULL;
        size_t dec_len, back_len;
        if (grpc_percent_decode((const char *) data, size, &dec, &dec_len) < 0)
                return 0;
        if (dec_len > size)
                abort();
        free(dec);
        if (grpc_percent_encode((const char *) data, size, &enc) < 0)
                return 0;
        for (const char *p = enc; *p; p++)
                if (*p < 0x20 || *p > 0x7e)
                        abort();
        if (grpc_percent_decode(enc, strlen(enc), &back, &back_len) < 0) {
                free(enc);
                return 0;
        }
        if (back_len != size || memcmp(back, data, size) != 0)
                abort();
        free(enc);
        free(back);
        return 0;
}
