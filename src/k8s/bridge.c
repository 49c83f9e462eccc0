/* SPDX-License-Identifier: Apache-2.0 */
/* warrend's end of the K8S relays (bridge.h). */
#include "k8s/bridge.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/crypto.h>
#include <openssl/ec.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include "basic/log.h"
#include "init/ctl-proto.h"
#include "k8s/relay-mux.h"

/* relays (and handshakes in progress) at once: a thread each */
#define CONNS_MAX 1024

struct attach_item {
        struct attach_item *next;
        char id[RELAY_ID_MAX + 1];
        int fd;
};

struct k8s_bridge {
        uv_loop_t *loop;
        uv_async_t async;
        pthread_mutex_t lock;
        pthread_cond_t cond;
        struct attach_item *items;
        int nconns;
        SSL_CTX *ctx;
        int listen_fd;
        int stop[2];
        pthread_t thread;
        bool thread_started;
        unsigned char key[32];
        char *ca_pem;
        char addr[96];
        k8s_bridge_attach_fn attach;
        void *userdata;
};

/* --- addresses --- */

/* --- the key, the certificate, the token key --- */

static int ossl_err(struct wr_err *e, const char *what) {
        unsigned long c = ERR_get_error();
        ERR_clear_error();
        return err_set(e, -EIO, "k8s callback: %s: %s", what,
                       c ? ERR_reason_error_string(c) : "failed");
}

static int write_file(const char *path, const void *data, size_t len, mode_t mode) {
        char tmp[4200];
        snprintf(tmp, sizeof(tmp), "%s.tmp", path);
        int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
        if (fd < 0)
                return -errno;
        ssize_t n = write(fd, data, len);
        int r = n == (ssize_t) len && fsync(fd) == 0 ? 0 : -EIO;
        close(fd);
        if (r == 0 && rename(tmp, path) < 0)
                r = -errno;
        if (r < 0)
                unlink(tmp);
        return r;
}

static int cert_make(const char *host, EVP_PKEY *key, X509 **ret, struct wr_err *e) {
        X509 *x = X509_new();
        X509_NAME *n = x ? X509_get_subject_name(x) : NULL;
        unsigned char serial[16];
        if (getrandom(serial, sizeof(serial), 0) != sizeof(serial))
                memset(serial, 0x5a, sizeof(serial));
        serial[0] &= 0x7f;
        BIGNUM *bn = BN_bin2bn(serial, sizeof(serial), NULL);
        char san[96];
        snprintf(san, sizeof(san), "IP:%s", host);
        X509V3_CTX v3;
        X509_EXTENSION *ext = NULL, *bc = NULL;
        int ok = x && n && bn && X509_set_version(x, 2) &&
                 BN_to_ASN1_INTEGER(bn, X509_get_serialNumber(x)) &&
                 X509_NAME_add_entry_by_txt(n, "CN", MBSTRING_ASC,
                                            (const unsigned char *) "warrend k8s callback", -1, -1,
                                            0) &&
                 X509_set_issuer_name(x, n) && X509_gmtime_adj(X509_getm_notBefore(x), -3600) &&
                 X509_gmtime_adj(X509_getm_notAfter(x), 10L * 365 * 86400) &&
                 X509_set_pubkey(x, key);
        if (ok) {
                X509V3_set_ctx(&v3, x, x, NULL, NULL, 0);
                ext = X509V3_EXT_conf_nid(NULL, &v3, NID_subject_alt_name, san);
                bc = X509V3_EXT_conf_nid(NULL, &v3, NID_basic_constraints, "critical,CA:TRUE");
                ok = ext && bc && X509_add_ext(x, ext, -1) && X509_add_ext(x, bc, -1) &&
                     X509_sign(x, key, EVP_sha256());
        }
        X509_EXTENSION_free(ext);
        X509_EXTENSION_free(bc);
        BN_free(bn);
        if (!ok) {
                X509_free(x);
                return ossl_err(e, "make the certificate");
        }
        *ret = x;
        return 0;
}

static char *pem_of(X509 *x) {
        BIO *b = BIO_new(BIO_s_mem());
        char *out = NULL;
        if (b && PEM_write_bio_X509(b, x)) {
                char *p;
                long n = BIO_get_mem_data(b, &p);
                out = n > 0 ? strndup(p, (size_t) n) : NULL;
        }
        BIO_free(b);
        return out;
}

/* <state>/k8s-callback.{key,crt,hmac}: made once, the certificate again
 * when the host changed. */
