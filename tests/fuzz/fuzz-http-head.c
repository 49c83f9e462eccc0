/* SPDX-License-Identifier: Apache-2.0 */
/* libFuzzer target: the strict HTTP/1.1 request-head parser
 * (src/net/http.c). Properties: an accepted head lies inside the input,
 * ends in CRLF CRLF, holds no bare CR/LF or NUL, every span points inside
 * it, its prefixes are "need more" (never an error), and the host (if
 * any) is canonical. */
#include <stdlib.h>
#include <string.h>

#include "net/http.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void in_head(struct net_span s, const char *buf, size_t n) {
        if (s.n && (s.p < buf || s.p + s.n > buf + n))
                abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        const char *buf = (const char *) data;
        static struct net_http_head h, h2;
        struct wr_err e = {0};
        int r = net_http_head_parse(buf, size, &h, &e);
        if (r == -EBADMSG || r == -E2BIG) {
                if (e.code != r || !e.msg[0] || h.head_len)
                        abort();
                return 0;
        }
        if (r == -EAGAIN)
                return 0;
        if (r != 0)
                abort();
        size_t n = h.head_len;
        if (n < 4 || n > size || n > NET_HTTP_HEAD_MAX || memcmp(buf + n - 4, "\r\n\r\n", 4))
                abort();
        if (memchr(buf, '\0', n))
                abort();
        for (size_t i = 0; i < n; i++)
                if ((buf[i] == '\n') != (i > 0 && buf[i - 1] == '\r'))
                        abort();
        in_head(h.method, buf, n);
        in_head(h.target, buf, n);
        in_head(h.path, buf, n);
        if (h.method.n == 0 || h.target.n == 0 || h.n_headers > NET_HTTP_HEADERS_MAX)
                abort();
        for (size_t i = 0; i < h.n_headers; i++) {
                in_head(h.headers[i].name, buf, n);
                in_head(h.headers[i].value, buf, n);
                if (h.headers[i].name.n == 0)
                        abort();
        }
        if (h.has_content_length && h.chunked)
                abort();
        if (h.version == 11 && !h.has_host)
                abort();
        if (h.has_host && h.host.kind == NET_HOST_NAME && !net_host_is_canonical_name(h.host.name))
                abort();
        /* no prefix of a good head is refused: it only needs more */
        size_t cuts[] = {n - 1, n / 2, n / 3, 1};
        for (size_t i = 0; i < sizeof(cuts) / sizeof(cuts[0]); i++)
                if (net_http_head_parse(buf, cuts[i], &h2, NULL) != -EAGAIN)
                        abort();
        return 0;
}
