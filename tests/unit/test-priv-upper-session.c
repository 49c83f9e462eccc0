/* SPDX-License-Identifier: Apache-2.0 */
/* src/priv, phase 4b-2 (type 24 UPPER_SESSION, reply 0x99
 * UPPER_SESSION_STARTED, the session's messages both ways, the journal's
 * walk on the wire; docs/privsep.md "Phase 4b-2, the journal through
 * warren-upper, as built"): round trips; hand-written refusals of each
 * field (UPPER_SESSION's fds, target, flags, reserved; STARTED's pid and
 * fd; every session request's magic, kind, fds, path rules, padding,
 * mode, ids, fields its kind does not use; every answer's; the walk's
 * header, types, modes, paths, links, order, trailing bytes); the real
 * warren-priv (argv[1]) refusing an UPPER_SESSION that carries an fd (the
 * fd closed there) and failing one for a target that is not a sandbox's
 * init (no socket handed out); and the real warren-upper (argv[2]) run in
 * session mode as warren-priv runs it, in a user namespace of the test's
 * own, under its seccomp allowlist set to kill on a miss: it walks a tree
 * with the range's 0700 dirs and 0600 files (owners as inside, one OPAQUE
 * question per directory), opens a 0600 file of the range but neither a
 * directory nor a 0600 file of the host's root (EACCES), makes, chowns,
 * writes, links and removes through the root it holds, with the ids
 * mapped into its range on the host, follows no symlink out of that root,
 * and ends the session on a request it cannot decode. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
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
#include <sys/syscall.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <cmocka.h>

#include "priv-harness.h"
#include "test-priv-upper-ns.h"

#include "priv/client.h"
#include "priv/priv-proto.h"
#include "sandbox/journal-tree.h"

static const char *priv_bin, *upper_bin;

#define BASE 310000u

/* ---- UPPER_SESSION / UPPER_SESSION_STARTED ---- */

static void test_session_msgs(void **state) {
        (void) state;
        uint8_t buf[PRIV_MSG_MAX];
        struct priv_req req;
        struct priv_reply rep;
        struct wr_err e = {0};
        struct priv_target t;
        upper_test_target(&t);
        int n = priv_upper_session_encode(5, &t, buf, sizeof(buf), &e);
        assert_true(n > 0);
        assert_int_equal(priv_req_decode(buf, (size_t) n, 0, &req, &e), 0);
        assert_int_equal(req.hdr.type, PRIV_UPPER_SESSION);
        assert_memory_equal(&req.upper_session.t, &t, sizeof(t));
        assert_string_equal(priv_type_name(PRIV_UPPER_SESSION), "UPPER_SESSION");
        assert_int_equal(priv_type_fds(PRIV_UPPER_SESSION), 0);
        assert_int_equal(priv_type_fds(PRIV_UPPER_SESSION_STARTED), 1);
        /* refusals: an fd, sizes, each field */
        priv_refused(buf, (size_t) n, 1, -EPROTO);
        priv_refused(buf, (size_t) n - 1, 0, -EPROTO);
        priv_refused(buf, (size_t) n + 1, 0, -EPROTO);
        upper_test_target_refusals(buf, (size_t) n, 0);
        t.pid = 0;
        assert_int_equal(priv_upper_session_encode(5, &t, buf, sizeof(buf), &e), -EINVAL);

        /* the answer: exactly one fd, a pid > 1, reserved 0 */
        struct priv_upper_started st = {.served = 2, .served_total = 9, .pid = 77};
        n = priv_upper_started_encode(5, &st, buf, sizeof(buf));
        assert_true(n > 0);
        assert_int_equal(priv_reply_decode(buf, (size_t) n, 1, &rep, &e), 0);
        assert_memory_equal(&rep.upper_started, &st, sizeof(st));
        assert_int_equal(priv_reply_decode(buf, (size_t) n, 0, &rep, &e), -EPROTO);
        assert_int_equal(priv_reply_decode(buf, (size_t) n, 2, &rep, &e), -EPROTO);
        priv_refused(buf, (size_t) n, 1, -EPROTO); /* a reply sent as a request */
        st.pid = 1;
        n = priv_upper_started_encode(5, &st, buf, sizeof(buf));
        assert_int_equal(priv_reply_decode(buf, (size_t) n, 1, &rep, &e), -EINVAL);
        st.pid = 77;
        st.reserved = 1;
        n = priv_upper_started_encode(5, &st, buf, sizeof(buf));
        assert_int_equal(priv_reply_decode(buf, (size_t) n, 1, &rep, &e), -EINVAL);
}

/* ---- the session's requests (warren-upper decodes) ---- */

