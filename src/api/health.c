/* SPDX-License-Identifier: Apache-2.0 */
/* grpc.health.v1.Health, the standard health checking protocol: the empty
 * service name and every registered service are SERVING while the daemon
 * runs; Check of an unknown name is NOT_FOUND; Watch sends the current
 * status (SERVICE_UNKNOWN for unknown names) and stays open until the
 * client cancels or the daemon shuts down (then NOT_SERVING, and the
 * stream ends UNAVAILABLE). */
#include <stdlib.h>
#include <string.h>

#include "api/api.h"
#include "basic/log.h"
#include "grpc/health/v1/health.pb-c.h"

#define SERVICE_NAME_MAX 256

/* One open Watch stream, linked into ctx->health. */
struct watcher {
        struct watcher *prev, *next;
        struct rpc_call *call; /* referenced while linked */
};

struct api_health {
        struct watcher *head;
        bool shutting_down;
};

static bool service_known(const struct api_ctx *ctx, const char *name) {
        if (!*name)
                return true;
        for (size_t i = 0; ctx && i < ctx->n_services; i++)
                if (strcmp(ctx->services[i], name) == 0)
                        return true;
        return false;
}

static bool shutting_down(const struct api_ctx *ctx) {
        return ctx && ctx->health && ctx->health->shutting_down;
}

static int check_name(struct rpc_call *call, const char *name) {
        if (strlen(name) > SERVICE_NAME_MAX) {
                rpc_call_finish(call, WR_STATUS_INVALID_ARGUMENT,
                                "service: name longer than 256 bytes; pass a fully-qualified "
                                "service name such as \"warren.v1.Sandboxes\" or \"\"");
                return -EINVAL;
        }
        return 0;
}

static void check(struct rpc_call *call, const ProtobufCMessage *msg) {
        const Grpc__Health__V1__HealthCheckRequest *req = (const void *) msg;
        const struct api_ctx *ctx = rpc_call_server_ctx(call);
        if (check_name(call, req->service) < 0)
                return;
        if (!service_known(ctx, req->service)) {
                char m[SERVICE_NAME_MAX + 64];
                snprintf(m, sizeof(m), "unknown service \"%s\"", req->service);
                rpc_call_finish(call, WR_STATUS_NOT_FOUND, m);
                return;
        }
        Grpc__Health__V1__HealthCheckResponse r = GRPC__HEALTH__V1__HEALTH_CHECK_RESPONSE__INIT;
        r.status = shutting_down(ctx)
                           ? GRPC__HEALTH__V1__HEALTH_CHECK_RESPONSE__SERVING_STATUS__NOT_SERVING
                           : GRPC__HEALTH__V1__HEALTH_CHECK_RESPONSE__SERVING_STATUS__SERVING;
        rpc_call_reply(call, &r.base);
}

static void list(struct rpc_call *call, const ProtobufCMessage *msg) {
        const struct api_ctx *ctx = rpc_call_server_ctx(call);
        size_t n = 1 + (ctx ? ctx->n_services : 0);
        Grpc__Health__V1__HealthCheckResponse status =
                GRPC__HEALTH__V1__HEALTH_CHECK_RESPONSE__INIT;
        status.status =
                shutting_down(ctx)
                        ? GRPC__HEALTH__V1__HEALTH_CHECK_RESPONSE__SERVING_STATUS__NOT_SERVING
                        : GRPC__HEALTH__V1__HEALTH_CHECK_RESPONSE__SERVING_STATUS__SERVING;
        _cleanup_free_ Grpc__Health__V1__HealthListResponse__StatusesEntry *entries =
                calloc(n, sizeof(*entries));
        _cleanup_free_ Grpc__Health__V1__HealthListResponse__StatusesEntry **ptrs =
                calloc(n, sizeof(*ptrs));
        if (!entries || !ptrs) {
                rpc_call_finish(call, WR_STATUS_RESOURCE_EXHAUSTED, "out of memory");
                return;
        }
        for (size_t i = 0; i < n; i++) {
                grpc__health__v1__health_list_response__statuses_entry__init(&entries[i]);
                entries[i].key = (char *) (i == 0 ? "" : ctx->services[i - 1]);
                entries[i].value = &status;
                ptrs[i] = &entries[i];
        }
        Grpc__Health__V1__HealthListResponse r = GRPC__HEALTH__V1__HEALTH_LIST_RESPONSE__INIT;
        r.n_statuses = n;
        r.statuses = ptrs;
        rpc_call_reply(call, &r.base);
}

static void unlink_watcher(struct api_health *h, struct watcher *w) {
        if (w->prev)
                w->prev->next = w->next;
        else if (h->head == w)
                h->head = w->next;
        if (w->next)
                w->next->prev = w->prev;
        w->prev = w->next = NULL;
}

