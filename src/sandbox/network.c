/* SPDX-License-Identifier: Apache-2.0 */
/* The default network, host side: the range (checked, locked), ip_forward,
 * the nftables table (nft.c), per-sandbox /30 blocks, resolv.conf, and
 * recovery of who holds which block. See network.h and docs/network.md. */
#include "sandbox/network.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "basic/log.h"
#include "basic/macro.h"
#include "priv/client.h"
#include "sandbox/egress.h"
#include "sandbox/network-internal.h"

#define DEFAULT_BASE 0x64600000u /* 100.96.0.0 */
#define DEFAULT_PREFIX 16
#define DEFAULT_TRIES 16 /* 100.96.0.0/16 .. 100.111.0.0/16 */
#define LOCK_DIR "/run/warren/net"
#define ROUTES_MAX 4096
#define LINKS_MAX 65536

struct sbx_network {
        struct sbx_netrange r;
        char range[24];
        char table[48];
        int lock_fd;
        char *resolv;
        struct sbx_egress *egress;
        /* per slot: the set its address is in (enum sbx_net_class).
         * Written only by the slot's owner of the moment (the loop, a pool
         * job or the retire job on a worker). All POLICED after the table
         * is applied. */
        uint8_t *cls;
        struct priv_client *priv; /* --privsep: the host's part by warren-priv */
};

/* ---- the host's part: in process, or by warren-priv (--privsep) ---- */

static int nft_apply(const struct sbx_network *n, uint16_t proxy_port, uint16_t dns_port,
                     struct wr_err *e) {
        if (n->priv)
                return priv_nft_table_apply(n->priv, n->table, n->r.base, n->r.prefix, proxy_port,
                                            dns_port, e);
        return nftab_table_apply(n->table, n->r.base, n->r.prefix, proxy_port, dns_port, e);
}

static int nft_tables(const struct sbx_network *n, char ***ret, struct wr_err *e) {
        return n->priv ? priv_nft_tables(n->priv, ret, e) : nftab_tables(ret, e);
}

static int nft_remove(const struct sbx_network *n, const char *table, struct wr_err *e) {
        return n->priv ? priv_nft_table_remove(n->priv, table, e) : nftab_table_remove(table, e);
}

static int link_delete(const struct sbx_network *n, const char *name, struct wr_err *e) {
        return n->priv ? priv_link_delete(n->priv, name, e) : rt_net_link_delete(name, e);
}

/* ---- the range ---- */

/* The host's routes that overlap base/prefix: on links named wr* (a
 * warrend's sandboxes) counted in *ret_ours; anything else is a collision
 * named in e. */
static int range_check(uint32_t base, uint8_t prefix, const char *what, size_t *ret_ours,
                       struct wr_err *e) {
        _cleanup_free_ struct rt_route4 *routes = calloc(ROUTES_MAX, sizeof(*routes));
        if (!routes)
                return err_set(e, -ENOMEM, "out of memory");
        size_t n = 0;
        int r = rt_net_routes4(routes, ROUTES_MAX, &n, e);
        if (r < 0)
                return r;
        *ret_ours = 0;
        for (size_t i = 0; i < n && i < ROUTES_MAX; i++) {
                const struct rt_route4 *rt = &routes[i];
                if (rt->prefix == 0) /* a default route is not a collision */
                        continue;
                if (!sbx_cidr_overlap(base, prefix, ntohl(rt->dst), rt->prefix))
                        continue;
                /* its link went away since the dump (a sandbox's host end
                 * being taken down with its netns) */
                if (rt->oif > 0 && !rt->dev[0])
                        continue;
                if (strncmp(rt->dev, SBX_NET_PEER_PREFIX, strlen(SBX_NET_PEER_PREFIX)) == 0) {
                        (*ret_ours)++;
                        continue;
                }
                char mine[24], theirs[24];
                sbx_cidr_format(base, prefix, mine, sizeof(mine));
                sbx_cidr_format(ntohl(rt->dst), rt->prefix, theirs, sizeof(theirs));
                return err_setx(e, -EADDRINUSE, WR_STATUS_FAILED_PRECONDITION, WR_FAULT_CLIENT,
                                "sandbox range %s (%s) overlaps the host's %s %s%s%s (table %u): "
                                "pick another range with --sandbox-cidr",
                                mine, what, rt->type == 2 ? "address" : "route", theirs,
                                rt->dev[0] ? " dev " : "", rt->dev, (unsigned) rt->table);
        }
        return 0;
}

