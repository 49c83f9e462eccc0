/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests for the gRPC wire format (src/rpc/grpc.c): incremental framing
 * across every chunk split, oversize and bad flags, percent-encoding both
 * ways, grpc-timeout parsing and formatting. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "basic/macro.h"
#include "rpc/grpc.h"

struct collected {
        size_t n;
        uint8_t *msgs[16];
        size_t lens[16];
};

static int collect(void *userdata, uint8_t *msg, size_t len) {
        struct collected *c = userdata;
        if (c->n >= 16) {
                free(msg);
                return -ENOBUFS;
        }
        c->msgs[c->n] = msg;
        c->lens[c->n] = len;
        c->n++;
        return 0;
}

static void collected_free(struct collected *c) {
        for (size_t i = 0; i < c->n; i++)
                free(c->msgs[i]);
        c->n = 0;
}

/* Build a stream of three messages: 3 bytes, 0 bytes, 300 bytes. */
static size_t build_stream(uint8_t *buf) {
        size_t off = 0;
        const size_t lens[] = {3, 0, 300};
        for (size_t m = 0; m < 3; m++) {
                assert_int_equal(grpc_frame_header(buf + off, lens[m]), 0);
                off += GRPC_FRAME_HEADER;
                for (size_t i = 0; i < lens[m]; i++)
                        buf[off++] = (uint8_t) (m * 7 + i);
        }
        return off;
}

static void check_three(struct collected *c) {
        assert_int_equal(c->n, 3);
        assert_int_equal(c->lens[0], 3);
        assert_int_equal(c->lens[1], 0);
        assert_int_equal(c->lens[2], 300);
        for (size_t m = 0; m < 3; m++)
                for (size_t i = 0; i < c->lens[m]; i++)
                        assert_int_equal(c->msgs[m][i], (uint8_t) (m * 7 + i));
}

static void test_decode_whole(void **state) {
        uint8_t buf[400];
        size_t n = build_stream(buf);
        struct grpc_decoder d = {.max = 1000};
        struct collected c = {0};
        assert_int_equal(grpc_decoder_feed(&d, buf, n, collect, &c), 0);
        check_three(&c);
        assert_false(grpc_decoder_partial(&d));
        collected_free(&c);
        grpc_decoder_reset(&d);
}

/* Every split into two chunks, and byte by byte. */
static void test_decode_splits(void **state) {
        uint8_t buf[400];
        size_t n = build_stream(buf);
        for (size_t cut = 0; cut <= n; cut++) {
                struct grpc_decoder d = {.max = 1000};
                struct collected c = {0};
                assert_int_equal(grpc_decoder_feed(&d, buf, cut, collect, &c), 0);
                assert_int_equal(grpc_decoder_feed(&d, buf + cut, n - cut, collect, &c), 0);
                check_three(&c);
                assert_false(grpc_decoder_partial(&d));
                collected_free(&c);
                grpc_decoder_reset(&d);
        }
        struct grpc_decoder d = {.max = 1000};
        struct collected c = {0};
        for (size_t i = 0; i < n; i++) {
                assert_int_equal(grpc_decoder_feed(&d, buf + i, 1, collect, &c), 0);
                if (i + 1 < n && i >= 3 + 5 + 5)
                        assert_true(grpc_decoder_partial(&d));
        }
        check_three(&c);
        collected_free(&c);
        grpc_decoder_reset(&d);
}

/* Pseudo-random chunkings of a larger stream. */
static void test_decode_random_chunks(void **state) {
        enum { N = 20000 };
        uint8_t *buf = malloc(N);
        size_t off = 0, msgs = 0;
        unsigned seed = 1;
        while (off + 5 + 1000 < N) {
                seed = seed * 1103515245 + 12345;
                size_t len = (seed >> 16) % 1000;
                grpc_frame_header(buf + off, len);
                off += 5;
                for (size_t i = 0; i < len; i++)
                        buf[off++] = (uint8_t) (len + i);
                msgs++;
        }
        for (int round = 0; round < 50; round++) {
                struct grpc_decoder d = {.max = 1000};
                size_t got = 0, pos = 0;
                while (pos < off) {
                        seed = seed * 1103515245 + 12345;
                        size_t chunk = MIN((seed >> 16) % 64 + 1, off - pos);
                        struct collected c = {0};
                        assert_int_equal(grpc_decoder_feed(&d, buf + pos, chunk, collect, &c), 0);
                        for (size_t k = 0; k < c.n; k++)
                                for (size_t i = 0; i < c.lens[k]; i++)
                                        assert_int_equal(c.msgs[k][i], (uint8_t) (c.lens[k] + i));
                        got += c.n;
                        collected_free(&c);
                        pos += chunk;
                }
                assert_int_equal(got, msgs);
                assert_false(grpc_decoder_partial(&d));
                grpc_decoder_reset(&d);
        }
        free(buf);
}

