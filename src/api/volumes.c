/* SPDX-License-Identifier: Apache-2.0 */
/* warren.v1.Volumes on the volume module (volume/volume.h): volumes of the
 * caller's environment and their files. Every path is checked here
 * (vol_path_check: the field, NUL, newline, "..", lengths) and resolved
 * inside the volume by the module. PutFile's commit (fsync, rename, fsync
 * of the directory) runs on a worker thread; GetFile streams chunks read
 * straight into the response buffers, with back-pressure. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "api/api-internal.h"
#include "basic/log.h"
#include "store/store.h"
#include "volume/volume.h"
#include "warren/v1/sandboxes.pb-c.h"
#include "warren/v1/volumes.pb-c.h"

#define streq(a, b) (strcmp((a), (b)) == 0)
#define GET_CHUNK (1u << 20)
#define LIST_PAGE_MAX 1000u

static struct vol_manager *manager(struct rpc_call *call) {
        struct api_ctx *ctx = rpc_call_server_ctx(call);
        return ctx->volumes;
}

/* Finish with e; the service's own failures are logged (once, here) and
 * answered without host details. */
static void finish_err(struct rpc_call *call, const struct wr_err *e) {
        int status = err_status(e);
        if (e->fault == WR_FAULT_SERVICE || status == WR_STATUS_UNKNOWN ||
            status == WR_STATUS_INTERNAL) {
                const struct rpc_method *m = rpc_call_method(call);
                log_error("rpc %s: %s", m ? m->path : "?", e->msg);
                if (status == WR_STATUS_UNKNOWN || status == WR_STATUS_PERMISSION_DENIED) {
                        rpc_call_finish(call, WR_STATUS_INTERNAL,
                                        "volume error; see the warrend log");
                        return;
                }
        }
        rpc_call_finish_err(call, e);
}

/* A string field with a volume name. Finishes the call and returns -EINVAL
 * when it is not one. */
static int check_volume(struct rpc_call *call, const char *field, const char *name) {
        if (vol_name_valid(name))
                return 0;
        char msg[320];
        if (!*name)
                snprintf(msg, sizeof(msg), "%s: empty; give the volume's name", field);
        else
                snprintf(msg, sizeof(msg),
                         "%s: \"%.80s\" is not a valid volume name; use 1-63 letters, digits, "
                         "'.', '_' or '-', starting with a letter or digit",
                         field, name);
        rpc_call_finish(call, WR_STATUS_INVALID_ARGUMENT, msg);
        return -EINVAL;
}

/* A bytes path field as a C string (*ret heap), checked. Finishes the
 * call on error. */
static int take_path(struct rpc_call *call, const char *field, ProtobufCBinaryData p,
                     bool allow_empty, char **ret) {
        struct wr_err e = {0};
        int r = vol_path_check(field, (const char *) p.data, p.len, allow_empty, &e);
        if (r < 0) {
                rpc_call_finish_err(call, &e);
                return r;
        }
        *ret = strndup(p.len ? (const char *) p.data : "", p.len);
        if (!*ret) {
                rpc_call_finish(call, WR_STATUS_RESOURCE_EXHAUSTED, "out of memory");
                return -ENOMEM;
        }
        return 0;
}

/* ---- volumes ---- */

struct volume_msg {
        Warren__V1__Volume v;
        Warren__V1__Timestamp created;
};

static void volume_msg_fill(struct volume_msg *m, struct vol_info *vi) {
        warren__v1__volume__init(&m->v);
        warren__v1__timestamp__init(&m->created);
        m->created.unix_nanos = vi->created_ns;
        m->v.name = vi->name;
        m->v.size_bytes = vi->used_bytes;
        m->v.max_bytes = vi->max_bytes;
        m->v.files = vi->used_inodes;
        m->v.max_files = vi->max_inodes;
        m->v.created_at = &m->created;
}

static void reply_volume(struct rpc_call *call, struct vol_info *vi) {
        struct volume_msg m;
        volume_msg_fill(&m, vi);
        rpc_call_reply(call, &m.v.base);
}

