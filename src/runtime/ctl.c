/* SPDX-License-Identifier: Apache-2.0 */
/* Daemon-side client of the warren-init control protocol. */

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "runtime/ctl.h"

#define RUN_OUTPUT_MAX (16u << 20)

int rt_ctl_connect(const char *path, int *ret_fd, struct wr_err *e) {
        struct sockaddr_un sa = {.sun_family = AF_UNIX};
        _cleanup_close_ int fd = -EBADF;

        if (!path || strlen(path) >= sizeof(sa.sun_path))
                return err_set(e, -ENAMETOOLONG, "control socket path too long");
        strcpy(sa.sun_path, path);

        fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        if (fd < 0)
                return err_set(e, -errno, "control socket: %m");
        /* A unix connect either succeeds or fails at once (or EAGAIN when the
         * backlog is full, which we report). */
        if (connect(fd, (struct sockaddr *) &sa, sizeof(sa)) < 0)
                return err_set(e, -errno, "connect %s: %m", path);
        /* A SPAWN datagram may be up to CTL_MSG_MAX; the kernel refuses
         * datagrams larger than the sender's buffer. Root may force it;
         * others get what wmem_max allows. */
        int sz = (int) (CTL_MSG_MAX + 65536);
        if (setsockopt(fd, SOL_SOCKET, SO_SNDBUFFORCE, &sz, sizeof(sz)) < 0)
                (void) setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &sz, sizeof(sz));
        *ret_fd = TAKE_FD(fd);
        return 0;
}

static void hdr_put(void *buf, uint32_t type, uint32_t len, uint64_t id) {
        struct ctl_hdr h = {.magic = CTL_MAGIC, .type = type, .len = len, .id = id};
        memcpy(buf, &h, sizeof(h));
}

/* Append count strings of list (NULL-terminated or count-limited) at
 * buf[*pos]; checks env syntax when is_env. */
static int put_strings(char *buf, size_t size, size_t *pos, const char *const *list, uint32_t count,
                       int is_env) {
        for (uint32_t i = 0; i < count; i++) {
                size_t l = strlen(list[i]);
                if (is_env) {
                        const char *eq = memchr(list[i], '=', l);
                        if (!eq || eq == list[i])
                                return -EINVAL;
                }
                if (l + 1 > size - *pos)
                        return -EMSGSIZE;
                memcpy(buf + *pos, list[i], l + 1);
                *pos += l + 1;
        }
        return 0;
}

int rt_ctl_spawn_encode(const struct rt_spawn_req *req, void *buf, size_t size) {
        uint32_t argc = 0, envc = 0;
        const char *cwd = req->cwd ? req->cwd : "";
        size_t pos = sizeof(struct ctl_hdr) + sizeof(struct ctl_spawn);
        char *b = buf;
        int r;

        if (!req->argv || !req->argv[0] || !req->argv[0][0])
                return -EINVAL;
        if (req->flags & ~(uint32_t) CTL_SPAWN_FLAGS_ALL)
                return -EINVAL;
        if (req->uid == UINT32_MAX || req->gid == UINT32_MAX)
                return -EINVAL;
        while (req->argv[argc])
                if (++argc > CTL_ARGS_MAX)
                        return -EMSGSIZE;
        while (req->envp && req->envp[envc])
                if (++envc > CTL_ARGS_MAX)
                        return -EMSGSIZE;
        if (argc + envc > CTL_ARGS_MAX)
                return -EMSGSIZE;
        if (strlen(cwd) + 1 > CTL_PATH_MAX)
                return -EINVAL;

        if (size > CTL_MSG_MAX)
                size = CTL_MSG_MAX;
        if (size < pos)
                return -EMSGSIZE;
        const char *cwdv[] = {cwd};
        if ((r = put_strings(b, size, &pos, cwdv, 1, 0)) < 0 ||
            (r = put_strings(b, size, &pos, req->argv, argc, 0)) < 0 ||
            (r = put_strings(b, size, &pos, req->envp, envc, 1)) < 0)
                return r;

        size_t payload = pos - sizeof(struct ctl_hdr);
        struct ctl_spawn s = {
                .flags = req->flags,
                .uid = req->uid,
                .gid = req->gid,
                .cols = req->cols,
                .rows = req->rows,
                .argc = argc,
                .envc = envc,
                .strings_len = (uint32_t) (payload - sizeof(struct ctl_spawn)),
        };
        hdr_put(b, CTL_SPAWN, (uint32_t) payload, req->id);
        memcpy(b + sizeof(struct ctl_hdr), &s, sizeof(s));
        return (int) pos;
}

