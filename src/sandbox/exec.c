/* SPDX-License-Identifier: Apache-2.0 */
/* Exec sessions: one process in a sandbox, its pipes (or PTY), its output
 * log (exec-log.h), at most one attached client at a time, stdin, signals,
 * timeout, typed exit, and a short afterlife for finished sessions so that
 * a late re-attach still gets the tail and the exit.
 *
 * Output path: pipe → log chunk (read straight into the chunk) → attached
 * client from the log's cursor. The log keeps up to 3/4 of its size behind
 * the cursor (bytes handed to the rpc layer that the client may not have
 * received when it dies: its transport buffers and our send queue; a
 * re-attach resumes from the client's own offset inside them) and up to
 * 1/4 ahead of it (read but not yet delivered). When the part ahead is
 * full the pipes are no longer read and the process blocks on its full
 * pipe, with or without a client attached (Docker's blocking log mode:
 * nothing is dropped while someone may still read it). Only a session
 * nobody will read (not attached and not detached, or over and not
 * attached) drops its oldest bytes, which a later attach sees as a gap, as
 * it does for an offset older than the history kept.
 *
 * Across a warrend restart (docs/exec.md "Across restarts"): warren-init
 * holds a copy of our ends of the pipes (CTL_SPAWN_HOLD) and the exit, and
 * the output goes pipe → spool file on the host (splice: a kill -9 leaves
 * every byte in the pipe or in the file) → log chunk (exec-spool.h). A
 * restarted warrend rebuilds each session from its spool and the fds init
 * hands back (sbx_exec_recover, at the end of this file); a graceful stop
 * lets held sessions go without an exit (sbx_exec_leave_all).
 *
 * A session's process lifecycle (x->state):
 *
 *   SPAWNING ───init: spawned───▶ RUNNING
 *      │                            │
 *      │ spawn failed,              │ init: exited,
 *      │ the sandbox ends           │ the sandbox ends
 *      ▼                            │
 *   EXITED ◀────────────────────────┘
 *      │   (status known; the pipes are read to their end)
 *      │   both output streams closed (EOF, or the sandbox ends)
 *      ▼
 *   FINISHED (exit recorded, handles closing, off the sandbox's list;
 *      │      attachable while retained: detached, or exit not delivered)
 *      │   more than MAX_RETAINED finished ones, or the manager goes
 *      │   (sbx_exec_forget_all)
 *      ▼
 *   FORGOTTEN (not attachable, not listed; freed once no client, no
 *              callback in progress and every handle closed)
 *
 * States only move down (a late message from init changes nothing). A
 * start that fails after the session was made (a pipe, a handle, the
 * send to init) goes straight to FORGOTTEN without ever being tracked.
 * Alongside: what the attached client has been given (x->delivery: reset
 * by each attach, kept after a release because a finished session whose
 * exit was delivered is not retained), stdin (x->in_state), and the flags
 * that are independent of both: pty, detach, paused (the client's send
 * queue is full), in_full (stdin queue over its high-water mark),
 * oom_known, and which handles exist (out_open[], timer_open). */
#include "sandbox/exec.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <termios.h>
#include <time.h>

#include "basic/log.h"
#include "basic/macro.h"
#include "runtime/ctl.h"
#include "runtime/runtime.h"
#include "sandbox/exec-log.h"
#include "sandbox/exec-spool.h"
#include "sandbox/sandbox-internal.h"
#include "sandbox/files.h"
#include "sandbox/user.h"
#include "store/store.h"

/* Read size hint when FIONREAD says nothing. */
#define MIN_READ 4096
#define PIPE_SIZE (1024 * 1024)
#define STDIN_HIGH_WATER (1024 * 1024)
/* Finished sessions kept for a late attach (per manager, oldest go first). */
#define MAX_RETAINED 32
/* A non-detached exec picked up after a restart is killed (as when its
 * client goes away) unless a client attaches within this. */
#define ADOPT_GRACE_MS 60000
/* Spool bytes the log dropped are punched out in steps of at least this. */
#define SPOOL_PUNCH_STEP (4u << 20)
/* Run records no longer needed are punched out of .meta in steps of at
 * least this. */
#define META_PUNCH_STEP (64u << 10)
/* The most of a .meta file read back (argv is at most 2 MiB; the rest are
 * 16-byte run records, one per switch between stdout and stderr). */
#define SPOOL_META_MAX (64u << 20)

enum { OUT_STDOUT = 0, OUT_STDERR = 1 };

enum exec_state {
        EXEC_SPAWNING,
        EXEC_RUNNING,
        EXEC_EXITED,
        EXEC_FINISHED,
        EXEC_FORGOTTEN,
};

/* What the attached client (or the last one) was given. */
enum exec_delivery {
        DELIVERY_NONE,    /* nothing yet: `started` goes first */
        DELIVERY_STARTED, /* `started`, then output */
        DELIVERY_EXITED,  /* `exited` too: the session is over for it */
};

enum exec_stdin {
        STDIN_CLOSED,   /* not opened yet (PTY before the spawn), or closed */
        STDIN_OPEN,     /* in_fd and in_poll exist */
        STDIN_DRAINING, /* open; closed once the queue is written */
};

/* The manager's exec state (struct sbx_manager.exec). */
struct sbx_exec_state {
        struct sbx_exec *head, *tail; /* every tracked session not yet freed, oldest first */
        size_t log_size;
        bool no_spool; /* --no-exec-spool */
        struct sbx_exec_log_pool *pool;
        /* The manager let go (sbx_exec_forget_all): the state is freed with
         * its last session. */
        bool orphaned;
};

struct sbx_exec {
        struct sbx_exec_state *st;            /* NULL until tracked */
        struct sbx *sb;                       /* NULL once the process is no longer tracked */
        struct sbx_exec *next;                /* in sb->execs while tracked */
        struct sbx_exec *reg_next, *reg_prev; /* in st's list */
        uint64_t id;
        char id_str[24];
        char sb_id[32];
        char **argv;
        int64_t started_ns;
        uint64_t oom_base;
        bool oom_known;

        enum exec_state state;
        enum exec_delivery delivery;
        const struct sbx_exec_callbacks *cb; /* NULL when nobody is attached */
        void *userdata;
        bool pty, detach, paused;
        int refs;    /* callbacks in progress: no free while > 0 */
        int handles; /* uv handles initialized and not yet closed */

        int out_fd[2];
        uv_poll_t out_poll[2];
        bool out_open[2]; /* out_poll[i] initialized and not closed */

        enum exec_stdin in_state;
        int in_fd;
        uv_poll_t in_poll;
        bool in_full;
        uint8_t *in_buf;
        size_t in_len;

        uv_timer_t timer;
        bool timer_open;

        int pid, status;
        enum sbx_exit_reason reason; /* forced (timeout, sandbox ended), or UNSPECIFIED */
        int exit_code, exit_signo;
        enum sbx_exit_reason exit_reason;

        struct sbx_exec_log log;

        /* The spool (exec-spool.h): the output and the exit on the host,
         * for a warrend restart. spool_base "<sandbox dir>/execs/<id>" or
         * NULL when there is none (init without holds, spool not made). */
        char *spool_base;
        int spool_fd, meta_fd; /* -EBADF once closed (or broken) */
        uint32_t spool_flags;  /* the header's flags */
        uint64_t meta_end;     /* where the next run record goes */
        int run_stream;        /* stream of the last run recorded; 0 none */
        uint64_t punched;      /* spool bytes before this are punched out */
        uint64_t meta_punched; /* .meta bytes before this are punched out (or the header) */
        uint64_t meta_scan;    /* .meta run records before this were read back */
        uint64_t meta_keep;    /* .meta offset of the last record starting <= punched */
        bool held;             /* init keeps our ends (CTL_SPAWN_HOLD) */
        bool keep_files;       /* warrend stops: leave the spool for the next one */
        bool leaving;          /* warrend stops: no messages to init */
        bool adopted_nodetach; /* picked up after a restart, started without detach */
        uint64_t adopt_until;  /* uv_now() ms: adopted_nodetach ends then (killed) */
        uint64_t deadline_at;  /* uv_now() ms of the timeout's SIGKILL; 0 = none */
};

static int64_t now_ns(void) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        return (int64_t) ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* --- the manager's exec state --- */

static struct sbx_exec_state *state_get(struct sbx_manager *m) {
        if (m->exec)
                return m->exec;
        _cleanup_free_ struct sbx_exec_state *st = calloc(1, sizeof(*st));
        if (!st || sbx_exec_log_pool_new(&st->pool) < 0)
                return NULL;
        st->log_size = SBX_EXEC_LOG_SIZE_DEFAULT;
        m->exec = TAKE_PTR(st);
        return m->exec;
}

static void state_free(struct sbx_exec_state *st) {
        sbx_exec_log_pool_close(st->pool);
        free(st);
}

int sbx_exec_set_spool(struct sbx_manager *m, bool on) {
        struct sbx_exec_state *st = state_get(m);
        if (!st)
                return -ENOMEM;
        st->no_spool = !on;
        return 0;
}

int sbx_exec_set_log_size(struct sbx_manager *m, size_t bytes) {
        struct sbx_exec_state *st = state_get(m);
        if (!st)
                return -ENOMEM;
        st->log_size = bytes;
        return 0;
}

static void reg_add(struct sbx_exec_state *st, struct sbx_exec *x) {
        x->st = st;
        x->reg_prev = st->tail;
        if (st->tail)
                st->tail->reg_next = x;
        else
                st->head = x;
        st->tail = x;
}

static void reg_del(struct sbx_exec *x) {
        struct sbx_exec_state *st = x->st;
        if (!st)
                return;
        if (x->reg_prev)
                x->reg_prev->reg_next = x->reg_next;
        else
                st->head = x->reg_next;
        if (x->reg_next)
                x->reg_next->reg_prev = x->reg_prev;
        else
                st->tail = x->reg_prev;
        x->reg_next = x->reg_prev = NULL;
        x->st = NULL;
        if (st->orphaned && !st->head)
                state_free(st);
}

