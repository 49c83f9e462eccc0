/* SPDX-License-Identifier: Apache-2.0 */
/* Per-sandbox cgroups: v1 (legacy and hybrid layouts) and v2. */

#include "runtime/cgroup.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <time.h>
#include <unistd.h>

#include "runtime/runtime-internal.h"

#ifndef CGROUP_SUPER_MAGIC
#define CGROUP_SUPER_MAGIC 0x27e0eb
#endif
#ifndef CGROUP2_SUPER_MAGIC
#define CGROUP2_SUPER_MAGIC 0x63677270
#endif

#define CG_BASE "/sys/fs/cgroup"
#define CG_UNIFIED "/sys/fs/cgroup/unified"
#define CPU_PERIOD_US 100000ULL

struct hier {
        char path[PATH_MAX]; /* the sandbox's cgroup dir */
        int dirfd;
        int procs_fd; /* v1: cgroup.procs opened for writing */
        dev_t dev;
};

struct rt_cgroup {
        enum rt_cgroup_mode mode;
        size_t n;
        struct hier h[RT_CGROUP_V1_MAX];
        /* index into h for each v1 controller, -1 when absent; on v2 all 0 */
        int memory, cpu, cpuacct, pids, freezer;
};

enum { C_MEMORY, C_CPU, C_CPUACCT, C_PIDS, C_FREEZER };
static const struct {
        const char *name;
        bool required;
} v1_ctrl[] = {
        [C_MEMORY] = {"memory", true},    [C_CPU] = {"cpu", true},
        [C_CPUACCT] = {"cpuacct", false}, [C_PIDS] = {"pids", true},
        [C_FREEZER] = {"freezer", true},
};

static bool fs_is(const char *path, long magic) {
        struct statfs sfs;
        return statfs(path, &sfs) == 0 && (long) sfs.f_type == magic;
}

int rt_cgroup_detect(enum rt_cgroup_mode mode, char *root, size_t root_size, struct wr_err *e) {
        const char *r = NULL;
        enum rt_cgroup_mode m = mode;

        if (fs_is(CG_BASE, CGROUP2_SUPER_MAGIC)) {
                if (mode == RT_CGROUP_V1)
                        return err_set(e, -ENOENT,
                                       "cgroup v1 requested but " CG_BASE " is a pure v2 host");
                r = CG_BASE;
                m = RT_CGROUP_V2;
        } else if (mode == RT_CGROUP_V2) {
                if (!fs_is(CG_UNIFIED, CGROUP2_SUPER_MAGIC))
                        return err_set(e, -ENOENT,
                                       "cgroup v2 requested but no cgroup2 "
                                       "hierarchy at " CG_BASE " or " CG_UNIFIED);
                r = CG_UNIFIED;
        } else {
                if (!fs_is(CG_BASE "/memory", CGROUP_SUPER_MAGIC) &&
                    !fs_is(CG_BASE "/pids", CGROUP_SUPER_MAGIC))
                        return err_set(e, -ENOENT,
                                       "no cgroup hierarchy found: " CG_BASE
                                       " is neither cgroup2 nor holds v1 controllers");
                r = CG_BASE;
                m = RT_CGROUP_V1;
        }
        if (root && root_size > 0)
                snprintf(root, root_size, "%s", r);
        return m;
}

static int write_at(int dirfd, const char *file, const char *s) {
        _cleanup_close_ int fd = openat(dirfd, file, O_WRONLY | O_CLOEXEC | O_NOFOLLOW);
        if (fd < 0)
                return -errno;
        size_t n = strlen(s);
        ssize_t w = RETRY_EINTR(write(fd, s, n));
        if (w < 0)
                return -errno;
        return (size_t) w == n ? 0 : -EIO;
}

