/* SPDX-License-Identifier: Apache-2.0 */
/* wr-rpc-interop: the C client's side of the interop suite
 * (tests/e2e/test_interop.py). One case per run against a server serving
 * warren.v1.Diag:
 *   wr-rpc-interop --addr ADDR [--tls --ca F --server-name N] [--token T]
 *                  [--megabytes N] [--slack-ms N] CASE
 * CASE: unary large oversize unimplemented error-message bidi cancel
 *       deadline concurrent source-sink
 * Prints "PASS CASE ..." and exits 0, or "FAIL CASE: why" and exits 1. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rpc-common.h"
#include "warren/v1/diag.pb-c.h"

static struct rpc_client *cli;
static uv_loop_t *loop;
static char why[600];

#define FAIL(...)                                                                                  \
        do {                                                                                       \
                snprintf(why, sizeof(why), __VA_ARGS__);                                           \
                return -1;                                                                         \
        } while (0)

static int echo(const uint8_t *data, size_t len, int status, const char *msg,
                Warren__V1__EchoResponse **ret, struct wr_err *e) {
        Warren__V1__EchoRequest req = WARREN__V1__ECHO_REQUEST__INIT;
        req.payload.data = (uint8_t *) data;
        req.payload.len = len;
        req.status = status;
        req.message = (char *) (msg ? msg : "");
        ProtobufCMessage *resp = NULL;
        int r = rpc_client_unary(cli, "/warren.v1.Diag/Echo", &req.base,
                                 &warren__v1__echo_response__descriptor, 30000, &resp, e);
        *ret = (Warren__V1__EchoResponse *) resp;
        return r;
}

static int get_stats(Warren__V1__StatsResponse **ret) {
        Warren__V1__StatsRequest req = WARREN__V1__STATS_REQUEST__INIT;
        struct wr_err e = {0};
        ProtobufCMessage *resp = NULL;
        int r = rpc_client_unary(cli, "/warren.v1.Diag/Stats", &req.base,
                                 &warren__v1__stats_response__descriptor, 5000, &resp, &e);
        if (r < 0)
                fprintf(stderr, "Stats: %s\n", e.msg);
        *ret = (Warren__V1__StatsResponse *) resp;
        return r;
}

/* Poll Stats until no call but Stats itself is in flight. */
static int wait_idle(Warren__V1__StatsResponse **ret) {
        uint64_t end = now_ns() + 5000000000ULL;
        for (;;) {
                int r = get_stats(ret);
                if (r < 0)
                        return r;
                if ((*ret)->calls_in_flight == 0 || now_ns() > end)
                        return 0;
                protobuf_c_message_free_unpacked(&(*ret)->base, NULL);
                uv_sleep(20);
        }
}

static int case_unary(void) {
        Warren__V1__EchoResponse *r;
        struct wr_err e = {0};
        if (echo((const uint8_t *) "hello warren", 12, 0, NULL, &r, &e) < 0)
                FAIL("Echo: %s", e.msg);
        bool ok = r->payload.len == 12 && memcmp(r->payload.data, "hello warren", 12) == 0;
        protobuf_c_message_free_unpacked(&r->base, NULL);
        if (!ok)
                FAIL("payload mismatch");
        return 0;
}

static int case_large(void) {
        size_t n = 4u << 20;
        uint8_t *buf = malloc(n);
        for (size_t i = 0; i < n; i++)
                buf[i] = (uint8_t) (i * 31 + (i >> 13));
        Warren__V1__EchoResponse *r;
        struct wr_err e = {0};
        int rc = echo(buf, n, 0, NULL, &r, &e);
        if (rc < 0) {
                free(buf);
                FAIL("Echo 4 MiB: %s", e.msg);
        }
        bool ok = r->payload.len == n && memcmp(r->payload.data, buf, n) == 0;
        protobuf_c_message_free_unpacked(&r->base, NULL);
        free(buf);
        if (!ok)
                FAIL("4 MiB payload mismatch");
        return 0;
}

static int case_oversize(void) {
        size_t n = 17u << 20;
        uint8_t *buf = calloc(1, n);
        Warren__V1__EchoResponse *r = NULL;
        struct wr_err e = {0};
        int rc = echo(buf, n, 0, NULL, &r, &e);
        free(buf);
        if (rc != -EREMOTEIO || e.status != WR_STATUS_RESOURCE_EXHAUSTED)
                FAIL("want RESOURCE_EXHAUSTED, got rc %d status %d: %s", rc, e.status, e.msg);
        return case_unary();
}

