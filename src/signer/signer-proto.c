/* SPDX-License-Identifier: Apache-2.0 */
/* The warren-signer protocol (signer-proto.h): strict encoders and decoders
 * over byte buffers. No I/O, no allocation, no global state: the same code
 * runs in warren-signer, in its requester, in the unit tests and under
 * libFuzzer. */

#include <errno.h>
#include <string.h>

#include "signer/signer-proto.h"

bool signer_host_canonical(const char *host) {
        size_t n = strnlen(host, NET_HOST_MAX + 1);
        if (n == 0 || n > NET_HOST_MAX)
                return false;
        struct net_host h;
        if (net_host_canon(host, n, WR_FAULT_CLIENT, &h, NULL) < 0)
                return false;
        return strcmp(h.name, host) == 0;
}

/* One DER SEQUENCE with a definite, minimally encoded length that fills
 * exactly n bytes (the outer shape of a SubjectPublicKeyInfo; the inside is
 * OpenSSL's to judge). */
static bool der_sequence_ok(const uint8_t *p, size_t n) {
        if (n < 2 || p[0] != 0x30)
                return false;
        size_t len, hl;
        if (p[1] < 0x80) {
                len = p[1];
                hl = 2;
        } else if (p[1] == 0x81) {
                if (n < 3 || p[2] < 0x80)
                        return false;
                len = p[2];
                hl = 3;
        } else if (p[1] == 0x82) {
                if (n < 4 || p[2] == 0)
                        return false;
                len = ((size_t) p[2] << 8) | p[3];
                hl = 4;
        } else {
                return false;
        }
        return hl + len == n;
}

static void hdr_put(uint8_t *out, uint32_t type, uint32_t id, size_t len) {
        struct signer_hdr h = {
                .magic = SIGNER_MAGIC,
                .type = type,
                .id = id,
                .len = (uint32_t) len,
        };
        memcpy(out, &h, sizeof(h));
}

int signer_sign_encode(uint32_t id, const char *host, const uint8_t *key, size_t key_len,
                       uint8_t *out, size_t size, struct wr_err *e) {
        if (!host || !signer_host_canonical(host))
                return err_set(e, -EINVAL, "SIGN: host \"%.64s\" is not canonical",
                               host ? host : "");
        if (!key || key_len == 0 || key_len > SIGNER_KEY_MAX || !der_sequence_ok(key, key_len))
                return err_set(e, -EINVAL,
                               "SIGN: the public key must be 1..%u bytes of one DER SEQUENCE "
                               "(SubjectPublicKeyInfo), got %zu bytes",
                               SIGNER_KEY_MAX, key_len);
        size_t host_len = strlen(host);
        size_t len = sizeof(struct signer_sign) + host_len + key_len;
        if (size < sizeof(struct signer_hdr) + len)
                return -ENOBUFS;
        hdr_put(out, SIGNER_SIGN, id, len);
        struct signer_sign s = {.host_len = (uint16_t) host_len, .key_len = (uint16_t) key_len};
        uint8_t *p = out + sizeof(struct signer_hdr);
        memcpy(p, &s, sizeof(s));
        memcpy(p + sizeof(s), host, host_len);
        memcpy(p + sizeof(s) + host_len, key, key_len);
        return (int) (sizeof(struct signer_hdr) + len);
}

/* The header: size limit, magic, length consistency. Fills *h whenever 16
 * bytes were there (only those 16 are read before the size check, so a
 * caller may pass the real size of a datagram it received cut). */
static int hdr_get(const uint8_t *buf, size_t n, struct signer_hdr *h, struct wr_err *e) {
        memset(h, 0, sizeof(*h));
        if (n < sizeof(*h))
                return err_set(e, -EBADMSG, "datagram of %zu bytes, shorter than the header", n);
        memcpy(h, buf, sizeof(*h));
        if (n > SIGNER_MSG_MAX)
                return err_set(e, -EMSGSIZE, "datagram of %zu bytes, above %u", n, SIGNER_MSG_MAX);
        if (h->magic != SIGNER_MAGIC)
                return err_set(e, -EBADMSG, "bad magic 0x%08x", h->magic);
        if (h->len != n - sizeof(*h))
                return err_set(e, -EBADMSG, "header says %u payload bytes, datagram has %zu",
                               h->len, n - sizeof(*h));
        return 0;
}

