/* SPDX-License-Identifier: Apache-2.0 */
/* Per-host request rules and credential placeholders (src/net/rules.h):
 * the seed's placeholder semantics as a table, matching, the rewritten
 * head, checks and the wire form. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "net/rules.h"

static struct net_placeholder ph(const char *token, const char *value) {
        struct net_placeholder p = {.token = strdup(token), .token_len = strlen(token)};
        p.len = strlen(value);
        p.value = malloc(p.len + 1);
        memcpy(p.value, value, p.len + 1);
        return p;
}

static void ph_free(struct net_placeholder *p, size_t n) {
        for (size_t i = 0; i < n; i++) {
                free(p[i].token);
                free(p[i].value);
        }
}

/* The seed's substitution rules, one row each. */
static void test_placeholder_table(void **state) {
        (void) state;
        struct net_placeholder p[] = {
                ph("__warren_secret_X", "x-value"), ph("__warren_secret_XY", "xy-value"),
                ph("__warren_secret_E", ""),
                ph("__warren_secret_R", "__warren_secret_X"), /* a value that looks like a token */
        };
        struct net_ph_list l = {p, 4};
        static const struct {
                const char *in, *out;
        } rows[] = {
                /* longest at the same position */
                {"Bearer __warren_secret_XY", "Bearer xy-value"},
                {"Bearer __warren_secret_X", "Bearer x-value"},
                {"__warren_secret_XZ", "x-valueZ"},
                /* leftmost first */
                {"a__warren_secret_X__warren_secret_XY", "ax-valuexy-value"},
                /* non-recursive */
                {"__warren_secret_R", "__warren_secret_X"},
                /* empty secret removes the token */
                {"k=__warren_secret_E;", "k=;"},
                /* absent: no effect; case-sensitive */
                {"nothing here", "nothing here"},
                {"__WARREN_SECRET_X", "__WARREN_SECRET_X"},
                {"__warren_secret_", "__warren_secret_"},
                {"", ""},
        };
        for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
                char out[256];
                size_t n = 0;
                assert_int_equal(net_placeholders_replace(rows[i].in, strlen(rows[i].in), &l, 1,
                                                          out, sizeof(out), &n),
                                 0);
                out[n] = '\0';
                assert_string_equal(out, rows[i].out);
        }
        char small[4];
        size_t n;
        assert_int_equal(
                net_placeholders_replace("__warren_secret_X", 17, &l, 1, small, sizeof(small), &n),
                -E2BIG);
        ph_free(p, 4);
}

static void test_checks(void **state) {
        (void) state;
        struct wr_err e = {0};
        assert_int_equal(net_header_set_check("Authorization", "Bearer x", "f", &e), 0);
        static const char *const protected[] = {
                "Host", "content-length", "Transfer-Encoding", "Connection",
                "TE",   "Upgrade",        "Keep-Alive",        "Proxy-Authorization"};
        for (size_t i = 0; i < sizeof(protected) / sizeof(protected[0]); i++)
                assert_int_equal(net_header_set_check(protected[i], "x", "f", &e), -EINVAL);
        assert_int_equal(net_header_set_check("Bad Name", "x", "f", &e), -EINVAL);
        assert_int_equal(net_header_set_check("X-A", "a\r\nX-Injected: 1", "f", &e), -EINVAL);
        assert_int_equal(net_placeholder_check("", (const uint8_t *) "v", 1, "f", &e), -EINVAL);
        assert_int_equal(net_placeholder_check("tok en", (const uint8_t *) "v", 1, "f", &e),
                         -EINVAL);
        assert_int_equal(net_placeholder_check("__t", (const uint8_t *) "a\nb", 3, "f", &e),
                         -EINVAL);
        assert_null(strstr(e.msg, "a\nb"));
        assert_int_equal(net_placeholder_check("__t", (const uint8_t *) "", 0, "f", &e), 0);

        struct net_matcher m;
        assert_int_equal(net_matcher_set(&m, NET_MATCH_REGEX, "(", 1, "f", &e), -EINVAL);
        assert_non_null(strstr(e.msg, "regex"));

        struct net_forward f;
        assert_int_equal(net_forward_parse("https://Internal-API.example.com", &f, "f", &e), 0);
        assert_true(f.tls);
        assert_int_equal(f.port, 443);
        assert_string_equal(f.host.name, "internal-api.example.com");
        assert_string_equal(f.path, "");
        assert_int_equal(net_forward_parse("http://10.0.0.1:8080/base/", &f, "f", &e), 0);
        assert_false(f.tls);
        assert_int_equal(f.port, 8080);
        assert_string_equal(f.path, "/base");
        static const char *const bad[] = {"ftp://x",         "https://u@x",  "https://x/?q",
                                          "https://x#f",     "https://:1",   "https://x:0",
                                          "https://x:99999", "https://a..b", "x"};
        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
                assert_int_equal(net_forward_parse(bad[i], &f, "f", &e), -EINVAL);
}

