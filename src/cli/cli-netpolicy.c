/* SPDX-License-Identifier: Apache-2.0 */
/* Client-side checks of the network policy flags. The checks are
 * warrend's own (src/net: the parsers behind net_policy_add_host and
 * net_policy_add_route), so a bad entry is refused before any call with
 * the daemon's very words: `allowed_hosts[1]: "*.com": a wildcard needs
 * ...`. The SDK ports the same checks (python/warren/_network.py). */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "basic/err.h"
#include "cli.h"
#include "net/net.h"

int cli_policy_add_host(struct cli_create *cr, const char *arg, char *err, size_t errlen) {
        size_t index = cr->policy.n_allowed_hosts;
        struct wr_err e = {0};
        struct net_host_pattern pat;
        if (index >= NET_POLICY_HOSTS_MAX) {
                snprintf(err, errlen, "allowed_hosts: more than %d entries", NET_POLICY_HOSTS_MAX);
                return -EINVAL;
        }
        if (net_host_pattern_parse(arg, &pat, &e) < 0) {
                err_prefix(&e, -EINVAL, "allowed_hosts[%zu]", index);
                snprintf(err, errlen, "%s", e.msg);
                return -EINVAL;
        }
        char canon[NET_HOST_MAX + 4];
        net_host_pattern_format(&pat, canon, sizeof(canon));
        cli_push((void ***) &cr->policy.allowed_hosts, &cr->policy.n_allowed_hosts,
                 cli_strdup(canon));
        return 0;
}

int cli_policy_add_route(struct cli_create *cr, bool deny, const char *arg, char *err,
                         size_t errlen) {
        const char *name = deny ? "denied_routes" : "allowed_routes";
        size_t index = deny ? cr->policy.n_denied_routes : cr->policy.n_allowed_routes;
        if (index >= NET_POLICY_ROUTES_MAX) {
                snprintf(err, errlen, "%s: more than %d entries", name, NET_POLICY_ROUTES_MAX);
                return -EINVAL;
        }
        /* CIDR[:PORTS]. With a '/', the ports follow the first ':' after it
         * (an IPv6 address has colons of its own); without one, a bare IPv4
         * address may be followed by :PORTS (a bare IPv6 address takes none:
         * write it as ADDR/128:PORTS). */
        char *cidr = cli_strdup(arg), *ports = NULL, *colon = NULL;
        char *slash = strchr(cidr, '/');
        if (slash)
                colon = strchr(slash, ':');
        else if ((colon = strchr(cidr, ':')) && strchr(colon + 1, ':'))
                colon = NULL;
        if (colon) {
                *colon = '\0';
                ports = colon + 1;
        }
        struct wr_err e = {0};
        struct net_cidr parsed;
        if (net_cidr_parse(cidr, &parsed, &e) < 0) {
                err_prefix(&e, -EINVAL, "%s[%zu]", name, index);
                snprintf(err, errlen, "%s", e.msg);
                return -EINVAL;
        }
        size_t n = 0;
        Warren__V1__Route *route = cli_alloc(sizeof(*route));
        warren__v1__route__init(route);
        route->cidr = cidr;
        if (ports) {
                char *list = cli_strdup(ports);
                /* strtok would skip empty items: split by hand. */
                for (char *item = list;; n++) {
                        char *comma = strchr(item, ',');
                        if (comma)
                                *comma = '\0';
                        struct net_port_range pr;
                        if (net_port_range_parse(item, &pr, &e) < 0) {
                                err_prefix(&e, -EINVAL, "%s[%zu] ports[%zu]", name, index, n);
                                snprintf(err, errlen, "%s", e.msg);
                                return -EINVAL;
                        }
                        if (n >= NET_ROUTE_PORTS_MAX) {
                                snprintf(err, errlen, "%s[%zu]: more than %d port ranges", name,
                                         index, NET_ROUTE_PORTS_MAX);
                                return -EINVAL;
                        }
                        Warren__V1__PortRange *wpr = cli_alloc(sizeof(*wpr));
                        warren__v1__port_range__init(wpr);
                        wpr->start = pr.lo;
                        wpr->end = pr.hi;
                        cli_push((void ***) &route->ports, &route->n_ports, wpr);
                        if (!comma) {
                                n++;
                                break;
                        }
                        item = comma + 1;
                }
        }
        if (deny)
                cli_push((void ***) &cr->policy.denied_routes, &cr->policy.n_denied_routes, route);
        else
                cli_push((void ***) &cr->policy.allowed_routes, &cr->policy.n_allowed_routes,
                         route);
        return 0;
}
