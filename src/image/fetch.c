/* SPDX-License-Identifier: Apache-2.0 */
/* Spawning and speaking to warren-fetch (fetch.h). */
#include "image/fetch.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "basic/log.h"
#include "image/fetch-root.h"
#include "image/registry-internal.h"

struct img_fetcher {
        uv_loop_t *loop;
        uv_process_t proc;  /* our child, or (by_priv) ... */
        uv_poll_t pid_poll; /* ... warren-priv's: its pidfd, readable once it exited */
        int pidfd;
        bool by_priv;
        uv_poll_t poll;
        int sock;      /* warrend's end */
        unsigned refs; /* proc (or pid_poll) handle, poll handle, the owner */
        bool exited, closed, dead_told, polling, poll_inited;
        int64_t exit_status;
        int term_signal;
        pid_t pid;
        img_fetcher_msg_fn on_msg;
        img_fetcher_dead_fn on_dead;
        void *userdata;
};

static img_fetch_start_fn start_fn;
static void *start_ud;

void img_fetcher_set_start(img_fetch_start_fn fn, void *userdata) {
        start_fn = fn;
        start_ud = userdata;
}

/* The process handle: our child's, or the pidfd's poll (warren-priv's child). */
static uv_handle_t *proc_handle(struct img_fetcher *f) {
        return f->by_priv ? (uv_handle_t *) &f->pid_poll : (uv_handle_t *) &f->proc;
}

static void kill_it(struct img_fetcher *f) {
        if (f->exited)
                return;
        if (!f->by_priv) {
                (void) uv_process_kill(&f->proc, SIGKILL); /* exit_cb closes the handle */
                return;
        }
        /* warren-priv's child: a dropped warrend may not signal it (another
         * uid); warren-priv kills it once our end is shut down */
        if (f->pidfd >= 0)
                (void) syscall(SYS_pidfd_send_signal, f->pidfd, SIGKILL, NULL, 0);
        if (f->sock >= 0)
                (void) shutdown(f->sock, SHUT_RDWR);
}

/* One receive buffer for every helper: all run on the loop thread and a
 * message is handled before the next is read. */
static _Alignas(16) unsigned char rx[IMG_FETCH_MSG_MAX + 16];

void img_fetcher_find(const char *unpack_helper, char *out, size_t size) {
        const char *env = getenv("WARREN_FETCH_HELPER");
        if (env && *env) {
                snprintf(out, size, "%s", env);
                return;
        }
        const char *slash = unpack_helper ? strrchr(unpack_helper, '/') : NULL;
        if (slash)
                snprintf(out, size, "%.*s/warren-fetch", (int) (slash - unpack_helper),
                         unpack_helper);
        else
                snprintf(out, size, "warren-fetch");
}

static void unref(struct img_fetcher *f) {
        if (--f->refs > 0)
                return;
        closep(&f->sock);
        if (f->by_priv)
                closep(&f->pidfd);
        free(f);
}

static void on_close(uv_handle_t *h) {
        unref(h->data);
}

pid_t img_fetcher_pid(const struct img_fetcher *f) {
        return f && !f->exited ? f->pid : 0;
}

static void tell_dead(struct img_fetcher *f, const struct wr_err *e) {
        if (f->closed || f->dead_told)
                return;
        f->dead_told = true;
        if (f->polling) {
                uv_poll_stop(&f->poll);
                f->polling = false;
        }
        f->on_dead(f, e, f->userdata);
}

/* Read every pending answer; false when f was closed or declared dead. */
static bool drain(struct img_fetcher *f) {
        while (!f->closed && !f->dead_told) {
                ssize_t n = recv(f->sock, rx, IMG_FETCH_MSG_MAX + 1, MSG_DONTWAIT | MSG_TRUNC);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0 && errno == EAGAIN)
                        return true;
                if (n <= 0)
                        return true; /* EOF: the exit callback says why */
                int type = n > (ssize_t) IMG_FETCH_MSG_MAX
                                   ? -EBADMSG
                                   : img_fetch_msg_check(rx, (size_t) n, IMG_FETCH_TO_DAEMON);
                if (type < 0) {
                        struct wr_err e = {0};
                        err_setx(&e, -EPROTO, WR_STATUS_INTERNAL, WR_FAULT_SERVICE,
                                 "registry helper warren-fetch (pid %d) sent a malformed message "
                                 "(%zd bytes); killed",
                                 (int) f->pid, n);
                        kill_it(f);
                        tell_dead(f, &e);
                        return false;
                }
                f->on_msg(f, type, rx, f->userdata);
        }
        return false;
}

static void on_readable(uv_poll_t *p, int status, int events) {
        (void) events;
        struct img_fetcher *f = p->data;
        if (status < 0 || !drain(f))
                return;
        if (events & UV_DISCONNECT && f->polling) {
                uv_poll_stop(&f->poll); /* the exit callback reports */
                f->polling = false;
        }
}

