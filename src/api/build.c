/* SPDX-License-Identifier: Apache-2.0 */
/* warren.v1.Images/BuildImage: an ImageBuild (the SDK's declarative
 * Image) checked and spelled out as builder steps (sandbox.h:
 * sbx_build), the build log streamed as BuildImageProgress{log} lines,
 * the image in the last message. Every step's errors name it
 * ("steps[3].pip_install: ..."). pip_install and apt_install become
 * commands; a raw Dockerfile instruction is RUN, ENV, WORKDIR, USER, CMD,
 * ENTRYPOINT (LABEL, EXPOSE are accepted and recorded in the log only);
 * anything else is UNIMPLEMENTED naming the instruction. */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <fnmatch.h>
#include <openssl/evp.h>

#include "api/api-internal.h"
#include "image/dockerfile.h"
#include "image/image.h"
#include "image/resolve.h"
#include "basic/log.h"
#include "basic/macro.h"
#include "sandbox/sandbox.h"
#include "warren/v1/images.pb-c.h"

#define STEPS_MAX 256
#define ADD_PREFIX ".warren-add/"
#define STEP_TIMEOUT_SECS 1800.0

#define INVALID(e, ...)                                                                            \
        err_setx(e, -EINVAL, WR_STATUS_INVALID_ARGUMENT, WR_FAULT_CLIENT, __VA_ARGS__)

static char **argv_of(const char *const *v, size_t n) {
        char **out = calloc(n + 1, sizeof(char *));
        for (size_t i = 0; out && i < n; i++)
                if (!(out[i] = strdup(v[i]))) {
                        sbx_argv_free(out);
                        return NULL;
                }
        return out;
}

/* A package argument: not an option, no shell or control characters. */
static bool package_ok(const char *p, bool apt) {
        if (!p || !*p || p[0] == '-' || strlen(p) > 256)
                return false;
        for (const char *c = p; *c; c++) {
                if (isalnum((unsigned char) *c) ||
                    strchr(apt ? ".+-=:~_" : ".+-=<>!~_[],;@/: ", *c))
                        continue;
                return false;
        }
        return true;
}

static int packages(const Warren__V1__PackageList *pl, bool apt, const char *field,
                    struct wr_err *e) {
        if (!pl || pl->n_packages == 0)
                return INVALID(e, "%s: give at least one package", field);
        for (size_t i = 0; i < pl->n_packages; i++)
                if (!package_ok(pl->packages[i], apt))
                        return INVALID(e,
                                       "%s[%zu]: \"%.80s\" is not a package %s (no leading '-', "
                                       "no spaces or shell characters)",
                                       field, i, pl->packages[i] ? pl->packages[i] : "",
                                       apt ? "name (\"pkg\" or \"pkg=version\")"
                                           : "requirement (\"name\", \"name==1.2\")");
        return 0;
}

static char *join_desc(const char *prefix, char *const *v, size_t n) {
        size_t len = strlen(prefix) + 1;
        for (size_t i = 0; i < n; i++)
                len += strlen(v[i]) + 1;
        char *s = malloc(len);
        if (!s)
                return NULL;
        strcpy(s, prefix);
        for (size_t i = 0; i < n; i++) {
                strcat(s, " ");
                strcat(s, v[i]);
        }
        return s;
}

static size_t strv_len(char *const *v) {
        size_t n = 0;
        while (v && v[n])
                n++;
        return n;
}

static int set_run(struct sbx_build_step *st, const char *cmd) {
        const char *argv[] = {"/bin/sh", "-c", cmd};
        st->kind = SBX_STEP_RUN;
        st->argv = argv_of(argv, 3);
        return st->argv ? 0 : -ENOMEM;
}

/* ---- the cache key of steps that come from a Dockerfile ---- */

struct kbuf {
        uint8_t *p;
        size_t len, cap;
        bool oom;
};

static void kput(struct kbuf *k, const void *d, size_t n) {
        uint64_t l = n;
        if (k->oom)
                return;
        if (k->len + n + sizeof(l) > k->cap) {
                size_t nc = MAX(k->cap * 2, k->len + n + sizeof(l) + 64);
                uint8_t *np = realloc(k->p, nc);
                if (!np) {
                        k->oom = true;
                        return;
                }
                k->p = np;
                k->cap = nc;
        }
        memcpy(k->p + k->len, &l, sizeof(l));
        memcpy(k->p + k->len + sizeof(l), d, n);
        k->len += sizeof(l) + n;
}

static void kstr(struct kbuf *k, const char *s) {
        kput(k, s ? s : "", s ? strlen(s) + 1 : 0);
}

static void kstrv(struct kbuf *k, char *const *v) {
        size_t n = 0;
        while (v && v[n])
                n++;
        kput(k, &n, sizeof(n));
        for (size_t i = 0; i < n; i++)
                kstr(k, v[i]);
}

/* ---- the build context: the files COPY and ADD read ---- */

struct ctx_file {
        char *path;                    /* clean, relative */
        const Warren__V1__FileAdd *fa; /* borrowed from the request */
        uint32_t mode;
        bool loaded; /* data/len valid (blobs are read when a COPY uses them) */
        const uint8_t *data;
        size_t len;
        void *owned; /* data read from the blob store */
};

