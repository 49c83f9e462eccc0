/* SPDX-License-Identifier: Apache-2.0 */
/* src/priv, phase 5: the volume files API (VOLFILE_OPEN 27, VOLFILE_OP 28,
 * VOLFILE_LIST 29; docs/privsep.md "Phase 5, volume files, as built"):
 * round trips; hand-written refusals of the pure decoders (ops of another
 * type, a volume path outside volumes/ or with "..", modes, lengths,
 * limits, temp names where none belong or of another form, reserved
 * fields, fds where none or more belong; the paths' memfd: traversal,
 * absolute paths, NUL, lengths; a listing: out of order, "..", absolute,
 * a directory, bytes after, cut short, outside the prefix; replies); then
 * the real warren-priv (argv[1]) on a real mounted volume: a put written
 * through the fd it answers and committed (mode, parent dirs, atomic), read
 * back through the fd it answers, stat, a listing decoded from its memfd,
 * an abort that leaves nothing in .staging, remove; and refusals with
 * nothing done: symlinks out of the volume (absolute, "..") resolved
 * inside it, a ".." path in the memfd, an unsealed memfd, a volume that
 * is not mounted, a volume dir that is a symlink. */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include <cmocka.h>

#include "priv-harness.h"

#include "basic/ext4img.h"
#include "basic/memfd.h"
#include "priv/priv-proto.h"
#include "volume/volume.h"

static const char *priv_bin;

#define TMP1 "put-0123456789abcdef"

static struct priv_volfile vf(const char *vol, uint32_t op) {
        struct priv_volfile v;
        memset(&v, 0, sizeof(v));
        snprintf(v.vol, sizeof(v.vol), "%s", vol);
        v.op = op;
        return v;
}

/* a VOLFILE datagram with v as given (no encoder check) */
static size_t raw(uint8_t *buf, uint32_t type, const struct priv_volfile *v) {
        struct priv_hdr h = {.magic = PRIV_MAGIC, .type = type, .len = sizeof(*v), .id = 1};
        memcpy(buf, &h, sizeof(h));
        memcpy(buf + sizeof(h), v, sizeof(*v));
        return sizeof(h) + sizeof(*v);
}

