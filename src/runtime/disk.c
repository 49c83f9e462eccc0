/* SPDX-License-Identifier: Apache-2.0 */
/* The bounded writable layer (runtime-internal.h: rt_disk_make).
 *
 * A sparse ext4 image per sandbox, <dir>/disk.img, on a loop device that
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
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
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

int rt_disk_make(int dirfd, const char *dir, uint64_t bytes, struct wr_err *e) {
        char img[PATH_MAX];
        if (snprintf(img, sizeof(img), "%s/" RT_DISK_IMAGE, dir) >= (int) sizeof(img))
                return err_set(e, -ENAMETOOLONG, "%s: path too long", dir);
        _cleanup_close_ int fd = openat(dirfd, RT_DISK_IMAGE,
                                        O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
        if (fd < 0)
                return err_set(e, -errno, "create %s: %m", img);
        if (ftruncate(fd, (off_t) bytes) < 0)
                return err_set(e, -errno, "size %s: %m", img);
        int r = ext4img_mkfs(img, 0, EXT4IMG_NO_JOURNAL, e);
        if (r < 0)
                return err_prefix(e, r, "the writable layer");
        char dev[32];
        /* the loop device clears itself once this fd and the mount are
         * gone: keep it open until the mount holds the device */
        _cleanup_close_ int loop = ext4img_loop_attach(fd, img, dev, e);
        if (loop < 0)
                return err_prefix(e, loop, "the writable layer");
        _cleanup_close_ int m = disk_mount(dev, e);
        if (m < 0)
                return err_prefix(e, m, "the writable layer");
        if (mkdirat(m, "u", 0755) < 0 || mkdirat(m, "w", 0700) < 0)
                return err_set(e, -errno, "the writable layer: mkdir in %s: %m", img);
        return TAKE_FD(m);
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
