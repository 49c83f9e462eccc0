/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* The store: warrend's durable control state in one SQLite 3 database
 * (state_dir/warren.db) in WAL mode, with foreign keys on and a busy
 * timeout. The schema is versioned: a `schema_version` table records every
 * migration applied; migrations are an ordered array of SQL scripts, each
 * applied in its own transaction. A database newer than this binary is
 * refused.
 *
 * Tables: environments (+ quotas), tokens, audit, sandboxes (+ sandbox_tags), volumes,
 * secrets (+ secret_keys; values AES-256-GCM encrypted at rest), images,
 * image_names, image_layers, layers.
 *
 * Conventions: every function returns >= 0 on success or a negative errno:
 * -ENOENT when the row does not exist, -EEXIST on a uniqueness conflict,
 * -EINVAL on a bad argument, -EIO on a database error (message in e).
 * Every query is a prepared statement with bound parameters. Library code:
 * never logs above debug, never exits.
 *
 * Threads: one connection per struct store. Use a store from one thread at
 * a time (the daemon uses it from the loop thread). Timestamps are Unix
 * nanoseconds (0 = unset), like warren.v1.Timestamp. */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "basic/err.h"

struct store;
struct sqlite3;

/* The environment every caller belongs to until identity/tokens land. */
#define STORE_ENV_DEFAULT "default"

/* Open (creating when missing, mode 0600) the database at path and bring
 * its schema up to date. Secrets use the key file <dir of path>/keys/
 * secret.key unless store_set_secret_key_path is called; the key is created
 * on first use. Errors: -EPROTO when the database's schema is newer than
 * this binary knows (e->msg says so), -EIO for SQLite errors, -ENOMEM.
 * On success *ret is owned by the caller (store_close). */
int store_open(const char *path, struct store **ret, struct wr_err *e);

/* Close the database and free the store. NULL is fine. */
void store_close(struct store *s);

/* The schema version the database is at, and the newest this binary knows. */
int store_schema_version(struct store *s);
int store_schema_version_latest(void);

/* Use key_path for the secrets key instead of the default. Copies the
 * string. Returns 0 or -ENOMEM. */
int store_set_secret_key_path(struct store *s, const char *key_path);

/* Who keeps the secrets key (docs/signer.md "The secrets key"). Every
 * sealed value has a data key of its own, wrapped under the secrets key
 * (signer/datakey.h). Without a keeper the store reads the key file itself
 * (tools, tests); warrend hands the key to warren-signer and installs a
 * keeper that asks it, so the store never holds the key. Both functions
 * behave as signer_datakey_new / signer_datakey_open (label: 32 bytes);
 * the caller wipes dek. */
struct store_keeper {
        int (*datakey_new)(void *ctx, const void *label, size_t label_len, uint8_t *dek,
                           uint8_t *wrapped, struct wr_err *e);
        int (*datakey_open)(void *ctx, const void *label, size_t label_len, const uint8_t *wrapped,
                            uint8_t *dek, struct wr_err *e);
        void *ctx;
};

/* Install k (copied; ctx must outlive the store): from now on data keys
 * come from it, and the store forgets the secrets key if it had read it.
 * Values sealed directly under the key (store_secrets_rewrap) no longer
 * open: rewrap them first. */
void store_set_keeper(struct store *s, const struct store_keeper *k);

/* Make the key file when missing, and hand its 32 bytes over in a sealed
 * memfd (read position 0, close-on-exec) for a keeper process; the bytes
 * pass through no buffer that is not wiped, and the store does not keep
 * them. *ret_fd is the caller's. */
int store_secret_key_memfd(struct store *s, int *ret_fd, struct wr_err *e);

/* Rewrap every value sealed directly under the secrets key (a 12-byte
 * nonce: written by warrend before keys had a keeper) with a data key of
 * its own, in one transaction. Reads the key file; call it before
 * store_set_keeper. *n_ret: how many values were rewrapped. */
int store_secrets_rewrap(struct store *s, size_t *n_ret, struct wr_err *e);

