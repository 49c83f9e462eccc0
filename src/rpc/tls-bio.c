/* SPDX-License-Identifier: Apache-2.0 */
/* The zero-copy transport BIO. See tls-bio.h. */
#include "rpc/tls-bio.h"

#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include <openssl/err.h>

#include "basic/macro.h"

static int bio_write_cb(BIO *b, const char *data, int n) {
        struct tls_bio *tb = BIO_get_data(b);
        BIO_clear_retry_flags(b);
        if (n <= 0)
                return 0;
        if (tb->sink(tb->sink_arg, data, (size_t) n) < 0)
                return -1;
        return n;
}

static int bio_read_cb(BIO *b, char *out, int n) {
        struct tls_bio *tb = BIO_get_data(b);
        BIO_clear_retry_flags(b);
        if (n <= 0)
                return 0;
        if (tb->in_len == 0) {
                BIO_set_retry_read(b);
                return -1;
        }
        size_t take = MIN((size_t) n, tb->in_len);
        memcpy(out, tb->in, take);
        tb->in += take;
        tb->in_len -= take;
        return (int) take;
}

static long bio_ctrl_cb(BIO *b, int cmd, long num, void *ptr) {
        struct tls_bio *tb = BIO_get_data(b);
        switch (cmd) {
        case BIO_CTRL_FLUSH:
                return 1;
        case BIO_CTRL_PENDING:
                return tb ? (long) tb->in_len : 0;
        default:
                return 0;
        }
}

static int bio_create_cb(BIO *b) {
        BIO_set_init(b, 1);
        return 1;
}

static BIO_METHOD *bio_method;
static pthread_once_t bio_once = PTHREAD_ONCE_INIT;

static void bio_method_init(void) {
        BIO_METHOD *m = BIO_meth_new(BIO_get_new_index() | BIO_TYPE_SOURCE_SINK, "warren-tls");
        if (!m)
                return;
        if (!BIO_meth_set_write(m, bio_write_cb) || !BIO_meth_set_read(m, bio_read_cb) ||
            !BIO_meth_set_ctrl(m, bio_ctrl_cb) || !BIO_meth_set_create(m, bio_create_cb)) {
                BIO_meth_free(m);
                return;
        }
        bio_method = m;
}

int tls_bio_attach(struct tls_bio *tb, SSL *ssl) {
        pthread_once(&bio_once, bio_method_init);
        BIO *bio = bio_method ? BIO_new(bio_method) : NULL;
        if (!bio)
                return -ENOMEM;
        BIO_set_data(bio, tb);
        SSL_set_bio(ssl, bio, bio);
        return 0;
}

int tls_bio_write_all(SSL *ssl, const void *p, size_t n) {
        while (n > 0) {
                int k = SSL_write(ssl, p, (int) MIN(n, (size_t) INT_MAX));
                if (k <= 0)
                        return -EPROTO;
                p = (const uint8_t *) p + k;
                n -= (size_t) k;
        }
        return 0;
}

void tls_bio_error(char *buf, size_t size, const char *what) {
        unsigned long e = ERR_peek_last_error();
        if (e)
                snprintf(buf, size, "%s: %s", what, ERR_reason_error_string(e));
        else
                snprintf(buf, size, "%s", what);
        ERR_clear_error();
}