struct bctx {
        struct api_ctx *api;
        struct ctx_file *v;
        size_t n;
};

static void bctx_clear(struct bctx *c) {
        for (size_t i = 0; i < c->n; i++) {
                free(c->v[i].path);
                free(c->v[i].owned);
        }
        free(c->v);
        memset(c, 0, sizeof(*c));
}

static int cmp_ctx(const void *a, const void *b) {
        return strcmp(((const struct ctx_file *) a)->path, ((const struct ctx_file *) b)->path);
}

/* The file's bytes: inlined, or an uploaded blob (digest). */
static int file_data(struct api_ctx *ctx, const Warren__V1__FileAdd *fa, const char *field,
                     const uint8_t **data, size_t *len, void **owned, struct wr_err *e) {
        *owned = NULL;
        if (!fa->digest || !*fa->digest || fa->content.len) {
                *data = fa->content.data;
                *len = fa->content.len;
                return 0;
        }
        int r = api_blob_read(ctx, fa->digest, owned, len, e);
        if (r < 0)
                return err_prefix(e, r, "%s", field);
        *data = *owned;
        return 0;
}

static int bctx_build(struct api_ctx *ctx, const Warren__V1__ImageBuild *b, struct bctx *c,
                      struct wr_err *e) {
        if (b->n_context > 100000)
                return INVALID(e, "build.context: more than 100000 files");
        if (!(c->v = calloc(b->n_context ? b->n_context : 1, sizeof(*c->v))))
                return -ENOMEM;
        for (size_t i = 0; i < b->n_context; i++) {
                const Warren__V1__FileAdd *fa = b->context[i];
                struct ctx_file *f = &c->v[c->n++];
                char field[64];
                snprintf(field, sizeof(field), "build.context[%zu]", i);
                int r = df_context_path(fa->path ? fa->path : "", &f->path);
                if (r == -ENOMEM)
                        return r;
                if (r < 0 || !*f->path)
                        return INVALID(e,
                                       "%s.path: \"%.200s\" is not a path inside the build "
                                       "context (relative, no \"..\" leaving it)",
                                       field, fa->path ? fa->path : "");
                if (fa->mode > 07777)
                        return INVALID(e, "%s.mode: %o is not a file mode", field, fa->mode);
                f->mode = fa->mode;
                f->fa = fa;
        }
        c->api = ctx;
        if (c->n)
                qsort(c->v, c->n, sizeof(*c->v), cmp_ctx);
        for (size_t i = 1; i < c->n; i++)
                if (!strcmp(c->v[i].path, c->v[i - 1].path))
                        return INVALID(e, "build.context: \"%.200s\" is given twice", c->v[i].path);
        return 0;
}

/* ---- Dockerfile ops as builder steps ---- */

static struct sbx_build_step *step_new(struct sbx_build_spec *s, size_t *cap) {
        if (s->n_steps >= STEPS_MAX)
                return NULL;
        if (s->n_steps == *cap) {
                size_t nc = *cap ? *cap * 2 : 16;
                struct sbx_build_step *nv = reallocarray(s->steps, nc, sizeof(*nv));
                if (!nv)
                        return NULL;
                s->steps = nv;
                *cap = nc;
        }
        struct sbx_build_step *st = &s->steps[s->n_steps++];
        memset(st, 0, sizeof(*st));
        return st;
}

static int add_file(struct sbx_build_step *st, char *path, const uint8_t *data, size_t len,
                    uint32_t mode, uid_t uid, gid_t gid) {
        if (!path)
                return -ENOMEM;
        if (st->n_files >= 100000) {
                free(path);
                return -E2BIG;
        }
        struct sbx_build_file *nv = reallocarray(st->files, st->n_files + 1, sizeof(*nv));
        if (!nv) {
                free(path);
                return -ENOMEM;
        }
        st->files = nv;
        struct sbx_build_file *f = &nv[st->n_files];
        *f = (struct sbx_build_file){
                .path = path, .len = len, .mode = mode, .uid = uid, .gid = gid};
        if (!(f->data = malloc(len ? len : 1))) {
                free(path);
                return -ENOMEM;
        }
        if (len)
                memcpy(f->data, data, len);
        st->n_files++;
        return 0;
}

static char *join2(const char *dir, const char *name) {
        size_t dl = strlen(dir);
        while (dl > 1 && dir[dl - 1] == '/')
                dl--;
        size_t n = dl + strlen(name) + 2;
        char *s = malloc(n);
        if (s)
                snprintf(s, n, "%.*s/%s", (int) dl, dir, name);
        return s;
}

static bool is_glob(const char *s) {
        return strpbrk(s, "*?[") != NULL;
}

