/* SPDX-License-Identifier: Apache-2.0 */
/* src/priv, phase 4b (type 23 UPPER_PACK, reply 0x97 UPPER_PACKED, and
 * warren-upper's datagrams; docs/privsep.md "Phase 4, the upper-dir
 * reader"): round trips; hand-written refusals of each field (fd counts,
 * the target, flags, reserved bits; warren-upper's magic, kind, fds, errno,
 * message padding, fields that must be zero); the real warren-priv
 * (argv[1]) refusing an UPPER_PACK without its fd, with a spool that is
 * not a regular file open for writing (the fd closed there, nothing
 * written) and for a target that is not a sandbox's init (nothing
 * written); and the real warren-upper (argv[2]) run by this test as
 * warren-priv runs it: in a user namespace of the test's own (ids
 * 0..65535 = host 300000..), it packs a tree with the range's 0600 files
 * and 0700 dirs (owners as the namespace sees them), asks about each
 * directory's opaqueness with that directory's fd, and cannot read a file
 * of the host's root (0600: the pack fails, EACCES), all under its
 * seccomp allowlist set to kill on a miss; with a pidfd of a process in
 * the host's user namespace it refuses (--userns=off). */
#include <archive.h>
#include <archive_entry.h>
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <cmocka.h>

#include "priv-harness.h"
#include "test-priv-upper-ns.h"

#include "priv/priv-proto.h"

static const char *priv_bin, *upper_bin;

#define BASE 300000u

static void test_round_trips(void **state) {
        (void) state;
        uint8_t buf[PRIV_MSG_MAX];
        struct priv_req req;
        struct priv_reply rep;
        struct wr_err e = {0};
        struct priv_target t;
        upper_test_target(&t);
        int n = priv_upper_pack_encode(5, &t, buf, sizeof(buf), &e);
        assert_true(n > 0);
        assert_int_equal(priv_req_decode(buf, (size_t) n, 1, &req, &e), 0);
        assert_int_equal(req.hdr.type, PRIV_UPPER_PACK);
        assert_memory_equal(&req.upper_pack.t, &t, sizeof(t));
        assert_string_equal(priv_type_name(PRIV_UPPER_PACK), "UPPER_PACK");
        assert_int_equal(priv_type_fds(PRIV_UPPER_PACK), 1);
        struct priv_upper_packed p = {.served = 1, .entries = 7, .bytes = 99, .opaque = 1};
        n = priv_upper_packed_encode(5, &p, buf, sizeof(buf));
        assert_int_equal(priv_reply_decode(buf, (size_t) n, 0, &rep, &e), 0);
        assert_memory_equal(&rep.upper_packed, &p, sizeof(p));
        /* UPPER_PACKED with an fd, or sent as a request */
        struct priv_reply r2;
        assert_int_equal(priv_reply_decode(buf, (size_t) n, 1, &r2, &e), -EPROTO);
        priv_refused(buf, (size_t) n, 0, -EPROTO);
}

static void test_refusals(void **state) {
        (void) state;
        uint8_t buf[PRIV_MSG_MAX];
        struct wr_err e = {0};
        struct priv_target t;
        upper_test_target(&t);
        int n = priv_upper_pack_encode(5, &t, buf, sizeof(buf), &e);
        assert_true(n > 0);
        /* its one fd: none, two */
        priv_refused(buf, (size_t) n, 0, -EPROTO);
        priv_refused(buf, (size_t) n, 2, -EPROTO);
        /* short, long */
        priv_refused(buf, (size_t) n - 1, 1, -EPROTO);
        priv_refused(buf, (size_t) n + 1, 1, -EPROTO);
        upper_test_target_refusals(buf, (size_t) n, 1);
        /* the encoder refuses what the decoder would */
        t.pid = 1;
        assert_int_equal(priv_upper_pack_encode(5, &t, buf, sizeof(buf), &e), -EINVAL);
}

static int msg_decode(const struct priv_upper_msg *m, size_t len, size_t n_fds) {
        struct priv_upper_msg out;
        struct wr_err e = {0};
        int r = priv_upper_msg_decode(m, len, n_fds, &out, &e);
        if (r < 0)
                assert_true(e.msg[0] != '\0');
        return r;
}