static int op_decode(const struct priv_upper_op *m, size_t n_fds) {
        static struct priv_upper_op out;
        struct wr_err e = {0};
        int r = priv_upper_op_decode(m, sizeof(*m), n_fds, &out, &e);
        if (r < 0)
                assert_true(e.msg[0] != '\0');
        else
                assert_memory_equal(&out, m, sizeof(*m));
        return r;
}

static struct priv_upper_op *op_of(uint32_t kind, const char *path) {
        static struct priv_upper_op m;
        memset(&m, 0, sizeof(m));
        m.magic = PRIV_UPPER_OP_MAGIC;
        m.op = kind;
        snprintf(m.path, sizeof(m.path), "%s", path);
        return &m;
}

static void test_ops(void **state) {
        (void) state;
        struct priv_upper_op *m;
        struct wr_err e = {0};
        /* each kind with its fds */
        assert_int_equal(op_decode(op_of(PRIV_UPPER_OP_WALK, ""), 1), 0);
        assert_int_equal(op_decode(op_of(PRIV_UPPER_OP_OPEN, "a/b"), 0), 0);
        assert_int_equal(op_decode(op_of(PRIV_UPPER_OP_REMOVE, "a"), 0), 0);
        assert_int_equal(op_decode(op_of(PRIV_UPPER_OP_MKDIR, "a"), 0), 0);
        assert_int_equal(op_decode(op_of(PRIV_UPPER_OP_ATTRS, "a"), 0), 0);
        assert_int_equal(op_decode(op_of(PRIV_UPPER_OP_PUT, "a"), 1), 0);
        assert_int_equal(op_decode(op_of(PRIV_UPPER_OP_SYMLINK, "a"), 0), 0);
        /* names of the sandbox: any byte but NUL and '/' */
        assert_int_equal(op_decode(op_of(PRIV_UPPER_OP_OPEN, "a\nb/\x01\xff/...x"), 0), 0);
        /* framing */
        m = op_of(PRIV_UPPER_OP_OPEN, "a");
        struct priv_upper_op out;
        assert_int_equal(priv_upper_op_decode(m, sizeof(*m) - 1, 0, &out, &e), -EPROTO);
        assert_int_equal(priv_upper_op_decode(m, 0, 0, &out, &e), -EPROTO);
        m->magic ^= 1;
        assert_int_equal(op_decode(m, 0), -EPROTO);
        assert_int_equal(op_decode(op_of(0, "a"), 0), -EPROTO);
        assert_int_equal(op_decode(op_of(8, "a"), 0), -EPROTO);
        /* fds: WALK and PUT exactly one, the others none */
        assert_int_equal(op_decode(op_of(PRIV_UPPER_OP_WALK, ""), 0), -EPROTO);
        assert_int_equal(op_decode(op_of(PRIV_UPPER_OP_WALK, ""), 2), -EPROTO);
        assert_int_equal(op_decode(op_of(PRIV_UPPER_OP_PUT, "a"), 0), -EPROTO);
        assert_int_equal(op_decode(op_of(PRIV_UPPER_OP_OPEN, "a"), 1), -EPROTO);
        assert_int_equal(op_decode(op_of(PRIV_UPPER_OP_REMOVE, "a"), 1), -EPROTO);
        /* paths */
        static const char *const bad[] = {"",    "/a",  "a/",   "a//b", ".",     "..",
                                          "./a", "a/.", "../a", "a/..", "a/../b"};
        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
                assert_int_equal(op_decode(op_of(PRIV_UPPER_OP_REMOVE, bad[i]), 0), -EINVAL);
        assert_int_equal(op_decode(op_of(PRIV_UPPER_OP_WALK, "a"), 1), -EINVAL);
        m = op_of(PRIV_UPPER_OP_OPEN, "a");
        m->path[5] = 'x'; /* garbage after the NUL */
        assert_int_equal(op_decode(m, 0), -EINVAL);
        m = op_of(PRIV_UPPER_OP_OPEN, "a");
        memset(m->path, 'a', sizeof(m->path)); /* no NUL */
        assert_int_equal(op_decode(m, 0), -EINVAL);
        /* fields of other kinds, out of range */
        m = op_of(PRIV_UPPER_OP_OPEN, "a");
        strcpy(m->link, "t");
        assert_int_equal(op_decode(m, 0), -EINVAL);
        m = op_of(PRIV_UPPER_OP_SYMLINK, "a");
        strcpy(m->link, "t");
        m->link[4] = 'x';
        assert_int_equal(op_decode(m, 0), -EINVAL);
        m = op_of(PRIV_UPPER_OP_REMOVE, "a");
        m->mode = 0644;
        assert_int_equal(op_decode(m, 0), -EINVAL);
        m = op_of(PRIV_UPPER_OP_SYMLINK, "a");
        m->mode = 0644;
        assert_int_equal(op_decode(m, 0), -EINVAL);
        m = op_of(PRIV_UPPER_OP_ATTRS, "a");
        m->mode = 010000;
        assert_int_equal(op_decode(m, 0), -EINVAL);
        m = op_of(PRIV_UPPER_OP_OPEN, "a");
        m->uid = 1;
        assert_int_equal(op_decode(m, 0), -EINVAL);
        m = op_of(PRIV_UPPER_OP_ATTRS, "a");
        m->uid = 65536;
        assert_int_equal(op_decode(m, 0), -EINVAL);
        m = op_of(PRIV_UPPER_OP_ATTRS, "a");
        m->gid = 65536;
        assert_int_equal(op_decode(m, 0), -EINVAL);
        m = op_of(PRIV_UPPER_OP_ATTRS, "a");
        m->uid = m->gid = 65535;
        m->mode = 07777;
        assert_int_equal(op_decode(m, 0), 0);
        m->mtime_ns = 1;
        assert_int_equal(op_decode(m, 0), -EINVAL);
        m = op_of(PRIV_UPPER_OP_PUT, "a");
        m->mtime_ns = -1;
        assert_int_equal(op_decode(m, 1), -EINVAL);
        m = op_of(PRIV_UPPER_OP_PUT, "a");
        m->reserved = 1;
        assert_int_equal(op_decode(m, 1), -EINVAL);
        /* the encoder refuses what the decoder would */
        struct priv_upper_op enc;
        m = op_of(PRIV_UPPER_OP_REMOVE, "../x");
        assert_int_equal(priv_upper_op_encode(m, &enc, &e), -EINVAL);
        m = op_of(PRIV_UPPER_OP_MKDIR, "x");
        m->uid = 70000;
        assert_int_equal(priv_upper_op_encode(m, &enc, &e), -EINVAL);
        m = op_of(PRIV_UPPER_OP_MKDIR, "x");
        m->uid = 5;
        m->magic = 0; /* the encoder sets it */
        assert_int_equal(priv_upper_op_encode(m, &enc, &e), 0);
        assert_int_equal(enc.magic, PRIV_UPPER_OP_MAGIC);
}

