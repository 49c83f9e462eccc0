/* SPDX-License-Identifier: Apache-2.0 */
/* The sandbox spec and its pure helpers (src/sandbox/spec.c), and the
 * API's CreateSandboxRequest → spec conversion (src/api/spec.c) against a
 * real SQLite store holding real (encrypted) secrets. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <ftw.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "api/spec.h"
#include "basic/err.h"
#include "sandbox/exec.h"
#include "sandbox/sandbox.h"
#include "sandbox/ssh.h"
#include "store/store.h"

/* --- pure helpers --- */

static void test_names(void **state) {
        static const struct {
                const char *s;
                bool ok;
        } cases[] = {
                {"a", true},    {"web-1", true}, {"0abc", true}, {"a.b_c-d", true},
                {"", false},    {"-a", false},   {".a", false},  {"A", false},
                {"a b", false}, {"a/b", false},  {"ü", false},   {"a\n", false},
        };
        for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
                assert_int_equal(sbx_name_valid(cases[i].s), cases[i].ok);
        char long63[64], long64[65];
        memset(long63, 'a', 63);
        long63[63] = 0;
        memset(long64, 'a', 64);
        long64[64] = 0;
        assert_true(sbx_name_valid(long63));
        assert_false(sbx_name_valid(long64));

        assert_true(sbx_env_name_valid("PATH"));
        assert_true(sbx_env_name_valid("_x.y-z9"));
        assert_false(sbx_env_name_valid(""));
        assert_false(sbx_env_name_valid("9LIVES"));
        assert_false(sbx_env_name_valid("A=B"));
        assert_false(sbx_env_name_valid("A B"));

        assert_true(sbx_hostname_valid("box-1.example"));
        assert_false(sbx_hostname_valid(""));
        assert_false(sbx_hostname_valid("a b"));
        assert_false(sbx_hostname_valid("a/b"));
        assert_false(sbx_hostname_valid("tab\there"));
}

static void test_durations(void **state) {
        static const struct {
                const char *s;
                int r;
                int64_t ns;
        } cases[] = {
                {"1", 0, 1000000000LL},      {"3600s", 0, 3600000000000LL},
                {"90m", 0, 5400000000000LL}, {"2h", 0, 7200000000000LL},
                {"1d", 0, 86400000000000LL}, {"1500ms", 0, 1500000000LL},
                {"0.5s", 0, 500000000LL},    {"0", -EINVAL, 0},
                {"-1s", -EINVAL, 0},         {"", -EINVAL, 0},
                {"5x", -EINVAL, 0},          {"s", -EINVAL, 0},
                {"1e30d", -ERANGE, 0},       {"nan", -EINVAL, 0},
        };
        for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
                int64_t ns = -1;
                int r = sbx_duration_parse(cases[i].s, &ns);
                if (r != cases[i].r)
                        fail_msg("duration %s: %d, want %d", cases[i].s, r, cases[i].r);
                if (r == 0)
                        assert_int_equal(ns, cases[i].ns);
        }
}

static void test_env(void **state) {
        char **env = NULL;
        assert_int_equal(sbx_env_set2(&env, "A", "1"), 0);
        assert_int_equal(sbx_env_set2(&env, "B", "two=2"), 0);
        assert_int_equal(sbx_env_set(&env, "A=3"), 0);  /* replaces, keeps the order */
        assert_int_equal(sbx_env_set(&env, "AB=4"), 0); /* a prefix is another name */
        assert_int_equal(sbx_env_set(&env, "noequals"), -EINVAL);
        assert_int_equal(sbx_env_set(&env, "=x"), -EINVAL);
        assert_int_equal(sbx_env_set2(&env, "", "x"), -EINVAL);
        assert_string_equal(env[0], "A=3");
        assert_string_equal(env[1], "B=two=2");
        assert_string_equal(env[2], "AB=4");
        assert_null(env[3]);
        assert_string_equal(sbx_env_find(env, "B"), "two=2");
        assert_string_equal(sbx_env_find(env, "AB"), "4");
        assert_null(sbx_env_find(env, "C"));
        char **copy = sbx_env_dup(env);
        assert_non_null(copy);
        assert_string_equal(copy[2], "AB=4");
        assert_null(copy[3]);
        assert_ptr_not_equal(copy[0], env[0]);
        sbx_env_free(copy);
        sbx_env_free(env);

        const char *v[] = {"x", "y", NULL};
        char **a = sbx_argv_dup(v, 0);
        assert_non_null(a);
        assert_string_equal(a[1], "y");
        assert_null(a[2]);
        sbx_argv_free(a);
        a = sbx_argv_dup(v, 1);
        assert_string_equal(a[0], "x");
        assert_null(a[1]);
        sbx_argv_free(a);
        assert_null(sbx_argv_dup(NULL, 0));
}

