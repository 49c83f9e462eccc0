/* SPDX-License-Identifier: Apache-2.0 */
/* warren.v1.Sandboxes. ListSandboxes and GetSandbox read the store;
 * CreateSandbox and TerminateSandbox go through the sandbox manager
 * (sandbox/); Exec lives in exec.c; ListProcesses and ListNetworkEvents
 * answer UNIMPLEMENTED until their issues land. */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/api-internal.h"

#include <arpa/inet.h>

#include "basic/log.h"
#include "api/spec.h"
#include "image/image.h"
#include "image/resolve.h"
#include "k8s/k8s.h"
#include "runtime/runtime.h"
#include "sandbox/egress.h"
#include "sandbox/sandbox.h"
#include "store/store.h"
#include "warren/v1/sandboxes.pb-c.h"

#define PAGE_SIZE_MAX 1000
/* TERMINATED/FAILED sandboxes stay in unfiltered listings this long. */
#define LIST_RETENTION_NS (24LL * 3600 * 1000000000LL)

static void finish_invalid(struct rpc_call *call, const char *fmt, ...) _printf_(2, 3);
static void finish_invalid(struct rpc_call *call, const char *fmt, ...) {
        char msg[512];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(msg, sizeof(msg), fmt, ap);
        va_end(ap);
        rpc_call_finish(call, WR_STATUS_INVALID_ARGUMENT, msg);
}

/* Finish with a store error; service faults are logged here, once. */
static void finish_store_err(struct rpc_call *call, const struct wr_err *e) {
        int status = err_status(e);
        if (status == WR_STATUS_INTERNAL || status == WR_STATUS_UNKNOWN ||
            status == WR_STATUS_UNAVAILABLE) {
                const struct rpc_method *m = rpc_call_method(call);
                log_error("rpc %s: %s", m ? m->path : "?", e->msg);
        }
        rpc_call_finish_err(call, e);
}

/* "sb-" followed by 16 lower-case hex digits. */
static bool id_valid(const char *s) {
        if (strncmp(s, "sb-", 3) != 0 || strlen(s) != 19)
                return false;
        for (size_t i = 3; i < 19; i++)
                if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
                        return false;
        return true;
}

#define NAME_RULE                                                                                  \
        "lower-case letters, digits, '-', '_' or '.', starting with a letter or digit, at most 63"
#define ID_RULE "\"sb-\" followed by 16 lower-case hex digits"

/* Validate a sandbox key (id or name oneof); field names the oneof's
 * owner for messages. Returns 0 or finishes the call and returns -EINVAL. */
static int check_key(struct rpc_call *call, int key_case, const char *id, const char *name) {
        if (key_case == 1) {
                if (!id_valid(id)) {
                        finish_invalid(call,
                                       "id: \"%.80s\" is not a sandbox id (%s); to look "
                                       "up by name set name instead",
                                       id, ID_RULE);
                        return -EINVAL;
                }
                return 0;
        }
        if (key_case == 2) {
                if (!sbx_name_valid(name)) {
                        finish_invalid(call, "name: \"%.80s\" is not a valid sandbox name (%s)",
                                       name, NAME_RULE);
                        return -EINVAL;
                }
                return 0;
        }
        finish_invalid(call, "id or name: neither is set; set the sandbox's id or its name");
        return -EINVAL;
}

/* --- store row → warren.v1.Sandbox --- */

/* A Sandbox message and everything it points to. */
struct sandbox_msg {
        Warren__V1__Sandbox msg;
        Warren__V1__Sandbox__TagsEntry *tags;
        Warren__V1__Sandbox__TagsEntry **tag_ptrs;
        Warren__V1__Timestamp created, terminated, expires;
        Warren__V1__CreateSandboxRequest *spec; /* unpacked, owns its fields */
        Warren__V1__Resources resources;        /* with the defaults filled in */
        Warren__V1__ResourceUsage usage;
        char cpu[32], memory[32];
        char **detected; /* copies: the manager's list may change before the reply is sent */
        size_t n_detected;
};

static void sandbox_msg_free(struct sandbox_msg *m) {
        if (!m)
                return;
        free(m->tags);
        free(m->tag_ptrs);
        for (size_t i = 0; i < m->n_detected; i++)
                free(m->detected[i]);
        free(m->detected);
        if (m->spec)
                warren__v1__create_sandbox_request__free_unpacked(m->spec, NULL);
        free(m);
}

static Warren__V1__Timestamp *set_ts(Warren__V1__Timestamp *ts, int64_t ns) {
        if (ns <= 0)
                return NULL;
        warren__v1__timestamp__init(ts);
        ts->unix_nanos = ns;
        return ts;
}

/* The limits a sandbox runs with: what it was created with, the daemon's
 * defaults for what it left out. */
static void fill_resources(struct sandbox_msg *m, const Warren__V1__Resources *given) {
        Warren__V1__Resources *r = &m->resources;
        warren__v1__resources__init(r);
        if (given && given->cpu && *given->cpu)
                r->cpu = given->cpu;
        else {
                snprintf(m->cpu, sizeof(m->cpu), "%u", RT_DEFAULT_CPU / 1000);
                r->cpu = m->cpu;
        }
        if (given && given->memory && *given->memory)
                r->memory = given->memory;
        else {
                snprintf(m->memory, sizeof(m->memory), "%lluMi",
                         (unsigned long long) (RT_DEFAULT_MEMORY >> 20));
                r->memory = m->memory;
        }
        r->pids = given && given->pids ? given->pids : RT_DEFAULT_PIDS;
        if (given && given->disk)
                r->disk = given->disk;
        m->msg.resources = r;
}

