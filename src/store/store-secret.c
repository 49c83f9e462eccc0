/* SPDX-License-Identifier: Apache-2.0 */
/* The secrets table: values encrypted at rest with AES-256-GCM under a
 * 32-byte key kept in its own file (mode 0600, directory 0700). */
#include "store/store-internal.h"

#include "basic/memfd.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/rand.h>

#define KEY_LEN 32
#define NONCE_LEN 12
#define TAG_LEN 16
#define AAD_LABEL "warren-secret-v1"

/* --- the key file --- */

static int read_key(const char *path, unsigned char key[KEY_LEN], struct wr_err *e) {
        _cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NOCTTY);
        if (fd < 0)
                return err_set(e, -errno, "open secrets key %s: %m", path);
        struct stat st;
        if (fstat(fd, &st) < 0)
                return err_set(e, -errno, "stat secrets key %s: %m", path);
        if (!S_ISREG(st.st_mode))
                return err_set(e, -EINVAL, "secrets key %s is not a regular file", path);
        if (st.st_mode & 077)
                return err_set(e, -EPERM,
                               "secrets key %s is accessible by group or others (mode %04o): "
                               "chmod 600 it",
                               path, (unsigned) (st.st_mode & 07777));
        if (st.st_size != KEY_LEN)
                return err_set(e, -EINVAL,
                               "secrets key %s has %lld bytes, expected %d: the file is "
                               "damaged; restore it from a backup",
                               path, (long long) st.st_size, KEY_LEN);
        ssize_t n = RETRY_EINTR(read(fd, key, KEY_LEN));
        if (n != KEY_LEN)
                return err_set(e, n < 0 ? -errno : -EIO, "read secrets key %s: short read", path);
        return 0;
}

/* Create the key file atomically: write a private temp file, fsync, link it
 * into place (never replacing a key someone else created first). */
static int create_key(const char *path, struct wr_err *e) {
        _cleanup_free_ char *copy = strdup(path);
        _cleanup_free_ char *tmp = NULL;
        if (!copy || asprintf(&tmp, "%s.tmp.%d", path, (int) getpid()) < 0)
                return err_set(e, -ENOMEM, "create secrets key: out of memory");
        const char *dir = dirname(copy);
        if (mkdir(dir, 0700) < 0 && errno != EEXIST)
                return err_set(e, -errno, "create directory %s: %m", dir);

        unsigned char key[KEY_LEN];
        if (RAND_bytes(key, sizeof(key)) != 1) {
                OPENSSL_cleanse(key, sizeof(key));
                return err_set(e, -EIO, "create secrets key: no randomness from OpenSSL");
        }
        _cleanup_close_ int fd =
                open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
        if (fd < 0) {
                OPENSSL_cleanse(key, sizeof(key));
                return err_set(e, -errno, "create %s: %m", tmp);
        }
        bool ok =
                RETRY_EINTR(write(fd, key, sizeof(key))) == (ssize_t) sizeof(key) && fsync(fd) == 0;
        int saved = errno;
        OPENSSL_cleanse(key, sizeof(key));
        fd = safe_close(fd);
        if (!ok) {
                unlink(tmp);
                return err_set(e, saved ? -saved : -EIO, "write %s: %s", tmp,
                               strerror(saved ? saved : EIO));
        }
        int r = 0;
        if (link(tmp, path) < 0 && errno != EEXIST)
                r = err_set(e, -errno, "install secrets key %s: %m", path);
        unlink(tmp);
        _cleanup_close_ int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (dfd >= 0)
                (void) fsync(dfd);
        return r;
}

int store_secret_key_ensure(struct store *s, struct wr_err *e) {
        if (s->key_loaded)
                return 0;
        if (s->has_keeper)
                return err_set(e, -EPERM, "the secrets key is kept by warren-signer");
        struct wr_err local = {0};
        int r = read_key(s->key_path, s->key, &local);
        if (r == -ENOENT) {
                r = create_key(s->key_path, e);
                if (r < 0)
                        return r;
                r = read_key(s->key_path, s->key, e);
        } else if (r < 0 && e)
                *e = local;
        if (r < 0)
                return r;
        s->key_loaded = true;
        return 0;
}

