/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* ES256 as JWS wants it (RFC 7518 3.4): ECDSA P-256 over SHA-256 of in,
 * the signature as r || s (32 bytes each, not DER). Used by warren-signer
 * for identity tokens, and by warrend when no signer keeps the key. */

#include <openssl/evp.h>
#include <stddef.h>
#include <stdint.h>

#include "basic/err.h"

int signer_es256_sign(EVP_PKEY *key, const void *in, size_t len, uint8_t rs[64], struct wr_err *e);
