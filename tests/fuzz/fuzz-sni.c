/* SPDX-License-Identifier: Apache-2.0 */
/* libFuzzer target: the TLS ClientHello reader (src/net/sni.c), fed the
 * first bytes a sandbox sends. Properties: a complete hello consumed no
 * more than it was given and one byte less is "need more"; "need more"
 * always asks for at least one byte; an SNI is canonical; errors carry a
 * message. */
#include <stdlib.h>
#include <string.h>

#include "net/sni.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        struct net_tls_hello h;
        struct wr_err e = {0};
        int r = net_tls_sni(data, size, &h, &e);
        if (r == 0) {
                if (h.consumed < 9 || h.consumed > size)
                        abort();
                if (h.has_sni && h.sni.kind == NET_HOST_NAME &&
                    !net_host_is_canonical_name(h.sni.name))
                        abort();
                struct net_tls_hello h2;
                if (net_tls_sni(data, h.consumed - 1, &h2, NULL) != -EAGAIN || h2.need < 1)
                        abort();
        } else if (r == -EAGAIN) {
                if (h.need < 1 || h.has_sni)
                        abort();
        } else if (r == -EPROTO || r == -EBADMSG || r == -E2BIG) {
                if (e.code != r || !e.msg[0] || h.has_sni)
                        abort();
        } else {
                abort();
        }
        return 0;
}
