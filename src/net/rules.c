/* SPDX-License-Identifier: Apache-2.0 */
/* Per-host request rules and credential placeholders (rules.h). Fuzzed by
 * tests/fuzz/fuzz-rules.c (wire form, matching, rewriting) and
 * tests/fuzz/fuzz-placeholders.c (substitution against a reference). */
#define PCRE2_CODE_UNIT_WIDTH 8
#include "net/rules.h"

#include <errno.h>
#include <pcre2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "basic/macro.h"
#include "net/net-internal.h"

#define INVALID(e, ...)                                                                            \
        err_setx(e, -EINVAL, WR_STATUS_INVALID_ARGUMENT, WR_FAULT_CLIENT, __VA_ARGS__)

/* ---- small pieces ---- */

static bool is_tchar(unsigned char c) {
        if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9'))
                return true;
        return c && strchr("!#$%&'*+-.^_`|~", c) != NULL;
}

static bool is_token(const char *s, size_t n) {
        if (n == 0)
                return false;
        for (size_t i = 0; i < n; i++)
                if (!is_tchar((unsigned char) s[i]))
                        return false;
        return true;
}

/* A header value byte: HTAB, SP, VCHAR, obs-text. */
static bool is_value_byte(unsigned char c) {
        return c == '\t' || (c >= 0x20 && c != 0x7f);
}

static bool name_is(const char *s, size_t n, const char *lit) {
        return strlen(lit) == n && strncasecmp(s, lit, n) == 0;
}

static char *memdup0(const void *p, size_t n) {
        char *s = malloc(n + 1);
        if (s) {
                if (n)
                        memcpy(s, p, n);
                s[n] = '\0';
        }
        return s;
}

/* ---- matchers ---- */

int net_matcher_set(struct net_matcher *m, enum net_matcher_kind kind, const char *s, size_t len,
                    const char *field, struct wr_err *e) {
        *m = (struct net_matcher){0};
        if (kind == NET_MATCH_ANY)
                return 0;
        if (kind != NET_MATCH_EXACT && kind != NET_MATCH_PREFIX && kind != NET_MATCH_REGEX)
                return INVALID(e, "%s: unknown matcher kind", field);
        if (len > NET_MATCHER_MAX)
                return INVALID(e, "%s: longer than %d bytes", field, NET_MATCHER_MAX);
        if (memchr(s, '\0', len))
                return INVALID(e, "%s: holds a NUL byte", field);
        if (kind == NET_MATCH_REGEX) {
                int err = 0;
                PCRE2_SIZE off = 0;
                pcre2_code *re =
                        pcre2_compile((PCRE2_SPTR) s, len,
                                      PCRE2_ANCHORED | PCRE2_ENDANCHORED | PCRE2_NEVER_UTF |
                                              PCRE2_NEVER_UCP | PCRE2_NO_AUTO_CAPTURE,
                                      &err, &off, NULL);
                if (!re) {
                        PCRE2_UCHAR msg[120];
                        pcre2_get_error_message(err, msg, sizeof(msg));
                        return INVALID(e, "%s: the regex does not compile at offset %zu: %s", field,
                                       (size_t) off, (const char *) msg);
                }
                m->re = re;
        }
        if (!(m->s = memdup0(s, len))) {
                pcre2_code_free(m->re);
                m->re = NULL;
                return -ENOMEM;
        }
        m->len = len;
        m->kind = kind;
        return 0;
}

static void matcher_clear(struct net_matcher *m) {
        free(m->s);
        pcre2_code_free(m->re);
        *m = (struct net_matcher){0};
}

/* 1 match, 0 no match (a regex that hits its match limit does not match). */
static int matcher_match(const struct net_matcher *m, const char *s, size_t n) {
        switch (m->kind) {
        case NET_MATCH_ANY:
                return 1;
        case NET_MATCH_EXACT:
                return n == m->len && memcmp(s, m->s, n) == 0;
        case NET_MATCH_PREFIX:
                return n >= m->len && memcmp(s, m->s, m->len) == 0;
        case NET_MATCH_REGEX: {
                pcre2_match_context *mc = pcre2_match_context_create(NULL);
                pcre2_match_data *md = pcre2_match_data_create(1, NULL);
                int r = 0;
                if (mc && md) {
                        pcre2_set_match_limit(mc, NET_REGEX_MATCH_LIMIT);
                        pcre2_set_depth_limit(mc, NET_REGEX_MATCH_LIMIT / 10);
                        r = pcre2_match(m->re, (PCRE2_SPTR) (n ? s : ""), n, 0, 0, md, mc) >= 0;
                }
                pcre2_match_data_free(md);
                pcre2_match_context_free(mc);
                return r;
        }
        }
        return 0;
}

/* ---- checks ---- */

static const char *const framing_headers[] = {
        "host",
        "content-length",
        "transfer-encoding",
        "connection",
        "keep-alive",
        "te",
        "trailer",
        "upgrade",
        "proxy-connection",
        "proxy-authenticate",
        "proxy-authorization",
};

bool net_header_protected(const char *name, size_t len) {
        for (size_t i = 0; i < ELEMENTSOF(framing_headers); i++)
                if (name_is(name, len, framing_headers[i]))
                        return true;
        return false;
}

