/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* Internal to src/rpc: the transport shared by the server and client halves.
 * One struct h2_conn is one HTTP/2 connection over a libuv stream (TCP or
 * unix socket), optionally TLS through a zero-copy transport BIO, driving an
 * nghttp2 session with nghttp2_session_mem_recv / nghttp2_session_send.
 * Its parts: message memory (h2-mem.h), the message and output queues
 * (h2-queue.h), the TLS transport BIO (tls-bio.h); deadlines use the timer
 * heap (timer-heap.h).
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

#include "rpc/h2-mem.h"
#include "rpc/h2-queue.h"
#include "rpc/tls-bio.h"

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

/* nghttp2 data source conventions shared by both halves: source->ptr is a
 * struct h2_msgq; the owner's read callback sets NGHTTP2_DATA_FLAG_NO_COPY and
 * h2_send_data_cb hands the frame's payload to the output queue by
 * reference (plain connections), encrypts it from the message buffers
 * (TLS) or copies it (short payloads). */

/* --- connections --- */
struct h2_conn;

/* A libuv stream handle that is a TCP socket or a unix socket (listeners
 * and connections). */
union h2_stream_io {
        uv_handle_t handle;
        uv_stream_t stream;
        uv_tcp_t tcp;
        uv_pipe_t pipe;
};

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
        union h2_stream_io io;
        uv_idle_t idle;
        nghttp2_session *session;
        SSL *ssl;
        const struct h2_conn_ops *ops;
        struct h2_outq out;      /* encoded output waiting for the socket */
        struct h2_outq inflight; /* output handed to uv_write */
        struct h2_buf plain;     /* TLS: plaintext waiting for SSL_write */
        struct tls_bio tls;      /* TLS: the transport BIO's input and sink */
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
 * Returns 0 or a negative errno. On failure c->open_handles says what is
 * left: 0, nothing was initialised and the caller frees c now; otherwise
 * the handles are closing and ops->on_closed follows, as after
 * h2_conn_close. */
int h2_conn_prepare(struct h2_conn *c, uv_loop_t *loop, bool pipe, const struct h2_conn_ops *ops);
/* Start I/O on a connected stream with session (user_data must point at a
 * struct whose first member is this h2_conn) and optional ssl (taken over
 * even on failure; the transport BIO is attached here). Client TLS starts
 * the handshake. Returns 0 or a negative errno (the caller closes c). */
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
