/* SPDX-License-Identifier: Apache-2.0 */
/* Argument parsing, connecting and calling: the helpers every warren
 * subcommand shares (the arena is cli-arena.c, output cli-output.c). */
#include "cli.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "basic/err.h"
#include "cli/tls-dl.h"

/* --- arguments --- */

int cli_usage(const char *cmd, const char *usage, bool help) {
        fprintf(help ? stdout : stderr, "usage: warren%s%s%s%s\n", cmd[0] ? " " : "", cmd,
                usage[0] ? " " : "", usage);
        return help ? CLI_EXIT_OK : CLI_EXIT_USAGE;
}

int cli_usage_error(const char *cmd, const char *usage, const char *fmt, ...) {
        va_list ap;
        fprintf(stderr, "warren%s%s: ", cmd[0] ? " " : "", cmd);
        va_start(ap, fmt);
        vfprintf(stderr, fmt, ap);
        va_end(ap);
        fputc('\n', stderr);
        return cli_usage(cmd, usage, false);
}

int cli_getopt(struct cli_ctx *ctx, const char *cmd, const char *usage, int argc, char **argv,
               const char *shortopts, const struct option *longopts) {
        char opts[64];
        bool posix = shortopts[0] == '+';
        snprintf(opts, sizeof(opts), "%s:%s", posix ? "+" : "", shortopts + (posix ? 1 : 0));
        opterr = 0;
        for (;;) {
                int c = getopt_long(argc, argv, opts, longopts, NULL);
                switch (c) {
                case CLI_OPT_ADDR:
                        ctx->addr = optarg;
                        continue;
                case CLI_OPT_TLS:
                        ctx->tls = true;
                        continue;
                case CLI_OPT_CA:
                        ctx->ca_file = optarg;
                        ctx->tls = true;
                        continue;
                case CLI_OPT_TOKEN:
                        ctx->token = optarg && *optarg ? optarg : NULL;
                        continue;
                case 'h':
                        cli_usage(cmd, usage, true);
                        return CLI_GETOPT_HELP;
                case '?':
                        if (optopt > 0 && optopt < 0x80)
                                cli_usage_error(cmd, usage, "unknown option '-%c'", optopt);
                        else
                                cli_usage_error(cmd, usage, "unknown option '%s'",
                                                argv[MAX(optind - 1, 1)]);
                        return CLI_GETOPT_USAGE;
                case ':':
                        cli_usage_error(cmd, usage, "option '%s' needs a value",
                                        argv[MAX(optind - 1, 1)]);
                        return CLI_GETOPT_USAGE;
                default:
                        return c;
                }
        }
}

int cli_getopt_json_only(struct cli_ctx *ctx, const char *cmd, int argc, char **argv, bool *json) {
        enum { OPT_JSON = CLI_OPT_FIRST_LOCAL };
        static const struct option longopts[] = {
                {"json", no_argument, NULL, OPT_JSON}, CLI_COMMON_LONGOPTS, {}};
        const char *usage = "[--json]";
        int c;
        *json = false;
        while ((c = cli_getopt(ctx, cmd, usage, argc, argv, "h", longopts)) != -1) {
                if (c == OPT_JSON)
                        *json = true;
                else
                        return c == CLI_GETOPT_HELP ? CLI_EXIT_OK : CLI_EXIT_USAGE;
        }
        if (optind < argc)
                return cli_usage_error(cmd, usage, "unexpected argument '%s'", argv[optind]);
        return -1;
}

int cli_parse_kv(const char *s, char **ret_key, char **ret_value) {
        const char *eq = strchr(s, '=');
        if (!eq || eq == s)
                return -EINVAL;
        char *k = cli_strdup(s);
        k[eq - s] = '\0';
        *ret_key = k;
        *ret_value = k + (eq - s) + 1;
        return 0;
}

int cli_parse_seconds(const char *s, double *ret) {
        char *end;
        errno = 0;
        double d = strtod(s, &end);
        if (errno || end == s || *end || !isfinite(d) || d < 0)
                return -EINVAL;
        *ret = d;
        return 0;
}

/* --- connection --- */

