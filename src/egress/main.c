/* SPDX-License-Identifier: Apache-2.0 */
/* warren-egress: the egress enforcer, a confined process of its own (it
 * parses bytes sandboxes send). Started as root by warrend with every
 * socket it serves already bound:
 *
 *   warren-egress --ctl-fd N --listen-fd N [--listen-fd N ...]
 *                 [--dns-fd N ...] --upstream-dns IP[:PORT] [...]
 *                 [--threads N] [--uid USER] [--gid GROUP] [--root DIR]
 *                 [--deny-addr IP ...] [--deny-port PORT ...]
 *                 [--first-byte-ms N] [--head-timeout-ms N]
 *                 [--connect-timeout-ms N] [--dns-timeout-ms N]
 *                 [--max-conns N] [--log-level debug|info|warn|error]
 *                 [--signer-fd N] [--upstream-ca FILE]
 *
 * --signer-fd: a SOCK_SEQPACKET socket to warren-signer (docs/signer.md):
 * hosts with request rules or credentials are intercepted (intercept.c);
 * without it they stay opaque tunnels. The process exits when that socket
 * closes (like the control socket). --upstream-ca: the bundle upstream
 * certificates of intercepted hosts are verified against (default: the
 * host's /etc/ssl/certs/ca-certificates.crt), read before confinement.
 *
 * It confines itself (confine.c) before it reads a byte from anyone, sends
 * READY on the control socket, then serves. It exits when the control
 * socket closes (fail closed: warrend restarts it with the same sockets).
 * Exit status: 0 control socket closed, 2 usage or confinement error. */

#include <arpa/inet.h>
#include <ares.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>
#include <uv.h>

#include "basic/log.h"
#include "egress/egress.h"
#include "egress/intercept.h"

struct egress_config egress_cfg = {
        .ctl_fd = -EBADF,
        .user = "nobody",
        .group = "nogroup",
        .root = "/run/warren/egress-root",
        .first_byte_ms = 1000,
        .head_timeout_ms = 10000,
        .connect_timeout_ms = 10000,
        .dns_timeout_ms = 2000,
        .max_conns = 16384,
        .confine = true,
};
atomic_uint egress_nconns;

static pthread_mutex_t ctl_lock = PTHREAD_MUTEX_INITIALIZER;
static uint64_t event_seq, events_dropped;
static uint8_t *ctl_buf;

uint64_t egress_now_ns(void) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        return (uint64_t) ts.tv_sec * 1000000000ull + (uint64_t) ts.tv_nsec;
}

void egress_sockaddr_to_net(const struct sockaddr *sa, struct net_addr *ret, uint16_t *port) {
        memset(ret, 0, sizeof(*ret));
        *port = 0;
        if (sa->sa_family == AF_INET) {
                const struct sockaddr_in *s4 = (const struct sockaddr_in *) sa;
                net_addr_from_ipv4(ret, (const uint8_t *) &s4->sin_addr);
                *port = ntohs(s4->sin_port);
        } else if (sa->sa_family == AF_INET6) {
                const struct sockaddr_in6 *s6 = (const struct sockaddr_in6 *) sa;
                const uint8_t *b = s6->sin6_addr.s6_addr;
                static const uint8_t mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
                if (memcmp(b, mapped, 12) == 0)
                        net_addr_from_ipv4(ret, b + 12);
                else
                        net_addr_from_ipv6(ret, b);
                *port = ntohs(s6->sin6_port);
        }
}

socklen_t egress_net_to_sockaddr(const struct net_addr *a, uint16_t port,
                                 struct sockaddr_storage *ret) {
        memset(ret, 0, sizeof(*ret));
        if (a->family == AF_INET) {
                struct sockaddr_in *s4 = (struct sockaddr_in *) ret;
                s4->sin_family = AF_INET;
                s4->sin_port = htons(port);
                memcpy(&s4->sin_addr, a->bytes, 4);
                return sizeof(*s4);
        }
        struct sockaddr_in6 *s6 = (struct sockaddr_in6 *) ret;
        s6->sin6_family = AF_INET6;
        s6->sin6_port = htons(port);
        memcpy(&s6->sin6_addr, a->bytes, 16);
        return sizeof(*s6);
}

