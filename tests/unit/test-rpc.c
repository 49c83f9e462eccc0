/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests for the gRPC wire format (src/rpc/grpc.c): incremental framing
 * across every chunk split, oversize and bad flags, percent-encoding both
 * ways, grpc-timeout parsing and formatting. And the transport's memory
 * (src/rpc/h2.c: the message-buffer cache, the message queue, the decoder
 * on a custom allocator) plus an in-process server and client over a real
 * unix socket: zero-copy output of large and small messages, back-pressure,
 * and the buffer cache going back to the kernel when the server is idle. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <unistd.h>

#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>

#include "basic/macro.h"
#include "rpc/client.h"
#include "rpc/grpc.h"
#include "rpc/h2.h"
#include "rpc/server.h"
#include "rpc/timer-heap.h"
#include "rpc/tls-bio.h"
#include "warren/v1/diag.pb-c.h"

#if defined(__SANITIZE_ADDRESS__)
#define NO_MEM_CACHE 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define NO_MEM_CACHE 1
#endif
#endif

struct collected {
        size_t n;
        uint8_t *msgs[16];
        size_t lens[16];
};

static int collect(void *userdata, uint8_t *msg, size_t len) {
        struct collected *c = userdata;
        if (c->n >= 16) {
                free(msg);
                return -ENOBUFS;
        }
        c->msgs[c->n] = msg;
        c->lens[c->n] = len;
        c->n++;
        return 0;
}

static void collected_free(struct collected *c) {
        for (size_t i = 0; i < c->n; i++)
                free(c->msgs[i]);
        c->n = 0;
}

/* Build a stream of three messages: 3 bytes, 0 bytes, 300 bytes. */
static size_t build_stream(uint8_t *buf) {
        size_t off = 0;
        const size_t lens[] = {3, 0, 300};
        for (size_t m = 0; m < 3; m++) {
                assert_int_equal(grpc_frame_header(buf + off, lens[m]), 0);
                off += GRPC_FRAME_HEADER;
                for (size_t i = 0; i < lens[m]; i++)
                        buf[off++] = (uint8_t) (m * 7 + i);
        }
        return off;
}

static void check_three(struct collected *c) {
        assert_int_equal(c->n, 3);
        assert_int_equal(c->lens[0], 3);
        assert_int_equal(c->lens[1], 0);
        assert_int_equal(c->lens[2], 300);
        for (size_t m = 0; m < 3; m++)
                for (size_t i = 0; i < c->lens[m]; i++)
                        assert_int_equal(c->msgs[m][i], (uint8_t) (m * 7 + i));
}

static void test_decode_whole(void **state) {
        uint8_t buf[400];
        size_t n = build_stream(buf);
        struct grpc_decoder d = {.max = 1000};
        struct collected c = {0};
        assert_int_equal(grpc_decoder_feed(&d, buf, n, collect, &c), 0);
        check_three(&c);
        assert_false(grpc_decoder_partial(&d));
        collected_free(&c);
        grpc_decoder_reset(&d);
}

/* Every split into two chunks, and byte by byte. */
static void test_decode_splits(void **state) {
        uint8_t buf[400];
        size_t n = build_stream(buf);
        for (size_t cut = 0; cut <= n; cut++) {
                struct grpc_decoder d = {.max = 1000};
                struct collected c = {0};
                assert_int_equal(grpc_decoder_feed(&d, buf, cut, collect, &c), 0);
                assert_int_equal(grpc_decoder_feed(&d, buf + cut, n - cut, collect, &c), 0);
                check_three(&c);
                assert_false(grpc_decoder_partial(&d));
                collected_free(&c);
                grpc_decoder_reset(&d);
        }
        struct grpc_decoder d = {.max = 1000};
        struct collected c = {0};
        for (size_t i = 0; i < n; i++) {
                assert_int_equal(grpc_decoder_feed(&d, buf + i, 1, collect, &c), 0);
                if (i + 1 < n && i >= 3 + 5 + 5)
                        assert_true(grpc_decoder_partial(&d));
        }
        check_three(&c);
        collected_free(&c);
        grpc_decoder_reset(&d);
}

/* Pseudo-random chunkings of a larger stream. */
static void test_decode_random_chunks(void **state) {
        enum { N = 20000 };
        uint8_t *buf = malloc(N);
        size_t off = 0, msgs = 0;
        unsigned seed = 1;
        while (off + 5 + 1000 < N) {
                seed = seed * 1103515245 + 12345;
                size_t len = (seed >> 16) % 1000;
                grpc_frame_header(buf + off, len);
                off += 5;
                for (size_t i = 0; i < len; i++)
                        buf[off++] = (uint8_t) (len + i);
                msgs++;
        }
        for (int round = 0; round < 50; round++) {
                struct grpc_decoder d = {.max = 1000};
                size_t got = 0, pos = 0;
                while (pos < off) {
                        seed = seed * 1103515245 + 12345;
                        size_t chunk = MIN((seed >> 16) % 64 + 1, off - pos);
                        struct collected c = {0};
                        assert_int_equal(grpc_decoder_feed(&d, buf + pos, chunk, collect, &c), 0);
                        for (size_t k = 0; k < c.n; k++)
                                for (size_t i = 0; i < c.lens[k]; i++)
                                        assert_int_equal(c.msgs[k][i], (uint8_t) (c.lens[k] + i));
                        got += c.n;
                        collected_free(&c);
                        pos += chunk;
                }
                assert_int_equal(got, msgs);
                assert_false(grpc_decoder_partial(&d));
                grpc_decoder_reset(&d);
        }
        free(buf);
}

static void test_decode_oversize(void **state) {
        uint8_t hdr[5];
        grpc_frame_header(hdr, 101);
        struct grpc_decoder d = {.max = 100};
        struct collected c = {0};
        /* Rejected from the prefix alone, before any body arrives. */
        assert_int_equal(grpc_decoder_feed(&d, hdr, 3, collect, &c), 0);
        assert_int_equal(grpc_decoder_feed(&d, hdr + 3, 2, collect, &c), -EMSGSIZE);
        assert_int_equal(c.n, 0);
        grpc_decoder_reset(&d);
        /* Exactly max is fine. */
        uint8_t buf[105] = {0};
        grpc_frame_header(buf, 100);
        assert_int_equal(grpc_decoder_feed(&d, buf, sizeof(buf), collect, &c), 0);
        assert_int_equal(c.n, 1);
        collected_free(&c);
        grpc_decoder_reset(&d);
        /* A 4 GiB prefix with no limit set still does not overflow size_t math. */
        uint8_t big[5] = {0, 0xff, 0xff, 0xff, 0xff};
        struct grpc_decoder d2 = {.max = 16u << 20};
        assert_int_equal(grpc_decoder_feed(&d2, big, 5, collect, &c), -EMSGSIZE);
        grpc_decoder_reset(&d2);
}

