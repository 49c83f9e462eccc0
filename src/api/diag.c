/* SPDX-License-Identifier: Apache-2.0 */
/* warren.v1.Diag: a diagnostic service for interop tests and benchmarks,
 * served only with --enable-diag. Exercises every call shape of the RPC
 * layer: unary (Echo, Sleep, Stats), server streaming (Source), client
 * streaming (Sink) and bidi with back-pressure (Bidi). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "api/api.h"
#include "basic/log.h"
#include "basic/macro.h"
#include "rpc/server.h"
#include "warren/v1/diag.pb-c.h"

static struct { uint64_t cancelled, finished, deadline_exceeded; } stats;

static void count_finish(struct rpc_call *call, int status, const char *msg) {
        if (rpc_call_finish(call, status, msg) == 0)
                stats.finished++;
}

static void diag_on_cancel(struct rpc_call *call, int status) {
        if (status == WR_STATUS_DEADLINE_EXCEEDED)
                stats.deadline_exceeded++;
        else
                stats.cancelled++;
        log_debug("diag: %s ended early: %s", rpc_call_method(call)->path, err_status_name(status));
}

/* --- Echo --- */

static void echo_on_message(struct rpc_call *call, const ProtobufCMessage *msg) {
        const Warren__V1__EchoRequest *req = (const Warren__V1__EchoRequest *) msg;
        if (req->status != 0) {
                count_finish(call, req->status, req->message);
                return;
        }
        Warren__V1__EchoResponse resp = WARREN__V1__ECHO_RESPONSE__INIT;
        resp.payload = req->payload;
        int r = rpc_call_send(call, &resp.base);
        if (r < 0 && r != -ECANCELED) {
                count_finish(call, WR_STATUS_RESOURCE_EXHAUSTED, "response too large");
                return;
        }
        count_finish(call, WR_STATUS_OK, NULL);
}

/* --- Source --- */

struct source {
        uint32_t count, sent;
        Warren__V1__EchoResponse resp;
};

static void source_pump(struct rpc_call *call) {
        struct source *st = rpc_call_get_data(call);
        while (st->sent < st->count) {
                int r = rpc_call_send(call, &st->resp.base);
                if (r == -EMSGSIZE) {
                        count_finish(call, WR_STATUS_RESOURCE_EXHAUSTED, "message too large");
                        return;
                }
                if (r < 0)
                        return;
                st->sent++;
                if (r == 1)
                        return; /* wait for on_writable */
        }
        count_finish(call, WR_STATUS_OK, NULL);
}

static void source_on_message(struct rpc_call *call, const ProtobufCMessage *msg) {
        const Warren__V1__SourceRequest *req = (const Warren__V1__SourceRequest *) msg;
        struct source *st = calloc(1, sizeof(*st));
        uint8_t *buf = req->size ? malloc(req->size) : NULL;
        if (!st || (req->size && !buf)) {
                free(st);
                free(buf);
                count_finish(call, WR_STATUS_RESOURCE_EXHAUSTED, "out of memory");
                return;
        }
        for (uint32_t i = 0; i < req->size; i++)
                buf[i] = (uint8_t) (i % 251);
        warren__v1__echo_response__init(&st->resp);
        st->resp.payload.data = buf;
        st->resp.payload.len = req->size;
        st->count = req->count;
        rpc_call_set_data(call, st);
        source_pump(call);
}

static void source_on_free(struct rpc_call *call) {
        struct source *st = rpc_call_get_data(call);
        if (st)
                free(st->resp.payload.data);
        free(st);
}

/* --- Sink --- */

struct sink {
        uint64_t total, messages, hash;
};

static void sink_on_message(struct rpc_call *call, const ProtobufCMessage *msg) {
        const Warren__V1__EchoRequest *req = (const Warren__V1__EchoRequest *) msg;
        struct sink *st = rpc_call_get_data(call);
        if (!st) {
                st = calloc(1, sizeof(*st));
                if (!st) {
                        count_finish(call, WR_STATUS_RESOURCE_EXHAUSTED, "out of memory");
                        return;
                }
                st->hash = 0xcbf29ce484222325ULL;
                rpc_call_set_data(call, st);
        }
        for (size_t i = 0; i < req->payload.len; i++) {
                st->hash ^= req->payload.data[i];
                st->hash *= 0x100000001b3ULL;
        }
        st->total += req->payload.len;
        st->messages++;
}

static void sink_on_half_close(struct rpc_call *call) {
        struct sink *st = rpc_call_get_data(call);
        Warren__V1__SinkResponse resp = WARREN__V1__SINK_RESPONSE__INIT;
        resp.total_bytes = st ? st->total : 0;
        resp.messages = st ? st->messages : 0;
        resp.fnv1a = st ? st->hash : 0xcbf29ce484222325ULL;
        if (rpc_call_reply(call, &resp.base) == 0)
                stats.finished++;
}

static void sink_on_free(struct rpc_call *call) {
        free(rpc_call_get_data(call));
}

/* --- Bidi --- */

