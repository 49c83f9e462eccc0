/* SPDX-License-Identifier: Apache-2.0 */
#include "basic/err.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

static void vformat(struct wr_err *e, const char *fmt, va_list ap) _printf_(2, 0);
static void vformat(struct wr_err *e, const char *fmt, va_list ap) {
        vsnprintf(e->msg, sizeof(e->msg), fmt, ap);
}

int err_set(struct wr_err *e, int code, const char *fmt, ...) {
        if (!e)
                return code;
        e->code = code;
        e->status = 0;
        e->fault = WR_FAULT_SERVICE;
        va_list ap;
        va_start(ap, fmt);
        vformat(e, fmt, ap);
        va_end(ap);
        return code;
}

int err_setx(struct wr_err *e, int code, enum wr_status status, enum wr_fault fault,
             const char *fmt, ...) {
        if (!e)
                return code;
        e->code = code;
        e->status = status;
        e->fault = fault;
        va_list ap;
        va_start(ap, fmt);
        vformat(e, fmt, ap);
        va_end(ap);
        return code;
}

int err_prefix(struct wr_err *e, int code, const char *fmt, ...) {
        if (!e)
                return code;
        if (e->code == 0) {
                e->code = code < 0 ? code : -EIO;
                e->status = 0;
                e->fault = WR_FAULT_SERVICE;
                snprintf(e->msg, sizeof(e->msg), "%s", strerror(-e->code));
        }
        char prefix[WR_ERR_MSG_MAX];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(prefix, sizeof(prefix), fmt, ap);
        va_end(ap);
        char old[WR_ERR_MSG_MAX];
        memcpy(old, e->msg, sizeof(old));
        snprintf(e->msg, sizeof(e->msg), "%s: %s", prefix, old);
        return e->code;
}

void err_clear(struct wr_err *e) {
        if (e)
                memset(e, 0, sizeof(*e));
}

int err_status_from_errno(int code) {
        switch (-code) {
        case 0:
                return WR_STATUS_OK;
        case ENOENT:
        case ESRCH:
                return WR_STATUS_NOT_FOUND;
        case EINVAL:
        case E2BIG:
        case ENAMETOOLONG:
        case EBADMSG:
                return WR_STATUS_INVALID_ARGUMENT;
        case EEXIST:
                return WR_STATUS_ALREADY_EXISTS;
        case EPERM:
        case EACCES:
                return WR_STATUS_PERMISSION_DENIED;
        case ENOSYS:
        case EOPNOTSUPP:
                return WR_STATUS_UNIMPLEMENTED;
        case ETIMEDOUT:
                return WR_STATUS_DEADLINE_EXCEEDED;
        case ECANCELED:
                return WR_STATUS_CANCELLED;
        case ENOSPC:
        case ENOMEM:
        case EMSGSIZE:
        case EDQUOT:
        case EMFILE:
        case ENFILE:
                return WR_STATUS_RESOURCE_EXHAUSTED;
        case EBUSY:
        case ENOTEMPTY:
        case ESTALE:
                return WR_STATUS_FAILED_PRECONDITION;
        case EAGAIN:
        case ECONNREFUSED:
        case ECONNRESET:
        case EPIPE:
                return WR_STATUS_UNAVAILABLE;
        case ERANGE:
                return WR_STATUS_OUT_OF_RANGE;
        case EUCLEAN:
                return WR_STATUS_DATA_LOSS;
        default:
                return WR_STATUS_INTERNAL;
        }
}

int err_status(const struct wr_err *e) {
        if (!e || e->code == 0)
                return e && e->status ? (int) e->status : WR_STATUS_OK;
        return e->status ? (int) e->status : err_status_from_errno(e->code);
}

const char *err_status_name(int status) {
        static const char *const names[] = {
                "OK",
                "CANCELLED",
                "UNKNOWN",
                "INVALID_ARGUMENT",
                "DEADLINE_EXCEEDED",
                "NOT_FOUND",
                "ALREADY_EXISTS",
                "PERMISSION_DENIED",
                "RESOURCE_EXHAUSTED",
                "FAILED_PRECONDITION",
                "ABORTED",
                "OUT_OF_RANGE",
                "UNIMPLEMENTED",
                "INTERNAL",
                "UNAVAILABLE",
                "DATA_LOSS",
                "UNAUTHENTICATED",
        };
        if (status < 0 || (size_t) status >= ELEMENTSOF(names))
                return "UNKNOWN";
        return names[status];
}
