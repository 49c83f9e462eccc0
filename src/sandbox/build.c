/* SPDX-License-Identifier: Apache-2.0 */
/* The image builder (sandbox.h: sbx_build): a declarative image's steps,
 * one after the other, each on the image the previous one made.
 *
 *   RUN (a command; pip_install and apt_install are commands the API layer
 *   spells out): a build sandbox from the current image (same runtime and
 *   isolation as any sandbox, the default network), the command run in
 *   it with its output streamed to the log, then its writable layer
 *   snapshotted (snapshot.c: deterministic tar, whiteouts for deletions)
 *   as a new layer on the current image, and the build sandbox ended.
 *   A non-zero exit fails the build with the command, the code and the
 *   last lines of output; nothing of the step is kept.
 *   FILE: a layer holding the one file (image.h: img_pack_file) - no
 *   sandbox, no shell needed in the image.
 *   CONFIG (workdir, env, user, entrypoint, cmd): the same layers with the
 *   config changed.
 *
 * Layer cache: a step's key is sha256(the image it runs on, the step's
 * canonical bytes (the API layer's encoding, with file contents)); the
 * image a key produced is recorded in <state>/build-cache/<key> and
 * reused while it exists (across restarts and clients): a cached step
 * runs nothing. Two images sharing a prefix of steps share its layers. */
#include "sandbox/sandbox-internal.h"

#include <errno.h>
#include <fcntl.h>
#include <openssl/evp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "basic/log.h"
#include "basic/macro.h"
#include "image/image.h"
#include "sandbox/exec.h"

#define TAIL_LINES 15
#define LINE_MAX_LEN 4096

struct bld {
        struct sbx_manager *m;
        struct bld *next;    /* in m->builds (a running leader) */
        struct bld *waiters; /* identical builds waiting for this one */
        struct bld *next_waiter;
        struct bld *leader; /* the build this one waits for, or NULL */
        struct img_layer_job *job;
        struct sbx_build_spec *spec;
        size_t idx;
        char cur[80];             /* the current image's id */
        char base_id[80];         /* the image the build started from */
        char key_hex[2 * 32 + 1]; /* the running step's cache key */
        sbx_build_log_fn log;
        sbx_build_done_fn done;
        void *userdata;
        bool cancelled, finished;
        /* a RUN step in flight */
        char sb_id[32];
        struct sbx_exec *x;
        char line[LINE_MAX_LEN];
        size_t line_len;
        char *tail[TAIL_LINES];
        size_t tail_n;
        uint64_t t0, t_step, t_commit;
        uint64_t cur_size; /* bytes of the current image (layer sizes in the log) */
        unsigned ran, cached;
};

static void next_step(struct bld *b);

static void logf_(struct bld *b, const char *fmt, ...) _printf_(2, 3);
static void logf_(struct bld *b, const char *fmt, ...) {
        char buf[LINE_MAX_LEN + 64];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(buf, sizeof(buf), fmt, ap);
        va_end(ap);
        if (b->log && !b->cancelled)
                b->log(buf, b->userdata);
}

static void tail_clear(struct bld *b) {
        for (size_t i = 0; i < b->tail_n; i++)
                free(b->tail[i]);
        b->tail_n = 0;
        b->line_len = 0;
}

void sbx_build_spec_free(struct sbx_build_spec *s) {
        if (!s)
                return;
        for (size_t i = 0; i < s->n_steps; i++) {
                struct sbx_build_step *st = &s->steps[i];
                free(st->desc);
                free(st->key);
                sbx_argv_free(st->argv);
                sbx_argv_free(st->run_env);
                for (size_t k = 0; k < st->n_files; k++) {
                        free(st->files[k].path);
                        free(st->files[k].data);
                }
                free(st->files);
                sbx_argv_free(st->labels);
                sbx_argv_free(st->ports);
                sbx_argv_free(st->shell);
                free(st->stop_signal);
                sbx_argv_free(st->hc_test);
                free(st->workdir);
                free(st->user);
                sbx_argv_free(st->env);
                sbx_argv_free(st->entrypoint);
                sbx_argv_free(st->cmd);
        }
        free(s->steps);
        free(s->base);
        free(s);
}

static void bld_free(struct bld *b) {
        tail_clear(b);
        sbx_build_spec_free(b->spec);
        free(b);
}

static void start(struct bld *b);

