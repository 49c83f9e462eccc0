/* SPDX-License-Identifier: Apache-2.0 */
/* Dockerfiles (pure: no I/O, no globals; fuzzed by tests/fuzz/fuzz-dockerfile.c).
 *
 * Two stages, both on untrusted text:
 *
 *   df_parse(text)  the syntax: parser directives (`# escape=`), comments,
 *                   line continuations, heredocs (`RUN <<EOF`), instruction
 *                   keywords, `--flag=value`s, JSON (exec) forms. Every
 *                   instruction keeps its line and column.
 *   df_eval(file)   the meaning, one instruction after the other with a
 *                   state that carries over (ARG and ENV values, SHELL):
 *                   variable substitution where Docker does it ($VAR,
 *                   ${VAR}, ${VAR:-x}, ${VAR:+x}, ${VAR-x}, ${VAR+x},
 *                   ${VAR:?msg}; not inside single quotes, not in RUN, CMD
 *                   or ENTRYPOINT, which the shell expands), quote removal,
 *                   key=value pairs, exec vs shell form, HEALTHCHECK
 *                   options, EXPOSE ports. The result is a list of ops the
 *                   builder runs (src/api/build.c turns them into steps).
 *
 * Errors (INVALID_ARGUMENT, UNIMPLEMENTED for instructions we know but do
 * not build: VOLUME, ONBUILD, multi-stage FROM, RUN --mount, COPY --from,
 * remote ADD) name the line and column: "line 3, column 1: unknown
 * instruction FOO". Limits: DF_TEXT_MAX bytes of text, DF_LINE_MAX bytes
 * per physical line, DF_INSTR_MAX instructions, DF_WORDS_MAX words per
 * instruction; past them a clear error, never quadratic work. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "basic/err.h"

#define DF_TEXT_MAX (4u << 20)
#define DF_LINE_MAX 65536u
#define DF_INSTR_MAX 1000u
#define DF_WORDS_MAX 4096u
#define DF_VARS_MAX 1024u

enum df_cmd {
        DF_FROM = 1,
        DF_RUN,
        DF_COPY,
        DF_ADD,
        DF_ENV,
        DF_ARG,
        DF_WORKDIR,
        DF_USER,
        DF_ENTRYPOINT,
        DF_CMD,
        DF_SHELL,
        DF_LABEL,
        DF_EXPOSE,
        DF_HEALTHCHECK,
        DF_STOPSIGNAL,
        DF_MAINTAINER,
        DF_VOLUME,
        DF_ONBUILD,
};

/* One heredoc (`<<EOF` ... `EOF`) of an instruction. */
struct df_heredoc {
        char *word;  /* the delimiter ("EOF") */
        char *body;  /* the lines between, each ending in '\n' */
        bool expand; /* unquoted delimiter: the shell expands $VAR in it */
};

/* One instruction as written. */
struct df_instr {
        enum df_cmd cmd;
        unsigned line, col; /* where the keyword starts, 1-based */
        unsigned args_col;  /* where its arguments start on that line */
        char *keyword;      /* upper case ("RUN") */
        char *text;         /* the instruction, continuations joined (for logs) */
        char **flags;       /* "--chown=1:2" as written, NULL-terminated */
        size_t n_flags;
        char *args;  /* the arguments after the flags, as written */
        bool json;   /* args is a JSON array of strings ... */
        char **argv; /* ... parsed here (NULL-terminated) */
        size_t n_argv;
        struct df_heredoc *heredocs;
        size_t n_heredocs;
};

struct df_file {
        struct df_instr *v;
        size_t n;
        char escape; /* '\\' or '`' */
};

/* Parse len bytes of text (need not be NUL-terminated) into *out (which
 * the caller zeroes before; clear it with df_file_clear, also after an
 * error). An empty file (only comments) is fine: out->n == 0.
 * Errors: -EINVAL (INVALID_ARGUMENT, "line L, column C: ..."), -E2BIG
 * (INVALID_ARGUMENT: a limit), -ENOMEM. */
int df_parse(const char *text, size_t len, struct df_file *out, struct wr_err *e);

void df_file_clear(struct df_file *f);

/* ---- evaluation ---- */

/* What carries over from one instruction to the next (and from one
 * dockerfile_commands step to the next). Zero-initialise; df_state_clear
 * frees. */
