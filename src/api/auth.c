/* SPDX-License-Identifier: Apache-2.0 */
/* Who is calling (api_authorize, run by the RPC layer before any handler),
 * the one lookup of a caller's own sandbox, and the audit record of every
 * mutating call (api_audit_call_end). docs/security.md says who can do
 * what. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/sha.h>

#include "api/api-internal.h"
#include "api/bearer.h"
#include "api/jwt.h"
#include "api/wid.h"
#include "basic/log.h"
#include "image/image.h"
#include "runtime/runtime.h"
#include "store/store.h"
#include "volume/volume.h"
#include "warren/v1/sandboxes.pb-c.h"

/* Answered without credentials: load balancers, `warren version`, and the
 * test-only Diag service (--enable-diag: echo, sleep, stats; no tenant
 * data). */
static bool public_method(const char *path) {
        return strncmp(path, "/grpc.health.v1.Health/", 23) == 0 ||
               strncmp(path, "/warren.v1.Diag/", 16) == 0 ||
               strcmp(path, "/warren.v1.System/GetVersion") == 0;
}

static const struct api_caller anonymous = {.role = API_ROLE_NONE, .subject = "anonymous"};

const struct api_caller *api_caller(struct rpc_call *call) {
        const struct api_caller *c = rpc_call_auth(call);
        return c ? c : &anonymous;
}

void api_audit_object(struct rpc_call *call, const char *object) {
        struct api_caller *c = rpc_call_auth(call);
        if (c && object)
                snprintf(c->object, sizeof(c->object), "%s", object);
}

#define unauthenticated(e, ...)                                                                    \
        err_setx(e, -EACCES, WR_STATUS_UNAUTHENTICATED, WR_FAULT_CLIENT, __VA_ARGS__)

/* A sandbox's identity token (identity=True; sbx-identity.c): signed by
 * this warrend's keys for its own API, naming a sandbox that is still
 * there. The caller acts in the sandbox's environment. */
static int identity_caller(struct api_ctx *ctx, const char *tok, size_t n, struct api_caller *c,
                           struct wr_err *e) {
        if (!ctx->wid || !ctx->issuer)
                return unauthenticated(e, "identity tokens are not accepted: this warrend has no "
                                          "workload identity keys or issuer");
        struct jwt j;
        struct wr_err ve = {0};
        int64_t now = store_now_ns() / 1000000000;
        if (wid_verify(ctx->wid, tok, n, ctx->issuer, WID_API_AUDIENCE, now, &j, &ve) < 0)
                return unauthenticated(e, "the identity token is not valid: %s", ve.msg);
        /* sub = "sandbox:<environment>:<id>" */
        char env[64] = "", id[32] = "";
        const char *p = j.sub, *colon = NULL;
        if (strncmp(p, "sandbox:", 8) == 0 && (colon = strrchr(p + 8, ':')) &&
            (size_t) (colon - (p + 8)) < sizeof(env) && strlen(colon + 1) < sizeof(id)) {
                memcpy(env, p + 8, (size_t) (colon - (p + 8)));
                snprintf(id, sizeof(id), "%s", colon + 1);
        }
        if (!*env || strncmp(id, "sb-", 3) != 0 || strcmp(env, j.environment_id) != 0)
                return unauthenticated(e, "the identity token does not name a sandbox");
        struct store_sandbox sb = {0};
        struct wr_err le = {0};
        int r = store_sandbox_load(ctx->store, id, &sb, &le);
        bool live = r >= 0 && strcmp(sb.environment, env) == 0 &&
                    (sb.status == STORE_SANDBOX_PENDING || sb.status == STORE_SANDBOX_RUNNING);
        store_sandbox_clear(&sb);
        if (r < 0 && r != -ENOENT) {
                log_warn("authorize: %s", le.msg);
                return err_setx(e, r, WR_STATUS_UNAVAILABLE, WR_FAULT_SERVICE,
                                "could not check the identity token: %s", le.msg);
        }
        if (!live)
                return unauthenticated(e, "the identity token's sandbox %s is not running", id);
        c->role = ctx->identity_admin ? API_ROLE_ADMIN : API_ROLE_USER;
        snprintf(c->env, sizeof(c->env), "%s", env);
        snprintf(c->subject, sizeof(c->subject), "sandbox:%s", id);
        return 0;
}

