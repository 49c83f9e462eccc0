/* SPDX-License-Identifier: Apache-2.0 */
/* A live sandbox from the moment it runs: its struct, the control
 * connection to warren-init, init's exit, the lifetime timer, terminate
 * (SIGTERM, grace, SIGKILL), teardown on a worker thread, and detaching
 * at daemon shutdown. */
#include "sandbox/sandbox-internal.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "basic/log.h"
#include "basic/macro.h"
#include "basic/rmrf.h"
#include "runtime/ctl.h"
#include "runtime/runtime.h"

#define SETTLE_MS 20 /* how often a terminating sandbox is checked */

/* --- the struct --- */

int sbx_new(struct sbx_manager *m, const char *id, int64_t expires_ns, struct sbx **ret) {
        struct sbx *sb = calloc(1, sizeof(*sb));
        if (!sb)
                return -ENOMEM;
        sb->m = m;
        sb->ctl_fd = -EBADF;
        sb->pidfd = -EBADF;
        sb->ssh_pidfd = -EBADF;
        sb->net_slot = -1;
        sb->uid_slot = -1;
        sb->expires_ns = expires_ns;
        snprintf(sb->id, sizeof(sb->id), "%s", id);
        *ret = sb;
        return 0;
}

void sbx_free(struct sbx *sb) {
        if (!sb)
                return;
        sb->ctl_fd = safe_close(sb->ctl_fd);
        sb->pidfd = safe_close(sb->pidfd);
        /* a sandbox left running keeps its agent (an orphan from now on) */
        sb->ssh_pidfd = safe_close(sb->ssh_pidfd);
        /* the block is free again once the host end is gone: teardown
         * deleted it, or a detached sandbox keeps it (the manager goes) */
        sbx_network_release(sb->m->net, sb->net_slot);
        /* its user namespace range likewise: every process of it is gone
         * and its dir removed (a failed teardown handed the range to the
         * cleanup), or a detached sandbox keeps it (the manager goes) */
        sbx_uid_slot_release(sb->m, sb->uid_slot);
        sbx_journal_free(sb);
        rt_sandbox_free(sb->rt);
        sbx_env_free(sb->env);
        free(sb->workdir);
        free(sb->name);
        free(sb->image_id);
        free(sb->remote_dir);
        free(sb);
}

void sbx_entrypoint_log_remove(struct sbx_manager *m, const char *id) {
        char path[PATH_MAX];
        snprintf(path, sizeof(path), "%s/sandboxes/%s.entrypoint.log", m->state_dir, id);
        (void) unlink(path);
}

/* --- control connection --- */

static int wait_writable(int fd) {
        struct pollfd p = {.fd = fd, .events = POLLOUT};
        int r = RETRY_EINTR(poll(&p, 1, 1000));
        if (r < 0)
                return -errno;
        return r == 0 ? -ETIMEDOUT : 0;
}

int sbx_ctl_send_spawn(struct sbx *sb, const void *req, const int stdio[3]) {
        if (sb->ctl_fd < 0)
                return -EPIPE;
        uint64_t t = sbx_mono_ns();
        for (int tries = 0;; tries++) {
                int r = rt_ctl_send_spawn(sb->ctl_fd, req, stdio);
                if (r >= 0) {
                        /* remember when, for the exec start latency */
                        uint64_t id = ((const struct rt_spawn_req *) req)->id;
                        for (size_t i = 0; i < ELEMENTSOF(sb->spawn_times); i++)
                                if (!sb->spawn_times[i].id) {
                                        sb->spawn_times[i].id = id;
                                        sb->spawn_times[i].sent_ns = t;
                                        break;
                                }
                }
                if (r != -EAGAIN || tries >= 5)
                        return r;
                if ((r = wait_writable(sb->ctl_fd)) < 0)
                        return r;
        }
}

int sbx_ctl_send_signal(struct sbx *sb, uint64_t target, int signo, bool group) {
        if (sb->ctl_fd < 0)
                return -EPIPE;
        for (int tries = 0;; tries++) {
                int r = rt_ctl_send_signal(sb->ctl_fd, target, target, 0, signo, group);
                if (r != -EAGAIN || tries >= 5)
                        return r;
                if ((r = wait_writable(sb->ctl_fd)) < 0)
                        return r;
        }
}