/* A spec with one field set wrong gives INVALID_ARGUMENT naming it. */
static void test_spec_check(void **state) {
        struct sbx_spec *s = NULL;
        struct wr_err e = {0};
        assert_int_equal(sbx_spec_new(&s), 0);
        assert_int_equal(sbx_spec_check(s, &e), 0); /* all defaults */

        s->name = strdup("Bad Name");
        assert_int_equal(sbx_spec_check(s, &e), -EINVAL);
        assert_int_equal(err_status(&e), WR_STATUS_INVALID_ARGUMENT);
        assert_int_equal(e.fault, WR_FAULT_CLIENT);
        assert_true(strncmp(e.msg, "name: \"Bad Name\"", 16) == 0);
        free(s->name);
        s->name = strdup("good");

        s->workdir = strdup("rel/dir");
        err_clear(&e);
        assert_int_equal(sbx_spec_check(s, &e), -EINVAL);
        assert_non_null(strstr(e.msg, "workdir: \"rel/dir\" is relative"));
        free(s->workdir);
        s->workdir = strdup("/srv");

        s->hostname = strdup("a b");
        err_clear(&e);
        assert_int_equal(sbx_spec_check(s, &e), -EINVAL);
        assert_true(strncmp(e.msg, "hostname:", 9) == 0);
        free(s->hostname);
        s->hostname = NULL;

        assert_int_equal(sbx_env_set(&s->env, "9X=1"), 0); /* sbx_env_set does not judge names */
        err_clear(&e);
        assert_int_equal(sbx_spec_check(s, &e), -EINVAL);
        assert_non_null(strstr(e.msg, "env: 9X is not a valid variable name"));
        sbx_env_free(s->env);
        s->env = NULL;
        assert_int_equal(sbx_env_set2(&s->env, "OK", "1"), 0);

        s->tags = calloc(1, sizeof(*s->tags));
        s->tags[0].key = strdup("");
        s->tags[0].value = strdup("v");
        s->n_tags = 1;
        err_clear(&e);
        assert_int_equal(sbx_spec_check(s, &e), -EINVAL);
        assert_non_null(strstr(e.msg, "tags: a tag has an empty key"));
        free(s->tags[0].key);
        s->tags[0].key = strdup("k");

        s->image_ref = strdup("");
        err_clear(&e);
        assert_int_equal(sbx_spec_check(s, &e), -EINVAL);
        assert_true(strncmp(e.msg, "image:", 6) == 0);
        free(s->image_ref);
        s->image_ref = NULL;

        s->lifetime_ns = -5;
        err_clear(&e);
        assert_int_equal(sbx_spec_check(s, &e), -EINVAL);
        assert_true(strncmp(e.msg, "lifetime:", 9) == 0);
        s->lifetime_ns = 0;

        /* mounts: checked by the runtime's rules, named by entry; the spec
         * owns (and frees) each entry's strings and data */
        s->mounts = calloc(2, sizeof(*s->mounts));
        s->n_mounts = 2;
        s->mounts[0] = (struct rt_mount){.kind = RT_MOUNT_FILE,
                                         .target = strdup("/etc/token"),
                                         .data = strdup("s3cret"),
                                         .len = 6,
                                         .flags = RT_MOUNT_RO};
        s->mounts[1] =
                (struct rt_mount){.kind = RT_MOUNT_TMPFS, .target = strdup("rel"), .size = 1 << 20};
        err_clear(&e);
        assert_int_equal(sbx_spec_check(s, &e), -EINVAL);
        assert_int_equal(err_status(&e), WR_STATUS_INVALID_ARGUMENT);
        assert_non_null(strstr(e.msg, "mount 1"));
        free((char *) s->mounts[1].target);
        s->mounts[1].target = strdup("/proc/x");
        err_clear(&e);
        assert_int_equal(sbx_spec_check(s, &e), -EINVAL);
        assert_non_null(strstr(e.msg, "/proc"));
        free((char *) s->mounts[1].target);
        s->mounts[1].target = strdup("/scratch");

        err_clear(&e);
        assert_int_equal(sbx_spec_check(s, &e), 0);
        sbx_spec_free(s);
        sbx_spec_free(NULL);
}

