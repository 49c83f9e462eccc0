/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* Exec sessions: one process in a running sandbox, its pipes (or PTY), a
 * bounded output log (sandbox/exec-log.h), at most one attached client at
 * a time, stdin, signals, resize, a timeout, a typed exit, and a short
 * afterlife for finished sessions so that a late re-attach still gets the
 * tail and the exit. docs/exec.md describes what clients can count on.
 *
 * Domain types only: the API layer (api/exec.c) validates requests and
 * converts protobuf to and from these.
 *
 * Errors: functions that can fail return 0 (or a documented positive
 * value) or a negative errno, with the context (and the gRPC status to
 * answer with) in the optional struct wr_err.
 *
 * Ownership: sessions belong to the manager. A client holds a handle (a
 * struct sbx_exec *) from sbx_exec_start or sbx_exec_attach until it calls
 * sbx_exec_release (also after on_exited), unless on_detached took it away
 * first (then it must not touch the handle at all). Strings given in
 * callbacks are borrowed for the call.
 *
 * Threading: everything runs on the manager's loop thread. Callbacks run
 * from the loop, and also from within sbx_exec_attach (the replay; the
 * previous client's on_detached) and sbx_exec_resume_output; none reaches
 * a client after its sbx_exec_release. A callback may call any function
 * here, including sbx_exec_release on its own session. */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "basic/err.h"

struct sbx_manager;
struct sbx_exec;
struct sbx_user;
struct sbx_output; /* a piece of an exec's output log */

enum sbx_stream {
        SBX_STDOUT = 1,
        SBX_STDERR = 2,
};

/* How a process ended (docs/exec.md "Typed exits"). */
enum sbx_exit_reason {
        SBX_EXIT_UNSPECIFIED = 0,    /* none given: derived from the status (never reported) */
        SBX_EXIT_EXITED,             /* normal exit: exit_code is the status */
        SBX_EXIT_SIGNALED,           /* killed by a signal: 128 + signal */
        SBX_EXIT_TIMEOUT,            /* the timeout's SIGKILL */
        SBX_EXIT_OOM,                /* SIGKILLed while the sandbox's OOM-kill count rose */
        SBX_EXIT_SANDBOX_TERMINATED, /* ended while its sandbox was terminating */
};

/* What to run (ExecStart). Borrowed for the duration of sbx_exec_start. */
struct sbx_exec_spec {
        const char *sandbox; /* id or name; non-empty */
        char *const *argv;   /* NULL-terminated; argv[0] non-empty */
        char *const *env;    /* NULL-terminated "K=V" (K non-empty, no '='), or NULL;
                              * added to (and overriding) the sandbox's */
        const char *workdir; /* absolute, or relative to the sandbox's; NULL or "" = the
                              * sandbox's */
        const char *user;    /* "NAME", "UID", "NAME:GROUP", "UID:GID"; NULL or "" = the
                              * sandbox's user */
        bool pty;            /* a terminal (stdout carries it; no stderr) */
        bool detach;         /* keep running when the client lets go */
        uint16_t cols, rows; /* PTY window at start; 0 = init's default */
        double timeout_secs; /* SIGKILL of the process group after it; 0 = none; 0..1e7 */
        /* user as sbx_exec_user_lookup found it (on a worker, through
         * warren-init); required with a user on a sandbox of this host
         * (INTERNAL without it: nothing is looked up on the loop) */
        const struct sbx_user *resolved_user;
};

/* Which exec to attach to (ExecAttach). Borrowed for the call. */
struct sbx_exec_target {
        const char *sandbox; /* id or name; non-empty */
        const char *exec_id; /* "ex-N"; non-empty */
        uint64_t offset;     /* output offset to resume from */
};

/* One exec as listed by sbx_exec_list. */
struct sbx_exec_info {
        const char *exec_id; /* borrowed from the session */
        char *const *argv;   /* borrowed, NULL-terminated */
        size_t argc;
        int pid; /* inside the sandbox; 0 before the spawn was confirmed */
        bool running, pty;
        int64_t started_ns; /* CLOCK_REALTIME */
        /* when !running: */
        int exit_code, signo;
        enum sbx_exit_reason reason;
};

struct sbx_exec_callbacks {
        /* The process runs (pid inside the sandbox; 0 when it never ran).
         * Always the first callback of an attachment. */
        void (*on_started)(struct sbx_exec *x, int pid, const char *exec_id, void *userdata);
        /* Output bytes, with their offset in the exec's output sequence.
         * data stays valid during the call only, unless the callee takes
         * a hold on buf (sbx_output_hold): then until sbx_output_release.
         * Return 1 to pause output (the process then blocks on a full pipe)
         * until sbx_exec_resume_output; 0 to go on. */
        int (*on_output)(struct sbx_exec *x, enum sbx_stream stream, const void *data, size_t n,
                         uint64_t offset, struct sbx_output *buf, void *userdata);
        /* The process ended and its output was delivered. exit_code is the
         * exit status, or 128 + signal. The last callback; the client
         * still calls sbx_exec_release (it may do so from here). */
        void (*on_exited)(struct sbx_exec *x, int exit_code, int signo, enum sbx_exit_reason reason,
                          void *userdata);
        /* stdin accepts data again after sbx_exec_write_stdin returned 1. */
        void (*on_stdin_ready)(struct sbx_exec *x, void *userdata);
        /* Output between the offsets was dropped from the bounded log before
         * this client saw it (re-attach from an old offset). */
        void (*on_gap)(struct sbx_exec *x, uint64_t from, uint64_t to, void *userdata);
        /* Another client attached (sbx_exec_attach): this one is detached,
         * no further callback reaches it and it must not use x any more
         * (not even sbx_exec_release). */
        void (*on_detached)(struct sbx_exec *x, void *userdata);
};

/* Keep the bytes on_output gave (they are never changed) alive beyond the
 * callback, for sending them without a copy. The piece may outlive its
 * session and the manager. */
void sbx_output_hold(struct sbx_output *buf);

/* Let go of a hold; takes void * to serve as a release callback. */
void sbx_output_release(void *buf);

/* Called on the loop thread with what sbx_exec_user_lookup found: r 0
 * and *u, or a negative errno and e (INVALID_ARGUMENT: no such user;
 * FAILED_PRECONDITION: the sandbox stopped; UNAVAILABLE: its init did not
 * answer). u and e are borrowed for the call. */
typedef void (*sbx_exec_user_cb)(int r, const struct sbx_user *u, const struct wr_err *e,
                                 void *userdata);

/* Look user ("NAME", "UID", "NAME:GROUP", "UID:GID") up in the running
 * sandbox's /etc/passwd and /etc/group, opened for reading by its
 * warren-init (FILE_OPEN on a files connection, files.h) on a worker
 * thread, never on the loop: init may be the workload's to stall. Returns
 * 0 (cb follows on the loop, exactly once: a work item of its loop), 1 when nothing is to be looked
 * up here (no user; a K8S sandbox or a paused one: sbx_exec_start decides), or a negative errno
 * with e (NOT_FOUND, FAILED_PRECONDITION as sbx_exec_start). Loop thread. */
int sbx_exec_user_lookup(struct sbx_manager *m, const char *sandbox, const char *user,
                         sbx_exec_user_cb cb, void *userdata, struct wr_err *e);

/* Start spec->argv in the running sandbox spec->sandbox, with cb/userdata
 * as the attached client. The spec must satisfy the constraints stated in
 * struct sbx_exec_spec (the API layer validates requests). A program or
 * working directory that does not exist is not an error here: the session
 * reports a line on stderr and exit code 127 (126 for other exec
 * failures), like a shell.
 * Errors: -ENOENT (sandbox unknown), -EBUSY (sandbox not running or
 * terminating: FAILED_PRECONDITION), -EINVAL (user unknown; command,
 * environment or workdir too large or malformed for init), -ENOMEM,
 * -EPIPE and other send errors (init unreachable); then no callback runs
 * and nothing is left behind.
 * On success *ret is the caller's handle until sbx_exec_release; no
 * callback has run yet. */
int sbx_exec_start(struct sbx_manager *m, const struct sbx_exec_spec *spec,
                   const struct sbx_exec_callbacks *cb, void *userdata, struct sbx_exec **ret,
                   struct wr_err *e);

/* Attach to exec t->exec_id of sandbox t->sandbox (running, or finished
 * and still retained): callbacks replay from t->offset (on_started first,
 * on_gap when the log no longer holds t->offset, output, on_exited once
 * over), then follow live; stdin, signals and resize work on the handle.
 * One client at a time: an attached one is detached first (on_detached).
 * Callbacks may run before this returns; *ret is set before the first.
 * Errors: -ENOENT (NOT_FOUND: sandbox or exec unknown or forgotten),
 * -EINVAL (OUT_OF_RANGE: offset beyond the output so far). On success *ret
 * is the caller's handle until sbx_exec_release. */
int sbx_exec_attach(struct sbx_manager *m, const struct sbx_exec_target *t,
                    const struct sbx_exec_callbacks *cb, void *userdata, struct sbx_exec **ret,
                    struct wr_err *e);

/* Queue stdin bytes (copied). Returns 0, 1 when the queue is full (wait
 * for on_stdin_ready before writing more; the bytes were taken), -EPIPE
 * once stdin is closed or the process ended, -ENOMEM. */
int sbx_exec_write_stdin(struct sbx_exec *x, const void *data, size_t n);

/* Close stdin after what is queued (EOF for the process; ^D on a PTY).
 * Returns 0, or -EPIPE when stdin broke. */
int sbx_exec_close_stdin(struct sbx_exec *x);

/* Send signo (1..64) to the process, or to its whole process group.
 * Errors: -EINVAL (signo out of range), -ESRCH (the process is over), send
 * errors. */
int sbx_exec_signal(struct sbx_exec *x, int signo, bool group);

/* Set the PTY window size. Errors: -ENOTTY without a PTY, -ESRCH before
 * the terminal exists or after it closed, ioctl errors. */
int sbx_exec_resize(struct sbx_exec *x, unsigned cols, unsigned rows);

/* Resume output after on_output returned 1 (callbacks may run from
 * here). NULL ok. */
void sbx_exec_resume_output(struct sbx_exec *x);

/* The caller lets go of its handle: no callback reaches it after this. A
 * process still running is killed (its process group, SIGKILL) unless it
 * was started detached; a detached one runs on, its output kept in the
 * log (when the log is full of unread output the process blocks until a
 * client attaches). A finished session stays attachable while retained
 * (detached, or its exit not delivered; at most 32 per manager, oldest
 * forgotten first). NULL ok. */
void sbx_exec_release(struct sbx_exec *x);

/* The exec's id ("ex-N", unique within its sandbox), owned by x. */
const char *sbx_exec_id(const struct sbx_exec *x);

/* The execs of a sandbox (id or name, non-empty; live or not): running
 * ones and finished ones still retained, oldest first. *ret (*n entries)
 * is the caller's to free(); the strings in it belong to the sessions: use
 * them before returning to the loop. Errors: -ENOENT (sandbox unknown),
 * -ENOMEM. */
int sbx_exec_list(struct sbx_manager *m, const char *sandbox, struct sbx_exec_info **ret, size_t *n,
                  struct wr_err *e);

/* Size of the output log of each exec started from now on (0 = the
 * default 16 MiB; at least 4 MiB): 3/4 kept behind what the attached
 * client was sent (re-attach from its last offset), 1/4 read ahead of it
 * (then the process blocks). Returns 0 or -ENOMEM. */
int sbx_exec_set_log_size(struct sbx_manager *m, size_t bytes);

/* Whether execs started from now on are spooled and held by init, so that
 * they survive a warrend restart (default on; docs/exec.md "Across
 * restarts"). Off saves the spool's cost (~0.4 CPU-s per GiB of output)
 * and runs them as before a restart-proof warrend. Returns 0 or -ENOMEM. */
int sbx_exec_set_spool(struct sbx_manager *m, bool on);

/* Forget every finished exec and let go of the manager's exec state
 * (sbx_manager_free calls it once the sandboxes are gone). Sessions still
 * held by a client, and output pieces still held, live on until released.
 * NULL ok. */
void sbx_exec_forget_all(struct sbx_manager *m);
