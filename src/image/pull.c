/* SPDX-License-Identifier: Apache-2.0 */
/* Pull orchestration (see pull.h): one shared job per reference in flight,
 * any number of waiters (struct img_pull) attached to it. */
#include "image/pull.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "image/image-internal.h"
#include "image/manifest.h"
#include "image/ref.h"
#include "image/registry.h"

#define MAX_PARALLEL_DOWNLOADS 3
#define PROGRESS_MS 100

#if defined(__x86_64__)
#define HOST_ARCH "amd64"
#elif defined(__aarch64__)
#define HOST_ARCH "arm64"
#elif defined(__i386__)
#define HOST_ARCH "386"
#elif defined(__powerpc64__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
#define HOST_ARCH "ppc64le"
#elif defined(__s390x__)
#define HOST_ARCH "s390x"
#elif defined(__riscv) && __riscv_xlen == 64
#define HOST_ARCH "riscv64"
#else
#define HOST_ARCH "amd64"
#endif

struct img_pull_ctx {
        struct img_store *s;
        struct img_registry *reg; /* created on the first pull (needs the loop) */
        char *registry_config;
        char *docker_config;
        bool loopback_only; /* refuse registries (and mirrors) off loopback */
        struct job *jobs;
};

enum lstate {
        L_WAITING = 0,
        L_DOWNLOADING,
        L_VERIFYING,
        L_EXTRACTING,
        L_DONE,
        L_CACHED,
};

static const char *const lstate_names[] = {
        [L_WAITING] = "waiting",     [L_DOWNLOADING] = "downloading",
        [L_VERIFYING] = "verifying", [L_EXTRACTING] = "extracting",
        [L_DONE] = "done",           [L_CACHED] = "cached",
};

struct job;

struct layer {
        struct job *job;
        size_t idx;
        char digest[72];
        char diff_id[72];
        uint64_t size;
        enum lstate st;
        uint64_t done_bytes;
        int fd;
        struct img_reg_req *req;
        struct img_layer_job *ujob;
        bool ours; /* unpacked by this job */
};

enum stage {
        ST_MANIFEST = 0,
        ST_CONFIG,
        ST_LAYERS,
};

struct job {
        struct img_pull_ctx *ctx;
        uv_loop_t *loop;
        struct job *next;
        char key[600];
        struct img_ref ref;
        char name[512]; /* local name, "" = none */
        struct img_pull *subs;
        unsigned emitting;
        enum stage stage;
        struct img_reg_req *req; /* manifest or config */
        bool platform_resolved;
        char config_digest[72];
        struct layer *layers;
        size_t n_layers;
        struct img_image_config *conf; /* the parsed config blob, once fetched */
        uv_timer_t *timer;
        size_t downloading, remaining;
        uint64_t last_sum;
        bool dirty;
};

struct img_pull {
        struct job *job;
        struct img_pull *next;
        img_pull_progress_fn progress;
        img_pull_done_fn done;
        void *userdata;
        bool cancelled;
};

static void job_abort(struct job *j);

/* --- context --- */

static int ctx_get(struct img_store *s, struct img_pull_ctx **ret, struct wr_err *e) {
        if (!s->pull) {
                s->pull = calloc(1, sizeof(*s->pull));
                if (!s->pull)
                        return err_set(e, -ENOMEM, "pull: out of memory");
                s->pull->s = s;
                s->pull_free = img_pull_ctx_free; /* image.c calls it without knowing pull.c */
        }
        *ret = s->pull;
        return 0;
}

void img_pull_ctx_free(struct img_pull_ctx *ctx) {
        if (!ctx)
                return;
        img_registry_free(ctx->reg);
        free(ctx->registry_config);
        free(ctx->docker_config);
        free(ctx);
}

void img_pull_shutdown(struct img_store *s) {
        if (!s || !s->pull)
                return;
        while (s->pull->jobs)
                job_abort(s->pull->jobs);
        img_registry_free(s->pull->reg);
        s->pull->reg = NULL;
}

