/* SPDX-License-Identifier: Apache-2.0 */
/* Exec sessions: one process in a sandbox, its pipes (or PTY), output
 * streamed with back-pressure, stdin, signals, timeout, exit. */
#include "sandbox/sandbox-internal.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/wait.h>
#include <termios.h>

#include "basic/log.h"
#include "runtime/ctl.h"
#include "store/store.h"

#define READ_CHUNK (256 * 1024)
#define PIPE_SIZE (1024 * 1024)
#define STDIN_HIGH_WATER (1024 * 1024)

enum { OUT_STDOUT = 0, OUT_STDERR = 1 };

struct sbx_exec {
        struct sbx *sb;
        struct sbx_exec *next; /* in sb->execs while the process is tracked */
        uint64_t id;
        char id_str[24];
        const struct sbx_exec_callbacks *cb; /* NULL once released */
        void *userdata;
        bool pty, detach;

        int out_fd[2];
        uv_poll_t out_poll[2];
        bool out_open[2];

        int in_fd;
        uv_poll_t in_poll;
        bool in_open, in_polling, in_close_pending, in_full;
        uint8_t *in_buf;
        size_t in_len;

        uv_timer_t timer;
        bool spawned, exited, finished, released, paused;
        int pid, status, reason;
        uint64_t offset;
        int handles;
};

static uint8_t read_buf[READ_CHUNK];

static struct sbx_exec *find(struct sbx *sb, uint64_t id) {
        for (struct sbx_exec *x = sb->execs; x; x = x->next)
                if (x->id == id)
                        return x;
        return NULL;
}

static void unlink_exec(struct sbx_exec *x) {
        if (!x->sb)
                return;
        for (struct sbx_exec **pp = &x->sb->execs; *pp; pp = &(*pp)->next)
                if (*pp == x) {
                        *pp = x->next;
                        break;
                }
        x->sb = NULL;
}

static void maybe_free(struct sbx_exec *x) {
        if (x->finished && x->released && x->handles == 0) {
                free(x->in_buf);
                free(x);
        }
}

static void handle_closed(uv_handle_t *h) {
        struct sbx_exec *x = h->data;
        x->handles--;
        maybe_free(x);
}

static void close_out(struct sbx_exec *x, int i) {
        if (!x->out_open[i])
                return;
        x->out_open[i] = false;
        uv_poll_stop(&x->out_poll[i]);
        uv_close((uv_handle_t *) &x->out_poll[i], handle_closed);
        close(x->out_fd[i]);
        x->out_fd[i] = -EBADF;
}

static void close_in(struct sbx_exec *x) {
        if (!x->in_open)
                return;
        x->in_open = false;
        uv_poll_stop(&x->in_poll);
        uv_close((uv_handle_t *) &x->in_poll, handle_closed);
        close(x->in_fd);
        x->in_fd = -EBADF;
        free(x->in_buf);
        x->in_buf = NULL;
        x->in_len = 0;
}

/* The process is over and its output delivered: report and clean up. */
static void finish(struct sbx_exec *x) {
        if (x->finished)
                return;
        x->finished = true;
        close_out(x, OUT_STDOUT);
        close_out(x, OUT_STDERR);
        close_in(x);
        uv_timer_stop(&x->timer);
        uv_close((uv_handle_t *) &x->timer, handle_closed);
        unlink_exec(x);
        int code, signo = 0, reason;
        if (WIFEXITED(x->status)) {
                code = WEXITSTATUS(x->status);
                reason = WARREN__V1__EXIT_REASON__EXIT_REASON_EXITED;
        } else {
                signo = WIFSIGNALED(x->status) ? WTERMSIG(x->status) : SIGKILL;
                code = 128 + signo;
                reason = WARREN__V1__EXIT_REASON__EXIT_REASON_SIGNALED;
        }
        if (x->reason)
                reason = x->reason;
        if (x->cb && x->cb->on_exited)
                x->cb->on_exited(x, code, signo, reason, x->userdata);
        maybe_free(x);
}

static void maybe_finish(struct sbx_exec *x) {
        if (x->exited && !x->out_open[OUT_STDOUT] && !x->out_open[OUT_STDERR])
                finish(x);
}

static void out_poll_cb(uv_poll_t *h, int status, int events);