/* The helper exited: report it unless its last answers say it is done. */
static void exited(struct img_fetcher *f) {
        if (!drain(f))
                return;
        struct wr_err e = {0};
        if (f->by_priv) /* warren-priv reaped it and logged how it ended */
                err_setx(&e, -ECONNRESET, WR_STATUS_UNAVAILABLE, WR_FAULT_SERVICE,
                         "registry helper warren-fetch (pid %d) ended during the pull (killed "
                         "or exited: warren-priv's log says how); nothing was stored, pull again",
                         (int) f->pid);
        else if (f->term_signal)
                err_setx(&e, -ECONNRESET, WR_STATUS_UNAVAILABLE, WR_FAULT_SERVICE,
                         "registry helper warren-fetch (pid %d) was killed by signal %d (%s) "
                         "during the pull; nothing was stored, pull again",
                         (int) f->pid, f->term_signal, strsignal(f->term_signal));
        else
                err_setx(&e, -ECONNRESET, WR_STATUS_INTERNAL, WR_FAULT_SERVICE,
                         "registry helper warren-fetch (pid %d) exited with status %d during the "
                         "pull (its reason is in warrend's log)",
                         (int) f->pid, (int) f->exit_status);
        tell_dead(f, &e);
}

static void on_exit_cb(uv_process_t *p, int64_t exit_status, int term_signal) {
        struct img_fetcher *f = p->data;
        f->exited = true;
        f->exit_status = exit_status;
        f->term_signal = term_signal;
        uv_close((uv_handle_t *) p, on_close);
        exited(f);
}

static void on_pidfd(uv_poll_t *p, int status, int events) {
        (void) status;
        (void) events;
        struct img_fetcher *f = p->data;
        if (f->exited)
                return;
        f->exited = true;
        uv_poll_stop(p);
        uv_close((uv_handle_t *) p, on_close);
        exited(f);
}

/* A memfd holding the bytes of config file path (flag names it), sealed
 * against writes and growth (not shrinking: the helper truncates it once
 * read); our copy of the bytes is wiped. -1 when path is unset. */
static int config_memfd(const char *flag, const char *path, int *ret, struct wr_err *e) {
        *ret = -EBADF;
        if (!path || !*path)
                return 0;
        char *buf = NULL;
        size_t len = 0;
        int r = img_reg_config_read(flag, path, &buf, &len, e);
        if (r < 0)
                return r;
        _cleanup_close_ int fd =
                memfd_create("warren-fetch-config", MFD_CLOEXEC | MFD_ALLOW_SEALING);
        if (fd < 0)
                r = err_set(e, -errno, "%s: memfd: %m", flag);
        for (size_t off = 0; r >= 0 && off < len;) {
                ssize_t n = write(fd, buf + off, len - off);
                if (n <= 0) {
                        r = err_set(e, n < 0 ? -errno : -EIO, "%s: memfd write: %m", flag);
                        break;
                }
                off += (size_t) n;
        }
        erase_and_free_n(buf, len);
        if (r < 0)
                return r;
        if (fcntl(fd, F_ADD_SEALS, F_SEAL_WRITE | F_SEAL_GROW | F_SEAL_SEAL) < 0 ||
            lseek(fd, 0, SEEK_SET) < 0)
                return err_set(e, -errno, "%s: seal memfd: %m", flag);
        *ret = TAKE_FD(fd);
        return 0;
}

/* warren-fetch as our child (without --privsep). On failure f is freed
 * (its handle closed). */
