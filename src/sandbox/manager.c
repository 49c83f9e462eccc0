/* SPDX-License-Identifier: Apache-2.0 */
/* The sandbox manager: its life (new: recovery and the warm pool; free),
 * lookups, usage and metrics. */
#include "sandbox/sandbox-internal.h"
#include "sandbox/egress.h"
#include "image/image.h"

#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <fcntl.h>
#include <poll.h>
#include <string.h>
#include <unistd.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>

#include "basic/log.h"
#include "basic/macro.h"
#include "priv/client.h"
#include "runtime/ctl.h"
#include "runtime/runtime.h"

/* --- metrics --- */

const double sbx_histogram_bounds[SBX_HIST_BUCKETS - 1] = {
        0.001, 0.0025, 0.005, 0.0075, 0.01, 0.015, 0.02, 0.03, 0.05, 0.1, 0.25, 1, 5};

void sbx_histogram_observe(struct sbx_histogram *h, double seconds) {
        size_t i = 0;
        while (i < SBX_HIST_BUCKETS - 1 && seconds > sbx_histogram_bounds[i])
                i++;
        h->counts[i]++;
        h->count++;
        h->sum += seconds;
}

const struct sbx_metrics *sbx_manager_metrics(const struct sbx_manager *m) {
        return &m->metrics;
}

uint64_t sbx_mono_ns(void) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t) ts.tv_sec * 1000000000ULL + (uint64_t) ts.tv_nsec;
}

int sbx_host_cleanup(struct sbx_manager *m, const char *id, const char *dir, struct wr_err *e) {
        if (m->priv)
                return priv_sandbox_cleanup(m->priv, id, dir, (int) m->cgroup_mode, e);
        return rt_sandbox_cleanup(id, dir, m->cgroup_mode, e);
}

/* The sandbox behind rt as warren-priv names it. -ESRCH once init is
 * reaped. */
static int target_of(const struct sbx_manager *m, const struct rt_sandbox *rt,
                     struct priv_target *t);

int sbx_rt_destroy(struct sbx_manager *m, struct rt_sandbox *rt, struct wr_err *e) {
        if (!m->priv)
                return rt_sandbox_destroy(rt, e);
        /* --privsep: warren-priv is init's parent: it kills, reaps and
         * removes (the veth's host end too when the handle still owns it),
         * then this handle is dropped */
        struct priv_target t;
        if (target_of(m, rt, &t) < 0) {
                /* reaped: named by id alone */
                t.pid = 0;
                t.start_time = 0;
        }
        int r = priv_sandbox_destroy(m->priv, &t, rt_sandbox_net_peer(rt), e);
        if (r < 0)
                return r;
        return rt_sandbox_release(rt, e);
}

/* A handle of what warren-priv answered (its fds taken over). */
static int adopt(struct sbx_manager *m, const struct rt_sandbox_config *cfg, const char *id,
                 const char *dir, struct priv_sandbox *ps, struct rt_sandbox **ret,
                 struct wr_err *e) {
        return rt_sandbox_adopt(id, dir, ps->pid, ps->start_time, ps->pidfd, ps->ctl_fd,
                                cfg ? cfg->net : NULL, m->cgroup_mode, ret, e);
}

