/* SPDX-License-Identifier: Apache-2.0 */
/* The sandbox address range and its allocation (src/sandbox/netaddr.c):
 * CIDR parsing (every refusal named), overlap, /30 slots, next-fit
 * allocation, recovery's take, peer names and back. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "sandbox/netaddr.h"

#define IP(a, b, c, d) ((uint32_t) (a) << 24 | (uint32_t) (b) << 16 | (uint32_t) (c) << 8 | (d))

static void test_parse(void **state) {
        (void) state;
        uint32_t base;
        uint8_t p;
        struct wr_err e = {0};
        assert_int_equal(sbx_cidr_parse("100.96.0.0/16", &base, &p, &e), 0);
        assert_int_equal(base, IP(100, 96, 0, 0));
        assert_int_equal(p, 16);
        assert_int_equal(sbx_cidr_parse("172.29.0.0/28", &base, &p, &e), 0);
        static const struct {
                const char *s, *msg;
        } bad[] = {
                {"100.96.0.1/16", "host bits set (did you mean 100.96.0.0/16?)"},
                {"100.96.0.0", "expected an IPv4 range"},
                {"100.96.0.0/", "bad prefix length"},
                {"100.96.0.0/016", "bad prefix length"},
                {"100.96.0.0/1x", "bad prefix length"},
                {"100.96.0.0/30", "the prefix must be /8../28"},
                {"10.0.0.0/7", "the prefix must be /8../28"},
                {"100.96/16", "not an IPv4 address"},
                {"fd00::/64", "not an IPv4 address"},
                {"", "expected an IPv4 range"},
        };
        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
                memset(&e, 0, sizeof(e));
                assert_int_equal(sbx_cidr_parse(bad[i].s, &base, &p, &e), -EINVAL);
                if (!strstr(e.msg, bad[i].msg))
                        fail_msg("%s: %s", bad[i].s, e.msg);
        }
}

static void test_overlap(void **state) {
        (void) state;
        assert_true(sbx_cidr_overlap(IP(192, 0, 2, 0), 24, IP(192, 0, 2, 0), 24));
        assert_true(sbx_cidr_overlap(IP(100, 96, 0, 0), 16, IP(100, 96, 3, 4), 30));
        assert_true(sbx_cidr_overlap(IP(100, 96, 3, 4), 30, IP(100, 96, 0, 0), 16));
        assert_true(sbx_cidr_overlap(IP(100, 64, 0, 0), 10, IP(100, 96, 0, 0), 16));
        assert_false(sbx_cidr_overlap(IP(100, 96, 0, 0), 16, IP(100, 97, 0, 0), 16));
        assert_false(sbx_cidr_overlap(IP(100, 96, 0, 0), 16, IP(198, 18, 0, 0), 15));
        assert_false(sbx_cidr_overlap(IP(100, 96, 0, 0), 16, IP(10, 255, 0, 0), 16));
        char buf[24];
        sbx_cidr_format(IP(100, 96, 0, 0), 16, buf, sizeof(buf));
        assert_string_equal(buf, "100.96.0.0/16");
}

static void test_alloc(void **state) {
        (void) state;
        struct sbx_netrange r;
        assert_int_equal(sbx_netrange_init(&r, IP(172, 29, 0, 0), 28), 0);
        assert_int_equal(r.n_slots, 4);
        uint32_t s[5], gw, sb;
        for (int i = 0; i < 4; i++) {
                assert_int_equal(sbx_netrange_alloc(&r, &s[i]), 0);
                assert_int_equal(s[i], (uint32_t) i);
        }
        assert_int_equal(sbx_netrange_alloc(&r, &s[4]), -ENOSPC);
        sbx_netrange_addrs(&r, 3, &gw, &sb);
        assert_int_equal(gw, IP(172, 29, 0, 13));
        assert_int_equal(sb, IP(172, 29, 0, 14));
        uint32_t slot;
        assert_int_equal(sbx_netrange_slot_of(&r, IP(172, 29, 0, 14), &slot), 0);
        assert_int_equal(slot, 3);
        assert_int_equal(sbx_netrange_slot_of(&r, IP(172, 29, 0, 16), &slot), -ERANGE);
        /* next-fit: freed 1 and 2 come back in order after the end */
        sbx_netrange_free(&r, 2);
        sbx_netrange_free(&r, 1);
        sbx_netrange_free(&r, 1); /* twice: ignored */
        assert_int_equal(r.n_used, 2);
        assert_int_equal(sbx_netrange_alloc(&r, &slot), 0);
        assert_int_equal(slot, 1);
        sbx_netrange_free(&r, 0);
        assert_int_equal(sbx_netrange_alloc(&r, &slot), 0);
        assert_int_equal(slot, 2); /* not 0: 0 was freed last */
        assert_int_equal(sbx_netrange_alloc(&r, &slot), 0);
        assert_int_equal(slot, 0);
        sbx_netrange_done(&r);

        /* recovery: taken slots are skipped, taking twice is refused */
        assert_int_equal(sbx_netrange_init(&r, IP(100, 96, 0, 0), 16), 0);
        assert_int_equal(r.n_slots, 16384);
        assert_int_equal(sbx_netrange_take(&r, 0), 0);
        assert_int_equal(sbx_netrange_take(&r, 0), -EEXIST);
        assert_int_equal(sbx_netrange_take(&r, 16384), -ERANGE);
        assert_int_equal(sbx_netrange_take(&r, 7), 0);
        assert_int_equal(sbx_netrange_alloc(&r, &slot), 0);
        assert_int_equal(slot, 8);
        for (uint32_t i = 0; i < 16384 - 3; i++)
                assert_int_equal(sbx_netrange_alloc(&r, &slot), 0);
        assert_int_equal(sbx_netrange_alloc(&r, &slot), -ENOSPC);
        assert_int_equal(r.n_used, 16384);
        sbx_netrange_done(&r);
        assert_int_equal(sbx_netrange_init(&r, IP(100, 96, 0, 1), 16), -EINVAL);
}

static void test_peer_names(void **state) {
        (void) state;
        char name[16];
        sbx_net_peer_name(IP(100, 96, 0, 1), name, sizeof(name));
        assert_string_equal(name, "wr19180000");
        uint32_t gw;
        assert_int_equal(sbx_net_peer_parse(name, &gw), 0);
        assert_int_equal(gw, IP(100, 96, 0, 1));
        sbx_net_peer_name(IP(255, 255, 255, 253), name, sizeof(name));
        assert_int_equal(sbx_net_peer_parse(name, &gw), 0);
        assert_int_equal(gw, IP(255, 255, 255, 253));
        assert_true(strlen(name) < 16);
        static const char *const bad[] = {"wr1918000",  "wr191800000", "wr1918000g", "eth0",
                                          "wrX9180000", "wr",          "wR19180000", "wr4fffffff"};
        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
                if (sbx_net_peer_parse(bad[i], &gw) != -EINVAL)
                        fail_msg("accepted %s", bad[i]);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_parse),
                cmocka_unit_test(test_overlap),
                cmocka_unit_test(test_alloc),
                cmocka_unit_test(test_peer_names),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
