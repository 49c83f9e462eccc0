/* SPDX-License-Identifier: Apache-2.0 */
/* The image tables: images, image_names, image_layers, layers (owned by
 * src/image; see store/images.h). */
#include "store/images.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "store/store-internal.h"

static void strv_free(char **v, size_t n) {
        for (size_t i = 0; v && i < n; i++)
                free(v[i]);
        free(v);
}

void store_image_clear(struct store_image *img) {
        if (!img)
                return;
        free(img->id);
        free(img->config);
        free(img->source);
        strv_free(img->names, img->n_names);
        strv_free(img->diff_ids, img->n_layers);
        memset(img, 0, sizeof(*img));
}

STORE_DEFINE_LIST_FREE(struct store_image, store_image_clear, image_item_clear,
                       store_image_list_free)

void store_layer_clear(struct store_layer *l) {
        if (!l)
                return;
        free(l->diff_id);
        free(l->path);
        memset(l, 0, sizeof(*l));
}

STORE_DEFINE_LIST_FREE(struct store_layer, store_layer_clear, layer_item_clear,
                       store_layer_list_free)

int store_image_insert(struct store *s, const struct store_image *img, struct wr_err *e) {
        if (!img || !img->id || !img->config)
                return err_set(e, -EINVAL, "insert image: id and config required");
        int r = store_savepoint(s, e);
        if (r < 0)
                return r;
        {
                _cleanup_stmt_ sqlite3_stmt *st = NULL;
                r = store_stmt_prepare(s,
                                       "INSERT INTO images (id, config, size, created, source) "
                                       "VALUES (?, ?, ?, ?, ?)",
                                       &st, e);
                if (r < 0)
                        goto done;
                store_bind_text(st, 1, img->id);
                store_bind_text(st, 2, img->config);
                sqlite3_bind_int64(st, 3, (sqlite3_int64) img->size);
                sqlite3_bind_int64(st, 4, img->created_ns);
                store_bind_text(st, 5, img->source);
                r = store_stmt_done(s, st, false, "insert image", e);
                if (r == -EEXIST)
                        err_set(e, r, "image %s already exists", img->id);
                if (r < 0)
                        goto done;
        }
        for (size_t i = 0; i < img->n_layers; i++) {
                _cleanup_stmt_ sqlite3_stmt *st = NULL;
                r = store_stmt_prepare(
                        s, "INSERT INTO image_layers (image_id, idx, diff_id) VALUES (?, ?, ?)",
                        &st, e);
                if (r < 0)
                        goto done;
                store_bind_text(st, 1, img->id);
                sqlite3_bind_int64(st, 2, (sqlite3_int64) i);
                store_bind_text(st, 3, img->diff_ids[i]);
                r = store_stmt_done(s, st, false, "insert image layer", e);
                if (r == -ENOENT)
                        err_set(e, r, "layer %s is not in the store", img->diff_ids[i]);
                if (r < 0)
                        goto done;
        }
done:
        return store_savepoint_end(s, r, e);
}

int store_image_name_set(struct store *s, const char *name, const char *id, struct wr_err *e) {
        if (!name || !*name || !id || !*id)
                return err_set(e, -EINVAL, "name image: name and id required");
        int r = store_stmt_run(s,
                               "INSERT INTO image_names (name, image_id) VALUES (?, ?) "
                               "ON CONFLICT (name) DO UPDATE SET image_id = excluded.image_id",
                               STORE_ARGS(name, id), false, "name image", e);
        if (r == -ENOENT)
                return err_set(e, r, "image %s not found", id);
        return r;
}

int store_image_name_delete(struct store *s, const char *name, struct wr_err *e) {
        int r = store_stmt_run(s, "DELETE FROM image_names WHERE name = ?", STORE_ARGS(name), true,
                               "remove image name", e);
        if (r == -ENOENT)
                return err_set(e, r, "image name \"%s\" not found", name);
        return r;
}

int store_image_name_lookup(struct store *s, const char *name, char **ret, struct wr_err *e) {
        *ret = NULL;
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        int r = store_row_load(s, "SELECT image_id FROM image_names WHERE name = ?",
                               STORE_ARGS(name), "look up image name", &st, e);
        if (r == 0)
                return err_set(e, -ENOENT, "image \"%s\" not found", name);
        if (r < 0)
                return r;
        *ret = store_column_strdup(st, 0);
        return *ret ? 0 : err_set(e, -ENOMEM, "look up image name: out of memory");
}

