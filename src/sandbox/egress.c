/* SPDX-License-Identifier: Apache-2.0 */
/* warrend's side of warren-egress: sockets, the supervised process, the
 * control protocol, the self-check probe and the event rings. See
 * egress.h and docs/network.md "The policy path". */
#include "sandbox/egress.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "basic/hostaddr.h"
#include "basic/log.h"
#include "basic/macro.h"
#include "priv/client.h"
#include "runtime/runtime.h"
#include "signer/ca.h"
#include "signer/spawn.h"

#define READY_MS 5000
#define RESULT_MS 2000
#define ARGS_MAX 256

/* A sandbox warrend told the process about (registered), or one whose
 * events are still kept after it ended. */
struct egress_sbx {
        struct egress_sbx *next;
        char id[EGRESS_SANDBOX_ID_MAX + 1];
        bool registered;
        int mode;
        uint32_t addr; /* network order */
        uint8_t *wire;
        size_t wire_len;
        uint8_t *rules; /* net_rules wire form: secret values inside (wiped) */
        size_t rules_len;
        /* resources detected in its traffic (EGRESS_EVENT_RESOURCE): ids */
        char **resources;
        size_t n_resources;
        uint64_t ended_order; /* 0 = live */
        /* the event ring */
        struct sbx_egress_event *ev;
        size_t cap, head, n; /* head = index of the oldest */
        uint64_t next_seq;
        /* the self-check in flight */
        bool probing, probe_seen;
        uint32_t probe_gw;
};

struct sbx_egress {
        uv_loop_t *loop;
        char *path, *upstream;
        char *signer_path, *state_dir, *upstream_ca; /* interception (NULL: none) */
        /* warren-signer, started with each warren-egress (docs/signer.md) */
        pid_t signer_pid;
        int signer_pidfd;
        uv_poll_t *signer_poll;
        bool intercept; /* the running warren-egress has a signer */
        uint16_t deny_ports[16];
        size_t n_deny_ports;
        int listen_fd, dns_udp_fd, dns_tcp_fd;
        uint16_t proxy_port, dns_port;
        /* the running process */
        pid_t pid;
        int pidfd, ctl_fd;
        uv_poll_t *pid_poll, *ctl_poll;
        uv_timer_t *retry; /* allocated: closed (and freed) after g is gone */
        bool freeing;
        unsigned restarts;
        uint64_t next_id;
        struct egress_sbx *list;
        uint64_t ended_count;
        /* the copy ListNetworkEvents reads */
        struct sbx_egress_event *out;
        size_t out_cap;
        struct priv_client *priv; /* --privsep: NET_CONNECT for the self-check */
        int cgroup_mode;
};

static int bind_inet(int type, uint16_t port, int *ret_fd, uint16_t *ret_port) {
        int fd = socket(AF_INET, type | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        if (fd < 0)
                return -errno;
        int one = 1;
        if (type == SOCK_STREAM)
                (void) setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
        struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons(port)};
        socklen_t sl = sizeof(sa);
        if (bind(fd, (struct sockaddr *) &sa, sizeof(sa)) < 0 ||
            (type == SOCK_STREAM && listen(fd, 4096) < 0) ||
            getsockname(fd, (struct sockaddr *) &sa, &sl) < 0) {
                int r = -errno;
                close(fd);
                return r;
        }
        *ret_fd = fd;
        *ret_port = ntohs(sa.sin_port);
        return 0;
}

int sbx_egress_bind(const struct sbx_egress_config *cfg, struct sbx_egress **ret,
                    struct wr_err *e) {
        struct sbx_egress *g = calloc(1, sizeof(*g));
        if (!g)
                return err_set(e, -ENOMEM, "out of memory");
        g->loop = cfg->loop;
        g->listen_fd = g->dns_udp_fd = g->dns_tcp_fd = g->pidfd = g->ctl_fd = -EBADF;
        g->signer_pidfd = -EBADF;
        g->next_id = 1;
        g->path = strdup(cfg->path);
        g->upstream = strdup(cfg->upstream_dns);
        if (cfg->signer_path && cfg->state_dir) {
                struct wr_err ce = {0};
                if (signer_ca_ensure(cfg->state_dir, &ce) < 0) {
                        log_warn("egress: the egress CA is not usable (%s): no TLS interception "
                                 "(per-host rules and credentials are refused)",
                                 ce.msg);
                } else {
                        g->signer_path = strdup(cfg->signer_path);
                        g->state_dir = strdup(cfg->state_dir);
                }
        }
        if (cfg->upstream_ca)
                g->upstream_ca = strdup(cfg->upstream_ca);
        g->priv = cfg->priv;
        g->cgroup_mode = cfg->cgroup_mode;
        for (size_t i = 0; i < cfg->n_deny_ports && i < ELEMENTSOF(g->deny_ports); i++)
                g->deny_ports[g->n_deny_ports++] = cfg->deny_ports[i];
        int r = g->path && g->upstream ? 0 : -ENOMEM;
        if (r >= 0 && (r = bind_inet(SOCK_STREAM, 0, &g->listen_fd, &g->proxy_port)) < 0)
                err_set(e, r, "bind the proxy's socket: %s", strerror(-r));
        /* the resolver: one port number for UDP and TCP (the redirect of
         * port 53 names one port) */
        for (int i = 0; r >= 0 && i < 20; i++) {
                uint16_t p = 0;
                if ((r = bind_inet(SOCK_DGRAM, 0, &g->dns_udp_fd, &g->dns_port)) < 0)
                        break;
                r = bind_inet(SOCK_STREAM, g->dns_port, &g->dns_tcp_fd, &p);
                if (r != -EADDRINUSE)
                        break;
                /* that port is taken for TCP: another pair (r is reset, or
                 * the loop's condition would end the retries at once) */
                closep(&g->dns_udp_fd);
                if (i < 19)
                        r = 0;
        }
        if (r < 0) {
                if (!e || !e->msg[0])
                        err_set(e, r, "bind the resolver's sockets: %s", strerror(-r));
                sbx_egress_free(g);
                return r;
        }
        *ret = g;
        return 0;
}