/* ---- the answers (warrend decodes) ---- */

static int reply_decode(const struct priv_upper_reply *a, size_t len, size_t n_fds) {
        struct priv_upper_reply out;
        struct wr_err e = {0};
        int r = priv_upper_reply_decode(a, len, n_fds, &out, &e);
        if (r < 0)
                assert_true(e.msg[0] != '\0');
        return r;
}

static void test_replies(void **state) {
        (void) state;
        struct priv_upper_reply d = {.magic = PRIV_UPPER_REPLY_MAGIC, .kind = PRIV_UPPER_R_DONE};
        struct priv_upper_reply w = {
                .magic = PRIV_UPPER_REPLY_MAGIC, .kind = PRIV_UPPER_R_WALKED, .len = 88, .n = 1};
        struct priv_upper_reply o = {.magic = PRIV_UPPER_REPLY_MAGIC, .kind = PRIV_UPPER_R_OPENED};
        struct priv_upper_reply m;
        assert_int_equal(reply_decode(&d, sizeof(d), 0), 0);
        assert_int_equal(reply_decode(&w, sizeof(w), 0), 0);
        assert_int_equal(reply_decode(&o, sizeof(o), 1), 0);
        /* framing and fds */
        assert_int_equal(reply_decode(&d, sizeof(d) - 1, 0), -EPROTO);
        m = d;
        m.magic = PRIV_UPPER_MAGIC;
        assert_int_equal(reply_decode(&m, sizeof(m), 0), -EPROTO);
        m = d;
        m.kind = 4;
        assert_int_equal(reply_decode(&m, sizeof(m), 0), -EPROTO);
        m.kind = 0;
        assert_int_equal(reply_decode(&m, sizeof(m), 0), -EPROTO);
        assert_int_equal(reply_decode(&d, sizeof(d), 1), -EPROTO);
        assert_int_equal(reply_decode(&w, sizeof(w), 1), -EPROTO);
        assert_int_equal(reply_decode(&o, sizeof(o), 0), -EPROTO);
        assert_int_equal(reply_decode(&o, sizeof(o), 2), -EPROTO);
        /* errors: DONE only, 1..4095, with a NUL-padded message */
        m = d;
        m.err = EACCES;
        strcpy(m.msg, "denied");
        assert_int_equal(reply_decode(&m, sizeof(m), 0), 0);
        m.msg[10] = 'x';
        assert_int_equal(reply_decode(&m, sizeof(m), 0), -EINVAL);
        m.msg[10] = 0;
        m.err = 4096;
        assert_int_equal(reply_decode(&m, sizeof(m), 0), -EINVAL);
        m.err = -1;
        assert_int_equal(reply_decode(&m, sizeof(m), 0), -EINVAL);
        m = d;
        strcpy(m.msg, "no error"); /* a message without an error */
        assert_int_equal(reply_decode(&m, sizeof(m), 0), -EINVAL);
        m = o;
        m.err = EIO;
        assert_int_equal(reply_decode(&m, sizeof(m), 1), -EINVAL);
        /* WALKED's fields; on the others zero */
        m = w;
        m.truncated = 2;
        assert_int_equal(reply_decode(&m, sizeof(m), 0), -EINVAL);
        m = w;
        m.len = PRIV_UPPER_WALK_MAX + 1;
        assert_int_equal(reply_decode(&m, sizeof(m), 0), -EINVAL);
        m = w;
        m.n = m.len + 1;
        assert_int_equal(reply_decode(&m, sizeof(m), 0), -EINVAL);
        m = d;
        m.len = 1;
        assert_int_equal(reply_decode(&m, sizeof(m), 0), -EINVAL);
        m = o;
        m.truncated = 1;
        assert_int_equal(reply_decode(&m, sizeof(m), 1), -EINVAL);
}

