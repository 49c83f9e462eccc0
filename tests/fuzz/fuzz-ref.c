/* SPDX-License-Identifier: Apache-2.0 */
/* libFuzzer target: image references (src/image/ref.c) and the registry's
 * WWW-Authenticate parser (src/image/registry.c), both fed untrusted text
 * (user input, registry headers). Checks: no crash; an accepted reference
 * formats to a string that parses again to the same parts (normalisation
 * is idempotent) and fits the documented buffers.
 *   build-fuzz/tests/fuzz/fuzz-ref -max_total_time=60 tests/fuzz/corpus/ref */
#include <assert.h>
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "image/ref.h"
#include "image/registry.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        if (size > 4096)
                return 0;
        char *s = malloc(size + 1);
        if (!s)
                return 0;
        memcpy(s, data, size);
        s[size] = '\0';

        struct img_ref r, r2;
        struct wr_err e = {0};
        if (img_ref_parse(s, &r, &e) == 0) {
                char full[600], local[600];
                size_t n = img_ref_format(&r, full, sizeof(full));
                assert(n < sizeof(full));
                assert(img_ref_parse(full, &r2, NULL) == 0);
                assert(strcmp(r.domain, r2.domain) == 0);
                assert(strcmp(r.path, r2.path) == 0);
                assert(strcmp(r.tag, r2.tag) == 0);
                assert(strcmp(r.digest, r2.digest) == 0);
                assert(r.tag[0] || r.digest[0]);
                if (img_ref_local_name(&r, local, sizeof(local)) == 0) {
                        /* the local name is itself a reference for the same repo */
                        assert(img_ref_parse(local, &r2, NULL) == 0);
                        assert(strcmp(r.path, r2.path) == 0);
                        assert(strcmp(r.tag, r2.tag) == 0);
                }
                (void) img_ref_domain_is_loopback(r.domain);
        } else {
                assert(e.code == -EINVAL && e.msg[0]);
        }

        struct img_reg_challenge c;
        if (img_reg_challenge_parse(s, &c) == 0) {
                assert(!strcmp(c.scheme, "bearer") || !strcmp(c.scheme, "basic"));
                assert(strlen(c.realm) < sizeof(c.realm));
        }
        free(s);
        return 0;
}
