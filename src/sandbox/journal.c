/* SPDX-License-Identifier: Apache-2.0 */
/* The per-exec change journal and rollback: see journal.h.
 *
 *   begin   (loop) open the journal (upper dir, object store, the image's
 *           layers) -> (worker) walk the upper dir, copy the bytes of
 *           upper files not yet in the object store -> (loop) a BEGUN
 *           record; the API starts the exec and binds its id
 *   end     (loop, exec exited) -> (worker) walk again, diff -> (loop)
 *           the changes; the walk before is dropped
 *   changes (loop) ended: answer; running: (worker) walk now, diff
 *   rollback (loop) checks, freeze -> (worker) walk now, compare every
 *           changed path with its state after the exec, restore the
 *           state before through the sandbox's root -> (loop) thaw
 *
 * The upper dir is reached through io_walk / io_open / io_write: in
 * process (warrend's own fds, host ids), or under --privsep through a
 * warren-upper session opened on the worker for the work (the sandbox's
 * ids; the walk before an exec keeps its session for the walk after).
 */
#include "sandbox/journal.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "basic/log.h"
#include "basic/macro.h"
#include "basic/rmrf.h"
#include "image/image.h"
#include "priv/priv-proto.h"
#include "sandbox/journal-upper.h"
#include "sandbox/sandbox-internal.h"

/* what the object store may hold per sandbox */
#define OBJ_BUDGET (512ull << 20)
/* entries of one walk */
#define WALK_MAX JT_WALK_MAX

enum jr_state { JR_BEGUN, JR_RUNNING, JR_ENDED, JR_ROLLED_BACK };

struct work;

struct jr_exec {
        struct jr_exec *next; /* newer first */
        uint64_t token, seq;
        char exec_id[24];
        enum jr_state state;
        bool exited;          /* the process exited */
        bool ending;          /* the walk after it is on a worker */
        int busy;             /* workers reading pre */
        struct work *waiting; /* requests for after that walk */
        struct jt_tree pre;
        /* --privsep: the session of the walk before, kept while the exec
         * runs for the walk after it (no warren-upper to start at its
         * exit: the walk follows the exit by a walk's time, as in
         * process) */
        int sock;
        struct jt_change *changes;
        size_t n_changes;
        bool complete;
};

struct sbx_journal {
        int refs;
        struct sbx *sb; /* NULL once the sandbox is gone */
        struct sbx_manager *m;
        char sb_id[32];
        bool all;
        int upper_fd, obj_fd;
        uint32_t id_base; /* its user namespace range (0: none): owners in
                           * the journal are ids inside */
        /* --privsep (phase 4b-2): the upper dir is read and written by
         * warren-upper sessions (journal-upper.h), upper_fd unused */
        bool priv;
        struct sbx_upper_ref ref;
        int *lower_fds;
        size_t n_lower;
        struct jr_exec *execs;
        uint64_t next_token, next_seq;
        bool rolling_back;
};

static int sys_openat2(int dirfd, const char *path, uint64_t flags, uint64_t resolve) {
        struct open_how how = {.flags = flags, .resolve = resolve};
        return (int) syscall(SYS_openat2, dirfd, path, &how, sizeof(how));
}

static void jr_exec_free(struct jr_exec *x) {
        if (!x)
                return;
        jt_tree_free(&x->pre);
        jt_changes_free(x->changes, x->n_changes);
        safe_close(x->sock);
        free(x);
}

static void journal_unref(struct sbx_journal *j) {
        if (!j || --j->refs > 0)
                return;
        while (j->execs) {
                struct jr_exec *x = j->execs;
                j->execs = x->next;
                jr_exec_free(x);
        }
        safe_close(j->upper_fd);
        safe_close(j->obj_fd);
        for (size_t i = 0; i < j->n_lower; i++)
                safe_close(j->lower_fds[i]);
        free(j->lower_fds);
        free(j);
}

void sbx_journal_free(struct sbx *sb) {
        if (!sb || !sb->journal)
                return;
        sb->journal->sb = NULL;
        journal_unref(TAKE_PTR(sb->journal));
}

