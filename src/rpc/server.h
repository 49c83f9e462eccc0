/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* The server half of Warren's gRPC layer (HTTP/2 via nghttp2, protobuf-c
 * messages, libuv, one thread). Services register methods; each incoming
 * call is a struct rpc_call that the handler drives with rpc_call_send /
 * rpc_call_finish. Everything runs on the loop thread.
 *
 * Lifetime: the layer owns every rpc_call. A handler that keeps a call past
 * the callback it was given (async work) takes a reference with
 * rpc_call_ref and drops it with rpc_call_unref. on_free runs exactly once,
 * when the last reference is gone and the stream is closed: free handler
 * state there. */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <protobuf-c/protobuf-c.h>
#include <uv.h>

#include "basic/err.h"

struct rpc_server;
struct rpc_call;

enum rpc_kind {
        RPC_UNARY = 0,
        RPC_CLIENT_STREAM = 1,
        RPC_SERVER_STREAM = 2,
        RPC_BIDI = 3,
};

/* Who is calling. For unix sockets uid/gid/pid come from SO_PEERCRED
 * (uid = (uid_t)-1 for TCP); addr is "unix" or "IP:port". */
struct rpc_peer {
        uid_t uid;
        gid_t gid;
        pid_t pid;
        bool tls;
        /* accepted on a listener opened with RPC_LISTEN_SANDBOX: the peer
         * is code in a sandbox; its credentials (uid 0 ...) prove nothing */
        bool sandbox;
        char addr[64];
};

/* Handlers for one method. Any callback may be NULL. All run on the loop. */
struct rpc_method {
        const char *path; /* "/warren.v1.Diag/Echo" */
        enum rpc_kind kind;
        const ProtobufCMessageDescriptor *input;
        const ProtobufCMessageDescriptor *output;

        /* A request message. For RPC_UNARY and RPC_SERVER_STREAM it is called
         * once, after the client half-closed, and msg stays valid until the
         * call is freed. For streaming requests msg is freed when the
         * callback returns: copy what you keep. */
        void (*on_message)(struct rpc_call *call, const ProtobufCMessage *msg);
        /* The client sent END_STREAM (streaming requests only). */
        void (*on_half_close)(struct rpc_call *call);
        /* The call ended before the handler finished it: client cancel
         * (RST_STREAM) → WR_STATUS_CANCELLED, deadline → DEADLINE_EXCEEDED,
         * connection lost → UNAVAILABLE. Stop the work; sends are no-ops from
         * here on. Called at most once. */
        void (*on_cancel)(struct rpc_call *call, int status);
        /* The send queue fell below the low-water mark after rpc_call_send
         * returned 1. */
        void (*on_writable)(struct rpc_call *call);
        /* The call is being destroyed. */
        void (*on_free)(struct rpc_call *call);
        /* Requests may carry plaintext secrets (inline secret values, a
         * secret being stored): the received bytes and every block of the
         * decoded message are wiped before they are freed. */
        bool sensitive;
};

struct rpc_server_config {
        /* Largest request message accepted; bigger → RESOURCE_EXHAUSTED.
         * 0 = default (16 MiB). */
        size_t max_recv_message;
        /* Largest response message; 0 = default (16 MiB). */
        size_t max_send_message;
        /* Queue size above which rpc_call_send returns 1; 0 = 4 MiB (so that
         * 1 MiB messages still pipeline). */
        size_t send_high_water;
        /* PEM files; both set = TLS (ALPN h2) available to listeners. */
        const char *tls_cert;
        const char *tls_key;
        /* Opaque pointer handed to every handler via rpc_call_server_ctx
         * (the daemon passes its struct api_ctx). */
        void *ctx;
        /* Optional: called once per call when its status is sent, with the
         * method path ("/warren.v1.Sandboxes/Exec") and the gRPC status
         * code (metrics). */
        void (*on_call_status)(const char *path, int status, void *userdata);
        void *on_call_status_userdata;
        /* Optional: called once per call, after its method is known and
         * before any handler runs (rpc_call_method, _peer and _metadata are
         * available), with ctx. Returns 0 to let the call in (it may attach
         * what it learnt with rpc_call_set_auth) or a negative errno with e
         * filled: the call is then finished with err_status(e) and e->msg
         * and no handler of the method ever sees it. */
        int (*authorize)(struct rpc_call *call, void *ctx, struct wr_err *e);
        /* Optional: called exactly once per call that had a :path, when it
         * is freed (the handler's on_free has run; rpc_call_auth and
         * rpc_call_request still answer), with the status it ended with
         * (CANCELLED/DEADLINE_EXCEEDED/UNAVAILABLE for one that was
         * cancelled), its message (NULL when none) and ctx (audit). */
        void (*on_call_end)(struct rpc_call *call, int status, const char *message, void *ctx);
};