/* --- AEAD --- */

static void evp_ctx_freep(EVP_CIPHER_CTX **c) {
        EVP_CIPHER_CTX_free(*c);
}

/* The associated data binds a ciphertext to its environment and name, so a
 * row copied onto another name does not decrypt. */
static int make_aad(const char *env, const char *name, unsigned char **ret, size_t *len) {
        size_t a = sizeof(AAD_LABEL), b = strlen(env) + 1, c = strlen(name);
        unsigned char *p = malloc(a + b + c);
        if (!p)
                return -ENOMEM;
        memcpy(p, AAD_LABEL, a);
        memcpy(p + a, env, b);
        memcpy(p + a + b, name, c);
        *ret = p;
        *len = a + b + c;
        return 0;
}

/* AES-256-GCM of len bytes under key and nonce with aad; *ret (malloc'd)
 * holds ciphertext || tag. */
static int gcm_seal(const unsigned char *key, const unsigned char nonce[NONCE_LEN],
                    const unsigned char *aad, size_t aad_len, const unsigned char *plain,
                    size_t len, unsigned char **ret, size_t *ret_len, struct wr_err *e) {
        if (len > INT32_MAX - TAG_LEN)
                return err_set(e, -E2BIG, "encrypt secret: value too large");
        _cleanup_free_ unsigned char *out = malloc(len + TAG_LEN);
        _cleanup_(evp_ctx_freep) EVP_CIPHER_CTX *c = EVP_CIPHER_CTX_new();
        if (!out || !c)
                return err_set(e, -ENOMEM, "encrypt secret: out of memory");
        int n = 0, fin = 0;
        if (EVP_EncryptInit_ex(c, EVP_aes_256_gcm(), NULL, key, nonce) != 1 ||
            EVP_EncryptUpdate(c, NULL, &n, aad, (int) aad_len) != 1 ||
            EVP_EncryptUpdate(c, out, &n, plain, (int) len) != 1 ||
            EVP_EncryptFinal_ex(c, out + n, &fin) != 1 ||
            EVP_CIPHER_CTX_ctrl(c, EVP_CTRL_GCM_GET_TAG, TAG_LEN, out + n + fin) != 1)
                return err_set(e, -EIO, "encrypt secret: OpenSSL AES-256-GCM failed");
        *ret_len = (size_t) (n + fin) + TAG_LEN;
        *ret = TAKE_PTR(out);
        return 0;
}

/* The inverse of gcm_seal; *ret is malloc'd with a NUL after *ret_len
 * bytes. -EBADMSG when it does not authenticate. */
static int gcm_open(const unsigned char *key, const unsigned char nonce[NONCE_LEN],
                    const unsigned char *aad, size_t aad_len, const char *name,
                    const unsigned char *sealed, size_t len, unsigned char **ret, size_t *ret_len,
                    struct wr_err *e) {
        if (len < TAG_LEN || len > INT32_MAX)
                return err_set(e, -EBADMSG, "secret \"%s\": stored ciphertext is malformed", name);
        size_t clen = len - TAG_LEN;
        unsigned char *out = malloc(clen + 1);
        _cleanup_(evp_ctx_freep) EVP_CIPHER_CTX *c = EVP_CIPHER_CTX_new();
        if (!out || !c) {
                free(out);
                return err_set(e, -ENOMEM, "decrypt secret: out of memory");
        }
        int n = 0, fin = 0;
        unsigned char tag[TAG_LEN];
        memcpy(tag, sealed + clen, TAG_LEN);
        if (EVP_DecryptInit_ex(c, EVP_aes_256_gcm(), NULL, key, nonce) != 1 ||
            EVP_DecryptUpdate(c, NULL, &n, aad, (int) aad_len) != 1 ||
            EVP_DecryptUpdate(c, out, &n, sealed, (int) clen) != 1 ||
            EVP_CIPHER_CTX_ctrl(c, EVP_CTRL_GCM_SET_TAG, TAG_LEN, tag) != 1 ||
            EVP_DecryptFinal_ex(c, out + n, &fin) != 1) {
                erase_and_free_n(out, clen);
                return err_set(e, -EBADMSG,
                               "secret \"%s\" does not decrypt: wrong secrets key or a "
                               "tampered database",
                               name);
        }
        out[n + fin] = 0;
        *ret = out;
        *ret_len = (size_t) (n + fin);
        return 0;
}

