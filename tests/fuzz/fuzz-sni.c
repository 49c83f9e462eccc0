/* SPDX-License-Identifier: Apache-2.0 */
/* libFuzzer target: the TLS ClientHello reader (src/net/sni.c), fed the
 * first bytes a sandbox sends.
 *
 * Input byte 0 selects the mode:
 *   0x16  the input is the byte stream itself. Properties: a complete hello
 *         consumed no more than it was given and one byte less is "need
 *         more"; "need more" asks for at least one byte and never has an
 *         SNI; an SNI is canonical; errors carry a message.
 *   else  byte 0 is a record size (1..255, 0 = 256), the rest a handshake message
 *         (its length field fixed up to match). It is wrapped once in one
 *         record and once cut into records of that size: both must give
 *         the same answer (how a hello is cut never changes what it says),
 *         unless the cut needs more records than allowed. */
#include <stdlib.h>
#include <string.h>

#include "net/sni.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(const uint8_t *data, size_t size, struct net_tls_hello *h, int *code) {
        struct wr_err e = {0};
        int r = net_tls_sni(data, size, h, &e);
        *code = r;
        if (r == 0) {
                if (h->consumed < 9 || h->consumed > size)
                        abort();
                if (h->has_sni && h->sni.kind == NET_HOST_NAME &&
                    !net_host_is_canonical_name(h->sni.name))
                        abort();
                struct net_tls_hello h2;
                if (net_tls_sni(data, h->consumed - 1, &h2, NULL) != -EAGAIN || h2.need < 1)
                        abort();
        } else if (r == -EAGAIN) {
                if (h->need < 1 || h->has_sni)
                        abort();
        } else if (r == -EPROTO || r == -EBADMSG || r == -E2BIG) {
                if (e.code != r || !e.msg[0] || h->has_sni)
                        abort();
        } else {
                abort();
        }
}

static size_t wrap(uint8_t *out, const uint8_t *hs, size_t n, size_t frag) {
        size_t o = 0;
        for (size_t off = 0; off < n; off += frag) {
                size_t k = n - off < frag ? n - off : frag;
                out[o++] = 22;
                out[o++] = 3;
                out[o++] = 1;
                out[o++] = (uint8_t) (k >> 8);
                out[o++] = (uint8_t) k;
                memcpy(out + o, hs + off, k);
                o += k;
        }
        return o;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        struct net_tls_hello h, h1;
        int r, r1;
        if (size == 0 || data[0] == 22) {
                check(data, size, &h, &r);
                return 0;
        }
        size_t frag = data[0] ? data[0] : 256, n = size - 1;
        if (n < 4 || n > 16384)
                return 0;
        uint8_t *hs = malloc(n);
        memcpy(hs, data + 1, n);
        hs[1] = (uint8_t) ((n - 4) >> 16);
        hs[2] = (uint8_t) ((n - 4) >> 8);
        hs[3] = (uint8_t) (n - 4);
        uint8_t *one = malloc(n + 5), *cut = malloc(n + 5 * (n / frag + 1));
        size_t n_one = wrap(one, hs, n, n), n_cut = wrap(cut, hs, n, frag);
        check(one, n_one, &h1, &r1);
        check(cut, n_cut, &h, &r);
        bool too_many = (n + frag - 1) / frag > NET_TLS_RECORDS_MAX;
        if (!too_many) {
                if (r != r1)
                        abort();
                if (r == 0 && (h.has_sni != h1.has_sni || h.has_ech != h1.has_ech ||
                               h.has_alpn != h1.has_alpn || h.alpn_h2 != h1.alpn_h2 ||
                               strcmp(h.sni.name, h1.sni.name) != 0))
                        abort();
        } else if (r != -E2BIG && r != r1) {
                abort();
        }
        free(hs);
        free(one);
        free(cut);
        return 0;
}
