/* SPDX-License-Identifier: Apache-2.0 */
/* src/priv, phase 5 (warrend's drop, docs/privsep.md): HELLO_REPLY's
 * host_check round trips and is refused when it is no errno (above 4095);
 * the real warren-priv (argv[1]) answers host_check 0 without --init
 * (nothing was asked) and, with an --init that does not exist, the errno
 * its rt_prepare failed with, so that warrend need not check the host
 * itself. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "priv/client.h"
#include "priv/priv-proto.h"

static const char *priv_bin;

static void test_host_check_decode(void **state) {
        (void) state;
        uint8_t buf[PRIV_MSG_MAX];
        struct wr_err e = {0};
        struct priv_reply rep;
        struct priv_hello_reply h = {.version = PRIV_VERSION, .pid = 7, .host_check = ENOENT};
        int n = priv_hello_reply_encode(1, &h, buf, sizeof(buf));
        assert_true(n > 0);
        assert_int_equal(priv_reply_decode(buf, (size_t) n, 0, &rep, &e), 0);
        assert_int_equal(rep.hello.host_check, ENOENT);
        h.host_check = 4095;
        n = priv_hello_reply_encode(1, &h, buf, sizeof(buf));
        assert_int_equal(priv_reply_decode(buf, (size_t) n, 0, &rep, &e), 0);
        h.host_check = 4096;
        n = priv_hello_reply_encode(1, &h, buf, sizeof(buf));
        assert_int_equal(priv_reply_decode(buf, (size_t) n, 0, &rep, &e), -EINVAL);
        assert_non_null(strstr(e.msg, "host_check 4096"));
        h.host_check = UINT32_MAX;
        n = priv_hello_reply_encode(1, &h, buf, sizeof(buf));
        assert_int_equal(priv_reply_decode(buf, (size_t) n, 0, &rep, &e), -EINVAL);
}

static void hello_of(const char *init, uint32_t *ret) {
        char dir[] = "/tmp/test-priv-drop-XXXXXX";
        assert_non_null(mkdtemp(dir));
        struct priv_client *c = NULL;
        struct wr_err e = {0};
        int r = init ? priv_client_new_init(priv_bin, dir, init, &c, &e)
                     : priv_client_new(priv_bin, dir, &c, &e);
        assert_int_equal(r, 0);
        struct priv_hello_reply h;
        assert_int_equal(priv_hello(c, &h, &e), 0);
        *ret = h.host_check;
        priv_client_free(c);
        rmdir(dir);
}

static void test_host_check_live(void **state) {
        (void) state;
        if (geteuid() != 0) {
                skip();
                return;
        }
        uint32_t hc = 1;
        hello_of(NULL, &hc);
        assert_int_equal(hc, 0);
        hello_of("/nonexistent/warren-init", &hc);
        assert_int_not_equal(hc, 0);
}

int main(int argc, char **argv) {
        priv_bin = argc > 1 ? argv[1] : "src/priv/warren-priv";
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_host_check_decode),
                cmocka_unit_test(test_host_check_live),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
