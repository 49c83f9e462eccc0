/* SPDX-License-Identifier: Apache-2.0 */
/* warren-priv, phase 3: the helper processes it starts for warrend
 * (HELPER_START: warren-egress, warren-signer, warren-fetch; UNPACK_START:
 * warren-unpack; priv-proto.h, docs/privsep.md "Phase 3, helpers").
 *
 * The binaries are found once, at start, as warrend finds them ($WARREN_EGRESS,
 * $WARREN_SIGNER, $WARREN_UNPACK_HELPER, else next to warren-priv, the build
 * tree, /usr/libexec/warren). Each argv is built here from the request's
 * fixed fields; the child gets exactly the request's fds as 3, 4, ... (an
 * unpack: stdin, 3, 4 as warrend's uv_spawn gave them), stdio 1-2 of
 * warren-priv and nothing else, default signal dispositions and an empty
 * mask. warren-priv is its parent: a thread of its own waits for it
 * (waitid on that pid only: the sandboxes' inits are the runtime's to reap)
 * and logs how it ended. warrend watches it through the pidfd it is sent. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <limits.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "basic/hostaddr.h"
#include "basic/helperpath.h"
#include "basic/log.h"
#include "image/fetch-root.h"
#include "priv/priv-internal.h"
#include "priv/priv-proto.h"
#include "runtime/runtime.h"

#define ARGS_MAX 256
#define DENY_ADDRS_MAX 64

static char egress_path[PATH_MAX], signer_path[PATH_MAX], unpack_path[PATH_MAX];
/* warren-fetch: its binary, its chroot and the environment's settings of
 * warren-priv's start (never a request's) */
static char fetch_path[PATH_MAX], fetch_root[PATH_MAX], fetch_user[64];
static bool fetch_strict;
/* fetch-root.c writes the chroot's etc/ with temp files named by pid: one
 * writer at a time among warren-priv's worker threads */
static pthread_mutex_t fetch_root_lock = PTHREAD_MUTEX_INITIALIZER;

/* name: basic/helperpath.h ($envvar, else next to warren-priv, the build
 * tree, the libexec dirs); only an absolute path is taken (warren-priv is
 * root: nothing relative to whatever its cwd was). "" when none. */
static void find(char *out, size_t size, const char *name, const char *envvar, const char *subdir) {
        if (helper_path_find(name, envvar, subdir, out, size) < 0 || out[0] != '/')
                out[0] = 0;
}

void priv_helpers_init(const char *state_dir) {
        find(egress_path, sizeof(egress_path), "warren-egress", "WARREN_EGRESS", "egress");
        find(signer_path, sizeof(signer_path), "warren-signer", "WARREN_SIGNER", "signer");
        find(unpack_path, sizeof(unpack_path), "warren-unpack", "WARREN_UNPACK_HELPER", "image");
        find(fetch_path, sizeof(fetch_path), "warren-fetch", "WARREN_FETCH_HELPER", "image");
        /* as warrend's pull.c: $WARREN_FETCH_ROOT, else <state>/fetch-root */
        const char *root = getenv("WARREN_FETCH_ROOT");
        if (root && root[0] == '/')
                snprintf(fetch_root, sizeof(fetch_root), "%s", root);
        else
                snprintf(fetch_root, sizeof(fetch_root), "%s/fetch-root", state_dir);
        const char *user = getenv("WARREN_FETCH_USER");
        if (user && *user && strlen(user) < sizeof(fetch_user))
                snprintf(fetch_user, sizeof(fetch_user), "%s", user);
        const char *strict = getenv("WARREN_FETCH_SECCOMP_STRICT");
        fetch_strict = strict && !strcmp(strict, "1");
        log_info("warren-priv: helpers: warren-egress %s, warren-signer %s, warren-unpack %s, "
                 "warren-fetch %s (root %s)",
                 egress_path[0] ? egress_path : "(none)", signer_path[0] ? signer_path : "(none)",
                 unpack_path[0] ? unpack_path : "(none)", fetch_path[0] ? fetch_path : "(none)",
                 fetch_root);
}