static int credentials(struct k8s_bridge *b, const char *state_dir, const char *host,
                       struct wr_err *e) {
        char kp[4096], cp[4096], hp[4096];
        snprintf(kp, sizeof(kp), "%s/k8s-callback.key", state_dir);
        snprintf(cp, sizeof(cp), "%s/k8s-callback.crt", state_dir);
        snprintf(hp, sizeof(hp), "%s/k8s-callback.hmac", state_dir);
        int r;
        int fd = open(hp, O_RDONLY | O_CLOEXEC);
        if (fd >= 0) {
                ssize_t n = read(fd, b->key, sizeof(b->key));
                close(fd);
                if (n != (ssize_t) sizeof(b->key))
                        return err_set(e, -EINVAL, "%s: not a token key (remove it)", hp);
        } else {
                if (getrandom(b->key, sizeof(b->key), 0) != sizeof(b->key))
                        return err_set(e, -EIO, "getrandom: %m");
                if ((r = write_file(hp, b->key, sizeof(b->key), 0600)) < 0)
                        return err_set(e, r, "write %s: %s", hp, strerror(-r));
        }
        EVP_PKEY *key = NULL;
        FILE *f = fopen(kp, "re");
        if (f) {
                key = PEM_read_PrivateKey(f, NULL, NULL, NULL);
                fclose(f);
        }
        bool new_key = false;
        if (!key) {
                key = EVP_EC_gen("P-256");
                if (!key)
                        return ossl_err(e, "make a key");
                BIO *bio = BIO_new(BIO_s_mem());
                char *p;
                long n;
                if (!bio || !PEM_write_bio_PrivateKey(bio, key, NULL, NULL, 0, NULL, NULL) ||
                    (n = BIO_get_mem_data(bio, &p)) <= 0 ||
                    write_file(kp, p, (size_t) n, 0600) < 0) {
                        BIO_free(bio);
                        EVP_PKEY_free(key);
                        return err_set(e, -EIO, "write %s", kp);
                }
                BIO_free(bio);
                new_key = true;
        }
        X509 *x = NULL;
        if (!new_key && (f = fopen(cp, "re"))) {
                x = PEM_read_X509(f, NULL, NULL, NULL);
                fclose(f);
                if (x &&
                    (X509_check_private_key(x, key) != 1 || X509_check_ip_asc(x, host, 0) != 1)) {
                        X509_free(x);
                        x = NULL;
                }
        }
        ERR_clear_error();
        if (!x) {
                if ((r = cert_make(host, key, &x, e)) < 0) {
                        EVP_PKEY_free(key);
                        return r;
                }
                char *pem = pem_of(x);
                if (!pem || write_file(cp, pem, strlen(pem), 0644) < 0) {
                        free(pem);
                        X509_free(x);
                        EVP_PKEY_free(key);
                        return err_set(e, -EIO, "write %s", cp);
                }
                free(pem);
        }
        b->ca_pem = pem_of(x);
        b->ctx = SSL_CTX_new(TLS_server_method());
        int ok = b->ca_pem && b->ctx && SSL_CTX_set_min_proto_version(b->ctx, TLS1_3_VERSION) &&
                 SSL_CTX_use_certificate(b->ctx, x) == 1 &&
                 SSL_CTX_use_PrivateKey(b->ctx, key) == 1;
        X509_free(x);
        EVP_PKEY_free(key);
        if (!ok)
                return ossl_err(e, "TLS context");
        SSL_CTX_set_mode(b->ctx,
                         SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
        return 0;
}

void k8s_bridge_token(const struct k8s_bridge *b, const char *id, char token[RELAY_TOKEN_LEN + 1]) {
        unsigned char mac[32];
        unsigned int ml = sizeof(mac);
        HMAC(EVP_sha256(), b->key, sizeof(b->key), (const unsigned char *) id, strlen(id), mac,
             &ml);
        for (size_t i = 0; i < 32; i++)
                snprintf(token + 2 * i, 3, "%02x", mac[i]);
        explicit_bzero(mac, sizeof(mac));
}

/* --- connections --- */

struct conn {
        struct k8s_bridge *b;
        int sock;
};

static void conn_done(struct k8s_bridge *b) {
        pthread_mutex_lock(&b->lock);
        b->nconns--;
        pthread_cond_broadcast(&b->cond);
        pthread_mutex_unlock(&b->lock);
}

static void *conn_thread(void *arg) {
        struct conn *c = arg;
        struct k8s_bridge *b = c->b;
        int sock = c->sock;
        free(c);
        SSL *ssl = SSL_new(b->ctx);
        int sp[2] = {-1, -1};
        static const size_t bufsize = RELAY_HDR_LEN + 65536;
        uint8_t *buf = malloc(bufsize);
        struct timeval tv = {10, 0};
        (void) setsockopt(sock, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
        (void) setsockopt(sock, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
        int one = 1;
        (void) setsockopt(sock, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
        if (!ssl || !buf || SSL_set_fd(ssl, sock) != 1 || SSL_accept(ssl) != 1) {
                ERR_clear_error();
                goto out;
        }
        (void) fcntl(sock, F_SETFL, O_NONBLOCK);
        size_t filled = 0;
        struct relay_frame f;
        int k = relay_ssl_read_frame(ssl, sock, buf, bufsize, &filled, CTL_REPLY_MAX, 10000, &f);
        if (k <= 0 || f.type != RELAY_HELLO)
                goto out;
        char want[RELAY_TOKEN_LEN + 1];
        k8s_bridge_token(b, f.id, want);
        bool good = CRYPTO_memcmp(want, f.token, RELAY_TOKEN_LEN) == 0;
        explicit_bzero(want, sizeof(want));
        if (!good) {
                log_warn("k8s callback: a relay for %s with a wrong token: refused", f.id);
                goto out;
        }
        uint8_t welcome[RELAY_HDR_LEN];
        relay_hdr_put(welcome, RELAY_WELCOME, 0, 0);
        if (relay_ssl_write_all(ssl, sock, welcome, sizeof(welcome), 10000) < 0)
                goto out;
        if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0, sp) < 0)
                goto out;
        int sz = (int) (CTL_MSG_MAX + 65536);
        if (setsockopt(sp[0], SOL_SOCKET, SO_SNDBUFFORCE, &sz, sizeof(sz)) < 0)
                (void) setsockopt(sp[0], SOL_SOCKET, SO_SNDBUF, &sz, sizeof(sz));
        struct attach_item *it = calloc(1, sizeof(*it));
        if (!it)
                goto out;
        snprintf(it->id, sizeof(it->id), "%s", f.id);
        it->fd = sp[0];
        sp[0] = -1;
        pthread_mutex_lock(&b->lock);
        it->next = b->items;
        b->items = it;
        pthread_mutex_unlock(&b->lock);
        uv_async_send(&b->async);
        log_info("k8s callback: the relay of %s connected", f.id);
        struct relay_mux_config mc = {
                .side = RELAY_SIDE_DAEMON,
                .ssl = ssl,
                .sock = sock,
                .ctl = sp[1],
                .stop_fd = b->stop[0],
                .pending = buf + k,
                .pending_len = filled - (size_t) k,
        };
        int r = relay_mux_run(&mc);
        log_info("k8s callback: the relay of %s went: %s", f.id, r < 0 ? strerror(-r) : "closed");
out:
        if (ssl) {
                (void) SSL_shutdown(ssl);
                SSL_free(ssl);
        }
        free(buf);
        if (sp[0] >= 0)
                close(sp[0]);
        if (sp[1] >= 0)
                close(sp[1]);
        close(sock);
        conn_done(b);
        return NULL;
}

static void *accept_thread(void *arg) {
        struct k8s_bridge *b = arg;
        for (;;) {
                struct pollfd p[2] = {{.fd = b->listen_fd, .events = POLLIN},
                                      {.fd = b->stop[0], .events = POLLIN}};
                if (poll(p, 2, -1) < 0 && errno != EINTR)
                        break;
                if (p[1].revents)
                        break;
                if (!p[0].revents)
                        continue;
                int s = accept4(b->listen_fd, NULL, NULL, SOCK_CLOEXEC);
                if (s < 0)
                        continue;
                pthread_mutex_lock(&b->lock);
                bool full = b->nconns >= CONNS_MAX;
                pthread_mutex_unlock(&b->lock);
                if (full) {
                        /* anyone on the network may connect: bounded */
                        close(s);
                        continue;
                }
                struct conn *c = malloc(sizeof(*c));
                pthread_t t;
                pthread_attr_t at;
                pthread_attr_init(&at);
                pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
                pthread_mutex_lock(&b->lock);
                b->nconns++;
                pthread_mutex_unlock(&b->lock);
                if (c)
                        *c = (struct conn){b, s};
                if (!c || pthread_create(&t, &at, conn_thread, c) != 0) {
                        free(c);
                        close(s);
                        conn_done(b);
                }
                pthread_attr_destroy(&at);
        }
        return NULL;
}

static void on_async(uv_async_t *a) {
        struct k8s_bridge *b = a->data;
        pthread_mutex_lock(&b->lock);
        struct attach_item *items = b->items;
        b->items = NULL;
        pthread_mutex_unlock(&b->lock);
        /* oldest first */
        struct attach_item *rev = NULL;
        while (items) {
                struct attach_item *n = items->next;
                items->next = rev;
                rev = items;
                items = n;
        }
        while (rev) {
                struct attach_item *n = rev->next;
                b->attach(rev->id, rev->fd, b->userdata);
                free(rev);
                rev = n;
        }
}

int k8s_bridge_new(uv_loop_t *loop, const char *state_dir, const char *listen_addr,
                   const char *advertise, k8s_bridge_attach_fn attach, void *userdata,
                   struct k8s_bridge **ret, struct wr_err *e) {
        struct sockaddr_storage ss, as;
        socklen_t sl, asl;
        char host[64], ahost[64];
        if (relay_addr_parse(listen_addr, &ss, &sl, host, sizeof(host)) < 0)
                return err_setx(e, -EINVAL, WR_STATUS_INVALID_ARGUMENT, WR_FAULT_CLIENT,
                                "--k8s-callback %s: give IP:PORT (an address the Pods reach)",
                                listen_addr);
        if (advertise && relay_addr_parse(advertise, &as, &asl, ahost, sizeof(ahost)) < 0)
                return err_setx(e, -EINVAL, WR_STATUS_INVALID_ARGUMENT, WR_FAULT_CLIENT,
                                "--k8s-callback-advertise %s: give IP:PORT", advertise);
        struct k8s_bridge *b = calloc(1, sizeof(*b));
        if (!b)
                return err_set(e, -ENOMEM, "out of memory");
        b->loop = loop;
        b->listen_fd = b->stop[0] = b->stop[1] = -1;
        b->attach = attach;
        b->userdata = userdata;
        pthread_mutex_init(&b->lock, NULL);
        pthread_cond_init(&b->cond, NULL);
        int r;
        b->listen_fd = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
        int one = 1;
        if (b->listen_fd < 0 ||
            setsockopt(b->listen_fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) < 0 ||
            bind(b->listen_fd, (struct sockaddr *) &ss, sl) < 0 || listen(b->listen_fd, 64) < 0) {
                r = err_set(e, -errno, "--k8s-callback %s: %m", listen_addr);
                goto fail;
        }
        struct sockaddr_storage bound;
        socklen_t bl = sizeof(bound);
        (void) getsockname(b->listen_fd, (struct sockaddr *) &bound, &bl);
        unsigned port =
                ntohs(bound.ss_family == AF_INET ? ((struct sockaddr_in *) &bound)->sin_port
                                                 : ((struct sockaddr_in6 *) &bound)->sin6_port);
        const char *h = advertise ? ahost : host;
        if (advertise)
                snprintf(b->addr, sizeof(b->addr), "%s", advertise);
        else if (strchr(host, ':'))
                snprintf(b->addr, sizeof(b->addr), "[%s]:%u", host, port);
        else
                snprintf(b->addr, sizeof(b->addr), "%s:%u", host, port);
        if ((r = credentials(b, state_dir, h, e)) < 0)
                goto fail;
        if (pipe2(b->stop, O_CLOEXEC) < 0) {
                r = err_set(e, -errno, "pipe: %m");
                goto fail;
        }
        if ((r = uv_async_init(loop, &b->async, on_async)) < 0) {
                r = err_set(e, r, "uv_async_init: %s", uv_strerror(r));
                goto fail;
        }
        b->async.data = b;
        if (pthread_create(&b->thread, NULL, accept_thread, b) != 0) {
                uv_close((uv_handle_t *) &b->async, NULL);
                r = err_set(e, -EAGAIN, "k8s callback: no thread");
                goto fail;
        }
        b->thread_started = true;
        log_info("k8s callback: relays dial %s", b->addr);
        *ret = b;
        return 0;
fail:
        if (b->listen_fd >= 0)
                close(b->listen_fd);
        if (b->stop[0] >= 0) {
                close(b->stop[0]);
                close(b->stop[1]);
        }
        SSL_CTX_free(b->ctx);
        free(b->ca_pem);
        explicit_bzero(b->key, sizeof(b->key));
        free(b);
        return r;
}

static void async_closed(uv_handle_t *h) {
        struct k8s_bridge *b = h->data;
        explicit_bzero(b->key, sizeof(b->key));
        free(b);
}

void k8s_bridge_free(struct k8s_bridge *b) {
        if (!b)
                return;
        /* every thread sees the stop pipe readable once its write end goes */
        close(b->stop[1]);
        if (b->thread_started)
                pthread_join(b->thread, NULL);
        pthread_mutex_lock(&b->lock);
        while (b->nconns > 0)
                pthread_cond_wait(&b->cond, &b->lock);
        struct attach_item *items = b->items;
        b->items = NULL;
        pthread_mutex_unlock(&b->lock);
        while (items) {
                struct attach_item *n = items->next;
                close(items->fd);
                free(items);
                items = n;
        }
        close(b->stop[0]);
        close(b->listen_fd);
        SSL_CTX_free(b->ctx);
        free(b->ca_pem);
        uv_close((uv_handle_t *) &b->async, async_closed);
}

const char *k8s_bridge_addr(const struct k8s_bridge *b) {
        return b->addr;
}

const char *k8s_bridge_ca_pem(const struct k8s_bridge *b) {
        return b->ca_pem;
}
