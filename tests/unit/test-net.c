/* SPDX-License-Identifier: Apache-2.0 */
/* src/net: hostname canonicalisation, addresses and routes, the policy model
 * and its decision, the policy wire form, the TLS ClientHello reader and
 * the HTTP/1.1 request-head parser. Tables of good and adversarial input. */
#include <arpa/inet.h>
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "net/net.h"

static void assert_msg_has(const struct wr_err *e, const char *what, const char *in) {
        if (!strstr(e->msg, what))
                fail_msg("%s: message \"%s\" lacks \"%s\"", in, e->msg, what);
}

/* ---------------------------------------------------------------- hosts */

struct host_good {
        const char *in;
        enum net_host_kind kind;
        const char *canon;
};

static const struct host_good host_goods[] = {
        {"github.com", NET_HOST_NAME, "github.com"},
        {"GitHub.COM", NET_HOST_NAME, "github.com"},
        {"github.com.", NET_HOST_NAME, "github.com"},
        {"API.GitHub.Com.", NET_HOST_NAME, "api.github.com"},
        {"localhost", NET_HOST_NAME, "localhost"},
        {"a-b.c-d.example", NET_HOST_NAME, "a-b.c-d.example"},
        {"xn--bcher-kva.example", NET_HOST_NAME, "xn--bcher-kva.example"}, /* punycode */
        {"XN--BCHER-KVA.example", NET_HOST_NAME, "xn--bcher-kva.example"},
        {"1password.com", NET_HOST_NAME, "1password.com"},
        {"123.example", NET_HOST_NAME, "123.example"},
        {"0x7f.example", NET_HOST_NAME, "0x7f.example"},
        {"example.0x7g", NET_HOST_NAME, "example.0x7g"},
        {"0x1g", NET_HOST_NAME, "0x1g"},
        /* IPv4 in every notation inet_aton accepts */
        {"127.0.0.1", NET_HOST_IP, "127.0.0.1"},
        {"127.0.0.1.", NET_HOST_IP, "127.0.0.1"},
        {"2130706433", NET_HOST_IP, "127.0.0.1"},
        {"0x7f000001", NET_HOST_IP, "127.0.0.1"},
        {"0X7F000001", NET_HOST_IP, "127.0.0.1"},
        {"017700000001", NET_HOST_IP, "127.0.0.1"},
        {"0x7f.1", NET_HOST_IP, "127.0.0.1"},
        {"0177.0.0.1", NET_HOST_IP, "127.0.0.1"},
        {"0177.1", NET_HOST_IP, "127.0.0.1"},
        {"127.1", NET_HOST_IP, "127.0.0.1"},
        {"127.0.1", NET_HOST_IP, "127.0.0.1"},
        {"0", NET_HOST_IP, "0.0.0.0"},
        {"0x0", NET_HOST_IP, "0.0.0.0"},
        {"169.254.169.254", NET_HOST_IP, "169.254.169.254"},
        {"2852039166", NET_HOST_IP, "169.254.169.254"},
        {"0xa9fea9fe", NET_HOST_IP, "169.254.169.254"},
        {"0xA9.0xFE.0xA9.0xFE", NET_HOST_IP, "169.254.169.254"},
        {"0251.0376.0251.0376", NET_HOST_IP, "169.254.169.254"},
        {"169.254.43518", NET_HOST_IP, "169.254.169.254"},
        {"169.16689662", NET_HOST_IP, "169.254.169.254"},
        {"0251.0xfe.43518", NET_HOST_IP, "169.254.169.254"},
        {"025177524776", NET_HOST_IP, "169.254.169.254"},
        {"0x00000000a9fea9fe", NET_HOST_IP, "169.254.169.254"},
        {"4294967295", NET_HOST_IP, "255.255.255.255"},
        /* IPv6, bracketed or not, mapped, zones */
        {"::1", NET_HOST_IP, "::1"},
        {"[::1]", NET_HOST_IP, "::1"},
        {"[0:0:0:0:0:0:0:1]", NET_HOST_IP, "::1"},
        {"::ffff:169.254.169.254", NET_HOST_IP, "::ffff:169.254.169.254"},
        {"[::ffff:a9fe:a9fe]", NET_HOST_IP, "::ffff:169.254.169.254"},
        {"[::FFFF:127.0.0.1]", NET_HOST_IP, "::ffff:127.0.0.1"},
        {"fe80::1%eth0", NET_HOST_IP, "fe80::1"},
        {"[fe80::1%25eth0]", NET_HOST_IP, "fe80::1"},
        {"[fe80::1%eth0]", NET_HOST_IP, "fe80::1"},
        {"2001:DB8::1", NET_HOST_IP, "2001:db8::1"},
        {"64:ff9b::a9fe:a9fe", NET_HOST_IP, "64:ff9b::a9fe:a9fe"},
};

static void test_host_good(void **state) {
        for (size_t i = 0; i < ELEMENTSOF(host_goods); i++) {
                const struct host_good *g = &host_goods[i];
                struct net_host h;
                struct wr_err e = {0};
                if (net_host_canon_str(g->in, &h, &e) < 0)
                        fail_msg("%s: %s", g->in, e.msg);
                if (h.kind != g->kind || strcmp(h.name, g->canon) != 0)
                        fail_msg("%s: kind %d \"%s\", expected %d \"%s\"", g->in, h.kind, h.name,
                                 g->kind, g->canon);
                /* what a libc resolver would connect to, for the IPv4 forms */
                struct in_addr ia;
                if (g->kind == NET_HOST_IP && h.addr.family == AF_INET && !strchr(g->in, '[') &&
                    g->in[strlen(g->in) - 1] != '.') {
                        if (!inet_aton(g->in, &ia))
                                fail_msg("%s: libc inet_aton refuses it", g->in);
                        assert_memory_equal(&ia, h.addr.bytes, 4);
                }
        }
}

struct host_bad {
        const char *in;
        size_t len; /* 0 = strlen */
        const char *why;
};

#define L63 "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"

static const struct host_bad host_bads[] = {
        {"", 0, "empty host"},
        {"foo..bar", 0, "empty label"},
        {".foo", 0, "empty label"},
        {"foo..", 0, "empty label"},
        {".", 0, "empty label"},
        {"..", 0, "empty label"},
        {"-foo.com", 0, "starts or ends with '-'"},
        {"foo-.com", 0, "starts or ends with '-'"},
        {"foo.-com", 0, "starts or ends with '-'"},
        {"a_b.com", 0, "outside letters"},
        {"a b.com", 0, "space"},
        {"a\tb.com", 0, "control character"},
        {"a.com\r\nX-Evil: 1", 0, "CR or LF"},
        {"a.com\nb", 0, "CR or LF"},
        {"evil.com\0.github.com", 20, "NUL byte"},
        {"a%2ecom", 0, "'%'"},
        {"github.com%00", 0, "'%'"},
        {"user@github.com", 0, "'@'"},
        {"a@169.254.169.254", 0, "'@'"},
        {"b\xc3\xbc"
         "cher.de",
         0, "non-ASCII"},
        {"github.com\xe3\x80\x82", 0, "non-ASCII"},                     /* ideographic full stop */
        {"\xef\xbc\x91\xef\xbc\x92\xef\xbc\x97.0.0.1", 0, "non-ASCII"}, /* fullwidth 127 */
        {L63 "a.com", 0, "label longer than 63"},
        {L63 "." L63 "." L63 "." L63 ".com", 0, "longer than 253"},
        {"1.2.3.256", 0, "numeric last label"},
        {"1.2.3.4.5", 0, "numeric last label"},
        {"256.1.1.1", 0, "numeric last label"},
        {"08.1.1.1", 0, "numeric last label"},
        {"0x", 0, "numeric last label"},
        {"00000169.254.169.254", 0, "numeric last label"}, /* '9' in octal */
        {"4294967296", 0, "numeric last label"},
        {"0x100000000", 0, "numeric last label"},
        {"example.123", 0, "numeric last label"},
        {"[127.0.0.1]", 0, "malformed bracketed"},
        {"[::1", 0, "malformed bracketed"},
        {"[]", 0, "malformed bracketed"},
        {"[::1]:443", 0, "malformed bracketed"},
        {"::1]", 0, "':'"},
        {"1::2::3", 0, "':'"},
        {"github.com:443", 0, "':'"},
        {"fe80::1%", 0, "':'"},
        {"fe80::1%eth0/x", 0, "':'"},
        {"*.github.com", 0, "outside letters"},
        {"github.com/x", 0, "outside letters"},
        {"github.com\\@evil", 0, "outside letters"},
};

static void test_host_bad(void **state) {
        for (size_t i = 0; i < ELEMENTSOF(host_bads); i++) {
                const struct host_bad *b = &host_bads[i];
                size_t len = b->len ? b->len : strlen(b->in);
                struct net_host h;
                struct wr_err e = {0};
                int r = net_host_canon(b->in, len, WR_FAULT_WORKLOAD, &h, &e);
                if (r != -EINVAL)
                        fail_msg("#%zu %s: accepted as %d \"%s\"", i, b->in, h.kind, h.name);
                assert_int_equal(e.fault, WR_FAULT_WORKLOAD);
                assert_int_equal(err_status(&e), WR_STATUS_INVALID_ARGUMENT);
                assert_msg_has(&e, b->why, b->in);
                assert_msg_has(&e, "host \"", b->in);
                /* the message never carries raw control bytes */
                for (const char *m = e.msg; *m; m++)
                        assert_true((unsigned char) *m >= 0x20 && (unsigned char) *m < 0x7f);
        }
}

static void test_host_limits(void **state) {
        /* 63-character labels and 253 characters in all pass; one more fails */
        char name[300];
        snprintf(name, sizeof(name), "%s.%s.%s.%s", L63, L63, L63,
                 "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa");
        assert_int_equal(strlen(name), 253);
        struct net_host h;
        assert_int_equal(net_host_canon_str(name, &h, NULL), 0);
        assert_string_equal(h.name, name);
        strcat(name, ".");
        assert_int_equal(net_host_canon_str(name, &h, NULL), 0); /* trailing dot */
        name[253] = 'a';
        assert_int_equal(net_host_canon_str(name, &h, NULL), -EINVAL);
        assert_true(net_host_is_canonical_name("github.com"));
        assert_false(net_host_is_canonical_name("GitHub.com"));
        assert_false(net_host_is_canonical_name("github.com."));
        assert_false(net_host_is_canonical_name("127.0.0.1"));
        assert_false(net_host_is_canonical_name(NULL));
}

/* Our inet_aton agrees with libc's on a grid of tricky spellings. */
static void test_host_aton_vs_libc(void **state) {
        static const char *parts[] = {
                "0",   "00",   "08",         "0x",         "0x0",      "0xff",    "0xfff", "255",
                "256", "0377", "0400",       "65535",      "65536",    "1",       "09",    "0X1",
                "x1",  "",     "4294967295", "4294967296", "16777215", "16777216"};
        char s[128];
        size_t n = ELEMENTSOF(parts);
        for (size_t a = 0; a < n; a++)
                for (size_t b = 0; b < n; b++)
                        for (int shape = 0; shape < 4; shape++) {
                                switch (shape) {
                                case 0:
                                        snprintf(s, sizeof(s), "%s", parts[a]);
                                        break;
                                case 1:
                                        snprintf(s, sizeof(s), "%s.%s", parts[a], parts[b]);
                                        break;
                                case 2:
                                        snprintf(s, sizeof(s), "1.%s.%s", parts[a], parts[b]);
                                        break;
                                default:
                                        snprintf(s, sizeof(s), "%s.2.3.%s", parts[a], parts[b]);
                                }
                                struct in_addr ia;
                                struct net_addr na;
                                int libc = inet_aton(s, &ia);
                                int ours = net_ipv4_aton(s, strlen(s), &na);
                                if ((libc != 0) != (ours == 0))
                                        fail_msg("%s: libc %d, ours %d", s, libc, ours);
                                if (libc)
                                        assert_memory_equal(&ia, na.bytes, 4);
                        }
}

/* ------------------------------------------------------------ addresses */

static struct net_addr A(const char *s) {
        struct net_addr a;
        if (net_addr_parse(s, &a) < 0)
                fail_msg("test address %s does not parse", s);
        return a;
}

static void
test_addr_normalize(void **state) {
        static const struct {
                const char *in, *out; /* out NULL: not an embedding form */
        } t[] = {
                {"::ffff:169.254.169.254", "169.254.169.254"},
                {"::ffff:0:169.254.169.254", "169.254.169.254"}, /* SIIT */
                {"::169.254.169.254", "169.254.169.254"},        /* IPv4-compatible */
                {"::127.0.0.1", "127.0.0.1"},
                {"2002:a9fe:a9fe::", "169.254.169.254"}, /* 6to4 */
                {"2002:7f00:1:1234::5", "127.0.0.1"},
                {"64:ff9b::a9fe:a9fe", "169.254.169.254"}, /* NAT64 */
                {"64:ff9b::10.0.0.1", "10.0.0.1"},
                {"::1", NULL},
                {"::", NULL},
                {"2001:db8::1", NULL},
                {"64:ff9b:1::a9fe:a9fe", NULL}, /* local-use NAT64: not decoded */
                {"8.8.8.8", NULL},
        };
        for (size_t i = 0; i < ELEMENTSOF(t); i++) {
                struct net_addr in = A(t[i].in), out;
                char s[NET_ADDR_STR_MAX];
                bool k = net_addr_normalize(&in, &out);
                if (k != (t[i].out != NULL))
                        fail_msg("%s: normalize said %d", t[i].in, k);
                if (t[i].out)
                        assert_string_equal(net_addr_format(&out, s), t[i].out);
                else
                        assert_true(net_addr_equal(&in, &out));
        }
}

