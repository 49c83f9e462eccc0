/* SPDX-License-Identifier: Apache-2.0 */
/* warren.v1.Sandboxes/Exec and ListProcesses: the glue between gRPC calls
 * and sandbox exec sessions (sandbox/exec.h). Requests are validated here
 * (errors name the field) and converted to the domain's structs; callbacks
 * become responses. First Exec request: start or
 * attach. Then stdin, close_stdin, signal, resize. Responses: started,
 * stdout/stderr chunks (with their offsets), gap (attach from an offset the
 * log no longer holds), exited, then OK trailers. A second client attaching
 * to the same exec takes it over: the first stream ends ABORTED.
 * Back-pressure: a full gRPC send queue pauses delivery; the session's log
 * then fills and the process blocks on its pipe; a full stdin queue pauses
 * reading requests. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/api-internal.h"
#include "api/spec.h"
#include "basic/log.h"
#include "basic/macro.h"
#include "k8s/k8s.h"
#include "sandbox/exec.h"
#include "sandbox/journal.h"
#include "sandbox/user.h"
#include "warren/v1/sandboxes.pb-c.h"

struct exec_call {
        struct rpc_call *call;
        struct sbx_exec *x;
        bool finished;
        /* a journaled start waits for the walk before it (journal.h):
         * the request, kept until then; requests are paused meanwhile */
        Warren__V1__ExecStart *pending;
        bool half_closed;
        /* start.user as looked up on a worker (sbx_exec_user_lookup),
         * before the journal's walk and the start */
        bool has_user;
        struct sbx_user user;
        char id[32];
};

static void on_started(struct sbx_exec *x, int pid, const char *exec_id, void *userdata) {
        struct exec_call *ec = userdata;
        Warren__V1__ExecStarted st = WARREN__V1__EXEC_STARTED__INIT;
        st.pid = pid;
        st.exec_id = (char *) exec_id;
        Warren__V1__ExecResponse resp = WARREN__V1__EXEC_RESPONSE__INIT;
        resp.kind_case = WARREN__V1__EXEC_RESPONSE__KIND_STARTED;
        resp.started = &st;
        rpc_call_send(ec->call, &resp.base);
}

/* Write v at p as a protobuf varint; returns its length (at most 10). */
static size_t varint_put(uint8_t *p, uint64_t v) {
        size_t n = 0;
        do {
                p[n++] = (uint8_t) ((v & 0x7f) | (v > 0x7f ? 0x80 : 0));
                v >>= 7;
        } while (v);
        return n;
}

/* ExecResponse{stdout|stderr: ExecOutput{offset, data}} with data sent
 * from the output log itself: only the field headers are written here
 * (offset first: protobuf readers take fields in any order). */
static int on_output(struct sbx_exec *x, enum sbx_stream stream, const void *data, size_t n,
                     uint64_t offset, struct sbx_output *buf, void *userdata) {
        struct exec_call *ec = userdata;
        uint8_t inner[32], head[48];
        size_t i = 0, h = 0;
        if (offset) {
                inner[i++] = 0x10; /* ExecOutput.offset = 2, varint */
                i += varint_put(inner + i, offset);
        }
        inner[i++] = 0x0a; /* ExecOutput.data = 1, length-delimited */
        i += varint_put(inner + i, n);
        /* ExecResponse.stdout = 2 / .stderr = 3, length-delimited */
        head[h++] = stream == SBX_STDOUT ? 0x12 : 0x1a;
        h += varint_put(head + h, i + n);
        memcpy(head + h, inner, i);
        h += i;
        sbx_output_hold(buf);
        int r = rpc_call_send_ref(ec->call, head, h, data, n, sbx_output_release, buf);
        return r == 1 ? 1 : 0;
}

static Warren__V1__ExitReason exit_reason_to_proto(enum sbx_exit_reason reason) {
        switch (reason) {
        case SBX_EXIT_UNSPECIFIED:
                break;
        case SBX_EXIT_EXITED:
                return WARREN__V1__EXIT_REASON__EXIT_REASON_EXITED;
        case SBX_EXIT_SIGNALED:
                return WARREN__V1__EXIT_REASON__EXIT_REASON_SIGNALED;
        case SBX_EXIT_TIMEOUT:
                return WARREN__V1__EXIT_REASON__EXIT_REASON_TIMEOUT;
        case SBX_EXIT_OOM:
                return WARREN__V1__EXIT_REASON__EXIT_REASON_OOM;
        case SBX_EXIT_SANDBOX_TERMINATED:
                return WARREN__V1__EXIT_REASON__EXIT_REASON_SANDBOX_TERMINATED;
        }
        return WARREN__V1__EXIT_REASON__EXIT_REASON_UNSPECIFIED;
}