/* --- CreateSandboxRequest → spec, with a real store --- */

struct fixture {
        char dir[64];
        struct store *s;
};

static int rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw) {
        return remove(path);
}

static int setup(void **state) {
        struct fixture *f = calloc(1, sizeof(*f));
        assert_non_null(f);
        strcpy(f->dir, "/tmp/warren-test-sandbox-XXXXXX");
        assert_non_null(mkdtemp(f->dir));
        char db[128];
        snprintf(db, sizeof(db), "%s/warren.db", f->dir);
        struct wr_err e = {0};
        if (store_open(db, &f->s, &e) < 0)
                fail_msg("store_open: %s", e.msg);
        /* two stored secrets: a plain one and one with several keys */
        struct store_secret_entry plain = {
                .key = (char *) "", .value = (uint8_t *) "hunter2", .len = 7};
        assert_int_equal(store_secret_set(f->s, STORE_ENV_DEFAULT, "pw", &plain, 1, &e), 0);
        struct store_secret_entry multi[] = {
                {.key = (char *) "AWS_KEY", .value = (uint8_t *) "AK", .len = 2},
                {.key = (char *) "AWS_SECRET", .value = (uint8_t *) "SK", .len = 2},
        };
        assert_int_equal(store_secret_set(f->s, STORE_ENV_DEFAULT, "aws", multi, 2, &e), 0);
        *state = f;
        return 0;
}

