/* SPDX-License-Identifier: Apache-2.0 */
/* warren volume create|ls|info|rm|put|get|files|stat|rm-file. Paths inside
 * a volume are bytes on the wire (file names need not be UTF-8). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "warren/v1/volumes.pb-c.h"

enum { OPT_JSON = CLI_OPT_FIRST_LOCAL, OPT_MODE, OPT_MAX_BYTES, OPT_MAX_FILES };

static ProtobufCBinaryData path_bytes(const char *s) {
        return (ProtobufCBinaryData){.len = strlen(s), .data = (uint8_t *) s};
}

/* A path of the wire as a printable C string (the caller frees). */
static char *path_str(ProtobufCBinaryData p) {
        char *s = cli_alloc(p.len + 1);
        memcpy(s, p.data, p.len);
        s[p.len] = 0;
        return s;
}

/* Parse [--json] and exactly `want` positionals (want < 0: at least -want). */
static int parse_simple(struct cli_ctx *ctx, const char *cmd, const char *usage, int argc,
                        char **argv, int want, bool *json) {
        static const struct option longopts[] = {
                {"json", no_argument, NULL, OPT_JSON}, CLI_COMMON_LONGOPTS, {}};
        int c;
        while ((c = cli_getopt(ctx, cmd, usage, argc, argv, "h", longopts)) != -1) {
                if (c == OPT_JSON && json)
                        *json = true;
                else if (c == CLI_GETOPT_HELP)
                        return CLI_EXIT_OK + 100;
                else if (c == OPT_JSON)
                        return cli_usage_error(cmd, usage, "--json is not supported here");
                else
                        return CLI_EXIT_USAGE;
        }
        int n = argc - optind;
        if ((want >= 0 && n != want) || (want < 0 && n < -want))
                return cli_usage_error(cmd, usage, "wrong number of arguments");
        return -1;
}

#define PARSE(want, json)                                                                          \
        do {                                                                                       \
                int _r = parse_simple(ctx, cmd, usage, argc, argv, want, json);                    \
                if (_r >= 100)                                                                     \
                        return _r - 100;                                                           \
                if (_r >= 0)                                                                       \
                        return _r;                                                                 \
        } while (0)

static int volume_create(struct cli_ctx *ctx, int argc, char **argv) {
        const char *cmd = "volume create", *usage = "[--max-bytes SIZE] [--max-files N] NAME";
        static const struct option longopts[] = {
                {"max-bytes", required_argument, NULL, OPT_MAX_BYTES},
                {"max-files", required_argument, NULL, OPT_MAX_FILES},
                CLI_COMMON_LONGOPTS,
                {}};
        Warren__V1__CreateVolumeRequest req = WARREN__V1__CREATE_VOLUME_REQUEST__INIT;
        int c;
        while ((c = cli_getopt(ctx, cmd, usage, argc, argv, "h", longopts)) != -1) {
                char *end = NULL;
                if (c == CLI_GETOPT_HELP)
                        return CLI_EXIT_OK;
                if (c != OPT_MAX_BYTES && c != OPT_MAX_FILES)
                        return CLI_EXIT_USAGE;
                unsigned long long v = strtoull(optarg, &end, 10);
                unsigned long long mul = 1;
                if (end && *end) {
                        static const char *const units[] = {"Ki", "Mi", "Gi", "Ti"};
                        for (size_t i = 0; i < ELEMENTSOF(units); i++)
                                if (c == OPT_MAX_BYTES && strcmp(end, units[i]) == 0)
                                        mul = 1ull << (10 * (i + 1));
                        if (mul == 1)
                                return cli_usage_error(
                                        cmd, usage, "--%s wants a number%s, got '%s'",
                                        c == OPT_MAX_BYTES ? "max-bytes" : "max-files",
                                        c == OPT_MAX_BYTES ? " with an optional Ki/Mi/Gi/Ti" : "",
                                        optarg);
                }
                if (c == OPT_MAX_BYTES)
                        req.max_bytes = v * mul;
                else
                        req.max_files = v;
        }
        if (argc - optind != 1)
                return cli_usage_error(cmd, usage, "wrong number of arguments");
        req.name = argv[optind];
        Warren__V1__Volume *v = NULL;
        int rc = cli_call(ctx, "/warren.v1.Volumes/CreateVolume", &req.base,
                          &warren__v1__volume__descriptor, (ProtobufCMessage **) &v);
        if (rc != CLI_EXIT_OK)
                return rc;
        printf("%s\n", v->name);
        protobuf_c_message_free_unpacked(&v->base, NULL);
        return CLI_EXIT_OK;
}

