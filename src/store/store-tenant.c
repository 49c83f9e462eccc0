/* SPDX-License-Identifier: Apache-2.0 */
/* Tenancy tables: environments (with their quotas), API tokens (hashed)
 * and the audit log. */
#include "store/store-internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/crypto.h>

bool store_env_name_valid(const char *name) {
        if (!name || !*name || strlen(name) > 63)
                return false;
        for (const char *p = name; *p; p++) {
                bool ok = (*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') ||
                          (p != name && (*p == '-' || *p == '_'));
                if (!ok)
                        return false;
        }
        return true;
}

int store_env_ensure(struct store *s, const char *env, struct wr_err *e) {
        if (!store_env_name_valid(env))
                return err_set(e, -EINVAL, "environment \"%.80s\" is not a valid name", env);
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        int r = store_stmt_prepare(s,
                                   "INSERT OR IGNORE INTO environments (id, name, created) "
                                   "VALUES (?1, ?1, ?2)",
                                   &st, e);
        if (r < 0)
                return r;
        store_bind_text(st, 1, env);
        sqlite3_bind_int64(st, 2, store_now_ns());
        return store_stmt_done(s, st, false, "create environment", e);
}

int store_env_exists(struct store *s, const char *env, struct wr_err *e) {
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        int r = store_row_load(s, "SELECT 1 FROM environments WHERE id = ?", STORE_ARGS(env),
                               "load environment", &st, e);
        return r < 0 ? r : r == 1;
}

int store_env_quota_get(struct store *s, const char *env, struct store_quota *ret,
                        struct wr_err *e) {
        *ret = (struct store_quota){0};
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        int r = store_row_load(s,
                               "SELECT max_sandboxes, max_cpu, max_memory, max_volume_bytes "
                               "FROM environments WHERE id = ?",
                               STORE_ARGS(env), "load quota", &st, e);
        if (r == 0)
                return err_set(e, -ENOENT, "environment \"%s\" not found", env);
        if (r < 0)
                return r;
        ret->max_sandboxes = sqlite3_column_int64(st, 0);
        ret->max_cpu = sqlite3_column_double(st, 1);
        ret->max_memory = sqlite3_column_int64(st, 2);
        ret->max_volume_bytes = sqlite3_column_int64(st, 3);
        return 0;
}

int store_env_quota_set(struct store *s, const char *env, const struct store_quota *q,
                        struct wr_err *e) {
        int r = store_env_ensure(s, env, e);
        if (r < 0)
                return r;
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        r = store_stmt_prepare(s,
                               "UPDATE environments SET max_sandboxes = ?, max_cpu = ?, "
                               "max_memory = ?, max_volume_bytes = ? WHERE id = ?",
                               &st, e);
        if (r < 0)
                return r;
        sqlite3_bind_int64(st, 1, q->max_sandboxes);
        sqlite3_bind_double(st, 2, q->max_cpu);
        sqlite3_bind_int64(st, 3, q->max_memory);
        sqlite3_bind_int64(st, 4, q->max_volume_bytes);
        store_bind_text(st, 5, env);
        return store_stmt_done(s, st, true, "set quota", e);
}

/* --- tokens --- */

void store_token_clear(struct store_token *t) {
        if (!t)
                return;
        free(t->id);
        free(t->environment);
        free(t->subject);
        free(t->role);
        memset(t, 0, sizeof(*t));
}

STORE_DEFINE_LIST_FREE(struct store_token, store_token_clear, token_item_clear,
                       store_token_list_free)

#define TOKEN_COLUMNS "id, environment, subject, role, created, expires, revoked, hash"

static int token_read(sqlite3_stmt *st, struct store_token *t, struct wr_err *e) {
        t->id = store_column_strdup(st, 0);
        t->environment = store_column_strdup(st, 1);
        t->subject = store_column_strdup(st, 2);
        t->role = store_column_strdup(st, 3);
        t->created_ns = sqlite3_column_int64(st, 4);
        t->expires_ns = sqlite3_column_int64(st, 5);
        t->revoked_ns = sqlite3_column_int64(st, 6);
        const void *h = sqlite3_column_blob(st, 7);
        if (h && sqlite3_column_bytes(st, 7) == (int) sizeof(t->hash))
                memcpy(t->hash, h, sizeof(t->hash));
        if (!t->id || !t->environment || !t->subject || !t->role) {
                store_token_clear(t);
                return err_set(e, -ENOMEM, "load token: out of memory");
        }
        return 0;
}

int store_token_insert(struct store *s, const struct store_token *t, struct wr_err *e) {
        if (!t->id || !*t->id || !t->role)
                return err_set(e, -EINVAL, "insert token: id and role required");
        int r = store_env_ensure(s, t->environment, e);
        if (r < 0)
                return r;
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        r = store_stmt_prepare(s,
                               "INSERT INTO tokens (id, environment, subject, role, hash, "
                               "created, expires) VALUES (?, ?, ?, ?, ?, ?, ?)",
                               &st, e);
        if (r < 0)
                return r;
        store_bind_text(st, 1, t->id);
        store_bind_text(st, 2, t->environment);
        store_bind_text(st, 3, t->subject);
        store_bind_text(st, 4, t->role);
        sqlite3_bind_blob(st, 5, t->hash, sizeof(t->hash), SQLITE_TRANSIENT);
        sqlite3_bind_int64(st, 6, t->created_ns ? t->created_ns : store_now_ns());
        sqlite3_bind_int64(st, 7, t->expires_ns);
        return store_stmt_done(s, st, false, "insert token", e);
}

int store_token_load(struct store *s, const char *id, struct store_token *ret, struct wr_err *e) {
        *ret = (struct store_token){0};
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        int r = store_row_load(s, "SELECT " TOKEN_COLUMNS " FROM tokens WHERE id = ?",
                               STORE_ARGS(id), "load token", &st, e);
        if (r == 0)
                return err_set(e, -ENOENT, "token %s not found", id);
        return r < 0 ? r : token_read(st, ret, e);
}

static int token_row(struct store *s, sqlite3_stmt *st, void *item, void *ctx, struct wr_err *e) {
        struct store_token *t = item;
        int r = token_read(st, t, e);
        /* listings never carry the hash */
        if (r >= 0)
                explicit_bzero(t->hash, sizeof(t->hash));
        return r;
}

int store_token_list(struct store *s, const char *env, struct store_token **ret, size_t *n_ret,
                     struct wr_err *e) {
        *ret = NULL;
        *n_ret = 0;
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        int r = store_stmt_prepare(s,
                                   env ? "SELECT " TOKEN_COLUMNS " FROM tokens WHERE "
                                         "environment = ? ORDER BY created, id"
                                       : "SELECT " TOKEN_COLUMNS
                                         " FROM tokens ORDER BY created, id",
                                   &st, e);
        if (r < 0)
                return r;
        if (env)
                store_bind_text(st, 1, env);
        return store_rows_collect(s, st, sizeof(struct store_token), token_row, token_item_clear,
                                  NULL, "list tokens", (void **) ret, n_ret, e);
}

int store_token_revoke(struct store *s, const char *id, struct wr_err *e) {
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        int r = store_stmt_prepare(s, "UPDATE tokens SET revoked = ? WHERE id = ? AND revoked = 0",
                                   &st, e);
        if (r < 0)
                return r;
        sqlite3_bind_int64(st, 1, store_now_ns());
        store_bind_text(st, 2, id);
        r = store_stmt_done(s, st, true, "revoke token", e);
        if (r == -ENOENT) {
                struct store_token t;
                if (store_token_load(s, id, &t, NULL) >= 0) {
                        store_token_clear(&t);
                        return 0; /* revoked already: done */
                }
                return err_set(e, -ENOENT, "token %s not found", id);
        }
        return r;
}

bool store_token_hash_equal(const uint8_t a[32], const uint8_t b[32]) {
        return CRYPTO_memcmp(a, b, 32) == 0;
}

/* --- audit --- */

void store_audit_clear(struct store_audit *a) {
        if (!a)
                return;
        free(a->environment);
        free(a->token_id);
        free(a->subject);
        free(a->peer);
        free(a->method);
        free(a->object);
        free(a->message);
        memset(a, 0, sizeof(*a));
}

STORE_DEFINE_LIST_FREE(struct store_audit, store_audit_clear, audit_item_clear,
                       store_audit_list_free)

static int audit_write(struct store *s, const struct store_audit *a, struct wr_err *e) {
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        int r = store_stmt_prepare(s,
                                   "INSERT INTO audit (time, environment, token_id, subject, "
                                   "peer, method, object, status, message) "
                                   "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                                   &st, e);
        if (r < 0)
                return r;
        sqlite3_bind_int64(st, 1, a->time_ns);
        store_bind_text(st, 2, a->environment);
        store_bind_text(st, 3, a->token_id);
        store_bind_text(st, 4, a->subject);
        store_bind_text(st, 5, a->peer);
        store_bind_text(st, 6, a->method);
        store_bind_text(st, 7, a->object);
        sqlite3_bind_int(st, 8, a->status);
        store_bind_text(st, 9, a->message);
        return store_stmt_done(s, st, false, "insert audit record", e);
}

int store_audit_flush(struct store *s, struct wr_err *e) {
        if (!s || s->audit_n == 0)
                return 0;
        bool own_tx = !s->in_tx;
        int r = own_tx ? store_tx_begin(s, e) : 0;
        for (size_t i = 0; r >= 0 && i < s->audit_n; i++)
                r = audit_write(s, &s->audit_q[i], e);
        if (own_tx)
                r = r < 0 ? (store_tx_rollback(s), r) : store_tx_commit(s, e);
        if (r < 0) {
                /* kept for the next flush, within a bound */
                if (s->audit_n >= 4 * STORE_AUDIT_QUEUE) {
                        store_audit_clear(&s->audit_q[0]);
                        memmove(s->audit_q, s->audit_q + 1, (s->audit_n - 1) * sizeof(*s->audit_q));
                        s->audit_n--;
                }
                return r;
        }
        for (size_t i = 0; i < s->audit_n; i++)
                store_audit_clear(&s->audit_q[i]);
        s->audit_n = 0;
        return 0;
}

static char *dup_or_empty(const char *v) {
        return strdup(v ? v : "");
}

int store_audit_insert(struct store *s, const struct store_audit *a, struct wr_err *e) {
        if (s->audit_n % STORE_AUDIT_QUEUE == 0) {
                struct store_audit *q =
                        realloc(s->audit_q, (s->audit_n + STORE_AUDIT_QUEUE) * sizeof(*q));
                if (!q)
                        return err_set(e, -ENOMEM, "audit: out of memory");
                s->audit_q = q;
        }
        struct store_audit *c = &s->audit_q[s->audit_n];
        *c = (struct store_audit){
                .time_ns = a->time_ns ? a->time_ns : store_now_ns(),
                .environment = dup_or_empty(a->environment),
                .token_id = dup_or_empty(a->token_id),
                .subject = dup_or_empty(a->subject),
                .peer = dup_or_empty(a->peer),
                .method = dup_or_empty(a->method),
                .object = dup_or_empty(a->object),
                .status = a->status,
                .message = dup_or_empty(a->message),
        };
        if (!c->environment || !c->token_id || !c->subject || !c->peer || !c->method ||
            !c->object || !c->message) {
                store_audit_clear(c);
                return err_set(e, -ENOMEM, "audit: out of memory");
        }
        s->audit_n++;
        if (s->audit_n >= STORE_AUDIT_QUEUE)
                return store_audit_flush(s, e);
        return 0;
}

static int audit_row(struct store *s, sqlite3_stmt *st, void *item, void *ctx, struct wr_err *e) {
        struct store_audit *a = item;
        a->seq = sqlite3_column_int64(st, 0);
        a->time_ns = sqlite3_column_int64(st, 1);
        a->environment = store_column_strdup(st, 2);
        a->token_id = store_column_strdup(st, 3);
        a->subject = store_column_strdup(st, 4);
        a->peer = store_column_strdup(st, 5);
        a->method = store_column_strdup(st, 6);
        a->object = store_column_strdup(st, 7);
        a->status = sqlite3_column_int(st, 8);
        a->message = store_column_strdup(st, 9);
        if (!a->environment || !a->token_id || !a->subject || !a->peer || !a->method ||
            !a->object || !a->message)
                return err_set(e, -ENOMEM, "list audit: out of memory");
        return 0;
}

int store_audit_list(struct store *s, const char *env, int64_t before_seq, size_t limit,
                     struct store_audit **ret, size_t *n_ret, struct wr_err *e) {
        *ret = NULL;
        *n_ret = 0;
        int fr = store_audit_flush(s, e);
        if (fr < 0)
                return fr;
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        int r = store_stmt_prepare(s,
                                   "SELECT seq, time, environment, token_id, subject, peer, "
                                   "method, object, status, message FROM audit "
                                   "WHERE (?1 = '' OR environment = ?1) AND (?2 <= 0 OR seq < ?2) "
                                   "ORDER BY seq DESC LIMIT ?3",
                                   &st, e);
        if (r < 0)
                return r;
        store_bind_text(st, 1, env ? env : "");
        sqlite3_bind_int64(st, 2, before_seq);
        sqlite3_bind_int64(st, 3, limit ? (sqlite3_int64) limit : -1);
        return store_rows_collect(s, st, sizeof(struct store_audit), audit_row, audit_item_clear,
                                  NULL, "list audit", (void **) ret, n_ret, e);
}

/* --- which environment made an image --- */

int store_image_env_add(struct store *s, const char *env, const char *image_id, struct wr_err *e) {
        return store_stmt_run(s,
                              "INSERT OR IGNORE INTO image_envs (environment, image_id) "
                              "VALUES (?, ?)",
                              STORE_ARGS(env, image_id), false, "record image environment", e);
}

static int count(struct store *s, const char *sql, const char *a, const char *b, int64_t *ret,
                 struct wr_err *e) {
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        int r = store_row_load(s, sql, STORE_ARGS(a, b), "image environments", &st, e);
        if (r < 0)
                return r;
        *ret = r == 1 ? sqlite3_column_int64(st, 0) : 0;
        return 0;
}

int store_image_env_access(struct store *s, const char *env, const char *image_id, bool write,
                           struct wr_err *e) {
        int64_t own = 0, other = 0, tenants = 0;
        int r = count(s, "SELECT COUNT(*) FROM image_envs WHERE image_id = ?1 AND environment = ?2",
                      image_id, env, &own, e);
        if (r >= 0)
                r = count(s,
                          "SELECT COUNT(*) FROM image_envs WHERE image_id = ?1 AND "
                          "environment != ?2",
                          image_id, env, &other, e);
        if (r >= 0)
                r = count(s,
                          "SELECT COUNT(*) FROM image_envs WHERE image_id = ?1 AND "
                          "environment != ?2",
                          image_id, STORE_ENV_DEFAULT, &tenants, e);
        if (r < 0)
                return r;
        bool is_default = strcmp(env, STORE_ENV_DEFAULT) == 0;
        if (write)
                return other == 0 && (own > 0 || is_default);
        return own > 0 || tenants == 0;
}
