/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* Internals shared by the store's source files. */

#include <sqlite3.h>
#include <stdbool.h>

#include "store/store.h"

struct store {
        sqlite3 *db;
        char *path;
        char *key_path; /* secrets key file */
        unsigned char key[32];
        bool key_loaded;
        bool in_tx; /* inside store_tx_begin */
};

static inline void sqlite3_finalizep(sqlite3_stmt **st) {
        if (*st)
                sqlite3_finalize(*st);
}
#define _cleanup_stmt_ _cleanup_(sqlite3_finalizep)

/* Prepare sql on s->db into *ret. -EIO with the SQLite message in e. */
int store_stmt_prepare(struct store *s, const char *sql, sqlite3_stmt **ret, struct wr_err *e);

/* Map a failed sqlite3_step/exec result to a negative errno and fill e:
 * constraint UNIQUE/PRIMARYKEY → -EEXIST, FOREIGNKEY → -ENOENT, BUSY →
 * -EBUSY, anything else -EIO. what names the operation. */
int store_sqlite_error(struct store *s, int rc, const char *what, struct wr_err *e);

/* Bind a C string (NULL binds ""), or NULL binds SQL NULL for _nullable. */
int store_bind_text(sqlite3_stmt *st, int idx, const char *v);
int store_bind_text_nullable(sqlite3_stmt *st, int idx, const char *v);

/* strdup of a column's text ("" for NULL). NULL only when out of memory. */
char *store_column_strdup(sqlite3_stmt *st, int col);

/* Step st to its end, reading every row into a growing array of
 * elem_size items: each item is zeroed, then filled by read(s, st, item,
 * ctx, e). On success *ret (malloc'd, NULL when empty) and *n_ret, and the
 * count (capped at INT32_MAX) is returned; on failure every item started
 * is passed to clear, the array freed, and the error returned (what names
 * the operation). */
int store_rows_collect(struct store *s, sqlite3_stmt *st, size_t elem_size,
                       int (*read)(struct store *s, sqlite3_stmt *st, void *item, void *ctx,
                                   struct wr_err *e),
                       void (*clear)(void *item), void *ctx, const char *what, void **ret,
                       size_t *n_ret, struct wr_err *e);

/* Run a statement that returns no rows; with want_change, 0 changed rows
 * is -ENOENT. */
int store_stmt_done(struct store *s, sqlite3_stmt *st, bool want_change, const char *what,
                    struct wr_err *e);

/* Savepoints (nestable inside store_tx_begin). */
int store_savepoint(struct store *s, struct wr_err *e);
int store_savepoint_release(struct store *s, struct wr_err *e);
void store_savepoint_rollback(struct store *s);

/* AES-256-GCM of the secret key: make sure the key is loaded (creating the
 * key file on first use). */
int store_secret_key_ensure(struct store *s, struct wr_err *e);

/* Seal plain with the secrets key (AES-256-GCM, random 12-byte nonce into
 * nonce, label and name bound as associated data). *ret (malloc'd) holds
 * ciphertext || tag. Returns 0 or negative errno. */
int store_blob_seal(struct store *s, const char *label, const char *name, const void *plain,
                    size_t len, unsigned char nonce[12], unsigned char **ret, size_t *ret_len,
                    struct wr_err *e);

/* Open what store_blob_seal made (same label and name). *ret is malloc'd
 * with a NUL after *ret_len bytes. -EBADMSG when it does not decrypt. */
int store_blob_open(struct store *s, const char *label, const char *name, const void *sealed,
                    size_t len, const void *nonce, size_t nonce_len, unsigned char **ret,
                    size_t *ret_len, struct wr_err *e);
