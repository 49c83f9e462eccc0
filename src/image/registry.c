/* SPDX-License-Identifier: Apache-2.0 */
/* OCI distribution client (see registry.h): requests, endpoints, retries,
 * bodies and digests. The configuration is registry-config.c's, the
 * answers to auth challenges registry-auth.c's, the libcurl/libuv glue
 * curl-uv.c's. User callbacks run only from curl-uv's done (never inside
 * curl's own callbacks), so they may add or remove requests. */
#include "image/registry.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <curl/curl.h>
#include <openssl/evp.h>

#include "image/curl-uv.h"
#include "image/registry-internal.h"

#define MAX_ENDPOINTS (IMG_REG_MAX_MIRRORS + 1)
#define MAX_ATTEMPTS 4 /* first try + 3 retries per endpoint */
#define DEFAULT_MAX_BODY (4u << 20)
#define ERR_BODY_MAX 2048
#define TOKEN_BODY_MAX (256u * 1024)

struct img_registry {
        uv_loop_t *loop;
        struct curl_uv *cu; /* NULL for a validation-only client */
        struct img_reg_config *cfg;
        struct img_reg_token *tokens;
        struct img_reg_req *reqs;
        bool loopback_only;  /* no endpoint, redirect or token realm off loopback */
        struct curl_blob ca; /* CA certificates in memory (warren-fetch's chroot has none) */
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
        char auth[IMG_REG_AUTH_MAX]; /* header line or "": a secret, wiped */
        bool auth_answered;
        char *token_body; /* the token server's answer: a secret, wiped */
        size_t token_len, token_cap;
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

static bool url_is_loopback(const char *url) {
        char host[300];
        img_reg_url_host(url, host, sizeof(host));
        return img_ref_domain_is_loopback(host);
}

/* --- the client --- */

static void on_transfer_done(CURL *easy, CURLcode cc, void *userdata);
static void req_free(struct img_reg_req *q);

DEFINE_TRIVIAL_CLEANUP_FUNC(struct img_registry *, img_registry_free);

int img_registry_new(uv_loop_t *loop, const char *registry_config, const char *docker_config,
                     struct img_registry **ret, struct wr_err *e) {
        struct img_reg_config *cfg = NULL;
        int r = img_reg_config_load(registry_config, docker_config, &cfg, e);
        if (r < 0)
                return r;
        return img_registry_new_config(loop, cfg, ret, e);
}

int img_registry_new_config(uv_loop_t *loop, struct img_reg_config *cfg, struct img_registry **ret,
                            struct wr_err *e) {
        _cleanup_(img_registry_freep) struct img_registry *reg = calloc(1, sizeof(*reg));
        if (!reg) {
                img_reg_config_free(cfg);
                return oom(e);
        }
        reg->loop = loop;
        reg->cfg = cfg;
        int r;
        if (loop) { /* else: validation only */
                r = curl_uv_new(loop, on_transfer_done, reg, &reg->cu);
                if (r == -ENOMEM)
                        return oom(e);
                if (r < 0)
                        return err_set(e, r, "libcurl initialisation failed");
                curl_multi_setopt(curl_uv_multi(reg->cu), CURLMOPT_MAX_HOST_CONNECTIONS, 8L);
        }
        *ret = TAKE_PTR(reg);
        return 0;
}

void img_registry_free(struct img_registry *reg) {
        if (!reg)
                return;
        while (reg->reqs)
                req_free(reg->reqs);
        curl_uv_free(reg->cu);
        img_reg_config_free(reg->cfg);
        img_reg_tokens_free(reg->tokens);
        free(reg->ca.data);
        free(reg);
}

int img_registry_set_ca(struct img_registry *reg, const char *pem, size_t len) {
        void *copy = malloc(len ? len : 1);
        if (!copy)
                return -ENOMEM;
        memcpy(copy, pem, len);
        free(reg->ca.data);
        reg->ca = (struct curl_blob){.data = copy, .len = len, .flags = CURL_BLOB_NOCOPY};
        return 0;
}

void img_registry_set_loopback_only(struct img_registry *reg, bool on) {
        reg->loopback_only = on;
}

/* --- requests --- */

static void token_body_wipe(struct img_reg_req *q) {
        q->token_body = erase_and_free_n(q->token_body, q->token_cap);
        q->token_len = q->token_cap = 0;
}

static void detach_easy(struct img_reg_req *q) {
        if (q->easy) {
                curl_uv_remove(q->reg->cu, q->easy);
                curl_easy_cleanup(q->easy);
                q->easy = NULL;
        }
        /* the list may hold an Authorization header */
        for (struct curl_slist *s = q->hdrs; s; s = s->next)
                explicit_bzero(s->data, strlen(s->data));
        curl_slist_free_all(q->hdrs);
        q->hdrs = NULL;
}

static void req_free(struct img_reg_req *q) {
        if (!q)
                return;
        detach_easy(q);
        if (q->prev)
                q->prev->next = q->next;
        else if (q->reg->reqs == q)
                q->reg->reqs = q->next;
        if (q->next)
                q->next->prev = q->prev;
        q->fd = safe_close(q->fd);
        EVP_MD_CTX_free(q->md);
        free(q->body);
        token_body_wipe(q);
        explicit_bzero(q->auth, sizeof(q->auth));
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

/* Append to the token server's answer. Grown by copy, not realloc, so that
 * no unwiped copy of a token is left behind. */
static size_t token_append(struct img_reg_req *q, const char *data, size_t len) {
        if (q->token_len + len > TOKEN_BODY_MAX) {
                q->too_big = true;
                return 0;
        }
        if (q->token_len + len + 1 > q->token_cap) {
                size_t cap = MAX(q->token_cap * 2, q->token_len + len + 1);
                char *nb = malloc(cap);
                if (!nb)
                        return 0;
                if (q->token_body)
                        memcpy(nb, q->token_body, q->token_len);
                erase_and_free_n(q->token_body, q->token_cap);
                q->token_body = nb;
                q->token_cap = cap;
        }
        memcpy(q->token_body + q->token_len, data, len);
        q->token_len += len;
        q->token_body[q->token_len] = '\0';
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
        if (q->phase == PHASE_TOKEN)
                return token_append(q, data, len);
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

/* The headers of the current phase: Accept, Authorization and Range for
 * the main request, the credentials (if any) for a token request. */
static int add_headers(struct img_reg_req *q) {
        int r = 0;
        if (q->phase == PHASE_TOKEN) {
                const struct img_reg_cred *cr =
                        img_reg_config_cred(q->reg->cfg, q->eps[q->ep].host);
                if (!cr)
                        return 0;
                char h[IMG_REG_AUTH_MAX];
                r = img_reg_auth_basic_header(cr, h, sizeof(h));
                if (r >= 0)
                        r = add_header(q, h);
                explicit_bzero(h, sizeof(h));
                return r;
        }
        char h[600];
        if (q->accept[0]) {
                snprintf(h, sizeof(h), "Accept: %s", q->accept);
                r = add_header(q, h);
        }
        if (r >= 0 && q->auth[0])
                r = add_header(q, q->auth);
        if (r >= 0 && q->fd >= 0 && q->received > 0) {
                snprintf(h, sizeof(h), "Range: bytes=%llu-", (unsigned long long) q->received);
                r = add_header(q, h);
                q->range_sent = true;
        }
        return r;
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
        if (q->reg->ca.data)
                curl_easy_setopt(c, CURLOPT_CAINFO_BLOB, &q->reg->ca);

        if (add_headers(q) < 0)
                return oom(e);
        if (q->hdrs)
                curl_easy_setopt(c, CURLOPT_HTTPHEADER, q->hdrs);
        if (curl_uv_add(q->reg->cu, c) < 0)
                return err_set(e, -EIO, "registry request: curl_multi_add_handle failed");
        return 0;
}

static int attempt_main(struct img_reg_req *q, struct wr_err *e) {
        const struct endpoint *ep = &q->eps[q->ep];
        char url[2048];
        snprintf(url, sizeof(url), "%s/v2/%s/%s/%s", ep->base, q->ref.path, q->kind, q->object);
        q->phase = PHASE_MAIN;
        if (!q->auth_answered) {
                const char *t = img_reg_token_find(q->reg->tokens, ep->base, q->ref.path);
                snprintf(q->auth, sizeof(q->auth), "%s", t ? t : "");
        }
        return attempt(q, url, e);
}

static void build_endpoints(struct img_reg_req *q) {
        const struct img_reg_host *h = img_reg_config_host(q->reg->cfg, q->ref.domain);
        q->n_eps = 0;
        for (size_t i = 0; h && i < h->n_mirrors && q->n_eps < MAX_ENDPOINTS - 1; i++) {
                if (q->reg->loopback_only && !url_is_loopback(h->mirrors[i]))
                        continue;
                struct endpoint *ep = &q->eps[q->n_eps++];
                snprintf(ep->base, sizeof(ep->base), "%s", h->mirrors[i]);
                img_reg_url_host(ep->base, ep->host, sizeof(ep->host));
                ep->mirror = true;
        }
        if (q->reg->loopback_only && !img_ref_domain_is_loopback(q->ref.domain))
                return;
        bool http = img_ref_domain_is_loopback(q->ref.domain);
        if (h && h->transport != IMG_REG_TRANSPORT_DEFAULT)
                http = h->transport == IMG_REG_TRANSPORT_HTTP;
        struct endpoint *ep = &q->eps[q->n_eps++];
        snprintf(ep->base, sizeof(ep->base), "%s://%s", http ? "http" : "https",
                 img_ref_api_host(q->ref.domain));
        snprintf(ep->host, sizeof(ep->host), "%s", img_ref_api_host(q->ref.domain));
        ep->mirror = false;
}

DEFINE_TRIVIAL_CLEANUP_FUNC(struct img_reg_req *, req_free);

int img_reg_fetch_start(struct img_registry *reg, const struct img_reg_fetch *f,
                        img_reg_done_fn done, void *userdata, struct img_reg_req **ret,
                        struct wr_err *e) {
        if (!f->ref || !f->kind || !f->object || strlen(f->object) >= 200 ||
            strpbrk(f->object, "/?# \r\n"))
                return err_set(e, -EINVAL, "registry request: bad arguments");
        if (!reg->cu)
                return err_set(e, -EINVAL, "registry request: client has no loop");
        _cleanup_(req_freep) struct img_reg_req *q = calloc(1, sizeof(*q));
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
        q->next = reg->reqs;
        if (reg->reqs)
                reg->reqs->prev = q;
        reg->reqs = q;
        if (!(q->md = EVP_MD_CTX_new()))
                return oom(e);
        if (f->fd >= 0 && (q->fd = fcntl(f->fd, F_DUPFD_CLOEXEC, 3)) < 0)
                return err_set(e, -errno, "registry request: %m");
        int r = payload_reset(q);
        if (r < 0)
                return err_set(e, r, "registry request: reset body: %s", strerror(-r));
        build_endpoints(q);
        if (q->n_eps == 0)
                return err_setx(e, -ENOENT, WR_STATUS_NOT_FOUND, WR_FAULT_CLIENT,
                                "image %s/%s is not stored, and this warrend pulls only from "
                                "registries on loopback (--pull-loopback-only): import it with "
                                "`warren image import`",
                                q->ref.domain, q->ref.path);
        r = attempt_main(q, e);
        if (r < 0)
                return r;
        if (ret)
                *ret = q;
        TAKE_PTR(q);
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

static void fail(struct img_reg_req *q, int code, enum wr_status status, enum wr_fault fault,
                 const char *fmt, ...) _printf_(5, 6);

static void fail(struct img_reg_req *q, int code, enum wr_status status, enum wr_fault fault,
                 const char *fmt, ...) {
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
                const struct img_reg_cred *cr =
                        img_reg_config_cred(q->reg->cfg, q->eps[q->ep].host);
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
        int r = img_reg_auth_token_parse(q->token_body, q->token_len, q->auth, sizeof(q->auth));
        token_body_wipe(q);
        if (r < 0) {
                fail(q, -EPROTO, WR_STATUS_UNAVAILABLE, WR_FAULT_SERVICE,
                     "registry %s: token server %s sent no usable token", q->ref.domain, q->url);
                return;
        }
        (void) img_reg_token_put(&q->reg->tokens, ep, q->ref.path, q->auth);
        q->auth_answered = true;
        struct wr_err e = {0};
        if (attempt_main(q, &e) < 0)
                complete(q, e.code, &e);
}

/* A 401 on the main request: answer the challenge once. */
static void answer_challenge(struct img_reg_req *q) {
        char obj[700];
        what(q, obj, sizeof(obj));
        const struct img_reg_auth_in in = {
                .www_auth = q->www_auth,
                .answered = q->auth_answered,
                .cred = img_reg_config_cred(q->reg->cfg, q->eps[q->ep].host),
                .domain = q->ref.domain,
                .path = q->ref.path,
                .what = obj,
                .loopback_only = q->reg->loopback_only,
        };
        struct img_reg_auth_out out;
        struct wr_err e = {0};
        int r = img_reg_auth_answer(&in, &out, &e);
        if (r < 0) {
                /* what was sent (a cached token or credentials) did not do */
                if (q->auth[0])
                        img_reg_token_drop(&q->reg->tokens, q->eps[q->ep].base, q->ref.path);
                complete(q, r, &e);
                return;
        }
        if (out.step == IMG_REG_AUTH_RETRY) {
                snprintf(q->auth, sizeof(q->auth), "%s", out.header);
                explicit_bzero(out.header, sizeof(out.header));
                (void) img_reg_token_put(&q->reg->tokens, q->eps[q->ep].base, q->ref.path, q->auth);
                q->auth_answered = true;
                if (attempt_main(q, &e) < 0)
                        complete(q, e.code, &e);
                return;
        }
        q->phase = PHASE_TOKEN;
        token_body_wipe(q);
        if (attempt(q, out.url, &e) < 0)
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
                if (q->reg->cfg->registry_config[0])
                        snprintf(cfgmsg, sizeof(cfgmsg), "mirrors for it in %s",
                                 q->reg->cfg->registry_config);
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

static void on_transfer_done(CURL *easy, CURLcode cc, void *userdata) {
        struct img_reg_req *q = NULL;
        curl_easy_getinfo(easy, CURLINFO_PRIVATE, (char **) &q);
        if (!q)
                return;
        if (q->phase == PHASE_TOKEN)
                token_done(q, cc);
        else
                main_done(q, cc);
}
