/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests of src/runtime's pure helpers and of the seccomp policy (the
 * filter is loaded in a forked child; no root needed). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <linux/capability.h>
#include <linux/seccomp.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/personality.h>
#include <sys/prctl.h>
#include <sys/ptrace.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "runtime/runtime-internal.h"

#ifndef AF_VSOCK
#define AF_VSOCK 40
#endif

static void test_id_valid(void **state) {
        assert_true(rt_id_valid("a"));
        assert_true(rt_id_valid("sb-1234_x.y"));
        assert_true(
                rt_id_valid("0123456789012345678901234567890123456789012345678901234567890123"));
        assert_false(
                rt_id_valid("01234567890123456789012345678901234567890123456789012345678901234"));
        assert_false(rt_id_valid(NULL));
        assert_false(rt_id_valid(""));
        assert_false(rt_id_valid("."));
        assert_false(rt_id_valid(".."));
        assert_false(rt_id_valid("-x"));
        assert_false(rt_id_valid("a/b"));
        assert_false(rt_id_valid("a b"));
        assert_false(rt_id_valid("a\n"));
        assert_false(rt_id_valid("ä"));
}

static void test_memory_parse(void **state) {
        uint64_t v = 0;
        assert_int_equal(rt_memory_parse("1048576", &v), 0);
        assert_int_equal(v, 1048576);
        assert_int_equal(rt_memory_parse("512Mi", &v), 0);
        assert_int_equal(v, 512ULL << 20);
        assert_int_equal(rt_memory_parse("4Gi", &v), 0);
        assert_int_equal(v, 4ULL << 30);
        assert_int_equal(rt_memory_parse("1G", &v), 0);
        assert_int_equal(v, 1ULL << 30);
        assert_int_equal(rt_memory_parse("64k", &v), 0);
        assert_int_equal(v, 64ULL << 10);
        assert_int_equal(rt_memory_parse("2MB", &v), 0);
        assert_int_equal(v, 2ULL << 20);
        assert_int_equal(rt_memory_parse("1T", &v), 0);
        assert_int_equal(v, 1ULL << 40);
        assert_int_equal(rt_memory_parse("100B", &v), 0);
        assert_int_equal(v, 100);
        v = 7;
        assert_int_equal(rt_memory_parse("", &v), -EINVAL);
        assert_int_equal(rt_memory_parse(NULL, &v), -EINVAL);
        assert_int_equal(rt_memory_parse("-1", &v), -EINVAL);
        assert_int_equal(rt_memory_parse(" 1", &v), -EINVAL);
        assert_int_equal(rt_memory_parse("1.5G", &v), -EINVAL);
        assert_int_equal(rt_memory_parse("1X", &v), -EINVAL);
        assert_int_equal(rt_memory_parse("1Gx", &v), -EINVAL);
        assert_int_equal(rt_memory_parse("Gi", &v), -EINVAL);
        assert_int_equal(rt_memory_parse("0", &v), -ERANGE);
        assert_int_equal(rt_memory_parse("99999999999999999999", &v), -ERANGE);
        assert_int_equal(rt_memory_parse("17179869184Gi", &v), -ERANGE);
        assert_int_equal(v, 7); /* untouched on failure */
}

static void test_cpu_parse(void **state) {
        uint32_t m = 0;
        assert_int_equal(rt_cpu_parse("2", &m), 0);
        assert_int_equal(m, 2000);
        assert_int_equal(rt_cpu_parse("0.5", &m), 0);
        assert_int_equal(m, 500);
        assert_int_equal(rt_cpu_parse("1.25", &m), 0);
        assert_int_equal(m, 1250);
        assert_int_equal(rt_cpu_parse("0.001", &m), 0);
        assert_int_equal(m, 1);
        assert_int_equal(rt_cpu_parse("500m", &m), 0);
        assert_int_equal(m, 500);
        assert_int_equal(rt_cpu_parse("1500m", &m), 0);
        assert_int_equal(m, 1500);
        m = 9;
        assert_int_equal(rt_cpu_parse("0", &m), -ERANGE);
        assert_int_equal(rt_cpu_parse("0m", &m), -ERANGE);
        assert_int_equal(rt_cpu_parse("0.0001", &m), -EINVAL);
        assert_int_equal(rt_cpu_parse("1.", &m), -EINVAL);
        assert_int_equal(rt_cpu_parse(".5", &m), -EINVAL);
        assert_int_equal(rt_cpu_parse("1.5m", &m), -EINVAL);
        assert_int_equal(rt_cpu_parse("m", &m), -EINVAL);
        assert_int_equal(rt_cpu_parse("2 ", &m), -EINVAL);
        assert_int_equal(rt_cpu_parse("-1", &m), -EINVAL);
        assert_int_equal(rt_cpu_parse("1000001", &m), -ERANGE);
        assert_int_equal(m, 9);
}

