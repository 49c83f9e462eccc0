/* SPDX-License-Identifier: Apache-2.0 */
/* libFuzzer target: Dockerfiles (src/image/dockerfile.c), the text a
 * client sends with from_dockerfile / dockerfile_commands / warren image
 * build. Parse, then evaluate with a state carried over (the first byte
 * picks whether FROM is allowed, a build arg and a base image Env). Checks: no crash,
 * leak or quadratic blow-up; an error has a message and a known code;
 * every op is well formed: RUN/CMD/ENTRYPOINT/SHELL argv NULL-terminated,
 * COPY sources are clean context paths (never absolute, never "..") or
 * heredoc data, EXPOSE ports carry a protocol.
 *   build-fuzz/tests/fuzz/fuzz-dockerfile -max_total_time=60 tests/fuzz/corpus/dockerfile */
#include <assert.h>
#include <errno.h>
#include <stdint.h>
#include <string.h>

#include "image/dockerfile.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_strv(char *const *v) {
        for (size_t i = 0; v && v[i]; i++)
                assert(v[i]);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        if (size < 1)
                return 0;
        bool allow_from = data[0] & 1;
        char *given[] = {"A=given", NULL};
        char *base_env[] = {"PATH=/usr/bin:/bin", "B=base", "not-kv", NULL};
        struct df_file f = {0};
        struct df_state st = {.build_args = (data[0] & 2) ? given : NULL,
                              .base_env = (data[0] & 4) ? base_env : NULL};
        struct df_plan p = {0};
        struct wr_err e = {0};
        int r = df_parse((const char *) data + 1, size - 1, &f, &e);
        if (r >= 0) {
                assert(f.n <= DF_INSTR_MAX);
                assert(f.escape == '\\' || f.escape == '`');
                for (size_t i = 0; i < f.n; i++) {
                        assert(f.v[i].cmd && f.v[i].line && f.v[i].col && f.v[i].text);
                        assert(f.v[i].args && f.v[i].keyword);
                        check_strv(f.v[i].flags);
                        assert(!f.v[i].json || f.v[i].argv);
                }
                r = df_eval(&f, &st, allow_from, &p, &e);
        }
        if (r < 0) {
                assert(e.code == r && e.msg[0]);
                assert(r == -EINVAL || r == -E2BIG || r == -EOPNOTSUPP || r == -ENOMEM);
        } else {
                for (size_t i = 0; i < p.n; i++) {
                        const struct df_op *op = &p.ops[i];
                        assert(op->desc && op->line);
                        check_strv(op->argv);
                        check_strv(op->env);
                        switch (op->kind) {
                        case DF_OP_RUN:
                        case DF_OP_SHELL:
                        case DF_OP_HEALTHCHECK:
                                assert(op->argv && op->argv[0]);
                                break;
                        case DF_OP_COPY:
                                assert(op->dest && op->n_srcs >= 1);
                                for (size_t k = 0; k < op->n_srcs; k++) {
                                        const char *s = op->srcs[k].path;
                                        assert(!s != !op->srcs[k].data);
                                        if (!s)
                                                continue;
                                        assert(s[0] != '/');
                                        assert(strcmp(s, "..") && strncmp(s, "../", 3));
                                        assert(!strstr(s, "/../") && !strstr(s, "//"));
                                }
                                break;
                        case DF_OP_EXPOSE:
                                for (size_t k = 0; op->env[k]; k++)
                                        assert(strchr(op->env[k], '/'));
                                break;
                        case DF_OP_FROM:
                        case DF_OP_WORKDIR:
                        case DF_OP_USER:
                        case DF_OP_STOPSIGNAL:
                                assert(op->value && op->value[0]);
                                break;
                        default:
                                break;
                        }
                }
        }
        df_plan_clear(&p);
        df_state_clear(&st);
        df_file_clear(&f);
        return 0;
}
