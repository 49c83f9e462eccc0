/* SPDX-License-Identifier: Apache-2.0 */
/* libFuzzer target: the JWS parser and the identity token check
 * (src/api/jwt.c, wid_verify in src/api/wid.c), which see every bearer
 * credential that is not an API token. Invariants: a parse that succeeds
 * leaves NUL-terminated claims, a signed part that is a proper prefix of
 * the input ending before its last dot, and a signature of at most 64
 * bytes; nothing the fuzzer writes verifies against a key made at start
 * (it cannot forge ES256), while a token minted with that key does. */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/jwt.h"
#include "api/wid.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define ISS "https://fuzz.example"

static struct wid_keys *keys;

static void init(void) {
        char dir[] = "/tmp/fuzz-jwt-XXXXXX";
        struct wr_err e = {0};
        if (!mkdtemp(dir) || wid_keys_load(dir, 1800000000, &keys, &e) < 0)
                abort();
        char *tok = NULL;
        struct jwt j;
        if (wid_mint(keys, ISS, "sandbox:default:sb-0011223344556677", WID_API_AUDIENCE, "default",
                     1800000000, 600, &tok, &e) < 0 ||
            wid_verify(keys, tok, strlen(tok), ISS, WID_API_AUDIENCE, 1800000001, &j, &e) != 0)
                abort();
        free(tok);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        if (!keys)
                init();
        const char *s = (const char *) data;
        struct jwt j;
        int r = jwt_parse(s, size, &j);
        if (r == 0) {
                const char *last = memrchr(s, '.', size);
                if (!last || j.signed_len != (size_t) (last - s) || j.sig_len == 0 ||
                    j.sig_len > sizeof(j.sig) || !*j.alg ||
                    strnlen(j.alg, sizeof(j.alg)) == sizeof(j.alg) ||
                    strnlen(j.kid, sizeof(j.kid)) == sizeof(j.kid) ||
                    strnlen(j.iss, sizeof(j.iss)) == sizeof(j.iss) ||
                    strnlen(j.sub, sizeof(j.sub)) == sizeof(j.sub) ||
                    strnlen(j.aud, sizeof(j.aud)) == sizeof(j.aud) ||
                    strnlen(j.environment_id, sizeof(j.environment_id)) == sizeof(j.environment_id))
                        abort();
                if (!jwt_looks_like(s, size))
                        abort();
        } else if (r != -EBADMSG && r != -E2BIG) {
                abort();
        }
        struct wr_err e = {0};
        if (wid_verify(keys, s, size, ISS, WID_API_AUDIENCE, 1800000001, &j, &e) == 0)
                abort(); /* a forgery */
        return 0;
}