int signer_datakey_req_encode(uint32_t id, const void *label, size_t label_len,
                              const uint8_t *wrapped, uint8_t *out, size_t size, struct wr_err *e) {
        if (!label || label_len == 0 || label_len > SIGNER_LABEL_MAX)
                return err_set(e, -EINVAL, "DATAKEY: label of %zu bytes, outside 1..%u", label_len,
                               SIGNER_LABEL_MAX);
        size_t wlen = wrapped ? SIGNER_WRAPPED_LEN : 0;
        size_t len = sizeof(struct signer_datakey_req) + label_len + wlen;
        if (size < sizeof(struct signer_hdr) + len)
                return -ENOBUFS;
        hdr_put(out, wrapped ? SIGNER_DATAKEY_OPEN : SIGNER_DATAKEY_NEW, id, len);
        struct signer_datakey_req d = {.label_len = (uint16_t) label_len,
                                       .wrapped_len = (uint16_t) wlen};
        uint8_t *p = out + sizeof(struct signer_hdr);
        memcpy(p, &d, sizeof(d));
        memcpy(p + sizeof(d), label, label_len);
        if (wrapped)
                memcpy(p + sizeof(d) + label_len, wrapped, wlen);
        return (int) (sizeof(struct signer_hdr) + len);
}

static int datakey_req_get(const uint8_t *p, size_t len, struct signer_req *ret, struct wr_err *e) {
        bool open = ret->hdr.type == SIGNER_DATAKEY_OPEN;
        const char *what = open ? "DATAKEY_OPEN" : "DATAKEY_NEW";
        struct signer_datakey_req d;
        if (len < sizeof(d))
                return err_set(e, -EBADMSG, "%s: %zu bytes, shorter than its header", what, len);
        memcpy(&d, p, sizeof(d));
        if (d.reserved != 0)
                return err_set(e, -EBADMSG, "%s: reserved field not zero", what);
        if (d.label_len == 0 || d.label_len > SIGNER_LABEL_MAX)
                return err_set(e, -EBADMSG, "%s: label length %u outside 1..%u", what, d.label_len,
                               SIGNER_LABEL_MAX);
        size_t want = open ? SIGNER_WRAPPED_LEN : 0;
        if (d.wrapped_len != want)
                return err_set(e, -EBADMSG, "%s: wrapped length %u, must be %zu", what,
                               d.wrapped_len, want);
        if (len != sizeof(d) + d.label_len + want)
                return err_set(e, -EBADMSG, "%s: %zu payload bytes, fields say %zu", what, len,
                               sizeof(d) + d.label_len + want);
        memcpy(ret->label, p + sizeof(d), d.label_len);
        ret->label_len = d.label_len;
        if (open)
                memcpy(ret->wrapped, p + sizeof(d) + d.label_len, SIGNER_WRAPPED_LEN);
        return 0;
}

int signer_jws_sign_encode(uint32_t id, const void *in, size_t in_len, uint8_t *out, size_t size,
                           struct wr_err *e) {
        if (!in || in_len == 0 || in_len > SIGNER_JWS_INPUT_MAX)
                return err_set(e, -EINVAL, "JWS_SIGN: input of %zu bytes, outside 1..%u", in_len,
                               SIGNER_JWS_INPUT_MAX);
        size_t len = sizeof(struct signer_jws) + in_len;
        if (size < sizeof(struct signer_hdr) + len)
                return -ENOBUFS;
        hdr_put(out, SIGNER_JWS_SIGN, id, len);
        struct signer_jws j = {.in_len = (uint32_t) in_len};
        memcpy(out + sizeof(struct signer_hdr), &j, sizeof(j));
        memcpy(out + sizeof(struct signer_hdr) + sizeof(j), in, in_len);
        return (int) (sizeof(struct signer_hdr) + len);
}