int net_header_set_check(const char *name, const char *value, const char *field, struct wr_err *e) {
        char q[NET_QUOTE_MAX];
        size_t n = name ? strlen(name) : 0;
        if (!is_token(name ? name : "", n) || n > 256)
                return INVALID(e, "%s: %s is not a header name (an HTTP token)", field,
                               net_quote(name ? name : "", n, q));
        if (net_header_protected(name, n))
                return INVALID(e,
                               "%s: %s frames or routes the request and cannot be set by a "
                               "rule",
                               field, net_quote(name, n, q));
        size_t vn = value ? strlen(value) : 0;
        if (vn > NET_SECRET_VALUE_MAX)
                return INVALID(e, "%s: the value of %s is longer than %d bytes", field, name,
                               NET_SECRET_VALUE_MAX);
        for (size_t i = 0; i < vn; i++)
                if (!is_value_byte((unsigned char) value[i]))
                        return INVALID(e,
                                       "%s: the value of %s holds a control character (CR, LF, "
                                       "NUL ...)",
                                       field, name);
        return 0;
}

int net_placeholder_check(const char *token, const uint8_t *value, size_t len, const char *field,
                          struct wr_err *e) {
        size_t n = token ? strlen(token) : 0;
        if (n == 0)
                return INVALID(e, "%s: an empty placeholder token is not allowed", field);
        if (n > NET_PLACEHOLDER_MAX)
                return INVALID(e, "%s: the placeholder is longer than %d characters", field,
                               NET_PLACEHOLDER_MAX);
        for (size_t i = 0; i < n; i++) {
                unsigned char c = (unsigned char) token[i];
                if (c <= 0x20 || c >= 0x7f || c == ',' || c == ';' || c == '"')
                        return INVALID(e,
                                       "%s: the placeholder %.64s holds a space, control, ',', "
                                       "';' or '\"'",
                                       field, token);
        }
        if (len > NET_SECRET_VALUE_MAX)
                return INVALID(e, "%s: the secret's value is longer than %d bytes", field,
                               NET_SECRET_VALUE_MAX);
        for (size_t i = 0; i < len; i++)
                if (!is_value_byte(value[i]))
                        /* never quote the value: it is a secret */
                        return INVALID(e,
                                       "%s: the secret's value holds a control character (CR, "
                                       "LF, NUL ...) and cannot go into a header",
                                       field);
        return 0;
}

int net_forward_parse(const char *url, struct net_forward *ret, const char *field,
                      struct wr_err *e) {
        *ret = (struct net_forward){0};
        char q[NET_QUOTE_MAX];
        size_t n = url ? strlen(url) : 0;
        const char *p = url ? url : "";
        if (n > NET_FORWARD_PATH_MAX)
                return INVALID(e, "%s: longer than %d characters", field, NET_FORWARD_PATH_MAX);
        if (strncasecmp(p, "https://", 8) == 0) {
                ret->tls = true;
                p += 8;
        } else if (strncasecmp(p, "http://", 7) == 0) {
                p += 7;
        } else {
                return INVALID(e, "%s: %s is not an http:// or https:// URL", field,
                               net_quote(url ? url : "", n, q));
        }
        const char *end = p + strcspn(p, "/?#");
        if (*end == '?' || *end == '#' || strpbrk(end, "?#"))
                return INVALID(e, "%s: a forward URL takes no query or fragment", field);
        const char *hend = end;
        const char *colon = NULL;
        if (*p == '[') {
                const char *rb = memchr(p, ']', (size_t) (end - p));
                if (!rb)
                        return INVALID(e, "%s: unclosed '[' in the host", field);
                if (rb + 1 < end) {
                        if (rb[1] != ':')
                                return INVALID(e, "%s: bad authority", field);
                        colon = rb + 1;
                }
                hend = rb + 1;
        } else {
                colon = memchr(p, ':', (size_t) (end - p));
                if (colon)
                        hend = colon;
        }
        if (memchr(p, '@', (size_t) (end - p)))
                return INVALID(e, "%s: a forward URL takes no userinfo", field);
        struct wr_err he = {0};
        if (hend == p ||
            net_host_canon(p, (size_t) (hend - p), WR_FAULT_CLIENT, &ret->host, &he) < 0)
                return INVALID(e, "%s: %s", field, he.msg[0] ? he.msg : "no host");
        ret->port = ret->tls ? 443 : 80;
        if (colon) {
                unsigned long v = 0;
                const char *d = colon + 1;
                if (d == end)
                        return INVALID(e, "%s: empty port", field);
                for (; d < end; d++) {
                        if (*d < '0' || *d > '9' ||
                            (v = v * 10 + (unsigned long) (*d - '0')) > 65535)
                                return INVALID(e, "%s: bad port", field);
                }
                if (v == 0)
                        return INVALID(e, "%s: bad port", field);
                ret->port = (uint16_t) v;
        }
        size_t pl = strlen(end);
        while (pl && end[pl - 1] == '/')
                pl--;
        for (size_t i = 0; i < pl; i++)
                if ((unsigned char) end[i] <= 0x20 || (unsigned char) end[i] >= 0x7f)
                        return INVALID(e, "%s: the path holds a space or control character", field);
        memcpy(ret->path, end, pl);
        ret->path[pl] = '\0';
        return 0;
}

/* ---- freeing ---- */

static void ph_clear(struct net_placeholder *ph) {
        free(ph->token);
        if (ph->value)
                explicit_bzero(ph->value, ph->len);
        free(ph->value);
        *ph = (struct net_placeholder){0};
}

