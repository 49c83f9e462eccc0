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
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/api-internal.h"
#include "image/image.h"
#include "basic/log.h"
#include "basic/macro.h"
#include "sandbox/sandbox.h"
#include "warren/v1/images.pb-c.h"

#define STEPS_MAX 256
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

static int set_run(struct sbx_build_step *st, const char *cmd) {
        const char *argv[] = {"/bin/sh", "-c", cmd};
        st->kind = SBX_STEP_RUN;
        st->argv = argv_of(argv, 3);
        return st->argv ? 0 : -ENOMEM;
}

/* CMD/ENTRYPOINT arguments: exec form (a JSON array of strings) or shell
 * form (sh -c TEXT). */
static int exec_form(const char *text, char ***ret, const char *field, struct wr_err *e) {
        while (*text == ' ')
                text++;
        if (*text != '[') {
                const char *argv[] = {"/bin/sh", "-c", text};
                *ret = argv_of(argv, 3);
                return *ret ? 0 : -ENOMEM;
        }
        json_error_t je;
        json_t *a = json_loads(text, JSON_REJECT_DUPLICATES, &je);
        if (!a || !json_is_array(a) || json_array_size(a) > 1024) {
                json_decref(a);
                return INVALID(e, "%s: not a JSON array of strings (column %d: %s)", field,
                               je.column, je.text);
        }
        size_t n = json_array_size(a);
        char **v = calloc(n + 1, sizeof(char *));
        for (size_t i = 0; v && i < n; i++) {
                json_t *s = json_array_get(a, i);
                if (!json_is_string(s)) {
                        json_decref(a);
                        sbx_argv_free(v);
                        return INVALID(e, "%s[%zu]: not a string", field, i);
                }
                if (!(v[i] = strdup(json_string_value(s)))) {
                        sbx_argv_free(v);
                        v = NULL;
                }
        }
        json_decref(a);
        if (!v)
                return -ENOMEM;
        *ret = v;
        return 0;
}

/* One raw Dockerfile instruction. */
static int dockerfile_step(const char *ins, struct sbx_build_step *st, const char *field,
                           struct wr_err *e) {
        while (*ins == ' ' || *ins == '\t')
                ins++;
        size_t kw = strcspn(ins, " \t");
        char word[16];
        if (kw == 0 || kw >= sizeof(word))
                return INVALID(e, "%s: not a Dockerfile instruction: \"%.60s\"", field, ins);
        for (size_t i = 0; i < kw; i++)
                word[i] = (char) toupper((unsigned char) ins[i]);
        word[kw] = '\0';
        const char *arg = ins + kw + strspn(ins + kw, " \t");
        if (!strcmp(word, "RUN")) {
                if (!*arg)
                        return INVALID(e, "%s: RUN without a command", field);
                if (*arg == '[') {
                        st->kind = SBX_STEP_RUN;
                        return exec_form(arg, &st->argv, field, e);
                }
                return set_run(st, arg);
        }
        st->kind = SBX_STEP_CONFIG;
        if (!strcmp(word, "WORKDIR")) {
                if (*arg != '/')
                        return INVALID(e, "%s: WORKDIR wants an absolute path", field);
                return (st->workdir = strdup(arg)) ? 0 : -ENOMEM;
        }
        if (!strcmp(word, "USER"))
                return *arg ? ((st->user = strdup(arg)) ? 0 : -ENOMEM)
                            : INVALID(e, "%s: USER without a user", field);
        if (!strcmp(word, "ENV")) {
                /* ENV K=V [K2=V2]... or the legacy ENV K V */
                char *copy = strdup(arg);
                if (!copy)
                        return -ENOMEM;
                int r = 0;
                const char *eq = strchr(copy, '='), *sp = strpbrk(copy, " \t");
                if (!eq || (sp && sp < eq)) {
                        /* legacy: the first word is the key, the rest the value */
                        if (!sp) {
                                free(copy);
                                return INVALID(e, "%s: ENV wants K=V", field);
                        }
                        size_t kl = (size_t) (sp - copy);
                        const char *v = sp + strspn(sp, " \t");
                        char *kv = malloc(kl + strlen(v) + 2);
                        if (kv) {
                                snprintf(kv, kl + strlen(v) + 2, "%.*s=%s", (int) kl, copy, v);
                                r = sbx_env_set(&st->env, kv);
                                free(kv);
                        } else
                                r = -ENOMEM;
                } else {
                        for (char *tok = strtok(copy, " \t"); tok && r >= 0;
                             tok = strtok(NULL, " \t")) {
                                char *q = tok + strlen(tok) - 1;
                                char *eqp = strchr(tok, '=');
                                if (!eqp) {
                                        r = INVALID(e, "%s: ENV part \"%.40s\" is not K=V", field,
                                                    tok);
                                        break;
                                }
                                /* strip one pair of quotes around the value */
                                if (q > eqp + 1 && (*q == '"' || *q == '\'') && eqp[1] == *q) {
                                        *q = '\0';
                                        memmove(eqp + 1, eqp + 2, strlen(eqp + 2) + 1);
                                }
                                r = sbx_env_set(&st->env, tok);
                        }
                }
                free(copy);
                return r == -EINVAL ? INVALID(e, "%s: ENV wants K=V", field) : r;
        }
        if (!strcmp(word, "CMD")) {
                st->has_cmd = true;
                return exec_form(arg, &st->cmd, field, e);
        }
        if (!strcmp(word, "ENTRYPOINT")) {
                st->has_entrypoint = true;
                return exec_form(arg, &st->entrypoint, field, e);
        }
        if (!strcmp(word, "LABEL") || !strcmp(word, "EXPOSE") || !strcmp(word, "HEALTHCHECK") ||
            !strcmp(word, "STOPSIGNAL"))
                return 0; /* recorded in the log (desc), nothing to change */
        return err_setx(e, -EOPNOTSUPP, WR_STATUS_UNIMPLEMENTED, WR_FAULT_CLIENT,
                        "%s: the Dockerfile instruction %s is not supported by this builder "
                        "(RUN, ENV, WORKDIR, USER, CMD, ENTRYPOINT, LABEL, EXPOSE are)",
                        field, word);
}

