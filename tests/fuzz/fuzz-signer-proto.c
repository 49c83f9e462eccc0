/* SPDX-License-Identifier: Apache-2.0 */
/* libFuzzer target for both directions of the warren-signer protocol:
 * signer_req_decode (what the signer reads from warren-egress, which talks
 * to sandboxes) and signer_reply_decode (what warren-egress reads from the
 * signer). The first byte picks the decoder. Whatever is accepted must
 * re-encode to the same bytes; every refusal carries a message. */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "signer/signer-proto.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static uint8_t out[SIGNER_MSG_MAX];
static struct signer_req req;
static struct signer_reply rep;

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
        struct wr_err e = {0};
        if (sel & 1) {
                int r = signer_reply_decode(buf, size, &rep, &e);
                if (r == 0) {
                        int n = rep.hdr.type == SIGNER_CERT
                                        ? signer_cert_encode(rep.hdr.id, rep.cert.der, rep.cert.len,
                                                             out, sizeof(out))
                                : rep.hdr.type == SIGNER_JWS_SIG
                                        ? signer_jws_sig_encode(rep.hdr.id, rep.jws_sig, out,
                                                                sizeof(out))
                                : rep.hdr.type == SIGNER_DATAKEY
                                        ? signer_datakey_encode(rep.hdr.id, rep.datakey.dek,
                                                                rep.datakey.wrapped, out,
                                                                sizeof(out))
                                        : signer_error_encode(rep.hdr.id, rep.error.code,
                                                              rep.error.msg, out, sizeof(out));
                        if (n != (int) size || memcmp(out, buf, size) != 0)
                                abort();
                } else if (e.msg[0] == '\0') {
                        abort();
                }
        } else {
                int r = signer_req_decode(buf, size, &req, &e);
                if (r == 0) {
                        struct wr_err ee = {0};
                        bool sign = req.hdr.type == SIGNER_SIGN;
                        int n = sign ? signer_sign_encode(req.hdr.id, req.host, req.key,
                                                          req.key_len, out, sizeof(out), &ee)
                                : req.hdr.type == SIGNER_JWS_SIGN
                                        ? signer_jws_sign_encode(req.hdr.id, req.in, req.in_len,
                                                                 out, sizeof(out), &ee)
                                        : signer_datakey_req_encode(
                                                  req.hdr.id, req.label, req.label_len,
                                                  req.hdr.type == SIGNER_DATAKEY_OPEN ? req.wrapped
                                                                                      : NULL,
                                                  out, sizeof(out), &ee);
                        if (n != (int) size || memcmp(out, buf, size) != 0)
                                abort();
                        if (sign && !signer_host_canonical(req.host))
                                abort();
                } else if (e.msg[0] == '\0') {
                        abort();
                }
        }
        free(buf);
        return 0;
}
