/* SPDX-License-Identifier: Apache-2.0 */
/* src/signer: the warren-signer protocol (encode, decode, every truncation
 * and refusal), the egress CA's files (creation, reuse, repair, rotation,
 * the memfd for --ca-fd), leaf minting (verified with X509_verify_cert
 * for the right name and refused for another) and data keys under the
 * secrets key (round trip; another key, label or a flipped bit refused). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509_vfy.h>
#include <openssl/x509v3.h>

#include "signer/ca.h"
#include "signer/datakey.h"
#include "signer/mint.h"
#include "signer/signer-proto.h"

/* ------------------------------------------------------------ helpers */

static EVP_PKEY *ec_key(const char *curve) {
        EVP_PKEY *k = EVP_EC_gen(curve);
        assert_non_null(k);
        return k;
}

static size_t spki_of(EVP_PKEY *k, uint8_t *out, size_t size) {
        unsigned char *der = NULL;
        int n = i2d_PUBKEY(k, &der);
        assert_true(n > 0 && (size_t) n <= size);
        memcpy(out, der, (size_t) n);
        OPENSSL_free(der);
        return (size_t) n;
}

static char *read_all(const char *path, size_t *len) {
        FILE *f = fopen(path, "re");
        if (!f)
                return NULL;
        char *buf = calloc(1, 65536);
        size_t n = fread(buf, 1, 65535, f);
        fclose(f);
        if (len)
                *len = n;
        return buf;
}

static mode_t mode_of(const char *path) {
        struct stat st;
        assert_int_equal(lstat(path, &st), 0);
        return st.st_mode & 07777;
}

static void rm_rf(const char *dir) {
        char cmd[PATH_MAX + 16];
        snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
        assert_int_equal(system(cmd), 0);
}

/* ------------------------------------------------------------ protocol */

static void test_sign_roundtrip(void **state) {
        (void) state;
        EVP_PKEY *k = ec_key("P-256");
        uint8_t key[SIGNER_KEY_MAX];
        size_t kl = spki_of(k, key, sizeof(key));
        EVP_PKEY_free(k);
        const char *hosts[] = {"example.com", "a.b.c.d.example.org", "127.0.0.1",
                               "2001:db8::1", "::ffff:127.0.0.1",    "xn--bcher-kva.example"};
        for (size_t i = 0; i < ELEMENTSOF(hosts); i++) {
                uint8_t buf[SIGNER_MSG_MAX];
                struct wr_err e = {0};
                int n = signer_sign_encode(7 + (uint32_t) i, hosts[i], key, kl, buf, sizeof(buf),
                                           &e);
                assert_int_equal(n, 16 + 8 + strlen(hosts[i]) + kl);
                struct signer_req *req = calloc(1, sizeof(*req));
                assert_int_equal(signer_req_decode(buf, (size_t) n, req, &e), 0);
                assert_int_equal(req->hdr.id, 7 + i);
                assert_string_equal(req->host, hosts[i]);
                assert_int_equal(req->key_len, kl);
                assert_memory_equal(req->key, key, kl);
                /* every truncation refused, with a message */
                for (int cut = 0; cut < n; cut++) {
                        struct wr_err ce = {0};
                        assert_true(signer_req_decode(buf, (size_t) cut, req, &ce) < 0);
                        assert_true(ce.msg[0] != '\0');
                        if (cut >= 16)
                                assert_int_equal(req->hdr.id, 7 + i); /* id echoed */
                }
                /* one byte more, too */
                buf[n] = 0;
                assert_int_equal(signer_req_decode(buf, (size_t) n + 1, req, &e), -EBADMSG);
                free(req);
        }
        /* the encoder refuses what the decoder would */
        uint8_t buf[SIGNER_MSG_MAX];
        struct wr_err e = {0};
        assert_int_equal(signer_sign_encode(1, "Example.com", key, kl, buf, sizeof(buf), &e),
                         -EINVAL);
        assert_int_equal(signer_sign_encode(1, "[::1]", key, kl, buf, sizeof(buf), &e), -EINVAL);
        assert_int_equal(signer_sign_encode(1, "ok.com", key, kl - 1, buf, sizeof(buf), &e),
                         -EINVAL);
        assert_int_equal(signer_sign_encode(1, "ok.com", key, 0, buf, sizeof(buf), &e), -EINVAL);
        assert_int_equal(signer_sign_encode(1, "ok.com", key, kl, buf, 30, &e), -ENOBUFS);
}

/* A SIGN built by hand, to break one field at a time. */
static size_t raw_sign(uint8_t *buf, uint32_t magic, uint32_t type, const char *host,
                       const uint8_t *key, size_t kl, uint32_t reserved, int len_delta) {
        size_t hl = strlen(host);
        struct signer_sign s = {
                .host_len = (uint16_t) hl, .key_len = (uint16_t) kl, .reserved = reserved};
        size_t plen = sizeof(s) + hl + kl;
        struct signer_hdr h = {
                .magic = magic, .type = type, .id = 99, .len = (uint32_t) ((int) plen + len_delta)};
        memcpy(buf, &h, sizeof(h));
        memcpy(buf + 16, &s, sizeof(s));
        memcpy(buf + 24, host, hl);
        memcpy(buf + 24 + hl, key, kl);
        return 16 + plen;
}

