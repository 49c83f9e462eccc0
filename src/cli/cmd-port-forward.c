/* SPDX-License-Identifier: Apache-2.0 */
/* warren port-forward ID|NAME [LOCAL:]REMOTE: a local TCP listener whose
 * every connection is carried to REMOTE on the sandbox's loopback by one
 * Sandboxes/Tunnel stream (docs/tunnels.md). Back-pressure both ways: a
 * full gRPC send queue stops reading the local socket; a local socket
 * that does not drain pauses the stream. Runs until SIGINT/SIGTERM. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "rpc/client.h"

#define READ_CHUNK (256u << 10)
#define WQ_HIGH (8u << 20)
#define WQ_LOW (2u << 20)

struct pf {
        struct cli_ctx *ctx;
        const char *sandbox;
        uint32_t port;
        uv_tcp_t listener;
        uv_signal_t sig[2];
        bool stopping;
        unsigned active;
};

struct pf_conn {
        struct pf *pf;
        uv_tcp_t tcp;
        struct rpc_stream *st;
        bool tcp_open, st_open;
        bool reading, local_eof, paused;
        size_t wq;
};

struct pf_write {
        uv_write_t req;
        struct pf_conn *c;
        size_t len;
        uint8_t data[];
};

static void conn_maybe_free(struct pf_conn *c) {
        if (c->tcp_open || c->st_open)
                return;
        c->pf->active--;
        free(c);
}

static void tcp_closed(uv_handle_t *h) {
        struct pf_conn *c = h->data;
        c->tcp_open = false;
        conn_maybe_free(c);
}

static void close_tcp(struct pf_conn *c) {
        if (c->tcp_open && !uv_is_closing((uv_handle_t *) &c->tcp))
                uv_close((uv_handle_t *) &c->tcp, tcp_closed);
}

static void alloc_cb(uv_handle_t *h, size_t suggested, uv_buf_t *b) {
        (void) h;
        (void) suggested;
        b->base = malloc(READ_CHUNK);
        b->len = b->base ? READ_CHUNK : 0;
}

static void send_close_write(struct pf_conn *c) {
        Warren__V1__TunnelRequest req = WARREN__V1__TUNNEL_REQUEST__INIT;
        req.close_write = true;
        (void) rpc_stream_send(c->st, &req.base);
        (void) rpc_stream_close_send(c->st);
}

static void read_cb(uv_stream_t *s, ssize_t n, const uv_buf_t *b) {
        struct pf_conn *c = s->data;
        if (n > 0 && c->st_open) {
                Warren__V1__TunnelRequest req = WARREN__V1__TUNNEL_REQUEST__INIT;
                req.data.data = (uint8_t *) b->base;
                req.data.len = (size_t) n;
                int r = rpc_stream_send(c->st, &req.base);
                if (r == 1) {
                        uv_read_stop(s);
                        c->reading = false;
                } else if (r < 0) {
                        close_tcp(c);
                }
        } else if (n < 0) {
                uv_read_stop(s);
                c->reading = false;
                c->local_eof = true;
                if (c->st_open)
                        send_close_write(c);
        }
        free(b->base);
}

static void on_writable(struct rpc_stream *st, void *userdata) {
        struct pf_conn *c = userdata;
        if (!c->reading && !c->local_eof && c->tcp_open) {
                c->reading = true;
                uv_read_start((uv_stream_t *) &c->tcp, alloc_cb, read_cb);
        }
}

static void write_cb(uv_write_t *w, int status) {
        struct pf_write *pw = (struct pf_write *) w;
        struct pf_conn *c = pw->c;
        c->wq -= pw->len;
        free(pw);
        if (status < 0) {
                if (c->st_open)
                        rpc_stream_cancel(c->st);
                close_tcp(c);
                return;
        }
        if (c->paused && c->wq < WQ_LOW && c->st_open) {
                c->paused = false;
                rpc_stream_resume_recv(c->st);
        }
}

static void shutdown_cb(uv_shutdown_t *req, int status) {
        (void) status;
        free(req);
}

/* Bytes for the local socket: written at once when it takes them, the
 * rest queued (a copy: the message buffer is only valid during the call). */
static void local_write(struct pf_conn *c, struct rpc_stream *st, const uint8_t *data, size_t len) {
        if (c->wq == 0) {
                uv_buf_t b0 = uv_buf_init((char *) data, (unsigned) len);
                int n = uv_try_write((uv_stream_t *) &c->tcp, &b0, 1);
                if (n > 0) {
                        data += n;
                        len -= (size_t) n;
                }
        }
        if (len) {
                struct pf_write *pw = malloc(sizeof(*pw) + len);
                if (!pw) {
                        rpc_stream_cancel(st);
                        return;
                }
                pw->c = c;
                pw->len = len;
                memcpy(pw->data, data, len);
                uv_buf_t b = uv_buf_init((char *) pw->data, (unsigned) pw->len);
                if (uv_write(&pw->req, (uv_stream_t *) &c->tcp, &b, 1, write_cb) < 0) {
                        free(pw);
                        rpc_stream_cancel(st);
                        return;
                }
                c->wq += pw->len;
                if (c->wq > WQ_HIGH && !c->paused) {
                        c->paused = true;
                        rpc_stream_pause_recv(st);
                }
        }
}

