/* SPDX-License-Identifier: Apache-2.0 */
/* libFuzzer target for the variable part of warren-priv's sandbox configs
 * (priv_cfg_decode: what warren-priv, which keeps root, reads from the
 * sealed memfd of a SANDBOX_CREATE / PRESTART / START). The first 4 bytes
 * give the fixed part's counts and flags (layers 0..7, mounts 0..7, binds
 * 0..mounts, PRIV_CFG_RESOLV), the rest is the blob. Whatever is accepted
 * has every layer confined below layers/ (re-checked), every target
 * absolute, every FILE/COPY inside the blob and within the runtime's
 * bounds, the header's BIND count, and re-encodes (priv_cfg_encode, as
 * warrend builds it) to the same bytes; every refusal carries a message. */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "priv/priv-cfg.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static struct priv_cfg_view v;
static char paths[PRIV_LAYERS_MAX][PRIV_PATH_MAX + 8];
static const char *layers[PRIV_LAYERS_MAX];
static struct rt_mount mounts[PRIV_BIND_MAX];

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        if (size < 4)
                return 0;
        struct priv_sandbox_cfg c;
        memset(&c, 0, sizeof(c));
        memcpy(c.id, "sb-f", 5);
        c.n_layers = data[0] % 8;
        c.n_mounts = data[1] % 8;
        c.n_bind = data[2] % (c.n_mounts + 1);
        c.flags = data[3] & 1 ? PRIV_CFG_RESOLV : 0;
        data += 4;
        size -= 4;
        c.blob_len = (uint32_t) size;
        uint8_t *blob = malloc(size ? size : 1);
        if (!blob)
                return 0;
        memcpy(blob, data, size);
        struct wr_err e = {0};
        int r = priv_cfg_decode(&c, blob, size, &v, &e);
        if (r < 0) {
                if (!e.msg[0])
                        abort();
                free(blob);
                return 0;
        }
        const uint8_t *end = blob + size;
        size_t binds = 0, total = 0;
        for (size_t i = 0; i < v.n_layers; i++) {
                struct wr_err pe = {0};
                if (priv_path_check(v.layers[i], PRIV_ROOT_LAYERS, &pe) < 0 ||
                    strncmp(v.layers[i], "layers/", 7) != 0 || strstr(v.layers[i], "/../") ||
                    strstr(v.layers[i], "//"))
                        abort();
                snprintf(paths[i], sizeof(paths[i]), "/s/%s", v.layers[i]);
                layers[i] = paths[i];
        }
        for (size_t i = 0; i < v.n_mounts; i++) {
                const struct priv_cfg_mount *m = &v.mounts[i];
                if (m->target[0] != '/' || m->kind < RT_MOUNT_BIND || m->kind > RT_MOUNT_COPY)
                        abort();
                if (m->len &&
                    ((const uint8_t *) m->data < blob || (const uint8_t *) m->data + m->len > end))
                        abort();
                total += m->len;
                binds += m->kind == RT_MOUNT_BIND;
                mounts[i] = (struct rt_mount){.kind = (enum rt_mount_kind) m->kind,
                                              .target = m->target,
                                              .flags = m->flags,
                                              .source_fd = -1,
                                              .data = m->data,
                                              .len = m->len,
                                              .size = m->size,
                                              .mode = (mode_t) m->mode};
        }
        if (binds != c.n_bind || total > RT_MOUNTS_DATA_MAX)
                abort();
        /* warrend's encoding of what was accepted: the same bytes */
        struct rt_sandbox_config cfg = {
                .id = "sb-f",
                .dir = "/s/sandboxes/sb-f",
                .layers = layers,
                .n_layers = v.n_layers,
                .hostname = v.hostname,
                .resolv_conf = v.resolv_conf,
                .mounts = mounts,
                .n_mounts = v.n_mounts,
        };
        struct priv_sandbox_cfg c2;
        uint8_t *blob2 = NULL;
        size_t len2 = 0;
        if (priv_cfg_encode(&cfg, "/s", &c2, &blob2, &len2, &e) < 0)
                abort();
        if (len2 != size || memcmp(blob2, blob, size) != 0 || c2.n_bind != c.n_bind ||
            c2.flags != c.flags)
                abort();
        free(blob2);
        free(blob);
        return 0;
}
