/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* Leaf certificates for intercepted TLS, minted with the egress CA's key
 * (warren-signer's core; also used by the unit tests). No I/O: the CA
 * arrives as PEM bytes, certificates leave as DER bytes.
 *
 * A leaf: version 3, a random 128-bit serial, issuer = the CA's subject,
 * subject CN=host (empty when host is longer than the 64 characters a CN
 * may hold; subjectAltName is then critical), subjectAltName DNS:host or
 * IP:address, basicConstraints critical CA:FALSE, keyUsage critical
 * digitalSignature, extendedKeyUsage serverAuth, subject and authority key
 * identifiers, notBefore now - 1 h and notAfter now + 7 days, both clamped
 * into the CA's validity; signed ECDSA-SHA256 (SHA-256 with an RSA CA).
 * Leaf public keys: EC P-256/P-384, or RSA 2048..4096 bits. */

#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "basic/err.h"

#define SIGNER_LEAF_BEFORE_S 3600
#define SIGNER_LEAF_DAYS 7

struct signer_ca; /* the CA key and certificate in memory */

/* Parse the CA from pem[0..len): one private key and one certificate, in
 * either order, the key matching the certificate's public key and the
 * certificate a CA (basicConstraints CA:TRUE). *ret owns both; free with
 * signer_ca_free (which frees the key through OpenSSL, cleansing it). The
 * caller wipes pem. -EINVAL with a message, or -ENOMEM. */
int signer_ca_parse(const char *pem, size_t len, struct signer_ca **ret, struct wr_err *e);

/* Free a CA (NULL ok). */
void signer_ca_free(struct signer_ca *ca);

/* The CA's notAfter as seconds since the epoch (0 when unreadable). */
time_t signer_ca_not_after(const struct signer_ca *ca);

/* Mint a leaf for host (canonical, see signer_host_canonical) and the
 * public key spki[0..spki_len) (DER SubjectPublicKeyInfo) at time now.
 * Returns 0 and *ret_der / *ret_len (a malloc'd DER certificate; the caller
 * frees), or:
 *   -EINVAL      host not canonical
 *   -EKEYREJECTED the key does not parse, is not DER-exact, or has an
 *                unsupported type or size
 *   -EKEYEXPIRED the CA has expired at now
 *   -EIO / -ENOMEM OpenSSL failed
 * with a short message in e. */
int signer_mint(const struct signer_ca *ca, const char *host, const uint8_t *spki, size_t spki_len,
                time_t now, uint8_t **ret_der, size_t *ret_len, struct wr_err *e);