uint16_t sbx_egress_proxy_port(const struct sbx_egress *g) {
        return g->proxy_port;
}

uint16_t sbx_egress_dns_port(const struct sbx_egress *g) {
        return g->dns_port;
}

pid_t sbx_egress_pid(const struct sbx_egress *g) {
        return g ? g->pid : 0;
}

bool sbx_egress_intercepts(const struct sbx_egress *g) {
        return g && g->intercept;
}

unsigned sbx_egress_restarts(const struct sbx_egress *g) {
        return g ? g->restarts : 0;
}

/* ---- sandboxes and rings ---- */

static struct egress_sbx *sbx_find(struct sbx_egress *g, const char *id) {
        for (struct egress_sbx *s = g->list; s; s = s->next)
                if (strcmp(s->id, id) == 0)
                        return s;
        return NULL;
}

static void sbx_drop(struct sbx_egress *g, struct egress_sbx *s) {
        for (struct egress_sbx **p = &g->list; *p; p = &(*p)->next)
                if (*p == s) {
                        *p = s->next;
                        break;
                }
        free(s->wire);
        erase_and_free_n(s->rules, s->rules_len);
        for (size_t i = 0; i < s->n_resources; i++)
                free(s->resources[i]);
        free(s->resources);
        free(s->ev);
        free(s);
}

static void ring_push(struct egress_sbx *s, const struct egress_event *ev, bool probe) {
        if (s->n == s->cap) {
                if (s->cap < SBX_EGRESS_RING) {
                        size_t nc = s->cap ? s->cap * 2 : 16;
                        if (nc > SBX_EGRESS_RING)
                                nc = SBX_EGRESS_RING;
                        struct sbx_egress_event *v = malloc(nc * sizeof(*v));
                        if (!v)
                                return;
                        for (size_t i = 0; i < s->n; i++)
                                v[i] = s->ev[(s->head + i) % s->cap];
                        free(s->ev);
                        s->ev = v;
                        s->cap = nc;
                        s->head = 0;
                } else { /* full: the oldest goes */
                        s->head = (s->head + 1) % s->cap;
                        s->n--;
                }
        }
        struct sbx_egress_event *slot = &s->ev[(s->head + s->n) % s->cap];
        slot->seq = ++s->next_seq;
        slot->probe = probe;
        slot->ev = *ev;
        s->n++;
}

static void event_take(struct sbx_egress *g, const struct egress_event *ev) {
        if (!ev->sandbox[0]) {
                log_debug("egress: event of an unknown source");
                return;
        }
        struct egress_sbx *s = sbx_find(g, ev->sandbox);
        if (!s)
                return;
        if (ev->kind == EGRESS_EVENT_RESOURCE) {
                /* a pull request the sandbox opened (its html_url), once */
                for (size_t i = 0; i < s->n_resources; i++)
                        if (strcmp(s->resources[i], ev->rule) == 0)
                                return;
                char **v = s->n_resources < SBX_EGRESS_RESOURCES_MAX
                                   ? realloc(s->resources, (s->n_resources + 1) * sizeof(*v))
                                   : NULL;
                if (!v)
                        return;
                s->resources = v;
                if ((v[s->n_resources] = strdup(ev->rule)))
                        s->n_resources++;
                log_info("egress: sandbox %s: detected %s %s", s->id, ev->reason, ev->rule);
                return;
        }
        bool probe = false;
        if (s->probing && ev->kind == EGRESS_EVENT_TCP && ev->port == SBX_EGRESS_PROBE_PORT &&
            ev->verdict == 0 && ev->dialed.family == 4 &&
            memcmp(ev->dialed.bytes, &s->probe_gw, 4) == 0) {
                probe = true;
                s->probe_seen = true;
        }
        ring_push(s, ev, probe);
}

int sbx_egress_resources(struct sbx_egress *g, const char *id, const char *const **ret,
                         size_t *ret_n) {
        struct egress_sbx *s = g ? sbx_find(g, id) : NULL;
        if (!s)
                return -ENOENT;
        *ret = (const char *const *) s->resources;
        *ret_n = s->n_resources;
        return 0;
}

