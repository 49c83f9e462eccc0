/* SPDX-License-Identifier: Apache-2.0 */
/* sandbox/files.c: the Files service's operations on a plain directory
 * standing in for a sandbox's root: path checks, hostile symlinks (out of
 * the root, in parents, loops), FIFOs never opened, atomic writes that
 * keep mode and owner, listings in path order that do not follow
 * symlinks, recursive removal that stays inside, watches. Mounts, /proc
 * and the live sandbox are covered by tests/e2e/test_files.py. */
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "sandbox/files.h"

struct fx {
        char dir[64];
        char root[96], outside[96], secret[128];
        struct sbx_fs fs;
};

static int rm_one(const char *p, const struct stat *st, int flag, struct FTW *f) {
        (void) st, (void) flag, (void) f;
        (void) remove(p);
        return 0;
}

static void put(const char *path, const char *content) {
        int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        assert_true(fd >= 0);
        assert_int_equal(write(fd, content, strlen(content)), (ssize_t) strlen(content));
        close(fd);
}

static int setup(void **state) {
        struct fx *f = calloc(1, sizeof(*f));
        snprintf(f->dir, sizeof(f->dir), "/tmp/wr-test-files-XXXXXX");
        assert_non_null(mkdtemp(f->dir));
        snprintf(f->root, sizeof(f->root), "%s/root", f->dir);
        snprintf(f->outside, sizeof(f->outside), "%s/outside", f->dir);
        snprintf(f->secret, sizeof(f->secret), "%s/secret", f->outside);
        assert_int_equal(mkdir(f->root, 0755), 0);
        assert_int_equal(mkdir(f->outside, 0755), 0);
        put(f->secret, "HOST");
        f->fs = (struct sbx_fs){.root_fd = open(f->root, O_PATH | O_DIRECTORY | O_CLOEXEC),
                                .pidfd = -EBADF,
                                .ctl_fd = -EBADF,
                                .files_fd = -EBADF,
                                .uid = getuid(),
                                .gid = getgid(),
                                .workdir = strdup("/w")};
        assert_true(f->fs.root_fd >= 0);
        *state = f;
        return 0;
}

static int teardown(void **state) {
        struct fx *f = *state;
        sbx_fs_clear(&f->fs);
        nftw(f->dir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
        free(f);
        return 0;
}

static char *in_root(struct fx *f, const char *rel) {
        static char buf[512];
        snprintf(buf, sizeof(buf), "%s%s", f->root, rel);
        return buf;
}

static void test_path_check(void **state) {
        (void) state;
        struct wr_err e = {0};
        assert_int_equal(sbx_file_path_check("path", "", 0, &e), -EINVAL);
        assert_non_null(strstr(e.msg, "path: empty"));
        assert_int_equal(sbx_file_path_check("path", "/a\0b", 4, &e), -EINVAL);
        assert_non_null(strstr(e.msg, "NUL"));
        char longp[5000];
        memset(longp, 'a', sizeof(longp));
        longp[0] = '/';
        assert_int_equal(sbx_file_path_check("path", longp, sizeof(longp), &e), -EINVAL);
        assert_int_equal(sbx_file_path_check("path", longp, 257, &e), -EINVAL);
        assert_non_null(strstr(e.msg, "component"));
        assert_int_equal(sbx_file_path_check("path", "/a/../b", 7, &e), 0);
        assert_int_equal(sbx_file_path_check("path", "rel\xff", 4, &e), 0);

        char *abs = NULL;
        assert_int_equal(sbx_file_path_abs("path", "/w", "x/y", &abs, &e), 0);
        assert_string_equal(abs, "/w/x/y");
        free(abs);
        assert_int_equal(sbx_file_path_abs("path", "/w", "/z", &abs, &e), 0);
        assert_string_equal(abs, "/z");
        free(abs);
        memset(longp, 'a', 4095);
        longp[4095] = 0;
        assert_int_equal(sbx_file_path_abs("path", "/w", longp, &abs, &e), -EINVAL);

        static const struct {
                const char *in, *dir, *leaf;
        } ok[] = {{"/a/b", "/a", "b"},
                  {"/a/b/", "/a", "b"},
                  {"/x", "/", "x"},
                  {"//x//y//", "//x", "y"},
                  {"/a/../b", "/a/..", "b"}};
        for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
                char *d = NULL, *l = NULL;
                assert_int_equal(sbx_file_path_split("path", ok[i].in, &d, &l, &e), 0);
                assert_string_equal(d, ok[i].dir);
                assert_string_equal(l, ok[i].leaf);
                free(d);
                free(l);
        }
        static const char *const bad[] = {"/", "///", "/a/.", "/a/..", "/a/../"};
        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
                char *d = NULL, *l = NULL;
                assert_int_equal(sbx_file_path_split("path", bad[i], &d, &l, &e), -EINVAL);
        }
}