/* Take b out of m->builds and start the builds that waited for it: the
 * first becomes the new leader (all its steps are cache hits when b
 * succeeded), the others wait for that one. */
static void release_waiters(struct bld *b) {
        for (struct bld **p = &b->m->builds; *p; p = &(*p)->next)
                if (*p == b) {
                        *p = b->next;
                        break;
                }
        struct bld *w = b->waiters;
        b->waiters = NULL;
        while (w) {
                struct bld *next = w->next_waiter;
                w->next_waiter = NULL;
                w->leader = NULL;
                start(w);
                w = next;
        }
}

/* The build ends: r = 0 with the last image, else e. */
static void finish(struct bld *b, int r, const struct wr_err *e) {
        if (b->finished)
                return;
        b->finished = true;
        if (b->job) {
                img_layer_job_cancel(b->job);
                b->job = NULL;
        }
        if (b->x) {
                sbx_exec_release(b->x);
                b->x = NULL;
        }
        if (b->sb_id[0]) {
                (void) sbx_terminate(b->m, b->sb_id, 0, NULL, NULL, NULL);
                b->sb_id[0] = '\0';
        }
        if (!b->cancelled) {
                struct img_info *img = NULL;
                struct wr_err re = {0};
                if (r >= 0 && img_store_resolve(b->m->images, b->cur, &img, &re) < 0) {
                        r = -ENOENT;
                        e = &re;
                }
                if (r >= 0)
                        logf_(b, "Built %s in %.2f s: %u step%s run, %u cached", b->cur,
                              (double) (sbx_mono_ns() - b->t0) / 1e9, b->ran,
                              b->ran == 1 ? "" : "s", b->cached);
                b->done(r, r >= 0 ? img : NULL, r < 0 ? e : NULL, b->userdata);
                img_info_free(img);
        }
        release_waiters(b);
        bld_free(b);
}

/* ---- the cache ---- */

static void cache_path(struct bld *b, char *out, size_t size) {
        snprintf(out, size, "%s/build-cache/%s", b->m->state_dir, b->key_hex);
}

static void step_key(struct bld *b, const struct sbx_build_step *st) {
        unsigned char d[32] = {0};
        EVP_MD_CTX *c = EVP_MD_CTX_new();
        if (!c || EVP_DigestInit_ex(c, EVP_sha256(), NULL) != 1 ||
            EVP_DigestUpdate(c, b->cur, strlen(b->cur) + 1) != 1 ||
            EVP_DigestUpdate(c, st->key, st->key_len) != 1 || EVP_DigestFinal_ex(c, d, NULL) != 1)
                memset(d, 0xff, sizeof(d)); /* never hits: no such cache file name */
        EVP_MD_CTX_free(c);
        for (size_t i = 0; i < 32; i++)
                snprintf(b->key_hex + 2 * i, 3, "%02x", d[i]);
}

/* The image this step made before, if it is still stored. */
static bool cache_hit(struct bld *b, char *id, size_t size) {
        char path[PATH_MAX];
        cache_path(b, path, sizeof(path));
        _cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
        if (fd < 0)
                return false;
        ssize_t n = read(fd, id, size - 1);
        if (n <= 0)
                return false;
        id[n] = '\0';
        struct img_info *img = NULL;
        struct wr_err e = {0};
        if (strncmp(id, "sha256:", 7) != 0 || img_store_resolve(b->m->images, id, &img, &e) < 0)
                return false;
        img_info_free(img);
        return true;
}

static void cache_put(struct bld *b, const char *id) {
        char dir[PATH_MAX], path[PATH_MAX], tmp[PATH_MAX + 16];
        snprintf(dir, sizeof(dir), "%s/build-cache", b->m->state_dir);
        (void) mkdir(dir, 0700);
        cache_path(b, path, sizeof(path));
        snprintf(tmp, sizeof(tmp), "%s.tmp", path);
        int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
        if (fd < 0)
                return;
        bool ok = write(fd, id, strlen(id)) == (ssize_t) strlen(id);
        close(fd);
        if (!ok || rename(tmp, path) < 0)
                (void) unlink(tmp);
}

/* The step made image id: record it, go on. */
static void step_done(struct bld *b, const char *id) {
        if (b->cancelled)
                return finish(b, -ECANCELED, NULL);
        cache_put(b, id);
        snprintf(b->cur, sizeof(b->cur), "%s", id);
        b->ran++;
        logf_(b, " ---> %.19s (%.2f s)", id, (double) (sbx_mono_ns() - b->t_step) / 1e9);
        b->idx++;
        next_step(b);
}

