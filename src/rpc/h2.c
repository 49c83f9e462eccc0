/* SPDX-License-Identifier: Apache-2.0 */
#include "rpc/h2.h"

#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/err.h>

#include "basic/log.h"
#include "basic/macro.h"
#include "rpc/grpc.h"

/* --- memory --- */

#if defined(__SANITIZE_ADDRESS__)
#define MEM_NO_CACHE 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define MEM_NO_CACHE 1
#endif
#endif

/* Every block starts with this header; size 0 = malloc'd. */
#define MEM_HDR 16u
#define MEM_BIG (128u * 1024u)
#define MEM_ROUND (64u * 1024u)
#define MEM_CACHE_SLOTS 8
#define MEM_CACHE_BYTES (16u << 20)

struct mem_cache {
        void *blk[MEM_CACHE_SLOTS];
        size_t size[MEM_CACHE_SLOTS];
        size_t n, bytes;
};
static _Thread_local struct mem_cache mem_cache;

void *h2_mem_alloc(size_t n) {
        if (n > SIZE_MAX - MEM_HDR - MEM_ROUND)
                return NULL;
        size_t total = n + MEM_HDR;
        uint8_t *p;
#ifndef MEM_NO_CACHE
        if (total >= MEM_BIG) {
                /* The smallest block that fits; of equal ones the most
                 * recently freed (still in the CPU cache). */
                struct mem_cache *mc = &mem_cache;
                size_t best = SIZE_MAX;
                for (size_t i = mc->n; i-- > 0;)
                        if (mc->size[i] >= total &&
                            (best == SIZE_MAX || mc->size[i] < mc->size[best]))
                                best = i;
                size_t size;
                if (best != SIZE_MAX) {
                        p = mc->blk[best];
                        size = mc->size[best];
                        mc->bytes -= size;
                        mc->n--;
                        memmove(&mc->blk[best], &mc->blk[best + 1],
                                (mc->n - best) * sizeof(mc->blk[0]));
                        memmove(&mc->size[best], &mc->size[best + 1],
                                (mc->n - best) * sizeof(mc->size[0]));
                } else {
                        size = (total + MEM_ROUND - 1) / MEM_ROUND * MEM_ROUND;
                        p = mmap(NULL, size, PROT_READ | PROT_WRITE,
                                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
                        if (p == MAP_FAILED)
                                return NULL;
                }
                *(size_t *) p = size;
                return p + MEM_HDR;
        }
#endif
        p = malloc(total);
        if (!p)
                return NULL;
        *(size_t *) p = 0;
        return p + MEM_HDR;
}

void h2_mem_free(void *ptr) {
        if (!ptr)
                return;
        uint8_t *p = (uint8_t *) ptr - MEM_HDR;
        size_t size = *(size_t *) p;
        if (size == 0) {
                free(p);
                return;
        }
        struct mem_cache *mc = &mem_cache;
        if (mc->n < MEM_CACHE_SLOTS && mc->bytes + size <= MEM_CACHE_BYTES) {
                mc->blk[mc->n] = p;
                mc->size[mc->n] = size;
                mc->n++;
                mc->bytes += size;
                return;
        }
        munmap(p, size);
}

void h2_mem_trim(void) {
        struct mem_cache *mc = &mem_cache;
        for (size_t i = 0; i < mc->n; i++)
                munmap(mc->blk[i], mc->size[i]);
        mc->n = mc->bytes = 0;
}

size_t h2_mem_cached(void) {
        return mem_cache.bytes;
}

static void *pb_alloc(void *data, size_t n) {
        return h2_mem_alloc(n);
}

static void pb_free(void *data, void *p) {
        h2_mem_free(p);
}

ProtobufCAllocator h2_pb_allocator = {.alloc = pb_alloc, .free = pb_free};

/* --- buffers --- */

uint8_t *h2_buf_reserve(struct h2_buf *b, size_t n) {
        if (b->cap - b->len < n) {
                size_t cap = b->cap ? b->cap : 4096;
                while (cap - b->len < n)
                        cap *= 2;
                uint8_t *p = realloc(b->data, cap);
                if (!p)
                        return NULL;
                b->data = p;
                b->cap = cap;
        }
        return b->data + b->len;
}

int h2_buf_append(struct h2_buf *b, const void *p, size_t n) {
        uint8_t *d = h2_buf_reserve(b, n);
        if (!d)
                return -ENOMEM;
        if (n)
                memcpy(d, p, n);
        b->len += n;
        return 0;
}

/* Keep a buffer's storage for the next burst, unless it is huge. */
static void buf_reset(struct h2_buf *b) {
        b->len = 0;
        if (b->cap > 4u * 1024 * 1024) {
                free(b->data);
                b->data = NULL;
                b->cap = 0;
        }
}

void h2_buf_consume(struct h2_buf *b, size_t n) {
        if (n >= b->len) {
                buf_reset(b);
                return;
        }
        memmove(b->data, b->data + n, b->len - n);
        b->len -= n;
}

void h2_buf_free(struct h2_buf *b) {
        free(b->data);
        b->data = NULL;
        b->len = b->cap = 0;
}

/* --- message queue --- */

static void chunk_unref(struct h2_chunk *c) {
        if (--c->refs > 0)
                return;
        if (c->release)
                c->release(c->arg);
        h2_mem_free(c);
}

static struct h2_chunk *chunk_new(size_t n, size_t max) {
        if ((max && n > max) || n > UINT32_MAX)
                return NULL;
        struct h2_chunk *c = h2_mem_alloc(sizeof(*c) + GRPC_FRAME_HEADER + n);
        if (!c)
                return NULL;
        grpc_frame_header(c->data, n);
        c->len = GRPC_FRAME_HEADER + n;
        c->off = 0;
        c->refs = 1;
        c->next = NULL;
        c->ext = NULL;
        c->release = NULL;
        return c;
}

static void msgq_append(struct h2_msgq *q, struct h2_chunk *c) {
        if (q->tail)
                q->tail->next = c;
        else
                q->head = c;
        q->tail = c;
        q->bytes += c->len - c->off;
}

struct h2_chunk *h2_chunk_new(size_t cap) {
        if (cap > UINT32_MAX)
                return NULL;
        struct h2_chunk *c = h2_mem_alloc(sizeof(*c) + GRPC_FRAME_HEADER + cap);
        if (!c)
                return NULL;
        c->len = GRPC_FRAME_HEADER + cap;
        c->off = 0;
        c->refs = 1;
        c->next = NULL;
        c->ext = NULL;
        c->release = NULL;
        return c;
}

void h2_chunk_unref(struct h2_chunk *c) {
        if (c)
                chunk_unref(c);
}

int h2_msgq_push_chunk(struct h2_msgq *q, struct h2_chunk *c, size_t off, size_t len, size_t max) {
        if (off > c->len - GRPC_FRAME_HEADER || len > c->len - GRPC_FRAME_HEADER - off)
                return -EINVAL;
        if ((max && len > max) || len > UINT32_MAX)
                return -EMSGSIZE;
        /* The prefix goes right before the message, in the head room. */
        grpc_frame_header(c->data + off, len);
        c->off = off;
        c->len = off + GRPC_FRAME_HEADER + len;
        msgq_append(q, c);
        return 0;
}

int h2_msgq_push(struct h2_msgq *q, const ProtobufCMessage *msg, size_t max) {
        size_t n = protobuf_c_message_get_packed_size(msg);
        if ((max && n > max) || n > UINT32_MAX)
                return -EMSGSIZE;
        struct h2_chunk *c = chunk_new(n, max);
        if (!c)
                return -ENOMEM;
        protobuf_c_message_pack(msg, c->data + GRPC_FRAME_HEADER);
        msgq_append(q, c);
        return 0;
}

int h2_msgq_push_ref(struct h2_msgq *q, const void *head, size_t head_len, const void *data,
                     size_t len, void (*release)(void *arg), void *arg, size_t max) {
        size_t n = head_len + len;
        struct h2_chunk *h = n >= head_len && n <= UINT32_MAX ? chunk_new(head_len, 0) : NULL;
        struct h2_chunk *r = h && len ? h2_mem_alloc(sizeof(*r)) : NULL;
        if ((max && n > max) || n < head_len || n > UINT32_MAX || !h || (len && !r)) {
                if (h)
                        chunk_unref(h);
                if (release)
                        release(arg);
                return (max && n > max) || n < head_len || n > UINT32_MAX ? -EMSGSIZE : -ENOMEM;
        }
        /* The prefix counts the referenced bytes too. */
        grpc_frame_header(h->data, n);
        if (head_len)
                memcpy(h->data + GRPC_FRAME_HEADER, head, head_len);
        msgq_append(q, h);
        if (!len) {
                if (release)
                        release(arg);
                return 0;
        }
        *r = (struct h2_chunk){.len = len, .refs = 1, .ext = data, .release = release, .arg = arg};
        msgq_append(q, r);
        return 0;
}

int h2_msgq_push_packed(struct h2_msgq *q, const void *data, size_t len, size_t max) {
        if ((max && len > max) || len > UINT32_MAX)
                return -EMSGSIZE;
        struct h2_chunk *c = chunk_new(len, max);
        if (!c)
                return -ENOMEM;
        if (len)
                memcpy(c->data + GRPC_FRAME_HEADER, data, len);
        msgq_append(q, c);
        return 0;
}

/* Drop the front chunk, which has been consumed. */
static void msgq_pop(struct h2_msgq *q) {
        struct h2_chunk *c = q->head;
        q->head = c->next;
        if (!q->head)
                q->tail = NULL;
        c->next = NULL;
        chunk_unref(c);
}

size_t h2_msgq_read(struct h2_msgq *q, uint8_t *out, size_t len) {
        size_t done = 0;
        while (done < len && q->head) {
                struct h2_chunk *c = q->head;
                size_t take = MIN(c->len - c->off, len - done);
                memcpy(out + done, h2_chunk_bytes(c) + c->off, take);
                c->off += take;
                done += take;
                if (c->off == c->len)
                        msgq_pop(q);
        }
        q->bytes -= done;
        return done;
}

void h2_msgq_clear(struct h2_msgq *q) {
        while (q->head)
                msgq_pop(q);
        q->bytes = 0;
}

/* --- inbox --- */

int h2_inbox_push(void *inbox, uint8_t *msg, size_t len) {
        struct h2_inbox *b = inbox;
        struct h2_inmsg *im = malloc(sizeof(*im));
        if (!im) {
                h2_mem_free(msg);
                return -ENOMEM;
        }
        *im = (struct h2_inmsg){.data = msg, .len = len};
        if (b->tail)
                b->tail->next = im;
        else
                b->head = im;
        b->tail = im;
        return 0;
}

bool h2_inbox_pop(struct h2_inbox *b, uint8_t **data, size_t *len) {
        struct h2_inmsg *im = b->head;
        if (!im)
                return false;
        b->head = im->next;
        if (!b->head)
                b->tail = NULL;
        *data = im->data;
        *len = im->len;
        free(im);
        return true;
}

void h2_inbox_clear(struct h2_inbox *b) {
        uint8_t *data;
        size_t len;
        while (h2_inbox_pop(b, &data, &len))
                h2_mem_free(data);
}

/* --- output queue --- */

static struct h2_seg *outq_seg(struct h2_outq *q) {
        if (q->n == q->cap) {
                size_t cap = q->cap ? q->cap * 2 : 16;
                struct h2_seg *s = realloc(q->segs, cap * sizeof(*s));
                if (!s)
                        return NULL;
                q->segs = s;
                uv_buf_t *iov = realloc(q->iov, cap * sizeof(*iov));
                if (!iov)
                        return NULL;
                q->iov = iov;
                q->cap = cap;
        }
        return &q->segs[q->n];
}

/* Room for n bytes at the end of the byte buffer; outq_commit adds them. */
static uint8_t *outq_reserve(struct h2_outq *q, size_t n) {
        return h2_buf_reserve(&q->bytes, n);
}

static int outq_commit(struct h2_outq *q, size_t n) {
        if (n == 0)
                return 0;
        struct h2_seg *last = q->n > q->head ? &q->segs[q->n - 1] : NULL;
        if (last && !last->chunk && last->off + last->len == q->bytes.len)
                last->len += n;
        else {
                struct h2_seg *s = outq_seg(q);
                if (!s)
                        return -ENOMEM;
                *s = (struct h2_seg){.chunk = NULL, .off = q->bytes.len, .len = n};
                q->n++;
        }
        q->bytes.len += n;
        q->total += n;
        return 0;
}

static int outq_append(struct h2_outq *q, const void *p, size_t n) {
        uint8_t *d = outq_reserve(q, n);
        if (!d)
                return -ENOMEM;
        memcpy(d, p, n);
        return outq_commit(q, n);
}

/* Move len bytes from the front of msgq to the output by reference. */
static int outq_take(struct h2_outq *q, struct h2_msgq *mq, size_t len) {
        while (len > 0 && mq->head) {
                struct h2_chunk *c = mq->head;
                size_t take = MIN(c->len - c->off, len);
                struct h2_seg *s = outq_seg(q);
                if (!s)
                        return -ENOMEM;
                *s = (struct h2_seg){.chunk = c, .off = c->off, .len = take};
                q->n++;
                c->refs++;
                c->off += take;
                mq->bytes -= take;
                q->total += take;
                len -= take;
                if (c->off == c->len)
                        msgq_pop(mq);
        }
        return len == 0 ? 0 : -EIO;
}

/* Drop n written bytes from the front. */
static void outq_consume(struct h2_outq *q, size_t n) {
        q->total -= n;
        while (n > 0) {
                struct h2_seg *s = &q->segs[q->head];
                if (n < s->len) {
                        s->off += n;
                        s->len -= n;
                        return;
                }
                n -= s->len;
                if (s->chunk)
                        chunk_unref(s->chunk);
                q->head++;
        }
        if (q->head == q->n) {
                q->head = q->n = 0;
                buf_reset(&q->bytes);
        }
}

/* Drop everything (written or abandoned). */
static void outq_clear(struct h2_outq *q) {
        for (size_t i = q->head; i < q->n; i++)
                if (q->segs[i].chunk)
                        chunk_unref(q->segs[i].chunk);
        q->head = q->n = q->total = 0;
        buf_reset(&q->bytes);
}

static void outq_free(struct h2_outq *q) {
        outq_clear(q);
        h2_buf_free(&q->bytes);
        free(q->segs);
        free(q->iov);
        q->segs = NULL;
        q->iov = NULL;
        q->cap = 0;
}

/* The unwritten segments as uv buffers; returns their count. */
static unsigned outq_iov(struct h2_outq *q) {
        unsigned k = 0;
        for (size_t i = q->head; i < q->n; i++) {
                const struct h2_seg *s = &q->segs[i];
                const uint8_t *p =
                        s->chunk ? h2_chunk_bytes(s->chunk) + s->off : q->bytes.data + s->off;
                q->iov[k++] = uv_buf_init((char *) p, (unsigned) s->len);
        }
        return k;
}

/* --- timer heap --- */

static void heap_swap(struct h2_timers *ts, size_t a, size_t b) {
        struct h2_timer *t = ts->heap[a];
        ts->heap[a] = ts->heap[b];
        ts->heap[b] = t;
        ts->heap[a]->idx = a + 1;
        ts->heap[b]->idx = b + 1;
}

static void heap_up(struct h2_timers *ts, size_t i) {
        while (i > 0) {
                size_t p = (i - 1) / 2;
                if (ts->heap[p]->when <= ts->heap[i]->when)
                        break;
                heap_swap(ts, p, i);
                i = p;
        }
}

static void heap_down(struct h2_timers *ts, size_t i) {
        for (;;) {
                size_t l = 2 * i + 1, r = l + 1, m = i;
                if (l < ts->n && ts->heap[l]->when < ts->heap[m]->when)
                        m = l;
                if (r < ts->n && ts->heap[r]->when < ts->heap[m]->when)
                        m = r;
                if (m == i)
                        return;
                heap_swap(ts, i, m);
                i = m;
        }
}

static void timers_fire(uv_timer_t *h);

static void timers_schedule(struct h2_timers *ts) {
        if (ts->n == 0) {
                uv_timer_stop(&ts->handle);
                return;
        }
        uint64_t now = uv_now(ts->handle.loop);
        uint64_t when = ts->heap[0]->when;
        uv_timer_start(&ts->handle, timers_fire, when > now ? when - now : 0, 0);
}

static void timers_fire(uv_timer_t *h) {
        struct h2_timers *ts = (struct h2_timers *) h;
        uint64_t now = uv_now(h->loop);
        while (ts->n > 0 && ts->heap[0]->when <= now) {
                struct h2_timer *t = ts->heap[0];
                h2_timer_disarm(ts, t);
                t->cb(t);
        }
        timers_schedule(ts);
}

void h2_timers_init(struct h2_timers *ts, uv_loop_t *loop) {
        memset(ts, 0, sizeof(*ts));
        uv_timer_init(loop, &ts->handle);
}

int h2_timer_arm(struct h2_timers *ts, struct h2_timer *t, uint64_t when) {
        if (t->idx) {
                t->when = when;
                heap_up(ts, t->idx - 1);
                heap_down(ts, t->idx - 1);
                timers_schedule(ts);
                return 0;
        }
        if (ts->n == ts->cap) {
                size_t cap = ts->cap ? ts->cap * 2 : 16;
                struct h2_timer **h = realloc(ts->heap, cap * sizeof(*h));
                if (!h)
                        return -ENOMEM;
                ts->heap = h;
                ts->cap = cap;
        }
        t->when = when;
        ts->heap[ts->n] = t;
        t->idx = ++ts->n;
        heap_up(ts, ts->n - 1);
        timers_schedule(ts);
        return 0;
}

void h2_timer_disarm(struct h2_timers *ts, struct h2_timer *t) {
        if (!t->idx)
                return;
        size_t i = t->idx - 1;
        t->idx = 0;
        ts->n--;
        if (i != ts->n) {
                ts->heap[i] = ts->heap[ts->n];
                ts->heap[i]->idx = i + 1;
                heap_up(ts, i);
                heap_down(ts, i);
        }
}

void h2_timers_close(struct h2_timers *ts, uv_close_cb cb) {
        for (size_t i = 0; i < ts->n; i++)
                ts->heap[i]->idx = 0;
        free(ts->heap);
        ts->heap = NULL;
        ts->n = ts->cap = 0;
        uv_close((uv_handle_t *) &ts->handle, cb);
}

/* --- connections --- */

static _Thread_local uint8_t read_buf[256 * 1024];

static void conn_fail(struct h2_conn *c, int err) {
        if (c->errored || c->closing)
                return;
        c->errored = true;
        c->ops->on_error(c, err);
}

static void handle_closed(uv_handle_t *h) {
        struct h2_conn *c = h->data;
        if (--c->open_handles > 0)
                return;
        outq_free(&c->out);
        outq_free(&c->inflight);
        h2_buf_free(&c->plain);
        c->ops->on_closed(c);
}

static void do_close(struct h2_conn *c) {
        c->close_pending = false;
        if (c->started)
                uv_read_stop(&c->io.stream);
        uv_idle_stop(&c->idle);
        if (c->session) {
                nghttp2_session_del(c->session);
                c->session = NULL;
        }
        if (c->ssl) {
                SSL_free(c->ssl);
                c->ssl = NULL;
        }
        uv_close(&c->io.handle, handle_closed);
        uv_close((uv_handle_t *) &c->idle, handle_closed);
}

void h2_conn_close(struct h2_conn *c) {
        if (c->closing)
                return;
        c->closing = true;
        if (c->busy)
                c->close_pending = true;
        else
                do_close(c);
}

static void idle_cb(uv_idle_t *h) {
        struct h2_conn *c = h->data;
        uv_idle_stop(h);
        h2_conn_process(c);
}

int h2_conn_prepare(struct h2_conn *c, uv_loop_t *loop, bool pipe, const struct h2_conn_ops *ops) {
        memset(c, 0, sizeof(*c));
        c->loop = loop;
        c->ops = ops;
        int r = pipe ? uv_pipe_init(loop, &c->io.pipe, 0) : uv_tcp_init(loop, &c->io.tcp);
        if (r < 0)
                return r;
        uv_idle_init(loop, &c->idle);
        c->io.handle.data = c;
        c->idle.data = c;
        c->open_handles = 2;
        return 0;
}

void h2_conn_kick(struct h2_conn *c) {
        if (!c->closing)
                uv_idle_start(&c->idle, idle_cb);
}

static void tls_error(struct h2_conn *c, const char *what) {
        unsigned long e = ERR_peek_last_error();
        if (e)
                snprintf(c->tls_error, sizeof(c->tls_error), "%s: %s", what,
                         ERR_reason_error_string(e));
        else
                snprintf(c->tls_error, sizeof(c->tls_error), "%s", what);
        ERR_clear_error();
}

/* --- TLS transport BIO ---
 * OpenSSL reads records straight from the socket read buffer (c->rptr) and
 * writes them straight into the output queue: no memory-BIO copies. */

static int bio_write_cb(BIO *b, const char *data, int n) {
        struct h2_conn *c = BIO_get_data(b);
        BIO_clear_retry_flags(b);
        if (n <= 0)
                return 0;
        if (outq_append(&c->out, data, (size_t) n) < 0)
                return -1;
        return n;
}

static int bio_read_cb(BIO *b, char *out, int n) {
        struct h2_conn *c = BIO_get_data(b);
        BIO_clear_retry_flags(b);
        if (n <= 0)
                return 0;
        if (c->rlen == 0) {
                BIO_set_retry_read(b);
                return -1;
        }
        size_t take = MIN((size_t) n, c->rlen);
        memcpy(out, c->rptr, take);
        c->rptr += take;
        c->rlen -= take;
        return (int) take;
}

static long bio_ctrl_cb(BIO *b, int cmd, long num, void *ptr) {
        struct h2_conn *c = BIO_get_data(b);
        switch (cmd) {
        case BIO_CTRL_FLUSH:
                return 1;
        case BIO_CTRL_PENDING:
                return c ? (long) c->rlen : 0;
        default:
                return 0;
        }
}

static int bio_create_cb(BIO *b) {
        BIO_set_init(b, 1);
        return 1;
}

static BIO_METHOD *bio_method;
static pthread_once_t bio_once = PTHREAD_ONCE_INIT;

static void bio_method_init(void) {
        BIO_METHOD *m = BIO_meth_new(BIO_get_new_index() | BIO_TYPE_SOURCE_SINK, "warren-h2");
        if (!m)
                return;
        if (!BIO_meth_set_write(m, bio_write_cb) || !BIO_meth_set_read(m, bio_read_cb) ||
            !BIO_meth_set_ctrl(m, bio_ctrl_cb) || !BIO_meth_set_create(m, bio_create_cb)) {
                BIO_meth_free(m);
                return;
        }
        bio_method = m;
}

/* SSL_write all of p (records go to the output queue). */
static int tls_write(struct h2_conn *c, const void *p, size_t n) {
        while (n > 0) {
                int k = SSL_write(c->ssl, p, (int) MIN(n, (size_t) INT_MAX));
                if (k <= 0) {
                        tls_error(c, "TLS write failed");
                        return -EPROTO;
                }
                p = (const uint8_t *) p + k;
                n -= (size_t) k;
        }
        return 0;
}

/* Encrypt the plaintext gathered from nghttp2. */
static int tls_flush_plain(struct h2_conn *c) {
        if (!c->ssl || c->plain.len == 0)
                return 0;
        int r = tls_write(c, c->plain.data, c->plain.len);
        h2_buf_consume(&c->plain, c->plain.len);
        return r;
}

static void write_cb(uv_write_t *req, int status);

static void start_write(struct h2_conn *c) {
        if (c->writing || c->out.total == 0 || c->closing)
                return;
        /* writev straight from the frame headers and the message buffers. */
        for (;;) {
                unsigned nb = outq_iov(&c->out);
                int n = uv_try_write(&c->io.stream, c->out.iov, nb);
                if (n < 0 && n != UV_EAGAIN) {
                        conn_fail(c, n);
                        return;
                }
                if (n <= 0)
                        break;
                outq_consume(&c->out, (size_t) n);
                if (c->out.total == 0)
                        return;
                /* Short write: the socket is full (or more than IOV_MAX
                 * segments were queued: try again). */
                if (nb <= 1024)
                        break;
        }
        /* Hand the rest to uv_write without moving it; fill the other
         * queue meanwhile. */
        struct h2_outq t = c->inflight;
        c->inflight = c->out;
        c->out = t;
        unsigned nb = outq_iov(&c->inflight);
        int r = uv_write(&c->wreq, &c->io.stream, c->inflight.iov, nb, write_cb);
        if (r < 0) {
                conn_fail(c, r);
                return;
        }
        c->writing = true;
}

static void write_cb(uv_write_t *req, int status) {
        struct h2_conn *c = req->handle->data;
        c->writing = false;
        outq_clear(&c->inflight);
        if (c->closing)
                return;
        if (status < 0) {
                conn_fail(c, status);
                return;
        }
        h2_conn_process(c);
}

static void send_pending(struct h2_conn *c) {
        if (!c->session || !c->ready)
                return;
        int r = nghttp2_session_send(c->session);
        if (r != 0) {
                conn_fail(c, -EPROTO);
                return;
        }
        if (tls_flush_plain(c) < 0)
                conn_fail(c, -EPROTO);
}

void h2_conn_process(struct h2_conn *c) {
        if (c->closing || c->errored)
                return;
        c->busy++;
        if (c->ready)
                c->ops->pump(c);
        if (!c->closing && !c->errored) {
                /* nghttp2 stopped at H2_OUT_HIGH; when the socket took
                 * all of it at once no write_cb will come to resume it:
                 * go on here (a few rounds, then from the next idle). */
                for (int round = 0;; round++) {
                        c->out_blocked = false;
                        send_pending(c);
                        start_write(c);
                        if (!c->out_blocked || c->writing || c->closing || c->errored || round == 3)
                                break;
                }
                if (c->session && !c->errored && !c->closing &&
                    !nghttp2_session_want_read(c->session) &&
                    !nghttp2_session_want_write(c->session) && c->out.total == 0 && !c->writing)
                        conn_fail(c, 0);
                if (c->close_when_flushed && c->out.total == 0 && !c->writing)
                        h2_conn_close(c);
                /* Still blocked with nothing in flight (the rounds above
                 * ran out): go on from the next loop iteration. Otherwise
                 * everything asked for has been sent (or waits for the
                 * socket): no need for another idle round. */
                else if (c->ready && !c->closing && c->out_blocked && !c->writing)
                        uv_idle_start(&c->idle, idle_cb);
                else if (c->ready && !c->closing)
                        uv_idle_stop(&c->idle);
        }
        c->busy--;
        if (c->close_pending && c->busy == 0)
                do_close(c);
}

void h2_conn_close_when_flushed(struct h2_conn *c) {
        c->close_when_flushed = true;
        h2_conn_kick(c);
}

static void set_ready(struct h2_conn *c) {
        c->ready = true;
        c->busy++;
        c->ops->on_ready(c);
        c->busy--;
        if (c->close_pending && c->busy == 0)
                do_close(c);
}

static void do_handshake(struct h2_conn *c) {
        int r = SSL_do_handshake(c->ssl);
        start_write(c);
        if (r == 1) {
                const unsigned char *alpn = NULL;
                unsigned alpn_len = 0;
                SSL_get0_alpn_selected(c->ssl, &alpn, &alpn_len);
                if (alpn_len != 2 || memcmp(alpn, "h2", 2) != 0) {
                        snprintf(c->tls_error, sizeof(c->tls_error),
                                 "TLS peer did not select ALPN h2");
                        conn_fail(c, -EPROTO);
                        return;
                }
                set_ready(c);
                return;
        }
        int e = SSL_get_error(c->ssl, r);
        if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE)
                return;
        tls_error(c, "TLS handshake failed");
        /* Let the alert go out before reporting. */
        start_write(c);
        conn_fail(c, -EPROTO);
}

