/* SPDX-License-Identifier: Apache-2.0 */
/* warren-init: PID 1 of every Warren sandbox.
 *
 * One poll loop over a signalfd (SIGCHLD and the signals the runtime sends),
 * the listening control socket (fd 3, AF_UNIX SOCK_SEQPACKET, bound on the
 * host) and the accepted daemon connections. It reaps every zombie, spawns
 * processes on request, hands PTY masters out, forwards signals and reports
 * exits. The protocol is in ctl-proto.h; docs/init.md describes behaviour.
 *
 * Statically linked, no dependencies beyond libc, no threads. Works under
 * the sandbox's seccomp allowlist: plain fork() (clone without CLONE_NEW*),
 * no clone3, no mount, no namespaces.
 *
 * Also runs as a normal process (not PID 1) for tests: it then becomes a
 * child subreaper and "every process" means "every descendant". */

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>
#include <grp.h>
#include <linux/openat2.h>

#include "basic/macro.h"
#include "init/ctl-proto.h"
#include "init/file-ops.h"
#include "init/init-proto.h"

#define LISTEN_FD 3
#define MAX_CONNS 16
#define MAX_OUTQ 16384   /* queued messages per connection before it is dropped */
#define MAX_PENDING 4096 /* EXITED events kept while no connection is live */
#define BATCH 64         /* requests handled per connection per loop turn */
#define DEFAULT_PATH "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

#ifndef TIOCGPTPEER
#define TIOCGPTPEER _IO('T', 0x41)
#endif

#define MSG_FDS 4 /* most fds one reply carries (TAKEN) */

struct msg {
        struct msg *next;
        int fds[MSG_FDS]; /* fds to pass with SCM_RIGHTS, owned by the queue */
        int nfds;
        uint32_t len;
        unsigned char data[];
};

struct conn {
        int fd;          /* -1: slot free */
        uint64_t serial; /* accept order; owners refer to connections by serial */
        bool dead;
        bool talked; /* sent a request other than FILE_OPEN */
        bool files;  /* its first request was FILE_OPEN, and only those since */
        struct msg *head, **tail;
        unsigned qlen;
};

struct proc {
        uint64_t id;
        pid_t pid;
        uint64_t owner; /* serial of the connection that spawned it */
        int master;     /* PTY master kept for RESIZE (and a HOLD), -1 if none */
        uint32_t flags;
        /* CTL_SPAWN_HOLD: the daemon's ends (stdin write, stdout read,
         * stderr read; -1 once closed), never read or written here; the
         * entry outlives the process until RELEASE ALL */
        int held[CTL_HOLD_FDS];
        bool exited; /* reaped (a held entry): status is valid */
        int status;
};

struct pending {
        uint64_t id;
        struct ctl_exited ev;
};

static const char *sandbox_id = "?";
static bool is_pid1;
static bool terminating;
static int listen_fd = -1, sig_fd = -1;
static struct conn conns[MAX_CONNS];
static uint64_t next_serial = 1;
static struct proc *procs;
static size_t nprocs, procs_cap;
static struct pending pending[MAX_PENDING];
static size_t pending_head, npending;
static unsigned char rbuf[CTL_MSG_MAX + 1];
/* fds init may spend on holds: RLIMIT_NOFILE minus headroom for requests
 * in flight (a SPAWN brings up to 6, a queued TAKEN carries copies) */
static long hold_fd_budget;
#define HOLD_FD_HEADROOM 128

static void say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void say(const char *fmt, ...) {
        va_list ap;
        char line[512];

        va_start(ap, fmt);
        vsnprintf(line, sizeof(line), fmt, ap);
        va_end(ap);
        dprintf(STDERR_FILENO, "warren-init[%s]: %s\n", sandbox_id, line);
}

static void close_fds(int *fds, int n) {
        for (int i = 0; i < n; i++)
                if (fds[i] >= 0) {
                        close(fds[i]);
                        fds[i] = -1;
                }
}

/* ---- processes ---- */

static struct proc *proc_by_id(uint64_t id) {
        for (size_t i = 0; i < nprocs; i++)
                if (procs[i].id == id)
                        return &procs[i];
        return NULL;
}

static struct proc *proc_by_pid(pid_t pid) {
        for (size_t i = 0; i < nprocs; i++)
                if (procs[i].pid == pid && !procs[i].exited)
                        return &procs[i];
        return NULL;
}

static int proc_add(const struct proc *p) {
        if (nprocs == procs_cap) {
                size_t cap = procs_cap ? procs_cap * 2 : 64;
                struct proc *n = realloc(procs, cap * sizeof(*n));
                if (!n)
                        return -ENOMEM;
                procs = n;
                procs_cap = cap;
        }
        procs[nprocs++] = *p;
        return 0;
}

static void proc_close_held(struct proc *p) {
        for (int i = 0; i < CTL_HOLD_FDS; i++)
                if (p->held[i] >= 0) {
                        close(p->held[i]);
                        p->held[i] = -1;
                }
}

static void proc_remove(struct proc *p) {
        if (p->master >= 0)
                close(p->master);
        proc_close_held(p);
        *p = procs[--nprocs];
}

/* fds held for daemons right now. */
static long held_fds(void) {
        long n = 0;
        for (size_t i = 0; i < nprocs; i++) {
                if (!(procs[i].flags & CTL_SPAWN_HOLD))
                        continue;
                for (int k = 0; k < CTL_HOLD_FDS; k++)
                        n += procs[i].held[k] >= 0;
                n += procs[i].master >= 0;
        }
        return n;
}

/* Processes still running (held entries of exited ones not counted). */
static size_t procs_running(void) {
        size_t n = 0;
        for (size_t i = 0; i < nprocs; i++)
                n += !procs[i].exited;
        return n;
}

/* ---- connections and output ---- */

