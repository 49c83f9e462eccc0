/* SPDX-License-Identifier: Apache-2.0 */
/* warren-priv's seccomp denylist (src/priv/deny.h): no denied name is one
 * the sandboxes' allowlist grants (the filter is inherited by every
 * sandbox warren-priv clones, so it must take nothing from them); and the
 * filter, loaded in a child, answers EPERM to the denied kernel
 * interfaces in every thread (TSYNC: a thread started before the load is
 * covered too) while what warren-priv does all day (a mount namespace,
 * files, sockets, fork) still works. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "priv/deny.h"
#include "runtime/runtime-internal.h"

static void test_disjoint_from_sandbox_allowlist(void **state) {
        (void) state;
        size_t n = 0;
        for (size_t i = 0; priv_deny_names[i]; i++, n++)
                if (rt_policy_allows(priv_deny_names[i]))
                        fail_msg("%s is denied to warren-priv but allowed to sandboxes",
                                 priv_deny_names[i]);
        assert_true(n >= 30);
        /* the check itself can fail: names the sandboxes do have */
        assert_true(rt_policy_allows("read"));
        assert_true(rt_policy_allows("clone"));
        assert_false(rt_policy_allows("kexec_load"));
}

static int pipefd[2];

static void *late_thread(void *arg) {
        (void) arg;
        char c;
        /* wait until the main thread has loaded the filter */
        if (read(pipefd[0], &c, 1) != 1)
                return (void *) 1;
        long r = syscall(SYS_keyctl, 0 /* KEYCTL_GET_KEYRING_ID */, -1, 0);
        return (void *) (intptr_t) (r < 0 && errno == EPERM ? 0 : 2);
}

/* Runs in a forked child: exit status 0, or the number of the check that
 * failed. */
static int child(void) {
        if (pipe2(pipefd, O_CLOEXEC) < 0)
                return 100;
        pthread_t t;
        if (pthread_create(&t, NULL, late_thread, NULL) != 0)
                return 101;
        if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
                return 102;
        struct wr_err e = {0};
        if (priv_deny_load(&e) < 0) {
                fprintf(stderr, "load: %s\n", e.msg);
                return 103;
        }
        if (write(pipefd[1], "x", 1) != 1)
                return 104;
        void *tr = NULL;
        pthread_join(t, &tr);
        if (tr != NULL)
                return 10 + (int) (intptr_t) tr; /* the other thread was not covered */
        struct {
                long nr;
                int check;
        } denied[] = {
                {SYS_open_by_handle_at, 20},
                {SYS_name_to_handle_at, 21},
                {SYS_keyctl, 22},
                {SYS_bpf, 23},
                {SYS_perf_event_open, 24},
                {SYS_kexec_load, 25},
                {SYS_finit_module, 26},
                {SYS_io_uring_setup, 28},
                {SYS_userfaultfd, 29},
                {SYS_process_vm_readv, 30},
                {SYS_swapoff, 31},
        };
        for (size_t i = 0; i < sizeof(denied) / sizeof(denied[0]); i++) {
                errno = 0;
                long r = syscall(denied[i].nr, 0, 0, 0, 0, 0, 0);
                if (r != -1 || errno != EPERM) {
                        fprintf(stderr, "syscall %ld: %ld errno %d\n", denied[i].nr, r, errno);
                        return denied[i].check;
                }
        }
        /* ptrace: denied unless this is an ASan build (LeakSanitizer needs it) */
        bool ptrace_listed = false;
        for (size_t i = 0; priv_deny_names[i]; i++)
                ptrace_listed |= !strcmp(priv_deny_names[i], "ptrace");
        errno = 0;
        if (ptrace_listed && (syscall(SYS_ptrace, 0, 0, 0, 0) != -1 || errno != EPERM))
                return 27;
        /* what warren-priv does keeps working */
        if (unshare(CLONE_NEWNS) < 0)
                return 40;
        int s = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
        if (s < 0)
                return 41;
        close(s);
        pid_t p = fork();
        if (p < 0)
                return 42;
        if (p == 0)
                _exit(7);
        int st;
        if (waitpid(p, &st, 0) != p || !WIFEXITED(st) || WEXITSTATUS(st) != 7)
                return 43;
        return 0;
}

static void test_filter_in_a_child(void **state) {
        (void) state;
        if (geteuid() != 0)
                skip(); /* unshare(CLONE_NEWNS) as the control needs root */
        pid_t p = fork();
        assert_true(p >= 0);
        if (p == 0)
                _exit(child());
        int st;
        assert_int_equal(waitpid(p, &st, 0), p);
        assert_true(WIFEXITED(st));
        assert_int_equal(WEXITSTATUS(st), 0);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_disjoint_from_sandbox_allowlist),
                cmocka_unit_test(test_filter_in_a_child),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
