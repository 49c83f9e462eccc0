/* SPDX-License-Identifier: Apache-2.0 */
/* libFuzzer target: image config blobs (img_config_parse in
 * src/image/manifest.c), the JSON an image brings along: rootfs.diff_ids
 * and the runtime config (Env, Entrypoint, Cmd, WorkingDir, User). The
 * first byte is the layer count the manifest announced (0 = any). Checks:
 * no crash or leak; an accepted config has the announced number of valid
 * diff ids, NULL-terminated string vectors of the stated lengths, and no
 * empty WorkingDir/User.
 *   build-fuzz/tests/fuzz/fuzz-image-config -max_total_time=60 tests/fuzz/corpus/image-config */
#include <assert.h>
#include <errno.h>
#include <stdint.h>
#include <string.h>

#include "image/manifest.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_strv(char *const *v, size_t n) {
        assert(!n || v);
        for (size_t i = 0; i < n; i++)
                assert(v[i]);
        if (v)
                assert(!v[n]);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        if (size < 1)
                return 0;
        size_t expect = data[0] % 8;
        struct img_image_config *c = NULL;
        struct wr_err e = {0};
        int r = img_config_parse((const char *) data + 1, size - 1, expect, &c, &e);
        if (r < 0) {
                assert(!c);
                assert(e.code == r && e.msg[0]);
                assert(r == -EINVAL || r == -ENOMEM);
                return 0;
        }
        assert(c);
        assert(!expect || c->n_diff_ids == expect);
        assert(c->n_diff_ids <= IMG_MANIFEST_MAX_LAYERS);
        for (size_t i = 0; i < c->n_diff_ids; i++)
                assert(img_digest_valid(c->diff_ids[i]));
        assert(!c->diff_ids[c->n_diff_ids]);
        check_strv(c->config.env, c->config.n_env);
        check_strv(c->config.entrypoint, c->config.n_entrypoint);
        check_strv(c->config.cmd, c->config.n_cmd);
        assert(!c->config.working_dir || c->config.working_dir[0]);
        assert(!c->config.user || c->config.user[0]);
        img_image_config_free(c);
        return 0;
}
