/* SPDX-License-Identifier: Apache-2.0 */
/* The server half: listeners, one nghttp2 server session per connection,
 * calls, deadlines, flow control, graceful shutdown. See server.h for the
 * contract and h2.h for the transport rules. */
#include "rpc/server.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <netinet/in.h>
#include <arpa/inet.h>

#include <openssl/err.h>
#include <openssl/ssl.h>

#include "basic/log.h"
#include "basic/macro.h"
#include "rpc/grpc.h"
#include "rpc/h2.h"
#include "rpc/timer-heap.h"

#define DEFAULT_MAX_MESSAGE (16u << 20)
#define DEFAULT_HIGH_WATER (4u << 20)
#define MAX_METADATA 64
/* Cached message buffers go back to the kernel this long after the last
 * call ended. */
#define TRIM_DELAY_MS 100

struct listener {
        struct listener *next;
        struct rpc_server *s;
        union h2_stream_io io;
        bool is_unix, tls, sandbox;
        char *path;
};

struct srv_conn {
        struct h2_conn h2; /* first: nghttp2 user_data */
        struct rpc_server *s;
        struct srv_conn *prev, *next;
        struct rpc_peer peer;
        struct rpc_call *calls; /* calls attached to open streams */
        size_t n_calls;
        bool goaway;
};

struct md {
        char *key, *value;
};

struct rpc_call {
        int refs;
        struct rpc_server *s;
        struct srv_conn *conn; /* NULL once the stream is gone */
        struct rpc_call *cprev, *cnext;
        struct rpc_call *pnext; /* server pending list */
        bool queued;
        int32_t stream_id;
        const struct rpc_method *method;
        char *path;
        struct md md[MAX_METADATA];
        size_t n_md;
        bool bad_content_type;
        int64_t timeout_ms; /* -1: none */
        struct timer_heap_entry deadline;
        uint64_t deadline_at;

        struct grpc_decoder dec;
        struct h2_inbox inbox;
        size_t unconsumed;
        bool paused, half_closed, half_close_delivered;
        ProtobufCMessage *req;

        struct h2_msgq q;
        bool headers_sent, eof, want_writable, ev_writable;

        bool finished, cancelled, cancel_delivered;
        enum wr_status status, cancel_status;
        char *message;
        void *data;
        void *auth; /* rpc_call_set_auth */
        void (*auth_free)(void *auth);
};

struct rpc_server {
        uv_loop_t *loop;
        struct rpc_server_config cfg;
        const struct rpc_method **methods;
        size_t n_methods, cap_methods;
        SSL_CTX *ssl_ctx;
        nghttp2_session_callbacks *cbs;
        nghttp2_option *opt;
        struct listener *listeners;
        size_t open_listeners;
        struct srv_conn *conns;
        struct rpc_call *pending_head, *pending_tail;
        uv_idle_t idle;
        struct timer_heap timers;
        struct timer_heap_entry grace;
        struct timer_heap_entry trim; /* give cached message buffers back when idle */
        int port;
        size_t n_calls;
        int open_handles;
        bool shutting_down, shutdown_done, handles_closing, free_on_done, in_done;
        void (*done)(void *userdata);
        void *done_userdata;
};

static void call_unref(struct rpc_call *call);
static void server_maybe_done(struct rpc_server *s);
static void pending_add(struct rpc_call *call);

#define NV(n, v)                                                                                   \
        {                                                                                          \
                (uint8_t *) (n), (uint8_t *) (v), sizeof(n) - 1, sizeof(v) - 1,                    \
                        NGHTTP2_NV_FLAG_NO_COPY_NAME | NGHTTP2_NV_FLAG_NO_COPY_VALUE               \
        }

static const char *const status_str[] = {"0", "1",  "2",  "3",  "4",  "5",  "6",  "7", "8",
                                         "9", "10", "11", "12", "13", "14", "15", "16"};

/* --- calls --- */

/* Requests of sensitive methods are decoded into blocks wiped on free. */
static ProtobufCAllocator *call_allocator(const struct rpc_call *call) {
        return call->method && call->method->sensitive ? &h2_pb_allocator_wiped : &h2_pb_allocator;
}

static void call_free(struct rpc_call *call) {
        struct rpc_server *s = call->s;
        if (call->method && call->method->on_free)
                call->method->on_free(call);
        if (s->cfg.on_call_end && call->path)
                s->cfg.on_call_end(call,
                                   call->finished    ? (int) call->status
                                   : call->cancelled ? (int) call->cancel_status
                                                     : WR_STATUS_CANCELLED,
                                   call->finished ? call->message : NULL, s->cfg.ctx);
        timer_heap_disarm(&s->timers, &call->deadline);
        if (call->auth_free)
                call->auth_free(call->auth);
        for (size_t i = 0; i < call->n_md; i++) {
                /* credentials (authorization) do not outlive the call */
                if (call->md[i].value && strcmp(call->md[i].key, "authorization") == 0)
                        explicit_bzero(call->md[i].value, strlen(call->md[i].value));
                free(call->md[i].key);
                free(call->md[i].value);
        }
        h2_inbox_clear(&call->inbox);
        grpc_decoder_reset(&call->dec);
        h2_msgq_clear(&call->q);
        if (call->req)
                protobuf_c_message_free_unpacked(call->req, call_allocator(call));
        free(call->path);
        free(call->message);
        free(call);
        s->n_calls--;
        if (s->n_calls == 0 && h2_mem_cached() > 0 && !s->handles_closing)
                /* Best effort: without the timer the cache is trimmed later. */
                (void) timer_heap_arm(&s->timers, &s->trim, uv_now(s->loop) + TRIM_DELAY_MS);
        server_maybe_done(s);
}

static void call_unref(struct rpc_call *call) {
        if (call && --call->refs == 0)
                call_free(call);
}

struct rpc_call *rpc_call_ref(struct rpc_call *call) {
        call->refs++;
        return call;
}

void rpc_call_unref(struct rpc_call *call) {
        call_unref(call);
}

static void server_idle_cb(uv_idle_t *h);

static void trim_fired(struct timer_heap_entry *t) {
        struct rpc_server *s =
                (struct rpc_server *) ((char *) t - offsetof(struct rpc_server, trim));
        if (s->n_calls == 0)
                h2_mem_trim();
}

static void pending_add(struct rpc_call *call) {
        if (call->queued)
                return;
        call->queued = true;
        call->refs++;
        call->pnext = NULL;
        struct rpc_server *s = call->s;
        if (s->pending_tail)
                s->pending_tail->pnext = call;
        else
                s->pending_head = call;
        s->pending_tail = call;
        if (!s->handles_closing)
                uv_idle_start(&s->idle, server_idle_cb);
}