static int case_unimplemented(void) {
        Warren__V1__EchoRequest req = WARREN__V1__ECHO_REQUEST__INIT;
        ProtobufCMessage *resp = NULL;
        struct wr_err e = {0};
        int r = rpc_client_unary(cli, "/warren.v1.Diag/NoSuchMethod", &req.base,
                                 &warren__v1__echo_response__descriptor, 5000, &resp, &e);
        if (r != -EREMOTEIO || e.status != WR_STATUS_UNIMPLEMENTED ||
            !strstr(e.msg, "NoSuchMethod"))
                FAIL("want UNIMPLEMENTED, got rc %d status %d: %s", r, e.status, e.msg);
        return 0;
}

static int case_error_message(void) {
        const char *msg = "na\xc3\xafve 100% sure \xe2\x9c\x93\nsecond line %41 \x7f";
        Warren__V1__EchoResponse *r = NULL;
        struct wr_err e = {0};
        int rc = echo(NULL, 0, WR_STATUS_FAILED_PRECONDITION, msg, &r, &e);
        if (rc != -EREMOTEIO || e.status != WR_STATUS_FAILED_PRECONDITION)
                FAIL("want FAILED_PRECONDITION, got rc %d status %d", rc, e.status);
        if (strcmp(e.msg, msg) != 0)
                FAIL("message changed: '%s'", e.msg);
        return 0;
}

static int case_bidi(int megabytes) {
        uint64_t ns;
        if (tool_bidi(cli, (size_t) megabytes, 1u << 20, &ns, why, sizeof(why)) < 0)
                return -1;
        printf("bidi %d MiB in %.3f s: %.0f MB/s\n", megabytes, ns / 1e9,
               megabytes * 1048576.0 / 1e6 / (ns / 1e9));
        return 0;
}

struct cancel_state {
        int got, closed, status;
};

static void cancel_on_message(struct rpc_stream *s, const ProtobufCMessage *m, void *ud) {
        ((struct cancel_state *) ud)->got++;
}
static void cancel_on_close(struct rpc_stream *s, int status, const char *m, void *ud) {
        struct cancel_state *c = ud;
        c->closed = 1;
        c->status = status;
}

static int case_cancel(void) {
        Warren__V1__StatsResponse *before, *mid, *after;
        if (wait_idle(&before) < 0)
                FAIL("Stats failed");
        static const struct rpc_stream_callbacks cbs = {.on_message = cancel_on_message,
                                                        .on_close = cancel_on_close};
        struct cancel_state cs = {0};
        struct rpc_stream *st;
        if (rpc_stream_open(cli, "/warren.v1.Diag/Bidi", &warren__v1__echo_response__descriptor, 0,
                            &cbs, &cs, &st) < 0)
                FAIL("open");
        Warren__V1__EchoRequest req = WARREN__V1__ECHO_REQUEST__INIT;
        req.payload.data = (uint8_t *) "ping";
        req.payload.len = 4;
        rpc_stream_send(st, &req.base);
        while (cs.got == 0 && !cs.closed)
                uv_run(loop, UV_RUN_ONCE);
        if (get_stats(&mid) < 0 || mid->calls_in_flight < 1)
                FAIL("server does not see the stream");
        rpc_stream_cancel(st);
        while (!cs.closed)
                uv_run(loop, UV_RUN_ONCE);
        rpc_stream_free(st);
        if (cs.status != WR_STATUS_CANCELLED)
                FAIL("on_close status %d, want CANCELLED", cs.status);
        if (wait_idle(&after) < 0)
                FAIL("Stats failed");
        bool ok = after->calls_in_flight == 0 && after->cancelled >= before->cancelled + 1;
        printf("in flight %llu -> %llu, cancelled %llu -> %llu\n",
               (unsigned long long) mid->calls_in_flight,
               (unsigned long long) after->calls_in_flight, (unsigned long long) before->cancelled,
               (unsigned long long) after->cancelled);
        protobuf_c_message_free_unpacked(&before->base, NULL);
        protobuf_c_message_free_unpacked(&mid->base, NULL);
        protobuf_c_message_free_unpacked(&after->base, NULL);
        if (!ok)
                FAIL("the server did not free the cancelled call");
        return 0;
}

