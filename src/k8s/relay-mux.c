/* SPDX-License-Identifier: Apache-2.0 */
/* The relay engine (relay-mux.h). */
#include "k8s/relay-mux.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#include <openssl/err.h>

#include "init/ctl-proto.h"
#include "k8s/relay-frame.h"

#define MAX_FDS (CTL_STDIO_FDS + CTL_HOLD_FDS)

struct rstream {
        struct rstream *next;
        uint32_t id;
        uint32_t kind;
        int fd;
        bool rd, wr;      /* we read fd and send; we receive and write fd */
        bool peer_eof;    /* EOF received: close the write half once flushed */
        uint32_t credit;  /* what we may still send */
        uint32_t unacked; /* written to fd, not yet credited back */
        uint8_t *buf;     /* received, not yet written (<= RELAY_WINDOW) */
        size_t blen;
        uint64_t exec_id; /* the exec it belongs to (its SPAWN's, TAKEN's id) */
        uint64_t nread;   /* bytes read from fd */
        uint64_t mark;    /* an EXITED waits until nread reaches it */
};

/* An EXITED held back until its exec's output is through: on the Pod side
 * until what its pipes held at the exit is read and sent, on warrend's
 * side until that is written into warrend's pipes. warrend takes "would
 * block after the exit" as "done" (src/sandbox/exec.c), as on the host,
 * where the output is in the pipe before init reports the exit. */
struct held_exit {
        struct held_exit *next;
        uint64_t exec_id;
        size_t len;
        uint8_t dgram[];
};

struct mux {
        const struct relay_mux_config *cfg;
        size_t msg_max_in;  /* datagrams the peer may send */
        size_t msg_max_ctl; /* datagrams our ctl socket may give us */
        uint8_t *out;
        size_t out_len, out_cap;
        uint8_t *in;
        size_t in_len, in_cap;
        uint8_t *dgram; /* ctl receive buffer */
        struct rstream *streams;
        uint32_t next_id;
        size_t nstreams;
        struct held_exit *exits, **exits_tail;
};

static int64_t now_ms(void) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (int64_t) ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* --- the outgoing buffer --- */

static int out_reserve(struct mux *m, size_t n) {
        if (m->out_len + n <= m->out_cap)
                return 0;
        size_t cap = m->out_cap ? m->out_cap : 65536;
        while (cap < m->out_len + n)
                cap *= 2;
        uint8_t *p = realloc(m->out, cap);
        if (!p)
                return -ENOMEM;
        m->out = p;
        m->out_cap = cap;
        return 0;
}

static int out_frame(struct mux *m, uint32_t type, uint32_t stream, const void *a, size_t alen,
                     const void *b, size_t blen) {
        int r = out_reserve(m, RELAY_HDR_LEN + alen + blen);
        if (r < 0)
                return r;
        relay_hdr_put(m->out + m->out_len, type, stream, (uint32_t) (alen + blen));
        m->out_len += RELAY_HDR_LEN;
        if (alen)
                memcpy(m->out + m->out_len, a, alen);
        m->out_len += alen;
        if (blen)
                memcpy(m->out + m->out_len, b, blen);
        m->out_len += blen;
        return 0;
}

static int out_credit(struct mux *m, struct rstream *s) {
        uint8_t b[4];
        relay_put32(b, s->unacked);
        s->unacked = 0;
        return out_frame(m, RELAY_CREDIT, s->id, b, 4, NULL, 0);
}

/* --- streams --- */

static struct rstream *stream_find(struct mux *m, uint32_t id) {
        for (struct rstream *s = m->streams; s; s = s->next)
                if (s->id == id)
                        return s;
        return NULL;
}

/* Our role for a kind: the Pod writes IN and reads OUT; the daemon the
 * reverse; both do both for a PTY. */
static void stream_roles(const struct mux *m, uint32_t kind, bool *rd, bool *wr) {
        bool pod = m->cfg->side == RELAY_SIDE_POD;
        *rd = kind == RELAY_KIND_PTY || (kind == RELAY_KIND_OUT) == pod;
        *wr = kind == RELAY_KIND_PTY || (kind == RELAY_KIND_IN) == pod;
}

