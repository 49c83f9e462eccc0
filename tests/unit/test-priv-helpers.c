/* SPDX-License-Identifier: Apache-2.0 */
/* src/priv, phase 3's helpers (HELPER_START 17, UNPACK_START 18, reply
 * HELPER_STARTED 0x91; docs/privsep.md "Phase 3, helpers, as built"):
 * round trips; hand-written refusals of each field (unknown kind, roles,
 * flags of the other kind, the wrong fd count, fds where none belong,
 * egress fields on a signer, deny ports out of order, upstream families
 * and ports, reserved bytes, a dir outside layers/tmp/, garbage after a
 * NUL, a reply without its pidfd); and the real warren-priv binary
 * (argv[1]) refusing them with nothing started (its helpers are a script
 * of this test that records each start: WARREN_EGRESS, WARREN_SIGNER,
 * WARREN_UNPACK_HELPER) and every fd closed, refusing fds of the wrong
 * kind and a staging dir through a symlink, then starting a signer and
 * an unpack (the controls: argv built by warren-priv, fds 3 and 4, a
 * pidfd in the answer). HELPER_START FETCH (3): its refusals (a role,
 * egress fields, other kinds' flags, fds against its flags; through the
 * binary a pipe or a listening socket for its socket, an unsealed
 * memfd for a config), the control (argv, fds 3-5, its chroot prepared)
 * and its kill by warren-priv once our end of its socket closes. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
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
#include <sys/un.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "priv-harness.h"

#include "priv/priv-proto.h"

static const char *priv_bin;

static void good_signer(struct priv_helper_start *h) {
        memset(h, 0, sizeof(*h));
        h->kind = PRIV_HELPER_SIGNER;
        h->role = PRIV_SIGNER_SECRETS;
}

static void good_fetch(struct priv_helper_start *h) {
        memset(h, 0, sizeof(*h));
        h->kind = PRIV_HELPER_FETCH;
        h->flags = PRIV_HELPER_F_REGISTRY_CONFIG | PRIV_HELPER_F_LOOPBACK_ONLY;
}

static void good_egress(struct priv_helper_start *h) {
        memset(h, 0, sizeof(*h));
        h->kind = PRIV_HELPER_EGRESS;
        h->flags = PRIV_HELPER_F_SIGNER;
        h->n_deny_ports = 2;
        h->deny_ports[0] = 8080;
        h->deny_ports[1] = 9090;
        h->upstream_family = 4;
        h->upstream_port = 53;
        memcpy(h->upstream_addr, "\xc6\x12\x00\x35", 4);
}

/* h encoded without the encoder's checks */
static size_t raw(uint32_t type, const void *p, size_t plen, uint8_t *buf) {
        struct priv_hdr hdr = {.magic = PRIV_MAGIC, .type = type, .len = (uint32_t) plen, .id = 5};
        memcpy(buf, &hdr, sizeof(hdr));
        memcpy(buf + sizeof(hdr), p, plen);
        return sizeof(hdr) + plen;
}

static void helper_refused(const struct priv_helper_start *h, size_t n_fds, int code) {
        uint8_t buf[PRIV_MSG_MAX];
        size_t n = raw(PRIV_HELPER_START, h, sizeof(*h), buf);
        priv_refused(buf, n, n_fds, code);
        struct wr_err e = {0};
        if (code != -EPROTO) /* a field: the encoder refuses it too (it sends the kind's count) */
                assert_true(priv_helper_start_encode(1, h, buf, sizeof(buf), &e) < 0);
}

static void unpack_refused_raw(const struct priv_unpack_start *u, size_t n_fds, int code) {
        uint8_t buf[PRIV_MSG_MAX];
        size_t n = raw(PRIV_UNPACK_START, u, sizeof(*u), buf);
        priv_refused(buf, n, n_fds, code);
}

