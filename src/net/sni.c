/* SPDX-License-Identifier: Apache-2.0 */
/* The TLS ClientHello reader (sni.h). Every read goes through struct cur,
 * which checks the bounds first. */
#include "net/sni.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "net/net-internal.h"

#define REC_HDR 5u
#define REC_MAX 16384u /* 2^14: TLSPlaintext.length limit */
#define HS_HDR 4u
#define CONTENT_HANDSHAKE 22
#define HS_CLIENT_HELLO 1
#define EXT_SERVER_NAME 0x0000
#define EXT_ALPN 0x0010
#define EXT_ECH 0xfe0d
#define NAME_TYPE_HOST 0

static int fail(struct wr_err *e, int code, const char *fmt, ...) _printf_(3, 4);
static int fail(struct wr_err *e, int code, const char *fmt, ...) {
        char msg[WR_ERR_MSG_MAX];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(msg, sizeof(msg), fmt, ap);
        va_end(ap);
        return err_setx(e, code, WR_STATUS_INVALID_ARGUMENT, WR_FAULT_WORKLOAD,
                        "TLS ClientHello: %s", msg);
}

struct cur {
        const uint8_t *p;
        size_t n; /* bytes left */
};

static bool take(struct cur *c, size_t n, const uint8_t **ret) {
        if (c->n < n)
                return false;
        if (ret)
                *ret = c->p;
        c->p += n;
        c->n -= n;
        return true;
}

static bool u8(struct cur *c, uint32_t *v) {
        const uint8_t *p;
        if (!take(c, 1, &p))
                return false;
        *v = p[0];
        return true;
}

static bool u16(struct cur *c, uint32_t *v) {
        const uint8_t *p;
        if (!take(c, 2, &p))
                return false;
        *v = (uint32_t) p[0] << 8 | p[1];
        return true;
}

/* A vector with a 1- or 2-byte length prefix, as a sub-cursor. */
static bool vec(struct cur *c, int width, struct cur *ret) {
        uint32_t n;
        if (!(width == 1 ? u8(c, &n) : u16(c, &n)))
                return false;
        ret->p = c->p;
        ret->n = n;
        return take(c, n, NULL);
}

static int parse_sni(struct cur ext, struct net_tls_hello *ret, struct wr_err *e) {
        struct cur list;
        if (!vec(&ext, 2, &list) || ext.n != 0)
                return fail(e, -EBADMSG, "server_name: list length does not match the extension");
        if (list.n == 0)
                return fail(e, -EBADMSG, "server_name: empty list");
        while (list.n > 0) {
                uint32_t type;
                struct cur name;
                if (!u8(&list, &type) || !vec(&list, 2, &name))
                        return fail(e, -EBADMSG, "server_name: truncated entry");
                if (type != NAME_TYPE_HOST)
                        return fail(e, -EBADMSG, "server_name: name type %u is not host_name",
                                    type);
                if (ret->has_sni)
                        return fail(e, -EBADMSG, "server_name: more than one host_name");
                if (name.n == 0)
                        return fail(e, -EBADMSG, "server_name: empty host_name");
                int r = net_host_canon((const char *) name.p, name.n, WR_FAULT_WORKLOAD, &ret->sni,
                                       e);
                if (r < 0) {
                        err_prefix(e, r, "TLS ClientHello: server_name");
                        if (e)
                                e->code = -EBADMSG;
                        return -EBADMSG;
                }
                ret->has_sni = true;
        }
        return 0;
}

static int parse_alpn(struct cur ext, struct net_tls_hello *ret, struct wr_err *e) {
        struct cur list;
        if (!vec(&ext, 2, &list) || ext.n != 0)
                return fail(e, -EBADMSG, "ALPN: list length does not match the extension");
        if (list.n == 0)
                return fail(e, -EBADMSG, "ALPN: empty list");
        while (list.n > 0) {
                struct cur name;
                if (!vec(&list, 1, &name) || name.n == 0)
                        return fail(e, -EBADMSG, "ALPN: empty or truncated protocol name");
                if (name.n == 2 && memcmp(name.p, "h2", 2) == 0)
                        ret->alpn_h2 = true;
                else if (name.n == 8 && memcmp(name.p, "http/1.1", 8) == 0)
                        ret->alpn_http11 = true;
        }
        ret->has_alpn = true;
        return 0;
}

static int parse_hello(struct cur c, struct net_tls_hello *ret, struct wr_err *e) {
        uint32_t v;
        struct cur skip;
        if (!u16(&c, &v))
                return fail(e, -EBADMSG, "truncated version");
        ret->legacy_version = (uint16_t) v;
        if (!take(&c, 32, NULL))
                return fail(e, -EBADMSG, "truncated random");
        if (!vec(&c, 1, &skip) || skip.n > 32)
                return fail(e, -EBADMSG, "bad legacy_session_id");
        if (!vec(&c, 2, &skip) || skip.n < 2 || skip.n % 2)
                return fail(e, -EBADMSG, "bad cipher_suites");
        if (!vec(&c, 1, &skip) || skip.n < 1)
                return fail(e, -EBADMSG, "bad compression_methods");
        if (c.n == 0)
                return 0; /* no extensions at all (old clients): no SNI */
        struct cur exts;
        if (!vec(&c, 2, &exts) || c.n != 0)
                return fail(e, -EBADMSG, "extensions length does not match the hello");
        uint16_t seen[NET_TLS_EXTENSIONS_MAX];
        size_t n_seen = 0;
        while (exts.n > 0) {
                uint32_t type;
                struct cur ext;
                if (!u16(&exts, &type) || !vec(&exts, 2, &ext))
                        return fail(e, -EBADMSG, "truncated extension");
                if (n_seen >= NET_TLS_EXTENSIONS_MAX)
                        return fail(e, -E2BIG, "more than %d extensions", NET_TLS_EXTENSIONS_MAX);
                for (size_t i = 0; i < n_seen; i++)
                        if (seen[i] == type)
                                return fail(e, -EBADMSG, "duplicate extension 0x%04x", type);
                seen[n_seen++] = (uint16_t) type;
                int r;
                switch (type) {
                case EXT_SERVER_NAME:
                        r = parse_sni(ext, ret, e);
                        if (r < 0)
                                return r;
                        break;
                case EXT_ECH:
                        ret->has_ech = true;
                        break;
                case EXT_ALPN:
                        r = parse_alpn(ext, ret, e);
                        if (r < 0)
                                return r;
                        break;
                default:
                        break; /* GREASE and everything else: not our business */
                }
        }
        return 0;
}

