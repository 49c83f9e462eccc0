/* SPDX-License-Identifier: Apache-2.0 */
/* sandbox/exec-log: the bounded, sequence-numbered output log of an exec
 * session (pure: no libuv, no sandbox). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "sandbox/exec-log.h"
#include "sandbox/exec-spool.h"

#define MiB (1024u * 1024u)
#define OUT 1
#define ERR 2

/* The byte at offset off of the test sequence. */
static uint8_t byte_at(uint64_t off) {
        return (uint8_t) ((off * 7 + off / 251) & 0xff);
}

/* "Read" n bytes of stream into the log as exec.c does from a pipe:
 * reserve with n as the hint, fill, commit; repeat until n are in. */
static void feed(struct sbx_exec_log *l, int stream, size_t n) {
        while (n > 0) {
                size_t room = 0;
                uint8_t *dst = sbx_exec_log_reserve(l, stream, n, &room);
                assert_non_null(dst);
                assert_true(room > 0);
                size_t k = n < room ? n : room;
                for (size_t i = 0; i < k; i++)
                        dst[i] = byte_at(l->end + i);
                sbx_exec_log_commit(l, k);
                n -= k;
        }
}

/* Deliver everything from the cursor, checking every byte; returns the
 * number of bytes delivered. */
static uint64_t deliver_all(struct sbx_exec_log *l) {
        uint64_t total = 0;
        struct sbx_exec_log_piece p;
        while (sbx_exec_log_next(l, &p)) {
                for (size_t i = 0; i < p.n; i++)
                        if (p.data[i] != byte_at(p.offset + i))
                                fail_msg("byte at offset %llu differs",
                                         (unsigned long long) (p.offset + i));
                total += p.n;
        }
        return total;
}

static void test_offsets_across_chunks(void **state) {
        struct sbx_exec_log l;
        sbx_exec_log_init(&l, 0, NULL);
        assert_int_equal(l.size, SBX_EXEC_LOG_SIZE_DEFAULT);
        feed(&l, OUT, 100000); /* one fresh chunk of 100000 */
        feed(&l, ERR, 10);     /* the tail is full: a fresh chunk */
        feed(&l, OUT, 5000);   /* a run of the other stream in it */
        feed(&l, OUT, 7);      /* the same run goes on */
        assert_int_equal(l.start, 0);
        assert_int_equal(l.end, 105017);

        struct sbx_exec_log_piece p;
        assert_true(sbx_exec_log_next(&l, &p));
        assert_int_equal(p.offset, 0);
        assert_int_equal(p.n, 100000);
        assert_int_equal(p.stream, OUT);
        assert_int_equal(p.data[99999], byte_at(99999));
        assert_true(sbx_exec_log_next(&l, &p));
        assert_int_equal(p.offset, 100000);
        assert_int_equal(p.n, 10);
        assert_int_equal(p.stream, ERR);
        assert_int_equal(p.data[0], byte_at(100000));
        assert_true(sbx_exec_log_next(&l, &p));
        assert_int_equal(p.offset, 100010);
        assert_int_equal(p.n, 5007);
        assert_int_equal(p.stream, OUT);
        assert_int_equal(p.data[5006], byte_at(105016));
        assert_false(sbx_exec_log_next(&l, &p));
        assert_int_equal(l.cursor, 105017);

        /* More output into the partly filled tail: only the new bytes. */
        feed(&l, OUT, 3);
        assert_true(sbx_exec_log_next(&l, &p));
        assert_int_equal(p.offset, 105017);
        assert_int_equal(p.n, 3);
        assert_int_equal(p.data[2], byte_at(105019));

        /* A daemon message in a chunk of its own, at the next offset. */
        assert_int_equal(sbx_exec_log_append(&l, ERR, "oops\n", 5), 0);
        assert_true(sbx_exec_log_next(&l, &p));
        assert_int_equal(p.offset, 105020);
        assert_int_equal(p.stream, ERR);
        assert_memory_equal(p.data, "oops\n", 5);
        assert_int_equal(l.end, 105025);
        sbx_exec_log_clear(&l);
        assert_null(l.head);
        assert_int_equal(l.held, 0);
        assert_int_equal(l.start, l.end);
}

/* Output switching streams every few bytes: runs share chunks (memory is
 * the bytes plus 4 per switch, not a 64 KiB chunk per switch), each piece
 * is one run, and a seek into a run's middle gives the rest of that run. */
