/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* The egress policy model and its decision (SECURITY.md, egress rules 3-5).
 * Pure code: no I/O, no logging; the only allocations are the policy's own
 * entry arrays. warrend builds a policy from CreateSandboxRequest with the
 * net_policy_add_* calls (each entry validated, errors naming it), sends it
 * to the proxy in the wire form of policy-wire.c, and both decide with
 * net_policy_decide().
 *
 * Decision order for one connection (net_policy_decide):
 *   1. denied_routes, port-matched                 -> deny
 *   2. the built-in deny list (addr.h)             -> deny
 *   3. allowed_hosts, by canonical name, only when the connection named a
 *      host; exact and "*.suffix" never match IP literals; "*" matches
 *      every destination. A match on a private address (addr.h) is not
 *      enough: private ranges are reachable only through allowed_routes.
 *                                                  -> allow
 *   4. allowed_routes, port-matched                -> allow
 *   5. otherwise                                   -> deny
 * With no policy at all, net_policy_decide_open() allows everything but the
 * built-in deny list and private ranges.
 *
 * Threading: a policy is immutable once built; any number of threads may
 * decide on it at once. */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "basic/err.h"
#include "net/addr.h"
#include "net/host.h"

#define NET_POLICY_HOSTS_MAX 1024  /* allowed_hosts entries */
#define NET_POLICY_ROUTES_MAX 1024 /* allowed_routes, and again denied_routes */
#define NET_ROUTE_PORTS_MAX 64     /* port ranges per route */
#define NET_RULE_MAX 300           /* struct net_decision.rule */

enum net_pattern_kind {
        NET_PATTERN_EXACT = 1,  /* "github.com": that host only */
        NET_PATTERN_SUFFIX = 2, /* "*.github.com": any depth below, never the apex */
        NET_PATTERN_ANY = 3,    /* "*": every destination */
};

struct net_host_pattern {
        enum net_pattern_kind kind;
        /* EXACT: the canonical name; SUFFIX: the canonical apex ("github.com");
         * ANY: "". */
        char name[NET_HOST_MAX + 1];
};

struct net_route {
        struct net_cidr cidr;
        size_t n_ports; /* 0 = every port */
        struct net_port_range ports[NET_ROUTE_PORTS_MAX];
};

enum net_route_list {
        NET_ROUTES_ALLOWED = 1,
        NET_ROUTES_DENIED = 2,
};

struct net_policy {
        struct net_host_pattern *hosts;
        size_t n_hosts;
        struct net_route *allowed;
        size_t n_allowed;
        struct net_route *denied;
        size_t n_denied;
        /* Learning mode: carried (and serialised) for the proxy, which records
         * what it would deny; net_policy_decide does not look at it. */
        bool learn;
        /* allocated lengths of the three arrays (internal) */
        size_t hosts_cap, allowed_cap, denied_cap;
};

/* A new empty policy (allows nothing but what is added) into *ret.
 * -ENOMEM. The caller owns it: net_policy_free(). */
int net_policy_new(struct net_policy **ret);

/* Free p and its entries (NULL ok). Returns NULL. */
struct net_policy *net_policy_free(struct net_policy *p);
static inline void net_policy_freep(struct net_policy **p) {
        *p = net_policy_free(*p);
}
#define _cleanup_net_policy_ __attribute__((cleanup(net_policy_freep)))

/* Parse one allowed_hosts entry into *ret: "*", "*.example.com" (at least
 * two labels after "*."), or an exact hostname; canonicalised as
 * net_host_canon (lower case, one trailing dot stripped). Refused with
 * -EINVAL (INVALID_ARGUMENT, client fault), the message naming the entry:
 * "*.com" (one label), "*example.com", "a.*.com", "**", "*.", IP literals in
 * any notation ("use allowed_routes for addresses"), anything net_host_canon
 * refuses. */
int net_host_pattern_parse(const char *s, struct net_host_pattern *ret, struct wr_err *e);

/* Write the pattern's canonical text ("*.github.com") into out (at least
 * NET_HOST_MAX + 3 bytes). Returns out. */
const char *net_host_pattern_format(const struct net_host_pattern *pat, char *out, size_t size);

/* True when canonical hostname name (a NET_HOST_NAME from net_host_canon)
 * matches pat. Matching is on canonical (lower-case) strings, so it ignores
 * case. EXACT: equal; SUFFIX: name ends in "." + apex (any depth); ANY:
 * always. */
bool net_host_pattern_match(const struct net_host_pattern *pat, const char *name);

/* Validate s as an allowed_hosts entry (net_host_pattern_parse) and append
 * it. -EINVAL as there (message prefixed "allowed_hosts[i]"), -E2BIG past
 * NET_POLICY_HOSTS_MAX, -ENOMEM. p is unchanged on failure. */
