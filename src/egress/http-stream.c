/* SPDX-License-Identifier: Apache-2.0 */
/* Request-body framing on a kept-alive plain-HTTP connection
 * (http-stream.h). */

#include <errno.h>

#include "egress/http-stream.h"

void egress_http_body_start(struct egress_http_body *b, bool chunked, uint64_t content_length) {
        *b = (struct egress_http_body){0};
        if (chunked)
                b->state = EGRESS_HTTP_CHUNK_SIZE;
        else if (content_length > 0) {
                b->state = EGRESS_HTTP_LENGTH;
                b->remaining = content_length;
        } else {
                b->state = EGRESS_HTTP_AT_HEAD;
        }
}

int egress_hexval(uint8_t c) {
        if (c >= '0' && c <= '9')
                return c - '0';
        if (c >= 'a' && c <= 'f')
                return c - 'a' + 10;
        if (c >= 'A' && c <= 'F')
                return c - 'A' + 10;
        return -1;
}

int egress_http_body_scan(struct egress_http_body *b, const uint8_t *buf, size_t len,
                          size_t *ret_used) {
        size_t i = 0;
        while (i < len && b->state != EGRESS_HTTP_AT_HEAD) {
                uint8_t c = buf[i];
                switch (b->state) {
                case EGRESS_HTTP_LENGTH:
                case EGRESS_HTTP_CHUNK_DATA: {
                        uint64_t n = len - i < b->remaining ? len - i : b->remaining;
                        i += (size_t) n;
                        b->remaining -= n;
                        if (b->remaining == 0)
                                b->state = b->state == EGRESS_HTTP_LENGTH ? EGRESS_HTTP_AT_HEAD
                                                                          : EGRESS_HTTP_CHUNK_CRLF;
                        b->line_len = 0;
                        b->cr = false;
                        continue;
                }
                case EGRESS_HTTP_CHUNK_CRLF:
                        i++;
                        if (b->line_len == 0 && c == '\r') {
                                b->line_len = 1;
                        } else if (b->line_len == 1 && c == '\n') {
                                b->state = EGRESS_HTTP_CHUNK_SIZE;
                                b->line_len = 0;
                                b->chunk = 0;
                                b->digits = b->in_ext = b->cr = false;
                        } else {
                                return -EBADMSG;
                        }
                        continue;
                case EGRESS_HTTP_CHUNK_SIZE:
                        i++;
                        if (++b->line_len > EGRESS_HTTP_LINE_MAX)
                                return -EBADMSG;
                        if (b->cr) {
                                if (c != '\n' || !b->digits)
                                        return -EBADMSG;
                                b->cr = false;
                                b->line_len = 0;
                                if (b->chunk == 0) {
                                        b->state = EGRESS_HTTP_TRAILER;
                                } else {
                                        b->state = EGRESS_HTTP_CHUNK_DATA;
                                        b->remaining = b->chunk;
                                }
                                continue;
                        }
                        if (c == '\r') {
                                b->cr = true;
                        } else if (b->in_ext) {
                                if (c < 0x20 && c != '\t')
                                        return -EBADMSG;
                        } else if (c == ';') {
                                b->in_ext = true;
                        } else {
                                int v = egress_hexval(c);
                                if (v < 0 || b->chunk > (UINT64_MAX >> 4) >> 4)
                                        return -EBADMSG;
                                b->chunk = b->chunk * 16 + (uint64_t) v;
                                b->digits = true;
                        }
                        continue;
                case EGRESS_HTTP_TRAILER:
                        i++;
                        if (b->cr) {
                                if (c != '\n')
                                        return -EBADMSG;
                                b->cr = false;
                                if (b->line_len == 0) {
                                        b->state = EGRESS_HTTP_AT_HEAD;
                                        continue;
                                }
                                b->line_len = 0;
                                continue;
                        }
                        if (c == '\r') {
                                b->cr = true;
                                continue;
                        }
                        if (c == '\n' || ++b->line_len > EGRESS_HTTP_LINE_MAX)
                                return -EBADMSG;
                        continue;
                case EGRESS_HTTP_AT_HEAD:
                        break;
                }
        }
        *ret_used = i;
        return 0;
}
