/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* Pure parsers for what a registry sends about an image (internal to
 * src/image; no I/O, fuzzed by tests/fuzz/fuzz-manifest.c and
 * fuzz-image-config.c):
 *
 *   img_manifest_parse   an image manifest (OCI or Docker v2 schema 2) or an
 *                        image index / Docker manifest list
 *   img_manifest_select  the entry of an index for one os/architecture
 *   img_config_parse     an image config blob: rootfs.diff_ids and the
 *                        runtime part (Env, Entrypoint, Cmd, WorkingDir, User)
 *
 * Each returns a plain heap struct the caller owns (free functions accept
 * NULL and half-built objects). Every input is treated as hostile: sizes,
 * counts and string lengths are bounded, digests validated; errors are
 * -EINVAL (INVALID_ARGUMENT, the workload's fault: the image is bad) unless
 * noted, with a message naming what is wrong. Threads: any. */

#include <stddef.h>
#include <stdint.h>

#include "basic/err.h"
#include "image/image-internal.h"
#include "image/image.h"

/* Media types a manifest request accepts. */
#define IMG_MT_OCI_INDEX "application/vnd.oci.image.index.v1+json"
#define IMG_MT_DOCKER_LIST "application/vnd.docker.distribution.manifest.list.v2+json"
#define IMG_MT_OCI_MANIFEST "application/vnd.oci.image.manifest.v1+json"
#define IMG_MT_DOCKER_MANIFEST "application/vnd.docker.distribution.manifest.v2+json"
#define IMG_ACCEPT_MANIFESTS                                                                       \
        IMG_MT_OCI_INDEX ", " IMG_MT_DOCKER_LIST ", " IMG_MT_OCI_MANIFEST                          \
                         ", " IMG_MT_DOCKER_MANIFEST

#define IMG_MANIFEST_MAX_BODY (4u << 20) /* bytes of manifest or index JSON */
#define IMG_MANIFEST_MAX_LAYERS 512      /* layers of one image */
#define IMG_INDEX_MAX_ENTRIES 4096       /* platform entries of one index */
#define IMG_CONFIG_MAX_BODY (8u << 20)   /* bytes of image config JSON */

enum img_manifest_kind {
        IMG_MANIFEST_IMAGE = 1, /* one image: config + layers */
        IMG_MANIFEST_INDEX,     /* an index / manifest list: per-platform entries */
};

/* One layer of an image manifest. */
struct img_manifest_layer {
        char digest[IMG_DIGEST_MAX]; /* valid "sha256:<hex>" */
        uint64_t size;               /* 0 when absent or not a positive integer */
};

/* One entry of an index that names a platform (entries without os or
 * architecture are left out). */
struct img_manifest_platform {
        char *os;                    /* as sent (any length) */
        char *arch;                  /* as sent */
        char digest[IMG_DIGEST_MAX]; /* "" when missing or not a valid sha256 digest */
};

struct img_manifest {
        enum img_manifest_kind kind;
        /* IMG_MANIFEST_IMAGE */
        char config_digest[IMG_DIGEST_MAX];
        uint64_t config_size; /* 0 when absent or not a positive integer */
        struct img_manifest_layer *layers;
        size_t n_layers; /* 1..IMG_MANIFEST_MAX_LAYERS */
        /* IMG_MANIFEST_INDEX */
        struct img_manifest_platform *platforms;
        size_t n_platforms;
};

/* Parse a manifest body of len bytes (need not be NUL-terminated; at most
 * IMG_MANIFEST_MAX_BODY). content_type (may be NULL) is the response's
 * Content-Type, used when the body has no "mediaType". An index is
 * recognised by its media type, or by a "manifests" array and no "config".
 * Errors: -EINVAL not a JSON object, oversized, no valid sha256 config
 * digest, 0 or more than IMG_MANIFEST_MAX_LAYERS layers, more than
 * IMG_INDEX_MAX_ENTRIES index entries, a layer with a bad digest, an
 * unknown layer media type or foreign "urls"; -EPROTONOSUPPORT
 * (FAILED_PRECONDITION, the client's fault) for Docker schema 1; -ENOMEM.
 * *ret owned by the caller: img_manifest_free. */
int img_manifest_parse(const char *body, size_t len, const char *content_type,
                       struct img_manifest **ret, struct wr_err *e);

/* Free a manifest (NULL and half-built are fine). */
void img_manifest_free(struct img_manifest *m);
DEFINE_TRIVIAL_CLEANUP_FUNC(struct img_manifest *, img_manifest_free);

/* The entry of index m for os/arch with a valid digest (the first one), or
 * NULL; when NULL and seen != NULL, seen gets the platforms the index does
 * list ("linux/arm64, windows/amd64", as many as fit; "" when none). */
const struct img_manifest_platform *img_manifest_select(const struct img_manifest *m,
                                                        const char *os, const char *arch,
                                                        char *seen, size_t seensz);

/* A parsed image config. */
struct img_image_config {
        char **diff_ids; /* valid "sha256:<hex>", bottom layer first; NULL-terminated */
        size_t n_diff_ids;
        struct img_config config; /* the runtime part */
};

/* Parse an image config blob of len bytes (at most IMG_CONFIG_MAX_BODY).
 * expect_layers > 0: rootfs.diff_ids must list exactly that many (the
 * manifest's layer count), checked before the entries themselves. Env,
 * Entrypoint and Cmd must be string arrays (null = absent); empty
 * WorkingDir / User count as unset. Errors: -EINVAL (naming the field),
 * -ENOMEM. *ret owned by the caller: img_image_config_free. */
int img_config_parse(const char *body, size_t len, size_t expect_layers,
                     struct img_image_config **ret, struct wr_err *e);

/* Free a parsed image config (NULL and half-built are fine). */
void img_image_config_free(struct img_image_config *c);
DEFINE_TRIVIAL_CLEANUP_FUNC(struct img_image_config *, img_image_config_free);

/* --- helpers shared with image.c (the canonical config) --- */

struct json_t;

/* Copy a JSON array of strings (NULL or JSON null: empty) into a new
 * NULL-terminated vector. -EINVAL when a not an array or an element not a
 * string, -ENOMEM. *ret owned by the caller (free each, then the vector). */
int img_json_strv(const struct json_t *a, char ***ret, size_t *n_ret);

/* Fill cfg (zeroed first) from the "config" object c of an image config:
 * Env, Entrypoint, Cmd (string arrays), WorkingDir and User (non-empty
 * strings). -EINVAL for a wrong type, -ENOMEM; cfg is cleared on error. */
int img_config_from_json(const struct json_t *c, struct img_config *cfg);
