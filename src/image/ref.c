/* SPDX-License-Identifier: Apache-2.0 */
/* Image reference parsing and normalisation (see ref.h for the grammar). */
#include "image/ref.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

static bool is_lower_alnum(char c) {
        return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
}

static bool is_alnum(char c) {
        return is_lower_alnum(c) || (c >= 'A' && c <= 'Z');
}

static bool is_hex(char c) {
        return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
}

static int bad(struct wr_err *e, const char *s, const char *why) {
        return err_setx(e, -EINVAL, WR_STATUS_INVALID_ARGUMENT, WR_FAULT_CLIENT,
                        "invalid reference \"%.200s\": %s", s, why);
}

/* One path component: alnum+ (sep alnum+)*, sep = "." | "_" | "__" | "-"+.
 * Returns NULL when valid, else why. */
static const char *check_component(const char *c, size_t n) {
        if (n == 0)
                return "empty path component";
        bool upper = false;
        for (size_t i = 0; i < n; i++)
                if (c[i] >= 'A' && c[i] <= 'Z')
                        upper = true;
        if (upper)
                return "repository name must be lowercase";
        size_t i = 0;
        for (;;) {
                size_t start = i;
                while (i < n && is_lower_alnum(c[i]))
                        i++;
                if (i == start)
                        return (start == 0 || start == n)
                                       ? "path components must start and end with a letter or "
                                         "digit"
                                       : "invalid character in repository name";
                if (i == n)
                        return NULL;
                /* a separator */
                if (c[i] == '.') {
                        i++;
                } else if (c[i] == '_') {
                        i++;
                        if (i < n && c[i] == '_')
                                i++;
                } else if (c[i] == '-') {
                        while (i < n && c[i] == '-')
                                i++;
                } else {
                        return "invalid character in repository name (allowed: a-z 0-9 . _ -)";
                }
                if (i == n)
                        return "path components must start and end with a letter or digit";
        }
}

/* A domain: DNS-ish labels [A-Za-z0-9]([A-Za-z0-9-]*[A-Za-z0-9])? joined by
 * '.', or a bracketed IPv6 address; then an optional :port. */
static const char *check_domain(const char *d, size_t n) {
        size_t i = 0;
        if (n == 0)
                return "empty registry host";
        if (d[0] == '[') {
                while (i < n && d[i] != ']')
                        i++;
                if (i == n || i < 3)
                        return "malformed IPv6 registry host (want [addr]:port)";
                for (size_t k = 1; k < i; k++)
                        if (!(is_hex(d[k]) || (d[k] >= 'A' && d[k] <= 'F') || d[k] == ':' ||
                              d[k] == '.'))
                                return "malformed IPv6 registry host";
                i++;
        } else {
                for (;;) {
                        size_t start = i;
                        while (i < n && (is_alnum(d[i]) || d[i] == '-'))
                                i++;
                        if (i == start || d[start] == '-' || d[i - 1] == '-')
                                return "malformed registry host";
                        if (i < n && d[i] == '.') {
                                i++;
                                continue;
                        }
                        break;
                }
        }
        if (i == n)
                return NULL;
        if (d[i] != ':')
                return "malformed registry host";
        i++;
        size_t ports = i;
        unsigned long port = 0;
        while (i < n && d[i] >= '0' && d[i] <= '9') {
                port = port * 10 + (unsigned long) (d[i] - '0');
                if (port > 65535)
                        return "registry port out of range";
                i++;
        }
        if (i != n || i == ports)
                return "malformed registry port";
        return NULL;
}

