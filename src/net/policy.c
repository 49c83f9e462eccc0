/* SPDX-License-Identifier: Apache-2.0 */
/* The policy model: entries, their validation, the decision (policy.h).
 * Pure: no I/O; allocation only for the policy's entry arrays. */
#include "net/policy.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>

#include "net/net-internal.h"

int net_policy_new(struct net_policy **ret) {
        struct net_policy *p = calloc(1, sizeof(*p));
        if (!p)
                return -ENOMEM;
        *ret = p;
        return 0;
}

struct net_policy *net_policy_free(struct net_policy *p) {
        if (!p)
                return NULL;
        free(p->hosts);
        free(p->allowed);
        free(p->denied);
        free(p);
        return NULL;
}

/* Make room for one more element in *arr (n used, *cap allocated),
 * doubling: appending stays linear however many entries come. */
static int grow(void **arr, size_t *cap, size_t n, size_t size) {
        if (n < *cap)
                return 0;
        size_t c = *cap ? *cap * 2 : 8;
        void *a = reallocarray(*arr, c, size);
        if (!a)
                return -ENOMEM;
        *arr = a;
        *cap = c;
        return 0;
}

static int bad_pattern(struct wr_err *e, const char *s, const char *why) {
        char q[NET_QUOTE_MAX];
        return err_setx(e, -EINVAL, WR_STATUS_INVALID_ARGUMENT, WR_FAULT_CLIENT, "%s: %s",
                        net_quote(s, strlen(s), q), why);
}

int net_host_pattern_parse(const char *s, struct net_host_pattern *ret, struct wr_err *e) {
        memset(ret, 0, sizeof(*ret));
        if (!s || !*s)
                return bad_pattern(e, "", "empty entry (use \"*\" for every host)");
        if (strcmp(s, "*") == 0) {
                ret->kind = NET_PATTERN_ANY;
                return 0;
        }
        bool wildcard = s[0] == '*' && s[1] == '.';
        const char *rest = wildcard ? s + 2 : s;
        if (strchr(rest, '*'))
                return bad_pattern(e, s,
                                   "'*' is allowed only as the whole entry or as a leading "
                                   "\"*.\" (\"*.example.com\")");
        if (wildcard && (!*rest || strcmp(rest, ".") == 0))
                return bad_pattern(e, s, "\"*.\" needs a domain after it (\"*.example.com\")");
        struct net_host h;
        int r = net_host_canon_str(rest, &h, e);
        if (r < 0)
                return r;
        if (h.kind == NET_HOST_IP)
                return bad_pattern(e, s,
                                   "an IP address is not a hostname pattern (use "
                                   "allowed_routes for addresses)");
        if (wildcard && !strchr(h.name, '.'))
                return bad_pattern(e, s,
                                   "a wildcard needs at least two labels after \"*.\" "
                                   "(\"*.example.com\", not \"*.com\")");
        ret->kind = wildcard ? NET_PATTERN_SUFFIX : NET_PATTERN_EXACT;
        memcpy(ret->name, h.name, sizeof(ret->name));
        return 0;
}

const char *net_host_pattern_format(const struct net_host_pattern *pat, char *out, size_t size) {
        switch (pat->kind) {
        case NET_PATTERN_ANY:
                snprintf(out, size, "*");
                break;
        case NET_PATTERN_SUFFIX:
                snprintf(out, size, "*.%s", pat->name);
                break;
        case NET_PATTERN_EXACT:
                snprintf(out, size, "%s", pat->name);
                break;
        default:
                snprintf(out, size, "?");
        }
        return out;
}

bool net_host_pattern_match(const struct net_host_pattern *pat, const char *name) {
        if (!name)
                return false;
        switch (pat->kind) {
        case NET_PATTERN_ANY:
                return true;
        case NET_PATTERN_EXACT:
                return strcmp(pat->name, name) == 0;
        case NET_PATTERN_SUFFIX: {
                size_t n = strlen(name), a = strlen(pat->name);
                return n > a + 1 && name[n - a - 1] == '.' && strcmp(name + n - a, pat->name) == 0;
        }
        }
        return false;
}

