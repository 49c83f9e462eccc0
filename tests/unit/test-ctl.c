/* SPDX-License-Identifier: Apache-2.0 */
/* The warren-init control protocol: encode (daemon side) / decode (init
 * side) round trips, strict rejection of malformed and oversized messages
 * on both sides, fd passing over a real socketpair, and rt_ctl_run against
 * a real warren-init (started here as a subreaper, not PID 1). */

#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "init/ctl-proto.h"
#include "init/init-proto.h"
#include "runtime/ctl.h"

static unsigned char buf[CTL_MSG_MAX + 64];

static void test_spawn_round_trip(void **state) {
        const char *argv[] = {"sh", "-c", "echo \"$X\"", "", NULL};
        const char *envp[] = {"X=1", "EMPTY=", "PATH=/bin", NULL};
        struct rt_spawn_req req = {.id = 0x1122334455667788ull,
                                   .argv = argv,
                                   .envp = envp,
                                   .cwd = "/work dir",
                                   .uid = 1000,
                                   .gid = 100,
                                   .flags = RT_SPAWN_PTY,
                                   .cols = 132,
                                   .rows = 43};
        struct init_req d;

        int n = rt_ctl_spawn_encode(&req, buf, sizeof(buf));
        assert_true(n > (int) sizeof(struct ctl_hdr));
        assert_int_equal(init_req_decode(buf, (size_t) n, &d), 0);
        assert_int_equal(d.hdr.type, CTL_SPAWN);
        assert_true(d.hdr.id == req.id);
        assert_int_equal(d.spawn.flags, CTL_SPAWN_PTY);
        assert_int_equal(d.spawn.uid, 1000);
        assert_int_equal(d.spawn.gid, 100);
        assert_int_equal(d.spawn.cols, 132);
        assert_int_equal(d.spawn.rows, 43);
        assert_string_equal(d.spawn.cwd, "/work dir");
        assert_int_equal(d.spawn.argc, 4);
        assert_int_equal(d.spawn.envc, 3);
        for (int i = 0; i < 4; i++)
                assert_string_equal(d.spawn.argv[i], argv[i]);
        assert_null(d.spawn.argv[4]);
        for (int i = 0; i < 3; i++)
                assert_string_equal(d.spawn.envp[i], envp[i]);
        assert_null(d.spawn.envp[3]);
        init_req_done(&d);

        /* No cwd and no env: "/" and an empty environment. */
        req = (struct rt_spawn_req){.id = 1, .argv = argv};
        n = rt_ctl_spawn_encode(&req, buf, sizeof(buf));
        assert_int_equal(init_req_decode(buf, (size_t) n, &d), 0);
        assert_string_equal(d.spawn.cwd, "/");
        assert_int_equal(d.spawn.envc, 0);
        assert_null(d.spawn.envp[0]);
        init_req_done(&d);

        /* Every proper prefix is refused. */
        n = rt_ctl_spawn_encode(&req, buf, sizeof(buf));
        for (int k = 0; k < n; k++) {
                assert_int_not_equal(init_req_decode(buf, (size_t) k, &d), 0);
                init_req_done(&d);
        }
}

static void test_spawn_encode_rejects(void **state) {
        const char *ok[] = {"true", NULL};
        const char *empty0[] = {"", NULL};
        const char *badenv[] = {"NOEQ", NULL};
        const char *badenv2[] = {"=v", NULL};
        struct rt_spawn_req req = {.argv = ok};

        req.argv = NULL;
        assert_int_equal(rt_ctl_spawn_encode(&req, buf, sizeof(buf)), -EINVAL);
        req.argv = empty0;
        assert_int_equal(rt_ctl_spawn_encode(&req, buf, sizeof(buf)), -EINVAL);
        req.argv = ok;
        req.envp = badenv;
        assert_int_equal(rt_ctl_spawn_encode(&req, buf, sizeof(buf)), -EINVAL);
        req.envp = badenv2;
        assert_int_equal(rt_ctl_spawn_encode(&req, buf, sizeof(buf)), -EINVAL);
        req.envp = NULL;
        req.flags = 0x100;
        assert_int_equal(rt_ctl_spawn_encode(&req, buf, sizeof(buf)), -EINVAL);
        req.flags = 0;
        req.uid = UINT32_MAX;
        assert_int_equal(rt_ctl_spawn_encode(&req, buf, sizeof(buf)), -EINVAL);
        req.uid = 0;

        /* Oversized: one 70,000-byte argument. */
        size_t bign = CTL_MSG_MAX + 10;
        char *big = malloc(bign);
        assert_non_null(big);
        memset(big, 'x', bign - 1);
        big[bign - 1] = '\0';
        const char *bigv[] = {"echo", big, NULL};
        req.argv = bigv;
        assert_int_equal(rt_ctl_spawn_encode(&req, buf, sizeof(buf)), -EMSGSIZE);
        free(big);

        /* Too many arguments. */
        const char **many = calloc(CTL_ARGS_MAX + 2, sizeof(char *));
        assert_non_null(many);
        for (unsigned i = 0; i <= CTL_ARGS_MAX; i++)
                many[i] = "a";
        req.argv = many;
        assert_int_equal(rt_ctl_spawn_encode(&req, buf, sizeof(buf)), -EMSGSIZE);
        free(many);

        /* A small buffer is not overrun. */
        req.argv = ok;
        assert_int_equal(rt_ctl_spawn_encode(&req, buf, sizeof(struct ctl_hdr) + 10), -EMSGSIZE);
}