int sbx_egress_events(struct sbx_egress *g, const char *id, uint64_t after_seq, size_t limit,
                      struct sbx_egress_event **ret, size_t *ret_n, uint64_t *ret_last) {
        struct egress_sbx *s = g ? sbx_find(g, id) : NULL;
        if (!s)
                return -ENOENT;
        if (g->out_cap < s->n) {
                struct sbx_egress_event *v = realloc(g->out, s->n * sizeof(*v));
                if (!v)
                        return -ENOMEM;
                g->out = v;
                g->out_cap = s->n;
        }
        size_t k = 0;
        for (size_t i = 0; i < s->n; i++) {
                const struct sbx_egress_event *x = &s->ev[(s->head + i) % s->cap];
                if (x->seq > after_seq)
                        g->out[k++] = *x;
        }
        size_t first = limit && k > limit ? k - limit : 0;
        *ret = g->out + first;
        *ret_n = k - first;
        *ret_last = s->next_seq;
        return 0;
}

/* ---- the control socket ---- */

static void msg_take(struct sbx_egress *g, const struct egress_msg *m) {
        if (m->hdr.type == EGRESS_EVENT)
                event_take(g, &m->event);
}

/* Read one datagram (non-blocking). 1 = *m filled, 0 = nothing, -EPIPE at
 * EOF, -errno. Events are taken as they come. */
static int ctl_read(struct sbx_egress *g, struct egress_msg *m) {
        uint8_t buf[4096];
        ssize_t n = recv(g->ctl_fd, buf, sizeof(buf), MSG_DONTWAIT);
        if (n == 0)
                return -EPIPE;
        if (n < 0)
                return errno == EAGAIN || errno == EINTR ? 0 : -errno;
        struct wr_err de = {0};
        if (egress_msg_decode(buf, (size_t) n, m, &de) < 0) {
                log_warn("egress: bad message from warren-egress: %s", de.msg);
                return 0;
        }
        msg_take(g, m);
        return 1;
}

static uint64_t mono_ms(void) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t) ts.tv_sec * 1000 + (uint64_t) ts.tv_nsec / 1000000;
}

/* Wait for a message of type (and id, unless 0) or, with until_probe, for
 * s->probe_seen; everything read meanwhile is taken. */
static int ctl_wait(struct sbx_egress *g, uint32_t type, uint64_t id, struct egress_sbx *probe,
                    int timeout_ms, struct egress_msg *ret) {
        uint64_t end = mono_ms() + (uint64_t) timeout_ms;
        for (;;) {
                if (probe && probe->probe_seen)
                        return 0;
                if (g->ctl_fd < 0)
                        return -EPIPE;
                struct egress_msg m;
                int r = ctl_read(g, &m);
                if (r < 0)
                        return r;
                if (r > 0) {
                        if (!probe && m.hdr.type == type && (!id || m.hdr.id == id)) {
                                if (ret)
                                        *ret = m;
                                return 0;
                        }
                        continue;
                }
                uint64_t now = mono_ms();
                if (now >= end)
                        return -ETIMEDOUT;
                struct pollfd p = {.fd = g->ctl_fd, .events = POLLIN};
                (void) poll(&p, 1, (int) (end - now));
        }
}

static int ctl_send(struct sbx_egress *g, const void *buf, size_t len) {
        if (g->ctl_fd < 0)
                return -EPIPE;
        uint64_t end = mono_ms() + RESULT_MS;
        for (;;) {
                if (send(g->ctl_fd, buf, len, MSG_DONTWAIT | MSG_NOSIGNAL) == (ssize_t) len)
                        return 0;
                if (errno != EAGAIN && errno != EINTR)
                        return -errno;
                if (mono_ms() >= end)
                        return -ETIMEDOUT;
                struct pollfd p = {.fd = g->ctl_fd, .events = POLLOUT};
                (void) poll(&p, 1, 100);
        }
}

/* Send a POLICY_SET for s and wait for its RESULT. */
static int policy_send(struct sbx_egress *g, struct egress_sbx *s, struct wr_err *e) {
        struct egress_policy_msg pm = {.mode = (enum egress_mode) s->mode, .n_addrs = 1};
        snprintf(pm.sandbox, sizeof(pm.sandbox), "%s", s->id);
        net_addr_from_ipv4(&pm.addrs[0], (const uint8_t *) &s->addr);
        _cleanup_net_policy_ struct net_policy *p = NULL;
        int r;
        if (s->mode == EGRESS_MODE_ENFORCE &&
            (r = net_policy_deserialize(s->wire, s->wire_len, &p, e)) < 0)
                return r;
        pm.policy = p;
        pm.rules_wire = s->rules;
        pm.rules_wire_len = s->rules_len;
        uint8_t *buf = NULL;
        size_t len = 0;
        uint64_t id = g->next_id++;
        if ((r = egress_policy_set_encode(id, &pm, &buf, &len)) < 0)
                return err_set(e, r, "encode POLICY_SET: %s", strerror(-r));
        r = ctl_send(g, buf, len);
        erase_and_free_n(buf, len); /* it held the rules' secret values */
        if (r < 0)
                return err_set(e, r, "send POLICY_SET: %s", strerror(-r));
        struct egress_msg m;
        if ((r = ctl_wait(g, EGRESS_RESULT, id, NULL, RESULT_MS, &m)) < 0)
                return err_set(e, r, "POLICY_SET: no answer from warren-egress: %s", strerror(-r));
        if (m.result.err)
                return err_set(e, -m.result.err, "warren-egress refused the policy: %s",
                               m.result.msg);
        return 0;
}

