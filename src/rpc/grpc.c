/* SPDX-License-Identifier: Apache-2.0 */
#include "rpc/grpc.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define MIN_(a, b) ((a) < (b) ? (a) : (b))

static int deliver(struct grpc_decoder *d, grpc_message_cb cb, void *userdata) {
        uint8_t *msg = d->buf;
        size_t len = d->len;
        d->buf = NULL;
        d->len = d->need = d->hdr_len = 0;
        d->in_body = false;
        return cb(userdata, msg, len);
}

static int start_body(struct grpc_decoder *d) {
        if (d->hdr[0] == 1)
                return -EPROTONOSUPPORT;
        if (d->hdr[0] != 0)
                return -EBADMSG;
        uint32_t n = (uint32_t) d->hdr[1] << 24 | (uint32_t) d->hdr[2] << 16 |
                     (uint32_t) d->hdr[3] << 8 | (uint32_t) d->hdr[4];
        if (d->max && n > d->max)
                return -EMSGSIZE;
        d->need = n;
        d->len = 0;
        d->in_body = true;
        if (n > 0) {
                d->buf = d->alloc_fn ? d->alloc_fn(n) : malloc(n);
                if (!d->buf)
                        return -ENOMEM;
        }
        return 0;
}

int grpc_decoder_feed(struct grpc_decoder *d, const uint8_t *data, size_t len, grpc_message_cb cb,
                      void *userdata) {
        while (len > 0 || (d->in_body && d->len == d->need)) {
                if (!d->in_body) {
                        size_t take = MIN_(GRPC_FRAME_HEADER - d->hdr_len, len);
                        memcpy(d->hdr + d->hdr_len, data, take);
                        d->hdr_len += take;
                        data += take;
                        len -= take;
                        if (d->hdr_len < GRPC_FRAME_HEADER)
                                return 0;
                        int r = start_body(d);
                        if (r < 0)
                                return r;
                }
                size_t take = MIN_(d->need - d->len, len);
                if (take) {
                        memcpy(d->buf + d->len, data, take);
                        d->len += take;
                        data += take;
                        len -= take;
                }
                if (d->len == d->need) {
                        int r = deliver(d, cb, userdata);
                        if (r < 0)
                                return r;
                }
        }
        return 0;
}

bool grpc_decoder_partial(const struct grpc_decoder *d) {
        return d->hdr_len > 0 || d->in_body;
}

void grpc_decoder_reset(struct grpc_decoder *d) {
        if (!d)
                return;
        if (d->free_fn)
                d->free_fn(d->buf);
        else
                free(d->buf);
        size_t max = d->max;
        void *(*alloc_fn)(size_t) = d->alloc_fn;
        void (*free_fn)(void *) = d->free_fn;
        memset(d, 0, sizeof(*d));
        d->max = max;
        d->alloc_fn = alloc_fn;
        d->free_fn = free_fn;
}

int grpc_frame_header(uint8_t out[GRPC_FRAME_HEADER], size_t len) {
        if (len > UINT32_MAX)
                return -EMSGSIZE;
        out[0] = 0;
        out[1] = (uint8_t) (len >> 24);
        out[2] = (uint8_t) (len >> 16);
        out[3] = (uint8_t) (len >> 8);
        out[4] = (uint8_t) len;
        return 0;
}

int grpc_timeout_parse(const char *s, size_t len, uint64_t *ret_ms) {
        if (!s || len < 2 || len > 9)
                return -EINVAL;
        uint64_t v = 0;
        for (size_t i = 0; i < len - 1; i++) {
                if (s[i] < '0' || s[i] > '9')
                        return -EINVAL;
                v = v * 10 + (uint64_t) (s[i] - '0');
        }
        uint64_t ms;
        switch (s[len - 1]) {
        case 'H':
                ms = v * 3600000ULL;
                break;
        case 'M':
                ms = v * 60000ULL;
                break;
        case 'S':
                ms = v * 1000ULL;
                break;
        case 'm':
                ms = v;
                break;
        case 'u':
                ms = (v + 999) / 1000;
                break;
        case 'n':
                ms = (v + 999999) / 1000000;
                break;
        default:
                return -EINVAL;
        }
        *ret_ms = ms;
        return 0;
}