/* Build the message for sb (with live usage when manager is given and it
 * runs). Strings point into sb, which must outlive it. */
static struct sandbox_msg *sandbox_msg_new(const struct store_sandbox *sb,
                                           struct sbx_manager *manager) {
        struct sandbox_msg *m = calloc(1, sizeof(*m));
        if (!m)
                return NULL;
        Warren__V1__Sandbox *s = &m->msg;
        warren__v1__sandbox__init(s);
        s->id = sb->id;
        s->name = sb->name ? sb->name : (char *) "";
        s->status = (Warren__V1__SandboxStatus) sb->status;
        if (manager && sb->status == STORE_SANDBOX_RUNNING && sbx_paused(manager, sb->id) == 1)
                s->status = WARREN__V1__SANDBOX_STATUS__SANDBOX_STATUS_PAUSED;
        s->status_message = sb->status_message;
        s->image_id = sb->image_id;
        s->image_ref = sb->image_ref;
        s->environment = sb->environment;
        s->created_at = set_ts(&m->created, sb->created_ns);
        s->terminated_at = set_ts(&m->terminated, sb->terminated_ns);
        s->expires_at = set_ts(&m->expires, sb->expires_ns);
        if (sb->n_tags > 0) {
                m->tags = calloc(sb->n_tags, sizeof(*m->tags));
                m->tag_ptrs = calloc(sb->n_tags, sizeof(*m->tag_ptrs));
                if (!m->tags || !m->tag_ptrs) {
                        sandbox_msg_free(m);
                        return NULL;
                }
                for (size_t i = 0; i < sb->n_tags; i++) {
                        warren__v1__sandbox__tags_entry__init(&m->tags[i]);
                        m->tags[i].key = sb->tags[i].key;
                        m->tags[i].value = sb->tags[i].value;
                        m->tag_ptrs[i] = &m->tags[i];
                }
                s->n_tags = sb->n_tags;
                s->tags = m->tag_ptrs;
        }
        /* What the sandbox was created with. */
        if (sb->spec && sb->spec_len > 0) {
                m->spec = warren__v1__create_sandbox_request__unpack(NULL, sb->spec_len, sb->spec);
                if (m->spec) {
                        s->resources = m->spec->resources;
                        s->workdir = m->spec->workdir;
                        s->n_entrypoint = m->spec->n_entrypoint;
                        s->entrypoint = m->spec->entrypoint;
                        s->n_volumes = m->spec->n_volumes;
                        s->volumes = m->spec->volumes;
                        s->compute_class = m->spec->compute_class;
                } else
                        log_warn("sandbox %s: stored spec does not decode; answering without it",
                                 sb->id);
        }
        fill_resources(m, m->spec ? m->spec->resources : NULL);
        /* live: what the self-check proved; ended: it ran (a create whose
         * check failed ended FAILED without running) */
        int enf = manager ? sbx_egress_enforced(manager, sb->id) : -ENOENT;
        s->egress_enforced = enf >= 0 ? enf == 1
                                      : m->spec && m->spec->network_policy &&
                                                sb->status == STORE_SANDBOX_TERMINATED;
        const char *const *det = NULL;
        size_t n_det = 0;
        if (manager && sbx_detected_resources(manager, sb->id, &det, &n_det) >= 0 && n_det &&
            (m->detected = calloc(n_det, sizeof(*m->detected)))) {
                for (size_t i = 0; i < n_det; i++)
                        if ((m->detected[m->n_detected] = strdup(det[i])))
                                m->n_detected++;
                s->detected_resources = m->detected;
                s->n_detected_resources = m->n_detected;
        }
        warren__v1__resource_usage__init(&m->usage);
        struct rt_usage u = {0};
        if (manager && sb->status == STORE_SANDBOX_RUNNING && sbx_usage(manager, sb->id, &u) >= 0) {
                m->usage.cpu_seconds = u.cpu_seconds;
                m->usage.memory_bytes = u.memory_bytes;
                m->usage.memory_peak_bytes = u.memory_peak_bytes;
                m->usage.pids = u.pids;
                s->usage = &m->usage;
        }
        return m;
}

/* --- ListSandboxes --- */