/* fd is an AF_UNIX socket of type (listening when listening). */
static bool sock_is(int fd, int domain, int type, bool listening) {
        int v = 0;
        socklen_t l = sizeof(v);
        if (getsockopt(fd, SOL_SOCKET, SO_TYPE, &v, &l) < 0 || v != type)
                return false;
        l = sizeof(v);
        if (getsockopt(fd, SOL_SOCKET, SO_DOMAIN, &v, &l) < 0 || v != domain)
                return false;
        if (listening) {
                l = sizeof(v);
                if (getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &v, &l) < 0 || !v)
                        return false;
        }
        return true;
}

static bool inet_sock(int fd, int type, bool listening) {
        return sock_is(fd, AF_INET, type, listening) || sock_is(fd, AF_INET6, type, listening);
}

static bool file_is(int fd, mode_t fmt) {
        struct stat st;
        return fstat(fd, &st) == 0 && (st.st_mode & S_IFMT) == fmt;
}

struct reap_arg {
        pid_t pid;
        int watch; /* -1, or a dup of the helper's end of its socket (warren-fetch) */
        char name[32];
};

/* Until pid exits: when warrend's end of the watched socket closes (or
 * is shut down), the helper is killed. A dropped warrend cannot signal
 * warren-fetch (another uid): closing its end is how it ends one, and a
 * helper that does not exit at EOF (a compromised one) is killed here. */
static void watch_peer(struct reap_arg *a) {
        int pidfd = (int) syscall(SYS_pidfd_open, a->pid, 0);
        struct pollfd p[2] = {{.fd = pidfd, .events = POLLIN},
                              {.fd = a->watch, .events = POLLRDHUP}};
        while (pidfd >= 0) {
                int n = poll(p, 2, -1);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0 || p[0].revents)
                        break;
                if (p[1].revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL)) {
                        (void) syscall(SYS_pidfd_send_signal, pidfd, SIGKILL, NULL, 0);
                        break;
                }
        }
        if (pidfd >= 0)
                close(pidfd);
        close(a->watch);
}

static void *reap(void *p) {
        struct reap_arg *a = p;
        if (a->watch >= 0)
                watch_peer(a);
        siginfo_t si;
        memset(&si, 0, sizeof(si));
        while (waitid(P_PID, (id_t) a->pid, &si, WEXITED) < 0 && errno == EINTR)
                ;
        log_info("warren-priv: %s (pid %d) %s %d", a->name, (int) a->pid,
                 si.si_code == CLD_EXITED ? "exited with status" : "killed by signal",
                 si.si_status);
        free(a);
        return NULL;
}

/* Start path with argv and env (NULL: warren-priv's), the child's fds:
 * in[i] becomes fd first + i (an unpack: in[0] is its stdin, first 3
 * for the rest); closes nothing of in. 0 with *ret. */
static int spawn(const char *name, char *const *argv, char *const *env, const int *in, size_t n,
                 bool stdin_first, bool watch_first, struct priv_helper_started *ret,
                 int *ret_pidfd, struct wr_err *e) {
        int target[PRIV_HELPER_FDS_MAX];
        for (size_t i = 0; i < n; i++)
                target[i] = stdin_first ? (i == 0 ? 0 : (int) (2 + i)) : (int) (3 + i);
        pid_t pid = fork();
        if (pid < 0)
                return err_set(e, -errno, "%s: fork: %m", name);
        if (pid == 0) {
                sigset_t none;
                sigemptyset(&none);
                for (int s = 1; s < NSIG; s++)
                        (void) signal(s, SIG_DFL);
                sigprocmask(SIG_SETMASK, &none, NULL);
                if (chdir("/") < 0) /* as uv_spawn's cwd for warren-unpack */
                        _exit(127);
                /* above every target first, then down into place */
                int tmp[PRIV_HELPER_FDS_MAX];
                for (size_t i = 0; i < n; i++)
                        if ((tmp[i] = fcntl(in[i], F_DUPFD_CLOEXEC, 64)) < 0)
                                _exit(127);
                if (stdin_first && dup2(2, 1) < 0)
                        _exit(127);
                for (size_t i = 0; i < n; i++)
                        if (dup2(tmp[i], target[i]) < 0)
                                _exit(127);
                unsigned first = stdin_first ? (unsigned) (n + 2) : (unsigned) (n + 3);
                if (syscall(SYS_close_range, first, ~0u, 0) < 0)
                        for (int fd = (int) first; fd < 1024; fd++)
                                (void) close(fd);
                if (env)
                        execve(argv[0], argv, env);
                else
                        execv(argv[0], argv);
                _exit(127);
        }
        int pidfd = (int) syscall(SYS_pidfd_open, pid, 0);
        uint64_t st = 0;
        int r = pidfd < 0 ? -errno : rt_proc_start_time(pid, &st);
        struct reap_arg *a = malloc(sizeof(*a));
        pthread_t th;
        pthread_attr_t attr;
        bool reaper = false;
        if (a && pthread_attr_init(&attr) == 0) {
                a->pid = pid;
                a->watch = watch_first ? fcntl(in[0], F_DUPFD_CLOEXEC, 3) : -1;
                snprintf(a->name, sizeof(a->name), "%s", name);
                (void) pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
                reaper = pthread_create(&th, &attr, reap, a) == 0;
                pthread_attr_destroy(&attr);
        }
        if (!reaper) {
                if (a && a->watch >= 0)
                        close(a->watch);
                free(a);
                r = r < 0 ? r : -ENOMEM;
        }
        if (r < 0 || st == 0) {
                (void) kill(pid, SIGKILL);
                if (!reaper)
                        (void) waitpid(pid, NULL, 0);
                if (pidfd >= 0)
                        close(pidfd);
                return err_set(e, r < 0 ? r : -ESRCH, "%s: pidfd or start time of pid %d: %s", name,
                               (int) pid, strerror(r < 0 ? -r : ESRCH));
        }
        ret->pid = pid;
        ret->start_time = st;
        *ret_pidfd = pidfd;
        log_info("warren-priv: started %s (pid %d)", name, (int) pid);
        return 0;
}