static void test_builtin_deny(void **state) {
        static const struct {
                const char *addr;
                const char *why; /* NULL: not denied */
        } t[] = {
                {"127.0.0.1", "loopback"},
                {"127.255.255.254", "loopback"},
                {"0.0.0.0", "unspecified"},
                {"0.1.2.3", "unspecified"},
                {"169.254.169.254", "link-local"},
                {"169.254.0.1", "link-local"},
                {"::ffff:169.254.169.254", "link-local"},
                {"::ffff:0:a9fe:a9fe", "link-local"},
                {"::169.254.169.254", "link-local"},
                {"2002:a9fe:a9fe::1", "link-local"},
                {"64:ff9b::a9fe:a9fe", "link-local"},
                {"64:ff9b::7f00:1", "loopback"},
                {"::ffff:127.0.0.1", "loopback"},
                {"::1", "loopback"},
                {"::", "unspecified"},
                {"fe80::1", "link-local"},
                {"febf:ffff::1", "link-local"},
                {"fd00:ec2::254", "metadata"},
                {"ff02::1", "multicast"},
                {"224.0.0.1", "multicast"},
                {"239.255.255.250", "multicast"},
                {"255.255.255.255", "broadcast"},
                {"240.0.0.1", "reserved"},
                {"8.8.8.8", NULL},
                {"140.82.112.3", NULL},
                {"2606:4700:4700::1111", NULL},
                {"10.0.0.1", NULL}, /* private: not built-in, see below */
                {"fec0::1", NULL},
                {"169.253.255.255", NULL},
                {"169.255.0.0", NULL},
        };
        for (size_t i = 0; i < ELEMENTSOF(t); i++) {
                struct net_addr a = A(t[i].addr);
                const char *why = NULL;
                char rule[100];
                bool d = net_builtin_denied(&a, 443, NULL, &why, rule, sizeof(rule));
                if (d != (t[i].why != NULL))
                        fail_msg("%s: denied=%d", t[i].addr, d);
                if (d && !strstr(why, t[i].why))
                        fail_msg("%s: reason \"%s\", expected \"%s\"", t[i].addr, why, t[i].why);
                if (d)
                        assert_true(strncmp(rule, "builtin ", 8) == 0);
        }
        /* the host's own addresses (any port) and the daemon's ports (any address) */
        struct net_addr hosts[] = {A("10.1.2.3"), A("2001:db8::5")};
        uint16_t ports[] = {50051};
        struct net_host_deny hd = {hosts, 2, ports, 1};
        struct net_addr a = A("10.1.2.3");
        const char *why;
        char rule[100];
        assert_true(net_builtin_denied(&a, 443, &hd, &why, rule, sizeof(rule)));
        assert_string_equal(rule, "builtin host address 10.1.2.3");
        a = A("::ffff:10.1.2.3");
        assert_true(net_builtin_denied(&a, 80, &hd, &why, NULL, 0));
        a = A("2001:db8::5");
        assert_true(net_builtin_denied(&a, 22, &hd, NULL, NULL, 0));
        a = A("8.8.8.8");
        assert_true(net_builtin_denied(&a, 50051, &hd, &why, rule, sizeof(rule)));
        assert_string_equal(rule, "builtin daemon port 50051");
        assert_false(net_builtin_denied(&a, 443, &hd, &why, rule, sizeof(rule)));
        assert_false(net_builtin_denied(&a, 50051, NULL, &why, rule, sizeof(rule)));
        struct net_addr unset = {0};
        assert_true(net_builtin_denied(&unset, 443, NULL, NULL, NULL, 0));

        const char *range;
        a = A("10.0.0.1");
        assert_true(net_addr_is_private(&a, &range));
        assert_string_equal(range, "10.0.0.0/8");
        a = A("::ffff:192.168.1.1");
        assert_true(net_addr_is_private(&a, &range));
        a = A("fd12::1");
        assert_true(net_addr_is_private(&a, &range));
        a = A("100.64.0.1");
        assert_true(net_addr_is_private(&a, &range));
        a = A("172.32.0.1");
        assert_false(net_addr_is_private(&a, &range));
        assert_null(range);
        /* each private block: its first and last address inside, the next one not */
        static const struct {
                const char *first, *last, *next, *range;
        } edges[] = {
                {"10.0.0.0", "10.255.255.255", "11.0.0.0", "10.0.0.0/8"},
                {"172.16.0.0", "172.31.255.255", "172.32.0.0", "172.16.0.0/12"},
                {"192.168.0.0", "192.168.255.255", "192.169.0.0", "192.168.0.0/16"},
                {"100.64.0.0", "100.127.255.255", "100.128.0.0", "100.64.0.0/10"},
                {"fc00::", "fdff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", "fe00::", "fc00::/7"},
                {"fec0::", "feff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", "ff00::", "fec0::/10"},
        };
        for (size_t i = 0; i < ELEMENTSOF(edges); i++) {
                a = A(edges[i].first);
                assert_true(net_addr_is_private(&a, &range));
                assert_string_equal(range, edges[i].range);
                a = A(edges[i].last);
                assert_true(net_addr_is_private(&a, &range));
                assert_string_equal(range, edges[i].range);
                a = A(edges[i].next);
                assert_false(net_addr_is_private(&a, &range) && strcmp(range, edges[i].range) == 0);
        }
        /* the built-in blocks report themselves in text (the table is binary) */
        static const struct {
                const char *addr, *rule;
        } rules[] = {
                {"0.255.255.255", "builtin 0.0.0.0/8"},
                {"127.1.2.3", "builtin 127.0.0.0/8"},
                {"169.254.169.254", "builtin 169.254.0.0/16"},
                {"239.1.1.1", "builtin 224.0.0.0/4"},
                {"255.255.255.255", "builtin 240.0.0.0/4"},
                {"::", "builtin ::/128"},
                {"::1", "builtin ::1/128"},
                {"fe80::1", "builtin fe80::/10"},
                {"fd00:ec2::254", "builtin fd00:ec2::254/128"},
                {"ff05::2", "builtin ff00::/8"},
        };
        for (size_t i = 0; i < ELEMENTSOF(rules); i++) {
                char text[100];
                a = A(rules[i].addr);
                assert_true(net_builtin_denied(&a, 1, NULL, NULL, text, sizeof(text)));
                assert_string_equal(text, rules[i].rule);
        }
        a = A("fd00:ec2::253");
        assert_false(net_builtin_denied(&a, 1, NULL, NULL, NULL, 0));
        a = A("223.255.255.255");
        assert_false(net_builtin_denied(&a, 1, NULL, NULL, NULL, 0));
}

static void test_cidr(void **state) {
        static const struct {
                const char *in, *canon;
        } good[] = {
                {"10.0.0.0/8", "10.0.0.0/8"},
                {"2001:db8::/32", "2001:db8::/32"},
                {"10.1.2.3", "10.1.2.3/32"},
                {"2001:db8::1", "2001:db8::1/128"},
                {"0.0.0.0/0", "0.0.0.0/0"},
                {"::/0", "::/0"},
                {"169.254.169.254/32", "169.254.169.254/32"},
                {"2001:DB8::/32", "2001:db8::/32"},
                {"::ffff:10.0.0.0/104", "10.0.0.0/8"},
                {"::ffff:169.254.169.254/128", "169.254.169.254/32"},
                {"192.168.0.0/16", "192.168.0.0/16"},
        };
        for (size_t i = 0; i < ELEMENTSOF(good); i++) {
                struct net_cidr c;
                struct wr_err e = {0};
                char s[NET_CIDR_STR_MAX];
                if (net_cidr_parse(good[i].in, &c, &e) < 0)
                        fail_msg("%s: %s", good[i].in, e.msg);
                assert_string_equal(net_cidr_format(&c, s), good[i].canon);
        }
        static const struct {
                const char *in, *why;
        } bad[] = {
                {"10.0.0.0/33", "prefix length must be 0..32"},
                {"2001:db8::/129", "prefix length must be 0..128"},
                {"10.0.0.1/8", "host bits set (did you mean 10.0.0.0/8?)"},
                {"2001:db8::1/32", "did you mean 2001:db8::/32?"},
                {"10.0.0.0/", "prefix length"},
                {"10.0.0.0/08", "prefix length"},
                {"10.0.0.0/+8", "prefix length"},
                {"10.0.0.0/-1", "prefix length"},
                {"10.0.0.0/8/8", "prefix length"},
                {"10.0.0.0/ 8", "prefix length"},
                {"10/8", "not an IPv4 or IPv6 address"},
                {"010.0.0.0/8", "not an IPv4 or IPv6 address"},
                {"0x0a.0.0.0/8", "not an IPv4 or IPv6 address"},
                {"10.0.0.0 /8", "not an IPv4 or IPv6 address"},
                {" 10.0.0.0/8", "not an IPv4 or IPv6 address"},
                {"[::1]/128", "not an IPv4 or IPv6 address"},
                {"fe80::1%eth0/64", "not an IPv4 or IPv6 address"},
                {"github.com/32", "not an IPv4 or IPv6 address"},
                {"foo", "not an IPv4 or IPv6 address"},
                {"", "empty CIDR"},
                {"10.0.0.0/8\n", "prefix length"},
                {"1111:2222:3333:4444:5555:6666:7777:8888/128/128", "prefix length"},
        };
        for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
                struct net_cidr c;
                struct wr_err e = {0};
                if (net_cidr_parse(bad[i].in, &c, &e) != -EINVAL)
                        fail_msg("%s: accepted", bad[i].in);
                assert_msg_has(&e, bad[i].why, bad[i].in);
                assert_msg_has(&e, "route \"", bad[i].in);
                assert_int_equal(e.fault, WR_FAULT_CLIENT);
        }
        struct net_cidr c;
        assert_int_equal(net_cidr_parse("10.0.0.0/8", &c, NULL), 0);
        struct net_addr a = A("10.255.1.1");
        assert_true(net_cidr_contains(&c, &a));
        a = A("11.0.0.0");
        assert_false(net_cidr_contains(&c, &a));
        a = A("::ffff:10.9.9.9");
        assert_false(net_cidr_contains(&c, &a));
        assert_true(net_cidr_contains_any(&c, &a));
        assert_int_equal(net_cidr_parse("172.16.0.0/12", &c, NULL), 0);
        a = A("172.31.255.255");
        assert_true(net_cidr_contains(&c, &a));
        a = A("172.32.0.0");
        assert_false(net_cidr_contains(&c, &a));
        assert_int_equal(net_cidr_parse("0.0.0.0/0", &c, NULL), 0);
        a = A("2001:db8::1");
        assert_false(net_cidr_contains_any(&c, &a)); /* families do not mix */
}

static void test_ports(void **state) {
        struct net_port_range pr;
        struct wr_err e = {0};
        assert_int_equal(net_port_range_check(1, 1, &pr, &e), 0);
        assert_int_equal(net_port_range_check(5432, 5432, &pr, &e), 0);
        assert_int_equal(net_port_range_check(1, 65535, &pr, &e), 0);
        assert_int_equal(pr.hi, 65535);
        assert_int_equal(net_port_range_check(5, 1, &pr, &e), -EINVAL);
        assert_string_equal(e.msg, "port range (5, 1): start above end");
        assert_int_equal(net_port_range_check(0, 5, &pr, &e), -EINVAL);
        assert_string_equal(e.msg, "port range (0, 5): ports must be 1..65535");
        assert_int_equal(net_port_range_check(1, 65536, &pr, &e), -EINVAL);
        assert_int_equal(net_port_range_check(65536, 65536, &pr, &e), -EINVAL);
        assert_int_equal(net_port_range_check(0xffffffffu, 1, &pr, &e), -EINVAL);

        assert_int_equal(net_port_range_parse("443", &pr, &e), 0);
        assert_true(pr.lo == 443 && pr.hi == 443);
        assert_int_equal(net_port_range_parse("1000-2000", &pr, &e), 0);
        assert_true(pr.lo == 1000 && pr.hi == 2000);
        static const char *bad[] = {"0",  "65536", "5-1",   "-5", "5-",   "+5",         "05",
                                    " 5", "5 ",    "1-2-3", "",   "0x50", "99999999999"};
        for (size_t i = 0; i < ELEMENTSOF(bad); i++)
                if (net_port_range_parse(bad[i], &pr, &e) != -EINVAL)
                        fail_msg("port range \"%s\" accepted", bad[i]);
}

/* --------------------------------------------------------------- policy */