int sbx_ctl_send_resize(struct sbx *sb, uint64_t id, unsigned cols, unsigned rows) {
        if (sb->ctl_fd < 0)
                return -EPIPE;
        return rt_ctl_send_resize(sb->ctl_fd, id, (uint16_t) cols, (uint16_t) rows);
}

static void handle_closed(uv_handle_t *h) {
        struct sbx *sb = h->data;
        if (--sb->handles > 0)
                return;
        /* Every handle is closed: unlink and free. */
        struct sbx_manager *m = sb->m;
        for (struct sbx **pp = &m->list; *pp; pp = &(*pp)->next)
                if (*pp == sb) {
                        *pp = sb->next;
                        break;
                }
        sbx_free(sb);
}

static void ctl_close(struct sbx *sb) {
        if (sb->ctl_fd < 0)
                return;
        uv_poll_stop(&sb->ctl_poll);
        uv_close((uv_handle_t *) &sb->ctl_poll, handle_closed);
        close(sb->ctl_fd);
        sb->ctl_fd = -EBADF;
}

static void on_ctl(uv_poll_t *h, int status, int events) {
        struct sbx *sb = h->data;
        for (;;) {
                struct rt_ctl_msg msg = {0};
                int fd = -EBADF;
                int r = rt_ctl_recv(sb->ctl_fd, &msg, &fd);
                if (r == -EAGAIN)
                        return;
                if (r < 0) {
                        /* Init closed the connection or sent garbage: the
                         * sandbox is unusable. Its pidfd tells when it is
                         * gone; a hostile init gets killed. */
                        log_debug("sandbox %s: control connection: %s", sb->id, strerror(-r));
                        ctl_close(sb);
                        if (sb->remote) {
                                /* the relay went (warrend's side of it
                                 * stays): held execs wait for its return */
                                sbx_exec_leave_all(sb); /* ends the rest */
                                sb->state = SBX_DEAD;
                                return;
                        }
                        if (sb->state == SBX_RUNNING) {
                                sb->term_reason = "warren-init stopped answering";
                                sb->final_status = STORE_SANDBOX_FAILED;
                                sbx_rt_kill(sb->m, sb->rt, SIGKILL);
                        }
                        return;
                }
                switch (msg.type) {
                case CTL_SPAWNED:
                        for (size_t i = 0; i < ELEMENTSOF(sb->spawn_times); i++)
                                if (sb->spawn_times[i].id == msg.id) {
                                        double s = (double) (sbx_mono_ns() -
                                                             sb->spawn_times[i].sent_ns) /
                                                   1e9;
                                        if (!msg.err)
                                                sbx_histogram_observe(&sb->m->metrics.exec_start,
                                                                      s);
                                        log_debug("sandbox %s: exec %llu spawned in %.3f ms",
                                                  sb->id, (unsigned long long) msg.id, s * 1e3);
                                        sb->spawn_times[i].id = 0;
                                        break;
                                }
                        sbx_exec_on_spawned(sb, msg.id, msg.pid, -msg.err, fd);
                        fd = -EBADF;
                        break;
                case CTL_EXITED:
                        sbx_exec_on_exited(sb, msg.id, msg.status);
                        break;
                default:
                        break; /* RESULT, PONG: nothing waits for them */
                }
                if (fd >= 0)
                        close(fd);
                rt_ctl_msg_done(&msg);
                if (sb->ctl_fd < 0)
                        return;
        }
}

/* --- termination --- */

static void timer_cb(uv_timer_t *t);

static void on_init_exit(uv_poll_t *h, int status, int events) {
        struct sbx *sb = h->data;
        uv_poll_stop(h);
        if (sb->state == SBX_RUNNING) {
                sb->term_reason = "the sandbox's init exited unexpectedly";
                sb->final_status = STORE_SANDBOX_FAILED;
        }
        sbx_finalize(sb);
}

/* Everything but init has exited? */
static bool sandbox_settled(struct sbx *sb) {
        if (sb->execs)
                return false;
        struct rt_usage u = {0};
        if (rt_sandbox_usage(sb->rt, &u) < 0)
                return true;
        return u.pids <= 1;
}

