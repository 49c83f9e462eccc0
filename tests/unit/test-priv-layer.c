/* SPDX-License-Identifier: Apache-2.0 */
/* src/priv, phase 5: layer storage (LAYER_COMMIT 25, LAYER_REMOVE 26;
 * docs/privsep.md "Phase 5, layers, as built"): round trips; hand-written
 * refusals of the pure decoder and the encoders (path traversal, slashes,
 * wrong lengths, non-hex and upper-case digits, names without their NUL or
 * with bytes after it, flags, reserved fields, an unknown dir, fds where
 * none belong, short datagrams); then the real warren-priv (argv[1]): a
 * root-owned tree committed (moved, then "there already"), trees holding
 * /root/.ssh (directly and through a symlink) refused with nothing moved,
 * a deep tree and a committed layer removed (never visible half-removed),
 * and a staging entry that is a symlink, layers/tmp and layers/sha256
 * replaced by symlinks, names with ".." and an fd sent along all refused
 * with nothing outside the state dir touched and every fd closed. */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "priv-harness.h"

#include "priv/priv-proto.h"

static const char *priv_bin;

#define TMP1 "unpack-0123456789abcdef"
#define TMP2 "del-fedcba9876543210"
#define HEX1 "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
#define HEX2 "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"

static void test_round_trips(void **state) {
        (void) state;
        uint8_t buf[PRIV_MSG_MAX];
        struct priv_req req;
        struct wr_err e = {0};
        int n = priv_layer_commit_encode(7, TMP1, HEX1, buf, sizeof(buf), &e);
        assert_true(n > 0);
        assert_int_equal(priv_req_decode(buf, (size_t) n, 0, &req, &e), 0);
        assert_int_equal(req.hdr.type, PRIV_LAYER_COMMIT);
        assert_int_equal(req.hdr.id, 7);
        assert_string_equal(req.layer_commit.tmp, TMP1);
        assert_string_equal(req.layer_commit.hex, HEX1);
        assert_string_equal(priv_type_name(PRIV_LAYER_COMMIT), "LAYER_COMMIT");
        assert_string_equal(priv_type_name(PRIV_LAYER_REMOVE), "LAYER_REMOVE");
        assert_int_equal(priv_type_fds(PRIV_LAYER_COMMIT), 0);
        assert_int_equal(priv_type_fds(PRIV_LAYER_REMOVE), 0);
        n = priv_layer_remove_encode(8, PRIV_LAYER_DIR_TMP, TMP2, buf, sizeof(buf), &e);
        assert_true(n > 0);
        assert_int_equal(priv_req_decode(buf, (size_t) n, 0, &req, &e), 0);
        assert_int_equal(req.layer_remove.dir, PRIV_LAYER_DIR_TMP);
        assert_string_equal(req.layer_remove.name, TMP2);
        n = priv_layer_remove_encode(9, PRIV_LAYER_DIR_SHA256, HEX2, buf, sizeof(buf), &e);
        assert_true(n > 0);
        assert_int_equal(priv_req_decode(buf, (size_t) n, 0, &req, &e), 0);
        assert_int_equal(req.layer_remove.dir, PRIV_LAYER_DIR_SHA256);
        assert_true(priv_layer_tmp_name_ok(TMP1) && priv_layer_tmp_name_ok(TMP2));
        assert_true(priv_layer_hex_ok(HEX1));
        assert_int_equal(PRIV_VERSION, 4);
}

/* a LAYER_COMMIT datagram with every field set by hand (no encoder check):
 * tmp and hex copied as raw bytes of their given lengths */
static size_t raw_commit(uint8_t *buf, const char *tmp, size_t tl, const char *hex, size_t hl,
                         uint32_t flags, uint32_t reserved) {
        struct priv_hdr h = {
                .magic = PRIV_MAGIC, .type = PRIV_LAYER_COMMIT, .len = sizeof(struct priv_layer_commit)};
        struct priv_layer_commit c;
        memset(&c, 0, sizeof(c));
        memcpy(c.tmp, tmp, tl);
        memcpy(c.hex, hex, hl);
        c.flags = flags;
        c.reserved = reserved;
        memcpy(buf, &h, sizeof(h));
        memcpy(buf + sizeof(h), &c, sizeof(c));
        return sizeof(h) + sizeof(c);
}

