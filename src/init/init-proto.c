/* SPDX-License-Identifier: Apache-2.0 */
/* Strict decoder for the requests warren-init accepts. Every length is
 * checked before it is used; nothing is trusted, not even the daemon. */

#include <errno.h>
#include <stdbool.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "init/init-proto.h"

/* Walk count NUL-terminated strings starting at *pos in s[0..end). Stores
 * pointers into out (when non-NULL) and advances *pos. */
static int take_strings(const char *s, size_t end, size_t *pos, uint32_t count, const char **out,
                        int is_env) {
        for (uint32_t i = 0; i < count; i++) {
                size_t start = *pos;
                if (start >= end)
                        return -EINVAL;
                const char *nul = memchr(s + start, '\0', end - start);
                if (!nul)
                        return -EINVAL;
                size_t l = (size_t) (nul - (s + start));
                if (is_env) {
                        const char *eq = memchr(s + start, '=', l);
                        if (!eq || eq == s + start)
                                return -EINVAL;
                }
                if (out)
                        out[i] = s + start;
                *pos = start + l + 1;
        }
        return 0;
}

static int decode_spawn(const char *p, size_t len, struct init_spawn *ret) {
        struct ctl_spawn w;

        if (len < sizeof(w))
                return -EINVAL;
        memcpy(&w, p, sizeof(w));
        if (w.reserved != 0 || (w.flags & ~(uint32_t) CTL_SPAWN_FLAGS_ALL))
                return -EINVAL;
        if (w.strings_len != len - sizeof(w))
                return -EINVAL;
        if (w.argc < 1)
                return -EINVAL;
        if (w.argc > CTL_ARGS_MAX || w.envc > CTL_ARGS_MAX || w.argc + w.envc > CTL_ARGS_MAX)
                return -EMSGSIZE;
        if (w.uid == UINT32_MAX || w.gid == UINT32_MAX)
                return -EINVAL;

        const char *s = p + sizeof(w);
        size_t end = w.strings_len, pos = 0;

        /* cwd */
        const char *cwd;
        if (take_strings(s, end, &pos, 1, &cwd, 0) < 0)
                return -EINVAL;
        if (pos > CTL_PATH_MAX)
                return -EINVAL;

        const char **argv = calloc(w.argc + 1, sizeof(char *));
        const char **envp = calloc(w.envc + 1, sizeof(char *));
        if (!argv || !envp) {
                free(argv);
                free(envp);
                return -ENOMEM;
        }
        if (take_strings(s, end, &pos, w.argc, argv, 0) < 0 || argv[0][0] == '\0' ||
            take_strings(s, end, &pos, w.envc, envp, 1) < 0 || pos != end) {
                free(argv);
                free(envp);
                return -EINVAL;
        }

        *ret = (struct init_spawn){
                .flags = w.flags,
                .uid = w.uid,
                .gid = w.gid,
                .cols = w.cols,
                .rows = w.rows,
                .cwd = cwd[0] ? cwd : "/",
                .argv = argv,
                .envp = envp,
                .argc = w.argc,
                .envc = w.envc,
        };
        return 0;
}

/* An owner's ids: with OWNER never (uint32_t) -1, without it both 0. */
static bool owner_valid(bool owner, uint32_t uid, uint32_t gid) {
        return owner ? uid != UINT32_MAX && gid != UINT32_MAX : uid == 0 && gid == 0;
}