static void test_sign_refusals(void **state) {
        (void) state;
        static const uint8_t key[] = {0x30, 0x03, 0x02, 0x01, 0x01};
        uint8_t buf[SIGNER_MSG_MAX + 64];
        struct signer_req *req = calloc(1, sizeof(*req));
        struct wr_err e = {0};
        size_t n = raw_sign(buf, SIGNER_MAGIC, SIGNER_SIGN, "example.com", key, sizeof(key), 0, 0);
        assert_int_equal(signer_req_decode(buf, n, req, &e), 0);

        n = raw_sign(buf, 0x12345678, SIGNER_SIGN, "example.com", key, sizeof(key), 0, 0);
        assert_int_equal(signer_req_decode(buf, n, req, &e), -EBADMSG);
        n = raw_sign(buf, SIGNER_MAGIC, SIGNER_CERT, "example.com", key, sizeof(key), 0, 0);
        assert_int_equal(signer_req_decode(buf, n, req, &e), -EOPNOTSUPP);
        n = raw_sign(buf, SIGNER_MAGIC, 77, "example.com", key, sizeof(key), 0, 0);
        assert_int_equal(signer_req_decode(buf, n, req, &e), -EOPNOTSUPP);
        n = raw_sign(buf, SIGNER_MAGIC, SIGNER_SIGN, "example.com", key, sizeof(key), 1, 0);
        assert_int_equal(signer_req_decode(buf, n, req, &e), -EBADMSG);
        n = raw_sign(buf, SIGNER_MAGIC, SIGNER_SIGN, "example.com", key, sizeof(key), 0, -1);
        assert_int_equal(signer_req_decode(buf, n, req, &e), -EBADMSG);
        n = raw_sign(buf, SIGNER_MAGIC, SIGNER_SIGN, "example.com", key, sizeof(key), 0, 1);
        assert_int_equal(signer_req_decode(buf, n, req, &e), -EBADMSG);
        /* hosts: not canonical -> EINVAL; a NUL inside -> EBADMSG */
        const char *bad[] = {"Example.com", "example.com.", "[::1]", "127.1",  "0x7f000001",
                             "a..b",        "foo_bar.com",  "a b",   "-a.com", "1.2.3.999"};
        for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
                n = raw_sign(buf, SIGNER_MAGIC, SIGNER_SIGN, bad[i], key, sizeof(key), 0, 0);
                assert_int_equal(signer_req_decode(buf, n, req, &e), -EINVAL);
                assert_int_equal(req->hdr.id, 99);
        }
        n = raw_sign(buf, SIGNER_MAGIC, SIGNER_SIGN, "ab.com", key, sizeof(key), 0, 0);
        buf[24 + 2] = '\0';
        assert_int_equal(signer_req_decode(buf, n, req, &e), -EBADMSG);
        /* host length: 0 and above 253 */
        n = raw_sign(buf, SIGNER_MAGIC, SIGNER_SIGN, "", key, sizeof(key), 0, 0);
        assert_int_equal(signer_req_decode(buf, n, req, &e), -EBADMSG);
        char longh[300];
        memset(longh, 'a', sizeof(longh) - 1);
        longh[sizeof(longh) - 1] = '\0';
        n = raw_sign(buf, SIGNER_MAGIC, SIGNER_SIGN, longh, key, sizeof(key), 0, 0);
        assert_int_equal(signer_req_decode(buf, n, req, &e), -EBADMSG);
        /* keys: not a SEQUENCE, wrong length, non-minimal length, too long */
        static const uint8_t k1[] = {0x31, 0x03, 0x02, 0x01, 0x01};
        static const uint8_t k2[] = {0x30, 0x04, 0x02, 0x01, 0x01};
        static const uint8_t k3[] = {0x30, 0x81, 0x03, 0x02, 0x01, 0x01};
        static const uint8_t k4[] = {0x30, 0x80, 0x02, 0x01, 0x01, 0x00, 0x00};
        const uint8_t *ks[] = {k1, k2, k3, k4};
        size_t kls[] = {sizeof(k1), sizeof(k2), sizeof(k3), sizeof(k4)};
        for (size_t i = 0; i < ELEMENTSOF(ks); i++) {
                n = raw_sign(buf, SIGNER_MAGIC, SIGNER_SIGN, "example.com", ks[i], kls[i], 0, 0);
                assert_int_equal(signer_req_decode(buf, n, req, &e), -EBADMSG);
        }
        uint8_t big[SIGNER_KEY_MAX + 4] = {0x30, 0x82, 0x04, 0x01};
        n = raw_sign(buf, SIGNER_MAGIC, SIGNER_SIGN, "example.com", big, sizeof(big) - 3 + 3, 0, 0);
        assert_int_equal(signer_req_decode(buf, n, req, &e), -EBADMSG);
        /* a key of exactly SIGNER_KEY_MAX bytes passes the shape check */
        uint8_t max[SIGNER_KEY_MAX] = {0x30, 0x82, 0x03, 0xfc};
        n = raw_sign(buf, SIGNER_MAGIC, SIGNER_SIGN, "example.com", max, sizeof(max), 0, 0);
        assert_int_equal(signer_req_decode(buf, n, req, &e), 0);
        /* above the datagram limit */
        memset(buf, 0, sizeof(buf));
        raw_sign(buf, SIGNER_MAGIC, SIGNER_SIGN, "example.com", key, sizeof(key), 0, 0);
        assert_int_equal(signer_req_decode(buf, SIGNER_MSG_MAX + 1, req, &e), -EMSGSIZE);
        assert_int_equal(req->hdr.id, 99); /* the id is still echoed */
        free(req);
}