static void test_decode_oversize(void **state) {
        uint8_t hdr[5];
        grpc_frame_header(hdr, 101);
        struct grpc_decoder d = {.max = 100};
        struct collected c = {0};
        /* Rejected from the prefix alone, before any body arrives. */
        assert_int_equal(grpc_decoder_feed(&d, hdr, 3, collect, &c), 0);
        assert_int_equal(grpc_decoder_feed(&d, hdr + 3, 2, collect, &c), -EMSGSIZE);
        assert_int_equal(c.n, 0);
        grpc_decoder_reset(&d);
        /* Exactly max is fine. */
        uint8_t buf[105] = {0};
        grpc_frame_header(buf, 100);
        assert_int_equal(grpc_decoder_feed(&d, buf, sizeof(buf), collect, &c), 0);
        assert_int_equal(c.n, 1);
        collected_free(&c);
        grpc_decoder_reset(&d);
        /* A 4 GiB prefix with no limit set still does not overflow size_t math. */
        uint8_t big[5] = {0, 0xff, 0xff, 0xff, 0xff};
        struct grpc_decoder d2 = {.max = 16u << 20};
        assert_int_equal(grpc_decoder_feed(&d2, big, 5, collect, &c), -EMSGSIZE);
        grpc_decoder_reset(&d2);
}

static void test_decode_flags(void **state) {
        struct grpc_decoder d = {.max = 100};
        struct collected c = {0};
        uint8_t comp[6] = {1, 0, 0, 0, 1, 'x'};
        assert_int_equal(grpc_decoder_feed(&d, comp, 6, collect, &c), -EPROTONOSUPPORT);
        grpc_decoder_reset(&d);
        uint8_t bad[6] = {7, 0, 0, 0, 1, 'x'};
        assert_int_equal(grpc_decoder_feed(&d, bad, 6, collect, &c), -EBADMSG);
        grpc_decoder_reset(&d);
        assert_int_equal(c.n, 0);
        /* Callback errors stop decoding and propagate. */
        uint8_t many[17 * 5] = {0};
        assert_int_equal(grpc_decoder_feed(&d, many, sizeof(many), collect, &c), -ENOBUFS);
        assert_int_equal(c.n, 16);
        collected_free(&c);
        grpc_decoder_reset(&d);
}

static void test_frame_header(void **state) {
        uint8_t h[5];
        assert_int_equal(grpc_frame_header(h, 0x01020304), 0);
        assert_memory_equal(h, "\0\1\2\3\4", 5);
        if (sizeof(size_t) > 4)
                assert_int_equal(grpc_frame_header(h, (size_t) UINT32_MAX + 1), -EMSGSIZE);
}

static void test_percent_encode(void **state) {
        char *s = NULL;
        const char in[] = "ok 100% h\xc3\xa9llo\nline\x7f~";
        assert_int_equal(grpc_percent_encode(in, strlen(in), &s), 0);
        assert_string_equal(s, "ok 100%25 h%C3%A9llo%0Aline%7F~");
        free(s);
        assert_int_equal(grpc_percent_encode("", 0, &s), 0);
        assert_string_equal(s, "");
        free(s);
        /* NUL bytes are encoded too. */
        assert_int_equal(grpc_percent_encode("a\0b", 3, &s), 0);
        assert_string_equal(s, "a%00b");
        free(s);
}

static void test_percent_decode(void **state) {
        char *s = NULL;
        size_t n;
        const char in[] = "ok 100%25 h%C3%a9llo%0Aline";
        assert_int_equal(grpc_percent_decode(in, strlen(in), &s, &n), 0);
        assert_string_equal(s, "ok 100% h\xc3\xa9llo\nline");
        assert_int_equal(n, strlen(s));
        free(s);
        /* Lenient: broken escapes stay literal. */
        const char *bad[] = {"%", "%2", "%zz", "100%", "a%G1", "%%41"};
        const char *want[] = {"%", "%2", "%zz", "100%", "a%G1", "%A"};
        for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
                assert_int_equal(grpc_percent_decode(bad[i], strlen(bad[i]), &s, NULL), 0);
                assert_string_equal(s, want[i]);
                free(s);
        }
        /* Round trip of every byte value. */
        char all[256];
        for (int i = 0; i < 256; i++)
                all[i] = (char) i;
        char *enc = NULL;
        assert_int_equal(grpc_percent_encode(all, 256, &enc), 0);
        for (const char *p = enc; *p; p++)
                assert_true(*p >= 0x20 && *p <= 0x7e);
        assert_int_equal(grpc_percent_decode(enc, strlen(enc), &s, &n), 0);
        assert_int_equal(n, 256);
        assert_memory_equal(s, all, 256);
        free(s);
        free(enc);
}

