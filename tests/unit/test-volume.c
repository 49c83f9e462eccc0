/* SPDX-License-Identifier: Apache-2.0 */
/* volume/: names, path checks, and the file API on a plain directory (no
 * mount, no root needed): atomic puts, hostile symlinks, FIFOs, listing
 * order and pages. The images and their mounts are covered by
 * tests/e2e/test_volumes.py. */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "volume/volume.h"

struct fx {
        char dir[64];
        int data, stage;
        char outside[96];
};

static int setup(void **state) {
        struct fx *f = calloc(1, sizeof(*f));
        snprintf(f->dir, sizeof(f->dir), "/tmp/wr-test-volume-XXXXXX");
        assert_non_null(mkdtemp(f->dir));
        char p[128];
        snprintf(p, sizeof(p), "%s/data", f->dir);
        assert_int_equal(mkdir(p, 0755), 0);
        f->data = open(p, O_PATH | O_DIRECTORY | O_CLOEXEC);
        snprintf(p, sizeof(p), "%s/stage", f->dir);
        assert_int_equal(mkdir(p, 0700), 0);
        f->stage = open(p, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        snprintf(f->outside, sizeof(f->outside), "%s/outside", f->dir);
        assert_int_equal(mkdir(f->outside, 0755), 0);
        snprintf(p, sizeof(p), "%s/secret", f->outside);
        FILE *s = fopen(p, "w");
        fputs("HOST\n", s);
        fclose(s);
        assert_true(f->data >= 0 && f->stage >= 0);
        *state = f;
        return 0;
}

static int teardown(void **state) {
        struct fx *f = *state;
        close(f->data);
        close(f->stage);
        char cmd[128];
        snprintf(cmd, sizeof(cmd), "rm -rf %s", f->dir);
        assert_int_equal(system(cmd), 0);
        free(f);
        return 0;
}

static int put(struct fx *f, const char *path, const char *content, struct wr_err *e) {
        struct vol_put *p = NULL;
        int r = vol_put_begin(f->data, f->stage, path, 0, &p, e);
        if (r < 0)
                return r;
        struct vol_file vf = {0};
        r = vol_put_write(p, content, strlen(content), e);
        if (r >= 0)
                r = vol_put_commit(p, &vf, e);
        vol_put_free(p);
        vol_file_clear(&vf);
        return r;
}

static char *get(struct fx *f, const char *path, struct wr_err *e, int *r) {
        int fd = -1;
        struct stat st;
        *r = vol_file_open(f->data, path, &fd, &st, e);
        if (*r < 0)
                return NULL;
        char *buf = calloc(1, (size_t) st.st_size + 1);
        assert_int_equal(read(fd, buf, (size_t) st.st_size), st.st_size);
        close(fd);
        return buf;
}

static void in_data(struct fx *f, const char *rel, char *out, size_t n) {
        snprintf(out, n, "%s/data/%s", f->dir, rel);
}

static int stage_entries(struct fx *f) {
        char cmd[160];
        snprintf(cmd, sizeof(cmd), "test -z \"$(ls -A %s/stage)\"", f->dir);
        return system(cmd) == 0 ? 0 : 1;
}

static void test_names(void **state) {
        assert_true(vol_name_valid("training-data"));
        assert_true(vol_name_valid("A.b_c-1"));
        assert_false(vol_name_valid(""));
        assert_false(vol_name_valid(".x"));
        assert_false(vol_name_valid("-x"));
        assert_false(vol_name_valid("a/b"));
        assert_false(vol_name_valid("a b"));
        char long_name[80];
        memset(long_name, 'a', 64);
        long_name[64] = 0;
        assert_false(vol_name_valid(long_name));
        long_name[63] = 0;
        assert_true(vol_name_valid(long_name));
}

static void check_bad(const char *path, size_t len, const char *what) {
        struct wr_err e = {0};
        assert_int_equal(vol_path_check("meta.path", path, len, false, &e), -EINVAL);
        assert_int_equal(err_status(&e), WR_STATUS_INVALID_ARGUMENT);
        assert_non_null(strstr(e.msg, "meta.path"));
        assert_non_null(strstr(e.msg, what));
}

static void test_path_check(void **state) {
        struct wr_err e = {0};
        assert_int_equal(vol_path_check("p", "a/b/c.txt", 9, false, &e), 0);
        assert_int_equal(vol_path_check("p", "./a//b/", 7, false, &e), 0);
        assert_int_equal(vol_path_check("p", "..a/b..", 7, false, &e), 0);
        assert_int_equal(vol_path_check("p", "", 0, true, &e), 0);
        check_bad("", 0, "empty");
        check_bad("../x", 4, "..");
        check_bad("a/../../x", 9, "..");
        check_bad("..", 2, "..");
        check_bad("/etc/passwd", 11, "absolute");
        check_bad("a\0b", 3, "NUL");
        check_bad("a\nb", 3, "newline");
        char big[5000];
        memset(big, 'x', sizeof(big));
        check_bad(big, 256, "component");
        for (size_t i = 100; i < sizeof(big); i += 100)
                big[i] = '/';
        check_bad(big, sizeof(big), "at most 4096");
}

static void test_put_get_atomic(void **state) {
        struct fx *f = *state;
        struct wr_err e = {0};
        assert_int_equal(put(f, "a/b/c.txt", "hello\n", &e), 0);
        int r;
        char *got = get(f, "a/b/c.txt", &e, &r);
        assert_string_equal(got, "hello\n");
        free(got);
        assert_int_equal(stage_entries(f), 0);
        /* a put that is not committed leaves nothing, anywhere */
        struct vol_put *p = NULL;
        assert_int_equal(vol_put_begin(f->data, f->stage, "a/b/c.txt", 0600, &p, &e), 0);
        assert_int_equal(vol_put_write(p, "partial", 7, &e), 0);
        assert_int_equal(stage_entries(f), 1);
        vol_put_free(p);
        assert_int_equal(stage_entries(f), 0);
        got = get(f, "a/b/c.txt", &e, &r);
        assert_string_equal(got, "hello\n");
        free(got);
        /* a directory or a file in the way */
        assert_int_equal(put(f, "a/b", "x", &e), -EISDIR);
        assert_int_equal(err_status(&e), WR_STATUS_FAILED_PRECONDITION);
        assert_int_equal(put(f, "a/b/c.txt/d", "x", &e), -ENOTDIR);
        assert_int_equal(err_status(&e), WR_STATUS_FAILED_PRECONDITION);
}

static void test_symlinks_stay_inside(void **state) {
        struct fx *f = *state;
        struct wr_err e = {0};
        char link[160], target[160];
        /* absolute and .. links to the outside dir */
        in_data(f, "abs", link, sizeof(link));
        assert_int_equal(symlink(f->outside, link), 0);
        in_data(f, "rel", link, sizeof(link));
        snprintf(target, sizeof(target), "../../../../../../..%s", f->outside);
        assert_int_equal(symlink(target, link), 0);
        in_data(f, "pw", link, sizeof(link));
        snprintf(target, sizeof(target), "%s/secret", f->outside);
        assert_int_equal(symlink(target, link), 0);
        int r;
        assert_null(get(f, "abs/secret", &e, &r));
        assert_int_equal(r, -ENOENT);
        assert_null(get(f, "rel/secret", &e, &r));
        assert_int_equal(r, -ENOENT);
        assert_null(get(f, "pw", &e, &r));
        assert_int_equal(r, -ENOENT);
        assert_true(put(f, "abs/planted", "x", &e) < 0);
        assert_true(vol_file_remove(f->data, "abs/secret", &e) < 0);
        char p[160];
        snprintf(p, sizeof(p), "%s/planted", f->outside);
        assert_int_equal(access(p, F_OK), -1);
        snprintf(p, sizeof(p), "%s/secret", f->outside);
        assert_int_equal(access(p, F_OK), 0);
        /* a put over a link replaces the link */
        assert_int_equal(put(f, "pw", "mine\n", &e), 0);
        struct vol_file vf = {0};
        assert_int_equal(vol_file_stat(f->data, "pw", &vf, &e), 0);
        assert_int_equal(vf.kind, VOL_FILE_REGULAR);
        vol_file_clear(&vf);
        /* an absolute link resolves inside the volume */
        assert_int_equal(put(f, "etc/passwd", "volume's own\n", &e), 0);
        in_data(f, "vpw", link, sizeof(link));
        assert_int_equal(symlink("/etc/passwd", link), 0);
        char *got = get(f, "vpw", &e, &r);
        assert_string_equal(got, "volume's own\n");
        free(got);
}

static void test_fifo_and_dirs_refused(void **state) {
        struct fx *f = *state;
        struct wr_err e = {0};
        char p[160];
        in_data(f, "fifo", p, sizeof(p));
        assert_int_equal(mkfifo(p, 0644), 0);
        int r;
        assert_null(get(f, "fifo", &e, &r)); /* does not block */
        assert_int_equal(err_status(&e), WR_STATUS_FAILED_PRECONDITION);
        assert_non_null(strstr(e.msg, "not a regular file"));
        assert_int_equal(put(f, "d/x", "x", &e), 0);
        assert_null(get(f, "d", &e, &r));
        assert_int_equal(r, -EISDIR);
        assert_int_equal(vol_file_remove(f->data, "d", &e), -ENOTEMPTY);
        assert_int_equal(vol_file_remove(f->data, "d/x", &e), 0);
        assert_int_equal(vol_file_remove(f->data, "d", &e), 0);
}

static void test_list_order_and_pages(void **state) {
        struct fx *f = *state;
        struct wr_err e = {0};
        /* component order: "a/z" comes before "a-b" ('/' sorts after '-'
         * byte-wise, but a directory's entries follow its name) */
        const char *names[] = {"a-b", "a/z", "a/b/c", "b", "a/b2"};
        for (size_t i = 0; i < ELEMENTSOF(names); i++)
                assert_int_equal(put(f, names[i], "x", &e), 0);
        char link[160];
        in_data(f, "link", link, sizeof(link));
        assert_int_equal(symlink(f->outside, link), 0);
        const char *want[] = {"a/b/c", "a/b2", "a/z", "a-b", "b", "link"};
        struct vol_file *fs = NULL;
        size_t n = 0;
        bool more = false;
        assert_int_equal(vol_files_list(f->data, "", NULL, 100, &fs, &n, &more, &e), 0);
        assert_int_equal(n, ELEMENTSOF(want));
        assert_false(more);
        for (size_t i = 0; i < n; i++)
                assert_string_equal(fs[i].path, want[i]);
        assert_int_equal(fs[5].kind, VOL_FILE_SYMLINK);
        vol_files_free(fs, n);
        /* pages of 2, each after the last path of the previous */
        char after[64] = "";
        size_t seen = 0;
        do {
                assert_int_equal(vol_files_list(f->data, "", after, 2, &fs, &n, &more, &e), 0);
                for (size_t i = 0; i < n; i++)
                        assert_string_equal(fs[i].path, want[seen++]);
                if (n)
                        snprintf(after, sizeof(after), "%s", fs[n - 1].path);
                vol_files_free(fs, n);
        } while (more);
        assert_int_equal(seen, ELEMENTSOF(want));
        /* a prefix; a symlinked dir is not a directory to list */
        assert_int_equal(vol_files_list(f->data, "a/b", NULL, 10, &fs, &n, &more, &e), 0);
        assert_int_equal(n, 1);
        assert_string_equal(fs[0].path, "a/b/c");
        vol_files_free(fs, n);
        assert_int_equal(vol_files_list(f->data, "link", NULL, 10, &fs, &n, &more, &e), -ENOENT);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_names),
                cmocka_unit_test(test_path_check),
                cmocka_unit_test_setup_teardown(test_put_get_atomic, setup, teardown),
                cmocka_unit_test_setup_teardown(test_symlinks_stay_inside, setup, teardown),
                cmocka_unit_test_setup_teardown(test_fifo_and_dirs_refused, setup, teardown),
                cmocka_unit_test_setup_teardown(test_list_order_and_pages, setup, teardown),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
