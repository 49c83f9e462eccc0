/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* Internals shared by the store's source files. */

#include <sqlite3.h>
#include <stdbool.h>
#include <stddef.h>

#include "basic/macro.h"

#include "signer/datakey.h"
#include "store/store.h"

struct store {
        sqlite3 *db;
        char *path;
        char *key_path; /* secrets key file */
        unsigned char key[32];
        bool key_loaded;
        /* a keeper holds the secrets key (store_set_keeper): the store
         * never loads it again */
        struct store_keeper keeper;
        bool has_keeper;
        bool in_tx; /* inside store_tx_begin */
        /* audit records not written yet (store_audit_flush) */
        struct store_audit *audit_q;
        size_t audit_n;
};

/* Hand a statement from store_stmt_prepare back: a cached one is reset
 * for its next use, any other finalized. */
void store_stmt_release(sqlite3_stmt *st);

static inline void sqlite3_finalizep(sqlite3_stmt **st) {
        if (*st)
                store_stmt_release(*st);
}
#define _cleanup_stmt_ _cleanup_(sqlite3_finalizep)

/* Prepare sql on s->db into *ret. -EIO with the SQLite message in e.
 * Statements are cached per connection (keyed by their text; parsing one
 * cost ~50 us here, and a `warren run` made ~20): a cached statement is
 * lent to one caller at a time; release it with store_stmt_release (the
 * _cleanup_stmt_ attribute does). */
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

/* Text arguments for store_row_load and store_stmt_run, bound to ?1, ?2,
 * ... in order: STORE_ARGS(env, name) expands to the count and the array.
 * A NULL argument binds "". */
#define STORE_ARGS(...)                                                                            \
        ELEMENTSOF(((const char *const[]){__VA_ARGS__})), ((const char *const[]){__VA_ARGS__})
#define STORE_NO_ARGS 0, NULL

/* The "load one row" pattern: prepare sql, bind the n_args text args, step
 * once. Returns 1 with *ret positioned on the row (the caller reads its
 * columns; *ret is the caller's, to hold in _cleanup_stmt_ even on
 * failure), 0 when there is no row (the caller says what was not found),
 * or a negative errno with e filled (what names the operation). */
int store_row_load(struct store *s, const char *sql, size_t n_args, const char *const *args,
                   const char *what, sqlite3_stmt **ret, struct wr_err *e);

/* Prepare sql, bind the n_args text args and run it to its end (a
 * statement that returns no rows). With want_change, 0 changed rows is
 * -ENOENT (e untouched: the caller says what was not found). Otherwise 0
 * or a negative errno as store_stmt_done. */
int store_stmt_run(struct store *s, const char *sql, size_t n_args, const char *const *args,
                   bool want_change, const char *what, struct wr_err *e);

/* Free an array of n items of elem_size bytes, each first passed to clear.
 * NULL ok. For the store_*_list_free functions. */
void store_list_free(void *list, size_t n, size_t elem_size, void (*clear)(void *item));

/* Define `static void item_clear(void *)` calling clear(type *) (the shape
 * store_rows_collect and store_list_free take) and the public
 * `void list_free(type *list, size_t n)` on it. */
#define STORE_DEFINE_LIST_FREE(type, clear, item_clear, list_free)                                 \
        static void item_clear(void *item) {                                                       \
                clear(item);                                                                       \
        }                                                                                          \
        void list_free(type *list, size_t n) {                                                     \
                store_list_free(list, n, sizeof(*list), item_clear);                               \
        }

/* Run a statement that returns no rows; with want_change, 0 changed rows
 * is -ENOENT. */
int store_stmt_done(struct store *s, sqlite3_stmt *st, bool want_change, const char *what,
                    struct wr_err *e);

/* Savepoints (nestable inside store_tx_begin). */
int store_savepoint(struct store *s, struct wr_err *e);
int store_savepoint_release(struct store *s, struct wr_err *e);
void store_savepoint_rollback(struct store *s);
/* End the savepoint of an operation whose result is r: release it when r
 * >= 0 (and return 0, or the release's error after rolling back), roll it
 * back and return r otherwise. */
int store_savepoint_end(struct store *s, int r, struct wr_err *e);

/* AES-256-GCM of the secret key: make sure the key is loaded (creating the
 * key file on first use). */
int store_secret_key_ensure(struct store *s, struct wr_err *e);

/* The nonce column of a value sealed with a data key: the value's 12-byte
 * nonce, then the data key's wrapping (signer/datakey.h). A 12-byte nonce
 * column is a value sealed directly under the secrets key (before keys had
 * a keeper; store_secrets_rewrap turns those into the first kind). */
#define STORE_SEAL_NONCE_LEN (12 + SIGNER_WRAPPED_LEN)

/* The associated-data label of the sandboxes table's sealed process
 * defaults (store-sandbox.c). */
#define PROCESS_LABEL "warren-sandbox-process-v1"

/* Seal plain under a fresh data key (AES-256-GCM, label and name bound as
 * associated data of both the value and the key's wrapping). nonce gets
 * STORE_SEAL_NONCE_LEN bytes (store them with the value); *ret (malloc'd)
 * holds ciphertext || tag. Returns 0 or negative errno. */
int store_blob_seal(struct store *s, const char *label, const char *name, const void *plain,
                    size_t len, unsigned char nonce[STORE_SEAL_NONCE_LEN], unsigned char **ret,
                    size_t *ret_len, struct wr_err *e);

/* Open what store_blob_seal made (same label and name). *ret is malloc'd
 * with a NUL after *ret_len bytes. -EBADMSG when it does not decrypt. */
int store_blob_open(struct store *s, const char *label, const char *name, const void *sealed,
                    size_t len, const void *nonce, size_t nonce_len, unsigned char **ret,
                    size_t *ret_len, struct wr_err *e);