int sbx_rt_create(struct sbx_manager *m, const struct rt_sandbox_config *cfg, bool prestart,
                  struct rt_sandbox **ret, struct wr_err *e) {
        if (!m->priv)
                return prestart ? rt_sandbox_prestart(cfg, ret, e) : rt_sandbox_create(cfg, ret, e);
        struct rt_sandbox_config c = *cfg;
        c.cgroup_mode = m->cgroup_mode;
        struct priv_sandbox ps;
        int r = priv_sandbox_create(m->priv, &c, prestart, &ps, e);
        if (r >= 0)
                r = adopt(m, cfg, cfg->id, cfg->dir, &ps, ret, e);
        if (r < 0) {
                /* nothing of it may stay: warren-priv undid its own
                 * failure, but one that died on the way (or a sandbox this
                 * process cannot follow) leaves a child, cgroups and a dir,
                 * which the next warren-priv removes by id */
                /* it runs, but this process cannot follow it: it goes */
                struct priv_target t = {.pid = 0};
                struct wr_err de = {0};
                snprintf(t.id, sizeof(t.id), "%s", cfg->id);
                t.cgroup_mode = (uint32_t) m->cgroup_mode;
                if (priv_sandbox_destroy(m->priv, &t, cfg->net ? cfg->net->peer : NULL, &de) < 0)
                        log_warn("sandbox %s: %s", cfg->id, de.msg);
        }
        return r;
}

/* ---- a new warren-priv learns the running sandboxes ---- */

struct reattach {
        uv_work_t work;
        struct sbx_manager *m;
        size_t n;
        struct priv_target t[];
};

static void reattach_work(uv_work_t *w) {
        struct reattach *j = w->data;
        size_t ok = 0;
        for (size_t i = 0; i < j->n; i++) {
                struct priv_sandbox ps;
                struct wr_err e = {0};
                if (priv_sandbox_attach(j->m->priv, &j->t[i], false, &ps, &e) < 0) {
                        log_warn("sandbox %s: re-attach by the new warren-priv: %s", j->t[i].id,
                                 e.msg);
                        continue;
                }
                /* this process keeps its own pidfd and ctl connection */
                close(ps.pidfd);
                close(ps.ctl_fd);
                ok++;
        }
        log_info("warren-priv: %zu of %zu running sandboxes re-attached", ok, j->n);
}

static void reattach_done(uv_work_t *w, int status) {
        struct reattach *j = w->data;
        j->m->priv_jobs--;
        free(j);
}

/* On the loop: the running sandboxes, named to the new warren-priv on a
 * worker. */
static void priv_restarted_cb(uv_async_t *a) {
        struct sbx_manager *m = a->data;
        size_t n = 0;
        for (struct sbx *sb = m->list; sb; sb = sb->next)
                n += sb->state != SBX_DEAD && sb->rt;
        if (!n || m->freeing)
                return;
        struct reattach *j = calloc(1, sizeof(*j) + n * sizeof(j->t[0]));
        if (!j)
                return;
        j->m = m;
        j->work.data = j;
        for (struct sbx *sb = m->list; sb; sb = sb->next)
                if (sb->state != SBX_DEAD && sb->rt && target_of(m, sb->rt, &j->t[j->n]) >= 0)
                        j->n++;
        if (uv_queue_work(m->loop, &j->work, reattach_work, reattach_done) < 0) {
                free(j);
                return;
        }
        m->priv_jobs++;
}

/* The supervisor thread: wake the loop. */
static void priv_restarted(void *userdata) {
        struct sbx_manager *m = userdata;
        uv_async_send(&m->priv_restarted);
}

static void priv_restarted_closed(uv_handle_t *h) {
        struct sbx_manager *m = h->data;
        m->priv_restarted_open = false;
}

/* The parent of pid (/proc/<pid>/stat field 4), or -errno. */
static pid_t parent_of(pid_t pid) {
        char path[64], buf[512];
        snprintf(path, sizeof(path), "/proc/%d/stat", (int) pid);
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
                return -errno;
        ssize_t n = read(fd, buf, sizeof(buf) - 1);
        close(fd);
        if (n <= 0)
                return -EIO;
        buf[n] = 0;
        const char *p = strrchr(buf, ')');
        int ppid = 0;
        if (!p || sscanf(p + 1, " %*c %d", &ppid) != 1)
                return -EIO;
        return (pid_t) ppid;
}

/* A warm-pool entry the running warren-priv cannot start: its parked
 * child is gone, or belongs to a warren-priv that died (then it is no
 * child of the running one: reparented, and about to exit). */