/* A data key's label: SHA-256 of the value's associated data (any length
 * in, the 32 bytes a keeper takes out). */
static int datakey_label(const unsigned char *aad, size_t aad_len, unsigned char label[32],
                         struct wr_err *e) {
        unsigned int n = 0;
        if (EVP_Digest(aad, aad_len, label, &n, EVP_sha256(), NULL) != 1 || n != 32)
                return err_set(e, -EIO, "secret: OpenSSL SHA-256 failed");
        return 0;
}

static int datakey_new(struct store *s, const unsigned char label[32], uint8_t *dek,
                       uint8_t *wrapped, struct wr_err *e) {
        if (s->has_keeper)
                return s->keeper.datakey_new(s->keeper.ctx, label, 32, dek, wrapped, e);
        int r = store_secret_key_ensure(s, e);
        if (r < 0)
                return r;
        return signer_datakey_new(s->key, label, 32, dek, wrapped, e);
}

static int datakey_open(struct store *s, const unsigned char label[32], const uint8_t *wrapped,
                        uint8_t *dek, struct wr_err *e) {
        if (s->has_keeper)
                return s->keeper.datakey_open(s->keeper.ctx, label, 32, wrapped, dek, e);
        int r = store_secret_key_ensure(s, e);
        if (r < 0)
                return r;
        return signer_datakey_open(s->key, label, 32, wrapped, dek, e);
}

/* Seal under a fresh data key: nonce gets the value's nonce and the key's
 * wrapping (STORE_SEAL_NONCE_LEN bytes). */
static int seal(struct store *s, const char *env, const char *name, const unsigned char *plain,
                size_t len, unsigned char nonce[STORE_SEAL_NONCE_LEN], unsigned char **ret,
                size_t *ret_len, struct wr_err *e) {
        _cleanup_free_ unsigned char *aad = NULL;
        size_t aad_len;
        unsigned char label[32], dek[SIGNER_DEK_LEN];
        if (make_aad(env, name, &aad, &aad_len) < 0)
                return err_set(e, -ENOMEM, "encrypt secret: out of memory");
        int r = datakey_label(aad, aad_len, label, e);
        if (r < 0)
                return r;
        if (RAND_bytes(nonce, NONCE_LEN) != 1)
                return err_set(e, -EIO, "encrypt secret: no randomness from OpenSSL");
        r = datakey_new(s, label, dek, nonce + NONCE_LEN, e);
        if (r < 0)
                return err_prefix(e, r, "encrypt secret \"%s\"", name);
        r = gcm_seal(dek, nonce, aad, aad_len, plain, len, ret, ret_len, e);
        OPENSSL_cleanse(dek, sizeof(dek));
        return r;
}

/* Open a value: sealed with a data key (nonce of STORE_SEAL_NONCE_LEN
 * bytes), or directly under the secrets key (NONCE_LEN: only without a
 * keeper). */
