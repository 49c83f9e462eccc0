/* SPDX-License-Identifier: Apache-2.0 */
/* The warm pool (--warm-pool N): sandboxes prestarted ahead on worker
 * threads (rt_sandbox_prestart: id, dir, cgroups, namespaces, the stage,
 * a root built for the image the pool expects, a child parked), taken by
 * create (sbx_pool_take) and refilled in the background. */
#include "sandbox/sandbox-internal.h"

#include <errno.h>
#include <limits.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "basic/log.h"
#include "basic/macro.h"
#include "image/image.h"
#include "runtime/runtime.h"

/* how long after taking an entry the refill starts (while the pool is not
 * empty) */
#define POOL_REFILL_DELAY_MS 8

static void pool_refill_soon(struct sbx_manager *m, uint64_t delay_ms);
static void pool_timer_cb(uv_timer_t *t);

/* Does the NULL-terminated a hold exactly b (n of them, or up to NULL
 * when n is 0)? */
static bool layers_equal(char *const *a, const char *const *b, size_t n) {
        if (n == 0)
                while (b && b[n])
                        n++;
        size_t i = 0;
        for (; a && a[i] && i < n; i++)
                if (strcmp(a[i], b[i]) != 0)
                        return false;
        return i == n && (!a || !a[i]);
}

/* Prestart one sandbox for the pool (id, dir, cgroups with default
 * limits, namespaces, the stage, the root for the expected image, a child
 * parked and ready): on a libuv worker thread (the runtime allows creates
 * from any thread), so that the loop never waits for it. */
static void pool_prestart(struct sbx_pool_job *job) {
        struct sbx_manager *m = job->m;
        struct sbx_pool_entry *pe = &job->entry;
        if (sbx_make_id(pe->id, sizeof(pe->id)) < 0) {
                err_set(&job->err, -EIO, "getrandom failed");
                return;
        }
        char dir[PATH_MAX];
        snprintf(dir, sizeof(dir), "%s/sandboxes/%s", m->state_dir, pe->id);
        size_t n = 0;
        while (job->layers && job->layers[n])
                n++;
        struct rt_sandbox_config cfg = {
                .id = pe->id,
                .dir = dir,
                .disk_template_dir = m->disk_templates,
                .layers = (const char *const *) job->layers,
                .n_layers = n,
                .init_path = m->init_path,
                .log_fd = -1,
                .cgroup_mode = m->cgroup_mode,
                /* the writable layer, made ahead: a claim must ask for this
                 * size (create.c takes an entry only then) */
                .limits = {.disk_bytes = m->default_disk},
                /* as a claim sends it: the entry skips it then */
                .resolv_conf = job->resolv_conf,
                .net = pe->net_slot >= 0 ? &pe->net : NULL,
        };
        sbx_uid_slot_config(pe->uid_slot, &cfg);
        if (sbx_rt_create(m, &cfg, true, &pe->rt, &job->err) >= 0) {
                /* the job owns the block now: its open4 element goes in here,
                 * off the loop, so that a claim without a policy does no
                 * nftables work (a policed claim deletes it first) */
                struct wr_err oe = {0};
                if (pe->net_slot >= 0 && sbx_network_set_open(m->net, pe->net_slot, true, &oe) < 0)
                        log_debug("warm pool: %s", oe.msg);
                return;
        }
        pe->rt = NULL;
        if (n == 0)
                return;
        /* the image may be gone: an entry without a root built ahead */
        job->layers_failed = true;
        cfg.layers = NULL;
        cfg.n_layers = 0;
        if (sbx_rt_create(m, &cfg, true, &pe->rt, &job->err) < 0)
                pe->rt = NULL;
}

static void pool_work(uv_work_t *w) {
        struct sbx_pool_job *job = w->data;
        job->entry.rt = NULL;
        job->err.code = 0;
        job->layers_failed = false;
        uint64_t t0 = sbx_mono_ns();
        pool_prestart(job);
        job->work_ns = sbx_mono_ns() - t0;
}

