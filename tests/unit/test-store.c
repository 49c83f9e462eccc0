/* SPDX-License-Identifier: Apache-2.0 */
/* The store against a real SQLite database in a temporary directory. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <linux/mount.h>
#include <sched.h>
#include <sqlite3.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "basic/err.h"
#include "signer/datakey.h"
#include "store/store-internal.h"
#include "store/store.h"

struct fixture {
        char dir[64];
        char db[128];
        struct store *s;
};

static int rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw) {
        return remove(path);
}

static int setup(void **state) {
        struct fixture *f = calloc(1, sizeof(*f));
        assert_non_null(f);
        strcpy(f->dir, "/tmp/warren-test-store-XXXXXX");
        assert_non_null(mkdtemp(f->dir));
        snprintf(f->db, sizeof(f->db), "%s/warren.db", f->dir);
        struct wr_err e = {0};
        int r = store_open(f->db, &f->s, &e);
        if (r < 0)
                fail_msg("store_open: %s", e.msg);
        *state = f;
        return 0;
}

static int teardown(void **state) {
        struct fixture *f = *state;
        store_close(f->s);
        nftw(f->dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
        free(f);
        return 0;
}

/* Run one SQL query with the sqlite3 API directly and return its first
 * integer column. */
static int64_t query_int(const char *db, const char *sql) {
        sqlite3 *h = NULL;
        assert_int_equal(sqlite3_open_v2(db, &h, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
        sqlite3_stmt *st = NULL;
        assert_int_equal(sqlite3_prepare_v2(h, sql, -1, &st, NULL), SQLITE_OK);
        assert_int_equal(sqlite3_step(st), SQLITE_ROW);
        int64_t v = sqlite3_column_int64(st, 0);
        sqlite3_finalize(st);
        sqlite3_close(h);
        return v;
}

static void test_migrate_from_empty(void **state) {
        struct fixture *f = *state;
        assert_int_equal(store_schema_version(f->s), store_schema_version_latest());
        assert_true(store_schema_version_latest() >= 1);
        assert_int_equal(query_int(f->db, "SELECT COUNT(*) FROM schema_version"),
                         store_schema_version_latest());
        /* Every table of the initial schema exists. */
        const char *tables[] = {"environments", "tokens",       "sandboxes",   "sandbox_tags",
                                "volumes",      "secrets",      "secret_keys", "images",
                                "image_names",  "image_layers", "layers"};
        for (size_t i = 0; i < ELEMENTSOF(tables); i++) {
                char sql[160];
                snprintf(sql, sizeof(sql),
                         "SELECT COUNT(*) FROM sqlite_master WHERE type='table' AND name='%s'",
                         tables[i]);
                assert_int_equal(query_int(f->db, sql), 1);
        }
        /* WAL mode is persistent in the file. */
        sqlite3 *h = NULL;
        assert_int_equal(sqlite3_open(f->db, &h), SQLITE_OK);
        sqlite3_stmt *st = NULL;
        assert_int_equal(sqlite3_prepare_v2(h, "PRAGMA journal_mode", -1, &st, NULL), SQLITE_OK);
        assert_int_equal(sqlite3_step(st), SQLITE_ROW);
        assert_string_equal((const char *) sqlite3_column_text(st, 0), "wal");
        sqlite3_finalize(st);
        sqlite3_close(h);
        /* The database file is private. */
        struct stat sb;
        assert_int_equal(stat(f->db, &sb), 0);
        assert_int_equal(sb.st_mode & 077, 0);
}

static void test_reopen_idempotent(void **state) {
        struct fixture *f = *state;
        struct wr_err e = {0};
        struct store_sandbox sb = {.id = "sb-0000000000000001",
                                   .environment = STORE_ENV_DEFAULT,
                                   .name = "keep",
                                   .status = STORE_SANDBOX_RUNNING,
                                   .created_ns = store_now_ns()};
        assert_int_equal(store_sandbox_insert(f->s, &sb, &e), 0);
        store_close(f->s);
        f->s = NULL;
        for (int i = 0; i < 2; i++) {
                assert_int_equal(store_open(f->db, &f->s, &e), 0);
                assert_int_equal(store_schema_version(f->s), store_schema_version_latest());
                store_close(f->s);
                f->s = NULL;
        }
        assert_int_equal(query_int(f->db, "SELECT COUNT(*) FROM schema_version"),
                         store_schema_version_latest());
        assert_int_equal(query_int(f->db, "SELECT COUNT(*) FROM environments"), 1);
        assert_int_equal(query_int(f->db, "SELECT COUNT(*) FROM sandboxes"), 1);
        assert_int_equal(store_open(f->db, &f->s, &e), 0);
}

static void test_newer_schema_refused(void **state) {
        struct fixture *f = *state;
        store_close(f->s);
        f->s = NULL;
        sqlite3 *h = NULL;
        assert_int_equal(sqlite3_open(f->db, &h), SQLITE_OK);
        char sql[128];
        snprintf(sql, sizeof(sql), "INSERT INTO schema_version VALUES (%d, 0)",
                 store_schema_version_latest() + 5);
        assert_int_equal(sqlite3_exec(h, sql, NULL, NULL, NULL), SQLITE_OK);
        sqlite3_close(h);

        struct wr_err e = {0};
        struct store *s = NULL;
        assert_int_equal(store_open(f->db, &s, &e), -EPROTO);
        assert_null(s);
        assert_non_null(strstr(e.msg, "newer warrend"));
        char want[32];
        snprintf(want, sizeof(want), "version %d", store_schema_version_latest() + 5);
        assert_non_null(strstr(e.msg, want));
        /* Nothing was changed by the refusal. */
        assert_int_equal(query_int(f->db, "SELECT MAX(version) FROM schema_version"),
                         store_schema_version_latest() + 5);
}

static void test_sandbox_crud(void **state) {
        struct fixture *f = *state;
        struct wr_err e = {0};
        struct store_tag tags[] = {{"team", "infra"}, {"app", "web"}};
        uint8_t spec[] = {0x12, 0x03, 'a', 'b', 'c', 0x00, 0xff};
        int64_t t0 = store_now_ns();
        struct store_sandbox in = {.id = "sb-00000000000000aa",
                                   .environment = STORE_ENV_DEFAULT,
                                   .name = "alpha",
                                   .status = STORE_SANDBOX_PENDING,
                                   .image_ref = "busybox:latest",
                                   .spec = spec,
                                   .spec_len = sizeof(spec),
                                   .tags = tags,
                                   .n_tags = 2,
                                   .created_ns = t0,
                                   .expires_ns = t0 + 1000};
        assert_int_equal(store_sandbox_insert(f->s, &in, &e), 0);

        struct store_sandbox out = {0};
        assert_int_equal(store_sandbox_load(f->s, "sb-00000000000000aa", &out, &e), 0);
        assert_string_equal(out.name, "alpha");
        assert_int_equal(out.status, STORE_SANDBOX_PENDING);
        assert_string_equal(out.image_ref, "busybox:latest");
        assert_string_equal(out.image_id, "");
        assert_int_equal(out.spec_len, sizeof(spec));
        assert_memory_equal(out.spec, spec, sizeof(spec));
        assert_int_equal(out.created_ns, t0);
        assert_int_equal(out.expires_ns, t0 + 1000);
        assert_int_equal(out.terminated_ns, 0);
        assert_int_equal(out.n_tags, 2);
        assert_string_equal(out.tags[0].key, "app"); /* sorted */
        assert_string_equal(out.tags[0].value, "web");
        assert_string_equal(out.tags[1].key, "team");
        store_sandbox_clear(&out);

        assert_int_equal(store_sandbox_update_runtime(f->s, in.id, 4242, "/sys/fs/cgroup/x", &e),
                         0);
        assert_int_equal(store_sandbox_update_status(f->s, in.id, STORE_SANDBOX_RUNNING, NULL, &e),
                         0);
        assert_int_equal(store_sandbox_load_by_name(f->s, STORE_ENV_DEFAULT, "alpha", &out, &e), 0);
        assert_string_equal(out.id, in.id);
        assert_int_equal(out.status, STORE_SANDBOX_RUNNING);
        assert_int_equal(out.init_pid, 4242);
        assert_string_equal(out.cgroup_path, "/sys/fs/cgroup/x");
        store_sandbox_clear(&out);

        assert_int_equal(
                store_sandbox_update_status(f->s, in.id, STORE_SANDBOX_TERMINATED, "bye", &e), 0);
        assert_int_equal(store_sandbox_load(f->s, in.id, &out, &e), 0);
        assert_int_equal(out.status, STORE_SANDBOX_TERMINATED);
        assert_string_equal(out.status_message, "bye");
        assert_true(out.terminated_ns >= t0);
        store_sandbox_clear(&out);

        /* Unknown ids. */
        assert_int_equal(store_sandbox_load(f->s, "sb-nope", &out, &e), -ENOENT);
        assert_non_null(strstr(e.msg, "sb-nope"));
        assert_int_equal(store_sandbox_load_by_name(f->s, STORE_ENV_DEFAULT, "zzz", &out, &e),
                         -ENOENT);
        assert_int_equal(store_sandbox_update_status(f->s, "sb-nope", 2, NULL, &e), -ENOENT);
        assert_int_equal(store_sandbox_update_status(f->s, in.id, 9, NULL, &e), -EINVAL);
        assert_int_equal(store_sandbox_delete(f->s, "sb-nope", &e), -ENOENT);

        /* Delete cascades to tags. */
        assert_int_equal(store_sandbox_delete(f->s, in.id, &e), 0);
        assert_int_equal(store_sandbox_load(f->s, in.id, &out, &e), -ENOENT);
        assert_int_equal(query_int(f->db, "SELECT COUNT(*) FROM sandbox_tags"), 0);

        /* Unknown environment is a foreign-key violation. */
        struct store_sandbox bad = in;
        bad.environment = "no-such-env";
        bad.n_tags = 0;
        assert_int_equal(store_sandbox_insert(f->s, &bad, &e), -ENOENT);
        /* Missing fields. */
        bad = in;
        bad.created_ns = 0;
        assert_int_equal(store_sandbox_insert(f->s, &bad, &e), -EINVAL);
}

static void test_sandbox_unique_name(void **state) {
        struct fixture *f = *state;
        struct wr_err e = {0};
        struct store_sandbox a = {.id = "sb-0000000000000a01",
                                  .environment = STORE_ENV_DEFAULT,
                                  .name = "web",
                                  .status = STORE_SANDBOX_RUNNING,
                                  .created_ns = store_now_ns()};
        struct store_sandbox b = a;
        b.id = "sb-0000000000000a02";
        assert_int_equal(store_sandbox_insert(f->s, &a, &e), 0);
        assert_int_equal(store_sandbox_insert(f->s, &b, &e), -EEXIST);
        assert_non_null(strstr(e.msg, "\"web\""));
        /* The same id twice. */
        struct store_sandbox c = a;
        c.name = "other";
        assert_int_equal(store_sandbox_insert(f->s, &c, &e), -EEXIST);
        assert_non_null(strstr(e.msg, a.id));
        /* A failed insert left nothing behind (tags included). */
        assert_int_equal(query_int(f->db, "SELECT COUNT(*) FROM sandboxes"), 1);

        /* Unnamed sandboxes never conflict. */
        struct store_sandbox u1 = a, u2 = a;
        u1.id = "sb-0000000000000b01";
        u1.name = NULL;
        u2.id = "sb-0000000000000b02";
        u2.name = "";
        assert_int_equal(store_sandbox_insert(f->s, &u1, &e), 0);
        assert_int_equal(store_sandbox_insert(f->s, &u2, &e), 0);

        /* Once terminated, the name is free again. */
        assert_int_equal(store_sandbox_update_status(f->s, a.id, STORE_SANDBOX_TERMINATED, "", &e),
                         0);
        b.created_ns = a.created_ns + 1;
        assert_int_equal(store_sandbox_insert(f->s, &b, &e), 0);
        /* Reviving the old one now conflicts. */
        assert_int_equal(store_sandbox_update_status(f->s, a.id, STORE_SANDBOX_RUNNING, "", &e),
                         -EEXIST);
        /* By name prefers the live one. */
        struct store_sandbox out = {0};
        assert_int_equal(store_sandbox_load_by_name(f->s, STORE_ENV_DEFAULT, "web", &out, &e), 0);
        assert_string_equal(out.id, b.id);
        store_sandbox_clear(&out);
}

static void test_sandbox_list_filters(void **state) {
        struct fixture *f = *state;
        struct wr_err e = {0};
        int64_t t0 = store_now_ns();
        struct store_tag t_web[] = {{"app", "web"}, {"team", "a"}};
        struct store_tag t_db[] = {{"app", "db"}, {"team", "a"}};
        struct store_sandbox rows[] = {
                {.id = "sb-1", .name = "one", .status = 2, .tags = t_web, .n_tags = 2},
                {.id = "sb-2", .name = "two", .status = 2, .tags = t_db, .n_tags = 2},
                {.id = "sb-3", .name = "three", .status = 4},
                {.id = "sb-4", .status = 1, .tags = t_web, .n_tags = 1},
        };
        for (size_t i = 0; i < ELEMENTSOF(rows); i++) {
                rows[i].environment = STORE_ENV_DEFAULT;
                rows[i].created_ns = t0 + (int64_t) i;
                if (rows[i].status == STORE_SANDBOX_TERMINATED)
                        rows[i].terminated_ns = t0 + (int64_t) i;
                assert_int_equal(store_sandbox_insert(f->s, &rows[i], &e), 0);
        }
        struct store_sandbox *l = NULL;
        size_t n = 0;
        struct store_sandbox_filter flt = {.environment = STORE_ENV_DEFAULT};
        assert_int_equal(store_sandbox_list(f->s, &flt, &l, &n, &e), 4);
        assert_int_equal(n, 4);
        assert_string_equal(l[0].id, "sb-4"); /* newest first */
        assert_null(l[0].name);
        assert_string_equal(l[3].id, "sb-1");
        store_sandbox_list_free(l, n);

        int running[] = {2};
        flt.statuses = running;
        flt.n_statuses = 1;
        assert_int_equal(store_sandbox_list(f->s, &flt, &l, &n, &e), 2);
        store_sandbox_list_free(l, n);

        int two[] = {1, 4};
        flt.statuses = two;
        flt.n_statuses = 2;
        assert_int_equal(store_sandbox_list(f->s, &flt, &l, &n, &e), 2);
        assert_string_equal(l[0].id, "sb-4");
        assert_string_equal(l[1].id, "sb-3");
        store_sandbox_list_free(l, n);

        flt.n_statuses = 0;
        flt.tags = (struct store_tag[]){{"app", "web"}};
        flt.n_tags = 1;
        assert_int_equal(store_sandbox_list(f->s, &flt, &l, &n, &e), 2);
        store_sandbox_list_free(l, n);
        flt.tags = (struct store_tag[]){{"app", "web"}, {"team", "a"}};
        flt.n_tags = 2;
        assert_int_equal(store_sandbox_list(f->s, &flt, &l, &n, &e), 1);
        assert_string_equal(l[0].id, "sb-1");
        store_sandbox_list_free(l, n);
        /* A value containing SQL is just a value. */
        flt.tags = (struct store_tag[]){{"app", "web' OR '1'='1"}};
        flt.n_tags = 1;
        assert_int_equal(store_sandbox_list(f->s, &flt, &l, &n, &e), 0);
        assert_null(l);
        flt.n_tags = 0;

        flt.name = "two";
        assert_int_equal(store_sandbox_list(f->s, &flt, &l, &n, &e), 1);
        assert_string_equal(l[0].id, "sb-2");
        store_sandbox_list_free(l, n);
        flt.name = NULL;

        flt.limit = 2;
        flt.offset = 1;
        assert_int_equal(store_sandbox_list(f->s, &flt, &l, &n, &e), 2);
        assert_string_equal(l[0].id, "sb-3");
        assert_string_equal(l[1].id, "sb-2");
        store_sandbox_list_free(l, n);

        /* Retention: sb-3 ended "now"; hiding what ended before t0 keeps it,
         * hiding what ended before the far future drops it. */
        flt.limit = 0;
        flt.offset = 0;
        flt.hide_ended_before_ns = t0;
        assert_int_equal(store_sandbox_list(f->s, &flt, &l, &n, &e), 4);
        store_sandbox_list_free(l, n);
        flt.hide_ended_before_ns = INT64_MAX;
        assert_int_equal(store_sandbox_list(f->s, &flt, &l, &n, &e), 3);
        for (size_t i = 0; i < n; i++)
                assert_string_not_equal(l[i].id, "sb-3");
        store_sandbox_list_free(l, n);
        flt.hide_ended_before_ns = 0;

        flt.environment = "elsewhere";
        flt.limit = 0;
        flt.offset = 0;
        assert_int_equal(store_sandbox_list(f->s, &flt, &l, &n, &e), 0);
}

/* Restart recovery's record: init pid/start time, sealed process defaults,
 * status in one statement; counts by status. */
static void test_sandbox_started_and_process(void **state) {
        struct fixture *f = *state;
        struct wr_err e = {0};
        struct store_sandbox in = {.id = "sb-00000000000000cc",
                                   .environment = STORE_ENV_DEFAULT,
                                   .status = STORE_SANDBOX_PENDING,
                                   .created_ns = store_now_ns()};
        assert_int_equal(store_sandbox_insert(f->s, &in, &e), 0);
        unsigned char *p = NULL;
        size_t n = 0;
        assert_int_equal(store_sandbox_get_process(f->s, in.id, &p, &n, NULL), -ENODATA);
        static const char proc[] = "0\0000\000/tmp\000TOKEN=hunter2-secret\000";
        assert_int_equal(store_sandbox_set_started(f->s, in.id, 4242, 987654321, NULL, proc,
                                                   sizeof(proc), STORE_SANDBOX_RUNNING, &e),
                         0);
        struct store_sandbox out = {0};
        assert_int_equal(store_sandbox_load(f->s, in.id, &out, &e), 0);
        assert_int_equal(out.status, STORE_SANDBOX_RUNNING);
        assert_int_equal(out.init_pid, 4242);
        assert_int_equal(out.init_start, 987654321);
        store_sandbox_clear(&out);
        assert_int_equal(store_sandbox_get_process(f->s, in.id, &p, &n, &e), 0);
        assert_int_equal(n, sizeof(proc));
        assert_memory_equal(p, proc, sizeof(proc));
        free(p);
        /* sealed: the secret value is not in the database file */
        store_close(f->s);
        f->s = NULL;
        FILE *fp = fopen(f->db, "rb");
        assert_non_null(fp);
        static char buf[1 << 20];
        size_t got = fread(buf, 1, sizeof(buf), fp);
        fclose(fp);
        assert_null(memmem(buf, got, "hunter2", 7));
        assert_int_equal(store_open(f->db, &f->s, &e), 0);
        /* a sealed blob copied onto another sandbox does not open */
        struct store_sandbox other = in;
        other.id = "sb-00000000000000dd";
        assert_int_equal(store_sandbox_insert(f->s, &other, &e), 0);
        char sql[512];
        snprintf(sql, sizeof(sql),
                 "UPDATE sandboxes SET process = (SELECT process FROM sandboxes WHERE id = '%s'), "
                 "process_nonce = (SELECT process_nonce FROM sandboxes WHERE id = '%s') "
                 "WHERE id = '%s'",
                 in.id, in.id, other.id);
        assert_int_equal(sqlite3_exec(store_sqlite(f->s), sql, NULL, NULL, NULL), SQLITE_OK);
        assert_int_equal(store_sandbox_get_process(f->s, other.id, &p, &n, NULL), -EBADMSG);
        int64_t counts[6];
        assert_int_equal(store_sandbox_count_by_status(f->s, counts, &e), 0);
        assert_int_equal(counts[STORE_SANDBOX_RUNNING], 1);
        assert_int_equal(counts[STORE_SANDBOX_PENDING], 1);
        assert_int_equal(counts[STORE_SANDBOX_FAILED], 0);
        assert_int_equal(store_sandbox_set_started(f->s, "sb-nope", 1, 1, NULL, NULL, 0, 0, NULL),
                         -ENOENT);
}

static void test_volume_crud(void **state) {
        struct fixture *f = *state;
        struct wr_err e = {0};
        assert_int_equal(store_volume_insert(f->s, STORE_ENV_DEFAULT, "data", &e), 0);
        assert_int_equal(store_volume_insert(f->s, STORE_ENV_DEFAULT, "cache", &e), 0);
        assert_int_equal(store_volume_insert(f->s, STORE_ENV_DEFAULT, "data", &e), -EEXIST);
        assert_int_equal(store_volume_insert(f->s, "nope", "data", &e), -ENOENT);
        struct store_volume v = {0};
        assert_int_equal(store_volume_load(f->s, STORE_ENV_DEFAULT, "data", &v, &e), 0);
        assert_string_equal(v.name, "data");
        assert_true(v.created_ns > 0);
        store_volume_clear(&v);
        struct store_volume *l = NULL;
        size_t n = 0;
        assert_int_equal(store_volume_list(f->s, STORE_ENV_DEFAULT, &l, &n, &e), 2);
        assert_string_equal(l[0].name, "cache");
        assert_string_equal(l[1].name, "data");
        store_volume_list_free(l, n);
        assert_int_equal(store_volume_delete(f->s, STORE_ENV_DEFAULT, "data", &e), 0);
        assert_int_equal(store_volume_delete(f->s, STORE_ENV_DEFAULT, "data", &e), -ENOENT);
        assert_int_equal(store_volume_load(f->s, STORE_ENV_DEFAULT, "data", &v, &e), -ENOENT);
}

/* Does the file at path contain needle anywhere? */
static bool file_contains(const char *path, const void *needle, size_t len) {
        FILE *fp = fopen(path, "rb");
        if (!fp)
                return false;
        static char buf[1 << 20];
        size_t n = fread(buf, 1, sizeof(buf), fp);
        fclose(fp);
        return n >= len && memmem(buf, n, needle, len) != NULL;
}

static void test_secret_roundtrip(void **state) {
        struct fixture *f = *state;
        struct wr_err e = {0};
        const char *plain = "s3cr3t-PLAINTEXT-value-0123456789";
        struct store_secret_entry one = {
                .key = "", .value = (uint8_t *) plain, .len = strlen(plain)};
        assert_int_equal(store_secret_set(f->s, STORE_ENV_DEFAULT, "API_KEY", &one, 1, &e), 0);

        /* The key file exists, private, in a private directory. */
        char key[160], keys[160];
        snprintf(keys, sizeof(keys), "%s/keys", f->dir);
        snprintf(key, sizeof(key), "%s/keys/secret.key", f->dir);
        struct stat st;
        assert_int_equal(stat(key, &st), 0);
        assert_int_equal(st.st_mode & 0777, 0600);
        assert_int_equal(st.st_size, 32);
        assert_int_equal(stat(keys, &st), 0);
        assert_int_equal(st.st_mode & 0777, 0700);

        struct store_secret got = {0};
        assert_int_equal(store_secret_get(f->s, STORE_ENV_DEFAULT, "API_KEY", &got, &e), 0);
        assert_int_equal(got.n_entries, 1);
        assert_string_equal(got.entries[0].key, "");
        assert_int_equal(got.entries[0].len, strlen(plain));
        assert_memory_equal(got.entries[0].value, plain, strlen(plain));
        store_secret_clear(&got);

        /* Ciphertext differs from plaintext, and the plaintext is nowhere on
         * disk (database, WAL) after a checkpoint-free close. */
        assert_int_equal(query_int(f->db, "SELECT COUNT(*) FROM secrets WHERE "
                                          "ciphertext = CAST('s3cr3t-PLAINTEXT-value-0123456789'"
                                          " AS BLOB)"),
                         0);
        assert_int_equal(query_int(f->db, "SELECT length(ciphertext) FROM secrets"),
                         (int64_t) strlen(plain) + 8 + 16); /* framing + GCM tag */
        /* a data key of its own: nonce, then the key's wrapping */
        assert_int_equal(query_int(f->db, "SELECT length(nonce) FROM secrets"), 12 + 60);
        char wal[160];
        snprintf(wal, sizeof(wal), "%s-wal", f->db);
        assert_false(file_contains(f->db, plain, strlen(plain)));
        assert_false(file_contains(wal, plain, strlen(plain)));
        assert_true(file_contains(wal, "API_KEY", 7) || file_contains(f->db, "API_KEY", 7));

        /* Replace with an integration secret; keys listed, values not. */
        struct store_secret_entry kv[] = {
                {.key = "user", .value = (uint8_t *) "bob", .len = 3},
                {.key = "password", .value = (uint8_t *) "hunter2", .len = 7},
                {.key = "empty", .value = NULL, .len = 0},
        };
        assert_int_equal(store_secret_set(f->s, STORE_ENV_DEFAULT, "API_KEY", kv, 3, &e), 0);
        assert_int_equal(store_secret_set(f->s, STORE_ENV_DEFAULT, "OTHER", &one, 1, &e), 0);
        struct store_secret *l = NULL;
        size_t n = 0;
        assert_int_equal(store_secret_list(f->s, STORE_ENV_DEFAULT, &l, &n, &e), 2);
        assert_string_equal(l[0].name, "API_KEY");
        assert_int_equal(l[0].n_entries, 3);
        assert_string_equal(l[0].entries[0].key, "empty");
        assert_null(l[0].entries[0].value);
        assert_string_equal(l[1].name, "OTHER");
        assert_int_equal(l[1].n_entries, 0);
        store_secret_list_free(l, n);
        assert_int_equal(store_secret_get(f->s, STORE_ENV_DEFAULT, "API_KEY", &got, &e), 0);
        assert_int_equal(got.n_entries, 3);
        assert_string_equal(got.entries[1].key, "password");
        assert_memory_equal(got.entries[1].value, "hunter2", 7);
        assert_int_equal(got.entries[0].len, 0);
        store_secret_clear(&got);

        /* Bad input. */
        struct store_secret_entry dup[] = {{.key = "a", .len = 0}, {.key = "a", .len = 0}};
        assert_int_equal(store_secret_set(f->s, STORE_ENV_DEFAULT, "X", dup, 2, &e), -EINVAL);
        struct store_secret_entry mixed[] = {{.key = "", .len = 0}, {.key = "a", .len = 0}};
        assert_int_equal(store_secret_set(f->s, STORE_ENV_DEFAULT, "X", mixed, 2, &e), -EINVAL);
        assert_int_equal(store_secret_set(f->s, STORE_ENV_DEFAULT, "X", NULL, 0, &e), -EINVAL);

        /* A row copied onto another name does not decrypt (AAD binds it). */
        sqlite3 *h = NULL;
        assert_int_equal(sqlite3_open(f->db, &h), SQLITE_OK);
        assert_int_equal(sqlite3_exec(h,
                                      "INSERT INTO secrets SELECT environment, 'STOLEN', "
                                      "ciphertext, nonce, updated, version FROM secrets WHERE "
                                      "name = 'OTHER'",
                                      NULL, NULL, NULL),
                         SQLITE_OK);
        sqlite3_close(h);
        assert_int_equal(store_secret_get(f->s, STORE_ENV_DEFAULT, "STOLEN", &got, &e), -EBADMSG);

        /* Delete. */
        assert_int_equal(store_secret_delete(f->s, STORE_ENV_DEFAULT, "API_KEY", &e), 0);
        assert_int_equal(store_secret_delete(f->s, STORE_ENV_DEFAULT, "API_KEY", &e), -ENOENT);
        assert_int_equal(store_secret_get(f->s, STORE_ENV_DEFAULT, "API_KEY", &got, &e), -ENOENT);
        assert_int_equal(query_int(f->db, "SELECT COUNT(*) FROM secret_keys"), 0);

        /* Re-open: the same key file decrypts the old rows. */
        store_close(f->s);
        assert_int_equal(store_open(f->db, &f->s, &e), 0);
        assert_int_equal(store_secret_get(f->s, STORE_ENV_DEFAULT, "OTHER", &got, &e), 0);
        assert_memory_equal(got.entries[0].value, plain, strlen(plain));
        store_secret_clear(&got);

        /* A world-readable key file is refused. */
        assert_int_equal(chmod(key, 0644), 0);
        store_close(f->s);
        assert_int_equal(store_open(f->db, &f->s, &e), 0);
        assert_int_equal(store_secret_get(f->s, STORE_ENV_DEFAULT, "OTHER", &got, &e), -EPERM);
        assert_non_null(strstr(e.msg, "chmod 600"));
        assert_int_equal(chmod(key, 0600), 0);

        /* A different key does not decrypt. */
        char other_key[160];
        snprintf(other_key, sizeof(other_key), "%s/other.key", f->dir);
        assert_int_equal(store_set_secret_key_path(f->s, other_key), 0);
        assert_int_equal(store_secret_get(f->s, STORE_ENV_DEFAULT, "OTHER", &got, &e), -EBADMSG);
}

/* The "load one row" helper's three outcomes as every caller reports them,
 * the savepoint of a failed write, and clear on half-built objects. */
static void test_not_found_and_half_built(void **state) {
        struct fixture *f = *state;
        struct wr_err e = {0};
        struct store_volume v;
        assert_int_equal(store_volume_load(f->s, STORE_ENV_DEFAULT, "nope", &v, &e), -ENOENT);
        assert_string_equal(e.msg, "volume \"nope\" not found");
        e = (struct wr_err){0};
        struct store_secret sec;
        assert_int_equal(store_secret_get(f->s, STORE_ENV_DEFAULT, "NOPE", &sec, &e), -ENOENT);
        assert_string_equal(e.msg, "secret \"NOPE\" not found");
        e = (struct wr_err){0};
        struct store_sandbox sb;
        assert_int_equal(store_sandbox_load_by_name(f->s, STORE_ENV_DEFAULT, "nope", &sb, &e),
                         -ENOENT);
        assert_string_equal(e.msg, "no sandbox named \"nope\"");
        e = (struct wr_err){0};
        assert_int_equal(store_secret_delete(f->s, STORE_ENV_DEFAULT, "NOPE", &e), -ENOENT);
        assert_string_equal(e.msg, "secret \"NOPE\" not found");

        /* A write that fails is rolled back whole: no secret, no keys. */
        uint8_t v1[] = {'1'};
        struct store_secret_entry ent[] = {{.key = (char *) "a", .value = v1, .len = 1}};
        e = (struct wr_err){0};
        assert_int_equal(store_secret_set(f->s, "no-such-env", "S", ent, 1, &e), -ENOENT);
        struct store_secret *list = NULL;
        size_t n = 1;
        assert_int_equal(store_secret_list(f->s, "no-such-env", &list, &n, &e), 0);
        assert_int_equal(n, 0);
        store_secret_list_free(list, n);

        /* Half-built objects clear safely (NULL arrays with counts). */
        struct store_secret half = {.name = strdup("X"), .n_entries = 3};
        store_secret_clear(&half);
        assert_null(half.name);
        struct store_sandbox halfsb = {.id = strdup("sb-1"), .n_tags = 2};
        store_sandbox_clear(&halfsb);
        assert_null(halfsb.id);
        store_secret_clear(NULL);
        store_sandbox_list_free(NULL, 0);
}

/* Tenancy: tokens (hash kept, never listed), revocation, environments
 * made on demand, quotas, the audit log (newest first, by environment),
 * and which environment may see or change an image. */
static void test_tenancy(void **state) {
        struct fixture *f = *state;
        struct wr_err e = {0};
        struct store_token t = {.id = (char *) "tk-0000000000000001",
                                .environment = (char *) "alpha",
                                .subject = (char *) "ci",
                                .role = (char *) "admin"};
        memset(t.hash, 0xab, sizeof(t.hash));
        assert_int_equal(store_env_exists(f->s, "alpha", &e), 0);
        assert_int_equal(store_token_insert(f->s, &t, &e), 0);
        assert_int_equal(store_env_exists(f->s, "alpha", &e), 1);
        /* the same hash twice is refused */
        t.id = (char *) "tk-0000000000000002";
        assert_int_equal(store_token_insert(f->s, &t, &e), -EEXIST);
        struct store_token got = {0};
        assert_int_equal(store_token_load(f->s, "tk-0000000000000001", &got, &e), 0);
        assert_string_equal(got.role, "admin");
        assert_string_equal(got.environment, "alpha");
        uint8_t want[32];
        memset(want, 0xab, sizeof(want));
        assert_true(store_token_hash_equal(got.hash, want));
        want[31] ^= 1;
        assert_false(store_token_hash_equal(got.hash, want));
        assert_int_equal(got.revoked_ns, 0);
        store_token_clear(&got);
        struct store_token *list = NULL;
        size_t n = 0;
        assert_int_equal(store_token_list(f->s, "alpha", &list, &n, &e), 1);
        uint8_t zero[32] = {0};
        assert_memory_equal(list[0].hash, zero, 32);
        store_token_list_free(list, n);
        assert_int_equal(store_token_list(f->s, "beta", &list, &n, &e), 0);
        store_token_list_free(list, n);
        assert_int_equal(store_token_revoke(f->s, "tk-0000000000000001", &e), 0);
        assert_int_equal(store_token_revoke(f->s, "tk-0000000000000001", &e), 0);
        assert_int_equal(store_token_revoke(f->s, "tk-ffff", &e), -ENOENT);
        assert_int_equal(store_token_load(f->s, "tk-0000000000000001", &got, &e), 0);
        assert_true(got.revoked_ns > 0);
        store_token_clear(&got);

        assert_false(store_env_name_valid("Alpha"));
        assert_false(store_env_name_valid("-a"));
        assert_false(store_env_name_valid(""));
        assert_true(store_env_name_valid("a-1_b"));
        assert_int_equal(store_env_ensure(f->s, "../x", &e), -EINVAL);

        struct store_quota q = {.max_sandboxes = 3, .max_cpu = 1.5, .max_memory = 1 << 30};
        assert_int_equal(store_env_quota_set(f->s, "gamma", &q, &e), 0);
        struct store_quota qq;
        assert_int_equal(store_env_quota_get(f->s, "gamma", &qq, &e), 0);
        assert_int_equal(qq.max_sandboxes, 3);
        assert_true(qq.max_cpu == 1.5);
        assert_int_equal(qq.max_volume_bytes, 0);
        assert_int_equal(store_env_quota_get(f->s, "nope", &qq, &e), -ENOENT);

        for (int i = 0; i < 5; i++) {
                struct store_audit a = {.environment = (char *) (i % 2 ? "alpha" : "beta"),
                                        .method = (char *) "/warren.v1.Volumes/CreateVolume",
                                        .object = (char *) "v",
                                        .status = i};
                assert_int_equal(store_audit_insert(f->s, &a, &e), 0);
        }
        struct store_audit *al = NULL;
        assert_int_equal(store_audit_list(f->s, "alpha", 0, 0, &al, &n, &e), 2);
        assert_int_equal(al[0].status, 3); /* newest first */
        assert_int_equal(al[1].status, 1);
        int64_t before = al[0].seq;
        store_audit_list_free(al, n);
        assert_int_equal(store_audit_list(f->s, NULL, before, 2, &al, &n, &e), 2);
        assert_int_equal(al[0].status, 2);
        store_audit_list_free(al, n);

        /* image environments: no row = the shared catalog */
        struct sqlite3 *db = store_sqlite(f->s);
        assert_int_equal(sqlite3_exec(db,
                                      "INSERT INTO images (id, config, created) VALUES "
                                      "('sha256:aa', '{}', 0), ('sha256:bb', '{}', 0)",
                                      NULL, NULL, NULL),
                         SQLITE_OK);
        assert_int_equal(store_image_env_access(f->s, "alpha", "sha256:aa", false, &e), 1);
        assert_int_equal(store_image_env_access(f->s, "alpha", "sha256:aa", true, &e), 0);
        assert_int_equal(store_image_env_access(f->s, "default", "sha256:aa", true, &e), 1);
        assert_int_equal(store_image_env_add(f->s, "alpha", "sha256:bb", &e), 0);
        assert_int_equal(store_image_env_access(f->s, "alpha", "sha256:bb", true, &e), 1);
        assert_int_equal(store_image_env_access(f->s, "beta", "sha256:bb", false, &e), 0);
        assert_int_equal(store_image_env_access(f->s, "default", "sha256:bb", false, &e), 0);
        assert_int_equal(store_image_env_add(f->s, "beta", "sha256:bb", &e), 0);
        /* made by both: each sees it, neither may delete it alone */
        assert_int_equal(store_image_env_access(f->s, "beta", "sha256:bb", false, &e), 1);
        assert_int_equal(store_image_env_access(f->s, "alpha", "sha256:bb", true, &e), 0);
}

/* A keeper that counts its calls and keeps its own key: once installed,
 * every data key comes from it (values sealed before no longer open), and
 * the key file is not read again. */
struct test_keeper {
        uint8_t key[SIGNER_SECRETS_KEY_LEN];
        int news, opens;
};

static int tk_new(void *ctx, const void *label, size_t label_len, uint8_t *dek, uint8_t *wrapped,
                  struct wr_err *e) {
        struct test_keeper *k = ctx;
        k->news++;
        return signer_datakey_new(k->key, label, label_len, dek, wrapped, e);
}

static int tk_open(void *ctx, const void *label, size_t label_len, const uint8_t *wrapped,
                   uint8_t *dek, struct wr_err *e) {
        struct test_keeper *k = ctx;
        k->opens++;
        return signer_datakey_open(k->key, label, label_len, wrapped, dek, e);
}

static void test_secret_keeper(void **state) {
        struct fixture *f = *state;
        struct wr_err e = {0};
        struct store_secret_entry one = {.key = (char *) "", .value = (uint8_t *) "v1", .len = 2};
        assert_int_equal(store_secret_set(f->s, STORE_ENV_DEFAULT, "BEFORE", &one, 1, &e), 0);
        struct test_keeper k = {.news = 0};
        memset(k.key, 0x5a, sizeof(k.key));
        store_set_keeper(f->s, &(struct store_keeper){tk_new, tk_open, &k});
        struct store_secret got = {0};
        /* sealed under the file's key: this keeper's key does not open it */
        assert_int_equal(store_secret_get(f->s, STORE_ENV_DEFAULT, "BEFORE", &got, &e), -EBADMSG);
        assert_int_equal(k.opens, 1);
        assert_int_equal(store_secret_set(f->s, STORE_ENV_DEFAULT, "AFTER", &one, 1, &e), 0);
        assert_int_equal(k.news, 1);
        assert_int_equal(store_secret_get(f->s, STORE_ENV_DEFAULT, "AFTER", &got, &e), 0);
        assert_int_equal(k.opens, 2);
        assert_int_equal(got.entries[0].len, 2);
        assert_memory_equal(got.entries[0].value, "v1", 2);
        store_secret_clear(&got);
        /* the memfd for a keeper process: exactly the key file's bytes */
        int fd = -1;
        assert_int_equal(store_secret_key_memfd(f->s, &fd, &e), 0);
        uint8_t buf[64];
        assert_int_equal(read(fd, buf, sizeof(buf)), SIGNER_SECRETS_KEY_LEN);
        assert_true(fcntl(fd, F_GET_SEALS) & F_SEAL_WRITE);
        close(fd);
        char key[512];
        snprintf(key, sizeof(key), "%s/keys/secret.key", f->dir);
        assert_true(file_contains(key, buf, SIGNER_SECRETS_KEY_LEN));
}

/* In a child: a mount namespace made as a dropped warrend's is
 * (src/daemon/drop.c: every mount read-only but the state dir), then a
 * statement that changes over 64 KiB inside nested savepoints (SQLite's
 * statement journal spills to a temp file past that, in /var/tmp or /tmp,
 * unless temp_store is MEMORY). 0 ok, 77 not root (no mount namespace),
 * other: failed (a message on stderr). */
static int big_change_without_temp_dirs(const char *dir, const char *db) {
        struct mount_attr ro = {.attr_set = MOUNT_ATTR_RDONLY};
        struct mount_attr rw = {.attr_clr = MOUNT_ATTR_RDONLY};
        if (unshare(CLONE_NEWNS) < 0)
                return errno == EPERM ? 77 : 2;
        /* as root, a setup that does not take is a failure, not a skip */
        if (mount(NULL, "/", NULL, MS_REC | MS_SLAVE, NULL) < 0 ||
            mount(dir, dir, NULL, MS_BIND | MS_REC, NULL) < 0 ||
            syscall(SYS_mount_setattr, AT_FDCWD, "/", AT_RECURSIVE, &ro, sizeof(ro)) < 0 ||
            syscall(SYS_mount_setattr, AT_FDCWD, dir, AT_RECURSIVE, &rw, sizeof(rw)) < 0) {
                fprintf(stderr, "read-only mount namespace: %m\n");
                return 2;
        }
        if (access("/tmp", W_OK) == 0 || access("/var/tmp", W_OK) == 0 || chdir("/") < 0) {
                fprintf(stderr, "/tmp or /var/tmp still writable\n");
                return 2;
        }
        struct store *s = NULL;
        struct wr_err e = {0};
        if (store_open(db, &s, &e) < 0) {
                fprintf(stderr, "store_open: %s\n", e.msg);
                return 3;
        }
        int r = store_stmt_run(s, "CREATE TABLE scratch (v BLOB)", STORE_NO_ARGS, false,
                               "create scratch", &e);
        if (r >= 0)
                r = store_savepoint(s, &e);
        if (r >= 0) {
                r = store_stmt_run(s,
                                   "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 "
                                   "FROM n WHERE i < 100) "
                                   "INSERT INTO scratch SELECT randomblob(3000) FROM n",
                                   STORE_NO_ARGS, false, "fill scratch", &e);
                if (r >= 0 && (r = store_savepoint(s, &e)) >= 0) {
                        r = store_stmt_run(s, "UPDATE scratch SET v = randomblob(3000)",
                                           STORE_NO_ARGS, false, "rewrite scratch", &e);
                        r = store_savepoint_end(s, r, &e);
                }
                r = store_savepoint_end(s, r, &e);
        }
        if (r < 0)
                fprintf(stderr, "%s\n", e.msg);
        store_close(s);
        return r < 0 ? 1 : 0;
}

static void test_no_temp_files(void **state) {
        struct fixture *f = *state;
        char db[160];
        snprintf(db, sizeof(db), "%s/ro-tmp.db", f->dir);
        fflush(NULL);
        pid_t pid = fork();
        assert_true(pid >= 0);
        if (pid == 0)
                _exit(big_change_without_temp_dirs(f->dir, db));
        int st = 0;
        assert_int_equal(waitpid(pid, &st, 0), pid);
        assert_true(WIFEXITED(st));
        if (WEXITSTATUS(st) == 77)
                skip();
        assert_int_equal(WEXITSTATUS(st), 0);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test_setup_teardown(test_tenancy, setup, teardown),
                cmocka_unit_test_setup_teardown(test_no_temp_files, setup, teardown),
                cmocka_unit_test_setup_teardown(test_migrate_from_empty, setup, teardown),
                cmocka_unit_test_setup_teardown(test_not_found_and_half_built, setup, teardown),
                cmocka_unit_test_setup_teardown(test_reopen_idempotent, setup, teardown),
                cmocka_unit_test_setup_teardown(test_newer_schema_refused, setup, teardown),
                cmocka_unit_test_setup_teardown(test_sandbox_crud, setup, teardown),
                cmocka_unit_test_setup_teardown(test_sandbox_unique_name, setup, teardown),
                cmocka_unit_test_setup_teardown(test_sandbox_list_filters, setup, teardown),
                cmocka_unit_test_setup_teardown(test_sandbox_started_and_process, setup, teardown),
                cmocka_unit_test_setup_teardown(test_volume_crud, setup, teardown),
                cmocka_unit_test_setup_teardown(test_secret_roundtrip, setup, teardown),
                cmocka_unit_test_setup_teardown(test_secret_keeper, setup, teardown),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
