/* SPDX-License-Identifier: Apache-2.0 */
#include "rpc-common.h"

#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "warren/v1/diag.pb-c.h"

int tool_parse(int argc, char **argv, struct tool_opts *o) {
        static const struct option opts[] = {
                {"addr", required_argument, NULL, 'a'},
                {"tls", no_argument, NULL, 't'},
                {"ca", required_argument, NULL, 'c'},
                {"server-name", required_argument, NULL, 'n'},
                {"token", required_argument, NULL, 'T'},
                {"megabytes", required_argument, NULL, 'm'},
                {"slack-ms", required_argument, NULL, 's'},
                {"seconds", required_argument, NULL, 'S'},
                {0},
        };
        memset(o, 0, sizeof(*o));
        o->megabytes = 200;
        o->slack_ms = 50;
        o->seconds = 3;
        int ch;
        while ((ch = getopt_long(argc, argv, "", opts, NULL)) != -1) {
                switch (ch) {
                case 'a':
                        o->addr = optarg;
                        break;
                case 't':
                        o->tls = true;
                        break;
                case 'c':
                        o->ca = optarg;
                        break;
                case 'n':
                        o->server_name = optarg;
                        break;
                case 'T':
                        o->token = optarg;
                        break;
                case 'm':
                        o->megabytes = atoi(optarg);
                        break;
                case 's':
                        o->slack_ms = atoi(optarg);
                        break;
                case 'S':
                        o->seconds = atoi(optarg);
                        break;
                default:
                        return -EINVAL;
                }
        }
        if (optind < argc)
                o->cmd = argv[optind];
        return o->addr && o->cmd ? 0 : -EINVAL;
}

int tool_connect(uv_loop_t *loop, const struct tool_opts *o, struct rpc_client **ret) {
        struct rpc_client_config cfg = {
                .addr = o->addr,
                .tls = o->tls,
                .ca_file = o->ca,
                .server_name = o->server_name,
                .token = o->token,
                .max_recv_message = 64u << 20,
        };
        struct wr_err e = {0};
        int r = rpc_client_new(loop, &cfg, ret, &e);
        if (r < 0)
                fprintf(stderr, "connect: %s\n", e.msg);
        return r;
}

struct bidi {
        struct rpc_stream *st;
        size_t n, size, sent, recv;
        uint8_t *out, *expect;
        bool done, bad;
        int status;
        char msg[256];
};

static void stamp(uint8_t *buf, size_t i) {
        memcpy(buf, &i, sizeof(i));
}

static void bidi_send_more(struct bidi *b) {
        Warren__V1__EchoRequest req = WARREN__V1__ECHO_REQUEST__INIT;
        req.payload.data = b->out;
        req.payload.len = b->size;
        while (b->sent < b->n) {
                stamp(b->out, b->sent);
                int r = rpc_stream_send(b->st, &req.base);
                if (r < 0)
                        return;
                b->sent++;
                if (b->sent == b->n)
                        rpc_stream_close_send(b->st);
                if (r == 1)
                        return;
        }
}

static void bidi_on_message(struct rpc_stream *s, const ProtobufCMessage *msg, void *ud) {
        struct bidi *b = ud;
        const Warren__V1__EchoResponse *r = (const Warren__V1__EchoResponse *) msg;
        stamp(b->expect, b->recv);
        if (r->payload.len != b->size || memcmp(r->payload.data, b->expect, b->size) != 0) {
                if (!b->bad)
                        snprintf(b->msg, sizeof(b->msg), "message %zu corrupted", b->recv);
                b->bad = true;
        }
        b->recv++;
}

static void bidi_on_writable(struct rpc_stream *s, void *ud) {
        bidi_send_more(ud);
}

static void bidi_on_close(struct rpc_stream *s, int status, const char *message, void *ud) {
        struct bidi *b = ud;
        b->done = true;
        b->status = status;
        if (status)
                snprintf(b->msg, sizeof(b->msg), "status %d: %s", status, message);
}

int tool_bidi(struct rpc_client *c, size_t n, size_t size, uint64_t *ret_ns, char *err,
              size_t errlen) {
        static const struct rpc_stream_callbacks cbs = {
                .on_message = bidi_on_message,
                .on_writable = bidi_on_writable,
                .on_close = bidi_on_close,
        };
        struct bidi b = {.n = n, .size = size};
        b.out = malloc(size);
        b.expect = malloc(size);
        if (size < 8 || !b.out || !b.expect) {
                free(b.out);
                free(b.expect);
                return -EINVAL;
        }
        for (size_t i = 0; i < size; i++)
                b.out[i] = b.expect[i] = (uint8_t) (i * 7 + 3);
        uint64_t t0 = now_ns();
        int r = rpc_stream_open(c, "/warren.v1.Diag/Bidi", &warren__v1__echo_response__descriptor,
                                0, &cbs, &b, &b.st);
        if (r < 0) {
                snprintf(err, errlen, "open: %s", strerror(-r));
                free(b.out);
                free(b.expect);
                return r;
        }
        bidi_send_more(&b);
        rpc_client_run(c);
        *ret_ns = now_ns() - t0;
        rpc_stream_free(b.st);
        free(b.out);
        free(b.expect);
        if (b.status || b.bad || b.recv != n) {
                snprintf(err, errlen, "%s (received %zu of %zu)", b.msg[0] ? b.msg : "incomplete",
                         b.recv, n);
                return -EIO;
        }
        return 0;
}