/* ---- the process ---- */

static void handle_free(uv_handle_t *h) {
        free(h);
}

static void spawn_schedule(struct sbx_egress *g);

/* warren-signer is gone or must go: killed (it lives and dies with
 * warren-egress), reaped, no longer watched. */
static void signer_forget(struct sbx_egress *g) {
        if (g->signer_poll) {
                uv_close((uv_handle_t *) g->signer_poll, handle_free);
                g->signer_poll = NULL;
        }
        if (g->signer_pidfd >= 0)
                (void) syscall(SYS_pidfd_send_signal, g->signer_pidfd, SIGKILL, NULL, 0);
        if (g->signer_pid > 0)
                (void) waitpid(g->signer_pid, NULL, 0);
        closep(&g->signer_pidfd);
        g->signer_pid = 0;
        g->intercept = false;
}

/* The process is gone or must go: close our end, stop watching. */
static void proc_forget(struct sbx_egress *g) {
        signer_forget(g);
        if (g->ctl_poll) {
                uv_close((uv_handle_t *) g->ctl_poll, handle_free);
                g->ctl_poll = NULL;
        }
        if (g->pid_poll) {
                uv_close((uv_handle_t *) g->pid_poll, handle_free);
                g->pid_poll = NULL;
        }
        closep(&g->ctl_fd);
        closep(&g->pidfd);
        g->pid = 0;
}

static void pid_cb(uv_poll_t *h, int status, int events) {
        (void) status;
        (void) events;
        struct sbx_egress *g = h->data;
        int st = 0;
        pid_t pid = g->pid;
        if (waitpid(pid, &st, WNOHANG) != pid) /* --privsep: warren-priv's child, its log says */
                log_warn("egress: warren-egress (pid %d) exited: restarting it (sandbox "
                         "connections wait in the kernel meanwhile)",
                         (int) pid);
        else
                log_warn("egress: warren-egress (pid %d) %s %d: restarting it (sandbox "
                         "connections wait in the kernel meanwhile)",
                         (int) pid, WIFSIGNALED(st) ? "killed by signal" : "exited with status",
                         WIFSIGNALED(st) ? WTERMSIG(st) : WEXITSTATUS(st));
        proc_forget(g);
        g->restarts++;
        spawn_schedule(g);
}

/* warren-signer died: warren-egress goes too (it would refuse every
 * interception), and its restart starts both again. */
static void signer_pid_cb(uv_poll_t *h, int status, int events) {
        (void) status;
        (void) events;
        struct sbx_egress *g = h->data;
        int st = 0;
        if (waitpid(g->signer_pid, &st, WNOHANG) != g->signer_pid) /* --privsep */
                log_warn("egress: warren-signer (pid %d) exited: restarting it with warren-egress",
                         (int) g->signer_pid);
        else
                log_warn("egress: warren-signer (pid %d) %s %d: restarting it with warren-egress",
                         (int) g->signer_pid,
                         WIFSIGNALED(st) ? "killed by signal" : "exited with status",
                         WIFSIGNALED(st) ? WTERMSIG(st) : WEXITSTATUS(st));
        g->signer_pid = 0; /* reaped */
        uv_poll_stop(h);
        if (g->pidfd >= 0)
                (void) syscall(SYS_pidfd_send_signal, g->pidfd, SIGKILL, NULL, 0);
}

/* Start warren-signer with a fresh CA memfd and one end of a new
 * SOCK_SEQPACKET pair; *ret_fd is the end for warren-egress. Negative:
 * no interception for this warren-egress (logged by the caller). */
static int signer_spawn(struct sbx_egress *g, int *ret_fd, struct wr_err *e) {
        int memfd = -EBADF;
        int r = signer_ca_fd(g->state_dir, &memfd, e);
        if (r < 0)
                return r;
        pid_t pid;
        int sock;
        if (g->priv) {
                /* --privsep: warren-priv starts it (HELPER_START) */
                r = priv_signer_start(g->priv, PRIV_SIGNER_CA, memfd, &pid, &g->signer_pidfd, &sock,
                                      e);
                if (r < 0)
                        return r;
                g->signer_pid = pid;
        } else {
                r = signer_start(g->signer_path, "--ca-fd", memfd, &pid, &sock, e);
                if (r < 0)
                        return r;
                g->signer_pid = pid;
                g->signer_pidfd = (int) syscall(SYS_pidfd_open, pid, 0);
        }
        g->signer_poll = calloc(1, sizeof(*g->signer_poll));
        if (g->signer_pidfd < 0 || !g->signer_poll ||
            uv_poll_init(g->loop, g->signer_poll, g->signer_pidfd) < 0) {
                free(g->signer_poll);
                g->signer_poll = NULL;
                if (g->signer_pidfd < 0)
                        kill(pid, SIGKILL);
                signer_forget(g);
                close(sock);
                return err_set(e, -EIO, "cannot watch warren-signer");
        }
        g->signer_poll->data = g;
        uv_poll_start(g->signer_poll, UV_READABLE, signer_pid_cb);
        *ret_fd = sock;
        return 0;
}