static struct rstream *stream_add(struct mux *m, uint32_t id, uint32_t kind, int fd,
                                  uint64_t exec_id) {
        struct rstream *s = calloc(1, sizeof(*s));
        if (!s)
                return NULL;
        s->id = id;
        s->kind = kind;
        s->fd = fd;
        s->credit = RELAY_WINDOW;
        s->exec_id = exec_id;
        stream_roles(m, kind, &s->rd, &s->wr);
        (void) fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
        /* at the tail: within one round stdout is read before stderr, as
         * exec.c drains them */
        struct rstream **pp = &m->streams;
        while (*pp)
                pp = &(*pp)->next;
        *pp = s;
        m->nstreams++;
        return s;
}

static void stream_free(struct mux *m, struct rstream *s) {
        for (struct rstream **pp = &m->streams; *pp; pp = &(*pp)->next)
                if (*pp == s) {
                        *pp = s->next;
                        break;
                }
        m->nstreams--;
        if (s->fd >= 0)
                close(s->fd);
        free(s->buf);
        free(s);
}

/* A stream whose halves are both done goes; a PTY ends with its output
 * (from the Pod) on the daemon side, with its reads on the Pod side. */
static void stream_settle(struct mux *m, struct rstream *s) {
        if (!s->rd && !s->wr)
                stream_free(m, s);
}

static uint32_t new_id(struct mux *m) {
        uint32_t id = m->next_id;
        m->next_id += 2;
        return id;
}

/* --- EXITED in order with the output --- */

static int hold_exit(struct mux *m, uint64_t exec_id, const uint8_t *dgram, size_t len) {
        struct held_exit *h = malloc(sizeof(*h) + len);
        if (!h)
                return -ENOMEM;
        h->next = NULL;
        h->exec_id = exec_id;
        h->len = len;
        memcpy(h->dgram, dgram, len);
        *m->exits_tail = h;
        m->exits_tail = &h->next;
        return 0;
}

/* Is exec_id's output through (see struct held_exit)? */
static bool output_through(struct mux *m, uint64_t exec_id) {
        bool pod = m->cfg->side == RELAY_SIDE_POD;
        for (struct rstream *s = m->streams; s; s = s->next) {
                if (s->exec_id != exec_id)
                        continue;
                if (pod && s->rd && s->nread < s->mark)
                        return false;
                if (!pod && s->wr && s->blen > 0)
                        return false;
        }
        return true;
}

static int send_ctl(int ctl, const void *buf, size_t len, const int *fds, int nfds);

/* Let go of the held EXITEDs whose output is through, in order per exec. */
static int release_exits(struct mux *m) {
        int r = 0;
        for (struct held_exit **pp = &m->exits; *pp && r >= 0;) {
                struct held_exit *h = *pp;
                if (!output_through(m, h->exec_id)) {
                        pp = &h->next;
                        continue;
                }
                if (m->cfg->side == RELAY_SIDE_POD) {
                        uint8_t z[4] = {0};
                        r = out_frame(m, RELAY_MSG, 0, z, 4, h->dgram, h->len);
                } else
                        r = send_ctl(m->cfg->ctl, h->dgram, h->len, NULL, 0);
                *pp = h->next;
                if (!*pp)
                        m->exits_tail = pp;
                free(h);
        }
        return r;
}

/* --- control datagrams, ctl -> wire --- */

static bool is_pty_master(int fd) {
        int n;
        return ioctl(fd, TIOCGPTN, &n) == 0;
}