/* The rules of enum ctl_file_open_flags (ctl-proto.h). */
static int file_open_flags_valid(uint32_t f) {
        if (f & ~(uint32_t) CTL_FOPEN_FLAGS_ALL)
                return 0;
        uint32_t acc = f & (CTL_FOPEN_PATH | CTL_FOPEN_READ | CTL_FOPEN_WRITE | CTL_FOPEN_RDWR);
        if (acc == 0 || (acc & (acc - 1)) != 0) /* exactly one */
                return 0;
        if (acc == CTL_FOPEN_PATH &&
            (f & ~(uint32_t) (CTL_FOPEN_PATH | CTL_FOPEN_DIRECTORY | CTL_FOPEN_NOFOLLOW)))
                return 0;
        if ((f & CTL_FOPEN_CREATE) &&
            (!(acc & (CTL_FOPEN_WRITE | CTL_FOPEN_RDWR)) || !(f & CTL_FOPEN_EXCL)))
                return 0;
        if ((f & CTL_FOPEN_EXCL) && !(f & CTL_FOPEN_CREATE))
                return 0;
        if ((f & CTL_FOPEN_TRUNC) && !(acc & (CTL_FOPEN_WRITE | CTL_FOPEN_RDWR)))
                return 0;
        if ((f & CTL_FOPEN_OWNER) && !(f & CTL_FOPEN_CREATE))
                return 0;
        if ((f & CTL_FOPEN_DIRECTORY) && (f & (CTL_FOPEN_CREATE | CTL_FOPEN_TRUNC)))
                return 0;
        return 1;
}

static int decode_file_open(const char *p, size_t len, struct init_file_open *ret) {
        struct ctl_file_open w;

        if (len < sizeof(w))
                return -EINVAL;
        memcpy(&w, p, sizeof(w));
        if (w.reserved != 0 || !file_open_flags_valid(w.flags))
                return -EINVAL;
        if (w.path_len != len - sizeof(w) || w.path_len < 2 || w.path_len > CTL_PATH_MAX)
                return -EINVAL;
        const char *path = p + sizeof(w);
        if (path[0] != '/' || path[w.path_len - 1] != '\0' ||
            memchr(path, '\0', w.path_len - 1) != NULL)
                return -EINVAL;
        if (w.flags & CTL_FOPEN_CREATE) {
                if (w.mode & ~07777u)
                        return -EINVAL;
        } else if (w.mode != 0) {
                return -EINVAL;
        }
        if (!owner_valid(w.flags & CTL_FOPEN_OWNER, w.uid, w.gid))
                return -EINVAL;
        *ret = (struct init_file_open){
                .flags = w.flags, .mode = w.mode, .uid = w.uid, .gid = w.gid, .path = path};
        return 0;
}

/* The flags each of FILE_MKDIR .. FILE_LIST takes (ctl-proto.h). */
static uint32_t file_op_flags(uint32_t type) {
        switch (type) {
        case CTL_FILE_MKDIR:
                return CTL_FOP_OWNER | CTL_FOP_PARENTS;
        case CTL_FILE_REMOVE:
                return CTL_FOP_RECURSIVE;
        case CTL_FILE_RENAME:
                return CTL_FOP_NOREPLACE | CTL_FOP_EXPECT | CTL_FOP_CHMOD;
        case CTL_FILE_SYMLINK:
                return CTL_FOP_OWNER;
        default: /* CTL_FILE_LIST */
                return CTL_FOP_NOFOLLOW;
        }
}

/* One NUL-terminated string of exactly len bytes at p: no other NUL,
 * 2..CTL_PATH_MAX bytes, absolute when abs. */
static bool str_valid(const char *p, uint32_t len, bool abs) {
        if (len < 2 || len > CTL_PATH_MAX || p[len - 1] != '\0' || memchr(p, '\0', len - 1))
                return false;
        return !abs || p[0] == '/';
}

