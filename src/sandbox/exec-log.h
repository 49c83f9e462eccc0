/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* exec-log: the bounded, sequence-numbered output log of one exec session.
 *
 * Pure data structure: no libuv, no sandbox, no I/O. exec.c reads a
 * process's pipes straight into it and delivers from it.
 *
 * Every byte appended gets the next offset of the session's output
 * sequence (stdout and stderr interleaved in the order they were read).
 * The bytes live in chunks of up to SBX_EXEC_LOG_CHUNK_MAX bytes; a chunk
 * holds runs of either stream (a run table of 4 bytes per switch), so
 * output that switches between stdout and stderr every few bytes costs
 * its bytes plus 4 per switch, not a chunk per switch. A piece delivered
 * is one run's bytes (never both streams). The log keeps the bytes
 * [start, end):
 *
 *   start ... history (<= 3/4 size) ... cursor ... ahead (<= 1/4 size) ... end
 *
 * The cursor is the next offset to hand to the attached client. Bytes
 * behind it are kept up to 3/4 of the log size (a client that dies may not
 * have received them; a re-attach resumes from its own offset inside
 * them); bytes ahead of it (read, not yet delivered) are limited to 1/4:
 * sbx_exec_log_has_room() says when to stop reading. Only when nobody will
 * read in time (`drop_unread`) are the oldest bytes dropped whether
 * delivered or not; a cursor behind start then is a gap.
 *
 * Chunks are reference-counted: the log holds one reference, and a caller
 * that sends a chunk's bytes without copying them takes another
 * (sbx_exec_log_hold) until it is done (sbx_exec_log_release), so a chunk
 * the log has dropped stays alive while it is being sent. Full-size chunks
 * go back to a pool and are reused.
 *
 * Single-threaded: a log, its pool and its chunks are used from one
 * thread. */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Largest chunk, and so the largest piece delivered at once. */
#define SBX_EXEC_LOG_CHUNK_MAX (1024 * 1024)
/* Smallest log size accepted (sbx_exec_log_init rounds up to it). */
#define SBX_EXEC_LOG_SIZE_MIN (4 * SBX_EXEC_LOG_CHUNK_MAX)
/* Default log size. */
#define SBX_EXEC_LOG_SIZE_DEFAULT (16u << 20)

/* One chunk of a log; opaque. Also the public type of a held piece of
 * output (sandbox/exec.h). */
struct sbx_output;

/* A recycling pool of full-size chunks, shared by the logs of one owner. */
struct sbx_exec_log_pool;

/* A piece of the log ready to deliver: the bytes of one chunk from the
 * cursor on. data stays valid while the log holds the chunk, or while a
 * hold on chunk is kept. */
struct sbx_exec_log_piece {
        struct sbx_output *chunk;
        const uint8_t *data;
        size_t n;
        uint64_t offset; /* of data[0] */
        int stream;      /* the tag given when the bytes were appended */
};

struct sbx_exec_log {
        struct sbx_output *head, *tail;
        struct sbx_output *cur;     /* the chunk holding the cursor, or NULL: search */
        struct sbx_output *pending; /* a fresh chunk handed out by reserve, not linked yet */
        int pending_stream;         /* the stream reserve was last called for */
        uint64_t start;             /* offset of the first byte held */
        uint64_t end;               /* offset after the last byte appended */
        uint64_t cursor;            /* next offset to deliver */
        size_t held;                /* capacity of the chunks held, in bytes */
        size_t size;                /* the log's size: history 3/4, ahead 1/4 */
        struct sbx_exec_log_pool *pool;
};

/* Make an empty pool. Returns 0, or -ENOMEM. *ret is the caller's until
 * sbx_exec_log_pool_close. */
int sbx_exec_log_pool_new(struct sbx_exec_log_pool **ret);

/* The owner lets go of the pool: its idle chunks are freed, and the pool
 * itself once the last chunk made from it is freed (chunks held for a send
 * may outlive the owner). No new chunk may be taken from it. NULL ok. */
