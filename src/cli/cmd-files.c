/* SPDX-License-Identifier: Apache-2.0 */
/* warren files ls|cat|rm|stat|mkdir ID:/PATH and warren cp SRC DST (one
 * side ID:/PATH): the Files service (docs/files.md). Directories are
 * copied client-side, entry by entry: ListDir + ReadFile out of a
 * sandbox, MakeDir + WriteFile (symlinks as symlinks) into one. Paths are
 * bytes on the wire. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"
#include "warren/v1/files.pb-c.h"

enum { OPT_JSON = CLI_OPT_FIRST_LOCAL, OPT_RECURSIVE, OPT_PARENTS };

static ProtobufCBinaryData bytes_of(const char *s) {
        return (ProtobufCBinaryData){.len = strlen(s), .data = (uint8_t *) s};
}

static char *str_of(ProtobufCBinaryData p) {
        char *s = cli_alloc(p.len + 1);
        memcpy(s, p.data, p.len);
        s[p.len] = 0;
        return s;
}

/* "ID:/path" → sandbox and path (arena copies). A local path ("/x",
 * "./x", "-", "x" without ':' before its first '/') returns false. */
static bool remote_split(const char *arg, char **sandbox, char **path) {
        const char *colon = strchr(arg, ':');
        const char *slash = strchr(arg, '/');
        if (!colon || colon == arg || (slash && slash < colon))
                return false;
        *sandbox = cli_strdup(arg);
        (*sandbox)[colon - arg] = 0;
        *path = cli_strdup(colon + 1);
        if (!**path)
                *path = cli_strdup("/");
        return true;
}

/* ---- server streams (ReadFile, ListDir) ---- */

struct pull {
        void (*on_msg)(struct pull *p, const ProtobufCMessage *msg);
        struct rpc_stream *s;
        int fd, write_errno;
        bool closed;
        int status;
        char *message;
        /* ListDir */
        Warren__V1__FileStat **entries;
        size_t n;
};

static void pull_on_message(struct rpc_stream *s, const ProtobufCMessage *msg, void *userdata) {
        struct pull *p = userdata;
        p->s = s;
        p->on_msg(p, msg);
}

static void pull_on_close(struct rpc_stream *s, int status, const char *message, void *userdata) {
        (void) s;
        struct pull *p = userdata;
        p->closed = true;
        p->status = status;
        p->message = cli_strdup(message ? message : "");
}

/* Run a server-streaming call to the end. 0, or 1 after printing the
 * error. */
static int pull_run(struct cli_ctx *ctx, const char *method, const ProtobufCMessage *req,
                    const ProtobufCMessageDescriptor *resp_desc, struct pull *p) {
        static const struct rpc_stream_callbacks cb = {.on_message = pull_on_message,
                                                       .on_close = pull_on_close};
        if (cli_connect(ctx) < 0)
                return CLI_EXIT_FAIL;
        struct rpc_stream *s = NULL;
        int r = rpc_stream_open(ctx->client, method, resp_desc, 0, &cb, p, &s);
        if (r < 0) {
                fprintf(stderr, "warren: %s: %s\n", method, strerror(-r));
                return CLI_EXIT_FAIL;
        }
        p->s = s;
        rpc_stream_send(s, req);
        rpc_stream_close_send(s);
        r = rpc_client_run(ctx->client);
        rpc_stream_free(s);
        if (p->write_errno) {
                fprintf(stderr, "warren: writing: %s\n", strerror(p->write_errno));
                return CLI_EXIT_FAIL;
        }
        if (!p->closed) {
                fprintf(stderr, "warren: connection lost: %s\n", strerror(r < 0 ? -r : EPIPE));
                return CLI_EXIT_FAIL;
        }
        if (p->status != 0) {
                cli_print_status(p->status, p->message);
                return CLI_EXIT_FAIL;
        }
        return CLI_EXIT_OK;
}

static void chunk_to_fd(struct pull *p, const ProtobufCMessage *msg) {
        const Warren__V1__FileChunk *c = (const Warren__V1__FileChunk *) msg;
        if (p->write_errno)
                return;
        int r = cli_write_all(p->fd, c->data.data, c->data.len);
        if (r < 0) {
                p->write_errno = -r;
                rpc_stream_cancel(p->s);
        }
}

