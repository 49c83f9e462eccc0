/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* Internal to src/rpc: the transport shared by the server and client halves.
 * One struct h2_conn is one HTTP/2 connection over a libuv stream (TCP or
 * unix socket), optionally TLS through OpenSSL memory BIOs, driving an
 * nghttp2 session with nghttp2_session_mem_recv / nghttp2_session_send.
 * Also: a growable byte buffer, a queue of framed gRPC messages and a timer
 * heap (one uv_timer for any number of deadlines).
 *
 * Rules this module enforces (see ARCHITECTURE.md "RPC layer"):
 *  - nghttp2 is never re-entered from its own callbacks: owners queue their
 *    application events and deliver them from ops->pump, which runs after
 *    mem_recv returned and before nghttp2_session_send;
 *  - nothing is written before the TLS handshake completed and ALPN chose h2;
 *  - outgoing bytes are bounded: the send callbacks return WOULDBLOCK above
 *    H2_OUT_HIGH and sending resumes when the socket drained. */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <nghttp2/nghttp2.h>
#include <openssl/ssl.h>
#include <protobuf-c/protobuf-c.h>
#include <uv.h>

/* Bytes of encoded output queued per connection (beyond what the socket
 * is writing) before nghttp2 is told to wait. Mostly references to
 * message buffers, not copies. */
#define H2_OUT_HIGH (1024u * 1024u)
/* DATA payloads shorter than this are copied into the output buffer; longer
 * ones are written straight from the message buffer (writev). */
#define H2_COPY_MAX 4096u
/* Advertised SETTINGS. */
#define H2_INITIAL_WINDOW (4u << 20)
#define H2_MAX_FRAME (256u * 1024u)
#define H2_CONN_WINDOW (16u << 20)
/* Socket send buffer asked for (capped by net.core.wmem_max). */
#define H2_SOCK_BUF (4 * 1024 * 1024)

/* --- memory --- */

/* Message buffers (queued messages, decoded request bodies, unpacked bytes
 * fields). Blocks of 128 KiB and more are mmap'd and, when freed, kept in
 * a small per-thread cache (at most 8 blocks, 16 MiB) so that streams of
 * large messages neither page-fault on every message nor need
 * process-wide malloc tuning; smaller ones come from malloc. With
 * AddressSanitizer everything comes from malloc. Returns NULL on
 * allocation failure. */
void *h2_mem_alloc(size_t n);
/* Free what h2_mem_alloc returned. NULL ok. */
void h2_mem_free(void *p);
/* Return every cached block to the kernel (owners call this when idle). */
void h2_mem_trim(void);
/* Bytes held by this thread's cache. */
size_t h2_mem_cached(void);
/* A protobuf-c allocator on h2_mem_alloc/h2_mem_free: messages unpacked
 * with it must be freed with it. */
extern ProtobufCAllocator h2_pb_allocator;

struct h2_buf {
        uint8_t *data;
        size_t len, cap;
};

/* Append n bytes; returns 0 or -ENOMEM. */
int h2_buf_append(struct h2_buf *b, const void *p, size_t n);
/* Make room for n more bytes and return a pointer to them (len unchanged),
 * or NULL on allocation failure. */
uint8_t *h2_buf_reserve(struct h2_buf *b, size_t n);
/* Drop the first n bytes. */
void h2_buf_consume(struct h2_buf *b, size_t n);
/* Free the storage. */
void h2_buf_free(struct h2_buf *b);

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
        size_t bytes; /* unsent bytes in the queue */
};

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
struct h2_outq {
        struct h2_buf bytes;
        struct h2_seg *segs;
        uv_buf_t *iov;
        size_t head, n, cap; /* segments [head, n) are unwritten */
        size_t total;        /* unwritten bytes */
};

/* nghttp2 data source conventions shared by both halves: source->ptr is a
 * struct h2_msgq; the owner's read callback sets NGHTTP2_DATA_FLAG_NO_COPY and
 * h2_send_data_cb hands the frame's payload to the output queue by
 * reference (plain connections), encrypts it from the message buffers
 * (TLS) or copies it (short payloads). */