int cli_connect(struct cli_ctx *ctx) {
        if (ctx->client)
                return 0;
        struct rpc_client_config cfg = {
                .addr = ctx->addr,
                .tls = ctx->tls,
                .ca_file = ctx->ca_file,
                .token = ctx->token,
                .environment = ctx->environment,
        };
        struct wr_err e = {0};
        /* OpenSSL is loaded for TLS connections only (tls-dl.h); the rpc
         * client takes "tls:" as TLS too. */
        int r = ctx->tls || strncmp(ctx->addr, "tls:", 4) == 0 ? cli_tls_load(&e) : 0;
        if (r < 0) {
                fprintf(stderr, "warren: cannot connect to %s: %s\n", ctx->addr, e.msg);
                return r;
        }
        r = rpc_client_new(ctx->loop, &cfg, &ctx->client, &e);
        if (r >= 0)
                return 0;
        ctx->client = NULL;
        if (r == -EINVAL || r == -EHOSTUNREACH)
                fprintf(stderr,
                        "warren: cannot connect to %s: %s — fix --addr or WARREN_ADDR "
                        "(unix:/path, unix:///path or HOST:PORT)\n",
                        ctx->addr, e.msg[0] ? e.msg : strerror(-r));
        else if (r == -EPROTO)
                fprintf(stderr,
                        "warren: cannot connect to %s: %s — check --tls/--ca (or WARREN_TLS_CA) "
                        "against the daemon's listener\n",
                        ctx->addr, e.msg[0] ? e.msg : strerror(-r));
        else
                fprintf(stderr,
                        "warren: cannot connect to %s: %s — is warrend running? start it with "
                        "`make run` or set WARREN_ADDR\n",
                        ctx->addr, strerror(-r));
        return r;
}

void cli_print_status(int status, const char *message) {
        fprintf(stderr, "warren: %s: %s\n", err_status_name(status),
                message && message[0] ? message : "(no message)");
}

int cli_call(struct cli_ctx *ctx, const char *path, const ProtobufCMessage *req,
             const ProtobufCMessageDescriptor *resp_desc, ProtobufCMessage **ret) {
        if (cli_connect(ctx) < 0)
                return CLI_EXIT_FAIL;
        struct wr_err e = {0};
        int r = rpc_client_unary(ctx->client, path, req, resp_desc, 0, ret, &e);
        if (r == -EREMOTEIO) {
                cli_print_status(e.status, e.msg);
                return CLI_EXIT_FAIL;
        }
        if (r < 0) {
                fprintf(stderr,
                        "warren: %s — the connection to %s failed; if the daemon listens with "
                        "TLS pass --tls/--ca (WARREN_TLS_CA)\n",
                        e.msg[0] ? e.msg : strerror(-r), ctx->addr);
                return CLI_EXIT_FAIL;
        }
        return CLI_EXIT_OK;
}

/* --- client-streaming upload --- */

struct upload {
        struct rpc_stream *stream;
        int fd;
        cli_chunk_fn chunk_fn;
        void *userdata;
        uint8_t *buf;
        uint64_t sent;
        const char *label;
        bool progress, eof, closed;
        int status;
        char *message;
        ProtobufCMessage *resp;
        int read_errno;
};

static void upload_progress(struct upload *u, bool last) {
        if (!u->progress)
                return;
        char sz[32];
        fprintf(stderr, "\r%s: %s sent%s", u->label, cli_format_size(u->sent, sz),
                last ? "\n" : "");
}

/* Read and queue chunks until the stream asks us to wait or the input ends. */
static void upload_pump(struct upload *u) {
        while (!u->eof && !u->closed) {
                ssize_t n = RETRY_EINTR(read(u->fd, u->buf, CLI_CHUNK));
                if (n < 0) {
                        u->read_errno = errno;
                        rpc_stream_cancel(u->stream);
                        return;
                }
                if (n == 0) {
                        u->eof = true;
                        upload_progress(u, true);
                        rpc_stream_close_send(u->stream);
                        return;
                }
                ProtobufCMessage *m = u->chunk_fn(u->buf, (size_t) n, u->userdata);
                int r = rpc_stream_send(u->stream, m);
                u->sent += (uint64_t) n;
                upload_progress(u, false);
                if (r < 0)
                        return; /* the call is over; on_close says why */
                if (r == 1)
                        return; /* wait for on_writable */
        }
}

static void upload_on_message(struct rpc_stream *s, const ProtobufCMessage *msg, void *userdata) {
        struct upload *u = userdata;
        if (u->resp)
                return;
        /* The message is freed when we return: keep a copy. */
        size_t len = protobuf_c_message_get_packed_size(msg);
        uint8_t *buf = malloc(len ? len : 1);
        if (!buf)
                abort();
        protobuf_c_message_pack(msg, buf);
        u->resp = protobuf_c_message_unpack(msg->descriptor, NULL, len, buf);
        free(buf);
}

static void upload_on_writable(struct rpc_stream *s, void *userdata) {
        upload_pump(userdata);
}

static void upload_on_close(struct rpc_stream *s, int status, const char *message, void *userdata) {
        struct upload *u = userdata;
        u->closed = true;
        u->status = status;
        u->message = cli_strdup(message ? message : "");
}

