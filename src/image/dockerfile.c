/* SPDX-License-Identifier: Apache-2.0 */
/* Dockerfiles: the parser and the evaluator (dockerfile.h). Pure: the
 * text comes in, instructions and ops go out; nothing here touches a file,
 * a socket or a global. Every loop is bounded by the input's size and the
 * limits in dockerfile.h. */
#include "image/dockerfile.h"

#include <ctype.h>
#include <errno.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "basic/macro.h"

#define EXPAND_DEPTH_MAX 8

#define INVALID(e, l, c, ...) bad(e, -EINVAL, WR_STATUS_INVALID_ARGUMENT, l, c, __VA_ARGS__)
#define UNSUPPORTED(e, l, c, ...) bad(e, -EOPNOTSUPP, WR_STATUS_UNIMPLEMENTED, l, c, __VA_ARGS__)

static int bad(struct wr_err *e, int code, enum wr_status status, unsigned line, unsigned col,
               const char *fmt, ...) _printf_(6, 7);
static int bad(struct wr_err *e, int code, enum wr_status status, unsigned line, unsigned col,
               const char *fmt, ...) {
        char msg[WR_ERR_MSG_MAX];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(msg, sizeof(msg), fmt, ap);
        va_end(ap);
        if (line)
                return err_setx(e, code, status, WR_FAULT_CLIENT,
                                "Dockerfile line %u, column %u: %s", line, col, msg);
        return err_setx(e, code, status, WR_FAULT_CLIENT, "Dockerfile: %s", msg);
}

static int oom(struct wr_err *e) {
        return err_set(e, -ENOMEM, "Dockerfile: out of memory");
}

/* ---- small helpers: a growing buffer, string vectors ---- */

struct buf {
        char *p;
        size_t len, cap;
        size_t max;
};

static int buf_add(struct buf *b, const char *s, size_t n) {
        if (b->len + n + 1 > b->max)
                return -E2BIG;
        if (b->len + n + 1 > b->cap) {
                size_t nc = MAX(b->cap * 2, b->len + n + 1);
                nc = MAX(nc, (size_t) 64);
                char *np = realloc(b->p, nc);
                if (!np)
                        return -ENOMEM;
                b->p = np;
                b->cap = nc;
        }
        memcpy(b->p + b->len, s, n);
        b->len += n;
        b->p[b->len] = '\0';
        return 0;
}

static int buf_addc(struct buf *b, char c) {
        return buf_add(b, &c, 1);
}

/* b's string (never NULL on success), taken out of b. */
static char *buf_take(struct buf *b) {
        if (!b->p && buf_add(b, "", 0) < 0)
                return NULL;
        char *p = b->p;
        *b = (struct buf){.max = b->max};
        return p;
}

static void strv_free_(char **v) {
        for (size_t i = 0; v && v[i]; i++)
                free(v[i]);
        free(v);
}

/* Append s (taken over) to the NULL-terminated *v of *n entries. */
static int strv_push(char ***v, size_t *n, char *s) {
        if (!s)
                return -ENOMEM;
        char **nv = reallocarray(*v, *n + 2, sizeof(char *));
        if (!nv) {
                free(s);
                return -ENOMEM;
        }
        nv[(*n)++] = s;
        nv[*n] = NULL;
        *v = nv;
        return 0;
}

static void strv_free_p(char ***p) {
        strv_free_(*p);
}

static char **strv_copy(char *const *v, size_t n) {
        char **out = calloc(n + 1, sizeof(char *));
        for (size_t i = 0; out && i < n; i++)
                if (!(out[i] = strdup(v[i]))) {
                        strv_free_(out);
                        return NULL;
                }
        return out;
}

static bool name_char(char c, bool first) {
        return c == '_' || isalpha((unsigned char) c) || (!first && isdigit((unsigned char) c));
}

/* *ret = the strings of a JSON array of strings in s: 1; not such an
 * array: 0; -ENOMEM. */
static int json_strv(const char *s, char ***ret, size_t *n_ret) {
        *ret = NULL;
        *n_ret = 0;
        json_error_t je;
        json_t *a = json_loads(s, JSON_REJECT_DUPLICATES, &je);
        if (!json_is_array(a)) {
                json_decref(a);
                return 0;
        }
        size_t n = json_array_size(a);
        for (size_t i = 0; i < n; i++)
                if (!json_is_string(json_array_get(a, i))) {
                        json_decref(a);
                        return 0;
                }
        char **v = calloc(n + 1, sizeof(char *));
        for (size_t i = 0; v && i < n; i++) {
                const json_t *x = json_array_get(a, i);
                /* an embedded NUL would cut the string: not an argv */
                if (strlen(json_string_value(x)) != json_string_length(x)) {
                        strv_free_(v);
                        json_decref(a);
                        return 0;
                }
                if (!(v[i] = strdup(json_string_value(x)))) {
                        strv_free_(v);
                        v = NULL;
                }
        }
        json_decref(a);
        if (!v)
                return -ENOMEM;
        *ret = v;
        *n_ret = n;
        return 1;
}

/* ---- the parser ---- */

static const struct {
        const char *word;
        enum df_cmd cmd;
} keywords[] = {
        {"FROM", DF_FROM},
        {"RUN", DF_RUN},
        {"COPY", DF_COPY},
        {"ADD", DF_ADD},
        {"ENV", DF_ENV},
        {"ARG", DF_ARG},
        {"WORKDIR", DF_WORKDIR},
        {"USER", DF_USER},
        {"ENTRYPOINT", DF_ENTRYPOINT},
        {"CMD", DF_CMD},
        {"SHELL", DF_SHELL},
        {"LABEL", DF_LABEL},
        {"EXPOSE", DF_EXPOSE},
        {"HEALTHCHECK", DF_HEALTHCHECK},
        {"STOPSIGNAL", DF_STOPSIGNAL},
        {"MAINTAINER", DF_MAINTAINER},
        {"VOLUME", DF_VOLUME},
        {"ONBUILD", DF_ONBUILD},
};

struct lines {
        const char *text;
        size_t len, pos;
        unsigned lineno; /* of the line last read */
};

/* The next physical line (without "\n" or "\r\n"): 1, or 0 at the end. */
static int next_line(struct lines *ls, const char **ret, size_t *n, struct wr_err *e) {
        if (ls->pos >= ls->len)
                return 0;
        const char *s = ls->text + ls->pos;
        const char *nl = memchr(s, '\n', ls->len - ls->pos);
        size_t l = nl ? (size_t) (nl - s) : ls->len - ls->pos;
        ls->pos += l + (nl ? 1 : 0);
        ls->lineno++;
        if (l && s[l - 1] == '\r')
                l--;
        if (l > DF_LINE_MAX)
                return bad(e, -E2BIG, WR_STATUS_INVALID_ARGUMENT, ls->lineno, 1,
                           "line longer than %u bytes", DF_LINE_MAX);
        if (memchr(s, '\0', l))
                return INVALID(e, ls->lineno,
                               (unsigned) ((const char *) memchr(s, '\0', l) - s) + 1, "NUL byte");
        *ret = s;
        *n = l;
        return 1;
}

static size_t skip_ws(const char *s, size_t n, size_t i) {
        while (i < n && (s[i] == ' ' || s[i] == '\t'))
                i++;
        return i;
}

