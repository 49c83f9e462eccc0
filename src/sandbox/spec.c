/* SPDX-License-Identifier: Apache-2.0 */
/* The sandbox spec (what a sandbox should be, in plain C), environment
 * vectors, and the pure checks on names and durations. No I/O here: the
 * unit tests (tests/unit/test-sandbox.c) run all of it. */
#include "sandbox/sandbox-internal.h"
#include "sandbox/ssh.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "basic/macro.h"

/* --- environment vectors --- */

void sbx_env_free(char **env) {
        if (!env)
                return;
        for (char **p = env; *p; p++)
                erase_and_free(*p);
        free(env);
}

char **sbx_env_dup(char *const *env) {
        size_t n = 0;
        while (env && env[n])
                n++;
        char **r = calloc(n + 1, sizeof(char *));
        if (!r)
                return NULL;
        for (size_t i = 0; i < n; i++)
                if (!(r[i] = strdup(env[i]))) {
                        sbx_env_free(r);
                        return NULL;
                }
        return r;
}

int sbx_env_set(char ***env, const char *kv) {
        const char *eq = strchr(kv, '=');
        if (!eq || eq == kv)
                return -EINVAL;
        size_t klen = (size_t) (eq - kv) + 1, n = 0;
        char *copy = strdup(kv);
        if (!copy)
                return -ENOMEM;
        for (char **p = *env; p && *p; p++, n++)
                if (strncmp(*p, kv, klen) == 0) {
                        erase_and_free(*p);
                        *p = copy;
                        return 0;
                }
        char **r = realloc(*env, (n + 2) * sizeof(char *));
        if (!r) {
                erase_and_free(copy);
                return -ENOMEM;
        }
        r[n] = copy;
        r[n + 1] = NULL;
        *env = r;
        return 0;
}

int sbx_env_set2(char ***env, const char *k, const char *v) {
        if (!*k)
                return -EINVAL;
        size_t n = strlen(k) + strlen(v) + 2;
        _cleanup_erase_free_ char *kv = malloc(n);
        if (!kv)
                return -ENOMEM;
        snprintf(kv, n, "%s=%s", k, v);
        return sbx_env_set(env, kv);
}

const char *sbx_env_find(char *const *env, const char *name) {
        size_t n = strlen(name);
        for (; env && *env; env++)
                if (strncmp(*env, name, n) == 0 && (*env)[n] == '=')
                        return *env + n + 1;
        return NULL;
}

void sbx_argv_free(char **v) {
        for (size_t i = 0; v && v[i]; i++)
                free(v[i]);
        free(v);
}

char **sbx_argv_dup(const char *const *v, size_t n) {
        if (!v)
                return NULL;
        if (n == 0)
                while (v[n])
                        n++;
        char **r = calloc(n + 1, sizeof(char *));
        for (size_t i = 0; r && i < n; i++)
                if (!(r[i] = strdup(v[i]))) {
                        sbx_argv_free(r);
                        return NULL;
                }
        return r;
}

/* --- names and durations --- */

bool sbx_name_valid(const char *s) {
        size_t n = strlen(s);
        if (n == 0 || n > 63)
                return false;
        if (!((s[0] >= 'a' && s[0] <= 'z') || (s[0] >= '0' && s[0] <= '9')))
                return false;
        for (size_t i = 1; i < n; i++) {
                char c = s[i];
                if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '_' ||
                      c == '.'))
                        return false;
        }
        return true;
}

bool sbx_env_name_valid(const char *s) {
        if (!*s || (*s >= '0' && *s <= '9'))
                return false;
        for (; *s; s++)
                if (!((*s >= 'A' && *s <= 'Z') || (*s >= 'a' && *s <= 'z') ||
                      (*s >= '0' && *s <= '9') || *s == '_' || *s == '.' || *s == '-'))
                        return false;
        return true;
}

bool sbx_hostname_valid(const char *s) {
        size_t n = strlen(s);
        if (n == 0 || n > 64)
                return false;
        for (size_t i = 0; i < n; i++)
                if (s[i] <= ' ' || s[i] > '~' || s[i] == '/')
                        return false;
        return true;
}

int sbx_duration_parse(const char *s, int64_t *ret) {
        char *end;
        errno = 0;
        double v = strtod(s, &end);
        if (errno || end == s || !(v > 0))
                return -EINVAL;
        double mul;
        if (*end == 0 || strcmp(end, "s") == 0)
                mul = 1e9;
        else if (strcmp(end, "ms") == 0)
                mul = 1e6;
        else if (strcmp(end, "m") == 0)
                mul = 60e9;
        else if (strcmp(end, "h") == 0)
                mul = 3600e9;
        else if (strcmp(end, "d") == 0)
                mul = 86400e9;
        else
                return -EINVAL;
        double ns = v * mul;
        if (ns > 9e18)
                return -ERANGE;
        *ret = (int64_t) ns;
        return 0;
}