int signer_jws_sig_encode(uint32_t id, const uint8_t sig[SIGNER_JWS_SIG_LEN], uint8_t *out,
                          size_t size) {
        size_t len = sizeof(struct signer_jws) + SIGNER_JWS_SIG_LEN;
        if (size < sizeof(struct signer_hdr) + len)
                return -ENOBUFS;
        hdr_put(out, SIGNER_JWS_SIG, id, len);
        struct signer_jws j = {0, 0};
        memcpy(out + sizeof(struct signer_hdr), &j, sizeof(j));
        memcpy(out + sizeof(struct signer_hdr) + sizeof(j), sig, SIGNER_JWS_SIG_LEN);
        return (int) (sizeof(struct signer_hdr) + len);
}

static int jws_sign_get(const uint8_t *p, size_t len, struct signer_req *ret, struct wr_err *e) {
        struct signer_jws j;
        if (len < sizeof(j))
                return err_set(e, -EBADMSG, "JWS_SIGN: %zu bytes, shorter than its header", len);
        memcpy(&j, p, sizeof(j));
        if (j.reserved != 0)
                return err_set(e, -EBADMSG, "JWS_SIGN: reserved field not zero");
        if (j.in_len == 0 || j.in_len > SIGNER_JWS_INPUT_MAX)
                return err_set(e, -EBADMSG, "JWS_SIGN: input length %u outside 1..%u", j.in_len,
                               SIGNER_JWS_INPUT_MAX);
        if (len != sizeof(j) + j.in_len)
                return err_set(e, -EBADMSG, "JWS_SIGN: %zu payload bytes, field says %zu", len,
                               sizeof(j) + j.in_len);
        memcpy(ret->in, p + sizeof(j), j.in_len);
        ret->in_len = j.in_len;
        return 0;
}

int signer_req_decode(const void *buf, size_t n, struct signer_req *ret, struct wr_err *e) {
        const uint8_t *b = buf;
        memset(&ret->hdr, 0, sizeof(ret->hdr));
        ret->host[0] = '\0';
        ret->key_len = 0;
        ret->label_len = 0;
        ret->in_len = 0;
        int r = hdr_get(b, n, &ret->hdr, e);
        if (r < 0)
                return r;
        const uint8_t *p = b + sizeof(struct signer_hdr);
        size_t len = ret->hdr.len;
        if (ret->hdr.type == SIGNER_DATAKEY_NEW || ret->hdr.type == SIGNER_DATAKEY_OPEN)
                return datakey_req_get(p, len, ret, e);
        if (ret->hdr.type == SIGNER_JWS_SIGN)
                return jws_sign_get(p, len, ret, e);
        if (ret->hdr.type != SIGNER_SIGN)
                return err_set(e, -EOPNOTSUPP, "type 0x%x is not a request", ret->hdr.type);
        struct signer_sign s;
        if (len < sizeof(s))
                return err_set(e, -EBADMSG, "SIGN: %zu bytes, shorter than its header", len);
        memcpy(&s, p, sizeof(s));
        if (s.reserved != 0)
                return err_set(e, -EBADMSG, "SIGN: reserved field not zero");
        if (s.host_len == 0 || s.host_len > NET_HOST_MAX)
                return err_set(e, -EBADMSG, "SIGN: host length %u outside 1..%d", s.host_len,
                               NET_HOST_MAX);
        if (s.key_len == 0 || s.key_len > SIGNER_KEY_MAX)
                return err_set(e, -EBADMSG, "SIGN: key length %u outside 1..%u", s.key_len,
                               SIGNER_KEY_MAX);
        if (len != sizeof(s) + s.host_len + s.key_len)
                return err_set(e, -EBADMSG, "SIGN: %zu payload bytes, fields say %zu", len,
                               sizeof(s) + s.host_len + s.key_len);
        p += sizeof(s);
        if (memchr(p, '\0', s.host_len))
                return err_set(e, -EBADMSG, "SIGN: NUL in the host");
        memcpy(ret->host, p, s.host_len);
        ret->host[s.host_len] = '\0';
        if (!signer_host_canonical(ret->host)) {
                ret->host[0] = '\0';
                return err_set(e, -EINVAL,
                               "SIGN: host is not a canonical hostname or IP address text");
        }
        p += s.host_len;
        if (!der_sequence_ok(p, s.key_len))
                return err_set(e, -EBADMSG, "SIGN: the key is not one DER SEQUENCE of %u bytes",
                               s.key_len);
        memcpy(ret->key, p, s.key_len);
        ret->key_len = s.key_len;
        return 0;
}

