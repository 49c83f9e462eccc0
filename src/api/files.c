/* SPDX-License-Identifier: Apache-2.0 */
/* warren.v1.Files on sandbox/files.h: the files of a running sandbox.
 * Requests are checked here (the sandbox key, every path: NUL, lengths);
 * the sandbox's root is taken on the loop (sbx_fs_open) and every file
 * operation runs on libuv's worker threads, so that a slow disk never
 * stalls the loop: ReadFile reads one chunk at a time on a worker while
 * the previous one is sent (back-pressure: the next read waits while the
 * client is behind), WriteFile writes the chunks received on a worker
 * while more arrive (at most WRITE_PENDING_MAX bytes buffered, then the
 * stream's receive is paused), ListDir reads batches on a worker, Watch
 * sets up its inotify watches on a worker and then reads events on the
 * loop (non-blocking), stopping while the client is behind (the call's
 * send queue past its high-water mark) so that a slow client gets
 * OVERFLOW rather than unbounded memory. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "api/api-internal.h"
#include "basic/log.h"
#include "sandbox/files.h"
#include "sandbox/sandbox.h"
#include "store/store.h"
#include "warren/v1/files.pb-c.h"
#include "warren/v1/sandboxes.pb-c.h"

#define streq(a, b) (strcmp((a), (b)) == 0)
#define READ_CHUNK (1u << 20)
#define WRITE_PENDING_MAX (8u << 20)
#define LIST_BATCH 512
#define HEAD 8 /* room for a FileChunk's field header: tag + varint length */

/* Finish with e; the service's own failures are logged (once, here) and
 * answered without host details. */
static void finish_err(struct rpc_call *call, const struct wr_err *e) {
        int status = err_status(e);
        if (e->fault == WR_FAULT_SERVICE || status == WR_STATUS_UNKNOWN ||
            status == WR_STATUS_INTERNAL) {
                const struct rpc_method *m = rpc_call_method(call);
                log_error("rpc %s: %s", m ? m->path : "?", e->msg);
                if (status == WR_STATUS_UNKNOWN) {
                        rpc_call_finish(call, WR_STATUS_INTERNAL,
                                        "file operation failed; see the warrend log");
                        return;
                }
        }
        rpc_call_finish_err(call, e);
}

static void finish_nomem(struct rpc_call *call) {
        rpc_call_finish(call, WR_STATUS_RESOURCE_EXHAUSTED, "out of memory");
}

/* Take the sandbox's root for a call: its key checked, sbx_fs_open; with
 * ro, its read-only volume mounts recorded for error messages. Finishes
 * the call on error. */
static int take_fs(struct rpc_call *call, const char *field, const char *key, bool ro,
                   struct sbx_fs *fs) {
        struct api_ctx *ctx = rpc_call_server_ctx(call);
        *fs = (struct sbx_fs){
                .root_fd = -EBADF, .pidfd = -EBADF, .ctl_fd = -EBADF, .files_fd = -EBADF};
        if (!key || !*key) {
                char m[128];
                snprintf(m, sizeof(m), "%s: empty; give the sandbox's id or name", field);
                rpc_call_finish(call, WR_STATUS_INVALID_ARGUMENT, m);
                return -EINVAL;
        }
        if (!ctx->sandboxes) {
                rpc_call_finish(call, WR_STATUS_UNAVAILABLE, "warrend is shutting down");
                return -ESHUTDOWN;
        }
        struct wr_err e = {0};
        char id[32];
        /* the caller's own sandbox: another environment's is NOT_FOUND */
        int r = api_own_sandbox_id(call, key, id, sizeof(id), &e);
        if (r >= 0)
                r = sbx_fs_open(ctx->sandboxes, id, fs, &e);
        if (r < 0) {
                finish_err(call, &e);
                return r;
        }
        if (!ro)
                return 0;
        struct store_sandbox row = {0};
        if (sbx_lookup(ctx->sandboxes, fs->id, &row, NULL) == 0 && row.spec && row.spec_len) {
                Warren__V1__CreateSandboxRequest *req =
                        warren__v1__create_sandbox_request__unpack(NULL, row.spec_len, row.spec);
                for (size_t k = 0; req && k < req->n_volumes; k++) {
                        const Warren__V1__VolumeMount *v = req->volumes[k];
                        char label[128];
                        if (!v->read_only || !v->path || !v->volume)
                                continue;
                        snprintf(label, sizeof(label), "volume %s", v->volume);
                        if (sbx_fs_add_ro_mount(fs, v->path, label) < 0)
                                break;
                }
                if (req)
                        warren__v1__create_sandbox_request__free_unpacked(req, NULL);
        }
        store_sandbox_clear(&row);
        return 0;
}

/* A bytes path field, checked, made absolute against fs's working dir
 * (*ret heap). Finishes the call on error. */