static void list_sandboxes(struct rpc_call *call, const ProtobufCMessage *msg) {
        const Warren__V1__ListSandboxesRequest *req = (const void *) msg;
        struct api_ctx *ctx = rpc_call_server_ctx(call);

        _cleanup_free_ int *statuses = NULL;
        if (req->n_statuses > 0) {
                statuses = calloc(req->n_statuses, sizeof(*statuses));
                if (!statuses) {
                        rpc_call_finish(call, WR_STATUS_RESOURCE_EXHAUSTED, "out of memory");
                        return;
                }
        }
        for (size_t i = 0; i < req->n_statuses; i++) {
                int st = (int) req->statuses[i];
                if (st < STORE_SANDBOX_PENDING || st > STORE_SANDBOX_FAILED) {
                        finish_invalid(call,
                                       "statuses[%zu]: %d is not a sandbox status; use "
                                       "PENDING, RUNNING, TERMINATING, TERMINATED or FAILED "
                                       "(paused sandboxes are listed under RUNNING)",
                                       i, st);
                        return;
                }
                statuses[i] = st;
        }
        if (*req->name && !sbx_name_valid(req->name)) {
                finish_invalid(call, "name: \"%.80s\" is not a valid sandbox name (%s)", req->name,
                               NAME_RULE);
                return;
        }
        _cleanup_free_ struct store_tag *tags = NULL;
        if (req->n_tags > 0) {
                tags = calloc(req->n_tags, sizeof(*tags));
                if (!tags) {
                        rpc_call_finish(call, WR_STATUS_RESOURCE_EXHAUSTED, "out of memory");
                        return;
                }
        }
        for (size_t i = 0; i < req->n_tags; i++) {
                if (!*req->tags[i]->key) {
                        finish_invalid(call, "tags: a tag filter has an empty key; give every "
                                             "tag a key");
                        return;
                }
                tags[i].key = req->tags[i]->key;
                tags[i].value = req->tags[i]->value;
        }
        size_t offset = 0;
        if (*req->page_token) {
                char *end = NULL;
                errno = 0;
                unsigned long long v = strtoull(req->page_token, &end, 10);
                if (errno || !end || *end || v > INT32_MAX || req->page_token[0] == '-') {
                        finish_invalid(call,
                                       "page_token: \"%.40s\" was not returned by "
                                       "ListSandboxes; omit it to start from the first "
                                       "page",
                                       req->page_token);
                        return;
                }
                offset = (size_t) v;
        }
        size_t page = req->page_size == 0 ? PAGE_SIZE_MAX : MIN(req->page_size, PAGE_SIZE_MAX);

        struct store_sandbox_filter f = {
                .environment = api_caller_env(call),
                .statuses = statuses,
                .n_statuses = req->n_statuses,
                .name = req->name,
                .tags = tags,
                .n_tags = req->n_tags,
                .offset = offset,
                .limit = page + 1, /* one more tells whether another page exists */
        };
        if (req->n_statuses == 0)
                f.hide_ended_before_ns = store_now_ns() - LIST_RETENTION_NS;

        struct wr_err e = {0};
        struct store_sandbox *rows = NULL;
        size_t n = 0;
        int r = store_sandbox_list(ctx->store, &f, &rows, &n, &e);
        if (r < 0) {
                err_prefix(&e, r, "list sandboxes");
                finish_store_err(call, &e);
                return;
        }
        bool more = n > page;
        size_t shown = MIN(n, page);
        Warren__V1__Sandbox **ptrs = shown ? calloc(shown, sizeof(*ptrs)) : NULL;
        struct sandbox_msg **msgs = shown ? calloc(shown, sizeof(*msgs)) : NULL;
        if (shown && (!ptrs || !msgs)) {
                rpc_call_finish(call, WR_STATUS_RESOURCE_EXHAUSTED, "out of memory");
                goto out;
        }
        for (size_t i = 0; i < shown; i++) {
                msgs[i] = sandbox_msg_new(&rows[i], ctx->sandboxes);
                if (!msgs[i]) {
                        rpc_call_finish(call, WR_STATUS_RESOURCE_EXHAUSTED, "out of memory");
                        goto out;
                }
                ptrs[i] = &msgs[i]->msg;
        }
        char next[32] = "";
        if (more)
                snprintf(next, sizeof(next), "%zu", offset + page);
        Warren__V1__ListSandboxesResponse resp = WARREN__V1__LIST_SANDBOXES_RESPONSE__INIT;
        resp.n_sandboxes = shown;
        resp.sandboxes = ptrs;
        resp.next_page_token = next;
        rpc_call_reply(call, &resp.base);
out:
        for (size_t i = 0; msgs && i < shown; i++)
                sandbox_msg_free(msgs[i]);
        free(msgs);
        free(ptrs);
        store_sandbox_list_free(rows, n);
}

/* --- GetSandbox --- */

static void get_sandbox(struct rpc_call *call, const ProtobufCMessage *msg) {
        const Warren__V1__GetSandboxRequest *req = (const void *) msg;
        struct api_ctx *ctx = rpc_call_server_ctx(call);
        const char *id = req->key_case == WARREN__V1__GET_SANDBOX_REQUEST__KEY_ID ? req->id : "";
        const char *name =
                req->key_case == WARREN__V1__GET_SANDBOX_REQUEST__KEY_NAME ? req->name : "";
        if (check_key(call, (int) req->key_case, id, name) < 0)
                return;

        struct wr_err e = {0};
        struct store_sandbox sb = {0};
        if (api_own_sandbox(call, *id ? id : name, &sb, &e) < 0) {
                finish_store_err(call, &e);
                return;
        }
        struct sandbox_msg *m = sandbox_msg_new(&sb, ctx->sandboxes);
        if (!m)
                rpc_call_finish(call, WR_STATUS_RESOURCE_EXHAUSTED, "out of memory");
        else
                rpc_call_reply(call, &m->msg.base);
        sandbox_msg_free(m);
        store_sandbox_clear(&sb);
}

/* --- CreateSandbox / TerminateSandbox --- */

/* Reply with the sandbox's current row (and usage while it runs). */
static void reply_sandbox(struct rpc_call *call, struct store_sandbox *sb) {
        struct api_ctx *ctx = rpc_call_server_ctx(call);
        struct sandbox_msg *m = sandbox_msg_new(sb, ctx->sandboxes);
        if (!m) {
                rpc_call_finish(call, WR_STATUS_RESOURCE_EXHAUSTED, "out of memory");
                return;
        }
        rpc_call_reply(call, &m->msg.base);
        sandbox_msg_free(m);
}

static bool shutting_down(struct rpc_call *call) {
        struct api_ctx *ctx = rpc_call_server_ctx(call);
        if (ctx->sandboxes)
                return false;
        rpc_call_finish(call, WR_STATUS_UNAVAILABLE, "warrend is shutting down; retry shortly");
        return true;
}