/* Lock the range host-wide (a warrend holds it while it runs; the lock
 * dies with it). wait_ms: how long to wait for a holder that is going
 * away.
 * Returns the fd, -EBUSY or another negative errno. */
static int range_lock(uint32_t base, uint8_t prefix, int wait_ms, struct wr_err *e) {
        (void) mkdir("/run/warren", 0755);
        if (mkdir(LOCK_DIR, 0755) < 0 && errno != EEXIST)
                return err_set(e, -errno, "mkdir %s: %m", LOCK_DIR);
        char path[96], txt[24];
        snprintf(path, sizeof(path), LOCK_DIR "/%u.%u.%u.%u-%u.lock", base >> 24,
                 (base >> 16) & 255, (base >> 8) & 255, base & 255, prefix);
        _cleanup_close_ int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
        if (fd < 0)
                return err_set(e, -errno, "open %s: %m", path);
        /* a POSIX record lock: the process's own, never held by the
         * children it clones (see statedir.c) */
        struct flock fl = {.l_type = F_WRLCK, .l_whence = SEEK_SET};
        for (int waited = 0;; waited += 50) {
                if (fcntl(fd, F_SETLK, &fl) == 0)
                        break;
                if (errno != EAGAIN && errno != EACCES)
                        return err_set(e, -errno, "lock %s: %m", path);
                if (waited >= wait_ms) {
                        sbx_cidr_format(base, prefix, txt, sizeof(txt));
                        return err_set(e, -EBUSY,
                                       "sandbox range %s is held by another warrend (%s): pick "
                                       "another range with --sandbox-cidr",
                                       txt, path);
                }
                struct timespec ts = {0, 50 * 1000000};
                nanosleep(&ts, NULL);
        }
        return TAKE_FD(fd);
}

/* The range the previous warrend of this state dir used ("" if none). */
static void range_recorded(const char *state_dir, char *buf, size_t size) {
        char path[PATH_MAX];
        buf[0] = 0;
        snprintf(path, sizeof(path), "%s/network-range", state_dir);
        FILE *f = fopen(path, "re");
        if (!f)
                return;
        if (!fgets(buf, (int) size, f))
                buf[0] = 0;
        fclose(f);
        buf[strcspn(buf, "\n")] = 0;
}

static int range_record(const char *state_dir, const char *range, struct wr_err *e) {
        char path[PATH_MAX], tmp[PATH_MAX];
        snprintf(path, sizeof(path), "%s/network-range", state_dir);
        snprintf(tmp, sizeof(tmp), "%s.tmp", path);
        FILE *f = fopen(tmp, "we");
        if (!f)
                return err_set(e, -errno, "write %s: %m", tmp);
        fprintf(f, "%s\n", range);
        if (fclose(f) != 0 || rename(tmp, path) < 0)
                return err_set(e, -errno, "write %s: %m", path);
        return 0;
}

/* The table name of a range: "warren" for the default, else
 * "warren_<a>_<b>_<c>_<d>_<p>". */
static void table_name(uint32_t base, uint8_t prefix, char *buf, size_t size) {
        if (base == DEFAULT_BASE && prefix == DEFAULT_PREFIX)
                snprintf(buf, size, "warren");
        else
                snprintf(buf, size, "warren_%u_%u_%u_%u_%u", base >> 24, (base >> 16) & 255,
                         (base >> 8) & 255, base & 255, prefix);
}

/* And back; -EINVAL for any other name. */
static int table_range(const char *name, uint32_t *ret_base, uint8_t *ret_prefix) {
        unsigned a, b, c, d, p;
        char tail;
        if (strcmp(name, "warren") == 0) {
                *ret_base = DEFAULT_BASE;
                *ret_prefix = DEFAULT_PREFIX;
                return 0;
        }
        if (sscanf(name, "warren_%u_%u_%u_%u_%u%c", &a, &b, &c, &d, &p, &tail) != 5 || a > 255 ||
            b > 255 || c > 255 || d > 255 || p < SBX_NET_PREFIX_MIN || p > SBX_NET_PREFIX_MAX)
                return -EINVAL;
        *ret_base = a << 24 | b << 16 | c << 8 | d;
        *ret_prefix = (uint8_t) p;
        char check[48];
        table_name(*ret_base, *ret_prefix, check, sizeof(check));
        return strcmp(check, name) == 0 ? 0 : -EINVAL;
}