static void test_upper_msg(void **state) {
        (void) state;
        struct priv_upper_msg q = {.magic = PRIV_UPPER_MAGIC, .kind = PRIV_UPPER_Q_OPAQUE};
        struct priv_upper_msg d = {
                .magic = PRIV_UPPER_MAGIC, .kind = PRIV_UPPER_Q_DONE, .entries = 3, .bytes = 10};
        assert_int_equal(msg_decode(&q, sizeof(q), 1), 0);
        assert_int_equal(msg_decode(&d, sizeof(d), 0), 0);
        struct priv_upper_msg m;
        /* framing */
        assert_int_equal(msg_decode(&q, sizeof(q) - 1, 1), -EPROTO);
        assert_int_equal(msg_decode(&q, 0, 1), -EPROTO);
        m = q;
        m.magic ^= 1;
        assert_int_equal(msg_decode(&m, sizeof(m), 1), -EPROTO);
        m = q;
        m.kind = 3;
        assert_int_equal(msg_decode(&m, sizeof(m), 1), -EPROTO);
        m.kind = 0;
        assert_int_equal(msg_decode(&m, sizeof(m), 0), -EPROTO);
        /* fds: OPAQUE exactly one, DONE none */
        assert_int_equal(msg_decode(&q, sizeof(q), 0), -EPROTO);
        assert_int_equal(msg_decode(&q, sizeof(q), 2), -EPROTO);
        assert_int_equal(msg_decode(&d, sizeof(d), 1), -EPROTO);
        /* fields */
        m = d;
        m.reserved = 1;
        assert_int_equal(msg_decode(&m, sizeof(m), 0), -EINVAL);
        m = d;
        m.err = -1;
        assert_int_equal(msg_decode(&m, sizeof(m), 0), -EINVAL);
        m.err = 4096;
        assert_int_equal(msg_decode(&m, sizeof(m), 0), -EINVAL);
        m = d;
        m.err = EACCES;
        memset(m.msg, 'x', sizeof(m.msg)); /* no NUL */
        assert_int_equal(msg_decode(&m, sizeof(m), 0), -EINVAL);
        memset(m.msg, 0, sizeof(m.msg));
        strcpy(m.msg, "no");
        m.msg[10] = 'y'; /* garbage after the NUL */
        assert_int_equal(msg_decode(&m, sizeof(m), 0), -EINVAL);
        m.msg[10] = 0;
        assert_int_equal(msg_decode(&m, sizeof(m), 0), 0);
        m.err = 0; /* a message without an error */
        assert_int_equal(msg_decode(&m, sizeof(m), 0), -EINVAL);
        /* OPAQUE says nothing but its fd */
        m = q;
        m.entries = 1;
        assert_int_equal(msg_decode(&m, sizeof(m), 1), -EINVAL);
        m = q;
        m.err = 1;
        assert_int_equal(msg_decode(&m, sizeof(m), 1), -EINVAL);
}

/* ---- the real warren-priv ---- */

/* any file serves as warren-init for what is tested here: nothing gets as far
 * as running it */
static void server_start(struct priv_server *s) {
        priv_server_start(s, priv_bin, "wr-priv-up", "/bin/true");
        priv_sh("mkdir -p %s/state/sandboxes/sb-1/upper", s->dir);
}

static void answer(struct priv_server *s, const void *buf, size_t len, const int *fds, size_t n_fds,
                   struct priv_reply *rep) {
        priv_server_answer(s, buf, len, fds, n_fds, rep, NULL, NULL);
}