static int send_msg(int fd, const void *buf, size_t len, const int *fds, int nfds) {
        struct iovec iov = {.iov_base = (void *) buf, .iov_len = len};
        union {
                struct cmsghdr h;
                char b[CMSG_SPACE(sizeof(int) * (CTL_STDIO_FDS + CTL_HOLD_FDS))];
        } c;
        struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1};

        if (nfds > 0) {
                memset(&c, 0, sizeof(c));
                mh.msg_control = c.b;
                mh.msg_controllen = CMSG_SPACE(sizeof(int) * (size_t) nfds);
                struct cmsghdr *cm = CMSG_FIRSTHDR(&mh);
                cm->cmsg_level = SOL_SOCKET;
                cm->cmsg_type = SCM_RIGHTS;
                cm->cmsg_len = CMSG_LEN(sizeof(int) * (size_t) nfds);
                memcpy(CMSG_DATA(cm), fds, sizeof(int) * (size_t) nfds);
        }
        if (RETRY_EINTR(sendmsg(fd, &mh, MSG_NOSIGNAL | MSG_DONTWAIT)) < 0)
                return errno == EWOULDBLOCK ? -EAGAIN : -errno;
        return 0;
}

int rt_ctl_send_spawn(int fd, const struct rt_spawn_req *req, const int stdio[3]) {
        _cleanup_free_ char *buf = malloc(CTL_MSG_MAX);
        bool pty = req->flags & RT_SPAWN_PTY, hold = req->flags & RT_SPAWN_HOLD;
        int fds[CTL_STDIO_FDS + CTL_HOLD_FDS], nfds = 0;

        if (!buf)
                return -ENOMEM;
        if (pty != !stdio || (hold && !pty) != !!req->held || (!hold && req->held))
                return -EINVAL;
        for (int i = 0; stdio && i < CTL_STDIO_FDS; i++)
                if ((fds[nfds++] = stdio[i]) < 0)
                        return -EBADF;
        for (int i = 0; req->held && i < CTL_HOLD_FDS; i++)
                if ((fds[nfds++] = req->held[i]) < 0)
                        return -EBADF;
        int n = rt_ctl_spawn_encode(req, buf, CTL_MSG_MAX);
        if (n < 0)
                return n;
        int r = send_msg(fd, buf, (size_t) n, fds, nfds);
        /* the environment may hold secret values */
        explicit_bzero(buf, (size_t) n);
        return r;
}

static int send_small(int fd, uint32_t type, uint64_t id, const void *payload, uint32_t plen) {
        unsigned char buf[sizeof(struct ctl_hdr) + 32];

        hdr_put(buf, type, plen, id);
        if (plen)
                memcpy(buf + sizeof(struct ctl_hdr), payload, plen);
        return send_msg(fd, buf, sizeof(struct ctl_hdr) + plen, NULL, 0);
}

int rt_ctl_send_signal(int fd, uint64_t req_id, uint64_t target_id, pid_t pid, int signo,
                       bool group) {
        struct ctl_signal s = {
                .target_id = target_id,
                .pid = pid,
                .signo = signo,
                .flags = group ? CTL_SIGNAL_GROUP : 0,
        };
        if (signo < 1 || signo > SIGRTMAX || pid < 0 || pid == 1)
                return -EINVAL;
        return send_small(fd, CTL_SIGNAL, req_id, &s, sizeof(s));
}

int rt_ctl_send_resize(int fd, uint64_t exec_id, uint16_t cols, uint16_t rows) {
        struct ctl_resize s = {.cols = cols, .rows = rows};
        if (cols == 0 || rows == 0)
                return -EINVAL;
        return send_small(fd, CTL_RESIZE, exec_id, &s, sizeof(s));
}

int rt_ctl_send_kill_all(int fd, uint64_t req_id, int signo) {
        struct ctl_kill_all s = {.signo = signo};
        if (signo < 1 || signo > SIGRTMAX)
                return -EINVAL;
        return send_small(fd, CTL_KILL_ALL, req_id, &s, sizeof(s));
}

int rt_ctl_send_ping(int fd, uint64_t id) {
        return send_small(fd, CTL_PING, id, NULL, 0);
}

int rt_ctl_send_list(int fd, uint64_t id) {
        return send_small(fd, CTL_LIST, id, NULL, 0);
}

int rt_ctl_send_holds(int fd, uint64_t id) {
        return send_small(fd, CTL_HOLDS, id, NULL, 0);
}

int rt_ctl_send_take(int fd, uint64_t exec_id) {
        return send_small(fd, CTL_TAKE, exec_id, NULL, 0);
}

