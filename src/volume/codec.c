/* SPDX-License-Identifier: Apache-2.0 */
/* The pure parts of the volume file API (volume.h): the path rules a
 * client's path passes, normalization, the listing order, and the
 * encoding of a listing that warren-priv hands warrend in a sealed memfd
 * under --privsep (VOLFILE_LIST, docs/privsep.md "Phase 5, volume files,
 * as built"). No I/O: linked by warrend (src/volume), warren-priv, the
 * protocol's decoders, the unit tests and the fuzzers alike. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "volume/volume.h"

#define INVALID(e, ...)                                                                            \
        err_setx(e, -EINVAL, WR_STATUS_INVALID_ARGUMENT, WR_FAULT_CLIENT, __VA_ARGS__)

int vol_path_check(const char *field, const char *path, size_t len, bool allow_empty,
                   struct wr_err *e) {
        if (len == 0)
                return allow_empty ? 0
                                   : INVALID(e,
                                             "%s: empty; give a path relative to the "
                                             "volume's root",
                                             field);
        if (memchr(path, 0, len))
                return INVALID(e, "%s: contains a NUL byte; file names cannot", field);
        if (memchr(path, '\n', len))
                return INVALID(e, "%s: contains a newline; give a name without one", field);
        if (len > VOL_PATH_MAX)
                return INVALID(e, "%s: %zu bytes long; give at most %d", field, len, VOL_PATH_MAX);
        if (path[0] == '/')
                return INVALID(e,
                               "%s: \"%.*s\" is absolute; give a path relative to the volume's "
                               "root",
                               field, (int) (len < 80 ? len : 80), path);
        for (size_t i = 0; i < len;) {
                const char *slash = memchr(path + i, '/', len - i);
                size_t n = slash ? (size_t) (slash - (path + i)) : len - i;
                if (n > VOL_COMPONENT_MAX)
                        return INVALID(e,
                                       "%s: a component is %zu bytes long; give names of at "
                                       "most %d bytes",
                                       field, n, VOL_COMPONENT_MAX);
                if (n == 2 && path[i] == '.' && path[i + 1] == '.')
                        return INVALID(e,
                                       "%s: \"%.*s\" has a \"..\" component; give a path inside "
                                       "the volume without \"..\"",
                                       field, (int) (len < 80 ? len : 80), path);
                i += n + 1;
        }
        return 0;
}

int vol_path_normalize(const char *path, char **ret) {
        size_t len = strlen(path);
        char *out = malloc(len + 1), *o = out;
        if (!out)
                return -ENOMEM;
        for (const char *p = path; *p;) {
                size_t n = strcspn(p, "/");
                if (n && !(n == 1 && p[0] == '.')) {
                        if (o != out)
                                *o++ = '/';
                        memcpy(o, p, n);
                        o += n;
                }
                p += n;
                while (*p == '/')
                        p++;
        }
        *o = 0;
        *ret = out;
        return 0;
}

int vol_path_cmp(const char *a, const char *b) {
        for (;;) {
                size_t na = strcspn(a, "/"), nb = strcspn(b, "/");
                int c = memcmp(a, b, na < nb ? na : nb);
                if (c)
                        return c;
                if (na != nb)
                        return na < nb ? -1 : 1;
                a += na;
                b += nb;
                if (!*a || !*b)
                        return !*a && !*b ? 0 : !*a ? -1 : 1;
                a++;
                b++;
        }
}

bool vol_put_tmp_ok(const char *tmp) {
        if (strncmp(tmp, "put-", 4) != 0 || strlen(tmp) != 4 + 16)
                return false;
        for (const char *c = tmp + 4; *c; c++)
                if (!((*c >= '0' && *c <= '9') || (*c >= 'a' && *c <= 'f')))
                        return false;
        return true;
}

/* A normalized path: passes vol_path_check, non-empty, no empty or "."
 * component, no trailing '/'. */
static bool canonical(const char *p, size_t len) {
        if (len == 0 || vol_path_check("path", p, len, false, NULL) < 0 || p[len - 1] == '/')
                return false;
        for (size_t i = 0; i < len;) {
                const char *slash = memchr(p + i, '/', len - i);
                size_t n = slash ? (size_t) (slash - (p + i)) : len - i;
                if (n == 0 || (n == 1 && p[i] == '.'))
                        return false;
                i += n + 1;
        }
        return true;
}

/* One entry of the encoding: this header, then path_len bytes of path
 * (no NUL). Host byte order (both ends run on one host). */
