/* SPDX-License-Identifier: Apache-2.0 */
/* The authorization header parser and token format (src/api/bearer.c). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "api/bearer.h"

#define TOK "wt_0123456789abcdef_00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff"

static int parse(const char *v, struct bearer *b) {
        return bearer_parse(v, strlen(v), b);
}

static void test_accepts(void **state) {
        struct bearer b;
        assert_int_equal(parse("Bearer " TOK, &b), 0);
        assert_string_equal(b.id, "tk-0123456789abcdef");
        assert_int_equal(b.token_len, BEARER_TOKEN_LEN);
        assert_memory_equal(b.token, TOK, BEARER_TOKEN_LEN);
        assert_int_equal(parse("bearer \t " TOK " \t", &b), 0);
        assert_int_equal(parse("BEARER " TOK, &b), 0);
}

static void test_refuses(void **state) {
        struct bearer b;
        static const char *const not_bearer[] = {
                "",           "Bearer",       "Bearer ",          "Bearer   ",  "Basic eDp5",
                "Bearer" TOK, "Bearer\n" TOK, "Bearer " TOK "\r", "Token " TOK,
        };
        for (size_t i = 0; i < sizeof(not_bearer) / sizeof(*not_bearer); i++)
                assert_int_equal(parse(not_bearer[i], &b), -EINVAL);
        static const char *const bad_token[] = {
                "Bearer x",
                "Bearer " TOK "0",
                "Bearer wt_0123456789ABCDEF_00112233445566778899aabbccddeeff00112233445566778899aa"
                "bbccddeeff",
                "Bearer wX_0123456789abcdef_00112233445566778899aabbccddeeff00112233445566778899aa"
                "bbccddeeff",
                "Bearer " TOK " extra",
        };
        for (size_t i = 0; i < sizeof(bad_token) / sizeof(*bad_token); i++)
                assert_int_equal(parse(bad_token[i], &b), -EBADMSG);
        /* a NUL inside the value is refused, not truncated */
        char v[200];
        snprintf(v, sizeof(v), "Bearer %s", TOK);
        v[10] = 0;
        assert_int_equal(bearer_parse(v, strlen(TOK) + 7, &b), -EINVAL);
}

static void test_format_roundtrip(void **state) {
        unsigned char id[8] = {1, 2, 3, 4, 5, 6, 7, 0xff}, secret[32];
        for (int i = 0; i < 32; i++)
                secret[i] = (unsigned char) (i * 7);
        char tok[BEARER_TOKEN_LEN + 1], tid[BEARER_ID_LEN + 1], hdr[128];
        bearer_format(id, secret, tok, tid);
        assert_string_equal(tid, "tk-01020304050607ff");
        assert_int_equal(strlen(tok), BEARER_TOKEN_LEN);
        snprintf(hdr, sizeof(hdr), "Bearer %s", tok);
        struct bearer b;
        assert_int_equal(parse(hdr, &b), 0);
        assert_string_equal(b.id, tid);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_accepts),
                cmocka_unit_test(test_refuses),
                cmocka_unit_test(test_format_roundtrip),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
