/* SPDX-License-Identifier: Apache-2.0 */
/* The sandboxes' resolver, on the main loop. Queries arrive on the UDP and
 * TCP sockets warrend passed (--dns-fd; the sandbox's port 53 is
 * redirected to them). Each query is parsed strictly (egress-dns.c), its
 * source mapped to a sandbox (unknown: REFUSED), and under ENFORCE a name
 * that no allowed_hosts entry could match is answered NXDOMAIN without
 * any upstream query. Everything else is forwarded to the upstream
 * resolvers (--upstream-dns) from a fresh socket with a random id (UDP for
 * UDP queries, TCP for TCP ones), the answer checked against the question
 * and returned under the client's id. One EVENT per query. */

#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <unistd.h>
#include <uv.h>

#include "basic/log.h"
#include "egress/egress-dns.h"
#include "egress/egress.h"

#define TCP_CLIENTS_MAX 256
#define UDP_INFLIGHT_MAX 1024
#define TCP_IDLE_MS 10000

struct tcp_client;

/* One forwarded query. */
struct fwd {
        uv_poll_t poll;
        uv_timer_t timer;
        int handles;
        int fd;
        int dns_fd; /* UDP: the server socket to answer on */
        struct sockaddr_storage client;
        socklen_t client_len;
        struct tcp_client *tc; /* TCP: the client connection */
        uint8_t *q;            /* the query as forwarded (random id) */
        size_t qlen;
        struct egress_dns_query pq;
        uint16_t client_id, id;
        size_t upstream; /* index tried */
        bool tcp, done;
        bool poll_on;   /* poll initialised on the current fd */
        bool reiniting; /* poll being closed to watch a new fd */
        uint8_t *ans;   /* TCP: 2-byte length + answer */
        size_t ans_len, ans_cap, sent;
        struct egress_event ev;
};

struct tcp_client {
        uv_poll_t poll;
        uv_timer_t timer;
        int handles;
        int fd;
        uint8_t buf[2 + EGRESS_DNS_MSG_MAX];
        size_t len;
        uint8_t *out;
        size_t out_len, out_sent;
        bool busy, closing;
        struct fwd *fwd;
        struct net_addr src;
};

static uv_loop_t *loop;
static uv_poll_t dns_polls[EGRESS_FDS_MAX];
static unsigned n_udp_inflight, n_tcp_clients;

static void tc_close(struct tcp_client *tc);
static void tc_answer(struct tcp_client *tc, const uint8_t *msg, size_t len);
static void fwd_start(struct fwd *f);

static void event_dns(struct egress_event *ev, const struct egress_sb *sb,
                      const struct net_addr *src, const struct egress_dns_query *q,
                      enum net_verdict v, const char *rule, const char *reason) {
        memset(ev, 0, sizeof(*ev));
        ev->kind = EGRESS_EVENT_DNS;
        egress_event_fill_sb(ev, sb, src);
        ev->verdict = (uint8_t) v;
        if (q) {
                ev->port = q->qtype;
                egress_str_set(ev->host, sizeof(ev->host), q->canon_ok ? q->canon.name : q->name);
        }
        egress_str_set(ev->rule, sizeof(ev->rule), rule);
        egress_str_set(ev->reason, sizeof(ev->reason), reason);
}

/* Decide on one query from src. Returns 1 to forward, 0 when *out holds
 * the answer to send (out_len bytes), and fills ev. */
