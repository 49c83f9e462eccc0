/* SPDX-License-Identifier: Apache-2.0 */
/* sbx_fs_open (files.h): the one part of the file API that touches the
 * live sandboxes: how to reach a running sandbox's init, its user and
 * working dir, taken on the loop; sbx_fs_root: its root fd, opened by
 * warren-init (FILE_OPEN) on the worker thread. The operations themselves
 * (files.c) work on that fd alone, so they are unit tested and fuzzed on a
 * plain directory. */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <sys/stat.h>

#include "basic/macro.h"
#include "runtime/ctl.h"
#include "sandbox/files.h"
#include "sandbox/sandbox-internal.h"

/* ---- the sandbox (loop thread) ---- */

int sbx_root_fd(struct sbx *sb) {
        pid_t pid = sb->rt ? rt_sandbox_pid(sb->rt) : 0;
        if (pid <= 0 || sb->pidfd < 0)
                return -ESRCH;
        char path[64];
        snprintf(path, sizeof(path), "/proc/%d/root", (int) pid);
        _cleanup_close_ int fd = open(path, O_PATH | O_DIRECTORY | O_CLOEXEC);
        if (fd < 0)
                return -errno;
        if (syscall(SYS_pidfd_send_signal, sb->pidfd, 0, NULL, 0) < 0)
                return -ESRCH;
        return TAKE_FD(fd);
}

#define streq(a, b) (strcmp((a), (b)) == 0)

#define NOT_RUNNING(e, r, id)                                                                      \
        err_setx(e, r, WR_STATUS_FAILED_PRECONDITION, WR_FAULT_CLIENT,                             \
                 "sandbox %s is not running (create a new one)", id)

/* How long a worker waits for init's FILE_OPENED: init answers at once
 * unless the sandbox took it over (then the call fails, nothing hangs). */
#define FILE_OPEN_TIMEOUT_MS 5000

/* EPERM: alive, but a dropped warrend (--user) may not signal it. */
static bool init_alive(int pidfd) {
        return syscall(SYS_pidfd_send_signal, pidfd, 0, NULL, 0) == 0 || errno == EPERM;
}

/* Files connections kept for the next call of the same sandbox (keyed by
 * id and init's pid, so never another sandbox's): a connection costs a
 * round trip to warren-priv under --privsep (~1 ms, on the loop), a
 * FILE_OPEN ~25 us. Only a connection whose last FILE_OPEN was answered
 * goes back (nothing in flight on it); at most POOL_PER_SANDBOX per sandbox
 * (each is one of init's 16 connection slots) and POOL_MAX in all, the
 * oldest closed first. A sandbox that ended leaves its entries until they
 * are pushed out or fail on use (an fd, nothing else). */
#define POOL_MAX 64
#define POOL_PER_SANDBOX 2

static struct pooled {
        bool used;
        char id[32];
        int init_pid;
        int fd;
        uint64_t age;
} pool[POOL_MAX];
static uint64_t pool_clock;
static pthread_mutex_t pool_lock = PTHREAD_MUTEX_INITIALIZER;
static atomic_uint_fast64_t file_req_id = 1;

/* Connections held by calls in progress, per sandbox: each is one of its
 * init's 16 slots (init/init.c MAX_CONNS), which its exec sessions and a
 * restarted warrend need too; a call past HELD_PER_SANDBOX is refused
 * (RESOURCE_EXHAUSTED) instead of taking them all. Under pool_lock. */
#define HELD_PER_SANDBOX 8
#define HELD_MAX 256

static struct held {
        unsigned n; /* 0: free */
        char id[32];
        int init_pid;
} held[HELD_MAX];

static bool held_take(const char *id, int init_pid) {
        bool ok = true;
        pthread_mutex_lock(&pool_lock);
        struct held *h = NULL, *free_slot = NULL;
        for (size_t i = 0; i < HELD_MAX; i++) {
                if (held[i].n && held[i].init_pid == init_pid && streq(held[i].id, id))
                        h = &held[i];
                else if (!held[i].n && !free_slot)
                        free_slot = &held[i];
        }
        if (h && h->n >= HELD_PER_SANDBOX) {
                ok = false;
        } else if (h) {
                h->n++;
        } else if (free_slot) { /* a full table counts nothing: never refuses */
                *free_slot = (struct held){.n = 1, .init_pid = init_pid};
                snprintf(free_slot->id, sizeof(free_slot->id), "%s", id);
        }
        pthread_mutex_unlock(&pool_lock);
        return ok;
}

