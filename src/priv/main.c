/* SPDX-License-Identifier: Apache-2.0 */
/* warren-priv: the privileged half of warrend (docs/privsep.md). Started as
 * root by warrend with --privsep:
 *
 *   warren-priv --sock-fd N --state-dir DIR [--init PATH]
 *               [--log-level debug|info|warn|error] [--log-format text|json]
 *
 * --init: the warren-init it runs as each sandbox's init (phase 2,
 * lifecycle.c; without it the lifecycle requests are refused).
 * --sock-fd: its end of a SOCK_SEQPACKET socketpair whose other end is
 * warrend's (priv-proto.h); --state-dir: warrend's state dir, the only
 * tree a request's path may name (opened once, every path resolved
 * beneath it). It serves the closed message set of priv-proto.h (each
 * request on a worker thread of its own, up to 8 at once, never two for
 * the same sandbox at once; answers matched by hdr.id, in the order they
 * finish) and refuses everything else with nothing
 * done (the fds such a datagram carried are closed). It keeps only the
 * capabilities its message set needs (keep_caps), with no_new_privs and
 * not dumpable. Exit status: 0 when
 * the socket closes (warrend is gone), 2 on a usage error. Sandboxes do
 * not depend on it: it is their inits' parent (phase 2), but its death
 * ends none (they are reparented to the host's init; warrend starts
 * another warren-priv and names them to it with SANDBOX_ATTACH); only the
 * warm pool's parked children end with it. */

#include <dirent.h>
#include <errno.h>
#include <stddef.h>
#include <fcntl.h>
#include <getopt.h>
#include <linux/openat2.h>
#include <arpa/inet.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/capability.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "basic/log.h"
#include "basic/rmrf.h"
#include "priv/deny.h"
#include "priv/nft.h"
#include "priv/priv-internal.h"
#include "priv/priv-proto.h"
#include "runtime/runtime.h"

/* The capabilities the message set of this version needs, and no more
 * (the set grows with the table, docs/privsep.md): removing trees owned by
 * a sandbox's uid range (DAC_OVERRIDE, DAC_READ_SEARCH, FOWNER for the
 * mode fix-ups), SIGKILL to its processes (KILL), deleting veths
 * (NET_ADMIN). Root's own files (cgroups, the state dir) need none. */
static const cap_value_t keep_caps[] = {
        CAP_DAC_OVERRIDE,
        CAP_DAC_READ_SEARCH,
        CAP_FOWNER,
        CAP_KILL,
        CAP_NET_ADMIN,
        /* phase 2, the lifecycle: clone into new namespaces, mounts and
         * the mount table (SYS_ADMIN), uid/gid maps and the sandbox's ids
         * (SETUID, SETGID), pivot_root
         * (SYS_CHROOT), ownership of what the runtime makes (CHOWN,
         * FSETID), device nodes of /dev (MKNOD), the user namespace's
         * /proc/<pid>/ns/user of a non-dumpable helper (SYS_PTRACE: the
         * runtime's creates run non-dumpable), and what the sandbox
         * itself keeps (runtime/policy.c: SETPCAP, NET_BIND_SERVICE;
         * a capability must be in the bounding set to be kept). Phase 3:
         * NET_CONNECT joins a sandbox's network namespace (setns wants
         * SYS_ADMIN over it and over our own user namespace); the nft
         * requests need only NET_ADMIN. */
        CAP_SYS_ADMIN,
        CAP_SETUID,
        CAP_SETGID,
        CAP_SYS_CHROOT,
        CAP_CHOWN,
        CAP_FSETID,
        CAP_MKNOD,
        CAP_SETPCAP,
        CAP_NET_BIND_SERVICE,
        CAP_SYS_PTRACE,
};

/* Keep only keep_caps (effective, permitted; the bounding set too, so no
 * exec gets more), no ambient or inheritable ones, no_new_privs, not
 * dumpable. */
static int confine_caps(void) {
        for (cap_value_t c = 0; c <= CAP_LAST_CAP; c++) {
                bool keep = false;
                for (size_t i = 0; i < sizeof(keep_caps) / sizeof(keep_caps[0]); i++)
                        keep |= keep_caps[i] == c;
                if (!keep && prctl(PR_CAPBSET_DROP, c, 0, 0, 0) < 0 && errno != EINVAL)
                        return -errno;
        }
        if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) < 0)
                return -errno;
        cap_t caps = cap_init();
        if (!caps)
                return -errno;
        int n = (int) (sizeof(keep_caps) / sizeof(keep_caps[0]));
        int r = 0;
        if (cap_set_flag(caps, CAP_PERMITTED, n, keep_caps, CAP_SET) < 0 ||
            cap_set_flag(caps, CAP_EFFECTIVE, n, keep_caps, CAP_SET) < 0 || cap_set_proc(caps) < 0)
                r = -errno;
        cap_free(caps);
        if (r < 0)
                return r;
        if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0 || prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) < 0)
                return -errno;
        return 0;
}

static struct {
        int sock, state_fd;
        uint64_t served[PRIV_SERVED_MAX], served_total, refused;
} srv = {.sock = -EBADF, .state_fd = -EBADF};