static void on_exited(struct sbx_exec *x, int exit_code, int signo, enum sbx_exit_reason reason,
                      void *userdata) {
        struct exec_call *ec = userdata;
        Warren__V1__ExecExited ex = WARREN__V1__EXEC_EXITED__INIT;
        ex.exit_code = exit_code;
        ex.signal = signo;
        ex.reason = exit_reason_to_proto(reason);
        Warren__V1__ExecResponse resp = WARREN__V1__EXEC_RESPONSE__INIT;
        resp.kind_case = WARREN__V1__EXEC_RESPONSE__KIND_EXITED;
        resp.exited = &ex;
        rpc_call_send(ec->call, &resp.base);
        rpc_call_finish(ec->call, WR_STATUS_OK, NULL);
        ec->finished = true;
        ec->x = NULL;
        sbx_exec_release(x);
}

static void on_stdin_ready(struct sbx_exec *x, void *userdata) {
        struct exec_call *ec = userdata;
        rpc_call_resume_recv(ec->call);
}

static void on_gap(struct sbx_exec *x, uint64_t from, uint64_t to, void *userdata) {
        struct exec_call *ec = userdata;
        Warren__V1__ExecGap gap = WARREN__V1__EXEC_GAP__INIT;
        gap.from_offset = from;
        gap.to_offset = to;
        Warren__V1__ExecResponse resp = WARREN__V1__EXEC_RESPONSE__INIT;
        resp.kind_case = WARREN__V1__EXEC_RESPONSE__KIND_GAP;
        resp.gap = &gap;
        rpc_call_send(ec->call, &resp.base);
}

static void on_detached(struct sbx_exec *x, void *userdata) {
        struct exec_call *ec = userdata;
        char msg[160];
        snprintf(msg, sizeof(msg),
                 "another client attached to exec %s, or warrend is stopping (attach again "
                 "once it is back: the exec goes on)",
                 sbx_exec_id(x));
        ec->x = NULL;
        ec->finished = true;
        rpc_call_finish(ec->call, WR_STATUS_ABORTED, msg);
}

static const struct sbx_exec_callbacks exec_callbacks = {
        .on_started = on_started,
        .on_output = on_output,
        .on_exited = on_exited,
        .on_stdin_ready = on_stdin_ready,
        .on_gap = on_gap,
        .on_detached = on_detached,
};

static void fail(struct rpc_call *call, int status, const char *msg) {
        rpc_call_finish(call, status, msg);
}

static int invalid(struct wr_err *e, const char *msg) {
        return err_setx(e, -EINVAL, WR_STATUS_INVALID_ARGUMENT, WR_FAULT_CLIENT, "%s", msg);
}

void api_exec_vectors_free(struct api_exec_vectors *v) {
        /* the environment may hold secret values */
        for (char **p = v->env; p && *p; p++)
                explicit_bzero(*p, strlen(*p));
        free(v->argv);
        v->argv = v->env = NULL;
}