/* Build a request by hand. */
static size_t mk(uint32_t type, uint64_t id, const void *payload, uint32_t plen) {
        struct ctl_hdr h = {.magic = CTL_MAGIC, .type = type, .len = plen, .id = id};
        memcpy(buf, &h, sizeof(h));
        if (plen)
                memcpy(buf + sizeof(h), payload, plen);
        return sizeof(h) + plen;
}

static void test_init_decode_rejects(void **state) {
        struct init_req d;
        size_t n;

        n = mk(CTL_PING, 5, NULL, 0);
        assert_int_equal(init_req_decode(buf, n, &d), 0);
        assert_int_equal(init_req_decode(buf, n - 1, &d), -EBADMSG);
        assert_int_equal(init_req_decode(buf, n + 1, &d), -EBADMSG); /* len mismatch */
        ((struct ctl_hdr *) buf)->magic ^= 1;
        assert_int_equal(init_req_decode(buf, n, &d), -EBADMSG);
        n = mk(CTL_PING, 5, NULL, 0);
        ((struct ctl_hdr *) buf)->reserved = 1;
        assert_int_equal(init_req_decode(buf, n, &d), -EBADMSG);
        n = mk(0x42, 7, NULL, 0);
        assert_int_equal(init_req_decode(buf, n, &d), -EOPNOTSUPP);
        assert_int_equal(d.hdr.id, 7); /* id still available for the error reply */
        n = mk(CTL_EXITED, 7, "\0\0\0\0\0\0\0\0", 8);
        assert_int_equal(init_req_decode(buf, n, &d), -EOPNOTSUPP);
        n = mk(CTL_PING, 1, "x", 1);
        assert_int_equal(init_req_decode(buf, n, &d), -EINVAL);
        assert_int_equal(init_req_decode(buf, CTL_MSG_MAX + 1, &d), -EMSGSIZE);

        /* SIGNAL */
        struct ctl_signal s = {.target_id = 3, .signo = SIGTERM};
        n = mk(CTL_SIGNAL, 1, &s, sizeof(s));
        assert_int_equal(init_req_decode(buf, n, &d), 0);
        assert_int_equal(d.signal.signo, SIGTERM);
        assert_int_equal(init_req_decode(buf, n - 1, &d), -EBADMSG);
        s.signo = 0;
        n = mk(CTL_SIGNAL, 1, &s, sizeof(s));
        assert_int_equal(init_req_decode(buf, n, &d), -EINVAL);
        s.signo = 65;
        n = mk(CTL_SIGNAL, 1, &s, sizeof(s));
        assert_int_equal(init_req_decode(buf, n, &d), -EINVAL);
        s.signo = SIGKILL;
        s.pid = 1; /* never init itself */
        n = mk(CTL_SIGNAL, 1, &s, sizeof(s));
        assert_int_equal(init_req_decode(buf, n, &d), -EINVAL);
        s.pid = -5;
        n = mk(CTL_SIGNAL, 1, &s, sizeof(s));
        assert_int_equal(init_req_decode(buf, n, &d), -EINVAL);
        s.pid = 0;
        s.flags = 2;
        n = mk(CTL_SIGNAL, 1, &s, sizeof(s));
        assert_int_equal(init_req_decode(buf, n, &d), -EINVAL);

        /* RESIZE, KILL_ALL */
        struct ctl_resize rz = {.cols = 0, .rows = 10};
        n = mk(CTL_RESIZE, 1, &rz, sizeof(rz));
        assert_int_equal(init_req_decode(buf, n, &d), -EINVAL);
        rz.cols = 80;
        n = mk(CTL_RESIZE, 1, &rz, sizeof(rz));
        assert_int_equal(init_req_decode(buf, n, &d), 0);
        struct ctl_kill_all ka = {.signo = SIGKILL, .reserved = 1};
        n = mk(CTL_KILL_ALL, 1, &ka, sizeof(ka));
        assert_int_equal(init_req_decode(buf, n, &d), -EINVAL);
        ka.reserved = 0;
        n = mk(CTL_KILL_ALL, 1, &ka, sizeof(ka));
        assert_int_equal(init_req_decode(buf, n, &d), 0);
}

