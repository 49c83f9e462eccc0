/* SPDX-License-Identifier: Apache-2.0 */
/* src/egress: the control protocol (both directions: encode, decode, every
 * refusal) and the sandbox resolver's DNS query parser, error answers and
 * upstream answer check. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "egress/egress-dns.h"
#include "egress/egress-proto.h"
#include "egress/http-response.h"
#include "egress/http-stream.h"

/* ------------------------------------------------------------ protocol */

static struct net_policy *policy_github(void) {
        struct net_policy *p = NULL;
        assert_int_equal(net_policy_new(&p), 0);
        assert_int_equal(net_policy_add_host(p, "*.github.com", NULL), 0);
        struct net_port_range pr = {.lo = 443, .hi = 443};
        assert_int_equal(net_policy_add_route(p, NET_ROUTES_DENIED, "10.0.0.0/8", &pr, 1, NULL), 0);
        return p;
}

static void encode_set(enum egress_mode mode, struct net_policy *pol, uint8_t **buf, size_t *len) {
        struct egress_policy_msg m = {.mode = mode, .n_addrs = 2, .policy = pol};
        strcpy(m.sandbox, "sb-1");
        assert_int_equal(net_addr_parse("198.19.1.2", &m.addrs[0]), 0);
        assert_int_equal(net_addr_parse("2001:db8::2", &m.addrs[1]), 0);
        assert_int_equal(egress_policy_set_encode(42, &m, buf, len), 0);
}

static void test_policy_set_roundtrip(void **state) {
        struct net_policy *pol = policy_github();
        uint8_t *buf;
        size_t len;
        encode_set(EGRESS_MODE_ENFORCE, pol, &buf, &len);
        struct egress_req req;
        struct wr_err e = {0};
        assert_int_equal(egress_req_decode(buf, len, &req, &e), 0);
        assert_int_equal(req.hdr.type, EGRESS_POLICY_SET);
        assert_int_equal(req.hdr.id, 42);
        assert_string_equal(req.set.sandbox, "sb-1");
        assert_int_equal(req.set.mode, EGRESS_MODE_ENFORCE);
        assert_int_equal(req.set.n_addrs, 2);
        assert_non_null(req.set.policy);
        assert_true(net_policy_name_may_match(req.set.policy, "api.github.com"));
        assert_false(net_policy_name_may_match(req.set.policy, "github.com"));
        /* re-encodes to the same bytes */
        uint8_t *again;
        size_t again_len;
        struct egress_policy_msg m2 = req.set;
        assert_int_equal(egress_policy_set_encode(42, &m2, &again, &again_len), 0);
        assert_int_equal(again_len, len);
        assert_memory_equal(again, buf, len);
        free(again);
        egress_req_done(&req);
        assert_null(req.set.policy);
        free(buf);
        net_policy_free(pol);
}

/* Rules (credentials here) ride after the policy: decoded into
 * req.set.rules with their secret values; LEARN with rules is refused. */
