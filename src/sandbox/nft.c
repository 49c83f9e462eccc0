/* SPDX-License-Identifier: Apache-2.0 */
/* warrend's own nftables table (libnftables): NAT and isolation for the
 * sandbox range. One table per range, replaced whole in one transaction
 * at start (idempotent: a restart finds it and replaces it with the same
 * content), removed only on request. No per-sandbox element: every rule
 * matches the range (a set) or the veth name prefix, so a create never
 * touches nftables. See docs/network.md "The default network". */
#include "sandbox/network-internal.h"

#include <errno.h>
#include <nftables/libnftables.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "basic/macro.h"

/* Run cmds as one transaction. */
static int nft_run(const char *cmds, struct wr_err *e) {
        struct nft_ctx *ctx = nft_ctx_new(NFT_CTX_DEFAULT);
        if (!ctx)
                return err_set(e, -ENOMEM, "nftables: out of memory");
        nft_ctx_buffer_output(ctx);
        nft_ctx_buffer_error(ctx);
        int r = nft_run_cmd_from_buffer(ctx, cmds);
        if (r != 0) {
                const char *msg = nft_ctx_get_error_buffer(ctx);
                char first[300];
                snprintf(first, sizeof(first), "%s", msg && *msg ? msg : "failed");
                char *nl = strchr(first, '\n');
                if (nl)
                        *nl = 0;
                nft_ctx_free(ctx);
                return err_set(e, -EIO, "nftables: %s", first);
        }
        nft_ctx_free(ctx);
        return 0;
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
int sbx_nft_table_apply(const char *table, const char *range, uint16_t proxy_port,
                        uint16_t dns_port, struct wr_err *e) {
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
                         "    iifname \"" SBX_NET_PEER_PREFIX "*\" ip saddr @sandboxes meta "
                         "l4proto { tcp, udp } th dport 53 redirect to :%u\n"
                         "    iifname \"" SBX_NET_PEER_PREFIX "*\" ip saddr @sandboxes ip saddr "
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
                "    iifname \"" SBX_NET_PEER_PREFIX "*\" meta nfproto ipv6 drop\n"
                "    iifname \"" SBX_NET_PEER_PREFIX "*\" fib saddr . iif oif missing drop\n"
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
                "    iifname \"" SBX_NET_PEER_PREFIX "*\" meta nfproto ipv6 drop\n"
                "    oifname \"" SBX_NET_PEER_PREFIX "*\" meta nfproto ipv6 drop\n"
                "%8$s"
                "    ip saddr @sandboxes ip daddr @blocked4 drop\n"
                "    ip saddr @sandboxes accept\n"
                "  }\n"
                "  chain output { type filter hook output priority 0; policy accept;\n"
                "    ip daddr @sandboxes ct state established,related accept\n"
                "    ip daddr @sandboxes drop\n"
                "    oifname \"" SBX_NET_PEER_PREFIX "*\" meta nfproto ipv6 drop\n"
                "  }\n"
                "  chain postrouting { type nat hook postrouting priority 100; policy accept;\n"
                "    ip saddr @sandboxes oifname != \"" SBX_NET_PEER_PREFIX "*\" masquerade\n"
                "  }\n"
                "}\n",
                table, range, eg_set, eg_nat, dns_in, eg_in, eg_in_tail, eg_fwd);
        if (n < 0)
                return err_set(e, -ENOMEM, "nftables: out of memory");
        int r = nft_run(cmds, e);
        free(cmds);
        return r < 0 ? err_prefix(e, r, "table inet %s", table) : 0;
}

static const char *const set_names[] = {[SBX_NET_OPEN] = "open4", [SBX_NET_PASS] = "pass4"};

int sbx_nft_class_set(const char *table, const char *addr, enum sbx_net_class from,
                      enum sbx_net_class to, struct wr_err *e) {
        /* one transaction: out of the old set and into the new at once */
        char cmds[400];
        int n = 0;
        if (from != SBX_NET_POLICED)
                n += snprintf(cmds + n, sizeof(cmds) - (size_t) n,
                              "delete element inet %s %s { %s }\n", table, set_names[from], addr);
        if (to != SBX_NET_POLICED)
                n += snprintf(cmds + n, sizeof(cmds) - (size_t) n,
                              "add element inet %s %s { %s }\n", table, set_names[to], addr);
        if (!n)
                return 0;
        int r = nft_run(cmds, e);
        return r < 0 ? err_prefix(e, r, "%s %s: %s -> %s", table, addr,
                                  from ? set_names[from] : "policed",
                                  to ? set_names[to] : "policed")
                     : 0;
}

int sbx_nft_tables(char ***ret, struct wr_err *e) {
        struct nft_ctx *ctx = nft_ctx_new(NFT_CTX_DEFAULT);
        if (!ctx)
                return err_set(e, -ENOMEM, "nftables: out of memory");
        nft_ctx_buffer_output(ctx);
        nft_ctx_buffer_error(ctx);
        if (nft_run_cmd_from_buffer(ctx, "list tables inet\n") != 0) {
                nft_ctx_free(ctx);
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
                if (len < 128 && sscanf(p, "table inet %63s", name) == 1) {
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
        nft_ctx_free(ctx);
        if (r < 0) {
                for (size_t i = 0; v && i < n; i++)
                        free(v[i]);
                free(v);
                return err_set(e, r, "nftables: out of memory");
        }
        *ret = v;
        return (int) n;
}

int sbx_nft_table_remove(const char *table, struct wr_err *e) {
        char cmds[160];
        snprintf(cmds, sizeof(cmds), "add table inet %1$s\ndelete table inet %1$s\n", table);
        int r = nft_run(cmds, e);
        return r < 0 ? err_prefix(e, r, "remove table inet %s", table) : 0;
}