static void check_timeout(const char *s, int want_r, uint64_t want_ms) {
        uint64_t ms = 12345;
        int r = grpc_timeout_parse(s, strlen(s), &ms);
        assert_int_equal(r, want_r);
        if (r == 0)
                assert_int_equal(ms, want_ms);
        else
                assert_int_equal(ms, 12345);
}

static void test_timeout_parse(void **state) {
        check_timeout("1H", 0, 3600000);
        check_timeout("2M", 0, 120000);
        check_timeout("3S", 0, 3000);
        check_timeout("250m", 0, 250);
        check_timeout("1500u", 0, 2);
        check_timeout("1000u", 0, 1);
        check_timeout("1n", 0, 1);
        check_timeout("0m", 0, 0);
        check_timeout("0n", 0, 0);
        check_timeout("99999999S", 0, 99999999000ULL);
        check_timeout("99999999H", 0, 99999999ULL * 3600000ULL);
        /* Bad input. */
        check_timeout("", -EINVAL, 0);
        check_timeout("m", -EINVAL, 0);
        check_timeout("5", -EINVAL, 0);
        check_timeout("123456789S", -EINVAL, 0);
        check_timeout("5s", -EINVAL, 0);
        check_timeout("5h", -EINVAL, 0);
        check_timeout("-5S", -EINVAL, 0);
        check_timeout(" 5S", -EINVAL, 0);
        check_timeout("5 S", -EINVAL, 0);
        check_timeout("5SS", -EINVAL, 0);
        check_timeout("0x5S", -EINVAL, 0);
        uint64_t ms;
        assert_int_equal(grpc_timeout_parse(NULL, 0, &ms), -EINVAL);
        /* Length-bounded: no NUL needed, trailing bytes ignored. */
        assert_int_equal(grpc_timeout_parse("7mXYZ", 2, &ms), 0);
        assert_int_equal(ms, 7);
}

static void test_timeout_format(void **state) {
        char buf[32];
        assert_int_equal(grpc_timeout_format(0, buf, sizeof(buf)), 2);
        assert_string_equal(buf, "0m");
        grpc_timeout_format(1500, buf, sizeof(buf));
        assert_string_equal(buf, "1500m");
        grpc_timeout_format(99999999, buf, sizeof(buf));
        assert_string_equal(buf, "99999999m");
        grpc_timeout_format(100000000, buf, sizeof(buf));
        assert_string_equal(buf, "100000S");
        grpc_timeout_format(100000001, buf, sizeof(buf));
        assert_string_equal(buf, "100001S");
        grpc_timeout_format(UINT64_MAX, buf, sizeof(buf));
        assert_string_equal(buf, "99999999H");
        /* Round trip never shortens the timeout. */
        for (uint64_t ms = 1; ms < (1ULL << 40); ms = ms * 3 + 1) {
                uint64_t back;
                size_t n = grpc_timeout_format(ms, buf, sizeof(buf));
                assert_int_equal(grpc_timeout_parse(buf, n, &back), 0);
                assert_true(back >= ms);
        }
}

static void test_content_type(void **state) {
        assert_true(grpc_content_type_ok("application/grpc", 16));
        assert_true(grpc_content_type_ok("application/grpc+proto", 22));
        assert_true(grpc_content_type_ok("application/GRPC;charset=x", 26));
        assert_false(grpc_content_type_ok("application/grpcx", 17));
        assert_false(grpc_content_type_ok("application/json", 16));
        assert_false(grpc_content_type_ok("application/grp", 15));
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_decode_whole),         cmocka_unit_test(test_decode_splits),
                cmocka_unit_test(test_decode_random_chunks), cmocka_unit_test(test_decode_oversize),
                cmocka_unit_test(test_decode_flags),         cmocka_unit_test(test_frame_header),
                cmocka_unit_test(test_percent_encode),       cmocka_unit_test(test_percent_decode),
                cmocka_unit_test(test_timeout_parse),        cmocka_unit_test(test_timeout_format),
                cmocka_unit_test(test_content_type),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
