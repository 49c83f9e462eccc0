/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* exec-spool: what an exec session keeps on the host so that a restarted
 * warrend picks it up again (docs/exec.md "Across restarts").
 *
 * Per exec, in <sandbox dir>/execs/ (the sandbox dir is on the host and
 * not reachable from inside the sandbox; it goes with the sandbox):
 *   <id>.out   the output sequence itself: byte k of the exec's output is
 *              byte k of the file. warrend moves pipe output into it with
 *              splice(2), so a kill -9 at any point leaves every byte
 *              either still in the pipe or in the file, never in between.
 *              Bytes the log no longer keeps are punched out
 *              (FALLOC_FL_PUNCH_HOLE), so the file takes no more disk than
 *              the log takes memory.
 *   <id>.meta  a struct sbx_spool_hdr (fields after `start` updated in
 *              place), argv_len bytes of argv (NUL-terminated strings),
 *              then struct sbx_spool_run records, one per change of stream,
 *              appended before the first byte of that run is spooled.
 *              Records that only describe bytes punched out of .out are
 *              punched out too (read back as zeros, always a prefix of
 *              the records), so the file takes disk in proportion to what
 *              the log keeps, however often the streams switch.
 *
 * This file has the pure encoder/decoder of .meta (no I/O); exec.c does
 * the file work. The files are written by warrend only and live outside
 * every sandbox; the decoder is strict anyway (fuzz-exec-spool). */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define SBX_SPOOL_MAGIC "WXEXEC1" /* 8 bytes with its NUL */
#define SBX_SPOOL_RUN_MAGIC 0x52554e31u
#define SBX_SPOOL_ARGV_MAX (2u << 20)
#define SBX_SPOOL_LOG_SIZE_MAX (1ull << 40) /* a sane bound on hdr.log_size */

enum sbx_spool_flags {
        SBX_SPOOL_PTY = 1u << 0,
        SBX_SPOOL_DETACH = 1u << 1,
        /* spooling failed (disk full...): the file is short, the exec cannot
         * be picked up after a restart */
        SBX_SPOOL_BROKEN = 1u << 2,
        SBX_SPOOL_FLAGS_ALL = SBX_SPOOL_PTY | SBX_SPOOL_DETACH | SBX_SPOOL_BROKEN,
};

struct sbx_spool_hdr {
        char magic[8];       /* SBX_SPOOL_MAGIC */
        uint64_t id;         /* exec id (the N of ex-N) */
        int64_t started_ns;  /* CLOCK_REALTIME */
        uint64_t log_size;   /* of the exec's output log */
        int64_t deadline_ns; /* CLOCK_REALTIME of the timeout's SIGKILL; 0 = none */
        uint32_t flags;      /* enum sbx_spool_flags (BROKEN may be set in place) */
        uint32_t argc;
        uint32_t argv_len;
        uint32_t reserved;
        /* updated in place: */
        uint64_t start;    /* bytes of .out before this were punched out */
        int32_t exit_code; /* when done */
        int32_t exit_signo;
        int32_t exit_reason; /* enum sbx_exit_reason */
        uint32_t done;       /* 1: the exec finished, output complete, exit above */
};

struct sbx_spool_run {
        uint64_t offset; /* first byte of the run */
        uint32_t stream; /* 1 stdout, 2 stderr */
        uint32_t magic;  /* SBX_SPOOL_RUN_MAGIC */
};

_Static_assert(sizeof(struct sbx_spool_hdr) == 80, "sbx_spool_hdr layout");
_Static_assert(sizeof(struct sbx_spool_run) == 16, "sbx_spool_run layout");

/* Offsets of the fields updated in place. */
#define SBX_SPOOL_OFF_FLAGS __builtin_offsetof(struct sbx_spool_hdr, flags)
#define SBX_SPOOL_OFF_START __builtin_offsetof(struct sbx_spool_hdr, start)
#define SBX_SPOOL_OFF_EXIT __builtin_offsetof(struct sbx_spool_hdr, exit_code)

struct sbx_spool_meta {
        struct sbx_spool_hdr hdr;
        char **argv;                /* hdr.argc strings + NULL, heap (each string too) */
        struct sbx_spool_run *runs; /* n_runs, heap; offsets non-decreasing */
        size_t n_runs;
};

/* The .meta file's first bytes for a new exec: the header (hdr, magic and
 * reserved filled in here) and argv. Returns the length written to *ret
 * (malloc'd, the caller frees), -EINVAL (no argv), -EMSGSIZE (argv over
 * SBX_SPOOL_ARGV_MAX), -ENOMEM. */
int sbx_spool_meta_encode(const struct sbx_spool_hdr *hdr, char *const *argv, uint8_t **ret);

/* Decode a whole .meta file buf[0..n). All-zero run records before the
 * first whole one (punched out) and a torn last one (a crash while
 * appending) are ignored. Returns 0 and fills *ret (release with
 * sbx_spool_meta_done), -EBADMSG (malformed), -ENOMEM. */
int sbx_spool_meta_decode(const void *buf, size_t n, struct sbx_spool_meta *ret);

/* Free what decode allocated. NULL ok. */
void sbx_spool_meta_done(struct sbx_spool_meta *m);