/* COPY/ADD: the files of op's sources as one FILE step. */
static int copy_step(const struct df_op *op, const struct bctx *c, struct sbx_build_step *st,
                     struct kbuf *k, struct wr_err *e) {
        st->kind = SBX_STEP_FILE;
        uid_t uid = 0;
        gid_t gid = 0;
        if (op->chown) {
                unsigned long u = strtoul(op->chown, NULL, 10), g = u;
                const char *colon = strchr(op->chown, ':');
                if (colon)
                        g = strtoul(colon + 1, NULL, 10);
                if (u > 0xfffffffe || g > 0xfffffffe)
                        return INVALID(e, "Dockerfile line %u: --chown=%s is out of range",
                                       op->line, op->chown);
                uid = (uid_t) u;
                gid = (gid_t) g;
        }
        size_t dl = strlen(op->dest);
        bool dest_dir = op->dest[dl - 1] == '/' || op->n_srcs > 1;
        int r = 0;
        for (size_t i = 0; r >= 0 && i < op->n_srcs; i++) {
                const struct df_copy_src *src = &op->srcs[i];
                if (!src->path) {
                        /* a heredoc */
                        uint32_t mode = op->chmod >= 0 ? (uint32_t) op->chmod : 0644;
                        char *dst = dest_dir ? join2(op->dest, src->name) : strdup(op->dest);
                        r = add_file(st, dst, (const uint8_t *) src->data, src->len, mode, uid,
                                     gid);
                        continue;
                }
                size_t before = st->n_files, pl = strlen(src->path);
                /* add_local_dir's files ride in the context under
                 * .warren-add/: only a COPY naming them sees them */
                bool hidden_ok = !strncmp(src->path, ADD_PREFIX, strlen(ADD_PREFIX));
                for (size_t f = 0; r >= 0 && f < c->n; f++) {
                        const struct ctx_file *cf = &c->v[f];
                        char *dst = NULL;
                        if (!hidden_ok && !strncmp(cf->path, ADD_PREFIX, strlen(ADD_PREFIX)))
                                continue;
                        if (!strcmp(cf->path, src->path)) {
                                const char *base = strrchr(cf->path, '/');
                                base = base ? base + 1 : cf->path;
                                dst = dest_dir ? join2(op->dest, base) : strdup(op->dest);
                        } else if (is_glob(src->path) &&
                                   fnmatch(src->path, cf->path, FNM_PATHNAME) == 0) {
                                const char *base = strrchr(cf->path, '/');
                                dst = join2(op->dest, base ? base + 1 : cf->path);
                        } else if (pl == 0 ||
                                   (!strncmp(cf->path, src->path, pl) && cf->path[pl] == '/'))
                                dst = join2(op->dest, cf->path + pl + (pl ? 1 : 0));
                        else
                                continue;
                        uint32_t mode = op->chmod >= 0 ? (uint32_t) op->chmod
                                        : cf->mode     ? cf->mode
                                                       : 0644;
                        if (!cf->loaded) {
                                struct ctx_file *mf = (struct ctx_file *) cf;
                                if ((r = file_data(c->api, cf->fa, cf->path, &mf->data, &mf->len,
                                                   &mf->owned, e)) < 0) {
                                        free(dst);
                                        return r;
                                }
                                mf->loaded = true;
                        }
                        r = add_file(st, dst, cf->data, cf->len, mode, uid, gid);
                }
                if (r >= 0 && st->n_files == before && hidden_ok) {
                        /* add_local_dir of an empty directory: the directory */
                        r = add_file(st, strdup(op->dest), NULL, 0, S_IFDIR | 0755, uid, gid);
                        continue;
                }
                if (r >= 0 && st->n_files == before)
                        return INVALID(e,
                                       "Dockerfile line %u, column %u: %s source \"%.200s\": no "
                                       "such file or directory in the build context (%zu file%s "
                                       "sent)",
                                       op->line, op->col, op->add ? "ADD" : "COPY",
                                       src->path[0] ? src->path : ".", c->n, c->n == 1 ? "" : "s");
        }
        if (r == -E2BIG)
                return INVALID(e, "Dockerfile line %u: more than 100000 files in one COPY",
                               op->line);
        if (r < 0)
                return r;
        /* the key: every file's destination, mode, owner and content digest */
        for (size_t i = 0; i < st->n_files; i++) {
                const struct sbx_build_file *f = &st->files[i];
                unsigned char d[32];
                if (EVP_Digest(f->data, f->len, d, NULL, EVP_sha256(), NULL) != 1)
                        return err_set(e, -EIO, "sha256 failed");
                kstr(k, f->path);
                uint32_t meta[3] = {(uint32_t) f->mode, (uint32_t) f->uid, (uint32_t) f->gid};
                kput(k, meta, sizeof(meta));
                kput(k, d, sizeof(d));
        }
        char *desc = malloc(strlen(op->desc) + 32);
        if (!desc)
                return -ENOMEM;
        snprintf(desc, strlen(op->desc) + 32, "%s (%zu file%s)", op->desc, st->n_files,
                 st->n_files == 1 ? "" : "s");
        st->desc = desc;
        return 0;
}

/* One evaluated Dockerfile instruction as a step (FROM and ARG make
 * none). */