static int case_deadline(int slack_ms) {
        Warren__V1__StatsResponse *before, *after;
        if (wait_idle(&before) < 0)
                FAIL("Stats failed");
        Warren__V1__SleepRequest req = WARREN__V1__SLEEP_REQUEST__INIT;
        req.millis = 10000;
        ProtobufCMessage *resp = NULL;
        struct wr_err e = {0};
        uint64_t t0 = now_ns();
        int r = rpc_client_unary(cli, "/warren.v1.Diag/Sleep", &req.base,
                                 &warren__v1__echo_response__descriptor, 300, &resp, &e);
        double ms = (now_ns() - t0) / 1e6;
        if (r != -EREMOTEIO || e.status != WR_STATUS_DEADLINE_EXCEEDED)
                FAIL("want DEADLINE_EXCEEDED, got rc %d status %d", r, e.status);
        if (wait_idle(&after) < 0)
                FAIL("Stats failed");
        /* The client's own timer is a backstop 20 ms later: the server's
         * deadline must be what ended the call. */
        bool server = after->deadline_exceeded >= before->deadline_exceeded + 1;
        bool idle = after->calls_in_flight == 0;
        printf("deadline 300 ms: status after %.1f ms (server counted it: %s)\n", ms,
               server ? "yes" : "no");
        protobuf_c_message_free_unpacked(&before->base, NULL);
        protobuf_c_message_free_unpacked(&after->base, NULL);
        if (ms < 295 || ms > 300 + slack_ms)
                FAIL("DEADLINE_EXCEEDED after %.1f ms, want 300..%d", ms, 300 + slack_ms);
        if (!server || !idle)
                FAIL("server-side deadline not observed (server %d, idle %d)", server, idle);
        return 0;
}

struct conc {
        int closed, failed, msgs, idx;
};

static void conc_on_message(struct rpc_stream *s, const ProtobufCMessage *m, void *ud) {
        struct conc *c = ud;
        const Warren__V1__EchoResponse *r = (const Warren__V1__EchoResponse *) m;
        char want[32];
        int n = snprintf(want, sizeof(want), "%d-%d", c->idx, c->msgs);
        if (r->payload.len != (size_t) n || memcmp(r->payload.data, want, (size_t) n) != 0)
                c->failed = 1;
        c->msgs++;
}
static void conc_on_close(struct rpc_stream *s, int status, const char *m, void *ud) {
        struct conc *c = ud;
        c->closed = 1;
        if (status)
                c->failed = 1;
}

static int case_concurrent(void) {
        enum { N = 100, MSGS = 20 };
        static const struct rpc_stream_callbacks cbs = {.on_message = conc_on_message,
                                                        .on_close = conc_on_close};
        struct conc cs[N] = {0};
        struct rpc_stream *st[N];
        /* 100 Sleep(300 ms) calls at once: serial handling would take 30 s. */
        uint64_t t0 = now_ns();
        Warren__V1__SleepRequest sreq = WARREN__V1__SLEEP_REQUEST__INIT;
        sreq.millis = 300;
        for (int i = 0; i < N; i++) {
                cs[i].idx = i;
                if (rpc_stream_open(cli, "/warren.v1.Diag/Sleep",
                                    &warren__v1__echo_response__descriptor, 20000, &cbs, &cs[i],
                                    &st[i]) < 0)
                        FAIL("open %d", i);
                rpc_stream_send(st[i], &sreq.base);
                rpc_stream_close_send(st[i]);
        }
        rpc_client_run(cli);
        double s = (now_ns() - t0) / 1e9;
        for (int i = 0; i < N; i++) {
                rpc_stream_free(st[i]);
                if (!cs[i].closed || cs[i].msgs != 1)
                        FAIL("sleep stream %d did not complete", i);
        }
        if (s > 5)
                FAIL("100 concurrent Sleep(300ms) took %.1f s", s);
        memset(cs, 0, sizeof(cs));
        for (int i = 0; i < N; i++) {
                cs[i].idx = i;
                if (rpc_stream_open(cli, "/warren.v1.Diag/Bidi",
                                    &warren__v1__echo_response__descriptor, 30000, &cbs, &cs[i],
                                    &st[i]) < 0)
                        FAIL("open %d", i);
        }
        for (int k = 0; k < MSGS; k++)
                for (int i = 0; i < N; i++) {
                        char p[32];
                        Warren__V1__EchoRequest req = WARREN__V1__ECHO_REQUEST__INIT;
                        req.payload.data = (uint8_t *) p;
                        req.payload.len = (size_t) snprintf(p, sizeof(p), "%d-%d", i, k);
                        rpc_stream_send(st[i], &req.base);
                        if (k == MSGS - 1)
                                rpc_stream_close_send(st[i]);
                }
        rpc_client_run(cli);
        for (int i = 0; i < N; i++) {
                rpc_stream_free(st[i]);
                if (!cs[i].closed || cs[i].failed || cs[i].msgs != MSGS)
                        FAIL("bidi stream %d: %d messages, failed %d", i, cs[i].msgs, cs[i].failed);
        }
        printf("100 concurrent sleeps in %.2f s\n", s);
        return 0;
}

