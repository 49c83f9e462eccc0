/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* The one error convention (see docs/STYLE notes in README):
 *
 *  - A fallible function returns int: >= 0 on success, a negative errno on
 *    failure.
 *  - Human context travels in an optional struct wr_err. It holds no heap
 *    pointers, so a forked child can write it whole to its parent over a
 *    CLOEXEC pipe. Each layer that unwinds may prefix context:
 *    "create sandbox: mount overlay: No such file or directory".
 *  - Log once, at the boundary that decides (RPC handler, CLI main, daemon
 *    start-up). Library modules never log above debug.
 *
 * Every function here accepts e == NULL and then only returns the code. */

#include <stdarg.h>

#include "basic/macro.h"

/* Whose fault an error is: drives logging level and gRPC status choice. */
enum wr_fault {
        WR_FAULT_SERVICE = 0,  /* warrend or the host failed */
        WR_FAULT_CLIENT = 1,   /* the request was bad */
        WR_FAULT_WORKLOAD = 2, /* the sandboxed program or image misbehaved */
};

/* gRPC status codes (https://grpc.github.io/grpc/core/md_doc_statuscodes.html). */
enum wr_status {
        WR_STATUS_OK = 0,
        WR_STATUS_CANCELLED = 1,
        WR_STATUS_UNKNOWN = 2,
        WR_STATUS_INVALID_ARGUMENT = 3,
        WR_STATUS_DEADLINE_EXCEEDED = 4,
        WR_STATUS_NOT_FOUND = 5,
        WR_STATUS_ALREADY_EXISTS = 6,
        WR_STATUS_PERMISSION_DENIED = 7,
        WR_STATUS_RESOURCE_EXHAUSTED = 8,
        WR_STATUS_FAILED_PRECONDITION = 9,
        WR_STATUS_ABORTED = 10,
        WR_STATUS_OUT_OF_RANGE = 11,
        WR_STATUS_UNIMPLEMENTED = 12,
        WR_STATUS_INTERNAL = 13,
        WR_STATUS_UNAVAILABLE = 14,
        WR_STATUS_DATA_LOSS = 15,
        WR_STATUS_UNAUTHENTICATED = 16,
};

#define WR_ERR_MSG_MAX 480

struct wr_err {
        int code;              /* negative errno; 0 when no error was recorded */
        enum wr_status status; /* 0 means "derive from code" */
        enum wr_fault fault;
        char msg[WR_ERR_MSG_MAX];
};

/* Record an error: code (negative errno) and a printf-style message. The
 * message replaces any previous one. Returns code (so callers can write
 * `return err_set(e, -EINVAL, "...")`). */
int err_set(struct wr_err *e, int code, const char *fmt, ...) _printf_(3, 4);

/* Like err_set, but also fixes the gRPC status and whose fault it is. */
int err_setx(struct wr_err *e, int code, enum wr_status status, enum wr_fault fault,
             const char *fmt, ...) _printf_(5, 6);

/* Prefix context to the recorded message ("ctx: old message"). If no error
 * was recorded yet, records code with strerror(-code) as the message first.
 * Returns the recorded code (or code when e is NULL). */
int err_prefix(struct wr_err *e, int code, const char *fmt, ...) _printf_(3, 4);

/* Clear a recorded error. */
void err_clear(struct wr_err *e);

/* The gRPC status for an error: e->status when set, else mapped from errno
 * (ENOENT→NOT_FOUND, EINVAL→INVALID_ARGUMENT, EEXIST→ALREADY_EXISTS, ...). */
int err_status(const struct wr_err *e);

/* Map a negative errno to a gRPC status code. */
int err_status_from_errno(int code);

/* The canonical upper-case name of a gRPC status ("NOT_FOUND"). */
const char *err_status_name(int status);
