/* SPDX-License-Identifier: Apache-2.0 */
/* Pure helpers of the runtime: ids, sizes, paths, safe recursive removal. */

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "runtime/runtime-internal.h"

bool rt_id_valid(const char *id) {
        if (!id || !id[0])
                return false;
        size_t n = strlen(id);
        if (n > 64)
                return false;
        for (size_t i = 0; i < n; i++) {
                char ch = id[i];
                bool alnum = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
                             (ch >= '0' && ch <= '9');
                if (!alnum && (i == 0 || (ch != '-' && ch != '_' && ch != '.')))
                        return false;
        }
        return true;
}

int rt_memory_parse(const char *s, uint64_t *ret) {
        if (!s || !*s || *s < '0' || *s > '9')
                return -EINVAL;
        char *end;
        errno = 0;
        unsigned long long v = strtoull(s, &end, 10);
        if (errno == ERANGE)
                return -ERANGE;
        unsigned shift = 0;
        switch (*end) {
        case 0:
                break;
        case 'k':
        case 'K':
                shift = 10;
                end++;
                break;
        case 'm':
        case 'M':
                shift = 20;
                end++;
                break;
        case 'g':
        case 'G':
                shift = 30;
                end++;
                break;
        case 't':
        case 'T':
                shift = 40;
                end++;
                break;
        case 'b':
        case 'B':
                break;
        default:
                return -EINVAL;
        }
        if (shift && *end == 'i')
                end++;
        if ((*end == 'B' || *end == 'b') && (shift || end[1] == 0))
                end++;
        if (*end)
                return -EINVAL;
        if (v == 0)
                return -ERANGE;
        if (shift && v > (UINT64_MAX >> shift))
                return -ERANGE;
        *ret = (uint64_t) v << shift;
        return 0;
}

int rt_cpu_parse(const char *s, uint32_t *ret_millicores) {
        if (!s || !*s || *s < '0' || *s > '9')
                return -EINVAL;
        size_t n = strlen(s);
        uint64_t v = 0;
        if (s[n - 1] == 'm') {
                for (size_t i = 0; i + 1 < n; i++) {
                        if (s[i] < '0' || s[i] > '9')
                                return -EINVAL;
                        v = v * 10 + (uint64_t) (s[i] - '0');
                        if (v > 1000000000ULL)
                                return -ERANGE;
                }
        } else {
                const char *p = s;
                while (*p >= '0' && *p <= '9') {
                        v = v * 10 + (uint64_t) (*p++ - '0');
                        if (v > 1000000ULL)
                                return -ERANGE;
                }
                v *= 1000;
                if (*p == '.') {
                        p++;
                        unsigned scale = 100, digits = 0;
                        if (*p < '0' || *p > '9')
                                return -EINVAL;
                        while (*p >= '0' && *p <= '9') {
                                if (++digits > 3)
                                        return -EINVAL;
                                v += (uint64_t) (*p++ - '0') * scale;
                                scale /= 10;
                        }
                }
                if (*p)
                        return -EINVAL;
        }
        if (v == 0 || v > 1000000000ULL)
                return -ERANGE;
        *ret_millicores = (uint32_t) v;
        return 0;
}

int rt_overlay_escape(const char *path, char *buf, size_t size) {
        size_t o = 0;
        for (const char *p = path; *p; p++) {
                bool esc = *p == '\\' || *p == ':' || *p == ',';
                if (o + (esc ? 2 : 1) >= size)
                        return -ENAMETOOLONG;
                if (esc)
                        buf[o++] = '\\';
                buf[o++] = *p;
        }
        if (o >= size)
                return -ENAMETOOLONG;
        buf[o] = 0;
        return (int) o;
}

bool rt_target_valid(const char *p) {
        if (!p || p[0] != '/' || strlen(p) >= PATH_MAX)
                return false;
        const char *c = p + 1;
        for (;;) {
                const char *slash = strchr(c, '/');
                size_t len = slash ? (size_t) (slash - c) : strlen(c);
                if (len == 0)
                        return false; /* "//", trailing '/', or "/" */
                if ((len == 1 && c[0] == '.') || (len == 2 && c[0] == '.' && c[1] == '.'))
                        return false;
                if (!slash)
                        return true;
                c = slash + 1;
        }
}
