/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* Daemon-side client of the warren-init control protocol (wire format in
 * init/ctl-proto.h, behaviour in docs/init.md).
 *
 * Built as its own static library `ctl_lib` / `ctl_dep`, declared in
 * src/init/meson.build (next to the wire format), so that the runtime
 * library, the daemon and test tools can all depend on it.
 *
 * Trust: warren-init runs inside the sandbox, where a workload running as
 * root might take it over. Everything received from init is therefore
 * decoded strictly (rt_ctl_msg_decode) and passed fds are checked.
 *
 * Sockets are SOCK_SEQPACKET; every send either queues the whole message or
 * fails. On a non-blocking socket a full peer queue gives -EAGAIN: wait for
 * POLLOUT and send again. */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "basic/err.h"
#include "init/ctl-proto.h"

enum rt_spawn_flags {
        RT_SPAWN_SETSID = CTL_SPAWN_SETSID, /* new session (always a new process group) */
        RT_SPAWN_PTY = CTL_SPAWN_PTY,       /* init allocates a pty; implies SETSID */
        RT_SPAWN_HOLD = CTL_SPAWN_HOLD,     /* init keeps the daemon's ends until RELEASE ALL */
};

struct rt_spawn_req {
        uint64_t id;             /* exec id, unique among the sandbox's running execs */
        const char *const *argv; /* NULL-terminated, argv[0] non-empty */
        const char *const *envp; /* NULL-terminated "NAME=value" entries; NULL = empty */
        const char *cwd;         /* NULL or "" = "/"; relative = from "/" */
        uint32_t uid;
        uint32_t gid;
        uint32_t flags;      /* enum rt_spawn_flags */
        uint16_t cols, rows; /* initial pty size (0 = kernel default) */
        /* RT_SPAWN_HOLD without PTY: the daemon's own ends (stdin write end,
         * stdout and stderr read ends), borrowed; init keeps copies of them
         * so that they outlive this daemon. NULL otherwise. */
        const int *held;
};

/* One decoded message from init. */
struct rt_ctl_msg {
        uint32_t type; /* CTL_SPAWNED, CTL_EXITED, CTL_RESULT, CTL_PONG, CTL_LIST_REPLY, ... */
        uint64_t id;   /* exec id (SPAWNED, EXITED) or request id */
        int32_t pid;   /* SPAWNED (0 on failure), EXITED */
        int err;       /* SPAWNED, RESULT: 0 or a negative errno from init */
        int status;    /* EXITED: wait status (WIFEXITED/WIFSIGNALED hold) */
        struct ctl_pong pong;        /* PONG */
        struct ctl_list_entry *list; /* LIST_REPLY: n_list entries, heap */
        size_t n_list;
        struct ctl_hold *holds; /* HOLDS_REPLY: n_holds entries, heap */
        size_t n_holds;
        uint32_t fdmask;               /* TAKEN (err 0): enum ctl_hold_fd, the fds that came */
        struct ctl_file_listed listed; /* FILE_LISTED (err is also in .err) */
};

/* One entry of a FILE_LISTED memfd (rt_ctl_file_entry_next). */
struct rt_ctl_file_entry {
        struct ctl_file_entry e;
        const char *name; /* name_len bytes (no NUL); points into the buffer */
        const char *link; /* link_len bytes (no NUL); points into the buffer */
};

/* Connect to the control socket at path. *ret_fd is SOCK_SEQPACKET,
 * CLOEXEC and NON-BLOCKING (for uv_poll); the caller owns it. Errors:
 * -ENAMETOOLONG, and connect(2)'s (-ENOENT, -ECONNREFUSED: init gone). */
int rt_ctl_connect(const char *path, int *ret_fd, struct wr_err *e);

/* Encode a SPAWN request into buf[0..size). Returns the datagram length,
 * -EINVAL for an invalid request (no argv, empty argv[0], env entry without
 * "NAME=", flags out of range, uid/gid -1), -EMSGSIZE when it exceeds
 * CTL_MSG_MAX or CTL_ARGS_MAX or size. */
int rt_ctl_spawn_encode(const struct rt_spawn_req *req, void *buf, size_t size);

