/* SPDX-License-Identifier: Apache-2.0 */
/* warren-fetch's chroot (fetch-root.h). */
#include "image/fetch-root.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "basic/macro.h"

/* The bytes of the host's file (or text), at most size; -1 when unreadable. */
static ssize_t want_bytes(const char *host_path, const char *text, char *buf, size_t size) {
        if (text) {
                size_t n = strlen(text);
                memcpy(buf, text, n < size ? n : size);
                return (ssize_t) (n < size ? n : size);
        }
        _cleanup_close_ int in = open(host_path, O_RDONLY | O_CLOEXEC);
        size_t n = 0;
        while (in >= 0 && n < size) {
                ssize_t k = RETRY_EINTR(read(in, buf + n, size - n));
                if (k <= 0)
                        break;
                n += (size_t) k;
        }
        return in < 0 ? -1 : (ssize_t) n;
}

/* root/etc/name already holds exactly what it should (helpers start all
 * the time and share the root: rewrite only what changed). */
static bool up_to_date(int etc_fd, const char *name, const char *host_path, const char *text) {
        static char want[65536], have[65536];
        ssize_t w = want_bytes(host_path, text, want, sizeof(want));
        _cleanup_close_ int fd = openat(etc_fd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
        if (w < 0 || fd < 0 || (size_t) w == sizeof(want))
                return false;
        size_t n = 0;
        while (n < sizeof(have)) {
                ssize_t k = RETRY_EINTR(read(fd, have + n, sizeof(have) - n));
                if (k <= 0)
                        break;
                n += (size_t) k;
        }
        return n == (size_t) w && memcmp(want, have, n) == 0;
}

/* Write root/etc/name from the host's file (or from text) atomically,
 * unless it is up to date. */
static int put_file(int etc_fd, const char *name, const char *host_path, const char *text) {
        if (up_to_date(etc_fd, name, host_path, text))
                return 0;
        char tmp[64];
        snprintf(tmp, sizeof(tmp), ".%s.%d", name, (int) getpid());
        _cleanup_close_ int out =
                openat(etc_fd, tmp, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0644);
        if (out < 0)
                return -errno;
        int r = 0;
        if (text) {
                if (write(out, text, strlen(text)) != (ssize_t) strlen(text))
                        r = -EIO;
        } else {
                _cleanup_close_ int in = open(host_path, O_RDONLY | O_CLOEXEC);
                char buf[16384];
                ssize_t n = 0;
                while (in >= 0 && (n = RETRY_EINTR(read(in, buf, sizeof(buf)))) > 0)
                        if (write(out, buf, (size_t) n) != n) {
                                r = -EIO;
                                break;
                        }
                if (in >= 0 && n < 0)
                        r = -errno; /* not a truncated copy in place of the host's file */
        }
        if (r >= 0 && (fchmod(out, 0644) < 0 || renameat(etc_fd, tmp, etc_fd, name) < 0))
                r = -errno;
        if (r < 0)
                (void) unlinkat(etc_fd, tmp, 0);
        return r;
}

/* The chroot: root-owned, not writable by others, holding etc/ with what
 * name resolution reads; nothing else. */
int img_fetch_root_prepare(const char *root, struct wr_err *e) {
        if (root[0] != '/')
                return err_set(e, -EINVAL, "--root %s: must be an absolute path", root);
        char path[PATH_MAX];
        snprintf(path, sizeof(path), "%s", root);
        for (char *p = path + 1; *p; p++)
                if (*p == '/') {
                        *p = '\0';
                        (void) mkdir(path, 0755);
                        *p = '/';
                }
        (void) mkdir(root, 0755);
        _cleanup_close_ int root_fd = open(root, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        struct stat st;
        if (root_fd < 0 || fstat(root_fd, &st) < 0)
                return err_set(e, -errno, "--root %s: %m", root);
        if (st.st_uid != 0 || (st.st_mode & 0022))
                return err_set(e, -EPERM,
                               "--root %s: must be owned by root, not writable by others", root);
        (void) mkdirat(root_fd, "etc", 0755);
        _cleanup_close_ int etc_fd =
                openat(root_fd, "etc", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (etc_fd < 0 || fstat(etc_fd, &st) < 0 || st.st_uid != 0 || (st.st_mode & 0022))
                return err_set(e, -EPERM, "--root %s/etc: must be a root-owned directory", root);
        /* temp files a killed writer left behind (the only writer is this
         * warrend's loop thread, so none is in progress) */
        DIR *d = fdopendir(fcntl(etc_fd, F_DUPFD_CLOEXEC, 3));
        if (d) {
                struct dirent *de;
                while ((de = readdir(d)))
                        if (de->d_name[0] == '.' && strcmp(de->d_name, ".") &&
                            strcmp(de->d_name, ".."))
                                (void) unlinkat(etc_fd, de->d_name, 0);
                closedir(d);
        }
        int r = put_file(etc_fd, "hosts", "/etc/hosts", NULL);
        if (r >= 0)
                r = put_file(etc_fd, "resolv.conf", "/etc/resolv.conf", NULL);
        if (r >= 0)
                r = put_file(etc_fd, "nsswitch.conf", NULL, "hosts: files dns\n");
        if (r < 0)
                return err_set(e, r, "--root %s/etc: %s", root, strerror(-r));
        return 0;
}

static int check_dir(int at, const char *name, const char *shown, struct wr_err *e) {
        _cleanup_close_ int fd = openat(at, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        struct stat st;
        if (fd < 0 || fstat(fd, &st) < 0)
                return err_set(e, -errno, "--root %s: %m", shown);
        if (st.st_uid != 0 || (st.st_mode & 0022))
                return err_set(e, -EPERM,
                               "--root %s: must be owned by root, not writable by others", shown);
        return TAKE_FD(fd);
}

int img_fetch_root_check(const char *root, struct wr_err *e) {
        if (root[0] != '/')
                return err_set(e, -EINVAL, "--root %s: must be an absolute path", root);
        int fd = check_dir(AT_FDCWD, root, root, e);
        if (fd < 0)
                return fd;
        char shown[PATH_MAX];
        snprintf(shown, sizeof(shown), "%s/etc", root);
        int efd = check_dir(fd, "etc", shown, e);
        close(fd);
        if (efd < 0)
                return efd;
        close(efd);
        return 0;
}