/* Open dir (a path checked by priv_path_check) below the state dir as an
 * O_DIRECTORY fd: no symlink, no magic link, nothing above the state dir. */
static int open_beneath(const char *dir, int flags);
int priv_open_beneath(const char *path, int flags) {
        return open_beneath(path, flags);
}
static int open_beneath(const char *dir, int flags) {
        struct open_how how = {
                .flags = (uint64_t) (flags | O_DIRECTORY | O_CLOEXEC),
                .resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS,
        };
        int fd = (int) syscall(SYS_openat2, srv.state_fd, dir, &how, sizeof(how));
        return fd < 0 ? -errno : fd;
}

static void handles_forget(const char *id);

static void do_cleanup(const struct priv_cleanup *c, struct priv_result *res) {
        struct wr_err e = {0};
        handles_forget(c->id);
        /* the cgroups first: nothing runs that could still write to dir */
        int r = rt_sandbox_cleanup(c->id, NULL, (enum rt_cgroup_mode) c->cgroup_mode, &e);
        if (r < 0) {
                res->err = -r;
                snprintf(res->msg, sizeof(res->msg), "%s", e.msg);
                return;
        }
        char parent[PRIV_PATH_MAX];
        snprintf(parent, sizeof(parent), "%s", c->dir);
        char *slash = strrchr(parent, '/'); /* there is one: at least two components */
        *slash = 0;
        const char *base = slash + 1;
        int pfd = open_beneath(parent, O_RDONLY);
        if (pfd == -ENOENT)
                return; /* nothing there */
        if (pfd < 0) {
                res->err = -pfd;
                snprintf(res->msg, sizeof(res->msg), "clean up sandbox %s: open %s: %s", c->id,
                         parent, strerror(-pfd));
                return;
        }
        r = rm_rf_at(pfd, base);
        close(pfd);
        if (r < 0) {
                res->err = -r;
                snprintf(res->msg, sizeof(res->msg), "clean up sandbox %s: remove %s: %s", c->id,
                         c->dir, strerror(-r));
        }
}

static void do_link_delete(const struct priv_link *l, struct priv_result *res) {
        struct wr_err e = {0};
        int r = rt_net_link_delete(l->name, &e);
        if (r < 0) {
                res->err = -r;
                snprintf(res->msg, sizeof(res->msg), "%s", e.msg);
        } else {
                res->value = r;
        }
}

/* Requests run on worker threads, up to WORKERS_MAX at once (the main
 * thread waits for a free one: back-pressure on warrend); two requests for
 * the same sandbox never run at once (the second waits). Counters, the
 * in-flight table and every send are under mu, so that answers leave in
 * the order their counters were taken. */
#define WORKERS_MAX 8

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER; /* busy or inflight changed */
static unsigned busy;
static char inflight[WORKERS_MAX][PRIV_ID_MAX]; /* sandbox ids being cleaned up */

static bool id_inflight(const char *id) {
        for (size_t i = 0; i < WORKERS_MAX; i++)
                if (inflight[i][0] && !strcmp(inflight[i], id))
                        return true;
        return false;
}

/* Handles of running sandboxes, kept between SIGNAL and FREEZE requests
 * so that the re-attach's checks are paid once per init: keyed by id,
 * pid and start time; an entry whose init exited is dropped when next
 * looked up, a CLEANUP drops its id's, the least recently used goes when
 * the table is full. A request holds its entry alone (busy). Under mu. */
#define HANDLES_MAX 64
static struct handle {
        char id[PRIV_ID_MAX];
        int32_t pid;
        uint32_t mode;
        uint64_t start_time, used;
        struct rt_sandbox *sb; /* NULL: a free entry */
        bool busy;
} handles[HANDLES_MAX];
static uint64_t handle_clock;

static bool same_target(const struct handle *h, const struct priv_target *t) {
        return h->sb && h->pid == t->pid && h->start_time == t->start_time &&
               h->mode == t->cgroup_mode && !strcmp(h->id, t->id);
}

static void handle_drop(struct handle *h) {
        rt_sandbox_free(h->sb);
        memset(h, 0, sizeof(*h));
}

/* The target of a SIGNAL or FREEZE: its cached handle, or attached as
 * warrend re-attaches after a restart (pid, start time and cgroup
 * membership checked) and cached. *slot: its entry (to give back with
 * target_put), -1 for a handle of this request only. */
#define SLOT_OWNED PRIV_SLOT_OWNED /* phase 2: a handle warren-priv owns (priv_owned_get) */