/* A SPAWN whose strings region is given raw. */
static size_t mk_spawn(uint32_t argc, uint32_t envc, const char *strings, uint32_t slen) {
        unsigned char p[512];
        struct ctl_spawn s = {.argc = argc, .envc = envc, .strings_len = slen};
        memcpy(p, &s, sizeof(s));
        memcpy(p + sizeof(s), strings, slen);
        return mk(CTL_SPAWN, 9, p, (uint32_t) (sizeof(s) + slen));
}

static void test_init_decode_spawn_strings(void **state) {
        struct init_req d;
        size_t n;

        n = mk_spawn(1, 1, "/\0ls\0A=b\0", 9);
        assert_int_equal(init_req_decode(buf, n, &d), 0);
        init_req_done(&d);
        n = mk_spawn(1, 1, "/\0ls\0A=b", 8); /* missing final NUL */
        assert_int_equal(init_req_decode(buf, n, &d), -EINVAL);
        n = mk_spawn(1, 0, "/\0ls\0A=b\0", 9); /* trailing string not counted */
        assert_int_equal(init_req_decode(buf, n, &d), -EINVAL);
        n = mk_spawn(2, 1, "/\0ls\0A=b\0", 9); /* counts exceed strings */
        assert_int_equal(init_req_decode(buf, n, &d), -EINVAL);
        n = mk_spawn(0, 0, "/\0", 2);
        assert_int_equal(init_req_decode(buf, n, &d), -EINVAL);
        n = mk_spawn(1, 0, "/\0\0", 3); /* empty argv[0] */
        assert_int_equal(init_req_decode(buf, n, &d), -EINVAL);
        n = mk_spawn(1, 1, "/\0ls\0noeq\0", 10);
        assert_int_equal(init_req_decode(buf, n, &d), -EINVAL);
        n = mk_spawn(CTL_ARGS_MAX + 1, 0, "/\0ls\0", 5);
        assert_int_equal(init_req_decode(buf, n, &d), -EMSGSIZE);
        n = mk_spawn(0xffffffffu, 2, "/\0ls\0", 5); /* argc + envc overflow */
        assert_int_not_equal(init_req_decode(buf, n, &d), 0);
        /* strings_len lies */
        n = mk_spawn(1, 0, "/\0ls\0", 5);
        ((struct ctl_spawn *) (buf + sizeof(struct ctl_hdr)))->strings_len = 4;
        assert_int_equal(init_req_decode(buf, n, &d), -EINVAL);
        /* uid -1 and reserved field */
        n = mk_spawn(1, 0, "/\0ls\0", 5);
        ((struct ctl_spawn *) (buf + sizeof(struct ctl_hdr)))->uid = UINT32_MAX;
        assert_int_equal(init_req_decode(buf, n, &d), -EINVAL);
        n = mk_spawn(1, 0, "/\0ls\0", 5);
        ((struct ctl_spawn *) (buf + sizeof(struct ctl_hdr)))->reserved = 1;
        assert_int_equal(init_req_decode(buf, n, &d), -EINVAL);
}

static size_t mk_reply(uint32_t type, uint64_t id, int32_t a, int32_t b) {
        int32_t p[2] = {a, b};
        return mk(type, id, p, sizeof(p));
}