/* Raw access for other modules that own their own tables (image/ uses
 * images, image_names, image_layers and layers). The connection stays owned
 * by the store; do not close it. */
struct sqlite3 *store_sqlite(struct store *s);

/* Transactions (BEGIN IMMEDIATE / COMMIT / ROLLBACK) for callers grouping
 * several store calls. Not nestable. Return 0 or -EIO / -EBUSY. */
int store_tx_begin(struct store *s, struct wr_err *e);
int store_tx_commit(struct store *s, struct wr_err *e);
void store_tx_rollback(struct store *s);

/* The current wall-clock time in Unix nanoseconds. */
int64_t store_now_ns(void);

/* --- sandboxes --- */

/* Same values as warren.v1.SandboxStatus. A sandbox's name is reserved in
 * its environment while it is PENDING, RUNNING or TERMINATING. */
enum store_sandbox_status {
        STORE_SANDBOX_PENDING = 1,
        STORE_SANDBOX_RUNNING = 2,
        STORE_SANDBOX_TERMINATING = 3,
        STORE_SANDBOX_TERMINATED = 4,
        STORE_SANDBOX_FAILED = 5,
};

struct store_tag {
        char *key;
        char *value;
};

/* One sandbox row. Every pointer is heap-owned by the struct (free with
 * store_sandbox_clear); strings are never NULL after a load except name
 * (NULL = unnamed) and spec (NULL when none was stored). */
struct store_sandbox {
        char *id;          /* "sb-" + 16 hex digits */
        char *environment; /* environments.id */
        char *name;        /* NULL = unnamed */
        enum store_sandbox_status status;
        char *status_message;
        char *image_id;
        char *image_ref;
        uint8_t *spec; /* serialized warren.v1.CreateSandboxRequest */
        size_t spec_len;
        struct store_tag *tags; /* sorted by key */
        size_t n_tags;
        int64_t created_ns;
        int64_t terminated_ns;
        int64_t expires_ns;
        int64_t init_pid; /* host pid of the sandbox's init; 0 = none */
        char *cgroup_path;
        uint64_t init_start; /* init's start time (ticks since boot); 0 = unknown */
        /* first host uid/gid of its user namespace range (0 = none): taken
         * until its teardown finished (recovery re-learns it) */
        uint32_t uid_base;
};

/* Free what sb holds and zero it. NULL is fine. */
void store_sandbox_clear(struct store_sandbox *sb);
/* Free an array returned by store_sandbox_list (each item cleared). NULL
 * ok. */
void store_sandbox_list_free(struct store_sandbox *list, size_t n);

/* Insert sb (id, environment, status and created_ns required; NULL strings
 * stored as empty) with its tags, in one transaction. -EEXIST when the id
 * exists or the name is reserved by another live sandbox of the
 * environment; -ENOENT when the environment does not exist; -EINVAL when a
 * required field is missing. */
int store_sandbox_insert(struct store *s, const struct store_sandbox *sb, struct wr_err *e);

/* Set status and status_message (NULL = ""). Entering TERMINATED or FAILED
 * stamps terminated_ns (once). -ENOENT when id is unknown, -EEXIST when
 * moving back to a live state while another live sandbox has the name. */
int store_sandbox_update_status(struct store *s, const char *id, enum store_sandbox_status status,
                                const char *message, struct wr_err *e);

/* Record the runtime facts of a started sandbox. -ENOENT when unknown. */
int store_sandbox_update_runtime(struct store *s, const char *id, int64_t init_pid,
                                 const char *cgroup_path, struct wr_err *e);

/* Record a started sandbox in one statement: init's pid and start time,
 * its cgroup, its resolved process defaults (process/process_len, any
 * bytes, NULL = none; sealed with AES-256-GCM under the secrets key since
 * they may hold secret values) and, when status > 0, the new status.
 * -ENOENT when unknown. */