static void test_reads_stay_inside(void **state) {
        struct fx *f = *state;
        struct wr_err e = {0};
        assert_int_equal(mkdir(in_root(f, "/etc"), 0755), 0);
        put(in_root(f, "/etc/hostname"), "sandbox");
        assert_int_equal(symlink(f->secret, in_root(f, "/abs")), 0);
        assert_int_equal(symlink("../../../../../../outside/secret", in_root(f, "/rel")), 0);
        assert_int_equal(symlink("/", in_root(f, "/up")), 0);
        assert_int_equal(symlink(f->outside, in_root(f, "/outdir")), 0);
        assert_int_equal(symlink("/loop2", in_root(f, "/loop1")), 0);
        assert_int_equal(symlink("/loop1", in_root(f, "/loop2")), 0);
        assert_int_equal(mkfifo(in_root(f, "/fifo"), 0644), 0);
        int fd = -1;
        struct stat st;
        assert_int_equal(sbx_file_open_read(&f->fs, "path", "/abs", &fd, &st, &e), -ENOENT);
        assert_int_equal(sbx_file_open_read(&f->fs, "path", "/rel", &fd, &st, &e), -ENOENT);
        assert_int_equal(sbx_file_open_read(&f->fs, "path", "/outdir/secret", &fd, &st, &e),
                         -ENOENT);
        assert_int_equal(sbx_file_open_read(&f->fs, "path", "/../../outside/secret", &fd, &st, &e),
                         -ENOENT);
        assert_int_equal(sbx_file_open_read(&f->fs, "path", "/loop1", &fd, &st, &e), -ELOOP);
        assert_int_equal(sbx_file_open_read(&f->fs, "path", "/fifo", &fd, &st, &e), -EINVAL);
        assert_int_equal(sbx_file_open_read(&f->fs, "path", "/etc", &fd, &st, &e), -EISDIR);
        /* through "/" and ".." : the sandbox's own file */
        assert_int_equal(sbx_file_open_read(&f->fs, "path", "/up/../up/etc/hostname", &fd, &st, &e),
                         0);
        char buf[16] = {0};
        assert_int_equal(read(fd, buf, sizeof(buf)), 7);
        assert_string_equal(buf, "sandbox");
        close(fd);
        struct sbx_file_info fi = {0};
        assert_int_equal(sbx_file_stat(&f->fs, "path", "/abs", &fi, &e), 0);
        assert_int_equal(fi.kind, SBX_FILE_SYMLINK);
        assert_string_equal(fi.link, f->secret);
        sbx_file_info_clear(&fi);
        assert_int_equal(sbx_file_stat(&f->fs, "path", "/fifo", &fi, &e), 0);
        assert_int_equal(fi.kind, SBX_FILE_OTHER);
        sbx_file_info_clear(&fi);
}

static void write_all(struct fx *f, const char *abs, const char *data, mode_t mode, int *r) {
        struct wr_err e = {0};
        struct sbx_file_write *w = NULL;
        struct sbx_file_info fi = {0};
        *r = sbx_file_write_begin(&f->fs, "meta.path", abs, mode, false, 0, 0, &w, &e);
        if (*r < 0)
                return;
        assert_int_equal(sbx_file_write_data(w, data, strlen(data), &e), 0);
        *r = sbx_file_write_commit(w, &fi, &e);
        sbx_file_write_free(w);
        sbx_file_info_clear(&fi);
}

