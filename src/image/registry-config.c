/* SPDX-License-Identifier: Apache-2.0 */
/* The registry client's configuration (see registry-internal.h): the
 * registry config (mirrors, insecure registries) and the docker
 * config.json credentials. The parsers are pure; img_reg_config_load only
 * reads the two files. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <openssl/evp.h>

#include "image/json-internal.h"
#include "image/registry-internal.h"

static int oom(struct wr_err *e) {
        return err_set(e, -ENOMEM, "out of memory");
}

void img_reg_url_host(const char *url, char *out, size_t outsz) {
        const char *p = strstr(url, "://");
        p = p ? p + 3 : url;
        size_t n = strcspn(p, "/");
        snprintf(out, outsz, "%.*s", (int) n, p);
}

static void host_free(struct img_reg_host *h) {
        for (size_t i = 0; h->mirrors && i < h->n_mirrors; i++)
                free(h->mirrors[i]);
        free(h->mirrors);
        free(h->domain);
        free(h);
}

static void cred_free(struct img_reg_cred *c) {
        free(c->host);
        erase_and_free(c->basic);
        free(c->source);
        free(c);
}

void img_reg_config_free(struct img_reg_config *c) {
        if (!c)
                return;
        while (c->hosts) {
                struct img_reg_host *n = c->hosts->next;
                host_free(c->hosts);
                c->hosts = n;
        }
        while (c->creds) {
                struct img_reg_cred *n = c->creds->next;
                cred_free(c->creds);
                c->creds = n;
        }
        free(c);
}

const struct img_reg_host *img_reg_config_host(const struct img_reg_config *c, const char *domain) {
        for (const struct img_reg_host *h = c ? c->hosts : NULL; h; h = h->next)
                if (!strcmp(h->domain, domain))
                        return h;
        return NULL;
}

const struct img_reg_cred *img_reg_config_cred(const struct img_reg_config *c, const char *host) {
        const char *h = host;
        if (!strcmp(h, "registry-1.docker.io") || !strcmp(h, "index.docker.io"))
                h = "docker.io";
        for (const struct img_reg_cred *cr = c ? c->creds : NULL; cr; cr = cr->next)
                if (!strcmp(cr->host, h))
                        return cr;
        return NULL;
}

/* Load the JSON of one file: an object whose member key, when present, is
 * an object too (*ret_section; NULL when absent). Anything else is -EINVAL
 * naming the file (flag and source) and the shape it should have (want). */
static int load_json(const char *flag, const char *key, const char *want, const char *json,
                     size_t len, const char *source, json_t **ret_root, json_t **ret_section,
                     struct wr_err *e) {
        if (len > IMG_REG_CONFIG_MAX_BYTES)
                return err_set(e, -EINVAL, "%s %s: larger than %u bytes", flag, source,
                               IMG_REG_CONFIG_MAX_BYTES);
        json_error_t je;
        _cleanup_json_ json_t *root = json_loadb(json ? json : "", len, 0, &je);
        if (!root)
                return err_set(e, -EINVAL, "%s %s:%d: %s", flag, source, je.line, je.text);
        json_t *section = json_object_get(root, key);
        if (!json_is_object(root) || (section && !json_is_object(section)))
                return err_set(e, -EINVAL, "%s %s: expected %s", flag, source, want);
        *ret_section = section;
        *ret_root = TAKE_PTR(root);
        return 0;
}

/* --- the registry config --- */

/* One mirror URL into a new string: trailing slashes and a final "/v2"
 * (Docker's form) dropped. NULL when malformed (*oom tells -ENOMEM). */
static char *mirror_dup(const char *m, bool *oom_ret) {
        *oom_ret = false;
        if (!m || (strncmp(m, "http://", 7) && strncmp(m, "https://", 8)) ||
            strlen(m) > IMG_REG_MIRROR_URL_MAX || strpbrk(m, " \r\n\t"))
                return NULL;
        char *s = strdup(m);
        if (!s) {
                *oom_ret = true;
                return NULL;
        }
        size_t ml = strlen(s);
        while (ml > 0 && s[ml - 1] == '/')
                s[--ml] = '\0';
        if (ml >= 3 && !strcmp(s + ml - 3, "/v2"))
                s[ml - 3] = '\0';
        char host[IMG_REG_MIRROR_URL_MAX + 1];
        img_reg_url_host(s, host, sizeof(host));
        if (!host[0] || strlen(s) < strlen("http://x")) { /* "https:///v2": no host left */
                free(s);
                return NULL;
        }
        return s;
}

