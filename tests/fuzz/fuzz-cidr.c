/* SPDX-License-Identifier: Apache-2.0 */
/* libFuzzer target: CIDR blocks, port ranges, address normalisation and the
 * built-in deny list (src/net/addr.c), and a decision on a fixed policy
 * (src/net/policy.c). Input: text up to the first NUL for the parsers; the
 * first 19 bytes also as a raw address (1 family byte, 16 address bytes, 2
 * port bytes). Properties: an accepted CIDR has no host bits and formats to
 * text that parses back to itself; an accepted port range is 1..65535 and
 * ordered; whatever the built-in list denies, every decision denies; a
 * normalized address is IPv4. */
#include <stdlib.h>
#include <string.h>

#include "net/addr.h"
#include "net/policy.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static struct net_policy *policy;

static void setup(void) {
        static const struct net_port_range pg[] = {{5432, 5432}}, web[] = {{80, 80}, {443, 443}};
        if (policy)
                return;
        if (net_policy_new(&policy) < 0 || net_policy_add_host(policy, "*", NULL) < 0 ||
            net_policy_add_route(policy, NET_ROUTES_ALLOWED, "10.0.0.0/8", pg, 1, NULL) < 0 ||
            net_policy_add_route(policy, NET_ROUTES_ALLOWED, "::/0", web, 2, NULL) < 0 ||
            net_policy_add_route(policy, NET_ROUTES_DENIED, "169.254.169.254/32", NULL, 0, NULL) <
                    0 ||
            net_policy_add_route(policy, NET_ROUTES_DENIED, "2001:db8::/32", NULL, 0, NULL) < 0)
                abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        setup();
        size_t tl = strnlen((const char *) data, size);
        if (tl < 200) {
                char s[200];
                memcpy(s, data, tl);
                s[tl] = '\0';
                struct net_cidr c, c2;
                char txt[NET_CIDR_STR_MAX];
                if (net_cidr_parse(s, &c, NULL) == 0) {
                        unsigned max = c.addr.family == AF_INET ? 32 : 128;
                        if (c.prefix > max)
                                abort();
                        if (net_cidr_parse(net_cidr_format(&c, txt), &c2, NULL) != 0 ||
                            !net_addr_equal(&c.addr, &c2.addr) || c.prefix != c2.prefix)
                                abort();
                        if (!net_cidr_contains(&c, &c.addr))
                                abort();
                }
                struct net_port_range pr;
                if (net_port_range_parse(s, &pr, NULL) == 0 &&
                    (pr.lo < 1 || pr.lo > pr.hi || pr.hi > 65535))
                        abort();
                struct net_addr a;
                if (net_addr_parse(s, &a) == 0) {
                        char back[NET_ADDR_STR_MAX];
                        struct net_addr b;
                        if (net_addr_parse(net_addr_format(&a, back), &b) != 0 ||
                            !net_addr_equal(&a, &b))
                                abort();
                }
        }
        if (size < 19)
                return 0;
        struct net_addr a, n;
        if (data[0] & 1)
                net_addr_from_ipv6(&a, data + 1);
        else
                net_addr_from_ipv4(&a, data + 1);
        uint16_t port = (uint16_t) (data[17] << 8 | data[18]);
        if (net_addr_normalize(&a, &n) && n.family != AF_INET)
                abort();
        struct net_addr own = a;
        uint16_t dport = 50051;
        struct net_host_deny hd = {&own, (data[0] & 2) ? 1 : 0, &dport, 1};
        bool builtin = net_builtin_denied(&a, port, &hd, NULL, NULL, 0);
        struct net_dest d = {
                .host = (data[0] & 4) ? "api.example.com" : NULL, .addr = a, .port = port};
        struct net_decision dec, open;
        if (net_policy_decide(policy, &d, &hd, &dec) != 0 ||
            net_policy_decide_open(&d, &hd, &open) != 0)
                abort();
        if (builtin && (dec.verdict != NET_VERDICT_DENY || open.verdict != NET_VERDICT_DENY))
                abort();
        if (dec.verdict == NET_VERDICT_ALLOW && net_addr_is_private(&a, NULL) &&
            strncmp(dec.rule, "allowed_routes", 14) != 0)
                abort(); /* private ranges only through routes */
        if (!dec.reason || !open.reason || strnlen(dec.rule, NET_RULE_MAX) == NET_RULE_MAX)
                abort();
        return 0;
}