static bool blank_or_comment(const char *s, size_t n) {
        size_t i = skip_ws(s, n, 0);
        return i == n || s[i] == '#';
}

/* Parser directives at the top: "# escape=`", "# syntax=...". */
static int directives(struct lines *ls, struct df_file *f, struct wr_err *e) {
        bool seen_escape = false;
        for (;;) {
                struct lines save = *ls;
                const char *s;
                size_t n;
                int r = next_line(ls, &s, &n, e);
                if (r <= 0)
                        return r;
                size_t i = skip_ws(s, n, 0);
                if (i == n || s[i] != '#') {
                        *ls = save;
                        return 0;
                }
                i = skip_ws(s, n, i + 1);
                size_t k = i;
                while (k < n && (isalnum((unsigned char) s[k]) || s[k] == '_'))
                        k++;
                size_t eq = skip_ws(s, n, k);
                if (k == i || eq >= n || s[eq] != '=') {
                        *ls = save; /* a plain comment ends the directives */
                        return 0;
                }
                size_t v = skip_ws(s, n, eq + 1), ve = n;
                while (ve > v && (s[ve - 1] == ' ' || s[ve - 1] == '\t'))
                        ve--;
                if (k - i == 6 && !strncasecmp(s + i, "escape", 6)) {
                        if (seen_escape)
                                return INVALID(e, ls->lineno, (unsigned) i + 1,
                                               "the escape directive is given twice");
                        if (ve - v != 1 || (s[v] != '\\' && s[v] != '`'))
                                return INVALID(e, ls->lineno, (unsigned) v + 1,
                                               "escape must be \\ or ` (got \"%.*s\")",
                                               (int) MIN(ve - v, (size_t) 20), s + v);
                        f->escape = s[v];
                        seen_escape = true;
                } else if (!((k - i == 6 && !strncasecmp(s + i, "syntax", 6)) ||
                             (k - i == 5 && !strncasecmp(s + i, "check", 5)))) {
                        *ls = save; /* unknown directives are comments */
                        return 0;
                }
        }
}

/* Find heredoc markers ("<<EOF", "<<-EOF", "<<'EOF'", "<<\"EOF\"") in
 * args outside quotes; add them to in->heredocs (bodies filled later). */
static int find_heredocs(struct df_instr *in, char escape) {
        const char *s = in->args;
        char q = 0;
        for (size_t i = 0; s[i]; i++) {
                if (q) {
                        if (s[i] == q)
                                q = 0;
                        else if (q == '"' && s[i] == escape && s[i + 1])
                                i++;
                        continue;
                }
                if (s[i] == escape && s[i + 1]) {
                        i++;
                        continue;
                }
                if (s[i] == '\'' || s[i] == '"') {
                        q = s[i];
                        continue;
                }
                if (s[i] != '<' || s[i + 1] != '<' || s[i + 2] == '<')
                        continue;
                size_t j = i + 2;
                bool strip = s[j] == '-';
                if (strip)
                        j++;
                char wq = (s[j] == '\'' || s[j] == '"') ? s[j] : 0;
                if (wq)
                        j++;
                size_t w = j;
                while (s[j] &&
                       (isalnum((unsigned char) s[j]) || s[j] == '_' || s[j] == '.' || s[j] == '-'))
                        j++;
                if (j == w || (wq && s[j] != wq))
                        continue;
                if (in->n_heredocs >= 16)
                        return -E2BIG;
                struct df_heredoc *nh = reallocarray(in->heredocs, in->n_heredocs + 1, sizeof(*nh));
                if (!nh)
                        return -ENOMEM;
                in->heredocs = nh;
                struct df_heredoc *h = &nh[in->n_heredocs];
                *h = (struct df_heredoc){.expand = !wq};
                if (!(h->word = strndup(s + w, j - w)))
                        return -ENOMEM;
                /* the strip flag travels in the word's first byte for read_heredocs */
                in->n_heredocs++;
                if (strip) {
                        char *sw = malloc(strlen(h->word) + 2);
                        if (!sw)
                                return -ENOMEM;
                        sw[0] = '\t';
                        strcpy(sw + 1, h->word);
                        free(h->word);
                        h->word = sw;
                }
                i = j - (wq ? 0 : 1);
        }
        return 0;
}

static int read_heredocs(struct lines *ls, struct df_instr *in, size_t *total, struct wr_err *e) {
        for (size_t k = 0; k < in->n_heredocs; k++) {
                struct df_heredoc *h = &in->heredocs[k];
                bool strip = h->word[0] == '\t';
                if (strip)
                        memmove(h->word, h->word + 1, strlen(h->word));
                struct buf b = {.max = DF_TEXT_MAX};
                for (;;) {
                        const char *s;
                        size_t n;
                        int r = next_line(ls, &s, &n, e);
                        if (r < 0) {
                                free(b.p);
                                return r;
                        }
                        if (r == 0) {
                                free(b.p);
                                return INVALID(e, in->line, in->col,
                                               "heredoc <<%s is not terminated (no line \"%s\")",
                                               h->word, h->word);
                        }
                        if (strip)
                                while (n && *s == '\t')
                                        s++, n--;
                        if (n == strlen(h->word) && !memcmp(s, h->word, n))
                                break;
                        *total += n + 1;
                        if (*total > DF_TEXT_MAX || (r = buf_add(&b, s, n)) < 0 ||
                            (r = buf_addc(&b, '\n')) < 0) {
                                free(b.p);
                                return r == -ENOMEM ? oom(e)
                                                    : bad(e, -E2BIG, WR_STATUS_INVALID_ARGUMENT,
                                                          in->line, in->col, "heredoc too long");
                        }
                }
                if (!(h->body = buf_take(&b)))
                        return oom(e);
        }
        return 0;
}

static void instr_clear(struct df_instr *in) {
        free(in->keyword);
        free(in->text);
        strv_free_(in->flags);
        free(in->args);
        strv_free_(in->argv);
        for (size_t i = 0; i < in->n_heredocs; i++) {
                free(in->heredocs[i].word);
                free(in->heredocs[i].body);
        }
        free(in->heredocs);
        memset(in, 0, sizeof(*in));
}

void df_file_clear(struct df_file *f) {
        if (!f)
                return;
        for (size_t i = 0; i < f->n; i++)
                instr_clear(&f->v[i]);
        free(f->v);
        memset(f, 0, sizeof(*f));
}