static int start_signer(const struct priv_helper_start *h, const int *fds,
                        struct priv_helper_started *ret, int *ret_pidfd, struct wr_err *e) {
        if (!signer_path[0])
                return err_set(e, -ENOENT,
                               "warren-signer not found (WARREN_SIGNER, next to "
                               "warren-priv, /usr/libexec/warren)");
        if (!file_is(fds[0], S_IFREG))
                return err_set(e, -EINVAL, "HELPER_START: the signer's key is not a memfd");
        if (!sock_is(fds[1], AF_UNIX, SOCK_SEQPACKET, false))
                return err_set(e, -EINVAL,
                               "HELPER_START: the signer's socket is not AF_UNIX SOCK_SEQPACKET");
        static const char *const flag[] = {
                [PRIV_SIGNER_SECRETS] = "--secrets-key-fd",
                [PRIV_SIGNER_JWS] = "--jws-key-fd",
                [PRIV_SIGNER_CA] = "--ca-fd",
        };
        const char *argv[] = {signer_path,
                              flag[h->role],
                              "3",
                              "--sock-fd",
                              "4",
                              "--log-level",
                              "info",
                              "--log-format",
                              h->flags & PRIV_HELPER_F_JSON_LOG ? "json" : "text",
                              NULL};
        return spawn("warren-signer", (char *const *) argv, NULL, fds, 2, false, false, ret,
                     ret_pidfd, e);
}

