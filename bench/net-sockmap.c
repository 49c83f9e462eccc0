/* SPDX-License-Identifier: Apache-2.0 */
/* bench/net-sockmap.c: the relay experiment behind docs/network.md
 * "Sockmap (measured, not used)". Not part of the build: bench/net-sockmap.py
 * compiles and runs it.
 *
 *   net-sockmap MODE LISTEN_PORT UPSTREAM_PORT [unpriv]
 *
 * Accepts on 127.0.0.1:LISTEN_PORT, dials 127.0.0.1:UPSTREAM_PORT and
 * relays upstream -> client until the upstream closes:
 *   MODE 0: splice(2) through a 1 MiB pipe (what warren-egress does);
 *   MODE 1: an SK_SKB verdict program on a sockmap holding the upstream
 *           socket redirects every skb to the client socket's egress (a
 *           second sockmap); the relay only waits for the upstream's FIN,
 *           then for the kernel to have queued every byte on the client
 *           socket (tcp_info bytes_received vs bytes_acked + SIOCOUTQ),
 *           then shuts it down.
 * "unpriv": after the program and maps exist (as root), drop to nobody:
 * shows that an unprivileged holder of the map fd can add and remove
 * sockets (kernel.unprivileged_bpf_disabled=2 on this 6.18 kernel). */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/bpf.h>
#include <linux/tcp.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

static long bpf(int cmd, union bpf_attr *a) {
        return syscall(SYS_bpf, cmd, a, sizeof(*a));
}

static int sockmap_new(void) {
        union bpf_attr a = {
                .map_type = BPF_MAP_TYPE_SOCKMAP, .key_size = 4, .value_size = 4, .max_entries = 1};
        int fd = (int) bpf(BPF_MAP_CREATE, &a);
        if (fd < 0)
                perror("BPF_MAP_CREATE");
        return fd;
}

static int map_set(int map, int key, int sock, int del) {
        union bpf_attr a = {.map_fd = (unsigned) map,
                            .key = (unsigned long) &key,
                            .value = (unsigned long) &sock,
                            .flags = BPF_ANY};
        return (int) bpf(del ? BPF_MAP_DELETE_ELEM : BPF_MAP_UPDATE_ELEM, &a);
}

/* return bpf_sk_redirect_map(skb, target, 0, 0) */
static int verdict_load(int target) {
        struct bpf_insn prog[] = {
                {.code = BPF_LD | BPF_DW | BPF_IMM,
                 .dst_reg = 2,
                 .src_reg = BPF_PSEUDO_MAP_FD,
                 .imm = target},
                {0},
                {.code = BPF_ALU64 | BPF_MOV | BPF_K, .dst_reg = 3, .imm = 0},
                {.code = BPF_ALU64 | BPF_MOV | BPF_K, .dst_reg = 4, .imm = 0},
                {.code = BPF_JMP | BPF_CALL, .imm = BPF_FUNC_sk_redirect_map},
                {.code = BPF_JMP | BPF_EXIT},
        };
        static char log[4096];
        union bpf_attr a = {.prog_type = BPF_PROG_TYPE_SK_SKB,
                            .insns = (unsigned long) prog,
                            .insn_cnt = sizeof(prog) / sizeof(prog[0]),
                            .license = (unsigned long) "GPL",
                            .log_buf = (unsigned long) log,
                            .log_size = sizeof(log),
                            .log_level = 1};
        int fd = (int) bpf(BPF_PROG_LOAD, &a);
        if (fd < 0)
                fprintf(stderr, "BPF_PROG_LOAD: %s\n%s\n", strerror(errno), log);
        return fd;
}

static long relay_splice(int ufd, int cfd) {
        int p[2];
        long total = 0;
        if (pipe2(p, O_CLOEXEC) < 0)
                return -1;
        (void) fcntl(p[1], F_SETPIPE_SZ, 1 << 20);
        for (;;) {
                ssize_t n = splice(ufd, NULL, p[1], NULL, 1 << 20, SPLICE_F_MOVE);
                if (n <= 0)
                        break;
                while (n > 0) {
                        ssize_t m = splice(p[0], NULL, cfd, NULL, (size_t) n, SPLICE_F_MOVE);
                        if (m <= 0)
                                return -1;
                        n -= m;
                        total += m;
                }
        }
        close(p[0]);
        close(p[1]);
        return total;
}

static long relay_sockmap(int vmap, int tmap, int ufd, int cfd) {
        if (map_set(tmap, 0, cfd, 0) < 0 || map_set(vmap, 0, ufd, 0) < 0) {
                perror("BPF_MAP_UPDATE_ELEM");
                return -1;
        }
        /* data that arrived before the insertion waits in the receive
         * queue; a low-water mark change runs sk_data_ready, i.e. the
         * verdict over it */
        int one = 1;
        (void) setsockopt(ufd, SOL_SOCKET, SO_RCVLOWAT, &one, sizeof(one));
        struct pollfd pf = {.fd = ufd, .events = POLLRDHUP};
        (void) poll(&pf, 1, -1);
        struct tcp_info ti;
        socklen_t l = sizeof(ti);
        getsockopt(ufd, IPPROTO_TCP, TCP_INFO, &ti, &l);
        /* bytes_received counts the FIN */
        long want = (long) ti.tcpi_bytes_received - (ti.tcpi_state == 8 /* CLOSE_WAIT */);
        for (;;) {
                int outq = 0;
                l = sizeof(ti);
                getsockopt(cfd, IPPROTO_TCP, TCP_INFO, &ti, &l);
                ioctl(cfd, TIOCOUTQ, &outq);
                if ((long) ti.tcpi_bytes_acked + outq >= want)
                        break;
                usleep(200);
        }
        map_set(vmap, 0, -1, 1);
        map_set(tmap, 0, -1, 1);
        return want;
}

int main(int argc, char **argv) {
        if (argc < 4)
                return 2;
        int mode = atoi(argv[1]), vmap = -1, tmap = -1;
        if (mode == 1) {
                vmap = sockmap_new();
                tmap = sockmap_new();
                int prog = verdict_load(tmap);
                union bpf_attr a = {.target_fd = (unsigned) vmap,
                                    .attach_bpf_fd = (unsigned) prog,
                                    .attach_type = BPF_SK_SKB_VERDICT};
                if (vmap < 0 || tmap < 0 || prog < 0 || bpf(BPF_PROG_ATTACH, &a) < 0) {
                        perror("BPF_PROG_ATTACH");
                        return 1;
                }
                if (argc > 4 && (setgid(65534) < 0 || setuid(65534) < 0))
                        return 1;
        }
        int ls = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), one = 1;
        setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
        struct sockaddr_in sa = {.sin_family = AF_INET,
                                 .sin_port = htons((uint16_t) atoi(argv[2])),
                                 .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
        if (bind(ls, (struct sockaddr *) &sa, sizeof(sa)) < 0 || listen(ls, 8) < 0) {
                perror("listen");
                return 1;
        }
        printf("ready\n");
        fflush(stdout);
        for (;;) {
                int cfd = accept4(ls, NULL, NULL, SOCK_CLOEXEC),
                    ufd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
                sa.sin_port = htons((uint16_t) atoi(argv[3]));
                if (cfd < 0 || connect(ufd, (struct sockaddr *) &sa, sizeof(sa)) < 0) {
                        perror("connect");
                        return 1;
                }
                long n = mode ? relay_sockmap(vmap, tmap, ufd, cfd) : relay_splice(ufd, cfd);
                shutdown(cfd, SHUT_WR);
                fprintf(stderr, "relayed %ld\n", n);
                close(ufd);
                close(cfd);
        }
}