/* A create in flight: the spec, until its image is there (an on-demand
 * pull runs on the loop meanwhile). The call is held until then. */
struct create_op {
        struct rpc_call *call;
        struct sbx_spec *spec;
        struct img_info *img; /* once resolved: waiting for admission */
};

static void create_op_free(struct create_op *op) {
        if (!op)
                return;
        if (op->call)
                rpc_call_unref(op->call);
        sbx_spec_free(op->spec);
        img_info_free(op->img);
        free(op);
}
DEFINE_TRIVIAL_CLEANUP_FUNC(struct create_op *, create_op_free);

/* Admitted (admission.c): create the sandbox and answer. */
static void create_admitted(void *userdata, bool cancelled) {
        _cleanup_(create_op_freep) struct create_op *op = userdata;
        struct rpc_call *call = op->call;
        if (rpc_call_is_done(call))
                return; /* the caller went away while it waited */
        if (cancelled || shutting_down(call)) {
                if (!rpc_call_is_done(call))
                        rpc_call_finish(call, WR_STATUS_UNAVAILABLE,
                                        "warrend is shutting down; retry shortly");
                return;
        }
        struct api_ctx *ctx = rpc_call_server_ctx(call);
        struct wr_err e = {0};
        struct store_sandbox sb = {0};
        /* again: the creates queued before this one have run meanwhile */
        int r = api_quota_check_sandbox(call, op->spec->limits.cpu_millicores / 1000.0,
                                        (int64_t) op->spec->limits.memory_bytes, &e);
        if (r >= 0)
                r = sbx_create(ctx->sandboxes, op->spec, op->img, &sb, &e);
        if (r < 0) {
                finish_store_err(call, &e);
                return;
        }
        reply_sandbox(call, &sb);
        store_sandbox_clear(&sb);
}

/* The image is there: wait for the environment's turn (admission.c).
 * Takes op (and img, now op's). */
static void create_with_image(struct create_op *op, struct img_info *img) {
        struct rpc_call *call = op->call;
        struct api_ctx *ctx = rpc_call_server_ctx(call);
        op->img = img;
        struct wr_err e = {0};
        if (api_admit(ctx, api_caller_env(call), create_admitted, op, &e) < 0) {
                finish_store_err(call, &e);
                create_op_free(op);
        }
}

/* The on-demand pull ended: create, or report the pull's error (its
 * status is already the right one: NOT_FOUND, UNAVAILABLE,
 * UNAUTHENTICATED, DATA_LOSS ...). */
static void create_after_pull(int r, struct img_info *img, const struct wr_err *e, void *userdata) {
        _cleanup_(create_op_freep) struct create_op *op = userdata;
        if (rpc_call_is_done(op->call)) {
                img_info_free(img);
                return;
        }
        if (r < 0) {
                struct wr_err pe = *e;
                err_prefix(&pe, r, "create sandbox: pull");
                finish_store_err(op->call, &pe);
        } else if (!shutting_down(op->call)) {
                create_with_image(TAKE_PTR(op), img);
                return;
        }
        img_info_free(img);
}

/* The K8S class answered a create. */
static void create_k8s_done(int r, const struct store_sandbox *row, const struct wr_err *e,
                            void *userdata) {
        struct rpc_call *call = userdata;
        if (!rpc_call_is_done(call)) {
                if (r < 0)
                        finish_store_err(call, e);
                else
                        reply_sandbox(call, (struct store_sandbox *) row);
        }
        rpc_call_unref(call);
}

/* compute_class K8S: a Pod on the configured cluster (k8s/k8s.h); the
 * cluster pulls the image, so nothing is resolved here. */
static void create_k8s(struct rpc_call *call, const struct sbx_spec *spec) {
        struct api_ctx *ctx = rpc_call_server_ctx(call);
        struct wr_err e = {0};
        if (!ctx->k8s) {
                rpc_call_finish(call, WR_STATUS_FAILED_PRECONDITION,
                                "compute_class K8S: this warrend has no Kubernetes cluster "
                                "configured; start it with --k8s-kubeconfig FILE (and "
                                "--k8s-namespace NS), see docs/k8s.md");
                return;
        }
        /* an image this warrend built or imported exists on this host only */
        struct img_info *local = NULL;
        if (ctx->images && spec->image_ref &&
            img_store_resolve(ctx->images, spec->image_ref, &local, NULL) == 0 && local->source &&
            strcmp(local->source, "pull") != 0) {
                struct wr_err le = {0};
                err_setx(&le, -EOPNOTSUPP, WR_STATUS_FAILED_PRECONDITION, WR_FAULT_CLIENT,
                         "image: %s was %s on this warrend's host and the cluster cannot pull "
                         "it; push it to a registry the cluster reaches and use that reference "
                         "(--k8s-registry is not built yet)",
                         spec->image_ref, !strcmp(local->source, "build") ? "built" : "imported");
                img_info_free(local);
                finish_store_err(call, &le);
                return;
        }
        img_info_free(local);
        rpc_call_ref(call);
        if (k8s_create(ctx->k8s, spec, create_k8s_done, call, &e) < 0) {
                rpc_call_unref(call);
                finish_store_err(call, &e);
        }
}

