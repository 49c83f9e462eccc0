/* SPDX-License-Identifier: Apache-2.0 */
/* warren-priv, phase 5: the volume files API (VOLFILE_OPEN, VOLFILE_OP,
 * VOLFILE_LIST; docs/privsep.md "Phase 5, volume files, as built"). A
 * volume's data/ and .staging/ are root's and its files belong to root or
 * to the ids sandboxes wrote with: a warrend running as --user reaches
 * none of them. Here the volume dir is opened beneath the state dir (no
 * symlink on the way), its mnt must be a mount's root, data/ and
 * .staging/ are opened from it without following, and every user path is
 * resolved by src/volume/file.c itself (linked: the one implementation;
 * openat2 RESOLVE_IN_ROOT | NO_MAGICLINKS | NO_XDEV inside data/, the last
 * step an *at() call that does not follow). warrend gets fds (a file to
 * read, a temp file to write, a listing's sealed memfd) or fixed structs. */
#include "priv/priv-internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include "basic/memfd.h"
#include "volume/volume.h"

bool priv_volfile_type(uint32_t type) {
        return type >= PRIV_VOLFILE_OPEN && type <= PRIV_VOLFILE_LIST;
}

/* data/ (O_PATH) and .staging/ of the mounted volume vol (a checked
 * "volumes/<env>/<name>"). */