static void ctl_cb(uv_poll_t *h, int status, int events) {
        (void) events;
        struct sbx_egress *g = h->data;
        if (status < 0)
                return;
        for (int i = 0; i < 256; i++) {
                struct egress_msg m;
                int r = ctl_read(g, &m);
                if (r == 0)
                        return;
                if (r < 0) {
                        /* the process's end closed: it is dying; the pidfd says when */
                        uv_poll_stop(h);
                        if (g->pidfd >= 0)
                                (void) syscall(SYS_pidfd_send_signal, g->pidfd, SIGKILL, NULL, 0);
                        return;
                }
        }
}

static int spawn_priv(struct sbx_egress *g, int sp[2], int sgfd, struct wr_err *e);
static int spawn_ready(struct sbx_egress *g, struct wr_err *e);

static int spawn(struct sbx_egress *g, struct wr_err *e) {
        int sp[2];
        if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sp) < 0)
                return err_set(e, -errno, "socketpair: %m");
        int big = 2 << 20;
        (void) setsockopt(sp[0], SOL_SOCKET, SO_SNDBUFFORCE, &big, sizeof(big));
        (void) setsockopt(sp[0], SOL_SOCKET, SO_RCVBUFFORCE, &big, sizeof(big));
        /* argv, built before the fork */
        static char addrs[64][INET6_ADDRSTRLEN];
        size_t na = host_addrs_list(addrs, 64, "wr");
        char fds[4][16], ports[16][8];
        snprintf(fds[0], 16, "%d", sp[1]);
        snprintf(fds[1], 16, "%d", g->listen_fd);
        snprintf(fds[2], 16, "%d", g->dns_udp_fd);
        snprintf(fds[3], 16, "%d", g->dns_tcp_fd);
        const char *argv[ARGS_MAX];
        size_t k = 0;
        argv[k++] = g->path;
        argv[k++] = "--ctl-fd";
        argv[k++] = fds[0];
        argv[k++] = "--listen-fd";
        argv[k++] = fds[1];
        argv[k++] = "--dns-fd";
        argv[k++] = fds[2];
        argv[k++] = "--dns-fd";
        argv[k++] = fds[3];
        argv[k++] = "--upstream-dns";
        argv[k++] = g->upstream;
        for (size_t i = 0; i < na && k + 2 < ARGS_MAX - 40; i++) {
                argv[k++] = "--deny-addr";
                argv[k++] = addrs[i];
        }
        for (size_t i = 0; i < g->n_deny_ports; i++) {
                snprintf(ports[i], 8, "%u", g->deny_ports[i]);
                argv[k++] = "--deny-port";
                argv[k++] = ports[i];
        }
        argv[k++] = "--log-level";
        argv[k++] = "info";
        int sgfd = -EBADF;
        char sgs[16];
        if (g->signer_path) {
                struct wr_err se = {0};
                if (signer_spawn(g, &sgfd, &se) < 0)
                        log_warn("egress: warren-signer not started (%s): no TLS interception "
                                 "until warren-egress restarts",
                                 se.msg);
        }
        if (sgfd >= 0) {
                snprintf(sgs, sizeof(sgs), "%d", sgfd);
                argv[k++] = "--signer-fd";
                argv[k++] = sgs;
                if (g->upstream_ca) {
                        argv[k++] = "--upstream-ca";
                        argv[k++] = g->upstream_ca;
                }
        }
        argv[k] = NULL;
        int keep[5] = {sp[1], g->listen_fd, g->dns_udp_fd, g->dns_tcp_fd, sgfd};
        if (g->priv)
                return spawn_priv(g, sp, sgfd, e);
        pid_t pid = fork();
        if (pid < 0) {
                int r = -errno;
                close(sp[0]);
                close(sp[1]);
                closep(&sgfd);
                signer_forget(g);
                return err_set(e, r, "fork: %s", strerror(-r));
        }
        if (pid == 0) {
                sigset_t none;
                sigemptyset(&none);
                sigprocmask(SIG_SETMASK, &none, NULL);
                for (int i = 0; i < 5; i++)
                        if (keep[i] >= 0 && fcntl(keep[i], F_SETFD, 0) < 0)
                                _exit(127);
                execv(argv[0], (char *const *) argv);
                _exit(127);
        }
        close(sp[1]);
        /* warrend keeps no end of the signer's socket */
        g->intercept = sgfd >= 0;
        closep(&sgfd);
        g->ctl_fd = sp[0];
        g->pid = pid;
        g->pidfd = (int) syscall(SYS_pidfd_open, pid, 0);
        if (g->pidfd < 0) {
                int r = -errno;
                kill(pid, SIGKILL);
                (void) waitpid(pid, NULL, 0);
                proc_forget(g);
                return err_set(e, r, "pidfd_open: %s", strerror(-r));
        }
        return spawn_ready(g, e);
}