static void test_round_trips(void **state) {
        (void) state;
        uint8_t buf[PRIV_MSG_MAX];
        struct priv_req req;
        struct priv_reply rep;
        struct wr_err e = {0};
        struct priv_helper_start h;
        good_signer(&h);
        for (uint32_t role = 1; role <= 3; role++) {
                h.role = role;
                h.flags = role == 2 ? PRIV_HELPER_F_JSON_LOG : 0;
                int n = priv_helper_start_encode(9, &h, buf, sizeof(buf), &e);
                assert_true(n > 0);
                assert_int_equal(priv_req_decode(buf, (size_t) n, 2, &req, &e), 0);
                assert_int_equal(req.hdr.type, PRIV_HELPER_START);
                assert_memory_equal(&req.helper, &h, sizeof(h));
        }
        good_egress(&h);
        static const uint32_t flags[] = {0, PRIV_HELPER_F_SIGNER,
                                         PRIV_HELPER_F_SIGNER | PRIV_HELPER_F_UPSTREAM_CA,
                                         PRIV_HELPER_F_UPSTREAM_CA};
        for (size_t i = 0; i < 4; i++) {
                h.flags = flags[i];
                size_t want = 4 + !!(flags[i] & PRIV_HELPER_F_SIGNER) +
                              !!(flags[i] & PRIV_HELPER_F_UPSTREAM_CA);
                assert_int_equal(priv_helper_fds(h.kind, h.flags), want);
                int n = priv_helper_start_encode(9, &h, buf, sizeof(buf), &e);
                assert_true(n > 0);
                assert_int_equal(priv_req_decode(buf, (size_t) n, want, &req, &e), 0);
                assert_memory_equal(&req.helper, &h, sizeof(h));
        }
        h.upstream_family = 6;
        memset(h.upstream_addr, 0, 16);
        h.upstream_addr[15] = 1;
        int n = priv_helper_start_encode(9, &h, buf, sizeof(buf), &e);
        assert_int_equal(priv_req_decode(buf, (size_t) n, 5, &req, &e), 0);

        /* warren-fetch: its socket, then each config's memfd (1..3 fds) */
        good_fetch(&h);
        for (uint32_t f = 0; f < 8; f++) {
                h.flags = (f & 1 ? PRIV_HELPER_F_REGISTRY_CONFIG : 0) |
                          (f & 2 ? PRIV_HELPER_F_DOCKER_CONFIG : 0) |
                          (f & 4 ? PRIV_HELPER_F_LOOPBACK_ONLY : 0);
                size_t want = 1 + (f & 1) + !!(f & 2);
                assert_int_equal(priv_helper_fds(h.kind, h.flags), want);
                n = priv_helper_start_encode(9, &h, buf, sizeof(buf), &e);
                assert_true(n > 0);
                assert_int_equal(priv_req_decode(buf, (size_t) n, want, &req, &e), 0);
                assert_memory_equal(&req.helper, &h, sizeof(h));
        }

        n = priv_unpack_start_encode(3, "layers/tmp/unpack-abc", buf, sizeof(buf), &e);
        assert_true(n > 0);
        assert_int_equal(priv_req_decode(buf, (size_t) n, 2, &req, &e), 0);
        assert_int_equal(req.hdr.type, PRIV_UNPACK_START);
        assert_string_equal(req.unpack.dir, "layers/tmp/unpack-abc");
        assert_string_equal(priv_type_name(PRIV_HELPER_START), "HELPER_START");
        assert_string_equal(priv_type_name(PRIV_UNPACK_START), "UNPACK_START");
        assert_string_equal(priv_type_name(PRIV_HELPER_STARTED), "HELPER_STARTED");

        struct priv_helper_started st = {.pid = 77, .start_time = 12345, .served = 1};
        n = priv_helper_started_encode(3, &st, buf, sizeof(buf));
        assert_int_equal(priv_reply_decode(buf, (size_t) n, 1, &rep, &e), 0);
        assert_int_equal(rep.helper_started.pid, 77);
        assert_int_equal(rep.helper_started.start_time, 12345);
        assert_int_equal(priv_type_fds(PRIV_HELPER_STARTED), 1);
}

