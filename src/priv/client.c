/* SPDX-License-Identifier: Apache-2.0 */
/* warrend's side of warren-priv (client.h). */
#include "priv/client.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "basic/log.h"
#include "basic/macro.h"
#include "basic/memfd.h"
#include "priv/priv-cfg.h"

#define WAIT_START_MS 5000 /* a request waits this long for a warren-priv to run */
#define HELLO_MS 5000      /* a new warren-priv answers its first HELLO within this */
#define RESTART_MIN_MS 1000

struct pending {
        struct pending *next;
        uint64_t id;
        uint32_t type, want;
        bool done;
        int r; /* 0, -EPIPE (warren-priv died), -EPROTO (wrong answer type) */
        struct priv_reply rep;
        int fds[2]; /* an answer's fds (SANDBOX_CREATED, NET_CONNECTED): the requester's */
        size_t n_fds;
};

struct priv_client {
        char *path, *state_dir;
        char *init_path;            /* phase 2: --init of every warren-priv; NULL: none */
        void (*on_restart)(void *); /* phase 2: after a start that is not the first */
        void *on_restart_data;
        void (*on_lost)(void *); /* phase 5: instead of a restart (priv_client_on_lost) */
        void *on_lost_data;
        pthread_mutex_t mu;
        pthread_cond_t cv; /* gen changed */
        pthread_t thread;
        bool thread_started, stopping;
        int wake;     /* eventfd: the supervisor's wake-up */
        pid_t pid;    /* 0: none running (or reaped) */
        int pidfd;    /* < 0 with pid 0 */
        int sock;     /* < 0: none, or it died (the supervisor reaps it) */
        uint64_t gen; /* starts so far */
        int64_t last_start_ms;
        uint64_t next_id;
        /* requests sent and not answered yet (their answers are matched
         * by id by the supervisor, the socket's only reader); sock_dead:
         * a requester saw the socket break (only the supervisor closes
         * it, so that it never polls a reused fd number) */
        struct pending *pending;
        bool sock_dead;
        pthread_mutex_t st_mu; /* st: never held across a request */
        struct priv_client_stats st;
};

static int64_t now_ms(void) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (int64_t) ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void copy_counters(struct priv_client *c, const uint64_t *served, size_t n_served,
                          uint64_t total, uint64_t refused) {
        pthread_mutex_lock(&c->st_mu);
        if (served)
                memcpy(c->st.served, served, n_served * sizeof(uint64_t));
        c->st.served_total = total;
        c->st.refused = refused;
        pthread_mutex_unlock(&c->st_mu);
}

/* c->st.pid = pid, and one more start when started */
static void set_pid(struct priv_client *c, pid_t pid, bool started) {
        pthread_mutex_lock(&c->st_mu);
        c->st.pid = pid;
        if (started)
                c->st.starts++;
        pthread_mutex_unlock(&c->st_mu);
}

/* One datagram out, its answer back within timeout_ms (-1: no limit).
 * -EPIPE: warren-priv is gone or did not answer in time (the socket is
 * closed here, a silent one is killed; the supervisor reaps it). */
static int exchange_locked(struct priv_client *c, const void *req, size_t n, uint32_t want,
                           int timeout_ms, struct priv_reply *rep, struct wr_err *e) {
        uint64_t id;
        memcpy(&id, (const char *) req + offsetof(struct priv_hdr, id), sizeof(id));
        if (send(c->sock, req, n, MSG_NOSIGNAL) != (ssize_t) n) {
                int r = -errno;
                if (r == -EPIPE || r == -ECONNRESET || r == -ENOTCONN) {
                        c->sock = safe_close(c->sock);
                        return -EPIPE;
                }
                return err_set(e, r, "warren-priv: send: %s", strerror(-r));
        }
        static _Thread_local uint8_t in[PRIV_MSG_MAX + 1];
        for (;;) {
                struct pollfd p = {.fd = c->sock, .events = POLLIN};
                int pr = poll(&p, 1, timeout_ms);
                if (pr < 0) {
                        if (errno == EINTR)
                                continue;
                        return err_set(e, -errno, "warren-priv: poll: %m");
                }
                if (pr == 0) {
                        log_warn("warren-priv (pid %d): no answer in %d ms; killing it",
                                 (int) c->pid, timeout_ms);
                        if (c->pidfd >= 0)
                                (void) syscall(SYS_pidfd_send_signal, c->pidfd, SIGKILL, NULL, 0);
                        c->sock = safe_close(c->sock);
                        return -EPIPE;
                }
                int fds[PRIV_FDS_MAX];
                size_t n_fds = 0;
                long got = priv_recv(c->sock, in, sizeof(in), fds, &n_fds, 0);
                if (got == -EAGAIN || got == -EINTR)
                        continue;
                if (got <= 0 && got != -EMSGSIZE && got != -EPROTO) {
                        c->sock = safe_close(c->sock);
                        return -EPIPE;
                }
                struct wr_err de = {0};
                int r = got < 0 ? err_set(&de, (int) got, "oversized datagram or fds")
                                : priv_reply_decode(in, (size_t) got, n_fds, rep, &de);
                priv_close_fds(fds, n_fds);
                if (r < 0) {
                        /* a warren-priv that answers garbage is broken:
                         * drop it (the supervisor starts another) */
                        c->sock = safe_close(c->sock);
                        if (c->pidfd >= 0)
                                (void) syscall(SYS_pidfd_send_signal, c->pidfd, SIGKILL, NULL, 0);
                        return err_set(e, -EPROTO, "warren-priv: bad reply: %s", de.msg);
                }
                if (rep->hdr.id != id)
                        continue; /* not ours (cannot happen: the first HELLO is alone) */
                if (rep->hdr.type == PRIV_RESULT)
                        copy_counters(c, NULL, 0, rep->result.served_total, rep->result.refused);
                else if (rep->hdr.type == PRIV_HELLO_REPLY)
                        copy_counters(c, rep->hello.served, PRIV_REQ_TYPES, rep->hello.served_total,
                                      rep->hello.refused);
                if (rep->hdr.type != want)
                        return err_set(e, -EPROTO, "warren-priv: unexpected reply type 0x%x",
                                       rep->hdr.type);
                return 0;
        }
}