static size_t commit_of(uint8_t *buf, const char *tmp, const char *hex) {
        return raw_commit(buf, tmp, strlen(tmp), hex, strlen(hex), 0, 0);
}

static size_t raw_remove(uint8_t *buf, uint32_t dir, const char *name, size_t nl,
                         uint32_t reserved) {
        struct priv_hdr h = {
                .magic = PRIV_MAGIC, .type = PRIV_LAYER_REMOVE, .len = sizeof(struct priv_layer_remove)};
        struct priv_layer_remove m;
        memset(&m, 0, sizeof(m));
        m.dir = dir;
        m.reserved = reserved;
        memcpy(m.name, name, nl);
        memcpy(buf, &h, sizeof(h));
        memcpy(buf + sizeof(h), &m, sizeof(m));
        return sizeof(h) + sizeof(m);
}

static size_t remove_of(uint8_t *buf, uint32_t dir, const char *name) {
        return raw_remove(buf, dir, name, strlen(name), 0);
}

static const char *const bad_tmp[] = {
        "",
        "..",
        ".",
        "../" TMP1,
        TMP1 "/..",
        "unpack-0123456789abcde/",
        "unpack-../../../../etc",
        "a/b",
        "/" TMP1,
        "unpack-0123456789ABCDEF", /* upper case */
        "unpack-0123456789abcde",  /* 15 digits */
        "unpack-0123456789abcdef0", /* 17 */
        "unpack-0123456789abcdeg",  /* not hex */
        "unpack0123456789abcdef",
        "layer-0123456789abcdef",
        "UNPACK-0123456789abcdef",
        "del-0123456789abcdef\n",
        "sha256:" HEX1,
        HEX1,
};

static const char *const bad_hex[] = {
        "",
        "..",
        "../" HEX1,
        "sha256:" HEX1,
        "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcde",   /* 63 */
        "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef0", /* 65 */
        "0123456789ABCDEF0123456789abcdef0123456789abcdef0123456789abcdef",  /* upper */
        "0123456789abcdeg0123456789abcdef0123456789abcdef0123456789abcdef",  /* g */
        "0123456789abcdef0123456789abcdef/123456789abcdef0123456789abcdef",  /* slash */
        "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcd..",
        TMP1,
};