static int teardown(void **state) {
        struct fixture *f = *state;
        store_close(f->s);
        nftw(f->dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
        free(f);
        return 0;
}

/* One request to build: a little arena of protobuf-c structs. */
struct req {
        Warren__V1__CreateSandboxRequest r;
        Warren__V1__ImageSpec image;
        Warren__V1__Resources res;
        Warren__V1__CreateSandboxRequest__EnvEntry env[4], *envp[4];
        Warren__V1__EnvValue val[4];
        Warren__V1__SecretRef ref[4], *refp[4];
        Warren__V1__InlineSecrets inl;
        Warren__V1__InlineSecrets__ValuesEntry kv, *kvp;
        Warren__V1__CreateSandboxRequest__TagsEntry tag, *tagp;
};

static void req_init(struct req *q) {
        memset(q, 0, sizeof(*q));
        warren__v1__create_sandbox_request__init(&q->r);
        warren__v1__image_spec__init(&q->image);
        warren__v1__resources__init(&q->res);
        for (int i = 0; i < 4; i++) {
                warren__v1__create_sandbox_request__env_entry__init(&q->env[i]);
                warren__v1__env_value__init(&q->val[i]);
                warren__v1__secret_ref__init(&q->ref[i]);
                q->envp[i] = &q->env[i];
                q->refp[i] = &q->ref[i];
        }
        warren__v1__inline_secrets__init(&q->inl);
        warren__v1__inline_secrets__values_entry__init(&q->kv);
        warren__v1__create_sandbox_request__tags_entry__init(&q->tag);
        q->kvp = &q->kv;
        q->tagp = &q->tag;
}

static void test_spec_from_request(void **state) {
        struct fixture *f = *state;
        struct req q;
        req_init(&q);
        q.image.kind_case = WARREN__V1__IMAGE_SPEC__KIND_REF;
        q.image.ref = (char *) "busybox:latest";
        q.r.image = &q.image;
        q.r.name = (char *) "web";
        q.r.workdir = (char *) "/srv";
        q.r.lifetime = (char *) "90m";
        q.res.cpu = (char *) "500m";
        q.res.memory = (char *) "256Mi";
        q.res.pids = 64;
        q.r.resources = &q.res;
        /* env: a plain value, a stored secret, an inline secret */
        q.env[0].key = (char *) "MODE";
        q.val[0].kind_case = WARREN__V1__ENV_VALUE__KIND_VALUE;
        q.val[0].value = (char *) "prod";
        q.env[0].value = &q.val[0];
        q.env[1].key = (char *) "PASSWORD";
        q.val[1].kind_case = WARREN__V1__ENV_VALUE__KIND_SECRET;
        q.ref[0].source_case = WARREN__V1__SECRET_REF__SOURCE_NAME;
        q.ref[0].name = (char *) "pw";
        q.val[1].secret = &q.ref[0];
        q.env[1].value = &q.val[1];
        q.env[2].key = (char *) "TOKEN";
        q.val[2].kind_case = WARREN__V1__ENV_VALUE__KIND_SECRET;
        q.ref[1].source_case = WARREN__V1__SECRET_REF__SOURCE_INLINE_VALUE;
        q.ref[1].inline_value.data = (uint8_t *) "inline-tok";
        q.ref[1].inline_value.len = 10;
        q.val[2].secret = &q.ref[1];
        q.env[2].value = &q.val[2];
        q.r.n_env = 3;
        q.r.env = q.envp;
        /* whole secrets: the multi-key one, and inline values */
        q.ref[2].source_case = WARREN__V1__SECRET_REF__SOURCE_NAME;
        q.ref[2].name = (char *) "aws";
        q.ref[3].source_case = WARREN__V1__SECRET_REF__SOURCE_INLINE_VALUES;
        q.kv.key = (char *) "API_KEY";
        q.kv.value.data = (uint8_t *) "sk-123";
        q.kv.value.len = 6;
        q.inl.n_values = 1;
        q.inl.values = &q.kvp;
        q.ref[3].inline_values = &q.inl;
        q.r.n_secrets = 2;
        q.r.secrets = &q.refp[2];
        q.tag.key = (char *) "team";
        q.tag.value = (char *) "infra";
        q.r.n_tags = 1;
        q.r.tags = &q.tagp;

        struct sbx_spec *s = NULL;
        struct wr_err e = {0};
        if (api_sandbox_spec(f->s, NULL, STORE_ENV_DEFAULT, &q.r, &s, &e) < 0)
                fail_msg("api_sandbox_spec: %s", e.msg);
        assert_string_equal(s->image_ref, "busybox:latest");
        assert_string_equal(s->name, "web");
        assert_null(s->hostname);
        assert_string_equal(s->workdir, "/srv");
        assert_null(s->entrypoint);
        assert_int_equal(s->limits.cpu_millicores, 500);
        assert_int_equal(s->limits.memory_bytes, 256ULL << 20);
        assert_int_equal(s->limits.pids_max, 64);
        assert_int_equal(s->lifetime_ns, 90LL * 60 * 1000000000LL);
        assert_string_equal(sbx_env_find(s->env, "MODE"), "prod");
        assert_string_equal(sbx_env_find(s->env, "PASSWORD"), "hunter2");
        assert_string_equal(sbx_env_find(s->env, "TOKEN"), "inline-tok");
        assert_string_equal(sbx_env_find(s->env, "AWS_KEY"), "AK");
        assert_string_equal(sbx_env_find(s->env, "AWS_SECRET"), "SK");
        assert_string_equal(sbx_env_find(s->env, "API_KEY"), "sk-123");
        /* whole secrets first, then the request's env (an explicit name wins) */
        size_t i_mode = 0, i_api = 0;
        for (size_t i = 0; s->env[i]; i++) {
                if (strncmp(s->env[i], "MODE=", 5) == 0)
                        i_mode = i;
                if (strncmp(s->env[i], "API_KEY=", 8) == 0)
                        i_api = i;
        }
        assert_true(i_api < i_mode);
        assert_int_equal(s->n_tags, 1);
        assert_string_equal(s->tags[0].key, "team");

        /* the record keeps the request but no inline secret value */
        assert_non_null(s->record);
        assert_null(memmem(s->record, s->record_len, "inline-tok", 10));
        assert_null(memmem(s->record, s->record_len, "sk-123", 6));
        assert_null(memmem(s->record, s->record_len, "hunter2", 7));
        Warren__V1__CreateSandboxRequest *back =
                warren__v1__create_sandbox_request__unpack(NULL, s->record_len, s->record);
        assert_non_null(back);
        assert_string_equal(back->name, "web");
        assert_string_equal(back->resources->memory, "256Mi");
        assert_int_equal(back->n_env, 3);
        size_t names = 0;
        for (size_t i = 0; i < back->n_env; i++) {
                Warren__V1__EnvValue *v = back->env[i]->value;
                if (v->kind_case != WARREN__V1__ENV_VALUE__KIND_SECRET)
                        continue;
                if (v->secret->source_case == WARREN__V1__SECRET_REF__SOURCE_NAME) {
                        assert_string_equal(v->secret->name, "pw");
                        names++;
                } else
                        assert_int_equal(v->secret->source_case,
                                         WARREN__V1__SECRET_REF__SOURCE__NOT_SET);
        }
        assert_int_equal(names, 1);
        assert_int_equal(back->secrets[0]->source_case, WARREN__V1__SECRET_REF__SOURCE_NAME);
        assert_int_equal(back->secrets[1]->source_case, WARREN__V1__SECRET_REF__SOURCE__NOT_SET);
        warren__v1__create_sandbox_request__free_unpacked(back, NULL);
        sbx_spec_free(s);
}

/* Table: one bad field each; the status and the start of the message. */
static void test_spec_errors(void **state) {
        struct fixture *f = *state;
        static const struct {
                const char *what;
                int status;
                const char *msg;
        } cases[] = {
                {"name", WR_STATUS_INVALID_ARGUMENT, "name: \"Web\" is not a valid sandbox name"},
                {"workdir", WR_STATUS_INVALID_ARGUMENT, "workdir: \"tmp\" is relative"},
                {"hostname", WR_STATUS_INVALID_ARGUMENT, "hostname: \"a/b\" is not valid"},
                {"cpu", WR_STATUS_INVALID_ARGUMENT, "resources.cpu: lots is not valid"},
                {"memory", WR_STATUS_INVALID_ARGUMENT, "resources.memory: 12Q is not valid"},
                {"disk", WR_STATUS_INVALID_ARGUMENT, "resources.disk: x is not valid"},
                {"smalldisk", WR_STATUS_INVALID_ARGUMENT, "resources.disk: 4Mi is too small"},
                {"lifetime", WR_STATUS_INVALID_ARGUMENT, "lifetime: soon is not valid"},
                {"envname", WR_STATUS_INVALID_ARGUMENT, "env: 1X is not a valid variable name"},
                {"envsecret", WR_STATUS_NOT_FOUND, "env.K: secret nope not found"},
                {"envmulti", WR_STATUS_INVALID_ARGUMENT, "env.K: secret aws has several keys"},
                {"secret", WR_STATUS_NOT_FOUND, "secrets: secret nope not found"},
                {"inline", WR_STATUS_INVALID_ARGUMENT, "secrets: an inline secret needs env_name"},
                {"inlinekey", WR_STATUS_INVALID_ARGUMENT, "secrets: a b is not a valid variable"},
                {"emptyref", WR_STATUS_INVALID_ARGUMENT, "secrets: an entry names no secret"},
                {"tag", WR_STATUS_INVALID_ARGUMENT, "tags: a tag has an empty key"},
                {"k8s", WR_STATUS_INVALID_ARGUMENT, "image: compute_class K8S needs an image"},
                {"k8snet", WR_STATUS_INVALID_ARGUMENT, "block_network: is a HOST class feature"},
                {"volumes", WR_STATUS_UNIMPLEMENTED, "volumes are not implemented"},
                {"build", WR_STATUS_UNIMPLEMENTED, "image.build: CreateSandbox does not build"},
        };
        for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
                const char *w = cases[i].what;
                struct req q;
                req_init(&q);
                Warren__V1__VolumeMount vm = WARREN__V1__VOLUME_MOUNT__INIT, *vmp = &vm;
                if (!strcmp(w, "name"))
                        q.r.name = (char *) "Web";
                else if (!strcmp(w, "workdir"))
                        q.r.workdir = (char *) "tmp";
                else if (!strcmp(w, "hostname"))
                        q.r.hostname = (char *) "a/b";
                else if (!strcmp(w, "cpu") || !strcmp(w, "memory") || !strcmp(w, "disk") ||
                         !strcmp(w, "smalldisk")) {
                        q.res.cpu = !strcmp(w, "cpu") ? (char *) "lots" : (char *) "";
                        q.res.memory = !strcmp(w, "memory") ? (char *) "12Q" : (char *) "";
                        q.res.disk = !strcmp(w, "disk")        ? (char *) "x"
                                     : !strcmp(w, "smalldisk") ? (char *) "4Mi"
                                                               : (char *) "";
                        q.r.resources = &q.res;
                } else if (!strcmp(w, "lifetime"))
                        q.r.lifetime = (char *) "soon";
                else if (!strcmp(w, "envname") || !strcmp(w, "envsecret") ||
                         !strcmp(w, "envmulti")) {
                        q.env[0].key = !strcmp(w, "envname") ? (char *) "1X" : (char *) "K";
                        q.val[0].kind_case = WARREN__V1__ENV_VALUE__KIND_SECRET;
                        q.ref[0].source_case = WARREN__V1__SECRET_REF__SOURCE_NAME;
                        q.ref[0].name = !strcmp(w, "envmulti") ? (char *) "aws" : (char *) "nope";
                        q.val[0].secret = &q.ref[0];
                        q.env[0].value = &q.val[0];
                        q.r.n_env = 1;
                        q.r.env = q.envp;
                } else if (!strcmp(w, "secret") || !strcmp(w, "inline") ||
                           !strcmp(w, "inlinekey") || !strcmp(w, "emptyref")) {
                        if (!strcmp(w, "secret")) {
                                q.ref[0].source_case = WARREN__V1__SECRET_REF__SOURCE_NAME;
                                q.ref[0].name = (char *) "nope";
                        } else if (!strcmp(w, "inline")) {
                                q.ref[0].source_case = WARREN__V1__SECRET_REF__SOURCE_INLINE_VALUE;
                                q.ref[0].inline_value.data = (uint8_t *) "v";
                                q.ref[0].inline_value.len = 1;
                        } else if (!strcmp(w, "inlinekey")) {
                                q.ref[0].source_case = WARREN__V1__SECRET_REF__SOURCE_INLINE_VALUES;
                                q.kv.key = (char *) "a b";
                                q.inl.n_values = 1;
                                q.inl.values = &q.kvp;
                                q.ref[0].inline_values = &q.inl;
                        }
                        q.r.n_secrets = 1;
                        q.r.secrets = q.refp;
                } else if (!strcmp(w, "tag")) {
                        q.tag.key = (char *) "";
                        q.r.n_tags = 1;
                        q.r.tags = &q.tagp;
                } else if (!strcmp(w, "k8s"))
                        q.r.compute_class = WARREN__V1__COMPUTE_CLASS__COMPUTE_CLASS_K8S;
                else if (!strcmp(w, "k8snet")) {
                        q.r.compute_class = WARREN__V1__COMPUTE_CLASS__COMPUTE_CLASS_K8S;
                        q.r.block_network = true;
                } else if (!strcmp(w, "volumes")) {
                        q.r.n_volumes = 1;
                        q.r.volumes = &vmp;
                } else if (!strcmp(w, "build")) {
                        q.image.kind_case = WARREN__V1__IMAGE_SPEC__KIND_BUILD;
                        q.r.image = &q.image;
                }
                struct sbx_spec *s = NULL;
                struct wr_err e = {0};
                int r = api_sandbox_spec(f->s, NULL, STORE_ENV_DEFAULT, &q.r, &s, &e);
                if (r >= 0)
                        fail_msg("%s: accepted", w);
                assert_null(s);
                if (err_status(&e) != cases[i].status)
                        fail_msg("%s: status %d, want %d (%s)", w, err_status(&e), cases[i].status,
                                 e.msg);
                if (strncmp(e.msg, cases[i].msg, strlen(cases[i].msg)) != 0)
                        fail_msg("%s: message \"%s\", want it to start \"%s\"", w, e.msg,
                                 cases[i].msg);
        }
}