/* Split the logical line into keyword, flags, args; classify. */
static int instr_fill(struct df_instr *in, const char *esc_set, struct wr_err *e) {
        const char *s = in->text;
        size_t kw = strcspn(s, " \t");
        char word[16];
        if (kw >= sizeof(word))
                return INVALID(e, in->line, in->col, "unknown instruction %.40s", s);
        for (size_t i = 0; i < kw; i++)
                word[i] = (char) toupper((unsigned char) s[i]);
        word[kw] = '\0';
        for (size_t i = 0; i < ELEMENTSOF(keywords); i++)
                if (!strcmp(word, keywords[i].word))
                        in->cmd = keywords[i].cmd;
        if (!in->cmd) {
                for (size_t i = 0; i < kw; i++)
                        if (!isprint((unsigned char) word[i]))
                                word[i] = '?';
                return INVALID(e, in->line, in->col,
                               "unknown instruction %s (this builder knows FROM, RUN, COPY, ADD, "
                               "ENV, ARG, WORKDIR, USER, ENTRYPOINT, CMD, SHELL, LABEL, EXPOSE, "
                               "HEALTHCHECK, STOPSIGNAL, MAINTAINER)",
                               word);
        }
        if (!(in->keyword = strdup(word)))
                return -ENOMEM;
        size_t i = skip_ws(s, strlen(s), kw);
        in->args_col = in->col + (unsigned) i;
        /* --flags (not for RUN's exec/shell text after the first non-flag) */
        while (s[i] == '-' && s[i + 1] == '-' && isalpha((unsigned char) s[i + 2])) {
                size_t l = strcspn(s + i, " \t");
                if (in->n_flags >= 32)
                        return INVALID(e, in->line, in->col + (unsigned) i, "too many flags");
                int r = strv_push(&in->flags, &in->n_flags, strndup(s + i, l));
                if (r < 0)
                        return r;
                i = skip_ws(s, strlen(s), i + l);
        }
        size_t end = strlen(s);
        while (end > i && (s[end - 1] == ' ' || s[end - 1] == '\t'))
                end--;
        if (!(in->args = strndup(s + i, end - i)))
                return -ENOMEM;
        (void) esc_set;
        switch (in->cmd) {
        case DF_RUN:
        case DF_CMD:
        case DF_ENTRYPOINT:
        case DF_SHELL:
        case DF_COPY:
        case DF_ADD:
        case DF_VOLUME:
                if (in->args[0] == '[') {
                        int r = json_strv(in->args, &in->argv, &in->n_argv);
                        if (r < 0)
                                return r;
                        in->json = r > 0;
                }
                break;
        default:
                break;
        }
        return 0;
}

int df_parse(const char *text, size_t len, struct df_file *f, struct wr_err *e) {
        if (len > DF_TEXT_MAX)
                return bad(e, -E2BIG, WR_STATUS_INVALID_ARGUMENT, 0, 0, "longer than %u bytes",
                           DF_TEXT_MAX);
        f->escape = '\\';
        struct lines ls = {.text = text ? text : "", .len = text ? len : 0};
        /* a UTF-8 byte order mark */
        if (ls.len >= 3 && !memcmp(ls.text, "\xef\xbb\xbf", 3))
                ls.pos = 3;
        int r = directives(&ls, f, e);
        if (r < 0)
                return r;
        size_t total = 0;
        for (;;) {
                const char *s;
                size_t n;
                if ((r = next_line(&ls, &s, &n, e)) < 0)
                        return r;
                if (r == 0)
                        return 0;
                if (blank_or_comment(s, n))
                        continue;
                if (f->n >= DF_INSTR_MAX)
                        return bad(e, -E2BIG, WR_STATUS_INVALID_ARGUMENT, ls.lineno, 1,
                                   "more than %u instructions (the limit)", DF_INSTR_MAX);
                struct df_instr *nv = reallocarray(f->v, f->n + 1, sizeof(*nv));
                if (!nv)
                        return oom(e);
                f->v = nv;
                struct df_instr *in = &f->v[f->n++];
                memset(in, 0, sizeof(*in));
                size_t start = skip_ws(s, n, 0);
                in->line = ls.lineno;
                in->col = (unsigned) start + 1;
                /* the logical line: physical lines joined while one ends in
                 * the escape character (comment and empty lines inside are
                 * skipped, as Docker does) */
                struct buf b = {.max = DF_LINE_MAX * 4};
                const char *cs = s + start;
                size_t cn = n - start;
                for (;;) {
                        size_t t = cn;
                        while (t && (cs[t - 1] == ' ' || cs[t - 1] == '\t'))
                                t--;
                        bool cont = t && cs[t - 1] == f->escape;
                        /* an escaped escape ("\\\\") at the end is no continuation */
                        if (cont && t >= 2 && cs[t - 2] == f->escape) {
                                size_t k = t - 1, run = 0;
                                while (k && cs[k - 1] == f->escape)
                                        k--, run++;
                                cont = run % 2 == 0;
                        }
                        total += cn + 1;
                        r = total > DF_TEXT_MAX ? -E2BIG : buf_add(&b, cs, cont ? t - 1 : cn);
                        if (r < 0) {
                                free(b.p);
                                return r == -ENOMEM ? oom(e)
                                                    : bad(e, -E2BIG, WR_STATUS_INVALID_ARGUMENT,
                                                          in->line, in->col,
                                                          "instruction longer than %u bytes",
                                                          DF_LINE_MAX * 4);
                        }
                        if (!cont)
                                break;
                        do {
                                if ((r = next_line(&ls, &cs, &cn, e)) < 0) {
                                        free(b.p);
                                        return r;
                                }
                        } while (r > 0 && blank_or_comment(cs, cn));
                        if (r == 0)
                                break; /* a continuation at the end of the file */
                }
                if (!(in->text = buf_take(&b)))
                        return oom(e);
                if ((r = instr_fill(in, NULL, e)) < 0)
                        return r == -ENOMEM ? oom(e) : r;
                if (in->cmd == DF_RUN || in->cmd == DF_COPY || in->cmd == DF_ADD) {
                        if (!in->json && (r = find_heredocs(in, f->escape)) < 0)
                                return r == -ENOMEM ? oom(e)
                                                    : INVALID(e, in->line, in->col,
                                                              "more than 16 heredocs");
                        if ((r = read_heredocs(&ls, in, &total, e)) < 0)
                                return r;
                }
        }
}

/* ---- evaluation ---- */

void df_state_clear(struct df_state *st) {
        if (!st)
                return;
        strv_free_(st->args);
        strv_free_(st->env);
        strv_free_(st->shell);
        memset(st, 0, sizeof(*st));
}

static void op_clear(struct df_op *op) {
        free(op->desc);
        strv_free_(op->argv);
        strv_free_(op->env);
        free(op->value);
        for (size_t i = 0; i < op->n_srcs; i++) {
                free(op->srcs[i].path);
                free(op->srcs[i].data);
                free(op->srcs[i].name);
        }
        free(op->srcs);
        free(op->dest);
        free(op->chown);
}

void df_plan_clear(struct df_plan *p) {
        if (!p)
                return;
        for (size_t i = 0; i < p->n; i++)
                op_clear(&p->ops[i]);
        free(p->ops);
        memset(p, 0, sizeof(*p));
}

/* "K=V" entry for name in v (NULL-terminated), or NULL; *bare = a "K"
 * entry without a value. */
static const char *kv_find(char *const *v, const char *name, size_t nl, bool *bare) {
        const char *found = NULL;
        for (size_t i = 0; v && v[i]; i++)
                if (!strncmp(v[i], name, nl) && (v[i][nl] == '=' || v[i][nl] == '\0')) {
                        found = v[i];
                        if (bare)
                                *bare = v[i][nl] == '\0';
                }
        return found;
}

/* The value of $name: ENV first, then a declared ARG (the client's
 * build arg, else its default). NULL = unset. */