static void test_overlay_escape(void **state) {
        char buf[64];
        assert_int_equal(rt_overlay_escape("/a/b", buf, sizeof(buf)), 4);
        assert_string_equal(buf, "/a/b");
        assert_int_equal(rt_overlay_escape("/a:b,c\\d", buf, sizeof(buf)), 11);
        assert_string_equal(buf, "/a\\:b\\,c\\\\d");
        assert_int_equal(rt_overlay_escape("/abc", buf, 4), -ENAMETOOLONG);
        assert_int_equal(rt_overlay_escape("/abc", buf, 5), 4);
        assert_int_equal(rt_overlay_escape("::", buf, 4), -ENAMETOOLONG);
}

static void test_target_valid(void **state) {
        assert_true(rt_target_valid("/workspace"));
        assert_true(rt_target_valid("/a/b/c"));
        assert_true(rt_target_valid("/a/..b/.c"));
        assert_false(rt_target_valid("/"));
        assert_false(rt_target_valid(""));
        assert_false(rt_target_valid(NULL));
        assert_false(rt_target_valid("a/b"));
        assert_false(rt_target_valid("/a//b"));
        assert_false(rt_target_valid("/a/"));
        assert_false(rt_target_valid("/a/../b"));
        assert_false(rt_target_valid("/.."));
        assert_false(rt_target_valid("/./a"));
        assert_false(rt_target_valid("/a/."));
}

