/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* volume: durable named file trees, per environment, mountable into
 * sandboxes (docs/volumes.md).
 *
 * Each volume is a sparse ext4 image, state_dir/volumes/<env>/<name>/disk.img,
 * loop-mounted (LO_FLAGS_AUTOCLEAR) at state_dir/volumes/<env>/<name>/mnt
 * with nosuid,nodev. Its size and inode count are the volume's quotas, so
 * the kernel enforces both (ENOSPC) and a full volume touches nothing else.
 * The image's root holds data/ (what sandboxes see and what the file API
 * serves) and .staging/ (PutFile's temp files, never visible to a sandbox,
 * emptied whenever the volume is mounted).
 *
 * manager.c: the volumes and their mounts (create, mount on first use,
 * delete, recovery at start-up). file.c: the file API, every path resolved
 * inside data/ with openat2 (RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS |
 * RESOLVE_NO_XDEV), regular files only, never blocking on a FIFO.
 *
 * Runs on the loop thread except vol_put_commit (blocking: fsync), which
 * a caller runs on a worker thread. Library code: logs at debug only. */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "basic/err.h"

struct stat;
struct store;
struct vol_manager;

#define VOL_NAME_MAX 63
#define VOL_PATH_MAX 4096
#define VOL_COMPONENT_MAX 255
#define VOL_DEFAULT_BYTES (1ull << 30)
#define VOL_MIN_BYTES (8ull << 20)
#define VOL_MAX_BYTES (16ull << 40)
#define VOL_BYTES_PER_INODE 16384ull
#define VOL_MIN_INODES 64ull
#define VOL_MAX_INODES (1ull << 31)

struct vol_limits {
        uint64_t max_bytes;  /* 0 = VOL_DEFAULT_BYTES */
        uint64_t max_inodes; /* 0 = max_bytes / VOL_BYTES_PER_INODE */
};

/* A volume as reported: its quotas and use (statfs of the mounted image;
 * max_bytes is what files can use, a little below the image size). */
struct vol_info {
        char name[VOL_NAME_MAX + 1];
        int64_t created_ns;
        uint64_t used_bytes, max_bytes;
        uint64_t used_inodes, max_inodes;
};

/* Create the manager on state_dir/volumes and recover: host mounts left
 * by a previous warrend are detached (a sandbox still running keeps its
 * own clone of the mount), half-made volumes (a directory without a store
 * row) are removed, rows without an image are dropped. Volumes are
 * mounted again on first use. Returns 0 or a negative errno with e
 * filled; *ret is the caller's (vol_manager_free). */
int vol_manager_new(const char *state_dir, struct store *store, struct vol_manager **ret,
                    struct wr_err *e);

/* vol_manager_new with --privsep (docs/privsep.md): the loop devices
 * and host mounts by warren-priv (priv: VOLUME_MOUNT, VOLUME_UNMOUNT;
 * it must outlive the manager); warrend opens data/ and .staging/ from
 * the mount's root fd it answers. priv NULL: vol_manager_new. */
struct priv_client;
int vol_manager_new_priv(const char *state_dir, struct store *store, struct priv_client *priv,
                         struct vol_manager **ret, struct wr_err *e);

/* Detach every host mount this manager made (lazily: sandboxes keep
 * theirs; a loop device goes when its last mount does) and free it. NULL
 * ok. */
void vol_manager_free(struct vol_manager *m);

/* True when s is a valid volume name: 1-63 of [A-Za-z0-9._-], starting
 * with a letter or digit. */
bool vol_name_valid(const char *s);

/* Create volume name in env with limits (NULL = defaults), or, when it
 * exists, report it as it is (the call is idempotent; limits of an
 * existing volume are not changed). Blocks for the mkfs (a few ms; the
 * steps below run it off the loop).
 * Errors: -EINVAL (INVALID_ARGUMENT: name or limits, naming the field),
 * -ENOSPC (RESOURCE_EXHAUSTED: the host has not that much free space),
 * other negative errnos (INTERNAL). *ret filled on success. */
int vol_create(struct vol_manager *m, const char *env, const char *name,
               const struct vol_limits *limits, struct vol_info *ret, struct wr_err *e);

/* vol_create in three steps, so that the mkfs runs off the loop:
 * vol_create_begin (loop): validate; when the volume exists, fill *ret
 * and return 1; else return 0 with *ret_new (the caller's:
 * vol_new_free) naming a temp dir for the image. vol_create_build (any
 * thread; touches no manager or store state): make the image in it.
 * vol_create_finish (loop): move it into place and record it, or, when a
 * concurrent create made the volume meanwhile, report that one (n's image
 * is dropped by vol_new_free). Errors as vol_create. */
struct vol_new;
int vol_create_begin(struct vol_manager *m, const char *env, const char *name,
                     const struct vol_limits *limits, struct vol_info *ret,
                     struct vol_new **ret_new, struct wr_err *e);
int vol_create_build(struct vol_new *n, struct wr_err *e);
int vol_create_finish(struct vol_manager *m, struct vol_new *n, struct vol_info *ret,
                      struct wr_err *e);
