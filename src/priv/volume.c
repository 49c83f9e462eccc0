/* SPDX-License-Identifier: Apache-2.0 */
/* warren-priv, phase 3: the volumes' host mounts (VOLUME_MOUNT,
 * VOLUME_UNMOUNT; docs/privsep.md). A volume's image is attached to a loop
 * device and mounted with the new mount API onto <state>/volumes/<env>/
 * <name>/mnt, every step by fd from a dir opened beneath the state dir
 * with no symlink on the way; warrend gets an O_PATH fd of the mount's
 * root and never holds a loop device or calls mount(2). The mount stays in
 * the host's mount namespace (which warrend and warren-priv share), where
 * a SANDBOX_CREATE's bind source names it (the runtime clones it with
 * open_tree). Also the dispatcher of phase 3's volume and spawn requests
 * (types 19..22; spawn.c does 21 and 22). */
#include "priv/priv-internal.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/mount.h>
#include <linux/openat2.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <sched.h>
#include <limits.h>
#include <unistd.h>

#include "basic/ext4img.h"
#include "basic/log.h"
#include "basic/rmrf.h"

static int vfail(struct priv_result *res, int r, const char *fmt, ...)
        __attribute__((format(printf, 3, 4)));
static int vfail(struct priv_result *res, int r, const char *fmt, ...) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(res->msg, sizeof(res->msg), fmt, ap);
        va_end(ap);
        res->err = r < 0 ? -r : r;
        return r < 0 ? r : -r;
}

/* The mount id of fd (statx STATX_MNT_ID); 0 when unknown. */
static uint64_t mnt_id(int fd) {
        struct statx sx;
        if (statx(fd, "", AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW, STATX_MNT_ID, &sx) < 0 ||
            !(sx.stx_mask & STATX_MNT_ID))
                return 0;
        return sx.stx_mnt_id;
}

/* Detach every mount stacked on dfd/mnt (lazily), each named by an fd of
 * its root (umount2 of the fd's /proc/self/fd link: no path is walked
 * that could lead elsewhere). How many were detached, or -errno. */