static int step_build(const Warren__V1__BuildStep *bs, size_t i, struct sbx_build_step *st,
                      struct wr_err *e) {
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
                st->kind = SBX_STEP_FILE;
                st->path = strdup(fa->path);
                st->len = fa->content.len;
                st->data = malloc(st->len ? st->len : 1);
                st->mode = (mode_t) fa->mode;
                st->desc = malloc(strlen(fa->path) + 64);
                if (!st->path || !st->data || !st->desc)
                        return -ENOMEM;
                if (st->len)
                        memcpy(st->data, fa->content.data, st->len);
                sprintf(st->desc, "add_file %s (%zu bytes)", fa->path, st->len);
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
        case WARREN__V1__BUILD_STEP__KIND_DOCKERFILE:
                snprintf(field, sizeof(field), "steps[%zu].dockerfile", i);
                if (!bs->dockerfile || strlen(bs->dockerfile) > 65536)
                        return INVALID(e, "%s: empty or longer than 64 KiB", field);
                if (strchr(bs->dockerfile, '\n') &&
                    strncasecmp(bs->dockerfile + strspn(bs->dockerfile, " \t"), "RUN", 3) != 0)
                        return INVALID(e, "%s: one instruction per step", field);
                if ((r = dockerfile_step(bs->dockerfile, st, field, e)) < 0)
                        return r;
                return (st->desc = strdup(bs->dockerfile)) ? 0 : -ENOMEM;
        default:
                return INVALID(e, "steps[%zu]: an empty step", i);
        }
}

static int spec_build(struct api_ctx *ctx, const Warren__V1__ImageBuild *b,
                      struct sbx_build_spec **ret, struct wr_err *e) {
        if (!b)
                return INVALID(e, "build: missing");
        if (b->n_steps > STEPS_MAX)
                return INVALID(e, "build.steps: more than %d steps", STEPS_MAX);
        struct sbx_build_spec *s = calloc(1, sizeof(*s));
        if (!s)
                return -ENOMEM;
        s->base = strdup(b->base_image && *b->base_image ? b->base_image
                                                         : sbx_image_ref(ctx->sandboxes, NULL));
        s->steps = calloc(b->n_steps ? b->n_steps : 1, sizeof(*s->steps));
        s->step_timeout_secs = STEP_TIMEOUT_SECS;
        int r = s->base && s->steps ? 0 : -ENOMEM;
        for (size_t i = 0; r >= 0 && i < b->n_steps; i++) {
                s->n_steps++;
                r = step_build(b->steps[i], i, &s->steps[i], e);
        }
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
};

static void build_log(const char *line, void *userdata) {
        struct build_call *bc = userdata;
        Warren__V1__BuildImageProgress p = WARREN__V1__BUILD_IMAGE_PROGRESS__INIT;
        p.log = (char *) line;
        (void) rpc_call_send(bc->call, &p.base);
}

static void build_done(int r, const struct img_info *img, const struct wr_err *e, void *userdata) {
        struct build_call *bc = userdata;
        bc->b = NULL;
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
        rpc_call_unref(bc->call);
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
        int r = spec_build(ctx, req->build, &spec, &e);
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
        rpc_call_set_data(call, bc);
        if ((r = sbx_build(ctx->sandboxes, spec, build_log, build_done, bc, &bc->b, &e)) < 0) {
                rpc_call_unref(call);
                rpc_call_finish_err(call, &e);
                return;
        }
}

static void build_cancel(struct rpc_call *call, int status) {
        struct build_call *bc = rpc_call_get_data(call);
        if (bc && bc->b) {
                struct sbx_build *b = bc->b;
                bc->b = NULL;
                sbx_build_cancel(b);
                rpc_call_unref(call);
        }
}

static void build_free(struct rpc_call *call) {
        struct build_call *bc = rpc_call_get_data(call);
        if (bc && bc->b) {
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
