/* SPDX-License-Identifier: Apache-2.0 */
/* The egress CA's files (ca.h): created, checked, rotated, handed to
 * warren-signer. Runs in warrend, before the signer starts and when an
 * administrator rotates the CA. */

#include "signer/ca.h"

#include "basic/memfd.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <openssl/bio.h>
#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "basic/macro.h"
#include "signer/signer-internal.h"

struct paths {
        char keys[PATH_MAX];
        char key[PATH_MAX];
        char cert[PATH_MAX];
        char old[PATH_MAX];
        char dir[PATH_MAX]; /* state_dir */
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

/* A read file: its bytes (NUL-terminated) and their count; wiped when
 * freed (the key file passes through one). */
struct buf {
        char *p;
        size_t n;
};
static void buf_wipe(struct buf *b) {
        b->p = erase_and_free_n(b->p, b->n);
        b->n = 0;
}

static int paths_make(const char *state_dir, struct paths *p, struct wr_err *e) {
        if (!state_dir || state_dir[0] != '/')
                return err_set(e, -EINVAL, "egress CA: the state dir must be an absolute path");
        int a = snprintf(p->dir, sizeof(p->dir), "%s", state_dir);
        int b = snprintf(p->keys, sizeof(p->keys), "%s/keys", state_dir);
        int c = snprintf(p->key, sizeof(p->key), "%s/" SIGNER_CA_KEY_FILE, state_dir);
        int d = snprintf(p->cert, sizeof(p->cert), "%s/" SIGNER_CA_CERT_FILE, state_dir);
        int f = snprintf(p->old, sizeof(p->old), "%s/" SIGNER_CA_OLD_CERT_FILE, state_dir);
        if (a >= PATH_MAX || b >= PATH_MAX || c >= PATH_MAX || d >= PATH_MAX || f >= PATH_MAX)
                return err_set(e, -ENAMETOOLONG, "egress CA: state dir path too long");
        return 0;
}

/* keys/: created 0700; refused when it is not a directory or others can
 * enter it. */
static int keys_dir_prepare(const struct paths *p, struct wr_err *e) {
        if (mkdir(p->keys, 0700) < 0 && errno != EEXIST)
                return err_set(e, -errno, "create directory %s: %m", p->keys);
        struct stat st;
        if (lstat(p->keys, &st) < 0)
                return err_set(e, -errno, "stat %s: %m", p->keys);
        if (!S_ISDIR(st.st_mode))
                return err_set(e, -ENOTDIR, "%s is not a directory: move it away", p->keys);
        if (st.st_mode & 077)
                return err_set(e, -EPERM,
                               "%s is accessible by group or others (mode %04o): chmod 700 it",
                               p->keys, (unsigned) (st.st_mode & 07777));
        return 0;
}

static int file_read(const char *path, bool secret, struct buf *ret, struct wr_err *e) {
        _cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NOCTTY);
        if (fd < 0)
                return err_set(e, -errno, "open %s: %m", path);
        struct stat st;
        if (fstat(fd, &st) < 0)
                return err_set(e, -errno, "stat %s: %m", path);
        if (!S_ISREG(st.st_mode))
                return err_set(e, -EINVAL, "%s is not a regular file", path);
        if (secret && (st.st_mode & 077))
                return err_set(e, -EPERM,
                               "%s is accessible by group or others (mode %04o): chmod 600 it",
                               path, (unsigned) (st.st_mode & 07777));
        if (st.st_size <= 0 || st.st_size > SIGNER_CA_PEM_MAX)
                return err_set(e, -EINVAL,
                               "%s has %lld bytes (expected 1..%d): the file is damaged; "
                               "restore it or rotate the egress CA",
                               path, (long long) st.st_size, SIGNER_CA_PEM_MAX);
        size_t want = (size_t) st.st_size;
        char *p = malloc(want + 1);
        if (!p)
                return err_set(e, -ENOMEM, "read %s: out of memory", path);
        size_t got = 0;
        while (got < want) {
                ssize_t n = RETRY_EINTR(read(fd, p + got, want - got));
                if (n <= 0) {
                        int r = n < 0 ? -errno : -EIO;
                        erase_and_free_n(p, want + 1);
                        return err_set(e, r, "read %s: %s", path,
                                       n < 0 ? strerror(-r) : "short read");
                }
                got += (size_t) n;
        }
        p[want] = '\0';
        ret->p = p;
        ret->n = want + 1;
        return 0;
}

