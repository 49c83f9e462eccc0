/* SPDX-License-Identifier: Apache-2.0 */
/* Leaf certificates minted with the egress CA (mint.h). */

#include "signer/mint.h"

#include <errno.h>
#include <openssl/bio.h>
#include <openssl/bn.h>
#include <openssl/err.h>
#include <openssl/core_names.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "net/host.h"
#include "signer/signer-internal.h"

struct signer_ca {
        EVP_PKEY *key;
        X509 *cert;
        time_t not_before, not_after;
};

static void bio_freep(BIO **b) {
        BIO_free(*b);
}
static void x509_freep(X509 **x) {
        X509_free(*x);
}
static void pkey_freep(EVP_PKEY **k) {
        EVP_PKEY_free(*k);
}
static void gens_freep(GENERAL_NAMES **g) {
        GENERAL_NAMES_free(*g);
}

int signer_serial_set(X509 *x) {
        unsigned char b[16];
        do {
                if (RAND_bytes(b, sizeof(b)) != 1)
                        return -EIO;
        } while (b[0] == 0 && memcmp(b, (unsigned char[16]){0}, sizeof(b)) == 0);
        BIGNUM *bn = BN_bin2bn(b, sizeof(b), NULL);
        ASN1_INTEGER *ai = bn ? BN_to_ASN1_INTEGER(bn, NULL) : NULL;
        int ok = ai && X509_set_serialNumber(x, ai) == 1;
        ASN1_INTEGER_free(ai);
        BN_free(bn);
        return ok ? 0 : -EIO;
}

int signer_ext_add(X509 *x, X509 *issuer, int nid, const char *value) {
        X509V3_CTX ctx;
        X509V3_set_ctx_nodb(&ctx);
        X509V3_set_ctx(&ctx, issuer, x, NULL, NULL, 0);
        X509_EXTENSION *ext = X509V3_EXT_conf_nid(NULL, &ctx, nid, value);
        int ok = ext && X509_add_ext(x, ext, -1) == 1;
        X509_EXTENSION_free(ext);
        return ok ? 0 : -EIO;
}

time_t signer_asn1_time(const ASN1_TIME *t) {
        struct tm tm;
        if (!t || ASN1_TIME_to_tm(t, &tm) != 1)
                return 0;
        return timegm(&tm);
}

int signer_ca_parse(const char *pem, size_t len, struct signer_ca **ret, struct wr_err *e) {
        if (len == 0 || len > INT32_MAX)
                return err_set(e, -EINVAL, "CA: empty input");
        _cleanup_(bio_freep) BIO *kb = BIO_new_mem_buf(pem, (int) len);
        _cleanup_(bio_freep) BIO *cb = BIO_new_mem_buf(pem, (int) len);
        if (!kb || !cb)
                return err_set(e, -ENOMEM, "CA: out of memory");
        _cleanup_(pkey_freep) EVP_PKEY *key = PEM_read_bio_PrivateKey(kb, NULL, NULL, NULL);
        _cleanup_(x509_freep) X509 *cert = PEM_read_bio_X509(cb, NULL, NULL, NULL);
        ERR_clear_error();
        if (!key)
                return err_set(e, -EINVAL, "CA: no PEM private key in the input");
        if (!cert)
                return err_set(e, -EINVAL, "CA: no PEM certificate in the input");
        if (X509_check_private_key(cert, key) != 1) {
                ERR_clear_error();
                return err_set(e, -EINVAL, "CA: the key does not match the certificate");
        }
        if (X509_check_ca(cert) < 1)
                return err_set(e, -EINVAL, "CA: the certificate is not a CA (basicConstraints)");
        struct signer_ca *ca = calloc(1, sizeof(*ca));
        if (!ca)
                return err_set(e, -ENOMEM, "CA: out of memory");
        ca->not_before = signer_asn1_time(X509_get0_notBefore(cert));
        ca->not_after = signer_asn1_time(X509_get0_notAfter(cert));
        ca->key = TAKE_PTR(key);
        ca->cert = TAKE_PTR(cert);
        *ret = ca;
        return 0;
}

void signer_ca_free(struct signer_ca *ca) {
        if (!ca)
                return;
        EVP_PKEY_free(ca->key);
        X509_free(ca->cert);
        free(ca);
}

time_t signer_ca_not_after(const struct signer_ca *ca) {
        return ca ? ca->not_after : 0;
}

/* The leaf's public key: DER-exact, and a type and size TLS clients take. */
static int leaf_key(const uint8_t *spki, size_t len, EVP_PKEY **ret, struct wr_err *e) {
        if (len == 0 || len > 65536)
                return err_set(e, -EKEYREJECTED, "public key: %zu bytes", len);
        const unsigned char *p = spki;
        _cleanup_(pkey_freep) EVP_PKEY *k = d2i_PUBKEY(NULL, &p, (long) len);
        if (!k || p != spki + len) {
                ERR_clear_error();
                return err_set(e, -EKEYREJECTED,
                               "public key: not a DER SubjectPublicKeyInfo OpenSSL reads");
        }
        unsigned char *again = NULL;
        int n = i2d_PUBKEY(k, &again);
        bool same = n == (int) len && memcmp(again, spki, len) == 0;
        OPENSSL_free(again);
        if (!same)
                return err_set(e, -EKEYREJECTED, "public key: not in canonical DER");
        int bits = EVP_PKEY_get_bits(k);
        switch (EVP_PKEY_get_base_id(k)) {
        case EVP_PKEY_EC: {
                char group[64] = "";
                size_t gl = 0;
                if (EVP_PKEY_get_group_name(k, group, sizeof(group), &gl) != 1)
                        return err_set(e, -EKEYREJECTED, "public key: EC without a named group");
                if (strcmp(group, "prime256v1") && strcmp(group, "P-256") &&
                    strcmp(group, "secp384r1") && strcmp(group, "P-384"))
                        return err_set(e, -EKEYREJECTED,
                                       "public key: EC group %.32s (want P-256 or P-384)", group);
                break;
        }
        case EVP_PKEY_RSA:
                if (bits < 2048 || bits > 4096)
                        return err_set(e, -EKEYREJECTED,
                                       "public key: RSA of %d bits (want 2048..4096)", bits);
                break;
        default:
                return err_set(e, -EKEYREJECTED, "public key: type %d (want EC P-256/P-384 or RSA)",
                               EVP_PKEY_get_base_id(k));
        }
        *ret = TAKE_PTR(k);
        return 0;
}