/* A rule like the seed's: path starts_with /v1/, Authorization set with a
 * placeholder, plus a method, a query and a header matcher. */
static void build_rules(struct net_rules *rs) {
        struct wr_err e = {0};
        *rs = (struct net_rules){0};
        rs->hosts = calloc(1, sizeof(*rs->hosts));
        rs->n_hosts = 1;
        assert_int_equal(net_host_pattern_parse("internal-api.example.com", &rs->hosts[0].host, &e),
                         0);
        struct net_rule *r = rs->hosts[0].rules = calloc(2, sizeof(*r));
        rs->hosts[0].n_rules = 2;
        assert_int_equal(net_matcher_set(&r[0].path, NET_MATCH_PREFIX, "/v1/", 4, "p", &e), 0);
        r[0].tf = calloc(1, sizeof(*r[0].tf));
        r[0].n_tf = 1;
        r[0].tf[0].set = calloc(1, sizeof(*r[0].tf[0].set));
        r[0].tf[0].n_set = 1;
        r[0].tf[0].set[0].name = strdup("Authorization");
        r[0].tf[0].set[0].value = strdup("Bearer __warren_secret_API_TOKEN");
        r[0].tf[0].ph = calloc(1, sizeof(*r[0].tf[0].ph));
        r[0].tf[0].n_ph = 1;
        r[0].tf[0].ph[0] = ph("__warren_secret_API_TOKEN", "s3cret-token");
        assert_int_equal(net_forward_parse("https://internal-api.example.com", &r[0].fwd, "f", &e),
                         0);
        r[0].has_forward = true;
        /* second rule: POST /upload?kind=img with X-Mode: fast */
        assert_int_equal(
                net_matcher_set(&r[1].path, NET_MATCH_REGEX, "/upload(/[a-z]+)?", 17, "p", &e), 0);
        r[1].method = strdup("POST");
        r[1].query = calloc(1, sizeof(*r[1].query));
        r[1].n_query = 1;
        r[1].query[0].name = strdup("kind");
        assert_int_equal(net_matcher_set(&r[1].query[0].m, NET_MATCH_EXACT, "img", 3, "q", &e), 0);
        r[1].headers = calloc(1, sizeof(*r[1].headers));
        r[1].n_headers = 1;
        r[1].headers[0].name = strdup("X-Mode");
        assert_int_equal(net_matcher_set(&r[1].headers[0].m, NET_MATCH_EXACT, "fast", 4, "h", &e),
                         0);
        /* a credential for *.slack.com */
        rs->creds = calloc(1, sizeof(*rs->creds));
        rs->n_creds = 1;
        rs->creds[0].hosts = calloc(1, sizeof(*rs->creds[0].hosts));
        rs->creds[0].n_hosts = 1;
        assert_int_equal(net_host_pattern_parse("*.slack.com", &rs->creds[0].hosts[0], &e), 0);
        rs->creds[0].ph = ph("__warren_secret_SLACK", "xoxb-slack");
}

static int parse(const char *req, struct net_http_head *h) {
        struct wr_err e = {0};
        return net_http_head_parse(req, strlen(req), h, &e);
}

