/* SPDX-License-Identifier: Apache-2.0 */
/* The sandboxes and sandbox_tags tables. */
#include "store/store-internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SANDBOX_COLUMNS                                                                            \
        "id, environment, name, status, status_message, image_id, image_ref, spec, created, "      \
        "terminated, expires, init_pid, cgroup_path, init_start, uid_base"

void store_sandbox_clear(struct store_sandbox *sb) {
        if (!sb)
                return;
        free(sb->id);
        free(sb->environment);
        free(sb->name);
        free(sb->status_message);
        free(sb->image_id);
        free(sb->image_ref);
        free(sb->spec);
        for (size_t i = 0; sb->tags && i < sb->n_tags; i++) {
                free(sb->tags[i].key);
                free(sb->tags[i].value);
        }
        free(sb->tags);
        free(sb->cgroup_path);
        *sb = (struct store_sandbox){0};
}

STORE_DEFINE_LIST_FREE(struct store_sandbox, store_sandbox_clear, sandbox_item_clear,
                       store_sandbox_list_free)

static bool status_valid(int status) {
        return status >= STORE_SANDBOX_PENDING && status <= STORE_SANDBOX_FAILED;
}

int store_sandbox_insert(struct store *s, const struct store_sandbox *sb, struct wr_err *e) {
        if (!sb->id || !*sb->id || !sb->environment || !*sb->environment ||
            !status_valid(sb->status) || sb->created_ns <= 0)
                return err_set(e, -EINVAL,
                               "insert sandbox: id, environment, status and "
                               "created time are required");
        int r = store_savepoint(s, e);
        if (r < 0)
                return r;
        {
                _cleanup_stmt_ sqlite3_stmt *st = NULL;
                r = store_stmt_prepare(s,
                                       "INSERT INTO sandboxes (" SANDBOX_COLUMNS ", updated) "
                                       "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, "
                                       "?13, ?14, ?15, ?9)",
                                       &st, e);
                if (r < 0)
                        goto done;
                store_bind_text(st, 1, sb->id);
                store_bind_text(st, 2, sb->environment);
                store_bind_text_nullable(st, 3, sb->name && *sb->name ? sb->name : NULL);
                sqlite3_bind_int(st, 4, sb->status);
                store_bind_text(st, 5, sb->status_message);
                store_bind_text(st, 6, sb->image_id);
                store_bind_text(st, 7, sb->image_ref);
                if (sb->spec)
                        sqlite3_bind_blob64(st, 8, sb->spec, sb->spec_len, SQLITE_TRANSIENT);
                else
                        sqlite3_bind_null(st, 8);
                sqlite3_bind_int64(st, 9, sb->created_ns);
                sqlite3_bind_int64(st, 10, sb->terminated_ns);
                sqlite3_bind_int64(st, 11, sb->expires_ns);
                sqlite3_bind_int64(st, 12, sb->init_pid);
                store_bind_text(st, 13, sb->cgroup_path);
                sqlite3_bind_int64(st, 14, (sqlite3_int64) sb->init_start);
                sqlite3_bind_int64(st, 15, (sqlite3_int64) sb->uid_base);
                r = store_stmt_done(s, st, false, "insert sandbox", e);
                if (r == -EEXIST) {
                        /* Which uniqueness was it: the id or the live name? */
                        if (strstr(sqlite3_errmsg(s->db), "sandboxes.id"))
                                err_set(e, r, "sandbox id %s already exists", sb->id);
                        else
                                err_set(e, r, "a live sandbox named \"%s\" already exists",
                                        sb->name ? sb->name : "");
                }
                if (r == -ENOENT)
                        err_set(e, r, "environment \"%s\" does not exist", sb->environment);
                if (r < 0)
                        goto done;
        }
        for (size_t i = 0; i < sb->n_tags; i++) {
                _cleanup_stmt_ sqlite3_stmt *st = NULL;
                r = store_stmt_prepare(
                        s, "INSERT INTO sandbox_tags (sandbox_id, key, value) VALUES (?, ?, ?)",
                        &st, e);
                if (r < 0)
                        goto done;
                store_bind_text(st, 1, sb->id);
                store_bind_text(st, 2, sb->tags[i].key);
                store_bind_text(st, 3, sb->tags[i].value);
                r = store_stmt_done(s, st, false, "insert sandbox tag", e);
                if (r == -EEXIST)
                        r = err_set(e, -EINVAL, "insert sandbox: tag \"%s\" given twice",
                                    sb->tags[i].key);
                if (r < 0)
                        goto done;
        }
done:
        return store_savepoint_end(s, r, e);
}

