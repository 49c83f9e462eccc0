/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* gRPC wire format only: the 5-byte length-prefixed message framing with an
 * incremental decoder, grpc-timeout parsing/formatting and the
 * percent-encoding of grpc-message. No I/O, no allocation besides message
 * buffers. Everything here parses untrusted input and is fuzzed
 * (tests/fuzz/). */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define GRPC_FRAME_HEADER 5

/* Called for each complete message. msg comes from the decoder's alloc_fn
 * (malloc by default; NULL when len is 0) and is owned by the callee,
 * which must release it with the matching free_fn (free by default).
 * Return 0 to continue or a negative errno to stop decoding
 * (grpc_decoder_feed returns it). */
typedef int (*grpc_message_cb)(void *userdata, uint8_t *msg, size_t len);

/* Incremental decoder for a stream of length-prefixed messages. Zero
 * initialise, set max (and optionally the allocator), feed chunks split
 * anywhere. */
struct grpc_decoder {
        size_t max; /* largest message accepted; 0 = no limit */
        /* Message body allocator; NULL = malloc / free. Kept by reset. */
        void *(*alloc_fn)(size_t n);
        void (*free_fn)(void *p);
        uint8_t hdr[GRPC_FRAME_HEADER];
        size_t hdr_len; /* header bytes collected */
        uint8_t *buf;   /* current message body */
        size_t len;     /* bytes of body collected */
        size_t need;    /* body length from the header */
        bool in_body;
};

/* Feed len bytes. Calls cb for every message completed. Returns 0, or
 * -EMSGSIZE (a length prefix above max), -EPROTONOSUPPORT (compressed flag
 * set: no compression is negotiated), -EBADMSG (flag byte not 0/1),
 * -ENOMEM, or the callback's negative return. After an error the decoder
 * must be reset before reuse. */
int grpc_decoder_feed(struct grpc_decoder *d, const uint8_t *data, size_t len, grpc_message_cb cb,
                      void *userdata);

/* True when part of a message has been received (a stream that ends here
 * is truncated). */
bool grpc_decoder_partial(const struct grpc_decoder *d);

/* Free buffers and reset to the empty state (max and the allocator are
 * kept). NULL ok. */
void grpc_decoder_reset(struct grpc_decoder *d);

/* Write the 5-byte prefix for an uncompressed message of len bytes.
 * Returns -EMSGSIZE if len does not fit 32 bits, else 0. */
int grpc_frame_header(uint8_t out[GRPC_FRAME_HEADER], size_t len);

/* Parse a grpc-timeout value ("1-8 digits" + unit H M S m u n) into
 * milliseconds, rounding sub-millisecond values up (so "1n" is 1 ms, "0m"
 * is 0). Returns 0 or -EINVAL. len is the value's length (no NUL needed). */
int grpc_timeout_parse(const char *s, size_t len, uint64_t *ret_ms);

/* Format ms as a grpc-timeout value into buf (>= 16 bytes), choosing the
 * finest unit whose value fits 8 digits (rounding up). Returns the length. */
size_t grpc_timeout_format(uint64_t ms, char *buf, size_t size);

/* Percent-encode a grpc-message: bytes outside 0x20-0x7E and '%' become
 * "%XX". Returns a malloc'd NUL-terminated string in *ret and 0, or
 * -ENOMEM. */
int grpc_percent_encode(const char *in, size_t len, char **ret);

/* Decode a grpc-message. Per the gRPC spec decoding is lenient: a '%' not
 * followed by two hex digits is kept literally. Returns a malloc'd
 * NUL-terminated string in *ret (its length in *ret_len when non-NULL) and
 * 0, or -ENOMEM. The result may contain NUL bytes. */
int grpc_percent_decode(const char *in, size_t len, char **ret, size_t *ret_len);

/* Does this content-type name a gRPC payload ("application/grpc",
 * "application/grpc+proto", "application/grpc;...")? */
bool grpc_content_type_ok(const char *s, size_t len);

/* --- protobuf wire reading, by reference ---
 * For hot paths that look into a message without unpacking (copying) it. */
struct grpc_pb_field {
        uint32_t num;        /* field number (>= 1) */
        int type;            /* wire type: 0 varint, 1 fixed64, 2 length-delimited, 5 fixed32 */
        uint64_t value;      /* types 0, 1, 5 */
        const uint8_t *data; /* type 2: the bytes, inside the input */
        size_t len;
};

/* Read the field at *p (before end) into f and move *p past it. Returns 1
 * when a field was read, 0 at end of input, -EBADMSG when malformed
 * (truncated, overlong varint, field number 0, groups or unknown wire
 * types). */
int grpc_pb_next(const uint8_t **p, const uint8_t *end, struct grpc_pb_field *f);
