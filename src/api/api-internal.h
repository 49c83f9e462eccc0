/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* Shared between the API files; not for other modules. */

#include "api/api.h"
#include "store/store.h"

struct rpc_call;

/* Who is calling, as api_authorize (auth.c) established it before any
 * handler ran; attached to the call (rpc_call_auth). */
enum api_role {
        API_ROLE_NONE = 0, /* anonymous: only health checks and GetVersion */
        API_ROLE_USER = 1,
        API_ROLE_ADMIN = 2,    /* an admin token: its own environment's tokens and audit */
        API_ROLE_OPERATOR = 3, /* root on the unix socket, or a caller on an
                                * --insecure-tcp listener: every environment */
};

struct api_caller {
        enum api_role role;
        char env[64];      /* the environment every name resolves in */
        char token_id[24]; /* "tk-..." or "" */
        char subject[48];  /* "uid:0", "token:tk-...", "insecure-tcp" */
        char peer[80];     /* "unix pid 123 uid 0", "127.0.0.1:5555 (tls)" */
        char object[160];  /* what the call acted on, for the audit record */
};

/* The caller of call (never NULL inside a handler). */
const struct api_caller *api_caller(struct rpc_call *call);

/* The caller's environment: every name (sandbox, secret, volume, image,
 * exec) resolves in it; another environment's objects do not exist. */
static inline const char *api_caller_env(struct rpc_call *call) {
        return api_caller(call)->env;
}

/* Name the object a (streaming) call acts on for its audit record (unary
 * calls are named from their request's id/name fields). */
void api_audit_object(struct rpc_call *call, const char *object);

/* The one lookup of a sandbox by a client-given key: an id ("sb-...") or a
 * name, resolved in the caller's environment. A sandbox of another
 * environment is answered exactly like one that does not exist: -ENOENT
 * with NOT_FOUND "sandbox KEY not found". *ret is the caller's to clear.
 * Every RPC that names a sandbox goes through here and hands the module
 * the id it returns. */
int api_own_sandbox(struct rpc_call *call, const char *key, struct store_sandbox *ret,
                    struct wr_err *e);

/* Like api_own_sandbox, copying only the id into id (>= 20 bytes). */
int api_own_sandbox_id(struct rpc_call *call, const char *key, char *id, size_t size,
                       struct wr_err *e);

/* Images (auth.c). An image another environment made does not exist for
 * the caller: api_own_image resolves ref (name or id) and answers NOT_FOUND
 * "image REF not found" exactly as for a missing one; with write it also
 * refuses (NOT_FOUND) a shared-catalog image to a tenant environment.
 * *ret is the caller's (img_info_free). */
struct img_info;
int api_own_image(struct rpc_call *call, const char *ref, bool write, struct img_info **ret,
                  struct wr_err *e);
/* True when ref names a stored image (name or id) the caller's
 * environment may not see: answer it as missing, never pull it. */
bool api_image_hidden(struct rpc_call *call, const char *ref);
/* 1 when the caller's environment may see image id, else 0. */
bool api_image_visible(struct rpc_call *call, const char *id);
/* Before naming an image `name` in the caller's environment: -EEXIST
 * (ALREADY_EXISTS) when the name points at an image the caller may not
 * change; 0 otherwise (free, or the caller's own). */
int api_image_name_check(struct rpc_call *call, const char *name, struct wr_err *e);
/* After an import/pull/build/snapshot made image id: record the caller's
 * environment as its maker (logged on failure). */
void api_image_record(struct rpc_call *call, const char *id);

/* The server's authorize and on_call_end hooks (auth.c). */
int api_authorize(struct rpc_call *call, void *ctx, struct wr_err *e);
void api_audit_call_end(struct rpc_call *call, int status, const char *message, void *ctx);

/* Quotas of the caller's environment (auth.c): whether one more sandbox
 * with cpu cores and memory bytes (0 = the defaults) / a volume of
 * volume_bytes fits. 0, or -EDQUOT with RESOURCE_EXHAUSTED naming the
 * quota, its limit and the current use. */
int api_quota_check_sandbox(struct rpc_call *call, double cpu, int64_t memory, struct wr_err *e);
int api_quota_check_volume(struct rpc_call *call, int64_t volume_bytes, struct wr_err *e);

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