/* Start a warren-priv (c->pid == 0). */
static int spawn_locked(struct priv_client *c, struct wr_err *e) {
        c->last_start_ms = now_ms();
        int sp[2];
        if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sp) < 0)
                return err_set(e, -errno, "warren-priv: socketpair: %m");
        char sockfd[16];
        snprintf(sockfd, sizeof(sockfd), "%d", sp[1]);
        const char *argv[] = {c->path,
                              "--sock-fd",
                              sockfd,
                              "--state-dir",
                              c->state_dir,
                              "--log-level",
                              log_get_level() == LOG_LEVEL_DEBUG ? "debug" : "info",
                              "--log-format",
                              log_get_format() == LOG_FORMAT_JSON ? "json" : "text",
                              c->init_path ? "--init" : NULL,
                              c->init_path,
                              NULL};
        pid_t pid = fork();
        if (pid == 0) {
                sigset_t none;
                sigemptyset(&none);
                sigprocmask(SIG_SETMASK, &none, NULL);
                signal(SIGPIPE, SIG_DFL);
                if (fcntl(sp[1], F_SETFD, 0) < 0)
                        _exit(127);
                execv(argv[0], (char *const *) argv);
                _exit(127);
        }
        int r = pid < 0 ? -errno : 0;
        close(sp[1]);
        if (r < 0) {
                close(sp[0]);
                return err_set(e, r, "warren-priv: fork: %s", strerror(-r));
        }
        c->pid = pid;
        c->sock = sp[0];
        c->pidfd = (int) syscall(SYS_pidfd_open, pid, 0);
        if (c->pidfd < 0) {
                r = -errno;
                kill(pid, SIGKILL);
                (void) waitpid(pid, NULL, 0);
                c->pid = 0;
                c->sock = safe_close(c->sock);
                return err_set(e, r, "warren-priv: pidfd_open: %s", strerror(-r));
        }
        c->gen++;
        set_pid(c, pid, true);
        /* a HELLO: it runs, and speaks our version */
        uint8_t req[PRIV_MSG_MAX];
        static struct priv_reply rep;
        int n = priv_hello_encode(++c->next_id, req, sizeof(req));
        r = exchange_locked(c, req, (size_t) n, PRIV_HELLO_REPLY, HELLO_MS, &rep, e);
        if (r < 0) {
                if (r == -EPIPE)
                        err_set(e, -EIO, "warren-priv (%s) exited at start; see its log", c->path);
                /* the supervisor reaps it */
                (void) syscall(SYS_pidfd_send_signal, c->pidfd, SIGKILL, NULL, 0);
                c->sock = safe_close(c->sock);
                pthread_cond_broadcast(&c->cv);
                return r == -EPIPE ? -EIO : r;
        }
        log_info("warren-priv started (pid %d, protocol version %u)", (int) pid, PRIV_VERSION);
        pthread_cond_broadcast(&c->cv);
        if (c->gen > 1 && c->on_restart)
                c->on_restart(c->on_restart_data);
        return 0;
}

/* The socket is gone (EOF, an error, a bad answer, the process died):
 * close it and fail every request waiting for an answer. Supervisor
 * thread only. */
static void drop_sock_locked(struct priv_client *c) {
        c->sock = safe_close(c->sock);
        c->sock_dead = false;
        for (struct pending *p = c->pending; p; p = p->next)
                if (!p->done) {
                        p->done = true;
                        p->r = -EPIPE;
                }
        pthread_cond_broadcast(&c->cv);
}

/* The counters phase 3's own answers carry (NFT_NAMES, NET_CONNECTED),
 * as a RESULT's are taken. */
static void net_counters(struct priv_client *c, const struct priv_reply *rep, uint32_t type) {
        const uint64_t *v = NULL;
        if (rep->hdr.type == PRIV_NFT_NAMES)
                v = &rep->nft_names.served;
        else if (rep->hdr.type == PRIV_NET_CONNECTED)
                v = &rep->net_connected.served;
        else if (rep->hdr.type == PRIV_VOLUME_MOUNTED) /* phase 3, volumes and spawn-beside */
                v = &rep->volume_mounted.served;
        else if (rep->hdr.type == PRIV_SPAWNED)
                v = &rep->spawned.served;
        else if (rep->hdr.type >= PRIV_VOLFILE_OPENED && rep->hdr.type <= PRIV_VOLFILE_LISTED)
                v = &rep->volfile_opened.served; /* phase 5, volume files: first in each */
        if (!v)
                return;
        copy_counters(c, NULL, 0, v[1], v[2]);
        pthread_mutex_lock(&c->st_mu);
        if (type < PRIV_REQ_TYPES)
                c->st.served[type] = v[0];
        pthread_mutex_unlock(&c->st_mu);
}

/* Phase 4b: the counters UPPER_PACKED carries. */
static void upper_counters(struct priv_client *c, const struct priv_reply *rep, uint32_t type) {
        const uint64_t *v = NULL;
        if (rep->hdr.type == PRIV_UPPER_PACKED)
                v = &rep->upper_packed.served;
        else if (rep->hdr.type == PRIV_UPPER_SESSION_STARTED) /* 4b-2 */
                v = &rep->upper_started.served;
        if (!v)
                return;
        copy_counters(c, NULL, 0, v[1], v[2]);
        pthread_mutex_lock(&c->st_mu);
        if (type < PRIV_REQ_TYPES)
                c->st.served[type] = v[0];
        pthread_mutex_unlock(&c->st_mu);
}

/* The counters of a HELPER_STARTED (phase 3), as a RESULT's are taken. */
static void helper_counters(struct priv_client *c, const struct priv_reply *rep, uint32_t type) {
        if (rep->hdr.type != PRIV_HELPER_STARTED)
                return;
        copy_counters(c, NULL, 0, rep->helper_started.served_total, rep->helper_started.refused);
        pthread_mutex_lock(&c->st_mu);
        if (type < PRIV_REQ_TYPES)
                c->st.served[type] = rep->helper_started.served;
        pthread_mutex_unlock(&c->st_mu);
}

/* Read every answer waiting on the socket and hand each to its request.
 * Supervisor thread only. */
static void read_locked(struct priv_client *c) {
        static uint8_t in[PRIV_MSG_MAX + 1];
        static struct priv_reply rep;
        for (;;) {
                int fds[PRIV_FDS_MAX];
                size_t n_fds = 0;
                long got = priv_recv(c->sock, in, sizeof(in), fds, &n_fds, MSG_DONTWAIT);
                if (got == -EAGAIN || got == -EINTR)
                        return;
                if (got == 0 || (got < 0 && got != -EMSGSIZE && got != -EPROTO)) {
                        drop_sock_locked(c); /* the process is reaped through its pidfd */
                        return;
                }
                struct wr_err de = {0};
                int r = got < 0 ? err_set(&de, (int) got, "oversized datagram or fds")
                                : priv_reply_decode(in, (size_t) got, n_fds, &rep, &de);
                /* the fds of an answer that carries some (SANDBOX_CREATED,
                 * NET_CONNECTED) go to its requester */
                bool keep_fds = r >= 0 && priv_type_fds(rep.hdr.type) > 0;
                if (!keep_fds)
                        priv_close_fds(fds, n_fds);
                struct pending *p = c->pending;
                while (r >= 0 && p && (p->id != rep.hdr.id || p->done))
                        p = p->next;
                if (keep_fds && (r < 0 || !p || p->want != rep.hdr.type)) {
                        priv_close_fds(fds, n_fds);
                        if (p && p->want != rep.hdr.type)
                                p = NULL; /* the wrong answer: broken */
                }
                if (r < 0 || !p) {
                        /* a warren-priv that answers garbage (or what was
                         * not asked) is broken: kill it, another starts */
                        log_warn("warren-priv (pid %d): bad answer: %s; killing it", (int) c->pid,
                                 r < 0 ? de.msg : "an id nobody waits for");
                        if (c->pidfd >= 0)
                                (void) syscall(SYS_pidfd_send_signal, c->pidfd, SIGKILL, NULL, 0);
                        priv_close_fds(fds, n_fds);
                        drop_sock_locked(c);
                        return;
                }
                net_counters(c, &rep, p->type);
                upper_counters(c, &rep, p->type);
                helper_counters(c, &rep, p->type); /* phase 3, the helpers */
                if (rep.hdr.type == PRIV_RESULT) {
                        copy_counters(c, NULL, 0, rep.result.served_total, rep.result.refused);
                        pthread_mutex_lock(&c->st_mu);
                        if (p->type < PRIV_REQ_TYPES)
                                c->st.served[p->type] = rep.result.served;
                        pthread_mutex_unlock(&c->st_mu);
                } else if (rep.hdr.type == PRIV_HELLO_REPLY) {
                        copy_counters(c, rep.hello.served, PRIV_REQ_TYPES, rep.hello.served_total,
                                      rep.hello.refused);
                } else if (rep.hdr.type == PRIV_SANDBOX_CREATED) {
                        copy_counters(c, NULL, 0, rep.created.served_total, rep.created.refused);
                        pthread_mutex_lock(&c->st_mu);
                        if (p->type < PRIV_REQ_TYPES)
                                c->st.served[p->type] = rep.created.served;
                        pthread_mutex_unlock(&c->st_mu);
                }
                if (keep_fds) {
                        /* the table's count, checked by the decoder: 1 or 2 */
                        memcpy(p->fds, fds, n_fds * sizeof(int));
                        p->n_fds = n_fds;
                }
                p->rep = rep;
                /* a failure is a RESULT whatever was asked */
                p->r = rep.hdr.type == p->want ||
                                       (rep.hdr.type == PRIV_RESULT && rep.result.err != 0)
                               ? 0
                               : -EPROTO;
                p->done = true;
                pthread_cond_broadcast(&c->cv);
        }
}