/* ---- the walk on the wire (warrend decodes) ---- */

static void put_ent(struct jt_tree *t, const char *path, uint8_t type, uint32_t mode,
                    const char *link) {
        t->v = realloc(t->v, (t->n + 1) * sizeof(*t->v));
        assert_non_null(t->v);
        t->v[t->n++] = (struct jt_ent){.path = strdup(path),
                                       .type = type,
                                       .mode = mode,
                                       .uid = 7,
                                       .gid = 8,
                                       .dev = 1,
                                       .ino = t->n + 10,
                                       .size = 3,
                                       .mtime_ns = 5,
                                       .ctime_ns = 6,
                                       .link = link ? strdup(link) : NULL};
        t->cap = t->n;
}

static int tree_decode(const uint8_t *b, size_t len) {
        struct jt_tree t = {0};
        struct wr_err e = {0};
        int r = jt_tree_decode(b, len, 100, &t, &e);
        if (r < 0) {
                assert_true(e.msg[0] != '\0');
                assert_int_equal(t.n, 0);
                assert_null(t.v);
        }
        jt_tree_free(&t);
        return r;
}

static void test_tree_wire(void **state) {
        (void) state;
        struct jt_tree t = {0};
        put_ent(&t, "a", JT_DIR, S_IFDIR | 0700, NULL);
        t.v[0].opaque = true;
        put_ent(&t, "a/f", JT_FILE, S_IFREG | 0600, NULL);
        put_ent(&t, "a/l", JT_LINK, S_IFLNK | 0777, "/etc/x");
        put_ent(&t, "a/w", JT_WHITEOUT, S_IFCHR, NULL);
        put_ent(&t, "b\n", JT_OTHER, S_IFIFO | 0644, NULL);
        t.truncated = true;
        uint8_t *b = NULL;
        size_t len = 0;
        assert_int_equal(jt_tree_encode(&t, &b, &len), 0);
        /* round trip, byte for byte */
        struct jt_tree d = {0};
        struct wr_err e = {0};
        assert_int_equal(jt_tree_decode(b, len, 100, &d, &e), 0);
        assert_int_equal(d.n, 5);
        assert_true(d.truncated);
        for (size_t i = 0; i < d.n; i++) {
                assert_string_equal(d.v[i].path, t.v[i].path);
                assert_int_equal(d.v[i].type, t.v[i].type);
                assert_int_equal(d.v[i].mode, t.v[i].mode);
                assert_int_equal(d.v[i].ino, t.v[i].ino);
                assert_int_equal(d.v[i].opaque, t.v[i].opaque);
        }
        assert_string_equal(d.v[2].link, "/etc/x");
        uint8_t *b2 = NULL;
        size_t len2 = 0;
        assert_int_equal(jt_tree_encode(&d, &b2, &len2), 0);
        assert_int_equal(len2, len);
        assert_memory_equal(b2, b, len);
        free(b2);
        jt_tree_free(&d);
        /* more entries than allowed */
        assert_int_equal(jt_tree_decode(b, len, 4, &d, &e), -EPROTO);
        /* refusals, one byte at a time (offsets: header 24, entry 64) */
        uint8_t *c = malloc(len + 1);
        assert_non_null(c);
#define BAD(off, val, code)                                                                        \
        do {                                                                                       \
                memcpy(c, b, len);                                                                 \
                c[off] = (uint8_t) (val);                                                          \
                assert_int_equal(tree_decode(c, len), code);                                       \
        } while (0)
        BAD(0, 'X', -EPROTO);           /* magic */
        BAD(4, 2, -EPROTO);             /* version */
        BAD(8, 200, -EPROTO);           /* n beyond the bytes */
        BAD(16, 2, -EPROTO);            /* truncated 0/1 */
        BAD(20, 1, -EPROTO);            /* reserved */
        BAD(24 + 0, 0, -EINVAL);        /* type ABSENT */
        BAD(24 + 0, 6, -EINVAL);        /* unknown type */
        BAD(24 + 0, JT_FILE, -EINVAL);  /* a dir's mode on a file */
        BAD(24 + 1, 2, -EINVAL);        /* opaque 0/1 */
        BAD(24 + 6, 1, -EINVAL);        /* reserved */
        BAD(24 + 20, 1, -EINVAL);       /* reserved */
        BAD(24 + 14, 1, -EINVAL);       /* uid 65536 + 7 */
        BAD(24 + 64 + 1, 0, -EINVAL);   /* the first entry's path "a" -> NUL */
        BAD(24 + 64 + 1, '/', -EINVAL); /* "/" */
        BAD(24 + 64 + 1, 'c', -EINVAL); /* "c" then "a/f": out of order */
        /* the second entry (a file at 24+65): opaque on a non-directory */
        BAD(24 + 65 + 1, 1, -EINVAL);
#undef BAD
        /* paths: "..", "." and empty components */
        struct jt_tree p = {0};
        static const char *const badp[] = {"..", "a/..", "a/./b", "a//b", "a/", "/a", "."};
        for (size_t i = 0; i < sizeof(badp) / sizeof(badp[0]); i++) {
                put_ent(&p, badp[i], JT_FILE, S_IFREG | 0644, NULL);
                uint8_t *pb = NULL;
                size_t pl = 0;
                int r = jt_tree_encode(&p, &pb, &pl);
                if (r == 0) {
                        assert_int_equal(tree_decode(pb, pl), -EINVAL);
                        free(pb);
                }
                jt_tree_free(&p);
        }
        /* a link on a file; a link with a NUL */
        put_ent(&p, "f", JT_FILE, S_IFREG | 0644, "x");
        uint8_t *pb = NULL;
        size_t pl = 0;
        assert_int_equal(jt_tree_encode(&p, &pb, &pl), 0);
        assert_int_equal(tree_decode(pb, pl), -EINVAL);
        free(pb);
        jt_tree_free(&p);
        put_ent(&p, "l", JT_LINK, S_IFLNK | 0777, "xy");
        assert_int_equal(jt_tree_encode(&p, &pb, &pl), 0);
        pb[pl - 1] = 0;
        assert_int_equal(tree_decode(pb, pl), -EINVAL);
        free(pb);
        jt_tree_free(&p);
        /* the same path twice */
        put_ent(&p, "x", JT_FILE, S_IFREG | 0644, NULL);
        put_ent(&p, "x", JT_FILE, S_IFREG | 0644, NULL);
        assert_int_equal(jt_tree_encode(&p, &pb, &pl), 0);
        assert_int_equal(tree_decode(pb, pl), -EINVAL);
        free(pb);
        jt_tree_free(&p);
        /* short, long */
        assert_int_equal(tree_decode(b, len - 1), -EPROTO);
        memcpy(c, b, len);
        c[len] = 0;
        assert_int_equal(tree_decode(c, len + 1), -EPROTO);
        assert_int_equal(tree_decode(b, 10), -EPROTO);
        free(c);
        free(b);
        jt_tree_free(&t);
}