/* Create a server on loop. Returns 0 or -ENOMEM / -EINVAL / a libuv error
 * (with e filled); on failure nothing is the caller's (a server whose
 * handles were opened is freed by the loop once they are closed). */
int rpc_server_new(uv_loop_t *loop, const struct rpc_server_config *cfg, struct rpc_server **ret,
                   struct wr_err *e);

/* Register methods. The array must outlive the server. Unknown paths are
 * answered UNIMPLEMENTED by the layer. Returns 0 or -EEXIST. */
int rpc_server_add_methods(struct rpc_server *s, const struct rpc_method *methods, size_t n);

/* Listen on "unix:/path" (created mode 0660, stale socket replaced),
 * "tcp:HOST:PORT" or "tls:HOST:PORT" (needs tls_cert/tls_key). Port 0 picks
 * one; rpc_server_port returns it. Returns 0 or negative errno. */
int rpc_server_listen(struct rpc_server *s, const char *addr, struct wr_err *e);

/* rpc_server_listen with flags. RPC_LISTEN_SANDBOX (unix only): a socket
 * mounted into sandboxes: mode 0666 (any user of a sandbox may connect)
 * and its peers are marked rpc_peer.sandbox. */
#define RPC_LISTEN_SANDBOX 1u
int rpc_server_listen_flags(struct rpc_server *s, const char *addr, unsigned flags,
                            struct wr_err *e);

/* Bind addr (as rpc_server_listen takes it: a unix socket's stale file
 * replaced and its mode set as there; TCP with SO_REUSEADDR) and listen
 * (clients queue until the server accepts), for a process that binds
 * before it drops privileges (warrend --user: ports below 1024, a socket
 * in a directory it cannot write later). 0 with *ret_fd the bound
 * socket (CLOEXEC, non-blocking), or a negative errno with e. */
int rpc_listen_prebind(const char *addr, unsigned flags, int *ret_fd, struct wr_err *e);

/* rpc_server_listen_flags on a socket from rpc_listen_prebind for the same
 * addr and flags; on success the server owns fd (closed with the
 * listener). On failure fd may be closed or not: the caller gives up
 * starting (warrend exits). Returns 0 or negative errno. */
int rpc_server_listen_fd(struct rpc_server *s, const char *addr, unsigned flags, int fd,
                         struct wr_err *e);

/* Whether a listen address (as rpc_server_listen takes it) reaches only
 * this machine: "unix:..." or a TCP/TLS host in 127.0.0.0/8, ::1 (also
 * [::1] and ::ffff:127.x.y.z) or "localhost". Anything else, including
 * 0.0.0.0, [::] and an address that does not parse, is not loopback. Pure:
 * no name resolution, no I/O. */
bool rpc_listen_addr_is_loopback(const char *addr);

/* The port of the most recent TCP/TLS listener, or -ENOENT. */
int rpc_server_port(struct rpc_server *s);

/* Graceful shutdown: stop accepting, send GOAWAY, let in-flight calls
 * finish (cancelled after grace_ms), close connections, then call done. */
void rpc_server_shutdown(struct rpc_server *s, uint64_t grace_ms, void (*done)(void *userdata),
                         void *userdata);

/* Free a server whose shutdown finished (or that never listened). NULL ok. */
void rpc_server_free(struct rpc_server *s);

/* --- calls --- */

/* Queue a response message. Returns 0 when the queue is below the
 * high-water mark, 1 when at or above it (stop producing until
 * on_writable), -ECANCELED when the call is over, -EMSGSIZE when the
 * message exceeds max_send_message. Never blocks. */
int rpc_call_send(struct rpc_call *call, const ProtobufCMessage *msg);

/* Sending pre-encoded messages without a copy (an addition for producers
 * that can write a message's protobuf encoding themselves, e.g. read(2)
 * straight into a bytes field): allocate a buffer, write the encoding
 * anywhere in it, queue it. The layer frames the message in place and
 * writes it to the socket from that buffer. */
