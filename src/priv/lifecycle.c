/* SPDX-License-Identifier: Apache-2.0 */
/* warren-priv, phase 2: the sandbox lifecycle (docs/privsep.md). warren-priv
 * creates, prestarts and starts sandboxes itself, keeps their struct
 * rt_sandbox handles keyed by id (it is init's parent), destroys them, and
 * re-attaches the sandboxes a previous warren-priv (or warrend) left
 * running. warrend gets init's pidfd and a connected ctl socket for each
 * and never holds a privileged handle. */
#include "priv/priv-internal.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "basic/log.h"
#include "priv/priv-cfg.h"
#include "runtime/ctl.h"

#ifndef F_SEAL_SEAL
#define F_SEAL_SEAL 0x0001
#define F_SEAL_SHRINK 0x0002
#define F_SEAL_GROW 0x0004
#define F_SEAL_WRITE 0x0008
#endif
#ifndef F_GET_SEALS
#define F_GET_SEALS 1034
#endif

static char state_dir[PATH_MAX];
static char init_path[PATH_MAX];

static uint32_t host_check;

/* phase 5: a state dir that is not root's belongs to a warrend that drops
 * to its owner (--user, docs/privsep.md): each sandbox's dir itself (not
 * what it holds) is given to that owner, so that warrend keeps its exec
 * spool (execs/) there. 0: root's, nothing given. */
static uid_t dir_uid;
static gid_t dir_gid;

void priv_sandbox_dir_give(const char *id) {
        if (!dir_uid)
                return;
        char p[PRIV_PATH_MAX];
        snprintf(p, sizeof(p), "%s/%s", PRIV_ROOT_SANDBOXES, id);
        int fd = priv_open_beneath(p, O_PATH | O_DIRECTORY);
        if (fd < 0 || fchownat(fd, "", dir_uid, dir_gid, AT_EMPTY_PATH) < 0)
                log_warn("warren-priv: give %s to uid %u: %s (its exec spool will be missing)", p,
                         (unsigned) dir_uid, strerror(fd < 0 ? -fd : errno));
        if (fd >= 0)
                close(fd);
}

bool priv_drop_gid(gid_t *ret) {
        if (!dir_uid)
                return false;
        *ret = dir_gid;
        return true;
}

uint32_t priv_lifecycle_host_check(void) {
        return host_check;
}

int priv_lifecycle_init(const char *sd, const char *init) {
        snprintf(state_dir, sizeof(state_dir), "%s", sd);
        struct stat st;
        if (stat(state_dir, &st) == 0 && st.st_uid != 0 && st.st_gid != 0) {
                dir_uid = st.st_uid;
                dir_gid = st.st_gid;
        }
        if (!init)
                return 0;
        if (init[0] != '/' || strlen(init) >= sizeof(init_path))
                return -EINVAL;
        snprintf(init_path, sizeof(init_path), "%s", init);
        /* the seccomp filter, capability set and warren-init's sealed memfd,
         * once, before the first create */
        struct wr_err e = {0};
        int r = rt_prepare(init_path, RT_CGROUP_AUTO, &e);
        if (r < 0) {
                host_check = (uint32_t) (-r < 4096 ? -r : EIO);
                log_warn("warren-priv: %s (sandboxes will fail to start)", e.msg);
        }
        return 0;
}

/* ---- the handles warren-priv owns, keyed by id ----
 *
 * One per sandbox it created, prestarted or attached; a request holds its
 * entry alone (busy; others wait). Removed when the sandbox is destroyed. */

struct owned {
        struct owned *next;
        char id[PRIV_ID_MAX];
        struct rt_sandbox *sb;
        bool busy;
};

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static struct owned *owned;

/* The entry of id, waited for until free and marked busy; NULL: none. */
static struct owned *owned_take(const char *id) {
        pthread_mutex_lock(&mu);
        struct owned *o;
        for (;;) {
                for (o = owned; o && strcmp(o->id, id) != 0; o = o->next)
                        ;
                if (!o || !o->busy)
                        break;
                pthread_cond_wait(&cv, &mu);
        }
        if (o)
                o->busy = true;
        pthread_mutex_unlock(&mu);
        return o;
}