/* Detach a call from its stream (stream closed or connection gone). */
static void call_detach(struct rpc_call *call, int cancel_status) {
        struct srv_conn *conn = call->conn;
        if (!conn)
                return;
        if (call->cprev)
                call->cprev->cnext = call->cnext;
        else
                conn->calls = call->cnext;
        if (call->cnext)
                call->cnext->cprev = call->cprev;
        call->cprev = call->cnext = NULL;
        conn->n_calls--;
        call->conn = NULL;
        timer_heap_disarm(&call->s->timers, &call->deadline);
        h2_msgq_clear(&call->q);
        h2_inbox_clear(&call->inbox);
        grpc_decoder_reset(&call->dec);
        if (!call->finished) {
                call->finished = true;
                call->cancelled = true;
                call->cancel_status = cancel_status;
        }
        /* on_cancel and the final unref are delivered from the pump, never
         * from inside nghttp2. */
        pending_add(call);
        call->refs--; /* the stream's reference; pending holds one */
        if (conn->goaway && conn->n_calls == 0)
                h2_conn_close_when_flushed(&conn->h2);
}

static int submit_trailers(struct rpc_call *call, bool trailers_only) {
        nghttp2_session *session = call->conn->h2.session;
        char *enc = NULL;
        if (call->message && call->message[0] &&
            grpc_percent_encode(call->message, strlen(call->message), &enc) < 0)
                return -ENOMEM;
        int st = call->status >= 0 && call->status <= 16 ? call->status : WR_STATUS_UNKNOWN;
        if (call->s->cfg.on_call_status)
                call->s->cfg.on_call_status(call->method && call->path ? call->path : "unknown", st,
                                            call->s->cfg.on_call_status_userdata);
        nghttp2_nv nva[5];
        size_t n = 0;
        if (trailers_only) {
                nva[n++] = (nghttp2_nv) NV(":status", "200");
                nva[n++] = (nghttp2_nv) NV("content-type", "application/grpc");
        }
        nva[n++] = (nghttp2_nv){(uint8_t *) "grpc-status", (uint8_t *) status_str[st], 11,
                                strlen(status_str[st]),
                                NGHTTP2_NV_FLAG_NO_COPY_NAME | NGHTTP2_NV_FLAG_NO_COPY_VALUE};
        if (enc)
                nva[n++] = (nghttp2_nv){(uint8_t *) "grpc-message", (uint8_t *) enc, 12,
                                        strlen(enc), NGHTTP2_NV_FLAG_NO_COPY_NAME};
        int r;
        if (trailers_only)
                r = nghttp2_submit_headers(session, NGHTTP2_FLAG_END_STREAM, call->stream_id, NULL,
                                           nva, n, NULL);
        else
                r = nghttp2_submit_trailer(session, call->stream_id, nva, n);
        free(enc);
        return r == 0 ? 0 : -EPROTO;
}

static ssize_t data_read_cb(nghttp2_session *session, int32_t stream_id, uint8_t *buf,
                            size_t length, uint32_t *data_flags, nghttp2_data_source *source,
                            void *user_data) {
        struct rpc_call *call = nghttp2_session_get_stream_user_data(session, stream_id);
        if (!call)
                return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
        size_t n = MIN(length, call->q.bytes);
        if (n > 0)
                *data_flags |= NGHTTP2_DATA_FLAG_NO_COPY;
        if (n == call->q.bytes && call->eof) {
                *data_flags |= NGHTTP2_DATA_FLAG_EOF | NGHTTP2_DATA_FLAG_NO_END_STREAM;
                if (submit_trailers(call, false) < 0)
                        return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
        } else if (n == 0)
                return NGHTTP2_ERR_DEFERRED;
        /* The cost left after this read (its chunks are popped later, when
         * the frame is written): at most cost - n; nothing when n is all. */
        if (call->want_writable &&
            (n == call->q.bytes || h2_msgq_cost(&call->q) - n < call->s->cfg.send_high_water / 2)) {
                call->want_writable = false;
                call->ev_writable = true;
                pending_add(call);
        }
        return (ssize_t) n;
}

static int submit_response_headers(struct rpc_call *call) {
        static const nghttp2_nv hdrs[] = {NV(":status", "200"),
                                          NV("content-type", "application/grpc")};
        nghttp2_data_provider prd = {.source.ptr = &call->q, .read_callback = data_read_cb};
        int r = nghttp2_submit_response(call->conn->h2.session, call->stream_id, hdrs, 2, &prd);
        if (r != 0)
                return -EPROTO;
        call->headers_sent = true;
        return 0;
}

static int finish_internal(struct rpc_call *call, int status, const char *message) {
        if (call->finished)
                return -ECANCELED;
        call->finished = true;
        call->status = status;
        free(call->message);
        call->message = message ? strdup(message) : NULL;
        timer_heap_disarm(&call->s->timers, &call->deadline);
        struct srv_conn *conn = call->conn;
        if (!conn)
                return 0;
        h2_inbox_clear(&call->inbox);
        int r;
        if (!call->headers_sent && call->q.bytes == 0) {
                call->headers_sent = true;
                r = submit_trailers(call, true);
        } else {
                call->eof = true;
                if (!call->headers_sent)
                        r = submit_response_headers(call);
                else {
                        nghttp2_session_resume_data(conn->h2.session, call->stream_id);
                        r = 0;
                }
        }
        if (r < 0)
                nghttp2_submit_rst_stream(conn->h2.session, NGHTTP2_FLAG_NONE, call->stream_id,
                                          NGHTTP2_INTERNAL_ERROR);
        /* Data the client still sends is discarded: give its window back. */
        if (call->unconsumed) {
                nghttp2_session_consume_stream(conn->h2.session, call->stream_id, call->unconsumed);
                call->unconsumed = 0;
        }
        h2_conn_kick(&conn->h2);
        return 0;
}

/* The layer ends a call the handler is serving: reply status, tell the
 * handler through on_cancel. */
static void finish_by_layer(struct rpc_call *call, int status, const char *message) {
        if (finish_internal(call, status, message) < 0)
                return;
        if (call->method) {
                call->cancelled = true;
                call->cancel_status = status;
                pending_add(call);
        }
}

/* A message was queued: make sure it goes out, report the high-water
 * mark. */
static int call_queued(struct rpc_call *call) {
        int r;
        if (!call->headers_sent) {
                r = submit_response_headers(call);
                if (r < 0)
                        return r;
        } else
                nghttp2_session_resume_data(call->conn->h2.session, call->stream_id);
        h2_conn_kick(&call->conn->h2);
        if (h2_msgq_cost(&call->q) >= call->s->cfg.send_high_water) {
                call->want_writable = true;
                return 1;
        }
        return 0;
}

int rpc_call_send(struct rpc_call *call, const ProtobufCMessage *msg) {
        if (call->finished || !call->conn)
                return -ECANCELED;
        int r = h2_msgq_push(&call->q, msg, call->s->cfg.max_send_message);
        if (r < 0)
                return r;
        return call_queued(call);
}

