/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* Reading the server name from the first bytes a sandbox sends on a TLS
 * connection (a ClientHello, RFC 8446 4.1.2 / RFC 6066 3). Pure code: no
 * I/O; one bounded allocation for the reassembled handshake message.
 * Fuzzed by tests/fuzz/fuzz-sni.c. Never reads outside [buf, buf + len). */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "basic/err.h"
#include "net/host.h"

/* Largest ClientHello accepted (handshake body). Post-quantum key shares
 * and large PSK tickets fit well below it. */
#define NET_TLS_HELLO_MAX 16384u
/* Most records one hello may be spread over (a hello cut into tiny records
 * is refused rather than reassembled byte by byte). */
#define NET_TLS_RECORDS_MAX 64
#define NET_TLS_EXTENSIONS_MAX 128

struct net_tls_hello {
        /* When the hello was incomplete (-EAGAIN): at least this many more
         * bytes are needed before calling again with the longer buffer. */
        size_t need;
        /* Bytes of buf the hello took, record headers included (0 unless
         * complete). */
        size_t consumed;
        uint16_t legacy_version; /* client_version field (0x0303 for 1.2 and 1.3) */
        bool has_sni;            /* a server_name extension with one host_name */
        struct net_host sni;     /* canonical (net_host_canon); NAME or IP */
        bool has_ech;            /* encrypted_client_hello (0xfe0d) present: the
                                  * SNI above is the outer, public name */
        bool has_alpn;           /* application_layer_protocol_negotiation present */
        bool alpn_h2;            /* ... offering "h2" */
        bool alpn_http11;        /* ... offering "http/1.1" */
};

/* Parse the ClientHello at the start of buf (len bytes; the hello may be
 * split over several handshake records, each up to 2^14 bytes).
 *
 * Returns 0 when the whole hello was read: *ret says whether it carried an
 * SNI (a hello without server_name is valid: has_sni = false).
 * -EAGAIN when buf ends before the hello: ret->need = how many more bytes
 * are needed at least (the caller reads more and calls again with all of
 * it). Errors, with a message (workload's fault):
 *   -EPROTO   not a TLS handshake record (e.g. plain HTTP, SSLv2 hello), or
 *             the first handshake message is not a ClientHello;
 *   -EBADMSG  malformed: bad lengths, zero-length or interleaved records,
 *             an ALPN list that is empty or holds an empty name,
 *             trailing bytes, duplicate extensions, a server_name list that
 *             is empty, holds a name type other than host_name (0), more
 *             than one host_name, or a name net_host_canon refuses;
 *   -E2BIG    hello above NET_TLS_HELLO_MAX, more than NET_TLS_RECORDS_MAX
 *             records or NET_TLS_EXTENSIONS_MAX extensions.
 * GREASE extension types (RFC 8701) are skipped like any unknown type. An
 * SNI that is an IP literal is returned as such (kind NET_HOST_IP); the
 * policy never matches it by name. */
int net_tls_sni(const uint8_t *buf, size_t len, struct net_tls_hello *ret, struct wr_err *e);