static void test_pattern(void **state) {
        static const struct {
                const char *in, *canon;
                enum net_pattern_kind kind;
        } good[] = {
                {"*", "*", NET_PATTERN_ANY},
                {"github.com", "github.com", NET_PATTERN_EXACT},
                {"GitHub.com.", "github.com", NET_PATTERN_EXACT},
                {"*.github.com", "*.github.com", NET_PATTERN_SUFFIX},
                {"*.GitHub.COM.", "*.github.com", NET_PATTERN_SUFFIX},
                {"*.co.uk", "*.co.uk", NET_PATTERN_SUFFIX}, /* no public-suffix list */
                {"localhost", "localhost", NET_PATTERN_EXACT},
                {"xn--bcher-kva.example", "xn--bcher-kva.example", NET_PATTERN_EXACT},
        };
        for (size_t i = 0; i < ELEMENTSOF(good); i++) {
                struct net_host_pattern p;
                struct wr_err e = {0};
                char s[NET_HOST_MAX + 3];
                if (net_host_pattern_parse(good[i].in, &p, &e) < 0)
                        fail_msg("%s: %s", good[i].in, e.msg);
                assert_int_equal(p.kind, good[i].kind);
                assert_string_equal(net_host_pattern_format(&p, s, sizeof(s)), good[i].canon);
        }
        static const struct {
                const char *in, *why;
        } bad[] = {
                {"*.com", "at least two labels after \"*.\""},
                {"*.com.", "at least two labels"},
                {"*.localhost", "at least two labels"},
                {"*", NULL},
                {"**", "'*' is allowed only"},
                {"*.", "needs a domain"},
                {"*..", "needs a domain"},
                {"*example.com", "'*' is allowed only"},
                {"a.*.com", "'*' is allowed only"},
                {"*.*.example.com", "'*' is allowed only"},
                {"api.*", "'*' is allowed only"},
                {"", "empty entry"},
                {"127.0.0.1", "use allowed_routes"},
                {"2130706433", "use allowed_routes"},
                {"0x7f.1", "use allowed_routes"},
                {"169.254.169.254", "use allowed_routes"},
                {"[::1]", "use allowed_routes"},
                {"::ffff:169.254.169.254", "use allowed_routes"},
                {"*.10.0.0.1", "use allowed_routes"},
                {"github.com:443", "':'"},
                {"https://github.com", "':'"},
                {"user@github.com", "'@'"},
                {"foo..bar", "empty label"},
                {"-github.com", "'-'"},
                {"gith ub.com", "space"},
                {"b\xc3\xbc"
                 "cher.de",
                 "non-ASCII"},
                {"github.com/", "outside letters"},
        };
        for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
                if (!bad[i].why)
                        continue;
                struct net_host_pattern p;
                struct wr_err e = {0};
                if (net_host_pattern_parse(bad[i].in, &p, &e) != -EINVAL)
                        fail_msg("pattern %s accepted", bad[i].in);
                assert_msg_has(&e, bad[i].why, bad[i].in);
        }
        /* matching: canonical strings, any depth, never the apex */
        struct net_host_pattern p;
        assert_int_equal(net_host_pattern_parse("*.github.com", &p, NULL), 0);
        assert_true(net_host_pattern_match(&p, "api.github.com"));
        assert_true(net_host_pattern_match(&p, "a.b.c.github.com"));
        assert_false(net_host_pattern_match(&p, "github.com"));
        assert_false(net_host_pattern_match(&p, "evilgithub.com"));
        assert_false(net_host_pattern_match(&p, "github.com.evil.com"));
        assert_false(net_host_pattern_match(&p, ".github.com"));
        assert_false(net_host_pattern_match(&p, NULL));
        assert_int_equal(net_host_pattern_parse("github.com", &p, NULL), 0);
        assert_true(net_host_pattern_match(&p, "github.com"));
        assert_false(net_host_pattern_match(&p, "api.github.com"));
}

static void test_policy_add_errors(void **state) {
        _cleanup_net_policy_ struct net_policy *p = NULL;
        struct wr_err e = {0};
        assert_int_equal(net_policy_new(&p), 0);
        assert_int_equal(net_policy_add_host(p, "github.com", &e), 0);
        assert_int_equal(net_policy_add_host(p, "*.com", &e), -EINVAL);
        assert_string_equal(e.msg, "allowed_hosts[1]: \"*.com\": a wildcard needs at least two "
                                   "labels after \"*.\" (\"*.example.com\", not \"*.com\")");
        assert_int_equal(err_status(&e), WR_STATUS_INVALID_ARGUMENT);
        assert_int_equal(e.fault, WR_FAULT_CLIENT);
        err_clear(&e);
        assert_int_equal(net_policy_add_host(p, "foo..bar", &e), -EINVAL);
        assert_string_equal(e.msg, "allowed_hosts[1]: host \"foo..bar\": empty label");
        err_clear(&e);
        assert_int_equal(net_policy_add_host(p, "10.0.0.1", &e), -EINVAL);
        assert_string_equal(e.msg, "allowed_hosts[1]: \"10.0.0.1\": an IP address is not a "
                                   "hostname pattern (use allowed_routes for addresses)");
        assert_int_equal(p->n_hosts, 1);

        struct net_port_range ok[] = {{5432, 5432}}, rev[] = {{80, 80}, {5, 1}},
                              big[] = {{1, 65536}};
        err_clear(&e);
        assert_int_equal(net_policy_add_route(p, NET_ROUTES_ALLOWED, "10.0.0.0/8", ok, 1, &e), 0);
        assert_int_equal(net_policy_add_route(p, NET_ROUTES_ALLOWED, "10.0.0.0/33", ok, 1, &e),
                         -EINVAL);
        assert_string_equal(
                e.msg, "allowed_routes[1]: route \"10.0.0.0/33\": prefix length must be 0..32");
        err_clear(&e);
        assert_int_equal(net_policy_add_route(p, NET_ROUTES_DENIED, "10.0.0.0/8", rev, 2, &e),
                         -EINVAL);
        assert_string_equal(e.msg, "denied_routes[0] ports[1]: port range (5, 1): start above end");
        err_clear(&e);
        assert_int_equal(net_policy_add_route(p, NET_ROUTES_DENIED, "10.0.0.0/8", big, 1, &e),
                         -EINVAL);
        assert_string_equal(
                e.msg, "denied_routes[0] ports[0]: port range (1, 65536): ports must be 1..65535");
        err_clear(&e);
        assert_int_equal(net_policy_add_route(p, NET_ROUTES_DENIED, "10.0.0.1/8", NULL, 0, &e),
                         -EINVAL);
        assert_string_equal(e.msg, "denied_routes[0]: route \"10.0.0.1/8\": host bits set (did "
                                   "you mean 10.0.0.0/8?)");
        assert_int_equal(p->n_allowed, 1);
        assert_int_equal(p->n_denied, 0);
        struct net_port_range many[NET_ROUTE_PORTS_MAX + 1];
        for (size_t i = 0; i < ELEMENTSOF(many); i++)
                many[i] = (struct net_port_range){1, 2};
        assert_int_equal(net_policy_add_route(p, NET_ROUTES_DENIED, "10.0.0.0/8", many,
                                              ELEMENTSOF(many), &e),
                         -E2BIG);
        for (int i = 1; i < NET_POLICY_HOSTS_MAX; i++)
                assert_int_equal(net_policy_add_host(p, "a.example", NULL), 0);
        assert_int_equal(net_policy_add_host(p, "a.example", &e), -E2BIG);
        assert_msg_has(&e, "more than 1024", "hosts limit");
}

/* A policy from lists; NULL ends each list. Routes are "CIDR" or
 * "CIDR lo-hi[,lo-hi]". */
static struct net_policy *mkpolicy(const char **hosts, const char **allowed, const char **denied) {
        struct net_policy *p;
        struct wr_err e = {0};
        assert_int_equal(net_policy_new(&p), 0);
        for (; hosts && *hosts; hosts++)
                if (net_policy_add_host(p, *hosts, &e) < 0)
                        fail_msg("%s", e.msg);
        for (int l = 0; l < 2; l++)
                for (const char **r = l ? denied : allowed; r && *r; r++) {
                        char buf[200];
                        snprintf(buf, sizeof(buf), "%s", *r);
                        struct net_port_range pr[8];
                        size_t n = 0;
                        char *sp = strchr(buf, ' ');
                        if (sp) {
                                *sp = '\0';
                                for (char *tok = strtok(sp + 1, ","); tok; tok = strtok(NULL, ","))
                                        assert_int_equal(net_port_range_parse(tok, &pr[n++], &e),
                                                         0);
                        }
                        if (net_policy_add_route(p, l ? NET_ROUTES_DENIED : NET_ROUTES_ALLOWED, buf,
                                                 pr, n, &e) < 0)
                                fail_msg("%s", e.msg);
                }
        return p;
}

struct decide_case {
        const char *host; /* canonical name or NULL */
        const char *addr;
        uint16_t port;
        enum net_verdict v;
        const char *rule; /* prefix of the rule text */
};

static void run_cases(const struct net_policy *p, const struct decide_case *c, size_t n,
                      const struct net_host_deny *hd) {
        for (size_t i = 0; i < n; i++) {
                struct net_dest d = {.host = c[i].host, .addr = A(c[i].addr), .port = c[i].port};
                struct net_decision dec;
                assert_int_equal(p ? net_policy_decide(p, &d, hd, &dec)
                                   : net_policy_decide_open(&d, hd, &dec),
                                 0);
                if (dec.verdict != c[i].v || strncmp(dec.rule, c[i].rule, strlen(c[i].rule)) != 0)
                        fail_msg("case %zu (%s %s:%u): %s \"%s\" (%s), expected %s \"%s\"", i,
                                 c[i].host ? c[i].host : "-", c[i].addr, c[i].port,
                                 dec.verdict ? "allow" : "deny", dec.rule, dec.reason,
                                 c[i].v ? "allow" : "deny", c[i].rule);
                assert_non_null(dec.reason);
        }
}

#define ALLOW NET_VERDICT_ALLOW
#define DENY NET_VERDICT_DENY

static void test_decide_seed_hosts(void **state) {
        /* the seed's first example */
        const char *hosts[] = {"api.openai.com", "github.com", "pypi.org", NULL};
        _cleanup_net_policy_ struct net_policy *p = mkpolicy(hosts, NULL, NULL);
        const struct decide_case c[] = {
                {"github.com", "140.82.112.3", 443, ALLOW, "allowed_hosts[1] github.com"},
                {"api.github.com", "140.82.112.5", 443, DENY, "default deny"},
                {"pypi.org", "151.101.0.223", 443, ALLOW, "allowed_hosts[2] pypi.org"},
                {"evil.com", "1.2.3.4", 443, DENY, "default deny"},
                {NULL, "140.82.112.3", 443, DENY, "default deny"},           /* no name */
                {"140.82.112.3", "140.82.112.3", 443, DENY, "default deny"}, /* IP literal */
                {"GitHub.com", "140.82.112.3", 443, DENY, "none"},           /* not canonical */
                {"github.com.", "140.82.112.3", 443, DENY, "none"},
                {"github.com", "127.0.0.1", 443, DENY, "builtin 127.0.0.0/8"},
                {"github.com", "169.254.169.254", 80, DENY, "builtin 169.254.0.0/16"},
                {"github.com", "::ffff:169.254.169.254", 80, DENY, "builtin 169.254.0.0/16"},
                {"github.com", "64:ff9b::7f00:1", 80, DENY, "builtin 127.0.0.0/8"},
                {"github.com", "10.0.0.5", 443, DENY,
                 "allowed_hosts[1] github.com, address in 10.0.0.0/8"},
        };
        run_cases(p, c, ELEMENTSOF(c), NULL);
        assert_true(net_policy_name_may_match(p, "github.com"));
        assert_false(net_policy_name_may_match(p, "api.github.com"));
        assert_false(net_policy_name_may_match(p, "GITHUB.COM"));
        assert_false(net_policy_name_may_match(p, "140.82.112.3"));
        assert_false(net_policy_name_may_match(p, NULL));

        /* "*.github.com" vs "github.com": subdomains only; list both for both */
        const char *h2[] = {"*.github.com", NULL};
        _cleanup_net_policy_ struct net_policy *p2 = mkpolicy(h2, NULL, NULL);
        const struct decide_case c2[] = {
                {"api.github.com", "140.82.112.5", 443, ALLOW, "allowed_hosts[0] *.github.com"},
                {"a.b.github.com", "140.82.112.5", 443, ALLOW, "allowed_hosts[0]"},
                {"github.com", "140.82.112.3", 443, DENY, "default deny"},
                {"notgithub.com", "1.2.3.4", 443, DENY, "default deny"},
        };
        run_cases(p2, c2, ELEMENTSOF(c2), NULL);
        assert_true(net_policy_name_may_match(p2, "api.github.com"));
        assert_false(net_policy_name_may_match(p2, "github.com"));

        /* case-insensitive: the pattern and the name are both canonicalised */
        const char *h3[] = {"API.OpenAI.com", NULL};
        _cleanup_net_policy_ struct net_policy *p3 = mkpolicy(h3, NULL, NULL);
        struct net_host h;
        assert_int_equal(net_host_canon_str("api.OPENAI.com.", &h, NULL), 0);
        const struct decide_case c3[] = {
                {h.name, "104.18.7.192", 443, ALLOW, "allowed_hosts[0] api.openai.com"},
        };
        run_cases(p3, c3, ELEMENTSOF(c3), NULL);

        /* an empty allowed_hosts allows nothing */
        _cleanup_net_policy_ struct net_policy *p4 = mkpolicy(NULL, NULL, NULL);
        const struct decide_case c4[] = {
                {"github.com", "140.82.112.3", 443, DENY, "default deny"},
                {NULL, "8.8.8.8", 53, DENY, "default deny"},
        };
        run_cases(p4, c4, ELEMENTSOF(c4), NULL);
        assert_false(net_policy_name_may_match(p4, "github.com"));

        /* "*": every destination, names and bare addresses, but never the
         * built-in deny list, and private ranges only through routes */
        const char *h5[] = {"*", NULL};
        _cleanup_net_policy_ struct net_policy *p5 = mkpolicy(h5, NULL, NULL);
        const struct decide_case c5[] = {
                {"anything.example", "93.184.216.34", 443, ALLOW, "allowed_hosts[0] *"},
                {NULL, "93.184.216.34", 443, ALLOW, "allowed_hosts[0] *"},
                {NULL, "169.254.169.254", 80, DENY, "builtin"},
                {"metadata.google.internal", "169.254.169.254", 80, DENY, "builtin"},
                {NULL, "192.168.1.1", 80, DENY, "allowed_hosts[0] *, address in 192.168.0.0/16"},
        };
        run_cases(p5, c5, ELEMENTSOF(c5), NULL);
        assert_true(net_policy_name_may_match(p5, "anything.example"));
}