static void test_refusals(void **state) {
        (void) state;
        struct priv_helper_start h;
        /* unknown kinds */
        good_signer(&h);
        h.kind = 0;
        helper_refused(&h, 2, -EINVAL);
        h.kind = 4;
        helper_refused(&h, 2, -EINVAL);
        /* roles */
        good_signer(&h);
        h.role = 0;
        helper_refused(&h, 2, -EINVAL);
        h.role = 4;
        helper_refused(&h, 2, -EINVAL);
        good_egress(&h);
        h.role = PRIV_SIGNER_CA;
        helper_refused(&h, 5, -EINVAL);
        /* flags of the other kind, unknown flags */
        good_signer(&h);
        h.flags = PRIV_HELPER_F_SIGNER;
        helper_refused(&h, 2, -EINVAL);
        h.flags = 1u << 9;
        helper_refused(&h, 2, -EINVAL);
        good_egress(&h);
        h.flags |= PRIV_HELPER_F_JSON_LOG;
        helper_refused(&h, 5, -EINVAL);
        /* the wrong fd count (the table's range, then the kind's exact one) */
        good_signer(&h);
        helper_refused(&h, 0, -EPROTO);
        helper_refused(&h, 1, -EPROTO);
        helper_refused(&h, 3, -EPROTO);
        good_egress(&h);
        helper_refused(&h, 4, -EPROTO);
        helper_refused(&h, 6, -EPROTO);
        helper_refused(&h, 7, -EPROTO);
        h.flags = 0;
        helper_refused(&h, 5, -EPROTO);
        /* warren-fetch: a role, egress fields, flags of the other kinds,
         * the wrong fd count for its flags */
        good_fetch(&h);
        h.role = PRIV_SIGNER_JWS;
        helper_refused(&h, 2, -EINVAL);
        good_fetch(&h);
        h.upstream_port = 53;
        helper_refused(&h, 2, -EINVAL);
        good_fetch(&h);
        h.deny_ports[0] = 22;
        helper_refused(&h, 2, -EINVAL);
        good_fetch(&h);
        h.upstream_addr[15] = 1;
        helper_refused(&h, 2, -EINVAL);
        good_fetch(&h);
        h.flags |= PRIV_HELPER_F_SIGNER;
        helper_refused(&h, 2, -EINVAL);
        good_fetch(&h);
        h.flags |= PRIV_HELPER_F_JSON_LOG;
        helper_refused(&h, 2, -EINVAL);
        good_fetch(&h);
        h.reserved[1] = 1;
        helper_refused(&h, 2, -EINVAL);
        good_fetch(&h);
        helper_refused(&h, 1, -EPROTO);
        helper_refused(&h, 3, -EPROTO);
        h.flags = 0;
        helper_refused(&h, 0, -EPROTO);
        helper_refused(&h, 2, -EPROTO);
        good_signer(&h);
        h.flags = PRIV_HELPER_F_LOOPBACK_ONLY; /* a fetch flag on a signer */
        helper_refused(&h, 2, -EINVAL);
        /* egress fields on a signer */
        good_signer(&h);
        h.n_deny_ports = 1;
        h.deny_ports[0] = 80;
        helper_refused(&h, 2, -EINVAL);
        good_signer(&h);
        h.upstream_port = 53;
        helper_refused(&h, 2, -EINVAL);
        good_signer(&h);
        h.upstream_addr[3] = 1;
        helper_refused(&h, 2, -EINVAL);
        /* deny ports: a 0 inside, one after n, too many */
        good_egress(&h);
        h.deny_ports[1] = 0;
        helper_refused(&h, 5, -EINVAL);
        good_egress(&h);
        h.deny_ports[5] = 22;
        helper_refused(&h, 5, -EINVAL);
        good_egress(&h);
        h.n_deny_ports = 17;
        helper_refused(&h, 5, -EINVAL);
        /* upstream: family, port, bytes after an IPv4 address, unset */
        good_egress(&h);
        h.upstream_family = 5;
        helper_refused(&h, 5, -EINVAL);
        good_egress(&h);
        h.upstream_port = 0;
        helper_refused(&h, 5, -EINVAL);
        good_egress(&h);
        h.upstream_addr[4] = 1;
        helper_refused(&h, 5, -EINVAL);
        good_egress(&h);
        memset(h.upstream_addr, 0, 16);
        helper_refused(&h, 5, -EINVAL);
        /* reserved */
        good_egress(&h);
        h.reserved16 = 1;
        helper_refused(&h, 5, -EINVAL);
        good_egress(&h);
        h.reserved[1] = 1;
        helper_refused(&h, 5, -EINVAL);

        /* UNPACK_START: a dir outside layers/tmp/, garbage after its NUL,
         * flags, fds */
        static const char *const bad_dirs[] = {
                "sandboxes/x",
                "layers/sha256/abc",
                "layers/tmp",
                "layers/tmp/a/b",
                "layers/tmp/..",
                "layers/tmp/../sha256",
                "/layers/tmp/x",
                "layers//tmp/x",
                "layers/tmpx/a",
                "layers/tmp/a\x01b",
                "",
                "layers/tmp/",
        };
        struct priv_unpack_start u;
        for (size_t i = 0; i < sizeof(bad_dirs) / sizeof(bad_dirs[0]); i++) {
                memset(&u, 0, sizeof(u));
                memcpy(u.dir, bad_dirs[i], strlen(bad_dirs[i]));
                unpack_refused_raw(&u, 2, -EACCES);
                uint8_t buf[PRIV_MSG_MAX];
                struct wr_err e = {0};
                assert_true(priv_unpack_start_encode(1, bad_dirs[i], buf, sizeof(buf), &e) < 0);
        }
        memset(&u, 0, sizeof(u));
        strcpy(u.dir, "layers/tmp/unpack-1");
        u.dir[sizeof(u.dir) - 1] = 'x'; /* garbage after the NUL */
        unpack_refused_raw(&u, 2, -EINVAL);
        memset(&u, 0, sizeof(u));
        memset(u.dir, 'a', sizeof(u.dir)); /* no NUL */
        unpack_refused_raw(&u, 2, -EINVAL);
        memset(&u, 0, sizeof(u));
        strcpy(u.dir, "layers/tmp/unpack-1");
        u.flags = 1;
        unpack_refused_raw(&u, 2, -EINVAL);
        u.flags = 0;
        u.reserved = 1;
        unpack_refused_raw(&u, 2, -EINVAL);
        u.reserved = 0;
        unpack_refused_raw(&u, 0, -EPROTO);
        unpack_refused_raw(&u, 1, -EPROTO);
        unpack_refused_raw(&u, 3, -EPROTO);
        unpack_refused_raw(&u, 0, -EPROTO);

        /* HELPER_STARTED: without its pidfd, with two, bad fields; as a
         * request; a HELLO with an fd where none belongs */
        uint8_t buf[PRIV_MSG_MAX];
        struct priv_reply rep;
        struct wr_err e = {0};
        struct priv_helper_started st = {.pid = 77, .start_time = 1};
        int n = priv_helper_started_encode(3, &st, buf, sizeof(buf));
        assert_int_equal(priv_reply_decode(buf, (size_t) n, 0, &rep, &e), -EPROTO);
        assert_int_equal(priv_reply_decode(buf, (size_t) n, 2, &rep, &e), -EPROTO);
        priv_refused(buf, (size_t) n, 1, -EPROTO);
        st.pid = 1;
        n = priv_helper_started_encode(3, &st, buf, sizeof(buf));
        assert_int_equal(priv_reply_decode(buf, (size_t) n, 1, &rep, &e), -EINVAL);
        st.pid = 77;
        st.start_time = 0;
        n = priv_helper_started_encode(3, &st, buf, sizeof(buf));
        assert_int_equal(priv_reply_decode(buf, (size_t) n, 1, &rep, &e), -EINVAL);
        n = priv_hello_encode(1, buf, sizeof(buf));
        priv_refused(buf, (size_t) n, 1, -EPROTO);
        /* a short or long HELPER_START */
        good_signer(&h);
        size_t len = raw(PRIV_HELPER_START, &h, sizeof(h), buf);
        priv_refused(buf, len - 1, 2, -EPROTO);
}

