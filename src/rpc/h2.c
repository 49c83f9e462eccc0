/* SPDX-License-Identifier: Apache-2.0 */
/* One HTTP/2 connection over a libuv stream, optionally TLS: reading into
 * nghttp2, writing what it produces (zero-copy for large DATA payloads),
 * back-pressure, the TLS handshake and ALPN, closing. See h2.h. */
#include "rpc/h2.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

#include "basic/macro.h"

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
        h2_outq_free(&c->out);
        h2_outq_free(&c->inflight);
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
                return r; /* nothing to close */
        c->io.handle.data = c;
        c->open_handles = 1;
        r = uv_idle_init(loop, &c->idle);
        if (r < 0) {
                /* The stream handle is open: close it; on_closed follows. */
                c->closing = true;
                uv_close(&c->io.handle, handle_closed);
                return r;
        }
        c->idle.data = c;
        c->open_handles = 2;
        return 0;
}

void h2_conn_kick(struct h2_conn *c) {
        if (!c->closing)
                uv_idle_start(&c->idle, idle_cb);
}

static void tls_error(struct h2_conn *c, const char *what) {
        tls_bio_error(c->tls_error, sizeof(c->tls_error), what);
}

/* SSL_write all of p (the records go to the output queue). */
static int tls_write(struct h2_conn *c, const void *p, size_t n) {
        int r = tls_bio_write_all(c->ssl, p, n);
        if (r < 0)
                tls_error(c, "TLS write failed");
        return r;
}

/* The transport BIO's sink: TLS records go to the output queue. */
static int tls_sink(void *arg, const void *data, size_t n) {
        struct h2_conn *c = arg;
        return h2_outq_append(&c->out, data, n);
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
                unsigned nb = h2_outq_iov(&c->out);
                int n = uv_try_write(&c->io.stream, c->out.iov, nb);
                if (n < 0 && n != UV_EAGAIN) {
                        conn_fail(c, n);
                        return;
                }
                if (n <= 0)
                        break;
                h2_outq_consume(&c->out, (size_t) n);
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
        unsigned nb = h2_outq_iov(&c->inflight);
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
        h2_outq_clear(&c->inflight);
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
                tls_bio_set_input(&c->tls, buf->base, (size_t) nread);
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
                tls_bio_set_input(&c->tls, NULL, 0);
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
        c->tls = (struct tls_bio){.sink = tls_sink, .sink_arg = c};
        r = tls_bio_attach(&c->tls, ssl);
        if (r < 0) {
                SSL_free(ssl);
                return r;
        }
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
                       : h2_outq_append(&c->out, data, length);
        if (r < 0)
                return NGHTTP2_ERR_CALLBACK_FAILURE;
        return (ssize_t) length;
}

/* Write a DATA frame with a copied payload into d (room for 10 + length +
 * pad bytes): the 9-byte header, the pad length, length bytes taken from
 * q, the padding. Returns the bytes written, 0 when q held too few. */
static size_t frame_copy(uint8_t *d, const uint8_t *framehd, size_t pad, struct h2_msgq *q,
                         size_t length) {
        size_t off = 9;
        memcpy(d, framehd, 9);
        if (pad > 0)
                d[off++] = (uint8_t) (pad - 1);
        if (h2_msgq_read(q, d + off, length) != length)
                return 0;
        off += length;
        if (pad > 1) {
                memset(d + off, 0, pad - 1);
                off += pad - 1;
        }
        return off;
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
                if (h2_outq_append(&c->out, hd, hl) < 0 ||
                    h2_outq_take(&c->out, source->ptr, length) < 0)
                        return NGHTTP2_ERR_CALLBACK_FAILURE;
                if (pad > 1) {
                        uint8_t *z = h2_outq_reserve(&c->out, pad - 1);
                        if (!z)
                                return NGHTTP2_ERR_CALLBACK_FAILURE;
                        memset(z, 0, pad - 1);
                        if (h2_outq_commit(&c->out, pad - 1) < 0)
                                return NGHTTP2_ERR_CALLBACK_FAILURE;
                }
                return 0;
        }
        if (!c->ssl) {
                uint8_t *d = h2_outq_reserve(&c->out, 10 + length + pad);
                size_t n = d ? frame_copy(d, framehd, pad, source->ptr, length) : 0;
                return n && h2_outq_commit(&c->out, n) == 0 ? 0 : NGHTTP2_ERR_CALLBACK_FAILURE;
        }
        /* TLS: small frames are gathered as plaintext; a large payload is
         * encrypted straight from the message buffers. */
        struct h2_buf *b = &c->plain;
        if (length < H2_COPY_MAX) {
                uint8_t *d = h2_buf_reserve(b, 10 + length + pad);
                size_t n = d ? frame_copy(d, framehd, pad, source->ptr, length) : 0;
                if (!n)
                        return NGHTTP2_ERR_CALLBACK_FAILURE;
                b->len += n;
                return 0;
        }
        uint8_t *d = h2_buf_reserve(b, 10 + pad);
        if (!d)
                return NGHTTP2_ERR_CALLBACK_FAILURE;
        memcpy(d, framehd, 9);
        size_t off = 9;
        if (pad > 0)
                d[off++] = (uint8_t) (pad - 1);
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
                        h2_msgq_pop(q);
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
