/* SPDX-License-Identifier: Apache-2.0 */
/* warren.v1.Sandboxes/Tunnel: one TCP connection to a port inside a
 * sandbox (sandbox.h: sbx_tcp_connect), relayed over a bidi stream.
 *
 * sandbox -> client: the socket is read straight into the response's
 * buffer (rpc_call_send_buf: only the bytes field's header is written in
 * front), up to CHUNK bytes a message; a full gRPC send queue stops the
 * reads until on_writable (the sandbox's writer then blocks on TCP).
 * client -> sandbox: each message's data is written at once; what the
 * socket does not take is kept and request delivery paused until it is
 * written (the client then blocks on the HTTP/2 window).
 * Half-closes travel both ways (close_write -> shutdown(SHUT_WR); EOF ->
 * eof); the call ends OK when both are done, UNAVAILABLE when the
 * connection fails or resets. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include <uv.h>

#include "api/api-internal.h"
#include "basic/log.h"
#include "basic/macro.h"
#include "sandbox/sandbox.h"
#include "warren/v1/sandboxes.pb-c.h"

#define CHUNK (1u << 20)
#define HDR_ROOM 6 /* tag + varint length of a bytes field <= CHUNK */

struct tunnel {
        struct rpc_call *call;
        int fd;
        uv_poll_t poll;
        bool poll_open;
        bool connected;
        bool finished;
        bool rd_eof;      /* the sandbox side sent EOF (forwarded) */
        bool client_done; /* close_write or half-close from the client */
        bool wr_shut;     /* shutdown(SHUT_WR) done */
        bool send_full;   /* the gRPC send queue is above its high-water mark */
        bool recv_paused;
        uint8_t *pend; /* client bytes the socket has not taken yet */
        size_t pend_len, pend_off;
        uint64_t up, down;
};

static void update(struct tunnel *t);

static void finish(struct tunnel *t, int status, const char *msg) {
        if (t->finished)
                return;
        t->finished = true;
        if (t->poll_open)
                uv_poll_stop(&t->poll);
        rpc_call_finish(t->call, status, msg);
}

static void maybe_done(struct tunnel *t) {
        if (t->rd_eof && t->wr_shut)
                finish(t, WR_STATUS_OK, NULL);
}

static void send_flag(struct tunnel *t, bool connected, bool eof) {
        Warren__V1__TunnelResponse resp = WARREN__V1__TUNNEL_RESPONSE__INIT;
        resp.connected = connected;
        resp.eof = eof;
        if (rpc_call_send(t->call, &resp.base) == 1)
                t->send_full = true;
}

/* Write pending client bytes; 0 when all are written, 1 when the socket
 * is full, negative errno. */
static int flush(struct tunnel *t) {
        while (t->pend_off < t->pend_len) {
                ssize_t n = send(t->fd, t->pend + t->pend_off, t->pend_len - t->pend_off,
                                 MSG_NOSIGNAL | MSG_DONTWAIT);
                if (n < 0) {
                        if (errno == EINTR)
                                continue;
                        return errno == EAGAIN ? 1 : -errno;
                }
                t->pend_off += (size_t) n;
                t->up += (uint64_t) n;
        }
        free(t->pend);
        t->pend = NULL;
        t->pend_len = t->pend_off = 0;
        return 0;
}

static void shut_if_done(struct tunnel *t) {
        if (t->client_done && !t->pend && !t->wr_shut && t->connected) {
                (void) shutdown(t->fd, SHUT_WR);
                t->wr_shut = true;
                maybe_done(t);
        }
}