static void test_policy_set_rules(void **state) {
        struct wr_err e = {0};
        struct net_rules rs = {0};
        rs.creds = calloc(1, sizeof(*rs.creds));
        rs.n_creds = 1;
        rs.creds[0].hosts = calloc(1, sizeof(*rs.creds[0].hosts));
        rs.creds[0].n_hosts = 1;
        assert_int_equal(net_host_pattern_parse("api.openai.com", &rs.creds[0].hosts[0], &e), 0);
        rs.creds[0].ph.token = strdup("__warren_secret_0a");
        rs.creds[0].ph.token_len = strlen(rs.creds[0].ph.token);
        rs.creds[0].ph.value = (uint8_t *) strdup("sk-123");
        rs.creds[0].ph.len = 6;
        uint8_t *wire;
        size_t wire_len;
        assert_int_equal(net_rules_serialize(&rs, &wire, &wire_len), 0);
        net_rules_clear(&rs);

        struct egress_policy_msg m = {.mode = EGRESS_MODE_OPEN,
                                      .n_addrs = 1,
                                      .rules_wire = wire,
                                      .rules_wire_len = wire_len};
        strcpy(m.sandbox, "sb-r");
        assert_int_equal(net_addr_parse("198.19.1.2", &m.addrs[0]), 0);
        uint8_t *buf;
        size_t len;
        assert_int_equal(egress_policy_set_encode(9, &m, &buf, &len), 0);
        struct egress_req req;
        assert_int_equal(egress_req_decode(buf, len, &req, &e), 0);
        assert_non_null(req.set.rules);
        assert_int_equal(req.set.rules->n_creds, 1);
        assert_true(net_rules_intercept(req.set.rules, "api.openai.com"));
        assert_false(net_rules_intercept(req.set.rules, "example.com"));
        assert_memory_equal(req.set.rules->creds[0].ph.value, "sk-123", 6);
        egress_req_done(&req);
        assert_null(req.set.rules);
        /* a corrupted rules blob is refused, naming it */
        buf[len - wire_len] ^= 0xff; /* its magic */
        err_clear(&e);
        assert_int_equal(egress_req_decode(buf, len, &req, &e), -EBADMSG);
        assert_non_null(strstr(e.msg, "rules"));
        free(buf);
        /* LEARN records everything and intercepts nothing */
        m.mode = EGRESS_MODE_LEARN;
        assert_int_equal(egress_policy_set_encode(9, &m, &buf, &len), -EINVAL);
        free(wire);
}

static void test_policy_set_refusals(void **state) {
        uint8_t *buf;
        size_t len;
        encode_set(EGRESS_MODE_OPEN, NULL, &buf, &len);
        struct egress_req req;
        struct wr_err e = {0};
        assert_int_equal(egress_req_decode(buf, len, &req, &e), 0);
        egress_req_done(&req);

        /* every truncation is refused */
        for (size_t n = 0; n < len; n++)
                assert_true(egress_req_decode(buf, n, &req, NULL) < 0);
        /* trailing byte */
        uint8_t *longer = calloc(1, len + 1);
        memcpy(longer, buf, len);
        assert_int_equal(egress_req_decode(longer, len + 1, &req, NULL), -EBADMSG);
        free(longer);

        struct {
                size_t off;
                uint8_t val;
                int err;
                const char *msg;
        } flips[] = {
                {0, 0x00, -EBADMSG, "bad header"},                        /* magic */
                {12, 0x01, -EBADMSG, "bad header"},                       /* hdr.reserved */
                {4, 0x09, -EOPNOTSUPP, "unknown request type"},           /* type */
                {24 + 0, 0x00, -EBADMSG, "sandbox id"},                   /* empty id */
                {24 + 1, ' ', -EBADMSG, "sandbox id"},                    /* bad char */
                {24 + 10, 'x', -EBADMSG, "sandbox id"},                   /* junk after NUL */
                {24 + 64, 0x07, -EBADMSG, "unknown mode"},                /* mode */
                {24 + 68, 0x00, -EBADMSG, "no source address"},           /* n_addrs */
                {24 + 68, 0x11, -EMSGSIZE, "source addresses"},           /* n_addrs > 16 */
                {24 + 72, 0x01, -EBADMSG, "a policy goes with ENFORCE"},  /* policy_len */
                {24 + 76, 0x01, -EBADMSG, "payload bytes"},               /* rules_len, no rules */
                {24 + 80, 0x05, -EBADMSG, "address 0 malformed"},         /* family */
                {24 + 81, 0x01, -EBADMSG, "address 0 malformed"},         /* addr reserved */
                {24 + 80 + 4 + 4, 0x01, -EBADMSG, "address 0 malformed"}, /* v4 tail */
        };
        for (size_t i = 0; i < ELEMENTSOF(flips); i++) {
                uint8_t *b = malloc(len);
                memcpy(b, buf, len);
                b[flips[i].off] = flips[i].val;
                err_clear(&e);
                int r = egress_req_decode(b, len, &req, &e);
                if (r != flips[i].err || !strstr(e.msg, flips[i].msg))
                        fail_msg("flip %zu: %d \"%s\"", i, r, e.msg);
                free(b);
        }
        free(buf);

        /* ENFORCE with a policy the decoder refuses: the message names it */
        struct net_policy *pol = policy_github();
        encode_set(EGRESS_MODE_ENFORCE, pol, &buf, &len);
        net_policy_free(pol);
        size_t pol_off = len - 1; /* inside the last route: its port hi byte */
        buf[pol_off] = 0x00;
        buf[pol_off - 1] = 0x00; /* hi = 0 < lo */
        err_clear(&e);
        assert_int_equal(egress_req_decode(buf, len, &req, &e), -EBADMSG);
        assert_non_null(strstr(e.msg, "POLICY_SET"));
        free(buf);
}