static int target_get(const struct priv_target *t, struct rt_sandbox **ret, int *slot,
                      struct priv_result *res) {
        if ((*ret = priv_owned_get(t))) {
                *slot = SLOT_OWNED;
                return 0;
        }
        pthread_mutex_lock(&mu);
        for (int i = 0; i < HANDLES_MAX; i++) {
                struct handle *h = &handles[i];
                if (!same_target(h, t) || h->busy)
                        continue;
                struct pollfd pf = {.fd = rt_sandbox_pidfd(h->sb), .events = POLLIN};
                if (pf.fd < 0 || poll(&pf, 1, 0) != 0) {
                        handle_drop(h); /* init exited: attach fails below */
                        break;
                }
                h->busy = true;
                *ret = h->sb;
                *slot = i;
                pthread_mutex_unlock(&mu);
                return 0;
        }
        pthread_mutex_unlock(&mu);
        struct wr_err e = {0};
        char dir[PRIV_PATH_MAX];
        /* attach wants the dir for its names only (ctl.sock): nothing is opened */
        snprintf(dir, sizeof(dir), "/-/%s/%s", PRIV_ROOT_SANDBOXES, t->id);
        int r = rt_sandbox_attach(t->id, dir, (pid_t) t->pid, t->start_time,
                                  (enum rt_cgroup_mode) t->cgroup_mode, ret, &e);
        if (r < 0) {
                res->err = -r;
                snprintf(res->msg, sizeof(res->msg), "%s", e.msg);
                return r;
        }
        pthread_mutex_lock(&mu);
        int pick = -1;
        for (int i = 0; i < HANDLES_MAX; i++) {
                if (handles[i].busy)
                        continue;
                if (!handles[i].sb) {
                        pick = i;
                        break;
                }
                if (pick < 0 || handles[i].used < handles[pick].used)
                        pick = i;
        }
        if (pick >= 0) {
                struct handle *h = &handles[pick];
                if (h->sb)
                        handle_drop(h);
                snprintf(h->id, sizeof(h->id), "%s", t->id);
                h->pid = t->pid;
                h->mode = t->cgroup_mode;
                h->start_time = t->start_time;
                h->sb = *ret;
                h->busy = true;
        }
        *slot = pick;
        pthread_mutex_unlock(&mu);
        return 0;
}

static void target_put(struct rt_sandbox *sb, int slot);
int priv_target_get(const struct priv_target *t, struct rt_sandbox **ret, int *slot,
                    struct priv_result *res) {
        return target_get(t, ret, slot, res);
}

void priv_target_put(struct rt_sandbox *sb, int slot) {
        target_put(sb, slot);
}

static void target_put(struct rt_sandbox *sb, int slot) {
        if (slot == SLOT_OWNED) {
                priv_owned_put(sb);
                return;
        }
        if (slot < 0) {
                rt_sandbox_free(sb);
                return;
        }
        pthread_mutex_lock(&mu);
        handles[slot].busy = false;
        handles[slot].used = ++handle_clock;
        pthread_mutex_unlock(&mu);
}

/* A CLEANUP's sandbox is gone: its handles too (those not in use now go
 * when their init is found exited). */
static void handles_forget(const char *id) {
        pthread_mutex_lock(&mu);
        for (int i = 0; i < HANDLES_MAX; i++)
                if (handles[i].sb && !handles[i].busy && !strcmp(handles[i].id, id))
                        handle_drop(&handles[i]);
        pthread_mutex_unlock(&mu);
}

static void do_signal(const struct priv_signal *sg, struct priv_result *res) {
        struct rt_sandbox *sb = NULL;
        int slot;
        if (target_get(&sg->t, &sb, &slot, res) < 0)
                return;
        /* phase 2: a sandbox it is init's parent of is killed as
         * rt_sandbox_destroy begins (init, whose pid namespace ends with
         * it, thawed if paused, and reaped: no cgroup freeze on v1); what
         * runs beside it in its cgroup goes with its SANDBOX_DESTROY */
        struct wr_err ke = {0};
        int r = slot == SLOT_OWNED && sg->signo == SIGKILL ? rt_sandbox_kill_wait(sb, &ke)
                                                           : rt_sandbox_kill(sb, sg->signo);
        if (r < 0) {
                res->err = -r;
                snprintf(res->msg, sizeof(res->msg), "signal %d to sandbox %s: %s", sg->signo,
                         sg->t.id, strerror(-r));
        }
        target_put(sb, slot);
}

static void do_freeze(const struct priv_freeze *f, struct priv_result *res) {
        struct rt_sandbox *sb = NULL;
        int slot;
        if (target_get(&f->t, &sb, &slot, res) < 0)
                return;
        struct wr_err e = {0};
        int r = rt_sandbox_freeze(sb, f->on != 0, &e);
        if (r < 0) {
                res->err = -r;
                snprintf(res->msg, sizeof(res->msg), "%s", e.msg);
        }
        target_put(sb, slot);
}

/* Send under mu. <0 when the socket is broken. */
static int reply_locked(const void *buf, int n) {
        if (n < 0)
                return n;
        if (send(srv.sock, buf, (size_t) n, MSG_NOSIGNAL) != n)
                return -errno;
        return 0;
}

/* ---- phase 3: the network (NFT_*, NET_CONNECT; ip_forward at start) ---- */

/* net.ipv4.ip_forward as we left it at start (HELLO_REPLY.ip_forward):
 * sandboxes reach the outside through NAT. */
static uint32_t forward_state = PRIV_FORWARD_OFF;

