/* SPDX-License-Identifier: Apache-2.0 */
/* The live sandboxes of the daemon: create, look up, lifetimes, terminate. */
#include "sandbox/sandbox-internal.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>

#include "basic/log.h"
#include "image/image.h"
#include "image/pull.h"
#include "runtime/ctl.h"
#include "runtime/runtime.h"
#include "sandbox/user.h"
#include "store/store.h"

#define DEFAULT_PATH "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
#define SETTLE_MS 20 /* how often a terminating sandbox is checked */
/* warm pool: how long after taking an entry the refill starts (while the
 * pool is not empty) */
#define POOL_REFILL_DELAY_MS 8

/* --- environment vectors --- */

void sbx_env_free(char **env) {
        if (!env)
                return;
        for (char **p = env; *p; p++)
                free(*p);
        free(env);
}

char **sbx_env_dup(char *const *env) {
        size_t n = 0;
        while (env && env[n])
                n++;
        char **r = calloc(n + 1, sizeof(char *));
        if (!r)
                return NULL;
        for (size_t i = 0; i < n; i++)
                if (!(r[i] = strdup(env[i]))) {
                        sbx_env_free(r);
                        return NULL;
                }
        return r;
}

int sbx_env_set(char ***env, const char *kv) {
        const char *eq = strchr(kv, '=');
        if (!eq || eq == kv)
                return -EINVAL;
        size_t klen = (size_t) (eq - kv) + 1, n = 0;
        char *copy = strdup(kv);
        if (!copy)
                return -ENOMEM;
        for (char **p = *env; p && *p; p++, n++)
                if (strncmp(*p, kv, klen) == 0) {
                        free(*p);
                        *p = copy;
                        return 0;
                }
        char **r = realloc(*env, (n + 2) * sizeof(char *));
        if (!r) {
                free(copy);
                return -ENOMEM;
        }
        r[n] = copy;
        r[n + 1] = NULL;
        *env = r;
        return 0;
}

static int env_set2(char ***env, const char *k, const char *v) {
        size_t n = strlen(k) + strlen(v) + 2;
        _cleanup_free_ char *kv = malloc(n);
        if (!kv)
                return -ENOMEM;
        snprintf(kv, n, "%s=%s", k, v);
        return sbx_env_set(env, kv);
}

static const char *env_find(char *const *env, const char *name) {
        size_t n = strlen(name);
        for (; env && *env; env++)
                if (strncmp(*env, name, n) == 0 && (*env)[n] == '=')
                        return *env + n + 1;
        return NULL;
}

/* --- validation helpers --- */

bool sbx_name_valid(const char *s) {
        size_t n = strlen(s);
        if (n == 0 || n > 63)
                return false;
        if (!((s[0] >= 'a' && s[0] <= 'z') || (s[0] >= '0' && s[0] <= '9')))
                return false;
        for (size_t i = 1; i < n; i++) {
                char c = s[i];
                if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '_' ||
                      c == '.'))
                        return false;
        }
        return true;
}

static bool env_name_valid(const char *s) {
        if (!*s || (*s >= '0' && *s <= '9'))
                return false;
        for (; *s; s++)
                if (!((*s >= 'A' && *s <= 'Z') || (*s >= 'a' && *s <= 'z') ||
                      (*s >= '0' && *s <= '9') || *s == '_' || *s == '.' || *s == '-'))
                        return false;
        return true;
}

/* Parse "3600s", "90m", "2h", "1d", "1500ms" or plain seconds. */
static int duration_parse_ns(const char *s, int64_t *ret) {
        char *end;
        errno = 0;
        double v = strtod(s, &end);
        if (errno || end == s || v <= 0)
                return -EINVAL;
        double mul;
        if (*end == 0 || strcmp(end, "s") == 0)
                mul = 1e9;
        else if (strcmp(end, "ms") == 0)
                mul = 1e6;
        else if (strcmp(end, "m") == 0)
                mul = 60e9;
        else if (strcmp(end, "h") == 0)
                mul = 3600e9;
        else if (strcmp(end, "d") == 0)
                mul = 86400e9;
        else
                return -EINVAL;
        double ns = v * mul;
        if (ns > 9e18)
                return -ERANGE;
        *ret = (int64_t) ns;
        return 0;
}

/* The image's USER (names from /etc/passwd and /etc/group as its layers
 * stack up); a user the image does not have is the image's fault. */
static int image_user(const struct img_info *img, struct sbx_user *ret, struct wr_err *e) {
        _cleanup_free_ int *fds = calloc(img->n_layers + 1, sizeof(int));
        if (!fds)
                return err_set(e, -ENOMEM, "USER: out of memory");
        size_t n = 0;
        int r = 0;
        for (size_t i = 0; i < img->n_layers; i++) {
                fds[n] = open(img->layer_dirs[i], O_PATH | O_DIRECTORY | O_CLOEXEC);
                if (fds[n] < 0) {
                        r = err_set(e, -errno, "layer %s", img->layer_dirs[i]);
                        break;
                }
                n++;
        }
        if (r >= 0)
                r = sbx_user_resolve(fds, n, img->config.user, "USER", ret, e);
        for (size_t i = 0; i < n; i++)
                close(fds[i]);
        if (r < 0 && err_status(e) == WR_STATUS_INVALID_ARGUMENT)
                e->status = WR_STATUS_FAILED_PRECONDITION;
        return r;
}

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

static uint64_t mono_ns(void) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t) ts.tv_sec * 1000000000ULL + (uint64_t) ts.tv_nsec;
}

/* --- lookup --- */