static void test_interleaved_runs_share_chunks(void **state) {
        (void) state;
        struct sbx_exec_log l;
        sbx_exec_log_init(&l, 0, NULL);
        enum { RUNS = 200000 };
        for (unsigned i = 0; i < RUNS; i++)
                feed(&l, i & 1 ? ERR : OUT, 1 + i % 5);
        uint64_t total = l.end;
        /* 600,000 bytes: ten 64 KiB chunks, not 200,000 */
        assert_true(l.held <= total + 64 * 1024);
        struct sbx_exec_log_piece p;
        for (unsigned i = 0; i < RUNS; i++) {
                assert_true(sbx_exec_log_next(&l, &p));
                assert_int_equal(p.stream, i & 1 ? ERR : OUT);
                assert_int_equal(p.n, 1 + i % 5);
                for (size_t k = 0; k < p.n; k++)
                        assert_int_equal(p.data[k], byte_at(p.offset + k));
        }
        assert_false(sbx_exec_log_next(&l, &p));
        assert_int_equal(l.cursor, total);
        /* run 3 (ERR, 4 bytes at offset 1+2+3 = 6): from its second byte */
        assert_int_equal(sbx_exec_log_seek(&l, 7), 0);
        assert_true(sbx_exec_log_next(&l, &p));
        assert_int_equal(p.stream, ERR);
        assert_int_equal(p.offset, 7);
        assert_int_equal(p.n, 3);
        assert_true(sbx_exec_log_next(&l, &p));
        assert_int_equal(p.stream, OUT);
        assert_int_equal(p.n, 5);
        /* a held piece keeps its bytes while another stream goes on in its
         * chunk; the new run is a piece of its own */
        assert_int_equal(sbx_exec_log_seek(&l, total), 0);
        feed(&l, OUT, 2);
        assert_true(sbx_exec_log_next(&l, &p));
        sbx_exec_log_hold(p.chunk);
        struct sbx_exec_log_piece q;
        feed(&l, ERR, 3);
        assert_true(sbx_exec_log_next(&l, &q));
        assert_ptr_equal(q.chunk, p.chunk);
        assert_int_equal(q.stream, ERR);
        assert_int_equal(q.n, 3);
        assert_int_equal(p.data[1], byte_at(p.offset + 1));
        sbx_exec_log_clear(&l);
        assert_int_equal(p.data[0], byte_at(p.offset));
        sbx_exec_log_release(p.chunk);
}

/* Random reads of either stream, appends, seeks and evictions against a
 * model of which stream each offset came from: every piece is one stream,
 * whole runs in order, every byte where the model has it. */
static void test_runs_against_model(void **state) {
        (void) state;
        enum { N = 3u << 20 };
        uint8_t *model = malloc(N); /* the stream of each offset */
        assert_non_null(model);
        struct sbx_exec_log l;
        sbx_exec_log_init(&l, SBX_EXEC_LOG_SIZE_MIN, NULL);
        unsigned seed = 12345;
        while (l.end < N - 70000) {
                seed = seed * 1103515245u + 12345u;
                unsigned r = seed >> 8, stream = 1 + (r & 1);
                size_t n = (r >> 1) % 7 == 0 ? (r >> 4) % 70000 + 1 : (r >> 4) % 40 + 1;
                uint64_t at = l.end;
                if ((r >> 3) % 50 == 0) {
                        uint8_t msg[16];
                        n = n % sizeof(msg) + 1;
                        for (size_t i = 0; i < n; i++)
                                msg[i] = byte_at(at + i);
                        assert_int_equal(sbx_exec_log_append(&l, (int) stream, msg, n), 0);
                } else
                        feed(&l, (int) stream, n);
                memset(model + at, (int) stream, n);
                if ((r >> 9) % 5 == 0)
                        sbx_exec_log_evict(&l, (r >> 12) & 1);
                if ((r >> 14) % 3 == 0) {
                        /* deliver from somewhere in what is kept */
                        uint64_t from = l.start + (r >> 16) % (l.end - l.start + 1);
                        assert_int_equal(sbx_exec_log_seek(&l, from), 0);
                        struct sbx_exec_log_piece p;
                        int prev = 0;
                        const struct sbx_output *prev_chunk = NULL;
                        while (sbx_exec_log_next(&l, &p)) {
                                assert_true(p.n > 0);
                                for (size_t i = 0; i < p.n; i++) {
                                        assert_int_equal(model[p.offset + i], p.stream);
                                        assert_int_equal(p.data[i], byte_at(p.offset + i));
                                }
                                /* a piece ends at a switch, or at a chunk's end */
                                if (prev == p.stream)
                                        assert_ptr_not_equal(prev_chunk, p.chunk);
                                prev = p.stream;
                                prev_chunk = p.chunk;
                        }
                        assert_int_equal(l.cursor, l.end);
                }
        }
        sbx_exec_log_clear(&l);
        free(model);
}