static int take_path(struct rpc_call *call, const char *field, ProtobufCBinaryData p,
                     const struct sbx_fs *fs, char **ret) {
        struct wr_err e = {0};
        int r = sbx_file_path_check(field, p.data, p.len, &e);
        _cleanup_free_ char *s = NULL;
        if (r >= 0 && !(s = strndup((const char *) p.data, p.len)))
                r = err_set(&e, -ENOMEM, "out of memory");
        if (r >= 0)
                r = sbx_file_path_abs(field, fs->workdir, s, ret, &e);
        if (r < 0)
                finish_err(call, &e);
        return r;
}

/* Run work on a worker thread, then done on the loop, with a reference
 * to call held meanwhile and *busy set. Finishes the call (INTERNAL,
 * naming what) when the work cannot be queued; returns 0 or -EIO. */
static int queue_on(struct rpc_call *call, uv_work_t *w, void *data, bool *busy, uv_work_cb work,
                    uv_after_work_cb done, const char *what) {
        w->data = data;
        *busy = true;
        rpc_call_ref(call);
        if (uv_queue_work(rpc_call_loop(call), w, work, done) == 0)
                return 0;
        *busy = false;
        rpc_call_unref(call);
        char m[96];
        snprintf(m, sizeof(m), "cannot queue the %s", what);
        rpc_call_finish(call, WR_STATUS_INTERNAL, m);
        return -EIO;
}

/* ---- FileStat ---- */

struct stat_msg {
        Warren__V1__FileStat f;
        Warren__V1__Timestamp mtime;
};

/* Owners as the sandbox sees them (its user namespace: fs's ids). */
static void stat_msg_fill(struct stat_msg *m, const struct sbx_fs *fs,
                          const struct sbx_file_info *fi) {
        warren__v1__file_stat__init(&m->f);
        warren__v1__timestamp__init(&m->mtime);
        m->mtime.unix_nanos = fi->mtime_ns;
        m->f.path.data = (uint8_t *) fi->path;
        m->f.path.len = fi->path ? strlen(fi->path) : 0;
        m->f.kind = (Warren__V1__FileKind) fi->kind;
        m->f.size_bytes = fi->size;
        m->f.mode = (uint32_t) fi->mode;
        m->f.uid = wr_id_inside(fi->uid, fs->id_base, fs->id_count);
        m->f.gid = wr_id_inside(fi->gid, fs->id_base, fs->id_count);
        m->f.modified_at = &m->mtime;
        if (fi->link) {
                m->f.symlink_target.data = (uint8_t *) fi->link;
                m->f.symlink_target.len = strlen(fi->link);
        }
}

static void reply_stat(struct rpc_call *call, const struct sbx_fs *fs,
                       const struct sbx_file_info *fi) {
        struct stat_msg m;
        stat_msg_fill(&m, fs, fi);
        rpc_call_reply(call, &m.f.base);
}

/* ---- unary operations: Stat, Remove, MakeDir, Rename ---- */

enum op { OP_STAT, OP_REMOVE, OP_MKDIR, OP_RENAME };

struct job {
        struct rpc_call *call;
        uv_work_t work;
        enum op op;
        struct sbx_fs fs;
        char *path, *path2, *user;
        mode_t mode;
        bool flag; /* recursive, parents, no_replace */
        struct sbx_file_info info;
        struct wr_err err;
        int r;
};

static void job_free(struct job *j) {
        if (!j)
                return;
        sbx_fs_clear(&j->fs);
        free(j->path);
        free(j->path2);
        free(j->user);
        sbx_file_info_clear(&j->info);
        free(j);
}

static void job_work(uv_work_t *w) {
        struct job *j = w->data;
        uint32_t uid = j->fs.uid, gid = j->fs.gid;
        if ((j->r = sbx_fs_root(&j->fs, &j->err)) < 0)
                return;
        switch (j->op) {
        case OP_STAT:
                j->r = sbx_file_stat(&j->fs, "path", j->path, &j->info, &j->err);
                break;
        case OP_REMOVE:
                j->r = sbx_file_remove(&j->fs, "path", j->path, j->flag, &j->err);
                break;
        case OP_MKDIR:
                j->r = 0;
                if (j->user && *j->user)
                        j->r = sbx_file_user(&j->fs, "user", j->user, &uid, &gid, &j->err);
                if (j->r >= 0)
                        j->r = sbx_file_mkdir(&j->fs, "path", j->path, j->mode, uid, gid, j->flag,
                                              &j->info, &j->err);
                break;
        case OP_RENAME:
                j->r = sbx_file_rename(&j->fs, j->path, j->path2, j->flag, &j->info, &j->err);
                break;
        }
}