/* ---- CONFIG and FILE steps ---- */

/* What apply_config allocated for cfg (freed with cfg_tmp_free). */
struct cfg_tmp {
        char **env, **labels, **ports;
        char *workdir;
};

static void cfg_tmp_free(struct cfg_tmp *t) {
        sbx_env_free(t->env);
        sbx_argv_free(t->labels);
        sbx_argv_free(t->ports);
        free(t->workdir);
}

static size_t strv_len(char *const *v) {
        size_t n = 0;
        while (v && v[n])
                n++;
        return n;
}

static int cmp_str(const void *a, const void *b) {
        return strcmp(*(char *const *) a, *(char *const *) b);
}

/* base's "K=V" list with add's entries set (same key replaced), sorted
 * when sort; *ret NULL-terminated. keys_only: entries are whole keys. */
static int merge_kv(char *const *base, size_t n_base, char *const *add, bool sort, char ***ret,
                    size_t *n_ret) {
        char **v = sbx_env_dup(base && n_base ? base : (char *[]){NULL});
        if (!v)
                return -ENOMEM;
        for (size_t i = 0; add && add[i]; i++) {
                size_t kl = strcspn(add[i], "=");
                bool done = false;
                for (size_t k = 0; v[k] && !done; k++)
                        if (!strncmp(v[k], add[i], kl) && (v[k][kl] == '=' || !v[k][kl])) {
                                char *c = strdup(add[i]);
                                if (!c) {
                                        sbx_env_free(v);
                                        return -ENOMEM;
                                }
                                free(v[k]);
                                v[k] = c;
                                done = true;
                        }
                if (done)
                        continue;
                size_t n = strv_len(v);
                char **nv = realloc(v, (n + 2) * sizeof(char *));
                if (!nv || !(nv[n] = strdup(add[i]))) {
                        sbx_env_free(nv ? nv : v);
                        return -ENOMEM;
                }
                nv[n + 1] = NULL;
                v = nv;
        }
        *n_ret = strv_len(v);
        if (sort && *n_ret)
                qsort(v, *n_ret, sizeof(char *), cmp_str);
        *ret = v;
        return 0;
}

/* "/a/b" joined with p when p is relative (WORKDIR and COPY
 * destinations), "." and ".." resolved; malloc'd. */
static char *path_join(const char *dir, const char *p) {
        size_t n = strlen(dir ? dir : "") + strlen(p) + 3;
        char *in = malloc(n), *out = malloc(n);
        if (!in || !out) {
                free(in);
                free(out);
                return NULL;
        }
        if (p[0] == '/')
                snprintf(in, n, "%s", p);
        else
                snprintf(in, n, "%s/%s", dir && *dir ? dir : "/", p);
        size_t o = 0;
        for (const char *c = in; *c;) {
                while (*c == '/')
                        c++;
                size_t l = strcspn(c, "/");
                if (!l)
                        break;
                if (l == 1 && c[0] == '.') {
                } else if (l == 2 && c[0] == '.' && c[1] == '.') {
                        while (o > 0 && out[o - 1] != '/')
                                o--;
                        if (o > 0)
                                o--;
                } else {
                        out[o++] = '/';
                        memcpy(out + o, c, l);
                        o += l;
                }
                c += l;
        }
        if (!o)
                out[o++] = '/';
        out[o] = '\0';
        free(in);
        return out;
}

/* cfg = base with the step's config changes (env: base's, then the
 * step's; labels and ports merged); t holds what cfg points to that was
 * allocated here (cfg_tmp_free). */