static int volume_open(const char *vol, int *ret_data, int *ret_stage, struct wr_err *e) {
        _cleanup_close_ int dfd = priv_open_beneath(vol, O_RDONLY);
        if (dfd < 0)
                return err_set(e, dfd, "volume %s: %s", vol, strerror(-dfd));
        _cleanup_close_ int mnt = openat(dfd, "mnt", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        struct statx sx;
        if (mnt < 0 || statx(mnt, "", AT_EMPTY_PATH, STATX_BASIC_STATS, &sx) < 0)
                return err_set(e, -errno, "volume %s: open mnt: %m", vol);
        /* not mounted: nothing of the state dir's own filesystem is served */
        if (!(sx.stx_attributes_mask & STATX_ATTR_MOUNT_ROOT) ||
            !(sx.stx_attributes & STATX_ATTR_MOUNT_ROOT))
                return err_set(e, -ENXIO, "volume %s is not mounted", vol);
        _cleanup_close_ int data = openat(mnt, "data", O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        _cleanup_close_ int stage =
                openat(mnt, ".staging", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (data < 0 || stage < 0)
                return err_set(e, -errno, "volume %s: open its dirs: %m", vol);
        *ret_data = TAKE_FD(data);
        *ret_stage = TAKE_FD(stage);
        return 0;
}

static void stated_fill(const struct vol_file *vf, struct priv_reply *out) {
        out->hdr.type = PRIV_VOLFILE_STATED;
        out->volfile_stated = (struct priv_volfile_stated){
                .kind = (uint32_t) vf->kind,
                .mode = (uint32_t) vf->mode,
                .size = vf->size,
                .mtime_ns = vf->mtime_ns,
        };
}

/* LIST: the listing encoded into a sealed memfd. */
static int list(int data, const struct priv_volfile *v, const char *prefix, const char *after,
                struct priv_reply *out, int *ret_fd, struct wr_err *e) {
        struct vol_file *files = NULL;
        size_t n = 0;
        bool more = false;
        int r = vol_files_list(data, prefix, after, v->limit, &files, &n, &more, e);
        if (r < 0)
                return r;
        void *buf = NULL;
        size_t len = 0;
        r = vol_files_encode(files, n, &buf, &len);
        vol_files_free(files, n);
        if (r < 0)
                return err_set(e, r, "encode the listing: %s", strerror(-r));
        if (len > PRIV_VOLFILE_LISTING_MAX) {
                free(buf);
                return err_set(e, -E2BIG, "the listing is %zu bytes", len);
        }
        struct iovec iov = {.iov_base = buf, .iov_len = len};
        r = memfd_sealed("warren-volume-list", "the listing", &iov, 1, ret_fd, e);
        free(buf);
        if (r < 0)
                return r;
        out->hdr.type = PRIV_VOLFILE_LISTED;
        out->volfile_listed =
                (struct priv_volfile_listed){.n = (uint32_t) n, .more = more, .len = (uint32_t) len};
        return 0;
}

static int run(const struct priv_volfile *v, const char *path, const char *after,
               struct priv_result *res, struct priv_reply *out, int *ret_fd, struct wr_err *e) {
        _cleanup_close_ int data = -EBADF, stage = -EBADF;
        int r = volume_open(v->vol, &data, &stage, e);
        if (r < 0)
                return r;
        struct vol_file vf = {0};
        struct vol_put *p = NULL;
        switch (v->op) {
        case PRIV_VOLFILE_READ: {
                struct stat st;
                if ((r = vol_file_open(data, path, ret_fd, &st, e)) < 0)
                        return r;
                out->hdr.type = PRIV_VOLFILE_OPENED;
                return 0;
        }
        case PRIV_VOLFILE_PUT:
                if ((r = vol_put_begin(data, stage, path, (mode_t) v->mode, &p, e)) < 0)
                        return r;
                out->hdr.type = PRIV_VOLFILE_OPENED;
                r = vol_put_take(p, ret_fd, out->volfile_opened.tmp);
                if (r < 0)
                        (void) err_set(e, r, "hand the temp file over: %s", strerror(-r));
                vol_put_free(p); /* removes the temp file unless taken */
                return r;
        case PRIV_VOLFILE_STAT:
                if ((r = vol_file_stat(data, path, &vf, e)) < 0)
                        return r;
                stated_fill(&vf, out);
                vol_file_clear(&vf);
                return 0;
        case PRIV_VOLFILE_REMOVE:
                return vol_file_remove(data, path, e);
        case PRIV_VOLFILE_COMMIT:
                if ((r = vol_put_resume(data, stage, v->tmp, path, (mode_t) v->mode, &p, e)) < 0)
                        return r;
                r = vol_put_commit(p, &vf, e);
                vol_put_free(p); /* removes the temp file unless committed */
                if (r < 0)
                        return r;
                stated_fill(&vf, out);
                vol_file_clear(&vf);
                return 0;
        case PRIV_VOLFILE_ABORT:
                if (unlinkat(stage, v->tmp, 0) == 0)
                        res->value = 1;
                else if (errno != ENOENT)
                        return err_set(e, -errno, "remove temp file %s: %m", v->tmp);
                return 0;
        case PRIV_VOLFILE_LS:
                return list(data, v, path, after, out, ret_fd, e);
        }
        return err_set(e, -EINVAL, "op %u", v->op); /* not reached: decoded */
}

uint32_t priv_volfile_run(const struct priv_req *req, int *fds, size_t n_fds,
                          struct priv_result *res, struct priv_reply *out, int *ret_fd) {
        const struct priv_volfile *v = &req->volfile;
        static _Thread_local char path[PRIV_VOLFILE_PATH_MAX + 1], after[PRIV_VOLFILE_PATH_MAX + 1];
        struct wr_err e = {0};
        char *blob = NULL;
        *ret_fd = -EBADF;
        memset(out, 0, sizeof(*out));
        out->hdr.type = PRIV_RESULT;
        int r = n_fds == 1 ? priv_memfd_read(fds[0], (size_t) v->path_len + v->after_len,
                                             "the paths", &blob, &e)
                           : err_set(&e, -EPROTO, "no memfd of the paths");
        priv_close_fds(fds, n_fds);
        if (r >= 0)
                r = priv_volfile_paths_decode(v, blob, (size_t) v->path_len + v->after_len, path,
                                              after, &e);
        free(blob);
        if (r >= 0)
                r = run(v, path, after, res, out, ret_fd, &e);
        if (r < 0) {
                if (*ret_fd >= 0)
                        *ret_fd = safe_close(*ret_fd);
                out->hdr.type = PRIV_RESULT;
                res->err = -r;
                res->value = e.status;
                snprintf(res->msg, sizeof(res->msg), "%s", e.msg[0] ? e.msg : strerror(-r));
        }
        return out->hdr.type;
}
