/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* The variable part of a SANDBOX_CREATE / PRESTART / START config
 * (priv-proto.h): the bytes of the sealed memfd that travels with the
 * fixed struct priv_sandbox_cfg. Layout (integers in host order, no
 * alignment, nothing after the last record):
 *
 *   hostname "\0"          ("" = the id; at most 64 bytes)
 *   resolv.conf "\0"       ("" unless PRIV_CFG_RESOLV; at most 64 KiB)
 *   n_layers x  path "\0"  (each "layers/..." as priv_path_check says)
 *   n_mounts x  struct priv_mount_rec, target "\0", len bytes of data
 *
 * A BIND record names no source: its source is the next of the fds that
 * came with the config (in the table's order; n_bind of them). FILE/COPY
 * data is bounded as the runtime bounds it (RT_MOUNT_DATA_MAX per entry,
 * RT_MOUNTS_DATA_MAX in all). The runtime checks the rest of each entry
 * again (rt_mounts_check) before anything is made. */

#include <stddef.h>
#include <stdint.h>

#include "basic/err.h"
#include "priv/priv-proto.h"
#include "runtime/runtime.h"

struct priv_mount_rec {
        uint32_t kind;  /* enum rt_mount_kind */
        uint32_t flags; /* RT_MOUNT_* */
        uint32_t mode;  /* <= 07777 */
        uint32_t reserved;
        uint64_t size; /* TMPFS */
        uint64_t len;  /* FILE, COPY: bytes of data after the target */
};

struct priv_cfg_mount {
        uint32_t kind, flags, mode;
        uint64_t size;
        const char *target;
        const void *data;
        size_t len;
};

/* A decoded blob: strings and data point into it. */
struct priv_cfg_view {
        const char *hostname;    /* NULL: the id */
        const char *resolv_conf; /* NULL: none */
        const char *layers[PRIV_LAYERS_MAX];
        size_t n_layers;
        struct priv_cfg_mount mounts[PRIV_BIND_MAX];
        size_t n_mounts, n_bind;
};

/* Pure: decode blob[0..len) for the (already checked) fixed part c into
 * *out. 0, or -EINVAL / -EACCES (a layer path not confined) with e. */
int priv_cfg_decode(const struct priv_sandbox_cfg *c, const void *blob, size_t len,
                    struct priv_cfg_view *out, struct wr_err *e);

/* Encode cfg (warrend's side) for warren-priv: the fixed part into *out
 * (type-independent; cfg->id, limits, uid range, net, cgroup_mode,
 * unlimited; disk_template_dir must be NULL or <state_dir>/disk-templates,
 * cfg->dir <state_dir>/sandboxes/<id>, init_path and log_fd are not sent)
 * and the blob into a new buffer *ret_blob (malloc'd) of *ret_len bytes.
 * Layers must be below <state_dir>/layers/. BIND sources are not opened
 * here (priv_cfg_bind_open). 0 or -EINVAL / -E2BIG / -ENOMEM with e. */
int priv_cfg_encode(const struct rt_sandbox_config *cfg, const char *state_dir,
                    struct priv_sandbox_cfg *out, uint8_t **ret_blob, size_t *ret_len,
                    struct wr_err *e);

/* The fds of cfg's BIND entries in order (O_PATH, the last component not
 * followed; a source_fd is duplicated) into fds (PRIV_BIND_MAX); their
 * count in *ret_n. On failure none is left open. */
int priv_cfg_bind_open(const struct rt_sandbox_config *cfg, int *fds, size_t *ret_n,
                       struct wr_err *e);
