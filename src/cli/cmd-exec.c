/* SPDX-License-Identifier: Apache-2.0 */
/* warren exec, run, shell and ps: a process in a sandbox over the
 * bidirectional Exec stream, driven by libuv. Output goes to fd 1/2;
 * stdin is forwarded with -i (tty, pipe or file); SIGINT, SIGTERM, SIGHUP
 * and SIGQUIT are forwarded to the process; the exit code passes through.
 * -t: a PTY in the sandbox, the local terminal in raw mode (restored on
 * exit), window size at start and on SIGWINCH. --detach prints the exec
 * id and leaves the process running; --attach EXEC_ID [--offset N] picks
 * it up again (replay from the offset, then live). */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <termios.h>
#include <unistd.h>

#include "cli.h"
#include "cli/exec-wire.h"

static const int forwarded_signals[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGWINCH};
#define N_SIGNALS ELEMENTSOF(forwarded_signals)

struct exec_state {
        struct cli_ctx *ctx;
        const struct cli_exec_opts *o;
        struct rpc_stream *stream;
        /* stdin: a stream handle (tty or pipe) or a regular file read with uv_fs */
        union {
                uv_tty_t tty;
                uv_pipe_t pipe;
        } in;
        bool in_is_stream, in_is_tty, in_open, in_reading, in_paused, in_eof;
        int in_fd;
        uv_fs_t in_req;
        char *in_buf;
        bool in_fs_busy;
        uv_tty_t out_tty; /* for raw mode when -t on a terminal */
        bool raw;
        uv_signal_t sig[N_SIGNALS];
        int n_interrupts;
        bool started, exited, closed, detached;
        char exec_id[32];
        int exit_code, status;
        char *message;
};

static int send_req(struct exec_state *st, Warren__V1__ExecRequest *req) {
        if (st->closed)
                return -EPIPE;
        return rpc_stream_send(st->stream, &req->base);
}

static void send_close_stdin(struct exec_state *st) {
        Warren__V1__ExecRequest req = WARREN__V1__EXEC_REQUEST__INIT;
        req.kind_case = WARREN__V1__EXEC_REQUEST__KIND_CLOSE_STDIN;
        req.close_stdin = true;
        (void) send_req(st, &req);
}

/* Returns 1 when the stream is above its high-water mark (pause input). */
static int send_stdin(struct exec_state *st, const void *data, size_t len) {
        Warren__V1__ExecRequest req = WARREN__V1__EXEC_REQUEST__INIT;
        req.kind_case = WARREN__V1__EXEC_REQUEST__KIND_STDIN;
        req.stdin.data = (uint8_t *) data;
        req.stdin.len = len;
        return send_req(st, &req);
}

/* --- stdin --- */

static void in_close(struct exec_state *st);
static void in_start(struct exec_state *st);

static void on_in_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf) {
        struct exec_state *st = h->data;
        buf->base = st->in_buf;
        buf->len = 64 * 1024;
}

static void in_got(struct exec_state *st, const char *data, ssize_t n) {
        if (n > 0) {
                if (send_stdin(st, data, (size_t) n) == 1) {
                        st->in_paused = true; /* resume in on_writable */
                        if (st->in_is_stream && st->in_reading) {
                                uv_read_stop((uv_stream_t *) &st->in);
                                st->in_reading = false;
                        }
                }
                return;
        }
        /* EOF or error: the process reads EOF. */
        st->in_eof = true;
        send_close_stdin(st);
        in_close(st);
}

static void on_in_read(uv_stream_t *s, ssize_t n, const uv_buf_t *buf) {
        struct exec_state *st = s->data;
        if (n == 0)
                return;
        in_got(st, buf->base, n);
}

static void on_in_fs_read(uv_fs_t *req) {
        struct exec_state *st = req->data;
        ssize_t n = req->result;
        uv_fs_req_cleanup(req);
        st->in_fs_busy = false;
        if (st->closed)
                return;
        in_got(st, st->in_buf, n);
        if (n > 0 && !st->in_paused)
                in_start(st);
}

