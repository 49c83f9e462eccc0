/* SPDX-License-Identifier: Apache-2.0 */
/* Opening the database, its pragmas, and the versioned migrations. */
#include "store/store-internal.h"

#include <errno.h>
#include <pthread.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <openssl/crypto.h>

#include "basic/log.h"

/* The schema, one script per version: migrations[i] takes the database
 * from version i to i + 1. Append only; never edit a released entry. Each
 * script runs in its own transaction together with its schema_version row. */
static const char *const migrations[] = {
        /* 1: initial schema */
        "CREATE TABLE environments (\n"
        "  id TEXT PRIMARY KEY,\n"
        "  name TEXT NOT NULL UNIQUE,\n"
        "  created INTEGER NOT NULL\n"
        ");\n"
        "INSERT INTO environments (id, name, created) VALUES ('default', 'default', 0);\n"
        "CREATE TABLE tokens (\n"
        "  id TEXT PRIMARY KEY,\n"
        "  environment TEXT NOT NULL REFERENCES environments(id) ON DELETE CASCADE,\n"
        "  subject TEXT NOT NULL,\n"
        "  hash BLOB NOT NULL UNIQUE,\n" /* SHA-256 of the bearer token */
        "  created INTEGER NOT NULL,\n"
        "  expires INTEGER NOT NULL DEFAULT 0,\n"
        "  revoked INTEGER NOT NULL DEFAULT 0\n"
        ");\n"
        "CREATE TABLE sandboxes (\n"
        "  id TEXT PRIMARY KEY,\n"
        "  environment TEXT NOT NULL REFERENCES environments(id),\n"
        "  name TEXT,\n"
        "  status INTEGER NOT NULL,\n"
        "  status_message TEXT NOT NULL DEFAULT '',\n"
        "  image_id TEXT NOT NULL DEFAULT '',\n"
        "  image_ref TEXT NOT NULL DEFAULT '',\n"
        "  spec BLOB,\n"
        "  created INTEGER NOT NULL,\n"
        "  terminated INTEGER NOT NULL DEFAULT 0,\n"
        "  expires INTEGER NOT NULL DEFAULT 0,\n"
        "  init_pid INTEGER NOT NULL DEFAULT 0,\n"
        "  cgroup_path TEXT NOT NULL DEFAULT '',\n"
        "  updated INTEGER NOT NULL DEFAULT 0\n"
        ");\n"
        "CREATE UNIQUE INDEX sandboxes_live_name ON sandboxes (environment, name)\n"
        "  WHERE name IS NOT NULL AND status IN (1, 2, 3);\n"
        "CREATE INDEX sandboxes_env_created ON sandboxes (environment, created);\n"
        "CREATE TABLE sandbox_tags (\n"
        "  sandbox_id TEXT NOT NULL REFERENCES sandboxes(id) ON DELETE CASCADE,\n"
        "  key TEXT NOT NULL,\n"
        "  value TEXT NOT NULL,\n"
        "  PRIMARY KEY (sandbox_id, key)\n"
        ") WITHOUT ROWID;\n"
        "CREATE INDEX sandbox_tags_kv ON sandbox_tags (key, value);\n"
        "CREATE TABLE volumes (\n"
        "  environment TEXT NOT NULL REFERENCES environments(id),\n"
        "  name TEXT NOT NULL,\n"
        "  created INTEGER NOT NULL,\n"
        "  PRIMARY KEY (environment, name)\n"
        ");\n"
        "CREATE TABLE secrets (\n"
        "  environment TEXT NOT NULL REFERENCES environments(id),\n"
        "  name TEXT NOT NULL,\n"
        "  ciphertext BLOB NOT NULL,\n" /* AES-256-GCM output || 16-byte tag */
        "  nonce BLOB NOT NULL,\n"      /* 12 random bytes */
        "  updated INTEGER NOT NULL,\n"
        "  PRIMARY KEY (environment, name)\n"
        ");\n"
        "CREATE TABLE secret_keys (\n"
        "  environment TEXT NOT NULL,\n"
        "  name TEXT NOT NULL,\n"
        "  key TEXT NOT NULL,\n"
        "  PRIMARY KEY (environment, name, key),\n"
        "  FOREIGN KEY (environment, name) REFERENCES secrets(environment, name)\n"
        "    ON DELETE CASCADE\n"
        ") WITHOUT ROWID;\n"
        "CREATE TABLE images (\n"
        "  id TEXT PRIMARY KEY,\n" /* sha256:<hex> of the config */
        "  config BLOB NOT NULL,\n"
        "  size INTEGER NOT NULL DEFAULT 0,\n"
        "  created INTEGER NOT NULL,\n"
        "  source TEXT NOT NULL DEFAULT ''\n"
        ");\n"
        "CREATE TABLE image_names (\n"
        "  name TEXT PRIMARY KEY,\n"
        "  image_id TEXT NOT NULL REFERENCES images(id) ON DELETE CASCADE\n"
        ");\n"
        "CREATE INDEX image_names_image ON image_names (image_id);\n"
        "CREATE TABLE layers (\n"
        "  diff_id TEXT PRIMARY KEY,\n"
        "  size INTEGER NOT NULL DEFAULT 0,\n"
        "  path TEXT NOT NULL,\n"
        "  created INTEGER NOT NULL\n"
        ");\n"
        "CREATE TABLE image_layers (\n"
        "  image_id TEXT NOT NULL REFERENCES images(id) ON DELETE CASCADE,\n"
        "  idx INTEGER NOT NULL,\n"
        "  diff_id TEXT NOT NULL REFERENCES layers(diff_id),\n"
        "  PRIMARY KEY (image_id, idx)\n"
        ") WITHOUT ROWID;\n"
        "CREATE INDEX image_layers_diff ON image_layers (diff_id);\n",
        /* 2: restart recovery: init's start time (pid reuse check) and the
         * resolved process defaults (env, workdir, uid), sealed with the
         * secrets key because the env may hold secret values */
        "ALTER TABLE sandboxes ADD COLUMN init_start INTEGER NOT NULL DEFAULT 0;\n"
        "ALTER TABLE sandboxes ADD COLUMN process BLOB;\n"
        "ALTER TABLE sandboxes ADD COLUMN process_nonce BLOB;\n",
        /* 3: a secret's version: 1 when created, +1 on every replace */
        "ALTER TABLE secrets ADD COLUMN version INTEGER NOT NULL DEFAULT 1;\n",
        /* 4: tenancy: a token's role, an environment's quotas (0 = none),
         * the audit log of mutating calls */
        "ALTER TABLE tokens ADD COLUMN role TEXT NOT NULL DEFAULT 'user';\n"
        "ALTER TABLE environments ADD COLUMN max_sandboxes INTEGER NOT NULL DEFAULT 0;\n"
        "ALTER TABLE environments ADD COLUMN max_cpu REAL NOT NULL DEFAULT 0;\n"
        "ALTER TABLE environments ADD COLUMN max_memory INTEGER NOT NULL DEFAULT 0;\n"
        "ALTER TABLE environments ADD COLUMN max_volume_bytes INTEGER NOT NULL DEFAULT 0;\n"
        "CREATE TABLE audit (\n"
        "  seq INTEGER PRIMARY KEY AUTOINCREMENT,\n"
        "  time INTEGER NOT NULL,\n"
        "  environment TEXT NOT NULL,\n"
        "  token_id TEXT NOT NULL DEFAULT '',\n"
        "  subject TEXT NOT NULL DEFAULT '',\n"
        "  peer TEXT NOT NULL DEFAULT '',\n"
        "  method TEXT NOT NULL,\n"
        "  object TEXT NOT NULL DEFAULT '',\n"
        "  status INTEGER NOT NULL,\n"
        "  message TEXT NOT NULL DEFAULT ''\n"
        ");\n"
        "CREATE INDEX audit_env_seq ON audit (environment, seq);\n"
        /* which environments made an image (import, pull, build, snapshot);
         * one with no row or only 'default' is the shared catalog */
        "CREATE TABLE image_envs (\n"
        "  environment TEXT NOT NULL,\n"
        "  image_id TEXT NOT NULL REFERENCES images(id) ON DELETE CASCADE,\n"
        "  PRIMARY KEY (environment, image_id)\n"
        ") WITHOUT ROWID;\n"
        "CREATE INDEX image_envs_image ON image_envs (image_id);\n",
        /* 5: the sandbox's user namespace range (its first host uid; 0 =
         * none) */
        "ALTER TABLE sandboxes ADD COLUMN uid_base INTEGER NOT NULL DEFAULT 0;\n",
};

