/* SPDX-License-Identifier: Apache-2.0 */
/* Sandbox lifecycle, parent side: prepare, clone3, wait for the exec,
 * signal, reap, tear down. The child's half is child.c. */

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <arpa/inet.h>
#include <net/if.h>
#include <linux/netlink.h>
#include <unistd.h>

#include "runtime/runtime-internal.h"

#ifndef P_PIDFD
#define P_PIDFD 3
#endif

struct rt_sandbox {
        char *id;
        char *dir;
        char *ctl_path;
        struct rt_cgroup *cg;
        pid_t pid;
        int pidfd;
        bool reaped;
        int status;
        bool destroyed;
        bool attached;       /* rt_sandbox_attach: init is not our child */
        bool remote;         /* rt_sandbox_adopt: warren-priv holds the sandbox */
        int ctl_fd;          /* rt_sandbox_adopt: a ctl connection handed over, not taken yet */
        uint64_t start_time; /* of init (= the child: exec keeps it); 0 = not read yet */
        int park_fd;         /* rt_sandbox_prestart: config pipe to the parked child */
        int err_rfd;         /* rt_sandbox_prestart: its error pipe */
        unsigned made;       /* during create: MADE_* bits of what this call created */
        bool has_net;        /* the veth of cfg->net was made (at the create/prestart) */
        struct rt_net net;
        /* the bounded writable layer (disk.c): its detached mount, its
         * size (0: the upper dir is on the host's file system) */
        int disk_fd;
        uint64_t disk_bytes;
};

enum {
        MADE_DIR = 1u << 0, /* cfg->dir itself */
        MADE_SUB = 1u << 1, /* bit i+1: subdirs[i] */
        MADE_SOCK = 1u << 4,
        MADE_DISK = 1u << 5, /* <dir>/disk.img */
};

static const struct {
        const char *name;
        mode_t mode;
} subdirs[] = {{"upper", 0755}, {"work", 0700}, {"rootfs", 0755}};

/* ---- non-dumpable while creating (refcounted across threads) ---- */

static pthread_mutex_t dump_lock = PTHREAD_MUTEX_INITIALIZER;
static unsigned dump_holders;
static int dump_saved;

static void dumpable_hold(void) {
        pthread_mutex_lock(&dump_lock);
        if (dump_holders++ == 0) {
                dump_saved = prctl(PR_GET_DUMPABLE, 0, 0, 0, 0);
                (void) prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
        }
        pthread_mutex_unlock(&dump_lock);
}

static void dumpable_release(void) {
        pthread_mutex_lock(&dump_lock);
        if (--dump_holders == 0 && dump_saved > 0)
                (void) prctl(PR_SET_DUMPABLE, dump_saved, 0, 0, 0);
        pthread_mutex_unlock(&dump_lock);
}

/* ---- host check ---- */

static pthread_mutex_t host_lock = PTHREAD_MUTEX_INITIALIZER;
static bool host_ok[3];

int rt_host_check(enum rt_cgroup_mode mode, struct wr_err *e) {
        if ((unsigned) mode > RT_CGROUP_V2)
                return err_set(e, -EINVAL, "bad cgroup mode");
        pthread_mutex_lock(&host_lock);
        bool ok = host_ok[mode];
        pthread_mutex_unlock(&host_lock);
        if (ok)
                return 0;

        if (geteuid() != 0)
                return err_set(e, -EPERM, "sandboxes need root (running as uid %u)",
                               (unsigned) geteuid());
        int fd = sys_openat2(AT_FDCWD, "/", O_PATH | O_CLOEXEC, RESOLVE_IN_ROOT);
        if (fd < 0)
                return err_set(e, -errno, "kernel lacks openat2 (Linux >= 5.6 needed): %m");
        close(fd);
        fd = sys_fsopen("overlay", FSOPEN_CLOEXEC);
        if (fd < 0) {
                if (errno == ENOSYS)
                        return err_set(e, -ENOSYS,
                                       "kernel lacks the new mount API (Linux >= 5.2 needed)");
                if (errno == ENODEV)
                        return err_set(e, -ENODEV,
                                       "overlayfs is not available on this host (modprobe "
                                       "overlay; CONFIG_OVERLAY_FS)");
                return err_set(e, -errno, "fsopen overlay: %m");
        }
        close(fd);
        struct rt_mount_attr a = {0};
        if (sys_mount_setattr(-1, "", 0, &a) < 0 && errno == ENOSYS)
                return err_set(e, -ENOSYS, "kernel lacks mount_setattr (Linux >= 5.12 needed)");
        char root[PATH_MAX];
        int m = rt_cgroup_detect(mode, root, sizeof(root), e);
        if (m < 0)
                return m;
        if (m == RT_CGROUP_V1) {
                static const char *const need[] = {"memory", "cpu", "pids", "freezer"};
                for (size_t i = 0; i < ELEMENTSOF(need); i++) {
                        char p[PATH_MAX];
                        snprintf(p, sizeof(p), "%s/%s/cgroup.procs", root, need[i]);
                        if (access(p, W_OK) < 0)
                                return err_set(e, -ENOENT,
                                               "cgroup v1 controller %s is not mounted at %s/%s",
                                               need[i], root, need[i]);
                }
        }
        pthread_mutex_lock(&host_lock);
        host_ok[mode] = true;
        pthread_mutex_unlock(&host_lock);
        return 0;
}

int rt_prepare(const char *init_path, enum rt_cgroup_mode mode, struct wr_err *e) {
        const struct rt_policy *policy;
        int r = rt_host_check(mode, e);
        if (r < 0)
                return r;
        r = rt_policy_get(&policy, e);
        if (r < 0)
                return r;
        r = rt_init_memfd(init_path, e);
        return r < 0 ? r : 0;
}

/* ---- config checks ---- */

static bool hostname_valid(const char *h) {
        size_t n = strlen(h);
        if (n == 0 || n > 64)
                return false;
        for (size_t i = 0; i < n; i++)
                if (h[i] <= ' ' || h[i] > '~' || h[i] == '/')
                        return false;
        return true;
}