static int feed_plain(struct h2_conn *c, const uint8_t *data, size_t len) {
        ssize_t r = nghttp2_session_mem_recv(c->session, data, len);
        if (r < 0)
                return -EPROTO;
        return 0;
}

static void alloc_cb(uv_handle_t *h, size_t suggested, uv_buf_t *buf) {
        buf->base = (char *) read_buf;
        buf->len = sizeof(read_buf);
}

static void read_cb(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf) {
        struct h2_conn *c = s->data;
        if (c->closing || c->errored)
                return;
        if (nread < 0) {
                conn_fail(c, nread == UV_EOF ? -ECONNRESET : (int) nread);
                return;
        }
        if (nread == 0)
                return;
        c->busy++;
        if (!c->ssl) {
                if (feed_plain(c, (const uint8_t *) buf->base, (size_t) nread) < 0)
                        conn_fail(c, -EPROTO);
        } else {
                c->rptr = (const uint8_t *) buf->base;
                c->rlen = (size_t) nread;
                if (!c->ready)
                        do_handshake(c);
                static _Thread_local uint8_t plain[64 * 1024];
                while (c->ready && !c->errored && !c->closing) {
                        int n = SSL_read(c->ssl, plain, sizeof(plain));
                        if (n <= 0) {
                                int e = SSL_get_error(c->ssl, n);
                                if (e == SSL_ERROR_ZERO_RETURN)
                                        conn_fail(c, -ECONNRESET);
                                else if (e != SSL_ERROR_WANT_READ) {
                                        tls_error(c, "TLS read failed");
                                        conn_fail(c, -EPROTO);
                                }
                                break;
                        }
                        if (feed_plain(c, plain, (size_t) n) < 0) {
                                conn_fail(c, -EPROTO);
                                break;
                        }
                }
                c->rptr = NULL;
                c->rlen = 0;
        }
        c->busy--;
        if (c->close_pending && c->busy == 0) {
                do_close(c);
                return;
        }
        h2_conn_process(c);
}