int store_schema_version_latest(void) {
        return (int) ELEMENTSOF(migrations);
}

int64_t store_now_ns(void) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        return (int64_t) ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

/* The statement cache (store_stmt_prepare): every connection's, under one
 * lock (the store is used from the loop and from workers). */
#define STMT_CACHE 96

static struct stmt_slot {
        sqlite3 *db;
        sqlite3_stmt *st;
        bool busy;
} stmt_cache[STMT_CACHE];
static pthread_mutex_t stmt_lock = PTHREAD_MUTEX_INITIALIZER;

int store_stmt_prepare(struct store *s, const char *sql, sqlite3_stmt **ret, struct wr_err *e) {
        pthread_mutex_lock(&stmt_lock);
        struct stmt_slot *free_slot = NULL;
        for (size_t i = 0; i < STMT_CACHE; i++) {
                struct stmt_slot *c = &stmt_cache[i];
                if (!c->st) {
                        if (!free_slot)
                                free_slot = c;
                        continue;
                }
                if (c->db == s->db && !c->busy && strcmp(sqlite3_sql(c->st), sql) == 0) {
                        c->busy = true;
                        *ret = c->st;
                        pthread_mutex_unlock(&stmt_lock);
                        return 0;
                }
        }
        int rc = sqlite3_prepare_v3(s->db, sql, -1, free_slot ? SQLITE_PREPARE_PERSISTENT : 0, ret,
                                    NULL);
        if (rc != SQLITE_OK) {
                pthread_mutex_unlock(&stmt_lock);
                *ret = NULL;
                return err_set(e, -EIO, "prepare statement: %s", sqlite3_errmsg(s->db));
        }
        if (free_slot)
                *free_slot = (struct stmt_slot){.db = s->db, .st = *ret, .busy = true};
        pthread_mutex_unlock(&stmt_lock);
        return 0;
}