int img_ref_parse(const char *s, struct img_ref *ret, struct wr_err *e) {
        memset(ret, 0, sizeof(*ret));
        if (!s || !*s)
                return err_setx(e, -EINVAL, WR_STATUS_INVALID_ARGUMENT, WR_FAULT_CLIENT,
                                "invalid reference: empty image reference");
        size_t len = strlen(s);
        if (len > 2 * IMG_REF_NAME_MAX + 200)
                return bad(e, s, "too long");

        /* split off "@digest" */
        const char *at = strchr(s, '@');
        size_t name_tag_len = at ? (size_t) (at - s) : len;
        if (at) {
                const char *d = at + 1;
                if (strncmp(d, "sha256:", 7) != 0) {
                        if (strchr(d, ':'))
                                return bad(e, s, "unsupported digest algorithm (only sha256)");
                        return bad(e, s, "malformed digest (want sha256:<64 hex digits>)");
                }
                size_t hl = strlen(d + 7);
                if (hl != 64)
                        return bad(e, s, "malformed digest (want sha256:<64 hex digits>)");
                for (size_t i = 0; i < 64; i++)
                        if (!is_hex(d[7 + i]))
                                return bad(e, s,
                                           "malformed digest (want 64 lower-case hex "
                                           "digits)");
                memcpy(ret->digest, d, 71);
        }
        if (name_tag_len == 0)
                return bad(e, s, "missing repository name");

        /* split off ":tag": a ':' after the last '/' */
        const char *last_slash = memrchr(s, '/', name_tag_len);
        const char *from = last_slash ? last_slash + 1 : s;
        const char *colon = memchr(from, ':', name_tag_len - (size_t) (from - s));
        size_t name_len = colon ? (size_t) (colon - s) : name_tag_len;
        if (colon) {
                const char *t = colon + 1;
                size_t tl = name_tag_len - (size_t) (t - s);
                if (tl == 0)
                        return bad(e, s, "empty tag");
                if (tl > 128)
                        return bad(e, s, "tag longer than 128 characters");
                for (size_t i = 0; i < tl; i++) {
                        char c = t[i];
                        bool ok = is_alnum(c) || c == '_' || (i > 0 && (c == '.' || c == '-'));
                        if (!ok)
                                return bad(e, s,
                                           "invalid tag (allowed: A-Z a-z 0-9 _ . -, "
                                           "not starting with . or -)");
                }
                memcpy(ret->tag, t, tl);
                ret->tag[tl] = '\0';
        }
        if (name_len == 0)
                return bad(e, s, "missing repository name");
        if (name_len > IMG_REF_NAME_MAX)
                return bad(e, s, "repository name longer than 255 characters");

        /* domain or not */
        const char *slash = memchr(s, '/', name_len);
        const char *path = s;
        size_t path_len = name_len;
        if (slash) {
                size_t dl = (size_t) (slash - s);
                bool has_upper = false;
                for (size_t i = 0; i < dl; i++)
                        if (s[i] >= 'A' && s[i] <= 'Z')
                                has_upper = true;
                bool is_domain = memchr(s, '.', dl) || memchr(s, ':', dl) ||
                                 (dl == 9 && !memcmp(s, "localhost", 9)) || has_upper ||
                                 (dl > 0 && s[0] == '[');
                if (is_domain) {
                        const char *why = check_domain(s, dl);
                        if (why)
                                return bad(e, s, why);
                        memcpy(ret->domain, s, dl);
                        ret->domain[dl] = '\0';
                        path = slash + 1;
                        path_len = name_len - dl - 1;
                }
        }
        if (!ret->domain[0] || !strcmp(ret->domain, "index.docker.io"))
                strcpy(ret->domain, IMG_REF_DOCKER_HUB);
        if (path_len == 0)
                return bad(e, s, "missing repository name");

        /* components */
        size_t start = 0;
        for (size_t i = 0; i <= path_len; i++) {
                if (i == path_len || path[i] == '/') {
                        const char *why = check_component(path + start, i - start);
                        if (why)
                                return bad(e, s, why);
                        start = i + 1;
                }
        }
        /* a bare 64-hex name is an image id, not a repository */
        if (path_len == 64 && !strcmp(ret->domain, IMG_REF_DOCKER_HUB) && !slash) {
                bool hex = true;
                for (size_t i = 0; i < 64; i++)
                        hex = hex && is_hex(path[i]);
                if (hex)
                        return bad(e, s,
                                   "64-hex-digit repository names are image ids, not "
                                   "references");
        }
        bool library = !strcmp(ret->domain, IMG_REF_DOCKER_HUB) && !memchr(path, '/', path_len);
        size_t need = (library ? 8 : 0) + path_len;
        if (strlen(ret->domain) + 1 + need > IMG_REF_NAME_MAX)
                return bad(e, s, "repository name longer than 255 characters");
        snprintf(ret->path, sizeof(ret->path), "%s%.*s", library ? "library/" : "", (int) path_len,
                 path);
        if (!ret->tag[0] && !ret->digest[0])
                strcpy(ret->tag, "latest");
        return 0;
}