static void test_cursor_seek(void **state) {
        struct sbx_exec_log l;
        sbx_exec_log_init(&l, 0, NULL);
        feed(&l, OUT, 70000);
        feed(&l, ERR, 70000);
        /* Into the middle of the second chunk. */
        assert_int_equal(sbx_exec_log_seek(&l, 100000), 0);
        struct sbx_exec_log_piece p;
        assert_true(sbx_exec_log_next(&l, &p));
        assert_int_equal(p.offset, 100000);
        assert_int_equal(p.n, 40000);
        assert_int_equal(p.stream, ERR);
        assert_int_equal(p.data[0], byte_at(100000));
        /* Back into the first (the cached chunk is behind: search again). */
        assert_int_equal(sbx_exec_log_seek(&l, 1), 0);
        assert_int_equal(deliver_all(&l), 139999);
        /* At the end: nothing; beyond it: -ERANGE, cursor unchanged. */
        assert_int_equal(sbx_exec_log_seek(&l, 140000), 0);
        assert_false(sbx_exec_log_next(&l, &p));
        assert_int_equal(sbx_exec_log_seek(&l, 140001), -ERANGE);
        assert_int_equal(l.cursor, 140000);
        uint64_t from, to;
        assert_false(sbx_exec_log_take_gap(&l, &from, &to));
        sbx_exec_log_clear(&l);
}

static void test_read_ahead_limit(void **state) {
        struct sbx_exec_log l;
        sbx_exec_log_init(&l, 16 * MiB, NULL); /* ahead: 4 MiB */
        assert_true(sbx_exec_log_has_room(&l, false));
        feed(&l, OUT, 3 * MiB);
        /* 3 MiB ahead + a full chunk = 4 MiB: still fits. */
        assert_true(sbx_exec_log_has_room(&l, false));
        feed(&l, OUT, 1);
        assert_false(sbx_exec_log_has_room(&l, false));
        /* Nobody will read: reading goes on (dropping instead). */
        assert_true(sbx_exec_log_has_room(&l, true));
        /* Delivering makes room again. */
        assert_int_equal(deliver_all(&l), 3 * MiB + 1);
        assert_true(sbx_exec_log_has_room(&l, false));
        sbx_exec_log_clear(&l);
}

static void test_history_behind_cursor(void **state) {
        struct sbx_exec_log l;
        sbx_exec_log_init(&l, 16 * MiB, NULL); /* history: 12 MiB */
        for (int i = 0; i < 20; i++) {
                assert_true(sbx_exec_log_has_room(&l, false));
                feed(&l, OUT, MiB);
                assert_int_equal(deliver_all(&l), MiB);
        }
        sbx_exec_log_evict(&l, false);
        /* Chunks ending 12 MiB or more behind the cursor (20 MiB) went. */
        assert_int_equal(l.cursor, 20 * MiB);
        assert_int_equal(l.start, 8 * MiB);
        assert_int_equal(l.held, 12 * MiB);
        /* A client re-attaching inside the history gets exactly its bytes. */
        assert_int_equal(sbx_exec_log_seek(&l, 8 * MiB + 5), 0);
        uint64_t from, to;
        assert_false(sbx_exec_log_take_gap(&l, &from, &to));
        assert_int_equal(deliver_all(&l), 12 * MiB - 5);
        sbx_exec_log_clear(&l);
}

