/* SPDX-License-Identifier: Apache-2.0 */
/* An overlayfs upper dir as an OCI layer tar (image.h: img_pack_dir):
 * snapshots of a sandbox's writable layer, later build steps.
 *
 * The tree was written by a sandbox: it is read by fd, one level at a
 * time (any depth up to PACK_DEPTH_MAX, an fd per level), never following
 * a symlink, never opening anything but a regular file for its contents
 * (O_NOFOLLOW | O_NONBLOCK, and the inode must be the one stat'ed: a FIFO
 * swapped in cannot block us), never crossing into another mount. Overlay
 * whiteouts (0/0 char devices) become ".wh.<name>" entries and opaque
 * directories (trusted.overlay.opaque=y) a ".wh..wh..opq" entry, as the
 * OCI image spec says; devices and sockets are left out. The tar is
 * deterministic for a given tree (names sorted, only mode, uid, gid,
 * size, mtime and link targets recorded), so an unchanged tree gives the
 * same diff id and the store keeps the layer once. The result goes
 * through warren-unpack like any layer: nothing here is trusted later. */
#include <archive.h>
#include <archive_entry.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "basic/idmap.h"
#include "basic/macro.h"
#include "image/image.h"

#define PACK_DEPTH_MAX 2048
#define PACK_BUF (1u << 20)

struct level {
        int fd;
        char **names;
        size_t n, i;
        size_t path_len; /* length of the path prefix of this level ("a/b/") */
};

struct packer {
        struct archive *a;
        dev_t dev;
        char *path; /* the current entry's path */
        size_t cap;
        uint8_t *buf;
        struct img_pack_stats *st;
        struct wr_err *e;
        uint32_t id_base, id_count; /* owners as inside the user namespace */
        img_pack_opaque_fn opaque;  /* NULL: read the xattr here */
        void *opaque_ud;
};

static int cmp_names(const void *a, const void *b) {
        return strcmp(*(char *const *) a, *(char *const *) b);
}

static void free_names(char **v, size_t n) {
        for (size_t i = 0; i < n; i++)
                free(v[i]);
        free(v);
}

/* The names in dir fd, sorted. */
static int list_dir(int fd, char ***ret, size_t *n_ret) {
        int dup_fd = fcntl(fd, F_DUPFD_CLOEXEC, 3);
        if (dup_fd < 0)
                return -errno;
        DIR *d = fdopendir(dup_fd);
        if (!d) {
                close(dup_fd);
                return -errno;
        }
        rewinddir(d);
        char **v = NULL;
        size_t n = 0, cap = 0;
        struct dirent *de;
        int r = 0;
        while ((de = readdir(d))) {
                if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
                        continue;
                if (n == cap) {
                        size_t nc = cap ? cap * 2 : 16;
                        char **nv = reallocarray(v, nc, sizeof(*v));
                        if (!nv) {
                                r = -ENOMEM;
                                break;
                        }
                        v = nv;
                        cap = nc;
                }
                if (!(v[n] = strdup(de->d_name))) {
                        r = -ENOMEM;
                        break;
                }
                n++;
        }
        closedir(d);
        if (r < 0) {
                free_names(v, n);
                return r;
        }
        if (n)
                qsort(v, n, sizeof(*v), cmp_names);
        *ret = v;
        *n_ret = n;
        return 0;
}

static int set_path(struct packer *p, size_t prefix, const char *name, const char *suffix) {
        size_t need = prefix + strlen(name) + strlen(suffix) + 1;
        if (need > p->cap) {
                size_t nc = MAX(need, p->cap * 2);
                char *np = realloc(p->path, nc);
                if (!np)
                        return -ENOMEM;
                p->path = np;
                p->cap = nc;
        }
        snprintf(p->path + prefix, p->cap - prefix, "%s%s", name, suffix);
        return 0;
}

