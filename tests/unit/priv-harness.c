/* SPDX-License-Identifier: Apache-2.0 */
/* The warren-priv unit tests' shared harness (priv-harness.h). */
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "priv-harness.h"

void priv_sh(const char *fmt, ...) {
        char cmd[2048];
        va_list ap;
        va_start(ap, fmt);
        int n = vsnprintf(cmd, sizeof(cmd), fmt, ap);
        va_end(ap);
        assert_true(n > 0 && (size_t) n < sizeof(cmd));
        assert_int_equal(system(cmd), 0);
}

void priv_refused(const void *buf, size_t len, size_t n_fds, int code) {
        struct priv_req req;
        struct wr_err e = {0};
        assert_int_equal(priv_req_decode(buf, len, n_fds, &req, &e), code);
        assert_true(e.msg[0] != '\0');
}

void priv_server_dirs(struct priv_server *s, const char *tag) {
        snprintf(s->dir, sizeof(s->dir), "/tmp/%s.XXXXXX", tag);
        assert_non_null(mkdtemp(s->dir));
        snprintf(s->state, sizeof(s->state), "%s/state", s->dir);
        priv_sh("mkdir -p %s", s->state);
}

void priv_server_start(struct priv_server *s, const char *bin, const char *tag, const char *init) {
        priv_server_dirs(s, tag);
        priv_server_exec(s, bin, init);
}

void priv_server_exec(struct priv_server *s, const char *bin, const char *init) {
        int sp[2];
        assert_int_equal(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sp), 0);
        s->pid = fork();
        assert_true(s->pid >= 0);
        if (s->pid == 0) {
                char fd[16];
                snprintf(fd, sizeof(fd), "%d", sp[1]);
                fcntl(sp[1], F_SETFD, 0);
                if (init)
                        execl(bin, bin, "--sock-fd", fd, "--state-dir", s->state, "--init", init,
                              "--log-level", "error", (char *) NULL);
                else
                        execl(bin, bin, "--sock-fd", fd, "--state-dir", s->state, "--log-level",
                              "error", (char *) NULL);
                _exit(127);
        }
        close(sp[1]);
        s->sock = sp[0];
}

void priv_server_stop(struct priv_server *s) {
        close(s->sock);
        int st;
        assert_int_equal(waitpid(s->pid, &st, 0), s->pid);
        assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0); /* EOF: a clean exit */
        priv_sh("rm -rf %s", s->dir);
}

void priv_server_answer(struct priv_server *s, const void *buf, size_t len, const int *fds,
                        size_t n_fds, struct priv_reply *rep, int *rfds, size_t *n_rfds) {
        assert_int_equal(priv_send(s->sock, buf, len, fds, n_fds, 0), 0);
        uint8_t in[PRIV_MSG_MAX + 1];
        int own[PRIV_FDS_MAX];
        size_t n_own = 0;
        int *got = rfds ? rfds : own;
        size_t *n_got = rfds ? n_rfds : &n_own;
        *n_got = 0;
        long n = priv_recv(s->sock, in, sizeof(in), got, n_got, 0);
        assert_true(n > 0);
        struct wr_err e = {0};
        assert_int_equal(priv_reply_decode(in, (size_t) n, *n_got, rep, &e), 0);
        if (!rfds)
                priv_close_fds(own, n_own);
}
