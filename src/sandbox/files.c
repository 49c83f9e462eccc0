/* SPDX-License-Identifier: Apache-2.0 */
/* The Files service's operations on a running sandbox (files.h). A
 * sandbox may rewrite anything in its file tree at any moment (a directory
 * swapped for a symlink to / between two calls or during one, FIFOs,
 * device nodes it was given, /proc), so no path string is ever resolved
 * from the host's root: every lookup is openat2 on the sandbox's root fd
 * with RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS (the kernel keeps each step
 * inside it), the last component is handled with *at() calls that do not
 * follow it, files are opened O_PATH first and checked with fstat and
 * fstatfs on that very fd, and only then reopened for reading. Mount
 * crossings are allowed (volumes, /tmp are mounts) except onto kernel file
 * systems. */
#include "sandbox/files.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/capability.h>
#include <linux/magic.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stdatomic.h>
#include <sys/inotify.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "basic/macro.h"
#include "init/file-ops.h"
#include "runtime/ctl.h"
#include "sandbox/user.h"

#define streq(a, b) (strcmp((a), (b)) == 0)
#define INVALID(e, ...)                                                                            \
        err_setx(e, -EINVAL, WR_STATUS_INVALID_ARGUMENT, WR_FAULT_CLIENT, __VA_ARGS__)
#define PRECONDITION(e, code, ...)                                                                 \
        err_setx(e, code, WR_STATUS_FAILED_PRECONDITION, WR_FAULT_CLIENT, __VA_ARGS__)

#define RESOLVE (RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS)

#ifndef CONFIGFS_MAGIC
#define CONFIGFS_MAGIC 0x62656570
#endif
#ifndef FUSECTL_SUPER_MAGIC
#define FUSECTL_SUPER_MAGIC 0x65735543
#endif
#ifndef MQUEUE_MAGIC
#define MQUEUE_MAGIC 0x19800202
#endif

int sbx_fs_add_ro_mount(struct sbx_fs *fs, const char *target, const char *label) {
        struct sbx_fs_mount *n =
                realloc(fs->ro_mounts, (fs->n_ro_mounts + 1) * sizeof(*fs->ro_mounts));
        if (!n)
                return -ENOMEM;
        fs->ro_mounts = n;
        struct sbx_fs_mount *mt = &n[fs->n_ro_mounts];
        mt->target = strdup(target);
        mt->label = strdup(label);
        if (!mt->target || !mt->label) {
                free(mt->target);
                free(mt->label);
                return -ENOMEM;
        }
        fs->n_ro_mounts++;
        return 0;
}

void sbx_fs_ctl_release(struct sbx_fs *fs) {
        if (!fs)
                return;
        if (fs->ctl_broken)
                fs->files_fd = safe_close(fs->files_fd);
        if (fs->ctl_put) /* takes files_fd (or nothing) and ends the hold */
                fs->ctl_put(fs->id, fs->init_pid, fs->files_fd);
        else
                safe_close(fs->files_fd);
        fs->ctl_put = NULL;
        fs->files_fd = -EBADF;
}

void sbx_fs_clear(struct sbx_fs *fs) {
        if (!fs)
                return;
        safe_close(fs->root_fd);
        safe_close(fs->pidfd);
        safe_close(fs->ctl_fd);
        sbx_fs_ctl_release(fs);
        free(fs->ctl_path);
        free(fs->workdir);
        for (size_t i = 0; i < fs->n_ro_mounts; i++) {
                free(fs->ro_mounts[i].target);
                free(fs->ro_mounts[i].label);
        }
        free(fs->ro_mounts);
        *fs = (struct sbx_fs){
                .root_fd = -EBADF, .pidfd = -EBADF, .ctl_fd = -EBADF, .files_fd = -EBADF};
}

/* ---- paths (pure) ---- */

/* At most 80 bytes of a path for a message (no newline: cut there). */
#define SHOW(p) (int) show_len(p), (p)
static size_t show_len(const char *p) {
        size_t n = strcspn(p, "\n");
        return n < 80 ? n : 80;
}

int sbx_file_path_check(const char *field, const void *path, size_t len, struct wr_err *e) {
        const char *p = path;
        if (len == 0)
                return INVALID(e, "%s: empty; give a path in the sandbox (e.g. /workspace/a.txt)",
                               field);
        if (memchr(p, 0, len))
                return INVALID(e, "%s: contains a NUL byte; file names cannot", field);
        if (len > SBX_FILE_PATH_MAX)
                return INVALID(e, "%s: %zu bytes long; give at most %d", field, len,
                               SBX_FILE_PATH_MAX);
        for (size_t i = 0; i < len;) {
                const char *slash = memchr(p + i, '/', len - i);
                size_t n = slash ? (size_t) (slash - (p + i)) : len - i;
                if (n > SBX_FILE_NAME_MAX)
                        return INVALID(e,
                                       "%s: a component is %zu bytes long; give names of at "
                                       "most %d bytes",
                                       field, n, SBX_FILE_NAME_MAX);
                i += n + 1;
        }
        return 0;
}

int sbx_file_path_abs(const char *field, const char *workdir, const char *path, char **ret,
                      struct wr_err *e) {
        char *out;
        if (path[0] == '/')
                out = strdup(path);
        else if (asprintf(&out, "%s/%s", workdir && *workdir ? workdir : "", path) < 0)
                out = NULL;
        if (!out)
                return err_set(e, -ENOMEM, "out of memory");
        if (strlen(out) > SBX_FILE_PATH_MAX) {
                free(out);
                return INVALID(e,
                               "%s: longer than %d bytes once joined to the working directory; "
                               "give a shorter or an absolute path",
                               field, SBX_FILE_PATH_MAX);
        }
        *ret = out;
        return 0;
}

int sbx_file_path_split(const char *field, const char *abs, char **ret_dir, char **ret_leaf,
                        struct wr_err *e) {
        size_t len = strlen(abs);
        while (len > 1 && abs[len - 1] == '/')
                len--;
        size_t start = len;
        while (start > 0 && abs[start - 1] != '/')
                start--;
        size_t leaf_len = len - start;
        if (leaf_len == 0 || (leaf_len == 1 && abs[start] == '.') ||
            (leaf_len == 2 && abs[start] == '.' && abs[start + 1] == '.'))
                return INVALID(e,
                               "%s: \"%.*s\" does not end in a name (it is \"/\", \".\" or "
                               "\"..\"); give the entry's own path",
                               field, SHOW(abs));
        size_t dir_len = start;
        while (dir_len > 1 && abs[dir_len - 1] == '/')
                dir_len--;
        char *dir = dir_len ? strndup(abs, dir_len) : strdup(".");
        char *leaf = strndup(abs + start, leaf_len);
        if (!dir || !leaf) {
                free(dir);
                free(leaf);
                return err_set(e, -ENOMEM, "out of memory");
        }
        *ret_dir = dir;
        *ret_leaf = leaf;
        return 0;
}

/* ---- helpers ---- */

static int openat2_in(int dirfd, const char *path, uint64_t flags, uint64_t resolve) {
        struct open_how how = {.flags = flags | O_CLOEXEC, .resolve = resolve};
        int fd;
        do
                fd = (int) syscall(SYS_openat2, dirfd, path, &how, sizeof(how));
        while (fd < 0 && errno == EAGAIN); /* a rename raced the lookup */
        return fd < 0 ? -errno : fd;
}

/* Open path of the sandbox (init/ctl-proto.h's FILE_OPEN flags), through
 * warren-init or locally (below). */
static int fs_open(const struct sbx_fs *fs, const char *path, uint32_t flags, uint32_t mode,
                   uint32_t uid, uint32_t gid);

/* The name of a kernel file system the file API refuses, or NULL. */
static const char *kernel_fs(unsigned long type) {
        switch (type) {
        case PROC_SUPER_MAGIC:
                return "proc";
        case SYSFS_MAGIC:
                return "sysfs";
        case CGROUP_SUPER_MAGIC:
        case CGROUP2_SUPER_MAGIC:
                return "cgroup";
        case DEBUGFS_MAGIC:
                return "debugfs";
        case TRACEFS_MAGIC:
                return "tracefs";
        case SECURITYFS_MAGIC:
                return "securityfs";
        case BPF_FS_MAGIC:
                return "bpf";
        case DEVPTS_SUPER_MAGIC:
                return "devpts";
        case CONFIGFS_MAGIC:
                return "configfs";
        case PSTOREFS_MAGIC:
                return "pstore";
        case EFIVARFS_MAGIC:
                return "efivarfs";
        case SELINUX_MAGIC:
                return "selinuxfs";
        case SMACK_MAGIC:
                return "smackfs";
        case BINFMTFS_MAGIC:
                return "binfmt_misc";
        case FUSECTL_SUPER_MAGIC:
                return "fusectl";
        case NSFS_MAGIC:
                return "nsfs";
        case MQUEUE_MAGIC:
                return "mqueue";
        default:
                return NULL;
        }
}