static void test_replies(void **state) {
        (void) state;
        uint8_t der[SIGNER_CERT_MAX];
        for (size_t i = 0; i < sizeof(der); i++)
                der[i] = (uint8_t) i;
        uint8_t buf[SIGNER_MSG_MAX + 16];
        struct signer_reply *rep = calloc(1, sizeof(*rep));
        struct wr_err e = {0};
        size_t sizes[] = {1, 600, SIGNER_CERT_MAX};
        for (size_t s = 0; s < ELEMENTSOF(sizes); s++) {
                int n = signer_cert_encode(5, der, sizes[s], buf, sizeof(buf));
                assert_int_equal(n, 24 + sizes[s]);
                assert_int_equal(signer_reply_decode(buf, (size_t) n, rep, &e), 0);
                assert_int_equal(rep->hdr.type, SIGNER_CERT);
                assert_int_equal(rep->hdr.id, 5);
                assert_int_equal(rep->cert.len, sizes[s]);
                assert_memory_equal(rep->cert.der, der, sizes[s]);
                for (int cut = 0; cut < n; cut++)
                        assert_true(signer_reply_decode(buf, (size_t) cut, rep, &e) < 0);
        }
        assert_int_equal(signer_cert_encode(5, der, 0, buf, sizeof(buf)), -EINVAL);
        assert_int_equal(signer_cert_encode(5, der, SIGNER_CERT_MAX + 1, buf, sizeof(buf)),
                         -EINVAL);
        assert_int_equal(signer_cert_encode(5, der, 100, buf, 100), -ENOBUFS);

        int n = signer_error_encode(8, SIGNER_ERR_HOST, "host \"a\tb\" refused\n", buf,
                                    sizeof(buf));
        assert_true(n > 24);
        assert_int_equal(signer_reply_decode(buf, (size_t) n, rep, &e), 0);
        assert_int_equal(rep->hdr.type, SIGNER_ERROR);
        assert_int_equal(rep->error.code, SIGNER_ERR_HOST);
        assert_string_equal(rep->error.msg, "host \"a?b\" refused?");
        for (int cut = 0; cut < n; cut++)
                assert_true(signer_reply_decode(buf, (size_t) cut, rep, &e) < 0);
        /* long messages are cut at SIGNER_ERR_MSG_MAX; empty ones pass */
        char longm[400];
        memset(longm, 'x', sizeof(longm) - 1);
        longm[sizeof(longm) - 1] = '\0';
        n = signer_error_encode(8, SIGNER_ERR_KEY, longm, buf, sizeof(buf));
        assert_int_equal(n, 24 + SIGNER_ERR_MSG_MAX);
        assert_int_equal(signer_reply_decode(buf, (size_t) n, rep, &e), 0);
        assert_int_equal(strlen(rep->error.msg), SIGNER_ERR_MSG_MAX);
        n = signer_error_encode(8, SIGNER_ERR_INTERNAL, "", buf, sizeof(buf));
        assert_int_equal(signer_reply_decode(buf, (size_t) n, rep, &e), 0);
        assert_string_equal(rep->error.msg, "");
        assert_int_equal(signer_error_encode(8, 0, "x", buf, sizeof(buf)), -EINVAL);
        assert_int_equal(signer_error_encode(8, SIGNER_ERR_LAST + 1, "x", buf, sizeof(buf)),
                         -EINVAL);
        /* forged replies: unknown code, non-printable message, request type */
        n = signer_error_encode(8, SIGNER_ERR_KEY, "abc", buf, sizeof(buf));
        uint32_t code = 9;
        memcpy(buf + 16, &code, 4);
        assert_int_equal(signer_reply_decode(buf, (size_t) n, rep, &e), -EBADMSG);
        n = signer_error_encode(8, SIGNER_ERR_KEY, "abc", buf, sizeof(buf));
        buf[25] = 0x7f;
        assert_int_equal(signer_reply_decode(buf, (size_t) n, rep, &e), -EBADMSG);
        n = signer_error_encode(8, SIGNER_ERR_KEY, "abc", buf, sizeof(buf));
        uint32_t t = SIGNER_SIGN;
        memcpy(buf + 4, &t, 4);
        assert_int_equal(signer_reply_decode(buf, (size_t) n, rep, &e), -EOPNOTSUPP);
        n = signer_cert_encode(5, der, 10, buf, sizeof(buf));
        buf[20] = 1; /* reserved */
        assert_int_equal(signer_reply_decode(buf, (size_t) n, rep, &e), -EBADMSG);
        assert_string_equal(signer_errcode_name(SIGNER_ERR_EXPIRED), "EXPIRED");
        assert_string_equal(signer_errcode_name(0), "?");
        free(rep);
}

