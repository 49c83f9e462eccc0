/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* The relay's wire format: what warren-relay (in the Pod) and warrend's
 * bridge (src/k8s/bridge.c) send each other over the one TLS connection
 * that carries a K8S sandbox's control protocol (src/init/ctl-proto.h).
 *
 * A frame is a 12-byte header, then len payload bytes. Integers are
 * little-endian on the wire (the two ends may be different machines).
 *   u8 type, u8 flags (0), u16 reserved (0), u32 stream, u32 len
 * Types:
 *   HELLO   relay -> warrend, first frame: stream 0; payload "sb-…\0" then
 *           the per-sandbox token (RELAY_TOKEN_LEN hex digits).
 *   WELCOME warrend -> relay: stream 0, empty (the token was good).
 *   MSG     one control-protocol datagram: stream 0; payload u32 nstreams,
 *           nstreams x {u32 stream id, u32 kind}, then the datagram (a
 *           struct ctl_hdr and its payload). Each stream stands for one fd
 *           that travelled (or travels) with the datagram by SCM_RIGHTS;
 *           the receiver makes a local fd for it (a pipe end, a pty).
 *   DATA    stream != 0: bytes of that stream (1..RELAY_DATA_MAX).
 *   EOF     stream != 0, empty: the sender's source of the stream ended.
 *   CREDIT  stream != 0, payload u32: the receiver wrote that many more
 *           bytes to its fd; the sender may send as much again. A sender
 *           starts with RELAY_WINDOW bytes of credit per stream and never
 *           has more than RELAY_WINDOW unacknowledged: a receiver buffers
 *           at most RELAY_WINDOW per stream, a slow reader stalls only its
 *           own stream.
 *   STOP    stream != 0, empty: the receiver's fd is gone (the reader
 *           closed it): the sender stops reading its source.
 * Stream kinds (which way the bytes flow, seen from the Pod):
 *   IN   warrend -> Pod (stdin), OUT  Pod -> warrend (stdout, stderr),
 *   PTY  both (a pty master in the Pod).
 * Stream ids are chosen by the side that introduces them: odd by
 * warrend, even by the relay, never reused within a connection.
 *
 * relay_frame_parse is pure and bounded (fuzzed: tests/fuzz/
 * fuzz-relay-frame.c): frames come from inside a Pod. */

#include <stddef.h>
#include <stdint.h>

#define RELAY_HDR_LEN 12u
#define RELAY_DATA_MAX 32768u
#define RELAY_WINDOW (256u * 1024u)
#define RELAY_STREAMS_MAX 6u /* fds one datagram carries (SPAWN with HOLD) */
#define RELAY_TOKEN_LEN 64u  /* hex digits: HMAC-SHA256 */
#define RELAY_ID_MAX 31u

enum relay_type {
        RELAY_HELLO = 1,
        RELAY_WELCOME = 2,
        RELAY_MSG = 3,
        RELAY_DATA = 4,
        RELAY_EOF = 5,
        RELAY_CREDIT = 6,
        RELAY_STOP = 7,
};

enum relay_kind {
        RELAY_KIND_IN = 1,
        RELAY_KIND_OUT = 2,
        RELAY_KIND_PTY = 3,
};

struct relay_stream_ref {
        uint32_t id;
        uint32_t kind; /* enum relay_kind */
};

/* One parsed frame; pointers point into the parsed buffer. */
struct relay_frame {
        uint32_t type;
        uint32_t stream;
        uint32_t len;           /* payload bytes */
        const uint8_t *payload; /* DATA: the bytes; MSG: the datagram */
        size_t payload_len;     /* DATA: len; MSG: the datagram's size */
        uint32_t credit;        /* CREDIT */
        uint32_t nstreams;      /* MSG */
        struct relay_stream_ref streams[RELAY_STREAMS_MAX];
        char id[RELAY_ID_MAX + 1];       /* HELLO: the sandbox id */
        char token[RELAY_TOKEN_LEN + 1]; /* HELLO */
};

/* Parse one frame at the start of buf[0..n). msg_max bounds a MSG's
 * datagram (CTL_REPLY_MAX for what a Pod sends, CTL_MSG_MAX for what
 * warrend sends). Returns the frame's size (> 0) with *f filled, 0 when
 * buf holds only part of a frame (read more; a header announcing more than
 * the largest frame is refused at once), or -EBADMSG. */
int relay_frame_parse(const uint8_t *buf, size_t n, size_t msg_max, struct relay_frame *f);

/* The largest frame relay_frame_parse accepts for msg_max. */
size_t relay_frame_max(size_t msg_max);

/* Write a frame header at buf (RELAY_HDR_LEN bytes). */
void relay_hdr_put(uint8_t *buf, uint32_t type, uint32_t stream, uint32_t len);

/* Little-endian helpers. */
void relay_put32(uint8_t *p, uint32_t v);
uint32_t relay_get32(const uint8_t *p);
