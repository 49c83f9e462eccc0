/* SPDX-License-Identifier: Apache-2.0 */
/* The TCP proxy: one libuv loop per worker thread, each polling every
 * listening fd. For each redirected connection:
 *
 *   accept -> original destination (SO_ORIGINAL_DST) -> sandbox by source
 *   (unknown: reset) -> first bytes (TLS ClientHello: SNI; HTTP head: Host;
 *   neither, or nothing within first_byte_ms: raw TCP) -> decide
 *   (net_policy_decide; a name is resolved host-side through c-ares and
 *   every answer checked) -> dial exactly the checked address on the
 *   original port -> send the buffered bytes -> relay both ways with
 *   splice(2) through a pipe per direction -> one EVENT at the end.
 *
 * Refusals: an HTTP status for HTTP (400, 403, 405, 421, 502), a reset
 * for TLS and raw TCP. A connection object lives until its three handles
 * (client poll, upstream poll, timer) are closed; it is never freed from
 * inside one of its own callbacks but from the last close callback. */

#include <ares.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/netfilter_ipv4.h>
#include <linux/netfilter_ipv6/ip6_tables.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include <uv.h>

#include "basic/log.h"
#include "egress/egress.h"
#include "egress/http-stream.h"
#include "egress/intercept.h"

#define HEAD_CAP 65536u
#define PIPE_SIZE (1u << 20)
#define PUMP_ROUNDS 16

struct worker;

struct ares_watch {
        uv_poll_t poll;
        struct worker *w;
        ares_socket_t fd;
        struct ares_watch *next;
};

#define ANSWERS_MAX 32
#define CACHE_SIZE 128
#define CACHE_TTL_MAX_MS 30000

/* A worker's cache of host-side resolutions, kept for the answers' TTL
 * (at most CACHE_TTL_MAX_MS; TTL 0 is never cached). Cached answers are
 * decided on again for every connection, like fresh ones. */
struct cache_entry {
        char name[NET_HOST_MAX + 1];
        uint64_t expires; /* uv_now() ms; 0 = free */
        size_t n;
        struct net_addr addrs[ANSWERS_MAX];
};

struct conn;

/* A lookup in flight on a worker, and the connections waiting for it: a
 * burst of connections to one uncached name asks c-ares once (an A and an
 * AAAA query), not once per connection. Each waiter is decided on the
 * shared answers as on its own. */
struct lookup {
        struct worker *w;
        struct lookup *next;
        struct conn *waiters; /* through conn.wait_next */
        char name[NET_HOST_MAX + 1];
};

struct worker {
        unsigned idx;
        struct cache_entry cache[CACHE_SIZE];
        unsigned cache_next;
        struct lookup *lookups; /* in flight (lookup.next) */
        uv_loop_t loop;
        pthread_t thread;
        ares_channel ares;
        uv_timer_t ares_timer;
        uv_poll_t listen[EGRESS_FDS_MAX];
        struct ares_watch *watches;
};

enum conn_state {
        C_HEAD = 1,
        C_RESOLVING,
        C_CONNECTING,
        C_SENDING,
        C_RELAY,
        C_CLOSING,
};

enum conn_proto {
        P_NONE = 0,
        P_TLS,
        P_HTTP,
        P_RAW,
};

struct dir {
        int pipe[2];
        size_t pipe_size; /* what the pipe holds at most */
        size_t in_pipe;
        bool eof, shut;
        bool want_read, want_write;
        int lowat; /* SO_RCVLOWAT of the read side (0: the default, 1 byte) */
        uint64_t bytes;
};

#define HTTP_IBUF 65536u
#define HTTP_OBUF (2 * HEAD_CAP)

/* The client -> upstream direction of a plain-HTTP connection: copied
 * through user space (downloads still splice) so that every later request
 * head on the kept-alive connection is parsed and must name the first
 * request's host (SECURITY.md, egress rule 6). */
struct http_up {
        struct egress_http_body body;
        bool has_host;
        struct net_host host; /* the first request's Host */
        size_t ilen, ipos;    /* read from the client, not yet processed */
        size_t hlen;          /* head being gathered */
        size_t olen, osent;   /* queued for upstream */
        uint8_t ibuf[HTTP_IBUF];
        uint8_t hbuf[HEAD_CAP];
        uint8_t obuf[HTTP_OBUF];
};

struct conn {
        struct worker *w;
        struct http_up *hu; /* plain HTTP only (NULL: the up direction is spliced) */
        enum conn_state state;
        enum conn_proto proto;
        int cfd, ufd;
        uv_poll_t cpoll, upoll;
        uv_timer_t timer;
        int handles;    /* open handles; freed when the last one closes */
        bool resolving; /* a c-ares query (or a lookup's waiter list) holds a pointer to us */
        struct conn *wait_next; /* the next waiter of our lookup */
        bool upoll_on;
        int cmask, umask; /* relay: the armed poll masks (-1: not armed by relay yet) */
        struct egress_sb *sb;
        struct net_addr src, odst, dial;
        uint16_t oport;
        uint8_t *buf;
        size_t len, cap, sent;
        struct net_host name; /* the name to resolve (NAME) */
        char sni[EGRESS_SNI_MAX], host[EGRESS_HOST_MAX];
        struct egress_event ev;
        uint64_t t0;
        bool decided;
        bool intercept;    /* TLS to a host with rules or credentials (intercept.c) */
        size_t ssh_next;   /* managed SSH: the next destination to try (ssh_exempt) */
        struct dir up, dn; /* up: client -> upstream */
};

static struct worker *workers;

static const char http_fmt[] = "HTTP/1.1 %d %s\r\nContent-Type: text/plain\r\nConnection: close\r\n"
                               "Content-Length: %zu\r\n\r\n%s";

static atomic_size_t pipe_bytes; /* what this process's relay pipes may hold */

static void conn_close(struct conn *c, bool reset);
static void decide_raw(struct conn *c);

static void handle_closed(uv_handle_t *h) {
        struct conn *c = h->data;
        if (--c->handles > 0 || c->resolving)
                return;
        free(c->buf);
        free(c);
}

static void conn_free_if_done(struct conn *c) {
        if (c->handles == 0 && !c->resolving) {
                free(c->buf);
                free(c);
        }
}

/* The sandbox-facing socket's congestion control: Reno. That hop is a veth
 * on this host, with no queue to probe and nothing to pace; the host's
 * default may be BBR, whose pacing (transmits from an hrtimer, and TSQ
 * completions on whichever CPU freed the skb) made the proxy -> sandbox
 * flow reorder across CPUs, retransmit spuriously and leave CPUs idle on a
 * 2-vCPU host. With Reno, in downloads alternating with and without it:
 * 73-88% of NAT's throughput instead of 64-73%, and less CPU in the
 * sandbox's reader (docs/network.md, "Performance"). Reno is always
 * permitted (no capability needed); a failure keeps the default. The
 * upstream socket keeps the host's choice. */