static void kv_free(struct net_kv_matcher *v, size_t n) {
        for (size_t i = 0; i < n; i++) {
                free(v[i].name);
                matcher_clear(&v[i].m);
        }
        free(v);
}

void net_rule_clear(struct net_rule *r) {
        if (!r)
                return;
        matcher_clear(&r->path);
        free(r->method);
        kv_free(r->query, r->n_query);
        kv_free(r->headers, r->n_headers);
        for (size_t t = 0; t < r->n_tf; t++) {
                struct net_transform *tf = &r->tf[t];
                for (size_t i = 0; i < tf->n_set; i++) {
                        free(tf->set[i].name);
                        free(tf->set[i].value);
                }
                free(tf->set);
                for (size_t i = 0; i < tf->n_ph; i++)
                        ph_clear(&tf->ph[i]);
                free(tf->ph);
        }
        free(r->tf);
        *r = (struct net_rule){0};
}

void net_rules_clear(struct net_rules *rs) {
        if (!rs)
                return;
        for (size_t h = 0; h < rs->n_hosts; h++) {
                for (size_t i = 0; i < rs->hosts[h].n_rules; i++)
                        net_rule_clear(&rs->hosts[h].rules[i]);
                free(rs->hosts[h].rules);
        }
        free(rs->hosts);
        for (size_t c = 0; c < rs->n_creds; c++) {
                free(rs->creds[c].hosts);
                ph_clear(&rs->creds[c].ph);
        }
        free(rs->creds);
        *rs = (struct net_rules){0};
}

/* ---- deciding ---- */

/* How specific a pattern is: exact beats every suffix, longer suffixes
 * beat shorter ones. */
static size_t specificity(const struct net_host_pattern *p) {
        return p->kind == NET_PATTERN_EXACT ? SIZE_MAX : strlen(p->name);
}

const struct net_host_rules *net_rules_for_host(const struct net_rules *rs, const char *name) {
        const struct net_host_rules *best = NULL;
        for (size_t i = 0; rs && i < rs->n_hosts; i++)
                if (net_host_pattern_match(&rs->hosts[i].host, name) &&
                    (!best || specificity(&rs->hosts[i].host) > specificity(&best->host)))
                        best = &rs->hosts[i];
        return best;
}

static bool cred_matches(const struct net_credential *c, const char *name) {
        for (size_t i = 0; name && i < c->n_hosts; i++)
                if (net_host_pattern_match(&c->hosts[i], name))
                        return true;
        return false;
}

bool net_rules_ssh_name(const struct net_rules *rs, const char *name) {
        for (size_t i = 0; rs && name && i < rs->n_ssh; i++)
                if (rs->ssh[i].host.kind == NET_HOST_NAME &&
                    strcmp(rs->ssh[i].host.name, name) == 0)
                        return true;
        return false;
}

uint32_t net_rules_detects(const struct net_rules *rs, const char *name) {
        uint32_t d = 0;
        if (rs && (rs->detectors & NET_DETECT_GITHUB_PULLS) && name &&
            strcmp(name, NET_GITHUB_API_HOST) == 0)
                d |= NET_DETECT_GITHUB_PULLS;
        return d;
}

bool net_rules_intercept(const struct net_rules *rs, const char *name) {
        if (net_rules_for_host(rs, name) || net_rules_detects(rs, name))
                return true;
        for (size_t i = 0; rs && i < rs->n_creds; i++)
                if (cred_matches(&rs->creds[i], name))
                        return true;
        return false;
}

/* The value of query key (exact name) in q[0..n) ("a=1&b=2"): 1 found
 * once (*v), 0 absent, -1 repeated. A key without '=' has an empty value. */
static int query_find(const char *q, size_t n, const char *key, struct net_span *v) {
        size_t kl = strlen(key);
        int found = 0;
        size_t i = 0;
        while (i <= n && n) {
                size_t j = i;
                while (j < n && q[j] != '&')
                        j++;
                const char *eq = memchr(q + i, '=', j - i);
                size_t nl = eq ? (size_t) (eq - (q + i)) : j - i;
                if (nl == kl && memcmp(q + i, key, kl) == 0) {
                        if (found)
                                return -1;
                        found = 1;
                        v->p = eq ? eq + 1 : q + j;
                        v->n = eq ? (size_t) (q + j - (eq + 1)) : 0;
                }
                i = j + 1;
        }
        return found;
}

int net_rule_match(const struct net_rule *r, const struct net_http_head *h, struct wr_err *e) {
        /* the path as sent, without the query */
        const char *path = h->path.p;
        size_t plen = h->path.n;
        const char *qm = plen ? memchr(path, '?', plen) : NULL;
        size_t path_only = qm ? (size_t) (qm - path) : plen;
        if (!matcher_match(&r->path, path, path_only))
                return 0;
        if (r->method &&
            !(h->method.n == strlen(r->method) && memcmp(h->method.p, r->method, h->method.n) == 0))
                return 0;
        const char *q = qm ? qm + 1 : "";
        size_t qn = qm ? plen - path_only - 1 : 0;
        int result = 1;
        for (size_t i = 0; i < r->n_query; i++) {
                struct net_span v = {0};
                int f = query_find(q, qn, r->query[i].name, &v);
                if (f < 0)
                        return err_setx(e, -EBADMSG, WR_STATUS_INVALID_ARGUMENT, WR_FAULT_CLIENT,
                                        "the query repeats the key %.64s a rule matches on",
                                        r->query[i].name);
                if (f == 0 || !matcher_match(&r->query[i].m, v.p, v.n))
                        result = 0;
        }
        for (size_t i = 0; i < r->n_headers; i++) {
                const struct net_http_header *found = NULL;
                size_t nl = strlen(r->headers[i].name);
                for (size_t k = 0; k < h->n_headers; k++)
                        if (h->headers[k].name.n == nl &&
                            strncasecmp(h->headers[k].name.p, r->headers[i].name, nl) == 0) {
                                if (found)
                                        return err_setx(e, -EBADMSG, WR_STATUS_INVALID_ARGUMENT,
                                                        WR_FAULT_CLIENT,
                                                        "the request repeats the header %.64s a "
                                                        "rule matches on",
                                                        r->headers[i].name);
                                found = &h->headers[k];
                        }
                if (!found || !matcher_match(&r->headers[i].m, found->value.p, found->value.n))
                        result = 0;
        }
        return result;
}