static void test_round_trips(void **state) {
        (void) state;
        uint8_t buf[PRIV_MSG_MAX];
        struct priv_req req;
        struct wr_err e = {0};
        struct priv_volfile v = vf("volumes/default/v1", PRIV_VOLFILE_PUT);
        v.mode = 0640;
        v.path_len = 5;
        int n = priv_volfile_encode(7, PRIV_VOLFILE_OPEN, &v, buf, sizeof(buf), &e);
        assert_true(n > 0);
        assert_int_equal(priv_req_decode(buf, (size_t) n, 1, &req, &e), 0);
        assert_int_equal(req.hdr.type, PRIV_VOLFILE_OPEN);
        assert_int_equal(req.volfile.op, PRIV_VOLFILE_PUT);
        assert_int_equal(req.volfile.mode, 0640);
        assert_memory_equal(&req.volfile, &v, sizeof(v));
        v = vf("volumes/e-2/my.vol_1", PRIV_VOLFILE_LS);
        v.limit = 1000;
        v.after_len = 4096;
        n = priv_volfile_encode(8, PRIV_VOLFILE_LIST, &v, buf, sizeof(buf), &e);
        assert_true(n > 0);
        assert_int_equal(priv_req_decode(buf, (size_t) n, 1, &req, &e), 0);
        v = vf("volumes/d/v", PRIV_VOLFILE_COMMIT);
        snprintf(v.tmp, sizeof(v.tmp), TMP1);
        v.path_len = 1;
        n = priv_volfile_encode(9, PRIV_VOLFILE_OP, &v, buf, sizeof(buf), &e);
        assert_int_equal(priv_req_decode(buf, (size_t) n, 1, &req, &e), 0);
        assert_string_equal(req.volfile.tmp, TMP1);
        assert_string_equal(priv_type_name(PRIV_VOLFILE_OPEN), "VOLFILE_OPEN");
        assert_int_equal(priv_type_fds(PRIV_VOLFILE_OPEN), 1);
        assert_int_equal(priv_type_fds(PRIV_VOLFILE_OP), 1);
        assert_int_equal(priv_type_fds(PRIV_VOLFILE_LIST), 1);
        assert_int_equal(priv_type_fds(PRIV_VOLFILE_OPENED), 1);
        assert_int_equal(priv_type_fds(PRIV_VOLFILE_STATED), 0);
        assert_int_equal(priv_type_fds(PRIV_VOLFILE_LISTED), 1);

        /* replies */
        struct priv_reply rep;
        struct priv_volfile_stated st = {.served = 1, .kind = VOL_FILE_REGULAR, .mode = 0644};
        n = priv_volfile_stated_encode(3, &st, buf, sizeof(buf));
        assert_int_equal(priv_reply_decode(buf, (size_t) n, 0, &rep, &e), 0);
        st.kind = 9;
        n = priv_volfile_stated_encode(3, &st, buf, sizeof(buf));
        assert_int_equal(priv_reply_decode(buf, (size_t) n, 0, &rep, &e), -EINVAL);
        st.kind = VOL_FILE_OTHER;
        st.mode = 010000;
        n = priv_volfile_stated_encode(3, &st, buf, sizeof(buf));
        assert_int_equal(priv_reply_decode(buf, (size_t) n, 0, &rep, &e), -EINVAL);
        struct priv_volfile_opened o = {.served = 1};
        snprintf(o.tmp, sizeof(o.tmp), "../../etc");
        n = priv_volfile_opened_encode(3, &o, buf, sizeof(buf));
        assert_int_equal(priv_reply_decode(buf, (size_t) n, 1, &rep, &e), -EINVAL);
        struct priv_volfile_listed l = {.n = 1001};
        n = priv_volfile_listed_encode(3, &l, buf, sizeof(buf));
        assert_int_equal(priv_reply_decode(buf, (size_t) n, 1, &rep, &e), -EINVAL);
        l = (struct priv_volfile_listed){.n = 2, .len = 63}; /* less than two headers */
        n = priv_volfile_listed_encode(3, &l, buf, sizeof(buf));
        assert_int_equal(priv_reply_decode(buf, (size_t) n, 1, &rep, &e), -EINVAL);
        l = (struct priv_volfile_listed){.n = 1, .len = 40};
        n = priv_volfile_listed_encode(3, &l, buf, sizeof(buf));
        assert_int_equal(priv_reply_decode(buf, (size_t) n, 0, &rep, &e), -EPROTO); /* its fd */
}