static void test_del_ping(void **state) {
        uint8_t out[128];
        int n = egress_policy_del_encode(7, "sb-2", out, sizeof(out));
        assert_int_equal(n, 24 + 64);
        struct egress_req req;
        assert_int_equal(egress_req_decode(out, (size_t) n, &req, NULL), 0);
        assert_string_equal(req.sandbox, "sb-2");
        assert_int_equal(egress_policy_del_encode(7, "", out, sizeof(out)), -EINVAL);
        assert_int_equal(egress_policy_del_encode(7, "a/b", out, sizeof(out)), -EINVAL);
        n = egress_ping_encode(9, out, sizeof(out));
        assert_int_equal(n, 24);
        assert_int_equal(egress_req_decode(out, (size_t) n, &req, NULL), 0);
        assert_int_equal(req.hdr.type, EGRESS_PING);
        assert_int_equal(req.hdr.id, 9);
        /* replies are not requests */
        n = egress_msg_encode(EGRESS_PONG, 9, NULL, 0, out, sizeof(out));
        assert_int_equal(egress_req_decode(out, (size_t) n, &req, NULL), -EOPNOTSUPP);
        assert_int_equal(egress_msg_encode(EGRESS_PONG, 9, out, 200, out, sizeof(out)), -ENOBUFS);
}

static void test_events(void **state) {
        struct egress_event ev;
        memset(&ev, 0, sizeof(ev));
        ev.kind = EGRESS_EVENT_TCP;
        ev.verdict = NET_VERDICT_ALLOW;
        ev.mode = EGRESS_MODE_ENFORCE;
        ev.port = 443;
        struct net_addr a;
        net_addr_parse("198.18.1.11", &a);
        egress_addr_from_net(&ev.dialed, &a);
        egress_str_set(ev.sandbox, sizeof(ev.sandbox), "sb-1");
        egress_str_set(ev.sni, sizeof(ev.sni), "github.com");
        egress_str_set(ev.rule, sizeof(ev.rule), "allowed_hosts[0] github.com");
        uint8_t out[sizeof(struct egress_hdr) + sizeof(ev)];
        int n = egress_msg_encode(EGRESS_EVENT, 1, &ev, sizeof(ev), out, sizeof(out));
        assert_int_equal(n, (int) sizeof(out));
        struct egress_msg m;
        struct wr_err e = {0};
        assert_int_equal(egress_msg_decode(out, (size_t) n, &m, &e), 0);
        assert_string_equal(m.event.sni, "github.com");
        struct net_addr back;
        assert_int_equal(egress_addr_to_net(&m.event.dialed, &back), 0);
        assert_true(net_addr_equal(&a, &back));

        size_t sni_off = sizeof(struct egress_hdr) + offsetof(struct egress_event, sni);
        out[sni_off + 100] = 'x'; /* junk after the NUL */
        assert_int_equal(egress_msg_decode(out, (size_t) n, &m, &e), -EBADMSG);
        out[sni_off + 100] = 0;
        memset(out + sni_off, 'a', EGRESS_SNI_MAX); /* no NUL */
        assert_int_equal(egress_msg_decode(out, (size_t) n, &m, &e), -EBADMSG);
        egress_str_set((char *) out + sni_off, EGRESS_SNI_MAX, "");
        out[sizeof(struct egress_hdr) + offsetof(struct egress_event, kind)] = 9;
        assert_int_equal(egress_msg_decode(out, (size_t) n, &m, &e), -EBADMSG);
        assert_int_equal(egress_msg_decode(out, (size_t) n - 1, &m, &e), -EBADMSG);

        struct egress_result res = {.err = 17};
        egress_str_set(res.msg, sizeof(res.msg), "address in use");
        n = egress_msg_encode(EGRESS_RESULT, 3, &res, sizeof(res), out, sizeof(out));
        assert_int_equal(egress_msg_decode(out, (size_t) n, &m, &e), 0);
        assert_int_equal(m.result.err, 17);
        res.err = -1;
        n = egress_msg_encode(EGRESS_RESULT, 3, &res, sizeof(res), out, sizeof(out));
        assert_int_equal(egress_msg_decode(out, (size_t) n, &m, &e), -EBADMSG);
}