int net_policy_add_host(struct net_policy *p, const char *s, struct wr_err *e) {
        if (!p)
                return -EINVAL;
        if (p->n_hosts >= NET_POLICY_HOSTS_MAX)
                return err_setx(e, -E2BIG, WR_STATUS_INVALID_ARGUMENT, WR_FAULT_CLIENT,
                                "allowed_hosts: more than %d entries", NET_POLICY_HOSTS_MAX);
        struct net_host_pattern pat;
        int r = net_host_pattern_parse(s, &pat, e);
        if (r < 0)
                return err_prefix(e, r, "allowed_hosts[%zu]", p->n_hosts);
        if (grow((void **) &p->hosts, &p->hosts_cap, p->n_hosts, sizeof(*p->hosts)) < 0)
                return -ENOMEM;
        p->hosts[p->n_hosts++] = pat;
        return 0;
}

static const char *list_name(enum net_route_list list) {
        return list == NET_ROUTES_DENIED ? "denied_routes" : "allowed_routes";
}

int net_policy_add_route(struct net_policy *p, enum net_route_list list, const char *cidr,
                         const struct net_port_range *ports, size_t n_ports, struct wr_err *e) {
        if (!p || (list != NET_ROUTES_ALLOWED && list != NET_ROUTES_DENIED) ||
            (n_ports > 0 && !ports))
                return -EINVAL;
        struct net_route **arr = list == NET_ROUTES_DENIED ? &p->denied : &p->allowed;
        size_t *n = list == NET_ROUTES_DENIED ? &p->n_denied : &p->n_allowed;
        size_t *cap = list == NET_ROUTES_DENIED ? &p->denied_cap : &p->allowed_cap;
        const char *name = list_name(list);
        if (*n >= NET_POLICY_ROUTES_MAX)
                return err_setx(e, -E2BIG, WR_STATUS_INVALID_ARGUMENT, WR_FAULT_CLIENT,
                                "%s: more than %d entries", name, NET_POLICY_ROUTES_MAX);
        if (n_ports > NET_ROUTE_PORTS_MAX)
                return err_setx(e, -E2BIG, WR_STATUS_INVALID_ARGUMENT, WR_FAULT_CLIENT,
                                "%s[%zu]: more than %d port ranges", name, *n, NET_ROUTE_PORTS_MAX);
        struct net_route route = {0};
        int r = net_cidr_parse(cidr, &route.cidr, e);
        if (r < 0)
                return err_prefix(e, r, "%s[%zu]", name, *n);
        for (size_t i = 0; i < n_ports; i++) {
                r = net_port_range_check(ports[i].lo, ports[i].hi, &route.ports[i], e);
                if (r < 0)
                        return err_prefix(e, r, "%s[%zu] ports[%zu]", name, *n, i);
        }
        route.n_ports = n_ports;
        if (grow((void **) arr, cap, *n, sizeof(**arr)) < 0)
                return -ENOMEM;
        (*arr)[(*n)++] = route;
        return 0;
}

bool net_route_match(const struct net_route *r, const struct net_addr *a, uint16_t port) {
        if (!net_cidr_contains_any(&r->cidr, a))
                return false;
        if (r->n_ports == 0)
                return true;
        for (size_t i = 0; i < r->n_ports; i++)
                if (port >= r->ports[i].lo && port <= r->ports[i].hi)
                        return true;
        return false;
}

bool net_policy_name_may_match(const struct net_policy *p, const char *name) {
        if (!p || !net_host_is_canonical_name(name))
                return false;
        for (size_t i = 0; i < p->n_hosts; i++)
                if (net_host_pattern_match(&p->hosts[i], name))
                        return true;
        return false;
}

static void route_rule(char *out, size_t size, const char *list, size_t i,
                       const struct net_route *r) {
        char c[NET_CIDR_STR_MAX];
        int n = snprintf(out, size, "%s[%zu] %s", list, i, net_cidr_format(&r->cidr, c));
        for (size_t k = 0; k < r->n_ports && n > 0 && (size_t) n < size; k++) {
                const struct net_port_range *pr = &r->ports[k];
                const char *sep = k == 0 ? " ports " : ",";
                if (pr->lo == pr->hi)
                        n += snprintf(out + n, size - (size_t) n, "%s%u", sep, pr->lo);
                else
                        n += snprintf(out + n, size - (size_t) n, "%s%u-%u", sep, pr->lo, pr->hi);
        }
}

static int verdict(struct net_decision *ret, enum net_verdict v, const char *reason,
                   const char *fmt, ...) _printf_(4, 5);
static int verdict(struct net_decision *ret, enum net_verdict v, const char *reason,
                   const char *fmt, ...) {
        va_list ap;
        ret->verdict = v;
        ret->reason = reason;
        va_start(ap, fmt);
        vsnprintf(ret->rule, sizeof(ret->rule), fmt, ap);
        va_end(ap);
        return 0;
}

