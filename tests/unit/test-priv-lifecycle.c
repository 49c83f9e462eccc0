/* SPDX-License-Identifier: Apache-2.0 */
/* src/priv, phase 2 (types 6..11: the sandbox lifecycle, docs/privsep.md):
 * every new request and SANDBOX_CREATED round trip; hand-written refusals
 * of each (wrong fd counts, bad ids, unknown flags, net fields without
 * their flag, bad uid ranges, too many layers/mounts, blob sizes,
 * reserved fields, DESTROY targets half given, link names); the config
 * blob's decoder (layers outside layers/, "..", absolute paths, unknown
 * kinds, data over the runtime's bounds, BIND counts, trailing bytes); and
 * the real warren-priv binary (argv[1], with --init) refusing a config
 * whose memfd is not sealed, whose layers leave layers/ or whose fd count
 * is wrong, with nothing made under sandboxes/ and every fd closed, then a
 * SANDBOX_DESTROY of a sandbox it does not hold (pid 0) cleaning up its
 * dir (the control). */
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
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "priv-harness.h"

#include "priv/priv-cfg.h"
#include "priv/priv-proto.h"

static const char *priv_bin;

static void good_cfg(struct priv_sandbox_cfg *c) {
        memset(c, 0, sizeof(*c));
        memcpy(c->id, "sb-1", 5);
        c->flags = PRIV_CFG_NET | PRIV_CFG_RESOLV;
        memcpy(c->net_peer, "wr0a", 5);
        c->net_addr = 0x0200000a;
        c->net_gateway = 0x0100000a;
        c->net_prefix = 30;
        c->uid_base = 1u << 20;
        c->uid_count = 65536;
        c->n_layers = 1;
        c->n_mounts = 2;
        c->n_bind = 1;
        c->blob_len = 100;
}

static void test_round_trips(void **state) {
        (void) state;
        uint8_t buf[PRIV_MSG_MAX];
        struct priv_req req;
        struct priv_reply rep;
        struct wr_err e = {0};
        struct priv_sandbox_cfg c;
        good_cfg(&c);
        static const uint32_t types[] = {PRIV_SANDBOX_CREATE, PRIV_SANDBOX_PRESTART,
                                         PRIV_SANDBOX_START};
        for (size_t i = 0; i < 3; i++) {
                int n = priv_sandbox_cfg_encode(7, types[i], &c, buf, sizeof(buf), &e);
                assert_true(n > 0);
                assert_int_equal(priv_req_decode(buf, (size_t) n, 2, &req, &e), 0);
                assert_int_equal(req.hdr.type, types[i]);
                assert_memory_equal(&req.cfg, &c, sizeof(c));
                assert_string_equal(priv_type_name(types[i]) + 8, i == 0   ? "CREATE"
                                                                  : i == 1 ? "PRESTART"
                                                                           : "START");
        }
        struct priv_destroy d = {.t = {.id = "sb-1", .pid = 42, .start_time = 9}, .peer = "wr0a"};
        int n = priv_destroy_encode(8, &d, buf, sizeof(buf), &e);
        assert_true(n > 0);
        assert_int_equal(priv_req_decode(buf, (size_t) n, 0, &req, &e), 0);
        assert_string_equal(req.destroy.peer, "wr0a");
        assert_int_equal(req.destroy.keep_link, 0);
        /* pid not known (a reaped init): both 0 */
        d.t.pid = 0;
        d.t.start_time = 0;
        d.peer[0] = 0;
        d.keep_link = 1;
        n = priv_destroy_encode(8, &d, buf, sizeof(buf), &e);
        assert_int_equal(priv_req_decode(buf, (size_t) n, 0, &req, &e), 0);
        struct priv_target t = {.id = "sb-1", .pid = 42, .cgroup_mode = 1, .start_time = 9};
        n = priv_target_encode(9, PRIV_SANDBOX_ATTACH, &t, buf, sizeof(buf), &e);
        assert_int_equal(priv_req_decode(buf, (size_t) n, 0, &req, &e), 0);
        assert_int_equal(req.target.pid, 42);
        n = priv_target_encode(9, PRIV_CTL_CONNECT, &t, buf, sizeof(buf), &e);
        assert_int_equal(priv_req_decode(buf, (size_t) n, 0, &req, &e), 0);
        assert_int_equal(req.hdr.type, PRIV_CTL_CONNECT);
        assert_int_equal(priv_target_encode(9, PRIV_HELLO, &t, buf, sizeof(buf), &e), -EINVAL);
        struct priv_created cr = {.pid = 42, .start_time = 9, .served = 1};
        n = priv_created_encode(10, &cr, buf, sizeof(buf));
        assert_int_equal(priv_reply_decode(buf, (size_t) n, 2, &rep, &e), 0);
        assert_int_equal(rep.created.pid, 42);
        /* its two fds are part of it */
        assert_int_equal(priv_reply_decode(buf, (size_t) n, 0, &rep, &e), -EPROTO);
        assert_int_equal(priv_reply_decode(buf, (size_t) n, 3, &rep, &e), -EPROTO);
        cr.pid = 0;
        n = priv_created_encode(10, &cr, buf, sizeof(buf));
        assert_int_equal(priv_reply_decode(buf, (size_t) n, 2, &rep, &e), -EINVAL);
}

