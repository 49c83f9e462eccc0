/* SPDX-License-Identifier: Apache-2.0 */
/* warren-relay: the Pod's end of a K8S sandbox's control connection.
 * Runs as a sidecar of the sandbox's Pod (docs/k8s.md): connects to
 * warren-init's control socket in the shared emptyDir, dials warrend's
 * callback address over TLS (warrend's certificate checked against the
 * CA in its Secret), says HELLO with the sandbox's token, then relays
 * (relay-mux.h). Whenever either side ends it starts over: a restarted
 * warrend is redialled, init keeps held execs meanwhile.
 *   warren-relay --ctl /.warren/ctl.sock --config DIR
 * DIR holds addr ("IP:PORT" or "[IPv6]:PORT"), id, token and ca.crt (the
 * Secret warrend made for the Pod). Static (OpenSSL linked in). */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include "init/ctl-proto.h"
#include "k8s/relay-frame.h"
#include "k8s/relay-mux.h"

static void logf_(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void logf_(const char *fmt, ...) {
        va_list ap;
        va_start(ap, fmt);
        fprintf(stderr, "warren-relay: ");
        vfprintf(stderr, fmt, ap);
        fputc('\n', stderr);
        va_end(ap);
}

static int read_file(const char *dir, const char *name, char *buf, size_t size) {
        char path[4096];
        snprintf(path, sizeof(path), "%s/%s", dir, name);
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
                return -errno;
        ssize_t n = read(fd, buf, size - 1);
        close(fd);
        if (n < 0)
                return -errno;
        while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == ' '))
                n--;
        buf[n] = 0;
        return (int) n;
}

static void sleep_ms(int ms) {
        struct timespec ts = {ms / 1000, (long) (ms % 1000) * 1000000};
        nanosleep(&ts, NULL);
}

static int ctl_connect(const char *path) {
        struct sockaddr_un sa = {.sun_family = AF_UNIX};
        if (strlen(path) >= sizeof(sa.sun_path))
                return -ENAMETOOLONG;
        strcpy(sa.sun_path, path);
        int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
        if (fd < 0)
                return -errno;
        if (connect(fd, (struct sockaddr *) &sa, sizeof(sa)) < 0) {
                int r = -errno;
                close(fd);
                return r;
        }
        int sz = (int) (CTL_MSG_MAX + 65536);
        if (setsockopt(fd, SOL_SOCKET, SO_SNDBUFFORCE, &sz, sizeof(sz)) < 0)
                (void) setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &sz, sizeof(sz));
        (void) fcntl(fd, F_SETFL, O_NONBLOCK);
        return fd;
}

struct conf {
        char addr[128], id[64], token[128];
        char ca_path[4096];
};

