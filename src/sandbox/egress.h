/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* warrend's side of warren-egress (egress.c): the sockets the nft
 * redirect targets (bound here and kept across restarts of the process),
 * the process itself (spawned, watched with a pidfd, restarted with the
 * same sockets and every registration sent again), the control protocol
 * (src/egress/egress-proto.h), the self-check probe, and the per-sandbox
 * event rings ListNetworkEvents reads. Loop thread only. See
 * docs/network.md "The policy path". */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <uv.h>

#include "basic/err.h"
#include "egress/egress-proto.h"

struct sbx_egress;

#define SBX_EGRESS_RING 4096          /* events kept per sandbox */
#define SBX_EGRESS_ENDED_KEEP 256     /* ended sandboxes whose events stay readable */
#define SBX_EGRESS_PROBE_PORT 1       /* the self-check's destination port on the gateway */
#define SBX_EGRESS_RESOURCES_MAX 1024 /* detected resources kept per sandbox */

struct priv_client;
struct sbx_egress_config {
        uv_loop_t *loop;
        const char *path;         /* warren-egress */
        const char *upstream_dns; /* IPv4 literal, required */
        const uint16_t *deny_ports;
        size_t n_deny_ports;
        /* TLS interception (docs/signer.md): warren-signer's path and the
         * state dir holding the egress CA (both NULL: no interception);
         * the bundle upstream certificates are verified against (NULL:
         * the host's). */
        const char *signer_path;
        const char *state_dir;
        const char *upstream_ca;
        /* --privsep: the self-check's connection from inside the sandbox
         * is made by warren-priv (NET_CONNECT); NULL: by a thread of
         * ours that joins the sandbox's netns. cgroup_mode: the
         * sandboxes' (to name them to warren-priv). */
        struct priv_client *priv;
        int cgroup_mode;
};

/* One event as warrend keeps it: the process's event, numbered per
 * sandbox (seq from 1), and whether it was the self-check's probe. */
struct sbx_egress_event {
        uint64_t seq;
        bool probe;
        struct egress_event ev;
};

/* Bind the proxy's listening TCP socket and the resolver's UDP and TCP
 * sockets on 0.0.0.0 (kernel-chosen ports; the nft table drops whatever
 * reaches them but the sandboxes' redirected traffic). Nothing is spawned
 * yet. -errno with e. */
int sbx_egress_bind(const struct sbx_egress_config *cfg, struct sbx_egress **ret, struct wr_err *e);

/* The ports the nft redirect must target. */
uint16_t sbx_egress_proxy_port(const struct sbx_egress *g);
uint16_t sbx_egress_dns_port(const struct sbx_egress *g);

/* Spawn warren-egress and wait (up to 5 s) for READY; from then on it is
 * watched and restarted when it dies. -errno with e. */
int sbx_egress_start(struct sbx_egress *g, struct wr_err *e);

/* Stop the process (control socket closed, SIGKILL after 1 s), close
 * every socket, free the rings. NULL ok. */
void sbx_egress_free(struct sbx_egress *g);

/* Register sandbox id's IPv4 address addr (network order) with mode
 * (enum egress_mode) and, for ENFORCE, the policy's wire form; kept and
 * sent again after a restart of the process. Waits for the RESULT (up to
 * 2 s). -errno with e (the process's message). */
int sbx_egress_register(struct sbx_egress *g, const char *id, int mode, uint32_t addr,
                        const uint8_t *wire, size_t len, const uint8_t *rules, size_t rules_len,
                        struct wr_err *e);

/* Forget sandbox id (POLICY_DEL, not waited for); its events stay
 * readable (the last SBX_EGRESS_ENDED_KEEP ended sandboxes). */
void sbx_egress_unregister(struct sbx_egress *g, const char *id);

/* The self-check: from inside the netns of pid, connect to gateway
 * (network order) port SBX_EGRESS_PROBE_PORT (a host address: the
 * redirect must send it to the proxy, which must refuse it) and wait up
 * to timeout_ms for the refusal's EVENT of sandbox id. 0 when it came;
 * -ETIMEDOUT / -errno otherwise (FAILED_PRECONDITION in e). */
int sbx_egress_probe(struct sbx_egress *g, const char *id, pid_t pid, uint32_t gateway,
                     int timeout_ms, struct wr_err *e);

/* Events of sandbox id with seq > after_seq, at most limit (0 = all kept;
 * the newest when limited): *ret points into the ring's copy (valid until
 * the next call into g), *ret_n of them, *ret_last the highest seq the
 * sandbox has. -ENOENT when warrend has no events of id. */
int sbx_egress_events(struct sbx_egress *g, const char *id, uint64_t after_seq, size_t limit,
                      struct sbx_egress_event **ret, size_t *ret_n, uint64_t *ret_last);

/* The resources detected in sandbox id's traffic (ids: pull request
 * URLs), in the order seen, each once; kept like its events (in memory,
 * for the last SBX_EGRESS_ENDED_KEEP ended sandboxes). *ret borrowed
 * until the next call into g. -ENOENT when warrend knows nothing of id. */
int sbx_egress_resources(struct sbx_egress *g, const char *id, const char *const **ret,
                         size_t *ret_n);

/* True when the running warren-egress has a warren-signer: hosts with
 * rules or credentials can be intercepted. */
bool sbx_egress_intercepts(const struct sbx_egress *g);

/* The process's pid (0 while none runs) and restarts so far. */
pid_t sbx_egress_pid(const struct sbx_egress *g);
unsigned sbx_egress_restarts(const struct sbx_egress *g);