/* Write data to path atomically with mode: a private temp file, fsync,
 * then rename over path (replace) or link to it (-EEXIST when path exists:
 * someone else made it first). The directory is fsync'd. */
static int file_install(const char *path, const void *data, size_t len, mode_t mode, bool replace,
                        struct wr_err *e) {
        char tmp[PATH_MAX + 32];
        snprintf(tmp, sizeof(tmp), "%s.tmp.%d", path, (int) getpid());
        (void) unlink(tmp); /* a stale one from a crashed process with our pid */
        _cleanup_close_ int fd =
                open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
        if (fd < 0)
                return err_set(e, -errno, "create %s: %m", tmp);
        const char *d = data;
        size_t done = 0;
        errno = 0;
        bool ok = fchmod(fd, mode) == 0;
        while (ok && done < len) {
                ssize_t n = RETRY_EINTR(write(fd, d + done, len - done));
                if (n <= 0)
                        ok = false;
                else
                        done += (size_t) n;
        }
        ok = ok && fsync(fd) == 0;
        int saved = errno ? errno : EIO;
        fd = safe_close(fd);
        if (!ok) {
                unlink(tmp);
                return err_set(e, -saved, "write %s: %s", tmp, strerror(saved));
        }
        int r = 0;
        if (replace) {
                if (rename(tmp, path) < 0)
                        r = err_set(e, -errno, "install %s: %m", path);
        } else {
                if (link(tmp, path) < 0)
                        r = errno == EEXIST ? -EEXIST : err_set(e, -errno, "install %s: %m", path);
        }
        (void) unlink(tmp);
        char dir[PATH_MAX];
        snprintf(dir, sizeof(dir), "%s", path);
        char *slash = strrchr(dir, '/');
        if (slash) {
                *slash = '\0';
                _cleanup_close_ int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
                if (dfd >= 0)
                        (void) fsync(dfd);
        }
        return r;
}

static int ossl_err(struct wr_err *e, const char *what) {
        unsigned long err = ERR_get_error();
        char buf[160] = "failed";
        if (err)
                ERR_error_string_n(err, buf, sizeof(buf));
        ERR_clear_error();
        return err_set(e, -EIO, "egress CA: %s: OpenSSL: %s", what, buf);
}

/* A new self-signed CA certificate for key. */
static int ca_cert_issue(EVP_PKEY *key, X509 **ret, struct wr_err *e) {
        unsigned char idb[4];
        if (RAND_bytes(idb, sizeof(idb)) != 1)
                return ossl_err(e, "random id");
        char cn[64];
        snprintf(cn, sizeof(cn), "Warren egress CA %02x%02x%02x%02x", idb[0], idb[1], idb[2],
                 idb[3]);
        _cleanup_(x509_freep) X509 *x = X509_new();
        if (!x)
                return err_set(e, -ENOMEM, "egress CA: out of memory");
        time_t now = time(NULL);
        X509_NAME *name = X509_get_subject_name(x);
        bool ok = X509_set_version(x, X509_VERSION_3) == 1 && signer_serial_set(x) == 0 &&
                  X509_NAME_add_entry_by_NID(name, NID_commonName, MBSTRING_ASC,
                                             (const unsigned char *) cn, -1, -1, 0) == 1 &&
                  X509_set_issuer_name(x, name) == 1 &&
                  ASN1_TIME_set(X509_getm_notBefore(x), now - 3600) &&
                  ASN1_TIME_set(X509_getm_notAfter(x),
                                now - 3600 + (time_t) SIGNER_CA_DAYS * 86400) &&
                  X509_set_pubkey(x, key) == 1 &&
                  signer_ext_add(x, x, NID_basic_constraints, "critical,CA:TRUE,pathlen:0") == 0 &&
                  signer_ext_add(x, x, NID_key_usage, "critical,keyCertSign,cRLSign") == 0 &&
                  signer_ext_add(x, x, NID_subject_key_identifier, "hash") == 0 &&
                  X509_sign(x, key, EVP_sha256()) > 0;
        if (!ok)
                return ossl_err(e, "issue the CA certificate");
        *ret = TAKE_PTR(x);
        return 0;
}

