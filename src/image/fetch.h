/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* warrend's side of warren-fetch (fetch-main.c): one confined helper
 * process per pull job, spoken to over a SOCK_SEQPACKET socketpair with the
 * closed message set of fetch-proto.h. This module spawns the helper,
 * hands it the registry config and docker credentials in memfds (read from
 * the files here, then wiped from warrend's memory), sends requests, checks
 * every answer with img_fetch_msg_check before anyone reads a field, and
 * reports the helper's death. It decides nothing about images: pull.c
 * does. Threads: the loop thread only. Module prefix: img_fetcher_. */

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include <uv.h>

#include "basic/err.h"
#include "image/fetch-proto.h"

struct img_fetcher;

struct img_fetcher_opts {
        const char *helper;          /* path of warren-fetch */
        const char *ref;             /* the resolved reference ("127.0.0.1:5000/a/b:v1"), or
                                      * NULL: a spare, img_fetcher_bind names it later */
        const char *registry_config; /* path or NULL */
        const char *docker_config;   /* path or NULL */
        const char *root;            /* its chroot, prepared here (fetch-root.h) */
        bool loopback_only;
};

/* A checked answer (type is its enum img_fetch_type; msg is valid during
 * the call only). The callback may make requests and may free f. */
typedef void (*img_fetcher_msg_fn)(struct img_fetcher *f, int type, const void *msg,
                                   void *userdata);

/* The helper is gone or broke the protocol (killed, exited, sent a
 * malformed or unexpected message): e says which, naming its pid. Called
 * at most once, never after img_fetcher_free; the callback frees f. */
typedef void (*img_fetcher_dead_fn)(struct img_fetcher *f, const struct wr_err *e, void *userdata);

/* Spawn a helper for o->ref on loop. The config files are read now (errors
 * name them: -ENOENT/-EACCES/...); credentials cross in a memfd only.
 * Errors: those, -ENOMEM, -EIO/... (spawn failed: INTERNAL naming the
 * helper). *ret owned by the caller: img_fetcher_free. */
int img_fetcher_start(uv_loop_t *loop, const struct img_fetcher_opts *o, img_fetcher_msg_fn on_msg,
                      img_fetcher_dead_fn on_dead, void *userdata, struct img_fetcher **ret,
                      struct wr_err *e);

/* Send one request (type REQ_*): object for a manifest (tag or digest),
 * digest the expected sha256 ("" only for a tag manifest), max_size for a
 * config or blob, fd (REQ_BLOB only; dup'ed into the message, still the
 * caller's) the file to write to. Returns 0, or -EBADMSG (a request the
 * message set refuses), -EIO (the socket refused it; the helper is
 * broken) with e set. */
int img_fetcher_request(struct img_fetcher *f, enum img_fetch_type type, uint32_t id,
                        const char *object, const char *digest, uint64_t max_size, int fd,
                        struct wr_err *e);

/* Name the reference a helper started without one serves (REQ_BIND; once,
 * before any request). 0, or -EBADMSG (too long) / -EIO with e set. */
int img_fetcher_bind(struct img_fetcher *f, const char *ref, struct wr_err *e);

/* Hand a helper to another owner: its later answers and death go to these
 * callbacks (a spare taken by a pull job). */
void img_fetcher_retarget(struct img_fetcher *f, img_fetcher_msg_fn on_msg,
                          img_fetcher_dead_fn on_dead, void *userdata);

/* on: the helper's handles do not keep the loop running (a spare must not
 * hold up warrend's exit); off: they do again (a spare taken by a pull). */
void img_fetcher_set_background(struct img_fetcher *f, bool on);

/* The helper still runs and nothing declared it dead or freed it. */
bool img_fetcher_alive(const struct img_fetcher *f);

/* The helper's pid (0 when it has exited). */
pid_t img_fetcher_pid(const struct img_fetcher *f);

/* Kill the helper (SIGKILL), stop every callback and free f once its
 * handles have closed on the loop. NULL is fine; allowed from inside the
 * callbacks. */
void img_fetcher_free(struct img_fetcher *f);

/* --privsep: who starts warren-fetch instead of this process (warren-priv,
 * HELPER_START FETCH; docs/privsep.md "warren-fetch started by
 * warren-priv"): sock is the helper's end of its socket, the config fds
 * sealed memfds or -1; it prepares the helper's chroot and finds the
 * binary itself (o->helper and o->root are not used). 0 with *ret_pid and
 * *ret_pidfd (the caller's: watched for the exit, signalled to kill), or
 * -errno with e. The fds stay the caller's. */
typedef int (*img_fetch_start_fn)(void *userdata, int sock, int registry_config_fd,
                                  int docker_config_fd, bool loopback_only, pid_t *ret_pid,
                                  int *ret_pidfd, struct wr_err *e);

/* Every later img_fetcher_start goes through fn (NULL: spawned here again).
 * Set once, on the loop thread, before the first pull. */
void img_fetcher_set_start(img_fetch_start_fn fn, void *userdata);

/* The warren-fetch next to the warren-unpack at unpack_helper
 * (WARREN_FETCH_HELPER overrides), into out. */
void img_fetcher_find(const char *unpack_helper, char *out, size_t size);