int net_policy_add_host(struct net_policy *p, const char *s, struct wr_err *e);

/* Validate a route (net_cidr_parse on cidr, net_port_range_check on each of
 * the n_ports (start, end) pairs; n_ports == 0 = every port) and append it
 * to the allowed or denied list. -EINVAL naming the entry
 * ("denied_routes[0]: route \"10.0.0.1/8\": host bits set ..."), -E2BIG
 * past the limits, -ENOMEM. p is unchanged on failure. */
int net_policy_add_route(struct net_policy *p, enum net_route_list list, const char *cidr,
                         const struct net_port_range *ports, size_t n_ports, struct wr_err *e);

/* True when route r covers address a (as given or normalized) on port. */
bool net_route_match(const struct net_route *r, const struct net_addr *a, uint16_t port);

/* Could any allowed_hosts entry allow the canonical hostname name? The
 * sandbox's resolver answers NXDOMAIN for names where this is false, without
 * asking upstream. False for IP literals and non-canonical input. Note that
 * destinations reachable only through allowed_routes are reached by
 * address, not by name. */
bool net_policy_name_may_match(const struct net_policy *p, const char *name);

enum net_verdict {
        NET_VERDICT_DENY = 0,
        NET_VERDICT_ALLOW = 1,
};

/* One connection to decide on. */
struct net_dest {
        /* The canonical host the connection named (SNI / Host / CONNECT), or
         * NULL when it named none. Must be canonical (net_host_canon output):
         * anything else is denied. An IP literal here counts as no name. */
        const char *host;
        struct net_addr addr; /* the address that will be dialed */
        uint16_t port;
};

struct net_decision {
        enum net_verdict verdict;
        /* The entry that decided, for the log: "denied_routes[0]
         * 169.254.169.254/32", "builtin 127.0.0.0/8", "allowed_hosts[1]
         * *.github.com", "allowed_routes[0] 10.0.0.0/8 ports 5432",
         * "default deny", "no policy". */
        char rule[NET_RULE_MAX];
        /* A static phrase: "denied route", "built-in deny: loopback", "allowed
         * host", "private address needs allowed_routes", "allowed route", "no
         * rule allows it", ... */
        const char *reason;
};

/* Decide on d under policy p, in the order given at the top of this file
 * (a destination without an address or with port 0 is denied first);
 * hd adds the host's own addresses and the daemon's ports to the built-in
 * deny list (NULL = none). Fills *ret and returns 0; -EINVAL when p, d or
 * ret is NULL (then *ret, if given, says deny). */
int net_policy_decide(const struct net_policy *p, const struct net_dest *d,
                      const struct net_host_deny *hd, struct net_decision *ret);

/* Decide on d when the sandbox has no policy at all: allowed, except the
 * built-in deny list (with hd), private ranges, no address and port 0. Fills *ret, returns 0;
 * -EINVAL when d or ret is NULL. */
int net_policy_decide_open(const struct net_dest *d, const struct net_host_deny *hd,
                           struct net_decision *ret);

/* --- wire form (policy-wire.c; fuzzed by tests/fuzz/fuzz-policy.c) ---
 *
 * A closed, versioned binary form for warrend -> proxy. All integers
 * little-endian:
 *   header  magic "WNP1" (4 bytes), u16 version (1), u16 flags (bit 0 =
 *           learn; other bits 0), u16 n_hosts, u16 n_allowed, u16 n_denied,
 *           u16 reserved (0)
 *   hosts   n_hosts times: u8 len (1..255), len bytes of the pattern's
 *           canonical text ("*", "*.github.com", "pypi.org")
 *   routes  n_allowed then n_denied times: u8 family (4 or 6), u8 prefix,
 *           u16 n_ports (<= NET_ROUTE_PORTS_MAX), 4 or 16 address bytes
 *           (host bits zero), n_ports times u16 lo, u16 hi
 * Nothing may follow. Every entry is re-validated by the same checks as the
 * net_policy_add_* calls and must be in canonical form, so that encoding a
 * decoded policy gives back the same bytes. */
#define NET_POLICY_WIRE_MAGIC "WNP1"
#define NET_POLICY_WIRE_VERSION 1
#define NET_POLICY_WIRE_MAX (1u << 20)

/* Encode p into a new buffer *ret (*ret_len bytes; caller frees).
 * -E2BIG when p exceeds the limits, -ENOMEM. */
int net_policy_serialize(const struct net_policy *p, uint8_t **ret, size_t *ret_len);

/* Decode len bytes at buf into a new policy *ret (caller frees). -EBADMSG
 * (with a message naming the field or entry) for anything malformed,
 * truncated, over the limits or not canonical; -EPROTONOSUPPORT for another
 * version; -ENOMEM. */
int net_policy_deserialize(const void *buf, size_t len, struct net_policy **ret, struct wr_err *e);
