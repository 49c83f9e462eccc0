/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* admin: warrend's admin HTTP endpoint (--admin-listen HOST:PORT), a tiny
 * HTTP/1.1 server on the daemon's libuv loop. GET /metrics answers the
 * Prometheus text format (0.0.4); GET /healthz answers "ok". One request
 * per connection (Connection: close); requests over 8 KiB or idle for 10 s
 * are dropped. No authentication: bind it to loopback or a private
 * network. */

#include <uv.h>

#include "basic/err.h"

struct admin;
struct store;
struct sbx_manager;
struct priv_client;

struct admin_sources {
        struct store *store;
        /* The daemon's manager pointer (NULL while shutting down). */
        struct sbx_manager *const *sandboxes;
        /* warren-priv's client (--privsep; NULL: off) */
        struct priv_client *const *priv;
        uint64_t started_usec; /* CLOCK_MONOTONIC at start-up */
        /* /.well-known/...: a malloc'd JSON body for the path, or NULL
         * (404). NULL = none served. */
        char *(*well_known)(const char *path, void *userdata);
        void *well_known_userdata;
};

/* Bind and listen on hostport now (a socket, non-blocking, close-on-exec,
 * in *ret_fd): warrend --user does this as root before the drop, so that a
 * port below 1024 can be served. 0 or a negative errno with e filled. */
int admin_prebind(const char *hostport, int *ret_fd, struct wr_err *e);

/* Listen on hostport ("127.0.0.1:9090", "[::1]:9090", port 0 = any free
 * one), or serve fd (>= 0: a listening socket from admin_prebind, taken
 * over, hostport then only names it in messages). src must outlive the
 * admin. Returns 0 or a negative errno with e filled; *ret is the
 * caller's (admin_close). On failure an fd given is closed too. */
int admin_start(uv_loop_t *loop, const char *hostport, int fd, const struct admin_sources *src,
                struct admin **ret, struct wr_err *e);

/* The port actually bound. */
int admin_port(const struct admin *a);

/* Count one finished RPC (path, gRPC status code): the rpc server's
 * on_call_status callback; userdata is the struct admin. */
void admin_rpc_observe(const char *path, int status, void *userdata);

/* Stop listening, drop open connections; the memory is freed once their
 * handles closed (run the loop). NULL ok. */
void admin_close(struct admin *a);