static void test_decide_routes(void **state) {
        /* the seed's CIDR example, plus hosts */
        const char *hosts[] = {"*.github.com", "db.internal.example", NULL};
        const char *allowed[] = {"10.0.0.0/8 5432", "2001:db8::/32",
                                 "192.168.1.0/24 8000-8080,9000", NULL};
        const char *denied[] = {"169.254.169.254/32", "10.9.0.0/16", "140.82.112.0/24 22", NULL};
        _cleanup_net_policy_ struct net_policy *p = mkpolicy(hosts, allowed, denied);
        const struct decide_case c[] = {
                {NULL, "10.1.2.3", 5432, ALLOW, "allowed_routes[0] 10.0.0.0/8 ports 5432"},
                {NULL, "10.1.2.3", 5433, DENY, "default deny"},
                {NULL, "::ffff:10.1.2.3", 5432, ALLOW, "allowed_routes[0]"},
                {NULL, "10.9.1.1", 5432, DENY, "denied_routes[1] 10.9.0.0/16"},
                {NULL, "::ffff:10.9.1.1", 5432, DENY, "denied_routes[1]"},
                {NULL, "169.254.169.254", 80, DENY, "denied_routes[0] 169.254.169.254/32"},
                {NULL, "2002:a9fe:a9fe::", 80, DENY, "denied_routes[0]"},
                {NULL, "169.254.1.1", 80, DENY, "builtin 169.254.0.0/16"},
                {NULL, "2001:db8::7", 1, ALLOW, "allowed_routes[1] 2001:db8::/32"},
                {NULL, "192.168.1.9", 8080, ALLOW,
                 "allowed_routes[2] 192.168.1.0/24 ports 8000-8080,9000"},
                {NULL, "192.168.1.9", 9000, ALLOW, "allowed_routes[2]"},
                {NULL, "192.168.1.9", 8081, DENY, "default deny"},
                /* denied_routes beat allowed_hosts */
                {"api.github.com", "140.82.112.5", 22, DENY,
                 "denied_routes[2] 140.82.112.0/24 ports 22"},
                {"api.github.com", "140.82.112.5", 443, ALLOW, "allowed_hosts[0] *.github.com"},
                /* a name resolving into a private range needs a route */
                {"db.internal.example", "10.1.2.3", 5432, ALLOW, "allowed_routes[0]"},
                {"db.internal.example", "10.1.2.3", 6379, DENY,
                 "allowed_hosts[1] db.internal.example, address in 10.0.0.0/8"},
                {"db.internal.example", "10.9.0.1", 5432, DENY, "denied_routes[1]"},
        };
        run_cases(p, c, ELEMENTSOF(c), NULL);

        /* the host's own addresses and the daemon's ports */
        struct net_addr own[] = {A("203.0.113.7")};
        uint16_t ports[] = {50051};
        struct net_host_deny hd = {own, 1, ports, 1};
        const char *star[] = {"*", NULL};
        const char *all[] = {"0.0.0.0/0", "::/0", NULL};
        _cleanup_net_policy_ struct net_policy *p2 = mkpolicy(star, all, NULL);
        const struct decide_case c2[] = {
                {"me.example", "203.0.113.7", 443, DENY, "builtin host address 203.0.113.7"},
                {NULL, "203.0.113.8", 50051, DENY, "builtin daemon port 50051"},
                {NULL, "203.0.113.8", 443, ALLOW, "allowed_hosts[0] *"},
                {NULL, "10.0.0.1", 443, ALLOW, "allowed_routes[0] 0.0.0.0/0"},
                {NULL, "127.0.0.1", 443, DENY, "builtin 127.0.0.0/8"},
                {NULL, "::1", 443, DENY, "builtin ::1/128"},
        };
        run_cases(p2, c2, ELEMENTSOF(c2), &hd);

        /* no policy at all: outbound allowed, built-in deny and private ranges not */
        const struct decide_case c3[] = {
                {"github.com", "140.82.112.3", 443, ALLOW, "no policy"},
                {NULL, "8.8.8.8", 53, ALLOW, "no policy"},
                {NULL, "169.254.169.254", 80, DENY, "builtin"},
                {NULL, "::ffff:127.0.0.1", 80, DENY, "builtin"},
                {NULL, "203.0.113.7", 80, DENY, "builtin host address"},
                {NULL, "8.8.8.8", 50051, DENY, "builtin daemon port"},
                {NULL, "10.0.0.1", 80, DENY, "no policy, address in 10.0.0.0/8"},
        };
        run_cases(NULL, c3, ELEMENTSOF(c3), &hd);

        struct net_decision dec;
        struct net_dest d0 = {.host = NULL, .addr = A("8.8.8.8"), .port = 0};
        assert_int_equal(net_policy_decide(p2, &d0, NULL, &dec), 0);
        assert_int_equal(dec.verdict, DENY);
        assert_string_equal(dec.reason, "port 0");
        assert_int_equal(net_policy_decide_open(&d0, NULL, &dec), 0);
        assert_int_equal(dec.verdict, DENY);
        struct net_dest d = {.host = NULL, .port = 1};
        assert_int_equal(net_policy_decide(p, &d, NULL, &dec), 0);
        assert_int_equal(dec.verdict, DENY); /* no address */
        assert_int_equal(net_policy_decide(NULL, &d, NULL, &dec), -EINVAL);
        assert_int_equal(dec.verdict, DENY);
}

static void test_wire(void **state) {
        const char *hosts[] = {"*", "*.github.com", "pypi.org", NULL};
        const char *allowed[] = {"10.0.0.0/8 5432", "2001:db8::/32", NULL};
        const char *denied[] = {"169.254.169.254/32", "0.0.0.0/0 1-1024,8080", NULL};
        _cleanup_net_policy_ struct net_policy *p = mkpolicy(hosts, allowed, denied);
        p->learn = true;
        _cleanup_free_ uint8_t *buf = NULL;
        size_t len;
        assert_int_equal(net_policy_serialize(p, &buf, &len), 0);
        /* 16 header + hosts (2+13+9) + routes (4+4+4, 4+16, 4+4, 4+4+8) */
        assert_int_equal(len, 16 + 2 + 13 + 9 + 12 + 20 + 8 + 16);
        _cleanup_net_policy_ struct net_policy *q = NULL;
        struct wr_err e = {0};
        assert_int_equal(net_policy_deserialize(buf, len, &q, &e), 0);
        assert_true(q->learn);
        assert_int_equal(q->n_hosts, 3);
        assert_int_equal(q->n_allowed, 2);
        assert_int_equal(q->n_denied, 2);
        assert_int_equal(q->denied[1].n_ports, 2);
        _cleanup_free_ uint8_t *buf2 = NULL;
        size_t len2;
        assert_int_equal(net_policy_serialize(q, &buf2, &len2), 0);
        assert_int_equal(len, len2);
        assert_memory_equal(buf, buf2, len);

        /* every truncation fails cleanly */
        for (size_t n = 0; n < len; n++) {
                struct net_policy *t = NULL;
                assert_int_equal(net_policy_deserialize(buf, n, &t, NULL), -EBADMSG);
                assert_null(t);
        }
        /* one byte too many */
        uint8_t *more = malloc(len + 1);
        memcpy(more, buf, len);
        more[len] = 0;
        struct net_policy *t = NULL;
        assert_int_equal(net_policy_deserialize(more, len + 1, &t, &e), -EBADMSG);
        assert_msg_has(&e, "1 trailing bytes", "trailing");
        free(more);

        /* tampered fields: each refused with a message naming it */
        static const struct {
                size_t off;
                uint8_t val;
                int code;
                const char *why;
        } tamper[] = {
                {0, 'X', -EBADMSG, "bad magic"},
                {4, 2, -EPROTONOSUPPORT, "version 2"},
                {6, 3, -EBADMSG, "unknown flags"},
                {14, 1, -EBADMSG, "reserved"},
                {8, 0xff, -EBADMSG, "allowed_hosts[3]: NUL byte"}, /* n_hosts */
                {17, 'x', 0, ""},                             /* "*" -> "x": still a valid policy */
                {19, 'X', -EBADMSG, "allowed_hosts[1]"},      /* "*.github" -> "X.github" */
                {21, 'G', -EBADMSG, "not in canonical form"}, /* upper case */
                {16 + 24, 5, -EBADMSG, "family 5"},           /* first route */
                {16 + 24 + 1, 33, -EBADMSG, "prefix 33"},
                {16 + 24 + 1, 5, -EBADMSG, "host bits set"},      /* 10.0.0.0/5 */
                {16 + 24 + 9, 0xff, -EBADMSG, "start above end"}, /* lo 5432 -> 65336 */
                {16 + 24 + 2, 65, -EBADMSG, "port ranges"},
        };
        for (size_t i = 0; i < ELEMENTSOF(tamper); i++) {
                uint8_t *c = malloc(len);
                memcpy(c, buf, len);
                c[tamper[i].off] = tamper[i].val;
                err_clear(&e);
                t = NULL;
                int r = net_policy_deserialize(c, len, &t, &e);
                free(c);
                if (r == 0 && tamper[i].off == 17) { /* still valid */
                        t = net_policy_free(t);
                        continue;
                }
                if (r != tamper[i].code)
                        fail_msg("tamper %zu: %d (%s)", i, r, e.msg);
                assert_int_equal(e.code, tamper[i].code);
                assert_msg_has(&e, tamper[i].why, "tamper");
                assert_msg_has(&e, "policy wire form", "tamper");
                assert_null(t);
        }
        /* an IPv4-mapped IPv6 route is not canonical on the wire */
        uint8_t mapped[16 + 4 + 16] = {'W', 'N', 'P', '1', 1, 0,   0,    0,    0,  0, 1, 0,
                                       0,   0,   0,   0,   6, 128, 0,    0,    0,  0, 0, 0,
                                       0,   0,   0,   0,   0, 0,   0xff, 0xff, 10, 0, 0, 1};
        assert_int_equal(net_policy_deserialize(mapped, sizeof(mapped), &t, &e), -EBADMSG);
        assert_msg_has(&e, "canonical", "mapped");
        mapped[30] = 0;
        mapped[31] = 0;
        mapped[32] = 0x20; /* ::2000:1, not mapped: canonical as is */
        assert_int_equal(net_policy_deserialize(mapped, sizeof(mapped), &t, &e), 0);
        t = net_policy_free(t);
        /* the largest policy the limits allow fits the wire form and comes back whole */
        _cleanup_net_policy_ struct net_policy *big = mkpolicy(NULL, NULL, NULL);
        struct net_port_range pr[NET_ROUTE_PORTS_MAX];
        for (size_t i = 0; i < NET_ROUTE_PORTS_MAX; i++)
                pr[i] = (struct net_port_range){(uint32_t) (1000 * i + 1),
                                                (uint32_t) (1000 * i + 2)};
        char name[NET_HOST_MAX + 3];
        for (int i = 0; i < NET_POLICY_HOSTS_MAX; i++) {
                snprintf(name, sizeof(name), "*.%04d.%s.%s.%s.%.56s", i, L63, L63, L63, L63);
                assert_int_equal(strlen(name), 2 + 253);
                assert_int_equal(net_policy_add_host(big, name, NULL), 0);
        }
        for (int i = 0; i < NET_POLICY_ROUTES_MAX; i++) {
                char cidr[64];
                snprintf(cidr, sizeof(cidr), "2001:db8:%x::/48", i);
                assert_int_equal(net_policy_add_route(big, NET_ROUTES_ALLOWED, cidr, pr,
                                                      NET_ROUTE_PORTS_MAX, NULL),
                                 0);
                assert_int_equal(net_policy_add_route(big, NET_ROUTES_DENIED, cidr, pr,
                                                      NET_ROUTE_PORTS_MAX, NULL),
                                 0);
        }
        _cleanup_free_ uint8_t *bb = NULL;
        assert_int_equal(net_policy_serialize(big, &bb, &len), 0);
        assert_true(len <= NET_POLICY_WIRE_MAX);
        assert_int_equal(net_policy_deserialize(bb, len, &t, &e), 0);
        assert_int_equal(t->n_hosts, NET_POLICY_HOSTS_MAX);
        assert_int_equal(t->n_denied, NET_POLICY_ROUTES_MAX);
        t = net_policy_free(t);
        /* the empty policy */
        _cleanup_net_policy_ struct net_policy *empty = mkpolicy(NULL, NULL, NULL);
        _cleanup_free_ uint8_t *eb = NULL;
        assert_int_equal(net_policy_serialize(empty, &eb, &len), 0);
        assert_int_equal(len, 16);
        assert_int_equal(net_policy_deserialize(eb, len, &t, NULL), 0);
        assert_int_equal(t->n_hosts + t->n_allowed + t->n_denied, 0);
        t = net_policy_free(t);
}

/* ------------------------------------------------------------ TLS (SNI) */

/* ClientHellos captured from `openssl s_client -connect 127.0.0.1:PORT` (OpenSSL 3,
 * Debian 12): -servername api.github.com; -servername Example.COM -tls1_2;
 * -noservername; -servername pypi.org -alpn h2,http/1.1. */