/* Refuse a file system type that is a kernel one. */
static int fs_type_check(unsigned long type, const char *field, const char *path,
                         struct wr_err *e) {
        const char *k = kernel_fs(type);
        if (k)
                return PRECONDITION(e, -EPERM,
                                    "%s: \"%.*s\" is on the sandbox's %s file system (kernel "
                                    "state, not files); the file API serves files only: run a "
                                    "command in the sandbox to read it",
                                    field, SHOW(path), k);
        return 0;
}

/* Refuse fd when it is on a kernel file system. sf may be NULL. */
static int fs_check(int fd, const char *field, const char *path, struct statfs *sf,
                    struct wr_err *e) {
        struct statfs buf;
        if (!sf)
                sf = &buf;
        if (fstatfs(fd, sf) < 0)
                return err_set(e, -errno, "%s: statfs \"%.*s\": %m", field, SHOW(path));
        return fs_type_check((unsigned long) sf->f_type, field, path, e);
}

static int mnt_id_of(int fd, uint64_t *ret) {
        struct statx sx;
        if (statx(fd, "", AT_EMPTY_PATH, STATX_MNT_ID, &sx) < 0)
                return -errno;
        if (!(sx.stx_mask & STATX_MNT_ID))
                return -EOPNOTSUPP;
        *ret = sx.stx_mnt_id;
        return 0;
}

/* dir_fd (a directory of fs) is on a read-only mount: the error, naming
 * the mount when fs knows it. */
static int read_only(const struct sbx_fs *fs, int dir_fd, const char *field, const char *path,
                     struct wr_err *e) {
        uint64_t id = 0, mid = 0;
        if (mnt_id_of(dir_fd, &id) == 0)
                for (size_t i = 0; i < fs->n_ro_mounts; i++) {
                        _cleanup_close_ int m =
                                fs_open(fs, fs->ro_mounts[i].target,
                                        CTL_FOPEN_PATH | CTL_FOPEN_DIRECTORY, 0, 0, 0);
                        if (m >= 0 && mnt_id_of(m, &mid) == 0 && mid == id)
                                return PRECONDITION(
                                        e, -EROFS,
                                        "%s: \"%.*s\" is on %s, mounted read-only at %s; write "
                                        "under another path, or mount it read-write",
                                        field, SHOW(path), fs->ro_mounts[i].label,
                                        fs->ro_mounts[i].target);
                }
        return PRECONDITION(e, -EROFS,
                            "%s: \"%.*s\" is on a read-only mount of the sandbox; write under "
                            "another path",
                            field, SHOW(path));
}

/* A writable directory: not a kernel file system, not read-only. */
static int dir_writable(const struct sbx_fs *fs, int dir_fd, const char *field, const char *path,
                        struct wr_err *e) {
        struct statfs sf;
        int r = fs_check(dir_fd, field, path, &sf, e);
        if (r < 0)
                return r;
        if (sf.f_flags & ST_RDONLY)
                return read_only(fs, dir_fd, field, path, e);
        return 0;
}

static int path_err(int r, const char *field, const char *path, struct wr_err *e) {
        switch (r) {
        case -ENOENT:
                return err_setx(e, -ENOENT, WR_STATUS_NOT_FOUND, WR_FAULT_CLIENT,
                                "%s: \"%.*s\" not found in the sandbox", field, SHOW(path));
        case -ENOTDIR:
                return PRECONDITION(e, r, "%s: a component of \"%.*s\" is not a directory", field,
                                    SHOW(path));
        case -ELOOP:
                return PRECONDITION(e, r,
                                    "%s: \"%.*s\" goes through too many symlinks (or a /proc "
                                    "magic link)",
                                    field, SHOW(path));
        case -EXDEV:
                return PRECONDITION(e, r, "%s: \"%.*s\" would leave the sandbox's root", field,
                                    SHOW(path));
        case -ENAMETOOLONG:
                return INVALID(e, "%s: \"%.*s\" is too long once symlinks are resolved", field,
                               SHOW(path));
        case -EROFS:
                return PRECONDITION(e, r, "%s: \"%.*s\" is on a read-only mount", field,
                                    SHOW(path));
        case -ENOSPC:
        case -EDQUOT:
                return err_setx(e, -ENOSPC, WR_STATUS_RESOURCE_EXHAUSTED, WR_FAULT_CLIENT,
                                "%s: no space left for \"%.*s\" (the sandbox's disk, tmpfs or "
                                "volume is full)",
                                field, SHOW(path));
        case -EACCES:
        case -EPERM:
                return PRECONDITION(e, r, "%s: \"%.*s\": %s", field, SHOW(path), strerror(-r));
        case -ETIMEDOUT:
                return err_setx(e, r, WR_STATUS_UNAVAILABLE, WR_FAULT_WORKLOAD,
                                "%s: \"%.*s\": the sandbox's warren-init did not answer "
                                "within 5 s; try again, or restart the sandbox",
                                field, SHOW(path));
        case -ECONNRESET:
        case -EPIPE:
        case -ENOTCONN:
        case -EBADMSG:
                return err_setx(
                        e, r, WR_STATUS_UNAVAILABLE, WR_FAULT_WORKLOAD,
                        "%s: \"%.*s\": the sandbox's warren-init %s; try again", field, SHOW(path),
                        r == -EBADMSG ? "sent a malformed answer" : "closed the connection");
        default:
                return err_set(e, r, "%s: \"%.*s\": %s", field, SHOW(path), strerror(-r));
        }
}

/* Open directory dir (absolute, final symlink followed inside the root)
 * O_PATH, checked not to be on a kernel file system. */
static int dir_open(const struct sbx_fs *fs, const char *field, const char *dir, struct wr_err *e) {
        _cleanup_close_ int fd = fs_open(fs, dir, CTL_FOPEN_PATH | CTL_FOPEN_DIRECTORY, 0, 0, 0);
        if (fd < 0)
                return path_err(fd, field, dir, e);
        int r = fs_check(fd, field, dir, NULL, e);
        if (r < 0)
                return r;
        return TAKE_FD(fd);
}

/* Reopen an O_PATH fd with flags (the inode it holds, not a path). */
static int reopen(int fd, int flags) {
        char p[64];
        snprintf(p, sizeof(p), "/proc/self/fd/%d", fd);
        int r = open(p, flags | O_CLOEXEC);
        return r < 0 ? -errno : r;
}

/* Making an inode as the sandbox's root. In a sandbox with a user
 * namespace its volumes are idmapped mounts, through which an inode can
 * only be made by a caller whose fsuid/fsgid the mount maps (host root's
 * is not: EOVERFLOW). So this thread makes it with fsuid/fsgid id_base
 * (the sandbox's root), its capabilities kept (setfsuid away from 0 drops
 * the file ones from the effective set: taken back from the permitted),
 * and is host root again right after (fsuid 0 raises them again). The
 * owner is set by fchown as before. Per thread (raw syscalls: glibc does
 * not broadcast these). No user namespace: nothing. */
static void as_sandbox_root(const struct sbx_fs *fs) {
        if (!fs->id_base)
                return;
        (void) syscall(SYS_setfsgid, fs->id_base);
        (void) syscall(SYS_setfsuid, fs->id_base);
        struct __user_cap_header_struct h = {.version = _LINUX_CAPABILITY_VERSION_3};
        struct __user_cap_data_struct d[2];
        if (syscall(SYS_capget, &h, d) == 0) {
                d[0].effective = d[0].permitted;
                d[1].effective = d[1].permitted;
                (void) syscall(SYS_capset, &h, d);
        }
}

static void as_host_root(const struct sbx_fs *fs) {
        if (!fs->id_base)
                return;
        (void) syscall(SYS_setfsuid, 0);
        (void) syscall(SYS_setfsgid, 0);
}

/* The call expr (one that makes a name: mkdir, open with O_CREAT,
 * symlink, rename) as the sandbox's root; its result, errno kept. */
#define AS_SANDBOX_ROOT(fs, expr)                                                                  \
        ({                                                                                         \
                as_sandbox_root(fs);                                                               \
                __typeof__(expr) r_ = (expr);                                                      \
                int e_ = errno;                                                                    \
                as_host_root(fs);                                                                  \
                errno = e_;                                                                        \
                r_;                                                                                \
        })

/* ---- the way to the sandbox's files ---- */

/* How long one request to warren-init may take: it answers at once
 * unless the sandbox took it over, or a recursive remove is big. */
#define FILE_OP_TIMEOUT_MS 5000