static void sandbox_side_cc(int fd) {
        static const char reno[] = "reno";
        (void) setsockopt(fd, IPPROTO_TCP, TCP_CONGESTION, reno, sizeof(reno) - 1);
}

/* At most this much not yet sent on the sandbox-facing socket. Without a
 * bound the relay queued megabytes there, and whenever the sandbox's
 * reader fell behind (its window full) each of its reads opened the window
 * and the transmit it clocked out ran in the reader's own softirq: a
 * zero-window regime where the reader's CPU per GiB doubles and stays so
 * for the whole download (proxied downloads were bimodal, ~1/2 or ~1/1 of
 * NAT's rate). With the queue bounded the relay sends the rest from its
 * own thread. A/B in one warren-egress (the option on even client ports),
 * 1 GiB downloads, quiet 2-vCPU VM: 102 % of NAT vs 69 % without (20
 * each), with two CPU hogs beside: 127 % vs 118 %; 16-64 KiB did as well
 * quiet, 512 KiB no better than none (docs/network.md, "Performance"). */
#define SANDBOX_NOTSENT_LOWAT (128 << 10)

static void sandbox_side_notsent(int fd) {
        int v = SANDBOX_NOTSENT_LOWAT;
        (void) setsockopt(fd, IPPROTO_TCP, TCP_NOTSENT_LOWAT, &v, sizeof(v));
}

static void set_linger0(int fd) {
        struct linger l = {.l_onoff = 1, .l_linger = 0};
        (void) setsockopt(fd, SOL_SOCKET, SO_LINGER, &l, sizeof(l));
}

static void emit(struct conn *c) {
        if (c->ev.kind == 0)
                return;
        c->ev.bytes_up = c->up.bytes;
        c->ev.bytes_down = c->dn.bytes;
        c->ev.duration_ns = egress_now_ns() - c->t0;
        egress_str_set(c->ev.sni, sizeof(c->ev.sni), c->sni);
        egress_str_set(c->ev.host, sizeof(c->ev.host), c->host);
        egress_event_send(&c->ev);
        c->ev.kind = 0;
}

/* End the connection: one event, every fd closed (reset: RST to both). */
static void conn_close(struct conn *c, bool reset) {
        if (c->state == C_CLOSING)
                return;
        c->state = C_CLOSING;
        emit(c);
        if (reset) {
                set_linger0(c->cfd);
                if (c->ufd >= 0)
                        set_linger0(c->ufd);
        }
        uv_close((uv_handle_t *) &c->cpoll, handle_closed);
        uv_close((uv_handle_t *) &c->timer, handle_closed);
        if (c->upoll_on)
                uv_close((uv_handle_t *) &c->upoll, handle_closed);
        c->cfd = safe_close(c->cfd);
        c->ufd = safe_close(c->ufd);
        for (int i = 0; i < 2; i++) {
                c->up.pipe[i] = safe_close(c->up.pipe[i]);
                c->dn.pipe[i] = safe_close(c->dn.pipe[i]);
        }
        atomic_fetch_sub(&pipe_bytes, c->up.pipe_size + c->dn.pipe_size);
        c->up.pipe_size = c->dn.pipe_size = 0;
        egress_sb_unref(c->sb);
        c->sb = NULL;
        free(c->hu);
        c->hu = NULL;
        atomic_fetch_sub(&egress_nconns, 1);
}

static void set_reason(struct conn *c, enum net_verdict v, const char *rule, const char *reason) {
        c->ev.verdict = (uint8_t) v;
        egress_str_set(c->ev.rule, sizeof(c->ev.rule), rule);
        egress_str_set(c->ev.reason, sizeof(c->ev.reason), reason);
}

/* Refuse: an HTTP status when the connection spoke HTTP, a reset
 * otherwise. */
static void refuse(struct conn *c, int status, const char *rule, const char *reason) {
        set_reason(c, NET_VERDICT_DENY, rule, reason);
        log_debug("egress: refuse %s (%s): %s", c->sb ? c->sb->id : "?", rule, reason);
        if (c->proto == P_HTTP && status) {
                static const struct {
                        int code;
                        const char *text;
                } texts[] = {{400, "Bad Request"},        {403, "Forbidden"},
                             {405, "Method Not Allowed"}, {421, "Misdirected Request"},
                             {502, "Bad Gateway"},        {504, "Gateway Timeout"}};
                const char *t = "Error";
                for (size_t i = 0; i < ELEMENTSOF(texts); i++)
                        if (texts[i].code == status)
                                t = texts[i].text;
                char body[512], msg[1024];
                snprintf(body, sizeof(body), "warren egress: %s (%s)\n", reason, rule);
                int n = snprintf(msg, sizeof(msg), http_fmt, status, t, strlen(body), body);
                if (n > 0)
                        (void) !send(c->cfd, msg, (size_t) MIN(n, (int) sizeof(msg) - 1),
                                     MSG_NOSIGNAL | MSG_DONTWAIT);
                shutdown(c->cfd, SHUT_WR);
                conn_close(c, false);
                return;
        }
        conn_close(c, true);
}

static void on_timeout(uv_timer_t *t) {
        struct conn *c = t->data;
        switch (c->state) {
        case C_HEAD:
                if (c->len == 0) {
                        /* nothing sent: a server-first protocol, decided as raw TCP */
                        decide_raw(c);
                        return;
                }
                refuse(c, 400, "head", "timed out reading the first bytes");
                return;
        case C_RESOLVING:
                refuse(c, 504, "resolve", "name resolution timed out");
                return;
        case C_CONNECTING:
        case C_SENDING:
                refuse(c, 504, "dial", "upstream connect timed out");
                return;
        default:
                return;
        }
}

/* --- relay --- */

/* Wakeups of a bulk transfer. Woken for every segment that arrives, the
 * relay of one download ran ~16,000 times per GiB, each wakeup a context
 * switch on a host whose CPUs are busy with the sender and the reader. In
 * a bulk transfer (a wakeup found at least BULK_READ bytes) the read
 * side's SO_RCVLOWAT asks the kernel to wake us only once RELAY_LOWAT
 * bytes wait (or at EOF, or when its buffer fills); a wakeup that finds
 * under SMALL_READ, and the relay timer (no wakeup for RELAY_LOWAT_MS: the peer paused
 * with less than that sent, e.g. a response smaller than the low-water
 * mark after a bulk phase), set it back to 1 byte. */
#define BULK_READ (128u << 10)
#define SMALL_READ (16u << 10)
#define RELAY_LOWAT (256 << 10)
#define RELAY_LOWAT_MS 2

static void set_lowat(int fd, struct dir *d, int lowat) {
        if (d->lowat == lowat)
                return;
        int v = lowat ? lowat : 1;
        if (setsockopt(fd, SOL_SOCKET, SO_RCVLOWAT, &v, sizeof(v)) == 0)
                d->lowat = lowat;
}

/* Move what can be moved from -> pipe -> to without blocking. Reading and
 * writing overlap: the pipe is refilled while it still holds data. Sets
 * want_read / want_write for the poll masks; a negative errno on a socket
 * error. */