static void in_start(struct exec_state *st) {
        if (st->in_eof || st->closed)
                return;
        if (st->in_is_stream) {
                if (!st->in_reading &&
                    uv_read_start((uv_stream_t *) &st->in, on_in_alloc, on_in_read) == 0)
                        st->in_reading = true;
                return;
        }
        if (st->in_fs_busy)
                return;
        uv_buf_t b = uv_buf_init(st->in_buf, 64 * 1024);
        st->in_req.data = st;
        if (uv_fs_read(st->ctx->loop, &st->in_req, st->in_fd, &b, 1, -1, on_in_fs_read) == 0)
                st->in_fs_busy = true;
}

static void in_open(struct exec_state *st) {
        st->in_fd = STDIN_FILENO;
        switch (uv_guess_handle(STDIN_FILENO)) {
        case UV_TTY:
                if (uv_tty_init(st->ctx->loop, &st->in.tty, STDIN_FILENO, 1) < 0)
                        goto as_file;
                st->in_is_stream = st->in_is_tty = true;
                break;
        case UV_NAMED_PIPE:
        case UV_TCP:
                if (uv_pipe_init(st->ctx->loop, &st->in.pipe, 0) < 0 ||
                    uv_pipe_open(&st->in.pipe, STDIN_FILENO) < 0)
                        goto as_file;
                st->in_is_stream = true;
                break;
        default:
        as_file:
                st->in_is_stream = false;
                break;
        }
        if (st->in_is_stream)
                st->in.tty.data = st;
        st->in_open = true;
        in_start(st);
}

static void in_close(struct exec_state *st) {
        if (!st->in_open)
                return;
        st->in_open = false;
        if (st->in_is_stream) {
                uv_read_stop((uv_stream_t *) &st->in);
                st->in_reading = false;
                uv_close((uv_handle_t *) &st->in, NULL);
        }
}

/* --- signals --- */

static void send_resize(struct exec_state *st) {
        int cols, rows;
        if (!st->raw || uv_tty_get_winsize(&st->out_tty, &cols, &rows) < 0)
                return;
        Warren__V1__WindowSize ws = WARREN__V1__WINDOW_SIZE__INIT;
        ws.cols = (uint32_t) cols;
        ws.rows = (uint32_t) rows;
        Warren__V1__ExecRequest req = WARREN__V1__EXEC_REQUEST__INIT;
        req.kind_case = WARREN__V1__EXEC_REQUEST__KIND_RESIZE;
        req.resize = &ws;
        (void) send_req(st, &req);
}

static void on_signal(uv_signal_t *h, int signum) {
        struct exec_state *st = h->data;
        if (signum == SIGWINCH) {
                send_resize(st);
                return;
        }
        if (signum == SIGINT && ++st->n_interrupts >= 3) {
                /* The process ignores SIGINT; the third Ctrl-C gives up. */
                fprintf(stderr, "warren: interrupted three times, abandoning the process\n");
                st->exit_code = 128 + SIGINT;
                rpc_stream_cancel(st->stream);
                return;
        }
        Warren__V1__ExecSignal sig = WARREN__V1__EXEC_SIGNAL__INIT;
        sig.signal = signum;
        Warren__V1__ExecRequest req = WARREN__V1__EXEC_REQUEST__INIT;
        req.kind_case = WARREN__V1__EXEC_REQUEST__KIND_SIGNAL;
        req.signal = &sig;
        (void) send_req(st, &req);
}

/* --- stream callbacks --- */