/* --privsep (docs/privsep.md "Phase 3, helpers"): warren-priv starts
 * warren-egress with the same sockets (HELPER_START {EGRESS}: the resolver,
 * the deny ports; it lists the host's addresses itself) and is its parent;
 * warrend watches it through the pidfd it is sent, as its own child. */
static int spawn_priv(struct sbx_egress *g, int sp[2], int sgfd, struct wr_err *e) {
        struct priv_helper_start h = {.kind = PRIV_HELPER_EGRESS};
        int r = priv_upstream_parse(g->upstream, &h) < 0
                        ? err_set(e, -EINVAL, "upstream resolver %s: not IP[:PORT]", g->upstream)
                        : 0;
        for (size_t i = 0; i < g->n_deny_ports && i < PRIV_HELPER_DENY_PORTS_MAX; i++)
                h.deny_ports[h.n_deny_ports++] = g->deny_ports[i];
        int fds[PRIV_HELPER_FDS_MAX] = {sp[1], g->listen_fd, g->dns_udp_fd, g->dns_tcp_fd};
        size_t n = 4;
        int ca = -EBADF;
        if (sgfd >= 0) {
                h.flags |= PRIV_HELPER_F_SIGNER;
                fds[n++] = sgfd;
                if (g->upstream_ca && r >= 0) {
                        ca = open(g->upstream_ca, O_RDONLY | O_CLOEXEC);
                        if (ca < 0)
                                r = err_set(e, -errno, "--egress-upstream-ca %s: %m",
                                            g->upstream_ca);
                        h.flags |= PRIV_HELPER_F_UPSTREAM_CA;
                        fds[n++] = ca;
                }
        }
        struct priv_helper ph = {.pidfd = -EBADF};
        if (r >= 0)
                r = priv_helper_start(g->priv, &h, fds, n, &ph, e);
        closep(&ca);
        close(sp[1]);
        g->intercept = sgfd >= 0 && r >= 0;
        closep(&sgfd);
        if (r < 0) {
                close(sp[0]);
                signer_forget(g);
                return err_prefix(e, r, "warren-egress through warren-priv");
        }
        g->ctl_fd = sp[0];
        g->pid = ph.pid;
        g->pidfd = ph.pidfd;
        return spawn_ready(g, e);
}

/* The process runs (g->pid, g->pidfd, g->ctl_fd): wait for its READY,
 * watch it, register every sandbox again. */
static int spawn_ready(struct sbx_egress *g, struct wr_err *e) {
        pid_t pid = g->pid;
        struct egress_msg m;
        int r = ctl_wait(g, EGRESS_READY, 0, NULL, READY_MS, &m);
        if (r < 0) {
                (void) syscall(SYS_pidfd_send_signal, g->pidfd, SIGKILL, NULL, 0);
                (void) waitpid(pid, NULL, 0);
                proc_forget(g);
                return err_set(e, r, "warren-egress (%s) did not become ready: %s", g->path,
                               r == -EPIPE ? "it exited (see its log above)" : strerror(-r));
        }
        g->ctl_poll = calloc(1, sizeof(*g->ctl_poll));
        g->pid_poll = calloc(1, sizeof(*g->pid_poll));
        if (!g->ctl_poll || !g->pid_poll) {
                free(g->ctl_poll);
                free(g->pid_poll);
                g->ctl_poll = g->pid_poll = NULL;
                return err_set(e, -ENOMEM, "out of memory");
        }
        g->ctl_poll->data = g->pid_poll->data = g;
        if (uv_poll_init(g->loop, g->ctl_poll, g->ctl_fd) < 0 ||
            uv_poll_init(g->loop, g->pid_poll, g->pidfd) < 0)
                return err_set(e, -EIO, "uv_poll_init failed");
        uv_poll_start(g->ctl_poll, UV_READABLE, ctl_cb);
        uv_poll_start(g->pid_poll, UV_READABLE, pid_cb);
        log_info("egress: warren-egress running (pid %d, %u threads; proxy port %u, resolver "
                 "port %u)",
                 (int) pid, m.ready.threads, g->proxy_port, g->dns_port);
        /* every registration again (a restart) */
        for (struct egress_sbx *s = g->list; s; s = s->next) {
                struct wr_err pe = {0};
                if (s->registered && policy_send(g, s, &pe) < 0)
                        log_warn("egress: sandbox %s: %s", s->id, pe.msg);
        }
        return 0;
}

static void retry_cb(uv_timer_t *t) {
        struct sbx_egress *g = t->data;
        spawn_schedule(g);
}