void store_stmt_release(sqlite3_stmt *st) {
        pthread_mutex_lock(&stmt_lock);
        for (size_t i = 0; i < STMT_CACHE; i++)
                if (stmt_cache[i].st == st) {
                        sqlite3_reset(st);
                        sqlite3_clear_bindings(st);
                        stmt_cache[i].busy = false;
                        pthread_mutex_unlock(&stmt_lock);
                        return;
                }
        pthread_mutex_unlock(&stmt_lock);
        sqlite3_finalize(st);
}

/* Finalize db's cached statements (before it closes). */
static void stmt_cache_drop(sqlite3 *db) {
        pthread_mutex_lock(&stmt_lock);
        for (size_t i = 0; i < STMT_CACHE; i++)
                if (stmt_cache[i].st && stmt_cache[i].db == db) {
                        sqlite3_finalize(stmt_cache[i].st);
                        stmt_cache[i] = (struct stmt_slot){0};
                }
        pthread_mutex_unlock(&stmt_lock);
}

int store_rows_collect(struct store *s, sqlite3_stmt *st, size_t elem_size,
                       int (*read)(struct store *s, sqlite3_stmt *st, void *item, void *ctx,
                                   struct wr_err *e),
                       void (*clear)(void *item), void *ctx, const char *what, void **ret,
                       size_t *n_ret, struct wr_err *e) {
        uint8_t *list = NULL;
        size_t n = 0;
        int r = 0;
        for (;;) {
                int rc = sqlite3_step(st);
                if (rc == SQLITE_DONE)
                        break;
                if (rc != SQLITE_ROW) {
                        r = store_sqlite_error(s, rc, what, e);
                        break;
                }
                uint8_t *l = reallocarray(list, n + 1, elem_size);
                if (!l) {
                        r = err_set(e, -ENOMEM, "%s: out of memory", what);
                        break;
                }
                list = l;
                void *item = list + n * elem_size;
                memset(item, 0, elem_size);
                n++;
                r = read(s, st, item, ctx, e);
                if (r < 0)
                        break;
        }
        if (r < 0) {
                for (size_t i = 0; i < n; i++)
                        clear(list + i * elem_size);
                free(list);
                return r;
        }
        *ret = list;
        *n_ret = n;
        return (int) MIN(n, (size_t) INT32_MAX);
}