static bool prestart_stale(struct sbx_manager *m, struct rt_sandbox *rt) {
        struct pollfd p = {.fd = rt_sandbox_pidfd(rt), .events = POLLIN};
        if (p.fd < 0 || RETRY_EINTR(poll(&p, 1, 0)) != 0)
                return true;
        struct priv_client_stats st;
        priv_client_stats(m->priv, &st);
        return parent_of(rt_sandbox_pid(rt)) != st.pid;
}

int sbx_rt_start_send(struct sbx_manager *m, struct rt_sandbox *rt,
                      const struct rt_sandbox_config *cfg, struct priv_start **ticket,
                      struct wr_err *e) {
        *ticket = NULL;
        if (!m->priv)
                return rt_sandbox_start_send(rt, cfg, e);
        if (prestart_stale(m, rt))
                return err_set(e, -ESTALE,
                               "start sandbox: the prestarted sandbox is gone (its warren-priv "
                               "is)");
        /* warren-priv sends and waits in one request (answered once init
         * runs): in flight while the caller records the sandbox */
        struct rt_sandbox_config c = *cfg;
        c.cgroup_mode = m->cgroup_mode;
        return priv_sandbox_start_begin(m->priv, &c, ticket, e);
}

int sbx_rt_start_wait(struct sbx_manager *m, struct rt_sandbox *rt, struct priv_start **ticket,
                      struct wr_err *e) {
        if (!m->priv)
                return rt_sandbox_start_wait(rt, e);
        struct priv_start *t = *ticket;
        *ticket = NULL;
        return t ? priv_sandbox_start_end(m->priv, t, e) : 0;
}

int sbx_rt_attach(struct sbx_manager *m, const char *id, const char *dir, pid_t pid,
                  uint64_t start_time, struct rt_sandbox **ret, struct wr_err *e) {
        if (!m->priv)
                return rt_sandbox_attach(id, dir, pid, start_time, m->cgroup_mode, ret, e);
        struct priv_target t = {.pid = (int32_t) pid, .start_time = start_time};
        snprintf(t.id, sizeof(t.id), "%s", id);
        t.cgroup_mode = (uint32_t) m->cgroup_mode;
        if (pid <= 1 || !start_time)
                return err_set(e, -ESRCH, "attach sandbox %s: no init recorded", id);
        struct priv_sandbox ps;
        int r = priv_sandbox_attach(m->priv, &t, false, &ps, e);
        if (r < 0)
                return r;
        return adopt(m, NULL, id, dir, &ps, ret, e);
}

int sbx_rt_ctl_connect(struct sbx_manager *m, struct rt_sandbox *rt, int *ret_fd,
                       struct wr_err *e) {
        if (!m->priv)
                return rt_ctl_connect(rt_sandbox_ctl_path(rt), ret_fd, e);
        int fd = rt_sandbox_ctl_take(rt);
        if (fd >= 0) {
                *ret_fd = fd;
                return 0;
        }
        struct priv_target t;
        if (target_of(m, rt, &t) < 0)
                return err_set(e, -ESRCH, "sandbox %s is gone", rt_sandbox_id(rt));
        struct priv_sandbox ps;
        int r = priv_sandbox_attach(m->priv, &t, true, &ps, e);
        if (r < 0)
                return r;
        close(ps.pidfd);
        *ret_fd = ps.ctl_fd;
        return 0;
}

int sbx_rt_kill_wait(struct sbx_manager *m, struct rt_sandbox *rt, struct wr_err *e) {
        if (!m->priv)
                return rt_sandbox_kill_wait(rt, e);
        /* warren-priv kills (and reaps, as init's parent); here the exit is
         * seen through the pidfd (bounded, as for an attached handle) */
        (void) sbx_rt_kill(m, rt, SIGKILL);
        struct pollfd p = {.fd = rt_sandbox_pidfd(rt), .events = POLLIN};
        if (p.fd >= 0 && RETRY_EINTR(poll(&p, 1, 5000)) == 0)
                return err_set(e, -ETIMEDOUT, "sandbox %s: init did not exit within 5 s of SIGKILL",
                               rt_sandbox_id(rt));
        (void) rt_sandbox_reap(rt, NULL);
        return 0;
}

