/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* Shared between the API files; not for other modules. */

#include "api/api.h"
#include "store/store.h"

struct rpc_call;

/* The caller's environment: every name (sandbox, secret, volume) resolves
 * in it. Tokens and environments come with the identity work; until then
 * every caller is in the default environment. */
static inline const char *api_caller_env(struct rpc_call *call) {
        (void) call;
        return STORE_ENV_DEFAULT;
}

/* warren.v1.Sandboxes/Exec (exec.c), registered by api_sandboxes_register. */
extern const struct rpc_method api_exec_method;
/* warren.v1.Images/BuildImage (build.c), registered by api_images_register. */
extern const struct rpc_method api_build_image_method;
/* MissingBlobs, UploadBlob, PruneImages (blobs.c) */
extern const struct rpc_method api_blob_methods[3];

/* The bytes of an uploaded blob ("sha256:<hex>"), malloc'd into *ret.
 * Errors: INVALID_ARGUMENT (malformed digest), FAILED_PRECONDITION (not
 * uploaded), -EIO, -ENOMEM. */
int api_blob_read(struct api_ctx *ctx, const char *digest, void **ret, size_t *len,
                  struct wr_err *e);

/* BuildImage calls running now (PruneImages waits for none). */
unsigned api_builds_running(void);
/* warren.v1.Sandboxes/Tunnel (tunnel.c), registered by api_sandboxes_register. */
extern const struct rpc_method api_tunnel_method;

/* Fill msg (and its sub-messages, caller storage) from info; pointers
 * borrow from info (images.c). */
struct img_info;
#include "warren/v1/images.pb-c.h"
void api_image_to_proto(const struct img_info *info, Warren__V1__Image *msg,
                        Warren__V1__ImageConfig *cfg, Warren__V1__Timestamp *ts);

/* warren.v1.Sandboxes/ListProcesses (exec.c), registered next to Exec. */
extern const struct rpc_method api_list_processes_method;
/* warren.v1.Sandboxes/GetExecChanges and RollbackExec (journal.c). */
extern const struct rpc_method api_journal_methods[2];