int store_sqlite_error(struct store *s, int rc, const char *what, struct wr_err *e) {
        int ext = sqlite3_extended_errcode(s->db);
        int code;
        switch (ext) {
        case SQLITE_CONSTRAINT_UNIQUE:
        case SQLITE_CONSTRAINT_PRIMARYKEY:
                code = -EEXIST;
                break;
        case SQLITE_CONSTRAINT_FOREIGNKEY:
                code = -ENOENT;
                break;
        default:
                if ((rc & 0xff) == SQLITE_BUSY || (rc & 0xff) == SQLITE_LOCKED)
                        code = -EBUSY;
                else if ((rc & 0xff) == SQLITE_NOMEM)
                        code = -ENOMEM;
                else
                        code = -EIO;
        }
        if (code == -EIO && ext != (rc & 0xff))
                /* which I/O error (IOERR_* and the like): the message alone
                 * says "disk I/O error" for all of them */
                return err_set(e, code, "%s: %s (SQLite code %d)", what, sqlite3_errmsg(s->db),
                               ext);
        return err_set(e, code, "%s: %s", what, sqlite3_errmsg(s->db));
}

int store_bind_text(sqlite3_stmt *st, int idx, const char *v) {
        return sqlite3_bind_text(st, idx, v ? v : "", -1, SQLITE_TRANSIENT) == SQLITE_OK ? 0
                                                                                         : -ENOMEM;
}

int store_bind_text_nullable(sqlite3_stmt *st, int idx, const char *v) {
        int rc = v ? sqlite3_bind_text(st, idx, v, -1, SQLITE_TRANSIENT)
                   : sqlite3_bind_null(st, idx);
        return rc == SQLITE_OK ? 0 : -ENOMEM;
}

char *store_column_strdup(sqlite3_stmt *st, int col) {
        const unsigned char *t = sqlite3_column_text(st, col);
        return strdup(t ? (const char *) t : "");
}

int store_stmt_done(struct store *s, sqlite3_stmt *st, bool want_change, const char *what,
                    struct wr_err *e) {
        int rc = sqlite3_step(st);
        if (rc != SQLITE_DONE)
                return store_sqlite_error(s, rc, what, e);
        if (want_change && sqlite3_changes(s->db) == 0)
                return -ENOENT;
        return 0;
}

/* Prepare sql and bind n_args text args to ?1... */
static int prepare_bound(struct store *s, const char *sql, size_t n_args, const char *const *args,
                         const char *what, sqlite3_stmt **ret, struct wr_err *e) {
        int r = store_stmt_prepare(s, sql, ret, e);
        if (r < 0)
                return r;
        for (size_t i = 0; i < n_args; i++)
                if (store_bind_text(*ret, (int) i + 1, args[i]) < 0)
                        return err_set(e, -ENOMEM, "%s: out of memory", what);
        return 0;
}

int store_row_load(struct store *s, const char *sql, size_t n_args, const char *const *args,
                   const char *what, sqlite3_stmt **ret, struct wr_err *e) {
        int r = prepare_bound(s, sql, n_args, args, what, ret, e);
        if (r < 0)
                return r;
        int rc = sqlite3_step(*ret);
        if (rc == SQLITE_ROW)
                return 1;
        if (rc == SQLITE_DONE)
                return 0;
        return store_sqlite_error(s, rc, what, e);
}

int store_stmt_run(struct store *s, const char *sql, size_t n_args, const char *const *args,
                   bool want_change, const char *what, struct wr_err *e) {
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        int r = prepare_bound(s, sql, n_args, args, what, &st, e);
        if (r < 0)
                return r;
        return store_stmt_done(s, st, want_change, what, e);
}

void store_list_free(void *list, size_t n, size_t elem_size, void (*clear)(void *item)) {
        for (size_t i = 0; list && i < n; i++)
                clear((uint8_t *) list + i * elem_size);
        free(list);
}

static int exec_sql(struct store *s, const char *sql, const char *what, struct wr_err *e) {
        char *msg = NULL;
        int rc = sqlite3_exec(s->db, sql, NULL, NULL, &msg);
        if (rc != SQLITE_OK) {
                int r = store_sqlite_error(s, rc, what, NULL);
                err_set(e, r, "%s: %s", what, msg ? msg : sqlite3_errstr(rc));
                sqlite3_free(msg);
                return r;
        }
        return 0;
}

int store_savepoint(struct store *s, struct wr_err *e) {
        return exec_sql(s, "SAVEPOINT store_op", "begin savepoint", e);
}

int store_savepoint_release(struct store *s, struct wr_err *e) {
        return exec_sql(s, "RELEASE store_op", "commit", e);
}