static atomic_uint_fast64_t op_req_id = 1;

/* warren-init does the operation (a files connection), or warrend on
 * root_fd (no connection: a paused sandbox, an init without the message,
 * the unit tests). */
static bool remote(const struct sbx_fs *fs) {
        return fs->files_fd >= 0;
}

/* A request that failed midway leaves the connection out of the pool
 * (a late answer would wait in it). fs is the worker's own (files.h):
 * only this flag changes. */
static int ctl_done(const struct sbx_fs *fs, int r) {
        if (r == -ETIMEDOUT || r == -ECONNRESET || r == -EPIPE || r == -ENOTCONN || r == -EBADMSG ||
            r == -ENOMEM)
                ((struct sbx_fs *) fs)->ctl_broken = true;
        return r;
}

/* Ids as the side that uses them wants: init takes ids inside the
 * sandbox, warrend's own calls host ids. */
static uint32_t id_for(const struct sbx_fs *fs, uint32_t id) {
        return remote(fs) ? id : wr_id_host(id, fs->id_base, fs->id_count);
}

static int fs_open(const struct sbx_fs *fs, const char *path, uint32_t flags, uint32_t mode,
                   uint32_t uid, uint32_t gid) {
        int fd = -EBADF, r;
        if (flags & CTL_FOPEN_OWNER) {
                uid = id_for(fs, uid);
                gid = id_for(fs, gid);
        }
        if (remote(fs)) {
                r = ctl_done(fs,
                             rt_ctl_file_open(fs->files_fd, atomic_fetch_add(&op_req_id, 1), path,
                                              flags, mode, uid, gid, FILE_OP_TIMEOUT_MS, &fd));
        } else {
                struct init_file_open f = {
                        .flags = flags, .mode = mode, .uid = uid, .gid = gid, .path = path};
                r = AS_SANDBOX_ROOT(fs, init_fop_open(fs->root_fd, &f, &fd));
        }
        return r < 0 ? r : fd;
}

/* FILE_MKDIR .. FILE_SYMLINK (type), uid/gid ids inside the sandbox. */
static int fs_op(const struct sbx_fs *fs, uint32_t type, uint32_t flags, uint32_t mode,
                 uint32_t uid, uint32_t gid, const char *path, const char *path2, uint64_t dev,
                 uint64_t ino) {
        if (!(flags & CTL_FOP_OWNER))
                uid = gid = 0;
        if (remote(fs)) {
                int r = ctl_done(fs, rt_ctl_file_op(fs->files_fd, atomic_fetch_add(&op_req_id, 1),
                                                    type, flags, mode, uid, gid, path, path2, dev,
                                                    ino, FILE_OP_TIMEOUT_MS, NULL, NULL));
                /* an init older than these messages: warrend on the root
                 * init opened (works while warrend is host root) */
                if (r != -EOPNOTSUPP || fs->root_fd < 0)
                        return r;
        }
        if (flags & CTL_FOP_OWNER) {
                uid = wr_id_host(uid, fs->id_base, fs->id_count);
                gid = wr_id_host(gid, fs->id_base, fs->id_count);
        }
        struct init_file_op op = {.flags = flags,
                                  .mode = mode,
                                  .uid = uid,
                                  .gid = gid,
                                  .dev = dev,
                                  .ino = ino,
                                  .path = path,
                                  .path2 = path2};
        return AS_SANDBOX_ROOT(fs, init_fop_do(fs->root_fd, type, &op));
}

/* FILE_LIST of path: *ret, *ret_memfd; *ids_inside: the entries' ids are
 * the sandbox's (init's view), not the host's. */
static int fs_list(const struct sbx_fs *fs, const char *path, uint32_t flags,
                   struct ctl_file_listed *ret, int *ret_memfd, bool *ids_inside) {
        *ids_inside = false;
        if (remote(fs)) {
                int r = ctl_done(fs, rt_ctl_file_op(fs->files_fd, atomic_fetch_add(&op_req_id, 1),
                                                    CTL_FILE_LIST, flags, 0, 0, 0, path, NULL, 0, 0,
                                                    FILE_OP_TIMEOUT_MS, ret, ret_memfd));
                if (r != -EOPNOTSUPP || fs->root_fd < 0) {
                        *ids_inside = true;
                        return r;
                }
        }
        struct init_file_op op = {.flags = flags, .path = path};
        return init_fop_list(fs->root_fd, &op, ret, ret_memfd);
}

/* path/leaf: dir (absolute) joined with a name. heap. */
static char *join(const char *dir, const char *leaf) {
        char *p;
        return asprintf(&p, "%s%s%s", dir, streq(dir, "/") ? "" : "/", leaf) < 0 ? NULL : p;
}

/* Open directory dir O_PATH, making missing components (0755,
 * uid:gid) first. */
static int dir_make(const struct sbx_fs *fs, const char *field, const char *dir, uint32_t uid,
                    uint32_t gid, struct wr_err *e) {
        int fd = fs_open(fs, dir, CTL_FOPEN_PATH | CTL_FOPEN_DIRECTORY, 0, 0, 0);
        if (fd == -ENOENT) {
                int r = fs_op(fs, CTL_FILE_MKDIR, CTL_FOP_OWNER | CTL_FOP_PARENTS, 0755, uid, gid,
                              dir, NULL, 0, 0);
                if (r == -EROFS) {
                        /* name the mount: the nearest directory there is */
                        _cleanup_free_ char *up = strdup(dir);
                        if (!up)
                                return err_set(e, -ENOMEM, "out of memory");
                        for (char *sl; (sl = strrchr(up, '/'));) {
                                sl[sl == up ? 1 : 0] = 0;
                                _cleanup_close_ int a = fs_open(
                                        fs, up, CTL_FOPEN_PATH | CTL_FOPEN_DIRECTORY, 0, 0, 0);
                                if (a >= 0)
                                        return read_only(fs, a, field, dir, e);
                                if (sl == up)
                                        break;
                        }
                }
                if (r < 0)
                        return path_err(r, field, dir, e);
                fd = fs_open(fs, dir, CTL_FOPEN_PATH | CTL_FOPEN_DIRECTORY, 0, 0, 0);
        }
        if (fd < 0)
                return path_err(fd, field, dir, e);
        int r = fs_check(fd, field, dir, NULL, e);
        if (r < 0) {
                close(fd);
                return r;
        }
        return fd;
}

static enum sbx_file_kind kind_of(mode_t m) {
        return S_ISREG(m)   ? SBX_FILE_REGULAR
               : S_ISDIR(m) ? SBX_FILE_DIRECTORY
               : S_ISLNK(m) ? SBX_FILE_SYMLINK
                            : SBX_FILE_OTHER;
}

/* Fill ret from st; a symlink's target read from dir_fd/name (an O_PATH
 * fd of the symlink itself and "" work too). */
static int info_fill(const char *path, const struct stat *st, int dir_fd, const char *name,
                     struct sbx_file_info *ret) {
        *ret = (struct sbx_file_info){
                .kind = kind_of(st->st_mode),
                .size = S_ISREG(st->st_mode) || S_ISLNK(st->st_mode) ? (uint64_t) st->st_size : 0,
                .mode = st->st_mode & 07777,
                .uid = st->st_uid,
                .gid = st->st_gid,
                .mtime_ns = (int64_t) st->st_mtim.tv_sec * 1000000000LL + st->st_mtim.tv_nsec,
                .path = strdup(path),
        };
        if (!ret->path)
                return -ENOMEM;
        if (S_ISLNK(st->st_mode) && dir_fd >= 0) {
                char buf[SBX_FILE_PATH_MAX + 1];
                ssize_t n = readlinkat(dir_fd, name, buf, sizeof(buf) - 1);
                if (n >= 0) {
                        ret->link = strndup(buf, (size_t) n);
                        if (!ret->link)
                                return -ENOMEM;
                }
        }
        return 0;
}

void sbx_file_info_clear(struct sbx_file_info *f) {
        if (!f)
                return;
        free(f->path);
        free(f->link);
        *f = (struct sbx_file_info){0};
}

void sbx_file_infos_free(struct sbx_file_info *f, size_t n) {
        for (size_t i = 0; f && i < n; i++)
                sbx_file_info_clear(&f[i]);
        free(f);
}

/* abs without trailing slashes (so that O_NOFOLLOW applies to its last
 * component); "/" stays. heap. */
static char *strip(const char *abs) {
        char *p = strdup(abs);
        for (size_t n = p ? strlen(p) : 0; n > 1 && p[n - 1] == '/';)
                p[--n] = 0;
        return p;
}

/* The entry at abs itself (a final symlink not followed): an O_PATH fd
 * and its stat, checked not to be on a kernel file system. */
