/* SPDX-License-Identifier: Apache-2.0 */
/* warrend's drop (src/daemon/drop.c, docs/privsep.md "Phase 5"): in a
 * forked child that really drops (root needed, and the user `warren`,
 * scripts/warren-user.sh), the seccomp allowlist refuses what the daemon
 * has no business asking and lets through what it does. Skipped (77)
 * when not root or without the user. */
#include <errno.h>
#include <linux/sched.h>
#include <sched.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "daemon/drop.h"

static char state_dir[] = "/tmp/warren-drop-filter-XXXXXX";
static struct drop_user user;

/* In a child: drop, then run body; the child's exit status is the
 * number of failed checks (a message each on stderr). */
static int in_dropped_child(int (*body)(void)) {
        pid_t pid = fork();
        assert_true(pid >= 0);
        if (pid == 0) {
                struct wr_err e = {0};
                if (drop_apply(state_dir, &user, &e) < 0) {
                        fprintf(stderr, "drop_apply: %s\n", e.msg);
                        _exit(100);
                }
                _exit(body());
        }
        int st;
        assert_int_equal(waitpid(pid, &st, 0), pid);
        assert_true(WIFEXITED(st));
        return WEXITSTATUS(st);
}

#define EXPECT(cond, ...)                                                                          \
        do {                                                                                       \
                if (!(cond)) {                                                                     \
                        fprintf(stderr, __VA_ARGS__);                                              \
                        fputc('\n', stderr);                                                       \
                        fails++;                                                                   \
                }                                                                                  \
        } while (0)

/* -1 with errno err */
#define REFUSED(call, err) ((call) == -1 && errno == (err))

static int refusals(void) {
        int fails = 0;
        EXPECT(REFUSED(mount("none", "/tmp", "tmpfs", 0, NULL), EPERM), "mount: %m");
        EXPECT(REFUSED(umount2("/tmp", MNT_DETACH), EPERM), "umount2: %m");
        EXPECT(REFUSED(unshare(CLONE_NEWUSER), EPERM), "unshare: %m");
        EXPECT(REFUSED(syscall(SYS_setns, 0, 0), EPERM), "setns: %m");
        EXPECT(REFUSED(chroot("/"), EPERM), "chroot: %m");
        EXPECT(REFUSED(syscall(SYS_bpf, 0, NULL, 0), EPERM), "bpf: %m");
        EXPECT(REFUSED(syscall(SYS_perf_event_open, NULL, 0, -1, -1, 0), EPERM),
               "perf_event_open: %m");
        EXPECT(REFUSED(syscall(SYS_userfaultfd, 0), EPERM), "userfaultfd: %m");
        EXPECT(REFUSED(syscall(SYS_keyctl, 0, 0, 0, 0, 0), EPERM), "keyctl: %m");
        EXPECT(REFUSED(syscall(SYS_name_to_handle_at, -1, "", NULL, NULL, 0), EPERM),
               "name_to_handle_at: %m");
        EXPECT(REFUSED(syscall(SYS_setuid, 0), EPERM), "setuid: %m");
        EXPECT(REFUSED(syscall(SYS_io_uring_setup, 1, NULL), EPERM), "io_uring_setup: %m");
        EXPECT(REFUSED(syscall(SYS_setxattr, state_dir, "user.x", "1", 1, 0), EPERM),
               "setxattr: %m");
        EXPECT(REFUSED(syscall(SYS_clone, CLONE_NEWNET | SIGCHLD, NULL, NULL, NULL, 0), EPERM),
               "clone(CLONE_NEWNET): %m");
        EXPECT(REFUSED(syscall(SYS_clone3, NULL, 0), ENOSYS), "clone3: %m");
        return fails;
}

static int allowed(void) {
        int fails = 0;
        /* a plain fork (clone without namespace flags), and exec: what
         * posix_spawn of mkfs.ext4 needs */
        pid_t pid = fork();
        if (pid == 0) {
                execl("/bin/true", "true", (char *) NULL);
                _exit(127);
        }
        int st = 0;
        EXPECT(pid > 0 && waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0,
               "fork + exec /bin/true: %m (status %d)", st);
        char path[256];
        snprintf(path, sizeof(path), "%s/f", state_dir);
        FILE *f = fopen(path, "w");
        EXPECT(f && fputs("x", f) >= 0 && fclose(f) == 0, "write in the state dir: %m");
        EXPECT(unlink(path) == 0, "unlink: %m");
        EXPECT(getuid() == user.uid, "uid %u", (unsigned) getuid());
        return fails;
}

static void test_refusals(void **state) {
        (void) state;
        assert_int_equal(in_dropped_child(refusals), 0);
}

static void test_allowed(void **state) {
        (void) state;
        assert_int_equal(in_dropped_child(allowed), 0);
}

int main(void) {
        if (geteuid() != 0) {
                fprintf(stderr, "not root: skipped\n");
                return 77;
        }
        struct wr_err e = {0};
        if (drop_user_lookup("warren", &user, &e) < 0) {
                fprintf(stderr, "%s: skipped\n", e.msg);
                return 77;
        }
        if (!mkdtemp(state_dir) || chown(state_dir, user.uid, user.gid) < 0)
                return 1;
        /* what warrend does before its drop: the state dir and the host's
         * lock dirs (/run/warren/net, uid-ranges: made when missing, as on
         * a fresh host) given to the user; drop_apply binds them */
        if (drop_state_dir_own(state_dir, &user, &e) < 0) {
                fprintf(stderr, "drop_state_dir_own: %s\n", e.msg);
                return 1;
        }
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_refusals),
                cmocka_unit_test(test_allowed),
        };
        int r = cmocka_run_group_tests(tests, NULL, NULL);
        rmdir(state_dir);
        return r;
}