static void on_message(struct rpc_stream *s, const ProtobufCMessage *msg, void *userdata) {
        struct exec_state *st = userdata;
        const Warren__V1__ExecResponse *r = (const Warren__V1__ExecResponse *) msg;
        switch (r->kind_case) {
        case WARREN__V1__EXEC_RESPONSE__KIND_STARTED:
                st->started = true;
                snprintf(st->exec_id, sizeof(st->exec_id), "%s", r->started->exec_id);
                if (st->o->journal && !st->o->changes && !st->o->detach)
                        fprintf(stderr, "warren: journaled exec %s\n", r->started->exec_id);
                if (st->o->detach) {
                        /* Detached: say which exec it is and leave it running. */
                        printf("%s\n", r->started->exec_id);
                        fflush(stdout);
                        st->detached = true;
                        in_close(st);
                        rpc_stream_cancel(st->stream);
                        break;
                }
                send_resize(st);
                break;
        case WARREN__V1__EXEC_RESPONSE__KIND_STDOUT:
                (void) cli_write_all(STDOUT_FILENO, r->stdout->data.data, r->stdout->data.len);
                break;
        case WARREN__V1__EXEC_RESPONSE__KIND_STDERR:
                (void) cli_write_all(STDERR_FILENO, r->stderr->data.data, r->stderr->data.len);
                break;
        case WARREN__V1__EXEC_RESPONSE__KIND_EXITED:
                st->exited = true;
                st->exit_code = r->exited->exit_code;
                if (r->exited->reason == WARREN__V1__EXIT_REASON__EXIT_REASON_TIMEOUT)
                        fprintf(stderr, "warren: the command timed out and was killed\n");
                else if (r->exited->reason == WARREN__V1__EXIT_REASON__EXIT_REASON_OOM)
                        fprintf(stderr, "warren: the command was killed: out of memory\n");
                /* Nothing more to send. */
                in_close(st);
                break;
        case WARREN__V1__EXEC_RESPONSE__KIND_GAP:
                fprintf(stderr,
                        "warren: output %" PRIu64 "-%" PRIu64
                        " is no longer kept by the daemon (%" PRIu64 " bytes skipped)\n",
                        r->gap->from_offset, r->gap->to_offset,
                        r->gap->to_offset - r->gap->from_offset);
                break;
        default:
                break;
        }
}

/* Output (nearly every message of a busy stream) is written straight from
 * the received bytes; the rest goes through on_message. */
static int on_raw(struct rpc_stream *s, const uint8_t *msg, size_t len, void *userdata) {
        int stream;
        const uint8_t *data;
        size_t n;
        if (!cli_exec_output_parse(msg, len, &stream, &data, &n))
                return 0;
        (void) cli_write_all(stream == 1 ? STDOUT_FILENO : STDERR_FILENO, data, n);
        return 1;
}

static void on_writable(struct rpc_stream *s, void *userdata) {
        struct exec_state *st = userdata;
        if (st->in_paused) {
                st->in_paused = false;
                in_start(st);
        }
}

static void on_close(struct rpc_stream *s, int status, const char *message, void *userdata) {
        struct exec_state *st = userdata;
        st->closed = true;
        st->status = status;
        st->message = cli_strdup(message ? message : "");
        in_close(st);
        for (size_t i = 0; i < N_SIGNALS; i++)
                uv_close((uv_handle_t *) &st->sig[i], NULL);
}

