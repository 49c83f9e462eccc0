/* SPDX-License-Identifier: Apache-2.0 */
/* warrend's own nftables table (nft.h): NAT and isolation for the sandbox
 * range. One table per range (libnftables), replaced whole in one
 * transaction at start (idempotent: a restart finds it and replaces it with
 * the same content), removed only on request. The rules match the range (a
 * set) or the veth name prefix; with warren-egress, a sandbox's address is
 * in at most one of the open4 / pass4 sets, changed over nfnetlink directly
 * (nftab_class_set). Every command is built here from fixed fields, never
 * taken from a caller: warren-priv links this module and carries out the
 * NFT_* requests with it (docs/privsep.md); warrend without --privsep calls
 * it in process. See docs/network.md "The default network". */
#include "priv/nft.h"

#include <arpa/inet.h>
#include <errno.h>
#include <linux/netfilter.h>
#include <linux/netfilter/nf_tables.h>
#include <linux/netfilter/nfnetlink.h>
#include <linux/netlink.h>
#include <malloc.h>
#include <nftables/libnftables.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "basic/macro.h"

#define PEER_PREFIX NFTAB_PEER_PREFIX

/* libnftables is called by one thread at a time (warren-priv serves
 * requests concurrently; its global state is not documented as safe). */
static pthread_mutex_t nft_mu = PTHREAD_MUTEX_INITIALIZER;

/* A libnftables context with buffered output, nft_mu held; NULL (and
 * nft_mu free) when out of memory. */
static struct nft_ctx *ctx_get(void) {
        pthread_mutex_lock(&nft_mu);
        struct nft_ctx *ctx = nft_ctx_new(NFT_CTX_DEFAULT);
        if (!ctx) {
                pthread_mutex_unlock(&nft_mu);
                return NULL;
        }
        nft_ctx_buffer_output(ctx);
        nft_ctx_buffer_error(ctx);
        return ctx;
}

static void ctx_put(struct nft_ctx *ctx) {
        nft_ctx_free(ctx);
        malloc_trim(0);
        pthread_mutex_unlock(&nft_mu);
}

/* Run cmds as one transaction. */
static int nft_run(const char *cmds, struct wr_err *e) {
        struct nft_ctx *ctx = ctx_get();
        if (!ctx)
                return err_set(e, -ENOMEM, "nftables: out of memory");
        int r = nft_run_cmd_from_buffer(ctx, cmds);
        char first[300] = "";
        if (r != 0) {
                const char *msg = nft_ctx_get_error_buffer(ctx);
                snprintf(first, sizeof(first), "%s", msg && *msg ? msg : "failed");
                char *nl = strchr(first, '\n');
                if (nl)
                        *nl = 0;
        }
        ctx_put(ctx);
        return r != 0 ? err_set(e, -EIO, "nftables: %s", first) : 0;
}

/* The fields of an apply, as priv_nft_apply_check has them (one rule for
 * both callers: warren-priv decoded them already, warrend in process did
 * not). */
static int range_fields_check(const char *table, uint32_t base, uint8_t prefix, uint16_t proxy_port,
                              uint16_t dns_port, struct wr_err *e) {
        struct priv_nft_apply a = {
                .base = base, .prefix = prefix, .proxy_port = proxy_port, .dns_port = dns_port};
        size_t n = strlen(table);
        if (n >= sizeof(a.table))
                return err_set(e, -EINVAL, "nftables: table name %.64s is too long", table);
        memcpy(a.table, table, n);
        return priv_nft_apply_check(&a, e);
}

/* The egress parts (proxy_port != 0): a sandbox in neither open4 nor
 * pass4 is policed (fail closed: a fresh table, e.g. after a restart,
 * polices every sandbox until warrend puts the ones without a policy
 * back): its TCP is redirected to the proxy and nothing else of it is
 * forwarded. One in pass4 (credentials without a policy) has its TCP
 * redirected to the proxy too, but everything else of it (UDP, ICMP) is
 * forwarded like an open one's. Every sandbox's DNS (UDP and TCP port 53,
 * any destination) is redirected to the resolver; the egress sockets are
 * reached only through the redirect. */
