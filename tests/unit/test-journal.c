/* SPDX-License-Identifier: Apache-2.0 */
/* sandbox/journal-tree: the walk of an upper dir, the merged view over
 * read-only layers (whiteouts, opaque dirs), and the diff of two walks, on
 * temporary directories laid out as overlayfs would leave them. Whiteouts
 * and trusted.* xattrs need root: skipped without it. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "basic/rmrf.h"
#include "sandbox/journal-tree.h"

struct fx {
        char root[64];
        int upper, l0, l1; /* dir fds */
};

static void put(int dir, const char *path, const char *text, mode_t mode) {
        int fd = openat(dir, path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
        assert_true(fd >= 0);
        assert_int_equal(write(fd, text, strlen(text)), (ssize_t) strlen(text));
        assert_int_equal(fchmod(fd, mode), 0);
        close(fd);
}

static void mkd(int dir, const char *path) {
        assert_int_equal(mkdirat(dir, path, 0755), 0);
}

static void whiteout(int dir, const char *path) {
        assert_int_equal(mknodat(dir, path, S_IFCHR | 0, makedev(0, 0)), 0);
}

static void opaque(int dir, const char *path) {
        int fd = openat(dir, path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        assert_true(fd >= 0);
        assert_int_equal(fsetxattr(fd, "trusted.overlay.opaque", "y", 1, 0), 0);
        close(fd);
}

static int setup(void **state) {
        if (geteuid() != 0)
                return 0;
        struct fx *f = calloc(1, sizeof(*f));
        snprintf(f->root, sizeof(f->root), "/tmp/wr-test-journal-XXXXXX");
        assert_non_null(mkdtemp(f->root));
        int r = open(f->root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        mkd(r, "upper");
        mkd(r, "l0");
        mkd(r, "l1");
        f->upper = openat(r, "upper", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        f->l0 = openat(r, "l0", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        f->l1 = openat(r, "l1", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        close(r);
        /* the image: l1 (bottom) has etc/{a,b}, d/{x,z}, gone/; l0 on top
         * replaces etc/a, whiteouts etc/b, makes d opaque with d/y only */
        mkd(f->l1, "etc");
        put(f->l1, "etc/a", "a1", 0644);
        put(f->l1, "etc/b", "b1", 0644);
        mkd(f->l1, "d");
        put(f->l1, "d/x", "x", 0644);
        put(f->l1, "d/z", "z", 0644);
        mkd(f->l1, "gone");
        put(f->l1, "gone/f", "f", 0644);
        mkd(f->l0, "etc");
        put(f->l0, "etc/a", "a0", 0600);
        whiteout(f->l0, "etc/b");
        mkd(f->l0, "d");
        opaque(f->l0, "d");
        put(f->l0, "d/y", "y", 0644);
        assert_int_equal(symlinkat("../etc/a", f->l0, "ln"), 0);
        *state = f;
        return 0;
}

static int teardown(void **state) {
        struct fx *f = *state;
        if (!f)
                return 0;
        close(f->upper);
        close(f->l0);
        close(f->l1);
        assert_int_equal(rm_rf_at(AT_FDCWD, f->root), 0);
        free(f);
        return 0;
}

#define NEED_ROOT(f)                                                                               \
        do {                                                                                       \
                if (!(f)) {                                                                        \
                        skip();                                                                    \
                        return;                                                                    \
                }                                                                                  \
        } while (0)

static struct jt_state state(struct fx *f, const struct jt_tree *t, const char *path) {
        int lower[2] = {f->l0, f->l1};
        struct jt_state s;
        assert_int_equal(jt_state_of(t, lower, 2, path, &s), 0);
        return s;
}

static void test_layers(void **st) {
        struct fx *f = *st;
        NEED_ROOT(f);
        struct jt_tree empty = {0};
        struct jt_state s = state(f, &empty, "etc/a");
        assert_int_equal(s.type, JT_FILE);
        assert_int_equal(s.layer, 0);
        assert_int_equal(s.mode & 07777, 0600);
        jt_state_clear(&s);
        s = state(f, &empty, "etc/b"); /* whiteout on top */
        assert_int_equal(s.type, JT_ABSENT);
        s = state(f, &empty, "d/x"); /* below an opaque dir */
        assert_int_equal(s.type, JT_ABSENT);
        s = state(f, &empty, "d/y");
        assert_int_equal(s.type, JT_FILE);
        assert_int_equal(s.layer, 0);
        s = state(f, &empty, "gone/f");
        assert_int_equal(s.type, JT_FILE);
        assert_int_equal(s.layer, 1);
        s = state(f, &empty, "ln");
        assert_int_equal(s.type, JT_LINK);
        assert_string_equal(s.link, "../etc/a");
        jt_state_clear(&s);
        s = state(f, &empty, "ln/x"); /* never through a symlink */
        assert_int_equal(s.type, JT_ABSENT);
        s = state(f, &empty, "../etc/a");
        assert_int_equal(s.type, JT_ABSENT);
}

static void test_walk(void **st) {
        struct fx *f = *st;
        NEED_ROOT(f);
        mkd(f->upper, "w");
        put(f->upper, "w/b", "b", 0644);
        put(f->upper, "w/a", "a", 0644);
        assert_int_equal(symlinkat("/etc/passwd", f->upper, "w/l"), 0);
        whiteout(f->upper, "w/c");
        opaque(f->upper, "w");
        struct jt_tree t = {0};
        assert_int_equal(jt_walk(f->upper, 100, &t, NULL), 0);
        assert_int_equal(t.n, 5);
        const char *want[] = {"w", "w/a", "w/b", "w/c", "w/l"};
        for (size_t i = 0; i < 5; i++)
                assert_string_equal(t.v[i].path, want[i]);
        assert_true(t.v[0].opaque);
        assert_int_equal(t.v[3].type, JT_WHITEOUT);
        assert_string_equal(jt_find(&t, "w/l")->link, "/etc/passwd");
        assert_false(t.truncated);
        jt_tree_free(&t);
        /* entry cap */
        assert_int_equal(jt_walk(f->upper, 2, &t, NULL), 0);
        assert_true(t.truncated);
        assert_int_equal(t.n, 2);
        jt_tree_free(&t);
}

static unsigned kinds_of(const struct jt_change *v, size_t n, const char *path) {
        for (size_t i = 0; i < n; i++)
                if (!strcmp(v[i].path, path))
                        return v[i].kinds;
        return 0;
}

static void test_diff(void **st) {
        struct fx *f = *st;
        NEED_ROOT(f);
        int lower[2] = {f->l0, f->l1};
        /* before: upper has its own file u (0644), a dir t with t/1, and
         * a copied-up etc/ */
        mkd(f->upper, "etc");
        put(f->upper, "u", "old", 0644);
        put(f->upper, "v", "same", 0644);
        mkd(f->upper, "t");
        put(f->upper, "t/1", "1", 0644);
        struct jt_tree pre = {0}, post = {0};
        assert_int_equal(jt_walk(f->upper, 1000, &pre, NULL), 0);
        /* the exec: append to u and chmod it; create n; delete t (upper
         * only) and gone/f (a whiteout); copy etc/a up with a new mode
         * only; copy d/y up unchanged (an open for write that wrote
         * nothing); replace ln with a file */
        put(f->upper, "u", "old+new", 0600);
        put(f->upper, "n", "n", 0644);
        assert_int_equal(unlinkat(f->upper, "t/1", 0), 0);
        assert_int_equal(unlinkat(f->upper, "t", AT_REMOVEDIR), 0);
        mkd(f->upper, "gone");
        whiteout(f->upper, "gone/f");
        struct stat sa;
        assert_int_equal(fstatat(f->l0, "etc/a", &sa, 0), 0);
        put(f->upper, "etc/a", "a0", 0640);
        struct timespec ts[2] = {sa.st_atim, sa.st_mtim};
        assert_int_equal(utimensat(f->upper, "etc/a", ts, 0), 0);
        mkd(f->upper, "d");
        assert_int_equal(fstatat(f->l0, "d/y", &sa, 0), 0);
        put(f->upper, "d/y", "y", 0644);
        struct timespec ty[2] = {sa.st_atim, sa.st_mtim};
        assert_int_equal(utimensat(f->upper, "d/y", ty, 0), 0);
        put(f->upper, "ln", "file now", 0644);
        assert_int_equal(jt_walk(f->upper, 1000, &post, NULL), 0);

        struct jt_change *v = NULL;
        size_t n = 0;
        assert_int_equal(jt_diff(&pre, &post, lower, 2, &v, &n, NULL), 0);
        assert_int_equal(kinds_of(v, n, "u"), JT_MODIFIED | JT_MODE);
        assert_int_equal(kinds_of(v, n, "n"), JT_CREATED);
        assert_int_equal(kinds_of(v, n, "t"), JT_DELETED);
        assert_int_equal(kinds_of(v, n, "t/1"), JT_DELETED);
        assert_int_equal(kinds_of(v, n, "gone/f"), JT_DELETED);
        assert_int_equal(kinds_of(v, n, "gone"), 0); /* the dir itself is unchanged */
        assert_int_equal(kinds_of(v, n, "etc/a"), JT_MODE);
        assert_int_equal(kinds_of(v, n, "d/y"), 0);
        assert_int_equal(kinds_of(v, n, "d"), 0);
        assert_int_equal(kinds_of(v, n, "v"), 0);
        assert_int_equal(kinds_of(v, n, "ln"), JT_MODIFIED);
        assert_int_equal(n, 7);
        /* states for rollback: u's bytes were in the upper dir, gone/f's in
         * layer 1 */
        for (size_t i = 0; i < n; i++) {
                if (!strcmp(v[i].path, "u"))
                        assert_int_equal(v[i].before.layer, -1);
                if (!strcmp(v[i].path, "gone/f"))
                        assert_int_equal(v[i].before.layer, 1);
                if (!strcmp(v[i].path, "ln"))
                        assert_string_equal(v[i].before.link, "../etc/a");
        }
        /* sorted by path */
        for (size_t i = 1; i < n; i++)
                assert_true(strcmp(v[i - 1].path, v[i].path) < 0);
        jt_changes_free(v, n);
        jt_tree_free(&pre);
        jt_tree_free(&post);
}

static void test_compare(void **st) {
        (void) st;
        struct jt_state a = {.type = JT_FILE, .layer = -1, .mode = 0100644, .size = 3, .ino = 1},
                        b = a;
        assert_int_equal(jt_compare(&a, &b), 0);
        b.ino = 2; /* replaced by an identical copy of other bytes: counts */
        b.ctime_ns = 5;
        assert_int_equal(jt_compare(&a, &b), JT_MODIFIED);
        b = a;
        b.uid = 1000;
        assert_int_equal(jt_compare(&a, &b), JT_MODE);
        b = a;
        b.type = JT_DIR;
        assert_int_equal(jt_compare(&a, &b), JT_MODIFIED);
        struct jt_state none = {0};
        assert_int_equal(jt_compare(&none, &a), JT_CREATED);
        assert_int_equal(jt_compare(&a, &none), JT_DELETED);
        assert_int_equal(jt_compare(&none, &none), 0);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test_setup_teardown(test_layers, setup, teardown),
                cmocka_unit_test_setup_teardown(test_walk, setup, teardown),
                cmocka_unit_test_setup_teardown(test_diff, setup, teardown),
                cmocka_unit_test(test_compare),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