static int decide(const uint8_t *buf, size_t len, const struct net_addr *src,
                  struct egress_dns_query *q, uint8_t *out, size_t out_size, size_t *out_len,
                  struct egress_event *ev) {
        struct wr_err e = {0};
        int r = egress_dns_query_parse(buf, len, q, &e);
        struct egress_sb *sb = egress_sb_lookup(src);
        if (r < 0) {
                event_dns(ev, sb, src, NULL, NET_VERDICT_DENY, "dns", "malformed query");
                egress_str_set(ev->reason, sizeof(ev->reason), e.msg);
                r = egress_dns_formerr(buf, len, out, out_size);
                *out_len = r > 0 ? (size_t) r : 0;
                egress_sb_unref(sb);
                return 0;
        }
        if (!sb) {
                event_dns(ev, NULL, src, q, NET_VERDICT_DENY, "source", "unknown source address");
                r = egress_dns_error_answer(buf, q, EGRESS_DNS_RCODE_REFUSED, out, out_size);
                *out_len = r > 0 ? (size_t) r : 0;
                return 0;
        }
        if (sb->mode == EGRESS_MODE_ENFORCE &&
            (!q->canon_ok || q->canon.kind != NET_HOST_NAME ||
             (!net_policy_name_may_match(sb->policy, q->canon.name) &&
              /* a managed SSH destination resolves (the seed's rule) */
              !net_rules_ssh_name(sb->rules, q->canon.name)))) {
                event_dns(ev, sb, src, q, NET_VERDICT_DENY, "allowed_hosts",
                          "no allowed_hosts entry matches the name");
                r = egress_dns_error_answer(buf, q, EGRESS_DNS_RCODE_NXDOMAIN, out, out_size);
                *out_len = r > 0 ? (size_t) r : 0;
                egress_sb_unref(sb);
                return 0;
        }
        event_dns(ev, sb, src, q, NET_VERDICT_ALLOW,
                  sb->mode == EGRESS_MODE_ENFORCE ? "allowed_hosts" : "no policy",
                  sb->mode == EGRESS_MODE_ENFORCE ? "an allowed_hosts entry may match"
                  : sb->mode == EGRESS_MODE_LEARN ? "learn: forwarded"
                                                  : "open: forwarded");
        egress_sb_unref(sb);
        return 1;
}

/* --- forwarding --- */

static void fwd_closed(uv_handle_t *h) {
        struct fwd *f = h->data;
        if (--f->handles > 0)
                return;
        free(f->q);
        free(f->ans);
        free(f);
}

static void fwd_finish(struct fwd *f, const uint8_t *ans, size_t len) {
        if (f->done)
                return;
        f->done = true;
        uint8_t fail[512];
        if (!ans) {
                int n = egress_dns_error_answer(f->q, &f->pq, EGRESS_DNS_RCODE_SERVFAIL, fail,
                                                sizeof(fail));
                fail[0] = (uint8_t) (f->client_id >> 8);
                fail[1] = (uint8_t) f->client_id;
                ans = fail;
                len = n > 0 ? (size_t) n : 0;
                f->ev.verdict = NET_VERDICT_ALLOW;
                egress_str_set(f->ev.reason, sizeof(f->ev.reason), "upstream failed: SERVFAIL");
        }
        if (f->tcp) {
                if (f->tc) {
                        f->tc->fwd = NULL;
                        tc_answer(f->tc, ans, len);
                }
        } else {
                (void) sendto(f->dns_fd, ans, len, MSG_DONTWAIT, (struct sockaddr *) &f->client,
                              f->client_len);
                n_udp_inflight--;
        }
        egress_event_send(&f->ev);
        if (f->poll_on && !f->reiniting)
                uv_close((uv_handle_t *) &f->poll, fwd_closed);
        f->fd = safe_close(f->fd);
        uv_close((uv_handle_t *) &f->timer, fwd_closed);
}

static void fwd_answer(struct fwd *f, uint8_t *ans, size_t len) {
        if (egress_dns_answer_check(ans, len, f->id, f->q, &f->pq) < 0)
                return; /* not ours (spoofed or late): keep waiting */
        ans[0] = (uint8_t) (f->client_id >> 8);
        ans[1] = (uint8_t) f->client_id;
        fwd_finish(f, ans, len);
}

static void fwd_next(struct fwd *f) {
        uv_timer_stop(&f->timer);
        if (f->poll_on)
                uv_poll_stop(&f->poll);
        f->fd = safe_close(f->fd);
        f->upstream++;
        if (f->upstream >= egress_cfg.n_upstreams) {
                fwd_finish(f, NULL, 0);
                return;
        }
        /* a new poll handle is needed for the new fd: close, then restart */
        fwd_start(f);
}