static void test_writes_stay_inside(void **state) {
        struct fx *f = *state;
        int r;
        assert_int_equal(symlink(f->secret, in_root(f, "/leaf")), 0);
        assert_int_equal(symlink(f->outside, in_root(f, "/pdir")), 0);
        write_all(f, "/leaf", "mine", 0, &r);
        assert_int_equal(r, 0);
        struct stat st;
        assert_int_equal(lstat(in_root(f, "/leaf"), &st), 0);
        assert_true(S_ISREG(st.st_mode)); /* the link was replaced, not followed */
        write_all(f, "/pdir/secret", "x", 0, &r);
        assert_int_equal(r, -ENOENT);          /* the host dir is not in the root */
        write_all(f, "/a/b/c", "deep", 0, &r); /* parents made */
        assert_int_equal(r, 0);
        assert_int_equal(chmod(in_root(f, "/a/b/c"), 0751), 0);
        write_all(f, "/a/b/c", "again", 0, &r);
        assert_int_equal(lstat(in_root(f, "/a/b/c"), &st), 0);
        assert_int_equal(st.st_mode & 07777, 0751);
        assert_int_equal(mkfifo(in_root(f, "/fifo"), 0644), 0);
        write_all(f, "/fifo", "x", 0, &r);
        assert_int_equal(r, -EINVAL);
        write_all(f, "/a", "x", 0, &r);
        assert_int_equal(r, -EISDIR);
        /* an aborted write leaves nothing */
        struct wr_err e = {0};
        struct sbx_file_write *w = NULL;
        assert_int_equal(sbx_file_write_begin(&f->fs, "p", "/a/gone", 0, false, 0, 0, &w, &e), 0);
        assert_int_equal(sbx_file_write_data(w, "zz", 2, &e), 0);
        sbx_file_write_free(w);
        struct sbx_file_list *l = NULL;
        assert_int_equal(sbx_file_list_open(&f->fs, "p", "/a", false, 0, &l, &e), 0);
        struct sbx_file_info *es = NULL;
        size_t n = 0;
        assert_int_equal(sbx_file_list_next(l, 10, &es, &n, &e), 0);
        assert_int_equal(n, 1);
        assert_string_equal(es[0].path, "/a/b");
        sbx_file_infos_free(es, n);
        sbx_file_list_free(l);
        /* the host's file is untouched */
        char buf[8] = {0};
        int fd = open(f->secret, O_RDONLY | O_CLOEXEC);
        assert_int_equal(read(fd, buf, sizeof(buf)), 4);
        close(fd);
        assert_string_equal(buf, "HOST");
}