static void set_reading(struct sbx_exec *x, bool on) {
        for (int i = 0; i < 2; i++)
                if (x->out_open[i]) {
                        if (on)
                                uv_poll_start(&x->out_poll[i], UV_READABLE, out_poll_cb);
                        else
                                uv_poll_stop(&x->out_poll[i]);
                }
}

/* Read what stream i has, until it would block, ends, or the consumer is
 * full. After the process exited, "would block" means the stream is done
 * (only orphaned grandchildren could still write to it). */
static void drain(struct sbx_exec *x, int i) {
        while (x->out_open[i] && !x->paused) {
                ssize_t n = read(x->out_fd[i], read_buf, sizeof(read_buf));
                if (n > 0) {
                        uint64_t off = x->offset;
                        x->offset += (uint64_t) n;
                        int r = 0;
                        if (x->cb && x->cb->on_output)
                                r = x->cb->on_output(x, i == OUT_STDOUT ? SBX_STDOUT : SBX_STDERR,
                                                     read_buf, (size_t) n, off, x->userdata);
                        if (r > 0) {
                                x->paused = true;
                                set_reading(x, false);
                        }
                        continue;
                }
                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0 && errno == EAGAIN) {
                        if (x->exited)
                                close_out(x, i);
                        break;
                }
                /* EOF, or EIO from a PTY master whose slave side closed. */
                close_out(x, i);
        }
        maybe_finish(x);
}

static void out_poll_cb(uv_poll_t *h, int status, int events) {
        struct sbx_exec *x = h->data;
        int i = h == &x->out_poll[OUT_STDOUT] ? OUT_STDOUT : OUT_STDERR;
        if (status < 0) {
                close_out(x, i);
                maybe_finish(x);
                return;
        }
        drain(x, i);
}

void sbx_exec_resume_output(struct sbx_exec *x) {
        if (!x || !x->paused || x->finished)
                return;
        x->paused = false;
        set_reading(x, true);
        for (int i = 0; i < 2 && !x->paused; i++)
                if (x->out_open[i])
                        drain(x, i);
}

/* --- stdin --- */

static void in_poll_cb(uv_poll_t *h, int status, int events);

static int flush_stdin(struct sbx_exec *x) {
        while (x->in_len > 0) {
                ssize_t n = write(x->in_fd, x->in_buf, x->in_len);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0 && errno == EAGAIN)
                        break;
                if (n < 0) {
                        close_in(x);
                        return -EPIPE;
                }
                memmove(x->in_buf, x->in_buf + n, x->in_len - (size_t) n);
                x->in_len -= (size_t) n;
        }
        if (x->in_len > 0 && !x->in_polling) {
                uv_poll_start(&x->in_poll, UV_WRITABLE, in_poll_cb);
                x->in_polling = true;
        } else if (x->in_len == 0 && x->in_polling) {
                uv_poll_stop(&x->in_poll);
                x->in_polling = false;
        }
        if (x->in_len == 0 && x->in_close_pending && !x->pty)
                close_in(x);
        return 0;
}

static void in_poll_cb(uv_poll_t *h, int status, int events) {
        struct sbx_exec *x = h->data;
        if (status < 0) {
                close_in(x);
                return;
        }
        flush_stdin(x);
        if (x->in_open && x->in_full && x->in_len < STDIN_HIGH_WATER / 2) {
                x->in_full = false;
                if (x->cb && x->cb->on_stdin_ready)
                        x->cb->on_stdin_ready(x, x->userdata);
        }
}

int sbx_exec_write_stdin(struct sbx_exec *x, const void *data, size_t n) {
        if (!x->in_open || x->in_close_pending)
                return -EPIPE;
        if (n == 0)
                return 0;
        uint8_t *b = realloc(x->in_buf, x->in_len + n);
        if (!b)
                return -ENOMEM;
        memcpy(b + x->in_len, data, n);
        x->in_buf = b;
        x->in_len += n;
        int r = flush_stdin(x);
        if (r < 0)
                return r;
        if (x->in_len >= STDIN_HIGH_WATER) {
                x->in_full = true;
                return 1;
        }
        return 0;
}

int sbx_exec_close_stdin(struct sbx_exec *x) {
        if (!x->in_open)
                return 0;
        if (x->pty) {
                /* A terminal has no separate stdin to close: send EOF (^D). */
                static const char eot = 4;
                return sbx_exec_write_stdin(x, &eot, 1) < 0 ? -EPIPE : 0;
        }
        x->in_close_pending = true;
        return flush_stdin(x);
}

