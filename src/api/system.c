/* SPDX-License-Identifier: Apache-2.0 */
/* warren.v1.System: version and build facts of the daemon. */
#include <linux/magic.h>
#include <string.h>
#include <sys/statfs.h>
#include <sys/utsname.h>
#include <time.h>

#include "api/api.h"
#include "warren/v1/system.pb-c.h"

#ifndef WARREN_GIT_COMMIT
#define WARREN_GIT_COMMIT ""
#endif

static bool is_cgroup2(const char *path) {
        struct statfs fs;
        return statfs(path, &fs) == 0 && fs.f_type == CGROUP2_SUPER_MAGIC;
}

/* "v2" when /sys/fs/cgroup is cgroup2, "hybrid" when /sys/fs/cgroup/unified
 * is, else "v1". */
static const char *cgroup_mode(void) {
        if (is_cgroup2("/sys/fs/cgroup"))
                return "v2";
        if (is_cgroup2("/sys/fs/cgroup/unified"))
                return "hybrid";
        return "v1";
}

static uint64_t now_usec(void) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t) ts.tv_sec * 1000000u + (uint64_t) ts.tv_nsec / 1000u;
}

static void get_version(struct rpc_call *call, const ProtobufCMessage *msg) {
        const struct api_ctx *ctx = rpc_call_server_ctx(call);
        struct utsname u;
        if (uname(&u) < 0)
                strcpy(u.release, "unknown");
        Warren__V1__GetVersionResponse r = WARREN__V1__GET_VERSION_RESPONSE__INIT;
        r.version = (char *) WARREN_VERSION;
        r.api_version = (char *) "v1";
        r.git_commit = (char *) WARREN_GIT_COMMIT;
        uint64_t now = now_usec();
        r.uptime_seconds =
                ctx && now > ctx->started_usec ? (now - ctx->started_usec) / 1000000u : 0;
        r.cgroup_mode = (char *) cgroup_mode();
        r.kernel = u.release;
        if (ctx) {
                r.insecure_listeners = (char **) ctx->insecure_listeners;
                r.n_insecure_listeners = ctx->n_insecure_listeners;
        }
        rpc_call_reply(call, &r.base);
}

static const struct rpc_method methods[] = {
        {
                .path = "/warren.v1.System/GetVersion",
                .kind = RPC_UNARY,
                .input = &warren__v1__get_version_request__descriptor,
                .output = &warren__v1__get_version_response__descriptor,
                .on_message = get_version,
        },
};

int api_system_register(struct rpc_server *s) {
        return rpc_server_add_methods(s, methods, ELEMENTSOF(methods));
}