/* ExecStart → exec spec: a good request, then one bad field each. */
static void test_exec_start_spec(void **state) {
        Warren__V1__ExecStart st = WARREN__V1__EXEC_START__INIT;
        Warren__V1__ExecStart__EnvEntry env = WARREN__V1__EXEC_START__ENV_ENTRY__INIT, *envp = &env;
        Warren__V1__WindowSize win = WARREN__V1__WINDOW_SIZE__INIT;
        char *argv[] = {(char *) "sh", (char *) "-c", (char *) "echo $T"};
        st.sandbox = (char *) "web";
        st.n_argv = 3;
        st.argv = argv;
        env.key = (char *) "T";
        env.value = (char *) "tok-1";
        st.n_env = 1;
        st.env = &envp;
        st.workdir = (char *) "/srv";
        st.pty = true;
        win.cols = 120;
        win.rows = 40;
        st.window = &win;
        st.timeout_secs = 2.5;
        struct sbx_exec_spec spec;
        struct api_exec_vectors v = {0};
        struct wr_err e = {0};
        assert_int_equal(api_exec_start_spec(&st, &spec, &v, &e), 0);
        assert_string_equal(spec.sandbox, "web");
        assert_string_equal(spec.argv[2], "echo $T");
        assert_null(spec.argv[3]);
        assert_string_equal(spec.env[0], "T=tok-1");
        assert_null(spec.env[1]);
        assert_string_equal(spec.workdir, "/srv");
        assert_true(spec.pty);
        assert_int_equal(spec.cols, 120);
        assert_int_equal(spec.rows, 40);
        assert_true(spec.timeout_secs == 2.5);
        api_exec_vectors_free(&v);
        assert_null(v.argv);

        static const struct {
                const char *what, *msg;
        } cases[] = {
                {"sandbox", "start.sandbox: name the sandbox"},
                {"argv", "start.argv: give the command to run"},
                {"argv0", "start.argv: give the command to run"},
                {"timeout", "start.timeout_secs: -1 is out of range"},
                {"envkey", "start.env: A=B is not a valid variable name"},
                {"envempty", "start.env:  is not a valid variable name"},
        };
        for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
                Warren__V1__ExecStart b = st;
                Warren__V1__ExecStart__EnvEntry be = env, *bep = &be;
                char *empty[] = {(char *) ""};
                b.env = &bep;
                const char *w = cases[i].what;
                if (!strcmp(w, "sandbox"))
                        b.sandbox = (char *) "";
                else if (!strcmp(w, "argv"))
                        b.n_argv = 0;
                else if (!strcmp(w, "argv0")) {
                        b.n_argv = 1;
                        b.argv = empty;
                } else if (!strcmp(w, "timeout"))
                        b.timeout_secs = -1;
                else if (!strcmp(w, "envkey"))
                        be.key = (char *) "A=B";
                else if (!strcmp(w, "envempty"))
                        be.key = (char *) "";
                struct api_exec_vectors bv = {0};
                err_clear(&e);
                if (api_exec_start_spec(&b, &spec, &bv, &e) != -EINVAL)
                        fail_msg("%s: accepted", w);
                assert_int_equal(err_status(&e), WR_STATUS_INVALID_ARGUMENT);
                if (strncmp(e.msg, cases[i].msg, strlen(cases[i].msg)) != 0)
                        fail_msg("%s: \"%s\", want it to start \"%s\"", w, e.msg, cases[i].msg);
                assert_null(bv.argv);
        }
}