/* a good CREATE in buf with c's fields changed by f; refused as code */
#define CFG_REFUSED(mutate, fds, code)                                                             \
        do {                                                                                       \
                struct priv_sandbox_cfg c;                                                         \
                good_cfg(&c);                                                                      \
                int n = priv_sandbox_cfg_encode(1, PRIV_SANDBOX_CREATE, &c, buf, sizeof(buf), &e); \
                assert_true(n > 0);                                                                \
                struct priv_sandbox_cfg *p =                                                       \
                        (struct priv_sandbox_cfg *) (void *) (buf + sizeof(struct priv_hdr));      \
                mutate;                                                                            \
                priv_refused(buf, (size_t) n, fds, code);                                          \
        } while (0)

static void test_refusals(void **state) {
        (void) state;
        uint8_t buf[PRIV_MSG_MAX];
        struct wr_err e = {0};
        /* fd counts: the memfd and one per BIND, exactly */
        CFG_REFUSED((void) p, 0, -EPROTO);
        CFG_REFUSED((void) p, 1, -EPROTO);
        CFG_REFUSED((void) p, 3, -EPROTO);
        CFG_REFUSED((void) p, 2 + PRIV_BIND_MAX, -EPROTO);
        CFG_REFUSED(p->n_bind = 0, 2, -EPROTO);
        /* fields */
        CFG_REFUSED(memcpy(p->id, "../x", 5), 2, -EINVAL);
        CFG_REFUSED(p->id[10] = 'x', 2, -EINVAL);
        CFG_REFUSED(p->cgroup_mode = 3, 2, -EINVAL);
        CFG_REFUSED(p->flags |= 1u << 9, 2, -EINVAL);
        CFG_REFUSED(p->reserved[1] = 1, 2, -EINVAL);
        CFG_REFUSED(memcpy(p->net_peer, "eth0", 5), 2, -EINVAL);
        CFG_REFUSED(p->net_prefix = 0, 2, -EINVAL);
        CFG_REFUSED(p->net_prefix = 32, 2, -EINVAL);
        CFG_REFUSED(p->flags &= ~PRIV_CFG_NET, 2, -EINVAL); /* net fields without the flag */
        CFG_REFUSED(p->uid_base = 0, 2, -EINVAL);
        CFG_REFUSED(p->uid_base = UINT32_MAX - 10, 2, -EINVAL);
        CFG_REFUSED(p->uid_count = 0, 2, -EINVAL); /* a base without a count */
        CFG_REFUSED(p->n_layers = PRIV_LAYERS_MAX + 1, 2, -EINVAL);
        CFG_REFUSED(p->n_mounts = PRIV_BIND_MAX + 1, 2, -EINVAL);
        CFG_REFUSED((p->n_bind = 3, p->n_mounts = 2), 4, -EINVAL);
        CFG_REFUSED(p->blob_len = 0, 2, -EINVAL);
        CFG_REFUSED(p->blob_len = PRIV_CFG_BLOB_MAX + 1, 2, -EINVAL);
        /* the encoder refuses what the decoder would */
        struct priv_sandbox_cfg c;
        good_cfg(&c);
        c.flags |= 1u << 9;
        assert_int_equal(priv_sandbox_cfg_encode(1, PRIV_SANDBOX_CREATE, &c, buf, sizeof(buf), &e),
                         -EINVAL);
        good_cfg(&c);
        assert_int_equal(priv_sandbox_cfg_encode(1, PRIV_SANDBOX_DESTROY, &c, buf, sizeof(buf), &e),
                         -EINVAL);

        /* DESTROY */
        struct priv_destroy d = {.t = {.id = "sb-1", .pid = 42, .start_time = 9}, .peer = "wr0a"};
        int n = priv_destroy_encode(1, &d, buf, sizeof(buf), &e);
        struct priv_destroy *pd = (struct priv_destroy *) (void *) (buf + sizeof(struct priv_hdr));
        priv_refused(buf, (size_t) n, 1, -EPROTO); /* an fd where none belongs */
        pd->t.start_time = 0;                      /* a pid without its start time */
        priv_refused(buf, (size_t) n, 0, -EINVAL);
        pd->t.pid = 0;
        pd->t.start_time = 9; /* a start time without its pid */
        priv_refused(buf, (size_t) n, 0, -EINVAL);
        pd->t.pid = 1;
        priv_refused(buf, (size_t) n, 0, -EINVAL);
        n = priv_destroy_encode(1, &d, buf, sizeof(buf), &e);
        memcpy(pd->peer, "lo", 3);
        priv_refused(buf, (size_t) n, 0, -EINVAL);
        n = priv_destroy_encode(1, &d, buf, sizeof(buf), &e);
        pd->keep_link = 2;
        priv_refused(buf, (size_t) n, 0, -EINVAL);
        n = priv_destroy_encode(1, &d, buf, sizeof(buf), &e);
        pd->reserved = 1;
        priv_refused(buf, (size_t) n, 0, -EINVAL);
        n = priv_destroy_encode(1, &d, buf, sizeof(buf), &e);
        pd->t.cgroup_mode = 3;
        priv_refused(buf, (size_t) n, 0, -EINVAL);

        /* ATTACH and CTL_CONNECT: a whole target */
        struct priv_target t = {.id = "sb-1", .pid = 42, .start_time = 9};
        for (uint32_t ty = PRIV_SANDBOX_ATTACH; ty <= PRIV_CTL_CONNECT; ty++) {
                n = priv_target_encode(1, ty, &t, buf, sizeof(buf), &e);
                struct priv_target *pt =
                        (struct priv_target *) (void *) (buf + sizeof(struct priv_hdr));
                priv_refused(buf, (size_t) n, 1, -EPROTO);
                pt->pid = 0;
                priv_refused(buf, (size_t) n, 0, -EINVAL);
                pt->pid = 42;
                pt->start_time = 0;
                priv_refused(buf, (size_t) n, 0, -EINVAL);
                pt->start_time = 9;
                pt->id[0] = '-';
                priv_refused(buf, (size_t) n, 0, -EINVAL);
                /* the wrong size: a DESTROY's payload under this type */
                n = priv_destroy_encode(1, &d, buf, sizeof(buf), &e);
                ((struct priv_hdr *) (void *) buf)->type = ty;
                priv_refused(buf, (size_t) n, 0, -EPROTO);
        }
        /* SANDBOX_CREATED is a reply, never a request */
        struct priv_created cr = {.pid = 42, .start_time = 9};
        n = priv_created_encode(1, &cr, buf, sizeof(buf));
        priv_refused(buf, (size_t) n, 2, -EPROTO);
}

