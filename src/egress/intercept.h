/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* TLS interception of hosts with request rules or credentials
 * (intercept.c; docs/network.md "Interception"). */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "basic/err.h"
#include "egress/egress.h"

/* A decided TLS connection handed over by proxy.c: everything here is
 * owned by the interception from then on (fds closed, sb unreferenced,
 * pre freed, the event sent when it ends). */
struct egress_intercept_conn {
        int cfd;      /* the sandbox's socket (non-blocking) */
        uint8_t *pre; /* bytes already read from it (the ClientHello) */
        size_t pre_len;
        struct egress_sb *sb;        /* a reference */
        char host[NET_HOST_MAX + 1]; /* the SNI name (canonical) */
        uint16_t port;               /* the original destination port */
        struct net_addr dial;        /* the decided address of host */
        struct egress_event ev;      /* filled so far (verdict allow, rule) */
        uint64_t t0;
};

/* Before confinement: the server and client TLS contexts (upstream
 * certificates verified against upstream_ca, NULL = the host's bundle),
 * the process's leaf key, the signer socket sfd (blocking from here on).
 * sfd < 0: no interception (rule hosts stay opaque tunnels). */
int egress_intercept_prepare(int sfd, const char *upstream_ca, struct wr_err *e);

/* True when prepare got a signer socket. */
bool egress_intercept_enabled(void);

/* Serve a in a thread of its own. 0, or negative errno (nothing taken:
 * the caller still owns a's fd, buffer and reference). */
int egress_intercept_start(struct egress_intercept_conn *a);

/* Leaf cache counters (the bench reads them from the log too). */
void egress_intercept_stats(unsigned long *hits, unsigned long *misses);