static struct conn *conn_by_serial(uint64_t serial) {
        for (int i = 0; i < MAX_CONNS; i++)
                if (conns[i].fd >= 0 && !conns[i].dead && conns[i].serial == serial)
                        return &conns[i];
        return NULL;
}

/* Where an event goes whose spawner is gone: the most recently accepted
 * live connection that made requests, else the most recently accepted one
 * that made none yet; never a files connection (one that only ever sent
 * FILE_OPEN: it reads nothing else). */
static struct conn *conn_latest(void) {
        struct conn *best = NULL;
        for (int i = 0; i < MAX_CONNS; i++) {
                struct conn *c = &conns[i];
                if (c->fd < 0 || c->dead || c->files)
                        continue;
                if (!best || c->talked > best->talked ||
                    (c->talked == best->talked && c->serial > best->serial))
                        best = c;
        }
        return best;
}

static int conn_count(void) {
        int n = 0;
        for (int i = 0; i < MAX_CONNS; i++)
                n += conns[i].fd >= 0 && !conns[i].dead;
        return n;
}

/* Send one datagram now. Returns 0, -EAGAIN, or another negative errno. */
static int send_raw(int fd, const void *buf, size_t len, const int *pass_fds, int npass) {
        struct iovec iov = {.iov_base = (void *) buf, .iov_len = len};
        union {
                struct cmsghdr h;
                char b[CMSG_SPACE(sizeof(int) * MSG_FDS)];
        } c;
        struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1};

        if (npass > 0) {
                memset(&c, 0, sizeof(c));
                mh.msg_control = c.b;
                mh.msg_controllen = CMSG_SPACE(sizeof(int) * (size_t) npass);
                struct cmsghdr *cm = CMSG_FIRSTHDR(&mh);
                cm->cmsg_level = SOL_SOCKET;
                cm->cmsg_type = SCM_RIGHTS;
                cm->cmsg_len = CMSG_LEN(sizeof(int) * (size_t) npass);
                memcpy(CMSG_DATA(cm), pass_fds, sizeof(int) * (size_t) npass);
        }
        ssize_t r = RETRY_EINTR(sendmsg(fd, &mh, MSG_NOSIGNAL | MSG_DONTWAIT));
        if (r < 0)
                return errno == EWOULDBLOCK ? -EAGAIN : -errno;
        return 0;
}

static void pending_push(uint64_t id, const struct ctl_exited *ev) {
        if (npending == MAX_PENDING) { /* drop the oldest */
                pending_head = (pending_head + 1) % MAX_PENDING;
                npending--;
        }
        pending[(pending_head + npending) % MAX_PENDING] = (struct pending){id, *ev};
        npending++;
}

/* Queue (or send at once) a message to c. pass_fds[0..npass) (npass <=
 * MSG_FDS) are borrowed: the queue keeps its own duplicates. Never fails
 * the caller: a connection that cannot take the message is marked dead. */
static void conn_send_fds(struct conn *c, uint32_t type, uint64_t id, const void *payload,
                          uint32_t plen, const int *pass_fds, int npass) {
        unsigned char buf[sizeof(struct ctl_hdr) + 64];
        unsigned char *b = buf;
        size_t len = sizeof(struct ctl_hdr) + plen;
        struct ctl_hdr h = {.magic = CTL_MAGIC, .type = type, .len = plen, .id = id};

        if (c->dead)
                goto requeue;
        if (len > sizeof(buf)) {
                b = malloc(len);
                if (!b) {
                        c->dead = true;
                        goto requeue;
                }
        }
        memcpy(b, &h, sizeof(h));
        if (plen)
                memcpy(b + sizeof(h), payload, plen);

        if (!c->head) {
                int r = send_raw(c->fd, b, len, pass_fds, npass);
                if (r == 0)
                        goto out;
                if (r != -EAGAIN) {
                        c->dead = true;
                        if (b != buf)
                                free(b);
                        goto requeue;
                }
        }
        if (c->qlen >= MAX_OUTQ) {
                say("connection %llu does not read; dropping it", (unsigned long long) c->serial);
                c->dead = true;
                if (b != buf)
                        free(b);
                goto requeue;
        }
        struct msg *m = malloc(sizeof(*m) + len);
        if (!m) {
                c->dead = true;
                if (b != buf)
                        free(b);
                goto requeue;
        }
        m->next = NULL;
        m->len = (uint32_t) len;
        m->nfds = 0;
        for (int i = 0; i < npass; i++) {
                int d = fcntl(pass_fds[i], F_DUPFD_CLOEXEC, 3);
                if (d < 0) {
                        /* a message without its fds would be a lie */
                        for (int k = 0; k < m->nfds; k++)
                                close(m->fds[k]);
                        free(m);
                        c->dead = true;
                        if (b != buf)
                                free(b);
                        goto requeue;
                }
                m->fds[m->nfds++] = d;
        }
        memcpy(m->data, b, len);
        *c->tail = m;
        c->tail = &m->next;
        c->qlen++;
out:
        if (b != buf)
                free(b);
        return;
requeue:
        /* An exit event must not get lost with the connection. */
        if (type == CTL_EXITED && plen == sizeof(struct ctl_exited))
                pending_push(id, payload);
}

static void conn_send(struct conn *c, uint32_t type, uint64_t id, const void *payload,
                      uint32_t plen, int pass_fd) {
        conn_send_fds(c, type, id, payload, plen, &pass_fd, pass_fd >= 0 ? 1 : 0);
}

static void msg_free(struct msg *m) {
        for (int i = 0; i < m->nfds; i++)
                close(m->fds[i]);
        free(m);
}

/* Flush c's queue as far as the socket takes it. */
static void conn_flush(struct conn *c) {
        while (c->head && !c->dead) {
                struct msg *m = c->head;
                int r = send_raw(c->fd, m->data, m->len, m->fds, m->nfds);
                if (r == -EAGAIN)
                        return;
                if (r < 0) {
                        c->dead = true;
                        return;
                }
                c->head = m->next;
                if (!c->head)
                        c->tail = &c->head;
                c->qlen--;
                msg_free(m);
        }
}