static int write_header(struct packer *p, const struct stat *st, mode_t type, int64_t size,
                        const char *symlink) {
        struct archive_entry *en = archive_entry_new();
        if (!en)
                return err_set(p->e, -ENOMEM, "pack: out of memory");
        archive_entry_set_pathname(en, p->path);
        archive_entry_set_filetype(en, type);
        archive_entry_set_perm(en, st ? st->st_mode & 07777 : 0);
        archive_entry_set_uid(en, st ? wr_id_inside(st->st_uid, p->id_base, p->id_count) : 0);
        archive_entry_set_gid(en, st ? wr_id_inside(st->st_gid, p->id_base, p->id_count) : 0);
        archive_entry_set_size(en, size);
        archive_entry_set_mtime(en, st ? st->st_mtim.tv_sec : 0, 0);
        if (symlink)
                archive_entry_set_symlink(en, symlink);
        int r = archive_write_header(p->a, en);
        archive_entry_free(en);
        if (r != ARCHIVE_OK)
                return err_set(p->e, -EIO, "pack %s: %s", p->path, archive_error_string(p->a));
        p->st->entries++;
        return 0;
}

static int pack_file(struct packer *p, int dirfd, const char *name, const struct stat *st) {
        int fd = openat(dirfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
        if (fd < 0)
                return err_set(p->e, -errno, "pack %s: open: %m", p->path);
        struct stat st2;
        if (fstat(fd, &st2) < 0 || !S_ISREG(st2.st_mode) || st2.st_ino != st->st_ino ||
            st2.st_dev != st->st_dev) {
                close(fd);
                return err_set(p->e, -EBUSY, "pack %s: changed while being read", p->path);
        }
        int r = write_header(p, &st2, AE_IFREG, st2.st_size, NULL);
        int64_t left = st2.st_size;
        while (r >= 0 && left > 0) {
                ssize_t n = read(fd, p->buf, (size_t) MIN((int64_t) PACK_BUF, left));
                if (n < 0 && errno == EINTR)
                        continue;
                if (n <= 0) {
                        r = err_set(p->e, n < 0 ? -errno : -EIO, "pack %s: %s", p->path,
                                    n < 0 ? strerror(errno) : "shrank while being read");
                        break;
                }
                if (archive_write_data(p->a, p->buf, (size_t) n) != n) {
                        r = err_set(p->e, -EIO, "pack %s: %s", p->path, archive_error_string(p->a));
                        break;
                }
                left -= n;
                p->st->bytes += (uint64_t) n;
        }
        close(fd);
        return r;
}

/* One entry of the level's dir; *down gets a subdir's fd to descend. */
static int pack_entry(struct packer *p, struct level *lv, const char *name, int *down,
                      size_t *down_len) {
        *down = -EBADF;
        struct stat st;
        if (fstatat(lv->fd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
                return errno == ENOENT ? 0 : err_set(p->e, -errno, "pack: stat %s: %m", name);
        int r;
        if (S_ISCHR(st.st_mode) && st.st_rdev == makedev(0, 0)) {
                /* an overlay whiteout: ".wh.<name>" */
                char wh[NAME_MAX + 8];
                snprintf(wh, sizeof(wh), ".wh.%s", name);
                if ((r = set_path(p, lv->path_len, wh, "")) < 0)
                        return err_set(p->e, r, "pack: out of memory");
                p->st->whiteouts++;
                return write_header(p, NULL, AE_IFREG, 0, NULL);
        }
        /* what the runtime writes into every sandbox's writable layer (and
         * writes again at every create): not part of an image */
        if (S_ISREG(st.st_mode) && lv->path_len == 4 && strncmp(p->path, "etc/", 4) == 0 &&
            (!strcmp(name, "hostname") || !strcmp(name, "hosts") || !strcmp(name, "resolv.conf")))
                return 0;
        if ((r = set_path(p, lv->path_len, name, S_ISDIR(st.st_mode) ? "/" : "")) < 0)
                return err_set(p->e, r, "pack: out of memory");
        if (S_ISREG(st.st_mode))
                return pack_file(p, lv->fd, name, &st);
        if (S_ISLNK(st.st_mode)) {
                char target[PATH_MAX];
                ssize_t n = readlinkat(lv->fd, name, target, sizeof(target) - 1);
                if (n < 0)
                        return err_set(p->e, -errno, "pack %s: readlink: %m", p->path);
                target[n] = '\0';
                return write_header(p, &st, AE_IFLNK, 0, target);
        }
        if (S_ISFIFO(st.st_mode))
                return write_header(p, &st, AE_IFIFO, 0, NULL);
        if (!S_ISDIR(st.st_mode)) {
                p->st->skipped++; /* devices, sockets: not part of a layer */
                return 0;
        }
        if (st.st_dev != p->dev)
                return err_set(p->e, -EBUSY, "pack %s: another file system is mounted there",
                               p->path);
        int fd = openat(lv->fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        struct stat st2;
        if (fd < 0 || fstat(fd, &st2) < 0 || st2.st_ino != st.st_ino) {
                if (fd >= 0)
                        close(fd);
                return err_set(p->e, -EBUSY, "pack %s: changed while being read", p->path);
        }
        if ((r = write_header(p, &st2, AE_IFDIR, 0, NULL)) < 0) {
                close(fd);
                return r;
        }
        char v[2];
        size_t base = lv->path_len + strlen(name) + 1; /* "a/b/" */
        *down_len = base;
        int opq = p->opaque ? p->opaque(fd, p->opaque_ud)
                            : fgetxattr(fd, "trusted.overlay.opaque", v, sizeof(v)) == 1 &&
                                      v[0] == 'y';
        if (opq < 0) {
                close(fd);
                return err_set(p->e, opq, "pack %s: is it opaque: %s", p->path, strerror(-opq));
        }
        if (opq) {
                if ((r = set_path(p, base, ".wh..wh..opq", "")) < 0 ||
                    (r = write_header(p, NULL, AE_IFREG, 0, NULL)) < 0) {
                        close(fd);
                        return r < 0 && r != -ENOMEM ? r : err_set(p->e, r, "pack: opaque");
                }
                p->st->opaque++;
        }
        *down = fd;
        return 0;
}

int img_pack_dir(int dirfd, int out_fd, struct img_pack_stats *stats, struct wr_err *e) {
        return img_pack_dir_ids(dirfd, out_fd, 0, 0, stats, e);
}

int img_pack_dir_ids(int dirfd, int out_fd, uint32_t id_base, uint32_t id_count,
                     struct img_pack_stats *stats, struct wr_err *e) {
        return img_pack_dir_opaque(dirfd, out_fd, id_base, id_count, NULL, NULL, stats, e);
}

int img_pack_dir_opaque(int dirfd, int out_fd, uint32_t id_base, uint32_t id_count,
                        img_pack_opaque_fn opaque, void *opaque_ud, struct img_pack_stats *stats,
                        struct wr_err *e) {
        struct img_pack_stats local = {0};
        struct img_pack_stats *st = stats ? stats : &local;
        *st = (struct img_pack_stats){0};
        struct stat top;
        if (fstat(dirfd, &top) < 0 || !S_ISDIR(top.st_mode))
                return err_set(e, -ENOTDIR, "pack: not a directory");
        struct packer p = {.dev = top.st_dev,
                           .st = st,
                           .e = e,
                           .id_base = id_base,
                           .id_count = id_count,
                           .opaque = opaque,
                           .opaque_ud = opaque_ud};
        struct level *levels = calloc(PACK_DEPTH_MAX + 1, sizeof(*levels));
        p.buf = malloc(PACK_BUF);
        p.a = archive_write_new();
        int r = 0;
        if (!levels || !p.buf || !p.a) {
                r = err_set(e, -ENOMEM, "pack: out of memory");
                goto out;
        }
        if (archive_write_set_format_pax_restricted(p.a) != ARCHIVE_OK ||
            archive_write_set_bytes_in_last_block(p.a, 1) != ARCHIVE_OK ||
            archive_write_open_fd(p.a, out_fd) != ARCHIVE_OK) {
                r = err_set(e, -EIO, "pack: %s", archive_error_string(p.a));
                goto out;
        }
        size_t depth = 0;
        levels[0].fd = fcntl(dirfd, F_DUPFD_CLOEXEC, 3);
        if (levels[0].fd < 0) {
                r = err_set(e, -errno, "pack: %m");
                goto out;
        }
        if ((r = list_dir(levels[0].fd, &levels[0].names, &levels[0].n)) < 0) {
                err_set(e, r, "pack: list: %s", strerror(-r));
                goto unwind;
        }
        for (;;) {
                struct level *lv = &levels[depth];
                if (lv->i == lv->n) {
                        close(lv->fd);
                        free_names(lv->names, lv->n);
                        *lv = (struct level){0};
                        if (depth == 0)
                                break;
                        depth--;
                        continue;
                }
                const char *name = lv->names[lv->i++];
                int down;
                size_t down_len = 0;
                if ((r = pack_entry(&p, lv, name, &down, &down_len)) < 0)
                        goto unwind;
                if (down < 0)
                        continue;
                if (depth + 1 > PACK_DEPTH_MAX) {
                        close(down);
                        r = err_set(e, -ELOOP, "pack %s: more than %d levels deep", p.path,
                                    PACK_DEPTH_MAX);
                        goto unwind;
                }
                struct level *nl = &levels[++depth];
                nl->fd = down;
                nl->path_len = down_len;
                if ((r = list_dir(nl->fd, &nl->names, &nl->n)) < 0) {
                        err_set(e, r, "pack %s: list: %s", p.path, strerror(-r));
                        goto unwind;
                }
        }
        if (archive_write_close(p.a) != ARCHIVE_OK) {
                r = err_set(e, -EIO, "pack: %s", archive_error_string(p.a));
                goto out;
        }
        r = 0;
        goto out;
unwind:
        for (size_t i = 0; i <= depth; i++) {
                if (levels[i].fd > 0)
                        close(levels[i].fd);
                free_names(levels[i].names, levels[i].n);
        }
out:
        if (p.a)
                archive_write_free(p.a);
        free(p.buf);
        free(p.path);
        free(levels);
        return r;
}

int img_pack_file(int out_fd, const char *path, const void *data, size_t len, mode_t mode,
                  struct wr_err *e) {
        /* path: absolute, no empty, "." or ".." components */
        if (!path || path[0] != '/' || !path[1] || strstr(path, "//") || strstr(path, "/./") ||
            strstr(path, "/../") || !strcmp(path + strlen(path) - 2, "/.") ||
            !strcmp(path + strlen(path) - 3, "/..") || path[strlen(path) - 1] == '/')
                return err_setx(e, -EINVAL, WR_STATUS_INVALID_ARGUMENT, WR_FAULT_CLIENT,
                                "add_file.path: \"%.200s\" is not an absolute file path "
                                "without '.' or '..' parts",
                                path ? path : "");
        struct archive *a = archive_write_new();
        if (!a)
                return err_set(e, -ENOMEM, "pack: out of memory");
        int r = 0;
        if (archive_write_set_format_pax_restricted(a) != ARCHIVE_OK ||
            archive_write_set_bytes_in_last_block(a, 1) != ARCHIVE_OK ||
            archive_write_open_fd(a, out_fd) != ARCHIVE_OK) {
                r = err_set(e, -EIO, "pack: %s", archive_error_string(a));
                goto out;
        }
        /* the parent dirs (0755, root), then the file */
        char *copy = strdup(path + 1);
        if (!copy) {
                r = err_set(e, -ENOMEM, "pack: out of memory");
                goto out;
        }
        for (char *slash = strchr(copy, '/'); slash && r >= 0; slash = strchr(slash + 1, '/')) {
                *slash = '\0';
                struct archive_entry *en = archive_entry_new();
                archive_entry_set_pathname(en, copy);
                archive_entry_set_filetype(en, AE_IFDIR);
                archive_entry_set_perm(en, 0755);
                if (archive_write_header(a, en) != ARCHIVE_OK)
                        r = err_set(e, -EIO, "pack: %s", archive_error_string(a));
                archive_entry_free(en);
                *slash = '/';
        }
        if (r >= 0) {
                bool dir = S_ISDIR(mode);
                struct archive_entry *en = archive_entry_new();
                archive_entry_set_pathname(en, copy);
                archive_entry_set_filetype(en, dir ? AE_IFDIR : AE_IFREG);
                archive_entry_set_perm(en, mode & 07777 ? mode & 07777 : dir ? 0755 : 0644);
                archive_entry_set_size(en, dir ? 0 : (la_int64_t) len);
                if (archive_write_header(a, en) != ARCHIVE_OK ||
                    (len && archive_write_data(a, data, len) != (la_ssize_t) len))
                        r = err_set(e, -EIO, "pack: %s", archive_error_string(a));
                archive_entry_free(en);
        }
        free(copy);
        if (r >= 0 && archive_write_close(a) != ARCHIVE_OK)
                r = err_set(e, -EIO, "pack: %s", archive_error_string(a));
out:
        archive_write_free(a);
        return r;
}

static bool clean_abs(const char *path) {
        size_t l = path ? strlen(path) : 0;
        return l > 1 && path[0] == '/' && !strstr(path, "//") && !strstr(path, "/./") &&
               !strstr(path, "/../") && strcmp(path + l - 2, "/.") &&
               (l < 3 || strcmp(path + l - 3, "/..")) && path[l - 1] != '/';
}

static int cmp_entry(const void *a, const void *b) {
        const struct img_pack_entry *x = *(const struct img_pack_entry *const *) a;
        const struct img_pack_entry *y = *(const struct img_pack_entry *const *) b;
        int c = strcmp(x->path, y->path);
        /* equal paths: the later one sorts last (stable by address) */
        return c ? c : (x < y ? -1 : x > y);
}

static int cmp_str(const void *a, const void *b) {
        return strcmp(*(char *const *) a, *(char *const *) b);
}

int img_pack_files(int out_fd, const struct img_pack_entry *v, size_t n, struct wr_err *e) {
        if (n > 100000)
                return err_setx(e, -E2BIG, WR_STATUS_INVALID_ARGUMENT, WR_FAULT_CLIENT,
                                "pack: more than 100000 files in one layer");
        for (size_t i = 0; i < n; i++)
                if (!clean_abs(v[i].path))
                        return err_setx(e, -EINVAL, WR_STATUS_INVALID_ARGUMENT, WR_FAULT_CLIENT,
                                        "file path \"%.200s\" is not an absolute path without "
                                        "'.' or '..' parts",
                                        v[i].path ? v[i].path : "");
        const struct img_pack_entry **sorted = calloc(n ? n : 1, sizeof(*sorted));
        char **dirs = NULL;
        size_t n_dirs = 0, cap = 0;
        int r = sorted ? 0 : -ENOMEM;
        for (size_t i = 0; r >= 0 && i < n; i++) {
                sorted[i] = &v[i];
                /* every parent ("a", "a/b" of "/a/b/c") */
                for (const char *s = strchr(v[i].path + 1, '/'); s && r >= 0;
                     s = strchr(s + 1, '/')) {
                        if (n_dirs == cap) {
                                size_t nc = cap ? cap * 2 : 16;
                                char **nd = reallocarray(dirs, nc, sizeof(*dirs));
                                if (!nd) {
                                        r = -ENOMEM;
                                        break;
                                }
                                dirs = nd;
                                cap = nc;
                        }
                        if (!(dirs[n_dirs] = strndup(v[i].path + 1, (size_t) (s - v[i].path - 1))))
                                r = -ENOMEM;
                        else
                                n_dirs++;
                }
        }
        struct archive *a = r >= 0 ? archive_write_new() : NULL;
        if (r >= 0 && !a)
                r = -ENOMEM;
        if (r < 0) {
                r = err_set(e, -ENOMEM, "pack: out of memory");
                goto out;
        }
        qsort(sorted, n, sizeof(*sorted), cmp_entry);
        if (n_dirs)
                qsort(dirs, n_dirs, sizeof(*dirs), cmp_str);
        if (archive_write_set_format_pax_restricted(a) != ARCHIVE_OK ||
            archive_write_set_bytes_in_last_block(a, 1) != ARCHIVE_OK ||
            archive_write_open_fd(a, out_fd) != ARCHIVE_OK) {
                r = err_set(e, -EIO, "pack: %s", archive_error_string(a));
                goto out;
        }
        for (size_t i = 0; r >= 0 && i < n_dirs; i++) {
                if (i && !strcmp(dirs[i], dirs[i - 1]))
                        continue;
                /* a directory that is also an entry is written as that entry */
                char key[PATH_MAX + 2];
                snprintf(key, sizeof(key), "/%s", dirs[i]);
                struct img_pack_entry probe = {.path = key};
                const struct img_pack_entry *pp = &probe, **hit = NULL;
                /* sorted by path: any entry with this path sorts next to the probe */
                size_t lo = 0, hi = n;
                while (lo < hi) {
                        size_t mid = (lo + hi) / 2;
                        if (strcmp(sorted[mid]->path, pp->path) < 0)
                                lo = mid + 1;
                        else
                                hi = mid;
                }
                for (size_t k = lo; k < n && !strcmp(sorted[k]->path, key); k++)
                        if (S_ISDIR(sorted[k]->mode))
                                hit = &sorted[k];
                if (hit)
                        continue;
                struct archive_entry *en = archive_entry_new();
                archive_entry_set_pathname(en, dirs[i]);
                archive_entry_set_filetype(en, AE_IFDIR);
                archive_entry_set_perm(en, 0755);
                if (archive_write_header(a, en) != ARCHIVE_OK)
                        r = err_set(e, -EIO, "pack: %s", archive_error_string(a));
                archive_entry_free(en);
        }
        for (size_t i = 0; r >= 0 && i < n; i++) {
                const struct img_pack_entry *x = sorted[i];
                if (i + 1 < n && !strcmp(x->path, sorted[i + 1]->path))
                        continue; /* a later one with the same path wins */
                bool dir = S_ISDIR(x->mode);
                struct archive_entry *en = archive_entry_new();
                archive_entry_set_pathname(en, x->path + 1);
                archive_entry_set_filetype(en, dir ? AE_IFDIR : AE_IFREG);
                archive_entry_set_perm(en, x->mode & 07777 ? x->mode & 07777 : dir ? 0755 : 0644);
                archive_entry_set_uid(en, x->uid);
                archive_entry_set_gid(en, x->gid);
                archive_entry_set_size(en, dir ? 0 : (la_int64_t) x->len);
                if (archive_write_header(a, en) != ARCHIVE_OK ||
                    (!dir && x->len &&
                     archive_write_data(a, x->data, x->len) != (la_ssize_t) x->len))
                        r = err_set(e, -EIO, "pack: %s", archive_error_string(a));
                archive_entry_free(en);
        }
        if (r >= 0 && archive_write_close(a) != ARCHIVE_OK)
                r = err_set(e, -EIO, "pack: %s", archive_error_string(a));
out:
        if (a)
                archive_write_free(a);
        for (size_t i = 0; i < n_dirs; i++)
                free(dirs[i]);
        free(dirs);
        free(sorted);
        return r;
}