int api_exec_start_spec(const Warren__V1__ExecStart *start, struct sbx_exec_spec *spec,
                        struct api_exec_vectors *v, struct wr_err *e) {
        if (!start->sandbox || !*start->sandbox)
                return invalid(e, "start.sandbox: name the sandbox (id or name)");
        if (start->n_argv == 0 || !start->argv[0][0])
                return invalid(e, "start.argv: give the command to run (argv[0] non-empty)");
        if (start->timeout_secs < 0 || start->timeout_secs > 1e7)
                return err_setx(e, -EINVAL, WR_STATUS_INVALID_ARGUMENT, WR_FAULT_CLIENT,
                                "start.timeout_secs: %g is out of range (0 = none)",
                                start->timeout_secs);
        size_t strings = 0;
        for (size_t i = 0; i < start->n_env; i++) {
                const char *k = start->env[i]->key, *val = start->env[i]->value;
                if (!*k || strchr(k, '='))
                        return err_setx(e, -EINVAL, WR_STATUS_INVALID_ARGUMENT, WR_FAULT_CLIENT,
                                        "start.env: %s is not a valid variable name", k);
                strings += strlen(k) + strlen(val) + 2;
        }
        size_t n_ptrs = start->n_argv + 1 + start->n_env + 1;
        char **p = malloc(n_ptrs * sizeof(char *) + strings);
        if (!p)
                return err_set(e, -ENOMEM, "exec: out of memory");
        v->argv = p;
        memcpy(v->argv, start->argv, start->n_argv * sizeof(char *));
        v->argv[start->n_argv] = NULL;
        v->env = v->argv + start->n_argv + 1;
        char *s = (char *) (p + n_ptrs);
        for (size_t i = 0; i < start->n_env; i++) {
                v->env[i] = s;
                s = stpcpy(stpcpy(stpcpy(s, start->env[i]->key), "="), start->env[i]->value) + 1;
        }
        v->env[start->n_env] = NULL;
        *spec = (struct sbx_exec_spec){
                .sandbox = start->sandbox,
                .argv = v->argv,
                .env = v->env,
                .workdir = start->workdir,
                .user = start->user,
                .pty = start->pty,
                .detach = start->detach,
                .cols = start->window ? (uint16_t) start->window->cols : 0,
                .rows = start->window ? (uint16_t) start->window->rows : 0,
                .timeout_secs = start->timeout_secs,
        };
        return 0;
}

/* Start start in the sandbox id (the caller's own, resolved already). */
static int exec_start_now(struct api_ctx *ctx, const Warren__V1__ExecStart *start, const char *id,
                          struct exec_call *ec, struct wr_err *e) {
        _cleanup_(api_exec_vectors_free) struct api_exec_vectors v = {0};
        struct sbx_exec_spec spec;
        int r = api_exec_start_spec(start, &spec, &v, e);
        if (r < 0)
                return r;
        spec.sandbox = id;
        spec.resolved_user = ec->has_user ? &ec->user : NULL;
        return sbx_exec_start(ctx->sandboxes, &spec, &exec_callbacks, ec, &ec->x, e);
}

static void pending_free(struct exec_call *ec) {
        if (!ec->pending)
                return;
        /* env values may be secrets */
        for (size_t i = 0; i < ec->pending->n_env; i++)
                if (ec->pending->env[i]->value)
                        explicit_bzero(ec->pending->env[i]->value,
                                       strlen(ec->pending->env[i]->value));
        warren__v1__exec_start__free_unpacked(TAKE_PTR(ec->pending), NULL);
}

/* The walk before a journaled exec is done: start it now. */
static void journal_begun(int r, uint64_t token, const char *sandbox_id, const struct wr_err *je,
                          void *userdata) {
        struct exec_call *ec = userdata;
        struct rpc_call *call = ec->call;
        struct api_ctx *ctx = rpc_call_server_ctx(call);
        struct wr_err e = {0};
        if (r == 0 && rpc_call_is_done(call))
                sbx_journal_cancel(ctx->sandboxes, sandbox_id, token);
        else if (r < 0) {
                ec->finished = true;
                rpc_call_finish_err(call, je);
        } else if ((r = exec_start_now(ctx, ec->pending, sandbox_id, ec, &e)) < 0) {
                sbx_journal_cancel(ctx->sandboxes, sandbox_id, token);
                ec->finished = true;
                if (err_status(&e) == WR_STATUS_INTERNAL)
                        log_error("Exec: %s", e.msg);
                rpc_call_finish_err(call, &e);
        } else {
                sbx_journal_bind(ctx->sandboxes, sandbox_id, token, sbx_exec_id(ec->x));
                rpc_call_resume_recv(call);
                if (ec->half_closed)
                        sbx_exec_close_stdin(ec->x);
        }
        pending_free(ec);
        rpc_call_unref(call);
}

/* An exec that found no live sandbox: when the sandbox is a Pod
 * (compute_class K8S) whose relay is not connected, say so. Returns r or
 * the UNAVAILABLE error. */
static int exec_k8s_refusal(struct api_ctx *ctx, const char *id, int r, struct wr_err *e) {
        struct store_sandbox sb = {0};
        /* -EBUSY: no live sandbox to exec in (sbx_running); other errors
         * (a bad user, ...) stand */
        if (r == -EBUSY && store_sandbox_load(ctx->store, id, &sb, NULL) == 0 &&
            k8s_row_is_k8s(&sb) && sb.status == STORE_SANDBOX_RUNNING)
                r = err_setx(e, -ENOTCONN, WR_STATUS_UNAVAILABLE, WR_FAULT_SERVICE,
                             "exec: sandbox %s runs on compute_class K8S and its Pod's "
                             "warren-relay is not connected to this warrend (yet): retry; "
                             "docs/k8s.md (--k8s-callback) says where it dials",
                             id);
        store_sandbox_clear(&sb);
        return r;
}

