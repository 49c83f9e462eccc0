/* SPDX-License-Identifier: Apache-2.0 */
/* rpc-c: C client benchmark against warren.v1.Diag.
 *   rpc-c --addr ADDR [--tls --ca F --server-name N] [--seconds S] unary
 *   rpc-c --addr ADDR [--megabytes N] bidi
 * unary: sequential blocking Echo calls (16-byte payload) for S seconds;
 *        prints calls/s, p50 and p99 latency.
 * bidi:  one Bidi stream of N 1 MiB messages, content checked; prints MB/s. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rpc-common.h"
#include "warren/v1/diag.pb-c.h"

static int cmp_u64(const void *a, const void *b) {
        uint64_t x = *(const uint64_t *) a, y = *(const uint64_t *) b;
        return x < y ? -1 : x > y;
}

static int bench_unary(struct rpc_client *c, int seconds) {
        size_t cap = 1u << 22, n = 0;
        uint64_t *lat = malloc(cap * sizeof(*lat));
        Warren__V1__EchoRequest req = WARREN__V1__ECHO_REQUEST__INIT;
        req.payload.data = (uint8_t *) "0123456789abcdef";
        req.payload.len = 16;
        uint64_t start = now_ns(), end = start + (uint64_t) seconds * 1000000000ULL, t;
        while ((t = now_ns()) < end && n < cap) {
                ProtobufCMessage *resp = NULL;
                struct wr_err e = {0};
                if (rpc_client_unary(c, "/warren.v1.Diag/Echo", &req.base,
                                     &warren__v1__echo_response__descriptor, 0, &resp, &e) < 0) {
                        fprintf(stderr, "Echo: %s\n", e.msg);
                        free(lat);
                        return -1;
                }
                protobuf_c_message_free_unpacked(resp, NULL);
                lat[n++] = now_ns() - t;
        }
        double secs = (now_ns() - start) / 1e9;
        qsort(lat, n, sizeof(*lat), cmp_u64);
        printf("c-unary: %zu calls in %.2f s = %.0f calls/s, p50 %.1f us, p99 %.1f us\n", n, secs,
               n / secs, lat[n / 2] / 1e3, lat[n * 99 / 100] / 1e3);
        free(lat);
        return 0;
}

int main(int argc, char **argv) {
        struct tool_opts o;
        if (tool_parse(argc, argv, &o) < 0) {
                fprintf(stderr, "usage: rpc-c --addr ADDR [--seconds S] [--megabytes N] "
                                "unary|bidi\n");
                return 2;
        }
        uv_loop_t *loop = uv_default_loop();
        struct rpc_client *c;
        if (tool_connect(loop, &o, &c) < 0)
                return 1;
        int r = 0;
        if (strcmp(o.cmd, "unary") == 0)
                r = bench_unary(c, o.seconds);
        else if (strcmp(o.cmd, "bidi") == 0) {
                uint64_t ns;
                char err[300];
                size_t msg = (size_t) (getenv("MSG_KIB") ? atoi(getenv("MSG_KIB")) : 1024) * 1024;
                r = tool_bidi(c, (size_t) o.megabytes * (1048576 / msg), msg, &ns, err,
                              sizeof(err));
                if (r < 0)
                        fprintf(stderr, "bidi: %s\n", err);
                else
                        printf("c-bidi: %d MiB echoed in %.3f s = %.0f MB/s each way\n",
                               o.megabytes, ns / 1e9, o.megabytes * 1048576.0 / 1e6 / (ns / 1e9));
        } else {
                fprintf(stderr, "unknown command %s\n", o.cmd);
                r = -1;
        }
        rpc_client_free(c);
        uv_run(loop, UV_RUN_DEFAULT);
        uv_loop_close(loop);
        return r < 0 ? 1 : 0;
}