/* The token in the authorization value, checked against the store. */
static int token_caller(struct api_ctx *ctx, const char *value, struct api_caller *c,
                        struct wr_err *e) {
        struct bearer b;
        int r = bearer_parse(value, strlen(value), &b);
        if (r == -EINVAL)
                return unauthenticated(e, "authorization: expected \"Bearer <token>\" (a token "
                                          "from `warren token create`)");
        if (r < 0) {
                const char *cred;
                size_t n;
                if (bearer_credential(value, strlen(value), &cred, &n) == 0 &&
                    jwt_looks_like(cred, n))
                        return identity_caller(ctx, cred, n, c, e);
                return unauthenticated(e, "authorization: the bearer token is not a warren token "
                                          "(\"wt_...\") nor a sandbox identity token");
        }
        unsigned char hash[32];
        SHA256((const unsigned char *) b.token, b.token_len, hash);
        struct store_token t = {0};
        struct wr_err le = {0};
        r = store_token_load(ctx->store, b.id, &t, &le);
        if (r == -ENOENT || (r >= 0 && !store_token_hash_equal(hash, t.hash))) {
                store_token_clear(&t);
                explicit_bzero(hash, sizeof(hash));
                return unauthenticated(e, "the token is not valid");
        }
        explicit_bzero(hash, sizeof(hash));
        if (r < 0) {
                log_warn("authorize: %s", le.msg);
                return err_setx(e, r, WR_STATUS_UNAVAILABLE, WR_FAULT_SERVICE,
                                "could not check the token: %s", le.msg);
        }
        if (t.revoked_ns) {
                r = unauthenticated(e, "token %s was revoked", t.id);
        } else if (t.expires_ns && t.expires_ns <= store_now_ns()) {
                r = unauthenticated(e, "token %s has expired", t.id);
        } else {
                c->role = strcmp(t.role, "admin") == 0 ? API_ROLE_ADMIN : API_ROLE_USER;
                snprintf(c->env, sizeof(c->env), "%s", t.environment);
                snprintf(c->token_id, sizeof(c->token_id), "%s", t.id);
                snprintf(c->subject, sizeof(c->subject), "token:%s", t.id);
                r = 0;
        }
        store_token_clear(&t);
        return r;
}

int api_authorize(struct rpc_call *call, void *userdata, struct wr_err *e) {
        struct api_ctx *ctx = userdata;
        const struct rpc_peer *peer = rpc_call_peer(call);
        const char *path = rpc_call_path(call);
        bool is_unix = strcmp(peer->addr, "unix") == 0;
        struct api_caller *c = calloc(1, sizeof(*c));
        if (!c)
                return err_setx(e, -ENOMEM, WR_STATUS_RESOURCE_EXHAUSTED, WR_FAULT_SERVICE,
                                "out of memory");
        if (is_unix)
                snprintf(c->peer, sizeof(c->peer), "%s pid %d uid %d",
                         peer->sandbox ? "sandbox-socket" : "unix", (int) peer->pid,
                         (int) peer->uid);
        else
                snprintf(c->peer, sizeof(c->peer), "%s%s", peer->addr, peer->tls ? " (tls)" : "");
        /* visible to the audit record even when refused */
        rpc_call_set_auth(call, c, free);

        const char *authz = rpc_call_metadata(call, "authorization");
        int r = 0;
        if (authz) {
                r = token_caller(ctx, authz, c, e);
        } else if (!peer->sandbox && ((is_unix && peer->uid == 0) || (!is_unix && !peer->tls))) {
                /* root on the socket; a plaintext TCP listener exists only
                 * with --insecure-tcp (loopback) or --insecure-tcp-i-know */
                c->role = API_ROLE_OPERATOR;
                snprintf(c->env, sizeof(c->env), "%s", STORE_ENV_DEFAULT);
                if (is_unix)
                        snprintf(c->subject, sizeof(c->subject), "uid:0");
                else
                        snprintf(c->subject, sizeof(c->subject), "insecure-tcp");
        } else if (public_method(path)) {
                c->role = API_ROLE_NONE;
                snprintf(c->subject, sizeof(c->subject), "anonymous");
                return 0;
        } else {
                r = unauthenticated(e, "this call needs an API token: send the metadata "
                                       "`authorization: Bearer <token>` (warren --token, "
                                       "WARREN_TOKEN, SandboxClient(token=...))");
        }
        if (r < 0)
                return r;
        /* WARREN_ENVIRONMENT: the operator acts in any environment; a token
         * only in its own. */
        const char *want = rpc_call_metadata(call, "x-warren-environment");
        if (want && *want && strcmp(want, c->env) != 0) {
                if (c->role != API_ROLE_OPERATOR)
                        return err_setx(e, -EPERM, WR_STATUS_PERMISSION_DENIED, WR_FAULT_CLIENT,
                                        "%s %s belongs to environment \"%s\", not \"%.64s\" "
                                        "(unset WARREN_ENVIRONMENT or use a token of that "
                                        "environment)",
                                        *c->token_id ? "token" : "identity of",
                                        *c->token_id ? c->token_id : c->subject, c->env, want);
                if (!store_env_name_valid(want))
                        return err_setx(e, -EINVAL, WR_STATUS_INVALID_ARGUMENT, WR_FAULT_CLIENT,
                                        "x-warren-environment: \"%.64s\" is not an environment "
                                        "name (a-z, 0-9, '-', '_'; at most 63)",
                                        want);
                snprintf(c->env, sizeof(c->env), "%s", want);
                /* an environment is made by its first use */
                struct wr_err le = {0};
                if (store_env_ensure(ctx->store, want, &le) < 0)
                        log_warn("environment %s: %s", want, le.msg);
        }
        return 0;
}