static void read_some(struct tunnel *t) {
        for (int rounds = 0; rounds < 4 && !t->send_full && !t->rd_eof && !t->finished; rounds++) {
                struct rpc_buf b = {0};
                if (rpc_buf_alloc(&b, HDR_ROOM + CHUNK) < 0)
                        return finish(t, WR_STATUS_RESOURCE_EXHAUSTED, "tunnel: out of memory");
                ssize_t n = recv(t->fd, b.data + HDR_ROOM, CHUNK, MSG_DONTWAIT);
                if (n < 0 && errno == EINTR) {
                        rpc_buf_free(&b);
                        continue;
                }
                if (n < 0 && errno == EAGAIN) {
                        rpc_buf_free(&b);
                        return;
                }
                if (n < 0) {
                        int err = errno;
                        rpc_buf_free(&b);
                        char msg[160];
                        snprintf(msg, sizeof(msg),
                                 "tunnel: the connection in the sandbox failed: %s", strerror(err));
                        return finish(t, WR_STATUS_UNAVAILABLE, msg);
                }
                if (n == 0) {
                        rpc_buf_free(&b);
                        t->rd_eof = true;
                        send_flag(t, false, true);
                        maybe_done(t);
                        return;
                }
                /* TunnelResponse.data (field 1, bytes): tag, varint length */
                uint8_t hdr[HDR_ROOM];
                size_t h = 0;
                hdr[h++] = 0x0a;
                uint64_t v = (uint64_t) n;
                do {
                        hdr[h++] = (uint8_t) ((v & 0x7f) | (v > 0x7f ? 0x80 : 0));
                        v >>= 7;
                } while (v);
                memcpy(b.data + HDR_ROOM - h, hdr, h);
                t->down += (uint64_t) n;
                int r = rpc_call_send_buf(t->call, &b, HDR_ROOM - h, h + (size_t) n);
                if (r < 0)
                        return finish(t, WR_STATUS_CANCELLED, "tunnel: the call is over");
                if (r == 1)
                        t->send_full = true;
        }
}

static void poll_cb(uv_poll_t *p, int status, int events) {
        struct tunnel *t = p->data;
        if (t->finished)
                return;
        if (!t->connected) {
                int err = 0;
                socklen_t len = sizeof(err);
                if (status < 0 || getsockopt(t->fd, SOL_SOCKET, SO_ERROR, &err, &len) < 0 || err) {
                        char msg[200];
                        snprintf(msg, sizeof(msg),
                                 "tunnel: nothing accepts connections on that port in the sandbox "
                                 "(%s)",
                                 strerror(err ? err : EIO));
                        return finish(t, WR_STATUS_UNAVAILABLE, msg);
                }
                t->connected = true;
                send_flag(t, true, false);
        }
        if (events & UV_WRITABLE) {
                int r = flush(t);
                if (r < 0)
                        return finish(t, WR_STATUS_UNAVAILABLE,
                                      "tunnel: the connection in the sandbox was reset");
                if (r == 0 && t->recv_paused) {
                        t->recv_paused = false;
                        rpc_call_resume_recv(t->call);
                }
                shut_if_done(t);
        }
        if ((events & (UV_READABLE | UV_DISCONNECT)) || status < 0)
                read_some(t);
        update(t);
}

static void update(struct tunnel *t) {
        if (t->finished || !t->poll_open)
                return;
        int ev = 0;
        if (!t->connected || t->pend)
                ev |= UV_WRITABLE;
        if (t->connected && !t->rd_eof && !t->send_full)
                ev |= UV_READABLE;
        if (ev)
                uv_poll_start(&t->poll, ev, poll_cb);
        else
                uv_poll_stop(&t->poll);
}

static void client_data(struct tunnel *t, const uint8_t *d, size_t n) {
        if (n == 0)
                return;
        if (!t->pend && t->connected) {
                while (n) {
                        ssize_t w = send(t->fd, d, n, MSG_NOSIGNAL | MSG_DONTWAIT);
                        if (w < 0 && errno == EINTR)
                                continue;
                        if (w < 0 && errno == EAGAIN)
                                break;
                        if (w < 0)
                                return finish(t, WR_STATUS_UNAVAILABLE,
                                              "tunnel: the connection in the sandbox was reset");
                        d += w;
                        n -= (size_t) w;
                        t->up += (uint64_t) w;
                }
                if (n == 0)
                        return;
        }
        /* keep the rest (before the connect completes: all of it) */
        uint8_t *np = malloc(t->pend_len - t->pend_off + n);
        if (!np)
                return finish(t, WR_STATUS_RESOURCE_EXHAUSTED, "tunnel: out of memory");
        size_t old = t->pend_len - t->pend_off;
        if (old)
                memcpy(np, t->pend + t->pend_off, old);
        memcpy(np + old, d, n);
        free(t->pend);
        t->pend = np;
        t->pend_len = old + n;
        t->pend_off = 0;
        if (!t->recv_paused) {
                t->recv_paused = true;
                rpc_call_pause_recv(t->call);
        }
        update(t);
}

