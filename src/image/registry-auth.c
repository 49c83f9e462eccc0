/* SPDX-License-Identifier: Apache-2.0 */
/* Registry authentication (see registry-internal.h): the WWW-Authenticate
 * parser, how a 401 is answered, the token server's response and the
 * token cache. Decisions only: the requests themselves are registry.c's. */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <curl/curl.h>

#include "image/json-internal.h"
#include "image/ref.h"
#include "image/registry-internal.h"

/* --- the challenge parser (pure) --- */

int img_reg_challenge_parse(const char *value, struct img_reg_challenge *ret) {
        memset(ret, 0, sizeof(*ret));
        const char *p = value;
        while (*p == ' ' || *p == '\t')
                p++;
        size_t sl = strcspn(p, " \t");
        if (sl == 0 || sl >= sizeof(ret->scheme))
                return -EINVAL;
        for (size_t i = 0; i < sl; i++)
                ret->scheme[i] = (char) tolower((unsigned char) p[i]);
        if (strcmp(ret->scheme, "bearer") && strcmp(ret->scheme, "basic"))
                return -EINVAL;
        p += sl;
        for (;;) {
                while (*p == ' ' || *p == '\t' || *p == ',')
                        p++;
                if (!*p)
                        break;
                const char *k = p;
                while (*p && *p != '=' && *p != ',' && *p != ' ')
                        p++;
                size_t kl = (size_t) (p - k);
                if (*p != '=' || kl == 0)
                        return -EINVAL;
                p++;
                char val[1024];
                size_t vl = 0;
                if (*p == '"') {
                        p++;
                        while (*p && *p != '"') {
                                if (*p == '\\' && p[1])
                                        p++;
                                if (vl + 1 >= sizeof(val))
                                        return -EINVAL;
                                val[vl++] = *p++;
                        }
                        if (*p != '"')
                                return -EINVAL;
                        p++;
                } else {
                        while (*p && *p != ',' && *p != ' ') {
                                if (vl + 1 >= sizeof(val))
                                        return -EINVAL;
                                val[vl++] = *p++;
                        }
                }
                val[vl] = '\0';
                char *dst = NULL;
                size_t dsz = 0;
                if (kl == 5 && !strncasecmp(k, "realm", 5))
                        dst = ret->realm, dsz = sizeof(ret->realm);
                else if (kl == 7 && !strncasecmp(k, "service", 7))
                        dst = ret->service, dsz = sizeof(ret->service);
                else if (kl == 5 && !strncasecmp(k, "scope", 5))
                        dst = ret->scope, dsz = sizeof(ret->scope);
                if (dst) {
                        if (vl >= dsz)
                                return -EINVAL;
                        memcpy(dst, val, vl + 1);
                }
        }
        if (!strcmp(ret->scheme, "bearer") && !ret->realm[0])
                return -EINVAL;
        return 0;
}

/* --- answering a 401 --- */

int img_reg_auth_basic_header(const struct img_reg_cred *cred, char *header, size_t headersz) {
        int n = snprintf(header, headersz, "Authorization: Basic %s", cred->basic);
        if (n < 0 || (size_t) n >= headersz) {
                explicit_bzero(header, headersz);
                return -ENOBUFS;
        }
        return 0;
}

static bool url_is_loopback(const char *url) {
        char host[300];
        img_reg_url_host(url, host, sizeof(host));
        return img_ref_domain_is_loopback(host);
}