/* Send SPAWN. stdio: the child's stdin, stdout, stderr (borrowed: the caller
 * closes its copies after this returns), required unless RT_SPAWN_PTY, then
 * must be NULL. Answer: SPAWNED with the same id (and the pty master fd).
 * Returns 0, -EAGAIN, encode errors, or sendmsg(2) errors (-EPIPE when init
 * is gone). */
int rt_ctl_send_spawn(int fd, const struct rt_spawn_req *req, const int stdio[3]);

/* Send SIGNAL: to the exec target_id when pid == 0, else to pid; group =
 * its whole process group. Answer: RESULT with id req_id. */
int rt_ctl_send_signal(int fd, uint64_t req_id, uint64_t target_id, pid_t pid, int signo,
                       bool group);

/* Send RESIZE for the pty of exec exec_id. Answer: RESULT with id exec_id.
 * (The daemon may instead ioctl(TIOCSWINSZ) its own master fd copy.) */
int rt_ctl_send_resize(int fd, uint64_t exec_id, uint16_t cols, uint16_t rows);

/* Send KILL_ALL: signo to every process in the sandbox but init. Answer:
 * RESULT with id req_id. */
int rt_ctl_send_kill_all(int fd, uint64_t req_id, int signo);

/* Send PING (answer PONG) or LIST (answer LIST_REPLY), both with id. */
int rt_ctl_send_ping(int fd, uint64_t id);
int rt_ctl_send_list(int fd, uint64_t id);

/* Send HOLDS (answer HOLDS_REPLY, same id; an init older than holds
 * answers RESULT -EOPNOTSUPP), TAKE of the hold of exec_id (answer TAKEN,
 * with copies of the held fds), RELEASE of what (enum ctl_release_what)
 * of that hold (answer RESULT, id exec_id). */
int rt_ctl_send_holds(int fd, uint64_t id);
int rt_ctl_send_take(int fd, uint64_t exec_id);
int rt_ctl_send_release(int fd, uint64_t exec_id, uint32_t what);

/* Send FILE_OPEN (ctl-proto.h): path (absolute, in the sandbox) opened by
 * init with flags (enum ctl_file_open_flags), mode, uid/gid. Answer:
 * FILE_OPENED with id, the fd passed when err is 0. -EINVAL for a path
 * that is not absolute or longer than CTL_PATH_MAX, or unknown flags
 * (init checks the rest). */
int rt_ctl_send_file_open(int fd, uint64_t id, const char *path, uint32_t flags, uint32_t mode,
                          uint32_t uid, uint32_t gid);

/* Blocking FILE_OPEN on a connection used for nothing else (a "files
 * connection": init routes no events to it): send, wait up to timeout_ms
 * (-1 = forever) for FILE_OPENED with id. *ret_fd: the opened fd (CLOEXEC,
 * the caller's; not checked: the caller fstats it). Returns 0, init's
 * errno (-ENOENT, -ELOOP, -EXDEV: a path that would leave the root, ...),
 * -EOPNOTSUPP (an init without FILE_OPEN), -ETIMEDOUT, -ECONNRESET. */
int rt_ctl_file_open(int fd, uint64_t id, const char *path, uint32_t flags, uint32_t mode,
                     uint32_t uid, uint32_t gid, int timeout_ms, int *ret_fd);

/* Send FILE_MKDIR .. FILE_LIST (type) with id: flags (enum
 * ctl_file_op_flags), mode, uid/gid, path (absolute), path2 (RENAME's to,
 * SYMLINK's target, else NULL), dev/ino (RENAME with EXPECT). Answer: RESULT
 * (FILE_LISTED for LIST) with id. -EINVAL for what init would refuse that
 * is cheap to see here (a path not absolute or too long, unknown flags). */
int rt_ctl_send_file_op(int fd, uint64_t id, uint32_t type, uint32_t flags, uint32_t mode,
                        uint32_t uid, uint32_t gid, const char *path, const char *path2,
                        uint64_t dev, uint64_t ino);

/* Blocking FILE_MKDIR .. FILE_LIST on a files connection (as
 * rt_ctl_file_open): send, wait up to timeout_ms for the answer with id.
 * Returns 0 or init's errno (negative), -EOPNOTSUPP (an init without the
 * type), -ETIMEDOUT, -ECONNRESET. FILE_LIST: *ret_listed and *ret_memfd
 * (a sealed memfd, CLOEXEC, the caller's; pass NULLs for other types). */