/* CreateVolume: the image is made (mkfs) on a worker thread. */
struct create_state {
        struct rpc_call *call;
        struct vol_new *n;
        uv_work_t work;
        struct wr_err err;
        int r;
};

static void create_work(uv_work_t *w) {
        struct create_state *st = w->data;
        st->r = vol_create_build(st->n, &st->err);
}

static void create_done(uv_work_t *w, int status) {
        struct create_state *st = w->data;
        struct rpc_call *call = st->call;
        struct vol_info vi;
        if (rpc_call_is_done(call))
                ; /* the caller is gone: the image goes with st->n */
        else if (status < 0)
                rpc_call_finish(call, WR_STATUS_CANCELLED, "cancelled");
        else if (st->r < 0 || vol_create_finish(manager(call), st->n, &vi, &st->err) < 0)
                finish_err(call, &st->err);
        else
                reply_volume(call, &vi);
        vol_new_free(st->n);
        free(st);
        rpc_call_unref(call);
}

static void create_volume(struct rpc_call *call, const ProtobufCMessage *msg) {
        const Warren__V1__CreateVolumeRequest *req = (const void *) msg;
        if (check_volume(call, "name", req->name) < 0)
                return;
        struct vol_limits lim = {.max_bytes = req->max_bytes, .max_inodes = req->max_files};
        struct vol_info vi;
        struct wr_err e = {0};
        struct vol_new *n = NULL;
        if (api_quota_check_volume(call, (int64_t) req->max_bytes, &e) < 0)
                return finish_err(call, &e);
        int r = vol_create_begin(manager(call), api_caller_env(call), req->name, &lim, &vi, &n, &e);
        if (r < 0)
                return finish_err(call, &e);
        if (r > 0)
                return reply_volume(call, &vi);
        struct create_state *st = calloc(1, sizeof(*st));
        if (!st) {
                vol_new_free(n);
                rpc_call_finish(call, WR_STATUS_RESOURCE_EXHAUSTED, "out of memory");
                return;
        }
        st->call = rpc_call_ref(call);
        st->n = n;
        st->work.data = st;
        if (uv_queue_work(rpc_call_loop(call), &st->work, create_work, create_done) < 0) {
                vol_new_free(n);
                free(st);
                rpc_call_unref(call);
                rpc_call_finish(call, WR_STATUS_INTERNAL, "cannot queue the volume's mkfs");
        }
}

static void get_volume(struct rpc_call *call, const ProtobufCMessage *msg) {
        const Warren__V1__GetVolumeRequest *req = (const void *) msg;
        if (check_volume(call, "name", req->name) < 0)
                return;
        struct vol_info vi;
        struct wr_err e = {0};
        if (vol_get(manager(call), api_caller_env(call), req->name, &vi, &e) < 0)
                return finish_err(call, &e);
        reply_volume(call, &vi);
}

static void list_volumes(struct rpc_call *call, const ProtobufCMessage *msg) {
        struct vol_info *vis = NULL;
        size_t n = 0;
        struct wr_err e = {0};
        if (vol_list(manager(call), api_caller_env(call), &vis, &n, &e) < 0)
                return finish_err(call, &e);
        struct volume_msg *ms = calloc(n ? n : 1, sizeof(*ms));
        Warren__V1__Volume **ptrs = calloc(n ? n : 1, sizeof(*ptrs));
        if (!ms || !ptrs) {
                rpc_call_finish(call, WR_STATUS_RESOURCE_EXHAUSTED, "out of memory");
        } else {
                for (size_t i = 0; i < n; i++) {
                        volume_msg_fill(&ms[i], &vis[i]);
                        ptrs[i] = &ms[i].v;
                }
                Warren__V1__ListVolumesResponse resp = WARREN__V1__LIST_VOLUMES_RESPONSE__INIT;
                resp.n_volumes = n;
                resp.volumes = ptrs;
                rpc_call_reply(call, &resp.base);
        }
        free(ms);
        free(ptrs);
        free(vis);
}

/* The live sandboxes of env whose request mounts volume name, as "a, b"
 * (names, else ids) in buf. Returns how many. */
