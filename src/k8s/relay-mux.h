/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* The relay engine both ends of a K8S sandbox's control connection run
 * (relay-frame.h has the wire format): one SEQPACKET control socket on one
 * side, one TLS connection on the other, and every exec's stdio as
 * streams with per-stream credit between them.
 *   RELAY_SIDE_POD:    in warren-relay; ctl is a connection to warren-init's
 *                      socket; fds for a SPAWN become real pipes here, fds
 *                      from init (a pty master, TAKEN's held ends) are
 *                      read and written directly.
 *   RELAY_SIDE_DAEMON: in warrend (bridge.c); ctl is one end of a
 *                      socketpair whose other end the sandbox manager uses
 *                      like any warren-init connection (src/sandbox/exec.c
 *                      has no K8S case); fds the daemon passes are read and
 *                      written directly, fds from the Pod become local
 *                      pipes or a raw pty whose master the daemon gets.
 * Blocking: relay_mux_run polls until the TLS connection or the control
 * socket ends (or stop_fd becomes readable), then closes every stream.
 * Memory is bounded: RELAY_WINDOW per stream, sources are read only while
 * the TLS send buffer is below RELAY_OUT_HIGH. */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <sys/socket.h>

#include <openssl/ssl.h>

#include "k8s/relay-frame.h"

#define RELAY_OUT_HIGH (512u * 1024u)

enum relay_side {
        RELAY_SIDE_POD = 1,
        RELAY_SIDE_DAEMON = 2,
};

struct relay_mux_config {
        enum relay_side side;
        SSL *ssl;    /* handshake done; its socket non-blocking */
        int sock;    /* the TLS connection's socket */
        int ctl;     /* SEQPACKET, non-blocking */
        int stop_fd; /* readable: stop (-1: none) */
        /* bytes already read from the connection that belong to the
         * frames after the handshake (may be NULL) */
        const uint8_t *pending;
        size_t pending_len;
};

/* Run until either side ends. Returns 0 when the peer or the control
 * socket closed, -EBADMSG when the peer broke the protocol, -errno. */
int relay_mux_run(const struct relay_mux_config *cfg);

/* "IP:PORT" or "[IPv6]:PORT" (IP literals only: nothing is resolved;
 * PORT 0..65535) into *ss / *len, the IP's text into host. -EINVAL. */
int relay_addr_parse(const char *s, struct sockaddr_storage *ss, socklen_t *len, char *host,
                     size_t hsize);

/* Write all of buf to ssl (non-blocking socket sock), waiting up to
 * timeout_ms in all. */
int relay_ssl_write_all(SSL *ssl, int sock, const void *buf, size_t len, int timeout_ms);

/* Read one whole frame into buf (size bytes) within timeout_ms and parse
 * it into *f (which points into buf); returns its size, with any bytes after
 * it left in buf[ret..*filled). */
int relay_ssl_read_frame(SSL *ssl, int sock, uint8_t *buf, size_t size, size_t *filled,
                         size_t msg_max, int timeout_ms, struct relay_frame *f);
