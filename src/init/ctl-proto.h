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
 *   HOLDS     hdr.id = request id; no payload -> HOLDS_REPLY (same id): an
 *             array of struct ctl_hold, every exec spawned with
 *             CTL_SPAWN_HOLD that was not released yet, running or exited.
 *   TAKE      hdr.id = exec id of a hold; no payload -> TAKEN (same id):
 *             struct ctl_taken, and (err == 0) copies of the held fds as
 *             SCM_RIGHTS, in the order of the CTL_HOLD_FD_* bits of fdmask.
 *             init keeps its own copies.
 *   FILE_OPEN hdr.id = request id; struct ctl_file_open + path -> FILE_OPENED
 *             (same id): struct ctl_file_opened, and (err == 0) the opened
 *             fd as one SCM_RIGHTS fd. The path is resolved by init from its
 *             own root, inside it (RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS:
 *             no symlink or ".." leads out). Phase 4a of privilege separation
 *             (docs/privsep.md "Phase 4, files, as built").
 *   FILE_MKDIR, FILE_REMOVE, FILE_RENAME, FILE_SYMLINK
 *             hdr.id = request id; struct ctl_file_op + its paths -> RESULT
 *             (same id). Done by init itself, as the sandbox's root inside
 *             the sandbox, every path resolved like FILE_OPEN's; the last
 *             component is handled with *at() calls on its parent's fd that
 *             never follow it (phase 4a-2, docs/privsep.md).
 *   FILE_LIST hdr.id = request id; struct ctl_file_op + path -> FILE_LISTED
 *             (same id): struct ctl_file_listed, and (err == 0) a sealed
 *             memfd holding `count` entries (struct ctl_file_entry + name +
 *             link target each), one directory level, unsorted.
 *   RELEASE   hdr.id = exec id of a hold; struct ctl_release -> RESULT.
 *             STDIN: close the held stdin write end (the daemon closed
 *             stdin: the process must see EOF). ALL: forget the hold, close
 *             every held fd (the daemon has all output and the exit).
 * Events (init -> daemon, unsolicited):
 *   EXITED    hdr.id = exec id; struct ctl_exited. Sent to the connection
 *             that spawned the process, or if that one is gone to the most
 *             recently accepted live connection that made a request other
 *             than FILE_OPEN (else the most recent one that made none yet;
 *             never a "files connection", whose requests were all
 *             FILE_OPEN), or kept (bounded, oldest dropped) until a
 *             connection is accepted. The exit of a held
 *             exec is also kept with its hold (HOLDS) until RELEASE ALL.
 *
 * Holds (CTL_SPAWN_HOLD) let exec sessions survive a daemon restart: init
 * keeps a copy of the daemon's ends of the process's stdio (pipes: stdin
 * write end, stdout and stderr read ends; PTY: the master it keeps anyway)
 * and never reads or writes them, so nothing is lost while no daemon is
 * connected: the pipe is the buffer, and a full pipe blocks the writer.
 * A restarted daemon asks HOLDS, TAKEs the fds back and reads on.
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
        CTL_HOLDS = 7,
        CTL_TAKE = 8,
        CTL_RELEASE = 9,
        CTL_FILE_OPEN = 10,
        CTL_FILE_MKDIR = 11,   /* phase 4a-2: struct ctl_file_op + path -> RESULT */
        CTL_FILE_REMOVE = 12,  /* struct ctl_file_op + path -> RESULT */
        CTL_FILE_RENAME = 13,  /* struct ctl_file_op + from + to -> RESULT */
        CTL_FILE_SYMLINK = 14, /* struct ctl_file_op + path + target -> RESULT */
        CTL_FILE_LIST = 15,    /* struct ctl_file_op + path -> FILE_LISTED + memfd */
        /* replies and events */
        CTL_SPAWNED = 0x81,
        CTL_EXITED = 0x82,
        CTL_RESULT = 0x83,
        CTL_PONG = 0x84,
        CTL_LIST_REPLY = 0x85,
        CTL_HOLDS_REPLY = 0x86,
        CTL_TAKEN = 0x87,
        CTL_FILE_OPENED = 0x88,
        CTL_FILE_LISTED = 0x89,
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
        /* keep the daemon's ends of the stdio until RELEASE ALL: without
         * PTY, SCM_RIGHTS then carries 6 fds: the child's stdin, stdout,
         * stderr, then the daemon's stdin write end, stdout read end,
         * stderr read end (pipes); with PTY, none (init keeps its master) */
        CTL_SPAWN_HOLD = 1u << 2,
        CTL_SPAWN_FLAGS_ALL = CTL_SPAWN_SETSID | CTL_SPAWN_PTY | CTL_SPAWN_HOLD,
};
#define CTL_HOLD_FDS 3 /* the daemon's ends passed with a HOLD spawn (no PTY) */
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