static int apply_config(const struct img_config *base, const struct sbx_build_step *st,
                        struct img_config *cfg, struct cfg_tmp *t) {
        *cfg = *base; /* shallow: what changes is replaced below */
        memset(t, 0, sizeof(*t));
        int r = 0;
        if (st->env &&
            (r = merge_kv(base->env, base->n_env, st->env, false, &t->env, &cfg->n_env)) >= 0)
                cfg->env = t->env;
        if (r >= 0 && st->labels &&
            (r = merge_kv(base->labels, base->n_labels, st->labels, true, &t->labels,
                          &cfg->n_labels)) >= 0)
                cfg->labels = t->labels;
        if (r >= 0 && st->ports &&
            (r = merge_kv(base->exposed_ports, base->n_exposed_ports, st->ports, true, &t->ports,
                          &cfg->n_exposed_ports)) >= 0)
                cfg->exposed_ports = t->ports;
        if (r < 0) {
                cfg_tmp_free(t);
                return r;
        }
        if (st->workdir) {
                if (!(t->workdir = path_join(base->working_dir, st->workdir))) {
                        cfg_tmp_free(t);
                        return -ENOMEM;
                }
                cfg->working_dir = t->workdir;
        }
        if (st->user)
                cfg->user = st->user;
        if (st->has_entrypoint) {
                cfg->entrypoint = st->entrypoint;
                cfg->n_entrypoint = strv_len(st->entrypoint);
        }
        if (st->has_cmd) {
                cfg->cmd = st->cmd;
                cfg->n_cmd = strv_len(st->cmd);
        }
        if (st->has_shell) {
                cfg->shell = st->shell;
                cfg->n_shell = strv_len(st->shell);
        }
        if (st->stop_signal)
                cfg->stop_signal = st->stop_signal;
        if (st->has_healthcheck) {
                cfg->hc_test = st->hc_test;
                cfg->n_hc_test = strv_len(st->hc_test);
                cfg->hc_interval_ns = st->hc_interval_ns;
                cfg->hc_timeout_ns = st->hc_timeout_ns;
                cfg->hc_start_period_ns = st->hc_start_period_ns;
                cfg->hc_start_interval_ns = st->hc_start_interval_ns;
                cfg->hc_retries = st->hc_retries;
        }
        return 0;
}

static int config_step(struct bld *b, const struct sbx_build_step *st, struct wr_err *e) {
        struct img_info *img = NULL, *made = NULL;
        int r = img_store_resolve(b->m->images, b->cur, &img, e);
        if (r < 0)
                return r;
        struct img_config cfg;
        struct cfg_tmp t;
        if ((r = apply_config(&img->config, st, &cfg, &t)) < 0) {
                img_info_free(img);
                return err_set(e, r, "out of memory");
        }
        r = img_store_commit_image(b->m->images, NULL, &cfg, img->diff_ids, img->n_layers, "build",
                                   &made, e);
        cfg_tmp_free(&t);
        img_info_free(img);
        if (r < 0)
                return r;
        step_done(b, made->id);
        img_info_free(made);
        return 0;
}

static void layer_committed(struct bld *b, int r, const char *diff_id, const struct wr_err *e) {
        if (b->cancelled)
                return finish(b, -ECANCELED, NULL);
        if (r < 0)
                return finish(b, r, e);
        struct img_info *img = NULL, *made = NULL;
        struct wr_err ce = {0};
        if ((r = img_store_resolve(b->m->images, b->cur, &img, &ce)) < 0)
                return finish(b, r, &ce);
        /* a WORKDIR step's layer (the dir) comes with its config change */
        struct img_config cfg;
        struct cfg_tmp t = {0};
        r = apply_config(&img->config, &b->spec->steps[b->idx], &cfg, &t);
        if (r >= 0)
                r = img_store_commit_on(b->m->images, NULL, img, &cfg, diff_id, "build", &made,
                                        &ce);
        else
                err_set(&ce, r, "out of memory");
        cfg_tmp_free(&t);
        img_info_free(img);
        if (r < 0)
                return finish(b, r, &ce);
        step_done(b, made->id);
        img_info_free(made);
}

static void file_layer_done(int r, const char *diff_id, const struct wr_err *e, void *userdata) {
        struct bld *b = userdata;
        b->job = NULL;
        layer_committed(b, r, diff_id, e);
}

/* FILE: the files (relative paths: to the image's working dir); CONFIG
 * with a workdir: the directory (WORKDIR makes it). */