static void test_daemon_decode(void **state) {
        struct rt_ctl_msg m;
        size_t n;

        n = mk_reply(CTL_SPAWNED, 4, 42, 0);
        assert_int_equal(rt_ctl_msg_decode(buf, n, 0, &m), 0);
        assert_int_equal(m.type, CTL_SPAWNED);
        assert_int_equal(m.id, 4);
        assert_int_equal(m.pid, 42);
        assert_int_equal(m.err, 0);
        assert_int_equal(rt_ctl_msg_decode(buf, n, 1, &m), 0); /* pty master */
        assert_int_equal(rt_ctl_msg_decode(buf, n, 2, &m), -EBADMSG);
        n = mk_reply(CTL_SPAWNED, 4, 0, ENOENT);
        assert_int_equal(rt_ctl_msg_decode(buf, n, 0, &m), 0);
        assert_int_equal(m.err, -ENOENT);
        assert_int_equal(rt_ctl_msg_decode(buf, n, 1, &m), -EBADMSG); /* fd with failure */
        n = mk_reply(CTL_SPAWNED, 4, 7, ENOENT);                      /* pid with failure */
        assert_int_equal(rt_ctl_msg_decode(buf, n, 0, &m), -EBADMSG);
        n = mk_reply(CTL_SPAWNED, 4, 0, 0); /* no pid, no error */
        assert_int_equal(rt_ctl_msg_decode(buf, n, 0, &m), -EBADMSG);
        n = mk_reply(CTL_SPAWNED, 4, 0, 100000);
        assert_int_equal(rt_ctl_msg_decode(buf, n, 0, &m), -EBADMSG);
        n = mk_reply(CTL_SPAWNED, 4, 0, -1);
        assert_int_equal(rt_ctl_msg_decode(buf, n, 0, &m), -EBADMSG);

        n = mk_reply(CTL_EXITED, 4, 42, 3 << 8);
        assert_int_equal(rt_ctl_msg_decode(buf, n, 0, &m), 0);
        assert_true(WIFEXITED(m.status) && WEXITSTATUS(m.status) == 3);
        assert_int_equal(rt_ctl_msg_decode(buf, n, 1, &m), -EBADMSG); /* fds only with SPAWNED */
        n = mk_reply(CTL_EXITED, 4, 42, 0x137f);                      /* stopped, not an exit */
        assert_int_equal(rt_ctl_msg_decode(buf, n, 0, &m), -EBADMSG);
        n = mk_reply(CTL_EXITED, 4, 0, 0);
        assert_int_equal(rt_ctl_msg_decode(buf, n, 0, &m), -EBADMSG);
        n = mk_reply(CTL_EXITED, 4, 42, SIGKILL);
        assert_int_equal(rt_ctl_msg_decode(buf, n, 0, &m), 0);
        assert_true(WIFSIGNALED(m.status));

        n = mk_reply(CTL_RESULT, 9, ESRCH, 0);
        assert_int_equal(rt_ctl_msg_decode(buf, n, 0, &m), 0);
        assert_int_equal(m.err, -ESRCH);
        n = mk_reply(CTL_RESULT, 9, ESRCH, 1);
        assert_int_equal(rt_ctl_msg_decode(buf, n, 0, &m), -EBADMSG);

        struct ctl_pong pong = {.init_pid = 1, .nprocs = 3, .nconns = 1};
        n = mk(CTL_PONG, 2, &pong, sizeof(pong));
        assert_int_equal(rt_ctl_msg_decode(buf, n, 0, &m), 0);
        assert_int_equal(m.pong.nprocs, 3);
        assert_int_equal(rt_ctl_msg_decode(buf, n - 1, 0, &m), -EBADMSG);

        struct ctl_list_entry l[2] = {{.id = 1, .pid = 10},
                                      {.id = 2, .pid = 11, .flags = CTL_SPAWN_PTY}};
        n = mk(CTL_LIST_REPLY, 3, l, sizeof(l));
        assert_int_equal(rt_ctl_msg_decode(buf, n, 0, &m), 0);
        assert_int_equal(m.n_list, 2);
        assert_int_equal(m.list[1].pid, 11);
        rt_ctl_msg_done(&m);
        assert_null(m.list);
        n = mk(CTL_LIST_REPLY, 3, l, sizeof(l) - 1);
        assert_int_equal(rt_ctl_msg_decode(buf, n, 0, &m), -EBADMSG);
        l[0].pid = 0;
        n = mk(CTL_LIST_REPLY, 3, l, sizeof(l));
        assert_int_equal(rt_ctl_msg_decode(buf, n, 0, &m), -EBADMSG);
        n = mk(CTL_LIST_REPLY, 3, NULL, 0);
        assert_int_equal(rt_ctl_msg_decode(buf, n, 0, &m), 0);
        assert_int_equal(m.n_list, 0);

        /* Requests are not replies; garbage is garbage. */
        n = mk(CTL_PING, 3, NULL, 0);
        assert_int_equal(rt_ctl_msg_decode(buf, n, 0, &m), -EBADMSG);
        n = mk_reply(CTL_SPAWNED, 4, 42, 0);
        ((struct ctl_hdr *) buf)->magic = 0;
        assert_int_equal(rt_ctl_msg_decode(buf, n, 0, &m), -EBADMSG);
        assert_int_equal(rt_ctl_msg_decode(buf, 3, 0, &m), -EBADMSG);
        assert_int_equal(rt_ctl_msg_decode(buf, CTL_REPLY_MAX + 1, 0, &m), -EMSGSIZE);
}