static void test_decode_flags(void **state) {
        struct grpc_decoder d = {.max = 100};
        struct collected c = {0};
        uint8_t comp[6] = {1, 0, 0, 0, 1, 'x'};
        assert_int_equal(grpc_decoder_feed(&d, comp, 6, collect, &c), -EPROTONOSUPPORT);
        grpc_decoder_reset(&d);
        uint8_t bad[6] = {7, 0, 0, 0, 1, 'x'};
        assert_int_equal(grpc_decoder_feed(&d, bad, 6, collect, &c), -EBADMSG);
        grpc_decoder_reset(&d);
        assert_int_equal(c.n, 0);
        /* Callback errors stop decoding and propagate. */
        uint8_t many[17 * 5] = {0};
        assert_int_equal(grpc_decoder_feed(&d, many, sizeof(many), collect, &c), -ENOBUFS);
        assert_int_equal(c.n, 16);
        collected_free(&c);
        grpc_decoder_reset(&d);
}

static void test_frame_header(void **state) {
        uint8_t h[5];
        assert_int_equal(grpc_frame_header(h, 0x01020304), 0);
        assert_memory_equal(h, "\0\1\2\3\4", 5);
        if (sizeof(size_t) > 4)
                assert_int_equal(grpc_frame_header(h, (size_t) UINT32_MAX + 1), -EMSGSIZE);
}

static void test_percent_encode(void **state) {
        char *s = NULL;
        const char in[] = "ok 100% h\xc3\xa9llo\nline\x7f~";
        assert_int_equal(grpc_percent_encode(in, strlen(in), &s), 0);
        assert_string_equal(s, "ok 100%25 h%C3%A9llo%0Aline%7F~");
        free(s);
        assert_int_equal(grpc_percent_encode("", 0, &s), 0);
        assert_string_equal(s, "");
        free(s);
        /* NUL bytes are encoded too. */
        assert_int_equal(grpc_percent_encode("a\0b", 3, &s), 0);
        assert_string_equal(s, "a%00b");
        free(s);
}

static void test_percent_decode(void **state) {
        char *s = NULL;
        size_t n;
        const char in[] = "ok 100%25 h%C3%a9llo%0Aline";
        assert_int_equal(grpc_percent_decode(in, strlen(in), &s, &n), 0);
        assert_string_equal(s, "ok 100% h\xc3\xa9llo\nline");
        assert_int_equal(n, strlen(s));
        free(s);
        /* Lenient: broken escapes stay literal. */
        const char *bad[] = {"%", "%2", "%zz", "100%", "a%G1", "%%41"};
        const char *want[] = {"%", "%2", "%zz", "100%", "a%G1", "%A"};
        for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
                assert_int_equal(grpc_percent_decode(bad[i], strlen(bad[i]), &s, NULL), 0);
                assert_string_equal(s, want[i]);
                free(s);
        }
        /* Round trip of every byte value. */
        char all[256];
        for (int i = 0; i < 256; i++)
                all[i] = (char) i;
        char *enc = NULL;
        assert_int_equal(grpc_percent_encode(all, 256, &enc), 0);
        for (const char *p = enc; *p; p++)
                assert_true(*p >= 0x20 && *p <= 0x7e);
        assert_int_equal(grpc_percent_decode(enc, strlen(enc), &s, &n), 0);
        assert_int_equal(n, 256);
        assert_memory_equal(s, all, 256);
        free(s);
        free(enc);
}

static void check_timeout(const char *s, int want_r, uint64_t want_ms) {
        uint64_t ms = 12345;
        int r = grpc_timeout_parse(s, strlen(s), &ms);
        assert_int_equal(r, want_r);
        if (r == 0)
                assert_int_equal(ms, want_ms);
        else
                assert_int_equal(ms, 12345);
}

static void test_timeout_parse(void **state) {
        check_timeout("1H", 0, 3600000);
        check_timeout("2M", 0, 120000);
        check_timeout("3S", 0, 3000);
        check_timeout("250m", 0, 250);
        check_timeout("1500u", 0, 2);
        check_timeout("1000u", 0, 1);
        check_timeout("1n", 0, 1);
        check_timeout("0m", 0, 0);
        check_timeout("0n", 0, 0);
        check_timeout("99999999S", 0, 99999999000ULL);
        check_timeout("99999999H", 0, 99999999ULL * 3600000ULL);
        /* Bad input. */
        check_timeout("", -EINVAL, 0);
        check_timeout("m", -EINVAL, 0);
        check_timeout("5", -EINVAL, 0);
        check_timeout("123456789S", -EINVAL, 0);
        check_timeout("5s", -EINVAL, 0);
        check_timeout("5h", -EINVAL, 0);
        check_timeout("-5S", -EINVAL, 0);
        check_timeout(" 5S", -EINVAL, 0);
        check_timeout("5 S", -EINVAL, 0);
        check_timeout("5SS", -EINVAL, 0);
        check_timeout("0x5S", -EINVAL, 0);
        uint64_t ms;
        assert_int_equal(grpc_timeout_parse(NULL, 0, &ms), -EINVAL);
        /* Length-bounded: no NUL needed, trailing bytes ignored. */
        assert_int_equal(grpc_timeout_parse("7mXYZ", 2, &ms), 0);
        assert_int_equal(ms, 7);
}

static void test_timeout_format(void **state) {
        char buf[32];
        assert_int_equal(grpc_timeout_format(0, buf, sizeof(buf)), 2);
        assert_string_equal(buf, "0m");
        grpc_timeout_format(1500, buf, sizeof(buf));
        assert_string_equal(buf, "1500m");
        grpc_timeout_format(99999999, buf, sizeof(buf));
        assert_string_equal(buf, "99999999m");
        grpc_timeout_format(100000000, buf, sizeof(buf));
        assert_string_equal(buf, "100000S");
        grpc_timeout_format(100000001, buf, sizeof(buf));
        assert_string_equal(buf, "100001S");
        grpc_timeout_format(UINT64_MAX, buf, sizeof(buf));
        assert_string_equal(buf, "99999999H");
        /* Round trip never shortens the timeout. */
        for (uint64_t ms = 1; ms < (1ULL << 40); ms = ms * 3 + 1) {
                uint64_t back;
                size_t n = grpc_timeout_format(ms, buf, sizeof(buf));
                assert_int_equal(grpc_timeout_parse(buf, n, &back), 0);
                assert_true(back >= ms);
        }
}