static void test_refusals(void **state) {
        (void) state;
        uint8_t buf[PRIV_MSG_MAX];
        struct wr_err e = {0};
        struct priv_volfile v;
        /* the volume path: outside volumes/, "..", too deep, a symlink-ish name */
        static const char *const bad_vols[] = {
                "volumes/../sandboxes/x", "volumes/default/../x", "/volumes/default/v",
                "sandboxes/a/b",          "volumes/default",      "volumes/default/v/mnt",
                "volumes/-x/v",           "volumes//v",           "layers/tmp/x",
        };
        for (size_t i = 0; i < sizeof(bad_vols) / sizeof(bad_vols[0]); i++) {
                v = vf(bad_vols[i], PRIV_VOLFILE_READ);
                v.path_len = 1;
                priv_refused(buf, raw(buf, PRIV_VOLFILE_OPEN, &v), 1, -EACCES);
                assert_int_equal(priv_volfile_encode(1, PRIV_VOLFILE_OPEN, &v, buf, sizeof(buf), &e),
                                 -EINVAL);
        }
        /* garbage after the vol path's NUL */
        v = vf("volumes/d/v", PRIV_VOLFILE_READ);
        v.path_len = 1;
        v.vol[sizeof(v.vol) - 1] = 'x';
        priv_refused(buf, raw(buf, PRIV_VOLFILE_OPEN, &v), 1, -EINVAL);
        /* an op of another type, an unknown op */
        static const uint32_t wrong[][2] = {
                {PRIV_VOLFILE_OPEN, PRIV_VOLFILE_STAT}, {PRIV_VOLFILE_OPEN, PRIV_VOLFILE_LS},
                {PRIV_VOLFILE_OP, PRIV_VOLFILE_READ},   {PRIV_VOLFILE_OP, PRIV_VOLFILE_PUT},
                {PRIV_VOLFILE_LIST, PRIV_VOLFILE_STAT}, {PRIV_VOLFILE_OP, 0},
                {PRIV_VOLFILE_OP, 8},
        };
        for (size_t i = 0; i < sizeof(wrong) / sizeof(wrong[0]); i++) {
                v = vf("volumes/d/v", wrong[i][1]);
                v.path_len = 1;
                priv_refused(buf, raw(buf, wrong[i][0], &v), 1, -EINVAL);
        }
        /* mode where none belongs, bits above 07777 */
        v = vf("volumes/d/v", PRIV_VOLFILE_READ);
        v.path_len = 1;
        v.mode = 0644;
        priv_refused(buf, raw(buf, PRIV_VOLFILE_OPEN, &v), 1, -EINVAL);
        v = vf("volumes/d/v", PRIV_VOLFILE_PUT);
        v.path_len = 1;
        v.mode = 010644;
        priv_refused(buf, raw(buf, PRIV_VOLFILE_OPEN, &v), 1, -EINVAL);
        /* lengths: an empty path where a file is named, 4097, after_len off LIST, ABORT's */
        v = vf("volumes/d/v", PRIV_VOLFILE_REMOVE);
        priv_refused(buf, raw(buf, PRIV_VOLFILE_OP, &v), 1, -EINVAL);
        v.path_len = 4097;
        priv_refused(buf, raw(buf, PRIV_VOLFILE_OP, &v), 1, -EINVAL);
        v.path_len = 1;
        v.after_len = 1;
        priv_refused(buf, raw(buf, PRIV_VOLFILE_OP, &v), 1, -EINVAL);
        v = vf("volumes/d/v", PRIV_VOLFILE_ABORT);
        snprintf(v.tmp, sizeof(v.tmp), TMP1);
        v.path_len = 3;
        priv_refused(buf, raw(buf, PRIV_VOLFILE_OP, &v), 1, -EINVAL);
        /* LIST's limit: 0, 1001; a limit elsewhere */
        v = vf("volumes/d/v", PRIV_VOLFILE_LS);
        priv_refused(buf, raw(buf, PRIV_VOLFILE_LIST, &v), 1, -EINVAL);
        v.limit = 1001;
        priv_refused(buf, raw(buf, PRIV_VOLFILE_LIST, &v), 1, -EINVAL);
        v.limit = 10;
        v.after_len = 4097;
        priv_refused(buf, raw(buf, PRIV_VOLFILE_LIST, &v), 1, -EINVAL);
        v = vf("volumes/d/v", PRIV_VOLFILE_STAT);
        v.limit = 1;
        priv_refused(buf, raw(buf, PRIV_VOLFILE_OP, &v), 1, -EINVAL);
        /* temp names: where none belongs, of another form, a path */
        static const char *const bad_tmps[] = {"put-0123456789ABCDEF", "put-0123",
                                               "../put-0123456789ab", "unpack-0123456789abcdef",
                                               "put-0123456789abcdef0", ""};
        for (size_t i = 0; i < sizeof(bad_tmps) / sizeof(bad_tmps[0]); i++) {
                v = vf("volumes/d/v", PRIV_VOLFILE_COMMIT);
                v.path_len = 1;
                snprintf(v.tmp, sizeof(v.tmp), "%s", bad_tmps[i]);
                priv_refused(buf, raw(buf, PRIV_VOLFILE_OP, &v), 1, -EACCES);
        }
        v = vf("volumes/d/v", PRIV_VOLFILE_READ);
        v.path_len = 1;
        snprintf(v.tmp, sizeof(v.tmp), TMP1);
        priv_refused(buf, raw(buf, PRIV_VOLFILE_OPEN, &v), 1, -EACCES);
        /* reserved; fds: none, two */
        v = vf("volumes/d/v", PRIV_VOLFILE_READ);
        v.path_len = 1;
        v.reserved = 1;
        priv_refused(buf, raw(buf, PRIV_VOLFILE_OPEN, &v), 1, -EINVAL);
        v.reserved = 0;
        priv_refused(buf, raw(buf, PRIV_VOLFILE_OPEN, &v), 0, -EPROTO);
        priv_refused(buf, raw(buf, PRIV_VOLFILE_OPEN, &v), 2, -EPROTO);
        /* short and long datagrams */
        size_t n = raw(buf, PRIV_VOLFILE_OPEN, &v);
        priv_refused(buf, n - 1, 1, -EPROTO);

        /* the memfd's paths */
        char path[PRIV_VOLFILE_PATH_MAX + 1], after[PRIV_VOLFILE_PATH_MAX + 1];
        static const char *const bad_paths[] = {"../etc/passwd", "a/../../x", "/etc/passwd",
                                                "a\nb", ".."};
        for (size_t i = 0; i < sizeof(bad_paths) / sizeof(bad_paths[0]); i++) {
                v = vf("volumes/d/v", PRIV_VOLFILE_READ);
                v.path_len = (uint32_t) strlen(bad_paths[i]);
                assert_int_equal(priv_volfile_paths_decode(&v, bad_paths[i], v.path_len, path,
                                                           after, &e),
                                 -EINVAL);
                assert_int_equal(e.status, WR_STATUS_INVALID_ARGUMENT);
        }
        v = vf("volumes/d/v", PRIV_VOLFILE_READ);
        v.path_len = 3;
        assert_int_equal(priv_volfile_paths_decode(&v, "a\0b", 3, path, after, &e), -EINVAL);
        assert_int_equal(priv_volfile_paths_decode(&v, "abcd", 4, path, after, &e), -EPROTO);
        assert_int_equal(priv_volfile_paths_decode(&v, "ab", 2, path, after, &e), -EPROTO);
        char comp[300];
        memset(comp, 'x', sizeof(comp));
        v.path_len = 256;
        assert_int_equal(priv_volfile_paths_decode(&v, comp, 256, path, after, &e), -EINVAL);
        v = vf("volumes/d/v", PRIV_VOLFILE_LS);
        v.limit = 5;
        v.path_len = 1;
        v.after_len = 4;
        assert_int_equal(priv_volfile_paths_decode(&v, "a../x", 5, path, after, &e), -EINVAL);
        assert_int_equal(priv_volfile_paths_decode(&v, "ab/c.", 5, path, after, &e), 0);
        assert_string_equal(path, "a");
        assert_string_equal(after, "b/c.");
}