/* HOLDS_REPLY, TAKEN, and the requests HOLDS/TAKE/RELEASE (exec holds). */
static void test_holds_decode(void **state) {
        struct rt_ctl_msg m;
        struct init_req r;
        size_t n;

        struct ctl_hold h[2] = {
                {.id = 1, .pid = 7, .flags = CTL_SPAWN_HOLD, .state = CTL_HOLD_STDIN},
                {.id = 2,
                 .pid = 8,
                 .status = 3 << 8,
                 .flags = CTL_SPAWN_HOLD | CTL_SPAWN_PTY,
                 .state = CTL_HOLD_EXITED},
        };
        n = mk(CTL_HOLDS_REPLY, 9, h, sizeof(h));
        assert_int_equal(rt_ctl_msg_decode(buf, n, 0, &m), 0);
        assert_int_equal(m.n_holds, 2);
        assert_int_equal(m.holds[1].status, 3 << 8);
        rt_ctl_msg_done(&m);
        assert_int_equal(rt_ctl_msg_decode(buf, n, 1, &m), -EBADMSG); /* no fds with it */
        assert_int_equal(rt_ctl_msg_decode(buf, n - 1, 0, &m), -EBADMSG);
        struct ctl_hold bad[] = {
                {.id = 1, .pid = 0, .flags = CTL_SPAWN_HOLD},              /* pid */
                {.id = 1, .pid = 7, .flags = 0},                           /* not held */
                {.id = 1, .pid = 7, .flags = CTL_SPAWN_HOLD | 8},          /* flags */
                {.id = 1, .pid = 7, .flags = CTL_SPAWN_HOLD, .state = 4},  /* state */
                {.id = 1, .pid = 7, .flags = CTL_SPAWN_HOLD, .status = 5}, /* running */
                {.id = 1,
                 .pid = 7,
                 .flags = CTL_SPAWN_HOLD,
                 .state = CTL_HOLD_EXITED,
                 .status = 0x137f}, /* stopped */
        };
        for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
                n = mk(CTL_HOLDS_REPLY, 9, &bad[i], sizeof(bad[i]));
                assert_int_equal(rt_ctl_msg_decode(buf, n, 0, &m), -EBADMSG);
        }

        struct ctl_taken t = {.fdmask =
                                      CTL_HOLD_FD_STDIN | CTL_HOLD_FD_STDOUT | CTL_HOLD_FD_STDERR};
        n = mk(CTL_TAKEN, 5, &t, sizeof(t));
        assert_int_equal(rt_ctl_msg_decode(buf, n, 3, &m), 0);
        assert_int_equal(m.fdmask, t.fdmask);
        assert_int_equal(rt_ctl_msg_decode(buf, n, 2, &m), -EBADMSG); /* one fd per bit */
        assert_int_equal(rt_ctl_msg_decode(buf, n, 4, &m), -EBADMSG);
        t = (struct ctl_taken){.fdmask = CTL_HOLD_FD_PTY | CTL_HOLD_FD_STDOUT};
        n = mk(CTL_TAKEN, 5, &t, sizeof(t));
        assert_int_equal(rt_ctl_msg_decode(buf, n, 2, &m), -EBADMSG); /* a PTY alone */
        t = (struct ctl_taken){.err = ESRCH};
        n = mk(CTL_TAKEN, 5, &t, sizeof(t));
        assert_int_equal(rt_ctl_msg_decode(buf, n, 0, &m), 0);
        assert_int_equal(m.err, -ESRCH);
        assert_int_equal(rt_ctl_msg_decode(buf, n, 1, &m), -EBADMSG); /* no fds on error */
        t = (struct ctl_taken){.fdmask = 0x10};
        n = mk(CTL_TAKEN, 5, &t, sizeof(t));
        assert_int_equal(rt_ctl_msg_decode(buf, n, 0, &m), -EBADMSG);

        /* init side */
        n = mk(CTL_HOLDS, 3, NULL, 0);
        assert_int_equal(init_req_decode(buf, n, &r), 0);
        n = mk(CTL_TAKE, 3, "x", 1);
        assert_int_equal(init_req_decode(buf, n, &r), -EINVAL);
        struct ctl_release rl = {.what = CTL_RELEASE_STDIN | CTL_RELEASE_ALL};
        n = mk(CTL_RELEASE, 3, &rl, sizeof(rl));
        assert_int_equal(init_req_decode(buf, n, &r), 0);
        assert_int_equal(r.release.what, rl.what);
        rl.what = 0;
        n = mk(CTL_RELEASE, 3, &rl, sizeof(rl));
        assert_int_equal(init_req_decode(buf, n, &r), -EINVAL);
        rl = (struct ctl_release){.what = CTL_RELEASE_ALL, .reserved = 1};
        n = mk(CTL_RELEASE, 3, &rl, sizeof(rl));
        assert_int_equal(init_req_decode(buf, n, &r), -EINVAL);

        /* the encoder: HOLD needs the daemon's ends without a PTY, none with */
        const char *argv[] = {"true", NULL};
        int fds[3] = {0, 1, 2};
        struct rt_spawn_req q = {.id = 1, .argv = argv, .flags = RT_SPAWN_HOLD};
        assert_int_equal(rt_ctl_send_spawn(-1, &q, fds), -EINVAL);
        q.flags = RT_SPAWN_PTY | RT_SPAWN_HOLD;
        q.held = fds;
        assert_int_equal(rt_ctl_send_spawn(-1, &q, NULL), -EINVAL);
        q.flags = 0;
        assert_int_equal(rt_ctl_send_spawn(-1, &q, fds), -EINVAL);
}