/* ------------------------------------------------------------ CA files */

struct tmp {
        char dir[64];
        char key[PATH_MAX], cert[PATH_MAX], old[PATH_MAX], keys[PATH_MAX];
};

static void tmp_make(struct tmp *t) {
        snprintf(t->dir, sizeof(t->dir), "/tmp/test-signer-XXXXXX");
        assert_non_null(mkdtemp(t->dir));
        snprintf(t->keys, sizeof(t->keys), "%s/keys", t->dir);
        snprintf(t->key, sizeof(t->key), "%s/%s", t->dir, SIGNER_CA_KEY_FILE);
        snprintf(t->cert, sizeof(t->cert), "%s/%s", t->dir, SIGNER_CA_CERT_FILE);
        snprintf(t->old, sizeof(t->old), "%s/%s", t->dir, SIGNER_CA_OLD_CERT_FILE);
}

static X509 *cert_load(const char *path) {
        FILE *f = fopen(path, "re");
        assert_non_null(f);
        X509 *x = PEM_read_X509(f, NULL, NULL, NULL);
        fclose(f);
        assert_non_null(x);
        return x;
}

static EVP_PKEY *key_load(const char *path) {
        FILE *f = fopen(path, "re");
        assert_non_null(f);
        EVP_PKEY *k = PEM_read_PrivateKey(f, NULL, NULL, NULL);
        fclose(f);
        assert_non_null(k);
        return k;
}

static void check_ca_cert(const char *cert_path, const char *key_path) {
        X509 *x = cert_load(cert_path);
        EVP_PKEY *k = key_load(key_path);
        assert_int_equal(X509_check_private_key(x, k), 1);
        assert_int_equal(EVP_PKEY_get_base_id(k), EVP_PKEY_EC);
        assert_int_equal(EVP_PKEY_get_bits(k), 256);
        char cn[128] = "";
        X509_NAME_get_text_by_NID(X509_get_subject_name(x), NID_commonName, cn, sizeof(cn));
        assert_int_equal(strncmp(cn, "Warren egress CA ", 17), 0);
        assert_int_equal(strlen(cn), 17 + 8);
        assert_int_equal(X509_check_ca(x), 1);
        int crit = -1;
        BASIC_CONSTRAINTS *bc = X509_get_ext_d2i(x, NID_basic_constraints, &crit, NULL);
        assert_non_null(bc);
        assert_true(bc->ca);
        assert_int_equal(crit, 1);
        BASIC_CONSTRAINTS_free(bc);
        ASN1_BIT_STRING *ku = X509_get_ext_d2i(x, NID_key_usage, &crit, NULL);
        assert_non_null(ku);
        assert_int_equal(crit, 1);
        ASN1_BIT_STRING_free(ku);
        assert_int_equal(X509_get_key_usage(x), KU_KEY_CERT_SIGN | KU_CRL_SIGN);
        int days = 0, secs = 0;
        assert_int_equal(
                ASN1_TIME_diff(&days, &secs, X509_get0_notBefore(x), X509_get0_notAfter(x)), 1);
        assert_int_equal(days, SIGNER_CA_DAYS);
        assert_int_equal(X509_verify(x, k), 1); /* self-signed */
        X509_free(x);
        EVP_PKEY_free(k);
}