struct df_state {
        char **args; /* ARG "K=V" (declared with a value) or "K" (declared, unset) */
        size_t n_args;
        char **env; /* ENV "K=V" set so far */
        size_t n_env;
        char **shell; /* SHELL; NULL = ["/bin/sh", "-c"] */
        size_t n_shell;
        char **build_args;     /* "K=V" given by the client for ARGs (borrowed) */
        char *const *base_env; /* the FROM image's Env, set at FROM (borrowed; may be NULL) */
        bool seen_from;
};

void df_state_clear(struct df_state *st);

/* Set "K=V" in st's ENV (what an SDK env step or the base image sets
 * between Dockerfile parts). -ENOMEM, -E2BIG past DF_VARS_MAX. */
int df_state_env_set(struct df_state *st, const char *kv);

enum df_op_kind {
        DF_OP_FROM = 1,    /* value = the image reference */
        DF_OP_RUN,         /* argv (shell form: the SHELL + the command); env = ARG values */
        DF_OP_COPY,        /* srcs (context paths, or heredoc bodies), dest, chmod */
        DF_OP_ENV,         /* env: "K=V" */
        DF_OP_WORKDIR,     /* value (may be relative: to the current working dir) */
        DF_OP_USER,        /* value */
        DF_OP_ENTRYPOINT,  /* argv */
        DF_OP_CMD,         /* argv */
        DF_OP_SHELL,       /* argv */
        DF_OP_LABEL,       /* env: "K=V" */
        DF_OP_EXPOSE,      /* env: "80/tcp" ... */
        DF_OP_HEALTHCHECK, /* argv: the OCI Test (["NONE"], ["CMD", ..], ["CMD-SHELL", s]), hc */
        DF_OP_STOPSIGNAL,  /* value */
        DF_OP_ARG,         /* nothing for the builder: the state changed */
};

struct df_copy_src {
        char *path; /* relative to the context, cleaned (no "..", no leading "/"), or NULL */
        char *data; /* a heredoc body (then path is NULL) */
        size_t len;
        char *name; /* the heredoc's word: the file name when dest is a directory */
};

struct df_healthcheck {
        int64_t interval_ns, timeout_ns, start_period_ns, start_interval_ns; /* 0 = default */
        int retries;                                                         /* 0 = default */
};

struct df_op {
        enum df_op_kind kind;
        unsigned line, col;
        char *desc;  /* "RUN make" (the instruction text, shortened) */
        char **argv; /* NULL-terminated */
        char **env;  /* NULL-terminated */
        char *value;
        struct df_copy_src *srcs;
        size_t n_srcs;
        char *dest;
        bool add;    /* ADD (same as COPY here) */
        int chmod;   /* -1 = keep the file's mode */
        char *chown; /* "uid[:gid]" or NULL */
        struct df_healthcheck hc;
};

struct df_plan {
        struct df_op *ops;
        size_t n;
};

/* Evaluate the instructions of f in order against st (updated as it
 * goes), appending ops to *plan (zeroed by the caller; df_plan_clear
 * frees it, also after an error). FROM is allowed once, first (ARGs may
 * come before it); when allow_from is false a FROM is an error.
 * Errors: -EINVAL (INVALID_ARGUMENT naming line and column: a bad port,
 * a COPY source leaving the context, an unset ${X:?}, ...),
 * -EOPNOTSUPP (UNIMPLEMENTED naming what), -E2BIG, -ENOMEM. */
int df_eval(const struct df_file *f, struct df_state *st, bool allow_from, struct df_plan *plan,
            struct wr_err *e);

void df_plan_clear(struct df_plan *p);

/* Substitute variables in one word the way Docker does for ENV, LABEL,
 * WORKDIR, ...: quotes removed, `\` (or escape) escapes, $VAR/${VAR...}
 * looked up in st (ENV before ARG; build_args override ARG defaults).
 * *ret is malloc'd. Errors: -EINVAL (bad ${...}; an unset ${X:?msg}),
 * -E2BIG (longer than DF_LINE_MAX), -ENOMEM. */
int df_expand(const char *word, char escape, const struct df_state *st, char **ret,
              struct wr_err *e);

/* Clean a relative context path: "./a//b/" -> "a/b", "/a" -> "a", "."
 * -> "". -EINVAL when it leaves the context ("../x", "a/../../x"). */
int df_context_path(const char *in, char **ret);
