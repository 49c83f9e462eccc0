/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* An OCI distribution (Docker registry v2) client on libcurl, driven by the
 * caller's libuv loop: curl's multi interface with curl_multi_socket_action,
 * one uv_poll per socket curl opens and one uv_timer for curl's timeouts
 * (the standard libuv/curl integration, src/image/curl-uv.h). Nothing
 * blocks the loop; there are no threads. The configuration parsers and the
 * auth decisions are pure functions (registry-internal.h), fuzzed.
 *
 * A request fetches /v2/<path>/<manifests|blobs>/<object> from the
 * registry of a reference, trying its configured mirrors first, then the
 * registry itself. Authentication is handled inside a request: on a 401
 * with "WWW-Authenticate: Bearer realm=..,service=..,scope=.." a token is
 * fetched from the realm (with the docker config.json credentials of that
 * host as basic auth when there are any) and the request is repeated; a
 * "Basic" challenge is answered with those credentials. Tokens are cached
 * per host and repository.
 *
 * Transport: https, except plain http for registries on loopback
 * (localhost, 127.0.0.0/8, [::1]) and registries marked "insecure" in the
 * registry config, as Docker does. Redirects (blob storage) are followed
 * over http(s) only; curl does not forward the Authorization header to
 * another host.
 *
 * Bodies go either to memory (manifests, configs, tokens; size-capped) or
 * to an fd (layer blobs; page cache). With expect_digest the sha256 of the
 * body is computed while it streams and a mismatch fails the request with
 * DATA_LOSS. Blob requests are retried up to 3 times on transport errors,
 * 5xx and 429, resuming with "Range: bytes=N-" when part of the body has
 * arrived (a registry answering 200 instead of 206 is read from scratch).
 *
 * Registry config (--registry-config FILE, JSON):
 *   {"registries": {
 *      "docker.io": {"mirrors": ["https://mirror.example", "http://10.0.0.5:5000"]},
 *      "registry.lan:5000": {"insecure": true},
 *      "localhost:5000": {"insecure": false}     // force https on loopback
 *   }}
 * Credentials (--docker-config FILE, Docker's config.json):
 *   {"auths": {"registry.example": {"auth": base64("user:password")}}}
 *   ("username"/"password" fields are accepted too; Docker Hub's key is
 *   "https://index.docker.io/v1/"; credential helpers are not supported).
 *
 * Threads: the loop thread only. Library code: no logging above debug. */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <uv.h>

#include "basic/err.h"
#include "image/ref.h"

struct img_registry;
struct img_reg_req;

/* Load the registry config and the docker credentials (either path may be
 * NULL) into a new client on loop. Files are read once, here. loop = NULL
 * makes a client that can only be freed (to validate the files). Errors:
 * -ENOENT/-EACCES (file), -EINVAL (malformed JSON or value, the message
 * names the file and key), -ENOMEM. *ret owned by the caller:
 * img_registry_free. */
int img_registry_new(uv_loop_t *loop, const char *registry_config, const char *docker_config,
                     struct img_registry **ret, struct wr_err *e);

struct img_reg_config;

/* Like img_registry_new, with a configuration parsed already (by
 * warren-fetch from the bytes warrend handed it). Takes cfg, also on
 * error. */
int img_registry_new_config(uv_loop_t *loop, struct img_reg_config *cfg, struct img_registry **ret,
                            struct wr_err *e);

/* Verify TLS peers against the CA certificates in pem (len bytes, copied)
 * instead of the system's CA file (which warren-fetch cannot open once
 * confined). -ENOMEM. */
int img_registry_set_ca(struct img_registry *reg, const char *pem, size_t len);

/* Loopback-only mode (warrend --pull-loopback-only, the test suites): only
 * mirrors and registries on loopback are contacted, redirects are not
 * followed and token realms must be on loopback; a reference with no
 * loopback endpoint fails with NOT_FOUND before anything is resolved. */
void img_registry_set_loopback_only(struct img_registry *reg, bool on);

/* Cancel every request (their callbacks are not called) and free the
 * client; the poll and timer handles are closed on the loop (the memory
 * goes once the loop has run their close callbacks). NULL is fine. */
void img_registry_free(struct img_registry *reg);

/* Called once when a request ends, from the loop (never from inside a curl
 * callback, so it may start or cancel other requests). r = 0: the body is
 * complete (and matched expect_digest); otherwise e says why, with the
 * status: NOT_FOUND (404), UNAUTHENTICATED (401 after auth), PERMISSION_
 * DENIED (403), UNAVAILABLE (unreachable, 5xx, 429), DATA_LOSS (digest
 * mismatch), INVALID_ARGUMENT (oversized body). The request is freed right
 * after the callback returns. */
typedef void (*img_reg_done_fn)(struct img_reg_req *req, int r, const struct wr_err *e,
                                void *userdata);

struct img_reg_fetch {
        const struct img_ref *ref; /* registry (domain) and repository (path); copied */
        const char *kind;          /* "manifests" or "blobs" */
        const char *object;        /* tag or "sha256:..." */
        const char *accept;        /* Accept header value, or NULL */
        int fd;                    /* >= 0: write the body here (dup'ed); < 0: to memory */
        size_t max_body;           /* memory bodies: cap (0 = 4 MiB) */
        uint64_t max_size;         /* fd bodies: cap, e.g. the manifest's size (0 = none) */
        const char *expect_digest; /* verify the body's sha256 ("sha256:<hex>"), or NULL */
        bool retry;                /* retry transient failures (resume with Range) */
};

/* Start a fetch. Returns 0 (done will be called) or a negative errno when
 * it could not start (done is not called). *ret (may be NULL) is valid
 * until done runs or img_reg_req_cancel. */
int img_reg_fetch_start(struct img_registry *reg, const struct img_reg_fetch *f,
                        img_reg_done_fn done, void *userdata, struct img_reg_req **ret,
                        struct wr_err *e);

/* Stop a request: done is not called, the request is freed, bytes already
 * written to the fd stay there. Not from inside that request's done. */
void img_reg_req_cancel(struct img_reg_req *req);

/* Bytes of the body received so far (counting a resumed prefix). */
uint64_t img_reg_req_received(const struct img_reg_req *req);

/* The memory body (NUL-terminated; *len set when len != NULL), the
 * response Content-Type ("" when none) and the sha256 of the body
 * ("sha256:<hex>"). Valid inside done. */
const char *img_reg_req_body(const struct img_reg_req *req, size_t *len);
const char *img_reg_req_content_type(const struct img_reg_req *req);
const char *img_reg_req_digest(const struct img_reg_req *req);

/* The base URL the request used last ("http://127.0.0.1:5000"), for
 * messages. */
const char *img_reg_req_endpoint(const struct img_reg_req *req);

/* --- pure helpers (exported for the unit tests) --- */

/* Parse a WWW-Authenticate value ("Bearer realm="..",service="..",
 * scope=".."" or "Basic realm=".."). *scheme gets "bearer" or "basic"
 * (lower-case), params their values ("" when absent). -EINVAL when
 * malformed or another scheme. */
struct img_reg_challenge {
        char scheme[16];
        char realm[1024];
        char service[256];
        char scope[512];
};
int img_reg_challenge_parse(const char *value, struct img_reg_challenge *ret);