int rpc_buf_alloc(struct rpc_buf *b, size_t cap) {
        struct h2_chunk *c = h2_chunk_new(cap);
        if (!c)
                return -ENOMEM;
        b->data = c->data + GRPC_FRAME_HEADER;
        b->cap = cap;
        b->priv = c;
        return 0;
}

void rpc_buf_free(struct rpc_buf *b) {
        h2_chunk_unref(b->priv);
        *b = (struct rpc_buf){0};
}

int rpc_call_send_buf(struct rpc_call *call, struct rpc_buf *b, size_t off, size_t len) {
        if (!b->priv)
                return -EINVAL;
        if (call->finished || !call->conn) {
                rpc_buf_free(b);
                return -ECANCELED;
        }
        int r = h2_msgq_push_chunk(&call->q, b->priv, off, len, call->s->cfg.max_send_message);
        if (r < 0) {
                rpc_buf_free(b);
                return r;
        }
        *b = (struct rpc_buf){0};
        return call_queued(call);
}

int rpc_call_send_ref(struct rpc_call *call, const void *head, size_t head_len, const void *data,
                      size_t len, void (*release)(void *arg), void *arg) {
        if (call->finished || !call->conn) {
                if (release)
                        release(arg);
                return -ECANCELED;
        }
        int r = h2_msgq_push_ref(&call->q, head, head_len, data, len, release, arg,
                                 call->s->cfg.max_send_message);
        if (r < 0)
                return r;
        return call_queued(call);
}

int rpc_call_finish(struct rpc_call *call, int status, const char *message) {
        return finish_internal(call, status, message);
}

int rpc_call_finish_err(struct rpc_call *call, const struct wr_err *e) {
        return finish_internal(call, err_status(e), e->msg);
}

int rpc_call_reply(struct rpc_call *call, const ProtobufCMessage *msg) {
        int r = rpc_call_send(call, msg);
        if (r < 0) {
                if (r == -EMSGSIZE)
                        finish_internal(call, WR_STATUS_RESOURCE_EXHAUSTED,
                                        "response message larger than the maximum");
                return r;
        }
        return finish_internal(call, WR_STATUS_OK, NULL);
}

void rpc_call_pause_recv(struct rpc_call *call) {
        call->paused = true;
}

void rpc_call_resume_recv(struct rpc_call *call) {
        if (!call->paused)
                return;
        call->paused = false;
        pending_add(call);
}

bool rpc_call_is_done(const struct rpc_call *call) {
        return call->finished || call->cancelled;
}
void *rpc_call_server_ctx(const struct rpc_call *call) {
        return call->s->cfg.ctx;
}
void rpc_call_set_data(struct rpc_call *call, void *data) {
        call->data = data;
}
void *rpc_call_get_data(const struct rpc_call *call) {
        return call->data;
}
const struct rpc_method *rpc_call_method(const struct rpc_call *call) {
        return call->method;
}
uv_loop_t *rpc_call_loop(const struct rpc_call *call) {
        return call->s->loop;
}
struct rpc_server *rpc_call_server(const struct rpc_call *call) {
        return call->s;
}
size_t rpc_call_queued_bytes(const struct rpc_call *call) {
        return call->q.bytes;
}
size_t rpc_server_call_count(const struct rpc_server *s) {
        return s->n_calls;
}

void rpc_call_set_auth(struct rpc_call *call, void *auth, void (*auth_free)(void *auth)) {
        if (call->auth_free)
                call->auth_free(call->auth);
        call->auth = auth;
        call->auth_free = auth_free;
}
void *rpc_call_auth(const struct rpc_call *call) {
        return call->auth;
}
const char *rpc_call_path(const struct rpc_call *call) {
        return call->path;
}
const ProtobufCMessage *rpc_call_request(const struct rpc_call *call) {
        return call->req;
}

const struct rpc_peer *rpc_call_peer(const struct rpc_call *call) {
        static const struct rpc_peer gone = {.uid = (uid_t) -1, .gid = (gid_t) -1, .addr = "gone"};
        return call->conn ? &call->conn->peer : &gone;
}

const char *rpc_call_metadata(const struct rpc_call *call, const char *key) {
        for (size_t i = 0; i < call->n_md; i++)
                if (strcmp(call->md[i].key, key) == 0)
                        return call->md[i].value;
        return NULL;
}

int64_t rpc_call_remaining_ms(const struct rpc_call *call) {
        if (call->timeout_ms < 0)
                return -1;
        uint64_t now = uv_now(call->s->loop);
        return call->deadline_at > now ? (int64_t) (call->deadline_at - now) : 0;
}

size_t rpc_server_queued_bytes(const struct rpc_server *s) {
        size_t n = 0;
        for (struct srv_conn *c = s->conns; c; c = c->next)
                for (struct rpc_call *call = c->calls; call; call = call->cnext)
                        n += call->q.bytes;
        return n;
}

/* --- delivery (outside nghttp2) --- */

static bool unary_request(const struct rpc_call *call) {
        return call->method->kind == RPC_UNARY || call->method->kind == RPC_SERVER_STREAM;
}

static void deliver(struct rpc_call *call) {
        const struct rpc_method *m = call->method;
        if (call->cancelled) {
                if (!call->cancel_delivered) {
                        call->cancel_delivered = true;
                        if (m && m->on_cancel)
                                m->on_cancel(call, call->cancel_status);
                }
                return;
        }
        if (!m || call->finished) {
                h2_inbox_clear(&call->inbox);
                return;
        }
        uint8_t *data;
        size_t len;
        ProtobufCAllocator *alloc = call_allocator(call);
        while (!call->paused && !call->finished && h2_inbox_pop(&call->inbox, &data, &len)) {
                ProtobufCMessage *msg = protobuf_c_message_unpack(m->input, alloc, len, data);
                if (m->sensitive && data)
                        explicit_bzero(data, len);
                h2_mem_free(data);
                if (!msg) {
                        finish_by_layer(call, WR_STATUS_INTERNAL,
                                        "could not parse the request message");
                        return;
                }
                if (unary_request(call)) {
                        if (call->req) {
                                protobuf_c_message_free_unpacked(msg, alloc);
                                finish_by_layer(call, WR_STATUS_INTERNAL,
                                                "more than one request message for a unary "
                                                "request");
                                return;
                        }
                        call->req = msg;
                        continue;
                }
                if (m->on_message)
                        m->on_message(call, msg);
                protobuf_c_message_free_unpacked(msg, alloc);
        }
        if (call->finished)
                return;
        if (!call->paused && call->unconsumed && call->conn) {
                nghttp2_session_consume_stream(call->conn->h2.session, call->stream_id,
                                               call->unconsumed);
                call->unconsumed = 0;
                h2_conn_kick(&call->conn->h2);
        }
        if (call->half_closed && !call->half_close_delivered && !call->inbox.head &&
            !call->paused) {
                call->half_close_delivered = true;
                if (unary_request(call)) {
                        if (!call->req)
                                finish_by_layer(call, WR_STATUS_INTERNAL,
                                                "missing request message");
                        else if (m->on_message)
                                m->on_message(call, call->req);
                } else if (m->on_half_close)
                        m->on_half_close(call);
        }
        if (call->ev_writable) {
                call->ev_writable = false;
                if (!call->finished && m->on_writable)
                        m->on_writable(call);
        }
}