static int entry_open(const struct sbx_fs *fs, const char *field, const char *abs, struct stat *st,
                      struct wr_err *e) {
        _cleanup_free_ char *p = strip(abs);
        if (!p)
                return err_set(e, -ENOMEM, "out of memory");
        _cleanup_close_ int fd = fs_open(fs, p, CTL_FOPEN_PATH | CTL_FOPEN_NOFOLLOW, 0, 0, 0);
        if (fd < 0)
                return fd == -ENOENT ? -ENOENT : path_err(fd, field, abs, e);
        int r = fs_check(fd, field, abs, NULL, e);
        if (r < 0)
                return r;
        if (fstat(fd, st) < 0)
                return err_set(e, -errno, "%s: stat: %m", field);
        return TAKE_FD(fd);
}

/* ---- read, stat ---- */

int sbx_file_open_read(const struct sbx_fs *fs, const char *field, const char *abs, int *ret_fd,
                       struct stat *st, struct wr_err *e) {
        /* O_PATH first: a FIFO or a device is not opened at all (no side
         * effect, never blocks); the checks run on the inode the fd pins;
         * then opened for reading (by init: no permission of warrend's
         * own is needed to read it), and must be that same inode */
        _cleanup_close_ int p = fs_open(fs, abs, CTL_FOPEN_PATH, 0, 0, 0);
        if (p < 0)
                return path_err(p, field, abs, e);
        int r = fs_check(p, field, abs, NULL, e);
        if (r < 0)
                return r;
        if (fstat(p, st) < 0)
                return err_set(e, -errno, "%s: stat: %m", field);
        if (S_ISDIR(st->st_mode))
                return PRECONDITION(e, -EISDIR,
                                    "%s: \"%.*s\" is a directory; list it (ListDir) instead", field,
                                    SHOW(abs));
        if (!S_ISREG(st->st_mode))
                return PRECONDITION(e, -EINVAL,
                                    "%s: \"%.*s\" is not a regular file (a device, FIFO or "
                                    "socket); the file API reads regular files only",
                                    field, SHOW(abs));
        _cleanup_close_ int fd = fs_open(fs, abs, CTL_FOPEN_READ, 0, 0, 0);
        if (fd < 0)
                return path_err(fd, field, abs, e);
        struct stat again;
        if (fstat(fd, &again) < 0 || again.st_dev != st->st_dev || again.st_ino != st->st_ino)
                return err_setx(e, -ESTALE, WR_STATUS_ABORTED, WR_FAULT_CLIENT,
                                "%s: \"%.*s\" was replaced by the sandbox meanwhile; read again",
                                field, SHOW(abs));
        *st = again;
        *ret_fd = TAKE_FD(fd);
        return 0;
}

int sbx_file_stat(const struct sbx_fs *fs, const char *field, const char *abs,
                  struct sbx_file_info *ret, struct wr_err *e) {
        struct stat st;
        /* "/" (and "/.", "/..") is the root itself */
        size_t n = strspn(abs, "/");
        if (!abs[n] || streq(abs + n, ".") || streq(abs + n, "..")) {
                _cleanup_close_ int fd = dir_open(fs, field, abs, e);
                if (fd < 0)
                        return fd;
                if (fstat(fd, &st) < 0)
                        return err_set(e, -errno, "%s: stat: %m", field);
                return info_fill(abs, &st, -EBADF, NULL, ret) < 0 ? -ENOMEM : 0;
        }
        _cleanup_free_ char *dir = NULL, *leaf = NULL;
        int r = sbx_file_path_split(field, abs, &dir, &leaf, e);
        if (r < 0)
                return r;
        _cleanup_close_ int fd = entry_open(fs, field, abs, &st, e);
        if (fd == -ENOENT)
                return path_err(fd, field, abs, e);
        if (fd < 0)
                return fd;
        return info_fill(abs, &st, fd, "", ret) < 0 ? err_set(e, -ENOMEM, "out of memory") : 0;
}

/* ---- remove, mkdir, rename ---- */

int sbx_file_remove(const struct sbx_fs *fs, const char *field, const char *abs, bool recursive,
                    struct wr_err *e) {
        _cleanup_free_ char *dir = NULL, *leaf = NULL;
        int r = sbx_file_path_split(field, abs, &dir, &leaf, e);
        if (r < 0)
                return r;
        _cleanup_close_ int d = dir_open(fs, field, dir, e);
        if (d < 0)
                return d;
        if ((r = dir_writable(fs, d, field, abs, e)) < 0)
                return r;
        r = fs_op(fs, CTL_FILE_REMOVE, recursive ? CTL_FOP_RECURSIVE : 0, 0, 0, 0, abs, NULL, 0, 0);
        switch (r) {
        case 0:
                return 0;
        case -ENOTEMPTY:
        case -EEXIST:
                return PRECONDITION(e, -ENOTEMPTY,
                                    "%s: directory \"%.*s\" is not empty; remove it with "
                                    "recursive",
                                    field, SHOW(abs));
        case -EBUSY:
                return PRECONDITION(e, -EBUSY,
                                    "%s: \"%.*s\" is (or holds) a mount point, e.g. a volume; "
                                    "its mount stays",
                                    field, SHOW(abs));
        default:
                return path_err(r, field, abs, e);
        }
}

int sbx_file_mkdir(const struct sbx_fs *fs, const char *field, const char *abs, mode_t mode,
                   uint32_t uid, uint32_t gid, bool parents, struct sbx_file_info *ret,
                   struct wr_err *e) {
        _cleanup_free_ char *dir = NULL, *leaf = NULL;
        int r = sbx_file_path_split(field, abs, &dir, &leaf, e);
        if (r < 0)
                return r;
        _cleanup_close_ int d =
                parents ? dir_make(fs, field, dir, uid, gid, e) : dir_open(fs, field, dir, e);
        if (d < 0)
                return d;
        struct stat st;
        _cleanup_close_ int x = entry_open(fs, field, abs, &st, e);
        if (x >= 0) {
                if (parents && S_ISDIR(st.st_mode))
                        return info_fill(abs, &st, x, "", ret) < 0 ? -ENOMEM : 0;
                return err_setx(e, -EEXIST, WR_STATUS_ALREADY_EXISTS, WR_FAULT_CLIENT,
                                "%s: \"%.*s\" exists", field, SHOW(abs));
        }
        if (x != -ENOENT)
                return x;
        if ((r = dir_writable(fs, d, field, abs, e)) < 0)
                return r;
        r = fs_op(fs, CTL_FILE_MKDIR, CTL_FOP_OWNER, (mode & 07777) ? (mode & 07777) : 0755, uid,
                  gid, abs, NULL, 0, 0);
        if (r == -EEXIST)
                return err_setx(e, -EEXIST, WR_STATUS_ALREADY_EXISTS, WR_FAULT_CLIENT,
                                "%s: \"%.*s\" exists", field, SHOW(abs));
        if (r < 0)
                return path_err(r, field, abs, e);
        return sbx_file_stat(fs, field, abs, ret, e);
}

int sbx_file_rename(const struct sbx_fs *fs, const char *from, const char *to, bool no_replace,
                    struct sbx_file_info *ret, struct wr_err *e) {
        _cleanup_free_ char *fdir = NULL, *fleaf = NULL, *tdir = NULL, *tleaf = NULL;
        int r = sbx_file_path_split("from", from, &fdir, &fleaf, e);
        if (r < 0 || (r = sbx_file_path_split("to", to, &tdir, &tleaf, e)) < 0)
                return r;
        _cleanup_close_ int fd = dir_open(fs, "from", fdir, e);
        if (fd < 0)
                return fd;
        _cleanup_close_ int td = dir_open(fs, "to", tdir, e);
        if (td < 0)
                return td;
        if ((r = dir_writable(fs, fd, "from", from, e)) < 0 ||
            (r = dir_writable(fs, td, "to", to, e)) < 0)
                return r;
        r = fs_op(fs, CTL_FILE_RENAME, no_replace ? CTL_FOP_NOREPLACE : 0, 0, 0, 0, from, to, 0, 0);
        switch (r) {
        case 0:
                break;
        case -EXDEV:
                return PRECONDITION(e, r,
                                    "to: \"%.*s\" is on another mount than from (e.g. a "
                                    "volume and the sandbox's root); copy and remove "
                                    "instead",
                                    SHOW(to));
        case -EEXIST:
                return err_setx(e, r, WR_STATUS_ALREADY_EXISTS, WR_FAULT_CLIENT,
                                "to: \"%.*s\" exists (no_replace)", SHOW(to));
        case -ENOTEMPTY:
                return PRECONDITION(e, r, "to: \"%.*s\" is a directory that is not empty",
                                    SHOW(to));
        case -EISDIR:
        case -ENOTDIR:
                return PRECONDITION(e, r,
                                    "to: \"%.*s\" and from are not both directories "
                                    "(or both not)",
                                    SHOW(to));
        case -EINVAL:
                return INVALID(e, "to: \"%.*s\" is inside from", SHOW(to));
        case -EBUSY:
                return PRECONDITION(e, r, "from: \"%.*s\" is a mount point", SHOW(from));
        case -ENOENT:
                return path_err(r, "from", from, e);
        default:
                return path_err(r, "to", to, e);
        }
        return sbx_file_stat(fs, "to", to, ret, e);
}

