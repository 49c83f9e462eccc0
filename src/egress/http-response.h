/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* Responses on an intercepted connection whose host has a resource
 * detector (intercept.c): where each response ends and what the detector
 * reads from it. Pure code: no I/O, no allocation; fuzzed by
 * tests/fuzz/fuzz-http-response.c. The bytes come from the upstream
 * server (verified TLS) and are relayed to the sandbox unchanged whatever
 * these functions say: a malformed response only ends the detection on
 * that connection. */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define EGRESS_RESP_HEAD_MAX 65536u

struct egress_resp_head {
        size_t head_len; /* bytes up to and including the empty line */
        int status;      /* 100..599 */
        bool has_content_length;
        uint64_t content_length;
        bool chunked; /* Transfer-Encoding ends in chunked (it wins over Content-Length) */
};

/* Parse the status line and header fields at buf[0..len): "HTTP/1.x DDD
 * [reason]" CRLF, then "name: value" CRLF lines, then CRLF. 0 with *ret,
 * -EAGAIN (incomplete), -E2BIG (over EGRESS_RESP_HEAD_MAX), -EBADMSG
 * (malformed: no CRLF line ends, a bad status, a field without ':',
 * Content-Length not 1*DIGIT or repeated with another value). */
int egress_resp_head_parse(const uint8_t *buf, size_t len, struct egress_resp_head *ret);

/* Decode a complete chunked body in place (chunk-size lines, extensions
 * and trailers dropped): the decoded length, or -EBADMSG. */
long egress_dechunk(uint8_t *buf, size_t len);

/* The string value of key in the top-level JSON object at buf[0..len),
 * unescaped (\" \\ \/ \b \f \n \r \t; \uXXXX below 0x80 only, others
 * refused) into out (cap bytes, NUL-terminated). Keys of nested objects
 * and arrays are skipped. The length, -ENOENT (absent or not a string),
 * -E2BIG (longer than cap - 1), -EBADMSG (not a JSON object, or broken
 * before the key was found). */
long egress_json_top_string(const uint8_t *buf, size_t len, const char *key, char *out, size_t cap);
