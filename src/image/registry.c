/* SPDX-License-Identifier: Apache-2.0 */
/* OCI distribution client: libcurl multi driven by libuv (see registry.h).
 *
 * Integration: CURLMOPT_SOCKETFUNCTION keeps one uv_poll per socket curl
 * wants watched, CURLMOPT_TIMERFUNCTION arms one uv_timer; both call
 * curl_multi_socket_action and then drain curl_multi_info_read, where
 * finished transfers are handled. User callbacks run only from there
 * (never inside curl's own callbacks), so they may add or remove handles. */
#include "image/registry.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <curl/curl.h>
#include <jansson.h>
#include <openssl/evp.h>

#define MAX_ENDPOINTS 9
#define MAX_ATTEMPTS 4 /* first try + 3 retries per endpoint */
#define DEFAULT_MAX_BODY (4u << 20)
#define ERR_BODY_MAX 2048

struct host_cfg {
        char *domain;
        char **mirrors; /* base URLs, no trailing slash */
        size_t n_mirrors;
        int insecure; /* -1 unset, 0 https, 1 http */
        struct host_cfg *next;
};

struct cred {
        char *host;   /* "127.0.0.1:5000", "docker.io" */
        char *basic;  /* base64("user:pass") */
        char *source; /* file, for messages */
        struct cred *next;
};

struct token {
        char *host;   /* endpoint base URL */
        char *path;   /* repository */
        char *header; /* "Authorization: Bearer ..." or "...: Basic ..." */
        struct token *next;
};

struct img_registry {
        uv_loop_t *loop;
        CURLM *multi;
        uv_timer_t *timer;
        struct host_cfg *hosts;
        struct cred *creds;
        struct token *tokens;
        struct img_reg_req *reqs;
        char docker_config[512];
        char registry_config[512];
        bool loopback_only; /* no endpoint, redirect or token realm off loopback */
};

struct sock_ctx {
        uv_poll_t poll;
        curl_socket_t fd;
        struct img_registry *reg;
};

enum phase {
        PHASE_MAIN = 0,
        PHASE_TOKEN = 1,
};

struct endpoint {
        char base[320];
        char host[300]; /* host[:port] of base */
        bool mirror;
};

struct img_reg_req {
        struct img_registry *reg;
        struct img_reg_req *prev, *next;
        struct img_ref ref;
        char kind[16];
        char object[200];
        char accept[512];
        char expect[72];
        int fd;
        size_t max_body;
        uint64_t max_size;
        bool retry;
        img_reg_done_fn done;
        void *userdata;

        struct endpoint eps[MAX_ENDPOINTS];
        size_t n_eps, ep;
        int attempts;
        enum phase phase;

        CURL *easy;
        struct curl_slist *hdrs;
        char errbuf[CURL_ERROR_SIZE];
        char url[2048];

        /* the response being read */
        bool status_checked;
        bool to_body; /* this response's body is the payload */
        bool range_sent;
        char content_type[128];
        char www_auth[2048];
        char errbody[ERR_BODY_MAX + 1];
        size_t errbody_len;

        /* the payload */
        char *body;
        size_t body_len, body_cap;
        uint64_t received;
        EVP_MD_CTX *md;
        char digest[72];
        int write_errno;
        bool too_big;

        /* auth */
        char auth[4096]; /* header line or "" */
        bool auth_answered;
        char *token_body;
        size_t token_len;
};

/* --- small helpers --- */

static int oom(struct wr_err *e) {
        return err_set(e, -ENOMEM, "out of memory");
}

static bool lower_eq_prefix(const char *s, size_t n, const char *prefix) {
        size_t pl = strlen(prefix);
        return n >= pl && strncasecmp(s, prefix, pl) == 0;
}

static void trim_crlf(char *s) {
        size_t n = strlen(s);
        while (n > 0 && (s[n - 1] == '\r' || s[n - 1] == '\n' || s[n - 1] == ' '))
                s[--n] = '\0';
}

/* "http://host:5000/v1/" → "host:5000". */
static void url_host(const char *url, char *out, size_t outsz) {
        const char *p = strstr(url, "://");
        p = p ? p + 3 : url;
        size_t n = strcspn(p, "/");
        snprintf(out, outsz, "%.*s", (int) n, p);
}

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

/* --- configuration --- */

static void hosts_free(struct host_cfg *h) {
        while (h) {
                struct host_cfg *n = h->next;
                for (size_t i = 0; i < h->n_mirrors; i++)
                        free(h->mirrors[i]);
                free(h->mirrors);
                free(h->domain);
                free(h);
                h = n;
        }
}

static void creds_free(struct cred *c) {
        while (c) {
                struct cred *n = c->next;
                free(c->host);
                free(c->basic);
                free(c->source);
                free(c);
                c = n;
        }
}

static void tokens_free(struct token *t) {
        while (t) {
                struct token *n = t->next;
                free(t->host);
                free(t->path);
                free(t->header);
                free(t);
                t = n;
        }
}

