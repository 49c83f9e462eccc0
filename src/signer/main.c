/* SPDX-License-Identifier: Apache-2.0 */
/* warren-signer: holds one key, and nothing else, in a process of its own
 * (relayd's `ca` model). Three roles, one per process:
 *   - the egress CA's private key (--ca-fd): warren-egress, which talks to
 *     sandboxes, asks it for leaf certificates and never sees the CA key;
 *   - the secrets key (--secrets-key-fd): warrend asks it for data keys
 *     and to open their wrappings (datakey.h), and never holds the key;
 *   - the workload-identity signing key (--jws-key-fd): warrend asks it to
 *     sign identity tokens (ES256) and holds only the public half.
 * Started as root by warrend:
 *
 *   warren-signer (--ca-fd N | --secrets-key-fd N | --jws-key-fd N) --sock-fd N
 *                 [--uid USER] [--gid GROUP] [--root EMPTY-DIR]
 *                 [--log-level debug|info|warn|error] [--log-format text|json]
 *                 [--seccomp-strict]
 *
 * --ca-fd: an fd holding the CA key and certificate PEM (signer_ca_fd());
 * --secrets-key-fd: an fd holding exactly the 32 key bytes
 * (store_secret_key_memfd()); --jws-key-fd: an fd holding a P-256 private
 * key as PEM (wid_signing_key_memfd()); read to its end, then closed. --sock-fd: its
 * end of a SOCK_SEQPACKET socketpair whose other end is the requester's
 * (signer-proto.h). --uid
 * defaults to nobody, --gid to that user's group, --root to
 * /run/warren/signer-root (created when missing; must be empty, owned by
 * root, not writable by others).
 *
 * It reads its key, closes every other fd, does one request's work to load
 * what OpenSSL loads lazily, then confines itself (an unprivileged user in
 * an empty root, no capabilities, no_new_privs, not dumpable, a seccomp
 * allowlist of what signing and the socket need: no open, no socket, no
 * exec), checks that it still works, and serves its role's requests one at
 * a time, in order. Exit status: 0 when the socket closes, 2 usage, key or
 * confinement error. */

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <openssl/bn.h>
#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/ec.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <seccomp.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "basic/confine.h"
#include "basic/log.h"
#include "signer/datakey.h"
#include "signer/es256.h"
#include "signer/mint.h"
#include "signer/signer-proto.h"

#define CA_INPUT_MAX (2 * 16384)

static struct {
        int ca_fd, secrets_fd, jws_fd, sock_fd;
        const char *user, *group, *root;
        bool strict;
} cfg = {
        .ca_fd = -EBADF,
        .secrets_fd = -EBADF,
        .jws_fd = -EBADF,
        .sock_fd = -EBADF,
        .user = "nobody",
        .group = NULL,
        .root = "/run/warren/signer-root",
};

static _noreturn_ void die(const char *what, const char *arg) {
        log_error("warren-signer: %s%s%s", what, arg ? ": " : "", arg ? arg : "");
        exit(2);
}

static _noreturn_ void usage(int code) {
        fprintf(code ? stderr : stdout,
                "usage: warren-signer (--ca-fd N | --secrets-key-fd N | --jws-key-fd N)\n"
                "         --sock-fd N\n"
                "         [--uid USER] [--gid GROUP]\n"
                "         [--root EMPTY-DIR] [--log-level debug|info|warn|error]\n"
                "         [--log-format text|json] "
                "[--seccomp-strict]\n");
        exit(code);
}

static int parse_fd(const char *s, int *ret) {
        char *end;
        long v = strtol(s, &end, 10);
        if (!*s || *end || v < 3 || v > 65535)
                return -EINVAL;
        if (fcntl((int) v, F_GETFD) < 0)
                return -EBADF;
        *ret = (int) v;
        return 0;
}

/* A key's PEM, read to the end of *fd (the option named what), which is
 * then closed. The buffer is wiped by the caller. */
static int pem_read(int *fd, const char *what, char *buf, size_t size, size_t *ret_len,
                    struct wr_err *e) {
        size_t n = 0;
        for (;;) {
                if (n == size) {
                        closep(fd);
                        return err_set(e, -EMSGSIZE, "%s: more than %zu bytes", what, size);
                }
                ssize_t k = RETRY_EINTR(read(*fd, buf + n, size - n));
                if (k < 0) {
                        int r = -errno;
                        closep(fd);
                        return err_set(e, r, "%s: read: %s", what, strerror(-r));
                }
                if (k == 0)
                        break;
                n += (size_t) k;
        }
        closep(fd);
        *ret_len = n;
        return 0;
}