static void job_done(uv_work_t *w, int status) {
        struct job *j = w->data;
        struct rpc_call *call = j->call;
        if (rpc_call_is_done(call))
                ;
        else if (status < 0)
                rpc_call_finish(call, WR_STATUS_CANCELLED, "cancelled");
        else if (j->r < 0)
                finish_err(call, &j->err);
        else if (j->op == OP_REMOVE) {
                Warren__V1__RemovePathResponse resp = WARREN__V1__REMOVE_PATH_RESPONSE__INIT;
                rpc_call_reply(call, &resp.base);
        } else
                reply_stat(call, &j->fs, &j->info);
        job_free(j);
        rpc_call_unref(call);
}

/* A job for call on sandbox key (the call is finished on error). */
static struct job *job_new(struct rpc_call *call, enum op op, const char *key) {
        struct job *j = calloc(1, sizeof(*j));
        if (!j) {
                finish_nomem(call);
                return NULL;
        }
        j->op = op;
        j->call = call;
        if (take_fs(call, "sandbox", key, op != OP_STAT, &j->fs) < 0) {
                job_free(j);
                return NULL;
        }
        return j;
}

static void job_queue(struct job *j) {
        bool busy;
        if (queue_on(j->call, &j->work, j, &busy, job_work, job_done, "file operation") < 0)
                job_free(j);
}

static void stat_path(struct rpc_call *call, const ProtobufCMessage *msg) {
        const Warren__V1__StatFileRequest *req = (const void *) msg;
        struct job *j = job_new(call, OP_STAT, req->sandbox);
        if (!j)
                return;
        if (take_path(call, "path", req->path, &j->fs, &j->path) < 0)
                return job_free(j);
        job_queue(j);
}

static void remove_path(struct rpc_call *call, const ProtobufCMessage *msg) {
        const Warren__V1__RemovePathRequest *req = (const void *) msg;
        struct job *j = job_new(call, OP_REMOVE, req->sandbox);
        if (!j)
                return;
        j->flag = req->recursive;
        if (take_path(call, "path", req->path, &j->fs, &j->path) < 0)
                return job_free(j);
        job_queue(j);
}

static int check_mode(struct rpc_call *call, const char *field, uint32_t mode) {
        if (!(mode & ~07777u))
                return 0;
        char m[128];
        snprintf(m, sizeof(m), "%s: give permission bits only (at most 07777), not 0%o", field,
                 mode);
        rpc_call_finish(call, WR_STATUS_INVALID_ARGUMENT, m);
        return -EINVAL;
}

static void make_dir(struct rpc_call *call, const ProtobufCMessage *msg) {
        const Warren__V1__MakeDirRequest *req = (const void *) msg;
        if (check_mode(call, "mode", req->mode) < 0)
                return;
        struct job *j = job_new(call, OP_MKDIR, req->sandbox);
        if (!j)
                return;
        j->flag = req->parents;
        j->mode = req->mode;
        if (take_path(call, "path", req->path, &j->fs, &j->path) < 0)
                return job_free(j);
        if (req->user && *req->user && !(j->user = strdup(req->user))) {
                finish_nomem(call);
                return job_free(j);
        }
        job_queue(j);
}

static void rename_path(struct rpc_call *call, const ProtobufCMessage *msg) {
        const Warren__V1__RenamePathRequest *req = (const void *) msg;
        struct job *j = job_new(call, OP_RENAME, req->sandbox);
        if (!j)
                return;
        j->flag = req->no_replace;
        if (take_path(call, "from", req->from, &j->fs, &j->path) < 0 ||
            take_path(call, "to", req->to, &j->fs, &j->path2) < 0)
                return job_free(j);
        job_queue(j);
}

/* ---- ReadFile ---- */

struct read_state {
        struct rpc_call *call;
        uv_work_t work;
        struct sbx_fs fs;
        char *path;
        uint64_t req_off, req_len;
        int fd;
        uint64_t off, end;
        bool opened, busy, blocked;
        struct rpc_buf buf;
        ssize_t got;
        int read_errno;
        struct wr_err err;
        int r;
};

static void read_free(struct rpc_call *call) {
        struct read_state *st = rpc_call_get_data(call);
        if (!st)
                return;
        sbx_fs_clear(&st->fs);
        safe_close(st->fd);
        rpc_buf_free(&st->buf);
        free(st->path);
        free(st);
        rpc_call_set_data(call, NULL);
}