enum ctl_hold_state {
        CTL_HOLD_EXITED = 1u << 0, /* the process ended: status is valid */
        CTL_HOLD_STDIN = 1u << 1,  /* the stdin write end is still held */
        CTL_HOLD_STATE_ALL = CTL_HOLD_EXITED | CTL_HOLD_STDIN,
};

/* One entry of HOLDS_REPLY. */
struct ctl_hold {
        uint64_t id;
        int32_t pid;    /* > 0 */
        int32_t status; /* wait status when EXITED, else 0 */
        uint32_t flags; /* the SPAWN flags (HOLD set) */
        uint32_t state; /* enum ctl_hold_state */
};

/* Which held fds a TAKEN carries, in this order. */
enum ctl_hold_fd {
        CTL_HOLD_FD_STDIN = 1u << 0,  /* pipe write end */
        CTL_HOLD_FD_STDOUT = 1u << 1, /* pipe read end */
        CTL_HOLD_FD_STDERR = 1u << 2, /* pipe read end */
        CTL_HOLD_FD_PTY = 1u << 3,    /* pty master (alone) */
        CTL_HOLD_FD_ALL = 0xf,
};

struct ctl_taken {
        int32_t err;     /* positive errno (ESRCH: no such hold); 0 = fds follow */
        uint32_t fdmask; /* enum ctl_hold_fd: which fds came, in bit order */
};

enum ctl_release_what {
        CTL_RELEASE_STDIN = 1u << 0,
        CTL_RELEASE_ALL = 1u << 1,
        CTL_RELEASE_WHAT_ALL = CTL_RELEASE_STDIN | CTL_RELEASE_ALL,
};

struct ctl_release {
        uint32_t what; /* enum ctl_release_what, not 0 */
        uint32_t reserved;
};

/* FILE_OPEN: a closed set of open modes (not the O_* values). Exactly one
 * of PATH, READ, WRITE, RDWR. CREATE needs WRITE or RDWR, and EXCL; OWNER
 * (fchown the created file to uid:gid, ids inside the sandbox) needs
 * CREATE. PATH allows only DIRECTORY and NOFOLLOW besides. A file opened
 * for reading or writing must be a regular file or a directory (opened
 * O_NONBLOCK | O_NOCTTY first, so a FIFO or a terminal never blocks init
 * nor becomes its controlling tty; refused with EINVAL). */
enum ctl_file_open_flags {
        CTL_FOPEN_PATH = 1u << 0,      /* O_PATH */
        CTL_FOPEN_READ = 1u << 1,      /* O_RDONLY */
        CTL_FOPEN_WRITE = 1u << 2,     /* O_WRONLY */
        CTL_FOPEN_RDWR = 1u << 3,      /* O_RDWR */
        CTL_FOPEN_CREATE = 1u << 4,    /* O_CREAT (mode & 07777) */
        CTL_FOPEN_EXCL = 1u << 5,      /* O_EXCL */
        CTL_FOPEN_TRUNC = 1u << 6,     /* O_TRUNC */
        CTL_FOPEN_DIRECTORY = 1u << 7, /* O_DIRECTORY */
        CTL_FOPEN_NOFOLLOW = 1u << 8,  /* O_NOFOLLOW: the last component */
        CTL_FOPEN_OWNER = 1u << 9,     /* fchown(uid, gid) after CREATE */
        CTL_FOPEN_FLAGS_ALL = 0x3ff,
};

/* FILE_OPEN payload: this struct, then path_len bytes: the path, absolute
 * ("/" is the sandbox's root), NUL-terminated (path_len counts the NUL, at
 * most CTL_PATH_MAX), no other NUL. uid/gid must be 0 without OWNER, and
 * not (uint32_t) -1 with it. */
struct ctl_file_open {
        uint32_t flags; /* enum ctl_file_open_flags */
        uint32_t mode;  /* CREATE: the new file's mode, <= 07777; else 0 */
        uint32_t uid;
        uint32_t gid;
        uint32_t path_len;
        uint32_t reserved; /* 0 */
};

struct ctl_file_opened {
        int32_t err; /* positive errno; 0 = the fd follows */
        uint32_t reserved;
};

/* FILE_MKDIR .. FILE_LIST (phase 4a-2). Each type takes a closed set of
 * flags (below); every other field must be 0 unless the type uses it. */
