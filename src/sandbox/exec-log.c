/* SPDX-License-Identifier: Apache-2.0 */
/* The bounded, sequence-numbered output log of an exec session (see
 * exec-log.h for the model). */
#include "sandbox/exec-log.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* Room left in the tail chunk worth reading into rather than starting a
 * new chunk. */
#define MIN_ROOM 4096
/* Smallest fresh chunk. */
#define NEW_CHUNK (64 * 1024)
/* Full-size chunks kept for reuse: fresh ones would be mmapped, faulted in
 * and unmapped again for every read of a fast stream. */
#define POOL_MAX 4
/* A run record: its first byte's place in the chunk (< 2^30: a chunk is at
 * most SBX_EXEC_LOG_CHUNK_MAX) and its stream (1 or 2). */
#define RUN(at, stream) (((uint32_t) (at) << 2) | (uint32_t) (stream))
#define RUN_AT(r) ((size_t) ((r) >> 2))
#define RUN_STREAM(r) ((int) ((r) &3u))
_Static_assert(SBX_EXEC_LOG_CHUNK_MAX < (1u << 30), "run offsets fit in 30 bits");

struct sbx_output {
        struct sbx_output *next;
        struct sbx_exec_log_pool *pool; /* NULL: plain malloc/free */
        uint64_t off;                   /* offset of data[0] in the sequence */
        size_t len, cap;
        int stream;    /* of the bytes from data[0] on (the chunk's first run) */
        unsigned refs; /* the log's, and one per hold */
        /* The chunk's further runs, in order: each is RUN(at, stream), a
         * switch to stream at data[at] (at > 0, increasing, alternating
         * streams). Heap, n_runs of runs_cap used; NULL until needed. */
        uint32_t *runs;
        uint32_t n_runs, runs_cap;
        uint8_t data[];
};

struct sbx_exec_log_pool {
        size_t live; /* chunks made from this pool and not freed (idle included) */
        size_t n;    /* idle chunks in idle[] */
        bool closed; /* the owner let go: free once live reaches 0 */
        struct sbx_output *idle[POOL_MAX];
};

int sbx_exec_log_pool_new(struct sbx_exec_log_pool **ret) {
        struct sbx_exec_log_pool *p = calloc(1, sizeof(*p));
        if (!p)
                return -ENOMEM;
        *ret = p;
        return 0;
}

void sbx_exec_log_pool_close(struct sbx_exec_log_pool *p) {
        if (!p)
                return;
        while (p->n > 0) {
                free(p->idle[--p->n]);
                p->live--;
        }
        p->closed = true;
        if (p->live == 0)
                free(p);
}

size_t sbx_exec_log_pool_idle(const struct sbx_exec_log_pool *p) {
        return p ? p->n : 0;
}

static struct sbx_output *chunk_new(struct sbx_exec_log_pool *p, size_t cap) {
        struct sbx_output *c;
        if (p && cap == SBX_EXEC_LOG_CHUNK_MAX && p->n > 0)
                c = p->idle[--p->n];
        else {
                c = malloc(sizeof(*c) + cap);
                if (!c)
                        return NULL;
                if (p)
                        p->live++;
        }
        *c = (struct sbx_output){.pool = p, .cap = cap, .refs = 1};
        return c;
}

/* Drop a reference: the last one recycles a full-size chunk into its open
 * pool, or frees it (and a closed pool with it once its last chunk is
 * gone). */
static void chunk_unref(struct sbx_output *c) {
        if (!c || --c->refs > 0)
                return;
        struct sbx_exec_log_pool *p = c->pool;
        free(c->runs);
        c->runs = NULL;
        if (p && !p->closed && c->cap == SBX_EXEC_LOG_CHUNK_MAX && p->n < POOL_MAX) {
                p->idle[p->n++] = c;
                return;
        }
        free(c);
        if (p && --p->live == 0 && p->closed)
                free(p);
}

void sbx_exec_log_hold(struct sbx_output *chunk) {
        chunk->refs++;
}

void sbx_exec_log_release(void *chunk) {
        chunk_unref(chunk);
}

void sbx_exec_log_init(struct sbx_exec_log *l, size_t size, struct sbx_exec_log_pool *pool) {
        if (size == 0)
                size = SBX_EXEC_LOG_SIZE_DEFAULT;
        *l = (struct sbx_exec_log){
                .size = size < SBX_EXEC_LOG_SIZE_MIN ? SBX_EXEC_LOG_SIZE_MIN : size,
                .pool = pool,
        };
}

void sbx_exec_log_restart_at(struct sbx_exec_log *l, uint64_t offset) {
        if (l->head || l->pending)
                return;
        l->start = l->end = l->cursor = offset;
}

void sbx_exec_log_clear(struct sbx_exec_log *l) {
        if (!l)
                return;
        while (l->head) {
                struct sbx_output *c = l->head;
                l->head = c->next;
                chunk_unref(c);
        }
        chunk_unref(l->pending);
        l->pending = NULL;
        l->tail = l->cur = NULL;
        l->held = 0;
        l->start = l->end;
}

/* Bytes kept behind the cursor, and read ahead of it. */
static size_t history_cap(const struct sbx_exec_log *l) {
        return l->size - l->size / 4;
}

static size_t ahead_cap(const struct sbx_exec_log *l) {
        return l->size / 4;
}

static void link_tail(struct sbx_exec_log *l, struct sbx_output *c) {
        if (l->tail)
                l->tail->next = c;
        else {
                l->head = c;
                l->start = c->off;
        }
        l->tail = c;
        l->held += c->cap;
}

