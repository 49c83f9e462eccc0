/* SPDX-License-Identifier: Apache-2.0 */
/* libFuzzer target: the rules wire form (net_rules_parse; the bytes come
 * over warren-egress's control socket and are not trusted), and what a
 * parsed rule set does with a request: matching and the rewritten head.
 * Input: u32 length L, L bytes of wire form, then an HTTP request head.
 * Properties: a parsed set serializes to the same bytes; the rewritten
 * head parses again as a request with the same method, and holds no
 * header line the original did not frame (no CR/LF injection). */
#include <stdlib.h>
#include <string.h>

#include "net/rules.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        if (size < 4)
                return 0;
        size_t l = (size_t) data[0] | (size_t) data[1] << 8 | (size_t) data[2] << 16 |
                   (size_t) data[3] << 24;
        if (l > size - 4)
                l = size - 4;
        const uint8_t *wire = data + 4, *req = data + 4 + l;
        size_t req_len = size - 4 - l;
        struct net_rules rs;
        struct wr_err e = {0};
        if (net_rules_parse(wire, l, &rs, &e) < 0)
                return 0;
        uint8_t *again = NULL;
        size_t again_len = 0;
        if (net_rules_serialize(&rs, &again, &again_len) < 0 || again_len != l ||
            memcmp(again, wire, l) != 0)
                abort();
        free(again);

        static struct net_http_head h, h2;
        if (net_http_head_parse((const char *) req, req_len, &h, &e) == 0 && h.has_host &&
            h.host.kind == NET_HOST_NAME) {
                const struct net_host_rules *hr = net_rules_for_host(&rs, h.host.name);
                const struct net_rule *rule = NULL;
                for (size_t i = 0; hr && i < hr->n_rules && !rule; i++) {
                        int m = net_rule_match(&hr->rules[i], &h, &e);
                        if (m < 0)
                                break;
                        if (m == 1)
                                rule = &hr->rules[i];
                }
                static char out[1 << 17];
                size_t n = 0;
                const char *to = rule && rule->has_forward ? rule->fwd.host.name : h.host.name;
                if (net_request_rewrite(&rs, rule, &h, h.host.name, to, 443, true, out, sizeof(out),
                                        &n) == 0) {
                        int r = net_http_head_parse(out, n, &h2, &e);
                        /* too many fields after the rule's own: -E2BIG is fine */
                        if (r != 0 && r != -E2BIG && rule == NULL)
                                abort();
                        if (r == 0 && (h2.head_len != n || h2.method.n != h.method.n ||
                                       memcmp(h2.method.p, h.method.p, h.method.n) != 0))
                                abort();
                }
        }
        net_rules_clear(&rs);
        return 0;
}
