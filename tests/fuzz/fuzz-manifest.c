/* SPDX-License-Identifier: Apache-2.0 */
/* libFuzzer target: image manifests and image indexes / manifest lists
 * (img_manifest_parse, img_manifest_select in src/image/manifest.c), the
 * JSON a registry sends for a reference. The first byte picks the
 * Content-Type the response claims (none, an index, a manifest, schema 1).
 * Checks: no crash or leak; an accepted image manifest has 1..512 layers
 * with valid digests and a valid config digest; an accepted index lists
 * only entries with os and architecture and valid-or-empty digests, and
 * selecting a platform returns a matching entry or explains what exists.
 *   build-fuzz/tests/fuzz/fuzz-manifest -max_total_time=60 tests/fuzz/corpus/manifest */
#include <assert.h>
#include <errno.h>
#include <stdint.h>
#include <string.h>

#include "image/manifest.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char *const content_types[] = {
        NULL,
        IMG_MT_OCI_INDEX,
        IMG_MT_DOCKER_LIST,
        IMG_MT_OCI_MANIFEST,
        IMG_MT_DOCKER_MANIFEST,
        "application/vnd.docker.distribution.manifest.v1+prettyjws",
        "text/html; charset=utf-8",
        "",
};

static void check_select(const struct img_manifest *m, const char *os, const char *arch) {
        char seen[300];
        const struct img_manifest_platform *p =
                img_manifest_select(m, os, arch, seen, sizeof(seen));
        assert(strlen(seen) < sizeof(seen));
        if (p) {
                assert(!strcmp(p->os, os) && !strcmp(p->arch, arch));
                assert(img_digest_valid(p->digest));
        }
        /* a tiny buffer must not overflow */
        char tiny[4];
        (void) img_manifest_select(m, os, arch, tiny, sizeof(tiny));
        assert(strlen(tiny) < sizeof(tiny));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        if (size < 1)
                return 0;
        const char *ct = content_types[data[0] % (sizeof(content_types) / sizeof(*content_types))];
        const char *body = (const char *) data + 1;
        size_t len = size - 1;

        struct img_manifest *m = NULL;
        struct wr_err e = {0};
        int r = img_manifest_parse(body, len, ct, &m, &e);
        if (r < 0) {
                assert(!m);
                assert(e.code == r && e.msg[0]);
                assert(r == -EINVAL || r == -EPROTONOSUPPORT || r == -ENOMEM);
                return 0;
        }
        assert(m);
        if (m->kind == IMG_MANIFEST_IMAGE) {
                assert(img_digest_valid(m->config_digest));
                assert(m->n_layers >= 1 && m->n_layers <= IMG_MANIFEST_MAX_LAYERS);
                for (size_t i = 0; i < m->n_layers; i++)
                        assert(img_digest_valid(m->layers[i].digest));
                assert(m->n_platforms == 0);
        } else {
                assert(m->kind == IMG_MANIFEST_INDEX);
                assert(m->n_layers == 0);
                assert(m->n_platforms <= IMG_INDEX_MAX_ENTRIES);
                for (size_t i = 0; i < m->n_platforms; i++) {
                        assert(m->platforms[i].os && m->platforms[i].arch);
                        assert(!m->platforms[i].digest[0] ||
                               img_digest_valid(m->platforms[i].digest));
                }
                check_select(m, "linux", "amd64");
                check_select(m, "linux", "arm64");
        }
        img_manifest_free(m);
        return 0;
}