static int op_step(const struct df_op *op, const struct bctx *c, struct sbx_build_spec *s,
                   size_t *cap, struct wr_err *e) {
        if (op->kind == DF_OP_FROM || op->kind == DF_OP_ARG)
                return 0;
        struct sbx_build_step *st = step_new(s, cap);
        if (!st)
                return s->n_steps >= STEPS_MAX
                               ? INVALID(e, "Dockerfile line %u: more than %d steps in one build",
                                         op->line, STEPS_MAX)
                               : -ENOMEM;
        struct kbuf k = {0};
        uint32_t kind = (uint32_t) op->kind;
        kput(&k, "warren-dockerfile-op/1", 22);
        kput(&k, &kind, sizeof(kind));
        int r = 0;
        st->kind = SBX_STEP_CONFIG;
        switch (op->kind) {
        case DF_OP_RUN:
                st->kind = SBX_STEP_RUN;
                if (!(st->argv = argv_of((const char *const *) op->argv, strv_len(op->argv))))
                        r = -ENOMEM;
                if (r >= 0 && op->env &&
                    !(st->run_env = argv_of((const char *const *) op->env, strv_len(op->env))))
                        r = -ENOMEM;
                kstrv(&k, op->argv);
                kstrv(&k, op->env);
                break;
        case DF_OP_COPY:
                r = copy_step(op, c, st, &k, e);
                break;
        case DF_OP_ENV:
                for (size_t i = 0; r >= 0 && op->env[i]; i++)
                        r = sbx_env_set(&st->env, op->env[i]);
                kstrv(&k, op->env);
                break;
        case DF_OP_LABEL:
                if (!(st->labels = argv_of((const char *const *) op->env, strv_len(op->env))))
                        r = -ENOMEM;
                kstrv(&k, op->env);
                break;
        case DF_OP_EXPOSE:
                if (!(st->ports = argv_of((const char *const *) op->env, strv_len(op->env))))
                        r = -ENOMEM;
                kstrv(&k, op->env);
                break;
        case DF_OP_WORKDIR:
                if (!(st->workdir = strdup(op->value)))
                        r = -ENOMEM;
                kstr(&k, op->value);
                break;
        case DF_OP_USER:
                if (!(st->user = strdup(op->value)))
                        r = -ENOMEM;
                kstr(&k, op->value);
                break;
        case DF_OP_STOPSIGNAL:
                if (!(st->stop_signal = strdup(op->value)))
                        r = -ENOMEM;
                kstr(&k, op->value);
                break;
        case DF_OP_CMD:
        case DF_OP_ENTRYPOINT:
        case DF_OP_SHELL: {
                char **v = argv_of((const char *const *) op->argv, strv_len(op->argv));
                if (!v)
                        r = -ENOMEM;
                else if (op->kind == DF_OP_CMD)
                        st->has_cmd = true, st->cmd = v;
                else if (op->kind == DF_OP_ENTRYPOINT)
                        st->has_entrypoint = true, st->entrypoint = v;
                else
                        st->has_shell = true, st->shell = v;
                kstrv(&k, op->argv);
                break;
        }
        case DF_OP_HEALTHCHECK:
                st->has_healthcheck = true;
                if (!(st->hc_test = argv_of((const char *const *) op->argv, strv_len(op->argv))))
                        r = -ENOMEM;
                st->hc_interval_ns = op->hc.interval_ns;
                st->hc_timeout_ns = op->hc.timeout_ns;
                st->hc_start_period_ns = op->hc.start_period_ns;
                st->hc_start_interval_ns = op->hc.start_interval_ns;
                st->hc_retries = op->hc.retries;
                kstrv(&k, op->argv);
                kput(&k, &op->hc, sizeof(op->hc));
                break;
        default:
                break;
        }
        if (r >= 0 && !st->desc && !(st->desc = strdup(op->desc)))
                r = -ENOMEM;
        if (r >= 0 && k.oom)
                r = -ENOMEM;
        if (r < 0) {
                free(k.p);
                return r;
        }
        st->key = k.p;
        st->key_len = k.len;
        return 0;
}

/* Dockerfile text (a whole file when allow_from, else dockerfile_commands
 * lines) as steps; st carries ARG/ENV/SHELL across calls. *from gets the
 * FROM's image (allow_from). field names the request part in errors. */
