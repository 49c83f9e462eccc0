/* SPDX-License-Identifier: Apache-2.0 */
/* libFuzzer target: hostname canonicalisation and host patterns
 * (src/net/host.c, src/net/policy.c). Input: a host up to the first '\n',
 * then a pattern. Properties:
 *  - an accepted name is canonical (idempotent, LDH lower case, <= 253);
 *  - an accepted IP's text parses back to the same address;
 *  - whatever libc inet_aton accepts (no whitespace) is an IP, the same one:
 *    nothing a resolver would read as an address passes as a name;
 *  - a pattern that matches a name agrees with the pattern's definition. */
#include <arpa/inet.h>
#include <stdlib.h>
#include <string.h>

#include "net/host.h"
#include "net/policy.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_host(const char *s, size_t len) {
        struct net_host h;
        int r = net_host_canon(s, len, WR_FAULT_WORKLOAD, &h, NULL);
        if (r == 0 && h.kind == NET_HOST_NAME) {
                size_t n = strlen(h.name);
                if (n == 0 || n > NET_HOST_MAX || !net_host_is_canonical_name(h.name))
                        abort();
                for (size_t i = 0; i < n; i++) {
                        char c = h.name[i];
                        if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' ||
                              c == '.'))
                                abort();
                }
        } else if (r == 0) {
                if (h.kind != NET_HOST_IP)
                        abort();
                struct net_addr a;
                if (net_addr_parse(h.name, &a) < 0 || !net_addr_equal(&a, &h.addr))
                        abort();
        } else if (r != -EINVAL) {
                abort();
        }

        /* differential: libc's reading of the same bytes as an IPv4 literal */
        if (len == 0 || len > 300 || memchr(s, '\0', len))
                return;
        for (size_t i = 0; i < len; i++)
                if (s[i] == ' ' || (s[i] >= '\t' && s[i] <= '\r'))
                        return; /* inet_aton ignores what follows whitespace */
        char buf[301];
        memcpy(buf, s, len);
        buf[len] = '\0';
        struct in_addr ia;
        if (inet_aton(buf, &ia)) {
                if (r != 0 || h.kind != NET_HOST_IP || h.addr.family != AF_INET ||
                    memcmp(&ia, h.addr.bytes, 4) != 0)
                        abort();
        }
        unsigned char v6[16];
        if (inet_pton(AF_INET6, buf, v6) == 1) {
                if (r != 0 || h.kind != NET_HOST_IP || memcmp(v6, h.addr.bytes, 16) != 0)
                        abort();
        }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        const char *s = (const char *) data;
        const char *nl = memchr(s, '\n', size);
        size_t hlen = nl ? (size_t) (nl - s) : size;
        check_host(s, hlen);
        if (!nl)
                return 0;

        const char *pat_s = nl + 1;
        size_t plen = size - hlen - 1;
        if (plen > 300 || memchr(pat_s, '\0', plen))
                return 0;
        char pbuf[301];
        memcpy(pbuf, pat_s, plen);
        pbuf[plen] = '\0';
        struct net_host_pattern pat;
        if (net_host_pattern_parse(pbuf, &pat, NULL) < 0)
                return 0;
        char txt[NET_HOST_MAX + 3];
        struct net_host_pattern again;
        if (net_host_pattern_parse(net_host_pattern_format(&pat, txt, sizeof(txt)), &again, NULL) <
                    0 ||
            again.kind != pat.kind || strcmp(again.name, pat.name) != 0)
                abort();
        if (pat.kind == NET_PATTERN_SUFFIX && !strchr(pat.name, '.'))
                abort(); /* "*.com" must have been refused */
        struct net_host h;
        if (net_host_canon(s, hlen, WR_FAULT_WORKLOAD, &h, NULL) < 0 || h.kind != NET_HOST_NAME)
                return 0;
        bool m = net_host_pattern_match(&pat, h.name);
        size_t n = strlen(h.name), a = strlen(pat.name);
        bool want = pat.kind == NET_PATTERN_ANY ||
                    (pat.kind == NET_PATTERN_EXACT && strcmp(h.name, pat.name) == 0) ||
                    (pat.kind == NET_PATTERN_SUFFIX && n > a && h.name[n - a - 1] == '.' &&
                     memcmp(h.name + n - a, pat.name, a) == 0);
        if (m != want)
                abort();
        return 0;
}
