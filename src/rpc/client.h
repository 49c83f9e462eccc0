/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* The client half of Warren's gRPC layer: one HTTP/2 connection to a
 * server, blocking unary calls for simple tools and callback streams for
 * everything else. Used by the warren CLI, the C interop tests and
 * benchmarks. Single-threaded; runs on the given loop. */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <protobuf-c/protobuf-c.h>
#include <uv.h>

#include "basic/err.h"

struct rpc_client;
struct rpc_stream;

struct rpc_client_config {
        /* "unix:/path", "unix:///path", "HOST:PORT", "tcp:HOST:PORT". */
        const char *addr;
        /* TLS with ALPN h2; ca_file NULL = system trust store. */
        bool tls;
        const char *ca_file;
        /* SNI / verification name; NULL = host part of addr. */
        const char *server_name;
        /* Sent as "authorization: Bearer <token>" when set. */
        const char *token;
        /* Sent as "x-warren-environment" when set: the environment to act
         * in (the operator may name any; a token only its own). */
        const char *environment;
        /* 0 = 16 MiB. */
        size_t max_recv_message;
        /* Connect timeout; 0 = 5000 ms. */
        uint64_t connect_timeout_ms;
};

/* Connect (blocking: runs loop until connected, TLS done, SETTINGS sent).
 * Returns 0, or -ECONNREFUSED / -ENOENT (no socket) / -ETIMEDOUT /
 * -EPROTO (TLS/ALPN) with e saying which address failed and why. */
int rpc_client_new(uv_loop_t *loop, const struct rpc_client_config *cfg, struct rpc_client **ret,
                   struct wr_err *e);

/* Close the connection and free. Streams still open see on_close with
 * UNAVAILABLE first. NULL ok. */
void rpc_client_free(struct rpc_client *c);

/* Blocking unary call: runs the loop until the call ends. timeout_ms 0 =
 * no deadline (otherwise sent as grpc-timeout). On OK returns 0 and the
 * decoded response in *ret (free with protobuf_c_message_free_unpacked).
 * On a non-OK status returns -EREMOTEIO with e->status and e->msg set to
 * what the server sent; transport failures return other negative errnos. */
int rpc_client_unary(struct rpc_client *c, const char *path, const ProtobufCMessage *req,
                     const ProtobufCMessageDescriptor *resp_desc, uint64_t timeout_ms,
                     ProtobufCMessage **ret, struct wr_err *e);

struct rpc_stream_callbacks {
        /* A response message; freed when the callback returns. */
        void (*on_message)(struct rpc_stream *s, const ProtobufCMessage *msg, void *userdata);
        /* Optional, first: the encoded message (len bytes, valid during the
         * call). Return 1 when it was handled (on_message is then not
         * called: no unpack, no copy), 0 to have it parsed for on_message. */
        int (*on_raw)(struct rpc_stream *s, const uint8_t *msg, size_t len, void *userdata);
        /* The send queue fell below the low-water mark. */
        void (*on_writable)(struct rpc_stream *s, void *userdata);
        /* The call ended: status (0 = OK) and message. Called exactly once;
         * rpc_stream_free may be called from here. */
        void (*on_close)(struct rpc_stream *s, int status, const char *message, void *userdata);
};

/* Open a streaming call (any kind; unary too). Does not block. */
int rpc_stream_open(struct rpc_client *c, const char *path,
                    const ProtobufCMessageDescriptor *resp_desc, uint64_t timeout_ms,
                    const struct rpc_stream_callbacks *cb, void *userdata, struct rpc_stream **ret);

/* Queue a request message: 0 below high-water, 1 at or above (wait for
 * on_writable), negative errno when the stream is over. */
int rpc_stream_send(struct rpc_stream *s, const ProtobufCMessage *msg);

/* Half-close (END_STREAM after queued messages). */
int rpc_stream_close_send(struct rpc_stream *s);

/* Cancel (RST_STREAM CANCEL); on_close follows with CANCELLED. */
void rpc_stream_cancel(struct rpc_stream *s);

/* Stop / restart delivering response messages (flow control). */
void rpc_stream_pause_recv(struct rpc_stream *s);
void rpc_stream_resume_recv(struct rpc_stream *s);

/* Free after on_close (or cancel + free). NULL ok. */
void rpc_stream_free(struct rpc_stream *s);

/* Run the loop until every stream of the client has closed. Returns 0 or a
 * negative errno if the connection failed. */
int rpc_client_run(struct rpc_client *c);