/* a listing: entries as given, encoded by hand */
static size_t entry(uint8_t *o, const char *p, uint32_t kind, uint32_t mode) {
        uint32_t h[4] = {(uint32_t) strlen(p), kind, mode, 0};
        uint64_t t[2] = {kind == VOL_FILE_OTHER ? 0 : 3, 5};
        memcpy(o, h, sizeof(h));
        memcpy(o + 16, t, sizeof(t));
        memcpy(o + 32, p, strlen(p));
        return 32 + strlen(p);
}

static void test_listing(void **state) {
        (void) state;
        struct vol_file files[3] = {{.path = "a/b", .kind = VOL_FILE_REGULAR, .mode = 0644},
                                    {.path = "a/b.c", .kind = VOL_FILE_SYMLINK, .mode = 0777},
                                    {.path = "a/ba", .kind = VOL_FILE_OTHER}};
        void *buf = NULL;
        size_t len = 0;
        assert_int_equal(vol_files_encode(files, 3, &buf, &len), 0);
        struct vol_file *out = NULL;
        struct wr_err e = {0};
        assert_int_equal(vol_files_decode(buf, len, 3, "a", &out, &e), 0);
        assert_string_equal(out[1].path, "a/b.c");
        assert_int_equal(out[1].kind, VOL_FILE_SYMLINK);
        vol_files_free(out, 3);
        assert_int_equal(vol_files_decode(buf, len, 2, "", &out, &e), -EPROTO); /* bytes after */
        assert_int_equal(vol_files_decode(buf, len, 4, "", &out, &e), -EPROTO); /* cut short */
        assert_int_equal(vol_files_decode(buf, len - 1, 3, "", &out, &e), -EPROTO);
        assert_int_equal(vol_files_decode(buf, len, 3, "b", &out, &e), -EPROTO); /* prefix */
        free(buf);
        uint8_t b[512];
        static const char *const bad[] = {"../x", "/etc/passwd", "a//b", "a/./b", "a/", ".",
                                          "a/../b"};
        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
                size_t n = entry(b, bad[i], VOL_FILE_REGULAR, 0644);
                assert_int_equal(vol_files_decode(b, n, 1, "", &out, &e), -EPROTO);
        }
        size_t n = entry(b, "b", VOL_FILE_REGULAR, 0644);
        n += entry(b + n, "a", VOL_FILE_REGULAR, 0644); /* out of order */
        assert_int_equal(vol_files_decode(b, n, 2, "", &out, &e), -EPROTO);
        n = entry(b, "a", VOL_FILE_REGULAR, 0644);
        n += entry(b + n, "a", VOL_FILE_REGULAR, 0644); /* twice */
        assert_int_equal(vol_files_decode(b, n, 2, "", &out, &e), -EPROTO);
        n = entry(b, "d", VOL_FILE_DIRECTORY, 0755); /* never a directory */
        assert_int_equal(vol_files_decode(b, n, 1, "", &out, &e), -EPROTO);
        n = entry(b, "d", VOL_FILE_REGULAR, 010000);
        assert_int_equal(vol_files_decode(b, n, 1, "", &out, &e), -EPROTO);
        n = entry(b, "d", VOL_FILE_REGULAR, 0644);
        assert_int_equal(vol_files_decode(b, n, 1, "", &out, &e), 0);
        vol_files_free(out, 1);
}

