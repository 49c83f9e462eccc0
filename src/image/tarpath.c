/* SPDX-License-Identifier: Apache-2.0 */
/* Tar entry checks: pure functions over the header fields, no I/O. Every
 * decision about what a hostile layer may contain is made here, so the
 * fuzzer (tests/fuzz/fuzz-tar.c) covers it whole. */
#include "image/image-internal.h"

#include <errno.h>
#include <limits.h>
#include <string.h>
#include <sys/stat.h>

int img_path_clean(const char *raw, char *out, size_t outsz, const char **reason) {
        static const char *dummy;
        if (!reason)
                reason = &dummy;
        *reason = NULL;
        if (!raw || !out || outsz == 0) {
                *reason = "no path";
                return -EINVAL;
        }
        out[0] = '\0';
        if (raw[0] == '\0') {
                *reason = "empty path";
                return -EINVAL;
        }
        if (raw[0] == '/') {
                *reason = "absolute path";
                return -EINVAL;
        }

        size_t o = 0;
        const char *p = raw;
        while (*p) {
                while (*p == '/')
                        p++;
                if (!*p)
                        break;
                const char *end = strchrnul(p, '/');
                size_t len = (size_t) (end - p);
                if (len == 1 && p[0] == '.') {
                        p = end;
                        continue;
                }
                if (len == 2 && p[0] == '.' && p[1] == '.') {
                        *reason = "\"..\" component";
                        return -EINVAL;
                }
                if (len > NAME_MAX) {
                        *reason = "component longer than NAME_MAX";
                        return -EINVAL;
                }
                if (o + (o > 0) + len + 1 > outsz) {
                        *reason = "path too long";
                        return -EINVAL;
                }
                if (o > 0)
                        out[o++] = '/';
                memcpy(out + o, p, len);
                o += len;
                out[o] = '\0';
                p = end;
        }
        return 0;
}

static const char *base_name(const char *path) {
        const char *slash = strrchr(path, '/');
        return slash ? slash + 1 : path;
}

static bool is_root_ssh(const char *path) {
        static const char prefix[] = "root/.ssh";
        size_t n = sizeof(prefix) - 1;
        return strncmp(path, prefix, n) == 0 && (path[n] == '\0' || path[n] == '/');
}

int img_entry_plan(const char *raw_path, mode_t type, mode_t perm, const char *raw_hardlink,
                   struct img_entry_plan *ret, const char **reason) {
        static const char *dummy;
        if (!reason)
                reason = &dummy;
        *reason = NULL;
        memset(ret, 0, sizeof(*ret));

        int r = img_path_clean(raw_path, ret->path, sizeof(ret->path), reason);
        if (r < 0)
                return r;

        perm &= 07777;
        if (raw_hardlink) {
                r = img_path_clean(raw_hardlink, ret->link, sizeof(ret->link), reason);
                if (r < 0) {
                        *reason = "hardlink target escapes the layer (absolute or \"..\")";
                        return r;
                }
                if (ret->link[0] == '\0') {
                        *reason = "hardlink to the layer root";
                        return -EINVAL;
                }
                if (strcmp(ret->link, ret->path) == 0) {
                        *reason = "hardlink to itself";
                        return -EINVAL;
                }
                if (ret->path[0] == '\0') {
                        *reason = "hardlink at the layer root";
                        return -EINVAL;
                }
                ret->kind = IMG_ENTRY_HARDLINK;
                ret->root_ssh = is_root_ssh(ret->path);
                return 0;
        }

        const char *base = base_name(ret->path);
        if (strncmp(base, ".wh.", 4) == 0) {
                /* OCI whiteouts: the entry's own type and mode do not matter. */
                size_t dir_len = (size_t) (base - ret->path);
                if (strncmp(base, ".wh..wh.", 8) == 0) {
                        if (strcmp(base, ".wh..wh..opq") == 0) {
                                /* the parent directory becomes opaque */
                                ret->path[dir_len > 0 ? dir_len - 1 : 0] = '\0';
                                ret->kind = IMG_ENTRY_OPAQUE;
                        } else
                                ret->kind = IMG_ENTRY_SKIP; /* AUFS metadata */
                        return 0;
                }
                const char *victim = base + 4;
                if (victim[0] == '\0' || strcmp(victim, ".") == 0 || strcmp(victim, "..") == 0) {
                        *reason = "malformed whiteout";
                        return -EINVAL;
                }
                memmove(ret->path + dir_len, victim, strlen(victim) + 1);
                ret->kind = IMG_ENTRY_WHITEOUT;
                ret->root_ssh = is_root_ssh(ret->path) && strcmp(ret->path, "root/.ssh") != 0;
                return 0;
        }

        switch (type & S_IFMT) {
        case S_IFREG:
                ret->kind = IMG_ENTRY_FILE;
                ret->mode = perm & ~(mode_t) (S_ISUID | S_ISGID);
                break;
        case S_IFDIR:
                ret->kind = IMG_ENTRY_DIR;
                ret->mode = perm & ~(mode_t) S_ISUID;
                break;
        case S_IFLNK:
                ret->kind = IMG_ENTRY_SYMLINK;
                ret->mode = 0777;
                break;
        case S_IFIFO:
                ret->kind = IMG_ENTRY_FIFO;
                ret->mode = perm & ~(mode_t) (S_ISUID | S_ISGID);
                break;
        case S_IFCHR:
                *reason = "character device";
                return -EINVAL;
        case S_IFBLK:
                *reason = "block device";
                return -EINVAL;
        case S_IFSOCK:
                *reason = "socket";
                return -EINVAL;
        default:
                *reason = "unsupported entry type";
                return -EINVAL;
        }
        if (ret->path[0] == '\0' && ret->kind != IMG_ENTRY_DIR) {
                *reason = "layer root is not a directory";
                return -EINVAL;
        }
        ret->root_ssh = is_root_ssh(ret->path);
        return 0;
}

bool img_xattr_allowed(const char *name) {
        if (!name)
                return false;
        if (strncmp(name, "user.", 5) == 0 && name[5] != '\0')
                return true;
        return strcmp(name, "trusted.overlay.opaque") == 0;
}

bool img_digest_valid(const char *digest) {
        if (!digest || strncmp(digest, "sha256:", 7) != 0)
                return false;
        const char *h = digest + 7;
        size_t i;
        for (i = 0; h[i]; i++)
                if (!((h[i] >= '0' && h[i] <= '9') || (h[i] >= 'a' && h[i] <= 'f')))
                        return false;
        return i == 64;
}
