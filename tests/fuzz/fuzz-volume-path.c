/* SPDX-License-Identifier: Apache-2.0 */
/* libFuzzer target: a path a client gives for a file of a volume
 * (PutFile/GetFile/Stat/RemoveFile/ListFiles), checked by vol_path_check
 * and then resolved inside a volume a sandbox has filled with symlinks
 * that climb out (to "/", "../../..", a host dir with a canary file).
 * Properties: an accepted path has no NUL, no newline, is not absolute
 * and has no ".." component; whatever it resolves to is never the host's
 * canary (nor anything outside the volume's directory). */
#include <fcntl.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "volume/volume.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int data_fd = -1;
static struct stat canary, outside;
static char dir[] = "/tmp/wr-fuzz-volume-XXXXXX";

static int rm_one(const char *p, const struct stat *st, int flag, struct FTW *f) {
        return remove(p) < 0 ? 0 : 0;
}

/* The test tree goes when the fuzzer exits. */
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
        if (stat(p, &outside) < 0)
                abort();
        snprintf(p, sizeof(p), "%s/outside/canary", dir);
        int fd = open(p, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
        if (fd < 0 || write(fd, "HOST\n", 5) != 5 || fstat(fd, &canary) < 0)
                abort();
        close(fd);
        snprintf(p, sizeof(p), "%s/data", dir);
        mkdir(p, 0755);
        snprintf(p, sizeof(p), "%s/data/d/e", dir);
        mkdir(p, 0755);
        *strrchr(p, '/') = 0;
        mkdir(p, 0755);
        snprintf(p, sizeof(p), "%s/data/d/e", dir);
        mkdir(p, 0755);
        const char *links[][2] = {{"abs", "/"},
                                  {"up", "../../.."},
                                  {"d/up", "../../../.."},
                                  {"canary", NULL},
                                  {"out", NULL}};
        for (size_t i = 0; i < sizeof(links) / sizeof(links[0]); i++) {
                char target[256];
                if (!links[i][1])
                        snprintf(target, sizeof(target), "%s/outside%s", dir,
                                 strcmp(links[i][0], "canary") ? "" : "/canary");
                else
                        snprintf(target, sizeof(target), "%s", links[i][1]);
                snprintf(p, sizeof(p), "%s/data/%s", dir, links[i][0]);
                if (symlink(target, p) < 0)
                        abort();
        }
        snprintf(p, sizeof(p), "%s/data", dir);
        data_fd = open(p, O_PATH | O_DIRECTORY | O_CLOEXEC);
        if (data_fd < 0)
                abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *buf, size_t size) {
        if (data_fd < 0)
                setup();
        struct wr_err e = {0};
        const char *path = (const char *) buf;
        if (vol_path_check("path", path, size, true, &e) < 0)
                return 0;
        if (memchr(path, 0, size) || memchr(path, '\n', size) || (size && path[0] == '/') ||
            size > VOL_PATH_MAX)
                abort();
        char *s = strndup(path, size);
        if (!s)
                return 0;
        for (char *c = s; *c;) { /* no ".." component */
                size_t n = strcspn(c, "/");
                if (n == 2 && c[0] == '.' && c[1] == '.')
                        abort();
                c += n;
                while (*c == '/')
                        c++;
        }
        int fd = -1;
        struct stat st;
        if (vol_file_open(data_fd, s, &fd, &st, &e) == 0) {
                if (st.st_ino == canary.st_ino && st.st_dev == canary.st_dev)
                        abort();
                close(fd);
        }
        struct vol_file *files = NULL;
        size_t n = 0;
        bool more = false;
        if (vol_files_list(data_fd, s, NULL, 8, &files, &n, &more, &e) == 0)
                for (size_t i = 0; i < n; i++)
                        if (strstr(files[i].path, "canary") && files[i].kind != VOL_FILE_SYMLINK)
                                abort();
        vol_files_free(files, n);
        free(s);
        return 0;
}