static void pool_work_done(uv_work_t *w, int status) {
        struct sbx_pool_job *job = w->data;
        struct sbx_manager *m = job->m;
        struct sbx_pool_entry *pe = &job->entry;
        job->busy = false;
        m->pool_busy--;
        /* stop predicting an image whose layers do not work */
        if (job->layers_failed &&
            layers_equal(m->pool_layers, (const char *const *) job->layers, 0)) {
                log_debug("warm pool: cannot build roots for the expected image; none until "
                          "the next create");
                sbx_argv_free(m->pool_layers);
                m->pool_layers = NULL;
        }
        sbx_argv_free(job->layers);
        job->layers = NULL;
        if (!pe->rt) {
                /* a failed prestart made no veth (or took it down) */
                sbx_network_release(m->net, pe->net_slot);
                pe->net_slot = -1;
                sbx_uid_slot_release(m, pe->uid_slot);
                pe->uid_slot = -1;
                if (status != UV_ECANCELED)
                        log_warn("warm pool: %s", job->err.msg);
                /* retry later rather than spin on a broken host */
                if (!m->freeing)
                        uv_timer_start(&m->pool_timer, pool_timer_cb, 1000, 0);
                return;
        }
        if (m->freeing || m->pool_n >= m->pool_target) {
                struct wr_err e = {0};
                if (pe->net_slot >= 0)
                        rt_sandbox_net_disown(pe->rt);
                if (sbx_rt_destroy(m, pe->rt, &e) < 0) {
                        log_warn("warm pool: %s", e.msg); /* as pool_drain says it */
                } else {
                        sbx_net_retire(m, pe->net_slot, false);
                        sbx_uid_slot_release(m, pe->uid_slot);
                }
                pe->net_slot = pe->uid_slot = -1;
                rt_sandbox_free(pe->rt);
                pe->rt = NULL;
                return;
        }
        log_debug("warm pool: %s prestarted in %.3f ms", pe->id, (double) job->work_ns / 1e6);
        m->pool[m->pool_n++] = *pe;
        pe->rt = NULL;
        pool_refill_soon(m, 0);
}

static bool pool_wants(const struct sbx_manager *m) {
        return m->pool_target && !m->freeing && m->pool_busy < SBX_POOL_JOBS &&
               m->pool_n + m->pool_busy < m->pool_target;
}

static void pool_timer_cb(uv_timer_t *t) {
        struct sbx_manager *m = t->data;
        /* each prestart is a clone of warrend: its page tables are copied,
         * every page either side writes afterwards is copied too, and the
         * claim's exec tears the copy down. Freed heap pages go back to
         * the kernel first (warrend's freed-but-resident heap was ~5 MiB
         * with the default network) */
        if (pool_wants(m))
                malloc_trim(0); /* ~0.05 ms here */
        for (size_t i = 0; i < SBX_POOL_JOBS && pool_wants(m); i++) {
                struct sbx_pool_job *job = &m->pool_jobs[i];
                if (job->busy)
                        continue;
                job->m = m;
                job->work.data = job;
                /* its /30 (the allocator is the loop's) */
                job->entry.net_slot = -1;
                if (m->net &&
                    sbx_network_alloc(m->net, &job->entry.net_slot, &job->entry.net) < 0) {
                        log_warn("warm pool: the sandbox range %s is full",
                                 sbx_network_range(m->net));
                        break;
                }
                struct wr_err ue = {0};
                if (sbx_uid_slot_alloc(m, &job->entry.uid_slot, &ue) < 0) {
                        log_warn("warm pool: %s", ue.msg);
                        sbx_network_release(m->net, job->entry.net_slot);
                        job->entry.net_slot = -1;
                        break;
                }
                job->resolv_conf = m->net ? sbx_network_resolv_conf_slot(
                                                    m->net, job->entry.net_slot, job->resolv_buf,
                                                    sizeof(job->resolv_buf))
                                          : NULL;
                /* the worker gets its own copy of the prediction */
                sbx_argv_free(job->layers);
                job->layers = sbx_argv_dup((const char *const *) m->pool_layers, 0);
                if (uv_queue_work(m->loop, &job->work, pool_work, pool_work_done) < 0) {
                        sbx_network_release(m->net, job->entry.net_slot);
                        job->entry.net_slot = -1;
                        sbx_uid_slot_release(m, job->entry.uid_slot);
                        job->entry.uid_slot = -1;
                        break;
                }
                job->busy = true;
                m->pool_busy++;
        }
}