static void test_server(void **state) {
        (void) state;
        struct priv_server s;
        server_start(&s);
        uint8_t buf[PRIV_MSG_MAX];
        struct priv_reply rep;
        struct wr_err e = {0};
        struct priv_target t;
        upper_test_target(&t);
        int n = priv_upper_pack_encode(1, &t, buf, sizeof(buf), &e);
        /* no fd: refused undecoded */
        answer(&s, buf, (size_t) n, NULL, 0, &rep);
        assert_int_equal(rep.hdr.type, PRIV_RESULT);
        assert_int_equal(rep.result.err, EPROTO);
        assert_int_equal(rep.result.refused, 1);
        /* a pipe as the spool: not a regular file; its fd closed there */
        int p[2];
        assert_int_equal(pipe2(p, O_CLOEXEC), 0);
        answer(&s, buf, (size_t) n, &p[1], 1, &rep);
        assert_int_equal(rep.hdr.type, PRIV_RESULT);
        assert_int_equal(rep.result.err, EBADF);
        close(p[1]);
        char ch;
        assert_int_equal(read(p[0], &ch, 1), 0);
        close(p[0]);
        /* a regular file open read-only */
        char spool[160];
        snprintf(spool, sizeof(spool), "%s/spool", s.dir);
        int fd = open(spool, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
        assert_true(fd >= 0);
        int ro = open(spool, O_RDONLY | O_CLOEXEC);
        answer(&s, buf, (size_t) n, &ro, 1, &rep);
        assert_int_equal(rep.result.err, EBADF);
        close(ro);
        /* a target that is no sandbox's init (this test: not in a
         * warren cgroup): ESRCH-like failure, nothing written */
        t.pid = (int32_t) getpid();
        t.start_time = upper_test_start_time(getpid());
        n = priv_upper_pack_encode(2, &t, buf, sizeof(buf), &e);
        answer(&s, buf, (size_t) n, &fd, 1, &rep);
        assert_int_equal(rep.hdr.type, PRIV_RESULT);
        assert_true(rep.result.err != 0);
        assert_int_equal(rep.result.served, 3); /* carried out (and failed), not refused */
        struct stat st;
        assert_int_equal(fstat(fd, &st), 0);
        assert_int_equal(st.st_size, 0);
        close(fd);
        priv_server_stop(&s);
}

/* ---- the real warren-upper, run as warren-priv runs it ---- */

struct run {
        int err;
        char msg[PRIV_ERRMSG_MAX];
        struct priv_upper_msg done;
        unsigned queries, non_dirs;
};

/* Start warren-upper with upper (fd 3), pidfd (4), spool (5), its socket
 * (6); answer its questions: opaque when the directory's name is "op". */
static void run_upper(int upper, int pidfd, int spool, struct run *out) {
        memset(out, 0, sizeof(*out));
        int sp[2];
        assert_int_equal(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sp), 0);
        pid_t pid = fork();
        assert_true(pid >= 0);
        if (pid == 0) {
                int fds[4] = {upper, pidfd, spool, sp[1]}, high[4];
                for (int i = 0; i < 4; i++)
                        high[i] = fcntl(fds[i], F_DUPFD, 20);
                for (int i = 0; i < 4; i++)
                        dup2(high[i], 3 + i);
                execl(upper_bin, "warren-upper", (char *) NULL);
                _exit(127);
        }
        close(sp[1]);
        for (;;) {
                uint8_t buf[sizeof(struct priv_upper_msg) + 1];
                int fds[PRIV_FDS_MAX];
                size_t n_fds = 0;
                long n = priv_recv(sp[0], buf, sizeof(buf), fds, &n_fds, 0);
                assert_true(n > 0);
                struct priv_upper_msg m;
                struct wr_err e = {0};
                assert_int_equal(priv_upper_msg_decode(buf, (size_t) n, n_fds, &m, &e), 0);
                if (m.kind == PRIV_UPPER_Q_DONE) {
                        out->done = m;
                        break;
                }
                out->queries++;
                struct stat st;
                assert_int_equal(fstat(fds[0], &st), 0);
                out->non_dirs += !S_ISDIR(st.st_mode);
                char v[2];
                unsigned char a = fgetxattr(fds[0], "trusted.overlay.opaque", v, sizeof(v)) == 1 &&
                                  v[0] == 'y';
                close(fds[0]);
                assert_int_equal(send(sp[0], &a, 1, 0), 1);
        }
        close(sp[0]);
        int status;
        assert_int_equal(waitpid(pid, &status, 0), pid);
        out->err = out->done.err;
        memcpy(out->msg, out->done.msg, sizeof(out->msg));
        if (!(WIFEXITED(status) && (WEXITSTATUS(status) == 0) == (out->err == 0)))
                fprintf(stderr, "warren-upper: status 0x%x, err %d (%s)\n", status, out->err,
                        out->msg);
        assert_true(WIFEXITED(status) && (WEXITSTATUS(status) == 0) == (out->err == 0));
}

/* entries of the tar in fd: "path uid gid mode" lines into out */
static void tar_list(int fd, char *out, size_t size) {
        assert_int_equal(lseek(fd, 0, SEEK_SET), 0);
        struct archive *a = archive_read_new();
        archive_read_support_format_tar(a);
        assert_int_equal(archive_read_open_fd(a, dup(fd), 16384), ARCHIVE_OK);
        struct archive_entry *en;
        size_t off = 0;
        out[0] = 0;
        while (archive_read_next_header(a, &en) == ARCHIVE_OK)
                off += (size_t) snprintf(
                        out + off, size - off, "%s %lld %lld %o\n", archive_entry_pathname(en),
                        (long long) archive_entry_uid(en), (long long) archive_entry_gid(en),
                        (unsigned) (archive_entry_mode(en) & 07777));
        archive_read_free(a);
}

