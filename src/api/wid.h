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

#include <stdint.h>

#include "basic/err.h"

#define WID_KEY_ROTATE_SEC (30 * 86400)
#define WID_KEYS_PUBLISHED 2
#define WID_MAX_LIFETIME_SEC 3600

struct wid_keys;

/* Load (and when missing or due, make) the keys in dir (which exists,
 * mode 0700). now = Unix seconds. 0 or a negative errno with e filled. */
int wid_keys_load(const char *dir, int64_t now, struct wid_keys **ret, struct wr_err *e);
void wid_keys_free(struct wid_keys *k);

/* The kid of the signing key. */
const char *wid_keys_kid(const struct wid_keys *k);

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