struct rpc_buf {
        uint8_t *data; /* cap writable bytes */
        size_t cap;
        void *priv; /* the layer's */
};

/* Allocate b with room for cap bytes. Returns 0 or -ENOMEM. */
int rpc_buf_alloc(struct rpc_buf *b, size_t cap);

/* Free a buffer that was not sent. Safe on a zeroed or sent buffer. */
void rpc_buf_free(struct rpc_buf *b);

/* Queue b->data[off, off + len), the encoding of one message of the
 * method's output type (not checked), as the next response message. The
 * buffer is consumed whatever the result (*b is zeroed). Returns like
 * rpc_call_send, or -EINVAL when the range is outside the buffer. */
int rpc_call_send_buf(struct rpc_call *call, struct rpc_buf *b, size_t off, size_t len);

/* Queue one response message whose encoding is head[0, head_len) followed
 * by data[0, len) (e.g. a hand-encoded field header, then a bytes field's
 * contents). head is copied; data is not: it must stay valid and unchanged
 * until release(arg) is called, which happens exactly once — when the
 * socket has taken the bytes, the call is dropped, or right away on
 * failure. Returns like rpc_call_send. */
int rpc_call_send_ref(struct rpc_call *call, const void *head, size_t head_len, const void *data,
                      size_t len, void (*release)(void *arg), void *arg);

/* Finish the call: queued messages, then trailers with status and message
 * (percent-encoded by the layer). A call with nothing sent and an error
 * status goes out trailers-only. Returns 0 or -ECANCELED if already over. */
int rpc_call_finish(struct rpc_call *call, int status, const char *message);

/* rpc_call_finish with err_status(e) and e->msg. */
int rpc_call_finish_err(struct rpc_call *call, const struct wr_err *e);

/* Unary convenience: send msg, then finish OK. */
int rpc_call_reply(struct rpc_call *call, const ProtobufCMessage *msg);

/* Stop / restart delivery of request messages (flow control: the stream
 * window is not returned while paused). */
void rpc_call_pause_recv(struct rpc_call *call);
void rpc_call_resume_recv(struct rpc_call *call);

/* References for handlers that outlive a callback. */
struct rpc_call *rpc_call_ref(struct rpc_call *call);
void rpc_call_unref(struct rpc_call *call);

/* True once finished or cancelled. */
bool rpc_call_is_done(const struct rpc_call *call);

/* The ctx pointer of the server's config. */
void *rpc_call_server_ctx(const struct rpc_call *call);

/* Handler state. */
void rpc_call_set_data(struct rpc_call *call, void *data);
void *rpc_call_get_data(const struct rpc_call *call);

/* The method being served, the caller, the loop. */
const struct rpc_method *rpc_call_method(const struct rpc_call *call);
const struct rpc_peer *rpc_call_peer(const struct rpc_call *call);
uv_loop_t *rpc_call_loop(const struct rpc_call *call);

/* What the server's authorize callback attached to the call (who is
 * calling); auth_free(auth) runs when the call is freed or the value is
 * replaced. NULL when nothing was attached. The "authorization" metadata
 * value is wiped when the call is freed. */
void rpc_call_set_auth(struct rpc_call *call, void *auth, void (*auth_free)(void *auth));
void *rpc_call_auth(const struct rpc_call *call);

/* The :path the client asked for ("/warren.v1.Sandboxes/Exec"; NULL when
 * it sent none), and a unary or server-streaming call's request message
 * once it has arrived (NULL before, and always for streaming requests). */
const char *rpc_call_path(const struct rpc_call *call);
const ProtobufCMessage *rpc_call_request(const struct rpc_call *call);

/* Request metadata (lower-case key) or NULL. */
const char *rpc_call_metadata(const struct rpc_call *call, const char *key);

/* Remaining time before the deadline in ms; -1 when there is none. */
int64_t rpc_call_remaining_ms(const struct rpc_call *call);

/* Bytes queued for sending on this call. */
size_t rpc_call_queued_bytes(const struct rpc_call *call);

/* Bytes queued across every call of the server (bounded-memory checks). */
size_t rpc_server_queued_bytes(const struct rpc_server *s);

/* The server a call belongs to. */
struct rpc_server *rpc_call_server(const struct rpc_call *call);

/* Calls alive (not yet freed) on the server, including the caller's own. */
size_t rpc_server_call_count(const struct rpc_server *s);