static int ctl_to_wire(struct mux *m) {
        struct iovec iov = {.iov_base = m->dgram, .iov_len = m->msg_max_ctl};
        union {
                struct cmsghdr h;
                char b[CMSG_SPACE(sizeof(int) * MAX_FDS)];
        } c;
        struct msghdr mh = {.msg_iov = &iov,
                            .msg_iovlen = 1,
                            .msg_control = c.b,
                            .msg_controllen = sizeof(c.b)};
        ssize_t n = recvmsg(m->cfg->ctl, &mh, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
        if (n < 0)
                return errno == EAGAIN || errno == EINTR ? 1 : -errno;
        if (n == 0)
                return 0;
        int fds[MAX_FDS], nfds = 0;
        for (struct cmsghdr *cm = CMSG_FIRSTHDR(&mh); cm; cm = CMSG_NXTHDR(&mh, cm))
                if (cm->cmsg_level == SOL_SOCKET && cm->cmsg_type == SCM_RIGHTS) {
                        size_t k = (cm->cmsg_len - CMSG_LEN(0)) / sizeof(int);
                        for (size_t i = 0; i < k; i++) {
                                int fd;
                                memcpy(&fd, CMSG_DATA(cm) + i * sizeof(int), sizeof(int));
                                if (nfds < MAX_FDS)
                                        fds[nfds++] = fd;
                                else
                                        close(fd);
                        }
                }
        if ((mh.msg_flags & MSG_TRUNC) || (size_t) n < sizeof(struct ctl_hdr)) {
                for (int i = 0; i < nfds; i++)
                        close(fds[i]);
                return -EBADMSG;
        }
        struct ctl_hdr h;
        memcpy(&h, m->dgram, sizeof(h));
        uint8_t refs[4 + RELAY_STREAMS_MAX * 8];
        uint32_t ns = 0;
        if (m->cfg->side == RELAY_SIDE_DAEMON) {
                /* a SPAWN's stdio (the child's ends): 0 is read here, 1
                 * and 2 written; the daemon's own ends of a HOLD (3..5)
                 * are not needed: the relay passes its own */
                if (h.type == CTL_SPAWN && nfds >= CTL_STDIO_FDS) {
                        for (int i = 0; i < CTL_STDIO_FDS; i++) {
                                uint32_t kind = i == 0 ? RELAY_KIND_IN : RELAY_KIND_OUT;
                                uint32_t id = new_id(m);
                                if (!stream_add(m, id, kind, fds[i], h.id))
                                        close(fds[i]);
                                relay_put32(refs + 4 + ns * 8, id);
                                relay_put32(refs + 8 + ns * 8, kind);
                                ns++;
                        }
                        for (int i = CTL_STDIO_FDS; i < nfds; i++)
                                close(fds[i]);
                } else
                        for (int i = 0; i < nfds; i++)
                                close(fds[i]);
        } else {
                /* from init: a pty master, or held pipe ends */
                for (int i = 0; i < nfds && ns < RELAY_STREAMS_MAX; i++) {
                        int acc = fcntl(fds[i], F_GETFL) & O_ACCMODE;
                        uint32_t kind = is_pty_master(fds[i]) ? RELAY_KIND_PTY
                                        : acc == O_WRONLY     ? RELAY_KIND_IN
                                                              : RELAY_KIND_OUT;
                        uint32_t id = new_id(m);
                        if (!stream_add(m, id, kind, fds[i], h.id))
                                close(fds[i]);
                        relay_put32(refs + 4 + ns * 8, id);
                        relay_put32(refs + 8 + ns * 8, kind);
                        ns++;
                }
        }
        if (m->cfg->side == RELAY_SIDE_POD && h.type == CTL_EXITED && nfds == 0) {
                /* what the exec's pipes hold now goes first */
                for (struct rstream *s = m->streams; s; s = s->next)
                        if (s->exec_id == h.id && s->rd) {
                                int avail = 0;
                                if (ioctl(s->fd, FIONREAD, &avail) < 0 || avail < 0)
                                        avail = 0;
                                s->mark = s->nread + (uint64_t) avail;
                        }
                int r = hold_exit(m, h.id, m->dgram, (size_t) n);
                return r < 0 ? r : 1;
        }
        relay_put32(refs, ns);
        int r = out_frame(m, RELAY_MSG, 0, refs, 4 + ns * 8, m->dgram, (size_t) n);
        explicit_bzero(m->dgram, (size_t) n); /* a SPAWN's env may hold secrets */
        return r < 0 ? r : 1;
}

/* --- control datagrams, wire -> ctl --- */

static int send_ctl(int ctl, const void *buf, size_t len, const int *fds, int nfds) {
        struct iovec iov = {.iov_base = (void *) buf, .iov_len = len};
        union {
                struct cmsghdr h;
                char b[CMSG_SPACE(sizeof(int) * MAX_FDS)];
        } c;
        struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1};
        if (nfds > 0) {
                memset(&c, 0, sizeof(c));
                mh.msg_control = c.b;
                mh.msg_controllen = CMSG_SPACE(sizeof(int) * (size_t) nfds);
                struct cmsghdr *cm = CMSG_FIRSTHDR(&mh);
                cm->cmsg_level = SOL_SOCKET;
                cm->cmsg_type = SCM_RIGHTS;
                cm->cmsg_len = CMSG_LEN(sizeof(int) * (size_t) nfds);
                memcpy(CMSG_DATA(cm), fds, sizeof(int) * (size_t) nfds);
        }
        int64_t deadline = now_ms() + 5000;
        for (;;) {
                if (sendmsg(ctl, &mh, MSG_NOSIGNAL | MSG_DONTWAIT) >= 0)
                        return 0;
                if (errno != EAGAIN && errno != EINTR && errno != ENOBUFS)
                        return -errno;
                int left = (int) (deadline - now_ms());
                if (left <= 0)
                        return -ETIMEDOUT;
                struct pollfd p = {.fd = ctl, .events = POLLOUT};
                (void) poll(&p, 1, left > 100 ? 100 : left);
        }
}