/* Common first steps: a usable address and the built-in deny list. Returns
 * true when that already decided (deny). */
static bool builtin_step(const struct net_dest *d, const struct net_host_deny *hd,
                         struct net_decision *ret) {
        const char *what;
        char rule[NET_RULE_MAX - 20];
        if (d->addr.family != AF_INET && d->addr.family != AF_INET6) {
                verdict(ret, NET_VERDICT_DENY, "no address to dial", "none");
                return true;
        }
        if (d->port == 0) {
                verdict(ret, NET_VERDICT_DENY, "port 0", "none");
                return true;
        }
        if (net_builtin_denied(&d->addr, d->port, hd, &what, rule, sizeof(rule))) {
                verdict(ret, NET_VERDICT_DENY, "built-in deny", "%s (%s)", rule, what);
                return true;
        }
        return false;
}

int net_policy_decide(const struct net_policy *p, const struct net_dest *d,
                      const struct net_host_deny *hd, struct net_decision *ret) {
        if (!ret)
                return -EINVAL;
        verdict(ret, NET_VERDICT_DENY, "invalid arguments", "none");
        if (!p || !d)
                return -EINVAL;

        const char *name = NULL;
        if (d->host) {
                struct net_host h;
                if (net_host_canon_str(d->host, &h, NULL) < 0 ||
                    (h.kind == NET_HOST_NAME && strcmp(h.name, d->host) != 0))
                        return verdict(ret, NET_VERDICT_DENY, "host name not canonical", "none");
                if (h.kind == NET_HOST_NAME)
                        name = d->host;
        }
        if (d->addr.family != AF_INET && d->addr.family != AF_INET6)
                return verdict(ret, NET_VERDICT_DENY, "no address to dial", "none");
        if (d->port == 0)
                return verdict(ret, NET_VERDICT_DENY, "port 0", "none");

        for (size_t i = 0; i < p->n_denied; i++)
                if (net_route_match(&p->denied[i], &d->addr, d->port)) {
                        ret->verdict = NET_VERDICT_DENY;
                        ret->reason = "denied route";
                        route_rule(ret->rule, sizeof(ret->rule), "denied_routes", i, &p->denied[i]);
                        return 0;
                }

        if (builtin_step(d, hd, ret))
                return 0;

        const char *range = NULL;
        bool private = net_addr_is_private(&d->addr, &range);
        ssize_t private_match = -1;
        for (size_t i = 0; i < p->n_hosts; i++) {
                const struct net_host_pattern *pat = &p->hosts[i];
                if (pat->kind != NET_PATTERN_ANY && !net_host_pattern_match(pat, name))
                        continue;
                char txt[NET_HOST_MAX + 3];
                net_host_pattern_format(pat, txt, sizeof(txt));
                if (!private)
                        return verdict(ret, NET_VERDICT_ALLOW, "allowed host",
                                       "allowed_hosts[%zu] %s", i, txt);
                if (private_match < 0)
                        private_match = (ssize_t) i;
        }

        for (size_t i = 0; i < p->n_allowed; i++)
                if (net_route_match(&p->allowed[i], &d->addr, d->port)) {
                        ret->verdict = NET_VERDICT_ALLOW;
                        ret->reason = "allowed route";
                        route_rule(ret->rule, sizeof(ret->rule), "allowed_routes", i,
                                   &p->allowed[i]);
                        return 0;
                }

        if (private_match >= 0) {
                char txt[NET_HOST_MAX + 3];
                net_host_pattern_format(&p->hosts[private_match], txt, sizeof(txt));
                return verdict(ret, NET_VERDICT_DENY,
                               "private address: reachable only through allowed_routes",
                               "allowed_hosts[%zd] %s, address in %s", private_match, txt, range);
        }
        return verdict(ret, NET_VERDICT_DENY, "no rule allows it", "default deny");
}

int net_policy_decide_open(const struct net_dest *d, const struct net_host_deny *hd,
                           struct net_decision *ret) {
        if (!ret)
                return -EINVAL;
        verdict(ret, NET_VERDICT_DENY, "invalid arguments", "none");
        if (!d)
                return -EINVAL;
        if (builtin_step(d, hd, ret))
                return 0;
        const char *range;
        if (net_addr_is_private(&d->addr, &range))
                return verdict(ret, NET_VERDICT_DENY,
                               "private address: reachable only through allowed_routes",
                               "no policy, address in %s", range);
        return verdict(ret, NET_VERDICT_ALLOW, "no policy: outbound allowed", "no policy");
}