static int file_step(struct bld *b, const struct sbx_build_step *st, struct wr_err *e) {
        struct img_info *img = NULL;
        int r = img_store_resolve(b->m->images, b->cur, &img, e);
        if (r < 0)
                return r;
        size_t n = st->kind == SBX_STEP_FILE ? st->n_files : 1;
        struct img_pack_entry *v = calloc(n ? n : 1, sizeof(*v));
        char **paths = calloc(n ? n : 1, sizeof(char *));
        r = v && paths ? 0 : -ENOMEM;
        for (size_t i = 0; r >= 0 && i < n; i++) {
                const struct sbx_build_file *f = st->kind == SBX_STEP_FILE ? &st->files[i] : NULL;
                if (!(paths[i] = path_join(img->config.working_dir, f ? f->path : st->workdir)))
                        r = -ENOMEM;
                else if (f)
                        v[i] = (struct img_pack_entry){.path = paths[i],
                                                       .data = f->data,
                                                       .len = f->len,
                                                       .mode = f->mode,
                                                       .uid = f->uid,
                                                       .gid = f->gid};
                else
                        v[i] = (struct img_pack_entry){.path = paths[i], .mode = S_IFDIR | 0755};
        }
        img_info_free(img);
        char spool[PATH_MAX];
        snprintf(spool, sizeof(spool), "%s/tmp", b->m->state_dir);
        _cleanup_close_ int fd = -EBADF;
        if (r < 0)
                r = err_set(e, r, "out of memory");
        else if ((fd = open(spool, O_RDWR | O_TMPFILE | O_CLOEXEC, 0600)) < 0)
                r = err_set(e, -errno, "build: spool in %s: %m", spool);
        else if (n == 1 && !strcmp(paths[0], "/") && S_ISDIR(v[0].mode))
                r = img_pack_files(fd, NULL, 0, e); /* WORKDIR /: nothing to make */
        else
                r = img_pack_files(fd, v, n, e);
        for (size_t i = 0; paths && i < n; i++)
                free(paths[i]);
        free(paths);
        free(v);
        if (r < 0)
                return r;
        if (lseek(fd, 0, SEEK_SET) < 0)
                return err_set(e, -errno, "build: spool: %m");
        return img_layer_unpack(b->m->images, b->m->loop, fd, NULL, file_layer_done, b, &b->job, e);
}

/* ---- RUN steps ---- */

static void snapshot_done(int r, const struct img_info *img, const struct wr_err *e,
                          void *userdata) {
        struct bld *b = userdata;
        if (b->sb_id[0]) {
                (void) sbx_terminate(b->m, b->sb_id, 0, NULL, NULL, NULL);
                b->sb_id[0] = '\0';
        }
        if (b->cancelled) {
                /* the snapshot committed an image of the cancelled step: it
                 * goes again (with its layer, unless another image uses it) */
                if (r >= 0)
                        (void) img_store_delete(b->m->images, img->id, NULL);
                return finish(b, -ECANCELED, NULL);
        }
        if (r < 0)
                return finish(b, r, e);
        uint64_t layer = img->size > b->cur_size ? img->size - b->cur_size : 0;
        double secs = (double) (sbx_mono_ns() - b->t_commit) / 1e9;
        logf_(b, " ---> layer of %.1f MB committed in %.2f s (%.0f MB/s)", (double) layer / 1e6,
              secs, secs > 0 ? (double) layer / 1e6 / secs : 0.0);
        step_done(b, img->id);
}

static void tail_push(struct bld *b, const char *line) {
        if (b->tail_n == TAIL_LINES) {
                free(b->tail[0]);
                memmove(b->tail, b->tail + 1, (TAIL_LINES - 1) * sizeof(*b->tail));
                b->tail_n--;
        }
        b->tail[b->tail_n] = strdup(line);
        if (b->tail[b->tail_n])
                b->tail_n++;
}

static void emit_line(struct bld *b) {
        b->line[b->line_len] = '\0';
        logf_(b, "%s", b->line);
        tail_push(b, b->line);
        b->line_len = 0;
}

static void x_started(struct sbx_exec *x, int pid, const char *exec_id, void *userdata) {}

static int x_output(struct sbx_exec *x, enum sbx_stream stream, const void *data, size_t n,
                    uint64_t offset, struct sbx_output *buf, void *userdata) {
        struct bld *b = userdata;
        const char *p = data;
        for (size_t i = 0; i < n; i++) {
                if (p[i] == '\n' || b->line_len == LINE_MAX_LEN - 1) {
                        emit_line(b);
                        if (p[i] == '\n')
                                continue;
                }
                b->line[b->line_len++] = p[i] == '\r' ? ' ' : p[i];
        }
        return 0;
}