static int spawn_here(struct img_fetcher *f, const struct img_fetcher_opts *o, int theirs,
                      int rc_fd, int dc_fd, struct wr_err *e) {
        char *args[24];
        int n = 0;
        args[n++] = (char *) o->helper;
        args[n++] = "--sock-fd";
        args[n++] = "3";
        if (o->ref) {
                args[n++] = "--ref";
                args[n++] = (char *) o->ref;
        }
        if (rc_fd >= 0) {
                args[n++] = "--registry-config-fd";
                args[n++] = "4";
                args[n++] = "--registry-config-name";
                args[n++] = (char *) o->registry_config;
        }
        if (dc_fd >= 0) {
                args[n++] = "--docker-config-fd";
                args[n++] = "5";
                args[n++] = "--docker-config-name";
                args[n++] = (char *) o->docker_config;
        }
        if (o->loopback_only)
                args[n++] = "--loopback-only";
        const char *user = getenv("WARREN_FETCH_USER");
        if (user && *user) {
                args[n++] = "--uid";
                args[n++] = (char *) user;
        }
        args[n++] = "--root";
        args[n++] = (char *) o->root;
        const char *strict = getenv("WARREN_FETCH_SECCOMP_STRICT"); /* the tests: kill, not EPERM */
        if (strict && !strcmp(strict, "1"))
                args[n++] = "--seccomp-strict";
        args[n] = NULL;
        char *env[] = {"PATH=/usr/sbin:/usr/bin:/sbin:/bin", NULL};
        uv_stdio_container_t stdio[6] = {
                {.flags = UV_IGNORE},
                {.flags = UV_INHERIT_FD, .data.fd = 2},
                {.flags = UV_INHERIT_FD, .data.fd = 2},
                {.flags = UV_INHERIT_FD, .data.fd = theirs},
                rc_fd >= 0 ? (uv_stdio_container_t){.flags = UV_INHERIT_FD, .data.fd = rc_fd}
                           : (uv_stdio_container_t){.flags = UV_IGNORE},
                dc_fd >= 0 ? (uv_stdio_container_t){.flags = UV_INHERIT_FD, .data.fd = dc_fd}
                           : (uv_stdio_container_t){.flags = UV_IGNORE},
        };
        uv_process_options_t opts = {
                .exit_cb = on_exit_cb,
                .file = o->helper,
                .args = args,
                .env = env,
                .cwd = "/",
                .stdio_count = 6,
                .stdio = stdio,
        };
        f->proc.data = f;
        int r = uv_spawn(f->loop, &f->proc, &opts);
        if (r < 0) {
                err_setx(e, r, WR_STATUS_INTERNAL, WR_FAULT_SERVICE,
                         "pull: start registry helper %s: %s", o->helper, uv_strerror(r));
                f->refs = 1;
                f->closed = true;
                uv_close((uv_handle_t *) &f->proc, on_close);
                return r;
        }
        return 0;
}

/* warren-fetch started by start_fn (--privsep): watched through its pidfd. */
static int start_by(struct img_fetcher *f, const struct img_fetcher_opts *o, int theirs, int rc_fd,
                    int dc_fd, struct wr_err *e) {
        pid_t pid = 0;
        int pidfd = -EBADF;
        int r = start_fn(start_ud, theirs, rc_fd, dc_fd, o->loopback_only, &pid, &pidfd, e);
        if (r < 0)
                return err_prefix(e, r, "pull: start registry helper");
        f->pid_poll.data = f;
        if (uv_poll_init(f->loop, &f->pid_poll, pidfd) < 0) {
                (void) syscall(SYS_pidfd_send_signal, pidfd, SIGKILL, NULL, 0);
                close(pidfd);
                return err_set(e, -EIO, "pull: watch registry helper warren-fetch (pid %d)",
                               (int) pid);
        }
        f->by_priv = true;
        f->pid = pid;
        f->pidfd = pidfd;
        /* a start that fails leaves the handle open: its exit closes it */
        if (uv_poll_start(&f->pid_poll, UV_READABLE, on_pidfd) < 0)
                log_warn("pull: registry helper warren-fetch (pid %d): its exit is not watched",
                         (int) pid);
        return 0;
}

int img_fetcher_start(uv_loop_t *loop, const struct img_fetcher_opts *o, img_fetcher_msg_fn on_msg,
                      img_fetcher_dead_fn on_dead, void *userdata, struct img_fetcher **ret,
                      struct wr_err *e) {
        _cleanup_close_ int rc_fd = -EBADF, dc_fd = -EBADF, theirs = -EBADF;
        /* by warren-priv (start_fn), the chroot is its own to prepare */
        int r = start_fn ? 0 : img_fetch_root_prepare(o->root, e);
        if (r < 0)
                return err_prefix(e, r, "registry helper's root");
        r = config_memfd("--registry-config", o->registry_config, &rc_fd, e);
        if (r >= 0)
                r = config_memfd("--docker-config", o->docker_config, &dc_fd, e);
        if (r < 0)
                return r;
        struct img_fetcher *f = calloc(1, sizeof(*f));
        if (!f)
                return err_set(e, -ENOMEM, "pull: out of memory");
        f->loop = loop;
        f->sock = -EBADF;
        f->pidfd = -EBADF;
        f->on_msg = on_msg;
        f->on_dead = on_dead;
        f->userdata = userdata;
        int sp[2];
        if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sp) < 0) {
                r = err_set(e, -errno, "pull: socketpair: %m");
                free(f);
                return r;
        }
        f->sock = sp[0];
        theirs = sp[1];

        if (start_fn) {
                r = start_by(f, o, theirs, rc_fd, dc_fd, e);
                if (r < 0) {
                        closep(&f->sock);
                        free(f);
                        return r;
                }
        } else {
                r = spawn_here(f, o, theirs, rc_fd, dc_fd, e);
                if (r < 0)
                        return r;
                f->pid = f->proc.pid;
        }
        f->refs = 2; /* the process handle and the owner */
        f->poll.data = f;
        if (uv_poll_init(loop, &f->poll, f->sock) == 0) {
                f->refs++;
                f->poll_inited = true;
                if (uv_poll_start(&f->poll, UV_READABLE | UV_DISCONNECT, on_readable) == 0)
                        f->polling = true;
        }
        if (!f->polling) {
                img_fetcher_free(f);
                return err_set(e, -EIO, "pull: watch the registry helper's socket");
        }
        *ret = f;
        return 0;
}