static int pump(int from, int to, struct dir *d) {
        bool read_again = false;
        size_t got = 0;
        for (int round = 0; round < PUMP_ROUNDS; round++) {
                bool progress = false;
                read_again = false;
                if (!d->eof && d->in_pipe < d->pipe_size) {
                        ssize_t n = splice(from, NULL, d->pipe[1], NULL, d->pipe_size - d->in_pipe,
                                           SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
                        if (n > 0) {
                                d->in_pipe += (size_t) n;
                                got += (size_t) n;
                                progress = true;
                        } else if (n == 0) {
                                d->eof = true;
                                progress = true;
                        } else if (errno == EAGAIN || errno == EINTR) {
                                read_again = true;
                        } else {
                                return -errno;
                        }
                }
                if (d->in_pipe > 0) {
                        ssize_t n = splice(d->pipe[0], NULL, to, NULL, d->in_pipe,
                                           SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
                        if (n > 0) {
                                d->in_pipe -= (size_t) n;
                                d->bytes += (uint64_t) n;
                                progress = true;
                        } else if (n == 0 || (errno != EAGAIN && errno != EINTR)) {
                                return n < 0 ? -errno : -EPIPE;
                        }
                }
                if (d->eof && d->in_pipe == 0 && !d->shut) {
                        shutdown(to, SHUT_WR);
                        d->shut = true;
                }
                if (!progress)
                        break;
        }
        if (d->eof)
                d->lowat = 0;
        else if (got >= BULK_READ)
                set_lowat(from, d, RELAY_LOWAT);
        else if (got > 0 && got < SMALL_READ)
                set_lowat(from, d, 0);
        d->want_write = d->in_pipe > 0;
        /* EAGAIN with data in the pipe may mean the pipe is full: then wait
         * for the writer to drain it instead of spinning on a readable
         * socket */
        d->want_read = !d->eof && d->in_pipe < d->pipe_size && (d->in_pipe == 0 || !read_again);
        return 0;
}

static bool same_host(const struct http_up *hu, const struct net_http_head *h) {
        if (hu->has_host != h->has_host)
                return false;
        if (!h->has_host)
                return true;
        if (hu->host.kind != h->host.kind)
                return false;
        return h->host.kind == NET_HOST_NAME ? strcmp(hu->host.name, h->host.name) == 0
                                             : net_addr_equal(&hu->host.addr, &h->host.addr);
}

/* A later request head gathered in hu->hbuf: 1 complete and accepted (its
 * bytes queued, its body framing started), 0 incomplete, negative when the
 * connection must end (the event says why). */
static int http_next_head(struct conn *c) {
        struct http_up *hu = c->hu;
        struct net_http_head *h = malloc(sizeof(*h));
        if (!h)
                return -ENOMEM;
        struct wr_err e = {0};
        int r = net_http_head_parse((const char *) hu->hbuf, hu->hlen, h, &e);
        if (r == -EAGAIN && hu->hlen < HEAD_CAP) {
                free(h);
                return 0;
        }
        const char *why = NULL;
        if (r < 0)
                why = "a later request head is malformed";
        else if (h->trace)
                why = "a later request is TRACE/TRACK";
        else if (!same_host(hu, h))
                why = "a later request names another host";
        else if (h->upgrade || h->form == NET_HTTP_FORM_AUTHORITY)
                why = "a later request upgrades or CONNECTs";
        if (why) {
                if (r == 0 && h->has_host)
                        snprintf(c->host, sizeof(c->host), "%s", h->host.name);
                free(h);
                set_reason(c, NET_VERDICT_DENY, "http", why);
                return -EPERM;
        }
        size_t head_len = h->head_len;
        egress_http_body_start(&hu->body, h->chunked,
                               h->has_content_length ? h->content_length : 0);
        free(h);
        memcpy(hu->obuf + hu->olen, hu->hbuf, head_len);
        hu->olen += head_len;
        /* bytes gathered past the head go back to the input */
        size_t extra = hu->hlen - head_len;
        hu->ipos -= extra;
        hu->hlen = 0;
        return 1;
}

/* The up direction of a plain-HTTP connection (see struct http_up). */
static int http_up_pump(struct conn *c) {
        struct http_up *hu = c->hu;
        struct dir *d = &c->up;
        for (int round = 0; round < PUMP_ROUNDS; round++) {
                bool progress = false;
                if (hu->osent < hu->olen) {
                        ssize_t n = send(c->ufd, hu->obuf + hu->osent, hu->olen - hu->osent,
                                         MSG_DONTWAIT | MSG_NOSIGNAL);
                        if (n > 0) {
                                hu->osent += (size_t) n;
                                d->bytes += (uint64_t) n;
                                progress = true;
                        } else if (n == 0 || (errno != EAGAIN && errno != EINTR)) {
                                return n < 0 ? -errno : -EPIPE;
                        }
                }
                if (hu->osent == hu->olen)
                        hu->olen = hu->osent = 0;
                while (hu->ipos < hu->ilen && hu->olen < HEAD_CAP) {
                        size_t avail = hu->ilen - hu->ipos;
                        if (hu->body.state != EGRESS_HTTP_AT_HEAD) {
                                size_t used, n = MIN(avail, HTTP_OBUF - hu->olen);
                                if (egress_http_body_scan(&hu->body, hu->ibuf + hu->ipos, n,
                                                          &used) < 0) {
                                        set_reason(c, NET_VERDICT_DENY, "http",
                                                   "malformed chunked request body");
                                        return -EBADMSG;
                                }
                                memcpy(hu->obuf + hu->olen, hu->ibuf + hu->ipos, used);
                                hu->olen += used;
                                hu->ipos += used;
                        } else {
                                size_t n = MIN(avail, HEAD_CAP - hu->hlen);
                                memcpy(hu->hbuf + hu->hlen, hu->ibuf + hu->ipos, n);
                                hu->hlen += n;
                                hu->ipos += n;
                                int r = http_next_head(c);
                                if (r < 0)
                                        return r;
                        }
                        progress = true;
                }
                if (hu->ipos == hu->ilen && !d->eof && hu->olen < HEAD_CAP) {
                        ssize_t n = recv(c->cfd, hu->ibuf, HTTP_IBUF, MSG_DONTWAIT);
                        if (n > 0) {
                                hu->ilen = (size_t) n;
                                hu->ipos = 0;
                                progress = true;
                        } else if (n == 0) {
                                d->eof = true;
                                progress = true;
                        } else if (errno != EAGAIN && errno != EINTR) {
                                return -errno;
                        }
                }
                if (d->eof && hu->olen == 0 && hu->ipos == hu->ilen && !d->shut) {
                        shutdown(c->ufd, SHUT_WR);
                        d->shut = true;
                }
                if (!progress)
                        break;
        }
        /* Input read but not yet framed (the rounds ran out while every
         * round made progress) waits on upstream being writable: at once
         * when nothing is queued. Waiting on neither side stalled an
         * upload for good (the client's bytes sat in the socket, no poll
         * was armed to read them). */
        d->want_write = hu->olen > hu->osent || hu->ipos < hu->ilen;
        d->want_read = !d->eof && hu->ipos == hu->ilen && hu->olen < HEAD_CAP;
        return 0;
}

static void relay_cb(uv_poll_t *p, int status, int events);

/* (Re)arm a relay poll only when its mask changes: libuv's uv_poll_start
 * and uv_poll_stop each take the fd out of the epoll set (EPOLL_CTL_DEL,
 * then an ADD on the next loop turn), two syscalls per fd per wakeup for
 * nothing when the mask is the same (the poll is level-triggered). */
static void arm(uv_poll_t *p, int *cur, int want) {
        if (want == *cur)
                return;
        if (want)
                uv_poll_start(p, want, relay_cb);
        else
                uv_poll_stop(p);
        *cur = want;
}

static void relay(struct conn *c);

static void lowat_timeout(uv_timer_t *t) {
        struct conn *c = t->data;
        if (c->state != C_RELAY)
                return;
        set_lowat(c->cfd, &c->up, 0);
        set_lowat(c->ufd, &c->dn, 0);
        relay(c);
}

static void relay(struct conn *c) {
        int r = c->hu ? http_up_pump(c) : pump(c->cfd, c->ufd, &c->up);
        if (r >= 0)
                r = pump(c->ufd, c->cfd, &c->dn);
        if (r < 0) {
                conn_close(c, true);
                return;
        }
        if (c->up.shut && c->dn.shut) {
                conn_close(c, false);
                return;
        }
        int ce = (c->up.want_read ? UV_READABLE : 0) | (c->dn.want_write ? UV_WRITABLE : 0);
        int ue = (c->dn.want_read ? UV_READABLE : 0) | (c->up.want_write ? UV_WRITABLE : 0);
        arm(&c->cpoll, &c->cmask, ce);
        arm(&c->upoll, &c->umask, ue);
        if ((c->up.lowat && c->up.want_read) || (c->dn.lowat && c->dn.want_read))
                uv_timer_start(&c->timer, lowat_timeout, RELAY_LOWAT_MS, 0);
        else if (c->up.lowat || c->dn.lowat)
                uv_timer_stop(&c->timer);
}

static void relay_cb(uv_poll_t *p, int status, int events) {
        struct conn *c = p->data;
        if (c->state != C_RELAY)
                return;
        relay(c);
}

/* Pipe sizes. A pipe's pages count against its user's budget
 * (fs.pipe-user-pages-soft, 64 MiB by default, shared by every process of
 * the user): past it F_SETPIPE_SZ fails and new pipes get two pages (8 KiB),
 * which turns a transfer into thousands of tiny splices. Sizing by the
 * number of open connections overshot it: connections arrive one by one,
 * so the first few dozen of a burst all took 1 MiB and the rest got 8 KiB
 * pipes (92 of 200 concurrent downloads). So the process keeps what its
 * pipes may hold under PIPE_BUDGET: a new pipe gets a quarter of what is
 * left, rounded down to a power of two, between 64 KiB and 1 MiB (one
 * connection: 1 MiB; 200 at once: 13 at 1 MiB, 177 at 64 KiB, ~27 MiB in
 * all; past ~770 relaying at once the 64 KiB pipes alone exceed the default
 * soft limit). A single download is no faster with pipes over 256 KiB. */
#define PIPE_BUDGET (16u << 20)
#define PIPE_MIN 65536u

static size_t pipe_size_for(void) {
        size_t used = atomic_load(&pipe_bytes);
        size_t want = used < PIPE_BUDGET ? (PIPE_BUDGET - used) / 4 : 0, sz = PIPE_MIN;
        while (sz * 2 <= want && sz < PIPE_SIZE)
                sz <<= 1;
        return sz;
}

static int make_pipe(struct dir *d) {
        if (pipe2(d->pipe, O_CLOEXEC | O_NONBLOCK) < 0)
                return -errno;
        int sz = fcntl(d->pipe[1], F_SETPIPE_SZ, (int) pipe_size_for());
        if (sz < 0)
                sz = fcntl(d->pipe[1], F_GETPIPE_SZ);
        d->pipe_size = sz > 0 ? (size_t) sz : 4096;
        atomic_fetch_add(&pipe_bytes, d->pipe_size);
        return 0;
}

static void start_relay(struct conn *c) {
        uv_timer_stop(&c->timer);
        if ((!c->hu && make_pipe(&c->up) < 0) || make_pipe(&c->dn) < 0) {
                refuse(c, 502, "relay", "out of pipes");
                return;
        }
        c->state = C_RELAY;
        c->cmask = c->umask = -1;
        relay(c);
}

/* --- dial --- */

static void send_head_cb(uv_poll_t *p, int status, int events);

static void send_head(struct conn *c) {
        while (c->sent < c->len) {
                ssize_t n = send(c->ufd, c->buf + c->sent, c->len - c->sent,
                                 MSG_NOSIGNAL | MSG_DONTWAIT);
                if (n < 0 && errno == EAGAIN) {
                        uv_poll_start(&c->upoll, UV_WRITABLE, send_head_cb);
                        return;
                }
                if (n <= 0) {
                        refuse(c, 502, "dial", "upstream closed");
                        return;
                }
                c->sent += (size_t) n;
                c->up.bytes += (uint64_t) n;
        }
        free(c->buf);
        c->buf = NULL;
        start_relay(c);
}

static void send_head_cb(uv_poll_t *p, int status, int events) {
        struct conn *c = p->data;
        if (c->state == C_SENDING)
                send_head(c);
}

static void connect_cb(uv_poll_t *p, int status, int events) {
        struct conn *c = p->data;
        if (c->state != C_CONNECTING)
                return;
        int err = 0;
        socklen_t l = sizeof(err);
        if (status < 0 || getsockopt(c->ufd, SOL_SOCKET, SO_ERROR, &err, &l) < 0 || err) {
                refuse(c, 502, "dial", "upstream connect failed");
                return;
        }
        uv_poll_stop(&c->upoll);
        c->state = C_SENDING;
        send_head(c);
}

/* Hand a decided connection to intercept.c (its own thread, its own dup
 * of the sandbox's socket); this object ends here without an event. */
static void intercept_handoff(struct conn *c) {
        struct egress_intercept_conn a = {.pre = c->buf,
                                          .pre_len = c->len,
                                          .sb = c->sb,
                                          .port = c->oport,
                                          .dial = c->dial,
                                          .ev = c->ev,
                                          .t0 = c->t0};
        snprintf(a.host, sizeof(a.host), "%s", c->name.name);
        egress_addr_from_net(&a.ev.dialed, &c->dial);
        a.ev.port = c->oport;
        egress_str_set(a.ev.sni, sizeof(a.ev.sni), c->sni);
        egress_str_set(a.ev.host, sizeof(a.ev.host), c->name.name);
        a.cfd = fcntl(c->cfd, F_DUPFD_CLOEXEC, 3);
        if (a.cfd < 0 || egress_intercept_start(&a) < 0) {
                if (a.cfd >= 0)
                        close(a.cfd);
                refuse(c, 0, "intercept", "cannot start the interception");
                return;
        }
        c->buf = NULL;
        c->sb = NULL;
        c->ev.kind = 0;
        conn_close(c, false);
}

static void dial(struct conn *c) {
        if (c->intercept) {
                intercept_handoff(c);
                return;
        }
        struct sockaddr_storage ss;
        socklen_t sl = egress_net_to_sockaddr(&c->dial, c->oport, &ss);
        egress_addr_from_net(&c->ev.dialed, &c->dial);
        c->ev.port = c->oport;
        int fd = socket(c->dial.family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        if (fd < 0) {
                refuse(c, 502, "dial", "socket failed");
                return;
        }
        int one = 1;
        (void) setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
        c->ufd = fd;
        if (uv_poll_init(&c->w->loop, &c->upoll, fd) < 0) {
                refuse(c, 502, "dial", "poll failed");
                return;
        }
        c->upoll.data = c;
        c->upoll_on = true;
        c->handles++;
        c->state = C_CONNECTING;
        uv_timer_start(&c->timer, on_timeout, egress_cfg.connect_timeout_ms, 0);
        if (connect(fd, (struct sockaddr *) &ss, sl) < 0 && errno != EINPROGRESS) {
                refuse(c, 502, "dial", "upstream connect failed");
                return;
        }
        uv_poll_start(&c->upoll, UV_WRITABLE, connect_cb);
}

/* --- decisions --- */

static int decide_one(struct conn *c, const char *host, const struct net_addr *a,
                      struct net_decision *d) {
        struct net_dest dest = {.host = host, .addr = *a, .port = c->oport};
        if (c->sb->mode == EGRESS_MODE_ENFORCE)
                return net_policy_decide(c->sb->policy, &dest, &egress_cfg.host_deny, d);
        return net_policy_decide_open(&dest, &egress_cfg.host_deny, d);
}

/* Decide by the address alone (raw TCP, TLS without SNI, IP literals). */
static void decide_addr(struct conn *c) {
        struct net_decision d;
        c->decided = true;
        decide_one(c, NULL, &c->odst, &d);
        if (d.verdict != NET_VERDICT_ALLOW) {
                egress_addr_from_net(&c->ev.dialed, &c->odst);
                c->ev.port = c->oport;
                refuse(c, 403, d.rule, d.reason);
                return;
        }
        set_reason(c, NET_VERDICT_ALLOW, d.rule, d.reason);
        c->dial = c->odst;
        dial(c);
}

/* The connection named an IP literal (SNI or Host): that address is
 * decided on too (169.254.169.254 in any notation is refused whatever the
 * sandbox dialed), and it must be the address dialed (else 421). */
static void decide_literal(struct conn *c, const struct net_addr *lit) {
        struct net_decision d;
        struct net_addr a, b;
        decide_one(c, NULL, lit, &d);
        if (d.verdict != NET_VERDICT_ALLOW) {
                c->decided = true;
                egress_addr_from_net(&c->ev.dialed, lit);
                c->ev.port = c->oport;
                refuse(c, 403, d.rule, d.reason);
                return;
        }
        net_addr_normalize(lit, &a);
        net_addr_normalize(&c->odst, &b);
        if (!net_addr_equal(&a, &b)) {
                c->decided = true;
                refuse(c, 421, "literal", "names another address than the one dialed");
                return;
        }
        decide_addr(c);
}

/* A c-ares answer for c arrived: false when c still waits for it; true
 * (res freed, c freed when nothing else holds it) when c moved on. */
static bool resolve_stale(struct conn *c, struct ares_addrinfo *res) {
        c->resolving = false;
        if (c->state == C_RESOLVING)
                return false;
        if (res)
                ares_freeaddrinfo(res);
        conn_free_if_done(c);
        return true;
}

/* --- managed SSH under a policy (net_ssh_dest) --- */

static bool ssh_exempt(struct conn *c);

static bool ssh_addr_ok(struct conn *c, const struct net_addr *a) {
        struct net_addr x, y;
        net_addr_normalize(a, &x);
        net_addr_normalize(&c->odst, &y);
        if (!net_addr_equal(&x, &y))
                return false;
        /* the built-in deny list and the host's own addresses still hold */
        struct net_decision d;
        struct net_dest dest = {.addr = c->odst, .port = c->oport};
        net_policy_decide_open(&dest, &egress_cfg.host_deny, &d);
        return d.verdict == NET_VERDICT_ALLOW;
}

static void ssh_allow(struct conn *c) {
        c->decided = true;
        set_reason(c, NET_VERDICT_ALLOW, "managed_ssh",
                   "a managed SSH destination (exempt from the policy)");
        c->dial = c->odst;
        dial(c);
}

static void ssh_resolved_cb(void *arg, int status, int timeouts, struct ares_addrinfo *res) {
        struct conn *c = arg;
        if (resolve_stale(c, res))
                return;
        bool ok = false;
        for (struct ares_addrinfo_node *nd = res && status == ARES_SUCCESS ? res->nodes : NULL;
             nd && !ok; nd = nd->ai_next) {
                struct net_addr a;
                uint16_t port;
                if (nd->ai_family != AF_INET && nd->ai_family != AF_INET6)
                        continue;
                egress_sockaddr_to_net(nd->ai_addr, &a, &port);
                ok = ssh_addr_ok(c, &a);
        }
        if (res)
                ares_freeaddrinfo(res);
        if (ok)
                ssh_allow(c);
        else if (!ssh_exempt(c))
                decide_addr(c);
}

/* Raw TCP on a managed SSH destination's port: allowed ahead of the policy
 * when the dialed address is the destination's (an address as given, or
 * one of its name's answers, resolved host-side). True when this took the
 * connection (decided, or resolving); false: decide as usual. */
static bool ssh_exempt(struct conn *c) {
        const struct net_rules *rs = c->sb->rules;
        if (c->sb->mode != EGRESS_MODE_ENFORCE || !rs)
                return false;
        while (c->ssh_next < rs->n_ssh) {
                const struct net_ssh_dest *d = &rs->ssh[c->ssh_next++];
                if (d->port != c->oport)
                        continue;
                if (d->host.kind != NET_HOST_NAME) {
                        if (ssh_addr_ok(c, &d->host.addr)) {
                                ssh_allow(c);
                                return true;
                        }
                        continue;
                }
                snprintf(c->host, sizeof(c->host), "%s", d->host.name);
                char fq[NET_HOST_MAX + 2];
                snprintf(fq, sizeof(fq), "%s.", d->host.name);
                struct ares_addrinfo_hints hints = {.ai_family = AF_UNSPEC,
                                                    .ai_flags = ARES_AI_NOSORT};
                c->state = C_RESOLVING;
                c->resolving = true;
                uv_timer_start(&c->timer, on_timeout, egress_cfg.connect_timeout_ms, 0);
                ares_getaddrinfo(c->w->ares, fq, NULL, &hints, ssh_resolved_cb, c);
                return true;
        }
        c->host[0] = 0;
        return false;
}

static void decide_raw(struct conn *c) {
        uv_poll_stop(&c->cpoll);
        c->proto = P_RAW;
        if (!ssh_exempt(c))
                decide_addr(c);
}

/* Decide on every answer for the name; dial one that passed (the original
 * family first), never the original destination. Any refused answer
 * refuses the connection (a name that also points at loopback or the
 * metadata address is not trusted for its other answers either). */
static void decide_answers(struct conn *c, const struct net_addr *addrs, size_t n) {
        bool have = false;
        struct net_decision ok = {0};
        for (size_t i = 0; i < n; i++) {
                struct net_decision d;
                decide_one(c, c->name.name, &addrs[i], &d);
                if (d.verdict != NET_VERDICT_ALLOW) {
                        egress_addr_from_net(&c->ev.dialed, &addrs[i]);
                        c->ev.port = c->oport;
                        char reason[EGRESS_REASON_MAX];
                        snprintf(reason, sizeof(reason), "an answer is refused: %s", d.reason);
                        refuse(c, 403, d.rule, reason);
                        return;
                }
                if (!have ||
                    (c->dial.family != c->odst.family && addrs[i].family == c->odst.family)) {
                        if (!have)
                                ok = d;
                        c->dial = addrs[i];
                        have = true;
                }
        }
        if (!have) {
                refuse(c, 502, "resolve", "no usable address");
                return;
        }
        set_reason(c, NET_VERDICT_ALLOW, ok.rule, ok.reason);
        dial(c);
}

static const struct cache_entry *cache_find(struct worker *w, const char *name) {
        uint64_t now = uv_now(&w->loop);
        for (size_t i = 0; i < CACHE_SIZE; i++)
                if (w->cache[i].expires > now && strcmp(w->cache[i].name, name) == 0)
                        return &w->cache[i];
        return NULL;
}

static void cache_put(struct worker *w, const char *name, const struct net_addr *addrs, size_t n,
                      unsigned ttl_s) {
        if (ttl_s == 0 || n == 0)
                return;
        struct cache_entry *ce = &w->cache[w->cache_next++ % CACHE_SIZE];
        snprintf(ce->name, sizeof(ce->name), "%s", name);
        ce->n = n;
        memcpy(ce->addrs, addrs, n * sizeof(addrs[0]));
        ce->expires = uv_now(&w->loop) + MIN((uint64_t) ttl_s * 1000, (uint64_t) CACHE_TTL_MAX_MS);
}

static void resolved_cb(void *arg, int status, int timeouts, struct ares_addrinfo *res) {
        struct lookup *l = arg;
        struct worker *w = l->w;
        for (struct lookup **p = &w->lookups; *p; p = &(*p)->next)
                if (*p == l) {
                        *p = l->next;
                        break;
                }
        /* the answers, read once for every waiter */
        const char *fail = NULL;
        struct net_addr addrs[ANSWERS_MAX];
        size_t n = 0;
        int ttl = INT32_MAX;
        if (status != ARES_SUCCESS || !res || !res->nodes)
                fail = status == ARES_ENOTFOUND ? "name does not resolve"
                                                : "name resolution failed";
        else
                for (struct ares_addrinfo_node *nd = res->nodes; nd; nd = nd->ai_next) {
                        if (nd->ai_family != AF_INET && nd->ai_family != AF_INET6)
                                continue;
                        if (n == ANSWERS_MAX) {
                                fail = "too many answers";
                                break;
                        }
                        uint16_t port;
                        egress_sockaddr_to_net(nd->ai_addr, &addrs[n++], &port);
                        ttl = MIN(ttl, nd->ai_ttl);
                }
        if (res)
                ares_freeaddrinfo(res);
        if (!fail)
                cache_put(w, l->name, addrs, n, ttl > 0 ? (unsigned) ttl : 0);
        struct conn *next;
        for (struct conn *c = l->waiters; c; c = next) {
                next = c->wait_next; /* c may be freed below */
                c->wait_next = NULL;
                if (resolve_stale(c, NULL))
                        continue;
                if (fail) {
                        refuse(c, 502, "resolve", fail);
                        continue;
                }
                decide_answers(c, addrs, n);
        }
        free(l);
}

static void decide_name(struct conn *c) {
        c->decided = true;
        if (c->sb->mode == EGRESS_MODE_ENFORCE &&
            !net_policy_name_may_match(c->sb->policy, c->name.name)) {
                /* No allowed_hosts entry can allow the name: not resolved;
                 * decided by the address the sandbox dialed (allowed_routes). */
                struct net_decision d;
                decide_one(c, c->name.name, &c->odst, &d);
                if (d.verdict != NET_VERDICT_ALLOW) {
                        egress_addr_from_net(&c->ev.dialed, &c->odst);
                        c->ev.port = c->oport;
                        refuse(c, 403, d.rule, "host not allowed");
                        return;
                }
                set_reason(c, NET_VERDICT_ALLOW, d.rule, d.reason);
                c->dial = c->odst;
                dial(c);
                return;
        }
        const struct cache_entry *ce = cache_find(c->w, c->name.name);
        if (ce) {
                struct net_addr addrs[ANSWERS_MAX];
                size_t n = ce->n;
                memcpy(addrs, ce->addrs, n * sizeof(addrs[0]));
                decide_answers(c, addrs, n);
                return;
        }
        struct lookup *l = c->w->lookups;
        while (l && strcmp(l->name, c->name.name) != 0)
                l = l->next;
        bool ask = !l;
        if (ask) {
                l = calloc(1, sizeof(*l));
                if (!l) {
                        refuse(c, 502, "resolve", "out of memory");
                        return;
                }
                l->w = c->w;
                snprintf(l->name, sizeof(l->name), "%s", c->name.name);
                l->next = c->w->lookups;
                c->w->lookups = l;
        }
        c->wait_next = l->waiters;
        l->waiters = c;
        c->state = C_RESOLVING;
        c->resolving = true;
        uv_timer_start(&c->timer, on_timeout, egress_cfg.connect_timeout_ms, 0);
        if (ask) {
                /* last: c-ares may answer (and free l) before it returns */
                char fq[NET_HOST_MAX + 2];
                snprintf(fq, sizeof(fq), "%s.", l->name);
                struct ares_addrinfo_hints hints = {.ai_family = AF_UNSPEC,
                                                    .ai_flags = ARES_AI_NOSORT};
                ares_getaddrinfo(c->w->ares, fq, NULL, &hints, resolved_cb, l);
        }
}

/* Is buf the start of an HTTP request line (a method token then SP)?
 * 1 yes, 0 no, -EAGAIN can't tell yet. */
static int looks_http(const uint8_t *b, size_t n) {
        for (size_t i = 0; i < n && i <= NET_HTTP_METHOD_MAX; i++) {
                if (b[i] == ' ')
                        return i > 0 ? 1 : 0;
                if (!((b[i] >= 'A' && b[i] <= 'Z') || b[i] == '-' || b[i] == '_'))
                        return 0;
        }
        return n > NET_HTTP_METHOD_MAX ? 0 : -EAGAIN;
}

static void classify(struct conn *c) {
        struct wr_err e = {0};
        if (c->buf[0] == 0x16) {
                struct net_tls_hello h;
                int r = net_tls_sni(c->buf, c->len, &h, &e);
                if (r == -EAGAIN && c->len < HEAD_CAP)
                        return;
                uv_poll_stop(&c->cpoll);
                c->proto = P_TLS;
                if (r < 0) {
                        refuse(c, 0, "tls",
                               r == -EAGAIN ? "ClientHello too large" : "malformed ClientHello");
                        return;
                }
                if (h.has_sni) {
                        snprintf(c->sni, sizeof(c->sni), "%s", h.sni.name);
                        if (h.sni.kind == NET_HOST_NAME) {
                                c->name = h.sni;
                                c->intercept = c->sb->rules && egress_intercept_enabled() &&
                                               net_rules_intercept(c->sb->rules, h.sni.name);
                                decide_name(c);
                        } else {
                                decide_literal(c, &h.sni.addr);
                        }
                        return;
                }
                decide_addr(c);
                return;
        }
        int lh = looks_http(c->buf, c->len);
        if (lh == -EAGAIN)
                return;
        if (lh == 1) {
                struct net_http_head *h = malloc(sizeof(*h));
                if (!h) {
                        conn_close(c, true);
                        return;
                }
                int r = net_http_head_parse((const char *) c->buf, c->len, h, &e);
                if (r == -EAGAIN && c->len < HEAD_CAP) {
                        free(h);
                        return;
                }
                uv_poll_stop(&c->cpoll);
                c->proto = P_HTTP;
                if (r < 0) {
                        free(h);
                        /* the parser's one message for an absolute-form or
                         * CONNECT target disagreeing with Host */
                        if (r == -EBADMSG && strstr(e.msg, "does not match the request-target"))
                                refuse(c, 421, "http", "Host does not match the request-target");
                        else
                                refuse(c, 400, "http",
                                       r == -E2BIG || r == -EAGAIN ? "request head too large"
                                                                   : "malformed request head");
                        return;
                }
                if (h->has_host)
                        snprintf(c->host, sizeof(c->host), "%s", h->host.name);
                const struct net_http_header *up = net_http_head_find(h, "Upgrade");
                bool h2c = up && memmem(up->value.p, up->value.n, "h2c", 3);
                bool trace = h->trace, connect = h->form == NET_HTTP_FORM_AUTHORITY;
                struct net_host host = h->host;
                bool has_host = h->has_host;
                if (!h->upgrade) {
                        /* later requests on this connection are checked
                         * too; after an Upgrade the stream is opaque */
                        c->hu = malloc(sizeof(*c->hu));
                        if (!c->hu) {
                                free(h);
                                conn_close(c, true);
                                return;
                        }
                        c->hu->has_host = h->has_host;
                        c->hu->host = h->host;
                        c->hu->hlen = c->hu->olen = c->hu->osent = c->hu->ipos = 0;
                        egress_http_body_start(&c->hu->body, h->chunked,
                                               h->has_content_length ? h->content_length : 0);
                        c->hu->ilen = c->len - h->head_len;
                        memcpy(c->hu->ibuf, c->buf + h->head_len, c->hu->ilen);
                        c->len = h->head_len; /* the first head only; the rest is framed */
                }
                free(h);
                if (trace) {
                        refuse(c, 405, "http", "TRACE/TRACK refused");
                        return;
                }
                if (h2c) {
                        refuse(c, 400, "http", "h2c upgrade refused");
                        return;
                }
                if (connect) {
                        refuse(c, 405, "http", "CONNECT refused (connections are redirected)");
                        return;
                }
                if (has_host && host.kind == NET_HOST_NAME) {
                        c->name = host;
                        decide_name(c);
                        return;
                }
                if (has_host) {
                        decide_literal(c, &host.addr);
                        return;
                }
                decide_addr(c);
                return;
        }
        uv_poll_stop(&c->cpoll);
        c->proto = P_RAW;
        if (!ssh_exempt(c))
                decide_addr(c);
}

static void head_cb(uv_poll_t *p, int status, int events) {
        struct conn *c = p->data;
        if (c->state != C_HEAD)
                return;
        if (status < 0) {
                conn_close(c, true);
                return;
        }
        if (c->len == c->cap) {
                size_t ncap = MIN(c->cap * 4, (size_t) HEAD_CAP);
                uint8_t *nb = realloc(c->buf, ncap);
                if (!nb) {
                        conn_close(c, true);
                        return;
                }
                c->buf = nb;
                c->cap = ncap;
        }
        ssize_t n = recv(c->cfd, c->buf + c->len, c->cap - c->len, MSG_DONTWAIT);
        if (n < 0 && errno == EAGAIN)
                return;
        if (n <= 0) {
                set_reason(c, NET_VERDICT_DENY, "head", "closed before a decision");
                conn_close(c, n < 0);
                return;
        }
        if (c->len == 0)
                uv_timer_start(&c->timer, on_timeout, egress_cfg.head_timeout_ms, 0);
        c->len += (size_t) n;
        classify(c);
        /* undecided with a full buffer: grown on the next read, up to the cap */
        if (c->state == C_HEAD && c->len == HEAD_CAP)
                refuse(c, 400, "head", "first bytes too long");
}

static int original_dst(int fd, struct net_addr *a, uint16_t *port) {
        struct sockaddr_storage ss;
        socklen_t l = sizeof(ss);
        struct sockaddr_storage local;
        socklen_t ll = sizeof(local);
        if (getsockname(fd, (struct sockaddr *) &local, &ll) < 0)
                return -errno;
        if (local.ss_family == AF_INET6) {
                if (getsockopt(fd, SOL_IPV6, IP6T_SO_ORIGINAL_DST, &ss, &l) == 0) {
                        egress_sockaddr_to_net((struct sockaddr *) &ss, a, port);
                        return 0;
                }
                /* an IPv4 connection on a dual-stack socket */
        }
        l = sizeof(ss);
        if (getsockopt(fd, SOL_IP, SO_ORIGINAL_DST, &ss, &l) < 0)
                return -errno;
        egress_sockaddr_to_net((struct sockaddr *) &ss, a, port);
        return 0;
}

static void accept_cb(uv_poll_t *p, int status, int events) {
        struct worker *w = p->data;
        int lfd = -1;
        uv_fileno((uv_handle_t *) p, &lfd);
        for (int i = 0; i < 64; i++) {
                struct sockaddr_storage ss;
                socklen_t sl = sizeof(ss);
                int fd = accept4(lfd, (struct sockaddr *) &ss, &sl, SOCK_NONBLOCK | SOCK_CLOEXEC);
                if (fd < 0)
                        return; /* EAGAIN (another worker took it) or a transient error */
                if (atomic_load(&egress_nconns) >= egress_cfg.max_conns) {
                        set_linger0(fd);
                        close(fd);
                        continue;
                }
                struct conn *c = calloc(1, sizeof(*c));
                uint8_t *buf = malloc(4096);
                if (!c || !buf) {
                        free(c);
                        free(buf);
                        set_linger0(fd);
                        close(fd);
                        continue;
                }
                atomic_fetch_add(&egress_nconns, 1);
                c->w = w;
                c->cfd = fd;
                c->ufd = -EBADF;
                c->up.pipe[0] = c->up.pipe[1] = c->dn.pipe[0] = c->dn.pipe[1] = -EBADF;
                c->buf = buf;
                c->cap = 4096;
                c->t0 = egress_now_ns();
                c->state = C_HEAD;
                c->ev.kind = EGRESS_EVENT_TCP;
                uint16_t sport;
                egress_sockaddr_to_net((struct sockaddr *) &ss, &c->src, &sport);
                uv_timer_init(&w->loop, &c->timer);
                c->timer.data = c;
                c->handles++;
                if (uv_poll_init(&w->loop, &c->cpoll, fd) < 0) {
                        /* cannot happen for a fresh fd; keep the accounting right */
                        c->state = C_CLOSING;
                        uv_close((uv_handle_t *) &c->timer, handle_closed);
                        set_linger0(fd);
                        close(fd);
                        atomic_fetch_sub(&egress_nconns, 1);
                        continue;
                }
                c->cpoll.data = c;
                c->handles++;
                int one = 1;
                (void) setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
                sandbox_side_cc(fd);
                sandbox_side_notsent(fd);
                int r = original_dst(fd, &c->odst, &c->oport);
                c->sb = egress_sb_lookup(&c->src);
                egress_event_fill_sb(&c->ev, c->sb, &c->src);
                if (r < 0) {
                        refuse(c, 0, "redirect", "no original destination");
                        continue;
                }
                egress_addr_from_net(&c->ev.dialed, &c->odst);
                c->ev.port = c->oport;
                if (!c->sb) {
                        refuse(c, 0, "source", "unknown source address");
                        continue;
                }
                uv_poll_start(&c->cpoll, UV_READABLE, head_cb);
                uv_timer_start(&c->timer, on_timeout, egress_cfg.first_byte_ms, 0);
        }
}

/* --- c-ares on a libuv loop --- */

static void ares_poll_cb(uv_poll_t *p, int status, int events) {
        struct ares_watch *aw = p->data;
        ares_socket_t r = (events & UV_READABLE) || status < 0 ? aw->fd : ARES_SOCKET_BAD;
        ares_socket_t wr = (events & UV_WRITABLE) || status < 0 ? aw->fd : ARES_SOCKET_BAD;
        ares_process_fd(aw->w->ares, r, wr);
}

static void ares_watch_closed(uv_handle_t *h) {
        free(h->data);
}

static void ares_sock_cb(void *data, ares_socket_t fd, int readable, int writable) {
        struct worker *w = data;
        struct ares_watch **pp = &w->watches, *aw = NULL;
        for (; *pp; pp = &(*pp)->next)
                if ((*pp)->fd == fd) {
                        aw = *pp;
                        break;
                }
        if (!readable && !writable) {
                if (aw) {
                        *pp = aw->next;
                        uv_poll_stop(&aw->poll);
                        uv_close((uv_handle_t *) &aw->poll, ares_watch_closed);
                }
                return;
        }
        if (!aw) {
                aw = calloc(1, sizeof(*aw));
                if (!aw)
                        return;
                aw->w = w;
                aw->fd = fd;
                if (uv_poll_init_socket(&w->loop, &aw->poll, fd) < 0) {
                        free(aw);
                        return;
                }
                aw->poll.data = aw;
                aw->next = w->watches;
                w->watches = aw;
        }
        uv_poll_start(&aw->poll, (readable ? UV_READABLE : 0) | (writable ? UV_WRITABLE : 0),
                      ares_poll_cb);
}

static void ares_tick(uv_timer_t *t) {
        struct worker *w = t->data;
        ares_process_fd(w->ares, ARES_SOCKET_BAD, ARES_SOCKET_BAD);
}

int egress_proxy_prepare(struct wr_err *e) {
        workers = calloc(egress_cfg.threads, sizeof(*workers));
        if (!workers)
                return -ENOMEM;
        for (unsigned i = 0; i < egress_cfg.threads; i++) {
                struct worker *w = &workers[i];
                w->idx = i;
                int r = uv_loop_init(&w->loop);
                if (r < 0)
                        return err_set(e, r, "uv_loop_init: %s", uv_strerror(r));
                struct ares_options o = {
                        .flags = ARES_FLAG_NOSEARCH | ARES_FLAG_NOALIASES,
                        .timeout = (int) egress_cfg.dns_timeout_ms,
                        .tries = 2,
                        .ndots = 0,
                        .lookups = (char *) "b",
                        .sock_state_cb = ares_sock_cb,
                        .sock_state_cb_data = w,
                        .ndomains = 0,
                };
                int mask = ARES_OPT_FLAGS | ARES_OPT_TIMEOUTMS | ARES_OPT_TRIES | ARES_OPT_NDOTS |
                           ARES_OPT_LOOKUPS | ARES_OPT_SOCK_STATE_CB | ARES_OPT_DOMAINS;
                r = ares_init_options(&w->ares, &o, mask);
                if (r != ARES_SUCCESS)
                        return err_set(e, -ENOMEM, "ares_init_options: %s", ares_strerror(r));
                r = ares_set_servers_ports_csv(w->ares, egress_cfg.ares_servers);
                if (r != ARES_SUCCESS)
                        return err_set(e, -EINVAL, "upstream DNS %s: %s", egress_cfg.ares_servers,
                                       ares_strerror(r));
                uv_timer_init(&w->loop, &w->ares_timer);
                w->ares_timer.data = w;
                for (size_t k = 0; k < egress_cfg.n_listen; k++) {
                        r = uv_poll_init_socket(&w->loop, &w->listen[k], egress_cfg.listen_fds[k]);
                        if (r < 0)
                                return err_set(e, r, "poll listen fd %d: %s",
                                               egress_cfg.listen_fds[k], uv_strerror(r));
                        w->listen[k].data = w;
                }
        }
        return 0;
}

static void *worker_main(void *arg) {
        struct worker *w = arg;
        uv_timer_start(&w->ares_timer, ares_tick, 100, 100);
        for (size_t k = 0; k < egress_cfg.n_listen; k++)
                uv_poll_start(&w->listen[k], UV_READABLE, accept_cb);
        uv_run(&w->loop, UV_RUN_DEFAULT);
        return NULL;
}

int egress_proxy_start(struct wr_err *e) {
        for (unsigned i = 0; i < egress_cfg.threads; i++) {
                int r = pthread_create(&workers[i].thread, NULL, worker_main, &workers[i]);
                if (r)
                        return err_set(e, -r, "pthread_create: %s", strerror(r));
        }
        return 0;
}
