/* SPDX-License-Identifier: Apache-2.0 */
/* warren-priv, phase 5: the image store's layer trees (LAYER_COMMIT,
 * LAYER_REMOVE; docs/privsep.md "Phase 5, layers, as built").
 * warren-unpack writes a layer with the tar's owners, so its top
 * directory is usually root's: a warrend running as --user can neither
 * move it from layers/tmp into layers/sha256 (a rename to another parent
 * needs write access to the directory moved, for its "..") nor remove it.
 * Both dirs are opened beneath the state dir with no symlink on the way;
 * the names are single components the decoder checked (a staging name, a
 * 64-digit hex); every step is by fd. */
#include "priv/priv-internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "basic/rmrf.h"
#include "image/image-internal.h"

static void fail(struct priv_result *res, int r, const char *what, const char *name) {
        res->err = r < 0 ? -r : r;
        snprintf(res->msg, sizeof(res->msg), "%s %.72s: %s", what, name, strerror(res->err));
}

/* layers/tmp and layers/sha256 (O_DIRECTORY fds, both or neither). */
static int open_layer_dirs(int *tmp_fd, int *sha_fd) {
        *tmp_fd = priv_open_beneath(PRIV_ROOT_LAYERS "/" PRIV_ROOT_LAYERS_TMP, O_RDONLY);
        if (*tmp_fd < 0)
                return *tmp_fd;
        *sha_fd = priv_open_beneath(PRIV_ROOT_LAYERS "/sha256", O_RDONLY);
        if (*sha_fd < 0) {
                int r = *sha_fd;
                close(*tmp_fd);
                return r;
        }
        return 0;
}

static void commit(const struct priv_layer_commit *c, int tmp_fd, int sha_fd,
                   struct priv_result *res) {
        int fd = openat(tmp_fd, c->tmp, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0) {
                fail(res, -errno, "commit layer: open staging dir", c->tmp);
                return;
        }
        /* the store's own check (fsutil.c), which a dropped warrend may
         * not be able to make: a directory of the tar's owners */
        bool ssh = img_rootfs_has_root_ssh(fd);
        close(fd);
        if (ssh) {
                res->value = PRIV_LAYER_ROOT_SSH;
                return;
        }
        /* the name may have been replaced since (warrend owns layers/tmp):
         * then a rename moves whatever it is now, never outside layers/ */
        if (renameat2(tmp_fd, c->tmp, sha_fd, c->hex, RENAME_NOREPLACE) < 0) {
                if (errno == EEXIST)
                        res->value = PRIV_LAYER_EXISTED;
                else
                        fail(res, -errno, "commit layer", c->hex);
        }
}

static void remove_layer(const struct priv_layer_remove *m, int tmp_fd, int sha_fd,
                         struct priv_result *res) {
        char name[PRIV_LAYER_NAME_MAX];
        snprintf(name, sizeof(name), "%s", m->name);
        if (m->dir == PRIV_LAYER_DIR_SHA256) {
                /* out of sight first: a half-removed layer is never visible */
                uint8_t b[8] = {0};
                if (getrandom(b, sizeof(b), 0) != (ssize_t) sizeof(b)) {
                        fail(res, -EIO, "remove layer: random name for", m->name);
                        return;
                }
                snprintf(name, sizeof(name), "del-%02x%02x%02x%02x%02x%02x%02x%02x", b[0], b[1],
                         b[2], b[3], b[4], b[5], b[6], b[7]);
                if (renameat2(sha_fd, m->name, tmp_fd, name, RENAME_NOREPLACE) < 0) {
                        if (errno != ENOENT)
                                fail(res, -errno, "remove layer", m->name);
                        return; /* value 0: none */
                }
        } else if (faccessat(tmp_fd, name, F_OK, AT_SYMLINK_NOFOLLOW) < 0) {
                if (errno != ENOENT)
                        fail(res, -errno, "remove staging dir", name);
                return;
        }
        int r = rm_rf_at(tmp_fd, name);
        if (r < 0)
                fail(res, r, "remove", m->name);
        else
                res->value = 1;
}

bool priv_layer_type(uint32_t type) {
        return type == PRIV_LAYER_COMMIT || type == PRIV_LAYER_REMOVE;
}

void priv_layer_run(const struct priv_req *req, struct priv_result *res) {
        int tmp_fd = -EBADF, sha_fd = -EBADF;
        int r = open_layer_dirs(&tmp_fd, &sha_fd);
        if (r < 0) {
                fail(res, r, "open", PRIV_ROOT_LAYERS);
                return;
        }
        if (req->hdr.type == PRIV_LAYER_COMMIT)
                commit(&req->layer_commit, tmp_fd, sha_fd, res);
        else
                remove_layer(&req->layer_remove, tmp_fd, sha_fd, res);
        close(tmp_fd);
        close(sha_fd);
}