/* One of the sandbox's etc files opened for reading by init (a regular
 * file: anything else is left out, as a missing one): its length (*ret
 * heap) or a negative errno. */
static ssize_t etc_read(const struct sbx_fs *fs, const char *path, char **ret) {
        *ret = NULL;
        _cleanup_close_ int p = fs_open(fs, path, CTL_FOPEN_PATH, 0, 0, 0);
        struct stat st;
        if (p < 0)
                return p == -ENOENT ? -ENOENT : p;
        if (fstat(p, &st) < 0)
                return -errno;
        if (!S_ISREG(st.st_mode))
                return -EBADFD; /* a FIFO, a directory: never opened */
        _cleanup_close_ int fd = fs_open(fs, path, CTL_FOPEN_READ, 0, 0, 0);
        if (fd < 0)
                return fd == -EINVAL ? -EBADFD : fd;
        return sbx_etc_read(fd, ret);
}

int sbx_file_etc(const struct sbx_fs *fs, struct sbx_etc *ret) {
        *ret = (struct sbx_etc){0};
        ret->passwd_len = etc_read(fs, "/etc/passwd", &ret->passwd);
        ret->group_len = etc_read(fs, "/etc/group", &ret->group);
        /* an init that does not answer: the caller says so */
        ssize_t n = ret->passwd_len;
        if (n == -ETIMEDOUT || n == -ECONNRESET || n == -EPIPE || n == -EBADMSG) {
                sbx_etc_clear(ret);
                return (int) n;
        }
        return 0;
}

void sbx_etc_clear(struct sbx_etc *etc) {
        if (!etc)
                return;
        free(etc->passwd);
        free(etc->group);
        *etc = (struct sbx_etc){0};
}

int sbx_file_user(const struct sbx_fs *fs, const char *field, const char *spec, uint32_t *uid,
                  uint32_t *gid, struct wr_err *e) {
        struct sbx_etc etc;
        struct sbx_user u;
        int r = sbx_file_etc(fs, &etc);
        if (r < 0)
                return path_err(r, field, "/etc/passwd", e);
        r = sbx_user_resolve_etc(&etc, spec, field, &u, e);
        sbx_etc_clear(&etc);
        if (r < 0)
                return r;
        *uid = u.uid;
        *gid = u.gid;
        return 0;
}

static void tmp_name(char *buf, size_t size, int tries);

/* ---- write ---- */

struct sbx_file_write {
        const struct sbx_fs *fs;
        int dir_fd, fd; /* dir_fd: O_PATH of the target's directory */
        char *path, *dir, *tmp_path;
        mode_t mode;
        uint32_t uid, gid;
        uint64_t size, flushed;
        bool durable, committed;
};

/* Writeback is started every this many bytes on a durable mount, so the
 * fsync at the commit has little left to do. */
#define WRITE_WRITEBACK (8u << 20)

void sbx_file_write_free(struct sbx_file_write *w) {
        if (!w)
                return;
        if (w->fd >= 0 && !w->committed)
                (void) fs_op(w->fs, CTL_FILE_REMOVE, 0, 0, 0, 0, w->tmp_path, NULL, 0, 0);
        safe_close(w->fd);
        safe_close(w->dir_fd);
        free(w->path);
        free(w->dir);
        free(w->tmp_path);
        free(w);
}

static void writep(struct sbx_file_write **w) {
        sbx_file_write_free(*w);
}

/* What is at abs before a write or symlink replaces it: a regular file
 * (1, *st filled), a symlink (2), nothing (0); a directory, a device, FIFO
 * or socket are refused. */
static int replaced(const struct sbx_fs *fs, const char *field, const char *abs, struct stat *st,
                    struct wr_err *e) {
        _cleanup_close_ int x = entry_open(fs, field, abs, st, e);
        if (x == -ENOENT)
                return 0;
        if (x < 0)
                return x;
        if (S_ISDIR(st->st_mode))
                return PRECONDITION(e, -EISDIR, "%s: \"%.*s\" is a directory", field, SHOW(abs));
        if (!S_ISREG(st->st_mode) && !S_ISLNK(st->st_mode))
                return PRECONDITION(e, -EINVAL,
                                    "%s: \"%.*s\" is a device, FIFO or socket; remove it first "
                                    "to put a file there",
                                    field, SHOW(abs));
        return S_ISREG(st->st_mode) ? 1 : 2;
}

int sbx_file_write_begin(const struct sbx_fs *fs, const char *field, const char *abs, mode_t mode,
                         bool has_owner, uint32_t uid, uint32_t gid, struct sbx_file_write **ret,
                         struct wr_err *e) {
        _cleanup_(writep) struct sbx_file_write *w = calloc(1, sizeof(*w));
        if (!w)
                return err_set(e, -ENOMEM, "out of memory");
        w->fs = fs;
        w->dir_fd = w->fd = -EBADF;
        _cleanup_free_ char *leaf = NULL;
        int r = sbx_file_path_split(field, abs, &w->dir, &leaf, e);
        if (r < 0)
                return r;
        if (!(w->path = strdup(abs)))
                return err_set(e, -ENOMEM, "out of memory");
        w->uid = has_owner ? uid : fs->uid;
        w->gid = has_owner ? gid : fs->gid;
        w->mode = (mode & 07777) ? (mode & 07777) : 0644;
        if ((w->dir_fd = dir_make(fs, field, w->dir, w->uid, w->gid, e)) < 0)
                return w->dir_fd;
        struct statfs sf;
        if ((r = fs_check(w->dir_fd, field, abs, &sf, e)) < 0)
                return r;
        if (sf.f_flags & ST_RDONLY)
                return read_only(fs, w->dir_fd, field, abs, e);
        /* the sandbox's own layer (overlay) and tmpfs do not outlive the
         * host; a volume (or another disk mount) does: fsync there */
        w->durable = sf.f_type != OVERLAYFS_SUPER_MAGIC && sf.f_type != TMPFS_MAGIC &&
                     sf.f_type != RAMFS_MAGIC;
        struct stat st;
        if ((r = replaced(fs, field, abs, &st, e)) < 0)
                return r;
        if (r == 1) {
                if (!(mode & 07777))
                        w->mode = st.st_mode & 07777;
                if (!has_owner) {
                        w->uid = wr_id_inside(st.st_uid, fs->id_base, fs->id_count);
                        w->gid = wr_id_inside(st.st_gid, fs->id_base, fs->id_count);
                }
        }
        /* the temp file: made by init (or as the sandbox's root), owned
         * already, 0600 until the commit gives it its mode (so set-id bits
         * are not cleared by the writes) */
        for (int tries = 0; w->fd < 0; tries++) {
                char tmp[48];
                tmp_name(tmp, sizeof(tmp), tries);
                free(w->tmp_path);
                if (!(w->tmp_path = join(w->dir, tmp)))
                        return err_set(e, -ENOMEM, "out of memory");
                /* EXCL: never follows a symlink at the name */
                r = fs_open(fs, w->tmp_path,
                            CTL_FOPEN_WRITE | CTL_FOPEN_CREATE | CTL_FOPEN_EXCL | CTL_FOPEN_OWNER,
                            0600, w->uid, w->gid);
                if (r >= 0)
                        w->fd = r;
                else if (r != -EEXIST || tries > 8)
                        return r == -EROFS ? read_only(fs, w->dir_fd, field, abs, e)
                                           : path_err(r, field, abs, e);
        }
        *ret = TAKE_PTR(w);
        return 0;
}

int sbx_file_write_data(struct sbx_file_write *w, const void *buf, size_t n, struct wr_err *e) {
        const char *b = buf;
        while (n > 0) {
                ssize_t k = write(w->fd, b, n);
                if (k < 0 && errno == EINTR)
                        continue;
                if (k < 0)
                        return path_err(-errno, "data", w->path, e);
                b += k;
                n -= (size_t) k;
                w->size += (uint64_t) k;
        }
        if (w->durable && w->size - w->flushed >= WRITE_WRITEBACK) {
                (void) sync_file_range(w->fd, (off_t) w->flushed, (off_t) (w->size - w->flushed),
                                       SYNC_FILE_RANGE_WRITE);
                w->flushed = w->size;
        }
        return 0;
}

