/* SPDX-License-Identifier: Apache-2.0 */
/* The layer unpacker. Runs inside the warren-unpack helper (confined with
 * seccomp, chrooted into the layer directory), never in warrend.
 *
 * Two libarchive readers are chained: the outer one only decompresses
 * (gzip, zstd or nothing; "raw" format) and the bytes it yields are hashed
 * into the diff id before the inner reader (tar formats only) parses them.
 * Every entry goes through img_entry_plan; files are created relative to
 * the layer root fd, one path component at a time with O_NOFOLLOW, so a
 * symlink in the layer (or a path through one) can never redirect a write. */
#include "image/image-internal.h"

#include <archive.h>
#include <archive_entry.h>
#include <errno.h>
#include <fcntl.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>
#include <unistd.h>

struct dir_time {
        char *path;
        struct timespec ts[2];
};

struct unpacker {
        int root_fd;
        bool apply_owner;
        struct archive *outer;
        struct archive *tar;
        EVP_MD_CTX *sha;
        uint64_t tar_bytes;
        char cache_path[4096];
        int cache_fd;
        struct dir_time *dirs;
        size_t n_dirs, cap_dirs;
        char entry_name[256]; /* printable, for messages */
        struct wr_err *e;
};

static void printable(const char *in, char *out, size_t outsz) {
        size_t o = 0;
        if (!in)
                in = "(unreadable name)";
        for (; *in && o + 4 < outsz; in++)
                out[o++] = (*in >= 0x20 && *in < 0x7f) ? *in : '?';
        if (*in && o + 4 <= outsz) {
                memcpy(out + o, "...", 3);
                o += 3;
        }
        out[o] = '\0';
}

static int entry_fail(struct unpacker *u, int code, const char *what) {
        return err_setx(u->e, code, WR_STATUS_INVALID_ARGUMENT, WR_FAULT_CLIENT,
                        "tar entry \"%s\": %s", u->entry_name, what);
}

static int entry_fail_errno(struct unpacker *u, int code, const char *what) {
        enum wr_status status = code == -ENOSPC || code == -EDQUOT ? WR_STATUS_RESOURCE_EXHAUSTED
                                                                   : WR_STATUS_INTERNAL;
        return err_setx(u->e, code, status, WR_FAULT_SERVICE, "tar entry \"%s\": %s: %s",
                        u->entry_name, what, strerror(-code));
}

static void cache_drop(struct unpacker *u) {
        closep(&u->cache_fd);
        u->cache_path[0] = '\0';
}

/* Open directory `dir` (cleaned, relative, "" = root) below the root one
 * component at a time, never following a symlink; with create, missing
 * components are made (0755, root-owned). Returns an owned fd. */