static const unsigned char tls13_bin[] = {
        0x16, 0x03, 0x01, 0x01, 0x3b, 0x01, 0x00, 0x01, 0x37, 0x03, 0x03, 0xf6, 0xcd, 0x0f, 0x38,
        0x50, 0x15, 0x06, 0x3b, 0x3c, 0xb6, 0xe2, 0x87, 0x8d, 0x5a, 0x7c, 0xe5, 0x49, 0x15, 0x12,
        0xcf, 0x9d, 0xe5, 0xca, 0xf7, 0x58, 0x0d, 0xfe, 0xcf, 0xb3, 0x68, 0x77, 0x2e, 0x20, 0x56,
        0x57, 0x9b, 0x20, 0x85, 0x81, 0xfc, 0x47, 0x47, 0x51, 0x31, 0xb0, 0x27, 0xb2, 0x0d, 0xd1,
        0x36, 0x9e, 0xdd, 0x6f, 0xab, 0xcb, 0x38, 0x5b, 0x2b, 0xf1, 0x58, 0x8c, 0x57, 0xa6, 0x90,
        0xf0, 0x00, 0x3e, 0x13, 0x02, 0x13, 0x03, 0x13, 0x01, 0xc0, 0x2c, 0xc0, 0x30, 0x00, 0x9f,
        0xcc, 0xa9, 0xcc, 0xa8, 0xcc, 0xaa, 0xc0, 0x2b, 0xc0, 0x2f, 0x00, 0x9e, 0xc0, 0x24, 0xc0,
        0x28, 0x00, 0x6b, 0xc0, 0x23, 0xc0, 0x27, 0x00, 0x67, 0xc0, 0x0a, 0xc0, 0x14, 0x00, 0x39,
        0xc0, 0x09, 0xc0, 0x13, 0x00, 0x33, 0x00, 0x9d, 0x00, 0x9c, 0x00, 0x3d, 0x00, 0x3c, 0x00,
        0x35, 0x00, 0x2f, 0x00, 0xff, 0x01, 0x00, 0x00, 0xb0, 0x00, 0x00, 0x00, 0x13, 0x00, 0x11,
        0x00, 0x00, 0x0e, 0x61, 0x70, 0x69, 0x2e, 0x67, 0x69, 0x74, 0x68, 0x75, 0x62, 0x2e, 0x63,
        0x6f, 0x6d, 0x00, 0x0b, 0x00, 0x04, 0x03, 0x00, 0x01, 0x02, 0x00, 0x0a, 0x00, 0x16, 0x00,
        0x14, 0x00, 0x1d, 0x00, 0x17, 0x00, 0x1e, 0x00, 0x19, 0x00, 0x18, 0x01, 0x00, 0x01, 0x01,
        0x01, 0x02, 0x01, 0x03, 0x01, 0x04, 0x00, 0x23, 0x00, 0x00, 0x00, 0x16, 0x00, 0x00, 0x00,
        0x17, 0x00, 0x00, 0x00, 0x0d, 0x00, 0x2a, 0x00, 0x28, 0x04, 0x03, 0x05, 0x03, 0x06, 0x03,
        0x08, 0x07, 0x08, 0x08, 0x08, 0x09, 0x08, 0x0a, 0x08, 0x0b, 0x08, 0x04, 0x08, 0x05, 0x08,
        0x06, 0x04, 0x01, 0x05, 0x01, 0x06, 0x01, 0x03, 0x03, 0x03, 0x01, 0x03, 0x02, 0x04, 0x02,
        0x05, 0x02, 0x06, 0x02, 0x00, 0x2b, 0x00, 0x09, 0x08, 0x03, 0x04, 0x03, 0x03, 0x03, 0x02,
        0x03, 0x01, 0x00, 0x2d, 0x00, 0x02, 0x01, 0x01, 0x00, 0x33, 0x00, 0x26, 0x00, 0x24, 0x00,
        0x1d, 0x00, 0x20, 0x34, 0x73, 0x80, 0xd5, 0xec, 0xd1, 0x6e, 0xec, 0x3b, 0xbd, 0x78, 0x3b,
        0x7d, 0x30, 0xca, 0x78, 0xa9, 0x1d, 0x4a, 0x60, 0xde, 0xb7, 0xcd, 0xcf, 0xc1, 0xa4, 0x05,
        0x0a, 0x9d, 0x5b, 0x1d, 0x49};
static const unsigned char tls12_bin[] = {
        0x16, 0x03, 0x01, 0x00, 0xcb, 0x01, 0x00, 0x00, 0xc7, 0x03, 0x03, 0x58, 0x3f, 0x95, 0x44,
        0x37, 0xe3, 0xde, 0x23, 0x10, 0xdd, 0x7c, 0x2c, 0x07, 0x2d, 0xe3, 0x49, 0x5e, 0xe3, 0xf1,
        0xbf, 0x23, 0xe9, 0x1d, 0x45, 0xa0, 0x8d, 0xf2, 0x41, 0xd0, 0x31, 0xe8, 0xac, 0x00, 0x00,
        0x38, 0xc0, 0x2c, 0xc0, 0x30, 0x00, 0x9f, 0xcc, 0xa9, 0xcc, 0xa8, 0xcc, 0xaa, 0xc0, 0x2b,
        0xc0, 0x2f, 0x00, 0x9e, 0xc0, 0x24, 0xc0, 0x28, 0x00, 0x6b, 0xc0, 0x23, 0xc0, 0x27, 0x00,
        0x67, 0xc0, 0x0a, 0xc0, 0x14, 0x00, 0x39, 0xc0, 0x09, 0xc0, 0x13, 0x00, 0x33, 0x00, 0x9d,
        0x00, 0x9c, 0x00, 0x3d, 0x00, 0x3c, 0x00, 0x35, 0x00, 0x2f, 0x00, 0xff, 0x01, 0x00, 0x00,
        0x66, 0x00, 0x00, 0x00, 0x10, 0x00, 0x0e, 0x00, 0x00, 0x0b, 0x45, 0x78, 0x61, 0x6d, 0x70,
        0x6c, 0x65, 0x2e, 0x43, 0x4f, 0x4d, 0x00, 0x0b, 0x00, 0x04, 0x03, 0x00, 0x01, 0x02, 0x00,
        0x0a, 0x00, 0x0c, 0x00, 0x0a, 0x00, 0x1d, 0x00, 0x17, 0x00, 0x1e, 0x00, 0x19, 0x00, 0x18,
        0x00, 0x23, 0x00, 0x00, 0x00, 0x16, 0x00, 0x00, 0x00, 0x17, 0x00, 0x00, 0x00, 0x0d, 0x00,
        0x2a, 0x00, 0x28, 0x04, 0x03, 0x05, 0x03, 0x06, 0x03, 0x08, 0x07, 0x08, 0x08, 0x08, 0x09,
        0x08, 0x0a, 0x08, 0x0b, 0x08, 0x04, 0x08, 0x05, 0x08, 0x06, 0x04, 0x01, 0x05, 0x01, 0x06,
        0x01, 0x03, 0x03, 0x03, 0x01, 0x03, 0x02, 0x04, 0x02, 0x05, 0x02, 0x06, 0x02};
static const unsigned char nosni_bin[] = {
        0x16, 0x03, 0x01, 0x01, 0x24, 0x01, 0x00, 0x01, 0x20, 0x03, 0x03, 0xfe, 0x1e, 0x6b, 0x63,
        0xb6, 0x31, 0x71, 0x0b, 0x28, 0xe3, 0x7f, 0x0b, 0xaa, 0x5d, 0xd7, 0xbc, 0x1d, 0xa5, 0xb5,
        0xa4, 0x47, 0x0b, 0xc8, 0x2f, 0x3d, 0xd2, 0x58, 0xec, 0xed, 0xd1, 0xde, 0xe9, 0x20, 0x4c,
        0xcf, 0xcf, 0x85, 0xdc, 0x6d, 0x0a, 0x6a, 0xf5, 0x9a, 0x3f, 0x4d, 0x0d, 0xf9, 0x8b, 0x2f,
        0xd5, 0x98, 0xed, 0xf4, 0x2e, 0xc5, 0x21, 0xaf, 0xa8, 0x51, 0xb8, 0x0c, 0xb0, 0x7c, 0x7e,
        0x00, 0x00, 0x3e, 0x13, 0x02, 0x13, 0x03, 0x13, 0x01, 0xc0, 0x2c, 0xc0, 0x30, 0x00, 0x9f,
        0xcc, 0xa9, 0xcc, 0xa8, 0xcc, 0xaa, 0xc0, 0x2b, 0xc0, 0x2f, 0x00, 0x9e, 0xc0, 0x24, 0xc0,
        0x28, 0x00, 0x6b, 0xc0, 0x23, 0xc0, 0x27, 0x00, 0x67, 0xc0, 0x0a, 0xc0, 0x14, 0x00, 0x39,
        0xc0, 0x09, 0xc0, 0x13, 0x00, 0x33, 0x00, 0x9d, 0x00, 0x9c, 0x00, 0x3d, 0x00, 0x3c, 0x00,
        0x35, 0x00, 0x2f, 0x00, 0xff, 0x01, 0x00, 0x00, 0x99, 0x00, 0x0b, 0x00, 0x04, 0x03, 0x00,
        0x01, 0x02, 0x00, 0x0a, 0x00, 0x16, 0x00, 0x14, 0x00, 0x1d, 0x00, 0x17, 0x00, 0x1e, 0x00,
        0x19, 0x00, 0x18, 0x01, 0x00, 0x01, 0x01, 0x01, 0x02, 0x01, 0x03, 0x01, 0x04, 0x00, 0x23,
        0x00, 0x00, 0x00, 0x16, 0x00, 0x00, 0x00, 0x17, 0x00, 0x00, 0x00, 0x0d, 0x00, 0x2a, 0x00,
        0x28, 0x04, 0x03, 0x05, 0x03, 0x06, 0x03, 0x08, 0x07, 0x08, 0x08, 0x08, 0x09, 0x08, 0x0a,
        0x08, 0x0b, 0x08, 0x04, 0x08, 0x05, 0x08, 0x06, 0x04, 0x01, 0x05, 0x01, 0x06, 0x01, 0x03,
        0x03, 0x03, 0x01, 0x03, 0x02, 0x04, 0x02, 0x05, 0x02, 0x06, 0x02, 0x00, 0x2b, 0x00, 0x09,
        0x08, 0x03, 0x04, 0x03, 0x03, 0x03, 0x02, 0x03, 0x01, 0x00, 0x2d, 0x00, 0x02, 0x01, 0x01,
        0x00, 0x33, 0x00, 0x26, 0x00, 0x24, 0x00, 0x1d, 0x00, 0x20, 0xfb, 0x06, 0x8e, 0xe9, 0xa8,
        0xce, 0x79, 0x75, 0x47, 0xe0, 0xb5, 0x44, 0x56, 0xc3, 0x94, 0x9e, 0xde, 0x92, 0xc1, 0x19,
        0xb6, 0x82, 0xf9, 0x8f, 0xa8, 0xcc, 0x12, 0xbd, 0xa9, 0x42, 0x31, 0x7b};
static const unsigned char alpn_bin[] = {
        0x16, 0x03, 0x01, 0x01, 0x47, 0x01, 0x00, 0x01, 0x43, 0x03, 0x03, 0x44, 0x08, 0x99, 0xcf,
        0xb6, 0x26, 0x27, 0xe7, 0xcf, 0x8a, 0x6f, 0xca, 0xc1, 0x48, 0x07, 0xac, 0x9a, 0x78, 0x82,
        0x52, 0x30, 0x0f, 0xaa, 0xb4, 0x23, 0x8a, 0xde, 0x79, 0x49, 0x98, 0xeb, 0xdf, 0x20, 0xe5,
        0x0b, 0x21, 0xb9, 0xdc, 0xd9, 0xa8, 0x3f, 0x6d, 0xd2, 0x85, 0x88, 0x35, 0x19, 0xbb, 0x1d,
        0xa7, 0x78, 0x35, 0xc8, 0xf0, 0x46, 0xb7, 0xb1, 0x3a, 0x4f, 0x51, 0xa7, 0xc8, 0x68, 0xa6,
        0xe3, 0x00, 0x3e, 0x13, 0x02, 0x13, 0x03, 0x13, 0x01, 0xc0, 0x2c, 0xc0, 0x30, 0x00, 0x9f,
        0xcc, 0xa9, 0xcc, 0xa8, 0xcc, 0xaa, 0xc0, 0x2b, 0xc0, 0x2f, 0x00, 0x9e, 0xc0, 0x24, 0xc0,
        0x28, 0x00, 0x6b, 0xc0, 0x23, 0xc0, 0x27, 0x00, 0x67, 0xc0, 0x0a, 0xc0, 0x14, 0x00, 0x39,
        0xc0, 0x09, 0xc0, 0x13, 0x00, 0x33, 0x00, 0x9d, 0x00, 0x9c, 0x00, 0x3d, 0x00, 0x3c, 0x00,
        0x35, 0x00, 0x2f, 0x00, 0xff, 0x01, 0x00, 0x00, 0xbc, 0x00, 0x00, 0x00, 0x0d, 0x00, 0x0b,
        0x00, 0x00, 0x08, 0x70, 0x79, 0x70, 0x69, 0x2e, 0x6f, 0x72, 0x67, 0x00, 0x0b, 0x00, 0x04,
        0x03, 0x00, 0x01, 0x02, 0x00, 0x0a, 0x00, 0x16, 0x00, 0x14, 0x00, 0x1d, 0x00, 0x17, 0x00,
        0x1e, 0x00, 0x19, 0x00, 0x18, 0x01, 0x00, 0x01, 0x01, 0x01, 0x02, 0x01, 0x03, 0x01, 0x04,
        0x00, 0x23, 0x00, 0x00, 0x00, 0x10, 0x00, 0x0e, 0x00, 0x0c, 0x02, 0x68, 0x32, 0x08, 0x68,
        0x74, 0x74, 0x70, 0x2f, 0x31, 0x2e, 0x31, 0x00, 0x16, 0x00, 0x00, 0x00, 0x17, 0x00, 0x00,
        0x00, 0x0d, 0x00, 0x2a, 0x00, 0x28, 0x04, 0x03, 0x05, 0x03, 0x06, 0x03, 0x08, 0x07, 0x08,
        0x08, 0x08, 0x09, 0x08, 0x0a, 0x08, 0x0b, 0x08, 0x04, 0x08, 0x05, 0x08, 0x06, 0x04, 0x01,
        0x05, 0x01, 0x06, 0x01, 0x03, 0x03, 0x03, 0x01, 0x03, 0x02, 0x04, 0x02, 0x05, 0x02, 0x06,
        0x02, 0x00, 0x2b, 0x00, 0x09, 0x08, 0x03, 0x04, 0x03, 0x03, 0x03, 0x02, 0x03, 0x01, 0x00,
        0x2d, 0x00, 0x02, 0x01, 0x01, 0x00, 0x33, 0x00, 0x26, 0x00, 0x24, 0x00, 0x1d, 0x00, 0x20,
        0x7d, 0x87, 0xff, 0x31, 0xef, 0x72, 0xc9, 0x94, 0x2a, 0x88, 0x69, 0x4c, 0x01, 0x11, 0x30,
        0x8f, 0x39, 0x2e, 0x4b, 0xeb, 0x1b, 0x66, 0xba, 0xa0, 0x30, 0xd9, 0x5b, 0x63, 0x5a, 0x97,
        0x5c, 0x67};