static void fwd_poll_cb(uv_poll_t *p, int status, int events) {
        struct fwd *f = p->data;
        if (f->done)
                return;
        if (status < 0) {
                fwd_next(f);
                return;
        }
        if (!f->tcp) {
                static uint8_t buf[EGRESS_DNS_MSG_MAX]; /* the main loop's thread only */
                ssize_t n = recv(f->fd, buf, sizeof(buf), MSG_DONTWAIT);
                if (n < 0 && errno == EAGAIN)
                        return;
                if (n < 0) {
                        fwd_next(f);
                        return;
                }
                fwd_answer(f, buf, (size_t) n);
                return;
        }
        if (events & UV_WRITABLE) {
                if (f->sent == 0) {
                        int err = 0;
                        socklen_t l = sizeof(err);
                        if (getsockopt(f->fd, SOL_SOCKET, SO_ERROR, &err, &l) < 0 || err) {
                                fwd_next(f);
                                return;
                        }
                }
                uint8_t hdr[2] = {(uint8_t) (f->qlen >> 8), (uint8_t) f->qlen};
                struct iovec iov[2] = {{hdr, 2}, {f->q, f->qlen}};
                size_t total = 2 + f->qlen;
                while (f->sent < total) {
                        size_t off = f->sent;
                        struct iovec v[2];
                        int nv = 0;
                        if (off < 2) {
                                v[nv++] = (struct iovec){hdr + off, 2 - off};
                                v[nv++] = iov[1];
                        } else {
                                v[nv++] = (struct iovec){f->q + off - 2, f->qlen - (off - 2)};
                        }
                        struct msghdr mh = {.msg_iov = v, .msg_iovlen = (size_t) nv};
                        ssize_t n = sendmsg(f->fd, &mh, MSG_DONTWAIT | MSG_NOSIGNAL);
                        if (n < 0 && errno == EAGAIN)
                                return;
                        if (n <= 0) {
                                fwd_next(f);
                                return;
                        }
                        f->sent += (size_t) n;
                }
                uv_poll_start(&f->poll, UV_READABLE, fwd_poll_cb);
                return;
        }
        if (events & UV_READABLE) {
                if (!f->ans) {
                        f->ans_cap = 2 + EGRESS_DNS_MSG_MAX;
                        f->ans = malloc(f->ans_cap);
                        if (!f->ans) {
                                fwd_next(f);
                                return;
                        }
                }
                ssize_t n = recv(f->fd, f->ans + f->ans_len, f->ans_cap - f->ans_len, MSG_DONTWAIT);
                if (n < 0 && errno == EAGAIN)
                        return;
                if (n <= 0) {
                        fwd_next(f);
                        return;
                }
                f->ans_len += (size_t) n;
                if (f->ans_len >= 2) {
                        size_t want = (size_t) ((f->ans[0] << 8) | f->ans[1]);
                        if (f->ans_len >= 2 + want) {
                                fwd_answer(f, f->ans + 2, want);
                                if (!f->done)
                                        fwd_next(f);
                        }
                }
        }
}

static void fwd_timeout(uv_timer_t *t) {
        struct fwd *f = t->data;
        if (!f->done)
                fwd_next(f);
}

static void fwd_poll_reinit_closed(uv_handle_t *h) {
        struct fwd *f = h->data;
        f->poll_on = f->reiniting = false;
        if (f->done) {
                fwd_closed(h);
                return;
        }
        f->handles--;
        fwd_start(f);
}