static void touch(int dfd, const char *name) {
        int fd = openat(dfd, name, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
        assert_true(fd >= 0);
        assert_int_equal(write(fd, "x", 1), 1);
        close(fd);
}

/* rm_rf_at removes a tree with odd modes, but never follows a symlink
 * out of it. */
static void test_rm_rf(void **state) {
        char tmpl[] = "/tmp/wr-test-rt.XXXXXX";
        assert_non_null(mkdtemp(tmpl));
        int top = open(tmpl, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        assert_true(top >= 0);
        /* outside/keep must survive */
        assert_int_equal(mkdirat(top, "outside", 0755), 0);
        int out = openat(top, "outside", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        touch(out, "keep");
        /* victim/{a/b/c, locked (mode 000) /f, link -> ../outside, flink -> ../outside/keep} */
        assert_int_equal(mkdirat(top, "victim", 0755), 0);
        int v = openat(top, "victim", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        assert_int_equal(mkdirat(v, "a", 0755), 0);
        assert_int_equal(mkdirat(v, "a/b", 0755), 0);
        touch(v, "a/b/c");
        assert_int_equal(mkdirat(v, "locked", 0700), 0);
        touch(v, "locked/f");
        assert_int_equal(fchmodat(v, "locked", 0, 0), 0);
        assert_int_equal(symlinkat("../outside", v, "link"), 0);
        assert_int_equal(symlinkat("../outside/keep", v, "flink"), 0);
        assert_int_equal(mkfifoat(v, "fifo", 0600), 0);
        close(v);

        assert_int_equal(rm_rf_at(top, "victim"), 0);
        struct stat st;
        assert_int_equal(fstatat(top, "victim", &st, AT_SYMLINK_NOFOLLOW), -1);
        assert_int_equal(errno, ENOENT);
        assert_int_equal(fstatat(out, "keep", &st, 0), 0);
        /* missing: success */
        assert_int_equal(rm_rf_at(top, "victim"), 0);
        /* a plain file and a symlink at the top */
        touch(top, "file");
        assert_int_equal(rm_rf_at(top, "file"), 0);
        assert_int_equal(symlinkat("outside", top, "toplink"), 0);
        assert_int_equal(rm_rf_at(top, "toplink"), 0);
        assert_int_equal(fstatat(out, "keep", &st, 0), 0);

        close(out);
        assert_int_equal(rm_rf_at(top, "outside"), 0);
        close(top);
        assert_int_equal(rmdir(tmpl), 0);
}

static void test_policy_caps(void **state) {
        const struct rt_policy *p;
        struct wr_err e = {0};
        assert_int_equal(rt_policy_get(&p, &e), 0);
        uint64_t want = (1ULL << CAP_CHOWN) | (1ULL << CAP_DAC_OVERRIDE) | (1ULL << CAP_FSETID) |
                        (1ULL << CAP_FOWNER) | (1ULL << CAP_SETGID) | (1ULL << CAP_SETUID) |
                        (1ULL << CAP_SETPCAP) | (1ULL << CAP_NET_BIND_SERVICE) | (1ULL << CAP_KILL);
        assert_int_equal(p->caps_keep, want);
        assert_int_equal(p->caps_keep, 0x5fb); /* what the isolation test sees in CapEff */
        assert_true(p->cap_last >= CAP_AUDIT_READ);
        assert_non_null(p->prog.filter);
        assert_true(p->prog.len > 50);
        /* cached: same object */
        const struct rt_policy *p2;
        assert_int_equal(rt_policy_get(&p2, NULL), 0);
        assert_ptr_equal(p, p2);
}

/* In a forked child: install the sandbox filter, then report errno of each
 * probe as one byte over a pipe (0 = the call succeeded). */
enum {
        P_GETPID,
        P_MOUNT,
        P_UMOUNT,
        P_UNSHARE,
        P_SETNS,
        P_CLONE_NEWNS,
        P_CLONE3,
        P_PTRACE,
        P_KEYCTL,
        P_BPF,
        P_VSOCK,
        P_UNIX,
        P_PERSONA_BAD,
        P_PERSONA_OK,
        P_IO_URING,
        P_PIVOT,
        P_OPEN_BY_HANDLE,
        P_USERFAULTFD,
        P_PERF,
        P_KEXEC,
        P_INIT_MODULE,
        P_FORK,
        P_N
};

static void test_seccomp_filter(void **state) {
        const struct rt_policy *p;
        assert_int_equal(rt_policy_get(&p, NULL), 0);
        int pipefd[2];
        assert_int_equal(pipe2(pipefd, O_CLOEXEC), 0);
        pid_t pid = fork();
        assert_true(pid >= 0);
        if (pid == 0) {
                unsigned char res[P_N];
                memset(res, 0xff, sizeof(res));
                if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0 ||
                    syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &p->prog) < 0)
                        _exit(3);
#define PROBE(i, call) res[i] = (unsigned char) ((call) < 0 ? errno : 0)
                PROBE(P_GETPID, (long) getpid() > 0 ? 0 : -1);
                PROBE(P_MOUNT, mount("none", "/tmp", "tmpfs", 0, NULL));
                PROBE(P_UMOUNT, umount2("/tmp", MNT_DETACH));
                PROBE(P_UNSHARE, unshare(CLONE_NEWNS));
                PROBE(P_SETNS, setns(0, 0));
                PROBE(P_CLONE_NEWNS, syscall(SYS_clone, CLONE_NEWNS | SIGCHLD, 0, 0, 0, 0));
                struct rt_clone_args ca = {.exit_signal = SIGCHLD};
                PROBE(P_CLONE3, syscall(SYS_clone3, &ca, sizeof(ca)));
                PROBE(P_PTRACE, ptrace(PTRACE_ATTACH, getppid(), 0, 0));
                PROBE(P_KEYCTL, syscall(SYS_keyctl, 0, 0, 0, 0, 0));
                PROBE(P_BPF, syscall(SYS_bpf, 0, NULL, 0));
                PROBE(P_VSOCK, socket(AF_VSOCK, SOCK_STREAM, 0));
                PROBE(P_UNIX, socket(AF_UNIX, SOCK_STREAM, 0));
                PROBE(P_PERSONA_BAD, personality(0x0400000 /* READ_IMPLIES_EXEC */));
                PROBE(P_PERSONA_OK, personality(0xffffffff));
                PROBE(P_IO_URING, syscall(SYS_io_uring_setup, 1, NULL));
                PROBE(P_PIVOT, syscall(SYS_pivot_root, "/", "/"));
                PROBE(P_OPEN_BY_HANDLE, syscall(SYS_open_by_handle_at, -1, NULL, 0));
                PROBE(P_USERFAULTFD, syscall(SYS_userfaultfd, 0));
                PROBE(P_PERF, syscall(SYS_perf_event_open, NULL, 0, -1, -1, 0));
                PROBE(P_KEXEC, syscall(SYS_kexec_load, 0, 0, NULL, 0));
                PROBE(P_INIT_MODULE, syscall(SYS_init_module, NULL, 0, ""));
                pid_t c = fork(); /* glibc: clone without namespace flags */
                if (c == 0)
                        _exit(0);
                res[P_FORK] = c > 0 && waitpid(c, NULL, 0) == c ? 0 : (unsigned char) errno;
                ssize_t w = write(pipefd[1], res, sizeof(res));
                _exit(w == sizeof(res) ? 0 : 4);
        }
        close(pipefd[1]);
        unsigned char res[P_N];
        assert_int_equal(read(pipefd[0], res, sizeof(res)), sizeof(res));
        close(pipefd[0]);
        int status;
        assert_int_equal(waitpid(pid, &status, 0), pid);
        assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);

        assert_int_equal(res[P_GETPID], 0);
        assert_int_equal(res[P_UNIX], 0);
        assert_int_equal(res[P_PERSONA_OK], 0);
        assert_int_equal(res[P_FORK], 0);
        static const int eperm[] = {
                P_MOUNT,          P_UMOUNT,      P_UNSHARE, P_SETNS,       P_CLONE_NEWNS, P_PTRACE,
                P_KEYCTL,         P_BPF,         P_VSOCK,   P_PERSONA_BAD, P_IO_URING,    P_PIVOT,
                P_OPEN_BY_HANDLE, P_USERFAULTFD, P_PERF,    P_KEXEC,       P_INIT_MODULE};
        for (size_t i = 0; i < sizeof(eperm) / sizeof(eperm[0]); i++) {
                if (res[eperm[i]] != EPERM)
                        fprintf(stderr, "probe %d: errno %d\n", eperm[i], res[eperm[i]]);
                assert_int_equal(res[eperm[i]], EPERM);
        }
        assert_int_equal(res[P_CLONE3], ENOSYS);
}

/* ---- the mount table ---- */

static int check1(const struct rt_mount *m, struct wr_err *e) {
        memset(e, 0, sizeof(*e));
        return rt_mounts_check(m, 1, e);
}

static void test_mounts_check(void **state) {
        struct wr_err e;
        static char big[RT_MOUNT_DATA_MAX + 1];
        const struct rt_mount good[] = {
                {.kind = RT_MOUNT_BIND,
                 .target = "/data",
                 .source = "/var/lib/x",
                 .flags = RT_MOUNT_RO},
                {.kind = RT_MOUNT_BIND, .target = "/sock", .source_fd = 7},
                {.kind = RT_MOUNT_TMPFS, .target = "/scratch", .size = 1 << 20, .mode = 01777},
                {.kind = RT_MOUNT_FILE,
                 .target = "/etc/ssl/ca.pem",
                 .data = "x",
                 .len = 1,
                 .flags = RT_MOUNT_RO | RT_MOUNT_NOSUID | RT_MOUNT_NODEV | RT_MOUNT_NOEXEC},
                {.kind = RT_MOUNT_FILE, .target = "/empty"},
                {.kind = RT_MOUNT_COPY,
                 .target = "/etc/motd",
                 .data = big,
                 .len = RT_MOUNT_DATA_MAX},
                {.kind = RT_MOUNT_TMPFS, .target = "/devices", .size = 1}, /* not under /dev */
                {.kind = RT_MOUNT_TMPFS, .target = "/proc2/sys", .size = 1},
        };
        assert_int_equal(rt_mounts_check(good, ELEMENTSOF(good), &e), 0);
        assert_int_equal(rt_mounts_check(NULL, 0, &e), 0);

        static const struct {
                struct rt_mount m;
                const char *msg;
        } bad[] = {
                {{.kind = RT_MOUNT_TMPFS, .target = "data", .size = 1},
                 "mount 0 (data): target must"},
                {{.kind = RT_MOUNT_TMPFS, .target = "/a/../b", .size = 1}, "target must be"},
                {{.kind = RT_MOUNT_TMPFS, .target = "/a/./b", .size = 1}, "target must be"},
                {{.kind = RT_MOUNT_TMPFS, .target = "/a//b", .size = 1}, "target must be"},
                {{.kind = RT_MOUNT_TMPFS, .target = "/a/", .size = 1}, "target must be"},
                {{.kind = RT_MOUNT_TMPFS, .target = "/", .size = 1}, "target must be"},
                {{.kind = RT_MOUNT_TMPFS, .target = NULL, .size = 1}, "mount 0 ((null))"},
                {{.kind = RT_MOUNT_TMPFS, .target = "/proc", .size = 1},
                 "(/proc): target is under /proc"},
                {{.kind = RT_MOUNT_TMPFS, .target = "/proc/sys/x", .size = 1}, "under /proc"},
                {{.kind = RT_MOUNT_TMPFS, .target = "/dev/shm", .size = 1}, "under /dev"},
                {{.kind = RT_MOUNT_TMPFS, .target = "/sys", .size = 1}, "under /sys"},
                {{.kind = 0, .target = "/x"}, "(/x): unknown kind 0"},
                {{.kind = 99, .target = "/x"}, "unknown kind 99"},
                {{.kind = RT_MOUNT_TMPFS, .target = "/x", .size = 1, .flags = 1u << 9},
                 "unknown flags 0x200"},
                {{.kind = RT_MOUNT_TMPFS, .target = "/x", .size = 1, .mode = 010000}, "bad mode"},
                {{.kind = RT_MOUNT_TMPFS, .target = "/x"}, "tmpfs needs a size"},
                {{.kind = RT_MOUNT_BIND, .target = "/x", .source = "rel"}, "bind source must be"},
                {{.kind = RT_MOUNT_BIND, .target = "/x", .source_fd = 2}, "bind source must be"},
                {{.kind = RT_MOUNT_BIND, .target = "/x", .source_fd = -1}, "bind source must be"},
                {{.kind = RT_MOUNT_COPY, .target = "/x", .flags = RT_MOUNT_RO},
                 "takes no mount flags"},
                {{.kind = RT_MOUNT_FILE, .target = "/x", .data = big, .len = RT_MOUNT_DATA_MAX + 1},
                 "file content too large (262145 > 262144 bytes)"},
                {{.kind = RT_MOUNT_COPY, .target = "/x", .len = 3}, "no file content"},
        };
        for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
                int r = check1(&bad[i].m, &e);
                if (r != -EINVAL || !strstr(e.msg, bad[i].msg))
                        fprintf(stderr, "case %zu: %d %s\n", i, r, e.msg);
                assert_int_equal(r, -EINVAL);
                assert_non_null(strstr(e.msg, bad[i].msg));
                assert_int_equal(e.fault, WR_FAULT_CLIENT);
        }
        /* the entry is named by its index */
        struct rt_mount two[] = {good[0], {.kind = RT_MOUNT_TMPFS, .target = "/dev/x", .size = 1}};
        assert_int_equal(rt_mounts_check(two, 2, &e), -EINVAL);
        assert_non_null(strstr(e.msg, "mount 1 (/dev/x)"));
        /* limits over the whole table */
        struct rt_mount many[RT_MOUNTS_MAX + 1];
        for (size_t i = 0; i < ELEMENTSOF(many); i++)
                many[i] = (struct rt_mount){.kind = RT_MOUNT_TMPFS, .target = "/x", .size = 1};
        assert_int_equal(rt_mounts_check(many, RT_MOUNTS_MAX, &e), 0);
        assert_int_equal(rt_mounts_check(many, RT_MOUNTS_MAX + 1, &e), -EINVAL);
        assert_non_null(strstr(e.msg, "too many mounts (65 > 64)"));
        struct rt_mount full[3];
        for (size_t i = 0; i < 3; i++)
                full[i] = (struct rt_mount){.kind = RT_MOUNT_FILE,
                                            .target = "/f",
                                            .data = big,
                                            .len = RT_MOUNT_DATA_MAX};
        assert_int_equal(rt_mounts_check(full, 2, &e), 0);
        assert_int_equal(rt_mounts_check(full, 3, &e), -EINVAL);
        assert_non_null(strstr(e.msg, "file contents too large"));
        assert_int_equal(rt_mounts_check(NULL, 1, &e), -EINVAL);
}