int signer_cert_encode(uint32_t id, const uint8_t *der, size_t len, uint8_t *out, size_t size) {
        if (!der || len == 0 || len > SIGNER_CERT_MAX)
                return -EINVAL;
        size_t plen = sizeof(struct signer_cert) + len;
        if (size < sizeof(struct signer_hdr) + plen)
                return -ENOBUFS;
        hdr_put(out, SIGNER_CERT, id, plen);
        struct signer_cert c = {.cert_len = (uint32_t) len};
        memcpy(out + sizeof(struct signer_hdr), &c, sizeof(c));
        memcpy(out + sizeof(struct signer_hdr) + sizeof(c), der, len);
        return (int) (sizeof(struct signer_hdr) + plen);
}

int signer_datakey_encode(uint32_t id, const uint8_t dek[SIGNER_DEK_LEN],
                          const uint8_t wrapped[SIGNER_WRAPPED_LEN], uint8_t *out, size_t size) {
        size_t plen = sizeof(struct signer_datakey) + SIGNER_DEK_LEN + SIGNER_WRAPPED_LEN;
        if (size < sizeof(struct signer_hdr) + plen)
                return -ENOBUFS;
        hdr_put(out, SIGNER_DATAKEY, id, plen);
        struct signer_datakey d = {{0, 0}};
        uint8_t *p = out + sizeof(struct signer_hdr);
        memcpy(p, &d, sizeof(d));
        memcpy(p + sizeof(d), dek, SIGNER_DEK_LEN);
        memcpy(p + sizeof(d) + SIGNER_DEK_LEN, wrapped, SIGNER_WRAPPED_LEN);
        return (int) (sizeof(struct signer_hdr) + plen);
}

static bool printable(uint8_t c) {
        return c >= 0x20 && c < 0x7f;
}

int signer_error_encode(uint32_t id, enum signer_errcode code, const char *msg, uint8_t *out,
                        size_t size) {
        if (code < SIGNER_ERR_BADMSG || code > SIGNER_ERR_LAST)
                return -EINVAL;
        size_t mlen = msg ? strnlen(msg, SIGNER_ERR_MSG_MAX) : 0;
        size_t plen = sizeof(struct signer_error) + mlen;
        if (size < sizeof(struct signer_hdr) + plen)
                return -ENOBUFS;
        hdr_put(out, SIGNER_ERROR, id, plen);
        struct signer_error w = {.code = code, .msg_len = (uint32_t) mlen};
        uint8_t *p = out + sizeof(struct signer_hdr);
        memcpy(p, &w, sizeof(w));
        p += sizeof(w);
        for (size_t i = 0; i < mlen; i++)
                p[i] = printable((uint8_t) msg[i]) ? (uint8_t) msg[i] : '?';
        return (int) (sizeof(struct signer_hdr) + plen);
}

