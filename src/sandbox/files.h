/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* sandbox/files: the file operations of the Files service
 * (docs/files.md) on a running sandbox (the sandbox's own programs are
 * never run for them).
 *
 * Who does what (docs/privsep.md "Phase 4, files, as built"): warren-init,
 * as the sandbox's root inside the sandbox, opens files for warrend
 * (FILE_OPEN) and makes the changes (FILE_MKDIR, FILE_REMOVE, FILE_RENAME,
 * FILE_SYMLINK) and reads directories (FILE_LIST) over a files connection
 * of the call (init/ctl-proto.h, init/file-ops.h); warrend reads and writes
 * the data through the fds init opened (no permission is checked again on
 * an open fd), checks them (fstat, fstatfs: kernel file systems, read-only
 * mounts, durable mounts) and builds the answers. Without a connection
 * (a paused sandbox, whose init is frozen, or an init older than
 * FILE_MKDIR..: /proc/<init>/root, possible only while warrend is host
 * root; the unit tests: a plain directory) the same operations
 * (init/file-ops.c) run in warrend on root_fd.
 *
 * Every lookup is openat2(root, path, RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS):
 * a symlink (absolute or relative) or ".." never leads out of the root,
 * whatever the sandbox swaps meanwhile; the last component of a path is
 * handled with *at() calls on its parent's fd that do not follow it.
 * Refused: anything on a kernel file system (proc, sysfs, cgroup, debugfs,
 * devpts, mqueue, ...: checked with fstatfs on the fd reached, not on the
 * path's spelling), and any file that is not regular, a directory or a
 * symlink (devices, FIFOs, sockets are opened O_PATH only, so opening one
 * has no effect and never blocks). Writes go to a temp file in the target's
 * directory, renamed over the target (atomic); a read-only mount is
 * refused before anything is made, naming the volume when it is one.
 *
 * sbx_fs_open runs on the loop thread; every other function here touches
 * no daemon state and may run on any thread (the API runs them on libuv's
 * worker threads), one thread per struct sbx_fs at a time. Library code:
 * logs at debug only. Errors fill e with the field ("path", "meta.path",
 * "from"...) and the fix. */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "basic/err.h"
#include "basic/idmap.h"

struct sbx_manager;
struct stat;

#define SBX_FILE_PATH_MAX 4096
#define SBX_FILE_NAME_MAX 255
#define SBX_FILE_LIST_DEPTH_MAX 256
#define SBX_WATCH_DIRS_MAX 8192

/* A read-only mount of the sandbox with a name for error messages (a
 * volume mounted read-only: target "/data", label "volume data"). */
struct sbx_fs_mount {
        char *target; /* absolute path in the sandbox; heap */
        char *label;  /* heap */
};

/* What a file call needs of one running sandbox, taken on the loop and
 * handed to a worker thread. */
struct sbx_fs {
        int root_fd; /* O_PATH | O_DIRECTORY of the sandbox's root; -EBADF
                      * until sbx_fs_root */
        /* how sbx_fs_root reaches warren-init: a connection made on the
         * loop (through warren-priv with --privsep), else the socket's
         * path, connected on the worker thread */
        int ctl_fd;
        bool ctl_pooled; /* ctl_fd was kept from an earlier call */
        /* the files connection of this call, once sbx_fs_root took the
         * root through it (-EBADF: none, the operations run in warrend on
         * root_fd); ctl_broken: a request failed midway (not kept) */
        int files_fd;
        bool ctl_broken;
        /* the call is done with init (sbx_fs_ctl_release, sbx_fs_clear):
         * takes files_fd for the sandbox's next call (-EBADF: none) and
         * ends the call's hold on one of init's connections (sbx_fs_open
         * refuses a sandbox's 9th call at once); NULL: nothing held */
        void (*ctl_put)(const char *id, int init_pid, int fd);
        char *ctl_path; /* heap */
        int init_pid;   /* host pid of init: the /proc fallback */
        bool paused;    /* frozen: init cannot answer; /proc/<init>/root */
        int pidfd;      /* init's: readable once the sandbox ended (-EBADF: none) */
        char id[32];
        uint32_t uid, gid; /* the sandbox's user: owner of what is made */
        /* its user namespace (basic/idmap.h; 0: none): uid/gid and every
         * owner taken or shown are ids inside; files on the host side
         * are owned by id_base + id */
        uint32_t id_base, id_count;
        char *workdir; /* relative paths start here; heap */
        struct sbx_fs_mount *ro_mounts;
        size_t n_ro_mounts;
};

/* Fill *ret for running sandbox key (id or name): how to reach its
 * init (the root fd comes later: sbx_fs_root), a pidfd of its init (so
 * that a long call, a Watch, can end with it), user, working dir. Loop
 * thread. Paused sandboxes are served (their files are
 * there; nothing runs in them to be disturbed). Errors: NOT_FOUND,
 * FAILED_PRECONDITION (not running). *ret is the caller's: sbx_fs_clear. */
int sbx_fs_open(struct sbx_manager *m, const char *key, struct sbx_fs *ret, struct wr_err *e);

/* Take fs->root_fd from warren-init if not taken yet: FILE_OPEN "/" on a
 * files connection of its own (init/ctl-proto.h), waiting at most 5 s,
 * the connection kept in fs->files_fd for the operations; a paused
 * sandbox (its init is frozen) or an init without FILE_OPEN:
 * /proc/<init>/root. Then init must still be alive (its pidfd). Any
 * thread (the API's workers). Errors: FAILED_PRECONDITION (the sandbox
 * stopped; paused while this warrend cannot open /proc/<init>/root, i.e.
 * runs as --user: "resume it"), UNAVAILABLE (init did not answer). */
int sbx_fs_root(struct sbx_fs *fs, struct wr_err *e);

/* Give fs's files connection back now (a Read or Watch that needs no
 * more of init; each connection is one of init's 16 slots): the
 * operations that follow run in warrend on root_fd. NULL ok. */
void sbx_fs_ctl_release(struct sbx_fs *fs);

/* Record a read-only mount of fs for error messages (copies). -ENOMEM. */
int sbx_fs_add_ro_mount(struct sbx_fs *fs, const char *target, const char *label);

/* Close and free what fs holds (files_fd goes back through ctl_put unless
 * broken); leaves it empty (root_fd, ctl_fd, files_fd, pidfd -EBADF).
 * NULL ok. */
void sbx_fs_clear(struct sbx_fs *fs);

/* ---- paths (pure) ---- */

/* Check a path from a client for field: non-empty, at most
 * SBX_FILE_PATH_MAX bytes, no NUL byte (len is the wire length), no
 * component longer than SBX_FILE_NAME_MAX. ".." is allowed: the kernel
 * resolves it inside the sandbox's root. -EINVAL with INVALID_ARGUMENT
 * naming field. */
int sbx_file_path_check(const char *field, const void *path, size_t len, struct wr_err *e);

/* path (checked, NUL-terminated) made absolute: as it is when it starts
 * with '/', else workdir + "/" + path. *ret heap. -ENOMEM, -ENAMETOOLONG
 * (INVALID_ARGUMENT naming field: the joined path is too long). */
int sbx_file_path_abs(const char *field, const char *workdir, const char *path, char **ret,
                      struct wr_err *e);

/* Split an absolute path into its parent directory and its last
 * component (trailing slashes ignored): "/a/b/" → "/a", "b"; "/x" → "/",
 * "x". The last component must name an entry: "/" , "." and ".." are
 * refused (-EINVAL, INVALID_ARGUMENT naming field). *ret_dir and
 * *ret_leaf heap. */
int sbx_file_path_split(const char *field, const char *abs, char **ret_dir, char **ret_leaf,
                        struct wr_err *e);

/* ---- operations (any thread) ---- */

enum sbx_file_kind {
        SBX_FILE_REGULAR = 1,
        SBX_FILE_DIRECTORY = 2,
        SBX_FILE_SYMLINK = 3,
        SBX_FILE_OTHER = 4, /* device, FIFO, socket */
};

struct sbx_file_info {
        char *path; /* heap */
        enum sbx_file_kind kind;
        uint64_t size;
        mode_t mode; /* 07777 */
        uint32_t uid, gid;
        int64_t mtime_ns;
        char *link; /* a symlink's target; heap, NULL otherwise */
};

/* Free what f holds. NULL ok. */
void sbx_file_info_clear(struct sbx_file_info *f);
/* Clear n infos and free the array. NULL ok. */
void sbx_file_infos_free(struct sbx_file_info *f, size_t n);

/* Open abs for reading: a regular file (a directory: -EISDIR, anything
 * else: -EINVAL, both FAILED_PRECONDITION; the final symlink is followed
 * inside the root). *ret_fd (O_RDONLY, the caller's) and its stat in *st.
 * -ENOENT (NOT_FOUND). */
int sbx_file_open_read(const struct sbx_fs *fs, const char *field, const char *abs, int *ret_fd,
                       struct stat *st, struct wr_err *e);

/* Describe abs without following a final symlink; ret->path = abs. */
int sbx_file_stat(const struct sbx_fs *fs, const char *field, const char *abs,
                  struct sbx_file_info *ret, struct wr_err *e);

/* Remove abs: a file, symlink or empty directory; with recursive a tree
 * (never following symlinks, never entering another mount: a volume's
 * mount point gives FAILED_PRECONDITION). -ENOENT, -ENOTEMPTY. */
int sbx_file_remove(const struct sbx_fs *fs, const char *field, const char *abs, bool recursive,
                    struct wr_err *e);

/* Make directory abs (mode & 07777, 0 = 0755, exactly: no umask) owned by
 * uid:gid; with parents the missing parents too (0755, same owner) and an
 * existing directory is success. -EEXIST (ALREADY_EXISTS), -ENOENT. Fills
 * *ret. */
int sbx_file_mkdir(const struct sbx_fs *fs, const char *field, const char *abs, mode_t mode,
                   uint32_t uid, uint32_t gid, bool parents, struct sbx_file_info *ret,
                   struct wr_err *e);

/* Rename from to to (within one mount; -EXDEV FAILED_PRECONDITION
 * otherwise). no_replace: -EEXIST (ALREADY_EXISTS) when to exists. Fills
 * *ret (to). */
int sbx_file_rename(const struct sbx_fs *fs, const char *from, const char *to, bool no_replace,
                    struct sbx_file_info *ret, struct wr_err *e);

/* Resolve a user spec ("NAME", "UID", "NAME:GROUP", "UID:GID") in the
 * sandbox's /etc/passwd and /etc/group (sandbox/user.h), opened for
 * reading by init (sbx_file_etc). */
int sbx_file_user(const struct sbx_fs *fs, const char *field, const char *spec, uint32_t *uid,
                  uint32_t *gid, struct wr_err *e);

struct sbx_etc;

/* The sandbox's /etc/passwd and /etc/group into *ret (sandbox/user.h;
 * each missing, or not a regular file: its _len -ENOENT / -EBADFD), each
 * opened for reading by warren-init (FILE_OPEN READ: nothing of warrend's
 * own permissions needed). 0, or -ETIMEDOUT / -ECONNRESET when init does
 * not answer (nothing to free then). Free with sbx_etc_clear. */
int sbx_file_etc(const struct sbx_fs *fs, struct sbx_etc *ret);
void sbx_etc_clear(struct sbx_etc *etc);

/* Make abs a symlink to target (bytes as given, never followed), owned
 * like sbx_file_write_begin's files, atomically replacing a file or
 * symlink there (a directory: -EISDIR; a device, FIFO, socket: -EINVAL;
 * both FAILED_PRECONDITION). Fills *ret. */
int sbx_file_symlink(const struct sbx_fs *fs, const char *field, const char *abs,
                     const char *target, bool has_owner, uint32_t uid, uint32_t gid,
                     struct sbx_file_info *ret, struct wr_err *e);

/* A write in progress: a temp file beside abs that replaces it on
 * commit. */
struct sbx_file_write;

/* Start writing abs: parents made (0755, owned by the file's owner), a
 * temp file made in its directory. mode 0 = the replaced file's mode, else
 * 0644; has_owner false = the replaced file's owner, else fs's user.
 * A symlink at abs is replaced (not followed); a device, FIFO or socket
 * there is refused (-EINVAL, FAILED_PRECONDITION).
 * Errors: -EISDIR (FAILED_PRECONDITION), -EROFS (FAILED_PRECONDITION naming
 * the read-only mount), -ENOSPC (RESOURCE_EXHAUSTED). *ret is the caller's
 * (sbx_file_write_free). */
int sbx_file_write_begin(const struct sbx_fs *fs, const char *field, const char *abs, mode_t mode,
                         bool has_owner, uint32_t uid, uint32_t gid, struct sbx_file_write **ret,
                         struct wr_err *e);

/* Append n bytes. -ENOSPC / -EDQUOT (RESOURCE_EXHAUSTED). */
int sbx_file_write_data(struct sbx_file_write *w, const void *buf, size_t n, struct wr_err *e);

/* Owner and mode, fsync when the file is on a durable mount (a volume;
 * not the sandbox's own layer or a tmpfs), rename over abs. Fills *ret.
 * On failure the temp file is removed (by sbx_file_write_free). */
int sbx_file_write_commit(struct sbx_file_write *w, struct sbx_file_info *ret, struct wr_err *e);

/* Free w, removing its temp file unless committed. NULL ok. */
void sbx_file_write_free(struct sbx_file_write *w);

/* A directory listing in progress (ListDir). */
struct sbx_file_list;

/* Start listing directory abs (final symlink followed inside the root);
 * recursive: the tree under it, depth-first in path order, at most
 * max_depth levels (0 = SBX_FILE_LIST_DEPTH_MAX); symlinks are not
 * followed, kernel file systems are listed but not entered. -ENOENT,
 * -ENOTDIR. Each directory is one FILE_LIST (at most CTL_FILE_LIST_MAX
 * entries: more is -EFBIG, RESOURCE_EXHAUSTED, for the top; a directory
 * below is listed up to there). *ret is the caller's (sbx_file_list_free);
 * fs must outlive it. */
int sbx_file_list_open(const struct sbx_fs *fs, const char *field, const char *abs, bool recursive,
                       unsigned max_depth, struct sbx_file_list **ret, struct wr_err *e);

/* The next at most max entries into *ret (caller: sbx_file_infos_free)
 * of *n_ret; 0 entries = the end. Paths are abs joined with the entry's
 * path below it. */
int sbx_file_list_next(struct sbx_file_list *l, size_t max, struct sbx_file_info **ret,
                       size_t *n_ret, struct wr_err *e);

void sbx_file_list_free(struct sbx_file_list *l);

/* ---- watching (inotify) ---- */

enum sbx_watch_kind {
        SBX_WATCH_READY = 1,
        SBX_WATCH_CREATED = 2,
        SBX_WATCH_MODIFIED = 3,
        SBX_WATCH_DELETED = 4,
        SBX_WATCH_ATTRIB = 5,
        SBX_WATCH_MOVED_FROM = 6,
        SBX_WATCH_MOVED_TO = 7,
        SBX_WATCH_OVERFLOW = 8,
        SBX_WATCH_CLOSE_WRITE = 9,
};

struct sbx_watch_event {
        enum sbx_watch_kind kind;
        char *path; /* absolute in the sandbox; heap; NULL for OVERFLOW */
        bool is_dir;
        uint32_t cookie;
};

struct sbx_watch;

/* Watch directory abs (recursive: and every directory under it, new ones
 * as they come, at most SBX_WATCH_DIRS_MAX: -ENOSPC RESOURCE_EXHAUSTED
 * past it) on root_fd, by warrend itself: without host root it watches
 * only directories others may read (docs/privsep.md). Its inotify fd (sbx_watch_fd) is
 * non-blocking: poll it and call sbx_watch_read. *ret is the caller's (sbx_watch_free). */
int sbx_watch_new(int root_fd, const char *field, const char *abs, bool recursive,
                  struct sbx_watch **ret, struct wr_err *e);

/* The inotify fd to poll (owned by w). */
int sbx_watch_fd(const struct sbx_watch *w);

/* Read what the kernel queued (never blocks) into events appended to
 * *evs (heap array of *n, caller frees with sbx_watch_events_free).
 * Returns 1 when the watched directory is gone (the watch is over), 0
 * otherwise, or a negative errno. */
int sbx_watch_read(struct sbx_watch *w, struct sbx_watch_event **evs, size_t *n);

void sbx_watch_events_free(struct sbx_watch_event *evs, size_t n);
void sbx_watch_free(struct sbx_watch *w);
