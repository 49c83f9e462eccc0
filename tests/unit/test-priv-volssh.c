/* SPDX-License-Identifier: Apache-2.0 */
/* src/priv, phase 3's rest (types 19..22: volumes and spawn-beside,
 * docs/privsep.md): every new request and reply round trip; hand-written
 * refusals of each (paths outside volumes/, absolute, with "..", with too
 * few or too many components, a create's temp dir, unknown flags, reserved
 * fields, an unknown program kind, root or -1 ids, wrong fd counts, bad
 * sandbox ids and uid slots); and the real warren-priv binary (argv[1]):
 * a real volume image mounted and unmounted (the control), then a volume
 * reached through a symlink (the volume dir, volumes/ itself, the env
 * dir), a disk.img that is a symlink, and an ssh dir through a symlinked
 * sandbox dir all refused with nothing mounted or made; a spawn whose cwd
 * is not the sandbox's ssh dir, whose stdio is a directory, whose uid is
 * not the one the target's root maps to (EPERM), or whose target is not a
 * sandbox, refused with nothing started and every fd closed. */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <pwd.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "priv-harness.h"

#include "basic/ext4img.h"
#include "priv/priv-proto.h"

static const char *priv_bin;

static const struct priv_target good_t = {.id = "sb-1", .pid = 42, .start_time = 9};

static void test_round_trips(void **state) {
        (void) state;
        uint8_t buf[PRIV_MSG_MAX];
        struct priv_req req;
        struct priv_reply rep;
        struct wr_err e = {0};
        int n = priv_volume_encode(3, PRIV_VOLUME_MOUNT, "volumes/default/v1", PRIV_VOLUME_RDONLY,
                                   buf, sizeof(buf), &e);
        assert_true(n > 0);
        assert_int_equal(priv_req_decode(buf, (size_t) n, 0, &req, &e), 0);
        assert_int_equal(req.hdr.type, PRIV_VOLUME_MOUNT);
        assert_string_equal(req.volume.path, "volumes/default/v1");
        assert_int_equal(req.volume.flags, PRIV_VOLUME_RDONLY);
        assert_string_equal(priv_type_name(PRIV_VOLUME_MOUNT), "VOLUME_MOUNT");
        n = priv_volume_encode(4, PRIV_VOLUME_UNMOUNT, "volumes/e-2/my.vol_1", 0, buf, sizeof(buf),
                               &e);
        assert_true(n > 0);
        assert_int_equal(priv_req_decode(buf, (size_t) n, 0, &req, &e), 0);
        assert_int_equal(req.hdr.type, PRIV_VOLUME_UNMOUNT);
        n = priv_spawn_beside_encode(5, &good_t, PRIV_BESIDE_SSH_ADD, 1879048192, 1879048192, buf,
                                     sizeof(buf), &e);
        assert_true(n > 0);
        assert_int_equal(priv_req_decode(buf, (size_t) n, PRIV_SPAWN_FDS, &req, &e), 0);
        assert_int_equal(req.spawn.kind, PRIV_BESIDE_SSH_ADD);
        assert_int_equal(req.spawn.t.pid, 42);
        assert_int_equal(priv_type_fds(PRIV_SANDBOX_SPAWN_BESIDE), 4);
        n = priv_ssh_dir_encode(6, "sb-1", -1, buf, sizeof(buf), &e);
        assert_true(n > 0);
        assert_int_equal(priv_req_decode(buf, (size_t) n, 0, &req, &e), 0);
        assert_int_equal(req.ssh_dir.uid_slot, -1);
        n = priv_ssh_dir_encode(6, "sb-1", (int32_t) PRIV_UID_SLOTS - 1, buf, sizeof(buf), &e);
        assert_true(n > 0);
        /* replies */
        struct priv_volume_mounted vm = {.served = 1, .served_total = 2, .refused = 3};
        n = priv_volume_mounted_encode(7, &vm, buf, sizeof(buf));
        assert_int_equal(priv_reply_decode(buf, (size_t) n, 1, &rep, &e), 0);
        assert_int_equal(rep.volume_mounted.refused, 3);
        struct wr_err re = {0};
        assert_int_equal(priv_reply_decode(buf, (size_t) n, 0, &rep, &re), -EPROTO); /* no fd */
        struct priv_spawned sp = {.served = 1, .pid = 77};
        n = priv_spawned_encode(8, &sp, buf, sizeof(buf));
        assert_int_equal(priv_reply_decode(buf, (size_t) n, 1, &rep, &e), 0);
        assert_int_equal(rep.spawned.pid, 77);
        sp.pid = 1;
        n = priv_spawned_encode(8, &sp, buf, sizeof(buf));
        assert_int_equal(priv_reply_decode(buf, (size_t) n, 1, &rep, &re), -EINVAL);
        /* a reserved field of VOLUME_MOUNTED, set by hand */
        n = priv_volume_mounted_encode(7, &vm, buf, sizeof(buf));
        buf[n - 1] = 1;
        assert_int_equal(priv_reply_decode(buf, (size_t) n, 1, &rep, &re), -EINVAL);
}