static void pool_refill_soon(struct sbx_manager *m, uint64_t delay_ms) {
        if (pool_wants(m) && (delay_ms == 0 || !uv_is_active((uv_handle_t *) &m->pool_timer)))
                uv_timer_start(&m->pool_timer, pool_timer_cb, delay_ms, 0);
}

/* Tear down every idle pool entry (nothing of them may outlive warrend:
 * a parked child left behind exits on its own once the pipe closes, and a
 * restart removes the dir and cgroups of ids without a row). */
static void pool_drain(struct sbx_manager *m) {
        while (m->pool_n > 0) {
                struct sbx_pool_entry *pe = &m->pool[--m->pool_n];
                struct wr_err e = {0};
                if (pe->net_slot >= 0)
                        rt_sandbox_net_disown(pe->rt);
                if (sbx_rt_destroy(m, pe->rt, &e) < 0) {
                        log_warn("warm pool: %s", e.msg);
                } else {
                        sbx_net_retire(m, pe->net_slot, false);
                        sbx_uid_slot_release(m, pe->uid_slot);
                }
                pe->net_slot = pe->uid_slot = -1;
                rt_sandbox_free(pe->rt);
                pe->rt = NULL;
        }
}

static void pool_timer_closed(uv_handle_t *h) {
        struct sbx_manager *m = h->data;
        m->pool_timer_open = false;
}

struct rt_sandbox *sbx_pool_take(struct sbx_manager *m, char *id, size_t size,
                                 int32_t *ret_net_slot, int32_t *ret_uid_slot) {
        if (m->pool_n == 0)
                return NULL;
        struct sbx_pool_entry *pe = &m->pool[--m->pool_n];
        snprintf(id, size, "%s", pe->id);
        *ret_net_slot = pe->net_slot;
        *ret_uid_slot = pe->uid_slot;
        pe->net_slot = pe->uid_slot = -1;
        /* not right away: a prestart (cgroup dirs, a clone of warrend, the
         * child's mounts) competes for the CPUs with this sandbox's start
         * and its first exec, which usually follows at once; an empty pool
         * refills at once */
        pool_refill_soon(m, m->pool_n > 0 ? POOL_REFILL_DELAY_MS : 0);
        return TAKE_PTR(pe->rt);
}

void sbx_pool_expect(struct sbx_manager *m, const char *const *layers, size_t n) {
        if (!m->pool_target || layers_equal(m->pool_layers, layers, n))
                return;
        sbx_argv_free(m->pool_layers);
        m->pool_layers = n ? sbx_argv_dup(layers, n) : NULL;
}

int sbx_pool_start(struct sbx_manager *m) {
        int r = uv_timer_init(m->loop, &m->pool_timer);
        if (r < 0)
                return r;
        m->pool_timer.data = m;
        m->pool_timer_open = true;
        if (!m->pool_target)
                return 0;
        m->pool = calloc(m->pool_target, sizeof(*m->pool));
        if (!m->pool)
                return -ENOMEM;
        /* until a sandbox is created, the pool builds roots ahead for the
         * default image (when it is there) */
        struct img_info *img = NULL;
        if (m->images && img_store_resolve(m->images, m->default_image, &img, NULL) >= 0) {
                sbx_pool_expect(m, (const char *const *) img->layer_dirs, img->n_layers);
                img_info_free(img);
        }
        pool_refill_soon(m, 0);
        return 0;
}

void sbx_pool_stop(struct sbx_manager *m) {
        pool_drain(m);
        if (m->pool_timer_open) {
                uv_timer_stop(&m->pool_timer);
                uv_close((uv_handle_t *) &m->pool_timer, pool_timer_closed);
        }
}

bool sbx_pool_busy(const struct sbx_manager *m) {
        return m->pool_timer_open || m->pool_busy;
}