static void bidi_on_message(struct rpc_call *call, const ProtobufCMessage *msg) {
        const Warren__V1__EchoRequest *req = (const Warren__V1__EchoRequest *) msg;
        if (req->status != 0) {
                count_finish(call, req->status, req->message);
                return;
        }
        Warren__V1__EchoResponse resp = WARREN__V1__ECHO_RESPONSE__INIT;
        resp.payload = req->payload;
        int r = rpc_call_send(call, &resp.base);
        if (r == 1)
                rpc_call_pause_recv(call); /* back-pressure: resume on_writable */
        else if (r == -EMSGSIZE)
                count_finish(call, WR_STATUS_RESOURCE_EXHAUSTED, "message too large");
}

static void bidi_on_writable(struct rpc_call *call) {
        rpc_call_resume_recv(call);
}

static void bidi_on_half_close(struct rpc_call *call) {
        count_finish(call, WR_STATUS_OK, NULL);
}

/* --- Sleep --- */

struct sleeper {
        uv_timer_t timer;
        struct rpc_call *call;
        bool closing;
};

static void sleeper_closed(uv_handle_t *h) {
        struct sleeper *sl = h->data;
        rpc_call_unref(sl->call); /* on_free frees sl */
}

static void sleeper_stop(struct sleeper *sl) {
        if (sl->closing)
                return;
        sl->closing = true;
        uv_timer_stop(&sl->timer);
        uv_close((uv_handle_t *) &sl->timer, sleeper_closed);
}

static void sleep_fired(uv_timer_t *t) {
        struct sleeper *sl = t->data;
        Warren__V1__EchoResponse resp = WARREN__V1__ECHO_RESPONSE__INIT;
        if (rpc_call_reply(sl->call, &resp.base) == 0)
                stats.finished++;
        sleeper_stop(sl);
}

static void sleep_on_message(struct rpc_call *call, const ProtobufCMessage *msg) {
        const Warren__V1__SleepRequest *req = (const Warren__V1__SleepRequest *) msg;
        struct sleeper *sl = calloc(1, sizeof(*sl));
        if (!sl) {
                count_finish(call, WR_STATUS_RESOURCE_EXHAUSTED, "out of memory");
                return;
        }
        if (uv_timer_init(rpc_call_loop(call), &sl->timer) < 0) {
                free(sl);
                count_finish(call, WR_STATUS_RESOURCE_EXHAUSTED, "no timer");
                return;
        }
        sl->call = rpc_call_ref(call);
        sl->timer.data = sl;
        rpc_call_set_data(call, sl);
        uv_timer_start(&sl->timer, sleep_fired, req->millis, 0);
}

static void sleep_on_cancel(struct rpc_call *call, int status) {
        diag_on_cancel(call, status);
        struct sleeper *sl = rpc_call_get_data(call);
        if (sl)
                sleeper_stop(sl);
}

static void sleep_on_free(struct rpc_call *call) {
        free(rpc_call_get_data(call));
}

/* --- Stats --- */

static void stats_on_message(struct rpc_call *call, const ProtobufCMessage *msg) {
        struct rpc_server *s = rpc_call_server(call);
        Warren__V1__StatsResponse resp = WARREN__V1__STATS_RESPONSE__INIT;
        size_t live = rpc_server_call_count(s);
        resp.calls_in_flight = live > 0 ? live - 1 : 0; /* not this call */
        resp.cancelled = stats.cancelled;
        resp.finished = stats.finished;
        resp.deadline_exceeded = stats.deadline_exceeded;
        resp.buffered_bytes = rpc_server_queued_bytes(s);
        rpc_call_reply(call, &resp.base);
}

#define IN(x) &warren__v1__##x##__descriptor

static const struct rpc_method diag_methods[] = {
        {.path = "/warren.v1.Diag/Echo",
         .kind = RPC_UNARY,
         .input = IN(echo_request),
         .output = IN(echo_response),
         .on_message = echo_on_message,
         .on_cancel = diag_on_cancel},
        {.path = "/warren.v1.Diag/Source",
         .kind = RPC_SERVER_STREAM,
         .input = IN(source_request),
         .output = IN(echo_response),
         .on_message = source_on_message,
         .on_writable = source_pump,
         .on_cancel = diag_on_cancel,
         .on_free = source_on_free},
        {.path = "/warren.v1.Diag/Sink",
         .kind = RPC_CLIENT_STREAM,
         .input = IN(echo_request),
         .output = IN(sink_response),
         .on_message = sink_on_message,
         .on_half_close = sink_on_half_close,
         .on_cancel = diag_on_cancel,
         .on_free = sink_on_free},
        {.path = "/warren.v1.Diag/Bidi",
         .kind = RPC_BIDI,
         .input = IN(echo_request),
         .output = IN(echo_response),
         .on_message = bidi_on_message,
         .on_half_close = bidi_on_half_close,
         .on_writable = bidi_on_writable,
         .on_cancel = diag_on_cancel},
        {.path = "/warren.v1.Diag/Sleep",
         .kind = RPC_UNARY,
         .input = IN(sleep_request),
         .output = IN(echo_response),
         .on_message = sleep_on_message,
         .on_cancel = sleep_on_cancel,
         .on_free = sleep_on_free},
        {.path = "/warren.v1.Diag/Stats",
         .kind = RPC_UNARY,
         .input = IN(stats_request),
         .output = IN(stats_response),
         .on_message = stats_on_message},
};

int api_diag_register(struct rpc_server *s) {
        return rpc_server_add_methods(s, diag_methods, ELEMENTSOF(diag_methods));
}