/* ---- the blob ---- */

struct blob {
        uint8_t b[8192];
        size_t n;
};

static void put(struct blob *b, const void *d, size_t n) {
        assert_true(b->n + n <= sizeof(b->b));
        memcpy(b->b + b->n, d, n);
        b->n += n;
}

static void put_str(struct blob *b, const char *s) {
        put(b, s, strlen(s) + 1);
}

static void put_mount(struct blob *b, uint32_t kind, const char *target, const char *data) {
        struct priv_mount_rec r = {.kind = kind, .len = data ? strlen(data) : 0};
        put(b, &r, sizeof(r));
        put_str(b, target);
        if (data)
                put(b, data, strlen(data));
}

/* hostname, resolv.conf, one layer, a BIND and a FILE */
static void good_blob(struct blob *b, struct priv_sandbox_cfg *c, const char *layer) {
        b->n = 0;
        put_str(b, "host");
        put_str(b, "nameserver 10.0.0.1\n");
        put_str(b, layer);
        put_mount(b, RT_MOUNT_BIND, "/data", NULL);
        put_mount(b, RT_MOUNT_FILE, "/etc/x", "hello");
        good_cfg(c);
        c->blob_len = (uint32_t) b->n;
}

static int blob_decode(struct blob *b, struct priv_sandbox_cfg *c, struct wr_err *e) {
        static struct priv_cfg_view v;
        return priv_cfg_decode(c, b->b, b->n, &v, e);
}