static void test_mount_attrs(void **state) {
        assert_int_equal(rt_mount_attrs(0), 0);
        assert_int_equal(
                rt_mount_attrs(RT_MOUNT_RO | RT_MOUNT_NOSUID | RT_MOUNT_NODEV | RT_MOUNT_NOEXEC),
                MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | MOUNT_ATTR_NOEXEC);
        assert_int_equal(rt_mount_attrs(RT_MOUNT_NOEXEC), MOUNT_ATTR_NOEXEC);
}

static const char bin[] = {'a', 0, 'b', 0, 0, 'c'}; /* content with NUL bytes */

static void start_sample(struct rt_start *s) {
        memset(s, 0, sizeof(*s));
        s->nofile = 4096;
        s->hostname = "host";
        s->upper = "/state/sb/upper/u";
        s->work = "/state/sb/upper/w";
        s->scratch = "/state/sb/upper";
        s->lowerdir = "/l/1:/l/2";
        s->n_layers = 2;
        s->layers[0] = "/l/1";
        s->layers[1] = "/l/2";
        s->n_fds = 3;
        s->scratch_fd = 2; /* the writable layer's mount, after the binds */
        const struct rt_entry e[] = {
                {.m = {.kind = RT_MOUNT_TMPFS,
                       .target = "/tmp",
                       .flags = RT_MOUNT_NOSUID,
                       .size = 1234,
                       .mode = 01777}},
                {.m = {.kind = RT_MOUNT_COPY, .target = "/etc/hostname", .data = "host", .len = 4}},
                {.m = {.kind = RT_MOUNT_BIND,
                       .target = "/data",
                       .flags = RT_MOUNT_RO,
                       .source_fd = 1},
                 .dev = 42,
                 .ino = 4242,
                 .type = S_IFDIR},
                {.m = {.kind = RT_MOUNT_FILE,
                       .target = "/bin.dat",
                       .data = bin,
                       .len = sizeof(bin),
                       .mode = 0600}},
                {.m = {.kind = RT_MOUNT_BIND, .target = "/sock", .source_fd = 0},
                 .dev = 1,
                 .ino = 2,
                 .type = S_IFSOCK},
                {.m = {.kind = RT_MOUNT_FILE, .target = "/empty"}},
        };
        s->n_mounts = ELEMENTSOF(e);
        memcpy(s->mounts, e, sizeof(e));
}