static int target_of(const struct sbx_manager *m, const struct rt_sandbox *rt,
                     struct priv_target *t) {
        memset(t, 0, sizeof(*t));
        snprintf(t->id, sizeof(t->id), "%s", rt_sandbox_id(rt));
        t->pid = (int32_t) rt_sandbox_pid(rt);
        t->cgroup_mode = (uint32_t) m->cgroup_mode;
        if (t->pid <= 0 || rt_sandbox_start_time(rt, &t->start_time) < 0)
                return -ESRCH;
        return 0;
}

int sbx_priv_target(const struct sbx_manager *m, const struct rt_sandbox *rt,
                    struct priv_target *t) {
        return target_of(m, rt, t);
}

/* ---- phase 4b: the upper-dir reader ---- */

_Static_assert(sizeof(struct sbx_upper_ref) == sizeof(struct priv_target) &&
                       sizeof(((struct sbx_upper_ref *) 0)->id) == PRIV_ID_MAX,
               "sbx_upper_ref mirrors priv_target");

int sbx_upper_ref(struct sbx_manager *m, struct sbx *sb, const char *what,
                  struct sbx_upper_ref *ret, struct wr_err *e) {
        if (!m->priv)
                return -ENOENT;
        if (sb->uid_slot < 0)
                return err_setx(e, -EPERM, WR_STATUS_FAILED_PRECONDITION, WR_FAULT_CLIENT,
                                "%s: sandbox %s runs without a user namespace (--userns=off): "
                                "under --privsep its files are read only from inside its user "
                                "namespace; start warrend without --userns=off (or without "
                                "--privsep)",
                                what, sb->id);
        struct priv_target t;
        if (target_of(m, sb->rt, &t) < 0)
                return err_set(e, -ESRCH, "%s: sandbox %s is gone", what, sb->id);
        memcpy(ret->id, t.id, sizeof(ret->id));
        ret->pid = t.pid;
        ret->cgroup_mode = t.cgroup_mode;
        ret->start_time = t.start_time;
        return 0;
}

int sbx_upper_pack(struct sbx_manager *m, const struct sbx_upper_ref *ref, int spool_fd,
                   struct img_pack_stats *stats, struct wr_err *e) {
        struct priv_target t = {
                .pid = ref->pid, .cgroup_mode = ref->cgroup_mode, .start_time = ref->start_time};
        memcpy(t.id, ref->id, sizeof(t.id));
        struct priv_upper_packed p;
        int r = priv_upper_pack(m->priv, &t, spool_fd, &p, e);
        if (r < 0)
                return r;
        *stats = (struct img_pack_stats){.entries = p.entries,
                                         .bytes = p.bytes,
                                         .whiteouts = p.whiteouts,
                                         .opaque = p.opaque,
                                         .skipped = p.skipped};
        return 0;
}

int sbx_rt_kill(struct sbx_manager *m, struct rt_sandbox *rt, int sig) {
        if (!m->priv)
                return rt_sandbox_kill(rt, sig);
        struct priv_target t;
        struct wr_err e = {0};
        int r = target_of(m, rt, &t);
        if (r >= 0)
                r = priv_sandbox_signal(m->priv, &t, sig, &e);
        if (r < 0 && r != -ESRCH)
                log_debug("sandbox %s: signal %d: %s", rt_sandbox_id(rt), sig, e.msg);
        /* as rt_sandbox_kill: SIGKILL always "done" (the teardown kills
         * what is left) */
        return sig == SIGKILL ? 0 : r;
}