static void held_drop(const char *id, int init_pid) {
        pthread_mutex_lock(&pool_lock);
        for (size_t i = 0; i < HELD_MAX; i++)
                if (held[i].n && held[i].init_pid == init_pid && streq(held[i].id, id)) {
                        held[i].n--;
                        break;
                }
        pthread_mutex_unlock(&pool_lock);
}

static int pool_take(const char *id, int init_pid) {
        int fd = -EBADF;
        pthread_mutex_lock(&pool_lock);
        for (size_t i = 0; i < POOL_MAX; i++)
                if (pool[i].used && pool[i].init_pid == init_pid && streq(pool[i].id, id)) {
                        fd = pool[i].fd;
                        pool[i] = (struct pooled){.used = false};
                        break;
                }
        pthread_mutex_unlock(&pool_lock);
        return fd;
}

static void pool_put(const char *id, int init_pid, int fd) {
        if (fd < 0)
                return;
        int drop = -EBADF;
        pthread_mutex_lock(&pool_lock);
        size_t n = 0, slot = POOL_MAX, oldest = 0;
        for (size_t i = 0; i < POOL_MAX; i++) {
                if (!pool[i].used) {
                        if (slot == POOL_MAX)
                                slot = i;
                        continue;
                }
                if (pool[i].init_pid == init_pid && streq(pool[i].id, id))
                        n++;
                if (!pool[oldest].used || pool[i].age < pool[oldest].age)
                        oldest = i;
        }
        if (n >= POOL_PER_SANDBOX) {
                drop = fd;
        } else {
                if (slot == POOL_MAX) {
                        slot = oldest;
                        drop = pool[slot].fd;
                }
                pool[slot] = (struct pooled){
                        .used = true, .init_pid = init_pid, .fd = fd, .age = ++pool_clock};
                snprintf(pool[slot].id, sizeof(pool[slot].id), "%s", id);
        }
        pthread_mutex_unlock(&pool_lock);
        safe_close(drop);
}

/* sbx_fs.ctl_put: the call is done with its connection: kept for the
 * next call (fd >= 0) or not, and its hold dropped. */
static void ctl_put(const char *id, int init_pid, int fd) {
        pool_put(id, init_pid, fd);
        held_drop(id, init_pid);
}

int sbx_fs_root(struct sbx_fs *fs, struct wr_err *e) {
        if (fs->root_fd >= 0)
                return 0;
        int r = fs->paused ? -EOPNOTSUPP : 0;
        _cleanup_close_ int fd = -EBADF;
        if (r == 0 && fs->ctl_fd < 0 && (fs->ctl_fd = pool_take(fs->id, fs->init_pid)) >= 0)
                fs->ctl_pooled = true;
        /* a kept connection may have been closed by init meanwhile */
        bool pooled = fs->ctl_pooled;
        for (int attempt = 0; r == 0 && attempt < 2; attempt++) {
                if (fs->ctl_fd < 0) {
                        struct wr_err ce = {0};
                        r = fs->ctl_path ? rt_ctl_connect(fs->ctl_path, &fs->ctl_fd, &ce) : -ESRCH;
                        err_clear(&ce);
                        if (r < 0)
                                return NOT_RUNNING(e, r, fs->id);
                        pooled = false;
                }
                r = rt_ctl_file_open(fs->ctl_fd, atomic_fetch_add(&file_req_id, 1), "/",
                                     CTL_FOPEN_PATH | CTL_FOPEN_DIRECTORY, 0, 0, 0,
                                     FILE_OPEN_TIMEOUT_MS, &fd);
                if (r == 0) {
                        /* answered: the operations of this call go through
                         * it, then it goes back to the pool (sbx_fs_clear) */
                        fs->files_fd = TAKE_FD(fs->ctl_fd);
                        break;
                }
                fs->ctl_fd = safe_close(fs->ctl_fd);
                /* a kept connection init closed meanwhile: once more on a
                 * new one (without --privsep; with it, the call fails) */
                if (!pooled || !fs->ctl_path || (r != -ECONNRESET && r != -EPIPE && r != -ENOTCONN))
                        break;
                r = 0;
        }
        fs->ctl_fd = safe_close(fs->ctl_fd);
        if (r == -EOPNOTSUPP && fs->init_pid > 0) {
                /* a paused sandbox (init is frozen) or an init started
                 * before FILE_OPEN (a sandbox older than this warrend): its
                 * root as the host sees it, and the operations done by
                 * warrend itself (needs host root: a dropped warrend
                 * cannot open it) */
                char path[64];
                snprintf(path, sizeof(path), "/proc/%d/root", fs->init_pid);
                fd = open(path, O_PATH | O_DIRECTORY | O_CLOEXEC);
                r = fd < 0 ? -errno : 0;
                if ((r == -EACCES || r == -EPERM) && fs->paused && init_alive(fs->pidfd))
                        return err_setx(e, r, WR_STATUS_FAILED_PRECONDITION, WR_FAULT_CLIENT,
                                        "sandbox %s is paused: its warren-init is frozen and "
                                        "cannot open its files, and this warrend runs without "
                                        "privileges (--user); resume it first (ResumeSandbox, "
                                        "sandbox.resume(), `warren sandbox resume %s`)",
                                        fs->id, fs->id);
        }
        if (r == -ETIMEDOUT)
                return err_setx(e, r, WR_STATUS_UNAVAILABLE, WR_FAULT_WORKLOAD,
                                "warren-init of sandbox %s did not answer within %d s; try "
                                "again, or restart the sandbox",
                                fs->id, FILE_OPEN_TIMEOUT_MS / 1000);
        if (r < 0 || !init_alive(fs->pidfd))
                return NOT_RUNNING(e, r < 0 ? r : -ESRCH, fs->id);
        struct stat st;
        if (fstat(fd, &st) < 0 || !S_ISDIR(st.st_mode))
                return err_setx(e, -ENOTDIR, WR_STATUS_UNAVAILABLE, WR_FAULT_WORKLOAD,
                                "warren-init of sandbox %s passed a root that is not a "
                                "directory",
                                fs->id);
        fs->root_fd = TAKE_FD(fd);
        return 0;
}