static void conn_close(struct conn *c) {
        struct msg *m = c->head;
        while (m) {
                struct msg *next = m->next;
                struct ctl_hdr h;
                memcpy(&h, m->data, sizeof(h));
                if (h.type == CTL_EXITED && h.len == sizeof(struct ctl_exited)) {
                        struct ctl_exited ev;
                        memcpy(&ev, m->data + sizeof(h), sizeof(ev));
                        pending_push(h.id, &ev);
                }
                msg_free(m);
                m = next;
        }
        close(c->fd);
        *c = (struct conn){.fd = -1};
}

static void send_exited(const struct proc *p, int status) {
        struct ctl_exited ev = {.pid = p->pid, .status = status};
        struct conn *c = conn_by_serial(p->owner);

        if (!c)
                c = conn_latest();
        if (c)
                conn_send(c, CTL_EXITED, p->id, &ev, sizeof(ev), -1);
        else
                pending_push(p->id, &ev);
}

static void send_result(struct conn *c, uint64_t id, int err) {
        struct ctl_result r = {.err = err < 0 ? -err : err};
        conn_send(c, CTL_RESULT, id, &r, sizeof(r), -1);
}

static void send_spawned(struct conn *c, uint64_t id, pid_t pid, int err, int master) {
        struct ctl_spawned s = {.pid = pid, .err = err < 0 ? -err : err};
        conn_send(c, CTL_SPAWNED, id, &s, sizeof(s), master);
}

/* ---- killing ---- */

static pid_t read_ppid(pid_t pid) {
        char path[64], buf[512];
        snprintf(path, sizeof(path), "/proc/%d/stat", (int) pid);
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
                return -1;
        ssize_t n = read(fd, buf, sizeof(buf) - 1);
        close(fd);
        if (n <= 0)
                return -1;
        buf[n] = '\0';
        char *rp = strrchr(buf, ')'); /* comm may contain anything but ends at the last ')' */
        int ppid;
        if (!rp || sscanf(rp + 1, " %*c %d", &ppid) != 1)
                return -1;
        return ppid;
}

/* Signal every process of the sandbox except init. As PID 1 that is
 * kill(-1); otherwise (tests) every descendant found through /proc. */
static int kill_all(int signo) {
        if (is_pid1) {
                if (kill(-1, signo) < 0 && errno != ESRCH)
                        return -errno;
                return 0;
        }

        pid_t *set = NULL;
        size_t n = 0, cap = 0;
        bool grew = true;
        pid_t self = getpid();

        /* Repeat until no new descendant shows up (children listed before parents). */
        while (grew) {
                grew = false;
                DIR *d = opendir("/proc");
                if (!d)
                        break;
                struct dirent *de;
                while ((de = readdir(d))) {
                        char *end;
                        long v = strtol(de->d_name, &end, 10);
                        if (*end || v <= 0)
                                continue;
                        pid_t pid = (pid_t) v, pp = read_ppid(pid);
                        bool known = false, parent_in = pp == self;
                        for (size_t i = 0; i < n; i++) {
                                known |= set[i] == pid;
                                parent_in |= set[i] == pp;
                        }
                        if (known || !parent_in)
                                continue;
                        if (n == cap) {
                                cap = cap ? cap * 2 : 64;
                                pid_t *ns = realloc(set, cap * sizeof(*ns));
                                if (!ns)
                                        break;
                                set = ns;
                        }
                        set[n++] = pid;
                        grew = true;
                }
                closedir(d);
        }
        for (size_t i = 0; i < n; i++)
                kill(set[i], signo);
        free(set);
        return 0;
}

/* ---- spawning ---- */

static const char *env_get(const char *const *envp, const char *name) {
        size_t l = strlen(name);
        for (; *envp; envp++)
                if (strncmp(*envp, name, l) == 0 && (*envp)[l] == '=')
                        return *envp + l + 1;
        return NULL;
}

static void exec_sh(const char *path, const char *const *argv, const char *const *envp) {
        size_t argc = 0;
        while (argv[argc])
                argc++;
        const char **nargv = calloc(argc + 2, sizeof(char *));
        if (!nargv)
                return;
        nargv[0] = "/bin/sh";
        nargv[1] = path;
        for (size_t i = 1; i < argc; i++)
                nargv[i + 1] = argv[i];
        execve("/bin/sh", (char *const *) nargv, (char *const *) envp);
        errno = ENOEXEC;
}

/* execvpe with PATH taken from envp (default when absent). Returns only on
 * failure, with errno set like execvp(3). */
static void exec_search(const char *const *argv, const char *const *envp) {
        const char *file = argv[0];

        if (strchr(file, '/')) {
                execve(file, (char *const *) argv, (char *const *) envp);
                if (errno == ENOEXEC)
                        exec_sh(file, argv, envp);
                return;
        }

        const char *path = env_get(envp, "PATH");
        if (!path)
                path = DEFAULT_PATH;
        size_t flen = strlen(file);
        bool eacces = false;
        char buf[PATH_MAX];

        for (const char *p = path;; p++) {
                const char *colon = strchrnul(p, ':');
                size_t dlen = (size_t) (colon - p);
                if (dlen + 1 + flen + 1 <= sizeof(buf)) {
                        if (dlen == 0) {
                                memcpy(buf, file, flen + 1);
                        } else {
                                memcpy(buf, p, dlen);
                                buf[dlen] = '/';
                                memcpy(buf + dlen + 1, file, flen + 1);
                        }
                        execve(buf, (char *const *) argv, (char *const *) envp);
                        switch (errno) {
                        case ENOEXEC:
                                exec_sh(buf, argv, envp);
                                return;
                        case EACCES:
                                eacces = true;
                                break;
                        case ENOENT:
                        case ENOTDIR:
                        case ESTALE:
                        case ENODEV:
                        case ETIMEDOUT:
                        case ELOOP:
                        case ENAMETOOLONG:
                                break;
                        default:
                                return;
                        }
                }
                if (*colon == '\0')
                        break;
                p = colon;
        }
        errno = eacces ? EACCES : ENOENT;
}