static int load_registry_config(struct img_registry *reg, const char *path, struct wr_err *e) {
        json_error_t je;
        json_t *root = json_load_file(path, 0, &je);
        if (!root) {
                if (access(path, R_OK) < 0)
                        return err_set(e, -errno, "--registry-config %s: %m", path);
                return err_set(e, -EINVAL, "--registry-config %s:%d: %s", path, je.line, je.text);
        }
        int r = 0;
        json_t *regs = json_object_get(root, "registries");
        if (!json_is_object(root) || (regs && !json_is_object(regs))) {
                r = err_set(e, -EINVAL,
                            "--registry-config %s: expected {\"registries\": {\"HOST\": "
                            "{\"mirrors\": [URL...], \"insecure\": BOOL}}}",
                            path);
                goto out;
        }
        const char *domain;
        json_t *v;
        json_object_foreach(regs, domain, v) {
                json_t *mirrors = json_object_get(v, "mirrors");
                json_t *insecure = json_object_get(v, "insecure");
                if (!json_is_object(v) || (mirrors && !json_is_array(mirrors)) ||
                    (insecure && !json_is_boolean(insecure))) {
                        r = err_set(e, -EINVAL,
                                    "--registry-config %s: registries.\"%.100s\": expected "
                                    "{\"mirrors\": [URL...], \"insecure\": true|false}",
                                    path, domain);
                        goto out;
                }
                struct host_cfg *h = calloc(1, sizeof(*h));
                if (!h || !(h->domain = strdup(domain))) {
                        free(h);
                        r = oom(e);
                        goto out;
                }
                h->insecure = insecure ? json_is_true(insecure) : -1;
                h->next = reg->hosts;
                reg->hosts = h;
                size_t n = json_array_size(mirrors);
                if (n > MAX_ENDPOINTS - 1) {
                        r = err_set(e, -EINVAL,
                                    "--registry-config %s: \"%.100s\": at most %d mirrors", path,
                                    domain, MAX_ENDPOINTS - 1);
                        goto out;
                }
                h->mirrors = calloc(n + 1, sizeof(char *));
                if (!h->mirrors) {
                        r = oom(e);
                        goto out;
                }
                for (size_t i = 0; i < n; i++) {
                        const char *m = json_string_value(json_array_get(mirrors, i));
                        if (!m || (strncmp(m, "http://", 7) && strncmp(m, "https://", 8)) ||
                            strlen(m) > 300 || strpbrk(m, " \r\n\t")) {
                                r = err_set(e, -EINVAL,
                                            "--registry-config %s: \"%.100s\" mirror %zu: want an "
                                            "http:// or https:// URL",
                                            path, domain, i);
                                goto out;
                        }
                        h->mirrors[i] = strdup(m);
                        if (!h->mirrors[i]) {
                                r = oom(e);
                                goto out;
                        }
                        size_t ml = strlen(h->mirrors[i]);
                        while (ml > 0 && h->mirrors[i][ml - 1] == '/')
                                h->mirrors[i][--ml] = '\0';
                        /* a mirror URL may end in /v2 like Docker's */
                        if (ml >= 3 && !strcmp(h->mirrors[i] + ml - 3, "/v2"))
                                h->mirrors[i][ml - 3] = '\0';
                        h->n_mirrors++;
                }
        }
out:
        json_decref(root);
        return r;
}

static int add_cred(struct img_registry *reg, const char *host, const char *basic,
                    const char *source) {
        struct cred *c = calloc(1, sizeof(*c));
        if (!c)
                return -ENOMEM;
        c->host = strdup(host);
        c->basic = strdup(basic);
        c->source = strdup(source);
        c->next = reg->creds;
        reg->creds = c;
        return c->host && c->basic && c->source ? 0 : -ENOMEM;
}

static int load_docker_config(struct img_registry *reg, const char *path, struct wr_err *e) {
        json_error_t je;
        json_t *root = json_load_file(path, 0, &je);
        if (!root) {
                if (access(path, R_OK) < 0)
                        return err_set(e, -errno, "--docker-config %s: %m", path);
                return err_set(e, -EINVAL, "--docker-config %s:%d: %s", path, je.line, je.text);
        }
        int r = 0;
        json_t *auths = json_object_get(root, "auths");
        if (!json_is_object(root) || (auths && !json_is_object(auths))) {
                r = err_set(e, -EINVAL, "--docker-config %s: expected {\"auths\": {...}}", path);
                goto out;
        }
        const char *key;
        json_t *v;
        json_object_foreach(auths, key, v) {
                const char *auth = json_string_value(json_object_get(v, "auth"));
                const char *user = json_string_value(json_object_get(v, "username"));
                const char *pass = json_string_value(json_object_get(v, "password"));
                char b64[1400];
                if (auth && *auth) {
                        size_t al = strlen(auth);
                        unsigned char dec[1100];
                        int dl = al < 1400 ? EVP_DecodeBlock(dec, (const unsigned char *) auth,
                                                             (int) al)
                                           : -1;
                        if (dl <= 0 || !memchr(dec, ':', (size_t) dl)) {
                                r = err_set(e, -EINVAL,
                                            "--docker-config %s: auths.\"%.100s\".auth: want "
                                            "base64 of \"user:password\"",
                                            path, key);
                                goto out;
                        }
                        snprintf(b64, sizeof(b64), "%s", auth);
                } else if (user && pass) {
                        char up[1024];
                        int n = snprintf(up, sizeof(up), "%s:%s", user, pass);
                        if (n < 0 || (size_t) n >= sizeof(up)) {
                                r = err_set(e, -EINVAL, "--docker-config %s: credentials too long",
                                            path);
                                goto out;
                        }
                        EVP_EncodeBlock((unsigned char *) b64, (const unsigned char *) up, n);
                } else {
                        continue; /* identity tokens, helpers: not supported */
                }
                char host[300];
                url_host(key, host, sizeof(host));
                if (!strcmp(host, "index.docker.io") || !strcmp(host, "registry-1.docker.io"))
                        snprintf(host, sizeof(host), "docker.io");
                if (add_cred(reg, host, b64, path) < 0) {
                        r = oom(e);
                        goto out;
                }
        }
out:
        json_decref(root);
        return r;
}