/* Read a small file into buf (NUL-terminated). Returns length or -errno. */
static ssize_t read_at(int dirfd, const char *file, char *buf, size_t size) {
        _cleanup_close_ int fd = openat(dirfd, file, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
        if (fd < 0)
                return -errno;
        size_t off = 0;
        while (off + 1 < size) {
                ssize_t r = RETRY_EINTR(read(fd, buf + off, size - 1 - off));
                if (r < 0)
                        return -errno;
                if (r == 0)
                        break;
                off += (size_t) r;
        }
        buf[off] = 0;
        return (ssize_t) off;
}

static int read_u64_at(int dirfd, const char *file, uint64_t *ret) {
        char buf[64];
        ssize_t r = read_at(dirfd, file, buf, sizeof(buf));
        if (r < 0)
                return (int) r;
        if (strncmp(buf, "max", 3) == 0) {
                *ret = UINT64_MAX;
                return 0;
        }
        char *end;
        errno = 0;
        unsigned long long v = strtoull(buf, &end, 10);
        if (errno || end == buf)
                return -EBADMSG;
        *ret = v;
        return 0;
}

static void hier_init(struct hier *h) {
        h->path[0] = 0;
        h->dirfd = -EBADF;
        h->procs_fd = -EBADF;
        h->dev = 0;
}

static struct rt_cgroup *cg_new(enum rt_cgroup_mode mode) {
        struct rt_cgroup *cg = calloc(1, sizeof(*cg));
        if (!cg)
                return NULL;
        cg->mode = mode;
        for (size_t i = 0; i < RT_CGROUP_V1_MAX; i++)
                hier_init(&cg->h[i]);
        cg->memory = cg->cpu = cg->cpuacct = cg->pids = cg->freezer = -1;
        return cg;
}

void rt_cgroup_free(struct rt_cgroup *cg) {
        if (!cg)
                return;
        /* every slot: a half-built cg may hold an fd past n */
        for (size_t i = 0; i < RT_CGROUP_V1_MAX; i++) {
                closep(&cg->h[i].dirfd);
                closep(&cg->h[i].procs_fd);
        }
        free(cg);
}

static int *ctrl_slot(struct rt_cgroup *cg, int c) {
        switch (c) {
        case C_MEMORY:
                return &cg->memory;
        case C_CPU:
                return &cg->cpu;
        case C_CPUACCT:
                return &cg->cpuacct;
        case C_PIDS:
                return &cg->pids;
        default:
                return &cg->freezer;
        }
}

/* The next hierarchy of cg: <base>/warren/<id>, both dirs made when create
 * is set, then opened. A dir made here is counted in cg->n before it is
 * opened (rt_cgroup_create removes h[0..n) on failure); one that already
 * existed fails mkdir first and is not counted. -ENOENT (context in e)
 * when !create and the dir is missing: then nothing is counted. */
static int hier_setup(struct rt_cgroup *cg, const char *base, const char *id, bool create,
                      struct wr_err *e) {
        struct hier *h = &cg->h[cg->n];
        char parent[PATH_MAX];
        snprintf(parent, sizeof(parent), "%s/" RT_CGROUP_PARENT, base);
        snprintf(h->path, sizeof(h->path), "%s/%s", parent, id);
        if (create) {
                if (mkdir(parent, 0755) < 0 && errno != EEXIST)
                        return err_set(e, -errno, "mkdir %s: %m", parent);
                if (mkdir(h->path, 0755) < 0)
                        return err_set(e, -errno, "mkdir %s: %m", h->path);
        }
        cg->n++;
        h->dirfd = open(h->path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (h->dirfd < 0) {
                int r = err_set(e, -errno, "open %s: %m", h->path);
                if (!create && r == -ENOENT)
                        cg->n--;
                return r;
        }
        return 0;
}

/* Find (create=false) or make (create=true) the cgroup dirs; fills cg. */
static int setup_dirs(struct rt_cgroup *cg, const char *id, const char *root, bool create,
                      struct wr_err *e) {
        int r;

        if (cg->mode == RT_CGROUP_V2) {
                r = hier_setup(cg, root, id, create, e);
                if (r < 0)
                        return r;
                cg->memory = cg->cpu = cg->cpuacct = cg->pids = cg->freezer = 0;
                return 0;
        }

        for (int c = 0; c < (int) ELEMENTSOF(v1_ctrl); c++) {
                char base[PATH_MAX];
                snprintf(base, sizeof(base), "%s/%s", root, v1_ctrl[c].name);
                struct stat st;
                if (!fs_is(base, CGROUP_SUPER_MAGIC) || stat(base, &st) < 0) {
                        if (!v1_ctrl[c].required)
                                continue;
                        return err_set(e, -ENOENT, "cgroup v1 controller %s is not mounted at %s",
                                       v1_ctrl[c].name, base);
                }
                /* co-mounted controllers (cpu,cpuacct) share one hierarchy */
                int idx = -1;
                for (size_t i = 0; i < cg->n; i++)
                        if (cg->h[i].dev == st.st_dev)
                                idx = (int) i;
                if (idx < 0) {
                        struct hier *h = &cg->h[cg->n];
                        h->dev = st.st_dev;
                        r = hier_setup(cg, base, id, create, e);
                        if (r == -ENOENT && !create)
                                continue; /* tolerate partial leftovers on open */
                        if (r < 0)
                                return r;
                        idx = (int) cg->n - 1;
                        h->procs_fd = openat(h->dirfd, "cgroup.procs", O_WRONLY | O_CLOEXEC);
                        /* an open for reading by a process that may not
                         * write (a dropped warrend's adopted handle:
                         * docs/privsep.md phase 5) reads, never joins */
                        if (h->procs_fd < 0 && !create && (errno == EACCES || errno == EPERM))
                                h->procs_fd = -EBADF;
                        else if (h->procs_fd < 0)
                                return err_set(e, -errno, "open %s/cgroup.procs: %m", h->path);
                }
                *ctrl_slot(cg, c) = idx;
        }
        if (cg->n == 0)
                return err_set(e, -ENOENT, "no cgroup for sandbox %s", id);
        return 0;
}

static int hier_rmdir(struct hier *h) {
        if (!h->path[0])
                return 0;
        closep(&h->dirfd);
        closep(&h->procs_fd);
        /* exiting tasks leave the cgroup asynchronously: retry for ~1 s */
        for (int i = 0; i < 1000; i++) {
                if (rmdir(h->path) == 0 || errno == ENOENT) {
                        h->path[0] = 0;
                        return 0;
                }
                if (errno != EBUSY)
                        return -errno;
                struct timespec ts = {0, 1000000};
                nanosleep(&ts, NULL);
        }
        return -EBUSY;
}

static int v2_enable(const char *root, const char *dir, const char *ctrl, struct wr_err *e) {
        char buf[512], path[PATH_MAX];
        _cleanup_close_ int rfd = open(root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (rfd < 0)
                return err_set(e, -errno, "open %s: %m", root);
        ssize_t n = read_at(rfd, "cgroup.controllers", buf, sizeof(buf));
        if (n < 0)
                return err_set(e, (int) n, "read %s/cgroup.controllers: %s", root,
                               strerror((int) -n));
        bool found = false;
        for (char *save = NULL, *t = strtok_r(buf, " \n", &save); t;
             t = strtok_r(NULL, " \n", &save))
                if (streq(t, ctrl))
                        found = true;
        if (!found)
                return err_set(e, -EOPNOTSUPP,
                               "cgroup v2 controller %s is not available at %s (bound to a v1 "
                               "hierarchy or disabled)",
                               ctrl, root);
        char plus[64];
        snprintf(plus, sizeof(plus), "+%s", ctrl);
        int r = write_at(rfd, "cgroup.subtree_control", plus);
        if (r < 0)
                return err_set(e, r, "enable %s in %s/cgroup.subtree_control: %s", ctrl, root,
                               strerror(-r));
        snprintf(path, sizeof(path), "%s/%s", root, dir);
        _cleanup_close_ int dfd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (dfd < 0)
                return err_set(e, -errno, "open %s: %m", path);
        r = write_at(dfd, "cgroup.subtree_control", plus);
        if (r < 0)
                return err_set(e, r, "enable %s in %s/cgroup.subtree_control: %s", ctrl, path,
                               strerror(-r));
        return 0;
}

static int set_limits(struct rt_cgroup *cg, const char *root, const struct rt_limits *l,
                      struct wr_err *e) {
        uint64_t mem = l->memory_bytes ? l->memory_bytes : RT_DEFAULT_MEMORY;
        uint64_t cpu = l->cpu_millicores ? l->cpu_millicores : RT_DEFAULT_CPU;
        uint64_t pids = l->pids_max ? l->pids_max : RT_DEFAULT_PIDS;
        uint64_t quota = cpu * CPU_PERIOD_US / 1000;
        char v[64];
        int r;

        if (quota < 1000)
                quota = 1000; /* the kernel's minimum CFS quota */

        if (cg->mode == RT_CGROUP_V2) {
                int fd = cg->h[0].dirfd;
                static const char *const ctrls[] = {"memory", "cpu", "pids"};
                for (size_t i = 0; i < ELEMENTSOF(ctrls); i++) {
                        r = v2_enable(root, RT_CGROUP_PARENT, ctrls[i], e);
                        if (r < 0)
                                return r;
                }
                snprintf(v, sizeof(v), "%" PRIu64, mem);
                if ((r = write_at(fd, "memory.max", v)) < 0)
                        return err_set(e, r, "set memory.max: %s", strerror(-r));
                r = write_at(fd, "memory.swap.max", "0");
                if (r < 0 && r != -ENOENT) /* no swap accounting: nothing to turn off */
                        return err_set(e, r, "set memory.swap.max: %s", strerror(-r));
                snprintf(v, sizeof(v), "%" PRIu64 " %llu", quota, CPU_PERIOD_US);
                if ((r = write_at(fd, "cpu.max", v)) < 0)
                        return err_set(e, r, "set cpu.max: %s", strerror(-r));
                snprintf(v, sizeof(v), "%" PRIu64, pids);
                if ((r = write_at(fd, "pids.max", v)) < 0)
                        return err_set(e, r, "set pids.max: %s", strerror(-r));
                return 0;
        }

        int mfd = cg->h[cg->memory].dirfd;
        snprintf(v, sizeof(v), "%" PRIu64, mem);
        if ((r = write_at(mfd, "memory.limit_in_bytes", v)) < 0)
                return err_set(e, r, "set memory.limit_in_bytes: %s", strerror(-r));
        /* memsw = memory: no swap. Absent without swap accounting. */
        r = write_at(mfd, "memory.memsw.limit_in_bytes", v);
        if (r < 0 && r != -ENOENT)
                return err_set(e, r, "set memory.memsw.limit_in_bytes: %s", strerror(-r));
        int cfd = cg->h[cg->cpu].dirfd;
        snprintf(v, sizeof(v), "%llu", CPU_PERIOD_US);
        if ((r = write_at(cfd, "cpu.cfs_period_us", v)) < 0)
                return err_set(e, r, "set cpu.cfs_period_us: %s", strerror(-r));
        snprintf(v, sizeof(v), "%" PRIu64, quota);
        if ((r = write_at(cfd, "cpu.cfs_quota_us", v)) < 0)
                return err_set(e, r, "set cpu.cfs_quota_us: %s", strerror(-r));
        snprintf(v, sizeof(v), "%" PRIu64, pids);
        if ((r = write_at(cg->h[cg->pids].dirfd, "pids.max", v)) < 0)
                return err_set(e, r, "set pids.max: %s", strerror(-r));
        return 0;
}

/* Remove the dirs of a cg whose h[0..n) were all made by this process's
 * call (a dir that already existed failed mkdir before being counted) and
 * free it. */
static void cg_unmake(struct rt_cgroup *cg) {
        for (size_t i = 0; i < cg->n; i++)
                hier_rmdir(&cg->h[i]);
        rt_cgroup_free(cg);
}

/* Detect the hierarchy for mode (its root into root), then find
 * (create=false) or make (create=true) the dirs of id. On failure the dirs
 * made here are removed again. */
static int cg_setup(const char *id, enum rt_cgroup_mode mode, bool create, char *root,
                    size_t root_size, struct rt_cgroup **ret, struct wr_err *e) {
        int m = rt_cgroup_detect(mode, root, root_size, e);
        if (m < 0)
                return m;
        if (!rt_id_valid(id))
                return err_set(e, -EINVAL, "invalid sandbox id");
        struct rt_cgroup *cg = cg_new((enum rt_cgroup_mode) m);
        if (!cg)
                return err_set(e, -ENOMEM, "out of memory");
        int r = setup_dirs(cg, id, root, create, e);
        if (r < 0) {
                if (create)
                        cg_unmake(cg);
                else
                        rt_cgroup_free(cg);
                return r;
        }
        *ret = cg;
        return 0;
}

int rt_cgroup_create(const char *id, enum rt_cgroup_mode mode, const struct rt_limits *limits,
                     struct rt_cgroup **ret, struct wr_err *e) {
        char root[PATH_MAX];
        struct rt_cgroup *cg;
        int r = cg_setup(id, mode, true, root, sizeof(root), &cg, e);
        if (r < 0)
                return r;
        if (limits && (r = set_limits(cg, root, limits, e)) < 0) {
                cg_unmake(cg);
                return r;
        }
        *ret = cg;
        return 0;
}

void rt_cgroup_close_join_fds(struct rt_cgroup *cg) {
        for (size_t i = 0; i < cg->n; i++) {
                closep(&cg->h[i].procs_fd);
        }
}

int rt_cgroup_set_limits(struct rt_cgroup *cg, const struct rt_limits *limits, struct wr_err *e) {
        char root[PATH_MAX];
        int m = rt_cgroup_detect(cg->mode, root, sizeof(root), e);
        if (m < 0)
                return m;
        return set_limits(cg, root, limits, e);
}

int rt_cgroup_open(const char *id, enum rt_cgroup_mode mode, struct rt_cgroup **ret,
                   struct wr_err *e) {
        char root[PATH_MAX];
        return cg_setup(id, mode, false, root, sizeof(root), ret, e);
}

enum rt_cgroup_mode rt_cgroup_mode_of(const struct rt_cgroup *cg) {
        return cg->mode;
}

int rt_cgroup_dirfd(const struct rt_cgroup *cg) {
        return cg->mode == RT_CGROUP_V2 ? cg->h[0].dirfd : -EBADF;
}

size_t rt_cgroup_join_fds(const struct rt_cgroup *cg, int *fds, size_t max) {
        size_t k = 0;
        if (cg->mode != RT_CGROUP_V1)
                return 0;
        for (size_t i = 0; i < cg->n && k < max; i++)
                if (cg->h[i].procs_fd >= 0)
                        fds[k++] = cg->h[i].procs_fd;
        return k;
}

/* The hierarchy whose cgroup.procs lists the sandbox's processes. */
static const struct hier *procs_hier(const struct rt_cgroup *cg) {
        if (cg->mode == RT_CGROUP_V2)
                return &cg->h[0];
        if (cg->freezer >= 0)
                return &cg->h[cg->freezer];
        return cg->n ? &cg->h[0] : NULL;
}

/* Count the pids in cgroup.procs, sending sig to each unless it is 0.
 * Returns the count or -errno. */
static int foreach_pid(const struct rt_cgroup *cg, int sig) {
        const struct hier *h = procs_hier(cg);
        if (!h || h->dirfd < 0)
                return -ENOENT;
        _cleanup_close_ int fd = openat(h->dirfd, "cgroup.procs", O_RDONLY | O_CLOEXEC);
        if (fd < 0)
                return -errno;
        FILE *f = fdopen(fd, "re");
        if (!f)
                return -errno;
        TAKE_FD(fd);
        int n = 0;
        long pid;
        while (fscanf(f, "%ld", &pid) == 1) {
                if (sig && pid > 0)
                        (void) kill((pid_t) pid, sig);
                n++;
        }
        fclose(f);
        return n;
}

int rt_cgroup_nprocs(const struct rt_cgroup *cg) {
        return foreach_pid(cg, 0);
}

static void sleep_ms(long ms) {
        struct timespec ts = {0, ms * 1000000L};
        nanosleep(&ts, NULL);
}

/* Freeze, wait (bounded) until frozen, returns 0 or -errno. */
static int freeze(const struct rt_cgroup *cg, bool on) {
        char buf[256];
        if (cg->mode == RT_CGROUP_V2) {
                int fd = cg->h[0].dirfd;
                int r = write_at(fd, "cgroup.freeze", on ? "1" : "0");
                if (r < 0 || !on)
                        return r;
                for (int i = 0; i < 100; i++) {
                        if (read_at(fd, "cgroup.events", buf, sizeof(buf)) > 0 &&
                            strstr(buf, "frozen 1"))
                                return 0;
                        sleep_ms(1);
                }
                return 0; /* best effort: signal anyway */
        }
        if (cg->freezer < 0)
                return -EOPNOTSUPP;
        int fd = cg->h[cg->freezer].dirfd;
        int r = write_at(fd, "freezer.state", on ? "FROZEN" : "THAWED");
        if (r < 0 || !on)
                return r;
        for (int i = 0; i < 100; i++) {
                if (read_at(fd, "freezer.state", buf, sizeof(buf)) > 0 &&
                    strncmp(buf, "FROZEN", 6) == 0)
                        return 0;
                sleep_ms(1);
        }
        return 0;
}

int rt_cgroup_freeze(struct rt_cgroup *cg, bool on) {
        return freeze(cg, on);
}

int rt_cgroup_frozen(const struct rt_cgroup *cg) {
        char buf[256];
        if (cg->mode == RT_CGROUP_V2) {
                if (read_at(cg->h[0].dirfd, "cgroup.freeze", buf, sizeof(buf)) <= 0)
                        return -EIO;
                return buf[0] == '1';
        }
        if (cg->freezer < 0)
                return 0;
        if (read_at(cg->h[cg->freezer].dirfd, "freezer.state", buf, sizeof(buf)) <= 0)
                return -EIO;
        /* FREEZING counts: the request stands */
        return strncmp(buf, "THAWED", 6) != 0;
}

int rt_cgroup_kill(struct rt_cgroup *cg, int sig) {
        if (cg->mode == RT_CGROUP_V2 && sig == SIGKILL) {
                int r = write_at(cg->h[0].dirfd, "cgroup.kill", "1");
                if (r != -ENOENT)
                        return r;
        }
        int fr = freeze(cg, true);
        int n = foreach_pid(cg, sig);
        if (fr >= 0)
                (void) freeze(cg, false);
        return n;
}

int rt_cgroup_usage(const struct rt_cgroup *cg, struct rt_usage *u) {
        uint64_t v;
        char buf[1024];
        memset(u, 0, sizeof(*u));
        if (cg->mode == RT_CGROUP_V2) {
                int fd = cg->h[0].dirfd;
                if (read_at(fd, "cpu.stat", buf, sizeof(buf)) > 0) {
                        char *p = strstr(buf, "usage_usec ");
                        if (p)
                                u->cpu_seconds = (double) strtoull(p + 11, NULL, 10) / 1e6;
                }
                if (read_u64_at(fd, "memory.current", &v) == 0)
                        u->memory_bytes = v;
                if (read_u64_at(fd, "memory.peak", &v) == 0)
                        u->memory_peak_bytes = v;
                if (read_u64_at(fd, "pids.current", &v) == 0)
                        u->pids = (uint32_t) v;
                return 0;
        }
        if (cg->cpuacct >= 0 && read_u64_at(cg->h[cg->cpuacct].dirfd, "cpuacct.usage", &v) == 0)
                u->cpu_seconds = (double) v / 1e9;
        if (cg->memory >= 0) {
                if (read_u64_at(cg->h[cg->memory].dirfd, "memory.usage_in_bytes", &v) == 0)
                        u->memory_bytes = v;
                if (read_u64_at(cg->h[cg->memory].dirfd, "memory.max_usage_in_bytes", &v) == 0)
                        u->memory_peak_bytes = v;
        }
        if (cg->pids >= 0 && read_u64_at(cg->h[cg->pids].dirfd, "pids.current", &v) == 0)
                u->pids = (uint32_t) v;
        return 0;
}

int rt_cgroup_oom_kills(const struct rt_cgroup *cg, uint64_t *ret) {
        char buf[1024];
        int fd = cg->mode == RT_CGROUP_V2 ? cg->h[0].dirfd
                 : cg->memory >= 0        ? cg->h[cg->memory].dirfd
                                          : -EBADF;
        if (fd < 0)
                return -ENOENT;
        ssize_t r = read_at(fd, cg->mode == RT_CGROUP_V2 ? "memory.events" : "memory.oom_control",
                            buf, sizeof(buf));
        if (r < 0)
                return (int) r;
        char *p = strstr(buf, "oom_kill ");
        if (!p || (p != buf && p[-1] != '\n'))
                return -ENODATA;
        *ret = strtoull(p + 9, NULL, 10);
        return 0;
}

int rt_cgroup_remove(struct rt_cgroup *cg, struct wr_err *e) {
        int ret = 0;
        for (size_t i = 0; i < cg->n; i++) {
                char path[PATH_MAX];
                snprintf(path, sizeof(path), "%s", cg->h[i].path);
                int r = hier_rmdir(&cg->h[i]);
                if (r < 0 && ret == 0)
                        ret = err_set(e, r, "remove cgroup %s: %s", path, strerror(-r));
        }
        return ret;
}