int nftab_table_apply(const char *table, uint32_t base, uint8_t prefix, uint16_t proxy_port,
                      uint16_t dns_port, struct wr_err *e) {
        int r = range_fields_check(table, base, prefix, proxy_port, dns_port, e);
        if (r < 0)
                return r;
        char range[24];
        snprintf(range, sizeof(range), "%u.%u.%u.%u/%u", base >> 24, (base >> 16) & 255,
                 (base >> 8) & 255, base & 255, (unsigned) prefix);
        /* prerouting: anything from a sandbox's veth (any warrend's: wr*)
         * whose source would not be routed back through it is spoofed
         * (IP_FREEBIND needs no capability); no IPv6 at all.
         * input: a sandbox reaches nothing of the host (every address,
         * every port, its gateway included) but the egress sockets through
         * the redirect.
         * forward: into a sandbox only replies (not from the outside, not
         * from another sandbox); out of it anything but the blocked
         * ranges (policed sandboxes: nothing); no IPv6.
         * output: the host opens nothing into a sandbox.
         * postrouting: masquerade what leaves the host. */
        char eg_nat[800] = "", eg_in[600] = "", eg_in_tail[200] = "", eg_fwd[300] = "",
             eg_set[200] = "", dns_in[200] = "";
        if (proxy_port) {
                snprintf(eg_set, sizeof(eg_set),
                         "  set open4 { type ipv4_addr; }\n  set pass4 { type ipv4_addr; }\n");
                snprintf(eg_nat, sizeof(eg_nat),
                         "  chain egress_nat { type nat hook prerouting priority dstnat; policy "
                         "accept;\n"
                         "    iifname \"" PEER_PREFIX "*\" ip saddr @sandboxes meta "
                         "l4proto { tcp, udp } th dport 53 redirect to :%u\n"
                         "    iifname \"" PEER_PREFIX "*\" ip saddr @sandboxes ip saddr "
                         "!= @open4 meta l4proto tcp redirect to :%u\n"
                         "  }\n",
                         dns_port, proxy_port);
                snprintf(eg_in, sizeof(eg_in),
                         "    ip saddr @sandboxes ct status dnat meta l4proto { tcp, udp } th "
                         "dport %u accept\n"
                         "    ip saddr @sandboxes ip saddr != @open4 ct status dnat meta l4proto "
                         "tcp th dport %u accept\n",
                         dns_port, proxy_port);
                snprintf(eg_in_tail, sizeof(eg_in_tail),
                         "    meta l4proto { tcp, udp } th dport { %u, %u } drop\n", dns_port,
                         proxy_port);
                /* pass4's TCP is never forwarded (the redirect took every
                 * new connection; this catches flows conntrack had before
                 * the address moved sets) */
                snprintf(eg_fwd, sizeof(eg_fwd),
                         "    ip saddr @pass4 meta l4proto tcp drop\n"
                         "    ip saddr @sandboxes ip saddr != @open4 ip saddr != @pass4 drop\n");
        } else {
                snprintf(dns_in, sizeof(dns_in),
                         "    ip saddr @sandboxes ip daddr @resolver4 meta l4proto { tcp, udp } th "
                         "dport 53 accept\n");
        }
        char *cmds = NULL;
        int n = asprintf(
                &cmds,
                "add table inet %1$s\n"
                "delete table inet %1$s\n"
                "table inet %1$s {\n"
                "  set sandboxes { type ipv4_addr; flags interval; elements = { %2$s } }\n"
                "  set blocked4 { type ipv4_addr; flags interval; elements = { 0.0.0.0/8, "
                "127.0.0.0/8, 169.254.0.0/16, 224.0.0.0/4, 240.0.0.0/4 } }\n"
                "  set resolver4 { type ipv4_addr; }\n"
                "%3$s"
                "  chain prerouting { type filter hook prerouting priority -150; policy accept;\n"
                "    iifname \"" PEER_PREFIX "*\" meta nfproto ipv6 drop\n"
                "    iifname \"" PEER_PREFIX "*\" fib saddr . iif oif missing drop\n"
                "  }\n"
                "%4$s"
                "  chain input { type filter hook input priority 0; policy accept;\n"
                "%5$s%6$s"
                "    ip saddr @sandboxes ct state established,related accept\n"
                "    ip saddr @sandboxes drop\n"
                "%7$s"
                "  }\n"
                "  chain forward { type filter hook forward priority 0; policy accept;\n"
                "    ip daddr @sandboxes ct state established,related accept\n"
                "    ip daddr @sandboxes drop\n"
                "    iifname \"" PEER_PREFIX "*\" meta nfproto ipv6 drop\n"
                "    oifname \"" PEER_PREFIX "*\" meta nfproto ipv6 drop\n"
                "%8$s"
                "    ip saddr @sandboxes ip daddr @blocked4 drop\n"
                "    ip saddr @sandboxes accept\n"
                "  }\n"
                "  chain output { type filter hook output priority 0; policy accept;\n"
                "    ip daddr @sandboxes ct state established,related accept\n"
                "    ip daddr @sandboxes drop\n"
                "    oifname \"" PEER_PREFIX "*\" meta nfproto ipv6 drop\n"
                "  }\n"
                "  chain postrouting { type nat hook postrouting priority 100; policy accept;\n"
                "    ip saddr @sandboxes oifname != \"" PEER_PREFIX "*\" masquerade\n"
                "  }\n"
                "}\n",
                table, range, eg_set, eg_nat, dns_in, eg_in, eg_in_tail, eg_fwd);
        if (n < 0)
                return err_set(e, -ENOMEM, "nftables: out of memory");
        r = nft_run(cmds, e);
        free(cmds);
        return r < 0 ? err_prefix(e, r, "table inet %s", table) : 0;
}

