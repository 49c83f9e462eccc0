/* SPDX-License-Identifier: Apache-2.0 */
/* The client half: one HTTP/2 connection, streams with callbacks, a
 * blocking unary helper. See client.h for the contract. */
#include "rpc/client.h"

#include <errno.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include "basic/macro.h"
#include "rpc/grpc.h"
#include "rpc/h2.h"
#include "rpc/timer-heap.h"

#define DEFAULT_MAX_MESSAGE (16u << 20)
#define HIGH_WATER (4u << 20)
/* The server enforces grpc-timeout; the local timer is a backstop a little
 * later, so the server's DEADLINE_EXCEEDED normally wins. */
#define LOCAL_DEADLINE_SLACK_MS 20

enum client_state { CONNECTING, CONNECTED, FAILED };

struct rpc_stream {
        int refs;
        struct rpc_client *c; /* NULL once the client is gone */
        struct rpc_stream *prev, *next;
        struct rpc_stream *pnext;
        bool queued;
        int32_t stream_id;
        const ProtobufCMessageDescriptor *resp_desc;
        struct rpc_stream_callbacks cb;
        void *userdata;
        struct h2_msgq q;
        bool eof, want_writable, ev_writable;
        struct grpc_decoder dec;
        struct h2_inbox inbox;
        size_t unconsumed;
        bool paused;
        int http_status;
        bool got_status;
        enum wr_status status; /* grpc-status as received (any number) */
        char *message;
        enum wr_status local_status; /* set when we ended the stream: cancel, deadline */
        char local_message[96];
        bool closed, close_delivered, user_freed;
        struct timer_heap_entry deadline;
        /* rpc_client_unary: keep the first response message. */
        bool keep;
        ProtobufCMessage *kept;
};

struct rpc_client {
        struct h2_conn h2; /* first: nghttp2 user_data */
        uv_loop_t *loop;
        char *authority;
        char *auth_header;
        char *environment; /* x-warren-environment, or NULL */
        bool tls;
        size_t max_recv;
        SSL_CTX *ssl_ctx;
        SSL *ssl_pending; /* until h2_conn_start takes it */
        nghttp2_session_callbacks *cbs;
        nghttp2_option *opt;
        struct rpc_stream *streams; /* attached to the connection */
        size_t n_live;              /* streams whose on_close is not delivered */
        struct rpc_stream *pending_head, *pending_tail;
        uv_idle_t idle;
        struct timer_heap timers;
        struct timer_heap_entry connect_timer;
        uv_connect_t creq;
        enum client_state state;
        int conn_err;
        int open_handles;
        bool h2_prepared, freeing;
        bool idle_open, timers_open; /* handles initialised (closed by rpc_client_free) */
};

static void stream_unref(struct rpc_stream *st);
static void client_maybe_free(struct rpc_client *c);

/* --- streams --- */

static void stream_destroy(struct rpc_stream *st) {
        h2_inbox_clear(&st->inbox);
        h2_msgq_clear(&st->q);
        grpc_decoder_reset(&st->dec);
        if (st->kept)
                protobuf_c_message_free_unpacked(st->kept, NULL);
        free(st->message);
        free(st);
}

static void stream_unref(struct rpc_stream *st) {
        if (--st->refs == 0)
                stream_destroy(st);
}

static void client_idle_cb(uv_idle_t *h);

static void pending_add(struct rpc_stream *st) {
        struct rpc_client *c = st->c;
        if (st->queued || !c)
                return;
        st->queued = true;
        st->refs++;
        st->pnext = NULL;
        if (c->pending_tail)
                c->pending_tail->pnext = st;
        else
                c->pending_head = st;
        c->pending_tail = st;
        if (!c->freeing)
                uv_idle_start(&c->idle, client_idle_cb);
}

/* The stream is over on the wire (or the connection is gone). */
static void stream_mark_closed(struct rpc_stream *st) {
        struct rpc_client *c = st->c;
        if (st->closed)
                return;
        st->closed = true;
        if (c) {
                timer_heap_disarm(&c->timers, &st->deadline);
                if (st->prev)
                        st->prev->next = st->next;
                else
                        c->streams = st->next;
                if (st->next)
                        st->next->prev = st->prev;
                st->prev = st->next = NULL;
        }
        h2_msgq_clear(&st->q);
        pending_add(st);
}