static void test_list_remove_rename(void **state) {
        struct fx *f = *state;
        struct wr_err e = {0};
        assert_int_equal(mkdir(in_root(f, "/t"), 0755), 0);
        assert_int_equal(mkdir(in_root(f, "/t/b"), 0755), 0);
        put(in_root(f, "/t/b/x"), "1");
        put(in_root(f, "/t/a"), "2");
        assert_int_equal(symlink(f->outside, in_root(f, "/t/c")), 0);
        struct sbx_file_list *l = NULL;
        assert_int_equal(sbx_file_list_open(&f->fs, "p", "/t/", true, 0, &l, &e), 0);
        struct sbx_file_info *es = NULL;
        size_t n = 0;
        assert_int_equal(sbx_file_list_next(l, 2, &es, &n, &e), 0);
        assert_int_equal(n, 2);
        assert_string_equal(es[0].path, "/t/a");
        assert_string_equal(es[1].path, "/t/b");
        sbx_file_infos_free(es, n);
        assert_int_equal(sbx_file_list_next(l, 10, &es, &n, &e), 0);
        assert_int_equal(n, 2);
        assert_string_equal(es[0].path, "/t/b/x");
        assert_string_equal(es[1].path, "/t/c");
        assert_int_equal(es[1].kind, SBX_FILE_SYMLINK);
        sbx_file_infos_free(es, n);
        assert_int_equal(sbx_file_list_next(l, 10, &es, &n, &e), 0);
        assert_int_equal(n, 0);
        sbx_file_infos_free(es, n);
        sbx_file_list_free(l);

        struct sbx_file_info fi = {0};
        assert_int_equal(sbx_file_rename(&f->fs, "/t/a", "/t/b/a", false, &fi, &e), 0);
        sbx_file_info_clear(&fi);
        assert_int_equal(sbx_file_rename(&f->fs, "/t/b/a", "/t/b/x", true, &fi, &e), -EEXIST);
        assert_int_equal(sbx_file_remove(&f->fs, "p", "/t", false, &e), -ENOTEMPTY);
        assert_int_equal(sbx_file_remove(&f->fs, "p", "/t", true, &e), 0);
        assert_int_equal(access(f->secret, F_OK), 0);
        assert_int_equal(sbx_file_remove(&f->fs, "p", "/t", true, &e), -ENOENT);
        assert_int_equal(
                sbx_file_mkdir(&f->fs, "p", "/m/n", 0700, getuid(), getgid(), true, &fi, &e), 0);
        assert_int_equal(fi.mode, 0700);
        sbx_file_info_clear(&fi);
        assert_int_equal(sbx_file_mkdir(&f->fs, "p", "/m/n", 0, 0, 0, false, &fi, &e), -EEXIST);
        assert_int_equal(sbx_file_symlink(&f->fs, "p", "/m/l", "/etc/x", false, 0, 0, &fi, &e), 0);
        assert_int_equal(fi.kind, SBX_FILE_SYMLINK);
        sbx_file_info_clear(&fi);
}

static void test_watch(void **state) {
        struct fx *f = *state;
        struct wr_err e = {0};
        assert_int_equal(mkdir(in_root(f, "/w"), 0755), 0);
        struct sbx_watch *w = NULL;
        assert_int_equal(sbx_watch_new(f->fs.root_fd, "p", "/w", true, &w, &e), 0);
        assert_int_equal(mkdir(in_root(f, "/w/d"), 0755), 0);
        struct sbx_watch_event *evs = NULL;
        size_t n = 0;
        assert_int_equal(sbx_watch_read(w, &evs, &n), 0);
        put(in_root(f, "/w/d/f"), "x");
        assert_int_equal(unlink(in_root(f, "/w/d/f")), 0);
        assert_int_equal(sbx_watch_read(w, &evs, &n), 0);
        bool created = false, deleted = false;
        for (size_t i = 0; i < n; i++) {
                created |= evs[i].kind == SBX_WATCH_CREATED && !strcmp(evs[i].path, "/w/d/f");
                deleted |= evs[i].kind == SBX_WATCH_DELETED && !strcmp(evs[i].path, "/w/d/f");
        }
        assert_true(created && deleted);
        sbx_watch_events_free(evs, n);
        evs = NULL;
        n = 0;
        assert_int_equal(rmdir(in_root(f, "/w/d")), 0);
        assert_int_equal(rmdir(in_root(f, "/w")), 0);
        assert_int_equal(sbx_watch_read(w, &evs, &n), 1); /* gone */
        sbx_watch_events_free(evs, n);
        sbx_watch_free(w);
        assert_int_equal(sbx_watch_new(f->fs.root_fd, "p", "/nope", false, &w, &e), -ENOENT);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_path_check),
                cmocka_unit_test_setup_teardown(test_reads_stay_inside, setup, teardown),
                cmocka_unit_test_setup_teardown(test_writes_stay_inside, setup, teardown),
                cmocka_unit_test_setup_teardown(test_list_remove_rename, setup, teardown),
                cmocka_unit_test_setup_teardown(test_watch, setup, teardown),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
