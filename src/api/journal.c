/* SPDX-License-Identifier: Apache-2.0 */
/* warren.v1.Sandboxes/GetExecChanges and RollbackExec: the change journal
 * (sandbox/journal.h) over gRPC. Requests are validated here (errors name
 * the field); each changed path becomes one ExecFileChange per kind. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "api/api-internal.h"
#include "basic/log.h"
#include "basic/macro.h"
#include "rpc/server.h"
#include "sandbox/journal.h"
#include "sandbox/sandbox.h"
#include "warren/v1/sandboxes.pb-c.h"

static const char *type_name(uint8_t t) {
        switch (t) {
        case JT_FILE:
                return "file";
        case JT_DIR:
                return "dir";
        case JT_LINK:
                return "symlink";
        default:
                return "other";
        }
}

/* The changes as protobuf: one entry per (path, kind), paths absolute. */
struct change_list {
        Warren__V1__ExecFileChange **ptrs;
        Warren__V1__ExecFileChange *msgs;
        char **paths;
        size_t n, n_paths;
};

static void change_list_free(struct change_list *l) {
        for (size_t i = 0; i < l->n_paths; i++)
                free(l->paths[i]);
        free(l->paths);
        free(l->ptrs);
        free(l->msgs);
        *l = (struct change_list){0};
}

static int change_list_make(struct change_list *l, const struct jt_change *v, size_t n) {
        static const struct {
                unsigned bit;
                Warren__V1__ExecFileChangeKind kind;
        } kinds[] = {
                {JT_CREATED, WARREN__V1__EXEC_FILE_CHANGE_KIND__EXEC_FILE_CHANGE_KIND_CREATED},
                {JT_DELETED, WARREN__V1__EXEC_FILE_CHANGE_KIND__EXEC_FILE_CHANGE_KIND_DELETED},
                {JT_MODIFIED, WARREN__V1__EXEC_FILE_CHANGE_KIND__EXEC_FILE_CHANGE_KIND_MODIFIED},
                {JT_MODE, WARREN__V1__EXEC_FILE_CHANGE_KIND__EXEC_FILE_CHANGE_KIND_MODE},
        };
        size_t total = 0;
        for (size_t i = 0; i < n; i++)
                for (size_t k = 0; k < ELEMENTSOF(kinds); k++)
                        total += (v[i].kinds & kinds[k].bit) != 0;
        l->ptrs = calloc(total ? total : 1, sizeof(*l->ptrs));
        l->msgs = calloc(total ? total : 1, sizeof(*l->msgs));
        l->paths = calloc(n ? n : 1, sizeof(*l->paths));
        if (!l->ptrs || !l->msgs || !l->paths)
                return -ENOMEM;
        for (size_t i = 0; i < n; i++) {
                size_t len = strlen(v[i].path) + 2;
                if (!(l->paths[i] = malloc(len)))
                        return -ENOMEM;
                l->n_paths++;
                snprintf(l->paths[i], len, "/%s", v[i].path);
                for (size_t k = 0; k < ELEMENTSOF(kinds); k++) {
                        if (!(v[i].kinds & kinds[k].bit))
                                continue;
                        Warren__V1__ExecFileChange *c = &l->msgs[l->n];
                        warren__v1__exec_file_change__init(c);
                        c->path = l->paths[i];
                        c->kind = kinds[k].kind;
                        c->type = (char *) type_name(kinds[k].bit == JT_DELETED ? v[i].before.type
                                                                                : v[i].after.type);
                        c->old_mode = v[i].before.mode;
                        c->new_mode = v[i].after.mode;
                        l->ptrs[l->n++] = c;
                }
        }
        return 0;
}

/* Checks the request and resolves the sandbox in the caller's environment
 * (another environment's is NOT_FOUND) into id. */
static int check_request(struct rpc_call *call, const char *sandbox, const char *exec_id, char *id,
                         size_t size) {
        if (!sandbox || !*sandbox) {
                rpc_call_finish(call, WR_STATUS_INVALID_ARGUMENT,
                                "sandbox: empty; give the sandbox's id or name");
                return -EINVAL;
        }
        if (!exec_id || !*exec_id) {
                rpc_call_finish(call, WR_STATUS_INVALID_ARGUMENT,
                                "exec_id: empty; give the exec's id (\"ex-N\", from ExecStarted)");
                return -EINVAL;
        }
        struct wr_err e = {0};
        if (api_own_sandbox_id(call, sandbox, id, size, &e) < 0) {
                rpc_call_finish_err(call, &e);
                return -ENOENT;
        }
        return 0;
}