enum ctl_file_op_flags {
        /* MKDIR, SYMLINK: fchown the new entry to uid:gid (ids inside the
         * sandbox); without it the entry is init's (the sandbox's root) */
        CTL_FOP_OWNER = 1u << 0,
        /* MKDIR: make missing parents too (0755, same owner); an existing
         * directory at path is then success */
        CTL_FOP_PARENTS = 1u << 1,
        /* REMOVE: a directory and everything under it (never following a
         * symlink, never entering another mount: EBUSY) */
        CTL_FOP_RECURSIVE = 1u << 2,
        /* RENAME: EEXIST when to exists (renameat2 RENAME_NOREPLACE) */
        CTL_FOP_NOREPLACE = 1u << 3,
        /* RENAME: from must be the inode dev:ino (ESTALE otherwise): the
         * daemon's temp file, not what the sandbox put at its name */
        CTL_FOP_EXPECT = 1u << 4,
        /* LIST: the last component must be a directory, not a symlink to
         * one (the daemon's recursion never follows symlinks) */
        CTL_FOP_NOFOLLOW = 1u << 5,
        /* RENAME: before the rename, from (a regular file: EINVAL
         * otherwise) gets mode exactly; with EXPECT, checked first. The
         * daemon's writes: a temp file made 0600 gets its final mode (set-id
         * bits included) only once its data is written */
        CTL_FOP_CHMOD = 1u << 6,
        CTL_FOP_FLAGS_ALL = 0x7f,
};

/* Payload of FILE_MKDIR .. FILE_LIST: this struct, then path_len bytes
 * (an absolute path, NUL-terminated, no other NUL, at most CTL_PATH_MAX),
 * then path2_len bytes (RENAME: the destination, absolute; SYMLINK: the
 * link's target, any bytes but NUL, not empty; both NUL-terminated, at most
 * CTL_PATH_MAX; other types: 0). The flags each type takes:
 *   MKDIR   OWNER, PARENTS; mode <= 07777 (exactly, no umask)
 *   REMOVE  RECURSIVE
 *   RENAME  NOREPLACE, EXPECT (then dev and ino; else both 0), CHMOD (then
 *           mode <= 07777)
 *   SYMLINK OWNER
 *   LIST    NOFOLLOW
 * uid/gid: with OWNER, not (uint32_t) -1; else 0. mode: MKDIR, RENAME with
 * CHMOD; else 0. */
struct ctl_file_op {
        uint32_t flags; /* enum ctl_file_op_flags */
        uint32_t mode;
        uint32_t uid;
        uint32_t gid;
        uint32_t path_len;
        uint32_t path2_len;
        uint64_t dev; /* RENAME with EXPECT: st_dev of from, as init sees it */
        uint64_t ino;
};

/* FILE_LIST's answer. count <= CTL_FILE_LIST_MAX; fs_type is the listed
 * directory's statfs f_type (the daemon refuses or skips kernel file
 * systems); truncated: the directory held more entries than count. */
struct ctl_file_listed {
        int32_t err; /* positive errno; 0 = the memfd follows */
        uint32_t count;
        uint64_t fs_type;
        uint32_t truncated; /* 0 or 1 */
        uint32_t reserved;
};

/* One entry in FILE_LISTED's memfd: this struct, then name_len bytes of
 * the name (no NUL, no '/', not "." or "..", 1..255 bytes), then link_len
 * bytes of a symlink's target (0 for anything else; at most
 * CTL_PATH_MAX - 1). Ids as init sees them (inside the sandbox's user
 * namespace). */
struct ctl_file_entry {
        uint32_t mode; /* st_mode: type and permission bits */
        uint32_t uid;
        uint32_t gid;
        uint16_t name_len;
        uint16_t link_len;
        uint64_t size;
        int64_t mtime_ns;
};

#define CTL_FILE_LIST_MAX 65536u /* entries in one FILE_LISTED */
#define CTL_FILE_NAME_MAX 255u

_Static_assert(sizeof(struct ctl_file_op) == 40, "ctl_file_op layout");
_Static_assert(sizeof(struct ctl_file_listed) == 24, "ctl_file_listed layout");
_Static_assert(sizeof(struct ctl_file_entry) == 32, "ctl_file_entry layout");
_Static_assert(sizeof(struct ctl_file_open) == 24, "ctl_file_open layout");
_Static_assert(sizeof(struct ctl_hdr) == 24, "ctl_hdr layout");
_Static_assert(sizeof(struct ctl_spawn) == 32, "ctl_spawn layout");
_Static_assert(sizeof(struct ctl_signal) == 24, "ctl_signal layout");
_Static_assert(sizeof(struct ctl_list_entry) == 16, "ctl_list_entry layout");
_Static_assert(sizeof(struct ctl_hold) == 24, "ctl_hold layout");

/* The most list entries a LIST_REPLY can carry. */
#define CTL_LIST_MAX ((CTL_REPLY_MAX - sizeof(struct ctl_hdr)) / sizeof(struct ctl_list_entry))

/* The most holds a HOLDS_REPLY can carry. */
#define CTL_HOLDS_MAX ((CTL_REPLY_MAX - sizeof(struct ctl_hdr)) / sizeof(struct ctl_hold))