/* ---- the real binary ---- */

/* The log the fake helper appends to (one line per start). */
static const char *log_of(const struct priv_server *s) {
        static char log[160];
        snprintf(log, sizeof(log), "%s/started", s->dir);
        return log;
}

static void server_start(struct priv_server *s) {
        priv_server_dirs(s, "wr-priv-hl");
        /* the fake helper: records its argv and whether fds 3 and 4 are
         * open (warren-priv runs it as each of the three; it looks them up
         * at start, so they exist first) */
        priv_sh("mkdir -p %s/state/layers/tmp/unpack-ok %s/state/layers/sha256 %s/outside && "
                "ln -s ../../outside %s/state/layers/tmp/unpack-evil && "
                "printf '#!/bin/sh\\na=\"$*\"; set -- /proc/$$/fd/*; "
                "echo \"$0 $a fds: $* .\" >> %s\\n' > %s/helper && chmod 755 %s/helper && "
                "{ cat %s/helper; echo 'exec sleep 30'; } > %s/fetch && chmod 755 %s/fetch",
                s->dir, s->dir, s->dir, s->dir, log_of(s), s->dir, s->dir, s->dir, s->dir, s->dir);
        char helper[128];
        snprintf(helper, sizeof(helper), "%s/helper", s->dir);
        setenv("WARREN_EGRESS", helper, 1);
        setenv("WARREN_SIGNER", helper, 1);
        setenv("WARREN_UNPACK_HELPER", helper, 1);
        /* warren-fetch's fake lingers after it recorded its start: warren-priv
         * must kill it once our end of its socket is gone */
        char fetch[128];
        snprintf(fetch, sizeof(fetch), "%s/fetch", s->dir);
        setenv("WARREN_FETCH_HELPER", fetch, 1);
        /* warren-fetch's chroot: <state>/fetch-root, made by warren-priv */
        unsetenv("WARREN_FETCH_ROOT");
        unsetenv("WARREN_FETCH_USER");
        unsetenv("WARREN_FETCH_SECCOMP_STRICT");
        priv_server_exec(s, priv_bin, "/bin/true");
}

