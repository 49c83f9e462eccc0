/* SPDX-License-Identifier: Apache-2.0 */
/* Hostname canonicalisation and IP-literal detection (host.h). Pure: no
 * I/O, no allocation, no locale. */
#include "net/host.h"

#include <arpa/inet.h>
#include <errno.h>
#include <string.h>

#include "net/net-internal.h"

/* Longest input looked at: anything longer cannot be canonical. */
#define HOST_INPUT_MAX 300

int net_ipv4_aton(const char *s, size_t len, struct net_addr *ret) {
        uint32_t parts[4];
        size_t n = 0, i = 0;
        memset(ret, 0, sizeof(*ret));
        if (!s || len == 0)
                return -EINVAL;
        for (;;) {
                if (i >= len || !net_is_digit((unsigned char) s[i]))
                        return -EINVAL;
                uint64_t v = 0;
                if (s[i] == '0' && i + 1 < len && (s[i + 1] == 'x' || s[i + 1] == 'X')) {
                        i += 2;
                        size_t start = i;
                        for (; i < len && net_is_hex((unsigned char) s[i]); i++) {
                                unsigned char c = net_lower((unsigned char) s[i]);
                                v = (v << 4) |
                                    (uint64_t) (net_is_digit(c) ? c - '0' : c - 'a' + 10);
                                if (v > 0xffffffffu)
                                        return -EINVAL;
                        }
                        if (i == start)
                                return -EINVAL; /* "0x" alone: inet_aton stops at 'x' */
                } else if (s[i] == '0') {
                        for (i++; i < len && s[i] >= '0' && s[i] <= '7'; i++) {
                                v = v * 8 + (uint64_t) (s[i] - '0');
                                if (v > 0xffffffffu)
                                        return -EINVAL;
                        }
                } else {
                        for (; i < len && net_is_digit((unsigned char) s[i]); i++) {
                                v = v * 10 + (uint64_t) (s[i] - '0');
                                if (v > 0xffffffffu)
                                        return -EINVAL;
                        }
                }
                if (i < len && s[i] == '.') {
                        if (n >= 3 || v > 0xff)
                                return -EINVAL;
                        parts[n++] = (uint32_t) v;
                        i++;
                        continue;
                }
                if (i != len)
                        return -EINVAL;
                parts[n++] = (uint32_t) v;
                break;
        }
        /* the last part fills the remaining 32 - 8 * (n - 1) bits */
        uint32_t last = parts[n - 1], val = 0;
        static const uint32_t last_max[] = {0xffffffffu, 0xffffffu, 0xffffu, 0xffu};
        if (last > last_max[n - 1])
                return -EINVAL;
        for (size_t k = 0; k + 1 < n; k++)
                val |= parts[k] << (24 - 8 * k);
        val |= last;
        uint8_t b[4] = {(uint8_t) (val >> 24), (uint8_t) (val >> 16), (uint8_t) (val >> 8),
                        (uint8_t) val};
        net_addr_from_ipv4(ret, b);
        return 0;
}

static int bad(struct wr_err *e, enum wr_fault fault, const char *s, size_t len, const char *why) {
        char q[NET_QUOTE_MAX];
        return err_setx(e, -EINVAL, WR_STATUS_INVALID_ARGUMENT, fault, "host %s: %s",
                        net_quote(s, len, q), why);
}

static bool zone_char(unsigned char c) {
        return net_is_alpha(c) || net_is_digit(c) || c == '.' || c == '_' || c == '~' || c == '-';
}

/* s[0..len) without brackets: an IPv6 address with an optional zone. */
static int parse_ipv6(const char *s, size_t len, bool bracketed, struct net_addr *ret) {
        char buf[INET6_ADDRSTRLEN];
        const char *pct = memchr(s, '%', len);
        size_t alen = pct ? (size_t) (pct - s) : len;
        if (pct) {
                const char *z = pct + 1, *end = s + len;
                /* RFC 6874: "%25" introduces the zone inside brackets */
                if (bracketed && end - z >= 2 && z[0] == '2' && z[1] == '5')
                        z += 2;
                if (z == end || end - z > 64)
                        return -EINVAL;
                for (const char *p = z; p < end; p++)
                        if (!zone_char((unsigned char) *p))
                                return -EINVAL;
        }
        if (alen == 0 || alen >= sizeof(buf))
                return -EINVAL;
        memcpy(buf, s, alen);
        buf[alen] = '\0';
        uint8_t b[16];
        if (inet_pton(AF_INET6, buf, b) != 1)
                return -EINVAL;
        net_addr_from_ipv6(ret, b);
        return 0;
}