static void watch(struct rpc_call *call, const ProtobufCMessage *msg) {
        const Grpc__Health__V1__HealthCheckRequest *req = (const void *) msg;
        struct api_ctx *ctx = rpc_call_server_ctx(call);
        if (check_name(call, req->service) < 0)
                return;
        if (!ctx) {
                rpc_call_finish(call, WR_STATUS_INTERNAL, "health: no daemon context");
                return;
        }
        if (!ctx->health) {
                ctx->health = calloc(1, sizeof(*ctx->health));
                if (!ctx->health) {
                        rpc_call_finish(call, WR_STATUS_RESOURCE_EXHAUSTED, "out of memory");
                        return;
                }
        }
        Grpc__Health__V1__HealthCheckResponse r = GRPC__HEALTH__V1__HEALTH_CHECK_RESPONSE__INIT;
        if (!service_known(ctx, req->service))
                r.status = GRPC__HEALTH__V1__HEALTH_CHECK_RESPONSE__SERVING_STATUS__SERVICE_UNKNOWN;
        else if (ctx->health->shutting_down)
                r.status = GRPC__HEALTH__V1__HEALTH_CHECK_RESPONSE__SERVING_STATUS__NOT_SERVING;
        else
                r.status = GRPC__HEALTH__V1__HEALTH_CHECK_RESPONSE__SERVING_STATUS__SERVING;
        if (rpc_call_send(call, &r.base) < 0)
                return;
        if (ctx->health->shutting_down) {
                rpc_call_finish(call, WR_STATUS_UNAVAILABLE, "warrend is shutting down");
                return;
        }
        struct watcher *w = calloc(1, sizeof(*w));
        if (!w) {
                rpc_call_finish(call, WR_STATUS_RESOURCE_EXHAUSTED, "out of memory");
                return;
        }
        w->call = rpc_call_ref(call);
        w->next = ctx->health->head;
        if (w->next)
                w->next->prev = w;
        ctx->health->head = w;
        rpc_call_set_data(call, w);
}

static void watch_cancel(struct rpc_call *call, int status) {
        struct api_ctx *ctx = rpc_call_server_ctx(call);
        struct watcher *w = rpc_call_get_data(call);
        if (!w || !w->call || !ctx || !ctx->health)
                return;
        unlink_watcher(ctx->health, w);
        w->call = NULL;
        rpc_call_unref(call);
}

static void watch_free(struct rpc_call *call) {
        struct watcher *w = rpc_call_get_data(call);
        rpc_call_set_data(call, NULL);
        free(w);
}

void api_health_shutdown(struct api_ctx *ctx) {
        if (!ctx)
                return;
        if (!ctx->health)
                ctx->health = calloc(1, sizeof(*ctx->health));
        if (!ctx->health)
                return;
        struct api_health *h = ctx->health;
        h->shutting_down = true;
        Grpc__Health__V1__HealthCheckResponse r = GRPC__HEALTH__V1__HEALTH_CHECK_RESPONSE__INIT;
        r.status = GRPC__HEALTH__V1__HEALTH_CHECK_RESPONSE__SERVING_STATUS__NOT_SERVING;
        while (h->head) {
                struct watcher *w = h->head;
                struct rpc_call *call = w->call;
                unlink_watcher(h, w);
                w->call = NULL;
                rpc_call_send(call, &r.base);
                rpc_call_finish(call, WR_STATUS_UNAVAILABLE, "warrend is shutting down");
                rpc_call_unref(call); /* may free w */
        }
        /* The struct itself is freed by api_health_free once the server is
         * gone; keep shutting_down visible until then. */
}

void api_health_free(struct api_ctx *ctx) {
        if (!ctx)
                return;
        free(ctx->health);
        ctx->health = NULL;
}

static const struct rpc_method methods[] = {
        {
                .path = "/grpc.health.v1.Health/Check",
                .kind = RPC_UNARY,
                .input = &grpc__health__v1__health_check_request__descriptor,
                .output = &grpc__health__v1__health_check_response__descriptor,
                .on_message = check,
        },
        {
                .path = "/grpc.health.v1.Health/List",
                .kind = RPC_UNARY,
                .input = &grpc__health__v1__health_list_request__descriptor,
                .output = &grpc__health__v1__health_list_response__descriptor,
                .on_message = list,
        },
        {
                .path = "/grpc.health.v1.Health/Watch",
                .kind = RPC_SERVER_STREAM,
                .input = &grpc__health__v1__health_check_request__descriptor,
                .output = &grpc__health__v1__health_check_response__descriptor,
                .on_message = watch,
                .on_cancel = watch_cancel,
                .on_free = watch_free,
        },
};

int api_health_register(struct rpc_server *s) {
        return rpc_server_add_methods(s, methods, ELEMENTSOF(methods));
}