static int count_rights(struct msghdr *mh, int *fds, int max) {
        int n = 0;
        for (struct cmsghdr *cm = CMSG_FIRSTHDR(mh); cm; cm = CMSG_NXTHDR(mh, cm))
                if (cm->cmsg_level == SOL_SOCKET && cm->cmsg_type == SCM_RIGHTS) {
                        int k = (int) ((cm->cmsg_len - CMSG_LEN(0)) / sizeof(int));
                        for (int i = 0; i < k && n < max; i++)
                                memcpy(&fds[n++], CMSG_DATA(cm) + i * sizeof(int), sizeof(int));
                }
        return n;
}

static void test_socketpair_fd_passing(void **state) {
        int sv[2];
        const char *argv[] = {"cat", NULL};
        struct rt_spawn_req req = {.id = 77, .argv = argv};
        int p[2];

        assert_int_equal(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0, sv),
                         0);
        assert_int_equal(pipe2(p, O_CLOEXEC), 0);
        int stdio[3] = {p[0], p[1], p[1]};

        /* A PTY spawn carries no fds, a pipe spawn exactly three. */
        assert_int_equal(rt_ctl_send_spawn(sv[0], &req, NULL), -EINVAL);
        req.flags = RT_SPAWN_PTY;
        assert_int_equal(rt_ctl_send_spawn(sv[0], &req, stdio), -EINVAL);
        req.flags = 0;
        assert_int_equal(rt_ctl_send_spawn(sv[0], &req, stdio), 0);

        union {
                struct cmsghdr h;
                char b[CMSG_SPACE(sizeof(int) * 8)];
        } c;
        struct iovec iov = {.iov_base = buf, .iov_len = sizeof(buf)};
        struct msghdr mh = {.msg_iov = &iov,
                            .msg_iovlen = 1,
                            .msg_control = c.b,
                            .msg_controllen = sizeof(c.b)};
        ssize_t n = recvmsg(sv[1], &mh, MSG_CMSG_CLOEXEC);
        assert_true(n > 0);
        int fds[8];
        assert_int_equal(count_rights(&mh, fds, 8), 3);
        for (int i = 0; i < 3; i++)
                close(fds[i]);
        struct init_req d;
        assert_int_equal(init_req_decode(buf, (size_t) n, &d), 0);
        assert_string_equal(d.spawn.argv[0], "cat");
        init_req_done(&d);

        /* Daemon side receive: nothing queued, then a SPAWNED with a pty
         * master is accepted; a pipe or another char device is refused. */
        struct rt_ctl_msg m;
        int passed;
        assert_int_equal(rt_ctl_recv(sv[0], &m, &passed), -EAGAIN);
        assert_int_equal(passed, -EBADF);

        int devnull = open("/dev/ptmx", O_RDWR | O_NOCTTY | O_CLOEXEC);
        assert_true(devnull >= 0);
        size_t len = mk_reply(CTL_SPAWNED, 77, 1234, 0);
        iov.iov_len = len;
        mh = (struct msghdr){.msg_iov = &iov,
                             .msg_iovlen = 1,
                             .msg_control = c.b,
                             .msg_controllen = CMSG_SPACE(sizeof(int))};
        struct cmsghdr *cm = CMSG_FIRSTHDR(&mh);
        cm->cmsg_level = SOL_SOCKET;
        cm->cmsg_type = SCM_RIGHTS;
        cm->cmsg_len = CMSG_LEN(sizeof(int));
        memcpy(CMSG_DATA(cm), &devnull, sizeof(int));
        assert_true(sendmsg(sv[1], &mh, 0) == (ssize_t) len);
        assert_int_equal(rt_ctl_recv(sv[0], &m, &passed), 0);
        assert_int_equal(m.pid, 1234);
        assert_true(passed >= 0);
        assert_int_equal(fcntl(passed, F_GETFD) & FD_CLOEXEC, FD_CLOEXEC);
        close(passed);

        memcpy(CMSG_DATA(cm), &p[0], sizeof(int));
        assert_true(sendmsg(sv[1], &mh, 0) == (ssize_t) len);
        assert_int_equal(rt_ctl_recv(sv[0], &m, &passed), -EBADMSG);
        assert_int_equal(passed, -EBADF);
        close(devnull);
        devnull = open("/dev/null", O_RDWR | O_CLOEXEC);
        memcpy(CMSG_DATA(cm), &devnull, sizeof(int));
        assert_true(sendmsg(sv[1], &mh, 0) == (ssize_t) len);
        assert_int_equal(rt_ctl_recv(sv[0], &m, &passed), -EBADMSG);
        close(devnull);

        /* Peer gone. */
        close(sv[1]);
        assert_int_equal(rt_ctl_recv(sv[0], &m, &passed), -ECONNRESET);
        close(sv[0]);
        close(p[0]);
        close(p[1]);
}