static void test_start_roundtrip(void **state) {
        static struct rt_start in, out;
        start_sample(&in);
        char *buf = NULL;
        size_t len = 0;
        assert_int_equal(rt_start_encode(&in, &buf, &len), 0);
        const int fds[] = {100, 101, 102};
        assert_int_equal(rt_start_decode(buf, len, fds, 3, &out), 0);
        assert_int_equal(out.nofile, 4096);
        assert_int_equal(out.scratch_fd, 102);
        assert_string_equal(out.hostname, "host");
        assert_string_equal(out.upper, "/state/sb/upper/u");
        assert_string_equal(out.work, "/state/sb/upper/w");
        assert_string_equal(out.scratch, "/state/sb/upper");
        assert_string_equal(out.lowerdir, "/l/1:/l/2");
        assert_int_equal(out.n_layers, 2);
        assert_string_equal(out.layers[1], "/l/2");
        assert_int_equal(out.n_mounts, in.n_mounts);
        assert_int_equal(out.n_fds, 3);
        for (size_t i = 0; i < in.n_mounts; i++) {
                const struct rt_entry *a = &in.mounts[i], *b = &out.mounts[i];
                assert_int_equal(a->m.kind, b->m.kind);
                assert_string_equal(a->m.target, b->m.target);
                assert_int_equal(a->m.len, b->m.len);
                if (a->m.len)
                        assert_memory_equal(a->m.data, b->m.data, a->m.len);
                assert_true(rt_entry_same(a, b));
                /* strings and data point into the buffer */
                assert_true(b->m.target > buf && b->m.target < buf + len);
        }
        assert_int_equal(out.mounts[2].m.source_fd, 101); /* index 1 -> the second fd */
        assert_int_equal(out.mounts[4].m.source_fd, 100);
        assert_int_equal(out.mounts[0].m.source_fd, -EBADF);
        assert_int_equal(out.mounts[0].m.mode, 01777);
        assert_int_equal(out.mounts[0].m.size, 1234);
        assert_int_equal(out.mounts[2].ino, 4242);
        assert_int_equal(out.mounts[4].type, S_IFSOCK);

        /* every truncation, a wrong fd count, trailing bytes, a bad magic,
         * a non-zero reserved field, an unknown kind: refused */
        for (size_t n = 0; n < len; n++)
                assert_int_equal(rt_start_decode(buf, n, fds, 3, &out), -EBADMSG);
        assert_int_equal(rt_start_decode(buf, len, fds, 2, &out), -EBADMSG);
        char *longer = malloc(len + 1);
        memcpy(longer, buf, len);
        longer[len] = 0;
        assert_int_equal(rt_start_decode(longer, len + 1, fds, 3, &out), -EBADMSG);
        free(longer);
        struct rt_start_hdr h;
        memcpy(&h, buf, sizeof(h));
        h.magic ^= 1;
        memcpy(buf, &h, sizeof(h));
        assert_int_equal(rt_start_decode(buf, len, fds, 3, &out), -EBADMSG);
        h.magic ^= 1;
        h.reserved = 1;
        memcpy(buf, &h, sizeof(h));
        assert_int_equal(rt_start_decode(buf, len, fds, 3, &out), -EBADMSG);
        h.reserved = 0;
        memcpy(buf, &h, sizeof(h));
        assert_int_equal(rt_start_decode(buf, len, fds, 3, &out), 0);
        free(buf);

        in.mounts[0].m.kind = 77;
        assert_int_equal(rt_start_encode(&in, &buf, &len), 0);
        assert_int_equal(rt_start_decode(buf, len, fds, 3, &out), -EBADMSG);
        free(buf);
        /* a bind whose fd index is out of range is not encoded */
        start_sample(&in);
        in.mounts[2].m.source_fd = 3;
        assert_int_equal(rt_start_encode(&in, &buf, &len), -EINVAL);
        /* a layer's mount without a scratch path, or out of range: not
         * encoded */
        start_sample(&in);
        in.scratch = NULL;
        assert_int_equal(rt_start_encode(&in, &buf, &len), -EINVAL);
        start_sample(&in);
        in.scratch_fd = 3;
        assert_int_equal(rt_start_encode(&in, &buf, &len), -EINVAL);
        /* nor decoded: a scratch fd past the fds, or with no scratch */
        start_sample(&in);
        assert_int_equal(rt_start_encode(&in, &buf, &len), 0);
        memcpy(&h, buf, sizeof(h));
        h.scratch_fd = 4;
        memcpy(buf, &h, sizeof(h));
        assert_int_equal(rt_start_decode(buf, len, fds, 3, &out), -EBADMSG);
        free(buf);
        /* a claim: the scratch path without a mount (the prestart's) */
        start_sample(&in);
        in.scratch_fd = -1;
        in.n_fds = 2;
        assert_int_equal(rt_start_encode(&in, &buf, &len), 0);
        assert_int_equal(rt_start_decode(buf, len, fds, 2, &out), 0);
        assert_string_equal(out.scratch, "/state/sb/upper");
        assert_int_equal(out.scratch_fd, -EBADF);
        free(buf);
        /* no disk limit: no scratch */
        start_sample(&in);
        in.scratch_fd = -1;
        in.scratch = NULL;
        assert_int_equal(rt_start_encode(&in, &buf, &len), 0);
        assert_int_equal(rt_start_decode(buf, len, fds, 3, &out), 0);
        assert_null(out.scratch);
        free(buf);
        start_sample(&in);
        in.scratch_fd = -1;
        in.scratch = NULL;
        assert_int_equal(rt_start_encode(&in, &buf, &len), 0);
        memcpy(&h, buf, sizeof(h));
        h.scratch_fd = 1;
        memcpy(buf, &h, sizeof(h));
        assert_int_equal(rt_start_decode(buf, len, fds, 3, &out), -EBADMSG);
        free(buf);
}

