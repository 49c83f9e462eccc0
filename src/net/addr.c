/* SPDX-License-Identifier: Apache-2.0 */
/* Addresses, CIDR blocks, port ranges, the built-in deny list (addr.h).
 * Pure: no I/O, no allocation. */
#include "net/addr.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "net/net-internal.h"

void net_addr_from_ipv4(struct net_addr *ret, const uint8_t b[4]) {
        memset(ret, 0, sizeof(*ret));
        ret->family = AF_INET;
        memcpy(ret->bytes, b, 4);
}

void net_addr_from_ipv6(struct net_addr *ret, const uint8_t b[16]) {
        memset(ret, 0, sizeof(*ret));
        ret->family = AF_INET6;
        memcpy(ret->bytes, b, 16);
}

int net_addr_parse(const char *s, struct net_addr *ret) {
        uint8_t b[16];
        memset(ret, 0, sizeof(*ret));
        if (!s)
                return -EINVAL;
        if (strchr(s, ':')) {
                if (inet_pton(AF_INET6, s, b) != 1)
                        return -EINVAL;
                net_addr_from_ipv6(ret, b);
                return 0;
        }
        if (inet_pton(AF_INET, s, b) != 1)
                return -EINVAL;
        net_addr_from_ipv4(ret, b);
        return 0;
}

const char *net_addr_format(const struct net_addr *a, char out[static NET_ADDR_STR_MAX]) {
        if (!a || (a->family != AF_INET && a->family != AF_INET6) ||
            !inet_ntop(a->family, a->bytes, out, NET_ADDR_STR_MAX))
                snprintf(out, NET_ADDR_STR_MAX, "?");
        return out;
}

bool net_addr_equal(const struct net_addr *a, const struct net_addr *b) {
        if (a->family != b->family)
                return false;
        return memcmp(a->bytes, b->bytes, a->family == AF_INET ? 4 : 16) == 0;
}

static bool all_zero(const uint8_t *b, size_t n) {
        for (size_t i = 0; i < n; i++)
                if (b[i])
                        return false;
        return true;
}

bool net_addr_normalize(const struct net_addr *a, struct net_addr *ret) {
        struct net_addr in = *a; /* a and ret may alias */
        *ret = in;
        if (in.family != AF_INET6)
                return false;
        const uint8_t *b = in.bytes;
        static const uint8_t nat64[12] = {0x00, 0x64, 0xff, 0x9b};
        const uint8_t *v4 = NULL;
        if (all_zero(b, 10) && b[10] == 0xff && b[11] == 0xff)
                v4 = b + 12; /* ::ffff:a.b.c.d, IPv4-mapped */
        else if (all_zero(b, 8) && b[8] == 0xff && b[9] == 0xff && b[10] == 0 && b[11] == 0)
                v4 = b + 12; /* ::ffff:0:a.b.c.d, IPv4-translated (SIIT) */
        else if (all_zero(b, 12) && !all_zero(b + 12, 3))
                v4 = b + 12; /* ::a.b.c.d, IPv4-compatible (not :: or ::1) */
        else if (memcmp(b, nat64, 12) == 0)
                v4 = b + 12; /* 64:ff9b::a.b.c.d, NAT64 well-known prefix */
        else if (b[0] == 0x20 && b[1] == 0x02)
                v4 = b + 2; /* 2002:AABB:CCDD::/48, 6to4 */
        if (!v4)
                return false;
        net_addr_from_ipv4(ret, v4);
        return true;
}

/* Decimal without sign, spaces or leading zeros, at most max. */
static int parse_dec(const char *s, size_t len, uint32_t max, uint32_t *ret) {
        if (len == 0 || len > 10 || (len > 1 && s[0] == '0'))
                return -EINVAL;
        uint64_t v = 0;
        for (size_t i = 0; i < len; i++) {
                if (!net_is_digit((unsigned char) s[i]))
                        return -EINVAL;
                v = v * 10 + (uint64_t) (s[i] - '0');
        }
        if (v > max)
                return -ERANGE;
        *ret = (uint32_t) v;
        return 0;
}

static bool host_bits_zero(const struct net_addr *a, unsigned prefix) {
        unsigned bits = a->family == AF_INET ? 32 : 128;
        for (unsigned i = prefix; i < bits; i++)
                if (a->bytes[i / 8] & (0x80 >> (i % 8)))
                        return false;
        return true;
}

static void mask(struct net_addr *a, unsigned prefix) {
        unsigned bits = a->family == AF_INET ? 32 : 128;
        for (unsigned i = prefix; i < bits; i++)
                a->bytes[i / 8] &= (uint8_t) ~(0x80 >> (i % 8));
}