static void read_work(uv_work_t *w) {
        struct read_state *st = w->data;
        if (!st->opened) {
                struct stat sb;
                if ((st->r = sbx_fs_root(&st->fs, &st->err)) < 0)
                        return;
                st->r = sbx_file_open_read(&st->fs, "path", st->path, &st->fd, &sb, &st->err);
                sbx_fs_ctl_release(&st->fs); /* the data comes through st->fd */
                if (st->r < 0)
                        return;
                uint64_t size = (uint64_t) sb.st_size;
                st->off = st->req_off < size ? st->req_off : size;
                st->end =
                        st->req_len && st->req_len < size - st->off ? st->off + st->req_len : size;
                return;
        }
        size_t want = st->end - st->off < READ_CHUNK ? (size_t) (st->end - st->off) : READ_CHUNK;
        ssize_t n;
        do
                n = pread(st->fd, st->buf.data + HEAD, want, (off_t) st->off);
        while (n < 0 && errno == EINTR);
        st->got = n;
        st->read_errno = n < 0 ? errno : 0;
}

static void read_pump(struct rpc_call *call);

static void read_done(uv_work_t *w, int status) {
        struct read_state *st = w->data;
        struct rpc_call *call = st->call;
        st->busy = false;
        if (rpc_call_is_done(call))
                goto out;
        if (status < 0) {
                rpc_call_finish(call, WR_STATUS_CANCELLED, "cancelled");
                goto out;
        }
        if (!st->opened) {
                if (st->r < 0) {
                        finish_err(call, &st->err);
                        goto out;
                }
                st->opened = true;
                read_pump(call);
                goto out;
        }
        if (st->got <= 0) {
                rpc_buf_free(&st->buf);
                if (st->got < 0) {
                        struct wr_err e = {0};
                        err_set(&e, -st->read_errno, "read %s: %s", st->path,
                                strerror(st->read_errno));
                        finish_err(call, &e);
                } else /* the file shrank meanwhile */
                        rpc_call_finish(call, WR_STATUS_OK, NULL);
                goto out;
        }
        /* field 1, wire type 2, varint length, just before the data */
        uint8_t head[HEAD];
        size_t h = 0;
        head[h++] = 0x0a;
        for (uint64_t v = (uint64_t) st->got; h < HEAD; v >>= 7) {
                head[h++] = (uint8_t) ((v & 0x7f) | (v >= 0x80 ? 0x80 : 0));
                if (v < 0x80)
                        break;
        }
        memcpy(st->buf.data + HEAD - h, head, h);
        st->off += (uint64_t) st->got;
        int r = rpc_call_send_buf(call, &st->buf, HEAD - h, h + (size_t) st->got);
        if (r == 1)
                st->blocked = true; /* on_writable resumes */
        else if (r == 0)
                read_pump(call);
out:
        rpc_call_unref(call);
}

static void read_pump(struct rpc_call *call) {
        struct read_state *st = rpc_call_get_data(call);
        if (!st || st->busy || rpc_call_is_done(call))
                return;
        st->blocked = false;
        if (st->opened && st->off >= st->end) {
                rpc_call_finish(call, WR_STATUS_OK, NULL);
                return;
        }
        if (st->opened) {
                size_t want =
                        st->end - st->off < READ_CHUNK ? (size_t) (st->end - st->off) : READ_CHUNK;
                if (rpc_buf_alloc(&st->buf, HEAD + want) < 0) {
                        finish_nomem(call);
                        return;
                }
        }
        (void) queue_on(call, &st->work, st, &st->busy, read_work, read_done, "read");
}

static void read_file(struct rpc_call *call, const ProtobufCMessage *msg) {
        const Warren__V1__ReadFileRequest *req = (const void *) msg;
        struct read_state *st = calloc(1, sizeof(*st));
        if (!st)
                return finish_nomem(call);
        st->call = call;
        st->fd = -EBADF;
        st->req_off = req->offset;
        st->req_len = req->length;
        rpc_call_set_data(call, st);
        if (take_fs(call, "sandbox", req->sandbox, false, &st->fs) < 0 ||
            take_path(call, "path", req->path, &st->fs, &st->path) < 0)
                return;
        read_pump(call);
}

/* ---- WriteFile ---- */

struct write_state {
        struct rpc_call *call;
        uv_work_t work;
        struct sbx_fs fs;
        char *path, *user, *link;
        mode_t mode;
        struct sbx_file_write *w;
        /* received, not yet written; being written by the worker */
        uint8_t *pend, *cur;
        size_t plen, pcap, clen, ccap;
        enum { W_BEGIN, W_DATA, W_COMMIT } job;
        bool started, busy, half_closed, paused, failed, committed;
        struct sbx_file_info info;
        struct wr_err err;
        int r;
};

static void write_free(struct rpc_call *call) {
        struct write_state *st = rpc_call_get_data(call);
        if (!st)
                return;
        sbx_file_write_free(st->w);
        sbx_fs_clear(&st->fs);
        free(st->path);
        free(st->user);
        free(st->link);
        free(st->pend);
        free(st->cur);
        sbx_file_info_clear(&st->info);
        free(st);
        rpc_call_set_data(call, NULL);
}

