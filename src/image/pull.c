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
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/evp.h>

#include "basic/log.h"
#include "image/fetch.h"
#include "image/image-internal.h"
#include "image/manifest.h"
#include "image/ref.h"
#include "image/registry-internal.h"

#define MAX_PARALLEL_DOWNLOADS 3
#define PROGRESS_MS 100
#define LAYER_ID_BASE 0x10000u /* request ids of blobs: LAYER_ID_BASE + layer index */

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
        char *registry_config;
        char *docker_config;
        bool loopback_only; /* refuse registries (and mirrors) off loopback */
        struct job *jobs;
        /* A warren-fetch started ahead of the next pull (confined, config
         * read, waiting for REQ_BIND): a pull does not wait for a helper to
         * start. Made after each pull starts; dropped on reconfiguration. */
        struct img_fetcher *spare;
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
        bool fetching;         /* a REQ_BLOB is out */
        struct verify *verify; /* our own sha256 of the landed blob, running */
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
        struct img_fetcher *f; /* warren-fetch for this job */
        uint32_t req_id;       /* the manifest or config request out (0 = none) */
        uint32_t next_id;
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

static void spare_drop(struct img_pull_ctx *ctx) {
        img_fetcher_free(ctx->spare);
        ctx->spare = NULL;
}

void img_pull_ctx_free(struct img_pull_ctx *ctx) {
        if (!ctx)
                return;
        spare_drop(ctx); /* img_pull_shutdown did, while the loop ran */
        free(ctx->registry_config);
        free(ctx->docker_config);
        free(ctx);
}

void img_pull_shutdown(struct img_store *s) {
        if (!s || !s->pull)
                return;
        while (s->pull->jobs)
                job_abort(s->pull->jobs);
        spare_drop(s->pull);
}