static void drop_head(struct sbx_exec_log *l) {
        struct sbx_output *c = l->head;
        l->head = c->next;
        if (!l->head)
                l->tail = NULL;
        if (l->cur == c)
                l->cur = NULL;
        l->held -= c->cap;
        l->start = l->head ? l->head->off : l->end;
        chunk_unref(c);
}

/* The stream the tail of chunk c holds (its last run's). */
static int last_stream(const struct sbx_output *c) {
        return c->n_runs ? RUN_STREAM(c->runs[c->n_runs - 1]) : c->stream;
}

/* Make sure one more run record fits in c (commit cannot fail). */
static int runs_reserve(struct sbx_output *c) {
        if (c->n_runs < c->runs_cap)
                return 0;
        uint32_t cap = c->runs_cap ? c->runs_cap * 2 : 16;
        uint32_t *r = realloc(c->runs, cap * sizeof(*r));
        if (!r)
                return -ENOMEM;
        c->runs = r;
        c->runs_cap = cap;
        return 0;
}

uint8_t *sbx_exec_log_reserve(struct sbx_exec_log *l, int stream, size_t hint, size_t *room) {
        struct sbx_output *c = l->tail;
        l->pending_stream = stream;
        if (c && c->cap - c->len >= MIN_ROOM &&
            (last_stream(c) == stream || runs_reserve(c) == 0)) {
                *room = c->cap - c->len;
                return c->data + c->len;
        }
        size_t cap = hint < NEW_CHUNK                ? NEW_CHUNK
                     : hint > SBX_EXEC_LOG_CHUNK_MAX ? SBX_EXEC_LOG_CHUNK_MAX
                                                     : hint;
        c = chunk_new(l->pool, cap);
        if (!c)
                return NULL;
        c->off = l->end;
        c->stream = stream;
        l->pending = c;
        *room = cap;
        return c->data;
}

bool sbx_exec_log_commit(struct sbx_exec_log *l, size_t n) {
        struct sbx_output *c = l->pending ? l->pending : l->tail;
        l->pending = NULL;
        if (n == 0) {
                if (c != l->tail)
                        chunk_unref(c);
                return false;
        }
        if (c != l->tail)
                link_tail(l, c);
        else if (last_stream(c) != l->pending_stream)
                /* room for it was made by reserve */
                c->runs[c->n_runs++] = RUN(c->len, l->pending_stream);
        c->len += n;
        l->end += n;
        return c->len == c->cap;
}

int sbx_exec_log_append(struct sbx_exec_log *l, int stream, const void *data, size_t n) {
        if (n == 0)
                return 0;
        struct sbx_output *c = chunk_new(NULL, n);
        if (!c)
                return -ENOMEM;
        c->off = l->end;
        c->len = n;
        c->stream = stream;
        memcpy(c->data, data, n);
        link_tail(l, c);
        l->end += n;
        return 0;
}

void sbx_exec_log_evict(struct sbx_exec_log *l, bool drop_unread) {
        while (l->head && l->head->off + l->head->len <= l->cursor &&
               l->cursor - (l->head->off + l->head->len) >= history_cap(l))
                drop_head(l);
        if (drop_unread)
                while (l->head && l->end - l->start + SBX_EXEC_LOG_CHUNK_MAX > l->size)
                        drop_head(l);
}

bool sbx_exec_log_has_room(struct sbx_exec_log *l, bool drop_unread) {
        sbx_exec_log_evict(l, drop_unread);
        return drop_unread || l->end < l->cursor ||
               l->end - l->cursor + SBX_EXEC_LOG_CHUNK_MAX <= ahead_cap(l);
}

int sbx_exec_log_seek(struct sbx_exec_log *l, uint64_t offset) {
        if (offset > l->end)
                return -ERANGE;
        l->cursor = offset;
        l->cur = NULL;
        return 0;
}

bool sbx_exec_log_take_gap(struct sbx_exec_log *l, uint64_t *from, uint64_t *to) {
        if (l->cursor >= l->start)
                return false;
        *from = l->cursor;
        *to = l->start;
        l->cursor = l->start;
        return true;
}

bool sbx_exec_log_next(struct sbx_exec_log *l, struct sbx_exec_log_piece *p) {
        if (l->cursor >= l->end || l->cursor < l->start)
                return false;
        struct sbx_output *c = l->cur && l->cur->off <= l->cursor ? l->cur : l->head;
        while (c && c->off + c->len <= l->cursor)
                c = c->next;
        if (!c)
                return false;
        size_t skip = (size_t) (l->cursor - c->off), stop = c->len;
        int stream = c->stream;
        /* the run holding skip: the last one at or before it (binary
         * search), and the next one's start ends the piece */
        size_t lo = 0, hi = c->n_runs;
        while (lo < hi) {
                size_t mid = lo + (hi - lo) / 2;
                if (RUN_AT(c->runs[mid]) <= skip)
                        lo = mid + 1;
                else
                        hi = mid;
        }
        if (lo > 0)
                stream = RUN_STREAM(c->runs[lo - 1]);
        if (lo < c->n_runs)
                stop = RUN_AT(c->runs[lo]);
        *p = (struct sbx_exec_log_piece){
                .chunk = c,
                .data = c->data + skip,
                .n = stop - skip,
                .offset = l->cursor,
                .stream = stream,
        };
        l->cursor += p->n;
        l->cur = c;
        return true;
}