/* subjectAltName with the one name: DNS:host or IP:address. */
static int add_san(X509 *x, const struct net_host *h, bool critical) {
        _cleanup_(gens_freep) GENERAL_NAMES *gens = sk_GENERAL_NAME_new_null();
        GENERAL_NAME *gn = GENERAL_NAME_new();
        if (!gens || !gn || sk_GENERAL_NAME_push(gens, gn) <= 0) {
                GENERAL_NAME_free(gn);
                return -ENOMEM;
        }
        if (h->kind == NET_HOST_IP) {
                ASN1_OCTET_STRING *o = ASN1_OCTET_STRING_new();
                if (!o || ASN1_OCTET_STRING_set(o, h->addr.bytes,
                                                h->addr.family == AF_INET ? 4 : 16) != 1) {
                        ASN1_OCTET_STRING_free(o);
                        return -ENOMEM;
                }
                GENERAL_NAME_set0_value(gn, GEN_IPADD, o);
        } else {
                ASN1_IA5STRING *s = ASN1_IA5STRING_new();
                if (!s || ASN1_STRING_set(s, h->name, (int) strlen(h->name)) != 1) {
                        ASN1_IA5STRING_free(s);
                        return -ENOMEM;
                }
                GENERAL_NAME_set0_value(gn, GEN_DNS, s);
        }
        return X509_add1_ext_i2d(x, NID_subject_alt_name, gens, critical ? 1 : 0,
                                 X509V3_ADD_DEFAULT) == 1
                       ? 0
                       : -EIO;
}

int signer_mint(const struct signer_ca *ca, const char *host, const uint8_t *spki, size_t spki_len,
                time_t now, uint8_t **ret_der, size_t *ret_len, struct wr_err *e) {
        struct net_host h;
        size_t hl = strnlen(host, NET_HOST_MAX + 1);
        if (hl == 0 || hl > NET_HOST_MAX ||
            net_host_canon(host, hl, WR_FAULT_CLIENT, &h, NULL) < 0 || strcmp(h.name, host))
                return err_set(e, -EINVAL, "host \"%.64s\" is not canonical", host);
        time_t nb = now - SIGNER_LEAF_BEFORE_S, na = now + SIGNER_LEAF_DAYS * 86400;
        if (nb < ca->not_before)
                nb = ca->not_before;
        if (na > ca->not_after)
                na = ca->not_after;
        if (ca->not_after <= now || nb >= na)
                return err_set(e, -EKEYEXPIRED, "the egress CA has expired: rotate it");
        _cleanup_(pkey_freep) EVP_PKEY *pub = NULL;
        int r = leaf_key(spki, spki_len, &pub, e);
        if (r < 0)
                return r;

        _cleanup_(x509_freep) X509 *x = X509_new();
        if (!x)
                return err_set(e, -ENOMEM, "mint: out of memory");
        bool long_name = hl > 64; /* ub-common-name */
        X509_NAME *subj = X509_get_subject_name(x);
        bool ok = X509_set_version(x, X509_VERSION_3) == 1 && signer_serial_set(x) == 0 &&
                  X509_set_issuer_name(x, X509_get_subject_name(ca->cert)) == 1 &&
                  (long_name ||
                   X509_NAME_add_entry_by_NID(subj, NID_commonName, MBSTRING_ASC,
                                              (const unsigned char *) host, -1, -1, 0) == 1) &&
                  ASN1_TIME_set(X509_getm_notBefore(x), nb) &&
                  ASN1_TIME_set(X509_getm_notAfter(x), na) && X509_set_pubkey(x, pub) == 1 &&
                  add_san(x, &h, long_name) == 0 &&
                  signer_ext_add(x, ca->cert, NID_basic_constraints, "critical,CA:FALSE") == 0 &&
                  signer_ext_add(x, ca->cert, NID_key_usage, "critical,digitalSignature") == 0 &&
                  signer_ext_add(x, ca->cert, NID_ext_key_usage, "serverAuth") == 0 &&
                  signer_ext_add(x, ca->cert, NID_subject_key_identifier, "hash") == 0 &&
                  signer_ext_add(x, ca->cert, NID_authority_key_identifier, "keyid:always") == 0 &&
                  X509_sign(x, ca->key, EVP_sha256()) > 0;
        if (!ok) {
                unsigned long err = ERR_get_error();
                char buf[160] = "";
                ERR_error_string_n(err, buf, sizeof(buf));
                ERR_clear_error();
                return err_set(e, -EIO, "mint: OpenSSL: %s", err ? buf : "failed");
        }
        int n = i2d_X509(x, NULL);
        if (n <= 0)
                return err_set(e, -EIO, "mint: DER encoding failed");
        uint8_t *der = malloc((size_t) n);
        if (!der)
                return err_set(e, -ENOMEM, "mint: out of memory");
        unsigned char *p = der;
        if (i2d_X509(x, &p) != n) {
                free(der);
                return err_set(e, -EIO, "mint: DER encoding failed");
        }
        *ret_der = der;
        *ret_len = (size_t) n;
        return 0;
}
