/* SPDX-License-Identifier: Apache-2.0 */
/* The set-element batch of src/priv/nft.c (nftab_class_set) against
 * the real kernel: the kernel's own error comes back, at once, both when
 * one message fails (no such table) and when the kernel refuses the whole
 * batch (no CAP_NET_ADMIN: one answer for the batch, not one per message;
 * the reader used to wait 5 s for the rest and report a timeout). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "priv/nft.h"

static double now_ms(void) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (double) ts.tv_sec * 1e3 + (double) ts.tv_nsec / 1e6;
}

/* open4 -> pass4 of an address in a table nobody made: the kernel's error,
 * named, within a second */
static void class_set_fails(double *ms, char *msg, size_t size) {
        struct wr_err e = {0};
        double t0 = now_ms();
        int r = nftab_class_set("warren_unit_nosuch", 0x0aff0002u /* 10.255.0.2 */, NFTAB_OPEN,
                                NFTAB_PASS, &e);
        *ms = now_ms() - t0;
        snprintf(msg, size, "%s", e.msg);
        assert_true(r < 0);
}

static void test_no_such_table(void **state) {
        (void) state;
        if (geteuid() != 0)
                skip();
        double ms;
        char msg[512];
        class_set_fails(&ms, msg, sizeof(msg));
        assert_non_null(strstr(msg, strerror(ENOENT)));
        assert_true(ms < 1000);
}

static void test_batch_refused_whole(void **state) {
        (void) state;
        int p[2];
        assert_int_equal(pipe2(p, O_CLOEXEC), 0);
        pid_t pid = fork();
        assert_true(pid >= 0);
        if (pid == 0) {
                /* a new user namespace: no CAP_NET_ADMIN over this netns */
                char out[600] = "unshare failed";
                if (unshare(CLONE_NEWUSER) == 0) {
                        double ms;
                        char msg[512];
                        class_set_fails(&ms, msg, sizeof(msg));
                        snprintf(out, sizeof(out), "%.0f %s", ms, msg);
                }
                (void) !write(p[1], out, strlen(out));
                _exit(0);
        }
        close(p[1]);
        char out[600] = "";
        ssize_t n = read(p[0], out, sizeof(out) - 1);
        close(p[0]);
        int st;
        waitpid(pid, &st, 0);
        if (n > 0 && strcmp(out, "unshare failed") == 0)
                skip(); /* user namespaces off on this host */
        double ms = 0;
        assert_true(n > 0 && sscanf(out, "%lf", &ms) == 1);
        print_message("refused batch: %s\n", out);
        assert_non_null(strstr(out, strerror(EPERM)));
        assert_true(ms < 1000);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_no_such_table),
                cmocka_unit_test(test_batch_refused_whole),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