static void write_work(uv_work_t *w) {
        struct write_state *st = w->data;
        switch (st->job) {
        case W_BEGIN: {
                uint32_t uid = 0, gid = 0;
                bool has_owner = st->user && *st->user;
                if ((st->r = sbx_fs_root(&st->fs, &st->err)) < 0)
                        break;
                st->r = has_owner ? sbx_file_user(&st->fs, "meta.user", st->user, &uid, &gid,
                                                  &st->err)
                                  : 0;
                if (st->r >= 0 && st->link)
                        st->r = sbx_file_symlink(&st->fs, "meta.path", st->path, st->link,
                                                 has_owner, uid, gid, &st->info, &st->err);
                else if (st->r >= 0)
                        st->r = sbx_file_write_begin(&st->fs, "meta.path", st->path, st->mode,
                                                     has_owner, uid, gid, &st->w, &st->err);
                break;
        }
        case W_DATA:
                st->r = sbx_file_write_data(st->w, st->cur, st->clen, &st->err);
                break;
        case W_COMMIT:
                st->r = sbx_file_write_commit(st->w, &st->info, &st->err);
                break;
        }
}

static void write_fail(struct rpc_call *call, struct write_state *st, const struct wr_err *e) {
        st->failed = true;
        sbx_file_write_free(st->w);
        st->w = NULL;
        if (st->paused) {
                st->paused = false;
                rpc_call_resume_recv(call);
        }
        finish_err(call, e);
}

static void write_done(uv_work_t *w, int status);

static void write_next(struct rpc_call *call, struct write_state *st) {
        if (st->busy || st->failed || st->committed || rpc_call_is_done(call) || !st->w)
                return;
        if (st->plen > 0) {
                uint8_t *t = st->cur;
                size_t tc = st->ccap;
                st->cur = st->pend;
                st->ccap = st->pcap;
                st->clen = st->plen;
                st->pend = t;
                st->pcap = tc;
                st->plen = 0;
                st->job = W_DATA;
        } else if (st->half_closed)
                st->job = W_COMMIT;
        else
                return;
        if (st->paused) {
                st->paused = false;
                rpc_call_resume_recv(call);
        }
        if (queue_on(call, &st->work, st, &st->busy, write_work, write_done, "write") < 0)
                st->failed = true;
}

static void write_done(uv_work_t *w, int status) {
        struct write_state *st = w->data;
        struct rpc_call *call = st->call;
        st->busy = false;
        if (rpc_call_is_done(call) || st->failed)
                goto out;
        if (status < 0) {
                rpc_call_finish(call, WR_STATUS_CANCELLED, "cancelled");
                goto out;
        }
        if (st->r < 0) {
                write_fail(call, st, &st->err);
                goto out;
        }
        if (st->job == W_COMMIT || (st->job == W_BEGIN && st->link)) {
                st->committed = true;
                if (st->job == W_COMMIT || st->half_closed)
                        reply_stat(call, &st->fs, &st->info);
                goto out;
        }
        write_next(call, st);
out:
        rpc_call_unref(call);
}

static int pend_append(struct write_state *st, const uint8_t *data, size_t len) {
        if (st->plen + len > st->pcap) {
                size_t c = st->pcap ? st->pcap : (1u << 20);
                while (c < st->plen + len)
                        c *= 2;
                uint8_t *n = realloc(st->pend, c);
                if (!n)
                        return -ENOMEM;
                st->pend = n;
                st->pcap = c;
        }
        memcpy(st->pend + st->plen, data, len);
        st->plen += len;
        return 0;
}