static void forward_on(void) {
        const char *p = "/proc/sys/net/ipv4/ip_forward";
        char v[4] = {0};
        int fd = open(p, O_RDWR | O_CLOEXEC);
        if (fd < 0) {
                log_warn("warren-priv: open %s: %m (sandboxes get no NAT)", p);
                return;
        }
        if (read(fd, v, sizeof(v) - 1) > 0 && v[0] == '1') {
                forward_state = PRIV_FORWARD_WAS_ON;
        } else if (pwrite(fd, "1\n", 2, 0) == 2) {
                forward_state = PRIV_FORWARD_TURNED_ON;
                log_info("warren-priv: net.ipv4.ip_forward turned on (sandboxes reach the outside "
                         "through NAT); it stays on after warren exits");
        } else {
                log_warn("warren-priv: turn %s on: %m (sandboxes get no NAT)", p);
        }
        close(fd);
}

/* What a network request answers besides a RESULT. */
struct net_out {
        int fd;                       /* NET_CONNECT: the socket (-EBADF: none) */
        uint32_t connected;           /* NET_CONNECT: 1 connected, 0 in progress */
        struct priv_nft_names *names; /* NFT_TABLES (malloc'd) */
};

static void net_out_done(struct net_out *o) {
        if (o->fd >= 0)
                close(o->fd);
        o->fd = -EBADF;
        free(o->names);
        o->names = NULL;
}

static void res_err(struct priv_result *res, int r, const struct wr_err *e) {
        res->err = -r;
        snprintf(res->msg, sizeof(res->msg), "%s", e->msg[0] ? e->msg : strerror(-r));
}

static void do_nft_tables(struct priv_result *res, struct net_out *o) {
        struct wr_err e = {0};
        char **v = NULL;
        int k = nftab_tables(&v, &e);
        if (k < 0) {
                res_err(res, k, &e);
                return;
        }
        if (!(o->names = calloc(1, sizeof(*o->names)))) {
                res_err(res, -ENOMEM, &e);
        } else {
                for (int i = 0; i < k; i++) {
                        if (o->names->n == PRIV_NFT_NAMES_MAX) {
                                o->names->truncated = 1;
                                break;
                        }
                        snprintf(o->names->names[o->names->n++], PRIV_NFT_TABLE_MAX, "%s", v[i]);
                }
        }
        for (int i = 0; i < k; i++)
                free(v[i]);
        free(v);
}

static void do_net_connect(const struct priv_net_connect *c, struct priv_result *res,
                           struct net_out *o) {
        struct rt_sandbox *sb = NULL;
        int slot;
        if (target_get(&c->t, &sb, &slot, res) < 0)
                return;
        /* the socket is made by a thread of its own that joins the
         * sandbox's netns (never this worker) */
        int pidfd = rt_sandbox_pidfd(sb), fd = -EBADF;
        int r = pidfd < 0 ? -ESRCH : rt_net_connect_in(pidfd, c->addr, c->port, &fd);
        target_put(sb, slot);
        if (r < 0) {
                res->err = -r;
                snprintf(res->msg, sizeof(res->msg),
                         "connect from sandbox %s to %u.%u.%u.%u:%u: %s", c->t.id, c->addr >> 24,
                         (c->addr >> 16) & 255, (c->addr >> 8) & 255, c->addr & 255,
                         (unsigned) c->port, strerror(res->err));
                return;
        }
        o->fd = fd;
        o->connected = r == 1;
}

/* NFT_TABLE_APPLY's own check of the range (as warrend's range_check):
 * a table whose "sandboxes" set holds the host's own addresses or routes
 * would drop the host's traffic. Refused (-EADDRINUSE) when base/prefix
 * overlaps any route or address of the host but a default route, one on
 * a sandbox's veth (wr*) or one whose link went away since the dump. */
static int range_free(uint32_t base, uint32_t prefix, struct wr_err *e) {
        enum { ROUTES_MAX = 4096 };
        struct rt_route4 *routes = calloc(ROUTES_MAX, sizeof(*routes));
        if (!routes)
                return err_set(e, -ENOMEM, "out of memory");
        size_t n = 0;
        int r = rt_net_routes4(routes, ROUTES_MAX, &n, e);
        for (size_t i = 0; r >= 0 && i < n && i < ROUTES_MAX; i++) {
                const struct rt_route4 *rt = &routes[i];
                if (rt->prefix == 0 || (rt->oif > 0 && !rt->dev[0]) ||
                    !strncmp(rt->dev, PRIV_LINK_PREFIX, strlen(PRIV_LINK_PREFIX)))
                        continue;
                uint32_t dst = ntohl(rt->dst);
                uint32_t p = prefix < rt->prefix ? prefix : rt->prefix;
                uint32_t mask = p ? ~0u << (32 - p) : 0;
                if ((dst & mask) == (base & mask))
                        r = err_set(e, -EADDRINUSE,
                                    "NFT_TABLE_APPLY: the range overlaps the host's %u.%u.%u.%u/%u "
                                    "%s%s",
                                    dst >> 24, (dst >> 16) & 255, (dst >> 8) & 255, dst & 255,
                                    (unsigned) rt->prefix, rt->dev[0] ? "dev " : "", rt->dev);
        }
        free(routes);
        return r;
}

