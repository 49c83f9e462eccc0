/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* warren-init's decoder for control requests (see ctl-proto.h). Pure
 * functions over a byte buffer: no I/O, no global state, so the same code
 * runs in init, in the unit tests and under libFuzzer. */

#include <stddef.h>
#include <stdint.h>

#include "init/ctl-proto.h"

struct init_spawn {
        uint32_t flags; /* enum ctl_spawn_flags */
        uint32_t uid;
        uint32_t gid;
        uint16_t cols;
        uint16_t rows;
        const char *cwd;   /* as sent ("" became "/"); relative means from "/" */
        const char **argv; /* argc entries + NULL; array malloc'd, strings in buffer */
        const char **envp; /* envc entries + NULL; likewise */
        uint32_t argc;
        uint32_t envc;
};

struct init_file_open {
        uint32_t flags; /* enum ctl_file_open_flags, checked */
        uint32_t mode;
        uint32_t uid;
        uint32_t gid;
        const char *path; /* absolute, NUL-terminated; points into the buffer */
};

/* FILE_MKDIR .. FILE_LIST, checked against the type's rules (ctl-proto.h). */
struct init_file_op {
        uint32_t flags; /* enum ctl_file_op_flags */
        uint32_t mode;
        uint32_t uid;
        uint32_t gid;
        uint64_t dev, ino;
        const char *path;  /* absolute, NUL-terminated; points into the buffer */
        const char *path2; /* RENAME: to (absolute); SYMLINK: the target; else NULL */
};

struct init_req {
        struct ctl_hdr hdr; /* valid as far as it could be read, else zeroed */
        union {
                struct init_spawn spawn;
                struct ctl_signal signal;
                struct ctl_resize resize;
                struct ctl_kill_all kill_all;
                struct ctl_release release;
                struct init_file_open file_open;
                struct init_file_op file_op; /* FILE_MKDIR .. FILE_LIST */
        };
};

/* Decode one request datagram buf[0..n). On success returns 0 and fills
 * *ret; for SPAWN, ret->spawn.argv/envp are heap arrays whose strings point
 * into buf (buf must outlive *ret), released by init_req_done(). On failure
 * returns a negative errno and nothing needs releasing:
 *   -EBADMSG  shorter than a header, bad magic, reserved bits, len mismatch
 *   -EMSGSIZE datagram larger than CTL_MSG_MAX or too many argv/env entries
 *   -EOPNOTSUPP unknown or non-request type
 *   -EINVAL   a payload field out of range (flags, signal, strings, ...)
 *   -ENOMEM   out of memory
 * For FILE_OPEN, ret->file_open.path points into buf; for FILE_MKDIR ..
 * FILE_LIST, ret->file_op.path and .path2 do.
 * ret->hdr.id and ret->hdr.type are set whenever the header's first 24 bytes
 * were present, so the caller can address its error reply. */
int init_req_decode(const void *buf, size_t n, struct init_req *ret);

/* Release what init_req_decode allocated; accepts a zeroed or failed req. */
void init_req_done(struct init_req *req);