static void test_start_size_limits(void **state) {
        static struct rt_start in;
        static char big[RT_MOUNT_DATA_MAX];
        start_sample(&in);
        char *buf = NULL;
        size_t len = 0;
        /* the largest table the checks let through fits the message */
        in.n_mounts = RT_TABLE_OWN;
        for (size_t i = 0; i < RT_MOUNTS_MAX; i++)
                in.mounts[in.n_mounts++] =
                        (struct rt_entry){.m = {.kind = RT_MOUNT_COPY,
                                                .target = "/etc/x",
                                                .data = big,
                                                .len = i < 2 ? RT_MOUNT_DATA_MAX : 0}};
        assert_int_equal(rt_start_encode(&in, &buf, &len), 0);
        assert_true(len < RT_PARK_MAX);
        free(buf);
        /* past the message limit: E2BIG, nothing allocated for the caller */
        for (size_t i = 0; i < 5; i++)
                in.mounts[RT_TABLE_OWN + i].m.len = RT_MOUNT_DATA_MAX;
        buf = NULL;
        assert_int_equal(rt_start_encode(&in, &buf, &len), -E2BIG);
        assert_null(buf);
        in.n_mounts = RT_TABLE_MAX + 1;
        assert_int_equal(rt_start_encode(&in, &buf, &len), -E2BIG);
}