int net_placeholders_replace(const char *in, size_t n, const struct net_ph_list *lists,
                             size_t n_lists, char *out, size_t cap, size_t *out_len) {
        size_t o = 0, i = 0;
        while (i < n) {
                /* the longest token starting at i */
                const struct net_placeholder *best = NULL;
                for (size_t l = 0; l < n_lists; l++)
                        for (size_t k = 0; k < lists[l].n; k++) {
                                const struct net_placeholder *p = &lists[l].ph[k];
                                if (p->token_len && p->token_len <= n - i &&
                                    (!best || p->token_len > best->token_len) &&
                                    memcmp(in + i, p->token, p->token_len) == 0)
                                        best = p;
                        }
                if (best) {
                        if (cap - o < best->len)
                                return -E2BIG;
                        if (best->len)
                                memcpy(out + o, best->value, best->len);
                        o += best->len;
                        i += best->token_len;
                } else {
                        if (o == cap)
                                return -E2BIG;
                        out[o++] = in[i++];
                }
        }
        *out_len = o;
        return 0;
}

/* Append s[0..n) to out. */
static int emit(char *out, size_t cap, size_t *o, const char *s, size_t n) {
        if (cap - *o < n)
                return -E2BIG;
        memcpy(out + *o, s, n);
        *o += n;
        return 0;
}

/* Is name listed in one of the Connection header values (comma-separated
 * tokens)? */
static bool connection_names(const struct net_http_head *h, const char *name, size_t len) {
        for (size_t k = 0; k < h->n_headers; k++) {
                if (!name_is(h->headers[k].name.p, h->headers[k].name.n, "connection"))
                        continue;
                const char *v = h->headers[k].value.p;
                size_t vn = h->headers[k].value.n, i = 0;
                while (i < vn) {
                        while (i < vn && (v[i] == ' ' || v[i] == '\t' || v[i] == ','))
                                i++;
                        size_t j = i;
                        while (j < vn && v[j] != ',' && v[j] != ' ' && v[j] != '\t')
                                j++;
                        if (j > i && j - i == len && strncasecmp(v + i, name, len) == 0)
                                return true;
                        i = j;
                }
        }
        return false;
}

static bool set_by_rule(const struct net_rule *r, const char *name, size_t len) {
        for (size_t t = 0; r && t < r->n_tf; t++)
                for (size_t i = 0; i < r->tf[t].n_set; i++)
                        if (name_is(name, len, r->tf[t].set[i].name))
                                return true;
        return false;
}

/* One header line, placeholders replaced in its value unless protected. */
static int emit_header(char *out, size_t cap, size_t *o, const char *name, size_t nl,
                       const char *val, size_t vl, bool substitute, const struct net_ph_list *lists,
                       size_t n_lists) {
        int r;
        if ((r = emit(out, cap, o, name, nl)) < 0 || (r = emit(out, cap, o, ": ", 2)) < 0)
                return r;
        if (substitute && n_lists) {
                size_t w = 0;
                if ((r = net_placeholders_replace(val, vl, lists, n_lists, out + *o, cap - *o,
                                                  &w)) < 0)
                        return r;
                for (size_t i = 0; i < w; i++)
                        if (!is_value_byte((unsigned char) out[*o + i]))
                                return -EBADMSG;
                *o += w;
        } else if ((r = emit(out, cap, o, val, vl)) < 0) {
                return r;
        }
        return emit(out, cap, o, "\r\n", 2);
}