static void test_ca_create_reuse_rotate(void **state) {
        (void) state;
        struct tmp t;
        tmp_make(&t);
        struct wr_err e = {0};
        assert_int_equal(signer_ca_ensure("relative/dir", &e), -EINVAL);
        assert_int_equal(signer_ca_ensure(t.dir, &e), 1);
        assert_int_equal(mode_of(t.keys), 0700);
        assert_int_equal(mode_of(t.key), 0600);
        assert_int_equal(mode_of(t.cert), 0644);
        check_ca_cert(t.cert, t.key);
        size_t kl, cl;
        char *key1 = read_all(t.key, &kl), *cert1 = read_all(t.cert, &cl);
        assert_non_null(strstr(key1, "-----BEGIN PRIVATE KEY-----"));
        /* no temp files left */
        DIR *d = opendir(t.keys);
        struct dirent *de;
        int n = 0;
        while ((de = readdir(d)))
                n += de->d_name[0] != '.';
        closedir(d);
        assert_int_equal(n, 1);

        /* reused as is */
        assert_int_equal(signer_ca_ensure(t.dir, &e), 0);
        char *key2 = read_all(t.key, NULL), *cert2 = read_all(t.cert, NULL);
        assert_string_equal(key1, key2);
        assert_string_equal(cert1, cert2);
        free(key2);
        free(cert2);

        /* a key others can read is refused, naming the fix */
        assert_int_equal(chmod(t.key, 0640), 0);
        assert_int_equal(signer_ca_ensure(t.dir, &e), -EPERM);
        assert_non_null(strstr(e.msg, "chmod 600"));
        assert_int_equal(chmod(t.key, 0600), 0);
        assert_int_equal(chmod(t.keys, 0755), 0);
        assert_int_equal(signer_ca_ensure(t.dir, &e), -EPERM);
        assert_non_null(strstr(e.msg, "chmod 700"));
        assert_int_equal(chmod(t.keys, 0700), 0);

        /* a missing certificate is issued again for the same key */
        assert_int_equal(unlink(t.cert), 0);
        assert_int_equal(signer_ca_ensure(t.dir, &e), 1);
        check_ca_cert(t.cert, t.key);
        key2 = read_all(t.key, NULL);
        assert_string_equal(key1, key2);
        free(key2);
        free(cert1);
        cert1 = read_all(t.cert, NULL);

        /* rotation: new key, new cert, the previous cert kept as .old */
        assert_int_equal(signer_ca_rotate(t.dir, &e), 0);
        check_ca_cert(t.cert, t.key);
        assert_int_equal(mode_of(t.key), 0600);
        assert_int_equal(mode_of(t.cert), 0644);
        char *old = read_all(t.old, NULL), *key3 = read_all(t.key, NULL),
             *cert3 = read_all(t.cert, NULL);
        assert_string_equal(old, cert1);
        assert_string_not_equal(key3, key1);
        assert_string_not_equal(cert3, cert1);
        assert_int_equal(signer_ca_ensure(t.dir, &e), 0);
        /* a second rotation replaces .old with the then-current cert */
        assert_int_equal(signer_ca_rotate(t.dir, &e), 0);
        char *old2 = read_all(t.old, NULL);
        assert_string_equal(old2, cert3);

        /* a certificate for another key (a rotation cut short) is replaced */
        char *key4 = read_all(t.key, NULL);
        FILE *f = fopen(t.cert, "we");
        assert_non_null(f);
        fputs(old, f);
        fclose(f);
        assert_int_equal(signer_ca_ensure(t.dir, &e), 1);
        check_ca_cert(t.cert, t.key);
        char *key5 = read_all(t.key, NULL);
        assert_string_equal(key4, key5);

        /* a damaged key is refused, naming the file */
        f = fopen(t.key, "we");
        fputs("not a key\n", f);
        fclose(f);
        assert_int_equal(signer_ca_ensure(t.dir, &e), -EINVAL);
        assert_non_null(strstr(e.msg, "egress-ca.key"));
        assert_non_null(strstr(e.msg, "rotate"));
        /* ... and rotation is the way out */
        assert_int_equal(signer_ca_rotate(t.dir, &e), 0);
        assert_int_equal(signer_ca_ensure(t.dir, &e), 0);
        check_ca_cert(t.cert, t.key);

        free(key1);
        free(cert1);
        free(old);
        free(key3);
        free(cert3);
        free(old2);
        free(key4);
        free(key5);
        rm_rf(t.dir);
}

/* ------------------------------------------------------------ minting */

static struct signer_ca *ca_from_fd(const char *dir) {
        struct wr_err e = {0};
        int fd = -1;
        assert_int_equal(signer_ca_fd(dir, &fd, &e), 0);
        assert_true(fd >= 0);
        assert_true(fcntl(fd, F_GETFD) & FD_CLOEXEC);
        assert_int_equal(fcntl(fd, F_GET_SEALS) & F_SEAL_WRITE, F_SEAL_WRITE);
        char buf[32768];
        ssize_t n = read(fd, buf, sizeof(buf));
        assert_true(n > 0);
        close(fd);
        assert_non_null(memmem(buf, (size_t) n, "PRIVATE KEY", 11));
        assert_non_null(memmem(buf, (size_t) n, "CERTIFICATE", 11));
        struct signer_ca *ca = NULL;
        assert_int_equal(signer_ca_parse(buf, (size_t) n, &ca, &e), 0);
        explicit_bzero(buf, sizeof(buf));
        return ca;
}

/* Verify der against the CA's certificate for host (a name or an IP). */
static int verify(const char *ca_path, const uint8_t *der, size_t len, const char *host, bool ip) {
        const unsigned char *p = der;
        X509 *leaf = d2i_X509(NULL, &p, (long) len);
        assert_non_null(leaf);
        X509 *cacert = cert_load(ca_path);
        X509_STORE *store = X509_STORE_new();
        X509_STORE_add_cert(store, cacert);
        X509_STORE_CTX *ctx = X509_STORE_CTX_new();
        assert_int_equal(X509_STORE_CTX_init(ctx, store, leaf, NULL), 1);
        X509_VERIFY_PARAM *vp = X509_STORE_CTX_get0_param(ctx);
        X509_VERIFY_PARAM_set_purpose(vp, X509_PURPOSE_SSL_SERVER);
        if (ip)
                X509_VERIFY_PARAM_set1_ip_asc(vp, host);
        else
                X509_VERIFY_PARAM_set1_host(vp, host, 0);
        int ok = X509_verify_cert(ctx);
        X509_STORE_CTX_free(ctx);
        X509_STORE_free(store);
        X509_free(cacert);
        X509_free(leaf);
        return ok;
}