static void reply_changes(struct rpc_call *call, const struct jt_change *v, size_t n, bool running,
                          bool complete) {
        _cleanup_(change_list_free) struct change_list l = {0};
        if (change_list_make(&l, v, n) < 0) {
                rpc_call_finish(call, WR_STATUS_RESOURCE_EXHAUSTED, "out of memory");
                return;
        }
        Warren__V1__GetExecChangesResponse resp = WARREN__V1__GET_EXEC_CHANGES_RESPONSE__INIT;
        resp.changes = l.ptrs;
        resp.n_changes = l.n;
        resp.running = running;
        resp.complete = complete;
        rpc_call_reply(call, &resp.base);
}

static void changes_done(int r, const struct jt_change *v, size_t n, bool running, bool complete,
                         const struct wr_err *e, void *userdata) {
        struct rpc_call *call = userdata;
        if (!rpc_call_is_done(call)) {
                if (r < 0)
                        rpc_call_finish_err(call, e);
                else
                        reply_changes(call, v, n, running, complete);
        }
        rpc_call_unref(call);
}

static void get_exec_changes(struct rpc_call *call, const ProtobufCMessage *msg) {
        const Warren__V1__GetExecChangesRequest *req = (const void *) msg;
        struct api_ctx *ctx = rpc_call_server_ctx(call);
        char id[32];
        if (check_request(call, req->sandbox, req->exec_id, id, sizeof(id)) < 0)
                return;
        struct wr_err e = {0};
        rpc_call_ref(call);
        if (sbx_journal_changes(ctx->sandboxes, id, req->exec_id, changes_done, call, &e) < 0) {
                rpc_call_finish_err(call, &e);
                rpc_call_unref(call);
        }
}

static void reply_restored(struct rpc_call *call, const struct jt_change *v, size_t n) {
        _cleanup_(change_list_free) struct change_list l = {0};
        if (change_list_make(&l, v, n) < 0) {
                rpc_call_finish(call, WR_STATUS_RESOURCE_EXHAUSTED, "out of memory");
                return;
        }
        Warren__V1__RollbackExecResponse resp = WARREN__V1__ROLLBACK_EXEC_RESPONSE__INIT;
        resp.restored = l.ptrs;
        resp.n_restored = l.n;
        rpc_call_reply(call, &resp.base);
}

static void rollback_done(int r, const struct jt_change *v, size_t n, const struct wr_err *e,
                          void *userdata) {
        struct rpc_call *call = userdata;
        if (!rpc_call_is_done(call)) {
                if (r < 0 && err_status(e) == WR_STATUS_INTERNAL)
                        log_error("RollbackExec: %s", e->msg);
                if (r < 0)
                        rpc_call_finish_err(call, e);
                else
                        reply_restored(call, v, n);
        }
        rpc_call_unref(call);
}

static void rollback_exec(struct rpc_call *call, const ProtobufCMessage *msg) {
        const Warren__V1__RollbackExecRequest *req = (const void *) msg;
        struct api_ctx *ctx = rpc_call_server_ctx(call);
        char id[32];
        if (check_request(call, req->sandbox, req->exec_id, id, sizeof(id)) < 0)
                return;
        struct wr_err e = {0};
        rpc_call_ref(call);
        if (sbx_journal_rollback(ctx->sandboxes, id, req->exec_id, req->force, rollback_done, call,
                                 &e) < 0) {
                rpc_call_finish_err(call, &e);
                rpc_call_unref(call);
        }
}

const struct rpc_method api_journal_methods[2] = {
        {
                .path = "/warren.v1.Sandboxes/GetExecChanges",
                .kind = RPC_UNARY,
                .input = &warren__v1__get_exec_changes_request__descriptor,
                .output = &warren__v1__get_exec_changes_response__descriptor,
                .on_message = get_exec_changes,
        },
        {
                .path = "/warren.v1.Sandboxes/RollbackExec",
                .kind = RPC_UNARY,
                .input = &warren__v1__rollback_exec_request__descriptor,
                .output = &warren__v1__rollback_exec_response__descriptor,
                .on_message = rollback_exec,
        },
};