static void spawn_schedule(struct sbx_egress *g) {
        if (g->freeing)
                return;
        struct wr_err e = {0};
        if (spawn(g, &e) >= 0)
                return;
        log_error("egress: %s (trying again in 1 s; policed sandboxes reach nothing meanwhile)",
                  e.msg);
        if (!g->retry) {
                if (!(g->retry = calloc(1, sizeof(*g->retry))))
                        return;
                if (uv_timer_init(g->loop, g->retry) < 0) {
                        free(g->retry);
                        g->retry = NULL;
                        return;
                }
                g->retry->data = g;
        }
        uv_timer_start(g->retry, retry_cb, 1000, 0);
}

int sbx_egress_start(struct sbx_egress *g, struct wr_err *e) {
        return spawn(g, e);
}

void sbx_egress_free(struct sbx_egress *g) {
        if (!g)
                return;
        g->freeing = true;
        if (g->retry) {
                uv_timer_stop(g->retry);
                uv_close((uv_handle_t *) g->retry, handle_free);
        }
        pid_t pid = g->pid;
        int pidfd = g->pidfd;
        g->pidfd = -EBADF;
        proc_forget(g); /* closes the control socket: the process exits */
        if (pid > 0) {
                struct pollfd p = {.fd = pidfd, .events = POLLIN};
                if (poll(&p, 1, 1000) <= 0)
                        (void) syscall(SYS_pidfd_send_signal, pidfd, SIGKILL, NULL, 0);
                (void) waitpid(pid, NULL, 0);
        }
        if (pidfd >= 0)
                close(pidfd);
        closep(&g->listen_fd);
        closep(&g->dns_udp_fd);
        closep(&g->dns_tcp_fd);
        while (g->list)
                sbx_drop(g, g->list);
        free(g->out);
        free(g->path);
        free(g->upstream);
        free(g->signer_path);
        free(g->state_dir);
        free(g->upstream_ca);
        free(g);
}

/* ---- registrations ---- */

int sbx_egress_register(struct sbx_egress *g, const char *id, int mode, uint32_t addr,
                        const uint8_t *wire, size_t len, const uint8_t *rules, size_t rules_len,
                        struct wr_err *e) {
        struct egress_sbx *s = sbx_find(g, id);
        if (!s) {
                if (!(s = calloc(1, sizeof(*s))))
                        return err_set(e, -ENOMEM, "out of memory");
                snprintf(s->id, sizeof(s->id), "%s", id);
                s->next = g->list;
                g->list = s;
        }
        free(s->wire);
        s->wire = NULL;
        s->wire_len = 0;
        if (len && !(s->wire = malloc(len)))
                return err_set(e, -ENOMEM, "out of memory");
        if (len)
                memcpy(s->wire, wire, len);
        s->wire_len = len;
        erase_and_free_n(s->rules, s->rules_len);
        s->rules = NULL;
        s->rules_len = 0;
        if (rules_len && !(s->rules = malloc(rules_len)))
                return err_set(e, -ENOMEM, "out of memory");
        if (rules_len)
                memcpy(s->rules, rules, rules_len);
        s->rules_len = rules_len;
        s->mode = mode;
        s->addr = addr;
        s->registered = true;
        s->ended_order = 0;
        int r = policy_send(g, s, e);
        if (r < 0) {
                /* not kept (a restart must not send it again) and taken
                 * back in case the process applies it late (it was stuck) */
                sbx_egress_unregister(g, id);
                char m[WR_ERR_MSG_MAX];
                snprintf(m, sizeof(m), "%s", e && e->msg[0] ? e->msg : "failed");
                return err_setx(e, r, WR_STATUS_UNAVAILABLE, WR_FAULT_SERVICE, "egress: %s", m);
        }
        return 0;
}

void sbx_egress_unregister(struct sbx_egress *g, const char *id) {
        struct egress_sbx *s = g ? sbx_find(g, id) : NULL;
        if (!s || !s->registered)
                return;
        s->registered = false;
        s->ended_order = ++g->ended_count;
        /* the secrets go with the registration */
        s->rules = erase_and_free_n(s->rules, s->rules_len);
        s->rules_len = 0;
        uint8_t buf[sizeof(struct egress_hdr) + 64];
        int n = egress_policy_del_encode(g->next_id++, id, buf, sizeof(buf));
        if (n > 0 && ctl_send(g, buf, (size_t) n) < 0)
                log_debug("egress: POLICY_DEL %s not sent (the process is restarting)", id);
        /* the RESULT is read (and ignored) by ctl_cb */
        /* keep the events of the last SBX_EGRESS_ENDED_KEEP ended ones */
        if (g->ended_count > SBX_EGRESS_ENDED_KEEP) {
                uint64_t cut = g->ended_count - SBX_EGRESS_ENDED_KEEP;
                for (struct egress_sbx *x = g->list, *next; x; x = next) {
                        next = x->next;
                        if (!x->registered && x->ended_order && x->ended_order <= cut)
                                sbx_drop(g, x);
                }
        }
}

