/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* Helpers shared by ca.c and mint.c (not for other modules). */

#include <openssl/x509.h>
#include <time.h>

/* Give x a random positive 128-bit serial number (never 0). 0 or -EIO. */
int signer_serial_set(X509 *x);

/* Add the extension nid with OpenSSL's config-string value (a constant
 * from this module, never input) to x, issuer as the issuer certificate
 * (x itself for a self-signed one). 0 or -EIO. */
int signer_ext_add(X509 *x, X509 *issuer, int nid, const char *value);

/* An ASN1_TIME as seconds since the epoch; 0 when unreadable. */
time_t signer_asn1_time(const ASN1_TIME *t);
