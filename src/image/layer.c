/* SPDX-License-Identifier: Apache-2.0 */
/* Layer jobs: run warren-unpack on a tar stream into layers/tmp/<random>,
 * read its fixed-size report, then move the tree into
 * layers/sha256/<hex> (or drop it when the layer exists) and record it.
 * Removing a failed or duplicate tree runs on the libuv thread pool; the
 * job's callback fires once that is done, so callers never observe a
 * half-removed tree. */
#include "image/image-internal.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <limits.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "store/images.h"

struct img_layer_job {
        struct img_store *s;
        uv_loop_t *loop;
        uv_process_t proc;
        uv_poll_t pid_poll; /* --privsep: warren-priv's child, watched by its pidfd */
        int pidfd;
        bool by_priv;
        uv_work_t work;
        unsigned refs; /* process handle, pending work, the logical job */
        int report_fd;
        int rm_dir_fd; /* dup of layers/tmp for the thread-pool removal */
        char tmp_name[32];
        char expected[IMG_DIGEST_MAX];
        char diff_id[IMG_DIGEST_MAX];
        img_layer_done_fn done;
        void *userdata;
        bool exited, cancelled, delivered;
        int result;
        struct wr_err err;
};

static void job_unref(struct img_layer_job *j) {
        if (--j->refs > 0)
                return;
        closep(&j->report_fd);
        closep(&j->rm_dir_fd);
        closep(&j->pidfd);
        free(j);
}

static void deliver(struct img_layer_job *j) {
        if (j->delivered)
                return;
        j->delivered = true;
        if (!j->cancelled && j->done)
                j->done(j->result, j->result < 0 ? NULL : j->diff_id, &j->err, j->userdata);
        job_unref(j); /* the logical job */
}

/* The job's tmp tree: through the store's ops (--privsep: warren-priv's
 * LAYER_REMOVE) or here, from the dup of layers/tmp. Any thread. */
static void tmp_remove(struct img_layer_job *j) {
        if (j->s->ops.remove)
                (void) img_layer_tmp_remove(j->s, j->tmp_name);
        else
                (void) rm_rf_at(j->rm_dir_fd, j->tmp_name);
}

static void rm_work(uv_work_t *w) {
        tmp_remove(w->data);
}

static void rm_after(uv_work_t *w, int status) {
        struct img_layer_job *j = w->data;
        if (status < 0) /* cancelled before it ran: remove here */
                tmp_remove(j);
        deliver(j);
        job_unref(j); /* the work */
}

/* Remove the tmp tree off the loop, then deliver. */
static void remove_then_deliver(struct img_layer_job *j) {
        j->work.data = j;
        j->refs++;
        if (uv_queue_work(j->loop, &j->work, rm_work, rm_after) < 0) {
                j->refs--;
                tmp_remove(j);
                deliver(j);
        }
}

static void on_close(uv_handle_t *h) {
        job_unref(h->data);
}

static bool read_report(struct img_layer_job *j, struct img_unpack_report *rep) {
        ssize_t n = read(j->report_fd, rep, sizeof(*rep));
        if (n != (ssize_t) sizeof(*rep) || rep->magic != IMG_REPORT_MAGIC ||
            rep->size != sizeof(*rep))
                return false;
        rep->err.msg[sizeof(rep->err.msg) - 1] = '\0';
        rep->stats.diff_id[sizeof(rep->stats.diff_id) - 1] = '\0';
        return true;
}

/* Move the tree into layers/sha256/<hex>: 0 moved, 1 an identical layer
 * is there already (ours stays in layers/tmp), or -errno with j->err
 * (FAILED_PRECONDITION: the ops found /root/.ssh in it). */
static int move_layer(struct img_layer_job *j) {
        struct img_store *s = j->s;
        const char *hex = j->diff_id + 7;
        if (!s->ops.commit) {
                if (renameat2(s->layers_tmp_fd, j->tmp_name, s->layers_fd, hex, RENAME_NOREPLACE) ==
                    0)
                        return 0;
                if (errno == EEXIST)
                        return 1;
                return err_set(&j->err, -errno, "store layer %s: %m", j->diff_id);
        }
        int r = s->ops.commit(s->ops.userdata, j->tmp_name, hex, &j->err);
        if (r < 0)
                return err_prefix(&j->err, r, "store layer %s", j->diff_id);
        if (r == 2) /* the message of img_store_commit_image's own check */
                return err_setx(&j->err, -EPERM, WR_STATUS_FAILED_PRECONDITION, WR_FAULT_CLIENT,
                                "the image contains /root/.ssh (layer %.19s...): "
                                "images containing /root/.ssh are refused",
                                j->diff_id);
        return r == 1 ? 1 : 0;
}