/* The identity signing key: one P-256 private key in PEM. */
static int jws_key_parse(const char *pem, size_t len, EVP_PKEY **ret, struct wr_err *e) {
        BIO *b = BIO_new_mem_buf(pem, (int) len);
        EVP_PKEY *k = b ? PEM_read_bio_PrivateKey(b, NULL, NULL, NULL) : NULL;
        BIO_free(b);
        char group[16] = "";
        size_t gl = 0;
        if (!k || EVP_PKEY_get_base_id(k) != EVP_PKEY_EC ||
            EVP_PKEY_get_utf8_string_param(k, OSSL_PKEY_PARAM_GROUP_NAME, group, sizeof(group),
                                           &gl) != 1 ||
            strcmp(group, "prime256v1") != 0) {
                EVP_PKEY_free(k);
                return err_set(e, -EINVAL, "--jws-key-fd: not a P-256 private key in PEM");
        }
        *ret = k;
        return 0;
}

/* The secrets key: exactly SIGNER_SECRETS_KEY_LEN bytes to the end of
 * --secrets-key-fd, which is then closed. */
static int secrets_read(uint8_t key[SIGNER_SECRETS_KEY_LEN], struct wr_err *e) {
        uint8_t buf[SIGNER_SECRETS_KEY_LEN + 1];
        size_t n = 0;
        int r = 0;
        while (n < sizeof(buf)) {
                ssize_t k = RETRY_EINTR(read(cfg.secrets_fd, buf + n, sizeof(buf) - n));
                if (k < 0) {
                        r = err_set(e, -errno, "--secrets-key-fd: read: %m");
                        break;
                }
                if (k == 0)
                        break;
                n += (size_t) k;
        }
        closep(&cfg.secrets_fd);
        if (r >= 0 && n != SIGNER_SECRETS_KEY_LEN)
                r = err_set(e, -EINVAL, "--secrets-key-fd: %s%zu bytes, expected %d",
                            n > SIGNER_SECRETS_KEY_LEN ? "more than " : "",
                            n - (n > SIGNER_SECRETS_KEY_LEN), SIGNER_SECRETS_KEY_LEN);
        if (r >= 0)
                memcpy(key, buf, SIGNER_SECRETS_KEY_LEN);
        OPENSSL_cleanse(buf, sizeof(buf));
        return r;
}

/* --- confinement --- */

/* What signing (OpenSSL: memory, randomness, time), the socket and the log
 * need; everything else fails with EPERM (--seccomp-strict: kills the
 * process, which the tests use to prove the list is enough). */
static int seccomp_install(struct wr_err *e) {
        static const int allow[] = {
                SCMP_SYS(write),         SCMP_SYS(close),        SCMP_SYS(recvmsg),
                SCMP_SYS(sendmsg),       SCMP_SYS(exit),         SCMP_SYS(exit_group),
                SCMP_SYS(brk),           SCMP_SYS(munmap),       SCMP_SYS(mremap),
                SCMP_SYS(madvise),       SCMP_SYS(futex),        SCMP_SYS(getrandom),
                SCMP_SYS(clock_gettime), SCMP_SYS(rt_sigreturn), SCMP_SYS(getpid),
                SCMP_SYS(sigaltstack), /* ASan builds */
        };
        int r;
        scmp_filter_ctx ctx =
                confine_seccomp_new(cfg.strict ? SCMP_ACT_KILL_PROCESS : SCMP_ACT_ERRNO(EPERM),
                                    allow, ELEMENTSOF(allow), &r);
        if (!ctx)
                return err_set(e, r, "seccomp: %s", strerror(-r));
        r = seccomp_load(ctx);
        seccomp_release(ctx);
        return r < 0 ? err_set(e, r, "seccomp: %s", strerror(-r)) : 0;
}

