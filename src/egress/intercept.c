/* SPDX-License-Identifier: Apache-2.0 */
/* TLS interception for hosts with request rules or credentials
 * (SECURITY.md egress decisions 6-9; docs/network.md "Interception").
 *
 * proxy.c decides a TLS connection as usual (SNI, policy, every answer);
 * when the SNI names a host of the sandbox's rules it hands the
 * connection here instead of dialing: one thread per intercepted
 * connection (threads are what the seccomp filter allows to be created),
 * blocking I/O with poll(2) on non-blocking fds, so that the opaque relay
 * of proxy.c stays untouched. The thread:
 *
 *   1. terminates the sandbox's TLS with a leaf for the SNI name, minted by
 *      warren-signer (the CA key never enters this process) and cached per
 *      host; ALPN: http/1.1 only;
 *   2. reads HTTP/1.1 request heads with the strict parser (net/http.c):
 *      every head must name the SNI host (else 421, closed), TRACE/TRACK
 *      405, CONNECT 405, h2c and unknown Upgrades 400 (a WebSocket upgrade
 *      passes, after which both directions are opaque); any malformed head
 *      (CL+TE, duplicate CL, obs-fold, bare LF, ...) 400 and closed;
 *   3. picks the first rule whose match holds (net_rule_match), rewrites
 *      the head (net_request_rewrite: literal headers, placeholders of the
 *      rule and of the host's credentials), and sends it to the upstream:
 *      the decided address of the SNI host, or the rule's forward_url host
 *      (resolved here, refused when the built-in deny list refuses it);
 *      upstream TLS verified against --upstream-ca (default: the host's
 *      bundle), SNI and Host the upstream's name;
 *   4. request bodies are framed (egress_http_body) and copied; responses
 *      are copied back as they come.
 * One EVENT at the end, like every proxied connection. */

#include <arpa/inet.h>
#include <ares.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "basic/log.h"
#include "egress/egress.h"
#include "egress/http-response.h"
#include "egress/http-stream.h"
#include "egress/intercept.h"
#include "signer/signer-proto.h"

#define IBUF_CAP (NET_HTTP_HEAD_MAX + 16384u)
#define OBUF_CAP (2 * NET_HTTP_HEAD_MAX)
#define IO_TIMEOUT_MS 30000
#define IDLE_TIMEOUT_MS 300000
#define LEAF_CACHE 256
/* Intercepted connections at once (each a thread: 256 KiB of stack and
 * ~210 KiB of buffers); past it a new one is refused (reset) while opaque
 * tunnels go on. */
#define INTERCEPT_MAX 1024
#define LEAF_RENEW_S (24 * 3600) /* ask again a day before notAfter */

/* ---- process-wide state (made before confinement) ---- */

static SSL_CTX *srv_ctx, *cli_ctx;
static EVP_PKEY *leaf_key;
static uint8_t leaf_spki[SIGNER_KEY_MAX];
static size_t leaf_spki_len;
static int signer_fd = -EBADF;
static pthread_mutex_t signer_lock = PTHREAD_MUTEX_INITIALIZER;
static uint32_t signer_id;

struct leaf {
        char host[NET_HOST_MAX + 1];
        X509 *cert;
        time_t renew; /* ask again from then on */
};
static pthread_mutex_t cache_lock = PTHREAD_MUTEX_INITIALIZER;
static struct leaf cache[LEAF_CACHE];
static unsigned cache_next;
static atomic_ulong leaf_hits, leaf_misses;
static atomic_uint n_intercepts;

static int alpn_cb(SSL *s, const unsigned char **out, unsigned char *outlen,
                   const unsigned char *in, unsigned inlen, void *arg) {
        (void) s;
        (void) arg;
        /* http/1.1 only: h2 would bypass the request parser */
        for (unsigned i = 0; i < inlen;) {
                unsigned l = in[i];
                if (i + 1 + l > inlen)
                        break;
                if (l == 8 && memcmp(in + i + 1, "http/1.1", 8) == 0) {
                        *out = in + i + 1;
                        *outlen = 8;
                        return SSL_TLSEXT_ERR_OK;
                }
                i += 1 + l;
        }
        return SSL_TLSEXT_ERR_NOACK;
}

bool egress_intercept_enabled(void) {
        return signer_fd >= 0;
}

