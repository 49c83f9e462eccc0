/* SPDX-License-Identifier: Apache-2.0 */
/* The disk guard of image builds (sandbox-internal.h: sbx_diskguard_watch).
 * A build step's writable layer is a sparse image on the file system of
 * the state dir (unbounded with --default-disk 0), and images together
 * may promise more than it holds, so steps that write much could fill the
 * host's disk. While any build step runs, a
 * timer looks at that file system's free space; below build_min_free the
 * running steps' sandboxes are terminated (marked disk_stopped, so the
 * builder says why) and their layers go with them. A bound on the host's
 * free space, not on one step's size: the step is stopped within one tick
 * of crossing it. */
#include "sandbox/sandbox-internal.h"

#include <errno.h>
#include <string.h>
#include <sys/statvfs.h>

#include "basic/log.h"

#define SBX_DISK_TICK_MS 100

static void tick(uv_timer_t *t) {
        struct sbx_manager *m = t->data;
        bool any = false;
        for (struct sbx *sb = m->list; sb; sb = sb->next)
                any |= sb->build_step && sb->state == SBX_RUNNING;
        if (!any) {
                uv_timer_stop(t);
                return;
        }
        struct statvfs st;
        if (statvfs(m->state_dir, &st) < 0)
                return;
        uint64_t avail = (uint64_t) st.f_bavail * st.f_frsize;
        if (avail >= m->build_min_free)
                return;
        for (struct sbx *sb = m->list; sb; sb = sb->next) {
                if (!sb->build_step || sb->state != SBX_RUNNING || sb->disk_stopped)
                        continue;
                sb->disk_stopped = true;
                log_warn("sandbox %s: build step stopped: %llu MiB free in %s, under "
                         "--build-min-free (%llu MiB)",
                         sb->id, (unsigned long long) (avail >> 20), m->state_dir,
                         (unsigned long long) (m->build_min_free >> 20));
                struct wr_err te = {0};
                if (sbx_terminate(m, sb->id, 0, NULL, NULL, &te) < 0)
                        log_warn("sandbox %s: stop the build step: %s", sb->id, te.msg);
        }
}

void sbx_diskguard_watch(struct sbx_manager *m) {
        if (!m->build_min_free)
                return;
        if (!m->disk_timer_open) {
                if (uv_timer_init(m->loop, &m->disk_timer) < 0)
                        return;
                m->disk_timer.data = m;
                m->disk_timer_open = true;
        }
        if (!uv_is_active((uv_handle_t *) &m->disk_timer))
                uv_timer_start(&m->disk_timer, tick, 0, SBX_DISK_TICK_MS);
}

bool sbx_disk_stopped(struct sbx_manager *m, const char *id) {
        for (struct sbx *sb = m->list; sb; sb = sb->next)
                if (!strcmp(sb->id, id))
                        return sb->disk_stopped;
        return false;
}

static void timer_closed(uv_handle_t *h) {
        struct sbx_manager *m = h->data;
        m->disk_timer_open = false;
}

void sbx_diskguard_free(struct sbx_manager *m) {
        if (!m->disk_timer_open)
                return;
        uv_timer_stop(&m->disk_timer);
        uv_close((uv_handle_t *) &m->disk_timer, timer_closed);
        while (m->disk_timer_open)
                uv_run(m->loop, UV_RUN_ONCE);
}