static int read_to_fd(struct cli_ctx *ctx, const char *sandbox, const char *path, int fd) {
        Warren__V1__ReadFileRequest req = WARREN__V1__READ_FILE_REQUEST__INIT;
        req.sandbox = (char *) sandbox;
        req.path = bytes_of(path);
        struct pull p = {.on_msg = chunk_to_fd, .fd = fd};
        return pull_run(ctx, "/warren.v1.Files/ReadFile", &req.base,
                        &warren__v1__file_chunk__descriptor, &p);
}

static void entries_keep(struct pull *p, const ProtobufCMessage *msg) {
        const Warren__V1__ListDirResponse *r = (const Warren__V1__ListDirResponse *) msg;
        for (size_t i = 0; i < r->n_entries; i++) {
                /* msg is freed after the callback: keep a packed copy */
                size_t len = protobuf_c_message_get_packed_size(&r->entries[i]->base);
                uint8_t *buf = malloc(len ? len : 1);
                if (!buf)
                        abort();
                protobuf_c_message_pack(&r->entries[i]->base, buf);
                Warren__V1__FileStat *f = warren__v1__file_stat__unpack(NULL, len, buf);
                free(buf);
                if (!f)
                        abort();
                cli_push((void ***) &p->entries, &p->n, f);
        }
}

static int list(struct cli_ctx *ctx, const char *sandbox, const char *path, bool recursive,
                Warren__V1__FileStat ***ret, size_t *n) {
        Warren__V1__ListDirRequest req = WARREN__V1__LIST_DIR_REQUEST__INIT;
        req.sandbox = (char *) sandbox;
        req.path = bytes_of(path);
        req.recursive = recursive;
        struct pull p = {.on_msg = entries_keep};
        int rc = pull_run(ctx, "/warren.v1.Files/ListDir", &req.base,
                          &warren__v1__list_dir_response__descriptor, &p);
        *ret = p.entries;
        *n = p.n;
        return rc;
}

/* Stat; quiet: no error printed, 1 returned (NOT_FOUND and others). */
static int stat_remote(struct cli_ctx *ctx, const char *sandbox, const char *path, bool quiet,
                       Warren__V1__FileStat **ret) {
        Warren__V1__StatFileRequest req = WARREN__V1__STAT_FILE_REQUEST__INIT;
        req.sandbox = (char *) sandbox;
        req.path = bytes_of(path);
        if (!quiet)
                return cli_call(ctx, "/warren.v1.Files/Stat", &req.base,
                                &warren__v1__file_stat__descriptor, (ProtobufCMessage **) ret);
        if (cli_connect(ctx) < 0)
                return CLI_EXIT_FAIL;
        struct wr_err e = {0};
        int r = rpc_client_unary(ctx->client, "/warren.v1.Files/Stat", &req.base,
                                 &warren__v1__file_stat__descriptor, 0, (ProtobufCMessage **) ret,
                                 &e);
        return r < 0 ? CLI_EXIT_FAIL : CLI_EXIT_OK;
}

/* ---- uploads ---- */

static ProtobufCMessage *write_chunk(const uint8_t *data, size_t len, void *userdata) {
        Warren__V1__WriteFileRequest *m = userdata;
        warren__v1__write_file_request__init(m);
        m->kind_case = WARREN__V1__WRITE_FILE_REQUEST__KIND_DATA;
        m->data.data = (uint8_t *) data;
        m->data.len = len;
        return &m->base;
}

/* WriteFile path from fd (mode: permission bits, 0 = default), or a
 * symlink to link when link is not NULL. */
static int write_from_fd(struct cli_ctx *ctx, const char *sandbox, const char *path, int fd,
                         uint32_t mode, const char *link, const char *label) {
        Warren__V1__WriteFileMeta meta = WARREN__V1__WRITE_FILE_META__INIT;
        meta.sandbox = (char *) sandbox;
        meta.path = bytes_of(path);
        meta.mode = mode;
        _cleanup_close_ int null_fd = -EBADF;
        if (link) {
                meta.symlink_target = bytes_of(link);
                null_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
                fd = null_fd;
        }
        Warren__V1__WriteFileRequest first = WARREN__V1__WRITE_FILE_REQUEST__INIT;
        first.kind_case = WARREN__V1__WRITE_FILE_REQUEST__KIND_META;
        first.meta = &meta;
        Warren__V1__WriteFileRequest chunk;
        Warren__V1__FileStat *info = NULL;
        int rc = cli_upload(ctx, "/warren.v1.Files/WriteFile", &first.base, fd, write_chunk, &chunk,
                            &warren__v1__file_stat__descriptor, label, (ProtobufCMessage **) &info);
        if (rc == CLI_EXIT_OK)
                protobuf_c_message_free_unpacked(&info->base, NULL);
        return rc;
}