/* Carry out req when it is a network request (else nothing). */
static void net_run(const struct priv_req *req, struct priv_result *res, struct net_out *o) {
        struct wr_err e = {0};
        int r = 0;
        switch (req->hdr.type) {
        case PRIV_NFT_TABLE_APPLY: {
                const struct priv_nft_apply *a = &req->nft_apply;
                r = range_free(a->base, a->prefix, &e);
                if (r >= 0)
                        r = nftab_table_apply(a->table, a->base, (uint8_t) a->prefix, a->proxy_port,
                                              a->dns_port, &e);
                break;
        }
        case PRIV_NFT_CLASS_SET: {
                const struct priv_nft_class *c = &req->nft_class;
                r = nftab_class_set(c->table, c->addr, (enum nftab_class) c->from,
                                    (enum nftab_class) c->to, &e);
                break;
        }
        case PRIV_NFT_TABLES:
                do_nft_tables(res, o);
                return;
        case PRIV_NFT_TABLE_REMOVE:
                r = nftab_table_remove(req->nft_table.table, &e);
                break;
        case PRIV_NET_CONNECT:
                do_net_connect(&req->net_connect, res, o);
                return;
        default:
                return;
        }
        if (r < 0)
                res_err(res, r, &e);
}

/* Send one datagram with one fd (under mu). */
static int reply_fd_locked(const void *buf, int n, int fd) {
        return n < 0 ? n : priv_send(srv.sock, buf, (size_t) n, &fd, 1, 0);
}

/* The answer of a network request that succeeded and is not a RESULT
 * (NFT_NAMES, NET_CONNECTED + its fd), under mu: true when sent (or
 * tried: the socket is broken). */
static bool net_reply_locked(uint64_t id, uint32_t type, const struct priv_result *res,
                             const struct net_out *o) {
        uint8_t out[PRIV_MSG_MAX];
        if (res->err)
                return false;
        if (type == PRIV_NFT_TABLES && o->names) {
                o->names->served = res->served;
                o->names->served_total = res->served_total;
                o->names->refused = res->refused;
                (void) reply_locked(out, priv_nft_names_encode(id, o->names, out, sizeof(out)));
                return true;
        }
        if (type == PRIV_NET_CONNECT && o->fd >= 0) {
                struct priv_net_connected c = {.served = res->served,
                                               .served_total = res->served_total,
                                               .refused = res->refused,
                                               .connected = o->connected};
                (void) reply_fd_locked(out, priv_net_connected_encode(id, &c, out, sizeof(out)),
                                       o->fd);
                return true;
        }
        return false;
}

/* Phase 3: the answer of a volume or spawn request that carries an fd
 * (VOLUME_MOUNTED, SPAWNED), under mu: true when sent (or tried). */
static bool volssh_reply_locked(uint64_t id, uint32_t type, const struct priv_result *res,
                                const struct priv_volssh_out *o) {
        uint8_t out[PRIV_MSG_MAX];
        if (res->err || o->fd < 0)
                return false;
        if (type == PRIV_VOLUME_MOUNT) {
                struct priv_volume_mounted m = {.served = res->served,
                                                .served_total = res->served_total,
                                                .refused = res->refused};
                (void) reply_fd_locked(out, priv_volume_mounted_encode(id, &m, out, sizeof(out)),
                                       o->fd);
                return true;
        }
        if (type == PRIV_SANDBOX_SPAWN_BESIDE) {
                struct priv_spawned sp = {.served = res->served,
                                          .served_total = res->served_total,
                                          .refused = res->refused,
                                          .pid = o->pid};
                (void) reply_fd_locked(out, priv_spawned_encode(id, &sp, out, sizeof(out)), o->fd);
                return true;
        }
        return false;
}

/* A request and the fds it came with (phase 2: the config's memfd and
 * bind sources; none for the others). */
struct work_item {
        struct priv_req req;
        int fds[PRIV_FDS_MAX];
        size_t n_fds;
};

/* Phase 2 (types 6..11): the sandbox id a request works on, so that two
 * for one sandbox never run at once; NULL for the other types. */
static const char *lifecycle_id(const struct priv_req *req) {
        switch (req->hdr.type) {
        case PRIV_SANDBOX_CREATE:
        case PRIV_SANDBOX_PRESTART:
        case PRIV_SANDBOX_START:
                return req->cfg.id;
        case PRIV_SANDBOX_DESTROY:
                return req->destroy.t.id;
        case PRIV_SANDBOX_ATTACH:
        case PRIV_CTL_CONNECT:
                return req->target.id;
        }
        return NULL;
}