static void test_eviction_gap(void **state) {
        struct sbx_exec_log l;
        sbx_exec_log_init(&l, 16 * MiB, NULL);
        /* Nobody reads and nobody will: the oldest bytes go. */
        for (int i = 0; i < 20; i++) {
                assert_true(sbx_exec_log_has_room(&l, true));
                feed(&l, OUT, MiB);
        }
        sbx_exec_log_evict(&l, true);
        assert_int_equal(l.end, 20 * MiB);
        assert_int_equal(l.start, 5 * MiB); /* room for one more chunk in 16 */
        assert_true(l.end - l.start + SBX_EXEC_LOG_CHUNK_MAX <= l.size);
        /* Attach from offset 0 (evicted): a gap, then the bytes kept. */
        assert_int_equal(sbx_exec_log_seek(&l, 0), 0);
        struct sbx_exec_log_piece p;
        assert_false(sbx_exec_log_next(&l, &p)); /* the gap comes first */
        uint64_t from = 1, to = 1;
        assert_true(sbx_exec_log_take_gap(&l, &from, &to));
        assert_int_equal(from, 0);
        assert_int_equal(to, 5 * MiB);
        assert_false(sbx_exec_log_take_gap(&l, &from, &to));
        assert_true(sbx_exec_log_next(&l, &p));
        assert_int_equal(p.offset, 5 * MiB);
        assert_int_equal(p.data[0], byte_at(5 * MiB));
        assert_int_equal(deliver_all(&l), 15 * MiB - p.n);
        /* Beyond the output so far: refused. */
        assert_int_equal(sbx_exec_log_seek(&l, 20 * MiB + 1), -ERANGE);
        sbx_exec_log_clear(&l);
}

static void test_unread_kept_when_someone_will_read(void **state) {
        struct sbx_exec_log l;
        sbx_exec_log_init(&l, 4 * MiB, NULL); /* the minimum */
        feed(&l, OUT, 3 * MiB);
        /* Without drop_unread nothing unread is evicted. */
        sbx_exec_log_evict(&l, false);
        assert_int_equal(l.start, 0);
        assert_int_equal(deliver_all(&l), 3 * MiB);
        sbx_exec_log_clear(&l);
}

static void test_size_minimum(void **state) {
        struct sbx_exec_log l;
        sbx_exec_log_init(&l, 1000, NULL);
        assert_int_equal(l.size, SBX_EXEC_LOG_SIZE_MIN);
}

static void test_chunk_recycling(void **state) {
        struct sbx_exec_log_pool *pool = NULL;
        assert_int_equal(sbx_exec_log_pool_new(&pool), 0);
        struct sbx_exec_log l;
        sbx_exec_log_init(&l, 0, pool);
        size_t room;
        uint8_t *a = sbx_exec_log_reserve(&l, OUT, 4 * MiB, &room);
        assert_non_null(a);
        assert_int_equal(room, SBX_EXEC_LOG_CHUNK_MAX);
        memset(a, 'a', room);
        assert_true(sbx_exec_log_commit(&l, room)); /* full */
        /* A small chunk is not pooled. */
        uint8_t *b = sbx_exec_log_reserve(&l, ERR, 10, &room);
        assert_int_equal(room, 64 * 1024);
        b[0] = 'b';
        assert_false(sbx_exec_log_commit(&l, 1));
        sbx_exec_log_clear(&l);
        assert_int_equal(sbx_exec_log_pool_idle(pool), 1);
        /* The next full-size chunk is the same memory. */
        uint8_t *c = sbx_exec_log_reserve(&l, OUT, 2 * MiB, &room);
        assert_ptr_equal(c, a);
        assert_int_equal(sbx_exec_log_pool_idle(pool), 0);
        /* Nothing read: the fresh chunk goes back, the log is unchanged. */
        uint64_t end = l.end;
        assert_false(sbx_exec_log_commit(&l, 0));
        assert_int_equal(sbx_exec_log_pool_idle(pool), 1);
        assert_int_equal(l.end, end);
        assert_null(l.head);
        sbx_exec_log_clear(&l);
        sbx_exec_log_pool_close(pool);
}

static void test_hold_keeps_dropped_chunk(void **state) {
        struct sbx_exec_log_pool *pool = NULL;
        assert_int_equal(sbx_exec_log_pool_new(&pool), 0);
        struct sbx_exec_log l;
        sbx_exec_log_init(&l, 0, pool);
        feed(&l, OUT, SBX_EXEC_LOG_CHUNK_MAX);
        struct sbx_exec_log_piece p;
        assert_true(sbx_exec_log_next(&l, &p));
        sbx_exec_log_hold(p.chunk); /* a zero-copy send in flight */
        sbx_exec_log_clear(&l);
        /* Dropped by the log but not recycled: still the bytes sent. */
        assert_int_equal(sbx_exec_log_pool_idle(pool), 0);
        assert_int_equal(p.data[0], byte_at(0));
        assert_int_equal(p.data[p.n - 1], byte_at(p.n - 1));
        /* A new chunk meanwhile is other memory. */
        size_t room;
        uint8_t *d = sbx_exec_log_reserve(&l, OUT, SBX_EXEC_LOG_CHUNK_MAX, &room);
        assert_ptr_not_equal(d, p.data);
        sbx_exec_log_commit(&l, 0);
        assert_int_equal(sbx_exec_log_pool_idle(pool), 1);
        sbx_exec_log_release(p.chunk);
        assert_int_equal(sbx_exec_log_pool_idle(pool), 2);

        /* A hold outliving the pool's owner: the chunk (and the pool) are
         * freed with the release (ASan checks). */
        feed(&l, OUT, 10);
        assert_true(sbx_exec_log_next(&l, &p));
        sbx_exec_log_hold(p.chunk);
        sbx_exec_log_clear(&l);
        sbx_exec_log_pool_close(pool);
        assert_int_equal(p.n, 10);
        assert_int_equal(p.data[0], byte_at(p.offset));
        assert_int_equal(p.data[9], byte_at(p.offset + 9));
        sbx_exec_log_release(p.chunk);
        sbx_exec_log_release(NULL);
}