int img_pull_configure(struct img_store *s, const char *registry_config, const char *docker_config,
                       struct wr_err *e) {
        struct img_pull_ctx *ctx = NULL;
        int r = ctx_get(s, &ctx, e);
        if (r < 0)
                return r;
        /* Validated here so a bad file is a start-up error. These are the
         * operator's own files, not registry bytes; warren-fetch parses them
         * again from the memfd each pull gets (fetch.c). */
        struct img_reg_config *check = NULL;
        r = img_reg_config_load(registry_config, docker_config, &check, e);
        if (r < 0)
                return r;
        img_reg_config_free(check);
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
        spare_drop(ctx); /* it read the old files */
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
static void verify_orphan(struct verify *v);

static void job_stop(struct job *j) {
        img_fetcher_free(j->f); /* kills warren-fetch: every download stops */
        j->f = NULL;
        j->req_id = 0;
        for (size_t i = 0; i < j->n_layers; i++) {
                struct layer *l = &j->layers[i];
                l->fetching = false;
                if (l->verify) {
                        verify_orphan(l->verify);
                        l->verify = NULL;
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

/* warrend's own check of a blob warren-fetch wrote: its sha256, computed
 * on the thread pool from the file (pread: the offset stays 0 for
 * warren-unpack). The helper checked it too; we do not take its word. */
struct verify {
        uv_work_t work;
        struct layer *layer; /* NULL once the job is gone */
        int fd;              /* a dup of the blob file */
        char want[72];
        char got[72];
        int result;
};

static void verify_orphan(struct verify *v) {
        v->layer = NULL;
        (void) uv_cancel((uv_req_t *) &v->work); /* freed in verify_after either way */
}

static void verify_work(uv_work_t *w) {
        struct verify *v = w->data;
        EVP_MD_CTX *md = EVP_MD_CTX_new();
        /* mapped and unmapped here, not malloc'ed: glibc would raise its mmap
         * threshold after the first free and keep 1 MiB resident in each
         * thread pool arena */
        const size_t bufsz = 1u << 20;
        unsigned char *buf =
                mmap(NULL, bufsz, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (buf == MAP_FAILED)
                buf = NULL;
        v->result = -ENOMEM;
        if (!md || !buf || EVP_DigestInit_ex(md, EVP_sha256(), NULL) != 1)
                goto out;
        off_t off = 0;
        for (;;) {
                ssize_t n = pread(v->fd, buf, bufsz, off);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0) {
                        v->result = -errno;
                        goto out;
                }
                if (n == 0)
                        break;
                if (EVP_DigestUpdate(md, buf, (size_t) n) != 1) {
                        v->result = -EIO;
                        goto out;
                }
                off += n;
        }
        unsigned char out[32];
        unsigned int len = 0;
        if (EVP_DigestFinal_ex(md, out, &len) != 1 || len != 32) {
                v->result = -EIO;
                goto out;
        }
        strcpy(v->got, "sha256:");
        for (int i = 0; i < 32; i++)
                snprintf(v->got + 7 + 2 * i, 3, "%02x", out[i]);
        v->result = strcmp(v->got, v->want) == 0 ? 0 : -EBADMSG;
out:
        if (buf)
                munmap(buf, bufsz);
        EVP_MD_CTX_free(md);
}

static void verify_after(uv_work_t *w, int status) {
        struct verify *v = w->data;
        struct layer *l = v->layer;
        int fd = v->fd;
        int r = status < 0 ? status : v->result;
        char got[72];
        memcpy(got, v->got, sizeof(got));
        free(v);
        close(fd);
        if (!l)
                return; /* the job ended meanwhile */
        l->verify = NULL;
        struct job *j = l->job;
        if (r == -EBADMSG) {
                job_failf(j, -EBADMSG, WR_STATUS_DATA_LOSS, WR_FAULT_WORKLOAD,
                          "pull %s: layer %zu/%zu: blob digest mismatch: the manifest says %s, the "
                          "bytes received hash to %s",
                          j->key, l->idx + 1, j->n_layers, l->digest, got);
                return;
        }
        if (r < 0) {
                job_failf(j, r, WR_STATUS_INTERNAL, WR_FAULT_SERVICE,
                          "pull %s: layer %zu/%zu: verify blob: %s", j->key, l->idx + 1,
                          j->n_layers, strerror(-r));
                return;
        }
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
        emit(j);
}

/* The helper finished writing layer l's blob: verify it, then unpack. */
static void on_blob(struct layer *l, uint64_t received) {
        struct job *j = l->job;
        l->fetching = false;
        j->downloading--;
        l->done_bytes = received;
        set_state(l, L_VERIFYING);
        emit(j);
        if (!j->subs)   /* every waiter left during the progress callback */
                return; /* on_tick aborts */
        struct verify *v = calloc(1, sizeof(*v));
        int dfd = v ? fcntl(l->fd, F_DUPFD_CLOEXEC, 3) : -1;
        if (!v || dfd < 0) {
                free(v);
                job_failf(j, -ENOMEM, WR_STATUS_INTERNAL, WR_FAULT_SERVICE,
                          "pull %s: verify layer %zu/%zu: %s", j->key, l->idx + 1, j->n_layers,
                          v ? strerror(errno) : "out of memory");
                return;
        }
        v->fd = dfd;
        v->layer = l;
        v->work.data = v;
        snprintf(v->want, sizeof(v->want), "%s", l->digest);
        if (uv_queue_work(j->loop, &v->work, verify_work, verify_after) < 0) {
                close(dfd);
                free(v);
                job_failf(j, -EIO, WR_STATUS_INTERNAL, WR_FAULT_SERVICE,
                          "pull %s: verify layer %zu/%zu: thread pool refused", j->key, l->idx + 1,
                          j->n_layers);
                return;
        }
        l->verify = v;
        schedule(j); /* the next download starts while this one is checked */
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
        j->downloading++;
        set_state(l, L_DOWNLOADING);
        int r = img_fetcher_request(j->f, IMG_FETCH_REQ_BLOB, LAYER_ID_BASE + (uint32_t) l->idx,
                                    NULL, l->digest, l->size, fd, &e);
        if (r < 0) {
                j->downloading--;
                closep(&l->fd);
                err_prefix(&e, r, "layer %zu/%zu", l->idx + 1, j->n_layers);
                job_fail(j, &e);
                return -1;
        }
        l->fetching = true;
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

/* n strings of the walk into a new NULL-terminated vector. */
static int take_strv(const struct img_fetch_rep_config *c, size_t *pos, uint32_t n, char ***ret,
                     size_t *n_ret) {
        char **v = calloc((size_t) n + 1, sizeof(char *));
        if (!v)
                return -ENOMEM;
        for (uint32_t i = 0; i < n; i++) {
                const char *s = img_fetch_strings_next(c, pos);
                v[i] = s ? strdup(s) : NULL;
                if (!v[i]) {
                        for (uint32_t k = 0; k < i; k++)
                                free(v[k]);
                        free(v);
                        return -ENOMEM;
                }
        }
        *ret = v;
        if (n_ret)
                *n_ret = n;
        return 0;
}

static int take_one(const struct img_fetch_rep_config *c, size_t *pos, uint32_t n, char **ret) {
        if (!n)
                return 0;
        const char *s = img_fetch_strings_next(c, pos);
        return s && (*ret = strdup(s)) ? 0 : -ENOMEM;
}

/* The checked config report into j->conf and the layers' diff ids. */
static int config_take(struct job *j, const struct img_fetch_rep_config *c, struct wr_err *e) {
        const uint32_t *n = c->counts;
        if (n[IMG_FETCH_F_DIFF_IDS] != j->n_layers)
                return err_setx(e, -EINVAL, WR_STATUS_INVALID_ARGUMENT, WR_FAULT_WORKLOAD,
                                "pull %s: image config lists %u layers (rootfs.diff_ids), the "
                                "manifest %zu",
                                j->key, n[IMG_FETCH_F_DIFF_IDS], j->n_layers);
        struct img_image_config *ic = calloc(1, sizeof(*ic));
        if (!ic)
                return err_set(e, -ENOMEM, "out of memory");
        struct img_config *k = &ic->config;
        size_t pos = 0;
        int r = take_strv(c, &pos, n[IMG_FETCH_F_DIFF_IDS], &ic->diff_ids, &ic->n_diff_ids);
        if (r >= 0)
                r = take_strv(c, &pos, n[IMG_FETCH_F_ENV], &k->env, &k->n_env);
        if (r >= 0)
                r = take_strv(c, &pos, n[IMG_FETCH_F_ENTRYPOINT], &k->entrypoint, &k->n_entrypoint);
        if (r >= 0)
                r = take_strv(c, &pos, n[IMG_FETCH_F_CMD], &k->cmd, &k->n_cmd);
        if (r >= 0)
                r = take_one(c, &pos, n[IMG_FETCH_F_WORKING_DIR], &k->working_dir);
        if (r >= 0)
                r = take_one(c, &pos, n[IMG_FETCH_F_USER], &k->user);
        if (r >= 0)
                r = take_strv(c, &pos, n[IMG_FETCH_F_SHELL], &k->shell, &k->n_shell);
        if (r >= 0)
                r = take_one(c, &pos, n[IMG_FETCH_F_STOP_SIGNAL], &k->stop_signal);
        if (r >= 0)
                r = take_strv(c, &pos, n[IMG_FETCH_F_LABELS], &k->labels, &k->n_labels);
        if (r >= 0)
                r = take_strv(c, &pos, n[IMG_FETCH_F_EXPOSED_PORTS], &k->exposed_ports,
                              &k->n_exposed_ports);
        if (r >= 0)
                r = take_strv(c, &pos, n[IMG_FETCH_F_HC_TEST], &k->hc_test, &k->n_hc_test);
        k->hc_interval_ns = c->hc_interval_ns;
        k->hc_timeout_ns = c->hc_timeout_ns;
        k->hc_start_period_ns = c->hc_start_period_ns;
        k->hc_start_interval_ns = c->hc_start_interval_ns;
        k->hc_retries = c->hc_retries;
        if (r < 0) {
                img_image_config_free(ic);
                return err_set(e, -ENOMEM, "out of memory");
        }
        for (size_t i = 0; i < j->n_layers; i++)
                snprintf(j->layers[i].diff_id, sizeof(j->layers[i].diff_id), "%s", ic->diff_ids[i]);
        j->conf = ic;
        return 0;
}

static void on_config(struct job *j, const struct img_fetch_rep_config *c) {
        struct wr_err pe = {0};
        int r = config_take(j, c, &pe);
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

static int fetch_manifest(struct job *j, const char *object, const char *digest, struct wr_err *e) {
        uint32_t id = ++j->next_id;
        int r = img_fetcher_request(j->f, IMG_FETCH_REQ_MANIFEST, id, object, digest, 0, -1, e);
        if (r < 0)
                return r;
        j->req_id = id;
        return 0;
}

/* An index: pick linux/HOST_ARCH (warrend decides the platform) and ask
 * for its manifest. */
static int index_take(struct job *j, const struct img_fetch_rep_index *x, struct wr_err *e) {
        if (j->platform_resolved)
                return err_setx(e, -EINVAL, WR_STATUS_INVALID_ARGUMENT, WR_FAULT_WORKLOAD,
                                "pull %s: nested image indexes are not supported", j->key);
        char seen[300] = "";
        size_t used = 0;
        for (uint32_t i = 0; i < x->n_platforms; i++) {
                const struct img_fetch_platform *p = &x->platforms[i];
                if (!strcmp(p->os, "linux") && !strcmp(p->arch, HOST_ARCH)) {
                        int r = fetch_manifest(j, p->digest, p->digest, e);
                        if (r < 0)
                                return r;
                        j->platform_resolved = true;
                        return 0;
                }
                if (used < sizeof(seen))
                        used += (size_t) snprintf(seen + used, sizeof(seen) - used, "%s%s/%s",
                                                  used ? ", " : "", p->os, p->arch);
        }
        return err_setx(e, -ENOENT, WR_STATUS_NOT_FOUND, WR_FAULT_CLIENT,
                        "image %s has no linux/" HOST_ARCH " variant (platforms: %s)", j->key,
                        seen[0] ? seen : "none");
}

/* An image manifest: the layer table, then the config blob. */
static int manifest_take(struct job *j, const struct img_fetch_rep_manifest *m, struct wr_err *e) {
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
                snprintf(layers[i].digest, sizeof(layers[i].digest), "%s", m->layers[i].digest);
        }
        snprintf(j->config_digest, sizeof(j->config_digest), "%s", m->config_digest);
        uint32_t id = ++j->next_id;
        /* no more than the manifest lists */
        uint64_t max = m->config_size && m->config_size < IMG_CONFIG_MAX_BODY ? m->config_size
                                                                              : IMG_CONFIG_MAX_BODY;
        int r = img_fetcher_request(j->f, IMG_FETCH_REQ_CONFIG, id, NULL, j->config_digest, max, -1,
                                    e);
        if (r < 0)
                return r;
        j->req_id = id;
        j->layers = TAKE_PTR(layers);
        j->n_layers = m->n_layers;
        j->stage = ST_CONFIG;
        return 0;
}

static void protocol_error(struct job *j, int type, uint32_t id) {
        job_failf(j, -EPROTO, WR_STATUS_INTERNAL, WR_FAULT_SERVICE,
                  "pull %s: registry helper warren-fetch (pid %d) sent an answer nobody asked for "
                  "(type 0x%x, id %u)",
                  j->key, (int) img_fetcher_pid(j->f), type, id);
}

/* Every checked answer of the job's warren-fetch. */
static void on_fetch_msg(struct img_fetcher *f, int type, const void *msg, void *userdata) {
        (void) f;
        struct job *j = userdata;
        const struct img_fetch_hdr *h = msg;
        struct wr_err e = {0};
        int r = 0;
        if (h->id >= LAYER_ID_BASE) {
                size_t idx = h->id - LAYER_ID_BASE;
                struct layer *l =
                        j->stage == ST_LAYERS && idx < j->n_layers ? &j->layers[idx] : NULL;
                if (!l || !l->fetching) {
                        protocol_error(j, type, h->id);
                        return;
                }
                const struct img_fetch_rep_blob *b = msg;
                switch (type) {
                case IMG_FETCH_REP_PROGRESS:
                        l->done_bytes = b->received;
                        return; /* reported on the next tick */
                case IMG_FETCH_REP_BLOB:
                        on_blob(l, b->received);
                        return;
                case IMG_FETCH_REP_ERROR:
                        e = ((const struct img_fetch_rep_error *) msg)->err;
                        err_prefix(&e, e.code, "layer %zu/%zu", idx + 1, j->n_layers);
                        job_fail(j, &e);
                        return;
                default:
                        protocol_error(j, type, h->id);
                        return;
                }
        }
        if (!j->req_id || h->id != j->req_id) {
                protocol_error(j, type, h->id);
                return;
        }
        j->req_id = 0;
        if (type == IMG_FETCH_REP_ERROR) {
                e = ((const struct img_fetch_rep_error *) msg)->err;
                if (j->stage == ST_CONFIG)
                        err_prefix(&e, e.code, "image config");
                job_fail(j, &e);
                return;
        }
        if (j->stage == ST_MANIFEST && type == IMG_FETCH_REP_INDEX)
                r = index_take(j, msg, &e);
        else if (j->stage == ST_MANIFEST && type == IMG_FETCH_REP_MANIFEST)
                r = manifest_take(j, msg, &e);
        else if (j->stage == ST_CONFIG && type == IMG_FETCH_REP_CONFIG) {
                on_config(j, msg);
                return;
        } else {
                protocol_error(j, type, h->id);
                return;
        }
        if (r < 0)
                job_fail(j, &e);
}

static void on_fetch_dead(struct img_fetcher *f, const struct wr_err *e, void *userdata) {
        (void) f;
        struct job *j = userdata;
        struct wr_err ee = *e;
        err_prefix(&ee, ee.code, "pull %s", j->key);
        job_fail(j, &ee);
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
        spare_drop(ctx);
        return 0;
}

/* --- the spare helper --- */

/* A spare says nothing before it is bound: anything it sends is a protocol
 * error, and its death just means the next pull starts its own. */
static void on_spare_msg(struct img_fetcher *f, int type, const void *msg, void *userdata) {
        struct img_pull_ctx *ctx = userdata;
        if (ctx->spare != f)
                return;
        log_warn("pull: the spare registry helper sent message type %d before any pull; "
                 "ended",
                 type);
        spare_drop(ctx);
}

static void on_spare_dead(struct img_fetcher *f, const struct wr_err *e, void *userdata) {
        struct img_pull_ctx *ctx = userdata;
        if (ctx->spare != f)
                return;
        log_warn("pull: the spare registry helper died (%s); the next pull starts its own",
                 e && e->msg[0] ? e->msg : "no reason given");
        spare_drop(ctx);
}

/* WARREN_FETCH_ROOT, else <state_dir>/fetch-root (one writer: this warrend;
 * with --privsep warren-priv, which picks it the same way) */
static const char *fetch_root(struct img_pull_ctx *ctx) {
        static char buf[PATH_MAX];
        const char *env = getenv("WARREN_FETCH_ROOT");
        if (env && *env)
                return env;
        snprintf(buf, sizeof(buf), "%s/fetch-root", ctx->s->state_dir);
        return buf;
}

static void fetcher_opts(struct img_pull_ctx *ctx, const char *helper, const char *ref,
                         struct img_fetcher_opts *o) {
        *o = (struct img_fetcher_opts){
                .root = fetch_root(ctx),
                .helper = helper,
                .ref = ref,
                .registry_config = ctx->registry_config,
                .docker_config = ctx->docker_config,
                .loopback_only = ctx->loopback_only,
        };
}

/* Start the next pull's helper now (best effort: without one, the next pull
 * starts its own). */
static void spare_make(struct img_pull_ctx *ctx, uv_loop_t *loop) {
        if (ctx->spare || getenv("WARREN_FETCH_NO_SPARE"))
                return;
        char helper[PATH_MAX];
        img_fetcher_find(ctx->s->helper, helper, sizeof(helper));
        struct img_fetcher_opts o;
        fetcher_opts(ctx, helper, NULL, &o);
        struct wr_err e = {0};
        if (img_fetcher_start(loop, &o, on_spare_msg, on_spare_dead, ctx, &ctx->spare, &e) == 0)
                img_fetcher_set_background(ctx->spare, true);
        else
                log_warn("pull: no spare registry helper (%s); the next pull starts its own",
                         e.msg);
}

/* The job's helper: the spare when one is alive, else a new one; bound to
 * the job's reference. */
static int job_fetcher(struct job *j, struct wr_err *e) {
        struct img_pull_ctx *ctx = j->ctx;
        if (ctx->spare && img_fetcher_alive(ctx->spare)) {
                j->f = TAKE_PTR(ctx->spare);
                img_fetcher_retarget(j->f, on_fetch_msg, on_fetch_dead, j);
                img_fetcher_set_background(j->f, false);
        } else {
                spare_drop(ctx);
                char helper[PATH_MAX];
                img_fetcher_find(ctx->s->helper, helper, sizeof(helper));
                struct img_fetcher_opts o;
                fetcher_opts(ctx, helper, NULL, &o);
                int r = img_fetcher_start(j->loop, &o, on_fetch_msg, on_fetch_dead, j, &j->f, e);
                if (r < 0)
                        return r;
        }
        return img_fetcher_bind(j->f, j->key, e);
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
        r = job_fetcher(j, e);
        if (r < 0)
                return err_prefix(e, r, "pull %s", key);
        r = fetch_manifest(j, img_ref_manifest_ref(&pr), pr.digest, e);
        if (r < 0)
                return r;
        p->job = j;
        j->subs = p;
        j->next = ctx->jobs;
        ctx->jobs = TAKE_PTR(j);
        *ret = TAKE_PTR(p);
        spare_make(ctx, loop); /* for the next pull, while this one runs */
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