static void test_blob(void **state) {
        (void) state;
        static struct blob b;
        static struct priv_cfg_view v;
        struct priv_sandbox_cfg c;
        struct wr_err e = {0};
        good_blob(&b, &c, "layers/sha256/abc");
        assert_int_equal(priv_cfg_decode(&c, b.b, b.n, &v, &e), 0);
        assert_string_equal(v.hostname, "host");
        assert_string_equal(v.layers[0], "layers/sha256/abc");
        assert_int_equal(v.n_mounts, 2);
        assert_int_equal(v.mounts[1].len, 5);
        assert_memory_equal(v.mounts[1].data, "hello", 5);

        /* layers only below layers/ */
        static const char *const bad_layers[] = {
                "/var/lib/warren/layers/sha256/abc",
                "layers",
                "layers/../etc",
                "../layers/x",
                "images/x",
                "layers//x",
                "sandboxes/sb-2/upper",
                "layers/x/",
        };
        for (size_t i = 0; i < sizeof(bad_layers) / sizeof(bad_layers[0]); i++) {
                good_blob(&b, &c, bad_layers[i]);
                assert_int_equal(blob_decode(&b, &c, &e), -EACCES);
        }
        /* the length the header gives */
        good_blob(&b, &c, "layers/x/y");
        c.blob_len++;
        assert_int_equal(priv_cfg_decode(&c, b.b, b.n, &v, &e), -EINVAL);
        /* trailing bytes */
        good_blob(&b, &c, "layers/x/y");
        put(&b, "z", 1);
        c.blob_len = (uint32_t) b.n;
        assert_int_equal(blob_decode(&b, &c, &e), -EINVAL);
        /* resolv.conf without its flag */
        good_blob(&b, &c, "layers/x/y");
        c.flags &= ~PRIV_CFG_RESOLV;
        assert_int_equal(blob_decode(&b, &c, &e), -EINVAL);
        /* BIND entries and the header's count */
        good_blob(&b, &c, "layers/x/y");
        c.n_bind = 0;
        assert_int_equal(blob_decode(&b, &c, &e), -EINVAL);
        /* short: a mount the header counts is not there */
        good_blob(&b, &c, "layers/x/y");
        c.n_mounts = 3;
        assert_int_equal(blob_decode(&b, &c, &e), -EINVAL);
        /* a hostname over 64 bytes */
        b.n = 0;
        char longname[80];
        memset(longname, 'h', sizeof(longname) - 1);
        longname[79] = 0;
        put_str(&b, longname);
        put_str(&b, "");
        good_cfg(&c);
        c.flags = 0;
        memset(c.net_peer, 0, sizeof(c.net_peer));
        c.n_layers = c.n_mounts = c.n_bind = 0;
        c.blob_len = (uint32_t) b.n;
        assert_int_equal(blob_decode(&b, &c, &e), -EINVAL);
        /* records: kinds, flags, modes, data where none belongs, targets */
        struct {
                struct priv_mount_rec r;
                const char *target;
        } bad_recs[] = {
                {{.kind = 0}, "/x"},
                {{.kind = 5}, "/x"},
                {{.kind = RT_MOUNT_BIND, .flags = 1u << 7}, "/x"},
                {{.kind = RT_MOUNT_TMPFS, .mode = 010000}, "/x"},
                {{.kind = RT_MOUNT_TMPFS, .reserved = 1}, "/x"},
                {{.kind = RT_MOUNT_BIND, .size = 4096}, "/x"},
                {{.kind = RT_MOUNT_TMPFS, .len = 1}, "/x"},
                {{.kind = RT_MOUNT_FILE, .len = RT_MOUNT_DATA_MAX + 1}, "/x"},
                {{.kind = RT_MOUNT_FILE, .len = 1000}, "/x"}, /* past the end */
                {{.kind = RT_MOUNT_TMPFS, .size = 1}, "x"},   /* relative */
        };
        for (size_t i = 0; i < sizeof(bad_recs) / sizeof(bad_recs[0]); i++) {
                b.n = 0;
                put_str(&b, "");
                put_str(&b, "");
                put(&b, &bad_recs[i].r, sizeof(bad_recs[i].r));
                put_str(&b, bad_recs[i].target);
                good_cfg(&c);
                c.flags = 0;
                memset(c.net_peer, 0, sizeof(c.net_peer));
                c.net_addr = c.net_gateway = c.net_prefix = 0;
                c.n_layers = 0;
                c.n_mounts = 1;
                c.n_bind = bad_recs[i].r.kind == RT_MOUNT_BIND;
                c.blob_len = (uint32_t) b.n;
                assert_int_equal(blob_decode(&b, &c, &e), -EINVAL);
        }
}