static int key_generate(EVP_PKEY **ret, struct wr_err *e) {
        EVP_PKEY *k = EVP_EC_gen("P-256");
        if (!k)
                return ossl_err(e, "generate an EC P-256 key");
        *ret = k;
        return 0;
}

/* PEM of a private key, through a BIO that cleanses its memory on free. */
static int key_install(EVP_PKEY *key, const char *path, bool replace, struct wr_err *e) {
        _cleanup_(bio_freep) BIO *b = BIO_new(BIO_s_secmem());
        if (!b || PEM_write_bio_PrivateKey(b, key, NULL, NULL, 0, NULL, NULL) != 1)
                return ossl_err(e, "encode the key");
        char *data = NULL;
        long n = BIO_get_mem_data(b, &data);
        if (n <= 0)
                return ossl_err(e, "encode the key");
        return file_install(path, data, (size_t) n, 0600, replace, e);
}

static int cert_install(X509 *cert, const char *path, struct wr_err *e) {
        _cleanup_(bio_freep) BIO *b = BIO_new(BIO_s_mem());
        if (!b || PEM_write_bio_X509(b, cert) != 1)
                return ossl_err(e, "encode the certificate");
        char *data = NULL;
        long n = BIO_get_mem_data(b, &data);
        if (n <= 0)
                return ossl_err(e, "encode the certificate");
        return file_install(path, data, (size_t) n, 0644, true, e);
}

static int key_parse(const struct buf *b, const char *path, EVP_PKEY **ret, struct wr_err *e) {
        _cleanup_(bio_freep) BIO *bio = BIO_new_mem_buf(b->p, (int) (b->n - 1));
        if (!bio)
                return err_set(e, -ENOMEM, "egress CA: out of memory");
        EVP_PKEY *k = PEM_read_bio_PrivateKey(bio, NULL, NULL, NULL);
        ERR_clear_error();
        if (!k)
                return err_set(e, -EINVAL,
                               "%s is not a PEM private key: the file is damaged; restore it "
                               "or rotate the egress CA",
                               path);
        *ret = k;
        return 0;
}

/* The certificate at path, when it is readable, parses and holds key's
 * public key; otherwise NULL (-ENOENT, -EINVAL: issue a new one). */
static int cert_load_matching(const char *path, EVP_PKEY *key, X509 **ret, struct wr_err *e) {
        struct buf b = {0};
        struct wr_err local = {0};
        int r = file_read(path, false, &b, &local);
        if (r == -ENOENT || r == -EINVAL)
                return r;
        if (r < 0) {
                if (e)
                        *e = local;
                return r;
        }
        _cleanup_(bio_freep) BIO *bio = BIO_new_mem_buf(b.p, (int) (b.n - 1));
        X509 *x = bio ? PEM_read_bio_X509(bio, NULL, NULL, NULL) : NULL;
        buf_wipe(&b);
        if (!x || X509_check_private_key(x, key) != 1) {
                ERR_clear_error();
                X509_free(x);
                return -EINVAL;
        }
        *ret = x;
        return 0;
}