static int volume_ls(struct cli_ctx *ctx, int argc, char **argv) {
        const char *cmd = "volume ls", *usage = "[--json]";
        bool json = false;
        PARSE(0, &json);
        Warren__V1__ListVolumesRequest req = WARREN__V1__LIST_VOLUMES_REQUEST__INIT;
        Warren__V1__ListVolumesResponse *resp = NULL;
        int rc = cli_call(ctx, "/warren.v1.Volumes/ListVolumes", &req.base,
                          &warren__v1__list_volumes_response__descriptor,
                          (ProtobufCMessage **) &resp);
        if (rc != CLI_EXIT_OK)
                return rc;
        if (json) {
                cli_json_print_list((ProtobufCMessage *const *) resp->volumes, resp->n_volumes);
        } else {
                static const char *const headers[] = {"NAME", "SIZE", "CREATED"};
                struct cli_table *t = cli_table_new(3, headers);
                for (size_t i = 0; i < resp->n_volumes; i++) {
                        Warren__V1__Volume *v = resp->volumes[i];
                        char sz[32], tb[32];
                        const char *row[] = {
                                v->name, cli_format_size(v->size_bytes, sz),
                                cli_format_time(v->created_at ? v->created_at->unix_nanos : 0, tb)};
                        cli_table_add(t, row);
                }
                cli_table_print(t);
        }
        protobuf_c_message_free_unpacked(&resp->base, NULL);
        return CLI_EXIT_OK;
}

static int volume_info(struct cli_ctx *ctx, int argc, char **argv) {
        const char *cmd = "volume info", *usage = "NAME";
        PARSE(1, NULL);
        Warren__V1__GetVolumeRequest req = WARREN__V1__GET_VOLUME_REQUEST__INIT;
        req.name = argv[optind];
        Warren__V1__Volume *v = NULL;
        int rc = cli_call(ctx, "/warren.v1.Volumes/GetVolume", &req.base,
                          &warren__v1__volume__descriptor, (ProtobufCMessage **) &v);
        if (rc != CLI_EXIT_OK)
                return rc;
        cli_json_print(cli_json_from_message(&v->base));
        protobuf_c_message_free_unpacked(&v->base, NULL);
        return CLI_EXIT_OK;
}

static int volume_rm(struct cli_ctx *ctx, int argc, char **argv) {
        const char *cmd = "volume rm", *usage = "NAME...";
        PARSE(-1, NULL);
        return cli_delete_each(ctx, argv + optind, argc - optind, "/warren.v1.Volumes/DeleteVolume",
                               &warren__v1__delete_volume_request__descriptor, "name",
                               &warren__v1__delete_volume_response__descriptor);
}

static ProtobufCMessage *put_chunk(const uint8_t *data, size_t len, void *userdata) {
        Warren__V1__PutFileRequest *m = userdata;
        warren__v1__put_file_request__init(m);
        m->kind_case = WARREN__V1__PUT_FILE_REQUEST__KIND_DATA;
        m->data.data = (uint8_t *) data;
        m->data.len = len;
        return &m->base;
}

static int volume_put(struct cli_ctx *ctx, int argc, char **argv) {
        const char *cmd = "volume put", *usage = "VOLUME PATH [FILE|-]";
        PARSE(-2, NULL);
        if (argc - optind > 3)
                return cli_usage_error(cmd, usage, "too many arguments");
        const char *file = argc - optind == 3 ? argv[optind + 2] : "-";
        _cleanup_close_ int fd = -EBADF;
        int in = STDIN_FILENO;
        uint32_t mode = 0644;
        if (strcmp(file, "-") != 0) {
                fd = open(file, O_RDONLY | O_CLOEXEC);
                if (fd < 0) {
                        fprintf(stderr, "warren: cannot open %s: %s\n", file, strerror(errno));
                        return CLI_EXIT_FAIL;
                }
                struct stat stbuf;
                if (fstat(fd, &stbuf) == 0)
                        mode = stbuf.st_mode & 07777;
                in = fd;
        }
        /* Created on first use, as the SDK's Volume.put_file does
         * (CreateVolume is idempotent). */
        Warren__V1__CreateVolumeRequest creq = WARREN__V1__CREATE_VOLUME_REQUEST__INIT;
        creq.name = argv[optind];
        Warren__V1__Volume *v = NULL;
        int crc = cli_call(ctx, "/warren.v1.Volumes/CreateVolume", &creq.base,
                           &warren__v1__volume__descriptor, (ProtobufCMessage **) &v);
        if (crc != CLI_EXIT_OK)
                return crc;
        protobuf_c_message_free_unpacked(&v->base, NULL);
        Warren__V1__PutFileMeta meta = WARREN__V1__PUT_FILE_META__INIT;
        meta.volume = argv[optind];
        meta.path = path_bytes(argv[optind + 1]);
        meta.mode = mode;
        Warren__V1__PutFileRequest first = WARREN__V1__PUT_FILE_REQUEST__INIT;
        first.kind_case = WARREN__V1__PUT_FILE_REQUEST__KIND_META;
        first.meta = &meta;
        Warren__V1__PutFileRequest chunk;
        Warren__V1__FileInfo *info = NULL;
        int rc = cli_upload(ctx, "/warren.v1.Volumes/PutFile", &first.base, in, put_chunk, &chunk,
                            &warren__v1__file_info__descriptor,
                            strcmp(file, "-") == 0 ? "stdin" : file, (ProtobufCMessage **) &info);
        if (rc != CLI_EXIT_OK)
                return rc;
        printf("%.*s\n", (int) info->path.len, (const char *) info->path.data);
        protobuf_c_message_free_unpacked(&info->base, NULL);
        return CLI_EXIT_OK;
}

