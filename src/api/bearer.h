/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* API tokens on the wire. A token is "wt_" + 16 hex digits (its public id,
 * stored as "tk-" + the same digits) + "_" + 64 hex digits (256 random
 * bits). Callers send it as the gRPC metadata `authorization: Bearer
 * <token>`; the store keeps only its SHA-256. Pure functions: no I/O, no
 * allocation (the parser runs on untrusted input and is fuzzed:
 * tests/fuzz/fuzz-bearer.c). */

#include <stdbool.h>
#include <stddef.h>

#define BEARER_TOKEN_LEN (3 + 16 + 1 + 64)
#define BEARER_ID_LEN (3 + 16) /* "tk-" + 16 hex */

struct bearer {
        char id[BEARER_ID_LEN + 1]; /* "tk-..." */
        const char *token;          /* points into the header value */
        size_t token_len;           /* BEARER_TOKEN_LEN */
};

/* Parse an authorization header value: the scheme "Bearer" (any case),
 * one or more spaces or tabs, the token, optional trailing spaces or
 * tabs. 0 with *out filled; -EINVAL when the value is not a Bearer
 * credential (missing scheme, another scheme, empty, embedded NUL or
 * control characters); -EBADMSG when it is one but the token does not
 * have the shape above. len is the value's length (a NUL inside is
 * refused). */
int bearer_parse(const char *value, size_t len, struct bearer *out);

/* The credential of a Bearer authorization value, whatever its shape (an
 * API token, an identity JWT): the same scheme, space and control
 * character rules as bearer_parse. 0 with *cred pointing into value and
 * *cred_len > 0, or -EINVAL. */
int bearer_credential(const char *value, size_t len, const char **cred, size_t *cred_len);

/* Format a token from its 8-byte id and 32 secret bytes into out
 * (BEARER_TOKEN_LEN + 1 bytes) and its id into id (BEARER_ID_LEN + 1). */
void bearer_format(const unsigned char id[8], const unsigned char secret[32], char *out,
                   char *id_out);
