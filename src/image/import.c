/* SPDX-License-Identifier: Apache-2.0 */
/* `docker import`: spool an uploaded tarball to an anonymous file under
 * state_dir/tmp, unpack it as one layer in the helper, commit the image. */
#include "image/image-internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "store/images.h"

struct img_import {
        struct img_store *s;
        uv_loop_t *loop;
        char name[400]; /* normalized, "" = unnamed */
        struct img_config cfg;
        int spool_fd;
        uint64_t size;
        struct img_layer_job *job;
        img_import_done_fn done;
        void *userdata;
        struct img_info *info;
        bool finishing;
};

static char **strv_dup(char *const *v, size_t n) {
        char **out = calloc(n + 1, sizeof(*out));
        if (!out)
                return NULL;
        for (size_t i = 0; i < n; i++) {
                out[i] = strdup(v[i] ? v[i] : "");
                if (!out[i]) {
                        for (size_t k = 0; k < i; k++)
                                free(out[k]);
                        free(out);
                        return NULL;
                }
        }
        return out;
}

static int config_copy(struct img_config *dst, const struct img_config *src) {
        memset(dst, 0, sizeof(*dst));
        if (!src)
                return 0;
        dst->env = strv_dup(src->env, src->n_env);
        dst->n_env = dst->env ? src->n_env : 0;
        dst->entrypoint = strv_dup(src->entrypoint, src->n_entrypoint);
        dst->n_entrypoint = dst->entrypoint ? src->n_entrypoint : 0;
        dst->cmd = strv_dup(src->cmd, src->n_cmd);
        dst->n_cmd = dst->cmd ? src->n_cmd : 0;
        dst->working_dir = src->working_dir ? strdup(src->working_dir) : NULL;
        dst->user = src->user ? strdup(src->user) : NULL;
        if (!dst->env || !dst->entrypoint || !dst->cmd || (src->working_dir && !dst->working_dir) ||
            (src->user && !dst->user)) {
                img_config_clear(dst);
                return -ENOMEM;
        }
        return 0;
}

DEFINE_TRIVIAL_CLEANUP_FUNC(struct img_import *, img_import_free);

int img_import_new(struct img_store *s, uv_loop_t *loop, const char *name,
                   const struct img_config *cfg, struct img_import **ret, struct wr_err *e) {
        _cleanup_(img_import_freep) struct img_import *imp = calloc(1, sizeof(*imp));
        if (!imp)
                return err_set(e, -ENOMEM, "import: out of memory");
        imp->s = s;
        imp->loop = loop;
        imp->spool_fd = -EBADF;
        int r;
        if (name && *name && (r = img_name_normalize(name, imp->name, sizeof(imp->name), e)) < 0)
                return r;
        if (config_copy(&imp->cfg, cfg) < 0)
                return err_set(e, -ENOMEM, "import: out of memory");
        char spool[32] = "import-";
        img_random_name(spool + 7);
        imp->spool_fd = openat(s->tmp_fd, spool, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
        if (imp->spool_fd < 0)
                return err_set(e, -errno, "import: create spool file: %m");
        /* anonymous from here on: nothing to clean up after a crash */
        (void) unlinkat(s->tmp_fd, spool, 0);
        *ret = TAKE_PTR(imp);
        return 0;
}

int img_import_write(struct img_import *imp, const void *data, size_t n, struct wr_err *e) {
        if (imp->finishing)
                return err_set(e, -EALREADY, "import: upload already finished");
        const char *p = data;
        while (n > 0) {
                ssize_t w = write(imp->spool_fd, p, n);
                if (w < 0) {
                        if (errno == EINTR)
                                continue;
                        int r = -errno;
                        return err_setx(e, r,
                                        r == -ENOSPC || r == -EDQUOT ? WR_STATUS_RESOURCE_EXHAUSTED
                                                                     : WR_STATUS_INTERNAL,
                                        WR_FAULT_SERVICE, "import: spool upload: %s", strerror(-r));
                }
                p += w;
                n -= (size_t) w;
                imp->size += (uint64_t) w;
        }
        return 0;
}

uint64_t img_import_size(const struct img_import *imp) {
        return imp->size;
}

static void layer_done(int r, const char *diff_id, const struct wr_err *le, void *userdata) {
        struct img_import *imp = userdata;
        struct wr_err e = {0};
        imp->job = NULL;
        closep(&imp->spool_fd);
        if (r < 0) {
                imp->done(imp, r, NULL, le, imp->userdata);
                return;
        }
        char *ids[] = {(char *) diff_id};
        r = img_store_commit_image(imp->s, imp->name[0] ? imp->name : NULL, &imp->cfg, ids, 1,
                                   "import", &imp->info, &e);
        if (r < 0) {
                /* nothing may stay behind for a refused image */
                if (store_layer_refcount(imp->s->db, diff_id, NULL) == 0)
                        (void) img_layer_remove_unused(imp->s, diff_id, NULL);
                imp->done(imp, r, NULL, &e, imp->userdata);
                return;
        }
        imp->done(imp, 0, imp->info, &e, imp->userdata);
}

int img_import_finish(struct img_import *imp, img_import_done_fn done, void *userdata,
                      struct wr_err *e) {
        if (imp->finishing)
                return err_set(e, -EALREADY, "import: already finishing");
        if (imp->size == 0)
                return err_setx(e, -EINVAL, WR_STATUS_INVALID_ARGUMENT, WR_FAULT_CLIENT,
                                "import: no data received");
        if (lseek(imp->spool_fd, 0, SEEK_SET) < 0)
                return err_set(e, -errno, "import: rewind spool: %m");
        imp->done = done;
        imp->userdata = userdata;
        imp->finishing = true;
        int r = img_layer_unpack(imp->s, imp->loop, imp->spool_fd, NULL, layer_done, imp, &imp->job,
                                 e);
        if (r < 0) {
                imp->finishing = false;
                return err_prefix(e, r, "import");
        }
        return 0;
}

void img_import_free(struct img_import *imp) {
        if (!imp)
                return;
        if (imp->job)
                img_layer_job_cancel(imp->job);
        closep(&imp->spool_fd);
        img_config_clear(&imp->cfg);
        img_info_free(imp->info);
        free(imp);
}
