/* SPDX-License-Identifier: Apache-2.0 */
/* Client-side checks of a network policy's entries (hosts, CIDRs, port
 * ranges), worded exactly as the SDK (python/warren/_network.py) and
 * warrend word them: `allowed_hosts[1]: "*.com": why`. */
#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

/* `where: "value": why` into err. Returns -EINVAL. */
_printf_(5, 6) static int bad(char *err, size_t errlen, const char *where, const char *value,
                              const char *fmt, ...) {
        size_t n = 0;
        n += (size_t) snprintf(err, errlen, "%s: \"", where);
        for (const char *p = value; *p && n + 3 < errlen; p++) {
                if (*p == '"' || *p == '\\')
                        err[n++] = '\\';
                err[n++] = *p;
        }
        if (n + 3 >= errlen)
                return -EINVAL;
        err[n++] = '"';
        err[n++] = ':';
        err[n++] = ' ';
        err[n] = '\0';
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err + n, errlen - n, fmt, ap);
        va_end(ap);
        return -EINVAL;
}

static bool is_ip(const char *s, int *ret_family) {
        unsigned char buf[16];
        if (inet_pton(AF_INET, s, buf) == 1) {
                if (ret_family)
                        *ret_family = AF_INET;
                return true;
        }
        if (inet_pton(AF_INET6, s, buf) == 1) {
                if (ret_family)
                        *ret_family = AF_INET6;
                return true;
        }
        return false;
}

int cli_host_check(const char *host, const char *where, char **ret, char *err, size_t errlen) {
        if (!host[0])
                return bad(err, errlen, where, host, "empty host");
        for (const unsigned char *p = (const unsigned char *) host; *p; p++)
                if (*p >= 0x80)
                        return bad(err, errlen, where, host,
                                   "not ASCII (write an internationalized name in its \"xn--\" "
                                   "form)");
        char *h = cli_strdup(host);
        for (char *p = h; *p; p++)
                *p = (char) tolower((unsigned char) *p);
        size_t len = strlen(h);
        if (h[len - 1] == '.')
                h[--len] = '\0';
        if (strcmp(h, "*") == 0) {
                *ret = h;
                return 0;
        }
        /* An IP address (bracketed or not), or digits and dots only. */
        char *bare = cli_strdup(h);
        size_t blen = strlen(bare);
        if (blen >= 2 && bare[0] == '[' && bare[blen - 1] == ']') {
                bare[blen - 1] = '\0';
                bare++;
        }
        bool digits = true;
        for (const char *p = h; *p; p++)
                digits &= isdigit((unsigned char) *p) || *p == '.';
        if (is_ip(bare, NULL) || digits)
                return bad(err, errlen, where, host,
                           "an IP address, not a hostname (use allowed_routes with ADDRESS/32 or "
                           "ADDRESS/128)");
        if (len > 253)
                return bad(err, errlen, where, host, "longer than 253 characters");
        size_t nlabels = 1;
        for (const char *p = h; *p; p++)
                nlabels += *p == '.';
        const char *label = h;
        for (size_t i = 0; i < nlabels; i++) {
                const char *dot = strchr(label, '.');
                size_t llen = dot ? (size_t) (dot - label) : strlen(label);
                if (llen == 0)
                        return bad(err, errlen, where, host, "empty label");
                if (llen == 1 && label[0] == '*') {
                        if (i != 0)
                                return bad(err, errlen, where, host,
                                           "\"*\" only as the whole entry or as a leading \"*.\"");
                        if (nlabels < 3)
                                return bad(err, errlen, where, host,
                                           "a wildcard needs at least two labels after \"*.\"");
                } else {
                        if (llen > 63)
                                return bad(err, errlen, where, host,
                                           "label longer than 63 characters");
                        for (size_t j = 0; j < llen; j++) {
                                unsigned char c = (unsigned char) label[j];
                                if (isalnum(c) || c == '-' || c == '_')
                                        continue;
                                char shown[8];
                                if (c >= 0x20 && c <= 0x7e)
                                        snprintf(shown, sizeof(shown), "'%c'", c);
                                else
                                        snprintf(shown, sizeof(shown), "0x%02x", c);
                                return bad(err, errlen, where, host,
                                           "invalid character %s (letters, digits, '-', '_')",
                                           shown);
                        }
                        if (label[0] == '-' || label[llen - 1] == '-')
                                return bad(err, errlen, where, host,
                                           "label starts or ends with '-'");
                }
                label += llen + 1;
        }
        *ret = h;
        return 0;
}

