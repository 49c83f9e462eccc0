/* SPDX-License-Identifier: Apache-2.0 */
/* Starting a warren-signer (spawn.h). */
#include "signer/spawn.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "basic/log.h"

int signer_start(const char *path, const char *key_flag, int key_fd, pid_t *ret_pid, int *ret_sock,
                 struct wr_err *e) {
        int sp[2];
        if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sp) < 0) {
                int r = -errno;
                close(key_fd);
                return err_set(e, r, "socketpair: %s", strerror(-r));
        }
        char keyfd[16], sockfd[16];
        snprintf(keyfd, sizeof(keyfd), "%d", key_fd);
        snprintf(sockfd, sizeof(sockfd), "%d", sp[1]);
        const char *argv[] = {
                path,        key_flag,       keyfd,
                "--sock-fd", sockfd,         "--log-level",
                "info",      "--log-format", log_get_format() == LOG_FORMAT_JSON ? "json" : "text",
                NULL};
        pid_t pid = fork();
        if (pid == 0) {
                sigset_t none;
                sigemptyset(&none);
                sigprocmask(SIG_SETMASK, &none, NULL);
                if (fcntl(key_fd, F_SETFD, 0) < 0 || fcntl(sp[1], F_SETFD, 0) < 0)
                        _exit(127);
                execv(argv[0], (char *const *) argv);
                _exit(127);
        }
        int r = pid < 0 ? -errno : 0;
        close(key_fd);
        close(sp[1]);
        if (r < 0) {
                close(sp[0]);
                return err_set(e, r, "fork: %s", strerror(-r));
        }
        *ret_pid = pid;
        *ret_sock = sp[0];
        return 0;
}
