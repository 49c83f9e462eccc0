/* SPDX-License-Identifier: Apache-2.0 */
/* Workload identity federation tokens (wid.h): P-256 keys on disk, ES256
 * JWTs, the JWKS and the discovery document. */
#include "api/wid.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <jansson.h>
#include <openssl/bn.h>
#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/ec.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/sha.h>
#include <openssl/x509.h>

#include "api/jwt.h"
#include "basic/memfd.h"
#include "signer/es256.h"
#include "basic/macro.h"

struct wid_key {
        EVP_PKEY *pkey;
        int64_t made; /* Unix seconds, from the file name */
        char kid[17];
        char x[64], y[64]; /* base64url of the 32-byte coordinates */
};

struct wid_keys {
        struct wid_key keys[WID_KEYS_PUBLISHED]; /* [0] = newest: signs */
        size_t n;
        char *signing_path; /* keys[0]'s file */
        struct wid_signer signer;
        bool has_signer;  /* signatures come from signer */
        bool public_only; /* loaded without private halves (a signer will sign) */
};

static void b64url(const unsigned char *in, size_t n, char *out, size_t size) {
        static const char a[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
        size_t o = 0;
        for (size_t i = 0; i < n && o + 4 < size; i += 3) {
                uint32_t v = (uint32_t) in[i] << 16;
                if (i + 1 < n)
                        v |= (uint32_t) in[i + 1] << 8;
                if (i + 2 < n)
                        v |= in[i + 2];
                out[o++] = a[(v >> 18) & 63];
                out[o++] = a[(v >> 12) & 63];
                if (i + 1 < n)
                        out[o++] = a[(v >> 6) & 63];
                if (i + 2 < n)
                        out[o++] = a[v & 63];
        }
        out[o] = 0;
}

static char *b64url_alloc(const unsigned char *in, size_t n) {
        size_t size = (n + 2) / 3 * 4 + 5;
        char *out = malloc(size);
        if (out)
                b64url(in, n, out, size);
        return out;
}

/* kid and coordinates of k->pkey. */
static int key_fill(struct wid_key *k) {
        unsigned char *der = NULL;
        int len = i2d_PUBKEY(k->pkey, &der);
        if (len <= 0)
                return -EINVAL;
        unsigned char h[32];
        SHA256(der, (size_t) len, h);
        OPENSSL_free(der);
        for (int i = 0; i < 8; i++)
                snprintf(k->kid + 2 * i, 3, "%02x", h[i]);
        BIGNUM *x = NULL, *y = NULL;
        int r = -EINVAL;
        if (EVP_PKEY_get_bn_param(k->pkey, OSSL_PKEY_PARAM_EC_PUB_X, &x) == 1 &&
            EVP_PKEY_get_bn_param(k->pkey, OSSL_PKEY_PARAM_EC_PUB_Y, &y) == 1) {
                unsigned char bx[32], by[32];
                if (BN_bn2binpad(x, bx, 32) == 32 && BN_bn2binpad(y, by, 32) == 32) {
                        b64url(bx, 32, k->x, sizeof(k->x));
                        b64url(by, 32, k->y, sizeof(k->y));
                        r = 0;
                }
        }
        BN_free(x);
        BN_free(y);
        return r;
}

/* The public half of a key, written next to it (identity-<t>.pub) so
 * that a process that does not sign never parses the private key. */
static int pub_write(const char *pub, EVP_PKEY *pkey) {
        char tmp[4200];
        snprintf(tmp, sizeof(tmp), "%s.tmp", pub);
        FILE *f = fopen(tmp, "we");
        int ok = f && PEM_write_PUBKEY(f, pkey) == 1;
        if (f && fclose(f) != 0)
                ok = 0;
        if (ok && rename(tmp, pub) == 0)
                return 0;
        unlink(tmp);
        return -EIO;
}

static int key_make(const char *dir, int64_t now, struct wr_err *e) {
        EVP_PKEY *pkey = EVP_EC_gen("P-256");
        if (!pkey)
                return err_set(e, -EIO, "identity key: cannot generate a P-256 key");
        char path[4096], tmp[4200];
        snprintf(path, sizeof(path), "%s/identity-%lld.pem", dir, (long long) now);
        snprintf(tmp, sizeof(tmp), "%s.tmp", path);
        int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
        FILE *f = fd >= 0 ? fdopen(fd, "w") : NULL;
        int r = 0;
        if (!f || PEM_write_PrivateKey(f, pkey, NULL, NULL, 0, NULL, NULL) != 1)
                r = err_set(e, -EIO, "identity key: cannot write %s", tmp);
        if (f && fclose(f) != 0 && r == 0)
                r = err_set(e, -EIO, "identity key: cannot write %s", tmp);
        if (!f && fd >= 0)
                close(fd);
        if (r == 0 && rename(tmp, path) < 0)
                r = err_set(e, -errno, "identity key: rename %s: %s", tmp, strerror(errno));
        if (r == 0) {
                char pub[4096];
                snprintf(pub, sizeof(pub), "%s/identity-%lld.pub", dir, (long long) now);
                (void) pub_write(pub, pkey);
        }
        if (r < 0)
                unlink(tmp);
        EVP_PKEY_free(pkey);
        return r;
}

static int cmp_desc(const void *a, const void *b) {
        return strcmp(*(char *const *) b, *(char *const *) a);
}

/* The identity-*.pem names in dir, newest first (*n of them). */
static int list_keys(const char *dir, char ***ret, size_t *n) {
        DIR *d = opendir(dir);
        if (!d)
                return -errno;
        char **v = NULL;
        size_t cnt = 0;
        struct dirent *de;
        int r = 0;
        while ((de = readdir(d))) {
                size_t l = strlen(de->d_name);
                if (strncmp(de->d_name, "identity-", 9) != 0 || l < 14 ||
                    strcmp(de->d_name + l - 4, ".pem") != 0)
                        continue;
                char **nv = realloc(v, (cnt + 1) * sizeof(*v));
                if (!nv || !(nv[cnt] = strdup(de->d_name))) {
                        v = nv ? nv : v;
                        r = -ENOMEM;
                        break;
                }
                v = nv;
                cnt++;
        }
        closedir(d);
        if (r == 0 && cnt > 1) {
                /* same-length names sort by number; pad-free numbers of the
                 * same era have the same length */
                qsort(v, cnt, sizeof(*v), cmp_desc);
        }
        *ret = v;
        *n = cnt;
        return r;
}

static void names_free(char **v, size_t n) {
        for (size_t i = 0; i < n; i++)
                free(v[i]);
        free(v);
}

/* Make a key with `maker --jws-key-make PATH` (warren-signer: the private
 * key never enters this process). */
static int key_make_outside(const char *maker, const char *dir, int64_t now, struct wr_err *e) {
        char path[4096];
        snprintf(path, sizeof(path), "%s/identity-%lld.pem", dir, (long long) now);
        pid_t pid = fork();
        if (pid == 0) {
                execl(maker, maker, "--jws-key-make", path, (char *) NULL);
                _exit(127);
        }
        int st = 0;
        if (pid < 0)
                return err_set(e, -errno, "identity key: fork: %m");
        while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
                ;
        if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
                return err_set(e, -EIO, "identity key: %s --jws-key-make %s failed (status %d)",
                               maker, path, st);
        return 0;
}

/* Make a key in dir when it has none or its newest is due for rotation:
 * by maker (warren-signer) when set, else here unless public_only (then
 * none is made). 0 or -errno with e. */
static int make_due(const char *dir, int64_t now, const char *maker, bool public_only,
                    struct wr_err *e) {
        char **names = NULL;
        size_t n = 0;
        int r = list_keys(dir, &names, &n);
        if (r < 0)
                return err_set(e, r, "identity keys in %s: %s", dir, strerror(-r));
        int64_t newest = n ? strtoll(names[0] + 9, NULL, 10) : 0;
        names_free(names, n);
        if (n > 0 && now - newest < WID_KEY_ROTATE_SEC)
                return 0;
        return maker         ? key_make_outside(maker, dir, now, e)
               : public_only ? 0
                             : key_make(dir, now, e);
}

int wid_keys_make_due(const char *dir, int64_t now, const char *maker, struct wr_err *e) {
        return make_due(dir, now, maker, true, e);
}

static int keys_load(const char *dir, int64_t now, const char *maker, bool public_only,
                     struct wid_keys **ret, struct wr_err *e) {
        char **names = NULL;
        size_t n = 0;
        int r = make_due(dir, now, maker, public_only, e);
        if (r < 0)
                return r;
        if ((r = list_keys(dir, &names, &n)) < 0)
                return err_set(e, r, "identity keys in %s: %s", dir, strerror(-r));
        struct wid_keys *k = calloc(1, sizeof(*k));
        if (!k) {
                names_free(names, n);
                return err_set(e, -ENOMEM, "out of memory");
        }
        for (size_t i = 0; i < n && k->n < WID_KEYS_PUBLISHED; i++) {
                char path[4096], pub[4096];
                snprintf(path, sizeof(path), "%s/%s", dir, names[i]);
                snprintf(pub, sizeof(pub), "%s/%.*s.pub", dir, (int) strlen(names[i]) - 4,
                         names[i]);
                EVP_PKEY *pkey = NULL;
                FILE *f = public_only ? fopen(pub, "re") : NULL;
                if (f) { /* public half only */
                        pkey = PEM_read_PUBKEY(f, NULL, NULL, NULL);
                        fclose(f);
                }
                if (!pkey && (f = fopen(path, "re"))) {
                        /* signing here, or a key older than its .pub */
                        pkey = PEM_read_PrivateKey(f, NULL, NULL, NULL);
                        fclose(f);
                        if (pkey)
                                (void) pub_write(pub, pkey);
                }
                if (!pkey || EVP_PKEY_get_base_id(pkey) != EVP_PKEY_EC) {
                        EVP_PKEY_free(pkey);
                        continue; /* not ours: skipped */
                }
                struct wid_key *wk = &k->keys[k->n];
                wk->pkey = pkey;
                wk->made = strtoll(names[i] + 9, NULL, 10);
                if (key_fill(wk) < 0) {
                        EVP_PKEY_free(pkey);
                        wk->pkey = NULL;
                        continue;
                }
                k->n++;
        }
        if (k->n > 0 && asprintf(&k->signing_path, "%s/identity-%lld.pem", dir,
                                 (long long) k->keys[0].made) < 0)
                k->signing_path = NULL;
        names_free(names, n);
        if (k->n == 0 || !k->signing_path) {
                wid_keys_free(k);
                return k->n ? err_set(e, -ENOMEM, "out of memory")
                            : err_set(e, -EIO, "identity keys in %s: none loads", dir);
        }
        k->public_only = public_only; /* wid_keys_set_signer installs the signer */
        *ret = k;
        return 0;
}

int wid_keys_load(const char *dir, int64_t now, struct wid_keys **ret, struct wr_err *e) {
        return keys_load(dir, now, NULL, false, ret, e);
}

int wid_keys_load_public(const char *dir, int64_t now, const char *maker, struct wid_keys **ret,
                         struct wr_err *e) {
        return keys_load(dir, now, maker, true, ret, e);
}

void wid_keys_free(struct wid_keys *k) {
        if (!k)
                return;
        for (size_t i = 0; i < k->n; i++)
                EVP_PKEY_free(k->keys[i].pkey);
        free(k->signing_path);
        free(k);
}

int wid_keys_set_signer(struct wid_keys *k, const struct wid_signer *s, struct wr_err *e) {
        EVP_PKEY *pub[WID_KEYS_PUBLISHED] = {NULL};
        for (size_t i = 0; i < k->n; i++) {
                unsigned char *der = NULL;
                int len = i2d_PUBKEY(k->keys[i].pkey, &der);
                const unsigned char *p = der;
                pub[i] = len > 0 ? d2i_PUBKEY(NULL, &p, len) : NULL;
                OPENSSL_free(der);
                if (!pub[i]) {
                        for (size_t j = 0; j < i; j++)
                                EVP_PKEY_free(pub[j]);
                        return err_set(e, -EIO, "identity keys: cannot copy a public key");
                }
        }
        for (size_t i = 0; i < k->n; i++) {
                EVP_PKEY_free(k->keys[i].pkey); /* OpenSSL cleanses the private scalar */
                k->keys[i].pkey = pub[i];
        }
        k->signer = *s;
        k->has_signer = true;
        return 0;
}

int wid_signing_key_memfd(const struct wid_keys *k, int *ret_fd, struct wr_err *e) {
        _cleanup_close_ int in = open(k->signing_path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
        if (in < 0)
                return err_set(e, -errno, "identity key %s: %m", k->signing_path);
        char buf[8192];
        ssize_t n = RETRY_EINTR(read(in, buf, sizeof(buf)));
        int r = 0;
        if (n <= 0 || (size_t) n == sizeof(buf))
                r = err_set(e, n < 0 ? -errno : -EINVAL, "identity key %s: unreadable or too long",
                            k->signing_path);
        if (r == 0) {
                const struct iovec iov = {buf, (size_t) n};
                r = memfd_sealed("warren-identity-key", "identity key", &iov, 1, ret_fd, e);
        }
        OPENSSL_cleanse(buf, sizeof(buf));
        return r;
}

const char *wid_keys_kid(const struct wid_keys *k) {
        return k->keys[0].kid;
}

static char *json_b64(json_t *j) {
        char *s = json_dumps(j, JSON_COMPACT | JSON_SORT_KEYS);
        json_decref(j);
        if (!s)
                return NULL;
        char *out = b64url_alloc((const unsigned char *) s, strlen(s));
        free(s);
        return out;
}

int wid_mint(const struct wid_keys *k, const char *iss, const char *sub, const char *aud,
             const char *environment, int64_t now, int64_t lifetime, char **ret, struct wr_err *e) {
        if (lifetime <= 0 || lifetime > WID_MAX_LIFETIME_SEC)
                lifetime = WID_MAX_LIFETIME_SEC;
        const struct wid_key *key = &k->keys[0];
        _cleanup_free_ char *h = json_b64(
                json_pack("{s:s, s:s, s:s}", "alg", "ES256", "typ", "JWT", "kid", key->kid));
        _cleanup_free_ char *p = json_b64(
                json_pack("{s:s, s:s, s:s, s:I, s:I, s:I, s:s}", "iss", iss, "sub", sub, "aud", aud,
                          "iat", (json_int_t) now, "nbf", (json_int_t) now, "exp",
                          (json_int_t) (now + lifetime), "environment_id", environment));
        if (!h || !p)
                return err_set(e, -ENOMEM, "out of memory");
        size_t in_len = strlen(h) + 1 + strlen(p);
        _cleanup_free_ char *in = malloc(in_len + 1);
        if (!in)
                return err_set(e, -ENOMEM, "out of memory");
        snprintf(in, in_len + 1, "%s.%s", h, p);
        unsigned char rs[64];
        int r = k->has_signer    ? k->signer.sign(k->signer.ctx, in, in_len, rs, e)
                : k->public_only ? err_set(e, -EIO, "identity token: no signer for the key")
                                 : signer_es256_sign(key->pkey, in, in_len, rs, e);
        if (r < 0)
                return r;
        char s64[100];
        b64url(rs, sizeof(rs), s64, sizeof(s64));
        char *out = malloc(in_len + 1 + strlen(s64) + 1);
        if (!out)
                return err_set(e, -ENOMEM, "out of memory");
        sprintf(out, "%s.%s", in, s64);
        *ret = out;
        return 0;
}

char *wid_jwks_json(const struct wid_keys *k) {
        json_t *keys = json_array();
        for (size_t i = 0; keys && i < k->n; i++)
                json_array_append_new(keys, json_pack("{s:s, s:s, s:s, s:s, s:s, s:s, s:s}", "kty",
                                                      "EC", "crv", "P-256", "x", k->keys[i].x, "y",
                                                      k->keys[i].y, "kid", k->keys[i].kid, "use",
                                                      "sig", "alg", "ES256"));
        json_t *j = json_pack("{s:o}", "keys", keys);
        char *s = j ? json_dumps(j, JSON_INDENT(2) | JSON_SORT_KEYS) : NULL;
        json_decref(j);
        return s;
}

char *wid_openid_json(const char *iss) {
        size_t l = strlen(iss);
        char jwks[2048];
        snprintf(jwks, sizeof(jwks), "%.*s/.well-known/jwks.json",
                 (int) (l && iss[l - 1] == '/' ? l - 1 : l), iss);
        json_t *j = json_pack("{s:s, s:s, s:[s], s:[s], s:[s], s:[s]}", "issuer", iss, "jwks_uri",
                              jwks, "id_token_signing_alg_values_supported", "ES256",
                              "response_types_supported", "id_token", "subject_types_supported",
                              "public", "claims_supported", "environment_id");
        char *s = j ? json_dumps(j, JSON_INDENT(2) | JSON_SORT_KEYS) : NULL;
        json_decref(j);
        return s;
}

int wid_verify(const struct wid_keys *k, const char *token, size_t len, const char *iss,
               const char *aud, int64_t now, struct jwt *out, struct wr_err *e) {
        int r = jwt_parse(token, len, out);
        if (r < 0)
                return err_set(e, -EBADMSG, "not a well-formed JWT");
        if (strcmp(out->alg, "ES256") != 0)
                return err_set(e, -EKEYREJECTED, "alg %s is not accepted (ES256 only)", out->alg);
        const struct wid_key *key = NULL;
        for (size_t i = 0; i < k->n && !key; i++)
                if (strcmp(k->keys[i].kid, out->kid) == 0)
                        key = &k->keys[i];
        if (!key)
                return err_set(e, -EKEYREJECTED, "signed by an unknown key");
        if (out->sig_len != 64)
                return err_set(e, -EKEYREJECTED, "bad signature");
        /* JWS r || s → DER for OpenSSL */
        ECDSA_SIG *sig = ECDSA_SIG_new();
        BIGNUM *br = BN_bin2bn(out->sig, 32, NULL), *bs = BN_bin2bn(out->sig + 32, 32, NULL);
        unsigned char *der = NULL;
        int der_len = -1;
        if (sig && br && bs && ECDSA_SIG_set0(sig, br, bs) == 1) {
                br = bs = NULL; /* owned by sig */
                der_len = i2d_ECDSA_SIG(sig, &der);
        }
        BN_free(br);
        BN_free(bs);
        ECDSA_SIG_free(sig);
        EVP_MD_CTX *md = der_len > 0 ? EVP_MD_CTX_new() : NULL;
        int ok = md && EVP_DigestVerifyInit(md, NULL, EVP_sha256(), NULL, key->pkey) == 1 &&
                 EVP_DigestVerify(md, der, (size_t) der_len, (const unsigned char *) token,
                                  out->signed_len) == 1;
        EVP_MD_CTX_free(md);
        OPENSSL_free(der);
        if (!ok)
                return err_set(e, -EKEYREJECTED, "bad signature");
        if (!iss || strcmp(out->iss, iss) != 0)
                return err_set(e, -EACCES, "issued by \"%.100s\", not this warrend", out->iss);
        if (!aud || strcmp(out->aud, aud) != 0)
                return err_set(e, -EACCES, "audience \"%.100s\" is not %s", out->aud,
                               aud ? aud : "(none)");
        if (!out->has_exp || out->exp <= now)
                return err_set(e, -EKEYEXPIRED, "expired");
        if ((out->has_nbf && out->nbf > now + WID_SKEW_SEC) ||
            (out->has_iat && out->iat > now + WID_SKEW_SEC))
                return err_set(e, -EKEYEXPIRED, "not valid yet");
        if (!out->has_iat || out->exp - out->iat > WID_MAX_LIFETIME_SEC)
                return err_set(e, -EKEYEXPIRED, "lifetime longer than %d s", WID_MAX_LIFETIME_SEC);
        return 0;
}