static int open_sealed(struct store *s, const char *env, const char *name,
                       const unsigned char *sealed, size_t len, const unsigned char *nonce,
                       size_t nonce_len, unsigned char **ret, size_t *ret_len, struct wr_err *e) {
        _cleanup_free_ unsigned char *aad = NULL;
        size_t aad_len;
        if (!nonce || (nonce_len != NONCE_LEN && nonce_len != STORE_SEAL_NONCE_LEN))
                return err_set(e, -EBADMSG, "secret \"%s\": stored ciphertext is malformed", name);
        if (make_aad(env, name, &aad, &aad_len) < 0)
                return err_set(e, -ENOMEM, "decrypt secret: out of memory");
        if (nonce_len == NONCE_LEN) {
                if (s->has_keeper)
                        return err_set(e, -EBADMSG,
                                       "secret \"%s\" is sealed directly under the secrets key "
                                       "and was not rewrapped at start-up: restart warrend",
                                       name);
                int r = store_secret_key_ensure(s, e);
                if (r < 0)
                        return r;
                return gcm_open(s->key, nonce, aad, aad_len, name, sealed, len, ret, ret_len, e);
        }
        unsigned char label[32], dek[SIGNER_DEK_LEN];
        int r = datakey_label(aad, aad_len, label, e);
        if (r < 0)
                return r;
        r = datakey_open(s, label, nonce + NONCE_LEN, dek, e);
        if (r == -EBADMSG)
                return err_set(e, r,
                               "secret \"%s\" does not decrypt: wrong secrets key or a "
                               "tampered database",
                               name);
        if (r < 0)
                return err_prefix(e, r, "decrypt secret \"%s\"", name);
        r = gcm_open(dek, nonce, aad, aad_len, name, sealed, len, ret, ret_len, e);
        OPENSSL_cleanse(dek, sizeof(dek));
        return r;
}

int store_blob_seal(struct store *s, const char *label, const char *name, const void *plain,
                    size_t len, unsigned char nonce[STORE_SEAL_NONCE_LEN], unsigned char **ret,
                    size_t *ret_len, struct wr_err *e) {
        return seal(s, label, name, plain, len, nonce, ret, ret_len, e);
}

int store_blob_open(struct store *s, const char *label, const char *name, const void *sealed,
                    size_t len, const void *nonce, size_t nonce_len, unsigned char **ret,
                    size_t *ret_len, struct wr_err *e) {
        return open_sealed(s, label, name, sealed, len, nonce, nonce_len, ret, ret_len, e);
}

/* --- the keeper --- */

void store_set_keeper(struct store *s, const struct store_keeper *k) {
        s->keeper = *k;
        s->has_keeper = true;
        OPENSSL_cleanse(s->key, sizeof(s->key));
        s->key_loaded = false;
}

int store_secret_key_memfd(struct store *s, int *ret_fd, struct wr_err *e) {
        unsigned char key[KEY_LEN];
        struct wr_err local = {0};
        int r = read_key(s->key_path, key, &local);
        if (r == -ENOENT) {
                r = create_key(s->key_path, e);
                if (r >= 0)
                        r = read_key(s->key_path, key, e);
        } else if (r < 0 && e) {
                *e = local;
        }
        if (r >= 0) {
                const struct iovec iov = {key, KEY_LEN};
                r = memfd_sealed("warren-secrets-key", "secrets key", &iov, 1, ret_fd, e);
        }
        OPENSSL_cleanse(key, sizeof(key));
        return r;
}

/* Rewrap the rows of one table whose nonce column holds a bare 12-byte
 * nonce. sel: SELECT <rowid>, <env/label>, <name>, <sealed>, <nonce>;
 * upd: UPDATE ... SET <sealed> = ?2, <nonce> = ?3 WHERE <rowid> = ?1. */