int img_reg_auth_answer(const struct img_reg_auth_in *in, struct img_reg_auth_out *out,
                        struct wr_err *e) {
        memset(out, 0, sizeof(*out));
        struct img_reg_challenge ch;
        const struct img_reg_cred *cr = in->cred;
        if (in->answered || img_reg_challenge_parse(in->www_auth, &ch) < 0) {
                if (cr)
                        return err_setx(e, -EACCES, WR_STATUS_UNAUTHENTICATED, WR_FAULT_CLIENT,
                                        "registry %s refused the credentials from %s for %s; "
                                        "check them (docker login writes the same format)",
                                        in->domain, cr->source, in->what);
                return err_setx(e, -EACCES, WR_STATUS_UNAUTHENTICATED, WR_FAULT_CLIENT,
                                "pull access denied for %s: the repository does not exist or "
                                "needs authentication; add credentials for %s to a docker "
                                "config.json and start warrend with --docker-config FILE",
                                in->what, in->domain);
        }
        if (!strcmp(ch.scheme, "basic")) {
                if (!cr)
                        return err_setx(e, -EACCES, WR_STATUS_UNAUTHENTICATED, WR_FAULT_CLIENT,
                                        "registry %s needs a user name and password for %s; add "
                                        "them to a docker config.json and start warrend with "
                                        "--docker-config FILE",
                                        in->domain, in->what);
                out->step = IMG_REG_AUTH_RETRY;
                if (img_reg_auth_basic_header(cr, out->header, sizeof(out->header)) < 0)
                        return err_setx(e, -EACCES, WR_STATUS_UNAUTHENTICATED, WR_FAULT_CLIENT,
                                        "registry %s: the credentials from %s are too long",
                                        in->domain, cr->source);
                return 0;
        }
        if (strncmp(ch.realm, "http://", 7) && strncmp(ch.realm, "https://", 8))
                return err_setx(e, -EPROTO, WR_STATUS_UNAVAILABLE, WR_FAULT_SERVICE,
                                "registry %s: token realm \"%.200s\" is not an http(s) URL",
                                in->domain, ch.realm);
        if (in->loopback_only && !url_is_loopback(ch.realm))
                return err_setx(e, -EPERM, WR_STATUS_FAILED_PRECONDITION, WR_FAULT_SERVICE,
                                "registry %s: token realm \"%.200s\" is not on loopback "
                                "(--pull-loopback-only)",
                                in->domain, ch.realm);
        char scope[600];
        if (ch.scope[0])
                snprintf(scope, sizeof(scope), "%s", ch.scope);
        else
                snprintf(scope, sizeof(scope), "repository:%s:pull", in->path);
        char *es = curl_easy_escape(NULL, ch.service, 0);
        char *esc = curl_easy_escape(NULL, scope, 0);
        snprintf(out->url, sizeof(out->url), "%s%sservice=%s&scope=%s", ch.realm,
                 strchr(ch.realm, '?') ? "&" : "?", es ? es : "", esc ? esc : "");
        curl_free(es);
        curl_free(esc);
        out->step = IMG_REG_AUTH_TOKEN;
        return 0;
}

int img_reg_auth_token_parse(const char *body, size_t len, char *header, size_t headersz) {
        _cleanup_json_ json_t *j = json_loadb(body ? body : "", len, 0, NULL);
        const char *tok = json_string_value(json_object_get(j, "token"));
        if (!tok || !*tok)
                tok = json_string_value(json_object_get(j, "access_token"));
        size_t tl = tok ? strlen(tok) : 0;
        bool ok = tl > 0 && tl < headersz && tl < IMG_REG_AUTH_MAX - 40;
        for (const char *p = tok; ok && *p; p++)
                if (*p < 0x21 || *p > 0x7e)
                        ok = false;
        int r = -EPROTO;
        if (ok) {
                int n = snprintf(header, headersz, "Authorization: Bearer %s", tok);
                r = n > 0 && (size_t) n < headersz ? 0 : -EPROTO;
        }
        if (r < 0 && headersz)
                explicit_bzero(header, headersz);
        /* jansson frees its strings unwiped */
        img_json_string_wipe(json_object_get(j, "token"));
        img_json_string_wipe(json_object_get(j, "access_token"));
        img_json_string_wipe(json_object_get(j, "refresh_token"));
        return r;
}

/* --- the token cache --- */

struct img_reg_token {
        char *host;   /* endpoint base URL */
        char *path;   /* repository */
        char *header; /* "Authorization: Bearer ..." or "...: Basic ...": a secret */
        struct img_reg_token *next;
};

static void token_free(struct img_reg_token *t) {
        free(t->host);
        free(t->path);
        erase_and_free(t->header);
        free(t);
}

void img_reg_tokens_free(struct img_reg_token *list) {
        while (list) {
                struct img_reg_token *n = list->next;
                token_free(list);
                list = n;
        }
}

const char *img_reg_token_find(struct img_reg_token *list, const char *host, const char *path) {
        for (struct img_reg_token *t = list; t; t = t->next)
                if (!strcmp(t->host, host) && !strcmp(t->path, path))
                        return t->header;
        return NULL;
}

void img_reg_token_drop(struct img_reg_token **list, const char *host, const char *path) {
        for (struct img_reg_token **pp = list; *pp; pp = &(*pp)->next) {
                struct img_reg_token *t = *pp;
                if (!strcmp(t->host, host) && !strcmp(t->path, path)) {
                        *pp = t->next;
                        token_free(t);
                        return;
                }
        }
}

int img_reg_token_put(struct img_reg_token **list, const char *host, const char *path,
                      const char *header) {
        img_reg_token_drop(list, host, path);
        struct img_reg_token *t = calloc(1, sizeof(*t));
        if (!t)
                return -ENOMEM;
        t->host = strdup(host);
        t->path = strdup(path);
        t->header = strdup(header);
        if (!t->host || !t->path || !t->header) {
                token_free(t);
                return -ENOMEM;
        }
        t->next = *list;
        *list = t;
        return 0;
}