int rt_ctl_send_release(int fd, uint64_t exec_id, uint32_t what) {
        struct ctl_release s = {.what = what};
        if (what == 0 || (what & ~(uint32_t) CTL_RELEASE_WHAT_ALL))
                return -EINVAL;
        return send_small(fd, CTL_RELEASE, exec_id, &s, sizeof(s));
}

int rt_ctl_send_file_open(int fd, uint64_t id, const char *path, uint32_t flags, uint32_t mode,
                          uint32_t uid, uint32_t gid) {
        size_t plen = path ? strlen(path) + 1 : 0;
        if (!path || path[0] != '/' || plen > CTL_PATH_MAX ||
            (flags & ~(uint32_t) CTL_FOPEN_FLAGS_ALL))
                return -EINVAL;
        unsigned char buf[sizeof(struct ctl_hdr) + sizeof(struct ctl_file_open) + CTL_PATH_MAX];
        struct ctl_file_open f = {
                .flags = flags, .mode = mode, .uid = uid, .gid = gid, .path_len = (uint32_t) plen};
        uint32_t len = (uint32_t) (sizeof(f) + plen);
        hdr_put(buf, CTL_FILE_OPEN, len, id);
        memcpy(buf + sizeof(struct ctl_hdr), &f, sizeof(f));
        memcpy(buf + sizeof(struct ctl_hdr) + sizeof(f), path, plen);
        return send_msg(fd, buf, sizeof(struct ctl_hdr) + len, NULL, 0);
}

int rt_ctl_send_file_op(int fd, uint64_t id, uint32_t type, uint32_t flags, uint32_t mode,
                        uint32_t uid, uint32_t gid, const char *path, const char *path2,
                        uint64_t dev, uint64_t ino) {
        size_t plen = path ? strlen(path) + 1 : 0, p2len = path2 ? strlen(path2) + 1 : 0;
        if (type < CTL_FILE_MKDIR || type > CTL_FILE_LIST || !path || path[0] != '/' ||
            plen > CTL_PATH_MAX || p2len > CTL_PATH_MAX || (flags & ~(uint32_t) CTL_FOP_FLAGS_ALL))
                return -EINVAL;
        _cleanup_free_ unsigned char *buf =
                malloc(sizeof(struct ctl_hdr) + sizeof(struct ctl_file_op) + 2 * CTL_PATH_MAX);
        if (!buf)
                return -ENOMEM;
        struct ctl_file_op f = {.flags = flags,
                                .mode = mode,
                                .uid = uid,
                                .gid = gid,
                                .path_len = (uint32_t) plen,
                                .path2_len = (uint32_t) p2len,
                                .dev = dev,
                                .ino = ino};
        uint32_t len = (uint32_t) (sizeof(f) + plen + p2len);
        hdr_put(buf, type, len, id);
        unsigned char *p = buf + sizeof(struct ctl_hdr);
        memcpy(p, &f, sizeof(f));
        memcpy(p + sizeof(f), path, plen);
        if (p2len)
                memcpy(p + sizeof(f) + plen, path2, p2len);
        return send_msg(fd, buf, sizeof(struct ctl_hdr) + len, NULL, 0);
}

int rt_ctl_file_entry_next(const void *buf, size_t len, size_t *pos,
                           struct rt_ctl_file_entry *ret) {
        const char *b = buf;
        if (*pos == len)
                return 0;
        if (*pos > len || len - *pos < sizeof(ret->e))
                return -EBADMSG;
        memcpy(&ret->e, b + *pos, sizeof(ret->e));
        size_t nl = ret->e.name_len, ll = ret->e.link_len;
        size_t at = *pos + sizeof(ret->e);
        if (nl == 0 || nl > CTL_FILE_NAME_MAX || ll > CTL_PATH_MAX - 1 || len - at < nl + ll)
                return -EBADMSG;
        const char *name = b + at, *link = name + nl;
        if (memchr(name, '/', nl) || memchr(name, 0, nl) || (nl == 1 && name[0] == '.') ||
            (nl == 2 && name[0] == '.' && name[1] == '.'))
                return -EBADMSG;
        if (ll && (!S_ISLNK(ret->e.mode) || memchr(link, 0, ll)))
                return -EBADMSG;
        ret->name = name;
        ret->link = link;
        *pos = at + nl + ll;
        return 1;
}

/* The fds a TAKEN with this mask carries: one per bit, a PTY alone. */
static int taken_nfds(uint32_t mask) {
        if (mask & CTL_HOLD_FD_PTY)
                return mask == CTL_HOLD_FD_PTY ? 1 : -1;
        return __builtin_popcount(mask & CTL_HOLD_FD_ALL);
}

