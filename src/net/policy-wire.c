/* SPDX-License-Identifier: Apache-2.0 */
/* The policy's closed binary wire form, warrend -> proxy (policy.h). Every
 * decoded entry goes through the same checks as the net_policy_add_*
 * calls. Fuzzed by tests/fuzz/fuzz-policy.c. */
#include "net/policy.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "net/net-internal.h"

#define HDR_SIZE 16u

static void put16(uint8_t *p, uint32_t v) {
        p[0] = (uint8_t) v;
        p[1] = (uint8_t) (v >> 8);
}

static uint32_t get16(const uint8_t *p) {
        return (uint32_t) p[0] | ((uint32_t) p[1] << 8);
}

static size_t route_size(const struct net_route *r) {
        return 4 + (r->cidr.addr.family == AF_INET ? 4u : 16u) + 4 * r->n_ports;
}

int net_policy_serialize(const struct net_policy *p, uint8_t **ret, size_t *ret_len) {
        if (!p || !ret || !ret_len)
                return -EINVAL;
        if (p->n_hosts > NET_POLICY_HOSTS_MAX || p->n_allowed > NET_POLICY_ROUTES_MAX ||
            p->n_denied > NET_POLICY_ROUTES_MAX)
                return -E2BIG;
        size_t size = HDR_SIZE;
        char txt[NET_HOST_MAX + 3];
        for (size_t i = 0; i < p->n_hosts; i++)
                size += 1 + strlen(net_host_pattern_format(&p->hosts[i], txt, sizeof(txt)));
        for (size_t i = 0; i < p->n_allowed; i++)
                size += route_size(&p->allowed[i]);
        for (size_t i = 0; i < p->n_denied; i++)
                size += route_size(&p->denied[i]);
        if (size > NET_POLICY_WIRE_MAX)
                return -E2BIG;

        uint8_t *buf = malloc(size), *o = buf;
        if (!buf)
                return -ENOMEM;
        memcpy(o, NET_POLICY_WIRE_MAGIC, 4);
        put16(o + 4, NET_POLICY_WIRE_VERSION);
        put16(o + 6, p->learn ? 1 : 0);
        put16(o + 8, (uint32_t) p->n_hosts);
        put16(o + 10, (uint32_t) p->n_allowed);
        put16(o + 12, (uint32_t) p->n_denied);
        put16(o + 14, 0);
        o += HDR_SIZE;
        for (size_t i = 0; i < p->n_hosts; i++) {
                size_t n = strlen(net_host_pattern_format(&p->hosts[i], txt, sizeof(txt)));
                *o++ = (uint8_t) n;
                memcpy(o, txt, n);
                o += n;
        }
        for (int l = 0; l < 2; l++) {
                const struct net_route *rs = l == 0 ? p->allowed : p->denied;
                size_t n = l == 0 ? p->n_allowed : p->n_denied;
                for (size_t i = 0; i < n; i++) {
                        const struct net_route *r = &rs[i];
                        size_t alen = r->cidr.addr.family == AF_INET ? 4 : 16;
                        *o++ = r->cidr.addr.family == AF_INET ? 4 : 6;
                        *o++ = r->cidr.prefix;
                        put16(o, (uint32_t) r->n_ports);
                        o += 2;
                        memcpy(o, r->cidr.addr.bytes, alen);
                        o += alen;
                        for (size_t k = 0; k < r->n_ports; k++) {
                                put16(o, r->ports[k].lo);
                                put16(o + 2, r->ports[k].hi);
                                o += 4;
                        }
                }
        }
        *ret = buf;
        *ret_len = (size_t) (o - buf);
        return 0;
}

static int malformed(struct wr_err *e, const char *fmt, ...) _printf_(2, 3);
static int malformed(struct wr_err *e, const char *fmt, ...) {
        char msg[WR_ERR_MSG_MAX];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(msg, sizeof(msg), fmt, ap);
        va_end(ap);
        return err_setx(e, -EBADMSG, WR_STATUS_INVALID_ARGUMENT, WR_FAULT_SERVICE,
                        "policy wire form: %s", msg);
}

/* An entry refused by the create-time checks: the message says why, the
 * code says "malformed wire form". */
static int refused(struct wr_err *e) {
        err_prefix(e, -EBADMSG, "policy wire form");
        if (e)
                e->code = -EBADMSG;
        return -EBADMSG;
}