/* ---- against a real warren-init ---- */

struct init_proc {
        pid_t pid;
        char dir[64];
        char path[128];
};

static int start_init(void **state) {
        static struct init_proc ip;
        struct sockaddr_un sa = {.sun_family = AF_UNIX};

        strcpy(ip.dir, "/tmp/test-ctl-XXXXXX");
        assert_non_null(mkdtemp(ip.dir));
        snprintf(ip.path, sizeof(ip.path), "%s/ctl.sock", ip.dir);
        strcpy(sa.sun_path, ip.path);
        int l = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
        assert_true(l >= 0);
        assert_int_equal(bind(l, (struct sockaddr *) &sa, sizeof(sa)), 0);
        assert_int_equal(listen(l, 16), 0);
        ip.pid = fork();
        assert_true(ip.pid >= 0);
        if (ip.pid == 0) {
                if (l == 3)
                        fcntl(3, F_SETFD, 0); /* dup2(3, 3) would keep CLOEXEC */
                else
                        dup2(l, 3);
                char *env[] = {"WARREN_SANDBOX_ID=test-ctl", NULL};
                char *argv[] = {"warren-init", NULL};
                execve(WARREN_INIT_PATH, argv, env);
                _exit(127);
        }
        close(l);
        *state = &ip;
        return 0;
}

static int stop_init(void **state) {
        struct init_proc *ip = *state;
        kill(ip->pid, SIGTERM); /* forwards, then exits once its children are gone */
        int st = 0;
        waitpid(ip->pid, &st, 0);
        unlink(ip->path);
        rmdir(ip->dir);
        return WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : -1;
}

