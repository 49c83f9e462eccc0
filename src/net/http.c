/* SPDX-License-Identifier: Apache-2.0 */
/* The strict HTTP/1.1 request-head parser (http.h). */
#include "net/http.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "net/net-internal.h"

static int fail(struct wr_err *e, int code, const char *fmt, ...) _printf_(3, 4);
static int fail(struct wr_err *e, int code, const char *fmt, ...) {
        char msg[WR_ERR_MSG_MAX];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(msg, sizeof(msg), fmt, ap);
        va_end(ap);
        return err_setx(e, code, WR_STATUS_INVALID_ARGUMENT, WR_FAULT_WORKLOAD, "HTTP request: %s",
                        msg);
}

static bool tchar(unsigned char c) {
        return net_is_alpha(c) || net_is_digit(c) || (c && strchr("!#$%&'*+-.^_`|~", c));
}

static bool span_eq(struct net_span s, const char *lit) {
        size_t n = strlen(lit);
        return s.n == n && memcmp(s.p, lit, n) == 0;
}

static bool span_caseeq(struct net_span s, const char *lit) {
        size_t n = strlen(lit);
        return s.n == n && strncasecmp(s.p, lit, n) == 0;
}

/* Parse "host[:port]" (no userinfo). need_port: CONNECT. */
static int parse_authority(struct net_span a, bool need_port, const char *what,
                           struct net_host *host, uint16_t *port, struct wr_err *e) {
        char q[NET_QUOTE_MAX];
        *port = 0;
        if (a.n == 0)
                return fail(e, -EBADMSG, "%s: empty", what);
        if (memchr(a.p, '@', a.n))
                return fail(e, -EBADMSG, "%s %s: userinfo ('@') refused", what,
                            net_quote(a.p, a.n, q));
        size_t hlen = a.n;
        const char *colon = NULL;
        if (a.p[0] == '[') {
                const char *rb = memchr(a.p, ']', a.n);
                if (!rb)
                        return fail(e, -EBADMSG, "%s %s: unclosed '['", what,
                                    net_quote(a.p, a.n, q));
                hlen = (size_t) (rb - a.p) + 1;
                if (hlen < a.n) {
                        if (a.p[hlen] != ':')
                                return fail(e, -EBADMSG, "%s %s: bytes after ']'", what,
                                            net_quote(a.p, a.n, q));
                        colon = a.p + hlen;
                }
        } else {
                colon = memchr(a.p, ':', a.n);
                if (colon) {
                        hlen = (size_t) (colon - a.p);
                        if (memchr(colon + 1, ':', a.n - hlen - 1))
                                return fail(e, -EBADMSG,
                                            "%s %s: more than one ':' (IPv6 needs brackets)", what,
                                            net_quote(a.p, a.n, q));
                }
        }
        if (colon) {
                const char *d = colon + 1, *end = a.p + a.n;
                uint32_t v = 0;
                if (d == end || end - d > 5)
                        return fail(e, -EBADMSG, "%s %s: bad port", what, net_quote(a.p, a.n, q));
                for (; d < end; d++) {
                        if (!net_is_digit((unsigned char) *d))
                                return fail(e, -EBADMSG, "%s %s: bad port", what,
                                            net_quote(a.p, a.n, q));
                        v = v * 10 + (uint32_t) (*d - '0');
                }
                if (v < 1 || v > 65535)
                        return fail(e, -EBADMSG, "%s %s: port out of range", what,
                                    net_quote(a.p, a.n, q));
                *port = (uint16_t) v;
        } else if (need_port)
                return fail(e, -EBADMSG, "%s %s: port required", what, net_quote(a.p, a.n, q));
        int r = net_host_canon(a.p, hlen, WR_FAULT_WORKLOAD, host, e);
        if (r < 0) {
                err_prefix(e, r, "HTTP request: %s", what);
                if (e)
                        e->code = -EBADMSG;
                return -EBADMSG;
        }
        return 0;
}