int cli_exec_run(struct cli_ctx *ctx, const char *sandbox, int argc, char **argv,
                 const struct cli_exec_opts *o) {
        static const struct rpc_stream_callbacks cb = {
                .on_message = on_message,
                .on_raw = on_raw,
                .on_writable = on_writable,
                .on_close = on_close,
        };
        if (cli_connect(ctx) < 0)
                return CLI_EXIT_FAIL;

        struct exec_state st = {.ctx = ctx, .o = o, .in_fd = -EBADF};
        /* Output arrives in messages of up to 1 MiB: a bigger pipe to the
         * next command saves it as many wake-ups (best effort). */
        for (int fd = STDOUT_FILENO; fd <= STDERR_FILENO; fd++) {
                struct stat sst;
                if (fstat(fd, &sst) == 0 && S_ISFIFO(sst.st_mode))
                        (void) fcntl(fd, F_SETPIPE_SZ, 1024 * 1024);
        }
        Warren__V1__ExecStart start = WARREN__V1__EXEC_START__INIT;
        start.sandbox = (char *) sandbox;
        start.argv = argv;
        start.n_argv = (size_t) argc;
        start.workdir = (char *) (o->workdir ? o->workdir : "");
        start.user = (char *) (o->user ? o->user : "");
        start.timeout_secs = o->timeout;
        start.pty = o->tty;
        Warren__V1__ExecStart__EnvEntry **env = cli_alloc((o->n_env + 1) * sizeof(*env));
        for (size_t i = 0; i < o->n_env; i++) {
                env[i] = cli_alloc(sizeof(**env));
                warren__v1__exec_start__env_entry__init(env[i]);
                env[i]->key = o->env_keys[i];
                env[i]->value = o->env_values[i];
        }
        start.env = env;
        start.n_env = o->n_env;
        Warren__V1__WindowSize ws = WARREN__V1__WINDOW_SIZE__INIT;

        /* -t on a terminal: raw local mode, window size travels with start. */
        if (o->tty && isatty(STDOUT_FILENO) &&
            uv_tty_init(ctx->loop, &st.out_tty, STDOUT_FILENO, 0) == 0) {
                int cols, rows;
                if (uv_tty_get_winsize(&st.out_tty, &cols, &rows) == 0) {
                        ws.cols = (uint32_t) cols;
                        ws.rows = (uint32_t) rows;
                        start.window = &ws;
                }
                st.raw = true;
        }

        start.detach = o->detach;
        start.journal = o->journal || o->changes;
        Warren__V1__ExecAttach att = WARREN__V1__EXEC_ATTACH__INIT;
        Warren__V1__ExecRequest req = WARREN__V1__EXEC_REQUEST__INIT;
        req.kind_case = WARREN__V1__EXEC_REQUEST__KIND_START;
        req.start = &start;
        if (o->attach_id) {
                att.sandbox = (char *) sandbox;
                att.exec_id = (char *) o->attach_id;
                att.offset = o->offset;
                req.kind_case = WARREN__V1__EXEC_REQUEST__KIND_ATTACH;
                req.attach = &att;
        }
        for (size_t i = 0; i < N_SIGNALS; i++) {
                uv_signal_init(ctx->loop, &st.sig[i]);
                st.sig[i].data = &st;
        }
        int r = rpc_stream_open(ctx->client, "/warren.v1.Sandboxes/Exec",
                                &warren__v1__exec_response__descriptor, 0, &cb, &st, &st.stream);
        if (r < 0) {
                fprintf(stderr, "warren: exec: %s\n", strerror(-r));
                for (size_t i = 0; i < N_SIGNALS; i++)
                        uv_close((uv_handle_t *) &st.sig[i], NULL);
                if (st.raw)
                        uv_close((uv_handle_t *) &st.out_tty, NULL);
                return CLI_EXIT_FAIL;
        }
        (void) rpc_stream_send(st.stream, &req.base);

        for (size_t i = 0; i < N_SIGNALS && !st.closed; i++)
                uv_signal_start(&st.sig[i], on_signal, forwarded_signals[i]);
        st.in_buf = cli_alloc(64 * 1024);
        /* -d -i: stdin stays open for a later --attach -i; an attach leaves
         * the process's stdin as it is. */
        if (o->interactive && !o->detach && !st.closed)
                in_open(&st);
        else if (!o->attach_id && !(o->detach && o->interactive))
                send_close_stdin(&st);
        /* Our own copy of the terminal settings: libuv's reset works on the
         * fd of the tty handle, which is closed by the time we get back. */
        struct termios saved;
        bool restore = false;
        if (st.raw && st.in_is_tty) {
                restore = tcgetattr(STDIN_FILENO, &saved) == 0;
                uv_tty_set_mode(&st.in.tty, UV_TTY_MODE_RAW);
        }

        r = rpc_client_run(ctx->client);
        if (st.raw) {
                uv_tty_reset_mode();
                if (restore)
                        (void) tcsetattr(STDIN_FILENO, TCSADRAIN, &saved);
                uv_close((uv_handle_t *) &st.out_tty, NULL);
        }
        if (!st.closed) {
                /* The connection died under the stream. */
                in_close(&st);
                for (size_t i = 0; i < N_SIGNALS; i++)
                        uv_close((uv_handle_t *) &st.sig[i], NULL);
                fprintf(stderr, "warren: exec: connection to %s lost: %s\n", ctx->addr,
                        strerror(r < 0 ? -r : EPIPE));
                rpc_stream_free(st.stream);
                uv_run(ctx->loop, UV_RUN_NOWAIT);
                return CLI_EXIT_FAIL;
        }
        /* A pending fs read still references st: let it finish. */
        while (st.in_fs_busy)
                uv_run(ctx->loop, UV_RUN_ONCE);
        rpc_stream_free(st.stream);
        uv_run(ctx->loop, UV_RUN_NOWAIT); /* run the close callbacks */

        if (st.exited && o->changes && st.exec_id[0]) {
                int rc = cli_exec_changes(ctx, sandbox, st.exec_id, stderr, false);
                if (rc != CLI_EXIT_OK)
                        return rc;
        }
        if (st.exited)
                return st.exit_code;
        if (st.detached)
                return CLI_EXIT_OK;
        if (st.n_interrupts >= 3)
                return 128 + SIGINT;
        if (st.status != 0) {
                cli_print_status(st.status, st.message);
                return CLI_EXIT_FAIL;
        }
        fprintf(stderr, "warren: exec: the stream ended without an exit status\n");
        return CLI_EXIT_FAIL;
}