/* --- signals, resize, timeout --- */

int sbx_exec_signal(struct sbx_exec *x, int signo, bool group) {
        if (signo <= 0 || signo >= 65)
                return -EINVAL;
        if (x->exited || !x->sb)
                return -ESRCH;
        return sbx_ctl_send_signal(x->sb, x->id, signo, group);
}

int sbx_exec_resize(struct sbx_exec *x, unsigned cols, unsigned rows) {
        if (!x->pty)
                return -ENOTTY;
        if (x->in_fd < 0)
                return -ESRCH;
        struct winsize ws = {.ws_col = (unsigned short) cols, .ws_row = (unsigned short) rows};
        return ioctl(x->in_fd, TIOCSWINSZ, &ws) < 0 ? -errno : 0;
}

static void timeout_cb(uv_timer_t *t) {
        struct sbx_exec *x = t->data;
        if (x->exited || !x->sb)
                return;
        x->reason = WARREN__V1__EXIT_REASON__EXIT_REASON_TIMEOUT;
        sbx_ctl_send_signal(x->sb, x->id, SIGKILL, true);
}

/* --- messages from init --- */

void sbx_exec_on_spawned(struct sbx *sb, uint64_t id, int pid, int err, int pty_fd) {
        struct sbx_exec *x = find(sb, id);
        if (!x) {
                if (pty_fd >= 0)
                        close(pty_fd);
                return;
        }
        if (err) {
                /* Like a shell: a message on stderr and 127 / 126. */
                char msg[512];
                int n = snprintf(msg, sizeof(msg), "warren: cannot run the command: %s%s\n",
                                 strerror(err),
                                 err == ENOENT ? " (is the program in PATH, and does the "
                                                 "working directory exist?)"
                                               : "");
                if (x->cb && x->cb->on_started)
                        x->cb->on_started(x, 0, x->id_str, x->userdata);
                if (x->cb && x->cb->on_output)
                        x->cb->on_output(x, x->pty ? SBX_STDOUT : SBX_STDERR, msg, (size_t) n,
                                         x->offset, x->userdata);
                x->offset += (uint64_t) n;
                x->status = (err == ENOENT ? 127 : 126) << 8;
                x->exited = true;
                if (pty_fd >= 0)
                        close(pty_fd);
                close_out(x, OUT_STDOUT);
                close_out(x, OUT_STDERR);
                maybe_finish(x);
                return;
        }
        x->spawned = true;
        x->pid = pid;
        if (x->pty) {
                if (pty_fd < 0) {
                        x->status = 126 << 8;
                        x->exited = true;
                        maybe_finish(x);
                        return;
                }
                fcntl(pty_fd, F_SETFL, fcntl(pty_fd, F_GETFL) | O_NONBLOCK);
                x->out_fd[OUT_STDOUT] = pty_fd;
                x->in_fd = fcntl(pty_fd, F_DUPFD_CLOEXEC, 3);
                uv_poll_init(sb->m->loop, &x->out_poll[OUT_STDOUT], pty_fd);
                x->out_poll[OUT_STDOUT].data = x;
                x->out_open[OUT_STDOUT] = true;
                x->handles++;
                if (x->in_fd >= 0) {
                        uv_poll_init(sb->m->loop, &x->in_poll, x->in_fd);
                        x->in_poll.data = x;
                        x->in_open = true;
                        x->handles++;
                        if (x->in_len)
                                flush_stdin(x);
                }
                if (!x->paused)
                        set_reading(x, true);
        }
        if (x->cb && x->cb->on_started)
                x->cb->on_started(x, pid, x->id_str, x->userdata);
}

void sbx_exec_on_exited(struct sbx *sb, uint64_t id, int status) {
        struct sbx_exec *x = find(sb, id);
        if (!x || x->exited)
                return;
        x->exited = true;
        x->status = status;
        for (int i = 0; i < 2; i++)
                if (x->out_open[i] && !x->paused)
                        drain(x, i);
        maybe_finish(x);
}

void sbx_exec_abort_all(struct sbx *sb, int reason) {
        while (sb->execs) {
                struct sbx_exec *x = sb->execs;
                if (!x->exited) {
                        x->exited = true;
                        x->status = SIGKILL;
                        x->reason = reason;
                }
                /* Deliver what is already in the pipes, then end. */
                x->paused = false;
                for (int i = 0; i < 2; i++)
                        if (x->out_open[i])
                                drain(x, i);
                close_out(x, OUT_STDOUT);
                close_out(x, OUT_STDERR);
                finish(x);
        }
}

