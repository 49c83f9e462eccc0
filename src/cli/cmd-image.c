/* SPDX-License-Identifier: Apache-2.0 */
/* warren image import|pull|ls|get|rm (build and prune: cmd-image-build.c). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "warren/v1/images.pb-c.h"

enum { OPT_JSON = CLI_OPT_FIRST_LOCAL, OPT_WORKDIR, OPT_ENV };

#define IMPORT_MAX_ENV 64

static ProtobufCMessage *import_chunk(const uint8_t *data, size_t len, void *userdata) {
        Warren__V1__ImportImageRequest *m = userdata;
        warren__v1__import_image_request__init(m);
        m->kind_case = WARREN__V1__IMPORT_IMAGE_REQUEST__KIND_DATA;
        m->data.data = (uint8_t *) data;
        m->data.len = len;
        return &m->base;
}

static const char *short_id(const char *id, char buf[static 32]) {
        const char *hex = strncmp(id, "sha256:", 7) == 0 ? id + 7 : id;
        snprintf(buf, 32, "%.12s", hex);
        return buf;
}

static void print_image_line(const Warren__V1__Image *img) {
        printf("%s\n", img->id);
}

static int image_import(struct cli_ctx *ctx, int argc, char **argv) {
        static const struct option longopts[] = {{"json", no_argument, NULL, OPT_JSON},
                                                 {"workdir", required_argument, NULL, OPT_WORKDIR},
                                                 {"env", required_argument, NULL, OPT_ENV},
                                                 CLI_COMMON_LONGOPTS,
                                                 {}};
        const char *cmd = "image import",
                   *usage = "[--json] [--workdir DIR] [--env K=V]... NAME FILE|-";
        bool json = false;
        const char *workdir = NULL;
        char *env[IMPORT_MAX_ENV];
        size_t n_env = 0;
        int c;
        while ((c = cli_getopt(ctx, cmd, usage, argc, argv, "h", longopts)) != -1) {
                if (c == OPT_JSON)
                        json = true;
                else if (c == OPT_WORKDIR)
                        workdir = optarg;
                else if (c == OPT_ENV) {
                        if (!strchr(optarg, '=') || optarg[0] == '=')
                                return cli_usage_error(cmd, usage, "--env takes K=V");
                        if (n_env == IMPORT_MAX_ENV)
                                return cli_usage_error(cmd, usage, "too many --env");
                        env[n_env++] = optarg;
                } else
                        return c == CLI_GETOPT_HELP ? CLI_EXIT_OK : CLI_EXIT_USAGE;
        }
        if (argc - optind != 2)
                return cli_usage_error(cmd, usage,
                                       argc - optind < 2 ? "missing NAME or FILE"
                                                         : "too many arguments");
        const char *name = argv[optind], *file = argv[optind + 1];
        _cleanup_close_ int fd = -EBADF;
        int in = STDIN_FILENO;
        if (strcmp(file, "-") != 0) {
                fd = open(file, O_RDONLY | O_CLOEXEC);
                if (fd < 0) {
                        fprintf(stderr, "warren: cannot open %s: %s\n", file, strerror(errno));
                        return CLI_EXIT_FAIL;
                }
                in = fd;
        } else if (isatty(STDIN_FILENO)) {
                return cli_usage_error(cmd, usage,
                                       "refusing to read a tarball from a terminal; pipe it in");
        }
        Warren__V1__ImportImageMeta meta = WARREN__V1__IMPORT_IMAGE_META__INIT;
        meta.name = (char *) name;
        Warren__V1__ImageConfig config = WARREN__V1__IMAGE_CONFIG__INIT;
        if (workdir || n_env) {
                config.working_dir = (char *) (workdir ? workdir : "");
                config.n_env = n_env;
                config.env = env;
                meta.config = &config;
        }
        Warren__V1__ImportImageRequest first = WARREN__V1__IMPORT_IMAGE_REQUEST__INIT;
        first.kind_case = WARREN__V1__IMPORT_IMAGE_REQUEST__KIND_META;
        first.meta = &meta;
        Warren__V1__ImportImageRequest chunk;
        Warren__V1__Image *img = NULL;
        int rc = cli_upload(ctx, "/warren.v1.Images/ImportImage", &first.base, in, import_chunk,
                            &chunk, &warren__v1__image__descriptor,
                            strcmp(file, "-") == 0 ? "stdin" : file, (ProtobufCMessage **) &img);
        if (rc != CLI_EXIT_OK)
                return rc;
        if (json)
                cli_json_print(cli_json_from_message(&img->base));
        else
                print_image_line(img);
        protobuf_c_message_free_unpacked(&img->base, NULL);
        return CLI_EXIT_OK;
}

/* --- pull: server-streamed progress --- */