static int raw_pty(int *master, int *slave) {
        int mfd = posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC);
        if (mfd < 0)
                return -errno;
        char name[64];
        if (grantpt(mfd) < 0 || unlockpt(mfd) < 0 || ptsname_r(mfd, name, sizeof(name)) != 0) {
                close(mfd);
                return -EIO;
        }
        int sfd = open(name, O_RDWR | O_NOCTTY | O_CLOEXEC);
        if (sfd < 0) {
                int r = -errno;
                close(mfd);
                return r;
        }
        struct termios t;
        if (tcgetattr(sfd, &t) == 0) {
                cfmakeraw(&t);
                (void) tcsetattr(sfd, TCSANOW, &t);
        }
        *master = mfd;
        *slave = sfd;
        return 0;
}

static int wire_msg(struct mux *m, const struct relay_frame *f) {
        int give[MAX_FDS], ngive = 0, keep[MAX_FDS], nkeep = 0, r = 0;
        bool pod = m->cfg->side == RELAY_SIDE_POD;
        struct ctl_hdr h;
        memcpy(&h, f->payload, sizeof(h));
        for (uint32_t i = 0; i < f->nstreams; i++) {
                uint32_t id = f->streams[i].id, kind = f->streams[i].kind;
                /* the peer's ids: odd from the daemon, even from the Pod */
                if ((id & 1) != (pod ? 1u : 0u) || stream_find(m, id)) {
                        r = -EBADMSG;
                        break;
                }
                int p[2], local;
                if (kind == RELAY_KIND_PTY) {
                        if (pod) {
                                r = -EBADMSG;
                                break;
                        }
                        if ((r = raw_pty(&p[0], &p[1])) < 0)
                                break;
                        give[ngive++] = p[0];
                        local = p[1];
                } else {
                        if (pipe2(p, O_CLOEXEC) < 0) {
                                r = -errno;
                                break;
                        }
                        /* IN: data flows into the Pod */
                        bool child_reads = kind == RELAY_KIND_IN;
                        if (pod) {
                                give[ngive++] = child_reads ? p[0] : p[1];
                                local = child_reads ? p[1] : p[0];
                        } else {
                                give[ngive++] = child_reads ? p[1] : p[0];
                                local = child_reads ? p[0] : p[1];
                        }
                }
                keep[nkeep++] = local;
                if (!stream_add(m, id, kind, local, h.id)) {
                        nkeep--;
                        close(local);
                        r = -ENOMEM;
                        break;
                }
        }
        if (r == 0 && pod && h.type == CTL_SPAWN && ngive == CTL_STDIO_FDS &&
            f->payload_len >= sizeof(h) + sizeof(struct ctl_spawn)) {
                struct ctl_spawn sp;
                memcpy(&sp, f->payload + sizeof(h), sizeof(sp));
                /* a HOLD: init keeps copies of our ends */
                if ((sp.flags & CTL_SPAWN_HOLD) && !(sp.flags & CTL_SPAWN_PTY))
                        for (int i = 0; i < nkeep; i++)
                                give[ngive++] = keep[i];
        }
        if (r == 0)
                r = send_ctl(m->cfg->ctl, f->payload, f->payload_len, give, ngive);
        /* only the given ends created here are closed (kept ones are the
         * streams' own fds, passed again for a HOLD) */
        int own = ngive > nkeep && pod ? nkeep : ngive;
        for (int i = 0; i < own && i < ngive; i++)
                close(give[i]);
        return r;
}