static bool net_valid(const struct rt_net *n) {
        size_t len = strnlen(n->peer, sizeof(n->peer));
        if (len == 0 || len >= sizeof(n->peer) || n->prefix < 1 || n->prefix > 31 ||
            n->addr == n->gateway)
                return false;
        for (size_t i = 0; i < len; i++) {
                char ch = n->peer[i];
                if (!((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
                      (ch >= '0' && ch <= '9') || ch == '_' || ch == '.' || ch == '-'))
                        return false;
        }
        uint32_t mask = htonl(~0u << (32 - n->prefix));
        return (n->addr & mask) == (n->gateway & mask);
}

static int config_check(const struct rt_sandbox_config *cfg, bool need_layers, struct wr_err *e) {
        if (!cfg || !rt_id_valid(cfg->id))
                return err_setx(e, -EINVAL, WR_STATUS_INVALID_ARGUMENT, WR_FAULT_CLIENT,
                                "invalid sandbox id");
        if (!cfg->dir || cfg->dir[0] != '/' || strlen(cfg->dir) > PATH_MAX - 64)
                return err_set(e, -EINVAL, "sandbox dir must be an absolute path");
        if (!cfg->init_path || !cfg->init_path[0])
                return err_set(e, -EINVAL, "no warren-init path");
        if ((need_layers && cfg->n_layers == 0) || (cfg->n_layers && !cfg->layers))
                return err_set(e, -EINVAL, "a sandbox needs at least one layer");
        if (cfg->n_layers > RT_PARK_MAX_LAYERS)
                return err_set(e, -E2BIG, "too many layers (%zu)", cfg->n_layers);
        if (cfg->limits.disk_bytes &&
            (cfg->limits.disk_bytes < RT_DISK_MIN || cfg->limits.disk_bytes > RT_DISK_MAX))
                return err_setx(e, -EINVAL, WR_STATUS_INVALID_ARGUMENT, WR_FAULT_CLIENT,
                                "resources.disk: %llu bytes is out of range; give 8Mi to 8Ti",
                                (unsigned long long) cfg->limits.disk_bytes);
        for (size_t i = 0; i < cfg->n_layers; i++) {
                struct stat st;
                if (!cfg->layers[i] || cfg->layers[i][0] != '/')
                        return err_set(e, -EINVAL, "layer %zu is not an absolute path", i);
                if (stat(cfg->layers[i], &st) < 0)
                        return err_set(e, -errno, "layer %s: %m", cfg->layers[i]);
                if (!S_ISDIR(st.st_mode))
                        return err_set(e, -ENOTDIR, "layer %s is not a directory", cfg->layers[i]);
        }
        if (cfg->hostname && !hostname_valid(cfg->hostname))
                return err_setx(e, -EINVAL, WR_STATUS_INVALID_ARGUMENT, WR_FAULT_CLIENT,
                                "invalid hostname");
        if (cfg->resolv_conf && strlen(cfg->resolv_conf) > 64 * 1024)
                return err_set(e, -E2BIG, "resolv.conf content too large");
        if (cfg->net && !net_valid(cfg->net))
                return err_set(e, -EINVAL, "bad network config (peer name, addresses, prefix)");
        if (cfg->uid_count && (cfg->uid_base == 0 || cfg->uid_base > UINT32_MAX - cfg->uid_count))
                return err_set(e, -EINVAL, "bad user namespace range %u+%u", cfg->uid_base,
                               cfg->uid_count);
        return rt_mounts_check(cfg->mounts, cfg->n_mounts, e);
}

/* ---- the control socket ---- */

static int ctl_listen(int dirfd, const char *path, struct wr_err *e) {
        struct sockaddr_un sa = {.sun_family = AF_UNIX};
        (void) unlinkat(dirfd, "ctl.sock", 0);
        if (strlen(path) < sizeof(sa.sun_path))
                snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
        else /* long state dirs: bind through the directory fd */
                snprintf(sa.sun_path, sizeof(sa.sun_path), "/proc/self/fd/%d/ctl.sock", dirfd);
        _cleanup_close_ int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
        if (fd < 0)
                return err_set(e, -errno, "control socket: %m");
        if (bind(fd, (struct sockaddr *) &sa, sizeof(sa)) < 0)
                return err_set(e, -errno, "bind %s: %m", path);
        if (fchmodat(dirfd, "ctl.sock", 0600, 0) < 0)
                return err_set(e, -errno, "chmod %s: %m", path);
        if (listen(fd, 64) < 0)
                return err_set(e, -errno, "listen %s: %m", path);
        return TAKE_FD(fd);
}

/* ---- create ---- */

static char *join(const char *a, const char *b) {
        char *s;
        return asprintf(&s, "%s/%s", a, b) < 0 ? NULL : s;
}

static char *lowerdir_string(const struct rt_sandbox_config *cfg) {
        size_t cap = 1;
        for (size_t i = 0; i < cfg->n_layers; i++)
                cap += 2 * strlen(cfg->layers[i]) + 1;
        char *s = malloc(cap), *p = s;
        if (!s)
                return NULL;
        for (size_t i = 0; i < cfg->n_layers; i++) {
                if (i)
                        *p++ = ':';
                int n = rt_overlay_escape(cfg->layers[i], p, cap - (size_t) (p - s));
                if (n < 0) {
                        free(s);
                        return NULL;
                }
                p += n;
        }
        *p = 0;
        return s;
}

static void close_pair(int p[2]) {
        closep(&p[0]);
        closep(&p[1]);
}

/* ---- the start message (what the child is told; see rt_start) ---- */

struct start_msg {
        char *buf;
        size_t len;
        int fds[RT_START_FDS_MAX]; /* detached clones of the bind sources, the layer's mount */
        size_t n_fds;
};

static void start_msg_done(struct start_msg *m) {
        free(m->buf);
        m->buf = NULL;
        for (size_t i = 0; i < m->n_fds; i++)
                closep(&m->fds[i]);
        m->n_fds = 0;
}

/* Clone the source of bind entry i on the host side, as this process sees
 * it (the last component of a path is not followed): a detached, private,
 * non-recursive mount with the entry's attributes, which the child moves
 * onto the target. Records the source's identity and type in en. Returns
 * the fd or a negative errno with context in e. */
static int bind_open(const struct rt_mount *m, size_t i, struct rt_entry *en, struct wr_err *e) {
        _cleanup_close_ int fd =
                m->source ? sys_open_tree(AT_FDCWD, m->source,
                                          OPEN_TREE_CLONE | O_CLOEXEC | AT_SYMLINK_NOFOLLOW)
                          : sys_open_tree(m->source_fd, "",
                                          OPEN_TREE_CLONE | O_CLOEXEC | AT_EMPTY_PATH);
        if (fd < 0)
                return err_set(e, -errno, "mount %zu (%s): bind source %s: %m", i, m->target,
                               m->source ? m->source : "fd");
        struct stat st;
        if (fstat(fd, &st) < 0)
                return err_set(e, -errno, "mount %zu (%s): stat bind source: %m", i, m->target);
        if (!S_ISDIR(st.st_mode) && !S_ISREG(st.st_mode) && !S_ISSOCK(st.st_mode))
                return err_setx(e, -EINVAL, WR_STATUS_INVALID_ARGUMENT, WR_FAULT_CLIENT,
                                "mount %zu (%s): bind source is not a directory, regular file "
                                "or socket",
                                i, m->target);
        struct rt_mount_attr a = {.attr_set = rt_mount_attrs(m->flags), .propagation = MS_PRIVATE};
        if (sys_mount_setattr(fd, "", AT_EMPTY_PATH, &a) < 0)
                return err_set(e, -errno, "mount %zu (%s): set attributes of the bind: %m", i,
                               m->target);
        en->dev = st.st_dev;
        en->ino = st.st_ino;
        en->type = st.st_mode & S_IFMT;
        return TAKE_FD(fd);
}

/* Build the start message for cfg (checked): the overlay, hostname,
 * RLIMIT_NOFILE, the runtime's own table entries from cfg's fields, then
 * cfg->mounts with their bind sources opened, then (disk_fd >= 0: a
 * create's or prestart's) a copy of the writable layer's mount. On
 * failure *out holds nothing. */
static int start_build(const struct rt_sandbox_config *cfg, const struct rt_net *net, int disk_fd,
                       struct start_msg *out, struct wr_err *e) {
        _cleanup_free_ struct rt_start *s = calloc(1, sizeof(*s));
        const char *hostname = cfg->hostname ? cfg->hostname : cfg->id;
        const char *resolv = cfg->resolv_conf
                                     ? cfg->resolv_conf
                                     : "# warren: no resolver configured for this sandbox\n";
        uint64_t disk = cfg->limits.disk_bytes;
        _cleanup_free_ char *scratch = disk ? join(cfg->dir, "upper") : NULL;
        _cleanup_free_ char *upper = join(cfg->dir, disk ? "upper/" RT_DISK_UPPER : "upper");
        _cleanup_free_ char *work = join(cfg->dir, disk ? "upper/" RT_DISK_WORK : "work");
        _cleanup_free_ char *lowerdir = lowerdir_string(cfg);
        if (!s || !upper || !work || !lowerdir || (disk && !scratch))
                return err_set(e, -ENOMEM, "out of memory");
        char hosts[RT_HOSTS_MAX], self_addr[INET_ADDRSTRLEN] = "127.0.1.1";
        if (net)
                (void) inet_ntop(AF_INET, &net->addr, self_addr, sizeof(self_addr));
        snprintf(hosts, sizeof(hosts),
                 "127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n"
                 "%s\t%s\n",
                 self_addr, hostname);
        struct rlimit cur;
        rlim_t nofile = cfg->limits.nofile ? cfg->limits.nofile : RT_DEFAULT_NOFILE;
        if (getrlimit(RLIMIT_NOFILE, &cur) == 0 && cur.rlim_max < nofile)
                nofile = cur.rlim_max;

        *s = (struct rt_start){
                .nofile = nofile,
                .scratch_fd = -1,
                .hostname = hostname,
                .upper = upper,
                .work = work,
                .scratch = scratch,
                .lowerdir = lowerdir,
                .n_layers = cfg->n_layers,
        };
        for (size_t i = 0; i < cfg->n_layers; i++)
                s->layers[i] = cfg->layers[i];
        const unsigned nosuid_nodev = RT_MOUNT_NOSUID | RT_MOUNT_NODEV;
        const struct rt_mount own[RT_TABLE_OWN] = {
                {.kind = RT_MOUNT_TMPFS,
                 .target = "/tmp",
                 .flags = nosuid_nodev,
                 .size = cfg->limits.tmp_bytes ? cfg->limits.tmp_bytes : RT_DEFAULT_TMPFS,
                 .mode = 01777},
                {.kind = RT_MOUNT_TMPFS,
                 .target = "/run",
                 .flags = nosuid_nodev,
                 .size = 64ULL << 20,
                 .mode = 0755},
                {.kind = RT_MOUNT_COPY,
                 .target = "/etc/hostname",
                 .data = hostname,
                 .len = strlen(hostname)},
                {.kind = RT_MOUNT_COPY,
                 .target = "/etc/hosts",
                 .data = hosts,
                 .len = strlen(hosts)},
                {.kind = RT_MOUNT_COPY,
                 .target = "/etc/resolv.conf",
                 .data = resolv,
                 .len = strlen(resolv)},
        };
        for (size_t i = 0; i < RT_TABLE_OWN; i++)
                s->mounts[s->n_mounts++].m = own[i];
        int r;
        for (size_t i = 0; i < cfg->n_mounts; i++) {
                struct rt_entry *en = &s->mounts[s->n_mounts++];
                en->m = cfg->mounts[i];
                if (en->m.kind != RT_MOUNT_BIND)
                        continue;
                r = bind_open(&cfg->mounts[i], i, en, e);
                if (r < 0) {
                        start_msg_done(out);
                        return r;
                }
                en->m.source = NULL;
                en->m.source_fd = (int) out->n_fds;
                out->fds[out->n_fds++] = r;
        }
        if (disk_fd >= 0) {
                int fd = fcntl(disk_fd, F_DUPFD_CLOEXEC, 3);
                if (fd < 0) {
                        r = err_set(e, -errno, "dup the writable layer: %m");
                        start_msg_done(out);
                        return r;
                }
                s->scratch_fd = (int) out->n_fds;
                out->fds[out->n_fds++] = fd;
        }
        s->n_fds = out->n_fds;
        r = rt_start_encode(s, &out->buf, &out->len);
        if (r < 0) {
                start_msg_done(out);
                return err_set(e, r, "start message: %s", strerror(-r));
        }
        return 0;
}

static void sandbox_free_fields(struct rt_sandbox *sb) {
        if (sb->remote)
                closep(&sb->ctl_fd);
        closep(&sb->disk_fd);
        closep(&sb->park_fd);
        closep(&sb->err_rfd);
        free(sb->id);
        free(sb->dir);
        free(sb->ctl_path);
        rt_cgroup_free(sb->cg);
        closep(&sb->pidfd);
        free(sb);
}

void rt_sandbox_free(struct rt_sandbox *sb) {
        if (sb)
                sandbox_free_fields(sb);
}
DEFINE_TRIVIAL_CLEANUP_FUNC(struct rt_sandbox *, rt_sandbox_free);

static int remove_dir(const char *dir) {
        _cleanup_free_ char *copy = strdup(dir), *copy2 = strdup(dir);
        if (!copy || !copy2)
                return -ENOMEM;
        const char *parent = dirname(copy), *base = basename(copy2);
        _cleanup_close_ int pfd = open(parent, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (pfd < 0)
                return errno == ENOENT ? 0 : -errno;
        return rm_rf_at(pfd, base);
}

static int wait_exec(struct rt_sandbox *sb, int errfd, struct wr_err *e);
static int wait_parked(struct rt_sandbox *sb, struct wr_err *e);

static int create(const struct rt_sandbox_config *cfg, struct rt_sandbox *sb, bool park,
                  struct wr_err *e) {
        const struct rt_policy *policy;
        int r;

        if ((r = config_check(cfg, !park, e)) < 0)
                return r;
        if ((r = rt_host_check(cfg->cgroup_mode, e)) < 0)
                return r;
        if ((r = rt_policy_get(&policy, e)) < 0)
                return r;
        int init_fd = rt_init_memfd(cfg->init_path, e);
        if (init_fd < 0)
                return init_fd;
        /* the sandbox dir */
        if (mkdir(cfg->dir, 0700) == 0)
                sb->made |= MADE_DIR;
        else if (errno != EEXIST)
                return err_set(e, -errno, "mkdir %s: %m", cfg->dir);
        _cleanup_close_ int dirfd = open(cfg->dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (dirfd < 0)
                return err_set(e, -errno, "open %s: %m", cfg->dir);
        for (size_t i = 0; i < ELEMENTSOF(subdirs); i++) {
                if (mkdirat(dirfd, subdirs[i].name, subdirs[i].mode) == 0)
                        sb->made |= MADE_SUB << i;
                else if (errno != EEXIST)
                        return err_set(e, -errno, "mkdir %s/%s: %m", cfg->dir, subdirs[i].name);
        }
        /* the root dir of the sandbox's writable layer is its root's */
        if (cfg->uid_count &&
            fchownat(dirfd, "upper", cfg->uid_base, cfg->uid_base, AT_SYMLINK_NOFOLLOW) < 0)
                return err_set(e, -errno, "chown %s/upper: %m", cfg->dir);
        _cleanup_free_ char *rootfs = join(cfg->dir, "rootfs");
        if (!rootfs)
                return err_set(e, -ENOMEM, "out of memory");
        /* the bounded writable layer (an image there is another
         * sandbox's: never ours to undo) */
        if (cfg->limits.disk_bytes) {
                if (faccessat(dirfd, RT_DISK_IMAGE, F_OK, AT_SYMLINK_NOFOLLOW) == 0)
                        return err_set(e, -EEXIST,
                                       "%s/" RT_DISK_IMAGE " exists: is the sandbox running?",
                                       cfg->dir);
                sb->made |= MADE_DISK;
                sb->disk_fd = rt_disk_make(dirfd, cfg->dir, cfg->disk_template_dir,
                                           cfg->limits.disk_bytes, e);
                if (sb->disk_fd < 0)
                        return sb->disk_fd;
                sb->disk_bytes = cfg->limits.disk_bytes;
        }
        _cleanup_(start_msg_done) struct start_msg msg = {0};
        if ((r = start_build(cfg, cfg->net, sb->disk_fd, &msg, e)) < 0)
                return r;

        if (faccessat(dirfd, "ctl.sock", F_OK, AT_SYMLINK_NOFOLLOW) == 0)
                return err_set(e, -EEXIST, "%s exists: is the sandbox running?", sb->ctl_path);
        _cleanup_close_ int ctl_fd = ctl_listen(dirfd, sb->ctl_path, e);
        if (ctl_fd < 0)
                return ctl_fd;
        sb->made |= MADE_SOCK;

        r = rt_cgroup_create(cfg->id, cfg->cgroup_mode, cfg->unlimited ? NULL : &cfg->limits,
                             &sb->cg, e);
        if (r < 0)
                return r;

        struct rt_child c = {
                .policy = policy,
                .ctl_fd = ctl_fd,
                .init_fd = init_fd,
                .rootfs = rootfs,
                .log_fd = cfg->log_fd,
                .msg = msg.buf,
                .msg_len = msg.len,
                .fds = msg.fds,
                .n_fds = msg.n_fds,
                .uid_base = cfg->uid_base,
                .uid_count = cfg->uid_count,
        };
        /* the network: the child makes the veth from inside its
         * namespace, the peer in ours */
        _cleanup_close_ int host_ns = -EBADF, host_nl = -EBADF;
        c.host_ns_fd = c.host_nl_fd = -EBADF;
        if (cfg->net) {
                /* a link of that name that is not ours must stay: refuse
                 * before the child could fail on it (an undo deletes the
                 * name) */
                if (if_nametoindex(cfg->net->peer) > 0)
                        return err_set(e, -EEXIST, "network: the host end %s exists already",
                                       cfg->net->peer);
                host_ns = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
                if (host_ns < 0)
                        return err_set(e, -errno, "open /proc/self/ns/net: %m");
                host_nl = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE);
                if (host_nl < 0)
                        return err_set(e, -errno, "netlink socket: %m");
                c.has_net = true;
                c.net = *cfg->net;
                c.host_ns_fd = host_ns;
                c.host_nl_fd = host_nl;
        }
        c.n_cg_fds = rt_cgroup_join_fds(sb->cg, c.cg_fds, ELEMENTSOF(c.cg_fds));
        c.unshare_cgroupns = rt_cgroup_mode_of(sb->cg) == RT_CGROUP_V1;
        snprintf(c.env_id, sizeof(c.env_id), "WARREN_SANDBOX_ID=%s", cfg->id);

        /* the park channel is a socket: the claim passes fds over it */
        int errpipe[2] = {-EBADF, -EBADF}, parksock[2] = {-EBADF, -EBADF};
        if (park && socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, parksock) < 0)
                return err_set(e, -errno, "socketpair: %m");
        c.park_fd = parksock[0];
        if (pipe2(errpipe, O_CLOEXEC) < 0) {
                int r2 = -errno;
                close_pair(parksock);
                return err_set(e, r2, "pipe: %m");
        }
        c.err_fd = errpipe[1];

        struct rt_clone_args args = {
                .flags = CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWUTS | CLONE_NEWIPC | CLONE_NEWNET |
                         CLONE_PIDFD,
                .exit_signal = 0, /* no SIGCHLD: waitpid(-1) elsewhere cannot reap init */
        };
        int pidfd = -EBADF;
        args.pidfd = (uint64_t) (uintptr_t) &pidfd;
        if (rt_cgroup_mode_of(sb->cg) == RT_CGROUP_V2) {
                args.flags |= CLONE_NEWCGROUP | CLONE_INTO_CGROUP;
                args.cgroup = (uint64_t) rt_cgroup_dirfd(sb->cg);
        }

        sigset_t all, old;
        sigfillset(&all);
        pthread_sigmask(SIG_SETMASK, &all, &old);
        dumpable_hold();
        long pid = sys_clone3(&args);
        if (pid == 0)
                rt_child_run(&c); /* never returns */
        int clone_errno = errno;
        dumpable_release();
        pthread_sigmask(SIG_SETMASK, &old, NULL);
        closep(&errpipe[1]);
        closep(&parksock[0]);
        start_msg_done(&msg); /* the child has its copies */
        if (pid < 0) {
                close_pair(errpipe);
                close_pair(parksock);
                return err_set(e, -clone_errno, "clone3: %s", strerror(clone_errno));
        }
        sb->pid = (pid_t) pid;
        sb->pidfd = pidfd;
        if (cfg->net) {
                sb->has_net = true;
                sb->net = *cfg->net;
        }
        /* now, while the child cannot be in execve (a /proc/<pid>/stat read
         * waits for an exec to finish) */
        (void) rt_proc_start_time(sb->pid, &sb->start_time);
        /* the child has its copies; nothing else joins */
        rt_cgroup_close_join_fds(sb->cg);
        if (park) {
                sb->err_rfd = errpipe[0];
                sb->park_fd = parksock[1];
                return wait_parked(sb, e);
        }
        return wait_exec(sb, errpipe[0], e);
}

/* Prestart: wait until the child has prepared everything it can and
 * parked (it reports a struct wr_err with code 0), or failed. */
static int wait_parked(struct rt_sandbox *sb, struct wr_err *e) {
        struct wr_err rep;
        size_t got = 0;
        while (got < sizeof(rep)) {
                ssize_t n = read(sb->err_rfd, (char *) &rep + got, sizeof(rep) - got);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n <= 0)
                        break;
                got += (size_t) n;
        }
        if (got == sizeof(rep) && rep.code == 0)
                return 0;
        /* it failed (or died): collect it */
        closep(&sb->park_fd);
        siginfo_t si;
        (void) RETRY_EINTR(waitid(P_PIDFD, (id_t) sb->pidfd, &si, WEXITED | __WALL));
        sb->reaped = true;
        sb->pid = 0;
        if (got != sizeof(rep) || rep.code > 0)
                return err_set(e, -EIO, "sandbox child failed without a report");
        rep.msg[sizeof(rep.msg) - 1] = 0;
        if (e)
                *e = rep;
        return rep.code;
}

