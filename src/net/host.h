/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* Hostname canonicalisation (SECURITY.md, egress rule 2): a name is
 * canonicalised once, and that one string is decided on, injected and
 * dialed. Pure code: no I/O, no allocation, no locale, no resolver. Fuzzed
 * by tests/fuzz/fuzz-hostname.c. */

#include <stdbool.h>
#include <stddef.h>

#include "basic/err.h"
#include "net/addr.h"

/* Longest canonical name (RFC 1035 text form without the trailing dot). */
#define NET_HOST_MAX 253
#define NET_LABEL_MAX 63

enum net_host_kind {
        NET_HOST_NAME = 1, /* an LDH hostname */
        NET_HOST_IP = 2,   /* an IP literal, in any notation a resolver accepts */
};

struct net_host {
        enum net_host_kind kind;
        /* NAME: the canonical name ("api.github.com").
         * IP: the address's canonical text ("127.0.0.1", "::ffff:7f00:1"). */
        char name[NET_HOST_MAX + 1];
        struct net_addr addr; /* IP only */
};

/* Canonicalise the host in s (exactly len bytes; no port, no scheme).
 *
 * IP literals are recognised in every notation and returned as NET_HOST_IP,
 * never as names: IPv4 as inet_aton(3) decodes it (1 to 4 parts, each
 * decimal, octal with a leading 0 or hex with 0x: "2130706433", "0x7f.1",
 * "0177.0.0.1", "127.1"), IPv6 bracketed or not ("[::1]", "::ffff:1.2.3.4"),
 * with a zone id ("fe80::1%eth0", "[fe80::1%25eth0]": the zone is dropped,
 * the address kept); one trailing dot after an IPv4 literal is tolerated
 * like after a name ("127.0.0.1." is 127.0.0.1).
 *
 * Names: ASCII only, folded to lower case, one trailing dot stripped, labels
 * of 1..63 letters, digits and hyphens, not starting or ending with a
 * hyphen, 253 characters at most. Punycode ("xn--...") is ASCII and passes
 * as is; IDN in UTF-8 is refused. A name whose last label is a number
 * (all digits, or "0x" and hex digits: "1.2.3.999", "a.0x1f") without the
 * whole being a valid IPv4 literal is refused: some resolvers and URL
 * parsers would still read it as an address. ("0x1g" is an ordinary name.)
 *
 * Refused, with -EINVAL (INVALID_ARGUMENT, fault as given) and a message
 * naming the input: empty input, NUL, CR, LF, space and other controls,
 * '%' (outside an IPv6 zone), '@' (userinfo), '/', ':' (outside IPv6),
 * '_', non-ASCII bytes, empty labels ("foo..bar", ".foo", "foo.."), labels
 * over 63, names over 253, malformed brackets. */
int net_host_canon(const char *s, size_t len, enum wr_fault fault, struct net_host *ret,
                   struct wr_err *e);

/* net_host_canon on a NUL-terminated string (the client's fault). */
int net_host_canon_str(const char *s, struct net_host *ret, struct wr_err *e);

/* True when s is a canonical hostname (NET_HOST_NAME): net_host_canon
 * accepts it and returns the same string. */
bool net_host_is_canonical_name(const char *s);

/* Decode an IPv4 literal the way inet_aton(3) does (without its tolerance of
 * trailing whitespace): the s[0..len) string as 1..4 dot-separated parts,
 * each decimal, 0-prefixed octal or 0x-prefixed hex, the last part filling
 * the remaining bytes. Returns 0 and sets *ret, or -EINVAL. */
int net_ipv4_aton(const char *s, size_t len, struct net_addr *ret);