static const char *lookup(const struct df_state *st, const char *name, size_t nl) {
        const char *kv = kv_find(st->env, name, nl, NULL);
        if (kv)
                return kv + nl + 1;
        bool bare = false;
        kv = kv_find(st->args, name, nl, &bare);
        if (!kv)
                return NULL;
        const char *given = kv_find(st->build_args, name, nl, NULL);
        if (given && given[nl] == '=')
                return given + nl + 1;
        return bare ? NULL : kv + nl + 1;
}

struct lex {
        const char *s;
        size_t i;
        char escape;
        const struct df_state *st;
        struct wr_err *e;
        int depth;
};

static int lex_word(struct lex *x, struct buf *out, const char *stop);

/* After "$" at x->s[x->i]. */
static int lex_var(struct lex *x, struct buf *out) {
        const char *s = x->s;
        size_t i = x->i;
        if (s[i] != '{') {
                if (!name_char(s[i], true))
                        return buf_addc(out, '$');
                size_t st = i;
                while (name_char(s[i], false))
                        i++;
                x->i = i;
                const char *v = lookup(x->st, s + st, i - st);
                return v ? buf_add(out, v, strlen(v)) : 0;
        }
        i++;
        size_t st = i;
        while (name_char(s[i], i == st))
                i++;
        size_t nl = i - st;
        if (nl == 0)
                return err_setx(x->e, -EINVAL, WR_STATUS_INVALID_ARGUMENT, WR_FAULT_CLIENT,
                                "bad substitution: \"${\" wants a variable name");
        const char *v = lookup(x->st, s + st, nl);
        if (s[i] == '}') {
                x->i = i + 1;
                return v ? buf_add(out, v, strlen(v)) : 0;
        }
        bool colon = s[i] == ':';
        if (colon)
                i++;
        char op = s[i];
        if (op != '-' && op != '+' && op != '?')
                return err_setx(x->e, -EINVAL, WR_STATUS_INVALID_ARGUMENT, WR_FAULT_CLIENT,
                                "bad substitution in \"${%.*s...\": only :-, :+, :?, -, + and ? "
                                "are supported",
                                (int) MIN(nl, (size_t) 40), s + st);
        x->i = i + 1;
        if (++x->depth > EXPAND_DEPTH_MAX)
                return err_setx(x->e, -EINVAL, WR_STATUS_INVALID_ARGUMENT, WR_FAULT_CLIENT,
                                "substitutions nested too deep");
        struct buf w = {.max = out->max};
        int r = lex_word(x, &w, "}");
        x->depth--;
        if (r < 0) {
                free(w.p);
                return r;
        }
        if (x->s[x->i] != '}') {
                free(w.p);
                return err_setx(x->e, -EINVAL, WR_STATUS_INVALID_ARGUMENT, WR_FAULT_CLIENT,
                                "missing '}' in \"${%.*s\"", (int) MIN(nl, (size_t) 40), s + st);
        }
        x->i++;
        bool set = v && (!colon || *v);
        const char *use = NULL;
        if (op == '-')
                use = set ? v : (w.p ? w.p : "");
        else if (op == '+')
                use = set ? (w.p ? w.p : "") : "";
        else if (set)
                use = v;
        else {
                r = err_setx(x->e, -EINVAL, WR_STATUS_INVALID_ARGUMENT, WR_FAULT_CLIENT,
                             "%.*s: %.200s", (int) MIN(nl, (size_t) 60), s + st,
                             w.p && *w.p ? w.p : "is not set");
                free(w.p);
                return r;
        }
        r = buf_add(out, use, strlen(use));
        free(w.p);
        return r;
}

/* One word up to the end or a character in stop (outside quotes):
 * quotes removed, escapes applied, variables expanded. */
static int lex_word(struct lex *x, struct buf *out, const char *stop) {
        int r = 0;
        const char *s = x->s;
        while (r >= 0 && s[x->i] && !strchr(stop, s[x->i])) {
                char c = s[x->i++];
                if (c == '\'') {
                        size_t end = x->i;
                        while (s[end] && s[end] != '\'')
                                end++;
                        if (!s[end])
                                return err_setx(x->e, -EINVAL, WR_STATUS_INVALID_ARGUMENT,
                                                WR_FAULT_CLIENT, "unterminated single quote");
                        r = buf_add(out, s + x->i, end - x->i);
                        x->i = end + 1;
                } else if (c == '"') {
                        while (r >= 0 && s[x->i] && s[x->i] != '"') {
                                char d = s[x->i++];
                                if (d == x->escape && s[x->i] &&
                                    (s[x->i] == '"' || s[x->i] == '$' || s[x->i] == x->escape))
                                        r = buf_addc(out, s[x->i++]);
                                else if (d == '$')
                                        r = lex_var(x, out);
                                else
                                        r = buf_addc(out, d);
                        }
                        if (r >= 0 && s[x->i] != '"')
                                return err_setx(x->e, -EINVAL, WR_STATUS_INVALID_ARGUMENT,
                                                WR_FAULT_CLIENT, "unterminated double quote");
                        x->i++;
                } else if (c == x->escape) {
                        if (s[x->i])
                                r = buf_addc(out, s[x->i++]);
                        else
                                r = buf_addc(out, c);
                } else if (c == '$')
                        r = lex_var(x, out);
                else
                        r = buf_addc(out, c);
        }
        return r;
}

int df_expand(const char *word, char escape, const struct df_state *st, char **ret,
              struct wr_err *e) {
        struct lex x = {.s = word, .escape = escape, .st = st, .e = e};
        struct buf b = {.max = DF_LINE_MAX};
        int r = lex_word(&x, &b, "");
        if (r < 0) {
                free(b.p);
                if (r == -E2BIG)
                        return err_setx(e, r, WR_STATUS_INVALID_ARGUMENT, WR_FAULT_CLIENT,
                                        "a substituted value is longer than %u bytes", DF_LINE_MAX);
                return r == -ENOMEM ? err_set(e, r, "out of memory") : r;
        }
        if (!(*ret = buf_take(&b)))
                return err_set(e, -ENOMEM, "out of memory");
        return 0;
}

/* Split s at unquoted white space into raw words (quotes and escapes
 * kept for df_expand). */
static int split_words(const char *s, char escape, char ***ret, size_t *n) {
        *ret = NULL;
        *n = 0;
        size_t i = 0;
        for (;;) {
                while (s[i] == ' ' || s[i] == '\t')
                        i++;
                if (!s[i])
                        return 0;
                if (*n >= DF_WORDS_MAX)
                        return -E2BIG;
                size_t st = i;
                char q = 0;
                while (s[i] && (q || (s[i] != ' ' && s[i] != '\t'))) {
                        if (q) {
                                if (s[i] == q)
                                        q = 0;
                                else if (q == '"' && s[i] == escape && s[i + 1])
                                        i++;
                        } else if (s[i] == escape && s[i + 1])
                                i++;
                        else if (s[i] == '\'' || s[i] == '"')
                                q = s[i];
                        i++;
                }
                int r = strv_push(ret, n, strndup(s + st, i - st));
                if (r < 0)
                        return r;
        }
}