/* --- the spool's .meta file (exec-spool.h) --- */

static size_t meta_sample(uint8_t **ret, size_t runs) {
        char *argv[] = {"sh", "-c", "echo hi", NULL};
        struct sbx_spool_hdr h = {.id = 42,
                                  .started_ns = 1000,
                                  .log_size = 16 * MiB,
                                  .deadline_ns = 5000,
                                  .flags = SBX_SPOOL_DETACH};
        uint8_t *b = NULL;
        int n = sbx_spool_meta_encode(&h, argv, &b);
        assert_true(n > 0);
        b = realloc(b, (size_t) n + runs * sizeof(struct sbx_spool_run));
        for (size_t i = 0; i < runs; i++) {
                struct sbx_spool_run r = {
                        .offset = i * 10, .stream = 1 + (i & 1), .magic = SBX_SPOOL_RUN_MAGIC};
                memcpy(b + n + i * sizeof(r), &r, sizeof(r));
        }
        *ret = b;
        return (size_t) n + runs * sizeof(struct sbx_spool_run);
}

static void test_spool_meta_round_trip(void **state) {
        (void) state;
        uint8_t *b;
        size_t n = meta_sample(&b, 3);
        struct sbx_spool_meta m;
        assert_int_equal(sbx_spool_meta_decode(b, n, &m), 0);
        assert_int_equal(m.hdr.id, 42);
        assert_int_equal(m.hdr.argc, 3);
        assert_string_equal(m.argv[0], "sh");
        assert_string_equal(m.argv[2], "echo hi");
        assert_null(m.argv[3]);
        assert_int_equal(m.n_runs, 3);
        assert_int_equal(m.runs[1].stream, 2);
        assert_int_equal(m.runs[2].offset, 20);
        assert_int_equal(m.hdr.done, 0);
        sbx_spool_meta_done(&m);

        /* the exit, written in place */
        struct sbx_spool_hdr h;
        memcpy(&h, b, sizeof(h));
        h.exit_code = 3;
        h.done = 1;
        memcpy(b, &h, sizeof(h));
        /* a torn last record (a crash while appending) is ignored */
        assert_int_equal(sbx_spool_meta_decode(b, n - 5, &m), 0);
        assert_int_equal(m.n_runs, 2);
        assert_int_equal(m.hdr.done, 1);
        assert_int_equal(m.hdr.exit_code, 3);
        sbx_spool_meta_done(&m);

        /* records punched out (zeros) before the whole ones are skipped;
         * a zero record after a whole one is not a punched one */
        size_t head = n - 3 * sizeof(struct sbx_spool_run);
        memset(b + head, 0, 2 * sizeof(struct sbx_spool_run));
        assert_int_equal(sbx_spool_meta_decode(b, n, &m), 0);
        assert_int_equal(m.n_runs, 1);
        assert_int_equal(m.runs[0].offset, 20);
        sbx_spool_meta_done(&m);
        memset(b + head, 0, 3 * sizeof(struct sbx_spool_run));
        assert_int_equal(sbx_spool_meta_decode(b, n, &m), 0);
        assert_int_equal(m.n_runs, 0);
        sbx_spool_meta_done(&m);
        free(b);
        n = meta_sample(&b, 3);
        memset(b + n - sizeof(struct sbx_spool_run), 0, sizeof(struct sbx_spool_run));
        assert_int_equal(sbx_spool_meta_decode(b, n, &m), -EBADMSG);
        free(b);
}