struct wire_entry {
        uint32_t path_len; /* 1..VOL_PATH_MAX */
        uint32_t kind;     /* VOL_FILE_REGULAR, _SYMLINK or _OTHER: never a directory */
        uint32_t mode;     /* 0..07777 */
        uint32_t reserved; /* 0 */
        uint64_t size;     /* OTHER: 0 */
        int64_t mtime_ns;
};
_Static_assert(sizeof(struct wire_entry) == VOL_WIRE_ENTRY, "no padding: every byte is checked");

int vol_files_encode(const struct vol_file *files, size_t n, void **ret, size_t *ret_len) {
        size_t len = 0;
        for (size_t i = 0; i < n; i++)
                len += sizeof(struct wire_entry) + strlen(files[i].path);
        char *buf = malloc(len ? len : 1), *o = buf;
        if (!buf)
                return -ENOMEM;
        for (size_t i = 0; i < n; i++) {
                struct wire_entry w = {.path_len = (uint32_t) strlen(files[i].path),
                                       .kind = (uint32_t) files[i].kind,
                                       .mode = (uint32_t) files[i].mode,
                                       .size = files[i].size,
                                       .mtime_ns = files[i].mtime_ns};
                memcpy(o, &w, sizeof(w));
                memcpy(o + sizeof(w), files[i].path, w.path_len);
                o += sizeof(w) + w.path_len;
        }
        *ret = buf;
        *ret_len = len;
        return 0;
}

#define BAD(e, ...) err_set(e, -EPROTO, "volume listing: " __VA_ARGS__)

int vol_files_decode(const void *buf, size_t len, size_t n, const char *prefix,
                     struct vol_file **ret, struct wr_err *e) {
        *ret = NULL;
        if (n > VOL_LIST_MAX)
                return BAD(e, "%zu entries (at most %d)", n, VOL_LIST_MAX);
        size_t plen = prefix ? strlen(prefix) : 0;
        struct vol_file *out = calloc(n ? n : 1, sizeof(*out));
        if (!out)
                return -ENOMEM;
        const char *b = buf;
        size_t off = 0, i = 0;
        int r = 0;
        for (; i < n; i++) {
                struct wire_entry w;
                if (len - off < sizeof(w)) {
                        r = BAD(e, "entry %zu cut short", i);
                        break;
                }
                memcpy(&w, b + off, sizeof(w));
                off += sizeof(w);
                if (w.path_len == 0 || w.path_len > VOL_PATH_MAX || len - off < w.path_len) {
                        r = BAD(e, "entry %zu: a path of %u bytes", i, w.path_len);
                        break;
                }
                const char *p = b + off;
                off += w.path_len;
                if (!canonical(p, w.path_len)) {
                        r = BAD(e, "entry %zu: not a normalized path inside the volume", i);
                        break;
                }
                if (plen && (w.path_len <= plen || memcmp(p, prefix, plen) != 0 || p[plen] != '/')) {
                        r = BAD(e, "entry %zu: not under the prefix", i);
                        break;
                }
                if ((w.kind != VOL_FILE_REGULAR && w.kind != VOL_FILE_SYMLINK &&
                     w.kind != VOL_FILE_OTHER) ||
                    w.mode > 07777 || w.reserved || (w.kind == VOL_FILE_OTHER && w.size)) {
                        r = BAD(e, "entry %zu: kind %u, mode %o, size %llu", i, w.kind, w.mode,
                                (unsigned long long) w.size);
                        break;
                }
                if (!(out[i].path = strndup(p, w.path_len))) {
                        r = -ENOMEM;
                        break;
                }
                if (i > 0 && vol_path_cmp(out[i - 1].path, out[i].path) >= 0) {
                        r = BAD(e, "entry %zu: out of order", i);
                        i++;
                        break;
                }
                out[i].kind = (enum vol_file_kind) w.kind;
                out[i].mode = (mode_t) w.mode;
                out[i].size = w.size;
                out[i].mtime_ns = w.mtime_ns;
        }
        if (r == 0 && off != len)
                r = BAD(e, "%zu bytes after the last entry", len - off);
        if (r < 0) {
                vol_files_free(out, i < n ? i + 1 : n);
                return r;
        }
        *ret = out;
        return 0;
}

void vol_file_clear(struct vol_file *f) {
        if (!f)
                return;
        free(f->path);
        memset(f, 0, sizeof(*f));
}

void vol_files_free(struct vol_file *files, size_t n) {
        for (size_t i = 0; files && i < n; i++)
                vol_file_clear(&files[i]);
        free(files);
}