void sbx_exec_log_pool_close(struct sbx_exec_log_pool *p);

/* Idle chunks waiting in the pool for reuse (for tests and metrics). */
size_t sbx_exec_log_pool_idle(const struct sbx_exec_log_pool *p);

/* Set up an empty log of size bytes (at least SBX_EXEC_LOG_SIZE_MIN; 0 =
 * SBX_EXEC_LOG_SIZE_DEFAULT) at offset 0, taking chunks from pool (NULL:
 * plain malloc/free). The pool must stay open while the log lives. Cannot
 * fail. */
void sbx_exec_log_init(struct sbx_exec_log *l, size_t size, struct sbx_exec_log_pool *pool);

/* Make an empty log (nothing appended yet) start at offset: its start,
 * end and cursor move there (a session picked up again after a restart,
 * whose older bytes are gone). */
void sbx_exec_log_restart_at(struct sbx_exec_log *l, uint64_t offset);

/* Drop every chunk (held ones live on until released). The log is empty
 * afterwards, at the same end offset. NULL ok. */
void sbx_exec_log_clear(struct sbx_exec_log *l);

/* Room to read up to hint bytes of stream into (a read straight from a
 * pipe): the tail chunk's free space when it has at least 4 KiB left (a
 * new run in it when the stream differs from its last), else a fresh
 * chunk of 64 KiB..1 MiB sized by hint.
 * Returns the area and its size in *room, or NULL (out of memory). Nothing
 * is part of the log until sbx_exec_log_commit; call it before anything
 * else touches the log. */
uint8_t *sbx_exec_log_reserve(struct sbx_exec_log *l, int stream, size_t hint, size_t *room);

/* The first n bytes of the area the last sbx_exec_log_reserve gave were
 * filled: append them (n may be 0: nothing was read). Returns true when
 * the chunk they went into is full (a good moment to deliver). */
bool sbx_exec_log_commit(struct sbx_exec_log *l, size_t n);

/* Append a copy of n bytes of stream (messages written by the daemon, not
 * read from the process) in a chunk of their own. -ENOMEM leaves the log
 * as it was. */
int sbx_exec_log_append(struct sbx_exec_log *l, int stream, const void *data, size_t n);

/* Drop what is no longer needed: chunks entirely more than 3/4 of the size
 * behind the cursor; with drop_unread (nobody will read in time) also the
 * oldest chunks, delivered or not, until a further full chunk fits within
 * the size. */
void sbx_exec_log_evict(struct sbx_exec_log *l, bool drop_unread);

/* Evict (as above), then say whether another read of up to a full chunk
 * may go in: always with drop_unread, else while the bytes ahead of the
 * cursor plus a full chunk stay within 1/4 of the size. */
bool sbx_exec_log_has_room(struct sbx_exec_log *l, bool drop_unread);

/* Move the cursor to offset (a client attaching from there). -ERANGE when
 * offset is beyond the end; a cursor before start is a gap that
 * sbx_exec_log_take_gap reports. */
int sbx_exec_log_seek(struct sbx_exec_log *l, uint64_t offset);

/* When the cursor is behind start (those bytes were dropped), move it to
 * start, set *from and *to to the missing range and return true; else
 * false. */
bool sbx_exec_log_take_gap(struct sbx_exec_log *l, uint64_t *from, uint64_t *to);

/* The next piece from the cursor (the rest of the run holding it, within
 * one chunk), with
 * the cursor advanced past it. Returns false when there is nothing to
 * deliver (cursor at the end, or in a gap: call sbx_exec_log_take_gap
 * first). */
bool sbx_exec_log_next(struct sbx_exec_log *l, struct sbx_exec_log_piece *p);

/* Keep chunk alive beyond the log (its bytes never change). */
void sbx_exec_log_hold(struct sbx_output *chunk);

/* Let go of a hold; the chunk goes back to its pool or is freed when that
 * was the last reference. Takes void * to serve as a release callback.
 * NULL ok. */
void sbx_exec_log_release(void *chunk);
