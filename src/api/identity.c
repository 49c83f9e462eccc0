/* SPDX-License-Identifier: Apache-2.0 */
/* warren.v1.Identity: who the caller is (WhoAmI), API tokens (create,
 * list, revoke), the audit log and environment quotas. Who may call what:
 * docs/security.md. Sandbox identity tokens: sbx-identity.c. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/rand.h>
#include <openssl/sha.h>

#include "api/api-internal.h"
#include "api/bearer.h"
#include "api/wid.h"
#include "basic/log.h"
#include "sandbox/sandbox.h"
#include "store/store.h"
#include "warren/v1/identity.pb-c.h"

static const char *role_name(enum api_role r) {
        switch (r) {
        case API_ROLE_OPERATOR:
                return "operator";
        case API_ROLE_ADMIN:
                return "admin";
        case API_ROLE_USER:
                return "user";
        default:
                return "anonymous";
        }
}

static void who_am_i(struct rpc_call *call, const ProtobufCMessage *msg) {
        const struct api_caller *c = api_caller(call);
        Warren__V1__WhoAmIResponse r = WARREN__V1__WHO_AM_IRESPONSE__INIT;
        r.subject = (char *) c->subject;
        r.environment = (char *) c->env;
        r.role = (char *) role_name(c->role);
        r.token_id = (char *) c->token_id;
        rpc_call_reply(call, &r.base);
}

static void finish(struct rpc_call *call, int status, const char *fmt, ...) _printf_(3, 4);

static void get_token(struct rpc_call *call, const ProtobufCMessage *msg) {
        const Warren__V1__GetWorkloadIdentityTokenRequest *req = (const void *) msg;
        if (!*req->audience) {
                rpc_call_finish(call, WR_STATUS_INVALID_ARGUMENT,
                                "audience: empty; give the audience the token is for (e.g. "
                                "\"sts.amazonaws.com\")");
                return;
        }
        struct api_ctx *ctx = rpc_call_server_ctx(call);
        const struct api_caller *c = api_caller(call);
        if (!ctx->wid) {
                rpc_call_finish(call, WR_STATUS_UNAVAILABLE,
                                "workload identity keys are not loaded (see warrend's log)");
                return;
        }
        if (!ctx->issuer) {
                rpc_call_finish(call, WR_STATUS_FAILED_PRECONDITION,
                                "workload identity needs an issuer: start warrend with "
                                "--admin-listen HOST:PORT (it serves /.well-known/jwks.json) "
                                "or --issuer URL");
                return;
        }
        if (strcmp(req->audience, WID_API_AUDIENCE) == 0)
                return finish(call, WR_STATUS_INVALID_ARGUMENT,
                              "audience: \"%s\" is reserved for sandbox identity tokens "
                              "(identity=True); give a third party's audience",
                              WID_API_AUDIENCE);
        if (strlen(req->audience) > 512)
                return finish(call, WR_STATUS_INVALID_ARGUMENT,
                              "audience: longer than 512 characters");
        char sub[160];
        snprintf(sub, sizeof(sub), "environment:%s:%s", c->env, c->subject);
        int64_t now = store_now_ns() / 1000000000;
        char *tok = NULL;
        struct wr_err e = {0};
        if (wid_mint(ctx->wid, ctx->issuer, sub, req->audience, c->env, now, WID_MAX_LIFETIME_SEC,
                     &tok, &e) < 0) {
                log_error("GetWorkloadIdentityToken: %s", e.msg);
                return finish(call, WR_STATUS_INTERNAL, "%s", e.msg);
        }
        api_audit_object(call, req->audience);
        Warren__V1__GetWorkloadIdentityTokenResponse r =
                WARREN__V1__GET_WORKLOAD_IDENTITY_TOKEN_RESPONSE__INIT;
        r.token = tok;
        r.expires_at_unix = now + WID_MAX_LIFETIME_SEC;
        rpc_call_reply(call, &r.base);
        explicit_bzero(tok, strlen(tok));
        free(tok);
}

char *api_well_known(const char *path, void *userdata) {
        struct api_ctx *ctx = userdata;
        if (!ctx->wid || !ctx->issuer)
                return NULL;
        if (strcmp(path, "/.well-known/jwks.json") == 0)
                return wid_jwks_json(ctx->wid);
        if (strcmp(path, "/.well-known/openid-configuration") == 0)
                return wid_openid_json(ctx->issuer);
        return NULL;
}

/* --- permissions --- */

