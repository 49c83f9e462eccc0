/* SPDX-License-Identifier: Apache-2.0 */
/* Host cleanup a teardown could not finish (a mount left inside the dir,
 * a cgroup that would not go, an I/O error), retried in the background:
 * 1 s after the failure, then doubling up to 5 min, until it succeeds or
 * warrend stops (the next start's recovery removes every dir without a
 * live sandbox). Surfaced, not only logged: the sandbox's row says "host
 * cleanup pending: ..." until it is done, and the admin metrics count the
 * failures and the pending entries. */
#include "sandbox/sandbox-internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "basic/log.h"
#include "basic/macro.h"

#define RETRY_FIRST_MS 1000
#define RETRY_MAX_MS (5 * 60 * 1000)

struct sbx_cleanup {
        struct sbx_cleanup *next;
        char id[32];
        char dir[PATH_MAX];
        char reason[256];
        int status;       /* the row's final status */
        int32_t uid_slot; /* its user namespace range: taken until done */
        unsigned attempts;
        uint64_t due; /* uv_now() ms */
        uint64_t delay_ms;
};

static void arm(struct sbx_manager *m);

static void work_run(uv_work_t *w) {
        struct sbx_manager *m = w->data;
        struct sbx_cleanup *c = m->cleanup_current;
        m->cleanup_err = (struct wr_err){0};
        m->cleanup_r = sbx_host_cleanup(m, c->id, c->dir, &m->cleanup_err);
}

static void work_done(uv_work_t *w, int status) {
        struct sbx_manager *m = w->data;
        struct sbx_cleanup *c = m->cleanup_current;
        m->cleanup_current = NULL;
        if (status == 0 && m->cleanup_r >= 0) {
                for (struct sbx_cleanup **p = &m->cleanups; *p; p = &(*p)->next)
                        if (*p == c) {
                                *p = c->next;
                                break;
                        }
                log_info("sandbox %s: host cleanup done (attempt %u)", c->id, c->attempts + 1);
                sbx_uid_slot_release(m, c->uid_slot);
                store_sandbox_update_status(m->store, c->id, c->status, c->reason, NULL);
                free(c);
        } else {
                c->attempts++;
                c->delay_ms = MIN(c->delay_ms * 2, (uint64_t) RETRY_MAX_MS);
                c->due = uv_now(m->loop) + c->delay_ms;
                log_warn("sandbox %s: host cleanup failed again (attempt %u, next in %llu s): %s",
                         c->id, c->attempts, (unsigned long long) (c->delay_ms / 1000),
                         m->cleanup_err.msg[0] ? m->cleanup_err.msg : "worker failed");
        }
        if (!m->freeing)
                arm(m);
}

static void timer_cb(uv_timer_t *t) {
        struct sbx_manager *m = t->data;
        if (m->cleanup_current || m->freeing)
                return;
        uint64_t now = uv_now(m->loop);
        for (struct sbx_cleanup *c = m->cleanups; c; c = c->next)
                if (c->due <= now) {
                        m->cleanup_current = c;
                        m->cleanup_work.data = m;
                        if (uv_queue_work(m->loop, &m->cleanup_work, work_run, work_done) < 0) {
                                m->cleanup_current = NULL;
                                break;
                        }
                        return;
                }
        arm(m);
}

static void arm(struct sbx_manager *m) {
        if (!m->cleanups || m->cleanup_current)
                return;
        if (!m->cleanup_timer_open) {
                if (uv_timer_init(m->loop, &m->cleanup_timer) < 0)
                        return;
                m->cleanup_timer.data = m;
                m->cleanup_timer_open = true;
        }
        uint64_t now = uv_now(m->loop), due = UINT64_MAX;
        for (struct sbx_cleanup *c = m->cleanups; c; c = c->next)
                due = MIN(due, c->due);
        uv_timer_start(&m->cleanup_timer, timer_cb, due > now ? due - now : 0, 0);
}

void sbx_cleanup_later(struct sbx_manager *m, const char *id, const char *dir, int status,
                       const char *reason, const struct wr_err *why) {
        sbx_cleanup_later_uids(m, id, dir, status, reason, why, -1);
}

void sbx_cleanup_later_uids(struct sbx_manager *m, const char *id, const char *dir, int status,
                            const char *reason, const struct wr_err *why, int32_t uid_slot) {
        m->metrics.teardown_failed++;
        struct sbx_cleanup *c = calloc(1, sizeof(*c));
        char shown[512];
        snprintf(shown, sizeof(shown), "%s (host cleanup pending: %s)", reason,
                 why && why->msg[0] ? why->msg : "teardown failed");
        store_sandbox_update_status(m->store, id, status, shown, NULL);
        if (!c || !dir) {
                /* the next start's recovery removes the dir; the range
                 * stays taken in this process */
                free(c);
                return;
        }
        c->uid_slot = uid_slot;
        snprintf(c->id, sizeof(c->id), "%s", id);
        snprintf(c->dir, sizeof(c->dir), "%s", dir);
        snprintf(c->reason, sizeof(c->reason), "%s", reason);
        c->status = status;
        c->delay_ms = RETRY_FIRST_MS;
        c->due = uv_now(m->loop) + c->delay_ms;
        c->next = m->cleanups;
        m->cleanups = c;
        arm(m);
}

size_t sbx_cleanup_pending(const struct sbx_manager *m) {
        size_t n = 0;
        for (const struct sbx_cleanup *c = m->cleanups; c; c = c->next)
                n++;
        return n;
}

static void timer_closed(uv_handle_t *h) {
        struct sbx_manager *m = h->data;
        m->cleanup_timer_open = false;
}

void sbx_cleanup_stop(struct sbx_manager *m) {
        if (m->cleanup_timer_open) {
                uv_timer_stop(&m->cleanup_timer);
                uv_close((uv_handle_t *) &m->cleanup_timer, timer_closed);
        }
        while (m->cleanup_current || m->cleanup_timer_open)
                uv_run(m->loop, UV_RUN_ONCE);
        while (m->cleanups) {
                struct sbx_cleanup *c = m->cleanups;
                m->cleanups = c->next;
                free(c);
        }
}
