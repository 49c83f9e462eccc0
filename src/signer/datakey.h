/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* Data keys under the secrets key (envelope encryption; docs/signer.md
 * "The secrets key").
 *
 * Every value the store seals gets a fresh 32-byte data key (DEK); the
 * value is encrypted with the DEK and only the DEK's wrapping is stored
 * next to it:
 *
 *   wrapped = nonce (12) || AES-256-GCM(secrets key, nonce, aad = label, DEK)
 *             (32 bytes) || tag (16)
 *
 * label binds the DEK to what it seals (the store passes the value's
 * associated data: a version string, the environment and the name), so a
 * wrapping copied onto another row does not open. In warrend the secrets
 * key lives only in warren-signer, which runs these functions on request;
 * the store runs them itself only when no signer keeps the key (tools,
 * unit tests) and once at start-up to rewrap values sealed before keys
 * had a keeper. Pure apart from OpenSSL's randomness; the caller wipes
 * dek. */

#include <stddef.h>
#include <stdint.h>

#include "basic/err.h"

#define SIGNER_SECRETS_KEY_LEN 32
#define SIGNER_DEK_LEN 32
#define SIGNER_WRAPPED_LEN 60 /* nonce 12 + DEK 32 + tag 16 */
#define SIGNER_LABEL_MAX 1024

/* A fresh DEK for label (1..SIGNER_LABEL_MAX bytes) and its wrapping
 * under key. 0, -EINVAL (label length) or -EIO (OpenSSL: no randomness,
 * cipher failure). */
int signer_datakey_new(const uint8_t key[SIGNER_SECRETS_KEY_LEN], const void *label,
                       size_t label_len, uint8_t dek[SIGNER_DEK_LEN],
                       uint8_t wrapped[SIGNER_WRAPPED_LEN], struct wr_err *e);

/* The DEK inside wrapped, when it was made by signer_datakey_new with
 * this key and label. 0, -EINVAL (label length), -EBADMSG (another key,
 * another label or tampered bytes: nothing written to dek) or -EIO. */
int signer_datakey_open(const uint8_t key[SIGNER_SECRETS_KEY_LEN], const void *label,
                        size_t label_len, const uint8_t wrapped[SIGNER_WRAPPED_LEN],
                        uint8_t dek[SIGNER_DEK_LEN], struct wr_err *e);