static void finish(struct rpc_call *call, int status, const char *fmt, ...) {
        char m[512];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(m, sizeof(m), fmt, ap);
        va_end(ap);
        rpc_call_finish(call, status, m);
}

/* The environment a management call is about: env (empty = the caller's
 * own; "*" = all, for the operator only when allow_all). NULL after
 * answering the call when the caller may not. */
static const char *managed_env(struct rpc_call *call, const char *env, bool allow_all,
                               enum api_role need) {
        const struct api_caller *c = api_caller(call);
        if (c->role < need) {
                finish(call, WR_STATUS_PERMISSION_DENIED,
                       "%s needs the %s role; this caller is %s in environment \"%s\"",
                       rpc_call_path(call), role_name(need), role_name(c->role), c->env);
                return NULL;
        }
        if (!env || !*env)
                return c->env;
        if (strcmp(env, "*") == 0) {
                if (allow_all && c->role == API_ROLE_OPERATOR)
                        return env;
        } else if (!store_env_name_valid(env)) {
                finish(call, WR_STATUS_INVALID_ARGUMENT,
                       "environment: \"%.64s\" is not an environment name (a-z, 0-9, then also "
                       "'-' and '_'; at most 63 characters)",
                       env);
                return NULL;
        } else if (c->role == API_ROLE_OPERATOR || strcmp(env, c->env) == 0)
                return env;
        finish(call, WR_STATUS_PERMISSION_DENIED,
               "environment \"%.64s\": this caller is %s of environment \"%s\" only", env,
               role_name(c->role), c->env);
        return NULL;
}

/* --- tokens --- */

struct token_msg {
        Warren__V1__TokenInfo info;
        Warren__V1__Timestamp created, expires, revoked;
};

static Warren__V1__Timestamp *ts(Warren__V1__Timestamp *t, int64_t ns) {
        if (!ns)
                return NULL;
        warren__v1__timestamp__init(t);
        t->unix_nanos = ns;
        return t;
}

static void token_to_proto(const struct store_token *t, struct token_msg *m) {
        warren__v1__token_info__init(&m->info);
        m->info.id = t->id;
        m->info.environment = t->environment;
        m->info.role = t->role;
        m->info.description = t->subject;
        m->info.created_at = ts(&m->created, t->created_ns);
        m->info.expires_at = ts(&m->expires, t->expires_ns);
        m->info.revoked_at = ts(&m->revoked, t->revoked_ns);
}