int sbx_rt_freeze(struct sbx_manager *m, struct rt_sandbox *rt, bool on, struct wr_err *e) {
        if (!m->priv)
                return rt_sandbox_freeze(rt, on, e);
        struct priv_target t;
        if (target_of(m, rt, &t) < 0)
                return err_set(e, -ESRCH, "sandbox %s is gone", rt_sandbox_id(rt));
        int r = priv_sandbox_freeze(m->priv, &t, on, e);
        if (r == -EOPNOTSUPP && e) /* as rt_sandbox_freeze says it */
                e->status = WR_STATUS_FAILED_PRECONDITION;
        return r;
}

int sbx_link_delete(struct sbx_manager *m, const char *name, struct wr_err *e) {
        if (m->priv)
                return priv_link_delete(m->priv, name, e);
        return rt_net_link_delete(name, e);
}

int sbx_dir_path(const struct sbx_manager *m, const char *id, char *buf, size_t size) {
        int n = snprintf(buf, size, "%s/sandboxes/%s", m->state_dir, id);
        return n < 0 || (size_t) n >= size ? -ENAMETOOLONG : 0;
}

/* --- lookup --- */

struct sbx *sbx_find_exec(struct sbx_manager *m, const char *key) {
        for (struct sbx *sb = m->list; sb; sb = sb->next)
                if (sb->state != SBX_DEAD &&
                    (strcmp(sb->id, key) == 0 || (sb->name && strcmp(sb->name, key) == 0)))
                        return sb;
        return NULL;
}

const char *sbx_dir(const struct sbx *sb) {
        return sb->rt ? rt_sandbox_dir(sb->rt) : sb->remote_dir;
}

struct sbx *sbx_find_live(struct sbx_manager *m, const char *key) {
        for (struct sbx *sb = m->list; sb; sb = sb->next)
                if (sb->state != SBX_DEAD && !sb->remote &&
                    (strcmp(sb->id, key) == 0 || (sb->name && strcmp(sb->name, key) == 0)))
                        return sb;
        return NULL;
}

size_t sbx_manager_cleanup_pending(const struct sbx_manager *m) {
        return sbx_cleanup_pending(m);
}

size_t sbx_manager_pool_size(const struct sbx_manager *m) {
        return m->pool_n;
}

size_t sbx_manager_running(const struct sbx_manager *m) {
        size_t n = 0;
        for (struct sbx *sb = m->list; sb; sb = sb->next)
                n += sb->state != SBX_DEAD;
        return n;
}

bool sbx_manager_image_in_use(const char *image_id, void *manager) {
        struct sbx_manager *m = manager;
        for (struct sbx *sb = m->list; sb; sb = sb->next)
                if (sb->state != SBX_DEAD && sb->image_id && strcmp(sb->image_id, image_id) == 0)
                        return true;
        return false;
}

int sbx_lookup(struct sbx_manager *m, const char *key, struct store_sandbox *ret,
               struct wr_err *e) {
        if (!key || !*key)
                return err_setx(e, -EINVAL, WR_STATUS_INVALID_ARGUMENT, WR_FAULT_CLIENT,
                                "sandbox: give an id (sb-...) or a name");
        int r;
        if (strncmp(key, "sb-", 3) == 0) {
                r = store_sandbox_load(m->store, key, ret, NULL);
                if (r != -ENOENT)
                        return r < 0 ? err_set(e, r, "load sandbox %s", key) : r;
        }
        r = store_sandbox_load_by_name(m->store, STORE_ENV_DEFAULT, key, ret, NULL);
        if (r == -ENOENT)
                return err_setx(e, -ENOENT, WR_STATUS_NOT_FOUND, WR_FAULT_CLIENT,
                                "sandbox %s not found (list them with `warren sandbox ls`)", key);
        if (r < 0)
                return err_set(e, r, "load sandbox %s", key);
        return 0;
}

int sbx_usage(struct sbx_manager *m, const char *id, struct rt_usage *u) {
        struct sbx *sb = sbx_find_live(m, id);
        if (!sb || !sb->rt)
                return -ENOENT;
        return rt_sandbox_usage(sb->rt, u);
}