/* a VOLUME_MOUNT datagram with path and flags set by hand (no encoder check) */
static size_t raw_volume(uint8_t *buf, uint32_t type, const char *path, uint32_t flags,
                         uint32_t reserved) {
        struct priv_hdr h = {.magic = PRIV_MAGIC, .type = type, .len = sizeof(struct priv_volume)};
        struct priv_volume v;
        memset(&v, 0, sizeof(v));
        memcpy(v.path, path, strlen(path));
        v.flags = flags;
        v.reserved = reserved;
        memcpy(buf, &h, sizeof(h));
        memcpy(buf + sizeof(h), &v, sizeof(v));
        return sizeof(h) + sizeof(v);
}

static size_t raw_spawn(uint8_t *buf, const struct priv_spawn_beside *s) {
        struct priv_hdr h = {
                .magic = PRIV_MAGIC, .type = PRIV_SANDBOX_SPAWN_BESIDE, .len = sizeof(*s)};
        memcpy(buf, &h, sizeof(h));
        memcpy(buf + sizeof(h), s, sizeof(*s));
        return sizeof(h) + sizeof(*s);
}

static size_t raw_ssh_dir(uint8_t *buf, const char *id, int32_t slot, uint32_t reserved) {
        struct priv_hdr h = {.magic = PRIV_MAGIC,
                             .type = PRIV_SSH_DIR_PREPARE,
                             .len = sizeof(struct priv_ssh_dir)};
        struct priv_ssh_dir d;
        memset(&d, 0, sizeof(d));
        memcpy(d.id, id, strlen(id));
        d.uid_slot = slot;
        d.reserved = reserved;
        memcpy(buf, &h, sizeof(h));
        memcpy(buf + sizeof(h), &d, sizeof(d));
        return sizeof(h) + sizeof(d);
}