static int parse_target(struct net_http_head *h, struct wr_err *e) {
        char q[NET_QUOTE_MAX];
        struct net_span t = h->target;
        bool connect = span_eq(h->method, "CONNECT");
        if (memchr(t.p, '#', t.n))
                return fail(e, -EBADMSG, "request-target %s: fragment ('#') refused",
                            net_quote(t.p, t.n, q));
        if (connect) {
                h->form = NET_HTTP_FORM_AUTHORITY;
                h->has_host = true;
                return parse_authority(t, true, "CONNECT target", &h->host, &h->port, e);
        }
        if (t.n == 1 && t.p[0] == '*') {
                if (!span_eq(h->method, "OPTIONS"))
                        return fail(e, -EBADMSG, "request-target \"*\" is for OPTIONS only");
                h->form = NET_HTTP_FORM_ASTERISK;
                return 0;
        }
        if (t.p[0] == '/') {
                h->form = NET_HTTP_FORM_ORIGIN;
                h->path = t;
                return 0;
        }
        static const char scheme[] = "http://";
        size_t sl = sizeof(scheme) - 1;
        if (t.n <= sl || strncasecmp(t.p, scheme, sl) != 0)
                return fail(e, -EBADMSG,
                            "request-target %s: neither origin form (\"/...\") nor an "
                            "http:// URI",
                            net_quote(t.p, t.n, q));
        struct net_span auth = {t.p + sl, 0};
        while (sl + auth.n < t.n && auth.p[auth.n] != '/' && auth.p[auth.n] != '?')
                auth.n++;
        h->form = NET_HTTP_FORM_ABSOLUTE;
        h->path.p = auth.p + auth.n;
        h->path.n = t.n - sl - auth.n;
        h->has_host = true;
        return parse_authority(auth, false, "request-target authority", &h->host, &h->port, e);
}

/* The next line starting at *pos: its span without CRLF; false when the
 * CRLF has not arrived yet. The caller has checked CR/LF pairing. */
static bool next_line(const char *buf, size_t len, size_t *pos, struct net_span *ret) {
        const char *start = buf + *pos;
        const char *lf = memchr(start, '\n', len - *pos);
        if (!lf)
                return false;
        ret->p = start;
        ret->n = (size_t) (lf - start) - 1; /* LF is always preceded by CR here */
        *pos = (size_t) (lf - buf) + 1;
        return true;
}

static int parse_request_line(struct net_span l, struct net_http_head *h, struct wr_err *e) {
        char q[NET_QUOTE_MAX];
        size_t i = 0;
        while (i < l.n && tchar((unsigned char) l.p[i]))
                i++;
        if (i == 0 || i > NET_HTTP_METHOD_MAX || i >= l.n || l.p[i] != ' ')
                return fail(e, -EBADMSG, "request line %s: bad method", net_quote(l.p, l.n, q));
        h->method = (struct net_span){l.p, i};
        size_t t0 = ++i;
        while (i < l.n && (unsigned char) l.p[i] > 0x20 && (unsigned char) l.p[i] < 0x7f)
                i++;
        if (i == t0 || i - t0 > NET_HTTP_TARGET_MAX || i >= l.n || l.p[i] != ' ')
                return fail(e, -EBADMSG, "request line %s: bad request-target",
                            net_quote(l.p, l.n, q));
        h->target = (struct net_span){l.p + t0, i - t0};
        struct net_span v = {l.p + i + 1, l.n - i - 1};
        if (span_eq(v, "HTTP/1.1"))
                h->version = 11;
        else if (span_eq(v, "HTTP/1.0"))
                h->version = 10;
        else
                return fail(e, -EBADMSG, "request line %s: version is not HTTP/1.1 or HTTP/1.0",
                            net_quote(l.p, l.n, q));
        h->trace = span_eq(h->method, "TRACE") || span_eq(h->method, "TRACK");
        return parse_target(h, e);
}