static void server_pump(struct rpc_server *s) {
        struct rpc_call *list = s->pending_head;
        s->pending_head = s->pending_tail = NULL;
        while (list) {
                struct rpc_call *call = list;
                list = call->pnext;
                call->queued = false;
                deliver(call);
                call_unref(call);
        }
        if (!s->pending_head && !s->handles_closing)
                uv_idle_stop(&s->idle);
        server_maybe_done(s);
}

static void server_idle_cb(uv_idle_t *h) {
        struct rpc_server *s = h->data;
        uv_idle_stop(h);
        server_pump(s);
}

/* --- nghttp2 callbacks --- */

static int on_begin_headers(nghttp2_session *session, const nghttp2_frame *frame, void *user_data) {
        struct srv_conn *conn = user_data;
        if (frame->hd.type != NGHTTP2_HEADERS || frame->headers.cat != NGHTTP2_HCAT_REQUEST)
                return 0;
        struct rpc_call *call = calloc(1, sizeof(*call));
        if (!call)
                return NGHTTP2_ERR_CALLBACK_FAILURE;
        call->refs = 1;
        call->s = conn->s;
        call->conn = conn;
        call->stream_id = frame->hd.stream_id;
        call->timeout_ms = -1;
        call->dec.max = conn->s->cfg.max_recv_message;
        call->dec.alloc_fn = h2_mem_alloc;
        call->dec.free_fn = h2_mem_free;
        call->cnext = conn->calls;
        if (conn->calls)
                conn->calls->cprev = call;
        conn->calls = call;
        conn->n_calls++;
        conn->s->n_calls++;
        nghttp2_session_set_stream_user_data(session, call->stream_id, call);
        return 0;
}

static int on_header(nghttp2_session *session, const nghttp2_frame *frame, const uint8_t *name,
                     size_t namelen, const uint8_t *value, size_t valuelen, uint8_t flags,
                     void *user_data) {
        if (frame->hd.type != NGHTTP2_HEADERS || frame->headers.cat != NGHTTP2_HCAT_REQUEST)
                return 0;
        struct rpc_call *call = nghttp2_session_get_stream_user_data(session, frame->hd.stream_id);
        if (!call)
                return 0;
        if (namelen == 5 && memcmp(name, ":path", 5) == 0) {
                free(call->path);
                call->path = strndup((const char *) value, valuelen);
                return call->path ? 0 : NGHTTP2_ERR_CALLBACK_FAILURE;
        }
        if (namelen > 0 && name[0] == ':')
                return 0;
        if (namelen == 12 && memcmp(name, "grpc-timeout", 12) == 0) {
                uint64_t ms;
                if (grpc_timeout_parse((const char *) value, valuelen, &ms) == 0)
                        call->timeout_ms = (int64_t) MIN(ms, (uint64_t) INT64_MAX / 2);
                return 0;
        }
        if (namelen == 12 && memcmp(name, "content-type", 12) == 0) {
                call->bad_content_type = !grpc_content_type_ok((const char *) value, valuelen);
                return 0;
        }
        if (call->n_md >= MAX_METADATA)
                return 0;
        char *k = strndup((const char *) name, namelen);
        char *v = strndup((const char *) value, valuelen);
        if (!k || !v) {
                free(k);
                free(v);
                return NGHTTP2_ERR_CALLBACK_FAILURE;
        }
        call->md[call->n_md].key = k;
        call->md[call->n_md].value = v;
        call->n_md++;
        return 0;
}

static void deadline_fired(struct timer_heap_entry *t) {
        struct rpc_call *call =
                (struct rpc_call *) ((char *) t - offsetof(struct rpc_call, deadline));
        finish_by_layer(call, WR_STATUS_DEADLINE_EXCEEDED, "deadline exceeded");
}

static const struct rpc_method *find_method(struct rpc_server *s, const char *path) {
        for (size_t i = 0; i < s->n_methods; i++)
                if (strcmp(s->methods[i]->path, path) == 0)
                        return s->methods[i];
        return NULL;
}

static void call_start(struct rpc_call *call) {
        struct rpc_server *s = call->s;
        const struct rpc_method *m = call->path ? find_method(s, call->path) : NULL;
        if (call->bad_content_type) {
                finish_internal(call, WR_STATUS_INTERNAL, "invalid gRPC content-type");
                return;
        }
        if (!m) {
                char msg[300];
                snprintf(msg, sizeof(msg), "unknown method %.250s",
                         call->path ? call->path : "(none)");
                finish_internal(call, WR_STATUS_UNIMPLEMENTED, msg);
                return;
        }
        if (call->timeout_ms >= 0) {
                call->deadline_at = uv_now(s->loop) + (uint64_t) call->timeout_ms;
                call->deadline.cb = deadline_fired;
                if (timer_heap_arm(&s->timers, &call->deadline, call->deadline_at) < 0) {
                        /* A deadline that cannot be kept is not accepted. */
                        finish_internal(call, WR_STATUS_RESOURCE_EXHAUSTED,
                                        "out of memory arming the deadline");
                        return;
                }
        }
        call->method = m;
        if (s->cfg.authorize) {
                struct wr_err e = {0};
                if (s->cfg.authorize(call, s->cfg.ctx, &e) < 0) {
                        call->method = NULL; /* no handler sees this call */
                        finish_internal(call, err_status(&e), e.msg);
                        return;
                }
        }
}

static void half_close(struct rpc_call *call) {
        if (call->half_closed)
                return;
        call->half_closed = true;
        if (call->finished)
                return;
        if (grpc_decoder_partial(&call->dec)) {
                finish_by_layer(call, WR_STATUS_INTERNAL, "request stream ended mid-message");
                return;
        }
        pending_add(call);
}

static int on_frame_recv(nghttp2_session *session, const nghttp2_frame *frame, void *user_data) {
        if (frame->hd.type != NGHTTP2_HEADERS && frame->hd.type != NGHTTP2_DATA)
                return 0;
        struct rpc_call *call = nghttp2_session_get_stream_user_data(session, frame->hd.stream_id);
        if (!call || !call->conn)
                return 0;
        if (frame->hd.type == NGHTTP2_HEADERS && frame->headers.cat == NGHTTP2_HCAT_REQUEST)
                call_start(call);
        if (frame->hd.flags & NGHTTP2_FLAG_END_STREAM)
                half_close(call);
        return 0;
}

