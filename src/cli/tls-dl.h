/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* OpenSSL for the warren CLI, loaded only when a connection uses TLS.
 *
 * Loading libssl and libcrypto at start-up (~20,000 relocations, ~4,000
 * symbol lookups) was a third of the CLI's start-up time, paid by every
 * command although only --tls / --ca / tls: addresses use them. The CLI
 * links its own copy of the rpc client (src/cli/meson.build) compiled with
 * CLI_TLS_REDIRECT: every OpenSSL function it calls goes through the table
 * below, filled by cli_tls_load() (dlopen of the libssl the build was made
 * against) before a TLS connection is made. The rpc sources are unchanged;
 * warrend and the other tools keep linking OpenSSL directly. */

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include "basic/err.h"

/* Every OpenSSL function the rpc client (client.c, h2.c, tls-bio.c) calls,
 * the ones behind OpenSSL's macros included (SSL_CTX_ctrl, SSL_ctrl,
 * BIO_set_flags, BIO_clear_flags). A missing one fails the link of the CLI
 * with an undefined OpenSSL symbol (libssl is not on its link line). */
#define CLI_TLS_FNS(X)                                                                             \
        X(BIO_clear_flags)                                                                         \
        X(BIO_get_data)                                                                            \
        X(BIO_get_new_index)                                                                       \
        X(BIO_meth_free)                                                                           \
        X(BIO_meth_new)                                                                            \
        X(BIO_meth_set_create)                                                                     \
        X(BIO_meth_set_ctrl)                                                                       \
        X(BIO_meth_set_read)                                                                       \
        X(BIO_meth_set_write)                                                                      \
        X(BIO_new)                                                                                 \
        X(BIO_set_data)                                                                            \
        X(BIO_set_flags)                                                                           \
        X(BIO_set_init)                                                                            \
        X(ERR_clear_error)                                                                         \
        X(ERR_peek_last_error)                                                                     \
        X(ERR_reason_error_string)                                                                 \
        X(SSL_CTX_ctrl)                                                                            \
        X(SSL_CTX_free)                                                                            \
        X(SSL_CTX_load_verify_locations)                                                           \
        X(SSL_CTX_new)                                                                             \
        X(SSL_CTX_set_alpn_protos)                                                                 \
        X(SSL_CTX_set_default_verify_paths)                                                        \
        X(SSL_CTX_set_verify)                                                                      \
        X(SSL_ctrl)                                                                                \
        X(SSL_do_handshake)                                                                        \
        X(SSL_free)                                                                                \
        X(SSL_get0_alpn_selected)                                                                  \
        X(SSL_get0_param)                                                                          \
        X(SSL_get_error)                                                                           \
        X(SSL_is_server)                                                                           \
        X(SSL_new)                                                                                 \
        X(SSL_read)                                                                                \
        X(SSL_set1_host)                                                                           \
        X(SSL_set_bio)                                                                             \
        X(SSL_set_connect_state)                                                                   \
        X(SSL_write)                                                                               \
        X(TLS_client_method)                                                                       \
        X(X509_VERIFY_PARAM_set1_ip_asc)

#define CLI_TLS_FN_PTR(f) __typeof__(f) *f;
struct cli_tls_fns {
        CLI_TLS_FNS(CLI_TLS_FN_PTR)
};
#undef CLI_TLS_FN_PTR

/* The table; all NULL until cli_tls_load() succeeds. */
extern struct cli_tls_fns cli_tls;

/* Load libssl (and with it libcrypto) and fill cli_tls. Idempotent.
 * Returns 0, or -ELIBACC with e saying which library or symbol is missing
 * (the table stays unusable; make no TLS connection then). */
int cli_tls_load(struct wr_err *e);

/* SSL_free / SSL_CTX_free of NULL (every plaintext connection's close
 * calls them) without loading anything. */
void cli_tls_ssl_free(SSL *ssl);
void cli_tls_ssl_ctx_free(SSL_CTX *ctx);

#ifdef CLI_TLS_REDIRECT
#define CLI_TLS_CALL(f) (*cli_tls.f)
#define BIO_clear_flags CLI_TLS_CALL(BIO_clear_flags)
#define BIO_get_data CLI_TLS_CALL(BIO_get_data)
#define BIO_get_new_index CLI_TLS_CALL(BIO_get_new_index)
#define BIO_meth_free CLI_TLS_CALL(BIO_meth_free)
#define BIO_meth_new CLI_TLS_CALL(BIO_meth_new)
#define BIO_meth_set_create CLI_TLS_CALL(BIO_meth_set_create)
#define BIO_meth_set_ctrl CLI_TLS_CALL(BIO_meth_set_ctrl)
#define BIO_meth_set_read CLI_TLS_CALL(BIO_meth_set_read)
#define BIO_meth_set_write CLI_TLS_CALL(BIO_meth_set_write)
#define BIO_new CLI_TLS_CALL(BIO_new)
#define BIO_set_data CLI_TLS_CALL(BIO_set_data)
#define BIO_set_flags CLI_TLS_CALL(BIO_set_flags)
#define BIO_set_init CLI_TLS_CALL(BIO_set_init)
#define ERR_clear_error CLI_TLS_CALL(ERR_clear_error)
#define ERR_peek_last_error CLI_TLS_CALL(ERR_peek_last_error)
#define ERR_reason_error_string CLI_TLS_CALL(ERR_reason_error_string)
#define SSL_CTX_ctrl CLI_TLS_CALL(SSL_CTX_ctrl)
#define SSL_CTX_free cli_tls_ssl_ctx_free
#define SSL_CTX_load_verify_locations CLI_TLS_CALL(SSL_CTX_load_verify_locations)
#define SSL_CTX_new CLI_TLS_CALL(SSL_CTX_new)
#define SSL_CTX_set_alpn_protos CLI_TLS_CALL(SSL_CTX_set_alpn_protos)
#define SSL_CTX_set_default_verify_paths CLI_TLS_CALL(SSL_CTX_set_default_verify_paths)
#define SSL_CTX_set_verify CLI_TLS_CALL(SSL_CTX_set_verify)
#define SSL_ctrl CLI_TLS_CALL(SSL_ctrl)
#define SSL_do_handshake CLI_TLS_CALL(SSL_do_handshake)
#define SSL_free cli_tls_ssl_free
#define SSL_get0_alpn_selected CLI_TLS_CALL(SSL_get0_alpn_selected)
#define SSL_get0_param CLI_TLS_CALL(SSL_get0_param)
#define SSL_get_error CLI_TLS_CALL(SSL_get_error)
#define SSL_is_server CLI_TLS_CALL(SSL_is_server)
#define SSL_new CLI_TLS_CALL(SSL_new)
#define SSL_read CLI_TLS_CALL(SSL_read)
#define SSL_set1_host CLI_TLS_CALL(SSL_set1_host)
#define SSL_set_bio CLI_TLS_CALL(SSL_set_bio)
#define SSL_set_connect_state CLI_TLS_CALL(SSL_set_connect_state)
#define SSL_write CLI_TLS_CALL(SSL_write)
#define TLS_client_method CLI_TLS_CALL(TLS_client_method)
#define X509_VERIFY_PARAM_set1_ip_asc CLI_TLS_CALL(X509_VERIFY_PARAM_set1_ip_asc)
#endif