/* Free n, removing its temp dir unless vol_create_finish moved it into
 * place. NULL ok. */
void vol_new_free(struct vol_new *n);

/* Report one volume (mounting it when needed). -ENOENT (NOT_FOUND). */
int vol_get(struct vol_manager *m, const char *env, const char *name, struct vol_info *ret,
            struct wr_err *e);

/* Every volume of env, sorted by name: *ret (malloc'd, caller frees) of
 * *n_ret. */
int vol_list(struct vol_manager *m, const char *env, struct vol_info **ret, size_t *n_ret,
             struct wr_err *e);

/* Delete volume name and everything in it: its row, its mount, its image.
 * The caller checks first that no live sandbox mounts it. -ENOENT. */
int vol_delete(struct vol_manager *m, const char *env, const char *name, struct wr_err *e);

/* The volume's data dir, mounted: an O_PATH directory fd of data/ (the
 * caller's, close it) in *ret_data, and when ret_stage is not NULL an
 * O_DIRECTORY fd of .staging/ (the caller's) in *ret_stage. -ENOENT when
 * there is no such volume. */
int vol_open(struct vol_manager *m, const char *env, const char *name, int *ret_data,
             int *ret_stage, struct wr_err *e);

/* The host path of the volume's data dir (mounted first), for a bind
 * mount into a sandbox: *ret malloc'd, the caller's. -ENOENT. */
int vol_source_path(struct vol_manager *m, const char *env, const char *name, char **ret,
                    struct wr_err *e);

/* --- the file API (file.c) --- */

enum vol_file_kind {
        VOL_FILE_REGULAR = 1,
        VOL_FILE_DIRECTORY = 2,
        VOL_FILE_SYMLINK = 3,
        VOL_FILE_OTHER = 4, /* device, FIFO, socket */
};

struct vol_file {
        char *path; /* relative to the volume's root; heap */
        enum vol_file_kind kind;
        uint64_t size;
        mode_t mode; /* permission bits */
        int64_t mtime_ns;
};

/* Free what f holds (the path). NULL ok. */
void vol_file_clear(struct vol_file *f);
/* Free an array of n files (each cleared). NULL ok. */
void vol_files_free(struct vol_file *files, size_t n);

/* The pure helpers (codec.c; no I/O). path without empty and "."
 * components ("" for the root): *ret heap, the caller's. -ENOMEM. */
int vol_path_normalize(const char *path, char **ret);
/* Compare two normalized paths component by component (byte-wise): the
 * order of a listing. */
int vol_path_cmp(const char *a, const char *b);

/* Check a path a client gave for field (e.g. "meta.path"): non-empty,
 * relative, at most VOL_PATH_MAX bytes, no NUL (len is the wire length),
 * no newline, no component longer than VOL_COMPONENT_MAX, none "..";
 * "." and empty components are allowed and ignored. -EINVAL with
 * INVALID_ARGUMENT naming field. allow_empty: "" means the root. */
int vol_path_check(const char *field, const char *path, size_t len, bool allow_empty,
                   struct wr_err *e);

/* A PutFile in progress: a temp file in .staging/ that becomes path on
 * commit. */
struct vol_put;

/* A temp file's name: "put-" and 16 lower-case hex digits (NUL included:
 * VOL_PUT_TMP_MAX bytes at most). */
#define VOL_PUT_TMP_MAX 24
bool vol_put_tmp_ok(const char *tmp);

/* Start writing path (checked with vol_path_check) of the volume whose
 * data and staging dirs are data_fd and stage_fd (borrowed; dup'd):
 * the parent dirs are made (mode 0755) inside the volume, then a temp
 * file (mode & 07777, 0 = 0644) in .staging/. Errors: -ENOTDIR /
 * -EISDIR (FAILED_PRECONDITION: a component is not a dir, the path is a
 * dir), -ENOSPC / -EDQUOT (RESOURCE_EXHAUSTED). *ret is the caller's:
 * vol_put_commit or vol_put_abort. */
int vol_put_begin(int data_fd, int stage_fd, const char *path, mode_t mode, struct vol_put **ret,
                  struct wr_err *e);

/* Append n bytes. -ENOSPC (RESOURCE_EXHAUSTED) when the volume is full. */
int vol_put_write(struct vol_put *p, const void *buf, size_t n, struct wr_err *e);

/* Make the file appear whole: fsync it, rename it over path (a symlink or
 * file there is replaced, never followed), fsync the directory. Blocking:
 * run it off the loop. On failure the temp file is removed. Fills *ret
 * (path, size, mode, mtime; the caller clears). Does not free p. */
int vol_put_commit(struct vol_put *p, struct vol_file *ret, struct wr_err *e);

/* Free p, removing its temp file unless committed. NULL ok. */
void vol_put_free(struct vol_put *p);

