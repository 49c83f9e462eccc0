/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* Workload identity federation: short-lived OIDC tokens (JWT, ES256)
 * signed by warrend, and the documents a third party verifies them with
 * (/.well-known/openid-configuration, /.well-known/jwks.json).
 *
 * Keys: P-256 keys in DIR/identity-<unix seconds>.pem (PKCS#8, 0600).
 * At load the newest signs; when it is older than WID_KEY_ROTATE_SEC a
 * new one is made and signs from then on. The JWKS publishes the newest
 * WID_KEYS_PUBLISHED keys, so tokens signed by the previous key verify
 * until they expire (overlap). A key's kid is the first 16 hex digits of
 * the SHA-256 of its public key (DER). */

#include <stddef.h>
#include <stdint.h>

#include "basic/err.h"

#define WID_KEY_ROTATE_SEC (30 * 86400)
#define WID_KEYS_PUBLISHED 2
#define WID_MAX_LIFETIME_SEC 3600

struct wid_keys;

/* Load (and when missing or due, make) the keys in dir (which exists,
 * mode 0700). now = Unix seconds. 0 or a negative errno with e filled. */
int wid_keys_load(const char *dir, int64_t now, struct wid_keys **ret, struct wr_err *e);

/* The same with public halves only (each key's identity-<t>.pub, written
 * from the private key once for a key that has none), for a process that
 * will not sign: new keys are made by `maker --jws-key-make PATH`
 * (warren-signer), so their private halves never enter this process.
 * wid_mint fails until wid_keys_set_signer. maker NULL: none is made
 * (a dropped warrend: made before the drop, wid_keys_make_due). */
int wid_keys_load_public(const char *dir, int64_t now, const char *maker, struct wid_keys **ret,
                         struct wr_err *e);
void wid_keys_free(struct wid_keys *k);

/* Make a key in dir with `maker --jws-key-make PATH` when it has none or
 * its newest is due for rotation, and nothing else (warrend --user: at
 * start-up, still root, before the state dir is given to the user). 0 or
 * -errno with e. */
int wid_keys_make_due(const char *dir, int64_t now, const char *maker, struct wr_err *e);

/* The kid of the signing key. */
const char *wid_keys_kid(const struct wid_keys *k);

/* Who signs (docs/signer.md "Identity tokens"). By default the keys
 * loaded in warrend's memory sign; warrend hands the signing key to a
 * warren-signer and installs a signer that asks it: from then on warrend
 * holds only the public halves. sign: ES256 over in, r || s into rs. */
struct wid_signer {
        int (*sign)(void *ctx, const void *in, size_t len, uint8_t rs[64], struct wr_err *e);
        void *ctx;
};

/* Install s (copied; ctx outlives k) and drop every private key from
 * memory (the public halves stay, for verification and the JWKS). */
int wid_keys_set_signer(struct wid_keys *k, const struct wid_signer *s, struct wr_err *e);

/* The signing key's file, read into a sealed memfd (read position 0,
 * close-on-exec) for a signer process; the bytes pass through no buffer
 * that is not wiped. *ret_fd is the caller's. */
int wid_signing_key_memfd(const struct wid_keys *k, int *ret_fd, struct wr_err *e);

/* A signed JWT (header.payload.signature, base64url) with claims iss,
 * sub, aud, iat, nbf, exp (now + lifetime, lifetime clamped to 1..3600 s)
 * and environment_id; *ret malloc'd. 0 or a negative errno. */
int wid_mint(const struct wid_keys *k, const char *iss, const char *sub, const char *aud,
             const char *environment, int64_t now, int64_t lifetime, char **ret, struct wr_err *e);

/* The JWKS ({"keys": [...]}) and the OpenID discovery document for iss,
 * malloc'd JSON, or NULL when out of memory. */
char *wid_jwks_json(const struct wid_keys *k);
char *wid_openid_json(const char *iss);

/* The audience of the identity tokens warrend gives sandboxes
 * (identity=True): tokens for its own API. GetWorkloadIdentityToken
 * refuses to mint it. */
#define WID_API_AUDIENCE "warren-api"
/* Clock skew tolerated on nbf/iat (seconds). */
#define WID_SKEW_SEC 30

struct jwt;
/* Check an identity token (len bytes) against the keys: a JWS (jwt.h)
 * with alg ES256 whose kid names one of the loaded keys and whose
 * signature verifies with it; iss equal to iss, aud equal to aud, exp
 * present and after now, nbf/iat not after now + WID_SKEW_SEC, a
 * lifetime (exp - iat) of at most WID_MAX_LIFETIME_SEC. 0 with *out
 * filled; -EBADMSG (not a JWS), -EKEYREJECTED (unknown key or bad
 * signature), -EKEYEXPIRED (expired or not yet valid), -EACCES (another
 * issuer or audience), with e saying which. */
int wid_verify(const struct wid_keys *k, const char *token, size_t len, const char *iss,
               const char *aud, int64_t now, struct jwt *out, struct wr_err *e);