static void timer_cb(uv_timer_t *t) {
        struct sbx *sb = t->data;
        if (sb->state == SBX_RUNNING) {
                /* Lifetime over. */
                int r = sbx_terminate(sb->m, sb->id, 10000, NULL, NULL, NULL);
                if (r >= 0)
                        sb->term_reason = "lifetime expired";
                return;
        }
        if (sb->state != SBX_TERMINATING)
                return;
        if (uv_now(sb->m->loop) >= sb->term_deadline || sandbox_settled(sb)) {
                sbx_finalize(sb);
                return;
        }
        uv_timer_start(&sb->timer, timer_cb, SETTLE_MS, 0);
}

/* Teardown, phase 1 (worker): kill init (its pid namespace with it) and
 * reap it. The end is recorded and answered after this; the host cleanup
 * (phase 2) follows without anyone waiting for it. */
static void reap_work(uv_work_t *w) {
        struct sbx *sb = w->data;
        sb->teardown_r = sb->rt ? sbx_rt_kill_wait(sb->m, sb->rt, &sb->teardown_err) : 0;
}

/* Phase 2 (worker): the veth (its host end later: sbx_net_retire), the
 * cgroups with anything left in them (a helper beside the sandbox), the
 * dir. */
static void teardown_work(uv_work_t *w) {
        struct sbx *sb = w->data;
        /* the veth's host end is deleted after the end is recorded
         * (sbx_net_retire): deleting it waits for the netns teardown and
         * an RCU grace period, ~10-30 ms no caller needs to wait for */
        if (sb->rt && sb->net_slot >= 0)
                rt_sandbox_net_disown(sb->rt);
        sb->teardown_r = sb->rt ? sbx_rt_destroy(sb->m, sb->rt, &sb->teardown_err) : 0;
        sbx_ssh_reap(sb); /* killed with the cgroups */
}

/* ---- the host end of a veth, deleted in the background ---- */

struct net_retire {
        uv_work_t work;
        struct sbx_manager *m;
        int32_t slot;
        bool open4; /* its address is in the table's open4 set */
        char peer[16];
        int r;
};

static void net_retire_work(uv_work_t *w) {
        struct net_retire *j = w->data;
        struct wr_err e = {0};
        /* out of open4 (if its element is there: the block remembers), off
         * the loop: a commit that deletes waits for an RCU grace period,
         * ~10 ms. A block whose element may still be there is not given
         * out again (a policed next owner would delete it anyway before
         * it runs: sbx_egress_attach) */
        if ((j->r = sbx_network_set_open(j->m->net, j->slot, false, &e)) < 0) {
                log_warn("network: %s", e.msg);
                return;
        }
        j->r = sbx_link_delete(j->m, j->peer, &e);
        if (j->r < 0)
                log_warn("network: %s", e.msg);
}

static void net_retire_done(uv_work_t *w, int status) {
        struct net_retire *j = w->data;
        /* a link that could not be deleted keeps its block (the next
         * start's sweep tries again) */
        if (j->r >= 0 && status == 0)
                sbx_network_release(j->m->net, j->slot);
        j->m->net_jobs--;
        free(j);
}

void sbx_net_retire(struct sbx_manager *m, int32_t slot, bool open4) {
        if (!m->net || slot < 0)
                return;
        struct net_retire *j = calloc(1, sizeof(*j));
        if (j) {
                j->m = m;
                j->slot = slot;
                j->open4 = open4;
                j->work.data = j;
                sbx_network_peer_name(m->net, slot, j->peer, sizeof(j->peer));
                if (uv_queue_work(m->loop, &j->work, net_retire_work, net_retire_done) >= 0) {
                        m->net_jobs++;
                        return;
                }
                free(j);
        }
        /* no worker: delete it here */
        char peer[16];
        struct wr_err e = {0};
        if (sbx_network_set_open(m->net, slot, false, &e) < 0) {
                log_warn("network: %s", e.msg);
                return;
        }
        sbx_network_peer_name(m->net, slot, peer, sizeof(peer));
        if (sbx_link_delete(m, peer, &e) >= 0)
                sbx_network_release(m->net, slot);
}

static void teardown_done(uv_work_t *w, int status);
static void reap_done(uv_work_t *w, int status);

/* Kill what is left, free the runtime's resources (on a worker thread),
 * then record the end, call the waiters, close handles. Idempotent. */
