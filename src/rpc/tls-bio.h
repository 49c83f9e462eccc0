/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* A zero-copy transport BIO for OpenSSL on an event loop: OpenSSL reads TLS
 * records straight from the owner's socket read buffer and writes them
 * straight into the owner's output (through a sink callback), instead of
 * going through a pair of memory BIOs and copying both ways. Used by the
 * HTTP/2 connections of src/rpc and meant for any other loop-driven TLS
 * endpoint (the egress proxy).
 *
 * Contract:
 *  - single-threaded per struct tls_bio (the BIO method itself is created
 *    once per process, thread-safely);
 *  - input: before SSL_read / SSL_do_handshake the owner hands the bytes
 *    it received to tls_bio_set_input; OpenSSL consumes them from there
 *    (reads that find nothing say "retry": SSL_ERROR_WANT_READ). Bytes
 *    left unread stay the owner's to hand in again; the owner clears the
 *    input (tls_bio_set_input(tb, NULL, 0)) before the buffer goes away;
 *  - output: every record OpenSSL writes is passed to sink synchronously,
 *    inside SSL_write / SSL_do_handshake / SSL_shutdown; sink copies or
 *    queues it and returns 0, or a negative errno, which OpenSSL sees as a
 *    fatal write error;
 *  - the struct tls_bio must outlive the SSL it is attached to. */

#include <stddef.h>
#include <stdint.h>

#include <openssl/ssl.h>

struct tls_bio {
        const uint8_t *in; /* received bytes OpenSSL has not read yet */
        size_t in_len;
        /* Take n bytes of TLS records. 0 or a negative errno. */
        int (*sink)(void *arg, const void *data, size_t n);
        void *sink_arg;
};

/* Attach a BIO over tb as both the read and the write BIO of ssl (the SSL
 * owns the BIO from here and frees it with itself). tb->sink must be set.
 * Returns 0 or -ENOMEM (ssl is then unchanged and still the caller's). */
int tls_bio_attach(struct tls_bio *tb, SSL *ssl);

/* Hand OpenSSL the received bytes p[0, n) (not copied: they must stay
 * valid until the next call). NULL, 0 clears. */
static inline void tls_bio_set_input(struct tls_bio *tb, const void *p, size_t n) {
        tb->in = p;
        tb->in_len = n;
}

/* SSL_write all of p[0, n) (the records go to the sink). Returns 0, or
 * -EPROTO when OpenSSL fails (the reason is left on OpenSSL's error queue
 * for tls_bio_error). For a connection that writes to a sink, "would
 * block" cannot happen: output is never refused for lack of room. */
int tls_bio_write_all(SSL *ssl, const void *p, size_t n);

/* Describe the latest OpenSSL error as "what: reason" (or just what when
 * the error queue is empty) into buf, and clear the error queue. */
void tls_bio_error(char *buf, size_t size, const char *what);