static bool errno_valid(int32_t err) {
        return err >= 0 && err < 4096;
}

int rt_ctl_msg_decode(const void *buf, size_t n, int nfds, struct rt_ctl_msg *ret) {
        struct ctl_hdr h;
        const unsigned char *p = (const unsigned char *) buf + sizeof(h);

        memset(ret, 0, sizeof(*ret));
        if (n > CTL_REPLY_MAX)
                return -EMSGSIZE;
        if (n < sizeof(h))
                return -EBADMSG;
        memcpy(&h, buf, sizeof(h));
        if (h.magic != CTL_MAGIC || h.reserved != 0 || h.len != n - sizeof(h))
                return -EBADMSG;
        if (nfds < 0 || nfds > 4 || (nfds > 1 && h.type != CTL_TAKEN) ||
            (nfds == 1 && h.type != CTL_SPAWNED && h.type != CTL_TAKEN &&
             h.type != CTL_FILE_OPENED && h.type != CTL_FILE_LISTED))
                return -EBADMSG;

        ret->type = h.type;
        ret->id = h.id;
        switch (h.type) {
        case CTL_SPAWNED: {
                struct ctl_spawned s;
                if (h.len != sizeof(s))
                        return -EBADMSG;
                memcpy(&s, p, sizeof(s));
                if (!errno_valid(s.err) || (s.err == 0) != (s.pid > 0) || s.pid < 0 ||
                    (nfds && s.err))
                        return -EBADMSG;
                ret->pid = s.pid;
                ret->err = -s.err;
                return 0;
        }
        case CTL_EXITED: {
                struct ctl_exited x;
                if (h.len != sizeof(x))
                        return -EBADMSG;
                memcpy(&x, p, sizeof(x));
                if (x.pid <= 0 || !(WIFEXITED(x.status) || WIFSIGNALED(x.status)))
                        return -EBADMSG;
                ret->pid = x.pid;
                ret->status = x.status;
                return 0;
        }
        case CTL_RESULT: {
                struct ctl_result r;
                if (h.len != sizeof(r))
                        return -EBADMSG;
                memcpy(&r, p, sizeof(r));
                if (!errno_valid(r.err) || r.reserved)
                        return -EBADMSG;
                ret->err = -r.err;
                return 0;
        }
        case CTL_PONG:
                if (h.len != sizeof(ret->pong))
                        return -EBADMSG;
                memcpy(&ret->pong, p, sizeof(ret->pong));
                return 0;
        case CTL_LIST_REPLY: {
                size_t k = h.len / sizeof(struct ctl_list_entry);
                if (h.len % sizeof(struct ctl_list_entry) != 0 || k > CTL_LIST_MAX)
                        return -EBADMSG;
                if (k == 0)
                        return 0;
                struct ctl_list_entry *l = calloc(k, sizeof(*l));
                if (!l)
                        return -ENOMEM;
                memcpy(l, p, k * sizeof(*l));
                for (size_t i = 0; i < k; i++)
                        if (l[i].pid <= 0 || (l[i].flags & ~(uint32_t) CTL_SPAWN_FLAGS_ALL)) {
                                free(l);
                                return -EBADMSG;
                        }
                ret->list = l;
                ret->n_list = k;
                return 0;
        }
        case CTL_HOLDS_REPLY: {
                size_t k = h.len / sizeof(struct ctl_hold);
                if (h.len % sizeof(struct ctl_hold) != 0 || k > CTL_HOLDS_MAX)
                        return -EBADMSG;
                if (k == 0)
                        return 0;
                struct ctl_hold *l = calloc(k, sizeof(*l));
                if (!l)
                        return -ENOMEM;
                memcpy(l, p, k * sizeof(*l));
                for (size_t i = 0; i < k; i++) {
                        bool exited = l[i].state & CTL_HOLD_EXITED;
                        if (l[i].pid <= 0 || !(l[i].flags & CTL_SPAWN_HOLD) ||
                            (l[i].flags & ~(uint32_t) CTL_SPAWN_FLAGS_ALL) ||
                            (l[i].state & ~(uint32_t) CTL_HOLD_STATE_ALL) ||
                            (exited && !(WIFEXITED(l[i].status) || WIFSIGNALED(l[i].status))) ||
                            (!exited && l[i].status != 0)) {
                                free(l);
                                return -EBADMSG;
                        }
                }
                ret->holds = l;
                ret->n_holds = k;
                return 0;
        }
        case CTL_TAKEN: {
                struct ctl_taken t;
                if (h.len != sizeof(t))
                        return -EBADMSG;
                memcpy(&t, p, sizeof(t));
                if (!errno_valid(t.err) || (t.fdmask & ~(uint32_t) CTL_HOLD_FD_ALL) ||
                    (t.err && (t.fdmask || nfds)) || (!t.err && taken_nfds(t.fdmask) != nfds))
                        return -EBADMSG;
                ret->err = -t.err;
                ret->fdmask = t.fdmask;
                return 0;
        }
        case CTL_FILE_OPENED: {
                struct ctl_file_opened o;
                if (h.len != sizeof(o))
                        return -EBADMSG;
                memcpy(&o, p, sizeof(o));
                if (!errno_valid(o.err) || o.reserved || (o.err == 0) != (nfds == 1))
                        return -EBADMSG;
                ret->err = -o.err;
                return 0;
        }
        case CTL_FILE_LISTED: {
                struct ctl_file_listed l;
                if (h.len != sizeof(l))
                        return -EBADMSG;
                memcpy(&l, p, sizeof(l));
                if (!errno_valid(l.err) || l.reserved || l.truncated > 1 ||
                    l.count > CTL_FILE_LIST_MAX || (l.err == 0) != (nfds == 1) ||
                    (l.err && (l.count || l.fs_type || l.truncated)))
                        return -EBADMSG;
                ret->err = -l.err;
                ret->listed = l;
                return 0;
        }
        default:
                return -EBADMSG;
        }
}