int cli_cidr_check(const char *cidr, const char *where, char *err, size_t errlen) {
        const char *slash = strchr(cidr, '/');
        char addr[INET6_ADDRSTRLEN + 8];
        int family = 0;
        const char *plen = slash ? slash + 1 : "";
        size_t pl = strlen(plen);
        bool ok = slash && (size_t) (slash - cidr) < sizeof(addr) && pl >= 1 && pl <= 3;
        for (size_t i = 0; ok && i < pl; i++)
                ok = isdigit((unsigned char) plen[i]);
        if (ok) {
                memcpy(addr, cidr, (size_t) (slash - cidr));
                addr[slash - cidr] = '\0';
                ok = is_ip(addr, &family);
        }
        if (!ok)
                return bad(err, errlen, where, cidr, "not a CIDR (ADDRESS/PREFIX, e.g. 10.0.0.0/8)");
        int bits = family == AF_INET ? 32 : 128;
        int prefix = atoi(plen);
        if (prefix > bits)
                return bad(err, errlen, where, cidr, "prefix length over %d", bits);
        unsigned char a[16], net[16];
        inet_pton(family, addr, a);
        memcpy(net, a, sizeof(net));
        for (int b = prefix; b < bits; b++)
                net[b / 8] &= (unsigned char) ~(0x80u >> (b % 8));
        if (memcmp(a, net, (size_t) bits / 8) != 0) {
                char text[INET6_ADDRSTRLEN];
                inet_ntop(family, net, text, sizeof(text));
                return bad(err, errlen, where, cidr, "host bits set (the network is %s/%d)", text,
                           prefix);
        }
        return 0;
}

static int parse_port(const char *s, size_t len, unsigned long *ret) {
        if (len == 0 || len > 10)
                return -EINVAL;
        unsigned long v = 0;
        for (size_t i = 0; i < len; i++) {
                if (!isdigit((unsigned char) s[i]))
                        return -EINVAL;
                v = v * 10 + (unsigned long) (s[i] - '0');
        }
        *ret = v;
        return 0;
}

int cli_route_parse(const char *arg, const char *where, Warren__V1__Route **ret, char *err,
                    size_t errlen) {
        /* CIDR[:PORTS]: the ports start at the first ':' after the '/'
         * (IPv6 addresses have colons of their own). */
        char *cidr = cli_strdup(arg), *ports = NULL;
        char *slash = strchr(cidr, '/');
        if (slash) {
                char *colon = strchr(slash, ':');
                if (colon) {
                        *colon = '\0';
                        ports = colon + 1;
                }
        }
        int r = cli_cidr_check(cidr, where, err, errlen);
        if (r < 0)
                return r;
        Warren__V1__Route *route = cli_alloc(sizeof(*route));
        warren__v1__route__init(route);
        route->cidr = cidr;
        if (ports) {
                size_t i = 0;
                const char *p = ports;
                for (;;) {
                        const char *comma = strchr(p, ',');
                        size_t len = comma ? (size_t) (comma - p) : strlen(p);
                        const char *dash = memchr(p, '-', len);
                        unsigned long a = 0, b = 0;
                        int ra = parse_port(p, dash ? (size_t) (dash - p) : len, &a);
                        int rb = dash ? parse_port(dash + 1, len - (size_t) (dash - p) - 1, &b)
                                      : (b = a, ra);
                        if (ra < 0 || rb < 0)
                                return bad(err, errlen, where, cidr,
                                           "ports[%zu] \"%.*s\": not a port or port range "
                                           "(PORT or START-END)",
                                           i, (int) len, p);
                        char text[48];
                        if (a == b)
                                snprintf(text, sizeof(text), "%lu", a);
                        else
                                snprintf(text, sizeof(text), "%lu-%lu", a, b);
                        if (a < 1 || a > 65535 || b < 1 || b > 65535)
                                return bad(err, errlen, where, cidr,
                                           "ports[%zu] %s: port out of range (1-65535)", i, text);
                        if (a > b)
                                return bad(err, errlen, where, cidr,
                                           "ports[%zu] %s: start after end", i, text);
                        Warren__V1__PortRange *pr = cli_alloc(sizeof(*pr));
                        warren__v1__port_range__init(pr);
                        pr->start = (uint32_t) a;
                        pr->end = (uint32_t) b;
                        cli_push((void ***) &route->ports, &route->n_ports, pr);
                        i++;
                        if (!comma)
                                break;
                        p = comma + 1;
                }
        }
        *ret = route;
        return 0;
}