/* A plain data message (TunnelResponse{data}: tag 0x0a, varint length,
 * bytes, nothing else) is written from the received buffer itself; any
 * other message is left to on_message. */
static int on_raw(struct rpc_stream *st, const uint8_t *msg, size_t len, void *userdata) {
        struct pf_conn *c = userdata;
        if (len < 2 || msg[0] != 0x0a)
                return 0;
        uint64_t n = 0;
        size_t i = 1;
        for (int shift = 0; i < len && shift < 64; shift += 7) {
                uint8_t b = msg[i++];
                n |= (uint64_t) (b & 0x7f) << shift;
                if (!(b & 0x80))
                        break;
                if (i == len)
                        return 0;
        }
        if (n != len - i)
                return 0; /* more fields follow: parse it */
        if (c->tcp_open)
                local_write(c, st, msg + i, (size_t) n);
        return 1;
}

static void on_message(struct rpc_stream *st, const ProtobufCMessage *msg, void *userdata) {
        struct pf_conn *c = userdata;
        const Warren__V1__TunnelResponse *resp = (const Warren__V1__TunnelResponse *) msg;
        if (!c->tcp_open)
                return;
        if (resp->data.len)
                local_write(c, st, resp->data.data, resp->data.len);
        if (resp->eof) {
                uv_shutdown_t *sd = malloc(sizeof(*sd));
                if (sd && uv_shutdown(sd, (uv_stream_t *) &c->tcp, shutdown_cb) < 0)
                        free(sd);
        }
}

static void on_close(struct rpc_stream *st, int status, const char *message, void *userdata) {
        struct pf_conn *c = userdata;
        if (status != 0 && !c->pf->stopping)
                fprintf(stderr, "warren: port-forward: %s\n",
                        message && *message ? message : "the tunnel failed");
        c->st_open = false;
        rpc_stream_free(st);
        c->st = NULL;
        close_tcp(c);
        conn_maybe_free(c);
}

static void on_connection(uv_stream_t *server, int status) {
        struct pf *pf = server->data;
        static const struct rpc_stream_callbacks cb = {.on_message = on_message,
                                                       .on_raw = on_raw,
                                                       .on_writable = on_writable,
                                                       .on_close = on_close};
        if (status < 0 || pf->stopping)
                return;
        struct pf_conn *c = calloc(1, sizeof(*c));
        if (!c)
                return;
        c->pf = pf;
        pf->active++;
        uv_tcp_init(pf->ctx->loop, &c->tcp);
        c->tcp.data = c;
        c->tcp_open = true;
        if (uv_accept(server, (uv_stream_t *) &c->tcp) < 0) {
                close_tcp(c);
                return;
        }
        (void) uv_tcp_nodelay(&c->tcp, 1);
        if (rpc_stream_open(pf->ctx->client, "/warren.v1.Sandboxes/Tunnel",
                            &warren__v1__tunnel_response__descriptor, 0, &cb, c, &c->st) < 0) {
                close_tcp(c);
                return;
        }
        c->st_open = true;
        Warren__V1__TunnelRequest req = WARREN__V1__TUNNEL_REQUEST__INIT;
        req.sandbox = (char *) pf->sandbox;
        req.port = pf->port;
        (void) rpc_stream_send(c->st, &req.base);
        c->reading = true;
        uv_read_start((uv_stream_t *) &c->tcp, alloc_cb, read_cb);
}

static void on_signal(uv_signal_t *s, int signum) {
        struct pf *pf = s->data;
        (void) signum;
        pf->stopping = true;
        uv_stop(pf->ctx->loop);
}

static int parse_port(const char *s, uint32_t *ret, bool zero_ok) {
        char *end;
        unsigned long v = strtoul(s, &end, 10);
        if (!*s || *end || v > 65535 || (!zero_ok && v == 0))
                return -EINVAL;
        *ret = (uint32_t) v;
        return 0;
}