/* End the stream from our side with a local status. */
static void stream_abort(struct rpc_stream *st, int status, const char *msg) {
        if (st->closed || st->local_status)
                return;
        st->local_status = status;
        snprintf(st->local_message, sizeof(st->local_message), "%s", msg);
        struct rpc_client *c = st->c;
        if (c && c->h2.session && st->stream_id > 0) {
                nghttp2_submit_rst_stream(c->h2.session, NGHTTP2_FLAG_NONE, st->stream_id,
                                          NGHTTP2_CANCEL);
                h2_conn_kick(&c->h2);
        } else
                stream_mark_closed(st);
}

static int final_status(struct rpc_stream *st, const char **msg) {
        if (st->local_status) {
                *msg = st->local_message;
                return st->local_status;
        }
        if (st->got_status) {
                *msg = st->message ? st->message : "";
                return st->status;
        }
        *msg = st->message ? st->message : "stream closed without grpc-status";
        if (st->http_status && st->http_status != 200)
                return st->http_status == 503 ? WR_STATUS_UNAVAILABLE : WR_STATUS_UNKNOWN;
        return st->status ? st->status : WR_STATUS_INTERNAL;
}

static void deliver(struct rpc_stream *st) {
        struct rpc_client *c = st->c;
        bool freeing = c && c->freeing;
        uint8_t *data;
        size_t len;
        while (!st->paused && !st->user_freed && !st->local_status && !freeing &&
               h2_inbox_pop(&st->inbox, &data, &len)) {
                /* The message rpc_client_unary returns is the caller's to
                 * free with the default allocator. */
                bool keep = st->keep && !st->kept;
                if (!keep && st->cb.on_raw && st->cb.on_raw(st, data, len, st->userdata)) {
                        h2_mem_free(data);
                        continue;
                }
                ProtobufCAllocator *a = keep ? NULL : &h2_pb_allocator;
                ProtobufCMessage *msg = protobuf_c_message_unpack(st->resp_desc, a, len, data);
                h2_mem_free(data);
                if (!msg) {
                        stream_abort(st, WR_STATUS_INTERNAL, "could not parse a response message");
                        break;
                }
                if (keep) {
                        st->kept = msg;
                        continue;
                }
                if (st->cb.on_message)
                        st->cb.on_message(st, msg, st->userdata);
                protobuf_c_message_free_unpacked(msg, a);
        }
        if (!st->paused && st->unconsumed && !st->closed && c && c->h2.session) {
                nghttp2_session_consume_stream(c->h2.session, st->stream_id, st->unconsumed);
                st->unconsumed = 0;
                h2_conn_kick(&c->h2);
        }
        if (st->ev_writable) {
                st->ev_writable = false;
                if (!st->closed && !st->user_freed && st->cb.on_writable)
                        st->cb.on_writable(st, st->userdata);
        }
        if (st->closed && !st->close_delivered &&
            (!st->inbox.head || st->user_freed || st->local_status || freeing)) {
                st->close_delivered = true;
                h2_inbox_clear(&st->inbox);
                if (c)
                        c->n_live--;
                const char *msg;
                int status = final_status(st, &msg);
                if (!st->user_freed && st->cb.on_close)
                        st->cb.on_close(st, status, msg, st->userdata);
                st->c = NULL;     /* detached: may outlive the client */
                stream_unref(st); /* the "open" reference */
        }
}

static void client_pump(struct rpc_client *c) {
        struct rpc_stream *list = c->pending_head;
        c->pending_head = c->pending_tail = NULL;
        while (list) {
                struct rpc_stream *st = list;
                list = st->pnext;
                st->queued = false;
                deliver(st);
                stream_unref(st);
        }
        if (!c->pending_head && !c->freeing)
                uv_idle_stop(&c->idle);
}

static void client_idle_cb(uv_idle_t *h) {
        struct rpc_client *c = h->data;
        uv_idle_stop(h);
        client_pump(c);
        client_maybe_free(c);
}