/* Send, and the answer (its fds into rfds). */
static void answer(struct priv_server *s, const void *buf, size_t len, const int *fds, size_t n_fds,
                   struct priv_reply *rep, int rfds[PRIV_FDS_MAX], size_t *n_rfds) {
        priv_server_answer(s, buf, len, fds, n_fds, rep, rfds, n_rfds);
}

/* A refusal: a RESULT with err, no fds, nothing started. */
static void refused_there(struct priv_server *s, const void *buf, size_t len, const int *fds,
                          size_t n_fds, int err) {
        struct priv_reply rep;
        int rfds[PRIV_FDS_MAX];
        size_t n_rfds;
        answer(s, buf, len, fds, n_fds, &rep, rfds, &n_rfds);
        assert_int_equal(rep.hdr.type, PRIV_RESULT);
        assert_int_equal(n_rfds, 0);
        if (err)
                assert_int_equal(rep.result.err, err);
        struct stat st;
        assert_int_equal(lstat(log_of(s), &st), -1);
}

/* the read end of a pipe sees EOF once warren-priv closed its copy of the
 * write end (ours is closed here) */
static void closed_there(int p[2]) {
        close(p[1]);
        char ch;
        assert_int_equal(read(p[0], &ch, 1), 0);
        close(p[0]);
}