int net_request_rewrite(const struct net_rules *rs, const struct net_rule *rule,
                        const struct net_http_head *h, const char *cred_host, const char *host_name,
                        uint16_t port, bool tls, char *out, size_t cap, size_t *out_len) {
        /* the placeholders in force: the rule's transforms, then the
         * credentials of this host */
        struct net_ph_list lists[NET_RULE_TRANSFORMS_MAX + NET_CREDENTIALS_MAX];
        size_t nl = 0;
        for (size_t t = 0; rule && t < rule->n_tf && nl < ELEMENTSOF(lists); t++)
                if (rule->tf[t].n_ph)
                        lists[nl++] = (struct net_ph_list){rule->tf[t].ph, rule->tf[t].n_ph};
        for (size_t c = 0; rs && c < rs->n_creds && nl < ELEMENTSOF(lists); c++)
                if (cred_matches(&rs->creds[c], cred_host))
                        lists[nl++] = (struct net_ph_list){&rs->creds[c].ph, 1};
        size_t o = 0;
        int r;
        /* request line: origin form (absolute form becomes its path) */
        const char *target = h->form == NET_HTTP_FORM_ORIGIN ? h->target.p : h->path.p;
        size_t tlen = h->form == NET_HTTP_FORM_ORIGIN ? h->target.n : h->path.n;
        if (tlen == 0) {
                target = "/";
                tlen = 1;
        }
        if ((r = emit(out, cap, &o, h->method.p, h->method.n)) < 0 ||
            (r = emit(out, cap, &o, " ", 1)) < 0)
                return r;
        if (rule && rule->has_forward &&
            (r = emit(out, cap, &o, rule->fwd.path, strlen(rule->fwd.path))) < 0)
                return r;
        if ((r = emit(out, cap, &o, target, tlen)) < 0 ||
            /* the request's own version: an HTTP/1.0 client waits for the
             * close its version implies */
            (r = emit(out, cap, &o, h->version == 10 ? " HTTP/1.0\r\n" : " HTTP/1.1\r\n", 11)) < 0)
                return r;
        /* Host first */
        char hostline[NET_HOST_MAX + 16];
        bool v6 = strchr(host_name, ':') != NULL;
        bool dflt = port == (tls ? 443 : 80);
        int hn = snprintf(hostline, sizeof(hostline), "%s%s%s", v6 ? "[" : "", host_name,
                          v6 ? "]" : "");
        if (!dflt)
                hn += snprintf(hostline + hn, sizeof(hostline) - (size_t) hn, ":%u",
                               (unsigned) port);
        if ((r = emit_header(out, cap, &o, "Host", 4, hostline, (size_t) hn, false, NULL, 0)) < 0)
                return r;
        for (size_t k = 0; k < h->n_headers; k++) {
                const struct net_http_header *hd = &h->headers[k];
                if (name_is(hd->name.p, hd->name.n, "host") ||
                    set_by_rule(rule, hd->name.p, hd->name.n))
                        continue;
                bool sub = !net_header_protected(hd->name.p, hd->name.n) &&
                           !connection_names(h, hd->name.p, hd->name.n);
                if ((r = emit_header(out, cap, &o, hd->name.p, hd->name.n, hd->value.p, hd->value.n,
                                     sub, lists, nl)) < 0)
                        return r;
        }
        for (size_t t = 0; rule && t < rule->n_tf; t++)
                for (size_t i = 0; i < rule->tf[t].n_set; i++) {
                        const struct net_header_set *s = &rule->tf[t].set[i];
                        /* a later transform setting the same name wins */
                        bool later = false;
                        for (size_t t2 = t; t2 < rule->n_tf && !later; t2++)
                                for (size_t i2 = (t2 == t ? i + 1 : 0); i2 < rule->tf[t2].n_set;
                                     i2++)
                                        if (strcasecmp(rule->tf[t2].set[i2].name, s->name) == 0)
                                                later = true;
                        if (later)
                                continue;
                        if ((r = emit_header(out, cap, &o, s->name, strlen(s->name), s->value,
                                             strlen(s->value), true, lists, nl)) < 0)
                                return r;
                }
        if ((r = emit(out, cap, &o, "\r\n", 2)) < 0)
                return r;
        *out_len = o;
        return 0;
}

/* ---- the wire form ----
 *
 *   "WRRL" u16 version(1) u16 n_hosts u16 n_creds
 *   host:   str pattern, u16 n_rules, rule...
 *   rule:   matcher path, str method ("" = any), u16 n_query, (str name,
 *           matcher)..., u16 n_headers, (str name, matcher)..., u16 n_tf,
 *           tf..., str forward_url ("" = none)
 *   tf:     u16 n_set, (str name, str value)..., u16 n_ph, (str token,
 *           str value)...
 *   matcher: u8 kind, str s
 *   cred:   u16 n_hosts, str pattern..., str token, str value
 *   str:    u32 length (little endian), bytes
 */

#define RULES_MAGIC "WRRL"
#define RULES_VERSION 3 /* 2: the detectors after the credentials; 3: SSH destinations */
#define RULES_WIRE_MAX (4u << 20)

struct wbuf {
        uint8_t *p;
        size_t len, cap;
        bool oom;
};

static void wput(struct wbuf *b, const void *s, size_t n) {
        if (b->oom || n == 0)
                return;
        if (b->cap - b->len < n) {
                size_t nc = MAX(b->cap * 2, b->len + n + 256);
                uint8_t *np = malloc(nc);
                if (!np) {
                        b->oom = true;
                        return;
                }
                if (b->len)
                        memcpy(np, b->p, b->len);
                if (b->p)
                        explicit_bzero(b->p, b->cap); /* secret values may be in it */
                free(b->p);
                b->p = np;
                b->cap = nc;
        }
        memcpy(b->p + b->len, s, n);
        b->len += n;
}

static void wu8(struct wbuf *b, unsigned v) {
        uint8_t c = (uint8_t) v;
        wput(b, &c, 1);
}

static void wu16(struct wbuf *b, size_t v) {
        uint8_t c[2] = {(uint8_t) v, (uint8_t) (v >> 8)};
        wput(b, c, 2);
}

static void wstr(struct wbuf *b, const void *s, size_t n) {
        uint8_t c[4] = {(uint8_t) n, (uint8_t) (n >> 8), (uint8_t) (n >> 16), (uint8_t) (n >> 24)};
        wput(b, c, 4);
        wput(b, s, n);
}

static void wcstr(struct wbuf *b, const char *s) {
        wstr(b, s ? s : "", s ? strlen(s) : 0);
}