int img_pull_configure(struct img_store *s, const char *registry_config, const char *docker_config,
                       struct wr_err *e) {
        struct img_pull_ctx *ctx = NULL;
        int r = ctx_get(s, &ctx, e);
        if (r < 0)
                return r;
        struct img_registry *check = NULL;
        r = img_registry_new(NULL, registry_config, docker_config, &check, e);
        if (r < 0)
                return r;
        img_registry_free(check);
        if (ctx->jobs)
                return err_set(e, -EBUSY, "pull: cannot reconfigure while pulls run");
        char *rc = registry_config && *registry_config ? strdup(registry_config) : NULL;
        char *dc = docker_config && *docker_config ? strdup(docker_config) : NULL;
        if ((registry_config && *registry_config && !rc) ||
            (docker_config && *docker_config && !dc)) {
                free(rc);
                free(dc);
                return err_set(e, -ENOMEM, "pull: out of memory");
        }
        free(ctx->registry_config);
        free(ctx->docker_config);
        ctx->registry_config = rc;
        ctx->docker_config = dc;
        img_registry_free(ctx->reg);
        ctx->reg = NULL;
        return 0;
}

int img_pull_local_name(const char *ref, char *out, size_t outsz, struct wr_err *e) {
        struct img_ref r;
        int k = img_ref_parse(ref, &r, e);
        if (k < 0)
                return k;
        k = img_ref_local_name(&r, out, outsz);
        if (k == -ENOENT)
                return err_setx(e, -ENOENT, WR_STATUS_NOT_FOUND, WR_FAULT_CLIENT,
                                "reference \"%.200s\" has a digest only, so no local name", ref);
        if (k < 0)
                return err_setx(e, k, WR_STATUS_INVALID_ARGUMENT, WR_FAULT_CLIENT,
                                "reference \"%.200s\": name too long", ref);
        return 0;
}

/* --- progress --- */

static void on_timer_close(uv_handle_t *h) {
        free(h);
}

static void sweep(struct job *j) {
        for (struct img_pull **pp = &j->subs; *pp;) {
                struct img_pull *p = *pp;
                if (p->cancelled) {
                        *pp = p->next;
                        free(p);
                } else {
                        pp = &p->next;
                }
        }
}

static void emit(struct job *j) {
        struct img_pull_layer *ls = NULL;
        if (j->n_layers) {
                ls = calloc(j->n_layers, sizeof(*ls));
                if (!ls)
                        return;
        }
        uint64_t sum = 0;
        for (size_t i = 0; i < j->n_layers; i++) {
                struct layer *l = &j->layers[i];
                if (l->req)
                        l->done_bytes = img_reg_req_received(l->req);
                memcpy(ls[i].digest, l->digest, sizeof(ls[i].digest));
                ls[i].total_bytes = l->size;
                ls[i].done_bytes = l->done_bytes;
                ls[i].state = lstate_names[l->st];
                sum += l->done_bytes;
        }
        j->last_sum = sum;
        j->dirty = false;
        j->emitting++;
        for (struct img_pull *p = j->subs; p; p = p->next)
                if (!p->cancelled && p->progress)
                        p->progress(p, ls, j->n_layers, p->userdata);
        j->emitting--;
        free(ls);
        if (!j->emitting)
                sweep(j);
}

static void on_tick(uv_timer_t *t) {
        struct job *j = t->data;
        if (!j->subs) {
                job_abort(j); /* every waiter left during a callback */
                return;
        }
        uint64_t sum = 0;
        for (size_t i = 0; i < j->n_layers; i++)
                if (j->layers[i].req)
                        sum += img_reg_req_received(j->layers[i].req);
                else
                        sum += j->layers[i].done_bytes;
        if (j->dirty || sum != j->last_sum)
                emit(j);
}

static void set_state(struct layer *l, enum lstate st) {
        l->st = st;
        l->job->dirty = true;
}

/* --- teardown --- */

static void job_unlink(struct job *j) {
        for (struct job **pp = &j->ctx->jobs; *pp; pp = &(*pp)->next)
                if (*pp == j) {
                        *pp = j->next;
                        break;
                }
}

/* Stop everything still running; the current callback's own request or
 * unpack job must have been cleared from j first. */
static void job_stop(struct job *j) {
        if (j->req) {
                img_reg_req_cancel(j->req);
                j->req = NULL;
        }
        for (size_t i = 0; i < j->n_layers; i++) {
                struct layer *l = &j->layers[i];
                if (l->req) {
                        img_reg_req_cancel(l->req);
                        l->req = NULL;
                }
                if (l->ujob) {
                        img_layer_job_cancel(l->ujob);
                        l->ujob = NULL;
                }
                closep(&l->fd);
        }
        if (j->timer) {
                uv_timer_stop(j->timer);
                uv_close((uv_handle_t *) j->timer, on_timer_close);
                j->timer = NULL;
        }
}