int store_sandbox_update_status(struct store *s, const char *id, enum store_sandbox_status status,
                                const char *message, struct wr_err *e) {
        if (!status_valid(status))
                return err_set(e, -EINVAL, "update sandbox %s: invalid status %d", id, status);
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        int r = store_stmt_prepare(
                s,
                "UPDATE sandboxes SET status = ?2, status_message = ?3, updated = ?4, "
                "terminated = CASE WHEN ?2 IN (4, 5) AND terminated = 0 THEN ?4 "
                "ELSE terminated END WHERE id = ?1",
                &st, e);
        if (r < 0)
                return r;
        store_bind_text(st, 1, id);
        sqlite3_bind_int(st, 2, status);
        store_bind_text(st, 3, message);
        sqlite3_bind_int64(st, 4, store_now_ns());
        r = store_stmt_done(s, st, true, "update sandbox status", e);
        if (r == -ENOENT)
                return err_set(e, r, "sandbox %s not found", id);
        if (r == -EEXIST)
                return err_set(e, r, "sandbox %s: another live sandbox has its name", id);
        return r;
}

int store_sandbox_update_runtime(struct store *s, const char *id, int64_t init_pid,
                                 const char *cgroup_path, struct wr_err *e) {
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        int r = store_stmt_prepare(s,
                                   "UPDATE sandboxes SET init_pid = ?2, cgroup_path = ?3, "
                                   "updated = ?4 WHERE id = ?1",
                                   &st, e);
        if (r < 0)
                return r;
        store_bind_text(st, 1, id);
        sqlite3_bind_int64(st, 2, init_pid);
        store_bind_text(st, 3, cgroup_path);
        sqlite3_bind_int64(st, 4, store_now_ns());
        r = store_stmt_done(s, st, true, "update sandbox runtime", e);
        if (r == -ENOENT)
                return err_set(e, r, "sandbox %s not found", id);
        return r;
}

int store_sandbox_set_started(struct store *s, const char *id, int64_t init_pid,
                              uint64_t init_start, const char *cgroup_path, const void *process,
                              size_t process_len, int status, struct wr_err *e) {
        unsigned char nonce[STORE_SEAL_NONCE_LEN];
        _cleanup_free_ unsigned char *sealed = NULL;
        size_t sealed_len = 0;
        int r;
        if (process) {
                r = store_blob_seal(s, PROCESS_LABEL, id, process, process_len, nonce, &sealed,
                                    &sealed_len, e);
                if (r < 0)
                        return err_prefix(e, r, "sandbox %s: seal process defaults", id);
        }
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        r = store_stmt_prepare(
                s,
                "UPDATE sandboxes SET init_pid = ?2, init_start = ?3, cgroup_path = ?4, "
                "process = ?5, process_nonce = ?6, updated = ?7, "
                "status = CASE WHEN ?8 > 0 THEN ?8 ELSE status END WHERE id = ?1",
                &st, e);
        if (r < 0)
                return r;
        store_bind_text(st, 1, id);
        sqlite3_bind_int64(st, 2, init_pid);
        sqlite3_bind_int64(st, 3, (sqlite3_int64) init_start);
        store_bind_text(st, 4, cgroup_path);
        if (sealed) {
                sqlite3_bind_blob64(st, 5, sealed, sealed_len, SQLITE_TRANSIENT);
                sqlite3_bind_blob64(st, 6, nonce, sizeof(nonce), SQLITE_TRANSIENT);
        } else {
                sqlite3_bind_null(st, 5);
                sqlite3_bind_null(st, 6);
        }
        sqlite3_bind_int64(st, 7, store_now_ns());
        sqlite3_bind_int(st, 8, status);
        r = store_stmt_done(s, st, true, "record started sandbox", e);
        if (r == -ENOENT)
                return err_set(e, r, "sandbox %s not found", id);
        return r;
}

int store_sandbox_get_process(struct store *s, const char *id, unsigned char **ret, size_t *len,
                              struct wr_err *e) {
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        int r = store_row_load(s, "SELECT process, process_nonce FROM sandboxes WHERE id = ?",
                               STORE_ARGS(id), "load process defaults", &st, e);
        if (r == 0)
                return err_set(e, -ENOENT, "sandbox %s not found", id);
        if (r < 0)
                return r;
        if (sqlite3_column_type(st, 0) == SQLITE_NULL)
                return err_set(e, -ENODATA, "sandbox %s: no process defaults recorded", id);
        return store_blob_open(s, PROCESS_LABEL, id, sqlite3_column_blob(st, 0),
                               (size_t) sqlite3_column_bytes(st, 0), sqlite3_column_blob(st, 1),
                               (size_t) sqlite3_column_bytes(st, 1), ret, len, e);
}

