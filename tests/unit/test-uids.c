/* SPDX-License-Identifier: Apache-2.0 */
/* User namespace ranges of sandboxes (src/sandbox/uids.c) and the id
 * translation of host-side code (src/basic/idmap.h): every range distinct
 * and in bounds, round robin, full, release, recovery's adopt. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <stdlib.h>

#include "basic/idmap.h"
#include "sandbox/uids.h"

static void test_ranges_distinct_and_bounded(void **state) {
        (void) state;
        struct sbx_uids *u = calloc(1, sizeof(*u));
        assert_non_null(u);
        int32_t prev = -1;
        for (uint32_t i = 0; i < SBX_UIDS_SLOTS; i++) {
                int32_t s;
                assert_int_equal(sbx_uids_alloc(u, &s), 0);
                assert_int_equal(s, (int32_t) i); /* fresh: in order */
                uint32_t base = sbx_uids_base(s);
                assert_true(base >= SBX_UIDS_BASE);
                /* below 2^31 and systemd's foreign range, never overlapping */
                assert_true((uint64_t) base + SBX_UIDS_COUNT <= 2147352576u);
                if (prev >= 0)
                        assert_int_equal(base - sbx_uids_base(prev), SBX_UIDS_COUNT);
                prev = s;
        }
        int32_t s;
        assert_int_equal(sbx_uids_alloc(u, &s), -ENOSPC);
        /* released ranges come back, the oldest free first */
        sbx_uids_release(u, 7);
        sbx_uids_release(u, 3);
        sbx_uids_release(u, 3); /* twice: nothing */
        sbx_uids_release(u, -1);
        assert_int_equal(u->n_used, SBX_UIDS_SLOTS - 2);
        assert_int_equal(sbx_uids_alloc(u, &s), 0);
        assert_int_equal(s, 3);
        assert_int_equal(sbx_uids_alloc(u, &s), 0);
        assert_int_equal(s, 7);
        assert_int_equal(sbx_uids_alloc(u, &s), -ENOSPC);
        free(u);
}

static void test_round_robin(void **state) {
        (void) state;
        struct sbx_uids u = {0};
        int32_t a, b, c;
        assert_int_equal(sbx_uids_alloc(&u, &a), 0);
        sbx_uids_release(&u, a);
        /* a range just freed is not the next one given out */
        assert_int_equal(sbx_uids_alloc(&u, &b), 0);
        assert_int_not_equal(a, b);
        assert_int_equal(sbx_uids_alloc(&u, &c), 0);
        assert_int_not_equal(b, c);
}

static void test_adopt(void **state) {
        (void) state;
        struct sbx_uids u = {0};
        int32_t s;
        assert_int_equal(sbx_uids_adopt(&u, sbx_uids_base(5), &s), 0);
        assert_int_equal(s, 5);
        assert_int_equal(sbx_uids_adopt(&u, sbx_uids_base(5), &s), -EEXIST);
        assert_int_equal(sbx_uids_adopt(&u, sbx_uids_base(5) + 1, &s), -EINVAL);
        assert_int_equal(sbx_uids_adopt(&u, SBX_UIDS_BASE - SBX_UIDS_COUNT, &s), -EINVAL);
        assert_int_equal(sbx_uids_adopt(&u, sbx_uids_base(SBX_UIDS_SLOTS - 1) + SBX_UIDS_COUNT, &s),
                         -EINVAL);
        /* an adopted range is never given out */
        for (int i = 0; i < 10; i++) {
                assert_int_equal(sbx_uids_alloc(&u, &s), 0);
                assert_int_not_equal(s, 5);
        }
}

static void test_idmap(void **state) {
        (void) state;
        const uint32_t b = SBX_UIDS_BASE, n = SBX_UIDS_COUNT;
        assert_int_equal(wr_id_inside(b, b, n), 0);
        assert_int_equal(wr_id_inside(b + 1000, b, n), 1000);
        assert_int_equal(wr_id_inside(b + n - 1, b, n), n - 1);
        assert_int_equal(wr_id_inside(b + n, b, n), WR_ID_OVERFLOW);
        assert_int_equal(wr_id_inside(0, b, n), WR_ID_OVERFLOW);
        assert_int_equal(wr_id_inside(1000, 0, 0), 1000);
        assert_int_equal(wr_id_host(0, b, n), b);
        assert_int_equal(wr_id_host(1000, b, n), b + 1000);
        assert_int_equal(wr_id_host(n, b, n), b + WR_ID_OVERFLOW);
        assert_int_equal(wr_id_host(4000000000u, b, n), b + WR_ID_OVERFLOW);
        assert_int_equal(wr_id_host(1000, 0, 0), 1000);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_ranges_distinct_and_bounded),
                cmocka_unit_test(test_round_robin),
                cmocka_unit_test(test_adopt),
                cmocka_unit_test(test_idmap),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