static int mounted_by(struct store *store, const char *env, const char *name, char *buf,
                      size_t size) {
        static const int live[] = {STORE_SANDBOX_PENDING, STORE_SANDBOX_RUNNING,
                                   STORE_SANDBOX_TERMINATING};
        struct store_sandbox_filter f = {
                .environment = env, .statuses = live, .n_statuses = ELEMENTSOF(live)};
        struct store_sandbox *sbs = NULL;
        size_t n = 0;
        buf[0] = 0;
        if (store_sandbox_list(store, &f, &sbs, &n, NULL) < 0)
                return 0;
        int count = 0;
        for (size_t i = 0; i < n; i++) {
                if (!sbs[i].spec || !sbs[i].spec_len)
                        continue;
                Warren__V1__CreateSandboxRequest *req = warren__v1__create_sandbox_request__unpack(
                        NULL, sbs[i].spec_len, sbs[i].spec);
                if (!req)
                        continue;
                bool uses = false;
                for (size_t k = 0; k < req->n_volumes; k++)
                        uses |= req->volumes[k]->volume && streq(req->volumes[k]->volume, name);
                warren__v1__create_sandbox_request__free_unpacked(req, NULL);
                if (!uses)
                        continue;
                size_t len = strlen(buf);
                snprintf(buf + len, size - len, "%s%s", count ? ", " : "",
                         sbs[i].name ? sbs[i].name : sbs[i].id);
                count++;
        }
        store_sandbox_list_free(sbs, n);
        return count;
}

static void delete_volume(struct rpc_call *call, const ProtobufCMessage *msg) {
        const Warren__V1__DeleteVolumeRequest *req = (const void *) msg;
        struct api_ctx *ctx = rpc_call_server_ctx(call);
        if (check_volume(call, "name", req->name) < 0)
                return;
        char users[320];
        int n = mounted_by(ctx->store, api_caller_env(call), req->name, users, sizeof(users));
        if (n > 0) {
                char m[480];
                snprintf(m, sizeof(m),
                         "name: volume %s is mounted by %d live sandbox%s (%s); terminate "
                         "%s first",
                         req->name, n, n == 1 ? "" : "es", users, n == 1 ? "it" : "them");
                rpc_call_finish(call, WR_STATUS_FAILED_PRECONDITION, m);
                return;
        }
        struct wr_err e = {0};
        if (vol_delete(manager(call), api_caller_env(call), req->name, &e) < 0)
                return finish_err(call, &e);
        Warren__V1__DeleteVolumeResponse resp = WARREN__V1__DELETE_VOLUME_RESPONSE__INIT;
        rpc_call_reply(call, &resp.base);
}

/* ---- files ---- */

struct file_msg {
        Warren__V1__FileInfo f;
        Warren__V1__Timestamp mtime;
};

static void file_msg_fill(struct file_msg *m, const struct vol_file *vf) {
        warren__v1__file_info__init(&m->f);
        warren__v1__timestamp__init(&m->mtime);
        m->mtime.unix_nanos = vf->mtime_ns;
        m->f.path.data = (uint8_t *) vf->path;
        m->f.path.len = strlen(vf->path);
        m->f.size_bytes = vf->size;
        m->f.mode = (uint32_t) vf->mode;
        m->f.modified_at = &m->mtime;
        m->f.kind = (Warren__V1__FileKind) vf->kind;
}

static void reply_file(struct rpc_call *call, const struct vol_file *vf) {
        struct file_msg m;
        file_msg_fill(&m, vf);
        rpc_call_reply(call, &m.f.base);
}

/* PutFile: the temp file, then the commit on a worker thread. */
struct put_state {
        struct vol_put *put;
        struct rpc_call *call;
        uv_work_t work;
        struct vol_file result;
        struct wr_err err;
        int r;
        bool started, committing;
        uint64_t t_begin, t_commit; /* uv_hrtime(): meta received, commit queued */
};

static void put_free(struct rpc_call *call) {
        struct put_state *st = rpc_call_get_data(call);
        if (!st)
                return;
        vol_put_free(st->put);
        vol_file_clear(&st->result);
        free(st);
        rpc_call_set_data(call, NULL);
}