int img_fetcher_request(struct img_fetcher *f, enum img_fetch_type type, uint32_t id,
                        const char *object, const char *digest, uint64_t max_size, int fd,
                        struct wr_err *e) {
        struct img_fetch_req q;
        memset(&q, 0, sizeof(q));
        img_fetch_hdr_init(&q.hdr, type, id);
        if (object && strlen(object) >= sizeof(q.object))
                return err_set(e, -EBADMSG, "pull: object name too long");
        snprintf(q.object, sizeof(q.object), "%s", object ? object : "");
        snprintf(q.digest, sizeof(q.digest), "%s", digest ? digest : "");
        q.max_size = max_size;
        if (img_fetch_msg_check(&q, sizeof(q), IMG_FETCH_TO_HELPER) != (int) type ||
            (type == IMG_FETCH_REQ_BLOB) != (fd >= 0))
                return err_set(e, -EBADMSG, "pull: malformed request for the registry helper");
        struct iovec iov = {.iov_base = &q, .iov_len = sizeof(q)};
        union {
                struct cmsghdr align;
                char buf[CMSG_SPACE(sizeof(int))];
        } cbuf;
        struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1};
        if (fd >= 0) {
                memset(&cbuf, 0, sizeof(cbuf));
                mh.msg_control = cbuf.buf;
                mh.msg_controllen = sizeof(cbuf.buf);
                struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
                c->cmsg_level = SOL_SOCKET;
                c->cmsg_type = SCM_RIGHTS;
                c->cmsg_len = CMSG_LEN(sizeof(int));
                memcpy(CMSG_DATA(c), &fd, sizeof(int));
        }
        if (sendmsg(f->sock, &mh, MSG_NOSIGNAL | MSG_DONTWAIT) != (ssize_t) sizeof(q))
                return err_setx(e, -EIO, WR_STATUS_INTERNAL, WR_FAULT_SERVICE,
                                "pull: registry helper warren-fetch (pid %d): send: %m",
                                (int) f->pid);
        return 0;
}

int img_fetcher_bind(struct img_fetcher *f, const char *ref, struct wr_err *e) {
        struct img_fetch_req_bind b;
        memset(&b, 0, sizeof(b));
        img_fetch_hdr_init(&b.hdr, IMG_FETCH_REQ_BIND, 0);
        if (!ref || !*ref || strlen(ref) >= sizeof(b.ref))
                return err_set(e, -EBADMSG, "pull: reference too long for the registry helper");
        snprintf(b.ref, sizeof(b.ref), "%s", ref);
        if (send(f->sock, &b, sizeof(b), MSG_NOSIGNAL | MSG_DONTWAIT) != (ssize_t) sizeof(b))
                return err_setx(e, -EIO, WR_STATUS_INTERNAL, WR_FAULT_SERVICE,
                                "pull: registry helper warren-fetch (pid %d): send: %m",
                                (int) f->pid);
        return 0;
}

void img_fetcher_retarget(struct img_fetcher *f, img_fetcher_msg_fn on_msg,
                          img_fetcher_dead_fn on_dead, void *userdata) {
        f->on_msg = on_msg;
        f->on_dead = on_dead;
        f->userdata = userdata;
}

void img_fetcher_set_background(struct img_fetcher *f, bool on) {
        uv_handle_t *hs[] = {proc_handle(f), f->poll_inited ? (uv_handle_t *) &f->poll : NULL};
        for (size_t i = 0; i < ELEMENTSOF(hs); i++)
                if (hs[i] && !uv_is_closing(hs[i])) {
                        if (on)
                                uv_unref(hs[i]);
                        else
                                uv_ref(hs[i]);
                }
}

bool img_fetcher_alive(const struct img_fetcher *f) {
        return f && !f->exited && !f->closed && !f->dead_told;
}

void img_fetcher_free(struct img_fetcher *f) {
        if (!f || f->closed)
                return;
        /* referenced again: the loop runs until the exit is reaped */
        img_fetcher_set_background(f, false);
        f->closed = true;
        kill_it(f); /* its exit callback closes the process handle */
        if (f->polling)
                uv_poll_stop(&f->poll);
        if (f->poll_inited)
                uv_close((uv_handle_t *) &f->poll, on_close);
        unref(f); /* the owner */
}