int api_server_authorize(struct rpc_call *call, void *ctx, struct wr_err *e) {
        return api_authorize(call, ctx, e);
}

/* --- own objects --- */

int api_own_sandbox(struct rpc_call *call, const char *key, struct store_sandbox *ret,
                    struct wr_err *e) {
        struct api_ctx *ctx = rpc_call_server_ctx(call);
        const char *env = api_caller_env(call);
        *ret = (struct store_sandbox){0};
        if (!key || !*key)
                return err_setx(e, -EINVAL, WR_STATUS_INVALID_ARGUMENT, WR_FAULT_CLIENT,
                                "sandbox: give an id (sb-...) or a name");
        int r = -ENOENT;
        struct wr_err le = {0};
        if (strncmp(key, "sb-", 3) == 0) {
                r = store_sandbox_load(ctx->store, key, ret, &le);
                if (r >= 0 && strcmp(ret->environment, env) != 0) {
                        store_sandbox_clear(ret);
                        r = -ENOENT;
                }
        }
        if (r == -ENOENT) {
                le = (struct wr_err){0};
                r = store_sandbox_load_by_name(ctx->store, env, key, ret, &le);
        }
        if (r == -ENOENT)
                return err_setx(e, -ENOENT, WR_STATUS_NOT_FOUND, WR_FAULT_CLIENT,
                                "sandbox %.200s not found (list them with `warren sandbox ls`)",
                                key);
        if (r < 0) {
                store_sandbox_clear(ret);
                return err_set(e, r, "load sandbox %.200s: %s", key, le.msg);
        }
        api_audit_object(call, ret->id);
        return 0;
}

int api_own_sandbox_id(struct rpc_call *call, const char *key, char *id, size_t size,
                       struct wr_err *e) {
        struct store_sandbox sb;
        int r = api_own_sandbox(call, key, &sb, e);
        if (r < 0)
                return r;
        snprintf(id, size, "%s", sb.id);
        store_sandbox_clear(&sb);
        return 0;
}

/* --- audit --- */

/* Calls that change nothing are not recorded. */
static bool read_only(const char *path) {
        const char *m = strrchr(path, '/');
        m = m ? m + 1 : path;
        if (strcmp(m, "GetWorkloadIdentityToken") == 0)
                return false; /* mints a credential */
        return strncmp(m, "Get", 3) == 0 || strncmp(m, "List", 4) == 0 || strcmp(m, "Stat") == 0 ||
               strcmp(m, "WhoAmI") == 0 || strncmp(path, "/grpc.health.v1.", 16) == 0 ||
               strncmp(path, "/warren.v1.Diag/", 16) == 0;
}

/* The first non-empty string field of the request among the usual keys. */
static void object_from_request(const ProtobufCMessage *req, char *out, size_t size) {
        static const char *const fields[] = {"id",  "sandbox", "name",       "volume",
                                             "ref", "image",   "environment"};
        if (!req)
                return;
        for (size_t i = 0; i < ELEMENTSOF(fields); i++) {
                const ProtobufCFieldDescriptor *f =
                        protobuf_c_message_descriptor_get_field_by_name(req->descriptor, fields[i]);
                if (!f || f->type != PROTOBUF_C_TYPE_STRING ||
                    f->label == PROTOBUF_C_LABEL_REPEATED)
                        continue;
                if (f->flags & PROTOBUF_C_FIELD_FLAG_ONEOF) {
                        const uint32_t *qc =
                                (const uint32_t *) ((const char *) req + f->quantifier_offset);
                        if (*qc != f->id)
                                continue;
                }
                const char *v = *(const char *const *) ((const char *) req + f->offset);
                if (v && *v) {
                        snprintf(out, size, "%s", v);
                        return;
                }
        }
}

