/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* warrend's end of the K8S relays (docs/k8s.md "Exec on Pods"): a TLS
 * listener on the callback address that each Pod's warren-relay dials.
 * The relay authenticates with the sandbox's token (HMAC-SHA256 of the
 * sandbox id under a key in the state dir, so a restarted warrend knows
 * the tokens of the Pods it finds); warrend's certificate (self-signed,
 * its IP in subjectAltName, kept in the state dir) is the CA the Pod gets.
 * Each accepted relay gets a thread running relay_mux_run on one end of a
 * SEQPACKET socketpair; the other end goes to attach() on the loop thread,
 * where the sandbox manager uses it like a warren-init connection.
 * Threads: k8s_bridge_* on the loop thread; attach runs there too. */

#include <stdbool.h>
#include <stddef.h>

#include <uv.h>

#include "basic/err.h"
#include "k8s/relay-frame.h"

struct k8s_bridge;

/* A relay for sandbox id connected: ctl_fd is the caller's. */
typedef void (*k8s_bridge_attach_fn)(const char *id, int ctl_fd, void *userdata);

/* listen: "IP:PORT" (PORT 0: any); advertise: the address Pods dial
 * ("IP:PORT", NULL: the listen address with the port bound). */
int k8s_bridge_new(uv_loop_t *loop, const char *state_dir, const char *listen,
                   const char *advertise, k8s_bridge_attach_fn attach, void *userdata,
                   struct k8s_bridge **ret, struct wr_err *e);
void k8s_bridge_free(struct k8s_bridge *b);

/* The address Pods dial ("IP:PORT"), warrend's certificate (PEM). */
const char *k8s_bridge_addr(const struct k8s_bridge *b);
const char *k8s_bridge_ca_pem(const struct k8s_bridge *b);

/* Sandbox id's token (RELAY_TOKEN_LEN hex digits and a NUL). */
void k8s_bridge_token(const struct k8s_bridge *b, const char *id, char token[RELAY_TOKEN_LEN + 1]);
