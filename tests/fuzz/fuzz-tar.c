/* SPDX-License-Identifier: Apache-2.0 */
/* libFuzzer target for the layer-tar checks (src/image/tarpath.c) and the
 * unpacker (src/image/unpack.c).
 *
 * Input byte 0 selects the mode:
 *   'T'   the rest is a tar stream, unpacked into <tmp>/root; afterwards
 *         <tmp> must hold nothing but root/ (no escape), whatever happened;
 *   else  byte 1 = file type selector, bytes 2-3 = permission bits, the
 *         rest = "path\0hardlink-target" fed to img_entry_plan, whose
 *         cleaned output must be relative, without "." / ".." / empty
 *         components, and with setuid stripped. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "image/image-internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_clean(const char *p) {
        if (p[0] == '/')
                abort();
        if (p[0] == '\0')
                return;
        const char *c = p;
        for (;;) {
                const char *end = strchrnul(c, '/');
                size_t len = (size_t) (end - c);
                if (len == 0 || (len == 1 && c[0] == '.') ||
                    (len == 2 && c[0] == '.' && c[1] == '.'))
                        abort();
                if (!*end)
                        break;
                c = end + 1;
        }
}

static const mode_t types[] = {S_IFREG, S_IFDIR, S_IFLNK, S_IFIFO, S_IFCHR, S_IFBLK, S_IFSOCK, 0};

static void fuzz_plan(const uint8_t *data, size_t size) {
        if (size < 3)
                return;
        mode_t type = types[data[0] % (sizeof(types) / sizeof(types[0]))];
        mode_t perm = (mode_t) (data[1] | (data[2] << 8));
        char *buf = malloc(size - 3 + 2);
        memcpy(buf, data + 3, size - 3);
        buf[size - 3] = buf[size - 2] = '\0';
        const char *path = buf;
        size_t plen = strlen(path);
        const char *link = plen + 1 < size - 3 ? buf + plen + 1 : NULL;
        struct img_entry_plan *plan = malloc(sizeof(*plan));
        const char *why = NULL;
        int r = img_entry_plan(path, type, perm, link, plan, &why);
        if (r < 0) {
                if (!why)
                        abort();
        } else {
                check_clean(plan->path);
                if (plan->kind == IMG_ENTRY_HARDLINK) {
                        check_clean(plan->link);
                        if (!plan->link[0])
                                abort();
                }
                if (plan->kind == IMG_ENTRY_FILE && (plan->mode & (S_ISUID | S_ISGID)))
                        abort();
                if (plan->mode & S_ISUID)
                        abort();
                if (type == S_IFCHR || type == S_IFBLK || type == S_IFSOCK)
                        if (plan->kind != IMG_ENTRY_WHITEOUT && plan->kind != IMG_ENTRY_OPAQUE &&
                            plan->kind != IMG_ENTRY_SKIP && plan->kind != IMG_ENTRY_HARDLINK)
                                abort();
        }
        char out[256];
        if (img_path_clean(path, out, sizeof(out), &why) == 0)
                check_clean(out);
        free(plan);
        free(buf);
}

static char parent[64];

static void remove_parent(void) {
        rmdir(parent);
}

static void fuzz_unpack(const uint8_t *data, size_t size) {
        if (!parent[0]) {
                strcpy(parent, "/tmp/fuzz-tar-XXXXXX");
                if (!mkdtemp(parent))
                        abort();
                atexit(remove_parent);
        }
        int pfd = open(parent, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (pfd < 0 || mkdirat(pfd, "root", 0755) < 0)
                abort();
        int root = openat(pfd, "root", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        int in = memfd_create("tar", MFD_CLOEXEC);
        if (root < 0 || in < 0 || write(in, data, size) != (ssize_t) size ||
            lseek(in, 0, SEEK_SET) != 0)
                abort();
        struct img_unpack_stats st;
        struct wr_err e = {0};
        (void) img_unpack_stream(in, root, false, &st, &e);
        close(in);
        close(root);
        /* nothing may appear next to root/ */
        DIR *d = fdopendir(dup(pfd));
        struct dirent *de;
        while ((de = readdir(d)))
                if (strcmp(de->d_name, ".") && strcmp(de->d_name, "..") &&
                    strcmp(de->d_name, "root"))
                        abort();
        closedir(d);
        if (rm_rf_at(pfd, "root") < 0)
                abort();
        close(pfd);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        if (size < 1)
                return 0;
        if (data[0] == 'T')
                fuzz_unpack(data + 1, size - 1);
        else
                fuzz_plan(data + 1, size - 1);
        return 0;
}