void store_savepoint_rollback(struct store *s) {
        sqlite3_exec(s->db, "ROLLBACK TO store_op; RELEASE store_op", NULL, NULL, NULL);
}

int store_savepoint_end(struct store *s, int r, struct wr_err *e) {
        if (r >= 0)
                r = store_savepoint_release(s, e);
        if (r < 0)
                store_savepoint_rollback(s);
        return r < 0 ? r : 0;
}

int store_tx_begin(struct store *s, struct wr_err *e) {
        if (s->in_tx)
                return err_set(e, -EBUSY, "begin transaction: already in a transaction");
        int r = exec_sql(s, "BEGIN IMMEDIATE", "begin transaction", e);
        if (r == 0)
                s->in_tx = true;
        return r;
}

int store_tx_commit(struct store *s, struct wr_err *e) {
        int r = exec_sql(s, "COMMIT", "commit transaction", e);
        if (r == 0)
                s->in_tx = false;
        return r;
}

void store_tx_rollback(struct store *s) {
        if (!s->in_tx)
                return;
        sqlite3_exec(s->db, "ROLLBACK", NULL, NULL, NULL);
        s->in_tx = false;
}

struct sqlite3 *store_sqlite(struct store *s) {
        return s->db;
}

int store_set_secret_key_path(struct store *s, const char *key_path) {
        char *p = strdup(key_path);
        if (!p)
                return -ENOMEM;
        free(s->key_path);
        s->key_path = p;
        s->key_loaded = false;
        return 0;
}

/* Read the current version (0 for an empty database). */
static int read_version(struct store *s, int *ret, struct wr_err *e) {
        int r = exec_sql(s,
                         "CREATE TABLE IF NOT EXISTS schema_version (\n"
                         "  version INTEGER PRIMARY KEY,\n"
                         "  applied INTEGER NOT NULL\n"
                         ")",
                         "create schema_version", e);
        if (r < 0)
                return r;
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        r = store_row_load(s, "SELECT COALESCE(MAX(version), 0) FROM schema_version", STORE_NO_ARGS,
                           "read schema version", &st, e);
        if (r == 0)
                r = err_set(e, -EIO, "read schema version: no row");
        if (r < 0)
                return r;
        *ret = sqlite3_column_int(st, 0);
        return 0;
}

int store_schema_version(struct store *s) {
        int v = 0;
        int r = read_version(s, &v, NULL);
        return r < 0 ? r : v;
}

static int migrate(struct store *s, struct wr_err *e) {
        int version = 0;
        int r = exec_sql(s, "BEGIN IMMEDIATE", "begin migration", e);
        if (r < 0)
                return r;
        r = read_version(s, &version, e);
        if (r < 0)
                goto fail;
        if (version > store_schema_version_latest()) {
                r = err_set(e, -EPROTO,
                            "database %s has schema version %d but this warrend knows only up "
                            "to %d: run a newer warrend (or restore a backup of the state dir)",
                            s->path, version, store_schema_version_latest());
                goto fail;
        }
        r = exec_sql(s, "COMMIT", "commit", e);
        if (r < 0)
                goto fail;

        for (int v = version; v < store_schema_version_latest(); v++) {
                r = exec_sql(s, "BEGIN IMMEDIATE", "begin migration", e);
                if (r < 0)
                        return r;
                /* Re-check under the write lock: another process may have
                 * migrated meanwhile. */
                int now = 0;
                r = read_version(s, &now, e);
                if (r < 0)
                        goto fail;
                if (now > v) {
                        sqlite3_exec(s->db, "ROLLBACK", NULL, NULL, NULL);
                        v = now - 1;
                        if (now > store_schema_version_latest())
                                return err_set(e, -EPROTO,
                                               "database %s was migrated to schema version %d "
                                               "by a newer warrend",
                                               s->path, now);
                        continue;
                }
                r = exec_sql(s, migrations[v], "apply migration", e);
                if (r < 0) {
                        err_prefix(e, r, "schema version %d", v + 1);
                        goto fail;
                }
                _cleanup_stmt_ sqlite3_stmt *st = NULL;
                r = store_stmt_prepare(
                        s, "INSERT INTO schema_version (version, applied) VALUES (?, ?)", &st, e);
                if (r < 0)
                        goto fail;
                sqlite3_bind_int(st, 1, v + 1);
                sqlite3_bind_int64(st, 2, store_now_ns());
                r = store_stmt_done(s, st, false, "record migration", e);
                if (r < 0)
                        goto fail;
                r = exec_sql(s, "COMMIT", "commit migration", e);
                if (r < 0)
                        goto fail;
                log_debug("store: %s migrated to schema version %d", s->path, v + 1);
        }
        return 0;
fail:
        sqlite3_exec(s->db, "ROLLBACK", NULL, NULL, NULL);
        return r;
}