static void owned_give(struct owned *o) {
        pthread_mutex_lock(&mu);
        o->busy = false;
        pthread_cond_broadcast(&cv);
        pthread_mutex_unlock(&mu);
}

/* A new entry for id holding sb, busy (give it back with owned_give). */
static struct owned *owned_add(const char *id, struct rt_sandbox *sb) {
        struct owned *o = calloc(1, sizeof(*o));
        if (!o)
                return NULL;
        snprintf(o->id, sizeof(o->id), "%s", id);
        o->sb = sb;
        o->busy = true;
        pthread_mutex_lock(&mu);
        o->next = owned;
        owned = o;
        pthread_mutex_unlock(&mu);
        return o;
}

/* Unlink a busy entry and free it (not its handle). */
static void owned_remove(struct owned *o) {
        pthread_mutex_lock(&mu);
        for (struct owned **pp = &owned; *pp; pp = &(*pp)->next)
                if (*pp == o) {
                        *pp = o->next;
                        break;
                }
        pthread_cond_broadcast(&cv);
        pthread_mutex_unlock(&mu);
        free(o);
}

static bool same_init(struct rt_sandbox *sb, const struct priv_target *t) {
        uint64_t st = 0;
        return rt_sandbox_pid(sb) == (pid_t) t->pid && rt_sandbox_start_time(sb, &st) >= 0 &&
               st == t->start_time;
}

struct rt_sandbox *priv_owned_get(const struct priv_target *t) {
        struct owned *o = owned_take(t->id);
        if (!o)
                return NULL;
        if (!same_init(o->sb, t)) {
                owned_give(o);
                return NULL;
        }
        return o->sb;
}

void priv_owned_put(struct rt_sandbox *sb) {
        pthread_mutex_lock(&mu);
        for (struct owned *o = owned; o; o = o->next)
                if (o->sb == sb) {
                        o->busy = false;
                        break;
                }
        pthread_cond_broadcast(&cv);
        pthread_mutex_unlock(&mu);
}

/* ---- requests ---- */

static int fail(struct priv_result *res, int r, const char *fmt, ...)
        __attribute__((format(printf, 3, 4)));
static int fail(struct priv_result *res, int r, const char *fmt, ...) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(res->msg, sizeof(res->msg), fmt, ap);
        va_end(ap);
        res->err = r < 0 ? -r : r;
        return 0;
}

int priv_memfd_read(int fd, size_t len, const char *what, char **ret, struct wr_err *e) {
        int seals = fcntl(fd, F_GET_SEALS);
        int want = F_SEAL_SEAL | F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE;
        if (seals < 0 || (seals & want) != want)
                return err_set(e, -EACCES, "%s: its fd is not a sealed memfd", what);
        struct stat st;
        if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || (size_t) st.st_size != len)
                return err_set(e, -EINVAL, "%s: its memfd holds %lld bytes, not %zu", what,
                               (long long) st.st_size, len);
        char *b = malloc(len ? len : 1);
        if (!b)
                return err_set(e, -ENOMEM, "%s: out of memory", what);
        size_t off = 0;
        while (off < len) {
                ssize_t n = pread(fd, b + off, len - off, (off_t) off);
                if (n <= 0) {
                        free(b);
                        return err_set(e, n < 0 ? -errno : -EIO, "%s: read its memfd", what);
                }
                off += (size_t) n;
        }
        *ret = b;
        return 0;
}

/* What a config request becomes for the runtime (strings point into the
 * blob or into this). */
struct build {
        struct rt_sandbox_config cfg;
        struct priv_cfg_view v;
        char dir[PATH_MAX], tmpl[PATH_MAX];
        char *layer_paths[PRIV_LAYERS_MAX];
        struct rt_mount mounts[PRIV_BIND_MAX];
        struct rt_net net;
        int here[PRIV_BIND_MAX]; /* phase 5: bind sources reopened here (bind_here) */
        size_t n_here;
};

static void build_done(struct build *b) {
        for (size_t i = 0; i < b->v.n_layers; i++)
                free(b->layer_paths[i]);
        for (size_t i = 0; i < b->n_here; i++)
                close(b->here[i]);
}