int df_context_path(const char *in, char **ret) {
        size_t n = strlen(in);
        char *out = malloc(n + 1);
        if (!out)
                return -ENOMEM;
        size_t o = 0;
        const char *p = in;
        while (*p) {
                while (*p == '/')
                        p++;
                size_t l = strcspn(p, "/");
                if (l == 0)
                        break;
                if (l == 1 && p[0] == '.') {
                } else if (l == 2 && p[0] == '.' && p[1] == '.') {
                        if (o == 0) {
                                free(out);
                                return -EINVAL;
                        }
                        while (o > 0 && out[o - 1] != '/')
                                o--;
                        if (o > 0)
                                o--;
                } else {
                        if (o)
                                out[o++] = '/';
                        memcpy(out + o, p, l);
                        o += l;
                }
                p += l;
        }
        out[o] = '\0';
        *ret = out;
        return 0;
}

/* Go duration ("30s", "1m30s", "500ms") in ns; -1 when malformed. */
static int64_t duration_ns(const char *s) {
        if (!*s)
                return -1;
        int64_t total = 0;
        while (*s) {
                if (!isdigit((unsigned char) *s))
                        return -1;
                int64_t v = 0;
                while (isdigit((unsigned char) *s)) {
                        v = v * 10 + (*s++ - '0');
                        if (v > 1000000000000LL)
                                return -1;
                }
                int64_t unit;
                if (!strncmp(s, "ns", 2))
                        unit = 1, s += 2;
                else if (!strncmp(s, "us", 2))
                        unit = 1000, s += 2;
                else if (!strncmp(s, "ms", 2))
                        unit = 1000000, s += 2;
                else if (*s == 's')
                        unit = 1000000000LL, s++;
                else if (*s == 'm')
                        unit = 60000000000LL, s++;
                else if (*s == 'h')
                        unit = 3600000000000LL, s++;
                else
                        return -1;
                if (v > INT64_MAX / unit || total > INT64_MAX - v * unit)
                        return -1;
                total += v * unit;
        }
        return total;
}

struct ev {
        const struct df_instr *in;
        struct df_state *st;
        char escape;
        struct wr_err *e;
};

#define EV_INVALID(ev, ...) INVALID((ev)->e, (ev)->in->line, (ev)->in->col, __VA_ARGS__)

/* df_expand with the error placed at the instruction. */
static int ev_expand(struct ev *ev, const char *w, char **ret) {
        struct wr_err sub = {0};
        int r = df_expand(w, ev->escape, ev->st, ret, &sub);
        if (r < 0 && r != -ENOMEM)
                return bad(ev->e, r, WR_STATUS_INVALID_ARGUMENT, ev->in->line, ev->in->args_col,
                           "%s %s", ev->in->keyword, sub.msg);
        return r == -ENOMEM ? oom(ev->e) : r;
}

static int ev_words(struct ev *ev, const char *s, char ***ret, size_t *n) {
        int r = split_words(s, ev->escape, ret, n);
        if (r == -E2BIG)
                return bad(ev->e, r, WR_STATUS_INVALID_ARGUMENT, ev->in->line, ev->in->col,
                           "more than %u words", DF_WORDS_MAX);
        return r == -ENOMEM ? oom(ev->e) : r;
}

static int shell_argv(struct ev *ev, const char *cmd, char ***ret) {
        static char *const def[] = {"/bin/sh", "-c", NULL};
        char *const *sh = ev->st->shell ? ev->st->shell : def;
        size_t n = 0;
        while (sh[n])
                n++;
        char **v = strv_copy(sh, n);
        if (!v || strv_push(&v, &n, strdup(cmd)) < 0) {
                strv_free_(v);
                return oom(ev->e);
        }
        *ret = v;
        return 0;
}

/* Set "K=V" in *v (replacing K's entry). Takes kv. */
static int kv_set(char ***v, size_t *n, char *kv) {
        if (!kv)
                return -ENOMEM;
        size_t kl = strcspn(kv, "=");
        for (size_t i = 0; i < *n; i++)
                if (!strncmp((*v)[i], kv, kl) && ((*v)[i][kl] == '=' || (*v)[i][kl] == '\0')) {
                        free((*v)[i]);
                        (*v)[i] = kv;
                        return 0;
                }
        if (*n >= DF_VARS_MAX) {
                free(kv);
                return -E2BIG;
        }
        return strv_push(v, n, kv);
}

int df_state_env_set(struct df_state *st, const char *kv) {
        return kv_set(&st->env, &st->n_env, strdup(kv));
}

static char *kv_join(const char *k, const char *v) {
        size_t kl = strlen(k), vl = strlen(v);
        char *s = malloc(kl + vl + 2);
        if (s) {
                memcpy(s, k, kl);
                s[kl] = '=';
                memcpy(s + kl + 1, v, vl + 1);
        }
        return s;
}

/* ENV / LABEL: "K=V K2=V2" or the legacy "K the value". Pairs into *out. */
static int ev_pairs(struct ev *ev, bool env, char ***out, size_t *n_out) {
        const char *a = ev->in->args;
        _cleanup_(strv_free_p) char **w = NULL;
        size_t nw = 0;
        int r = ev_words(ev, a, &w, &nw);
        if (r < 0)
                return r;
        if (nw == 0)
                return EV_INVALID(ev, "%s wants KEY=VALUE", ev->in->keyword);
        /* the legacy form: no '=' in the first word */
        bool legacy = true;
        for (const char *c = w[0]; *c; c++) {
                if (*c == ev->escape && c[1]) {
                        c++;
                        continue;
                }
                if (*c == '=') {
                        legacy = false;
                        break;
                }
        }
        for (size_t i = 0; i < (legacy ? 1 : nw); i++) {
                char *k = NULL, *v = NULL;
                if (legacy) {
                        if (nw < 2) {
                                return EV_INVALID(ev, "%s %.60s wants a value (KEY=VALUE)",
                                                  ev->in->keyword, w[0]);
                        }
                        /* args starts with the first word (no leading blanks) */
                        const char *rest = a + MIN(strlen(w[0]), strlen(a));
                        while (*rest == ' ' || *rest == '\t')
                                rest++;
                        if ((r = ev_expand(ev, w[0], &k)) < 0)
                                return r;
                        if ((r = ev_expand(ev, rest, &v)) < 0) {
                                free(k);
                                return r;
                        }
                } else {
                        /* split at the first unescaped '=' of the raw word */
                        char *raw = w[i];
                        size_t eq = 0;
                        bool found = false;
                        for (; raw[eq]; eq++) {
                                if (raw[eq] == ev->escape && raw[eq + 1]) {
                                        eq++;
                                        continue;
                                }
                                if (raw[eq] == '\'' || raw[eq] == '"')
                                        break;
                                if (raw[eq] == '=') {
                                        found = true;
                                        break;
                                }
                        }
                        if (!found)
                                return EV_INVALID(ev, "%s part \"%.60s\" is not KEY=VALUE",
                                                  ev->in->keyword, raw);
                        raw[eq] = '\0';
                        if ((r = ev_expand(ev, raw, &k)) < 0)
                                return r;
                        if ((r = ev_expand(ev, raw + eq + 1, &v)) < 0) {
                                free(k);
                                return r;
                        }
                }
                bool ok = *k != '\0';
                if (env)
                        for (const char *c = k; *c; c++)
                                ok = ok && *c != '=';
                if (!ok) {
                        r = EV_INVALID(ev, "%s: \"%.60s\" is not a valid name", ev->in->keyword, k);
                        free(k);
                        free(v);
                        return r;
                }
                char *kv = kv_join(k, v);
                free(k);
                free(v);
                r = kv_set(out, n_out, kv);
                if (r < 0)
                        return r == -ENOMEM ? oom(ev->e)
                                            : EV_INVALID(ev, "more than %u variables", DF_VARS_MAX);
        }
        return 0;
}

