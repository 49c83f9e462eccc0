/* SPDX-License-Identifier: Apache-2.0 */
/* Quoting hostile bytes for error messages (net-internal.h). */
#include "net/net-internal.h"

#include <stdio.h>

const char *net_quote(const void *s, size_t len, char out[static NET_QUOTE_MAX]) {
        const unsigned char *p = s;
        size_t o = 0;
        out[o++] = '"';
        for (size_t i = 0; i < len; i++) {
                unsigned char c = p[i];
                char tmp[5];
                size_t n;
                if (c == '"' || c == '\\') {
                        tmp[0] = '\\';
                        tmp[1] = (char) c;
                        n = 2;
                } else if (c >= 0x20 && c < 0x7f) {
                        tmp[0] = (char) c;
                        n = 1;
                } else {
                        snprintf(tmp, sizeof(tmp), "\\x%02x", c);
                        n = 4;
                }
                /* keep room for "...\"" and the NUL */
                if (o + n + 5 > NET_QUOTE_MAX) {
                        out[o++] = '.';
                        out[o++] = '.';
                        out[o++] = '.';
                        break;
                }
                for (size_t k = 0; k < n; k++)
                        out[o++] = tmp[k];
        }
        out[o++] = '"';
        out[o] = '\0';
        return out;
}
