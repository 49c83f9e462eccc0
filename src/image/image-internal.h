/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* Internals of the image module: the tar entry checks (pure, fuzzed), the
 * unpacker that the warren-unpack helper runs, the helper's report record
 * and a few dirfd-based file system helpers. */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "basic/err.h"
#include "basic/rmrf.h"

/* "sha256:" + 64 hex digits + NUL. */
#define IMG_DIGEST_MAX 72

/* --- tar entry checks (tarpath.c; no I/O, fuzzed by tests/fuzz/fuzz-tar.c) --- */

enum img_entry_kind {
        IMG_ENTRY_FILE = 1,
        IMG_ENTRY_DIR,
        IMG_ENTRY_SYMLINK,
        IMG_ENTRY_HARDLINK,
        IMG_ENTRY_FIFO,
        IMG_ENTRY_WHITEOUT, /* delete `path` from lower layers */
        IMG_ENTRY_OPAQUE,   /* `path` (a directory) hides lower contents */
        IMG_ENTRY_SKIP,     /* AUFS metadata (".wh..wh.*"): ignored */
};

/* What the unpacker does with one tar entry, all paths cleaned. */
struct img_entry_plan {
        enum img_entry_kind kind;
        char path[4096]; /* relative to the layer root; "" = the root itself */
        char link[4096]; /* hardlink target (cleaned), "" otherwise */
        mode_t mode;     /* permission bits to apply (setuid/setgid stripped) */
        bool root_ssh;   /* the entry is /root/.ssh or below it */
};

/* Clean a tar path: strip a leading "./" (any number), "." components and
 * repeated or trailing slashes. Refuses (returns -EINVAL and points *reason
 * at a static explanation) absolute paths, ".." components, empty names,
 * paths longer than outsz-1 and components longer than NAME_MAX. "." and
 * "./" clean to "" (the layer root). */
int img_path_clean(const char *raw, char *out, size_t outsz, const char **reason);

/* Decide what to do with one entry given its raw path, file type (S_IFMT
 * bits of the tar header), permission bits and the raw hardlink target
 * (NULL when not a hardlink). Device nodes, sockets, unknown types,
 * hardlinks to the root or to themselves, whiteouts of "." and non-
 * directory roots are refused with -EINVAL and a static *reason. */
int img_entry_plan(const char *raw_path, mode_t type, mode_t perm, const char *raw_hardlink,
                   struct img_entry_plan *ret, const char **reason);

/* True for the extended attribute names a layer may carry: "user.*" and
 * "trusted.overlay.opaque". Everything else (security.*, system.*, other
 * trusted.*) is dropped. */
bool img_xattr_allowed(const char *name);

/* --- the unpacker (unpack.c) --- */

struct img_unpack_stats {
        char diff_id[IMG_DIGEST_MAX]; /* sha256 of the uncompressed tar stream */
        uint64_t tar_bytes;           /* uncompressed tar stream length */
        uint64_t content_bytes;       /* sum of regular file sizes */
        uint64_t entries;
};

/* Read a tar stream (uncompressed, gzip or zstd) from in_fd and unpack it
 * below root_fd (an O_DIRECTORY fd of an empty directory), treating every
 * entry as hostile: nothing is created outside root_fd, nothing is written
 * through a symlink, see img_entry_plan for what is refused. Ownership is
 * applied numerically when apply_owner is set (needs CAP_CHOWN), setuid and
 * setgid bits are stripped (setgid kept on directories), only allowed
 * xattrs are set. The whole stream is read (trailing padding included) so
 * stats->diff_id equals sha256sum of the uncompressed tar. The tree is not
 * synced; callers syncfs. Errors: -EINVAL (status INVALID_ARGUMENT) naming
 * the entry for hostile or malformed input, -EPERM (FAILED_PRECONDITION)
 * for /root/.ssh, -EIO/-ENOSPC... for file system failures. On failure the
 * partial tree stays below root_fd for the caller to remove. */
int img_unpack_stream(int in_fd, int root_fd, bool apply_owner, struct img_unpack_stats *stats,
                      struct wr_err *e);

/* --- the helper's report (unpack-main.c writes it, layer.c reads it) --- */

#define IMG_REPORT_MAGIC 0x57524e55u /* "WRNU" */

/* One fixed-size record written with a single write() on the report fd. */
struct img_unpack_report {
        uint32_t magic;
        uint32_t size; /* sizeof(struct img_unpack_report) */
        int32_t code;  /* 0 or negative errno */
        int32_t pad;
        struct img_unpack_stats stats;
        struct wr_err err;
};

/* --- file system helpers (fsutil.c) --- */

/* A random 16-hex-digit name into buf (>= 17 bytes). */
void img_random_name(char *buf);

/* True when "/root/.ssh" exists inside the tree at root_fd (resolved with
 * RESOLVE_IN_ROOT, so symlinks in the tree are followed within it). */
bool img_rootfs_has_root_ssh(int root_fd);

/* mkdir -p for an absolute path, mode for created components. */
int img_mkdir_p(const char *path, mode_t mode);

/* --- the store object (shared by image.c, layer.c, import.c) --- */

#include "image/image.h"

struct img_store {
        char *state_dir;
        int layers_fd;     /* state_dir/layers/sha256 */
        int layers_tmp_fd; /* state_dir/layers/tmp */
        int tmp_fd;        /* state_dir/tmp */
        struct store *db;
        char *helper;
        /* --privsep: who starts warren-unpack instead (img_store_set_unpack_start) */
        img_unpack_start_fn unpack_start;
        void *unpack_start_ud;
        struct img_layer_ops ops; /* --privsep: warren-priv moves/removes layer trees */
        img_in_use_fn in_use;
        void *in_use_ud;
        struct img_pull_ctx *pull; /* registry pulls (pull.c); NULL until the first */
        /* set by pull.c with pull: frees it (the store does not link to pull.c) */
        void (*pull_free)(struct img_pull_ctx *ctx);
};

DEFINE_TRIVIAL_CLEANUP_FUNC(struct img_store *, img_store_free);
DEFINE_TRIVIAL_CLEANUP_FUNC(struct img_info *, img_info_free);

/* Remove layers/tmp/<name> (ops.remove, else rm_rf_at): 0 or -errno.
 * Any thread. */
int img_layer_tmp_remove(struct img_store *s, const char *name);

/* img_rootfs_has_root_ssh() that tells a tree it cannot look into
 * (-EACCES: a directory of the tar's owners) from one it can: 1 present,
 * 0 absent, -EACCES. */
int img_rootfs_root_ssh(int root_fd);

/* Remove a layer nobody uses: its row, then its directory (renamed into
 * layers/tmp first). 0, -EBUSY when an image uses it, or -errno. */
int img_layer_remove_unused(struct img_store *s, const char *diff_id, struct wr_err *e);