static int on_data_chunk_recv(nghttp2_session *session, uint8_t flags, int32_t stream_id,
                              const uint8_t *data, size_t len, void *user_data) {
        /* The connection window goes back at once, or one paused stream would
         * stall every other. */
        nghttp2_session_consume_connection(session, len);
        struct rpc_call *call = nghttp2_session_get_stream_user_data(session, stream_id);
        if (!call || call->finished || !call->method) {
                nghttp2_session_consume_stream(session, stream_id, len);
                return 0;
        }
        call->unconsumed += len;
        int r = grpc_decoder_feed(&call->dec, data, len, h2_inbox_push, &call->inbox);
        if (r == -EMSGSIZE) {
                char msg[160];
                snprintf(msg, sizeof(msg), "received message larger than max (%zu bytes)",
                         call->s->cfg.max_recv_message);
                finish_by_layer(call, WR_STATUS_RESOURCE_EXHAUSTED, msg);
        } else if (r == -EPROTONOSUPPORT)
                finish_by_layer(call, WR_STATUS_UNIMPLEMENTED, "compressed messages not supported");
        else if (r < 0)
                finish_by_layer(call, WR_STATUS_INTERNAL, "malformed request stream");
        else
                pending_add(call);
        return 0;
}

static int on_frame_send(nghttp2_session *session, const nghttp2_frame *frame, void *user_data) {
        /* Server finished before the client half-closed: RST_STREAM(NO_ERROR)
         * after the trailers so the stream does not linger. */
        if (frame->hd.type != NGHTTP2_HEADERS || !(frame->hd.flags & NGHTTP2_FLAG_END_STREAM))
                return 0;
        struct rpc_call *call = nghttp2_session_get_stream_user_data(session, frame->hd.stream_id);
        if (call && !call->half_closed)
                nghttp2_submit_rst_stream(session, NGHTTP2_FLAG_NONE, frame->hd.stream_id,
                                          NGHTTP2_NO_ERROR);
        return 0;
}

static int on_stream_close(nghttp2_session *session, int32_t stream_id, uint32_t error_code,
                           void *user_data) {
        struct rpc_call *call = nghttp2_session_get_stream_user_data(session, stream_id);
        if (!call)
                return 0;
        nghttp2_session_set_stream_user_data(session, stream_id, NULL);
        call_detach(call, WR_STATUS_CANCELLED);
        return 0;
}

/* --- connections --- */

static void conn_pump(struct h2_conn *h) {
        struct srv_conn *conn = (struct srv_conn *) h;
        server_pump(conn->s);
}

static void conn_on_ready(struct h2_conn *h) {}

static void conn_teardown(struct srv_conn *conn, int status) {
        while (conn->calls)
                call_detach(conn->calls, status);
}

static void conn_on_error(struct h2_conn *h, int err) {
        struct srv_conn *conn = (struct srv_conn *) h;
        if (err < 0 && err != -ECONNRESET)
                log_debug("rpc: connection from %s failed: %s%s%s", conn->peer.addr, strerror(-err),
                          h->tls_error[0] ? ": " : "", h->tls_error);
        conn_teardown(conn, WR_STATUS_UNAVAILABLE);
        h2_conn_close(h);
}

static void conn_on_closed(struct h2_conn *h) {
        struct srv_conn *conn = (struct srv_conn *) h;
        struct rpc_server *s = conn->s;
        if (conn->prev)
                conn->prev->next = conn->next;
        else
                s->conns = conn->next;
        if (conn->next)
                conn->next->prev = conn->prev;
        free(conn);
        server_maybe_done(s);
}

static const struct h2_conn_ops conn_ops = {
        .pump = conn_pump,
        .on_ready = conn_on_ready,
        .on_error = conn_on_error,
        .on_closed = conn_on_closed,
};

static void fill_peer(struct srv_conn *conn, bool is_unix, bool tls) {
        struct rpc_peer *p = &conn->peer;
        p->uid = (uid_t) -1;
        p->gid = (gid_t) -1;
        p->pid = 0;
        p->tls = tls;
        if (is_unix) {
                snprintf(p->addr, sizeof(p->addr), "unix");
                uv_os_fd_t fd;
                struct ucred cred;
                socklen_t len = sizeof(cred);
                if (uv_fileno(&conn->h2.io.handle, &fd) == 0 &&
                    getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) == 0) {
                        p->uid = cred.uid;
                        p->gid = cred.gid;
                        p->pid = cred.pid;
                }
                return;
        }
        struct sockaddr_storage ss;
        int len = sizeof(ss);
        char ip[INET6_ADDRSTRLEN] = "?";
        int port = 0;
        if (uv_tcp_getpeername(&conn->h2.io.tcp, (struct sockaddr *) &ss, &len) == 0) {
                if (ss.ss_family == AF_INET) {
                        struct sockaddr_in *in = (struct sockaddr_in *) &ss;
                        uv_ip4_name(in, ip, sizeof(ip));
                        port = ntohs(in->sin_port);
                } else if (ss.ss_family == AF_INET6) {
                        struct sockaddr_in6 *in6 = (struct sockaddr_in6 *) &ss;
                        uv_ip6_name(in6, ip, sizeof(ip));
                        port = ntohs(in6->sin6_port);
                }
        }
        snprintf(p->addr, sizeof(p->addr), "%s:%d", ip, port);
}

static void on_connection(uv_stream_t *ls, int status) {
        struct listener *l = ls->data;
        struct rpc_server *s = l->s;
        if (status < 0 || s->shutting_down)
                return;
        struct srv_conn *conn = calloc(1, sizeof(*conn));
        if (!conn)
                return;
        conn->s = s;
        conn->next = s->conns;
        if (s->conns)
                s->conns->prev = conn;
        s->conns = conn;
        if (h2_conn_prepare(&conn->h2, s->loop, l->is_unix, &conn_ops) < 0) {
                /* With handles left open, conn_on_closed follows. */
                if (conn->h2.open_handles == 0)
                        conn_on_closed(&conn->h2);
                return;
        }
        if (uv_accept(ls, &conn->h2.io.stream) < 0) {
                h2_conn_close(&conn->h2);
                return;
        }
        if (!l->is_unix)
                uv_tcp_nodelay(&conn->h2.io.tcp, 1);
        fill_peer(conn, l->is_unix, l->tls);
        conn->peer.sandbox = l->sandbox;
        nghttp2_session *session = NULL;
        SSL *ssl = NULL;
        if (nghttp2_session_server_new2(&session, s->cbs, conn, s->opt) != 0 ||
            h2_submit_settings(session, true) < 0 || (l->tls && !(ssl = SSL_new(s->ssl_ctx)))) {
                if (session)
                        nghttp2_session_del(session);
                h2_conn_close(&conn->h2);
                return;
        }
        if (ssl)
                SSL_set_accept_state(ssl);
        if (h2_conn_start(&conn->h2, session, ssl) < 0) {
                conn_on_error(&conn->h2, -EIO);
                return;
        }
        log_debug("rpc: connection from %s%s", conn->peer.addr, l->tls ? " (TLS)" : "");
}