static void test_match_and_rewrite(void **state) {
        (void) state;
        struct net_rules rs;
        build_rules(&rs);
        struct wr_err e = {0};
        assert_true(net_rules_intercept(&rs, "internal-api.example.com"));
        assert_true(net_rules_intercept(&rs, "api.slack.com"));
        assert_false(net_rules_intercept(&rs, "slack.com"));
        assert_false(net_rules_intercept(&rs, "example.com"));
        const struct net_host_rules *hr = net_rules_for_host(&rs, "internal-api.example.com");
        assert_non_null(hr);

        static struct net_http_head h;
        assert_int_equal(parse("GET /v1/items?a=1 HTTP/1.1\r\nHost: internal-api.example.com\r\n"
                               "Authorization: Basic old\r\nX-Echo: __warren_secret_API_TOKEN\r\n"
                               "Content-Length: 0\r\nConnection: X-Hop\r\n"
                               "X-Hop: __warren_secret_API_TOKEN\r\n\r\n",
                               &h),
                         0);
        assert_int_equal(net_rule_match(&hr->rules[0], &h, &e), 1);
        assert_int_equal(net_rule_match(&hr->rules[1], &h, &e), 0);
        static char out[4096];
        size_t n = 0;
        assert_int_equal(net_request_rewrite(&rs, &hr->rules[0], &h, "internal-api.example.com",
                                             "internal-api.example.com", 443, true, out,
                                             sizeof(out) - 1, &n),
                         0);
        out[n] = '\0';
        assert_string_equal(out, "GET /v1/items?a=1 HTTP/1.1\r\n"
                                 "Host: internal-api.example.com\r\n"
                                 "X-Echo: s3cret-token\r\n"
                                 "Content-Length: 0\r\n"
                                 "Connection: X-Hop\r\n"
                                 "X-Hop: __warren_secret_API_TOKEN\r\n"
                                 "Authorization: Bearer s3cret-token\r\n"
                                 "\r\n");

        /* no rule matches: unchanged but for the host's credentials (none
         * here): the token goes out verbatim */
        assert_int_equal(parse("GET /v2/x HTTP/1.1\r\nHost: internal-api.example.com\r\n"
                               "X-A: __warren_secret_API_TOKEN\r\n\r\n",
                               &h),
                         0);
        assert_int_equal(net_rule_match(&hr->rules[0], &h, &e), 0);
        assert_int_equal(net_request_rewrite(&rs, NULL, &h, "internal-api.example.com",
                                             "internal-api.example.com", 443, true, out,
                                             sizeof(out) - 1, &n),
                         0);
        out[n] = '\0';
        assert_non_null(strstr(out, "X-A: __warren_secret_API_TOKEN\r\n"));

        /* a credential only for its hosts; never in Host/CL/TE */
        assert_int_equal(parse("POST /api HTTP/1.1\r\nHost: api.slack.com\r\n"
                               "Authorization: Bearer __warren_secret_SLACK\r\n"
                               "Transfer-Encoding: chunked\r\n\r\n",
                               &h),
                         0);
        assert_int_equal(net_request_rewrite(&rs, NULL, &h, "api.slack.com", "api.slack.com", 443,
                                             true, out, sizeof(out) - 1, &n),
                         0);
        out[n] = '\0';
        assert_non_null(strstr(out, "Authorization: Bearer xoxb-slack\r\n"));
        assert_int_equal(net_request_rewrite(&rs, NULL, &h, "api.example.com", "api.example.com",
                                             443, true, out, sizeof(out) - 1, &n),
                         0);
        out[n] = '\0';
        assert_null(strstr(out, "xoxb-slack")); /* wrong host: verbatim */
        assert_non_null(strstr(out, "Bearer __warren_secret_SLACK"));

        /* rule 2: method, query, header; a repeated matched key refuses */
        assert_int_equal(parse("POST /upload/png?kind=img&x=1 HTTP/1.1\r\nHost: "
                               "internal-api.example.com\r\nX-Mode: fast\r\n\r\n",
                               &h),
                         0);
        assert_int_equal(net_rule_match(&hr->rules[1], &h, &e), 1);
        assert_int_equal(parse("GET /upload/png?kind=img HTTP/1.1\r\nHost: "
                               "internal-api.example.com\r\nX-Mode: fast\r\n\r\n",
                               &h),
                         0);
        assert_int_equal(net_rule_match(&hr->rules[1], &h, &e), 0);
        assert_int_equal(parse("POST /upload/PNG?kind=img HTTP/1.1\r\nHost: "
                               "internal-api.example.com\r\nX-Mode: fast\r\n\r\n",
                               &h),
                         0);
        assert_int_equal(net_rule_match(&hr->rules[1], &h, &e), 0); /* regex anchored */
        assert_int_equal(parse("POST /upload?kind=img&kind=img HTTP/1.1\r\nHost: "
                               "internal-api.example.com\r\nX-Mode: fast\r\n\r\n",
                               &h),
                         0);
        assert_int_equal(net_rule_match(&hr->rules[1], &h, &e), -EBADMSG);
        assert_int_equal(parse("POST /upload?kind=img HTTP/1.1\r\nHost: "
                               "internal-api.example.com\r\nX-Mode: fast\r\nx-mode: fast\r\n\r\n",
                               &h),
                         0);
        assert_int_equal(net_rule_match(&hr->rules[1], &h, &e), -EBADMSG);

        /* forward with a path and a port */
        struct net_rule fw = {0};
        assert_int_equal(net_forward_parse("https://other.example.com:8443/base", &fw.fwd, "f", &e),
                         0);
        fw.has_forward = true;
        assert_int_equal(
                parse("GET /v1/x?q=1 HTTP/1.1\r\nHost: internal-api.example.com\r\n\r\n", &h), 0);
        assert_int_equal(net_request_rewrite(&rs, &fw, &h, "internal-api.example.com",
                                             "other.example.com", 8443, true, out, sizeof(out) - 1,
                                             &n),
                         0);
        out[n] = '\0';
        assert_string_equal(out,
                            "GET /base/v1/x?q=1 HTTP/1.1\r\nHost: other.example.com:8443\r\n\r\n");
        net_rules_clear(&rs);
}