/* Finish a PutFile with e and drop its temp file. */
static void put_fail(struct rpc_call *call, struct put_state *st, const struct wr_err *e) {
        vol_put_free(st->put);
        st->put = NULL;
        finish_err(call, e);
}

static void put_file(struct rpc_call *call, const ProtobufCMessage *msg) {
        const Warren__V1__PutFileRequest *req = (const void *) msg;
        if (rpc_call_is_done(call))
                return;
        struct put_state *st = rpc_call_get_data(call);
        struct wr_err e = {0};
        if (!st) {
                if (req->kind_case != WARREN__V1__PUT_FILE_REQUEST__KIND_META) {
                        rpc_call_finish(call, WR_STATUS_INVALID_ARGUMENT,
                                        "meta: the first PutFile message must carry meta "
                                        "(volume, path, mode), then data chunks");
                        return;
                }
                const Warren__V1__PutFileMeta *meta = req->meta;
                _cleanup_free_ char *path = NULL;
                if (check_volume(call, "meta.volume", meta->volume) < 0 ||
                    take_path(call, "meta.path", meta->path, false, &path) < 0)
                        return;
                if (meta->mode & ~07777u) {
                        rpc_call_finish(call, WR_STATUS_INVALID_ARGUMENT,
                                        "meta.mode: give permission bits only (at most 07777)");
                        return;
                }
                st = calloc(1, sizeof(*st));
                if (!st) {
                        rpc_call_finish(call, WR_STATUS_RESOURCE_EXHAUSTED, "out of memory");
                        return;
                }
                st->call = call;
                rpc_call_set_data(call, st);
                if (vol_put_begin_in(manager(call), api_caller_env(call), meta->volume, path,
                                     meta->mode, &st->put, &e) < 0)
                        return put_fail(call, st, &e);
                st->started = true;
                st->t_begin = uv_hrtime();
                return;
        }
        if (!st->put || st->committing)
                return;
        if (req->kind_case != WARREN__V1__PUT_FILE_REQUEST__KIND_DATA) {
                rpc_call_finish(call, WR_STATUS_INVALID_ARGUMENT,
                                "meta: only the first PutFile message carries meta; send data "
                                "chunks after it");
                vol_put_free(st->put);
                st->put = NULL;
                return;
        }
        if (vol_put_write(st->put, req->data.data, req->data.len, &e) < 0)
                return put_fail(call, st, &e);
}

static void put_commit_work(uv_work_t *w) {
        struct put_state *st = w->data;
        st->r = vol_put_commit(st->put, &st->result, &st->err);
}

static void put_commit_done(uv_work_t *w, int status) {
        struct put_state *st = w->data;
        struct rpc_call *call = st->call;
        if (!rpc_call_is_done(call)) {
                if (status < 0)
                        rpc_call_finish(call, WR_STATUS_CANCELLED, "cancelled");
                else if (st->r < 0)
                        finish_err(call, &st->err);
                else {
                        uint64_t now = uv_hrtime();
                        log_debug("PutFile %s: %llu bytes, received in %.1f ms, committed in "
                                  "%.1f ms",
                                  st->result.path, (unsigned long long) st->result.size,
                                  (double) (st->t_commit - st->t_begin) / 1e6,
                                  (double) (now - st->t_commit) / 1e6);
                        reply_file(call, &st->result);
                }
        }
        rpc_call_unref(call);
}

static void put_half_close(struct rpc_call *call) {
        struct put_state *st = rpc_call_get_data(call);
        if (rpc_call_is_done(call))
                return;
        if (!st) {
                rpc_call_finish(call, WR_STATUS_INVALID_ARGUMENT,
                                "meta: PutFile needs a first message with meta (volume, path, "
                                "mode)");
                return;
        }
        if (!st->put || st->committing)
                return;
        st->committing = true;
        st->t_commit = uv_hrtime();
        st->work.data = st;
        rpc_call_ref(call);
        int r = uv_queue_work(rpc_call_loop(call), &st->work, put_commit_work, put_commit_done);
        if (r < 0) {
                rpc_call_unref(call);
                rpc_call_finish(call, WR_STATUS_INTERNAL, "cannot queue the commit");
        }
}

