/* SPDX-License-Identifier: Apache-2.0 */
/* The volumes and their mounts: a sparse ext4 image per volume,
 * loop-mounted on first use, detached when warrend stops. The store holds
 * one row per volume; the disk holds the image. Create makes the image in
 * a temp dir, renames it into place, then inserts the row; delete removes
 * the row first. Recovery removes a dir without a row and drops a row
 * without an image, so the two always agree after a start. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "basic/ext4img.h"
#include "basic/log.h"
#include "priv/client.h"
#include "store/store.h"
#include "volume/volume.h"

#define streq(a, b) (strcmp((a), (b)) == 0)

static inline void closedirp(DIR **d) {
        if (*d)
                closedir(*d);
}

#define INVALID(e, ...)                                                                            \
        err_setx(e, -EINVAL, WR_STATUS_INVALID_ARGUMENT, WR_FAULT_CLIENT, __VA_ARGS__)

struct vol {
        char env[VOL_NAME_MAX + 1];
        char name[VOL_NAME_MAX + 1];
        int data_fd;  /* O_PATH | O_DIRECTORY: mnt/data (-EBADF with --privsep) */
        int stage_fd; /* O_DIRECTORY: mnt/.staging (-EBADF with --privsep) */
        int root_fd;  /* --privsep: O_PATH, the mount's root (statfs); else -EBADF */
        struct vol *next;
};

struct vol_manager {
        char *dir; /* state_dir/volumes */
        struct store *store;
        struct vol *mounted;
        /* --privsep: the loop devices and mounts by warren-priv
         * (VOLUME_MOUNT, VOLUME_UNMOUNT); NULL: here */
        struct priv_client *priv;
};