void api_audit_call_end(struct rpc_call *call, int status, const char *message, void *userdata) {
        struct api_ctx *ctx = userdata;
        const char *path = rpc_call_path(call);
        if (!path || read_only(path) || !ctx->store)
                return;
        const struct api_caller *c = api_caller(call);
        /* an unknown method is not an action on anything */
        if (!rpc_call_method(call) && status == WR_STATUS_UNIMPLEMENTED)
                return;
        char object[160] = "";
        snprintf(object, sizeof(object), "%s", c->object);
        if (!*object)
                object_from_request(rpc_call_request(call), object, sizeof(object));
        struct store_audit a = {
                .environment = (char *) c->env,
                .token_id = (char *) c->token_id,
                .subject = (char *) c->subject,
                .peer = (char *) c->peer,
                .method = (char *) path,
                .object = object,
                .status = status,
                .message = (char *) (status ? (message ? message : "") : ""),
        };
        struct wr_err e = {0};
        if (store_audit_insert(ctx->store, &a, &e) < 0)
                log_warn("audit: %s %s: %s", path, c->subject, e.msg);
}

void api_server_call_end(struct rpc_call *call, int status, const char *message, void *ctx) {
        api_audit_call_end(call, status, message, ctx);
}

/* --- images --- */

int api_own_image(struct rpc_call *call, const char *ref, bool write, struct img_info **ret,
                  struct wr_err *e) {
        struct api_ctx *ctx = rpc_call_server_ctx(call);
        *ret = NULL;
        if (!ctx->images)
                return err_setx(e, -EAGAIN, WR_STATUS_UNAVAILABLE, WR_FAULT_SERVICE,
                                "the image store is not ready");
        if (!ref || !*ref)
                return err_setx(e, -EINVAL, WR_STATUS_INVALID_ARGUMENT, WR_FAULT_CLIENT,
                                "image: give an image name or id");
        struct img_info *info = NULL;
        int r = img_store_resolve(ctx->images, ref, &info, e);
        if (r < 0)
                return r;
        struct wr_err le = {0};
        r = store_image_env_access(ctx->store, api_caller_env(call), info->id, write, &le);
        if (r <= 0) {
                img_info_free(info);
                if (r < 0)
                        return err_set(e, r, "image %.200s: %s", ref, le.msg);
                return err_setx(e, -ENOENT, WR_STATUS_NOT_FOUND, WR_FAULT_CLIENT,
                                "image %.200s not found", ref);
        }
        api_audit_object(call, info->id);
        *ret = info;
        return 0;
}

bool api_image_visible(struct rpc_call *call, const char *id) {
        struct api_ctx *ctx = rpc_call_server_ctx(call);
        return store_image_env_access(ctx->store, api_caller_env(call), id, false, NULL) > 0;
}

int api_image_name_check(struct rpc_call *call, const char *name, struct wr_err *e) {
        struct api_ctx *ctx = rpc_call_server_ctx(call);
        if (!name || !*name || !ctx->images)
                return 0;
        struct img_info *info = NULL;
        if (img_store_resolve(ctx->images, name, &info, NULL) < 0)
                return 0; /* free (or not a name: the module says why) */
        int r = store_image_env_access(ctx->store, api_caller_env(call), info->id, true, NULL);
        img_info_free(info);
        if (r == 0)
                return err_setx(e, -EEXIST, WR_STATUS_ALREADY_EXISTS, WR_FAULT_CLIENT,
                                "image name %.200s is taken; pick another name", name);
        return 0;
}

void api_image_record(struct rpc_call *call, const char *id) {
        struct api_ctx *ctx = rpc_call_server_ctx(call);
        struct wr_err e = {0};
        if (id && store_image_env_add(ctx->store, api_caller_env(call), id, &e) < 0)
                log_warn("image %s: record environment %s: %s", id, api_caller_env(call), e.msg);
}

bool api_image_hidden(struct rpc_call *call, const char *ref) {
        struct api_ctx *ctx = rpc_call_server_ctx(call);
        struct img_info *info = NULL;
        if (!ref || !*ref || !ctx->images || img_store_resolve(ctx->images, ref, &info, NULL) < 0)
                return false;
        bool hidden = !api_image_visible(call, info->id);
        img_info_free(info);
        return hidden;
}

/* --- quotas --- */

static int exhausted(struct wr_err *e, const char *env, const char *what, const char *limit,
                     const char *use) {
        return err_setx(e, -EDQUOT, WR_STATUS_RESOURCE_EXHAUSTED, WR_FAULT_CLIENT,
                        "quota %s of environment %s exceeded: limit %s, in use %s (terminate "
                        "something first, or ask the operator: warren env set-quota)",
                        what, env, limit, use);
}

