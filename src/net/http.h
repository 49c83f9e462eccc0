/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* The one strict HTTP/1.1 request-head parser of the egress proxy
 * (SECURITY.md, egress rule 9; RFC 9110/9112). Pure code: no I/O, no
 * allocation; the result points into the caller's buffer. Fuzzed by
 * tests/fuzz/fuzz-http-head.c. Never reads outside [buf, buf + len).
 *
 * Accepted:
 *   request-line = method SP request-target SP ("HTTP/1.1" | "HTTP/1.0") CRLF
 *     method: a token of 1..32 characters (case-sensitive);
 *     request-target, 1..8192 visible ASCII characters, no '#':
 *       origin form    "/path?query"
 *       absolute form  "http://authority/path?query" (scheme "http" in any
 *                      case; other schemes refused: https goes via CONNECT)
 *       authority form "host:port", for CONNECT only (port required)
 *       asterisk form  "*", for OPTIONS only
 *   header fields = name ":" OWS value OWS CRLF, name a token; value bytes
 *     HTAB, SP, 0x21-0x7e and obs-text 0x80-0xff;
 *   then an empty line (CRLF).
 * Refused (-EBADMSG, workload's fault, message naming the line): bare CR or
 * LF, NUL and other controls, empty lines before the request line, obs-fold
 * (a line starting with SP/HTAB), whitespace before ':', a header without
 * ':', Content-Length together with Transfer-Encoding, more than one
 * Content-Length, Host or Transfer-Encoding field, a Content-Length that is
 * not 1*DIGIT, a Transfer-Encoding other than "chunked" or on HTTP/1.0, a
 * missing Host on HTTP/1.1, a Host (or authority) with userinfo ('@'), an
 * empty or bad port, a host net_host_canon refuses, a Host that names
 * another host or port than an absolute-form or CONNECT target.
 * Incomplete: -EAGAIN (read more, call again with all of it). Over
 * NET_HTTP_HEAD_MAX bytes without the end of the head, or more than
 * NET_HTTP_HEADERS_MAX fields: -E2BIG. */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "basic/err.h"
#include "net/host.h"

#define NET_HTTP_HEAD_MAX 65536u
#define NET_HTTP_HEADERS_MAX 100
#define NET_HTTP_METHOD_MAX 32
#define NET_HTTP_TARGET_MAX 8192

/* Bytes inside the caller's buffer (not NUL-terminated). */
struct net_span {
        const char *p;
        size_t n;
};

struct net_http_header {
        struct net_span name;  /* as sent (compare case-insensitively) */
        struct net_span value; /* OWS trimmed */
};

enum net_http_form {
        NET_HTTP_FORM_ORIGIN = 1,
        NET_HTTP_FORM_ABSOLUTE = 2,
        NET_HTTP_FORM_AUTHORITY = 3,
        NET_HTTP_FORM_ASTERISK = 4,
};

struct net_http_head {
        size_t head_len;        /* bytes up to and including the final CRLF CRLF */
        struct net_span method; /* "GET" */
        struct net_span target; /* the request-target exactly as sent (forwarded as is) */
        struct net_span path;   /* absolute form: its path + query ("" if none);
                                 * origin form: the target; otherwise empty */
        enum net_http_form form;
        int version;          /* 10 or 11 */
        bool has_host;        /* a host is known (Host field or target authority) */
        struct net_host host; /* canonical (NAME or IP) */
        uint16_t port;        /* explicit port, 0 = none given (default of the scheme) */
        size_t n_headers;
        struct net_http_header headers[NET_HTTP_HEADERS_MAX];
        bool has_content_length;
        uint64_t content_length;
        bool chunked; /* Transfer-Encoding: chunked */
        bool upgrade; /* an Upgrade field is present (h2c and friends: refuse) */
        bool trace;   /* TRACE or TRACK: the proxy answers 405 */
};

/* Parse the request head at the start of buf (len bytes) into *ret. Returns
 * 0 (ret->head_len says where the body starts), -EAGAIN, -EBADMSG or
 * -E2BIG as described above. ret's spans point into buf: valid as long as
 * buf is. */
int net_http_head_parse(const char *buf, size_t len, struct net_http_head *ret, struct wr_err *e);

/* Find the first header named name (case-insensitive) in h; NULL if none. */
const struct net_http_header *net_http_head_find(const struct net_http_head *h, const char *name);