/* sb's journal, opened on first use. */
static int journal_get(struct sbx *sb, struct sbx_journal **ret, struct wr_err *e) {
        if (sb->journal) {
                *ret = sb->journal;
                return 0;
        }
        struct sbx_manager *m = sb->m;
        if (!m->images)
                return err_setx(e, -ENODEV, WR_STATUS_FAILED_PRECONDITION, WR_FAULT_SERVICE,
                                "journal: the image store is unavailable");
        struct sbx_journal *j = calloc(1, sizeof(*j));
        if (!j)
                return err_set(e, -ENOMEM, "journal: out of memory");
        j->refs = 1;
        j->sb = sb;
        j->m = m;
        j->upper_fd = j->obj_fd = -EBADF;
        snprintf(j->sb_id, sizeof(j->sb_id), "%s", sb->id);
        j->id_base = sb->uid_slot >= 0 ? sbx_uids_base(sb->uid_slot) : 0;
        int r = sbx_upper_ref(m, sb, "journal", &j->ref, e);
        if (r == 0)
                j->priv = true;
        else if (r != -ENOENT)
                goto fail;
        else if ((j->upper_fd = sbx_upper_open(sb, "journal", e)) < 0) {
                r = j->upper_fd;
                goto fail;
        }
        char path[PATH_MAX];
        const char *dir = rt_sandbox_dir(sb->rt);
        snprintf(path, sizeof(path), "%s/journal", dir);
        if (mkdir(path, 0700) < 0 && errno != EEXIST) {
                r = err_set(e, -errno, "journal: mkdir %s: %m", path);
                goto fail;
        }
        j->obj_fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (j->obj_fd < 0) {
                r = err_set(e, -errno, "journal: open %s: %m", path);
                goto fail;
        }
        struct img_info *img = NULL;
        if ((r = img_store_resolve(m->images, sb->image_id, &img, e)) < 0) {
                err_prefix(e, r, "journal: the sandbox's image");
                goto fail;
        }
        j->lower_fds = calloc(img->n_layers ? img->n_layers : 1, sizeof(int));
        if (!j->lower_fds) {
                img_info_free(img);
                r = err_set(e, -ENOMEM, "journal: out of memory");
                goto fail;
        }
        for (size_t i = 0; i < img->n_layers; i++) {
                int fd = open(img->layer_dirs[i], O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                if (fd < 0) {
                        r = err_set(e, -errno, "journal: open layer %s: %m", img->layer_dirs[i]);
                        img_info_free(img);
                        goto fail;
                }
                j->lower_fds[j->n_lower++] = fd;
        }
        img_info_free(img);
        sb->journal = *ret = j;
        return 0;
fail:
        journal_unref(j);
        return r;
}

static int running_sandbox(struct sbx_manager *m, const char *key, struct sbx **ret,
                           struct wr_err *e) {
        return sbx_running(m, key, ret, e);
}

static struct jr_exec *find_token(struct sbx_journal *j, uint64_t token) {
        for (struct jr_exec *x = j->execs; x; x = x->next)
                if (x->token == token)
                        return x;
        return NULL;
}

static struct jr_exec *find_exec(struct sbx_journal *j, const char *exec_id) {
        for (struct jr_exec *x = j->execs; x; x = x->next)
                if (x->state != JR_BEGUN && !strcmp(x->exec_id, exec_id))
                        return x;
        return NULL;
}

static void unlink_exec(struct sbx_journal *j, struct jr_exec *x) {
        for (struct jr_exec **p = &j->execs; *p; p = &(*p)->next)
                if (*p == x) {
                        *p = x->next;
                        return;
                }
}

/* Keep the newest SBX_JOURNAL_KEEP; older ones that no worker reads go. */
static void trim(struct sbx_journal *j) {
        size_t n = 0;
        for (struct jr_exec **p = &j->execs; *p;) {
                struct jr_exec *x = *p;
                if (++n > SBX_JOURNAL_KEEP && x->busy == 0 && !x->ending &&
                    (x->state == JR_ENDED || x->state == JR_ROLLED_BACK)) {
                        *p = x->next;
                        jr_exec_free(x);
                        continue;
                }
                p = &x->next;
        }
}

static void unbusy(struct jr_exec *x) {
        if (--x->busy == 0 && x->state >= JR_ENDED && !x->ending)
                jt_tree_free(&x->pre);
}

/* --- the object store --- */

/* The object store's names, sorted (one readdir instead of a stat per
 * file); each name carries its size (jt_object_name). */
struct names {
        char **v;
        size_t n, cap;
};

static void names_free(struct names *l) {
        for (size_t i = 0; i < l->n; i++)
                free(l->v[i]);
        free(l->v);
        *l = (struct names){0};
}

static int names_add(struct names *l, const char *name) {
        if (l->n == l->cap) {
                size_t cap = l->cap ? l->cap * 2 : 64;
                char **v = realloc(l->v, cap * sizeof(*v));
                if (!v)
                        return -ENOMEM;
                l->v = v;
                l->cap = cap;
        }
        if (!(l->v[l->n] = strdup(name)))
                return -ENOMEM;
        l->n++;
        return 0;
}

static int cmp_str(const void *a, const void *b) {
        return strcmp(*(char *const *) a, *(char *const *) b);
}

static void names_sort(struct names *l) {
        if (l->n)
                qsort(l->v, l->n, sizeof(l->v[0]), cmp_str);
}

static bool names_has(const struct names *l, const char *name) {
        return l->n && bsearch(&name, l->v, l->n, sizeof(l->v[0]), cmp_str) != NULL;
}

static uint64_t name_size(const char *name) {
        const char *dash = strrchr(name, '-');
        return dash ? strtoull(dash + 1, NULL, 10) : 0;
}

static int list_store(int obj_fd, struct names *out, uint64_t *bytes) {
        *bytes = 0;
        int d = openat(obj_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (d < 0)
                return -errno;
        DIR *dir = fdopendir(d);
        if (!dir) {
                close(d);
                return -ENOMEM;
        }
        struct dirent *de;
        int r = 0;
        while ((de = readdir(dir)))
                if (de->d_name[0] != '.') {
                        if ((r = names_add(out, de->d_name)) < 0)
                                break;
                        *bytes += name_size(de->d_name);
                }
        closedir(dir);
        names_sort(out);
        return r;
}

/* Save the bytes of every regular file of t (an upper-dir walk) that the
 * store lacks, as far as the budget goes; marks what is saved. Before
 * that, over half the budget, drop objects that neither a kept journal
 * (keep) nor a current file needs. */
struct work;
static int io_open(struct work *w, const char *path);

static void save_objects(struct work *w, int obj_fd, struct jt_tree *t, const struct names *keep) {
        struct names have = {0}, want = {0};
        uint64_t used = 0;
        if (list_store(obj_fd, &have, &used) < 0)
                goto out;
        for (size_t i = 0; i < t->n; i++) {
                const struct jt_ent *x = &t->v[i];
                char name[96];
                if (x->type != JT_FILE)
                        continue;
                jt_object_name(x->dev, x->ino, x->ctime_ns, x->size, name, sizeof(name));
                if (names_add(&want, name) < 0)
                        goto out;
        }
        names_sort(&want);
        if (used > OBJ_BUDGET / 2)
                for (size_t i = 0; i < have.n; i++)
                        if (!names_has(&want, have.v[i]) && !names_has(keep, have.v[i]) &&
                            unlinkat(obj_fd, have.v[i], 0) == 0)
                                used -= MIN(used, name_size(have.v[i]));
        for (size_t i = 0; i < t->n; i++) {
                struct jt_ent *x = &t->v[i];
                if (x->type != JT_FILE)
                        continue;
                char name[96];
                jt_object_name(x->dev, x->ino, x->ctime_ns, x->size, name, sizeof(name));
                struct stat st;
                if (names_has(&have, name)) {
                        x->saved = true;
                        continue;
                }
                if (used + x->size > OBJ_BUDGET)
                        continue;
                _cleanup_close_ int src = io_open(w, x->path);
                if (src == -EPROTO || src == -ETIMEDOUT || src == -EIO)
                        break; /* the session broke: nothing more saved */
                if (src < 0 || fstat(src, &st) < 0 || !S_ISREG(st.st_mode) || st.st_ino != x->ino ||
                    st.st_dev != x->dev ||
                    st.st_ctim.tv_sec * 1000000000ll + st.st_ctim.tv_nsec != x->ctime_ns)
                        continue; /* changed since the walk: not this version */
                _cleanup_close_ int dst =
                        openat(obj_fd, ".", O_WRONLY | O_TMPFILE | O_CLOEXEC, 0600);
                if (dst < 0 || jt_copy_fd(src, dst) < 0)
                        continue;
                char fdpath[64];
                snprintf(fdpath, sizeof(fdpath), "/proc/self/fd/%d", dst);
                if (linkat(AT_FDCWD, fdpath, obj_fd, name, AT_SYMLINK_FOLLOW) < 0 &&
                    errno != EEXIST)
                        continue;
                used += x->size;
                x->saved = true;
        }
out:
        names_free(&have);
        names_free(&want);
}

/* --- work on workers --- */

enum work_kind { W_BEGIN, W_END, W_CHANGES, W_ROLLBACK };

struct work {
        uv_work_t w;
        struct work *next; /* in jr_exec.waiting */
        enum work_kind kind;
        struct sbx_journal *j;
        struct jr_exec *x;
        uint64_t token;
        struct jt_tree tree;
        struct jt_change *changes;
        size_t n_changes;
        struct names keep; /* object names kept journals need (begin: gc) */
        int root_fd;
        int sock;      /* --privsep: the session with warren-upper */
        uint64_t t_ns; /* on the worker */
        bool force, froze, complete;
        int r;
        struct wr_err e;
        void *fn;
        void *userdata;
};

static void work_free(struct work *w) {
        jt_tree_free(&w->tree);
        jt_changes_free(w->changes, w->n_changes);
        names_free(&w->keep);
        safe_close(w->root_fd);
        safe_close(w->sock);
        free(w);
}

/* --- the upper dir: in process, or through warren-upper (--privsep) --- */

/* A walk of the upper dir into t (zeroed); owners as ids inside. */
static int io_walk(struct work *w, struct jt_tree *t) {
        if (w->j->priv)
                return jup_walk(w->sock, t, &w->e);
        t->id_base = w->j->id_base;
        t->id_count = w->j->id_base ? SBX_UIDS_COUNT : 0;
        return jt_walk(w->j->upper_fd, WALK_MAX, t, &w->e);
}

/* A regular file of the upper dir, read-only (checked by the caller). */
static int io_open(struct work *w, const char *path) {
        if (w->j->priv) {
                struct wr_err e = {0};
                return jup_open_file(w->sock, path, &e);
        }
        return jt_open_file(w->j->upper_fd, path);
}

/* One of the rollback's writes (PRIV_UPPER_OP_*) of path to its state s
 * (src_fd: PUT's bytes), through the sandbox's root: in process with the
 * ids mapped to the host's, or by warren-upper with the sandbox's own. */
static int io_write(struct work *w, uint32_t op, const char *path, const struct jt_state *s,
                    int src_fd) {
        uint32_t base = w->j->id_base, n = base ? SBX_UIDS_COUNT : 0;
        struct jt_attrs a = {
                .mode = s->mode, .uid = s->uid, .gid = s->gid, .mtime_ns = s->mtime_ns};
        if (w->j->priv) {
                struct wr_err e = {0};
                return jup_op(w->sock, op, path, &a, s->link ? s->link : "", src_fd, &e);
        }
        a.uid = wr_id_host(s->uid, base, n);
        a.gid = wr_id_host(s->gid, base, n);
        switch (op) {
        case PRIV_UPPER_OP_REMOVE:
                return jt_op_remove(w->root_fd, path);
        case PRIV_UPPER_OP_MKDIR:
                return jt_op_mkdir(w->root_fd, path, &a);
        case PRIV_UPPER_OP_ATTRS:
                return jt_op_attrs(w->root_fd, path, &a);
        case PRIV_UPPER_OP_PUT:
                return jt_op_put(w->root_fd, path, src_fd, &a);
        case PRIV_UPPER_OP_SYMLINK:
                return jt_op_symlink(w->root_fd, path, s->link ? s->link : "", &a);
        }
        return -EINVAL;
}

static int walk_upper(struct work *w) {
        return io_walk(w, &w->tree);
}

static bool changes_complete(const struct jt_change *v, size_t n) {
        for (size_t i = 0; i < n; i++)
                if (v[i].before.type == JT_FILE && v[i].before.layer == -1 && !v[i].before.saved &&
                    (v[i].kinds & (JT_MODIFIED | JT_DELETED)))
                        return false;
        return true;
}

static int queue(struct sbx_journal *j, struct work *w, struct wr_err *e);

/* rollback, on the worker: see apply() */
static int apply(struct work *w);
static void work_run_kind(struct work *w, struct sbx_journal *j);

static void work_run(uv_work_t *req) {
        struct work *w = req->data;
        struct sbx_journal *j = w->j;
        w->t_ns = sbx_mono_ns();
        if (j->priv && w->sock >= 0) {
                /* the session kept from the walk before (W_END) */
                work_run_kind(w, j);
                if (w->r >= 0)
                        goto out;
                log_debug("sandbox %s: journal: the kept warren-upper session failed (%s); "
                          "once more with a fresh session",
                          j->sb_id, w->e.msg);
                w->sock = safe_close(w->sock); /* broken meanwhile: once more, afresh */
                w->e = (struct wr_err){0};
                jt_tree_free(&w->tree);
                jt_changes_free(w->changes, w->n_changes);
                w->changes = NULL;
                w->n_changes = 0;
        }
        if (j->priv && (w->sock = jup_open(j->m, &j->ref, &w->e)) < 0)
                w->r = err_prefix(&w->e, w->sock, "journal");
        else
                work_run_kind(w, j);
out:
        /* warren-upper exits when its session closes; a walk before an
         * exec keeps it for the walk after (work_done) */
        if (w->kind != W_BEGIN || w->r < 0)
                w->sock = safe_close(w->sock);
        w->t_ns = sbx_mono_ns() - w->t_ns;
}

static void work_run_kind(struct work *w, struct sbx_journal *j) {
        switch (w->kind) {
        case W_BEGIN:
                if ((w->r = walk_upper(w)) < 0)
                        return;
                save_objects(w, j->obj_fd, &w->tree, &w->keep);
                return;
        case W_END:
        case W_CHANGES:
                if ((w->r = walk_upper(w)) < 0)
                        return;
                w->r = jt_diff(&w->x->pre, &w->tree, j->lower_fds, j->n_lower, &w->changes,
                               &w->n_changes, &w->e);
                w->complete = !w->x->pre.truncated && !w->tree.truncated &&
                              changes_complete(w->changes, w->n_changes);
                return;
        case W_ROLLBACK:
                w->r = apply(w);
                return;
        }
}

static void work_done(uv_work_t *req, int status) {
        struct work *w = req->data;
        struct sbx_journal *j = w->j;
        struct jr_exec *x = w->x;
        if (status < 0 && w->r == 0)
                w->r = err_set(&w->e, -ECANCELED, "journal: cancelled");
        static const char *const what[] = {"walk before", "walk after", "walk now", "rollback"};
        log_debug("sandbox %s: journal %s %s: %.2f ms (%zu entries)", j->sb_id, x ? x->exec_id : "",
                  what[w->kind], (double) w->t_ns / 1e6,
                  w->kind == W_BEGIN ? w->tree.n : w->n_changes);
        switch (w->kind) {
        case W_BEGIN: {
                sbx_journal_begun_fn fn = (sbx_journal_begun_fn) w->fn;
                if (w->r == 0 && !j->sb)
                        w->r = err_setx(&w->e, -EBUSY, WR_STATUS_FAILED_PRECONDITION,
                                        WR_FAULT_CLIENT, "sandbox %s ended", j->sb_id);
                if (w->r < 0) {
                        fn(w->r, 0, j->sb_id, &w->e, w->userdata);
                        break;
                }
                struct jr_exec *nx = calloc(1, sizeof(*nx));
                if (!nx) {
                        err_set(&w->e, -ENOMEM, "journal: out of memory");
                        fn(-ENOMEM, 0, j->sb_id, &w->e, w->userdata);
                        break;
                }
                nx->token = ++j->next_token;
                nx->seq = ++j->next_seq;
                nx->state = JR_BEGUN;
                nx->pre = w->tree;
                w->tree = (struct jt_tree){0};
                nx->sock = TAKE_FD(w->sock);
                nx->next = j->execs;
                j->execs = nx;
                trim(j);
                fn(0, nx->token, j->sb_id, NULL, w->userdata);
                break;
        }
        case W_END: {
                x->ending = false;
                if (w->r < 0) {
                        log_warn("sandbox %s: journal of %s: %s", j->sb_id, x->exec_id, w->e.msg);
                        x->complete = false;
                } else {
                        x->changes = TAKE_PTR(w->changes);
                        x->n_changes = w->n_changes;
                        w->n_changes = 0;
                        x->complete = w->complete;
                }
                x->state = JR_ENDED;
                x->busy++;
                unbusy(x);
                /* what waited for it */
                struct work *next;
                for (struct work *q = TAKE_PTR(x->waiting); q; q = next) {
                        next = q->next;
                        if (q->kind == W_ROLLBACK && !j->sb) {
                                sbx_journal_rollback_fn rfn = (sbx_journal_rollback_fn) q->fn;
                                err_setx(&q->e, -EBUSY, WR_STATUS_FAILED_PRECONDITION,
                                         WR_FAULT_CLIENT, "sandbox %s ended", j->sb_id);
                                rfn(-EBUSY, NULL, 0, &q->e, q->userdata);
                                x->busy--;
                                work_free(q);
                        } else if (q->kind == W_CHANGES) {
                                sbx_journal_changes_fn cfn = (sbx_journal_changes_fn) q->fn;
                                cfn(0, x->changes, x->n_changes, false, x->complete, NULL,
                                    q->userdata);
                                x->busy--;
                                work_free(q);
                        } else if (queue(j, q, &q->e) < 0) {
                                sbx_journal_rollback_fn rfn = (sbx_journal_rollback_fn) q->fn;
                                j->rolling_back = false;
                                if (q->froze && j->sb)
                                        (void) sbx_rt_freeze(j->sb->m, j->sb->rt, false, NULL);
                                rfn(-EIO, NULL, 0, &q->e, q->userdata);
                                x->busy--;
                                work_free(q);
                        }
                }
                break;
        }
        case W_CHANGES: {
                sbx_journal_changes_fn fn = (sbx_journal_changes_fn) w->fn;
                if (w->r < 0)
                        fn(w->r, NULL, 0, true, false, &w->e, w->userdata);
                else
                        fn(0, w->changes, w->n_changes, !x->exited, w->complete, NULL, w->userdata);
                unbusy(x);
                break;
        }
        case W_ROLLBACK: {
                sbx_journal_rollback_fn fn = (sbx_journal_rollback_fn) w->fn;
                j->rolling_back = false;
                if (w->froze && j->sb) {
                        struct wr_err fe = {0};
                        if (sbx_rt_freeze(j->sb->m, j->sb->rt, false, &fe) < 0)
                                log_warn("sandbox %s: thaw after a rollback: %s", j->sb_id, fe.msg);
                }
                if (w->r == 0)
                        x->state = JR_ROLLED_BACK;
                if (w->r < 0)
                        fn(w->r, NULL, 0, &w->e, w->userdata);
                else
                        fn(0, x->changes, x->n_changes, NULL, w->userdata);
                x->busy--;
                break;
        }
        }
        trim(j);
        journal_unref(j);
        work_free(w);
}

static int queue(struct sbx_journal *j, struct work *w, struct wr_err *e) {
        w->j = j;
        w->w.data = w;
        j->refs++;
        int r = uv_queue_work(j->m->loop, &w->w, work_run, work_done);
        if (r < 0) {
                j->refs--;
                return err_set(e, r, "journal: worker: %s", uv_strerror(r));
        }
        return 0;
}

static struct work *work_new(enum work_kind kind) {
        struct work *w = calloc(1, sizeof(*w));
        if (w) {
                w->kind = kind;
                w->root_fd = -EBADF;
                w->sock = -EBADF;
        }
        return w;
}

/* --- the API --- */

int sbx_journal_begin(struct sbx_manager *m, const char *sandbox, sbx_journal_begun_fn fn,
                      void *userdata, struct wr_err *e) {
        struct sbx *sb;
        struct sbx_journal *j;
        int r = running_sandbox(m, sandbox, &sb, e);
        if (r < 0 || (r = journal_get(sb, &j, e)) < 0)
                return r;
        struct work *w = work_new(W_BEGIN);
        if (!w)
                return err_set(e, -ENOMEM, "journal: out of memory");
        /* objects kept journals still need */
        for (struct jr_exec *x = j->execs; x; x = x->next)
                for (size_t i = 0; i < x->n_changes; i++) {
                        const struct jt_state *b = &x->changes[i].before;
                        if (b->type != JT_FILE || b->layer != -1 || !b->saved)
                                continue;
                        char name[96];
                        jt_object_name(b->dev, b->ino, b->ctime_ns, b->size, name, sizeof(name));
                        if (names_add(&w->keep, name) < 0) {
                                work_free(w);
                                return err_set(e, -ENOMEM, "journal: out of memory");
                        }
                }
        names_sort(&w->keep);
        w->fn = (void *) fn;
        w->userdata = userdata;
        if ((r = queue(j, w, e)) < 0)
                work_free(w);
        return r;
}

static struct sbx_journal *journal_of(struct sbx_manager *m, const char *sandbox_id) {
        struct sbx *sb = sbx_find_live(m, sandbox_id);
        return sb ? sb->journal : NULL;
}

void sbx_journal_bind(struct sbx_manager *m, const char *sandbox_id, uint64_t token,
                      const char *exec_id) {
        struct sbx_journal *j = journal_of(m, sandbox_id);
        struct jr_exec *x = j ? find_token(j, token) : NULL;
        if (!x || x->state != JR_BEGUN)
                return;
        snprintf(x->exec_id, sizeof(x->exec_id), "%s", exec_id);
        x->state = JR_RUNNING;
}

void sbx_journal_cancel(struct sbx_manager *m, const char *sandbox_id, uint64_t token) {
        struct sbx_journal *j = journal_of(m, sandbox_id);
        struct jr_exec *x = j ? find_token(j, token) : NULL;
        if (!x || x->state != JR_BEGUN || x->busy)
                return;
        unlink_exec(j, x);
        jr_exec_free(x);
}

bool sbx_journal_all(struct sbx_manager *m, const char *sandbox) {
        struct sbx *sb = sbx_find_live(m, sandbox);
        return sb && sb->journal_all;
}

void sbx_journal_set_all(struct sbx *sb, bool on) {
        sb->journal_all = on;
}

void sbx_journal_exec_ended(struct sbx *sb, const char *exec_id) {
        struct sbx_journal *j = sb->journal;
        struct jr_exec *x = j ? find_exec(j, exec_id) : NULL;
        if (!x || x->state != JR_RUNNING || x->ending)
                return;
        x->exited = true;
        struct work *w = work_new(W_END);
        struct wr_err e = {0};
        if (!w)
                goto fail;
        w->x = x;
        w->sock = TAKE_FD(x->sock);
        x->ending = true;
        x->busy++;
        if (queue(j, w, &e) < 0) {
                x->ending = false;
                x->busy--;
                work_free(w);
                goto fail;
        }
        return;
fail:
        log_warn("sandbox %s: journal of %s: no walk after it", sb->id, exec_id);
        x->state = JR_ENDED;
        x->complete = false;
        unbusy(x);
}

static int lookup_exec(struct sbx_manager *m, const char *sandbox, const char *exec_id,
                       struct sbx **rsb, struct jr_exec **rx, struct wr_err *e) {
        struct sbx *sb = sbx_find_live(m, sandbox);
        if (!sb) {
                struct store_sandbox row = {0};
                int r = sbx_lookup(m, sandbox, &row, e);
                store_sandbox_clear(&row);
                if (r < 0)
                        return r;
                return err_setx(e, -ENOENT, WR_STATUS_NOT_FOUND, WR_FAULT_CLIENT,
                                "exec %s: sandbox %s has ended and its journals with it", exec_id,
                                sandbox);
        }
        struct jr_exec *x = sb->journal ? find_exec(sb->journal, exec_id) : NULL;
        if (!x)
                return err_setx(e, -ENOENT, WR_STATUS_NOT_FOUND, WR_FAULT_CLIENT,
                                "exec %s: no journal in sandbox %s (start the exec with "
                                "journal=True, or create the sandbox with journal_execs; the "
                                "last %d journals are kept)",
                                exec_id, sb->id, SBX_JOURNAL_KEEP);
        *rsb = sb;
        *rx = x;
        return 0;
}

int sbx_journal_changes(struct sbx_manager *m, const char *sandbox, const char *exec_id,
                        sbx_journal_changes_fn fn, void *userdata, struct wr_err *e) {
        struct sbx *sb;
        struct jr_exec *x;
        int r = lookup_exec(m, sandbox, exec_id, &sb, &x, e);
        if (r < 0)
                return r;
        if (x->state >= JR_ENDED && !x->ending) {
                fn(0, x->changes, x->n_changes, false, x->complete, NULL, userdata);
                return 0;
        }
        struct work *w = work_new(W_CHANGES);
        if (!w)
                return err_set(e, -ENOMEM, "journal: out of memory");
        w->x = x;
        w->fn = (void *) fn;
        w->userdata = userdata;
        x->busy++;
        if (x->ending) {
                w->j = sb->journal;
                w->next = x->waiting;
                x->waiting = w;
                return 0;
        }
        if ((r = queue(sb->journal, w, e)) < 0) {
                x->busy--;
                work_free(w);
        }
        return r;
}

/* A later journal that changed one of x's paths (NULL: none). */
static const char *later_conflict(struct sbx_journal *j, const struct jr_exec *x, const char **by) {
        for (struct jr_exec *y = j->execs; y; y = y->next) {
                if (y->seq <= x->seq || y->state == JR_BEGUN)
                        continue;
                size_t a = 0, b = 0;
                while (a < x->n_changes && b < y->n_changes) {
                        int c = strcmp(x->changes[a].path, y->changes[b].path);
                        if (c == 0) {
                                *by = y->exec_id;
                                return x->changes[a].path;
                        }
                        if (c < 0)
                                a++;
                        else
                                b++;
                }
        }
        return NULL;
}

int sbx_journal_rollback(struct sbx_manager *m, const char *sandbox, const char *exec_id,
                         bool force, sbx_journal_rollback_fn fn, void *userdata, struct wr_err *e) {
        struct sbx *sb;
        struct jr_exec *x;
        int r = lookup_exec(m, sandbox, exec_id, &sb, &x, e);
        if (r < 0)
                return r;
        struct sbx_journal *j = sb->journal;
        if (sb->state != SBX_RUNNING)
                return err_setx(e, -EBUSY, WR_STATUS_FAILED_PRECONDITION, WR_FAULT_CLIENT,
                                "sandbox %s is terminating", sb->id);
        if (x->state == JR_RUNNING && !x->ending)
                return err_setx(e, -EBUSY, WR_STATUS_FAILED_PRECONDITION, WR_FAULT_CLIENT,
                                "exec %s is still running: wait for its exit (or signal it), "
                                "then roll it back",
                                exec_id);
        if (x->state == JR_ROLLED_BACK)
                return err_setx(e, -EALREADY, WR_STATUS_FAILED_PRECONDITION, WR_FAULT_CLIENT,
                                "exec %s was already rolled back", exec_id);
        if (j->rolling_back)
                return err_setx(e, -EBUSY, WR_STATUS_FAILED_PRECONDITION, WR_FAULT_CLIENT,
                                "sandbox %s: another rollback is running; try again after it",
                                sb->id);
        const char *by = NULL, *path = later_conflict(j, x, &by);
        if (path && !force)
                return err_setx(e, -EBUSY, WR_STATUS_FAILED_PRECONDITION, WR_FAULT_CLIENT,
                                "exec %s: /%s was changed again by exec %s since; roll that one "
                                "back first, or pass force to overwrite",
                                exec_id, path, by);
        struct work *w = work_new(W_ROLLBACK);
        if (!w)
                return err_set(e, -ENOMEM, "journal: out of memory");
        w->x = x;
        w->force = force;
        w->fn = (void *) fn;
        w->userdata = userdata;
        /* the sandbox's root: warren-priv opens it for warren-upper
         * (--privsep), else warrend itself */
        w->root_fd = j->priv ? -EBADF : sbx_root_fd(sb);
        if (!j->priv && w->root_fd < 0) {
                r = err_set(e, w->root_fd, "journal: the sandbox's root: %s",
                            strerror(-w->root_fd));
                work_free(w);
                return r;
        }
        if (!sb->paused) {
                if ((r = sbx_rt_freeze(sb->m, sb->rt, true, e)) < 0) {
                        work_free(w);
                        return r;
                }
                w->froze = true;
        }
        x->busy++;
        j->rolling_back = true;
        if (x->ending) {
                /* the walk after the exec first */
                w->j = j;
                w->next = x->waiting;
                x->waiting = w;
                return 0;
        }
        if ((r = queue(j, w, e)) < 0) {
                j->rolling_back = false;
                x->busy--;
                if (w->froze)
                        (void) sbx_rt_freeze(sb->m, sb->rt, false, NULL);
                work_free(w);
        }
        return r;
}

/* --- rollback on the worker --- */

/* The bytes path had before: the object store or its read-only layer. */
static int source_fd(struct work *w, const struct jt_change *c) {
        const struct jt_state *b = &c->before;
        if (b->layer == -1) {
                if (!b->saved)
                        return -ENODATA;
                char name[96];
                jt_object_name(b->dev, b->ino, b->ctime_ns, b->size, name, sizeof(name));
                int fd = openat(w->j->obj_fd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
                return fd < 0 ? -errno : fd;
        }
        if ((size_t) b->layer >= w->j->n_lower)
                return -ENOENT;
        int fd = sys_openat2(w->j->lower_fds[b->layer], c->path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC,
                             RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS);
        return fd < 0 ? -errno : fd;
}

static int apply(struct work *w) {
        struct jr_exec *x = w->x;
        struct jt_tree now = {0};
        int r = io_walk(w, &now);
        if (r < 0) {
                jt_tree_free(&now);
                return r;
        }
        /* changed again since the exec? */
        if (!w->force)
                for (size_t i = 0; i < x->n_changes; i++) {
                        struct jt_state s = {0};
                        if ((r = jt_state_of(&now, w->j->lower_fds, w->j->n_lower,
                                             x->changes[i].path, &s)) < 0)
                                break;
                        unsigned k = jt_compare(&x->changes[i].after, &s);
                        jt_state_clear(&s);
                        if (k) {
                                r = err_setx(&w->e, -EBUSY, WR_STATUS_FAILED_PRECONDITION,
                                             WR_FAULT_CLIENT,
                                             "exec %s: /%s was changed again since it ran; pass "
                                             "force to overwrite",
                                             x->exec_id, x->changes[i].path);
                                break;
                        }
                }
        jt_tree_free(&now);
        if (r < 0)
                return r;
        /* what rollback cannot restore */
        for (size_t i = 0; i < x->n_changes; i++) {
                const struct jt_change *c = &x->changes[i];
                bool content = c->kinds & (JT_MODIFIED | JT_DELETED);
                if (content && c->before.type == JT_FILE && c->before.layer == -1 &&
                    !c->before.saved)
                        return err_setx(&w->e, -ENODATA, WR_STATUS_FAILED_PRECONDITION,
                                        WR_FAULT_CLIENT,
                                        "exec %s: the bytes /%s had before were not kept (the "
                                        "journal's store was full); nothing was rolled back",
                                        x->exec_id, c->path);
                if (content &&
                    (c->before.type == JT_OTHER ||
                     (c->before.type == JT_DIR && c->before.layer >= 0 && (c->kinds & JT_DELETED))))
                        return err_setx(&w->e, -EOPNOTSUPP, WR_STATUS_FAILED_PRECONDITION,
                                        WR_FAULT_CLIENT,
                                        "exec %s: /%s (%s) cannot be restored by a rollback; "
                                        "nothing was rolled back",
                                        x->exec_id, c->path,
                                        c->before.type == JT_OTHER ? "a special file"
                                                                   : "an image directory deleted "
                                                                     "with its contents");
        }
        /* 1: remove what the exec made; a made dir goes with everything in
         * it (its entries, later in path order, are skipped) */
        const char *gone = NULL;
        size_t gone_len = 0;
        for (size_t i = 0; i < x->n_changes; i++) {
                const struct jt_change *c = &x->changes[i];
                if (c->after.type == JT_ABSENT ||
                    (c->before.type != JT_ABSENT && c->before.type == c->after.type))
                        continue;
                if (gone && !strncmp(c->path, gone, gone_len) && c->path[gone_len] == '/')
                        continue;
                if ((r = io_write(w, PRIV_UPPER_OP_REMOVE, c->path, &c->before, -1)) < 0)
                        return err_set(&w->e, r, "rollback: remove /%s: %s", c->path, strerror(-r));
                gone = c->path;
                gone_len = strlen(gone);
        }
        /* 2: put back what was there, parents first */
        for (size_t i = 0; i < x->n_changes; i++) {
                const struct jt_change *c = &x->changes[i];
                if (c->before.type == JT_ABSENT)
                        continue;
                bool content =
                        (c->kinds & (JT_MODIFIED | JT_DELETED)) || c->before.type != c->after.type;
                switch (c->before.type) {
                case JT_DIR:
                        r = io_write(w, content ? PRIV_UPPER_OP_MKDIR : PRIV_UPPER_OP_ATTRS,
                                     c->path, &c->before, -1);
                        break;
                case JT_FILE:
                        if (content) {
                                _cleanup_close_ int src = source_fd(w, c);
                                r = src < 0 ? src
                                            : io_write(w, PRIV_UPPER_OP_PUT, c->path, &c->before,
                                                       src);
                        } else
                                r = io_write(w, PRIV_UPPER_OP_ATTRS, c->path, &c->before, -1);
                        break;
                case JT_LINK:
                        r = content ? io_write(w, PRIV_UPPER_OP_SYMLINK, c->path, &c->before, -1)
                                    : 0;
                        break;
                default:
                        r = 0;
                        break;
                }
                if (r < 0)
                        return err_set(&w->e, r, "rollback: restore /%s: %s", c->path,
                                       strerror(-r));
        }
        return 0;
}