static void test_mint_verifies(void **state) {
        (void) state;
        struct tmp t;
        tmp_make(&t);
        struct wr_err e = {0};
        assert_int_equal(signer_ca_ensure(t.dir, &e), 1);
        struct signer_ca *ca = ca_from_fd(t.dir);
        assert_true(signer_ca_not_after(ca) > time(NULL) + 3600L * 24 * 3650);

        uint8_t key[SIGNER_KEY_MAX];
        EVP_PKEY *k = ec_key("P-256");
        size_t kl = spki_of(k, key, sizeof(key));
        uint8_t *der = NULL;
        size_t len = 0;
        time_t now = time(NULL);
        assert_int_equal(signer_mint(ca, "svc.example.com", key, kl, now, &der, &len, &e), 0);
        assert_int_equal(verify(t.cert, der, len, "svc.example.com", false), 1);
        assert_int_equal(verify(t.cert, der, len, "other.example.com", false), 0);
        assert_int_equal(verify(t.cert, der, len, "example.com", false), 0);
        /* the leaf's fields */
        const unsigned char *p = der;
        X509 *leaf = d2i_X509(NULL, &p, (long) len);
        EVP_PKEY *lk = X509_get0_pubkey(leaf);
        assert_int_equal(EVP_PKEY_eq(lk, k), 1);
        assert_int_equal(X509_check_ca(leaf), 0);
        assert_int_equal(X509_get_key_usage(leaf), KU_DIGITAL_SIGNATURE);
        assert_int_equal(X509_get_extended_key_usage(leaf), XKU_SSL_SERVER);
        assert_int_equal(X509_get_signature_nid(leaf), NID_ecdsa_with_SHA256);
        const ASN1_INTEGER *serial = X509_get0_serialNumber(leaf);
        assert_true(serial->length >= 8 && serial->length <= 17);
        int days = 0, secs = 0;
        ASN1_TIME_diff(&days, &secs, X509_get0_notBefore(leaf), X509_get0_notAfter(leaf));
        assert_int_equal(days * 86400 + secs, 7 * 86400 + 3600);
        char cn[256] = "";
        X509_NAME_get_text_by_NID(X509_get_subject_name(leaf), NID_commonName, cn, sizeof(cn));
        assert_string_equal(cn, "svc.example.com");
        X509_free(leaf);
        free(der);

        /* IP literals get an IP SAN, and verify as addresses */
        assert_int_equal(signer_mint(ca, "10.1.2.3", key, kl, now, &der, &len, &e), 0);
        assert_int_equal(verify(t.cert, der, len, "10.1.2.3", true), 1);
        assert_int_equal(verify(t.cert, der, len, "10.1.2.4", true), 0);
        free(der);
        assert_int_equal(signer_mint(ca, "2001:db8::5", key, kl, now, &der, &len, &e), 0);
        assert_int_equal(verify(t.cert, der, len, "2001:db8::5", true), 1);
        free(der);
        /* a name longer than a CN may be: no CN, SAN only, still valid */
        char longname[200];
        snprintf(longname, sizeof(longname), "%s.%s.example.com",
                 "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
                 "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb");
        assert_int_equal(signer_mint(ca, longname, key, kl, now, &der, &len, &e), 0);
        assert_int_equal(verify(t.cert, der, len, longname, false), 1);
        free(der);

        /* refusals */
        assert_int_equal(signer_mint(ca, "Svc.example.com", key, kl, now, &der, &len, &e), -EINVAL);
        assert_int_equal(signer_mint(ca, "[::1]", key, kl, now, &der, &len, &e), -EINVAL);
        static const uint8_t junk[] = {0x30, 0x03, 0x02, 0x01, 0x01};
        assert_int_equal(signer_mint(ca, "a.com", junk, sizeof(junk), now, &der, &len, &e),
                         -EKEYREJECTED);
        uint8_t trailing[SIGNER_KEY_MAX + 1];
        memcpy(trailing, key, kl);
        trailing[kl] = 0;
        assert_int_equal(signer_mint(ca, "a.com", trailing, kl + 1, now, &der, &len, &e),
                         -EKEYREJECTED);
        EVP_PKEY *ed = EVP_PKEY_Q_keygen(NULL, NULL, "ED25519");
        assert_non_null(ed);
        uint8_t edk[SIGNER_KEY_MAX];
        size_t edl = spki_of(ed, edk, sizeof(edk));
        assert_int_equal(signer_mint(ca, "a.com", edk, edl, now, &der, &len, &e), -EKEYREJECTED);
        EVP_PKEY_free(ed);
        EVP_PKEY *k521 = ec_key("P-521");
        uint8_t k5[SIGNER_KEY_MAX];
        size_t k5l = spki_of(k521, k5, sizeof(k5));
        assert_int_equal(signer_mint(ca, "a.com", k5, k5l, now, &der, &len, &e), -EKEYREJECTED);
        EVP_PKEY_free(k521);
        /* the CA's end: a leaf is cut at it, and after it nothing is signed */
        time_t end = signer_ca_not_after(ca);
        assert_int_equal(signer_mint(ca, "a.com", key, kl, end - 86400, &der, &len, &e), 0);
        p = der;
        leaf = d2i_X509(NULL, &p, (long) len);
        X509 *cacert = cert_load(t.cert);
        assert_int_equal(ASN1_TIME_compare(X509_get0_notAfter(leaf), X509_get0_notAfter(cacert)),
                         0);
        X509_free(cacert);
        X509_free(leaf);
        free(der);
        assert_int_equal(signer_mint(ca, "a.com", key, kl, end + 1, &der, &len, &e), -EKEYEXPIRED);

        /* a CA rotated away: its leaves do not verify against the new one */
        assert_int_equal(signer_mint(ca, "a.com", key, kl, now, &der, &len, &e), 0);
        assert_int_equal(signer_ca_rotate(t.dir, &e), 0);
        assert_int_equal(verify(t.cert, der, len, "a.com", false), 0);
        assert_int_equal(verify(t.old, der, len, "a.com", false), 1);
        free(der);

        /* parse refusals */
        struct signer_ca *bad = NULL;
        assert_int_equal(signer_ca_parse("x", 1, &bad, &e), -EINVAL);
        char *certpem = read_all(t.cert, NULL);
        assert_int_equal(signer_ca_parse(certpem, strlen(certpem), &bad, &e), -EINVAL);
        assert_non_null(strstr(e.msg, "private key"));
        free(certpem);

        EVP_PKEY_free(k);
        signer_ca_free(ca);
        signer_ca_free(NULL);
        rm_rf(t.dir);
}