static int rewrap_table(struct store *s, const char *sel, const char *upd, size_t *n,
                        struct wr_err *e) {
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        int r = store_stmt_prepare(s, sel, &st, e);
        if (r < 0)
                return r;
        for (;;) {
                int rc = sqlite3_step(st);
                if (rc == SQLITE_DONE)
                        return 0;
                if (rc != SQLITE_ROW)
                        return store_sqlite_error(s, rc, "rewrap secrets", e);
                const char *env = (const char *) sqlite3_column_text(st, 1);
                const char *name = (const char *) sqlite3_column_text(st, 2);
                if (!env || !name)
                        continue;
                unsigned char *plain = NULL, *sealed = NULL;
                size_t plain_len = 0, sealed_len = 0;
                unsigned char nonce[STORE_SEAL_NONCE_LEN];
                r = open_sealed(s, env, name, sqlite3_column_blob(st, 3),
                                (size_t) sqlite3_column_bytes(st, 3), sqlite3_column_blob(st, 4),
                                (size_t) sqlite3_column_bytes(st, 4), &plain, &plain_len, e);
                if (r < 0)
                        return r;
                r = seal(s, env, name, plain, plain_len, nonce, &sealed, &sealed_len, e);
                plain = erase_and_free_n(plain, plain_len);
                if (r < 0)
                        return r;
                _cleanup_stmt_ sqlite3_stmt *u = NULL;
                r = store_stmt_prepare(s, upd, &u, e);
                if (r >= 0) {
                        sqlite3_bind_int64(u, 1, sqlite3_column_int64(st, 0));
                        sqlite3_bind_blob64(u, 2, sealed, sealed_len, SQLITE_TRANSIENT);
                        sqlite3_bind_blob(u, 3, nonce, sizeof(nonce), SQLITE_TRANSIENT);
                        r = store_stmt_done(s, u, true, "rewrap a secret", e);
                }
                free(sealed);
                if (r < 0)
                        return r;
                (*n)++;
        }
}

int store_secrets_rewrap(struct store *s, size_t *n_ret, struct wr_err *e) {
        size_t n = 0;
        *n_ret = 0;
        int r = store_savepoint(s, e);
        if (r < 0)
                return r;
        r = rewrap_table(s,
                         "SELECT rowid, environment, name, ciphertext, nonce FROM secrets "
                         "WHERE length(nonce) = 12",
                         "UPDATE secrets SET ciphertext = ?2, nonce = ?3 WHERE rowid = ?1", &n, e);
        if (r >= 0)
                r = rewrap_table(s,
                                 "SELECT rowid, '" PROCESS_LABEL "', id, process, process_nonce "
                                 "FROM sandboxes WHERE process IS NOT NULL AND "
                                 "length(process_nonce) = 12",
                                 "UPDATE sandboxes SET process = ?2, process_nonce = ?3 WHERE "
                                 "rowid = ?1",
                                 &n, e);
        r = store_savepoint_end(s, r, e);
        if (r >= 0)
                *n_ret = n;
        return r;
}

int store_seal(struct store *s, const char *label, const char *name, const void *plain, size_t len,
               unsigned char **ret, size_t *ret_len, struct wr_err *e) {
        unsigned char nonce[STORE_SEAL_NONCE_LEN];
        _cleanup_free_ unsigned char *ct = NULL;
        size_t ct_len = 0;
        int r = store_blob_seal(s, label, name, plain, len, nonce, &ct, &ct_len, e);
        if (r < 0)
                return r;
        unsigned char *out = malloc(sizeof(nonce) + ct_len);
        if (!out)
                return err_set(e, -ENOMEM, "seal: out of memory");
        memcpy(out, nonce, sizeof(nonce));
        memcpy(out + sizeof(nonce), ct, ct_len);
        *ret = out;
        *ret_len = sizeof(nonce) + ct_len;
        return 0;
}

int store_unseal(struct store *s, const char *label, const char *name, const void *sealed,
                 size_t len, unsigned char **ret, size_t *ret_len, struct wr_err *e) {
        if (len < STORE_SEAL_NONCE_LEN)
                return err_set(e, -EBADMSG, "%s: sealed data is malformed", name);
        return store_blob_open(
                s, label, name, (const unsigned char *) sealed + STORE_SEAL_NONCE_LEN,
                len - STORE_SEAL_NONCE_LEN, sealed, STORE_SEAL_NONCE_LEN, ret, ret_len, e);
}

/* --- plaintext encoding: (u32 key length, key, u32 value length, value)* --- */