int sbx_fs_open(struct sbx_manager *m, const char *key, struct sbx_fs *ret, struct wr_err *e) {
        *ret = (struct sbx_fs){
                .root_fd = -EBADF, .pidfd = -EBADF, .ctl_fd = -EBADF, .files_fd = -EBADF};
        struct sbx *sb;
        int r = sbx_running(m, key, &sb, e);
        if (r < 0)
                return r;
        pid_t pid = sb->rt ? rt_sandbox_pid(sb->rt) : 0;
        if (pid <= 0 || sb->pidfd < 0 || !init_alive(sb->pidfd))
                return NOT_RUNNING(e, -ESRCH, sb->id);
        snprintf(ret->id, sizeof(ret->id), "%s", sb->id);
        ret->init_pid = (int) pid;
        ret->paused = sb->paused;
        if (!sb->paused) {
                if (!held_take(ret->id, ret->init_pid))
                        return err_setx(e, -EBUSY, WR_STATUS_RESOURCE_EXHAUSTED,
                                        WR_FAULT_CLIENT,
                                        "sandbox %s has %d file calls in progress (each holds "
                                        "one of its init's connections); wait for one to end "
                                        "and retry",
                                        sb->id, HELD_PER_SANDBOX);
                ret->ctl_put = ctl_put; /* sbx_fs_clear drops the hold */
        }
        if (sb->paused) {
                /* its init is frozen: sbx_fs_root takes /proc/<init>/root */
        } else if ((ret->ctl_fd = pool_take(ret->id, ret->init_pid)) >= 0) {
                ret->ctl_pooled = true; /* a files connection of an earlier call */
        } else if (m->priv) {
                /* --privsep: the connection comes from warren-priv */
                struct wr_err ce = {0};
                r = sbx_rt_ctl_connect(m, sb->rt, &ret->ctl_fd, &ce);
                err_clear(&ce);
                if (r < 0) {
                        sbx_fs_clear(ret);
                        return NOT_RUNNING(e, r, sb->id);
                }
        } else if (!(ret->ctl_path = strdup(rt_sandbox_ctl_path(sb->rt)))) {
                sbx_fs_clear(ret);
                return err_set(e, -ENOMEM, "out of memory");
        }
        ret->workdir = strdup(sb->workdir && *sb->workdir ? sb->workdir : "/");
        if (!ret->workdir) {
                sbx_fs_clear(ret);
                return err_set(e, -ENOMEM, "out of memory");
        }
        ret->pidfd = fcntl(sb->pidfd, F_DUPFD_CLOEXEC, 3);
        if (ret->pidfd < 0) {
                r = -errno;
                sbx_fs_clear(ret);
                return err_set(e, r, "dup init's pidfd: %s", strerror(-r));
        }
        ret->uid = sb->uid;
        ret->gid = sb->gid;
        if (sb->uid_slot >= 0) {
                ret->id_base = sbx_uids_base(sb->uid_slot);
                ret->id_count = SBX_UIDS_COUNT;
        }
        return 0;
}
