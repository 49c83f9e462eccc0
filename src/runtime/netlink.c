/* SPDX-License-Identifier: Apache-2.0 */
/* Host-side network plumbing over NETLINK_ROUTE (the caller's network
 * namespace): delete a link, list links by name prefix, list IPv4 routes
 * (for the daemon's range collision check). The sandbox's own half (its
 * veth, made from inside) is in child.c. */

#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <sched.h>
#include <net/if.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "runtime/runtime-internal.h"

struct nl_req {
        struct nlmsghdr h;
        union {
                struct ifinfomsg ifi;
                struct rtmsg rt;
        } u;
        char attrs[64];
};

static int nl_open(struct wr_err *e) {
        int fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE);
        if (fd < 0)
                return err_set(e, -errno, "netlink socket: %m");
        return fd;
}

/* An empty request: header and a zeroed body of body bytes (the
 * ifinfomsg or rtmsg), attributes to follow. */
static void nl_req_init(struct nl_req *q, uint16_t type, uint16_t flags, size_t body) {
        memset(q, 0, sizeof(*q));
        q->h.nlmsg_len = NLMSG_LENGTH(body);
        q->h.nlmsg_type = type;
        q->h.nlmsg_flags = NLM_F_REQUEST | flags;
}

static void nl_put_str(struct nl_req *q, unsigned short type, const char *s) {
        size_t off = NLMSG_ALIGN(q->h.nlmsg_len), len = strlen(s) + 1;
        struct rtattr *a = (struct rtattr *) ((char *) q + off);
        a->rta_type = type;
        a->rta_len = (unsigned short) RTA_LENGTH(len);
        memcpy(RTA_DATA(a), s, len);
        q->h.nlmsg_len = (uint32_t) (off + RTA_ALIGN(a->rta_len));
}

/* Send q; read replies until the ack (or the end of a dump), calling fn
 * on every other message. Returns 0 or the kernel's negative errno. */
static int nl_exchange(int fd, struct nl_req *q, void (*fn)(const struct nlmsghdr *, void *),
                       void *userdata) {
        struct sockaddr_nl sa = {.nl_family = AF_NETLINK};
        q->h.nlmsg_seq = 1;
        if (sendto(fd, q, q->h.nlmsg_len, 0, (struct sockaddr *) &sa, sizeof(sa)) < 0)
                return -errno;
        _cleanup_free_ char *buf = malloc(32768);
        if (!buf)
                return -ENOMEM;
        for (;;) {
                ssize_t n = recv(fd, buf, 32768, 0);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n <= 0)
                        return n < 0 ? -errno : -EIO;
                size_t len = (size_t) n;
                for (struct nlmsghdr *h = (struct nlmsghdr *) buf; NLMSG_OK(h, len);
                     h = NLMSG_NEXT(h, len)) {
                        if (h->nlmsg_type == NLMSG_DONE)
                                return 0;
                        if (h->nlmsg_type == NLMSG_ERROR) {
                                const struct nlmsgerr *er = NLMSG_DATA(h);
                                return er->error;
                        }
                        if (fn)
                                fn(h, userdata);
                }
        }
}

int rt_net_link_delete(const char *name, struct wr_err *e) {
        if (!name || !name[0] || strlen(name) >= IFNAMSIZ)
                return err_set(e, -EINVAL, "delete link: bad name");
        _cleanup_close_ int fd = nl_open(e);
        if (fd < 0)
                return fd;
        struct nl_req q;
        nl_req_init(&q, RTM_DELLINK, NLM_F_ACK, sizeof(struct ifinfomsg));
        q.u.ifi.ifi_family = AF_UNSPEC;
        nl_put_str(&q, IFLA_IFNAME, name);
        int r = nl_exchange(fd, &q, NULL, NULL);
        if (r == -ENODEV)
                return 0;
        if (r < 0)
                return err_set(e, r, "delete link %s: %s", name, strerror(-r));
        return 1;
}

struct links_ctx {
        const char *prefix;
        char (*names)[IFNAMSIZ];
        size_t max, n;
};

static void link_cb(const struct nlmsghdr *h, void *userdata) {
        struct links_ctx *c = userdata;
        if (h->nlmsg_type != RTM_NEWLINK)
                return;
        const struct ifinfomsg *ifi = NLMSG_DATA(h);
        size_t len = IFLA_PAYLOAD(h);
        for (const struct rtattr *a = IFLA_RTA(ifi); RTA_OK(a, len); a = RTA_NEXT(a, len)) {
                if (a->rta_type != IFLA_IFNAME)
                        continue;
                const char *name = RTA_DATA(a);
                size_t n = strnlen(name, RTA_PAYLOAD(a));
                if (n >= IFNAMSIZ || strncmp(name, c->prefix, strlen(c->prefix)) != 0)
                        return;
                if (c->n < c->max) {
                        memcpy(c->names[c->n], name, n);
                        c->names[c->n][n] = 0;
                }
                c->n++;
                return;
        }
}

