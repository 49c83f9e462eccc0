/* SPDX-License-Identifier: Apache-2.0 */
/* FILE_OPEN / FILE_OPENED of the warren-init control protocol (phase 4a of
 * privilege separation): init's decoder refuses every malformed request
 * (init_req_decode), the daemon's refuses every malformed answer
 * (rt_ctl_msg_decode), and the daemon's encoder produces what init takes.
 * Behaviour against a real init: tests/init/test_init_files.py. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>

#include "init/init-proto.h"
#include "runtime/ctl.h"

static unsigned char buf[sizeof(struct ctl_hdr) + sizeof(struct ctl_file_open) + CTL_PATH_MAX + 16];

/* A FILE_OPEN datagram: header, struct, path bytes (plen of them). */
static size_t mk(struct ctl_file_open f, const char *path, size_t plen) {
        struct ctl_hdr h = {.magic = CTL_MAGIC,
                            .type = CTL_FILE_OPEN,
                            .len = (uint32_t) (sizeof(f) + plen),
                            .id = 9};
        memcpy(buf, &h, sizeof(h));
        memcpy(buf + sizeof(h), &f, sizeof(f));
        memcpy(buf + sizeof(h) + sizeof(f), path, plen);
        return sizeof(h) + sizeof(f) + plen;
}

static int dec(uint32_t flags, uint32_t mode, uint32_t uid, uint32_t gid, const char *path,
               size_t plen) {
        struct init_req r;
        struct ctl_file_open f = {
                .flags = flags, .mode = mode, .uid = uid, .gid = gid, .path_len = (uint32_t) plen};
        int ret = init_req_decode(buf, mk(f, path, plen), &r);
        if (ret == 0) {
                assert_int_equal(r.hdr.type, CTL_FILE_OPEN);
                assert_int_equal(r.file_open.flags, flags);
                assert_string_equal(r.file_open.path, path);
        }
        init_req_done(&r);
        return ret;
}

#define P(s) (s), sizeof(s)

static void test_decode_accepts(void **state) {
        (void) state;
        assert_int_equal(dec(CTL_FOPEN_PATH | CTL_FOPEN_DIRECTORY, 0, 0, 0, P("/")), 0);
        assert_int_equal(dec(CTL_FOPEN_PATH | CTL_FOPEN_NOFOLLOW, 0, 0, 0, P("/a/b")), 0);
        assert_int_equal(dec(CTL_FOPEN_READ, 0, 0, 0, P("/etc/passwd")), 0);
        assert_int_equal(dec(CTL_FOPEN_WRITE | CTL_FOPEN_TRUNC, 0, 0, 0, P("/f")), 0);
        assert_int_equal(dec(CTL_FOPEN_WRITE | CTL_FOPEN_CREATE | CTL_FOPEN_EXCL | CTL_FOPEN_OWNER,
                             07777, 1000, 1000, P("/f")),
                         0);
        assert_int_equal(
                dec(CTL_FOPEN_RDWR | CTL_FOPEN_CREATE | CTL_FOPEN_EXCL, 0644, 0, 0, P("/..")),
                0); /* ".." is the kernel's business (RESOLVE_IN_ROOT) */
        char longest[CTL_PATH_MAX];
        memset(longest, 'a', sizeof(longest) - 1);
        longest[0] = '/';
        longest[sizeof(longest) - 1] = 0;
        assert_int_equal(dec(CTL_FOPEN_READ, 0, 0, 0, longest, sizeof(longest)), 0);
}