/* --- frames from the wire --- */

static int handle_frame(struct mux *m, const struct relay_frame *f) {
        struct rstream *s = f->stream ? stream_find(m, f->stream) : NULL;
        switch (f->type) {
        case RELAY_MSG:
                if (m->cfg->side == RELAY_SIDE_DAEMON && f->nstreams == 0) {
                        struct ctl_hdr h;
                        memcpy(&h, f->payload, sizeof(h));
                        if (h.type == CTL_EXITED)
                                return hold_exit(m, h.id, f->payload, f->payload_len);
                }
                return wire_msg(m, f);
        case RELAY_DATA:
                if (!s || !s->wr)
                        return 0; /* after our STOP: in flight */
                if (s->blen + f->payload_len > RELAY_WINDOW)
                        return -EBADMSG;
                if (!s->buf && !(s->buf = malloc(RELAY_WINDOW)))
                        return -ENOMEM;
                memcpy(s->buf + s->blen, f->payload, f->payload_len);
                s->blen += f->payload_len;
                return 0;
        case RELAY_EOF:
                if (!s || !s->wr)
                        return 0;
                s->peer_eof = true;
                return 0;
        case RELAY_CREDIT:
                if (!s || !s->rd)
                        return 0;
                if ((uint64_t) s->credit + f->credit > RELAY_WINDOW)
                        return -EBADMSG;
                s->credit += f->credit;
                return 0;
        case RELAY_STOP:
                if (s && s->rd) {
                        s->rd = false;
                        if (s->kind == RELAY_KIND_PTY)
                                s->wr = false;
                        stream_settle(m, s);
                }
                return 0;
        default:
                return -EBADMSG; /* HELLO / WELCOME only at the start */
        }
}

/* --- the streams' fds --- */

static int stream_read(struct mux *m, struct rstream *s) {
        size_t want = s->credit < RELAY_DATA_MAX ? s->credit : RELAY_DATA_MAX;
        /* read straight into the outgoing buffer, behind a DATA header put
         * there once the size is known */
        int r = out_reserve(m, RELAY_HDR_LEN + want);
        if (r < 0)
                return r;
        uint8_t *at = m->out + m->out_len;
        ssize_t n = read(s->fd, at + RELAY_HDR_LEN, want);
        if (n < 0 && (errno == EAGAIN || errno == EINTR))
                return 0;
        if (n <= 0) {
                /* EOF, or EIO from a pty whose other side is gone */
                s->rd = false;
                r = out_frame(m, RELAY_EOF, s->id, NULL, 0, NULL, 0);
                if (s->kind == RELAY_KIND_PTY && m->cfg->side == RELAY_SIDE_POD)
                        s->wr = false;
                stream_settle(m, s);
                return r;
        }
        relay_hdr_put(at, RELAY_DATA, s->id, (uint32_t) n);
        m->out_len += RELAY_HDR_LEN + (size_t) n;
        s->credit -= (uint32_t) n;
        s->nread += (uint64_t) n;
        return 0;
}