static void ctl_send(uint32_t type, uint64_t id, const void *payload, size_t len, bool count_drop) {
        uint8_t out[sizeof(struct egress_hdr) + sizeof(struct egress_event)];
        pthread_mutex_lock(&ctl_lock);
        if (type == EGRESS_EVENT)
                id = ++event_seq;
        int n = egress_msg_encode(type, id, payload, len, out, sizeof(out));
        if (n > 0 && send(egress_cfg.ctl_fd, out, (size_t) n, MSG_DONTWAIT | MSG_NOSIGNAL) < 0 &&
            count_drop)
                events_dropped++;
        pthread_mutex_unlock(&ctl_lock);
}

void egress_event_fill_sb(struct egress_event *ev, const struct egress_sb *sb,
                          const struct net_addr *src) {
        egress_addr_from_net(&ev->source, src);
        if (sb) {
                egress_str_set(ev->sandbox, sizeof(ev->sandbox), sb->id);
                ev->mode = (uint8_t) sb->mode;
        }
}

void egress_event_send(struct egress_event *ev) {
        ev->time_ns = egress_now_ns();
        if (log_get_level() <= LOG_LEVEL_DEBUG) {
                char a[NET_ADDR_STR_MAX] = "-";
                struct net_addr na;
                if (ev->dialed.family && egress_addr_to_net(&ev->dialed, &na) == 0)
                        net_addr_format(&na, a);
                log_debug("event %s sandbox=%s sni=%s host=%s dialed=%s:%u %s rule=\"%s\" "
                          "reason=\"%s\" up=%llu down=%llu",
                          ev->kind == EGRESS_EVENT_TCP ? "tcp" : "dns", ev->sandbox, ev->sni,
                          ev->host, a, ev->port, ev->verdict ? "allow" : "deny", ev->rule,
                          ev->reason, (unsigned long long) ev->bytes_up,
                          (unsigned long long) ev->bytes_down);
        }
        ctl_send(EGRESS_EVENT, 0, ev, sizeof(*ev), true);
}

static void reply_result(uint64_t id, int err, const char *msg) {
        struct egress_result res;
        memset(&res, 0, sizeof(res));
        res.err = -err;
        egress_str_set(res.msg, sizeof(res.msg), msg);
        ctl_send(EGRESS_RESULT, id, &res, sizeof(res), false);
}

static void ctl_cb(uv_poll_t *p, int status, int events) {
        for (;;) {
                ssize_t n = recv(egress_cfg.ctl_fd, ctl_buf, EGRESS_MSG_MAX + 1,
                                 MSG_DONTWAIT | MSG_TRUNC);
                if (n < 0 && (errno == EAGAIN || errno == EINTR))
                        return;
                if (n <= 0) {
                        /* warrend is gone: fail closed */
                        log_info("warren-egress: control socket closed, exiting");
                        _exit(0);
                }
                struct egress_req req;
                struct wr_err e = {0};
                int r = (size_t) n > EGRESS_MSG_MAX
                                ? err_set(&e, -EMSGSIZE, "request of %zd bytes", n)
                                : egress_req_decode(ctl_buf, (size_t) n, &req, &e);
                uint64_t id = 0;
                if (n >= (ssize_t) sizeof(struct egress_hdr))
                        memcpy(&id, ctl_buf + offsetof(struct egress_hdr, id), sizeof(id));
                /* a POLICY_SET may carry secret values: none stay here */
                explicit_bzero(ctl_buf, MIN((size_t) n, (size_t) EGRESS_MSG_MAX + 1));
                if (r < 0) {
                        log_warn("warren-egress: control request refused: %s", e.msg);
                        reply_result(id, r, e.msg);
                        continue;
                }
                switch (req.hdr.type) {
                case EGRESS_POLICY_SET:
                        r = egress_sb_set(&req.set, &e);
                        reply_result(req.hdr.id, r < 0 ? r : 0, r < 0 ? e.msg : "");
                        break;
                case EGRESS_POLICY_DEL:
                        r = egress_sb_del(req.sandbox);
                        reply_result(req.hdr.id, r < 0 ? r : 0, r < 0 ? "no such sandbox" : "");
                        break;
                case EGRESS_PING: {
                        struct egress_pong pong = {
                                .n_sandboxes = egress_sb_count(),
                                .n_conns = atomic_load(&egress_nconns),
                        };
                        pthread_mutex_lock(&ctl_lock);
                        pong.events_dropped = events_dropped;
                        pthread_mutex_unlock(&ctl_lock);
                        ctl_send(EGRESS_PONG, req.hdr.id, &pong, sizeof(pong), false);
                        break;
                }
                }
                egress_req_done(&req);
        }
}