static int read_route(const uint8_t *buf, size_t len, size_t *off, struct net_policy *p,
                      enum net_route_list list, size_t idx, struct wr_err *e) {
        const char *name = list == NET_ROUTES_DENIED ? "denied_routes" : "allowed_routes";
        size_t o = *off;
        if (len - o < 4)
                return malformed(e, "%s[%zu]: truncated", name, idx);
        uint8_t fam = buf[o], prefix = buf[o + 1];
        size_t n_ports = get16(buf + o + 2);
        o += 4;
        if (fam != 4 && fam != 6)
                return malformed(e, "%s[%zu]: family %u is not 4 or 6", name, idx, fam);
        size_t alen = fam == 4 ? 4 : 16;
        if (n_ports > NET_ROUTE_PORTS_MAX)
                return malformed(e, "%s[%zu]: %zu port ranges (at most %d)", name, idx, n_ports,
                                 NET_ROUTE_PORTS_MAX);
        if (len - o < alen + 4 * n_ports)
                return malformed(e, "%s[%zu]: truncated", name, idx);
        struct net_addr a;
        if (fam == 4)
                net_addr_from_ipv4(&a, buf + o);
        else
                net_addr_from_ipv6(&a, buf + o);
        o += alen;
        if (prefix > alen * 8)
                return malformed(e, "%s[%zu]: prefix %u too long", name, idx, prefix);
        /* through the text form, so that exactly the create-time checks apply */
        char cidr[NET_CIDR_STR_MAX], addr[NET_ADDR_STR_MAX];
        snprintf(cidr, sizeof(cidr), "%s/%u", net_addr_format(&a, addr), prefix);
        struct net_port_range ports[NET_ROUTE_PORTS_MAX];
        for (size_t k = 0; k < n_ports; k++, o += 4) {
                ports[k].lo = get16(buf + o);
                ports[k].hi = get16(buf + o + 2);
        }
        size_t before = list == NET_ROUTES_DENIED ? p->n_denied : p->n_allowed;
        int r = net_policy_add_route(p, list, cidr, ports, n_ports, e);
        if (r == -ENOMEM)
                return r;
        if (r < 0)
                return refused(e);
        /* canonical: a mapped IPv6 block would come back as IPv4 */
        const struct net_route *added =
                list == NET_ROUTES_DENIED ? &p->denied[before] : &p->allowed[before];
        if (!net_addr_equal(&added->cidr.addr, &a) || added->cidr.prefix != prefix)
                return malformed(e, "%s[%zu]: %s is not in canonical form", name, idx, cidr);
        *off = o;
        return 0;
}

int net_policy_deserialize(const void *data, size_t len, struct net_policy **ret,
                           struct wr_err *e) {
        const uint8_t *buf = data;
        if (!ret)
                return -EINVAL;
        *ret = NULL;
        if (!buf && len > 0)
                return -EINVAL;
        if (len > NET_POLICY_WIRE_MAX)
                return malformed(e, "%zu bytes (at most %u)", len, NET_POLICY_WIRE_MAX);
        if (len < HDR_SIZE)
                return malformed(e, "truncated header (%zu bytes)", len);
        if (memcmp(buf, NET_POLICY_WIRE_MAGIC, 4) != 0)
                return malformed(e, "bad magic");
        uint32_t version = get16(buf + 4), flags = get16(buf + 6);
        if (version != NET_POLICY_WIRE_VERSION)
                return err_setx(e, -EPROTONOSUPPORT, WR_STATUS_INVALID_ARGUMENT, WR_FAULT_SERVICE,
                                "policy wire form: version %u (expected %d)", version,
                                NET_POLICY_WIRE_VERSION);
        if (flags & ~1u)
                return malformed(e, "unknown flags 0x%x", flags);
        size_t n_hosts = get16(buf + 8), n_allowed = get16(buf + 10), n_denied = get16(buf + 12);
        if (get16(buf + 14) != 0)
                return malformed(e, "reserved field not zero");
        if (n_hosts > NET_POLICY_HOSTS_MAX || n_allowed > NET_POLICY_ROUTES_MAX ||
            n_denied > NET_POLICY_ROUTES_MAX)
                return malformed(e, "too many entries (%zu hosts, %zu + %zu routes)", n_hosts,
                                 n_allowed, n_denied);

        _cleanup_net_policy_ struct net_policy *p = NULL;
        int r = net_policy_new(&p);
        if (r < 0)
                return r;
        p->learn = flags & 1;
        size_t o = HDR_SIZE;
        for (size_t i = 0; i < n_hosts; i++) {
                if (len - o < 1)
                        return malformed(e, "allowed_hosts[%zu]: truncated", i);
                size_t n = buf[o++];
                if (n == 0 || len - o < n)
                        return malformed(e, "allowed_hosts[%zu]: bad length %zu", i, n);
                char txt[256];
                memcpy(txt, buf + o, n);
                txt[n] = '\0';
                if (strlen(txt) != n)
                        return malformed(e, "allowed_hosts[%zu]: NUL byte", i);
                r = net_policy_add_host(p, txt, e);
                if (r == -ENOMEM)
                        return r;
                if (r < 0)
                        return refused(e);
                char canon[NET_HOST_MAX + 3], q[NET_QUOTE_MAX];
                net_host_pattern_format(&p->hosts[i], canon, sizeof(canon));
                if (strcmp(canon, txt) != 0)
                        return malformed(e, "allowed_hosts[%zu]: %s is not in canonical form", i,
                                         net_quote(txt, n, q));
                o += n;
        }
        for (size_t i = 0; i < n_allowed; i++) {
                r = read_route(buf, len, &o, p, NET_ROUTES_ALLOWED, i, e);
                if (r < 0)
                        return r;
        }
        for (size_t i = 0; i < n_denied; i++) {
                r = read_route(buf, len, &o, p, NET_ROUTES_DENIED, i, e);
                if (r < 0)
                        return r;
        }
        if (o != len)
                return malformed(e, "%zu trailing bytes", len - o);
        *ret = TAKE_PTR(p);
        return 0;
}