/* Tables of other warrends' ranges whose warrend is gone (its range lock
 * is free) and whose sandboxes are all gone (no wr* link in the range):
 * removed (a warrend killed, or stopped without --terminate-on-exit, whose
 * sandboxes ended since). */
static void tables_collect(const struct sbx_network *n) {
        char **names = NULL;
        int k = nft_tables(n, &names, NULL);
        if (k <= 0)
                return;
        _cleanup_free_ char(*links)[16] = calloc(LINKS_MAX, 16);
        size_t n_links = 0;
        if (!links || rt_net_links(SBX_NET_PEER_PREFIX, links, LINKS_MAX, &n_links, NULL) < 0)
                n_links = SIZE_MAX; /* unknown: keep every table */
        for (int i = 0; i < k; i++) {
                uint32_t base;
                uint8_t prefix;
                if (strcmp(names[i], n->table) == 0 || n_links == SIZE_MAX ||
                    table_range(names[i], &base, &prefix) < 0)
                        continue;
                bool used = false;
                for (size_t j = 0; j < n_links && j < LINKS_MAX && !used; j++) {
                        uint32_t gw;
                        used = sbx_net_peer_parse(links[j], &gw) == 0 &&
                               sbx_cidr_overlap(base, prefix, gw, 32);
                }
                if (used)
                        continue;
                _cleanup_close_ int lock = range_lock(base, prefix, 0, NULL);
                if (lock < 0) /* its warrend runs */
                        continue;
                struct wr_err e = {0};
                if (nft_remove(n, names[i], &e) < 0)
                        log_warn("network: %s", e.msg);
                else
                        log_info("network: removed the table inet %s of a warrend that is gone",
                                 names[i]);
        }
        for (int i = 0; i < k; i++)
                free(names[i]);
        free(names);
}

/* Pick, check and lock the range. */
static int range_pick(struct sbx_network *n, const struct sbx_network_config *cfg,
                      struct wr_err *e) {
        char recorded[32];
        range_recorded(cfg->state_dir, recorded, sizeof(recorded));
        uint32_t base, rb = 0;
        uint8_t prefix, rp = 0;
        size_t ours = 0;
        int r;
        bool have_rec = recorded[0] && sbx_cidr_parse(recorded, &rb, &rp, NULL) >= 0;
        if (cfg->cidr && cfg->cidr[0]) {
                if ((r = sbx_cidr_parse(cfg->cidr, &base, &prefix, e)) < 0)
                        return err_prefix(e, r, "--sandbox-cidr");
                if ((r = range_check(base, prefix, "--sandbox-cidr", &ours, e)) < 0)
                        return r;
                bool same = have_rec && rb == base && rp == prefix;
                if ((n->lock_fd = range_lock(base, prefix, same ? 5000 : 0, e)) < 0)
                        return n->lock_fd;
        } else {
                r = -EBUSY;
                for (unsigned i = 0; i < DEFAULT_TRIES; i++) {
                        uint32_t b = have_rec && i == 0 ? rb : DEFAULT_BASE + (i << 16);
                        uint8_t p = have_rec && i == 0 ? rp : DEFAULT_PREFIX;
                        if (have_rec && i > 0 && b == rb && p == rp)
                                continue;
                        if ((r = range_check(b, p, "the default", &ours, e)) < 0)
                                return r;
                        bool same = have_rec && b == rb && p == rp;
                        /* another state dir's sandboxes live there */
                        if (ours && !same)
                                continue;
                        n->lock_fd = range_lock(b, p, same ? 5000 : 0, NULL);
                        if (n->lock_fd >= 0) {
                                base = b;
                                prefix = p;
                                r = 0;
                                break;
                        }
                        if (n->lock_fd != -EBUSY)
                                return err_set(e, n->lock_fd, "lock the sandbox range: %s",
                                               strerror(-n->lock_fd));
                }
                if (r < 0 || n->lock_fd < 0) /* none locked (r: the last check's 0) */
                        return err_set(e, -EBUSY,
                                       "every default sandbox range (100.96.0.0/16 .. "
                                       "100.111.0.0/16) is held by another warrend: pick one "
                                       "with --sandbox-cidr");
        }
        sbx_cidr_format(base, prefix, n->range, sizeof(n->range));
        table_name(base, prefix, n->table, sizeof(n->table));
        if ((r = sbx_netrange_init(&n->r, base, prefix)) < 0)
                return err_set(e, r, "sandbox range %s: %s", n->range,
                               r == -ENOMEM ? "out of memory" : "not a usable range");
        return range_record(cfg->state_dir, n->range, e);
}

