/* SPDX-License-Identifier: Apache-2.0 */
/* libFuzzer target: the registry client's configuration and auth inputs
 * (src/image/registry-config.c, registry-auth.c): the same bytes as a
 * registry config (--registry-config), a docker config.json
 * (--docker-config) and a token server's answer. Checks: no crash or leak
 * (half-built configs are freed after errors too); accepted mirrors are
 * http(s) URLs without trailing '/' or "/v2", at most IMG_REG_MAX_MIRRORS;
 * accepted credentials have a host and a base64 secret that lookups find;
 * an accepted token is one printable Authorization header.
 *   build-fuzz/tests/fuzz/fuzz-registry-config -max_total_time=60 tests/fuzz/corpus/registry-config
 */
#include <assert.h>
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "image/registry-internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_hosts(const struct img_reg_config *c) {
        for (const struct img_reg_host *h = c->hosts; h; h = h->next) {
                assert(h->domain);
                assert(h->n_mirrors <= IMG_REG_MAX_MIRRORS);
                assert(h->transport == IMG_REG_TRANSPORT_DEFAULT ||
                       h->transport == IMG_REG_TRANSPORT_HTTPS ||
                       h->transport == IMG_REG_TRANSPORT_HTTP);
                for (size_t i = 0; i < h->n_mirrors; i++) {
                        const char *m = h->mirrors[i];
                        size_t n = strlen(m);
                        assert(!strncmp(m, "http://", 7) || !strncmp(m, "https://", 8));
                        assert(n <= IMG_REG_MIRROR_URL_MAX);
                        assert(!strpbrk(m, " \r\n\t"));
                        char host[IMG_REG_MIRROR_URL_MAX + 1];
                        img_reg_url_host(m, host, sizeof(host));
                        assert(host[0]); /* something to connect to */
                }
                assert(img_reg_config_host(c, h->domain));
        }
}

static void check_creds(const struct img_reg_config *c) {
        for (const struct img_reg_cred *cr = c->creds; cr; cr = cr->next) {
                assert(cr->host && cr->basic && cr->basic[0] && cr->source);
                assert(img_reg_config_cred(c, cr->host));
                char h[IMG_REG_AUTH_MAX];
                if (img_reg_auth_basic_header(cr, h, sizeof(h)) == 0)
                        assert(!strncmp(h, "Authorization: Basic ", 21));
        }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        const char *json = (const char *) data;
        struct wr_err e = {0};

        struct img_reg_config *c = calloc(1, sizeof(*c));
        assert(c);
        int r = img_reg_config_parse_registries(c, json, size, "fuzz.json", &e);
        if (r < 0) {
                assert(r == -EINVAL || r == -ENOMEM);
                assert(e.msg[0]);
        } else {
                check_hosts(c);
        }
        img_reg_config_free(c); /* half-built after an error */

        c = calloc(1, sizeof(*c));
        assert(c);
        memset(&e, 0, sizeof(e));
        r = img_reg_config_parse_docker(c, json, size, "fuzz.json", &e);
        if (r < 0) {
                assert(r == -EINVAL || r == -ENOMEM);
                assert(e.msg[0]);
        } else {
                check_creds(c);
        }
        img_reg_config_free(c);

        char header[IMG_REG_AUTH_MAX];
        if (img_reg_auth_token_parse(json, size, header, sizeof(header)) == 0) {
                assert(!strncmp(header, "Authorization: Bearer ", 22));
                assert(strlen(header) > 22 && strlen(header) < sizeof(header));
                for (const char *p = header + 22; *p; p++)
                        assert(*p > 0x20 && *p < 0x7f);
        }
        return 0;
}
