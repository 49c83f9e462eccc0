/* SPDX-License-Identifier: Apache-2.0 */
/* The queues of the gRPC layer: outgoing messages waiting for flow control
 * (h2_msgq of refcounted h2_chunks), received messages waiting for their
 * handler (h2_inbox), and encoded output waiting for the socket (h2_outq).
 * See h2-queue.h. */
#include "rpc/h2-queue.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "basic/macro.h"
#include "rpc/grpc.h"

/* --- message queue --- */

static void chunk_unref(struct h2_chunk *c) {
        if (--c->refs > 0)
                return;
        if (c->release)
                c->release(c->arg);
        h2_mem_free(c);
}

struct h2_chunk *h2_chunk_new(size_t cap) {
        if (cap > UINT32_MAX)
                return NULL;
        struct h2_chunk *c = h2_mem_alloc(sizeof(*c) + GRPC_FRAME_HEADER + cap);
        if (!c)
                return NULL;
        *c = (struct h2_chunk){.len = GRPC_FRAME_HEADER + cap, .refs = 1};
        return c;
}

/* A chunk for one n-byte message (at most max, 0 = no limit), its prefix
 * written. */
static struct h2_chunk *chunk_new(size_t n, size_t max) {
        if (max && n > max)
                return NULL;
        struct h2_chunk *c = h2_chunk_new(n);
        if (c)
                grpc_frame_header(c->data, n);
        return c;
}

static void msgq_append(struct h2_msgq *q, struct h2_chunk *c) {
        if (q->tail)
                q->tail->next = c;
        else
                q->head = c;
        q->tail = c;
        q->bytes += c->len - c->off;
        q->n_chunks++;
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

void h2_msgq_pop(struct h2_msgq *q) {
        struct h2_chunk *c = q->head;
        q->head = c->next;
        if (!q->head)
                q->tail = NULL;
        q->n_chunks--;
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
                        h2_msgq_pop(q);
        }
        q->bytes -= done;
        return done;
}

void h2_msgq_clear(struct h2_msgq *q) {
        while (q->head)
                h2_msgq_pop(q);
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

int h2_outq_commit(struct h2_outq *q, size_t n) {
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

int h2_outq_append(struct h2_outq *q, const void *p, size_t n) {
        uint8_t *d = h2_outq_reserve(q, n);
        if (!d)
                return -ENOMEM;
        memcpy(d, p, n);
        return h2_outq_commit(q, n);
}

int h2_outq_take(struct h2_outq *q, struct h2_msgq *mq, size_t len) {
        while (len > 0 && mq->head) {
                struct h2_chunk *c = mq->head;
                size_t take = MIN(c->len - c->off, len);
                if (take < H2_TAKE_COPY_MAX) {
                        /* A small slice (a message prefix, a field header,
                         * a short output run) is copied next to the frame
                         * header: no segment and no chunk kept per slice. */
                        if (h2_outq_append(q, h2_chunk_bytes(c) + c->off, take) < 0)
                                return -ENOMEM;
                } else {
                        struct h2_seg *s = outq_seg(q);
                        if (!s)
                                return -ENOMEM;
                        *s = (struct h2_seg){.chunk = c, .off = c->off, .len = take};
                        q->n++;
                        c->refs++;
                        q->total += take;
                }
                c->off += take;
                mq->bytes -= take;
                len -= take;
                if (c->off == c->len)
                        h2_msgq_pop(mq);
        }
        return len == 0 ? 0 : -EIO;
}

void h2_outq_consume(struct h2_outq *q, size_t n) {
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
                h2_buf_reset(&q->bytes);
        }
}

void h2_outq_clear(struct h2_outq *q) {
        for (size_t i = q->head; i < q->n; i++)
                if (q->segs[i].chunk)
                        chunk_unref(q->segs[i].chunk);
        q->head = q->n = q->total = 0;
        h2_buf_reset(&q->bytes);
}

void h2_outq_free(struct h2_outq *q) {
        h2_outq_clear(q);
        h2_buf_free(&q->bytes);
        free(q->segs);
        free(q->iov);
        q->segs = NULL;
        q->iov = NULL;
        q->cap = 0;
}

unsigned h2_outq_iov(struct h2_outq *q) {
        unsigned k = 0;
        for (size_t i = q->head; i < q->n; i++) {
                const struct h2_seg *s = &q->segs[i];
                const uint8_t *p =
                        s->chunk ? h2_chunk_bytes(s->chunk) + s->off : q->bytes.data + s->off;
                q->iov[k++] = uv_buf_init((char *) p, (unsigned) s->len);
        }
        return k;
}