static struct sbx_exec *find(struct sbx *sb, uint64_t id) {
        for (struct sbx_exec *x = sb->execs; x; x = x->next)
                if (x->id == id)
                        return x;
        return NULL;
}

static void unlink_exec(struct sbx_exec *x) {
        if (!x->sb)
                return;
        for (struct sbx_exec **pp = &x->sb->execs; *pp; pp = &(*pp)->next)
                if (*pp == x) {
                        *pp = x->next;
                        break;
                }
        x->sb = NULL;
}

/* --- the spool (exec-spool.h) --- */

static void spool_close(struct sbx_exec *x) {
        x->spool_fd = safe_close(x->spool_fd);
        x->meta_fd = safe_close(x->meta_fd);
        if (x->spool_base && !x->keep_files) {
                char path[PATH_MAX];
                snprintf(path, sizeof(path), "%s.out", x->spool_base);
                (void) unlink(path);
                snprintf(path, sizeof(path), "%s.meta", x->spool_base);
                (void) unlink(path);
        }
        free(x->spool_base);
        x->spool_base = NULL;
}

/* Spooling failed: the exec goes on without (it will not survive a
 * restart), and the header says so. */
static void spool_broken(struct sbx_exec *x, int err) {
        if (x->spool_fd < 0)
                return;
        log_warn("exec %s of sandbox %s: spooling its output: %s (it will not survive a "
                 "warrend restart)",
                 x->id_str, x->sb_id, strerror(err));
        x->spool_flags |= SBX_SPOOL_BROKEN;
        (void) !pwrite(x->meta_fd, &x->spool_flags, sizeof(x->spool_flags), SBX_SPOOL_OFF_FLAGS);
        x->spool_fd = safe_close(x->spool_fd);
}

/* Record that bytes of stream follow from the log's end, before they are
 * spooled (a crash in between leaves an empty run). -1: spooling is off. */
static int spool_run(struct sbx_exec *x, int stream) {
        if (x->spool_fd < 0)
                return -1;
        if (x->run_stream == stream)
                return 0;
        struct sbx_spool_run r = {
                .offset = x->log.end, .stream = (uint32_t) stream, .magic = SBX_SPOOL_RUN_MAGIC};
        if (pwrite(x->meta_fd, &r, sizeof(r), (off_t) x->meta_end) != (ssize_t) sizeof(r)) {
                spool_broken(x, errno ? errno : EIO);
                return -1;
        }
        x->meta_end += sizeof(r);
        x->run_stream = stream;
        return 0;
}

/* Read up to room bytes of stream from fd into dst, spooling them at the
 * log's end; like read(2). From a pipe the bytes move into the spool with
 * splice(2) first (a crash leaves them in the pipe or in the file, never
 * neither), then are copied from the page cache; a PTY is read, then
 * written to the spool. */
static ssize_t spool_read(struct sbx_exec *x, int fd, int stream, uint8_t *dst, size_t room,
                          bool empty) {
        /* FIONREAD said 0: the read only tells EAGAIN from EOF, so no run
         * record first (it would mostly be empty); should bytes arrive in
         * between, they are spooled all the same and recorded after. */
        if (x->spool_fd < 0 || (!empty && spool_run(x, stream) < 0))
                return read(fd, dst, room);
        off_t at = (off_t) x->log.end;
        if (x->pty) {
                ssize_t n = read(fd, dst, room);
                if (n > 0 && pwrite(x->spool_fd, dst, (size_t) n, at) != n)
                        spool_broken(x, errno ? errno : EIO);
                return n;
        }
        loff_t off = at;
        ssize_t n = splice(fd, NULL, x->spool_fd, &off, room, SPLICE_F_NONBLOCK);
        if (n < 0 && errno != EAGAIN && errno != EINTR) {
                spool_broken(x, errno);
                return read(fd, dst, room);
        }
        if (n <= 0)
                return n;
        size_t got = 0;
        while (got < (size_t) n) {
                ssize_t k = pread(x->spool_fd, dst + got, (size_t) n - got, at + (off_t) got);
                if (k <= 0) {
                        /* the bytes are in the spool but not in memory */
                        log_warn("exec %s of sandbox %s: reading its spool back: %s", x->id_str,
                                 x->sb_id, k < 0 ? strerror(errno) : "short read");
                        errno = EIO;
                        return -1;
                }
                got += (size_t) k;
        }
        if (empty)
                (void) spool_run(x, stream); /* offset: still the log's end */
        return n;
}

/* Append a message of the daemon's own (not the process's) to the log and
 * the spool. */
static void log_message(struct sbx_exec *x, int stream, const char *msg, size_t n) {
        off_t at = (off_t) x->log.end;
        bool spool = spool_run(x, stream) == 0;
        if (sbx_exec_log_append(&x->log, stream, msg, n) < 0)
                return;
        if (spool && pwrite(x->spool_fd, msg, n, at) != (ssize_t) n)
                spool_broken(x, errno ? errno : EIO);
}

/* Punch out the run records that only describe bytes punched out of .out:
 * every one before the last that starts at or before x->punched (that one
 * says what the first byte kept is). Each record is read back once; the
 * punched ones read as zeros, a prefix the decoder skips. */
static void spool_trim_meta(struct sbx_exec *x) {
        struct sbx_spool_run rec[256];
        while (x->meta_scan + sizeof(rec[0]) <= x->meta_end) {
                size_t want = (size_t) MIN(sizeof(rec), x->meta_end - x->meta_scan);
                ssize_t n = pread(x->meta_fd, rec, want, (off_t) x->meta_scan);
                if (n < (ssize_t) sizeof(rec[0]))
                        return;
                size_t k = (size_t) n / sizeof(rec[0]), i;
                for (i = 0; i < k; i++) {
                        if (rec[i].magic != SBX_SPOOL_RUN_MAGIC)
                                continue; /* punched before a restart */
                        if (rec[i].offset > x->punched)
                                break;
                        x->meta_keep = x->meta_scan + i * sizeof(rec[0]);
                }
                x->meta_scan += i * sizeof(rec[0]);
                if (i < k)
                        break;
        }
        uint64_t to = x->meta_keep & ~(uint64_t) 4095;
        if (x->meta_keep == 0 || to < x->meta_punched + META_PUNCH_STEP)
                return;
        /* the first step zeroes the records in the header's last block */
        if (fallocate(x->meta_fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
                      (off_t) x->meta_punched, (off_t) (to - x->meta_punched)) == 0)
                x->meta_punched = to;
}

/* Punch out the spool bytes the log no longer keeps. */
static void spool_trim(struct sbx_exec *x) {
        if (x->spool_fd < 0)
                return;
        uint64_t upto = x->log.start & ~(uint64_t) 4095;
        if (upto < x->punched + SPOOL_PUNCH_STEP)
                return;
        (void) !pwrite(x->meta_fd, &upto, sizeof(upto), SBX_SPOOL_OFF_START);
        (void) fallocate(x->spool_fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
                         (off_t) x->punched, (off_t) (upto - x->punched));
        x->punched = upto;
        spool_trim_meta(x);
}

/* Ask init to let go of (part of) what it holds for x. */
static void ctl_release(struct sbx_exec *x, uint32_t what) {
        if (!x->held || x->leaving || !x->sb || x->sb->ctl_fd < 0)
                return;
        for (int tries = 0; tries < 5; tries++) {
                int r = rt_ctl_send_release(x->sb->ctl_fd, x->id, what);
                if (r != -EAGAIN)
                        return;
                struct pollfd p = {.fd = x->sb->ctl_fd, .events = POLLOUT};
                (void) poll(&p, 1, 1000);
        }
}

/* Make the spool of a new session: <sandbox dir>/execs/<id>.{out,meta}. */
static int spool_open(struct sbx_exec *x, struct sbx *sb, double timeout_secs) {
        const char *dir = sbx_dir(sb);
        if (!dir)
                return -ENOENT;
        char path[PATH_MAX];
        snprintf(path, sizeof(path), "%s/execs", dir);
        if (mkdir(path, 0700) < 0 && errno != EEXIST)
                return -errno;
        if (asprintf(&x->spool_base, "%s/execs/%llu", dir, (unsigned long long) x->id) < 0) {
                x->spool_base = NULL;
                return -ENOMEM;
        }
        snprintf(path, sizeof(path), "%s.out", x->spool_base);
        x->spool_fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
        snprintf(path, sizeof(path), "%s.meta", x->spool_base);
        x->meta_fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
        if (x->spool_fd < 0 || x->meta_fd < 0)
                return -errno;
        x->spool_flags = (x->pty ? SBX_SPOOL_PTY : 0) | (x->detach ? SBX_SPOOL_DETACH : 0);
        struct sbx_spool_hdr h = {
                .id = x->id,
                .started_ns = x->started_ns,
                .log_size = x->log.size,
                .deadline_ns =
                        timeout_secs > 0 ? x->started_ns + (int64_t) (timeout_secs * 1e9) : 0,
                .flags = x->spool_flags,
        };
        _cleanup_free_ uint8_t *b = NULL;
        int n = sbx_spool_meta_encode(&h, x->argv, &b);
        if (n < 0)
                return n;
        if (pwrite(x->meta_fd, b, (size_t) n, 0) != n)
                return errno ? -errno : -EIO;
        x->meta_end = x->meta_punched = x->meta_scan = (uint64_t) n;
        return 0;
}

/* The exec finished: record its exit (the spool is complete), then let
 * init forget it. */
static void spool_finish(struct sbx_exec *x) {
        if (x->meta_fd >= 0) {
                struct {
                        int32_t code, signo, reason;
                        uint32_t done;
                } ex = {x->exit_code, x->exit_signo, (int32_t) x->exit_reason, 1};
                (void) !pwrite(x->meta_fd, &ex, sizeof(ex), SBX_SPOOL_OFF_EXIT);
        }
        ctl_release(x, CTL_RELEASE_ALL);
        /* complete: a retained session holds no fds (the files stay until
         * it is freed) */
        x->spool_fd = safe_close(x->spool_fd);
        x->meta_fd = safe_close(x->meta_fd);
}