/* Carry out req and answer it; frees nothing (closes the item's fds). */
static void work_run(struct work_item *item) {
        const struct priv_req *req = &item->req;
        static _Thread_local struct priv_result res;
        static _Thread_local struct priv_created created;
        memset(&res, 0, sizeof(res));
        memset(&created, 0, sizeof(created));
        int out_fds[2] = {-1, -1};
        int kind = 0; /* 1: answer SANDBOX_CREATED with out_fds; 2: HELPER_STARTED */
        uint32_t t = req->hdr.type;
        const char *lid = lifecycle_id(req);
        /* phase 3, the helpers */
        static _Thread_local struct priv_helper_started hstarted;
        memset(&hstarted, 0, sizeof(hstarted));
        if (t == PRIV_HELPER_START || t == PRIV_UNPACK_START) {
                if (priv_helpers_run(req, item->fds, item->n_fds, &res, &hstarted, &out_fds[0]))
                        kind = 2;
                item->n_fds = 0;
        } else if (lid) {
                kind = priv_lifecycle_run(req, item->fds, item->n_fds, &res, &created, out_fds);
                item->n_fds = 0;
        } else if (t == PRIV_SANDBOX_CLEANUP)
                do_cleanup(&req->cleanup, &res);
        else if (t == PRIV_LINK_DELETE)
                do_link_delete(&req->link, &res);
        else if (t == PRIV_SANDBOX_SIGNAL)
                do_signal(&req->signal, &res);
        else if (t == PRIV_SANDBOX_FREEZE)
                do_freeze(&req->freeze, &res);
        /* phase 3: volumes and spawn-beside (their fds taken) */
        struct priv_volssh_out vo = {.fd = -EBADF};
        /* phase 4b: the upper-dir reader */
        struct priv_upper_packed packed;
        bool upper_ok = false;
        if (priv_volssh_type(t)) {
                priv_volssh_run(req, item->fds, item->n_fds, &res, &vo);
                item->n_fds = 0;
        } else if (t == PRIV_UPPER_PACK) {
                upper_ok = priv_upper_run(req, item->fds, item->n_fds, &res, &packed) == 0;
                item->n_fds = 0;
        } else if (priv_layer_type(t)) {
                priv_layer_run(req, &res); /* phase 5: layer storage */
        }
        /* phase 5: volume files (the paths' memfd taken) */
        static _Thread_local struct priv_reply vf;
        int vf_fd = -EBADF;
        uint32_t vf_type = 0;
        if (priv_volfile_type(t)) {
                vf_type = priv_volfile_run(req, item->fds, item->n_fds, &res, &vf, &vf_fd);
                item->n_fds = 0;
        }
        /* phase 4b-2: the journal's session */
        struct priv_upper_started ustarted = {0};
        int session_fd = -EBADF;
        if (t == PRIV_UPPER_SESSION &&
            priv_upper_session_run(req, &res, &ustarted, &session_fd) < 0)
                session_fd = -EBADF;
        struct net_out no = {.fd = -EBADF};
        net_run(req, &res, &no);
        priv_close_fds(item->fds, item->n_fds);
        log_debug("warren-priv: %s: %s", priv_type_name(t), res.err ? res.msg : "done");
        uint8_t out[PRIV_MSG_MAX];
        pthread_mutex_lock(&mu);
        srv.served[t]++;
        srv.served_total++;
        res.served = srv.served[t];
        res.served_total = srv.served_total;
        res.refused = srv.refused;
        if (kind == 1) {
                created.served = res.served;
                created.served_total = res.served_total;
                created.refused = res.refused;
                int n = priv_created_encode(req->hdr.id, &created, out, sizeof(out));
                if (n > 0)
                        (void) priv_send(srv.sock, out, (size_t) n, out_fds, 2, 0);
                priv_close_fds(out_fds, 2);
        } else if (kind == 2) {
                hstarted.served = res.served;
                hstarted.served_total = res.served_total;
                hstarted.refused = res.refused;
                int n = priv_helper_started_encode(req->hdr.id, &hstarted, out, sizeof(out));
                if (n > 0)
                        (void) priv_send(srv.sock, out, (size_t) n, out_fds, 1, 0);
                priv_close_fds(out_fds, 1);
        } else if (session_fd >= 0) {
                ustarted.served = res.served;
                ustarted.served_total = res.served_total;
                ustarted.refused = res.refused;
                (void) reply_fd_locked(
                        out, priv_upper_started_encode(req->hdr.id, &ustarted, out, sizeof(out)),
                        session_fd);
        } else if (upper_ok) {
                packed.served = res.served;
                packed.served_total = res.served_total;
                packed.refused = res.refused;
                (void) reply_locked(
                        out, priv_upper_packed_encode(req->hdr.id, &packed, out, sizeof(out)));
        } else if (vf_type && vf_type != PRIV_RESULT) {
                /* the counters lead each of the three answers */
                uint64_t *c = &vf.volfile_opened.served;
                _Static_assert(offsetof(struct priv_volfile_stated, served) == 0 &&
                                       offsetof(struct priv_volfile_listed, served) == 0,
                               "the counters lead every VOLFILE answer");
                c[0] = res.served;
                c[1] = res.served_total;
                c[2] = res.refused;
                int n = vf_type == PRIV_VOLFILE_OPENED
                                ? priv_volfile_opened_encode(req->hdr.id, &vf.volfile_opened, out,
                                                             sizeof(out))
                        : vf_type == PRIV_VOLFILE_STATED
                                ? priv_volfile_stated_encode(req->hdr.id, &vf.volfile_stated, out,
                                                             sizeof(out))
                                : priv_volfile_listed_encode(req->hdr.id, &vf.volfile_listed, out,
                                                             sizeof(out));
                if (vf_fd >= 0)
                        (void) reply_fd_locked(out, n, vf_fd);
                else
                        (void) reply_locked(out, n);
        } else if (!net_reply_locked(req->hdr.id, t, &res, &no) &&
                   !volssh_reply_locked(req->hdr.id, t, &res, &vo)) {
                (void) reply_locked(out, priv_result_encode(req->hdr.id, &res, out, sizeof(out)));
        }
        net_out_done(&no);
        if (vo.fd >= 0)
                close(vo.fd);
        if (session_fd >= 0)
                close(session_fd);
        if (vf_fd >= 0)
                close(vf_fd);
        if (t == PRIV_SANDBOX_CLEANUP || lid)
                for (size_t i = 0; i < WORKERS_MAX; i++)
                        if (!strcmp(inflight[i], lid ? lid : req->cleanup.id)) {
                                inflight[i][0] = 0;
                                break;
                        }
        busy--;
        pthread_cond_broadcast(&cv);
        pthread_mutex_unlock(&mu);
}

