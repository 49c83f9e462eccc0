/* SPDX-License-Identifier: Apache-2.0 */
/* Snapshots (sandbox.h: sbx_snapshot): a running sandbox's writable layer
 * becomes a new layer on top of its image's, and that stack a new image.
 *
 *   freeze (cgroup freezer; a paused sandbox stays paused) -> pack the
 *   overlay upper dir into a tar on a worker thread (image.h:
 *   img_pack_dir: by fd, no symlink followed, whiteouts and opaque dirs as
 *   OCI says, deterministic) -> thaw -> unpack that tar as a layer in
 *   warren-unpack like any layer (content addressed: an unchanged layer
 *   is stored once) -> commit the image: the base image's layers + the
 *   new one, the base's config.
 *
 * The sandbox keeps running (frozen only while its upper dir is read).
 * What lives outside the writable layer is not in the snapshot: /tmp and
 * /run (tmpfs), volumes, processes and their memory. The upper dir is
 * read from the host whether it is on the state dir's file system or on
 * the sandbox's disk image (rt_sandbox_upper_open). */
#include "sandbox/sandbox-internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "basic/log.h"
#include "basic/macro.h"
#include "image/image.h"

struct snap {
        struct sbx_manager *m;
        char id[32];
        char image_id[80];
        char *name; /* image name, or NULL */
        bool was_paused;
        int upper_fd, spool_fd;
        uv_work_t work;
        int r;
        struct wr_err e;
        struct img_pack_stats stats;
        uint32_t id_base; /* its user namespace range (0: none) */
        bool priv;        /* --privsep: warren-priv's warren-upper packs (ref) */
        struct sbx_upper_ref ref;
        uint64_t t0, t_frozen;
        sbx_snapshot_done_fn done;
        void *userdata;
};

static void snap_free(struct snap *s) {
        if (!s)
                return;
        safe_close(s->upper_fd);
        safe_close(s->spool_fd);
        free(s->name);
        free(s);
}

static void fail(struct snap *s, int r, const struct wr_err *e) {
        s->done(r, NULL, e, s->userdata);
        snap_free(s);
}

static void layer_done(int r, const char *diff_id, const struct wr_err *e, void *userdata) {
        struct snap *s = userdata;
        if (r < 0)
                return fail(s, r, e);
        struct wr_err ce = {0};
        struct img_info *base = NULL, *img = NULL;
        r = img_store_resolve(s->m->images, s->image_id, &base, &ce);
        if (r < 0) {
                err_prefix(&ce, r, "snapshot: the sandbox's image");
                return fail(s, r, &ce);
        }
        char source[64];
        snprintf(source, sizeof(source), "snapshot of %s", s->id);
        r = img_store_commit_on(s->m->images, s->name, base, NULL, diff_id, source, &img, &ce);
        img_info_free(base);
        if (r < 0)
                return fail(s, r, &ce);
        log_info("sandbox %s: snapshot %s (%llu entries, %llu bytes, %s frozen %.1f ms, total "
                 "%.1f ms)",
                 s->id, img->id, (unsigned long long) s->stats.entries,
                 (unsigned long long) s->stats.bytes, s->was_paused ? "was paused," : "",
                 (double) s->t_frozen / 1e6, (double) (sbx_mono_ns() - s->t0) / 1e6);
        s->done(0, img, NULL, s->userdata);
        img_info_free(img);
        snap_free(s);
}

static void pack_work(uv_work_t *w) {
        struct snap *s = w->data;
        /* owners as the sandbox sees them: the layer's ids are those of
         * the image's own layers, whatever range the sandbox had */
        if (s->priv) {
                s->r = sbx_upper_pack(s->m, &s->ref, s->spool_fd, &s->stats, &s->e);
                if (s->r < 0)
                        err_prefix(&s->e, s->r, "snapshot");
                return;
        }
        s->r = img_pack_dir_ids(s->upper_fd, s->spool_fd, s->id_base,
                                s->id_base ? SBX_UIDS_COUNT : 0, &s->stats, &s->e);
}