int api_quota_check_sandbox(struct rpc_call *call, double cpu, int64_t memory, struct wr_err *e) {
        struct api_ctx *ctx = rpc_call_server_ctx(call);
        const char *env = api_caller_env(call);
        struct store_quota q;
        if (store_env_quota_get(ctx->store, env, &q, NULL) < 0 ||
            (!q.max_sandboxes && q.max_cpu <= 0 && !q.max_memory))
                return 0;
        static const int live[] = {STORE_SANDBOX_PENDING, STORE_SANDBOX_RUNNING,
                                   STORE_SANDBOX_TERMINATING};
        struct store_sandbox_filter f = {
                .environment = env, .statuses = live, .n_statuses = ELEMENTSOF(live)};
        struct store_sandbox *rows = NULL;
        size_t n = 0;
        struct wr_err le = {0};
        int r = store_sandbox_list(ctx->store, &f, &rows, &n, &le);
        if (r < 0)
                return err_set(e, r, "quota: %s", le.msg);
        double cpu_used = 0;
        int64_t mem_used = 0;
        for (size_t i = 0; i < n; i++) {
                uint32_t mc = 0;
                uint64_t mb = 0;
                Warren__V1__CreateSandboxRequest *req =
                        rows[i].spec && rows[i].spec_len
                                ? warren__v1__create_sandbox_request__unpack(NULL, rows[i].spec_len,
                                                                             rows[i].spec)
                                : NULL;
                if (req && req->resources) {
                        if (req->resources->cpu && *req->resources->cpu)
                                (void) rt_cpu_parse(req->resources->cpu, &mc);
                        if (req->resources->memory && *req->resources->memory)
                                (void) rt_memory_parse(req->resources->memory, &mb);
                }
                if (req)
                        warren__v1__create_sandbox_request__free_unpacked(req, NULL);
                cpu_used += (mc ? mc : RT_DEFAULT_CPU) / 1000.0;
                mem_used += (int64_t) (mb ? mb : RT_DEFAULT_MEMORY);
        }
        store_sandbox_list_free(rows, n);
        if (cpu <= 0)
                cpu = RT_DEFAULT_CPU / 1000.0;
        if (memory <= 0)
                memory = (int64_t) RT_DEFAULT_MEMORY;
        char l[48], u[48];
        if (q.max_sandboxes && (int64_t) n + 1 > q.max_sandboxes) {
                snprintf(l, sizeof(l), "%lld", (long long) q.max_sandboxes);
                snprintf(u, sizeof(u), "%zu", n);
                return exhausted(e, env, "sandboxes", l, u);
        }
        if (q.max_cpu > 0 && cpu_used + cpu > q.max_cpu + 1e-9) {
                snprintf(l, sizeof(l), "%g cores", q.max_cpu);
                snprintf(u, sizeof(u), "%g (this sandbox asks %g)", cpu_used, cpu);
                return exhausted(e, env, "cpu", l, u);
        }
        if (q.max_memory && mem_used + memory > q.max_memory) {
                snprintf(l, sizeof(l), "%lld bytes", (long long) q.max_memory);
                snprintf(u, sizeof(u), "%lld (this sandbox asks %lld)", (long long) mem_used,
                         (long long) memory);
                return exhausted(e, env, "memory", l, u);
        }
        return 0;
}

int api_quota_check_volume(struct rpc_call *call, int64_t volume_bytes, struct wr_err *e) {
        struct api_ctx *ctx = rpc_call_server_ctx(call);
        const char *env = api_caller_env(call);
        struct store_quota q;
        if (store_env_quota_get(ctx->store, env, &q, NULL) < 0 || !q.max_volume_bytes)
                return 0;
        struct vol_info *vis = NULL;
        size_t n = 0;
        struct wr_err le = {0};
        int r = vol_list(ctx->volumes, env, &vis, &n, &le);
        if (r < 0)
                return err_set(e, r, "quota: %s", le.msg);
        int64_t used = 0;
        for (size_t i = 0; i < n; i++)
                used += (int64_t) vis[i].max_bytes;
        free(vis);
        if (volume_bytes <= 0)
                volume_bytes = (int64_t) VOL_DEFAULT_BYTES;
        if (used + volume_bytes > q.max_volume_bytes) {
                char l[48], u[80];
                snprintf(l, sizeof(l), "%lld bytes", (long long) q.max_volume_bytes);
                snprintf(u, sizeof(u), "%lld (this volume asks %lld)", (long long) used,
                         (long long) volume_bytes);
                return exhausted(e, env, "volume_bytes", l, u);
        }
        return 0;
}