static int parse_header(struct net_span l, struct net_http_header *ret, struct wr_err *e) {
        char q[NET_QUOTE_MAX];
        if (l.p[0] == ' ' || l.p[0] == '\t')
                return fail(e, -EBADMSG, "header line %s: obs-fold (continuation line) refused",
                            net_quote(l.p, l.n, q));
        size_t i = 0;
        while (i < l.n && tchar((unsigned char) l.p[i]))
                i++;
        if (i < l.n && (l.p[i] == ' ' || l.p[i] == '\t'))
                return fail(e, -EBADMSG, "header line %s: whitespace before ':'",
                            net_quote(l.p, l.n, q));
        if (i == 0 || i >= l.n || l.p[i] != ':')
                return fail(e, -EBADMSG, "header line %s: not \"name: value\"",
                            net_quote(l.p, l.n, q));
        ret->name = (struct net_span){l.p, i};
        size_t v = i + 1, end = l.n;
        for (size_t k = v; k < end; k++) {
                unsigned char c = (unsigned char) l.p[k];
                if ((c < 0x20 && c != '\t') || c == 0x7f)
                        return fail(e, -EBADMSG, "header line %s: control character in value",
                                    net_quote(l.p, l.n, q));
        }
        while (v < end && (l.p[v] == ' ' || l.p[v] == '\t'))
                v++;
        while (end > v && (l.p[end - 1] == ' ' || l.p[end - 1] == '\t'))
                end--;
        ret->value = (struct net_span){l.p + v, end - v};
        return 0;
}

static int parse_content_length(struct net_span v, uint64_t *ret, struct wr_err *e) {
        char q[NET_QUOTE_MAX];
        uint64_t n = 0;
        if (v.n == 0 || v.n > 18)
                return fail(e, -EBADMSG, "Content-Length %s: not a decimal number",
                            net_quote(v.p, v.n, q));
        for (size_t i = 0; i < v.n; i++) {
                if (!net_is_digit((unsigned char) v.p[i]))
                        return fail(e, -EBADMSG, "Content-Length %s: not a decimal number",
                                    net_quote(v.p, v.n, q));
                n = n * 10 + (uint64_t) (v.p[i] - '0');
        }
        *ret = n;
        return 0;
}

const struct net_http_header *net_http_head_find(const struct net_http_head *h, const char *name) {
        for (size_t i = 0; h && name && i < h->n_headers; i++)
                if (span_caseeq(h->headers[i].name, name))
                        return &h->headers[i];
        return NULL;
}