static int ev_arg(struct ev *ev) {
        _cleanup_(strv_free_p) char **w = NULL;
        size_t nw = 0;
        int r = ev_words(ev, ev->in->args, &w, &nw);
        if (r < 0)
                return r;
        if (nw == 0)
                return EV_INVALID(ev, "ARG wants a name (ARG NAME or ARG NAME=default)");
        for (size_t i = 0; i < nw; i++) {
                size_t nl = strcspn(w[i], "=");
                bool ok = nl > 0 && name_char(w[i][0], true);
                for (size_t k = 1; ok && k < nl; k++)
                        ok = name_char(w[i][k], false);
                if (!ok)
                        return EV_INVALID(ev, "ARG \"%.60s\" is not a valid name", w[i]);
                char *kv;
                if (w[i][nl] == '=') {
                        char *v = NULL;
                        if ((r = ev_expand(ev, w[i] + nl + 1, &v)) < 0)
                                return r;
                        w[i][nl] = '\0';
                        kv = kv_join(w[i], v);
                        free(v);
                } else
                        kv = strdup(w[i]);
                if ((r = kv_set(&ev->st->args, &ev->st->n_args, kv)) < 0)
                        return r == -ENOMEM ? oom(ev->e)
                                            : EV_INVALID(ev, "more than %u ARGs", DF_VARS_MAX);
        }
        return 0;
}

static int ev_expose(struct ev *ev, struct df_op *op) {
        _cleanup_(strv_free_p) char **w = NULL;
        size_t nw = 0, n = 0;
        int r = ev_words(ev, ev->in->args, &w, &nw);
        if (r < 0)
                return r;
        if (nw == 0)
                return EV_INVALID(ev, "EXPOSE wants a port (EXPOSE 8080 or 8080/udp)");
        for (size_t i = 0; i < nw; i++) {
                _cleanup_free_ char *p = NULL;
                if ((r = ev_expand(ev, w[i], &p)) < 0)
                        return r;
                char *slash = strchr(p, '/');
                const char *proto = slash ? slash + 1 : "tcp";
                if (slash)
                        *slash = '\0';
                char lower[8] = "";
                size_t pl = strlen(proto);
                for (size_t k = 0; k < pl && k < sizeof(lower) - 1; k++)
                        lower[k] = (char) tolower((unsigned char) proto[k]);
                lower[MIN(pl, sizeof(lower) - 1)] = '\0';
                unsigned lo = 0, hi = 0;
                int used = 0;
                bool ok = pl < sizeof(lower) &&
                          (!strcmp(lower, "tcp") || !strcmp(lower, "udp") ||
                           !strcmp(lower, "sctp")) &&
                          isdigit((unsigned char) p[0]) && strlen(p) <= 11;
                if (ok) {
                        if (sscanf(p, "%5u-%5u%n", &lo, &hi, &used) == 2 &&
                            (size_t) used == strlen(p))
                                ok = lo >= 1 && hi <= 65535 && lo <= hi;
                        else if (sscanf(p, "%5u%n", &lo, &used) == 1 &&
                                 (size_t) used == strlen(p)) {
                                ok = lo >= 1 && lo <= 65535;
                                hi = lo;
                        } else
                                ok = false;
                }
                if (!ok)
                        return EV_INVALID(ev,
                                          "EXPOSE \"%.40s\" is not a port (1-65535, "
                                          "optionally /tcp, /udp or /sctp)",
                                          w[i]);
                char s[40];
                if (lo == hi)
                        snprintf(s, sizeof(s), "%u/%s", lo, lower);
                else
                        snprintf(s, sizeof(s), "%u-%u/%s", lo, hi, lower);
                if ((r = strv_push(&op->env, &n, strdup(s))) < 0)
                        return oom(ev->e);
        }
        return 0;
}

static int ev_healthcheck(struct ev *ev, struct df_op *op) {
        const struct df_instr *in = ev->in;
        size_t n = 0;
        const char *a = in->args;
        if (!strncasecmp(a, "NONE", 4) && (a[4] == '\0')) {
                if (in->n_flags)
                        return EV_INVALID(ev, "HEALTHCHECK NONE takes no options");
                return strv_push(&op->argv, &n, strdup("NONE")) < 0 ? oom(ev->e) : 0;
        }
        for (size_t i = 0; i < in->n_flags; i++) {
                const char *f = in->flags[i] + 2, *eq = strchr(f, '=');
                if (!eq)
                        return EV_INVALID(ev,
                                          "HEALTHCHECK option %.40s wants a value (--%.40s=...)",
                                          in->flags[i], f);
                size_t fl = (size_t) (eq - f);
                const char *v = eq + 1;
                int64_t *dst =
                        fl == 8 && !strncmp(f, "interval", 8)           ? &op->hc.interval_ns
                        : fl == 7 && !strncmp(f, "timeout", 7)          ? &op->hc.timeout_ns
                        : fl == 12 && !strncmp(f, "start-period", 12)   ? &op->hc.start_period_ns
                        : fl == 14 && !strncmp(f, "start-interval", 14) ? &op->hc.start_interval_ns
                                                                        : NULL;
                if (dst) {
                        if ((*dst = duration_ns(v)) < 0)
                                return EV_INVALID(ev,
                                                  "HEALTHCHECK --%.*s=%.40s is not a duration "
                                                  "(like 30s, 1m30s, 500ms)",
                                                  (int) fl, f, v);
                } else if (fl == 7 && !strncmp(f, "retries", 7)) {
                        char *end;
                        long x = strtol(v, &end, 10);
                        if (!*v || *end || x < 0 || x > 1000000)
                                return EV_INVALID(ev, "HEALTHCHECK --retries=%.40s is not a count",
                                                  v);
                        op->hc.retries = (int) x;
                } else
                        return EV_INVALID(ev,
                                          "HEALTHCHECK has no option %.40s (interval, timeout, "
                                          "start-period, start-interval, retries)",
                                          in->flags[i]);
        }
        if (strncasecmp(a, "CMD", 3) || (a[3] != ' ' && a[3] != '\t'))
                return EV_INVALID(ev, "HEALTHCHECK wants NONE or CMD <command>");
        const char *c = a + 4;
        while (*c == ' ' || *c == '\t')
                c++;
        if (!*c)
                return EV_INVALID(ev, "HEALTHCHECK CMD without a command");
        char **v = NULL;
        size_t nv = 0;
        int r = *c == '[' ? json_strv(c, &v, &nv) : 0;
        if (r < 0)
                return oom(ev->e);
        if (r > 0) {
                if (nv == 0) {
                        strv_free_(v);
                        return EV_INVALID(ev, "HEALTHCHECK CMD [] is empty");
                }
                char **t = calloc(nv + 2, sizeof(char *));
                if (!t || !(t[0] = strdup("CMD"))) {
                        free(t);
                        strv_free_(v);
                        return oom(ev->e);
                }
                memcpy(t + 1, v, nv * sizeof(char *));
                free(v);
                op->argv = t;
                return 0;
        }
        if (strv_push(&op->argv, &n, strdup("CMD-SHELL")) < 0 ||
            strv_push(&op->argv, &n, strdup(c)) < 0)
                return oom(ev->e);
        return 0;
}

