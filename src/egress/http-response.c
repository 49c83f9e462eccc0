/* SPDX-License-Identifier: Apache-2.0 */
/* Response heads, chunked bodies and one JSON lookup (http-response.h). */
#include "egress/http-response.h"
#include "egress/http-stream.h"

#include <errno.h>
#include <string.h>

static bool tchar(uint8_t c) {
        return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
               strchr("!#$%&'*+-.^_`|~", c) != NULL;
}

static bool name_is(const uint8_t *p, size_t n, const char *want) {
        size_t wl = strlen(want);
        if (n != wl)
                return false;
        for (size_t i = 0; i < n; i++) {
                uint8_t a = p[i], b = (uint8_t) want[i];
                if (a >= 'A' && a <= 'Z')
                        a = (uint8_t) (a - 'A' + 'a');
                if (a != b)
                        return false;
        }
        return true;
}

int egress_resp_head_parse(const uint8_t *buf, size_t len, struct egress_resp_head *ret) {
        memset(ret, 0, sizeof(*ret));
        size_t lim = len < EGRESS_RESP_HEAD_MAX ? len : EGRESS_RESP_HEAD_MAX;
        /* find the end of the head */
        size_t end = 0;
        for (size_t i = 0; i + 3 < lim; i++)
                if (buf[i] == '\r' && buf[i + 1] == '\n' && buf[i + 2] == '\r' &&
                    buf[i + 3] == '\n') {
                        end = i + 4;
                        break;
                }
        if (!end)
                return len >= EGRESS_RESP_HEAD_MAX ? -E2BIG : -EAGAIN;
        /* status line */
        if (end < 14 || memcmp(buf, "HTTP/1.", 7) != 0 || (buf[7] != '0' && buf[7] != '1') ||
            buf[8] != ' ')
                return -EBADMSG;
        int st = 0;
        for (int i = 9; i < 12; i++) {
                if (buf[i] < '0' || buf[i] > '9')
                        return -EBADMSG;
                st = st * 10 + (buf[i] - '0');
        }
        if (st < 100 || st > 599 || (buf[12] != ' ' && buf[12] != '\r'))
                return -EBADMSG;
        ret->status = st;
        size_t p = 12;
        while (p < end && buf[p] != '\r')
                if (buf[p++] == '\n')
                        return -EBADMSG;
        if (p + 1 >= end || buf[p + 1] != '\n')
                return -EBADMSG;
        p += 2;
        /* fields */
        while (p < end - 2) {
                size_t ls = p;
                while (p < end && buf[p] != '\r') {
                        if (buf[p] == '\n' || buf[p] == 0)
                                return -EBADMSG;
                        p++;
                }
                if (p + 1 >= end || buf[p + 1] != '\n')
                        return -EBADMSG;
                size_t le = p;
                p += 2;
                size_t c = ls;
                while (c < le && tchar(buf[c]))
                        c++;
                if (c == ls || c >= le || buf[c] != ':')
                        return -EBADMSG;
                const uint8_t *name = buf + ls;
                size_t nl = c - ls;
                size_t vs = c + 1, ve = le;
                while (vs < ve && (buf[vs] == ' ' || buf[vs] == '\t'))
                        vs++;
                while (ve > vs && (buf[ve - 1] == ' ' || buf[ve - 1] == '\t'))
                        ve--;
                if (name_is(name, nl, "content-length")) {
                        if (vs == ve || ve - vs > 19)
                                return -EBADMSG;
                        uint64_t v = 0;
                        for (size_t i = vs; i < ve; i++) {
                                if (buf[i] < '0' || buf[i] > '9')
                                        return -EBADMSG;
                                v = v * 10 + (uint64_t) (buf[i] - '0');
                        }
                        if (ret->has_content_length && ret->content_length != v)
                                return -EBADMSG;
                        ret->has_content_length = true;
                        ret->content_length = v;
                } else if (name_is(name, nl, "transfer-encoding")) {
                        /* the last coding decides */
                        size_t k = ve;
                        while (k > vs && buf[k - 1] != ',' && buf[k - 1] != ' ')
                                k--;
                        ret->chunked = name_is(buf + k, ve - k, "chunked");
                }
        }
        ret->head_len = end;
        return 0;
}

long egress_dechunk(uint8_t *buf, size_t len) {
        size_t in = 0, out = 0;
        for (;;) {
                uint64_t sz = 0;
                size_t digits = 0;
                while (in < len && egress_hexval(buf[in]) >= 0) {
                        if (++digits > 15)
                                return -EBADMSG;
                        sz = sz * 16 + (uint64_t) egress_hexval(buf[in++]);
                }
                if (!digits)
                        return -EBADMSG;
                while (in < len && buf[in] != '\r') /* extensions */
                        if (buf[in++] == '\n')
                                return -EBADMSG;
                if (in + 1 >= len || buf[in + 1] != '\n')
                        return -EBADMSG;
                in += 2;
                if (sz == 0)
                        return (long) out; /* trailers are not kept */
                if (sz > len - in || len - in - sz < 2)
                        return -EBADMSG;
                memmove(buf + out, buf + in, sz);
                out += sz;
                in += sz;
                if (buf[in] != '\r' || buf[in + 1] != '\n')
                        return -EBADMSG;
                in += 2;
        }
}

