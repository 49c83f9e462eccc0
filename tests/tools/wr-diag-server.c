/* SPDX-License-Identifier: Apache-2.0 */
/* wr-diag-server: a minimal server that serves warren.v1.Diag on the RPC
 * layer alone. Used by the RPC layer's own tests and benchmarks when no
 * warrend is wanted; accepts warrend's flags (unknown ones are ignored):
 *   wr-diag-server --listen ADDR... [--tls-cert F --tls-key F]
 *                  [--log-level L] [--state-dir D] [--enable-diag]
 * A "--listen tcp:H:P" becomes TLS when a certificate is given, as in
 * warrend. SIGTERM/SIGINT: graceful shutdown, exit 0. */
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/api.h"
#include "basic/err.h"
#include "basic/log.h"
#include "rpc/server.h"

static struct rpc_server *server;
static uv_signal_t sig_term, sig_int;

static void shutdown_done(void *userdata) {
        uv_close((uv_handle_t *) &sig_term, NULL);
        uv_close((uv_handle_t *) &sig_int, NULL);
}

static void on_signal(uv_signal_t *h, int signum) {
        uv_signal_stop(&sig_term);
        uv_signal_stop(&sig_int);
        log_info("signal %d: shutting down", signum);
        rpc_server_shutdown(server, 5000, shutdown_done, NULL);
}

int main(int argc, char **argv) {
        const char *listen[16];
        size_t n_listen = 0;
        const char *cert = NULL, *key = NULL;
        static const struct option opts[] = {
                {"listen", required_argument, NULL, 'l'},
                {"tls-cert", required_argument, NULL, 'c'},
                {"tls-key", required_argument, NULL, 'k'},
                {"log-level", required_argument, NULL, 'L'},
                {"state-dir", required_argument, NULL, 's'},
                {"enable-diag", no_argument, NULL, 'd'},
                {0},
        };
        int c;
        while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
                switch (c) {
                case 'l':
                        if (n_listen < 16)
                                listen[n_listen++] = optarg;
                        break;
                case 'c':
                        cert = optarg;
                        break;
                case 'k':
                        key = optarg;
                        break;
                case 'L': {
                        enum log_level lvl;
                        if (log_level_from_string(optarg, &lvl) == 0)
                                log_set_level(lvl);
                        break;
                }
                default:
                        break;
                }
        }
        signal(SIGPIPE, SIG_IGN);
        uv_loop_t *loop = uv_default_loop();
        struct wr_err e = {0};
        struct rpc_server_config cfg = {.tls_cert = cert, .tls_key = key};
        if (rpc_server_new(loop, &cfg, &server, &e) < 0) {
                log_error("%s", e.msg);
                return 1;
        }
        api_diag_register(server);
        for (size_t i = 0; i < n_listen; i++) {
                char addr[512];
                if (cert && strncmp(listen[i], "tcp:", 4) == 0)
                        snprintf(addr, sizeof(addr), "tls:%s", listen[i] + 4);
                else
                        snprintf(addr, sizeof(addr), "%s", listen[i]);
                if (rpc_server_listen(server, addr, &e) < 0) {
                        log_error("%s", e.msg);
                        rpc_server_free(server);
                        uv_run(loop, UV_RUN_DEFAULT);
                        uv_loop_close(loop);
                        return 1;
                }
                log_info("listening on %s", addr);
        }
        uv_signal_init(loop, &sig_term);
        uv_signal_init(loop, &sig_int);
        uv_signal_start(&sig_term, on_signal, SIGTERM);
        uv_signal_start(&sig_int, on_signal, SIGINT);
        uv_run(loop, UV_RUN_DEFAULT);
        rpc_server_free(server);
        uv_run(loop, UV_RUN_DEFAULT);
        uv_loop_close(loop);
        return 0;
}
