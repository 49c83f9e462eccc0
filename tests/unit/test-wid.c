/* SPDX-License-Identifier: Apache-2.0 */
/* Identity tokens: minted by wid_mint, checked by wid_verify (signature,
 * alg, kid, iss, aud, exp/nbf/iat, lifetime), and the JWS parser
 * (src/api/wid.c, src/api/jwt.c). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "api/jwt.h"
#include "api/wid.h"
#include "basic/rmrf.h"

#define ISS "https://warren.example:8443"
#define NOW 1800000000

struct fx {
        char dir[64], dir2[64];
        struct wid_keys *k, *other;
};

static int setup(void **state) {
        struct fx *f = calloc(1, sizeof(*f));
        snprintf(f->dir, sizeof(f->dir), "/tmp/test-wid-XXXXXX");
        snprintf(f->dir2, sizeof(f->dir2), "/tmp/test-wid-XXXXXX");
        if (!mkdtemp(f->dir) || !mkdtemp(f->dir2))
                return -1;
        struct wr_err e = {0};
        if (wid_keys_load(f->dir, NOW, &f->k, &e) < 0 ||
            wid_keys_load(f->dir2, NOW, &f->other, &e) < 0)
                return -1;
        *state = f;
        return 0;
}

static int teardown(void **state) {
        struct fx *f = *state;
        wid_keys_free(f->k);
        wid_keys_free(f->other);
        rm_rf_at(AT_FDCWD, f->dir);
        rm_rf_at(AT_FDCWD, f->dir2);
        free(f);
        return 0;
}

static char *mint(struct wid_keys *k, const char *iss, const char *aud, int64_t now, int64_t life) {
        char *tok = NULL;
        struct wr_err e = {0};
        assert_int_equal(wid_mint(k, iss, "sandbox:default:sb-0011223344556677", aud, "default",
                                  now, life, &tok, &e),
                         0);
        return tok;
}

static int verify(struct wid_keys *k, const char *tok, int64_t now, struct jwt *j) {
        struct wr_err e = {0};
        return wid_verify(k, tok, strlen(tok), ISS, WID_API_AUDIENCE, now, j, &e);
}

static void test_good(void **state) {
        struct fx *f = *state;
        char *tok = mint(f->k, ISS, WID_API_AUDIENCE, NOW, 600);
        struct jwt j;
        assert_int_equal(verify(f->k, tok, NOW + 1, &j), 0);
        assert_string_equal(j.sub, "sandbox:default:sb-0011223344556677");
        assert_string_equal(j.environment_id, "default");
        assert_string_equal(j.iss, ISS);
        assert_int_equal(j.exp, NOW + 600);
        assert_string_equal(j.kid, wid_keys_kid(f->k));
        free(tok);
}

static void test_expiry(void **state) {
        struct fx *f = *state;
        char *tok = mint(f->k, ISS, WID_API_AUDIENCE, NOW, 600);
        struct jwt j;
        assert_int_equal(verify(f->k, tok, NOW + 600, &j), -EKEYEXPIRED);
        assert_int_equal(verify(f->k, tok, NOW + 599, &j), 0);
        /* issued in the future, beyond the skew */
        assert_int_equal(verify(f->k, tok, NOW - WID_SKEW_SEC - 1, &j), -EKEYEXPIRED);
        free(tok);
        /* a lifetime beyond an hour is clamped at mint */
        tok = mint(f->k, ISS, WID_API_AUDIENCE, NOW, 99999);
        assert_int_equal(verify(f->k, tok, NOW, &j), 0);
        assert_int_equal(j.exp - j.iat, WID_MAX_LIFETIME_SEC);
        free(tok);
}

static void test_wrong_iss_aud_key(void **state) {
        struct fx *f = *state;
        struct jwt j;
        char *tok = mint(f->k, "https://other.example", WID_API_AUDIENCE, NOW, 600);
        assert_int_equal(verify(f->k, tok, NOW, &j), -EACCES);
        free(tok);
        tok = mint(f->k, ISS, "snowflakecomputing.com", NOW, 600);
        assert_int_equal(verify(f->k, tok, NOW, &j), -EACCES);
        free(tok);
        tok = mint(f->other, ISS, WID_API_AUDIENCE, NOW, 600);
        assert_int_equal(verify(f->k, tok, NOW, &j), -EKEYREJECTED);
        free(tok);
}

