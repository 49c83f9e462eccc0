/* SPDX-License-Identifier: Apache-2.0 */
/* The compact JWS parser (jwt.h). */
#include "api/jwt.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

static int b64val(unsigned char c) {
        if (c >= 'A' && c <= 'Z')
                return c - 'A';
        if (c >= 'a' && c <= 'z')
                return c - 'a' + 26;
        if (c >= '0' && c <= '9')
                return c - '0' + 52;
        if (c == '-')
                return 62;
        if (c == '_')
                return 63;
        return -1;
}

int jwt_b64url_decode(const char *in, size_t n, unsigned char *out, size_t size) {
        while (n > 0 && in[n - 1] == '=')
                n--;
        if (n % 4 == 1)
                return -EBADMSG;
        size_t o = 0;
        uint32_t acc = 0;
        unsigned bits = 0;
        for (size_t i = 0; i < n; i++) {
                int v = b64val((unsigned char) in[i]);
                if (v < 0)
                        return -EBADMSG;
                acc = (acc << 6) | (uint32_t) v;
                bits += 6;
                if (bits >= 8) {
                        bits -= 8;
                        if (o >= size)
                                return -ENOBUFS;
                        out[o++] = (unsigned char) (acc >> bits);
                        acc &= (1u << bits) - 1;
                }
        }
        return (int) o;
}

bool jwt_looks_like(const char *s, size_t len) {
        if (!s || len < 5 || len > JWT_MAX_LEN)
                return false;
        size_t dots = 0, part = 0;
        for (size_t i = 0; i < len; i++) {
                if (s[i] == '.') {
                        if (part == 0)
                                return false;
                        dots++;
                        part = 0;
                } else if (b64val((unsigned char) s[i]) < 0)
                        return false;
                else
                        part++;
        }
        return dots == 2 && part > 0;
}

/* The JSON object of one base64url part. NULL when it is not one. */
static json_t *part_json(const char *p, size_t n) {
        unsigned char *buf = malloc(n);
        if (!buf)
                return NULL;
        int l = jwt_b64url_decode(p, n, buf, n);
        json_t *j = NULL;
        if (l > 0)
                j = json_loadb((const char *) buf, (size_t) l, JSON_REJECT_DUPLICATES, NULL);
        free(buf);
        if (j && !json_is_object(j)) {
                json_decref(j);
                j = NULL;
        }
        return j;
}

/* A string member into out: 0 (absent: ""), or -EBADMSG when it is not a
 * string, holds a NUL or does not fit. */
static int get_str(json_t *o, const char *key, char *out, size_t size) {
        out[0] = 0;
        json_t *v = json_object_get(o, key);
        if (!v)
                return 0;
        if (!json_is_string(v))
                return -EBADMSG;
        size_t l = json_string_length(v);
        const char *s = json_string_value(v);
        if (l >= size || memchr(s, 0, l))
                return -EBADMSG;
        memcpy(out, s, l);
        out[l] = 0;
        return 0;
}

/* A NumericDate member: 0 (absent: *has false), or -EBADMSG. */
static int get_time(json_t *o, const char *key, int64_t *out, bool *has) {
        *out = 0;
        *has = false;
        json_t *v = json_object_get(o, key);
        if (!v)
                return 0;
        if (json_is_integer(v))
                *out = (int64_t) json_integer_value(v);
        else if (json_is_real(v) && json_real_value(v) > -9e15 && json_real_value(v) < 9e15)
                *out = (int64_t) json_real_value(v);
        else
                return -EBADMSG;
        *has = true;
        return 0;
}

int jwt_parse(const char *token, size_t len, struct jwt *out) {
        if (!token || !out)
                return -EINVAL;
        memset(out, 0, sizeof(*out));
        if (len > JWT_MAX_LEN)
                return -E2BIG;
        if (!jwt_looks_like(token, len))
                return -EBADMSG;
        const char *d1 = memchr(token, '.', len);
        const char *d2 = memchr(d1 + 1, '.', len - (size_t) (d1 + 1 - token));
        const char *sig = d2 + 1;
        size_t sig_n = len - (size_t) (sig - token);
        int l = jwt_b64url_decode(sig, sig_n, out->sig, sizeof(out->sig));
        if (l <= 0)
                return -EBADMSG;
        out->sig_len = (size_t) l;
        out->signed_len = (size_t) (d2 - token);
        json_t *h = part_json(token, (size_t) (d1 - token));
        json_t *p = h ? part_json(d1 + 1, (size_t) (d2 - d1 - 1)) : NULL;
        int r = -EBADMSG;
        if (h && p && get_str(h, "alg", out->alg, sizeof(out->alg)) == 0 && out->alg[0] &&
            get_str(h, "kid", out->kid, sizeof(out->kid)) == 0 &&
            get_str(p, "iss", out->iss, sizeof(out->iss)) == 0 &&
            get_str(p, "sub", out->sub, sizeof(out->sub)) == 0 &&
            get_str(p, "aud", out->aud, sizeof(out->aud)) == 0 &&
            get_str(p, "environment_id", out->environment_id, sizeof(out->environment_id)) == 0 &&
            get_time(p, "exp", &out->exp, &out->has_exp) == 0 &&
            get_time(p, "nbf", &out->nbf, &out->has_nbf) == 0 &&
            get_time(p, "iat", &out->iat, &out->has_iat) == 0)
                r = 0;
        json_decref(h);
        json_decref(p);
        if (r < 0) {
                memset(out, 0, sizeof(*out));
                return r;
        }
        return 0;
}