static void close_from(int lo, int except) {
        if (except >= lo) {
                if (except > lo && syscall(SYS_close_range, lo, except - 1, 0) < 0)
                        goto slow;
                if (syscall(SYS_close_range, except + 1, ~0U, 0) < 0)
                        goto slow;
                return;
        }
        if (syscall(SYS_close_range, lo, ~0U, 0) == 0)
                return;
slow:;
        long max = sysconf(_SC_OPEN_MAX);
        if (max < 0 || max > 1 << 20)
                max = 1 << 20;
        for (int fd = lo; fd < max; fd++)
                if (fd != except)
                        close(fd);
}

/* In the child between fork and exec. Never returns: execs or reports errno
 * on errfd and _exit(127). */
static void __attribute__((noreturn))
child_run(const struct init_spawn *s, const int stdio[3], int slave, int errfd) {
        sigset_t all;
        int err;

        sigfillset(&all);
        sigprocmask(SIG_UNBLOCK, &all, NULL);
        for (int sig = 1; sig < NSIG; sig++)
                if (sig != SIGKILL && sig != SIGSTOP)
                        signal(sig, SIG_DFL);

        if (s->flags & (CTL_SPAWN_SETSID | CTL_SPAWN_PTY)) {
                if (setsid() < 0)
                        goto fail;
        } else if (setpgid(0, 0) < 0)
                goto fail;

        if (slave >= 0) {
                if (ioctl(slave, TIOCSCTTY, 0) < 0)
                        goto fail;
                for (int i = 0; i < 3; i++)
                        if (dup2(slave, i) < 0)
                                goto fail;
        } else {
                /* stdio fds are >= 3 (init keeps 0..2 open), so no clobbering. */
                for (int i = 0; i < 3; i++)
                        if (dup2(stdio[i], i) < 0)
                                goto fail;
        }

        if (s->gid != getegid() || s->uid != geteuid()) {
                if (setgroups(0, NULL) < 0 && errno != EPERM)
                        goto fail;
                if (setresgid(s->gid, s->gid, s->gid) < 0)
                        goto fail;
                if (setresuid(s->uid, s->uid, s->uid) < 0)
                        goto fail;
        }

        if (chdir("/") < 0 || chdir(s->cwd) < 0)
                goto fail;

        close_from(3, errfd);
        exec_search(s->argv, s->envp);
fail:
        err = errno ? errno : EIO;
        (void) !write(errfd, &err, sizeof(err));
        _exit(127);
}

static int open_pty(const struct init_spawn *s, int *ret_master, int *ret_slave) {
        int master = open("/dev/ptmx", O_RDWR | O_NOCTTY | O_CLOEXEC);
        if (master < 0)
                return -errno;
        int unlock = 0;
        if (ioctl(master, TIOCSPTLCK, &unlock) < 0)
                goto fail;
        if (s->cols && s->rows) {
                struct winsize ws = {.ws_row = s->rows, .ws_col = s->cols};
                if (ioctl(master, TIOCSWINSZ, &ws) < 0)
                        goto fail;
        }
        int slave = ioctl(master, TIOCGPTPEER, O_RDWR | O_NOCTTY | O_CLOEXEC);
        if (slave < 0) {
                /* Pre-4.13 kernels: open by name. */
                int n;
                char path[64];
                if (ioctl(master, TIOCGPTN, &n) < 0)
                        goto fail;
                snprintf(path, sizeof(path), "/dev/pts/%d", n);
                slave = open(path, O_RDWR | O_NOCTTY | O_CLOEXEC);
                if (slave < 0)
                        goto fail;
        }
        *ret_master = master;
        *ret_slave = slave;
        return 0;
fail:;
        int r = -errno;
        close(master);
        return r;
}