struct src {
        int n, bad, status;
        uint64_t total, messages, fnv;
};
static void sink_on_message(struct rpc_stream *s, const ProtobufCMessage *m, void *ud) {
        struct src *c = ud;
        const Warren__V1__SinkResponse *r = (const Warren__V1__SinkResponse *) m;
        c->total = r->total_bytes;
        c->messages = r->messages;
        c->fnv = r->fnv1a;
        c->n++;
}
static void src_on_message(struct rpc_stream *s, const ProtobufCMessage *m, void *ud) {
        struct src *c = ud;
        const Warren__V1__EchoResponse *r = (const Warren__V1__EchoResponse *) m;
        if (r->payload.len != 100000)
                c->bad = 1;
        for (size_t i = 0; i < r->payload.len; i++)
                if (r->payload.data[i] != i % 251)
                        c->bad = 1;
        c->n++;
}
static void src_on_close(struct rpc_stream *s, int status, const char *m, void *ud) {
        ((struct src *) ud)->status = status;
}

static int case_source_sink(void) {
        static const struct rpc_stream_callbacks cbs = {.on_message = src_on_message,
                                                        .on_close = src_on_close};
        struct src sc = {0};
        struct rpc_stream *st;
        Warren__V1__SourceRequest sreq = WARREN__V1__SOURCE_REQUEST__INIT;
        sreq.count = 50;
        sreq.size = 100000;
        if (rpc_stream_open(cli, "/warren.v1.Diag/Source", &warren__v1__echo_response__descriptor,
                            30000, &cbs, &sc, &st) < 0)
                FAIL("open Source");
        rpc_stream_send(st, &sreq.base);
        rpc_stream_close_send(st);
        rpc_client_run(cli);
        rpc_stream_free(st);
        if (sc.n != 50 || sc.bad || sc.status)
                FAIL("Source: %d messages, bad %d, status %d", sc.n, sc.bad, sc.status);
        /* Sink: 40 messages of 5000 bytes, checked against FNV-1a. */
        static const struct rpc_stream_callbacks scbs = {.on_message = sink_on_message,
                                                         .on_close = src_on_close};
        struct src kc = {0};
        if (rpc_stream_open(cli, "/warren.v1.Diag/Sink", &warren__v1__sink_response__descriptor,
                            30000, &scbs, &kc, &st) < 0)
                FAIL("open Sink");
        uint8_t buf[5000];
        uint64_t h = 0xcbf29ce484222325ULL;
        for (int k = 0; k < 40; k++) {
                for (size_t i = 0; i < sizeof(buf); i++) {
                        buf[i] = (uint8_t) (k * 13 + i * 7);
                        h = (h ^ buf[i]) * 0x100000001b3ULL;
                }
                Warren__V1__EchoRequest req = WARREN__V1__ECHO_REQUEST__INIT;
                req.payload.data = buf;
                req.payload.len = sizeof(buf);
                rpc_stream_send(st, &req.base);
        }
        rpc_stream_close_send(st);
        rpc_client_run(cli);
        rpc_stream_free(st);
        if (kc.status || kc.n != 1 || kc.total != 200000 || kc.messages != 40 || kc.fnv != h)
                FAIL("Sink: status %d, %d responses, %llu bytes, %llu messages, fnv %s", kc.status,
                     kc.n, (unsigned long long) kc.total, (unsigned long long) kc.messages,
                     kc.fnv == h ? "ok" : "wrong");
        return 0;
}

int main(int argc, char **argv) {
        struct tool_opts o;
        if (tool_parse(argc, argv, &o) < 0) {
                fprintf(stderr, "usage: wr-rpc-interop --addr ADDR [--tls --ca F "
                                "--server-name N] [--token T] CASE\n");
                return 2;
        }
        loop = uv_default_loop();
        if (tool_connect(loop, &o, &cli) < 0) {
                printf("FAIL %s: connect\n", o.cmd);
                return 1;
        }
        int r;
        if (strcmp(o.cmd, "unary") == 0)
                r = case_unary();
        else if (strcmp(o.cmd, "large") == 0)
                r = case_large();
        else if (strcmp(o.cmd, "oversize") == 0)
                r = case_oversize();
        else if (strcmp(o.cmd, "unimplemented") == 0)
                r = case_unimplemented();
        else if (strcmp(o.cmd, "error-message") == 0)
                r = case_error_message();
        else if (strcmp(o.cmd, "bidi") == 0)
                r = case_bidi(o.megabytes);
        else if (strcmp(o.cmd, "cancel") == 0)
                r = case_cancel();
        else if (strcmp(o.cmd, "deadline") == 0)
                r = case_deadline(o.slack_ms);
        else if (strcmp(o.cmd, "concurrent") == 0)
                r = case_concurrent();
        else if (strcmp(o.cmd, "source-sink") == 0)
                r = case_source_sink();
        else {
                snprintf(why, sizeof(why), "unknown case");
                r = -1;
        }
        rpc_client_free(cli);
        uv_run(loop, UV_RUN_DEFAULT);
        uv_loop_close(loop);
        if (r < 0) {
                printf("FAIL %s: %s\n", o.cmd, why);
                return 1;
        }
        printf("PASS %s\n", o.cmd);
        return 0;
}