/* ---- ip_forward, resolv.conf ---- */

static int forward_on(const struct sbx_network *n, struct wr_err *e) {
        if (n->priv) {
                /* warren-priv turned it on at its start: it says how it
                 * left it */
                struct priv_hello_reply h;
                int r = priv_hello(n->priv, &h, e);
                if (r < 0)
                        return r;
                if (h.ip_forward == PRIV_FORWARD_OFF)
                        return err_set(e, -EPERM,
                                       "warren-priv could not turn net.ipv4.ip_forward on (see "
                                       "its log)");
                return 0;
        }
        const char *p = "/proc/sys/net/ipv4/ip_forward";
        char v[4] = {0};
        _cleanup_close_ int fd = open(p, O_RDWR | O_CLOEXEC);
        if (fd < 0)
                return err_set(e, -errno, "open %s: %m", p);
        if (read(fd, v, sizeof(v) - 1) > 0 && v[0] == '1')
                return 0;
        if (pwrite(fd, "1\n", 2, 0) != 2)
                return err_set(e, -errno, "turn %s on: %m", p);
        log_info("network: net.ipv4.ip_forward turned on (sandboxes reach the outside through "
                 "NAT); it stays on after warrend exits");
        return 0;
}

static int resolv_build(struct sbx_network *n, const char *upstream, char *first, size_t fsize,
                        struct wr_err *e) {
        char servers[3][INET_ADDRSTRLEN];
        size_t ns = 0;
        const char *why;
        if (upstream && upstream[0]) {
                struct in_addr a;
                if (inet_pton(AF_INET, upstream, &a) != 1)
                        return err_setx(e, -EINVAL, WR_STATUS_INVALID_ARGUMENT, WR_FAULT_CLIENT,
                                        "--upstream-dns %s: not an IPv4 address", upstream);
                snprintf(servers[ns++], INET_ADDRSTRLEN, "%s", upstream);
                why = "--upstream-dns";
        } else if (upstream) {
                why = "none configured";
        } else {
                why = "the host's /etc/resolv.conf";
                FILE *f = fopen("/etc/resolv.conf", "re");
                char line[256];
                while (f && ns < 3 && fgets(line, sizeof(line), f)) {
                        char addr[64];
                        struct in_addr a;
                        if (sscanf(line, " nameserver %63s", addr) != 1 ||
                            inet_pton(AF_INET, addr, &a) != 1 || (ntohl(a.s_addr) >> 24) == 127)
                                continue; /* IPv6 or loopback: not reachable from a sandbox */
                        snprintf(servers[ns++], INET_ADDRSTRLEN, "%s", addr);
                }
                if (f)
                        fclose(f);
        }
        char buf[512];
        int len = snprintf(buf, sizeof(buf),
                           "# warren: the upstream resolver (%s), reached through NAT;\n"
                           "# temporary until warren-egress's resolver serves sandboxes\n",
                           why);
        for (size_t i = 0; i < ns; i++)
                len += snprintf(buf + len, sizeof(buf) - (size_t) len, "nameserver %s\n",
                                servers[i]);
        if (ns == 0)
                log_warn("network: no IPv4 resolver for sandboxes (%s)", why);
        snprintf(first, fsize, "%s", ns ? servers[0] : "");
        n->resolv = strdup(buf);
        return n->resolv ? 0 : err_set(e, -ENOMEM, "out of memory");
}

/* ---- the object ---- */