static const char *const set_names[] = {[NFTAB_OPEN] = "open4", [NFTAB_PASS] = "pass4"};

/* ---- set elements over nfnetlink ----
 *
 * A class change is one or two element changes in one batch (one
 * transaction), sent straight to the kernel: libnftables costs 13-18 ms
 * of CPU per call here (a context, the parser, a cache of the host's
 * ruleset), and the warm pool makes two per sandbox (its open4 element
 * in, at the prestart; out, at the retire), on worker threads that
 * compete with the creates for the CPUs. This is ~0.1 ms. */

#define NFB_MAX 1024

struct nfb {
        size_t len;
        unsigned n_acked; /* messages that ask for an ACK */
        uint32_t seq;
        _Alignas(struct nlmsghdr) uint8_t buf[NFB_MAX];
};

static struct nlmsghdr *nfb_msg(struct nfb *b, uint16_t type, uint16_t flags, uint8_t family,
                                uint16_t res_id) {
        struct nlmsghdr *h = (struct nlmsghdr *) (b->buf + b->len);
        size_t len = NLMSG_LENGTH(sizeof(struct nfgenmsg));
        memset(h, 0, NLMSG_ALIGN(len));
        h->nlmsg_len = (uint32_t) len;
        h->nlmsg_type = type;
        h->nlmsg_flags = (uint16_t) (NLM_F_REQUEST | flags);
        h->nlmsg_seq = ++b->seq;
        struct nfgenmsg *g = NLMSG_DATA(h);
        g->nfgen_family = family;
        g->version = NFNETLINK_V0;
        g->res_id = htons(res_id);
        b->len += NLMSG_ALIGN(len);
        if (flags & NLM_F_ACK)
                b->n_acked++;
        return h;
}