/* Wait until the child exec'd init (the CLOEXEC error pipe closes) or
 * reported a failure (then reap it). Closes errfd. */
static int wait_exec(struct rt_sandbox *sb, int errfd, struct wr_err *e) {
        struct wr_err child_err;
        size_t got = 0;
        while (got < sizeof(child_err)) {
                ssize_t n = read(errfd, (char *) &child_err + got, sizeof(child_err) - got);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n <= 0)
                        break;
                got += (size_t) n;
        }
        close(errfd);
        if (got == 0)
                return 0; /* the pipe closed on exec: init runs */

        /* the child failed and _exit()s; reap it */
        siginfo_t si;
        (void) RETRY_EINTR(waitid(P_PIDFD, (id_t) sb->pidfd, &si, WEXITED | __WALL));
        sb->reaped = true;
        sb->pid = 0;
        if (got != sizeof(child_err) || child_err.code >= 0)
                return err_set(e, -EIO, "sandbox child failed without a report");
        child_err.msg[sizeof(child_err.msg) - 1] = 0;
        if (e)
                *e = child_err;
        return child_err.code;
}

static int sandbox_make(const struct rt_sandbox_config *cfg, bool park, struct rt_sandbox **ret,
                        struct wr_err *e) {
        _cleanup_(rt_sandbox_freep) struct rt_sandbox *sb = calloc(1, sizeof(*sb));
        if (!sb)
                return err_set(e, -ENOMEM, "create sandbox: out of memory");
        sb->pidfd = -EBADF;
        sb->park_fd = sb->err_rfd = sb->disk_fd = -EBADF;
        if (cfg && cfg->id && cfg->dir) {
                sb->id = strdup(cfg->id);
                sb->dir = strdup(cfg->dir);
                sb->ctl_path = join(cfg->dir, "ctl.sock");
                if (!sb->id || !sb->dir || !sb->ctl_path)
                        return err_set(e, -ENOMEM, "create sandbox: out of memory");
        }
        int r = create(cfg, sb, park, e);
        if (r < 0) {
                struct wr_err ignored = {0};
                /* the child never got past exec, so nothing but init runs;
                 * undo exactly what this call made */
                if (!sb->reaped && sb->pidfd >= 0) {
                        (void) rt_sandbox_kill(sb, SIGKILL);
                        siginfo_t si;
                        (void) RETRY_EINTR(
                                waitid(P_PIDFD, (id_t) sb->pidfd, &si, WEXITED | __WALL));
                        sb->reaped = true;
                }
                /* the child may have made the veth before it failed: its
                 * netns is gone now, but the kernel takes the link down
                 * in the background; the name must be free again now */
                if (sb->has_net)
                        (void) rt_net_link_delete(sb->net.peer, &ignored);
                /* the layer's loop device clears itself with its last user */
                rt_disk_drop(&sb->disk_fd);
                if (sb->cg)
                        (void) rt_cgroup_remove(sb->cg, &ignored);
                if (sb->made & MADE_DIR) {
                        (void) remove_dir(sb->dir);
                } else if (sb->made) {
                        _cleanup_close_ int dfd = open(sb->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
                        for (size_t i = 0; dfd >= 0 && i < ELEMENTSOF(subdirs); i++)
                                if (sb->made & (MADE_SUB << i))
                                        (void) rm_rf_at(dfd, subdirs[i].name);
                        if (dfd >= 0 && (sb->made & MADE_SOCK))
                                (void) unlinkat(dfd, "ctl.sock", 0);
                        if (dfd >= 0 && (sb->made & MADE_DISK))
                                (void) unlinkat(dfd, RT_DISK_IMAGE, 0);
                }
                return err_prefix(e, r, "create sandbox");
        }
        sb->made = 0;
        *ret = TAKE_PTR(sb);
        return 0;
}

int rt_sandbox_create(const struct rt_sandbox_config *cfg, struct rt_sandbox **ret,
                      struct wr_err *e) {
        return sandbox_make(cfg, false, ret, e);
}

int rt_sandbox_prestart(const struct rt_sandbox_config *cfg, struct rt_sandbox **ret,
                        struct wr_err *e) {
        return sandbox_make(cfg, true, ret, e);
}

/* Send the whole message over the park socket, the fds with its first
 * byte. Returns 0 or negative errno (-EPIPE: the child is gone). */
static int park_send(int fd, const struct start_msg *m) {
        size_t off = 0;
        if (m->n_fds > 0) {
                union {
                        char buf[CMSG_SPACE(sizeof(int) * RT_MOUNTS_MAX)];
                        struct cmsghdr align;
                } u;
                memset(&u, 0, sizeof(u));
                struct iovec iov = {.iov_base = m->buf, .iov_len = m->len};
                struct msghdr mh = {.msg_iov = &iov,
                                    .msg_iovlen = 1,
                                    .msg_control = u.buf,
                                    .msg_controllen = CMSG_SPACE(sizeof(int) * m->n_fds)};
                struct cmsghdr *cm = CMSG_FIRSTHDR(&mh);
                cm->cmsg_level = SOL_SOCKET;
                cm->cmsg_type = SCM_RIGHTS;
                cm->cmsg_len = CMSG_LEN(sizeof(int) * m->n_fds);
                memcpy(CMSG_DATA(cm), m->fds, sizeof(int) * m->n_fds);
                ssize_t n = RETRY_EINTR(sendmsg(fd, &mh, MSG_NOSIGNAL));
                if (n < 0)
                        return -errno;
                off = (size_t) n;
        }
        while (off < m->len) {
                ssize_t n = RETRY_EINTR(send(fd, m->buf + off, m->len - off, MSG_NOSIGNAL));
                if (n < 0)
                        return -errno;
                off += (size_t) n;
        }
        return 0;
}

/* Has the parked child already ended (failed while preparing, or killed)?
 * Then collect its report, reap it and return -ESTALE. */
static int park_check(struct rt_sandbox *sb, struct wr_err *e) {
        struct pollfd p = {.fd = sb->err_rfd, .events = POLLIN};
        int n = RETRY_EINTR(poll(&p, 1, 0));
        if (n <= 0)
                return 0; /* nothing to read: still parked */
        int errfd = TAKE_FD(sb->err_rfd);
        closep(&sb->park_fd);
        struct wr_err child = {0};
        int r = wait_exec(sb, errfd, &child);
        if (r == 0) { /* EOF without a report: it was killed */
                siginfo_t si;
                (void) RETRY_EINTR(waitid(P_PIDFD, (id_t) sb->pidfd, &si, WEXITED | __WALL));
                sb->reaped = true;
                sb->pid = 0;
                return err_set(e, -ESTALE, "start sandbox: the prestarted sandbox is gone");
        }
        return err_set(e, -ESTALE, "start sandbox: the prestarted sandbox failed: %s", child.msg);
}

int rt_sandbox_start(struct rt_sandbox *sb, const struct rt_sandbox_config *cfg, struct wr_err *e) {
        int r = rt_sandbox_start_send(sb, cfg, e);
        return r < 0 ? r : rt_sandbox_start_wait(sb, e);
}

int rt_sandbox_start_send(struct rt_sandbox *sb, const struct rt_sandbox_config *cfg,
                          struct wr_err *e) {
        int r;
        if (sb->remote)
                return err_set(e, -EPERM, "sandbox %s is warren-priv's: start it there", sb->id);
        if (sb->park_fd < 0 || sb->err_rfd < 0)
                return err_set(e, -EINVAL, "start sandbox: not a prestarted sandbox");
        if ((r = park_check(sb, e)) < 0)
                return r;
        if ((r = config_check(cfg, true, e)) < 0)
                return err_prefix(e, r, "start sandbox");
        if (!streq(cfg->id, sb->id) || !streq(cfg->dir, sb->dir))
                return err_set(e, -EINVAL, "start sandbox: id or dir differs from the prestart");
        /* the writable layer is the prestart's (attached in the child) */
        if (cfg->limits.disk_bytes != sb->disk_bytes)
                return err_set(e, -EINVAL,
                               "start sandbox: disk size %llu differs from the prestart's %llu",
                               (unsigned long long) cfg->limits.disk_bytes,
                               (unsigned long long) sb->disk_bytes);
        _cleanup_(start_msg_done) struct start_msg msg = {0};
        if ((r = start_build(cfg, sb->has_net ? &sb->net : NULL, -1, &msg, e)) < 0)
                return err_prefix(e, r, "start sandbox");
        r = park_send(sb->park_fd, &msg);
        closep(&sb->park_fd);
        if (r < 0) {
                /* the child may have failed before reading: its report is
                 * the better error */
                int r2 = rt_sandbox_start_wait(sb, e);
                return r2 < 0 ? r2 : err_set(e, r, "start sandbox: send config: %s", strerror(-r));
        }
        /* while the child mounts: nothing runs in the sandbox before the
         * caller's rt_sandbox_start_wait() and its first spawn */
        bool want_limits =
                cfg->limits.memory_bytes || cfg->limits.cpu_millicores || cfg->limits.pids_max;
        if (!cfg->unlimited && want_limits &&
            (r = rt_cgroup_set_limits(sb->cg, &cfg->limits, e)) < 0)
                return err_prefix(e, r, "start sandbox: limits");
        return 0;
}

int rt_sandbox_start_wait(struct rt_sandbox *sb, struct wr_err *e) {
        if (sb->err_rfd < 0)
                return sb->reaped ? err_set(e, -ESRCH, "start sandbox: the child is gone") : 0;
        int errfd = TAKE_FD(sb->err_rfd);
        int r = wait_exec(sb, errfd, e);
        return r < 0 ? err_prefix(e, r, "start sandbox") : 0;
}

/* ---- accessors ---- */

struct rt_cgroup *rt_sandbox_cgroup(const struct rt_sandbox *sb) {
        return sb->destroyed ? NULL : sb->cg;
}

pid_t rt_sandbox_pid(const struct rt_sandbox *sb) {
        return sb->reaped ? 0 : sb->pid;
}
int rt_sandbox_pidfd(const struct rt_sandbox *sb) {
        return sb->pidfd;
}
const char *rt_sandbox_ctl_path(const struct rt_sandbox *sb) {
        return sb->ctl_path;
}
const char *rt_sandbox_id(const struct rt_sandbox *sb) {
        return sb->id;
}
const char *rt_sandbox_dir(const struct rt_sandbox *sb) {
        return sb->dir;
}

int rt_upper_open_at(int dirfd, const char *dir, int *disk_fd, struct wr_err *e) {
        if (*disk_fd < 0) {
                int r = rt_disk_open(dirfd, dir, e);
                if (r >= 0)
                        *disk_fd = r;
                else if (r != -ENOENT)
                        return r;
        }
        int base = *disk_fd >= 0 ? *disk_fd : dirfd;
        const char *name = *disk_fd >= 0 ? RT_DISK_UPPER : "upper";
        char alt[16];
        snprintf(alt, sizeof(alt), "%s.1", name);
        int fd = openat(base, alt, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0 && errno == ENOENT)
                fd = openat(base, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0)
                return err_set(e, -errno, "open the upper dir of %s: %m", dir);
        return fd;
}

int rt_sandbox_upper_open(struct rt_sandbox *sb, struct wr_err *e) {
        if (sb->destroyed || !sb->dir)
                return err_set(e, -ESRCH, "sandbox %s is gone", sb->id);
        _cleanup_close_ int dirfd = open(sb->dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (dirfd < 0)
                return err_set(e, -errno, "open %s: %m", sb->dir);
        return rt_upper_open_at(dirfd, sb->dir, &sb->disk_fd, e);
}

int rt_sandbox_usage(const struct rt_sandbox *sb, struct rt_usage *u) {
        if (!sb->cg)
                return -ENOENT;
        return rt_cgroup_usage(sb->cg, u);
}

int rt_sandbox_oom_kills(const struct rt_sandbox *sb, uint64_t *ret) {
        if (!sb->cg)
                return -ENOENT;
        return rt_cgroup_oom_kills(sb->cg, ret);
}

/* ---- signals and teardown ---- */

int rt_sandbox_freeze(struct rt_sandbox *sb, bool on, struct wr_err *e) {
        if (sb->remote)
                return err_set(e, -EPERM, "sandbox %s is warren-priv's: freeze it there", sb->id);
        if (!sb->cg || sb->destroyed)
                return err_set(e, -ESRCH, "sandbox %s is gone", sb->id);
        int r = rt_cgroup_freeze(sb->cg, on);
        if (r == -EOPNOTSUPP)
                return err_setx(e, r, WR_STATUS_FAILED_PRECONDITION, WR_FAULT_SERVICE,
                                "pause: this host has no cgroup freezer (cgroup v1 freezer "
                                "controller or cgroup v2)");
        if (r < 0)
                return err_set(e, r, "%s sandbox %s: %s", on ? "pause" : "resume", sb->id,
                               strerror(-r));
        return 0;
}

int rt_sandbox_frozen(const struct rt_sandbox *sb) {
        return sb->cg && !sb->destroyed ? rt_cgroup_frozen(sb->cg) : 0;
}

int rt_sandbox_kill(struct rt_sandbox *sb, int sig) {
        if (sb->remote)
                return -EPERM;
        if (sig == SIGKILL) {
                if (sb->cg)
                        (void) rt_cgroup_kill(sb->cg, SIGKILL);
                if (!sb->reaped && sb->pidfd >= 0)
                        (void) sys_pidfd_send_signal(sb->pidfd, SIGKILL);
                return 0;
        }
        if (sb->reaped || sb->pidfd < 0)
                return -ESRCH;
        if (sys_pidfd_send_signal(sb->pidfd, sig) < 0)
                return -errno;
        return 0;
}

int rt_sandbox_reap(struct rt_sandbox *sb, int *status) {
        if (!sb->reaped) {
                if (sb->pidfd < 0)
                        return -EBADF;
                if (sb->attached) {
                        /* not our child: its exit status is its parent's */
                        struct pollfd p = {.fd = sb->pidfd, .events = POLLIN};
                        int n = RETRY_EINTR(poll(&p, 1, 0));
                        if (n < 0)
                                return -errno;
                        if (n == 0)
                                return 0;
                        sb->reaped = true;
                        sb->status = SIGKILL;
                        if (status)
                                *status = sb->status;
                        return 1;
                }
                siginfo_t si = {0};
                if (RETRY_EINTR(
                            waitid(P_PIDFD, (id_t) sb->pidfd, &si, WEXITED | WNOHANG | __WALL)) < 0)
                        return -errno;
                if (si.si_pid == 0)
                        return 0;
                sb->reaped = true;
                sb->status = si.si_code == CLD_EXITED ? W_EXITCODE(si.si_status, 0)
                                                      : (si.si_status & 0x7f);
        }
        if (status)
                *status = sb->status;
        return 1;
}

void rt_sandbox_net_disown(struct rt_sandbox *sb) {
        sb->has_net = false;
}

int rt_sandbox_kill_wait(struct rt_sandbox *sb, struct wr_err *e) {
        if (sb->destroyed)
                return 0;
        if (sb->remote)
                return err_set(e, -EPERM, "sandbox %s is warren-priv's: kill it there", sb->id);
        if (!sb->reaped && sb->pidfd >= 0 && sb->attached) {
                (void) rt_sandbox_kill(sb, SIGKILL);
                /* not our child: wait (bounded) until the pidfd says it died */
                struct pollfd p = {.fd = sb->pidfd, .events = POLLIN};
                (void) RETRY_EINTR(poll(&p, 1, 5000));
                sb->reaped = true;
                sb->status = SIGKILL;
        }
        if (!sb->reaped && sb->pidfd >= 0) {
                /* init is PID 1 of the sandbox's pid namespace: its death
                 * kills every process in it, so a SIGKILL through its pidfd
                 * is enough (the cgroup-wide freeze-kill below is only for
                 * stragglers outside the namespace: helpers beside it). A
                 * paused sandbox is thawed, or SIGKILL would wait for it. */
                (void) sys_pidfd_send_signal(sb->pidfd, SIGKILL);
                if (sb->cg && rt_cgroup_frozen(sb->cg) == 1)
                        (void) rt_cgroup_freeze(sb->cg, false);
                /* SIGKILLed: the pid namespace dies promptly, init last */
                siginfo_t si = {0};
                if (RETRY_EINTR(waitid(P_PIDFD, (id_t) sb->pidfd, &si, WEXITED | __WALL)) < 0 &&
                    errno != ECHILD)
                        return err_set(e, -errno, "destroy sandbox %s: reap init: %m", sb->id);
                sb->reaped = true;
                sb->status = si.si_code == CLD_EXITED ? W_EXITCODE(si.si_status, 0)
                                                      : (si.si_status & 0x7f);
        }
        return 0;
}

int rt_sandbox_destroy(struct rt_sandbox *sb, struct wr_err *e) {
        int r;
        if (sb->destroyed)
                return 0;
        if (sb->remote)
                return err_set(e, -EPERM, "sandbox %s is warren-priv's: destroy it there", sb->id);
        if ((r = rt_sandbox_kill_wait(sb, e)) < 0)
                return r;
        if (sb->has_net) {
                /* the netns dies with init, but the kernel takes its links
                 * down in the background: delete the host end now, so that
                 * nothing of the sandbox lingers and its address can be
                 * given out again at once */
                r = rt_net_link_delete(sb->net.peer, e);
                if (r < 0)
                        return err_prefix(e, r, "destroy sandbox %s", sb->id);
                sb->has_net = false;
        }
        if (sb->cg) {
                /* stragglers (none expected once the pid namespace is gone) */
                if (rt_cgroup_nprocs(sb->cg) > 0)
                        (void) rt_cgroup_kill(sb->cg, SIGKILL);
                r = rt_cgroup_remove(sb->cg, e);
                if (r < 0)
                        return err_prefix(e, r, "destroy sandbox %s", sb->id);
        }
        /* the writable layer's superblock (and loop device) goes with
         * the sandbox's mount namespace and this last reference; its image
         * with the dir */
        rt_disk_drop(&sb->disk_fd);
        if (sb->dir) {
                _cleanup_free_ char *rootfs = join(sb->dir, "rootfs");
                /* the overlay lives in the sandbox's own mount namespace; a
                 * host-side mount here would be a leftover of something else */
                if (rootfs && umount2(rootfs, MNT_DETACH | UMOUNT_NOFOLLOW) < 0 &&
                    errno != EINVAL && errno != ENOENT)
                        return err_set(e, -errno, "destroy sandbox %s: unmount %s: %m", sb->id,
                                       rootfs);
                r = remove_dir(sb->dir);
                if (r < 0)
                        return err_set(e, r, "destroy sandbox %s: remove %s: %s", sb->id, sb->dir,
                                       strerror(-r));
        }
        closep(&sb->pidfd);
        sb->destroyed = true;
        return 0;
}

const char *rt_sandbox_net_peer(const struct rt_sandbox *sb) {
        return sb->has_net ? sb->net.peer : NULL;
}

int rt_sandbox_release(struct rt_sandbox *sb, struct wr_err *e) {
        if (sb->destroyed)
                return 0;
        int r = sb->remote ? 0 : rt_sandbox_kill_wait(sb, e);
        if (r < 0)
                return r;
        /* the writable layer's superblock goes with this last reference
         * (before its image is removed), the cgroups' fds before their
         * dirs are */
        rt_disk_drop(&sb->disk_fd);
        rt_cgroup_free(sb->cg);
        sb->cg = NULL;
        closep(&sb->pidfd);
        sb->has_net = false;
        sb->destroyed = true;
        return 0;
}

int rt_sandbox_cleanup(const char *id, const char *dir, enum rt_cgroup_mode mode,
                       struct wr_err *e) {
        struct rt_cgroup *cg = NULL;
        struct wr_err ignored = {0};
        int r = rt_cgroup_open(id, mode, &cg, &ignored);
        if (r >= 0) {
                /* kill until empty: a fork racing the first pass is frozen by
                 * the next one */
                for (int i = 0; i < 100 && rt_cgroup_nprocs(cg) > 0; i++) {
                        (void) rt_cgroup_kill(cg, SIGKILL);
                        struct timespec ts = {0, 1000000};
                        nanosleep(&ts, NULL);
                }
                r = rt_cgroup_remove(cg, e);
                rt_cgroup_free(cg);
                if (r < 0)
                        return err_prefix(e, r, "clean up sandbox %s", id);
        } else if (r != -ENOENT) {
                return err_set(e, r, "clean up sandbox %s: %s", id, ignored.msg);
        }
        if (dir) {
                r = remove_dir(dir);
                if (r < 0)
                        return err_set(e, r, "clean up sandbox %s: remove %s: %s", id, dir,
                                       strerror(-r));
        }
        return 0;
}

/* ---- re-attaching after a daemon restart ---- */

/* Field 22 of /proc/<pid>/stat (start time in clock ticks after boot). */
int rt_proc_start_time(pid_t pid, uint64_t *ret) {
        char path[64], buf[1024];
        snprintf(path, sizeof(path), "/proc/%d/stat", (int) pid);
        _cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
                return errno == ENOENT ? -ESRCH : -errno;
        ssize_t n = read(fd, buf, sizeof(buf) - 1);
        if (n <= 0)
                return n < 0 ? -errno : -EIO;
        buf[n] = 0;
        /* comm may hold spaces and parentheses: skip to the last ')' */
        char *p = strrchr(buf, ')');
        if (!p)
                return -EIO;
        p++;
        /* fields 3.. follow; start time is field 22 */
        for (int field = 3; field < 22; field++) {
                p = strchr(p + 1, ' ');
                if (!p)
                        return -EIO;
        }
        char *end;
        errno = 0;
        unsigned long long v = strtoull(p + 1, &end, 10);
        if (errno || end == p + 1)
                return -EIO;
        *ret = v;
        return 0;
}

int rt_sandbox_start_time(const struct rt_sandbox *sb, uint64_t *ret) {
        if (sb->reaped || sb->pid <= 0)
                return -ESRCH;
        if (sb->start_time) {
                *ret = sb->start_time;
                return 0;
        }
        return rt_proc_start_time(sb->pid, ret);
}

/* Is pid a member of the sandbox's cgroup? /proc/<pid>/cgroup read from
 * the host's cgroup namespace lists full paths ending in /warren/<id>. */
static int pid_in_sandbox_cgroup(pid_t pid, const char *id) {
        char path[64], line[PATH_MAX + 64], want[128];
        snprintf(path, sizeof(path), "/proc/%d/cgroup", (int) pid);
        snprintf(want, sizeof(want), "/" RT_CGROUP_PARENT "/%s", id);
        FILE *f = fopen(path, "re");
        if (!f)
                return errno == ENOENT ? -ESRCH : -errno;
        size_t wl = strlen(want);
        int found = 0;
        while (!found && fgets(line, sizeof(line), f)) {
                size_t l = strcspn(line, "\n");
                line[l] = 0;
                found = l >= wl && streq(line + l - wl, want);
        }
        fclose(f);
        return found;
}

int rt_sandbox_attach(const char *id, const char *dir, pid_t pid, uint64_t start_time,
                      enum rt_cgroup_mode mode, struct rt_sandbox **ret, struct wr_err *e) {
        if (!id || !rt_id_valid(id) || !dir || pid <= 0)
                return err_set(e, -EINVAL, "attach sandbox: invalid id, dir or pid");
        _cleanup_(rt_sandbox_freep) struct rt_sandbox *sb = calloc(1, sizeof(*sb));
        if (!sb)
                return err_set(e, -ENOMEM, "attach sandbox: out of memory");
        sb->pidfd = -EBADF;
        sb->park_fd = sb->err_rfd = sb->disk_fd = -EBADF;
        sb->attached = true;
        sb->id = strdup(id);
        sb->dir = strdup(dir);
        sb->ctl_path = join(dir, "ctl.sock");
        if (!sb->id || !sb->dir || !sb->ctl_path)
                return err_set(e, -ENOMEM, "attach sandbox: out of memory");
        sb->pidfd = (int) syscall(SYS_pidfd_open, pid, 0);
        if (sb->pidfd < 0)
                return err_set(e, errno == ESRCH ? -ESRCH : -errno,
                               "attach sandbox %s: init (pid %d) is gone: %m", id, (int) pid);
        /* The pidfd pins the process from now on; check that the pid was not
         * reused by something else before it was opened. */
        uint64_t st = 0;
        int r = rt_proc_start_time(pid, &st);
        if (r < 0)
                return err_set(e, r, "attach sandbox %s: init (pid %d) is gone", id, (int) pid);
        if (start_time && st != start_time)
                return err_set(e, -ESRCH,
                               "attach sandbox %s: pid %d is another process now (start time "
                               "%llu, recorded %llu)",
                               id, (int) pid, (unsigned long long) st,
                               (unsigned long long) start_time);
        r = pid_in_sandbox_cgroup(pid, id);
        if (r <= 0)
                return err_set(e, r < 0 ? r : -ESRCH,
                               "attach sandbox %s: pid %d is not in the sandbox's cgroup", id,
                               (int) pid);
        if (sys_pidfd_send_signal(sb->pidfd, 0) < 0)
                return err_set(e, -ESRCH, "attach sandbox %s: init (pid %d) exited", id, (int) pid);
        r = rt_cgroup_open(id, mode, &sb->cg, e);
        if (r < 0)
                return err_prefix(e, r, "attach sandbox %s", id);
        rt_cgroup_close_join_fds(sb->cg);
        sb->pid = pid;
        sb->start_time = st;
        *ret = TAKE_PTR(sb);
        return 0;
}

/* ---- a handle of a sandbox warren-priv holds (docs/privsep.md) ---- */

int rt_sandbox_adopt(const char *id, const char *dir, pid_t pid, uint64_t start_time, int pidfd,
                     int ctl_fd, const struct rt_net *net, enum rt_cgroup_mode mode,
                     struct rt_sandbox **ret, struct wr_err *e) {
        _cleanup_close_ int fd = pidfd, cfd = ctl_fd;
        if (!id || !rt_id_valid(id) || !dir || pid <= 1 || pidfd < 0 || !start_time)
                return err_set(e, -EINVAL, "adopt sandbox: invalid id, dir, pid or pidfd");
        _cleanup_(rt_sandbox_freep) struct rt_sandbox *sb = calloc(1, sizeof(*sb));
        if (!sb)
                return err_set(e, -ENOMEM, "adopt sandbox: out of memory");
        sb->pidfd = -EBADF;
        sb->park_fd = sb->err_rfd = sb->disk_fd = -EBADF;
        sb->attached = sb->remote = true;
        sb->ctl_fd = -EBADF;
        sb->id = strdup(id);
        sb->dir = strdup(dir);
        sb->ctl_path = join(dir, "ctl.sock");
        if (!sb->id || !sb->dir || !sb->ctl_path)
                return err_set(e, -ENOMEM, "adopt sandbox: out of memory");
        /* the pidfd names the process for good; its start time says it is
         * the one warren-priv named (a pid reused before pidfd_open there
         * would have failed its own checks) */
        uint64_t st = 0;
        int r = rt_proc_start_time(pid, &st);
        if (r < 0 || st != start_time)
                return err_set(e, -ESRCH, "adopt sandbox %s: pid %d is gone or another process", id,
                               (int) pid);
        /* read-only use: usage, OOM kills, frozen (cgroup files are 0644) */
        r = rt_cgroup_open(id, mode, &sb->cg, e);
        if (r < 0)
                return err_prefix(e, r, "adopt sandbox %s", id);
        rt_cgroup_close_join_fds(sb->cg);
        if (net) {
                sb->net = *net;
                sb->has_net = true;
        }
        sb->pid = pid;
        sb->start_time = st;
        sb->pidfd = TAKE_FD(fd);
        sb->ctl_fd = TAKE_FD(cfd);
        *ret = TAKE_PTR(sb);
        return 0;
}

int rt_sandbox_ctl_take(struct rt_sandbox *sb) {
        if (!sb->remote || sb->ctl_fd < 0)
                return -ENOENT;
        return TAKE_FD(sb->ctl_fd);
}

bool rt_sandbox_remote(const struct rt_sandbox *sb) {
        return sb->remote;
}