static ssize_t data_read_cb(nghttp2_session *session, int32_t stream_id, uint8_t *buf,
                            size_t length, uint32_t *data_flags, nghttp2_data_source *source,
                            void *user_data) {
        struct rpc_stream *st = nghttp2_session_get_stream_user_data(session, stream_id);
        if (!st)
                return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
        size_t n = MIN(length, st->q.bytes);
        if (n > 0)
                *data_flags |= NGHTTP2_DATA_FLAG_NO_COPY;
        if (n == st->q.bytes && st->eof)
                *data_flags |= NGHTTP2_DATA_FLAG_EOF;
        else if (n == 0)
                return NGHTTP2_ERR_DEFERRED;
        if (st->want_writable && st->q.bytes - n < HIGH_WATER / 2) {
                st->want_writable = false;
                st->ev_writable = true;
                pending_add(st);
        }
        return (ssize_t) n;
}

static void deadline_fired(struct timer_heap_entry *t) {
        struct rpc_stream *st =
                (struct rpc_stream *) ((char *) t - offsetof(struct rpc_stream, deadline));
        stream_abort(st, WR_STATUS_DEADLINE_EXCEEDED, "deadline exceeded");
}

#define NV(n, v)                                                                                   \
        (nghttp2_nv) {                                                                             \
                (uint8_t *) (n), (uint8_t *) (v), strlen(n), strlen(v),                            \
                        NGHTTP2_NV_FLAG_NO_COPY_NAME | NGHTTP2_NV_FLAG_NO_COPY_VALUE               \
        }
/* Values that do not outlive the call are copied by nghttp2. */
#define NV_COPY(n, v)                                                                              \
        (nghttp2_nv) {                                                                             \
                (uint8_t *) (n), (uint8_t *) (v), strlen(n), strlen(v),                            \
                        NGHTTP2_NV_FLAG_NO_COPY_NAME                                               \
        }

int rpc_stream_open(struct rpc_client *c, const char *path,
                    const ProtobufCMessageDescriptor *resp_desc, uint64_t timeout_ms,
                    const struct rpc_stream_callbacks *cb, void *userdata,
                    struct rpc_stream **ret) {
        if (c->state != CONNECTED || !c->h2.session || c->h2.errored)
                return c->conn_err < 0 ? c->conn_err : -ENOTCONN;
        struct rpc_stream *st = calloc(1, sizeof(*st));
        if (!st)
                return -ENOMEM;
        st->refs = 2; /* the caller's and the "open" one */
        st->c = c;
        st->resp_desc = resp_desc;
        if (cb)
                st->cb = *cb;
        st->userdata = userdata;
        st->dec.max = c->max_recv;
        st->dec.alloc_fn = h2_mem_alloc;
        st->dec.free_fn = h2_mem_free;
        char timeout[32];
        nghttp2_nv nva[10];
        size_t n = 0;
        nva[n++] = NV(":method", "POST");
        nva[n++] = NV(":scheme", c->tls ? "https" : "http");
        nva[n++] = NV_COPY(":path", path);
        nva[n++] = NV(":authority", c->authority);
        nva[n++] = NV("te", "trailers");
        nva[n++] = NV("content-type", "application/grpc");
        nva[n++] = NV("user-agent", "warren-c/" WARREN_VERSION);
        if (timeout_ms) {
                grpc_timeout_format(timeout_ms, timeout, sizeof(timeout));
                nva[n++] = NV_COPY("grpc-timeout", timeout);
        }
        if (c->auth_header)
                nva[n++] = NV("authorization", c->auth_header);
        if (c->environment)
                nva[n++] = NV("x-warren-environment", c->environment);
        nghttp2_data_provider prd = {.source.ptr = &st->q, .read_callback = data_read_cb};
        int32_t id = nghttp2_submit_request(c->h2.session, NULL, nva, n, &prd, st);
        if (id < 0) {
                free(st);
                return id == NGHTTP2_ERR_STREAM_ID_NOT_AVAILABLE ? -EAGAIN : -EPROTO;
        }
        st->stream_id = id;
        st->next = c->streams;
        if (c->streams)
                c->streams->prev = st;
        c->streams = st;
        c->n_live++;
        if (timeout_ms) {
                st->deadline.cb = deadline_fired;
                if (timer_heap_arm(&c->timers, &st->deadline,
                                   uv_now(c->loop) + timeout_ms + LOCAL_DEADLINE_SLACK_MS) < 0)
                        /* A deadline that cannot be kept ends the call now. */
                        stream_abort(st, WR_STATUS_RESOURCE_EXHAUSTED,
                                     "out of memory arming the deadline");
        }
        h2_conn_kick(&c->h2);
        *ret = st;
        return 0;
}

