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
 * Requests are answered in the order they arrive. A request that cannot be
 * decoded is answered ERROR {SIGNER_ERR_BADMSG} (SIGNER_ERR_HOST for a host
 * that is not canonical) with hdr.id echoed when 16 header bytes were
 * present (0 otherwise). */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "basic/err.h"
#include "net/host.h"

#define SIGNER_MAGIC 0x57534731u /* "WSG1" read as a big-endian word */
#define SIGNER_KEY_MAX 1024u     /* DER SubjectPublicKeyInfo, bytes */
#define SIGNER_CERT_MAX 8192u    /* DER certificate, bytes */
#define SIGNER_ERR_MSG_MAX 200u  /* ERROR message, bytes */
#define SIGNER_MSG_MAX 9216u     /* one datagram, header included */

enum signer_type {
        SIGNER_SIGN = 1,
        SIGNER_CERT = 0x81,
        SIGNER_ERROR = 0x82,
};

/* Why a SIGN was refused (a closed set: the decoder refuses others). */
enum signer_errcode {
        SIGNER_ERR_BADMSG = 1,   /* the request could not be decoded */
        SIGNER_ERR_HOST = 2,     /* the host is not canonical */
        SIGNER_ERR_KEY = 3,      /* the public key is unusable (type, size, encoding) */
        SIGNER_ERR_EXPIRED = 4,  /* the CA has expired: rotate it */
        SIGNER_ERR_INTERNAL = 5, /* OpenSSL failed */
};
#define SIGNER_ERR_LAST SIGNER_ERR_INTERNAL

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

struct signer_error {
        uint32_t code;    /* enum signer_errcode */
        uint32_t msg_len; /* 0..SIGNER_ERR_MSG_MAX */
};

_Static_assert(sizeof(struct signer_hdr) == 16, "signer_hdr layout");
_Static_assert(sizeof(struct signer_sign) == 8, "signer_sign layout");
_Static_assert(sizeof(struct signer_cert) == 8, "signer_cert layout");
_Static_assert(sizeof(struct signer_error) == 8, "signer_error layout");
_Static_assert(sizeof(struct signer_hdr) + sizeof(struct signer_cert) + SIGNER_CERT_MAX <=
                       SIGNER_MSG_MAX,
               "a CERT fits a datagram");

/* --- decoded forms (signer-proto.c: pure, no I/O, no allocation; fuzzed
 * by tests/fuzz/fuzz-signer-proto.c) --- */

/* A decoded SIGN. host is NUL-terminated; key holds key_len bytes. */
struct signer_req {
        struct signer_hdr hdr; /* as far as it could be read, else zeroed */
        char host[NET_HOST_MAX + 1];
        size_t key_len;
        uint8_t key[SIGNER_KEY_MAX];
};

/* A decoded CERT or ERROR. */
struct signer_reply {
        struct signer_hdr hdr;
        union {
                struct {
                        size_t len;
                        uint8_t der[SIGNER_CERT_MAX];
                } cert;
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

/* Decode one request datagram buf[0..n) (egress -> signer) into *ret.
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

/* Encode an ERROR into out. msg is truncated to SIGNER_ERR_MSG_MAX bytes
 * and every byte outside printable ASCII becomes '?'. Returns the datagram
 * size, -EINVAL (code outside enum signer_errcode) or -ENOBUFS. */
int signer_error_encode(uint32_t id, enum signer_errcode code, const char *msg, uint8_t *out,
                        size_t size);

/* Decode one reply datagram (signer -> egress), as strictly as the
 * requests: 0, or -EBADMSG / -EMSGSIZE / -EOPNOTSUPP with a message. The
 * certificate bytes are not parsed here (the requester does, with
 * OpenSSL). */
int signer_reply_decode(const void *buf, size_t n, struct signer_reply *ret, struct wr_err *e);

/* The name of an error code ("HOST"), "?" for others. */
const char *signer_errcode_name(uint32_t code);