/* Keep a copy of start in ec->pending (the call waits for a lookup or
 * the journal's walk); env values are wiped with it (pending_free). */
static int pending_keep(struct exec_call *ec, const Warren__V1__ExecStart *start,
                        struct wr_err *e) {
        if (ec->pending)
                return 0; /* kept already: start is ec->pending */
        size_t len = protobuf_c_message_get_packed_size(&start->base);
        _cleanup_free_ uint8_t *buf = malloc(len ? len : 1);
        if (!buf)
                return err_set(e, -ENOMEM, "out of memory");
        protobuf_c_message_pack(&start->base, buf);
        ec->pending = warren__v1__exec_start__unpack(NULL, len, buf);
        explicit_bzero(buf, len);
        if (!ec->pending)
                return err_set(e, -ENOMEM, "out of memory");
        return 0;
}

/* start (its user looked up, or none to look up): journaled, or now.
 * Returns 1 when the journal's walk took the call over (ec->pending is
 * the journal's then), 0 when started, or a negative errno. */
static int exec_start_user_known(struct rpc_call *call, struct api_ctx *ctx,
                                 const Warren__V1__ExecStart *start, const char *id,
                                 struct exec_call *ec, struct wr_err *e) {
        int r;
        if (!start->journal && !sbx_journal_all(ctx->sandboxes, id)) {
                r = exec_start_now(ctx, start, id, ec, e);
                return r < 0 ? exec_k8s_refusal(ctx, id, r, e) : 0;
        }
        if ((r = pending_keep(ec, start, e)) < 0)
                return r;
        rpc_call_ref(ec->call);
        if ((r = sbx_journal_begin(ctx->sandboxes, id, journal_begun, ec, e)) < 0) {
                rpc_call_unref(ec->call);
                pending_free(ec);
                return r;
        }
        rpc_call_pause_recv(ec->call);
        return 1;
}

/* start.user found (or not) on a worker: the start goes on. */
static void user_found(int r, const struct sbx_user *u, const struct wr_err *ue, void *userdata) {
        struct exec_call *ec = userdata;
        struct rpc_call *call = ec->call;
        struct api_ctx *ctx = rpc_call_server_ctx(call);
        struct wr_err e = {0};
        bool journaled = false;
        if (rpc_call_is_done(call)) {
                /* the client went away meanwhile */
        } else if (r < 0) {
                ec->finished = true;
                rpc_call_finish_err(call, ue);
        } else {
                ec->user = *u;
                ec->has_user = true;
                r = exec_start_user_known(call, ctx, ec->pending, ec->id, ec, &e);
                journaled = r == 1;
                if (r < 0) {
                        ec->finished = true;
                        if (err_status(&e) == WR_STATUS_INTERNAL)
                                log_error("Exec: %s", e.msg);
                        rpc_call_finish_err(call, &e);
                } else if (r == 0) {
                        rpc_call_resume_recv(call);
                        if (ec->half_closed)
                                sbx_exec_close_stdin(ec->x);
                }
        }
        if (!journaled)
                pending_free(ec);
        rpc_call_unref(call);
}

static int exec_start(struct rpc_call *call, struct api_ctx *ctx,
                      const Warren__V1__ExecStart *start, struct exec_call *ec, struct wr_err *e) {
        /* validated and resolved once; a named user is looked up on a
         * worker first, a journaled start waits for the walk */
        _cleanup_(api_exec_vectors_free) struct api_exec_vectors v = {0};
        struct sbx_exec_spec spec;
        char id[32];
        int r = api_exec_start_spec(start, &spec, &v, e);
        if (r < 0 || (r = api_own_sandbox_id(call, start->sandbox, id, sizeof(id), e)) < 0)
                return r;
        r = sbx_exec_user_lookup(ctx->sandboxes, id, start->user, user_found, ec, e);
        if (r < 0)
                return exec_k8s_refusal(ctx, id, r, e);
        if (r == 0) {
                snprintf(ec->id, sizeof(ec->id), "%s", id);
                rpc_call_ref(ec->call);
                if ((r = pending_keep(ec, start, e)) < 0) {
                        /* the lookup runs on; user_found finds the call done */
                        return r;
                }
                rpc_call_pause_recv(ec->call);
                return 0;
        }
        r = exec_start_user_known(call, ctx, start, id, ec, e);
        return r < 0 ? r : 0;
}

