/* SPDX-License-Identifier: Apache-2.0 */
/* The bounded writable layer (runtime-internal.h: rt_disk_make).
 *
 * A sparse ext4 image per sandbox, <dir>/disk.img (a copy of a template
 * made once per size), on a loop device that
 * clears itself (LO_FLAGS_AUTOCLEAR), mounted detached (fsmount: the
 * mount is in no mount namespace, so no other namespace cloned from the
 * host's, a parked pool child's for one, ever holds a copy of it). Its
 * root holds the overlay's upper and work dirs, u/ and w/. The child
 * attaches the mount over <dir>/upper in its own mount namespace; warrend
 * keeps the fd for host-side access to the upper dir (snapshots, the
 * change journal). The image, its loop device and its superblock live as
 * long as the last of: the sandbox's mount namespace, warrend's fd, an fd
 * opened below it. Teardown closes the fd and removes the image with the
 * sandbox dir: nothing is left to unmount or detach, a crash included
 * (the kernel drops the references of a dead process). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "basic/ext4img.h"
#include "basic/macro.h"
#include "runtime/runtime-internal.h"

#ifndef MOUNT_ATTR_NOATIME
#define MOUNT_ATTR_NOATIME 0x00000010
#endif
/* linux/fs/ext4/ext4.h (not in the uapi headers) */
#define RT_EXT4_IOC_SHUTDOWN _IOR('X', 125, uint32_t)
#define RT_EXT4_GOING_FLAGS_NOLOGFLUSH 0x2

/* Mount the ext4 on the loop device dev, detached. When the device is
 * mounted already (a sandbox left running by a previous warrend), the
 * superblock in use is shared. */
static int disk_mount(const char *dev, struct wr_err *e) {
        _cleanup_close_ int fs = sys_fsopen("ext4", FSOPEN_CLOEXEC);
        if (fs < 0)
                return err_set(e, -errno, "fsopen ext4: %m");
        if (sys_fsconfig(fs, RT_FSCONFIG_SET_STRING, "source", dev, 0) < 0)
                return err_set(e, -errno, "configure ext4: source %s: %m", dev);
        /* the inode tables of a fresh sparse image read as zeros already:
         * no background thread writing them out (it would grow the
         * image's file by ~64 MiB per GiB) */
        (void) sys_fsconfig(fs, RT_FSCONFIG_SET_FLAG, "noinit_itable", NULL, 0);
        if (sys_fsconfig(fs, RT_FSCONFIG_CMD_CREATE, NULL, NULL, 0) < 0)
                return err_set(e, -errno, "mount ext4 on %s: %m", dev);
        int m = sys_fsmount(fs, FSMOUNT_CLOEXEC,
                            MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | MOUNT_ATTR_NOATIME);
        if (m < 0)
                return err_set(e, -errno, "fsmount ext4 on %s: %m", dev);
        return m;
}

static int fs_make(int t, const char *tmp, uint64_t bytes, struct wr_err *e);

/* The template of a layer of bytes in tdir, .disk-<bytes>.img: a file
 * system as fs_make makes it, made once per size (a few tens of ms),
 * opened O_RDONLY. A layer is a copy of its few data extents (~0.2 MiB
 * for 10 GiB): ~0.3 ms, not a mkfs per sandbox. Concurrent makers each make their own temp file and
 * rename it into place: every template that is there is whole. */
