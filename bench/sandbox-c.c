/* SPDX-License-Identifier: Apache-2.0 */
/* sandbox-c: sandbox latency with the C client (no client-side overhead to
 * speak of), against a running warrend that has the image.
 *   sandbox-c --addr ADDR [--seconds N(=count)] IMAGE
 * Prints p50/p99 of: create->first exec (CreateSandbox + Exec /bin/true to
 * its exit), exec on a running sandbox, terminate; N rounds each (200). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "rpc-common.h"
#include "warren/v1/sandboxes.pb-c.h"

static int cmp_u64(const void *a, const void *b) {
        uint64_t x = *(const uint64_t *) a, y = *(const uint64_t *) b;
        return x < y ? -1 : x > y;
}

static void show(const char *name, uint64_t *v, size_t n) {
        qsort(v, n, sizeof(*v), cmp_u64);
        printf("c-%-26s n=%-4zu p50 %7.3f ms   p99 %7.3f ms\n", name, n, v[n / 2] / 1e6,
               v[n * 99 / 100] / 1e6);
}

struct exec_state {
        int exit_code;
        int exited;
        int status;
        char msg[256];
};

static void on_message(struct rpc_stream *s, const ProtobufCMessage *m, void *ud) {
        struct exec_state *st = ud;
        const Warren__V1__ExecResponse *r = (const void *) m;
        if (r->kind_case == WARREN__V1__EXEC_RESPONSE__KIND_EXITED) {
                st->exited = 1;
                st->exit_code = r->exited->exit_code;
        }
}

static void on_close(struct rpc_stream *s, int status, const char *message, void *ud) {
        struct exec_state *st = ud;
        st->status = status;
        snprintf(st->msg, sizeof(st->msg), "%s", message ? message : "");
}

static int exec_true(struct rpc_client *c, const char *sid) {
        static const struct rpc_stream_callbacks cb = {.on_message = on_message,
                                                       .on_close = on_close};
        struct exec_state st = {.status = -1};
        struct rpc_stream *s;
        if (rpc_stream_open(c, "/warren.v1.Sandboxes/Exec", &warren__v1__exec_response__descriptor,
                            0, &cb, &st, &s) < 0)
                return -1;
        char *argv[] = {"/bin/true"};
        Warren__V1__ExecStart start = WARREN__V1__EXEC_START__INIT;
        start.sandbox = (char *) sid;
        start.argv = argv;
        start.n_argv = 1;
        Warren__V1__ExecRequest req = WARREN__V1__EXEC_REQUEST__INIT;
        req.kind_case = WARREN__V1__EXEC_REQUEST__KIND_START;
        req.start = &start;
        rpc_stream_send(s, &req.base);
        rpc_stream_close_send(s);
        rpc_client_run(c);
        rpc_stream_free(s);
        if (st.status != 0 || !st.exited || st.exit_code != 0) {
                fprintf(stderr, "exec: status %d %s exit %d\n", st.status, st.msg, st.exit_code);
                return -1;
        }
        return 0;
}

static int create(struct rpc_client *c, const char *image, char *id, size_t idlen) {
        Warren__V1__ImageSpec spec = WARREN__V1__IMAGE_SPEC__INIT;
        spec.kind_case = WARREN__V1__IMAGE_SPEC__KIND_REF;
        spec.ref = (char *) image;
        Warren__V1__CreateSandboxRequest req = WARREN__V1__CREATE_SANDBOX_REQUEST__INIT;
        req.image = &spec;
        ProtobufCMessage *resp = NULL;
        struct wr_err e = {0};
        if (rpc_client_unary(c, "/warren.v1.Sandboxes/CreateSandbox", &req.base,
                             &warren__v1__sandbox__descriptor, 0, &resp, &e) < 0) {
                fprintf(stderr, "CreateSandbox: %s\n", e.msg);
                return -1;
        }
        snprintf(id, idlen, "%s", ((Warren__V1__Sandbox *) resp)->id);
        protobuf_c_message_free_unpacked(resp, NULL);
        return 0;
}

static int terminate(struct rpc_client *c, const char *id) {
        Warren__V1__TerminateSandboxRequest req = WARREN__V1__TERMINATE_SANDBOX_REQUEST__INIT;
        req.key_case = WARREN__V1__TERMINATE_SANDBOX_REQUEST__KEY_ID;
        req.id = (char *) id;
        req.grace_period_seconds = 1;
        ProtobufCMessage *resp = NULL;
        struct wr_err e = {0};
        if (rpc_client_unary(c, "/warren.v1.Sandboxes/TerminateSandbox", &req.base,
                             &warren__v1__sandbox__descriptor, 0, &resp, &e) < 0) {
                fprintf(stderr, "TerminateSandbox: %s\n", e.msg);
                return -1;
        }
        protobuf_c_message_free_unpacked(resp, NULL);
        return 0;
}

int main(int argc, char **argv) {
        struct tool_opts o;
        if (tool_parse(argc, argv, &o) < 0) {
                fprintf(stderr, "usage: sandbox-c --addr ADDR [--seconds N] IMAGE\n");
                return 2;
        }
        size_t n = o.seconds > 3 ? (size_t) o.seconds : 200;
        uv_loop_t *loop = uv_default_loop();
        struct rpc_client *c;
        if (tool_connect(loop, &o, &c) < 0)
                return 1;
        uint64_t *cr = calloc(n, 8), *ex = calloc(n, 8), *te = calloc(n, 8), *co = calloc(n, 8);
        char id[64];
        int r = 0;
        /* WARREN_BENCH_PAUSE_MS: idle time between rounds (lets a warm pool
         * refill, like sandboxes requested now and then rather than back to
         * back) */
        const char *pause_env = getenv("WARREN_BENCH_PAUSE_MS");
        long pause_ms = pause_env ? strtol(pause_env, NULL, 10) : 0;
        for (size_t i = 0; i < n && r == 0; i++) {
                if (pause_ms > 0) {
                        struct timespec ts = {pause_ms / 1000, (pause_ms % 1000) * 1000000L};
                        nanosleep(&ts, NULL);
                }
                uint64_t t = now_ns();
                r = create(c, o.cmd, id, sizeof(id));
                co[i] = now_ns() - t;
                if (r == 0)
                        r = exec_true(c, id);
                cr[i] = now_ns() - t;
                t = now_ns();
                if (r == 0)
                        r = terminate(c, id);
                te[i] = now_ns() - t;
        }
        if (r == 0 && create(c, o.cmd, id, sizeof(id)) == 0) {
                for (size_t i = 0; i < n && r == 0; i++) {
                        uint64_t t = now_ns();
                        r = exec_true(c, id);
                        ex[i] = now_ns() - t;
                }
                terminate(c, id);
        }
        if (r == 0) {
                show("create->first exec", cr, n);
                show("  of which CreateSandbox", co, n);
                show("exec on running sandbox", ex, n);
                show("terminate (idle sandbox)", te, n);
        }
        free(cr);
        free(ex);
        free(te);
        free(co);
        rpc_client_free(c);
        uv_run(loop, UV_RUN_DEFAULT);
        uv_loop_close(loop);
        return r < 0 ? 1 : 0;
}