/* --- warren exec / warren run --- */

enum {
        OPT_TIMEOUT = CLI_OPT_FIRST_LOCAL,
        OPT_KEEP,
        OPT_GRACE,
        OPT_ATTACH,
        OPT_OFFSET,
        OPT_JSON,
        OPT_JOURNAL,
        OPT_CHANGES
};

/* Parse an exec option; 1 handled, 0 not an exec option, -2 usage error. */
static int exec_opt(struct cli_exec_opts *o, int c, const char *cmd, const char *usage) {
        char *k, *v;
        switch (c) {
        case 'i':
                o->interactive = true;
                return 1;
        case 't':
                o->tty = true;
                return 1;
        case OPT_TIMEOUT:
                if (cli_parse_seconds(optarg, &o->timeout) < 0) {
                        cli_usage_error(cmd, usage, "--timeout wants seconds, got '%s'", optarg);
                        return -CLI_EXIT_USAGE;
                }
                return 1;
        case 'e':
                if (cli_parse_kv(optarg, &k, &v) < 0) {
                        cli_usage_error(cmd, usage, "expected K=V, got '%s'", optarg);
                        return -CLI_EXIT_USAGE;
                }
                size_t nk = o->n_env;
                cli_push((void ***) &o->env_keys, &nk, k);
                cli_push((void ***) &o->env_values, &o->n_env, v);
                return 1;
        case 'w':
                o->workdir = optarg;
                return 1;
        case 'u':
                o->user = optarg;
                return 1;
        case 'd':
                o->detach = true;
                return 1;
        case OPT_ATTACH:
                o->attach_id = optarg;
                return 1;
        case OPT_JOURNAL:
                o->journal = true;
                return 1;
        case OPT_CHANGES:
                o->changes = true;
                return 1;
        case OPT_OFFSET: {
                char *end;
                errno = 0;
                unsigned long long n = strtoull(optarg, &end, 10);
                if (errno || end == optarg || *end || optarg[0] == '-') {
                        cli_usage_error(cmd, usage, "--offset wants a byte offset, got '%s'",
                                        optarg);
                        return -CLI_EXIT_USAGE;
                }
                o->offset = n;
                return 1;
        }
        default:
                return 0;
        }
}

/* Parse exec's options (exec_opt) into o. Returns -1 when parsing went
 * through, else the exit code to return (help shown, usage error). */
static int exec_getopt(struct cli_ctx *ctx, const char *cmd, const char *usage, int argc,
                       char **argv, const char *optstring, const struct option *longopts,
                       struct cli_exec_opts *o) {
        int c;
        while ((c = cli_getopt(ctx, cmd, usage, argc, argv, optstring, longopts)) != -1) {
                if (c == CLI_GETOPT_HELP)
                        return CLI_EXIT_OK;
                if (c < 0)
                        return CLI_EXIT_USAGE;
                int r = exec_opt(o, c, cmd, usage);
                if (r < 0)
                        return -r;
                if (r == 0)
                        return CLI_EXIT_USAGE;
        }
        return -1;
}

