/* SPDX-License-Identifier: Apache-2.0 */
/* libFuzzer target: the policy wire form warrend sends to the proxy
 * (src/net/policy-wire.c). Properties: a decoded policy re-encodes to the
 * very same bytes (the form is canonical), stays within the limits, and
 * can be decided on. */
#include <stdlib.h>
#include <string.h>

#include "net/policy.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        struct net_policy *p = NULL;
        struct wr_err e = {0};
        int r = net_policy_deserialize(data, size, &p, &e);
        if (r < 0) {
                if (p || e.code != r || !e.msg[0])
                        abort();
                return 0;
        }
        if (p->n_hosts > NET_POLICY_HOSTS_MAX || p->n_allowed > NET_POLICY_ROUTES_MAX ||
            p->n_denied > NET_POLICY_ROUTES_MAX)
                abort();
        uint8_t *buf = NULL;
        size_t len = 0;
        if (net_policy_serialize(p, &buf, &len) != 0 || len != size || memcmp(buf, data, size))
                abort();
        free(buf);
        static const char *names[] = {"api.github.com", "github.com", "a.b.example.org"};
        for (size_t i = 0; i < 3; i++) {
                struct net_dest d = {.host = names[i], .port = 443};
                uint8_t b[4] = {140, 82, 112, (uint8_t) i};
                net_addr_from_ipv4(&d.addr, b);
                struct net_decision dec;
                if (net_policy_decide(p, &d, NULL, &dec) != 0)
                        abort();
                if (dec.verdict == NET_VERDICT_ALLOW &&
                    strncmp(dec.rule, "allowed_hosts", 13) == 0 &&
                    !net_policy_name_may_match(p, names[i]))
                        abort();
        }
        net_policy_free(p);
        return 0;
}