static int session(SSL_CTX *ctx, const struct conf *c, const char *ctl_path) {
        int ctl = ctl_connect(ctl_path);
        if (ctl < 0)
                /* init's socket is not there yet: -EAGAIN */
                return ctl == -ENOENT || ctl == -ECONNREFUSED ? -EAGAIN : ctl;
        struct sockaddr_storage ss;
        socklen_t sl;
        char host[64];
        int r = relay_addr_parse(c->addr, &ss, &sl, host, sizeof(host));
        if (r < 0) {
                close(ctl);
                return r;
        }
        int sock = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (sock < 0 || connect(sock, (struct sockaddr *) &ss, sl) < 0) {
                r = -errno;
                if (sock >= 0)
                        close(sock);
                close(ctl);
                return r;
        }
        int one = 1;
        (void) setsockopt(sock, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
        struct timeval tv = {10, 0};
        (void) setsockopt(sock, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
        (void) setsockopt(sock, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
        SSL *ssl = SSL_new(ctx);
        r = -EPROTO;
        if (!ssl)
                goto out;
        X509_VERIFY_PARAM *vp = SSL_get0_param(ssl);
        if (X509_VERIFY_PARAM_set1_ip_asc(vp, host) != 1)
                goto out;
        SSL_set_fd(ssl, sock);
        if (SSL_connect(ssl) != 1) {
                unsigned long e = ERR_get_error();
                logf_("TLS to %s: %s", c->addr, e ? ERR_reason_error_string(e) : "failed");
                ERR_clear_error();
                goto out;
        }
        (void) fcntl(sock, F_SETFL, O_NONBLOCK);
        size_t il = strlen(c->id);
        uint8_t hello[RELAY_HDR_LEN + RELAY_ID_MAX + 1 + RELAY_TOKEN_LEN];
        if (il == 0 || il > RELAY_ID_MAX || strlen(c->token) != RELAY_TOKEN_LEN)
                goto out;
        relay_hdr_put(hello, RELAY_HELLO, 0, (uint32_t) (il + 1 + RELAY_TOKEN_LEN));
        memcpy(hello + RELAY_HDR_LEN, c->id, il + 1);
        memcpy(hello + RELAY_HDR_LEN + il + 1, c->token, RELAY_TOKEN_LEN);
        if ((r = relay_ssl_write_all(ssl, sock, hello, RELAY_HDR_LEN + il + 1 + RELAY_TOKEN_LEN,
                                     10000)) < 0)
                goto out;
        explicit_bzero(hello, sizeof(hello));
        static uint8_t buf[RELAY_HDR_LEN + 65536];
        size_t filled = 0;
        struct relay_frame f;
        int k = relay_ssl_read_frame(ssl, sock, buf, sizeof(buf), &filled, CTL_MSG_MAX, 10000, &f);
        if (k <= 0 || f.type != RELAY_WELCOME) {
                logf_("warrend at %s did not welcome us (%s)", c->addr,
                      k < 0 ? strerror(-k) : "refused");
                r = k < 0 ? k : -EACCES;
                goto out;
        }
        logf_("connected to warrend at %s", c->addr);
        struct relay_mux_config mc = {
                .side = RELAY_SIDE_POD,
                .ssl = ssl,
                .sock = sock,
                .ctl = ctl,
                .stop_fd = -1,
                .pending = buf + k,
                .pending_len = filled - (size_t) k,
        };
        r = relay_mux_run(&mc);
        logf_("session ended: %s", r < 0 ? strerror(-r) : "closed");
out:
        if (ssl) {
                (void) SSL_shutdown(ssl);
                SSL_free(ssl);
        }
        close(sock);
        close(ctl);
        return r;
}

/* PID 1 of its container: without a handler SIGTERM would be ignored and
 * the Pod's deletion would wait for the grace period's SIGKILL */
static void on_term(int sig) {
        _exit(0);
}

int main(int argc, char **argv) {
        const char *ctl_path = "/.warren/ctl.sock", *dir = "/var/run/warren-relay";
        for (int i = 1; i < argc; i++) {
                if (strcmp(argv[i], "--ctl") == 0 && i + 1 < argc)
                        ctl_path = argv[++i];
                else if (strcmp(argv[i], "--config") == 0 && i + 1 < argc)
                        dir = argv[++i];
                else {
                        fprintf(stderr, "usage: warren-relay [--ctl SOCKET] [--config DIR]\n");
                        return 2;
                }
        }
        signal(SIGPIPE, SIG_IGN);
        signal(SIGTERM, on_term);
        signal(SIGINT, on_term);
        struct conf c = {0};
        if (read_file(dir, "addr", c.addr, sizeof(c.addr)) <= 0 ||
            read_file(dir, "id", c.id, sizeof(c.id)) <= 0 ||
            read_file(dir, "token", c.token, sizeof(c.token)) <= 0) {
                logf_("%s must hold addr, id and token (the Secret warrend made)", dir);
                return 1;
        }
        snprintf(c.ca_path, sizeof(c.ca_path), "%s/ca.crt", dir);
        SSL_CTX *ctx = SSL_CTX_new(TLS_client_method());
        if (!ctx || SSL_CTX_set_min_proto_version(ctx, TLS1_3_VERSION) != 1 ||
            SSL_CTX_load_verify_locations(ctx, c.ca_path, NULL) != 1) {
                logf_("cannot load %s", c.ca_path);
                return 1;
        }
        SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, NULL);
        SSL_CTX_set_mode(ctx, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
        int backoff = 50, last = 1;
        for (;;) {
                int r = session(ctx, &c, ctl_path);
                if (r == -EAGAIN) {
                        sleep_ms(10);
                        continue;
                }
                if (r < 0 && r != last)
                        logf_("%s: %s (retrying)", c.addr, strerror(-r));
                last = r;
                if (r == 0)
                        backoff = 50;
                sleep_ms(backoff);
                if (backoff < 1000)
                        backoff *= 2;
        }
}