int sbx_egress_enforced(struct sbx_manager *m, const char *id) {
        struct sbx *sb = sbx_find_live(m, id);
        if (!sb)
                return -ENOENT;
        return sb->egress_enforced ? 1 : 0;
}

int sbx_detected_resources(struct sbx_manager *m, const char *id, const char *const **ret,
                           size_t *ret_n) {
        struct sbx_egress *g = sbx_network_egress(m->net);
        if (!g)
                return -ENOENT;
        return sbx_egress_resources(g, id, ret, ret_n);
}

int sbx_network_events(struct sbx_manager *m, const char *id, uint64_t after_seq, size_t limit,
                       struct sbx_egress_event **ret, size_t *ret_n, uint64_t *ret_last) {
        struct sbx_egress *g = sbx_network_egress(m->net);
        if (!g)
                return -ENOENT;
        return sbx_egress_events(g, id, after_seq, limit, ret, ret_n, ret_last);
}

const char *sbx_image_ref(const struct sbx_manager *m, const struct sbx_spec *spec) {
        return spec && spec->image_ref ? spec->image_ref : m->default_image;
}

bool sbx_image_is_default(const struct sbx_manager *m, const char *ref) {
        return strcmp(ref, m->default_image) == 0;
}

/* --- user namespace ranges --- */

/* Open the host-wide lock dir (best effort: without it, ranges are only
 * this warrend's to manage). */