int cli_cmd_port_forward(struct cli_ctx *ctx, int argc, char **argv) {
        enum { OPT_ADDRESS = CLI_OPT_FIRST_LOCAL };
        static const struct option longopts[] = {
                {"address", required_argument, NULL, OPT_ADDRESS}, CLI_COMMON_LONGOPTS, {}};
        const char *cmd = "port-forward", *usage = "[--address IP] ID|NAME [LOCAL:]REMOTE";
        const char *address = "127.0.0.1";
        int c;
        while ((c = cli_getopt(ctx, cmd, usage, argc, argv, "h", longopts)) != -1) {
                if (c == OPT_ADDRESS)
                        address = optarg;
                else
                        return c == CLI_GETOPT_HELP ? CLI_EXIT_OK : CLI_EXIT_USAGE;
        }
        if (argc - optind != 2)
                return cli_usage_error(cmd, usage, "want ID|NAME and [LOCAL:]REMOTE");
        struct pf pf = {.ctx = ctx, .sandbox = argv[optind]};
        uint32_t local = 0;
        char *spec = cli_strdup(argv[optind + 1]);
        char *colon = strchr(spec, ':');
        if (colon) {
                *colon = '\0';
                if (parse_port(spec, &local, true) < 0)
                        return cli_usage_error(cmd, usage, "bad local port '%s'", spec);
                spec = colon + 1;
        }
        if (parse_port(spec, &pf.port, false) < 0)
                return cli_usage_error(cmd, usage, "bad port '%s' (1-65535)", spec);
        if (cli_connect(ctx) < 0)
                return CLI_EXIT_FAIL;
        /* the sandbox must exist and run: a clear error now, not per connection */
        Warren__V1__GetSandboxRequest greq = WARREN__V1__GET_SANDBOX_REQUEST__INIT;
        CLI_SET_SANDBOX_KEY(greq, WARREN__V1__GET_SANDBOX_REQUEST, pf.sandbox);
        Warren__V1__Sandbox *sb = NULL;
        int rc = cli_call(ctx, "/warren.v1.Sandboxes/GetSandbox", &greq.base,
                          &warren__v1__sandbox__descriptor, (ProtobufCMessage **) &sb);
        if (rc != CLI_EXIT_OK)
                return rc;
        bool running = sb->status == WARREN__V1__SANDBOX_STATUS__SANDBOX_STATUS_RUNNING ||
                       sb->status == WARREN__V1__SANDBOX_STATUS__SANDBOX_STATUS_PAUSED;
        protobuf_c_message_free_unpacked(&sb->base, NULL);
        if (!running) {
                fprintf(stderr, "warren: port-forward: sandbox %s is not running\n", pf.sandbox);
                return CLI_EXIT_FAIL;
        }
        struct sockaddr_storage sa;
        if (uv_ip4_addr(address, (int) local, (struct sockaddr_in *) &sa) < 0 &&
            uv_ip6_addr(address, (int) local, (struct sockaddr_in6 *) &sa) < 0)
                return cli_usage_error(cmd, usage, "--address wants an IP address, got '%s'",
                                       address);
        uv_tcp_init(ctx->loop, &pf.listener);
        pf.listener.data = &pf;
        int r = uv_tcp_bind(&pf.listener, (struct sockaddr *) &sa, 0);
        if (r >= 0)
                r = uv_listen((uv_stream_t *) &pf.listener, 128, on_connection);
        if (r < 0) {
                fprintf(stderr, "warren: port-forward: listen on %s:%u: %s\n", address,
                        (unsigned) local, uv_strerror(r));
                uv_close((uv_handle_t *) &pf.listener, NULL);
                uv_run(ctx->loop, UV_RUN_NOWAIT);
                return CLI_EXIT_FAIL;
        }
        struct sockaddr_storage bound;
        int blen = sizeof(bound);
        uv_tcp_getsockname(&pf.listener, (struct sockaddr *) &bound, &blen);
        unsigned port =
                ntohs(bound.ss_family == AF_INET6 ? ((struct sockaddr_in6 *) &bound)->sin6_port
                                                  : ((struct sockaddr_in *) &bound)->sin_port);
        printf("Forwarding from %s:%u -> %s:%u\n", address, port, pf.sandbox, (unsigned) pf.port);
        fflush(stdout);
        static const int sigs[2] = {SIGINT, SIGTERM};
        for (size_t i = 0; i < 2; i++) {
                uv_signal_init(ctx->loop, &pf.sig[i]);
                pf.sig[i].data = &pf;
                uv_signal_start(&pf.sig[i], on_signal, sigs[i]);
        }
        uv_run(ctx->loop, UV_RUN_DEFAULT);
        pf.stopping = true;
        /* Tunnels still open get their on_close (which uses pf, on this
         * stack) from rpc_client_free: end them here, not in main. */
        rpc_client_free(ctx->client);
        ctx->client = NULL;
        uv_close((uv_handle_t *) &pf.listener, NULL);
        for (size_t i = 0; i < 2; i++)
                uv_close((uv_handle_t *) &pf.sig[i], NULL);
        uv_run(ctx->loop, UV_RUN_NOWAIT);
        return CLI_EXIT_OK;
}