/* payload replaced by one that claims another sandbox: the signature no
 * longer matches */
static void test_tampered(void **state) {
        struct fx *f = *state;
        char *tok = mint(f->k, ISS, WID_API_AUDIENCE, NOW, 600);
        char *evil = mint(f->k, ISS, WID_API_AUDIENCE, NOW, 3600);
        char *d1 = strchr(tok, '.'), *d2 = strrchr(tok, '.');
        char *e1 = strchr(evil, '.'), *e2 = strrchr(evil, '.');
        char buf[4096];
        snprintf(buf, sizeof(buf), "%.*s%.*s%s", (int) (d1 - tok), tok, (int) (e2 - e1), e1, d2);
        struct jwt j;
        assert_int_equal(verify(f->k, buf, NOW, &j), -EKEYREJECTED);
        /* one flipped signature character */
        snprintf(buf, sizeof(buf), "%s", tok);
        char *last = buf + strlen(buf) - 2;
        *last = *last == 'A' ? 'B' : 'A';
        assert_int_equal(verify(f->k, buf, NOW, &j), -EKEYREJECTED);
        free(tok);
        free(evil);
}

/* {"alg":"none"} and HS256 are refused whatever the rest says */
static void test_alg(void **state) {
        struct fx *f = *state;
        struct jwt j;
        /* {"alg":"none","kid":"x"} . {"iss":ISS} . "AAAA" */
        const char *none = "eyJhbGciOiJub25lIiwia2lkIjoieCJ9.eyJpc3MiOiJ4In0.AAAA";
        assert_int_equal(jwt_parse(none, strlen(none), &j), 0);
        assert_string_equal(j.alg, "none");
        assert_int_equal(verify(f->k, none, NOW, &j), -EKEYREJECTED);
}

static void test_parse_malformed(void **state) {
        (void) state;
        struct jwt j;
        static const char *bad[] = {
                "",
                "a.b",
                "a.b.c.d",
                ".b.c",
                "a..c",
                "a.b.",
                "a b.c.d",
                "e30.e30.AAAA",                              /* {} has no alg */
                "W10.e30.AAAA",                              /* [] is not an object */
                "eyJhbGciOjF9.e30.AAAA",                     /* alg is a number */
                "eyJhbGciOiJFUzI1NiJ9.eyJleHAiOiJ4In0.AAAA", /* exp a string */
                "eyJhbGciOiJFUzI1NiJ9.e30.A",                /* 1-char group */
        };
        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
                assert_int_equal(jwt_parse(bad[i], strlen(bad[i]), &j), -EBADMSG);
        char big[JWT_MAX_LEN + 10];
        memset(big, 'A', sizeof(big));
        big[10] = '.';
        big[20] = '.';
        assert_int_equal(jwt_parse(big, sizeof(big), &j), -E2BIG);
        assert_true(jwt_looks_like("a.b.c", 5));
        assert_false(jwt_looks_like("wt_00_11", 8));
}

static void test_b64url(void **state) {
        (void) state;
        unsigned char out[8];
        assert_int_equal(jwt_b64url_decode("aGk", 3, out, sizeof(out)), 2);
        assert_memory_equal(out, "hi", 2);
        assert_int_equal(jwt_b64url_decode("aGk=", 4, out, sizeof(out)), 2);
        assert_int_equal(jwt_b64url_decode("a+k", 3, out, sizeof(out)), -EBADMSG);
        assert_int_equal(jwt_b64url_decode("AAAAAAAAAAAAAAAA", 16, out, sizeof(out)), -ENOBUFS);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_good),
                cmocka_unit_test(test_expiry),
                cmocka_unit_test(test_wrong_iss_aud_key),
                cmocka_unit_test(test_tampered),
                cmocka_unit_test(test_alg),
                cmocka_unit_test(test_parse_malformed),
                cmocka_unit_test(test_b64url),
        };
        return cmocka_run_group_tests(tests, setup, teardown);
}