int h2_conn_start(struct h2_conn *c, nghttp2_session *session, SSL *ssl) {
        c->session = session;
        c->started = true;
        /* Room for a large message in flight each way: with the default
         * (~200 KiB) a streaming sender and its reader take turns instead
         * of running side by side. The kernel caps it at wmem_max. */
        int fd;
        if (uv_fileno(&c->io.handle, &fd) == 0) {
                int sz = H2_SOCK_BUF;
                (void) setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &sz, sizeof(sz));
        }
        int r = uv_read_start(&c->io.stream, alloc_cb, read_cb);
        if (r < 0)
                return r;
        if (!ssl) {
                set_ready(c);
                h2_conn_kick(c);
                return 0;
        }
        pthread_once(&bio_once, bio_method_init);
        BIO *bio = bio_method ? BIO_new(bio_method) : NULL;
        if (!bio) {
                SSL_free(ssl);
                return -ENOMEM;
        }
        BIO_set_data(bio, c);
        SSL_set_bio(ssl, bio, bio);
        c->ssl = ssl;
        if (!SSL_is_server(ssl))
                do_handshake(c);
        return 0;
}

/* --- nghttp2 send callbacks --- */

/* Output queued beyond what the socket is writing. */
static size_t out_queued(const struct h2_conn *c) {
        return c->out.total + c->plain.len;
}