/* --- lifetime --- */

/* Kept after the end: detached sessions, and those whose exit no client
 * has seen. */
static bool retained(const struct sbx_exec *x) {
        return x->state != EXEC_FORGOTTEN && (x->detach || x->delivery != DELIVERY_EXITED);
}

static void maybe_free(struct sbx_exec *x) {
        if (x->refs > 0 || x->state < EXEC_FINISHED || x->cb || x->handles > 0 || retained(x))
                return;
        reg_del(x);
        spool_close(x);
        sbx_exec_log_clear(&x->log);
        if (x->argv)
                for (char **p = x->argv; *p; p++)
                        free(*p);
        free(x->argv);
        free(x->in_buf);
        free(x);
}

static void ref(struct sbx_exec *x) {
        x->refs++;
}

static void unref(struct sbx_exec *x) {
        if (--x->refs == 0)
                maybe_free(x);
}

/* Bound the finished sessions nobody is attached to. */
static void retain_trim(struct sbx_exec_state *st) {
        if (!st)
                return;
        size_t n = 0;
        for (struct sbx_exec *x = st->head; x; x = x->reg_next)
                n += x->state == EXEC_FINISHED && !x->cb && retained(x);
        for (struct sbx_exec *x = st->head, *nx; x && n > MAX_RETAINED; x = nx) {
                nx = x->reg_next;
                if (x->state == EXEC_FINISHED && !x->cb && retained(x)) {
                        x->state = EXEC_FORGOTTEN;
                        n--;
                        maybe_free(x);
                }
        }
}

static void handle_closed(uv_handle_t *h) {
        struct sbx_exec *x = h->data;
        x->handles--;
        maybe_free(x);
}

/* Close output stream i: its handle when it exists, its fd when open.
 * Safe on a half-built session and when already closed. */
static void close_out(struct sbx_exec *x, int i) {
        if (x->out_open[i]) {
                x->out_open[i] = false;
                uv_poll_stop(&x->out_poll[i]);
                uv_close((uv_handle_t *) &x->out_poll[i], handle_closed);
        }
        x->out_fd[i] = safe_close(x->out_fd[i]);
}

/* Close stdin and drop what is queued for it. Safe on a half-built session
 * and when already closed. */
static void close_in(struct sbx_exec *x) {
        /* init holds a copy of the write end: the process sees EOF only
         * once that one is closed too */
        if (x->in_state != STDIN_CLOSED && !x->pty && x->state < EXEC_EXITED)
                ctl_release(x, CTL_RELEASE_STDIN);
        if (x->in_state != STDIN_CLOSED) {
                x->in_state = STDIN_CLOSED;
                uv_poll_stop(&x->in_poll);
                uv_close((uv_handle_t *) &x->in_poll, handle_closed);
        }
        x->in_fd = safe_close(x->in_fd);
        free(x->in_buf);
        x->in_buf = NULL;
        x->in_len = 0;
}

static void close_timer(struct sbx_exec *x) {
        if (!x->timer_open)
                return;
        x->timer_open = false;
        uv_timer_stop(&x->timer);
        uv_close((uv_handle_t *) &x->timer, handle_closed);
}

/* Destroy a session that sbx_exec_start made but did not hand out: close
 * what was made (handles asynchronously; the memory goes with the last of
 * them). No callback runs. NULL ok. */
static void exec_destroy(struct sbx_exec *x) {
        if (!x)
                return;
        x->cb = NULL;
        x->state = EXEC_FORGOTTEN;
        close_out(x, OUT_STDOUT);
        close_out(x, OUT_STDERR);
        close_in(x);
        close_timer(x);
        maybe_free(x);
}
DEFINE_TRIVIAL_CLEANUP_FUNC(struct sbx_exec *, exec_destroy);

void sbx_output_hold(struct sbx_output *buf) {
        sbx_exec_log_hold(buf);
}

void sbx_output_release(void *buf) {
        sbx_exec_log_release(buf);
}

/* --- delivery to the attached client --- */

/* Nobody will read this session's unsent bytes in time: drop instead of
 * blocking. */
static bool may_drop(const struct sbx_exec *x) {
        return !x->cb && (!x->detach || x->state >= EXEC_EXITED);
}

static void deliver_exit(struct sbx_exec *x) {
        if (x->delivery == DELIVERY_EXITED || !x->cb)
                return;
        x->delivery = DELIVERY_EXITED;
        if (x->cb->on_exited)
                x->cb->on_exited(x, x->exit_code, x->exit_signo, x->exit_reason, x->userdata);
}

/* Give the attached client what it has not seen, until it is full. Ends
 * with the exit once the process is over and everything was delivered. */
static void pump(struct sbx_exec *x) {
        if (!x->cb || x->paused)
                return;
        if (x->delivery == DELIVERY_NONE) {
                /* Output may be read before init confirmed the spawn: it
                 * waits in the log, `started` goes first. */
                if (x->state == EXEC_SPAWNING)
                        return;
                x->delivery = DELIVERY_STARTED;
                if (x->cb->on_started)
                        x->cb->on_started(x, x->pid, x->id_str, x->userdata);
        }
        uint64_t from, to;
        if (x->cb && sbx_exec_log_take_gap(&x->log, &from, &to) && x->cb->on_gap)
                x->cb->on_gap(x, from, to, x->userdata);
        struct sbx_exec_log_piece p;
        while (x->cb && !x->paused && sbx_exec_log_next(&x->log, &p)) {
                int r = x->cb->on_output ? x->cb->on_output(x, (enum sbx_stream) p.stream, p.data,
                                                            p.n, p.offset, p.chunk, x->userdata)
                                         : 0;
                if (r > 0)
                        x->paused = true;
        }
        if (x->state >= EXEC_FINISHED && x->log.cursor >= x->log.end && !x->paused)
                deliver_exit(x);
}

/* The attached client (if any) is let go: on_detached, and no callback
 * reaches it after. */
static void detach_client(struct sbx_exec *x) {
        if (!x->cb)
                return;
        const struct sbx_exec_callbacks *old = x->cb;
        void *old_ud = x->userdata;
        x->cb = NULL;
        x->userdata = NULL;
        if (old->on_detached)
                old->on_detached(x, old_ud);
}

/* --- reading the process's output --- */

static void out_poll_cb(uv_poll_t *h, int status, int events);

/* Watch the open output streams for input, or stop. */
static void set_reading(struct sbx_exec *x, bool on) {
        for (int i = 0; i < 2; i++) {
                if (!x->out_open[i])
                        continue;
                bool active = uv_is_active((uv_handle_t *) &x->out_poll[i]);
                if (on && !active)
                        uv_poll_start(&x->out_poll[i], UV_READABLE, out_poll_cb);
                else if (!on && active)
                        uv_poll_stop(&x->out_poll[i]);
        }
}

static bool want_reading(struct sbx_exec *x) {
        return (x->out_open[0] || x->out_open[1]) && sbx_exec_log_has_room(&x->log, may_drop(x));
}

static void finish(struct sbx_exec *x);

static void maybe_finish(struct sbx_exec *x) {
        if (x->state == EXEC_EXITED && !x->out_open[OUT_STDOUT] && !x->out_open[OUT_STDERR])
                finish(x);
}

/* Read what stream i has into the log, until it would block, ends, or the
 * log is full of bytes the client has not taken. After the process exited,
 * "would block" means the stream is done (only orphaned grandchildren
 * could still write to it). */
static void drain(struct sbx_exec *x, int i) {
        int stream = i == OUT_STDOUT ? SBX_STDOUT : SBX_STDERR;
        while (x->out_open[i] && sbx_exec_log_has_room(&x->log, may_drop(x))) {
                int avail = 0;
                bool known = ioctl(x->out_fd[i], FIONREAD, &avail) == 0;
                bool empty = known && avail == 0 && !x->pty;
                if (!known || avail <= 0)
                        avail = MIN_READ;
                size_t room;
                uint8_t *dst = sbx_exec_log_reserve(&x->log, stream, (size_t) avail, &room);
                if (!dst)
                        break;
                ssize_t n = spool_read(x, x->out_fd[i], stream, dst, room, empty);
                int err = n < 0 ? errno : 0;
                /* Deliver in large messages: a full chunk, or what the pipe
                 * had once it is empty. */
                if (sbx_exec_log_commit(&x->log, n > 0 ? (size_t) n : 0))
                        pump(x);
                if (n > 0 || err == EINTR)
                        continue;
                if (err == EAGAIN) {
                        if (x->state >= EXEC_EXITED)
                                close_out(x, i);
                        break;
                }
                /* EOF, or EIO from a PTY master whose slave side closed. */
                close_out(x, i);
        }
        pump(x);
        set_reading(x, want_reading(x));
        spool_trim(x);
        maybe_finish(x);
}

static void out_poll_cb(uv_poll_t *h, int status, int events) {
        struct sbx_exec *x = h->data;
        int i = h == &x->out_poll[OUT_STDOUT] ? OUT_STDOUT : OUT_STDERR;
        ref(x);
        if (status < 0) {
                close_out(x, i);
                maybe_finish(x);
        } else
                drain(x, i);
        unref(x);
}

/* Deliver, then read on if the log has room again. */
static void kick(struct sbx_exec *x) {
        pump(x);
        if (x->state >= EXEC_FINISHED)
                return;
        if (x->state == EXEC_EXITED) {
                /* Nothing else wakes us: read to the end now. */
                for (int i = 0; i < 2; i++)
                        if (x->out_open[i])
                                drain(x, i);
                return;
        }
        set_reading(x, want_reading(x));
}

void sbx_exec_resume_output(struct sbx_exec *x) {
        if (!x || !x->paused)
                return;
        ref(x);
        x->paused = false;
        kick(x);
        unref(x);
}