int sbx_file_write_commit(struct sbx_file_write *w, struct sbx_file_info *ret, struct wr_err *e) {
        const struct sbx_fs *fs = w->fs;
        if (w->durable && fsync(w->fd) < 0)
                return path_err(-errno, "data", w->path, e);
        /* its mode, then the rename: both only while the temp name is
         * still our file (the sandbox may have moved it: else its object
         * would be put in place) */
        struct stat a;
        if (fstat(w->fd, &a) < 0)
                return err_set(e, -errno, "stat: %m");
        int r = fs_op(fs, CTL_FILE_RENAME, CTL_FOP_EXPECT | CTL_FOP_CHMOD, w->mode, 0, 0,
                      w->tmp_path, w->path, (uint64_t) a.st_dev, (uint64_t) a.st_ino);
        if (r == -ESTALE || r == -ENOENT)
                return err_setx(e, -ESTALE, WR_STATUS_ABORTED, WR_FAULT_CLIENT,
                                "meta.path: the temp file of \"%.*s\" was moved by the "
                                "sandbox meanwhile; write again",
                                SHOW(w->path));
        if (r == -EISDIR || r == -ENOTEMPTY || r == -EEXIST)
                return PRECONDITION(e, -EISDIR, "meta.path: \"%.*s\" is a directory",
                                    SHOW(w->path));
        if (r < 0)
                return path_err(r, "meta.path", w->path, e);
        w->committed = true;
        if (w->durable) {
                _cleanup_close_ int d =
                        fs_open(fs, w->dir, CTL_FOPEN_READ | CTL_FOPEN_DIRECTORY, 0, 0, 0);
                if (d >= 0)
                        (void) fsync(d);
        }
        if (fstat(w->fd, &a) < 0)
                return err_set(e, -errno, "stat: %m");
        return info_fill(w->path, &a, -EBADF, NULL, ret) < 0 ? err_set(e, -ENOMEM, "out of memory")
                                                             : 0;
}

/* A name for a temp entry in a directory: ".warren-write-<random>". */
static void tmp_name(char *buf, size_t size, int tries) {
        uint64_t rnd = 0;
        if (getrandom(&rnd, sizeof(rnd), GRND_NONBLOCK) < 0)
                rnd = (uint64_t) tries * 7919u + (uint64_t) getpid();
        snprintf(buf, size, ".warren-write-%016llx", (unsigned long long) rnd);
}

int sbx_file_symlink(const struct sbx_fs *fs, const char *field, const char *abs,
                     const char *target, bool has_owner, uint32_t uid, uint32_t gid,
                     struct sbx_file_info *ret, struct wr_err *e) {
        _cleanup_free_ char *dir = NULL, *leaf = NULL;
        int r = sbx_file_path_split(field, abs, &dir, &leaf, e);
        if (r < 0)
                return r;
        if (!*target || strlen(target) > SBX_FILE_PATH_MAX - 1)
                return INVALID(e, "meta.symlink_target: give 1 to %d bytes", SBX_FILE_PATH_MAX - 1);
        if (!has_owner) {
                uid = fs->uid;
                gid = fs->gid;
        }
        _cleanup_close_ int d = dir_make(fs, field, dir, uid, gid, e);
        if (d < 0)
                return d;
        if ((r = dir_writable(fs, d, field, abs, e)) < 0)
                return r;
        struct stat st;
        if ((r = replaced(fs, field, abs, &st, e)) < 0)
                return r;
        if (r > 0 && !has_owner) {
                uid = wr_id_inside(st.st_uid, fs->id_base, fs->id_count);
                gid = wr_id_inside(st.st_gid, fs->id_base, fs->id_count);
        }
        _cleanup_free_ char *tmp_path = NULL;
        for (int tries = 0;; tries++) {
                char tmp[48];
                tmp_name(tmp, sizeof(tmp), tries);
                free(tmp_path);
                if (!(tmp_path = join(dir, tmp)))
                        return err_set(e, -ENOMEM, "out of memory");
                r = fs_op(fs, CTL_FILE_SYMLINK, CTL_FOP_OWNER, 0, uid, gid, tmp_path, target, 0, 0);
                if (r == 0)
                        break;
                if (r != -EEXIST || tries > 8)
                        return path_err(r, field, abs, e);
        }
        if ((r = fs_op(fs, CTL_FILE_RENAME, 0, 0, 0, 0, tmp_path, abs, 0, 0)) < 0) {
                (void) fs_op(fs, CTL_FILE_REMOVE, 0, 0, 0, 0, tmp_path, NULL, 0, 0);
                return path_err(r, field, abs, e);
        }
        return sbx_file_stat(fs, field, abs, ret, e);
}

/* ---- listing ---- */

/* Each directory is one FILE_LIST: its entries come in a sealed memfd
 * (decoded strictly: the sandbox wrote them, rt_ctl_file_entry_next),
 * are copied out, sorted, and handed out in batches; a recursive listing
 * keeps one frame per directory level. */

struct lentry {
        char *name, *link;
        struct stat st; /* mode, ids (the host's), size, mtime */
};

struct frame {
        char *path;
        struct lentry *ents;
        size_t n, i;
        unsigned depth;
};

struct sbx_file_list {
        const struct sbx_fs *fs;
        struct frame stack[SBX_FILE_LIST_DEPTH_MAX + 1];
        size_t depth; /* frames in use */
        unsigned max_depth;
        bool recursive;
};

static int lentry_cmp(const void *a, const void *b) {
        return strcmp(((const struct lentry *) a)->name, ((const struct lentry *) b)->name);
}

static void frame_clear(struct frame *f) {
        free(f->path);
        for (size_t i = 0; i < f->n; i++) {
                free(f->ents[i].name);
                free(f->ents[i].link);
        }
        free(f->ents);
        *f = (struct frame){0};
}

/* The entries of a FILE_LISTED memfd (count of them) into f. */
static int entries_read(const struct sbx_fs *fs, int memfd, uint32_t count, bool ids_inside,
                        struct frame *f) {
        struct stat mst;
        if (fstat(memfd, &mst) < 0)
                return -errno;
        size_t len = (size_t) mst.st_size;
        /* at most CTL_FILE_LIST_MAX entries of at most 32 + 255 + 4095 bytes */
        if (mst.st_size < 0 || len > (size_t) count * (sizeof(struct ctl_file_entry) +
                                                       CTL_FILE_NAME_MAX + CTL_PATH_MAX))
                return -EBADMSG;
        if (count == 0)
                return len == 0 ? 0 : -EBADMSG;
        void *map = mmap(NULL, len ? len : 1, PROT_READ, MAP_PRIVATE, memfd, 0);
        if (map == MAP_FAILED)
                return -errno;
        f->ents = calloc(count, sizeof(*f->ents));
        int r = f->ents ? 0 : -ENOMEM;
        size_t pos = 0;
        struct rt_ctl_file_entry x;
        while (r == 0 && f->n < count) {
                int k = rt_ctl_file_entry_next(map, len, &pos, &x);
                if (k <= 0) {
                        r = k < 0 ? k : -EBADMSG; /* fewer than count */
                        break;
                }
                struct lentry *le = &f->ents[f->n];
                le->st = (struct stat){
                        .st_mode = x.e.mode,
                        .st_uid = ids_inside ? wr_id_host(x.e.uid, fs->id_base, fs->id_count)
                                             : x.e.uid,
                        .st_gid = ids_inside ? wr_id_host(x.e.gid, fs->id_base, fs->id_count)
                                             : x.e.gid,
                        .st_size = (off_t) x.e.size,
                };
                le->st.st_mtim.tv_sec = x.e.mtime_ns / 1000000000LL;
                le->st.st_mtim.tv_nsec = x.e.mtime_ns % 1000000000LL;
                if (le->st.st_mtim.tv_nsec < 0) {
                        le->st.st_mtim.tv_sec--;
                        le->st.st_mtim.tv_nsec += 1000000000LL;
                }
                le->name = strndup(x.name, x.e.name_len);
                le->link = S_ISLNK(x.e.mode) ? strndup(x.link, x.e.link_len) : NULL;
                f->n++;
                if (!le->name || (S_ISLNK(x.e.mode) && !le->link))
                        r = -ENOMEM;
        }
        if (r == 0 && pos != len)
                r = -EBADMSG; /* more than count */
        munmap(map, len ? len : 1);
        return r;
}

/* Push a frame for directory path at depth: 0, 1 when it is on a kernel
 * file system (not entered), or a negative errno (ret_type: its fs). */