static int start_egress(const struct priv_helper_start *h, const int *fds, size_t n_fds,
                        struct priv_helper_started *ret, int *ret_pidfd, struct wr_err *e) {
        if (!egress_path[0])
                return err_set(e, -ENOENT,
                               "warren-egress not found (WARREN_EGRESS, next to "
                               "warren-priv, /usr/libexec/warren)");
        if (!sock_is(fds[0], AF_UNIX, SOCK_SEQPACKET, false) ||
            !inet_sock(fds[1], SOCK_STREAM, true) || !inet_sock(fds[2], SOCK_DGRAM, false) ||
            !inet_sock(fds[3], SOCK_STREAM, true))
                return err_set(e, -EINVAL,
                               "HELPER_START: warren-egress's fds are not a SOCK_SEQPACKET ctl "
                               "socket, a listening TCP socket, a UDP and a listening TCP socket");
        size_t k = 4;
        int signer_fd = -1, ca_fd = -1;
        if (h->flags & PRIV_HELPER_F_SIGNER) {
                if (!sock_is(fds[k], AF_UNIX, SOCK_SEQPACKET, false))
                        return err_set(e, -EINVAL,
                                       "HELPER_START: the signer's socket is not "
                                       "AF_UNIX SOCK_SEQPACKET");
                signer_fd = (int) (3 + k++);
        }
        if (h->flags & PRIV_HELPER_F_UPSTREAM_CA) {
                if (!file_is(fds[k], S_IFREG))
                        return err_set(e, -EINVAL,
                                       "HELPER_START: the upstream CA bundle is not a file");
                ca_fd = (int) (3 + k++);
        }
        if (k != n_fds) /* the decoder counted them */
                return err_set(e, -EPROTO, "HELPER_START: %zu fds", n_fds);
        char upstream[INET6_ADDRSTRLEN + 10], a[INET6_ADDRSTRLEN];
        if (!inet_ntop(h->upstream_family == 4 ? AF_INET : AF_INET6, h->upstream_addr, a,
                       sizeof(a)))
                return err_set(e, -EINVAL, "HELPER_START: upstream address");
        if (h->upstream_family == 4)
                snprintf(upstream, sizeof(upstream), "%s:%u", a, h->upstream_port);
        else
                snprintf(upstream, sizeof(upstream), "[%s]:%u", a, h->upstream_port);
        static _Thread_local char addrs[DENY_ADDRS_MAX][INET6_ADDRSTRLEN];
        size_t na = host_addrs_list(addrs, DENY_ADDRS_MAX, PRIV_LINK_PREFIX);
        char ports[PRIV_HELPER_DENY_PORTS_MAX][8], sfd[16], cfd[40];
        const char *argv[ARGS_MAX];
        size_t n = 0;
        argv[n++] = egress_path;
        argv[n++] = "--ctl-fd";
        argv[n++] = "3";
        argv[n++] = "--listen-fd";
        argv[n++] = "4";
        argv[n++] = "--dns-fd";
        argv[n++] = "5";
        argv[n++] = "--dns-fd";
        argv[n++] = "6";
        argv[n++] = "--upstream-dns";
        argv[n++] = upstream;
        for (size_t i = 0; i < na; i++) {
                argv[n++] = "--deny-addr";
                argv[n++] = addrs[i];
        }
        for (uint32_t i = 0; i < h->n_deny_ports; i++) {
                snprintf(ports[i], sizeof(ports[i]), "%u", h->deny_ports[i]);
                argv[n++] = "--deny-port";
                argv[n++] = ports[i];
        }
        argv[n++] = "--log-level";
        argv[n++] = "info";
        if (signer_fd >= 0) {
                snprintf(sfd, sizeof(sfd), "%d", signer_fd);
                argv[n++] = "--signer-fd";
                argv[n++] = sfd;
                if (ca_fd >= 0) {
                        /* read before it confines itself, as a path was */
                        snprintf(cfd, sizeof(cfd), "/proc/self/fd/%d", ca_fd);
                        argv[n++] = "--upstream-ca";
                        argv[n++] = cfd;
                }
        }
        argv[n] = NULL;
        return spawn("warren-egress", (char *const *) argv, NULL, fds, n_fds, false, false, ret,
                     ret_pidfd, e);
}

/* A memfd sealed against writes and growth (what fetch.c's config_memfd
 * makes): warren-fetch truncates it once read, so never a file of the
 * host's. */
static bool sealed_memfd(int fd) {
        int seals = fcntl(fd, F_GET_SEALS);
        return file_is(fd, S_IFREG) && seals >= 0 &&
               (seals & (F_SEAL_WRITE | F_SEAL_GROW)) == (F_SEAL_WRITE | F_SEAL_GROW);
}