static void wmatcher(struct wbuf *b, const struct net_matcher *m) {
        wu8(b, (unsigned) m->kind);
        wstr(b, m->s ? m->s : "", m->s ? m->len : 0);
}

static void wpattern(struct wbuf *b, const struct net_host_pattern *p) {
        char txt[NET_HOST_MAX + 3];
        wcstr(b, net_host_pattern_format(p, txt, sizeof(txt)));
}

#define FORWARD_URL_MAX (NET_FORWARD_PATH_MAX + NET_HOST_MAX + 32)

/* The canonical text of a forward URL: scheme://host:port/path. */
static const char *forward_format(const struct net_forward *f, char *url, size_t size) {
        bool v6 = f->host.kind == NET_HOST_IP && strchr(f->host.name, ':');
        snprintf(url, size, "%s://%s%s%s:%u%s", f->tls ? "https" : "http", v6 ? "[" : "",
                 f->host.name, v6 ? "]" : "", (unsigned) f->port, f->path);
        return url;
}

static void wforward(struct wbuf *b, const struct net_rule *r) {
        char url[FORWARD_URL_MAX];
        wcstr(b, r->has_forward ? forward_format(&r->fwd, url, sizeof(url)) : "");
}

int net_rules_serialize(const struct net_rules *rs, uint8_t **ret, size_t *ret_len) {
        struct wbuf b = {0};
        wput(&b, RULES_MAGIC, 4);
        wu16(&b, RULES_VERSION);
        wu16(&b, rs->n_hosts);
        wu16(&b, rs->n_creds);
        for (size_t h = 0; h < rs->n_hosts; h++) {
                const struct net_host_rules *hr = &rs->hosts[h];
                wpattern(&b, &hr->host);
                wu16(&b, hr->n_rules);
                for (size_t i = 0; i < hr->n_rules; i++) {
                        const struct net_rule *r = &hr->rules[i];
                        wmatcher(&b, &r->path);
                        wcstr(&b, r->method);
                        wu16(&b, r->n_query);
                        for (size_t k = 0; k < r->n_query; k++) {
                                wcstr(&b, r->query[k].name);
                                wmatcher(&b, &r->query[k].m);
                        }
                        wu16(&b, r->n_headers);
                        for (size_t k = 0; k < r->n_headers; k++) {
                                wcstr(&b, r->headers[k].name);
                                wmatcher(&b, &r->headers[k].m);
                        }
                        wu16(&b, r->n_tf);
                        for (size_t t = 0; t < r->n_tf; t++) {
                                const struct net_transform *tf = &r->tf[t];
                                wu16(&b, tf->n_set);
                                for (size_t k = 0; k < tf->n_set; k++) {
                                        wcstr(&b, tf->set[k].name);
                                        wcstr(&b, tf->set[k].value);
                                }
                                wu16(&b, tf->n_ph);
                                for (size_t k = 0; k < tf->n_ph; k++) {
                                        wstr(&b, tf->ph[k].token, tf->ph[k].token_len);
                                        wstr(&b, tf->ph[k].value, tf->ph[k].len);
                                }
                        }
                        wforward(&b, r);
                }
        }
        for (size_t c = 0; c < rs->n_creds; c++) {
                const struct net_credential *cr = &rs->creds[c];
                wu16(&b, cr->n_hosts);
                for (size_t k = 0; k < cr->n_hosts; k++)
                        wpattern(&b, &cr->hosts[k]);
                wstr(&b, cr->ph.token, cr->ph.token_len);
                wstr(&b, cr->ph.value, cr->ph.len);
        }
        wu16(&b, rs->detectors);
        wu16(&b, rs->n_ssh);
        for (size_t i = 0; i < rs->n_ssh && i < NET_SSH_DESTS_MAX; i++) {
                char txt[NET_HOST_MAX + 1];
                const struct net_host *h = &rs->ssh[i].host;
                if (h->kind == NET_HOST_NAME)
                        snprintf(txt, sizeof(txt), "%s", h->name);
                else
                        net_addr_format(&h->addr, txt);
                wcstr(&b, txt);
                wu16(&b, rs->ssh[i].port);
        }
        if (b.oom || b.len > RULES_WIRE_MAX) {
                if (b.p)
                        explicit_bzero(b.p, b.cap);
                free(b.p);
                return b.oom ? -ENOMEM : -E2BIG;
        }
        *ret = b.p;
        *ret_len = b.len;
        return 0;
}

struct rbuf {
        const uint8_t *p;
        size_t len, off;
        bool bad;
};

static unsigned ru8(struct rbuf *b) {
        if (b->bad || b->len - b->off < 1) {
                b->bad = true;
                return 0;
        }
        return b->p[b->off++];
}

static size_t ru16(struct rbuf *b) {
        if (b->bad || b->len - b->off < 2) {
                b->bad = true;
                return 0;
        }
        size_t v = (size_t) b->p[b->off] | ((size_t) b->p[b->off + 1] << 8);
        b->off += 2;
        return v;
}

/* A str as a span into the buffer; bad when it runs past the end. */
static const char *rstr(struct rbuf *b, size_t *n) {
        if (b->bad || b->len - b->off < 4) {
                b->bad = true;
                *n = 0;
                return "";
        }
        const uint8_t *c = b->p + b->off;
        size_t l = (size_t) c[0] | (size_t) c[1] << 8 | (size_t) c[2] << 16 | (size_t) c[3] << 24;
        b->off += 4;
        if (b->len - b->off < l) {
                b->bad = true;
                *n = 0;
                return "";
        }
        *n = l;
        b->off += l;
        return (const char *) c + 4;
}