int egress_intercept_prepare(int sfd, const char *upstream_ca, struct wr_err *e) {
        if (sfd < 0)
                return 0;
        OPENSSL_init_ssl(OPENSSL_INIT_LOAD_SSL_STRINGS | OPENSSL_INIT_LOAD_CRYPTO_STRINGS, NULL);
        srv_ctx = SSL_CTX_new(TLS_server_method());
        cli_ctx = SSL_CTX_new(TLS_client_method());
        if (!srv_ctx || !cli_ctx)
                return err_set(e, -ENOMEM, "SSL_CTX_new failed");
        SSL_CTX_set_min_proto_version(srv_ctx, TLS1_2_VERSION);
        /* The sandbox-facing side only (it carries placeholders, never a
         * secret, over a local veth): security level 0, so that a TLS 1.2
         * client sending no signature_algorithms (busybox wget) gets the
         * RFC 5246 default (SHA-1 with ECDSA), which OpenSSL 3 refuses at
         * level 1. Upstream connections keep the default level. */
        SSL_CTX_set_security_level(srv_ctx, 0);
        SSL_CTX_set_min_proto_version(cli_ctx, TLS1_2_VERSION);
        SSL_CTX_set_alpn_select_cb(srv_ctx, alpn_cb, NULL);
        SSL_CTX_set_options(srv_ctx, SSL_OP_NO_RENEGOTIATION | SSL_OP_NO_TICKET);
        SSL_CTX_set_options(cli_ctx, SSL_OP_NO_RENEGOTIATION);
        SSL_CTX_set_session_cache_mode(srv_ctx, SSL_SESS_CACHE_OFF);
        static const unsigned char alpn[] = "\x08http/1.1";
        SSL_CTX_set_alpn_protos(cli_ctx, alpn, sizeof(alpn) - 1);
        SSL_CTX_set_verify(cli_ctx, SSL_VERIFY_PEER, NULL);
        const char *ca = upstream_ca ? upstream_ca : "/etc/ssl/certs/ca-certificates.crt";
        if (SSL_CTX_load_verify_locations(cli_ctx, ca, NULL) != 1)
                return err_set(e, -EINVAL, "cannot load the upstream CA bundle %s", ca);
        /* the one leaf key of this process: its public half goes in every SIGN */
        leaf_key = EVP_EC_gen("P-256");
        if (!leaf_key)
                return err_set(e, -ENOMEM, "cannot make the leaf key");
        unsigned char *p = NULL;
        int n = i2d_PUBKEY(leaf_key, &p);
        if (n <= 0 || (size_t) n > sizeof(leaf_spki)) {
                OPENSSL_free(p);
                return err_set(e, -EINVAL, "cannot encode the leaf key");
        }
        memcpy(leaf_spki, p, (size_t) n);
        leaf_spki_len = (size_t) n;
        OPENSSL_free(p);
        /* blocking, with a bound: a stuck signer fails a handshake, not the
         * thread forever */
        int fl = fcntl(sfd, F_GETFL);
        if (fl < 0 || fcntl(sfd, F_SETFL, fl & ~O_NONBLOCK) < 0 ||
            fcntl(sfd, F_SETFD, FD_CLOEXEC) < 0)
                return err_set(e, -errno, "signer fd: %m");
        struct timeval tv = {.tv_sec = 5};
        (void) setsockopt(sfd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
        (void) setsockopt(sfd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
        signer_fd = sfd;
        return 0;
}

void egress_intercept_stats(unsigned long *hits, unsigned long *misses) {
        *hits = atomic_load(&leaf_hits);
        *misses = atomic_load(&leaf_misses);
}

static int wait_fd(int fd, short ev, int ms);

/* Ask warren-signer for a leaf for host: a new X509, or NULL. */
static X509 *sign(const char *host, time_t *not_after) {
        uint8_t buf[SIGNER_MSG_MAX];
        struct wr_err e = {0};
        X509 *x = NULL;
        pthread_mutex_lock(&signer_lock);
        uint32_t id = ++signer_id;
        int n = signer_sign_encode(id, host, leaf_spki, leaf_spki_len, buf, sizeof(buf), &e);
        if (n < 0 || (send(signer_fd, buf, (size_t) n, MSG_NOSIGNAL) != n &&
                      (errno != EAGAIN || wait_fd(signer_fd, POLLOUT, 5000) < 0 ||
                       send(signer_fd, buf, (size_t) n, MSG_NOSIGNAL) != n))) {
                log_warn("egress: signer: cannot ask for %s: %s", host, n < 0 ? e.msg : "send");
                goto out;
        }
        /* the socket is non-blocking (libuv watches it for the hang-up) */
        ssize_t got = -1;
        for (int tries = 0; tries < 2 && got < 0; tries++) {
                got = recv(signer_fd, buf, sizeof(buf), MSG_DONTWAIT);
                if (got < 0 && (errno == EAGAIN || errno == EINTR) && tries == 0 &&
                    wait_fd(signer_fd, POLLIN, 5000) < 0)
                        break;
        }
        struct signer_reply *rep = malloc(sizeof(*rep));
        if (!rep)
                goto out;
        if (got <= 0 || signer_reply_decode(buf, (size_t) got, rep, &e) < 0 || rep->hdr.id != id) {
                log_warn("egress: signer: no usable answer for %s: %s", host,
                         got <= 0 ? "socket closed or timed out" : e.msg);
                free(rep);
                goto out;
        }
        if (rep->hdr.type == SIGNER_ERROR) {
                log_warn("egress: signer refused %s: %s %s", host,
                         signer_errcode_name(rep->error.code), rep->error.msg);
        } else {
                const unsigned char *d = rep->cert.der;
                x = d2i_X509(NULL, &d, (long) rep->cert.len);
                if (x) {
                        const ASN1_TIME *na = X509_get0_notAfter(x);
                        struct tm tm;
                        *not_after = na && ASN1_TIME_to_tm(na, &tm) == 1 ? timegm(&tm) : 0;
                }
        }
        free(rep);
out:
        pthread_mutex_unlock(&signer_lock);
        return x;
}

/* The cached leaf for host (a reference: X509_free it), minted on a miss. */
static X509 *leaf_get(const char *host) {
        time_t now = time(NULL);
        pthread_mutex_lock(&cache_lock);
        for (size_t i = 0; i < LEAF_CACHE; i++)
                if (cache[i].cert && cache[i].renew > now && strcmp(cache[i].host, host) == 0) {
                        X509 *x = cache[i].cert;
                        X509_up_ref(x);
                        pthread_mutex_unlock(&cache_lock);
                        atomic_fetch_add(&leaf_hits, 1);
                        return x;
                }
        pthread_mutex_unlock(&cache_lock);
        time_t na = 0;
        X509 *x = sign(host, &na);
        if (!x)
                return NULL;
        unsigned long m = atomic_fetch_add(&leaf_misses, 1) + 1;
        log_info("egress: leaf certificate for %s minted (leaf cache: %lu hits, %lu misses)", host,
                 atomic_load(&leaf_hits), m);
        pthread_mutex_lock(&cache_lock);
        struct leaf *l = NULL;
        for (size_t i = 0; i < LEAF_CACHE && !l; i++)
                if (cache[i].cert && strcmp(cache[i].host, host) == 0)
                        l = &cache[i];
        if (!l)
                l = &cache[cache_next++ % LEAF_CACHE];
        if (l->cert)
                X509_free(l->cert);
        snprintf(l->host, sizeof(l->host), "%s", host);
        l->cert = x;
        l->renew = na > LEAF_RENEW_S ? na - LEAF_RENEW_S : now + 3600;
        X509_up_ref(x);
        pthread_mutex_unlock(&cache_lock);
        return x;
}

/* ---- the sandbox side's first bytes: a BIO reading them before the fd ---- */

struct pre_bio {
        int fd;
        uint8_t *pre;
        size_t len, pos;
};

static int pre_read(BIO *b, char *out, int outl) {
        struct pre_bio *p = BIO_get_data(b);
        BIO_clear_retry_flags(b);
        if (outl <= 0)
                return 0;
        if (p->pos < p->len) {
                size_t n = MIN((size_t) outl, p->len - p->pos);
                memcpy(out, p->pre + p->pos, n);
                p->pos += n;
                return (int) n;
        }
        ssize_t n = recv(p->fd, out, (size_t) outl, MSG_DONTWAIT);
        if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
                BIO_set_retry_read(b);
                return -1;
        }
        return n < 0 ? -1 : (int) n;
}

static int pre_write(BIO *b, const char *in, int inl) {
        struct pre_bio *p = BIO_get_data(b);
        BIO_clear_retry_flags(b);
        ssize_t n = send(p->fd, in, (size_t) inl, MSG_DONTWAIT | MSG_NOSIGNAL);
        if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
                BIO_set_retry_write(b);
                return -1;
        }
        return n < 0 ? -1 : (int) n;
}

