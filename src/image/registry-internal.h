/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* Internals of the registry client (registry.h), shared by its files:
 *
 *   registry-config.c  the registry config (mirrors, insecure registries)
 *                      and the docker config.json credentials: pure
 *                      parsers over bytes (fuzzed by fuzz-registry-config)
 *                      plus a loader that reads the two files once
 *   registry-auth.c    authentication: answering a WWW-Authenticate
 *                      challenge, the token server's response, the token
 *                      cache. Decides; never does I/O
 *   registry.c         requests: endpoints, retries, bodies, digests, on
 *                      curl-uv.c (libcurl multi on libuv)
 *
 * Dependencies go one way: registry.c → registry-auth.c → registry-config.c.
 *
 * Secrets: credentials (base64 "user:password"), tokens and every
 * "Authorization: ..." header are wiped (explicit_bzero / erase_and_free)
 * before their memory is freed. Threads: the loop thread only. */

#include <stdbool.h>
#include <stddef.h>

#include "basic/err.h"
#include "image/registry.h"

/* --- configuration (registry-config.c; pure apart from the loader) --- */

#define IMG_REG_MAX_MIRRORS 8               /* per registry */
#define IMG_REG_CONFIG_MAX_BYTES (4u << 20) /* either file */
#define IMG_REG_MIRROR_URL_MAX 300          /* bytes of one mirror URL */
#define IMG_REG_CRED_MAX 1024               /* bytes of "user:password" */

/* How a registry without mirrors is reached. */
enum img_reg_transport {
        IMG_REG_TRANSPORT_DEFAULT = 0, /* http on loopback, else https */
        IMG_REG_TRANSPORT_HTTPS,       /* "insecure": false */
        IMG_REG_TRANSPORT_HTTP,        /* "insecure": true */
};

/* One "registries" entry of the registry config. */
struct img_reg_host {
        char *domain;
        char **mirrors; /* base URLs: http(s)://..., no trailing slash or /v2 */
        size_t n_mirrors;
        enum img_reg_transport transport;
        struct img_reg_host *next;
};

/* One "auths" entry of the docker config. */
struct img_reg_cred {
        char *host;   /* "127.0.0.1:5000", "docker.io" */
        char *basic;  /* base64("user:password"): a secret, wiped on free */
        char *source; /* the file, for messages */
        struct img_reg_cred *next;
};

struct img_reg_config {
        struct img_reg_host *hosts;
        struct img_reg_cred *creds;
        char registry_config[512]; /* the files read ("" = none), for messages */
        char docker_config[512];
};

/* Add the registries of a registry config (JSON, len bytes, need not be
 * NUL-terminated) to c: {"registries": {"HOST": {"mirrors": [URL...],
 * "insecure": BOOL}}}. source names the file in messages. Errors: -EINVAL
 * (malformed JSON, a wrong type, more than IMG_REG_MAX_MIRRORS mirrors, a
 * mirror that is not an http(s) URL of at most IMG_REG_MIRROR_URL_MAX
 * bytes without white space, more than IMG_REG_CONFIG_MAX_BYTES), -ENOMEM.
 * On error c keeps what was added so far (img_reg_config_free frees it). */
int img_reg_config_parse_registries(struct img_reg_config *c, const char *json, size_t len,
                                    const char *source, struct wr_err *e);

/* Add the credentials of a docker config.json to c: {"auths": {"HOST":
 * {"auth": base64("user:password")} or {"username": U, "password": P}}};
 * other entries (identity tokens, helpers) are skipped. Keys are reduced
 * to their host ("https://index.docker.io/v1/" → "docker.io"). Every copy
 * of a secret made here is wiped, the input excepted (the caller's).
 * Errors: -EINVAL (malformed JSON or auth, user:password longer than
 * IMG_REG_CRED_MAX, oversized input), -ENOMEM; c as above. */
int img_reg_config_parse_docker(struct img_reg_config *c, const char *json, size_t len,
                                const char *source, struct wr_err *e);

/* Read and parse both files (either path may be NULL or ""). Errors:
 * -ENOENT/-EACCES/... naming the file, the parse errors above. *ret owned
 * by the caller: img_reg_config_free. */
int img_reg_config_load(const char *registry_config, const char *docker_config,
                        struct img_reg_config **ret, struct wr_err *e);

