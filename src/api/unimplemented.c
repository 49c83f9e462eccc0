/* SPDX-License-Identifier: Apache-2.0 */
/* The answer for methods declared in the proto but not built yet. */
#include <stdio.h>

#include "api/api.h"
#include "basic/log.h"

void api_unimplemented(struct rpc_call *call, const char *what) {
        const struct rpc_method *m = rpc_call_method(call);
        const char *path = m && m->path ? m->path : "this method";
        if (*path == '/')
                path++;
        char msg[512];
        snprintf(msg, sizeof(msg), "%s is not implemented yet: %s", path, what);
        log_debug("rpc %s: UNIMPLEMENTED (%s)", path, what);
        rpc_call_finish(call, WR_STATUS_UNIMPLEMENTED, msg);
}