static void fwd_start(struct fwd *f) {
        if (f->poll_on) {
                /* the poll handle watched the previous fd: close it first */
                f->reiniting = true;
                uv_close((uv_handle_t *) &f->poll, fwd_poll_reinit_closed);
                return;
        }
        const struct egress_upstream *u = &egress_cfg.upstreams[f->upstream];
        f->sent = f->ans_len = 0;
        uint16_t id;
        if (getrandom(&id, sizeof(id), 0) != sizeof(id))
                id = (uint16_t) (uintptr_t) f;
        f->id = id;
        f->q[0] = (uint8_t) (id >> 8);
        f->q[1] = (uint8_t) id;
        f->fd = socket(u->sa.ss_family,
                       (f->tcp ? SOCK_STREAM : SOCK_DGRAM) | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        if (f->fd < 0 || uv_poll_init_socket(loop, &f->poll, f->fd) < 0) {
                f->upstream = egress_cfg.n_upstreams;
                fwd_finish(f, NULL, 0);
                return;
        }
        f->poll_on = true;
        f->handles++;
        f->poll.data = f;
        if (connect(f->fd, (const struct sockaddr *) &u->sa, u->salen) < 0 &&
            errno != EINPROGRESS) {
                fwd_next(f);
                return;
        }
        if (!f->tcp) {
                if (send(f->fd, f->q, f->qlen, MSG_DONTWAIT) < 0) {
                        fwd_next(f);
                        return;
                }
                uv_poll_start(&f->poll, UV_READABLE, fwd_poll_cb);
        } else {
                uv_poll_start(&f->poll, UV_WRITABLE, fwd_poll_cb);
        }
        uv_timer_start(&f->timer, fwd_timeout, egress_cfg.dns_timeout_ms, 0);
}

static struct fwd *fwd_new(const uint8_t *q, size_t len, const struct egress_dns_query *pq,
                           const struct egress_event *ev, bool tcp) {
        struct fwd *f = calloc(1, sizeof(*f));
        if (!f)
                return NULL;
        f->q = malloc(len);
        if (!f->q) {
                free(f);
                return NULL;
        }
        memcpy(f->q, q, len);
        f->qlen = len;
        f->pq = *pq;
        f->client_id = pq->id;
        f->ev = *ev;
        f->tcp = tcp;
        f->fd = -EBADF;
        uv_timer_init(loop, &f->timer);
        f->timer.data = f;
        f->handles = 1;
        return f;
}

/* --- UDP server --- */

static void udp_cb(uv_poll_t *p, int status, int events) {
        int fd;
        uv_fileno((uv_handle_t *) p, &fd);
        for (int i = 0; i < 64; i++) {
                uint8_t buf[4096], out[4096];
                struct sockaddr_storage ss;
                socklen_t sl = sizeof(ss);
                ssize_t n = recvfrom(fd, buf, sizeof(buf), MSG_DONTWAIT | MSG_TRUNC,
                                     (struct sockaddr *) &ss, &sl);
                if (n < 0)
                        return;
                struct net_addr src;
                uint16_t sport;
                egress_sockaddr_to_net((struct sockaddr *) &ss, &src, &sport);
                struct egress_dns_query q;
                struct egress_event ev;
                size_t out_len = 0;
                size_t len = MIN((size_t) n, sizeof(buf));
                if ((size_t) n > sizeof(buf))
                        len = 0; /* truncated datagram: refuse as malformed */
                int r = decide(buf, len, &src, &q, out, sizeof(out), &out_len, &ev);
                if (r == 0 || n_udp_inflight >= UDP_INFLIGHT_MAX) {
                        if (r == 1) {
                                out_len = (size_t) egress_dns_error_answer(
                                        buf, &q, EGRESS_DNS_RCODE_SERVFAIL, out, sizeof(out));
                                egress_str_set(ev.reason, sizeof(ev.reason), "too many queries");
                        }
                        (void) sendto(fd, out, out_len, MSG_DONTWAIT, (struct sockaddr *) &ss, sl);
                        egress_event_send(&ev);
                        continue;
                }
                struct fwd *f = fwd_new(buf, len, &q, &ev, false);
                if (!f)
                        continue;
                f->dns_fd = fd;
                f->client = ss;
                f->client_len = sl;
                n_udp_inflight++;
                fwd_start(f);
        }
}

/* --- TCP server --- */

static void tc_closed(uv_handle_t *h) {
        struct tcp_client *tc = h->data;
        if (--tc->handles > 0)
                return;
        free(tc->out);
        free(tc);
}

static void tc_close(struct tcp_client *tc) {
        if (tc->closing)
                return;
        tc->closing = true;
        if (tc->fwd)
                tc->fwd->tc = NULL;
        uv_close((uv_handle_t *) &tc->poll, tc_closed);
        uv_close((uv_handle_t *) &tc->timer, tc_closed);
        tc->fd = safe_close(tc->fd);
        n_tcp_clients--;
}

static void tc_cb(uv_poll_t *p, int status, int events);

static void tc_process(struct tcp_client *tc) {
        if (tc->busy || tc->closing || tc->len < 2)
                return;
        size_t want = (size_t) ((tc->buf[0] << 8) | tc->buf[1]);
        if (tc->len < 2 + want)
                return;
        uint8_t out[512];
        struct egress_dns_query q;
        struct egress_event ev;
        size_t out_len = 0;
        uint8_t *big = malloc(EGRESS_DNS_MSG_MAX);
        if (!big) {
                tc_close(tc);
                return;
        }
        int r = decide(tc->buf + 2, want, &tc->src, &q, big, EGRESS_DNS_MSG_MAX, &out_len, &ev);
        (void) out;
        tc->busy = true;
        if (r == 0) {
                egress_event_send(&ev);
                tc_answer(tc, big, out_len);
                free(big);
        } else {
                free(big);
                struct fwd *f = fwd_new(tc->buf + 2, want, &q, &ev, true);
                if (!f) {
                        tc_close(tc);
                        return;
                }
                f->tc = tc;
                tc->fwd = f;
                fwd_start(f);
        }
        memmove(tc->buf, tc->buf + 2 + want, tc->len - 2 - want);
        tc->len -= 2 + want;
}

static void tc_answer(struct tcp_client *tc, const uint8_t *msg, size_t len) {
        free(tc->out);
        tc->out = malloc(2 + len);
        if (!tc->out) {
                tc_close(tc);
                return;
        }
        tc->out[0] = (uint8_t) (len >> 8);
        tc->out[1] = (uint8_t) len;
        memcpy(tc->out + 2, msg, len);
        tc->out_len = 2 + len;
        tc->out_sent = 0;
        uv_poll_start(&tc->poll, UV_READABLE | UV_WRITABLE, tc_cb);
}

static void tc_timeout(uv_timer_t *t) {
        tc_close(t->data);
}

static void tc_cb(uv_poll_t *p, int status, int events) {
        struct tcp_client *tc = p->data;
        if (tc->closing)
                return;
        if (status < 0) {
                tc_close(tc);
                return;
        }
        if ((events & UV_WRITABLE) && tc->out) {
                ssize_t n = send(tc->fd, tc->out + tc->out_sent, tc->out_len - tc->out_sent,
                                 MSG_DONTWAIT | MSG_NOSIGNAL);
                if (n < 0 && errno != EAGAIN) {
                        tc_close(tc);
                        return;
                }
                if (n > 0)
                        tc->out_sent += (size_t) n;
                if (tc->out_sent == tc->out_len) {
                        free(tc->out);
                        tc->out = NULL;
                        tc->busy = false;
                        uv_poll_start(&tc->poll, UV_READABLE, tc_cb);
                        uv_timer_start(&tc->timer, tc_timeout, TCP_IDLE_MS, 0);
                        tc_process(tc);
                }
        }
        if ((events & UV_READABLE) && !tc->closing) {
                if (tc->len == sizeof(tc->buf)) {
                        if (!tc->busy)
                                tc_close(tc);
                        return;
                }
                ssize_t n =
                        recv(tc->fd, tc->buf + tc->len, sizeof(tc->buf) - tc->len, MSG_DONTWAIT);
                if (n < 0 && errno == EAGAIN)
                        return;
                if (n <= 0) {
                        tc_close(tc);
                        return;
                }
                tc->len += (size_t) n;
                tc_process(tc);
        }
}

static void tcp_accept_cb(uv_poll_t *p, int status, int events) {
        int lfd;
        uv_fileno((uv_handle_t *) p, &lfd);
        for (int i = 0; i < 16; i++) {
                struct sockaddr_storage ss;
                socklen_t sl = sizeof(ss);
                int fd = accept4(lfd, (struct sockaddr *) &ss, &sl, SOCK_NONBLOCK | SOCK_CLOEXEC);
                if (fd < 0)
                        return;
                struct tcp_client *tc =
                        n_tcp_clients < TCP_CLIENTS_MAX ? calloc(1, sizeof(*tc)) : NULL;
                if (!tc) {
                        close(fd);
                        continue;
                }
                uint16_t port;
                egress_sockaddr_to_net((struct sockaddr *) &ss, &tc->src, &port);
                tc->fd = fd;
                uv_timer_init(loop, &tc->timer);
                tc->timer.data = tc;
                if (uv_poll_init_socket(loop, &tc->poll, fd) < 0) {
                        close(fd);
                        free(tc);
                        continue;
                }
                tc->poll.data = tc;
                tc->handles = 2;
                n_tcp_clients++;
                uv_poll_start(&tc->poll, UV_READABLE, tc_cb);
                uv_timer_start(&tc->timer, tc_timeout, TCP_IDLE_MS, 0);
        }
}

int egress_resolver_start(uv_loop_t *l, struct wr_err *e) {
        loop = l;
        for (size_t i = 0; i < egress_cfg.n_dns; i++) {
                int fd = egress_cfg.dns_fds[i], type = 0;
                socklen_t tl = sizeof(type);
                if (getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &tl) < 0)
                        return err_set(e, -errno, "--dns-fd %d: %m", fd);
                int r = uv_poll_init_socket(loop, &dns_polls[i], fd);
                if (r < 0)
                        return err_set(e, r, "--dns-fd %d: %s", fd, uv_strerror(r));
                uv_poll_start(&dns_polls[i], UV_READABLE,
                              type == SOCK_DGRAM ? udp_cb : tcp_accept_cb);
        }
        return 0;
}