static void write_file(struct rpc_call *call, const ProtobufCMessage *msg) {
        const Warren__V1__WriteFileRequest *req = (const void *) msg;
        if (rpc_call_is_done(call))
                return;
        struct write_state *st = rpc_call_get_data(call);
        if (!st) {
                if (req->kind_case != WARREN__V1__WRITE_FILE_REQUEST__KIND_META) {
                        rpc_call_finish(call, WR_STATUS_INVALID_ARGUMENT,
                                        "meta: the first WriteFile message must carry meta "
                                        "(sandbox, path, mode, user), then data chunks");
                        return;
                }
                const Warren__V1__WriteFileMeta *meta = req->meta;
                if (check_mode(call, "meta.mode", meta->mode) < 0)
                        return;
                if (!(st = calloc(1, sizeof(*st))))
                        return finish_nomem(call);
                st->call = call;
                st->started = true;
                st->mode = meta->mode;
                rpc_call_set_data(call, st);
                if (take_fs(call, "meta.sandbox", meta->sandbox, true, &st->fs) < 0 ||
                    take_path(call, "meta.path", meta->path, &st->fs, &st->path) < 0) {
                        st->failed = true;
                        return;
                }
                if (meta->symlink_target.len &&
                    !(st->link = strndup((const char *) meta->symlink_target.data,
                                         meta->symlink_target.len))) {
                        st->failed = true;
                        return finish_nomem(call);
                }
                if (st->link && strlen(st->link) != meta->symlink_target.len) {
                        st->failed = true;
                        rpc_call_finish(call, WR_STATUS_INVALID_ARGUMENT,
                                        "meta.symlink_target: contains a NUL byte");
                        return;
                }
                if (meta->user && *meta->user && !(st->user = strdup(meta->user))) {
                        st->failed = true;
                        return finish_nomem(call);
                }
                st->job = W_BEGIN;
                if (queue_on(call, &st->work, st, &st->busy, write_work, write_done, "write") < 0)
                        st->failed = true;
                return;
        }
        if (st->failed)
                return;
        if (req->kind_case != WARREN__V1__WRITE_FILE_REQUEST__KIND_DATA || st->link) {
                struct wr_err e = {0};
                err_setx(&e, -EINVAL, WR_STATUS_INVALID_ARGUMENT, WR_FAULT_CLIENT, "%s",
                         st->link ? "data: a WriteFile with meta.symlink_target takes no data"
                                  : "meta: only the first WriteFile message carries meta; send "
                                    "data chunks after it");
                return write_fail(call, st, &e);
        }
        if (pend_append(st, req->data.data, req->data.len) < 0) {
                struct wr_err e = {0};
                err_setx(&e, -ENOMEM, WR_STATUS_RESOURCE_EXHAUSTED, WR_FAULT_SERVICE,
                         "out of memory");
                return write_fail(call, st, &e);
        }
        if (st->plen >= WRITE_PENDING_MAX && !st->paused) {
                st->paused = true;
                rpc_call_pause_recv(call);
        }
        write_next(call, st);
}

static void write_half_close(struct rpc_call *call) {
        struct write_state *st = rpc_call_get_data(call);
        if (rpc_call_is_done(call))
                return;
        if (!st) {
                rpc_call_finish(call, WR_STATUS_INVALID_ARGUMENT,
                                "meta: WriteFile needs a first message with meta (sandbox, "
                                "path)");
                return;
        }
        st->half_closed = true;
        if (st->link && st->committed && !st->busy && !st->failed)
                reply_stat(call, &st->fs, &st->info); /* the symlink was made already */
        write_next(call, st);
}

/* ---- ListDir ---- */

struct list_state {
        struct rpc_call *call;
        uv_work_t work;
        struct sbx_fs fs;
        char *path;
        bool recursive;
        unsigned max_depth;
        struct sbx_file_list *l;
        struct sbx_file_info *batch;
        size_t n;
        bool busy, blocked;
        struct wr_err err;
        int r;
};

static void list_free(struct rpc_call *call) {
        struct list_state *st = rpc_call_get_data(call);
        if (!st)
                return;
        sbx_file_list_free(st->l);
        sbx_file_infos_free(st->batch, st->n);
        sbx_fs_clear(&st->fs);
        free(st->path);
        free(st);
        rpc_call_set_data(call, NULL);
}

static void list_work(uv_work_t *w) {
        struct list_state *st = w->data;
        if (!st->l) {
                if ((st->r = sbx_fs_root(&st->fs, &st->err)) < 0)
                        return;
                st->r = sbx_file_list_open(&st->fs, "path", st->path, st->recursive, st->max_depth,
                                           &st->l, &st->err);
                if (st->r < 0)
                        return;
        }
        st->r = sbx_file_list_next(st->l, LIST_BATCH, &st->batch, &st->n, &st->err);
}

static void list_pump(struct rpc_call *call);

static void list_done(uv_work_t *w, int status) {
        struct list_state *st = w->data;
        struct rpc_call *call = st->call;
        st->busy = false;
        if (rpc_call_is_done(call))
                goto out;
        if (status < 0) {
                rpc_call_finish(call, WR_STATUS_CANCELLED, "cancelled");
                goto out;
        }
        if (st->r < 0) {
                finish_err(call, &st->err);
                goto out;
        }
        struct stat_msg *ms = calloc(st->n ? st->n : 1, sizeof(*ms));
        Warren__V1__FileStat **ptrs = calloc(st->n ? st->n : 1, sizeof(*ptrs));
        int r = -ENOMEM;
        if (ms && ptrs) {
                for (size_t i = 0; i < st->n; i++) {
                        stat_msg_fill(&ms[i], &st->fs, &st->batch[i]);
                        ptrs[i] = &ms[i].f;
                }
                Warren__V1__ListDirResponse resp = WARREN__V1__LIST_DIR_RESPONSE__INIT;
                resp.n_entries = st->n;
                resp.entries = ptrs;
                /* an empty directory still gets one (empty) message */
                r = rpc_call_send(call, &resp.base);
        }
        free(ms);
        free(ptrs);
        bool last = st->n < LIST_BATCH;
        sbx_file_infos_free(st->batch, st->n);
        st->batch = NULL;
        st->n = 0;
        if (r == -ENOMEM)
                finish_nomem(call);
        else if (r < 0)
                ; /* the call is over */
        else if (last)
                rpc_call_finish(call, WR_STATUS_OK, NULL);
        else if (r == 1)
                st->blocked = true;
        else
                list_pump(call);
out:
        rpc_call_unref(call);
}