static void create_token(struct rpc_call *call, const ProtobufCMessage *msg) {
        const Warren__V1__CreateTokenRequest *req = (const void *) msg;
        struct api_ctx *ctx = rpc_call_server_ctx(call);
        const char *env = managed_env(call, req->environment, false, API_ROLE_ADMIN);
        if (!env)
                return;
        const char *role = *req->role ? req->role : "user";
        if (strcmp(role, "user") != 0 && strcmp(role, "admin") != 0)
                return finish(call, WR_STATUS_INVALID_ARGUMENT,
                              "role: \"%.40s\" is not a role; use \"user\" or \"admin\"",
                              req->role);
        int64_t life = 0;
        if (*req->expires && sbx_duration_parse(req->expires, &life) < 0)
                return finish(call, WR_STATUS_INVALID_ARGUMENT,
                              "expires: \"%.40s\" is not a duration; use e.g. \"3600s\", \"90m\", "
                              "\"24h\" or \"30d\" (empty: never)",
                              req->expires);
        if (strlen(req->description) > 200)
                return finish(call, WR_STATUS_INVALID_ARGUMENT,
                              "description: longer than 200 characters");
        unsigned char id[8], secret[32];
        char token[BEARER_TOKEN_LEN + 1], tid[BEARER_ID_LEN + 1];
        if (RAND_bytes(id, sizeof(id)) != 1 || RAND_bytes(secret, sizeof(secret)) != 1)
                return finish(call, WR_STATUS_UNAVAILABLE, "no randomness for a token; retry");
        bearer_format(id, secret, token, tid);
        explicit_bzero(secret, sizeof(secret));
        char subject[220];
        snprintf(subject, sizeof(subject), "%s", *req->description ? req->description : "");
        struct store_token t = {
                .id = tid,
                .environment = (char *) env,
                .subject = subject,
                .role = (char *) role,
                .created_ns = store_now_ns(),
                .expires_ns = life ? store_now_ns() + life : 0,
        };
        SHA256((const unsigned char *) token, BEARER_TOKEN_LEN, t.hash);
        struct wr_err e = {0};
        int r = store_token_insert(ctx->store, &t, &e);
        explicit_bzero(t.hash, sizeof(t.hash));
        if (r < 0) {
                explicit_bzero(token, sizeof(token));
                log_error("CreateToken: %s", e.msg);
                return finish(call, r == -EINVAL ? WR_STATUS_INVALID_ARGUMENT : WR_STATUS_INTERNAL,
                              "create token: %s", e.msg);
        }
        api_audit_object(call, tid);
        log_info("token %s created for environment %s (role %s) by %s", tid, env, role,
                 api_caller(call)->subject);
        struct token_msg m;
        token_to_proto(&t, &m);
        Warren__V1__CreateTokenResponse resp = WARREN__V1__CREATE_TOKEN_RESPONSE__INIT;
        resp.token = token;
        resp.info = &m.info;
        rpc_call_reply(call, &resp.base);
        explicit_bzero(token, sizeof(token));
}

static void list_tokens(struct rpc_call *call, const ProtobufCMessage *msg) {
        const Warren__V1__ListTokensRequest *req = (const void *) msg;
        struct api_ctx *ctx = rpc_call_server_ctx(call);
        const char *env = managed_env(call, req->environment, true, API_ROLE_ADMIN);
        if (!env)
                return;
        struct store_token *list = NULL;
        size_t n = 0;
        struct wr_err e = {0};
        if (store_token_list(ctx->store, strcmp(env, "*") == 0 ? NULL : env, &list, &n, &e) < 0)
                return finish(call, WR_STATUS_INTERNAL, "list tokens: %s", e.msg);
        struct token_msg *m = n ? calloc(n, sizeof(*m)) : NULL;
        Warren__V1__TokenInfo **ptrs = n ? calloc(n, sizeof(*ptrs)) : NULL;
        if (n && (!m || !ptrs)) {
                rpc_call_finish(call, WR_STATUS_RESOURCE_EXHAUSTED, "out of memory");
        } else {
                for (size_t i = 0; i < n; i++) {
                        token_to_proto(&list[i], &m[i]);
                        ptrs[i] = &m[i].info;
                }
                Warren__V1__ListTokensResponse resp = WARREN__V1__LIST_TOKENS_RESPONSE__INIT;
                resp.n_tokens = n;
                resp.tokens = ptrs;
                rpc_call_reply(call, &resp.base);
        }
        free(m);
        free(ptrs);
        store_token_list_free(list, n);
}