static void create_sandbox(struct rpc_call *call, const ProtobufCMessage *msg) {
        const Warren__V1__CreateSandboxRequest *req = (const void *) msg;
        struct api_ctx *ctx = rpc_call_server_ctx(call);
        struct wr_err e = {0};
        _cleanup_(create_op_freep) struct create_op *op = calloc(1, sizeof(*op));
        if (!op) {
                rpc_call_finish(call, WR_STATUS_RESOURCE_EXHAUSTED, "out of memory");
                return;
        }
        int r = api_sandbox_spec(ctx->store, ctx->volumes, api_caller_env(call), req, &op->spec,
                                 &e);
        if (r < 0) { /* the message names the field */
                finish_store_err(call, &e);
                return;
        }
        if (shutting_down(call))
                return;
        if (api_quota_check_sandbox(call, op->spec->limits.cpu_millicores / 1000.0,
                                    (int64_t) op->spec->limits.memory_bytes, &e) < 0) {
                finish_store_err(call, &e);
                return;
        }
        if (req->compute_class == WARREN__V1__COMPUTE_CLASS__COMPUTE_CLASS_K8S) {
                create_k8s(call, op->spec);
                return;
        }
        if (!ctx->images) {
                rpc_call_finish(call, WR_STATUS_FAILED_PRECONDITION,
                                "create sandbox: the image store is unavailable");
                return;
        }
        /* An image not stored yet is pulled first (never the daemon's
         * default image: that one is built or imported locally). */
        const char *ref = sbx_image_ref(ctx->sandboxes, op->spec);
        if (api_image_hidden(call, ref)) { /* another environment's */
                rpc_call_finish(call, WR_STATUS_NOT_FOUND, "create sandbox: image not found");
                return;
        }
        unsigned flags = sbx_image_is_default(ctx->sandboxes, ref) ? IMG_RESOLVE_NO_PULL : 0;
        struct img_info *img = NULL;
        op->call = rpc_call_ref(call);
        r = img_resolve(ctx->images, ctx->loop, ref, flags, create_after_pull, op, &img, NULL, &e);
        if (r < 0) {
                err_prefix(&e, r, "create sandbox");
                finish_store_err(call, &e);
                return;
        }
        if (r == 0) { /* pulling: create_after_pull owns op now */
                TAKE_PTR(op);
                return;
        }
        create_with_image(TAKE_PTR(op), img);
}

struct terminate_op {
        struct rpc_call *call;
        char *id;
};

static void terminate_done(int r, const struct wr_err *e, void *userdata) {
        struct terminate_op *op = userdata;
        struct api_ctx *ctx = rpc_call_server_ctx(op->call);
        if (!rpc_call_is_done(op->call)) {
                struct store_sandbox sb = {0};
                struct wr_err le = {0};
                if (r < 0)
                        finish_store_err(op->call, e);
                else if (store_sandbox_load(ctx->store, op->id, &sb, &le) < 0)
                        finish_store_err(op->call, &le);
                else
                        reply_sandbox(op->call, &sb);
                store_sandbox_clear(&sb);
        }
        rpc_call_unref(op->call);
        free(op->id);
        free(op);
}

/* --- PauseSandbox / ResumeSandbox --- */

static void set_paused(struct rpc_call *call, const char *id, const char *name, int key_case,
                       bool on) {
        if (check_key(call, key_case, id, name) < 0 || shutting_down(call))
                return;
        struct api_ctx *ctx = rpc_call_server_ctx(call);
        struct wr_err e = {0};
        char own[32], sid[32];
        if (api_own_sandbox_id(call, *id ? id : name, own, sizeof(own), &e) < 0 ||
            sbx_set_paused(ctx->sandboxes, own, on, sid, &e) < 0) {
                finish_store_err(call, &e);
                return;
        }
        struct store_sandbox sb = {0};
        if (store_sandbox_load(ctx->store, sid, &sb, &e) < 0) {
                finish_store_err(call, &e);
                return;
        }
        struct sandbox_msg *m = sandbox_msg_new(&sb, ctx->sandboxes);
        if (!m)
                rpc_call_finish(call, WR_STATUS_RESOURCE_EXHAUSTED, "out of memory");
        else
                rpc_call_reply(call, &m->msg.base);
        sandbox_msg_free(m);
        store_sandbox_clear(&sb);
}

static void pause_sandbox(struct rpc_call *call, const ProtobufCMessage *msg) {
        const Warren__V1__PauseSandboxRequest *req = (const void *) msg;
        bool by_id = req->key_case == WARREN__V1__PAUSE_SANDBOX_REQUEST__KEY_ID;
        bool by_name = req->key_case == WARREN__V1__PAUSE_SANDBOX_REQUEST__KEY_NAME;
        set_paused(call, by_id ? req->id : "", by_name ? req->name : "", (int) req->key_case, true);
}

static void resume_sandbox(struct rpc_call *call, const ProtobufCMessage *msg) {
        const Warren__V1__ResumeSandboxRequest *req = (const void *) msg;
        bool by_id = req->key_case == WARREN__V1__RESUME_SANDBOX_REQUEST__KEY_ID;
        bool by_name = req->key_case == WARREN__V1__RESUME_SANDBOX_REQUEST__KEY_NAME;
        set_paused(call, by_id ? req->id : "", by_name ? req->name : "", (int) req->key_case,
                   false);
}

/* --- SnapshotSandbox / ForkSandbox --- */

struct snap_op {
        struct rpc_call *call;
        char *src;      /* the sandbox's id */
        unsigned count; /* fork: how many; 0 = a plain snapshot */
        char *image_id; /* fork: the snapshot, while the copies wait for admission */
};

static void snap_op_free(struct snap_op *op) {
        if (!op)
                return;
        rpc_call_unref(op->call);
        free(op->src);
        free(op->image_id);
        free(op);
}