/* Reap the current warren-priv if it exited (0: still running). */
static bool reap_locked(struct priv_client *c) {
        if (c->pid <= 0)
                return false;
        siginfo_t si = {0};
        if (waitid(P_PIDFD, (id_t) c->pidfd, &si, WEXITED | WNOHANG) < 0) {
                if (errno != ECHILD)
                        return false;
                si.si_code = CLD_KILLED; /* reaped by someone else: its status is lost */
        } else if (si.si_pid == 0) {
                return false;
        }
        if (!c->stopping)
                log_warn("warren-priv (pid %d) exited (%s %d); starting another", (int) c->pid,
                         si.si_code == CLD_EXITED ? "status" : "signal", si.si_status);
        c->pid = 0;
        set_pid(c, 0, false);
        c->pidfd = safe_close(c->pidfd);
        drop_sock_locked(c);
        return true;
}

static void *supervise(void *arg) {
        struct priv_client *c = arg;
        pthread_mutex_lock(&c->mu);
        while (!c->stopping) {
                int pidfd = c->pidfd;
                int timeout = -1;
                if (c->pid == 0 && c->on_lost) {
                        /* phase 5: a dropped warrend cannot start a root
                         * warren-priv; its owner decides (warrend exits) */
                        void (*fn)(void *) = c->on_lost;
                        c->on_lost = NULL;
                        pthread_mutex_unlock(&c->mu);
                        fn(c->on_lost_data);
                        pthread_mutex_lock(&c->mu);
                        continue;
                }
                if (c->pid == 0) {
                        int64_t left = c->last_start_ms + RESTART_MIN_MS - now_ms();
                        if (left <= 0) {
                                struct wr_err e = {0};
                                if (spawn_locked(c, &e) < 0)
                                        log_warn("%s", e.msg);
                                continue;
                        }
                        timeout = (int) left;
                }
                int sock = c->sock;
                pthread_mutex_unlock(&c->mu);
                /* the sock and pidfd numbers stay valid while we poll:
                 * only this thread closes them */
                struct pollfd p[3] = {{.fd = c->wake, .events = POLLIN},
                                      {.fd = pidfd, .events = POLLIN},
                                      {.fd = sock, .events = POLLIN}};
                (void) poll(p, 3, timeout); /* negative fds are ignored */
                if (p[0].revents & POLLIN) {
                        uint64_t v;
                        (void) !read(c->wake, &v, sizeof(v));
                }
                pthread_mutex_lock(&c->mu);
                if (sock >= 0 && sock == c->sock && (p[2].revents || c->sock_dead))
                        read_locked(c);
                if (c->sock >= 0 && c->sock_dead)
                        drop_sock_locked(c);
                if (reap_locked(c))
                        pthread_cond_broadcast(&c->cv);
        }
        pthread_mutex_unlock(&c->mu);
        return NULL;
}

int priv_client_new(const char *path, const char *state_dir, struct priv_client **ret,
                    struct wr_err *e) {
        return priv_client_new_init(path, state_dir, NULL, ret, e);
}

int priv_client_supervise(struct priv_client *c, struct wr_err *e) {
        if (c->thread_started)
                return 0;
        int r = -pthread_create(&c->thread, NULL, supervise, c);
        if (r < 0)
                return err_set(e, r, "warren-priv: supervisor thread: %s", strerror(-r));
        c->thread_started = true;
        return 0;
}

static int client_new(const char *path, const char *state_dir, const char *init_path,
                      bool supervised, struct priv_client **ret, struct wr_err *e) {
        struct priv_client *c = calloc(1, sizeof(*c));
        if (!c)
                return err_set(e, -ENOMEM, "out of memory");
        c->pidfd = c->sock = -EBADF;
        pthread_mutex_init(&c->mu, NULL);
        pthread_mutex_init(&c->st_mu, NULL);
        pthread_condattr_t ca;
        pthread_condattr_init(&ca);
        pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
        pthread_cond_init(&c->cv, &ca);
        pthread_condattr_destroy(&ca);
        c->path = strdup(path);
        c->state_dir = strdup(state_dir);
        c->init_path = init_path ? strdup(init_path) : NULL;
        c->wake = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
        int r;
        if (!c->path || !c->state_dir || c->wake < 0 || (init_path && !c->init_path)) {
                r = err_set(e, -ENOMEM, "warren-priv: out of memory or fds");
                goto fail;
        }
        pthread_mutex_lock(&c->mu);
        r = spawn_locked(c, e);
        pthread_mutex_unlock(&c->mu);
        if (r < 0)
                goto fail;
        if (supervised && (r = priv_client_supervise(c, e)) < 0)
                goto fail;
        *ret = c;
        return 0;
fail:
        priv_client_free(c);
        return r;
}

int priv_client_new_init(const char *path, const char *state_dir, const char *init_path,
                         struct priv_client **ret, struct wr_err *e) {
        return client_new(path, state_dir, init_path, true, ret, e);
}

int priv_client_new_held(const char *path, const char *state_dir, const char *init_path,
                         struct priv_client **ret, struct wr_err *e) {
        return client_new(path, state_dir, init_path, false, ret, e);
}

void priv_client_free(struct priv_client *c) {
        if (!c)
                return;
        pthread_mutex_lock(&c->mu);
        c->stopping = true;
        pthread_cond_broadcast(&c->cv); /* requests waiting for a start give up */
        pthread_mutex_unlock(&c->mu);
        if (c->thread_started) {
                uint64_t one = 1;
                (void) !write(c->wake, &one, sizeof(one));
                pthread_join(c->thread, NULL);
        }
        c->sock = safe_close(c->sock); /* warren-priv sees EOF and exits */
        if (c->pid > 0) {
                struct pollfd p = {.fd = c->pidfd, .events = POLLIN};
                if (c->pidfd < 0 || poll(&p, 1, 2000) <= 0)
                        kill(c->pid, SIGKILL);
                while (waitpid(c->pid, NULL, 0) < 0 && errno == EINTR)
                        ;
        }
        safe_close(c->pidfd);
        safe_close(c->wake);
        pthread_cond_destroy(&c->cv);
        pthread_mutex_destroy(&c->mu);
        pthread_mutex_destroy(&c->st_mu);
        free(c->path);
        free(c->state_dir);
        free(c->init_path);
        free(c);
}

/* A socket to send on: a warren-priv runs and its socket is not dead. */
static bool usable(const struct priv_client *c) {
        return c->sock >= 0 && !c->sock_dead;
}

/* A request warren-priv died during: counted, -EIO. */
static int lost(struct priv_client *c, const char *name, struct wr_err *e) {
        pthread_mutex_lock(&c->st_mu);
        c->st.lost++;
        pthread_mutex_unlock(&c->st_mu);
        return err_set(e, -EIO, "warren-priv died during %s", name ? name : "a request");
}

/* One request (encoded in req) and its answer of type want, while other
 * requests may be in flight: sent under mu, the answer handed over by the
 * supervisor. */