/* The process is over and its output read: record how it ended. */
static void finish(struct sbx_exec *x) {
        if (x->state >= EXEC_FINISHED)
                return;
        x->state = EXEC_FINISHED;
        close_out(x, OUT_STDOUT);
        close_out(x, OUT_STDERR);
        close_in(x);
        close_timer(x);
        int code, signo = 0;
        enum sbx_exit_reason reason;
        if (WIFEXITED(x->status)) {
                code = WEXITSTATUS(x->status);
                reason = SBX_EXIT_EXITED;
        } else {
                signo = WIFSIGNALED(x->status) ? WTERMSIG(x->status) : SIGKILL;
                code = 128 + signo;
                reason = SBX_EXIT_SIGNALED;
        }
        if (x->reason != SBX_EXIT_UNSPECIFIED)
                reason = x->reason;
        else if (x->sb && x->sb->state != SBX_RUNNING)
                /* Ended by the sandbox's termination (its SIGTERM, or
                 * exiting on it during the grace period). */
                reason = SBX_EXIT_SANDBOX_TERMINATED;
        else if (signo == SIGKILL && x->oom_known && x->sb && x->sb->rt) {
                /* The OOM killer counts its kills in the sandbox's cgroup. */
                uint64_t n;
                if (rt_sandbox_oom_kills(x->sb->rt, &n) == 0 && n > x->oom_base)
                        reason = SBX_EXIT_OOM;
        }
        x->exit_code = code;
        x->exit_signo = signo;
        x->exit_reason = reason;
        spool_finish(x);
        unlink_exec(x);
        pump(x);
        retain_trim(x->st);
}

/* --- stdin --- */

static void in_poll_cb(uv_poll_t *h, int status, int events);

static int flush_stdin(struct sbx_exec *x) {
        while (x->in_len > 0) {
                ssize_t n = write(x->in_fd, x->in_buf, x->in_len);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0 && errno == EAGAIN)
                        break;
                if (n < 0) {
                        close_in(x);
                        return -EPIPE;
                }
                memmove(x->in_buf, x->in_buf + n, x->in_len - (size_t) n);
                x->in_len -= (size_t) n;
        }
        bool polling = uv_is_active((uv_handle_t *) &x->in_poll);
        if (x->in_len > 0 && !polling)
                uv_poll_start(&x->in_poll, UV_WRITABLE, in_poll_cb);
        else if (x->in_len == 0 && polling)
                uv_poll_stop(&x->in_poll);
        if (x->in_len == 0 && x->in_state == STDIN_DRAINING)
                close_in(x);
        return 0;
}

static void in_poll_cb(uv_poll_t *h, int status, int events) {
        struct sbx_exec *x = h->data;
        ref(x);
        if (status < 0)
                close_in(x);
        else {
                flush_stdin(x);
                if (x->in_state != STDIN_CLOSED && x->in_full && x->in_len < STDIN_HIGH_WATER / 2) {
                        x->in_full = false;
                        if (x->cb && x->cb->on_stdin_ready)
                                x->cb->on_stdin_ready(x, x->userdata);
                }
        }
        unref(x);
}

int sbx_exec_write_stdin(struct sbx_exec *x, const void *data, size_t n) {
        if (x->in_state != STDIN_OPEN)
                return -EPIPE;
        if (n == 0)
                return 0;
        uint8_t *b = realloc(x->in_buf, x->in_len + n);
        if (!b)
                return -ENOMEM;
        memcpy(b + x->in_len, data, n);
        x->in_buf = b;
        x->in_len += n;
        int r = flush_stdin(x);
        if (r < 0)
                return r;
        if (x->in_len >= STDIN_HIGH_WATER) {
                x->in_full = true;
                return 1;
        }
        return 0;
}

int sbx_exec_close_stdin(struct sbx_exec *x) {
        if (x->in_state == STDIN_CLOSED)
                return 0;
        if (x->pty) {
                /* A terminal has no separate stdin to close: send EOF (^D). */
                static const char eot = 4;
                return sbx_exec_write_stdin(x, &eot, 1) < 0 ? -EPIPE : 0;
        }
        x->in_state = STDIN_DRAINING;
        return flush_stdin(x);
}

/* --- signals, resize, timeout --- */

int sbx_exec_signal(struct sbx_exec *x, int signo, bool group) {
        if (signo <= 0 || signo >= 65)
                return -EINVAL;
        if (x->state >= EXEC_EXITED || !x->sb)
                return -ESRCH;
        return sbx_ctl_send_signal(x->sb, x->id, signo, group);
}

int sbx_exec_resize(struct sbx_exec *x, unsigned cols, unsigned rows) {
        if (!x->pty)
                return -ENOTTY;
        if (x->in_fd < 0)
                return -ESRCH;
        struct winsize ws = {.ws_col = (unsigned short) cols, .ws_row = (unsigned short) rows};
        if (ioctl(x->in_fd, TIOCSWINSZ, &ws) < 0)
                return -errno;
        /* a remote (K8S) sandbox's pty master is the relay's local copy:
         * the real one is in the Pod (RESIZE reaches it through the relay) */
        if (x->sb && x->sb->remote && x->state < EXEC_EXITED)
                return sbx_ctl_send_resize(x->sb, x->id, cols, rows);
        return 0;
}

static void timeout_cb(uv_timer_t *t) {
        struct sbx_exec *x = t->data;
        if (x->state >= EXEC_EXITED || !x->sb)
                return;
        uint64_t now = uv_now(x->sb->m->loop);
        if (x->adopted_nodetach && now >= x->adopt_until) {
                /* its client did not come back after the restart */
                x->adopted_nodetach = false;
                x->detach = false;
                sbx_ctl_send_signal(x->sb, x->id, SIGKILL, true);
                kick(x);
                return;
        }
        if (!x->deadline_at)
                return; /* no timeout: only the grace period was due */
        if (now < x->deadline_at) {
                /* woken for the grace period; the timeout is later */
                uint64_t next = x->deadline_at;
                if (x->adopted_nodetach && x->adopt_until < next)
                        next = x->adopt_until;
                uv_timer_start(&x->timer, timeout_cb, next - now, 0);
                return;
        }
        x->reason = SBX_EXIT_TIMEOUT;
        sbx_ctl_send_signal(x->sb, x->id, SIGKILL, true);
}

/* --- messages from init --- */

/* The process is over (status as from waitpid) before its output was read
 * to the end: read what is there, and finish once both streams closed. */
static void set_exited(struct sbx_exec *x, int status) {
        if (x->state >= EXEC_EXITED)
                return;
        x->state = EXEC_EXITED;
        x->status = status;
}

/* Take the PTY master init sent for a spawned PTY session: it carries the
 * terminal's output and, duplicated, stdin and resizes. */
static void pty_attach(struct sbx_exec *x, uv_loop_t *loop, int pty_fd) {
        (void) fcntl(pty_fd, F_SETFL, fcntl(pty_fd, F_GETFL) | O_NONBLOCK);
        x->out_fd[OUT_STDOUT] = pty_fd;
        int r = uv_poll_init(loop, &x->out_poll[OUT_STDOUT], pty_fd);
        if (r < 0) {
                /* Without its terminal nobody can see or drive the process:
                 * say so, kill it, and end with its exit. */
                char msg[160];
                int n = snprintf(msg, sizeof(msg), "warren: cannot watch the terminal: %s\n",
                                 uv_strerror(r));
                log_message(x, SBX_STDOUT, msg, (size_t) n);
                x->out_fd[OUT_STDOUT] = safe_close(x->out_fd[OUT_STDOUT]);
                if (x->sb)
                        (void) sbx_ctl_send_signal(x->sb, x->id, SIGKILL, true);
                return;
        }
        x->out_poll[OUT_STDOUT].data = x;
        x->out_open[OUT_STDOUT] = true;
        x->handles++;
        x->in_fd = fcntl(pty_fd, F_DUPFD_CLOEXEC, 3);
        if (x->in_fd >= 0) {
                if (uv_poll_init(loop, &x->in_poll, x->in_fd) < 0)
                        x->in_fd = safe_close(x->in_fd);
                else {
                        x->in_poll.data = x;
                        x->in_state = STDIN_OPEN;
                        x->handles++;
                        if (x->in_len)
                                flush_stdin(x);
                }
        }
        set_reading(x, sbx_exec_log_has_room(&x->log, may_drop(x)));
}

void sbx_exec_on_spawned(struct sbx *sb, uint64_t id, int pid, int err, int pty_fd) {
        struct sbx_exec *x = find(sb, id);
        if (!x) {
                safe_close(pty_fd);
                return;
        }
        ref(x);
        if (err) {
                /* Like a shell: a message on stderr and 127 / 126. */
                char msg[512];
                int n = snprintf(msg, sizeof(msg), "warren: cannot run the command: %s%s\n",
                                 strerror(err),
                                 err == ENOENT ? " (is the program in PATH, and does the "
                                                 "working directory exist?)"
                                               : "");
                log_message(x, x->pty ? SBX_STDOUT : SBX_STDERR, msg, (size_t) n);
                set_exited(x, (err == ENOENT ? 127 : 126) << 8);
                safe_close(pty_fd);
                close_out(x, OUT_STDOUT);
                close_out(x, OUT_STDERR);
                maybe_finish(x);
                unref(x);
                return;
        }
        if (x->state == EXEC_SPAWNING)
                x->state = EXEC_RUNNING;
        x->pid = pid;
        if (x->pty) {
                if (pty_fd < 0) {
                        set_exited(x, 126 << 8);
                        maybe_finish(x);
                        unref(x);
                        return;
                }
                pty_attach(x, sb->m->loop, pty_fd);
        }
        /* Output read before this waited for `started`: deliver it, and
         * read on if that made room. */
        kick(x);
        unref(x);
}

void sbx_exec_on_exited(struct sbx *sb, uint64_t id, int status) {
        struct sbx_exec *x = find(sb, id);
        if (!x || x->state >= EXEC_EXITED)
                return;
        ref(x);
        set_exited(x, status);
        sbx_journal_exec_ended(sb, x->id_str);
        for (int i = 0; i < 2; i++)
                if (x->out_open[i])
                        drain(x, i);
        maybe_finish(x);
        unref(x);
}