/* GetFile: chunks read into the response buffers. */
struct get_state {
        int fd;
        uint64_t off, end;
};

static void get_free(struct rpc_call *call) {
        struct get_state *st = rpc_call_get_data(call);
        if (!st)
                return;
        safe_close(st->fd);
        free(st);
        rpc_call_set_data(call, NULL);
}

#define HEAD 8 /* room for a FileChunk's field header: tag + varint length */

static void get_pump(struct rpc_call *call) {
        struct get_state *st = rpc_call_get_data(call);
        while (st && !rpc_call_is_done(call)) {
                if (st->off >= st->end) {
                        rpc_call_finish(call, WR_STATUS_OK, NULL);
                        return;
                }
                size_t want =
                        st->end - st->off < GET_CHUNK ? (size_t) (st->end - st->off) : GET_CHUNK;
                struct rpc_buf b = {0};
                if (rpc_buf_alloc(&b, HEAD + want) < 0) {
                        rpc_call_finish(call, WR_STATUS_RESOURCE_EXHAUSTED, "out of memory");
                        return;
                }
                ssize_t n;
                do
                        n = pread(st->fd, b.data + HEAD, want, (off_t) st->off);
                while (n < 0 && errno == EINTR);
                if (n <= 0) {
                        rpc_buf_free(&b);
                        if (n < 0) {
                                struct wr_err e = {0};
                                err_set(&e, -errno, "read: %m");
                                finish_err(call, &e);
                        } else /* the file shrank meanwhile */
                                rpc_call_finish(call, WR_STATUS_OK, NULL);
                        return;
                }
                /* field 1, wire type 2, varint length, just before the data */
                uint8_t head[HEAD];
                size_t h = 0;
                head[h++] = 0x0a;
                for (uint64_t v = (uint64_t) n; h < HEAD; v >>= 7) {
                        head[h++] = (uint8_t) ((v & 0x7f) | (v >= 0x80 ? 0x80 : 0));
                        if (v < 0x80)
                                break;
                }
                memcpy(b.data + HEAD - h, head, h);
                st->off += (uint64_t) n;
                int r = rpc_call_send_buf(call, &b, HEAD - h, h + (size_t) n);
                if (r < 0)
                        return;
                if (r == 1)
                        return; /* on_writable resumes */
        }
}

static void get_file(struct rpc_call *call, const ProtobufCMessage *msg) {
        const Warren__V1__GetFileRequest *req = (const void *) msg;
        _cleanup_free_ char *path = NULL;
        if (check_volume(call, "volume", req->volume) < 0 ||
            take_path(call, "path", req->path, false, &path) < 0)
                return;
        struct wr_err e = {0};
        _cleanup_close_ int fd = -EBADF;
        struct stat sb;
        if (vol_file_open_in(manager(call), api_caller_env(call), req->volume, path, &fd, &sb, &e) <
            0)
                return finish_err(call, &e);
        struct get_state *st = calloc(1, sizeof(*st));
        if (!st) {
                rpc_call_finish(call, WR_STATUS_RESOURCE_EXHAUSTED, "out of memory");
                return;
        }
        uint64_t size = (uint64_t) sb.st_size;
        st->fd = TAKE_FD(fd);
        st->off = req->offset < size ? req->offset : size;
        st->end = req->length && req->length < size - st->off ? st->off + req->length : size;
        rpc_call_set_data(call, st);
        get_pump(call);
}