/* Start the process of a SPAWN request and answer SPAWNED. Consumes fds. */
static void do_spawn(struct conn *c, uint64_t id, const struct init_spawn *s, int *fds, int nfds) {
        int master = -1, slave = -1, errp[2] = {-1, -1}, r, err = 0;
        int held[CTL_HOLD_FDS] = {-1, -1, -1};
        bool pty = s->flags & CTL_SPAWN_PTY, hold = s->flags & CTL_SPAWN_HOLD;
        pid_t pid;

        /* A HOLD spawn with pipes: the daemon's ends come after the child's. */
        if (hold && !pty && nfds == CTL_STDIO_FDS + CTL_HOLD_FDS) {
                for (int i = 0; i < CTL_HOLD_FDS; i++)
                        held[i] = fds[CTL_STDIO_FDS + i];
                nfds = CTL_STDIO_FDS;
        }

        if (terminating) {
                r = -ESHUTDOWN;
                goto fail;
        }
        if (proc_by_id(id)) {
                r = -EEXIST;
                goto fail;
        }
        if (nfds != (pty ? 0 : CTL_STDIO_FDS) || (hold && !pty && held[0] < 0)) {
                r = -EBADF;
                goto fail;
        }
        if (pty && (r = open_pty(s, &master, &slave)) < 0)
                goto fail;
        /* Out of fds to hold with: the process runs unheld (it will not
         * outlive its daemon) rather than not at all. */
        uint32_t flags = s->flags;
        if (hold && held_fds() + CTL_HOLD_FDS > hold_fd_budget) {
                close_fds(held, CTL_HOLD_FDS);
                flags &= ~(uint32_t) CTL_SPAWN_HOLD;
        }
        /* The terminal belongs to the user who runs on it (like login(1)). */
        if (pty && s->uid != geteuid())
                (void) !fchown(slave, s->uid, (gid_t) -1);
        if (pipe2(errp, O_CLOEXEC) < 0) {
                r = -errno;
                goto fail;
        }
        pid = fork();
        if (pid < 0) {
                r = -errno;
                goto fail;
        }
        if (pid == 0)
                child_run(s, fds, slave, errp[1]);

        close(errp[1]);
        errp[1] = -1;
        if (slave >= 0)
                close(slave);
        slave = -1;
        close_fds(fds, nfds);

        ssize_t n = RETRY_EINTR(read(errp[0], &err, sizeof(err)));
        close(errp[0]);
        errp[0] = -1;
        if (n == sizeof(err)) {
                /* The child failed before exec and exits at once. */
                RETRY_EINTR(waitpid(pid, NULL, 0));
                r = -(err > 0 ? err : EIO);
                goto fail;
        }

        struct proc p = {.id = id,
                         .pid = pid,
                         .owner = c->serial,
                         .master = master,
                         .flags = flags,
                         .held = {held[0], held[1], held[2]}};
        if (proc_add(&p) < 0) {
                /* Cannot track it: better not to run it at all. */
                kill(pid, SIGKILL);
                RETRY_EINTR(waitpid(pid, NULL, 0));
                r = -ENOMEM;
                goto fail;
        }
        send_spawned(c, id, pid, 0, master);
        return;

fail:
        close_fds(held, CTL_HOLD_FDS);
        close_fds(fds, nfds);
        close_fds(errp, 2);
        if (slave >= 0)
                close(slave);
        if (master >= 0)
                close(master);
        send_spawned(c, id, 0, r, -1);
}

/* ---- requests ---- */

static int do_signal(const struct ctl_signal *s) {
        pid_t pid = s->pid;

        if (pid == 0) {
                struct proc *p = proc_by_id(s->target_id);
                if (!p || p->exited)
                        return -ESRCH;
                pid = p->pid;
        } else if (!is_pid1 && !proc_by_pid(pid)) {
                return -ESRCH; /* outside a pid namespace, only our own children */
        }
        if (s->flags & CTL_SIGNAL_GROUP) {
                pid_t pg = getpgid(pid);
                if (pg < 0)
                        return -errno;
                if (pg <= 1 || pg == getpgrp())
                        return -EPERM;
                pid = -pg;
        }
        if (kill(pid, s->signo) < 0)
                return -errno;
        return 0;
}

static int do_resize(uint64_t id, const struct ctl_resize *rz) {
        struct proc *p = proc_by_id(id);
        if (!p || p->exited)
                return -ESRCH;
        if (p->master < 0)
                return -ENOTTY;
        struct winsize ws = {.ws_row = rz->rows, .ws_col = rz->cols};
        if (ioctl(p->master, TIOCSWINSZ, &ws) < 0)
                return -errno;
        return 0;
}

static void do_list(struct conn *c, uint64_t id) {
        size_t n = 0;
        struct ctl_list_entry *e = calloc(MIN(nprocs, CTL_LIST_MAX) + 1, sizeof(*e));
        if (!e) {
                send_result(c, id, -ENOMEM);
                return;
        }
        for (size_t i = 0; i < nprocs && n < CTL_LIST_MAX; i++)
                if (!procs[i].exited)
                        e[n++] = (struct ctl_list_entry){
                                .id = procs[i].id, .pid = procs[i].pid, .flags = procs[i].flags};
        conn_send(c, CTL_LIST_REPLY, id, e, (uint32_t) (n * sizeof(*e)), -1);
        free(e);
}

static void do_holds(struct conn *c, uint64_t id) {
        size_t n = 0;
        struct ctl_hold *e = calloc(MIN(nprocs, CTL_HOLDS_MAX) + 1, sizeof(*e));
        if (!e) {
                send_result(c, id, -ENOMEM);
                return;
        }
        for (size_t i = 0; i < nprocs && n < CTL_HOLDS_MAX; i++) {
                const struct proc *p = &procs[i];
                if (!(p->flags & CTL_SPAWN_HOLD))
                        continue;
                e[n++] = (struct ctl_hold){
                        .id = p->id,
                        .pid = p->pid,
                        .status = p->exited ? p->status : 0,
                        .flags = p->flags,
                        .state = (p->exited ? CTL_HOLD_EXITED : 0) |
                                 (p->held[0] >= 0 ? CTL_HOLD_STDIN : 0),
                };
        }
        conn_send(c, CTL_HOLDS_REPLY, id, e, (uint32_t) (n * sizeof(*e)), -1);
        free(e);
}

/* Copies of a hold's fds (init keeps its own). */
static void do_take(struct conn *c, uint64_t id) {
        struct proc *p = proc_by_id(id);
        struct ctl_taken t = {0};
        int fds[MSG_FDS], n = 0;

        if (!p || !(p->flags & CTL_SPAWN_HOLD)) {
                t.err = ESRCH;
                conn_send(c, CTL_TAKEN, id, &t, sizeof(t), -1);
                return;
        }
        if (p->master >= 0) {
                fds[n++] = p->master;
                t.fdmask = CTL_HOLD_FD_PTY;
        } else
                for (int i = 0; i < CTL_HOLD_FDS; i++)
                        if (p->held[i] >= 0) {
                                fds[n++] = p->held[i];
                                t.fdmask |= 1u << i;
                        }
        /* the daemon that takes them owns the process from now on */
        p->owner = c->serial;
        conn_send_fds(c, CTL_TAKEN, id, &t, sizeof(t), fds, n);
}

