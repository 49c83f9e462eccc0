/* SPDX-License-Identifier: Apache-2.0 */
/* libFuzzer target: placeholder substitution (net_placeholders_replace)
 * against a plain reference of the seed's rules: at each position the
 * longest token that starts there, else the byte itself; non-recursive.
 * Input: up to 8 tokens and values, each "token\0value\0", then "\0\0"
 * and the header value. */
#include <stdlib.h>
#include <string.h>

#include "net/rules.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static size_t reference(const char *in, size_t n, const struct net_placeholder *p, size_t np,
                        char *out) {
        size_t o = 0;
        for (size_t i = 0; i < n;) {
                size_t best = SIZE_MAX;
                for (size_t k = 0; k < np; k++)
                        if (p[k].token_len <= n - i &&
                            !memcmp(in + i, p[k].token, p[k].token_len) &&
                            (best == SIZE_MAX || p[k].token_len > p[best].token_len))
                                best = k;
                if (best == SIZE_MAX) {
                        out[o++] = in[i++];
                } else {
                        memcpy(out + o, p[best].value, p[best].len);
                        o += p[best].len;
                        i += p[best].token_len;
                }
        }
        return o;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        struct net_placeholder p[8];
        size_t np = 0, off = 0;
        while (np < 8 && off < size) {
                const uint8_t *t = data + off;
                const uint8_t *z = memchr(t, 0, size - off);
                if (!z || z == t)
                        break; /* "\0": end of the list */
                const uint8_t *v = z + 1;
                const uint8_t *z2 = memchr(v, 0, (size_t) (data + size - v));
                if (!z2)
                        return 0;
                p[np] = (struct net_placeholder){.token = (char *) t,
                                                 .token_len = (size_t) (z - t),
                                                 .value = (uint8_t *) v,
                                                 .len = (size_t) (z2 - v)};
                np++;
                off = (size_t) (z2 + 1 - data);
        }
        if (off < size && data[off] == 0)
                off++;
        const char *in = (const char *) data + off;
        size_t n = size - off;
        size_t maxv = 0;
        for (size_t k = 0; k < np; k++)
                if (p[k].len > maxv)
                        maxv = p[k].len;
        size_t cap = n * (maxv + 1) + 1;
        char *a = malloc(cap), *b = malloc(cap);
        struct net_ph_list l = {p, np};
        size_t an = 0;
        if (net_placeholders_replace(in, n, &l, 1, a, cap, &an) != 0)
                abort();
        size_t bn = reference(in, n, p, np, b);
        if (an != bn || memcmp(a, b, an) != 0)
                abort();
        /* one byte short of the result: -E2BIG, never an overflow */
        if (an > 0) {
                char *c = malloc(an - 1 ? an - 1 : 1);
                size_t cn;
                if (net_placeholders_replace(in, n, &l, 1, c, an - 1, &cn) != -E2BIG)
                        abort();
                free(c);
        }
        free(a);
        free(b);
        return 0;
}
