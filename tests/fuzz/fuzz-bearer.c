/* SPDX-License-Identifier: Apache-2.0 */
/* libFuzzer target: the authorization header parser (src/api/bearer.c),
 * which sees every caller's untrusted metadata before anything else. A
 * parse that succeeds yields a token of the exact shape, inside the input,
 * whose id matches its digits, and formatting a token's parts back gives
 * the same token. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "api/bearer.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int unhex(char c) {
        return c <= '9' ? c - '0' : c - 'a' + 10;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        /* the header value as the server holds it: a NUL-terminated copy */
        char *v = malloc(size + 1);
        if (!v)
                return 0;
        memcpy(v, data, size);
        v[size] = 0;
        struct bearer b;
        int r = bearer_parse(v, size, &b);
        if (r == 0) {
                if (b.token_len != BEARER_TOKEN_LEN || b.token < v ||
                    b.token + b.token_len > v + size || memcmp(b.token, "wt_", 3) != 0 ||
                    strlen(b.id) != BEARER_ID_LEN || memcmp(b.id + 3, b.token + 3, 16) != 0)
                        abort();
                unsigned char id[8], secret[32];
                for (int i = 0; i < 8; i++)
                        id[i] = (unsigned char) (unhex(b.token[3 + 2 * i]) << 4 |
                                                 unhex(b.token[4 + 2 * i]));
                for (int i = 0; i < 32; i++)
                        secret[i] = (unsigned char) (unhex(b.token[20 + 2 * i]) << 4 |
                                                     unhex(b.token[21 + 2 * i]));
                char tok[BEARER_TOKEN_LEN + 1], tid[BEARER_ID_LEN + 1];
                bearer_format(id, secret, tok, tid);
                if (memcmp(tok, b.token, BEARER_TOKEN_LEN) != 0 || strcmp(tid, b.id) != 0)
                        abort();
        } else if (r != -22 /* EINVAL */ && r != -74 /* EBADMSG */) {
                abort();
        }
        /* the credential of any shape: inside the value, non-empty, no
         * space or tab at its ends; present whenever bearer_parse got past
         * the scheme */
        const char *cred;
        size_t n;
        int rc = bearer_credential(v, size, &cred, &n);
        if (rc == 0) {
                if (n == 0 || cred < v || cred + n > v + size || cred[0] == ' ' ||
                    cred[0] == '\t' || cred[n - 1] == ' ' || cred[n - 1] == '\t')
                        abort();
                if (r == 0 && (cred != b.token || n != b.token_len))
                        abort();
        } else if (rc != -22 || r == 0 || r == -74) {
                abort();
        }
        free(v);
        return 0;
}