static void test_upper_binary(void **state) {
        (void) state;
        char dir[] = "/tmp/wr-upper.XXXXXX";
        assert_non_null(mkdtemp(dir));
        char cmd[1024];
        /* the tree: the range's root owns the top, a user of the range
         * (1234) a 0700 dir with a 0600 file; an opaque dir "op" */
        snprintf(cmd, sizeof(cmd),
                 "set -e; cd %s; mkdir -p up/bob up/op; echo b > up/bob/f; echo top > up/t; "
                 "chmod 600 up/bob/f up/t; chmod 700 up/bob; chown -R %u:%u up; "
                 "chown -R %u:%u up/bob",
                 dir, BASE, BASE, BASE + 1234, BASE + 1234);
        assert_int_equal(system(cmd), 0);
        char op[128];
        snprintf(op, sizeof(op), "%s/up/op", dir);
        if (setxattr(op, "trusted.overlay.opaque", "y", 1, 0) < 0) {
                snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
                assert_int_equal(system(cmd), 0);
                skip(); /* no trusted xattrs on /tmp */
        }
        int pidfd;
        pid_t child = upper_test_userns_child(BASE, &pidfd);
        char p[128];
        snprintf(p, sizeof(p), "%s/up", dir);
        int upper = open(p, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        snprintf(p, sizeof(p), "%s/spool", dir);
        int spool = open(p, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
        assert_true(upper >= 0 && spool >= 0);
        struct run r;
        run_upper(upper, pidfd, spool, &r);
        assert_int_equal(r.err, 0);
        assert_int_equal(r.done.opaque, 1);
        assert_int_equal(r.queries, 2); /* bob, op: each with its own fd */
        assert_int_equal(r.non_dirs, 0);
        static char list[4096];
        tar_list(spool, list, sizeof(list));
        /* owners as the namespace sees them; the 0600 file of 1234 read */
        assert_non_null(strstr(list, "bob/ 1234 1234 700\n"));
        assert_non_null(strstr(list, "bob/f 1234 1234 600\n"));
        assert_non_null(strstr(list, "op/.wh..wh..opq"));
        assert_non_null(strstr(list, "t 0 0 600\n"));

        /* a file of the host's root (0600) in the tree: not readable by
         * warren-upper, whose capabilities hold over the range only */
        snprintf(cmd, sizeof(cmd),
                 "cd %s && echo secret > up/host && chown 0:0 up/host && "
                 "chmod 600 up/host",
                 dir);
        assert_int_equal(system(cmd), 0);
        assert_int_equal(ftruncate(spool, 0), 0);
        assert_int_equal(lseek(spool, 0, SEEK_SET), 0);
        run_upper(upper, pidfd, spool, &r);
        assert_int_equal(r.err, EACCES);
        assert_non_null(strstr(r.msg, "host"));

        /* a pidfd of a process in the host's user namespace: refused */
        int self = (int) syscall(SYS_pidfd_open, getpid(), 0);
        assert_true(self >= 0);
        run_upper(upper, self, spool, &r);
        assert_int_equal(r.err, EPERM);
        assert_non_null(strstr(r.msg, "--userns=off"));
        close(self);

        close(upper);
        close(spool);
        close(pidfd);
        kill(child, SIGKILL);
        waitpid(child, NULL, 0);
        snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
        assert_int_equal(system(cmd), 0);
}

int main(int argc, char **argv) {
        if (argc < 3) {
                fprintf(stderr,
                        "usage: test-priv-upper PATH-OF-warren-priv PATH-OF-warren-upper\n");
                return 2;
        }
        priv_bin = argv[1];
        upper_bin = argv[2];
        signal(SIGPIPE, SIG_IGN);
        /* warren-upper's seccomp list kills on a miss: proves it complete
         * for what is packed here */
        setenv("WARREN_UPPER_SECCOMP_KILL", "1", 1);
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_round_trips),  cmocka_unit_test(test_refusals),
                cmocka_unit_test(test_upper_msg),    cmocka_unit_test(test_server),
                cmocka_unit_test(test_upper_binary),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