static void test_sandbox_ids(void **state) {
        assert_true(egress_sandbox_id_valid("sb-1"));
        assert_true(egress_sandbox_id_valid("A.b_c-9"));
        char long_id[65];
        memset(long_id, 'a', 64);
        long_id[64] = 0;
        assert_false(egress_sandbox_id_valid(long_id));
        long_id[63] = 0;
        assert_true(egress_sandbox_id_valid(long_id));
        assert_false(egress_sandbox_id_valid(""));
        assert_false(egress_sandbox_id_valid("a b"));
        assert_false(egress_sandbox_id_valid("a/b"));
        assert_false(egress_sandbox_id_valid("\xc3\xa9"));
}

/* ----------------------------------------------------------------- DNS */

static size_t build_query(uint8_t *out, uint16_t id, const char *name, uint16_t qtype, bool opt) {
        size_t n = 0;
        uint8_t hdr[12] = {(uint8_t) (id >> 8), (uint8_t) id, 0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, opt};
        memcpy(out, hdr, 12);
        n = 12;
        const char *p = name;
        while (*p) {
                const char *dot = strchr(p, '.');
                size_t l = dot ? (size_t) (dot - p) : strlen(p);
                out[n++] = (uint8_t) l;
                memcpy(out + n, p, l);
                n += l;
                p += l + (dot ? 1 : 0);
        }
        out[n++] = 0;
        out[n++] = (uint8_t) (qtype >> 8);
        out[n++] = (uint8_t) qtype;
        out[n++] = 0;
        out[n++] = 1;
        if (opt) {
                uint8_t o[11] = {0, 0, 41, 0x10, 0x00, 0, 0, 0, 0, 0, 0};
                memcpy(out + n, o, sizeof(o));
                n += sizeof(o);
        }
        return n;
}

static void test_dns_parse_good(void **state) {
        uint8_t q[512];
        struct egress_dns_query pq;
        size_t n = build_query(q, 0x1234, "API.GitHub.com", 1, false);
        assert_int_equal(egress_dns_query_parse(q, n, &pq, NULL), 0);
        assert_int_equal(pq.id, 0x1234);
        assert_string_equal(pq.name, "api.github.com");
        assert_true(pq.canon_ok);
        assert_int_equal(pq.canon.kind, NET_HOST_NAME);
        assert_int_equal(pq.qtype, 1);
        n = build_query(q, 1, "example.test", 28, true);
        assert_int_equal(egress_dns_query_parse(q, n, &pq, NULL), 0);
        assert_true(pq.has_opt);
        /* names the policy cannot judge parse, but are not canonical */
        n = build_query(q, 1, "_acme-challenge.example.test", 16, false);
        assert_int_equal(egress_dns_query_parse(q, n, &pq, NULL), 0);
        assert_false(pq.canon_ok);
        n = build_query(q, 1, "127.0.0.1", 1, false);
        assert_int_equal(egress_dns_query_parse(q, n, &pq, NULL), 0);
        assert_true(pq.canon_ok);
        assert_int_equal(pq.canon.kind, NET_HOST_IP);
}

