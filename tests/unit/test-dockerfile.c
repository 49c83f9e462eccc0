/* SPDX-License-Identifier: Apache-2.0 */
/* src/image/dockerfile.c: the parser and the evaluator on valid and
 * hostile Dockerfiles (no root, no I/O). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "image/dockerfile.h"

/* parse + eval text; returns the eval result, plan and error filled */
static int run(const char *text, bool allow_from, struct df_plan *plan, struct wr_err *e) {
        struct df_file f = {0};
        struct df_state st = {0};
        memset(plan, 0, sizeof(*plan));
        memset(e, 0, sizeof(*e));
        int r = df_parse(text, strlen(text), &f, e);
        if (r >= 0)
                r = df_eval(&f, &st, allow_from, plan, e);
        df_file_clear(&f);
        df_state_clear(&st);
        return r;
}

static void assert_argv(char *const *v, ...) {
        va_list ap;
        va_start(ap, v);
        size_t i = 0;
        for (const char *s; (s = va_arg(ap, const char *)); i++) {
                assert_non_null(v[i]);
                assert_string_equal(v[i], s);
        }
        assert_null(v[i]);
        va_end(ap);
}

static void test_basic(void **state) {
        (void) state;
        struct df_plan p;
        struct wr_err e;
        const char *df = "# a comment\n"
                         "ARG VER=3.12\n"
                         "FROM python:${VER}-slim AS build\n"
                         "RUN apt-get update && \\\n"
                         "    # a comment inside\n"
                         "    apt-get install -y tmux\n"
                         "RUN [\"echo\", \"exec form\"]\n"
                         "ENV A=1 B=\"two words\" C=${A}x\n"
                         "ENV LEGACY value with spaces\n"
                         "WORKDIR /app/$A\n"
                         "USER 1000:1000\n"
                         "LABEL org.x=\"y z\" k=v\n"
                         "EXPOSE 8080 53/udp 9000-9001\n"
                         "HEALTHCHECK --interval=30s --retries=3 CMD curl -f http://localhost/\n"
                         "SHELL [\"/bin/bash\", \"-c\"]\n"
                         "RUN echo $A\n"
                         "ENTRYPOINT [\"/app/run\"]\n"
                         "CMD serve --port 80\n"
                         "STOPSIGNAL SIGTERM\n";
        assert_int_equal(run(df, true, &p, &e), 0);
        assert_int_equal(p.n, 15);
        assert_int_equal(p.ops[0].kind, DF_OP_FROM);
        assert_string_equal(p.ops[0].value, "python:3.12-slim");
        assert_int_equal(p.ops[1].kind, DF_OP_RUN);
        assert_int_equal(p.ops[1].line, 4);
        assert_argv(p.ops[1].argv, "/bin/sh", "-c", "apt-get update &&     apt-get install -y tmux",
                    NULL);
        /* ARGs are the RUN's environment */
        assert_argv(p.ops[1].env, "VER=3.12", NULL);
        assert_argv(p.ops[2].argv, "echo", "exec form", NULL);
        assert_argv(p.ops[3].env, "A=1", "B=two words", "C=x", NULL); /* same-line A not seen */
        assert_argv(p.ops[4].env, "LEGACY=value with spaces", NULL);
        assert_string_equal(p.ops[5].value, "/app/1");
        assert_string_equal(p.ops[6].value, "1000:1000");
        assert_argv(p.ops[7].env, "org.x=y z", "k=v", NULL);
        assert_argv(p.ops[8].env, "8080/tcp", "53/udp", "9000-9001/tcp", NULL);
        assert_int_equal(p.ops[9].kind, DF_OP_HEALTHCHECK);
        assert_argv(p.ops[9].argv, "CMD-SHELL", "curl -f http://localhost/", NULL);
        assert_true(p.ops[9].hc.interval_ns == 30000000000LL);
        assert_int_equal(p.ops[9].hc.retries, 3);
        assert_argv(p.ops[10].argv, "/bin/bash", "-c", NULL);
        assert_argv(p.ops[11].argv, "/bin/bash", "-c", "echo $A", NULL); /* the new SHELL */
        assert_argv(p.ops[12].argv, "/app/run", NULL);
        assert_argv(p.ops[13].argv, "/bin/bash", "-c", "serve --port 80", NULL);
        assert_string_equal(p.ops[14].value, "SIGTERM");
        df_plan_clear(&p);
}