/* Move the unpacked tree into place and record the layer. */
static int commit_layer(struct img_layer_job *j, const struct img_unpack_stats *st,
                        bool *ret_keep_tmp) {
        struct img_store *s = j->s;
        const char *hex = j->diff_id + 7;
        *ret_keep_tmp = true; /* until it moved: removed by the caller */
        int r = move_layer(j);
        if (r < 0)
                return r;
        *ret_keep_tmp = r == 1; /* an identical layer is there already: drop ours */
        char path[128];
        snprintf(path, sizeof(path), "layers/sha256/%s", hex);
        struct store_layer l = {
                .diff_id = j->diff_id,
                .size = st->tar_bytes,
                .path = path,
                .created_ns = store_now_ns(),
        };
        r = store_layer_insert(s->db, &l, &j->err);
        if (r < 0 && !*ret_keep_tmp) {
                /* no row for the tree we just placed: take it back out */
                if (s->ops.remove)
                        (void) s->ops.remove(s->ops.userdata, false, hex, NULL);
                else if (renameat(s->layers_fd, hex, s->layers_tmp_fd, j->tmp_name) == 0)
                        *ret_keep_tmp = true;
        }
        return r < 0 ? err_prefix(&j->err, r, "record layer") : 0;
}

static void exited(struct img_layer_job *j, int64_t exit_status, int term_signal);

static void on_exit_cb(uv_process_t *p, int64_t exit_status, int term_signal) {
        struct img_layer_job *j = p->data;
        j->exited = true;
        uv_close((uv_handle_t *) p, on_close);
        exited(j, exit_status, term_signal);
}

/* --privsep: the pidfd of warren-priv's child is readable: it exited (how
 * is warren-priv's to log; the report says what it did). */
static void on_pidfd(uv_poll_t *h, int status, int events) {
        (void) status;
        (void) events;
        struct img_layer_job *j = h->data;
        uv_poll_stop(h);
        j->exited = true;
        uv_close((uv_handle_t *) h, on_close);
        exited(j, -1, 0);
}

static void exited(struct img_layer_job *j, int64_t exit_status, int term_signal) {
        struct img_unpack_report rep;
        bool have = read_report(j, &rep);
        if (j->cancelled) {
                remove_then_deliver(j);
                return;
        }
        if (!have) {
                j->result = err_setx(&j->err, -EIO, WR_STATUS_INTERNAL, WR_FAULT_SERVICE,
                                     "unpack helper %s (%s %d) without a report", j->s->helper,
                                     term_signal ? "killed by signal" : "exited with status",
                                     term_signal ? term_signal : (int) exit_status);
                remove_then_deliver(j);
                return;
        }
        if (rep.code < 0) {
                j->err = rep.err;
                if (j->err.code == 0)
                        err_set(&j->err, rep.code, "unpack failed: %s", strerror(-rep.code));
                j->result = j->err.code;
                remove_then_deliver(j);
                return;
        }
        if (!img_digest_valid(rep.stats.diff_id)) {
                j->result = err_set(&j->err, -EIO, "unpack helper reported a malformed digest");
                remove_then_deliver(j);
                return;
        }
        memcpy(j->diff_id, rep.stats.diff_id, sizeof(j->diff_id));
        if (j->expected[0] && strcmp(j->expected, j->diff_id) != 0) {
                j->result = err_setx(&j->err, -EBADMSG, WR_STATUS_DATA_LOSS, WR_FAULT_CLIENT,
                                     "layer digest mismatch: expected %s, got %s", j->expected,
                                     j->diff_id);
                remove_then_deliver(j);
                return;
        }
        bool drop_tmp = true;
        j->result = commit_layer(j, &rep.stats, &drop_tmp);
        if (drop_tmp)
                remove_then_deliver(j);
        else
                deliver(j);
}

/* --privsep: warren-priv starts warren-unpack into layers/tmp/<name>
 * (UNPACK_START) with the same stdin and report pipe; the job watches its
 * pidfd instead of a uv_process_t. */
static int unpack_by_priv(struct img_layer_job *j, int in_fd, int report_w, struct wr_err *e) {
        struct img_store *s = j->s;
        char dir[PATH_MAX];
        snprintf(dir, sizeof(dir), "%s/layers/tmp/%s", s->state_dir, j->tmp_name);
        int pid = 0;
        int r = s->unpack_start(s->unpack_start_ud, dir, in_fd, report_w, &pid, &j->pidfd, e);
        if (r < 0)
                return err_prefix(e, r, "unpack layer");
        j->by_priv = true;
        j->pid_poll.data = j;
        if ((r = uv_poll_init(j->loop, &j->pid_poll, j->pidfd)) < 0) {
                (void) syscall(SYS_pidfd_send_signal, j->pidfd, SIGKILL, NULL, 0);
                closep(&j->pidfd);
                return err_set(e, r, "unpack layer: watch warren-unpack: %s", uv_strerror(r));
        }
        (void) uv_poll_start(&j->pid_poll, UV_READABLE, on_pidfd);
        j->refs = 2; /* the poll handle and the logical job */
        return 0;
}