static void test_dns_parse_refusals(void **state) {
        uint8_t q[600];
        struct egress_dns_query pq;
        struct wr_err e = {0};
        size_t n = build_query(q, 1, "github.com", 1, false);
        for (size_t k = 0; k < n; k++)
                assert_int_equal(egress_dns_query_parse(q, k, &pq, NULL), -EBADMSG);
        uint8_t b[600];
#define FLIP(off, val, what)                                                                       \
        do {                                                                                       \
                memcpy(b, q, n);                                                                   \
                b[off] = val;                                                                      \
                err_clear(&e);                                                                     \
                assert_int_equal(egress_dns_query_parse(b, n, &pq, &e), -EBADMSG);                 \
                if (!strstr(e.msg, what))                                                          \
                        fail_msg("%s: %s", what, e.msg);                                           \
        } while (0)
        FLIP(2, 0x81, "QR set");
        FLIP(2, 0x29, "opcode");
        FLIP(2, 0x03, "TC set");
        FLIP(5, 2, "QDCOUNT");
        FLIP(5, 0, "QDCOUNT");
        FLIP(7, 1, "answer or authority");
        FLIP(9, 1, "answer or authority");
        FLIP(11, 2, "more than one additional");
        FLIP(11, 1, "not an OPT");
        FLIP(12, 0xc0, "compressed");
        FLIP(12, 0x40, "compressed or extended");
        FLIP(12, 60, "bad label length"); /* longer than what follows */
        FLIP(n - 1, 3, "class");
#undef FLIP
        /* trailing bytes */
        memcpy(b, q, n);
        b[n] = 0;
        assert_int_equal(egress_dns_query_parse(b, n + 1, &pq, NULL), -EBADMSG);
        /* a name over 255 bytes on the wire */
        char name[400] = "";
        for (int i = 0; i < 5; i++)
                strcat(name, "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa.");
        strcat(name, "com");
        n = build_query(q, 1, name, 16, false);
        err_clear(&e);
        assert_int_equal(egress_dns_query_parse(q, n, &pq, &e), -EBADMSG);
        assert_non_null(strstr(e.msg, "255"));
}

static void test_dns_answers(void **state) {
        uint8_t q[512], out[512];
        struct egress_dns_query pq;
        size_t n = build_query(q, 0xbeef, "pypi.org", 1, true);
        assert_int_equal(egress_dns_query_parse(q, n, &pq, NULL), 0);
        int r = egress_dns_error_answer(q, &pq, EGRESS_DNS_RCODE_NXDOMAIN, out, sizeof(out));
        assert_int_equal(r, (int) pq.question_end);
        assert_int_equal(out[0], 0xbe);
        assert_int_equal(out[1], 0xef);
        assert_int_equal(out[2] & 0x80, 0x80); /* QR */
        assert_int_equal(out[2] & 0x01, 0x01); /* RD copied */
        assert_int_equal(out[3] & 0x0f, 3);    /* NXDOMAIN */
        assert_int_equal(out[5], 1);
        assert_int_equal(out[11], 0); /* no OPT echoed */
        assert_int_equal(egress_dns_error_answer(q, &pq, 3, out, 10), -ENOBUFS);
        /* the error answer checks as an answer to the query */
        assert_int_equal(egress_dns_answer_check(out, (size_t) r, 0xbeef, q, &pq), 0);
        assert_int_equal(egress_dns_answer_check(out, (size_t) r, 0xbeee, q, &pq), -EBADMSG);
        out[13] = 'P'; /* case of the name may differ */
        assert_int_equal(egress_dns_answer_check(out, (size_t) r, 0xbeef, q, &pq), 0);
        out[14] = 'x';
        assert_int_equal(egress_dns_answer_check(out, (size_t) r, 0xbeef, q, &pq), -EBADMSG);
        /* a TC answer without question: header only */
        uint8_t tc[12] = {0xbe, 0xef, 0x83, 0x80, 0, 0, 0, 0, 0, 0, 0, 0};
        assert_int_equal(egress_dns_answer_check(tc, 12, 0xbeef, q, &pq), 0);
        tc[7] = 1;
        assert_int_equal(egress_dns_answer_check(tc, 12, 0xbeef, q, &pq), -EBADMSG);
        /* FORMERR keeps the id */
        assert_int_equal(egress_dns_formerr(q, 1, out, sizeof(out)), 12);
        assert_int_equal(out[0], 0);
        assert_int_equal(egress_dns_formerr(q, 5, out, sizeof(out)), 12);
        assert_int_equal(out[0], 0xbe);
        assert_int_equal(out[3] & 0xf, 1);
}