/* --- timers --- */
struct h2_timer {
        uint64_t when; /* uv_now() milliseconds */
        size_t idx;    /* heap slot + 1; 0 = not armed */
        void (*cb)(struct h2_timer *t);
};
struct h2_timers {
        uv_timer_t handle;
        struct h2_timer **heap;
        size_t n, cap;
};

/* Initialise on loop. handle.data is free for the owner. */
void h2_timers_init(struct h2_timers *ts, uv_loop_t *loop);
/* Arm (or re-arm) t to fire at when (uv_now() based). Returns 0 or -ENOMEM. */
int h2_timer_arm(struct h2_timers *ts, struct h2_timer *t, uint64_t when);
/* Disarm t; no-op when not armed. */
void h2_timer_disarm(struct h2_timers *ts, struct h2_timer *t);
/* Free the heap and uv_close the handle with cb (disarms everything). */
void h2_timers_close(struct h2_timers *ts, uv_close_cb cb);

/* --- connections --- */
struct h2_conn;

struct h2_conn_ops {
        /* Deliver queued application events (outside nghttp2 callbacks). */
        void (*pump)(struct h2_conn *c);
        /* Transport ready: connected and (with TLS) handshake done, ALPN h2. */
        void (*on_ready)(struct h2_conn *c);
        /* The transport failed (negative errno) or the session ended cleanly
         * (0). Called once; the owner cancels its streams and calls
         * h2_conn_close. */
        void (*on_error)(struct h2_conn *c, int err);
        /* Every handle is closed: the owner may free the memory now. */
        void (*on_closed)(struct h2_conn *c);
};

struct h2_conn {
        uv_loop_t *loop;
        union {
                uv_handle_t handle;
                uv_stream_t stream;
                uv_tcp_t tcp;
                uv_pipe_t pipe;
        } io;
        uv_idle_t idle;
        nghttp2_session *session;
        SSL *ssl;
        const struct h2_conn_ops *ops;
        struct h2_outq out;      /* encoded output waiting for the socket */
        struct h2_outq inflight; /* output handed to uv_write */
        struct h2_buf plain;     /* TLS: plaintext waiting for SSL_write */
        const uint8_t *rptr;     /* TLS: received bytes OpenSSL has not read */
        size_t rlen;
        uv_write_t wreq;
        int busy;         /* inside process(): defer closing */
        int open_handles; /* handles not yet closed */
        bool started, ready, errored, closing, close_pending, writing;
        bool close_when_flushed;
        bool out_blocked; /* nghttp2 was told WOULDBLOCK (output at H2_OUT_HIGH) */
        char tls_error[160];
};

/* Initialise handles on loop: a TCP handle or a pipe handle. The caller
 * then connects or accepts on c->io.stream and calls h2_conn_start.
 * Returns 0 or a negative errno. */
int h2_conn_prepare(struct h2_conn *c, uv_loop_t *loop, bool pipe, const struct h2_conn_ops *ops);
/* Start I/O on a connected stream with session (user_data must point at a
 * struct whose first member is this h2_conn) and optional ssl (taken over;
 * memory BIOs are attached here). Client TLS starts the handshake. */
int h2_conn_start(struct h2_conn *c, nghttp2_session *session, SSL *ssl);
/* Ask for a pump + send soon (from an idle callback). */
void h2_conn_kick(struct h2_conn *c);
/* Pump application events and write what nghttp2 has to send now. */
void h2_conn_process(struct h2_conn *c);
/* Close: stop reading, free the session and TLS, close handles, then
 * ops->on_closed. Safe from any callback (deferred while busy). */
void h2_conn_close(struct h2_conn *c);
/* Close once everything queued has been written (GOAWAY, final trailers). */
void h2_conn_close_when_flushed(struct h2_conn *c);

/* nghttp2 callbacks every session uses (session user_data = the conn). */
void h2_callbacks_set_send(nghttp2_session_callbacks *cbs);
/* SETTINGS + connection window every session sends first. */
int h2_submit_settings(nghttp2_session *session, bool server);