static const struct host_cfg *host_cfg(struct img_registry *reg, const char *domain) {
        for (struct host_cfg *h = reg->hosts; h; h = h->next)
                if (!strcmp(h->domain, domain))
                        return h;
        return NULL;
}

/* Credentials for an endpoint host ("127.0.0.1:5000", "registry-1.docker.io"). */
static const struct cred *cred_for(struct img_registry *reg, const char *host) {
        const char *h = host;
        if (!strcmp(h, "registry-1.docker.io") || !strcmp(h, "index.docker.io"))
                h = "docker.io";
        for (struct cred *c = reg->creds; c; c = c->next)
                if (!strcmp(c->host, h))
                        return c;
        return NULL;
}

static const char *token_for(struct img_registry *reg, const char *host, const char *path) {
        for (struct token *t = reg->tokens; t; t = t->next)
                if (!strcmp(t->host, host) && !strcmp(t->path, path))
                        return t->header;
        return NULL;
}

static void token_drop(struct img_registry *reg, const char *host, const char *path) {
        for (struct token **pp = &reg->tokens; *pp; pp = &(*pp)->next) {
                struct token *t = *pp;
                if (!strcmp(t->host, host) && !strcmp(t->path, path)) {
                        *pp = t->next;
                        t->next = NULL;
                        tokens_free(t);
                        return;
                }
        }
}

static void token_put(struct img_registry *reg, const char *host, const char *path,
                      const char *header) {
        token_drop(reg, host, path);
        struct token *t = calloc(1, sizeof(*t));
        if (!t)
                return;
        t->host = strdup(host);
        t->path = strdup(path);
        t->header = strdup(header);
        if (!t->host || !t->path || !t->header) {
                tokens_free(t);
                return;
        }
        t->next = reg->tokens;
        reg->tokens = t;
}

/* --- libuv/curl glue --- */

static void check_multi_info(struct img_registry *reg);

static void on_poll_close(uv_handle_t *h) {
        free(h->data);
}

static void on_poll(uv_poll_t *p, int status, int events) {
        struct sock_ctx *c = p->data;
        struct img_registry *reg = c->reg;
        int flags = 0;
        if (status < 0)
                flags = CURL_CSELECT_ERR;
        else {
                if (events & UV_READABLE)
                        flags |= CURL_CSELECT_IN;
                if (events & UV_WRITABLE)
                        flags |= CURL_CSELECT_OUT;
        }
        int running = 0;
        curl_multi_socket_action(reg->multi, c->fd, flags, &running);
        check_multi_info(reg);
}

static int socket_cb(CURL *easy, curl_socket_t s, int action, void *userp, void *socketp) {
        struct img_registry *reg = userp;
        struct sock_ctx *c = socketp;
        if (action == CURL_POLL_REMOVE) {
                if (c) {
                        uv_poll_stop(&c->poll);
                        uv_close((uv_handle_t *) &c->poll, on_poll_close);
                        curl_multi_assign(reg->multi, s, NULL);
                }
                return 0;
        }
        if (!c) {
                c = calloc(1, sizeof(*c));
                if (!c)
                        return -1;
                c->fd = s;
                c->reg = reg;
                if (uv_poll_init_socket(reg->loop, &c->poll, s) < 0) {
                        free(c);
                        return -1;
                }
                c->poll.data = c;
                curl_multi_assign(reg->multi, s, c);
        }
        int ev = 0;
        if (action == CURL_POLL_IN || action == CURL_POLL_INOUT)
                ev |= UV_READABLE;
        if (action == CURL_POLL_OUT || action == CURL_POLL_INOUT)
                ev |= UV_WRITABLE;
        uv_poll_start(&c->poll, ev, on_poll);
        return 0;
}

static void on_timeout(uv_timer_t *t) {
        struct img_registry *reg = t->data;
        int running = 0;
        curl_multi_socket_action(reg->multi, CURL_SOCKET_TIMEOUT, 0, &running);
        check_multi_info(reg);
}

static int timer_cb(CURLM *multi, long timeout_ms, void *userp) {
        struct img_registry *reg = userp;
        if (timeout_ms < 0)
                uv_timer_stop(reg->timer);
        else
                uv_timer_start(reg->timer, on_timeout, (uint64_t) timeout_ms, 0);
        return 0;
}

static void on_timer_close(uv_handle_t *h) {
        free(h);
}

int img_registry_new(uv_loop_t *loop, const char *registry_config, const char *docker_config,
                     struct img_registry **ret, struct wr_err *e) {
        static bool curl_ready;
        if (!curl_ready) {
                if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK)
                        return err_set(e, -EIO, "libcurl initialisation failed");
                curl_ready = true;
        }
        struct img_registry *reg = calloc(1, sizeof(*reg));
        if (!reg)
                return oom(e);
        reg->loop = loop;
        int r = 0;
        if (registry_config && *registry_config) {
                snprintf(reg->registry_config, sizeof(reg->registry_config), "%s", registry_config);
                r = load_registry_config(reg, registry_config, e);
        }
        if (r >= 0 && docker_config && *docker_config) {
                snprintf(reg->docker_config, sizeof(reg->docker_config), "%s", docker_config);
                r = load_docker_config(reg, docker_config, e);
        }
        if (r < 0) {
                hosts_free(reg->hosts);
                creds_free(reg->creds);
                free(reg);
                return r;
        }
        if (!loop) { /* validation only */
                *ret = reg;
                return 0;
        }
        reg->timer = calloc(1, sizeof(*reg->timer));
        reg->multi = curl_multi_init();
        if (!reg->timer || !reg->multi) {
                free(reg->timer);
                if (reg->multi)
                        curl_multi_cleanup(reg->multi);
                hosts_free(reg->hosts);
                creds_free(reg->creds);
                free(reg);
                return oom(e);
        }
        uv_timer_init(loop, reg->timer);
        reg->timer->data = reg;
        curl_multi_setopt(reg->multi, CURLMOPT_SOCKETFUNCTION, socket_cb);
        curl_multi_setopt(reg->multi, CURLMOPT_SOCKETDATA, reg);
        curl_multi_setopt(reg->multi, CURLMOPT_TIMERFUNCTION, timer_cb);
        curl_multi_setopt(reg->multi, CURLMOPT_TIMERDATA, reg);
        curl_multi_setopt(reg->multi, CURLMOPT_MAX_HOST_CONNECTIONS, 8L);
        *ret = reg;
        return 0;
}

