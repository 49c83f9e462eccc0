/* SPDX-License-Identifier: Apache-2.0 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <string.h>

#include "basic/err.h"

static void test_err_prefix_chain(void **state) {
        struct wr_err e = {0};
        assert_int_equal(err_set(&e, -ENOENT, "no such image %s", "x"), -ENOENT);
        assert_int_equal(err_prefix(&e, -EIO, "create sandbox"), -ENOENT);
        assert_string_equal(e.msg, "create sandbox: no such image x");
        assert_int_equal(err_status(&e), WR_STATUS_NOT_FOUND);
}

static void test_err_prefix_empty(void **state) {
        struct wr_err e = {0};
        assert_int_equal(err_prefix(&e, -EACCES, "open"), -EACCES);
        assert_string_equal(e.msg, "open: Permission denied");
        assert_int_equal(err_status(&e), WR_STATUS_PERMISSION_DENIED);
}

static void test_err_null(void **state) {
        assert_int_equal(err_set(NULL, -EINVAL, "x"), -EINVAL);
        assert_int_equal(err_prefix(NULL, -EINVAL, "x"), -EINVAL);
}

static void test_err_setx(void **state) {
        struct wr_err e = {0};
        err_setx(&e, -EINVAL, WR_STATUS_FAILED_PRECONDITION, WR_FAULT_CLIENT, "busy");
        assert_int_equal(err_status(&e), WR_STATUS_FAILED_PRECONDITION);
        assert_string_equal(err_status_name(err_status(&e)), "FAILED_PRECONDITION");
        assert_string_equal(err_status_name(99), "UNKNOWN");
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_err_prefix_chain),
                cmocka_unit_test(test_err_prefix_empty),
                cmocka_unit_test(test_err_null),
                cmocka_unit_test(test_err_setx),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