/* Read one config file (at most IMG_REG_CONFIG_MAX_BYTES + 1 bytes, so a
 * parser sees an oversized one) into *ret (malloc'ed; the caller wipes
 * it: a docker config holds passwords). Errors name flag and path. */
int img_reg_config_read(const char *flag, const char *path, char **ret, size_t *len_ret,
                        struct wr_err *e);

/* Free c, wiping the credentials (NULL and half-built are fine). */
void img_reg_config_free(struct img_reg_config *c);
DEFINE_TRIVIAL_CLEANUP_FUNC(struct img_reg_config *, img_reg_config_free);

/* The registries entry for a reference domain, or NULL. */
const struct img_reg_host *img_reg_config_host(const struct img_reg_config *c, const char *domain);

/* The credentials for an endpoint host ("127.0.0.1:5000"; Docker Hub's
 * API hosts map to "docker.io"), or NULL. */
const struct img_reg_cred *img_reg_config_cred(const struct img_reg_config *c, const char *host);

/* "http://host:5000/v1/" → "host:5000" (truncated to outsz). */
void img_reg_url_host(const char *url, char *out, size_t outsz);

/* --- authentication (registry-auth.c) --- */

#define IMG_REG_AUTH_MAX 4096 /* bytes of an "Authorization: ..." header line */

/* What to do about a 401. */
enum img_reg_auth_step {
        IMG_REG_AUTH_RETRY = 0, /* repeat the request with header */
        IMG_REG_AUTH_TOKEN,     /* fetch a token from url, then repeat */
};

/* The 401 to answer. */
struct img_reg_auth_in {
        const char *www_auth;            /* the WWW-Authenticate value ("" = none) */
        bool answered;                   /* a challenge was answered already */
        const struct img_reg_cred *cred; /* for this endpoint, or NULL */
        const char *domain;              /* reference registry, for messages */
        const char *path;                /* repository (default token scope) */
        const char *what;                /* "image X" / "blob ...", for messages */
        bool loopback_only;              /* token realms must be on loopback */
};

struct img_reg_auth_out {
        enum img_reg_auth_step step;
        char header[IMG_REG_AUTH_MAX]; /* RETRY: "Authorization: Basic ..." (a secret) */
        char url[2048];                /* TOKEN: realm?service=..&scope=.. */
};

/* Decide how to answer a 401 (pure). Returns 0 with *out filled, or a
 * negative errno with e set to what the client gets: -EACCES
 * (UNAUTHENTICATED: refused after answering, unknown scheme, a Basic
 * challenge without credentials), -EPROTO (UNAVAILABLE: realm not http(s)),
 * -EPERM (FAILED_PRECONDITION: realm off loopback in loopback-only mode).
 * The caller wipes out->header when done with it. */
int img_reg_auth_answer(const struct img_reg_auth_in *in, struct img_reg_auth_out *out,
                        struct wr_err *e);

/* Turn a token server's 200 body (JSON {"token": T} or {"access_token": T})
 * into "Authorization: Bearer T" in header (>= IMG_REG_AUTH_MAX bytes).
 * The token must be printable ASCII without spaces and fit. Wipes every
 * copy it made (jansson's included) but not body. -EPROTO otherwise. */
int img_reg_auth_token_parse(const char *body, size_t len, char *header, size_t headersz);

/* "Authorization: Basic <cred->basic>" into header (a secret). -ENOBUFS
 * when it does not fit. */
int img_reg_auth_basic_header(const struct img_reg_cred *cred, char *header, size_t headersz);

/* Cached Authorization headers per endpoint and repository. */
struct img_reg_token;

/* The cached header for host (endpoint base URL) and path, or NULL. */
const char *img_reg_token_find(struct img_reg_token *list, const char *host, const char *path);

/* Cache header for host and path (replacing an older one). Best effort:
 * on -ENOMEM nothing is cached (and the old entry is gone). */
int img_reg_token_put(struct img_reg_token **list, const char *host, const char *path,
                      const char *header);

/* Forget the header for host and path (wiped). */
void img_reg_token_drop(struct img_reg_token **list, const char *host, const char *path);

/* Free the whole cache, wiping every header (NULL fine). */
void img_reg_tokens_free(struct img_reg_token *list);