/* --- server --- */

static int alpn_select(SSL *ssl, const unsigned char **out, unsigned char *outlen,
                       const unsigned char *in, unsigned int inlen, void *arg) {
        static const unsigned char h2[] = "\x02h2";
        unsigned char *o;
        if (SSL_select_next_proto(&o, outlen, h2, sizeof(h2) - 1, in, inlen) !=
                    OPENSSL_NPN_NEGOTIATED ||
            *outlen != 2 || memcmp(o, "h2", 2) != 0)
                return SSL_TLSEXT_ERR_ALERT_FATAL;
        *out = o;
        return SSL_TLSEXT_ERR_OK;
}

static int tls_setup(struct rpc_server *s, struct wr_err *e) {
        SSL_CTX *ctx = SSL_CTX_new(TLS_server_method());
        if (!ctx)
                return err_set(e, -ENOMEM, "TLS context");
        SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
        SSL_CTX_set_options(ctx, SSL_OP_NO_COMPRESSION | SSL_OP_NO_RENEGOTIATION);
        if (SSL_CTX_use_certificate_chain_file(ctx, s->cfg.tls_cert) != 1) {
                unsigned long ec = ERR_get_error();
                SSL_CTX_free(ctx);
                ERR_clear_error();
                return err_set(e, -EINVAL, "TLS certificate %s: %s", s->cfg.tls_cert,
                               ERR_reason_error_string(ec));
        }
        if (SSL_CTX_use_PrivateKey_file(ctx, s->cfg.tls_key, SSL_FILETYPE_PEM) != 1 ||
            SSL_CTX_check_private_key(ctx) != 1) {
                unsigned long ec = ERR_get_error();
                SSL_CTX_free(ctx);
                ERR_clear_error();
                return err_set(e, -EINVAL, "TLS key %s: %s", s->cfg.tls_key,
                               ERR_reason_error_string(ec));
        }
        SSL_CTX_set_alpn_select_cb(ctx, alpn_select, NULL);
        s->ssl_ctx = ctx;
        return 0;
}

static void server_destroy(struct rpc_server *s);
static void server_handle_closed(uv_handle_t *h);

int rpc_server_new(uv_loop_t *loop, const struct rpc_server_config *cfg, struct rpc_server **ret,
                   struct wr_err *e) {
        struct rpc_server *s = calloc(1, sizeof(*s));
        if (!s)
                return err_set(e, -ENOMEM, "out of memory");
        s->loop = loop;
        if (cfg)
                s->cfg = *cfg;
        if (!s->cfg.max_recv_message)
                s->cfg.max_recv_message = DEFAULT_MAX_MESSAGE;
        if (!s->cfg.max_send_message)
                s->cfg.max_send_message = DEFAULT_MAX_MESSAGE;
        if (!s->cfg.send_high_water)
                s->cfg.send_high_water = DEFAULT_HIGH_WATER;
        s->cfg.tls_cert = s->cfg.tls_key = NULL;
        s->port = -ENOENT;
        if (cfg && (!!cfg->tls_cert != !!cfg->tls_key)) {
                server_destroy(s);
                return err_set(e, -EINVAL, "TLS needs both a certificate and a key");
        }
        if (cfg && cfg->tls_cert) {
                s->cfg.tls_cert = strdup(cfg->tls_cert);
                s->cfg.tls_key = strdup(cfg->tls_key);
                int r = s->cfg.tls_cert && s->cfg.tls_key ? tls_setup(s, e)
                                                          : err_set(e, -ENOMEM, "out of memory");
                if (r < 0) {
                        server_destroy(s);
                        return r;
                }
        }
        if (nghttp2_session_callbacks_new(&s->cbs) != 0 || nghttp2_option_new(&s->opt) != 0) {
                server_destroy(s);
                return err_set(e, -ENOMEM, "out of memory");
        }
        h2_callbacks_set_send(s->cbs);
        nghttp2_session_callbacks_set_on_begin_headers_callback(s->cbs, on_begin_headers);
        nghttp2_session_callbacks_set_on_header_callback(s->cbs, on_header);
        nghttp2_session_callbacks_set_on_frame_recv_callback(s->cbs, on_frame_recv);
        nghttp2_session_callbacks_set_on_data_chunk_recv_callback(s->cbs, on_data_chunk_recv);
        nghttp2_session_callbacks_set_on_frame_send_callback(s->cbs, on_frame_send);
        nghttp2_session_callbacks_set_on_stream_close_callback(s->cbs, on_stream_close);
        nghttp2_option_set_no_auto_window_update(s->opt, 1);
        nghttp2_option_set_peer_max_concurrent_streams(s->opt, 1000);
        int r = uv_idle_init(loop, &s->idle);
        if (r < 0) {
                server_destroy(s);
                return err_set(e, r, "idle handle: %s", uv_strerror(r));
        }
        s->idle.data = s;
        s->open_handles = 1;
        r = timer_heap_init(&s->timers, loop);
        if (r < 0) {
                /* The idle handle is open: s goes once it is closed. */
                s->shutting_down = s->handles_closing = s->free_on_done = true;
                uv_close((uv_handle_t *) &s->idle, server_handle_closed);
                return err_set(e, r, "timer handle: %s", uv_strerror(r));
        }
        s->timers.handle.data = s;
        s->trim.cb = trim_fired;
        s->open_handles = 2;
        *ret = s;
        return 0;
}

int rpc_server_add_methods(struct rpc_server *s, const struct rpc_method *methods, size_t n) {
        for (size_t i = 0; i < n; i++)
                if (find_method(s, methods[i].path))
                        return -EEXIST;
        if (s->n_methods + n > s->cap_methods) {
                size_t cap = MAX(s->cap_methods * 2, s->n_methods + n);
                const struct rpc_method **m = realloc(s->methods, cap * sizeof(*m));
                if (!m)
                        return -ENOMEM;
                s->methods = m;
                s->cap_methods = cap;
        }
        for (size_t i = 0; i < n; i++)
                s->methods[s->n_methods++] = &methods[i];
        return 0;
}

static void listener_closed(uv_handle_t *h) {
        struct listener *l = h->data;
        struct rpc_server *s = l->s;
        struct listener **pp = &s->listeners;
        while (*pp && *pp != l)
                pp = &(*pp)->next;
        if (*pp)
                *pp = l->next;
        free(l->path);
        free(l);
        s->open_listeners--;
        server_maybe_done(s);
}