int cli_cmd_exec(struct cli_ctx *ctx, int argc, char **argv) {
        static const struct option longopts[] = {{"interactive", no_argument, NULL, 'i'},
                                                 {"tty", no_argument, NULL, 't'},
                                                 {"workdir", required_argument, NULL, 'w'},
                                                 {"user", required_argument, NULL, 'u'},
                                                 {"env", required_argument, NULL, 'e'},
                                                 {"timeout", required_argument, NULL, OPT_TIMEOUT},
                                                 {"detach", no_argument, NULL, 'd'},
                                                 {"attach", required_argument, NULL, OPT_ATTACH},
                                                 {"offset", required_argument, NULL, OPT_OFFSET},
                                                 {"journal", no_argument, NULL, OPT_JOURNAL},
                                                 {"changes", no_argument, NULL, OPT_CHANGES},
                                                 CLI_COMMON_LONGOPTS,
                                                 {}};
        const char *cmd = "exec",
                   *usage = "[-i] [-t] [-d] [-w DIR] [-u USER] [-e K=V]... [--timeout S] "
                            "[--journal|--changes] ID|NAME -- CMD... "
                            "| --attach EXEC_ID [--offset N] [-i] [-t] ID|NAME";
        struct cli_exec_opts o = {0};
        /* '+': options end at ID|NAME, so the command's own flags stay its own. */
        int rc = exec_getopt(ctx, cmd, usage, argc, argv, "+hitdw:u:e:", longopts, &o);
        if (rc >= 0)
                return rc;
        if (optind >= argc)
                return cli_usage_error(cmd, usage, "missing ID|NAME");
        const char *sandbox = argv[optind++];
        if (o.attach_id) {
                if (optind < argc)
                        return cli_usage_error(cmd, usage,
                                               "--attach takes no command (the exec has one)");
                if (o.detach)
                        return cli_usage_error(cmd, usage,
                                               "--attach and --detach exclude each other");
                return cli_exec_run(ctx, sandbox, 0, NULL, &o);
        }
        if (o.offset)
                return cli_usage_error(cmd, usage, "--offset goes with --attach");
        if (optind < argc && strcmp(argv[optind], "--") == 0)
                optind++;
        if (optind >= argc)
                return cli_usage_error(cmd, usage, "missing the command to run");
        return cli_exec_run(ctx, sandbox, argc - optind, argv + optind, &o);
}

/* --- warren shell --- */

int cli_cmd_shell(struct cli_ctx *ctx, int argc, char **argv) {
        static const struct option longopts[] = {{"workdir", required_argument, NULL, 'w'},
                                                 {"user", required_argument, NULL, 'u'},
                                                 {"env", required_argument, NULL, 'e'},
                                                 CLI_COMMON_LONGOPTS,
                                                 {}};
        const char *cmd = "shell", *usage = "[-w DIR] [-u USER] [-e K=V]... ID|NAME";
        struct cli_exec_opts o = {.interactive = true, .tty = true};
        int rc = exec_getopt(ctx, cmd, usage, argc, argv, "+hw:u:e:", longopts, &o);
        if (rc >= 0)
                return rc;
        if (optind + 1 != argc)
                return cli_usage_error(cmd, usage, "give exactly one ID|NAME");
        /* The local terminal type travels along (unless -e TERM=... set it). */
        const char *term = getenv("TERM");
        bool has_term = false;
        for (size_t i = 0; i < o.n_env; i++)
                has_term |= strcmp(o.env_keys[i], "TERM") == 0;
        if (term && *term && !has_term) {
                size_t nk = o.n_env;
                cli_push((void ***) &o.env_keys, &nk, cli_strdup("TERM"));
                cli_push((void ***) &o.env_values, &o.n_env, cli_strdup(term));
        }
        /* The sandbox's $SHELL when it has one that runs, else /bin/sh. */
        static char *shell_argv[] = {
                "/bin/sh", "-c",
                "if [ -n \"$SHELL\" ] && [ -x \"$SHELL\" ]; then exec \"$SHELL\"; fi; exec /bin/sh",
                NULL};
        return cli_exec_run(ctx, argv[optind], 3, shell_argv, &o);
}