static int template_open(const char *tdir, uint64_t bytes, struct wr_err *e) {
        char path[PATH_MAX], tmp[PATH_MAX];
        snprintf(path, sizeof(path), "%s/" RT_DISK_TEMPLATE "%llu.img", tdir,
                 (unsigned long long) bytes);
        int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
        if (fd >= 0 || errno != ENOENT)
                return fd >= 0 ? fd : err_set(e, -errno, "open %s: %m", path);
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        snprintf(tmp, sizeof(tmp), "%s.tmp-%d-%ld", path, (int) gettid(), (long) ts.tv_nsec);
        _cleanup_close_ int t = open(tmp, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
        if (t < 0)
                return err_set(e, -errno, "create %s: %m", tmp);
        int r = fs_make(t, tmp, bytes, e);
        if (r >= 0 && rename(tmp, path) < 0)
                r = err_set(e, -errno, "rename %s: %m", tmp);
        if (r < 0) {
                (void) unlink(tmp);
                return r;
        }
        fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
        return fd >= 0 ? fd : err_set(e, -errno, "open %s: %m", path);
}

/* Make the layer's file system of bytes in the file t (path): its root
 * holds the overlay's upper and work dirs already, so a layer needs no
 * write to be ready. */
static int fs_make(int t, const char *tmp, uint64_t bytes, struct wr_err *e) {
        char root[PATH_MAX], up[PATH_MAX + 8], wk[PATH_MAX + 8];
        snprintf(root, sizeof(root), "%s.d", tmp);
        snprintf(up, sizeof(up), "%s/" RT_DISK_UPPER, root);
        snprintf(wk, sizeof(wk), "%s/" RT_DISK_WORK, root);
        int r = 0;
        if (mkdir(root, 0755) < 0 || mkdir(up, 0755) < 0 || mkdir(wk, 0700) < 0 ||
            chmod(root, 0755) < 0 || chmod(up, 0755) < 0 || chmod(wk, 0700) < 0)
                r = err_set(e, -errno, "make %s: %m", root);
        else if (ftruncate(t, (off_t) bytes) < 0)
                r = err_set(e, -errno, "size %s: %m", tmp);
        else
                r = ext4img_mkfs_from(tmp, 0, EXT4IMG_NO_JOURNAL, root, e);
        (void) rmdir(up);
        (void) rmdir(wk);
        (void) rmdir(root);
        return r;
}

/* Copy the data extents of from (its holes stay holes) into to, which
 * has from's size already. */
static int copy_sparse(int from, int to) {
        off_t off = 0;
        for (;;) {
                off_t data = lseek(from, off, SEEK_DATA);
                if (data < 0)
                        return errno == ENXIO ? 0 : -errno;
                off_t hole = lseek(from, data, SEEK_HOLE);
                if (hole < 0)
                        return -errno;
                loff_t in = data, out = data;
                while (in < hole) {
                        ssize_t n = copy_file_range(from, &in, to, &out, (size_t) (hole - in), 0);
                        if (n < 0 && errno == EINTR)
                                continue;
                        if (n <= 0)
                                return n < 0 ? -errno : -EIO;
                }
                off = hole;
        }
}

int rt_disk_make(int dirfd, const char *dir, const char *template_dir, uint64_t bytes,
                 struct wr_err *e) {
        char img[PATH_MAX];
        if (snprintf(img, sizeof(img), "%s/" RT_DISK_IMAGE, dir) >= (int) sizeof(img))
                return err_set(e, -ENAMETOOLONG, "%s: path too long", dir);
        _cleanup_close_ int tpl = -EBADF;
        if (template_dir && (tpl = template_open(template_dir, bytes, e)) < 0)
                return err_prefix(e, tpl, "the writable layer");
        _cleanup_close_ int fd = openat(dirfd, RT_DISK_IMAGE,
                                        O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
        if (fd < 0)
                return err_set(e, -errno, "create %s: %m", img);
        if (tpl < 0) {
                int r = fs_make(fd, img, bytes, e);
                if (r < 0)
                        return err_prefix(e, r, "the writable layer");
        } else {
                int r = ftruncate(fd, (off_t) bytes) < 0 ? -errno : copy_sparse(tpl, fd);
                if (r < 0)
                        return err_set(e, r, "the writable layer: copy the template: %s",
                                       strerror(-r));
        }
        char dev[32];
        /* the loop device clears itself once this fd and the mount are
         * gone: keep it open until the mount holds the device */
        _cleanup_close_ int loop = ext4img_loop_attach(fd, img, dev, e);
        if (loop < 0)
                return err_prefix(e, loop, "the writable layer");
        int m = disk_mount(dev, e);
        return m < 0 ? err_prefix(e, m, "the writable layer") : m;
}

void rt_disk_sweep(const char *dir) {
        _cleanup_close_ int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        DIR *d = dfd >= 0 ? fdopendir(dfd) : NULL;
        if (!d)
                return;
        dfd = -EBADF; /* the DIR's now */
        struct dirent *de;
        while ((de = readdir(d)))
                if (strncmp(de->d_name, RT_DISK_TEMPLATE, strlen(RT_DISK_TEMPLATE)) == 0 &&
                    unlinkat(dirfd(d), de->d_name, 0) < 0 && errno == EISDIR)
                        (void) rm_rf_at(dirfd(d), de->d_name); /* a half-made root */
        closedir(d);
}

int rt_disk_open(int dirfd, const char *dir, struct wr_err *e) {
        struct stat st;
        if (fstatat(dirfd, RT_DISK_IMAGE, &st, AT_SYMLINK_NOFOLLOW) < 0)
                return errno == ENOENT ? -ENOENT : err_set(e, -errno, "stat %s/disk.img: %m", dir);
        char dev[32];
        _cleanup_close_ int loop = ext4img_loop_find(&st, dev);
        if (loop < 0)
                return err_set(e, -ESRCH,
                               "%s/" RT_DISK_IMAGE " is on no loop device (the sandbox is gone)",
                               dir);
        return disk_mount(dev, e);
}

void rt_disk_drop(int *fd) {
        if (*fd < 0)
                return;
        /* shut the file system down first: the sandbox is gone, what it
         * left dirty in the page cache is not written out to an image
         * about to be deleted (that writeback would run in whoever drops
         * the last reference: this thread) */
        int dir = openat(*fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (dir >= 0) {
                uint32_t how = RT_EXT4_GOING_FLAGS_NOLOGFLUSH;
                (void) ioctl(dir, RT_EXT4_IOC_SHUTDOWN, &how);
                close(dir);
        }
        *fd = safe_close(*fd);
}