static int stream_write(struct mux *m, struct rstream *s) {
        while (s->blen > 0) {
                ssize_t n = write(s->fd, s->buf, s->blen);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0 && errno == EAGAIN)
                        break;
                if (n < 0) {
                        /* the reader is gone */
                        s->wr = false;
                        s->blen = 0;
                        int r = out_frame(m, RELAY_STOP, s->id, NULL, 0, NULL, 0);
                        if (s->kind == RELAY_KIND_PTY)
                                s->rd = false;
                        stream_settle(m, s);
                        return r;
                }
                memmove(s->buf, s->buf + n, s->blen - (size_t) n);
                s->blen -= (size_t) n;
                s->unacked += (uint32_t) n;
        }
        int r = 0;
        if (s->unacked && (s->blen == 0 || s->unacked >= RELAY_WINDOW / 4))
                r = out_credit(m, s);
        if (r >= 0 && s->blen == 0 && s->peer_eof) {
                s->wr = false;
                /* the daemon's pty ends with the Pod's output */
                if (s->kind == RELAY_KIND_PTY)
                        s->rd = false;
                else if (s->rd) {
                        /* never for pipes; keep the fd for the read half */
                } else {
                        close(s->fd);
                        s->fd = -1;
                }
                stream_settle(m, s);
        }
        return r;
}

/* --- TLS --- */

static int ssl_fail(SSL *ssl, int n) {
        int e = SSL_get_error(ssl, n);
        if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE)
                return 0;
        if (e == SSL_ERROR_ZERO_RETURN)
                return -ECONNRESET;
        ERR_clear_error();
        return -EPIPE;
}

static int wire_flush(struct mux *m) {
        while (m->out_len > 0) {
                int n = SSL_write(m->cfg->ssl, m->out,
                                  (int) (m->out_len > 1u << 30 ? 1u << 30 : m->out_len));
                if (n <= 0)
                        return ssl_fail(m->cfg->ssl, n);
                memmove(m->out, m->out + n, m->out_len - (size_t) n);
                m->out_len -= (size_t) n;
        }
        return 0;
}

static int wire_read(struct mux *m) {
        for (int rounds = 0; rounds < 16; rounds++) {
                if (m->in_len == m->in_cap)
                        return -EBADMSG;
                int n = SSL_read(m->cfg->ssl, m->in + m->in_len, (int) (m->in_cap - m->in_len));
                if (n <= 0) {
                        int r = ssl_fail(m->cfg->ssl, n);
                        return r < 0 ? r : 1;
                }
                m->in_len += (size_t) n;
                size_t off = 0;
                for (;;) {
                        struct relay_frame f;
                        int k = relay_frame_parse(m->in + off, m->in_len - off, m->msg_max_in, &f);
                        if (k < 0)
                                return k;
                        if (k == 0)
                                break;
                        int r = handle_frame(m, &f);
                        if (r < 0)
                                return r;
                        off += (size_t) k;
                }
                memmove(m->in, m->in + off, m->in_len - off);
                m->in_len -= off;
                if (!SSL_pending(m->cfg->ssl))
                        return 1;
        }
        return 1;
}