static void test_substitution(void **state) {
        (void) state;
        struct df_state st = {0};
        char *kv_env[] = {"E=env", "EMPTY=", NULL};
        char *kv_arg[] = {"ARGD=default", "ARGU", "GIVEN=dflt", NULL};
        char *given[] = {"GIVEN=from-client", "UNDECLARED=x", NULL};
        st.env = kv_env;
        st.n_env = 2;
        st.args = kv_arg;
        st.n_args = 3;
        st.build_args = given;
        struct {
                const char *in, *out;
        } ok[] = {
                {"$E", "env"},
                {"${E}", "env"},
                {"a${E}b", "aenvb"},
                {"'$E'", "$E"},
                {"\"$E\"", "env"},
                {"\\$E", "$E"},
                {"${NOPE:-fallback}", "fallback"},
                {"${EMPTY:-fallback}", "fallback"},
                {"${EMPTY-fallback}", ""},
                {"${E:+set}", "set"},
                {"${NOPE:+set}", ""},
                {"${NOPE:-${E}}", "env"},
                {"$ARGD", "default"},
                {"${ARGU:-unset}", "unset"},
                {"$GIVEN", "from-client"},
                {"$UNDECLARED", ""},
                {"$", "$"},
                {"$1", "$1"},
                {"\"a \\\"q\\\" b\"", "a \"q\" b"},
        };
        for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
                char *out = NULL;
                struct wr_err e = {0};
                assert_int_equal(df_expand(ok[i].in, '\\', &st, &out, &e), 0);
                if (strcmp(out, ok[i].out))
                        fail_msg("%s -> \"%s\", want \"%s\"", ok[i].in, out, ok[i].out);
                free(out);
        }
        const char *bad[] = {
                "${NOPE:?must be set}", "${", "${E", "'open", "\"open", "${E/x/y}", "${:-x}"};
        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
                char *out = NULL;
                struct wr_err e = {0};
                if (df_expand(bad[i], '\\', &st, &out, &e) != -EINVAL)
                        fail_msg("%s accepted: \"%s\"", bad[i], out ? out : "");
                assert_int_equal(e.status, WR_STATUS_INVALID_ARGUMENT);
        }
        struct wr_err e = {0};
        char *out = NULL;
        assert_int_equal(df_expand("${NOPE:?must be set}", '\\', &st, &out, &e), -EINVAL);
        assert_non_null(strstr(e.msg, "must be set"));
}

static void test_base_env(void **state) {
        (void) state;
        char *base_env[] = {"PATH=/usr/bin:/bin", "HOME=/root", NULL};
        const char *df = "ARG P=${PATH:-none}\nFROM img\nENV PATH=/opt:$PATH X=$P\n";
        struct df_file f = {0};
        struct df_state st = {.base_env = base_env};
        struct df_plan p = {0};
        struct wr_err e = {0};
        assert_int_equal(df_parse(df, strlen(df), &f, &e), 0);
        assert_int_equal(df_eval(&f, &st, true, &p, &e), 0);
        /* before FROM the base's Env is not there yet */
        assert_argv(p.ops[1].env, "PATH=/opt:/usr/bin:/bin", "X=none", NULL);
        df_plan_clear(&p);
        df_file_clear(&f);
        df_state_clear(&st);
}

static void test_escape_directive_and_continuations(void **state) {
        (void) state;
        struct df_plan p;
        struct wr_err e;
        assert_int_equal(run("# escape=`\n"
                             "FROM img\n"
                             "RUN echo a `\n"
                             "  b\n"
                             "WORKDIR C:\\dir\n",
                             true, &p, &e),
                         0);
        assert_argv(p.ops[1].argv, "/bin/sh", "-c", "echo a   b", NULL);
        assert_string_equal(p.ops[2].value, "C:\\dir");
        df_plan_clear(&p);
        /* a directive after an instruction is a comment; CRLF line ends */
        assert_int_equal(run("FROM img\r\n# escape=`\r\nRUN a \\\r\n b\r\n", true, &p, &e), 0);
        assert_argv(p.ops[1].argv, "/bin/sh", "-c", "a  b", NULL);
        df_plan_clear(&p);
        assert_int_equal(run("# escape=x\nFROM img\n", true, &p, &e), -EINVAL);
        assert_non_null(strstr(e.msg, "line 1"));
        df_plan_clear(&p);
}