static int decode_file_op(uint32_t type, const char *p, size_t len, struct init_file_op *ret) {
        struct ctl_file_op w;

        if (len < sizeof(w))
                return -EINVAL;
        memcpy(&w, p, sizeof(w));
        if (w.flags & ~file_op_flags(type))
                return -EINVAL;
        if ((uint64_t) w.path_len + w.path2_len != len - sizeof(w))
                return -EINVAL;
        const char *path = p + sizeof(w), *path2 = path + w.path_len;
        if (!str_valid(path, w.path_len, true))
                return -EINVAL;
        bool two = type == CTL_FILE_RENAME || type == CTL_FILE_SYMLINK;
        if (two ? !str_valid(path2, w.path2_len, type == CTL_FILE_RENAME) : w.path2_len != 0)
                return -EINVAL;
        bool has_mode = type == CTL_FILE_MKDIR || (w.flags & CTL_FOP_CHMOD);
        if (has_mode ? (w.mode & ~07777u) != 0 : w.mode != 0)
                return -EINVAL;
        if (!owner_valid(w.flags & CTL_FOP_OWNER, w.uid, w.gid))
                return -EINVAL;
        if (!(w.flags & CTL_FOP_EXPECT) && (w.dev != 0 || w.ino != 0))
                return -EINVAL;
        *ret = (struct init_file_op){.flags = w.flags,
                                     .mode = w.mode,
                                     .uid = w.uid,
                                     .gid = w.gid,
                                     .dev = w.dev,
                                     .ino = w.ino,
                                     .path = path,
                                     .path2 = two ? path2 : NULL};
        return 0;
}

static int signo_valid(int32_t signo) {
        return signo >= 1 && signo <= SIGRTMAX;
}

int init_req_decode(const void *buf, size_t n, struct init_req *ret) {
        const char *p = buf;

        memset(ret, 0, sizeof(*ret));
        if (n < sizeof(struct ctl_hdr))
                return -EBADMSG;
        memcpy(&ret->hdr, p, sizeof(ret->hdr));
        if (n > CTL_MSG_MAX)
                return -EMSGSIZE;
        if (ret->hdr.magic != CTL_MAGIC || ret->hdr.reserved != 0 ||
            ret->hdr.len != n - sizeof(struct ctl_hdr))
                return -EBADMSG;

        p += sizeof(struct ctl_hdr);
        size_t len = ret->hdr.len;

        switch (ret->hdr.type) {
        case CTL_SPAWN:
                return decode_spawn(p, len, &ret->spawn);
        case CTL_SIGNAL:
                if (len != sizeof(ret->signal))
                        return -EINVAL;
                memcpy(&ret->signal, p, len);
                if (ret->signal.reserved ||
                    (ret->signal.flags & ~(uint32_t) CTL_SIGNAL_FLAGS_ALL) ||
                    !signo_valid(ret->signal.signo) || ret->signal.pid < 0 || ret->signal.pid == 1)
                        return -EINVAL;
                return 0;
        case CTL_RESIZE:
                if (len != sizeof(ret->resize))
                        return -EINVAL;
                memcpy(&ret->resize, p, len);
                if (ret->resize.reserved || ret->resize.cols == 0 || ret->resize.rows == 0)
                        return -EINVAL;
                return 0;
        case CTL_KILL_ALL:
                if (len != sizeof(ret->kill_all))
                        return -EINVAL;
                memcpy(&ret->kill_all, p, len);
                if (ret->kill_all.reserved || !signo_valid(ret->kill_all.signo))
                        return -EINVAL;
                return 0;
        case CTL_RELEASE:
                if (len != sizeof(ret->release))
                        return -EINVAL;
                memcpy(&ret->release, p, len);
                if (ret->release.reserved || ret->release.what == 0 ||
                    (ret->release.what & ~(uint32_t) CTL_RELEASE_WHAT_ALL))
                        return -EINVAL;
                return 0;
        case CTL_FILE_OPEN:
                return decode_file_open(p, len, &ret->file_open);
        case CTL_FILE_MKDIR:
        case CTL_FILE_REMOVE:
        case CTL_FILE_RENAME:
        case CTL_FILE_SYMLINK:
        case CTL_FILE_LIST:
                return decode_file_op(ret->hdr.type, p, len, &ret->file_op);
        case CTL_PING:
        case CTL_LIST:
        case CTL_HOLDS:
        case CTL_TAKE:
                return len == 0 ? 0 : -EINVAL;
        default:
                return -EOPNOTSUPP;
        }
}

void init_req_done(struct init_req *req) {
        if (!req)
                return;
        if (req->hdr.type == CTL_SPAWN) {
                free(req->spawn.argv);
                free(req->spawn.envp);
                req->spawn.argv = req->spawn.envp = NULL;
        }
}