static void test_run_real_init(void **state) {
        struct init_proc *ip = *state;
        struct rt_ctl_run_result r;
        struct wr_err e = {0};

        const char *a1[] = {"sh", "-c", "echo out; echo err >&2; exit 7", NULL};
        assert_int_equal(rt_ctl_run(ip->path, a1, NULL, NULL, 0, 10000, &r, &e), 0);
        assert_true(WIFEXITED(r.status) && WEXITSTATUS(r.status) == 7);
        assert_string_equal(r.out, "out\n");
        assert_string_equal(r.err, "err\n");
        rt_ctl_run_result_done(&r);

        const char *a2[] = {"tr", "a-z", "A-Z", NULL};
        const char *env[] = {"PATH=/usr/bin:/bin", NULL};
        assert_int_equal(rt_ctl_run(ip->path, a2, env, "hello", 5, 10000, &r, &e), 0);
        assert_int_equal(r.status, 0);
        assert_string_equal(r.out, "HELLO");
        rt_ctl_run_result_done(&r);

        const char *a3[] = {"/definitely/missing", NULL};
        assert_int_equal(rt_ctl_run(ip->path, a3, NULL, NULL, 0, 10000, &r, &e), -ENOENT);
        assert_non_null(strstr(e.msg, "/definitely/missing"));

        const char *a4[] = {"sleep", "30", NULL};
        assert_int_equal(rt_ctl_run(ip->path, a4, NULL, NULL, 0, 300, &r, &e), -ETIMEDOUT);

        /* Raw requests on a connection of our own. */
        int fd;
        assert_int_equal(rt_ctl_connect(ip->path, &fd, &e), 0);
        assert_int_equal(rt_ctl_send_ping(fd, 5), 0);
        struct rt_ctl_msg m;
        int passed;
        assert_int_equal(rt_ctl_recv_wait(fd, &m, &passed, 5000), 0);
        assert_int_equal(m.type, CTL_PONG);
        assert_int_equal(m.id, 5);
        assert_int_equal(m.pong.init_pid, ip->pid);
        assert_int_equal(rt_ctl_send_signal(fd, 6, 999, 0, SIGTERM, false), 0);
        assert_int_equal(rt_ctl_recv_wait(fd, &m, &passed, 5000), 0);
        assert_int_equal(m.type, CTL_RESULT);
        assert_int_equal(m.err, -ESRCH);
        assert_int_equal(rt_ctl_send_resize(fd, 6, 80, 24), 0);
        assert_int_equal(rt_ctl_recv_wait(fd, &m, &passed, 5000), 0);
        assert_int_equal(m.err, -ESRCH);
        assert_int_equal(rt_ctl_send_kill_all(fd, 7, SIGTERM), 0);
        assert_int_equal(rt_ctl_recv_wait(fd, &m, &passed, 5000), 0);
        assert_int_equal(m.err, 0);
        assert_int_equal(rt_ctl_send_signal(fd, 6, 999, 1, SIGTERM, false), -EINVAL);
        assert_int_equal(rt_ctl_recv_wait(fd, &m, &passed, 50), -ETIMEDOUT);

        /* PTY spawn through the client: master comes back. */
        const char *a5[] = {"sh", "-c", "stty size", NULL};
        struct rt_spawn_req req = {
                .id = 50, .argv = a5, .envp = env, .flags = RT_SPAWN_PTY, .cols = 99, .rows = 33};
        assert_int_equal(rt_ctl_send_spawn(fd, &req, NULL), 0);
        assert_int_equal(rt_ctl_recv_wait(fd, &m, &passed, 5000), 0);
        assert_int_equal(m.type, CTL_SPAWNED);
        assert_int_equal(m.err, 0);
        assert_true(passed >= 0);
        char out[256] = {0};
        size_t got = 0;
        for (;;) {
                ssize_t k = read(passed, out + got, sizeof(out) - 1 - got);
                if (k <= 0)
                        break; /* EIO once the slave side is closed */
                got += (size_t) k;
        }
        assert_non_null(strstr(out, "33 99"));
        close(passed);
        assert_int_equal(rt_ctl_recv_wait(fd, &m, &passed, 5000), 0);
        assert_int_equal(m.type, CTL_EXITED);
        assert_int_equal(m.id, 50);
        assert_int_equal(m.status, 0);
        close(fd);

        assert_int_equal(rt_ctl_connect("/nonexistent/ctl.sock", &fd, &e), -ENOENT);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_spawn_round_trip),
                cmocka_unit_test(test_spawn_encode_rejects),
                cmocka_unit_test(test_init_decode_rejects),
                cmocka_unit_test(test_init_decode_spawn_strings),
                cmocka_unit_test(test_daemon_decode),
                cmocka_unit_test(test_holds_decode),
                cmocka_unit_test(test_socketpair_fd_passing),
                cmocka_unit_test_setup_teardown(test_run_real_init, start_init, stop_init),
        };
        signal(SIGPIPE, SIG_IGN);
        return cmocka_run_group_tests(tests, NULL, NULL);
}