/* ---- the real binary ---- */

/* any file serves as warren-init for what is tested here: nothing gets as far
 * as running it */
static void server_start(struct priv_server *s) {
        priv_server_start(s, priv_bin, "wr-priv-lc", "/bin/true");
        priv_sh("mkdir -p %s/state/sandboxes/sb-victim %s/state/layers/sha256/l1 %s/outside && "
                "touch %s/state/sandboxes/sb-victim/keep",
                s->dir, s->dir, s->dir, s->dir);
}

static void answer(struct priv_server *s, const void *buf, size_t len, const int *fds, size_t n_fds,
                   struct priv_reply *rep) {
        priv_server_answer(s, buf, len, fds, n_fds, rep, NULL, NULL);
}

/* a memfd holding b; sealed or not */
static int memfd_of(const struct blob *b, bool seal) {
        int fd = memfd_create("t", MFD_CLOEXEC | MFD_ALLOW_SEALING);
        assert_true(fd >= 0);
        assert_int_equal(write(fd, b->b, b->n), (ssize_t) b->n);
        if (seal)
                assert_int_equal(fcntl(fd, F_ADD_SEALS,
                                       F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_SEAL),
                                 0);
        return fd;
}

/* the read end of a pipe sees EOF once warren-priv closed its copy of the
 * write end (ours is closed here) */
static void closed_there(int p[2]) {
        close(p[1]);
        char ch;
        assert_int_equal(read(p[0], &ch, 1), 0);
        close(p[0]);
}

static bool made(const struct priv_server *s, const char *id) {
        char p[256];
        snprintf(p, sizeof(p), "%s/sandboxes/%s", s->state, id);
        struct stat st;
        return lstat(p, &st) == 0;
}