int rpc_stream_send(struct rpc_stream *st, const ProtobufCMessage *msg) {
        struct rpc_client *c = st->c;
        if (st->closed || st->eof || st->local_status || !c || !c->h2.session)
                return -ECANCELED;
        int r = h2_msgq_push(&st->q, msg, 0);
        if (r < 0)
                return r;
        nghttp2_session_resume_data(c->h2.session, st->stream_id);
        h2_conn_kick(&c->h2);
        if (st->q.bytes >= HIGH_WATER) {
                st->want_writable = true;
                return 1;
        }
        return 0;
}

int rpc_stream_close_send(struct rpc_stream *st) {
        struct rpc_client *c = st->c;
        if (st->closed || st->eof || !c || !c->h2.session)
                return -ECANCELED;
        st->eof = true;
        nghttp2_session_resume_data(c->h2.session, st->stream_id);
        h2_conn_kick(&c->h2);
        return 0;
}

void rpc_stream_cancel(struct rpc_stream *st) {
        stream_abort(st, WR_STATUS_CANCELLED, "cancelled by the client");
}

void rpc_stream_pause_recv(struct rpc_stream *st) {
        st->paused = true;
}

void rpc_stream_resume_recv(struct rpc_stream *st) {
        if (!st->paused)
                return;
        st->paused = false;
        pending_add(st);
}

void rpc_stream_free(struct rpc_stream *st) {
        if (!st || st->user_freed)
                return;
        st->user_freed = true;
        if (!st->closed)
                stream_abort(st, WR_STATUS_CANCELLED, "stream freed");
        stream_unref(st);
}

/* --- nghttp2 callbacks --- */

static int on_header(nghttp2_session *session, const nghttp2_frame *frame, const uint8_t *name,
                     size_t namelen, const uint8_t *value, size_t valuelen, uint8_t flags,
                     void *user_data) {
        if (frame->hd.type != NGHTTP2_HEADERS)
                return 0;
        struct rpc_stream *st = nghttp2_session_get_stream_user_data(session, frame->hd.stream_id);
        if (!st)
                return 0;
        if (namelen == 7 && memcmp(name, ":status", 7) == 0) {
                st->http_status = 0;
                for (size_t i = 0; i < valuelen && i < 3; i++)
                        st->http_status = st->http_status * 10 + (value[i] - '0');
        } else if (namelen == 11 && memcmp(name, "grpc-status", 11) == 0) {
                int v = 0;
                for (size_t i = 0; i < valuelen && i < 3; i++)
                        v = v * 10 + (value[i] >= '0' && value[i] <= '9' ? value[i] - '0' : 0);
                st->status = (enum wr_status) v;
                st->got_status = true;
        } else if (namelen == 12 && memcmp(name, "grpc-message", 12) == 0) {
                free(st->message);
                st->message = NULL;
                if (grpc_percent_decode((const char *) value, valuelen, &st->message, NULL) < 0)
                        return NGHTTP2_ERR_CALLBACK_FAILURE;
        }
        return 0;
}

static int on_data_chunk_recv(nghttp2_session *session, uint8_t flags, int32_t stream_id,
                              const uint8_t *data, size_t len, void *user_data) {
        nghttp2_session_consume_connection(session, len);
        struct rpc_stream *st = nghttp2_session_get_stream_user_data(session, stream_id);
        if (!st || st->local_status) {
                nghttp2_session_consume_stream(session, stream_id, len);
                return 0;
        }
        st->unconsumed += len;
        int r = grpc_decoder_feed(&st->dec, data, len, h2_inbox_push, &st->inbox);
        if (r == -EMSGSIZE)
                stream_abort(st, WR_STATUS_RESOURCE_EXHAUSTED,
                             "response message larger than the maximum");
        else if (r < 0)
                stream_abort(st, WR_STATUS_INTERNAL, "malformed response stream");
        else
                pending_add(st);
        return 0;
}

