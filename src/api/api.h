/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* The API layer: one file per gRPC service. Glue only: validate the
 * request, call a module (store/, runtime/, image/, net/), reply. Each
 * service registers its methods on the server with api_<service>_register.
 * Handlers find the daemon's shared state with rpc_call_server_ctx(call),
 * which is the struct api_ctx below. Handlers log once, at this boundary. */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <uv.h>

#include "rpc/server.h"

struct store;
struct img_store;
struct sbx_manager;
struct vol_manager;
struct k8s_class;

struct api_ctx {
        uv_loop_t *loop;
        struct rpc_server *server;
        struct store *store;           /* SQLite state */
        struct img_store *images;      /* layer and image store (NULL until built) */
        struct sbx_manager *sandboxes; /* live sandboxes; NULL while shutting down */
        struct vol_manager *volumes;   /* volumes (volume/volume.h) */
        const char *state_dir;
        uint64_t started_usec; /* CLOCK_MONOTONIC at start-up */
        int diag_enabled;      /* serve warren.v1.Diag (tests, benches) */
        /* Fully-qualified names of the services registered ("warren.v1.System",
         * ...); grpc.health.v1 answers SERVING for these. Set by warrend. */
        const char *const *services;
        size_t n_services;
        struct api_health *health; /* open health Watch streams (health.c) */
        /* Listeners not on loopback served without authentication
         * (warrend --insecure-tcp-i-know); System.GetVersion reports them.
         * Set by warrend; n_insecure_listeners 0 = none. */
        const char *const *insecure_listeners;
        size_t n_insecure_listeners;
        /* Workload identity federation (wid.h): the signing keys and the
         * issuer URL; NULL = GetWorkloadIdentityToken is UNAVAILABLE. */
        struct wid_keys *wid;
        const char *issuer;
        /* Sandbox identity (identity=True, sbx-identity.c): callers with a
         * sandbox's identity token act as admin of its environment when
         * set, else as user (warrend --identity-role); the tokens' lifetime
         * in seconds (--identity-token-lifetime, 1..3600) and the host
         * directory holding the socket sandboxes reach the API on (NULL:
         * identity=True is refused). */
        bool identity_admin;
        int identity_lifetime;
        const char *identity_api_dir;
        struct api_sbx_identity *sbx_identity;
        /* Fair admission of creates between environments (admission.c). */
        struct api_admission *admission;
        /* The K8S compute class (k8s/k8s.h); NULL: no cluster configured. */
        struct k8s_class *k8s;
};

/* The /.well-known/openid-configuration and /.well-known/jwks.json bodies
 * (malloc'd JSON) for path, or NULL; userdata is the api_ctx. */
char *api_well_known(const char *path, void *userdata);

/* Sandbox identity tokens (sbx-identity.c; needs ctx->wid and
 * ctx->issuer): start recovers the token directories of a previous
 * warrend's sandboxes and starts the rotation timer (0 or a negative errno
 * with e filled); issue is the sandbox manager's identity hook
 * (sbx_manager_set_identity, userdata = the api_ctx); stop closes the
 * timer (before the loop's last run). */
int api_sbx_identity_start(struct api_ctx *ctx, struct wr_err *e);
int api_sbx_identity_issue(void *userdata, const char *id, const char *environment, char *dir,
                           size_t size, struct wr_err *e);
void api_sbx_identity_stop(struct api_ctx *ctx);

/* Fair admission of creates (admission.c): creates run one at a time on
 * the loop, queued per environment and taken round-robin, so a tenant
 * flooding creates delays another's by at most the one running. start
 * makes the queue (0 or a negative errno with e filled); api_admit queues
 * run(userdata, false) for environment env: 0, or -EAGAIN with
 * RESOURCE_EXHAUSTED when env has API_ADMISSION_MAX_QUEUED waiting (run
 * is then not called). Without a queue run is called at once. stop calls
 * every waiting run with cancelled = true (warrend is shutting down) and
 * closes the queue. waiting: creates queued for env (NULL: all). */
#define API_ADMISSION_MAX_QUEUED 1024
typedef void (*api_admit_fn)(void *userdata, bool cancelled);
int api_admission_start(struct api_ctx *ctx, struct wr_err *e);
int api_admit(struct api_ctx *ctx, const char *env, api_admit_fn run, void *userdata,
              struct wr_err *e);
size_t api_admission_waiting(struct api_ctx *ctx, const char *env);
void api_admission_stop(struct api_ctx *ctx);

/* Caller authentication (auth.c): set cfg.authorize = api_server_authorize
 * and cfg.on_call_end = api_server_call_end with cfg.ctx = the api_ctx. */
int api_server_authorize(struct rpc_call *call, void *ctx, struct wr_err *e);
void api_server_call_end(struct rpc_call *call, int status, const char *message, void *ctx);

/* Each returns 0 or a negative errno from rpc_server_add_methods. */
int api_system_register(struct rpc_server *s);    /* warren.v1.System */
int api_health_register(struct rpc_server *s);    /* grpc.health.v1.Health */
int api_sandboxes_register(struct rpc_server *s); /* warren.v1.Sandboxes */
int api_images_register(struct rpc_server *s);    /* warren.v1.Images */
int api_volumes_register(struct rpc_server *s);   /* warren.v1.Volumes */
int api_files_register(struct rpc_server *s);     /* warren.v1.Files */
int api_secrets_register(struct rpc_server *s);   /* warren.v1.Secrets */
int api_identity_register(struct rpc_server *s);  /* warren.v1.Identity */
int api_diag_register(struct rpc_server *s);      /* warren.v1.Diag */

/* Before graceful shutdown: tell every open grpc.health.v1 Watch stream
 * NOT_SERVING and finish it, so that no stream holds the server open. */
void api_health_shutdown(struct api_ctx *ctx);
/* Free the health state of ctx, after the server is freed. */
void api_health_free(struct api_ctx *ctx);

/* Answer UNIMPLEMENTED naming the method and what is missing; for methods
 * declared in the proto but not built yet. */
void api_unimplemented(struct rpc_call *call, const char *what);