static int confine(struct wr_err *e) {
        if (geteuid() != 0)
                return err_set(e, -EPERM,
                               "warren-signer must be started as root (it confines itself)");
        uid_t uid = 0;
        gid_t gid = 0;
        int r = confine_ids(cfg.user, cfg.group, &uid, &gid, e);
        if (r < 0)
                return r;
        r = confine_root_check(cfg.root, e);
        if (r < 0)
                return r;
        struct rlimit zero = {0, 0}, few = {16, 16};
        if (setrlimit(RLIMIT_CORE, &zero) < 0 || setrlimit(RLIMIT_MEMLOCK, &zero) < 0 ||
            setrlimit(RLIMIT_MSGQUEUE, &zero) < 0 || setrlimit(RLIMIT_NOFILE, &few) < 0 ||
            setrlimit(RLIMIT_NPROC, &zero) < 0)
                return err_set(e, -errno, "setrlimit: %m");
        r = confine_drop(cfg.root, uid, gid, e);
        if (r < 0)
                return r;
        return seccomp_install(e);
}

/* --- serving --- */

/* A throwaway key's SubjectPublicKeyInfo, for the warm-up and self-check
 * mints (before confinement: it loads what OpenSSL loads lazily; after:
 * it proves the seccomp filter lets signing through). */
static int probe_spki(uint8_t **ret, size_t *ret_len) {
        EVP_PKEY *k = EVP_EC_gen("P-256");
        unsigned char *der = NULL;
        int n = k ? i2d_PUBKEY(k, &der) : -1;
        EVP_PKEY_free(k);
        if (n <= 0)
                return -EIO;
        *ret = der;
        *ret_len = (size_t) n;
        return 0;
}

static int probe_mint(const struct signer_ca *ca, const uint8_t *spki, size_t len,
                      struct wr_err *e) {
        uint8_t *der = NULL;
        size_t n = 0;
        int r = signer_mint(ca, "warren-signer.invalid", spki, len, time(NULL), &der, &n, e);
        free(der);
        return r;
}

static enum signer_errcode errcode(int r) {
        switch (r) {
        case -EINVAL:
                return SIGNER_ERR_HOST;
        case -EKEYREJECTED:
                return SIGNER_ERR_KEY;
        case -EKEYEXPIRED:
                return SIGNER_ERR_EXPIRED;
        case -EBADMSG:
        case -EMSGSIZE:
        case -EOPNOTSUPP:
                return SIGNER_ERR_BADMSG;
        default:
                return SIGNER_ERR_INTERNAL;
        }
}

static void reply(const uint8_t *out, int n) {
        if (n <= 0)
                return;
        struct iovec iov = {.iov_base = (void *) out, .iov_len = (size_t) n};
        struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1};
        if (sendmsg(cfg.sock_fd, &mh, MSG_NOSIGNAL) < 0) {
                if (errno == EPIPE || errno == ECONNRESET) {
                        log_info("warren-signer: socket closed, exiting");
                        exit(0);
                }
                log_warn("warren-signer: reply not sent: %s", strerror(errno));
        }
}

/* One SIGN: a leaf certificate, or why not. */
static int answer_sign(const struct signer_ca *ca, const struct signer_req *req, uint8_t *out,
                       size_t size) {
        struct wr_err e = {0};
        uint8_t *der = NULL;
        size_t len = 0;
        int r = signer_mint(ca, req->host, req->key, req->key_len, time(NULL), &der, &len, &e);
        if (r >= 0 && len > SIGNER_CERT_MAX)
                r = err_set(&e, -EIO, "certificate of %zu bytes, above %u", len, SIGNER_CERT_MAX);
        if (r < 0) {
                log_warn("warren-signer: request %u for %s refused: %s", req->hdr.id, req->host,
                         e.msg);
                r = signer_error_encode(req->hdr.id, errcode(r), e.msg, out, size);
        } else {
                log_debug("warren-signer: request %u: certificate for %s (%zu bytes)", req->hdr.id,
                          req->host, len);
                r = signer_cert_encode(req->hdr.id, der, len, out, size);
        }
        free(der);
        return r;
}

/* One DATAKEY_NEW or DATAKEY_OPEN: the data key and its wrapping, or why
 * not. The key passes through dek only (wiped); out is wiped by the
 * caller after sending. */
static int answer_datakey(const uint8_t *key, const struct signer_req *req, uint8_t *out,
                          size_t size) {
        struct wr_err e = {0};
        uint8_t dek[SIGNER_DEK_LEN], wrapped[SIGNER_WRAPPED_LEN];
        int r;
        if (req->hdr.type == SIGNER_DATAKEY_NEW) {
                r = signer_datakey_new(key, req->label, req->label_len, dek, wrapped, &e);
        } else {
                memcpy(wrapped, req->wrapped, sizeof(wrapped));
                r = signer_datakey_open(key, req->label, req->label_len, wrapped, dek, &e);
        }
        if (r < 0) {
                log_warn("warren-signer: request %u refused: %s", req->hdr.id, e.msg);
                r = signer_error_encode(req->hdr.id,
                                        r == -EBADMSG ? SIGNER_ERR_UNWRAP : SIGNER_ERR_INTERNAL,
                                        e.msg, out, size);
        } else {
                r = signer_datakey_encode(req->hdr.id, dek, wrapped, out, size);
        }
        OPENSSL_cleanse(dek, sizeof(dek));
        return r;
}