static void req_free(struct img_reg_req *q);

void img_registry_free(struct img_registry *reg) {
        if (!reg)
                return;
        while (reg->reqs)
                req_free(reg->reqs);
        if (reg->multi)
                curl_multi_cleanup(reg->multi);
        if (reg->timer) {
                uv_timer_stop(reg->timer);
                uv_close((uv_handle_t *) reg->timer, on_timer_close);
        }
        hosts_free(reg->hosts);
        creds_free(reg->creds);
        tokens_free(reg->tokens);
        free(reg);
}

/* --- requests --- */

static void detach_easy(struct img_reg_req *q) {
        if (q->easy) {
                curl_multi_remove_handle(q->reg->multi, q->easy);
                curl_easy_cleanup(q->easy);
                q->easy = NULL;
        }
        curl_slist_free_all(q->hdrs);
        q->hdrs = NULL;
}

static void req_free(struct img_reg_req *q) {
        if (!q)
                return;
        detach_easy(q);
        if (q->prev)
                q->prev->next = q->next;
        else
                q->reg->reqs = q->next;
        if (q->next)
                q->next->prev = q->prev;
        if (q->fd >= 0)
                close(q->fd);
        EVP_MD_CTX_free(q->md);
        free(q->body);
        free(q->token_body);
        free(q);
}

static int payload_reset(struct img_reg_req *q) {
        q->received = 0;
        q->body_len = 0;
        if (q->body)
                q->body[0] = '\0';
        if (q->fd >= 0 && ftruncate(q->fd, 0) < 0)
                return -errno;
        if (EVP_DigestInit_ex(q->md, EVP_sha256(), NULL) != 1)
                return -EIO;
        return 0;
}

static size_t header_cb(char *buf, size_t size, size_t n, void *ud) {
        struct img_reg_req *q = ud;
        size_t len = size * n;
        if (lower_eq_prefix(buf, len, "HTTP/")) {
                q->content_type[0] = '\0';
                q->www_auth[0] = '\0';
                return len;
        }
        char line[2048];
        if (lower_eq_prefix(buf, len, "content-type:")) {
                snprintf(line, sizeof(line), "%.*s", (int) (len - 13), buf + 13);
                trim_crlf(line);
                const char *v = line + strspn(line, " \t");
                snprintf(q->content_type, sizeof(q->content_type), "%s", v);
        } else if (lower_eq_prefix(buf, len, "www-authenticate:")) {
                snprintf(line, sizeof(line), "%.*s", (int) (len - 17), buf + 17);
                trim_crlf(line);
                const char *v = line + strspn(line, " \t");
                /* prefer a Bearer challenge when several are offered */
                if (!q->www_auth[0] || !strncasecmp(v, "bearer", 6))
                        snprintf(q->www_auth, sizeof(q->www_auth), "%s", v);
        }
        return len;
}

static size_t write_cb(char *data, size_t size, size_t n, void *ud) {
        struct img_reg_req *q = ud;
        size_t len = size * n;
        if (!q->status_checked) {
                long code = 0;
                curl_easy_getinfo(q->easy, CURLINFO_RESPONSE_CODE, &code);
                q->status_checked = true;
                q->to_body = code == 200 || code == 206;
                if (q->phase == PHASE_MAIN && q->to_body && q->range_sent && code == 200) {
                        /* the registry ignored our Range: start over */
                        int r = payload_reset(q);
                        if (r < 0) {
                                q->write_errno = -r;
                                return 0;
                        }
                }
        }
        if (!q->to_body) {
                size_t room = ERR_BODY_MAX - q->errbody_len;
                size_t k = len < room ? len : room;
                memcpy(q->errbody + q->errbody_len, data, k);
                q->errbody_len += k;
                q->errbody[q->errbody_len] = '\0';
                return len;
        }
        if (q->phase == PHASE_TOKEN) {
                if (q->token_len + len > 256 * 1024) {
                        q->too_big = true;
                        return 0;
                }
                char *nb = realloc(q->token_body, q->token_len + len + 1);
                if (!nb)
                        return 0;
                q->token_body = nb;
                memcpy(nb + q->token_len, data, len);
                q->token_len += len;
                nb[q->token_len] = '\0';
                return len;
        }
        if (q->fd >= 0) {
                if (q->max_size && q->received + len > q->max_size) {
                        q->too_big = true; /* more than the manifest said: stop filling the disk */
                        return 0;
                }
                size_t off = 0;
                while (off < len) {
                        ssize_t w =
                                pwrite(q->fd, data + off, len - off, (off_t) (q->received + off));
                        if (w < 0) {
                                if (errno == EINTR)
                                        continue;
                                q->write_errno = errno;
                                return 0;
                        }
                        off += (size_t) w;
                }
        } else {
                if (q->body_len + len > q->max_body) {
                        q->too_big = true;
                        return 0;
                }
                if (q->body_len + len + 1 > q->body_cap) {
                        size_t cap = q->body_cap ? q->body_cap * 2 : 16384;
                        while (cap < q->body_len + len + 1)
                                cap *= 2;
                        char *nb = realloc(q->body, cap);
                        if (!nb)
                                return 0;
                        q->body = nb;
                        q->body_cap = cap;
                }
                memcpy(q->body + q->body_len, data, len);
                q->body_len += len;
                q->body[q->body_len] = '\0';
        }
        EVP_DigestUpdate(q->md, data, len);
        q->received += len;
        return len;
}

