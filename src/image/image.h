/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* The image module: a content-addressed layer store and the images built
 * from it.
 *
 * On disk (state_dir):
 *   layers/sha256/<hex>/   one unpacked layer, <hex> = sha256 of its
 *                          uncompressed tar (the OCI diff id); read-only
 *                          overlayfs lower dir, shared by every image
 *   layers/tmp/<random>/   layers being unpacked (never visible as layers)
 *   tmp/                   spooled uploads
 * In SQLite (store/images.h): images, image_names, image_layers, layers.
 *
 * Layer tars are hostile. They are parsed only by the warren-unpack helper
 * (chrooted into the new layer dir, seccomp, no_new_privs, minimal
 * capabilities); the daemon side never parses a tar. A layer is unpacked
 * into layers/tmp/, synced, then renamed into place; when the layer exists
 * already the new copy is discarded.
 *
 * Image id = "sha256:" + sha256 of the canonical JSON config (sorted keys,
 * compact) listing the diff ids and the runtime config, so identical
 * content + config gives the same id. Names are "repo:tag" (tag defaults to
 * "latest").
 *
 * Threads: one thread (the daemon's loop thread); helper processes are
 * uv_process handles on the loop passed to img_layer_unpack/img_import_new. Library code: no
 * logging above debug, no exit. */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <uv.h>

#include "basic/err.h"

struct store;
struct img_store;
struct img_import;
struct img_layer_job;

/* The runtime part of an image config (warren.v1.ImageConfig). */
struct img_config {
        char **env; /* "KEY=value" */
        size_t n_env;
        char *working_dir; /* NULL = unset */
        char **entrypoint;
        size_t n_entrypoint;
        char **cmd;
        size_t n_cmd;
        char *user; /* NULL = unset */
        /* recorded for users and tools; the runtime does not act on them */
        char **labels; /* "key=value", sorted by key */
        size_t n_labels;
        char **exposed_ports; /* "8080/tcp", sorted */
        size_t n_exposed_ports;
        char **shell; /* SHELL of a Dockerfile */
        size_t n_shell;
        char *stop_signal; /* NULL = unset */
        char **hc_test;    /* HEALTHCHECK as OCI Test: ["CMD", ..], ["CMD-SHELL", s], ["NONE"] */
        size_t n_hc_test;
        int64_t hc_interval_ns, hc_timeout_ns, hc_start_period_ns, hc_start_interval_ns;
        int hc_retries;
};

/* A resolved image. All heap-owned; free with img_info_free. */
struct img_info {
        char *id;     /* "sha256:<hex>" */
        char **names; /* "repo:tag", sorted */
        size_t n_names;
        char **diff_ids;   /* BOTTOM first (like warren.v1.Image.layers) */
        char **layer_dirs; /* absolute paths, TOP-most first (overlay lowerdir order) */
        size_t n_layers;
        uint64_t size; /* bytes: sum of the layers' uncompressed tar sizes */
        int64_t created_ns;
        char *source; /* "import", "pull", "build" */
        struct img_config config;
};

/* Validate "sha256:<64 lower-case hex>" (layer, blob and upload digests). */
bool img_digest_valid(const char *digest);

/* Is image id used (e.g. by a live sandbox)? DeleteImage refuses then. */
typedef bool (*img_in_use_fn)(const char *id, void *userdata);

/* Open the image store below state_dir using db for metadata. Creates
 * layers/sha256, layers/tmp and tmp (0700), removes leftovers of
 * interrupted work (everything in layers/tmp and tmp), layer directories that no layers
 * row knows, and layers that no image uses (row and directory). The store borrows db (it must
 * outlive the store). Errors: -ENOMEM, -EIO/-errno from the file system or SQLite (e filled). *ret
 * is owned by the caller: img_store_free. */
int img_store_open(const char *state_dir, struct store *db, struct img_store **ret,
                   struct wr_err *e);

/* --privsep (docs/privsep.md "Phase 5, layers, as built"): who moves and
 * removes the layer trees, which warren-unpack wrote with the tar's
 * owners (a warrend running as --user cannot: warren-priv's LAYER_COMMIT
 * and LAYER_REMOVE). Called on the loop thread or a thread-pool thread.
 *   commit  layers/tmp/<tmp_name> to layers/sha256/<hex>: 0 moved, 1 the
 *           layer was there (tmp left), 2 refused: the tree holds
 *           /root/.ssh (nothing moved), or -errno with e;
 *   remove  layers/tmp/<name> (tmp) or layers/sha256/<name> (!tmp, hex):
 *           1 removed, 0 none, or -errno with e (-EINVAL: a name it does
 *           not take; the store then removes that one itself).
 * With ops every stored layer was checked for /root/.ssh by commit, which
 * sees what the store may not (a directory of the tar's owners). */
struct img_layer_ops {
        int (*commit)(void *userdata, const char *tmp_name, const char *hex, struct wr_err *e);
        int (*remove)(void *userdata, bool tmp, const char *name, struct wr_err *e);
        void *userdata;
};

/* img_store_open() with ops (copied; NULL = in process, as
 * img_store_open), used from the start-up garbage collection on. */
int img_store_open_ops(const char *state_dir, struct store *db, const struct img_layer_ops *ops,
                       struct img_store **ret, struct wr_err *e);

/* Free the store. Running imports and layer jobs must have been freed
 * first (their helpers are killed then). NULL is fine. */
void img_store_free(struct img_store *s);

/* Use path as the warren-unpack helper. Default: $WARREN_UNPACK_HELPER,
 * else warren-unpack next to the running executable, else
 * ../image/warren-unpack relative to it (build tree), else
 * WARREN_LIBEXECDIR/warren-unpack. Returns 0 or -ENOMEM. */
int img_store_set_helper(struct img_store *s, const char *path);

/* --privsep (docs/privsep.md "Phase 3, helpers"): warren-unpack is started
 * by fn instead of uv_spawn (warrend: UNPACK_START to warren-priv): dir is
 * the absolute staging dir <state>/layers/tmp/<name> (created, empty),
 * tar_fd its stdin, report_fd its fd 4 (both sent, not closed by fn). 0
 * with *ret_pid and *ret_pidfd (the store's: it watches the pidfd, there is
 * nothing to reap), or -errno with e. NULL: uv_spawn (the default). */
typedef int (*img_unpack_start_fn)(void *userdata, const char *dir, int tar_fd, int report_fd,
                                   int *ret_pid, int *ret_pidfd, struct wr_err *e);
void img_store_set_unpack_start(struct img_store *s, img_unpack_start_fn fn, void *userdata);

/* The helper path the store will run (for diagnostics). */
const char *img_store_helper(struct img_store *s);

/* Register the in-use check DeleteImage consults (the sandbox code passes
 * one that looks for live sandboxes using the id). NULL = never in use. */
void img_store_set_in_use(struct img_store *s, img_in_use_fn fn, void *userdata);

/* Normalize an image name to "repo:tag" (adds ":latest"). Accepted: repo
 * of [a-z0-9._/-] components (an optional "host[:port]/" first part may
 * also hold upper case), tag [A-Za-z0-9_.-]{1,128} not starting with '.' or
 * '-'. -EINVAL (INVALID_ARGUMENT) otherwise. out needs >= 384 bytes. */
int img_name_normalize(const char *name, char *out, size_t outsz, struct wr_err *e);

/* Resolve a name ("busybox", "busybox:1.36"), a full id ("sha256:<hex>")
 * or a unique id prefix of at least 12 hex digits (with or without
 * "sha256:"). -ENOENT (NOT_FOUND) when nothing matches, -EINVAL when a
 * prefix is ambiguous or the argument malformed. *ret owned by the caller:
 * img_info_free. */
int img_store_resolve(struct img_store *s, const char *name_or_id, struct img_info **ret,
                      struct wr_err *e);

/* Free an img_info (NULL fine). */
void img_info_free(struct img_info *info);

/* Every image, newest first. *ret is an array of *n_ret pointers, owned by
 * the caller: img_info_list_free. Returns the count. */
int img_store_list(struct img_store *s, struct img_info ***ret, size_t *n_ret, struct wr_err *e);

/* Free a list from img_store_list: its n entries, then the array (NULL
 * fine). */
void img_info_list_free(struct img_info **list, size_t n);

/* Delete an image by name or id. When an image has several names and
 * name_or_id is a name, only that name is removed (like `docker rmi
 * name:tag`); otherwise the image, its names and every layer no other image
 * uses go (layer dirs are renamed into layers/tmp first, then removed, so a
 * half-deleted layer is never visible). -ENOENT, -EBUSY
 * (FAILED_PRECONDITION) while the in-use callback says the image is used. */
int img_store_delete(struct img_store *s, const char *name_or_id, struct wr_err *e);

/* Commit an image made of layers already in the store (diff ids bottom
 * first): checks the layers exist and that the rootfs holds no /root/.ssh
 * (-EPERM, FAILED_PRECONDITION), computes the id, inserts the image (or
 * reuses an identical one) and points name (may be NULL) at it, in one
 * transaction. *ret (may be NULL) gets the resolved image. Used by import
 * and, later, by registry pulls and builds. */
int img_store_commit_image(struct img_store *s, const char *name, const struct img_config *cfg,
                           char *const *diff_ids, size_t n_layers, const char *source,
                           struct img_info **ret, struct wr_err *e);

/* img_store_commit_image() of base's layers plus one more on top (a
 * snapshot's upper dir, a build step's layer), with cfg (NULL: base's). */
int img_store_commit_on(struct img_store *s, const char *name, const struct img_info *base,
                        const struct img_config *cfg, const char *diff_id, const char *source,
                        struct img_info **ret, struct wr_err *e);

/* Canonical config JSON and id for diff ids + cfg (*ret_json malloc'd,
 * ret_id >= 72 bytes). Deterministic: same input, same bytes. */
int img_config_encode(const struct img_config *cfg, char *const *diff_ids, size_t n_layers,
                      char **ret_json, char *ret_id, struct wr_err *e);

/* Parse a config JSON produced by img_config_encode back into *cfg (caller
 * frees with img_config_clear). -EINVAL on malformed input. */
int img_config_decode(const char *json, struct img_config *cfg, struct wr_err *e);

/* Free what cfg holds and zero it (NULL, zeroed and half-filled configs are
 * fine). */
void img_config_clear(struct img_config *cfg);

/* --- layers: the seam registry pulls use --- */

/* Called once on the loop when a layer job ends. r = 0: the layer with
 * diff_id is in the store (layers row inserted, directory in place);
 * otherwise r < 0 and e says why (INVALID_ARGUMENT naming the tar entry,
 * FAILED_PRECONDITION for /root/.ssh, DATA_LOSS when the digest differs
 * from the expected one, INTERNAL when the helper failed). The job is freed
 * right after the callback returns. */
typedef void (*img_layer_done_fn)(int r, const char *diff_id, const struct wr_err *e,
                                  void *userdata);

/* Unpack the tar stream on tar_fd (uncompressed, gzip or zstd; the fd is
 * dup'ed, the caller keeps its own) as a layer, in the warren-unpack
 * helper. expected_diff_id (may be NULL) must match the sha256 of the
 * uncompressed stream. *ret (may be NULL) is a handle for
 * img_layer_job_cancel, valid until done runs. Returns 0 or a negative
 * errno when the job could not start (done is not called then). */
int img_layer_unpack(struct img_store *s, uv_loop_t *loop, int tar_fd, const char *expected_diff_id,
                     img_layer_done_fn done, void *userdata, struct img_layer_job **ret,
                     struct wr_err *e);

/* Cancel a running job: the helper is killed, its tree removed, and done
 * is NOT called. Safe to call from anywhere on the loop except done. */
void img_layer_job_cancel(struct img_layer_job *job);

/* Absolute directory of a stored layer into out. -ENOENT when unknown. */
int img_layer_path(struct img_store *s, const char *diff_id, char *out, size_t outsz,
                   struct wr_err *e);

/* --- packing a directory (snapshots, builds): pack.c --- */

struct img_pack_stats {
        uint64_t entries, bytes, whiteouts, opaque, skipped;
};

/* Write the overlayfs upper dir at dirfd (a tree a sandbox wrote) to
 * out_fd as an uncompressed OCI layer tar: sorted, deterministic (mode,
 * uid, gid, size, mtime, link targets), whiteouts as ".wh.<name>", opaque
 * dirs with ".wh..wh..opq", devices and sockets left out, and the files
 * the runtime writes into every sandbox (etc/hostname, etc/hosts,
 * etc/resolv.conf as regular files) left out too; read by fd
 * without following symlinks or crossing mounts (-EBUSY), at most 2048
 * levels deep (-ELOOP). The caller keeps the tree still (a frozen
 * sandbox). stats may be NULL. 0 or -errno with e. */
int img_pack_dir(int dirfd, int out_fd, struct img_pack_stats *stats, struct wr_err *e);
/* img_pack_dir() of a sandbox in a user namespace (basic/idmap.h): owners
 * are written as the sandbox sees them (host id - id_base; ids outside
 * the range as 65534), so that the layer holds the same ids as the
 * image's own layers. id_base 0: as they are. */
int img_pack_dir_ids(int dirfd, int out_fd, uint32_t id_base, uint32_t id_count,
                     struct img_pack_stats *stats, struct wr_err *e);
/* img_pack_dir_ids() asking opaque(dir_fd, ud) whether a directory is
 * opaque (1 yes, 0 no, <0 fails the pack) instead of reading its
 * trusted.overlay.opaque xattr, which a process in a user namespace cannot
 * (warren-upper asks warren-priv: docs/privsep.md). */
typedef int (*img_pack_opaque_fn)(int dir_fd, void *ud);
int img_pack_dir_opaque(int dirfd, int out_fd, uint32_t id_base, uint32_t id_count,
                        img_pack_opaque_fn opaque, void *opaque_ud, struct img_pack_stats *stats,
                        struct wr_err *e);

/* A layer tar holding one file at absolute path (parent dirs 0755 root,
 * the file with mode, 0 = 0644; S_IFDIR in mode: a directory, 0755
 * unless given, data ignored) written to out_fd. -EINVAL
 * (INVALID_ARGUMENT) for a path that is not absolute and clean. */
int img_pack_file(int out_fd, const char *path, const void *data, size_t len, mode_t mode,
                  struct wr_err *e);

/* One file of img_pack_files. */
struct img_pack_entry {
        const char *path; /* absolute and clean */
        const void *data;
        size_t len;
        mode_t mode; /* permission bits (0 = 0644; S_IFDIR: a directory, 0 = 0755) */
        uid_t uid;
        gid_t gid;
};

/* A layer tar holding these files (a COPY, add_local_dir) written to
 * out_fd: every parent directory once (0755 root), then the entries in
 * path order (a later duplicate path wins). Deterministic. -EINVAL
 * (INVALID_ARGUMENT naming the path) for a path that is not absolute and
 * clean; -E2BIG past 100000 entries. */
int img_pack_files(int out_fd, const struct img_pack_entry *v, size_t n, struct wr_err *e);

/* --- import (`docker import`): spool a tarball, unpack, commit --- */

/* Called once when an import ends: r = 0 with the committed image, or
 * r < 0 with e. info is owned by the import (copy what you keep). Do not
 * free the import inside the callback; free it afterwards (e.g. from the
 * call's on_free). */
typedef void (*img_import_done_fn)(struct img_import *imp, int r, const struct img_info *info,
                                   const struct wr_err *e, void *userdata);

/* Start an import: validates and normalizes name (may be NULL or "" =
 * unnamed), copies cfg (may be NULL), creates the spool file
 * state_dir/tmp/import-<random> (unlinked once the helper has it).
 * -EINVAL for a bad name. *ret owned by the caller: img_import_free. */
int img_import_new(struct img_store *s, uv_loop_t *loop, const char *name,
                   const struct img_config *cfg, struct img_import **ret, struct wr_err *e);

/* Append n bytes of the tarball to the spool (a plain write to the page
 * cache; bounded only by disk). -ENOSPC (RESOURCE_EXHAUSTED) etc. */
int img_import_write(struct img_import *imp, const void *data, size_t n, struct wr_err *e);

/* The upload is complete: unpack (helper), then commit the image in one
 * transaction, then call done on the loop. Returns 0, or a negative errno
 * when nothing could start (done not called). */
int img_import_finish(struct img_import *imp, img_import_done_fn done, void *userdata,
                      struct wr_err *e);

/* Bytes spooled so far. */
uint64_t img_import_size(const struct img_import *imp);

/* Abort (kills a running helper, removes its tree and the spool; done is
 * not called afterwards) and free. NULL is fine. */
void img_import_free(struct img_import *imp);