int net_http_head_parse(const char *buf, size_t len, struct net_http_head *ret, struct wr_err *e) {
        if (!ret)
                return -EINVAL;
        memset(ret, 0, sizeof(*ret));
        if (!buf && len > 0)
                return -EINVAL;

        /* Framing first: every CR followed by LF, every LF preceded by CR,
         * no NUL, up to the end of the head or of what is there. */
        size_t lim = len < NET_HTTP_HEAD_MAX ? len : NET_HTTP_HEAD_MAX, end = 0;
        for (size_t i = 0; i < lim; i++) {
                char c = buf[i];
                if (c == '\0')
                        return fail(e, -EBADMSG, "NUL byte at offset %zu", i);
                if (c == '\r' && i + 1 < len && buf[i + 1] != '\n')
                        return fail(e, -EBADMSG, "bare CR at offset %zu", i);
                if (c == '\n') {
                        if (i == 0 || buf[i - 1] != '\r')
                                return fail(e, -EBADMSG, "bare LF at offset %zu", i);
                        if (i >= 3 && buf[i - 2] == '\n') {
                                end = i + 1;
                                break;
                        }
                }
        }
        if (len >= 2 && buf[0] == '\r')
                return fail(e, -EBADMSG, "empty line before the request line");
        if (!end && len >= NET_HTTP_HEAD_MAX)
                return fail(e, -E2BIG, "head longer than %u bytes", NET_HTTP_HEAD_MAX);
        /* Without the end yet, the complete lines so far are still judged:
         * what will not pass is refused early. */

        size_t pos = 0;
        struct net_span line;
        const char *avail_end = end ? buf + end : buf + lim;
        size_t avail = (size_t) (avail_end - buf);
        if (!next_line(buf, avail, &pos, &line))
                return -EAGAIN;
        struct net_http_head *h = ret;
        int r = parse_request_line(line, h, e);
        if (r < 0)
                goto fail;

        const struct net_http_header *host_field = NULL, *te_field = NULL, *cl_field = NULL;
        for (;;) {
                if (!next_line(buf, avail, &pos, &line)) {
                        memset(ret, 0, sizeof(*ret));
                        return -EAGAIN;
                }
                if (line.n == 0)
                        break;
                if (h->n_headers >= NET_HTTP_HEADERS_MAX) {
                        r = fail(e, -E2BIG, "more than %d header fields", NET_HTTP_HEADERS_MAX);
                        goto fail;
                }
                struct net_http_header *f = &h->headers[h->n_headers];
                r = parse_header(line, f, e);
                if (r < 0)
                        goto fail;
                h->n_headers++;
                const struct net_http_header **slot = NULL;
                const char *name = NULL;
                if (span_caseeq(f->name, "host"))
                        slot = &host_field, name = "Host";
                else if (span_caseeq(f->name, "content-length"))
                        slot = &cl_field, name = "Content-Length";
                else if (span_caseeq(f->name, "transfer-encoding"))
                        slot = &te_field, name = "Transfer-Encoding";
                else if (span_caseeq(f->name, "upgrade"))
                        h->upgrade = true;
                if (slot) {
                        if (*slot) {
                                r = fail(e, -EBADMSG, "more than one %s field", name);
                                goto fail;
                        }
                        *slot = f;
                }
        }
        if (!end) {
                memset(ret, 0, sizeof(*ret));
                return -EAGAIN; /* cannot happen: the empty line ends the head */
        }

        if (cl_field && te_field) {
                r = fail(e, -EBADMSG, "both Content-Length and Transfer-Encoding");
                goto fail;
        }
        if (cl_field) {
                r = parse_content_length(cl_field->value, &h->content_length, e);
                if (r < 0)
                        goto fail;
                h->has_content_length = true;
        }
        if (te_field) {
                char q[NET_QUOTE_MAX];
                if (h->version == 10) {
                        r = fail(e, -EBADMSG, "Transfer-Encoding on HTTP/1.0");
                        goto fail;
                }
                if (!span_caseeq(te_field->value, "chunked")) {
                        r = fail(e, -EBADMSG, "Transfer-Encoding %s: only \"chunked\" is accepted",
                                 net_quote(te_field->value.p, te_field->value.n, q));
                        goto fail;
                }
                h->chunked = true;
        }
        if (host_field) {
                struct net_host fh;
                uint16_t fport;
                r = parse_authority(host_field->value, false, "Host", &fh, &fport, e);
                if (r < 0)
                        goto fail;
                if (h->has_host) {
                        /* absolute form or CONNECT: the field must agree */
                        uint16_t def = h->form == NET_HTTP_FORM_ABSOLUTE ? 80 : h->port;
                        uint16_t fp = fport ? fport : def, tp = h->port ? h->port : def;
                        if (fh.kind != h->host.kind || strcmp(fh.name, h->host.name) != 0 ||
                            fp != tp) {
                                char q[NET_QUOTE_MAX];
                                r = fail(e, -EBADMSG, "Host %s does not match the request-target",
                                         net_quote(host_field->value.p, host_field->value.n, q));
                                goto fail;
                        }
                } else {
                        h->host = fh;
                        h->port = fport;
                        h->has_host = true;
                }
        } else if (h->version == 11) {
                r = fail(e, -EBADMSG, "HTTP/1.1 request without Host");
                goto fail;
        }
        h->head_len = end;
        return 0;
fail:
        memset(ret, 0, sizeof(*ret));
        return r;
}