bool vol_name_valid(const char *s) {
        size_t n = strlen(s);
        if (n == 0 || n > VOL_NAME_MAX)
                return false;
        for (size_t i = 0; i < n; i++) {
                char c = s[i];
                bool alnum =
                        (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
                if (!alnum && (i == 0 || (c != '.' && c != '_' && c != '-')))
                        return false;
        }
        return true;
}

/* Environment ids come from the store; the same rule keeps them one path
 * component. */
static int env_check(const char *env, struct wr_err *e) {
        return vol_name_valid(env) ? 0 : INVALID(e, "environment: \"%.80s\" is not valid", env);
}

static int name_check(const char *name, struct wr_err *e) {
        if (vol_name_valid(name))
                return 0;
        return INVALID(e,
                       "name: \"%.80s\" is not a valid volume name; use 1-63 letters, digits, "
                       "'.', '_' or '-', starting with a letter or digit",
                       name);
}

static int vol_dir(const struct vol_manager *m, const char *env, const char *name, const char *leaf,
                   char **ret) {
        int r = leaf ? asprintf(ret, "%s/%s/%s/%s", m->dir, env, name, leaf)
                     : asprintf(ret, "%s/%s/%s", m->dir, env, name);
        return r < 0 ? -ENOMEM : 0;
}

/* Detach whatever is mounted at path (every layer; lazily). */
static void unmount_all(const char *path) {
        for (int i = 0; i < 16 && umount2(path, MNT_DETACH | UMOUNT_NOFOLLOW) == 0; i++)
                ;
}

/* Detach whatever is mounted at dir/mnt: by warren-priv with --privsep
 * (m->priv), else here. Best effort. */
static void unmount_dir(const struct vol_manager *m, const char *dir) {
        if (m && m->priv) {
                struct wr_err e = {0};
                if (priv_volume_unmount(m->priv, dir, &e) < 0)
                        log_debug("volumes: unmount %s: %s", dir, e.msg);
                return;
        }
        _cleanup_free_ char *mnt = NULL;
        if (asprintf(&mnt, "%s/mnt", dir) >= 0)
                unmount_all(mnt);
}

/* Remove every entry of the directory dfd (not following symlinks,
 * staying on its filesystem). Best effort. */
static void empty_dir(int dfd) {
        int dup_fd = openat(dfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (dup_fd < 0)
                return;
        DIR *d = fdopendir(dup_fd);
        if (!d) {
                close(dup_fd);
                return;
        }
        struct dirent *de;
        while ((de = readdir(d))) {
                if (streq(de->d_name, ".") || streq(de->d_name, ".."))
                        continue;
                if (unlinkat(dfd, de->d_name, 0) == 0 || errno != EISDIR)
                        continue;
                int sub = openat(dfd, de->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                if (sub >= 0) {
                        empty_dir(sub);
                        close(sub);
                }
                unlinkat(dfd, de->d_name, AT_REMOVEDIR);
        }
        closedir(d);
}

/* Remove a volume's dir (image, mountpoint) from disk. Best effort. m:
 * its manager (NULL: a temp dir of a create, never mounted). */
static void dir_remove(const struct vol_manager *m, const char *dir) {
        _cleanup_free_ char *mnt = NULL, *img = NULL;
        if (asprintf(&mnt, "%s/mnt", dir) < 0 || asprintf(&img, "%s/disk.img", dir) < 0)
                return;
        if (m)
                unmount_dir(m, dir);
        rmdir(mnt);
        unlink(img);
        rmdir(dir);
}

/* Mount the volume's image at dir/mnt and open data/ and .staging/
 * (made when missing; .staging emptied: a PutFile cut short leaves its
 * temp file there). */
/* mount_volume by warren-priv (--privsep): it mounts, makes the dirs and
 * empties .staging. warrend keeps only the mount root's O_PATH fd (for
 * statfs): data/ and .staging/ are root's, and the files API goes through
 * warren-priv (VOLFILE_*: the *_in calls below). */
static int mount_volume_priv(struct priv_client *priv, const char *dir, int *ret_root,
                             struct wr_err *e) {
        return priv_volume_mount(priv, dir, 0, ret_root, e);
}

static int mount_volume(const char *dir, int *ret_data, int *ret_stage, struct wr_err *e) {
        _cleanup_free_ char *mnt = NULL, *img = NULL;
        if (asprintf(&mnt, "%s/mnt", dir) < 0 || asprintf(&img, "%s/disk.img", dir) < 0)
                return -ENOMEM;
        _cleanup_close_ int imgfd = open(img, O_RDWR | O_CLOEXEC | O_NOFOLLOW);
        if (imgfd < 0)
                return err_set(e, -errno, "open %s: %m", img);
        struct stat st;
        if (fstat(imgfd, &st) < 0)
                return err_set(e, -errno, "stat %s: %m", img);
        char dev[32];
        _cleanup_close_ int loop = ext4img_loop_find(&st, dev);
        if (loop < 0 && (loop = ext4img_loop_attach(imgfd, img, dev, e)) < 0)
                return loop;
        unmount_all(mnt);
        if (mkdir(mnt, 0700) < 0 && errno != EEXIST)
                return err_set(e, -errno, "mkdir %s: %m", mnt);
        if (mount(dev, mnt, "ext4", MS_NOSUID | MS_NODEV | MS_NOATIME, NULL) < 0)
                return err_set(e, -errno, "mount %s on %s: %m", dev, mnt);
        _cleanup_close_ int root = open(mnt, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (root < 0)
                return err_set(e, -errno, "open %s: %m", mnt);
        if ((mkdirat(root, "data", 0755) < 0 && errno != EEXIST) ||
            (mkdirat(root, ".staging", 0700) < 0 && errno != EEXIST))
                return err_set(e, -errno, "make the volume's dirs in %s: %m", mnt);
        _cleanup_close_ int data =
                openat(root, "data", O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        _cleanup_close_ int stage =
                openat(root, ".staging", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (data < 0 || stage < 0)
                return err_set(e, -errno, "open the volume's dirs in %s: %m", mnt);
        empty_dir(stage);
        *ret_data = TAKE_FD(data);
        *ret_stage = TAKE_FD(stage);
        return 0;
}

static struct vol *find(struct vol_manager *m, const char *env, const char *name) {
        for (struct vol *v = m->mounted; v; v = v->next)
                if (streq(v->env, env) && streq(v->name, name))
                        return v;
        return NULL;
}

static void vol_free(struct vol *v) {
        safe_close(v->data_fd);
        safe_close(v->stage_fd);
        safe_close(v->root_fd);
        free(v);
}

/* The mounted volume env/name (mounted now when it exists but is not
 * yet). -ENOENT (NOT_FOUND) when the store has no such volume. */
static int get_mounted(struct vol_manager *m, const char *env, const char *name, struct vol **ret,
                       struct wr_err *e) {
        int r;
        if ((r = env_check(env, e)) < 0 || (r = name_check(name, e)) < 0)
                return r;
        struct vol *v = find(m, env, name);
        if (v) {
                *ret = v;
                return 0;
        }
        struct store_volume row = {0};
        r = store_volume_load(m->store, env, name, &row, NULL);
        store_volume_clear(&row);
        if (r == -ENOENT)
                return err_setx(e, -ENOENT, WR_STATUS_NOT_FOUND, WR_FAULT_CLIENT,
                                "volume %s not found; create it with `warren volume create %s`",
                                name, name);
        if (r < 0)
                return err_set(e, r, "load volume %s", name);
        _cleanup_free_ char *dir = NULL;
        if ((r = vol_dir(m, env, name, NULL, &dir)) < 0)
                return r;
        v = calloc(1, sizeof(*v));
        if (!v)
                return -ENOMEM;
        v->data_fd = v->stage_fd = v->root_fd = -EBADF;
        snprintf(v->env, sizeof(v->env), "%s", env);
        snprintf(v->name, sizeof(v->name), "%s", name);
        if ((r = m->priv ? mount_volume_priv(m->priv, dir, &v->root_fd, e)
                         : mount_volume(dir, &v->data_fd, &v->stage_fd, e)) < 0) {
                vol_free(v);
                return err_prefix(e, r, "mount volume %s", name);
        }
        v->next = m->mounted;
        m->mounted = v;
        *ret = v;
        return 0;
}

static int info_fill(struct vol_manager *m, const char *env, const char *name, struct vol_info *ret,
                     struct wr_err *e) {
        struct vol *v;
        int r = get_mounted(m, env, name, &v, e);
        if (r < 0)
                return r;
        struct store_volume row = {0};
        if ((r = store_volume_load(m->store, env, name, &row, e)) < 0)
                return r;
        *ret = (struct vol_info){.created_ns = row.created_ns};
        store_volume_clear(&row);
        snprintf(ret->name, sizeof(ret->name), "%s", name);
        struct statvfs sv;
        if (fstatvfs(v->root_fd >= 0 ? v->root_fd : v->stage_fd, &sv) == 0) {
                ret->max_bytes = (uint64_t) sv.f_blocks * sv.f_frsize;
                ret->used_bytes = (uint64_t) (sv.f_blocks - sv.f_bfree) * sv.f_frsize;
                ret->max_inodes = sv.f_files;
                ret->used_inodes = sv.f_files - sv.f_ffree;
        }
        return 0;
}

struct vol_new {
        char env[VOL_NAME_MAX + 1];
        char name[VOL_NAME_MAX + 1];
        uint64_t bytes, inodes;
        char *tmp; /* envdir/.new-<name>-<random>: the image is made here */
        bool built;
};

void vol_new_free(struct vol_new *n) {
        if (!n)
                return;
        if (n->tmp)
                dir_remove(NULL, n->tmp);
        free(n->tmp);
        free(n);
}

static void vol_new_freep(struct vol_new **n) {
        vol_new_free(*n);
}

int vol_create_begin(struct vol_manager *m, const char *env, const char *name,
                     const struct vol_limits *limits, struct vol_info *ret,
                     struct vol_new **ret_new, struct wr_err *e) {
        int r;
        *ret_new = NULL;
        if ((r = env_check(env, e)) < 0 || (r = name_check(name, e)) < 0)
                return r;
        struct store_volume row = {0};
        r = store_volume_load(m->store, env, name, &row, NULL);
        store_volume_clear(&row);
        if (r == 0) {
                r = info_fill(m, env, name, ret, e);
                return r < 0 ? r : 1;
        }
        if (r != -ENOENT)
                return err_set(e, r, "load volume %s", name);

        uint64_t bytes = limits && limits->max_bytes ? limits->max_bytes : VOL_DEFAULT_BYTES;
        if (bytes < VOL_MIN_BYTES || bytes > VOL_MAX_BYTES)
                return INVALID(e,
                               "max_bytes: %llu is out of range; give %llu (8 MiB) to %llu "
                               "(16 TiB), or 0 for the default (1 GiB)",
                               (unsigned long long) bytes, VOL_MIN_BYTES, VOL_MAX_BYTES);
        uint64_t inodes =
                limits && limits->max_inodes ? limits->max_inodes : bytes / VOL_BYTES_PER_INODE;
        if (inodes < VOL_MIN_INODES || inodes > VOL_MAX_INODES || inodes > bytes / 1024)
                return INVALID(e,
                               "max_files: %llu is out of range; give %llu to %llu and at most "
                               "one per KiB of max_bytes, or 0 for one per 16 KiB",
                               (unsigned long long) inodes, VOL_MIN_INODES, VOL_MAX_INODES);

        _cleanup_free_ char *envdir = NULL;
        if (asprintf(&envdir, "%s/%s", m->dir, env) < 0)
                return -ENOMEM;
        if (mkdir(envdir, 0700) < 0 && errno != EEXIST)
                return err_set(e, -errno, "mkdir %s: %m", envdir);
        /* The host's disk is not overcommitted at create time: the image is
         * sparse, but its size must fit in what is free now. */
        struct statvfs sv;
        if (statvfs(envdir, &sv) == 0 && (uint64_t) sv.f_bavail * sv.f_frsize < bytes)
                return err_setx(e, -ENOSPC, WR_STATUS_RESOURCE_EXHAUSTED, WR_FAULT_CLIENT,
                                "max_bytes: %llu bytes do not fit in the %llu bytes free on the "
                                "host; give a smaller max_bytes",
                                (unsigned long long) bytes,
                                (unsigned long long) sv.f_bavail * sv.f_frsize);
        _cleanup_(vol_new_freep) struct vol_new *n = calloc(1, sizeof(*n));
        if (!n)
                return -ENOMEM;
        snprintf(n->env, sizeof(n->env), "%s", env);
        snprintf(n->name, sizeof(n->name), "%s", name);
        n->bytes = bytes;
        n->inodes = inodes;
        uint64_t rnd = 0;
        if (getrandom(&rnd, sizeof(rnd), GRND_NONBLOCK) < 0)
                rnd = (uint64_t) getpid();
        char *tmp = NULL;
        if (asprintf(&tmp, "%s/.new-%s-%016llx", envdir, name, (unsigned long long) rnd) < 0)
                return -ENOMEM;
        if (mkdir(tmp, 0700) < 0) {
                r = err_set(e, -errno, "mkdir %s: %m", tmp);
                free(tmp);
                return r;
        }
        n->tmp = tmp;
        *ret_new = TAKE_PTR(n);
        return 0;
}

int vol_create_build(struct vol_new *n, struct wr_err *e) {
        _cleanup_free_ char *img = NULL;
        if (asprintf(&img, "%s/disk.img", n->tmp) < 0)
                return -ENOMEM;
        _cleanup_close_ int fd = open(img, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
        if (fd < 0 || ftruncate(fd, (off_t) n->bytes) < 0)
                return err_set(e, -errno, "make %s: %m", img);
        int r = ext4img_mkfs(img, n->inodes, 0, e);
        if (r < 0)
                return err_prefix(e, r, "create volume %s", n->name);
        n->built = true;
        return 0;
}

int vol_create_finish(struct vol_manager *m, struct vol_new *n, struct vol_info *ret,
                      struct wr_err *e) {
        if (!n->built)
                return err_set(e, -EINVAL, "create volume %s: no image made", n->name);
        /* Made meanwhile by another create: that one stands (n's image is
         * dropped by vol_new_free). */
        struct store_volume row = {0};
        int r = store_volume_load(m->store, n->env, n->name, &row, NULL);
        store_volume_clear(&row);
        if (r == 0)
                return info_fill(m, n->env, n->name, ret, e);
        if (r != -ENOENT)
                return err_set(e, r, "load volume %s", n->name);
        _cleanup_free_ char *final = NULL;
        if (vol_dir(m, n->env, n->name, NULL, &final) < 0)
                return -ENOMEM;
        /* A leftover dir of the same name has no row (recovery removes
         * those, a delete removes its row first): replace it. */
        dir_remove(m, final);
        if (rename(n->tmp, final) < 0)
                return err_set(e, -errno, "rename %s: %m", n->tmp);
        free(n->tmp);
        n->tmp = NULL;
        if ((r = store_volume_insert(m->store, n->env, n->name, e)) < 0) {
                dir_remove(m, final);
                return r;
        }
        return info_fill(m, n->env, n->name, ret, e);
}

int vol_create(struct vol_manager *m, const char *env, const char *name,
               const struct vol_limits *limits, struct vol_info *ret, struct wr_err *e) {
        _cleanup_(vol_new_freep) struct vol_new *n = NULL;
        int r = vol_create_begin(m, env, name, limits, ret, &n, e);
        if (r != 0)
                return r < 0 ? r : 0;
        if ((r = vol_create_build(n, e)) < 0)
                return r;
        return vol_create_finish(m, n, ret, e);
}

int vol_get(struct vol_manager *m, const char *env, const char *name, struct vol_info *ret,
            struct wr_err *e) {
        return info_fill(m, env, name, ret, e);
}

int vol_list(struct vol_manager *m, const char *env, struct vol_info **ret, size_t *n_ret,
             struct wr_err *e) {
        *ret = NULL;
        *n_ret = 0;
        struct store_volume *rows = NULL;
        size_t n = 0;
        int r = store_volume_list(m->store, env, &rows, &n, e);
        if (r < 0)
                return r;
        struct vol_info *out = calloc(n ? n : 1, sizeof(*out));
        if (!out) {
                store_volume_list_free(rows, n);
                return -ENOMEM;
        }
        size_t k = 0;
        for (size_t i = 0; i < n; i++) {
                struct wr_err ie = {0};
                if (info_fill(m, env, rows[i].name, &out[k], &ie) < 0) {
                        /* reported without usage rather than failing the list */
                        out[k] = (struct vol_info){.created_ns = rows[i].created_ns};
                        snprintf(out[k].name, sizeof(out[k].name), "%s", rows[i].name);
                        log_debug("volume %s: %s", rows[i].name, ie.msg);
                }
                k++;
        }
        store_volume_list_free(rows, n);
        *ret = out;
        *n_ret = k;
        return (int) k;
}

int vol_delete(struct vol_manager *m, const char *env, const char *name, struct wr_err *e) {
        int r;
        if ((r = env_check(env, e)) < 0 || (r = name_check(name, e)) < 0)
                return r;
        r = store_volume_delete(m->store, env, name, e);
        if (r == -ENOENT)
                return err_setx(e, -ENOENT, WR_STATUS_NOT_FOUND, WR_FAULT_CLIENT,
                                "volume %s not found", name);
        if (r < 0)
                return r;
        for (struct vol **p = &m->mounted; *p; p = &(*p)->next)
                if (streq((*p)->env, env) && streq((*p)->name, name)) {
                        struct vol *v = *p;
                        *p = v->next;
                        vol_free(v);
                        break;
                }
        _cleanup_free_ char *dir = NULL;
        if (vol_dir(m, env, name, NULL, &dir) == 0)
                dir_remove(m, dir);
        return 0;
}

int vol_open(struct vol_manager *m, const char *env, const char *name, int *ret_data,
             int *ret_stage, struct wr_err *e) {
        struct vol *v;
        int r = get_mounted(m, env, name, &v, e);
        if (r < 0)
                return r;
        if (m->priv)
                return err_set(e, -EOPNOTSUPP,
                               "volume %s: its dirs are warren-priv's (--privsep): use the *_in "
                               "calls",
                               name);
        _cleanup_close_ int d = fcntl(v->data_fd, F_DUPFD_CLOEXEC, 3);
        if (d < 0)
                return err_set(e, -errno, "dup: %m");
        if (ret_stage) {
                *ret_stage = fcntl(v->stage_fd, F_DUPFD_CLOEXEC, 3);
                if (*ret_stage < 0)
                        return err_set(e, -errno, "dup: %m");
        }
        *ret_data = TAKE_FD(d);
        return 0;
}

int vol_source_path(struct vol_manager *m, const char *env, const char *name, char **ret,
                    struct wr_err *e) {
        struct vol *v;
        int r = get_mounted(m, env, name, &v, e);
        if (r < 0)
                return r;
        return vol_dir(m, env, name, "mnt/data", ret);
}

/* ---- start-up and shutdown ---- */

static int recover_env(struct vol_manager *m, const char *env, struct wr_err *e) {
        _cleanup_free_ char *envdir = NULL;
        if (asprintf(&envdir, "%s/%s", m->dir, env) < 0)
                return -ENOMEM;
        _cleanup_(closedirp) DIR *d = opendir(envdir);
        if (d) {
                struct dirent *de;
                while ((de = readdir(d))) {
                        if (streq(de->d_name, ".") || streq(de->d_name, ".."))
                                continue;
                        _cleanup_free_ char *dir = NULL;
                        if (asprintf(&dir, "%s/%s", envdir, de->d_name) < 0)
                                return -ENOMEM;
                        struct store_volume row = {0};
                        int r = vol_name_valid(de->d_name)
                                        ? store_volume_load(m->store, env, de->d_name, &row, NULL)
                                        : -ENOENT;
                        store_volume_clear(&row);
                        if (r == -ENOENT) {
                                log_debug("volumes: removing %s (no volume of that name)", dir);
                                /* a temp dir of a create (".new-...") was never mounted */
                                dir_remove(vol_name_valid(de->d_name) ? m : NULL, dir);
                        } else {
                                unmount_dir(m, dir);
                        }
                }
        }
        struct store_volume *rows = NULL;
        size_t n = 0;
        int r = store_volume_list(m->store, env, &rows, &n, e);
        if (r < 0)
                return r;
        for (size_t i = 0; i < n; i++) {
                _cleanup_free_ char *img = NULL;
                if (vol_dir(m, env, rows[i].name, "disk.img", &img) < 0)
                        break;
                if (access(img, F_OK) < 0 && errno == ENOENT) {
                        log_debug("volumes: %s has no image; forgetting it", rows[i].name);
                        (void) store_volume_delete(m->store, env, rows[i].name, NULL);
                }
        }
        store_volume_list_free(rows, n);
        return 0;
}

int vol_manager_new(const char *state_dir, struct store *store, struct vol_manager **ret,
                    struct wr_err *e) {
        return vol_manager_new_priv(state_dir, store, NULL, ret, e);
}

int vol_manager_new_priv(const char *state_dir, struct store *store, struct priv_client *priv,
                         struct vol_manager **ret, struct wr_err *e) {
        struct vol_manager *m = calloc(1, sizeof(*m));
        if (!m)
                return -ENOMEM;
        m->store = store;
        m->priv = priv;
        if (asprintf(&m->dir, "%s/volumes", state_dir) < 0) {
                free(m);
                return -ENOMEM;
        }
        if (mkdir(m->dir, 0700) < 0 && errno != EEXIST) {
                int r = err_set(e, -errno, "mkdir %s: %m", m->dir);
                vol_manager_free(m);
                return r;
        }
        /* every environment with a dir, and the default one */
        int r = recover_env(m, STORE_ENV_DEFAULT, e);
        _cleanup_(closedirp) DIR *d = opendir(m->dir);
        struct dirent *de;
        while (r >= 0 && d && (de = readdir(d)))
                if (vol_name_valid(de->d_name) && !streq(de->d_name, STORE_ENV_DEFAULT))
                        r = recover_env(m, de->d_name, e);
        if (r < 0) {
                vol_manager_free(m);
                return err_prefix(e, r, "recover volumes");
        }
        *ret = m;
        return 0;
}

void vol_manager_free(struct vol_manager *m) {
        if (!m)
                return;
        while (m->mounted) {
                struct vol *v = m->mounted;
                m->mounted = v->next;
                _cleanup_free_ char *dir = NULL;
                int r = vol_dir(m, v->env, v->name, NULL, &dir);
                vol_free(v);
                if (r == 0)
                        unmount_dir(m, dir);
        }
        free(m->dir);
        free(m);
}

/* ---- the file API by volume name: in process, or through warren-priv
 * (--privsep: VOLFILE_*, docs/privsep.md "Phase 5, volume files, as
 * built") ---- */

/* The mounted volume's dir for a VOLFILE request (m->priv set): *ret
 * heap, the caller's. */
static int priv_dir(struct vol_manager *m, const char *env, const char *name, char **ret,
                    struct wr_err *e) {
        struct vol *v;
        int r = get_mounted(m, env, name, &v, e);
        if (r < 0)
                return r;
        return vol_dir(m, env, name, NULL, ret);
}

/* A VOLFILE_STATED answer for path as the file API reports it. */
static int stated_file(const struct priv_volfile_stated *st, const char *path,
                       struct vol_file *ret) {
        *ret = (struct vol_file){.kind = (enum vol_file_kind) st->kind,
                                 .size = st->size,
                                 .mode = (mode_t) st->mode,
                                 .mtime_ns = st->mtime_ns};
        return vol_path_normalize(path, &ret->path);
}

/* A put's end through warren-priv (struct vol_put_ops). */
struct put_remote {
        struct priv_client *priv;
        char *dir;
};

static int put_remote_commit(void *data, const char *tmp, const char *path, mode_t mode,
                             struct vol_file *ret, struct wr_err *e) {
        struct put_remote *pr = data;
        static _Thread_local struct priv_reply rep;
        int r = priv_volfile(pr->priv, pr->dir, PRIV_VOLFILE_COMMIT, path, NULL, mode, 0, tmp,
                             &rep, NULL, e);
        if (r < 0)
                return r;
        return stated_file(&rep.volfile_stated, path, ret);
}

static void put_remote_abort(void *data, const char *tmp) {
        struct put_remote *pr = data;
        static _Thread_local struct priv_reply rep;
        struct wr_err e = {0};
        if (priv_volfile(pr->priv, pr->dir, PRIV_VOLFILE_ABORT, "", NULL, 0, 0, tmp, &rep, NULL,
                         &e) < 0)
                log_debug("volumes: drop temp file %s: %s", tmp, e.msg);
}

static void put_remote_release(void *data) {
        struct put_remote *pr = data;
        free(pr->dir);
        free(pr);
}

static const struct vol_put_ops put_remote_ops = {
        .commit = put_remote_commit,
        .abort = put_remote_abort,
        .release = put_remote_release,
};

int vol_put_begin_in(struct vol_manager *m, const char *env, const char *name, const char *path,
                     mode_t mode, struct vol_put **ret, struct wr_err *e) {
        int r;
        if (!m->priv) {
                _cleanup_close_ int data = -EBADF, stage = -EBADF;
                if ((r = vol_open(m, env, name, &data, &stage, e)) < 0)
                        return r;
                return vol_put_begin(data, stage, path, mode, ret, e);
        }
        struct put_remote *pr = calloc(1, sizeof(*pr));
        if (!pr)
                return -ENOMEM;
        pr->priv = m->priv;
        if ((r = priv_dir(m, env, name, &pr->dir, e)) < 0) {
                free(pr);
                return r;
        }
        static _Thread_local struct priv_reply rep;
        int fd = -EBADF;
        r = priv_volfile(m->priv, pr->dir, PRIV_VOLFILE_PUT, path, NULL, mode, 0, NULL, &rep, &fd,
                         e);
        if (r < 0) {
                put_remote_release(pr);
                return r;
        }
        r = vol_put_remote(fd, rep.volfile_opened.tmp, path, mode, &put_remote_ops, pr, ret);
        if (r < 0) {
                close(fd);
                put_remote_abort(pr, rep.volfile_opened.tmp);
                put_remote_release(pr);
        }
        return r;
}

int vol_file_open_in(struct vol_manager *m, const char *env, const char *name, const char *path,
                     int *ret_fd, struct stat *st, struct wr_err *e) {
        _cleanup_close_ int data = -EBADF;
        _cleanup_free_ char *dir = NULL;
        int r;
        if (!m->priv)
                return (r = vol_open(m, env, name, &data, NULL, e)) < 0
                               ? r
                               : vol_file_open(data, path, ret_fd, st, e);
        if ((r = priv_dir(m, env, name, &dir, e)) < 0)
                return r;
        static _Thread_local struct priv_reply rep;
        _cleanup_close_ int fd = -EBADF;
        if ((r = priv_volfile(m->priv, dir, PRIV_VOLFILE_READ, path, NULL, 0, 0, NULL, &rep, &fd,
                              e)) < 0)
                return r;
        /* warren-priv checked it on this very fd; checked again here */
        if (fstat(fd, st) < 0 || !S_ISREG(st->st_mode))
                return err_set(e, -EPROTO, "warren-priv answered a file that is not regular");
        *ret_fd = TAKE_FD(fd);
        return 0;
}

int vol_file_stat_in(struct vol_manager *m, const char *env, const char *name, const char *path,
                     struct vol_file *ret, struct wr_err *e) {
        _cleanup_close_ int data = -EBADF;
        _cleanup_free_ char *dir = NULL;
        int r;
        if (!m->priv)
                return (r = vol_open(m, env, name, &data, NULL, e)) < 0
                               ? r
                               : vol_file_stat(data, path, ret, e);
        if ((r = priv_dir(m, env, name, &dir, e)) < 0)
                return r;
        static _Thread_local struct priv_reply rep;
        if ((r = priv_volfile(m->priv, dir, PRIV_VOLFILE_STAT, path, NULL, 0, 0, NULL, &rep, NULL,
                              e)) < 0)
                return r;
        return stated_file(&rep.volfile_stated, path, ret);
}

int vol_file_remove_in(struct vol_manager *m, const char *env, const char *name, const char *path,
                       struct wr_err *e) {
        _cleanup_close_ int data = -EBADF;
        _cleanup_free_ char *dir = NULL;
        int r;
        if (!m->priv)
                return (r = vol_open(m, env, name, &data, NULL, e)) < 0
                               ? r
                               : vol_file_remove(data, path, e);
        if ((r = priv_dir(m, env, name, &dir, e)) < 0)
                return r;
        static _Thread_local struct priv_reply rep;
        r = priv_volfile(m->priv, dir, PRIV_VOLFILE_REMOVE, path, NULL, 0, 0, NULL, &rep, NULL, e);
        return r < 0 ? r : 0;
}

int vol_files_list_in(struct vol_manager *m, const char *env, const char *name, const char *prefix,
                      const char *after, size_t limit, struct vol_file **ret, size_t *n_ret,
                      bool *more, struct wr_err *e) {
        _cleanup_close_ int data = -EBADF;
        _cleanup_free_ char *dir = NULL, *norm = NULL, *buf = NULL;
        int r;
        *ret = NULL;
        *n_ret = 0;
        *more = false;
        if (!m->priv)
                return (r = vol_open(m, env, name, &data, NULL, e)) < 0
                               ? r
                               : vol_files_list(data, prefix, after, limit, ret, n_ret, more, e);
        if ((r = priv_dir(m, env, name, &dir, e)) < 0)
                return r;
        if (!limit || limit > VOL_LIST_MAX)
                limit = VOL_LIST_MAX;
        static _Thread_local struct priv_reply rep;
        _cleanup_close_ int fd = -EBADF;
        if ((r = priv_volfile(m->priv, dir, PRIV_VOLFILE_LS, prefix, after, 0, (uint32_t) limit,
                              NULL, &rep, &fd, e)) < 0)
                return r;
        const struct priv_volfile_listed *l = &rep.volfile_listed;
        struct stat st;
        if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || (uint64_t) st.st_size != l->len)
                return err_set(e, -EPROTO, "warren-priv's listing: not %u bytes", l->len);
        if (!(buf = malloc(l->len ? l->len : 1)))
                return -ENOMEM;
        for (size_t off = 0; off < l->len;) {
                ssize_t n = pread(fd, buf + off, l->len - off, (off_t) off);
                if (n <= 0)
                        return err_set(e, n < 0 ? -errno : -EIO, "read warren-priv's listing");
                off += (size_t) n;
        }
        if ((r = vol_path_normalize(prefix, &norm)) < 0 ||
            (r = vol_files_decode(buf, l->len, l->n, norm, ret, e)) < 0)
                return r;
        *n_ret = l->n;
        *more = l->more;
        return 0;
}