static int dockerfile_steps(const char *text, bool allow_from, struct df_state *dst,
                            const struct bctx *c, struct sbx_build_spec *s, size_t *cap,
                            char **from, const char *field, struct wr_err *e) {
        struct df_file f = {0};
        struct df_plan p = {0};
        int r = df_parse(text, strlen(text), &f, e);
        if (r >= 0)
                r = df_eval(&f, dst, allow_from, &p, e);
        for (size_t i = 0; r >= 0 && i < p.n; i++) {
                if (p.ops[i].kind == DF_OP_FROM && from && !*from &&
                    !(*from = strdup(p.ops[i].value)))
                        r = -ENOMEM;
                if (r >= 0)
                        r = op_step(&p.ops[i], c, s, cap, e);
        }
        if (r >= 0 && allow_from && !dst->seen_from)
                r = INVALID(e, "%s: no FROM instruction", field);
        df_plan_clear(&p);
        df_file_clear(&f);
        if (r < 0 && r != -ENOMEM)
                return err_prefix(e, r, "%s", field);
        return r;
}
static int step_build(struct api_ctx *ctx, const Warren__V1__BuildStep *bs, size_t i,
                      struct sbx_build_step *st, struct wr_err *e) {
        char field[64];
        int r = 0;
        /* the cache key: the step's own encoding */
        st->key_len = protobuf_c_message_get_packed_size(&bs->base);
        if (!(st->key = malloc(st->key_len ? st->key_len : 1)))
                return -ENOMEM;
        protobuf_c_message_pack(&bs->base, st->key);
        switch (bs->kind_case) {
        case WARREN__V1__BUILD_STEP__KIND_PIP_INSTALL:
        case WARREN__V1__BUILD_STEP__KIND_APT_INSTALL: {
                bool apt = bs->kind_case == WARREN__V1__BUILD_STEP__KIND_APT_INSTALL;
                const Warren__V1__PackageList *pl = apt ? bs->apt_install : bs->pip_install;
                snprintf(field, sizeof(field), "steps[%zu].%s", i,
                         apt ? "apt_install" : "pip_install");
                if ((r = packages(pl, apt, field, e)) < 0)
                        return r;
                size_t n = pl->n_packages;
                const char *head_apt[] = {
                        "/bin/sh", "-c",
                        "apt-get -o APT::Sandbox::User=root update -qq && "
                        "DEBIAN_FRONTEND=noninteractive apt-get -o APT::Sandbox::User=root "
                        "install -y -qq --no-install-recommends \"$@\" && rm -rf "
                        "/var/lib/apt/lists/*",
                        "sh"};
                const char *head_pip[] = {"python3",
                                          "-m",
                                          "pip",
                                          "install",
                                          "--no-cache-dir",
                                          "--disable-pip-version-check",
                                          "--root-user-action=ignore"};
                size_t h = apt ? ELEMENTSOF(head_apt) : ELEMENTSOF(head_pip);
                const char **v = calloc(h + n, sizeof(char *));
                if (!v)
                        return -ENOMEM;
                memcpy(v, apt ? head_apt : head_pip, h * sizeof(char *));
                memcpy(v + h, pl->packages, n * sizeof(char *));
                st->kind = SBX_STEP_RUN;
                st->needs_root = apt;
                st->argv = argv_of(v, h + n);
                free(v);
                st->desc = join_desc(apt ? "apt_install" : "pip_install", pl->packages, n);
                return st->argv && st->desc ? 0 : -ENOMEM;
        }
        case WARREN__V1__BUILD_STEP__KIND_RUN:
                if (!bs->run || !*bs->run)
                        return INVALID(e, "steps[%zu].run: empty command", i);
                if ((r = set_run(st, bs->run)) < 0)
                        return r;
                st->desc = malloc(strlen(bs->run) + 5);
                if (st->desc)
                        sprintf(st->desc, "RUN %s", bs->run);
                return st->desc ? 0 : -ENOMEM;
        case WARREN__V1__BUILD_STEP__KIND_ADD_FILE: {
                const Warren__V1__FileAdd *fa = bs->add_file;
                if (!fa || !fa->path || fa->path[0] != '/')
                        return INVALID(e, "steps[%zu].add_file.path: give an absolute path", i);
                if (fa->mode > 07777)
                        return INVALID(e, "steps[%zu].add_file.mode: %o is not a file mode", i,
                                       fa->mode);
                snprintf(field, sizeof(field), "steps[%zu].add_file", i);
                const uint8_t *data;
                size_t len;
                void *owned = NULL;
                if ((r = file_data(ctx, fa, field, &data, &len, &owned, e)) < 0)
                        return r;
                st->kind = SBX_STEP_FILE;
                r = add_file(st, strdup(fa->path), data, len, (mode_t) fa->mode, 0, 0);
                free(owned);
                if (r < 0)
                        return r;
                st->desc = malloc(strlen(fa->path) + 64);
                if (!st->desc)
                        return -ENOMEM;
                sprintf(st->desc, "add_file %s (%zu bytes)", fa->path, len);
                return 0;
        }
        case WARREN__V1__BUILD_STEP__KIND_WORKDIR:
                if (!bs->workdir || bs->workdir[0] != '/')
                        return INVALID(e, "steps[%zu].workdir: give an absolute path", i);
                st->kind = SBX_STEP_CONFIG;
                st->workdir = strdup(bs->workdir);
                st->desc = malloc(strlen(bs->workdir) + 9);
                if (st->desc)
                        sprintf(st->desc, "WORKDIR %s", bs->workdir);
                return st->workdir && st->desc ? 0 : -ENOMEM;
        case WARREN__V1__BUILD_STEP__KIND_ENV: {
                st->kind = SBX_STEP_CONFIG;
                size_t n = bs->env ? bs->env->n_vars : 0;
                if (n == 0)
                        return INVALID(e, "steps[%zu].env: give at least one variable", i);
                for (size_t k = 0; k < n; k++) {
                        const Warren__V1__EnvSet__VarsEntry *v = bs->env->vars[k];
                        if (!sbx_env_name_valid(v->key))
                                return INVALID(e,
                                               "steps[%zu].env: %.80s is not a valid "
                                               "variable name",
                                               i, v->key);
                        if ((r = sbx_env_set2(&st->env, v->key, v->value)) < 0)
                                return r;
                }
                st->desc = join_desc("ENV", st->env, n);
                return st->desc ? 0 : -ENOMEM;
        }
        case WARREN__V1__BUILD_STEP__KIND_ENTRYPOINT:
        case WARREN__V1__BUILD_STEP__KIND_CMD: {
                bool ep = bs->kind_case == WARREN__V1__BUILD_STEP__KIND_ENTRYPOINT;
                const Warren__V1__StringList *sl = ep ? bs->entrypoint : bs->cmd;
                st->kind = SBX_STEP_CONFIG;
                char **v = argv_of((const char *const *) (sl ? sl->values : NULL),
                                   sl ? sl->n_values : 0);
                if (!v)
                        return -ENOMEM;
                if (ep) {
                        st->has_entrypoint = true;
                        st->entrypoint = v;
                } else {
                        st->has_cmd = true;
                        st->cmd = v;
                }
                st->desc = join_desc(ep ? "ENTRYPOINT" : "CMD", v, sl ? sl->n_values : 0);
                return st->desc ? 0 : -ENOMEM;
        }
        default:
                return INVALID(e, "steps[%zu]: an empty step", i);
        }
}