/* ---- the real warren-priv ---- */

static void test_server(void **state) {
        (void) state;
        struct priv_server s;
        priv_server_start(&s, priv_bin, "wr-priv-us", "/bin/true");
        priv_sh("mkdir -p %s/state/sandboxes/sb-1/upper", s.dir);
        uint8_t buf[PRIV_MSG_MAX];
        struct priv_reply rep;
        struct wr_err e = {0};
        struct priv_target t;
        upper_test_target(&t);
        int n = priv_upper_session_encode(1, &t, buf, sizeof(buf), &e);
        /* an fd where none belongs: refused undecoded, the fd closed */
        int p[2];
        assert_int_equal(pipe2(p, O_CLOEXEC), 0);
        priv_server_answer(&s, buf, (size_t) n, &p[1], 1, &rep, NULL, NULL);
        assert_int_equal(rep.hdr.type, PRIV_RESULT);
        assert_int_equal(rep.result.err, EPROTO);
        assert_int_equal(rep.result.refused, 1);
        close(p[1]);
        char ch;
        assert_int_equal(read(p[0], &ch, 1), 0);
        close(p[0]);
        /* a target that is no sandbox's init: failed, no socket */
        t.pid = (int32_t) getpid();
        t.start_time = upper_test_start_time(getpid());
        n = priv_upper_session_encode(2, &t, buf, sizeof(buf), &e);
        int rfds[PRIV_FDS_MAX];
        size_t n_rfds = 0;
        priv_server_answer(&s, buf, (size_t) n, NULL, 0, &rep, rfds, &n_rfds);
        assert_int_equal(rep.hdr.type, PRIV_RESULT);
        assert_true(rep.result.err != 0);
        assert_int_equal(rep.result.served, 1);
        assert_int_equal(n_rfds, 0);
        priv_server_stop(&s);
}