static bool is_remote(const char *s) {
        return strstr(s, "://") || !strncmp(s, "git@", 4);
}

static int ev_copy(struct ev *ev, struct df_op *op) {
        const struct df_instr *in = ev->in;
        op->add = in->cmd == DF_ADD;
        op->chmod = -1;
        for (size_t i = 0; i < in->n_flags; i++) {
                const char *f = in->flags[i];
                if (!strncmp(f, "--chmod=", 8)) {
                        char *end;
                        long m = strtol(f + 8, &end, 8);
                        if (!f[8] || *end || m < 0 || m > 07777)
                                return EV_INVALID(ev, "%s --chmod=%.20s is not an octal mode",
                                                  in->keyword, f + 8);
                        op->chmod = (int) m;
                } else if (!strncmp(f, "--chown=", 8)) {
                        _cleanup_free_ char *v = NULL;
                        int r = ev_expand(ev, f + 8, &v);
                        if (r < 0)
                                return r;
                        bool ok = *v && strlen(v) < 64;
                        for (const char *c = v; ok && *c; c++)
                                ok = isdigit((unsigned char) *c) || *c == ':';
                        if (!ok)
                                return UNSUPPORTED(ev->e, in->line, in->col,
                                                   "%s --chown=%.40s: only numeric uid[:gid] is "
                                                   "supported",
                                                   in->keyword, v);
                        op->chown = TAKE_PTR(v);
                } else if (!strcmp(f, "--link") || !strcmp(f, "--link=true"))
                        ; /* every layer is independent here anyway */
                else if (!strncmp(f, "--from=", 7))
                        return UNSUPPORTED(ev->e, in->line, in->col,
                                           "%s --from: multi-stage builds are not supported",
                                           in->keyword);
                else
                        return UNSUPPORTED(ev->e, in->line, in->col, "%s %.40s is not supported",
                                           in->keyword, f);
        }
        _cleanup_(strv_free_p) char **w = NULL;
        size_t nw = 0;
        int r;
        if (in->json) {
                if (!(w = strv_copy(in->argv, in->n_argv)))
                        return oom(ev->e);
                nw = in->n_argv;
        } else if ((r = ev_words(ev, in->args, &w, &nw)) < 0)
                return r;
        if (nw < 2)
                return EV_INVALID(ev, "%s wants a source and a destination", in->keyword);
        if (in->json) {
                if (!(op->dest = strdup(w[nw - 1])))
                        return oom(ev->e);
        } else if ((r = ev_expand(ev, w[nw - 1], &op->dest)) < 0)
                return r;
        if (!*op->dest)
                return EV_INVALID(ev, "%s: empty destination", in->keyword);
        if (!(op->srcs = calloc(nw - 1, sizeof(*op->srcs))))
                return oom(ev->e);
        for (size_t i = 0; i + 1 < nw; i++) {
                struct df_copy_src *src = &op->srcs[op->n_srcs++];
                /* a heredoc: "<<EOF" names one of the instruction's */
                const char *hw = w[i];
                if (!in->json && hw[0] == '<' && hw[1] == '<') {
                        hw += 2 + (hw[2] == '-');
                        size_t hl = strlen(hw);
                        if (hl >= 2 && (hw[0] == '\'' || hw[0] == '"') && hw[hl - 1] == hw[0])
                                hw++, hl -= 2;
                        const struct df_heredoc *h = NULL;
                        for (size_t k = 0; k < in->n_heredocs; k++)
                                if (strlen(in->heredocs[k].word) == hl &&
                                    !strncmp(in->heredocs[k].word, hw, hl))
                                        h = &in->heredocs[k];
                        if (h) {
                                if (!(src->data = strdup(h->body)) ||
                                    !(src->name = strdup(h->word)))
                                        return oom(ev->e);
                                src->len = strlen(h->body);
                                continue;
                        }
                }
                _cleanup_free_ char *p = NULL;
                if (in->json) {
                        if (!(p = strdup(w[i])))
                                return oom(ev->e);
                } else if ((r = ev_expand(ev, w[i], &p)) < 0)
                        return r;
                if (is_remote(p))
                        return UNSUPPORTED(ev->e, in->line, in->col,
                                           "%s %.100s: remote sources are not supported (download "
                                           "it in a RUN step and check its digest there)",
                                           in->keyword, p);
                if ((r = df_context_path(p, &src->path)) < 0)
                        return r == -ENOMEM ? oom(ev->e)
                                            : EV_INVALID(ev,
                                                         "%s source \"%.100s\" is outside the "
                                                         "build context",
                                                         in->keyword, p);
        }
        return 0;
}