static void test_heredocs(void **state) {
        (void) state;
        struct df_plan p;
        struct wr_err e;
        assert_int_equal(run("FROM img\n"
                             "RUN <<EOF\n"
                             "echo one\n"
                             "echo two\n"
                             "EOF\n"
                             "RUN cat > /f <<-'END'\n"
                             "\tliteral $X\n"
                             "\tEND\n"
                             "COPY <<CONF /etc/app.conf\n"
                             "key=value\n"
                             "CONF\n"
                             "RUN true\n",
                             true, &p, &e),
                         0);
        assert_int_equal(p.n, 5);
        assert_argv(p.ops[1].argv, "/bin/sh", "-c", "echo one\necho two\n", NULL);
        assert_argv(p.ops[2].argv, "/bin/sh", "-c", "cat > /f <<-'END'\nliteral $X\nEND", NULL);
        assert_int_equal(p.ops[3].kind, DF_OP_COPY);
        assert_int_equal(p.ops[3].n_srcs, 1);
        assert_null(p.ops[3].srcs[0].path);
        assert_string_equal(p.ops[3].srcs[0].data, "key=value\n");
        assert_string_equal(p.ops[3].dest, "/etc/app.conf");
        assert_int_equal(p.ops[4].line, 12);
        df_plan_clear(&p);
        assert_int_equal(run("FROM img\nRUN <<EOF\necho never ends\n", true, &p, &e), -EINVAL);
        assert_non_null(strstr(e.msg, "line 2"));
        assert_non_null(strstr(e.msg, "not terminated"));
        df_plan_clear(&p);
}

static void test_copy(void **state) {
        (void) state;
        struct df_plan p;
        struct wr_err e;
        assert_int_equal(run("FROM img\nARG D=/opt\n"
                             "COPY --chmod=755 ./a.sh b/ ${D}/\n"
                             "ADD [\"c d\", \"/x\"]\n",
                             true, &p, &e),
                         0);
        assert_int_equal(p.ops[1].n_srcs, 2);
        assert_string_equal(p.ops[1].srcs[0].path, "a.sh");
        assert_string_equal(p.ops[1].srcs[1].path, "b");
        assert_string_equal(p.ops[1].dest, "/opt/");
        assert_int_equal(p.ops[1].chmod, 0755);
        assert_string_equal(p.ops[2].srcs[0].path, "c d");
        assert_true(p.ops[2].add);
        df_plan_clear(&p);
        struct {
                const char *df;
                int r;
                const char *words;
        } bad[] = {
                {"FROM i\nCOPY ../../etc/shadow /x\n", -EINVAL, "outside the build context"},
                {"FROM i\nCOPY a/../../x /x\n", -EINVAL, "line 2, column 1"},
                {"FROM i\nADD https://example.com/x /x\n", -EOPNOTSUPP, "remote"},
                {"FROM i\nCOPY --from=build /a /b\n", -EOPNOTSUPP, "multi-stage"},
                {"FROM i\nCOPY onlyone\n", -EINVAL, "source and a destination"},
                {"FROM i\nCOPY --chmod=999 a b\n", -EINVAL, "octal"},
                {"FROM i\nCOPY --chown=user a b\n", -EOPNOTSUPP, "numeric"},
        };
        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
                int r = run(bad[i].df, true, &p, &e);
                if (r != bad[i].r || !strstr(e.msg, bad[i].words))
                        fail_msg("%s: %d %s", bad[i].df, r, e.msg);
                df_plan_clear(&p);
        }
        char *out = NULL;
        assert_int_equal(df_context_path("./a//b/./", &out), 0);
        assert_string_equal(out, "a/b");
        free(out);
        assert_int_equal(df_context_path("/abs/x/../y", &out), 0);
        assert_string_equal(out, "abs/y");
        free(out);
        assert_int_equal(df_context_path(".", &out), 0);
        assert_string_equal(out, "");
        free(out);
        assert_int_equal(df_context_path("a/../..", &out), -EINVAL);
}

