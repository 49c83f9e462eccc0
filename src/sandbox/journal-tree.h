/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* The change journal's file-system core (docs/journal.md):
 * a metadata walk of a sandbox's overlay upper dir, the state of a path in
 * the merged view (the upper tree over the image's read-only layers, with
 * overlayfs' whiteouts and opaque directories), and the difference between
 * two walks as the changes a user reads: created, modified, deleted, mode
 * (or owner) changed.
 *
 * No daemon state, no libuv: sandbox/journal.c runs these on worker
 * threads; tests/unit/test-journal.c drives them on temporary dirs.
 *
 * Every walk and lookup is by fd, never follows a symlink and never leaves
 * the directory it started from (names come from the sandbox: hostile).
 *
 * Errors: 0 or a negative errno with the context in the optional
 * struct wr_err. */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "basic/err.h"
#include "basic/idmap.h"

enum jt_type {
        JT_ABSENT = 0,
        JT_FILE,
        JT_DIR,
        JT_LINK,
        JT_OTHER, /* device, FIFO, socket */
        JT_WHITEOUT,
};

/* One entry of a walk. */
struct jt_ent {
        char *path;   /* relative to the walked dir: "a/b" (no leading '/') */
        uint8_t type; /* enum jt_type */
        bool opaque;  /* a directory marked trusted.overlay.opaque=y */
        bool saved;   /* JT_FILE: its bytes are in the journal's object store */
        uint32_t mode, uid, gid;
        uint64_t dev, ino, size;
        int64_t mtime_ns, ctime_ns;
        char *link; /* JT_LINK: the target */
};

/* A walk's result, sorted by path (strcmp). */
struct jt_tree {
        struct jt_ent *v;
        size_t n, cap;
        /* entries were left out (too deep, too long a path, too many): the
         * journal built on it is incomplete */
        bool truncated;
        /* set by the caller before the walk: the upper dir of a sandbox in
         * a user namespace (basic/idmap.h); owners are recorded as ids
         * inside, as the image's layers hold them (0: as they are) */
        uint32_t id_base, id_count;
};

/* entries of one journal walk at most */
#define JT_WALK_MAX 1000000

/* Walk the directory root_fd (not closed) and everything below it, up to
 * max_entries entries, depth 256 and paths of 4095 bytes (beyond: skipped,
 * out->truncated). Reads each directory's opaque mark and each symlink's
 * target. Errors: -ENOMEM, or the errno of a directory that could not be
 * read. out must be zeroed; free with jt_tree_free (also after errors). */
int jt_walk(int root_fd, size_t max_entries, struct jt_tree *out, struct wr_err *e);

/* jt_walk with each directory's opacity answered by opaque(dir_fd, ud):
 * 1 opaque, 0 not, < 0 the walk fails with it (warren-upper, which cannot
 * read trusted.* xattrs from a user namespace, asks warren-priv). */
typedef int (*jt_opaque_fn)(int dir_fd, void *ud);
int jt_walk_opaque(int root_fd, size_t max_entries, jt_opaque_fn opaque, void *ud,
                   struct jt_tree *out, struct wr_err *e);

void jt_tree_free(struct jt_tree *t);

/* The walk on the wire (warren-upper -> warrend, docs/privsep.md "Phase
 * 4b-2"): a header {magic "WJT1", version 1, n (u64), truncated (u32),
 * reserved 0}, then per entry {type, opaque, path_len (u16), link_len
 * (u16), reserved 0 (u16), mode, uid, gid, reserved 0 (u32), dev, ino,
 * size, mtime_ns, ctime_ns} and its path and link bytes (no NULs).
 * jt_tree_encode: t (sorted, as jt_walk made it) into a malloc'd *ret of
 * *len bytes; -ENOMEM or -EINVAL (an entry the decoder would refuse). */
#define JT_WIRE_MAGIC 0x31544a57u
int jt_tree_encode(const struct jt_tree *t, uint8_t **ret, size_t *len);
/* Pure: decode buf[0..len) into out (zeroed; its id fields untouched).
 * Refused (-EPROTO / -EINVAL with e, out freed): a short or long buffer,
 * magic, version, reserved bytes, more than max_entries entries, an
 * unknown type, a mode whose file type is not the entry's, opaque on a
 * non-directory, ids >= 65536, a path of 0 or more than 4095 bytes that
 * is absolute, ends in '/', has an empty, "." or ".." component or a NUL,
 * a link on a non-symlink or over 4095 bytes or with a NUL, paths not in
 * strictly increasing strcmp order. */
int jt_tree_decode(const void *buf, size_t len, size_t max_entries, struct jt_tree *out,
                   struct wr_err *e);

/* --- a rollback's writes, through a sandbox's root (root_fd: O_PATH of
 * the root as init sees it; every lookup openat2 RESOLVE_IN_ROOT, no
 * symlink, no mount crossed). Ids and modes as given (the caller maps
 * them: host ids in warrend, ids inside in warren-upper). 0 or -errno. */
struct jt_attrs {
        uint32_t mode, uid, gid;
        int64_t mtime_ns; /* jt_op_put only */
};
/* path and everything below it removed; a missing parent: 0. */
int jt_op_remove(int root_fd, const char *path);
/* path made (0700) when missing, then jt_op_attrs. */
int jt_op_mkdir(int root_fd, const char *path, const struct jt_attrs *a);
/* owner and mode of path (not followed when a symlink). */
int jt_op_attrs(int root_fd, const char *path, const struct jt_attrs *a);
/* A new file with src_fd's bytes, owner, mode and mtime renamed over path. */
int jt_op_put(int root_fd, const char *path, int src_fd, const struct jt_attrs *a);
/* A new symlink to target, owned as a, renamed over path. */
int jt_op_symlink(int root_fd, const char *path, const char *target, const struct jt_attrs *a);
/* The regular file path below upper_fd opened read-only (openat2 BENEATH,
 * no symlink, no mount crossed, O_NONBLOCK): its fd or -errno (-EINVAL
 * not a regular file). */
int jt_open_file(int upper_fd, const char *path);
/* Copy from -> to (regular files, from their offsets). 0 or -errno. */
int jt_copy_fd(int from, int to);

/* The entry for path, or NULL (binary search). */
const struct jt_ent *jt_find(const struct jt_tree *t, const char *path);

/* The state of one path in a merged view. */
struct jt_state {
        uint8_t type; /* JT_ABSENT when the path is not there */
        int layer;    /* -1: from the upper tree; k: lower layer k (top-most 0) */
        uint32_t mode, uid, gid;
        uint64_t ino, size;
        int64_t mtime_ns;
        bool saved;   /* layer -1 JT_FILE: jt_ent.saved */
        uint64_t dev; /* layer -1: the entry's dev (object names) */
        int64_t ctime_ns;
        char *link; /* JT_LINK: owned copy of the target */
};

void jt_state_clear(struct jt_state *s);

/* The state of path in the merged view of upper over lower_fds[0..n_lower)
 * (directory fds of the read-only layers, top-most first, as overlayfs
 * stacks them). Errors: -ENOMEM; a layer that cannot be read counts as not
 * holding the path. */
int jt_state_of(const struct jt_tree *upper, const int *lower_fds, size_t n_lower, const char *path,
                struct jt_state *ret);

enum jt_kind {
        JT_CREATED = 1 << 0,
        JT_MODIFIED = 1 << 1,
        JT_DELETED = 1 << 2,
        JT_MODE = 1 << 3, /* mode or owner */
};

/* One changed path: what happened, and its state before and after. */
struct jt_change {
        char *path;
        unsigned kinds; /* enum jt_kind bits; MODIFIED and MODE may come together */
        struct jt_state before, after;
};

/* Do two states differ the way the journal reports? 0 = no change, else
 * enum jt_kind bits. */
unsigned jt_compare(const struct jt_state *before, const struct jt_state *after);

/* What changed from pre to post (two walks of the same upper dir over the
 * same lower layers), sorted by path. Directories are reported when
 * created, deleted, or their mode/owner changed (not when only their
 * entries changed). Errors: -ENOMEM. *ret owned by the caller:
 * jt_changes_free. */
int jt_diff(const struct jt_tree *pre, const struct jt_tree *post, const int *lower_fds,
            size_t n_lower, struct jt_change **ret, size_t *n, struct wr_err *e);

void jt_changes_free(struct jt_change *v, size_t n);

/* The object-store name of a saved upper file's bytes ("<dev>-<ino>-<ctime>-<size>"). */
void jt_object_name(uint64_t dev, uint64_t ino, int64_t ctime_ns, uint64_t size, char *buf,
                    size_t size_buf);

/* Look path up in one read-only layer dir (overlayfs rules: a whiteout or
 * a non-directory on the way hides the layers below, an opaque directory
 * on the way hides them for what is under it). Returns 1 found (*st
 * filled, link owned), 0 not in this layer (look below), -ENOENT hidden
 * (do not look below). */
int jt_layer_lookup(int layer_fd, const char *path, struct jt_state *st);
