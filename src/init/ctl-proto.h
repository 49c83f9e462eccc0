/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* Wire format of the warren-init control protocol, shared by warren-init
 * (src/init) and the daemon-side client (src/runtime/ctl.[ch]).
 *
 * Transport: AF_UNIX SOCK_SEQPACKET. The runtime binds the listening socket
 * at <sandbox dir>/ctl.sock on the host and hands it to warren-init as fd 3.
 * Every message is exactly one datagram: a struct ctl_hdr followed by
 * hdr.len bytes of payload (hdr.len == datagram size - sizeof(struct
 * ctl_hdr)); at most CTL_MSG_MAX bytes in all. Both ends run on the same
 * host, so integers are in host byte order. Reserved fields must be zero.
 *
 * Requests (daemon -> init) and the answer each one gets:
 *   SPAWN     hdr.id = exec id chosen by the daemon (unique among running
 *             processes); payload struct ctl_spawn + strings; SCM_RIGHTS
 *             carries exactly 3 fds (stdin, stdout, stderr) unless
 *             CTL_SPAWN_PTY is set (then none).
 *             -> SPAWNED {pid, err}; for PTY spawns the pty master travels
 *             with SPAWNED as one SCM_RIGHTS fd. err != 0: nothing runs
 *             and no EXITED follows.
 *   SIGNAL    hdr.id = request id; payload struct ctl_signal -> RESULT.
 *   RESIZE    hdr.id = exec id of a PTY exec; struct ctl_resize -> RESULT.
 *   KILL_ALL  hdr.id = request id; struct ctl_kill_all -> RESULT.
 *   PING      hdr.id = anything; no payload -> PONG (same id, struct
 *             ctl_pong payload).
 *   LIST      hdr.id = request id; no payload -> LIST_REPLY (same id):
 *             an array of struct ctl_list_entry (all running processes that
 *             were spawned through the protocol; truncated to what fits).
 * Events (init -> daemon, unsolicited):
 *   EXITED    hdr.id = exec id; struct ctl_exited. Sent to the connection
 *             that spawned the process, or if that one is gone to the most
 *             recently accepted live connection, or kept (bounded, oldest
 *             dropped) until a connection is accepted.
 * A request that cannot be parsed is answered with RESULT {err} (SPAWNED
 * {err} when the header says SPAWN), hdr.id echoed when the header could be
 * read, 0 otherwise. */

#include <stdint.h>

#define CTL_MAGIC 0x57494e31u /* "WIN1": warren-init protocol, version 1 */
/* Requests (daemon -> init) may be as large as the kernel's ARG_MAX, so
 * that argv/env that execve(2) would take also fit a SPAWN; the daemon
 * raises its socket's send buffer to match (SO_SNDBUFFORCE). Replies and
 * events (init -> daemon) are small. */
#define CTL_MSG_MAX (2u << 20) /* request datagram, header included */
#define CTL_REPLY_MAX 65536u   /* reply/event datagram, header included */
#define CTL_ARGS_MAX 4096u     /* argc + envc */
#define CTL_PATH_MAX 4096u     /* cwd, bytes including the NUL */
#define CTL_STDIO_FDS 3

enum ctl_type {
        /* requests */
        CTL_SPAWN = 1,
        CTL_SIGNAL = 2,
        CTL_RESIZE = 3,
        CTL_KILL_ALL = 4,
        CTL_PING = 5,
        CTL_LIST = 6,
        /* replies and events */
        CTL_SPAWNED = 0x81,
        CTL_EXITED = 0x82,
        CTL_RESULT = 0x83,
        CTL_PONG = 0x84,
        CTL_LIST_REPLY = 0x85,
};

struct ctl_hdr {
        uint32_t magic;    /* CTL_MAGIC */
        uint32_t type;     /* enum ctl_type */
        uint32_t len;      /* payload bytes after this header */
        uint32_t reserved; /* 0 */
        uint64_t id;
};

enum ctl_spawn_flags {
        CTL_SPAWN_SETSID = 1u << 0, /* new session (and process group) */
        CTL_SPAWN_PTY = 1u << 1,    /* allocate a pty; implies SETSID */
        CTL_SPAWN_FLAGS_ALL = CTL_SPAWN_SETSID | CTL_SPAWN_PTY,
};
/* Without SETSID the child still gets its own process group (setpgid(0, 0)),
 * so that group signals never reach init. */

/* SPAWN payload: this struct, then strings_len bytes holding cwd, argv[0..argc)
 * and envp[0..envc), each NUL-terminated, back to back, nothing else.
 * argc >= 1 and argv[0] non-empty; each env entry "NAME=value" with a
 * non-empty NAME; cwd empty means "/", a relative cwd is taken from "/". */
struct ctl_spawn {
        uint32_t flags; /* enum ctl_spawn_flags */
        uint32_t uid;
        uint32_t gid;
        uint16_t cols; /* PTY window size (0 = leave the default) */
        uint16_t rows;
        uint32_t argc;
        uint32_t envc;
        uint32_t strings_len;
        uint32_t reserved; /* 0 */
};

struct ctl_spawned {
        int32_t pid; /* in the sandbox's pid namespace; 0 on failure */
        int32_t err; /* positive errno; 0 = the program was exec'd */
};

struct ctl_exited {
        int32_t pid;
        int32_t status; /* wait status as from waitpid(2) */
};

enum ctl_signal_flags {
        CTL_SIGNAL_GROUP = 1u << 0, /* kill(-pgid): the whole process group */
        CTL_SIGNAL_FLAGS_ALL = CTL_SIGNAL_GROUP,
};

/* Target: the process spawned with exec id target_id when pid == 0, else
 * the process pid (any process in the sandbox but init). With GROUP the
 * target's process group is signalled (refused with EPERM if that is
 * init's own group). */
struct ctl_signal {
        uint64_t target_id;
        int32_t pid;
        int32_t signo;  /* 1..64 */
        uint32_t flags; /* enum ctl_signal_flags */
        uint32_t reserved;
};

struct ctl_resize {
        uint16_t cols;
        uint16_t rows;
        uint32_t reserved;
};

/* kill(-1, signo) from PID 1: every process in the sandbox but init. */
struct ctl_kill_all {
        int32_t signo;
        uint32_t reserved;
};

struct ctl_result {
        int32_t err; /* positive errno; 0 = done */
        uint32_t reserved;
};

struct ctl_pong {
        int32_t init_pid;  /* 1 when init is PID 1 of the sandbox */
        uint32_t nprocs;   /* running processes spawned through the protocol */
        uint32_t nconns;   /* live daemon connections */
        uint32_t npending; /* EXITED events waiting for a connection */
};

struct ctl_list_entry {
        uint64_t id;
        int32_t pid;
        uint32_t flags; /* the SPAWN flags */
};

_Static_assert(sizeof(struct ctl_hdr) == 24, "ctl_hdr layout");
_Static_assert(sizeof(struct ctl_spawn) == 32, "ctl_spawn layout");
_Static_assert(sizeof(struct ctl_signal) == 24, "ctl_signal layout");
_Static_assert(sizeof(struct ctl_list_entry) == 16, "ctl_list_entry layout");

/* The most list entries a LIST_REPLY can carry. */
#define CTL_LIST_MAX ((CTL_REPLY_MAX - sizeof(struct ctl_hdr)) / sizeof(struct ctl_list_entry))