static void test_content_type(void **state) {
        assert_true(grpc_content_type_ok("application/grpc", 16));
        assert_true(grpc_content_type_ok("application/grpc+proto", 22));
        assert_true(grpc_content_type_ok("application/GRPC;charset=x", 26));
        assert_false(grpc_content_type_ok("application/grpcx", 17));
        assert_false(grpc_content_type_ok("application/json", 16));
        assert_false(grpc_content_type_ok("application/grp", 15));
}

/* --- h2 memory --- */

static void test_listen_loopback(void **state) {
        static const char *const yes[] = {
                "unix:/run/warren/warren.sock",
                "tcp:127.0.0.1:7000",
                "tls:127.0.0.1:0",
                "tcp:127.255.0.9:1",
                "tcp:localhost:7000",
                "tcp:[::1]:7000",
                "tls:[::ffff:127.0.0.1]:7000",
                "127.0.0.1:80",
        };
        static const char *const no[] = {
                "tcp:0.0.0.0:7000",
                "tls:0.0.0.0:7000",
                "tcp:[::]:7000",
                "tcp:192.0.2.1:7000",
                "tcp:10.0.0.1:7000",
                "tcp:128.0.0.1:7000",
                "tcp:[::ffff:10.0.0.1]:7000",
                "tcp:[::2]:7000",
                "tcp:example.com:7000",
                "tcp:localhost.evil:7000",
                "tcp:127.0.0.1",
                "tcp::7000",
                "",
                NULL,
        };
        for (size_t i = 0; i < ELEMENTSOF(yes); i++)
                assert_true(rpc_listen_addr_is_loopback(yes[i]));
        for (size_t i = 0; i < ELEMENTSOF(no); i++)
                assert_false(rpc_listen_addr_is_loopback(no[i]));
}

/* --- timer heap --- */

struct th_probe {
        struct timer_heap_entry t;
        int id;
        int *order;
        size_t *n;
};

static void th_fired(struct timer_heap_entry *t) {
        struct th_probe *p = (struct th_probe *) t;
        assert_false(timer_heap_entry_armed(t)); /* disarmed before cb */
        p->order[(*p->n)++] = p->id;
}

static void th_closed(uv_handle_t *h) {
        *(bool *) h->data = true;
}

static void test_timer_heap(void **state) {
        uv_loop_t loop;
        assert_int_equal(uv_loop_init(&loop), 0);
        struct timer_heap th;
        assert_int_equal(timer_heap_init(&th, &loop), 0);
        int order[64];
        size_t n = 0;
        struct th_probe p[40];
        uint64_t now = uv_now(&loop);
        /* 40 entries in scrambled order (more than the initial capacity). */
        for (int i = 0; i < 40; i++) {
                p[i] = (struct th_probe){.t.cb = th_fired, .id = i, .order = order, .n = &n};
                assert_int_equal(timer_heap_arm(&th, &p[i].t, now + 2 + (uint64_t) ((i * 7) % 40)),
                                 0);
                assert_true(timer_heap_entry_armed(&p[i].t));
        }
        /* Re-arm moves an entry; disarm removes it (twice is a no-op). */
        assert_int_equal(timer_heap_arm(&th, &p[39].t, now), 0);
        timer_heap_disarm(&th, &p[5].t);
        timer_heap_disarm(&th, &p[5].t);
        assert_false(timer_heap_entry_armed(&p[5].t));
        while (n < 39)
                uv_run(&loop, UV_RUN_ONCE);
        assert_int_equal(n, 39);
        assert_int_equal(order[0], 39);
        /* The rest by deadline: (i * 7) % 40 increasing. */
        for (size_t k = 2; k < n; k++)
                assert_true((order[k - 1] * 7) % 40 < (order[k] * 7) % 40);
        for (size_t k = 0; k < n; k++)
                assert_int_not_equal(order[k], 5);
        /* Closing disarms what is left; nothing fires afterwards. */
        assert_int_equal(timer_heap_arm(&th, &p[1].t, uv_now(&loop)), 0);
        bool closed = false;
        th.handle.data = &closed;
        timer_heap_close(&th, th_closed);
        assert_false(timer_heap_entry_armed(&p[1].t));
        uv_run(&loop, UV_RUN_DEFAULT);
        assert_true(closed);
        assert_int_equal(n, 39);
        assert_int_equal(uv_loop_close(&loop), 0);
}

/* --- TLS transport BIO --- */

static int buf_sink(void *arg, const void *p, size_t n) {
        return h2_buf_append(arg, p, n);
}

static void self_signed(EVP_PKEY **ret_key, X509 **ret_crt) {
        EVP_PKEY *key = EVP_EC_gen("P-256");
        X509 *x = X509_new();
        assert_non_null(key);
        assert_non_null(x);
        assert_int_equal(X509_set_version(x, 2), 1);
        ASN1_INTEGER_set(X509_get_serialNumber(x), 1);
        X509_gmtime_adj(X509_getm_notBefore(x), 0);
        X509_gmtime_adj(X509_getm_notAfter(x), 3600);
        assert_int_equal(X509_set_pubkey(x, key), 1);
        X509_NAME *nm = X509_get_subject_name(x);
        X509_NAME_add_entry_by_txt(nm, "CN", MBSTRING_ASC, (const unsigned char *) "localhost", -1,
                                   -1, 0);
        assert_int_equal(X509_set_issuer_name(x, nm), 1);
        assert_true(X509_sign(x, key, EVP_sha256()) > 0);
        *ret_key = key;
        *ret_crt = x;
}

/* Hand what one side wrote to the other side's BIO, let it run op, and
 * drop what it consumed. */
static void tls_step(SSL *ssl, struct tls_bio *tb, struct h2_buf *in) {
        tls_bio_set_input(tb, in->data, in->len);
        if (!SSL_is_init_finished(ssl))
                (void) SSL_do_handshake(ssl);
        h2_buf_consume(in, in->len - tb->in_len);
        tls_bio_set_input(tb, NULL, 0);
}