int store_sandbox_set_started(struct store *s, const char *id, int64_t init_pid,
                              uint64_t init_start, const char *cgroup_path, const void *process,
                              size_t process_len, int status, struct wr_err *e);

/* Decrypt the process defaults recorded by store_sandbox_set_started into
 * *ret (malloc'd, NUL after *len bytes; caller wipes and frees). -ENOENT
 * unknown sandbox, -ENODATA none recorded, -EBADMSG does not decrypt. */
int store_sandbox_get_process(struct store *s, const char *id, unsigned char **ret, size_t *len,
                              struct wr_err *e);

/* Seal plain (bytes that may hold secret values, kept outside the
 * database: a sandbox's egress rules) under a data key of its own wrapped
 * by the secrets key's keeper: AES-256-GCM, label and name bound as
 * associated data. *ret (malloc'd) = 12-byte nonce || the data key's
 * 60-byte wrapping || ciphertext || tag. Returns 0 or negative errno. */
int store_seal(struct store *s, const char *label, const char *name, const void *plain, size_t len,
               unsigned char **ret, size_t *ret_len, struct wr_err *e);

/* Open what store_seal made (same label and name) into *ret (malloc'd,
 * NUL after *ret_len bytes; the caller wipes and frees). -EBADMSG when it
 * is malformed or does not decrypt. */
int store_unseal(struct store *s, const char *label, const char *name, const void *sealed,
                 size_t len, unsigned char **ret, size_t *ret_len, struct wr_err *e);

/* Load one sandbox by id into *ret (which the caller clears). -ENOENT when
 * unknown. */
int store_sandbox_load(struct store *s, const char *id, struct store_sandbox *ret,
                       struct wr_err *e);

/* Load the sandbox called name in env: the live one when there is one,
 * else the most recently created. -ENOENT when none. */
int store_sandbox_load_by_name(struct store *s, const char *env, const char *name,
                               struct store_sandbox *ret, struct wr_err *e);

struct store_sandbox_filter {
        const char *environment; /* required unless all_environments */
        bool all_environments;   /* every environment's (daemon-internal: recovery, quotas) */
        const int *statuses;     /* any of these; n_statuses == 0 = all */
        size_t n_statuses;
        const char *name;             /* NULL/"" = any */
        const struct store_tag *tags; /* every one must match */
        size_t n_tags;
        /* When > 0: leave out TERMINATED and FAILED sandboxes that ended
         * before this time (the listing's retention period). */
        int64_t hide_ended_before_ns;
        size_t offset; /* skip this many rows */
        size_t limit;  /* 0 = no limit */
};

/* Sandboxes matching f, newest first. On success *ret (array of *n_ret,
 * possibly NULL when empty) is owned by the caller: store_sandbox_list_free.
 * Returns the count. */
int store_sandbox_list(struct store *s, const struct store_sandbox_filter *f,
                       struct store_sandbox **ret, size_t *n_ret, struct wr_err *e);

/* Number of sandboxes (all environments) by status: counts[status] for
 * status 1..5 (counts[0] stays 0). Returns 0 or negative errno. */
int store_sandbox_count_by_status(struct store *s, int64_t counts[6], struct wr_err *e);

/* Delete a sandbox row and its tags. -ENOENT when unknown. */
int store_sandbox_delete(struct store *s, const char *id, struct wr_err *e);

/* --- volumes --- */

struct store_volume {
        char *environment;
        char *name;
        int64_t created_ns;
};

/* Free what v holds and zero it. NULL is fine. */
void store_volume_clear(struct store_volume *v);
/* Free an array returned by store_volume_list (each item cleared). NULL ok. */
void store_volume_list_free(struct store_volume *list, size_t n);

/* Record a new volume. -EEXIST when the name exists in env, -ENOENT when
 * env does not exist. */
int store_volume_insert(struct store *s, const char *env, const char *name, struct wr_err *e);
/* Load one volume into *ret (caller clears). -ENOENT when unknown. */
int store_volume_load(struct store *s, const char *env, const char *name, struct store_volume *ret,
                      struct wr_err *e);