void rt_ctl_msg_done(struct rt_ctl_msg *m) {
        if (!m)
                return;
        free(m->list);
        m->list = NULL;
        m->n_list = 0;
        free(m->holds);
        m->holds = NULL;
        m->n_holds = 0;
}

static bool is_pty_master(int fd) {
        /* an open of ptmx: char device 5:2 */
        struct stat st;
        return fstat(fd, &st) == 0 && S_ISCHR(st.st_mode) && major(st.st_rdev) == 5 &&
               minor(st.st_rdev) == 2;
}

static bool is_fifo(int fd) {
        struct stat st;
        return fstat(fd, &st) == 0 && S_ISFIFO(st.st_mode);
}

int rt_ctl_recv_fds(int fd, struct rt_ctl_msg *ret, int ret_fds[4], int *ret_nfds) {
        _cleanup_free_ unsigned char *buf = malloc(CTL_REPLY_MAX + 1);
        union {
                struct cmsghdr h;
                char b[CMSG_SPACE(sizeof(int) * 4)];
        } c;
        struct iovec iov;
        struct msghdr mh = {.msg_iov = &iov,
                            .msg_iovlen = 1,
                            .msg_control = c.b,
                            .msg_controllen = sizeof(c.b)};
        int fds[4], nfds = 0, r;

        *ret_nfds = 0;
        memset(ret, 0, sizeof(*ret));
        if (!buf)
                return -ENOMEM;
        iov = (struct iovec){.iov_base = buf, .iov_len = CTL_REPLY_MAX + 1};
        ssize_t n = RETRY_EINTR(recvmsg(fd, &mh, MSG_DONTWAIT | MSG_CMSG_CLOEXEC));
        if (n < 0)
                return errno == EWOULDBLOCK ? -EAGAIN : -errno;

        for (struct cmsghdr *cm = CMSG_FIRSTHDR(&mh); cm; cm = CMSG_NXTHDR(&mh, cm)) {
                if (cm->cmsg_level != SOL_SOCKET || cm->cmsg_type != SCM_RIGHTS)
                        continue;
                size_t k = (cm->cmsg_len - CMSG_LEN(0)) / sizeof(int);
                for (size_t i = 0; i < k; i++) {
                        int pfd;
                        memcpy(&pfd, CMSG_DATA(cm) + i * sizeof(int), sizeof(int));
                        if (nfds < (int) ELEMENTSOF(fds))
                                fds[nfds++] = pfd;
                        else
                                close(pfd);
                }
        }
        if (n == 0) {
                for (int i = 0; i < nfds; i++)
                        close(fds[i]);
                return -ECONNRESET;
        }
        if (mh.msg_flags & (MSG_TRUNC | MSG_CTRUNC))
                r = -EBADMSG;
        else
                r = rt_ctl_msg_decode(buf, (size_t) n, nfds, ret);
        /* Only what the message says may come back: a pty master (with
         * SPAWNED or a PTY TAKEN) or pipes; refuse anything else init
         * might pass. */
        if (r == 0 && ret->type == CTL_FILE_LISTED && nfds == 1) {
                /* a memfd init sealed: nothing changes it while it is read */
                int seals = fcntl(fds[0], F_GET_SEALS);
                int need = F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE;
                if (seals < 0 || (seals & need) != need)
                        r = -EBADMSG;
        }
        for (int i = 0;
             r == 0 && ret->type != CTL_FILE_OPENED && ret->type != CTL_FILE_LISTED && i < nfds;
             i++) {
                bool pty = ret->type == CTL_SPAWNED || (ret->fdmask & CTL_HOLD_FD_PTY);
                if (pty ? !is_pty_master(fds[i]) : !is_fifo(fds[i])) {
                        rt_ctl_msg_done(ret);
                        r = -EBADMSG;
                }
        }
        if (r < 0) {
                for (int i = 0; i < nfds; i++)
                        close(fds[i]);
                return r;
        }
        for (int i = 0; i < nfds; i++)
                ret_fds[i] = fds[i];
        *ret_nfds = nfds;
        return 0;
}