static struct nlattr *nfb_attr(struct nfb *b, struct nlmsghdr *h, uint16_t type, const void *data,
                               size_t len) {
        struct nlattr *a = (struct nlattr *) (b->buf + b->len);
        a->nla_type = type;
        a->nla_len = (uint16_t) (NLA_HDRLEN + len);
        if (len)
                memcpy((uint8_t *) a + NLA_HDRLEN, data, len);
        size_t total = NLA_ALIGN(NLA_HDRLEN + len);
        memset((uint8_t *) a + NLA_HDRLEN + len, 0, total - NLA_HDRLEN - len);
        b->len += total;
        h->nlmsg_len += (uint32_t) total;
        return a;
}

static void nfb_nest_end(struct nfb *b, struct nlattr *a) {
        a->nla_len = (uint16_t) (b->buf + b->len - (uint8_t *) a);
}

/* {NEW,DEL}SETELEM of one IPv4 address in set `set` of inet table `table`
 * (room checked by the caller: names are short, NFB_MAX holds four). */
static void nfb_elem(struct nfb *b, uint16_t msg, const char *table, const char *set,
                     uint32_t addr_be) {
        struct nlmsghdr *h =
                nfb_msg(b, (uint16_t) (NFNL_SUBSYS_NFTABLES << 8 | msg),
                        (uint16_t) (NLM_F_ACK | (msg == NFT_MSG_NEWSETELEM ? NLM_F_CREATE : 0)),
                        NFPROTO_INET, 0);
        nfb_attr(b, h, NFTA_SET_ELEM_LIST_TABLE, table, strlen(table) + 1);
        nfb_attr(b, h, NFTA_SET_ELEM_LIST_SET, set, strlen(set) + 1);
        struct nlattr *list = nfb_attr(b, h, NLA_F_NESTED | NFTA_SET_ELEM_LIST_ELEMENTS, NULL, 0);
        struct nlattr *el = nfb_attr(b, h, NLA_F_NESTED | NFTA_LIST_ELEM, NULL, 0);
        struct nlattr *key = nfb_attr(b, h, NLA_F_NESTED | NFTA_SET_ELEM_KEY, NULL, 0);
        nfb_attr(b, h, NFTA_DATA_VALUE, &addr_be, sizeof(addr_be));
        nfb_nest_end(b, key);
        nfb_nest_end(b, el);
        nfb_nest_end(b, list);
}

/* Send b (a batch) and read its ACKs: 0 or the first error (negative
 * errno). The kernel handles a batch inside sendto() and queues every
 * answer before it returns, so the answers are read without waiting (as
 * libnftables does); a batch the kernel refuses whole answers once, for
 * its header, not once per message that asked. */
static int nfb_run(struct nfb *b) {
        int fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_NETFILTER);
        if (fd < 0)
                return -errno;
        struct sockaddr_nl kernel = {.nl_family = AF_NETLINK};
        int r = 0;
        if (sendto(fd, b->buf, b->len, 0, (struct sockaddr *) &kernel, sizeof(kernel)) < 0) {
                r = -errno;
                goto out;
        }
        _Alignas(struct nlmsghdr) uint8_t rbuf[4096];
        unsigned got = 0;
        while (got < b->n_acked) {
                struct sockaddr_nl from;
                socklen_t fl = sizeof(from);
                ssize_t n = recvfrom(fd, rbuf, sizeof(rbuf), MSG_DONTWAIT,
                                     (struct sockaddr *) &from, &fl);
                if (n < 0) {
                        if (errno == EINTR)
                                continue;
                        if (errno != EAGAIN && errno != EWOULDBLOCK && !r)
                                r = -errno;
                        break;
                }
                if (from.nl_pid != 0) /* not the kernel */
                        continue;
                for (struct nlmsghdr *h = (struct nlmsghdr *) rbuf; NLMSG_OK(h, (size_t) n);
                     h = NLMSG_NEXT(h, n)) {
                        if (h->nlmsg_type != NLMSG_ERROR || h->nlmsg_seq == 0 ||
                            h->nlmsg_seq > b->seq)
                                continue;
                        const struct nlmsgerr *er = NLMSG_DATA(h);
                        if (er->error && !r)
                                r = er->error;
                        got++;
                }
        }
        if (!r && got < b->n_acked)
                r = -EPROTO; /* an answer missing, and no error said why */
