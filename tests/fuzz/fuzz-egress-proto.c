/* SPDX-License-Identifier: Apache-2.0 */
/* libFuzzer target for both directions of the warren-egress control
 * protocol: egress_req_decode (what the confined process reads from
 * warrend) and egress_msg_decode (what warrend reads from the confined
 * process, which a compromised proxy may forge). The first byte picks the
 * decoder. Whatever is accepted must re-encode to the same bytes. */

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "egress/egress-proto.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        if (size < 1)
                return 0;
        uint8_t sel = data[0];
        data++;
        size--;
        uint8_t *buf = malloc(size ? size : 1);
        if (!buf)
                return 0;
        memcpy(buf, data, size);

        if (sel & 1) {
                struct egress_msg m;
                struct wr_err e = {0};
                if (egress_msg_decode(buf, size, &m, &e) == 0) {
                        uint8_t out[sizeof(struct egress_hdr) + sizeof(struct egress_event)];
                        int n = egress_msg_encode(m.hdr.type, m.hdr.id,
                                                  buf + sizeof(struct egress_hdr), m.hdr.len, out,
                                                  sizeof(out));
                        if (n != (int) size || memcmp(out, buf, size) != 0)
                                abort();
                }
        } else {
                struct egress_req r;
                struct wr_err e = {0};
                if (egress_req_decode(buf, size, &r, &e) == 0) {
                        if (r.hdr.type == EGRESS_POLICY_SET) {
                                uint8_t *out;
                                size_t len;
                                if (egress_policy_set_encode(r.hdr.id, &r.set, &out, &len) != 0)
                                        abort();
                                if (len != size || memcmp(out, buf, size) != 0)
                                        abort();
                                free(out);
                        } else if (r.hdr.type == EGRESS_POLICY_DEL) {
                                uint8_t out[128];
                                int n = egress_policy_del_encode(r.hdr.id, r.sandbox, out,
                                                                 sizeof(out));
                                if (n != (int) size || memcmp(out, buf, size) != 0)
                                        abort();
                        }
                        egress_req_done(&r);
                } else if (e.msg[0] == '\0') {
                        abort(); /* every refusal carries a message */
                }
        }
        free(buf);
        return 0;
}