int rt_ctl_recv(int fd, struct rt_ctl_msg *ret, int *ret_passed_fd) {
        int fds[4], nfds = 0;
        *ret_passed_fd = -EBADF;
        int r = rt_ctl_recv_fds(fd, ret, fds, &nfds);
        if (r < 0)
                return r;
        if (nfds == 1)
                *ret_passed_fd = fds[0];
        else
                for (int i = 0; i < nfds; i++)
                        close(fds[i]);
        return 0;
}

static int64_t now_ms(void) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (int64_t) ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int remaining(int64_t deadline) {
        if (deadline < 0)
                return -1;
        int64_t left = deadline - now_ms();
        return left < 0 ? 0 : (int) MIN(left, (int64_t) 1 << 30);
}

int rt_ctl_recv_wait(int fd, struct rt_ctl_msg *ret, int *ret_passed_fd, int timeout_ms) {
        int64_t deadline = timeout_ms < 0 ? -1 : now_ms() + timeout_ms;

        for (;;) {
                int r = rt_ctl_recv(fd, ret, ret_passed_fd);
                if (r != -EAGAIN)
                        return r;
                struct pollfd pfd = {.fd = fd, .events = POLLIN};
                r = RETRY_EINTR(poll(&pfd, 1, remaining(deadline)));
                if (r < 0)
                        return -errno;
                if (r == 0)
                        return -ETIMEDOUT;
        }
}

/* What one files request sends (rt_ctl_file_open, rt_ctl_file_op). */
struct file_req {
        uint32_t type; /* CTL_FILE_OPEN .. CTL_FILE_LIST */
        uint32_t flags, mode, uid, gid;
        const char *path, *path2;
        uint64_t dev, ino;
};

static int file_req_send(int fd, uint64_t id, const struct file_req *q) {
        if (q->type == CTL_FILE_OPEN)
                return rt_ctl_send_file_open(fd, id, q->path, q->flags, q->mode, q->uid, q->gid);
        return rt_ctl_send_file_op(fd, id, q->type, q->flags, q->mode, q->uid, q->gid, q->path,
                                   q->path2, q->dev, q->ino);
}

/* Send q and wait for its answer (FILE_OPENED, FILE_LISTED or RESULT with
 * id): *ret_msg, *ret_fd the fd it carried. */
static int file_call(int fd, uint64_t id, const struct file_req *q, int timeout_ms,
                     struct rt_ctl_msg *ret_msg, int *ret_fd) {
        int64_t deadline = timeout_ms < 0 ? -1 : now_ms() + timeout_ms;
        uint32_t want = q->type == CTL_FILE_OPEN   ? CTL_FILE_OPENED
                        : q->type == CTL_FILE_LIST ? CTL_FILE_LISTED
                                                   : CTL_RESULT;
        *ret_fd = -EBADF;
        for (;;) {
                int r = file_req_send(fd, id, q);
                if (r != -EAGAIN) {
                        if (r < 0)
                                return r;
                        break;
                }
                struct pollfd pfd = {.fd = fd, .events = POLLOUT};
                r = RETRY_EINTR(poll(&pfd, 1, remaining(deadline)));
                if (r < 0)
                        return -errno;
                if (r == 0)
                        return -ETIMEDOUT;
        }
        for (;;) {
                struct rt_ctl_msg m;
                int pfd = -EBADF;
                int r = rt_ctl_recv_wait(fd, &m, &pfd, remaining(deadline));
                if (r < 0)
                        return r;
                rt_ctl_msg_done(&m);
                /* an init without the type answers RESULT; anything else
                 * (an event) is not ours: files connections get none */
                if (m.type == CTL_RESULT && m.id == id && want != CTL_RESULT) {
                        safe_close(pfd);
                        return m.err < 0 ? m.err : -EBADMSG;
                }
                if (m.type != want || m.id != id) {
                        safe_close(pfd);
                        continue;
                }
                *ret_msg = m;
                if (m.err < 0) {
                        safe_close(pfd);
                        return m.err;
                }
                *ret_fd = pfd;
                return 0;
        }
}

