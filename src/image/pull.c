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

#include <jansson.h>

#include "image/image-internal.h"
#include "image/ref.h"
#include "image/registry.h"

#define MAX_PARALLEL_DOWNLOADS 3
#define PROGRESS_MS 100
#define MAX_LAYERS 512
#define MAX_CONFIG (8u << 20)

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

#define MT_OCI_INDEX "application/vnd.oci.image.index.v1+json"
#define MT_DOCKER_LIST "application/vnd.docker.distribution.manifest.list.v2+json"
#define MT_OCI_MANIFEST "application/vnd.oci.image.manifest.v1+json"
#define MT_DOCKER_MANIFEST "application/vnd.docker.distribution.manifest.v2+json"
#define ACCEPT_MANIFESTS                                                                           \
        MT_OCI_INDEX ", " MT_DOCKER_LIST ", " MT_OCI_MANIFEST ", " MT_DOCKER_MANIFEST

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
        char **diff_ids;
        struct img_config cfg;
        uv_timer_t *timer;
        size_t downloading, remaining;
        uint64_t last_sum;
        int last_states;
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

/* Close *fd once and mark it closed (closep leaves the number in place). */
static void fd_close(int *fd) {
        if (*fd >= 0)
                close(*fd);
        *fd = -EBADF;
}

static void job_abort(struct job *j);

/* --- context --- */