static int do_release(uint64_t id, const struct ctl_release *rl) {
        struct proc *p = proc_by_id(id);
        if (!p || !(p->flags & CTL_SPAWN_HOLD))
                return -ESRCH;
        if (rl->what & CTL_RELEASE_STDIN && p->held[0] >= 0) {
                close(p->held[0]);
                p->held[0] = -1;
        }
        if (rl->what & CTL_RELEASE_ALL) {
                if (p->exited) {
                        proc_remove(p);
                        return 0;
                }
                /* still running: an ordinary process from now on */
                proc_close_held(p);
                p->flags &= ~(uint32_t) CTL_SPAWN_HOLD;
        }
        return 0;
}

static void do_file_open(struct conn *c, uint64_t id, const struct init_file_open *f) {
        struct ctl_file_opened o = {0};
        int fd = -1;
        int root = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
        int r = root < 0 ? -errno : init_fop_open(root, f, &fd);
        if (root >= 0)
                close(root);
        if (r < 0)
                o.err = -r;
        conn_send(c, CTL_FILE_OPENED, id, &o, sizeof(o), fd);
        if (fd >= 0)
                close(fd);
}

/* FILE_MKDIR .. FILE_LIST (ctl-proto.h, file-ops.h): done here, as the
 * sandbox's root inside the sandbox, resolved from init's own root. The
 * work is synchronous: a big recursive REMOVE holds init's loop for its
 * length (the daemon waits at most 5 s per request). */
static void do_file_op(struct conn *c, uint64_t id, uint32_t type, const struct init_file_op *op) {
        int root = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
        if (root < 0) {
                int r = -errno;
                if (type == CTL_FILE_LIST) {
                        struct ctl_file_listed l = {.err = -r};
                        conn_send(c, CTL_FILE_LISTED, id, &l, sizeof(l), -1);
                } else {
                        send_result(c, id, r);
                }
                return;
        }
        if (type == CTL_FILE_LIST) {
                struct ctl_file_listed l;
                int mfd = -1;
                int r = init_fop_list(root, op, &l, &mfd);
                if (r < 0)
                        l = (struct ctl_file_listed){.err = -r};
                conn_send(c, CTL_FILE_LISTED, id, &l, sizeof(l), mfd);
                if (mfd >= 0)
                        close(mfd);
        } else {
                send_result(c, id, init_fop_do(root, type, op));
        }
        close(root);
}

static void handle_one(struct conn *c, size_t n, int *fds, int nfds, bool truncated) {
        struct init_req req;
        int r;

        if (truncated)
                r = -EMSGSIZE;
        else
                r = init_req_decode(rbuf, n, &req);
        if (truncated) {
                memset(&req, 0, sizeof(req));
                if (n >= sizeof(req.hdr))
                        memcpy(&req.hdr, rbuf, sizeof(req.hdr));
        }
        if (r < 0) {
                close_fds(fds, nfds);
                if (req.hdr.type == CTL_SPAWN)
                        send_spawned(c, req.hdr.id, 0, r, -1);
                else
                        send_result(c, req.hdr.id, r);
                return;
        }
        if (req.hdr.type != CTL_SPAWN && nfds > 0) {
                close_fds(fds, nfds);
                send_result(c, req.hdr.id, -EBADF);
                return;
        }
        bool file_req = req.hdr.type == CTL_FILE_OPEN ||
                        (req.hdr.type >= CTL_FILE_MKDIR && req.hdr.type <= CTL_FILE_LIST);
        if (file_req) {
                if (!c->talked)
                        c->files = true;
        } else {
                c->talked = true;
                c->files = false;
        }

        switch (req.hdr.type) {
        case CTL_SPAWN:
                do_spawn(c, req.hdr.id, &req.spawn, fds, nfds);
                break;
        case CTL_SIGNAL:
                send_result(c, req.hdr.id, do_signal(&req.signal));
                break;
        case CTL_RESIZE:
                send_result(c, req.hdr.id, do_resize(req.hdr.id, &req.resize));
                break;
        case CTL_KILL_ALL:
                send_result(c, req.hdr.id, kill_all(req.kill_all.signo));
                break;
        case CTL_HOLDS:
                do_holds(c, req.hdr.id);
                break;
        case CTL_TAKE:
                do_take(c, req.hdr.id);
                break;
        case CTL_RELEASE:
                send_result(c, req.hdr.id, do_release(req.hdr.id, &req.release));
                break;
        case CTL_PING: {
                struct ctl_pong p = {.init_pid = getpid(),
                                     .nprocs = (uint32_t) procs_running(),
                                     .nconns = (uint32_t) conn_count(),
                                     .npending = (uint32_t) npending};
                conn_send(c, CTL_PONG, req.hdr.id, &p, sizeof(p), -1);
                break;
        }
        case CTL_LIST:
                do_list(c, req.hdr.id);
                break;
        case CTL_FILE_OPEN:
                do_file_open(c, req.hdr.id, &req.file_open);
                break;
        case CTL_FILE_MKDIR:
        case CTL_FILE_REMOVE:
        case CTL_FILE_RENAME:
        case CTL_FILE_SYMLINK:
        case CTL_FILE_LIST:
                do_file_op(c, req.hdr.id, req.hdr.type, &req.file_op);
                break;
        }
        init_req_done(&req);
}