/* ---- the self-check ---- */

/* On the probe's connected socket: bytes that are neither TLS nor an HTTP
 * method (decided by address at once), then read until the proxy closes. */
static void probe_talk(int fd) {
        static const char hello[] = "\x01warren-egress-probe\n";
        char b[64];
        (void) send(fd, hello, sizeof(hello) - 1, MSG_NOSIGNAL);
        while (recv(fd, b, sizeof(b), 0) > 0)
                ;
}

struct probe_arg {
        pid_t pid;
        uint32_t gw;
        int r;
        struct sbx_egress *g;
        const char *id;
};

/* --privsep: the probe's socket from warren-priv (NET_CONNECT: made in
 * the sandbox's netns, connecting), connected within 1 s; the fd or
 * -errno. */
static int probe_connect_priv(struct probe_arg *a) {
        struct priv_target t = {.pid = (int32_t) a->pid,
                                .cgroup_mode = (uint32_t) a->g->cgroup_mode};
        snprintf(t.id, sizeof(t.id), "%s", a->id);
        int r = rt_proc_start_time(a->pid, &t.start_time);
        if (r < 0)
                return r;
        int fd = -EBADF;
        struct wr_err e = {0};
        r = priv_net_connect(a->g->priv, &t, ntohl(a->gw), SBX_EGRESS_PROBE_PORT, &fd, &e);
        if (r < 0) {
                log_debug("egress: probe of %s: %s", a->id, e.msg);
                return r;
        }
        if (r == 0) {
                struct pollfd p = {.fd = fd, .events = POLLOUT};
                int err = 0;
                socklen_t el = sizeof(err);
                int pr = poll(&p, 1, 1000);
                if (pr <= 0 || getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &el) < 0 || err) {
                        close(fd);
                        return pr == 0 ? -ETIMEDOUT : err ? -err : -errno;
                }
        }
        int fl = fcntl(fd, F_GETFL);
        if (fl >= 0)
                (void) fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
        return fd;
}

static void *probe_thread(void *p) {
        struct probe_arg *a = p;
        if (a->g->priv) {
                int fd = probe_connect_priv(a);
                a->r = fd < 0 ? fd : 0;
                if (fd >= 0) {
                        struct timeval tv = {1, 0};
                        (void) setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
                        (void) setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
                        probe_talk(fd);
                        close(fd);
                }
                return NULL;
        }
        char path[64];
        snprintf(path, sizeof(path), "/proc/%d/ns/net", (int) a->pid);
        int ns = open(path, O_RDONLY | O_CLOEXEC);
        if (ns < 0) {
                a->r = -errno;
                return NULL;
        }
        /* this thread only: net namespaces are per task */
        if (setns(ns, CLONE_NEWNET) < 0) {
                a->r = -errno;
                close(ns);
                return NULL;
        }
        close(ns);
        int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd < 0) {
                a->r = -errno;
                return NULL;
        }
        struct timeval tv = {1, 0};
        (void) setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
        (void) setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
        struct sockaddr_in sa = {.sin_family = AF_INET,
                                 .sin_port = htons(SBX_EGRESS_PROBE_PORT),
                                 .sin_addr.s_addr = a->gw};
        a->r = 0;
        if (connect(fd, (struct sockaddr *) &sa, sizeof(sa)) < 0)
                a->r = -errno; /* refused or timed out: nothing answered as the proxy */
        else
                probe_talk(fd);
        close(fd);
        return NULL;
}

int sbx_egress_probe(struct sbx_egress *g, const char *id, pid_t pid, uint32_t gateway,
                     int timeout_ms, struct wr_err *e) {
        struct egress_sbx *s = sbx_find(g, id);
        if (!s || !s->registered)
                return err_setx(e, -ENOENT, WR_STATUS_FAILED_PRECONDITION, WR_FAULT_SERVICE,
                                "egress enforcement could not be verified: the sandbox is not "
                                "registered");
        s->probing = true;
        s->probe_seen = false;
        s->probe_gw = gateway;
        struct probe_arg a = {.pid = pid, .gw = gateway, .g = g, .id = id};
        pthread_t t;
        int r = pthread_create(&t, NULL, probe_thread, &a);
        if (r == 0) {
                pthread_join(t, NULL);
                r = ctl_wait(g, 0, 0, s, timeout_ms, NULL);
        } else {
                r = -r;
        }
        s->probing = false;
        if (r < 0 || !s->probe_seen)
                return err_setx(
                        e, r < 0 ? r : -ETIMEDOUT, WR_STATUS_FAILED_PRECONDITION, WR_FAULT_SERVICE,
                        "egress enforcement could not be verified: a probe connection "
                        "from the sandbox to its gateway port %d was not reported "
                        "refused by warren-egress (%s%s%s)",
                        SBX_EGRESS_PROBE_PORT, strerror(-(r < 0 ? r : ETIMEDOUT)),
                        a.r < 0 ? "; the probe's connect: " : "", a.r < 0 ? strerror(-a.r) : "");
        return 0;
}