/* ---- the real warren-upper in session mode ---- */

struct asker {
        int sock;
        unsigned queries, non_dirs;
};

/* warren-priv's part: answer OPAQUE questions until warren-upper closes
 * (opaque: a directory named "op"). */
static void *ask_thread(void *arg) {
        struct asker *a = arg;
        for (;;) {
                uint8_t buf[sizeof(struct priv_upper_msg) + 1];
                int fds[PRIV_FDS_MAX];
                size_t n_fds = 0;
                long n = priv_recv(a->sock, buf, sizeof(buf), fds, &n_fds, 0);
                if (n <= 0)
                        return NULL;
                struct priv_upper_msg m;
                struct wr_err e = {0};
                if (priv_upper_msg_decode(buf, (size_t) n, n_fds, &m, &e) < 0 ||
                    m.kind != PRIV_UPPER_Q_OPAQUE) {
                        priv_close_fds(fds, n_fds);
                        a->non_dirs += 1000;
                        return NULL;
                }
                a->queries++;
                struct stat st;
                a->non_dirs += fstat(fds[0], &st) < 0 || !S_ISDIR(st.st_mode);
                char v[2];
                unsigned char y = fgetxattr(fds[0], "trusted.overlay.opaque", v, sizeof(v)) == 1 &&
                                  v[0] == 'y';
                close(fds[0]);
                if (send(a->sock, &y, 1, MSG_NOSIGNAL) != 1)
                        return NULL;
        }
}

struct session {
        pid_t pid;
        int sock; /* warrend's end */
        struct asker asker;
        pthread_t th;
};

static void session_start(struct session *s, int upper, int pidfd, int root) {
        int q[2], w[2];
        assert_int_equal(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, q), 0);
        assert_int_equal(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, w), 0);
        s->pid = fork();
        assert_true(s->pid >= 0);
        if (s->pid == 0) {
                int fds[5] = {upper, pidfd, root, q[1], w[1]}, high[5];
                for (int i = 0; i < 5; i++)
                        high[i] = fcntl(fds[i], F_DUPFD, 20);
                for (int i = 0; i < 5; i++)
                        dup2(high[i], 3 + i);
                execl(upper_bin, "warren-upper", "session", (char *) NULL);
                _exit(127);
        }
        close(q[1]);
        close(w[1]);
        s->sock = w[0];
        s->asker = (struct asker){.sock = q[0]};
        assert_int_equal(pthread_create(&s->th, NULL, ask_thread, &s->asker), 0);
}

/* End it (our end closed, or it ended itself): its exit status. */
static int session_end(struct session *s) {
        close(s->sock);
        int status;
        assert_int_equal(waitpid(s->pid, &status, 0), s->pid);
        pthread_join(s->th, NULL);
        close(s->asker.sock);
        if (!WIFEXITED(status))
                fprintf(stderr, "warren-upper: status 0x%x\n", status);
        assert_true(WIFEXITED(status)); /* not killed by its seccomp filter */
        return WEXITSTATUS(status);
}

static int call(struct session *s, uint32_t kind, const char *path, uint32_t mode, uint32_t id,
                const char *link, int fd, int *ret_fd, struct priv_upper_reply *rep) {
        struct priv_upper_op op = {.op = kind, .mode = mode, .uid = id, .gid = id};
        snprintf(op.path, sizeof(op.path), "%s", path);
        if (link)
                snprintf(op.link, sizeof(op.link), "%s", link);
        if (kind == PRIV_UPPER_OP_PUT)
                op.mtime_ns = 1234567890123456789ll;
        struct wr_err e = {0};
        struct priv_upper_reply r;
        int ret = priv_upper_call(s->sock, &op, fd, 10000, rep ? rep : &r, ret_fd, &e);
        if (ret < 0 && ret != -ENOENT && ret != -EACCES && ret != -EINVAL && ret != -ELOOP)
                fprintf(stderr, "session %u %s: %s\n", kind, path, e.msg);
        return ret;
}

static void owner_is(const char *path, uint32_t id, uint32_t mode) {
        struct stat st;
        assert_int_equal(lstat(path, &st), 0);
        assert_int_equal(st.st_uid, BASE + id);
        assert_int_equal(st.st_gid, BASE + id);
        if (mode)
                assert_int_equal(st.st_mode & 07777, mode);
}

