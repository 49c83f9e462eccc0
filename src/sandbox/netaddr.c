/* SPDX-License-Identifier: Apache-2.0 */
/* The sandbox address range and its allocation (pure; see netaddr.h). */
#include "sandbox/netaddr.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static uint32_t mask_of(uint8_t prefix) {
        return prefix == 0 ? 0 : ~0u << (32 - prefix);
}

int sbx_cidr_parse(const char *s, uint32_t *ret_base, uint8_t *ret_prefix, struct wr_err *e) {
        if (!s)
                return err_setx(e, -EINVAL, WR_STATUS_INVALID_ARGUMENT, WR_FAULT_CLIENT,
                                "no range given");
        const char *slash = strchr(s, '/');
        char addr[INET_ADDRSTRLEN];
        if (!slash || (size_t) (slash - s) >= sizeof(addr))
                return err_setx(e, -EINVAL, WR_STATUS_INVALID_ARGUMENT, WR_FAULT_CLIENT,
                                "%s: expected an IPv4 range such as 100.96.0.0/16", s);
        memcpy(addr, s, (size_t) (slash - s));
        addr[slash - s] = 0;
        struct in_addr in;
        if (inet_pton(AF_INET, addr, &in) != 1)
                return err_setx(e, -EINVAL, WR_STATUS_INVALID_ARGUMENT, WR_FAULT_CLIENT,
                                "%s: not an IPv4 address (expected e.g. 100.96.0.0/16)", s);
        const char *p = slash + 1;
        unsigned prefix = 0;
        if (!*p || (p[0] == '0' && p[1]) || strlen(p) > 2)
                return err_setx(e, -EINVAL, WR_STATUS_INVALID_ARGUMENT, WR_FAULT_CLIENT,
                                "%s: bad prefix length", s);
        for (; *p; p++) {
                if (*p < '0' || *p > '9')
                        return err_setx(e, -EINVAL, WR_STATUS_INVALID_ARGUMENT, WR_FAULT_CLIENT,
                                        "%s: bad prefix length", s);
                prefix = prefix * 10 + (unsigned) (*p - '0');
        }
        if (prefix < SBX_NET_PREFIX_MIN || prefix > SBX_NET_PREFIX_MAX)
                return err_setx(e, -EINVAL, WR_STATUS_INVALID_ARGUMENT, WR_FAULT_CLIENT,
                                "%s: the prefix must be /%d../%d", s, SBX_NET_PREFIX_MIN,
                                SBX_NET_PREFIX_MAX);
        uint32_t a = ntohl(in.s_addr), m = mask_of((uint8_t) prefix);
        if (a & ~m) {
                char fix[24];
                sbx_cidr_format(a & m, (uint8_t) prefix, fix, sizeof(fix));
                return err_setx(e, -EINVAL, WR_STATUS_INVALID_ARGUMENT, WR_FAULT_CLIENT,
                                "%s: host bits set (did you mean %s?)", s, fix);
        }
        *ret_base = a;
        *ret_prefix = (uint8_t) prefix;
        return 0;
}

bool sbx_cidr_overlap(uint32_t a, uint8_t pa, uint32_t b, uint8_t pb) {
        uint32_t m = mask_of(pa < pb ? pa : pb);
        return (a & m) == (b & m);
}

void sbx_cidr_format(uint32_t base, uint8_t prefix, char *buf, size_t size) {
        snprintf(buf, size, "%u.%u.%u.%u/%u", base >> 24, (base >> 16) & 255, (base >> 8) & 255,
                 base & 255, prefix);
}

int sbx_netrange_init(struct sbx_netrange *r, uint32_t base, uint8_t prefix) {
        memset(r, 0, sizeof(*r));
        if (prefix < SBX_NET_PREFIX_MIN || prefix > SBX_NET_PREFIX_MAX || (base & ~mask_of(prefix)))
                return -EINVAL;
        r->base = base;
        r->prefix = prefix;
        r->n_slots = 1u << (SBX_NET_SLOT_PREFIX - prefix);
        r->used = calloc((r->n_slots + 7) / 8, 1);
        return r->used ? 0 : -ENOMEM;
}

void sbx_netrange_done(struct sbx_netrange *r) {
        free(r->used);
        r->used = NULL;
        r->n_slots = r->n_used = 0;
}

bool sbx_netrange_used(const struct sbx_netrange *r, uint32_t slot) {
        return slot < r->n_slots && (r->used[slot / 8] & (1u << (slot % 8)));
}

int sbx_netrange_alloc(struct sbx_netrange *r, uint32_t *ret_slot) {
        if (r->n_used >= r->n_slots)
                return -ENOSPC;
        for (uint32_t i = 0; i < r->n_slots; i++) {
                uint32_t s = (r->next + i) % r->n_slots;
                if (!sbx_netrange_used(r, s)) {
                        r->used[s / 8] |= (uint8_t) (1u << (s % 8));
                        r->n_used++;
                        r->next = (s + 1) % r->n_slots;
                        *ret_slot = s;
                        return 0;
                }
        }
        return -ENOSPC;
}

int sbx_netrange_take(struct sbx_netrange *r, uint32_t slot) {
        if (slot >= r->n_slots)
                return -ERANGE;
        if (sbx_netrange_used(r, slot))
                return -EEXIST;
        r->used[slot / 8] |= (uint8_t) (1u << (slot % 8));
        r->n_used++;
        if (slot >= r->next) /* next-fit continues after what is in use */
                r->next = (slot + 1) % r->n_slots;
        return 0;
}

void sbx_netrange_free(struct sbx_netrange *r, uint32_t slot) {
        if (!sbx_netrange_used(r, slot))
                return;
        r->used[slot / 8] &= (uint8_t) ~(1u << (slot % 8));
        r->n_used--;
}

void sbx_netrange_addrs(const struct sbx_netrange *r, uint32_t slot, uint32_t *ret_gateway,
                        uint32_t *ret_sandbox) {
        uint32_t block = r->base + 4 * slot;
        *ret_gateway = block + 1;
        *ret_sandbox = block + 2;
}

int sbx_netrange_slot_of(const struct sbx_netrange *r, uint32_t addr, uint32_t *ret_slot) {
        if ((addr & mask_of(r->prefix)) != r->base)
                return -ERANGE;
        *ret_slot = (addr - r->base) / 4;
        return 0;
}

void sbx_net_peer_name(uint32_t gateway, char *buf, size_t size) {
        snprintf(buf, size, SBX_NET_PEER_PREFIX "%08x", gateway >> 2);
}

int sbx_net_peer_parse(const char *name, uint32_t *ret_gateway) {
        size_t n = strlen(SBX_NET_PEER_PREFIX);
        if (strncmp(name, SBX_NET_PEER_PREFIX, n) != 0 || strlen(name) != n + 8)
                return -EINVAL;
        uint32_t v = 0;
        for (const char *p = name + n; *p; p++) {
                int d = *p >= '0' && *p <= '9'   ? *p - '0'
                        : *p >= 'a' && *p <= 'f' ? *p - 'a' + 10
                                                 : -1;
                if (d < 0)
                        return -EINVAL;
                v = v << 4 | (uint32_t) d;
        }
        if (v > 0x3fffffffu)
                return -EINVAL;
        *ret_gateway = (v << 2) | 1;
        return 0;
}