/* Create one sandbox from img as the original (its stored request) was. */
static int fork_one(struct rpc_call *call, const struct store_sandbox *orig,
                    const struct img_info *img, struct store_sandbox *ret, struct wr_err *e) {
        struct api_ctx *ctx = rpc_call_server_ctx(call);
        Warren__V1__CreateSandboxRequest *req =
                orig->spec && orig->spec_len ? warren__v1__create_sandbox_request__unpack(
                                                       NULL, orig->spec_len, orig->spec)
                                             : NULL;
        Warren__V1__CreateSandboxRequest empty = WARREN__V1__CREATE_SANDBOX_REQUEST__INIT;
        Warren__V1__ImageSpec image = WARREN__V1__IMAGE_SPEC__INIT;
        image.kind_case = WARREN__V1__IMAGE_SPEC__KIND_REF;
        image.ref = img->id;
        Warren__V1__CreateSandboxRequest *use = req ? req : &empty;
        Warren__V1__ImageSpec *old_image = use->image;
        char *old_name = use->name;
        use->image = &image;
        use->name = (char *) "";
        struct sbx_spec *spec = NULL;
        int r = api_sandbox_spec(ctx->store, ctx->volumes, orig->environment, use, &spec, e);
        use->image = old_image;
        use->name = old_name;
        if (req)
                warren__v1__create_sandbox_request__free_unpacked(req, NULL);
        if (r < 0)
                return r;
        r = api_quota_check_sandbox(call, spec->limits.cpu_millicores / 1000.0,
                                    (int64_t) spec->limits.memory_bytes, e);
        if (r >= 0)
                r = sbx_create(ctx->sandboxes, spec, img, ret, e);
        sbx_spec_free(spec);
        return r;
}

/* The fork's copies, admitted (admission.c: forks take their turn with
 * creates): made from the snapshot, all or nothing. */
static void fork_admitted(void *userdata, bool cancelled) {
        struct snap_op *op = userdata;
        struct rpc_call *call = op->call;
        struct api_ctx *ctx = rpc_call_server_ctx(call);
        struct img_info *img = NULL;
        struct store_sandbox orig = {0};
        struct wr_err le = {0};
        int r;
        if (rpc_call_is_done(call))
                goto out;
        if (cancelled || shutting_down(call)) {
                if (!rpc_call_is_done(call))
                        rpc_call_finish(call, WR_STATUS_UNAVAILABLE,
                                        "warrend is shutting down; retry shortly");
                goto out;
        }
        if ((r = img_store_resolve(ctx->images, op->image_id, &img, &le)) < 0 ||
            (r = store_sandbox_load(ctx->store, op->src, &orig, &le)) < 0) {
                finish_store_err(call, &le);
                goto out;
        }
        Warren__V1__Image msg;
        Warren__V1__ImageConfig cfg;
        Warren__V1__Timestamp ts;
        api_image_to_proto(img, &msg, &cfg, &ts);
        struct store_sandbox made[16] = {{0}};
        struct sandbox_msg *msgs[16] = {0};
        Warren__V1__Sandbox *ptrs[16];
        size_t n = 0;
        struct wr_err ce = {0};
        r = 0;
        for (; n < op->count; n++) {
                if ((r = fork_one(call, &orig, img, &made[n], &ce)) < 0)
                        break;
                if (!(msgs[n] = sandbox_msg_new(&made[n], ctx->sandboxes))) {
                        n++;
                        r = err_set(&ce, -ENOMEM, "out of memory");
                        break;
                }
                ptrs[n] = &msgs[n]->msg;
        }
        if (r < 0) {
                /* all or nothing: the ones made go again */
                for (size_t i = 0; i < n; i++)
                        (void) sbx_terminate(ctx->sandboxes, made[i].id, 0, NULL, NULL, NULL);
                err_prefix(&ce, r, "fork sandbox %s", op->src);
                finish_store_err(call, &ce);
        } else {
                Warren__V1__ForkSandboxResponse resp = WARREN__V1__FORK_SANDBOX_RESPONSE__INIT;
                resp.image = &msg;
                resp.n_sandboxes = n;
                resp.sandboxes = ptrs;
                rpc_call_reply(call, &resp.base);
        }
        for (size_t i = 0; i < n; i++) {
                sandbox_msg_free(msgs[i]);
                store_sandbox_clear(&made[i]);
        }
out:
        store_sandbox_clear(&orig);
        img_info_free(img);
        snap_op_free(op);
}

static void snapshot_done(int r, const struct img_info *img, const struct wr_err *e,
                          void *userdata) {
        struct snap_op *op = userdata;
        struct rpc_call *call = op->call;
        struct api_ctx *ctx = rpc_call_server_ctx(call);
        if (rpc_call_is_done(call))
                goto out;
        if (r < 0) {
                finish_store_err(call, e);
                goto out;
        }
        api_image_record(call, img->id);
        if (!op->count) {
                Warren__V1__Image msg;
                Warren__V1__ImageConfig cfg;
                Warren__V1__Timestamp ts;
                api_image_to_proto(img, &msg, &cfg, &ts);
                rpc_call_reply(call, &msg.base);
                goto out;
        }
        if (shutting_down(call))
                goto out;
        struct wr_err ae = {0};
        if (!(op->image_id = strdup(img->id))) {
                rpc_call_finish(call, WR_STATUS_RESOURCE_EXHAUSTED, "out of memory");
                goto out;
        }
        if (api_admit(ctx, api_caller_env(call), fork_admitted, op, &ae) < 0) {
                finish_store_err(call, &ae);
                goto out;
        }
        return; /* fork_admitted owns op */
out:
        snap_op_free(op);
}