static int add_header(struct img_reg_req *q, const char *h) {
        struct curl_slist *n = curl_slist_append(q->hdrs, h);
        if (!n)
                return -ENOMEM;
        q->hdrs = n;
        return 0;
}

/* Start one HTTP exchange for the request's current phase and endpoint. */
static int attempt(struct img_reg_req *q, const char *url, struct wr_err *e) {
        detach_easy(q);
        q->status_checked = false;
        q->to_body = false;
        q->range_sent = false;
        q->errbody_len = 0;
        q->errbody[0] = '\0';
        q->content_type[0] = '\0';
        q->www_auth[0] = '\0';
        q->errbuf[0] = '\0';
        q->write_errno = 0;
        q->too_big = false;
        snprintf(q->url, sizeof(q->url), "%s", url);

        q->easy = curl_easy_init();
        if (!q->easy)
                return oom(e);
        CURL *c = q->easy;
        curl_easy_setopt(c, CURLOPT_URL, q->url);
        curl_easy_setopt(c, CURLOPT_PRIVATE, q);
        curl_easy_setopt(c, CURLOPT_ERRORBUFFER, q->errbuf);
        curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
        /* Loopback-only: a redirect could lead anywhere; follow none. */
        curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, q->reg->loopback_only ? 0L : 1L);
        curl_easy_setopt(c, CURLOPT_MAXREDIRS, 5L);
        curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
        curl_easy_setopt(c, CURLOPT_REDIR_PROTOCOLS_STR, "http,https");
        curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT, 15L);
        curl_easy_setopt(c, CURLOPT_LOW_SPEED_LIMIT, 1024L);
        curl_easy_setopt(c, CURLOPT_LOW_SPEED_TIME, 60L);
        curl_easy_setopt(c, CURLOPT_USERAGENT, "warren/" WARREN_VERSION);
        curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, header_cb);
        curl_easy_setopt(c, CURLOPT_HEADERDATA, q);
        curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, write_cb);
        curl_easy_setopt(c, CURLOPT_WRITEDATA, q);
        curl_easy_setopt(c, CURLOPT_ACCEPT_ENCODING, NULL);
        /* fewer, bigger writes and hash updates for blobs (default 16 KiB) */
        curl_easy_setopt(c, CURLOPT_BUFFERSIZE, 256L * 1024);

        int r = 0;
        if (q->phase == PHASE_MAIN) {
                char h[600];
                if (q->accept[0]) {
                        snprintf(h, sizeof(h), "Accept: %s", q->accept);
                        r = add_header(q, h);
                }
                if (r >= 0 && q->auth[0])
                        r = add_header(q, q->auth);
                if (r >= 0 && q->fd >= 0 && q->received > 0) {
                        snprintf(h, sizeof(h), "Range: bytes=%llu-",
                                 (unsigned long long) q->received);
                        r = add_header(q, h);
                        q->range_sent = true;
                }
        } else {
                const struct cred *cr = cred_for(q->reg, q->eps[q->ep].host);
                if (cr) {
                        char h[1500];
                        snprintf(h, sizeof(h), "Authorization: Basic %s", cr->basic);
                        r = add_header(q, h);
                }
        }
        if (r < 0)
                return oom(e);
        if (q->hdrs)
                curl_easy_setopt(c, CURLOPT_HTTPHEADER, q->hdrs);
        if (curl_multi_add_handle(q->reg->multi, c) != CURLM_OK)
                return err_set(e, -EIO, "registry request: curl_multi_add_handle failed");
        return 0;
}

static int attempt_main(struct img_reg_req *q, struct wr_err *e) {
        const struct endpoint *ep = &q->eps[q->ep];
        char url[2048];
        snprintf(url, sizeof(url), "%s/v2/%s/%s/%s", ep->base, q->ref.path, q->kind, q->object);
        q->phase = PHASE_MAIN;
        if (!q->auth_answered) {
                const char *t = token_for(q->reg, ep->base, q->ref.path);
                snprintf(q->auth, sizeof(q->auth), "%s", t ? t : "");
        }
        return attempt(q, url, e);
}

void img_registry_set_loopback_only(struct img_registry *reg, bool on) {
        reg->loopback_only = on;
}

static bool url_is_loopback(const char *url) {
        char host[300];
        url_host(url, host, sizeof(host));
        return img_ref_domain_is_loopback(host);
}