struct js {
        const uint8_t *p;
        size_t len, i;
};

static void ws(struct js *j) {
        while (j->i < j->len && strchr(" \t\r\n", j->p[j->i]) && j->p[j->i])
                j->i++;
}

/* A string at j->i (the opening quote): decoded into out when out is
 * given. Its length, or negative. */
static long string(struct js *j, char *out, size_t cap) {
        if (j->i >= j->len || j->p[j->i] != '"')
                return -EBADMSG;
        j->i++;
        size_t o = 0;
        bool big = false;
        while (j->i < j->len) {
                uint8_t c = j->p[j->i++];
                if (c == '"') {
                        if (out)
                                out[o < cap ? o : cap - 1] = 0;
                        return big ? -E2BIG : (long) o;
                }
                if (c < 0x20)
                        return -EBADMSG;
                if (c == '\\') {
                        if (j->i >= j->len)
                                return -EBADMSG;
                        uint8_t e = j->p[j->i++];
                        switch (e) {
                        case '"':
                        case '\\':
                        case '/':
                                c = e;
                                break;
                        case 'b':
                                c = '\b';
                                break;
                        case 'f':
                                c = '\f';
                                break;
                        case 'n':
                                c = '\n';
                                break;
                        case 'r':
                                c = '\r';
                                break;
                        case 't':
                                c = '\t';
                                break;
                        case 'u': {
                                if (j->len - j->i < 4)
                                        return -EBADMSG;
                                int v = 0;
                                for (int k = 0; k < 4; k++) {
                                        int h = egress_hexval(j->p[j->i++]);
                                        if (h < 0)
                                                return -EBADMSG;
                                        v = v * 16 + h;
                                }
                                if (v >= 0x80) {
                                        if (out)
                                                return -EBADMSG;
                                        v = '?';
                                }
                                c = (uint8_t) v;
                                break;
                        }
                        default:
                                return -EBADMSG;
                        }
                }
                if (out) {
                        if (o + 1 < cap)
                                out[o] = (char) c;
                        else
                                big = true;
                }
                o++;
        }
        return -EBADMSG;
}

/* Skip one value (any JSON value) at j->i. */
static int skip(struct js *j, int depth) {
        if (depth > 64)
                return -EBADMSG;
        ws(j);
        if (j->i >= j->len)
                return -EBADMSG;
        uint8_t c = j->p[j->i];
        if (c == '"')
                return string(j, NULL, 0) < 0 ? -EBADMSG : 0;
        if (c == '{' || c == '[') {
                uint8_t close = c == '{' ? '}' : ']';
                j->i++;
                ws(j);
                if (j->i < j->len && j->p[j->i] == close) {
                        j->i++;
                        return 0;
                }
                for (;;) {
                        if (c == '{') {
                                ws(j);
                                if (string(j, NULL, 0) < 0)
                                        return -EBADMSG;
                                ws(j);
                                if (j->i >= j->len || j->p[j->i++] != ':')
                                        return -EBADMSG;
                        }
                        if (skip(j, depth + 1) < 0)
                                return -EBADMSG;
                        ws(j);
                        if (j->i >= j->len)
                                return -EBADMSG;
                        uint8_t d = j->p[j->i++];
                        if (d == close)
                                return 0;
                        if (d != ',')
                                return -EBADMSG;
                }
        }
        /* a number, true, false, null: up to a delimiter */
        size_t s = j->i;
        while (j->i < j->len && !strchr(",}] \t\r\n", j->p[j->i]))
                j->i++;
        return j->i > s ? 0 : -EBADMSG;
}

long egress_json_top_string(const uint8_t *buf, size_t len, const char *key, char *out,
                            size_t cap) {
        if (cap == 0)
                return -E2BIG;
        struct js j = {.p = buf, .len = len};
        ws(&j);
        if (j.i >= j.len || j.p[j.i++] != '{')
                return -EBADMSG;
        ws(&j);
        if (j.i < j.len && j.p[j.i] == '}')
                return -ENOENT;
        size_t kl = strlen(key);
        for (;;) {
                ws(&j);
                char k[64];
                long n = string(&j, k, sizeof(k));
                if (n < 0 && n != -E2BIG)
                        return -EBADMSG;
                ws(&j);
                if (j.i >= j.len || j.p[j.i++] != ':')
                        return -EBADMSG;
                ws(&j);
                if (n == (long) kl && memcmp(k, key, kl) == 0) {
                        if (j.i >= j.len || j.p[j.i] != '"')
                                return -ENOENT;
                        return string(&j, out, cap);
                }
                if (skip(&j, 1) < 0)
                        return -EBADMSG;
                ws(&j);
                if (j.i >= j.len)
                        return -EBADMSG;
                uint8_t d = j.p[j.i++];
                if (d == '}')
                        return -ENOENT;
                if (d != ',')
                        return -EBADMSG;
        }
}