static int start_fetch(const struct priv_helper_start *h, const int *fds, size_t n_fds,
                       struct priv_helper_started *ret, int *ret_pidfd, struct wr_err *e) {
        if (!fetch_path[0])
                return err_set(e, -ENOENT,
                               "warren-fetch not found (WARREN_FETCH_HELPER, next to "
                               "warren-priv, /usr/libexec/warren)");
        struct sockaddr_un peer;
        socklen_t pl = sizeof(peer);
        if (!sock_is(fds[0], AF_UNIX, SOCK_SEQPACKET, false) ||
            getpeername(fds[0], (struct sockaddr *) &peer, &pl) < 0)
                return err_set(e, -EINVAL,
                               "HELPER_START: warren-fetch's socket is not a connected AF_UNIX "
                               "SOCK_SEQPACKET socket");
        for (size_t i = 1; i < n_fds; i++)
                if (!sealed_memfd(fds[i]))
                        return err_set(e, -EINVAL,
                                       "HELPER_START: warren-fetch's config fd %zu is not a "
                                       "sealed memfd",
                                       i);
        pthread_mutex_lock(&fetch_root_lock);
        int r = img_fetch_root_prepare(fetch_root, e);
        pthread_mutex_unlock(&fetch_root_lock);
        if (r < 0)
                return err_prefix(e, r, "warren-fetch's root");
        const char *argv[ARGS_MAX];
        size_t n = 0, k = 1;
        static const char *const fdname[] = {"3", "4", "5"};
        argv[n++] = fetch_path;
        argv[n++] = "--sock-fd";
        argv[n++] = "3";
        /* the configs are named by warrend's options (no path from warrend) */
        if (h->flags & PRIV_HELPER_F_REGISTRY_CONFIG) {
                argv[n++] = "--registry-config-fd";
                argv[n++] = fdname[k++];
        }
        if (h->flags & PRIV_HELPER_F_DOCKER_CONFIG) {
                argv[n++] = "--docker-config-fd";
                argv[n++] = fdname[k++];
        }
        if (k != n_fds) /* the decoder counted them */
                return err_set(e, -EPROTO, "HELPER_START: %zu fds", n_fds);
        if (h->flags & PRIV_HELPER_F_LOOPBACK_ONLY)
                argv[n++] = "--loopback-only";
        if (fetch_user[0]) {
                argv[n++] = "--uid";
                argv[n++] = fetch_user;
        }
        argv[n++] = "--root";
        argv[n++] = fetch_root;
        if (fetch_strict)
                argv[n++] = "--seccomp-strict";
        argv[n] = NULL;
        char *const env[] = {"PATH=/usr/sbin:/usr/bin:/sbin:/bin", NULL};
        /* killed when warrend's end of its socket closes (watch_peer) */
        return spawn("warren-fetch", (char *const *) argv, env, fds, n_fds, false, true, ret,
                     ret_pidfd, e);
}

static int start_unpack(const struct priv_unpack_start *u, const int *fds,
                        struct priv_helper_started *ret, int *ret_pidfd, struct wr_err *e) {
        if (!unpack_path[0])
                return err_set(e, -ENOENT,
                               "warren-unpack not found (WARREN_UNPACK_HELPER, next "
                               "to warren-priv, /usr/libexec/warren)");
        if (!file_is(fds[1], S_IFIFO))
                return err_set(e, -EINVAL, "UNPACK_START: the report fd is not a pipe");
        int acc = fcntl(fds[0], F_GETFL);
        if (acc < 0 || (acc & O_ACCMODE) == O_WRONLY)
                return err_set(e, -EINVAL, "UNPACK_START: the tar stream is not readable");
        int dir = priv_open_beneath(u->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (dir < 0)
                return err_set(e, dir, "UNPACK_START: %s: %s", u->dir, strerror(-dir));
        int in[3] = {fds[0], dir, fds[1]};
        char *const argv[] = {unpack_path, NULL};
        char *const env[] = {"PATH=/usr/sbin:/usr/bin:/sbin:/bin", NULL};
        int r = spawn("warren-unpack", argv, env, in, 3, true, false, ret, ret_pidfd, e);
        close(dir);
        return r;
}

int priv_helpers_run(const struct priv_req *req, int *fds, size_t n_fds, struct priv_result *res,
                     struct priv_helper_started *started, int *ret_pidfd) {
        struct wr_err e = {0};
        int r;
        *ret_pidfd = -1;
        if (req->hdr.type == PRIV_UNPACK_START)
                r = start_unpack(&req->unpack, fds, started, ret_pidfd, &e);
        else if (req->helper.kind == PRIV_HELPER_SIGNER)
                r = start_signer(&req->helper, fds, started, ret_pidfd, &e);
        else if (req->helper.kind == PRIV_HELPER_FETCH)
                r = start_fetch(&req->helper, fds, n_fds, started, ret_pidfd, &e);
        else
                r = start_egress(&req->helper, fds, n_fds, started, ret_pidfd, &e);
        priv_close_fds(fds, n_fds);
        if (r < 0) {
                res->err = -r;
                snprintf(res->msg, sizeof(res->msg), "%s", e.msg);
                return 0;
        }
        return 1;
}