/* A str that must hold no NUL, copied. */
static char *rcstr(struct rbuf *b) {
        size_t n;
        const char *s = rstr(b, &n);
        if (b->bad || memchr(s, '\0', n)) {
                b->bad = true;
                return NULL;
        }
        char *c = memdup0(s, n);
        if (!c)
                b->bad = true;
        return c;
}

#define BAD(e, what) err_setx(e, -EBADMSG, WR_STATUS_INTERNAL, WR_FAULT_SERVICE, "rules: %s", what)

static int rmatcher(struct rbuf *b, struct net_matcher *m, struct wr_err *e) {
        unsigned kind = ru8(b);
        size_t n;
        const char *s = rstr(b, &n);
        if (b->bad)
                return BAD(e, "truncated matcher");
        if (kind == NET_MATCH_ANY)
                return n ? BAD(e, "a matcher of no kind with a string") : 0;
        struct wr_err me = {0};
        int r = net_matcher_set(m, (enum net_matcher_kind) kind, s, n, "matcher", &me);
        if (r == -ENOMEM)
                return r;
        return r < 0 ? BAD(e, me.msg) : 0;
}

static int rpattern(struct rbuf *b, struct net_host_pattern *p, bool allow_any, struct wr_err *e) {
        _cleanup_free_ char *s = rcstr(b);
        if (!s)
                return BAD(e, "truncated host pattern");
        struct wr_err pe = {0};
        char txt[NET_HOST_MAX + 3];
        if (net_host_pattern_parse(s, p, &pe) < 0 || (!allow_any && p->kind == NET_PATTERN_ANY))
                return BAD(e, "bad host pattern");
        /* warrend sends the canonical form only */
        if (strcmp(net_host_pattern_format(p, txt, sizeof(txt)), s) != 0)
                return BAD(e, "host pattern not in canonical form");
        return 0;
}

static int rph(struct rbuf *b, struct net_placeholder *ph, struct wr_err *e) {
        size_t tn, vn;
        const char *t = rstr(b, &tn);
        const char *v = rstr(b, &vn);
        if (b->bad || memchr(t, '\0', tn))
                return BAD(e, "truncated placeholder");
        if (!(ph->token = memdup0(t, tn)) || !(ph->value = malloc(vn ? vn : 1)))
                return -ENOMEM;
        ph->token_len = tn;
        if (vn)
                memcpy(ph->value, v, vn);
        ph->len = vn;
        struct wr_err pe = {0};
        if (net_placeholder_check(ph->token, ph->value, ph->len, "placeholder", &pe) < 0)
                return BAD(e, "bad placeholder");
        return 0;
}

static int rkv(struct rbuf *b, struct net_kv_matcher **v, size_t *nv, bool header,
               struct wr_err *e) {
        size_t n = ru16(b);
        if (b->bad || n > NET_RULE_KV_MAX)
                return BAD(e, "too many matchers");
        if (n && !(*v = calloc(n, sizeof(**v))))
                return -ENOMEM;
        for (size_t k = 0; k < n; k++) {
                (*nv)++; /* counted first: a half-made entry is cleared too */
                (*v)[k].name = rcstr(b);
                if (!(*v)[k].name || !*(*v)[k].name ||
                    (header && !is_token((*v)[k].name, strlen((*v)[k].name))))
                        return BAD(e, "bad matcher name");
                int r = rmatcher(b, &(*v)[k].m, e);
                if (r < 0)
                        return r;
        }
        return 0;
}

static int rrule(struct rbuf *b, struct net_rule *r, struct wr_err *e) {
        int rr;
        if ((rr = rmatcher(b, &r->path, e)) < 0)
                return rr;
        char *method = rcstr(b);
        if (!method)
                return BAD(e, "truncated method");
        if (*method) {
                if (!is_token(method, strlen(method)) || strlen(method) > NET_HTTP_METHOD_MAX) {
                        free(method);
                        return BAD(e, "bad method");
                }
                r->method = method;
        } else {
                free(method);
        }
        if ((rr = rkv(b, &r->query, &r->n_query, false, e)) < 0 ||
            (rr = rkv(b, &r->headers, &r->n_headers, true, e)) < 0)
                return rr;
        size_t ntf = ru16(b);
        if (b->bad || ntf > NET_RULE_TRANSFORMS_MAX)
                return BAD(e, "too many transforms");
        if (ntf && !(r->tf = calloc(ntf, sizeof(*r->tf))))
                return -ENOMEM;
        for (size_t t = 0; t < ntf; t++) {
                r->n_tf++;
                struct net_transform *tf = &r->tf[t];
                size_t ns = ru16(b);
                if (b->bad || ns > NET_RULE_SET_MAX)
                        return BAD(e, "too many headers set");
                if (ns && !(tf->set = calloc(ns, sizeof(*tf->set))))
                        return -ENOMEM;
                for (size_t k = 0; k < ns; k++) {
                        tf->n_set++;
                        tf->set[k].name = rcstr(b);
                        tf->set[k].value = rcstr(b);
                        struct wr_err he = {0};
                        if (!tf->set[k].name || !tf->set[k].value ||
                            net_header_set_check(tf->set[k].name, tf->set[k].value, "set", &he) < 0)
                                return BAD(e, "bad header set");
                }
                size_t np = ru16(b);
                if (b->bad || np > NET_PLACEHOLDERS_MAX)
                        return BAD(e, "too many placeholders");
                if (np && !(tf->ph = calloc(np, sizeof(*tf->ph))))
                        return -ENOMEM;
                for (size_t k = 0; k < np; k++) {
                        tf->n_ph++;
                        if ((rr = rph(b, &tf->ph[k], e)) < 0)
                                return rr;
                }
        }
        _cleanup_free_ char *url = rcstr(b);
        if (!url)
                return BAD(e, "truncated forward URL");
        if (*url) {
                struct wr_err fe = {0};
                char txt[FORWARD_URL_MAX];
                if (net_forward_parse(url, &r->fwd, "forward_url", &fe) < 0 ||
                    strcmp(forward_format(&r->fwd, txt, sizeof(txt)), url) != 0)
                        return BAD(e, "bad forward URL");
                r->has_forward = true;
        }
        return 0;
}

