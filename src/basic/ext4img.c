/* SPDX-License-Identifier: Apache-2.0 */
/* ext4 images on loop devices (ext4img.h). */
#include "basic/ext4img.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/loop.h>
#include <spawn.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "basic/macro.h"

extern char **environ;

static inline void closedirp(DIR **d) {
        if (*d)
                closedir(*d);
}

int ext4img_mkfs(const char *img, uint64_t inodes, unsigned flags, struct wr_err *e) {
        return ext4img_mkfs_from(img, inodes, flags, NULL, e);
}

int ext4img_mkfs_from(const char *img, uint64_t inodes, unsigned flags, const char *root,
                      struct wr_err *e) {
        static const char *const paths[] = {"/usr/sbin/mkfs.ext4", "/sbin/mkfs.ext4",
                                            "/usr/bin/mkfs.ext4"};
        const char *prog = "mkfs.ext4";
        for (size_t i = 0; i < ELEMENTSOF(paths); i++)
                if (access(paths[i], X_OK) == 0) {
                        prog = paths[i];
                        break;
                }
        char n[32];
        snprintf(n, sizeof(n), "%llu", (unsigned long long) inodes);
        const char *argv[16];
        size_t a = 0;
        argv[a++] = prog;
        argv[a++] = "-q";
        argv[a++] = "-F";
        argv[a++] = "-m";
        argv[a++] = "0";
        if (inodes) {
                argv[a++] = "-N";
                argv[a++] = n;
        }
        if (flags & EXT4IMG_NO_JOURNAL) {
                argv[a++] = "-O";
                argv[a++] = "^has_journal,^resize_inode";
        }
        argv[a++] = "-E";
        argv[a++] = "nodiscard,lazy_itable_init=1,lazy_journal_init=1,root_owner=0:0";
        if (root) {
                argv[a++] = "-d";
                argv[a++] = root;
        }
        argv[a++] = img;
        argv[a] = NULL;
        posix_spawn_file_actions_t fa;
        posix_spawn_file_actions_init(&fa);
        posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
        posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
        posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
        pid_t pid;
        int r = posix_spawnp(&pid, prog, &fa, NULL, (char *const *) argv, environ);
        posix_spawn_file_actions_destroy(&fa);
        if (r != 0)
                return err_set(e, -r, "run %s: %s", prog, strerror(r));
        int status;
        while (waitpid(pid, &status, 0) < 0)
                if (errno != EINTR)
                        return err_set(e, -errno, "wait for %s: %m", prog);
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
                return err_set(e, -EIO, "%s %s failed (status %#x)", prog, img, status);
        return 0;
}

int ext4img_loop_find(const struct stat *st, char dev[static 32]) {
        _cleanup_(closedirp) DIR *d = opendir("/sys/block");
        if (!d)
                return -errno;
        struct dirent *de;
        while ((de = readdir(d))) {
                if (strncmp(de->d_name, "loop", 4) != 0)
                        continue;
                snprintf(dev, 32, "/dev/%.20s", de->d_name);
                _cleanup_close_ int fd = open(dev, O_RDONLY | O_CLOEXEC);
                if (fd < 0)
                        continue;
                struct loop_info64 li;
                if (ioctl(fd, LOOP_GET_STATUS64, &li) < 0)
                        continue;
                if (li.lo_device == st->st_dev && li.lo_inode == st->st_ino)
                        return TAKE_FD(fd);
        }
        return -ENOENT;
}

int ext4img_loop_attach(int img, const char *path, char dev[static 32], struct wr_err *e) {
        _cleanup_close_ int ctl = open("/dev/loop-control", O_RDWR | O_CLOEXEC);
        if (ctl < 0)
                return err_set(e, -errno, "open /dev/loop-control: %m");
        for (int tries = 0; tries < 32; tries++) {
                int n = ioctl(ctl, LOOP_CTL_GET_FREE);
                if (n < 0)
                        return err_set(e, -errno, "find a free loop device: %m");
                snprintf(dev, 32, "/dev/loop%d", n);
                _cleanup_close_ int fd = open(dev, O_RDWR | O_CLOEXEC);
                if (fd < 0)
                        return err_set(e, -errno, "open %s: %m", dev);
                /* Direct I/O: the image's pages are cached once (by its
                 * ext4), not twice; its fsync is ~3x faster. Not every
                 * host filesystem takes it: then buffered. */
                struct loop_config c = {.fd = (uint32_t) img};
                c.info.lo_flags = LO_FLAGS_AUTOCLEAR | LO_FLAGS_DIRECT_IO;
                snprintf((char *) c.info.lo_file_name, LO_NAME_SIZE, "%s", path);
                int r = ioctl(fd, LOOP_CONFIGURE, &c);
                if (r < 0 && errno == EINVAL) {
                        c.info.lo_flags = LO_FLAGS_AUTOCLEAR;
                        r = ioctl(fd, LOOP_CONFIGURE, &c);
                }
                if (r == 0)
                        return TAKE_FD(fd);
                /* another process took this one meanwhile: the next */
                if (errno != EBUSY)
                        return err_set(e, -errno, "configure %s: %m", dev);
        }
        return err_set(e, -EBUSY, "no free loop device");
}