static void tunnel_on_message(struct rpc_call *call, const ProtobufCMessage *msg) {
        const Warren__V1__TunnelRequest *req = (const Warren__V1__TunnelRequest *) msg;
        struct tunnel *t = rpc_call_get_data(call);
        if (!t) {
                struct api_ctx *ctx = rpc_call_server_ctx(call);
                if (!req->sandbox || !*req->sandbox)
                        return (void) rpc_call_finish(call, WR_STATUS_INVALID_ARGUMENT,
                                                      "sandbox: name the sandbox (id or name) in "
                                                      "the first message");
                if (req->port == 0 || req->port > 65535)
                        return (void) rpc_call_finish(call, WR_STATUS_INVALID_ARGUMENT,
                                                      "port: give the TCP port (1-65535) a "
                                                      "program in the sandbox listens on");
                t = calloc(1, sizeof(*t));
                if (!t)
                        return (void) rpc_call_finish(call, WR_STATUS_RESOURCE_EXHAUSTED,
                                                      "out of memory");
                t->call = call;
                t->fd = -EBADF;
                rpc_call_set_data(call, t);
                struct wr_err e = {0};
                if (!ctx->sandboxes) {
                        t->finished = true;
                        rpc_call_finish(call, WR_STATUS_UNAVAILABLE, "warrend is shutting down");
                        return;
                }
                char id[32];
                if (api_own_sandbox_id(call, req->sandbox, id, sizeof(id), &e) < 0 ||
                    sbx_tcp_connect(ctx->sandboxes, id, (uint16_t) req->port, &t->fd, &e) < 0) {
                        t->finished = true;
                        rpc_call_finish_err(call, &e);
                        return;
                }
                if (uv_poll_init(rpc_call_loop(call), &t->poll, t->fd) < 0)
                        return finish(t, WR_STATUS_INTERNAL, "tunnel: poll");
                t->poll.data = t;
                t->poll_open = true;
                update(t);
        } else if (t->finished) {
                return;
        } else if (req->sandbox && *req->sandbox) {
                return finish(t, WR_STATUS_INVALID_ARGUMENT,
                              "sandbox: only the first Tunnel message names the sandbox");
        }
        if (t->client_done && req->data.len)
                return finish(t, WR_STATUS_INVALID_ARGUMENT, "data after close_write");
        client_data(t, req->data.data, req->data.len);
        if (req->close_write && !t->finished) {
                t->client_done = true;
                shut_if_done(t);
        }
}

static void tunnel_on_half_close(struct rpc_call *call) {
        struct tunnel *t = rpc_call_get_data(call);
        if (t && !t->finished) {
                t->client_done = true;
                shut_if_done(t);
        }
}

static void tunnel_on_writable(struct rpc_call *call) {
        struct tunnel *t = rpc_call_get_data(call);
        if (t && !t->finished) {
                t->send_full = false;
                update(t);
        }
}

static void poll_closed(uv_handle_t *h) {
        struct tunnel *t = h->data;
        free(t->pend);
        free(t);
}

static void release(struct tunnel *t) {
        if (!t)
                return;
        t->finished = true;
        if (t->fd >= 0) {
                close(t->fd);
                t->fd = -EBADF;
        }
}

static void tunnel_on_cancel(struct rpc_call *call, int status) {
        struct tunnel *t = rpc_call_get_data(call);
        if (t && t->poll_open)
                uv_poll_stop(&t->poll);
        if (t)
                t->finished = true;
}

static void tunnel_on_free(struct rpc_call *call) {
        struct tunnel *t = rpc_call_get_data(call);
        if (!t)
                return;
        log_debug("tunnel: %llu bytes in, %llu bytes out", (unsigned long long) t->up,
                  (unsigned long long) t->down);
        if (t->poll_open) {
                uv_poll_stop(&t->poll);
                /* close the handle before the fd it polls */
                t->poll_open = false;
                uv_close((uv_handle_t *) &t->poll, poll_closed);
                release(t);
                return;
        }
        release(t);
        free(t->pend);
        free(t);
}

const struct rpc_method api_tunnel_method = {
        .path = "/warren.v1.Sandboxes/Tunnel",
        .kind = RPC_BIDI,
        .input = &warren__v1__tunnel_request__descriptor,
        .output = &warren__v1__tunnel_response__descriptor,
        .on_message = tunnel_on_message,
        .on_half_close = tunnel_on_half_close,
        .on_cancel = tunnel_on_cancel,
        .on_writable = tunnel_on_writable,
        .on_free = tunnel_on_free,
};