/* phase 5: a dropped warrend lives in a mount namespace of its own, and a
 * mount of another namespace cannot be cloned (open_tree: EINVAL). The
 * same inode, opened in ours: the fd's path (warrend's binds mirror the
 * host's paths), opened O_PATH | O_NOFOLLOW here, accepted only when it
 * is the very inode warrend passed (st_dev and st_ino). -1: keep fd (not
 * dropped, or no such path here). */
static int bind_here(int fd) {
        if (!dir_uid)
                return -1;
        char link[64], path[PATH_MAX];
        snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
        ssize_t n = readlink(link, path, sizeof(path) - 1);
        if (n <= 0 || path[0] != '/')
                return -1;
        path[n] = 0;
        int here = open(path, O_PATH | O_NOFOLLOW | O_CLOEXEC);
        struct stat a, b;
        if (here < 0)
                return -1;
        if (fstat(fd, &a) < 0 || fstat(here, &b) < 0 || a.st_dev != b.st_dev ||
            a.st_ino != b.st_ino) {
                close(here);
                return -1;
        }
        return here;
}

/* c + blob + the bind fds -> b->cfg. Layers are confined: below the state
 * dir, no symlink on the way (checked once here; the state dir is
 * warren-priv's and warrend's only). */
static int build_cfg(const struct priv_sandbox_cfg *c, const char *blob, const int *binds,
                     struct build *b, struct wr_err *e) {
        int r = priv_cfg_decode(c, blob, c->blob_len, &b->v, e);
        if (r < 0)
                return r;
        snprintf(b->dir, sizeof(b->dir), "%s/%s/%s", state_dir, PRIV_ROOT_SANDBOXES, c->id);
        for (size_t i = 0; i < b->v.n_layers; i++) {
                int fd = priv_open_beneath(b->v.layers[i], O_PATH);
                if (fd < 0)
                        return err_set(e, fd, "layer %s: %s", b->v.layers[i], strerror(-fd));
                close(fd);
                if (asprintf(&b->layer_paths[i], "%s/%s", state_dir, b->v.layers[i]) < 0) {
                        b->layer_paths[i] = NULL;
                        return err_set(e, -ENOMEM, "out of memory");
                }
        }
        size_t k = 0;
        for (size_t i = 0; i < b->v.n_mounts; i++) {
                const struct priv_cfg_mount *m = &b->v.mounts[i];
                int src = m->kind == RT_MOUNT_BIND ? binds[k++] : -1;
                int here = src >= 0 ? bind_here(src) : -1;
                if (here >= 0)
                        src = b->here[b->n_here++] = here;
                b->mounts[i] = (struct rt_mount){
                        .kind = (enum rt_mount_kind) m->kind,
                        .target = m->target,
                        .flags = m->flags,
                        .source_fd = src,
                        .data = m->data,
                        .len = m->len,
                        .size = m->size,
                        .mode = (mode_t) m->mode,
                };
        }
        if (c->flags & PRIV_CFG_DISK_TEMPLATE)
                snprintf(b->tmpl, sizeof(b->tmpl), "%s/disk-templates", state_dir);
        if (c->flags & PRIV_CFG_NET) {
                snprintf(b->net.peer, sizeof(b->net.peer), "%s", c->net_peer);
                b->net.addr = c->net_addr;
                b->net.gateway = c->net_gateway;
                b->net.prefix = (uint8_t) c->net_prefix;
        }
        b->cfg = (struct rt_sandbox_config){
                .id = c->id,
                .dir = b->dir,
                .disk_template_dir = b->tmpl[0] ? b->tmpl : NULL,
                .layers = (const char *const *) b->layer_paths,
                .n_layers = b->v.n_layers,
                .hostname = b->v.hostname,
                .init_path = init_path,
                .limits = {.memory_bytes = c->memory_bytes,
                           .cpu_millicores = c->cpu_millicores,
                           .pids_max = c->pids_max,
                           .tmp_bytes = c->tmp_bytes,
                           .nofile = c->nofile,
                           .disk_bytes = c->disk_bytes},
                .resolv_conf = b->v.resolv_conf,
                .log_fd = -1,
                .cgroup_mode = (enum rt_cgroup_mode) c->cgroup_mode,
                .unlimited = (c->flags & PRIV_CFG_UNLIMITED) != 0,
                .mounts = b->mounts,
                .n_mounts = b->v.n_mounts,
                .net = (c->flags & PRIV_CFG_NET) ? &b->net : NULL,
                .uid_base = c->uid_base,
                .uid_count = c->uid_count,
        };
        return 0;
}