static int frame_push(struct sbx_file_list *l, const char *path, unsigned depth, bool top,
                      unsigned long *ret_type) {
        struct ctl_file_listed li;
        bool inside;
        _cleanup_close_ int memfd = -EBADF;
        int r = fs_list(l->fs, path, top ? 0 : CTL_FOP_NOFOLLOW, &li, &memfd, &inside);
        if (r < 0)
                return r;
        *ret_type = (unsigned long) li.fs_type;
        if (kernel_fs((unsigned long) li.fs_type))
                return 1;
        if (top && li.truncated)
                return -EFBIG;
        struct frame *f = &l->stack[l->depth];
        *f = (struct frame){.depth = depth};
        if (!(f->path = strdup(path))) {
                frame_clear(f);
                return -ENOMEM;
        }
        if ((r = entries_read(l->fs, memfd, li.count, inside, f)) < 0) {
                frame_clear(f);
                return r;
        }
        if (f->n > 1)
                qsort(f->ents, f->n, sizeof(*f->ents), lentry_cmp);
        l->depth++;
        return 0;
}

void sbx_file_list_free(struct sbx_file_list *l) {
        if (!l)
                return;
        while (l->depth > 0)
                frame_clear(&l->stack[--l->depth]);
        free(l);
}

int sbx_file_list_open(const struct sbx_fs *fs, const char *field, const char *abs, bool recursive,
                       unsigned max_depth, struct sbx_file_list **ret, struct wr_err *e) {
        struct sbx_file_list *l = calloc(1, sizeof(*l));
        if (!l)
                return err_set(e, -ENOMEM, "out of memory");
        l->fs = fs;
        l->recursive = recursive;
        l->max_depth = max_depth && max_depth < SBX_FILE_LIST_DEPTH_MAX ? max_depth
                                                                        : SBX_FILE_LIST_DEPTH_MAX;
        /* "/a/b/" lists as "/a/b" */
        _cleanup_free_ char *base = strip(abs);
        if (!base) {
                sbx_file_list_free(l);
                return err_set(e, -ENOMEM, "out of memory");
        }
        unsigned long type = 0;
        int r = frame_push(l, base, 0, true, &type);
        if (r != 0)
                sbx_file_list_free(l);
        if (r == 1)
                return fs_type_check(type, field, abs, e);
        if (r == -EFBIG)
                return err_setx(e, r, WR_STATUS_RESOURCE_EXHAUSTED, WR_FAULT_CLIENT,
                                "%s: \"%.*s\" holds more than %u entries; list a smaller "
                                "directory, or run a command in the sandbox",
                                field, SHOW(abs), CTL_FILE_LIST_MAX);
        if (r < 0)
                return path_err(r, field, abs, e);
        *ret = l;
        return 0;
}

int sbx_file_list_next(struct sbx_file_list *l, size_t max, struct sbx_file_info **ret,
                       size_t *n_ret, struct wr_err *e) {
        struct sbx_file_info *out = calloc(max ? max : 1, sizeof(*out));
        size_t n = 0;
        int r = 0;
        if (!out)
                return err_set(e, -ENOMEM, "out of memory");
        while (n < max && l->depth > 0) {
                struct frame *f = &l->stack[l->depth - 1];
                if (f->i >= f->n) {
                        frame_clear(f);
                        l->depth--;
                        continue;
                }
                const struct lentry *le = &f->ents[f->i++];
                unsigned depth = f->depth;
                _cleanup_free_ char *path = join(f->path, le->name);
                if (!path) {
                        r = -ENOMEM;
                        break;
                }
                if ((r = info_fill(path, &le->st, -EBADF, NULL, &out[n])) < 0)
                        break;
                if (le->link && !(out[n].link = strdup(le->link))) {
                        n++;
                        r = -ENOMEM;
                        break;
                }
                n++;
                if (!l->recursive || !S_ISDIR(le->st.st_mode) || depth + 1 >= l->max_depth ||
                    l->depth > SBX_FILE_LIST_DEPTH_MAX)
                        continue;
                /* enter it: never through a symlink (swapped in since it was
                 * listed: refused by init), never into a kernel fs */
                unsigned long type;
                int k = frame_push(l, path, depth + 1, false, &type);
                if (k == -ENOMEM || k == -ETIMEDOUT || k == -ECONNRESET || k == -EPIPE) {
                        r = k;
                        break;
                }
                /* else: unreadable or a kernel fs: listed, not entered */
        }
        if (r < 0) {
                sbx_file_infos_free(out, n);
                return r == -ENOMEM
                               ? err_set(e, r, "list: out of memory")
                               : path_err(r, "path", l->stack[0].path ? l->stack[0].path : "/", e);
        }
        *ret = out;
        *n_ret = n;
        return 0;
}

/* ---- watch ---- */

struct wdir {
        int wd;
        char *path;
};

struct sbx_watch {
        int ifd, root_fd;
        int top_wd;
        bool recursive;
        struct wdir *dirs;
        size_t n, cap;
};

#define WATCH_MASK                                                                                 \
        (IN_CREATE | IN_DELETE | IN_MODIFY | IN_ATTRIB | IN_CLOSE_WRITE | IN_MOVED_FROM |          \
         IN_MOVED_TO | IN_DELETE_SELF | IN_MOVE_SELF | IN_ONLYDIR | IN_EXCL_UNLINK)

static struct wdir *wdir_find(struct sbx_watch *w, int wd) {
        for (size_t i = 0; i < w->n; i++)
                if (w->dirs[i].wd == wd)
                        return &w->dirs[i];
        return NULL;
}

/* Watch directory fd (O_PATH, checked) known as path. 0, -ENOSPC past the
 * cap or the kernel's limit, -errno. */
static int watch_add(struct sbx_watch *w, int fd, const char *path) {
        char p[64];
        snprintf(p, sizeof(p), "/proc/self/fd/%d", fd);
        int wd = inotify_add_watch(w->ifd, p, WATCH_MASK);
        if (wd < 0)
                return -errno;
        struct wdir *old = wdir_find(w, wd);
        if (old) { /* the same directory again (a bind mount, a rename) */
                char *np = strdup(path);
                if (!np)
                        return -ENOMEM;
                free(old->path);
                old->path = np;
                return 0;
        }
        if (w->n >= SBX_WATCH_DIRS_MAX) {
                (void) inotify_rm_watch(w->ifd, wd);
                return -ENOSPC;
        }
        if (w->n == w->cap) {
                size_t c = w->cap ? w->cap * 2 : 16;
                struct wdir *nd = realloc(w->dirs, c * sizeof(*nd));
                if (!nd)
                        return -ENOMEM;
                w->dirs = nd;
                w->cap = c;
        }
        if (!(w->dirs[w->n].path = strdup(path)))
                return -ENOMEM;
        w->dirs[w->n++].wd = wd;
        return wd;
}

/* Watch every directory under fd (O_RDONLY dir at path), depth-first,
 * never through symlinks or into kernel file systems. When evs is not
 * NULL, each entry found is reported CREATED (it appeared before its
 * directory was watched). */
static int watch_tree(struct sbx_watch *w, int fd, const char *path, unsigned depth,
                      struct sbx_watch_event **evs, size_t *n_evs);

static int ev_push(struct sbx_watch_event **evs, size_t *n, enum sbx_watch_kind kind,
                   const char *path, bool is_dir, uint32_t cookie) {
        struct sbx_watch_event *ne = realloc(*evs, (*n + 1) * sizeof(*ne));
        if (!ne)
                return -ENOMEM;
        *evs = ne;
        ne[*n] = (struct sbx_watch_event){.kind = kind, .is_dir = is_dir, .cookie = cookie};
        if (path && !(ne[*n].path = strdup(path)))
                return -ENOMEM;
        (*n)++;
        return 0;
}