int img_layer_unpack(struct img_store *s, uv_loop_t *loop, int tar_fd, const char *expected_diff_id,
                     img_layer_done_fn done, void *userdata, struct img_layer_job **ret,
                     struct wr_err *e) {
        if (expected_diff_id && *expected_diff_id && !img_digest_valid(expected_diff_id))
                return err_setx(e, -EINVAL, WR_STATUS_INVALID_ARGUMENT, WR_FAULT_CLIENT,
                                "malformed layer digest \"%.80s\"", expected_diff_id);
        struct img_layer_job *j = calloc(1, sizeof(*j));
        if (!j)
                return err_set(e, -ENOMEM, "unpack layer: out of memory");
        j->s = s;
        j->loop = loop;
        j->report_fd = j->rm_dir_fd = j->pidfd = -EBADF;
        j->done = done;
        j->userdata = userdata;
        if (expected_diff_id)
                snprintf(j->expected, sizeof(j->expected), "%s", expected_diff_id);
        strcpy(j->tmp_name, "unpack-");
        img_random_name(j->tmp_name + 7);

        _cleanup_close_ int dir_fd = -EBADF, report_w = -EBADF, in_fd = -EBADF;
        int pfd[2];
        int r = 0;
        if (mkdirat(s->layers_tmp_fd, j->tmp_name, 0755) < 0) {
                r = err_set(e, -errno, "unpack layer: create %s: %m", j->tmp_name);
                free(j);
                return r;
        }
        dir_fd = openat(s->layers_tmp_fd, j->tmp_name,
                        O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        j->rm_dir_fd = fcntl(s->layers_tmp_fd, F_DUPFD_CLOEXEC, 3);
        in_fd = fcntl(tar_fd, F_DUPFD_CLOEXEC, 3);
        if (dir_fd < 0 || j->rm_dir_fd < 0 || in_fd < 0 || pipe2(pfd, O_CLOEXEC) < 0) {
                r = err_set(e, -errno, "unpack layer: %m");
                goto fail;
        }
        j->report_fd = pfd[0];
        report_w = pfd[1];
        (void) fcntl(j->report_fd, F_SETFL, O_NONBLOCK);

        if (s->unpack_start) {
                r = unpack_by_priv(j, in_fd, report_w, e);
                if (r < 0)
                        goto fail;
                if (ret)
                        *ret = j;
                return 0;
        }
        char *args[] = {s->helper, NULL};
        char *env[] = {"PATH=/usr/sbin:/usr/bin:/sbin:/bin", NULL};
        uv_stdio_container_t stdio[5] = {
                {.flags = UV_INHERIT_FD, .data.fd = in_fd},
                {.flags = UV_INHERIT_FD, .data.fd = 2},
                {.flags = UV_INHERIT_FD, .data.fd = 2},
                {.flags = UV_INHERIT_FD, .data.fd = dir_fd},
                {.flags = UV_INHERIT_FD, .data.fd = report_w},
        };
        uv_process_options_t opts = {
                .exit_cb = on_exit_cb,
                .file = s->helper,
                .args = args,
                .env = env,
                .cwd = "/",
                .stdio_count = 5,
                .stdio = stdio,
        };
        j->proc.data = j;
        r = uv_spawn(loop, &j->proc, &opts);
        if (r < 0) {
                err_setx(e, r, WR_STATUS_INTERNAL, WR_FAULT_SERVICE,
                         "unpack layer: start helper %s: %s", s->helper, uv_strerror(r));
                /* uv_spawn failures still need the handle closed */
                j->refs = 1;
                j->delivered = true;
                j->cancelled = true;
                (void) img_layer_tmp_remove(s, j->tmp_name);
                uv_close((uv_handle_t *) &j->proc, on_close);
                return r;
        }
        j->refs = 2; /* the process handle and the logical job */
        if (ret)
                *ret = j;
        return 0;
fail:
        (void) img_layer_tmp_remove(s, j->tmp_name);
        closep(&j->report_fd);
        closep(&j->rm_dir_fd);
        free(j);
        return r;
}

void img_layer_job_cancel(struct img_layer_job *j) {
        if (!j || j->cancelled || j->delivered)
                return;
        j->cancelled = true;
        if (!j->exited && j->by_priv)
                (void) syscall(SYS_pidfd_send_signal, j->pidfd, SIGKILL, NULL, 0);
        else if (!j->exited)
                (void) uv_process_kill(&j->proc, SIGKILL);
}