static int on_stream_close(nghttp2_session *session, int32_t stream_id, uint32_t error_code,
                           void *user_data) {
        struct rpc_stream *st = nghttp2_session_get_stream_user_data(session, stream_id);
        if (!st)
                return 0;
        if (!st->got_status && !st->local_status && error_code != NGHTTP2_NO_ERROR) {
                st->local_status = error_code == NGHTTP2_REFUSED_STREAM ? WR_STATUS_UNAVAILABLE
                                   : error_code == NGHTTP2_CANCEL       ? WR_STATUS_CANCELLED
                                                                        : WR_STATUS_INTERNAL;
                snprintf(st->local_message, sizeof(st->local_message),
                         "stream reset by the server (%s)", nghttp2_http2_strerror(error_code));
        } else if (!st->got_status && !st->local_status && grpc_decoder_partial(&st->dec)) {
                st->local_status = WR_STATUS_INTERNAL;
                snprintf(st->local_message, sizeof(st->local_message),
                         "response ended mid-message");
        }
        stream_mark_closed(st);
        return 0;
}

/* --- connection --- */

static void conn_pump(struct h2_conn *h) {
        client_pump((struct rpc_client *) h);
}

static void conn_on_ready(struct h2_conn *h) {
        struct rpc_client *c = (struct rpc_client *) h;
        c->state = CONNECTED;
        timer_heap_disarm(&c->timers, &c->connect_timer);
}

static void client_fail_streams(struct rpc_client *c, const char *why) {
        while (c->streams) {
                struct rpc_stream *st = c->streams;
                if (!st->local_status && !st->got_status) {
                        st->local_status = WR_STATUS_UNAVAILABLE;
                        snprintf(st->local_message, sizeof(st->local_message), "%s", why);
                }
                stream_mark_closed(st);
        }
}

static void conn_on_error(struct h2_conn *h, int err) {
        struct rpc_client *c = (struct rpc_client *) h;
        c->conn_err = err < 0 ? err : -ECONNRESET;
        c->state = FAILED;
        client_fail_streams(c, "connection to the server lost");
        h2_conn_close(h);
}

static void handle_closed(uv_handle_t *h) {
        struct rpc_client *c = h->data;
        c->open_handles--;
        client_maybe_free(c);
}

static void conn_on_closed(struct h2_conn *h) {
        struct rpc_client *c = (struct rpc_client *) h;
        c->open_handles--;
        client_maybe_free(c);
}

static const struct h2_conn_ops conn_ops = {
        .pump = conn_pump,
        .on_ready = conn_on_ready,
        .on_error = conn_on_error,
        .on_closed = conn_on_closed,
};

static void client_maybe_free(struct rpc_client *c) {
        if (!c->freeing || c->open_handles > 0)
                return;
        /* Streams the user still holds outlive the client, detached. */
        for (struct rpc_stream *st = c->pending_head; st;) {
                struct rpc_stream *next = st->pnext;
                st->queued = false;
                stream_unref(st);
                st = next;
        }
        SSL_free(c->ssl_pending);
        SSL_CTX_free(c->ssl_ctx);
        /* Cached message buffers are a per-thread pool: an idle client
         * process should not hold on to them. */
        h2_mem_trim();
        nghttp2_session_callbacks_del(c->cbs);
        nghttp2_option_del(c->opt);
        free(c->authority);
        if (c->auth_header)
                explicit_bzero(c->auth_header, strlen(c->auth_header));
        free(c->auth_header);
        free(c->environment);
        free(c);
}

void rpc_client_free(struct rpc_client *c) {
        if (!c || c->freeing)
                return;
        c->freeing = true;
        client_fail_streams(c, "client closed");
        /* Deliver every on_close now; streams are detached afterwards. */
        client_pump(c);
        if (c->h2_prepared)
                h2_conn_close(&c->h2);
        if (c->idle_open) {
                uv_idle_stop(&c->idle);
                uv_close((uv_handle_t *) &c->idle, handle_closed);
                c->idle_open = false;
        }
        if (c->timers_open) {
                timer_heap_close(&c->timers, handle_closed);
                c->timers_open = false;
        }
        client_maybe_free(c);
}