out:
        close(fd);
        return r;
}

int nftab_class_set(const char *table, uint32_t addr, enum nftab_class from, enum nftab_class to,
                    struct wr_err *e) {
        /* one transaction: out of the old set and into the new at once */
        struct in_addr a = {.s_addr = htonl(addr)};
        char txt[INET_ADDRSTRLEN];
        inet_ntop(AF_INET, &a, txt, sizeof(txt));
        if (!priv_nft_table_ok(table) || (unsigned) from > NFTAB_PASS || (unsigned) to > NFTAB_PASS)
                return err_set(e, -EINVAL, "nftables: bad element %.64s %s", table, txt);
        if (from == to || (from == NFTAB_POLICED && to == NFTAB_POLICED))
                return 0;
        struct nfb *b = calloc(1, sizeof(*b));
        if (!b)
                return err_set(e, -ENOMEM, "out of memory");
        nfb_msg(b, NFNL_MSG_BATCH_BEGIN, 0, AF_UNSPEC, NFNL_SUBSYS_NFTABLES);
        if (from != NFTAB_POLICED)
                nfb_elem(b, NFT_MSG_DELSETELEM, table, set_names[from], a.s_addr);
        if (to != NFTAB_POLICED)
                nfb_elem(b, NFT_MSG_NEWSETELEM, table, set_names[to], a.s_addr);
        nfb_msg(b, NFNL_MSG_BATCH_END, 0, AF_UNSPEC, NFNL_SUBSYS_NFTABLES);
        int r = nfb_run(b);
        free(b);
        return r < 0 ? err_set(e, -EIO, "nftables: table inet %s %s: %s -> %s: %s", table, txt,
                               from ? set_names[from] : "policed", to ? set_names[to] : "policed",
                               strerror(-r))
                     : 0;
}

int nftab_tables(char ***ret, struct wr_err *e) {
        struct nft_ctx *ctx = ctx_get();
        if (!ctx)
                return err_set(e, -ENOMEM, "nftables: out of memory");
        if (nft_run_cmd_from_buffer(ctx, "list tables inet\n") != 0) {
                ctx_put(ctx);
                return err_set(e, -EIO, "nftables: list tables failed");
        }
        const char *out = nft_ctx_get_output_buffer(ctx);
        size_t n = 0;
        char **v = calloc(1, sizeof(char *));
        int r = v ? 0 : -ENOMEM;
        /* lines "table inet NAME" */
        for (const char *p = out; r >= 0 && p && *p;) {
                const char *nl = strchr(p, '\n');
                size_t len = nl ? (size_t) (nl - p) : strlen(p);
                char name[64];
                if (len < 128 && sscanf(p, "table inet %63s", name) == 1 &&
                    priv_nft_table_ok(name)) {
                        char **nv = realloc(v, (n + 2) * sizeof(char *));
                        if (!nv || !(nv[n] = strdup(name))) {
                                if (nv)
                                        v = nv;
                                r = -ENOMEM;
                                break;
                        }
                        v = nv;
                        v[++n] = NULL;
                }
                p = nl ? nl + 1 : p + len;
        }
        ctx_put(ctx);
        if (r < 0) {
                for (size_t i = 0; v && i < n; i++)
                        free(v[i]);
                free(v);
                return err_set(e, r, "nftables: out of memory");
        }
        *ret = v;
        return (int) n;
}

int nftab_table_remove(const char *table, struct wr_err *e) {
        if (!priv_nft_table_ok(table))
                return err_set(e, -EINVAL, "nftables: %.64s is not a warren table name", table);
        char cmds[160];
        snprintf(cmds, sizeof(cmds), "add table inet %1$s\ndelete table inet %1$s\n", table);
        int r = nft_run(cmds, e);
        return r < 0 ? err_prefix(e, r, "remove table inet %s", table) : 0;
}