static void test_entry_same(void **state) {
        static struct rt_start s;
        start_sample(&s);
        for (size_t i = 0; i < s.n_mounts; i++) {
                struct rt_entry a = s.mounts[i], b = s.mounts[i];
                assert_true(rt_entry_same(&a, &b));
                b.m.target = "/other";
                assert_false(rt_entry_same(&a, &b));
                b = a;
                b.m.flags ^= RT_MOUNT_RO;
                assert_false(rt_entry_same(&a, &b));
                b = a;
                b.m.mode ^= 1;
                assert_false(rt_entry_same(&a, &b));
                b = a;
                b.m.size++;
                assert_false(rt_entry_same(&a, &b));
        }
        struct rt_entry a = s.mounts[3], b = s.mounts[3]; /* FILE: content */
        char other[sizeof(bin)];
        memcpy(other, bin, sizeof(bin));
        other[5] = 'd';
        b.m.data = other;
        assert_false(rt_entry_same(&a, &b));
        b.m.len--;
        assert_false(rt_entry_same(&a, &b));
        a = s.mounts[2], b = s.mounts[2]; /* BIND: the source inode, not the fd */
        b.m.source_fd = 55;
        assert_true(rt_entry_same(&a, &b));
        b.ino++;
        assert_false(rt_entry_same(&a, &b));
        b = a;
        b.dev++;
        assert_false(rt_entry_same(&a, &b));
        b = a;
        b.type = S_IFREG;
        assert_false(rt_entry_same(&a, &b));
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_id_valid),        cmocka_unit_test(test_memory_parse),
                cmocka_unit_test(test_cpu_parse),       cmocka_unit_test(test_overlay_escape),
                cmocka_unit_test(test_target_valid),    cmocka_unit_test(test_rm_rf),
                cmocka_unit_test(test_policy_caps),     cmocka_unit_test(test_seccomp_filter),
                cmocka_unit_test(test_mounts_check),    cmocka_unit_test(test_mount_attrs),
                cmocka_unit_test(test_start_roundtrip), cmocka_unit_test(test_start_size_limits),
                cmocka_unit_test(test_entry_same),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