static void revoke_token(struct rpc_call *call, const ProtobufCMessage *msg) {
        const Warren__V1__RevokeTokenRequest *req = (const void *) msg;
        struct api_ctx *ctx = rpc_call_server_ctx(call);
        if (!managed_env(call, "", false, API_ROLE_ADMIN))
                return;
        if (!*req->id)
                return finish(call, WR_STATUS_INVALID_ARGUMENT,
                              "id: empty; give the token's id (tk-..., from `warren token ls`)");
        const struct api_caller *c = api_caller(call);
        struct store_token t = {0};
        struct wr_err e = {0};
        int r = store_token_load(ctx->store, req->id, &t, &e);
        /* another environment's token does not exist for an admin */
        if (r == -ENOENT ||
            (r >= 0 && c->role != API_ROLE_OPERATOR && strcmp(t.environment, c->env) != 0)) {
                store_token_clear(&t);
                return finish(call, WR_STATUS_NOT_FOUND, "token %.40s not found", req->id);
        }
        if (r < 0 || (r = store_token_revoke(ctx->store, req->id, &e)) < 0 ||
            (store_token_clear(&t), r = store_token_load(ctx->store, req->id, &t, &e)) < 0) {
                store_token_clear(&t);
                return finish(call, WR_STATUS_INTERNAL, "revoke token: %s", e.msg);
        }
        explicit_bzero(t.hash, sizeof(t.hash));
        log_info("token %s (environment %s) revoked by %s", t.id, t.environment, c->subject);
        struct token_msg m;
        token_to_proto(&t, &m);
        rpc_call_reply(call, &m.info.base);
        store_token_clear(&t);
}

/* --- audit --- */

struct audit_msg {
        Warren__V1__AuditEvent ev;
        Warren__V1__Timestamp time;
};

static void list_audit(struct rpc_call *call, const ProtobufCMessage *msg) {
        const Warren__V1__ListAuditEventsRequest *req = (const void *) msg;
        struct api_ctx *ctx = rpc_call_server_ctx(call);
        const char *env = managed_env(call, req->environment, true, API_ROLE_ADMIN);
        if (!env)
                return;
        if (req->limit < 0)
                return finish(call, WR_STATUS_INVALID_ARGUMENT,
                              "limit: %d is negative; give 1..1000 (0 = 100)", req->limit);
        size_t limit = req->limit == 0 ? 100 : (size_t) (req->limit > 1000 ? 1000 : req->limit);
        struct store_audit *list = NULL;
        size_t n = 0;
        struct wr_err e = {0};
        if (store_audit_list(ctx->store, strcmp(env, "*") == 0 ? NULL : env, req->before_seq, limit,
                             &list, &n, &e) < 0)
                return finish(call, WR_STATUS_INTERNAL, "list audit events: %s", e.msg);
        struct audit_msg *m = n ? calloc(n, sizeof(*m)) : NULL;
        Warren__V1__AuditEvent **ptrs = n ? calloc(n, sizeof(*ptrs)) : NULL;
        if (n && (!m || !ptrs)) {
                rpc_call_finish(call, WR_STATUS_RESOURCE_EXHAUSTED, "out of memory");
        } else {
                for (size_t i = 0; i < n; i++) {
                        Warren__V1__AuditEvent *o = &m[i].ev;
                        const struct store_audit *a = &list[i];
                        warren__v1__audit_event__init(o);
                        o->seq = a->seq;
                        o->time = ts(&m[i].time, a->time_ns);
                        o->environment = a->environment;
                        o->token_id = a->token_id;
                        o->subject = a->subject;
                        o->peer = a->peer;
                        o->method = a->method;
                        o->object = a->object;
                        o->code = a->status;
                        o->message = a->message;
                        ptrs[i] = o;
                }
                Warren__V1__ListAuditEventsResponse resp =
                        WARREN__V1__LIST_AUDIT_EVENTS_RESPONSE__INIT;
                resp.n_events = n;
                resp.events = ptrs;
                rpc_call_reply(call, &resp.base);
        }
        free(m);
        free(ptrs);
        store_audit_list_free(list, n);
}

/* --- quotas --- */