static void test_refusals(void **state) {
        (void) state;
        uint8_t buf[PRIV_MSG_MAX];
        struct wr_err e = {0};
        static const char *const bad_paths[] = {
                "sandboxes/default/v1",      /* not under volumes/ */
                "/volumes/default/v1",       /* absolute */
                "volumes/default/../etc",    /* .. */
                "volumes/./default/v1",      /* . */
                "volumes/default",           /* too short */
                "volumes/default/v1/mnt",    /* too long */
                "volumes/default/v1/",       /* trailing / */
                "volumes//v1",               /* empty component */
                "volumes/default/.new-v1-0", /* a create's temp dir */
                "volumes/-x/v1",             /* not a volume name */
                "volumes/default/v\n1",      /* control byte */
                "volumes",                   /* the root itself */
                "",
        };
        for (size_t i = 0; i < sizeof(bad_paths) / sizeof(bad_paths[0]); i++) {
                for (uint32_t t = PRIV_VOLUME_MOUNT; t <= PRIV_VOLUME_UNMOUNT; t++) {
                        size_t n = raw_volume(buf, t, bad_paths[i], 0, 0);
                        priv_refused(buf, n, 0, -EACCES);
                        assert_true(priv_volume_encode(1, t, bad_paths[i], 0, buf, sizeof(buf),
                                                       &e) < 0);
                }
        }
        /* a name of 64 chars: too long for a volume */
        char longp[128];
        snprintf(longp, sizeof(longp), "volumes/default/%064d", 1);
        priv_refused(buf, raw_volume(buf, PRIV_VOLUME_MOUNT, longp, 0, 0), 0, -EACCES);
        /* flags, reserved, fds */
        priv_refused(buf, raw_volume(buf, PRIV_VOLUME_MOUNT, "volumes/d/v", 2, 0), 0, -EINVAL);
        priv_refused(buf,
                     raw_volume(buf, PRIV_VOLUME_UNMOUNT, "volumes/d/v", PRIV_VOLUME_RDONLY, 0), 0,
                     -EINVAL);
        priv_refused(buf, raw_volume(buf, PRIV_VOLUME_MOUNT, "volumes/d/v", 0, 1), 0, -EINVAL);
        priv_refused(buf, raw_volume(buf, PRIV_VOLUME_MOUNT, "volumes/d/v", 0, 0), 1, -EPROTO);
        /* bytes after the path's NUL */
        size_t n = raw_volume(buf, PRIV_VOLUME_MOUNT, "volumes/d/v", 0, 0);
        buf[sizeof(struct priv_hdr) + 20] = 'x';
        priv_refused(buf, n, 0, -EINVAL);
        /* a short datagram */
        n = raw_volume(buf, PRIV_VOLUME_MOUNT, "volumes/d/v", 0, 0);
        priv_refused(buf, n - 1, 0, -EPROTO);

        /* SANDBOX_SPAWN_BESIDE */
        struct priv_spawn_beside s = {
                .t = good_t, .kind = PRIV_BESIDE_SSH_AGENT, .uid = 5, .gid = 5};
        n = raw_spawn(buf, &s);
        struct priv_req req;
        assert_int_equal(priv_req_decode(buf, n, 4, &req, &e), 0);
        for (size_t k = 0; k <= 6; k++)
                if (k != 4)
                        priv_refused(buf, n, k, -EPROTO);
        struct priv_spawn_beside b = s;
        b.kind = 0;
        priv_refused(buf, raw_spawn(buf, &b), 4, -EINVAL);
        b.kind = 3;
        priv_refused(buf, raw_spawn(buf, &b), 4, -EINVAL);
        b = s;
        b.uid = 0;
        priv_refused(buf, raw_spawn(buf, &b), 4, -EINVAL);
        b = s;
        b.gid = 0;
        priv_refused(buf, raw_spawn(buf, &b), 4, -EINVAL);
        b = s;
        b.uid = UINT32_MAX;
        priv_refused(buf, raw_spawn(buf, &b), 4, -EINVAL);
        b = s;
        b.reserved = 1;
        priv_refused(buf, raw_spawn(buf, &b), 4, -EINVAL);
        b = s;
        b.t.pid = 1;
        priv_refused(buf, raw_spawn(buf, &b), 4, -EINVAL);
        b = s;
        b.t.start_time = 0;
        priv_refused(buf, raw_spawn(buf, &b), 4, -EINVAL);
        b = s;
        memcpy(b.t.id, "../x", 5);
        priv_refused(buf, raw_spawn(buf, &b), 4, -EINVAL);
        assert_true(priv_spawn_beside_encode(1, &good_t, 9, 5, 5, buf, sizeof(buf), &e) < 0);
        assert_true(priv_spawn_beside_encode(1, &good_t, 1, 0, 5, buf, sizeof(buf), &e) < 0);

        /* SSH_DIR_PREPARE */
        priv_refused(buf, raw_ssh_dir(buf, "", -1, 0), 0, -EINVAL);
        priv_refused(buf, raw_ssh_dir(buf, "../x", -1, 0), 0, -EINVAL);
        priv_refused(buf, raw_ssh_dir(buf, "a/b", -1, 0), 0, -EINVAL);
        priv_refused(buf, raw_ssh_dir(buf, "sb-1", -2, 0), 0, -EINVAL);
        priv_refused(buf, raw_ssh_dir(buf, "sb-1", (int32_t) PRIV_UID_SLOTS, 0), 0, -EINVAL);
        priv_refused(buf, raw_ssh_dir(buf, "sb-1", 0, 1), 0, -EINVAL);
        priv_refused(buf, raw_ssh_dir(buf, "sb-1", 0, 0), 4, -EPROTO);
        assert_true(priv_ssh_dir_encode(1, "sb/1", 0, buf, sizeof(buf), &e) < 0);
        assert_true(priv_ssh_dir_encode(1, "sb-1", -7, buf, sizeof(buf), &e) < 0);
}