static void connect_timeout(struct timer_heap_entry *t) {
        struct rpc_client *c =
                (struct rpc_client *) ((char *) t - offsetof(struct rpc_client, connect_timer));
        if (c->state == CONNECTING) {
                c->state = FAILED;
                c->conn_err = -ETIMEDOUT;
                h2_conn_close(&c->h2);
        }
}

static void on_connect(uv_connect_t *req, int status) {
        struct rpc_client *c = req->data;
        if (c->state != CONNECTING)
                return;
        if (status < 0) {
                c->state = FAILED;
                c->conn_err = status;
                h2_conn_close(&c->h2);
                return;
        }
        nghttp2_session *session = NULL;
        if (nghttp2_session_client_new2(&session, c->cbs, c, c->opt) != 0 ||
            h2_submit_settings(session, false) < 0) {
                if (session)
                        nghttp2_session_del(session);
                c->state = FAILED;
                c->conn_err = -ENOMEM;
                h2_conn_close(&c->h2);
                return;
        }
        SSL *ssl = c->ssl_pending;
        c->ssl_pending = NULL;
        int r = h2_conn_start(&c->h2, session, ssl);
        if (r < 0 && c->state == CONNECTING) {
                c->state = FAILED;
                c->conn_err = r;
                h2_conn_close(&c->h2);
        }
}

static bool is_ip(const char *s) {
        struct sockaddr_in6 a6;
        struct sockaddr_in a4;
        return uv_ip4_addr(s, 0, &a4) == 0 || uv_ip6_addr(s, 0, &a6) == 0;
}

static int tls_setup(struct rpc_client *c, const struct rpc_client_config *cfg, const char *host,
                     struct wr_err *e) {
        c->ssl_ctx = SSL_CTX_new(TLS_client_method());
        if (!c->ssl_ctx)
                return err_set(e, -ENOMEM, "TLS context");
        SSL_CTX_set_min_proto_version(c->ssl_ctx, TLS1_2_VERSION);
        if (cfg->ca_file) {
                if (SSL_CTX_load_verify_locations(c->ssl_ctx, cfg->ca_file, NULL) != 1) {
                        ERR_clear_error();
                        return err_set(e, -EINVAL, "TLS: cannot load CA file %s", cfg->ca_file);
                }
        } else
                SSL_CTX_set_default_verify_paths(c->ssl_ctx);
        SSL_CTX_set_verify(c->ssl_ctx, SSL_VERIFY_PEER, NULL);
        /* Returns 0 on success, unlike most of OpenSSL. */
        if (SSL_CTX_set_alpn_protos(c->ssl_ctx, (const unsigned char *) "\x02h2", 3) != 0)
                return err_set(e, -ENOMEM, "TLS: ALPN setup failed");
        SSL *ssl = SSL_new(c->ssl_ctx);
        if (!ssl)
                return err_set(e, -ENOMEM, "TLS: SSL_new failed");
        SSL_set_connect_state(ssl);
        const char *name = cfg->server_name ? cfg->server_name : host;
        if (is_ip(name))
                X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl), name);
        else {
                SSL_set_tlsext_host_name(ssl, name);
                SSL_set1_host(ssl, name);
        }
        c->ssl_pending = ssl;
        return 0;
}

/* Split an address into unix path or host + port. */
static int parse_addr(const char *addr, char *path, size_t path_size, char *host, size_t host_size,
                      char *port, size_t port_size, bool *is_unix, bool *tls) {
        *is_unix = false;
        if (strncmp(addr, "unix:", 5) == 0) {
                const char *p = addr + 5;
                if (strncmp(p, "//", 2) == 0)
                        p += 2;
                if (!*p || strlen(p) >= path_size)
                        return -EINVAL;
                snprintf(path, path_size, "%s", p);
                *is_unix = true;
                return 0;
        }
        if (strncmp(addr, "tls:", 4) == 0) {
                *tls = true;
                addr += 4;
        } else if (strncmp(addr, "tcp:", 4) == 0)
                addr += 4;
        const char *colon = strrchr(addr, ':');
        if (!colon || colon == addr || !colon[1])
                return -EINVAL;
        size_t hl = (size_t) (colon - addr);
        if (addr[0] == '[' && hl >= 2 && addr[hl - 1] == ']') {
                addr++;
                hl -= 2;
        }
        if (hl >= host_size || strlen(colon + 1) >= port_size)
                return -EINVAL;
        memcpy(host, addr, hl);
        host[hl] = 0;
        snprintf(port, port_size, "%s", colon + 1);
        return 0;
}