int store_image_id_prefix(struct store *s, const char *prefix, char **ret, struct wr_err *e) {
        *ret = NULL;
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        /* substr instead of LIKE: the prefix is user input ('%', '_') */
        int r = store_stmt_prepare(
                s, "SELECT id FROM images WHERE substr(id, 1, length(?1)) = ?1 LIMIT 2", &st, e);
        if (r < 0)
                return r;
        store_bind_text(st, 1, prefix);
        int n = 0, rc;
        while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
                if (n++ == 0) {
                        *ret = store_column_strdup(st, 0);
                        if (!*ret)
                                return err_set(e, -ENOMEM, "find image: out of memory");
                }
        }
        if (rc != SQLITE_DONE) {
                free(*ret);
                *ret = NULL;
                return store_sqlite_error(s, rc, "find image", e);
        }
        if (n != 1) {
                free(*ret);
                *ret = NULL;
        }
        return n;
}

static int load_strings(struct store *s, const char *sql, const char *id, char ***ret,
                        size_t *n_ret, struct wr_err *e) {
        *ret = NULL;
        *n_ret = 0;
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        int r = store_stmt_prepare(s, sql, &st, e);
        if (r < 0)
                return r;
        store_bind_text(st, 1, id);
        int rc;
        size_t n = 0, cap = 0;
        char **v = NULL;
        while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
                if (n == cap) {
                        cap = cap ? cap * 2 : 4;
                        char **nv = realloc(v, cap * sizeof(*v));
                        if (!nv) {
                                strv_free(v, n);
                                return err_set(e, -ENOMEM, "load image: out of memory");
                        }
                        v = nv;
                }
                v[n] = store_column_strdup(st, 0);
                if (!v[n]) {
                        strv_free(v, n);
                        return err_set(e, -ENOMEM, "load image: out of memory");
                }
                n++;
        }
        if (rc != SQLITE_DONE) {
                strv_free(v, n);
                return store_sqlite_error(s, rc, "load image", e);
        }
        *ret = v;
        *n_ret = n;
        return 0;
}

static int read_image_row(struct store *s, sqlite3_stmt *st, struct store_image *ret,
                          struct wr_err *e) {
        *ret = (struct store_image){0};
        ret->id = store_column_strdup(st, 0);
        ret->config = store_column_strdup(st, 1);
        ret->size = (uint64_t) sqlite3_column_int64(st, 2);
        ret->created_ns = sqlite3_column_int64(st, 3);
        ret->source = store_column_strdup(st, 4);
        if (!ret->id || !ret->config || !ret->source) {
                store_image_clear(ret);
                return err_set(e, -ENOMEM, "load image: out of memory");
        }
        int r = load_strings(s, "SELECT name FROM image_names WHERE image_id = ? ORDER BY name",
                             ret->id, &ret->names, &ret->n_names, e);
        if (r >= 0)
                r = load_strings(s,
                                 "SELECT diff_id FROM image_layers WHERE image_id = ? "
                                 "ORDER BY idx",
                                 ret->id, &ret->diff_ids, &ret->n_layers, e);
        if (r < 0)
                store_image_clear(ret);
        return r;
}

#define IMAGE_COLUMNS "id, config, size, created, source"

int store_image_load(struct store *s, const char *id, struct store_image *ret, struct wr_err *e) {
        *ret = (struct store_image){0};
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        int r = store_row_load(s, "SELECT " IMAGE_COLUMNS " FROM images WHERE id = ?",
                               STORE_ARGS(id), "load image", &st, e);
        if (r == 0)
                return err_set(e, -ENOENT, "image %s not found", id);
        return r < 0 ? r : read_image_row(s, st, ret, e);
}

static int image_row(struct store *s, sqlite3_stmt *st, void *item, void *ctx, struct wr_err *e) {
        return read_image_row(s, st, item, e);
}