void sbx_finalize(struct sbx *sb) {
        if (sb->state == SBX_DEAD)
                return;
        sb->state = SBX_DEAD;
        if (sb->term_tp[0])
                sb->term_tp[1] = sbx_mono_ns();
        sbx_exec_abort_all(sb, SBX_EXIT_SANDBOX_TERMINATED);
        ctl_close(sb);
        uv_timer_stop(&sb->timer);
        uv_poll_stop(&sb->pid_poll);
        sb->teardown.data = sb;
        sb->teardown_err = (struct wr_err){0};
        if (uv_queue_work(sb->m->loop, &sb->teardown, reap_work, reap_done) < 0) {
                reap_work(&sb->teardown);
                reap_done(&sb->teardown, 0);
        }
}

static void call_waiters(struct sbx *sb, int r, const struct wr_err *e) {
        struct sbx_waiter *w = sb->waiters;
        sb->waiters = NULL;
        while (w) {
                struct sbx_waiter *next = w->next;
                if (w->done)
                        w->done(r < 0 ? r : 0, r < 0 ? e : NULL, w->userdata);
                free(w);
                w = next;
        }
}

/* Init is reaped: every process of the sandbox is gone. Record the end
 * and answer the waiters now; the host cleanup runs after (phase 2). A
 * failed reap answers once the full teardown tried. */
static const char *end_reason(const struct sbx *sb) {
        return sb->term_reason ? sb->term_reason : "terminated";
}

static enum store_sandbox_status end_status(const struct sbx *sb) {
        return sb->final_status ? sb->final_status : STORE_SANDBOX_TERMINATED;
}

/* The row says how it ended; once. */
static void record_end(struct sbx *sb) {
        if (sb->end_recorded)
                return;
        sb->end_recorded = true;
        sbx_entrypoint_log_remove(sb->m, sb->id);
        struct wr_err se = {0};
        if (store_sandbox_update_status(sb->m->store, sb->id, end_status(sb), end_reason(sb), &se) <
            0)
                log_warn("sandbox %s: record end: %s", sb->id, se.msg);
        log_info("sandbox %s %s: %s", sb->id,
                 end_status(sb) == STORE_SANDBOX_FAILED ? "failed" : "terminated", end_reason(sb));
        if (sb->term_tp[0] && sb->term_tp[2]) {
                uint64_t end = sbx_mono_ns();
                log_debug("sandbox %s: terminate %.3f ms: settle %.3f, reap %.3f, record %.3f",
                          sb->id, (double) (end - sb->term_tp[0]) / 1e6,
                          (double) (sb->term_tp[1] - sb->term_tp[0]) / 1e6,
                          (double) (sb->term_tp[2] - sb->term_tp[1]) / 1e6,
                          (double) (end - sb->term_tp[2]) / 1e6);
        }
}

static void reap_done(uv_work_t *work, int status) {
        struct sbx *sb = work->data;
        if (sb->term_tp[0])
                sb->term_tp[2] = sbx_mono_ns();
        if (status == 0 && sb->teardown_r >= 0) {
                record_end(sb);
                call_waiters(sb, 0, NULL);
        }
        sb->teardown_err = (struct wr_err){0};
        if (uv_queue_work(sb->m->loop, &sb->teardown, teardown_work, teardown_done) < 0) {
                teardown_work(&sb->teardown);
                teardown_done(&sb->teardown, 0);
        }
}

static void teardown_done(uv_work_t *work, int status) {
        struct sbx *sb = work->data;
        int r = sb->teardown_r;
        struct wr_err e = sb->teardown_err;
        record_end(sb); /* done already unless the reap had failed */
        if (r < 0) {
                /* its processes are gone (the kill is the first step);
                 * what is left on the host is retried in the background
                 * and shown on the row: the terminate itself succeeded */
                log_warn("sandbox %s: teardown: %s (retrying in the background)", sb->id, e.msg);
                sbx_cleanup_later_uids(sb->m, sb->id, sb->rt ? rt_sandbox_dir(sb->rt) : NULL,
                                       end_status(sb), end_reason(sb), &e, sb->uid_slot);
                sb->uid_slot = -1;
        }
        call_waiters(sb, 0, NULL);
        /* the end is recorded and answered: out of warren-egress, then the
         * host end of its veth */
        bool open4 = sb->egress_open;
        sb->egress_open = false; /* the retire job takes it out of open4 */
        sbx_egress_detach(sb);
        sbx_net_retire(sb->m, sb->net_slot, open4);
        sb->net_slot = -1;
        uv_close((uv_handle_t *) &sb->timer, handle_closed);
        uv_close((uv_handle_t *) &sb->pid_poll, handle_closed);
}