/* Managed SSH, the pure half: checks, host keys, the rendered files. */
static void test_ssh_config(void **state) {
        (void) state;
        struct wr_err e = {0};
        assert_int_equal(sbx_ssh_alias_check("a", "github", &e), 0);
        assert_int_equal(sbx_ssh_alias_check("a", "a-b.c_d", &e), 0);
        assert_int_equal(sbx_ssh_alias_check("a", "", &e), -EINVAL);
        assert_int_equal(sbx_ssh_alias_check("a", "*", &e), -EINVAL);
        assert_int_equal(sbx_ssh_alias_check("a", "-x", &e), -EINVAL);
        assert_int_equal(sbx_ssh_alias_check("a", "a b", &e), -EINVAL);
        assert_int_equal(sbx_ssh_user_check("u", "_svc", &e), 0);
        assert_int_equal(sbx_ssh_user_check("u", "a\nHost x", &e), -EINVAL);
        assert_int_equal(sbx_ssh_host_check("h", "GitHub.com.", &e), 0);
        assert_int_equal(sbx_ssh_host_check("h", "10.0.0.1", &e), 0);
        assert_int_equal(sbx_ssh_host_check("h", "foo..bar", &e), -EINVAL);
        assert_int_equal(sbx_ssh_host_check("h", "a b", &e), -EINVAL);

        static const char good[] =
                "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIMJeQEjPLO3bEYXdpe6QFL9SNF9I4ZXUAgSLSCM2Y8eY "
                "a comment";
        char *k = NULL;
        assert_int_equal(sbx_ssh_host_key_parse("k", good, strlen(good), &k, &e), 0);
        assert_string_equal(
                k,
                "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIMJeQEjPLO3bEYXdpe6QFL9SNF9I4ZXUAgSLSCM2Y8eY");
        /* a type that is not the blob's own, bad base64, an unknown type */
        static const char *const bad[] = {
                "ecdsa-sha2-nistp256 "
                "AAAAC3NzaC1lZDI1NTE5AAAAIMJeQEjPLO3bEYXdpe6QFL9SNF9I4ZXUAgSLSCM2Y8eY",
                "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIMJeQEjPLO3bEYXdpe6QFL9SNF9I4ZXUAgSLSCM2Y8e",
                "ssh-ed25519 !!!!",
                "ssh-foo AAAA",
                "ssh-ed25519",
                "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIMJeQEjPLO3bEYXdpe6QFL9SNF9I4ZXUAgSLSCM2Y8eY "
                "x\ny",
        };
        for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
                char *b = NULL;
                assert_int_equal(sbx_ssh_host_key_parse("k", bad[i], strlen(bad[i]), &b, &e),
                                 -EINVAL);
                assert_null(b);
        }
        static const char pk[] = "-----BEGIN OPENSSH PRIVATE KEY-----\nb3Blbn\n-----END OPENSSH "
                                 "PRIVATE KEY-----\n";
        assert_int_equal(sbx_ssh_key_check("s", (const uint8_t *) pk, strlen(pk), &e), 0);
        assert_int_equal(sbx_ssh_key_check("s", (const uint8_t *) "hunter2", 7, &e), -EINVAL);
        assert_null(strstr(e.msg, "hunter2"));

        char *keys[] = {k};
        struct sbx_ssh_dest d[2] = {
                {.alias = "github", .host = "github.com", .user = "git", .port = 22},
                {.alias = "box",
                 .host = "10.1.2.3",
                 .user = "me",
                 .port = 2222,
                 .host_keys = keys,
                 .n_host_keys = 1},
        };
        char *config = NULL, *known = NULL;
        assert_int_equal(sbx_ssh_render(d, 2, &config, &known), 0);
        assert_non_null(strstr(config, "\nHost github\n  HostName github.com\n  User git\n"
                                       "  Port 22\n  IdentityAgent " SBX_SSH_SOCK "\n"));
        assert_non_null(strstr(config, "StrictHostKeyChecking accept-new\n\nHost box\n"));
        assert_non_null(strstr(config, "Port 2222\n"));
        assert_non_null(strstr(config, "StrictHostKeyChecking yes\n  UpdateHostKeys no\n"));
        assert_non_null(strstr(known, "\nbox ssh-ed25519 AAAAC3"));
        assert_null(strstr(known, "\ngithub "));
        free(config);
        free(known);
        free(k);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_names),
                cmocka_unit_test(test_durations),
                cmocka_unit_test(test_env),
                cmocka_unit_test(test_spec_check),
                cmocka_unit_test(test_exec_start_spec),
                cmocka_unit_test(test_ssh_config),
                cmocka_unit_test_setup_teardown(test_spec_from_request, setup, teardown),
                cmocka_unit_test_setup_teardown(test_spec_errors, setup, teardown),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