int net_cidr_parse(const char *s, struct net_cidr *ret, struct wr_err *e) {
        char q[NET_QUOTE_MAX];
        memset(ret, 0, sizeof(*ret));
        if (!s || !*s)
                return err_setx(e, -EINVAL, WR_STATUS_INVALID_ARGUMENT, WR_FAULT_CLIENT,
                                "route \"\": empty CIDR");
        size_t len = strlen(s);
        if (len >= NET_CIDR_STR_MAX)
                return err_setx(e, -EINVAL, WR_STATUS_INVALID_ARGUMENT, WR_FAULT_CLIENT,
                                "route %s: too long for a CIDR", net_quote(s, len, q));
        char buf[NET_CIDR_STR_MAX];
        memcpy(buf, s, len + 1);
        char *slash = strchr(buf, '/');
        if (slash)
                *slash = '\0';
        struct net_addr a;
        if (net_addr_parse(buf, &a) < 0)
                return err_setx(e, -EINVAL, WR_STATUS_INVALID_ARGUMENT, WR_FAULT_CLIENT,
                                "route %s: not an IPv4 or IPv6 address (expect e.g. "
                                "10.0.0.0/8 or 2001:db8::/32)",
                                net_quote(s, len, q));
        uint32_t max = a.family == AF_INET ? 32 : 128, prefix = max;
        if (slash && parse_dec(slash + 1, strlen(slash + 1), max, &prefix) < 0)
                return err_setx(e, -EINVAL, WR_STATUS_INVALID_ARGUMENT, WR_FAULT_CLIENT,
                                "route %s: prefix length must be 0..%u", net_quote(s, len, q), max);
        if (!host_bits_zero(&a, prefix)) {
                char net[NET_ADDR_STR_MAX];
                struct net_addr m = a;
                mask(&m, prefix);
                return err_setx(e, -EINVAL, WR_STATUS_INVALID_ARGUMENT, WR_FAULT_CLIENT,
                                "route %s: host bits set (did you mean %s/%u?)",
                                net_quote(s, len, q), net_addr_format(&m, net), prefix);
        }
        /* ::ffff:0:0/96 and longer: the IPv4 block it denotes */
        static const uint8_t mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
        if (a.family == AF_INET6 && prefix >= 96 && memcmp(a.bytes, mapped, 12) == 0) {
                net_addr_from_ipv4(&ret->addr, a.bytes + 12);
                ret->prefix = (uint8_t) (prefix - 96);
                return 0;
        }
        ret->addr = a;
        ret->prefix = (uint8_t) prefix;
        return 0;
}

const char *net_cidr_format(const struct net_cidr *c, char out[static NET_CIDR_STR_MAX]) {
        char a[NET_ADDR_STR_MAX];
        snprintf(out, NET_CIDR_STR_MAX, "%s/%u", net_addr_format(&c->addr, a), c->prefix);
        return out;
}

bool net_cidr_contains(const struct net_cidr *c, const struct net_addr *a) {
        if (c->addr.family != a->family)
                return false;
        unsigned full = c->prefix / 8, rest = c->prefix % 8;
        if (memcmp(c->addr.bytes, a->bytes, full) != 0)
                return false;
        if (rest == 0)
                return true;
        uint8_t m = (uint8_t) (0xff << (8 - rest));
        return (c->addr.bytes[full] & m) == (a->bytes[full] & m);
}

bool net_cidr_contains_any(const struct net_cidr *c, const struct net_addr *a) {
        struct net_addr n;
        if (net_cidr_contains(c, a))
                return true;
        return net_addr_normalize(a, &n) && net_cidr_contains(c, &n);
}

int net_port_range_check(uint32_t lo, uint32_t hi, struct net_port_range *ret, struct wr_err *e) {
        memset(ret, 0, sizeof(*ret));
        if (lo < 1 || lo > 65535 || hi < 1 || hi > 65535)
                return err_setx(e, -EINVAL, WR_STATUS_INVALID_ARGUMENT, WR_FAULT_CLIENT,
                                "port range (%u, %u): ports must be 1..65535", lo, hi);
        if (lo > hi)
                return err_setx(e, -EINVAL, WR_STATUS_INVALID_ARGUMENT, WR_FAULT_CLIENT,
                                "port range (%u, %u): start above end", lo, hi);
        ret->lo = lo;
        ret->hi = hi;
        return 0;
}

