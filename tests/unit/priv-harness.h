/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* What the warren-priv unit tests share (test-priv*.c): a real warren-priv
 * started on a socketpair over a temp state dir, one request answered,
 * a decoder refusal, a shell line. Every helper fails the running cmocka
 * test on error. Include after <cmocka.h>. */

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "basic/macro.h"
#include "priv/priv-proto.h"

struct priv_server {
        char dir[64];   /* /tmp/<tag>.XXXXXX: state/ inside; a test's canaries beside it */
        char state[96]; /* <dir>/state, warren-priv's --state-dir */
        pid_t pid;
        int sock; /* our end of the SEQPACKET pair */
};

/* Make <dir>/state and start bin on it (--init init when init is not
 * NULL; any file serves when nothing gets as far as running it). The
 * caller lays out what it needs under s->dir afterwards (warren-priv opens
 * only the state dir itself at start). */
void priv_server_start(struct priv_server *s, const char *bin, const char *tag, const char *init);

/* The two halves of priv_server_start, for a test whose layout must exist
 * before warren-priv starts (e.g. helper binaries it looks up at start):
 * make <dir>/state, then exec. */
void priv_server_dirs(struct priv_server *s, const char *tag);
void priv_server_exec(struct priv_server *s, const char *bin, const char *init);

/* Close our end (warren-priv sees EOF), expect a clean exit 0, remove dir. */
void priv_server_stop(struct priv_server *s);

/* Send one request (with fds) and decode its answer into rep. rfds NULL:
 * the answer's fds are closed; else they are stored there (*n_rfds, up to
 * PRIV_FDS_MAX) for the caller to close. */
void priv_server_answer(struct priv_server *s, const void *buf, size_t len, const int *fds,
                        size_t n_fds, struct priv_reply *rep, int *rfds, size_t *n_rfds);

/* priv_req_decode refuses buf with code and says why. */
void priv_refused(const void *buf, size_t len, size_t n_fds, int code);

/* system(3) of the formatted line, which must succeed. */
void priv_sh(const char *fmt, ...) _printf_(1, 2);
