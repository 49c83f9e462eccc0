/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* The sandbox address range and its allocation: pure (no I/O), unit
 * tested (tests/unit/test-netaddr.c).
 *
 * The range (--sandbox-cidr, default 100.96.0.0/16) is cut into /30
 * blocks, one per sandbox: slot k covers base + 4k .. base + 4k + 3, the
 * host end of the veth (the gateway) is base + 4k + 1, the sandbox
 * base + 4k + 2. The host end is named "wr" + 8 hex digits of the
 * gateway's /30 index in the whole IPv4 space (gateway >> 2), so a name
 * is unique on the host as long as ranges do not overlap, and names
 * its block: recovery maps a leftover link back to its slot.
 * Allocation is next-fit (a freed slot comes back only after the rest of
 * the range was used), so an address is not reused while the kernel may
 * still be taking its old link down. Addresses here are host byte order. */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "basic/err.h"

#define SBX_NET_PREFIX_MIN 8  /* the largest range: a /8 (4M sandboxes) */
#define SBX_NET_PREFIX_MAX 28 /* the smallest: a /28 (4 sandboxes) */
#define SBX_NET_SLOT_PREFIX 30
#define SBX_NET_PEER_PREFIX "wr"

struct sbx_netrange {
        uint32_t base; /* host order, host bits clear */
        uint8_t prefix;
        uint32_t n_slots;
        uint32_t n_used;
        uint32_t next; /* where the next search starts */
        uint8_t *used; /* bitmap, n_slots bits */
};

/* Parse "a.b.c.d/p" strictly (inet_pton, decimal prefix, no host bits
 * set, SBX_NET_PREFIX_MIN..MAX). Returns 0 or -EINVAL with the reason in
 * e ("--sandbox-cidr 10.0.0.1/16: host bits set (did you mean
 * 10.0.0.0/16?)"). */
int sbx_cidr_parse(const char *s, uint32_t *ret_base, uint8_t *ret_prefix, struct wr_err *e);

/* Do a/pa and b/pb share any address? */
bool sbx_cidr_overlap(uint32_t a, uint8_t pa, uint32_t b, uint8_t pb);

/* "a.b.c.d/p" into buf (>= 19 bytes). */
void sbx_cidr_format(uint32_t base, uint8_t prefix, char *buf, size_t size);

/* An empty allocator for base/prefix (as sbx_cidr_parse returns them).
 * -EINVAL, -ENOMEM. Free with sbx_netrange_done. */
int sbx_netrange_init(struct sbx_netrange *r, uint32_t base, uint8_t prefix);
void sbx_netrange_done(struct sbx_netrange *r);

/* A free slot (next-fit), marked used. -ENOSPC when all are used. */
int sbx_netrange_alloc(struct sbx_netrange *r, uint32_t *ret_slot);

/* Mark slot used (recovery). -ERANGE outside the range, -EEXIST when it
 * is used already. */
int sbx_netrange_take(struct sbx_netrange *r, uint32_t slot);

/* Mark slot free (ignored when it is not used or out of range). */
void sbx_netrange_free(struct sbx_netrange *r, uint32_t slot);

bool sbx_netrange_used(const struct sbx_netrange *r, uint32_t slot);

/* The slot's gateway (host end) and sandbox addresses. */
void sbx_netrange_addrs(const struct sbx_netrange *r, uint32_t slot, uint32_t *ret_gateway,
                        uint32_t *ret_sandbox);

/* The slot whose block holds addr, or -ERANGE. */
int sbx_netrange_slot_of(const struct sbx_netrange *r, uint32_t addr, uint32_t *ret_slot);

/* The host end's name for a gateway address, into buf (>= 16 bytes). */
void sbx_net_peer_name(uint32_t gateway, char *buf, size_t size);

/* The gateway address a name of sbx_net_peer_name denotes; -EINVAL for
 * any other name. */
int sbx_net_peer_parse(const char *name, uint32_t *ret_gateway);