/* The answer for a handle: its init and two fds for warrend. */
static int answer(struct rt_sandbox *sb, struct priv_created *created, int out_fds[2],
                  struct wr_err *e) {
        uint64_t st = 0;
        pid_t pid = rt_sandbox_pid(sb);
        if (pid <= 0 || rt_sandbox_start_time(sb, &st) < 0)
                return err_set(e, -ESRCH, "sandbox %s: init is gone", rt_sandbox_id(sb));
        int pidfd = fcntl(rt_sandbox_pidfd(sb), F_DUPFD_CLOEXEC, 3);
        if (pidfd < 0)
                return err_set(e, -errno, "sandbox %s: dup its pidfd: %m", rt_sandbox_id(sb));
        int ctl = -1;
        int r = rt_ctl_connect(rt_sandbox_ctl_path(sb), &ctl, e);
        if (r < 0) {
                close(pidfd);
                return err_prefix(e, r, "sandbox %s: connect to warren-init", rt_sandbox_id(sb));
        }
        created->pid = (int32_t) pid;
        created->start_time = st;
        out_fds[0] = pidfd;
        out_fds[1] = ctl;
        return 1;
}

static int do_config(const struct priv_req *req, int *fds, size_t n_fds, struct priv_result *res,
                     struct priv_created *created, int out_fds[2]) {
        uint32_t t = req->hdr.type;
        const struct priv_sandbox_cfg *c = &req->cfg;
        const char *name = priv_type_name(t);
        if (!init_path[0])
                return fail(res, -EOPNOTSUPP, "%s: warren-priv was started without --init", name);
        struct wr_err e = {0};
        char *blob = NULL;
        int r = priv_memfd_read(fds[0], c->blob_len, "config", &blob, &e);
        if (r < 0)
                return fail(res, r, "%s: %s", name, e.msg);
        struct build *b = calloc(1, sizeof(*b));
        if (!b) {
                free(blob);
                return fail(res, -ENOMEM, "%s: out of memory", name);
        }
        r = build_cfg(c, blob, fds + 1, b, &e);
        int ret = 0;
        struct owned *o_prev;
        if (r < 0) {
                ret = fail(res, r, "%s: %s", name, e.msg);
        } else if (t == PRIV_SANDBOX_START) {
                struct owned *o = owned_take(c->id);
                if (!o) {
                        ret = fail(res, -ESTALE,
                                   "start sandbox: no prestarted sandbox %s here (warren-priv "
                                   "restarted?)",
                                   c->id);
                } else {
                        r = rt_sandbox_start_send(o->sb, &b->cfg, &e);
                        if (r >= 0)
                                r = rt_sandbox_start_wait(o->sb, &e);
                        owned_give(o);
                        if (r < 0)
                                ret = fail(res, r, "%s", e.msg);
                }
        } else if ((o_prev = owned_take(c->id))) {
                /* one sandbox per id: the old one is warrend's to destroy */
                owned_give(o_prev);
                ret = fail(res, -EEXIST, "%s: warren-priv holds a sandbox %s already", name, c->id);
        } else {
                struct rt_sandbox *sb = NULL;
                r = t == PRIV_SANDBOX_CREATE ? rt_sandbox_create(&b->cfg, &sb, &e)
                                             : rt_sandbox_prestart(&b->cfg, &sb, &e);
                if (r < 0) {
                        ret = fail(res, r, "%s", e.msg);
                } else {
                        priv_sandbox_dir_give(c->id);
                        struct owned *o = owned_add(c->id, sb);
                        r = o ? answer(sb, created, out_fds, &e) : -ENOMEM;
                        if (r < 0) {
                                /* warrend gets nothing of it: it goes */
                                struct wr_err de = {0};
                                if (rt_sandbox_destroy(sb, &de) < 0)
                                        log_warn("warren-priv: %s", de.msg);
                                rt_sandbox_free(sb);
                                if (o)
                                        owned_remove(o);
                                ret = fail(res, r, "%s", o ? e.msg : "out of memory");
                        } else {
                                owned_give(o);
                                ret = 1;
                        }
                }
        }
        build_done(b);
        free(b);
        free(blob);
        return ret;
}