static int call_fds(struct priv_client *c, uint8_t *req, size_t n, const int *fds, size_t n_fds,
                    uint32_t want, struct priv_reply *rep, int out_fds[2], struct wr_err *e);
static int call(struct priv_client *c, uint8_t *req, size_t n, uint32_t want,
                struct priv_reply *rep, struct wr_err *e) {
        return call_fds(c, req, n, NULL, 0, want, rep, NULL, e);
}

/* call() in two halves (phase 2: a SANDBOX_START runs while warrend
 * records the sandbox): call_send registers p (the caller's, until
 * call_wait returned) and sends the request with fds along; call_wait
 * waits for its answer and, for one that carries fds (SANDBOX_CREATED),
 * hands them to out_fds (the caller's). After a call_send error there is
 * nothing to wait for. */
static int call_send(struct priv_client *c, uint8_t *req, size_t n, const int *fds, size_t n_fds,
                     uint32_t want, struct pending *p, struct wr_err *e) {
        uint32_t type = ((const struct priv_hdr *) (const void *) req)->type;
        const char *name = priv_type_name(type);
        pthread_mutex_lock(&c->mu);
        if (!usable(c)) {
                /* none running, or one died and is not reaped yet: wait
                 * for the supervisor's next start */
                struct timespec dl;
                clock_gettime(CLOCK_MONOTONIC, &dl);
                dl.tv_sec += WAIT_START_MS / 1000;
                uint64_t gen = c->gen;
                while (!usable(c) && !c->stopping &&
                       pthread_cond_timedwait(&c->cv, &c->mu, &dl) != ETIMEDOUT)
                        if (c->gen != gen && c->pid == 0)
                                break; /* started and died again */
        }
        if (!usable(c)) {
                pthread_mutex_unlock(&c->mu);
                return err_set(e, -EIO, "warren-priv is not running (see warrend's log)");
        }
        /* the id: ours, sequential */
        *p = (struct pending){.id = ++c->next_id, .type = type, .want = want, .fds = {-1, -1}};
        memcpy(req + offsetof(struct priv_hdr, id), &p->id, sizeof(p->id));
        int r = 0;
        for (;;) {
                int sr = priv_send(c->sock, req, n, fds, n_fds, MSG_DONTWAIT);
                if (sr == 0)
                        break;
                errno = -sr;
                if (errno == EAGAIN || errno == EINTR) {
                        /* the socket's buffer is full: let the supervisor
                         * read answers meanwhile */
                        pthread_mutex_unlock(&c->mu);
                        struct pollfd pw = {.fd = c->sock, .events = POLLOUT};
                        (void) poll(&pw, 1, 10);
                        pthread_mutex_lock(&c->mu);
                        if (usable(c))
                                continue;
                        errno = EPIPE;
                }
                r = errno == EPIPE || errno == ECONNRESET || errno == ENOTCONN ? -EPIPE : -errno;
                break;
        }
        if (r == 0) {
                p->next = c->pending;
                c->pending = p;
                pthread_mutex_unlock(&c->mu);
                return 0;
        }
        if (r == -EPIPE) {
                if (c->sock >= 0)
                        c->sock_dead = true; /* the supervisor closes it */
                uint64_t one = 1;
                (void) !write(c->wake, &one, sizeof(one));
        }
        pthread_mutex_unlock(&c->mu);
        if (r == -EPIPE)
                return lost(c, name, e);
        return err_set(e, r, "warren-priv: send: %s", strerror(-r));
}

static int call_wait(struct priv_client *c, struct pending *p, struct priv_reply *rep,
                     int out_fds[2], struct wr_err *e) {
        const char *name = priv_type_name(p->type);
        pthread_mutex_lock(&c->mu);
        while (!p->done)
                pthread_cond_wait(&c->cv, &c->mu);
        for (struct pending **pp = &c->pending; *pp; pp = &(*pp)->next)
                if (*pp == p) {
                        *pp = p->next;
                        break;
                }
        /* -EPIPE comes from drop_sock_locked: the supervisor closed that
         * warren-priv's socket already. c->sock may be the next one's by
         * now: marking it dead here killed a warren-priv just started
         * (it saw EOF and exited) */
        int r = p->r;
        pthread_mutex_unlock(&c->mu);
        if (r == -EPIPE)
                return lost(c, name, e);
        if (r == -EPROTO)
                return err_set(e, -EPROTO, "warren-priv: unexpected answer type 0x%x to %s",
                               p->rep.hdr.type, name ? name : "a request");
        if (r < 0)
                return err_set(e, r, "warren-priv: %s", strerror(-r));
        if (p->rep.hdr.type != p->want) { /* a RESULT with an error instead (no fds) */
                *rep = p->rep;            /* (its value: VOLFILE's status) */
                return err_set(e, -p->rep.result.err, "%s", p->rep.result.msg);
        }
        if (p->n_fds) {
                if (out_fds)
                        memcpy(out_fds, p->fds, sizeof(p->fds));
                else
                        priv_close_fds(p->fds, p->n_fds);
        }
        *rep = p->rep;
        return 0;
}

/* call() with fds to send along (phase 2) and, for an answer that
 * carries some (SANDBOX_CREATED), out_fds for them (the caller's). */
static int call_fds(struct priv_client *c, uint8_t *req, size_t n, const int *fds, size_t n_fds,
                    uint32_t want, struct priv_reply *rep, int out_fds[2], struct wr_err *e) {
        struct pending p;
        int r = call_send(c, req, n, fds, n_fds, want, &p, e);
        return r < 0 ? r : call_wait(c, &p, rep, out_fds, e);
}

/* A RESULT's error as ours. */
static int result(const struct priv_reply *rep, struct wr_err *e) {
        if (rep->result.err == 0)
                return rep->result.value;
        return err_set(e, -rep->result.err, "%s", rep->result.msg);
}

/* A request answered by a RESULT: its value, or its error. */
static int call_result(struct priv_client *c, uint8_t *req, size_t n, struct wr_err *e) {
        static _Thread_local struct priv_reply rep;
        int r = call(c, req, n, PRIV_RESULT, &rep, e);
        return r < 0 ? r : result(&rep, e);
}

int priv_sandbox_cleanup(struct priv_client *c, const char *id, const char *dir, int cgroup_mode,
                         struct wr_err *e) {
        size_t sl = strlen(c->state_dir);
        if (strncmp(dir, c->state_dir, sl) != 0 || dir[sl] != '/')
                return err_set(e, -EINVAL, "clean up sandbox %s: %s is not below the state dir %s",
                               id, dir, c->state_dir);
        uint8_t req[PRIV_MSG_MAX];
        int n = priv_cleanup_encode(0, id, dir + sl + 1, (uint32_t) cgroup_mode, req, sizeof(req),
                                    e);
        if (n < 0)
                return err_prefix(e, n, "clean up sandbox %s", id);
        int r = call_result(c, req, (size_t) n, e);
        return r < 0 ? r : 0;
}

int priv_link_delete(struct priv_client *c, const char *name, struct wr_err *e) {
        uint8_t req[PRIV_MSG_MAX];
        int n = priv_link_delete_encode(0, name, req, sizeof(req), e);
        if (n < 0)
                return n;
        return call_result(c, req, (size_t) n, e);
}

int priv_sandbox_signal(struct priv_client *c, const struct priv_target *t, int sig,
                        struct wr_err *e) {
        uint8_t req[PRIV_MSG_MAX];
        int n = priv_signal_encode(0, t, sig, req, sizeof(req), e);
        if (n < 0)
                return n;
        int r = call_result(c, req, (size_t) n, e);
        return r < 0 ? r : 0;
}