int sbx_terminate(struct sbx_manager *m, const char *id, uint64_t grace_ms,
                  sbx_terminate_done_fn done, void *userdata, struct wr_err *e) {
        struct sbx *sb = sbx_find_live(m, id);
        if (!sb) {
                /* Not live: known (already ended) or unknown. */
                struct store_sandbox row = {0};
                int r = store_sandbox_load(m->store, id, &row, NULL);
                store_sandbox_clear(&row);
                if (r < 0)
                        return err_setx(e, -ENOENT, WR_STATUS_NOT_FOUND, WR_FAULT_CLIENT,
                                        "sandbox %s not found", id);
                if (done)
                        done(0, NULL, userdata);
                return 0;
        }
        if (done) {
                struct sbx_waiter *w = calloc(1, sizeof(*w));
                if (!w)
                        return err_set(e, -ENOMEM, "terminate: out of memory");
                w->done = done;
                w->userdata = userdata;
                w->next = sb->waiters;
                sb->waiters = w;
        }
        if (sb->state == SBX_TERMINATING)
                return 0;
        sb->state = SBX_TERMINATING;
        sb->term_tp[0] = sbx_mono_ns();
        if (sb->paused) {
                /* SIGTERM must reach a running init: thaw first */
                struct wr_err fe = {0};
                if (sbx_rt_freeze(m, sb->rt, false, &fe) < 0)
                        log_warn("sandbox %s: %s", sb->id, fe.msg);
                sb->paused = false;
        }
        struct wr_err se = {0};
        store_sandbox_update_status(m->store, sb->id, STORE_SANDBOX_TERMINATING, NULL, &se);
        sb->term_deadline = uv_now(m->loop) + grace_ms;
        /* SIGTERM goes to init, which forwards it to every process. */
        if (grace_ms == 0 || sbx_rt_kill(m, sb->rt, SIGTERM) < 0)
                sb->term_deadline = uv_now(m->loop);
        uv_timer_stop(&sb->timer);
        uv_timer_start(&sb->timer, timer_cb, sandbox_settled(sb) ? 0 : SETTLE_MS, 0);
        return 0;
}

/* --- arming a started (or re-attached) sandbox --- */

/* sbx_arm failed: the sandbox goes (synchronously; a rare path). */
static void arm_failed(struct sbx *sb) {
        struct wr_err de = {0};
        sb->state = SBX_DEAD;
        if (sb->rt && sbx_rt_destroy(sb->m, sb->rt, &de) < 0)
                log_warn("sandbox %s: %s", sb->id, de.msg);
        sbx_ssh_reap(sb);
}

int sbx_arm(struct sbx *sb, struct wr_err *e) {
        struct sbx_manager *m = sb->m;
        /* A pidfd of our own: libuv makes polled fds non-blocking, and the
         * runtime's blocking waitid on its pidfd must stay blocking. */
        sb->pidfd = (int) syscall(SYS_pidfd_open, rt_sandbox_pid(sb->rt), 0);
        if (sb->pidfd < 0) {
                int r = err_set(e, -errno, "sandbox %s: pidfd_open: %m", sb->id);
                arm_failed(sb);
                sbx_free(sb);
                return r;
        }
        uv_handle_t *opened[3];
        size_t n = 0;
        int r = uv_timer_init(m->loop, &sb->timer);
        if (r >= 0) {
                opened[n++] = (uv_handle_t *) &sb->timer;
                r = uv_poll_init(m->loop, &sb->pid_poll, sb->pidfd);
        }
        if (r >= 0) {
                opened[n++] = (uv_handle_t *) &sb->pid_poll;
                r = uv_poll_init(m->loop, &sb->ctl_poll, sb->ctl_fd);
        }
        if (r >= 0)
                opened[n++] = (uv_handle_t *) &sb->ctl_poll;
        sb->timer.data = sb->pid_poll.data = sb->ctl_poll.data = sb;
        sb->handles = (int) n;
        if (r < 0) {
                err_set(e, r, "sandbox %s: watch init: %s", sb->id, uv_strerror(r));
                arm_failed(sb);
                if (n == 0) {
                        sbx_free(sb);
                        return r;
                }
                /* freed by the last close (handle_closed unlinks it) */
                sb->next = m->list;
                m->list = sb;
                for (size_t i = 0; i < n; i++)
                        uv_close(opened[i], handle_closed);
                return r;
        }
        sb->next = m->list;
        m->list = sb;
        uv_poll_start(&sb->pid_poll, UV_READABLE, on_init_exit);
        uv_poll_start(&sb->ctl_poll, UV_READABLE, on_ctl);
        if (sb->expires_ns) {
                int64_t left_ms = (sb->expires_ns - store_now_ns()) / 1000000;
                uv_timer_start(&sb->timer, timer_cb, left_ms > 0 ? (uint64_t) left_ms : 0, 0);
        }
        return 0;
}