static int exec_attach(struct rpc_call *call, struct api_ctx *ctx, const Warren__V1__ExecAttach *a,
                       struct exec_call *ec, struct wr_err *e) {
        if (!a->sandbox || !*a->sandbox)
                return invalid(e, "attach.sandbox: name the sandbox (id or name)");
        if (!a->exec_id || !*a->exec_id)
                return invalid(e, "attach.exec_id: give the exec id (\"ex-N\")");
        char id[32];
        int r = api_own_sandbox_id(call, a->sandbox, id, sizeof(id), e);
        if (r < 0)
                return r;
        struct sbx_exec_target t = {
                .sandbox = id,
                .exec_id = a->exec_id,
                .offset = a->offset,
        };
        return sbx_exec_attach(ctx->sandboxes, &t, &exec_callbacks, ec, &ec->x, e);
}

static void exec_on_message(struct rpc_call *call, const ProtobufCMessage *msg) {
        const Warren__V1__ExecRequest *req = (const Warren__V1__ExecRequest *) msg;
        struct exec_call *ec = rpc_call_get_data(call);
        struct api_ctx *ctx = rpc_call_server_ctx(call);
        if (!ec) {
                if (req->kind_case != WARREN__V1__EXEC_REQUEST__KIND_START &&
                    req->kind_case != WARREN__V1__EXEC_REQUEST__KIND_ATTACH)
                        return fail(call, WR_STATUS_INVALID_ARGUMENT,
                                    "the first Exec message must be `start` (or `attach`)");
                ec = calloc(1, sizeof(*ec));
                if (!ec)
                        return fail(call, WR_STATUS_RESOURCE_EXHAUSTED, "out of memory");
                ec->call = call;
                rpc_call_set_data(call, ec);
                struct wr_err e = {0};
                int r = req->kind_case == WARREN__V1__EXEC_REQUEST__KIND_START
                                ? exec_start(call, ctx, req->start, ec, &e)
                                : exec_attach(call, ctx, req->attach, ec, &e);
                if (r < 0) {
                        ec->finished = true;
                        if (err_status(&e) == WR_STATUS_INTERNAL)
                                log_error("Exec: %s", e.msg);
                        rpc_call_finish_err(call, &e);
                }
                return;
        }
        if (ec->finished || !ec->x)
                return;
        int r = 0;
        switch (req->kind_case) {
        case WARREN__V1__EXEC_REQUEST__KIND_STDIN:
                r = sbx_exec_write_stdin(ec->x, req->stdin.data, req->stdin.len);
                if (r == 1)
                        rpc_call_pause_recv(call);
                break;
        case WARREN__V1__EXEC_REQUEST__KIND_CLOSE_STDIN:
                sbx_exec_close_stdin(ec->x);
                break;
        case WARREN__V1__EXEC_REQUEST__KIND_SIGNAL:
                if (!req->signal || req->signal->signal <= 0 || req->signal->signal > 64)
                        return fail(call, WR_STATUS_INVALID_ARGUMENT,
                                    "signal.signal: give a signal number between 1 and 64");
                sbx_exec_signal(ec->x, req->signal->signal, req->signal->group);
                break;
        case WARREN__V1__EXEC_REQUEST__KIND_RESIZE:
                if (req->resize)
                        sbx_exec_resize(ec->x, req->resize->cols, req->resize->rows);
                break;
        default:
                fail(call, WR_STATUS_INVALID_ARGUMENT,
                     "after `start`, send only stdin, close_stdin, signal or resize");
                break;
        }
}

static void exec_on_half_close(struct rpc_call *call) {
        /* No more requests: nothing more will reach stdin. */
        struct exec_call *ec = rpc_call_get_data(call);
        if (ec && ec->pending)
                ec->half_closed = true;
        if (ec && ec->x && !ec->finished)
                sbx_exec_close_stdin(ec->x);
}

static void release(struct exec_call *ec) {
        if (ec && ec->x) {
                struct sbx_exec *x = ec->x;
                ec->x = NULL;
                sbx_exec_release(x);
        }
}

static void exec_on_cancel(struct rpc_call *call, int status) {
        release(rpc_call_get_data(call));
}