/* ---------------------------------------------------------- HTTP bodies */

static size_t scan_all(struct egress_http_body *b, const char *s, size_t step) {
        size_t len = strlen(s), off = 0;
        while (off < len && b->state != EGRESS_HTTP_AT_HEAD) {
                size_t used, n = MIN(step, len - off);
                assert_int_equal(egress_http_body_scan(b, (const uint8_t *) s + off, n, &used), 0);
                off += used;
                if (used < n)
                        break;
        }
        return off;
}

static void test_http_bodies(void **state) {
        struct egress_http_body b;
        const char *chunked = "5\r\nhello\r\n3;ext=\"a b\"\r\nabc\r\n0\r\nX-T: 1\r\n\r\nGET /next";
        for (size_t step = 1; step < 8; step++) {
                egress_http_body_start(&b, true, 0);
                size_t used = scan_all(&b, chunked, step);
                assert_int_equal(b.state, EGRESS_HTTP_AT_HEAD);
                assert_string_equal(chunked + used, "GET /next");
        }
        egress_http_body_start(&b, false, 4);
        assert_int_equal(scan_all(&b, "abcdGET", 100), 4);
        egress_http_body_start(&b, false, 0);
        assert_int_equal(b.state, EGRESS_HTTP_AT_HEAD);

        static const char *bad[] = {
                "x\r\n",                  /* not hex */
                "\r\n",                   /* no digits */
                "5\nhello",               /* bare LF */
                "5\r\nhelloXY",           /* no CRLF after the data */
                "0\r\nX\nY\r\n",          /* bare LF in a trailer */
                "ffffffffffffffffff\r\n", /* overflow */
        };
        for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
                egress_http_body_start(&b, true, 0);
                size_t used;
                int r = egress_http_body_scan(&b, (const uint8_t *) bad[i], strlen(bad[i]), &used);
                if (r != -EBADMSG)
                        fail_msg("bad[%zu] accepted", i);
        }
        /* an over-long chunk-size line (extensions) */
        char longline[EGRESS_HTTP_LINE_MAX + 10];
        memset(longline, 'a', sizeof(longline));
        longline[0] = '1';
        longline[1] = ';';
        egress_http_body_start(&b, true, 0);
        size_t used;
        assert_int_equal(
                egress_http_body_scan(&b, (const uint8_t *) longline, sizeof(longline), &used),
                -EBADMSG);
}

/* ------------------------------------------------ responses (detection) */

