/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* keeper: warren-signer keeping the secrets key for warrend's store
 * (docs/signer.md "The secrets key").
 *
 * keeper_start reads the key file once into a sealed memfd
 * (store_secret_key_memfd), starts `warren-signer --secrets-key-fd` with it
 * and one end of a SOCK_SEQPACKET pair, and installs itself as the store's
 * keeper (store_set_keeper): from then on warrend asks the signer for each
 * value's data key and never holds the secrets key. Requests are
 * synchronous (a datagram out, one back within KEEPER_TIMEOUT_MS; the
 * signer answers in microseconds), made on the event loop thread like
 * every store call. The signer's exit is noticed through its pidfd on the
 * loop (reaped there and logged); the next request starts a new one, and a
 * request whose signer died under it is retried once on a new one, so a
 * kill -9 of the signer loses nothing. */

#include <uv.h>

#include "basic/err.h"

#define KEEPER_TIMEOUT_MS 5000

struct keeper;
struct store;

/* Start the signer at signer_path for store and install the keeper. The
 * keeper is the caller's (keeper_free after the store is done with it). */
int keeper_start(uv_loop_t *loop, struct store *store, const char *signer_path, struct keeper **ret,
                 struct wr_err *e);

struct wid_keys;

/* The same for the workload-identity signing key (docs/signer.md
 * "Identity tokens"): `warren-signer --jws-key-fd` with the signing key's
 * file (wid_signing_key_memfd), one signature as a check, then
 * wid_keys_set_signer: warrend keeps only the public halves. keys must
 * outlive the keeper. */
int keeper_start_identity(uv_loop_t *loop, struct wid_keys *keys, const char *signer_path,
                          struct keeper **ret, struct wr_err *e);

/* The running signer's pid, 0 when none (tests and logs). */
int keeper_pid(const struct keeper *k);

/* --privsep (docs/privsep.md "Phase 3, helpers"): every signer started from
 * now on is started by warren-priv (HELPER_START {SIGNER}) through c, which
 * outlives the keepers. NULL: warrend starts them itself (the default). */
struct priv_client;
void keeper_set_priv(struct priv_client *c);

/* warrend is stopping: stop watching the signer's pidfd on the loop (call
 * before the loop's last run; the keeper keeps serving the store). NULL
 * ok. */
void keeper_unwatch(struct keeper *k);

/* Stop the signer (kill, reap) and free k: after the store is closed and
 * keeper_unwatch. NULL ok. */
void keeper_free(struct keeper *k);