int priv_sandbox_freeze(struct priv_client *c, const struct priv_target *t, bool on,
                        struct wr_err *e) {
        uint8_t req[PRIV_MSG_MAX];
        int n = priv_freeze_encode(0, t, on, req, sizeof(req), e);
        if (n < 0)
                return n;
        int r = call_result(c, req, (size_t) n, e);
        return r < 0 ? r : 0;
}

int priv_hello(struct priv_client *c, struct priv_hello_reply *ret, struct wr_err *e) {
        uint8_t req[PRIV_MSG_MAX];
        int n = priv_hello_encode(0, req, sizeof(req));
        static _Thread_local struct priv_reply rep;
        int r = call(c, req, (size_t) n, PRIV_HELLO_REPLY, &rep, e);
        if (r >= 0)
                *ret = rep.hello;
        return r;
}

void priv_client_on_lost(struct priv_client *c, void (*fn)(void *userdata), void *userdata) {
        pthread_mutex_lock(&c->mu);
        c->on_lost = fn;
        c->on_lost_data = userdata;
        pthread_mutex_unlock(&c->mu);
}

void priv_client_on_restart(struct priv_client *c, void (*fn)(void *userdata), void *userdata) {
        pthread_mutex_lock(&c->mu);
        c->on_restart = fn;
        c->on_restart_data = userdata;
        pthread_mutex_unlock(&c->mu);
}

void priv_client_stats(struct priv_client *c, struct priv_client_stats *ret) {
        pthread_mutex_lock(&c->st_mu);
        *ret = c->st;
        pthread_mutex_unlock(&c->st_mu);
}

/* ---- phase 3: the network ---- */

int priv_nft_table_apply(struct priv_client *c, const char *table, uint32_t base, uint8_t prefix,
                         uint16_t proxy_port, uint16_t dns_port, struct wr_err *e) {
        uint8_t req[PRIV_MSG_MAX];
        int n = priv_nft_apply_encode(0, table, base, prefix, proxy_port, dns_port, req,
                                      sizeof(req), e);
        if (n < 0)
                return n;
        int r = call_result(c, req, (size_t) n, e);
        return r < 0 ? r : 0;
}

int priv_nft_class_set(struct priv_client *c, const char *table, uint32_t addr, unsigned from,
                       unsigned to, struct wr_err *e) {
        uint8_t req[PRIV_MSG_MAX];
        int n = priv_nft_class_encode(0, table, addr, from, to, req, sizeof(req), e);
        if (n < 0)
                return n;
        int r = call_result(c, req, (size_t) n, e);
        return r < 0 ? r : 0;
}

int priv_nft_tables(struct priv_client *c, char ***ret, struct wr_err *e) {
        uint8_t req[PRIV_MSG_MAX];
        int n = priv_nft_tables_encode(0, req, sizeof(req));
        static _Thread_local struct priv_reply rep;
        int r = call(c, req, (size_t) n, PRIV_NFT_NAMES, &rep, e);
        if (r < 0)
                return r;
        uint32_t k = rep.nft_names.n;
        char **v = calloc(k + 1, sizeof(char *));
        for (uint32_t i = 0; v && i < k; i++)
                if (!(v[i] = strdup(rep.nft_names.names[i]))) {
                        for (uint32_t j = 0; j < i; j++)
                                free(v[j]);
                        free(v);
                        v = NULL;
                }
        if (!v)
                return err_set(e, -ENOMEM, "out of memory");
        *ret = v;
        return (int) k;
}

int priv_nft_table_remove(struct priv_client *c, const char *table, struct wr_err *e) {
        uint8_t req[PRIV_MSG_MAX];
        int n = priv_nft_remove_encode(0, table, req, sizeof(req), e);
        if (n < 0)
                return n;
        int r = call_result(c, req, (size_t) n, e);
        return r < 0 ? r : 0;
}

int priv_net_connect(struct priv_client *c, const struct priv_target *t, uint32_t addr,
                     uint16_t port, int *ret_fd, struct wr_err *e) {
        uint8_t req[PRIV_MSG_MAX];
        int n = priv_net_connect_encode(0, t, addr, port, req, sizeof(req), e);
        if (n < 0)
                return n;
        static _Thread_local struct priv_reply rep;
        int out[2] = {-EBADF, -EBADF};
        int r = call_fds(c, req, (size_t) n, NULL, 0, PRIV_NET_CONNECTED, &rep, out, e);
        if (r < 0)
                return r;
        if (out[0] < 0)
                return err_set(e, -EPROTO, "warren-priv: NET_CONNECTED without its socket");
        *ret_fd = out[0];
        return (int) rep.net_connected.connected;
}

/* ---- phase 4b: the upper-dir reader ---- */

int priv_upper_pack(struct priv_client *c, const struct priv_target *t, int spool_fd,
                    struct priv_upper_packed *ret, struct wr_err *e) {
        uint8_t req[PRIV_MSG_MAX];
        int n = priv_upper_pack_encode(0, t, req, sizeof(req), e);
        if (n < 0)
                return n;
        static _Thread_local struct priv_reply rep;
        int r = call_fds(c, req, (size_t) n, &spool_fd, 1, PRIV_UPPER_PACKED, &rep, NULL, e);
        if (r < 0)
                return r;
        *ret = rep.upper_packed;
        return 0;
}

/* ---- phase 4b-2: the journal's session ---- */

int priv_upper_session(struct priv_client *c, const struct priv_target *t, int *ret_sock,
                       pid_t *ret_pid, struct wr_err *e) {
        uint8_t req[PRIV_MSG_MAX];
        int n = priv_upper_session_encode(0, t, req, sizeof(req), e);
        if (n < 0)
                return n;
        static _Thread_local struct priv_reply rep;
        int out[2] = {-EBADF, -EBADF};
        int r = call_fds(c, req, (size_t) n, NULL, 0, PRIV_UPPER_SESSION_STARTED, &rep, out, e);
        if (r < 0)
                return r;
        if (out[0] < 0)
                return err_set(e, -EPROTO, "warren-priv: UPPER_SESSION_STARTED without its socket");
        int type = 0;
        socklen_t tl = sizeof(type);
        if (getsockopt(out[0], SOL_SOCKET, SO_TYPE, &type, &tl) < 0 || type != SOCK_SEQPACKET) {
                close(out[0]);
                return err_set(e, -EPROTO,
                               "warren-priv: UPPER_SESSION_STARTED with an fd that is "
                               "not a SOCK_SEQPACKET socket");
        }
        *ret_sock = out[0];
        if (ret_pid)
                *ret_pid = rep.upper_started.pid;
        return 0;
}