/* The request's ImageBuild as builder steps. base_env (may be NULL): the
 * base image's Env, for Dockerfile substitution ($PATH in ENV PATH=...);
 * the first pass runs without it (the base may still have to be pulled),
 * a second one with it when the spec has Dockerfile parts. */
static int spec_build(struct api_ctx *ctx, const Warren__V1__ImageBuild *b, char *const *base_env,
                      struct sbx_build_spec **ret, struct wr_err *e) {
        if (!b)
                return INVALID(e, "build: missing");
        if (b->n_steps > STEPS_MAX)
                return INVALID(e, "build.steps: more than %d steps", STEPS_MAX);
        struct sbx_build_spec *s = calloc(1, sizeof(*s));
        if (!s)
                return -ENOMEM;
        s->step_timeout_secs = STEP_TIMEOUT_SECS;
        size_t cap = 0;
        struct bctx c = {0};
        struct df_state dst = {0};
        char **build_args = calloc(b->n_build_args + 1, sizeof(char *));
        char *from = NULL;
        int r = build_args ? 0 : -ENOMEM;
        for (size_t i = 0; r >= 0 && i < b->n_build_args; i++) {
                const Warren__V1__ImageBuild__BuildArgsEntry *a = b->build_args[i];
                if (!sbx_env_name_valid(a->key))
                        r = INVALID(e, "build.build_args: %.80s is not a valid ARG name", a->key);
                else if (!(build_args[i] = malloc(strlen(a->key) + strlen(a->value) + 2)))
                        r = -ENOMEM;
                else
                        sprintf(build_args[i], "%s=%s", a->key, a->value);
        }
        dst.build_args = build_args;
        dst.base_env = base_env;
        if (!(b->dockerfile && *b->dockerfile))
                /* no FROM to set it at: the base's Env holds from the start */
                for (size_t i = 0; r >= 0 && base_env && base_env[i]; i++)
                        if (strchr(base_env[i], '='))
                                r = df_state_env_set(&dst, base_env[i]);
        if (r >= 0)
                r = bctx_build(ctx, b, &c, e);
        if (r >= 0 && b->dockerfile && *b->dockerfile) {
                if (b->base_image && *b->base_image)
                        r = INVALID(e, "build: give base_image or a Dockerfile (its FROM is the "
                                       "base), not both");
                else
                        r = dockerfile_steps(b->dockerfile, true, &dst, &c, s, &cap, &from,
                                             "build.dockerfile", e);
        }
        if (r >= 0)
                s->base = from ? TAKE_PTR(from)
                               : strdup(b->base_image && *b->base_image
                                                ? b->base_image
                                                : sbx_image_ref(ctx->sandboxes, NULL));
        if (r >= 0 && !s->base)
                r = -ENOMEM;
        for (size_t i = 0; r >= 0 && i < b->n_steps; i++) {
                const Warren__V1__BuildStep *bs = b->steps[i];
                if (bs->kind_case == WARREN__V1__BUILD_STEP__KIND_DOCKERFILE) {
                        char field[64];
                        snprintf(field, sizeof(field), "steps[%zu].dockerfile", i);
                        if (!bs->dockerfile || !*bs->dockerfile)
                                r = INVALID(e, "%s: empty", field);
                        else
                                r = dockerfile_steps(bs->dockerfile, false, &dst, &c, s, &cap, NULL,
                                                     field, e);
                        continue;
                }
                struct sbx_build_step *st = step_new(s, &cap);
                if (!st)
                        r = s->n_steps >= STEPS_MAX
                                    ? INVALID(e, "build: more than %d steps", STEPS_MAX)
                                    : -ENOMEM;
                else
                        r = step_build(ctx, bs, i, st, e);
                /* an env step is visible to later dockerfile_commands */
                for (size_t k = 0; r >= 0 && st && st->env && st->env[k]; k++)
                        r = df_state_env_set(&dst, st->env[k]);
        }
        /* identical requests (same bytes) run once: the key of the whole */
        if (r >= 0) {
                size_t n = protobuf_c_message_get_packed_size(&b->base);
                uint8_t *buf = malloc(n ? n : 1);
                if (!buf)
                        r = -ENOMEM;
                else {
                        protobuf_c_message_pack(&b->base, buf);
                        s->has_spec_key =
                                EVP_Digest(buf, n, s->spec_key, NULL, EVP_sha256(), NULL) == 1;
                        free(buf);
                }
        }
        free(from);
        bctx_clear(&c);
        dst.build_args = NULL;
        df_state_clear(&dst);
        for (size_t i = 0; build_args && build_args[i]; i++)
                free(build_args[i]);
        free(build_args);
        if (r == -E2BIG && e && !e->code)
                r = INVALID(e, "build: more than %u environment variables", DF_VARS_MAX);
        if (r < 0) {
                sbx_build_spec_free(s);
                return r == -ENOMEM ? err_set(e, r, "out of memory") : r;
        }
        *ret = s;
        return 0;
}