int signer_reply_decode(const void *buf, size_t n, struct signer_reply *ret, struct wr_err *e) {
        const uint8_t *b = buf;
        int r = hdr_get(b, n, &ret->hdr, e);
        if (r < 0)
                return r;
        const uint8_t *p = b + sizeof(struct signer_hdr);
        size_t len = ret->hdr.len;
        switch (ret->hdr.type) {
        case SIGNER_CERT: {
                struct signer_cert c;
                if (len < sizeof(c))
                        return err_set(e, -EBADMSG, "CERT: %zu bytes, shorter than its header",
                                       len);
                memcpy(&c, p, sizeof(c));
                if (c.reserved != 0)
                        return err_set(e, -EBADMSG, "CERT: reserved field not zero");
                if (c.cert_len == 0 || c.cert_len > SIGNER_CERT_MAX)
                        return err_set(e, -EBADMSG, "CERT: length %u outside 1..%u", c.cert_len,
                                       SIGNER_CERT_MAX);
                if (len != sizeof(c) + c.cert_len)
                        return err_set(e, -EBADMSG, "CERT: %zu payload bytes, field says %zu", len,
                                       sizeof(c) + c.cert_len);
                memcpy(ret->cert.der, p + sizeof(c), c.cert_len);
                ret->cert.len = c.cert_len;
                return 0;
        }
        case SIGNER_DATAKEY: {
                struct signer_datakey d;
                if (len != sizeof(d) + SIGNER_DEK_LEN + SIGNER_WRAPPED_LEN)
                        return err_set(e, -EBADMSG, "DATAKEY: %zu payload bytes, must be %zu", len,
                                       sizeof(d) + SIGNER_DEK_LEN + SIGNER_WRAPPED_LEN);
                memcpy(&d, p, sizeof(d));
                if (d.reserved[0] != 0 || d.reserved[1] != 0)
                        return err_set(e, -EBADMSG, "DATAKEY: reserved field not zero");
                memcpy(ret->datakey.dek, p + sizeof(d), SIGNER_DEK_LEN);
                memcpy(ret->datakey.wrapped, p + sizeof(d) + SIGNER_DEK_LEN, SIGNER_WRAPPED_LEN);
                return 0;
        }
        case SIGNER_JWS_SIG: {
                struct signer_jws j;
                if (len != sizeof(j) + SIGNER_JWS_SIG_LEN)
                        return err_set(e, -EBADMSG, "JWS_SIG: %zu payload bytes, must be %zu", len,
                                       sizeof(j) + SIGNER_JWS_SIG_LEN);
                memcpy(&j, p, sizeof(j));
                if (j.in_len != 0 || j.reserved != 0)
                        return err_set(e, -EBADMSG, "JWS_SIG: header fields not zero");
                memcpy(ret->jws_sig, p + sizeof(j), SIGNER_JWS_SIG_LEN);
                return 0;
        }
        case SIGNER_ERROR: {
                struct signer_error w;
                if (len < sizeof(w))
                        return err_set(e, -EBADMSG, "ERROR: %zu bytes, shorter than its header",
                                       len);
                memcpy(&w, p, sizeof(w));
                if (w.code < SIGNER_ERR_BADMSG || w.code > SIGNER_ERR_LAST)
                        return err_set(e, -EBADMSG, "ERROR: unknown code %u", w.code);
                if (w.msg_len > SIGNER_ERR_MSG_MAX)
                        return err_set(e, -EBADMSG, "ERROR: message length %u above %u", w.msg_len,
                                       SIGNER_ERR_MSG_MAX);
                if (len != sizeof(w) + w.msg_len)
                        return err_set(e, -EBADMSG, "ERROR: %zu payload bytes, field says %zu", len,
                                       sizeof(w) + w.msg_len);
                p += sizeof(w);
                for (size_t i = 0; i < w.msg_len; i++)
                        if (!printable(p[i]))
                                return err_set(e, -EBADMSG,
                                               "ERROR: byte 0x%02x in the message is not "
                                               "printable ASCII",
                                               p[i]);
                ret->error.code = (enum signer_errcode) w.code;
                memcpy(ret->error.msg, p, w.msg_len);
                ret->error.msg[w.msg_len] = '\0';
                return 0;
        }
        default:
                return err_set(e, -EOPNOTSUPP, "type 0x%x is not a reply", ret->hdr.type);
        }
}

const char *signer_errcode_name(uint32_t code) {
        switch (code) {
        case SIGNER_ERR_BADMSG:
                return "BADMSG";
        case SIGNER_ERR_HOST:
                return "HOST";
        case SIGNER_ERR_KEY:
                return "KEY";
        case SIGNER_ERR_EXPIRED:
                return "EXPIRED";
        case SIGNER_ERR_INTERNAL:
                return "INTERNAL";
        case SIGNER_ERR_UNWRAP:
                return "UNWRAP";
        case SIGNER_ERR_ROLE:
                return "ROLE";
        }
        return "?";
}