static void test_errors_name_line_and_column(void **state) {
        (void) state;
        struct df_plan p;
        struct wr_err e;
        struct {
                const char *df;
                int r;
                enum wr_status status;
                const char *words;
        } bad[] = {
                {"FROM i\n  FOO bar\n", -EINVAL, WR_STATUS_INVALID_ARGUMENT,
                 "line 2, column 3: unknown instruction FOO"},
                {"RUN true\n", -EINVAL, WR_STATUS_INVALID_ARGUMENT, "before FROM"},
                {"FROM a\nFROM b\n", -EOPNOTSUPP, WR_STATUS_UNIMPLEMENTED, "multi-stage"},
                {"FROM i\nVOLUME /data\n", -EOPNOTSUPP, WR_STATUS_UNIMPLEMENTED, "VOLUME"},
                {"FROM i\nRUN --mount=type=cache,target=/x true\n", -EOPNOTSUPP,
                 WR_STATUS_UNIMPLEMENTED, "--mount"},
                {"FROM i\nEXPOSE 70000\n", -EINVAL, WR_STATUS_INVALID_ARGUMENT, "not a port"},
                {"FROM i\nEXPOSE 80/xtp\n", -EINVAL, WR_STATUS_INVALID_ARGUMENT, "not a port"},
                {"FROM i\nSHELL /bin/bash -c\n", -EINVAL, WR_STATUS_INVALID_ARGUMENT, "JSON"},
                {"FROM i\nENV\n", -EINVAL, WR_STATUS_INVALID_ARGUMENT, "without arguments"},
                {"FROM i\nENV ONLYKEY\n", -EINVAL, WR_STATUS_INVALID_ARGUMENT, "value"},
                {"FROM i\nARG 1bad\n", -EINVAL, WR_STATUS_INVALID_ARGUMENT, "valid name"},
                {"FROM i\nHEALTHCHECK --interval=soon CMD true\n", -EINVAL,
                 WR_STATUS_INVALID_ARGUMENT, "duration"},
                {"FROM i\nHEALTHCHECK whatever\n", -EINVAL, WR_STATUS_INVALID_ARGUMENT,
                 "NONE or CMD"},
                {"FROM i\nWORKDIR ${X:?X must be set}\n", -EINVAL, WR_STATUS_INVALID_ARGUMENT,
                 "line 2, column 9: WORKDIR X: X must be set"},
                {"FROM i\nLABEL \"unterminated\n", -EINVAL, WR_STATUS_INVALID_ARGUMENT,
                 "unterminated"},
                {"FROM i\nRUN a\0b\n", -EINVAL, WR_STATUS_INVALID_ARGUMENT, "NUL"},
        };
        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
                struct df_file f = {0};
                struct df_state st = {0};
                memset(&p, 0, sizeof(p));
                memset(&e, 0, sizeof(e));
                size_t len = strlen(bad[i].df);
                if (strstr(bad[i].df, "RUN a"))
                        len += 3; /* the NUL case: the text goes on past it */
                int r = df_parse(bad[i].df, len, &f, &e);
                if (r >= 0)
                        r = df_eval(&f, &st, true, &p, &e);
                if (r != bad[i].r || e.status != bad[i].status || !strstr(e.msg, bad[i].words))
                        fail_msg("case %zu: r=%d status=%d msg=%s", i, r, e.status, e.msg);
                df_file_clear(&f);
                df_state_clear(&st);
                df_plan_clear(&p);
        }
        /* dockerfile_commands: FROM is not allowed there */
        assert_int_equal(run("FROM x\n", false, &p, &e), -EINVAL);
        df_plan_clear(&p);
        assert_int_equal(run("RUN true\nEXPOSE 1\n", false, &p, &e), 0);
        assert_int_equal(p.n, 2);
        df_plan_clear(&p);
}

static void test_limits(void **state) {
        (void) state;
        /* 10,000 instructions: a clear error, fast */
        size_t n = 10000;
        char *big = malloc(n * 16 + 16);
        size_t o = (size_t) sprintf(big, "FROM img\n");
        for (size_t i = 0; i < n; i++)
                o += (size_t) sprintf(big + o, "RUN echo %zu\n", i);
        struct df_file f = {0};
        struct wr_err e = {0};
        clock_t t0 = clock();
        assert_int_equal(df_parse(big, o, &f, &e), -E2BIG);
        assert_true((double) (clock() - t0) / CLOCKS_PER_SEC < 1.0);
        assert_non_null(strstr(e.msg, "more than 1000 instructions"));
        assert_non_null(strstr(e.msg, "line 1001"));
        df_file_clear(&f);
        free(big);
        /* a physical line past the cap */
        size_t L = DF_LINE_MAX + 10;
        char *line = malloc(L + 16);
        memcpy(line, "FROM i\nRUN ", 11);
        memset(line + 11, 'a', L);
        memset(&e, 0, sizeof(e));
        assert_int_equal(df_parse(line, L + 11, &f, &e), -E2BIG);
        assert_non_null(strstr(e.msg, "line 2"));
        df_file_clear(&f);
        free(line);
        /* exponential ENV growth stops at the value cap */
        struct df_plan p;
        char *grow = malloc(64 * 40 + 32);
        o = (size_t) sprintf(grow, "FROM i\nENV A=aaaaaaaaaaaaaaaa\n");
        for (int i = 0; i < 60; i++)
                o += (size_t) sprintf(grow + o, "ENV A=$A$A\n");
        assert_int_equal(run(grow, true, &p, &e), -E2BIG);
        assert_non_null(strstr(e.msg, "longer than"));
        df_plan_clear(&p);
        free(grow);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_basic),
                cmocka_unit_test(test_substitution),
                cmocka_unit_test(test_base_env),
                cmocka_unit_test(test_escape_directive_and_continuations),
                cmocka_unit_test(test_heredocs),
                cmocka_unit_test(test_copy),
                cmocka_unit_test(test_errors_name_line_and_column),
                cmocka_unit_test(test_limits),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