struct build_call {
        struct rpc_call *call;
        struct sbx_build *b;
        struct img_store *images;
        struct sbx_manager *sandboxes;
        char name[512]; /* BuildImageRequest.name, normalised; "" = none */
        struct api_ctx *ctx;
        const Warren__V1__BuildImageRequest *req; /* valid until the call is freed */
        struct img_resolve *resolve;              /* pulling the base image */
        struct sbx_build_spec *spec;              /* waiting for that pull */
};

static unsigned running;

unsigned api_builds_running(void) {
        return running;
}

static void build_log(const char *line, void *userdata) {
        struct build_call *bc = userdata;
        Warren__V1__BuildImageProgress p = WARREN__V1__BUILD_IMAGE_PROGRESS__INIT;
        p.log = (char *) line;
        (void) rpc_call_send(bc->call, &p.base);
}

static void build_done(int r, const struct img_info *img, const struct wr_err *e, void *userdata) {
        struct build_call *bc = userdata;
        bc->b = NULL;
        running--;
        struct img_info *named = NULL;
        struct wr_err ne = {0};
        if (r >= 0 && bc->name[0]) {
                /* the same image (same layers and config) under the name */
                if ((r = img_store_commit_image(bc->images, bc->name, &img->config, img->diff_ids,
                                                img->n_layers, "build", &named, &ne)) < 0)
                        e = &ne;
                else
                        img = named;
        }
        if (r < 0) {
                rpc_call_finish_err(bc->call, e);
        } else {
                api_image_record(bc->call, img->id);
                Warren__V1__Image msg;
                Warren__V1__ImageConfig cfg;
                Warren__V1__Timestamp ts;
                api_image_to_proto(img, &msg, &cfg, &ts);
                Warren__V1__BuildImageProgress p = WARREN__V1__BUILD_IMAGE_PROGRESS__INIT;
                p.image = &msg;
                rpc_call_send(bc->call, &p.base);
                rpc_call_finish(bc->call, WR_STATUS_OK, NULL);
        }
        img_info_free(named);
        rpc_call_unref(bc->call);
}

/* With the base image known: evaluate the Dockerfile parts again with
 * its Env visible (ENV PATH=/x:$PATH), replacing *spec. */
static int rebase(struct build_call *bc, const struct img_info *base, struct sbx_build_spec **spec,
                  struct wr_err *e) {
        const Warren__V1__ImageBuild *b = bc->req->build;
        bool df = b->dockerfile && *b->dockerfile;
        for (size_t i = 0; !df && i < b->n_steps; i++)
                df = b->steps[i]->kind_case == WARREN__V1__BUILD_STEP__KIND_DOCKERFILE;
        if (!df || !base->config.n_env)
                return 0;
        struct sbx_build_spec *n = NULL;
        int r = spec_build(bc->ctx, b, base->config.env, &n, e);
        if (r < 0)
                return r;
        n->step_timeout_secs = (*spec)->step_timeout_secs;
        sbx_build_spec_free(*spec);
        *spec = n;
        return 0;
}

/* Start the build of spec (taken over) for bc's call. */
static void start_build(struct build_call *bc, struct sbx_build_spec *spec) {
        struct wr_err e = {0};
        if (sbx_build(bc->sandboxes, spec, build_log, build_done, bc, &bc->b, &e) < 0) {
                running--;
                struct rpc_call *call = bc->call;
                rpc_call_finish_err(call, &e);
                rpc_call_unref(call);
        }
}

static void base_resolved(int r, struct img_info *info, const struct wr_err *e, void *userdata) {
        struct build_call *bc = userdata;
        struct sbx_build_spec *spec = bc->spec;
        bc->resolve = NULL;
        bc->spec = NULL;
        if (r < 0) {
                running--;
                sbx_build_spec_free(spec);
                struct rpc_call *call = bc->call;
                struct wr_err pe = *e;
                err_prefix(&pe, r, "build: base image");
                rpc_call_finish_err(call, &pe);
                rpc_call_unref(call);
                return;
        }
        struct wr_err re = {0};
        if ((r = rebase(bc, info, &spec, &re)) < 0) {
                img_info_free(info);
                running--;
                sbx_build_spec_free(spec);
                rpc_call_finish_err(bc->call, &re);
                rpc_call_unref(bc->call);
                return;
        }
        /* "ubuntu" is stored as "ubuntu:latest": build from the id */
        char *id = strdup(info->id);
        img_info_free(info);
        if (!id) {
                running--;
                sbx_build_spec_free(spec);
                rpc_call_finish(bc->call, WR_STATUS_RESOURCE_EXHAUSTED, "out of memory");
                rpc_call_unref(bc->call);
                return;
        }
        free(spec->base);
        spec->base = id;
        start_build(bc, spec);
}