static void start_snapshot(struct rpc_call *call, const char *id, const char *name, int key_case,
                           const char *image_name, unsigned count) {
        if (check_key(call, key_case, id, name) < 0 || shutting_down(call))
                return;
        struct api_ctx *ctx = rpc_call_server_ctx(call);
        struct wr_err e = {0};
        struct store_sandbox sb = {0};
        int r = api_own_sandbox(call, *id ? id : name, &sb, &e);
        if (r < 0) {
                finish_store_err(call, &e);
                return;
        }
        struct snap_op *op = calloc(1, sizeof(*op));
        if (!op || !(op->src = strdup(sb.id))) {
                free(op);
                store_sandbox_clear(&sb);
                rpc_call_finish(call, WR_STATUS_RESOURCE_EXHAUSTED, "out of memory");
                return;
        }
        store_sandbox_clear(&sb);
        op->count = count;
        op->call = rpc_call_ref(call);
        if ((r = sbx_snapshot(ctx->sandboxes, op->src, image_name, snapshot_done, op, &e)) < 0) {
                finish_store_err(call, &e);
                snap_op_free(op);
        }
}

static void snapshot_sandbox(struct rpc_call *call, const ProtobufCMessage *msg) {
        const Warren__V1__SnapshotSandboxRequest *req = (const void *) msg;
        bool by_id = req->key_case == WARREN__V1__SNAPSHOT_SANDBOX_REQUEST__KEY_ID;
        bool by_name = req->key_case == WARREN__V1__SNAPSHOT_SANDBOX_REQUEST__KEY_NAME;
        if (*req->image_name) {
                char norm[384];
                struct wr_err e = {0};
                if (img_name_normalize(req->image_name, norm, sizeof(norm), &e) < 0) {
                        err_prefix(&e, -EINVAL, "image_name");
                        finish_store_err(call, &e);
                        return;
                }
        }
        struct wr_err ne = {0};
        if (api_image_name_check(call, req->image_name, &ne) < 0) {
                finish_store_err(call, &ne);
                return;
        }
        start_snapshot(call, by_id ? req->id : "", by_name ? req->name : "", (int) req->key_case,
                       req->image_name, 0);
}

static void fork_sandbox(struct rpc_call *call, const ProtobufCMessage *msg) {
        const Warren__V1__ForkSandboxRequest *req = (const void *) msg;
        bool by_id = req->key_case == WARREN__V1__FORK_SANDBOX_REQUEST__KEY_ID;
        bool by_name = req->key_case == WARREN__V1__FORK_SANDBOX_REQUEST__KEY_NAME;
        if (req->count > 16) {
                finish_invalid(call, "count: %u is more than 16 forks at once", req->count);
                return;
        }
        start_snapshot(call, by_id ? req->id : "", by_name ? req->name : "", (int) req->key_case,
                       NULL, req->count ? req->count : 1);
}

static void terminate_sandbox(struct rpc_call *call, const ProtobufCMessage *msg) {
        const Warren__V1__TerminateSandboxRequest *req = (const void *) msg;
        const char *id =
                req->key_case == WARREN__V1__TERMINATE_SANDBOX_REQUEST__KEY_ID ? req->id : "";
        const char *name =
                req->key_case == WARREN__V1__TERMINATE_SANDBOX_REQUEST__KEY_NAME ? req->name : "";
        if (check_key(call, (int) req->key_case, id, name) < 0)
                return;
        if (req->grace_period_seconds < 0) {
                finish_invalid(call,
                               "grace_period_seconds: %g is negative; use 0 for the "
                               "default (10 s) or a positive number of seconds",
                               req->grace_period_seconds);
                return;
        }
        if (shutting_down(call))
                return;
        struct api_ctx *ctx = rpc_call_server_ctx(call);
        struct wr_err e = {0};
        struct store_sandbox sb = {0};
        int r = api_own_sandbox(call, *id ? id : name, &sb, &e);
        if (r < 0) {
                finish_store_err(call, &e);
                return;
        }
        struct terminate_op *op = calloc(1, sizeof(*op));
        if (!op || !(op->id = strdup(sb.id))) {
                free(op);
                store_sandbox_clear(&sb);
                rpc_call_finish(call, WR_STATUS_RESOURCE_EXHAUSTED, "out of memory");
                return;
        }
        bool k8s = k8s_row_is_k8s(&sb);
        store_sandbox_clear(&sb);
        op->call = rpc_call_ref(call);
        double grace = req->grace_period_seconds > 0 ? req->grace_period_seconds : 10.0;
        if (k8s && !ctx->k8s)
                r = err_setx(&e, -EOPNOTSUPP, WR_STATUS_FAILED_PRECONDITION, WR_FAULT_CLIENT,
                             "sandbox %s is a Pod (compute_class K8S) and this warrend has no "
                             "cluster configured: start it with --k8s-kubeconfig FILE",
                             op->id);
        else if (k8s)
                r = k8s_terminate(ctx->k8s, op->id, (uint64_t) (grace * 1000.0), terminate_done, op,
                                  &e);
        else
                r = sbx_terminate(ctx->sandboxes, op->id, (uint64_t) (grace * 1000.0),
                                  terminate_done, op, &e);
        if (r < 0) {
                finish_store_err(call, &e);
                rpc_call_unref(call);
                free(op->id);
                free(op);
        }
}

