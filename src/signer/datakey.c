/* SPDX-License-Identifier: Apache-2.0 */
/* Data keys wrapped under the secrets key (datakey.h). */
#include "signer/datakey.h"

#include <errno.h>
#include <stdbool.h>
#include <string.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/rand.h>

#define NONCE_LEN 12
#define TAG_LEN 16

_Static_assert(NONCE_LEN + SIGNER_DEK_LEN + TAG_LEN == SIGNER_WRAPPED_LEN, "wrapped layout");

static int label_check(size_t label_len, struct wr_err *e) {
        if (label_len == 0 || label_len > SIGNER_LABEL_MAX)
                return err_set(e, -EINVAL, "data key label of %zu bytes, outside 1..%u", label_len,
                               SIGNER_LABEL_MAX);
        return 0;
}

int signer_datakey_new(const uint8_t key[SIGNER_SECRETS_KEY_LEN], const void *label,
                       size_t label_len, uint8_t dek[SIGNER_DEK_LEN],
                       uint8_t wrapped[SIGNER_WRAPPED_LEN], struct wr_err *e) {
        int r = label_check(label_len, e);
        if (r < 0)
                return r;
        uint8_t fresh[SIGNER_DEK_LEN];
        if (RAND_bytes(fresh, sizeof(fresh)) != 1 || RAND_bytes(wrapped, NONCE_LEN) != 1) {
                OPENSSL_cleanse(fresh, sizeof(fresh));
                return err_set(e, -EIO, "data key: no randomness from OpenSSL");
        }
        EVP_CIPHER_CTX *c = EVP_CIPHER_CTX_new();
        int n = 0, fin = 0;
        bool ok = c && EVP_EncryptInit_ex(c, EVP_aes_256_gcm(), NULL, key, wrapped) == 1 &&
                  EVP_EncryptUpdate(c, NULL, &n, label, (int) label_len) == 1 &&
                  EVP_EncryptUpdate(c, wrapped + NONCE_LEN, &n, fresh, SIGNER_DEK_LEN) == 1 &&
                  n == SIGNER_DEK_LEN &&
                  EVP_EncryptFinal_ex(c, wrapped + NONCE_LEN + n, &fin) == 1 && fin == 0 &&
                  EVP_CIPHER_CTX_ctrl(c, EVP_CTRL_GCM_GET_TAG, TAG_LEN,
                                      wrapped + NONCE_LEN + SIGNER_DEK_LEN) == 1;
        EVP_CIPHER_CTX_free(c);
        if (!ok) {
                OPENSSL_cleanse(fresh, sizeof(fresh));
                return err_set(e, -EIO, "data key: OpenSSL AES-256-GCM failed");
        }
        memcpy(dek, fresh, SIGNER_DEK_LEN);
        OPENSSL_cleanse(fresh, sizeof(fresh));
        return 0;
}

int signer_datakey_open(const uint8_t key[SIGNER_SECRETS_KEY_LEN], const void *label,
                        size_t label_len, const uint8_t wrapped[SIGNER_WRAPPED_LEN],
                        uint8_t dek[SIGNER_DEK_LEN], struct wr_err *e) {
        int r = label_check(label_len, e);
        if (r < 0)
                return r;
        uint8_t out[SIGNER_DEK_LEN + 16], tag[TAG_LEN];
        memcpy(tag, wrapped + NONCE_LEN + SIGNER_DEK_LEN, TAG_LEN);
        EVP_CIPHER_CTX *c = EVP_CIPHER_CTX_new();
        if (!c)
                return err_set(e, -EIO, "data key: out of memory");
        int n = 0, fin = 0;
        bool ok = EVP_DecryptInit_ex(c, EVP_aes_256_gcm(), NULL, key, wrapped) == 1 &&
                  EVP_DecryptUpdate(c, NULL, &n, label, (int) label_len) == 1 &&
                  EVP_DecryptUpdate(c, out, &n, wrapped + NONCE_LEN, SIGNER_DEK_LEN) == 1 &&
                  EVP_CIPHER_CTX_ctrl(c, EVP_CTRL_GCM_SET_TAG, TAG_LEN, tag) == 1;
        bool authentic = ok && EVP_DecryptFinal_ex(c, out + n, &fin) == 1;
        EVP_CIPHER_CTX_free(c);
        if (!ok) {
                OPENSSL_cleanse(out, sizeof(out));
                return err_set(e, -EIO, "data key: OpenSSL AES-256-GCM failed");
        }
        if (!authentic || n + fin != SIGNER_DEK_LEN) {
                OPENSSL_cleanse(out, sizeof(out));
                return err_set(e, -EBADMSG,
                               "the data key does not open: another secrets key, another "
                               "value, or tampered bytes");
        }
        memcpy(dek, out, SIGNER_DEK_LEN);
        OPENSSL_cleanse(out, sizeof(out));
        return 0;
}