int sbx_network_new(const struct sbx_network_config *cfg, struct sbx_network **ret,
                    struct wr_err *e) {
        struct sbx_network *n = calloc(1, sizeof(*n));
        if (!n)
                return err_set(e, -ENOMEM, "out of memory");
        n->lock_fd = -EBADF;
        n->priv = cfg->priv;
        char upstream[INET_ADDRSTRLEN] = "";
        int r = range_pick(n, cfg, e);
        if (r >= 0)
                r = resolv_build(n, cfg->upstream_dns, upstream, sizeof(upstream), e);
        if (r >= 0 && cfg->egress_path && upstream[0]) {
                struct sbx_egress_config ec = {.loop = cfg->loop,
                                               .path = cfg->egress_path,
                                               .upstream_dns = upstream,
                                               .deny_ports = cfg->deny_ports,
                                               .n_deny_ports = cfg->n_deny_ports,
                                               .signer_path = cfg->signer_path,
                                               .state_dir = cfg->state_dir,
                                               .upstream_ca = cfg->egress_upstream_ca,
                                               .priv = cfg->priv,
                                               .cgroup_mode = cfg->cgroup_mode};
                if ((r = sbx_egress_bind(&ec, &n->egress, e)) < 0)
                        err_prefix(e, r, "egress");
        } else if (r >= 0 && cfg->egress_path) {
                log_warn("network: no upstream resolver: warren-egress is not started (sandboxes "
                         "get no resolver and network policies are refused); give one with "
                         "--upstream-dns");
        }
        if (r >= 0 && !(n->cls = calloc(n->r.n_slots ? n->r.n_slots : 1, 1)))
                r = err_set(e, -ENOMEM, "out of memory");
        if (r >= 0)
                r = forward_on(n, e);
        if (r >= 0)
                r = nft_apply(n, n->egress ? sbx_egress_proxy_port(n->egress) : 0,
                              n->egress ? sbx_egress_dns_port(n->egress) : 0, e);
        if (r >= 0)
                tables_collect(n);
        if (r >= 0 && n->egress && (r = sbx_egress_start(n->egress, e)) < 0)
                err_prefix(e, r, "egress");
        if (r < 0) {
                sbx_network_free(n, false);
                return err_prefix(e, r, "network");
        }
        log_info("network: sandboxes get /30 blocks of %s (nftables table inet %s)", n->range,
                 n->table);
        *ret = n;
        return 0;
}

void sbx_network_free(struct sbx_network *n, bool remove_table) {
        if (n)
                free(n->cls);
        if (!n)
                return;
        if (remove_table && n->table[0]) {
                struct wr_err e = {0};
                if (nft_remove(n, n->table, &e) < 0)
                        log_warn("network: %s", e.msg);
        }
        sbx_egress_free(n->egress);
        sbx_netrange_done(&n->r);
        closep(&n->lock_fd);
        free(n->resolv);
        free(n);
}

void sbx_network_peer_name(const struct sbx_network *n, int32_t slot, char *buf, size_t size) {
        uint32_t gw, sbx;
        sbx_netrange_addrs(&n->r, (uint32_t) slot, &gw, &sbx);
        sbx_net_peer_name(gw, buf, size);
}

void sbx_network_slot_net(const struct sbx_network *n, int32_t slot, struct rt_net *ret_net) {
        uint32_t gw, sbx;
        sbx_netrange_addrs(&n->r, (uint32_t) slot, &gw, &sbx);
        memset(ret_net, 0, sizeof(*ret_net));
        sbx_net_peer_name(gw, ret_net->peer, sizeof(ret_net->peer));
        ret_net->addr = htonl(sbx);
        ret_net->gateway = htonl(gw);
        ret_net->prefix = SBX_NET_SLOT_PREFIX;
}

int sbx_network_alloc(struct sbx_network *n, int32_t *ret_slot, struct rt_net *ret_net) {
        uint32_t slot;
        int r = sbx_netrange_alloc(&n->r, &slot);
        if (r < 0)
                return r;
        sbx_network_slot_net(n, (int32_t) slot, ret_net);
        *ret_slot = (int32_t) slot;
        return 0;
}

void sbx_network_release(struct sbx_network *n, int32_t slot) {
        if (n && slot >= 0)
                sbx_netrange_free(&n->r, (uint32_t) slot);
}

