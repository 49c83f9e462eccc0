/* SPDX-License-Identifier: Apache-2.0 */
/* See test-priv-upper-ns.h. */
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cmocka.h>

#include "priv-harness.h"
#include "test-priv-upper-ns.h"

#include "priv/priv-proto.h"

pid_t upper_test_userns_child(unsigned base, int *pidfd) {
        int go[2], ready[2];
        assert_int_equal(pipe(go), 0);
        assert_int_equal(pipe(ready), 0);
        pid_t pid = fork();
        assert_true(pid >= 0);
        if (pid == 0) {
                close(go[1]);
                close(ready[0]);
                if (unshare(CLONE_NEWUSER) < 0)
                        _exit(1);
                (void) !write(ready[1], "r", 1);
                char c;
                (void) !read(go[0], &c, 1); /* until the test ends */
                _exit(0);
        }
        close(go[0]);
        close(ready[1]);
        char c;
        assert_int_equal(read(ready[0], &c, 1), 1);
        close(ready[0]);
        char path[64], map[64];
        snprintf(map, sizeof(map), "0 %u 65536\n", base);
        static const char *files[] = {"uid_map", "gid_map"};
        for (int i = 0; i < 2; i++) {
                snprintf(path, sizeof(path), "/proc/%d/%s", (int) pid, files[i]);
                int f = open(path, O_WRONLY | O_CLOEXEC);
                assert_true(f >= 0);
                assert_int_equal(write(f, map, strlen(map)), (ssize_t) strlen(map));
                close(f);
        }
        *pidfd = (int) syscall(SYS_pidfd_open, pid, 0);
        assert_true(*pidfd >= 0);
        (void) go[1]; /* closed by the caller's kill */
        return pid;
}

uint64_t upper_test_start_time(pid_t pid) {
        char p[64], buf[1024];
        snprintf(p, sizeof(p), "/proc/%d/stat", (int) pid);
        FILE *f = fopen(p, "r");
        assert_non_null(f);
        assert_non_null(fgets(buf, sizeof(buf), f));
        fclose(f);
        char *s = strrchr(buf, ')');
        unsigned long long v = 0;
        int field = 2;
        for (char *tok = strtok(s + 2, " "); tok; tok = strtok(NULL, " "))
                if (++field == 22) {
                        v = strtoull(tok, NULL, 10);
                        break;
                }
        return v;
}

void upper_test_target(struct priv_target *t) {
        memset(t, 0, sizeof(*t));
        memcpy(t->id, "sb-1", 5);
        t->pid = 42;
        t->start_time = 9;
}

_Static_assert(sizeof(struct priv_upper_pack) == sizeof(struct priv_upper_session),
               "UPPER_PACK and UPPER_SESSION: {target, flags, reserved}");

void upper_test_target_refusals(uint8_t *buf, size_t n, size_t n_fds) {
        struct priv_upper_pack *u = (void *) (buf + sizeof(struct priv_hdr));
        struct priv_upper_pack keep = *u;
#define BAD(stmt, code)                                                                            \
        do {                                                                                       \
                *u = keep;                                                                         \
                stmt;                                                                              \
                priv_refused(buf, n, n_fds, code);                                                 \
        } while (0)
        BAD(u->t.id[0] = 0, -EINVAL);
        BAD(u->t.id[0] = '-', -EINVAL);
        BAD(u->t.id[6] = 'x', -EINVAL); /* garbage after the NUL */
        BAD(u->t.pid = 1, -EINVAL);
        BAD(u->t.pid = -5, -EINVAL);
        BAD(u->t.start_time = 0, -EINVAL);
        BAD(u->t.cgroup_mode = 3, -EINVAL);
        BAD(u->flags = 1, -EINVAL);
        BAD(u->reserved = 1, -EINVAL);
#undef BAD
        *u = keep;
}