#define PULL_MAX_LAYERS 128

struct pull {
        bool tty, closed;
        int status;
        char *message;
        char *image_id;
        size_t drawn; /* TTY: lines of the progress block on screen */
        size_t n;
        char digest[PULL_MAX_LAYERS][16]; /* 12 hex digits */
        char state[PULL_MAX_LAYERS][16];
};

/* One layer's line: "<12 hex>: <state>" plus, on a TTY, a bar and bytes. */
static void pull_draw_layer(const struct pull *p, const Warren__V1__LayerProgress *l,
                            const char *hex) {
        char a[32], b[32];
        if (!p->tty) {
                if (l->total_bytes)
                        fprintf(stderr, "%.12s: %s (%s)\n", hex, l->state,
                                cli_format_size(l->total_bytes, b));
                else
                        fprintf(stderr, "%.12s: %s\n", hex, l->state);
                return;
        }
        char bar[21];
        uint64_t t = l->total_bytes ? l->total_bytes : 1;
        size_t fill = (size_t) ((l->done_bytes > t ? t : l->done_bytes) * 20 / t);
        for (size_t i = 0; i < 20; i++)
                bar[i] = i < fill ? '#' : ' ';
        bar[20] = '\0';
        fprintf(stderr, "\r\033[K%.12s: %-11s [%s] %s / %s\n", hex, l->state, bar,
                cli_format_size(l->done_bytes, a), cli_format_size(l->total_bytes, b));
}

static void pull_on_message(struct rpc_stream *s, const ProtobufCMessage *msg, void *userdata) {
        struct pull *p = userdata;
        const Warren__V1__PullImageProgress *m = (const Warren__V1__PullImageProgress *) msg;
        if (m->image)
                p->image_id = cli_strdup(m->image->id);
        size_t n = m->n_layers < PULL_MAX_LAYERS ? m->n_layers : PULL_MAX_LAYERS;
        if (n == 0)
                return;
        if (p->tty && p->drawn)
                fprintf(stderr, "\033[%zuA", p->drawn); /* back to the top of the block */
        for (size_t i = 0; i < n; i++) {
                const Warren__V1__LayerProgress *l = m->layers[i];
                const char *hex = strncmp(l->digest, "sha256:", 7) == 0 ? l->digest + 7 : l->digest;
                bool changed = i >= p->n || strcmp(p->state[i], l->state) != 0;
                snprintf(p->digest[i], sizeof(p->digest[i]), "%.12s", hex);
                snprintf(p->state[i], sizeof(p->state[i]), "%s", l->state);
                if (p->tty || changed)
                        pull_draw_layer(p, l, hex);
        }
        p->n = n;
        if (p->tty)
                p->drawn = n;
}

static void pull_on_close(struct rpc_stream *s, int status, const char *message, void *userdata) {
        struct pull *p = userdata;
        p->closed = true;
        p->status = status;
        p->message = cli_strdup(message ? message : "");
}

static int image_pull(struct cli_ctx *ctx, int argc, char **argv) {
        static const struct option longopts[] = {CLI_COMMON_LONGOPTS, {}};
        static const struct rpc_stream_callbacks cb = {.on_message = pull_on_message,
                                                       .on_close = pull_on_close};
        const char *cmd = "image pull", *usage = "REF";
        int c;
        while ((c = cli_getopt(ctx, cmd, usage, argc, argv, "h", longopts)) != -1)
                return c == CLI_GETOPT_HELP ? CLI_EXIT_OK : CLI_EXIT_USAGE;
        if (argc - optind != 1)
                return cli_usage_error(cmd, usage, "want exactly one REF");
        if (cli_connect(ctx) < 0)
                return CLI_EXIT_FAIL;
        Warren__V1__PullImageRequest req = WARREN__V1__PULL_IMAGE_REQUEST__INIT;
        req.ref = argv[optind];
        struct pull p = {.tty = isatty(STDERR_FILENO)};
        struct rpc_stream *s = NULL;
        int r = rpc_stream_open(ctx->client, "/warren.v1.Images/PullImage",
                                &warren__v1__pull_image_progress__descriptor, 0, &cb, &p, &s);
        if (r < 0) {
                fprintf(stderr, "warren: pull: %s\n", strerror(-r));
                return CLI_EXIT_FAIL;
        }
        rpc_stream_send(s, &req.base);
        rpc_stream_close_send(s);
        r = rpc_client_run(ctx->client);
        rpc_stream_free(s);
        if (!p.closed) {
                fprintf(stderr, "warren: pull: connection lost: %s\n",
                        strerror(r < 0 ? -r : EPIPE));
                return CLI_EXIT_FAIL;
        }
        if (p.status != 0) {
                cli_print_status(p.status, p.message);
                return CLI_EXIT_FAIL;
        }
        if (p.image_id)
                printf("%s\n", p.image_id);
        return CLI_EXIT_OK;
}

