/* SPDX-License-Identifier: Apache-2.0 */
/* libFuzzer target for relay_frame_parse (src/k8s/relay-frame.h): the
 * frames warren-relay sends warrend come from inside a Pod. The first
 * byte picks the datagram bound (what a Pod may send, or what warrend
 * may); frames are parsed back to back like the engine does. Anything
 * accepted must satisfy the documented invariants.
 *   build-fuzz/tests/fuzz/fuzz-relay-frame -max_total_time=60 tests/fuzz/corpus/relay-frame */

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "init/ctl-proto.h"
#include "k8s/relay-frame.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        if (size < 1)
                return 0;
        size_t msg_max = data[0] & 1 ? CTL_MSG_MAX : CTL_REPLY_MAX;
        data++;
        size--;
        uint8_t *buf = malloc(size ? size : 1);
        if (!buf)
                return 0;
        memcpy(buf, data, size);
        size_t off = 0;
        while (off < size) {
                struct relay_frame f;
                int k = relay_frame_parse(buf + off, size - off, msg_max, &f);
                if (k <= 0)
                        break;
                if ((size_t) k > size - off || (size_t) k != RELAY_HDR_LEN + f.len ||
                    (size_t) k > relay_frame_max(msg_max))
                        abort();
                switch (f.type) {
                case RELAY_MSG:
                        if (f.nstreams > RELAY_STREAMS_MAX || f.payload_len > msg_max ||
                            f.payload_len < sizeof(struct ctl_hdr) || f.payload < buf + off ||
                            f.payload + f.payload_len != buf + off + k)
                                abort();
                        for (uint32_t i = 0; i < f.nstreams; i++)
                                if (!f.streams[i].id || f.streams[i].kind < RELAY_KIND_IN ||
                                    f.streams[i].kind > RELAY_KIND_PTY)
                                        abort();
                        break;
                case RELAY_DATA:
                        if (!f.stream || !f.payload_len || f.payload_len > RELAY_DATA_MAX)
                                abort();
                        break;
                case RELAY_CREDIT:
                        if (!f.credit || f.credit > RELAY_WINDOW)
                                abort();
                        break;
                case RELAY_HELLO:
                        if (!f.id[0] || strlen(f.token) != RELAY_TOKEN_LEN)
                                abort();
                        break;
                default:
                        break;
                }
                off += (size_t) k;
        }
        free(buf);
        return 0;
}