int priv_upper_call(int sock, const struct priv_upper_op *op, int fd, int timeout_ms,
                    struct priv_upper_reply *rep, int *ret_fd, struct wr_err *e) {
        static _Thread_local struct priv_upper_op m;
        int r = priv_upper_op_encode(op, &m, e);
        if (r < 0)
                return r;
        if ((r = priv_send(sock, &m, sizeof(m), fd >= 0 ? &fd : NULL, fd >= 0 ? 1 : 0,
                           MSG_NOSIGNAL)) < 0)
                return err_set(e, r, "warren-upper: send: %s", strerror(-r));
        struct pollfd pfd = {.fd = sock, .events = POLLIN};
        int pr;
        while ((pr = poll(&pfd, 1, timeout_ms)) < 0 && errno == EINTR)
                ;
        if (pr == 0)
                return err_set(e, -ETIMEDOUT, "warren-upper: no answer in %d ms", timeout_ms);
        uint8_t buf[sizeof(struct priv_upper_reply) + 1];
        int fds[PRIV_FDS_MAX];
        size_t n_fds = 0;
        long n = priv_recv(sock, buf, sizeof(buf), fds, &n_fds, MSG_DONTWAIT);
        if (n <= 0)
                return err_set(e, n < 0 ? (int) n : -EIO,
                               "warren-upper ended without an answer%s%s", n < 0 ? ": " : "",
                               n < 0 ? strerror((int) -n) : "");
        struct wr_err de = {0};
        if ((r = priv_upper_reply_decode(buf, (size_t) n, n_fds, rep, &de)) < 0) {
                priv_close_fds(fds, n_fds);
                return err_set(e, r, "refused from %s", de.msg);
        }
        if (rep->kind == PRIV_UPPER_R_DONE && rep->err)
                return err_set(e, -rep->err, "%s", rep->msg);
        bool want_fd = op->op == PRIV_UPPER_OP_OPEN, want_walk = op->op == PRIV_UPPER_OP_WALK;
        if (rep->kind != (want_fd     ? PRIV_UPPER_R_OPENED
                          : want_walk ? PRIV_UPPER_R_WALKED
                                      : PRIV_UPPER_R_DONE)) {
                priv_close_fds(fds, n_fds);
                return err_set(e, -EPROTO, "warren-upper: answer %u to request %u", rep->kind,
                               op->op);
        }
        if (want_fd) {
                if (ret_fd)
                        *ret_fd = fds[0];
                else
                        close(fds[0]);
        }
        return 0;
}

/* ---- phase 2: the sandbox lifecycle ---- */

/* The blob in a sealed memfd (warren-priv reads it knowing nobody can
 * change it under it). */
static int blob_memfd(const uint8_t *blob, size_t len, struct wr_err *e) {
        int fd = memfd_create("warren-sandbox-config", MFD_CLOEXEC | MFD_ALLOW_SEALING);
        if (fd < 0)
                return err_set(e, -errno, "warren-priv config: memfd: %m");
        size_t off = 0;
        while (off < len) {
                ssize_t n = write(fd, blob + off, len - off);
                if (n <= 0) {
                        int r = n < 0 ? -errno : -EIO;
                        close(fd);
                        return err_set(e, r, "warren-priv config: write memfd: %s", strerror(-r));
                }
                off += (size_t) n;
        }
        if (fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_SEAL) < 0) {
                int r = -errno;
                close(fd);
                return err_set(e, r, "warren-priv config: seal memfd: %s", strerror(-r));
        }
        return fd;
}

static void created_out(const struct priv_reply *rep, const int fds[2], struct priv_sandbox *ret) {
        ret->pid = (pid_t) rep->created.pid;
        ret->start_time = rep->created.start_time;
        ret->pidfd = fds[0];
        ret->ctl_fd = fds[1];
}

/* The datagram of a config request (type) for cfg into req (*ret_n
 * bytes) and its fds: the sealed memfd, then the bind sources (the
 * caller closes all 1 + *ret_n_bind). */
static int config_prep(struct priv_client *c, uint32_t type, const struct rt_sandbox_config *cfg,
                       uint8_t req[PRIV_MSG_MAX], size_t *ret_n, int fds[1 + PRIV_BIND_MAX],
                       size_t *ret_n_bind, struct wr_err *e) {
        struct priv_sandbox_cfg pc;
        uint8_t *blob = NULL;
        size_t blob_len = 0;
        int r = priv_cfg_encode(cfg, c->state_dir, &pc, &blob, &blob_len, e);
        if (r < 0)
                return r;
        int n = priv_sandbox_cfg_encode(0, type, &pc, req, PRIV_MSG_MAX, e);
        if (n < 0) {
                free(blob);
                return n;
        }
        fds[0] = blob_memfd(blob, blob_len, e);
        free(blob);
        if (fds[0] < 0)
                return fds[0];
        if ((r = priv_cfg_bind_open(cfg, fds + 1, ret_n_bind, e)) < 0) {
                close(fds[0]);
                return r;
        }
        *ret_n = (size_t) n;
        return 0;
}

/* A config request (type) for cfg; *ret filled for a SANDBOX_CREATED. */
static int config_call(struct priv_client *c, uint32_t type, const struct rt_sandbox_config *cfg,
                       struct priv_sandbox *ret, struct wr_err *e) {
        uint8_t req[PRIV_MSG_MAX];
        int fds[1 + PRIV_BIND_MAX];
        size_t n = 0, n_bind = 0;
        int r = config_prep(c, type, cfg, req, &n, fds, &n_bind, e);
        if (r < 0)
                return r;
        static _Thread_local struct priv_reply rep;
        int out[2] = {-1, -1};
        r = call_fds(c, req, n, fds, 1 + n_bind,
                     type == PRIV_SANDBOX_START ? PRIV_RESULT : PRIV_SANDBOX_CREATED, &rep, out, e);
        priv_close_fds(fds, 1 + n_bind);
        if (r < 0)
                return r;
        if (rep.hdr.type == PRIV_RESULT)
                return rep.result.err ? result(&rep, e) : 0;
        if (ret)
                created_out(&rep, out, ret);
        else
                priv_close_fds(out, 2);
        return 0;
}

int priv_sandbox_create(struct priv_client *c, const struct rt_sandbox_config *cfg, bool prestart,
                        struct priv_sandbox *ret, struct wr_err *e) {
        return config_call(c, prestart ? PRIV_SANDBOX_PRESTART : PRIV_SANDBOX_CREATE, cfg, ret, e);
}

int priv_sandbox_start(struct priv_client *c, const struct rt_sandbox_config *cfg,
                       struct wr_err *e) {
        return config_call(c, PRIV_SANDBOX_START, cfg, NULL, e);
}

struct priv_start {
        struct pending p;
};

int priv_sandbox_start_begin(struct priv_client *c, const struct rt_sandbox_config *cfg,
                             struct priv_start **ret, struct wr_err *e) {
        struct priv_start *st = calloc(1, sizeof(*st));
        if (!st)
                return err_set(e, -ENOMEM, "out of memory");
        uint8_t req[PRIV_MSG_MAX];
        int fds[1 + PRIV_BIND_MAX];
        size_t n = 0, n_bind = 0;
        int r = config_prep(c, PRIV_SANDBOX_START, cfg, req, &n, fds, &n_bind, e);
        if (r >= 0) {
                r = call_send(c, req, n, fds, 1 + n_bind, PRIV_RESULT, &st->p, e);
                priv_close_fds(fds, 1 + n_bind);
        }
        if (r < 0) {
                free(st);
                return r;
        }
        *ret = st;
        return 0;
}

int priv_sandbox_start_end(struct priv_client *c, struct priv_start *st, struct wr_err *e) {
        static _Thread_local struct priv_reply rep;
        int r = call_wait(c, &st->p, &rep, NULL, e);
        free(st);
        if (r < 0)
                return r;
        return rep.result.err ? result(&rep, e) : 0;
}

int priv_sandbox_destroy(struct priv_client *c, const struct priv_target *t, const char *peer,
                         struct wr_err *e) {
        struct priv_destroy d;
        memset(&d, 0, sizeof(d));
        d.t = *t;
        if (peer)
                snprintf(d.peer, sizeof(d.peer), "%s", peer);
        d.keep_link = peer ? 0 : 1;
        uint8_t req[PRIV_MSG_MAX];
        int n = priv_destroy_encode(0, &d, req, sizeof(req), e);
        if (n < 0)
                return n;
        int r = call_result(c, req, (size_t) n, e);
        return r < 0 ? r : 0;
}