int relay_mux_run(const struct relay_mux_config *cfg) {
        struct mux m = {
                .cfg = cfg,
                .next_id = cfg->side == RELAY_SIDE_DAEMON ? 1 : 2,
                .msg_max_in = cfg->side == RELAY_SIDE_DAEMON ? CTL_REPLY_MAX : CTL_MSG_MAX,
                .msg_max_ctl = cfg->side == RELAY_SIDE_DAEMON ? CTL_MSG_MAX : CTL_REPLY_MAX,
        };
        m.exits_tail = &m.exits;
        m.in_cap = relay_frame_max(m.msg_max_in) + 65536;
        m.in = malloc(m.in_cap);
        m.dgram = malloc(m.msg_max_ctl);
        int r = m.in && m.dgram ? 0 : -ENOMEM;
        if (r == 0 && cfg->pending_len) {
                if (cfg->pending_len > m.in_cap)
                        r = -EBADMSG;
                else {
                        memcpy(m.in, cfg->pending, cfg->pending_len);
                        m.in_len = cfg->pending_len;
                        size_t off = 0;
                        for (;;) {
                                struct relay_frame f;
                                int k = relay_frame_parse(m.in + off, m.in_len - off, m.msg_max_in,
                                                          &f);
                                if (k <= 0 || (r = handle_frame(&m, &f)) < 0) {
                                        if (k < 0)
                                                r = k;
                                        break;
                                }
                                off += (size_t) k;
                        }
                        memmove(m.in, m.in + off, m.in_len - off);
                        m.in_len -= off;
                }
        }
        struct pollfd *p = NULL;
        struct rstream **ps = NULL;
        size_t pcap = 0;
        while (r >= 0) {
                if (pcap < m.nstreams + 3) {
                        size_t cap = (m.nstreams + 3) * 2;
                        struct pollfd *np_ = realloc(p, cap * sizeof(*p));
                        if (np_)
                                p = np_;
                        struct rstream **nps = realloc(ps, cap * sizeof(*ps));
                        if (nps)
                                ps = nps;
                        if (!np_ || !nps) {
                                r = -ENOMEM;
                                break;
                        }
                        pcap = cap;
                }
                size_t np = 0, ns = 0;
                bool room = m.out_len < RELAY_OUT_HIGH;
                p[np++] = (struct pollfd){.fd = cfg->sock,
                                          .events = POLLIN | (m.out_len ? POLLOUT : 0)};
                p[np++] = (struct pollfd){.fd = cfg->ctl, .events = room ? POLLIN : 0};
                p[np++] = (struct pollfd){.fd = cfg->stop_fd, .events = POLLIN};
                for (struct rstream *s = m.streams; s; s = s->next) {
                        short ev = 0;
                        if (s->rd && s->credit > 0 && room)
                                ev |= POLLIN;
                        if (s->wr && s->blen > 0)
                                ev |= POLLOUT;
                        ps[ns++] = s;
                        p[np++] = (struct pollfd){.fd = ev ? s->fd : -1, .events = ev};
                }
                /* streams with an EOF to finish and nothing to write */
                for (size_t i = 0; i < ns; i++)
                        if (ps[i]->wr && ps[i]->blen == 0 && (ps[i]->peer_eof || ps[i]->unacked)) {
                                p[3 + i].fd = ps[i]->fd;
                                p[3 + i].events |= POLLOUT;
                        }
                int timeout = SSL_pending(cfg->ssl) > 0 ? 0 : 1000;
                int n = poll(p, np, timeout);
                if (n < 0 && errno != EINTR) {
                        r = -errno;
                        break;
                }
                if (n < 0)
                        continue;
                if (p[2].revents)
                        break;
                if ((p[0].revents & (POLLIN | POLLHUP | POLLERR)) || SSL_pending(cfg->ssl) > 0)
                        if ((r = wire_read(&m)) < 0)
                                break;
                if (p[1].revents) {
                        int k = ctl_to_wire(&m);
                        if (k <= 0) {
                                r = k;
                                break;
                        }
                }
                /* the stream list may have changed: act only on those
                 * still there */
                for (size_t i = 0; i < ns && r >= 0; i++) {
                        if (!p[3 + i].revents)
                                continue;
                        struct rstream *s = NULL;
                        for (struct rstream *t = m.streams; t; t = t->next)
                                if (t == ps[i])
                                        s = t;
                        if (!s || s->fd != p[3 + i].fd)
                                continue;
                        uint32_t id = s->id;
                        if (s->wr && (p[3 + i].revents & (POLLOUT | POLLERR | POLLHUP)))
                                r = stream_write(&m, s);
                        if (r >= 0 && (s = stream_find(&m, id)) && s->rd &&
                            (p[3 + i].revents & (POLLIN | POLLHUP | POLLERR)))
                                r = stream_read(&m, s);
                }
                if (r >= 0 && m.exits)
                        r = release_exits(&m);
                if (r >= 0 && m.out_len)
                        r = wire_flush(&m);
        }
        free(p);
        free(ps);
        /* best effort: what is queued */
        if (m.out_len)
                (void) wire_flush(&m);
        while (m.streams)
                stream_free(&m, m.streams);
        while (m.exits) {
                struct held_exit *h = m.exits;
                m.exits = h->next;
                free(h);
        }
        free(m.out);
        free(m.in);
        if (m.dgram) {
                explicit_bzero(m.dgram, m.msg_max_ctl);
                free(m.dgram);
        }
        return r == -ECONNRESET ? 0 : r;
}