int cli_upload(struct cli_ctx *ctx, const char *path, const ProtobufCMessage *first, int fd,
               cli_chunk_fn chunk_fn, void *userdata, const ProtobufCMessageDescriptor *resp_desc,
               const char *label, ProtobufCMessage **ret) {
        static const struct rpc_stream_callbacks cb = {
                .on_message = upload_on_message,
                .on_writable = upload_on_writable,
                .on_close = upload_on_close,
        };
        if (cli_connect(ctx) < 0)
                return CLI_EXIT_FAIL;
        struct upload u = {
                .fd = fd,
                .chunk_fn = chunk_fn,
                .userdata = userdata,
                .label = label,
                .progress = isatty(STDERR_FILENO),
        };
        u.buf = malloc(CLI_CHUNK);
        if (!u.buf)
                abort();
        int r = rpc_stream_open(ctx->client, path, resp_desc, 0, &cb, &u, &u.stream);
        if (r < 0) {
                free(u.buf);
                fprintf(stderr, "warren: %s: %s\n", path, strerror(-r));
                return CLI_EXIT_FAIL;
        }
        r = rpc_stream_send(u.stream, first);
        if (r >= 0 && r != 1)
                upload_pump(&u);
        r = rpc_client_run(ctx->client);
        rpc_stream_free(u.stream);
        free(u.buf);
        if (u.read_errno) {
                fprintf(stderr, "warren: reading %s: %s\n", label, strerror(u.read_errno));
                goto fail;
        }
        if (!u.closed) {
                fprintf(stderr, "warren: %s: connection lost: %s\n", path,
                        strerror(r < 0 ? -r : EPIPE));
                goto fail;
        }
        if (u.status != 0) {
                cli_print_status(u.status, u.message);
                goto fail;
        }
        if (!u.resp) {
                fprintf(stderr, "warren: %s: the server sent no response\n", path);
                return CLI_EXIT_FAIL;
        }
        *ret = u.resp;
        return CLI_EXIT_OK;
fail:
        if (u.resp)
                protobuf_c_message_free_unpacked(u.resp, NULL);
        return CLI_EXIT_FAIL;
}

/* --- raw I/O --- */

int cli_write_all(int fd, const void *buf, size_t len) {
        const uint8_t *p = buf;
        while (len > 0) {
                ssize_t n = write(fd, p, len);
                if (n < 0) {
                        if (errno == EINTR)
                                continue;
                        if (errno == EAGAIN) {
                                struct pollfd pfd = {.fd = fd, .events = POLLOUT};
                                (void) poll(&pfd, 1, -1);
                                continue;
                        }
                        return -errno;
                }
                p += n;
                len -= (size_t) n;
        }
        return 0;
}

ssize_t cli_read_all(int fd, size_t max, uint8_t **ret) {
        size_t cap = 4096, len = 0;
        uint8_t *buf = malloc(cap);
        if (!buf)
                abort();
        for (;;) {
                if (len == cap) {
                        if (cap >= max + 1) {
                                explicit_bzero(buf, len);
                                free(buf);
                                return -EFBIG;
                        }
                        cap = MIN(cap * 2, max + 1);
                        /* no realloc: a secret's bytes must not stay in freed memory */
                        uint8_t *nb = malloc(cap);
                        if (!nb)
                                abort();
                        memcpy(nb, buf, len);
                        explicit_bzero(buf, len);
                        free(buf);
                        buf = nb;
                }
                ssize_t n = RETRY_EINTR(read(fd, buf + len, cap - len));
                if (n < 0) {
                        int r = -errno;
                        explicit_bzero(buf, len);
                        free(buf);
                        return r;
                }
                if (n == 0)
                        break;
                len += (size_t) n;
        }
        if (len > max) {
                explicit_bzero(buf, len);
                free(buf);
                return -EFBIG;
        }
        uint8_t *out = cli_alloc(len + 1);
        memcpy(out, buf, len);
        explicit_bzero(buf, cap); /* it may be a secret: the copy is the caller's to wipe */
        free(buf);
        *ret = out;
        return (ssize_t) len;
}

int cli_delete_each(struct cli_ctx *ctx, char **names, int n, const char *path,
                    const ProtobufCMessageDescriptor *req_desc, const char *field,
                    const ProtobufCMessageDescriptor *resp_desc) {
        const ProtobufCFieldDescriptor *f =
                protobuf_c_message_descriptor_get_field_by_name(req_desc, field);
        if (!f || f->type != PROTOBUF_C_TYPE_STRING || req_desc->sizeof_message > 256)
                abort(); /* a programming error, not input */
        int rc = CLI_EXIT_OK;
        for (int i = 0; i < n; i++) {
                _Alignas(max_align_t) unsigned char buf[256];
                ProtobufCMessage *req = (ProtobufCMessage *) buf;
                protobuf_c_message_init(req_desc, req);
                *(const char **) (buf + f->offset) = names[i];
                ProtobufCMessage *resp = NULL;
                if (cli_call(ctx, path, req, resp_desc, &resp) != CLI_EXIT_OK) {
                        rc = CLI_EXIT_FAIL;
                        continue;
                }
                protobuf_c_message_free_unpacked(resp, NULL);
                printf("%s\n", names[i]);
        }
        return rc;
}