static void x_exited(struct sbx_exec *x, int exit_code, int signo, enum sbx_exit_reason reason,
                     void *userdata) {
        struct bld *b = userdata;
        if (b->line_len)
                emit_line(b);
        sbx_exec_release(b->x);
        b->x = NULL;
        if (b->cancelled)
                return finish(b, -ECANCELED, NULL);
        const struct sbx_build_step *st = &b->spec->steps[b->idx];
        if (exit_code != 0 && sbx_disk_stopped(b->m, b->sb_id)) {
                struct wr_err e = {0};
                err_setx(&e, -ENOSPC, WR_STATUS_RESOURCE_EXHAUSTED, WR_FAULT_CLIENT,
                         "build step %zu/%zu (%.200s) stopped: it was filling the disk (the state "
                         "dir's file system fell under --build-min-free, %llu MiB free needed); "
                         "nothing of it was kept",
                         b->idx + 1, b->spec->n_steps, st->desc,
                         (unsigned long long) (b->m->build_min_free >> 20));
                logf_(b, "%s", e.msg);
                return finish(b, -ENOSPC, &e);
        }
        if (exit_code != 0) {
                char tail[3000] = "";
                size_t o = 0;
                for (size_t i = 0; i < b->tail_n && o < sizeof(tail) - 2; i++)
                        o += (size_t) snprintf(tail + o, sizeof(tail) - o, "\n  | %s", b->tail[i]);
                struct wr_err e = {0};
                err_setx(&e, -EIO, WR_STATUS_FAILED_PRECONDITION, WR_FAULT_CLIENT,
                         "build step %zu/%zu (%.200s) failed: exit code %d%s%s", b->idx + 1,
                         b->spec->n_steps, st->desc, exit_code,
                         reason == SBX_EXIT_TIMEOUT ? " (timed out)" : "", tail);
                logf_(b, "%s", e.msg);
                return finish(b, -EIO, &e);
        }
        struct wr_err e = {0};
        struct img_info *cur = NULL;
        b->cur_size = img_store_resolve(b->m->images, b->cur, &cur, NULL) >= 0 ? cur->size : 0;
        img_info_free(cur);
        b->t_commit = sbx_mono_ns();
        int r = sbx_snapshot(b->m, b->sb_id, NULL, snapshot_done, b, &e);
        if (r < 0)
                finish(b, r, &e);
}

static int run_step(struct bld *b, const struct sbx_build_step *st, struct wr_err *e) {
        static const struct sbx_exec_callbacks cb = {
                .on_started = x_started, .on_output = x_output, .on_exited = x_exited};
        struct img_info *img = NULL;
        int r = img_store_resolve(b->m->images, b->cur, &img, e);
        if (r < 0)
                return r;
        const char *user = img->config.user;
        if (st->needs_root && user && *user && strcmp(user, "root") && strcmp(user, "0") &&
            strncmp(user, "root:", 5) && strncmp(user, "0:", 2)) {
                r = err_setx(e, -EPERM, WR_STATUS_FAILED_PRECONDITION, WR_FAULT_CLIENT,
                             "build step %zu/%zu (%.200s): needs the build user to be root, but "
                             "the image's user is \"%.64s\" (add .dockerfile_commands([\"USER "
                             "root\"]) before it, and USER %.64s after)",
                             b->idx + 1, b->spec->n_steps, st->desc, user, user);
                img_info_free(img);
                return r;
        }
        struct sbx_spec *spec = NULL;
        if ((r = sbx_spec_new(&spec)) < 0) {
                img_info_free(img);
                return err_set(e, r, "out of memory");
        }
        /* no entrypoint: only the build command runs */
        spec->entrypoint = calloc(1, sizeof(char *));
        spec->build_step = true;
        struct store_sandbox row = {0};
        if (!spec->entrypoint)
                r = err_set(e, -ENOMEM, "out of memory");
        else
                r = sbx_create(b->m, spec, img, &row, e);
        sbx_spec_free(spec);
        img_info_free(img);
        if (r < 0)
                return err_prefix(e, r, "build sandbox");
        snprintf(b->sb_id, sizeof(b->sb_id), "%s", row.id);
        store_sandbox_clear(&row);
        sbx_diskguard_watch(b->m);
        tail_clear(b);
        struct sbx_exec_spec xs = {.sandbox = b->sb_id,
                                   .argv = st->argv,
                                   .env = st->run_env,
                                   .timeout_secs = b->spec->step_timeout_secs};
        if ((r = sbx_exec_start(b->m, &xs, &cb, b, &b->x, e)) < 0)
                return r;
        (void) sbx_exec_close_stdin(b->x);
        return 0;
}

/* ---- driving ---- */