static long pre_ctrl(BIO *b, int cmd, long num, void *ptr) {
        (void) b;
        (void) num;
        (void) ptr;
        return cmd == BIO_CTRL_FLUSH ? 1 : 0;
}

static BIO_METHOD *pre_method;

/* ---- blocking I/O on non-blocking fds ---- */

struct side {
        int fd;
        SSL *ssl; /* NULL: cleartext (an http:// forward_url) */
};

static int wait_fd(int fd, short ev, int ms) {
        struct pollfd p = {.fd = fd, .events = ev};
        int r;
        do
                r = poll(&p, 1, ms);
        while (r < 0 && errno == EINTR);
        return r > 0 ? 0 : r == 0 ? -ETIMEDOUT : -errno;
}

/* An SSL call's WANT_* handled by waiting: 1 done, negative on failure. */
static int ssl_wait(SSL *ssl, int fd, int ret) {
        int err = SSL_get_error(ssl, ret);
        if (err == SSL_ERROR_WANT_READ)
                return wait_fd(fd, POLLIN, IO_TIMEOUT_MS);
        if (err == SSL_ERROR_WANT_WRITE)
                return wait_fd(fd, POLLOUT, IO_TIMEOUT_MS);
        return -EPROTO;
}

static int side_write(struct side *s, const void *buf, size_t n) {
        const uint8_t *p = buf;
        while (n > 0) {
                if (s->ssl) {
                        size_t w = 0;
                        int r = SSL_write_ex(s->ssl, p, n, &w);
                        if (r <= 0) {
                                int k = ssl_wait(s->ssl, s->fd, r);
                                if (k < 0)
                                        return k;
                                continue;
                        }
                        p += w;
                        n -= w;
                } else {
                        ssize_t w = send(s->fd, p, n, MSG_DONTWAIT | MSG_NOSIGNAL);
                        if (w < 0 && (errno == EAGAIN || errno == EINTR)) {
                                int k = wait_fd(s->fd, POLLOUT, IO_TIMEOUT_MS);
                                if (k < 0)
                                        return k;
                                continue;
                        }
                        if (w <= 0)
                                return -EPIPE;
                        p += w;
                        n -= (size_t) w;
                }
        }
        return 0;
}

/* Read what is there: >0 bytes, 0 end of stream, -EAGAIN (nothing now;
 * *want_write when TLS needs the fd writable), other negative: error. */