int rt_ctl_file_open(int fd, uint64_t id, const char *path, uint32_t flags, uint32_t mode,
                     uint32_t uid, uint32_t gid, int timeout_ms, int *ret_fd) {
        struct file_req q = {.type = CTL_FILE_OPEN,
                             .flags = flags,
                             .mode = mode,
                             .uid = uid,
                             .gid = gid,
                             .path = path};
        struct rt_ctl_msg m;
        return file_call(fd, id, &q, timeout_ms, &m, ret_fd);
}

int rt_ctl_file_op(int fd, uint64_t id, uint32_t type, uint32_t flags, uint32_t mode, uint32_t uid,
                   uint32_t gid, const char *path, const char *path2, uint64_t dev, uint64_t ino,
                   int timeout_ms, struct ctl_file_listed *ret_listed, int *ret_memfd) {
        if (type < CTL_FILE_MKDIR || type > CTL_FILE_LIST ||
            (type == CTL_FILE_LIST) != (ret_listed && ret_memfd))
                return -EINVAL;
        struct file_req q = {.type = type,
                             .flags = flags,
                             .mode = mode,
                             .uid = uid,
                             .gid = gid,
                             .path = path,
                             .path2 = path2,
                             .dev = dev,
                             .ino = ino};
        struct rt_ctl_msg m;
        int pfd = -EBADF;
        int r = file_call(fd, id, &q, timeout_ms, &m, &pfd);
        if (r < 0)
                return r;
        if (type == CTL_FILE_LIST) {
                *ret_listed = m.listed;
                *ret_memfd = pfd;
        } else {
                safe_close(pfd);
        }
        return 0;
}

/* Send with waiting for POLLOUT on a non-blocking socket. */
static int send_wait(int fd, int (*fn)(int, const void *), const void *arg) {
        for (;;) {
                int r = fn(fd, arg);
                if (r != -EAGAIN)
                        return r;
                struct pollfd pfd = {.fd = fd, .events = POLLOUT};
                if (RETRY_EINTR(poll(&pfd, 1, 1000)) < 0)
                        return -errno;
        }
}

struct spawn_args {
        const struct rt_spawn_req *req;
        const int *stdio;
};

static int spawn_fn(int fd, const void *arg) {
        const struct spawn_args *a = arg;
        return rt_ctl_send_spawn(fd, a->req, a->stdio);
}

static int kill_fn(int fd, const void *arg) {
        const uint64_t *id = arg;
        return rt_ctl_send_signal(fd, 0, *id, 0, SIGKILL, true);
}

static int buf_append(char **buf, size_t *len, const char *data, size_t n) {
        if (*len + n > RUN_OUTPUT_MAX)
                n = RUN_OUTPUT_MAX - *len;
        char *nb = realloc(*buf, *len + n + 1);
        if (!nb)
                return -ENOMEM;
        memcpy(nb + *len, data, n);
        *len += n;
        nb[*len] = '\0';
        *buf = nb;
        return 0;
}

void rt_ctl_run_result_done(struct rt_ctl_run_result *r) {
        if (!r)
                return;
        free(r->out);
        free(r->err);
        r->out = r->err = NULL;
        r->out_len = r->err_len = 0;
}

static void close_pair(int p[2]) {
        closep(&p[0]);
        closep(&p[1]);
        p[0] = p[1] = -EBADF;
}