static void pack_done(uv_work_t *w, int status) {
        struct snap *s = w->data;
        struct sbx *sb = sbx_find_live(s->m, s->id);
        if (sb && !s->was_paused && !sb->paused) {
                struct wr_err fe = {0};
                if (sbx_rt_freeze(s->m, sb->rt, false, &fe) < 0)
                        log_warn("sandbox %s: thaw after the snapshot: %s", s->id, fe.msg);
        }
        s->t_frozen = sbx_mono_ns() - s->t0;
        if (status < 0 || s->r < 0) {
                if (status < 0)
                        err_set(&s->e, status, "snapshot: worker: %s", uv_strerror(status));
                return fail(s, status < 0 ? status : s->r, &s->e);
        }
        if (lseek(s->spool_fd, 0, SEEK_SET) < 0) {
                err_set(&s->e, -errno, "snapshot: spool: %m");
                return fail(s, -errno, &s->e);
        }
        struct wr_err e = {0};
        int r = img_layer_unpack(s->m->images, s->m->loop, s->spool_fd, NULL, layer_done, s, NULL,
                                 &e);
        if (r < 0)
                return fail(s, r, &e);
        s->spool_fd = safe_close(s->spool_fd); /* the job has its own */
}

int sbx_upper_open(struct sbx *sb, const char *what, struct wr_err *e) {
        int fd = rt_sandbox_upper_open(sb->rt, e);
        return fd < 0 ? err_prefix(e, fd, "%s", what) : fd;
}

int sbx_snapshot(struct sbx_manager *m, const char *key, const char *name,
                 sbx_snapshot_done_fn done, void *userdata, struct wr_err *e) {
        struct sbx *sb;
        int r = sbx_running(m, key, &sb, e);
        if (r < 0)
                return r;
        if (!m->images)
                return err_setx(e, -ENODEV, WR_STATUS_FAILED_PRECONDITION, WR_FAULT_SERVICE,
                                "snapshot: the image store is unavailable");
        struct snap *s = calloc(1, sizeof(*s));
        if (!s || (name && *name && !(s->name = strdup(name)))) {
                free(s);
                return err_set(e, -ENOMEM, "snapshot: out of memory");
        }
        s->m = m;
        s->done = done;
        s->userdata = userdata;
        s->upper_fd = s->spool_fd = -EBADF;
        s->t0 = sbx_mono_ns();
        snprintf(s->id, sizeof(s->id), "%s", sb->id);
        snprintf(s->image_id, sizeof(s->image_id), "%s", sb->image_id);
        s->id_base = sb->uid_slot >= 0 ? sbx_uids_base(sb->uid_slot) : 0;
        r = sbx_upper_ref(m, sb, "snapshot", &s->ref, e);
        if (r < 0 && r != -ENOENT)
                goto fail;
        s->priv = r == 0;
        if (!s->priv)
                s->upper_fd = sbx_upper_open(sb, "snapshot", e);
        if (!s->priv && s->upper_fd < 0) {
                r = s->upper_fd;
                goto fail;
        }
        char path[PATH_MAX];
        snprintf(path, sizeof(path), "%s/tmp", m->state_dir);
        s->spool_fd = open(path, O_RDWR | O_TMPFILE | O_CLOEXEC, 0600);
        if (s->spool_fd < 0) {
                r = err_set(e, -errno, "snapshot: spool in %s: %m", path);
                goto fail;
        }
        s->was_paused = sb->paused;
        if (!s->was_paused && (r = sbx_rt_freeze(m, sb->rt, true, e)) < 0)
                goto fail;
        s->work.data = s;
        if ((r = uv_queue_work(m->loop, &s->work, pack_work, pack_done)) < 0) {
                if (!s->was_paused)
                        (void) sbx_rt_freeze(m, sb->rt, false, NULL);
                r = err_set(e, r, "snapshot: worker: %s", uv_strerror(r));
                goto fail;
        }
        return 0;
fail:
        snap_free(s);
        return r;
}