static void put_u32(unsigned char *p, uint32_t v) {
        p[0] = (unsigned char) (v >> 24);
        p[1] = (unsigned char) (v >> 16);
        p[2] = (unsigned char) (v >> 8);
        p[3] = (unsigned char) v;
}

static uint32_t get_u32(const unsigned char *p) {
        return (uint32_t) p[0] << 24 | (uint32_t) p[1] << 16 | (uint32_t) p[2] << 8 | p[3];
}

static int encode(const struct store_secret_entry *entries, size_t n, unsigned char **ret,
                  size_t *ret_len) {
        size_t total = 0;
        for (size_t i = 0; i < n; i++) {
                size_t kl = strlen(entries[i].key);
                if (kl > UINT32_MAX || entries[i].len > UINT32_MAX ||
                    total + 8 + kl + entries[i].len > INT32_MAX / 2)
                        return -E2BIG;
                total += 8 + kl + entries[i].len;
        }
        unsigned char *p = malloc(total ? total : 1), *q = p;
        if (!p)
                return -ENOMEM;
        for (size_t i = 0; i < n; i++) {
                size_t kl = strlen(entries[i].key);
                put_u32(q, (uint32_t) kl);
                memcpy(q + 4, entries[i].key, kl);
                q += 4 + kl;
                put_u32(q, (uint32_t) entries[i].len);
                if (entries[i].len)
                        memcpy(q + 4, entries[i].value, entries[i].len);
                q += 4 + entries[i].len;
        }
        *ret = p;
        *ret_len = total;
        return 0;
}

static int cmp_entry(const void *a, const void *b) {
        return strcmp(((const struct store_secret_entry *) a)->key,
                      ((const struct store_secret_entry *) b)->key);
}

static int decode(const unsigned char *p, size_t len, struct store_secret *ret) {
        size_t off = 0;
        while (off < len) {
                if (len - off < 4)
                        return -EBADMSG;
                uint32_t kl = get_u32(p + off);
                if (len - off - 4 < (size_t) kl + 4)
                        return -EBADMSG;
                uint32_t vl = get_u32(p + off + 4 + kl);
                if (len - off - 8 - kl < vl)
                        return -EBADMSG;
                struct store_secret_entry *l =
                        reallocarray(ret->entries, ret->n_entries + 1, sizeof(*l));
                if (!l)
                        return -ENOMEM;
                ret->entries = l;
                l = &ret->entries[ret->n_entries];
                *l = (struct store_secret_entry){0};
                l->key = strndup((const char *) p + off + 4, kl);
                l->value = malloc(vl ? vl : 1);
                ret->n_entries++;
                if (!l->key || !l->value)
                        return -ENOMEM;
                if (vl)
                        memcpy(l->value, p + off + 8 + kl, vl);
                l->len = vl;
                off += 8 + (size_t) kl + vl;
        }
        if (ret->n_entries > 1)
                qsort(ret->entries, ret->n_entries, sizeof(*ret->entries), cmp_entry);
        return 0;
}

/* --- the table --- */

void store_secret_clear(struct store_secret *sec) {
        if (!sec)
                return;
        for (size_t i = 0; sec->entries && i < sec->n_entries; i++) {
                free(sec->entries[i].key);
                /* The plaintext value: wiped before it is freed. */
                erase_and_free_n(sec->entries[i].value, sec->entries[i].len);
        }
        free(sec->entries);
        free(sec->name);
        *sec = (struct store_secret){0};
}

STORE_DEFINE_LIST_FREE(struct store_secret, store_secret_clear, secret_item_clear,
                       store_secret_list_free)