int rpc_client_new(uv_loop_t *loop, const struct rpc_client_config *cfg, struct rpc_client **ret,
                   struct wr_err *e) {
        char path[108], host[256], port[16];
        bool is_unix, tls = cfg->tls;
        const char *addr = cfg->addr ? cfg->addr : "unix:/run/warren/warren.sock";
        if (parse_addr(addr, path, sizeof(path), host, sizeof(host), port, sizeof(port), &is_unix,
                       &tls) < 0)
                return err_set(e, -EINVAL, "bad address %s (want unix:/path or HOST:PORT)", addr);
        struct sockaddr_storage ss;
        if (!is_unix) {
                struct addrinfo hints = {.ai_socktype = SOCK_STREAM, .ai_flags = AI_NUMERICSERV},
                                *res = NULL;
                int g = getaddrinfo(host, port, &hints, &res);
                if (g != 0 || !res)
                        return err_set(e, -EHOSTUNREACH, "resolve %s: %s", host, gai_strerror(g));
                /* Prefer IPv4 (the usual listener), else the first. */
                struct addrinfo *pick = res;
                for (struct addrinfo *ai = res; ai; ai = ai->ai_next)
                        if (ai->ai_family == AF_INET) {
                                pick = ai;
                                break;
                        }
                memcpy(&ss, pick->ai_addr, pick->ai_addrlen);
                freeaddrinfo(res);
        }
        struct rpc_client *c = calloc(1, sizeof(*c));
        if (!c)
                return err_set(e, -ENOMEM, "out of memory");
        c->loop = loop;
        c->tls = tls;
        c->max_recv = cfg->max_recv_message ? cfg->max_recv_message : DEFAULT_MAX_MESSAGE;
        c->state = CONNECTING;
        int r = uv_idle_init(loop, &c->idle);
        if (r < 0) {
                free(c);
                return err_set(e, r, "connect %s: %s", addr, uv_strerror(r));
        }
        c->idle.data = c;
        c->idle_open = true;
        c->open_handles = 1;
        r = timer_heap_init(&c->timers, loop);
        if (r < 0) {
                err_set(e, r, "connect %s: %s", addr, uv_strerror(r));
                goto fail;
        }
        c->timers.handle.data = c;
        c->timers_open = true;
        c->open_handles = 2;
        if (is_unix)
                c->authority = strdup("localhost");
        else if (asprintf(&c->authority, "%s:%s", host, port) < 0)
                c->authority = NULL;
        if (cfg->token && asprintf(&c->auth_header, "Bearer %s", cfg->token) < 0)
                r = -ENOMEM;
        if (cfg->environment && *cfg->environment && !(c->environment = strdup(cfg->environment)))
                r = -ENOMEM;
        if (!c->authority || r < 0 || nghttp2_session_callbacks_new(&c->cbs) != 0 ||
            nghttp2_option_new(&c->opt) != 0) {
                err_set(e, -ENOMEM, "out of memory");
                r = -ENOMEM;
                goto fail;
        }
        h2_callbacks_set_send(c->cbs);
        nghttp2_session_callbacks_set_on_header_callback(c->cbs, on_header);
        nghttp2_session_callbacks_set_on_data_chunk_recv_callback(c->cbs, on_data_chunk_recv);
        nghttp2_session_callbacks_set_on_stream_close_callback(c->cbs, on_stream_close);
        nghttp2_option_set_no_auto_window_update(c->opt, 1);
        if (tls && (r = tls_setup(c, cfg, is_unix ? "localhost" : host, e)) < 0)
                goto fail;
        r = h2_conn_prepare(&c->h2, loop, is_unix, &conn_ops);
        if (r < 0) {
                /* Handles h2_conn_prepare left closing end in conn_on_closed. */
                if (c->h2.open_handles > 0)
                        c->open_handles++;
                err_set(e, r, "connect %s: %s", addr, uv_strerror(r));
                goto fail;
        }
        c->h2_prepared = true;
        c->open_handles++;
        c->creq.data = c;
        if (is_unix)
                uv_pipe_connect(&c->creq, &c->h2.io.pipe, path, on_connect);
        else {
                uv_tcp_nodelay(&c->h2.io.tcp, 1);
                r = uv_tcp_connect(&c->creq, &c->h2.io.tcp, (struct sockaddr *) &ss, on_connect);
                if (r < 0) {
                        c->state = FAILED;
                        c->conn_err = r;
                }
        }
        c->connect_timer.cb = connect_timeout;
        if (timer_heap_arm(&c->timers, &c->connect_timer,
                           uv_now(loop) + (cfg->connect_timeout_ms ? cfg->connect_timeout_ms
                                                                   : 5000)) < 0 &&
            c->state == CONNECTING) {
                c->state = FAILED;
                c->conn_err = -ENOMEM;
                h2_conn_close(&c->h2);
        }
        while (c->state == CONNECTING)
                uv_run(loop, UV_RUN_ONCE);
        if (c->state != CONNECTED) {
                r = c->conn_err < 0 ? c->conn_err : -ECONNREFUSED;
                if (r == UV_ENOENT)
                        r = -ENOENT;
                if (c->h2.tls_error[0])
                        err_set(e, -EPROTO, "connect %s: %s", addr, c->h2.tls_error);
                else
                        err_set(e, r, "connect %s: %s", addr, strerror(-r));
                if (c->h2.tls_error[0])
                        r = -EPROTO;
                goto fail;
        }
        *ret = c;
        return 0;
fail:
        rpc_client_free(c);
        /* Let the handles close so nothing leaks. */
        uv_run(loop, UV_RUN_NOWAIT);
        return r;
}