void sbx_exec_abort_all(struct sbx *sb, enum sbx_exit_reason reason) {
        while (sb->execs) {
                struct sbx_exec *x = sb->execs;
                ref(x);
                if (x->state < EXEC_EXITED) {
                        set_exited(x, SIGKILL);
                        x->reason = reason;
                }
                /* Keep what is already in the pipes (as far as the log
                 * takes it), then end. */
                for (int i = 0; i < 2; i++)
                        if (x->out_open[i])
                                drain(x, i);
                close_out(x, OUT_STDOUT);
                close_out(x, OUT_STDERR);
                finish(x);
                unref(x);
        }
}

/* --- start / attach / release --- */

static int running_exec(struct sbx_manager *m, const char *key, bool remote_ok, struct sbx **ret,
                        struct wr_err *e) {
        struct sbx *sb = remote_ok ? sbx_find_exec(m, key) : sbx_find_live(m, key);
        if (!sb) {
                struct store_sandbox row = {0};
                int r = sbx_lookup(m, key, &row, e);
                store_sandbox_clear(&row);
                if (r < 0)
                        return r;
                return err_setx(e, -EBUSY, WR_STATUS_FAILED_PRECONDITION, WR_FAULT_CLIENT,
                                "sandbox %s is not running (create a new one)", key);
        }
        if (sb->state != SBX_RUNNING || sb->ctl_fd < 0)
                return err_setx(e, -EBUSY, WR_STATUS_FAILED_PRECONDITION, WR_FAULT_CLIENT,
                                "sandbox %s is terminating", sb->id);
        *ret = sb;
        return 0;
}

int sbx_running(struct sbx_manager *m, const char *key, struct sbx **ret, struct wr_err *e) {
        return running_exec(m, key, false, ret, e);
}

/* The process's environment: the sandbox's, the user's HOME (when a user
 * was named), the request's, then TERM for a PTY unless set. */
static int build_env(const struct sbx *sb, const struct sbx_exec_spec *spec,
                     const struct sbx_user *user, char ***ret) {
        _cleanup_(sbx_env_freep) char **env = sbx_env_dup(sb->env);
        if (!env)
                return -ENOMEM;
        if (spec->user && *spec->user) {
                char home[sizeof(user->home) + 8];
                snprintf(home, sizeof(home), "HOME=%s", user->home[0] ? user->home : "/");
                if (sbx_env_set(&env, home) < 0)
                        return -ENOMEM;
        }
        for (char *const *kv = spec->env; kv && *kv; kv++)
                if (sbx_env_set(&env, *kv) < 0)
                        return -ENOMEM;
        if (spec->pty) {
                bool has = false;
                for (char **p = env; *p; p++)
                        has |= strncmp(*p, "TERM=", 5) == 0;
                if (!has && sbx_env_set(&env, "TERM=xterm-256color") < 0)
                        return -ENOMEM;
        }
        *ret = TAKE_PTR(env);
        return 0;
}

static char **argv_dup(char *const *argv) {
        size_t n = 0;
        while (argv[n])
                n++;
        char **v = calloc(n + 1, sizeof(char *));
        if (!v)
                return NULL;
        for (size_t i = 0; i < n; i++)
                if (!(v[i] = strdup(argv[i]))) {
                        sbx_env_free(v);
                        return NULL;
                }
        return v;
}

/* A new session for spec in sb: its id, argv copy and log, nothing opened
 * yet. Not tracked. */
static int exec_new(struct sbx_exec_state *st, struct sbx *sb, const struct sbx_exec_spec *spec,
                    struct sbx_exec **ret) {
        _cleanup_(exec_destroyp) struct sbx_exec *x = calloc(1, sizeof(*x));
        if (!x)
                return -ENOMEM;
        x->out_fd[0] = x->out_fd[1] = x->in_fd = -EBADF;
        x->spool_fd = x->meta_fd = -EBADF;
        x->state = EXEC_SPAWNING;
        sbx_exec_log_init(&x->log, st->log_size, st->pool);
        x->argv = argv_dup(spec->argv);
        if (!x->argv)
                return -ENOMEM;
        x->pty = spec->pty;
        x->detach = spec->detach;
        x->started_ns = now_ns();
        x->id = ++sb->next_exec_id;
        snprintf(x->id_str, sizeof(x->id_str), "ex-%llu", (unsigned long long) x->id);
        snprintf(x->sb_id, sizeof(x->sb_id), "%s", sb->id);
        if (sb->rt && rt_sandbox_oom_kills(sb->rt, &x->oom_base) == 0)
                x->oom_known = true;
        *ret = TAKE_PTR(x);
        return 0;
}

static void close_fds(int (*fds)[3]) {
        for (int i = 0; i < 3; i++)
                (*fds)[i] = safe_close((*fds)[i]);
}

/* The pipes of a non-PTY session: x keeps the read ends of stdout and
 * stderr and the write end of stdin, each with its poll handle; the
 * child's ends go to child[]. */
static int open_pipes(struct sbx_exec *x, uv_loop_t *loop, int child[3]) {
        for (int i = 0; i < 3; i++) {
                int p[2];
                if (pipe2(p, O_CLOEXEC) < 0)
                        return -errno;
                if (i == 0) {
                        child[0] = p[0];
                        x->in_fd = p[1];
                } else {
                        x->out_fd[i - 1] = p[0];
                        child[i] = p[1];
                        (void) fcntl(p[0], F_SETPIPE_SZ, PIPE_SIZE);
                }
        }
        /* uv_poll_init makes the fds non-blocking. */
        for (int i = 0; i < 2; i++) {
                int r = uv_poll_init(loop, &x->out_poll[i], x->out_fd[i]);
                if (r < 0)
                        return r;
                x->out_poll[i].data = x;
                x->out_open[i] = true;
                x->handles++;
        }
        int r = uv_poll_init(loop, &x->in_poll, x->in_fd);
        if (r < 0)
                return r;
        x->in_poll.data = x;
        x->in_state = STDIN_OPEN;
        x->handles++;
        return 0;
}

/* ---- user lookup (sbx_exec_user_lookup) ---- */

struct user_job {
        uv_work_t w;
        struct sbx_fs fs;
        char *spec;
        struct sbx_user user;
        struct wr_err err;
        int r;
        sbx_exec_user_cb cb;
        void *userdata;
};

static void user_work(uv_work_t *w) {
        struct user_job *j = w->data;
        if ((j->r = sbx_fs_root(&j->fs, &j->err)) < 0)
                return;
        struct sbx_etc etc;
        if ((j->r = sbx_file_etc(&j->fs, &etc)) < 0) {
                err_setx(&j->err, j->r, WR_STATUS_UNAVAILABLE, WR_FAULT_WORKLOAD,
                         "start.user: warren-init of sandbox %s did not answer while its "
                         "/etc/passwd was read; try again, or give a numeric uid:gid",
                         j->fs.id);
                return;
        }
        j->r = sbx_user_resolve_etc(&etc, j->spec, "start.user", &j->user, &j->err);
        sbx_etc_clear(&etc);
}

static void user_done(uv_work_t *w, int status) {
        struct user_job *j = w->data;
        if (status < 0 && j->r == 0)
                j->r = err_set(&j->err, status, "start.user: lookup cancelled");
        j->cb(j->r, j->r < 0 ? NULL : &j->user, &j->err, j->userdata);
        sbx_fs_clear(&j->fs);
        err_clear(&j->err);
        free(j->spec);
        free(j);
}

int sbx_exec_user_lookup(struct sbx_manager *m, const char *sandbox, const char *user,
                         sbx_exec_user_cb cb, void *userdata, struct wr_err *e) {
        struct sbx *sb;
        if (!user || !*user)
                return 1;
        int r = running_exec(m, sandbox, true, &sb, e);
        if (r < 0)
                return r;
        if (sb->remote || sb->paused)
                return 1;
        struct user_job *j = calloc(1, sizeof(*j));
        if (!j || !(j->spec = strdup(user))) {
                free(j);
                return err_set(e, -ENOMEM, "exec: out of memory");
        }
        if ((r = sbx_fs_open(m, sb->id, &j->fs, e)) < 0) {
                free(j->spec);
                free(j);
                return r;
        }
        j->cb = cb;
        j->userdata = userdata;
        j->w.data = j;
        if ((r = uv_queue_work(m->loop, &j->w, user_work, user_done)) < 0) {
                sbx_fs_clear(&j->fs);
                free(j->spec);
                free(j);
                return err_set(e, r, "exec: queue the user lookup: %s", uv_strerror(r));
        }
        return 0;
}