struct bytes {
        uint8_t b[70000];
        size_t n;
};

static void put(struct bytes *o, const void *p, size_t n) {
        assert_true(o->n + n <= sizeof(o->b));
        if (n)
                memcpy(o->b + o->n, p, n);
        o->n += n;
}
static void put8(struct bytes *o, unsigned v) {
        uint8_t b = (uint8_t) v;
        put(o, &b, 1);
}
static void put16(struct bytes *o, unsigned v) {
        put8(o, v >> 8);
        put8(o, v);
}

/* An extension: type, then body. */
static void ext(struct bytes *o, unsigned type, const void *body, size_t n) {
        put16(o, type);
        put16(o, (unsigned) n);
        put(o, body, n);
}

/* A server_name body with the given (type, name) entries. */
static size_t sni_body(uint8_t *out, const unsigned *types, const char **names, size_t k) {
        struct bytes *l = calloc(1, sizeof(*l));
        for (size_t i = 0; i < k; i++) {
                put8(l, types[i]);
                put16(l, (unsigned) strlen(names[i]));
                put(l, names[i], strlen(names[i]));
        }
        out[0] = (uint8_t) (l->n >> 8);
        out[1] = (uint8_t) l->n;
        memcpy(out + 2, l->b, l->n);
        size_t n = l->n + 2;
        free(l);
        return n;
}

/* A ClientHello handshake message around the extensions block exts. */
static void hello_msg(struct bytes *o, const struct bytes *exts) {
        struct bytes *body = calloc(1, sizeof(*body));
        put16(body, 0x0303);
        uint8_t rnd[32] = {1, 2, 3};
        put(body, rnd, 32);
        put8(body, 32); /* session id */
        put(body, rnd, 32);
        put16(body, 4);
        put16(body, 0x1301);
        put16(body, 0x1a1a); /* GREASE cipher */
        put8(body, 1);
        put8(body, 0);
        if (exts) {
                put16(body, (unsigned) exts->n);
                put(body, exts->b, exts->n);
        }
        put8(o, 1);
        put8(o, body->n >> 16);
        put16(o, (unsigned) (body->n & 0xffff));
        put(o, body->b, body->n);
        free(body);
}

/* Wrap a handshake stream in records of at most frag bytes. */
static void records(struct bytes *o, const uint8_t *hs, size_t n, size_t frag) {
        for (size_t off = 0; off < n; off += frag) {
                size_t k = n - off < frag ? n - off : frag;
                put8(o, 22);
                put16(o, 0x0301);
                put16(o, (unsigned) k);
                put(o, hs + off, k);
        }
}

/* A whole record-wrapped hello with one SNI host name plus extras. */
static struct bytes *mkhello(const char *name, size_t frag) {
        struct bytes *e = calloc(1, sizeof(*e)), *m = calloc(1, sizeof(*m)),
                     *r = calloc(1, sizeof(*r));
        uint8_t sb[600];
        ext(e, 0x0a0a, NULL, 0); /* GREASE */
        if (name) {
                unsigned t = 0;
                ext(e, 0x0000, sb, sni_body(sb, &t, &name, 1));
        }
        const uint8_t alpn[] = {0, 3, 2, 'h', '2'};
        ext(e, 0x0010, alpn, sizeof(alpn));
        ext(e, 0xfafa, "\0", 1); /* GREASE again, another value */
        hello_msg(m, e);
        records(r, m->b, m->n, frag);
        free(e);
        free(m);
        return r;
}

static void test_sni_captured(void **state) {
        static const struct {
                const uint8_t *b;
                size_t n;
                const char *sni; /* NULL = none */
                bool alpn;
        } t[] = {
                {tls13_bin, sizeof(tls13_bin), "api.github.com", false},
                {tls12_bin, sizeof(tls12_bin), "example.com", false}, /* sent as Example.COM */
                {nosni_bin, sizeof(nosni_bin), NULL, false},
                {alpn_bin, sizeof(alpn_bin), "pypi.org", true},
        };
        for (size_t i = 0; i < ELEMENTSOF(t); i++) {
                struct net_tls_hello h;
                struct wr_err e = {0};
                if (net_tls_sni(t[i].b, t[i].n, &h, &e) != 0)
                        fail_msg("capture %zu: %s", i, e.msg);
                assert_int_equal(h.consumed, t[i].n);
                assert_int_equal(h.has_sni, t[i].sni != NULL);
                if (t[i].sni) {
                        assert_int_equal(h.sni.kind, NET_HOST_NAME);
                        assert_string_equal(h.sni.name, t[i].sni);
                }
                assert_int_equal(h.has_alpn, t[i].alpn);
                assert_int_equal(h.alpn_h2, t[i].alpn); /* -alpn h2,http/1.1 */
                assert_int_equal(h.alpn_http11, t[i].alpn);
                assert_false(h.has_ech);
                /* every prefix: "need more", and the promised bytes never overshoot */
                for (size_t k = 0; k < t[i].n; k++) {
                        int r = net_tls_sni(t[i].b, k, &h, &e);
                        if (r != -EAGAIN)
                                fail_msg("capture %zu prefix %zu: %d (%s)", i, k, r, e.msg);
                        assert_true(h.need >= 1);
                        assert_true(k + h.need <= t[i].n);
                }
                /* application bytes after the hello are not looked at */
                uint8_t *more = malloc(t[i].n + 10);
                memcpy(more, t[i].b, t[i].n);
                memcpy(more + t[i].n, "\x17\x03\x03\x00\x03xyz", 8);
                assert_int_equal(net_tls_sni(more, t[i].n + 8, &h, &e), 0);
                assert_int_equal(h.consumed, t[i].n);
                free(more);
        }
}

static void test_sni_fragmented(void **state) {
        /* the same hello cut into records of 1..300 bytes */
        for (size_t frag = 1; frag <= 300; frag += (frag < 8 ? 1 : 37)) {
                struct bytes *b = mkhello("Split.Example.ORG.", frag);
                struct net_tls_hello h;
                struct wr_err e = {0};
                int r = net_tls_sni(b->b, b->n, &h, &e);
                size_t records_needed = (b->n + frag + 4) / (frag + 5);
                if (records_needed > NET_TLS_RECORDS_MAX) {
                        assert_int_equal(r, -E2BIG);
                } else {
                        if (r != 0)
                                fail_msg("frag %zu: %s", frag, e.msg);
                        assert_string_equal(h.sni.name, "split.example.org");
                        for (size_t k = 0; k < b->n; k += 7) {
                                assert_int_equal(net_tls_sni(b->b, k, &h, &e), -EAGAIN);
                                assert_true(k + h.need <= b->n);
                        }
                }
                free(b);
        }
        /* the handshake header itself split: records of 1, 2 and 3 bytes first */
        for (size_t first = 1; first <= 3; first++) {
                struct bytes *whole = mkhello("head.example", 16384);
                struct bytes *cut = calloc(1, sizeof(*cut));
                const uint8_t *hs = whole->b + 5;
                size_t hn = whole->n - 5;
                records(cut, hs, first, first);
                records(cut, hs + first, hn - first, 16384);
                struct net_tls_hello h;
                struct wr_err e = {0};
                if (net_tls_sni(cut->b, cut->n, &h, &e) != 0)
                        fail_msg("first record of %zu: %s", first, e.msg);
                assert_string_equal(h.sni.name, "head.example");
                for (size_t k = 0; k < cut->n; k++) {
                        assert_int_equal(net_tls_sni(cut->b, k, &h, &e), -EAGAIN);
                        assert_true(k + h.need <= cut->n);
                }
                free(whole);
                free(cut);
        }
        /* a hello with a 16 KiB padding extension across two full records */
        struct bytes *e = calloc(1, sizeof(*e)), *m = calloc(1, sizeof(*m)),
                     *r = calloc(1, sizeof(*r));
        uint8_t sb[64];
        const char *nm = "big.example";
        unsigned t0 = 0;
        ext(e, 0x0000, sb, sni_body(sb, &t0, &nm, 1));
        static uint8_t pad[16000];
        ext(e, 0x0015, pad, sizeof(pad));
        hello_msg(m, e);
        records(r, m->b, m->n, 16384);
        struct net_tls_hello h;
        struct wr_err err = {0};
        assert_int_equal(net_tls_sni(r->b, r->n, &h, &err), 0);
        assert_string_equal(h.sni.name, "big.example");
        /* over the limit */
        memset(e, 0, sizeof(*e));
        memset(m, 0, sizeof(*m));
        memset(r, 0, sizeof(*r));
        ext(e, 0x0015, pad, sizeof(pad));
        ext(e, 0x0016, pad, 1000);
        hello_msg(m, e);
        records(r, m->b, m->n, 16384);
        assert_int_equal(net_tls_sni(r->b, r->n, &h, &err), -E2BIG);
        assert_int_equal(net_tls_sni(r->b, 9, &h, &err), -E2BIG); /* known from the header */
        free(e);
        free(m);
        free(r);
}

/* A hello whose extensions block is given whole. */
static int hello_with(const struct bytes *exts, struct net_tls_hello *h, struct wr_err *e) {
        struct bytes *m = calloc(1, sizeof(*m)), *r = calloc(1, sizeof(*r));
        hello_msg(m, exts);
        records(r, m->b, m->n, 16384);
        int k = net_tls_sni(r->b, r->n, h, e);
        free(m);
        free(r);
        return k;
}