static int do_destroy(const struct priv_destroy *d, struct priv_result *res) {
        const struct priv_target *t = &d->t;
        struct wr_err e = {0};
        char dir[PATH_MAX];
        snprintf(dir, sizeof(dir), "%s/%s/%s", state_dir, PRIV_ROOT_SANDBOXES, t->id);
        bool del_link = d->peer[0] && !d->keep_link;
        struct owned *o = owned_take(t->id);
        if (o) {
                if (d->keep_link)
                        rt_sandbox_net_disown(o->sb);
                int r = rt_sandbox_destroy(o->sb, &e);
                if (r < 0) {
                        owned_give(o); /* a retry destroys it */
                        return fail(res, r, "%s", e.msg);
                }
                rt_sandbox_free(o->sb);
                owned_remove(o);
                return 0;
        }
        /* not ours (a restarted warren-priv): its init if it still runs
         * (checked as SANDBOX_ATTACH checks it), then the host side */
        int r;
        if (t->pid > 0) {
                struct rt_sandbox *sb = NULL;
                struct wr_err ae = {0};
                r = rt_sandbox_attach(t->id, dir, (pid_t) t->pid, t->start_time,
                                      (enum rt_cgroup_mode) t->cgroup_mode, &sb, &ae);
                if (r >= 0) {
                        r = rt_sandbox_destroy(sb, &e);
                        rt_sandbox_free(sb);
                        if (r < 0)
                                return fail(res, r, "%s", e.msg);
                }
        }
        r = rt_sandbox_cleanup(t->id, dir, (enum rt_cgroup_mode) t->cgroup_mode, &e);
        if (r < 0)
                return fail(res, r, "%s", e.msg);
        if (del_link && (r = rt_net_link_delete(d->peer, &e)) < 0)
                return fail(res, r, "%s", e.msg);
        return 0;
}

/* SANDBOX_ATTACH and CTL_CONNECT: the handle of t, attached when
 * warren-priv holds none. */
static int do_attach(const struct priv_target *t, struct priv_result *res,
                     struct priv_created *created, int out_fds[2]) {
        struct wr_err e = {0};
        struct owned *o = owned_take(t->id);
        if (o && !same_init(o->sb, t)) {
                owned_give(o);
                return fail(res, -ESRCH, "sandbox %s: its init is not pid %d (start time %llu)",
                            t->id, t->pid, (unsigned long long) t->start_time);
        }
        if (!o) {
                char dir[PATH_MAX];
                snprintf(dir, sizeof(dir), "%s/%s/%s", state_dir, PRIV_ROOT_SANDBOXES, t->id);
                struct rt_sandbox *sb = NULL;
                int r = rt_sandbox_attach(t->id, dir, (pid_t) t->pid, t->start_time,
                                          (enum rt_cgroup_mode) t->cgroup_mode, &sb, &e);
                if (r < 0)
                        return fail(res, r, "%s", e.msg);
                if (!(o = owned_add(t->id, sb))) {
                        rt_sandbox_free(sb);
                        return fail(res, -ENOMEM, "out of memory");
                }
        }
        int r = answer(o->sb, created, out_fds, &e);
        owned_give(o);
        return r < 0 ? fail(res, r, "%s", e.msg) : 1;
}

int priv_lifecycle_run(const struct priv_req *req, int *fds, size_t n_fds, struct priv_result *res,
                       struct priv_created *created, int out_fds[2]) {
        int r = 0;
        switch (req->hdr.type) {
        case PRIV_SANDBOX_CREATE:
        case PRIV_SANDBOX_PRESTART:
        case PRIV_SANDBOX_START:
                r = do_config(req, fds, n_fds, res, created, out_fds);
                break;
        case PRIV_SANDBOX_DESTROY:
                r = do_destroy(&req->destroy, res);
                break;
        case PRIV_SANDBOX_ATTACH:
        case PRIV_CTL_CONNECT:
                r = do_attach(&req->target, res, created, out_fds);
                break;
        default:
                r = fail(res, -EPROTO, "not a lifecycle request");
        }
        priv_close_fds(fds, n_fds);
        return r;
}