/* ---- the real binary ---- */

static void server_start(struct priv_server *s) {
        priv_server_start(s, priv_bin, "wr-priv-vs", NULL);
        priv_sh("mkdir -p %s/state/volumes/default/good %s/state/sandboxes/sb-1/ssh %s/outside/v "
                "%s/outside/sb",
                s->dir, s->dir, s->dir, s->dir);
}

/* send, and the answer with its fds (the caller's) */
static void answer(struct priv_server *s, const void *buf, size_t len, const int *fds, size_t n_fds,
                   struct priv_reply *rep, int *rfds, size_t *n_rfds) {
        priv_server_answer(s, buf, len, fds, n_fds, rep, rfds, n_rfds);
}

/* the answer is a RESULT with err (0: done) and no fd */
static void result(struct priv_server *s, const void *buf, size_t len, const int *fds, size_t n_fds,
                   int err, struct priv_reply *rep) {
        int rfds[PRIV_FDS_MAX];
        size_t n_rfds = 0;
        answer(s, buf, len, fds, n_fds, rep, rfds, &n_rfds);
        assert_int_equal(n_rfds, 0);
        assert_int_equal(rep->hdr.type, PRIV_RESULT);
        if (rep->result.err != err)
                fail_msg("err %d (want %d): %s", rep->result.err, err, rep->result.msg);
}

/* mounts whose mount point is under path */
static int mounts_under(const char *path) {
        FILE *f = fopen("/proc/self/mountinfo", "re");
        assert_non_null(f);
        char line[4096];
        int n = 0;
        while (fgets(line, sizeof(line), f))
                n += strstr(line, path) != NULL;
        fclose(f);
        return n;
}

static void make_image(const char *path) {
        int fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
        assert_true(fd >= 0);
        assert_int_equal(ftruncate(fd, 16 << 20), 0);
        close(fd);
        struct wr_err e = {0};
        if (ext4img_mkfs(path, 256, 0, &e) < 0)
                fail_msg("mkfs: %s", e.msg);
}

/* the read end of a pipe sees EOF once warren-priv closed its copy of the
 * write end (ours is closed here) */
static void closed_there(int p[2]) {
        close(p[1]);
        char ch;
        assert_int_equal(read(p[0], &ch, 1), 0);
        close(p[0]);
}

