/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* The shape of a compact JWS (header.payload.signature, base64url without
 * padding) as warrend's own identity tokens use it: the claims warrend
 * reads, and where the signed bytes and the signature are. Pure: no I/O,
 * no key material (wid_verify in wid.h checks the signature and the
 * claims). Runs on untrusted input (every bearer credential that is not
 * an API token) and is fuzzed: tests/fuzz/fuzz-jwt.c. */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define JWT_MAX_LEN 8192 /* longer credentials are refused unparsed */

struct jwt {
        char alg[16];  /* header "alg" */
        char kid[64];  /* header "kid" ("" when absent) */
        char iss[512]; /* claims; "" when absent */
        char sub[256];
        char aud[512]; /* a string "aud" (an array is refused) */
        char environment_id[64];
        int64_t exp, nbf, iat; /* 0 when absent (has_* say which) */
        bool has_exp, has_nbf, has_iat;
        size_t signed_len;     /* the bytes signed: token[0, signed_len) */
        unsigned char sig[64]; /* the decoded signature (ES256: r || s) */
        size_t sig_len;
};

/* Whether s (len bytes) has the outline of a compact JWS: three non-empty
 * base64url parts separated by two dots, at most JWT_MAX_LEN bytes. Cheap;
 * says nothing about the content. */
bool jwt_looks_like(const char *s, size_t len);

/* Parse token (len bytes, no NUL needed) into *out. 0; -EBADMSG when it
 * is not a JWS of the shape above (bad base64url, header or payload not a
 * JSON object, a claim of the wrong type or too long, a signature longer
 * than 64 bytes, "alg" missing; also when out of memory); -E2BIG beyond
 * JWT_MAX_LEN. */
int jwt_parse(const char *token, size_t len, struct jwt *out);

/* base64url (no padding, '=' tolerated at the end) of in[0, n) into out
 * (size bytes). The decoded length, or -EBADMSG (not base64url, or a
 * partial last group of one character) or -ENOBUFS (out too small). */
int jwt_b64url_decode(const char *in, size_t n, unsigned char *out, size_t size);