static void *work(void *arg) {
        work_run(arg);
        free(arg);
        return NULL;
}

/* One datagram: decode; answer a refusal or a HELLO here, hand the rest
 * to a worker. <0 when the socket is broken. */
static int serve_one(const void *in, size_t len, int *fds, size_t n_fds) {
        static struct priv_req req;
        static struct work_item item; /* phase 2: the fds a lifecycle request keeps */
        static struct priv_result res;
        uint8_t out[PRIV_MSG_MAX];
        struct wr_err e = {0};
        memset(&res, 0, sizeof(res));
        int r = priv_req_decode(in, len, n_fds, &req, &e);
        /* only a lifecycle request (phase 2) keeps its fds past the
         * decoding: for its worker */
        item.n_fds = 0;
        bool helper = r >= 0 && (req.hdr.type == PRIV_HELPER_START ||
                                 req.hdr.type == PRIV_UNPACK_START); /* phase 3 */
        if (r < 0 || (!lifecycle_id(&req) && !helper && req.hdr.type != PRIV_SANDBOX_SPAWN_BESIDE &&
                      req.hdr.type != PRIV_UPPER_PACK && !priv_volfile_type(req.hdr.type))) {
                priv_close_fds(fds, n_fds);
        } else {
                memcpy(item.fds, fds, n_fds * sizeof(int));
                item.n_fds = n_fds;
        }
        pthread_mutex_lock(&mu);
        if (r < 0) {
                srv.refused++;
                log_warn("warren-priv: refused a request: %s", e.msg);
                res.err = -r;
                snprintf(res.msg, sizeof(res.msg), "refused: %s", e.msg);
                res.served_total = srv.served_total;
                res.refused = srv.refused;
                r = reply_locked(out, priv_result_encode(req.hdr.id, &res, out, sizeof(out)));
                pthread_mutex_unlock(&mu);
                return r;
        }
        uint32_t t = req.hdr.type;
        if (t == PRIV_HELLO) {
                srv.served[t]++;
                srv.served_total++;
                struct priv_hello_reply h = {.version = PRIV_VERSION,
                                             .pid = (int32_t) getpid(),
                                             .ip_forward = forward_state,
                                             .host_check = priv_lifecycle_host_check()};
                memcpy(h.served, srv.served, sizeof(h.served));
                h.served_total = srv.served_total;
                h.refused = srv.refused;
                r = reply_locked(out, priv_hello_reply_encode(req.hdr.id, &h, out, sizeof(out)));
                pthread_mutex_unlock(&mu);
                return r;
        }
        const char *lid = lifecycle_id(&req);
        while (busy >= WORKERS_MAX || (t == PRIV_SANDBOX_CLEANUP && id_inflight(req.cleanup.id)) ||
               (lid && id_inflight(lid)))
                pthread_cond_wait(&cv, &mu);
        if (t == PRIV_SANDBOX_CLEANUP || lid)
                for (size_t i = 0; i < WORKERS_MAX; i++)
                        if (!inflight[i][0]) {
                                memcpy(inflight[i], lid ? lid : req.cleanup.id, PRIV_ID_MAX);
                                break;
                        }
        busy++;
        pthread_mutex_unlock(&mu);
        struct work_item *copy = malloc(sizeof(*copy));
        pthread_attr_t attr;
        pthread_t th;
        bool started = false;
        if (copy && pthread_attr_init(&attr) == 0) {
                *copy = item;
                copy->req = req;
                (void) pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
                started = pthread_create(&th, &attr, work, copy) == 0;
                pthread_attr_destroy(&attr);
        }
        if (!started) {
                /* no memory or thread: do it here */
                item.req = req;
                work_run(copy ? copy : &item);
                free(copy);
        }
        return 0;
}