int priv_sandbox_attach(struct priv_client *c, const struct priv_target *t, bool ctl,
                        struct priv_sandbox *ret, struct wr_err *e) {
        uint8_t req[PRIV_MSG_MAX];
        int n = priv_target_encode(0, ctl ? PRIV_CTL_CONNECT : PRIV_SANDBOX_ATTACH, t, req,
                                   sizeof(req), e);
        if (n < 0)
                return n;
        static _Thread_local struct priv_reply rep;
        int out[2] = {-1, -1};
        int r = call_fds(c, req, (size_t) n, NULL, 0, PRIV_SANDBOX_CREATED, &rep, out, e);
        if (r < 0)
                return r;
        if (rep.hdr.type == PRIV_RESULT)
                return result(&rep, e);
        created_out(&rep, out, ret);
        return 0;
}

/* ---- phase 3: volumes and spawn-beside ---- */

/* path relative to the state dir of c, or NULL */
static const char *below_state(const struct priv_client *c, const char *path) {
        size_t sl = strlen(c->state_dir);
        if (strncmp(path, c->state_dir, sl) != 0 || path[sl] != '/')
                return NULL;
        return path + sl + 1;
}

int priv_volume_mount(struct priv_client *c, const char *dir, uint32_t flags, int *ret_fd,
                      struct wr_err *e) {
        const char *rel = below_state(c, dir);
        if (!rel)
                return err_set(e, -EINVAL, "mount volume: %s is not below the state dir %s", dir,
                               c->state_dir);
        uint8_t req[PRIV_MSG_MAX];
        int n = priv_volume_encode(0, PRIV_VOLUME_MOUNT, rel, flags, req, sizeof(req), e);
        if (n < 0)
                return n;
        static _Thread_local struct priv_reply rep;
        int out[2] = {-EBADF, -EBADF};
        int r = call_fds(c, req, (size_t) n, NULL, 0, PRIV_VOLUME_MOUNTED, &rep, out, e);
        if (r < 0)
                return r;
        if (out[0] < 0)
                return err_set(e, -EPROTO, "warren-priv: VOLUME_MOUNTED without its fd");
        *ret_fd = out[0];
        return 0;
}

int priv_volume_unmount(struct priv_client *c, const char *dir, struct wr_err *e) {
        const char *rel = below_state(c, dir);
        if (!rel)
                return err_set(e, -EINVAL, "unmount volume: %s is not below the state dir %s", dir,
                               c->state_dir);
        uint8_t req[PRIV_MSG_MAX];
        int n = priv_volume_encode(0, PRIV_VOLUME_UNMOUNT, rel, 0, req, sizeof(req), e);
        if (n < 0)
                return n;
        return call_result(c, req, (size_t) n, e);
}

int priv_sandbox_spawn_beside(struct priv_client *c, const struct priv_target *t, uint32_t kind,
                              uid_t uid, gid_t gid, const int fds[4], int *ret_pidfd,
                              pid_t *ret_pid, struct wr_err *e) {
        uint8_t req[PRIV_MSG_MAX];
        int n = priv_spawn_beside_encode(0, t, kind, (uint32_t) uid, (uint32_t) gid, req,
                                         sizeof(req), e);
        if (n < 0)
                return n;
        static _Thread_local struct priv_reply rep;
        int out[2] = {-EBADF, -EBADF};
        int r = call_fds(c, req, (size_t) n, fds, PRIV_SPAWN_FDS, PRIV_SPAWNED, &rep, out, e);
        if (r < 0)
                return r;
        if (out[0] < 0)
                return err_set(e, -EPROTO, "warren-priv: SPAWNED without its pidfd");
        *ret_pidfd = out[0];
        if (ret_pid)
                *ret_pid = (pid_t) rep.spawned.pid;
        return 0;
}

/* linux/pidfd.h of Linux 6.15 (PIDFD_GET_INFO, PIDFD_INFO_EXIT): the
 * first 64 bytes of struct pidfd_info */
struct wr_pidfd_info {
        uint64_t mask;
        uint64_t cgroupid;
        uint32_t pid, tgid, ppid, ruid, rgid, euid, egid, suid, sgid, fsuid, fsgid;
        int32_t exit_code;
};
#define WR_PIDFD_GET_INFO _IOWR(0xFF, 11, struct wr_pidfd_info)
#define WR_PIDFD_INFO_EXIT (1ull << 3)

int priv_pidfd_status(int pidfd, int ms) {
        for (int i = 0;; i++) {
                struct wr_pidfd_info info = {.mask = WR_PIDFD_INFO_EXIT};
                int r = ioctl(pidfd, WR_PIDFD_GET_INFO, &info);
                if (r < 0 && errno != ESRCH)
                        return errno == ENOTTY || errno == EINVAL ? -EOPNOTSUPP : -errno;
                if (r == 0 && (info.mask & WR_PIDFD_INFO_EXIT))
                        return info.exit_code;
                if (i >= ms)
                        return -EAGAIN;
                struct pollfd p = {.fd = pidfd, .events = POLLIN};
                (void) poll(&p, 1, 1);
                if (p.revents)
                        (void) poll(NULL, 0, 1); /* exited: its reaper records it */
        }
}

int priv_ssh_dir_prepare(struct priv_client *c, const char *id, int32_t uid_slot,
                         struct wr_err *e) {
        uint8_t req[PRIV_MSG_MAX];
        int n = priv_ssh_dir_encode(0, id, uid_slot, req, sizeof(req), e);
        if (n < 0)
                return n;
        int r = call_result(c, req, (size_t) n, e);
        return r < 0 ? r : 0;
}

/* ---- phase 3: the helpers ---- */

static int helper_call(struct priv_client *c, uint8_t *req, size_t n, const int *fds, size_t n_fds,
                       struct priv_helper *ret, struct wr_err *e) {
        static _Thread_local struct priv_reply rep;
        int out[2] = {-EBADF, -EBADF};
        int r = call_fds(c, req, n, fds, n_fds, PRIV_HELPER_STARTED, &rep, out, e);
        if (r < 0)
                return r;
        if (out[0] < 0)
                return err_set(e, -EPROTO, "warren-priv: HELPER_STARTED without its pidfd");
        ret->pid = rep.helper_started.pid;
        ret->start_time = rep.helper_started.start_time;
        ret->pidfd = out[0];
        return 0;
}

int priv_helper_start(struct priv_client *c, const struct priv_helper_start *h, const int *fds,
                      size_t n_fds, struct priv_helper *ret, struct wr_err *e) {
        uint8_t req[PRIV_MSG_MAX];
        int n = priv_helper_start_encode(0, h, req, sizeof(req), e);
        if (n < 0)
                return n;
        if (n_fds != priv_helper_fds(h->kind, h->flags))
                return err_set(e, -EINVAL, "HELPER_START: %zu fds (kind %u wants %u)", n_fds,
                               h->kind, priv_helper_fds(h->kind, h->flags));
        return helper_call(c, req, (size_t) n, fds, n_fds, ret, e);
}

int priv_unpack_start(struct priv_client *c, const char *dir, int tar_fd, int report_fd,
                      struct priv_helper *ret, struct wr_err *e) {
        size_t sl = strlen(c->state_dir);
        if (strncmp(dir, c->state_dir, sl) != 0 || dir[sl] != '/')
                return err_set(e, -EINVAL, "unpack: %s is not below the state dir %s", dir,
                               c->state_dir);
        uint8_t req[PRIV_MSG_MAX];
        int n = priv_unpack_start_encode(0, dir + sl + 1, req, sizeof(req), e);
        if (n < 0)
                return n;
        int fds[2] = {tar_fd, report_fd};
        return helper_call(c, req, (size_t) n, fds, 2, ret, e);
}