static int memfd(void) {
        int fd = memfd_create("key", MFD_CLOEXEC | MFD_ALLOW_SEALING);
        assert_true(fd >= 0);
        assert_int_equal(write(fd, "k", 1), 1);
        return fd;
}

/* a config's memfd as fetch.c seals it */
static int sealed(void) {
        int fd = memfd();
        assert_int_equal(fcntl(fd, F_ADD_SEALS, F_SEAL_WRITE | F_SEAL_GROW | F_SEAL_SEAL), 0);
        return fd;
}

/* the fake helper's line, once it ran */
static void started_line(struct priv_server *s, char *out, size_t size) {
        for (int i = 0; i < 500; i++) {
                FILE *f = fopen(log_of(s), "r");
                if (f) {
                        bool got = fgets(out, (int) size, f) != NULL;
                        fclose(f);
                        if (got)
                                return;
                }
                usleep(10000);
        }
        fail_msg("the helper never ran");
}

/* the helper had 0..last-1 open and nothing else below 10 (the shell keeps
 * its script at 10 or above; the listing itself is the lowest free fd,
 * last: a leaked fd would push it further) */
static void fds_upto(const char *line, int last) {
        const char *f = strstr(line, " fds: ");
        assert_non_null(f);
        for (int fd = 0; fd < 10; fd++) {
                char want[32];
                snprintf(want, sizeof(want), "/fd/%d ", fd);
                if (fd <= last)
                        assert_non_null(strstr(f, want));
                else if (strstr(f, want))
                        fail_msg("fd %d open in the helper: %s", fd, line);
        }
}

/* a signer or an unpack: 0-4, the listing at 5 */
static void fds_are(const char *line) {
        fds_upto(line, 5);
}