/* --jws-key-make PATH (PATH ends in .pem): a new P-256 identity key,
 * PKCS#8 PEM in PATH (0600, never replacing a file) and its public half in
 * PATH with .pub for .pem, so warrend, which only verifies, never parses
 * the private key. Runs unconfined (it writes files) and exits. */
static int jws_key_make(const char *path) {
        size_t n = strlen(path);
        if (n < 5 || n > 4000 || strcmp(path + n - 4, ".pem") != 0) {
                log_error("warren-signer: --jws-key-make wants a path ending in .pem");
                return 2;
        }
        char tmp[4100], pub[4100];
        snprintf(tmp, sizeof(tmp), "%s.tmp", path);
        snprintf(pub, sizeof(pub), "%.*s.pub", (int) n - 4, path);
        EVP_PKEY *k = EVP_EC_gen("P-256");
        int fd = k ? open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600) : -1;
        FILE *f = fd >= 0 ? fdopen(fd, "w") : NULL;
        bool ok = f && PEM_write_PrivateKey(f, k, NULL, NULL, 0, NULL, NULL) == 1 &&
                  fflush(f) == 0 && fsync(fileno(f)) == 0;
        if (f)
                ok = fclose(f) == 0 && ok;
        else if (fd >= 0)
                close(fd);
        ok = ok && link(tmp, path) == 0;
        if (fd >= 0)
                unlink(tmp);
        if (ok) {
                snprintf(tmp, sizeof(tmp), "%s.tmp", pub);
                f = fopen(tmp, "we");
                ok = f && PEM_write_PUBKEY(f, k) == 1;
                if (f)
                        ok = fclose(f) == 0 && ok;
                ok = ok && rename(tmp, pub) == 0;
                if (!ok)
                        unlink(tmp);
        }
        EVP_PKEY_free(k);
        if (!ok) {
                log_error("warren-signer: --jws-key-make %s: %s", path, strerror(errno));
                return 1;
        }
        return 0;
}

/* One JWS_SIGN. */
static int answer_jws(EVP_PKEY *key, const struct signer_req *req, uint8_t *out, size_t size) {
        struct wr_err e = {0};
        uint8_t rs[SIGNER_JWS_SIG_LEN];
        int r = signer_es256_sign(key, req->in, req->in_len, rs, &e);
        if (r < 0) {
                log_warn("warren-signer: request %u refused: %s", req->hdr.id, e.msg);
                return signer_error_encode(req->hdr.id, SIGNER_ERR_INTERNAL, e.msg, out, size);
        }
        return signer_jws_sig_encode(req->hdr.id, rs, out, size);
}

/* Serve requests until the socket closes: SIGN with a CA, DATAKEY_* with
 * the secrets key, JWS_SIGN with an identity key (exactly one of ca, key,
 * jws is set). */
static _noreturn_ void serve(const struct signer_ca *ca, const uint8_t *key, EVP_PKEY *jws) {
        static uint8_t in[SIGNER_MSG_MAX + 1], out[SIGNER_MSG_MAX];
        static struct signer_req req;
        for (;;) {
                struct iovec iov = {.iov_base = in, .iov_len = sizeof(in)};
                struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1};
                ssize_t n = recvmsg(cfg.sock_fd, &mh, MSG_TRUNC | MSG_CMSG_CLOEXEC);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n <= 0) {
                        /* the requester is gone */
                        log_info("warren-signer: socket closed, exiting");
                        exit(0);
                }
                /* a datagram longer than the buffer was cut (MSG_TRUNC
                 * reports its real size): the decoder refuses the size
                 * after reading the header, for the id */
                struct wr_err e = {0};
                int r = signer_req_decode(in, (size_t) n, &req, &e);
                bool sign = req.hdr.type == SIGNER_SIGN, jw = req.hdr.type == SIGNER_JWS_SIGN;
                if (r >= 0 && (sign ? !ca : jw ? !jws : !key))
                        r = err_set(&e, -EPERM, "this signer keeps the %s: it does not serve %s",
                                    ca    ? "egress CA"
                                    : key ? "secrets key"
                                          : "identity key",
                                    sign ? "SIGN"
                                    : jw ? "JWS_SIGN"
                                         : "data keys");
                if (r < 0) {
                        log_warn("warren-signer: request %u refused: %s", req.hdr.id, e.msg);
                        reply(out, signer_error_encode(req.hdr.id,
                                                       r == -EPERM ? SIGNER_ERR_ROLE : errcode(r),
                                                       e.msg, out, sizeof(out)));
                } else {
                        reply(out, sign ? answer_sign(ca, &req, out, sizeof(out))
                                   : jw ? answer_jws(jws, &req, out, sizeof(out))
                                        : answer_datakey(key, &req, out, sizeof(out)));
                }
                /* a request's label and a reply's data key go */
                OPENSSL_cleanse(out, sizeof(out));
                OPENSSL_cleanse(in, (size_t) n < sizeof(in) ? (size_t) n : sizeof(in));
        }
}