int priv_upstream_parse(const char *s, struct priv_helper_start *h) {
        char buf[INET6_ADDRSTRLEN + 16];
        if (strlen(s) >= sizeof(buf))
                return -EINVAL;
        snprintf(buf, sizeof(buf), "%s", s);
        char *host = buf, *port = NULL;
        if (buf[0] == '[') {
                char *close_b = strchr(buf, ']');
                if (!close_b)
                        return -EINVAL;
                *close_b = 0;
                host = buf + 1;
                if (close_b[1] == ':')
                        port = close_b + 2;
                else if (close_b[1])
                        return -EINVAL;
        } else if (strchr(buf, ':') == strrchr(buf, ':') && strchr(buf, ':')) {
                port = strchr(buf, ':');
                *port++ = 0;
        }
        long p = 53;
        if (port) {
                char *end;
                p = strtol(port, &end, 10);
                if (*end || p < 1 || p > 65535)
                        return -EINVAL;
        }
        memset(h->upstream_addr, 0, sizeof(h->upstream_addr));
        if (inet_pton(AF_INET, host, h->upstream_addr) == 1)
                h->upstream_family = 4;
        else if (inet_pton(AF_INET6, host, h->upstream_addr) == 1)
                h->upstream_family = 6;
        else
                return -EINVAL;
        h->upstream_port = (uint16_t) p;
        return 0;
}

int priv_signer_start(struct priv_client *c, uint32_t role, int key_fd, pid_t *ret_pid,
                      int *ret_pidfd, int *ret_sock, struct wr_err *e) {
        int sp[2];
        if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sp) < 0) {
                int r = -errno;
                close(key_fd);
                return err_set(e, r, "socketpair: %s", strerror(-r));
        }
        struct priv_helper_start h = {
                .kind = PRIV_HELPER_SIGNER,
                .role = role,
                .flags = log_get_format() == LOG_FORMAT_JSON ? PRIV_HELPER_F_JSON_LOG : 0,
        };
        int fds[2] = {key_fd, sp[1]};
        struct priv_helper ph;
        int r = priv_helper_start(c, &h, fds, 2, &ph, e);
        close(key_fd);
        close(sp[1]);
        if (r < 0) {
                close(sp[0]);
                return err_prefix(e, r, "warren-signer through warren-priv");
        }
        *ret_pid = ph.pid;
        *ret_pidfd = ph.pidfd;
        *ret_sock = sp[0];
        return 0;
}

int priv_fetch_start(struct priv_client *c, int sock, int registry_config_fd, int docker_config_fd,
                     bool loopback_only, pid_t *ret_pid, int *ret_pidfd, struct wr_err *e) {
        struct priv_helper_start h = {
                .kind = PRIV_HELPER_FETCH,
                .flags = (registry_config_fd >= 0 ? PRIV_HELPER_F_REGISTRY_CONFIG : 0) |
                         (docker_config_fd >= 0 ? PRIV_HELPER_F_DOCKER_CONFIG : 0) |
                         (loopback_only ? PRIV_HELPER_F_LOOPBACK_ONLY : 0),
        };
        int fds[3] = {sock};
        size_t n = 1;
        if (registry_config_fd >= 0)
                fds[n++] = registry_config_fd;
        if (docker_config_fd >= 0)
                fds[n++] = docker_config_fd;
        struct priv_helper ph;
        int r = priv_helper_start(c, &h, fds, n, &ph, e);
        if (r < 0)
                return err_prefix(e, r, "warren-fetch through warren-priv");
        *ret_pid = ph.pid;
        *ret_pidfd = ph.pidfd;
        return 0;
}

/* ---- phase 5: layer storage ---- */

int priv_layer_commit(struct priv_client *c, const char *tmp_name, const char *hex,
                      struct wr_err *e) {
        uint8_t req[PRIV_MSG_MAX];
        int n = priv_layer_commit_encode(0, tmp_name, hex, req, sizeof(req), e);
        if (n < 0)
                return n;
        return call_result(c, req, (size_t) n, e);
}

int priv_layer_remove(struct priv_client *c, uint32_t dir, const char *name, struct wr_err *e) {
        uint8_t req[PRIV_MSG_MAX];
        int n = priv_layer_remove_encode(0, dir, name, req, sizeof(req), e);
        if (n < 0)
                return n;
        return call_result(c, req, (size_t) n, e);
}

/* ---- phase 5: volume files ---- */

int priv_volfile(struct priv_client *c, const char *dir, uint32_t op, const char *path,
                 const char *after, mode_t mode, uint32_t limit, const char *tmp,
                 struct priv_reply *rep, int *ret_fd, struct wr_err *e) {
        const char *rel = below_state(c, dir);
        if (!rel)
                return err_set(e, -EINVAL, "volume files: %s is not below the state dir %s", dir,
                               c->state_dir);
        size_t pl = strlen(path), al = after ? strlen(after) : 0;
        struct priv_volfile v = {.op = op,
                                 .mode = (uint32_t) mode,
                                 .path_len = (uint32_t) pl,
                                 .after_len = (uint32_t) al,
                                 .limit = limit};
        if (strlen(rel) >= sizeof(v.vol) || (tmp && strlen(tmp) >= sizeof(v.tmp)) ||
            pl > PRIV_VOLFILE_PATH_MAX || al > PRIV_VOLFILE_PATH_MAX)
                return err_set(e, -EINVAL, "volume files: a field is too long");
        memcpy(v.vol, rel, strlen(rel));
        if (tmp)
                memcpy(v.tmp, tmp, strlen(tmp));
        uint32_t type = op <= PRIV_VOLFILE_PUT  ? PRIV_VOLFILE_OPEN
                        : op == PRIV_VOLFILE_LS ? PRIV_VOLFILE_LIST
                                                : PRIV_VOLFILE_OP;
        uint32_t want = type == PRIV_VOLFILE_OPEN                              ? PRIV_VOLFILE_OPENED
                        : type == PRIV_VOLFILE_LIST                            ? PRIV_VOLFILE_LISTED
                        : op == PRIV_VOLFILE_STAT || op == PRIV_VOLFILE_COMMIT ? PRIV_VOLFILE_STATED
                                                                               : PRIV_RESULT;
        uint8_t req[PRIV_MSG_MAX];
        int n = priv_volfile_encode(0, type, &v, req, sizeof(req), e);
        if (n < 0)
                return n;
        struct iovec iov[2] = {{.iov_base = (void *) path, .iov_len = pl},
                               {.iov_base = (void *) (after ? after : ""), .iov_len = al}};
        _cleanup_close_ int memfd = -EBADF;
        int r = memfd_sealed("warren-volume-paths", "the paths", iov, 2, &memfd, e);
        if (r < 0)
                return r;
        int out[2] = {-EBADF, -EBADF};
        memset(rep, 0, sizeof(*rep));
        r = call_fds(c, req, (size_t) n, &memfd, 1, want, rep, out, e);
        if (r < 0) {
                if (rep->hdr.type == PRIV_RESULT && rep->result.value > 0 &&
                    rep->result.value <= WR_STATUS_UNAUTHENTICATED && e) {
                        e->status = (enum wr_status) rep->result.value;
                        e->fault = e->status == WR_STATUS_INTERNAL ? WR_FAULT_SERVICE
                                                                   : WR_FAULT_CLIENT;
                }
                return r;
        }
        if (want == PRIV_RESULT)
                return result(rep, e);
        if (priv_type_fds(want) > 0) {
                if (out[0] < 0)
                        return err_set(e, -EPROTO, "warren-priv: %s without its fd",
                                       priv_type_name(want));
                if (ret_fd)
                        *ret_fd = out[0];
                else
                        close(out[0]);
        }
        return 0;
}