int relay_addr_parse(const char *s, struct sockaddr_storage *ss, socklen_t *len, char *host,
                     size_t hsize) {
        const char *colon = s ? strrchr(s, ':') : NULL;
        if (!colon)
                return -EINVAL;
        char *end;
        long port = strtol(colon + 1, &end, 10);
        if (*end || port < 0 || port > 65535 || end == colon + 1)
                return -EINVAL;
        size_t hl = (size_t) (colon - s);
        if (s[0] == '[' && hl >= 2 && s[hl - 1] == ']') {
                s++;
                hl -= 2;
        }
        if (hl == 0 || hl >= hsize)
                return -EINVAL;
        memcpy(host, s, hl);
        host[hl] = 0;
        memset(ss, 0, sizeof(*ss));
        struct sockaddr_in *a4 = (struct sockaddr_in *) ss;
        struct sockaddr_in6 *a6 = (struct sockaddr_in6 *) ss;
        if (inet_pton(AF_INET, host, &a4->sin_addr) == 1) {
                a4->sin_family = AF_INET;
                a4->sin_port = htons((uint16_t) port);
                *len = sizeof(*a4);
                return 0;
        }
        if (inet_pton(AF_INET6, host, &a6->sin6_addr) == 1) {
                a6->sin6_family = AF_INET6;
                a6->sin6_port = htons((uint16_t) port);
                *len = sizeof(*a6);
                return 0;
        }
        return -EINVAL;
}

/* After an SSL call on a nonblocking socket returned n <= 0: waits until
 * the socket is ready for what TLS wants, up to deadline. Returns 0 to try
 * again, -ETIMEDOUT, or fail for any other error. */
static int ssl_wait(SSL *ssl, int sock, int n, int64_t deadline, int fail) {
        int e = SSL_get_error(ssl, n);
        if (e != SSL_ERROR_WANT_READ && e != SSL_ERROR_WANT_WRITE) {
                ERR_clear_error();
                return fail;
        }
        int left = (int) (deadline - now_ms());
        if (left <= 0)
                return -ETIMEDOUT;
        struct pollfd pf = {.fd = sock, .events = e == SSL_ERROR_WANT_READ ? POLLIN : POLLOUT};
        (void) poll(&pf, 1, left);
        return 0;
}

int relay_ssl_write_all(SSL *ssl, int sock, const void *buf, size_t len, int timeout_ms) {
        int64_t deadline = now_ms() + timeout_ms;
        const uint8_t *p = buf;
        while (len > 0) {
                int n = SSL_write(ssl, p, (int) len);
                if (n > 0) {
                        p += n;
                        len -= (size_t) n;
                        continue;
                }
                int r = ssl_wait(ssl, sock, n, deadline, -EPIPE);
                if (r < 0)
                        return r;
        }
        return 0;
}

int relay_ssl_read_frame(SSL *ssl, int sock, uint8_t *buf, size_t size, size_t *filled,
                         size_t msg_max, int timeout_ms, struct relay_frame *f) {
        int64_t deadline = now_ms() + timeout_ms;
        for (;;) {
                int k = relay_frame_parse(buf, *filled, msg_max, f);
                if (k != 0)
                        return k;
                if (*filled == size)
                        return -EBADMSG;
                int n = SSL_read(ssl, buf + *filled, (int) (size - *filled));
                if (n > 0) {
                        *filled += (size_t) n;
                        continue;
                }
                int r = ssl_wait(ssl, sock, n, deadline, -ECONNRESET);
                if (r < 0)
                        return r;
        }
}