static void job_free(struct job *j) {
        while (j->subs) {
                struct img_pull *p = j->subs;
                j->subs = p->next;
                free(p);
        }
        free(j->layers);
        img_image_config_free(j->conf);
        free(j);
}

static void job_abort(struct job *j) {
        job_unlink(j);
        job_stop(j);
        job_free(j);
}

/* End the job: r < 0 with e, or r = 0 with info. Waiters are told in
 * order, then everything is freed. */
static void job_finish(struct job *j, int r, const struct img_info *info, const struct wr_err *e) {
        job_unlink(j);
        job_stop(j);
        if (r < 0) {
                /* nothing stored: drop the layers this pull unpacked (unless
                 * some image uses them) */
                for (size_t i = 0; i < j->n_layers; i++)
                        if (j->layers[i].ours)
                                (void) img_layer_remove_unused(j->ctx->s, j->layers[i].diff_id,
                                                               NULL);
        } else {
                emit(j); /* the final states */
        }
        j->emitting++;
        for (struct img_pull *p = j->subs; p; p = p->next)
                if (!p->cancelled && p->done)
                        p->done(p, r, info, e, p->userdata);
        j->emitting--;
        job_free(j);
}

static void job_fail(struct job *j, const struct wr_err *e) {
        job_finish(j, e->code ? e->code : -EIO, NULL, e);
}

static void job_failf(struct job *j, int code, enum wr_status status, enum wr_fault fault,
                      const char *fmt, ...) _printf_(5, 6);

static void job_failf(struct job *j, int code, enum wr_status status, enum wr_fault fault,
                      const char *fmt, ...) {
        struct wr_err e = {0};
        char msg[WR_ERR_MSG_MAX];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(msg, sizeof(msg), fmt, ap);
        va_end(ap);
        err_setx(&e, code, status, fault, "%s", msg);
        job_fail(j, &e);
}

/* --- commit --- */

static void job_commit(struct job *j) {
        struct img_info *info = NULL;
        struct wr_err e = {0};
        int r = img_store_commit_image(j->ctx->s, j->name[0] ? j->name : NULL, &j->conf->config,
                                       j->conf->diff_ids, j->n_layers, "pull", &info, &e);
        if (r < 0) {
                err_prefix(&e, r, "pull %s", j->key);
                job_finish(j, r, NULL, &e);
                return;
        }
        job_finish(j, 0, info, NULL);
        img_info_free(info);
}

/* --- layers --- */

static void schedule(struct job *j);

static void on_unpacked(int r, const char *diff_id, const struct wr_err *e, void *userdata) {
        struct layer *l = userdata;
        struct job *j = l->job;
        l->ujob = NULL;
        if (r < 0) {
                struct wr_err ee = *e;
                err_prefix(&ee, r, "layer %zu/%zu (%.19s...)", l->idx + 1, j->n_layers, l->digest);
                job_fail(j, &ee);
                return;
        }
        l->ours = true;
        l->done_bytes = l->size;
        set_state(l, L_DONE);
        if (--j->remaining == 0)
                job_commit(j);
        else
                emit(j);
}

static void on_blob(struct img_reg_req *req, int r, const struct wr_err *e, void *userdata) {
        struct layer *l = userdata;
        struct job *j = l->job;
        l->req = NULL;
        j->downloading--;
        if (r < 0) {
                struct wr_err ee = *e;
                err_prefix(&ee, r, "layer %zu/%zu", l->idx + 1, j->n_layers);
                closep(&l->fd);
                job_fail(j, &ee);
                return;
        }
        l->done_bytes = img_reg_req_received(req);
        set_state(l, L_VERIFYING); /* the blob digest matched; the diff id is next */
        emit(j);
        if (!j->subs)   /* every waiter left during the progress callback */
                return; /* on_tick aborts */
        struct wr_err ue = {0};
        (void) lseek(l->fd, 0, SEEK_SET);
        r = img_layer_unpack(j->ctx->s, j->loop, l->fd, l->diff_id, on_unpacked, l, &l->ujob, &ue);
        closep(&l->fd);
        if (r < 0) {
                err_prefix(&ue, r, "layer %zu/%zu", l->idx + 1, j->n_layers);
                job_fail(j, &ue);
                return;
        }
        set_state(l, L_EXTRACTING);
        schedule(j);
}