static void test_upper_session(void **state) {
        (void) state;
        char dir[] = "/tmp/wr-upses.XXXXXX";
        assert_non_null(mkdtemp(dir));
        /* upper: the range's root owns the top, user 1234 a 0700 dir with
         * a 0600 file, an opaque dir "op", a 0600 file of the host's root;
         * root (the sandbox's root as init sees it): the range's, with a
         * symlink leading out of it */
        priv_sh("set -e; cd %s; mkdir -p up/bob up/op root/w outside; echo b > up/bob/f; "
                "echo top > up/t; echo secret > up/host; chmod 600 up/bob/f up/t up/host; "
                "chmod 700 up/bob; chown -R %u:%u up root; chown -R %u:%u up/bob; "
                "chown 0:0 up/host; ln -s %s/outside root/esc",
                dir, BASE, BASE, BASE + 1234, BASE + 1234, dir);
        char p[256];
        snprintf(p, sizeof(p), "%s/up/op", dir);
        bool xattrs = setxattr(p, "trusted.overlay.opaque", "y", 1, 0) == 0;
        int pidfd;
        pid_t child = upper_test_userns_child(BASE, &pidfd);
        snprintf(p, sizeof(p), "%s/up", dir);
        int upper = open(p, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        snprintf(p, sizeof(p), "%s/root", dir);
        int root = open(p, O_PATH | O_DIRECTORY | O_CLOEXEC);
        assert_true(upper >= 0 && root >= 0);

        struct session s;
        session_start(&s, upper, pidfd, root);
        /* WALK: owners as inside, one question per directory */
        int mfd = memfd_create("walk", MFD_CLOEXEC);
        struct priv_upper_reply rep;
        assert_int_equal(call(&s, PRIV_UPPER_OP_WALK, "", 0, 0, NULL, mfd, NULL, &rep), 0);
        assert_int_equal(rep.kind, PRIV_UPPER_R_WALKED);
        uint8_t *wb = malloc(rep.len);
        assert_int_equal(pread(mfd, wb, rep.len, 0), (ssize_t) rep.len);
        struct jt_tree t = {0};
        struct wr_err e = {0};
        assert_int_equal(jt_tree_decode(wb, rep.len, JT_WALK_MAX, &t, &e), 0);
        free(wb);
        close(mfd);
        assert_int_equal(t.n, rep.n);
        const struct jt_ent *x = jt_find(&t, "bob");
        assert_non_null(x);
        assert_int_equal(x->uid, 1234);
        assert_int_equal(x->mode, S_IFDIR | 0700);
        assert_non_null(x = jt_find(&t, "bob/f"));
        assert_int_equal(x->uid, 1234);
        assert_non_null(x = jt_find(&t, "t"));
        assert_int_equal(x->uid, 0);
        assert_non_null(x = jt_find(&t, "host"));
        assert_int_equal(x->uid, 65534); /* not of the range: the overflow id */
        if (xattrs)
                assert_true(jt_find(&t, "op")->opaque);
        assert_false(jt_find(&t, "bob")->opaque);
        jt_tree_free(&t);
        assert_int_equal(s.asker.queries, 2); /* bob, op */
        assert_int_equal(s.asker.non_dirs, 0);

        /* OPEN: the range's 0600 file; not a dir, not the host's */
        int fd = -1;
        assert_int_equal(call(&s, PRIV_UPPER_OP_OPEN, "bob/f", 0, 0, NULL, -1, &fd, &rep), 0);
        char bytes[8] = {0};
        assert_int_equal(read(fd, bytes, sizeof(bytes)), 2);
        assert_string_equal(bytes, "b\n");
        assert_int_equal(fcntl(fd, F_GETFL) & O_ACCMODE, O_RDONLY);
        close(fd);
        assert_int_equal(call(&s, PRIV_UPPER_OP_OPEN, "bob", 0, 0, NULL, -1, &fd, NULL), -EINVAL);
        assert_int_equal(call(&s, PRIV_UPPER_OP_OPEN, "host", 0, 0, NULL, -1, &fd, NULL), -EACCES);
        assert_int_equal(call(&s, PRIV_UPPER_OP_OPEN, "nope", 0, 0, NULL, -1, &fd, NULL), -ENOENT);

        /* the writes, through the root, ids mapped into the range */
        assert_int_equal(call(&s, PRIV_UPPER_OP_MKDIR, "w/d", 0750, 5, NULL, -1, NULL, NULL), 0);
        snprintf(p, sizeof(p), "%s/root/w/d", dir);
        owner_is(p, 5, 0750);
        char src[256];
        snprintf(src, sizeof(src), "%s/src", dir);
        priv_sh("printf data > %s", src);
        int sfd = open(src, O_RDONLY | O_CLOEXEC);
        assert_int_equal(call(&s, PRIV_UPPER_OP_PUT, "w/file", 0640, 7, NULL, sfd, NULL, NULL), 0);
        close(sfd);
        snprintf(p, sizeof(p), "%s/root/w/file", dir);
        owner_is(p, 7, 0640);
        struct stat st;
        assert_int_equal(stat(p, &st), 0);
        assert_int_equal(st.st_size, 4);
        assert_int_equal(st.st_mtim.tv_sec, 1234567890);
        assert_int_equal(st.st_mtim.tv_nsec, 123456789);
        assert_int_equal(call(&s, PRIV_UPPER_OP_ATTRS, "w/file", 0600, 9, NULL, -1, NULL, NULL), 0);
        owner_is(p, 9, 0600);
        assert_int_equal(call(&s, PRIV_UPPER_OP_SYMLINK, "w/l", 0, 8, "/target", -1, NULL, NULL),
                         0);
        snprintf(p, sizeof(p), "%s/root/w/l", dir);
        owner_is(p, 8, 0);
        char target[64] = {0};
        assert_int_equal(readlink(p, target, sizeof(target) - 1), 7);
        assert_string_equal(target, "/target");
        assert_int_equal(call(&s, PRIV_UPPER_OP_REMOVE, "w/d", 0, 0, NULL, -1, NULL, NULL), 0);
        snprintf(p, sizeof(p), "%s/root/w/d", dir);
        assert_int_equal(access(p, F_OK), -1);
        /* a missing parent: nothing to remove */
        assert_int_equal(call(&s, PRIV_UPPER_OP_REMOVE, "gone/x", 0, 0, NULL, -1, NULL, NULL), 0);
        /* no symlink followed out of the root */
        assert_int_equal(call(&s, PRIV_UPPER_OP_MKDIR, "esc/x", 0755, 0, NULL, -1, NULL, NULL),
                         -ELOOP);
        snprintf(p, sizeof(p), "%s/outside/x", dir);
        assert_int_equal(access(p, F_OK), -1);
        assert_int_equal(session_end(&s), 0); /* our end closed: a clean exit */

        /* a request it cannot decode ends the session: answered EPROTO */
        session_start(&s, upper, pidfd, root);
        static struct priv_upper_op bad;
        memset(&bad, 0, sizeof(bad));
        bad.magic = PRIV_UPPER_OP_MAGIC;
        bad.op = PRIV_UPPER_OP_REMOVE;
        strcpy(bad.path, "../x");
        assert_int_equal(priv_send(s.sock, &bad, sizeof(bad), NULL, 0, MSG_NOSIGNAL), 0);
        uint8_t rb[sizeof(struct priv_upper_reply) + 1];
        int rf[PRIV_FDS_MAX];
        size_t nrf = 0;
        long n = priv_recv(s.sock, rb, sizeof(rb), rf, &nrf, 0);
        assert_int_equal(priv_upper_reply_decode(rb, (size_t) n, nrf, &rep, &e), 0);
        assert_int_equal(rep.err, EPROTO);
        assert_non_null(strstr(rep.msg, "refused"));
        assert_int_equal(priv_recv(s.sock, rb, sizeof(rb), rf, &nrf, 0), 0); /* it exited */
        assert_int_equal(session_end(&s), 1);

        /* a pidfd of a host process: no session (--userns=off) */
        int self = (int) syscall(SYS_pidfd_open, getpid(), 0);
        session_start(&s, upper, self, root);
        mfd = memfd_create("walk", MFD_CLOEXEC);
        e = (struct wr_err){0};
        struct priv_upper_op op = {.op = PRIV_UPPER_OP_WALK};
        assert_int_equal(priv_upper_call(s.sock, &op, mfd, 10000, &rep, NULL, &e), -EPERM);
        assert_non_null(strstr(e.msg, "--userns=off"));
        close(mfd);
        assert_int_equal(session_end(&s), 1);
        close(self);

        close(upper);
        close(root);
        close(pidfd);
        kill(child, SIGKILL);
        waitpid(child, NULL, 0);
        priv_sh("rm -rf %s", dir);
}

int main(int argc, char **argv) {
        if (argc < 3) {
                fprintf(stderr, "usage: test-priv-upper-session PATH-OF-warren-priv "
                                "PATH-OF-warren-upper\n");
                return 2;
        }
        priv_bin = argv[1];
        upper_bin = argv[2];
        signal(SIGPIPE, SIG_IGN);
        /* warren-upper's seccomp list kills on a miss: proves it complete
         * for the journal's walk, opens and writes done here */
        setenv("WARREN_UPPER_SECCOMP_KILL", "1", 1);
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_session_msgs), cmocka_unit_test(test_ops),
                cmocka_unit_test(test_replies),      cmocka_unit_test(test_tree_wire),
                cmocka_unit_test(test_server),       cmocka_unit_test(test_upper_session),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