static int ev_one(struct ev *ev, bool allow_from, struct df_plan *plan) {
        const struct df_instr *in = ev->in;
        struct df_state *st = ev->st;
        int r;
        if (in->cmd == DF_VOLUME || in->cmd == DF_ONBUILD)
                return UNSUPPORTED(ev->e, in->line, in->col,
                                   "the Dockerfile instruction %s is not supported by this "
                                   "builder",
                                   in->keyword);
        if (in->cmd != DF_FROM && in->cmd != DF_ARG && allow_from && !st->seen_from)
                return EV_INVALID(ev, "%s before FROM (only ARG may come first)", in->keyword);
        if (in->n_flags && in->cmd != DF_COPY && in->cmd != DF_ADD && in->cmd != DF_HEALTHCHECK &&
            in->cmd != DF_FROM)
                return UNSUPPORTED(ev->e, in->line, in->col, "%s %.40s is not supported",
                                   in->keyword, in->flags[0]);
        if (in->cmd == DF_ARG)
                return ev_arg(ev);
        if (plan->n >= DF_INSTR_MAX)
                return EV_INVALID(ev, "more than %u instructions", DF_INSTR_MAX);
        struct df_op *nv = reallocarray(plan->ops, plan->n + 1, sizeof(*nv));
        if (!nv)
                return oom(ev->e);
        plan->ops = nv;
        struct df_op *op = &plan->ops[plan->n++];
        memset(op, 0, sizeof(*op));
        op->line = in->line;
        op->col = in->col;
        size_t tl = strlen(in->text);
        if (!(op->desc = strndup(in->text, MIN(tl, (size_t) 300))))
                return oom(ev->e);
        if (tl > 300)
                strcpy(op->desc + 296, "...");
        for (char *c = op->desc; *c; c++)
                if (*c == '\t' || *c == '\r')
                        *c = ' ';
        size_t n = 0;
        if (in->cmd != DF_HEALTHCHECK && in->cmd != DF_MAINTAINER && !in->args[0] &&
            !(in->json && in->n_argv == 0 && (in->cmd == DF_CMD || in->cmd == DF_ENTRYPOINT)))
                return EV_INVALID(ev, "%s without arguments", in->keyword);
        switch (in->cmd) {
        case DF_FROM: {
                if (!allow_from)
                        return EV_INVALID(ev, "FROM is only allowed as the Dockerfile's first "
                                              "instruction (use Image.from_dockerfile)");
                if (st->seen_from)
                        return UNSUPPORTED(ev->e, in->line, in->col,
                                           "multi-stage builds (a second FROM) are not supported");
                for (size_t i = 0; i < in->n_flags; i++)
                        if (strcmp(in->flags[i], "--platform=linux/amd64") &&
                            strcmp(in->flags[i], "--platform=$BUILDPLATFORM") &&
                            strcmp(in->flags[i], "--platform=$TARGETPLATFORM"))
                                return UNSUPPORTED(ev->e, in->line, in->col,
                                                   "FROM %.60s: only linux/amd64 is built here",
                                                   in->flags[i]);
                _cleanup_(strv_free_p) char **w = NULL;
                size_t nw = 0;
                if ((r = ev_words(ev, in->args, &w, &nw)) < 0)
                        return r;
                if (nw != 1 && !(nw == 3 && !strcasecmp(w[1], "AS")))
                        return EV_INVALID(ev, "FROM wants an image (FROM image [AS name])");
                op->kind = DF_OP_FROM;
                if ((r = ev_expand(ev, w[0], &op->value)) < 0)
                        return r;
                if (!*op->value)
                        return EV_INVALID(ev, "FROM: the image reference is empty");
                st->seen_from = true;
                /* the base's Env is visible to substitution from here on */
                for (size_t i = 0; st->base_env && st->base_env[i]; i++)
                        if (strchr(st->base_env[i], '=') &&
                            (r = df_state_env_set(st, st->base_env[i])) < 0)
                                return r == -ENOMEM ? oom(ev->e)
                                                    : EV_INVALID(ev, "more than %u variables",
                                                                 DF_VARS_MAX);
                return 0;
        }
        case DF_RUN: {
                op->kind = DF_OP_RUN;
                if (in->json) {
                        if (in->n_argv == 0 || !in->argv[0][0])
                                return EV_INVALID(ev, "RUN [] wants a program");
                        if (!(op->argv = strv_copy(in->argv, in->n_argv)))
                                return oom(ev->e);
                } else if (in->n_heredocs) {
                        /* "RUN <<EOF": the heredoc is the script; other text:
                         * the whole thing goes to the shell, which reads its
                         * heredocs itself */
                        const char *a = in->args;
                        bool only = in->n_heredocs == 1 && a[0] == '<' && a[1] == '<' &&
                                    !strpbrk(a, " \t");
                        struct buf b = {.max = DF_TEXT_MAX + DF_LINE_MAX * 4};
                        if (only)
                                r = buf_add(&b, in->heredocs[0].body, strlen(in->heredocs[0].body));
                        else {
                                r = buf_add(&b, a, strlen(a));
                                for (size_t k = 0; r >= 0 && k < in->n_heredocs; k++)
                                        if ((r = buf_addc(&b, '\n')) >= 0 &&
                                            (r = buf_add(&b, in->heredocs[k].body,
                                                         strlen(in->heredocs[k].body))) >= 0)
                                                r = buf_add(&b, in->heredocs[k].word,
                                                            strlen(in->heredocs[k].word));
                        }
                        char *script = r >= 0 ? buf_take(&b) : NULL;
                        if (!script) {
                                free(b.p);
                                return oom(ev->e);
                        }
                        r = shell_argv(ev, script, &op->argv);
                        free(script);
                        if (r < 0)
                                return r;
                } else if ((r = shell_argv(ev, in->args, &op->argv)) < 0)
                        return r;
                /* ARG values are the RUN's environment (not the image's) */
                size_t ne = 0;
                for (size_t i = 0; i < st->n_args; i++) {
                        size_t nl = strcspn(st->args[i], "=");
                        if (kv_find(st->env, st->args[i], nl, NULL))
                                continue;
                        const char *v = lookup(st, st->args[i], nl);
                        if (!v)
                                continue;
                        char *name = strndup(st->args[i], nl);
                        char *kv = name ? kv_join(name, v) : NULL;
                        free(name);
                        if (strv_push(&op->env, &ne, kv) < 0)
                                return oom(ev->e);
                }
                return 0;
        }
        case DF_CMD:
        case DF_ENTRYPOINT:
                op->kind = in->cmd == DF_CMD ? DF_OP_CMD : DF_OP_ENTRYPOINT;
                if (in->json) {
                        if (!(op->argv = strv_copy(in->argv, in->n_argv)))
                                return oom(ev->e);
                        return 0;
                }
                return shell_argv(ev, in->args, &op->argv);
        case DF_SHELL:
                op->kind = DF_OP_SHELL;
                if (!in->json || in->n_argv == 0)
                        return EV_INVALID(ev, "SHELL wants a JSON array (SHELL [\"/bin/bash\", "
                                              "\"-c\"])");
                if (!(op->argv = strv_copy(in->argv, in->n_argv)))
                        return oom(ev->e);
                strv_free_(st->shell);
                if (!(st->shell = strv_copy(in->argv, in->n_argv)))
                        return oom(ev->e);
                st->n_shell = in->n_argv;
                return 0;
        case DF_ENV:
                op->kind = DF_OP_ENV;
                if ((r = ev_pairs(ev, true, &op->env, &n)) < 0)
                        return r;
                for (size_t i = 0; i < n; i++)
                        if ((r = kv_set(&st->env, &st->n_env, strdup(op->env[i]))) < 0)
                                return r == -ENOMEM ? oom(ev->e)
                                                    : EV_INVALID(ev, "more than %u variables",
                                                                 DF_VARS_MAX);
                return 0;
        case DF_LABEL:
                op->kind = DF_OP_LABEL;
                return ev_pairs(ev, false, &op->env, &n);
        case DF_MAINTAINER: {
                op->kind = DF_OP_LABEL;
                char *kv = kv_join("maintainer", in->args);
                return strv_push(&op->env, &n, kv) < 0 ? oom(ev->e) : 0;
        }
        case DF_WORKDIR:
        case DF_USER:
        case DF_STOPSIGNAL:
                op->kind = in->cmd == DF_WORKDIR ? DF_OP_WORKDIR
                           : in->cmd == DF_USER  ? DF_OP_USER
                                                 : DF_OP_STOPSIGNAL;
                if ((r = ev_expand(ev, in->args, &op->value)) < 0)
                        return r;
                if (!*op->value)
                        return EV_INVALID(ev, "%s: empty after substitution", in->keyword);
                return 0;
        case DF_EXPOSE:
                op->kind = DF_OP_EXPOSE;
                return ev_expose(ev, op);
        case DF_HEALTHCHECK:
                op->kind = DF_OP_HEALTHCHECK;
                return ev_healthcheck(ev, op);
        case DF_COPY:
        case DF_ADD:
                op->kind = DF_OP_COPY;
                return ev_copy(ev, op);
        default:
                return EV_INVALID(ev, "%s is not handled", in->keyword);
        }
}

int df_eval(const struct df_file *f, struct df_state *st, bool allow_from, struct df_plan *plan,
            struct wr_err *e) {
        for (size_t i = 0; i < f->n; i++) {
                struct ev ev = {.in = &f->v[i], .st = st, .escape = f->escape, .e = e};
                int r = ev_one(&ev, allow_from, plan);
                if (r < 0)
                        return r;
        }
        return 0;
}