static void test_decode_refuses(void **state) {
        (void) state;
        const uint32_t C = CTL_FOPEN_WRITE | CTL_FOPEN_CREATE | CTL_FOPEN_EXCL;
        /* flags */
        assert_int_equal(dec(0, 0, 0, 0, P("/")), -EINVAL);
        assert_int_equal(dec(CTL_FOPEN_READ | CTL_FOPEN_WRITE, 0, 0, 0, P("/")), -EINVAL);
        assert_int_equal(dec(CTL_FOPEN_READ | CTL_FOPEN_RDWR, 0, 0, 0, P("/")), -EINVAL);
        assert_int_equal(dec(CTL_FOPEN_PATH | CTL_FOPEN_READ, 0, 0, 0, P("/")), -EINVAL);
        assert_int_equal(dec(CTL_FOPEN_READ | (1u << 10), 0, 0, 0, P("/")), -EINVAL);
        assert_int_equal(dec(CTL_FOPEN_READ | 0x80000000u, 0, 0, 0, P("/")), -EINVAL);
        assert_int_equal(dec(CTL_FOPEN_PATH | CTL_FOPEN_TRUNC, 0, 0, 0, P("/")), -EINVAL);
        assert_int_equal(dec(CTL_FOPEN_PATH | CTL_FOPEN_CREATE | CTL_FOPEN_EXCL, 0, 0, 0, P("/")),
                         -EINVAL);
        assert_int_equal(dec(CTL_FOPEN_READ | CTL_FOPEN_CREATE | CTL_FOPEN_EXCL, 0, 0, 0, P("/")),
                         -EINVAL);
        assert_int_equal(dec(CTL_FOPEN_WRITE | CTL_FOPEN_CREATE, 0, 0, 0, P("/f")), -EINVAL);
        assert_int_equal(dec(CTL_FOPEN_WRITE | CTL_FOPEN_EXCL, 0, 0, 0, P("/f")), -EINVAL);
        assert_int_equal(dec(CTL_FOPEN_READ | CTL_FOPEN_TRUNC, 0, 0, 0, P("/f")), -EINVAL);
        assert_int_equal(dec(CTL_FOPEN_WRITE | CTL_FOPEN_OWNER, 0, 0, 0, P("/f")), -EINVAL);
        assert_int_equal(dec(C | CTL_FOPEN_DIRECTORY, 0, 0, 0, P("/f")), -EINVAL);
        /* mode, ids */
        assert_int_equal(dec(C, 010000, 0, 0, P("/f")), -EINVAL);
        assert_int_equal(dec(CTL_FOPEN_READ, 0644, 0, 0, P("/f")), -EINVAL);
        assert_int_equal(dec(CTL_FOPEN_READ, 0, 1, 0, P("/f")), -EINVAL);
        assert_int_equal(dec(CTL_FOPEN_READ, 0, 0, 1, P("/f")), -EINVAL);
        assert_int_equal(dec(C | CTL_FOPEN_OWNER, 0600, UINT32_MAX, 0, P("/f")), -EINVAL);
        assert_int_equal(dec(C | CTL_FOPEN_OWNER, 0600, 0, UINT32_MAX, P("/f")), -EINVAL);
        /* path */
        assert_int_equal(dec(CTL_FOPEN_READ, 0, 0, 0, P("f")), -EINVAL);
        assert_int_equal(dec(CTL_FOPEN_READ, 0, 0, 0, "", 1), -EINVAL);
        assert_int_equal(dec(CTL_FOPEN_READ, 0, 0, 0, "/f", 2), -EINVAL); /* no NUL */
        assert_int_equal(dec(CTL_FOPEN_READ, 0, 0, 0, "/a\0b", 5), -EINVAL);
        assert_int_equal(dec(CTL_FOPEN_READ, 0, 0, 0, "", 0), -EINVAL);
        char toolong[CTL_PATH_MAX + 1];
        memset(toolong, 'a', sizeof(toolong) - 1);
        toolong[0] = '/';
        toolong[sizeof(toolong) - 1] = 0;
        assert_int_equal(dec(CTL_FOPEN_READ, 0, 0, 0, toolong, sizeof(toolong)), -EINVAL);

        /* path_len that disagrees with the datagram, reserved, short */
        struct init_req r;
        struct ctl_file_open f = {.flags = CTL_FOPEN_READ, .path_len = 3};
        assert_int_equal(init_req_decode(buf, mk(f, "/f", 3) - 1, &r), -EBADMSG);
        size_t n = mk(f, "/f", 3);
        ((struct ctl_hdr *) buf)->len -= 1; /* header says less than came */
        assert_int_equal(init_req_decode(buf, n, &r), -EBADMSG);
        f.path_len = 2;
        assert_int_equal(init_req_decode(buf, mk(f, "/f", 3), &r), -EINVAL);
        f.path_len = 4;
        assert_int_equal(init_req_decode(buf, mk(f, "/f", 3), &r), -EINVAL);
        f.path_len = 3;
        f.reserved = 1;
        assert_int_equal(init_req_decode(buf, mk(f, "/f", 3), &r), -EINVAL);
        struct ctl_hdr h = {.magic = CTL_MAGIC, .type = CTL_FILE_OPEN, .len = 8, .id = 1};
        memcpy(buf, &h, sizeof(h));
        memset(buf + sizeof(h), 0, 8);
        assert_int_equal(init_req_decode(buf, sizeof(h) + 8, &r), -EINVAL);
}