int sbx_exec_start(struct sbx_manager *m, const struct sbx_exec_spec *spec,
                   const struct sbx_exec_callbacks *cb, void *userdata, struct sbx_exec **ret,
                   struct wr_err *e) {
        _cleanup_(exec_destroyp) struct sbx_exec *x = NULL;
        _cleanup_(sbx_env_freep) char **env = NULL;
        _cleanup_(close_fds) int child[3] = {-EBADF, -EBADF, -EBADF};
        struct sbx *sb = NULL;
        int r;

        struct sbx_exec_state *st = state_get(m);
        if (!st)
                return err_set(e, -ENOMEM, "exec: out of memory");
        if ((r = running_exec(m, spec->sandbox, true, &sb, e)) < 0)
                return r;
        if (sb->paused)
                return err_setx(e, -EBUSY, WR_STATUS_FAILED_PRECONDITION, WR_FAULT_CLIENT,
                                "sandbox %s is paused: resume it first (ResumeSandbox, "
                                "sandbox.resume(), `warren sandbox resume %s`)",
                                sb->id, sb->id);

        /* Another user: looked up in the sandbox's own /etc/passwd. */
        struct sbx_user user = {.uid = sb->uid, .gid = sb->gid};
        if (spec->user && *spec->user && sb->remote) {
                /* a Pod's files are not on this host: numbers only */
                unsigned long u = 0, g = 0;
                int n = 0;
                if ((sscanf(spec->user, "%lu%n", &u, &n) != 1 || spec->user[n] != 0) &&
                    (sscanf(spec->user, "%lu:%lu%n", &u, &g, &n) != 2 || spec->user[n] != 0))
                        return err_setx(e, -EINVAL, WR_STATUS_INVALID_ARGUMENT, WR_FAULT_CLIENT,
                                        "start.user: sandbox %s runs on compute_class K8S: give "
                                        "a numeric uid or uid:gid (names are looked up in the "
                                        "image on the host class only)",
                                        sb->id);
                if (u >= UINT32_MAX || g >= UINT32_MAX)
                        return err_setx(e, -EINVAL, WR_STATUS_INVALID_ARGUMENT, WR_FAULT_CLIENT,
                                        "start.user: uid/gid out of range");
                user.uid = (uint32_t) u;
                user.gid = strchr(spec->user, ':') ? (uint32_t) g : (uint32_t) u;
        } else if (spec->user && *spec->user) {
                /* looked up on a worker through warren-init already
                 * (sbx_exec_user_lookup): never on the loop */
                if (!spec->resolved_user)
                        return err_setx(e, -EINVAL, WR_STATUS_INTERNAL, WR_FAULT_SERVICE,
                                        "start.user: \"%s\" was not looked up "
                                        "(sbx_exec_user_lookup)",
                                        spec->user);
                user = *spec->resolved_user;
        }
        if (build_env(sb, spec, &user, &env) < 0)
                return err_set(e, -ENOMEM, "exec: out of memory");
        /* Working directory: absolute, or relative to the sandbox's. */
        char cwd[4096];
        const char *wd = spec->workdir && *spec->workdir ? spec->workdir : NULL;
        if (!wd)
                snprintf(cwd, sizeof(cwd), "%s", sb->workdir);
        else if (wd[0] == '/')
                snprintf(cwd, sizeof(cwd), "%s", wd);
        else
                snprintf(cwd, sizeof(cwd), "%s/%s", sb->workdir, wd);

        /* What is made from here on is recorded in x itself (out_open[],
         * in_state, timer_open, handles) and undone by exec_destroy. */
        if (exec_new(st, sb, spec, &x) < 0)
                return err_set(e, -ENOMEM, "exec: out of memory");
        if (!x->pty && (r = open_pipes(x, m->loop, child)) < 0)
                return err_set(e, r, "exec: pipes: %s", strerror(-r));
        if ((r = uv_timer_init(m->loop, &x->timer)) < 0)
                return err_set(e, r, "exec: timer: %s", strerror(-r));
        x->timer.data = x;
        x->timer_open = true;
        x->handles++;

        /* The spool, and init keeping our ends: the session survives a
         * restart of warrend. Without (an init older than holds, no spool)
         * it runs as before. */
        int held[3] = {x->in_fd, x->out_fd[OUT_STDOUT], x->out_fd[OUT_STDERR]};
        if (!sb->init_no_holds && !st->no_spool) {
                int sr = spool_open(x, sb, spec->timeout_secs);
                if (sr < 0) {
                        log_warn("exec %s of sandbox %s: no spool (%s): it will not survive a "
                                 "warrend restart",
                                 x->id_str, sb->id, strerror(-sr));
                        spool_close(x);
                } else
                        x->held = true;
        }
        struct rt_spawn_req req = {
                .id = x->id,
                .argv = (const char *const *) spec->argv,
                .envp = (const char *const *) env,
                .cwd = cwd,
                .uid = user.uid,
                .gid = user.gid,
                .flags = (x->pty ? RT_SPAWN_PTY : 0) | (x->held ? RT_SPAWN_HOLD : 0),
                .cols = spec->cols,
                .rows = spec->rows,
                .held = x->held && !x->pty ? held : NULL,
        };
        r = sbx_ctl_send_spawn(sb, &req, x->pty ? NULL : child);
        if (r == -EINVAL || r == -EMSGSIZE)
                return err_setx(e, r, WR_STATUS_INVALID_ARGUMENT, WR_FAULT_CLIENT,
                                "start: the command, environment or workdir is too large "
                                "or malformed");
        if (r < 0)
                return err_set(e, r, "exec: send to warren-init");

        /* Spawning: track it, and hand it out. */
        close_fds(&child);
        x->next = sb->execs;
        sb->execs = x;
        reg_add(st, x);
        x->sb = sb;
        x->cb = cb;
        x->userdata = userdata;
        if (!x->pty)
                set_reading(x, true);
        if (spec->timeout_secs > 0) {
                uint64_t ms = (uint64_t) (spec->timeout_secs * 1000.0);
                x->deadline_at = uv_now(m->loop) + ms;
                uv_timer_start(&x->timer, timeout_cb, ms, 0);
        }
        *ret = TAKE_PTR(x);
        return 0;
}

/* The id of the sandbox called key, live or not (the store knows it). */
static int resolve_sandbox(struct sbx_manager *m, const char *key, char *id, size_t size,
                           struct wr_err *e) {
        struct sbx *sb = sbx_find_exec(m, key);
        if (sb) {
                snprintf(id, size, "%s", sb->id);
                return 0;
        }
        struct store_sandbox row = {0};
        int r = sbx_lookup(m, key, &row, e);
        if (r >= 0)
                snprintf(id, size, "%s", row.id);
        store_sandbox_clear(&row);
        return r;
}

int sbx_exec_attach(struct sbx_manager *m, const struct sbx_exec_target *t,
                    const struct sbx_exec_callbacks *cb, void *userdata, struct sbx_exec **ret,
                    struct wr_err *e) {
        char sb_id[32];
        int r = resolve_sandbox(m, t->sandbox, sb_id, sizeof(sb_id), e);
        if (r < 0)
                return r;
        struct sbx_exec *x = m->exec ? m->exec->head : NULL;
        while (x && (x->state == EXEC_FORGOTTEN || strcmp(x->sb_id, sb_id) ||
                     strcmp(x->id_str, t->exec_id)))
                x = x->reg_next;
        if (!x)
                return err_setx(e, -ENOENT, WR_STATUS_NOT_FOUND, WR_FAULT_CLIENT,
                                "exec %s of sandbox %s is unknown (or finished too long ago)",
                                t->exec_id, t->sandbox);
        if (t->offset > x->log.end)
                return err_setx(e, -EINVAL, WR_STATUS_OUT_OF_RANGE, WR_FAULT_CLIENT,
                                "attach.offset: %llu is beyond the output so far (%llu bytes)",
                                (unsigned long long) t->offset, (unsigned long long) x->log.end);
        ref(x);
        /* One client at a time: the newcomer takes over. */
        detach_client(x);
        x->cb = cb;
        x->userdata = userdata;
        x->paused = false;
        x->delivery = DELIVERY_NONE;
        if (x->adopted_nodetach) {
                /* its client came back after the restart: as started again */
                x->adopted_nodetach = false;
                x->detach = false;
        }
        (void) sbx_exec_log_seek(&x->log, t->offset);
        *ret = x;
        kick(x);
        unref(x);
        return 0;
}

void sbx_exec_release(struct sbx_exec *x) {
        if (!x || !x->cb)
                return;
        ref(x);
        x->cb = NULL;
        x->userdata = NULL;
        x->paused = false;
        if (x->state < EXEC_FINISHED && !x->detach) {
                if (x->sb && x->state < EXEC_EXITED)
                        sbx_ctl_send_signal(x->sb, x->id, SIGKILL, true);
                if (!x->pty)
                        close_in(x);
        }
        /* Read on: a detached process keeps running, a killed one must be
         * drained to its end. */
        kick(x);
        if (x->state >= EXEC_FINISHED)
                retain_trim(x->st);
        unref(x);
}

const char *sbx_exec_id(const struct sbx_exec *x) {
        return x->id_str;
}

int sbx_exec_list(struct sbx_manager *m, const char *sandbox, struct sbx_exec_info **ret,
                  size_t *n_ret, struct wr_err *e) {
        char sb_id[32];
        int r = resolve_sandbox(m, sandbox, sb_id, sizeof(sb_id), e);
        if (r < 0)
                return r;
        struct sbx_exec *head = m->exec ? m->exec->head : NULL;
        size_t n = 0;
        for (struct sbx_exec *x = head; x; x = x->reg_next)
                n += x->state != EXEC_FORGOTTEN && !strcmp(x->sb_id, sb_id);
        struct sbx_exec_info *v = calloc(n + 1, sizeof(*v));
        if (!v)
                return err_set(e, -ENOMEM, "out of memory");
        size_t k = 0;
        for (struct sbx_exec *x = head; x && k < n; x = x->reg_next) {
                if (x->state == EXEC_FORGOTTEN || strcmp(x->sb_id, sb_id))
                        continue;
                struct sbx_exec_info *p = &v[k++];
                size_t argc = 0;
                while (x->argv[argc])
                        argc++;
                *p = (struct sbx_exec_info){
                        .exec_id = x->id_str,
                        .argv = x->argv,
                        .argc = argc,
                        .pid = x->pid,
                        .running = x->state < EXEC_FINISHED,
                        .pty = x->pty,
                        .started_ns = x->started_ns,
                };
                if (!p->running) {
                        p->exit_code = x->exit_code;
                        p->signo = x->exit_signo;
                        p->reason = x->exit_reason;
                }
        }
        *ret = v;
        *n_ret = k;
        return 0;
}

void sbx_exec_forget_all(struct sbx_manager *m) {
        struct sbx_exec_state *st = m ? m->exec : NULL;
        if (!st)
                return;
        m->exec = NULL;
        for (struct sbx_exec *x = st->head, *nx; x; x = nx) {
                nx = x->reg_next;
                /* a finished one stays for the next warrend (when its
                 * sandbox is gone, so is the spool) */
                x->keep_files = true;
                if (x->state == EXEC_FINISHED)
                        x->state = EXEC_FORGOTTEN;
                maybe_free(x);
        }
        /* Sessions a client still holds keep the state (and its pool) until
         * the last of them is freed. */
        if (st->head)
                st->orphaned = true;
        else
                state_free(st);
}

/* --- warrend stops, and picks the execs up again after a restart --- */