static void set_ip(struct net_host *ret, const struct net_addr *a) {
        ret->kind = NET_HOST_IP;
        ret->addr = *a;
        net_addr_format(a, ret->name);
}

/* Does the label look like a number (all digits, or 0x + hex digits)? */
static bool numeric_label(const char *l, size_t n) {
        if (n >= 2 && l[0] == '0' && l[1] == 'x') {
                for (size_t i = 2; i < n; i++)
                        if (!net_is_hex((unsigned char) l[i]))
                                return false;
                return true;
        }
        for (size_t i = 0; i < n; i++)
                if (!net_is_digit((unsigned char) l[i]))
                        return false;
        return n > 0;
}

int net_host_canon(const char *s, size_t len, enum wr_fault fault, struct net_host *ret,
                   struct wr_err *e) {
        memset(ret, 0, sizeof(*ret));
        if (!s || len == 0)
                return bad(e, fault, "", 0, "empty host");
        if (len > HOST_INPUT_MAX)
                return bad(e, fault, s, len, "longer than 253 characters");

        for (size_t i = 0; i < len; i++) {
                unsigned char c = (unsigned char) s[i];
                if (c >= 0x80)
                        return bad(e, fault, s, len,
                                   "non-ASCII byte (IDN must be given in punycode, xn--...)");
                if (c == '\0')
                        return bad(e, fault, s, len, "NUL byte");
                if (c == '\r' || c == '\n')
                        return bad(e, fault, s, len, "CR or LF");
                if (c == ' ')
                        return bad(e, fault, s, len, "space");
                if (c < 0x20 || c == 0x7f)
                        return bad(e, fault, s, len, "control character");
        }

        struct net_addr a;
        if (s[0] == '[') {
                if (len < 3 || s[len - 1] != ']' || parse_ipv6(s + 1, len - 2, true, &a) < 0)
                        return bad(e, fault, s, len, "malformed bracketed IPv6 address");
                set_ip(ret, &a);
                return 0;
        }
        if (memchr(s, ':', len)) {
                if (parse_ipv6(s, len, false, &a) < 0)
                        return bad(e, fault, s, len,
                                   "':' in a name (neither a hostname nor an IPv6 address)");
                set_ip(ret, &a);
                return 0;
        }

        char buf[HOST_INPUT_MAX + 1];
        for (size_t i = 0; i < len; i++)
                buf[i] = (char) net_lower((unsigned char) s[i]);
        size_t n = len;
        if (n > 1 && buf[n - 1] == '.')
                n--; /* one trailing dot: the root, same host */
        buf[n] = '\0';

        if (net_ipv4_aton(buf, n, &a) >= 0) {
                set_ip(ret, &a);
                return 0;
        }

        for (size_t i = 0; i < n; i++) {
                unsigned char c = (unsigned char) buf[i];
                if (c == '%')
                        return bad(e, fault, s, len, "'%' (percent-encoding is not a hostname)");
                if (c == '@')
                        return bad(e, fault, s, len, "'@' (userinfo is not a hostname)");
                if (!(net_is_alpha(c) || net_is_digit(c) || c == '-' || c == '.'))
                        return bad(e, fault, s, len,
                                   "character outside letters, digits, '-' and '.'");
        }
        if (n > NET_HOST_MAX)
                return bad(e, fault, s, len, "longer than 253 characters");

        size_t start = 0;
        const char *last = buf;
        size_t last_len = 0;
        for (size_t i = 0; i <= n; i++) {
                if (i < n && buf[i] != '.')
                        continue;
                size_t l = i - start;
                if (l == 0)
                        return bad(e, fault, s, len, "empty label");
                if (l > NET_LABEL_MAX)
                        return bad(e, fault, s, len, "label longer than 63 characters");
                if (buf[start] == '-' || buf[i - 1] == '-')
                        return bad(e, fault, s, len, "label starts or ends with '-'");
                last = buf + start;
                last_len = l;
                start = i + 1;
        }
        if (numeric_label(last, last_len))
                return bad(e, fault, s, len, "numeric last label but not a valid IPv4 address");

        ret->kind = NET_HOST_NAME;
        memcpy(ret->name, buf, n + 1);
        return 0;
}

int net_host_canon_str(const char *s, struct net_host *ret, struct wr_err *e) {
        return net_host_canon(s, s ? strlen(s) : 0, WR_FAULT_CLIENT, ret, e);
}

bool net_host_is_canonical_name(const char *s) {
        struct net_host h;
        if (!s || net_host_canon_str(s, &h, NULL) < 0)
                return false;
        return h.kind == NET_HOST_NAME && strcmp(h.name, s) == 0;
}