struct sbx *sbx_find_live(struct sbx_manager *m, const char *key) {
        for (struct sbx *sb = m->list; sb; sb = sb->next)
                if (sb->state != SBX_DEAD &&
                    (strcmp(sb->id, key) == 0 || (sb->name && strcmp(sb->name, key) == 0)))
                        return sb;
        return NULL;
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

int sbx_usage(struct sbx_manager *m, const char *id, Warren__V1__ResourceUsage *u) {
        struct sbx *sb = sbx_find_live(m, id);
        if (!sb || !sb->rt)
                return -ENOENT;
        struct rt_usage ru = {0};
        int r = rt_sandbox_usage(sb->rt, &ru);
        if (r < 0)
                return r;
        u->cpu_seconds = ru.cpu_seconds;
        u->memory_bytes = ru.memory_bytes;
        u->memory_peak_bytes = ru.memory_peak_bytes;
        u->pids = ru.pids;
        return 0;
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
        uint64_t t = mono_ns();
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

static void sbx_finalize(struct sbx *sb);

/* Free a sandbox struct whose uv handles are closed (or were never
 * armed): its fds, runtime handle and strings. */
static void sbx_free(struct sbx *sb) {
        if (sb->ctl_fd >= 0)
                close(sb->ctl_fd);
        if (sb->pidfd >= 0)
                close(sb->pidfd);
        rt_sandbox_free(sb->rt);
        sbx_env_free(sb->env);
        free(sb->workdir);
        free(sb->name);
        free(sb->image_id);
        free(sb);
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
                        if (sb->state == SBX_RUNNING) {
                                sb->term_reason = "warren-init stopped answering";
                                sb->final_status = STORE_SANDBOX_FAILED;
                                rt_sandbox_kill(sb->rt, SIGKILL);
                        }
                        return;
                }
                switch (msg.type) {
                case CTL_SPAWNED:
                        for (size_t i = 0; i < ELEMENTSOF(sb->spawn_times); i++)
                                if (sb->spawn_times[i].id == msg.id) {
                                        double s =
                                                (double) (mono_ns() - sb->spawn_times[i].sent_ns) /
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

/* The entrypoint's output file (<state>/sandboxes/<id>.entrypoint.log)
 * goes with the sandbox. */
static void entrypoint_log_remove(struct sbx_manager *m, const char *id) {
        char path[PATH_MAX];
        snprintf(path, sizeof(path), "%s/sandboxes/%s.entrypoint.log", m->state_dir, id);
        (void) unlink(path);
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

static void teardown_work(uv_work_t *w) {
        struct sbx *sb = w->data;
        sb->teardown_r = sb->rt ? rt_sandbox_destroy(sb->rt, &sb->teardown_err) : 0;
}

static void teardown_done(uv_work_t *w, int status);

/* Kill what is left, free the runtime's resources (on a worker thread),
 * then record the end, call the waiters, close handles. Idempotent. */
static void sbx_finalize(struct sbx *sb) {
        if (sb->state == SBX_DEAD)
                return;
        sb->state = SBX_DEAD;
        sbx_exec_abort_all(sb, SBX_EXIT_SANDBOX_TERMINATED);
        ctl_close(sb);
        uv_timer_stop(&sb->timer);
        uv_poll_stop(&sb->pid_poll);
        sb->teardown.data = sb;
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
        if (r < 0)
                log_warn("sandbox %s: teardown: %s", sb->id, e.msg);
        entrypoint_log_remove(sb->m, sb->id);
        const char *reason = sb->term_reason ? sb->term_reason : "terminated";
        int st = sb->final_status ? sb->final_status : STORE_SANDBOX_TERMINATED;
        struct wr_err se = {0};
        if (store_sandbox_update_status(sb->m->store, sb->id, st, reason, &se) < 0)
                log_warn("sandbox %s: record end: %s", sb->id, se.msg);
        log_info("sandbox %s %s: %s", sb->id, st == STORE_SANDBOX_FAILED ? "failed" : "terminated",
                 reason);
        struct sbx_waiter *w = sb->waiters;
        sb->waiters = NULL;
        while (w) {
                struct sbx_waiter *next = w->next;
                if (w->done)
                        w->done(r < 0 ? r : 0, r < 0 ? &e : NULL, w->userdata);
                free(w);
                w = next;
        }
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
        struct wr_err se = {0};
        store_sandbox_update_status(m->store, sb->id, STORE_SANDBOX_TERMINATING, NULL, &se);
        sb->term_deadline = uv_now(m->loop) + grace_ms;
        /* SIGTERM goes to init, which forwards it to every process. */
        if (grace_ms == 0 || rt_sandbox_kill(sb->rt, SIGTERM) < 0)
                sb->term_deadline = uv_now(m->loop);
        uv_timer_stop(&sb->timer);
        uv_timer_start(&sb->timer, timer_cb, sandbox_settled(sb) ? 0 : SETTLE_MS, 0);
        return 0;
}

/* --- arming a started (or re-attached) sandbox --- */

/* sb->rt and sb->ctl_fd are set: take a pidfd of our own, start polling
 * init's exit and the control connection, arm the lifetime, link sb into
 * the manager's list. On failure nothing was started (the caller still owns
 * sb, rt and ctl_fd). */
static int sbx_arm(struct sbx *sb, struct wr_err *e) {
        struct sbx_manager *m = sb->m;
        /* A pidfd of our own: libuv makes polled fds non-blocking, and the
         * runtime's blocking waitid on its pidfd must stay blocking. */
        sb->pidfd = (int) syscall(SYS_pidfd_open, rt_sandbox_pid(sb->rt), 0);
        if (sb->pidfd < 0)
                return err_set(e, -errno, "sandbox %s: pidfd_open: %m", sb->id);
        uv_timer_init(m->loop, &sb->timer);
        sb->timer.data = sb;
        uv_poll_init(m->loop, &sb->pid_poll, sb->pidfd);
        sb->pid_poll.data = sb;
        uv_poll_init(m->loop, &sb->ctl_poll, sb->ctl_fd);
        sb->ctl_poll.data = sb;
        sb->handles = 3;
        uv_poll_start(&sb->pid_poll, UV_READABLE, on_init_exit);
        uv_poll_start(&sb->ctl_poll, UV_READABLE, on_ctl);
        sb->next = m->list;
        m->list = sb;
        if (sb->expires_ns) {
                int64_t left_ms = (sb->expires_ns - store_now_ns()) / 1000000;
                uv_timer_start(&sb->timer, timer_cb, left_ms > 0 ? (uint64_t) left_ms : 0, 0);
        }
        return 0;
}

/* Process defaults as "uid\0gid\0workdir\0K=V\0K=V\0...", for the store. */
static int process_encode(const struct sbx *sb, char **ret, size_t *len) {
        char ids[48];
        int n = snprintf(ids, sizeof(ids), "%u%c%u", sb->uid, 0, sb->gid);
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

static int process_decode(struct sbx *sb, const char *buf, size_t len) {
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

/* --- create --- */

static int make_id(char *buf, size_t size) {
        uint8_t b[8];
        if (getrandom(b, sizeof(b), 0) != sizeof(b))
                return -errno;
        snprintf(buf, size, "sb-%02x%02x%02x%02x%02x%02x%02x%02x", b[0], b[1], b[2], b[3], b[4],
                 b[5], b[6], b[7]);
        return 0;
}

/* The value of a secret reference, for an env var (plain secrets only). */
static int secret_value(struct sbx_manager *m, const Warren__V1__SecretRef *ref, char **ret,
                        struct wr_err *e) {
        switch (ref->source_case) {
        case WARREN__V1__SECRET_REF__SOURCE_INLINE_VALUE:
                *ret = strndup((const char *) ref->inline_value.data, ref->inline_value.len);
                return *ret ? 0 : -ENOMEM;
        case WARREN__V1__SECRET_REF__SOURCE_NAME: {
                struct store_secret sec = {0};
                int r = store_secret_get(m->store, STORE_ENV_DEFAULT, ref->name, &sec, NULL);
                if (r == -ENOENT)
                        return err_setx(e, -ENOENT, WR_STATUS_NOT_FOUND, WR_FAULT_CLIENT,
                                        "secret %s not found (store it with `warren secret set "
                                        "%s < file`)",
                                        ref->name, ref->name);
                if (r < 0)
                        return err_set(e, r, "read secret %s", ref->name);
                if (sec.n_entries != 1 || sec.entries[0].key[0]) {
                        store_secret_clear(&sec);
                        return err_setx(e, -EINVAL, WR_STATUS_INVALID_ARGUMENT, WR_FAULT_CLIENT,
                                        "secret %s has several keys: use it in `secrets`",
                                        ref->name);
                }
                *ret = strndup((const char *) sec.entries[0].value, sec.entries[0].len);
                store_secret_clear(&sec);
                return *ret ? 0 : -ENOMEM;
        }
        default:
                return err_setx(e, -EINVAL, WR_STATUS_INVALID_ARGUMENT, WR_FAULT_CLIENT,
                                "env: a secret value must name a stored secret or carry an "
                                "inline value");
        }
}

/* Whole secrets as environment variables (secrets=[...]). */
static int secrets_to_env(struct sbx_manager *m, const Warren__V1__SecretRef *ref, char ***env,
                          struct wr_err *e) {
        int r;
        switch (ref->source_case) {
        case WARREN__V1__SECRET_REF__SOURCE_NAME:
        case WARREN__V1__SECRET_REF__SOURCE_INTEGRATION: {
                const char *name = ref->source_case == WARREN__V1__SECRET_REF__SOURCE_NAME
                                           ? ref->name
                                           : ref->integration->name;
                struct store_secret sec = {0};
                r = store_secret_get(m->store, STORE_ENV_DEFAULT, name, &sec, NULL);
                if (r == -ENOENT)
                        return err_setx(e, -ENOENT, WR_STATUS_NOT_FOUND, WR_FAULT_CLIENT,
                                        "secrets: secret %s not found (store it with `warren "
                                        "secret set %s < file`)",
                                        name, name);
                if (r < 0)
                        return err_set(e, r, "read secret %s", name);
                for (size_t i = 0; r >= 0 && i < sec.n_entries; i++) {
                        const struct store_secret_entry *en = &sec.entries[i];
                        const char *key = en->key[0]                        ? en->key
                                          : ref->env_name && *ref->env_name ? ref->env_name
                                                                            : name;
                        if (ref->source_case == WARREN__V1__SECRET_REF__SOURCE_INTEGRATION &&
                            ref->integration->n_keys > 0) {
                                bool want = false;
                                for (size_t k = 0; k < ref->integration->n_keys; k++)
                                        want |= strcmp(ref->integration->keys[k], key) == 0;
                                if (!want)
                                        continue;
                        }
                        _cleanup_free_ char *v = strndup((const char *) en->value, en->len);
                        r = v ? env_set2(env, key, v) : -ENOMEM;
                }
                store_secret_clear(&sec);
                return r < 0 ? err_set(e, r, "secrets: %s", name) : 0;
        }
        case WARREN__V1__SECRET_REF__SOURCE_INLINE_VALUE: {
                if (!ref->env_name || !env_name_valid(ref->env_name))
                        return err_setx(e, -EINVAL, WR_STATUS_INVALID_ARGUMENT, WR_FAULT_CLIENT,
                                        "secrets: an inline secret needs env_name");
                _cleanup_free_ char *v =
                        strndup((const char *) ref->inline_value.data, ref->inline_value.len);
                return v ? env_set2(env, ref->env_name, v) : -ENOMEM;
        }
        case WARREN__V1__SECRET_REF__SOURCE_INLINE_VALUES:
                for (size_t i = 0; i < ref->inline_values->n_values; i++) {
                        Warren__V1__InlineSecrets__ValuesEntry *kv = ref->inline_values->values[i];
                        if (!env_name_valid(kv->key))
                                return err_setx(
                                        e, -EINVAL, WR_STATUS_INVALID_ARGUMENT, WR_FAULT_CLIENT,
                                        "secrets: %s is not a valid variable name", kv->key);
                        _cleanup_free_ char *v =
                                strndup((const char *) kv->value.data, kv->value.len);
                        if (!v || (r = env_set2(env, kv->key, v)) < 0)
                                return -ENOMEM;
                }
                return 0;
        default:
                return err_setx(e, -EINVAL, WR_STATUS_INVALID_ARGUMENT, WR_FAULT_CLIENT,
                                "secrets: an entry names no secret");
        }
}

/* Serialize req for the store, without inline secret values. */
static int spec_pack(const Warren__V1__CreateSandboxRequest *req, uint8_t **ret, size_t *n) {
        size_t len = protobuf_c_message_get_packed_size(&req->base);
        _cleanup_free_ uint8_t *buf = malloc(len ? len : 1);
        if (!buf)
                return -ENOMEM;
        protobuf_c_message_pack(&req->base, buf);
        Warren__V1__CreateSandboxRequest *copy =
                warren__v1__create_sandbox_request__unpack(NULL, len, buf);
        if (!copy)
                return -ENOMEM;
        for (size_t i = 0; i < copy->n_env; i++) {
                Warren__V1__EnvValue *v = copy->env[i]->value;
                if (v && v->kind_case == WARREN__V1__ENV_VALUE__KIND_SECRET && v->secret &&
                    v->secret->source_case != WARREN__V1__SECRET_REF__SOURCE_NAME)
                        v->secret->source_case = WARREN__V1__SECRET_REF__SOURCE__NOT_SET;
        }
        for (size_t i = 0; i < copy->n_secrets; i++)
                if (copy->secrets[i]->source_case == WARREN__V1__SECRET_REF__SOURCE_INLINE_VALUE ||
                    copy->secrets[i]->source_case == WARREN__V1__SECRET_REF__SOURCE_INLINE_VALUES)
                        copy->secrets[i]->source_case = WARREN__V1__SECRET_REF__SOURCE__NOT_SET;
        *n = warren__v1__create_sandbox_request__get_packed_size(copy);
        *ret = malloc(*n ? *n : 1);
        if (*ret)
                warren__v1__create_sandbox_request__pack(copy, *ret);
        warren__v1__create_sandbox_request__free_unpacked(copy, NULL);
        return *ret ? 0 : -ENOMEM;
}

/* Start the sandbox's main process in the background (output to
 * <dir>/entrypoint.log): the request's entrypoint, else the image's
 * Entrypoint + Cmd. argv NULL or empty: nothing to start. */
static int start_entrypoint(struct sbx *sb, char *const *argv, struct wr_err *e) {
        if (!argv || !argv[0])
                return 0;
        char path[PATH_MAX];
        snprintf(path, sizeof(path), "%s/entrypoint.log", rt_sandbox_dir(sb->rt));
        _cleanup_close_ int null = open("/dev/null", O_RDONLY | O_CLOEXEC);
        _cleanup_close_ int log = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
        if (null < 0 || log < 0)
                return err_set(e, -errno, "entrypoint: open %s", path);
        struct rt_spawn_req sr = {
                .id = ++sb->next_exec_id,
                .argv = (const char *const *) argv,
                .envp = (const char *const *) sb->env,
                .cwd = sb->workdir,
                .uid = sb->uid,
                .gid = sb->gid,
                .flags = RT_SPAWN_SETSID,
        };
        int stdio[3] = {null, log, log};
        int r = sbx_ctl_send_spawn(sb, &sr, stdio);
        if (r < 0)
                return err_set(e, r, "entrypoint: spawn");
        return 0;
}

/* Resolve ref as given, then under the local name a pull stores it as
 * ("ubuntu" → "ubuntu:latest", "docker.io/library/x" → "x:latest"). */
static int image_resolve(struct sbx_manager *m, const char *ref, struct img_info **ret,
                         struct wr_err *e) {
        struct wr_err le = {0};
        int r = img_store_resolve(m->images, ref, ret, &le);
        if (r != -ENOENT) {
                if (r < 0 && e)
                        *e = le;
                return r;
        }
        char local[512];
        if (img_pull_local_name(ref, local, sizeof(local), NULL) >= 0 && strcmp(local, ref) != 0 &&
            img_store_resolve(m->images, local, ret, NULL) >= 0)
                return 0;
        if (e)
                *e = le;
        return -ENOENT;
}

const char *sbx_image_ref(const struct sbx_manager *m,
                          const Warren__V1__CreateSandboxRequest *req) {
        if (req->image && req->image->kind_case == WARREN__V1__IMAGE_SPEC__KIND_BUILD)
                return NULL;
        if (req->image && req->image->kind_case == WARREN__V1__IMAGE_SPEC__KIND_REF &&
            *req->image->ref)
                return req->image->ref;
        return m->default_image;
}

bool sbx_image_is_default(const struct sbx_manager *m, const char *ref) {
        return strcmp(ref, m->default_image) == 0;
}

bool sbx_image_present(struct sbx_manager *m, const char *ref) {
        struct img_info *img = NULL;
        if (!m->images || image_resolve(m, ref, &img, NULL) < 0)
                return false;
        img_info_free(img);
        return true;
}

static void argv_free(char **v) {
        for (size_t i = 0; v && v[i]; i++)
                free(v[i]);
        free(v);
}
static inline void argv_freep(char ***v) {
        argv_free(*v);
}

/* A NULL-terminated copy of layers (n of them, or up to NULL when n is 0);
 * NULL when there are none or memory is short (the pool then builds no
 * root ahead). */
static char **layers_dup(const char *const *layers, size_t n) {
        if (!layers)
                return NULL;
        if (n == 0)
                while (layers[n])
                        n++;
        if (n == 0)
                return NULL;
        char **v = calloc(n + 1, sizeof(char *));
        for (size_t i = 0; v && i < n; i++)
                if (!(v[i] = strdup(layers[i]))) {
                        argv_free(v);
                        v = NULL;
                }
        return v;
}

/* Does the NULL-terminated a hold exactly b (n of them, or up to NULL
 * when n is 0)? */
static bool layers_equal(char *const *a, const char *const *b, size_t n) {
        if (n == 0)
                while (b && b[n])
                        n++;
        size_t i = 0;
        for (; a && a[i] && i < n; i++)
                if (strcmp(a[i], b[i]) != 0)
                        return false;
        return i == n && (!a || !a[i]);
}

/* The main process: the request's entrypoint, else the image's
 * Entrypoint + Cmd (Docker's rule), as a NULL-terminated heap vector
 * (NULL when there is none). */
static int entry_argv(const Warren__V1__CreateSandboxRequest *req, const struct img_info *img,
                      char ***ret) {
        size_t n = req->n_entrypoint ? req->n_entrypoint
                                     : img->config.n_entrypoint + img->config.n_cmd;
        *ret = NULL;
        if (n == 0)
                return 0;
        char **v = calloc(n + 1, sizeof(char *));
        if (!v)
                return -ENOMEM;
        size_t k = 0;
        if (req->n_entrypoint)
                for (size_t i = 0; i < req->n_entrypoint; i++)
                        v[k++] = strdup(req->entrypoint[i]);
        else {
                for (size_t i = 0; i < img->config.n_entrypoint; i++)
                        v[k++] = strdup(img->config.entrypoint[i]);
                for (size_t i = 0; i < img->config.n_cmd; i++)
                        v[k++] = strdup(img->config.cmd[i]);
        }
        for (size_t i = 0; i < k; i++)
                if (!v[i]) {
                        argv_free(v);
                        return -ENOMEM;
                }
        *ret = v;
        return 0;
}

static int create(struct sbx_manager *m, const Warren__V1__CreateSandboxRequest *req,
                  struct store_sandbox *ret, struct wr_err *e);

/* One commit records init (pid + start time, to re-attach after a
 * restart), the process defaults and RUNNING. */
static int record_started(struct sbx *sb, struct wr_err *e) {
        uint64_t start = 0;
        (void) rt_sandbox_start_time(sb->rt, &start);
        _cleanup_free_ char *proc = NULL;
        size_t proc_len = 0;
        int r = process_encode(sb, &proc, &proc_len);
        if (r >= 0)
                r = store_sandbox_set_started(sb->m->store, sb->id, rt_sandbox_pid(sb->rt), start,
                                              NULL, proc, proc_len, STORE_SANDBOX_RUNNING, e);
        else
                err_set(e, r, "create sandbox: encode process defaults");
        if (proc)
                explicit_bzero(proc, proc_len);
        return r;
}

static void pool_refill_soon(struct sbx_manager *m, uint64_t delay_ms);
static void pool_timer_cb(uv_timer_t *t);

int sbx_create(struct sbx_manager *m, const Warren__V1__CreateSandboxRequest *req,
               struct store_sandbox *ret, struct wr_err *e) {
        uint64_t t = mono_ns();
        int r = create(m, req, ret, e);
        if (r < 0) {
                m->metrics.create_failed++;
                return r;
        }
        m->metrics.created++;
        sbx_histogram_observe(&m->metrics.create, (double) (mono_ns() - t) / 1e9);
        return r;
}

/* Create phases, timed for the debug log (where a create's time goes). */
enum { T_START, T_IMAGE, T_RECORD, T_RUNTIME, T_CONNECT, T_STARTED, T_N };

static int create(struct sbx_manager *m, const Warren__V1__CreateSandboxRequest *req,
                  struct store_sandbox *ret, struct wr_err *e) {
        int r;
        uint64_t tp[T_N] = {mono_ns()};
        struct rt_sandbox *pooled = NULL;
        bool was_pooled = false;
        bool recorded = false; /* RUNNING committed and *ret loaded */
        _cleanup_free_ uint8_t *spec = NULL;
        _cleanup_free_ struct store_tag *tags = NULL;
        if (req->compute_class == WARREN__V1__COMPUTE_CLASS__COMPUTE_CLASS_K8S)
                return err_setx(e, -EOPNOTSUPP, WR_STATUS_UNIMPLEMENTED, WR_FAULT_CLIENT,
                                "compute_class K8S needs a Kubernetes cluster; this warrend "
                                "runs the HOST class only");
        if (req->name && *req->name && !sbx_name_valid(req->name))
                return err_setx(e, -EINVAL, WR_STATUS_INVALID_ARGUMENT, WR_FAULT_CLIENT,
                                "name: %s is not valid: use 1-63 of a-z 0-9 - _ . starting "
                                "with a letter or digit",
                                req->name);
        if (req->workdir && *req->workdir && req->workdir[0] != '/')
                return err_setx(e, -EINVAL, WR_STATUS_INVALID_ARGUMENT, WR_FAULT_CLIENT,
                                "workdir: %s must be an absolute path", req->workdir);
        if (req->network_policy || req->n_credentials || req->n_managed_ssh ||
            req->n_resource_detectors)
                return err_setx(e, -EOPNOTSUPP, WR_STATUS_UNIMPLEMENTED, WR_FAULT_CLIENT,
                                "network_policy, credentials, managed_ssh and resource_detectors "
                                "are not implemented yet (they arrive with the egress network "
                                "issue)");
        if (req->n_volumes)
                return err_setx(e, -EOPNOTSUPP, WR_STATUS_UNIMPLEMENTED, WR_FAULT_CLIENT,
                                "volumes are not implemented yet (they arrive with the volumes "
                                "issue)");
        if (req->identity)
                return err_setx(e, -EOPNOTSUPP, WR_STATUS_UNIMPLEMENTED, WR_FAULT_CLIENT,
                                "identity tokens are not implemented yet");

        struct rt_limits limits = {0};
        if (req->resources) {
                const Warren__V1__Resources *rs = req->resources;
                if (rs->cpu && *rs->cpu && rt_cpu_parse(rs->cpu, &limits.cpu_millicores) < 0)
                        return err_setx(e, -EINVAL, WR_STATUS_INVALID_ARGUMENT, WR_FAULT_CLIENT,
                                        "resources.cpu: %s is not valid: use cores (\"2\", "
                                        "\"0.5\") or millicores (\"500m\")",
                                        rs->cpu);
                if (rs->memory && *rs->memory &&
                    rt_memory_parse(rs->memory, &limits.memory_bytes) < 0)
                        return err_setx(e, -EINVAL, WR_STATUS_INVALID_ARGUMENT, WR_FAULT_CLIENT,
                                        "resources.memory: %s is not valid: use bytes or a "
                                        "size like \"512Mi\" or \"4Gi\"",
                                        rs->memory);
                if (rs->disk && *rs->disk && rt_memory_parse(rs->disk, &limits.disk_bytes) < 0)
                        return err_setx(e, -EINVAL, WR_STATUS_INVALID_ARGUMENT, WR_FAULT_CLIENT,
                                        "resources.disk: %s is not valid: use bytes or a size "
                                        "like \"512Mi\" or \"10Gi\"",
                                        rs->disk);
                limits.pids_max = rs->pids;
        }
        int64_t expires_ns = 0;
        if (req->lifetime && *req->lifetime) {
                int64_t d;
                if (duration_parse_ns(req->lifetime, &d) < 0)
                        return err_setx(e, -EINVAL, WR_STATUS_INVALID_ARGUMENT, WR_FAULT_CLIENT,
                                        "lifetime: %s is not valid: use a duration like "
                                        "\"3600s\", \"90m\" or \"2h\"",
                                        req->lifetime);
                expires_ns = store_now_ns() + d;
        }

        /* Image. */
        const char *ref = m->default_image;
        if (req->image && req->image->kind_case == WARREN__V1__IMAGE_SPEC__KIND_BUILD)
                return err_setx(e, -EOPNOTSUPP, WR_STATUS_UNIMPLEMENTED, WR_FAULT_CLIENT,
                                "image: declarative builds are not implemented yet (they arrive "
                                "with the image builder issue); import or pull an image and "
                                "name it");
        if (req->image && req->image->kind_case == WARREN__V1__IMAGE_SPEC__KIND_REF &&
            *req->image->ref)
                ref = req->image->ref;
        if (!m->images)
                return err_setx(e, -ENOENT, WR_STATUS_FAILED_PRECONDITION, WR_FAULT_SERVICE,
                                "image store unavailable");
        struct img_info *img = NULL;
        r = image_resolve(m, ref, &img, e);
        if (r < 0) {
                if (r == -ENOENT)
                        return err_setx(e, -ENOENT, WR_STATUS_NOT_FOUND, WR_FAULT_CLIENT,
                                        "image %s not found: import it with `warren image "
                                        "import %s FILE` (or pull it)",
                                        ref, ref);
                return err_prefix(e, r, "image %s", ref);
        }
        tp[T_IMAGE] = mono_ns();
        /* the pool builds its next roots for this image (not for a disk
         * limit: that needs a root of its own) */
        if (m->pool_target && !limits.disk_bytes &&
            !layers_equal(m->pool_layers, (const char *const *) img->layer_dirs, img->n_layers)) {
                argv_free(m->pool_layers);
                m->pool_layers = layers_dup((const char *const *) img->layer_dirs, img->n_layers);
        }
        _cleanup_(argv_freep) char **entry = NULL;
        if (entry_argv(req, img, &entry) < 0) {
                img_info_free(img);
                return err_set(e, -ENOMEM, "create sandbox: out of memory");
        }

        struct sbx *sb = calloc(1, sizeof(*sb));
        if (!sb) {
                img_info_free(img);
                return err_set(e, -ENOMEM, "create sandbox: out of memory");
        }
        sb->m = m;
        sb->ctl_fd = -EBADF;
        sb->pidfd = -EBADF;
        sb->expires_ns = expires_ns;
        if (m->pool_n > 0) {
                /* a warm-pool sandbox: its id, dir, cgroups and namespaces
                 * are there already */
                struct sbx_pool_entry *pe = &m->pool[--m->pool_n];
                snprintf(sb->id, sizeof(sb->id), "%s", pe->id);
                pooled = pe->rt;
                pe->rt = NULL;
                was_pooled = true;
                /* not right away: a prestart (cgroup dirs, a clone of
                 * warrend, the child's mounts) competes for the CPUs with
                 * this sandbox's start and its first exec, which usually
                 * follows at once; an empty pool refills at once */
                pool_refill_soon(m, m->pool_n > 0 ? POOL_REFILL_DELAY_MS : 0);
        } else if ((r = make_id(sb->id, sizeof(sb->id))) < 0)
                goto fail_early;
        sb->name = req->name && *req->name ? strdup(req->name) : NULL;
        sb->image_id = strdup(img->id);

        /* Process defaults: image env, then the request's env and secrets. */
        r = env_set2(&sb->env, "PATH", DEFAULT_PATH);
        for (size_t i = 0; r >= 0 && i < img->config.n_env; i++)
                r = sbx_env_set(&sb->env, img->config.env[i]);
        if (r >= 0)
                r = env_set2(&sb->env, "HOSTNAME",
                             req->hostname && *req->hostname ? req->hostname
                             : sb->name                      ? sb->name
                                                             : sb->id);
        for (size_t i = 0; r >= 0 && i < req->n_env; i++) {
                const Warren__V1__CreateSandboxRequest__EnvEntry *en = req->env[i];
                if (!env_name_valid(en->key)) {
                        r = err_setx(e, -EINVAL, WR_STATUS_INVALID_ARGUMENT, WR_FAULT_CLIENT,
                                     "env: %s is not a valid variable name", en->key);
                        goto fail_early;
                }
                if (!en->value || en->value->kind_case == WARREN__V1__ENV_VALUE__KIND_VALUE) {
                        r = env_set2(&sb->env, en->key, en->value ? en->value->value : "");
                        continue;
                }
                _cleanup_free_ char *v = NULL;
                if ((r = secret_value(m, en->value->secret, &v, e)) < 0)
                        goto fail_early;
                r = env_set2(&sb->env, en->key, v);
        }
        for (size_t i = 0; r >= 0 && i < req->n_secrets; i++)
                if ((r = secrets_to_env(m, req->secrets[i], &sb->env, e)) < 0)
                        goto fail_early;
        if (r < 0) {
                err_set(e, r, "create sandbox: environment");
                goto fail_early;
        }
        struct sbx_user user = {.home = "/root"};
        if (img->config.user && *img->config.user && (r = image_user(img, &user, e)) < 0) {
                err_prefix(e, r, "image %s", ref);
                goto fail_early;
        }
        sb->uid = user.uid;
        sb->gid = user.gid;
        if (!env_find(sb->env, "HOME"))
                env_set2(&sb->env, "HOME", user.home[0] ? user.home : "/");
        sb->workdir = strdup(req->workdir && *req->workdir ? req->workdir
                             : img->config.working_dir && *img->config.working_dir
                                     ? img->config.working_dir
                                     : "/");
        if (!sb->workdir || !sb->image_id || (req->name && *req->name && !sb->name)) {
                r = err_set(e, -ENOMEM, "create sandbox: out of memory");
                goto fail_early;
        }

        /* Record it PENDING before touching the kernel (a warm-pool entry
         * is the exception, see below). */
        struct store_sandbox row = {
                .id = sb->id,
                .environment = (char *) STORE_ENV_DEFAULT,
                .name = sb->name,
                .status = STORE_SANDBOX_PENDING,
                .image_id = img->id,
                .image_ref = (char *) ref,
                .created_ns = store_now_ns(),
                .expires_ns = expires_ns,
        };
        if ((r = spec_pack(req, &spec, &row.spec_len)) < 0) {
                err_set(e, r, "create sandbox: encode spec");
                goto fail_early;
        }
        row.spec = spec;
        tags = calloc(req->n_tags + 1, sizeof(*tags));
        if (!tags) {
                r = err_set(e, -ENOMEM, "create sandbox: out of memory");
                goto fail_early;
        }
        for (size_t i = 0; i < req->n_tags; i++) {
                if (!req->tags[i]->key[0]) {
                        r = err_setx(e, -EINVAL, WR_STATUS_INVALID_ARGUMENT, WR_FAULT_CLIENT,
                                     "tags: a tag key is empty");
                        goto fail_early;
                }
                tags[i].key = req->tags[i]->key;
                tags[i].value = req->tags[i]->value;
        }
        row.tags = tags;
        row.n_tags = req->n_tags;

        char dir[PATH_MAX];
        snprintf(dir, sizeof(dir), "%s/sandboxes/%s", m->state_dir, sb->id);
        struct rt_sandbox_config cfg = {
                .id = sb->id,
                .dir = dir,
                .layers = (const char *const *) img->layer_dirs,
                .n_layers = img->n_layers,
                .hostname = req->hostname && *req->hostname ? req->hostname
                            : sb->name                      ? sb->name
                                                            : sb->id,
                .init_path = m->init_path,
                .limits = limits,
                .log_fd = -1,
        };
        /* A warm-pool entry starts mounting its root now and the row is
         * written meanwhile. Its dir and cgroups existed without a row
         * already; a crash before the insert leaves just that, which a
         * restart removes like any dir without a row. */
        if (pooled) {
                sb->rt = pooled;
                pooled = NULL;
                struct wr_err pe = {0};
                r = rt_sandbox_start_send(sb->rt, &cfg, &pe);
                if (r < 0) {
                        /* -ESTALE: the entry broke while parked; create
                         * afresh below (same id) */
                        log_debug("warm pool: %s", pe.msg);
                        struct wr_err de = {0};
                        rt_sandbox_destroy(sb->rt, &de);
                        rt_sandbox_free(sb->rt);
                        sb->rt = NULL;
                        if (r != -ESTALE) {
                                if (e)
                                        *e = pe;
                                goto fail_early;
                        }
                }
        }
        r = store_sandbox_insert(m->store, &row, e);
        if (r == -EEXIST) {
                r = err_setx(e, -EEXIST, WR_STATUS_ALREADY_EXISTS, WR_FAULT_CLIENT,
                             "name: a running sandbox is already called %s (terminate it or "
                             "pick another name)",
                             sb->name);
                goto fail_unrecorded;
        }
        if (r < 0) {
                err_prefix(e, r, "create sandbox: record");
                goto fail_unrecorded;
        }

        tp[T_RECORD] = mono_ns();
        if (sb->rt) {
                /* While the child mounts: connect (init accepts on the
                 * socket the prestart bound once it runs), record RUNNING
                 * with init's pid and start time (both known since the
                 * prestart: a restart in between finds either init or
                 * nothing, see recovery) and load the reply. */
                if ((r = rt_ctl_connect(rt_sandbox_ctl_path(sb->rt), &sb->ctl_fd, e)) < 0) {
                        err_prefix(e, r, "create sandbox: connect to warren-init");
                        goto fail_started;
                }
                if ((r = record_started(sb, e)) < 0 ||
                    (r = store_sandbox_load(m->store, sb->id, ret, e)) < 0)
                        goto fail_started;
                recorded = true;
                r = rt_sandbox_start_wait(sb->rt, e);
                img_info_free(img);
                img = NULL;
                if (r < 0)
                        goto fail_started;
        } else {
                r = rt_sandbox_create(&cfg, &sb->rt, e);
                img_info_free(img);
                img = NULL;
                if (r < 0)
                        goto fail_recorded;
                if ((r = rt_ctl_connect(rt_sandbox_ctl_path(sb->rt), &sb->ctl_fd, e)) < 0) {
                        err_prefix(e, r, "create sandbox: connect to warren-init");
                        goto fail_started;
                }
        }
        tp[T_RUNTIME] = mono_ns();

        if ((r = sbx_arm(sb, e)) < 0)
                goto fail_started;
        tp[T_CONNECT] = mono_ns();
        if ((r = start_entrypoint(sb, entry, e)) < 0) {
                sb->term_reason = "entrypoint failed to start";
                sb->final_status = STORE_SANDBOX_FAILED;
                sbx_finalize(sb);
                return r;
        }
        if (!recorded && (r = record_started(sb, e)) < 0) {
                sb->term_reason = "recording failed";
                sb->final_status = STORE_SANDBOX_FAILED;
                sbx_finalize(sb);
                return r;
        }
        tp[T_STARTED] = mono_ns();
        log_info("sandbox %s created (image %s)", sb->id, sb->image_id);
        r = recorded ? 0 : store_sandbox_load(m->store, sb->id, ret, e);
        uint64_t end = mono_ns();
        log_debug("sandbox %s: create %.3f ms: checks+image %.3f, record %.3f, runtime%s %.3f, "
                  "connect %.3f, started %.3f, load %.3f",
                  sb->id, (double) (end - tp[T_START]) / 1e6,
                  (double) (tp[T_IMAGE] - tp[T_START]) / 1e6,
                  (double) (tp[T_RECORD] - tp[T_IMAGE]) / 1e6, was_pooled ? " (pool)" : "",
                  (double) (tp[T_RUNTIME] - tp[T_RECORD]) / 1e6,
                  (double) (tp[T_CONNECT] - tp[T_RUNTIME]) / 1e6,
                  (double) (tp[T_STARTED] - tp[T_CONNECT]) / 1e6,
                  (double) (end - tp[T_STARTED]) / 1e6);
        return r;

fail_started : {
        struct wr_err de = {0};
        rt_sandbox_destroy(sb->rt, &de);
        if (recorded)
                store_sandbox_clear(ret);
}
fail_recorded:
        store_sandbox_update_status(m->store, sb->id, STORE_SANDBOX_FAILED, e ? e->msg : "failed",
                                    NULL);
        goto fail_early;
fail_unrecorded:
        if (sb->rt) {
                struct wr_err de = {0};
                rt_sandbox_destroy(sb->rt, &de);
        }
fail_early:
        img_info_free(img);
        if (pooled) {
                struct wr_err de = {0};
                rt_sandbox_destroy(pooled, &de);
                rt_sandbox_free(pooled);
        }
        sbx_free(sb);
        return r;
}

/* --- warm pool --- */

/* Prestart one sandbox for the pool (id, dir, cgroups with default
 * limits, namespaces, the stage, the root for the expected image, a child
 * parked and ready): on a libuv worker thread (the runtime allows creates
 * from any thread), so that the loop never waits for it. */
static void pool_work(uv_work_t *w) {
        struct sbx_pool_job *job = w->data;
        struct sbx_manager *m = job->m;
        struct sbx_pool_entry *pe = &job->entry;
        pe->rt = NULL;
        job->err.code = 0;
        job->layers_failed = false;
        if (make_id(pe->id, sizeof(pe->id)) < 0) {
                err_set(&job->err, -EIO, "getrandom failed");
                return;
        }
        char dir[PATH_MAX];
        snprintf(dir, sizeof(dir), "%s/sandboxes/%s", m->state_dir, pe->id);
        size_t n = 0;
        while (job->layers && job->layers[n])
                n++;
        struct rt_sandbox_config cfg = {
                .id = pe->id,
                .dir = dir,
                .layers = (const char *const *) job->layers,
                .n_layers = n,
                .init_path = m->init_path,
                .log_fd = -1,
                .cgroup_mode = m->cgroup_mode,
        };
        if (rt_sandbox_prestart(&cfg, &pe->rt, &job->err) >= 0)
                return;
        pe->rt = NULL;
        if (n == 0)
                return;
        /* the image may be gone: an entry without a root built ahead */
        job->layers_failed = true;
        cfg.layers = NULL;
        cfg.n_layers = 0;
        if (rt_sandbox_prestart(&cfg, &pe->rt, &job->err) < 0)
                pe->rt = NULL;
}

static void pool_work_done(uv_work_t *w, int status) {
        struct sbx_pool_job *job = w->data;
        struct sbx_manager *m = job->m;
        struct sbx_pool_entry *pe = &job->entry;
        job->busy = false;
        m->pool_busy--;
        /* stop predicting an image whose layers do not work */
        if (job->layers_failed &&
            layers_equal(m->pool_layers, (const char *const *) job->layers, 0)) {
                log_debug("warm pool: cannot build roots for the expected image; none until "
                          "the next create");
                argv_free(m->pool_layers);
                m->pool_layers = NULL;
        }
        argv_free(job->layers);
        job->layers = NULL;
        if (!pe->rt) {
                if (status != UV_ECANCELED)
                        log_warn("warm pool: %s", job->err.msg);
                /* retry later rather than spin on a broken host */
                if (!m->freeing)
                        uv_timer_start(&m->pool_timer, pool_timer_cb, 1000, 0);
                return;
        }
        if (m->freeing || m->pool_n >= m->pool_target) {
                struct wr_err e = {0};
                rt_sandbox_destroy(pe->rt, &e);
                rt_sandbox_free(pe->rt);
                pe->rt = NULL;
                return;
        }
        m->pool[m->pool_n++] = *pe;
        pe->rt = NULL;
        pool_refill_soon(m, 0);
}

static bool pool_wants(const struct sbx_manager *m) {
        return m->pool_target && !m->freeing && m->pool_busy < SBX_POOL_JOBS &&
               m->pool_n + m->pool_busy < m->pool_target;
}

static void pool_timer_cb(uv_timer_t *t) {
        struct sbx_manager *m = t->data;
        for (size_t i = 0; i < SBX_POOL_JOBS && pool_wants(m); i++) {
                struct sbx_pool_job *job = &m->pool_jobs[i];
                if (job->busy)
                        continue;
                job->m = m;
                job->work.data = job;
                /* the worker gets its own copy of the prediction */
                argv_free(job->layers);
                job->layers = layers_dup((const char *const *) m->pool_layers, 0);
                if (uv_queue_work(m->loop, &job->work, pool_work, pool_work_done) < 0)
                        break;
                job->busy = true;
                m->pool_busy++;
        }
}

static void pool_refill_soon(struct sbx_manager *m, uint64_t delay_ms) {
        if (pool_wants(m) && (delay_ms == 0 || !uv_is_active((uv_handle_t *) &m->pool_timer)))
                uv_timer_start(&m->pool_timer, pool_timer_cb, delay_ms, 0);
}

/* Tear down every idle pool entry (nothing of them may outlive warrend:
 * a parked child left behind exits on its own once the pipe closes, and a
 * restart removes the dir and cgroups of ids without a row). */
static void pool_drain(struct sbx_manager *m) {
        while (m->pool_n > 0) {
                struct sbx_pool_entry *pe = &m->pool[--m->pool_n];
                struct wr_err e = {0};
                if (rt_sandbox_destroy(pe->rt, &e) < 0)
                        log_warn("warm pool: %s", e.msg);
                rt_sandbox_free(pe->rt);
                pe->rt = NULL;
        }
}

static void pool_timer_closed(uv_handle_t *h) {
        struct sbx_manager *m = h->data;
        m->pool_timer_open = false;
}

/* --- restart recovery --- */

/* Re-attach to the sandbox of row (RUNNING): its init must still be the
 * process recorded, its control socket must answer, and its process
 * defaults must decrypt. */
static int recover_one(struct sbx_manager *m, const struct store_sandbox *row, const char *dir,
                       struct wr_err *e) {
        if (row->status != STORE_SANDBOX_RUNNING || row->init_pid <= 0)
                return err_set(e, -ESRCH, "it had not finished starting");
        struct sbx *sb = calloc(1, sizeof(*sb));
        if (!sb)
                return -ENOMEM;
        sb->m = m;
        sb->ctl_fd = -EBADF;
        sb->pidfd = -EBADF;
        sb->expires_ns = row->expires_ns;
        snprintf(sb->id, sizeof(sb->id), "%s", row->id);
        /* exec ids of this daemon must not collide with ids the previous
         * one used (init may still report their exits) */
        sb->next_exec_id = (uint64_t) store_now_ns();
        _cleanup_free_ unsigned char *proc = NULL;
        size_t proc_len = 0;
        int r = rt_sandbox_attach(row->id, dir, (pid_t) row->init_pid, row->init_start,
                                  m->cgroup_mode, &sb->rt, e);
        if (r < 0)
                goto fail;
        if ((r = store_sandbox_get_process(m->store, row->id, &proc, &proc_len, e)) < 0)
                goto fail;
        r = process_decode(sb, (const char *) proc, proc_len);
        explicit_bzero(proc, proc_len);
        if (r < 0) {
                err_set(e, r, "process defaults");
                goto fail;
        }
        sb->name = row->name ? strdup(row->name) : NULL;
        sb->image_id = strdup(row->image_id);
        if (!sb->image_id || (row->name && !sb->name)) {
                r = -ENOMEM;
                goto fail;
        }
        if ((r = rt_ctl_connect(rt_sandbox_ctl_path(sb->rt), &sb->ctl_fd, e)) < 0)
                goto fail;
        if ((r = sbx_arm(sb, e)) < 0)
                goto fail;
        return 0;
fail:
        sbx_free(sb);
        return r;
}

/* A previous warrend's sandboxes: re-attach to those whose init still
 * runs; everything else a live row or a leftover dir holds is freed and
 * the row ends TERMINATED (or FAILED when it was still being created). */
static void manager_recover(struct sbx_manager *m) {
        static const int live[] = {STORE_SANDBOX_PENDING, STORE_SANDBOX_RUNNING,
                                   STORE_SANDBOX_TERMINATING};
        struct store_sandbox_filter f = {
                .environment = STORE_ENV_DEFAULT,
                .statuses = live,
                .n_statuses = ELEMENTSOF(live),
        };
        struct store_sandbox *rows = NULL;
        size_t n = 0, attached = 0, ended = 0;
        struct wr_err le = {0};
        if (store_sandbox_list(m->store, &f, &rows, &n, &le) < 0)
                log_warn("recovery: list sandboxes: %s", le.msg);
        for (size_t i = 0; i < n; i++) {
                const struct store_sandbox *row = &rows[i];
                char dir[PATH_MAX];
                snprintf(dir, sizeof(dir), "%s/sandboxes/%s", m->state_dir, row->id);
                struct wr_err e = {0};
                int r = row->status == STORE_SANDBOX_RUNNING ? recover_one(m, row, dir, &e)
                                                             : -ESRCH;
                if (r >= 0) {
                        attached++;
                        m->metrics.recovered++;
                        log_info("sandbox %s re-attached (pid %lld)", row->id,
                                 (long long) row->init_pid);
                        continue;
                }
                char reason[300];
                int st = STORE_SANDBOX_TERMINATED;
                if (row->status == STORE_SANDBOX_PENDING) {
                        st = STORE_SANDBOX_FAILED;
                        snprintf(reason, sizeof(reason), "warrend stopped while creating it");
                } else if (row->status == STORE_SANDBOX_TERMINATING) {
                        snprintf(reason, sizeof(reason),
                                 "terminated (finished after a warrend "
                                 "restart)");
                } else {
                        snprintf(reason, sizeof(reason), "lost while warrend was down: %s",
                                 e.msg[0] ? e.msg : strerror(-r));
                }
                struct wr_err ce = {0};
                if (rt_sandbox_cleanup(row->id, dir, m->cgroup_mode, &ce) < 0) {
                        /* keep the row live so the next start tries again */
                        log_warn("recovery: sandbox %s: %s", row->id, ce.msg);
                        continue;
                }
                entrypoint_log_remove(m, row->id);
                store_sandbox_update_status(m->store, row->id, st, reason, NULL);
                ended++;
                m->metrics.recovery_ended++;
                log_info("sandbox %s: %s", row->id, reason);
        }
        store_sandbox_list_free(rows, n);

        /* Dirs without a live sandbox (a crash between teardown steps). */
        char path[PATH_MAX];
        snprintf(path, sizeof(path), "%s/sandboxes", m->state_dir);
        DIR *d = opendir(path);
        struct dirent *de;
        while (d && (de = readdir(d))) {
                if (strncmp(de->d_name, "sb-", 3) != 0 || de->d_type != DT_DIR ||
                    sbx_find_live(m, de->d_name))
                        continue;
                char dir[PATH_MAX];
                snprintf(dir, sizeof(dir), "%s/%s", path, de->d_name);
                struct wr_err ce = {0};
                if (rt_sandbox_cleanup(de->d_name, dir, m->cgroup_mode, &ce) < 0)
                        log_warn("recovery: leftover %s: %s", dir, ce.msg);
                else
                        log_info("recovery: removed leftover %s", dir);
        }
        if (d)
                closedir(d);
        if (attached || ended)
                log_info("recovery: %zu sandboxes re-attached, %zu ended", attached, ended);
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
        m->cgroup_mode = RT_CGROUP_AUTO;
        if (!m->state_dir || !m->init_path || !m->default_image) {
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
        manager_recover(m);
        if (m->pool_target) {
                m->pool = calloc(m->pool_target, sizeof(*m->pool));
                if (!m->pool) {
                        sbx_manager_free(m);
                        return err_set(e, -ENOMEM, "sandbox manager: out of memory");
                }
        }
        /* until a sandbox is created, the pool builds roots ahead for the
         * default image (when it is there) */
        struct img_info *img = NULL;
        if (m->pool_target && m->images && image_resolve(m, m->default_image, &img, NULL) >= 0) {
                m->pool_layers = layers_dup((const char *const *) img->layer_dirs, img->n_layers);
                img_info_free(img);
        }
        uv_timer_init(m->loop, &m->pool_timer);
        m->pool_timer.data = m;
        m->pool_timer_open = true;
        pool_refill_soon(m, 0);
        *ret = m;
        return 0;
}

/* Let go of sb without stopping it (daemon shutdown): its exec streams
 * end, handles close, the sandbox keeps running and its row stays live for
 * the next warrend to re-attach. */
static void sbx_detach(struct sbx *sb) {
        sbx_exec_abort_all(sb, SBX_EXIT_UNSPECIFIED);
        sb->state = SBX_DEAD;
        ctl_close(sb);
        uv_timer_stop(&sb->timer);
        uv_poll_stop(&sb->pid_poll);
        uv_close((uv_handle_t *) &sb->timer, handle_closed);
        uv_close((uv_handle_t *) &sb->pid_poll, handle_closed);
}

void sbx_manager_free(struct sbx_manager *m) {
        if (!m)
                return;
        m->freeing = true;
        pool_drain(m);
        if (m->pool_timer_open) {
                uv_timer_stop(&m->pool_timer);
                uv_close((uv_handle_t *) &m->pool_timer, pool_timer_closed);
        }
        for (struct sbx *sb = m->list; sb; sb = sb->next) {
                if (sb->state == SBX_DEAD)
                        continue;
                if (m->terminate_on_exit) {
                        sb->term_reason = "warrend shut down";
                        sbx_finalize(sb);
                } else {
                        sbx_detach(sb);
                }
        }
        /* Let the handle close callbacks run, which unlink and free. */
        while (m->list || m->pool_timer_open || m->pool_busy)
                uv_run(m->loop, UV_RUN_ONCE);
        free(m->pool);
        argv_free(m->pool_layers);
        for (size_t i = 0; i < SBX_POOL_JOBS; i++)
                argv_free(m->pool_jobs[i].layers);
        sbx_exec_forget_all(m);
        free(m->state_dir);
        free(m->init_path);
        free(m->default_image);
        free(m);
}