void sbx_detach(struct sbx *sb) {
        sbx_exec_leave_all(sb);
        sb->state = SBX_DEAD;
        ctl_close(sb);
        if (sb->remote)
                return; /* no timer, no pidfd */
        uv_timer_stop(&sb->timer);
        uv_poll_stop(&sb->pid_poll);
        uv_close((uv_handle_t *) &sb->timer, handle_closed);
        uv_close((uv_handle_t *) &sb->pid_poll, handle_closed);
}

/* --- process defaults, for the store --- */

/* Process defaults as "uid\0gid\0workdir\0K=V\0K=V\0...", for the store;
 * "uid" is followed by 'j' when every exec is journaled. */
int sbx_process_encode(const struct sbx *sb, char **ret, size_t *len) {
        char ids[48];
        int n = snprintf(ids, sizeof(ids), "%u%s%c%u", sb->uid, sb->journal_all ? "j" : "", 0,
                         sb->gid);
        size_t total = (size_t) n + 1 + strlen(sb->workdir) + 1;
        for (char **p = sb->env; p && *p; p++)
                total += strlen(*p) + 1;
        char *buf = malloc(total), *q = buf;
        if (!buf)
                return -ENOMEM;
        memcpy(q, ids, (size_t) n + 1);
        q += n + 1;
        q = stpcpy(q, sb->workdir) + 1;
        for (char **p = sb->env; p && *p; p++)
                q = stpcpy(q, *p) + 1;
        *ret = buf;
        *len = total;
        return 0;
}

int sbx_process_decode(struct sbx *sb, const char *buf, size_t len) {
        const char *end = buf + len, *p = buf;
        const char *f[3];
        for (int i = 0; i < 3; i++) {
                const char *z = memchr(p, 0, (size_t) (end - p));
                if (!z)
                        return -EBADMSG;
                f[i] = p;
                p = z + 1;
        }
        sb->uid = (uint32_t) strtoul(f[0], NULL, 10);
        sb->journal_all = strchr(f[0], 'j') != NULL;
        sb->gid = (uint32_t) strtoul(f[1], NULL, 10);
        if (!(sb->workdir = strdup(f[2])))
                return -ENOMEM;
        while (p < end) {
                const char *z = memchr(p, 0, (size_t) (end - p));
                if (!z)
                        return -EBADMSG;
                int r = sbx_env_set(&sb->env, p);
                if (r < 0)
                        return r;
                p = z + 1;
        }
        return 0;
}

/* --- pause / resume --- */

int sbx_set_paused(struct sbx_manager *m, const char *key, bool on, char *id_out,
                   struct wr_err *e) {
        struct sbx *sb;
        int r = sbx_running(m, key, &sb, e);
        if (r < 0)
                return r;
        snprintf(id_out, 32, "%s", sb->id);
        if (sb->paused == on)
                return 0;
        if ((r = sbx_rt_freeze(sb->m, sb->rt, on, e)) < 0)
                return r;
        sb->paused = on;
        log_info("sandbox %s %s", sb->id, on ? "paused" : "resumed");
        if (!on && sb->exec_recover_pending) {
                /* re-attached while paused: its execs come back now */
                sb->exec_recover_pending = false;
                sbx_exec_recover(sb);
        }
        return 0;
}

int sbx_paused(struct sbx_manager *m, const char *id) {
        struct sbx *sb = sbx_find_live(m, id);
        return sb ? sb->paused : -ENOENT;
}

/* --- remote (K8S) sandboxes: the exec side only --- */