static void test_response_heads(void **state) {
        struct egress_resp_head h;
        const char *ok = "HTTP/1.1 201 Created\r\nContent-Length: 12\r\nX: y\r\n\r\nbody";
        assert_int_equal(egress_resp_head_parse((const uint8_t *) ok, strlen(ok), &h), 0);
        assert_int_equal(h.status, 201);
        assert_true(h.has_content_length);
        assert_int_equal(h.content_length, 12);
        assert_false(h.chunked);
        assert_int_equal(h.head_len, strlen(ok) - 4);
        for (size_t cut = 0; cut < h.head_len; cut++)
                assert_int_equal(egress_resp_head_parse((const uint8_t *) ok, cut, &h), -EAGAIN);
        const char *te = "HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n"
                         "Content-Length: 5\r\n\r\n";
        assert_int_equal(egress_resp_head_parse((const uint8_t *) te, strlen(te), &h), 0);
        assert_true(h.chunked);
        const char *no_reason = "HTTP/1.0 204\r\n\r\n";
        assert_int_equal(egress_resp_head_parse((const uint8_t *) no_reason, strlen(no_reason), &h),
                         0);
        assert_int_equal(h.status, 204);
        static const char *const bad[] = {
                "HTTP/2 200 OK\r\n\r\n",
                "HTTP/1.1 20x OK\r\n\r\n",
                "HTTP/1.1 099 Low\r\n\r\n",
                "HTTP/1.1 200 OK\r\nNo colon\r\n\r\n",
                "HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n",
                "HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n",
                "HTTP/1.1 200 OK\nX: y\r\n\r\n",
                "HTTP/1.1 200 OK\r\n : y\r\n\r\n",
        };
        for (size_t i = 0; i < ELEMENTSOF(bad); i++)
                if (egress_resp_head_parse((const uint8_t *) bad[i], strlen(bad[i]), &h) !=
                    -EBADMSG)
                        fail_msg("accepted: %s", bad[i]);
}

static void test_dechunk_and_json(void **state) {
        char body[] = "5\r\n{\"a\":\r\n1d;ext=1\r\n[1,{\"html_url\":\"no\"}],\"html_u\r\n"
                      "13\r\nrl\":\"https:\\/\\/gh\"}\r\n0\r\nTrailer: x\r\n\r\n";
        long n = egress_dechunk((uint8_t *) body, strlen(body));
        assert_true(n > 0);
        char out[64];
        assert_int_equal(egress_json_top_string((const uint8_t *) body, (size_t) n, "html_url", out,
                                                sizeof(out)),
                         10);
        assert_string_equal(out, "https://gh");
        char bad_chunk[] = "5\r\nab\r\n0\r\n\r\n";
        assert_int_equal(egress_dechunk((uint8_t *) bad_chunk, strlen(bad_chunk)), -EBADMSG);
        /* nested html_urls are not the top-level one; absent; not a string */
        const char *nested = "{\"user\":{\"html_url\":\"x\"},\"n\":1}";
        assert_int_equal(egress_json_top_string((const uint8_t *) nested, strlen(nested),
                                                "html_url", out, sizeof(out)),
                         -ENOENT);
        const char *num = "{\"html_url\":5}";
        assert_int_equal(
                egress_json_top_string((const uint8_t *) num, strlen(num), "html_url", out, 64),
                -ENOENT);
        const char *trunc = "{\"a\":[1,2";
        assert_int_equal(
                egress_json_top_string((const uint8_t *) trunc, strlen(trunc), "html_url", out, 64),
                -EBADMSG);
        const char *longv = "{\"html_url\":\"0123456789\"}";
        assert_int_equal(
                egress_json_top_string((const uint8_t *) longv, strlen(longv), "html_url", out, 5),
                -E2BIG);
        assert_string_equal(out, "0123");
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_policy_set_roundtrip),
                cmocka_unit_test(test_policy_set_refusals),
                cmocka_unit_test(test_policy_set_rules),
                cmocka_unit_test(test_response_heads),
                cmocka_unit_test(test_dechunk_and_json),
                cmocka_unit_test(test_del_ping),
                cmocka_unit_test(test_events),
                cmocka_unit_test(test_sandbox_ids),
                cmocka_unit_test(test_dns_parse_good),
                cmocka_unit_test(test_dns_parse_refusals),
                cmocka_unit_test(test_dns_answers),
                cmocka_unit_test(test_http_bodies),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