size_t grpc_timeout_format(uint64_t ms, char *buf, size_t size) {
        static const struct {
                uint64_t div;
                char unit;
        } units[] = {{1, 'm'}, {1000, 'S'}, {60000, 'M'}, {3600000, 'H'}};
        for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++) {
                uint64_t v = ms / units[i].div + (ms % units[i].div != 0);
                if (v <= 99999999 || i == 3) {
                        if (v > 99999999)
                                v = 99999999;
                        int n = snprintf(buf, size, "%llu%c", (unsigned long long) v,
                                         units[i].unit);
                        return n < 0 ? 0 : (size_t) n;
                }
        }
        return 0;
}

int grpc_percent_encode(const char *in, size_t len, char **ret) {
        static const char hex[] = "0123456789ABCDEF";
        size_t n = 0;
        for (size_t i = 0; i < len; i++) {
                unsigned char c = (unsigned char) in[i];
                n += (c < 0x20 || c > 0x7E || c == '%') ? 3 : 1;
        }
        char *out = malloc(n + 1);
        if (!out)
                return -ENOMEM;
        char *p = out;
        for (size_t i = 0; i < len; i++) {
                unsigned char c = (unsigned char) in[i];
                if (c < 0x20 || c > 0x7E || c == '%') {
                        *p++ = '%';
                        *p++ = hex[c >> 4];
                        *p++ = hex[c & 15];
                } else
                        *p++ = (char) c;
        }
        *p = 0;
        *ret = out;
        return 0;
}

static int unhex(char c) {
        if (c >= '0' && c <= '9')
                return c - '0';
        if (c >= 'a' && c <= 'f')
                return c - 'a' + 10;
        if (c >= 'A' && c <= 'F')
                return c - 'A' + 10;
        return -1;
}

int grpc_percent_decode(const char *in, size_t len, char **ret, size_t *ret_len) {
        char *out = malloc(len + 1);
        if (!out)
                return -ENOMEM;
        size_t n = 0;
        for (size_t i = 0; i < len; i++) {
                int hi, lo;
                if (in[i] == '%' && i + 2 < len && (hi = unhex(in[i + 1])) >= 0 &&
                    (lo = unhex(in[i + 2])) >= 0) {
                        out[n++] = (char) (hi << 4 | lo);
                        i += 2;
                } else
                        out[n++] = in[i];
        }
        out[n] = 0;
        *ret = out;
        if (ret_len)
                *ret_len = n;
        return 0;
}

bool grpc_content_type_ok(const char *s, size_t len) {
        static const char pfx[] = "application/grpc";
        size_t pl = sizeof(pfx) - 1;
        if (len < pl || strncasecmp(s, pfx, pl) != 0)
                return false;
        return len == pl || s[pl] == '+' || s[pl] == ';';
}

static int pb_varint(const uint8_t **p, const uint8_t *end, uint64_t *ret) {
        uint64_t v = 0;
        for (unsigned shift = 0; shift < 64; shift += 7) {
                if (*p >= end)
                        return -EBADMSG;
                uint8_t b = *(*p)++;
                /* The tenth byte may carry only the top bit. */
                if (shift == 63 && b > 1)
                        return -EBADMSG;
                v |= (uint64_t) (b & 0x7f) << shift;
                if (!(b & 0x80)) {
                        *ret = v;
                        return 0;
                }
        }
        return -EBADMSG;
}

int grpc_pb_next(const uint8_t **p, const uint8_t *end, struct grpc_pb_field *f) {
        if (*p >= end)
                return 0;
        uint64_t key;
        if (pb_varint(p, end, &key) < 0)
                return -EBADMSG;
        if (key >> 3 == 0 || key >> 3 > 0x1fffffff)
                return -EBADMSG;
        *f = (struct grpc_pb_field){.num = (uint32_t) (key >> 3), .type = (int) (key & 7)};
        size_t left = (size_t) (end - *p);
        switch (f->type) {
        case 0:
                return pb_varint(p, end, &f->value) < 0 ? -EBADMSG : 1;
        case 1:
        case 5: {
                size_t n = f->type == 1 ? 8 : 4;
                if (left < n)
                        return -EBADMSG;
                for (size_t i = 0; i < n; i++)
                        f->value |= (uint64_t) (*p)[i] << (8 * i);
                *p += n;
                return 1;
        }
        case 2: {
                uint64_t n;
                if (pb_varint(p, end, &n) < 0 || n > (uint64_t) (end - *p))
                        return -EBADMSG;
                f->data = *p;
                f->len = (size_t) n;
                *p += n;
                return 1;
        }
        default:
                return -EBADMSG;
        }
}
