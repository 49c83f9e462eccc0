/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* Addresses, CIDR blocks, port ranges and the built-in deny list of the
 * egress policy (SECURITY.md, egress rule 4). Pure code: no I/O, no
 * allocation, no locale. Fuzzed by tests/fuzz/fuzz-cidr.c.
 *
 * Addresses are compared in a normalized form: an IPv6 address that only
 * embeds an IPv4 destination (IPv4-mapped ::ffff:a.b.c.d, IPv4-translated
 * ::ffff:0:a.b.c.d, IPv4-compatible ::a.b.c.d, 6to4 2002:AABB:CCDD::/48,
 * NAT64 64:ff9b::/96) is also checked as that IPv4 address, so that
 * "::ffff:169.254.169.254" is denied like 169.254.169.254. */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "basic/err.h"

/* "ffff:ffff:ffff:ffff:ffff:ffff:255.255.255.255" + NUL, rounded up. */
#define NET_ADDR_STR_MAX 48
/* an address + "/128" */
#define NET_CIDR_STR_MAX 52

struct net_addr {
        uint8_t family;    /* AF_INET or AF_INET6; 0 = unset */
        uint8_t bytes[16]; /* network order; IPv4 uses the first 4 */
};

struct net_cidr {
        struct net_addr addr; /* host bits are zero */
        uint8_t prefix;       /* 0..32 (IPv4) or 0..128 (IPv6) */
};

/* An inclusive port range, 1 <= lo <= hi <= 65535 once checked. */
struct net_port_range {
        uint32_t lo;
        uint32_t hi;
};

/* Set *ret from 4 (IPv4) or 16 (IPv6) network-order bytes. */
void net_addr_from_ipv4(struct net_addr *ret, const uint8_t b[4]);
void net_addr_from_ipv6(struct net_addr *ret, const uint8_t b[16]);

/* Parse a numeric address in its strict RFC text form only: IPv4 as four
 * decimal octets without leading zeros (inet_pton), IPv6 as RFC 4291 text
 * (brackets and zone ids refused). -EINVAL otherwise. This is the form
 * policies are written in; hostile input goes through net_host_canon(). */
int net_addr_parse(const char *s, struct net_addr *ret);

/* Format a into out (NET_ADDR_STR_MAX bytes): inet_ntop text ("10.0.0.1",
 * "2001:db8::1"). Returns out; "?" for an unset address. */
const char *net_addr_format(const struct net_addr *a, char out[static NET_ADDR_STR_MAX]);

/* True when a and b are the same family and bytes. */
bool net_addr_equal(const struct net_addr *a, const struct net_addr *b);

/* The IPv4 address an IPv6 address reaches, for the forms listed at the top
 * of this file. Returns true and sets *ret to the IPv4 address when a is
 * one of them; otherwise false and *ret = *a (an IPv4 address is returned
 * unchanged, with false). "::" and "::1" are not IPv4-compatible. */
bool net_addr_normalize(const struct net_addr *a, struct net_addr *ret);

/* Parse "10.0.0.0/8", "2001:db8::/32", or a bare address (= /32 or /128).
 * Decisions: the address is strict (net_addr_parse); the prefix is decimal
 * without sign or leading zeros and at most 32 / 128; host bits set below
 * the prefix are refused ("10.0.0.1/8": did you mean 10.0.0.0/8?) rather
 * than silently masked, because a typo would change what the rule covers.
 * An IPv4-mapped IPv6 block (::ffff:0:0/96 or longer) is stored as the IPv4
 * block it denotes, so that it matches normalized addresses. -EINVAL
 * (INVALID_ARGUMENT, client fault) with a message naming s. */
int net_cidr_parse(const char *s, struct net_cidr *ret, struct wr_err *e);

/* Format c as "addr/prefix" into out (NET_CIDR_STR_MAX bytes); returns out. */
const char *net_cidr_format(const struct net_cidr *c, char out[static NET_CIDR_STR_MAX]);

/* True when a (as given, same family) lies inside c. */
bool net_cidr_contains(const struct net_cidr *c, const struct net_addr *a);

/* True when a or its normalized IPv4 form lies inside c. */
bool net_cidr_contains_any(const struct net_cidr *c, const struct net_addr *a);

/* Check an inclusive range as the API carries it (uint32 start, end):
 * 1 <= lo <= hi <= 65535. -EINVAL with a message naming the range
 * ("port range (5, 1): start above end"). */
int net_port_range_check(uint32_t lo, uint32_t hi, struct net_port_range *ret, struct wr_err *e);

/* Parse a port range written as text: "443" (= 443-443) or "1000-2000";
 * decimal, no sign, no leading zeros, no spaces; then as
 * net_port_range_check. */
int net_port_range_parse(const char *s, struct net_port_range *ret, struct wr_err *e);

/* Addresses and ports of the host itself, supplied by the caller (warrend
 * knows its interfaces and listeners): every destination in addrs is
 * denied on every port, and every port in ports is denied on every
 * destination (the daemon's own listeners). Either list may be empty. */
struct net_host_deny {
        const struct net_addr *addrs;
        size_t n_addrs;
        const uint16_t *ports;
        size_t n_ports;
};

/* The built-in deny list, applied whatever the policy says (also with no
 * policy at all): loopback (127.0.0.0/8, ::1), unspecified (0.0.0.0/8, ::),
 * link-local (169.254.0.0/16 incl. the metadata address 169.254.169.254,
 * fe80::/10), the AWS IPv6 metadata address fd00:ec2::254, multicast
 * (224.0.0.0/4, ff00::/8), broadcast and reserved (240.0.0.0/4), plus the
 * host's own addresses and the daemon's ports from hd (NULL = none). The
 * address is checked as given and in its normalized IPv4 form. Returns true
 * when the destination is denied and then, when the pointers are non-NULL,
 * sets *reason to a static description ("link-local") and writes the
 * matching entry ("169.254.0.0/16", "host address 10.1.2.3", "daemon port
 * 50051") into rule (rule_size bytes). */
bool net_builtin_denied(const struct net_addr *a, uint16_t port, const struct net_host_deny *hd,
                        const char **reason, char *rule, size_t rule_size);

/* True when a (as given or normalized) is in a private range: 10.0.0.0/8,
 * 172.16.0.0/12, 192.168.0.0/16, 100.64.0.0/10 (shared CGN), fc00::/7
 * (ULA), fec0::/10 (old site-local). Such destinations are reachable only
 * through allowed_routes (egress rule 4). Sets *range to the block's text. */
bool net_addr_is_private(const struct net_addr *a, const char **range);