/* Remove a stale socket file: one nobody accepts on. -EADDRINUSE if a
 * server answers. */
static int unix_remove_stale(const char *path) {
        struct stat st;
        if (lstat(path, &st) < 0)
                return errno == ENOENT ? 0 : -errno;
        if (!S_ISSOCK(st.st_mode))
                return -EEXIST;
        _cleanup_close_ int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd < 0)
                return -errno;
        struct sockaddr_un sa = {.sun_family = AF_UNIX};
        snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
        int r = connect(fd, (struct sockaddr *) &sa, sizeof(sa));
        int err = errno;
        fd = safe_close(fd);
        if (r == 0)
                return -EADDRINUSE;
        if (err != ECONNREFUSED && err != ENOENT)
                return -err;
        if (unlink(path) < 0 && errno != ENOENT)
                return -errno;
        return 0;
}

static int parse_host_port(const char *hp, struct sockaddr_storage *ss) {
        char host[256];
        const char *colon = strrchr(hp, ':');
        if (!colon || colon == hp)
                return -EINVAL;
        size_t hl = (size_t) (colon - hp);
        if (hp[0] == '[' && hl >= 2 && hp[hl - 1] == ']') {
                hp++;
                hl -= 2;
        }
        if (hl >= sizeof(host))
                return -EINVAL;
        memcpy(host, hp, hl);
        host[hl] = 0;
        char *end;
        long port = strtol(colon + 1, &end, 10);
        if (*end || port < 0 || port > 65535 || end == colon + 1)
                return -EINVAL;
        if (strcmp(host, "localhost") == 0)
                snprintf(host, sizeof(host), "127.0.0.1");
        if (uv_ip4_addr(host, (int) port, (struct sockaddr_in *) ss) == 0)
                return 0;
        if (uv_ip6_addr(host, (int) port, (struct sockaddr_in6 *) ss) == 0)
                return 0;
        return -EINVAL;
}

static bool sockaddr_is_loopback(const struct sockaddr_storage *ss) {
        if (ss->ss_family == AF_INET) {
                const struct sockaddr_in *in = (const struct sockaddr_in *) ss;
                return (ntohl(in->sin_addr.s_addr) >> 24) == 127;
        }
        if (ss->ss_family == AF_INET6) {
                const struct in6_addr *a = &((const struct sockaddr_in6 *) ss)->sin6_addr;
                if (IN6_IS_ADDR_LOOPBACK(a))
                        return true;
                /* ::ffff:127.x.y.z */
                return IN6_IS_ADDR_V4MAPPED(a) && a->s6_addr[12] == 127;
        }
        return false;
}

bool rpc_listen_addr_is_loopback(const char *addr) {
        if (!addr)
                return false;
        if (strncmp(addr, "unix:", 5) == 0)
                return true;
        const char *hp = addr;
        if (strncmp(addr, "tcp:", 4) == 0 || strncmp(addr, "tls:", 4) == 0)
                hp = addr + 4;
        struct sockaddr_storage ss;
        if (parse_host_port(hp, &ss) < 0)
                return false;
        return sockaddr_is_loopback(&ss);
}

int rpc_server_listen(struct rpc_server *s, const char *addr, struct wr_err *e) {
        return rpc_server_listen_flags(s, addr, 0, e);
}

static int listen_impl(struct rpc_server *s, const char *addr, unsigned flags, int fd,
                       struct wr_err *e);

int rpc_server_listen_flags(struct rpc_server *s, const char *addr, unsigned flags,
                            struct wr_err *e) {
        return listen_impl(s, addr, flags, -EBADF, e);
}

int rpc_server_listen_fd(struct rpc_server *s, const char *addr, unsigned flags, int fd,
                         struct wr_err *e) {
        if (fd < 0)
                return err_set(e, -EBADF, "listen %s: no socket", addr);
        return listen_impl(s, addr, flags, fd, e);
}

int rpc_listen_prebind(const char *addr, unsigned flags, int *ret_fd, struct wr_err *e) {
        _cleanup_close_ int fd = -EBADF;
        if (strncmp(addr, "unix:", 5) == 0) {
                const char *path = addr + 5;
                if (strncmp(path, "//", 2) == 0)
                        path += 2;
                struct sockaddr_un sa = {.sun_family = AF_UNIX};
                if (!*path || strlen(path) >= sizeof(sa.sun_path))
                        return err_set(e, -EINVAL, "listen %s: bad socket path", addr);
                snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
                int r = unix_remove_stale(path);
                if (r < 0)
                        return err_set(e, r, "listen %s: %s", addr,
                                       r == -EADDRINUSE ? "another server is listening there"
                                                        : strerror(-r));
                fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
                if (fd < 0)
                        return err_set(e, -errno, "listen %s: socket: %m", addr);
                mode_t old = umask(0117);
                r = bind(fd, (struct sockaddr *) &sa, sizeof(sa)) < 0 ? -errno : 0;
                umask(old);
                if (r == 0 && chmod(path, (flags & RPC_LISTEN_SANDBOX) ? 0666 : 0660) < 0)
                        r = -errno;
                if (r < 0)
                        return err_set(e, r, "listen %s: %s", addr, strerror(-r));
                /* listening already: a client that sees the file may
                 * connect; it is accepted once the loop runs */
                if (listen(fd, 511) < 0)
                        return err_set(e, -errno, "listen %s: %m", addr);
        } else {
                const char *hp = addr;
                if (strncmp(addr, "tls:", 4) == 0 || strncmp(addr, "tcp:", 4) == 0)
                        hp = addr + 4;
                struct sockaddr_storage ss;
                if (parse_host_port(hp, &ss) < 0)
                        return err_set(e, -EINVAL,
                                       "listen %s: expected HOST:PORT with a numeric host", addr);
                fd = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
                if (fd < 0)
                        return err_set(e, -errno, "listen %s: socket: %m", addr);
                int one = 1;
                (void) setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
                socklen_t len = ss.ss_family == AF_INET6 ? sizeof(struct sockaddr_in6)
                                                         : sizeof(struct sockaddr_in);
                if (bind(fd, (struct sockaddr *) &ss, len) < 0 || listen(fd, 511) < 0)
                        return err_set(e, -errno, "listen %s: bind: %m", addr);
        }
        *ret_fd = TAKE_FD(fd);
        return 0;
}