static int load_tags(struct store *s, struct store_sandbox *sb, struct wr_err *e) {
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        int r = store_stmt_prepare(
                s, "SELECT key, value FROM sandbox_tags WHERE sandbox_id = ? ORDER BY key", &st, e);
        if (r < 0)
                return r;
        store_bind_text(st, 1, sb->id);
        for (;;) {
                int rc = sqlite3_step(st);
                if (rc == SQLITE_DONE)
                        return 0;
                if (rc != SQLITE_ROW)
                        return store_sqlite_error(s, rc, "load sandbox tags", e);
                struct store_tag *t = reallocarray(sb->tags, sb->n_tags + 1, sizeof(*t));
                if (!t)
                        return err_set(e, -ENOMEM, "load sandbox tags: out of memory");
                sb->tags = t;
                t = &sb->tags[sb->n_tags];
                t->key = store_column_strdup(st, 0);
                t->value = store_column_strdup(st, 1);
                sb->n_tags++;
                if (!t->key || !t->value)
                        return err_set(e, -ENOMEM, "load sandbox tags: out of memory");
        }
}

/* Fill ret from a row of SANDBOX_COLUMNS, then its tags. */
static int read_row(struct store *s, sqlite3_stmt *st, struct store_sandbox *ret,
                    struct wr_err *e) {
        *ret = (struct store_sandbox){0};
        ret->id = store_column_strdup(st, 0);
        ret->environment = store_column_strdup(st, 1);
        if (sqlite3_column_type(st, 2) != SQLITE_NULL) {
                ret->name = store_column_strdup(st, 2);
                if (!ret->name)
                        goto oom;
        }
        ret->status = (enum store_sandbox_status) sqlite3_column_int(st, 3);
        ret->status_message = store_column_strdup(st, 4);
        ret->image_id = store_column_strdup(st, 5);
        ret->image_ref = store_column_strdup(st, 6);
        if (sqlite3_column_type(st, 7) != SQLITE_NULL) {
                const void *blob = sqlite3_column_blob(st, 7);
                int n = sqlite3_column_bytes(st, 7);
                ret->spec = malloc(n > 0 ? (size_t) n : 1);
                if (!ret->spec)
                        goto oom;
                if (n > 0)
                        memcpy(ret->spec, blob, (size_t) n);
                ret->spec_len = (size_t) n;
        }
        ret->created_ns = sqlite3_column_int64(st, 8);
        ret->terminated_ns = sqlite3_column_int64(st, 9);
        ret->expires_ns = sqlite3_column_int64(st, 10);
        ret->init_pid = sqlite3_column_int64(st, 11);
        ret->cgroup_path = store_column_strdup(st, 12);
        ret->init_start = (uint64_t) sqlite3_column_int64(st, 13);
        ret->uid_base = (uint32_t) sqlite3_column_int64(st, 14);
        if (!ret->id || !ret->environment || !ret->status_message || !ret->image_id ||
            !ret->image_ref || !ret->cgroup_path)
                goto oom;
        int r = load_tags(s, ret, e);
        if (r < 0) {
                store_sandbox_clear(ret);
                return r;
        }
        return 0;
oom:
        store_sandbox_clear(ret);
        return err_set(e, -ENOMEM, "load sandbox: out of memory");
}

int store_sandbox_load(struct store *s, const char *id, struct store_sandbox *ret,
                       struct wr_err *e) {
        *ret = (struct store_sandbox){0};
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        int r = store_row_load(s, "SELECT " SANDBOX_COLUMNS " FROM sandboxes WHERE id = ?",
                               STORE_ARGS(id), "load sandbox", &st, e);
        if (r == 0)
                return err_set(e, -ENOENT, "sandbox %s not found", id);
        return r < 0 ? r : read_row(s, st, ret, e);
}

int store_sandbox_load_by_name(struct store *s, const char *env, const char *name,
                               struct store_sandbox *ret, struct wr_err *e) {
        *ret = (struct store_sandbox){0};
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        int r = store_row_load(s,
                               "SELECT " SANDBOX_COLUMNS " FROM sandboxes "
                               "WHERE environment = ? AND name = ? "
                               "ORDER BY status IN (1, 2, 3) DESC, created DESC, id LIMIT 1",
                               STORE_ARGS(env, name), "load sandbox", &st, e);
        if (r == 0)
                return err_set(e, -ENOENT, "no sandbox named \"%s\"", name);
        return r < 0 ? r : read_row(s, st, ret, e);
}