static void test_server(void **state) {
        (void) state;
        if (geteuid() != 0)
                skip();
        struct priv_server s;
        server_start(&s);
        char p[256];
        uint8_t buf[PRIV_MSG_MAX];
        struct priv_reply rep;
        struct wr_err e = {0};
        int rfds[PRIV_FDS_MAX];
        size_t n_rfds = 0;

        /* the control: a real image mounted, its dirs made, unmounted */
        snprintf(p, sizeof(p), "%s/volumes/default/good/disk.img", s.state);
        make_image(p);
        int n = priv_volume_encode(0, PRIV_VOLUME_MOUNT, "volumes/default/good", 0, buf,
                                   sizeof(buf), &e);
        answer(&s, buf, (size_t) n, NULL, 0, &rep, rfds, &n_rfds);
        if (rep.hdr.type != PRIV_VOLUME_MOUNTED)
                fail_msg("mount: %s", rep.result.msg);
        assert_int_equal(n_rfds, 1);
        struct stat st;
        assert_int_equal(fstatat(rfds[0], "data", &st, 0), 0);
        assert_true(S_ISDIR(st.st_mode));
        assert_int_equal(fstatat(rfds[0], ".staging", &st, 0), 0);
        close(rfds[0]);
        assert_int_equal(mounts_under(s.state), 1);
        /* mounted again: the old one is detached first, one mount stays */
        answer(&s, buf, (size_t) n, NULL, 0, &rep, rfds, &n_rfds);
        assert_int_equal(rep.hdr.type, PRIV_VOLUME_MOUNTED);
        close(rfds[0]);
        assert_int_equal(mounts_under(s.state), 1);
        n = priv_volume_encode(0, PRIV_VOLUME_UNMOUNT, "volumes/default/good", 0, buf, sizeof(buf),
                               &e);
        result(&s, buf, (size_t) n, NULL, 0, 0, &rep);
        assert_int_equal(rep.result.value, 1);
        assert_int_equal(mounts_under(s.state), 0);
        result(&s, buf, (size_t) n, NULL, 0, 0, &rep); /* nothing left: value 0 */
        assert_int_equal(rep.result.value, 0);

        /* a volume dir that is a symlink (to an image outside the state dir) */
        snprintf(p, sizeof(p), "%s/outside/v/disk.img", s.dir);
        make_image(p);
        priv_sh("ln -s %s/outside/v %s/volumes/default/link", s.dir, s.state);
        n = priv_volume_encode(0, PRIV_VOLUME_MOUNT, "volumes/default/link", 0, buf, sizeof(buf),
                               &e);
        result(&s, buf, (size_t) n, NULL, 0, ELOOP, &rep);
        /* the env dir a symlink */
        priv_sh("ln -s %s/outside %s/volumes/evil", s.dir, s.state);
        n = priv_volume_encode(0, PRIV_VOLUME_MOUNT, "volumes/evil/v", 0, buf, sizeof(buf), &e);
        result(&s, buf, (size_t) n, NULL, 0, ELOOP, &rep);
        /* disk.img a symlink to the outside image */
        priv_sh("mkdir %s/volumes/default/imglink && ln -s %s/outside/v/disk.img "
                "%s/volumes/default/imglink/disk.img",
                s.state, s.dir, s.state);
        n = priv_volume_encode(0, PRIV_VOLUME_MOUNT, "volumes/default/imglink", 0, buf, sizeof(buf),
                               &e);
        result(&s, buf, (size_t) n, NULL, 0, ELOOP, &rep);
        /* volumes/ itself a symlink */
        priv_sh("mv %s/volumes %s/volumes.real && ln -s %s/outside %s/volumes", s.state, s.state,
                s.dir, s.state);
        n = priv_volume_encode(0, PRIV_VOLUME_MOUNT, "volumes/x/v", 0, buf, sizeof(buf), &e);
        result(&s, buf, (size_t) n, NULL, 0, ELOOP, &rep);
        n = priv_volume_encode(0, PRIV_VOLUME_UNMOUNT, "volumes/x/v", 0, buf, sizeof(buf), &e);
        result(&s, buf, (size_t) n, NULL, 0, ELOOP, &rep);
        assert_int_equal(mounts_under(s.dir), 0);
        snprintf(p, sizeof(p), "%s/outside/v/mnt", s.dir);
        assert_int_equal(lstat(p, &st), -1); /* nothing made there */
        /* a refused datagram: nothing done either */
        size_t rn = raw_volume(buf, PRIV_VOLUME_MOUNT, "volumes/default/../../outside/v", 0, 0);
        result(&s, buf, rn, NULL, 0, EACCES, &rep);
        assert_int_equal(mounts_under(s.dir), 0);

        /* SSH_DIR_PREPARE through a symlinked sandbox dir: refused, nothing
         * made or chowned outside */
        priv_sh("ln -s %s/outside/sb %s/sandboxes/sb-link", s.dir, s.state);
        n = priv_ssh_dir_encode(0, "sb-link", 0, buf, sizeof(buf), &e);
        result(&s, buf, (size_t) n, NULL, 0, ELOOP, &rep);
        snprintf(p, sizeof(p), "%s/outside/sb/ssh", s.dir);
        assert_int_equal(lstat(p, &st), -1);
        /* the control: a new sandbox's ssh dir, owned by slot 0's uid */
        n = priv_ssh_dir_encode(0, "sb-2", 0, buf, sizeof(buf), &e);
        result(&s, buf, (size_t) n, NULL, 0, 0, &rep);
        snprintf(p, sizeof(p), "%s/sandboxes/sb-2/ssh", s.state);
        assert_int_equal(lstat(p, &st), 0);
        assert_int_equal(st.st_uid, 1879048192u);
        assert_int_equal(st.st_mode & 07777, 0700);

        /* SPAWN_BESIDE: a cwd that is not the sandbox's ssh dir */
        int in[2], out[2];
        assert_int_equal(pipe2(in, O_CLOEXEC), 0);
        assert_int_equal(pipe2(out, O_CLOEXEC), 0);
        int cwd = open(s.dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        struct priv_target t = {.id = "sb-1", .pid = getpid(), .start_time = 1};
        n = priv_spawn_beside_encode(0, &t, PRIV_BESIDE_SSH_AGENT, 65534, 65534, buf, sizeof(buf),
                                     &e);
        int fds[4] = {cwd, in[0], out[1], out[1]};
        result(&s, buf, (size_t) n, fds, 4, EACCES, &rep);
        /* the right cwd, a stdio fd that is a directory */
        close(cwd);
        snprintf(p, sizeof(p), "%s/sandboxes/sb-1/ssh", s.state);
        cwd = open(p, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        int fds2[4] = {cwd, cwd, out[1], out[1]};
        result(&s, buf, (size_t) n, fds2, 4, EACCES, &rep);
        /* right fds, the target a real process without a user namespace
         * (this test): an agent not as nobody is refused (EPERM) */
        int fds3[4] = {cwd, in[0], out[1], out[1]};
        n = priv_spawn_beside_encode(0, &t, PRIV_BESIDE_SSH_AGENT, 5, 5, buf, sizeof(buf), &e);
        result(&s, buf, (size_t) n, fds3, 4, EPERM, &rep);
        assert_true(strstr(rep.result.msg, "runs as") != NULL);
        /* as nobody: the uid passes, but this test is not a sandbox */
        struct passwd *nb = getpwnam("nobody");
        assert_non_null(nb);
        n = priv_spawn_beside_encode(0, &t, PRIV_BESIDE_SSH_AGENT, nb->pw_uid,
                                     nb->pw_gid ? nb->pw_gid : nb->pw_uid, buf, sizeof(buf), &e);
        struct priv_reply r3;
        int rf3[PRIV_FDS_MAX];
        size_t nr3 = 0;
        answer(&s, buf, (size_t) n, fds3, 4, &r3, rf3, &nr3);
        assert_int_equal(r3.hdr.type, PRIV_RESULT);
        assert_int_equal(nr3, 0);
        assert_true(r3.result.err != 0 && r3.result.err != EPERM);
        close(cwd);
        close(in[1]);
        closed_there(out); /* warren-priv kept no copy: nothing runs with it */
        close(in[0]);
        priv_sh("rm -f %s/volumes && mv %s/volumes.real %s/volumes", s.state, s.state, s.state);
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