static void test_sni_adversarial(void **state) {
        struct bytes *x = calloc(1, sizeof(*x));
        struct net_tls_hello h;
        struct wr_err e = {0};
        uint8_t sb[700];
        const char *two[] = {"a.example", "b.example"};
        unsigned t00[] = {0, 0}, t1[] = {1}, t01[] = {0, 1};

        /* two host_names in one list */
        ext(x, 0, sb, sni_body(sb, t00, two, 2));
        assert_int_equal(hello_with(x, &h, &e), -EBADMSG);
        assert_msg_has(&e, "more than one host_name", "two names");
        /* a non-host_name type, alone or after a good one */
        x->n = 0;
        ext(x, 0, sb, sni_body(sb, t1, two, 1));
        assert_int_equal(hello_with(x, &h, &e), -EBADMSG);
        assert_msg_has(&e, "name type 1", "type 1");
        x->n = 0;
        ext(x, 0, sb, sni_body(sb, t01, two, 2));
        assert_int_equal(hello_with(x, &h, &e), -EBADMSG);
        /* two server_name extensions */
        x->n = 0;
        ext(x, 0, sb, sni_body(sb, t00, two, 1));
        ext(x, 0, sb, sni_body(sb, t00, two + 1, 1));
        assert_int_equal(hello_with(x, &h, &e), -EBADMSG);
        assert_msg_has(&e, "duplicate extension 0x0000", "dup ext");
        /* empty list; empty name; list length lies */
        x->n = 0;
        ext(x, 0, "\0\0", 2);
        assert_int_equal(hello_with(x, &h, &e), -EBADMSG);
        assert_msg_has(&e, "empty list", "empty list");
        x->n = 0;
        ext(x, 0, "\0\3\0\0\0", 5);
        assert_int_equal(hello_with(x, &h, &e), -EBADMSG);
        assert_msg_has(&e, "empty host_name", "empty name");
        x->n = 0;
        ext(x, 0,
            "\0\x09\0\0\x05"
            "abcde",
            10);
        assert_int_equal(hello_with(x, &h, &e), -EBADMSG);
        x->n = 0;
        ext(x, 0, "", 0);
        assert_int_equal(hello_with(x, &h, &e), -EBADMSG);
        /* names that canonicalisation refuses: NUL inside, CRLF, userinfo, IDN */
        static const char *badnames[] = {"evil.com\0.github.com",
                                         "a.com\r\nX: y",
                                         "a@b.com",
                                         "b\xc3\xbc\x63her.de", /* \x63: 'c' */
                                         "foo..bar",
                                         "a b"};
        static const size_t badlens[] = {20, 12, 7, 9, 8, 3};
        for (size_t i = 0; i < ELEMENTSOF(badnames); i++) {
                uint8_t body[64];
                size_t n = badlens[i];
                body[0] = 0;
                body[1] = (uint8_t) (n + 3);
                body[2] = 0;
                body[3] = 0;
                body[4] = (uint8_t) n;
                memcpy(body + 5, badnames[i], n);
                x->n = 0;
                ext(x, 0, body, n + 5);
                err_clear(&e);
                assert_int_equal(hello_with(x, &h, &e), -EBADMSG);
                assert_int_equal(e.code, -EBADMSG);
                assert_msg_has(&e, "server_name: host", badnames[i]);
                assert_false(h.has_sni);
        }
        /* an IP literal as SNI: reported as an IP, never as a name */
        const char *ip[] = {"0x7f.1"};
        x->n = 0;
        ext(x, 0, sb, sni_body(sb, t00, ip, 1));
        assert_int_equal(hello_with(x, &h, &e), 0);
        assert_int_equal(h.sni.kind, NET_HOST_IP);
        assert_string_equal(h.sni.name, "127.0.0.1");
        /* ECH only (no outer SNI), with GREASE around it */
        x->n = 0;
        ext(x, 0x2a2a, "", 0);
        ext(x, 0xfe0d, "\0\1\2\3", 4);
        assert_int_equal(hello_with(x, &h, &e), 0);
        assert_true(h.has_ech);
        assert_false(h.has_sni);
        /* ECH with an outer SNI */
        x->n = 0;
        ext(x, 0, sb, sni_body(sb, t00, two, 1));
        ext(x, 0xfe0d, "\0\1\2\3", 4);
        assert_int_equal(hello_with(x, &h, &e), 0);
        assert_true(h.has_ech && h.has_sni);
        assert_string_equal(h.sni.name, "a.example");
        /* ALPN: offered names are noted; a malformed list is refused */
        x->n = 0;
        ext(x, 0x0010, "\0\x0c\x02h2\x08http/1.1", 14);
        assert_int_equal(hello_with(x, &h, &e), 0);
        assert_true(h.has_alpn && h.alpn_h2 && h.alpn_http11);
        x->n = 0;
        ext(x, 0x0010, "\0\x04\x03h2c", 6);
        assert_int_equal(hello_with(x, &h, &e), 0);
        assert_true(h.has_alpn && !h.alpn_h2 && !h.alpn_http11);
        static const struct {
                const char *body;
                size_t n;
                const char *why;
        } alpn_bad[] = {
                {"\0\0", 2, "ALPN: empty list"},
                {"\0\x01\0", 3, "empty or truncated"},
                {"\0\x03\x05h2", 5, "empty or truncated"},
                {"\0\x05\x02h2", 5, "list length"},
                {"", 0, "list length"},
        };
        for (size_t i = 0; i < ELEMENTSOF(alpn_bad); i++) {
                x->n = 0;
                ext(x, 0x0010, alpn_bad[i].body, alpn_bad[i].n);
                err_clear(&e);
                assert_int_equal(hello_with(x, &h, &e), -EBADMSG);
                assert_msg_has(&e, alpn_bad[i].why, "alpn");
        }
        /* no extensions block at all (old clients) */
        assert_int_equal(hello_with(NULL, &h, &e), 0);
        assert_false(h.has_sni);
        /* extensions length that disagrees with the hello */
        struct bytes *m = calloc(1, sizeof(*m)), *r = calloc(1, sizeof(*r));
        x->n = 0;
        ext(x, 0, sb, sni_body(sb, t00, two, 1));
        hello_msg(m, x);
        m->b[m->n - x->n - 1] ^= 1; /* low byte of the extensions length */
        records(r, m->b, m->n, 16384);
        assert_int_equal(net_tls_sni(r->b, r->n, &h, &e), -EBADMSG);
        /* more extensions than allowed */
        x->n = 0;
        for (unsigned i = 0; i < NET_TLS_EXTENSIONS_MAX + 1; i++)
                ext(x, 0x100 + i, "", 0);
        assert_int_equal(hello_with(x, &h, &e), -E2BIG);
        free(m);
        free(r);
        free(x);

        /* not TLS, or not a ClientHello */
        static const struct {
                const char *in;
                size_t n;
                int code;
                const char *why;
        } t[] = {
                {"GET / HTTP/1.1\r\n", 16, -EPROTO, "first byte 0x47"},
                {"\x80\x2e\x01\x03\x01", 5, -EPROTO, "first byte 0x80"}, /* SSLv2 hello */
                {"\x16\x02", 2, -EPROTO, "version major 2"},
                {"\x15\x03\x03\x00\x02\x02\x28", 7, -EPROTO, "first byte 0x15"}, /* alert */
                {"\x16\x03\x03\x00\x04\x02\x00\x00\x00", 9, -EPROTO, "type 2, not ClientHello"},
                {"\x16\x03\x01\x00\x00", 5, -EBADMSG, "zero-length"},
                {"\x16\x03\x01\x40\x01", 5, -EBADMSG, "16385 bytes"},
                {"\x16\x03\x01\x00\x05\x01\x00\x00\x00\xaa", 10, -EBADMSG, "after the ClientHello"},
                {"\x16\x03\x01\x00\x02\x01\x00\x14\x03\x03\x00\x01\x01", 13, -EBADMSG,
                 "record of type 20"}, /* CCS in the middle */
                {"\x16\x03\x01\x00\x04\x01\x00\x00\x00", 9, -EBADMSG, "truncated version"},
                {"\x16\x03\x01\x00\x04\x01\x01\x00\x00", 9, -E2BIG, "65536 bytes"},
        };
        for (size_t i = 0; i < ELEMENTSOF(t); i++) {
                err_clear(&e);
                int k = net_tls_sni((const uint8_t *) t[i].in, t[i].n, &h, &e);
                if (k != t[i].code)
                        fail_msg("case %zu: %d (%s)", i, k, e.msg);
                assert_msg_has(&e, t[i].why, "tls case");
                assert_int_equal(e.fault, WR_FAULT_WORKLOAD);
        }
        /* prefixes that cannot tell yet */
        assert_int_equal(net_tls_sni((const uint8_t *) "", 0, &h, &e), -EAGAIN);
        assert_int_equal(h.need, 6);
        assert_int_equal(net_tls_sni((const uint8_t *) "\x16\x03\x01\x01\x00", 5, &h, &e), -EAGAIN);
        assert_int_equal(h.need, 256);
}

/* ----------------------------------------------------------------- HTTP */

static int parse(const char *s, struct net_http_head *h, struct wr_err *e) {
        return net_http_head_parse(s, strlen(s), h, e);
}

static bool span_is(struct net_span sp, const char *lit) {
        return sp.n == strlen(lit) && (sp.n == 0 || memcmp(sp.p, lit, sp.n) == 0);
}

static void test_http_good(void **state) {
        static const struct {
                const char *in;
                const char *method, *target, *path, *host;
                enum net_http_form form;
                uint16_t port;
                int version;
        } t[] = {
                {"GET /simple HTTP/1.1\r\nHost: Example.COM\r\n\r\n", "GET", "/simple", "/simple",
                 "example.com", NET_HTTP_FORM_ORIGIN, 0, 11},
                {"GET /a?b=c HTTP/1.1\r\nHost: example.com:8080\r\nAccept: */*\r\n\r\n", "GET",
                 "/a?b=c", "/a?b=c", "example.com", NET_HTTP_FORM_ORIGIN, 8080, 11},
                {"GET http://Example.com/x?y HTTP/1.1\r\nHost: example.com\r\n\r\n", "GET",
                 "http://Example.com/x?y", "/x?y", "example.com", NET_HTTP_FORM_ABSOLUTE, 0, 11},
                {"GET HTTP://example.com:80 HTTP/1.1\r\nHost: example.com\r\n\r\n", "GET",
                 "HTTP://example.com:80", "", "example.com", NET_HTTP_FORM_ABSOLUTE, 80, 11},
                {"GET http://example.com/ HTTP/1.0\r\n\r\n", "GET", "http://example.com/", "/",
                 "example.com", NET_HTTP_FORM_ABSOLUTE, 0, 10},
                {"CONNECT api.github.com:443 HTTP/1.1\r\nHost: api.github.com:443\r\n\r\n",
                 "CONNECT", "api.github.com:443", "", "api.github.com", NET_HTTP_FORM_AUTHORITY,
                 443, 11},
                {"CONNECT [2001:db8::1]:443 HTTP/1.1\r\nHost: [2001:db8::1]:443\r\n\r\n", "CONNECT",
                 "[2001:db8::1]:443", "", "2001:db8::1", NET_HTTP_FORM_AUTHORITY, 443, 11},
                {"OPTIONS * HTTP/1.1\r\nHost: example.com\r\n\r\n", "OPTIONS", "*", "",
                 "example.com", NET_HTTP_FORM_ASTERISK, 0, 11},
                {"GET / HTTP/1.0\r\n\r\n", "GET", "/", "/", NULL, NET_HTTP_FORM_ORIGIN, 0, 10},
                {"POST /up HTTP/1.1\r\nHost: h.example\r\nContent-Length: 5\r\n\r\nhello", "POST",
                 "/up", "/up", "h.example", NET_HTTP_FORM_ORIGIN, 0, 11},
                {"POST /up HTTP/1.1\r\nHost: h.example\r\nTransfer-Encoding: Chunked\r\n\r\n",
                 "POST", "/up", "/up", "h.example", NET_HTTP_FORM_ORIGIN, 0, 11},
                {"GET / HTTP/1.1\r\nhost:h.example\r\nX-Empty:\r\nX-Sp: \t a b \t\r\n\r\n", "GET",
                 "/", "/", "h.example", NET_HTTP_FORM_ORIGIN, 0, 11},
                {"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", "GET", "/", "/", "127.0.0.1",
                 NET_HTTP_FORM_ORIGIN, 0, 11},
                {"GET / HTTP/1.1\r\nHost: 0x7f.1:81\r\n\r\n", "GET", "/", "/", "127.0.0.1",
                 NET_HTTP_FORM_ORIGIN, 81, 11},
                {"GET / HTTP/1.1\r\nHost: [::ffff:169.254.169.254]\r\n\r\n", "GET", "/", "/",
                 "::ffff:169.254.169.254", NET_HTTP_FORM_ORIGIN, 0, 11},
                {"GET / HTTP/1.1\r\nHost: example.com.\r\n\r\n", "GET", "/", "/", "example.com",
                 NET_HTTP_FORM_ORIGIN, 0, 11},
                {"M-SEARCH! /%00 HTTP/1.1\r\nHost: a.example\r\nX: caf\xc3\xa9\r\n\r\n",
                 "M-SEARCH!", "/%00", "/%00", "a.example", NET_HTTP_FORM_ORIGIN, 0, 11},
        };
        for (size_t i = 0; i < ELEMENTSOF(t); i++) {
                struct net_http_head *h = malloc(sizeof(*h));
                struct wr_err e = {0};
                if (parse(t[i].in, h, &e) != 0)
                        fail_msg("case %zu: %s", i, e.msg);
                assert_true(span_is(h->method, t[i].method));
                assert_true(span_is(h->target, t[i].target));
                if (!span_is(h->path, t[i].path))
                        fail_msg("case %zu: path %.*s", i, (int) h->path.n, h->path.p);
                assert_int_equal(h->form, t[i].form);
                assert_int_equal(h->version, t[i].version);
                assert_int_equal(h->has_host, t[i].host != NULL);
                if (t[i].host)
                        assert_string_equal(h->host.name, t[i].host);
                assert_int_equal(h->port, t[i].port);
                const char *end = strstr(t[i].in, "\r\n\r\n") + 4;
                assert_int_equal(h->head_len, (size_t) (end - t[i].in));
                assert_false(h->trace);
                /* every proper prefix of the head: need more */
                for (size_t k = 0; k < h->head_len; k++) {
                        struct net_http_head *p = malloc(sizeof(*p));
                        int r = net_http_head_parse(t[i].in, k, p, &e);
                        if (r != -EAGAIN)
                                fail_msg("case %zu prefix %zu: %d (%s)", i, k, r, e.msg);
                        free(p);
                }
                free(h);
        }
        struct net_http_head *h = malloc(sizeof(*h));
        assert_int_equal(parse("TRACE / HTTP/1.1\r\nHost: a.example\r\n\r\n", h, NULL), 0);
        assert_true(h->trace);
        assert_int_equal(parse("TRACK / HTTP/1.1\r\nHost: a.example\r\n\r\n", h, NULL), 0);
        assert_true(h->trace);
        assert_int_equal(parse("trace / HTTP/1.1\r\nHost: a.example\r\n\r\n", h, NULL), 0);
        assert_false(h->trace); /* methods are case-sensitive: "trace" is another method */
        assert_int_equal(parse("GET / HTTP/1.1\r\nHost: a.example\r\nUpgrade: h2c\r\n"
                               "Connection: Upgrade, HTTP2-Settings\r\n\r\n",
                               h, NULL),
                         0);
        assert_true(h->upgrade);
        assert_int_equal(h->n_headers, 3);
        const struct net_http_header *f = net_http_head_find(h, "CONNECTION");
        assert_non_null(f);
        assert_true(span_is(f->value, "Upgrade, HTTP2-Settings"));
        assert_null(net_http_head_find(h, "cookie"));
        assert_int_equal(parse("POST / HTTP/1.1\r\nHost: a.example\r\nContent-Length: 0012\r\n\r\n",
                               h, NULL),
                         0);
        assert_true(h->has_content_length);
        assert_int_equal(h->content_length, 12);
        free(h);
}