static void reply_quota(struct rpc_call *call, const char *env) {
        struct api_ctx *ctx = rpc_call_server_ctx(call);
        struct store_quota q;
        struct wr_err e = {0};
        int r = store_env_quota_get(ctx->store, env, &q, &e);
        if (r == -ENOENT)
                q = (struct store_quota){0}; /* an environment with nothing yet */
        else if (r < 0)
                return finish(call, WR_STATUS_INTERNAL, "quota: %s", e.msg);
        Warren__V1__Quota m = WARREN__V1__QUOTA__INIT;
        m.environment = (char *) env;
        m.max_sandboxes = q.max_sandboxes;
        m.max_cpu = q.max_cpu;
        m.max_memory_bytes = q.max_memory;
        m.max_volume_bytes = q.max_volume_bytes;
        rpc_call_reply(call, &m.base);
}

static void set_quota(struct rpc_call *call, const ProtobufCMessage *msg) {
        const Warren__V1__SetQuotaRequest *req = (const void *) msg;
        struct api_ctx *ctx = rpc_call_server_ctx(call);
        if (!req->quota)
                return finish(call, WR_STATUS_INVALID_ARGUMENT,
                              "quota: missing; give the environment and its limits");
        const Warren__V1__Quota *in = req->quota;
        const char *env = managed_env(call, in->environment, false, API_ROLE_OPERATOR);
        if (!env)
                return;
        if (in->max_sandboxes < 0 || in->max_cpu < 0 || in->max_memory_bytes < 0 ||
            in->max_volume_bytes < 0)
                return finish(call, WR_STATUS_INVALID_ARGUMENT,
                              "quota: a limit is negative; give 0 for none");
        struct store_quota q = {
                .max_sandboxes = in->max_sandboxes,
                .max_cpu = in->max_cpu,
                .max_memory = in->max_memory_bytes,
                .max_volume_bytes = in->max_volume_bytes,
        };
        struct wr_err e = {0};
        if (store_env_quota_set(ctx->store, env, &q, &e) < 0)
                return finish(call, WR_STATUS_INTERNAL, "set quota: %s", e.msg);
        log_info("environment %s: quota sandboxes=%lld cpu=%g memory=%lld volume_bytes=%lld", env,
                 (long long) q.max_sandboxes, q.max_cpu, (long long) q.max_memory,
                 (long long) q.max_volume_bytes);
        reply_quota(call, env);
}

static void get_quota(struct rpc_call *call, const ProtobufCMessage *msg) {
        const Warren__V1__GetQuotaRequest *req = (const void *) msg;
        const char *env = managed_env(call, req->environment, false, API_ROLE_USER);
        if (env)
                reply_quota(call, env);
}

#define UNARY(name, in, out, fn)                                                                   \
        {                                                                                          \
                .path = "/warren.v1.Identity/" name, .kind = RPC_UNARY,                            \
                .input = &warren__v1__##in##__descriptor,                                          \
                .output = &warren__v1__##out##__descriptor, .on_message = fn,                      \
        }

static const struct rpc_method methods[] = {
        UNARY("WhoAmI", who_am_irequest, who_am_iresponse, who_am_i),
        UNARY("GetWorkloadIdentityToken", get_workload_identity_token_request,
              get_workload_identity_token_response, get_token),
        UNARY("CreateToken", create_token_request, create_token_response, create_token),
        UNARY("ListTokens", list_tokens_request, list_tokens_response, list_tokens),
        UNARY("RevokeToken", revoke_token_request, token_info, revoke_token),
        UNARY("ListAuditEvents", list_audit_events_request, list_audit_events_response, list_audit),
        UNARY("SetQuota", set_quota_request, quota, set_quota),
        UNARY("GetQuota", get_quota_request, quota, get_quota),
};

int api_identity_register(struct rpc_server *s) {
        return rpc_server_add_methods(s, methods, ELEMENTSOF(methods));
}