int net_port_range_parse(const char *s, struct net_port_range *ret, struct wr_err *e) {
        char q[NET_QUOTE_MAX];
        memset(ret, 0, sizeof(*ret));
        if (!s)
                s = "";
        size_t len = strlen(s);
        const char *dash = strchr(s, '-');
        uint32_t lo, hi;
        int r;
        if (dash) {
                r = parse_dec(s, (size_t) (dash - s), 0xffffffffu, &lo);
                if (r >= 0)
                        r = parse_dec(dash + 1, strlen(dash + 1), 0xffffffffu, &hi);
        } else {
                r = parse_dec(s, len, 0xffffffffu, &lo);
                hi = lo;
        }
        if (r < 0)
                return err_setx(e, -EINVAL, WR_STATUS_INVALID_ARGUMENT, WR_FAULT_CLIENT,
                                "port range %s: expect PORT or START-END (decimal)",
                                net_quote(s, len, q));
        return net_port_range_check(lo, hi, ret, e);
}

/* The built-in blocks, pre-parsed (the hot path never parses text). */
struct block {
        struct net_cidr cidr;
        const char *what;
};

#define V4(a, b, c, d, len)                                                                        \
        { {AF_INET, {a, b, c, d}}, len }
#define V6(len, ...)                                                                               \
        { {AF_INET6, {__VA_ARGS__}}, len }

static const struct block builtin[] = {
        {V4(0, 0, 0, 0, 8), "unspecified"},
        {V4(127, 0, 0, 0, 8), "loopback"},
        {V4(169, 254, 0, 0, 16), "link-local, cloud metadata"},
        {V4(224, 0, 0, 0, 4), "multicast"},
        {V4(240, 0, 0, 0, 4), "broadcast/reserved"},
        {V6(128, 0), "unspecified"},
        {V6(128, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1), "loopback"},
        {V6(10, 0xfe, 0x80), "link-local"},
        {V6(128, 0xfd, 0x00, 0x0e, 0xc2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x02, 0x54),
         "cloud metadata (IPv6)"},
        {V6(8, 0xff), "multicast"},
};

static const struct block private_blocks[] = {
        {V4(10, 0, 0, 0, 8), "private"},     {V4(172, 16, 0, 0, 12), "private"},
        {V4(192, 168, 0, 0, 16), "private"}, {V4(100, 64, 0, 0, 10), "shared address space (CGN)"},
        {V6(7, 0xfc), "unique local"},       {V6(10, 0xfe, 0xc0), "site-local"},
};

static const struct block *find_block(const struct block *t, size_t n, const struct net_addr *a) {
        for (size_t i = 0; i < n; i++)
                if (net_cidr_contains_any(&t[i].cidr, a))
                        return &t[i];
        return NULL;
}

bool net_builtin_denied(const struct net_addr *a, uint16_t port, const struct net_host_deny *hd,
                        const char **reason, char *rule, size_t rule_size) {
        static const char *dummy;
        char tmp[1];
        if (!reason)
                reason = &dummy;
        if (!rule || rule_size == 0) {
                rule = tmp;
                rule_size = sizeof(tmp);
        }
        *reason = NULL;
        rule[0] = '\0';
        if (a->family != AF_INET && a->family != AF_INET6) {
                *reason = "no address";
                snprintf(rule, rule_size, "builtin");
                return true;
        }
        const struct block *b = find_block(builtin, ELEMENTSOF(builtin), a);
        if (b) {
                char c[NET_CIDR_STR_MAX];
                *reason = b->what;
                snprintf(rule, rule_size, "builtin %s", net_cidr_format(&b->cidr, c));
                return true;
        }
        if (!hd)
                return false;
        struct net_addr n;
        bool has_n = net_addr_normalize(a, &n);
        for (size_t i = 0; i < hd->n_addrs; i++) {
                const struct net_addr *h = &hd->addrs[i];
                struct net_addr hn;
                bool has_hn = net_addr_normalize(h, &hn);
                if (net_addr_equal(h, a) || (has_n && net_addr_equal(h, &n)) ||
                    (has_hn && (net_addr_equal(&hn, a) || (has_n && net_addr_equal(&hn, &n))))) {
                        char s[NET_ADDR_STR_MAX];
                        *reason = "the host's own address";
                        snprintf(rule, rule_size, "builtin host address %s", net_addr_format(h, s));
                        return true;
                }
        }
        for (size_t i = 0; i < hd->n_ports; i++)
                if (hd->ports[i] == port) {
                        *reason = "the daemon's own port";
                        snprintf(rule, rule_size, "builtin daemon port %u", port);
                        return true;
                }
        return false;
}

bool net_addr_is_private(const struct net_addr *a, const char **range) {
        static const char *const texts[] = {"10.0.0.0/8",    "172.16.0.0/12", "192.168.0.0/16",
                                            "100.64.0.0/10", "fc00::/7",      "fec0::/10"};
        _Static_assert(ELEMENTSOF(texts) == ELEMENTSOF(private_blocks), "one text per block");
        const struct block *b = find_block(private_blocks, ELEMENTSOF(private_blocks), a);
        if (range)
                *range = b ? texts[b - private_blocks] : NULL;
        return b != NULL;
}
