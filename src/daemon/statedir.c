/* SPDX-License-Identifier: Apache-2.0 */
/* The state directory: creation, checks, layout and lock. */
#include "daemon/statedir.h"

#include <errno.h>
#include <time.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

static const struct {
        const char *name;
        mode_t mode;
} layout[] = {
        {"layers", 0700},    {"images", 0700}, {"volumes", 0700},
        {"sandboxes", 0711}, {"ca", 0700},     {"keys", 0700},
};

/* mkdir -p: parents 0755, the last component mode. */
static int mkdir_p(const char *path, mode_t mode) {
        _cleanup_free_ char *p = strdup(path);
        if (!p)
                return -ENOMEM;
        for (char *s = p + 1; *s; s++) {
                if (*s != '/')
                        continue;
                *s = 0;
                if (mkdir(p, 0755) < 0 && errno != EEXIST)
                        return -errno;
                *s = '/';
        }
        if (mkdir(p, mode) < 0) {
                if (errno != EEXIST)
                        return -errno;
                return 0;
        }
        /* Our mode, whatever the umask. */
        if (chmod(p, mode) < 0)
                return -errno;
        return 0;
}

int daemon_socket_dir_prepare(const char *socket_path, struct wr_err *e) {
        _cleanup_free_ char *dir = strdup(socket_path);
        if (!dir)
                return err_set(e, -ENOMEM, "out of memory");
        char *slash = strrchr(dir, '/');
        if (!slash || slash == dir)
                return 0;
        *slash = 0;
        int r = mkdir_p(dir, 0755);
        if (r < 0)
                return err_set(e, r, "cannot create socket directory %s: %s", dir, strerror(-r));
        struct stat st;
        if (stat(dir, &st) < 0 || !S_ISDIR(st.st_mode))
                return err_set(e, -ENOTDIR, "socket directory %s is not a directory", dir);
        return 0;
}

int daemon_state_dir_prepare(const char *path, char **ret_abs, int *ret_lock_fd, struct wr_err *e) {
        int r = mkdir_p(path, 0711);
        if (r < 0 && r != -EEXIST)
                return err_set(e, r, "state dir %s cannot be created: %s", path, strerror(-r));
        struct stat st;
        if (stat(path, &st) < 0)
                return err_set(e, -errno, "state dir %s: %m", path);
        if (!S_ISDIR(st.st_mode))
                return err_set(e, -ENOTDIR, "state dir %s is not a directory", path);

        _cleanup_free_ char *abs = realpath(path, NULL);
        if (!abs)
                return err_set(e, -errno, "state dir %s: %m", path);
        _cleanup_close_ int dfd = open(abs, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (dfd < 0)
                return err_set(e, -errno, "state dir %s cannot be opened: %m", abs);

        /* Writable? Create and remove a probe file. */
        char probe[64];
        snprintf(probe, sizeof(probe), ".warrend-probe.%d", (int) getpid());
        int pfd = openat(dfd, probe, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
        if (pfd < 0)
                return err_set(e, -errno, "state dir %s is not writable: %m", abs);
        pfd = safe_close(pfd);
        unlinkat(dfd, probe, 0);

        _cleanup_close_ int lock =
                openat(dfd, "warrend.lock", O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
        if (lock < 0)
                return err_set(e, -errno, "state dir %s: cannot open warrend.lock: %m", abs);
        /* A POSIX record lock, not flock: it belongs to this process only,
         * so the children warrend clones (a warm-pool entry parks before
         * it execs, holding copies of every fd) never keep it after a
         * kill -9 (with flock they did, and the next warrend gave up after
         * 5 s). It ends with the process; warrend opens this file once. A
         * holder going away: wait up to 5 s before calling the dir busy. */
        struct flock fl = {.l_type = F_WRLCK, .l_whence = SEEK_SET};
        int locked = -1;
        for (int i = 0; i < 250 && (locked = fcntl(lock, F_SETLK, &fl)) < 0 &&
                        (errno == EAGAIN || errno == EACCES);
             i++) {
                struct timespec ts = {0, 20 * 1000 * 1000};
                nanosleep(&ts, NULL);
        }
        if (locked < 0) {
                if (errno == EAGAIN || errno == EACCES)
                        return err_set(e, -EBUSY,
                                       "state dir %s is in use by another warrend (stop it or "
                                       "pick another --state-dir)",
                                       abs);
                return err_set(e, -errno, "state dir %s: lock: %m", abs);
        }

        for (size_t i = 0; i < ELEMENTSOF(layout); i++) {
                if (mkdirat(dfd, layout[i].name, layout[i].mode) == 0) {
                        if (fchmodat(dfd, layout[i].name, layout[i].mode, 0) < 0)
                                return err_set(e, -errno, "chmod %s/%s: %m", abs, layout[i].name);
                } else if (errno != EEXIST)
                        return err_set(e, -errno, "create %s/%s: %m", abs, layout[i].name);
                if (fstatat(dfd, layout[i].name, &st, AT_SYMLINK_NOFOLLOW) < 0)
                        return err_set(e, -errno, "%s/%s: %m", abs, layout[i].name);
                if (!S_ISDIR(st.st_mode))
                        return err_set(e, -ENOTDIR,
                                       "%s/%s is not a directory; move it away and restart", abs,
                                       layout[i].name);
        }
        *ret_abs = TAKE_PTR(abs);
        *ret_lock_fd = TAKE_FD(lock);
        return 0;
}