static ssize_t side_read(struct side *s, void *buf, size_t cap, bool *want_write) {
        *want_write = false;
        if (!s->ssl) {
                ssize_t n = recv(s->fd, buf, cap, MSG_DONTWAIT);
                if (n < 0 && (errno == EAGAIN || errno == EINTR))
                        return -EAGAIN;
                return n < 0 ? -errno : n;
        }
        size_t got = 0;
        int r = SSL_read_ex(s->ssl, buf, cap, &got);
        if (r > 0)
                return (ssize_t) got;
        int err = SSL_get_error(s->ssl, r);
        if (err == SSL_ERROR_WANT_READ)
                return -EAGAIN;
        if (err == SSL_ERROR_WANT_WRITE) {
                *want_write = true;
                return -EAGAIN;
        }
        if (err == SSL_ERROR_ZERO_RETURN)
                return 0;
        /* an EOF without close_notify counts as the end too (many servers) */
        if (err == SSL_ERROR_SYSCALL || err == SSL_ERROR_SSL) {
                unsigned long le = ERR_peek_last_error();
                ERR_clear_error();
                if (err == SSL_ERROR_SYSCALL ||
                    ERR_GET_REASON(le) == SSL_R_UNEXPECTED_EOF_WHILE_READING)
                        return 0;
        }
        return -EPROTO;
}

static void side_close(struct side *s) {
        if (s->ssl) {
                (void) SSL_shutdown(s->ssl);
                SSL_free(s->ssl);
                s->ssl = NULL;
        }
        if (s->fd >= 0) {
                close(s->fd);
                s->fd = -EBADF;
        }
}

/* ---- the connection ---- */

/* Resource detection on this connection (net_rules_detects): requests
 * queued in order, responses framed and paired with them; the body of a
 * 201 to POST /repos/{owner}/{repo}/pulls is kept (up to DETECT_BODY_MAX)
 * and its top-level html_url reported. Anything unexpected ends the
 * detection on the connection (the bytes are relayed regardless). */
#define DETECT_QUEUE 64
#define DETECT_BODY_MAX (256u << 10)
enum { D_HEAD, D_BODY, D_BODY_EOF, D_OFF };
struct detect {
        bool on;
        int phase;
        bool queue[DETECT_QUEUE], head_method[DETECT_QUEUE]; /* is a PR creation; HEAD */
        unsigned qhead, qlen;
        bool capture, chunked;
        struct egress_http_body body;
        size_t hlen, blen;
        uint8_t hbuf[EGRESS_RESP_HEAD_MAX];
        uint8_t *bbuf; /* DETECT_BODY_MAX when capturing */
        unsigned found;
};

struct icpt {
        struct egress_intercept_conn a;
        struct detect *det; /* NULL: no detector for this host */
        struct side cl, up;
        struct pre_bio *pb; /* the sandbox side's BIO data (freed after its SSL) */
        bool up_tls;
        char up_host[NET_HOST_MAX + 1]; /* the upstream connected to ("" none) */
        uint16_t up_port;
        struct egress_http_body body;
        bool in_body, opaque;
        unsigned requests, rewritten;
        size_t ilen;
        uint8_t ibuf[IBUF_CAP];
        char obuf[OBUF_CAP];
};

static const char *status_text(int code) {
        switch (code) {
        case 400:
                return "Bad Request";
        case 405:
                return "Method Not Allowed";
        case 421:
                return "Misdirected Request";
        case 502:
                return "Bad Gateway";
        default:
                return "Error";
        }
}

/* Refuse on the intercepted connection: a status (over the sandbox's
 * TLS), then the connection is closed. The body names the reason only:
 * never a header of the request. */
static int refuse(struct icpt *c, int code, const char *reason) {
        char body[256], msg[512];
        snprintf(body, sizeof(body), "warren egress: %s\n", reason);
        int n = snprintf(msg, sizeof(msg),
                         "HTTP/1.1 %d %s\r\nContent-Type: text/plain\r\nConnection: close\r\n"
                         "Content-Length: %zu\r\n\r\n%s",
                         code, status_text(code), strlen(body), body);
        if (c->cl.ssl && n > 0)
                (void) side_write(&c->cl, msg, (size_t) n);
        c->a.ev.verdict = NET_VERDICT_DENY;
        egress_str_set(c->a.ev.reason, sizeof(c->a.ev.reason), reason);
        log_debug("egress: intercept %s (%s): refused %d: %s", c->a.sb->id, c->a.host, code,
                  reason);
        return -EPERM;
}

static int connect_to(const struct net_addr *a, uint16_t port, int *ret) {
        struct sockaddr_storage ss;
        socklen_t sl = egress_net_to_sockaddr(a, port, &ss);
        int fd = socket(a->family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        if (fd < 0)
                return -errno;
        int one = 1;
        (void) setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
        if (connect(fd, (struct sockaddr *) &ss, sl) < 0 && errno != EINPROGRESS) {
                int r = -errno;
                close(fd);
                return r;
        }
        int r = wait_fd(fd, POLLOUT, (int) egress_cfg.connect_timeout_ms);
        int err = 0;
        socklen_t el = sizeof(err);
        if (r == 0 && (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &el) < 0 || err))
                r = -(err ? err : errno);
        if (r < 0) {
                close(fd);
                return r;
        }
        *ret = fd;
        return 0;
}

/* A forward_url host that is not the SNI host: resolved here (A records,
 * one query to the first upstream resolver), every answer checked against
 * the built-in deny list and the host's own addresses. */
