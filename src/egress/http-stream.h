/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* Request framing on a plain-HTTP connection after its first head: where
 * each request body ends, so that the proxy finds every later request head
 * on a keep-alive connection and checks its Host too (SECURITY.md, egress
 * rule 6: every request names the same host). Pure code: no I/O, no
 * allocation. Bodies: Content-Length, or chunked (chunk-size lines of hex
 * digits with optional extensions, at most EGRESS_HTTP_LINE_MAX bytes;
 * trailers up to the empty line); no body otherwise (requests are never
 * read to EOF). */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define EGRESS_HTTP_LINE_MAX 1024

enum egress_http_body_state {
        EGRESS_HTTP_AT_HEAD = 0, /* the next byte starts a request head */
        EGRESS_HTTP_LENGTH,      /* remaining bytes of a Content-Length body */
        EGRESS_HTTP_CHUNK_SIZE,  /* in a chunk-size line */
        EGRESS_HTTP_CHUNK_DATA,  /* remaining bytes of a chunk */
        EGRESS_HTTP_CHUNK_CRLF,  /* the CRLF after a chunk's data */
        EGRESS_HTTP_TRAILER,     /* in the trailer section */
};

struct egress_http_body {
        enum egress_http_body_state state;
        uint64_t remaining;
        size_t line_len; /* bytes of the current line seen (chunk size, trailer) */
        uint64_t chunk;  /* chunk size being parsed */
        bool in_ext;     /* past ';' in a chunk-size line */
        bool digits;     /* at least one hex digit seen */
        bool cr;         /* the previous byte was CR */
};

/* Start a body after a head: content_length bytes, or chunked. */
void egress_http_body_start(struct egress_http_body *b, bool chunked, uint64_t content_length);

/* Consume body bytes from buf (len bytes). Returns how many belong to the
 * current body (<= len); afterwards b->state == EGRESS_HTTP_AT_HEAD when
 * the body ended there (the rest of buf starts the next head). -EBADMSG
 * for malformed chunked framing. */
int egress_http_body_scan(struct egress_http_body *b, const uint8_t *buf, size_t len,
                          size_t *ret_used);

/* The value of a hex digit (0-9, a-f, A-F), or -1. */
int egress_hexval(uint8_t c);