static void test_tls_bio(void **state) {
        EVP_PKEY *key;
        X509 *crt;
        self_signed(&key, &crt);
        SSL_CTX *sctx = SSL_CTX_new(TLS_server_method());
        SSL_CTX *cctx = SSL_CTX_new(TLS_client_method());
        assert_int_equal(SSL_CTX_use_certificate(sctx, crt), 1);
        assert_int_equal(SSL_CTX_use_PrivateKey(sctx, key), 1);
        SSL_CTX_set_verify(cctx, SSL_VERIFY_NONE, NULL);
        SSL *srv = SSL_new(sctx), *cli = SSL_new(cctx);
        struct h2_buf c2s = {0}, s2c = {0};
        struct tls_bio sb = {.sink = buf_sink, .sink_arg = &s2c};
        struct tls_bio cb = {.sink = buf_sink, .sink_arg = &c2s};
        assert_int_equal(tls_bio_attach(&sb, srv), 0);
        assert_int_equal(tls_bio_attach(&cb, cli), 0);
        SSL_set_accept_state(srv);
        SSL_set_connect_state(cli);
        /* Nothing received yet: the client writes its hello and waits. */
        assert_int_equal(SSL_do_handshake(cli), -1);
        assert_int_equal(SSL_get_error(cli, -1), SSL_ERROR_WANT_READ);
        assert_true(c2s.len > 0);
        for (int i = 0; i < 10 && !(SSL_is_init_finished(srv) && SSL_is_init_finished(cli)); i++) {
                tls_step(srv, &sb, &c2s);
                tls_step(cli, &cb, &s2c);
        }
        assert_true(SSL_is_init_finished(srv) && SSL_is_init_finished(cli));

        /* Application data both ways, records straight into the sinks. */
        assert_int_equal(tls_bio_write_all(cli, "hello, server", 13), 0);
        char got[64];
        tls_bio_set_input(&sb, c2s.data, c2s.len);
        int n = SSL_read(srv, got, sizeof(got));
        assert_int_equal(n, 13);
        assert_memory_equal(got, "hello, server", 13);
        assert_int_equal(sb.in_len, 0); /* every byte handed in was read */
        tls_bio_set_input(&sb, NULL, 0);
        h2_buf_consume(&c2s, c2s.len);
        assert_int_equal(tls_bio_write_all(srv, "hi", 2), 0);
        tls_bio_set_input(&cb, s2c.data, s2c.len);
        /* The server's session tickets may come first: read until data. */
        do
                n = SSL_read(cli, got, sizeof(got));
        while (n <= 0 && SSL_get_error(cli, n) == SSL_ERROR_WANT_READ && cb.in_len > 0);
        assert_int_equal(n, 2);
        assert_memory_equal(got, "hi", 2);
        tls_bio_set_input(&cb, NULL, 0);

        /* Nothing to read: "retry", not an error. */
        assert_true(SSL_read(srv, got, sizeof(got)) <= 0);
        assert_int_equal(SSL_get_error(srv, -1), SSL_ERROR_WANT_READ);

        char msg[64];
        ERR_clear_error();
        tls_bio_error(msg, sizeof(msg), "TLS read failed");
        assert_string_equal(msg, "TLS read failed");

        SSL_free(srv);
        SSL_free(cli);
        SSL_CTX_free(sctx);
        SSL_CTX_free(cctx);
        X509_free(crt);
        EVP_PKEY_free(key);
        h2_buf_free(&c2s);
        h2_buf_free(&s2c);
}

static void test_mem_cache(void **state) {
        h2_mem_trim();
        assert_int_equal(h2_mem_cached(), 0);
        /* Small blocks: malloc, never cached. */
        uint8_t *p = h2_mem_alloc(100);
        assert_non_null(p);
        memset(p, 0xab, 100);
        h2_mem_free(p);
        assert_int_equal(h2_mem_cached(), 0);
        h2_mem_free(NULL);
        /* A large block is kept and handed out again. */
        size_t big = 1u << 20;
        p = h2_mem_alloc(big);
        assert_non_null(p);
        memset(p, 0x5a, big);
        h2_mem_free(p);
#ifdef NO_MEM_CACHE
        assert_int_equal(h2_mem_cached(), 0);
#else
        assert_true(h2_mem_cached() >= big);
        uint8_t *q = h2_mem_alloc(big - 1000);
        assert_ptr_equal(q, p);
        assert_int_equal(h2_mem_cached(), 0);
        h2_mem_free(q);
#endif
        /* The cache is bounded: 8 blocks and 16 MiB. */
        uint8_t *blk[12];
        for (size_t i = 0; i < ELEMENTSOF(blk); i++) {
                blk[i] = h2_mem_alloc(3u << 20);
                assert_non_null(blk[i]);
                blk[i][(3u << 20) - 1] = 1;
        }
        for (size_t i = 0; i < ELEMENTSOF(blk); i++)
                h2_mem_free(blk[i]);
        assert_true(h2_mem_cached() <= (16u << 20));
        h2_mem_trim();
        assert_int_equal(h2_mem_cached(), 0);
}

static void test_pb_allocator(void **state) {
        Warren__V1__EchoRequest req = WARREN__V1__ECHO_REQUEST__INIT;
        size_t n = 300u * 1024u;
        uint8_t *payload = malloc(n);
        assert_non_null(payload);
        for (size_t i = 0; i < n; i++)
                payload[i] = (uint8_t) (i * 13);
        req.payload.data = payload;
        req.payload.len = n;
        req.message = "hello";
        size_t len = protobuf_c_message_get_packed_size(&req.base);
        uint8_t *buf = h2_mem_alloc(len);
        assert_non_null(buf);
        protobuf_c_message_pack(&req.base, buf);
        Warren__V1__EchoRequest *out = (Warren__V1__EchoRequest *) protobuf_c_message_unpack(
                &warren__v1__echo_request__descriptor, &h2_pb_allocator, len, buf);
        assert_non_null(out);
        assert_int_equal(out->payload.len, n);
        assert_memory_equal(out->payload.data, payload, n);
        assert_string_equal(out->message, "hello");
        protobuf_c_message_free_unpacked(&out->base, &h2_pb_allocator);
        h2_mem_free(buf);
        free(payload);
        h2_mem_trim();
}

static size_t counted_live;

static void *counted_alloc(size_t n) {
        counted_live++;
        return malloc(n);
}

static void counted_free(void *p) {
        if (p)
                counted_live--;
        free(p);
}

static int collect_counted(void *userdata, uint8_t *msg, size_t len) {
        size_t *total = userdata;
        *total += len;
        counted_free(msg);
        return 0;
}

