/* SPDX-License-Identifier: Apache-2.0 */
/* A TCP connection from warrend to a port inside a sandbox (tunnels,
 * sandbox.h: sbx_tcp_connect): the socket is made in the sandbox's network
 * namespace by a short-lived thread that joins it through init's pidfd
 * (rt_net_connect_in: setns affects only the calling thread; the loop
 * thread never leaves the host's namespace), then connects to the
 * sandbox's loopback. Nothing
 * listens on the host for it, and the sandbox needs no network. With
 * --privsep warren-priv makes it (NET_CONNECT) and hands the socket over. */
#include "sandbox/sandbox-internal.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "basic/macro.h"
#include "priv/client.h"
#include "runtime/runtime.h"

int sbx_tcp_connect(struct sbx_manager *m, const char *key, uint16_t port, int *ret_fd,
                    struct wr_err *e) {
        struct sbx *sb;
        int r = sbx_running(m, key, &sb, e);
        if (r < 0)
                return r;
        if (port == 0)
                return err_setx(e, -EINVAL, WR_STATUS_INVALID_ARGUMENT, WR_FAULT_CLIENT,
                                "port: give the TCP port (1-65535) a program in the sandbox "
                                "listens on");
        if (m->priv) {
                /* the sandbox named as warren-priv checks it (manager.c's
                 * sbx_rt_kill does the same) */
                struct priv_target t = {.pid = (int32_t) rt_sandbox_pid(sb->rt),
                                        .cgroup_mode = (uint32_t) m->cgroup_mode};
                snprintf(t.id, sizeof(t.id), "%s", sb->id);
                struct wr_err pe = {0};
                int fd = -EBADF;
                r = t.pid > 0 && rt_sandbox_start_time(sb->rt, &t.start_time) >= 0
                            ? priv_net_connect(m->priv, &t, INADDR_LOOPBACK, port, &fd, &pe)
                            : err_set(&pe, -ESRCH, "its init is gone");
                if (r < 0)
                        return err_setx(e, r, WR_STATUS_UNAVAILABLE, WR_FAULT_SERVICE,
                                        "tunnel to %s port %u: %s", sb->id, (unsigned) port,
                                        pe.msg);
                *ret_fd = fd;
                return 0;
        }
        int fd = -EBADF;
        r = rt_net_connect_in(sb->pidfd, INADDR_LOOPBACK, port, &fd);
        if (r < 0)
                return err_setx(e, r, WR_STATUS_UNAVAILABLE, WR_FAULT_SERVICE,
                                "tunnel to %s port %u: %s", sb->id, (unsigned) port, strerror(-r));
        *ret_fd = fd;
        return 0;
}