void sbx_exec_leave_all(struct sbx *sb) {
        for (struct sbx_exec *x = sb->execs, *nx; x; x = nx) {
                nx = x->next;
                if (!x->held || x->spool_fd < 0)
                        continue; /* ends like before (sbx_exec_abort_all below) */
                ref(x);
                x->leaving = true;
                x->keep_files = true;
                detach_client(x);
                close_out(x, OUT_STDOUT);
                close_out(x, OUT_STDERR);
                close_in(x);
                close_timer(x);
                unlink_exec(x);
                x->state = EXEC_FORGOTTEN;
                unref(x);
        }
        sbx_exec_abort_all(sb, SBX_EXIT_UNSPECIFIED);
}

struct exit_note {
        uint64_t id;
        int status;
};

struct recovery {
        struct sbx *sb;
        /* EXITED events that came during the exchange, applied at the end */
        struct exit_note *exits;
        size_t n_exits, cap_exits;
};

static void note_exit(struct recovery *rc, const struct rt_ctl_msg *m) {
        if (rc->n_exits == rc->cap_exits) {
                size_t cap = rc->cap_exits ? rc->cap_exits * 2 : 16;
                struct exit_note *n = realloc(rc->exits, cap * sizeof(*n));
                if (!n)
                        return;
                rc->exits = n;
                rc->cap_exits = cap;
        }
        rc->exits[rc->n_exits++] = (struct exit_note){m->id, m->status};
}

/* Wait for the answer of type with id, noting exits that come first.
 * Recovery runs before the loop does, so nothing else reads the socket. */
static int ctl_await(struct recovery *rc, uint32_t type, uint64_t id, struct rt_ctl_msg *ret,
                     int fds[4], int *nfds) {
        for (;;) {
                struct rt_ctl_msg m;
                int f[4], nf = 0;
                struct pollfd p = {.fd = rc->sb->ctl_fd, .events = POLLIN};
                int r = rt_ctl_recv_fds(rc->sb->ctl_fd, &m, f, &nf);
                if (r == -EAGAIN) {
                        r = RETRY_EINTR(poll(&p, 1, 5000));
                        if (r <= 0)
                                return r < 0 ? -errno : -ETIMEDOUT;
                        continue;
                }
                if (r < 0)
                        return r;
                if (m.id == id && (m.type == type || m.type == CTL_RESULT)) {
                        *ret = m;
                        memcpy(fds, f, sizeof(f));
                        *nfds = nf;
                        return 0;
                }
                if (m.type == CTL_EXITED)
                        note_exit(rc, &m);
                for (int i = 0; i < nf; i++)
                        close(f[i]);
                rt_ctl_msg_done(&m);
        }
}

static int ctl_send_retry(struct sbx *sb, int (*fn)(int, uint64_t), uint64_t id) {
        for (int tries = 0;; tries++) {
                int r = fn(sb->ctl_fd, id);
                if (r != -EAGAIN || tries >= 5)
                        return r;
                struct pollfd p = {.fd = sb->ctl_fd, .events = POLLOUT};
                (void) poll(&p, 1, 1000);
        }
}

static int send_release_all(int fd, uint64_t id) {
        return rt_ctl_send_release(fd, id, CTL_RELEASE_ALL);
}

static int pread_all(int fd, uint8_t *b, size_t n, off_t at) {
        for (size_t got = 0; got < n;) {
                ssize_t k = pread(fd, b + got, n - got, at + (off_t) got);
                if (k <= 0)
                        return k < 0 ? -errno : -EIO;
                got += (size_t) k;
        }
        return 0;
}

/* Read an exec's .meta file at dirfd/name for sbx_spool_meta_decode. One
 * larger than SPOOL_META_MAX (millions of switches between stdout and
 * stderr) is read as its header and argv plus its newest run records, as
 * many as fit: older runs only describe bytes the log no longer keeps
 * (should one be needed, its bytes count as stdout). */