static void next_step(struct bld *b) {
        while (!b->finished && !b->cancelled) {
                if (b->idx == b->spec->n_steps)
                        return finish(b, 0, NULL);
                const struct sbx_build_step *st = &b->spec->steps[b->idx];
                step_key(b, st);
                char hit[96];
                if (cache_hit(b, hit, sizeof(hit))) {
                        logf_(b, "Step %zu/%zu: %s (cached: %.19s)", b->idx + 1, b->spec->n_steps,
                              st->desc, hit);
                        snprintf(b->cur, sizeof(b->cur), "%s", hit);
                        b->cached++;
                        b->idx++;
                        continue;
                }
                logf_(b, "Step %zu/%zu: %s", b->idx + 1, b->spec->n_steps, st->desc);
                b->t_step = sbx_mono_ns();
                struct wr_err e = {0};
                int r = st->kind == SBX_STEP_CONFIG && !st->workdir ? config_step(b, st, &e)
                        : st->kind == SBX_STEP_RUN                  ? run_step(b, st, &e)
                                                                    : file_step(b, st, &e);
                if (r < 0)
                        return finish(b, r, &e);
                return; /* CONFIG went on from step_done; FILE and RUN continue from callbacks */
        }
}

int sbx_build(struct sbx_manager *m, struct sbx_build_spec *spec, sbx_build_log_fn log,
              sbx_build_done_fn done, void *userdata, struct sbx_build **ret, struct wr_err *e) {
        if (!m->images) {
                sbx_build_spec_free(spec);
                return err_setx(e, -ENODEV, WR_STATUS_FAILED_PRECONDITION, WR_FAULT_SERVICE,
                                "build: the image store is unavailable");
        }
        struct img_info *base = NULL;
        int r = img_store_resolve(m->images, spec->base, &base, e);
        if (r < 0) {
                sbx_build_spec_free(spec);
                return err_prefix(e, r, "build: base image");
        }
        struct bld *b = calloc(1, sizeof(*b));
        if (!b) {
                img_info_free(base);
                sbx_build_spec_free(spec);
                return err_set(e, -ENOMEM, "out of memory");
        }
        b->m = m;
        b->spec = spec;
        b->log = log;
        b->done = done;
        b->userdata = userdata;
        b->t0 = sbx_mono_ns();
        snprintf(b->cur, sizeof(b->cur), "%s", base->id);
        img_info_free(base);
        snprintf(b->base_id, sizeof(b->base_id), "%s", b->cur);
        logf_(b, "Building from %s (%.19s), %zu step%s", spec->base, b->cur, spec->n_steps,
              spec->n_steps == 1 ? "" : "s");
        if (ret)
                *ret = (struct sbx_build *) b;
        start(b);
        return 0;
}

/* Run b, or, when an identical build (same request, same base image) is
 * running, wait for it: its steps then are cache hits for b. */
static void start(struct bld *b) {
        if (b->spec->has_spec_key) {
                for (struct bld *l = b->m->builds; l; l = l->next) {
                        if (memcmp(l->spec->spec_key, b->spec->spec_key, 32) ||
                            strcmp(l->base_id, b->base_id))
                                continue;
                        struct bld **tail = &l->waiters;
                        while (*tail)
                                tail = &(*tail)->next_waiter;
                        *tail = b;
                        b->leader = l;
                        logf_(b, "Waiting for an identical build that is already running");
                        return;
                }
                b->next = b->m->builds;
                b->m->builds = b;
        }
        next_step(b);
}

void sbx_build_cancel(struct sbx_build *build) {
        struct bld *b = (struct bld *) build;
        if (!b || b->cancelled)
                return;
        b->cancelled = true;
        if (b->leader) {
                /* waiting for an identical build: just leave its queue */
                for (struct bld **p = &b->leader->waiters; *p; p = &(*p)->next_waiter)
                        if (*p == b) {
                                *p = b->next_waiter;
                                break;
                        }
                b->leader = NULL;
                return finish(b, -ECANCELED, NULL);
        }
        if (b->job) {
                img_layer_job_cancel(b->job);
                b->job = NULL;
                return finish(b, -ECANCELED, NULL);
        }
        if (b->x) {
                sbx_exec_release(b->x);
                b->x = NULL;
                return finish(b, -ECANCELED, NULL);
        }
        if (b->sb_id[0] == '\0')
                return; /* a layer job or snapshot in flight ends it */
}
