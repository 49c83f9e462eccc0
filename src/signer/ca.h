/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* The per-daemon egress CA on disk (warrend's side; see docs/signer.md).
 *
 *   <state_dir>/keys/egress-ca.key    EC P-256 private key, PKCS#8 PEM, 0600
 *                                     (keys/ is 0700); read only by warrend,
 *                                     which hands it to warren-signer over
 *                                     an fd and never to warren-egress
 *   <state_dir>/egress-ca.crt         the CA certificate, PEM, 0644: what
 *                                     sandboxes trust
 *   <state_dir>/egress-ca.crt.old     the previous CA certificate, kept for
 *                                     one rotation
 *
 * The CA: subject CN "Warren egress CA <8 hex digits>", self-signed with
 * ECDSA-SHA256, basicConstraints critical CA:TRUE pathlen:0, keyUsage
 * critical keyCertSign+cRLSign, subjectKeyIdentifier, valid from an hour
 * ago for 10 years.
 *
 * Not thread-safe against itself: warrend calls these from one thread
 * (start-up, the rotate command). Files are written atomically (a private
 * temp file, fsync, link/rename, fsync of the directory): a crash leaves
 * either the old or the new file, and a key whose certificate is missing
 * or does not match gets a fresh certificate at the next
 * signer_ca_ensure(). Plaintext key material is wiped before it is
 * freed. */

#include "basic/err.h"

#define SIGNER_CA_KEY_FILE "keys/egress-ca.key"
#define SIGNER_CA_CERT_FILE "egress-ca.crt"
#define SIGNER_CA_OLD_CERT_FILE "egress-ca.crt.old"
#define SIGNER_CA_DAYS 3652
#define SIGNER_CA_PEM_MAX 16384 /* the largest key or cert file read */

/* Make sure the CA exists under state_dir (an existing directory): create
 * keys/ (0700) and a new key + certificate when there is no key; keep an
 * existing key, and issue a new certificate for it when egress-ca.crt is
 * missing or holds another key. Returns 1 when something was created, 0
 * when all was there, or a negative errno with a message naming the file
 * and the fix:
 *   -EPERM      the key file or keys/ is accessible by group or others
 *   -EINVAL     the key file is not a regular file / not a PEM private key
 *               (damaged: restore it or rotate)
 *   -EKEYEXPIRED the CA certificate has expired: rotate
 *   -EIO, -ENOMEM, or the errno of a failed file operation. */
int signer_ca_ensure(const char *state_dir, struct wr_err *e);

/* Replace the CA with a new key and certificate: the current certificate
 * (if any) becomes egress-ca.crt.old (replacing an older one), then the
 * new key and the new certificate are renamed into place. Sandboxes
 * created before keep trusting the old certificate until they are
 * recreated; a running warren-signer keeps signing with the old key until
 * it is restarted with the new one (signer_ca_fd). Returns 0 or a negative
 * errno with a message. */
int signer_ca_rotate(const char *state_dir, struct wr_err *e);

/* An fd for warren-signer --ca-fd: a sealed memfd (close-on-exec; clear it
 * in the child) holding the key PEM followed by the certificate PEM,
 * positioned at 0. The caller closes it once the child has been started.
 * Calls signer_ca_ensure() first. The buffer the PEM passed through is
 * wiped. Returns 0 and *ret_fd, or a negative errno with a message. */
int signer_ca_fd(const char *state_dir, int *ret_fd, struct wr_err *e);