/* --- start / release --- */

static int set_nonblock(int fd) {
        int fl = fcntl(fd, F_GETFL);
        return fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0 ? -errno : 0;
}

int sbx_exec_start(struct sbx_manager *m, const Warren__V1__ExecStart *start,
                   const struct sbx_exec_callbacks *cb, void *userdata, struct sbx_exec **ret,
                   struct wr_err *e) {
        int r;
        if (!start->sandbox || !*start->sandbox)
                return err_setx(e, -EINVAL, WR_STATUS_INVALID_ARGUMENT, WR_FAULT_CLIENT,
                                "start.sandbox: name the sandbox (id or name)");
        if (start->n_argv == 0 || !start->argv[0][0])
                return err_setx(e, -EINVAL, WR_STATUS_INVALID_ARGUMENT, WR_FAULT_CLIENT,
                                "start.argv: give the command to run (argv[0] non-empty)");
        if (start->timeout_secs < 0 || start->timeout_secs > 1e7)
                return err_setx(e, -EINVAL, WR_STATUS_INVALID_ARGUMENT, WR_FAULT_CLIENT,
                                "start.timeout_secs: %g is out of range (0 = none)",
                                start->timeout_secs);
        if (start->user && *start->user)
                return err_setx(e, -EOPNOTSUPP, WR_STATUS_UNIMPLEMENTED, WR_FAULT_CLIENT,
                                "start.user: running as another user is not implemented yet");
        struct sbx *sb = sbx_find_live(m, start->sandbox);
        if (!sb) {
                struct store_sandbox row = {0};
                r = sbx_lookup(m, start->sandbox, &row, e);
                store_sandbox_clear(&row);
                if (r < 0)
                        return r;
                return err_setx(e, -EBUSY, WR_STATUS_FAILED_PRECONDITION, WR_FAULT_CLIENT,
                                "sandbox %s is not running (create a new one)", start->sandbox);
        }
        if (sb->state != SBX_RUNNING || sb->ctl_fd < 0)
                return err_setx(e, -EBUSY, WR_STATUS_FAILED_PRECONDITION, WR_FAULT_CLIENT,
                                "sandbox %s is terminating", sb->id);

        /* Environment: the sandbox's, then the request's. */
        char **env = sbx_env_dup(sb->env);
        if (!env)
                return err_set(e, -ENOMEM, "exec: out of memory");
        for (size_t i = 0; i < start->n_env; i++) {
                const char *k = start->env[i]->key, *v = start->env[i]->value;
                if (!*k || strchr(k, '=')) {
                        sbx_env_free(env);
                        return err_setx(e, -EINVAL, WR_STATUS_INVALID_ARGUMENT, WR_FAULT_CLIENT,
                                        "start.env: %s is not a valid variable name", k);
                }
                size_t n = strlen(k) + strlen(v) + 2;
                char *kv = malloc(n);
                if (!kv || (snprintf(kv, n, "%s=%s", k, v), sbx_env_set(&env, kv)) < 0) {
                        free(kv);
                        sbx_env_free(env);
                        return err_set(e, -ENOMEM, "exec: out of memory");
                }
                free(kv);
        }
        if (start->pty && !getenv("TERM")) {
                bool has = false;
                for (char **p = env; *p; p++)
                        has |= strncmp(*p, "TERM=", 5) == 0;
                if (!has)
                        sbx_env_set(&env, "TERM=xterm-256color");
        }
        /* Working directory: absolute, or relative to the sandbox's. */
        char cwd[4096];
        const char *wd = start->workdir && *start->workdir ? start->workdir : NULL;
        if (!wd)
                snprintf(cwd, sizeof(cwd), "%s", sb->workdir);
        else if (wd[0] == '/')
                snprintf(cwd, sizeof(cwd), "%s", wd);
        else
                snprintf(cwd, sizeof(cwd), "%s/%s", sb->workdir, wd);

        struct sbx_exec *x = calloc(1, sizeof(*x));
        if (!x) {
                sbx_env_free(env);
                return err_set(e, -ENOMEM, "exec: out of memory");
        }
        x->sb = sb;
        x->cb = cb;
        x->userdata = userdata;
        x->pty = start->pty;
        x->detach = start->detach;
        x->id = ++sb->next_exec_id;
        snprintf(x->id_str, sizeof(x->id_str), "ex-%llu", (unsigned long long) x->id);
        x->out_fd[0] = x->out_fd[1] = x->in_fd = -EBADF;

        int child[3] = {-EBADF, -EBADF, -EBADF};
        if (!x->pty) {
                int p[3][2];
                for (int i = 0; i < 3; i++)
                        if (pipe2(p[i], O_CLOEXEC) < 0) {
                                r = -errno;
                                for (int j = 0; j < i; j++) {
                                        close(p[j][0]);
                                        close(p[j][1]);
                                }
                                free(x);
                                sbx_env_free(env);
                                return err_set(e, r, "exec: pipe");
                        }
                child[0] = p[0][0];
                x->in_fd = p[0][1];
                x->out_fd[OUT_STDOUT] = p[1][0];
                child[1] = p[1][1];
                x->out_fd[OUT_STDERR] = p[2][0];
                child[2] = p[2][1];
                for (int i = 1; i < 3; i++)
                        fcntl(p[i][0], F_SETPIPE_SZ, PIPE_SIZE);
                set_nonblock(x->in_fd);
                set_nonblock(x->out_fd[0]);
                set_nonblock(x->out_fd[1]);
                for (int i = 0; i < 2; i++) {
                        uv_poll_init(m->loop, &x->out_poll[i], x->out_fd[i]);
                        x->out_poll[i].data = x;
                        x->out_open[i] = true;
                        x->handles++;
                }
                uv_poll_init(m->loop, &x->in_poll, x->in_fd);
                x->in_poll.data = x;
                x->in_open = true;
                x->handles++;
        }
        uv_timer_init(m->loop, &x->timer);
        x->timer.data = x;
        x->handles++;

        _cleanup_free_ const char **argv = calloc(start->n_argv + 1, sizeof(char *));
        if (argv)
                for (size_t i = 0; i < start->n_argv; i++)
                        argv[i] = start->argv[i];
        struct rt_spawn_req req = {
                .id = x->id,
                .argv = argv,
                .envp = (const char *const *) env,
                .cwd = cwd,
                .uid = sb->uid,
                .gid = sb->gid,
                .flags = x->pty ? RT_SPAWN_PTY : 0,
                .cols = start->window ? (uint16_t) start->window->cols : 0,
                .rows = start->window ? (uint16_t) start->window->rows : 0,
        };
        r = argv ? sbx_ctl_send_spawn(sb, &req, x->pty ? NULL : child) : -ENOMEM;
        for (int i = 0; i < 3; i++)
                if (child[i] >= 0)
                        close(child[i]);
        sbx_env_free(env);
        /* The session is tracked from here on; even a failed send ends
         * through the normal path. */
        x->next = sb->execs;
        sb->execs = x;
        if (r < 0) {
                x->cb = NULL;
                x->released = true;
                x->exited = true;
                x->status = 126 << 8;
                close_out(x, OUT_STDOUT);
                close_out(x, OUT_STDERR);
                finish(x);
                if (r == -EINVAL || r == -EMSGSIZE)
                        return err_setx(e, r, WR_STATUS_INVALID_ARGUMENT, WR_FAULT_CLIENT,
                                        "start: the command, environment or workdir is too large "
                                        "or malformed");
                return err_set(e, r, "exec: send to warren-init");
        }
        if (!x->pty)
                set_reading(x, true);
        if (start->timeout_secs > 0)
                uv_timer_start(&x->timer, timeout_cb, (uint64_t) (start->timeout_secs * 1000.0), 0);
        *ret = x;
        return 0;
}

void sbx_exec_release(struct sbx_exec *x) {
        if (!x || x->released)
                return;
        x->released = true;
        x->cb = NULL;
        x->userdata = NULL;
        if (!x->finished) {
                if (!x->detach && x->sb && !x->exited)
                        sbx_ctl_send_signal(x->sb, x->id, SIGKILL, true);
                /* Nobody reads any more: discard output so the process never
                 * blocks on a full pipe. */
                sbx_exec_resume_output(x);
                if (x->in_open && !x->pty) {
                        x->in_close_pending = true;
                        close_in(x);
                }
        }
        maybe_free(x);
}
