/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* warren-egress internals: the process-wide configuration, the sandbox
 * table (source address -> sandbox and policy), events to warrend, the
 * proxy workers, the resolver and the confinement. See docs/network.md,
 * "The egress process".
 *
 * Threading: main() runs one libuv loop (control socket + resolver) and
 * starts cfg.threads proxy workers, each with its own loop, its own c-ares
 * channel and a poll on every listening fd. The sandbox table is shared
 * read-mostly (a rwlock; entries refcounted and immutable once published).
 * Events may be sent from any thread (one mutex around send(2)). */

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>

#include "egress/egress-proto.h"
#include "net/net.h"

#define EGRESS_FDS_MAX 16
#define EGRESS_UPSTREAMS_MAX 4
#define EGRESS_DENY_MAX 64

struct egress_upstream {
        struct sockaddr_storage sa;
        socklen_t salen;
};

struct egress_config {
        int ctl_fd;
        int listen_fds[EGRESS_FDS_MAX];
        size_t n_listen;
        int dns_fds[EGRESS_FDS_MAX];
        size_t n_dns;
        struct egress_upstream upstreams[EGRESS_UPSTREAMS_MAX];
        size_t n_upstreams;
        char ares_servers[512]; /* the upstreams as c-ares CSV */
        unsigned threads;
        const char *user, *group, *root;
        struct net_addr deny_addrs[EGRESS_DENY_MAX];
        uint16_t deny_ports[EGRESS_DENY_MAX];
        struct net_host_deny host_deny;
        unsigned first_byte_ms;   /* wait for a first byte before deciding raw TCP */
        unsigned head_timeout_ms; /* whole TLS hello / HTTP head */
        unsigned connect_timeout_ms;
        unsigned dns_timeout_ms;
        unsigned max_conns;
        bool confine; /* false only with --no-confine (tests of the unconfined path) */
};

extern struct egress_config egress_cfg;
extern atomic_uint egress_nconns;

/* --- sandboxes.c --- */
struct egress_sb {
        atomic_int ref;
        char id[EGRESS_SANDBOX_ID_MAX + 1];
        enum egress_mode mode;
        size_t n_addrs;
        struct net_addr addrs[EGRESS_ADDRS_MAX];
        struct net_policy *policy; /* ENFORCE only */
        struct net_rules *rules;   /* hosts intercepted (rules, credentials); NULL = none */
};

/* Install (or replace, same id) the sandbox of m; takes m->policy (set to
 * NULL). -EEXIST (message) when an address belongs to another sandbox,
 * -ENOSPC past the table size, -ENOMEM. */
int egress_sb_set(struct egress_policy_msg *m, struct wr_err *e);
/* Remove the sandbox id: 0, or -ENOENT. Connections that hold it finish
 * under the policy they started with. */
int egress_sb_del(const char *id);
/* The sandbox owning source address src (IPv4-mapped decoded), with a
 * reference (egress_sb_unref), or NULL. */
struct egress_sb *egress_sb_lookup(const struct net_addr *src);
void egress_sb_unref(struct egress_sb *sb);
unsigned egress_sb_count(void);

/* --- events (main.c) --- */
/* Stamp ev with the time and send it on the control socket (any thread;
 * one mutex); logged at debug level. Dropped (and counted, PONG) when the
 * socket is full: it never blocks a loop. */
void egress_event_send(struct egress_event *ev);
/* Fill ev's sandbox id, mode and source address (sb NULL: unknown source,
 * id "" and mode 0). */
void egress_event_fill_sb(struct egress_event *ev, const struct egress_sb *sb,
                          const struct net_addr *src);

/* --- proxy.c --- */
/* egress_proxy_prepare (before confinement): for each of cfg.threads
 * workers a libuv loop, a c-ares channel on cfg's upstreams and a poll
 * handle per listening fd. egress_proxy_start (after): start the worker
 * threads (they run until the process exits). Negative errno with a
 * message; the process exits on failure, so nothing is unwound. */
int egress_proxy_prepare(struct wr_err *e);
int egress_proxy_start(struct wr_err *e);

/* --- resolver.c --- */
/* Serve DNS on cfg.dns_fds in loop (the main loop, which must then run on
 * this thread only). Negative errno with a message for an unusable fd. */
struct uv_loop_s;
int egress_resolver_start(struct uv_loop_s *loop, struct wr_err *e);

/* --- confine.c --- */
/* Drop everything: chroot to cfg.root (an empty directory owned by root,
 * not group/other-writable; created 0755 with its parents if missing), the
 * user/group, capabilities (bounding and ambient too), no_new_privs,
 * rlimits, the seccomp allowlist. Called once, by the only thread. */
int egress_confine(struct wr_err *e);

/* sockaddr <-> net_addr (IPv4-mapped IPv6 decoded to IPv4); the port in
 * host order. egress_net_to_sockaddr returns the sockaddr's length. */
void egress_sockaddr_to_net(const struct sockaddr *sa, struct net_addr *ret, uint16_t *port);
socklen_t egress_net_to_sockaddr(const struct net_addr *a, uint16_t port,
                                 struct sockaddr_storage *ret);
/* CLOCK_REALTIME in nanoseconds (event time stamps). */
uint64_t egress_now_ns(void);