static void test_decode_allocator(void **state) {
        uint8_t buf[400];
        size_t n = build_stream(buf);
        struct grpc_decoder d = {.max = 1000, .alloc_fn = counted_alloc, .free_fn = counted_free};
        size_t total = 0;
        counted_live = 0;
        assert_int_equal(grpc_decoder_feed(&d, buf, n, collect_counted, &total), 0);
        assert_int_equal(total, 303);
        assert_int_equal(counted_live, 0);
        /* Reset in the middle of the 300-byte body frees it through free_fn
         * and keeps the allocator. */
        assert_int_equal(grpc_decoder_feed(&d, buf, n - 10, collect_counted, &total), 0);
        assert_int_equal(counted_live, 1);
        assert_true(grpc_decoder_partial(&d));
        grpc_decoder_reset(&d);
        assert_int_equal(counted_live, 0);
        assert_ptr_equal(d.alloc_fn, counted_alloc);
        assert_int_equal(d.max, 1000);
        assert_int_equal(grpc_decoder_feed(&d, buf, n, collect_counted, &total), 0);
        assert_int_equal(counted_live, 0);
}

static void test_msgq(void **state) {
        struct h2_msgq q = {0};
        Warren__V1__EchoResponse m = WARREN__V1__ECHO_RESPONSE__INIT;
        uint8_t payload[200];
        for (size_t i = 0; i < sizeof(payload); i++)
                payload[i] = (uint8_t) i;
        m.payload.data = payload;
        m.payload.len = sizeof(payload);
        size_t packed = protobuf_c_message_get_packed_size(&m.base);
        assert_int_equal(h2_msgq_push(&q, &m.base, 0), 0);
        assert_int_equal(h2_msgq_push_packed(&q, "xyz", 3, 0), 0);
        assert_int_equal(h2_msgq_push(&q, &m.base, 10), -EMSGSIZE);
        assert_int_equal(h2_msgq_push_packed(&q, "xyz", 3, 2), -EMSGSIZE);
        assert_int_equal(q.bytes, 2 * GRPC_FRAME_HEADER + packed + 3);
        /* Read across the message boundary in odd pieces; the bytes are the
         * two framed messages back to back. */
        uint8_t out[512];
        size_t got = 0, k;
        while ((k = h2_msgq_read(&q, out + got, 7)) > 0)
                got += k;
        assert_int_equal(got, 2 * GRPC_FRAME_HEADER + packed + 3);
        assert_int_equal(q.bytes, 0);
        assert_null(q.head);
        assert_int_equal(out[0], 0);
        assert_int_equal((size_t) out[3] << 8 | out[4], packed);
        uint8_t *second = out + GRPC_FRAME_HEADER + packed;
        assert_memory_equal(second, "\0\0\0\0\3xyz", 8);
        Warren__V1__EchoResponse *back =
                warren__v1__echo_response__unpack(NULL, packed, out + GRPC_FRAME_HEADER);
        assert_non_null(back);
        assert_memory_equal(back->payload.data, payload, sizeof(payload));
        warren__v1__echo_response__free_unpacked(back, NULL);
        assert_int_equal(h2_msgq_push_packed(&q, "abc", 3, 0), 0);
        h2_msgq_clear(&q);
        assert_int_equal(q.bytes, 0);
        assert_null(q.head);
        assert_null(q.tail);
}

static int refs_released;
static void count_release(void *arg) {
        (void) arg;
        refs_released++;
}

/* Tiny messages are counted at their memory cost, and moving them to the
 * output copies them: the queue gives their chunks back at once. */
static void test_msgq_tiny_messages(void **state) {
        struct h2_msgq q = {0};
        static uint8_t big[8192];
        for (size_t i = 0; i < sizeof(big); i++)
                big[i] = (uint8_t) (i * 7);
        refs_released = 0;
        /* 100 two-byte output runs: a copied head + a referenced payload. */
        for (int i = 0; i < 100; i++)
                assert_int_equal(h2_msgq_push_ref(&q, "\x12\x04\x0a\x02", 4, "ab", 2, count_release,
                                                  NULL, 0),
                                 0);
        assert_int_equal(q.n_chunks, 200);
        assert_int_equal(q.bytes, 100 * (GRPC_FRAME_HEADER + 6));
        assert_int_equal(h2_msgq_cost(&q), q.bytes + 200 * H2_CHUNK_COST);
        assert_true(h2_msgq_cost(&q) > 10 * q.bytes);
        /* And one large referenced payload after them. */
        assert_int_equal(
                h2_msgq_push_ref(&q, "\x12\x80\x40", 3, big, sizeof(big), count_release, NULL, 0),
                0);
        assert_int_equal(q.n_chunks, 202);
        size_t total = q.bytes;

        struct h2_outq o = {0};
        assert_int_equal(h2_outq_take(&o, &q, total), 0);
        assert_int_equal(q.bytes, 0);
        assert_int_equal(q.n_chunks, 0);
        assert_null(q.head);
        /* The small slices were copied (their payloads released already),
         * the large one is referenced by one segment. */
        assert_int_equal(refs_released, 100);
        assert_int_equal(o.total, total);
        assert_int_equal(o.n - o.head, 2);
        assert_non_null(o.segs[o.n - 1].chunk);
        assert_int_equal(o.segs[o.n - 1].len, sizeof(big));
        /* The bytes, in order. */
        uint8_t *out = malloc(total);
        assert_non_null(out);
        size_t got = 0;
        for (size_t i = o.head; i < o.n; i++) {
                const struct h2_seg *sg = &o.segs[i];
                const uint8_t *p =
                        sg->chunk ? h2_chunk_bytes(sg->chunk) + sg->off : o.bytes.data + sg->off;
                memcpy(out + got, p, sg->len);
                got += sg->len;
        }
        assert_int_equal(got, total);
        for (int i = 0; i < 100; i++)
                assert_memory_equal(out + i * 11,
                                    "\0\0\0\0\6\x12\x04\x0a\x02"
                                    "ab",
                                    11);
        assert_memory_equal(out + 1100 + GRPC_FRAME_HEADER + 3, big, sizeof(big));
        free(out);
        h2_outq_consume(&o, total);
        assert_int_equal(refs_released, 101);
        h2_outq_free(&o);
}