static void list_pump(struct rpc_call *call) {
        struct list_state *st = rpc_call_get_data(call);
        if (!st || st->busy || rpc_call_is_done(call))
                return;
        st->blocked = false;
        (void) queue_on(call, &st->work, st, &st->busy, list_work, list_done, "listing");
}

static void list_dir(struct rpc_call *call, const ProtobufCMessage *msg) {
        const Warren__V1__ListDirRequest *req = (const void *) msg;
        struct list_state *st = calloc(1, sizeof(*st));
        if (!st)
                return finish_nomem(call);
        st->call = call;
        st->recursive = req->recursive;
        st->max_depth = req->max_depth;
        rpc_call_set_data(call, st);
        if (take_fs(call, "sandbox", req->sandbox, false, &st->fs) < 0 ||
            take_path(call, "path", req->path, &st->fs, &st->path) < 0)
                return;
        list_pump(call);
}

/* ---- Watch ---- */

struct watch_state {
        struct rpc_call *call;
        uv_work_t work;
        uv_poll_t poll, pid_poll;
        struct sbx_fs fs;
        char *path;
        bool recursive;
        struct sbx_watch *w;
        int handles; /* uv handles open */
        bool busy, polling, poll_open, blocked;
        struct wr_err err;
        int r;
};

static void watch_closed(uv_handle_t *h) {
        struct watch_state *st = h->data;
        if (--st->handles > 0)
                return;
        sbx_watch_free(st->w);
        sbx_fs_clear(&st->fs);
        free(st);
}

static void watch_free(struct rpc_call *call) {
        struct watch_state *st = rpc_call_get_data(call);
        if (!st)
                return;
        rpc_call_set_data(call, NULL);
        free(st->path);
        st->path = NULL;
        if (st->handles > 0) {
                if (st->poll_open)
                        uv_close((uv_handle_t *) &st->poll, watch_closed);
                uv_close((uv_handle_t *) &st->pid_poll, watch_closed);
                return;
        }
        sbx_watch_free(st->w);
        sbx_fs_clear(&st->fs);
        free(st);
}

static void watch_poll_set(struct watch_state *st, bool on);

/* The sandbox ended: so does the watch (its fds would keep the
 * sandbox's file systems alive). */
static void watch_on_exit(uv_poll_t *h, int status, int events) {
        (void) status, (void) events;
        struct watch_state *st = h->data;
        (void) uv_poll_stop(h);
        watch_poll_set(st, false);
        if (!rpc_call_is_done(st->call))
                rpc_call_finish(st->call, WR_STATUS_OK, NULL);
}

static int send_event(struct rpc_call *call, enum sbx_watch_kind kind, const char *path,
                      bool is_dir, uint32_t cookie) {
        Warren__V1__WatchEvent ev = WARREN__V1__WATCH_EVENT__INIT;
        ev.kind = (Warren__V1__WatchEventKind) kind;
        if (path) {
                ev.path.data = (uint8_t *) path;
                ev.path.len = strlen(path);
        }
        ev.is_dir = is_dir;
        ev.cookie = cookie;
        return rpc_call_send(call, &ev.base);
}

static void watch_on_poll(uv_poll_t *h, int status, int events);

static void watch_poll_set(struct watch_state *st, bool on) {
        if (!st->poll_open || st->polling == on)
                return;
        st->polling = on;
        if (on)
                (void) uv_poll_start(&st->poll, UV_READABLE, watch_on_poll);
        else
                (void) uv_poll_stop(&st->poll);
}

static void watch_on_poll(uv_poll_t *h, int status, int events) {
        (void) events;
        struct watch_state *st = h->data;
        struct rpc_call *call = st->call;
        if (rpc_call_is_done(call) || !st->w) {
                watch_poll_set(st, false); /* level-triggered: stop until freed */
                return;
        }
        struct sbx_watch_event *evs = NULL;
        size_t n = 0;
        int r = status < 0 ? status : sbx_watch_read(st->w, &evs, &n);
        int s = 0;
        for (size_t i = 0; i < n && s >= 0; i++)
                s = send_event(call, evs[i].kind, evs[i].path, evs[i].is_dir, evs[i].cookie);
        sbx_watch_events_free(evs, n);
        if (r < 0) {
                struct wr_err e = {0};
                err_set(&e, r, "watch %s: %s", st->path, strerror(-r));
                watch_poll_set(st, false);
                finish_err(call, &e);
                return;
        }
        if (r == 1) { /* the directory is gone (deleted, moved, unmounted) */
                watch_poll_set(st, false);
                rpc_call_finish(call, WR_STATUS_OK, NULL);
                return;
        }
        /* the client is behind (the call's queue is past its high-water
         * mark: on_writable follows): stop reading; the kernel queues, and
         * reports an overflow when its queue is full */
        if (s == 1) {
                st->blocked = true;
                watch_poll_set(st, false);
        }
}