static void test_refusals(void **state) {
        (void) state;
        uint8_t buf[PRIV_MSG_MAX];
        struct wr_err e = {0};
        /* the control */
        struct priv_req req;
        assert_int_equal(priv_req_decode(buf, commit_of(buf, TMP1, HEX1), 0, &req, &e), 0);
        for (size_t i = 0; i < ELEMENTSOF(bad_tmp); i++) {
                priv_refused(buf, commit_of(buf, bad_tmp[i], HEX1), 0, -EACCES);
                priv_refused(buf, remove_of(buf, PRIV_LAYER_DIR_TMP, bad_tmp[i]), 0, -EACCES);
                assert_false(priv_layer_tmp_name_ok(bad_tmp[i]));
                assert_true(priv_layer_commit_encode(1, bad_tmp[i], HEX1, buf, sizeof(buf), &e) <
                            0);
                assert_true(priv_layer_remove_encode(1, PRIV_LAYER_DIR_TMP, bad_tmp[i], buf,
                                                     sizeof(buf), &e) < 0);
        }
        for (size_t i = 0; i < ELEMENTSOF(bad_hex); i++) {
                priv_refused(buf, commit_of(buf, TMP1, bad_hex[i]), 0, -EACCES);
                priv_refused(buf, remove_of(buf, PRIV_LAYER_DIR_SHA256, bad_hex[i]), 0, -EACCES);
                assert_false(priv_layer_hex_ok(bad_hex[i]));
                assert_true(priv_layer_commit_encode(1, TMP1, bad_hex[i], buf, sizeof(buf), &e) <
                            0);
                assert_true(priv_layer_remove_encode(1, PRIV_LAYER_DIR_SHA256, bad_hex[i], buf,
                                                     sizeof(buf), &e) < 0);
        }
        /* a name in the other dir's form */
        priv_refused(buf, remove_of(buf, PRIV_LAYER_DIR_TMP, HEX1), 0, -EACCES);
        priv_refused(buf, remove_of(buf, PRIV_LAYER_DIR_SHA256, TMP1), 0, -EACCES);
        /* no NUL in the field (every byte set), garbage after the NUL */
        char full[PRIV_LAYER_NAME_MAX];
        memset(full, 'a', sizeof(full));
        priv_refused(buf, raw_commit(buf, full, sizeof(full), HEX1, 64, 0, 0), 0, -EINVAL);
        priv_refused(buf, raw_commit(buf, TMP1, strlen(TMP1), full, sizeof(full), 0, 0), 0,
                     -EINVAL);
        priv_refused(buf, raw_remove(buf, PRIV_LAYER_DIR_SHA256, full, sizeof(full), 0), 0,
                     -EINVAL);
        priv_refused(buf, raw_commit(buf, TMP1 "\0x", strlen(TMP1) + 2, HEX1, 64, 0, 0), 0,
                     -EINVAL);
        priv_refused(buf, raw_commit(buf, TMP1, strlen(TMP1), HEX1 "\0\0z", 67, 0, 0), 0,
                     -EINVAL);
        priv_refused(buf, raw_remove(buf, PRIV_LAYER_DIR_TMP, TMP1 "\0/..", strlen(TMP1) + 4, 0),
                     0, -EINVAL);
        /* flags, reserved, an unknown dir */
        priv_refused(buf, raw_commit(buf, TMP1, strlen(TMP1), HEX1, 64, 1, 0), 0, -EINVAL);
        priv_refused(buf, raw_commit(buf, TMP1, strlen(TMP1), HEX1, 64, 0, 1), 0, -EINVAL);
        priv_refused(buf, raw_remove(buf, PRIV_LAYER_DIR_TMP, TMP1, strlen(TMP1), 1), 0, -EINVAL);
        priv_refused(buf, remove_of(buf, 0, TMP1), 0, -EINVAL);
        priv_refused(buf, remove_of(buf, 3, HEX1), 0, -EINVAL);
        assert_true(priv_layer_remove_encode(1, 3, HEX1, buf, sizeof(buf), &e) < 0);
        /* fds where none belong; a short or long datagram */
        priv_refused(buf, commit_of(buf, TMP1, HEX1), 1, -EPROTO);
        priv_refused(buf, remove_of(buf, PRIV_LAYER_DIR_TMP, TMP1), 2, -EPROTO);
        priv_refused(buf, commit_of(buf, TMP1, HEX1) - 1, 0, -EPROTO);
        size_t n = remove_of(buf, PRIV_LAYER_DIR_TMP, TMP1);
        buf[n] = 0;
        priv_refused(buf, n + 1, 0, -EPROTO);
        /* a too long name never reaches the wire */
        char longname[PRIV_LAYER_NAME_MAX + 8];
        memset(longname, 'a', sizeof(longname) - 1);
        longname[sizeof(longname) - 1] = 0;
        assert_true(priv_layer_commit_encode(1, TMP1, longname, buf, sizeof(buf), &e) < 0);
        assert_true(priv_layer_remove_encode(1, PRIV_LAYER_DIR_SHA256, longname, buf, sizeof(buf),
                                             &e) < 0);
}

/* ---- the real binary ---- */

/* the answer is a RESULT with err (0: done) and no fd; its value */
static int result(struct priv_server *s, const void *buf, size_t len, const int *fds, size_t n_fds,
                  int err) {
        struct priv_reply rep;
        int rfds[PRIV_FDS_MAX];
        size_t n_rfds = 0;
        priv_server_answer(s, buf, len, fds, n_fds, &rep, rfds, &n_rfds);
        assert_int_equal(n_rfds, 0);
        assert_int_equal(rep.hdr.type, PRIV_RESULT);
        if (rep.result.err != err)
                fail_msg("err %d (want %d): %s", rep.result.err, err, rep.result.msg);
        return rep.result.value;
}

static bool exists(const char *fmt, ...) _printf_(1, 2);
static bool exists(const char *fmt, ...) {
        char p[1024];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(p, sizeof(p), fmt, ap);
        va_end(ap);
        struct stat st;
        return lstat(p, &st) == 0;
}

/* entries of dir named del-* (a removal's leftovers) */
static int dels(const char *dir) {
        char cmd[512];
        snprintf(cmd, sizeof(cmd), "ls -A %s | grep -c '^del-' || true", dir);
        FILE *f = popen(cmd, "r");
        assert_non_null(f);
        int n = -1;
        assert_int_equal(fscanf(f, "%d", &n), 1);
        pclose(f);
        return n;
}

