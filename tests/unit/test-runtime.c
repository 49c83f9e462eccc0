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

/* rt_rm_rf_at removes a tree with odd modes, but never follows a symlink
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

        assert_int_equal(rt_rm_rf_at(top, "victim"), 0);
        struct stat st;
        assert_int_equal(fstatat(top, "victim", &st, AT_SYMLINK_NOFOLLOW), -1);
        assert_int_equal(errno, ENOENT);
        assert_int_equal(fstatat(out, "keep", &st, 0), 0);
        /* missing: success */
        assert_int_equal(rt_rm_rf_at(top, "victim"), 0);
        /* a plain file and a symlink at the top */
        touch(top, "file");
        assert_int_equal(rt_rm_rf_at(top, "file"), 0);
        assert_int_equal(symlinkat("outside", top, "toplink"), 0);
        assert_int_equal(rt_rm_rf_at(top, "toplink"), 0);
        assert_int_equal(fstatat(out, "keep", &st, 0), 0);

        close(out);
        assert_int_equal(rt_rm_rf_at(top, "outside"), 0);
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

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_id_valid),     cmocka_unit_test(test_memory_parse),
                cmocka_unit_test(test_cpu_parse),    cmocka_unit_test(test_overlay_escape),
                cmocka_unit_test(test_target_valid), cmocka_unit_test(test_rm_rf),
                cmocka_unit_test(test_policy_caps),  cmocka_unit_test(test_seccomp_filter),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