/* Open path for reading: a regular file (anything else: -EINVAL /
 * -EISDIR, FAILED_PRECONDITION naming it; a FIFO never blocks). *ret_fd
 * (O_RDONLY, the caller's) and its stat in *st. -ENOENT. */
int vol_file_open(int data_fd, const char *path, int *ret_fd, struct stat *st, struct wr_err *e);

/* Describe path without following a final symlink. -ENOENT. */
int vol_file_stat(int data_fd, const char *path, struct vol_file *ret, struct wr_err *e);

/* Remove the file (or empty directory) path. -ENOENT, -ENOTEMPTY. */
int vol_file_remove(int data_fd, const char *path, struct wr_err *e);

/* List every non-directory under the directory prefix ("" = the root),
 * recursively, symlinks not followed, in path order (byte-wise, component
 * by component), starting after the path `after` (NULL/"" = from the
 * start), at most limit entries. *ret (caller: vol_files_free) of *n_ret;
 * *more is set when entries remain. -ENOENT / -ENOTDIR for prefix. */
int vol_files_list(int data_fd, const char *prefix, const char *after, size_t limit,
                   struct vol_file **ret, size_t *n_ret, bool *more, struct wr_err *e);

/* ---- the file API split across processes (--privsep: warren-priv
 * resolves and opens inside the volume, warrend writes and reads the fds
 * it answers; docs/privsep.md "Phase 5, volume files, as built") ---- */

/* Hand the temp file of a begun put out: a dup of its writable fd in
 * *ret_fd (the caller's) and its name in tmp; p no longer removes it (a
 * vol_put_resume of the same name commits or drops it). 0 or -errno. */
int vol_put_take(struct vol_put *p, int *ret_fd, char tmp[VOL_PUT_TMP_MAX]);

/* A put again from its temp file tmp in stage_fd (vol_put_tmp_ok; a
 * regular file, not followed), path's parent dirs made again (a sandbox
 * may have removed them meanwhile). Then vol_put_commit (mode set there)
 * or vol_put_free (removes the temp file). On failure the temp file is
 * removed. Errors as vol_put_begin, -EINVAL for a bad name. */
int vol_put_resume(int data_fd, int stage_fd, const char *tmp, const char *path, mode_t mode,
                   struct vol_put **ret, struct wr_err *e);

/* What a put made elsewhere does at its end (warrend: the requests to
 * warren-priv). commit: make tmp appear whole as path with mode, fill
 * *ret (blocking: vol_put_commit runs it on a worker). abort: remove tmp
 * (best effort). release (may be NULL): free data. */
struct vol_put_ops {
        int (*commit)(void *data, const char *tmp, const char *path, mode_t mode,
                      struct vol_file *ret, struct wr_err *e);
        void (*abort)(void *data, const char *tmp);
        void (*release)(void *data);
};

/* A put whose temp file tmp another process made: fd (taken over on
 * success) is open for writing it; vol_put_write writes into it,
 * vol_put_commit and vol_put_free end it through ops (data given to
 * them; released by vol_put_free). -ENOMEM. */
int vol_put_remote(int fd, const char *tmp, const char *path, mode_t mode,
                   const struct vol_put_ops *ops, void *ops_data, struct vol_put **ret);

/* A listing's encoding (VOLFILE_LIST's memfd): per file a 32-byte header
 * {path_len, kind, mode, reserved 0, size, mtime_ns} then the path's
 * bytes. vol_files_encode: *ret (heap, the caller's) of *ret_len bytes.
 * vol_files_decode (pure): exactly n entries filling len bytes, each a
 * normalized path inside the volume (under prefix/ when prefix is not
 * ""), not a directory, mode <= 07777, in strictly increasing
 * vol_path_cmp order; *ret (vol_files_free) or -EPROTO with e. */
#define VOL_WIRE_ENTRY 32
#define VOL_LIST_MAX 1000
int vol_files_encode(const struct vol_file *files, size_t n, void **ret, size_t *ret_len);
int vol_files_decode(const void *buf, size_t len, size_t n, const char *prefix,
                     struct vol_file **ret, struct wr_err *e);

/* --- the same file API by volume name (manager.c): without --privsep
 * vol_open and the fd-based calls above; with it, the VOLFILE requests
 * to warren-priv. Same errors, same statuses. --- */
int vol_put_begin_in(struct vol_manager *m, const char *env, const char *name, const char *path,
                     mode_t mode, struct vol_put **ret, struct wr_err *e);
int vol_file_open_in(struct vol_manager *m, const char *env, const char *name, const char *path,
                     int *ret_fd, struct stat *st, struct wr_err *e);
int vol_file_stat_in(struct vol_manager *m, const char *env, const char *name, const char *path,
                     struct vol_file *ret, struct wr_err *e);
int vol_file_remove_in(struct vol_manager *m, const char *env, const char *name, const char *path,
                       struct wr_err *e);
int vol_files_list_in(struct vol_manager *m, const char *env, const char *name, const char *prefix,
                      const char *after, size_t limit, struct vol_file **ret, size_t *n_ret,
                      bool *more, struct wr_err *e);