static void test_server(void **state) {
        (void) state;
        if (geteuid() != 0)
                skip();
        struct priv_server s;
        priv_server_start(&s, priv_bin, "wr-priv-layer", NULL);
        const char *d = s.dir, *st = s.state;
        uint8_t buf[PRIV_MSG_MAX];
        struct wr_err e = {0};
        /* layers/ as a dropped warrend has it: its levels the user's, the
         * trees root's (0755 top dir, a 0700 dir inside) */
        priv_sh("mkdir -p %s/layers/tmp %s/layers/sha256 %s/outside/keep && "
                "echo canary > %s/outside/keep/f && chown -R nobody %s/layers",
                st, st, d, d, st);
        priv_sh("mkdir -p %s/layers/tmp/" TMP1 "/root %s/layers/tmp/" TMP1 "/etc && "
                "echo x > %s/layers/tmp/" TMP1 "/etc/f && chmod 0700 %s/layers/tmp/" TMP1
                "/root",
                st, st, st, st);

        /* commit: moved; the same digest again: there already, ours stays */
        int n = priv_layer_commit_encode(0, TMP1, HEX1, buf, sizeof(buf), &e);
        assert_int_equal(result(&s, buf, (size_t) n, NULL, 0, 0), PRIV_LAYER_MOVED);
        assert_true(exists("%s/layers/sha256/" HEX1 "/etc/f", st));
        assert_false(exists("%s/layers/tmp/" TMP1, st));
        priv_sh("mkdir -p %s/layers/tmp/" TMP2 "/etc", st);
        n = priv_layer_commit_encode(0, TMP2, HEX1, buf, sizeof(buf), &e);
        assert_int_equal(result(&s, buf, (size_t) n, NULL, 0, 0), PRIV_LAYER_EXISTED);
        assert_true(exists("%s/layers/tmp/" TMP2 "/etc", st));
        assert_true(exists("%s/layers/sha256/" HEX1 "/etc/f", st));
        /* a missing staging dir */
        n = priv_layer_commit_encode(0, "unpack-1111111111111111", HEX2, buf, sizeof(buf), &e);
        (void) result(&s, buf, (size_t) n, NULL, 0, ENOENT);

        /* /root/.ssh in the tree, directly and through a symlink: refused,
         * nothing moved */
        priv_sh("mkdir -p %s/layers/tmp/unpack-2222222222222222/root/.ssh", st);
        n = priv_layer_commit_encode(0, "unpack-2222222222222222", HEX2, buf, sizeof(buf), &e);
        assert_int_equal(result(&s, buf, (size_t) n, NULL, 0, 0), PRIV_LAYER_ROOT_SSH);
        priv_sh("mkdir -p %s/layers/tmp/unpack-3333333333333333/home/x/.ssh && "
                "ln -s /home/x %s/layers/tmp/unpack-3333333333333333/root",
                st, st);
        n = priv_layer_commit_encode(0, "unpack-3333333333333333", HEX2, buf, sizeof(buf), &e);
        assert_int_equal(result(&s, buf, (size_t) n, NULL, 0, 0), PRIV_LAYER_ROOT_SSH);
        assert_false(exists("%s/layers/sha256/" HEX2, st));
        assert_true(exists("%s/layers/tmp/unpack-3333333333333333/home/x/.ssh", st));

        /* a staging entry that is a symlink out of the state dir: refused,
         * nothing moved */
        priv_sh("ln -s %s/outside/keep %s/layers/tmp/unpack-4444444444444444", d, st);
        n = priv_layer_commit_encode(0, "unpack-4444444444444444", HEX2, buf, sizeof(buf), &e);
        (void) result(&s, buf, (size_t) n, NULL, 0, ENOTDIR); /* O_DIRECTORY | O_NOFOLLOW */
        assert_false(exists("%s/layers/sha256/" HEX2, st));

        /* remove: a staging tree, deeper than any recursion would go */
        priv_sh("cd %s/layers/tmp/unpack-2222222222222222 && for i in $(seq 600); do "
                "mkdir d && cd d || exit 1; done && touch f",
                st);
        n = priv_layer_remove_encode(0, PRIV_LAYER_DIR_TMP, "unpack-2222222222222222", buf,
                                     sizeof(buf), &e);
        assert_int_equal(result(&s, buf, (size_t) n, NULL, 0, 0), 1);
        assert_false(exists("%s/layers/tmp/unpack-2222222222222222", st));
        assert_int_equal(result(&s, buf, (size_t) n, NULL, 0, 0), 0); /* none */
        /* the symlink goes, not what it names */
        n = priv_layer_remove_encode(0, PRIV_LAYER_DIR_TMP, "unpack-4444444444444444", buf,
                                     sizeof(buf), &e);
        assert_int_equal(result(&s, buf, (size_t) n, NULL, 0, 0), 1);
        assert_true(exists("%s/outside/keep/f", d));
        /* a committed layer: gone, no del-* left behind (TMP2 is one) */
        char tmpdir[256];
        snprintf(tmpdir, sizeof(tmpdir), "%s/layers/tmp", st);
        int dels0 = dels(tmpdir);
        n = priv_layer_remove_encode(0, PRIV_LAYER_DIR_SHA256, HEX1, buf, sizeof(buf), &e);
        assert_int_equal(result(&s, buf, (size_t) n, NULL, 0, 0), 1);
        assert_false(exists("%s/layers/sha256/" HEX1, st));
        assert_int_equal(dels(tmpdir), dels0);
        assert_int_equal(result(&s, buf, (size_t) n, NULL, 0, 0), 0);

        /* layers/sha256 and layers/tmp replaced by symlinks out of the
         * state dir: refused, the outside untouched */
        priv_sh("mkdir -p %s/outside/" HEX2 " && mv %s/layers/sha256 %s/layers/sha256.real && "
                "ln -s %s/outside %s/layers/sha256",
                d, st, st, d, st);
        n = priv_layer_remove_encode(0, PRIV_LAYER_DIR_SHA256, HEX2, buf, sizeof(buf), &e);
        (void) result(&s, buf, (size_t) n, NULL, 0, ELOOP);
        assert_true(exists("%s/outside/" HEX2, d));
        n = priv_layer_commit_encode(0, TMP2, HEX2, buf, sizeof(buf), &e);
        (void) result(&s, buf, (size_t) n, NULL, 0, ELOOP);
        assert_true(exists("%s/layers/tmp/" TMP2, st));
        priv_sh("rm %s/layers/sha256 && mv %s/layers/sha256.real %s/layers/sha256 && "
                "mkdir -p %s/outside/" TMP1 " && mv %s/layers/tmp %s/layers/tmp.real && "
                "ln -s %s/outside %s/layers/tmp",
                st, st, st, d, st, st, d, st);
        n = priv_layer_remove_encode(0, PRIV_LAYER_DIR_TMP, TMP1, buf, sizeof(buf), &e);
        (void) result(&s, buf, (size_t) n, NULL, 0, ELOOP);
        assert_true(exists("%s/outside/" TMP1, d));
        priv_sh("rm %s/layers/tmp && mv %s/layers/tmp.real %s/layers/tmp", st, st, st);

        /* hand-made refusals through the binary: names with "..", an fd
         * along; answered, nothing done, the fd closed */
        assert_int_equal(result(&s, buf,
                                remove_of(buf, PRIV_LAYER_DIR_TMP, "../../outside/keep"), NULL,
                                0, EACCES),
                         0);
        assert_int_equal(result(&s, buf, commit_of(buf, "../../outside/keep", HEX2), NULL, 0,
                                EACCES),
                         0);
        assert_true(exists("%s/outside/keep/f", d));
        assert_false(exists("%s/layers/sha256/" HEX2, st));
        int p[2];
        assert_int_equal(pipe2(p, O_CLOEXEC), 0);
        (void) result(&s, buf, remove_of(buf, PRIV_LAYER_DIR_TMP, TMP2), &p[1], 1, EPROTO);
        close(p[1]);
        char ch;
        assert_int_equal(read(p[0], &ch, 1), 0); /* warren-priv closed its copy */
        close(p[0]);
        assert_true(exists("%s/layers/tmp/" TMP2, st)); /* not removed */
        priv_server_stop(&s);
}

int main(int argc, char **argv) {
        if (argc < 2) {
                fprintf(stderr, "usage: %s WARREN_PRIV\n", argv[0]);
                return 2;
        }
        priv_bin = argv[1];
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_round_trips),
                cmocka_unit_test(test_refusals),
                cmocka_unit_test(test_server),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