static int add_host(struct img_reg_config *c, const char *domain, const json_t *v,
                    const char *source, struct wr_err *e) {
        const json_t *mirrors = json_object_get(v, "mirrors");
        const json_t *insecure = json_object_get(v, "insecure");
        if (!json_is_object(v) || (mirrors && !json_is_array(mirrors)) ||
            (insecure && !json_is_boolean(insecure)))
                return err_set(e, -EINVAL,
                               "--registry-config %s: registries.\"%.100s\": expected "
                               "{\"mirrors\": [URL...], \"insecure\": true|false}",
                               source, domain);
        size_t n = json_array_size(mirrors);
        if (n > IMG_REG_MAX_MIRRORS)
                return err_set(e, -EINVAL, "--registry-config %s: \"%.100s\": at most %d mirrors",
                               source, domain, IMG_REG_MAX_MIRRORS);
        struct img_reg_host *h = calloc(1, sizeof(*h));
        if (!h)
                return oom(e);
        /* linked first, so that img_reg_config_free frees what is built */
        h->next = c->hosts;
        c->hosts = h;
        h->transport = !insecure                ? IMG_REG_TRANSPORT_DEFAULT
                       : json_is_true(insecure) ? IMG_REG_TRANSPORT_HTTP
                                                : IMG_REG_TRANSPORT_HTTPS;
        if (!(h->domain = strdup(domain)) || !(h->mirrors = calloc(n + 1, sizeof(char *))))
                return oom(e);
        for (size_t i = 0; i < n; i++) {
                bool nomem;
                h->mirrors[i] = mirror_dup(json_string_value(json_array_get(mirrors, i)), &nomem);
                if (nomem)
                        return oom(e);
                if (!h->mirrors[i])
                        return err_set(e, -EINVAL,
                                       "--registry-config %s: \"%.100s\" mirror %zu: want an "
                                       "http:// or https:// URL",
                                       source, domain, i);
                h->n_mirrors++;
        }
        return 0;
}

int img_reg_config_parse_registries(struct img_reg_config *c, const char *json, size_t len,
                                    const char *source, struct wr_err *e) {
        _cleanup_json_ json_t *root = NULL;
        json_t *regs = NULL;
        int r = load_json("--registry-config", "registries",
                          "{\"registries\": {\"HOST\": {\"mirrors\": [URL...], \"insecure\": "
                          "BOOL}}}",
                          json, len, source, &root, &regs, e);
        if (r < 0)
                return r;
        const char *domain;
        json_t *v;
        json_object_foreach(regs, domain, v) {
                r = add_host(c, domain, v, source, e);
                if (r < 0)
                        return r;
        }
        return 0;
}

/* --- the docker config (credentials) --- */

/* Wipe the secrets jansson holds for one "auths" entry. */
static void entry_wipe(json_t *v) {
        static const char *const keys[] = {"auth", "password", "identitytoken", "registrytoken"};
        for (size_t i = 0; i < ELEMENTSOF(keys); i++)
                img_json_string_wipe(json_object_get(v, keys[i]));
}

static void auths_wipe(json_t *auths) {
        const char *key;
        json_t *v;
        json_object_foreach(auths, key, v) entry_wipe(v);
}

/* The base64 "user:password" of one entry into b64 (>= 1400 bytes): 1 =
 * found, 0 = no usable credentials (skip), -EINVAL malformed, -E2BIG. */
static int entry_basic(const json_t *v, char *b64, size_t b64sz) {
        const char *auth = json_string_value(json_object_get(v, "auth"));
        const char *user = json_string_value(json_object_get(v, "username"));
        const char *pass = json_string_value(json_object_get(v, "password"));
        if (auth && *auth) {
                size_t al = strlen(auth);
                unsigned char dec[1100];
                int dl = al < b64sz && al < 1400
                                 ? EVP_DecodeBlock(dec, (const unsigned char *) auth, (int) al)
                                 : -1;
                bool ok = dl > 0 && memchr(dec, ':', (size_t) dl);
                explicit_bzero(dec, sizeof(dec));
                if (!ok)
                        return -EINVAL;
                snprintf(b64, b64sz, "%s", auth);
                return 1;
        }
        if (!user || !pass)
                return 0; /* identity tokens, helpers: not supported */
        char up[IMG_REG_CRED_MAX];
        int n = snprintf(up, sizeof(up), "%s:%s", user, pass);
        if (n < 0 || (size_t) n >= sizeof(up)) {
                explicit_bzero(up, sizeof(up));
                return -E2BIG;
        }
        /* 4 output bytes per 3 input bytes + NUL: 1368 for 1023 */
        EVP_EncodeBlock((unsigned char *) b64, (const unsigned char *) up, n);
        explicit_bzero(up, sizeof(up));
        return 1;
}

