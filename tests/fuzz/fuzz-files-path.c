/* SPDX-License-Identifier: Apache-2.0 */
/* libFuzzer target: a path a client gives to the Files service (ReadFile,
 * Stat, ListDir, WriteFile...), checked (sbx_file_path_check), made
 * absolute against a working dir (sbx_file_path_abs), split
 * (sbx_file_path_split) and resolved inside a sandbox root the sandbox
 * filled with symlinks that climb out (to "/", "../../..", a host dir
 * with a canary file) and a FIFO. Properties: an accepted path has no NUL
 * and fits the limits; a split gives a non-empty leaf that is not "." or
 * ".." and a dir that is a prefix of the path; whatever is opened or
 * listed is never the host's canary; nothing blocks (a FIFO is never
 * opened). */
#include <fcntl.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sandbox/files.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int root_fd = -1;
static struct stat canary;
static char dir[] = "/tmp/wr-fuzz-files-XXXXXX";

static int rm_one(const char *p, const struct stat *st, int flag, struct FTW *f) {
        (void) st, (void) flag, (void) f;
        return remove(p) < 0 ? 0 : 0;
}

static void cleanup(void) {
        nftw(dir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

static void setup(void) {
        char p[256];
        if (!mkdtemp(dir))
                abort();
        atexit(cleanup);
        snprintf(p, sizeof(p), "%s/outside", dir);
        mkdir(p, 0755);
        snprintf(p, sizeof(p), "%s/outside/canary", dir);
        int fd = open(p, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
        if (fd < 0 || write(fd, "HOST\n", 5) != 5 || fstat(fd, &canary) < 0)
                abort();
        close(fd);
        const char *dirs[] = {"root", "root/d", "root/d/e", "root/etc"};
        for (size_t i = 0; i < sizeof(dirs) / sizeof(dirs[0]); i++) {
                snprintf(p, sizeof(p), "%s/%s", dir, dirs[i]);
                mkdir(p, 0755);
        }
        snprintf(p, sizeof(p), "%s/root/etc/hostname", dir);
        fd = open(p, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
        if (fd < 0)
                abort();
        close(fd);
        snprintf(p, sizeof(p), "%s/root/fifo", dir);
        if (mkfifo(p, 0644) < 0)
                abort();
        char outside[200], canary_path[220];
        snprintf(outside, sizeof(outside), "%s/outside", dir);
        snprintf(canary_path, sizeof(canary_path), "%s/outside/canary", dir);
        const char *links[][2] = {{"abs", "/"},
                                  {"up", "../../.."},
                                  {"d/up", "../../../.."},
                                  {"canary", canary_path},
                                  {"out", outside},
                                  {"d/loop", "loop2"},
                                  {"d/loop2", "loop"}};
        for (size_t i = 0; i < sizeof(links) / sizeof(links[0]); i++) {
                snprintf(p, sizeof(p), "%s/root/%s", dir, links[i][0]);
                if (symlink(links[i][1], p) < 0)
                        abort();
        }
        snprintf(p, sizeof(p), "%s/root", dir);
        root_fd = open(p, O_PATH | O_DIRECTORY | O_CLOEXEC);
        if (root_fd < 0)
                abort();
}

static bool is_canary(const struct stat *st) {
        return st->st_ino == canary.st_ino && st->st_dev == canary.st_dev;
}

int LLVMFuzzerTestOneInput(const uint8_t *buf, size_t size) {
        if (root_fd < 0)
                setup();
        struct wr_err e = {0};
        if (sbx_file_path_check("path", buf, size, &e) < 0)
                return 0;
        if (!size || memchr(buf, 0, size) || size > SBX_FILE_PATH_MAX)
                abort();
        char *s = strndup((const char *) buf, size);
        char *abs = NULL;
        if (!s || sbx_file_path_abs("path", "/d", s, &abs, &e) < 0) {
                free(s);
                return 0;
        }
        if (abs[0] != '/' || strlen(abs) > SBX_FILE_PATH_MAX)
                abort();
        char *d = NULL, *leaf = NULL;
        if (sbx_file_path_split("path", abs, &d, &leaf, &e) == 0) {
                if (!*leaf || !strcmp(leaf, ".") || !strcmp(leaf, "..") || strchr(leaf, '/') ||
                    strncmp(abs, d, strlen(d)) != 0)
                        abort();
                free(d);
                free(leaf);
        }
        int fd = -1;
        struct stat st;
        /* no control connection: the operations run here on root_fd
         * (init/file-ops.c, the code warren-init runs) */
        const struct sbx_fs fs = {.root_fd = root_fd, .files_fd = -1, .ctl_fd = -1, .pidfd = -1};
        if (sbx_file_open_read(&fs, "path", abs, &fd, &st, &e) == 0) {
                struct stat real;
                if (fstat(fd, &real) < 0 || is_canary(&real) || !S_ISREG(real.st_mode))
                        abort();
                close(fd);
        }
        struct sbx_file_info fi = {0};
        if (sbx_file_stat(&fs, "path", abs, &fi, &e) == 0)
                sbx_file_info_clear(&fi);
        struct sbx_file_list *l = NULL;
        if (sbx_file_list_open(&fs, "path", abs, true, 3, &l, &e) == 0) {
                struct sbx_file_info *es = NULL;
                size_t n = 0;
                if (sbx_file_list_next(l, 64, &es, &n, &e) == 0)
                        for (size_t i = 0; i < n; i++)
                                if (strstr(es[i].path, "canary") && es[i].kind != SBX_FILE_SYMLINK)
                                        abort();
                sbx_file_infos_free(es, n);
                sbx_file_list_free(l);
        }
        free(abs);
        free(s);
        return 0;
}