/* ---- the real warren-priv ---- */

static struct priv_server srv;
static int req_no;

/* One VOLFILE request (the paths sealed in a memfd unless raw_memfd >= 0:
 * then that fd is sent as is). The answer's fd, if any, in *fd. */
static void call(uint32_t type, struct priv_volfile v, const char *path, const char *after,
                 int raw_memfd, struct priv_reply *rep, int *fd) {
        uint8_t buf[PRIV_MSG_MAX];
        struct wr_err e = {0};
        v.path_len = (uint32_t) strlen(path);
        v.after_len = after ? (uint32_t) strlen(after) : 0;
        int n = priv_volfile_encode((uint64_t) ++req_no, type, &v, buf, sizeof(buf), &e);
        if (n < 0)
                fail_msg("encode: %s", e.msg);
        int mfd = raw_memfd;
        if (mfd < 0) {
                struct iovec iov[2] = {{(void *) path, v.path_len},
                                       {(void *) (after ? after : ""), v.after_len}};
                assert_int_equal(memfd_sealed("t", "paths", iov, 2, &mfd, &e), 0);
        }
        int rfds[PRIV_FDS_MAX];
        size_t n_rfds = 0;
        priv_server_answer(&srv, buf, (size_t) n, &mfd, 1, rep, rfds, &n_rfds);
        close(mfd);
        if (fd)
                *fd = n_rfds ? rfds[0] : -1;
        else
                priv_close_fds(rfds, n_rfds);
}

static void want_err(const struct priv_reply *rep, int err, int status) {
        assert_int_equal(rep->hdr.type, PRIV_RESULT);
        if (rep->result.err != err)
                fail_msg("err %d (want %d): %s", rep->result.err, err, rep->result.msg);
        assert_int_equal(rep->result.value, status);
}