static size_t mk_opened(int32_t err, uint32_t reserved) {
        struct ctl_file_opened o = {.err = err, .reserved = reserved};
        struct ctl_hdr h = {.magic = CTL_MAGIC, .type = CTL_FILE_OPENED, .len = sizeof(o), .id = 7};
        memcpy(buf, &h, sizeof(h));
        memcpy(buf + sizeof(h), &o, sizeof(o));
        return sizeof(h) + sizeof(o);
}

static void test_daemon_decode_opened(void **state) {
        (void) state;
        struct rt_ctl_msg m;
        assert_int_equal(rt_ctl_msg_decode(buf, mk_opened(0, 0), 1, &m), 0);
        assert_int_equal(m.type, CTL_FILE_OPENED);
        assert_int_equal(m.id, 7);
        assert_int_equal(m.err, 0);
        assert_int_equal(rt_ctl_msg_decode(buf, mk_opened(ENOENT, 0), 0, &m), 0);
        assert_int_equal(m.err, -ENOENT);
        /* success without the fd, failure with one, two fds */
        assert_int_equal(rt_ctl_msg_decode(buf, mk_opened(0, 0), 0, &m), -EBADMSG);
        assert_int_equal(rt_ctl_msg_decode(buf, mk_opened(ENOENT, 0), 1, &m), -EBADMSG);
        assert_int_equal(rt_ctl_msg_decode(buf, mk_opened(0, 0), 2, &m), -EBADMSG);
        /* bad errno, reserved, size */
        assert_int_equal(rt_ctl_msg_decode(buf, mk_opened(-1, 0), 0, &m), -EBADMSG);
        assert_int_equal(rt_ctl_msg_decode(buf, mk_opened(1 << 20, 0), 0, &m), -EBADMSG);
        assert_int_equal(rt_ctl_msg_decode(buf, mk_opened(0, 1), 1, &m), -EBADMSG);
        size_t n = mk_opened(0, 0);
        ((struct ctl_hdr *) buf)->len = 4;
        assert_int_equal(rt_ctl_msg_decode(buf, n - 4, 1, &m), -EBADMSG);
}

/* What rt_ctl_send_file_open puts on the wire init decodes back. */
static void test_encode_round_trip(void **state) {
        (void) state;
        int sp[2];
        assert_int_equal(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sp), 0);
        uint32_t fl = CTL_FOPEN_WRITE | CTL_FOPEN_CREATE | CTL_FOPEN_EXCL | CTL_FOPEN_OWNER;
        assert_int_equal(rt_ctl_send_file_open(sp[0], 42, "/w/x.txt", fl, 0640, 5, 6), 0);
        ssize_t n = recv(sp[1], buf, sizeof(buf), 0);
        assert_true(n > 0);
        struct init_req r;
        assert_int_equal(init_req_decode(buf, (size_t) n, &r), 0);
        assert_int_equal(r.hdr.id, 42);
        assert_int_equal(r.file_open.flags, fl);
        assert_int_equal(r.file_open.mode, 0640);
        assert_int_equal(r.file_open.uid, 5);
        assert_int_equal(r.file_open.gid, 6);
        assert_string_equal(r.file_open.path, "/w/x.txt");
        /* the encoder refuses what it can tell is wrong */
        assert_int_equal(rt_ctl_send_file_open(sp[0], 1, "rel", CTL_FOPEN_READ, 0, 0, 0), -EINVAL);
        assert_int_equal(rt_ctl_send_file_open(sp[0], 1, NULL, CTL_FOPEN_READ, 0, 0, 0), -EINVAL);
        assert_int_equal(rt_ctl_send_file_open(sp[0], 1, "/", 1u << 12, 0, 0, 0), -EINVAL);
        close(sp[0]);
        close(sp[1]);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_decode_accepts),
                cmocka_unit_test(test_decode_refuses),
                cmocka_unit_test(test_daemon_decode_opened),
                cmocka_unit_test(test_encode_round_trip),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