static int read_meta_at(int dirfd, const char *name, uint8_t **ret, size_t *len) {
        _cleanup_close_ int fd = openat(dirfd, name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
        struct stat st;
        struct sbx_spool_hdr h;
        if (fd < 0 || fstat(fd, &st) < 0)
                return -errno;
        if (!S_ISREG(st.st_mode))
                return -EBADMSG;
        size_t size = (size_t) st.st_size, head = size, tail_at = size, tail = 0;
        if (size > SPOOL_META_MAX) {
                int r = pread_all(fd, (uint8_t *) &h, sizeof(h), 0);
                if (r < 0)
                        return r;
                if (h.argv_len > SBX_SPOOL_ARGV_MAX)
                        return -EBADMSG;
                head = sizeof(h) + h.argv_len;
                size_t runs = (size - head) / sizeof(struct sbx_spool_run);
                size_t keep = (SPOOL_META_MAX - head) / sizeof(struct sbx_spool_run);
                tail = MIN(runs, keep) * sizeof(struct sbx_spool_run);
                tail_at = head + (runs * sizeof(struct sbx_spool_run) - tail);
        }
        uint8_t *b = malloc(head + tail + 1);
        if (!b)
                return -ENOMEM;
        int r = pread_all(fd, b, head, 0);
        if (r >= 0 && tail)
                r = pread_all(fd, b + head, tail, (off_t) tail_at);
        if (r < 0) {
                free(b);
                return r;
        }
        *ret = b;
        *len = head + tail;
        return 0;
}

/* Fill x's log from its spool: the last 3/4 of the log size at most (what
 * the log keeps behind its cursor), with the cursor at the end. */
static int spool_load(struct sbx_exec *x, int spool_fd, const struct sbx_spool_meta *meta) {
        struct stat st;
        if (fstat(spool_fd, &st) < 0)
                return -errno;
        uint64_t end = (uint64_t) st.st_size, keep = x->log.size - x->log.size / 4;
        uint64_t from = end > keep ? end - keep : 0;
        if (from < meta->hdr.start)
                from = meta->hdr.start;
        if (from > end)
                from = end;
        sbx_exec_log_restart_at(&x->log, from);
        size_t run = 0;
        for (uint64_t off = from; off < end;) {
                while (run + 1 < meta->n_runs && meta->runs[run + 1].offset <= off)
                        run++;
                int stream = meta->n_runs && meta->runs[run].offset <= off
                                     ? (int) meta->runs[run].stream
                                     : SBX_STDOUT;
                uint64_t stop = end;
                if (run + 1 < meta->n_runs && meta->runs[run + 1].offset < stop &&
                    meta->runs[run + 1].offset > off)
                        stop = meta->runs[run + 1].offset;
                size_t room;
                uint8_t *dst = sbx_exec_log_reserve(&x->log, stream, (size_t) (stop - off), &room);
                if (!dst)
                        return -ENOMEM;
                if (room > stop - off)
                        room = (size_t) (stop - off);
                ssize_t k = pread(spool_fd, dst, room, (off_t) off);
                if (k <= 0) {
                        sbx_exec_log_commit(&x->log, 0);
                        return k < 0 ? -errno : -EIO;
                }
                sbx_exec_log_commit(&x->log, (size_t) k);
                off += (uint64_t) k;
        }
        (void) sbx_exec_log_seek(&x->log, end);
        return 0;
}

/* One exec of the previous warrend: its meta, and init's hold when init
 * still has one. Finished: a retained session (tail + exit). Held: a live
 * session again, on the fds init kept. */
static void recover_exec(struct recovery *rc, int dirfd, const char *name_base,
                         struct sbx_spool_meta *meta, const struct ctl_hold *hold) {
        struct sbx *sb = rc->sb;
        struct sbx_manager *m = sb->m;
        struct sbx_exec_state *st = state_get(m);
        char name[64];
        int r;
        if (!st)
                return;
        _cleanup_(exec_destroyp) struct sbx_exec *x = calloc(1, sizeof(*x));
        if (!x)
                return;
        x->out_fd[0] = x->out_fd[1] = x->in_fd = -EBADF;
        x->spool_fd = x->meta_fd = -EBADF;
        x->id = meta->hdr.id;
        snprintf(x->id_str, sizeof(x->id_str), "ex-%llu", (unsigned long long) x->id);
        snprintf(x->sb_id, sizeof(x->sb_id), "%s", sb->id);
        x->argv = TAKE_PTR(meta->argv);
        x->pty = meta->hdr.flags & SBX_SPOOL_PTY;
        x->detach = meta->hdr.flags & SBX_SPOOL_DETACH;
        x->spool_flags = meta->hdr.flags;
        x->started_ns = meta->hdr.started_ns;
        x->punched = meta->hdr.start;
        x->state = EXEC_FORGOTTEN; /* until it is tracked */
        sbx_exec_log_init(&x->log, (size_t) meta->hdr.log_size, st->pool);
        if (asprintf(&x->spool_base, "%s/execs/%s", sbx_dir(sb), name_base) < 0) {
                x->spool_base = NULL;
                return;
        }
        snprintf(name, sizeof(name), "%s.out", name_base);
        x->spool_fd = openat(dirfd, name, O_RDWR | O_CLOEXEC | O_NOFOLLOW);
        snprintf(name, sizeof(name), "%s.meta", name_base);
        x->meta_fd = openat(dirfd, name, O_RDWR | O_CLOEXEC | O_NOFOLLOW);
        if (x->spool_fd < 0 || x->meta_fd < 0 || (r = spool_load(x, x->spool_fd, meta)) < 0) {
                log_warn("sandbox %s: exec %s: its spool cannot be read back", sb->id, x->id_str);
                goto lost;
        }
        struct stat mst;
        if (fstat(x->meta_fd, &mst) < 0)
                goto lost;
        /* appends go after the last whole record (a torn one is overwritten) */
        uint64_t head = sizeof(struct sbx_spool_hdr) + meta->hdr.argv_len;
        x->meta_end = head + ((uint64_t) mst.st_size - head) / sizeof(struct sbx_spool_run) *
                                     sizeof(struct sbx_spool_run);
        x->run_stream = meta->n_runs ? (int) meta->runs[meta->n_runs - 1].stream : 0;
        x->meta_punched = x->meta_scan = head; /* punched records read as zeros */

        if (meta->hdr.done) {
                x->state = EXEC_FINISHED;
                x->exit_code = meta->hdr.exit_code;
                x->exit_signo = meta->hdr.exit_signo;
                x->exit_reason = (enum sbx_exit_reason) meta->hdr.exit_reason;
                x->spool_fd = safe_close(x->spool_fd);
                x->meta_fd = safe_close(x->meta_fd);
                reg_add(st, x);
                log_info("sandbox %s: exec %s (finished) attachable again", sb->id, x->id_str);
                TAKE_PTR(x);
                return;
        }

        /* Running (or exited, its pipes not read to the end): take the fds
         * init kept. */
        struct rt_ctl_msg tm = {0};
        int fds[4], nfds = 0;
        if ((r = ctl_send_retry(sb, rt_ctl_send_take, x->id)) < 0 ||
            (r = ctl_await(rc, CTL_TAKEN, x->id, &tm, fds, &nfds)) < 0 || tm.type != CTL_TAKEN ||
            tm.err) {
                log_warn("sandbox %s: exec %s: taking its pipes back from init failed", sb->id,
                         x->id_str);
                rt_ctl_msg_done(&tm);
                goto lost;
        }
        x->held = true;
        int k = 0;
        if (tm.fdmask & CTL_HOLD_FD_PTY) {
                if (!x->pty) {
                        for (int i = 0; i < nfds; i++)
                                close(fds[i]);
                        goto lost;
                }
                x->out_fd[OUT_STDOUT] = fds[k++];
        } else {
                if (x->pty) {
                        for (int i = 0; i < nfds; i++)
                                close(fds[i]);
                        goto lost;
                }
                if (tm.fdmask & CTL_HOLD_FD_STDIN)
                        x->in_fd = fds[k++];
                if (tm.fdmask & CTL_HOLD_FD_STDOUT)
                        x->out_fd[OUT_STDOUT] = fds[k++];
                if (tm.fdmask & CTL_HOLD_FD_STDERR)
                        x->out_fd[OUT_STDERR] = fds[k++];
        }
        rt_ctl_msg_done(&tm);

        uv_loop_t *loop = m->loop;
        if (x->pty) {
                int pfd = x->out_fd[OUT_STDOUT];
                x->out_fd[OUT_STDOUT] = -EBADF;
                x->state = EXEC_RUNNING;
                pty_attach(x, loop, pfd);
        } else {
                for (int i = 0; i < 2; i++) {
                        if (x->out_fd[i] < 0)
                                continue;
                        if (uv_poll_init(loop, &x->out_poll[i], x->out_fd[i]) < 0) {
                                x->out_fd[i] = safe_close(x->out_fd[i]);
                                continue;
                        }
                        x->out_poll[i].data = x;
                        x->out_open[i] = true;
                        x->handles++;
                }
                if (x->in_fd >= 0) {
                        if (uv_poll_init(loop, &x->in_poll, x->in_fd) < 0)
                                x->in_fd = safe_close(x->in_fd);
                        else {
                                x->in_poll.data = x;
                                x->in_state = STDIN_OPEN;
                                x->handles++;
                        }
                }
        }
        if (uv_timer_init(loop, &x->timer) == 0) {
                x->timer.data = x;
                x->timer_open = true;
                x->handles++;
        }
        x->pid = hold->pid;
        x->state = EXEC_RUNNING;
        /* its client lost its stream with the previous warrend and may come
         * back: kept like a detached exec until a client attaches */
        if (!x->detach) {
                x->detach = true;
                x->adopted_nodetach = true;
        }
        x->next = sb->execs;
        sb->execs = x;
        reg_add(st, x);
        x->sb = sb;
        if (x->timer_open && !(hold->state & CTL_HOLD_EXITED)) {
                /* the timeout goes on; an unattached non-detached exec
                 * gets ADOPT_GRACE_MS for its client to come back */
                uint64_t now = uv_now(loop), next = 0;
                if (meta->hdr.deadline_ns > 0) {
                        int64_t left = (meta->hdr.deadline_ns - now_ns()) / 1000000;
                        x->deadline_at = now + (left > 0 ? (uint64_t) left : 0);
                        next = x->deadline_at;
                }
                if (x->adopted_nodetach) {
                        x->adopt_until = now + ADOPT_GRACE_MS;
                        if (!next || x->adopt_until < next)
                                next = x->adopt_until;
                }
                if (next)
                        uv_timer_start(&x->timer, timeout_cb, next - now, 0);
        }
        log_info("sandbox %s: exec %s (pid %d, %s) re-attached at offset %llu", sb->id, x->id_str,
                 x->pid, hold->state & CTL_HOLD_EXITED ? "exited" : "running",
                 (unsigned long long) x->log.end);
        struct sbx_exec *live = TAKE_PTR(x);
        ref(live);
        if (hold->state & CTL_HOLD_EXITED)
                sbx_exec_on_exited(sb, live->id, hold->status);
        else
                set_reading(live, want_reading(live));
        unref(live);
        return;
lost:
        /* what is left cannot be served: init lets go, the files go */
        (void) ctl_send_retry(sb, send_release_all, meta->hdr.id);
        x->held = false;
}

void sbx_exec_recover(struct sbx *sb) {
        struct recovery rc = {.sb = sb};
        const char *dir = sbx_dir(sb);
        char path[PATH_MAX];
        struct ctl_hold *holds = NULL;
        size_t n_holds = 0;
        const uint64_t req = 0x77726e686f6c6473ull; /* any id */

        if (!dir || sb->ctl_fd < 0)
                return;
        if (sb->paused) {
                /* a frozen init cannot answer: at the resume */
                sb->exec_recover_pending = true;
                log_info("sandbox %s is paused: its execs are picked up again when it is "
                         "resumed",
                         sb->id);
                return;
        }
        /* What init holds (an older init does not know HOLDS: no holds). */
        struct rt_ctl_msg hm = {0};
        int fds[4], nfds = 0;
        int r = ctl_send_retry(sb, rt_ctl_send_holds, req);
        if (r >= 0)
                r = ctl_await(&rc, CTL_HOLDS_REPLY, req, &hm, fds, &nfds);
        if (r < 0 || hm.type != CTL_HOLDS_REPLY) {
                if (r >= 0 && hm.err == -EOPNOTSUPP)
                        log_info("sandbox %s: its warren-init predates exec holds: its execs "
                                 "do not survive restarts",
                                 sb->id);
                else
                        log_warn("sandbox %s: asking init for its execs: %s", sb->id,
                                 strerror(r < 0 ? -r : -hm.err));
                sb->init_no_holds = true;
                rt_ctl_msg_done(&hm);
                free(rc.exits);
                return;
        }
        holds = TAKE_PTR(hm.holds);
        n_holds = hm.n_holds;
        rt_ctl_msg_done(&hm);
        bool *used = calloc(n_holds + 1, sizeof(bool));

        snprintf(path, sizeof(path), "%s/execs", dir);
        _cleanup_close_ int dirfd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
        DIR *d = dirfd >= 0 ? fdopendir(fcntl(dirfd, F_DUPFD_CLOEXEC, 3)) : NULL;
        struct dirent *de;
        size_t n = 0;
        while (d && used && (de = readdir(d))) {
                char base[64];
                size_t l = strlen(de->d_name);
                if (l < 6 || l - 5 >= sizeof(base) || strcmp(de->d_name + l - 5, ".meta") != 0)
                        continue;
                memcpy(base, de->d_name, l - 5);
                base[l - 5] = '\0';
                _cleanup_free_ uint8_t *buf = NULL;
                size_t len = 0;
                struct sbx_spool_meta meta = {0};
                char name[80];
                if (read_meta_at(dirfd, de->d_name, &buf, &len) < 0 ||
                    sbx_spool_meta_decode(buf, len, &meta) < 0) {
                        log_warn("sandbox %s: exec spool %s is unreadable: removed", sb->id,
                                 de->d_name);
                        goto remove;
                }
                const struct ctl_hold *hold = NULL;
                for (size_t i = 0; i < n_holds; i++)
                        if (holds[i].id == meta.hdr.id && !used[i]) {
                                hold = &holds[i];
                                used[i] = true;
                        }
                if ((meta.hdr.flags & SBX_SPOOL_BROKEN) || (!meta.hdr.done && !hold) ||
                    (hold &&
                     !!(hold->flags & CTL_SPAWN_PTY) != !!(meta.hdr.flags & SBX_SPOOL_PTY))) {
                        log_warn("sandbox %s: exec ex-%llu cannot be picked up again (%s)", sb->id,
                                 (unsigned long long) meta.hdr.id,
                                 meta.hdr.flags & SBX_SPOOL_BROKEN ? "its spool is incomplete"
                                                                   : "init does not hold it");
                        if (hold)
                                (void) ctl_send_retry(sb, send_release_all, meta.hdr.id);
                        sbx_spool_meta_done(&meta);
                        goto remove;
                }
                if (hold && meta.hdr.done) {
                        /* finished: init's copies are not needed any more */
                        (void) ctl_send_retry(sb, send_release_all, meta.hdr.id);
                        hold = NULL;
                }
                recover_exec(&rc, dirfd, base, &meta, hold);
                sbx_spool_meta_done(&meta);
                n++;
                continue;
        remove:
                snprintf(name, sizeof(name), "%s.out", base);
                (void) unlinkat(dirfd, name, 0);
                (void) unlinkat(dirfd, de->d_name, 0);
        }
        if (d)
                closedir(d);
        /* holds nobody can serve: let init forget them */
        for (size_t i = 0; i < n_holds; i++)
                if (used && !used[i])
                        (void) ctl_send_retry(sb, send_release_all, holds[i].id);
        /* exits that came during the exchange */
        for (size_t i = 0; i < rc.n_exits; i++)
                sbx_exec_on_exited(sb, rc.exits[i].id, rc.exits[i].status);
        if (sb->m->exec)
                retain_trim(sb->m->exec);
        free(used);
        free(holds);
        free(rc.exits);
}
