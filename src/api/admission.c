/* SPDX-License-Identifier: Apache-2.0 */
/* Fair admission on the create path (api.h, api_admit): a create holds
 * the loop while it runs (mounts, cgroups, the first exchange with
 * warren-init), so creates run one at a time. Those waiting are queued per
 * environment and taken round-robin, one per loop iteration (an idle
 * handle: the loop still polls for I/O between two, so a request that
 * arrives meanwhile is queued before the next one runs). A tenant that
 * queues a hundred creates delays another tenant's create by at most the
 * one running, not by its hundred. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "api/api-internal.h"
#include "basic/log.h"

struct adm_job {
        struct adm_job *next;
        api_admit_fn run;
        void *userdata;
};

struct adm_env {
        char env[64];
        struct adm_job *head, *tail;
        size_t n;
};

struct api_admission {
        uv_idle_t idle;
        bool idle_active;
        struct adm_env *envs; /* the environments with queued jobs */
        size_t n_envs, cap_envs;
        size_t next; /* index the round-robin looks at first */
        uint64_t admitted;
};

static struct adm_job *pop(struct api_admission *a) {
        if (a->n_envs == 0)
                return NULL;
        if (a->next >= a->n_envs)
                a->next = 0;
        struct adm_env *q = &a->envs[a->next];
        struct adm_job *j = q->head;
        q->head = j->next;
        if (!q->head)
                q->tail = NULL;
        q->n--;
        if (q->n == 0) {
                /* drop the empty queue; the one after it moves to next */
                memmove(q, q + 1, (a->n_envs - a->next - 1) * sizeof(*q));
                a->n_envs--;
        } else
                a->next++;
        return j;
}

static void on_idle(uv_idle_t *h) {
        struct api_admission *a = h->data;
        struct adm_job *j = pop(a);
        if (!j || a->n_envs == 0) {
                uv_idle_stop(&a->idle);
                a->idle_active = false;
        }
        if (j) {
                a->admitted++;
                j->run(j->userdata, false);
                free(j);
        }
}

int api_admission_start(struct api_ctx *ctx, struct wr_err *e) {
        struct api_admission *a = calloc(1, sizeof(*a));
        if (!a)
                return err_set(e, -ENOMEM, "out of memory");
        int r = uv_idle_init(ctx->loop, &a->idle);
        if (r < 0) {
                free(a);
                return err_set(e, r, "admission: %s", uv_strerror(r));
        }
        a->idle.data = a;
        ctx->admission = a;
        return 0;
}

int api_admit(struct api_ctx *ctx, const char *env, api_admit_fn run, void *userdata,
              struct wr_err *e) {
        struct api_admission *a = ctx->admission;
        if (!a) {
                run(userdata, !ctx->sandboxes);
                return 0;
        }
        struct adm_env *q = NULL;
        for (size_t i = 0; i < a->n_envs && !q; i++)
                if (strcmp(a->envs[i].env, env) == 0)
                        q = &a->envs[i];
        if (q && q->n >= API_ADMISSION_MAX_QUEUED)
                return err_setx(e, -EAGAIN, WR_STATUS_RESOURCE_EXHAUSTED, WR_FAULT_CLIENT,
                                "environment %s has %d creates waiting already; retry when "
                                "some have finished",
                                env, API_ADMISSION_MAX_QUEUED);
        struct adm_job *j = calloc(1, sizeof(*j));
        if (!j)
                return err_setx(e, -ENOMEM, WR_STATUS_RESOURCE_EXHAUSTED, WR_FAULT_SERVICE,
                                "out of memory");
        j->run = run;
        j->userdata = userdata;
        if (!q) {
                if (a->n_envs == a->cap_envs) {
                        size_t nc = a->cap_envs ? a->cap_envs * 2 : 8;
                        struct adm_env *ne = reallocarray(a->envs, nc, sizeof(*ne));
                        if (!ne) {
                                free(j);
                                return err_setx(e, -ENOMEM, WR_STATUS_RESOURCE_EXHAUSTED,
                                                WR_FAULT_SERVICE, "out of memory");
                        }
                        a->envs = ne;
                        a->cap_envs = nc;
                }
                /* a new environment joins the round just before the one
                 * whose turn is next: it is served after it at the latest */
                if (a->next > a->n_envs)
                        a->next = a->n_envs;
                memmove(&a->envs[a->next + 1], &a->envs[a->next],
                        (a->n_envs - a->next) * sizeof(*a->envs));
                q = &a->envs[a->next];
                *q = (struct adm_env){0};
                snprintf(q->env, sizeof(q->env), "%s", env);
                a->n_envs++;
        }
        if (q->tail)
                q->tail->next = j;
        else
                q->head = j;
        q->tail = j;
        q->n++;
        if (!a->idle_active) {
                uv_idle_start(&a->idle, on_idle);
                a->idle_active = true;
        }
        return 0;
}

size_t api_admission_waiting(struct api_ctx *ctx, const char *env) {
        struct api_admission *a = ctx->admission;
        size_t n = 0;
        for (size_t i = 0; a && i < a->n_envs; i++)
                if (!env || strcmp(a->envs[i].env, env) == 0)
                        n += a->envs[i].n;
        return n;
}

static void idle_closed(uv_handle_t *h) {
        struct api_admission *a = h->data;
        free(a->envs);
        free(a);
}

void api_admission_stop(struct api_ctx *ctx) {
        struct api_admission *a = ctx->admission;
        if (!a)
                return;
        struct adm_job *j;
        while ((j = pop(a))) {
                j->run(j->userdata, true);
                free(j);
        }
        ctx->admission = NULL;
        uv_close((uv_handle_t *) &a->idle, idle_closed);
}