/* Append s to buf (a fixed set of SQL fragments; never user input). */
static int sql_append(char **buf, size_t *len, const char *frag) {
        size_t n = strlen(frag);
        char *b = realloc(*buf, *len + n + 1);
        if (!b)
                return -ENOMEM;
        memcpy(b + *len, frag, n + 1);
        *buf = b;
        *len += n;
        return 0;
}

static int sandbox_row(struct store *s, sqlite3_stmt *st, void *item, void *ctx, struct wr_err *e) {
        return read_row(s, st, item, e);
}

int store_sandbox_list(struct store *s, const struct store_sandbox_filter *f,
                       struct store_sandbox **ret, size_t *n_ret, struct wr_err *e) {
        *ret = NULL;
        *n_ret = 0;
        if (!f->environment && !f->all_environments)
                return err_set(e, -EINVAL, "list sandboxes: environment required");

        /* The statement's shape depends only on how many statuses and tags
         * are filtered on; every value is a bound parameter. */
        _cleanup_free_ char *sql = NULL;
        size_t len = 0;
        int r = sql_append(&sql, &len,
                           f->all_environments ? "SELECT " SANDBOX_COLUMNS
                                                 " FROM sandboxes s WHERE 1"
                                               : "SELECT " SANDBOX_COLUMNS
                                                 " FROM sandboxes s WHERE environment = ?");
        if (r == 0 && f->n_statuses > 0) {
                r = sql_append(&sql, &len, " AND status IN (?");
                for (size_t i = 1; r == 0 && i < f->n_statuses; i++)
                        r = sql_append(&sql, &len, ", ?");
                if (r == 0)
                        r = sql_append(&sql, &len, ")");
        }
        if (r == 0 && f->name && *f->name)
                r = sql_append(&sql, &len, " AND name = ?");
        for (size_t i = 0; r == 0 && i < f->n_tags; i++)
                r = sql_append(&sql, &len,
                               " AND EXISTS (SELECT 1 FROM sandbox_tags t WHERE "
                               "t.sandbox_id = s.id AND t.key = ? AND t.value = ?)");
        if (r == 0 && f->hide_ended_before_ns > 0)
                r = sql_append(&sql, &len, " AND NOT (status IN (4, 5) AND terminated < ?)");
        if (r == 0)
                r = sql_append(&sql, &len, " ORDER BY created DESC, id DESC LIMIT ? OFFSET ?");
        if (r < 0)
                return err_set(e, r, "list sandboxes: out of memory");

        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        r = store_stmt_prepare(s, sql, &st, e);
        if (r < 0)
                return r;
        int idx = 1;
        if (!f->all_environments)
                store_bind_text(st, idx++, f->environment);
        for (size_t i = 0; i < f->n_statuses; i++)
                sqlite3_bind_int(st, idx++, f->statuses[i]);
        if (f->name && *f->name)
                store_bind_text(st, idx++, f->name);
        for (size_t i = 0; i < f->n_tags; i++) {
                store_bind_text(st, idx++, f->tags[i].key);
                store_bind_text(st, idx++, f->tags[i].value);
        }
        if (f->hide_ended_before_ns > 0)
                sqlite3_bind_int64(st, idx++, f->hide_ended_before_ns);
        sqlite3_bind_int64(st, idx++, f->limit > 0 ? (sqlite3_int64) f->limit : -1);
        sqlite3_bind_int64(st, idx++, (sqlite3_int64) f->offset);

        return store_rows_collect(s, st, sizeof(struct store_sandbox), sandbox_row,
                                  sandbox_item_clear, NULL, "list sandboxes", (void **) ret, n_ret,
                                  e);
}

int store_sandbox_delete(struct store *s, const char *id, struct wr_err *e) {
        int r = store_stmt_run(s, "DELETE FROM sandboxes WHERE id = ?", STORE_ARGS(id), true,
                               "delete sandbox", e);
        if (r == -ENOENT)
                return err_set(e, r, "sandbox %s not found", id);
        return r;
}

int store_sandbox_count_by_status(struct store *s, int64_t counts[6], struct wr_err *e) {
        for (int i = 0; i < 6; i++)
                counts[i] = 0;
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        int r = store_stmt_prepare(s, "SELECT status, COUNT(*) FROM sandboxes GROUP BY status", &st,
                                   e);
        if (r < 0)
                return r;
        for (;;) {
                int rc = sqlite3_step(st);
                if (rc == SQLITE_DONE)
                        return 0;
                if (rc != SQLITE_ROW)
                        return store_sqlite_error(s, rc, "count sandboxes", e);
                int status = sqlite3_column_int(st, 0);
                if (status >= 0 && status < 6)
                        counts[status] = sqlite3_column_int64(st, 1);
        }
}