static void conn_read(struct conn *c) {
        for (int turn = 0; turn < BATCH && !c->dead; turn++) {
                union {
                        struct cmsghdr h;
                        char b[CMSG_SPACE(sizeof(int) * 8)];
                } cbuf;
                struct iovec iov = {.iov_base = rbuf, .iov_len = sizeof(rbuf)};
                struct msghdr mh = {.msg_iov = &iov,
                                    .msg_iovlen = 1,
                                    .msg_control = cbuf.b,
                                    .msg_controllen = sizeof(cbuf.b)};
                int fds[8], nfds = 0;
                bool bad_cmsg = false;

                ssize_t n = RETRY_EINTR(recvmsg(c->fd, &mh, MSG_DONTWAIT | MSG_CMSG_CLOEXEC));
                if (n < 0) {
                        if (errno != EAGAIN && errno != EWOULDBLOCK)
                                c->dead = true;
                        return;
                }
                for (struct cmsghdr *cm = CMSG_FIRSTHDR(&mh); cm; cm = CMSG_NXTHDR(&mh, cm)) {
                        if (cm->cmsg_level == SOL_SOCKET && cm->cmsg_type == SCM_RIGHTS) {
                                size_t k = (cm->cmsg_len - CMSG_LEN(0)) / sizeof(int);
                                for (size_t i = 0; i < k; i++) {
                                        int fd;
                                        memcpy(&fd, CMSG_DATA(cm) + i * sizeof(int), sizeof(int));
                                        if (nfds < (int) ELEMENTSOF(fds))
                                                fds[nfds++] = fd;
                                        else
                                                close(fd);
                                }
                        } else {
                                bad_cmsg = true;
                        }
                }
                if (n == 0) { /* orderly shutdown by the daemon */
                        close_fds(fds, nfds);
                        c->dead = true;
                        return;
                }
                if ((mh.msg_flags & MSG_CTRUNC) || bad_cmsg ||
                    nfds > CTL_STDIO_FDS + CTL_HOLD_FDS) {
                        close_fds(fds, nfds);
                        struct ctl_hdr h = {0};
                        if ((size_t) n >= sizeof(h))
                                memcpy(&h, rbuf, sizeof(h));
                        if (h.type == CTL_SPAWN)
                                send_spawned(c, h.id, 0, -EBADF, -1);
                        else
                                send_result(c, h.id, -EBADF);
                        continue;
                }
                handle_one(c, (size_t) n, fds, nfds, (mh.msg_flags & MSG_TRUNC) != 0);
        }
}

static void do_accept(void) {
        for (;;) {
                int fd = accept4(listen_fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
                if (fd < 0)
                        return;
                struct conn *slot = NULL;
                for (int i = 0; i < MAX_CONNS; i++)
                        if (conns[i].fd < 0) {
                                slot = &conns[i];
                                break;
                        }
                if (!slot) {
                        close(fd);
                        continue;
                }
                *slot = (struct conn){.fd = fd, .serial = next_serial++};
                slot->tail = &slot->head;
        }
}

/* Hand exits that happened while nobody listened to the newest connection. */
static void pending_flush(void) {
        struct conn *c;

        while (npending > 0 && (c = conn_latest())) {
                struct pending pe = pending[pending_head];
                pending_head = (pending_head + 1) % MAX_PENDING;
                npending--;
                conn_send(c, CTL_EXITED, pe.id, &pe.ev, sizeof(pe.ev), -1);
        }
}

/* ---- reaping and signals ---- */

static void reap(void) {
        for (;;) {
                int status;
                pid_t pid = waitpid(-1, &status, WNOHANG);
                if (pid < 0 && errno == EINTR)
                        continue;
                if (pid < 0 && errno == ECHILD && terminating) {
                        /* Best effort: deliver what is queued, then go. */
                        for (int i = 0; i < MAX_CONNS; i++)
                                if (conns[i].fd >= 0)
                                        conn_flush(&conns[i]);
                        exit(0);
                }
                if (pid <= 0)
                        return;
                struct proc *p = proc_by_pid(pid);
                if (p) {
                        send_exited(p, status);
                        if (p->flags & CTL_SPAWN_HOLD) {
                                /* kept, with its fds, until RELEASE ALL */
                                p->exited = true;
                                p->status = status;
                        } else
                                proc_remove(p);
                }
        }
}

static void read_signals(void) {
        struct signalfd_siginfo si;

        while (read(sig_fd, &si, sizeof(si)) == sizeof(si)) {
                int sig = (int) si.ssi_signo;
                if (sig == SIGCHLD)
                        continue; /* reap() runs after every wakeup */
                /* As PID 1, only signals from outside the sandbox (sender pid
                 * 0 in our namespace) count; the workload cannot stop init. */
                if (is_pid1 && si.ssi_pid != 0)
                        continue;
                kill_all(sig);
                if (sig == SIGTERM || sig == SIGINT)
                        terminating = true;
        }
}

/* ---- start-up ---- */

static int setup(void) {
        int type = 0, acc = 0;
        socklen_t l = sizeof(type);

        const char *id = getenv("WARREN_SANDBOX_ID");
        if (id && *id)
                sandbox_id = id;

        /* 0..2 must be open so received fds never land there. */
        for (int fd = 0; fd < 3; fd++)
                if (fcntl(fd, F_GETFD) < 0) {
                        int n = open("/dev/null", O_RDWR);
                        if (n < 0)
                                return -errno;
                        if (n != fd) {
                                say("could not fill fd %d", fd);
                                return -EBADF;
                        }
                }

        if (getsockopt(LISTEN_FD, SOL_SOCKET, SO_TYPE, &type, &l) < 0 || type != SOCK_SEQPACKET) {
                say("fd 3 is not a SOCK_SEQPACKET socket");
                return -ENOTSOCK;
        }
        l = sizeof(acc);
        if (getsockopt(LISTEN_FD, SOL_SOCKET, SO_ACCEPTCONN, &acc, &l) < 0 || !acc) {
                say("fd 3 is not listening");
                return -EINVAL;
        }
        listen_fd = LISTEN_FD;
        if (fcntl(listen_fd, F_SETFD, FD_CLOEXEC) < 0 ||
            fcntl(listen_fd, F_SETFL, fcntl(listen_fd, F_GETFL) | O_NONBLOCK) < 0)
                return -errno;
        close_from(LISTEN_FD + 1, -1);

        struct rlimit nofile;
        hold_fd_budget = getrlimit(RLIMIT_NOFILE, &nofile) == 0 && nofile.rlim_cur != RLIM_INFINITY
                                 ? (long) nofile.rlim_cur - HOLD_FD_HEADROOM
                                 : 4096;
        is_pid1 = getpid() == 1;
        /* Not ptrace-able or /proc/1/mem-readable by same-uid workloads. */
        prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
        if (!is_pid1 && prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) < 0)
                return -errno;

        sigset_t set;
        sigemptyset(&set);
        sigaddset(&set, SIGCHLD);
        sigaddset(&set, SIGTERM);
        sigaddset(&set, SIGINT);
        sigaddset(&set, SIGHUP);
        sigaddset(&set, SIGQUIT);
        sigaddset(&set, SIGUSR1);
        sigaddset(&set, SIGUSR2);
        if (sigprocmask(SIG_BLOCK, &set, NULL) < 0)
                return -errno;
        sig_fd = signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK);
        if (sig_fd < 0)
                return -errno;

        for (int i = 0; i < MAX_CONNS; i++)
                conns[i] = (struct conn){.fd = -1};
        return 0;
}