/* Create the file with mode 0600 so the WAL and shm files (which copy the
 * database's mode) are private too. */
static int create_private(const char *path, struct wr_err *e) {
        int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
        if (fd < 0)
                return err_set(e, -errno, "open %s: %m", path);
        fd = safe_close(fd);
        return 0;
}

static int default_key_path(const char *db_path, char **ret) {
        _cleanup_free_ char *copy = strdup(db_path);
        if (!copy)
                return -ENOMEM;
        const char *dir = dirname(copy);
        if (asprintf(ret, "%s/keys/secret.key", dir) < 0)
                return -ENOMEM;
        return 0;
}

int store_open(const char *path, struct store **ret, struct wr_err *e) {
        struct store *s = calloc(1, sizeof(*s));
        if (!s)
                return err_set(e, -ENOMEM, "open store: out of memory");
        int r;
        s->path = strdup(path);
        if (!s->path || default_key_path(path, &s->key_path) < 0) {
                r = err_set(e, -ENOMEM, "open store: out of memory");
                goto fail;
        }
        r = create_private(path, e);
        if (r < 0)
                goto fail;
        int rc = sqlite3_open_v2(path, &s->db,
                                 SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_FULLMUTEX,
                                 NULL);
        if (rc != SQLITE_OK) {
                r = err_set(e, -EIO, "open %s: %s", path,
                            s->db ? sqlite3_errmsg(s->db) : sqlite3_errstr(rc));
                goto fail;
        }
        sqlite3_extended_result_codes(s->db, 1);
        sqlite3_busy_timeout(s->db, 5000);

        /* temp_store MEMORY: statement journals, sorters and temp tables
         * stay in memory. Kept on disk, a statement journal spills to a
         * file in /var/tmp or /tmp once a statement inside a transaction
         * has changed over 64 KiB of pages; a dropped warrend (--user)
         * sees those read-only (docs/privsep.md) and SQLite then fails the
         * statement with "disk I/O error" (IOERR_GETTEMPPATH): seen once
         * as "commit image: insert image layer: disk I/O error" in the
         * dropped e2e suite. Our transactions are small. */
        r = exec_sql(s,
                     "PRAGMA foreign_keys = ON; PRAGMA synchronous = NORMAL; "
                     "PRAGMA temp_store = MEMORY",
                     "set pragmas", e);
        if (r < 0)
                goto fail;
        {
                _cleanup_stmt_ sqlite3_stmt *st = NULL;
                r = store_row_load(s, "PRAGMA journal_mode = WAL", STORE_NO_ARGS,
                                   "set journal mode", &st, NULL);
                const unsigned char *mode = r > 0 ? sqlite3_column_text(st, 0) : NULL;
                if (!mode || strcmp((const char *) mode, "wal") != 0) {
                        r = err_set(e, -EIO, "open %s: cannot switch to WAL mode (%s)", path,
                                    mode ? (const char *) mode : sqlite3_errmsg(s->db));
                        goto fail;
                }
        }
        r = migrate(s, e);
        if (r < 0) {
                if (r != -EPROTO)
                        err_prefix(e, r, "migrate %s", path);
                goto fail;
        }
        *ret = s;
        return 0;
fail:
        store_close(s);
        return r;
}

void store_close(struct store *s) {
        if (!s)
                return;
        if (s->db) {
                store_tx_rollback(s);
                struct wr_err e = {0};
                if (store_audit_flush(s, &e) < 0)
                        log_warn("store: %zu audit records not written: %s", s->audit_n, e.msg);
                for (size_t i = 0; i < s->audit_n; i++)
                        store_audit_clear(&s->audit_q[i]);
                free(s->audit_q);
                stmt_cache_drop(s->db);
                sqlite3_close_v2(s->db);
        }
        OPENSSL_cleanse(s->key, sizeof(s->key));
        free(s->path);
        free(s->key_path);
        free(s);
}