static void test_server(void **state) {
        (void) state;
        if (geteuid() != 0)
                skip();
        struct priv_server s;
        server_start(&s);
        uint8_t buf[PRIV_MSG_MAX];
        struct wr_err e = {0};
        struct priv_helper_start h;
        int p[2], sp[2];

        /* an unknown kind: refused undecoded, both fds closed */
        good_signer(&h);
        h.kind = 7;
        size_t n = raw(PRIV_HELPER_START, &h, sizeof(h), buf);
        assert_int_equal(pipe2(p, O_CLOEXEC), 0);
        int fds[PRIV_HELPER_FDS_MAX] = {memfd(), p[1]};
        refused_there(&s, buf, n, fds, 2, EINVAL);
        close(fds[0]);
        closed_there(p);

        /* a signer with three fds: refused, all closed */
        good_signer(&h);
        n = (size_t) priv_helper_start_encode(1, &h, buf, sizeof(buf), &e);
        assert_int_equal(pipe2(p, O_CLOEXEC), 0);
        fds[0] = memfd();
        fds[1] = p[1];
        fds[2] = p[1];
        refused_there(&s, buf, n, fds, 3, EPROTO);
        close(fds[0]);
        closed_there(p);

        /* an UNPACK_START outside layers/tmp/ and one with garbage after
         * its NUL: refused, fds closed */
        struct priv_unpack_start u;
        memset(&u, 0, sizeof(u));
        strcpy(u.dir, "sandboxes/x");
        n = raw(PRIV_UNPACK_START, &u, sizeof(u), buf);
        assert_int_equal(pipe2(p, O_CLOEXEC), 0);
        fds[0] = p[0];
        fds[1] = p[1];
        refused_there(&s, buf, n, fds, 2, EACCES);
        closed_there(p);
        memset(&u, 0, sizeof(u));
        strcpy(u.dir, "layers/tmp/unpack-ok");
        u.dir[100] = 'x';
        n = raw(PRIV_UNPACK_START, &u, sizeof(u), buf);
        assert_int_equal(pipe2(p, O_CLOEXEC), 0);
        fds[0] = p[0];
        fds[1] = p[1];
        refused_there(&s, buf, n, fds, 2, EINVAL);
        closed_there(p);

        /* an fd where none belongs (HELLO) */
        n = (size_t) priv_hello_encode(1, buf, sizeof(buf));
        assert_int_equal(pipe2(p, O_CLOEXEC), 0);
        refused_there(&s, buf, n, &p[1], 1, EPROTO);
        closed_there(p);

        /* decoded, but fds of the wrong kind: a pipe for the signer's
         * socket, a pipe for warren-egress's ctl socket */
        good_signer(&h);
        n = (size_t) priv_helper_start_encode(1, &h, buf, sizeof(buf), &e);
        assert_int_equal(pipe2(p, O_CLOEXEC), 0);
        fds[0] = memfd();
        fds[1] = p[1];
        refused_there(&s, buf, n, fds, 2, EINVAL);
        close(fds[0]);
        closed_there(p);
        good_egress(&h);
        h.flags = 0;
        n = (size_t) priv_helper_start_encode(1, &h, buf, sizeof(buf), &e);
        assert_int_equal(pipe2(p, O_CLOEXEC), 0);
        fds[0] = fds[1] = fds[2] = fds[3] = p[1];
        refused_there(&s, buf, n, fds, 4, EINVAL);
        closed_there(p);

        /* warren-fetch: a pipe for its socket; a config that is a memfd
         * not sealed (warren-fetch truncates it: never a file of the host) */
        good_fetch(&h);
        n = (size_t) priv_helper_start_encode(1, &h, buf, sizeof(buf), &e);
        assert_int_equal(pipe2(p, O_CLOEXEC), 0);
        fds[0] = p[1];
        fds[1] = sealed();
        refused_there(&s, buf, n, fds, 2, EINVAL);
        close(fds[1]);
        closed_there(p);
        assert_int_equal(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sp), 0);
        assert_int_equal(pipe2(p, O_CLOEXEC), 0);
        fds[0] = sp[1];
        fds[1] = memfd();
        refused_there(&s, buf, n, fds, 2, EINVAL);
        close(fds[1]);
        close(sp[1]);
        char ch;
        assert_int_equal(read(sp[0], &ch, 1), 0); /* its end closed there too */
        close(sp[0]);
        close(p[0]);
        close(p[1]);
        /* a listening socket is not its socket */
        fds[0] = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
        assert_true(fds[0] >= 0);
        struct sockaddr_un sun = {.sun_family = AF_UNIX};
        assert_int_equal(bind(fds[0], (struct sockaddr *) &sun, sizeof(sa_family_t)), 0);
        assert_int_equal(listen(fds[0], 1), 0);
        fds[1] = sealed();
        refused_there(&s, buf, n, fds, 2, EINVAL);
        close(fds[0]);
        close(fds[1]);

        /* a staging dir through a symlink is not followed */
        n = (size_t) priv_unpack_start_encode(1, "layers/tmp/unpack-evil", buf, sizeof(buf), &e);
        assert_int_equal(pipe2(p, O_CLOEXEC), 0);
        fds[0] = p[0];
        fds[1] = p[1];
        refused_there(&s, buf, n, fds, 2, ELOOP);
        closed_there(p);

        /* the control: a signer starts, built by warren-priv, with fds 3
         * and 4 and nothing after them; the answer carries its pidfd */
        good_signer(&h);
        h.role = PRIV_SIGNER_JWS;
        n = (size_t) priv_helper_start_encode(1, &h, buf, sizeof(buf), &e);
        assert_int_equal(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sp), 0);
        fds[0] = memfd();
        fds[1] = sp[1];
        struct priv_reply rep;
        int rfds[PRIV_FDS_MAX];
        size_t n_rfds;
        answer(&s, buf, n, fds, 2, &rep, rfds, &n_rfds);
        assert_int_equal(rep.hdr.type, PRIV_HELPER_STARTED);
        assert_int_equal(n_rfds, 1);
        assert_true(rep.helper_started.pid > 1 && rep.helper_started.start_time > 0);
        struct pollfd pf = {.fd = rfds[0], .events = POLLIN};
        assert_int_equal(poll(&pf, 1, 5000), 1); /* it exited: the pidfd says so */
        close(rfds[0]);
        close(fds[0]);
        close(sp[0]);
        close(sp[1]);
        char line[512];
        started_line(&s, line, sizeof(line));
        assert_non_null(strstr(line, " --jws-key-fd 3 --sock-fd 4 --log-level info"));
        fds_are(line);
        assert_int_equal(unlink(log_of(&s)), 0);

        /* warren-fetch with both configs: its argv built by warren-priv
         * (no --ref, the configs named by warrend's options, the chroot
         * <state>/fetch-root, which it prepared: root's, etc/ inside),
         * fds 3-5 */
        good_fetch(&h);
        h.flags |= PRIV_HELPER_F_DOCKER_CONFIG;
        n = (size_t) priv_helper_start_encode(1, &h, buf, sizeof(buf), &e);
        assert_int_equal(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sp), 0);
        fds[0] = sp[1];
        fds[1] = sealed();
        fds[2] = sealed();
        answer(&s, buf, n, fds, 3, &rep, rfds, &n_rfds);
        assert_int_equal(rep.hdr.type, PRIV_HELPER_STARTED);
        assert_int_equal(n_rfds, 1);
        close(sp[1]);
        close(fds[1]);
        close(fds[2]);
        /* our end stays open until it ran: warren-priv kills a warren-fetch
         * whose other end is gone, as it does now (it would sleep 30 s) */
        started_line(&s, line, sizeof(line));
        pf.fd = rfds[0];
        assert_int_equal(poll(&pf, 1, 0), 0);
        close(sp[0]);
        assert_int_equal(poll(&pf, 1, 5000), 1);
        close(rfds[0]);
        char want[256];
        snprintf(want, sizeof(want),
                 " --sock-fd 3 --registry-config-fd 4 --docker-config-fd 5 --loopback-only "
                 "--root %s/fetch-root fds: ",
                 s.state);
        if (!strstr(line, want))
                fail_msg("argv: %s", line);
        fds_upto(line, 6);
        struct stat rst;
        char etc[160];
        snprintf(etc, sizeof(etc), "%s/fetch-root/etc/nsswitch.conf", s.state);
        assert_int_equal(stat(etc, &rst), 0);
        assert_int_equal(rst.st_uid, 0);
        assert_int_equal(unlink(log_of(&s)), 0);

        /* and an unpack into layers/tmp/unpack-ok */
        n = (size_t) priv_unpack_start_encode(1, "layers/tmp/unpack-ok", buf, sizeof(buf), &e);
        assert_int_equal(pipe2(p, O_CLOEXEC), 0);
        fds[0] = p[0];
        fds[1] = p[1];
        answer(&s, buf, n, fds, 2, &rep, rfds, &n_rfds);
        assert_int_equal(rep.hdr.type, PRIV_HELPER_STARTED);
        assert_int_equal(n_rfds, 1);
        close(rfds[0]);
        close(p[0]);
        close(p[1]);
        started_line(&s, line, sizeof(line));
        fds_are(line);
        priv_server_stop(&s);
}

int main(int argc, char **argv) {
        if (argc < 2) {
                fprintf(stderr, "usage: test-priv-helpers PATH-OF-warren-priv\n");
                return 2;
        }
        priv_bin = argv[1];
        signal(SIGPIPE, SIG_IGN);
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_round_trips),
                cmocka_unit_test(test_refusals),
                cmocka_unit_test(test_server),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