static struct sbx *find_remote(struct sbx_manager *m, const char *id) {
        for (struct sbx *sb = m->list; sb; sb = sb->next)
                if (sb->remote && sb->state != SBX_DEAD && strcmp(sb->id, id) == 0)
                        return sb;
        return NULL;
}

/* <state>/k8s-sandboxes/<id>: a remote sandbox's exec spools (apart
 * from the host class's sandboxes/, which its recovery sweeps) */
static int remote_dir_path(const struct sbx_manager *m, const char *id, char *buf, size_t size,
                           bool make_parent) {
        int n = snprintf(buf, size, "%s/k8s-sandboxes", m->state_dir);
        if (n < 0 || (size_t) n >= size)
                return -ENAMETOOLONG;
        if (make_parent && mkdir(buf, 0700) < 0 && errno != EEXIST)
                return -errno;
        n = snprintf(buf, size, "%s/k8s-sandboxes/%s", m->state_dir, id);
        return n < 0 || (size_t) n >= size ? -ENAMETOOLONG : 0;
}

static void remote_dir_remove(const struct sbx_manager *m, const char *id) {
        char dir[PATH_MAX], path[PATH_MAX + 8];
        if (remote_dir_path(m, id, dir, sizeof(dir), false) < 0)
                return;
        snprintf(path, sizeof(path), "%s/execs", dir);
        (void) rm_rf_at(AT_FDCWD, path);
        (void) rmdir(dir);
}

void sbx_remote_detach(struct sbx_manager *m, const char *id, bool ended) {
        struct sbx *sb = find_remote(m, id);
        if (!sb) {
                if (ended)
                        remote_dir_remove(m, id);
                return;
        }
        if (ended) {
                sb->state = SBX_TERMINATING;
                sbx_exec_abort_all(sb, SBX_EXIT_SANDBOX_TERMINATED);
        } else
                sbx_exec_leave_all(sb); /* ends the rest itself */
        sb->state = SBX_DEAD;
        if (ended)
                remote_dir_remove(m, id);
        if (sb->ctl_fd >= 0)
                ctl_close(sb);
}

int sbx_remote_attach(struct sbx_manager *m, const char *id, int ctl_fd, const char *workdir,
                      char *const *env, struct wr_err *e) {
        sbx_remote_detach(m, id, false);
        struct sbx *sb;
        int r = sbx_new(m, id, 0, &sb);
        if (r < 0) {
                close(ctl_fd);
                return err_set(e, r, "out of memory");
        }
        sb->remote = true;
        sb->ctl_fd = ctl_fd;
        sb->workdir = strdup(workdir && *workdir ? workdir : "/");
        r = sbx_env_set2(&sb->env, "PATH", DEFAULT_PATH);
        for (char *const *p = env; r >= 0 && p && *p; p++)
                r = sbx_env_set(&sb->env, *p);
        if (r >= 0 && !sbx_env_find(sb->env, "HOME"))
                r = sbx_env_set2(&sb->env, "HOME", "/root");
        if (r < 0 || !sb->workdir) {
                sbx_free(sb);
                return err_set(e, -ENOMEM, "out of memory");
        }
        char dir[PATH_MAX];
        if ((r = remote_dir_path(m, id, dir, sizeof(dir), true)) < 0) {
                sbx_free(sb);
                return err_set(e, r, "%s/k8s-sandboxes/%s: %s", m->state_dir, id, strerror(-r));
        }
        if (!(sb->remote_dir = strdup(dir))) {
                sbx_free(sb);
                return err_set(e, -ENOMEM, "out of memory");
        }
        if (mkdir(dir, 0700) < 0 && errno != EEXIST) {
                r = err_set(e, -errno, "mkdir %s: %m", dir);
                sbx_free(sb);
                return r;
        }
        if ((r = uv_poll_init(m->loop, &sb->ctl_poll, sb->ctl_fd)) < 0) {
                sbx_free(sb);
                return err_set(e, r, "watch the relay: %s", uv_strerror(r));
        }
        sb->ctl_poll.data = sb;
        sb->handles = 1;
        sb->state = SBX_RUNNING;
        sb->next = m->list;
        m->list = sb;
        /* what init held while no warrend was connected */
        sbx_exec_recover(sb);
        if (sb->ctl_fd >= 0)
                uv_poll_start(&sb->ctl_poll, UV_READABLE, on_ctl);
        return 0;
}