static void uid_locks_open(struct sbx_manager *m) {
        m->uid_lock_dir = -1;
        m->uid_locks = malloc(SBX_UIDS_SLOTS * sizeof(*m->uid_locks));
        if (!m->uid_locks)
                return;
        for (size_t i = 0; i < SBX_UIDS_SLOTS; i++)
                m->uid_locks[i] = -1;
        (void) mkdir("/run/warren", 0755);
        (void) mkdir(SBX_UIDS_LOCK_DIR, 0700);
        m->uid_lock_dir = open(SBX_UIDS_LOCK_DIR, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (m->uid_lock_dir < 0)
                log_warn("user namespaces: %s: %m (uid ranges are not locked host-wide: "
                         "another warrend on this host may hand out the same ones)",
                         SBX_UIDS_LOCK_DIR);
}

/* Lock slot host-wide: 0 (or no locking), -EBUSY when another warrend
 * holds it. */
static int uid_lock(struct sbx_manager *m, int32_t slot) {
        if (m->uid_lock_dir < 0 || m->uid_locks[slot] >= 0)
                return 0;
        char name[16];
        snprintf(name, sizeof(name), "%d", (int) slot);
        int fd = openat(m->uid_lock_dir, name, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
        if (fd < 0)
                return 0; /* best effort, as without the dir */
        if (flock(fd, LOCK_EX | LOCK_NB) < 0) {
                int r = errno == EWOULDBLOCK ? -EBUSY : 0;
                close(fd);
                return r;
        }
        m->uid_locks[slot] = fd;
        return 0;
}

static void uid_unlock(struct sbx_manager *m, int32_t slot) {
        if (m->uid_locks && slot >= 0 && m->uid_locks[slot] >= 0) {
                close(m->uid_locks[slot]);
                m->uid_locks[slot] = -1;
        }
}

int sbx_uid_slot_alloc(struct sbx_manager *m, int32_t *ret, struct wr_err *e) {
        *ret = -1;
        if (!m->uids)
                return 0;
        /* Ranges another warrend holds are skipped (and not kept): they stay
         * marked while the search goes on, so that it visits every slot once
         * at most. Every warrend starts its round robin at slot 0, so a new
         * one may meet a long run of ranges older ones hold: no cap on it.
         * The list is allocated at the first busy range only (a create
         * whose first try is free, the usual case, allocates nothing). */
        int32_t *busy = NULL;
        size_t n_busy = 0;
        int r = -ENOSPC;
        for (;;) {
                int32_t slot;
                if (sbx_uids_alloc(m->uids, &slot) < 0)
                        break;
                if (uid_lock(m, slot) == 0) {
                        *ret = slot;
                        r = 0;
                        break;
                }
                if (!busy && !(busy = malloc(SBX_UIDS_SLOTS * sizeof(*busy)))) {
                        sbx_uids_release(m->uids, slot);
                        r = -ENOMEM;
                        break;
                }
                busy[n_busy++] = slot;
        }
        for (size_t i = 0; i < n_busy; i++)
                sbx_uids_release(m->uids, busy[i]);
        free(busy);
        if (r == -ENOMEM)
                return err_set(e, -ENOMEM, "out of memory");
        if (r < 0)
                return err_setx(e, -ENOSPC, WR_STATUS_RESOURCE_EXHAUSTED, WR_FAULT_SERVICE,
                                "user namespaces: all %u uid ranges are in use (%zu of them by "
                                "other warrends on this host)",
                                SBX_UIDS_SLOTS, n_busy);
        return 0;
}

void sbx_uid_slot_release(struct sbx_manager *m, int32_t slot) {
        if (!m->uids)
                return;
        sbx_uids_release(m->uids, slot);
        uid_unlock(m, slot);
}

int32_t sbx_uid_slot_adopt(struct sbx_manager *m, uint32_t base, const char *id) {
        int32_t slot = -1;
        if (!base || !m->uids)
                return -1;
        int r = sbx_uids_adopt(m->uids, base, &slot);
        if (r == -EINVAL) {
                log_warn("sandbox %s: its uid range %u is not one of this warrend's", id, base);
                return -1;
        }
        if (r == -EEXIST) {
                log_warn("sandbox %s: its uid range %u is recorded twice", id, base);
                return -1;
        }
        if (uid_lock(m, slot) < 0)
                log_warn("sandbox %s: another warrend on this host holds its uid range %u", id,
                         base);
        return slot;
}

void sbx_uid_slot_config(int32_t slot, struct rt_sandbox_config *cfg) {
        if (slot < 0)
                return;
        cfg->uid_base = sbx_uids_base(slot);
        cfg->uid_count = SBX_UIDS_COUNT;
}

/* --- manager --- */

int sbx_manager_new(const struct sbx_manager_config *cfg, struct sbx_manager **ret,
                    struct wr_err *e) {
        struct sbx_manager *m = calloc(1, sizeof(*m));
        if (!m)
                return err_set(e, -ENOMEM, "sandbox manager: out of memory");
        m->loop = cfg->loop;
        m->store = cfg->store;
        m->images = cfg->images;
        m->state_dir = strdup(cfg->state_dir);
        m->init_path = strdup(cfg->init_path);
        m->default_image = strdup(cfg->default_image ? cfg->default_image : "sandbox:latest");
        m->terminate_on_exit = cfg->terminate_on_exit;
        m->pool_target = cfg->warm_pool;
        m->build_min_free = cfg->build_min_free;
        m->default_disk = cfg->default_disk;
        if (asprintf(&m->disk_templates, "%s/disk-templates", cfg->state_dir) < 0)
                m->disk_templates = NULL;
        m->cgroup_mode = RT_CGROUP_AUTO;
        m->priv = cfg->priv;
        if (m->priv && uv_async_init(m->loop, &m->priv_restarted, priv_restarted_cb) == 0) {
                m->priv_restarted.data = m;
                m->priv_restarted_open = true;
                priv_client_on_restart(m->priv, priv_restarted, m);
        }
        m->uid_lock_dir = -1;
        if (!cfg->userns_off) {
                m->uids = calloc(1, sizeof(*m->uids));
                uid_locks_open(m);
        }
        if (!m->state_dir || !m->init_path || !m->default_image || !m->disk_templates ||
            (!cfg->userns_off && !m->uids)) {
                sbx_manager_free(m);
                return err_set(e, -ENOMEM, "sandbox manager: out of memory");
        }
        char dir[PATH_MAX];
        snprintf(dir, sizeof(dir), "%s/sandboxes", m->state_dir);
        if (mkdir(dir, 0700) < 0 && errno != EEXIST) {
                int r = -errno;
                sbx_manager_free(m);
                return err_set(e, r, "sandbox manager: mkdir %s", dir);
        }
        /* under --privsep the privileged half of the network is
         * warren-priv's (a dropped warrend is not root: phase 5) */
        if (geteuid() != 0 && !cfg->priv) {
                log_warn("network: not root: sandboxes get no network (and will not start)");
        } else if (!cfg->sandbox_cidr || strcmp(cfg->sandbox_cidr, "none") != 0) {
                struct sbx_network_config nc = {.state_dir = m->state_dir,
                                                .cidr = cfg->sandbox_cidr,
                                                .upstream_dns = cfg->upstream_dns,
                                                .egress_path = cfg->egress_path,
                                                .signer_path = cfg->signer_path,
                                                .egress_upstream_ca = cfg->egress_upstream_ca,
                                                .deny_ports = cfg->deny_ports,
                                                .n_deny_ports = cfg->n_deny_ports,
                                                .loop = cfg->loop,
                                                .priv = m->priv,
                                                .cgroup_mode = (int) m->cgroup_mode};
                int r = sbx_network_new(&nc, &m->net, e);
                if (r < 0) {
                        sbx_manager_free(m);
                        return r;
                }
        }
        sbx_recover(m);
        int r = sbx_pool_start(m);
        if (r < 0) {
                sbx_manager_free(m);
                return err_set(e, r, "sandbox manager: warm pool");
        }
        *ret = m;
        return 0;
}

void sbx_manager_free(struct sbx_manager *m) {
        if (!m)
                return;
        m->freeing = true;
        sbx_pool_stop(m);
        for (struct sbx *sb = m->list; sb; sb = sb->next) {
                if (sb->state == SBX_DEAD)
                        continue;
                if (m->terminate_on_exit && !sb->remote) {
                        sb->term_reason = "warrend shut down";
                        sbx_finalize(sb);
                } else {
                        sbx_detach(sb);
                }
        }
        if (m->priv_restarted_open) {
                priv_client_on_restart(m->priv, NULL, NULL);
                uv_close((uv_handle_t *) &m->priv_restarted, priv_restarted_closed);
        }
        /* Let the handle close callbacks run, which unlink and free. */
        while (m->list || sbx_pool_busy(m) || m->net_jobs || m->priv_jobs || m->priv_restarted_open)
                uv_run(m->loop, UV_RUN_ONCE);
        sbx_cleanup_stop(m);
        sbx_diskguard_free(m);
        /* no create runs now: the writable layers' templates go (the next
         * start makes them again) */
        if (m->disk_templates)
                rt_disk_sweep(m->disk_templates);
        free(m->disk_templates);
        free(m->pool);
        sbx_argv_free(m->pool_layers);
        for (size_t i = 0; i < SBX_POOL_JOBS; i++)
                sbx_argv_free(m->pool_jobs[i].layers);
        sbx_exec_forget_all(m);
        free(m->identity_api_dir);
        free(m->state_dir);
        free(m->init_path);
        free(m->default_image);
        free(m->uids);
        /* the locks of sandboxes left running go with this process: the
         * next warrend takes them again at its recovery */
        for (size_t i = 0; m->uid_locks && i < SBX_UIDS_SLOTS; i++)
                if (m->uid_locks[i] >= 0)
                        close(m->uid_locks[i]);
        free(m->uid_locks);
        if (m->uid_lock_dir >= 0)
                close(m->uid_lock_dir);
        /* the table stays for the sandboxes that outlive warrend */
        sbx_network_free(m->net, m->terminate_on_exit);
        free(m);
}
