/* SPDX-License-Identifier: Apache-2.0 */
#pragma once
/* Shared by wr-rpc-interop and bench/rpc-c: connect from command-line
 * options and drive Diag streams with the C client. */
#include <stdbool.h>
#include <stdint.h>
#include <time.h>

#include "rpc/client.h"

struct tool_opts {
        const char *addr, *ca, *server_name, *token;
        bool tls;
        int megabytes;
        int slack_ms;
        int seconds;
        const char *cmd;
};

/* Parse --addr --tls --ca --server-name --token --megabytes --slack-ms
 * --seconds and one positional command. Returns 0 or -EINVAL. */
int tool_parse(int argc, char **argv, struct tool_opts *o);
/* Connect (blocking) or print the error and return negative. */
int tool_connect(uv_loop_t *loop, const struct tool_opts *o, struct rpc_client **ret);

static inline uint64_t now_ns(void) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t) ts.tv_sec * 1000000000ULL + (uint64_t) ts.tv_nsec;
}

/* A bidi Echo stream of n messages of size bytes with content checks and
 * back-pressure. Returns 0 on success with the elapsed ns in *ret_ns. */
int tool_bidi(struct rpc_client *c, size_t n, size_t size, uint64_t *ret_ns, char *err,
              size_t errlen);