/* The K8S compute class (docs/k8s.md): `warren-init --install DEST` (an
 * init container) copies this static binary to DEST, mode 0755, for the
 * main container to run; `warren-init --listen PATH` makes its own
 * listening control socket at PATH (no runtime hands it one in a Pod)
 * and serves it as fd 3. */
static int install_self(const char *dest) {
        int in = open("/proc/self/exe", O_RDONLY | O_CLOEXEC);
        if (in < 0)
                return -errno;
        char tmp[PATH_MAX];
        if (snprintf(tmp, sizeof(tmp), "%s.tmp", dest) >= (int) sizeof(tmp)) {
                close(in);
                return -ENAMETOOLONG;
        }
        int out = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0755);
        if (out < 0) {
                int r = -errno;
                close(in);
                return r;
        }
        char buf[65536];
        ssize_t n;
        int r = 0;
        while ((n = read(in, buf, sizeof(buf))) != 0) {
                if (n < 0) {
                        if (errno == EINTR)
                                continue;
                        r = -errno;
                        break;
                }
                for (ssize_t off = 0; off < n;) {
                        ssize_t w = write(out, buf + off, (size_t) (n - off));
                        if (w < 0 && errno == EINTR)
                                continue;
                        if (w < 0) {
                                r = -errno;
                                break;
                        }
                        off += w;
                }
                if (r < 0)
                        break;
        }
        close(in);
        if (r == 0 && (fchmod(out, 0755) < 0 || fsync(out) < 0))
                r = -errno;
        if (close(out) < 0 && r == 0)
                r = -errno;
        if (r == 0 && rename(tmp, dest) < 0)
                r = -errno;
        if (r < 0)
                unlink(tmp);
        return r;
}

static int listen_at(const char *path) {
        struct sockaddr_un sa = {.sun_family = AF_UNIX};
        if (strlen(path) >= sizeof(sa.sun_path))
                return -ENAMETOOLONG;
        strcpy(sa.sun_path, path);
        int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
        if (fd < 0)
                return -errno;
        unlink(path);
        if (bind(fd, (struct sockaddr *) &sa, sizeof(sa)) < 0 || chmod(path, 0600) < 0 ||
            listen(fd, 16) < 0) {
                int r = -errno;
                close(fd);
                return r;
        }
        if (fd != LISTEN_FD) {
                if (dup2(fd, LISTEN_FD) < 0) {
                        int r = -errno;
                        close(fd);
                        return r;
                }
                close(fd);
        }
        return 0;
}

int main(int argc, char **argv) {
        if (argc == 3 && !strcmp(argv[1], "--install")) {
                int ir = install_self(argv[2]);
                if (ir < 0) {
                        say("install %s: %s", argv[2], strerror(-ir));
                        return 1;
                }
                return 0;
        }
        if (argc == 3 && !strcmp(argv[1], "--listen")) {
                /* fds 0-2 first, so the socket cannot land on them */
                for (int fd = 0; fd < 3; fd++)
                        if (fcntl(fd, F_GETFD) < 0 && open("/dev/null", O_RDWR) != fd)
                                return 1;
                int lr = listen_at(argv[2]);
                if (lr < 0) {
                        say("listen %s: %s", argv[2], strerror(-lr));
                        return 1;
                }
        }
        int r = setup();
        if (r < 0) {
                say("start-up failed: %s", strerror(-r));
                return 1;
        }

        for (;;) {
                struct pollfd pfd[2 + MAX_CONNS];
                struct conn *pc[2 + MAX_CONNS];
                nfds_t n = 0;

                pfd[n++] = (struct pollfd){.fd = sig_fd, .events = POLLIN};
                pfd[n++] = (struct pollfd){.fd = listen_fd, .events = POLLIN};
                for (int i = 0; i < MAX_CONNS; i++) {
                        if (conns[i].fd < 0)
                                continue;
                        pc[n] = &conns[i];
                        pfd[n++] =
                                (struct pollfd){.fd = conns[i].fd,
                                                .events = POLLIN | (conns[i].head ? POLLOUT : 0)};
                }

                if (poll(pfd, n, -1) < 0) {
                        if (errno == EINTR)
                                continue;
                        say("poll: %s", strerror(errno));
                        return 1;
                }

                if (pfd[0].revents)
                        read_signals();
                reap();
                if (pfd[1].revents)
                        do_accept();
                for (nfds_t i = 2; i < n; i++) {
                        struct conn *c = pc[i];
                        if (pfd[i].revents & POLLOUT)
                                conn_flush(c);
                        if (pfd[i].revents & (POLLIN | POLLHUP | POLLERR))
                                conn_read(c);
                }
                /* Exits reaped above may be queued for connections that died. */
                for (int i = 0; i < MAX_CONNS; i++)
                        if (conns[i].fd >= 0 && conns[i].dead)
                                conn_close(&conns[i]);
                pending_flush();
                reap();
        }
}