size_t img_ref_format(const struct img_ref *r, char *out, size_t outsz) {
        int n = snprintf(out, outsz, "%s/%s%s%s%s%s", r->domain, r->path, r->tag[0] ? ":" : "",
                         r->tag, r->digest[0] ? "@" : "", r->digest);
        return n < 0 ? 0 : (size_t) n;
}

size_t img_ref_familiar_repo(const struct img_ref *r, char *out, size_t outsz) {
        int n;
        size_t first = strcspn(r->path, "/");
        bool domain_like = r->path[first] == '/' &&
                           (memchr(r->path, '.', first) || memchr(r->path, ':', first) ||
                            (first == 9 && !memcmp(r->path, "localhost", 9)));
        if (!strcmp(r->domain, IMG_REF_DOCKER_HUB) && !domain_like) {
                /* "docker.io/cker.io/r" keeps its domain: "cker.io/r" would
                 * name another registry */
                const char *p = r->path;
                bool hex64 = strlen(p) == 8 + 64;
                for (size_t i = 8; hex64 && i < 8 + 64; i++)
                        hex64 = is_hex(p[i]);
                if (!strncmp(p, "library/", 8) && !strchr(p + 8, '/') && !hex64)
                        p += 8; /* (a bare 64-hex name would read as an image id) */
                n = snprintf(out, outsz, "%s", p);
        } else {
                n = snprintf(out, outsz, "%s/%s", r->domain, r->path);
        }
        return n < 0 ? 0 : (size_t) n;
}

int img_ref_local_name(const struct img_ref *r, char *out, size_t outsz) {
        if (outsz)
                out[0] = '\0';
        if (!r->tag[0])
                return -ENOENT;
        char repo[600];
        img_ref_familiar_repo(r, repo, sizeof(repo));
        int n = snprintf(out, outsz, "%s:%s", repo, r->tag);
        if (n < 0 || (size_t) n >= outsz) {
                if (outsz)
                        out[0] = '\0';
                return -ENAMETOOLONG;
        }
        return 0;
}

const char *img_ref_manifest_ref(const struct img_ref *r) {
        return r->digest[0] ? r->digest : r->tag;
}

const char *img_ref_api_host(const char *domain) {
        if (!strcmp(domain, IMG_REF_DOCKER_HUB))
                return "registry-1.docker.io";
        return domain;
}

bool img_ref_domain_is_loopback(const char *domain) {
        char host[IMG_REF_NAME_MAX + 1];
        snprintf(host, sizeof(host), "%s", domain);
        if (host[0] == '[') {
                char *close = strchr(host, ']');
                if (!close)
                        return false;
                *close = '\0';
                return !strcmp(host + 1, "::1") || !strcmp(host + 1, "0:0:0:0:0:0:0:1");
        }
        char *colon = strchr(host, ':');
        if (colon)
                *colon = '\0';
        if (!strcmp(host, "localhost"))
                return true;
        /* 127.0.0.0/8 in dotted-quad form */
        unsigned a, b, c, d;
        char tail;
        if (sscanf(host, "%u.%u.%u.%u%c", &a, &b, &c, &d, &tail) == 4 && a == 127 && b < 256 &&
            c < 256 && d < 256)
                return true;
        return false;
}