static void test_spool_meta_malformed(void **state) {
        (void) state;
        uint8_t *b;
        size_t n = meta_sample(&b, 2);
        struct sbx_spool_meta m;
        /* every proper prefix shorter than header + argv is refused */
        struct sbx_spool_hdr h;
        memcpy(&h, b, sizeof(h));
        for (size_t k = 0; k < sizeof(h) + h.argv_len; k++)
                assert_int_equal(sbx_spool_meta_decode(b, k, &m), -EBADMSG);
        /* a bad field each */
        size_t offs[] = {0,
                         __builtin_offsetof(struct sbx_spool_hdr, flags),
                         __builtin_offsetof(struct sbx_spool_hdr, argc),
                         __builtin_offsetof(struct sbx_spool_hdr, argv_len),
                         __builtin_offsetof(struct sbx_spool_hdr, reserved),
                         __builtin_offsetof(struct sbx_spool_hdr, done)};
        for (size_t i = 0; i < sizeof(offs) / sizeof(offs[0]); i++) {
                uint8_t *c = malloc(n);
                memcpy(c, b, n);
                c[offs[i]] ^= 0x40;
                assert_int_equal(sbx_spool_meta_decode(c, n, &m), -EBADMSG);
                free(c);
        }
        /* runs out of order, bad stream, bad magic */
        for (int v = 0; v < 3; v++) {
                uint8_t *c = malloc(n);
                memcpy(c, b, n);
                struct sbx_spool_run *r = (struct sbx_spool_run *) (c + n - sizeof(*r));
                struct sbx_spool_run x;
                memcpy(&x, r, sizeof(x));
                if (v == 0)
                        x.offset = 0,
                        memcpy(c + n - 2 * sizeof(x),
                               &(struct sbx_spool_run){
                                       .offset = 99, .stream = 1, .magic = SBX_SPOOL_RUN_MAGIC},
                               sizeof(x));
                else if (v == 1)
                        x.stream = 3;
                else
                        x.magic = 0;
                memcpy(r, &x, sizeof(x));
                assert_int_equal(sbx_spool_meta_decode(c, n, &m), -EBADMSG);
                free(c);
        }
        /* an empty argv[0] */
        char *argv[] = {"", NULL};
        struct sbx_spool_hdr z = {.id = 1};
        uint8_t *e = NULL;
        int k = sbx_spool_meta_encode(&z, argv, &e);
        assert_true(k > 0);
        assert_int_equal(sbx_spool_meta_decode(e, (size_t) k, &m), -EBADMSG);
        free(e);
        free(b);
}

static void test_restart_at(void **state) {
        (void) state;
        struct sbx_exec_log l;
        sbx_exec_log_init(&l, 0, NULL);
        sbx_exec_log_restart_at(&l, 5 * MiB);
        assert_int_equal(l.start, 5 * MiB);
        assert_int_equal(l.end, 5 * MiB);
        assert_int_equal(sbx_exec_log_append(&l, OUT, "abc", 3), 0);
        assert_int_equal(l.end, 5 * MiB + 3);
        /* an attach from before the restart point is a gap */
        assert_int_equal(sbx_exec_log_seek(&l, 0), 0);
        uint64_t from, to;
        assert_true(sbx_exec_log_take_gap(&l, &from, &to));
        assert_int_equal(from, 0);
        assert_int_equal(to, 5 * MiB);
        struct sbx_exec_log_piece p;
        assert_true(sbx_exec_log_next(&l, &p));
        assert_int_equal(p.offset, 5 * MiB);
        assert_memory_equal(p.data, "abc", 3);
        /* only an empty log moves */
        sbx_exec_log_restart_at(&l, 0);
        assert_int_equal(l.start, 5 * MiB);
        sbx_exec_log_clear(&l);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_offsets_across_chunks),
                cmocka_unit_test(test_interleaved_runs_share_chunks),
                cmocka_unit_test(test_runs_against_model),
                cmocka_unit_test(test_cursor_seek),
                cmocka_unit_test(test_read_ahead_limit),
                cmocka_unit_test(test_history_behind_cursor),
                cmocka_unit_test(test_eviction_gap),
                cmocka_unit_test(test_unread_kept_when_someone_will_read),
                cmocka_unit_test(test_size_minimum),
                cmocka_unit_test(test_chunk_recycling),
                cmocka_unit_test(test_hold_keeps_dropped_chunk),
                cmocka_unit_test(test_spool_meta_round_trip),
                cmocka_unit_test(test_spool_meta_malformed),
                cmocka_unit_test(test_restart_at),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