static void watch_writable(struct rpc_call *call) {
        struct watch_state *st = rpc_call_get_data(call);
        if (!st || !st->blocked || rpc_call_is_done(call))
                return;
        st->blocked = false;
        watch_poll_set(st, true);
}

static void watch_work(uv_work_t *w) {
        struct watch_state *st = w->data;
        if ((st->r = sbx_fs_root(&st->fs, &st->err)) < 0)
                return;
        st->r = sbx_watch_new(st->fs.root_fd, "path", st->path, st->recursive, &st->w, &st->err);
        sbx_fs_ctl_release(&st->fs);
}

static void watch_done(uv_work_t *w, int status) {
        struct watch_state *st = w->data;
        struct rpc_call *call = st->call;
        st->busy = false;
        if (rpc_call_is_done(call))
                goto out;
        if (status < 0) {
                rpc_call_finish(call, WR_STATUS_CANCELLED, "cancelled");
                goto out;
        }
        if (st->r < 0) {
                finish_err(call, &st->err);
                goto out;
        }
        if (uv_poll_init(rpc_call_loop(call), &st->pid_poll, st->fs.pidfd) < 0) {
                rpc_call_finish(call, WR_STATUS_INTERNAL, "cannot poll the sandbox");
                goto out;
        }
        st->pid_poll.data = st;
        st->handles++;
        (void) uv_poll_start(&st->pid_poll, UV_READABLE, watch_on_exit);
        if (uv_poll_init(rpc_call_loop(call), &st->poll, sbx_watch_fd(st->w)) < 0) {
                rpc_call_finish(call, WR_STATUS_INTERNAL, "cannot poll the watch");
                goto out;
        }
        st->poll.data = st;
        st->poll_open = true;
        st->handles++;
        send_event(call, SBX_WATCH_READY, NULL, false, 0);
        watch_poll_set(st, true);
out:
        rpc_call_unref(call);
}

static void watch(struct rpc_call *call, const ProtobufCMessage *msg) {
        const Warren__V1__WatchRequest *req = (const void *) msg;
        struct watch_state *st = calloc(1, sizeof(*st));
        if (!st)
                return finish_nomem(call);
        st->call = call;
        st->recursive = req->recursive;
        rpc_call_set_data(call, st);
        if (take_fs(call, "sandbox", req->sandbox, false, &st->fs) < 0 ||
            take_path(call, "path", req->path, &st->fs, &st->path) < 0)
                return;
        (void) queue_on(call, &st->work, st, &st->busy, watch_work, watch_done, "watch");
}

#define METHOD(name, k, in, out, fn, ...)                                                          \
        {                                                                                          \
                .path = "/warren.v1.Files/" name, .kind = k,                                       \
                .input = &warren__v1__##in##__descriptor,                                          \
                .output = &warren__v1__##out##__descriptor, .on_message = fn, __VA_ARGS__          \
        }

static const struct rpc_method methods[] = {
        METHOD("ReadFile", RPC_SERVER_STREAM, read_file_request, file_chunk, read_file,
               .on_writable = read_pump, .on_free = read_free),
        METHOD("WriteFile", RPC_CLIENT_STREAM, write_file_request, file_stat, write_file,
               .on_half_close = write_half_close, .on_free = write_free),
        METHOD("ListDir", RPC_SERVER_STREAM, list_dir_request, list_dir_response, list_dir,
               .on_writable = list_pump, .on_free = list_free),
        METHOD("Stat", RPC_UNARY, stat_file_request, file_stat, stat_path),
        METHOD("Remove", RPC_UNARY, remove_path_request, remove_path_response, remove_path),
        METHOD("MakeDir", RPC_UNARY, make_dir_request, file_stat, make_dir),
        METHOD("Rename", RPC_UNARY, rename_path_request, file_stat, rename_path),
        METHOD("Watch", RPC_SERVER_STREAM, watch_request, watch_event, watch,
               .on_writable = watch_writable, .on_free = watch_free),
};

int api_files_register(struct rpc_server *s) {
        return rpc_server_add_methods(s, methods, ELEMENTSOF(methods));
}