static ssize_t send_cb(nghttp2_session *session, const uint8_t *data, size_t length, int flags,
                       void *user_data) {
        struct h2_conn *c = user_data;
        if (out_queued(c) >= H2_OUT_HIGH) {
                c->out_blocked = true;
                return NGHTTP2_ERR_WOULDBLOCK;
        }
        int r = c->ssl ? h2_buf_append(&c->plain, data, length)
                       : outq_append(&c->out, data, length);
        if (r < 0)
                return NGHTTP2_ERR_CALLBACK_FAILURE;
        return (ssize_t) length;
}

static int send_data_cb(nghttp2_session *session, nghttp2_frame *frame, const uint8_t *framehd,
                        size_t length, nghttp2_data_source *source, void *user_data) {
        struct h2_conn *c = user_data;
        if (out_queued(c) >= H2_OUT_HIGH) {
                c->out_blocked = true;
                return NGHTTP2_ERR_WOULDBLOCK;
        }
        size_t pad = frame->data.padlen;
        if (!c->ssl && length >= H2_COPY_MAX) {
                /* Zero-copy: the frame header (and padding) as bytes, the
                 * payload by reference to the message buffers. */
                uint8_t hd[10];
                size_t hl = 9;
                memcpy(hd, framehd, 9);
                if (pad > 0)
                        hd[hl++] = (uint8_t) (pad - 1);
                if (outq_append(&c->out, hd, hl) < 0 || outq_take(&c->out, source->ptr, length) < 0)
                        return NGHTTP2_ERR_CALLBACK_FAILURE;
                if (pad > 1) {
                        uint8_t *z = outq_reserve(&c->out, pad - 1);
                        if (!z)
                                return NGHTTP2_ERR_CALLBACK_FAILURE;
                        memset(z, 0, pad - 1);
                        if (outq_commit(&c->out, pad - 1) < 0)
                                return NGHTTP2_ERR_CALLBACK_FAILURE;
                }
                return 0;
        }
        if (!c->ssl) {
                uint8_t *d = outq_reserve(&c->out, 10 + length + pad);
                if (!d)
                        return NGHTTP2_ERR_CALLBACK_FAILURE;
                size_t off = 9;
                memcpy(d, framehd, 9);
                if (pad > 0)
                        d[off++] = (uint8_t) (pad - 1);
                if (h2_msgq_read(source->ptr, d + off, length) != length)
                        return NGHTTP2_ERR_CALLBACK_FAILURE;
                off += length;
                if (pad > 1) {
                        memset(d + off, 0, pad - 1);
                        off += pad - 1;
                }
                return outq_commit(&c->out, off) < 0 ? NGHTTP2_ERR_CALLBACK_FAILURE : 0;
        }
        /* TLS: small frames are gathered as plaintext; a large payload is
         * encrypted straight from the message buffers. */
        struct h2_buf *b = &c->plain;
        bool direct = length >= H2_COPY_MAX;
        uint8_t *d = h2_buf_reserve(b, 10 + (direct ? 0 : length) + pad);
        if (!d)
                return NGHTTP2_ERR_CALLBACK_FAILURE;
        memcpy(d, framehd, 9);
        size_t off = 9;
        if (pad > 0)
                d[off++] = (uint8_t) (pad - 1);
        if (direct) {
                b->len += off;
                if (tls_flush_plain(c) < 0)
                        return NGHTTP2_ERR_CALLBACK_FAILURE;
                struct h2_msgq *q = source->ptr;
                size_t left = length;
                while (left > 0 && q->head) {
                        struct h2_chunk *ch = q->head;
                        size_t take = MIN(ch->len - ch->off, left);
                        if (tls_write(c, h2_chunk_bytes(ch) + ch->off, take) < 0)
                                return NGHTTP2_ERR_CALLBACK_FAILURE;
                        ch->off += take;
                        q->bytes -= take;
                        left -= take;
                        if (ch->off == ch->len)
                                msgq_pop(q);
                }
                if (left)
                        return NGHTTP2_ERR_CALLBACK_FAILURE;
                if (pad > 1) {
                        d = h2_buf_reserve(b, pad - 1);
                        if (!d)
                                return NGHTTP2_ERR_CALLBACK_FAILURE;
                        memset(d, 0, pad - 1);
                        b->len += pad - 1;
                }
                return 0;
        }
        if (h2_msgq_read(source->ptr, d + off, length) != length)
                return NGHTTP2_ERR_CALLBACK_FAILURE;
        off += length;
        if (pad > 1) {
                memset(d + off, 0, pad - 1);
                off += pad - 1;
        }
        b->len += off;
        return 0;
}