int rt_ctl_run(const char *path, const char *const *argv, const char *const *envp,
               const void *stdin_data, size_t stdin_len, int timeout_ms,
               struct rt_ctl_run_result *ret, struct wr_err *e) {
        static uint64_t counter;
        _cleanup_close_ int fd = -EBADF;
        int in[2] = {-EBADF, -EBADF}, out[2] = {-EBADF, -EBADF}, er[2] = {-EBADF, -EBADF};
        int64_t deadline = timeout_ms < 0 ? -1 : now_ms() + timeout_ms;
        uint64_t id = ((uint64_t) getpid() << 32) | ++counter;
        size_t written = 0;
        bool spawned = false, exited = false, killed = false;
        int r;

        *ret = (struct rt_ctl_run_result){0};
        r = rt_ctl_connect(path, &fd, e);
        if (r < 0)
                return r;
        if (pipe2(in, O_CLOEXEC) < 0 || pipe2(out, O_CLOEXEC) < 0 || pipe2(er, O_CLOEXEC) < 0) {
                r = err_set(e, -errno, "pipe: %m");
                goto finish;
        }
        struct rt_spawn_req req = {.id = id, .argv = argv, .envp = envp};
        int stdio[3] = {in[0], out[1], er[1]};
        struct spawn_args sa = {&req, stdio};
        r = send_wait(fd, spawn_fn, &sa);
        closep(&in[0]);
        closep(&out[1]);
        closep(&er[1]);
        in[0] = out[1] = er[1] = -EBADF;
        if (r < 0) {
                err_set(e, r, "send spawn: %s", strerror(-r));
                goto finish;
        }
        if (!stdin_data || stdin_len == 0)
                closep(&in[1]), in[1] = -EBADF;
        else
                fcntl(in[1], F_SETFL, O_NONBLOCK);

        while (!exited || out[0] >= 0 || er[0] >= 0) {
                struct pollfd pfd[4] = {
                        {.fd = fd, .events = POLLIN},
                        {.fd = out[0], .events = POLLIN},
                        {.fd = er[0], .events = POLLIN},
                        {.fd = in[1], .events = POLLOUT},
                };
                int t = remaining(deadline);
                r = RETRY_EINTR(poll(pfd, 4, t));
                if (r < 0) {
                        r = err_set(e, -errno, "poll: %m");
                        goto finish;
                }
                if (r == 0 && deadline >= 0 && !killed) {
                        /* Timed out: kill the group, keep collecting until the exit. */
                        killed = true;
                        deadline = now_ms() + 5000;
                        if (spawned)
                                send_wait(fd, kill_fn, &id);
                        continue;
                } else if (r == 0 && killed) {
                        r = err_set(e, -ETIMEDOUT, "process did not exit after SIGKILL");
                        goto finish;
                }
                if (pfd[0].revents) {
                        struct rt_ctl_msg m;
                        int pfd_passed;
                        for (;;) {
                                r = rt_ctl_recv(fd, &m, &pfd_passed);
                                if (r == -EAGAIN)
                                        break;
                                if (r < 0) {
                                        err_set(e, r, "control connection: %s", strerror(-r));
                                        goto finish;
                                }
                                closep(&pfd_passed);
                                if (m.type == CTL_SPAWNED && m.id == id) {
                                        if (m.err < 0) {
                                                r = err_set(e, m.err, "spawn %s: %s", argv[0],
                                                            strerror(-m.err));
                                                goto finish;
                                        }
                                        spawned = true;
                                } else if (m.type == CTL_EXITED && m.id == id) {
                                        ret->status = m.status;
                                        exited = true;
                                }
                                rt_ctl_msg_done(&m);
                        }
                }
                for (int i = 1; i <= 2; i++) {
                        int *rfd = i == 1 ? &out[0] : &er[0];
                        if (!pfd[i].revents || *rfd < 0)
                                continue;
                        char chunk[65536];
                        ssize_t k = RETRY_EINTR(read(*rfd, chunk, sizeof(chunk)));
                        if (k <= 0) {
                                closep(rfd);
                                *rfd = -EBADF;
                                continue;
                        }
                        r = i == 1 ? buf_append(&ret->out, &ret->out_len, chunk, (size_t) k)
                                   : buf_append(&ret->err, &ret->err_len, chunk, (size_t) k);
                        if (r < 0) {
                                err_set(e, r, "out of memory");
                                goto finish;
                        }
                }
                if (pfd[3].revents && in[1] >= 0) {
                        ssize_t k = write(in[1], (const char *) stdin_data + written,
                                          stdin_len - written);
                        if (k > 0)
                                written += (size_t) k;
                        if ((k < 0 && errno != EAGAIN) || written == stdin_len) {
                                closep(&in[1]);
                                in[1] = -EBADF;
                        }
                }
        }
        r = killed ? err_set(e, -ETIMEDOUT, "timed out after %d ms", timeout_ms) : 0;
        if (!ret->out && buf_append(&ret->out, &ret->out_len, "", 0) < 0)
                r = -ENOMEM;
        if (!ret->err && buf_append(&ret->err, &ret->err_len, "", 0) < 0)
                r = -ENOMEM;
finish:
        close_pair(in);
        close_pair(out);
        close_pair(er);
        if (r < 0)
                rt_ctl_run_result_done(ret);
        return r;
}