static void test_inbox(void **state) {
        struct h2_inbox b = {0};
        for (size_t i = 0; i < 3; i++) {
                uint8_t *m = h2_mem_alloc(i + 1);
                assert_non_null(m);
                memset(m, (int) i, i + 1);
                assert_int_equal(h2_inbox_push(&b, m, i + 1), 0);
        }
        assert_int_equal(h2_inbox_push(&b, NULL, 0), 0);
        uint8_t *d;
        size_t n;
        for (size_t i = 0; i < 2; i++) {
                assert_true(h2_inbox_pop(&b, &d, &n));
                assert_int_equal(n, i + 1);
                assert_int_equal(d[i], i);
                h2_mem_free(d);
        }
        h2_inbox_clear(&b);
        assert_null(b.head);
        assert_null(b.tail);
        assert_false(h2_inbox_pop(&b, &d, &n));
}

/* --- an in-process server and client over a unix socket --- */

static void echo_on_message(struct rpc_call *call, const ProtobufCMessage *msg) {
        const Warren__V1__EchoRequest *req = (const Warren__V1__EchoRequest *) msg;
        Warren__V1__EchoResponse resp = WARREN__V1__ECHO_RESPONSE__INIT;
        resp.payload = req->payload;
        if (rpc_call_method(call)->kind == RPC_UNARY) {
                rpc_call_reply(call, &resp.base);
                return;
        }
        if (rpc_call_send(call, &resp.base) == 1)
                rpc_call_pause_recv(call);
}

static void echo_on_writable(struct rpc_call *call) {
        rpc_call_resume_recv(call);
}

static void echo_on_half_close(struct rpc_call *call) {
        rpc_call_finish(call, WR_STATUS_OK, NULL);
}

/* The header of EchoResponse.payload (field 1, length-delimited) for n
 * bytes; returns its length. */
static size_t payload_header(uint8_t hdr[11], size_t n) {
        size_t h = 0;
        hdr[h++] = 0x0a;
        for (size_t v = n;; v >>= 7) {
                hdr[h++] = (uint8_t) ((v & 0x7f) | (v > 0x7f ? 0x80 : 0));
                if (v <= 0x7f)
                        break;
        }
        return h;
}

/* Echo through rpc_call_send_buf: EchoResponse encoded by hand, the payload
 * written in place after 16 bytes of head room. */
static void raw_on_message(struct rpc_call *call, const ProtobufCMessage *msg) {
        const Warren__V1__EchoRequest *req = (const Warren__V1__EchoRequest *) msg;
        size_t n = req->payload.len;
        struct rpc_buf b = {0};
        assert_int_equal(rpc_buf_alloc(&b, 16 + n), 0);
        assert_true(b.cap >= 16 + n);
        /* A range outside the buffer is refused (and the buffer freed). */
        struct rpc_buf bad = {0};
        assert_int_equal(rpc_buf_alloc(&bad, 8), 0);
        assert_int_equal(rpc_call_send_buf(call, &bad, 4, 5), -EINVAL);
        assert_null(bad.priv);
        rpc_buf_free(&bad);
        if (n)
                memcpy(b.data + 16, req->payload.data, n);
        uint8_t hdr[11];
        size_t h = payload_header(hdr, n);
        memcpy(b.data + 16 - h, hdr, h);
        int r = rpc_call_send_buf(call, &b, 16 - h, h + n);
        assert_true(r == 0 || r == 1);
        assert_null(b.priv);
        rpc_call_finish(call, WR_STATUS_OK, NULL);
}

/* Flood: answer one request with FLOOD_N messages of FLOOD_SIZE bytes as
 * fast as flow control allows. */
#define FLOOD_N 96
#define FLOOD_SIZE (1u << 20)
static size_t flood_sent;

static void flood_more(struct rpc_call *call) {
        static uint8_t payload[FLOOD_SIZE];
        Warren__V1__EchoResponse resp = WARREN__V1__ECHO_RESPONSE__INIT;
        resp.payload.data = payload;
        resp.payload.len = sizeof(payload);
        while (flood_sent < FLOOD_N) {
                int r = rpc_call_send(call, &resp.base);
                if (r < 0)
                        return;
                if (++flood_sent == FLOOD_N)
                        rpc_call_finish(call, WR_STATUS_OK, NULL);
                if (r == 1)
                        return;
        }
}

static void flood_on_message(struct rpc_call *call, const ProtobufCMessage *msg) {
        flood_sent = 0;
        flood_more(call);
}

/* Echo through rpc_call_send_ref: the field header as head, the payload
 * by reference from a heap copy that the layer releases once written. */
static int ref_released;

static void ref_release(void *arg) {
        ref_released++;
        free(arg);
}

static void ref_on_message(struct rpc_call *call, const ProtobufCMessage *msg) {
        const Warren__V1__EchoRequest *req = (const Warren__V1__EchoRequest *) msg;
        size_t n = req->payload.len;
        uint8_t *copy = malloc(n ? n : 1);
        assert_non_null(copy);
        if (n)
                memcpy(copy, req->payload.data, n);
        uint8_t hdr[11];
        size_t h = payload_header(hdr, n);
        int r = rpc_call_send_ref(call, hdr, h, copy, n, ref_release, copy);
        assert_true(r == 0 || r == 1);
        rpc_call_finish(call, WR_STATUS_OK, NULL);
}

/* Tiny: TINY_N one-byte messages through rpc_call_send_ref (two queue
 * chunks each: far more bookkeeping than payload) as fast as back-pressure
 * allows. The high-water mark must count their cost, and a read that
 * drains the queue must wake the producer. */
#define TINY_N 300000
static size_t tiny_sent, tiny_max_queued;
static bool tiny_finished;
static uint8_t tiny_bytes[251];

static void tiny_more(struct rpc_call *call) {
        while (tiny_sent < TINY_N) {
                static const uint8_t hdr[2] = {0x0a, 0x01}; /* payload, 1 byte */
                int r = rpc_call_send_ref(call, hdr, 2, &tiny_bytes[tiny_sent % 251], 1, NULL,
                                          NULL);
                if (r < 0)
                        return;
                tiny_sent++;
                tiny_max_queued = MAX(tiny_max_queued, rpc_call_queued_bytes(call));
                if (r == 1)
                        return;
        }
        if (!tiny_finished) {
                tiny_finished = true;
                rpc_call_finish(call, WR_STATUS_OK, NULL);
        }
}

static void tiny_on_message(struct rpc_call *call, const ProtobufCMessage *msg) {
        for (size_t i = 0; i < sizeof(tiny_bytes); i++)
                tiny_bytes[i] = (uint8_t) i;
        tiny_sent = tiny_max_queued = 0;
        tiny_finished = false;
        tiny_more(call);
}