static int ctx_get(struct img_store *s, struct img_pull_ctx **ret, struct wr_err *e) {
        if (!s->pull) {
                s->pull = calloc(1, sizeof(*s->pull));
                if (!s->pull)
                        return err_set(e, -ENOMEM, "pull: out of memory");
                s->pull->s = s;
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
                fd_close(&l->fd);
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
        for (size_t i = 0; i < j->n_layers && j->diff_ids; i++)
                free(j->diff_ids[i]);
        free(j->diff_ids);
        free(j->layers);
        img_config_clear(&j->cfg);
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

static void job_failf(struct job *j, int code, int status, int fault, const char *fmt, ...)
        _printf_(5, 6);

static void job_failf(struct job *j, int code, int status, int fault, const char *fmt, ...) {
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
        int r = img_store_commit_image(j->ctx->s, j->name[0] ? j->name : NULL, &j->cfg, j->diff_ids,
                                       j->n_layers, "pull", &info, &e);
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
                fd_close(&l->fd);
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
        fd_close(&l->fd);
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
                fd_close(&l->fd);
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

static int json_strv(json_t *a, char ***ret, size_t *n_ret) {
        *ret = NULL;
        *n_ret = 0;
        if (!a || json_is_null(a))
                return 0;
        if (!json_is_array(a))
                return -EINVAL;
        size_t n = json_array_size(a);
        char **v = calloc(n + 1, sizeof(*v));
        if (!v)
                return -ENOMEM;
        for (size_t i = 0; i < n; i++) {
                const char *s = json_string_value(json_array_get(a, i));
                if (!s || !(v[i] = strdup(s))) {
                        for (size_t k = 0; k < i; k++)
                                free(v[k]);
                        free(v);
                        return s ? -ENOMEM : -EINVAL;
                }
        }
        *ret = v;
        *n_ret = n;
        return 0;
}

static int parse_config(struct job *j, const char *body, size_t len, struct wr_err *e) {
        json_error_t je;
        json_t *root = json_loadb(body, len, 0, &je);
        int r = 0;
        if (!json_is_object(root)) {
                r = err_setx(e, -EINVAL, WR_STATUS_INVALID_ARGUMENT, WR_FAULT_WORKLOAD,
                             "image config %.19s... is not a JSON object", j->config_digest);
                goto out;
        }
        json_t *ids = json_object_get(json_object_get(root, "rootfs"), "diff_ids");
        if (!json_is_array(ids) || json_array_size(ids) != j->n_layers) {
                r = err_setx(e, -EINVAL, WR_STATUS_INVALID_ARGUMENT, WR_FAULT_WORKLOAD,
                             "image config lists %zu diff ids for %zu layers",
                             json_is_array(ids) ? json_array_size(ids) : 0, j->n_layers);
                goto out;
        }
        j->diff_ids = calloc(j->n_layers + 1, sizeof(char *));
        if (!j->diff_ids) {
                r = err_set(e, -ENOMEM, "out of memory");
                goto out;
        }
        for (size_t i = 0; i < j->n_layers; i++) {
                const char *d = json_string_value(json_array_get(ids, i));
                if (!d || !img_digest_valid(d)) {
                        r = err_setx(e, -EINVAL, WR_STATUS_INVALID_ARGUMENT, WR_FAULT_WORKLOAD,
                                     "image config: malformed diff id %zu", i);
                        goto out;
                }
                if (!(j->diff_ids[i] = strdup(d))) {
                        r = err_set(e, -ENOMEM, "out of memory");
                        goto out;
                }
                snprintf(j->layers[i].diff_id, sizeof(j->layers[i].diff_id), "%s", d);
        }
        json_t *c = json_object_get(root, "config");
        if (c && !json_is_null(c)) {
                if (!json_is_object(c)) {
                        r = err_setx(e, -EINVAL, WR_STATUS_INVALID_ARGUMENT, WR_FAULT_WORKLOAD,
                                     "image config: \"config\" is not an object");
                        goto out;
                }
                if (json_strv(json_object_get(c, "Env"), &j->cfg.env, &j->cfg.n_env) < 0 ||
                    json_strv(json_object_get(c, "Entrypoint"), &j->cfg.entrypoint,
                              &j->cfg.n_entrypoint) < 0 ||
                    json_strv(json_object_get(c, "Cmd"), &j->cfg.cmd, &j->cfg.n_cmd) < 0) {
                        r = err_setx(e, -EINVAL, WR_STATUS_INVALID_ARGUMENT, WR_FAULT_WORKLOAD,
                                     "image config: Env, Entrypoint and Cmd must be string arrays");
                        goto out;
                }
                const char *wd = json_string_value(json_object_get(c, "WorkingDir"));
                const char *user = json_string_value(json_object_get(c, "User"));
                if (wd && *wd && !(j->cfg.working_dir = strdup(wd)))
                        r = err_set(e, -ENOMEM, "out of memory");
                if (user && *user && !(j->cfg.user = strdup(user)))
                        r = err_set(e, -ENOMEM, "out of memory");
        }
out:
        json_decref(root);
        return r;
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
        size_t len = 0;
        const char *body = img_reg_req_body(req, &len);
        struct wr_err pe = {0};
        r = parse_config(j, body, len, &pe);
        if (r < 0) {
                err_prefix(&pe, r, "pull %s", j->key);
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

static void fetch_manifest(struct job *j, const char *object, bool by_digest);

static bool media_is(const char *mt, const char *want) {
        size_t n = strlen(want);
        return !strncmp(mt, want, n) && (mt[n] == '\0' || mt[n] == ';' || mt[n] == ' ');
}

static bool layer_media_ok(const char *mt) {
        if (!mt)
                return true; /* tolerated: the unpacker detects the compression */
        static const char *const ok[] = {
                "application/vnd.oci.image.layer.v1.tar",
                "application/vnd.oci.image.layer.v1.tar+gzip",
                "application/vnd.oci.image.layer.v1.tar+zstd",
                "application/vnd.docker.image.rootfs.diff.tar.gzip",
                "application/vnd.docker.image.rootfs.diff.tar",
                "application/vnd.oci.image.layer.nondistributable.v1.tar",
                "application/vnd.oci.image.layer.nondistributable.v1.tar+gzip",
                "application/vnd.oci.image.layer.nondistributable.v1.tar+zstd",
                "application/vnd.docker.image.rootfs.foreign.diff.tar.gzip",
        };
        for (size_t i = 0; i < ELEMENTSOF(ok); i++)
                if (!strcmp(mt, ok[i]))
                        return true;
        return false;
}

/* An index or manifest list: pick linux/HOST_ARCH. */
static void pick_platform(struct job *j, json_t *root) {
        json_t *ms = json_object_get(root, "manifests");
        char seen[300] = "";
        size_t n = json_array_size(ms);
        for (size_t i = 0; i < n; i++) {
                json_t *m = json_array_get(ms, i);
                json_t *pl = json_object_get(m, "platform");
                const char *os = json_string_value(json_object_get(pl, "os"));
                const char *arch = json_string_value(json_object_get(pl, "architecture"));
                const char *digest = json_string_value(json_object_get(m, "digest"));
                if (!os || !arch)
                        continue;
                if (!strcmp(os, "linux") && !strcmp(arch, HOST_ARCH) && digest &&
                    img_digest_valid(digest)) {
                        j->platform_resolved = true;
                        fetch_manifest(j, digest, true);
                        return;
                }
                size_t sl = strlen(seen);
                if (sl + strlen(os) + strlen(arch) + 4 < sizeof(seen))
                        snprintf(seen + sl, sizeof(seen) - sl, "%s%s/%s", sl ? ", " : "", os, arch);
        }
        job_failf(j, -ENOENT, WR_STATUS_NOT_FOUND, WR_FAULT_CLIENT,
                  "image %s has no linux/" HOST_ARCH " variant (platforms: %s)", j->key,
                  seen[0] ? seen : "none");
}

static void on_manifest(struct img_reg_req *req, int r, const struct wr_err *e, void *userdata) {
        struct job *j = userdata;
        j->req = NULL;
        if (r < 0) {
                job_fail(j, e);
                return;
        }
        size_t len = 0;
        const char *body = img_reg_req_body(req, &len);
        const char *ct = img_reg_req_content_type(req);
        json_error_t je;
        json_t *root = json_loadb(body, len, 0, &je);
        if (!json_is_object(root)) {
                json_decref(root);
                job_failf(j, -EINVAL, WR_STATUS_INVALID_ARGUMENT, WR_FAULT_WORKLOAD,
                          "pull %s: the registry sent a manifest that is not JSON (%s)", j->key,
                          ct);
                return;
        }
        const char *mt = json_string_value(json_object_get(root, "mediaType"));
        if (!mt || !*mt)
                mt = ct;
        json_int_t schema = json_integer_value(json_object_get(root, "schemaVersion"));
        bool is_index = media_is(mt, MT_OCI_INDEX) || media_is(mt, MT_DOCKER_LIST) ||
                        (!json_object_get(root, "config") &&
                         json_is_array(json_object_get(root, "manifests")));
        if (schema == 1 || media_is(mt, "application/vnd.docker.distribution.manifest.v1")) {
                json_decref(root);
                job_failf(j, -EPROTONOSUPPORT, WR_STATUS_FAILED_PRECONDITION, WR_FAULT_CLIENT,
                          "pull %s: Docker schema 1 manifests are not supported (re-push the "
                          "image with a current client)",
                          j->key);
                return;
        }
        if (is_index) {
                if (j->platform_resolved) {
                        json_decref(root);
                        job_failf(j, -EINVAL, WR_STATUS_INVALID_ARGUMENT, WR_FAULT_WORKLOAD,
                                  "pull %s: nested image indexes are not supported", j->key);
                        return;
                }
                pick_platform(j, root);
                json_decref(root);
                return;
        }
        json_t *config = json_object_get(root, "config");
        json_t *layers = json_object_get(root, "layers");
        const char *cd = json_string_value(json_object_get(config, "digest"));
        size_t n = json_array_size(layers);
        if (!cd || !img_digest_valid(cd) || !json_is_array(layers) || n == 0 || n > MAX_LAYERS) {
                json_decref(root);
                job_failf(j, -EINVAL, WR_STATUS_INVALID_ARGUMENT, WR_FAULT_WORKLOAD,
                          "pull %s: malformed image manifest (want a sha256 config digest and "
                          "1..%d layers)",
                          j->key, MAX_LAYERS);
                return;
        }
        snprintf(j->config_digest, sizeof(j->config_digest), "%s", cd);
        json_t *csz = json_object_get(config, "size");
        size_t config_max = MAX_CONFIG;
        if (json_is_integer(csz) && json_integer_value(csz) > 0 &&
            (uint64_t) json_integer_value(csz) < MAX_CONFIG)
                config_max = (size_t) json_integer_value(csz); /* no more than listed */
        j->layers = calloc(n, sizeof(*j->layers));
        if (!j->layers) {
                json_decref(root);
                job_failf(j, -ENOMEM, 0, WR_FAULT_SERVICE, "out of memory");
                return;
        }
        j->n_layers = n;
        for (size_t i = 0; i < n; i++) {
                struct layer *l = &j->layers[i];
                json_t *lj = json_array_get(layers, i);
                const char *d = json_string_value(json_object_get(lj, "digest"));
                const char *lmt = json_string_value(json_object_get(lj, "mediaType"));
                json_t *sz = json_object_get(lj, "size");
                l->job = j;
                l->idx = i;
                l->fd = -EBADF;
                if (!d || !img_digest_valid(d) || !layer_media_ok(lmt) ||
                    json_object_get(lj, "urls")) {
                        json_decref(root);
                        job_failf(j, -EINVAL, WR_STATUS_INVALID_ARGUMENT, WR_FAULT_WORKLOAD,
                                  "pull %s: layer %zu: unsupported (media type %.100s%s)", j->key,
                                  i + 1, lmt ? lmt : "none",
                                  d && img_digest_valid(d) ? "" : ", bad digest");
                        return;
                }
                snprintf(l->digest, sizeof(l->digest), "%s", d);
                l->size = json_is_integer(sz) && json_integer_value(sz) > 0
                                  ? (uint64_t) json_integer_value(sz)
                                  : 0;
        }
        json_decref(root);
        j->stage = ST_CONFIG;
        struct img_reg_fetch f = {
                .ref = &j->ref,
                .kind = "blobs",
                .object = j->config_digest,
                .fd = -1,
                .max_body = config_max,
                .expect_digest = j->config_digest,
                .retry = true,
        };
        struct wr_err fe = {0};
        r = img_reg_fetch_start(j->ctx->reg, &f, on_config, j, &j->req, &fe);
        if (r < 0)
                job_fail(j, &fe);
}

static void fetch_manifest(struct job *j, const char *object, bool by_digest) {
        struct img_reg_fetch f = {
                .ref = &j->ref,
                .kind = "manifests",
                .object = object,
                .accept = ACCEPT_MANIFESTS,
                .fd = -1,
                .expect_digest = by_digest ? object : NULL,
                .retry = true,
        };
        struct wr_err e = {0};
        int r = img_reg_fetch_start(j->ctx->reg, &f, on_manifest, j, &j->req, &e);
        if (r < 0)
                job_fail(j, &e);
}

/* --- entry points --- */

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
        struct img_pull *p = calloc(1, sizeof(*p));
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
                        *ret = p;
                        return 0;
                }

        struct job *j = calloc(1, sizeof(*j));
        if (!j) {
                free(p);
                return err_set(e, -ENOMEM, "pull: out of memory");
        }
        j->ctx = ctx;
        j->loop = loop;
        j->ref = pr;
        snprintf(j->key, sizeof(j->key), "%s", key);
        (void) img_ref_local_name(&pr, j->name, sizeof(j->name));
        j->timer = calloc(1, sizeof(*j->timer));
        if (!j->timer) {
                free(j);
                free(p);
                return err_set(e, -ENOMEM, "pull: out of memory");
        }
        uv_timer_init(loop, j->timer);
        j->timer->data = j;
        uv_timer_start(j->timer, on_tick, PROGRESS_MS, PROGRESS_MS);
        p->job = j;
        j->subs = p;
        j->next = ctx->jobs;
        ctx->jobs = j;

        struct img_reg_fetch f = {
                .ref = &j->ref,
                .kind = "manifests",
                .object = img_ref_manifest_ref(&pr),
                .accept = ACCEPT_MANIFESTS,
                .fd = -1,
                .expect_digest = pr.digest[0] ? pr.digest : NULL,
                .retry = true,
        };
        r = img_reg_fetch_start(ctx->reg, &f, on_manifest, j, &j->req, e);
        if (r < 0) {
                j->subs = NULL;
                free(p);
                job_abort(j);
                return r;
        }
        *ret = p;
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
