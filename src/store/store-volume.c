/* SPDX-License-Identifier: Apache-2.0 */
/* The volumes table (the volume's files live in state_dir/volumes/). */
#include "store/store-internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

void store_volume_clear(struct store_volume *v) {
        if (!v)
                return;
        free(v->environment);
        free(v->name);
        memset(v, 0, sizeof(*v));
}

STORE_DEFINE_LIST_FREE(struct store_volume, store_volume_clear, volume_item_clear,
                       store_volume_list_free)

int store_volume_insert(struct store *s, const char *env, const char *name, struct wr_err *e) {
        if (!env || !*env || !name || !*name)
                return err_set(e, -EINVAL, "insert volume: environment and name required");
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        int r = store_stmt_prepare(
                s, "INSERT INTO volumes (environment, name, created) VALUES (?, ?, ?)", &st, e);
        if (r < 0)
                return r;
        store_bind_text(st, 1, env);
        store_bind_text(st, 2, name);
        sqlite3_bind_int64(st, 3, store_now_ns());
        r = store_stmt_done(s, st, false, "insert volume", e);
        if (r == -EEXIST)
                return err_set(e, r, "volume \"%s\" already exists", name);
        if (r == -ENOENT)
                return err_set(e, r, "environment \"%s\" does not exist", env);
        return r;
}

static int read_row(sqlite3_stmt *st, struct store_volume *ret, struct wr_err *e) {
        ret->environment = store_column_strdup(st, 0);
        ret->name = store_column_strdup(st, 1);
        ret->created_ns = sqlite3_column_int64(st, 2);
        if (!ret->environment || !ret->name) {
                store_volume_clear(ret);
                return err_set(e, -ENOMEM, "load volume: out of memory");
        }
        return 0;
}

int store_volume_load(struct store *s, const char *env, const char *name, struct store_volume *ret,
                      struct wr_err *e) {
        *ret = (struct store_volume){0};
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        int r = store_row_load(s,
                               "SELECT environment, name, created FROM volumes "
                               "WHERE environment = ? AND name = ?",
                               STORE_ARGS(env, name), "load volume", &st, e);
        if (r == 0)
                return err_set(e, -ENOENT, "volume \"%s\" not found", name);
        return r < 0 ? r : read_row(st, ret, e);
}

static int volume_row(struct store *s, sqlite3_stmt *st, void *item, void *ctx, struct wr_err *e) {
        return read_row(st, item, e);
}

int store_volume_list(struct store *s, const char *env, struct store_volume **ret, size_t *n_ret,
                      struct wr_err *e) {
        *ret = NULL;
        *n_ret = 0;
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        int r = store_stmt_prepare(s,
                                   "SELECT environment, name, created FROM volumes "
                                   "WHERE environment = ? ORDER BY name",
                                   &st, e);
        if (r < 0)
                return r;
        store_bind_text(st, 1, env);
        return store_rows_collect(s, st, sizeof(struct store_volume), volume_row, volume_item_clear,
                                  NULL, "list volumes", (void **) ret, n_ret, e);
}

int store_volume_delete(struct store *s, const char *env, const char *name, struct wr_err *e) {
        int r = store_stmt_run(s, "DELETE FROM volumes WHERE environment = ? AND name = ?",
                               STORE_ARGS(env, name), true, "delete volume", e);
        if (r == -ENOENT)
                return err_set(e, r, "volume \"%s\" not found", name);
        return r;
}