int net_rules_parse(const uint8_t *buf, size_t len, struct net_rules *rs, struct wr_err *e) {
        *rs = (struct net_rules){0};
        struct rbuf b = {.p = buf, .len = len};
        int r = -EBADMSG;
        if (len < 10 || len > RULES_WIRE_MAX || memcmp(buf, RULES_MAGIC, 4) != 0) {
                r = BAD(e, "not a rules message");
                goto fail;
        }
        b.off = 4;
        if (ru16(&b) != RULES_VERSION) {
                r = BAD(e, "unknown version");
                goto fail;
        }
        size_t nh = ru16(&b), nc = ru16(&b);
        if (nh > NET_RULES_HOSTS_MAX || nc > NET_CREDENTIALS_MAX) {
                r = BAD(e, "too many entries");
                goto fail;
        }
        if ((nh && !(rs->hosts = calloc(nh, sizeof(*rs->hosts)))) ||
            (nc && !(rs->creds = calloc(nc, sizeof(*rs->creds))))) {
                r = -ENOMEM;
                goto fail;
        }
        for (size_t h = 0; h < nh; h++) {
                rs->n_hosts++; /* counted first: a half-made entry is cleared too */
                struct net_host_rules *hr = &rs->hosts[h];
                if ((r = rpattern(&b, &hr->host, false, e)) < 0)
                        goto fail;
                size_t n = ru16(&b);
                if (b.bad || n > NET_RULES_PER_HOST_MAX) {
                        r = BAD(e, "too many rules");
                        goto fail;
                }
                if (n && !(hr->rules = calloc(n, sizeof(*hr->rules)))) {
                        r = -ENOMEM;
                        goto fail;
                }
                for (size_t i = 0; i < n; i++) {
                        hr->n_rules++;
                        if ((r = rrule(&b, &hr->rules[i], e)) < 0)
                                goto fail;
                }
        }
        for (size_t c = 0; c < nc; c++) {
                rs->n_creds++;
                struct net_credential *cr = &rs->creds[c];
                size_t n = ru16(&b);
                if (b.bad || n == 0 || n > NET_POLICY_HOSTS_MAX) {
                        r = BAD(e, "bad credential hosts");
                        goto fail;
                }
                if (!(cr->hosts = calloc(n, sizeof(*cr->hosts)))) {
                        r = -ENOMEM;
                        goto fail;
                }
                for (size_t k = 0; k < n; k++, cr->n_hosts++)
                        if ((r = rpattern(&b, &cr->hosts[k], false, e)) < 0)
                                goto fail;
                if ((r = rph(&b, &cr->ph, e)) < 0)
                        goto fail;
        }
        rs->detectors = (uint32_t) ru16(&b);
        if (rs->detectors & ~(uint32_t) NET_DETECT_ALL) {
                r = BAD(e, "unknown detectors");
                goto fail;
        }
        size_t ns = ru16(&b);
        if (ns > NET_SSH_DESTS_MAX) {
                r = BAD(e, "too many SSH destinations");
                goto fail;
        }
        for (size_t i = 0; i < ns && !b.bad; i++) {
                size_t n;
                const char *t = rstr(&b, &n);
                struct net_ssh_dest *d = &rs->ssh[i];
                if (b.bad || n == 0 || n > NET_HOST_MAX ||
                    net_host_canon(t, n, WR_FAULT_CLIENT, &d->host, NULL) < 0) {
                        r = BAD(e, "bad SSH destination");
                        goto fail;
                }
                /* warrend sends the canonical form only (as for host
                 * patterns): one set, one encoding */
                char canon[NET_HOST_MAX + 1];
                if (d->host.kind == NET_HOST_NAME)
                        snprintf(canon, sizeof(canon), "%s", d->host.name);
                else
                        net_addr_format(&d->host.addr, canon);
                if (strlen(canon) != n || memcmp(canon, t, n) != 0) {
                        r = BAD(e, "SSH destination not in canonical form");
                        goto fail;
                }
                d->port = (uint16_t) ru16(&b);
                if (d->port == 0) {
                        r = BAD(e, "bad SSH destination port");
                        goto fail;
                }
                rs->n_ssh++;
        }
        if (b.bad || b.off != len) {
                r = BAD(e, b.bad ? "truncated" : "trailing bytes");
                goto fail;
        }
        return 0;
fail:
        net_rules_clear(rs);
        return r < 0 ? r : -EBADMSG;
}