static void test_datakey_messages(void **state) {
        (void) state;
        uint8_t label[SIGNER_LABEL_MAX], wrapped[SIGNER_WRAPPED_LEN], dek[SIGNER_DEK_LEN];
        for (size_t i = 0; i < sizeof(label); i++)
                label[i] = (uint8_t) (i * 7);
        memset(wrapped, 0xa5, sizeof(wrapped));
        memset(dek, 0x3c, sizeof(dek));
        uint8_t buf[SIGNER_MSG_MAX + 16];
        struct signer_req *req = calloc(1, sizeof(*req));
        struct signer_reply *rep = calloc(1, sizeof(*rep));
        struct wr_err e = {0};
        size_t lens[] = {1, 32, SIGNER_LABEL_MAX};
        for (size_t l = 0; l < ELEMENTSOF(lens); l++)
                for (int open = 0; open < 2; open++) {
                        int n = signer_datakey_req_encode(9, label, lens[l], open ? wrapped : NULL,
                                                          buf, sizeof(buf), &e);
                        assert_int_equal(n, 24 + lens[l] + (open ? SIGNER_WRAPPED_LEN : 0));
                        assert_int_equal(signer_req_decode(buf, (size_t) n, req, &e), 0);
                        assert_int_equal(req->hdr.type,
                                         open ? SIGNER_DATAKEY_OPEN : SIGNER_DATAKEY_NEW);
                        assert_int_equal(req->hdr.id, 9);
                        assert_int_equal(req->label_len, lens[l]);
                        assert_memory_equal(req->label, label, lens[l]);
                        if (open)
                                assert_memory_equal(req->wrapped, wrapped, SIGNER_WRAPPED_LEN);
                        for (int cut = 0; cut < n; cut++)
                                assert_true(signer_req_decode(buf, (size_t) cut, req, &e) < 0);
                        /* a NEW that claims a wrapping, an OPEN without one */
                        buf[16 + 2] ^= SIGNER_WRAPPED_LEN;
                        assert_int_equal(signer_req_decode(buf, (size_t) n, req, &e), -EBADMSG);
                        buf[16 + 2] ^= SIGNER_WRAPPED_LEN;
                        /* reserved bytes */
                        buf[16 + 4] = 1;
                        assert_int_equal(signer_req_decode(buf, (size_t) n, req, &e), -EBADMSG);
                }
        assert_int_equal(signer_datakey_req_encode(1, label, 0, NULL, buf, sizeof(buf), &e),
                         -EINVAL);
        assert_int_equal(signer_datakey_req_encode(1, label, SIGNER_LABEL_MAX + 1, NULL, buf,
                                                   sizeof(buf), &e),
                         -EINVAL);
        assert_int_equal(signer_datakey_req_encode(1, label, 32, NULL, buf, 40, &e), -ENOBUFS);

        int n = signer_datakey_encode(4, dek, wrapped, buf, sizeof(buf));
        assert_int_equal(n, 16 + 8 + SIGNER_DEK_LEN + SIGNER_WRAPPED_LEN);
        assert_int_equal(signer_reply_decode(buf, (size_t) n, rep, &e), 0);
        assert_int_equal(rep->hdr.type, SIGNER_DATAKEY);
        assert_memory_equal(rep->datakey.dek, dek, SIGNER_DEK_LEN);
        assert_memory_equal(rep->datakey.wrapped, wrapped, SIGNER_WRAPPED_LEN);
        for (int cut = 0; cut < n; cut++)
                assert_true(signer_reply_decode(buf, (size_t) cut, rep, &e) < 0);
        buf[16] = 1; /* reserved */
        assert_int_equal(signer_reply_decode(buf, (size_t) n, rep, &e), -EBADMSG);
        assert_int_equal(signer_datakey_encode(4, dek, wrapped, buf, 50), -ENOBUFS);
        /* the new error codes travel */
        n = signer_error_encode(3, SIGNER_ERR_ROLE, "no", buf, sizeof(buf));
        assert_int_equal(signer_reply_decode(buf, (size_t) n, rep, &e), 0);
        assert_int_equal(rep->error.code, SIGNER_ERR_ROLE);
        assert_string_equal(signer_errcode_name(SIGNER_ERR_UNWRAP), "UNWRAP");
        free(req);
        free(rep);
}