int32_t sbx_network_adopt(struct sbx_network *n, pid_t pid) {
        char path[64], line[256];
        snprintf(path, sizeof(path), "/proc/%d/net/route", (int) pid);
        FILE *f = fopen(path, "re");
        if (!f)
                return -1;
        int32_t slot = -1;
        while (fgets(line, sizeof(line), f)) {
                char dev[32];
                unsigned dst, gw;
                if (sscanf(line, "%31s %x %x", dev, &dst, &gw) != 3 || dst != 0 || gw == 0)
                        continue;
                uint32_t s; /* the kernel prints the address's bytes as a native u32 */
                if (sbx_netrange_slot_of(&n->r, ntohl(gw), &s) == 0 &&
                    sbx_netrange_take(&n->r, s) == 0)
                        slot = (int32_t) s;
                break;
        }
        fclose(f);
        return slot;
}

size_t sbx_network_sweep(struct sbx_network *n) {
        _cleanup_free_ char(*names)[16] = calloc(LINKS_MAX, 16);
        size_t count = 0, removed = 0;
        struct wr_err e = {0};
        if (!names || rt_net_links(SBX_NET_PEER_PREFIX, names, LINKS_MAX, &count, &e) < 0) {
                log_warn("network: list links: %s", e.msg[0] ? e.msg : "out of memory");
                return 0;
        }
        for (size_t i = 0; i < count && i < LINKS_MAX; i++) {
                uint32_t gw, slot;
                if (sbx_net_peer_parse(names[i], &gw) < 0 ||
                    sbx_netrange_slot_of(&n->r, gw, &slot) < 0 || sbx_netrange_used(&n->r, slot))
                        continue;
                if (link_delete(n, names[i], &e) < 0)
                        log_warn("network: %s", e.msg);
                else
                        removed++;
        }
        if (removed)
                log_info("network: removed %zu stale sandbox links", removed);
        return removed;
}

const char *sbx_network_resolv_conf(const struct sbx_network *n) {
        return n->resolv;
}

const char *sbx_network_resolv_conf_slot(const struct sbx_network *n, int32_t slot, char *buf,
                                         size_t size) {
        if (!n->egress || slot < 0)
                return n->resolv;
        uint32_t gw, sbx;
        sbx_netrange_addrs(&n->r, (uint32_t) slot, &gw, &sbx);
        snprintf(buf, size,
                 "# warren: the sandbox's resolver (warren-egress, on the host; every query is "
                 "logged)\nnameserver %u.%u.%u.%u\n",
                 gw >> 24, (gw >> 16) & 255, (gw >> 8) & 255, gw & 255);
        return buf;
}

struct sbx_egress *sbx_network_egress(const struct sbx_network *n) {
        return n ? n->egress : NULL;
}

int sbx_network_set_class(struct sbx_network *n, int32_t slot, enum sbx_net_class cls,
                          struct wr_err *e) {
        if (!n || !n->egress || slot < 0 || (uint32_t) slot >= n->r.n_slots)
                return 0;
        enum sbx_net_class was = (enum sbx_net_class) n->cls[slot];
        if (was == cls)
                return 0; /* as wanted already: no nftables transaction */
        uint32_t gw, sbx;
        sbx_netrange_addrs(&n->r, (uint32_t) slot, &gw, &sbx);
        struct timespec t0, t1;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        int r = n->priv ? priv_nft_class_set(n->priv, n->table, sbx, (unsigned) was, (unsigned) cls,
                                             e)
                        : nftab_class_set(n->table, sbx, (enum nftab_class) was,
                                          (enum nftab_class) cls, e);
        clock_gettime(CLOCK_MONOTONIC, &t1);
        log_debug("network: %u.%u.%u.%u class %d -> %d: %.3f ms%s", sbx >> 24, (sbx >> 16) & 255,
                  (sbx >> 8) & 255, sbx & 255, (int) was, (int) cls,
                  (double) (t1.tv_sec - t0.tv_sec) * 1e3 + (double) (t1.tv_nsec - t0.tv_nsec) / 1e6,
                  n->priv ? " (warren-priv)" : "");
        if (r >= 0)
                n->cls[slot] = (uint8_t) cls;
        return r;
}

int sbx_network_set_open(struct sbx_network *n, int32_t slot, bool open, struct wr_err *e) {
        return sbx_network_set_class(n, slot, open ? SBX_NET_OPEN : SBX_NET_POLICED, e);
}

const char *sbx_network_range(const struct sbx_network *n) {
        return n->range;
}

const char *sbx_network_table(const struct sbx_network *n) {
        return n->table;
}