static void build_endpoints(struct img_reg_req *q) {
        const struct host_cfg *h = host_cfg(q->reg, q->ref.domain);
        q->n_eps = 0;
        for (size_t i = 0; h && i < h->n_mirrors && q->n_eps < MAX_ENDPOINTS - 1; i++) {
                if (q->reg->loopback_only && !url_is_loopback(h->mirrors[i]))
                        continue;
                struct endpoint *ep = &q->eps[q->n_eps++];
                snprintf(ep->base, sizeof(ep->base), "%s", h->mirrors[i]);
                url_host(ep->base, ep->host, sizeof(ep->host));
                ep->mirror = true;
        }
        if (q->reg->loopback_only && !img_ref_domain_is_loopback(q->ref.domain))
                return;
        bool http = img_ref_domain_is_loopback(q->ref.domain);
        if (h && h->insecure >= 0)
                http = h->insecure;
        struct endpoint *ep = &q->eps[q->n_eps++];
        snprintf(ep->base, sizeof(ep->base), "%s://%s", http ? "http" : "https",
                 img_ref_api_host(q->ref.domain));
        snprintf(ep->host, sizeof(ep->host), "%s", img_ref_api_host(q->ref.domain));
        ep->mirror = false;
}

int img_reg_fetch_start(struct img_registry *reg, const struct img_reg_fetch *f,
                        img_reg_done_fn done, void *userdata, struct img_reg_req **ret,
                        struct wr_err *e) {
        if (!f->ref || !f->kind || !f->object || strlen(f->object) >= 200 ||
            strpbrk(f->object, "/?# \r\n"))
                return err_set(e, -EINVAL, "registry request: bad arguments");
        if (!reg->multi)
                return err_set(e, -EINVAL, "registry request: client has no loop");
        struct img_reg_req *q = calloc(1, sizeof(*q));
        if (!q)
                return oom(e);
        q->reg = reg;
        q->ref = *f->ref;
        q->fd = -EBADF;
        snprintf(q->kind, sizeof(q->kind), "%s", f->kind);
        snprintf(q->object, sizeof(q->object), "%s", f->object);
        snprintf(q->accept, sizeof(q->accept), "%s", f->accept ? f->accept : "");
        snprintf(q->expect, sizeof(q->expect), "%s", f->expect_digest ? f->expect_digest : "");
        q->max_body = f->max_body ? f->max_body : DEFAULT_MAX_BODY;
        q->max_size = f->max_size;
        q->retry = f->retry;
        q->done = done;
        q->userdata = userdata;
        q->md = EVP_MD_CTX_new();
        q->next = reg->reqs;
        if (reg->reqs)
                reg->reqs->prev = q;
        reg->reqs = q;
        if (!q->md) {
                req_free(q);
                return oom(e);
        }
        if (f->fd >= 0 && (q->fd = fcntl(f->fd, F_DUPFD_CLOEXEC, 3)) < 0) {
                int r = err_set(e, -errno, "registry request: %m");
                req_free(q);
                return r;
        }
        int r = payload_reset(q);
        if (r < 0) {
                err_set(e, r, "registry request: reset body: %s", strerror(-r));
                req_free(q);
                return r;
        }
        build_endpoints(q);
        if (q->n_eps == 0) {
                r = err_setx(e, -ENOENT, WR_STATUS_NOT_FOUND, WR_FAULT_CLIENT,
                             "image %s/%s is not stored, and this warrend pulls only from "
                             "registries on loopback (--pull-loopback-only): import it with "
                             "`warren image import`",
                             q->ref.domain, q->ref.path);
                req_free(q);
                return r;
        }
        r = attempt_main(q, e);
        if (r < 0) {
                req_free(q);
                return r;
        }
        if (ret)
                *ret = q;
        return 0;
}

void img_reg_req_cancel(struct img_reg_req *q) {
        req_free(q);
}

uint64_t img_reg_req_received(const struct img_reg_req *q) {
        return q->received;
}

const char *img_reg_req_body(const struct img_reg_req *q, size_t *len) {
        if (len)
                *len = q->body_len;
        return q->body ? q->body : "";
}

const char *img_reg_req_content_type(const struct img_reg_req *q) {
        return q->content_type;
}

const char *img_reg_req_digest(const struct img_reg_req *q) {
        return q->digest;
}

const char *img_reg_req_endpoint(const struct img_reg_req *q) {
        return q->eps[q->ep].base;
}

/* --- completion --- */

static void complete(struct img_reg_req *q, int r, const struct wr_err *e) {
        detach_easy(q);
        if (q->done)
                q->done(q, r, e, q->userdata);
        req_free(q);
}

static void fail(struct img_reg_req *q, int code, int status, int fault, const char *fmt, ...)
        _printf_(5, 6);

static void fail(struct img_reg_req *q, int code, int status, int fault, const char *fmt, ...) {
        struct wr_err e = {0};
        va_list ap;
        va_start(ap, fmt);
        char msg[WR_ERR_MSG_MAX];
        vsnprintf(msg, sizeof(msg), fmt, ap);
        va_end(ap);
        err_setx(&e, code, status, fault, "%s", msg);
        complete(q, code, &e);
}

/* Move on after a failure of the current endpoint: retry it (transient
 * errors), else try the next endpoint. Returns true when something new was
 * started. */
static bool try_again(struct img_reg_req *q, bool transient) {
        struct wr_err e = {0};
        if (transient && q->retry && ++q->attempts < MAX_ATTEMPTS) {
                /* file bodies resume (Range), memory bodies start over */
                if ((q->fd >= 0 || payload_reset(q) >= 0) && attempt_main(q, &e) >= 0)
                        return true;
        }
        if (q->ep + 1 < q->n_eps) {
                q->ep++;
                q->attempts = 0;
                q->auth_answered = false;
                if (payload_reset(q) >= 0 && attempt_main(q, &e) >= 0)
                        return true;
        }
        return false;
}