static void test_datakey_crypto(void **state) {
        (void) state;
        uint8_t key[SIGNER_SECRETS_KEY_LEN], other[SIGNER_SECRETS_KEY_LEN];
        memset(key, 1, sizeof(key));
        memset(other, 2, sizeof(other));
        static const char label[] = "env\0name", label2[] = "env\0namf";
        uint8_t dek[SIGNER_DEK_LEN], dek2[SIGNER_DEK_LEN], out[SIGNER_DEK_LEN];
        uint8_t w[SIGNER_WRAPPED_LEN], w2[SIGNER_WRAPPED_LEN];
        struct wr_err e = {0};
        assert_int_equal(signer_datakey_new(key, label, sizeof(label), dek, w, &e), 0);
        assert_int_equal(signer_datakey_new(key, label, sizeof(label), dek2, w2, &e), 0);
        /* fresh keys and nonces every time */
        assert_memory_not_equal(dek, dek2, sizeof(dek));
        assert_memory_not_equal(w, w2, 12);
        assert_int_equal(signer_datakey_open(key, label, sizeof(label), w, out, &e), 0);
        assert_memory_equal(out, dek, sizeof(dek));
        memset(out, 0, sizeof(out));
        assert_int_equal(signer_datakey_open(other, label, sizeof(label), w, out, &e), -EBADMSG);
        assert_int_equal(signer_datakey_open(key, label2, sizeof(label2), w, out, &e), -EBADMSG);
        for (size_t i = 0; i < sizeof(w); i++) {
                w[i] ^= 0x40;
                assert_int_equal(signer_datakey_open(key, label, sizeof(label), w, out, &e),
                                 -EBADMSG);
                w[i] ^= 0x40;
        }
        /* nothing leaks into out on a refusal */
        uint8_t zero[SIGNER_DEK_LEN] = {0};
        assert_memory_equal(out, zero, sizeof(zero));
        assert_int_equal(signer_datakey_new(key, label, 0, dek, w, &e), -EINVAL);
        assert_int_equal(signer_datakey_open(key, label, SIGNER_LABEL_MAX + 1, w, out, &e),
                         -EINVAL);
}

static void test_jws_messages(void **state) {
        (void) state;
        uint8_t in[SIGNER_JWS_INPUT_MAX], sig[SIGNER_JWS_SIG_LEN];
        memset(in, 'a', sizeof(in));
        for (size_t i = 0; i < sizeof(sig); i++)
                sig[i] = (uint8_t) i;
        uint8_t buf[SIGNER_MSG_MAX + 16];
        struct signer_req *req = calloc(1, sizeof(*req));
        struct signer_reply *rep = calloc(1, sizeof(*rep));
        struct wr_err e = {0};
        size_t lens[] = {1, 300, SIGNER_JWS_INPUT_MAX};
        for (size_t l = 0; l < ELEMENTSOF(lens); l++) {
                int n = signer_jws_sign_encode(6, in, lens[l], buf, sizeof(buf), &e);
                assert_int_equal(n, 24 + lens[l]);
                assert_int_equal(signer_req_decode(buf, (size_t) n, req, &e), 0);
                assert_int_equal(req->hdr.type, SIGNER_JWS_SIGN);
                assert_int_equal(req->in_len, lens[l]);
                for (int cut = 0; cut < n; cut++)
                        assert_true(signer_req_decode(buf, (size_t) cut, req, &e) < 0);
        }
        assert_int_equal(signer_jws_sign_encode(6, in, 0, buf, sizeof(buf), &e), -EINVAL);
        assert_int_equal(
                signer_jws_sign_encode(6, in, SIGNER_JWS_INPUT_MAX + 1, buf, sizeof(buf), &e),
                -EINVAL);
        int n = signer_jws_sig_encode(2, sig, buf, sizeof(buf));
        assert_int_equal(n, 24 + SIGNER_JWS_SIG_LEN);
        assert_int_equal(signer_reply_decode(buf, (size_t) n, rep, &e), 0);
        assert_int_equal(rep->hdr.type, SIGNER_JWS_SIG);
        assert_memory_equal(rep->jws_sig, sig, sizeof(sig));
        for (int cut = 0; cut < n; cut++)
                assert_true(signer_reply_decode(buf, (size_t) cut, rep, &e) < 0);
        buf[16] = 1; /* in_len of a reply must be 0 */
        assert_int_equal(signer_reply_decode(buf, (size_t) n, rep, &e), -EBADMSG);
        free(req);
        free(rep);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_sign_roundtrip),
                cmocka_unit_test(test_sign_refusals),
                cmocka_unit_test(test_replies),
                cmocka_unit_test(test_datakey_messages),
                cmocka_unit_test(test_datakey_crypto),
                cmocka_unit_test(test_jws_messages),
                cmocka_unit_test(test_ca_create_reuse_rotate),
                cmocka_unit_test(test_mint_verifies),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