/* The secrets role's warm-up and self-check: a data key made and opened. */
static int probe_datakey(const uint8_t *key, struct wr_err *e) {
        uint8_t dek[SIGNER_DEK_LEN], again[SIGNER_DEK_LEN], wrapped[SIGNER_WRAPPED_LEN];
        static const char label[] = "warren-signer self-check";
        int r = signer_datakey_new(key, label, sizeof(label), dek, wrapped, e);
        if (r >= 0)
                r = signer_datakey_open(key, label, sizeof(label), wrapped, again, e);
        if (r >= 0 && memcmp(dek, again, sizeof(dek)) != 0)
                r = err_set(e, -EIO, "a data key did not open to itself");
        OPENSSL_cleanse(dek, sizeof(dek));
        OPENSSL_cleanse(again, sizeof(again));
        return r;
}

int main(int argc, char **argv) {
        enum {
                O_CA = 256,
                O_SECRETS,
                O_JWS,
                O_JWS_MAKE,
                O_SOCK,
                O_UID,
                O_GID,
                O_ROOT,
                O_LOG,
                O_LOGFMT,
                O_STRICT,
                O_HELP
        };
        static const struct option opts[] = {
                {"ca-fd", required_argument, NULL, O_CA},
                {"secrets-key-fd", required_argument, NULL, O_SECRETS},
                {"jws-key-fd", required_argument, NULL, O_JWS},
                {"jws-key-make", required_argument, NULL, O_JWS_MAKE},
                {"sock-fd", required_argument, NULL, O_SOCK},
                {"uid", required_argument, NULL, O_UID},
                {"gid", required_argument, NULL, O_GID},
                {"root", required_argument, NULL, O_ROOT},
                {"log-level", required_argument, NULL, O_LOG},
                {"log-format", required_argument, NULL, O_LOGFMT},
                {"seccomp-strict", no_argument, NULL, O_STRICT},
                {"help", no_argument, NULL, O_HELP},
                {0},
        };
        int o;
        while ((o = getopt_long(argc, argv, "", opts, NULL)) != -1) {
                switch (o) {
                case O_CA:
                        if (parse_fd(optarg, &cfg.ca_fd) < 0)
                                die("bad --ca-fd", optarg);
                        break;
                case O_SECRETS:
                        if (parse_fd(optarg, &cfg.secrets_fd) < 0)
                                die("bad --secrets-key-fd", optarg);
                        break;
                case O_JWS:
                        if (parse_fd(optarg, &cfg.jws_fd) < 0)
                                die("bad --jws-key-fd", optarg);
                        break;
                case O_JWS_MAKE:
                        exit(jws_key_make(optarg));
                case O_SOCK:
                        if (parse_fd(optarg, &cfg.sock_fd) < 0)
                                die("bad --sock-fd", optarg);
                        break;
                case O_UID:
                        cfg.user = optarg;
                        break;
                case O_GID:
                        cfg.group = optarg;
                        break;
                case O_ROOT:
                        cfg.root = optarg;
                        break;
                case O_LOG: {
                        enum log_level lv;
                        if (log_level_from_string(optarg, &lv) < 0)
                                die("bad --log-level", optarg);
                        log_set_level(lv);
                        break;
                }
                case O_LOGFMT: {
                        enum log_format f;
                        if (log_format_from_string(optarg, &f) < 0)
                                die("bad --log-format", optarg);
                        log_set_format(f);
                        break;
                }
                case O_STRICT:
                        cfg.strict = true;
                        break;
                case O_HELP:
                        usage(0);
                default:
                        usage(2);
                }
        }
        int key_fd = cfg.ca_fd >= 0 ? cfg.ca_fd : cfg.secrets_fd >= 0 ? cfg.secrets_fd : cfg.jws_fd;
        int roles = (cfg.ca_fd >= 0) + (cfg.secrets_fd >= 0) + (cfg.jws_fd >= 0);
        if (optind != argc || roles != 1 || cfg.sock_fd < 0 || key_fd == cfg.sock_fd)
                usage(2);
        int type = 0;
        socklen_t tl = sizeof(type);
        if (getsockopt(cfg.sock_fd, SOL_SOCKET, SO_TYPE, &type, &tl) < 0 || type != SOCK_SEQPACKET)
                die("--sock-fd is not a SOCK_SEQPACKET socket", NULL);
        int fl = fcntl(cfg.sock_fd, F_GETFL);
        if (fl < 0 || fcntl(cfg.sock_fd, F_SETFL, fl & ~O_NONBLOCK) < 0 ||
            fcntl(cfg.sock_fd, F_SETFD, FD_CLOEXEC) < 0)
                die("cannot set up --sock-fd", NULL);
        signal(SIGPIPE, SIG_IGN);

        /* the key: read, parse, wipe what it passed through */
        struct wr_err e = {0};
        struct signer_ca *ca = NULL;
        EVP_PKEY *jws = NULL;
        static uint8_t secrets_key[SIGNER_SECRETS_KEY_LEN];
        int r;
        if (cfg.ca_fd >= 0 || cfg.jws_fd >= 0) {
                bool is_ca = cfg.ca_fd >= 0;
                char *pem = malloc(CA_INPUT_MAX);
                size_t pem_len = 0;
                if (!pem)
                        die("out of memory", NULL);
                r = pem_read(is_ca ? &cfg.ca_fd : &cfg.jws_fd, is_ca ? "--ca-fd" : "--jws-key-fd",
                             pem, CA_INPUT_MAX, &pem_len, &e);
                if (r >= 0)
                        r = is_ca ? signer_ca_parse(pem, pem_len, &ca, &e)
                                  : jws_key_parse(pem, pem_len, &jws, &e);
                OPENSSL_cleanse(pem, CA_INPUT_MAX);
                free(pem);
                if (r < 0)
                        die(is_ca ? "--ca-fd" : "--jws-key-fd", e.msg);
        } else if (secrets_read(secrets_key, &e) < 0) {
                die("--secrets-key-fd", e.msg);
        }

        /* nothing but stdio and the socket from here on */
        if (cfg.sock_fd > 3)
                (void) syscall(SYS_close_range, 3u, (unsigned) cfg.sock_fd - 1, 0u);
        (void) syscall(SYS_close_range, (unsigned) cfg.sock_fd + 1, ~0u, 0u);

        uint8_t *spki = NULL;
        size_t spki_len = 0;
        if (ca) {
                if (probe_spki(&spki, &spki_len) < 0 || probe_mint(ca, spki, spki_len, &e) < 0)
                        die("warm-up certificate", e.msg[0] ? e.msg : "OpenSSL failed");
                log_debug("warren-signer: CA loaded, valid until %lld",
                          (long long) signer_ca_not_after(ca));
        } else if (jws) {
                uint8_t rs[SIGNER_JWS_SIG_LEN];
                if (signer_es256_sign(jws, (const uint8_t *) "warm-up", 7, rs, &e) < 0)
                        die("warm-up signature", e.msg);
        } else if (probe_datakey(secrets_key, &e) < 0) {
                die("warm-up data key", e.msg);
        }

        if (confine(&e) < 0)
                die("confine", e.msg);
        uint8_t rs[SIGNER_JWS_SIG_LEN];
        if (ca    ? probe_mint(ca, spki, spki_len, &e) < 0
            : jws ? signer_es256_sign(jws, (const uint8_t *) "self-check", 10, rs, &e) < 0
                  : probe_datakey(secrets_key, &e) < 0)
                die("self-check after confinement", e.msg);
        OPENSSL_free(spki);
        log_info("warren-signer: ready (pid %d), keeping the %s", (int) getpid(),
                 ca    ? "egress CA"
                 : jws ? "identity key"
                       : "secrets key");
        serve(ca, ca || jws ? NULL : secrets_key, jws);
}