static void addr_port(const struct egress_addr *a, uint16_t port, char *buf, size_t size) {
        char t[INET6_ADDRSTRLEN] = "";
        buf[0] = 0;
        if (a->family == 4 && inet_ntop(AF_INET, a->bytes, t, sizeof(t)))
                snprintf(buf, size, "%s:%u", t, port);
        else if (a->family == 6 && inet_ntop(AF_INET6, a->bytes, t, sizeof(t)))
                snprintf(buf, size, "[%s]:%u", t, port);
}

struct event_msg {
        Warren__V1__NetworkEvent msg;
        Warren__V1__Timestamp at;
        char dialed[64], original[64];
};

static void list_network_events(struct rpc_call *call, const ProtobufCMessage *msg) {
        const Warren__V1__ListNetworkEventsRequest *req = (const void *) msg;
        struct api_ctx *ctx = rpc_call_server_ctx(call);
        if (!*req->sandbox) {
                finish_invalid(call, "sandbox: empty; give the sandbox's id or name");
                return;
        }
        struct wr_err e = {0};
        struct store_sandbox sb = {0};
        if (api_own_sandbox(call, req->sandbox, &sb, &e) < 0) {
                finish_store_err(call, &e);
                return;
        }
        struct sbx_egress_event *evs = NULL;
        size_t n = 0;
        uint64_t last = req->after_seq;
        if (ctx->sandboxes && sbx_network_events(ctx->sandboxes, sb.id, req->after_seq, req->limit,
                                                 &evs, &n, &last) < 0)
                n = 0;
        store_sandbox_clear(&sb);
        Warren__V1__ListNetworkEventsResponse resp = WARREN__V1__LIST_NETWORK_EVENTS_RESPONSE__INIT;
        struct event_msg *em = n ? calloc(n, sizeof(*em)) : NULL;
        Warren__V1__NetworkEvent **ptrs = n ? calloc(n, sizeof(*ptrs)) : NULL;
        if (n && (!em || !ptrs)) {
                free(em);
                free(ptrs);
                rpc_call_finish(call, WR_STATUS_RESOURCE_EXHAUSTED, "out of memory");
                return;
        }
        for (size_t i = 0; i < n; i++) {
                struct sbx_egress_event *x = &evs[i];
                struct egress_event *ev = &x->ev;
                Warren__V1__NetworkEvent *o = &em[i].msg;
                warren__v1__network_event__init(o);
                o->at = set_ts(&em[i].at, (int64_t) ev->time_ns);
                o->host = ev->host;
                o->sni = ev->sni;
                o->rule = ev->rule;
                o->reason = ev->reason;
                o->verdict = ev->verdict ? (char *) "allow" : (char *) "deny";
                o->kind = x->probe                       ? (char *) "probe"
                          : ev->kind == EGRESS_EVENT_DNS ? (char *) "dns"
                                                         : (char *) "tcp";
                o->bytes_out = ev->bytes_up;
                o->bytes_in = ev->bytes_down;
                o->seq = x->seq;
                if (ev->kind == EGRESS_EVENT_TCP) {
                        addr_port(&ev->dialed, ev->port, em[i].original, sizeof(em[i].original));
                        if (ev->verdict)
                                snprintf(em[i].dialed, sizeof(em[i].dialed), "%s", em[i].original);
                }
                o->dialed = em[i].dialed;
                o->original_dst = em[i].original;
                ptrs[i] = o;
        }
        resp.n_events = n;
        resp.events = ptrs;
        resp.last_seq = n ? evs[n - 1].seq : (last > req->after_seq ? req->after_seq : last);
        rpc_call_reply(call, &resp.base);
        free(em);
        free(ptrs);
}

#define UNARY(name, in, out, fn)                                                                   \
        {                                                                                          \
                .path = "/warren.v1.Sandboxes/" name, .kind = RPC_UNARY,                           \
                .input = &warren__v1__##in##__descriptor,                                          \
                .output = &warren__v1__##out##__descriptor, .on_message = fn,                      \
        }

static const struct rpc_method methods[] = {
        {
                /* inline secret values: wiped with the request */
                .path = "/warren.v1.Sandboxes/CreateSandbox",
                .kind = RPC_UNARY,
                .input = &warren__v1__create_sandbox_request__descriptor,
                .output = &warren__v1__sandbox__descriptor,
                .on_message = create_sandbox,
                .sensitive = true,
        },
        UNARY("GetSandbox", get_sandbox_request, sandbox, get_sandbox),
        UNARY("ListSandboxes", list_sandboxes_request, list_sandboxes_response, list_sandboxes),
        UNARY("TerminateSandbox", terminate_sandbox_request, sandbox, terminate_sandbox),
        UNARY("PauseSandbox", pause_sandbox_request, sandbox, pause_sandbox),
        UNARY("ResumeSandbox", resume_sandbox_request, sandbox, resume_sandbox),
        UNARY("SnapshotSandbox", snapshot_sandbox_request, image, snapshot_sandbox),
        UNARY("ForkSandbox", fork_sandbox_request, fork_sandbox_response, fork_sandbox),
        UNARY("ListNetworkEvents", list_network_events_request, list_network_events_response,
              list_network_events),
};

int api_sandboxes_register(struct rpc_server *s) {
        int r = rpc_server_add_methods(s, methods, ELEMENTSOF(methods));
        r = r < 0 ? r : rpc_server_add_methods(s, &api_exec_method, 1);
        r = r < 0 ? r : rpc_server_add_methods(s, &api_tunnel_method, 1);
        r = r < 0 ? r : rpc_server_add_methods(s, api_journal_methods, 2);
        return r < 0 ? r : rpc_server_add_methods(s, &api_list_processes_method, 1);
}