static void test_server(void **state) {
        (void) state;
        if (geteuid() != 0)
                skip();
        struct priv_server s;
        server_start(&s);
        static struct blob b;
        struct priv_sandbox_cfg c;
        struct priv_reply rep;
        struct wr_err e = {0};
        uint8_t buf[PRIV_MSG_MAX];
        int pipe_fd[2];

        /* an unsealed memfd: refused, nothing made, the bind fd closed */
        good_blob(&b, &c, "layers/sha256/l1");
        int n = priv_sandbox_cfg_encode(1, PRIV_SANDBOX_CREATE, &c, buf, sizeof(buf), &e);
        assert_int_equal(pipe2(pipe_fd, O_CLOEXEC), 0);
        int fds[2] = {memfd_of(&b, false), pipe_fd[1]};
        answer(&s, buf, (size_t) n, fds, 2, &rep);
        assert_int_equal(rep.hdr.type, PRIV_RESULT);
        assert_int_equal(rep.result.err, EACCES);
        assert_non_null(strstr(rep.result.msg, "sealed"));
        close(fds[0]);
        closed_there(pipe_fd);
        assert_false(made(&s, "sb-1"));

        /* a layer outside layers/ (sealed, so the blob is read): refused */
        good_blob(&b, &c, "sandboxes/sb-victim");
        n = priv_sandbox_cfg_encode(1, PRIV_SANDBOX_PRESTART, &c, buf, sizeof(buf), &e);
        assert_int_equal(pipe2(pipe_fd, O_CLOEXEC), 0);
        fds[0] = memfd_of(&b, true);
        fds[1] = pipe_fd[1];
        answer(&s, buf, (size_t) n, fds, 2, &rep);
        assert_int_equal(rep.result.err, EACCES);
        close(fds[0]);
        closed_there(pipe_fd);
        assert_false(made(&s, "sb-1"));

        /* a symlink on a layer's way is not followed */
        char cmd[256];
        snprintf(cmd, sizeof(cmd), "ln -s ../../outside %s/layers/sha256/evil", s.state);
        assert_int_equal(system(cmd), 0);
        good_blob(&b, &c, "layers/sha256/evil");
        n = priv_sandbox_cfg_encode(1, PRIV_SANDBOX_CREATE, &c, buf, sizeof(buf), &e);
        assert_int_equal(pipe2(pipe_fd, O_CLOEXEC), 0);
        fds[0] = memfd_of(&b, true);
        fds[1] = pipe_fd[1];
        answer(&s, buf, (size_t) n, fds, 2, &rep);
        assert_int_equal(rep.result.err, ELOOP);
        close(fds[0]);
        closed_there(pipe_fd);
        assert_false(made(&s, "sb-1"));

        /* the wrong fd count: refused undecoded, both closed */
        good_blob(&b, &c, "layers/sha256/l1");
        n = priv_sandbox_cfg_encode(1, PRIV_SANDBOX_CREATE, &c, buf, sizeof(buf), &e);
        assert_int_equal(pipe2(pipe_fd, O_CLOEXEC), 0);
        fds[0] = pipe_fd[1];
        answer(&s, buf, (size_t) n, fds, 1, &rep);
        assert_non_null(strstr(rep.result.msg, "refused"));
        closed_there(pipe_fd);

        /* START of a sandbox it did not prestart: ESTALE, nothing made */
        n = priv_sandbox_cfg_encode(1, PRIV_SANDBOX_START, &c, buf, sizeof(buf), &e);
        assert_int_equal(pipe2(pipe_fd, O_CLOEXEC), 0);
        fds[0] = memfd_of(&b, true);
        fds[1] = pipe_fd[1];
        answer(&s, buf, (size_t) n, fds, 2, &rep);
        assert_int_equal(rep.result.err, ESTALE);
        close(fds[0]);
        closed_there(pipe_fd);
        assert_false(made(&s, "sb-1"));

        /* ATTACH of a process that is no sandbox's init: refused by the
         * runtime's check, nothing kept */
        struct priv_target t = {.id = "sb-victim", .pid = (int32_t) getpid(), .start_time = 1};
        n = priv_target_encode(2, PRIV_SANDBOX_ATTACH, &t, buf, sizeof(buf), &e);
        answer(&s, buf, (size_t) n, NULL, 0, &rep);
        assert_int_equal(rep.hdr.type, PRIV_RESULT);
        assert_int_equal(rep.result.err, ESRCH);

        /* DESTROY with an fd: refused, the fd closed, the dir stays */
        struct priv_destroy d = {.t = {.id = "sb-victim"}, .keep_link = 1};
        n = priv_destroy_encode(3, &d, buf, sizeof(buf), &e);
        assert_int_equal(pipe2(pipe_fd, O_CLOEXEC), 0);
        answer(&s, buf, (size_t) n, &pipe_fd[1], 1, &rep);
        assert_non_null(strstr(rep.result.msg, "refused"));
        closed_there(pipe_fd);
        assert_true(made(&s, "sb-victim"));
        /* the control: the same DESTROY without it removes the dir (a
         * sandbox this warren-priv does not hold: cleaned up by id) */
        answer(&s, buf, (size_t) n, NULL, 0, &rep);
        assert_int_equal(rep.hdr.type, PRIV_RESULT);
        assert_int_equal(rep.result.err, 0);
        assert_false(made(&s, "sb-victim"));
        priv_server_stop(&s);
}

int main(int argc, char **argv) {
        if (argc < 2) {
                fprintf(stderr, "usage: test-priv-lifecycle PATH-OF-warren-priv\n");
                return 2;
        }
        priv_bin = argv[1];
        signal(SIGPIPE, SIG_IGN);
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_round_trips),
                cmocka_unit_test(test_refusals),
                cmocka_unit_test(test_blob),
                cmocka_unit_test(test_server),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