static int image_ls(struct cli_ctx *ctx, int argc, char **argv) {
        bool json;
        int rc0 = cli_getopt_json_only(ctx, "image ls", argc, argv, &json);
        if (rc0 >= 0)
                return rc0;
        Warren__V1__ListImagesRequest req = WARREN__V1__LIST_IMAGES_REQUEST__INIT;
        Warren__V1__ListImagesResponse *resp = NULL;
        int rc = cli_call(ctx, "/warren.v1.Images/ListImages", &req.base,
                          &warren__v1__list_images_response__descriptor,
                          (ProtobufCMessage **) &resp);
        if (rc != CLI_EXIT_OK)
                return rc;
        if (json) {
                cli_json_print_list((ProtobufCMessage *const *) resp->images, resp->n_images);
        } else {
                static const char *const headers[] = {"ID", "NAMES", "SIZE", "SOURCE", "CREATED"};
                struct cli_table *t = cli_table_new(5, headers);
                for (size_t i = 0; i < resp->n_images; i++) {
                        Warren__V1__Image *img = resp->images[i];
                        char idb[32], sz[32], tb[32];
                        char *names = cli_strdup("");
                        for (size_t k = 0; k < img->n_names; k++) {
                                char *n = cli_alloc(strlen(names) + strlen(img->names[k]) + 2);
                                sprintf(n, "%s%s%s", names, k ? "," : "", img->names[k]);
                                names = n;
                        }
                        const char *row[] = {
                                short_id(img->id, idb), names, cli_format_size(img->size_bytes, sz),
                                img->source,
                                cli_format_time(img->created_at ? img->created_at->unix_nanos : 0,
                                                tb)};
                        cli_table_add(t, row);
                }
                cli_table_print(t);
        }
        protobuf_c_message_free_unpacked(&resp->base, NULL);
        return CLI_EXIT_OK;
}

static int image_get(struct cli_ctx *ctx, int argc, char **argv) {
        static const struct option longopts[] = {CLI_COMMON_LONGOPTS, {}};
        const char *cmd = "image get", *usage = "NAME|ID";
        int c;
        while ((c = cli_getopt(ctx, cmd, usage, argc, argv, "h", longopts)) != -1)
                return c == CLI_GETOPT_HELP ? CLI_EXIT_OK : CLI_EXIT_USAGE;
        if (argc - optind != 1)
                return cli_usage_error(cmd, usage, "want exactly one NAME|ID");
        Warren__V1__GetImageRequest req = WARREN__V1__GET_IMAGE_REQUEST__INIT;
        req.image = argv[optind];
        Warren__V1__Image *img = NULL;
        int rc = cli_call(ctx, "/warren.v1.Images/GetImage", &req.base,
                          &warren__v1__image__descriptor, (ProtobufCMessage **) &img);
        if (rc != CLI_EXIT_OK)
                return rc;
        cli_json_print(cli_json_from_message(&img->base));
        protobuf_c_message_free_unpacked(&img->base, NULL);
        return CLI_EXIT_OK;
}

static int image_rm(struct cli_ctx *ctx, int argc, char **argv) {
        static const struct option longopts[] = {CLI_COMMON_LONGOPTS, {}};
        const char *cmd = "image rm", *usage = "NAME|ID...";
        int c;
        while ((c = cli_getopt(ctx, cmd, usage, argc, argv, "h", longopts)) != -1)
                return c == CLI_GETOPT_HELP ? CLI_EXIT_OK : CLI_EXIT_USAGE;
        if (optind >= argc)
                return cli_usage_error(cmd, usage, "missing NAME|ID");
        return cli_delete_each(ctx, argv + optind, argc - optind, "/warren.v1.Images/DeleteImage",
                               &warren__v1__delete_image_request__descriptor, "image",
                               &warren__v1__delete_image_response__descriptor);
}

int cli_cmd_image(struct cli_ctx *ctx, int argc, char **argv) {
        const struct cli_cmd cmds[] = {
                {"import", "NAME FILE|-", "import a root-filesystem tarball", image_import},
                {"pull", "REF", "pull an image from a registry", image_pull},
                {"ls", "[--json]", "list images", image_ls},
                {"get", "NAME|ID", "show one image as JSON", image_get},
                {"rm", "NAME|ID...", "delete images", image_rm},
                cli_image_build_cmds[0],
                cli_image_build_cmds[1],
        };
        return cli_dispatch(ctx, "image", cmds, ELEMENTSOF(cmds), argc - 1, argv + 1);
}
