/* SPDX-License-Identifier: Apache-2.0 */
/* The bearer token parser and formatter (bearer.h). */
#include "api/bearer.h"

#include <errno.h>
#include <string.h>
#include <strings.h>

static bool is_lower_hex(char c) {
        return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
}

static bool all_hex(const char *p, size_t n) {
        for (size_t i = 0; i < n; i++)
                if (!is_lower_hex(p[i]))
                        return false;
        return true;
}

int bearer_credential(const char *value, size_t len, const char **cred, size_t *cred_len) {
        if (!value || !cred || !cred_len)
                return -EINVAL;
        *cred = NULL;
        *cred_len = 0;
        for (size_t i = 0; i < len; i++) {
                unsigned char c = (unsigned char) value[i];
                if (c != '\t' && (c < 0x20 || c == 0x7f))
                        return -EINVAL;
        }
        if (len < 7 || strncasecmp(value, "bearer", 6) != 0 ||
            (value[6] != ' ' && value[6] != '\t'))
                return -EINVAL;
        size_t i = 6;
        while (i < len && (value[i] == ' ' || value[i] == '\t'))
                i++;
        size_t end = len;
        while (end > i && (value[end - 1] == ' ' || value[end - 1] == '\t'))
                end--;
        if (end == i)
                return -EINVAL;
        *cred = value + i;
        *cred_len = end - i;
        return 0;
}

int bearer_parse(const char *value, size_t len, struct bearer *out) {
        if (!value || !out)
                return -EINVAL;
        *out = (struct bearer){0};
        const char *t;
        size_t n;
        int r = bearer_credential(value, len, &t, &n);
        if (r < 0)
                return r;
        if (n != BEARER_TOKEN_LEN || memcmp(t, "wt_", 3) != 0 || t[19] != '_' ||
            !all_hex(t + 3, 16) || !all_hex(t + 20, 64))
                return -EBADMSG;
        memcpy(out->id, "tk-", 3);
        memcpy(out->id + 3, t + 3, 16);
        out->id[BEARER_ID_LEN] = 0;
        out->token = t;
        out->token_len = n;
        return 0;
}

static void hex(const unsigned char *in, size_t n, char *out) {
        static const char digits[] = "0123456789abcdef";
        for (size_t i = 0; i < n; i++) {
                out[2 * i] = digits[in[i] >> 4];
                out[2 * i + 1] = digits[in[i] & 15];
        }
}

void bearer_format(const unsigned char id[8], const unsigned char secret[32], char *out,
                   char *id_out) {
        memcpy(out, "wt_", 3);
        hex(id, 8, out + 3);
        out[19] = '_';
        hex(secret, 32, out + 20);
        out[BEARER_TOKEN_LEN] = 0;
        memcpy(id_out, "tk-", 3);
        memcpy(id_out + 3, out + 3, 16);
        id_out[BEARER_ID_LEN] = 0;
}
