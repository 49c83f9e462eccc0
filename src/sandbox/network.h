/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* The default network of sandboxes, host side (network.c, nft.c): the
 * address range (checked against the host's routes, held with a lock so
 * that two warrends never share it), ip_forward, warrend's nftables
 * table, the per-sandbox /30 (allocation, the runtime's struct rt_net),
 * the resolv.conf sandboxes get, and recovery (who holds which block
 * after a restart; stale host ends removed). Loop thread only, except
 * where noted. */

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "basic/err.h"
#include "runtime/runtime.h"

struct priv_client;
struct sbx_network;

struct sbx_network_config {
        const char *state_dir;
        /* "a.b.c.d/p"; NULL or "" = the default range 100.96.0.0/16, or
         * the next /16 up to 100.111.0.0/16 that no other warrend holds
         * (a restart keeps the one it had). */
        const char *cidr;
        /* The resolver sandboxes are told about (IPv4 literal); NULL = the
         * IPv4 nameservers of the host's /etc/resolv.conf (not loopback
         * ones); "" = none. Temporary: warren-egress's resolver replaces it. */
        const char *upstream_dns;
        /* warren-egress (egress.h): started when this is set, the process
         * is root and an upstream resolver is known (upstream_dns, else
         * the host's); then every sandbox's DNS goes to its resolver and
         * policies can be enforced. NULL: off (the resolver above through
         * NAT, no policies). */
        const char *egress_path;
        /* warren-signer (TLS interception; NULL: none) and the bundle
         * intercepted upstreams are verified against (NULL: the host's) */
        const char *signer_path;
        const char *egress_upstream_ca;
        const uint16_t *deny_ports; /* warrend's own ports, for --deny-port */
        size_t n_deny_ports;
        struct uv_loop_s *loop;
        /* --privsep: warren-priv does the host's part (the table, set
         * elements, the sweep's link deletions, the egress self-check's
         * connection from inside a sandbox; ip_forward at its own start);
         * NULL: done in process. cgroup_mode: the sandboxes' (enum
         * rt_cgroup_mode), to name them to warren-priv. */
        struct priv_client *priv;
        int cgroup_mode;
};

struct sbx_egress;

/* Set the host up: parse and check the range (refused when it overlaps
 * any route or address of the host on a link not named wr*), lock it
 * (/run/warren/net/<range>.lock), turn ip_forward on, replace warrend's
 * table. Returns 0, or a negative errno with a message naming the
 * collision or the failing step. */
int sbx_network_new(const struct sbx_network_config *cfg, struct sbx_network **ret,
                    struct wr_err *e);

/* Free it; with remove_table the nftables table goes too (only when no
 * sandbox outlives warrend). NULL ok. */
void sbx_network_free(struct sbx_network *n, bool remove_table);

/* A free /30 for a sandbox: its slot and the runtime's config (peer name,
 * addresses). -ENOSPC when the range is full. */
int sbx_network_alloc(struct sbx_network *n, int32_t *ret_slot, struct rt_net *ret_net);

/* The runtime's config of a slot in use. */
void sbx_network_slot_net(const struct sbx_network *n, int32_t slot, struct rt_net *ret_net);

/* Give a slot back (its host end must be gone). Negative slots ignored. */
void sbx_network_release(struct sbx_network *n, int32_t slot);

/* The host end's name of slot, into buf (>= 16). */
void sbx_network_peer_name(const struct sbx_network *n, int32_t slot, char *buf, size_t size);

/* Recovery: the slot the running sandbox whose init is pid holds (its
 * default route's gateway, read from /proc/<pid>/net/route), marked used;
 * -1 when it has no network in this range. */
int32_t sbx_network_adopt(struct sbx_network *n, pid_t pid);

/* Recovery, once every live sandbox was adopted: delete host ends (wr*)
 * in this range whose slot nobody holds. Returns how many. */
size_t sbx_network_sweep(struct sbx_network *n);

/* /etc/resolv.conf for sandboxes (owned by n). With warren-egress: the
 * resolv.conf of slot's sandbox (its gateway, whose port 53 the table
 * redirects to the resolver), written into buf (>= 256 bytes). */
const char *sbx_network_resolv_conf(const struct sbx_network *n);
const char *sbx_network_resolv_conf_slot(const struct sbx_network *n, int32_t slot, char *buf,
                                         size_t size);

/* warren-egress, or NULL when it is off. */
struct sbx_egress *sbx_network_egress(const struct sbx_network *n);

/* How the table treats a sandbox's traffic (docs/network.md "The policy
 * path"): POLICED (the default of every address after the table is
 * applied: its TCP goes to the proxy, nothing else is forwarded), PASS
 * (pass4: credentials without a policy: its TCP goes to the proxy, its
 * UDP and ICMP are forwarded like an open one's) or OPEN (open4: no
 * policy, everything through NAT). */
enum sbx_net_class { SBX_NET_POLICED = 0, SBX_NET_OPEN = 1, SBX_NET_PASS = 2 };

/* Put slot's address in the set of cls (out of the other one in the same
 * transaction). Idempotent per block: a block remembers which set its
 * element is in, so only a change costs an nftables transaction (warm-pool
 * entries put theirs in open4 ahead, on a worker). No-op without
 * warren-egress. 0 or -EIO with e. Called by the block's owner of the
 * moment, on any thread. */
int sbx_network_set_class(struct sbx_network *n, int32_t slot, enum sbx_net_class cls,
                          struct wr_err *e);

/* sbx_network_set_class with OPEN (open = true) or POLICED. */
int sbx_network_set_open(struct sbx_network *n, int32_t slot, bool open, struct wr_err *e);

/* The range, as text ("100.96.0.0/16"), and the table's name. */
const char *sbx_network_range(const struct sbx_network *n);
const char *sbx_network_table(const struct sbx_network *n);