static int check_entries(const char *name, const struct store_secret_entry *entries, size_t n,
                         struct wr_err *e) {
        if (n == 0)
                return err_set(e, -EINVAL, "secret \"%s\": no value", name);
        for (size_t i = 0; i < n; i++) {
                if (!entries[i].key || (entries[i].len > 0 && !entries[i].value))
                        return err_set(e, -EINVAL, "secret \"%s\": entry %zu incomplete", name, i);
                if (!*entries[i].key && n > 1)
                        return err_set(e, -EINVAL,
                                       "secret \"%s\": a plain value cannot be mixed with keys",
                                       name);
                for (size_t j = 0; j < i; j++)
                        if (strcmp(entries[i].key, entries[j].key) == 0)
                                return err_set(e, -EINVAL, "secret \"%s\": key \"%s\" twice", name,
                                               entries[i].key);
        }
        return 0;
}

int store_secret_set(struct store *s, const char *env, const char *name,
                     const struct store_secret_entry *entries, size_t n, struct wr_err *e) {
        if (!env || !*env || !name || !*name)
                return err_set(e, -EINVAL, "set secret: environment and name required");
        int r = check_entries(name, entries, n, e);
        if (r < 0)
                return r;
        unsigned char *plain = NULL;
        size_t plain_len = 0;
        r = encode(entries, n, &plain, &plain_len);
        if (r < 0)
                return err_set(e, r, "set secret \"%s\": value too large", name);
        unsigned char nonce[STORE_SEAL_NONCE_LEN];
        _cleanup_free_ unsigned char *sealed = NULL;
        size_t sealed_len = 0;
        r = seal(s, env, name, plain, plain_len, nonce, &sealed, &sealed_len, e);
        plain = erase_and_free_n(plain, plain_len);
        if (r < 0)
                return r;

        r = store_savepoint(s, e);
        if (r < 0)
                return r;
        {
                _cleanup_stmt_ sqlite3_stmt *st = NULL;
                r = store_stmt_prepare(
                        s,
                        "INSERT INTO secrets (environment, name, ciphertext, nonce, updated) "
                        "VALUES (?, ?, ?, ?, ?) ON CONFLICT (environment, name) DO UPDATE SET "
                        "ciphertext = excluded.ciphertext, nonce = excluded.nonce, "
                        "updated = excluded.updated, version = secrets.version + 1",
                        &st, e);
                if (r < 0)
                        goto done;
                store_bind_text(st, 1, env);
                store_bind_text(st, 2, name);
                sqlite3_bind_blob64(st, 3, sealed, sealed_len, SQLITE_TRANSIENT);
                sqlite3_bind_blob(st, 4, nonce, sizeof(nonce), SQLITE_TRANSIENT);
                sqlite3_bind_int64(st, 5, store_now_ns());
                r = store_stmt_done(s, st, false, "store secret", e);
                if (r == -ENOENT)
                        err_set(e, r, "environment \"%s\" does not exist", env);
                if (r < 0)
                        goto done;
        }
        r = store_stmt_run(s, "DELETE FROM secret_keys WHERE environment = ? AND name = ?",
                           STORE_ARGS(env, name), false, "replace secret keys", e);
        if (r < 0)
                goto done;
        for (size_t i = 0; i < n; i++) {
                if (!*entries[i].key)
                        continue;
                r = store_stmt_run(s,
                                   "INSERT INTO secret_keys (environment, name, key) "
                                   "VALUES (?, ?, ?)",
                                   STORE_ARGS(env, name, entries[i].key), false, "store secret key",
                                   e);
                if (r < 0)
                        goto done;
        }
done:
        return store_savepoint_end(s, r, e);
}

int store_secret_version(struct store *s, const char *env, const char *name, int64_t *ret,
                         struct wr_err *e) {
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        int r = store_row_load(s, "SELECT version FROM secrets WHERE environment = ? AND name = ?",
                               STORE_ARGS(env, name), "load secret version", &st, e);
        if (r == 0)
                return err_set(e, -ENOENT, "secret \"%s\" not found", name);
        if (r < 0)
                return r;
        *ret = sqlite3_column_int64(st, 0);
        return 0;
}