static void list_files(struct rpc_call *call, const ProtobufCMessage *msg) {
        const Warren__V1__ListFilesRequest *req = (const void *) msg;
        _cleanup_free_ char *prefix = NULL, *after = NULL;
        if (check_volume(call, "volume", req->volume) < 0 ||
            take_path(call, "prefix", req->prefix, true, &prefix) < 0 ||
            take_path(call, "page_token", req->page_token, true, &after) < 0)
                return;
        if (req->page_size > LIST_PAGE_MAX) {
                rpc_call_finish(call, WR_STATUS_INVALID_ARGUMENT,
                                "page_size: at most 1000; follow next_page_token for more");
                return;
        }
        struct wr_err e = {0};
        struct vol_file *files = NULL;
        size_t n = 0;
        bool more = false;
        if (vol_files_list_in(manager(call), api_caller_env(call), req->volume, prefix, after,
                              req->page_size ? req->page_size : LIST_PAGE_MAX, &files, &n, &more,
                              &e) < 0)
                return finish_err(call, &e);
        struct file_msg *ms = calloc(n ? n : 1, sizeof(*ms));
        Warren__V1__FileInfo **ptrs = calloc(n ? n : 1, sizeof(*ptrs));
        if (!ms || !ptrs)
                rpc_call_finish(call, WR_STATUS_RESOURCE_EXHAUSTED, "out of memory");
        else {
                for (size_t i = 0; i < n; i++) {
                        file_msg_fill(&ms[i], &files[i]);
                        ptrs[i] = &ms[i].f;
                }
                Warren__V1__ListFilesResponse resp = WARREN__V1__LIST_FILES_RESPONSE__INIT;
                resp.n_files = n;
                resp.files = ptrs;
                if (more && n > 0) {
                        resp.next_page_token.data = (uint8_t *) files[n - 1].path;
                        resp.next_page_token.len = strlen(files[n - 1].path);
                }
                rpc_call_reply(call, &resp.base);
        }
        free(ms);
        free(ptrs);
        vol_files_free(files, n);
}

static void remove_file(struct rpc_call *call, const ProtobufCMessage *msg) {
        const Warren__V1__RemoveFileRequest *req = (const void *) msg;
        _cleanup_free_ char *path = NULL;
        if (check_volume(call, "volume", req->volume) < 0 ||
            take_path(call, "path", req->path, false, &path) < 0)
                return;
        struct wr_err e = {0};
        if (vol_file_remove_in(manager(call), api_caller_env(call), req->volume, path, &e) < 0)
                return finish_err(call, &e);
        Warren__V1__RemoveFileResponse resp = WARREN__V1__REMOVE_FILE_RESPONSE__INIT;
        rpc_call_reply(call, &resp.base);
}

static void stat_file(struct rpc_call *call, const ProtobufCMessage *msg) {
        const Warren__V1__StatRequest *req = (const void *) msg;
        _cleanup_free_ char *path = NULL;
        if (check_volume(call, "volume", req->volume) < 0 ||
            take_path(call, "path", req->path, true, &path) < 0)
                return;
        struct wr_err e = {0};
        struct vol_file vf = {0};
        if (vol_file_stat_in(manager(call), api_caller_env(call), req->volume, path, &vf, &e) < 0)
                return finish_err(call, &e);
        reply_file(call, &vf);
        vol_file_clear(&vf);
}

#define METHOD(name, k, in, out, fn, ...)                                                          \
        {                                                                                          \
                .path = "/warren.v1.Volumes/" name, .kind = k,                                     \
                .input = &warren__v1__##in##__descriptor,                                          \
                .output = &warren__v1__##out##__descriptor, .on_message = fn, __VA_ARGS__          \
        }

static const struct rpc_method methods[] = {
        METHOD("CreateVolume", RPC_UNARY, create_volume_request, volume, create_volume),
        METHOD("GetVolume", RPC_UNARY, get_volume_request, volume, get_volume),
        METHOD("ListVolumes", RPC_UNARY, list_volumes_request, list_volumes_response, list_volumes),
        METHOD("DeleteVolume", RPC_UNARY, delete_volume_request, delete_volume_response,
               delete_volume),
        METHOD("PutFile", RPC_CLIENT_STREAM, put_file_request, file_info, put_file,
               .on_half_close = put_half_close, .on_free = put_free),
        METHOD("GetFile", RPC_SERVER_STREAM, get_file_request, file_chunk, get_file,
               .on_writable = get_pump, .on_free = get_free),
        METHOD("ListFiles", RPC_UNARY, list_files_request, list_files_response, list_files),
        METHOD("RemoveFile", RPC_UNARY, remove_file_request, remove_file_response, remove_file),
        METHOD("Stat", RPC_UNARY, stat_request, file_info, stat_file),
};

int api_volumes_register(struct rpc_server *s) {
        return rpc_server_add_methods(s, methods, ELEMENTSOF(methods));
}