static void build_image(struct rpc_call *call, const ProtobufCMessage *m) {
        const Warren__V1__BuildImageRequest *req = (const void *) m;
        struct api_ctx *ctx = rpc_call_server_ctx(call);
        if (!ctx->sandboxes || !ctx->images) {
                rpc_call_finish(call, WR_STATUS_UNAVAILABLE, "warrend is shutting down");
                return;
        }
        struct wr_err e = {0};
        struct sbx_build_spec *spec = NULL;
        /* another environment's image is no base (one not stored yet is
         * pulled by the build) */
        if (req->build && api_image_hidden(call, req->build->base_image)) {
                rpc_call_finish(call, WR_STATUS_NOT_FOUND, "build.base_image: image not found");
                return;
        }
        int r = spec_build(ctx, req->build, NULL, &spec, &e);
        if (r < 0) {
                rpc_call_finish_err(call, &e);
                return;
        }
        struct build_call *bc = calloc(1, sizeof(*bc));
        if (!bc) {
                sbx_build_spec_free(spec);
                rpc_call_finish(call, WR_STATUS_RESOURCE_EXHAUSTED, "out of memory");
                return;
        }
        bc->call = rpc_call_ref(call);
        bc->images = ctx->images;
        bc->ctx = ctx;
        bc->req = req;
        rpc_call_set_data(call, bc);
        if (req->name && *req->name &&
            img_name_normalize(req->name, bc->name, sizeof(bc->name), &e) < 0) {
                sbx_build_spec_free(spec);
                rpc_call_unref(call);
                err_prefix(&e, -EINVAL, "name");
                rpc_call_finish_err(call, &e);
                return;
        }
        if (req->step_timeout_secs < 0 || req->step_timeout_secs > 1e7) {
                sbx_build_spec_free(spec);
                rpc_call_unref(call);
                rpc_call_finish(call, WR_STATUS_INVALID_ARGUMENT,
                                "step_timeout_secs: give 0 (the default) to 1e7 seconds");
                return;
        }
        if (req->step_timeout_secs > 0)
                spec->step_timeout_secs = req->step_timeout_secs;
        bc->sandboxes = ctx->sandboxes;
        running++;
        /* the base: stored, else pulled first (never the daemon's default) */
        struct img_info *base = NULL;
        bool is_default = !strcmp(spec->base, sbx_image_ref(ctx->sandboxes, NULL));
        r = img_resolve(ctx->images, rpc_call_loop(call), spec->base,
                        is_default ? IMG_RESOLVE_NO_PULL : 0, base_resolved, bc, &base,
                        &bc->resolve, &e);
        if (r < 0) {
                running--;
                sbx_build_spec_free(spec);
                rpc_call_unref(call);
                err_prefix(&e, r, "build: base image");
                rpc_call_finish_err(call, &e);
                return;
        }
        if (r == 1) {
                r = rebase(bc, base, &spec, &e);
                img_info_free(base);
                if (r < 0) {
                        running--;
                        sbx_build_spec_free(spec);
                        rpc_call_unref(call);
                        rpc_call_finish_err(call, &e);
                        return;
                }
                start_build(bc, spec);
                return;
        }
        bc->spec = spec;
        build_log("Pulling the base image first", bc);
}

static void build_cancel(struct rpc_call *call, int status) {
        struct build_call *bc = rpc_call_get_data(call);
        if (bc && bc->resolve) {
                img_resolve_cancel(bc->resolve);
                bc->resolve = NULL;
                sbx_build_spec_free(bc->spec);
                bc->spec = NULL;
                running--;
                rpc_call_unref(call);
        }
        if (bc && bc->b) {
                struct sbx_build *b = bc->b;
                bc->b = NULL;
                running--;
                sbx_build_cancel(b);
                rpc_call_unref(call);
        }
}

static void build_free(struct rpc_call *call) {
        struct build_call *bc = rpc_call_get_data(call);
        if (bc && bc->resolve) {
                img_resolve_cancel(bc->resolve);
                sbx_build_spec_free(bc->spec);
                running--;
        }
        if (bc && bc->b) {
                running--;
                sbx_build_cancel(bc->b);
                bc->b = NULL;
        }
        free(bc);
}

const struct rpc_method api_build_image_method = {
        .path = "/warren.v1.Images/BuildImage",
        .kind = RPC_SERVER_STREAM,
        .input = &warren__v1__build_image_request__descriptor,
        .output = &warren__v1__build_image_progress__descriptor,
        .on_message = build_image,
        .on_cancel = build_cancel,
        .on_free = build_free,
        .sensitive = false,
};