struct unary_state {
        bool done;
        int status;
        char msg[WR_ERR_MSG_MAX];
};

static void unary_on_close(struct rpc_stream *st, int status, const char *message, void *userdata) {
        struct unary_state *u = userdata;
        u->done = true;
        u->status = status;
        snprintf(u->msg, sizeof(u->msg), "%s", message ? message : "");
}

int rpc_client_unary(struct rpc_client *c, const char *path, const ProtobufCMessage *req,
                     const ProtobufCMessageDescriptor *resp_desc, uint64_t timeout_ms,
                     ProtobufCMessage **ret, struct wr_err *e) {
        static const struct rpc_stream_callbacks cbs = {.on_close = unary_on_close};
        struct unary_state u = {0};
        struct rpc_stream *st;
        int r = rpc_stream_open(c, path, resp_desc, timeout_ms, &cbs, &u, &st);
        if (r < 0)
                return err_set(e, r, "%s: %s", path, strerror(-r));
        st->keep = true;
        r = rpc_stream_send(st, req);
        if (r >= 0)
                r = rpc_stream_close_send(st);
        if (r < 0) {
                rpc_stream_free(st);
                return err_set(e, r, "%s: %s", path, strerror(-r));
        }
        /* Not inside a loop callback: send right away. */
        h2_conn_process(&c->h2);
        while (!u.done)
                uv_run(c->loop, UV_RUN_ONCE);
        if (u.status != 0) {
                bool transport = u.status == WR_STATUS_UNAVAILABLE && c->state == FAILED;
                rpc_stream_free(st);
                if (transport)
                        return err_set(e, c->conn_err, "%s: %s", path, u.msg);
                return err_setx(e, -EREMOTEIO, u.status, WR_FAULT_SERVICE, "%s", u.msg);
        }
        ProtobufCMessage *m = TAKE_PTR(st->kept);
        rpc_stream_free(st);
        if (!m)
                return err_set(e, -EPROTO, "%s: no response message", path);
        *ret = m;
        return 0;
}

int rpc_client_run(struct rpc_client *c) {
        while (c->n_live > 0)
                uv_run(c->loop, UV_RUN_ONCE);
        return c->state == FAILED ? c->conn_err : 0;
}
