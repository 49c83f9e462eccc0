/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* Wire format of the warren-signer protocol, spoken between warren-egress
 * (the requester: it holds each leaf's private key) and warren-signer (it
 * holds the egress CA's private key and nothing else). See docs/signer.md.
 *
 * Transport: AF_UNIX SOCK_SEQPACKET, one socketpair made by warrend; the
 * signer gets its end as --sock-fd. Every message is exactly one datagram:
 * a struct signer_hdr followed by hdr.len payload bytes (hdr.len ==
 * datagram size - sizeof(struct signer_hdr)); at most SIGNER_MSG_MAX bytes
 * in all. Both ends run on the same host: integers in host byte order.
 * Reserved fields must be zero; unknown types are refused; nothing may
 * follow the last field.
 *
 * egress -> signer:
 *   SIGN   struct signer_sign, then host_len bytes of host (no NUL), then
 *          key_len bytes of the leaf's public key as DER SubjectPublicKeyInfo.
 *          host: a canonical hostname or the canonical text of an IP
 *          address, exactly as net_host_canon() returns it (so "Example.com",
 *          "[::1]", "127.1" are refused: send "example.com", "::1",
 *          "127.0.0.1"). -> CERT or ERROR, with the same hdr.id.
 * signer -> egress:
 *   CERT   struct signer_cert, then cert_len bytes: the leaf certificate,
 *          DER, issued by the egress CA.
 *   ERROR  struct signer_error, then msg_len bytes of printable ASCII (no
 *          NUL): why the request was refused.
 *
 * warrend -> a signer keeping the secrets key (docs/signer.md "The secrets
 * key"; datakey.h says what the bytes are):
 *   DATAKEY_NEW   struct signer_datakey_req {label_len, wrapped_len = 0},
 *                 then label_len bytes of label. -> DATAKEY: a fresh data
 *                 key and its wrapping for that label.
 *   DATAKEY_OPEN  struct signer_datakey_req {label_len, wrapped_len =
 *                 SIGNER_WRAPPED_LEN}, then the label, then the wrapping.
 *                 -> DATAKEY with the key inside (and the wrapping echoed),
 *                 or ERROR {SIGNER_ERR_UNWRAP}.
 * signer -> warrend:
 *   DATAKEY       struct signer_datakey (reserved 0), then SIGNER_DEK_LEN
 *                 bytes of data key, then SIGNER_WRAPPED_LEN bytes of its
 *                 wrapping.
 *
 * warrend -> a signer keeping the workload-identity signing key
 * (docs/signer.md "Identity tokens"):
 *   JWS_SIGN      struct signer_jws {in_len}, then in_len bytes (1..
 *                 SIGNER_JWS_INPUT_MAX) of a JWS signing input
 *                 (base64url(header) "." base64url(payload)). -> JWS_SIG.
 * signer -> warrend:
 *   JWS_SIG       struct signer_jws {in_len = 0}, then SIGNER_JWS_SIG_LEN
 *                 bytes: the ES256 signature as JWS wants it (r || s, 32
 *                 bytes each).
 *
 * A signer holds one key and serves one role: started with --ca-fd it
 * answers SIGN only, with --secrets-key-fd DATAKEY_* only, with
 * --jws-key-fd JWS_SIGN only; the other requests are answered ERROR
 * {SIGNER_ERR_ROLE}.
 * Requests are answered in the order they arrive. A request that cannot be
 * decoded is answered ERROR {SIGNER_ERR_BADMSG} (SIGNER_ERR_HOST for a host
 * that is not canonical) with hdr.id echoed when 16 header bytes were
 * present (0 otherwise). */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "basic/err.h"
#include "net/host.h"
#include "signer/datakey.h"

#define SIGNER_MAGIC 0x57534731u /* "WSG1" read as a big-endian word */
#define SIGNER_KEY_MAX 1024u     /* DER SubjectPublicKeyInfo, bytes */
#define SIGNER_CERT_MAX 8192u    /* DER certificate, bytes */
#define SIGNER_ERR_MSG_MAX 200u  /* ERROR message, bytes */
#define SIGNER_MSG_MAX 9216u     /* one datagram, header included */

enum signer_type {
        SIGNER_SIGN = 1,
        SIGNER_DATAKEY_NEW = 2,
        SIGNER_DATAKEY_OPEN = 3,
        SIGNER_JWS_SIGN = 4,
        SIGNER_CERT = 0x81,
        SIGNER_ERROR = 0x82,
        SIGNER_DATAKEY = 0x83,
        SIGNER_JWS_SIG = 0x84,
};

/* Why a SIGN was refused (a closed set: the decoder refuses others). */
enum signer_errcode {
        SIGNER_ERR_BADMSG = 1,   /* the request could not be decoded */
        SIGNER_ERR_HOST = 2,     /* the host is not canonical */
        SIGNER_ERR_KEY = 3,      /* the public key is unusable (type, size, encoding) */
        SIGNER_ERR_EXPIRED = 4,  /* the CA has expired: rotate it */
        SIGNER_ERR_INTERNAL = 5, /* OpenSSL failed */
        SIGNER_ERR_UNWRAP = 6,   /* DATAKEY_OPEN: the wrapping does not open under this key */
        SIGNER_ERR_ROLE = 7,     /* a request this signer's role does not serve */
};
#define SIGNER_ERR_LAST SIGNER_ERR_ROLE

struct signer_hdr {
        uint32_t magic; /* SIGNER_MAGIC */
        uint32_t type;  /* enum signer_type */
        uint32_t id;    /* request id, echoed in the reply */
        uint32_t len;   /* payload bytes after this header */
};

struct signer_sign {
        uint16_t host_len; /* 1..NET_HOST_MAX */
        uint16_t key_len;  /* 1..SIGNER_KEY_MAX */
        uint32_t reserved; /* 0 */
};

struct signer_cert {
        uint32_t cert_len; /* 1..SIGNER_CERT_MAX */
        uint32_t reserved; /* 0 */
};

struct signer_datakey_req {
        uint16_t label_len;   /* 1..SIGNER_LABEL_MAX */
        uint16_t wrapped_len; /* NEW: 0; OPEN: SIGNER_WRAPPED_LEN */
        uint32_t reserved;    /* 0 */
};

struct signer_datakey {
        uint32_t reserved[2]; /* 0 */
};

#define SIGNER_JWS_INPUT_MAX 4096u
#define SIGNER_JWS_SIG_LEN 64u

struct signer_jws {
        uint32_t in_len;   /* JWS_SIGN: 1..SIGNER_JWS_INPUT_MAX; JWS_SIG: 0 */
        uint32_t reserved; /* 0 */
};

struct signer_error {
        uint32_t code;    /* enum signer_errcode */
        uint32_t msg_len; /* 0..SIGNER_ERR_MSG_MAX */
};

_Static_assert(sizeof(struct signer_hdr) == 16, "signer_hdr layout");
_Static_assert(sizeof(struct signer_sign) == 8, "signer_sign layout");
_Static_assert(sizeof(struct signer_cert) == 8, "signer_cert layout");
_Static_assert(sizeof(struct signer_error) == 8, "signer_error layout");
_Static_assert(sizeof(struct signer_datakey_req) == 8, "signer_datakey_req layout");
_Static_assert(sizeof(struct signer_datakey) == 8, "signer_datakey layout");
_Static_assert(sizeof(struct signer_jws) == 8, "signer_jws layout");
_Static_assert(sizeof(struct signer_hdr) + sizeof(struct signer_jws) + SIGNER_JWS_INPUT_MAX <=
                       SIGNER_MSG_MAX,
               "a JWS_SIGN fits a datagram");
_Static_assert(sizeof(struct signer_hdr) + sizeof(struct signer_datakey_req) + SIGNER_LABEL_MAX +
                               SIGNER_WRAPPED_LEN <=
                       SIGNER_MSG_MAX,
               "a DATAKEY_OPEN fits a datagram");
_Static_assert(sizeof(struct signer_hdr) + sizeof(struct signer_cert) + SIGNER_CERT_MAX <=
                       SIGNER_MSG_MAX,
               "a CERT fits a datagram");

/* --- decoded forms (signer-proto.c: pure, no I/O, no allocation; fuzzed
 * by tests/fuzz/fuzz-signer-proto.c) --- */

/* A decoded request; hdr.type says which. SIGN: host is NUL-terminated,
 * key holds key_len bytes. DATAKEY_NEW/OPEN: label holds label_len bytes,
 * wrapped (OPEN only) SIGNER_WRAPPED_LEN. */
struct signer_req {
        struct signer_hdr hdr; /* as far as it could be read, else zeroed */
        char host[NET_HOST_MAX + 1];
        size_t key_len;
        uint8_t key[SIGNER_KEY_MAX];
        size_t label_len;
        uint8_t label[SIGNER_LABEL_MAX];
        uint8_t wrapped[SIGNER_WRAPPED_LEN];
        size_t in_len; /* JWS_SIGN */
        uint8_t in[SIGNER_JWS_INPUT_MAX];
};

/* A decoded CERT or ERROR. */
struct signer_reply {
        struct signer_hdr hdr;
        union {
                struct {
                        size_t len;
                        uint8_t der[SIGNER_CERT_MAX];
                } cert;
                uint8_t jws_sig[SIGNER_JWS_SIG_LEN];
                struct {
                        uint8_t dek[SIGNER_DEK_LEN];
                        uint8_t wrapped[SIGNER_WRAPPED_LEN];
                } datakey;
                struct {
                        enum signer_errcode code;
                        char msg[SIGNER_ERR_MSG_MAX + 1]; /* NUL-terminated */
                } error;
        };
};

/* True when host (NUL-terminated) is what net_host_canon() makes of it: a
 * canonical hostname or the canonical text of an IP address. */
bool signer_host_canonical(const char *host);

/* Encode a SIGN request into out (size bytes). host must be canonical
 * (signer_host_canonical), key 1..SIGNER_KEY_MAX bytes of one DER
 * SEQUENCE. Returns the datagram size, or -EINVAL (bad host or key, the
 * message in e) or -ENOBUFS (out too small). */
int signer_sign_encode(uint32_t id, const char *host, const uint8_t *key, size_t key_len,
                       uint8_t *out, size_t size, struct wr_err *e);

/* Encode a DATAKEY_NEW (wrapped NULL) or DATAKEY_OPEN request for label
 * (1..SIGNER_LABEL_MAX bytes). Returns the datagram size, -EINVAL (label
 * length) or -ENOBUFS. */
int signer_datakey_req_encode(uint32_t id, const void *label, size_t label_len,
                              const uint8_t *wrapped, uint8_t *out, size_t size, struct wr_err *e);

/* Encode a JWS_SIGN of in (1..SIGNER_JWS_INPUT_MAX bytes). Returns the
 * datagram size, -EINVAL (length) or -ENOBUFS. */
int signer_jws_sign_encode(uint32_t id, const void *in, size_t in_len, uint8_t *out, size_t size,
                           struct wr_err *e);

/* Decode one request datagram buf[0..n) (to the signer) into *ret.
 * Returns 0, or a negative errno with a message in e:
 *   -EBADMSG    short, bad magic, reserved non-zero, len mismatch, lengths
 *               out of range, a NUL in the host, a key that is not one DER
 *               SEQUENCE filling key_len
 *   -EINVAL     a host that is not canonical (answer SIGNER_ERR_HOST)
 *   -EMSGSIZE   datagram above SIGNER_MSG_MAX
 *   -EOPNOTSUPP unknown or non-request type
 * ret->hdr is filled whenever 16 header bytes were present (for the id of
 * the ERROR reply). Nothing to release. */
int signer_req_decode(const void *buf, size_t n, struct signer_req *ret, struct wr_err *e);

/* Encode a CERT (der: 1..SIGNER_CERT_MAX bytes) into out. Returns the
 * datagram size, -EINVAL (length out of range) or -ENOBUFS. */
int signer_cert_encode(uint32_t id, const uint8_t *der, size_t len, uint8_t *out, size_t size);

/* Encode a JWS_SIG reply. Returns the datagram size or -ENOBUFS. */
int signer_jws_sig_encode(uint32_t id, const uint8_t sig[SIGNER_JWS_SIG_LEN], uint8_t *out,
                          size_t size);

/* Encode a DATAKEY reply into out. Returns the datagram size or -ENOBUFS.
 * The caller wipes out after sending. */
int signer_datakey_encode(uint32_t id, const uint8_t dek[SIGNER_DEK_LEN],
                          const uint8_t wrapped[SIGNER_WRAPPED_LEN], uint8_t *out, size_t size);

/* Encode an ERROR into out. msg is truncated to SIGNER_ERR_MSG_MAX bytes
 * and every byte outside printable ASCII becomes '?'. Returns the datagram
 * size, -EINVAL (code outside enum signer_errcode) or -ENOBUFS. */
int signer_error_encode(uint32_t id, enum signer_errcode code, const char *msg, uint8_t *out,
                        size_t size);

/* Decode one reply datagram (signer -> requester), as strictly as the
 * requests: 0, or -EBADMSG / -EMSGSIZE / -EOPNOTSUPP with a message. The
 * certificate bytes are not parsed here (the requester does, with
 * OpenSSL). */
int signer_reply_decode(const void *buf, size_t n, struct signer_reply *ret, struct wr_err *e);

/* The name of an error code ("HOST"), "?" for others. */
const char *signer_errcode_name(uint32_t code);