int rt_net_links(const char *prefix, char (*names)[IFNAMSIZ], size_t max, size_t *ret_n,
                 struct wr_err *e) {
        _cleanup_close_ int fd = nl_open(e);
        if (fd < 0)
                return fd;
        struct nl_req q;
        nl_req_init(&q, RTM_GETLINK, NLM_F_DUMP, sizeof(struct ifinfomsg));
        q.u.ifi.ifi_family = AF_UNSPEC;
        struct links_ctx c = {.prefix = prefix, .names = names, .max = max};
        int r = nl_exchange(fd, &q, link_cb, &c);
        if (r < 0)
                return err_set(e, r, "list links: %s", strerror(-r));
        *ret_n = c.n;
        return 0;
}

struct routes_ctx {
        struct rt_route4 *out;
        size_t max, n;
};

static void route_cb(const struct nlmsghdr *h, void *userdata) {
        struct routes_ctx *c = userdata;
        if (h->nlmsg_type != RTM_NEWROUTE)
                return;
        const struct rtmsg *rt = NLMSG_DATA(h);
        if (rt->rtm_family != AF_INET)
                return;
        struct rt_route4 r = {
                .prefix = rt->rtm_dst_len, .table = rt->rtm_table, .type = rt->rtm_type};
        size_t len = RTM_PAYLOAD(h);
        for (const struct rtattr *a = RTM_RTA(rt); RTA_OK(a, len); a = RTA_NEXT(a, len)) {
                if (a->rta_type == RTA_DST && RTA_PAYLOAD(a) == 4)
                        memcpy(&r.dst, RTA_DATA(a), 4);
                else if (a->rta_type == RTA_OIF && RTA_PAYLOAD(a) == 4)
                        memcpy(&r.oif, RTA_DATA(a), 4);
                else if (a->rta_type == RTA_TABLE && RTA_PAYLOAD(a) == 4)
                        memcpy(&r.table, RTA_DATA(a), 4);
        }
        if (r.oif == 0 || !if_indextoname((unsigned) r.oif, r.dev))
                r.dev[0] = 0;
        if (c->n < c->max)
                c->out[c->n] = r;
        c->n++;
}

int rt_net_routes4(struct rt_route4 *out, size_t max, size_t *ret_n, struct wr_err *e) {
        _cleanup_close_ int fd = nl_open(e);
        if (fd < 0)
                return fd;
        struct nl_req q;
        nl_req_init(&q, RTM_GETROUTE, NLM_F_DUMP, sizeof(struct rtmsg));
        q.u.rt.rtm_family = AF_INET;
        struct routes_ctx c = {.out = out, .max = max};
        int r = nl_exchange(fd, &q, route_cb, &c);
        if (r < 0)
                return err_set(e, r, "list routes: %s", strerror(-r));
        *ret_n = c.n;
        return 0;
}

/* ---- a connection from inside another network namespace ---- */

struct conn_job {
        int pidfd;
        uint32_t addr;
        uint16_t port;
        int fd, r;
};

static void *conn_thread(void *arg) {
        struct conn_job *j = arg;
        if (setns(j->pidfd, CLONE_NEWNET) < 0) {
                j->r = -errno;
                return NULL;
        }
        int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        if (fd < 0) {
                j->r = -errno;
                return NULL;
        }
        int one = 1;
        (void) setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
        struct sockaddr_in sa = {.sin_family = AF_INET,
                                 .sin_port = htons(j->port),
                                 .sin_addr.s_addr = htonl(j->addr)};
        if (connect(fd, (struct sockaddr *) &sa, sizeof(sa)) == 0) {
                j->r = 1;
        } else if (errno == EINPROGRESS) {
                j->r = 0;
        } else {
                j->r = -errno;
                close(fd);
                return NULL;
        }
        j->fd = fd;
        return NULL;
}

int rt_net_connect_in(int pidfd, uint32_t addr, uint16_t port, int *ret_fd) {
        struct conn_job j = {.pidfd = pidfd, .addr = addr, .port = port, .fd = -EBADF, .r = -EIO};
        pthread_t t;
        int r = pthread_create(&t, NULL, conn_thread, &j);
        if (r != 0)
                return -r;
        pthread_join(t, NULL);
        if (j.r >= 0)
                *ret_fd = j.fd;
        return j.r;
}