/* --- warren ps --- */

static const char *exit_text(const Warren__V1__ExecExited *x, char buf[static 32]) {
        switch (x->reason) {
        case WARREN__V1__EXIT_REASON__EXIT_REASON_EXITED:
                snprintf(buf, 32, "exited %d", x->exit_code);
                break;
        case WARREN__V1__EXIT_REASON__EXIT_REASON_SIGNALED:
                snprintf(buf, 32, "signaled %s", sigabbrev_np(x->signal) ?: "?");
                break;
        case WARREN__V1__EXIT_REASON__EXIT_REASON_TIMEOUT:
                snprintf(buf, 32, "timeout");
                break;
        case WARREN__V1__EXIT_REASON__EXIT_REASON_OOM:
                snprintf(buf, 32, "oom-killed");
                break;
        case WARREN__V1__EXIT_REASON__EXIT_REASON_SANDBOX_TERMINATED:
                snprintf(buf, 32, "sandbox terminated");
                break;
        default:
                snprintf(buf, 32, "ended");
                break;
        }
        return buf;
}

int cli_cmd_ps(struct cli_ctx *ctx, int argc, char **argv) {
        static const struct option longopts[] = {
                {"json", no_argument, NULL, OPT_JSON}, CLI_COMMON_LONGOPTS, {}};
        const char *cmd = "ps", *usage = "[--json] ID|NAME";
        bool json = false;
        int c;
        while ((c = cli_getopt(ctx, cmd, usage, argc, argv, "h", longopts)) != -1) {
                if (c == CLI_GETOPT_HELP)
                        return CLI_EXIT_OK;
                if (c < 0)
                        return CLI_EXIT_USAGE;
                if (c == OPT_JSON)
                        json = true;
        }
        if (optind + 1 != argc)
                return cli_usage_error(cmd, usage, "give exactly one ID|NAME");
        Warren__V1__ListProcessesRequest req = WARREN__V1__LIST_PROCESSES_REQUEST__INIT;
        req.sandbox = argv[optind];
        Warren__V1__ListProcessesResponse *resp = NULL;
        int rc = cli_call(ctx, "/warren.v1.Sandboxes/ListProcesses", &req.base,
                          &warren__v1__list_processes_response__descriptor,
                          (ProtobufCMessage **) &resp);
        if (rc != CLI_EXIT_OK)
                return rc;
        if (json) {
                cli_json_print_list((ProtobufCMessage *const *) resp->processes, resp->n_processes);
        } else {
                static const char *const headers[] = {"EXEC ID", "PID", "STATUS", "STARTED",
                                                      "COMMAND"};
                struct cli_table *t = cli_table_new(5, headers);
                for (size_t i = 0; i < resp->n_processes; i++) {
                        const Warren__V1__Process *p = resp->processes[i];
                        char pid[16], status[32], started[32], command[256];
                        snprintf(pid, sizeof(pid), "%d", p->pid);
                        if (p->running)
                                snprintf(status, sizeof(status), "running%s",
                                         p->pty ? " (tty)" : "");
                        else if (p->exited)
                                exit_text(p->exited, status);
                        else
                                snprintf(status, sizeof(status), "ended");
                        size_t n = 0;
                        command[0] = 0;
                        for (size_t j = 0; j < p->n_argv && n + 1 < sizeof(command); j++)
                                n += (size_t) snprintf(command + n, sizeof(command) - n, "%s%s",
                                                       j ? " " : "", p->argv[j]);
                        const char *cells[] = {
                                p->exec_id, pid, status,
                                cli_format_time(p->started_at ? p->started_at->unix_nanos : 0,
                                                started),
                                command};
                        cli_table_add(t, cells);
                }
                cli_table_print(t);
                cli_table_free(t);
        }
        protobuf_c_message_free_unpacked(&resp->base, NULL);
        return CLI_EXIT_OK;
}