static void test_server(void **state) {
        (void) state;
        if (geteuid() != 0)
                skip();
        priv_server_start(&srv, priv_bin, "wr-priv-vf", NULL);
        priv_sh("mkdir -p %s/volumes/default/v1 %s/volumes/default/v2/mnt %s/outside/v", srv.state,
                srv.state, srv.dir);
        priv_sh("echo secret > %s/outside/secret", srv.dir);
        char p[256];
        snprintf(p, sizeof(p), "%s/volumes/default/v1/disk.img", srv.state);
        int fd = open(p, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
        assert_true(fd >= 0);
        assert_int_equal(ftruncate(fd, 16 << 20), 0);
        close(fd);
        struct wr_err e = {0};
        if (ext4img_mkfs(p, 256, 0, &e) < 0)
                fail_msg("mkfs: %s", e.msg);
        uint8_t buf[PRIV_MSG_MAX];
        struct priv_reply rep;
        int rfds[PRIV_FDS_MAX];
        size_t n_rfds = 0;
        int n = priv_volume_encode(0, PRIV_VOLUME_MOUNT, "volumes/default/v1", 0, buf, sizeof(buf),
                                   &e);
        priv_server_answer(&srv, buf, (size_t) n, NULL, 0, &rep, rfds, &n_rfds);
        if (rep.hdr.type != PRIV_VOLUME_MOUNTED)
                fail_msg("mount: %s", rep.result.msg);
        int root = rfds[0];
        const char *V = "volumes/default/v1";

        /* a put: the temp file's fd, written here, committed there */
        struct priv_volfile v = vf(V, PRIV_VOLFILE_PUT);
        v.mode = 0640;
        call(PRIV_VOLFILE_OPEN, v, "a/b/c.txt", NULL, -1, &rep, &fd);
        if (rep.hdr.type != PRIV_VOLFILE_OPENED)
                fail_msg("put: %s", rep.result.msg);
        assert_true(fd >= 0);
        assert_true(vol_put_tmp_ok(rep.volfile_opened.tmp));
        char tmp[PRIV_VOLFILE_TMP_MAX];
        memcpy(tmp, rep.volfile_opened.tmp, sizeof(tmp));
        assert_int_equal(write(fd, "hello", 5), 5);
        close(fd);
        struct stat st;
        assert_int_equal(fstatat(root, "data/a/b/c.txt", &st, 0), -1); /* not yet */
        v = vf(V, PRIV_VOLFILE_COMMIT);
        v.mode = 0640;
        memcpy(v.tmp, tmp, sizeof(tmp));
        call(PRIV_VOLFILE_OP, v, "a//b/./c.txt", NULL, -1, &rep, NULL);
        if (rep.hdr.type != PRIV_VOLFILE_STATED)
                fail_msg("commit: %s", rep.result.msg);
        assert_int_equal(rep.volfile_stated.size, 5);
        assert_int_equal(rep.volfile_stated.mode, 0640);
        assert_int_equal(rep.volfile_stated.kind, VOL_FILE_REGULAR);
        assert_int_equal(fstatat(root, "data/a/b/c.txt", &st, 0), 0);
        assert_int_equal(st.st_mode & 07777, 0640);
        /* the same temp name again: gone */
        call(PRIV_VOLFILE_OP, v, "a/b/c.txt", NULL, -1, &rep, NULL);
        assert_int_equal(rep.hdr.type, PRIV_RESULT);
        assert_int_equal(rep.result.err, ENOENT);

        /* read it back through the fd answered */
        v = vf(V, PRIV_VOLFILE_READ);
        call(PRIV_VOLFILE_OPEN, v, "a/b/c.txt", NULL, -1, &rep, &fd);
        assert_int_equal(rep.hdr.type, PRIV_VOLFILE_OPENED);
        char got[16] = {0};
        assert_int_equal(read(fd, got, sizeof(got)), 5);
        assert_string_equal(got, "hello");
        assert_int_equal(fcntl(fd, F_GETFL) & O_ACCMODE, O_RDONLY);
        close(fd);
        /* a directory, a missing file */
        call(PRIV_VOLFILE_OPEN, v, "a/b", NULL, -1, &rep, &fd);
        want_err(&rep, EISDIR, WR_STATUS_FAILED_PRECONDITION);
        call(PRIV_VOLFILE_OPEN, v, "a/nope", NULL, -1, &rep, &fd);
        want_err(&rep, ENOENT, WR_STATUS_NOT_FOUND);

        /* symlinks out of the volume resolve inside it: nothing outside read */
        char link[512];
        snprintf(link, sizeof(link), "%s/outside", srv.dir);
        assert_int_equal(symlinkat(link, root, "data/abs"), 0);
        assert_int_equal(symlinkat("../../../../../../../..", root, "data/up"), 0);
        snprintf(link, sizeof(link), "abs/secret");
        call(PRIV_VOLFILE_OPEN, v, link, NULL, -1, &rep, &fd);
        want_err(&rep, ENOENT, WR_STATUS_NOT_FOUND);
        snprintf(link, sizeof(link), "up%s/outside/secret", srv.dir);
        call(PRIV_VOLFILE_OPEN, v, link, NULL, -1, &rep, &fd);
        want_err(&rep, ENOENT, WR_STATUS_NOT_FOUND);
        /* a put through the absolute link: resolved inside the volume,
         * where its target does not exist; nothing made outside */
        v = vf(V, PRIV_VOLFILE_PUT);
        call(PRIV_VOLFILE_OPEN, v, "abs/new", NULL, -1, &rep, &fd);
        want_err(&rep, ENOENT, WR_STATUS_NOT_FOUND);
        snprintf(p, sizeof(p), "%s/outside/new", srv.dir);
        assert_int_equal(access(p, F_OK), -1);
        /* a put dropped (ABORT): its temp file goes */
        call(PRIV_VOLFILE_OPEN, v, "x/new", NULL, -1, &rep, &fd);
        assert_int_equal(rep.hdr.type, PRIV_VOLFILE_OPENED);
        close(fd);
        memcpy(tmp, rep.volfile_opened.tmp, sizeof(tmp));
        v = vf(V, PRIV_VOLFILE_ABORT);
        memcpy(v.tmp, tmp, sizeof(tmp));
        call(PRIV_VOLFILE_OP, v, "", NULL, -1, &rep, NULL);
        assert_int_equal(rep.hdr.type, PRIV_RESULT);
        assert_int_equal(rep.result.err, 0);
        assert_int_equal(rep.result.value, 1);
        assert_int_equal(fstatat(root, "data/x/new", &st, AT_SYMLINK_NOFOLLOW), -1);
        /* .staging is empty again */
        assert_int_equal(fstatat(root, ".staging", &st, 0), 0);
        assert_int_equal(st.st_nlink, 2);
        snprintf(p, sizeof(p), ".staging/%s", tmp);
        assert_int_equal(fstatat(root, p, &st, AT_SYMLINK_NOFOLLOW), -1);

        /* stat: the root, a symlink not followed */
        v = vf(V, PRIV_VOLFILE_STAT);
        call(PRIV_VOLFILE_OP, v, "", NULL, -1, &rep, NULL);
        assert_int_equal(rep.hdr.type, PRIV_VOLFILE_STATED);
        assert_int_equal(rep.volfile_stated.kind, VOL_FILE_DIRECTORY);
        call(PRIV_VOLFILE_OP, v, "abs", NULL, -1, &rep, NULL);
        assert_int_equal(rep.volfile_stated.kind, VOL_FILE_SYMLINK);

        /* a listing in a sealed memfd */
        v = vf(V, PRIV_VOLFILE_LS);
        v.limit = 2;
        call(PRIV_VOLFILE_LIST, v, "", NULL, -1, &rep, &fd);
        assert_int_equal(rep.hdr.type, PRIV_VOLFILE_LISTED);
        assert_int_equal(rep.volfile_listed.n, 2);
        assert_int_equal(rep.volfile_listed.more, 1);
        assert_true(fcntl(fd, F_GET_SEALS) & F_SEAL_WRITE);
        char lb[4096];
        assert_int_equal(pread(fd, lb, sizeof(lb), 0), rep.volfile_listed.len);
        close(fd);
        struct vol_file *files = NULL;
        assert_int_equal(vol_files_decode(lb, rep.volfile_listed.len, 2, "", &files, &e), 0);
        assert_string_equal(files[0].path, "a/b/c.txt");
        assert_string_equal(files[1].path, "abs");
        vol_files_free(files, 2);
        call(PRIV_VOLFILE_LIST, v, "", "abs", -1, &rep, &fd);
        assert_int_equal(rep.volfile_listed.n, 1); /* "up" (x/ holds nothing) */
        assert_int_equal(rep.volfile_listed.more, 0);
        close(fd);

        /* refusals with nothing done: ".." in the memfd, an unsealed memfd */
        v = vf(V, PRIV_VOLFILE_REMOVE);
        int raw_fd = memfd_create("t", MFD_CLOEXEC | MFD_ALLOW_SEALING);
        assert_int_equal(write(raw_fd, "..", 2), 2);
        assert_int_equal(fcntl(raw_fd, F_ADD_SEALS,
                               F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_SEAL),
                         0);
        call(PRIV_VOLFILE_OP, v, "ab", NULL, raw_fd, &rep, NULL);
        want_err(&rep, EINVAL, WR_STATUS_INVALID_ARGUMENT);
        raw_fd = memfd_create("t", MFD_CLOEXEC);
        assert_int_equal(write(raw_fd, "a/b", 3), 3);
        call(PRIV_VOLFILE_OP, v, "a/b", NULL, raw_fd, &rep, NULL);
        want_err(&rep, EACCES, 0);
        assert_int_equal(fstatat(root, "data/a/b/c.txt", &st, 0), 0);
        /* a volume that is not mounted; a volume dir that is a symlink */
        v = vf("volumes/default/v2", PRIV_VOLFILE_STAT);
        call(PRIV_VOLFILE_OP, v, "", NULL, -1, &rep, NULL);
        want_err(&rep, ENXIO, 0);
        priv_sh("ln -s %s/volumes/default/v1 %s/volumes/default/v3", srv.state, srv.state);
        v = vf("volumes/default/v3", PRIV_VOLFILE_STAT);
        call(PRIV_VOLFILE_OP, v, "", NULL, -1, &rep, NULL);
        want_err(&rep, ELOOP, 0);

        /* remove */
        v = vf(V, PRIV_VOLFILE_REMOVE);
        call(PRIV_VOLFILE_OP, v, "a/b", NULL, -1, &rep, NULL);
        want_err(&rep, ENOTEMPTY, WR_STATUS_FAILED_PRECONDITION);
        call(PRIV_VOLFILE_OP, v, "a/b/c.txt", NULL, -1, &rep, NULL);
        assert_int_equal(rep.hdr.type, PRIV_RESULT);
        assert_int_equal(rep.result.err, 0);
        assert_int_equal(fstatat(root, "data/a/b/c.txt", &st, 0), -1);
        snprintf(p, sizeof(p), "%s/outside/secret", srv.dir);
        assert_int_equal(access(p, F_OK), 0);

        close(root);
        n = priv_volume_encode(0, PRIV_VOLUME_UNMOUNT, V, 0, buf, sizeof(buf), &e);
        priv_server_answer(&srv, buf, (size_t) n, NULL, 0, &rep, NULL, NULL);
        assert_int_equal(rep.result.err, 0);
        priv_server_stop(&srv);
}

int main(int argc, char **argv) {
        priv_bin = argc > 1 ? argv[1] : NULL;
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_round_trips),
                cmocka_unit_test(test_refusals),
                cmocka_unit_test(test_listing),
                cmocka_unit_test(test_server),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