/* --- the spec --- */

int sbx_spec_new(struct sbx_spec **ret) {
        struct sbx_spec *s = calloc(1, sizeof(*s));
        if (!s)
                return -ENOMEM;
        *ret = s;
        return 0;
}

void sbx_spec_free(struct sbx_spec *s) {
        if (!s)
                return;
        free(s->image_ref);
        free(s->environment);
        free(s->name);
        free(s->hostname);
        free(s->workdir);
        sbx_argv_free(s->entrypoint);
        sbx_env_free(s->env);
        for (size_t i = 0; i < s->n_tags; i++) {
                free(s->tags[i].key);
                free(s->tags[i].value);
        }
        free(s->tags);
        for (size_t i = 0; i < s->n_mounts; i++) {
                struct rt_mount *mt = &s->mounts[i];
                free((char *) mt->target);
                free((char *) mt->source);
                erase_and_free_n((void *) mt->data, mt->len);
        }
        free(s->mounts);
        for (size_t i = 0; i < s->n_ssh; i++)
                sbx_ssh_dest_clear(&s->ssh[i]);
        free(s->ssh);
        free(s->record);
        free(s->net_policy);
        erase_and_free_n(s->net_rules, s->net_rules_len);
        free(s);
}

#define INVALID(e, ...)                                                                            \
        err_setx(e, -EINVAL, WR_STATUS_INVALID_ARGUMENT, WR_FAULT_CLIENT, __VA_ARGS__)

int sbx_spec_check(const struct sbx_spec *s, struct wr_err *e) {
        if (s->name && !sbx_name_valid(s->name))
                return INVALID(e,
                               "name: \"%.80s\" is not a valid sandbox name (lower-case letters, "
                               "digits, '-', '_' or '.', starting with a letter or digit, at most "
                               "63); leave it empty for an unnamed sandbox",
                               s->name);
        if (s->hostname && !sbx_hostname_valid(s->hostname))
                return INVALID(e,
                               "hostname: \"%.80s\" is not valid: use 1-64 printable characters "
                               "without spaces or '/'",
                               s->hostname);
        if (s->workdir && s->workdir[0] != '/')
                return INVALID(e, "workdir: \"%.80s\" is relative; give an absolute path",
                               s->workdir);
        if (s->image_ref && !*s->image_ref)
                return INVALID(e, "image: the reference is empty; name an image or leave it unset");
        for (char **p = s->env; p && *p; p++) {
                const char *eq = strchr(*p, '=');
                char name[128];
                size_t n = eq ? (size_t) (eq - *p) : strlen(*p);
                snprintf(name, sizeof(name), "%.*s", (int) MIN(n, sizeof(name) - 1), *p);
                if (!eq || n >= sizeof(name) || !sbx_env_name_valid(name))
                        return INVALID(e,
                                       "env: %.80s is not a valid variable name (letters, digits, "
                                       "'_', '.', '-', not starting with a digit)",
                                       name);
        }
        for (size_t i = 0; i < s->n_tags; i++)
                if (!s->tags[i].key || !*s->tags[i].key)
                        return INVALID(e, "tags: a tag has an empty key; give every tag a key");
        if (s->lifetime_ns < 0)
                return INVALID(e, "lifetime: negative; use a duration like \"3600s\" or \"2h\"");
        for (size_t i = 0; i < s->n_mounts; i++)
                if (s->mounts[i].source_fd > 0)
                        return INVALID(e,
                                       "mounts: entry %zu passes an fd; a spec names sources by "
                                       "path",
                                       i);
        return s->n_mounts ? rt_mounts_check(s->mounts, s->n_mounts, e) : 0;
}

int sbx_spec_mount_add(struct sbx_spec *s, const struct rt_mount *m) {
        if (s->n_mounts >= RT_MOUNTS_MAX)
                return -E2BIG;
        struct rt_mount *v = reallocarray(s->mounts, s->n_mounts + 1, sizeof(*v));
        if (!v)
                return -ENOMEM;
        s->mounts = v;
        struct rt_mount c = *m;
        c.source_fd = -1;
        c.target = m->target ? strdup(m->target) : NULL;
        c.source = m->source ? strdup(m->source) : NULL;
        c.data = NULL;
        if (m->len) {
                void *d = malloc(m->len);
                if (d)
                        memcpy(d, m->data, m->len);
                c.data = d;
        }
        if ((m->target && !c.target) || (m->source && !c.source) || (m->len && !c.data)) {
                free((char *) c.target);
                free((char *) c.source);
                free((void *) c.data);
                return -ENOMEM;
        }
        s->mounts[s->n_mounts++] = c;
        return 0;
}