int store_image_list(struct store *s, struct store_image **ret, size_t *n_ret, struct wr_err *e) {
        *ret = NULL;
        *n_ret = 0;
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        int r = store_stmt_prepare(
                s, "SELECT " IMAGE_COLUMNS " FROM images ORDER BY created DESC, id", &st, e);
        if (r < 0)
                return r;
        return store_rows_collect(s, st, sizeof(struct store_image), image_row, image_item_clear,
                                  NULL, "list images", (void **) ret, n_ret, e);
}

int store_image_delete(struct store *s, const char *id, struct wr_err *e) {
        /* image_names and image_layers go with it (ON DELETE CASCADE) */
        int r = store_stmt_run(s, "DELETE FROM images WHERE id = ?", STORE_ARGS(id), true,
                               "delete image", e);
        if (r == -ENOENT)
                return err_set(e, r, "image %s not found", id);
        return r;
}

int store_layer_insert(struct store *s, const struct store_layer *l, struct wr_err *e) {
        if (!l || !l->diff_id || !l->path)
                return err_set(e, -EINVAL, "insert layer: diff id and path required");
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        int r = store_stmt_prepare(s,
                                   "INSERT INTO layers (diff_id, size, path, created) "
                                   "VALUES (?, ?, ?, ?) ON CONFLICT (diff_id) DO NOTHING",
                                   &st, e);
        if (r < 0)
                return r;
        store_bind_text(st, 1, l->diff_id);
        sqlite3_bind_int64(st, 2, (sqlite3_int64) l->size);
        store_bind_text(st, 3, l->path);
        sqlite3_bind_int64(st, 4, l->created_ns);
        return store_stmt_done(s, st, false, "insert layer", e);
}

static int read_layer_row(sqlite3_stmt *st, struct store_layer *ret, struct wr_err *e) {
        ret->diff_id = store_column_strdup(st, 0);
        ret->size = (uint64_t) sqlite3_column_int64(st, 1);
        ret->path = store_column_strdup(st, 2);
        ret->created_ns = sqlite3_column_int64(st, 3);
        if (!ret->diff_id || !ret->path) {
                store_layer_clear(ret);
                return err_set(e, -ENOMEM, "load layer: out of memory");
        }
        return 0;
}

int store_layer_load(struct store *s, const char *diff_id, struct store_layer *ret,
                     struct wr_err *e) {
        *ret = (struct store_layer){0};
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        int r = store_row_load(s,
                               "SELECT diff_id, size, path, created FROM layers WHERE diff_id = ?",
                               STORE_ARGS(diff_id), "load layer", &st, e);
        if (r == 0)
                return err_set(e, -ENOENT, "layer %s not found", diff_id);
        return r < 0 ? r : read_layer_row(st, ret, e);
}

int store_layer_refcount(struct store *s, const char *diff_id, struct wr_err *e) {
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        int r = store_row_load(
                s, "SELECT count(DISTINCT image_id) FROM image_layers WHERE diff_id = ?",
                STORE_ARGS(diff_id), "count layer users", &st, e);
        if (r == 0)
                return err_set(e, -EIO, "count layer users: no row");
        return r < 0 ? r : sqlite3_column_int(st, 0);
}

int store_layer_delete(struct store *s, const char *diff_id, struct wr_err *e) {
        int n = store_layer_refcount(s, diff_id, e);
        if (n < 0)
                return n;
        if (n > 0)
                return err_set(e, -EBUSY, "layer %s is used by %d image(s)", diff_id, n);
        int r = store_stmt_run(s, "DELETE FROM layers WHERE diff_id = ?", STORE_ARGS(diff_id), true,
                               "delete layer", e);
        if (r == -ENOENT)
                return err_set(e, r, "layer %s not found", diff_id);
        return r;
}

static int layer_row(struct store *s, sqlite3_stmt *st, void *item, void *ctx, struct wr_err *e) {
        return read_layer_row(st, item, e);
}

int store_layer_list(struct store *s, struct store_layer **ret, size_t *n_ret, struct wr_err *e) {
        *ret = NULL;
        *n_ret = 0;
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        int r = store_stmt_prepare(
                s, "SELECT diff_id, size, path, created FROM layers ORDER BY diff_id", &st, e);
        if (r < 0)
                return r;
        return store_rows_collect(s, st, sizeof(struct store_layer), layer_row, layer_item_clear,
                                  NULL, "list layers", (void **) ret, n_ret, e);
}