static int watch_tree(struct sbx_watch *w, int fd, const char *path, unsigned depth,
                      struct sbx_watch_event **evs, size_t *n_evs) {
        if (depth > SBX_FILE_LIST_DEPTH_MAX)
                return 0;
        int dup_fd = openat(fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (dup_fd < 0)
                return 0;
        DIR *d = fdopendir(dup_fd);
        if (!d) {
                close(dup_fd);
                return -ENOMEM;
        }
        int r = 0;
        struct dirent *de;
        while (r >= 0 && (de = readdir(d))) {
                if (streq(de->d_name, ".") || streq(de->d_name, ".."))
                        continue;
                _cleanup_free_ char *sub_path = NULL;
                if (asprintf(&sub_path, "%s%s%s", path, streq(path, "/") ? "" : "/", de->d_name) <
                    0) {
                        r = -ENOMEM;
                        break;
                }
                struct stat st;
                if (fstatat(fd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
                        continue;
                if (evs && (r = ev_push(evs, n_evs, SBX_WATCH_CREATED, sub_path,
                                        S_ISDIR(st.st_mode), 0)) < 0)
                        break;
                if (!S_ISDIR(st.st_mode))
                        continue;
                _cleanup_close_ int sub =
                        openat2_in(fd, de->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW,
                                   RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS);
                if (sub < 0)
                        continue;
                struct statfs sf;
                if (fstatfs(sub, &sf) < 0 || kernel_fs((unsigned long) sf.f_type))
                        continue;
                r = watch_add(w, sub, sub_path);
                if (r >= 0)
                        r = watch_tree(w, sub, sub_path, depth + 1, evs, n_evs);
        }
        closedir(d);
        return r < 0 ? r : 0;
}

void sbx_watch_free(struct sbx_watch *w) {
        if (!w)
                return;
        safe_close(w->ifd);
        safe_close(w->root_fd);
        for (size_t i = 0; i < w->n; i++)
                free(w->dirs[i].path);
        free(w->dirs);
        free(w);
}

static void watchp(struct sbx_watch **w) {
        sbx_watch_free(*w);
}

int sbx_watch_fd(const struct sbx_watch *w) {
        return w->ifd;
}

int sbx_watch_new(int root_fd, const char *field, const char *abs, bool recursive,
                  struct sbx_watch **ret, struct wr_err *e) {
        _cleanup_(watchp) struct sbx_watch *w = calloc(1, sizeof(*w));
        if (!w)
                return err_set(e, -ENOMEM, "out of memory");
        w->ifd = w->root_fd = -EBADF;
        w->recursive = recursive;
        /* warrend's own lookup on root_fd (files.h: what others may read) */
        const struct sbx_fs own = {.root_fd = root_fd, .files_fd = -EBADF};
        _cleanup_close_ int p = dir_open(&own, field, abs, e);
        if (p < 0)
                return p;
        if ((w->root_fd = fcntl(root_fd, F_DUPFD_CLOEXEC, 3)) < 0)
                return err_set(e, -errno, "dup: %m");
        if ((w->ifd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC)) < 0)
                return err_setx(e, -errno, WR_STATUS_RESOURCE_EXHAUSTED, WR_FAULT_SERVICE,
                                "watch: inotify: %m (the host's inotify instances are used up)");
        _cleanup_free_ char *base = strdup(abs);
        if (!base)
                return err_set(e, -ENOMEM, "out of memory");
        for (size_t n = strlen(base); n > 1 && base[n - 1] == '/';)
                base[--n] = 0;
        int r = watch_add(w, p, base);
        if (r >= 0) {
                w->top_wd = r;
                if (recursive) {
                        _cleanup_close_ int d = reopen(p, O_RDONLY | O_DIRECTORY);
                        r = d < 0 ? d : watch_tree(w, d, base, 0, NULL, NULL);
                }
        }
        if (r == -ENOSPC)
                return err_setx(e, r, WR_STATUS_RESOURCE_EXHAUSTED, WR_FAULT_CLIENT,
                                "%s: more than %d directories under \"%.*s\" (or the host's "
                                "inotify watches are used up); watch a smaller tree",
                                field, SBX_WATCH_DIRS_MAX, SHOW(abs));
        if (r < 0)
                return path_err(r, field, abs, e);
        *ret = TAKE_PTR(w);
        return 0;
}

void sbx_watch_events_free(struct sbx_watch_event *evs, size_t n) {
        for (size_t i = 0; evs && i < n; i++)
                free(evs[i].path);
        free(evs);
}

static void wdir_drop(struct sbx_watch *w, int wd) {
        for (size_t i = 0; i < w->n; i++)
                if (w->dirs[i].wd == wd) {
                        free(w->dirs[i].path);
                        w->dirs[i] = w->dirs[--w->n];
                        return;
                }
}

/* A watched directory moved from old to new path: rewrite its subtree's. */
static void wdir_rename(struct sbx_watch *w, const char *old, const char *new) {
        size_t ol = strlen(old);
        for (size_t i = 0; i < w->n; i++) {
                char *p = w->dirs[i].path;
                if (strncmp(p, old, ol) != 0 || (p[ol] != 0 && p[ol] != '/'))
                        continue;
                char *np;
                if (asprintf(&np, "%s%s", new, p + ol) < 0)
                        continue;
                free(p);
                w->dirs[i].path = np;
        }
}

int sbx_watch_read(struct sbx_watch *w, struct sbx_watch_event **evs, size_t *n) {
        _Alignas(struct inotify_event) char buf[64 * 1024];
        bool gone = false;
        /* a MOVED_FROM of a watched dir waiting for its MOVED_TO */
        char *moved_from = NULL;
        uint32_t moved_cookie = 0;
        int r = 0;
        for (;;) {
                ssize_t len = read(w->ifd, buf, sizeof(buf));
                if (len < 0 && errno == EINTR)
                        continue;
                if (len < 0 && errno == EAGAIN)
                        break;
                if (len <= 0) {
                        r = len < 0 ? -errno : -EIO;
                        break;
                }
                for (char *p = buf; p < buf + len && r >= 0;) {
                        const struct inotify_event *ev = (const struct inotify_event *) p;
                        p += sizeof(*ev) + ev->len;
                        if (ev->mask & IN_Q_OVERFLOW) {
                                r = ev_push(evs, n, SBX_WATCH_OVERFLOW, NULL, false, 0);
                                continue;
                        }
                        if (ev->mask & IN_IGNORED) {
                                if (ev->wd == w->top_wd)
                                        gone = true;
                                wdir_drop(w, ev->wd);
                                continue;
                        }
                        struct wdir *wdir = wdir_find(w, ev->wd);
                        if (!wdir)
                                continue;
                        if (ev->mask & (IN_DELETE_SELF | IN_MOVE_SELF)) {
                                if (ev->wd == w->top_wd)
                                        gone = true;
                                continue;
                        }
                        const char *name = ev->len ? ev->name : "";
                        _cleanup_free_ char *path = NULL;
                        if (asprintf(&path, "%s%s%s", wdir->path,
                                     *name && !streq(wdir->path, "/") ? "/" : "", name) < 0) {
                                r = -ENOMEM;
                                break;
                        }
                        bool is_dir = ev->mask & IN_ISDIR;
                        enum sbx_watch_kind k = ev->mask & IN_CREATE        ? SBX_WATCH_CREATED
                                                : ev->mask & IN_DELETE      ? SBX_WATCH_DELETED
                                                : ev->mask & IN_MODIFY      ? SBX_WATCH_MODIFIED
                                                : ev->mask & IN_ATTRIB      ? SBX_WATCH_ATTRIB
                                                : ev->mask & IN_CLOSE_WRITE ? SBX_WATCH_CLOSE_WRITE
                                                : ev->mask & IN_MOVED_FROM  ? SBX_WATCH_MOVED_FROM
                                                : ev->mask & IN_MOVED_TO    ? SBX_WATCH_MOVED_TO
                                                                            : 0;
                        if (!k)
                                continue;
                        /* a directory's own ATTRIB/MODIFY also come from its
                         * parent's watch: report them once, from there */
                        if (!*name && ev->wd != w->top_wd)
                                continue;
                        if ((r = ev_push(evs, n, k, path, is_dir, ev->cookie)) < 0)
                                break;
                        if (!w->recursive || !is_dir)
                                continue;
                        if (k == SBX_WATCH_MOVED_FROM) {
                                free(moved_from);
                                moved_from = TAKE_PTR(path);
                                moved_cookie = ev->cookie;
                        } else if (k == SBX_WATCH_MOVED_TO && moved_from &&
                                   moved_cookie == ev->cookie) {
                                wdir_rename(w, moved_from, path);
                                free(moved_from);
                                moved_from = NULL;
                        } else if (k == SBX_WATCH_CREATED || k == SBX_WATCH_MOVED_TO) {
                                /* a new directory: watch it and what it
                                 * already holds (reported as created) */
                                _cleanup_close_ int d =
                                        openat2_in(w->root_fd, path,
                                                   O_RDONLY | O_DIRECTORY | O_NOFOLLOW, RESOLVE);
                                struct statfs sf;
                                if (d < 0 || fstatfs(d, &sf) < 0 ||
                                    kernel_fs((unsigned long) sf.f_type))
                                        continue;
                                int a = watch_add(w, d, path);
                                if (a >= 0)
                                        a = watch_tree(w, d, path, 0, evs, n);
                                if (a == -ENOSPC)
                                        r = ev_push(evs, n, SBX_WATCH_OVERFLOW, NULL, false, 0);
                                else if (a == -ENOMEM)
                                        r = a;
                        }
                }
                if (r < 0)
                        break;
        }
        free(moved_from);
        if (r < 0)
                return r;
        return gone ? 1 : 0;
}