/* Volumes of env sorted by name; *ret owned by the caller. Returns count. */
int store_volume_list(struct store *s, const char *env, struct store_volume **ret, size_t *n_ret,
                      struct wr_err *e);
/* Forget a volume. -ENOENT when unknown. */
int store_volume_delete(struct store *s, const char *env, const char *name, struct wr_err *e);

/* --- secrets --- */

/* One value of a secret. A plain secret has exactly one entry whose key is
 * ""; an integration secret has one entry per (non-empty, unique) key. */
struct store_secret_entry {
        char *key;
        uint8_t *value; /* NULL in listings */
        size_t len;
};

struct store_secret {
        char *name;
        struct store_secret_entry *entries; /* sorted by key */
        size_t n_entries;
        int64_t updated_ns;
        int64_t version; /* 1 when created, +1 on every replace */
};

/* Wipe every value (explicit_bzero), then free what sec holds and zero it.
 * NULL and half-built structs (entries NULL) are fine. */
void store_secret_clear(struct store_secret *sec);
/* Free an array returned by store_secret_list (each item cleared). NULL ok. */
void store_secret_list_free(struct store_secret *list, size_t n);

/* Create or replace secret name in env with entries (n >= 1). The values
 * are encrypted with AES-256-GCM (random 96-bit nonce, env and name bound
 * as associated data) under the key file, created (0600, in a 0700 dir) on
 * first use. -EINVAL for no entries, duplicate keys or a mix of "" and
 * named keys; -ENOENT when env does not exist; -EPERM when the key file is
 * accessible by group or others; -EIO for crypto or database errors. */
int store_secret_set(struct store *s, const char *env, const char *name,
                     const struct store_secret_entry *entries, size_t n, struct wr_err *e);

/* The version of secret name (1 + the times it was replaced); -ENOENT when
 * unknown. */
int store_secret_version(struct store *s, const char *env, const char *name, int64_t *ret,
                         struct wr_err *e);

/* Load and decrypt a secret into *ret (caller clears; values are wiped by
 * store_secret_clear). -ENOENT when unknown, -EBADMSG when it does not
 * decrypt (wrong key or tampered row). */
int store_secret_get(struct store *s, const char *env, const char *name, struct store_secret *ret,
                     struct wr_err *e);

/* Names, keys and update times of env's secrets, by name; nothing is
 * decrypted. In a listing, entries hold only an integration secret's keys
 * (values NULL); a plain secret lists no entries. *ret owned by the
 * caller (store_secret_list_free). Returns the count. */
int store_secret_list(struct store *s, const char *env, struct store_secret **ret, size_t *n_ret,
                      struct wr_err *e);

/* Delete a secret. -ENOENT when unknown. */
int store_secret_delete(struct store *s, const char *env, const char *name, struct wr_err *e);

/* --- tenancy: environments, tokens, audit (store-tenant.c) --- */

/* An environment name: 1-63 of [a-z0-9], then also '-' and '_'. */
bool store_env_name_valid(const char *name);

/* Create environment env when it does not exist (0 either way). -EINVAL
 * for an invalid name. */
int store_env_ensure(struct store *s, const char *env, struct wr_err *e);

/* 1 when env exists, 0 when not, or a negative errno. */
int store_env_exists(struct store *s, const char *env, struct wr_err *e);

/* An environment's quotas; 0 = no limit. */
struct store_quota {
        int64_t max_sandboxes;    /* live sandboxes */
        double max_cpu;           /* sum of the live sandboxes' cpu limits */
        int64_t max_memory;       /* sum of their memory limits, bytes */
        int64_t max_volume_bytes; /* sum of the volumes' byte quotas */
};

/* Read env's quotas (-ENOENT when env does not exist) / set them
 * (creating env when missing). */
int store_env_quota_get(struct store *s, const char *env, struct store_quota *ret,
                        struct wr_err *e);
int store_env_quota_set(struct store *s, const char *env, const struct store_quota *q,
                        struct wr_err *e);