static void exec_on_writable(struct rpc_call *call) {
        struct exec_call *ec = rpc_call_get_data(call);
        if (ec && ec->x)
                sbx_exec_resume_output(ec->x);
}

static void exec_on_free(struct rpc_call *call) {
        struct exec_call *ec = rpc_call_get_data(call);
        release(ec);
        if (ec)
                pending_free(ec);
        free(ec);
}

const struct rpc_method api_exec_method = {
        .path = "/warren.v1.Sandboxes/Exec",
        .kind = RPC_BIDI,
        .input = &warren__v1__exec_request__descriptor,
        .output = &warren__v1__exec_response__descriptor,
        .on_message = exec_on_message,
        .on_half_close = exec_on_half_close,
        .on_cancel = exec_on_cancel,
        .on_writable = exec_on_writable,
        .on_free = exec_on_free,
        .sensitive = true, /* env values and stdin: wiped with each message */
};

/* The processes of a ListProcessesResponse, in one allocation each. */
struct process_list {
        Warren__V1__Process **ptrs;
        Warren__V1__Process *procs;
        Warren__V1__Timestamp *times;
        Warren__V1__ExecExited *exits;
};

static void process_list_free(struct process_list *l) {
        free(l->ptrs);
        free(l->procs);
        free(l->times);
        free(l->exits);
}

/* Fill l (n entries) from the domain's list; borrows its strings. */
static int process_list_make(struct process_list *l, const struct sbx_exec_info *v, size_t n) {
        l->ptrs = calloc(n + 1, sizeof(*l->ptrs));
        l->procs = calloc(n + 1, sizeof(*l->procs));
        l->times = calloc(n + 1, sizeof(*l->times));
        l->exits = calloc(n + 1, sizeof(*l->exits));
        if (!l->ptrs || !l->procs || !l->times || !l->exits)
                return -ENOMEM;
        for (size_t i = 0; i < n; i++) {
                Warren__V1__Process *p = &l->procs[i];
                warren__v1__process__init(p);
                p->exec_id = (char *) v[i].exec_id;
                p->pid = v[i].pid;
                p->argv = (char **) v[i].argv;
                p->n_argv = v[i].argc;
                p->running = v[i].running;
                p->pty = v[i].pty;
                warren__v1__timestamp__init(&l->times[i]);
                l->times[i].unix_nanos = v[i].started_ns;
                p->started_at = &l->times[i];
                if (!v[i].running) {
                        Warren__V1__ExecExited *ex = &l->exits[i];
                        warren__v1__exec_exited__init(ex);
                        ex->exit_code = v[i].exit_code;
                        ex->signal = v[i].signo;
                        ex->reason = exit_reason_to_proto(v[i].reason);
                        p->exited = ex;
                }
                l->ptrs[i] = p;
        }
        return 0;
}

static void list_processes(struct rpc_call *call, const ProtobufCMessage *msg) {
        const Warren__V1__ListProcessesRequest *req = (const void *) msg;
        struct api_ctx *ctx = rpc_call_server_ctx(call);
        if (!*req->sandbox) {
                rpc_call_finish(call, WR_STATUS_INVALID_ARGUMENT,
                                "sandbox: empty; give the sandbox's id or name");
                return;
        }
        struct wr_err e = {0};
        _cleanup_free_ struct sbx_exec_info *v = NULL;
        size_t n = 0;
        char id[32];
        int r = api_own_sandbox_id(call, req->sandbox, id, sizeof(id), &e);
        if (r >= 0)
                r = sbx_exec_list(ctx->sandboxes, id, &v, &n, &e);
        if (r < 0) {
                rpc_call_finish_err(call, &e);
                return;
        }
        _cleanup_(process_list_free) struct process_list l = {0};
        if (process_list_make(&l, v, n) < 0) {
                rpc_call_finish(call, WR_STATUS_RESOURCE_EXHAUSTED, "out of memory");
                return;
        }
        Warren__V1__ListProcessesResponse resp = WARREN__V1__LIST_PROCESSES_RESPONSE__INIT;
        resp.processes = l.ptrs;
        resp.n_processes = n;
        rpc_call_reply(call, &resp.base);
}

const struct rpc_method api_list_processes_method = {
        .path = "/warren.v1.Sandboxes/ListProcesses",
        .kind = RPC_UNARY,
        .input = &warren__v1__list_processes_request__descriptor,
        .output = &warren__v1__list_processes_response__descriptor,
        .on_message = list_processes,
};
