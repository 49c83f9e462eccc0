/* SPDX-License-Identifier: Apache-2.0 */
/* libFuzzer target for the sandbox resolver's DNS handling: the query
 * parser (hostile bytes from a sandbox), the error answers built from a
 * parsed query, and the check of an upstream answer. Invariants: an
 * accepted query has one uncompressed question no longer than 255 bytes,
 * its error answer checks as an answer to it, and the canonical name (if
 * any) is what net_host_canon makes of the text. */

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "egress/egress-dns.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        uint8_t *buf = malloc(size ? size : 1);
        if (!buf)
                return 0;
        memcpy(buf, data, size);
        struct egress_dns_query q;
        struct wr_err e = {0};
        if (egress_dns_query_parse(buf, size, &q, &e) == 0) {
                if (q.question_end > size || q.question_end < 17 || q.name_len > 254 ||
                    strlen(q.name) > q.name_len || q.qclass != 1)
                        abort();
                uint8_t out[600];
                int n = egress_dns_error_answer(buf, &q, EGRESS_DNS_RCODE_NXDOMAIN, out,
                                                sizeof(out));
                if (n != (int) q.question_end)
                        abort();
                if (egress_dns_answer_check(out, (size_t) n, q.id, buf, &q) != 0)
                        abort();
                if (q.canon_ok) {
                        struct net_host h;
                        if (net_host_canon(q.name, q.name_len, WR_FAULT_WORKLOAD, &h, NULL) != 0 ||
                            strcmp(h.name, q.canon.name) != 0)
                                abort();
                }
                /* the input as an answer to itself: must not crash */
                (void) egress_dns_answer_check(buf, size, q.id, buf, &q);
        } else {
                if (e.msg[0] == '\0')
                        abort();
                uint8_t out[12];
                if (egress_dns_formerr(buf, size, out, sizeof(out)) != 12)
                        abort();
        }
        free(buf);
        return 0;
}