static volatile sig_atomic_t run_interrupted;

static void run_on_signal(int sig) {
        run_interrupted = sig;
}

int cli_cmd_run(struct cli_ctx *ctx, int argc, char **argv) {
        static const struct option longopts[] = {{"interactive", no_argument, NULL, 'i'},
                                                 {"tty", no_argument, NULL, 't'},
                                                 {"timeout", required_argument, NULL, OPT_TIMEOUT},
                                                 {"keep", no_argument, NULL, OPT_KEEP},
                                                 {"grace", required_argument, NULL, OPT_GRACE},
                                                 CLI_CREATE_LONGOPTS,
                                                 CLI_COMMON_LONGOPTS,
                                                 {}};
        const char *cmd = "run",
                   *usage = "[-i] [-t] [--timeout S] [--keep] [--grace S] " CLI_CREATE_USAGE
                            " IMAGE -- CMD...";
        struct cli_create cr;
        cli_create_init(&cr);
        struct cli_exec_opts o = {0};
        bool keep = false;
        double grace = 0;
        int c;
        while ((c = cli_getopt(ctx, cmd, usage, argc, argv, "+hitn:e:w:", longopts)) != -1) {
                if (c == CLI_GETOPT_HELP)
                        return CLI_EXIT_OK;
                if (c < 0)
                        return CLI_EXIT_USAGE;
                if (c == OPT_KEEP) {
                        keep = true;
                        continue;
                }
                if (c == OPT_GRACE) {
                        if (cli_parse_seconds(optarg, &grace) < 0)
                                return cli_usage_error(cmd, usage,
                                                       "--grace wants seconds, got '%s'", optarg);
                        continue;
                }
                /* -e and -w configure the sandbox (every process inherits them). */
                int r = (c == 'e' || c == 'w') ? 0 : exec_opt(&o, c, cmd, usage);
                if (r == 0)
                        r = cli_create_opt(&cr, c, optarg, cmd, usage);
                if (r < 0)
                        return -r;
                if (r == 0)
                        return CLI_EXIT_USAGE;
        }
        if (optind >= argc)
                return cli_usage_error(cmd, usage, "missing IMAGE");
        const char *image = argv[optind++];
        if (optind < argc && strcmp(argv[optind], "--") == 0)
                optind++;
        if (optind >= argc)
                return cli_usage_error(cmd, usage, "missing the command to run");
        cli_create_finish(&cr, image, NULL, 0);

        /* Until the exec forwards them, a signal only marks the run as
         * interrupted so that the sandbox is still terminated. */
        struct sigaction sa = {.sa_handler = run_on_signal}, old_int, old_term, old_hup;
        sigemptyset(&sa.sa_mask);
        sigaction(SIGINT, &sa, &old_int);
        sigaction(SIGTERM, &sa, &old_term);
        sigaction(SIGHUP, &sa, &old_hup);

        Warren__V1__Sandbox *sb = NULL;
        int rc = cli_sandbox_create(ctx, &cr, &sb);
        if (rc == CLI_EXIT_OK) {
                char *id = cli_strdup(sb->id);
                protobuf_c_message_free_unpacked(&sb->base, NULL);
                if (run_interrupted)
                        rc = 128 + run_interrupted;
                else
                        rc = cli_exec_run(ctx, id, argc - optind, argv + optind, &o);
                /* libuv's signal handles reset the disposition: ours again. */
                sigaction(SIGINT, &sa, NULL);
                sigaction(SIGTERM, &sa, NULL);
                sigaction(SIGHUP, &sa, NULL);
                if (!keep && cli_sandbox_terminate(ctx, id, grace, true) != CLI_EXIT_OK)
                        fprintf(stderr,
                                "warren: sandbox %s may still be running; remove it "
                                "with `warren sandbox rm %s`\n",
                                id, id);
                else if (keep)
                        fprintf(stderr, "warren: kept sandbox %s\n", id);
        }
        sigaction(SIGINT, &old_int, NULL);
        sigaction(SIGTERM, &old_term, NULL);
        sigaction(SIGHUP, &old_hup, NULL);
        return rc;
}