static int add_cred(struct img_reg_config *c, const char *host, const char *basic,
                    const char *source) {
        struct img_reg_cred *cr = calloc(1, sizeof(*cr));
        if (!cr)
                return -ENOMEM;
        cr->next = c->creds;
        c->creds = cr;
        cr->host = strdup(host);
        cr->basic = strdup(basic);
        cr->source = strdup(source);
        return cr->host && cr->basic && cr->source ? 0 : -ENOMEM;
}

static int add_creds(struct img_reg_config *c, json_t *auths, const char *source,
                     struct wr_err *e) {
        const char *key;
        json_t *v;
        json_object_foreach(auths, key, v) {
                char b64[1400];
                int r = entry_basic(v, b64, sizeof(b64));
                if (r == -EINVAL)
                        return err_set(e, -EINVAL,
                                       "--docker-config %s: auths.\"%.100s\".auth: want "
                                       "base64 of \"user:password\"",
                                       source, key);
                if (r < 0)
                        return err_set(e, -EINVAL, "--docker-config %s: credentials too long",
                                       source);
                if (r == 0)
                        continue;
                char host[300];
                img_reg_url_host(key, host, sizeof(host));
                if (!strcmp(host, "index.docker.io") || !strcmp(host, "registry-1.docker.io"))
                        snprintf(host, sizeof(host), "docker.io");
                r = add_cred(c, host, b64, source);
                explicit_bzero(b64, sizeof(b64));
                if (r < 0)
                        return oom(e);
        }
        return 0;
}

int img_reg_config_parse_docker(struct img_reg_config *c, const char *json, size_t len,
                                const char *source, struct wr_err *e) {
        _cleanup_json_ json_t *root = NULL;
        json_t *auths = NULL;
        int r = load_json("--docker-config", "auths", "{\"auths\": {...}}", json, len, source,
                          &root, &auths, e);
        if (r < 0)
                return r;
        r = add_creds(c, auths, source, e);
        auths_wipe(auths);
        return r;
}

/* --- the loader --- */

/* Read a whole file (at most IMG_REG_CONFIG_MAX_BYTES + 1 bytes, so that
 * the parser sees an oversized one) into *ret (*len_ret bytes). */
int img_reg_config_read(const char *flag, const char *path, char **ret, size_t *len_ret,
                        struct wr_err *e) {
        _cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
        if (fd < 0)
                return err_set(e, -errno, "%s %s: %m", flag, path);
        size_t cap = IMG_REG_CONFIG_MAX_BYTES + 1, len = 0;
        _cleanup_free_ char *buf = malloc(cap);
        if (!buf)
                return oom(e);
        while (len < cap) {
                ssize_t n = RETRY_EINTR(read(fd, buf + len, cap - len));
                if (n < 0) {
                        int r = -errno;
                        explicit_bzero(buf, len);
                        return err_set(e, r, "%s %s: %s", flag, path, strerror(-r));
                }
                if (n == 0)
                        break;
                len += (size_t) n;
        }
        *ret = TAKE_PTR(buf);
        *len_ret = len;
        return 0;
}

static int load_one(struct img_reg_config *c, const char *flag, const char *path, bool docker,
                    struct wr_err *e) {
        char *buf = NULL;
        size_t len = 0;
        int r = img_reg_config_read(flag, path, &buf, &len, e);
        if (r < 0)
                return r;
        r = docker ? img_reg_config_parse_docker(c, buf, len, path, e)
                   : img_reg_config_parse_registries(c, buf, len, path, e);
        erase_and_free_n(buf, len); /* the docker config holds passwords */
        return r;
}

int img_reg_config_load(const char *registry_config, const char *docker_config,
                        struct img_reg_config **ret, struct wr_err *e) {
        _cleanup_(img_reg_config_freep) struct img_reg_config *c = calloc(1, sizeof(*c));
        if (!c)
                return oom(e);
        int r;
        if (registry_config && *registry_config) {
                snprintf(c->registry_config, sizeof(c->registry_config), "%s", registry_config);
                r = load_one(c, "--registry-config", registry_config, false, e);
                if (r < 0)
                        return r;
        }
        if (docker_config && *docker_config) {
                snprintf(c->docker_config, sizeof(c->docker_config), "%s", docker_config);
                r = load_one(c, "--docker-config", docker_config, true, e);
                if (r < 0)
                        return r;
        }
        *ret = TAKE_PTR(c);
        return 0;
}