/* Close every fd but 0-2, the socket and the state dir. */
static int close_others(void) {
        DIR *d = opendir("/proc/self/fd");
        if (!d)
                return -1;
        int self = dirfd(d);
        struct dirent *de;
        while ((de = readdir(d))) {
                char *end;
                long fd = strtol(de->d_name, &end, 10);
                if (*end || end == de->d_name || fd < 3 || fd == self || fd == srv.sock ||
                    fd == srv.state_fd)
                        continue;
                (void) close((int) fd);
        }
        closedir(d);
        return 0;
}

static void usage(void) {
        fprintf(stderr, "usage: warren-priv --sock-fd N --state-dir DIR [--init PATH] "
                        "[--log-level LEVEL] [--log-format text|json]\n");
        exit(2);
}

int main(int argc, char **argv) {
        static const struct option opts[] = {
                {"sock-fd", required_argument, NULL, 's'},
                {"state-dir", required_argument, NULL, 'd'},
                {"log-level", required_argument, NULL, 'l'},
                {"log-format", required_argument, NULL, 'f'},
                {"init", required_argument, NULL, 'i'},
                {0},
        };
        const char *state_dir = NULL, *init = NULL;
        int c;
        while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
                switch (c) {
                case 's': {
                        char *end;
                        long v = strtol(optarg, &end, 10);
                        if (*end || v < 3 || v > 65535)
                                usage();
                        srv.sock = (int) v;
                        break;
                }
                case 'd':
                        state_dir = optarg;
                        break;
                case 'i':
                        init = optarg;
                        break;
                case 'l': {
                        enum log_level lv;
                        if (log_level_from_string(optarg, &lv) < 0)
                                usage();
                        log_set_level(lv);
                        break;
                }
                case 'f': {
                        enum log_format lf;
                        if (log_format_from_string(optarg, &lf) < 0)
                                usage();
                        log_set_format(lf);
                        break;
                }
                default:
                        usage();
                }
        }
        if (srv.sock < 0 || !state_dir || state_dir[0] != '/' || optind != argc)
                usage();
        int type = 0;
        socklen_t tl = sizeof(type);
        if (getsockopt(srv.sock, SOL_SOCKET, SO_TYPE, &type, &tl) < 0 || type != SOCK_SEQPACKET) {
                log_error("warren-priv: --sock-fd %d is not a SOCK_SEQPACKET socket", srv.sock);
                return 2;
        }
        (void) fcntl(srv.sock, F_SETFD, FD_CLOEXEC);
        srv.state_fd = open(state_dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
        if (srv.state_fd < 0) {
                log_error("warren-priv: state dir %s: %m", state_dir);
                return 2;
        }
        /* everything else warrend may have leaked is closed (it raises its
         * fd limit: any number, not only below 1024) */
        if (close_others() < 0) {
                log_error("warren-priv: closing inherited fds: %m");
                return 2;
        }
        signal(SIGPIPE, SIG_IGN);
        forward_on();
        (void) priv_upper_init(); /* phase 4b: warren-upper (a warning when missing) */
        priv_helpers_init(state_dir);
        if (priv_lifecycle_init(state_dir, init) < 0) {
                log_error("warren-priv: --init %s is not an absolute path", init);
                return 2;
        }
        int r = confine_caps();
        if (r < 0) {
                log_error("warren-priv: dropping capabilities: %s", strerror(-r));
                return 2;
        }
        struct wr_err de = {0};
        if (priv_deny_load(&de) < 0) {
                log_error("warren-priv: %s", de.msg);
                return 2;
        }
        log_info("warren-priv %d: serving requests (protocol version %u)", (int) getpid(),
                 PRIV_VERSION);
        static uint8_t in[PRIV_MSG_MAX + 1];
        for (;;) {
                int fds[PRIV_FDS_MAX];
                size_t n_fds = 0;
                long n = priv_recv(srv.sock, in, sizeof(in), fds, &n_fds, 0);
                if (n == 0) {
                        /* warrend is gone: let the work in progress finish */
                        pthread_mutex_lock(&mu);
                        while (busy > 0)
                                pthread_cond_wait(&cv, &mu);
                        pthread_mutex_unlock(&mu);
                        return 0;
                }
                if (n == -EMSGSIZE || n == -EPROTO) {
                        /* too large, or too many fds: refused, fds closed */
                        struct priv_result res = {.err = (int32_t) -n};
                        snprintf(res.msg, sizeof(res.msg), "refused: %s",
                                 n == -EMSGSIZE ? "datagram too large" : "too many fds");
                        uint8_t out[PRIV_MSG_MAX];
                        pthread_mutex_lock(&mu);
                        srv.refused++;
                        res.served_total = srv.served_total;
                        res.refused = srv.refused;
                        int rr = reply_locked(out, priv_result_encode(0, &res, out, sizeof(out)));
                        pthread_mutex_unlock(&mu);
                        if (rr < 0)
                                return 0;
                        continue;
                }
                if (n < 0) {
                        if (n == -EAGAIN || n == -EINTR)
                                continue;
                        log_error("warren-priv: receive: %s", strerror((int) -n));
                        return 0;
                }
                if (serve_one(in, (size_t) n, fds, n_fds) < 0)
                        return 0;
        }
}