static void test_wire(void **state) {
        (void) state;
        struct net_rules rs, back;
        build_rules(&rs);
        rs.detectors = NET_DETECT_GITHUB_PULLS;
        uint8_t *buf = NULL, *buf2 = NULL;
        size_t len = 0, len2 = 0;
        struct wr_err e = {0};
        assert_int_equal(net_rules_serialize(&rs, &buf, &len), 0);
        assert_int_equal(net_rules_parse(buf, len, &back, &e), 0);
        assert_int_equal(net_rules_serialize(&back, &buf2, &len2), 0);
        assert_int_equal(len, len2);
        assert_memory_equal(buf, buf2, len);
        assert_int_equal(back.n_hosts, 1);
        assert_int_equal(back.hosts[0].n_rules, 2);
        assert_int_equal(back.n_creds, 1);
        assert_int_equal(back.detectors, NET_DETECT_GITHUB_PULLS);
        /* the detector's host is intercepted, only it */
        assert_true(net_rules_intercept(&back, "api.github.com"));
        assert_int_equal(net_rules_detects(&back, "api.github.com"), NET_DETECT_GITHUB_PULLS);
        assert_int_equal(net_rules_detects(&back, "github.com"), 0);
        assert_false(net_rules_intercept(&back, "uploads.github.com"));
        /* an unknown detector bit is refused */
        buf[len - 2] |= 0x80;
        {
                struct net_rules t;
                assert_int_equal(net_rules_parse(buf, len, &t, &e), -EBADMSG);
        }
        buf[len - 2] &= 0x7f;
        /* every truncation and a trailing byte are refused */
        for (size_t cut = 0; cut < len; cut++) {
                struct net_rules t;
                assert_int_equal(net_rules_parse(buf, cut, &t, &e), -EBADMSG);
        }
        uint8_t *more = malloc(len + 1);
        memcpy(more, buf, len);
        more[len] = 0;
        struct net_rules t;
        assert_int_equal(net_rules_parse(more, len + 1, &t, &e), -EBADMSG);
        free(more);
        free(buf);
        free(buf2);
        net_rules_clear(&back);
        net_rules_clear(&rs);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_placeholder_table),
                cmocka_unit_test(test_checks),
                cmocka_unit_test(test_match_and_rewrite),
                cmocka_unit_test(test_wire),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