static const struct rpc_method echo_methods[] = {
        {
                .path = "/test.Echo/Ref",
                .kind = RPC_UNARY,
                .input = &warren__v1__echo_request__descriptor,
                .output = &warren__v1__echo_response__descriptor,
                .on_message = ref_on_message,
        },
        {
                .path = "/test.Echo/Tiny",
                .kind = RPC_SERVER_STREAM,
                .input = &warren__v1__echo_request__descriptor,
                .output = &warren__v1__echo_response__descriptor,
                .on_message = tiny_on_message,
                .on_writable = tiny_more,
        },
        {
                .path = "/test.Echo/Flood",
                .kind = RPC_SERVER_STREAM,
                .input = &warren__v1__echo_request__descriptor,
                .output = &warren__v1__echo_response__descriptor,
                .on_message = flood_on_message,
                .on_writable = flood_more,
        },
        {
                .path = "/test.Echo/Raw",
                .kind = RPC_UNARY,
                .input = &warren__v1__echo_request__descriptor,
                .output = &warren__v1__echo_response__descriptor,
                .on_message = raw_on_message,
        },
        {
                .path = "/test.Echo/Unary",
                .kind = RPC_UNARY,
                .input = &warren__v1__echo_request__descriptor,
                .output = &warren__v1__echo_response__descriptor,
                .on_message = echo_on_message,
        },
        {
                .path = "/test.Echo/Bidi",
                .kind = RPC_BIDI,
                .input = &warren__v1__echo_request__descriptor,
                .output = &warren__v1__echo_response__descriptor,
                .on_message = echo_on_message,
                .on_writable = echo_on_writable,
                .on_half_close = echo_on_half_close,
        },
};

static void fill(uint8_t *b, size_t size, size_t i) {
        for (size_t j = 0; j < size; j++)
                b[j] = (uint8_t) (i * 31 + j * 7 + (j >> 9));
}

struct lb {
        struct rpc_stream *st;
        size_t n, size, sent, recv;
        uint8_t *out, *expect;
        bool done, bad;
        int status;
};

static void lb_send_more(struct lb *b) {
        Warren__V1__EchoRequest req = WARREN__V1__ECHO_REQUEST__INIT;
        req.payload.data = b->out;
        req.payload.len = b->size;
        while (b->sent < b->n) {
                fill(b->out, b->size, b->sent);
                int r = rpc_stream_send(b->st, &req.base);
                if (r < 0)
                        return;
                b->sent++;
                if (b->sent == b->n)
                        rpc_stream_close_send(b->st);
                if (r == 1)
                        return;
        }
}

static void lb_on_message(struct rpc_stream *s, const ProtobufCMessage *msg, void *ud) {
        struct lb *b = ud;
        const Warren__V1__EchoResponse *r = (const Warren__V1__EchoResponse *) msg;
        fill(b->expect, b->size, b->recv);
        if (r->payload.len != b->size || memcmp(r->payload.data, b->expect, b->size) != 0)
                b->bad = true;
        b->recv++;
}

static void flood_on_message_client(struct rpc_stream *s, const ProtobufCMessage *msg, void *ud) {
        struct lb *b = ud;
        const Warren__V1__EchoResponse *r = (const Warren__V1__EchoResponse *) msg;
        if (r->payload.len == FLOOD_SIZE)
                b->recv++;
}

static int flood_on_raw(struct rpc_stream *s, const uint8_t *msg, size_t len, void *ud) {
        struct lb *b = ud;
        b->sent++; /* raw deliveries seen */
        if (b->sent % 2)
                return 0;
        /* EchoResponse{payload}: a 1 MiB payload has a 4-byte header. */
        if (len == FLOOD_SIZE + 4 && msg[0] == 0x0a)
                b->recv++;
        return 1;
}

static void tiny_on_message_client(struct rpc_stream *s, const ProtobufCMessage *msg, void *ud) {
        struct lb *b = ud;
        const Warren__V1__EchoResponse *r = (const Warren__V1__EchoResponse *) msg;
        if (r->payload.len != 1 || r->payload.data[0] != b->recv % 251)
                b->bad = true;
        b->recv++;
}

static void lb_on_writable(struct rpc_stream *s, void *ud) {
        lb_send_more(ud);
}

static void lb_on_close(struct rpc_stream *s, int status, const char *message, void *ud) {
        struct lb *b = ud;
        b->done = true;
        b->status = status;
}

static void lb_timer(uv_timer_t *t) {
        *(bool *) t->data = true;
}

static void lb_shutdown_done(void *userdata) {
        *(bool *) userdata = true;
}

static void run_for(uv_loop_t *loop, uint64_t ms) {
        uv_timer_t t;
        bool fired = false;
        uv_timer_init(loop, &t);
        t.data = &fired;
        uv_timer_start(&t, lb_timer, ms, 0);
        while (!fired)
                uv_run(loop, UV_RUN_ONCE);
        uv_close((uv_handle_t *) &t, NULL);
        uv_run(loop, UV_RUN_NOWAIT);
}

/* Open a server stream with an empty request, run the client until it is
 * over, and check that it ended OK. The stream is b->st (the caller's to
 * free). */
static void server_stream_run(struct rpc_client *c, const char *path, size_t max_recv,
                              const struct rpc_stream_callbacks *cbs, struct lb *b) {
        assert_int_equal(rpc_stream_open(c, path, &warren__v1__echo_response__descriptor, max_recv,
                                         cbs, b, &b->st),
                         0);
        Warren__V1__EchoRequest req = WARREN__V1__ECHO_REQUEST__INIT;
        assert_true(rpc_stream_send(b->st, &req.base) >= 0);
        rpc_stream_close_send(b->st);
        assert_int_equal(rpc_client_run(c), 0);
        assert_true(b->done);
        assert_int_equal(b->status, 0);
}