static int mkdir_remote(struct cli_ctx *ctx, const char *sandbox, const char *path, uint32_t mode) {
        Warren__V1__MakeDirRequest req = WARREN__V1__MAKE_DIR_REQUEST__INIT;
        req.sandbox = (char *) sandbox;
        req.path = bytes_of(path);
        req.mode = mode;
        req.parents = true;
        Warren__V1__FileStat *f = NULL;
        int rc = cli_call(ctx, "/warren.v1.Files/MakeDir", &req.base,
                          &warren__v1__file_stat__descriptor, (ProtobufCMessage **) &f);
        if (rc == CLI_EXIT_OK)
                protobuf_c_message_free_unpacked(&f->base, NULL);
        return rc;
}

static char *join(const char *a, const char *b) {
        size_t la = strlen(a);
        char *s = cli_alloc(la + strlen(b) + 2);
        sprintf(s, "%s%s%s", a, la && a[la - 1] == '/' ? "" : "/", b);
        return s;
}

static const char *base_name(const char *p) {
        size_t n = strlen(p);
        while (n > 1 && p[n - 1] == '/')
                n--;
        char *s = cli_alloc(n + 1);
        memcpy(s, p, n);
        char *slash = strrchr(s, '/');
        return slash && slash[1] ? slash + 1 : s;
}