struct download {
        int fd, write_errno;
        bool closed;
        int status;
        char *message;
};

static void get_on_message(struct rpc_stream *s, const ProtobufCMessage *msg, void *userdata) {
        struct download *d = userdata;
        const Warren__V1__FileChunk *c = (const Warren__V1__FileChunk *) msg;
        if (d->write_errno)
                return;
        int r = cli_write_all(d->fd, c->data.data, c->data.len);
        if (r < 0) {
                d->write_errno = -r;
                rpc_stream_cancel(s);
        }
}

static void get_on_close(struct rpc_stream *s, int status, const char *message, void *userdata) {
        struct download *d = userdata;
        d->closed = true;
        d->status = status;
        d->message = cli_strdup(message ? message : "");
}

static int volume_get(struct cli_ctx *ctx, int argc, char **argv) {
        static const struct rpc_stream_callbacks cb = {.on_message = get_on_message,
                                                       .on_close = get_on_close};
        const char *cmd = "volume get", *usage = "VOLUME PATH [DEST|-]";
        PARSE(-2, NULL);
        if (argc - optind > 3)
                return cli_usage_error(cmd, usage, "too many arguments");
        const char *dest = argc - optind == 3 ? argv[optind + 2] : "-";
        _cleanup_close_ int fd = -EBADF;
        struct download d = {.fd = STDOUT_FILENO};
        if (strcmp(dest, "-") != 0) {
                fd = open(dest, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
                if (fd < 0) {
                        fprintf(stderr, "warren: cannot create %s: %s\n", dest, strerror(errno));
                        return CLI_EXIT_FAIL;
                }
                d.fd = fd;
        }
        if (cli_connect(ctx) < 0)
                return CLI_EXIT_FAIL;
        Warren__V1__GetFileRequest req = WARREN__V1__GET_FILE_REQUEST__INIT;
        req.volume = argv[optind];
        req.path = path_bytes(argv[optind + 1]);
        struct rpc_stream *s = NULL;
        int r = rpc_stream_open(ctx->client, "/warren.v1.Volumes/GetFile",
                                &warren__v1__file_chunk__descriptor, 0, &cb, &d, &s);
        if (r < 0) {
                fprintf(stderr, "warren: volume get: %s\n", strerror(-r));
                return CLI_EXIT_FAIL;
        }
        rpc_stream_send(s, &req.base);
        rpc_stream_close_send(s);
        r = rpc_client_run(ctx->client);
        rpc_stream_free(s);
        if (d.write_errno) {
                fprintf(stderr, "warren: writing %s: %s\n", dest, strerror(d.write_errno));
                return CLI_EXIT_FAIL;
        }
        if (!d.closed) {
                fprintf(stderr, "warren: volume get: connection lost: %s\n",
                        strerror(r < 0 ? -r : EPIPE));
                return CLI_EXIT_FAIL;
        }
        if (d.status != 0) {
                cli_print_status(d.status, d.message);
                return CLI_EXIT_FAIL;
        }
        return CLI_EXIT_OK;
}

/* A FileInfo as JSON, its path as a string (the proto's JSON form of
 * bytes is base64); a path that is not UTF-8 stays base64, with
 * "path_encoding": "base64". */
static json_t *file_json(const Warren__V1__FileInfo *f) {
        json_t *j = cli_json_from_message(&f->base);
        json_t *p = json_stringn((const char *) f->path.data, f->path.len);
        if (p)
                json_object_set_new(j, "path", p);
        else
                json_object_set_new(j, "path_encoding", json_string("base64"));
        return j;
}

static int volume_files(struct cli_ctx *ctx, int argc, char **argv) {
        const char *cmd = "volume files", *usage = "[--json] VOLUME [PREFIX]";
        bool json = false;
        PARSE(-1, &json);
        if (argc - optind > 2)
                return cli_usage_error(cmd, usage, "too many arguments");
        Warren__V1__ListFilesRequest req = WARREN__V1__LIST_FILES_REQUEST__INIT;
        req.volume = argv[optind];
        if (argc - optind == 2)
                req.prefix = path_bytes(argv[optind + 1]);
        static const char *const headers[] = {"PATH", "SIZE", "MODE", "MODIFIED"};
        struct cli_table *t = json ? NULL : cli_table_new(4, headers);
        json_t *all = json ? json_array() : NULL;
        char *token = NULL;
        for (;;) {
                Warren__V1__ListFilesResponse *resp = NULL;
                int rc = cli_call(ctx, "/warren.v1.Volumes/ListFiles", &req.base,
                                  &warren__v1__list_files_response__descriptor,
                                  (ProtobufCMessage **) &resp);
                if (rc != CLI_EXIT_OK)
                        return rc;
                for (size_t i = 0; all && i < resp->n_files; i++)
                        json_array_append_new(all, file_json(resp->files[i]));
                for (size_t i = 0; t && i < resp->n_files; i++) {
                        Warren__V1__FileInfo *f = resp->files[i];
                        char sz[32], tb[32], mode[16];
                        snprintf(mode, sizeof(mode), "%04o", f->mode);
                        const char *row[] = {
                                path_str(f->path), cli_format_size(f->size_bytes, sz), mode,
                                cli_format_time(f->modified_at ? f->modified_at->unix_nanos : 0,
                                                tb)};
                        cli_table_add(t, row);
                }
                bool more = resp->next_page_token.len > 0;
                if (more) {
                        token = path_str(resp->next_page_token);
                        req.page_token = path_bytes(token);
                }
                protobuf_c_message_free_unpacked(&resp->base, NULL);
                if (!more)
                        break;
        }
        if (t)
                cli_table_print(t);
        if (all)
                cli_json_print(all); /* one array over every page */
        return CLI_EXIT_OK;
}

static int volume_stat(struct cli_ctx *ctx, int argc, char **argv) {
        const char *cmd = "volume stat", *usage = "VOLUME [PATH]";
        PARSE(-1, NULL);
        if (argc - optind > 2)
                return cli_usage_error(cmd, usage, "too many arguments");
        Warren__V1__StatRequest req = WARREN__V1__STAT_REQUEST__INIT;
        req.volume = argv[optind];
        if (argc - optind == 2)
                req.path = path_bytes(argv[optind + 1]);
        Warren__V1__FileInfo *f = NULL;
        int rc = cli_call(ctx, "/warren.v1.Volumes/Stat", &req.base,
                          &warren__v1__file_info__descriptor, (ProtobufCMessage **) &f);
        if (rc != CLI_EXIT_OK)
                return rc;
        static const char *const kinds[] = {"unknown", "file", "directory", "symlink", "other"};
        char tb[32];
        printf("%s\t%s\t%llu\t%04o\t%s\n", path_str(f->path),
               kinds[(unsigned) f->kind < ELEMENTSOF(kinds) ? f->kind : 0],
               (unsigned long long) f->size_bytes, f->mode,
               cli_format_time(f->modified_at ? f->modified_at->unix_nanos : 0, tb));
        protobuf_c_message_free_unpacked(&f->base, NULL);
        return CLI_EXIT_OK;
}

static int volume_rm_file(struct cli_ctx *ctx, int argc, char **argv) {
        const char *cmd = "volume rm-file", *usage = "VOLUME PATH";
        PARSE(2, NULL);
        Warren__V1__RemoveFileRequest req = WARREN__V1__REMOVE_FILE_REQUEST__INIT;
        req.volume = argv[optind];
        req.path = path_bytes(argv[optind + 1]);
        ProtobufCMessage *resp = NULL;
        int rc = cli_call(ctx, "/warren.v1.Volumes/RemoveFile", &req.base,
                          &warren__v1__remove_file_response__descriptor, &resp);
        if (rc == CLI_EXIT_OK)
                protobuf_c_message_free_unpacked(resp, NULL);
        return rc;
}

int cli_cmd_volume(struct cli_ctx *ctx, int argc, char **argv) {
        static const struct cli_cmd cmds[] = {
                {"create", "[--max-bytes SIZE] [--max-files N] NAME",
                 "create a volume (idempotent; quota default 1Gi)", volume_create},
                {"ls", "[--json]", "list volumes", volume_ls},
                {"info", "NAME", "show one volume as JSON", volume_info},
                {"rm", "NAME...", "delete volumes and their files", volume_rm},
                {"put", "VOLUME PATH [FILE|-]", "write a file into a volume (created when missing)",
                 volume_put},
                {"get", "VOLUME PATH [DEST|-]", "read a file out of a volume", volume_get},
                {"files", "[--json] VOLUME [PREFIX]", "list files of a volume", volume_files},
                {"stat", "VOLUME [PATH]", "describe a file of a volume", volume_stat},
                {"rm-file", "VOLUME PATH", "remove a file from a volume", volume_rm_file},
        };
        return cli_dispatch(ctx, "volume", cmds, ELEMENTSOF(cmds), argc - 1, argv + 1);
}
