/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* Internal to src/rpc: the queues between handlers, nghttp2 and the socket.
 *  - h2_msgq: outgoing framed gRPC messages (h2_chunk, refcounted) waiting
 *    for flow control; nghttp2's data source reads from it;
 *  - h2_inbox: received messages waiting for their handler;
 *  - h2_outq: encoded output waiting for the socket, as segments that are
 *    either owned bytes (frame headers, control frames, TLS records) or
 *    slices of queued messages (zero-copy DATA payloads), ready for writev.
 * Single-threaded (the loop thread); message memory is h2-mem.h's. */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <protobuf-c/protobuf-c.h>
#include <uv.h>

#include "rpc/h2-mem.h"

/* One framed (5-byte prefixed) message, allocated with h2_mem_alloc and
 * reference counted: the queue holds one reference, every output segment
 * that still has to write part of it another. */
struct h2_chunk {
        struct h2_chunk *next;
        size_t len, off;
        unsigned refs;
        /* Bytes owned by someone else (h2_msgq_push_ref): ext[off, len),
         * release(arg) once the last reference is gone. NULL: data[]. */
        const uint8_t *ext;
        void (*release)(void *arg);
        void *arg;
        uint8_t data[];
};
/* A FIFO of messages waiting for flow control. */
struct h2_msgq {
        struct h2_chunk *head, *tail;
        size_t bytes;    /* unsent bytes in the queue */
        size_t n_chunks; /* chunks in the queue (one or two per message) */
};

/* What a queued chunk costs beyond its bytes: the struct and the
 * allocator's header and rounding. */
#define H2_CHUNK_COST (sizeof(struct h2_chunk) + 32)

/* The memory the queue holds, as counted against a send high-water mark:
 * its bytes plus H2_CHUNK_COST per chunk, so that a stream of tiny
 * messages (a 2-byte output run costs two chunks) is bounded in memory,
 * not only in payload. */
static inline size_t h2_msgq_cost(const struct h2_msgq *q) {
        return q->bytes + q->n_chunks * H2_CHUNK_COST;
}

/* Pack msg with its gRPC prefix onto the queue. Returns 0, -EMSGSIZE when
 * the packed size exceeds max (0 = no limit) or -ENOMEM. */
int h2_msgq_push(struct h2_msgq *q, const ProtobufCMessage *msg, size_t max);
/* Queue an already packed message (len bytes, no prefix): the prefix is
 * added and the bytes copied. Same returns as h2_msgq_push. */
int h2_msgq_push_packed(struct h2_msgq *q, const void *data, size_t len, size_t max);
/* A chunk with room for cap message bytes at data + GRPC_FRAME_HEADER (the
 * prefix goes in front), one reference, not queued. NULL on failure. */
struct h2_chunk *h2_chunk_new(size_t cap);
/* Drop a reference to a chunk that was never queued. NULL ok. */
void h2_chunk_unref(struct h2_chunk *c);
/* Queue the message at data + GRPC_FRAME_HEADER + off, len bytes, taking
 * the caller's reference. Returns 0, -EINVAL (outside the chunk) or
 * -EMSGSIZE (above max, 0 = no limit); on failure the reference stays the
 * caller's. */
int h2_msgq_push_chunk(struct h2_msgq *q, struct h2_chunk *c, size_t off, size_t len, size_t max);
/* Queue one message made of head (head_len bytes, copied, prefix added)
 * followed by len bytes at data, which are not copied: they are read until
 * the socket took them, then release(arg) is called (also on failure, and
 * when the queue or connection is dropped). Returns like h2_msgq_push. */
int h2_msgq_push_ref(struct h2_msgq *q, const void *head, size_t head_len, const void *data,
                     size_t len, void (*release)(void *arg), void *arg, size_t max);
/* The bytes of a chunk (its own or referenced). */
static inline const uint8_t *h2_chunk_bytes(const struct h2_chunk *c) {
        return c->ext ? c->ext : c->data;
}
/* Drop the front chunk of a non-empty queue once it has been consumed
 * (c->off == c->len; q->bytes is the caller's to adjust). */
void h2_msgq_pop(struct h2_msgq *q);
/* Copy up to len bytes from the front into out and drop them. Returns the
 * count copied. */
size_t h2_msgq_read(struct h2_msgq *q, uint8_t *out, size_t len);
/* Drop everything (buffers still referenced by output stay alive until
 * written). */
void h2_msgq_clear(struct h2_msgq *q);

/* Received messages waiting for their handler, oldest first. */
struct h2_inmsg {
        struct h2_inmsg *next;
        uint8_t *data; /* h2_mem_alloc'd; NULL when len is 0 */
        size_t len;
};
struct h2_inbox {
        struct h2_inmsg *head, *tail;
};

/* A grpc_message_cb: append msg (taken; h2_mem_alloc'd) to the struct
 * h2_inbox at inbox. Returns 0 or -ENOMEM (msg freed). */
int h2_inbox_push(void *inbox, uint8_t *msg, size_t len);
/* Take the oldest message: true and *data (free with h2_mem_free) and
 * *len, or false when empty. */
bool h2_inbox_pop(struct h2_inbox *b, uint8_t **data, size_t *len);
/* Drop every message. */
void h2_inbox_clear(struct h2_inbox *b);

/* Encoded output waiting for the socket: an ordered list of segments, each
 * either bytes in an owned buffer (frame headers, control frames, TLS
 * records) or a slice of a queued message (zero-copy DATA payloads). */
struct h2_seg {
        struct h2_chunk *chunk; /* NULL: bytes.data + off */
        size_t off, len;
};
/* A zeroed struct is an empty queue; h2_outq_free releases it. */
struct h2_outq {
        struct h2_buf bytes;
        struct h2_seg *segs;
        uv_buf_t *iov;
        size_t head, n, cap; /* segments [head, n) are unwritten */
        size_t total;        /* unwritten bytes */
};

/* Room for n bytes at the end of the queue's byte buffer (not queued until
 * h2_outq_commit), or NULL on allocation failure. */
static inline uint8_t *h2_outq_reserve(struct h2_outq *q, size_t n) {
        return h2_buf_reserve(&q->bytes, n);
}
/* Queue the n bytes written after h2_outq_reserve. 0 or -ENOMEM. */
int h2_outq_commit(struct h2_outq *q, size_t n);
/* Queue a copy of p[0, n). 0 or -ENOMEM. */
int h2_outq_append(struct h2_outq *q, const void *p, size_t n);
/* Slices of queued messages shorter than this are copied into the output
 * (h2_outq_take), not referenced. */
#define H2_TAKE_COPY_MAX 256u
/* Move len bytes from the front of mq to the output by reference (each
 * segment holds a chunk reference until written); slices shorter than
 * H2_TAKE_COPY_MAX are copied instead. 0, -ENOMEM, or -EIO when mq holds
 * fewer than len bytes. */
int h2_outq_take(struct h2_outq *q, struct h2_msgq *mq, size_t len);
/* Drop n written bytes (at most q->total) from the front. */
void h2_outq_consume(struct h2_outq *q, size_t n);
/* Drop everything, written or abandoned (keeps the storage). */
void h2_outq_clear(struct h2_outq *q);
/* Drop everything and free the storage; the queue is then empty. */
void h2_outq_free(struct h2_outq *q);
/* Fill q->iov with the unwritten segments (at most UINT_MAX bytes each)
 * and return their count; valid until the queue changes. */
unsigned h2_outq_iov(struct h2_outq *q);