static void what(const struct img_reg_req *q, char *out, size_t outsz) {
        char full[600];
        struct img_ref r = q->ref;
        if (!strcmp(q->kind, "manifests")) {
                if (strncmp(q->object, "sha256:", 7) == 0) {
                        snprintf(r.tag, sizeof(r.tag), "%s", "");
                        snprintf(r.digest, sizeof(r.digest), "%s", q->object);
                } else {
                        snprintf(r.tag, sizeof(r.tag), "%s", q->object);
                        r.digest[0] = '\0';
                }
                img_ref_format(&r, full, sizeof(full));
                snprintf(out, outsz, "image %s", full);
        } else {
                snprintf(out, outsz, "blob %.19s... of %s/%s", q->object, r.domain, r.path);
        }
}

static void token_done(struct img_reg_req *q, CURLcode cc) {
        long code = 0;
        curl_easy_getinfo(q->easy, CURLINFO_RESPONSE_CODE, &code);
        const char *ep = q->eps[q->ep].base;
        if (cc != CURLE_OK) {
                if (!try_again(q, true))
                        fail(q, -EHOSTUNREACH, WR_STATUS_UNAVAILABLE, WR_FAULT_SERVICE,
                             "registry %s: token server %s unreachable: %s", q->ref.domain, q->url,
                             q->errbuf[0] ? q->errbuf : curl_easy_strerror(cc));
                return;
        }
        if (code == 401 || code == 403) {
                const struct cred *cr = cred_for(q->reg, q->eps[q->ep].host);
                fail(q, -EACCES, WR_STATUS_UNAUTHENTICATED, WR_FAULT_CLIENT,
                     "registry %s: the token server refused %s (HTTP %ld); %s", q->ref.domain,
                     cr ? "the credentials" : "an anonymous pull", code,
                     cr ? "check the credentials in the docker config file (--docker-config)"
                        : "add credentials for this registry to a docker config.json and pass "
                          "it with warrend --docker-config FILE");
                return;
        }
        if (code != 200) {
                if (!try_again(q, code >= 500 || code == 429))
                        fail(q, -EPROTO, WR_STATUS_UNAVAILABLE, WR_FAULT_SERVICE,
                             "registry %s: token server %s answered HTTP %ld", q->ref.domain,
                             q->url, code);
                return;
        }
        json_t *j = json_loadb(q->token_body ? q->token_body : "", q->token_len, 0, NULL);
        const char *tok = json_string_value(json_object_get(j, "token"));
        if (!tok || !*tok)
                tok = json_string_value(json_object_get(j, "access_token"));
        bool ok = tok && *tok && strlen(tok) < sizeof(q->auth) - 40;
        for (const char *p = tok; ok && *p; p++)
                if (*p < 0x21 || *p > 0x7e)
                        ok = false;
        if (!ok) {
                json_decref(j);
                fail(q, -EPROTO, WR_STATUS_UNAVAILABLE, WR_FAULT_SERVICE,
                     "registry %s: token server %s sent no usable token", q->ref.domain, q->url);
                return;
        }
        snprintf(q->auth, sizeof(q->auth), "Authorization: Bearer %s", tok);
        json_decref(j);
        free(q->token_body);
        q->token_body = NULL;
        q->token_len = 0;
        token_put(q->reg, ep, q->ref.path, q->auth);
        q->auth_answered = true;
        struct wr_err e = {0};
        if (attempt_main(q, &e) < 0)
                complete(q, e.code, &e);
}

/* A 401 on the main request: answer the challenge once. */
static void answer_challenge(struct img_reg_req *q) {
        struct img_reg_challenge ch;
        const struct cred *cr = cred_for(q->reg, q->eps[q->ep].host);
        char obj[700];
        what(q, obj, sizeof(obj));
        if (q->auth_answered || img_reg_challenge_parse(q->www_auth, &ch) < 0) {
                if (q->auth[0])
                        token_drop(q->reg, q->eps[q->ep].base, q->ref.path);
                if (cr)
                        fail(q, -EACCES, WR_STATUS_UNAUTHENTICATED, WR_FAULT_CLIENT,
                             "registry %s refused the credentials from %s for %s; check them "
                             "(docker login writes the same format)",
                             q->ref.domain, cr->source, obj);
                else
                        fail(q, -EACCES, WR_STATUS_UNAUTHENTICATED, WR_FAULT_CLIENT,
                             "pull access denied for %s: the repository does not exist or needs "
                             "authentication; add credentials for %s to a docker config.json "
                             "and start warrend with --docker-config FILE",
                             obj, q->ref.domain);
                return;
        }
        struct wr_err e = {0};
        if (!strcmp(ch.scheme, "basic")) {
                if (!cr) {
                        fail(q, -EACCES, WR_STATUS_UNAUTHENTICATED, WR_FAULT_CLIENT,
                             "registry %s needs a user name and password for %s; add them to a "
                             "docker config.json and start warrend with --docker-config FILE",
                             q->ref.domain, obj);
                        return;
                }
                snprintf(q->auth, sizeof(q->auth), "Authorization: Basic %s", cr->basic);
                token_put(q->reg, q->eps[q->ep].base, q->ref.path, q->auth);
                q->auth_answered = true;
                if (attempt_main(q, &e) < 0)
                        complete(q, e.code, &e);
                return;
        }
        if (strncmp(ch.realm, "http://", 7) && strncmp(ch.realm, "https://", 8)) {
                fail(q, -EPROTO, WR_STATUS_UNAVAILABLE, WR_FAULT_SERVICE,
                     "registry %s: token realm \"%.200s\" is not an http(s) URL", q->ref.domain,
                     ch.realm);
                return;
        }
        if (q->reg->loopback_only && !url_is_loopback(ch.realm)) {
                fail(q, -EPERM, WR_STATUS_FAILED_PRECONDITION, WR_FAULT_SERVICE,
                     "registry %s: token realm \"%.200s\" is not on loopback "
                     "(--pull-loopback-only)",
                     q->ref.domain, ch.realm);
                return;
        }
        char scope[600];
        if (ch.scope[0])
                snprintf(scope, sizeof(scope), "%s", ch.scope);
        else
                snprintf(scope, sizeof(scope), "repository:%s:pull", q->ref.path);
        char *es = curl_easy_escape(NULL, ch.service, 0);
        char *esc = curl_easy_escape(NULL, scope, 0);
        char url[2048];
        snprintf(url, sizeof(url), "%s%sservice=%s&scope=%s", ch.realm,
                 strchr(ch.realm, '?') ? "&" : "?", es ? es : "", esc ? esc : "");
        curl_free(es);
        curl_free(esc);
        q->phase = PHASE_TOKEN;
        free(q->token_body);
        q->token_body = NULL;
        q->token_len = 0;
        if (attempt(q, url, &e) < 0)
                complete(q, e.code, &e);
}