static void test_http_bad(void **state) {
        static const struct {
                const char *in;
                int code;
                const char *why;
        } t[] = {
                {"GET / HTTP/1.1\nHost: a\n\n", -EBADMSG, "bare LF"},
                {"GET / HTTP/1.1\r\nHost: a\rX: y\r\n\r\n", -EBADMSG, "bare CR"},
                {"\r\nGET / HTTP/1.1\r\nHost: a\r\n\r\n", -EBADMSG, "empty line before"},
                {"GET / HTTP/1.1\r\nHost: a.example\r\nX: a\r\n  folded\r\n\r\n", -EBADMSG,
                 "obs-fold"},
                {"GET / HTTP/1.1\r\n Host: a.example\r\n\r\n", -EBADMSG, "obs-fold"},
                {"GET / HTTP/1.1\r\nHost : a.example\r\n\r\n", -EBADMSG, "whitespace before ':'"},
                {"GET / HTTP/1.1\r\nHost\t: a.example\r\n\r\n", -EBADMSG, "whitespace before"},
                {"GET / HTTP/1.1\r\nHost a.example\r\n\r\n", -EBADMSG, "whitespace before"},
                {"GET / HTTP/1.1\r\nHosta.example\r\n\r\n", -EBADMSG, "not \"name: value\""},
                {"GET / HTTP/1.1\r\n: x\r\nHost: a.example\r\n\r\n", -EBADMSG, "not \"name"},
                {"GET / HTTP/1.1\r\nHost: a.example\r\nX: a\x01"
                 "b\r\n\r\n",
                 -EBADMSG, "control character"},
                {"GET / HTTP/1.1\r\nHost: a.example\r\nX: a\x7f\r\n\r\n", -EBADMSG,
                 "control character"},
                {"GET / HTTP/1.1\r\nH\xc3\xb6st: a.example\r\n\r\n", -EBADMSG, "not \"name"},
                {"POST / HTTP/1.1\r\nHost: a.example\r\nContent-Length: 5\r\nTransfer-Encoding: "
                 "chunked\r\n\r\n",
                 -EBADMSG, "both Content-Length and Transfer-Encoding"},
                {"POST / HTTP/1.1\r\nHost: a.example\r\nTransfer-Encoding: "
                 "chunked\r\ncontent-length: 5\r\n\r\n",
                 -EBADMSG, "both Content-Length"},
                {"POST / HTTP/1.1\r\nHost: a.example\r\nContent-Length: 5\r\nContent-Length: "
                 "5\r\n\r\n",
                 -EBADMSG, "more than one Content-Length"},
                {"POST / HTTP/1.1\r\nHost: a.example\r\nContent-Length: 5, 5\r\n\r\n", -EBADMSG,
                 "not a decimal number"},
                {"POST / HTTP/1.1\r\nHost: a.example\r\nContent-Length: -1\r\n\r\n", -EBADMSG,
                 "not a decimal"},
                {"POST / HTTP/1.1\r\nHost: a.example\r\nContent-Length: 0x10\r\n\r\n", -EBADMSG,
                 "not a decimal"},
                {"POST / HTTP/1.1\r\nHost: a.example\r\nContent-Length: "
                 "99999999999999999999\r\n\r\n",
                 -EBADMSG, "not a decimal"},
                {"POST / HTTP/1.1\r\nHost: a.example\r\nContent-Length:\r\n\r\n", -EBADMSG,
                 "not a decimal"},
                {"POST / HTTP/1.1\r\nHost: a.example\r\nTransfer-Encoding: gzip, chunked\r\n\r\n",
                 -EBADMSG, "only \"chunked\""},
                {"POST / HTTP/1.1\r\nHost: a.example\r\nTransfer-Encoding: "
                 "chunked\r\nTransfer-Encoding: chunked\r\n\r\n",
                 -EBADMSG, "more than one Transfer-Encoding"},
                {"POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n", -EBADMSG,
                 "Transfer-Encoding on HTTP/1.0"},
                {"GET / HTTP/1.1\r\nHost: a.example\r\nHost: b.example\r\n\r\n", -EBADMSG,
                 "more than one Host"},
                {"GET / HTTP/1.1\r\nHost: a.example\r\nhost: a.example\r\n\r\n", -EBADMSG,
                 "more than one Host"},
                {"GET / HTTP/1.1\r\nX: y\r\n\r\n", -EBADMSG, "without Host"},
                {"GET / HTTP/1.1\r\nHost:\r\n\r\n", -EBADMSG, "Host: empty"},
                {"GET / HTTP/1.1\r\nHost: user@a.example\r\n\r\n", -EBADMSG, "userinfo"},
                {"GET / HTTP/1.1\r\nHost: a.example:\r\n\r\n", -EBADMSG, "bad port"},
                {"GET / HTTP/1.1\r\nHost: a.example:0\r\n\r\n", -EBADMSG, "out of range"},
                {"GET / HTTP/1.1\r\nHost: a.example:65536\r\n\r\n", -EBADMSG, "out of range"},
                {"GET / HTTP/1.1\r\nHost: a.example:+80\r\n\r\n", -EBADMSG, "bad port"},
                {"GET / HTTP/1.1\r\nHost: a.example:080080\r\n\r\n", -EBADMSG, "bad port"},
                {"GET / HTTP/1.1\r\nHost: ::1\r\n\r\n", -EBADMSG, "IPv6 needs brackets"},
                {"GET / HTTP/1.1\r\nHost: [::1\r\n\r\n", -EBADMSG, "unclosed"},
                {"GET / HTTP/1.1\r\nHost: [::1]x\r\n\r\n", -EBADMSG, "bytes after ']'"},
                {"GET / HTTP/1.1\r\nHost: a..example\r\n\r\n", -EBADMSG, "empty label"},
                {"GET / HTTP/1.1\r\nHost: a_b.example\r\n\r\n", -EBADMSG, "Host: host"},
                {"GET / HTTP/1.1\r\nHost: a.example%2f\r\n\r\n", -EBADMSG, "'%'"},
                {"GET http://a.example/ HTTP/1.1\r\nHost: b.example\r\n\r\n", -EBADMSG,
                 "does not match the request-target"},
                {"GET http://a.example/ HTTP/1.1\r\nHost: a.example:8080\r\n\r\n", -EBADMSG,
                 "does not match"},
                {"GET http://a.example:8080/ HTTP/1.1\r\nHost: a.example\r\n\r\n", -EBADMSG,
                 "does not match"},
                {"GET http://user:pw@a.example/ HTTP/1.1\r\nHost: a.example\r\n\r\n", -EBADMSG,
                 "userinfo"},
                {"GET http://b.example@a.example/ HTTP/1.1\r\nHost: a.example\r\n\r\n", -EBADMSG,
                 "userinfo"},
                {"GET https://a.example/ HTTP/1.1\r\nHost: a.example\r\n\r\n", -EBADMSG,
                 "neither origin form"},
                {"GET ftp://a.example/ HTTP/1.1\r\nHost: a.example\r\n\r\n", -EBADMSG, "neither"},
                {"GET http:// HTTP/1.1\r\nHost: a.example\r\n\r\n", -EBADMSG, "neither"},
                {"GET http:///x HTTP/1.1\r\nHost: a.example\r\n\r\n", -EBADMSG, "authority: empty"},
                {"GET a.example:80 HTTP/1.1\r\nHost: a.example\r\n\r\n", -EBADMSG, "neither"},
                {"GET /#frag HTTP/1.1\r\nHost: a.example\r\n\r\n", -EBADMSG, "fragment"},
                {"GET * HTTP/1.1\r\nHost: a.example\r\n\r\n", -EBADMSG, "for OPTIONS only"},
                {"CONNECT a.example HTTP/1.1\r\nHost: a.example\r\n\r\n", -EBADMSG,
                 "port required"},
                {"CONNECT /x HTTP/1.1\r\nHost: a.example\r\n\r\n", -EBADMSG, "CONNECT target"},
                {"CONNECT a.example:443 HTTP/1.1\r\nHost: b.example:443\r\n\r\n", -EBADMSG,
                 "does not match"},
                {"CONNECT a.example:443 HTTP/1.1\r\nHost: a.example:444\r\n\r\n", -EBADMSG,
                 "does not match"},
                {"CONNECT 169.254.169.254:80 HTTP/1.1\r\nHost: 2852039166:80\r\n\r\n", 0, ""},
                {"GET / HTTP/2.0\r\nHost: a.example\r\n\r\n", -EBADMSG, "version"},
                {"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", -EBADMSG, "version"},
                {"GET / http/1.1\r\nHost: a.example\r\n\r\n", -EBADMSG, "version"},
                {"GET / HTTP/1.1 \r\nHost: a.example\r\n\r\n", -EBADMSG, "version"},
                {"GET  / HTTP/1.1\r\nHost: a.example\r\n\r\n", -EBADMSG, "bad request-target"},
                {"GET /a b HTTP/1.1\r\nHost: a.example\r\n\r\n", -EBADMSG, "version"},
                {"GET\t/ HTTP/1.1\r\nHost: a.example\r\n\r\n", -EBADMSG, "bad method"},
                {"G(T / HTTP/1.1\r\nHost: a.example\r\n\r\n", -EBADMSG, "bad method"},
                {" GET / HTTP/1.1\r\nHost: a.example\r\n\r\n", -EBADMSG, "bad method"},
                {"GET /\x80 HTTP/1.1\r\nHost: a.example\r\n\r\n", -EBADMSG, "bad request-target"},
                {"AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA / HTTP/1.1\r\nHost: a.example\r\n\r\n",
                 -EBADMSG, "bad method"},
                /* errors are reported as soon as a complete line is bad */
                {"GET / HTTP/1.1\r\nHost : a\r\n", -EBADMSG, "whitespace before"},
                {"GET / HTTP/3\r\n", -EBADMSG, "version"},
                {"GET / HTTP/1.1\r\nHost: a.example\r\n", -EAGAIN, ""},
        };
        for (size_t i = 0; i < ELEMENTSOF(t); i++) {
                struct net_http_head *h = malloc(sizeof(*h));
                struct wr_err e = {0};
                size_t len = strlen(t[i].in);
                int r = net_http_head_parse(t[i].in, len, h, &e);
                if (r != t[i].code)
                        fail_msg("case %zu %s: %d (%s)", i, t[i].in, r, e.msg);
                if (r == -EBADMSG) {
                        assert_msg_has(&e, t[i].why, t[i].in);
                        assert_int_equal(e.code, -EBADMSG);
                        assert_int_equal(e.fault, WR_FAULT_WORKLOAD);
                        assert_int_equal(h->head_len, 0);
                        assert_int_equal(h->n_headers, 0);
                }
                free(h);
        }
        /* NUL inside a header value (the table's strings stop at it) */
        static const char nul[] = "GET / HTTP/1.1\r\nHost: a.example\r\nX: a\0b\r\n\r\n";
        struct net_http_head *h = malloc(sizeof(*h));
        struct wr_err e = {0};
        assert_int_equal(net_http_head_parse(nul, sizeof(nul) - 1, h, &e), -EBADMSG);
        assert_msg_has(&e, "NUL byte at offset 37", "nul");
        free(h);
}

static void test_http_limits(void **state) {
        struct net_http_head *h = malloc(sizeof(*h));
        char *buf = malloc(NET_HTTP_HEAD_MAX + 200);
        struct wr_err e = {0};
        /* 100 fields pass, 101 do not */
        for (int n = 100; n <= 101; n++) {
                size_t o = (size_t) sprintf(buf, "GET / HTTP/1.1\r\nHost: a.example\r\n");
                for (int i = 1; i < n; i++)
                        o += (size_t) sprintf(buf + o, "X-%d: %d\r\n", i, i);
                o += (size_t) sprintf(buf + o, "\r\n");
                int r = net_http_head_parse(buf, o, h, &e);
                assert_int_equal(r, n == 100 ? 0 : -E2BIG);
        }
        assert_msg_has(&e, "more than 100 header fields", "fields");
        /* a head of 64 KiB without its end */
        size_t o = (size_t) sprintf(buf, "GET / HTTP/1.1\r\nHost: a.example\r\nX: ");
        memset(buf + o, 'a', NET_HTTP_HEAD_MAX - o);
        assert_int_equal(net_http_head_parse(buf, NET_HTTP_HEAD_MAX - 1, h, &e), -EAGAIN);
        assert_int_equal(net_http_head_parse(buf, NET_HTTP_HEAD_MAX, h, &e), -E2BIG);
        assert_msg_has(&e, "longer than 65536", "size");
        /* a head that ends exactly at 64 KiB passes */
        memcpy(buf + NET_HTTP_HEAD_MAX - 4, "\r\n\r\n", 4);
        assert_int_equal(net_http_head_parse(buf, NET_HTTP_HEAD_MAX + 100, h, &e), 0);
        assert_int_equal(h->head_len, NET_HTTP_HEAD_MAX);
        /* a request-target over 8 KiB */
        o = (size_t) sprintf(buf, "GET /");
        memset(buf + o, 'a', NET_HTTP_TARGET_MAX);
        o += NET_HTTP_TARGET_MAX;
        o += (size_t) sprintf(buf + o, " HTTP/1.1\r\nHost: a.example\r\n\r\n");
        assert_int_equal(net_http_head_parse(buf, o, h, &e), -EBADMSG);
        free(buf);
        free(h);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_host_good),
                cmocka_unit_test(test_host_bad),
                cmocka_unit_test(test_host_limits),
                cmocka_unit_test(test_host_aton_vs_libc),
                cmocka_unit_test(test_addr_normalize),
                cmocka_unit_test(test_builtin_deny),
                cmocka_unit_test(test_cidr),
                cmocka_unit_test(test_ports),
                cmocka_unit_test(test_pattern),
                cmocka_unit_test(test_policy_add_errors),
                cmocka_unit_test(test_decide_seed_hosts),
                cmocka_unit_test(test_decide_routes),
                cmocka_unit_test(test_wire),
                cmocka_unit_test(test_sni_captured),
                cmocka_unit_test(test_sni_fragmented),
                cmocka_unit_test(test_sni_adversarial),
                cmocka_unit_test(test_http_good),
                cmocka_unit_test(test_http_bad),
                cmocka_unit_test(test_http_limits),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