static ssize_t read_length_cb(nghttp2_session *session, uint8_t frame_type, int32_t stream_id,
                              int32_t session_remote_window_size, int32_t stream_remote_window_size,
                              uint32_t remote_max_frame_size, void *user_data) {
        int32_t n = MIN(session_remote_window_size, stream_remote_window_size);
        n = MIN(n, (int32_t) remote_max_frame_size);
        return n > 0 ? n : 1;
}

void h2_callbacks_set_send(nghttp2_session_callbacks *cbs) {
        nghttp2_session_callbacks_set_send_callback(cbs, send_cb);
        nghttp2_session_callbacks_set_send_data_callback(cbs, send_data_cb);
        nghttp2_session_callbacks_set_data_source_read_length_callback(cbs, read_length_cb);
}

int h2_submit_settings(nghttp2_session *session, bool server) {
        nghttp2_settings_entry iv[] = {
                {NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS, 1000},
                {NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, H2_INITIAL_WINDOW},
                {NGHTTP2_SETTINGS_MAX_FRAME_SIZE, H2_MAX_FRAME},
                {NGHTTP2_SETTINGS_MAX_HEADER_LIST_SIZE, 64 * 1024},
                {NGHTTP2_SETTINGS_ENABLE_PUSH, 0},
        };
        /* ENABLE_PUSH is a client-only setting. */
        size_t n = server ? ELEMENTSOF(iv) - 1 : ELEMENTSOF(iv);
        int r = nghttp2_submit_settings(session, NGHTTP2_FLAG_NONE, iv, n);
        if (r != 0)
                return -EPROTO;
        r = nghttp2_session_set_local_window_size(session, NGHTTP2_FLAG_NONE, 0, H2_CONN_WINDOW);
        return r != 0 ? -EPROTO : 0;
}