static int listen_impl(struct rpc_server *s, const char *addr, unsigned flags, int fd,
                       struct wr_err *e) {
        if ((flags & RPC_LISTEN_SANDBOX) && strncmp(addr, "unix:", 5) != 0)
                return err_set(e, -EINVAL, "listen %s: a sandbox listener is a unix socket", addr);
        if (s->shutting_down)
                return err_set(e, -ESHUTDOWN, "listen %s: server is shutting down", addr);
        struct listener *l = calloc(1, sizeof(*l));
        if (!l)
                return err_set(e, -ENOMEM, "out of memory");
        l->s = s;
        int r;
        if (strncmp(addr, "unix:", 5) == 0) {
                const char *path = addr + 5;
                if (strncmp(path, "//", 2) == 0)
                        path += 2;
                if (!*path || strlen(path) >= sizeof(((struct sockaddr_un *) 0)->sun_path)) {
                        free(l);
                        return err_set(e, -EINVAL, "listen %s: bad socket path", addr);
                }
                l->is_unix = true;
                l->path = strdup(path);
                if (!l->path) {
                        free(l);
                        return err_set(e, -ENOMEM, "out of memory");
                }
                r = fd >= 0 ? 0 : unix_remove_stale(path);
                if (r < 0) {
                        free(l->path);
                        free(l);
                        return err_set(e, r, "listen %s: %s", addr,
                                       r == -EADDRINUSE ? "another server is listening there"
                                                        : strerror(-r));
                }
                r = uv_pipe_init(s->loop, &l->io.pipe, 0);
                if (r < 0) {
                        free(l->path);
                        free(l);
                        return err_set(e, r, "listen %s: %s", addr, uv_strerror(r));
                }
                l->io.handle.data = l;
                s->open_listeners++;
                l->sandbox = flags & RPC_LISTEN_SANDBOX;
                if (fd >= 0) {
                        /* bound by rpc_listen_prebind (mode set there) */
                        r = uv_pipe_open(&l->io.pipe, fd);
                } else {
                        mode_t old = umask(0117);
                        r = uv_pipe_bind(&l->io.pipe, path);
                        umask(old);
                        if (r == 0 && chmod(path, l->sandbox ? 0666 : 0660) < 0)
                                r = -errno;
                }
        } else {
                bool tls = strncmp(addr, "tls:", 4) == 0;
                const char *hp = addr;
                if (tls || strncmp(addr, "tcp:", 4) == 0)
                        hp = addr + 4;
                if (tls && !s->ssl_ctx) {
                        free(l);
                        return err_set(e, -EINVAL, "listen %s: TLS needs a certificate and key",
                                       addr);
                }
                struct sockaddr_storage ss;
                r = parse_host_port(hp, &ss);
                if (r < 0) {
                        free(l);
                        return err_set(e, r, "listen %s: expected HOST:PORT with a numeric host",
                                       addr);
                }
                l->tls = tls;
                r = uv_tcp_init(s->loop, &l->io.tcp);
                if (r < 0) {
                        free(l);
                        return err_set(e, r, "listen %s: %s", addr, uv_strerror(r));
                }
                l->io.handle.data = l;
                s->open_listeners++;
                r = fd >= 0 ? uv_tcp_open(&l->io.tcp, fd)
                            : uv_tcp_bind(&l->io.tcp, (struct sockaddr *) &ss, 0);
                if (r == 0) {
                        struct sockaddr_storage bound;
                        int len = sizeof(bound);
                        if (uv_tcp_getsockname(&l->io.tcp, (struct sockaddr *) &bound, &len) == 0)
                                s->port = ntohs(((struct sockaddr_in *) &bound)->sin_port);
                }
        }
        if (r == 0)
                r = uv_listen(&l->io.stream, 511, on_connection);
        l->next = s->listeners;
        s->listeners = l;
        if (r < 0) {
                uv_close(&l->io.handle, listener_closed);
                return err_set(e, r, "listen %s: %s", addr, uv_strerror(r));
        }
        return 0;
}

int rpc_server_port(struct rpc_server *s) {
        return s->port;
}

/* Free the memory of a server whose handles are closed (or were never
 * opened); safe on a half-built one. */
static void server_destroy(struct rpc_server *s) {
        nghttp2_session_callbacks_del(s->cbs);
        nghttp2_option_del(s->opt);
        SSL_CTX_free(s->ssl_ctx);
        free((char *) s->cfg.tls_cert);
        free((char *) s->cfg.tls_key);
        free(s->methods);
        free(s);
}

static void server_handle_closed(uv_handle_t *h) {
        struct rpc_server *s = h->data;
        if (--s->open_handles > 0)
                return;
        s->shutdown_done = true;
        s->in_done = true;
        if (s->done)
                s->done(s->done_userdata);
        s->in_done = false;
        if (s->free_on_done)
                server_destroy(s);
}

static void server_maybe_done(struct rpc_server *s) {
        if (!s->shutting_down || s->handles_closing || s->conns || s->open_listeners ||
            s->pending_head || s->n_calls)
                return;
        s->handles_closing = true;
        uv_idle_stop(&s->idle);
        uv_close((uv_handle_t *) &s->idle, server_handle_closed);
        timer_heap_close(&s->timers, server_handle_closed);
}

static void grace_expired(struct timer_heap_entry *t) {
        struct rpc_server *s =
                (struct rpc_server *) ((char *) t - offsetof(struct rpc_server, grace));
        for (struct srv_conn *c = s->conns; c; c = c->next) {
                conn_teardown(c, WR_STATUS_UNAVAILABLE);
                h2_conn_close(&c->h2);
        }
}

void rpc_server_shutdown(struct rpc_server *s, uint64_t grace_ms, void (*done)(void *userdata),
                         void *userdata) {
        if (s->shutting_down)
                return;
        s->shutting_down = true;
        s->done = done;
        s->done_userdata = userdata;
        for (struct listener *l = s->listeners; l; l = l->next) {
                if (uv_is_closing(&l->io.handle))
                        continue;
                if (l->is_unix && l->path)
                        unlink(l->path);
                uv_close(&l->io.handle, listener_closed);
        }
        for (struct srv_conn *c = s->conns; c; c = c->next) {
                if (c->h2.session && !c->h2.closing) {
                        nghttp2_submit_goaway(
                                c->h2.session, NGHTTP2_FLAG_NONE,
                                nghttp2_session_get_last_proc_stream_id(c->h2.session),
                                NGHTTP2_NO_ERROR, NULL, 0);
                        c->goaway = true;
                        if (c->n_calls == 0)
                                h2_conn_close_when_flushed(&c->h2);
                        else
                                h2_conn_kick(&c->h2);
                } else
                        h2_conn_close(&c->h2);
        }
        s->grace.cb = grace_expired;
        if (timer_heap_arm(&s->timers, &s->grace, uv_now(s->loop) + grace_ms) < 0)
                grace_expired(&s->grace); /* no grace without a timer */
        server_maybe_done(s);
}

void rpc_server_free(struct rpc_server *s) {
        if (!s)
                return;
        if (!s->shutdown_done || s->in_done) {
                /* Close everything first; the memory goes when the handles
                 * are closed (the caller keeps running the loop). */
                s->free_on_done = true;
                rpc_server_shutdown(s, 0, NULL, NULL);
                return;
        }
        server_destroy(s);
}