static void test_loopback(void **state) {
        uv_loop_t loop;
        assert_int_equal(uv_loop_init(&loop), 0);
        char dir[] = "/tmp/test-rpc.XXXXXX";
        assert_non_null(mkdtemp(dir));
        char path[64], addr[80];
        snprintf(path, sizeof(path), "%s/s", dir);
        snprintf(addr, sizeof(addr), "unix:%s", path);
        struct wr_err e = {0};
        struct rpc_server *srv;
        /* A low high-water mark: back-pressure every couple of messages. */
        struct rpc_server_config scfg = {.send_high_water = 1u << 20};
        assert_int_equal(rpc_server_new(&loop, &scfg, &srv, &e), 0);
        assert_int_equal(rpc_server_add_methods(srv, echo_methods, ELEMENTSOF(echo_methods)), 0);
        assert_int_equal(rpc_server_listen(srv, addr, &e), 0);
        struct rpc_client *c;
        struct rpc_client_config ccfg = {.addr = addr, .max_recv_message = 8u << 20};
        assert_int_equal(rpc_client_new(&loop, &ccfg, &c, &e), 0);

        /* Unary payloads on both sides of the copy / zero-copy threshold. */
        static const size_t sizes[] = {
                0,     16,       H2_COPY_MAX - 8, H2_COPY_MAX, H2_COPY_MAX + 1,
                70000, 1u << 20, (3u << 20) + 17};
        uint8_t *buf = malloc((3u << 20) + 17);
        assert_non_null(buf);
        ref_released = 0;
        for (size_t i = 0; i < 3 * ELEMENTSOF(sizes); i++) {
                /* Every size through rpc_call_send, rpc_call_send_buf, and
                 * rpc_call_send_ref. */
                const char *method = i < ELEMENTSOF(sizes)       ? "/test.Echo/Unary"
                                     : i < 2 * ELEMENTSOF(sizes) ? "/test.Echo/Raw"
                                                                 : "/test.Echo/Ref";
                size_t size = sizes[i % ELEMENTSOF(sizes)];
                Warren__V1__EchoRequest req = WARREN__V1__ECHO_REQUEST__INIT;
                fill(buf, size, i);
                req.payload.data = buf;
                req.payload.len = size;
                ProtobufCMessage *resp = NULL;
                assert_int_equal(rpc_client_unary(c, method, &req.base,
                                                  &warren__v1__echo_response__descriptor, 5000,
                                                  &resp, &e),
                                 0);
                const Warren__V1__EchoResponse *r = (const Warren__V1__EchoResponse *) resp;
                assert_int_equal(r->payload.len, size);
                if (size)
                        assert_memory_equal(r->payload.data, buf, size);
                /* The unary result is the caller's, on the default allocator. */
                protobuf_c_message_free_unpacked(resp, NULL);
        }
        free(buf);
        /* Every referenced payload was given back, once. */
        assert_int_equal(ref_released, ELEMENTSOF(sizes));

        /* A bidi stream of odd-sized messages (DATA frames span message
         * boundaries), content checked, with back-pressure both ways. */
        static const struct rpc_stream_callbacks cbs = {
                .on_message = lb_on_message,
                .on_writable = lb_on_writable,
                .on_close = lb_on_close,
        };
        struct lb b = {.n = 40, .size = 300u * 1024u + 11};
        b.out = malloc(b.size);
        b.expect = malloc(b.size);
        assert_non_null(b.out);
        assert_non_null(b.expect);
        assert_int_equal(rpc_stream_open(c, "/test.Echo/Bidi",
                                         &warren__v1__echo_response__descriptor, 0, &cbs, &b,
                                         &b.st),
                         0);
        lb_send_more(&b);
        assert_int_equal(rpc_client_run(c), 0);
        assert_true(b.done);
        assert_int_equal(b.status, 0);
        assert_false(b.bad);
        assert_int_equal(b.recv, b.n);
        rpc_stream_free(b.st);
        free(b.out);
        free(b.expect);

        /* A fast reader of a server stream: the socket (a large send
         * buffer) takes whole output batches at once, so sending must go
         * on without waiting for a write completion (this stalled once). */
        static const struct rpc_stream_callbacks fcbs = {
                .on_message = flood_on_message_client,
                .on_raw = flood_on_raw,
                .on_close = lb_on_close,
        };
        struct lb f = {0};
        server_stream_run(c, "/test.Echo/Flood", 20000, &fcbs, &f);
        /* Half taken raw, half parsed: all counted once. */
        assert_int_equal(f.sent, FLOOD_N);
        assert_int_equal(f.recv, FLOOD_N);
        rpc_stream_free(f.st);

        /* A stream of one-byte messages (two queue chunks each) under a
         * 1 MiB high-water mark: back-pressure comes at ~1 MiB of memory, a
         * few tens of KB of payload, and the stream never stalls (our
         * client's 256 KiB frames drain the whole queue in one read). */
        static const struct rpc_stream_callbacks tcbs = {
                .on_message = tiny_on_message_client,
                .on_close = lb_on_close,
        };
        struct lb t = {0};
        server_stream_run(c, "/test.Echo/Tiny", 0, &tcbs, &t);
        assert_false(t.bad);
        assert_int_equal(t.recv, TINY_N);
        assert_true(tiny_max_queued > 0);
        assert_true(tiny_max_queued < scfg.send_high_water / 4);
        rpc_stream_free(t.st);

        /* Once no call is left, the server gives the cached message buffers
         * back to the kernel (100 ms later), with the client still
         * connected. */
        run_for(&loop, 300);
        assert_int_equal(rpc_server_call_count(srv), 0);
        assert_int_equal(rpc_server_queued_bytes(srv), 0);
        assert_int_equal(h2_mem_cached(), 0);
        rpc_client_free(c);

        bool done = false;
        rpc_server_shutdown(srv, 0, lb_shutdown_done, &done);
        while (!done)
                uv_run(&loop, UV_RUN_ONCE);
        rpc_server_free(srv);
        uv_run(&loop, UV_RUN_DEFAULT);
        assert_int_equal(uv_loop_close(&loop), 0);
        unlink(path);
        rmdir(dir);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_decode_whole),
                cmocka_unit_test(test_decode_splits),
                cmocka_unit_test(test_decode_random_chunks),
                cmocka_unit_test(test_decode_oversize),
                cmocka_unit_test(test_decode_flags),
                cmocka_unit_test(test_frame_header),
                cmocka_unit_test(test_percent_encode),
                cmocka_unit_test(test_percent_decode),
                cmocka_unit_test(test_timeout_parse),
                cmocka_unit_test(test_timeout_format),
                cmocka_unit_test(test_content_type),
                cmocka_unit_test(test_listen_loopback),
                cmocka_unit_test(test_timer_heap),
                cmocka_unit_test(test_tls_bio),
                cmocka_unit_test(test_mem_cache),
                cmocka_unit_test(test_pb_allocator),
                cmocka_unit_test(test_decode_allocator),
                cmocka_unit_test(test_msgq),
                cmocka_unit_test(test_msgq_tiny_messages),
                cmocka_unit_test(test_inbox),
                cmocka_unit_test(test_loopback),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