static int unmount_at(int dfd) {
        uint64_t parent = mnt_id(dfd);
        int n = 0;
        for (int i = 0; i < 16; i++) {
                int fd = openat(dfd, "mnt", O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                if (fd < 0)
                        return errno == ENOENT ? n : -errno;
                uint64_t id = mnt_id(fd);
                if (!id || id == parent) {
                        close(fd);
                        return n;
                }
                char p[64];
                snprintf(p, sizeof(p), "/proc/self/fd/%d", fd);
                int r = umount2(p, MNT_DETACH);
                int err = errno;
                close(fd);
                if (r < 0)
                        return -err;
                n++;
        }
        return n;
}

/* phase 5: a dropped warrend lives in a mount namespace of its own (a
 * slave of the host's: it receives new mounts only when the host's / is
 * shared, which not every host's is). The volume mount is mirrored there
 * at the same path, so that warrend's view of <vol>/mnt/data (a sandbox's
 * bind source, which warrend opens by path) is the volume and not the
 * empty dir beneath. vdir: the volume dir (its host path names it in
 * warrend's namespace too: the state dir is bound onto itself there);
 * tree: a detached clone of the new mount, or -EBADF to detach only. A
 * forked child joins warrend's namespace (warrend is warren-priv's
 * parent), opens the dir there with no symlink on the way, detaches what
 * is stacked on its mnt and moves tree onto it. Best effort: 0 when
 * warrend shares our namespace (no --user) or it was done, else -errno. */
static int mirror(int vdir, int tree) {
        char link[64], path[PATH_MAX], ns[64];
        snprintf(link, sizeof(link), "/proc/self/fd/%d", vdir);
        ssize_t n = readlink(link, path, sizeof(path) - 1);
        if (n <= 0 || path[0] != '/')
                return -EINVAL;
        path[n] = 0;
        snprintf(ns, sizeof(ns), "/proc/%d/ns/mnt", (int) getppid());
        struct stat a, b;
        if (stat("/proc/self/ns/mnt", &a) < 0 || stat(ns, &b) < 0)
                return -errno;
        if (a.st_ino == b.st_ino && a.st_dev == b.st_dev)
                return 0;
        int nsfd = open(ns, O_RDONLY | O_CLOEXEC);
        if (nsfd < 0)
                return -errno;
        pid_t pid = fork();
        if (pid == 0) {
                struct open_how how = {.flags = O_RDONLY | O_DIRECTORY | O_CLOEXEC,
                                       .resolve = RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS};
                if (setns(nsfd, CLONE_NEWNS) < 0)
                        _exit(10);
                int d = (int) syscall(SYS_openat2, AT_FDCWD, path, &how, sizeof(how));
                if (d < 0 || unmount_at(d) < 0)
                        _exit(11);
                if (tree < 0)
                        _exit(0);
                int mnt = openat(d, "mnt", O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                if (mnt < 0 || syscall(SYS_move_mount, tree, "", mnt, "",
                                       MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH) < 0)
                        _exit(12);
                _exit(0);
        }
        close(nsfd);
        if (pid < 0)
                return -errno;
        int st = 0;
        while (waitpid(pid, &st, __WALL) < 0)
                if (errno != EINTR)
                        return -errno;
        return WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : -EIO;
}

static int do_mount(const struct priv_volume *v, struct priv_result *res, int *out_fd) {
        bool ro = v->flags & PRIV_VOLUME_RDONLY;
        int dfd = priv_open_beneath(v->path, O_RDONLY);
        if (dfd < 0)
                return vfail(res, dfd, "mount volume %s: %s", v->path, strerror(-dfd));
        int img = -EBADF, loop = -EBADF, fs = -EBADF, mfd = -EBADF, r;
        img = openat(dfd, "disk.img", (ro ? O_RDONLY : O_RDWR) | O_NOFOLLOW | O_CLOEXEC);
        struct stat st;
        if (img < 0 || fstat(img, &st) < 0) {
                r = vfail(res, -errno, "mount volume %s: open its disk.img: %m", v->path);
                goto out;
        }
        if (!S_ISREG(st.st_mode)) {
                r = vfail(res, -EACCES, "mount volume %s: disk.img is not a regular file", v->path);
                goto out;
        }
        char dev[32];
        struct wr_err e = {0};
        if ((loop = ext4img_loop_find(&st, dev)) < 0 &&
            (loop = ext4img_loop_attach(img, v->path, dev, &e)) < 0) {
                r = vfail(res, loop, "mount volume %s: %s", v->path, e.msg);
                goto out;
        }
        if ((r = unmount_at(dfd)) < 0) {
                r = vfail(res, r, "mount volume %s: detach its old mount: %s", v->path,
                          strerror(-r));
                goto out;
        }
        if (mkdirat(dfd, "mnt", 0700) < 0 && errno != EEXIST) {
                r = vfail(res, -errno, "mount volume %s: mkdir mnt: %m", v->path);
                goto out;
        }
        int mnt = openat(dfd, "mnt", O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (mnt < 0) {
                r = vfail(res, -errno, "mount volume %s: open mnt: %m", v->path);
                goto out;
        }
        const char *step = "fsopen ext4";
        r = -1;
        if ((fs = (int) syscall(SYS_fsopen, "ext4", FSOPEN_CLOEXEC)) >= 0) {
                step = "fsconfig";
                if (syscall(SYS_fsconfig, fs, FSCONFIG_SET_STRING, "source", dev, 0) == 0 &&
                    (!ro || syscall(SYS_fsconfig, fs, FSCONFIG_SET_FLAG, "ro", NULL, 0) == 0) &&
                    syscall(SYS_fsconfig, fs, FSCONFIG_CMD_CREATE, NULL, NULL, 0) == 0) {
                        step = "fsmount";
                        mfd = (int) syscall(SYS_fsmount, fs, FSMOUNT_CLOEXEC,
                                            MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV |
                                                    MOUNT_ATTR_NOATIME |
                                                    (ro ? MOUNT_ATTR_RDONLY : 0));
                        if (mfd >= 0) {
                                step = "move_mount";
                                r = (int) syscall(SYS_move_mount, mfd, "", mnt, "",
                                                  MOVE_MOUNT_F_EMPTY_PATH |
                                                          MOVE_MOUNT_T_EMPTY_PATH);
                        }
                }
        }
        int err = errno;
        close(mnt);
        if (r < 0) {
                r = vfail(res, -err, "mount volume %s (%s): %s: %s", v->path, dev, step,
                          strerror(err));
                goto out;
        }
        /* the volume's dirs; .staging emptied (a PutFile cut short) */
        if (!ro) {
                if ((mkdirat(mfd, "data", 0755) < 0 && errno != EEXIST) ||
                    (rm_rf_at(mfd, ".staging") < 0) || mkdirat(mfd, ".staging", 0700) < 0) {
                        r = vfail(res, -errno, "mount volume %s: make its dirs: %m", v->path);
                        (void) unmount_at(dfd);
                        goto out;
                }
        }
        /* a dropped warrend's own mount namespace gets a clone (phase 5) */
        int tree = (int) syscall(SYS_open_tree, mfd, "", OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC |
                                                                 AT_EMPTY_PATH);
        if (tree < 0 || (r = mirror(dfd, tree)) < 0)
                log_warn("warren-priv: mount volume %s in warrend's mount namespace: %s", v->path,
                         strerror(tree < 0 ? errno : -r));
        if (tree >= 0)
                close(tree);
        *out_fd = mfd;
        mfd = -EBADF;
        r = 1;
out:
        if (mfd >= 0)
                close(mfd);
        if (fs >= 0)
                close(fs);
        if (loop >= 0)
                close(loop);
        if (img >= 0)
                close(img);
        close(dfd);
        return r;
}

static int do_unmount(const struct priv_volume *v, struct priv_result *res) {
        int dfd = priv_open_beneath(v->path, O_RDONLY);
        if (dfd == -ENOENT)
                return 0; /* nothing there */
        if (dfd < 0)
                return vfail(res, dfd, "unmount volume %s: %s", v->path, strerror(-dfd));
        int n = unmount_at(dfd);
        int m = mirror(dfd, -EBADF); /* phase 5: warrend's own clone */
        if (m < 0)
                log_debug("warren-priv: unmount volume %s in warrend's mount namespace: %s",
                          v->path, strerror(-m));
        /* phase 5: the empty mount point goes too (made again by the next
         * VOLUME_MOUNT). A dropped warrend's namespace may hold a copy of
         * a mount it inherited at its start, hidden beneath its bind of the
         * state dir where no unmount reaches it; removing the dentry here
         * detaches every mount on it in every namespace (and frees the
         * loop device), so that warrend can remove the volume dir. Still
         * mounted here (EBUSY) or already gone: left as it is. */
        if (n >= 0)
                (void) unlinkat(dfd, "mnt", AT_REMOVEDIR);
        close(dfd);
        if (n < 0)
                return vfail(res, n, "unmount volume %s: %s", v->path, strerror(-n));
        res->value = n > 0;
        return 0;
}

bool priv_volssh_type(uint32_t type) {
        return type >= PRIV_VOLUME_MOUNT && type <= PRIV_SSH_DIR_PREPARE;
}

void priv_volssh_run(const struct priv_req *req, int *fds, size_t n_fds, struct priv_result *res,
                     struct priv_volssh_out *o) {
        switch (req->hdr.type) {
        case PRIV_VOLUME_MOUNT:
                (void) do_mount(&req->volume, res, &o->fd);
                break;
        case PRIV_VOLUME_UNMOUNT:
                (void) do_unmount(&req->volume, res);
                break;
        case PRIV_SANDBOX_SPAWN_BESIDE:
                priv_spawn_beside_run(&req->spawn, fds, n_fds, res, o);
                break;
        case PRIV_SSH_DIR_PREPARE:
                priv_ssh_dir_run(&req->ssh_dir, res);
                break;
        }
        priv_close_fds(fds, n_fds);
}