int rt_ctl_file_op(int fd, uint64_t id, uint32_t type, uint32_t flags, uint32_t mode, uint32_t uid,
                   uint32_t gid, const char *path, const char *path2, uint64_t dev, uint64_t ino,
                   int timeout_ms, struct ctl_file_listed *ret_listed, int *ret_memfd);

/* Decode the entry at *pos of a FILE_LISTED memfd's bytes buf[0..len)
 * (pure; the sandbox wrote them): returns 1 and fills *ret (pointing into
 * buf) and advances *pos, 0 at the end (*pos == len), -EBADMSG for a
 * truncated entry, a name that is empty, longer than CTL_FILE_NAME_MAX,
 * "." or "..", or holds '/' or NUL, a link target on anything but a
 * symlink, or one with a NUL or longer than CTL_PATH_MAX - 1. */
int rt_ctl_file_entry_next(const void *buf, size_t len, size_t *pos, struct rt_ctl_file_entry *ret);

/* Decode one datagram from init, strictly. nfds: how many fds came with it
 * (only a successful SPAWNED, FILE_OPENED or FILE_LISTED may carry one, a successful
 * TAKEN exactly one per fdmask bit). Returns 0 and fills *ret (free with rt_ctl_msg_done),
 * or -EBADMSG (malformed), -EMSGSIZE, -ENOMEM. */
int rt_ctl_msg_decode(const void *buf, size_t n, int nfds, struct rt_ctl_msg *ret);

/* Receive and decode one message without blocking. *ret_passed_fd gets the
 * fd passed with it (a pty master, CLOEXEC, owned by the caller) or -EBADF.
 * Returns 0; -EAGAIN when nothing is queued; -ECONNRESET when init closed
 * the connection (or died); -EBADMSG for a malformed message (consumed; the
 * caller should drop the connection); recvmsg(2) errors. */
int rt_ctl_recv(int fd, struct rt_ctl_msg *ret, int *ret_passed_fd);

/* Like rt_ctl_recv, but a TAKEN's fds (up to 4, in fdmask bit order, each
 * checked: pipes are FIFOs, a pty a master) go to ret_fds[0..*ret_nfds),
 * owned by the caller; a SPAWNED's pty master is ret_fds[0]. */
int rt_ctl_recv_fds(int fd, struct rt_ctl_msg *ret, int ret_fds[4], int *ret_nfds);

/* Like rt_ctl_recv, but waits up to timeout_ms (-1 = forever) for a message.
 * -ETIMEDOUT when none came. */
int rt_ctl_recv_wait(int fd, struct rt_ctl_msg *ret, int *ret_passed_fd, int timeout_ms);

/* Free what a decoded message holds; the struct itself stays. NULL-safe. */
void rt_ctl_msg_done(struct rt_ctl_msg *m);

/* What rt_ctl_run collected. */
struct rt_ctl_run_result {
        int status; /* wait status of the process */
        char *out;  /* stdout bytes (NUL-terminated, heap) */
        size_t out_len;
        char *err; /* stderr bytes (NUL-terminated, heap) */
        size_t err_len;
};

/* Blocking convenience for tests and tools: connect to path, spawn argv
 * (envp may be NULL; cwd "/", uid/gid 0) with pipes, feed stdin_data (may be
 * NULL) then close stdin, collect stdout/stderr (each capped at 16 MiB) and
 * the exit status. timeout_ms < 0 waits forever; on timeout the process
 * group is SIGKILLed and -ETIMEDOUT returned. Spawn failure returns init's
 * errno (e.g. -ENOENT for a missing program). Free with
 * rt_ctl_run_result_done. */
int rt_ctl_run(const char *path, const char *const *argv, const char *const *envp,
               const void *stdin_data, size_t stdin_len, int timeout_ms,
               struct rt_ctl_run_result *ret, struct wr_err *e);

/* Free the buffers of a run result. NULL-safe. */
void rt_ctl_run_result_done(struct rt_ctl_run_result *r);