int signer_ca_ensure(const char *state_dir, struct wr_err *e) {
        struct paths p;
        int r = paths_make(state_dir, &p, e);
        if (r < 0)
                return r;
        r = keys_dir_prepare(&p, e);
        if (r < 0)
                return r;
        int created = 0;
        _cleanup_(pkey_freep) EVP_PKEY *key = NULL;
        for (int attempt = 0; !key; attempt++) {
                struct buf b = {0};
                struct wr_err local = {0};
                r = file_read(p.key, true, &b, &local);
                if (r == -ENOENT && attempt == 0) {
                        _cleanup_(pkey_freep) EVP_PKEY *k = NULL;
                        _cleanup_(x509_freep) X509 *x = NULL;
                        r = key_generate(&k, e);
                        if (r >= 0)
                                r = ca_cert_issue(k, &x, e);
                        if (r < 0)
                                return r;
                        r = key_install(k, p.key, false, e);
                        if (r == -EEXIST)
                                continue; /* someone else made one first: use it */
                        if (r < 0)
                                return r;
                        r = cert_install(x, p.cert, e);
                        return r < 0 ? r : 1;
                }
                if (r < 0) {
                        if (e)
                                *e = local;
                        return r;
                }
                r = key_parse(&b, p.key, &key, e);
                buf_wipe(&b);
                if (r < 0)
                        return r;
        }
        _cleanup_(x509_freep) X509 *cert = NULL;
        r = cert_load_matching(p.cert, key, &cert, e);
        if (r == -ENOENT || r == -EINVAL) {
                /* missing, damaged, or for another key (a rotation cut
                 * short between its renames): a new one for this key */
                r = ca_cert_issue(key, &cert, e);
                if (r >= 0)
                        r = cert_install(cert, p.cert, e);
                if (r < 0)
                        return r;
                created = 1;
        } else if (r < 0) {
                return r;
        }
        time_t na = signer_asn1_time(X509_get0_notAfter(cert));
        if (na <= time(NULL))
                return err_set(e, -EKEYEXPIRED,
                               "the egress CA certificate %s has expired: rotate the egress CA",
                               p.cert);
        return created;
}

int signer_ca_rotate(const char *state_dir, struct wr_err *e) {
        struct paths p;
        int r = paths_make(state_dir, &p, e);
        if (r < 0)
                return r;
        r = keys_dir_prepare(&p, e);
        if (r < 0)
                return r;
        _cleanup_(pkey_freep) EVP_PKEY *key = NULL;
        _cleanup_(x509_freep) X509 *cert = NULL;
        r = key_generate(&key, e);
        if (r >= 0)
                r = ca_cert_issue(key, &cert, e);
        if (r < 0)
                return r;
        /* the current certificate becomes .old (a hard link renamed over
         * the previous .old: there is always a complete file there) */
        char tmp[PATH_MAX + 32];
        snprintf(tmp, sizeof(tmp), "%s.tmp.%d", p.old, (int) getpid());
        (void) unlink(tmp);
        if (link(p.cert, tmp) == 0) {
                if (rename(tmp, p.old) < 0) {
                        r = err_set(e, -errno, "keep the old certificate as %s: %m", p.old);
                        unlink(tmp);
                        return r;
                }
        } else if (errno != ENOENT) {
                return err_set(e, -errno, "keep the old certificate as %s: %m", p.old);
        }
        r = key_install(key, p.key, true, e);
        if (r < 0)
                return r;
        r = cert_install(cert, p.cert, e);
        if (r < 0)
                return r;
        /* a state dir that is not root's belongs to a warrend that drops
         * to its owner (--user, docs/privsep.md): it reads these files
         * when its CA signer restarts, so they become the owner's too */
        struct stat st;
        if (lstat(p.dir, &st) == 0 && st.st_uid != 0) {
                const char *const files[] = {p.key, p.cert, p.old};
                for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++)
                        if (lchown(files[i], st.st_uid, st.st_gid) < 0 && errno != ENOENT)
                                return err_set(e, -errno, "give %s to uid %u: %m", files[i],
                                               (unsigned) st.st_uid);
        }
        return 0;
}

int signer_ca_fd(const char *state_dir, int *ret_fd, struct wr_err *e) {
        int r = signer_ca_ensure(state_dir, e);
        if (r < 0)
                return r;
        struct paths p;
        r = paths_make(state_dir, &p, e);
        if (r < 0)
                return r;
        struct buf k = {0}, c = {0};
        r = file_read(p.key, true, &k, e);
        if (r >= 0)
                r = file_read(p.cert, false, &c, e);
        if (r >= 0) {
                const struct iovec iov[] = {{k.p, k.n - 1}, {c.p, c.n - 1}};
                r = memfd_sealed("warren-egress-ca", "egress CA", iov, 2, ret_fd, e);
        }
        buf_wipe(&k);
        buf_wipe(&c);
        return r;
}
