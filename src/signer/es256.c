/* SPDX-License-Identifier: Apache-2.0 */
/* ES256 signatures for JWS (es256.h). */
#include "signer/es256.h"

#include <errno.h>

#include <openssl/bn.h>
#include <openssl/ec.h>

int signer_es256_sign(EVP_PKEY *key, const void *in, size_t len, uint8_t rs[64], struct wr_err *e) {
        EVP_MD_CTX *md = EVP_MD_CTX_new();
        unsigned char der[128];
        size_t der_len = sizeof(der);
        int ok = md && EVP_DigestSignInit(md, NULL, EVP_sha256(), NULL, key) == 1 &&
                 EVP_DigestSign(md, der, &der_len, in, len) == 1;
        EVP_MD_CTX_free(md);
        if (!ok)
                return err_set(e, -EIO, "ES256: signing failed");
        const unsigned char *dp = der;
        ECDSA_SIG *sig = d2i_ECDSA_SIG(NULL, &dp, (long) der_len);
        ok = sig && BN_bn2binpad(ECDSA_SIG_get0_r(sig), rs, 32) == 32 &&
             BN_bn2binpad(ECDSA_SIG_get0_s(sig), rs + 32, 32) == 32;
        ECDSA_SIG_free(sig);
        return ok ? 0 : err_set(e, -EIO, "ES256: bad signature encoding");
}