int store_secret_get(struct store *s, const char *env, const char *name, struct store_secret *ret,
                     struct wr_err *e) {
        *ret = (struct store_secret){0};
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        int r = store_row_load(s,
                               "SELECT ciphertext, nonce, updated, version FROM secrets "
                               "WHERE environment = ? AND name = ?",
                               STORE_ARGS(env, name), "load secret", &st, e);
        if (r == 0)
                return err_set(e, -ENOENT, "secret \"%s\" not found", name);
        if (r < 0)
                return r;
        unsigned char *plain = NULL;
        size_t plain_len = 0;
        r = open_sealed(s, env, name, sqlite3_column_blob(st, 0),
                        (size_t) sqlite3_column_bytes(st, 0), sqlite3_column_blob(st, 1),
                        (size_t) sqlite3_column_bytes(st, 1), &plain, &plain_len, e);
        if (r < 0)
                return r;
        ret->updated_ns = sqlite3_column_int64(st, 2);
        ret->version = sqlite3_column_int64(st, 3);
        ret->name = strdup(name);
        r = ret->name ? decode(plain, plain_len, ret) : -ENOMEM;
        plain = erase_and_free_n(plain, plain_len);
        if (r < 0) {
                store_secret_clear(ret);
                return err_set(e, r, "secret \"%s\": %s", name,
                               r == -ENOMEM ? "out of memory" : "decrypted value is malformed");
        }
        return 0;
}

static int load_keys(struct store *s, const char *env, struct store_secret *sec, struct wr_err *e) {
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        int r = store_stmt_prepare(s,
                                   "SELECT key FROM secret_keys WHERE environment = ? AND "
                                   "name = ? ORDER BY key",
                                   &st, e);
        if (r < 0)
                return r;
        store_bind_text(st, 1, env);
        store_bind_text(st, 2, sec->name);
        for (;;) {
                int rc = sqlite3_step(st);
                if (rc == SQLITE_DONE)
                        return 0;
                if (rc != SQLITE_ROW)
                        return store_sqlite_error(s, rc, "list secret keys", e);
                struct store_secret_entry *l =
                        reallocarray(sec->entries, sec->n_entries + 1, sizeof(*l));
                if (!l)
                        return err_set(e, -ENOMEM, "list secrets: out of memory");
                sec->entries = l;
                l[sec->n_entries] = (struct store_secret_entry){.key = store_column_strdup(st, 0)};
                if (!l[sec->n_entries++].key)
                        return err_set(e, -ENOMEM, "list secrets: out of memory");
        }
}

/* A row of SELECT name, updated, version, with its keys (ctx: the
 * environment). */
static int secret_row(struct store *s, sqlite3_stmt *st, void *item, void *ctx, struct wr_err *e) {
        struct store_secret *sec = item;
        sec->name = store_column_strdup(st, 0);
        sec->updated_ns = sqlite3_column_int64(st, 1);
        sec->version = sqlite3_column_int64(st, 2);
        if (!sec->name)
                return err_set(e, -ENOMEM, "list secrets: out of memory");
        return load_keys(s, ctx, sec, e);
}

int store_secret_list(struct store *s, const char *env, struct store_secret **ret, size_t *n_ret,
                      struct wr_err *e) {
        *ret = NULL;
        *n_ret = 0;
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        int r = store_stmt_prepare(
                s, "SELECT name, updated, version FROM secrets WHERE environment = ? ORDER BY name",
                &st, e);
        if (r < 0)
                return r;
        store_bind_text(st, 1, env);
        return store_rows_collect(s, st, sizeof(struct store_secret), secret_row, secret_item_clear,
                                  (void *) env, "list secrets", (void **) ret, n_ret, e);
}

int store_secret_delete(struct store *s, const char *env, const char *name, struct wr_err *e) {
        int r = store_stmt_run(s, "DELETE FROM secrets WHERE environment = ? AND name = ?",
                               STORE_ARGS(env, name), true, "delete secret", e);
        if (r == -ENOENT)
                return err_set(e, r, "secret \"%s\" not found", name);
        return r;
}