static void signer_cb(uv_poll_t *p, int status, int events) {
        (void) p;
        if (status < 0 || (events & UV_DISCONNECT)) {
                log_info("warren-egress: signer socket closed, exiting");
                _exit(0);
        }
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

static int parse_uint(const char *s, unsigned lo, unsigned hi, unsigned *ret) {
        char *end;
        unsigned long v = strtoul(s, &end, 10);
        if (!*s || *end || v < lo || v > hi)
                return -EINVAL;
        *ret = (unsigned) v;
        return 0;
}

/* "IP", "IP:PORT", "[IPv6]:PORT" */
static int parse_upstream(const char *s, struct egress_upstream *u, char *csv, size_t csv_size) {
        char host[64];
        unsigned port = 53;
        const char *colon;
        if (s[0] == '[') {
                const char *rb = strchr(s, ']');
                if (!rb || (size_t) (rb - s - 1) >= sizeof(host))
                        return -EINVAL;
                memcpy(host, s + 1, (size_t) (rb - s - 1));
                host[rb - s - 1] = 0;
                if (rb[1] == ':' && parse_uint(rb + 2, 1, 65535, &port) < 0)
                        return -EINVAL;
                else if (rb[1] && rb[1] != ':')
                        return -EINVAL;
        } else if ((colon = strchr(s, ':')) && !strchr(colon + 1, ':')) {
                if ((size_t) (colon - s) >= sizeof(host) ||
                    parse_uint(colon + 1, 1, 65535, &port) < 0)
                        return -EINVAL;
                memcpy(host, s, (size_t) (colon - s));
                host[colon - s] = 0;
        } else {
                snprintf(host, sizeof(host), "%s", s);
        }
        struct net_addr a;
        if (net_addr_parse(host, &a) < 0)
                return -EINVAL;
        u->salen = egress_net_to_sockaddr(&a, (uint16_t) port, &u->sa);
        size_t l = strlen(csv);
        snprintf(csv + l, csv_size - l, "%s%s%s%s:%u", l ? "," : "",
                 a.family == AF_INET6 ? "[" : "", host, a.family == AF_INET6 ? "]" : "", port);
        return 0;
}

static _noreturn_ void usage(int code) {
        fprintf(code ? stderr : stdout,
                "usage: warren-egress --ctl-fd N --listen-fd N [--listen-fd N ...] [--dns-fd N "
                "...]\n"
                "         --upstream-dns IP[:PORT] [...] [--threads N] [--uid USER] [--gid GROUP]\n"
                "         [--root EMPTY-DIR] [--deny-addr IP ...] [--deny-port PORT ...]\n"
                "         [--first-byte-ms N] [--head-timeout-ms N] [--connect-timeout-ms N]\n"
                "         [--dns-timeout-ms N] [--max-conns N] [--log-level LEVEL]\n"
                "         [--signer-fd N] [--upstream-ca FILE]\n");
        exit(code);
}

static _noreturn_ void die(const char *what, const char *arg) {
        fprintf(stderr, "warren-egress: %s%s%s\n", what, arg ? ": " : "", arg ? arg : "");
        exit(2);
}

int main(int argc, char **argv) {
        enum {
                O_CTL = 256,
                O_LISTEN,
                O_DNS,
                O_UPSTREAM,
                O_THREADS,
                O_UID,
                O_GID,
                O_ROOT,
                O_DENY_ADDR,
                O_DENY_PORT,
                O_FIRST,
                O_HEAD,
                O_CONNECT,
                O_DNS_TIMEOUT,
                O_MAX,
                O_LOG,
                O_SIGNER,
                O_UPSTREAM_CA,
                O_HELP,
        };
        static const struct option opts[] = {
                {"ctl-fd", required_argument, NULL, O_CTL},
                {"listen-fd", required_argument, NULL, O_LISTEN},
                {"dns-fd", required_argument, NULL, O_DNS},
                {"upstream-dns", required_argument, NULL, O_UPSTREAM},
                {"threads", required_argument, NULL, O_THREADS},
                {"uid", required_argument, NULL, O_UID},
                {"gid", required_argument, NULL, O_GID},
                {"root", required_argument, NULL, O_ROOT},
                {"deny-addr", required_argument, NULL, O_DENY_ADDR},
                {"deny-port", required_argument, NULL, O_DENY_PORT},
                {"first-byte-ms", required_argument, NULL, O_FIRST},
                {"head-timeout-ms", required_argument, NULL, O_HEAD},
                {"connect-timeout-ms", required_argument, NULL, O_CONNECT},
                {"dns-timeout-ms", required_argument, NULL, O_DNS_TIMEOUT},
                {"max-conns", required_argument, NULL, O_MAX},
                {"log-level", required_argument, NULL, O_LOG},
                {"signer-fd", required_argument, NULL, O_SIGNER},
                {"upstream-ca", required_argument, NULL, O_UPSTREAM_CA},
                {"help", no_argument, NULL, O_HELP},
                {0},
        };
        struct egress_config *c = &egress_cfg;
        size_t n_deny_addrs = 0, n_deny_ports = 0;
        int signer_fd = -EBADF;
        const char *upstream_ca = NULL;
        long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
        c->threads = ncpu > 0 ? (unsigned) MIN(ncpu, 64) : 1;
        int o;
        while ((o = getopt_long(argc, argv, "", opts, NULL)) != -1) {
                unsigned v;
                switch (o) {
                case O_CTL:
                        if (parse_fd(optarg, &c->ctl_fd) < 0)
                                die("bad --ctl-fd", optarg);
                        break;
                case O_LISTEN:
                        if (c->n_listen == EGRESS_FDS_MAX ||
                            parse_fd(optarg, &c->listen_fds[c->n_listen++]) < 0)
                                die("bad --listen-fd", optarg);
                        break;
                case O_DNS:
                        if (c->n_dns == EGRESS_FDS_MAX ||
                            parse_fd(optarg, &c->dns_fds[c->n_dns++]) < 0)
                                die("bad --dns-fd", optarg);
                        break;
                case O_UPSTREAM:
                        if (c->n_upstreams == EGRESS_UPSTREAMS_MAX ||
                            parse_upstream(optarg, &c->upstreams[c->n_upstreams++], c->ares_servers,
                                           sizeof(c->ares_servers)) < 0)
                                die("bad --upstream-dns (IP, IP:PORT or [IPv6]:PORT)", optarg);
                        break;
                case O_THREADS:
                        if (parse_uint(optarg, 1, 64, &c->threads) < 0)
                                die("bad --threads (1..64)", optarg);
                        break;
                case O_UID:
                        c->user = optarg;
                        break;
                case O_GID:
                        c->group = optarg;
                        break;
                case O_ROOT:
                        c->root = optarg;
                        break;
                case O_DENY_ADDR:
                        if (n_deny_addrs == EGRESS_DENY_MAX ||
                            net_addr_parse(optarg, &c->deny_addrs[n_deny_addrs++]) < 0)
                                die("bad --deny-addr", optarg);
                        break;
                case O_DENY_PORT:
                        if (n_deny_ports == EGRESS_DENY_MAX || parse_uint(optarg, 1, 65535, &v) < 0)
                                die("bad --deny-port", optarg);
                        c->deny_ports[n_deny_ports++] = (uint16_t) v;
                        break;
                case O_FIRST:
                        if (parse_uint(optarg, 1, 600000, &c->first_byte_ms) < 0)
                                die("bad --first-byte-ms", optarg);
                        break;
                case O_HEAD:
                        if (parse_uint(optarg, 1, 600000, &c->head_timeout_ms) < 0)
                                die("bad --head-timeout-ms", optarg);
                        break;
                case O_CONNECT:
                        if (parse_uint(optarg, 1, 600000, &c->connect_timeout_ms) < 0)
                                die("bad --connect-timeout-ms", optarg);
                        break;
                case O_DNS_TIMEOUT:
                        if (parse_uint(optarg, 1, 60000, &c->dns_timeout_ms) < 0)
                                die("bad --dns-timeout-ms", optarg);
                        break;
                case O_MAX:
                        if (parse_uint(optarg, 1, 1000000, &c->max_conns) < 0)
                                die("bad --max-conns", optarg);
                        break;
                case O_LOG: {
                        enum log_level lv;
                        if (log_level_from_string(optarg, &lv) < 0)
                                die("bad --log-level", optarg);
                        log_set_level(lv);
                        break;
                }
                case O_SIGNER:
                        if (parse_fd(optarg, &signer_fd) < 0)
                                die("bad --signer-fd", optarg);
                        break;
                case O_UPSTREAM_CA:
                        upstream_ca = optarg;
                        break;
                case O_HELP:
                        usage(0);
                default:
                        usage(2);
                }
        }
        if (optind != argc || c->ctl_fd < 0 || c->n_listen == 0 || c->n_upstreams == 0)
                usage(2);
        c->host_deny = (struct net_host_deny){
                .addrs = c->deny_addrs,
                .n_addrs = n_deny_addrs,
                .ports = c->deny_ports,
                .n_ports = n_deny_ports,
        };
        /* the passed sockets: the control socket a SEQPACKET, listeners
         * listening; all non-blocking and close-on-exec */
        int type = 0;
        socklen_t tl = sizeof(type);
        if (getsockopt(c->ctl_fd, SOL_SOCKET, SO_TYPE, &type, &tl) < 0 || type != SOCK_SEQPACKET)
                die("--ctl-fd is not a SOCK_SEQPACKET socket", NULL);
        for (size_t i = 0; i < c->n_listen; i++) {
                int acc = 0;
                tl = sizeof(acc);
                if (getsockopt(c->listen_fds[i], SOL_SOCKET, SO_ACCEPTCONN, &acc, &tl) < 0 || !acc)
                        die("--listen-fd is not a listening socket", NULL);
        }
        int all[2 * EGRESS_FDS_MAX + 1];
        size_t n_all = 0;
        all[n_all++] = c->ctl_fd;
        for (size_t i = 0; i < c->n_listen; i++)
                all[n_all++] = c->listen_fds[i];
        for (size_t i = 0; i < c->n_dns; i++)
                all[n_all++] = c->dns_fds[i];
        for (size_t i = 0; i < n_all; i++) {
                int fl = fcntl(all[i], F_GETFL);
                if (fl < 0 || fcntl(all[i], F_SETFL, fl | O_NONBLOCK) < 0 ||
                    fcntl(all[i], F_SETFD, FD_CLOEXEC) < 0)
                        die("cannot set up a passed fd", NULL);
        }
        if (signer_fd >= 0) {
                type = 0;
                tl = sizeof(type);
                if (getsockopt(signer_fd, SOL_SOCKET, SO_TYPE, &type, &tl) < 0 ||
                    type != SOCK_SEQPACKET)
                        die("--signer-fd is not a SOCK_SEQPACKET socket", NULL);
        }
        int sndbuf = 4 << 20;
        (void) setsockopt(c->ctl_fd, SOL_SOCKET, SO_SNDBUF, &sndbuf, sizeof(sndbuf));
        signal(SIGPIPE, SIG_IGN);

        ctl_buf = malloc(EGRESS_MSG_MAX + 1);
        if (!ctl_buf || ares_library_init(ARES_LIB_INIT_ALL) != ARES_SUCCESS)
                die("out of memory", NULL);
        struct wr_err e = {0};
        uv_loop_t loop;
        if (uv_loop_init(&loop) < 0 || egress_proxy_prepare(&e) < 0)
                die("setup", e.msg);
        uv_poll_t ctl_poll, signer_poll;
        if (uv_poll_init_socket(&loop, &ctl_poll, c->ctl_fd) < 0)
                die("poll control socket", NULL);
        if (egress_intercept_prepare(signer_fd, upstream_ca, &e) < 0)
                die("interception", e.msg);
        if (signer_fd >= 0 && uv_poll_init_socket(&loop, &signer_poll, signer_fd) < 0)
                die("poll signer socket", NULL);

        /* Nothing has been read from anyone yet: confine now. */
        if (egress_confine(&e) < 0)
                die("confine", e.msg);

        if (egress_resolver_start(&loop, &e) < 0 || egress_proxy_start(&e) < 0)
                die("start", e.msg);
        uv_poll_start(&ctl_poll, UV_READABLE, ctl_cb);
        /* the signer's end closing: only the hang-up is watched (the
         * interception threads read the replies) */
        if (signer_fd >= 0)
                uv_poll_start(&signer_poll, UV_DISCONNECT, signer_cb);
        struct egress_ready ready = {
                .version = 1,
                .threads = c->threads,
                .n_listen = (uint32_t) c->n_listen,
                .n_dns = (uint32_t) c->n_dns,
        };
        ctl_send(EGRESS_READY, 0, &ready, sizeof(ready), false);
        log_info("warren-egress: ready (%u threads, %zu listeners, %zu dns sockets)", c->threads,
                 c->n_listen, c->n_dns);
        uv_run(&loop, UV_RUN_DEFAULT);
        _exit(0);
}