static int open_tmp(struct img_store *s) {
        int fd = openat(s->tmp_fd, ".", O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
        if (fd >= 0 || (errno != EOPNOTSUPP && errno != EISDIR && errno != EINVAL))
                return fd < 0 ? -errno : fd;
        char name[40] = "blob-";
        img_random_name(name + 5);
        fd = openat(s->tmp_fd, name, O_CREAT | O_EXCL | O_RDWR | O_CLOEXEC | O_NOFOLLOW, 0600);
        if (fd < 0)
                return -errno;
        (void) unlinkat(s->tmp_fd, name, 0);
        return fd;
}

/* Start one blob download. Returns 0, or -1 when the job failed (and is
 * freed). */
static int start_download(struct layer *l) {
        struct job *j = l->job;
        struct wr_err e = {0};
        int fd = open_tmp(j->ctx->s);
        if (fd < 0) {
                job_failf(j, fd, 0, WR_FAULT_SERVICE, "pull %s: temp file in %s/tmp: %s", j->key,
                          j->ctx->s->state_dir, strerror(-fd));
                return -1;
        }
        l->fd = fd;
        struct img_reg_fetch f = {
                .ref = &j->ref,
                .kind = "blobs",
                .object = l->digest,
                .fd = fd,
                .max_size = l->size,
                .expect_digest = l->digest,
                .retry = true,
        };
        j->downloading++;
        set_state(l, L_DOWNLOADING);
        int r = img_reg_fetch_start(j->ctx->reg, &f, on_blob, l, &l->req, &e);
        if (r < 0) {
                j->downloading--;
                closep(&l->fd);
                err_prefix(&e, r, "layer %zu/%zu", l->idx + 1, j->n_layers);
                job_fail(j, &e);
                return -1;
        }
        return 0;
}

/* Start downloads up to the limit. May finish the job (on failure):
 * callers return right after. */
static void schedule(struct job *j) {
        for (size_t i = 0; i < j->n_layers && j->downloading < MAX_PARALLEL_DOWNLOADS; i++) {
                struct layer *l = &j->layers[i];
                if (l->st != L_WAITING)
                        continue;
                if (start_download(l) < 0)
                        return;
        }
}

/* --- config --- */

/* Parse the config blob of the finished request into j->conf and the
 * layers' diff ids. Errors name the pull. */
static int config_take(struct job *j, struct img_reg_req *req, struct wr_err *e) {
        size_t len = 0;
        const char *body = img_reg_req_body(req, &len);
        struct img_image_config *c = NULL;
        int r = img_config_parse(body, len, j->n_layers, &c, e);
        if (r < 0)
                return err_prefix(e, r, "pull %s", j->key);
        for (size_t i = 0; i < j->n_layers; i++)
                snprintf(j->layers[i].diff_id, sizeof(j->layers[i].diff_id), "%s", c->diff_ids[i]);
        j->conf = c;
        return 0;
}

static void on_config(struct img_reg_req *req, int r, const struct wr_err *e, void *userdata) {
        struct job *j = userdata;
        j->req = NULL;
        if (r < 0) {
                struct wr_err ee = *e;
                err_prefix(&ee, r, "image config");
                job_fail(j, &ee);
                return;
        }
        struct wr_err pe = {0};
        r = config_take(j, req, &pe);
        if (r < 0) {
                job_fail(j, &pe);
                return;
        }
        j->stage = ST_LAYERS;
        j->remaining = 0;
        char path[PATH_MAX];
        for (size_t i = 0; i < j->n_layers; i++) {
                struct layer *l = &j->layers[i];
                /* a layer listed twice is fetched once */
                bool dup = false;
                for (size_t k = 0; k < i; k++)
                        dup = dup || !strcmp(j->layers[k].diff_id, l->diff_id);
                if (dup || img_layer_path(j->ctx->s, l->diff_id, path, sizeof(path), NULL) == 0) {
                        l->st = L_CACHED;
                        l->done_bytes = l->size;
                } else {
                        l->st = L_WAITING;
                        j->remaining++;
                }
        }
        j->dirty = true;
        if (j->remaining == 0) {
                job_commit(j);
                return;
        }
        emit(j);
        if (!j->subs)
                return; /* on_tick aborts */
        schedule(j);
}

/* --- manifests --- */

static void on_manifest(struct img_reg_req *req, int r, const struct wr_err *e, void *userdata);

static int fetch_manifest(struct job *j, const char *object, bool by_digest, struct wr_err *e) {
        struct img_reg_fetch f = {
                .ref = &j->ref,
                .kind = "manifests",
                .object = object,
                .accept = IMG_ACCEPT_MANIFESTS,
                .fd = -1,
                .expect_digest = by_digest ? object : NULL,
                .retry = true,
        };
        return img_reg_fetch_start(j->ctx->reg, &f, on_manifest, j, &j->req, e);
}

/* Act on the manifest the finished request holds: for an index, fetch the
 * linux/HOST_ARCH manifest; for an image manifest, build the layer table
 * and fetch the config blob. Nothing changes in j unless this succeeds. */
static int manifest_take(struct job *j, struct img_reg_req *req, struct wr_err *e) {
        size_t len = 0;
        const char *body = img_reg_req_body(req, &len);
        _cleanup_(img_manifest_freep) struct img_manifest *m = NULL;
        int r = img_manifest_parse(body, len, img_reg_req_content_type(req), &m, e);
        if (r < 0)
                return err_prefix(e, r, "pull %s", j->key);

        if (m->kind == IMG_MANIFEST_INDEX) {
                if (j->platform_resolved)
                        return err_setx(e, -EINVAL, WR_STATUS_INVALID_ARGUMENT, WR_FAULT_WORKLOAD,
                                        "pull %s: nested image indexes are not supported", j->key);
                char seen[300];
                const struct img_manifest_platform *p =
                        img_manifest_select(m, "linux", HOST_ARCH, seen, sizeof(seen));
                if (!p)
                        return err_setx(e, -ENOENT, WR_STATUS_NOT_FOUND, WR_FAULT_CLIENT,
                                        "image %s has no linux/" HOST_ARCH
                                        " variant (platforms: %s)",
                                        j->key, seen[0] ? seen : "none");
                r = fetch_manifest(j, p->digest, true, e);
                if (r < 0)
                        return r;
                j->platform_resolved = true;
                return 0;
        }

        _cleanup_free_ struct layer *layers = calloc(m->n_layers, sizeof(*layers));
        if (!layers)
                return err_set(e, -ENOMEM, "out of memory");
        for (size_t i = 0; i < m->n_layers; i++) {
                layers[i] = (struct layer){
                        .job = j,
                        .idx = i,
                        .size = m->layers[i].size,
                        .st = L_WAITING,
                        .fd = -EBADF,
                };
                memcpy(layers[i].digest, m->layers[i].digest, sizeof(layers[i].digest));
        }
        snprintf(j->config_digest, sizeof(j->config_digest), "%s", m->config_digest);
        struct img_reg_fetch f = {
                .ref = &j->ref,
                .kind = "blobs",
                .object = j->config_digest,
                .fd = -1,
                /* no more than the manifest lists */
                .max_body = m->config_size && m->config_size < IMG_CONFIG_MAX_BODY
                                    ? (size_t) m->config_size
                                    : IMG_CONFIG_MAX_BODY,
                .expect_digest = j->config_digest,
                .retry = true,
        };
        r = img_reg_fetch_start(j->ctx->reg, &f, on_config, j, &j->req, e);
        if (r < 0)
                return r;
        j->layers = TAKE_PTR(layers);
        j->n_layers = m->n_layers;
        j->stage = ST_CONFIG;
        return 0;
}

static void on_manifest(struct img_reg_req *req, int r, const struct wr_err *e, void *userdata) {
        struct job *j = userdata;
        j->req = NULL;
        if (r < 0) {
                job_fail(j, e);
                return;
        }
        struct wr_err me = {0};
        r = manifest_take(j, req, &me);
        if (r < 0)
                job_fail(j, &me);
}

/* --- entry points --- */

DEFINE_TRIVIAL_CLEANUP_FUNC(struct job *, job_abort);

/* A job for reference pr (formatted: key) with its progress timer running,
 * not yet linked into ctx->jobs. */
static int job_new(struct img_pull_ctx *ctx, uv_loop_t *loop, const struct img_ref *pr,
                   const char *key, struct job **ret, struct wr_err *e) {
        _cleanup_(job_abortp) struct job *j = calloc(1, sizeof(*j));
        if (!j)
                return err_set(e, -ENOMEM, "pull: out of memory");
        j->ctx = ctx;
        j->loop = loop;
        j->ref = *pr;
        snprintf(j->key, sizeof(j->key), "%s", key);
        (void) img_ref_local_name(pr, j->name, sizeof(j->name));
        _cleanup_free_ uv_timer_t *t = calloc(1, sizeof(*t));
        if (!t)
                return err_set(e, -ENOMEM, "pull: out of memory");
        int r = uv_timer_init(loop, t);
        if (r < 0) /* never initialised: freed, not closed */
                return err_set(e, -EIO, "pull: progress timer: %s", uv_strerror(r));
        j->timer = TAKE_PTR(t); /* from here job_stop closes it */
        j->timer->data = j;
        r = uv_timer_start(j->timer, on_tick, PROGRESS_MS, PROGRESS_MS);
        if (r < 0)
                return err_set(e, -EIO, "pull: progress timer: %s", uv_strerror(r));
        *ret = TAKE_PTR(j);
        return 0;
}

int img_pull_set_loopback_only(struct img_store *s, bool on, struct wr_err *e) {
        struct img_pull_ctx *ctx = NULL;
        int r = ctx_get(s, &ctx, e);
        if (r < 0)
                return r;
        ctx->loopback_only = on;
        return 0;
}

int img_pull_start(struct img_store *s, uv_loop_t *loop, const char *ref,
                   img_pull_progress_fn progress, img_pull_done_fn done, void *userdata,
                   struct img_pull **ret, struct wr_err *e) {
        struct img_ref pr;
        int r = img_ref_parse(ref, &pr, e);
        if (r < 0)
                return r;
        struct img_pull_ctx *ctx = NULL;
        r = ctx_get(s, &ctx, e);
        if (r < 0)
                return r;
        if (!ctx->reg) {
                r = img_registry_new(loop, ctx->registry_config, ctx->docker_config, &ctx->reg, e);
                if (r < 0)
                        return err_prefix(e, r, "registry client");
                img_registry_set_loopback_only(ctx->reg, ctx->loopback_only);
        }
        _cleanup_free_ struct img_pull *p = calloc(1, sizeof(*p));
        if (!p)
                return err_set(e, -ENOMEM, "pull: out of memory");
        p->progress = progress;
        p->done = done;
        p->userdata = userdata;

        char key[600];
        img_ref_format(&pr, key, sizeof(key));
        for (struct job *j = ctx->jobs; j; j = j->next)
                if (!strcmp(j->key, key)) {
                        p->job = j;
                        p->next = j->subs;
                        j->subs = p;
                        j->dirty = true; /* the newcomer gets a snapshot on the next tick */
                        *ret = TAKE_PTR(p);
                        return 0;
                }

        _cleanup_(job_abortp) struct job *j = NULL;
        r = job_new(ctx, loop, &pr, key, &j, e);
        if (r < 0)
                return r;
        struct img_reg_fetch f = {
                .ref = &j->ref,
                .kind = "manifests",
                .object = img_ref_manifest_ref(&pr),
                .accept = IMG_ACCEPT_MANIFESTS,
                .fd = -1,
                .expect_digest = pr.digest[0] ? pr.digest : NULL,
                .retry = true,
        };
        r = img_reg_fetch_start(ctx->reg, &f, on_manifest, j, &j->req, e);
        if (r < 0)
                return r;
        p->job = j;
        j->subs = p;
        j->next = ctx->jobs;
        ctx->jobs = TAKE_PTR(j);
        *ret = TAKE_PTR(p);
        return 0;
}

void img_pull_cancel(struct img_pull *p) {
        if (!p || p->cancelled)
                return;
        struct job *j = p->job;
        p->cancelled = true;
        if (j->emitting)
                return; /* swept after the callbacks; on_tick aborts an empty job */
        sweep(j);
        if (!j->subs)
                job_abort(j);
}