int net_tls_sni(const uint8_t *buf, size_t len, struct net_tls_hello *ret, struct wr_err *e) {
        if (!ret)
                return -EINVAL;
        memset(ret, 0, sizeof(*ret));
        if (!buf && len > 0)
                return -EINVAL;

        /* Fail fast on what is not TLS, before waiting for a whole header. */
        if (len >= 1 && buf[0] != CONTENT_HANDSHAKE)
                return fail(e, -EPROTO, "not a TLS handshake record (first byte 0x%02x)", buf[0]);
        if (len >= 2 && buf[1] != 3)
                return fail(e, -EPROTO, "not a TLS record (version major %u)", buf[1]);

        _cleanup_free_ uint8_t *hs = NULL;
        size_t off = 0, have = 0, want = 0, n_rec = 0;
        for (;;) {
                if (len - off < REC_HDR) {
                        ret->need = REC_HDR - (len - off) + (want ? want - have : 1);
                        return -EAGAIN;
                }
                const uint8_t *h = buf + off;
                size_t rlen = (size_t) h[3] << 8 | h[4];
                if (h[0] != CONTENT_HANDSHAKE)
                        return fail(e, -EBADMSG,
                                    "record of type %u before the ClientHello is complete", h[0]);
                if (h[1] != 3)
                        return fail(e, -EBADMSG, "record version major %u", h[1]);
                if (rlen == 0)
                        return fail(e, -EBADMSG, "zero-length handshake record");
                if (rlen > REC_MAX)
                        return fail(e, -EBADMSG, "record of %zu bytes (at most %u)", rlen, REC_MAX);
                if (++n_rec > NET_TLS_RECORDS_MAX)
                        return fail(e, -E2BIG, "spread over more than %d records",
                                    NET_TLS_RECORDS_MAX);
                if (want && have + rlen > want)
                        return fail(e, -EBADMSG, "bytes after the ClientHello in its record");
                if (!want && have + rlen > HS_HDR + NET_TLS_HELLO_MAX)
                        return fail(e, -E2BIG, "larger than %u bytes", NET_TLS_HELLO_MAX);
                size_t avail = len - off - REC_HDR;
                if (!want && have == 0 && rlen >= HS_HDR && avail >= HS_HDR) {
                        /* fail fast: the message type and size are known already */
                        const uint8_t *m = h + REC_HDR;
                        size_t body = (size_t) m[1] << 16 | (size_t) m[2] << 8 | m[3];
                        if (m[0] != HS_CLIENT_HELLO)
                                return fail(e, -EPROTO,
                                            "first handshake message has type %u, not "
                                            "ClientHello",
                                            m[0]);
                        if (body > NET_TLS_HELLO_MAX)
                                return fail(e, -E2BIG, "hello of %zu bytes (at most %u)", body,
                                            NET_TLS_HELLO_MAX);
                }
                if (avail < rlen) {
                        ret->need = rlen - avail;
                        if (want && have + rlen < want)
                                ret->need += REC_HDR + (want - have - rlen);
                        return -EAGAIN;
                }
                if (!hs) {
                        hs = malloc(HS_HDR + NET_TLS_HELLO_MAX);
                        if (!hs)
                                return -ENOMEM;
                }
                memcpy(hs + have, h + REC_HDR, rlen);
                have += rlen;
                off += REC_HDR + rlen;
                if (!want && have >= HS_HDR) {
                        if (hs[0] != HS_CLIENT_HELLO)
                                return fail(e, -EPROTO,
                                            "first handshake message has type %u, not "
                                            "ClientHello",
                                            hs[0]);
                        size_t body = (size_t) hs[1] << 16 | (size_t) hs[2] << 8 | hs[3];
                        if (body > NET_TLS_HELLO_MAX)
                                return fail(e, -E2BIG, "hello of %zu bytes (at most %u)", body,
                                            NET_TLS_HELLO_MAX);
                        want = HS_HDR + body;
                        if (have > want)
                                return fail(e, -EBADMSG,
                                            "bytes after the ClientHello in its record");
                }
                if (want && have == want)
                        break;
        }

        struct cur c = {hs + HS_HDR, want - HS_HDR};
        int r = parse_hello(c, ret, e);
        if (r < 0) {
                memset(ret, 0, sizeof(*ret));
                return r;
        }
        ret->consumed = off;
        return 0;
}