static int walk(struct unpacker *u, const char *dir, bool create, int *ret_fd) {
        int cur = fcntl(u->root_fd, F_DUPFD_CLOEXEC, 3);
        if (cur < 0)
                return entry_fail_errno(u, -errno, "dup root");
        char comp[256];
        const char *p = dir;
        while (*p) {
                const char *end = strchrnul(p, '/');
                size_t len = (size_t) (end - p);
                if (len >= sizeof(comp)) {
                        close(cur);
                        return entry_fail(u, -EINVAL, "component too long");
                }
                memcpy(comp, p, len);
                comp[len] = '\0';
                int fd = openat(cur, comp, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                if (fd < 0 && errno == ENOENT && create) {
                        if (mkdirat(cur, comp, 0755) < 0 && errno != EEXIST) {
                                int r = -errno;
                                close(cur);
                                return entry_fail_errno(u, r, "create parent directory");
                        }
                        fd = openat(cur, comp, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                }
                if (fd < 0) {
                        int r = -errno;
                        close(cur);
                        if (r == -ELOOP || r == -ENOTDIR) {
                                char msg[400];
                                snprintf(msg, sizeof(msg),
                                         "path passes through a symlink or non-directory "
                                         "(\"%.255s\"); refusing to write through it",
                                         comp);
                                return entry_fail(u, -EINVAL, msg);
                        }
                        if (r == -ENOENT)
                                return entry_fail(u, -EINVAL, "parent directory missing");
                        return entry_fail_errno(u, r, "open parent directory");
                }
                close(cur);
                cur = fd;
                p = *end ? end + 1 : end;
        }
        *ret_fd = cur;
        return 0;
}

/* The parent directory fd of path (borrowed: owned by the cache) and the
 * final component. path must not be "". */
static int open_parent(struct unpacker *u, const char *path, int *ret_fd, const char **ret_name) {
        const char *slash = strrchr(path, '/');
        char dir[4096] = "";
        if (slash) {
                size_t len = (size_t) (slash - path);
                memcpy(dir, path, len);
                dir[len] = '\0';
                *ret_name = slash + 1;
        } else
                *ret_name = path;
        if (dir[0] == '\0') {
                *ret_fd = u->root_fd;
                return 0;
        }
        if (u->cache_fd >= 0 && strcmp(dir, u->cache_path) == 0) {
                *ret_fd = u->cache_fd;
                return 0;
        }
        int fd = -EBADF;
        int r = walk(u, dir, true, &fd);
        if (r < 0)
                return r;
        cache_drop(u);
        u->cache_fd = fd;
        strcpy(u->cache_path, dir);
        *ret_fd = fd;
        return 0;
}

/* Make room for a new entry at pfd/name. Returns 1 when an existing
 * directory may be kept (keep_dir and it is one), 0 when the name is free. */
static int clear_target(struct unpacker *u, int pfd, const char *name, bool keep_dir) {
        struct stat st;
        if (fstatat(pfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
                if (errno == ENOENT)
                        return 0;
                return entry_fail_errno(u, -errno, "stat");
        }
        if (S_ISDIR(st.st_mode)) {
                if (keep_dir)
                        return 1;
                cache_drop(u);
                int r = rm_rf_at(pfd, name);
                if (r < 0)
                        return entry_fail_errno(u, r, "replace directory");
                return 0;
        }
        if (unlinkat(pfd, name, 0) < 0 && errno != ENOENT)
                return entry_fail_errno(u, -errno, "replace");
        return 0;
}

static int set_owner_fd(struct unpacker *u, int fd, struct archive_entry *ent) {
        if (!u->apply_owner)
                return 0;
        int64_t uid = archive_entry_uid(ent), gid = archive_entry_gid(ent);
        if (uid < 0 || uid >= UINT32_MAX || gid < 0 || gid >= UINT32_MAX)
                return entry_fail(u, -EINVAL, "uid/gid out of range");
        if (fchown(fd, (uid_t) uid, (gid_t) gid) < 0)
                return entry_fail_errno(u, -errno, "chown");
        return 0;
}

static int set_owner_at(struct unpacker *u, int pfd, const char *name, struct archive_entry *ent) {
        if (!u->apply_owner)
                return 0;
        int64_t uid = archive_entry_uid(ent), gid = archive_entry_gid(ent);
        if (uid < 0 || uid >= UINT32_MAX || gid < 0 || gid >= UINT32_MAX)
                return entry_fail(u, -EINVAL, "uid/gid out of range");
        if (fchownat(pfd, name, (uid_t) uid, (gid_t) gid, AT_SYMLINK_NOFOLLOW) < 0)
                return entry_fail_errno(u, -errno, "chown");
        return 0;
}

static void entry_times(struct archive_entry *ent, struct timespec ts[2]) {
        ts[0].tv_sec = archive_entry_atime_is_set(ent) ? archive_entry_atime(ent)
                                                       : archive_entry_mtime(ent);
        ts[0].tv_nsec = archive_entry_atime_is_set(ent) ? archive_entry_atime_nsec(ent)
                                                        : archive_entry_mtime_nsec(ent);
        ts[1].tv_sec = archive_entry_mtime(ent);
        ts[1].tv_nsec = archive_entry_mtime_nsec(ent);
        for (int i = 0; i < 2; i++)
                if (ts[i].tv_nsec < 0 || ts[i].tv_nsec >= 1000000000)
                        ts[i].tv_nsec = 0;
}

static int set_xattrs(struct unpacker *u, int fd, struct archive_entry *ent) {
        if (archive_entry_xattr_reset(ent) <= 0)
                return 0;
        const char *name;
        const void *value;
        size_t size;
        while (archive_entry_xattr_next(ent, &name, &value, &size) == ARCHIVE_OK) {
                if (!img_xattr_allowed(name))
                        continue; /* dropped: security.*, system.*, other trusted.* */
                if (size > 65536)
                        return entry_fail(u, -EINVAL, "xattr value too large");
                if (fsetxattr(fd, name, value, size, 0) < 0)
                        return entry_fail_errno(u, -errno, "set xattr");
        }
        return 0;
}

static int write_file(struct unpacker *u, int fd, struct archive_entry *ent) {
        const void *buf;
        size_t size;
        la_int64_t off;
        for (;;) {
                int r = archive_read_data_block(u->tar, &buf, &size, &off);
                if (r == ARCHIVE_EOF)
                        break;
                if (r < ARCHIVE_WARN)
                        return entry_fail(u, -EINVAL,
                                          archive_error_string(u->tar)
                                                  ? archive_error_string(u->tar)
                                                  : "truncated data");
                if (off < 0)
                        return entry_fail(u, -EINVAL, "bad data offset");
                const char *b = buf;
                while (size > 0) {
                        ssize_t n = pwrite(fd, b, size, off);
                        if (n < 0) {
                                if (errno == EINTR)
                                        continue;
                                return entry_fail_errno(u, -errno, "write");
                        }
                        b += n;
                        off += n;
                        size -= (size_t) n;
                }
        }
        if (archive_entry_size_is_set(ent) && archive_entry_size(ent) >= 0 &&
            ftruncate(fd, archive_entry_size(ent)) < 0)
                return entry_fail_errno(u, -errno, "truncate");
        return 0;
}

static int remember_dir(struct unpacker *u, const char *path, struct archive_entry *ent) {
        if (u->n_dirs == u->cap_dirs) {
                size_t cap = u->cap_dirs ? u->cap_dirs * 2 : 64;
                struct dir_time *d = realloc(u->dirs, cap * sizeof(*d));
                if (!d)
                        return entry_fail_errno(u, -ENOMEM, "remember directory");
                u->dirs = d;
                u->cap_dirs = cap;
        }
        char *p = strdup(path);
        if (!p)
                return entry_fail_errno(u, -ENOMEM, "remember directory");
        u->dirs[u->n_dirs].path = p;
        entry_times(ent, u->dirs[u->n_dirs].ts);
        u->n_dirs++;
        return 0;
}

static int do_entry(struct unpacker *u, struct archive_entry *ent, const struct img_entry_plan *pl,
                    uint64_t *content_bytes) {
        int pfd = -EBADF, r;
        const char *name = NULL;
        struct timespec ts[2];
        entry_times(ent, ts);

        if (pl->kind == IMG_ENTRY_SKIP)
                return 0;
        if (pl->path[0] == '\0') {
                /* the layer root itself: a directory entry ("./") or opacity */
                if (pl->kind == IMG_ENTRY_OPAQUE) {
                        if (fsetxattr(u->root_fd, "trusted.overlay.opaque", "y", 1, 0) < 0)
                                return entry_fail_errno(u, -errno, "mark opaque");
                        return 0;
                }
                if ((r = set_owner_fd(u, u->root_fd, ent)) < 0)
                        return r;
                if (fchmod(u->root_fd, pl->mode) < 0)
                        return entry_fail_errno(u, -errno, "chmod");
                if ((r = set_xattrs(u, u->root_fd, ent)) < 0)
                        return r;
                return remember_dir(u, "", ent);
        }

        if (pl->kind == IMG_ENTRY_OPAQUE) {
                int dfd = -EBADF;
                if ((r = walk(u, pl->path, true, &dfd)) < 0)
                        return r;
                r = fsetxattr(dfd, "trusted.overlay.opaque", "y", 1, 0) < 0 ? -errno : 0;
                close(dfd);
                return r < 0 ? entry_fail_errno(u, r, "mark opaque") : 0;
        }

        if ((r = open_parent(u, pl->path, &pfd, &name)) < 0)
                return r;
        r = clear_target(u, pfd, name, pl->kind == IMG_ENTRY_DIR);
        if (r < 0)
                return r;
        bool existing_dir = r == 1;
        if (pl->kind != IMG_ENTRY_DIR && (r = open_parent(u, pl->path, &pfd, &name)) < 0)
                return r; /* clear_target may have dropped the cached parent */

        switch (pl->kind) {
        case IMG_ENTRY_FILE: {
                int fd = openat(pfd, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
                                0600);
                if (fd < 0)
                        return entry_fail_errno(u, -errno, "create file");
                r = write_file(u, fd, ent);
                if (r >= 0)
                        r = set_owner_fd(u, fd, ent);
                if (r >= 0 && fchmod(fd, pl->mode) < 0)
                        r = entry_fail_errno(u, -errno, "chmod");
                if (r >= 0)
                        r = set_xattrs(u, fd, ent);
                if (r >= 0 && futimens(fd, ts) < 0)
                        r = entry_fail_errno(u, -errno, "set times");
                close(fd);
                if (r >= 0 && archive_entry_size(ent) > 0)
                        *content_bytes += (uint64_t) archive_entry_size(ent);
                return r;
        }
        case IMG_ENTRY_DIR: {
                if (!existing_dir && mkdirat(pfd, name, 0700) < 0)
                        return entry_fail_errno(u, -errno, "mkdir");
                int fd = openat(pfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                if (fd < 0)
                        return entry_fail_errno(u, -errno, "open directory");
                r = set_owner_fd(u, fd, ent);
                if (r >= 0 && fchmod(fd, pl->mode) < 0)
                        r = entry_fail_errno(u, -errno, "chmod");
                if (r >= 0)
                        r = set_xattrs(u, fd, ent);
                close(fd);
                if (r >= 0)
                        r = remember_dir(u, pl->path, ent);
                return r;
        }
        case IMG_ENTRY_SYMLINK: {
                const char *target = archive_entry_symlink(ent);
                if (!target || !*target)
                        return entry_fail(u, -EINVAL, "symlink without a target");
                if (strlen(target) >= 4096)
                        return entry_fail(u, -EINVAL, "symlink target too long");
                if (symlinkat(target, pfd, name) < 0)
                        return entry_fail_errno(u, -errno, "symlink");
                if ((r = set_owner_at(u, pfd, name, ent)) < 0)
                        return r;
                if (utimensat(pfd, name, ts, AT_SYMLINK_NOFOLLOW) < 0)
                        return entry_fail_errno(u, -errno, "set times");
                return 0;
        }
        case IMG_ENTRY_HARDLINK: {
                const char *tslash = strrchr(pl->link, '/');
                char tdir[4096] = "";
                const char *tname = pl->link;
                if (tslash) {
                        memcpy(tdir, pl->link, (size_t) (tslash - pl->link));
                        tdir[tslash - pl->link] = '\0';
                        tname = tslash + 1;
                }
                int tfd = -EBADF;
                r = walk(u, tdir, false, &tfd);
                if (r < 0) {
                        err_clear(u->e);
                        return entry_fail(u, -EINVAL,
                                          "hardlink target does not exist in the layer");
                }
                struct stat st;
                if (fstatat(tfd, tname, &st, AT_SYMLINK_NOFOLLOW) < 0) {
                        close(tfd);
                        return entry_fail(u, -EINVAL,
                                          "hardlink target does not exist in the layer");
                }
                if (S_ISDIR(st.st_mode) || S_ISCHR(st.st_mode) || S_ISBLK(st.st_mode)) {
                        close(tfd);
                        return entry_fail(u, -EINVAL, "hardlink to a directory or device");
                }
                r = linkat(tfd, tname, pfd, name, 0) < 0 ? -errno : 0;
                close(tfd);
                if (r < 0)
                        return entry_fail_errno(u, r, "link");
                return 0;
        }
        case IMG_ENTRY_FIFO:
                if (mknodat(pfd, name, S_IFIFO | 0600, 0) < 0)
                        return entry_fail_errno(u, -errno, "mkfifo");
                if ((r = set_owner_at(u, pfd, name, ent)) < 0)
                        return r;
                /* the fifo was just made by this single-threaded process in
                 * its private tree: the name cannot have changed */
                if (fchmodat(pfd, name, pl->mode, 0) < 0)
                        return entry_fail_errno(u, -errno, "chmod");
                if (utimensat(pfd, name, ts, AT_SYMLINK_NOFOLLOW) < 0)
                        return entry_fail_errno(u, -errno, "set times");
                return 0;
        case IMG_ENTRY_WHITEOUT:
                if (mknodat(pfd, name, S_IFCHR | 0, makedev(0, 0)) < 0)
                        return entry_fail_errno(u, -errno, "create whiteout");
                return 0;
        default:
                return entry_fail(u, -EINVAL, "unsupported entry");
        }
}

static la_ssize_t inner_read(struct archive *a, void *ud, const void **buf) {
        struct unpacker *u = ud;
        size_t size;
        la_int64_t off;
        int r = archive_read_data_block(u->outer, buf, &size, &off);
        if (r == ARCHIVE_EOF)
                return 0;
        if (r < ARCHIVE_WARN) {
                archive_set_error(a, EIO, "decompress: %s",
                                  archive_error_string(u->outer) ? archive_error_string(u->outer)
                                                                 : "read error");
                return -1;
        }
        if (size > 0 && EVP_DigestUpdate(u->sha, *buf, size) != 1) {
                archive_set_error(a, EIO, "sha256 failed");
                return -1;
        }
        u->tar_bytes += size;
        return (la_ssize_t) size;
}

static int finish_dirs(struct unpacker *u) {
        for (size_t i = 0; i < u->n_dirs; i++) {
                int fd = -EBADF;
                printable(u->dirs[i].path, u->entry_name, sizeof(u->entry_name));
                int r = walk(u, u->dirs[i].path, false, &fd);
                if (r < 0) {
                        /* removed by a later entry: nothing to stamp */
                        err_clear(u->e);
                        continue;
                }
                r = futimens(fd, u->dirs[i].ts) < 0 ? -errno : 0;
                close(fd);
                if (r < 0)
                        return entry_fail_errno(u, r, "set directory times");
        }
        return 0;
}

int img_unpack_stream(int in_fd, int root_fd, bool apply_owner, struct img_unpack_stats *stats,
                      struct wr_err *e) {
        struct unpacker u = {
                .root_fd = root_fd,
                .apply_owner = apply_owner,
                .cache_fd = -EBADF,
                .e = e,
        };
        uint64_t content = 0, entries = 0;
        int r = 0;
        memset(stats, 0, sizeof(*stats));

        u.sha = EVP_MD_CTX_new();
        u.outer = archive_read_new();
        u.tar = archive_read_new();
        if (!u.sha || !u.outer || !u.tar) {
                r = err_set(e, -ENOMEM, "unpack: out of memory");
                goto out;
        }
        if (EVP_DigestInit_ex(u.sha, EVP_sha256(), NULL) != 1) {
                r = err_set(e, -EIO, "unpack: sha256 init failed");
                goto out;
        }
        /* Outer: decompression only. A filter that would need an external
         * program (ARCHIVE_WARN) is not used: the helper may not exec. */
        if (archive_read_support_filter_gzip(u.outer) != ARCHIVE_OK ||
            archive_read_support_filter_zstd(u.outer) != ARCHIVE_OK ||
            archive_read_support_format_raw(u.outer) != ARCHIVE_OK) {
                r = err_set(e, -EIO, "unpack: libarchive lacks built-in gzip/zstd: %s",
                            archive_error_string(u.outer));
                goto out;
        }
        if (archive_read_support_format_tar(u.tar) != ARCHIVE_OK) {
                r = err_set(e, -EIO, "unpack: libarchive lacks tar support");
                goto out;
        }
        if (archive_read_open_fd(u.outer, in_fd, 128 * 1024) != ARCHIVE_OK) {
                r = err_setx(e, -EINVAL, WR_STATUS_INVALID_ARGUMENT, WR_FAULT_CLIENT,
                             "read layer: %s", archive_error_string(u.outer));
                goto out;
        }
        struct archive_entry *raw;
        int ar = archive_read_next_header(u.outer, &raw);
        if (ar == ARCHIVE_EOF) {
                r = err_setx(e, -EINVAL, WR_STATUS_INVALID_ARGUMENT, WR_FAULT_CLIENT,
                             "read layer: empty stream");
                goto out;
        }
        if (ar < ARCHIVE_WARN) {
                r = err_setx(e, -EINVAL, WR_STATUS_INVALID_ARGUMENT, WR_FAULT_CLIENT,
                             "read layer: %s", archive_error_string(u.outer));
                goto out;
        }
        if (archive_read_open(u.tar, &u, NULL, inner_read, NULL) != ARCHIVE_OK) {
                r = err_setx(e, -EINVAL, WR_STATUS_INVALID_ARGUMENT, WR_FAULT_CLIENT,
                             "not a tar archive: %s", archive_error_string(u.tar));
                goto out;
        }

        for (;;) {
                struct archive_entry *ent;
                ar = archive_read_next_header(u.tar, &ent);
                if (ar == ARCHIVE_EOF)
                        break;
                if (ar < ARCHIVE_WARN) {
                        r = err_setx(e, -EINVAL, WR_STATUS_INVALID_ARGUMENT, WR_FAULT_CLIENT,
                                     "read tar%s%s%s: %s", entries ? " after entry \"" : "",
                                     entries ? u.entry_name : "", entries ? "\"" : "",
                                     archive_error_string(u.tar) ? archive_error_string(u.tar)
                                                                 : "malformed archive");
                        goto out;
                }
                entries++;
                const char *path = archive_entry_pathname(ent);
                printable(path, u.entry_name, sizeof(u.entry_name));
                if (!path) {
                        r = entry_fail(&u, -EINVAL, "unreadable path");
                        goto out;
                }
                struct img_entry_plan plan;
                const char *reason = NULL;
                r = img_entry_plan(path, archive_entry_filetype(ent), archive_entry_perm(ent),
                                   archive_entry_hardlink(ent), &plan, &reason);
                if (r < 0) {
                        r = entry_fail(&u, r, reason ? reason : "refused");
                        goto out;
                }
                if (plan.root_ssh) {
                        r = err_setx(e, -EPERM, WR_STATUS_FAILED_PRECONDITION, WR_FAULT_CLIENT,
                                     "tar entry \"%s\": images containing /root/.ssh are "
                                     "refused",
                                     u.entry_name);
                        goto out;
                }
                r = do_entry(&u, ent, &plan, &content);
                if (r < 0)
                        goto out;
        }
        /* Hash what follows the end-of-archive marker too (padding), so the
         * digest covers the whole stream like sha256sum would. */
        for (;;) {
                const void *buf;
                la_ssize_t n = inner_read(u.tar, &u, &buf);
                if (n == 0)
                        break;
                if (n < 0) {
                        r = err_setx(e, -EINVAL, WR_STATUS_INVALID_ARGUMENT, WR_FAULT_CLIENT,
                                     "read layer: %s", archive_error_string(u.tar));
                        goto out;
                }
        }
        if ((r = finish_dirs(&u)) < 0)
                goto out;

        unsigned char md[32];
        unsigned mdlen = 0;
        if (EVP_DigestFinal_ex(u.sha, md, &mdlen) != 1 || mdlen != 32) {
                r = err_set(e, -EIO, "unpack: sha256 failed");
                goto out;
        }
        strcpy(stats->diff_id, "sha256:");
        for (int i = 0; i < 32; i++)
                snprintf(stats->diff_id + 7 + 2 * i, 3, "%02x", md[i]);
        stats->tar_bytes = u.tar_bytes;
        stats->content_bytes = content;
        stats->entries = entries;
        r = 0;
out:
        cache_drop(&u);
        for (size_t i = 0; i < u.n_dirs; i++)
                free(u.dirs[i].path);
        free(u.dirs);
        if (u.tar)
                archive_read_free(u.tar);
        if (u.outer)
                archive_read_free(u.outer);
        EVP_MD_CTX_free(u.sha);
        return r;
}