static void main_done(struct img_reg_req *q, CURLcode cc) {
        long code = 0;
        curl_easy_getinfo(q->easy, CURLINFO_RESPONSE_CODE, &code);
        char obj[700];
        what(q, obj, sizeof(obj));
        const struct endpoint *ep = &q->eps[q->ep];
        if (q->write_errno) {
                fail(q, -q->write_errno, 0, WR_FAULT_SERVICE, "download %s: write: %s", obj,
                     strerror(q->write_errno));
                return;
        }
        if (q->too_big) {
                if (q->fd >= 0)
                        fail(q, -EFBIG, WR_STATUS_DATA_LOSS, WR_FAULT_WORKLOAD,
                             "%s from %s is larger than the %llu bytes its manifest lists; "
                             "nothing was stored",
                             obj, ep->base, (unsigned long long) q->max_size);
                else
                        fail(q, -EFBIG, WR_STATUS_INVALID_ARGUMENT, WR_FAULT_WORKLOAD,
                             "%s from %s is larger than %zu bytes", obj, ep->base, q->max_body);
                return;
        }
        if (cc != CURLE_OK) {
                if (try_again(q, true))
                        return;
                char cfgmsg[700];
                if (q->reg->registry_config[0])
                        snprintf(cfgmsg, sizeof(cfgmsg), "mirrors for it in %s",
                                 q->reg->registry_config);
                else
                        snprintf(cfgmsg, sizeof(cfgmsg),
                                 "a mirror with warrend --registry-config FILE "
                                 "({\"registries\": {\"%s\": {\"mirrors\": [URL]}}})",
                                 q->ref.domain);
                fail(q, -EHOSTUNREACH, WR_STATUS_UNAVAILABLE, WR_FAULT_SERVICE,
                     "registry %s is unreachable (%s: %s); check the network or configure %s",
                     q->ref.domain, ep->base, q->errbuf[0] ? q->errbuf : curl_easy_strerror(cc),
                     cfgmsg);
                return;
        }
        if (code == 200 || code == 206) {
                unsigned char md[EVP_MAX_MD_SIZE];
                unsigned int mdl = 0;
                EVP_DigestFinal_ex(q->md, md, &mdl);
                strcpy(q->digest, "sha256:");
                for (unsigned i = 0; i < mdl && i < 32; i++)
                        snprintf(q->digest + 7 + 2 * i, 3, "%02x", md[i]);
                if (q->expect[0] && strcmp(q->expect, q->digest) != 0) {
                        if (ep->mirror && try_again(q, false))
                                return;
                        fail(q, -EBADMSG, WR_STATUS_DATA_LOSS, WR_FAULT_WORKLOAD,
                             "digest mismatch for %s from %s: expected %s, got %s; nothing was "
                             "stored",
                             obj, ep->base, q->expect, q->digest);
                        return;
                }
                complete(q, 0, NULL);
                return;
        }
        if (code == 401) {
                answer_challenge(q);
                return;
        }
        if (code == 404 || code == 403) {
                if (ep->mirror && try_again(q, false))
                        return;
                if (code == 403)
                        fail(q, -EACCES, WR_STATUS_PERMISSION_DENIED, WR_FAULT_CLIENT,
                             "registry %s denied access to %s (HTTP 403); the credentials in the "
                             "docker config (--docker-config) lack pull rights",
                             q->ref.domain, obj);
                else
                        fail(q, -ENOENT, WR_STATUS_NOT_FOUND, WR_FAULT_CLIENT,
                             "%s not found in registry %s", obj, ep->base);
                return;
        }
        bool transient = code >= 500 || code == 429 || code == 408;
        if (try_again(q, transient))
                return;
        fail(q, -EPROTO, transient ? WR_STATUS_UNAVAILABLE : WR_STATUS_INTERNAL, WR_FAULT_SERVICE,
             "registry %s answered HTTP %ld for %s%s%.200s", ep->base, code, obj,
             q->errbody_len ? ": " : "", q->errbody);
}

static void check_multi_info(struct img_registry *reg) {
        CURLMsg *m;
        int left = 0;
        while ((m = curl_multi_info_read(reg->multi, &left))) {
                if (m->msg != CURLMSG_DONE)
                        continue;
                struct img_reg_req *q = NULL;
                CURLcode cc = m->data.result;
                curl_easy_getinfo(m->easy_handle, CURLINFO_PRIVATE, (char **) &q);
                if (!q)
                        continue;
                if (q->phase == PHASE_TOKEN)
                        token_done(q, cc);
                else
                        main_done(q, cc);
        }
}
