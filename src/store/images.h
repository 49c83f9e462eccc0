/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* The image tables of the store (images, image_names, image_layers,
 * layers), used by src/image. Same conventions as store.h: >= 0 or a
 * negative errno (-ENOENT missing row, -EEXIST conflict, -EIO database
 * error with the message in e). Callers group writes with store_tx_begin /
 * store_tx_commit. Layer paths are stored relative to the state dir. */

#include <stddef.h>
#include <stdint.h>

#include "store/store.h"

struct store_image {
        char *id;      /* "sha256:<hex>" */
        char *config;  /* canonical JSON */
        uint64_t size; /* sum of the layers' sizes */
        int64_t created_ns;
        char *source; /* "import", "pull", "build" */
        char **names; /* sorted; n_names may be 0 */
        size_t n_names;
        char **diff_ids; /* bottom first */
        size_t n_layers;
};

struct store_layer {
        char *diff_id;
        uint64_t size;
        char *path; /* relative to the state dir: "layers/sha256/<hex>" */
        int64_t created_ns;
};

/* Free what img holds and zero it. NULL is fine. */
void store_image_clear(struct store_image *img);
/* Free an array from store_image_list. */
void store_image_list_free(struct store_image *list, size_t n);
/* Free what l holds and zero it. NULL is fine. */
void store_layer_clear(struct store_layer *l);

/* Insert the image row and its image_layers rows (names are separate).
 * Every layer must already have a layers row (-ENOENT otherwise); -EEXIST
 * when the id exists. */
int store_image_insert(struct store *s, const struct store_image *img, struct wr_err *e);

/* Point name at image id, moving it from any other image. -ENOENT when the
 * image does not exist. */
int store_image_name_set(struct store *s, const char *name, const char *id, struct wr_err *e);

/* Remove one name. -ENOENT when unknown. */
int store_image_name_delete(struct store *s, const char *name, struct wr_err *e);

/* The image id a name points at (*ret owned by the caller). -ENOENT. */
int store_image_name_lookup(struct store *s, const char *name, char **ret, struct wr_err *e);

/* The ids starting with prefix (e.g. "sha256:0123abcd"): returns how many
 * match (0, 1 or 2 = ambiguous) and, when exactly one, *ret (owned). */
int store_image_id_prefix(struct store *s, const char *prefix, char **ret, struct wr_err *e);

/* Load an image with its names and layers into *ret (caller clears).
 * -ENOENT when unknown. */
int store_image_load(struct store *s, const char *id, struct store_image *ret, struct wr_err *e);

/* Every image, newest first, with names and layers. Returns the count;
 * *ret (maybe NULL when empty) owned by the caller. */
int store_image_list(struct store *s, struct store_image **ret, size_t *n_ret, struct wr_err *e);

/* Delete an image, its names and its image_layers rows. -ENOENT. */
int store_image_delete(struct store *s, const char *id, struct wr_err *e);

/* Insert a layer row; an existing row with the same diff id is kept
 * (returns 0 then too). */
int store_layer_insert(struct store *s, const struct store_layer *l, struct wr_err *e);

/* Load a layer row. -ENOENT when unknown. */
int store_layer_load(struct store *s, const char *diff_id, struct store_layer *ret,
                     struct wr_err *e);

/* Number of images using diff_id. */
int store_layer_refcount(struct store *s, const char *diff_id, struct wr_err *e);

/* Delete a layer row. -ENOENT when unknown; -EBUSY while an image uses it. */
int store_layer_delete(struct store *s, const char *diff_id, struct wr_err *e);

/* Every layer row (for start-up garbage collection). Returns the count. */
int store_layer_list(struct store *s, struct store_layer **ret, size_t *n_ret, struct wr_err *e);
/* Free an array from store_layer_list. NULL ok. */
void store_layer_list_free(struct store_layer *list, size_t n);
