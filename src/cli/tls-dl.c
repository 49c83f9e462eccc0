/* SPDX-License-Identifier: Apache-2.0 */
/* OpenSSL loaded on demand for the CLI's TLS connections: see tls-dl.h. */
#include "cli/tls-dl.h"

#include <dlfcn.h>
#include <errno.h>
#include <stdbool.h>

#ifndef CLI_LIBSSL_SONAME
#error "CLI_LIBSSL_SONAME (the libssl the CLI was built against) is set by src/cli/meson.build"
#endif

struct cli_tls_fns cli_tls;

static bool loaded;

int cli_tls_load(struct wr_err *e) {
        if (loaded)
                return 0;
        /* RTLD_NOW: every symbol bound here, as at start-up (full RELRO);
         * never closed. dlsym on the handle searches libssl's own
         * dependencies too (libcrypto). */
        void *h = dlopen(CLI_LIBSSL_SONAME, RTLD_NOW | RTLD_LOCAL);
        if (!h)
                return err_set(e, -ELIBACC, "TLS: cannot load %s: %s", CLI_LIBSSL_SONAME,
                               dlerror());
        struct cli_tls_fns t;
#define CLI_TLS_FN_LOAD(f)                                                                         \
        if (!(t.f = (__typeof__(t.f)) dlsym(h, #f)))                                               \
                return err_set(e, -ELIBACC, "TLS: %s has no %s", CLI_LIBSSL_SONAME, #f);
        CLI_TLS_FNS(CLI_TLS_FN_LOAD)
#undef CLI_TLS_FN_LOAD
        cli_tls = t;
        loaded = true;
        return 0;
}

void cli_tls_ssl_free(SSL *ssl) {
        if (ssl && cli_tls.SSL_free)
                cli_tls.SSL_free(ssl);
}

void cli_tls_ssl_ctx_free(SSL_CTX *ctx) {
        if (ctx && cli_tls.SSL_CTX_free)
                cli_tls.SSL_CTX_free(ctx);
}