/* Upload local path (a file, a symlink or a directory tree) to remote. */
static int upload_tree(struct cli_ctx *ctx, const char *local, const char *sandbox,
                       const char *remote, int depth) {
        struct stat st;
        if (lstat(local, &st) < 0) {
                fprintf(stderr, "warren: cp: %s: %s\n", local, strerror(errno));
                return CLI_EXIT_FAIL;
        }
        if (S_ISLNK(st.st_mode)) {
                char target[4097];
                ssize_t n = readlink(local, target, sizeof(target) - 1);
                if (n < 0) {
                        fprintf(stderr, "warren: cp: %s: %s\n", local, strerror(errno));
                        return CLI_EXIT_FAIL;
                }
                target[n] = 0;
                return write_from_fd(ctx, sandbox, remote, -1, 0, target, local);
        }
        if (S_ISREG(st.st_mode)) {
                _cleanup_close_ int fd = open(local, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
                if (fd < 0) {
                        fprintf(stderr, "warren: cp: %s: %s\n", local, strerror(errno));
                        return CLI_EXIT_FAIL;
                }
                return write_from_fd(ctx, sandbox, remote, fd, st.st_mode & 07777, NULL, local);
        }
        if (!S_ISDIR(st.st_mode)) {
                fprintf(stderr, "warren: cp: %s: not a file, symlink or directory; skipped\n",
                        local);
                return CLI_EXIT_OK;
        }
        if (depth > 256) {
                fprintf(stderr, "warren: cp: %s: too deep\n", local);
                return CLI_EXIT_FAIL;
        }
        int rc = mkdir_remote(ctx, sandbox, remote, st.st_mode & 07777);
        if (rc != CLI_EXIT_OK)
                return rc;
        DIR *d = opendir(local);
        if (!d) {
                fprintf(stderr, "warren: cp: %s: %s\n", local, strerror(errno));
                return CLI_EXIT_FAIL;
        }
        struct dirent *de;
        while (rc == CLI_EXIT_OK && (de = readdir(d)))
                if (strcmp(de->d_name, ".") && strcmp(de->d_name, ".."))
                        rc = upload_tree(ctx, join(local, de->d_name), sandbox,
                                         join(remote, de->d_name), depth + 1);
        closedir(d);
        return rc;
}

/* Download remote entry f (from a listing or a Stat) to local. */
static int download_one(struct cli_ctx *ctx, const char *sandbox, const Warren__V1__FileStat *f,
                        const char *local) {
        const char *path = str_of(f->path);
        switch (f->kind) {
        case WARREN__V1__FILE_KIND__FILE_KIND_DIRECTORY:
                if (mkdir(local, (f->mode & 07777) | 0700) < 0 && errno != EEXIST) {
                        fprintf(stderr, "warren: cp: %s: %s\n", local, strerror(errno));
                        return CLI_EXIT_FAIL;
                }
                return CLI_EXIT_OK;
        case WARREN__V1__FILE_KIND__FILE_KIND_SYMLINK:
                (void) unlink(local);
                if (symlink(str_of(f->symlink_target), local) < 0) {
                        fprintf(stderr, "warren: cp: %s: %s\n", local, strerror(errno));
                        return CLI_EXIT_FAIL;
                }
                return CLI_EXIT_OK;
        case WARREN__V1__FILE_KIND__FILE_KIND_FILE: {
                _cleanup_close_ int fd =
                        open(local, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
                if (fd < 0) {
                        fprintf(stderr, "warren: cp: %s: %s\n", local, strerror(errno));
                        return CLI_EXIT_FAIL;
                }
                int rc = read_to_fd(ctx, sandbox, path, fd);
                if (rc == CLI_EXIT_OK)
                        (void) fchmod(fd, f->mode & 07777);
                return rc;
        }
        default:
                fprintf(stderr, "warren: cp: %s: a device, FIFO or socket; skipped\n", path);
                return CLI_EXIT_OK;
        }
}

/* ---- commands ---- */

static int cp(struct cli_ctx *ctx, int argc, char **argv) {
        const char *cmd = "cp", *usage = "SRC DST  (one of them ID:/PATH; - = stdin/stdout)";
        static const struct option longopts[] = {CLI_COMMON_LONGOPTS, {}};
        int c;
        while ((c = cli_getopt(ctx, cmd, usage, argc, argv, "h", longopts)) != -1) {
                if (c == CLI_GETOPT_HELP)
                        return CLI_EXIT_OK;
                return CLI_EXIT_USAGE;
        }
        if (argc - optind != 2)
                return cli_usage_error(cmd, usage, "give SRC and DST");
        const char *src = argv[optind], *dst = argv[optind + 1];
        char *sb_src = NULL, *p_src = NULL, *sb_dst = NULL, *p_dst = NULL;
        bool rs = strcmp(src, "-") && remote_split(src, &sb_src, &p_src);
        bool rd = strcmp(dst, "-") && remote_split(dst, &sb_dst, &p_dst);
        if (rs == rd)
                return cli_usage_error(cmd, usage,
                                       rs ? "both sides are in sandboxes; copy through a local "
                                            "path"
                                          : "neither side is ID:/PATH (a sandbox's path)");
        if (rd) { /* into the sandbox */
                if (strcmp(src, "-") == 0)
                        return write_from_fd(ctx, sb_dst, p_dst, STDIN_FILENO, 0, NULL, "stdin");
                Warren__V1__FileStat *f = NULL;
                /* an existing directory: copy into it, as cp does */
                if (stat_remote(ctx, sb_dst, p_dst, true, &f) == CLI_EXIT_OK) {
                        if (f->kind == WARREN__V1__FILE_KIND__FILE_KIND_DIRECTORY)
                                p_dst = join(p_dst, base_name(src));
                        protobuf_c_message_free_unpacked(&f->base, NULL);
                }
                return upload_tree(ctx, src, sb_dst, p_dst, 0);
        }
        /* out of the sandbox */
        if (strcmp(dst, "-") == 0)
                return read_to_fd(ctx, sb_src, p_src, STDOUT_FILENO);
        Warren__V1__FileStat *top = NULL;
        int rc = stat_remote(ctx, sb_src, p_src, false, &top);
        if (rc != CLI_EXIT_OK)
                return rc;
        struct stat lst;
        const char *out = dst;
        if (stat(dst, &lst) == 0 && S_ISDIR(lst.st_mode))
                out = join(dst, base_name(p_src));
        rc = download_one(ctx, sb_src, top, out);
        if (rc == CLI_EXIT_OK && top->kind == WARREN__V1__FILE_KIND__FILE_KIND_DIRECTORY) {
                Warren__V1__FileStat **es = NULL;
                size_t n = 0;
                rc = list(ctx, sb_src, p_src, true, &es, &n);
                const char *base = str_of(top->path);
                size_t bl = strlen(base);
                while (bl > 1 && base[bl - 1] == '/')
                        bl--;
                for (size_t i = 0; rc == CLI_EXIT_OK && i < n; i++) {
                        const char *p = str_of(es[i]->path);
                        /* entry paths are the listed dir's path + "/" + rel */
                        const char *rel = strlen(p) > bl ? p + bl + (bl > 1 ? 1 : 0) : p;
                        rc = download_one(ctx, sb_src, es[i], join(out, rel));
                }
                /* directory modes last, once their files are in */
                for (size_t i = n; rc == CLI_EXIT_OK && i-- > 0;)
                        if (es[i]->kind == WARREN__V1__FILE_KIND__FILE_KIND_DIRECTORY) {
                                const char *p = str_of(es[i]->path);
                                const char *rel = p + bl + (bl > 1 ? 1 : 0);
                                (void) chmod(join(out, rel), es[i]->mode & 07777);
                        }
                for (size_t i = 0; i < n; i++)
                        protobuf_c_message_free_unpacked(&es[i]->base, NULL);
                (void) chmod(out, top->mode & 07777);
        }
        protobuf_c_message_free_unpacked(&top->base, NULL);
        return rc;
}

/* Parse options (-r, --json) and one ID:/PATH. */
static int parse_one(struct cli_ctx *ctx, const char *cmd, const char *usage, int argc, char **argv,
                     bool *recursive, bool *json, char **sandbox, char **path) {
        static const struct option longopts[] = {{"json", no_argument, NULL, OPT_JSON},
                                                 {"recursive", no_argument, NULL, 'r'},
                                                 CLI_COMMON_LONGOPTS,
                                                 {}};
        int c;
        while ((c = cli_getopt(ctx, cmd, usage, argc, argv, "hr", longopts)) != -1) {
                if (c == CLI_GETOPT_HELP)
                        return CLI_EXIT_OK;
                if (c == 'r' && recursive)
                        *recursive = true;
                else if (c == OPT_JSON && json)
                        *json = true;
                else
                        return c < 0 ? CLI_EXIT_USAGE
                                     : cli_usage_error(cmd, usage, "option not supported here");
        }
        if (argc - optind != 1)
                return cli_usage_error(cmd, usage, "give one ID:/PATH");
        if (!remote_split(argv[optind], sandbox, path))
                return cli_usage_error(cmd, usage, "\"%s\" is not ID:/PATH", argv[optind]);
        return -1;
}

static const char *kind_name(int k) {
        static const char *const kinds[] = {"unknown", "file", "dir", "symlink", "other"};
        return kinds[(unsigned) k < ELEMENTSOF(kinds) ? k : 0];
}

static int files_ls(struct cli_ctx *ctx, int argc, char **argv) {
        const char *cmd = "files ls", *usage = "[-r] [--json] ID:/PATH";
        bool rec = false, json = false;
        char *sb, *path;
        int rc = parse_one(ctx, cmd, usage, argc, argv, &rec, &json, &sb, &path);
        if (rc >= 0)
                return rc;
        Warren__V1__FileStat **es = NULL;
        size_t n = 0;
        rc = list(ctx, sb, path, rec, &es, &n);
        if (rc != CLI_EXIT_OK)
                return rc;
        if (json) {
                json_t *all = json_array();
                for (size_t i = 0; i < n; i++) {
                        json_t *j = cli_json_from_message(&es[i]->base);
                        json_t *p = json_stringn((const char *) es[i]->path.data, es[i]->path.len);
                        if (p)
                                json_object_set_new(j, "path", p);
                        json_array_append_new(all, j);
                }
                cli_json_print(all);
        } else {
                static const char *const headers[] = {"PATH", "KIND",  "SIZE",
                                                      "MODE", "OWNER", "MODIFIED"};
                struct cli_table *t = cli_table_new(6, headers);
                for (size_t i = 0; i < n; i++) {
                        Warren__V1__FileStat *f = es[i];
                        char sz[32], tb[32], mode[16], own[32];
                        snprintf(mode, sizeof(mode), "%04o", f->mode);
                        snprintf(own, sizeof(own), "%u:%u", f->uid, f->gid);
                        const char *p = str_of(f->path);
                        if (f->kind == WARREN__V1__FILE_KIND__FILE_KIND_SYMLINK) {
                                char *q = cli_alloc(strlen(p) + f->symlink_target.len + 5);
                                sprintf(q, "%s -> %s", p, str_of(f->symlink_target));
                                p = q;
                        }
                        const char *row[] = {
                                p,
                                kind_name(f->kind),
                                cli_format_size(f->size_bytes, sz),
                                mode,
                                own,
                                cli_format_time(f->modified_at ? f->modified_at->unix_nanos : 0,
                                                tb)};
                        cli_table_add(t, row);
                }
                cli_table_print(t);
        }
        for (size_t i = 0; i < n; i++)
                protobuf_c_message_free_unpacked(&es[i]->base, NULL);
        return CLI_EXIT_OK;
}

static int files_cat(struct cli_ctx *ctx, int argc, char **argv) {
        const char *cmd = "files cat", *usage = "ID:/PATH";
        char *sb, *path;
        int rc = parse_one(ctx, cmd, usage, argc, argv, NULL, NULL, &sb, &path);
        if (rc >= 0)
                return rc;
        return read_to_fd(ctx, sb, path, STDOUT_FILENO);
}

static int files_rm(struct cli_ctx *ctx, int argc, char **argv) {
        const char *cmd = "files rm", *usage = "[-r] ID:/PATH";
        bool rec = false;
        char *sb, *path;
        int rc = parse_one(ctx, cmd, usage, argc, argv, &rec, NULL, &sb, &path);
        if (rc >= 0)
                return rc;
        Warren__V1__RemovePathRequest req = WARREN__V1__REMOVE_PATH_REQUEST__INIT;
        req.sandbox = sb;
        req.path = bytes_of(path);
        req.recursive = rec;
        ProtobufCMessage *resp = NULL;
        rc = cli_call(ctx, "/warren.v1.Files/Remove", &req.base,
                      &warren__v1__remove_path_response__descriptor, &resp);
        if (rc == CLI_EXIT_OK)
                protobuf_c_message_free_unpacked(resp, NULL);
        return rc;
}

static int files_stat(struct cli_ctx *ctx, int argc, char **argv) {
        const char *cmd = "files stat", *usage = "ID:/PATH";
        char *sb, *path;
        int rc = parse_one(ctx, cmd, usage, argc, argv, NULL, NULL, &sb, &path);
        if (rc >= 0)
                return rc;
        Warren__V1__FileStat *f = NULL;
        if ((rc = stat_remote(ctx, sb, path, false, &f)) != CLI_EXIT_OK)
                return rc;
        char tb[32];
        printf("%s\t%s\t%llu\t%04o\t%u:%u\t%s%s%s\n", str_of(f->path), kind_name(f->kind),
               (unsigned long long) f->size_bytes, f->mode, f->uid, f->gid,
               cli_format_time(f->modified_at ? f->modified_at->unix_nanos : 0, tb),
               f->symlink_target.len ? "\t-> " : "", str_of(f->symlink_target));
        protobuf_c_message_free_unpacked(&f->base, NULL);
        return CLI_EXIT_OK;
}

static int files_mkdir(struct cli_ctx *ctx, int argc, char **argv) {
        const char *cmd = "files mkdir", *usage = "ID:/PATH";
        char *sb, *path;
        int rc = parse_one(ctx, cmd, usage, argc, argv, NULL, NULL, &sb, &path);
        if (rc >= 0)
                return rc;
        return mkdir_remote(ctx, sb, path, 0);
}

int cli_cmd_cp(struct cli_ctx *ctx, int argc, char **argv) {
        return cp(ctx, argc, argv);
}

int cli_cmd_files(struct cli_ctx *ctx, int argc, char **argv) {
        static const struct cli_cmd cmds[] = {
                {"ls", "[-r] [--json] ID:/PATH", "list a directory of a sandbox", files_ls},
                {"cat", "ID:/PATH", "print a file of a sandbox", files_cat},
                {"rm", "[-r] ID:/PATH", "remove a path of a sandbox (-r: a tree)", files_rm},
                {"stat", "ID:/PATH", "describe a path of a sandbox", files_stat},
                {"mkdir", "ID:/PATH", "make a directory (and its parents) in a sandbox",
                 files_mkdir},
        };
        return cli_dispatch(ctx, "files", cmds, ELEMENTSOF(cmds), argc - 1, argv + 1);
}
