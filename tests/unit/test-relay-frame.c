/* SPDX-License-Identifier: Apache-2.0 */
/* The relay's frames (src/k8s/relay-frame.c): what a Pod may send warrend
 * is parsed whole or refused; partial frames wait for more. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <string.h>

#include "init/ctl-proto.h"
#include "k8s/relay-frame.h"

static size_t frame(uint8_t *buf, uint32_t type, uint32_t stream, const void *p, size_t len) {
        relay_hdr_put(buf, type, stream, (uint32_t) len);
        if (len)
                memcpy(buf + RELAY_HDR_LEN, p, len);
        return RELAY_HDR_LEN + len;
}

static size_t exited_msg(uint8_t *buf, uint32_t nstreams, uint32_t kind) {
        uint8_t p[4 + 8 + sizeof(struct ctl_hdr) + sizeof(struct ctl_exited)];
        size_t n = 0;
        relay_put32(p, nstreams);
        n += 4;
        for (uint32_t i = 0; i < nstreams; i++) {
                relay_put32(p + n, 2);
                relay_put32(p + n + 4, kind);
                n += 8;
        }
        struct ctl_hdr h = {
                .magic = CTL_MAGIC, .type = CTL_EXITED, .len = sizeof(struct ctl_exited), .id = 7};
        struct ctl_exited x = {.pid = 42, .status = 3 << 8};
        memcpy(p + n, &h, sizeof(h));
        n += sizeof(h);
        memcpy(p + n, &x, sizeof(x));
        n += sizeof(x);
        return frame(buf, RELAY_MSG, 0, p, n);
}

static void test_hello(void **state) {
        (void) state;
        uint8_t buf[256], pl[128];
        struct relay_frame f;
        size_t n = strlen("sb-0011") + 1;
        memcpy(pl, "sb-0011", n);
        memset(pl + n, 'a', RELAY_TOKEN_LEN);
        size_t len = frame(buf, RELAY_HELLO, 0, pl, n + RELAY_TOKEN_LEN);
        assert_int_equal(relay_frame_parse(buf, len, CTL_REPLY_MAX, &f), (int) len);
        assert_string_equal(f.id, "sb-0011");
        assert_int_equal(strlen(f.token), RELAY_TOKEN_LEN);
        /* every prefix waits for more */
        for (size_t i = 0; i < len; i++)
                assert_int_equal(relay_frame_parse(buf, i, CTL_REPLY_MAX, &f), 0);
        /* a token that is not lowercase hex, an id with a slash */
        pl[n] = 'G';
        len = frame(buf, RELAY_HELLO, 0, pl, n + RELAY_TOKEN_LEN);
        assert_int_equal(relay_frame_parse(buf, len, CTL_REPLY_MAX, &f), -EBADMSG);
        pl[n] = 'a';
        pl[2] = '/';
        len = frame(buf, RELAY_HELLO, 0, pl, n + RELAY_TOKEN_LEN);
        assert_int_equal(relay_frame_parse(buf, len, CTL_REPLY_MAX, &f), -EBADMSG);
}

static void test_msg(void **state) {
        (void) state;
        uint8_t buf[256];
        struct relay_frame f;
        size_t len = exited_msg(buf, 1, RELAY_KIND_OUT);
        assert_int_equal(relay_frame_parse(buf, len, CTL_REPLY_MAX, &f), (int) len);
        assert_int_equal(f.nstreams, 1);
        assert_int_equal(f.streams[0].id, 2);
        assert_int_equal(f.payload_len, sizeof(struct ctl_hdr) + sizeof(struct ctl_exited));
        /* a bad kind; a datagram whose header lies about its size */
        len = exited_msg(buf, 1, 9);
        assert_int_equal(relay_frame_parse(buf, len, CTL_REPLY_MAX, &f), -EBADMSG);
        len = exited_msg(buf, 0, 0);
        buf[RELAY_HDR_LEN + 4 + 8] ^= 1; /* hdr.len */
        assert_int_equal(relay_frame_parse(buf, len, CTL_REPLY_MAX, &f), -EBADMSG);
}

static void test_data_credit_limits(void **state) {
        (void) state;
        static uint8_t buf[RELAY_HDR_LEN + RELAY_DATA_MAX + 1];
        struct relay_frame f;
        uint8_t c[4];
        size_t len = frame(buf, RELAY_DATA, 3, "abc", 3);
        assert_int_equal(relay_frame_parse(buf, len, CTL_REPLY_MAX, &f), (int) len);
        assert_memory_equal(f.payload, "abc", 3);
        /* stream 0, empty, too large: refused at the header */
        frame(buf, RELAY_DATA, 0, "abc", 3);
        assert_int_equal(relay_frame_parse(buf, RELAY_HDR_LEN, CTL_REPLY_MAX, &f), -EBADMSG);
        relay_hdr_put(buf, RELAY_DATA, 3, 0);
        assert_int_equal(relay_frame_parse(buf, RELAY_HDR_LEN, CTL_REPLY_MAX, &f), -EBADMSG);
        relay_hdr_put(buf, RELAY_DATA, 3, RELAY_DATA_MAX + 1);
        assert_int_equal(relay_frame_parse(buf, RELAY_HDR_LEN, CTL_REPLY_MAX, &f), -EBADMSG);
        relay_hdr_put(buf, RELAY_MSG, 0, 0xffffffffu);
        assert_int_equal(relay_frame_parse(buf, RELAY_HDR_LEN, CTL_REPLY_MAX, &f), -EBADMSG);
        relay_put32(c, RELAY_WINDOW);
        len = frame(buf, RELAY_CREDIT, 3, c, 4);
        assert_int_equal(relay_frame_parse(buf, len, CTL_REPLY_MAX, &f), (int) len);
        assert_int_equal(f.credit, RELAY_WINDOW);
        relay_put32(c, RELAY_WINDOW + 1);
        len = frame(buf, RELAY_CREDIT, 3, c, 4);
        assert_int_equal(relay_frame_parse(buf, len, CTL_REPLY_MAX, &f), -EBADMSG);
        relay_put32(c, 0);
        len = frame(buf, RELAY_CREDIT, 3, c, 4);
        assert_int_equal(relay_frame_parse(buf, len, CTL_REPLY_MAX, &f), -EBADMSG);
        /* unknown type, nonzero flags */
        len = frame(buf, 99, 3, NULL, 0);
        assert_int_equal(relay_frame_parse(buf, len, CTL_REPLY_MAX, &f), -EBADMSG);
        len = frame(buf, RELAY_EOF, 3, NULL, 0);
        buf[1] = 1;
        assert_int_equal(relay_frame_parse(buf, len, CTL_REPLY_MAX, &f), -EBADMSG);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_hello),
                cmocka_unit_test(test_msg),
                cmocka_unit_test(test_data_credit_limits),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