static int forward_resolve(const char *name, uint16_t port, struct net_addr *ret) {
        unsigned char *q = NULL;
        int qlen = 0;
        unsigned short id;
        if (getrandom(&id, sizeof(id), 0) != sizeof(id))
                return -EIO;
        if (ares_create_query(name, 1 /* C_IN */, 1 /* T_A */, id, 1, &q, &qlen, 0) != ARES_SUCCESS)
                return -EINVAL;
        const struct egress_upstream *u = &egress_cfg.upstreams[0];
        int fd = socket(u->sa.ss_family, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        int r = fd < 0 ? -errno : 0;
        if (r == 0 && (connect(fd, (const struct sockaddr *) &u->sa, u->salen) < 0 ||
                       send(fd, q, (size_t) qlen, 0) != qlen))
                r = -errno;
        ares_free_string(q);
        unsigned char ans[1500];
        ssize_t n = -1;
        if (r == 0 && (r = wait_fd(fd, POLLIN, (int) egress_cfg.dns_timeout_ms)) == 0)
                n = recv(fd, ans, sizeof(ans), 0);
        if (fd >= 0)
                close(fd);
        if (r < 0)
                return r;
        struct ares_addrttl at[8];
        int na = 8;
        if (n < 12 || (ans[0] << 8 | ans[1]) != id ||
            ares_parse_a_reply(ans, (int) n, NULL, at, &na) != ARES_SUCCESS || na < 1)
                return -ENOENT;
        for (int i = 0; i < na; i++) {
                struct net_addr a;
                net_addr_from_ipv4(&a, (const uint8_t *) &at[i].ipaddr);
                struct net_dest dest = {.host = name, .addr = a, .port = port};
                struct net_decision d;
                net_policy_decide_open(&dest, &egress_cfg.host_deny, &d);
                if (d.verdict != NET_VERDICT_ALLOW)
                        return -EACCES;
                if (i == 0)
                        *ret = a;
        }
        return 0;
}

/* Make sure the upstream is host:port (tls): reuse it, or close it and
 * connect anew. */
static int upstream_ensure(struct icpt *c, const char *host, uint16_t port, bool tls) {
        if (c->up.fd >= 0 && strcmp(c->up_host, host) == 0 && c->up_port == port &&
            c->up_tls == tls)
                return 0;
        side_close(&c->up);
        c->up_host[0] = 0;
        struct net_addr a;
        int r;
        if (strcmp(host, c->a.host) == 0)
                a = c->a.dial;
        else if ((r = forward_resolve(host, port, &a)) < 0)
                return r;
        int fd = -EBADF;
        if ((r = connect_to(&a, port, &fd)) < 0)
                return r;
        c->up.fd = fd;
        c->a.ev.port = port;
        egress_addr_from_net(&c->a.ev.dialed, &a);
        if (tls) {
                SSL *s = SSL_new(cli_ctx);
                if (!s)
                        return -ENOMEM;
                c->up.ssl = s;
                SSL_set_fd(s, fd);
                SSL_set_tlsext_host_name(s, host);
                if (SSL_set1_host(s, host) != 1)
                        return -EINVAL;
                for (;;) {
                        int k = SSL_connect(s);
                        if (k == 1)
                                break;
                        if (SSL_get_error(s, k) == SSL_ERROR_SSL) {
                                long v = SSL_get_verify_result(s);
                                log_warn("egress: intercept %s: upstream %s: TLS failed: %s",
                                         c->a.sb->id, host,
                                         v != X509_V_OK ? X509_verify_cert_error_string(v)
                                                        : "handshake");
                                ERR_clear_error();
                                return -EPROTO;
                        }
                        if ((r = ssl_wait(s, fd, k)) < 0)
                                return r;
                }
        }
        snprintf(c->up_host, sizeof(c->up_host), "%s", host);
        c->up_port = port;
        c->up_tls = tls;
        return 0;
}

static bool upgrade_is_websocket(const struct net_http_head *h) {
        const struct net_http_header *u = net_http_head_find(h, "Upgrade");
        return u && u->value.n == 9 && strncasecmp(u->value.p, "websocket", 9) == 0;
}

/* POST /repos/{owner}/{repo}/pulls (a query allowed). */
static bool is_pr_creation(const struct net_http_head *h) {
        if (h->method.n != 4 || memcmp(h->method.p, "POST", 4) != 0)
                return false;
        const char *p = h->form == NET_HTTP_FORM_ORIGIN ? h->target.p : h->path.p;
        size_t n = h->form == NET_HTTP_FORM_ORIGIN ? h->target.n : h->path.n;
        const char *q = memchr(p, '?', n);
        if (q)
                n = (size_t) (q - p);
        if (n < 14 || memcmp(p, "/repos/", 7) != 0)
                return false;
        size_t i = 7, seg = 0, start = 7;
        for (; i <= n; i++)
                if (i == n || p[i] == '/') {
                        if (i == start)
                                return false;
                        seg++;
                        start = i + 1;
                }
        return seg == 3 && n >= 6 && memcmp(p + n - 6, "/pulls", 6) == 0;
}

/* One complete head at ibuf: decide, rewrite, send. 0 or negative (the
 * connection ends). */
static int on_head(struct icpt *c, const struct net_http_head *h) {
        c->requests++;
        if (h->trace)
                return refuse(c, 405, "TRACE/TRACK refused");
        if (h->form == NET_HTTP_FORM_AUTHORITY)
                return refuse(c, 405, "CONNECT refused");
        if (h->upgrade && !upgrade_is_websocket(h))
                return refuse(c, 400, "h2c and upgrades other than websocket are refused");
        /* every request names the SNI host (egress decision 6) */
        if (!h->has_host || h->host.kind != NET_HOST_NAME || strcmp(h->host.name, c->a.host) != 0 ||
            (h->port && h->port != c->a.port))
                return refuse(c, 421, "the request names another host than the TLS SNI");
        const struct net_host_rules *hr = net_rules_for_host(c->a.sb->rules, c->a.host);
        const struct net_rule *rule = NULL;
        struct wr_err e = {0};
        for (size_t i = 0; hr && i < hr->n_rules && !rule; i++) {
                int m = net_rule_match(&hr->rules[i], h, &e);
                if (m < 0)
                        return refuse(c, 400, "a key the rule matches on is repeated");
                if (m == 1)
                        rule = &hr->rules[i];
        }
        const char *host = c->a.host;
        uint16_t port = c->a.port;
        bool tls = true;
        if (rule && rule->has_forward) {
                host = rule->fwd.host.name;
                port = rule->fwd.port;
                tls = rule->fwd.tls;
        }
        size_t olen = 0;
        int r = net_request_rewrite(c->a.sb->rules, rule, h, c->a.host, host, port, tls, c->obuf,
                                    sizeof(c->obuf), &olen);
        if (r < 0) {
                explicit_bzero(c->obuf, sizeof(c->obuf));
                return refuse(c, 400, "the rewritten request head is too large");
        }
        if (rule)
                c->rewritten++;
        if ((r = upstream_ensure(c, host, port, tls)) < 0) {
                log_info("egress: intercept %s (%s): upstream %s:%u: %s", c->a.sb->id, c->a.host,
                         host, (unsigned) port, strerror(-r));
                explicit_bzero(c->obuf, olen);
                return refuse(c, 502,
                              r == -EACCES   ? "the forward host is refused"
                              : r == -EPROTO ? "upstream TLS failed (certificate not verified?)"
                                             : "upstream connect failed");
        }
        r = side_write(&c->up, c->obuf, olen);
        explicit_bzero(c->obuf, olen); /* it held secret values */
        if (r < 0)
                return -EPIPE;
        c->a.ev.bytes_up += olen;
        if (c->det && c->det->on) {
                struct detect *d = c->det;
                if (d->qlen == DETECT_QUEUE) {
                        d->on = false;
                } else {
                        unsigned k = (d->qhead + d->qlen++) % DETECT_QUEUE;
                        d->queue[k] = is_pr_creation(h);
                        d->head_method[k] = h->method.n == 4 && memcmp(h->method.p, "HEAD", 4) == 0;
                }
        }
        if (h->upgrade)
                c->opaque = true; /* a WebSocket: opaque both ways from here */
        egress_http_body_start(&c->body, h->chunked, h->has_content_length ? h->content_length : 0);
        c->in_body = c->body.state != EGRESS_HTTP_AT_HEAD;
        return 0;
}

/* Consume ibuf: heads and bodies. 0, or negative (end the connection). */
static int process(struct icpt *c) {
        size_t pos = 0;
        int r = 0;
        while (pos < c->ilen) {
                if (c->opaque || c->in_body) {
                        size_t used = c->ilen - pos;
                        if (!c->opaque) {
                                if (egress_http_body_scan(&c->body, c->ibuf + pos, used, &used) <
                                    0) {
                                        r = refuse(c, 400, "malformed chunked request body");
                                        break;
                                }
                                c->in_body = c->body.state != EGRESS_HTTP_AT_HEAD;
                        }
                        if (c->up.fd < 0 || (r = side_write(&c->up, c->ibuf + pos, used)) < 0) {
                                r = -EPIPE;
                                break;
                        }
                        c->a.ev.bytes_up += used;
                        pos += used;
                        continue;
                }
                struct net_http_head *h = malloc(sizeof(*h));
                if (!h) {
                        r = -ENOMEM;
                        break;
                }
                struct wr_err e = {0};
                int k = net_http_head_parse((const char *) c->ibuf + pos, c->ilen - pos, h, &e);
                if (k == -EAGAIN && c->ilen - pos < NET_HTTP_HEAD_MAX) {
                        free(h);
                        break;
                }
                if (k < 0) {
                        free(h);
                        r = refuse(
                                c,
                                k == -EBADMSG && strstr(e.msg, "does not match the request-target")
                                        ? 421
                                        : 400,
                                k == -E2BIG || k == -EAGAIN ? "request head too large"
                                                            : "malformed request head");
                        break;
                }
                size_t hl = h->head_len;
                r = on_head(c, h);
                free(h);
                if (r < 0)
                        break;
                pos += hl;
        }
        /* what is left starts a head: keep it at the front */
        if (r == 0 && pos) {
                memmove(c->ibuf, c->ibuf + pos, c->ilen - pos);
                c->ilen -= pos;
        } else if (r < 0) {
                explicit_bzero(c->ibuf, c->ilen);
                c->ilen = 0;
        }
        return r;
}

static void detect_report(struct icpt *c) {
        struct detect *d = c->det;
        long n = d->blen;
        if (d->chunked)
                n = egress_dechunk(d->bbuf, d->blen);
        char url[EGRESS_RULE_MAX];
        if (n < 0 || egress_json_top_string(d->bbuf, (size_t) n, "html_url", url, sizeof(url)) <= 0)
                return;
        struct egress_event ev = c->a.ev;
        ev.kind = EGRESS_EVENT_RESOURCE;
        ev.verdict = NET_VERDICT_ALLOW;
        ev.bytes_up = ev.bytes_down = ev.duration_ns = 0;
        egress_str_set(ev.rule, sizeof(ev.rule), url);
        egress_str_set(ev.reason, sizeof(ev.reason), EGRESS_RESOURCE_GITHUB_PR);
        egress_event_send(&ev);
        d->found++;
        log_debug("egress: sandbox %s opened %s", c->a.sb->id, url);
}

/* Feed the response bytes buf[0..n) (already relayed) to the detector. */
static void detect_feed(struct icpt *c, const uint8_t *buf, size_t n) {
        struct detect *d = c->det;
        while (n > 0 && d->on) {
                if (d->phase == D_HEAD) {
                        size_t k = MIN(n, sizeof(d->hbuf) - d->hlen);
                        memcpy(d->hbuf + d->hlen, buf, k);
                        struct egress_resp_head rh;
                        int r = egress_resp_head_parse(d->hbuf, d->hlen + k, &rh);
                        if (r == -EAGAIN && d->hlen + k < sizeof(d->hbuf)) {
                                d->hlen += k;
                                return;
                        }
                        if (r < 0 || rh.status == 101 || (rh.status >= 200 && d->qlen == 0)) {
                                d->on = false;
                                return;
                        }
                        /* bytes of buf past the head */
                        size_t used = rh.head_len - d->hlen;
                        buf += used;
                        n -= used;
                        d->hlen = 0;
                        if (rh.status < 200)
                                continue; /* 1xx: the final response follows */
                        bool pr = d->queue[d->qhead], head = d->head_method[d->qhead];
                        d->qhead = (d->qhead + 1) % DETECT_QUEUE;
                        d->qlen--;
                        d->capture = pr && rh.status == 201;
                        d->chunked = rh.chunked;
                        d->blen = 0;
                        if (d->capture && !d->bbuf && !(d->bbuf = malloc(DETECT_BODY_MAX))) {
                                d->on = false;
                                return;
                        }
                        bool none = head || rh.status == 204 || rh.status == 304;
                        if (!none && (rh.chunked || rh.has_content_length)) {
                                egress_http_body_start(&d->body, rh.chunked,
                                                       rh.has_content_length ? rh.content_length
                                                                             : 0);
                                d->phase = d->body.state == EGRESS_HTTP_AT_HEAD ? D_HEAD : D_BODY;
                        } else {
                                d->phase = none ? D_HEAD : D_BODY_EOF;
                        }
                        if (d->phase == D_HEAD && d->capture)
                                detect_report(c);
                        continue;
                }
                size_t used = n;
                if (d->phase == D_BODY && egress_http_body_scan(&d->body, buf, n, &used) < 0) {
                        d->on = false;
                        return;
                }
                if (d->capture) {
                        if (d->blen + used > DETECT_BODY_MAX)
                                d->capture = false;
                        else {
                                memcpy(d->bbuf + d->blen, buf, used);
                                d->blen += used;
                        }
                }
                buf += used;
                n -= used;
                if (d->phase == D_BODY && d->body.state == EGRESS_HTTP_AT_HEAD) {
                        if (d->capture)
                                detect_report(c);
                        d->capture = false;
                        d->phase = D_HEAD;
                }
        }
}

static int serve(struct icpt *c) {
        /* the sandbox's handshake, with a leaf for the SNI name */
        X509 *leaf = leaf_get(c->a.host);
        if (!leaf)
                return -EIO;
        SSL *s = SSL_new(srv_ctx);
        BIO *b = s ? BIO_new(pre_method) : NULL;
        struct pre_bio *pb = calloc(1, sizeof(*pb));
        if (!s || !b || !pb) {
                X509_free(leaf);
                SSL_free(s);
                BIO_free(b);
                free(pb);
                return -ENOMEM;
        }
        c->pb = pb;
        pb->fd = c->cl.fd;
        pb->pre = c->a.pre;
        pb->len = c->a.pre_len;
        BIO_set_data(b, pb);
        BIO_set_init(b, 1);
        SSL_set_bio(s, b, b);
        c->cl.ssl = s;
        int r = SSL_use_certificate(s, leaf) == 1 && SSL_use_PrivateKey(s, leaf_key) == 1 ? 0
                                                                                          : -EIO;
        X509_free(leaf);
        while (r == 0) {
                int k = SSL_accept(s);
                if (k == 1)
                        break;
                if (SSL_get_error(s, k) == SSL_ERROR_SSL) {
                        char why[256];
                        ERR_error_string_n(ERR_peek_last_error(), why, sizeof(why));
                        log_info("egress: intercept %s (%s): the sandbox's TLS handshake failed: "
                                 "%s",
                                 c->a.sb->id, c->a.host, why);
                        ERR_clear_error();
                        r = -EPROTO;
                        break;
                }
                r = ssl_wait(s, c->cl.fd, k);
        }
        if (r < 0) {
                c->a.ev.verdict = NET_VERDICT_DENY;
                egress_str_set(c->a.ev.reason, sizeof(c->a.ev.reason),
                               "intercepted: the sandbox's TLS handshake failed");
                return r;
        }
        /* relay: requests parsed, responses copied */
        uint8_t *down = malloc(65536);
        if (!down)
                r = -ENOMEM;
        bool cl_eof = false;
        while (r == 0) {
                bool progress = false, cw = false, uw = false;
                if (!cl_eof && c->ilen < sizeof(c->ibuf)) {
                        ssize_t n = side_read(&c->cl, c->ibuf + c->ilen, sizeof(c->ibuf) - c->ilen,
                                              &cw);
                        if (n > 0) {
                                c->ilen += (size_t) n;
                                progress = true;
                                if ((r = process(c)) < 0)
                                        break;
                        } else if (n == 0) {
                                cl_eof = true;
                                progress = true;
                                if (c->up.ssl)
                                        (void) SSL_shutdown(c->up.ssl);
                                else if (c->up.fd >= 0)
                                        shutdown(c->up.fd, SHUT_WR);
                        } else if (n != -EAGAIN) {
                                r = (int) n;
                                break;
                        }
                }
                if (c->up.fd >= 0) {
                        ssize_t n = side_read(&c->up, down, 65536, &uw);
                        if (n > 0) {
                                if ((r = side_write(&c->cl, down, (size_t) n)) < 0)
                                        break;
                                c->a.ev.bytes_down += (uint64_t) n;
                                progress = true;
                                if (c->det && c->det->on && !c->opaque)
                                        detect_feed(c, down, (size_t) n);
                        } else if (n == 0) {
                                /* a body read to the end of the stream */
                                if (c->det && c->det->on && c->det->phase == D_BODY_EOF &&
                                    c->det->capture)
                                        detect_report(c);
                                break; /* the upstream is done: so is the connection */
                        } else if (n != -EAGAIN) {
                                r = (int) n;
                                break;
                        }
                } else if (cl_eof) {
                        break;
                }
                if (progress)
                        continue;
                if (SSL_pending(c->cl.ssl) || (c->up.ssl && SSL_pending(c->up.ssl)))
                        continue;
                struct pollfd p[2] = {
                        {.fd = c->cl.fd,
                         .events = (short) ((cl_eof ? 0 : POLLIN) | (cw ? POLLOUT : 0))},
                        {.fd = c->up.fd, .events = (short) (POLLIN | (uw ? POLLOUT : 0))},
                };
                int k = poll(p, c->up.fd >= 0 ? 2 : 1, IDLE_TIMEOUT_MS);
                if (k == 0)
                        break;
                if (k < 0 && errno != EINTR)
                        r = -errno;
        }
        free(down);
        return r;
}

static void *thread_main(void *arg) {
        struct icpt *c = arg;
        if (net_rules_detects(c->a.sb->rules, c->a.host) && (c->det = calloc(1, sizeof(*c->det))))
                c->det->on = true;
        int r = serve(c);
        if (c->cl.ssl && r < 0)
                SSL_set_quiet_shutdown(c->cl.ssl, 1);
        side_close(&c->cl); /* frees the BIO; then its data */
        free(c->pb);
        side_close(&c->up);
        char reason[EGRESS_REASON_MAX];
        if (c->a.ev.verdict == NET_VERDICT_ALLOW) {
                snprintf(reason, sizeof(reason), "intercepted: %u requests, %u matched a rule",
                         c->requests, c->rewritten);
                egress_str_set(c->a.ev.reason, sizeof(c->a.ev.reason), reason);
        }
        c->a.ev.duration_ns = egress_now_ns() - c->a.t0;
        egress_event_send(&c->a.ev);
        egress_sb_unref(c->a.sb);
        explicit_bzero(c->ibuf, sizeof(c->ibuf));
        if (c->det)
                free(c->det->bbuf);
        free(c->det);
        free(c->a.pre);
        free(c);
        atomic_fetch_sub(&egress_nconns, 1);
        atomic_fetch_sub(&n_intercepts, 1);
        ERR_clear_error();
        OPENSSL_thread_stop();
        return NULL;
}

int egress_intercept_start(struct egress_intercept_conn *a) {
        if (!pre_method) {
                static pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
                pthread_mutex_lock(&m);
                if (!pre_method) {
                        BIO_METHOD *bm = BIO_meth_new(BIO_get_new_index() | BIO_TYPE_SOURCE_SINK,
                                                      "warren-pre");
                        if (bm) {
                                BIO_meth_set_read(bm, pre_read);
                                BIO_meth_set_write(bm, pre_write);
                                BIO_meth_set_ctrl(bm, pre_ctrl);
                        }
                        pre_method = bm;
                }
                pthread_mutex_unlock(&m);
                if (!pre_method)
                        return -ENOMEM;
        }
        if (atomic_fetch_add(&n_intercepts, 1) >= INTERCEPT_MAX) {
                atomic_fetch_sub(&n_intercepts, 1);
                log_warn("egress: %u intercepted connections at once: refusing another",
                         INTERCEPT_MAX);
                return -EAGAIN;
        }
        struct icpt *c = calloc(1, sizeof(*c));
        if (!c) {
                atomic_fetch_sub(&n_intercepts, 1);
                return -ENOMEM;
        }
        c->a = *a;
        c->cl.fd = a->cfd;
        c->up.fd = -EBADF;
        pthread_attr_t at;
        pthread_attr_init(&at);
        pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
        pthread_attr_setstacksize(&at, 256 * 1024);
        atomic_fetch_add(&egress_nconns, 1);
        pthread_t t;
        int r = pthread_create(&t, &at, thread_main, c);
        pthread_attr_destroy(&at);
        if (r) {
                atomic_fetch_sub(&egress_nconns, 1);
                atomic_fetch_sub(&n_intercepts, 1);
                free(c);
                return -r;
        }
        return 0;
}