/* An API token. The token itself is never stored: hash is its SHA-256. */
struct store_token {
        char *id; /* "tk-" + 16 hex digits, public */
        char *environment;
        char *subject; /* a description ("token:<id>" unless given) */
        char *role;    /* "admin" or "user" */
        int64_t created_ns;
        int64_t expires_ns; /* 0 = never */
        int64_t revoked_ns; /* 0 = not revoked */
        uint8_t hash[32];   /* zero in listings */
};

void store_token_clear(struct store_token *t);
void store_token_list_free(struct store_token *list, size_t n);

/* Insert t (id, environment, role and hash required), creating its
 * environment when missing. -EEXIST when the id or hash exists. */
int store_token_insert(struct store *s, const struct store_token *t, struct wr_err *e);

/* Load token id with its hash (*ret cleared by the caller). -ENOENT. */
int store_token_load(struct store *s, const char *id, struct store_token *ret, struct wr_err *e);

/* Tokens of env (NULL = every environment), oldest first, without hashes.
 * Returns the count; *ret owned by the caller (store_token_list_free). */
int store_token_list(struct store *s, const char *env, struct store_token **ret, size_t *n_ret,
                     struct wr_err *e);

/* Mark token id revoked (0 also when it was already). -ENOENT. */
int store_token_revoke(struct store *s, const char *id, struct wr_err *e);

/* Constant-time comparison of two SHA-256 hashes. */
bool store_token_hash_equal(const uint8_t a[32], const uint8_t b[32]);

/* One audit record: a mutating call and its outcome. Never holds a
 * token or a secret value. */
struct store_audit {
        int64_t seq; /* increasing; set by the store */
        int64_t time_ns;
        char *environment;
        char *token_id; /* "" for a unix-socket root peer / an insecure TCP caller */
        char *subject;  /* "uid:0", "token:tk-..." */
        char *peer;     /* "unix" (with pid) or "IP:port" */
        char *method;   /* "/warren.v1.Sandboxes/CreateSandbox" */
        char *object;   /* the id or name the call named ("" when none) */
        int status;     /* gRPC status code */
        char *message;  /* the status message of a failed call */
};

void store_audit_clear(struct store_audit *a);
void store_audit_list_free(struct store_audit *list, size_t n);

/* Append a record (time_ns 0 = now). Records are queued (copied) and
 * written in one transaction by store_audit_flush: before every
 * store_audit_list, at store_close, once STORE_AUDIT_QUEUE are queued, and
 * by warrend every 250 ms — so a mutating call pays no SQLite transaction
 * of its own on its path, and a warrend crash loses at most that quarter
 * second of records. Errors: -ENOMEM. */
int store_audit_insert(struct store *s, const struct store_audit *a, struct wr_err *e);

#define STORE_AUDIT_QUEUE 64

/* Write the queued audit records (one transaction). A failure keeps them
 * queued (up to 4 x STORE_AUDIT_QUEUE; beyond, the oldest are dropped with
 * a warning). */
int store_audit_flush(struct store *s, struct wr_err *e);

/* Records of env (NULL or "" = every environment) with seq < before_seq
 * (<= 0: from the newest), newest first, at most limit (0 = all). Returns
 * the count; *ret owned by the caller (store_audit_list_free). */
int store_audit_list(struct store *s, const char *env, int64_t before_seq, size_t limit,
                     struct store_audit **ret, size_t *n_ret, struct wr_err *e);

/* Record that env made image_id (import, pull, build, snapshot). */
int store_image_env_add(struct store *s, const char *env, const char *image_id, struct wr_err *e);

/* Whether env may see (write false) or delete / re-name (write true)
 * image_id: 1 yes, 0 no, or a negative errno. An image no tenant
 * environment made (no row, or only "default") is the shared catalog:
 * every environment reads it, only "default" changes it. Another
 * environment's image does not exist for env. */
int store_image_env_access(struct store *s, const char *env, const char *image_id, bool write,
                           struct wr_err *e);
