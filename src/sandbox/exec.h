/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* Exec sessions: one process in a running sandbox, its pipes (or PTY), a
 * bounded output log, at most one attached client at a time, stdin,
 * signals, resize, a timeout, a typed exit, and a short afterlife for
 * finished sessions. docs/exec.md describes what clients can count on.
 * Everything runs on the loop thread. */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "basic/err.h"
#include "warren/v1/sandboxes.pb-c.h"

struct sbx_manager;
struct sbx_exec;

enum sbx_stream {
        SBX_STDOUT = 1,
        SBX_STDERR = 2,
};

struct sbx_output; /* a piece of an exec's output log */

struct sbx_exec_callbacks {
        /* The process runs (pid inside the sandbox). */
        void (*on_started)(struct sbx_exec *x, int pid, const char *exec_id, void *userdata);
        /* Output bytes, with their offset in the exec's output sequence.
         * data stays valid during the call only, unless the callee takes
         * a hold on buf (sbx_output_hold): then until sbx_output_release.
         * Return 1 to pause output (the process then blocks on a full pipe)
         * until sbx_exec_resume_output; 0 to go on. */
        int (*on_output)(struct sbx_exec *x, enum sbx_stream stream, const void *data, size_t n,
                         uint64_t offset, struct sbx_output *buf, void *userdata);
        /* The process ended and its output was delivered. exit_code is the
         * exit status, or 128 + signal. reason: WARREN__V1__EXIT_REASON__*.
         * The last callback. */
        void (*on_exited)(struct sbx_exec *x, int exit_code, int signo, int reason, void *userdata);
        /* stdin accepts data again after sbx_exec_write_stdin returned 1. */
        void (*on_stdin_ready)(struct sbx_exec *x, void *userdata);
        /* Output between the offsets was dropped from the bounded log before
         * this client saw it (re-attach from an old offset). */
        void (*on_gap)(struct sbx_exec *x, uint64_t from, uint64_t to, void *userdata);
        /* Another client attached (sbx_exec_attach): this one is detached,
         * no further callback reaches it and it must not use x any more. */
        void (*on_detached)(struct sbx_exec *x, void *userdata);
};

/* Keep the bytes on_output gave (they are never changed) alive beyond the
 * callback, for sending them without a copy. Loop thread only. */
void sbx_output_hold(struct sbx_output *buf);
/* Let go of a hold; takes void * to serve as a release callback. */
void sbx_output_release(void *buf);

/* Start a process as start says, in the running sandbox start->sandbox
 * (id or name). A program or working directory that does not exist is not
 * an RPC error: the session reports a line on stderr and exit code 127
 * (126 for other exec failures), like a shell. Errors: -ENOENT (sandbox
 * unknown), -EBUSY (sandbox not running: FAILED_PRECONDITION), -EINVAL
 * (bad argv/env/workdir/timeout), -EPIPE (init unreachable). The session
 * belongs to the manager; the caller holds a handle until
 * sbx_exec_release. */
int sbx_exec_start(struct sbx_manager *m, const Warren__V1__ExecStart *start,
                   const struct sbx_exec_callbacks *cb, void *userdata, struct sbx_exec **ret,
                   struct wr_err *e);

/* Queue stdin bytes. Returns 0, 1 when the queue is full (wait for
 * on_stdin_ready before writing more; the bytes were taken), -EPIPE once
 * stdin is closed or the process ended. */
int sbx_exec_write_stdin(struct sbx_exec *x, const void *data, size_t n);

/* Close stdin after what is queued (EOF for the process). */
int sbx_exec_close_stdin(struct sbx_exec *x);

/* Send signo to the process, or to its whole process group. */
int sbx_exec_signal(struct sbx_exec *x, int signo, bool group);

/* Set the PTY window size (-ENOTTY without a PTY). */
int sbx_exec_resize(struct sbx_exec *x, unsigned cols, unsigned rows);

/* Resume output after on_output returned 1. */
void sbx_exec_resume_output(struct sbx_exec *x);

/* The caller lets go: no callback runs after this. A process still running
 * is killed (its process group, SIGKILL) unless it was started detached; a
 * detached one runs on, its output kept in the log (when the log is full of
 * unread output the process blocks until a client attaches). NULL ok. */
void sbx_exec_release(struct sbx_exec *x);

/* Attach to the exec a->exec_id of sandbox a->sandbox (running, or finished
 * and still retained): callbacks replay from a->offset (on_started first,
 * on_gap when the log no longer holds a->offset, output, on_exited once
 * over), then follow live; stdin, signals and resize work on the handle.
 * One client at a time: an attached one is detached first (on_detached).
 * Errors: -ENOENT (NOT_FOUND: sandbox or exec unknown or forgotten),
 * -EINVAL (OUT_OF_RANGE: offset beyond the output so far). */
int sbx_exec_attach(struct sbx_manager *m, const Warren__V1__ExecAttach *a,
                    const struct sbx_exec_callbacks *cb, void *userdata, struct sbx_exec **ret,
                    struct wr_err *e);

/* The exec's id ("ex-N", unique within its sandbox). */
const char *sbx_exec_id(const struct sbx_exec *x);

/* The execs of a sandbox (id or name, live or not): running ones and
 * finished ones still retained, oldest first. *ret (n entries) is freed
 * with sbx_exec_list_free; the strings in it belong to the sessions (use
 * before returning to the loop). -ENOENT for an unknown sandbox. */
int sbx_exec_list(struct sbx_manager *m, const char *sandbox, Warren__V1__Process ***ret, size_t *n,
                  struct wr_err *e);
void sbx_exec_list_free(Warren__V1__Process **v, size_t n);

/* Size of the output log of each exec started from now on (0 = the
 * default 16 MiB; at least 4 MiB): 3/4 kept behind what the attached
 * client was sent (re-attach from its last offset), 1/4 read ahead of it
 * (then the process blocks). Returns 0 or -ENOMEM. */
int sbx_exec_set_log_size(struct sbx_manager *m, size_t bytes);

/* Forget every finished exec and let go of the manager's exec state
 * (sbx_manager_free calls it once the sandboxes are gone). Sessions still
 * held by a client, and output pieces still held, live on until released.
 * NULL ok. */
void sbx_exec_forget_all(struct sbx_manager *m);
