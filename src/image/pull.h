/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* Registry pulls: reference → manifest (an image index or Docker manifest
 * list is resolved to linux/<host arch>) → config blob → layer blobs, each
 * streamed to an anonymous temp file in state_dir/tmp (O_TMPFILE), its
 * sha256 checked against the manifest while it streams (by warren-fetch)
 * and again once it has landed (by warrend), then unpacked by
 * img_layer_unpack with the config's diff id as the expected digest →
 * img_store_commit_image(name, config, diff ids, "pull").
 *
 * - Layers already in the store are not downloaded ("cached").
 * - Up to 3 blobs download at once; each verified blob is unpacked at once
 *   (warren-unpack helpers run in parallel with the remaining downloads).
 * - Concurrent pulls of the same reference share one job: a second
 *   img_pull_start attaches to the running one and sees the same progress
 *   and result.
 * - A failed pull (digest mismatch → DATA_LOSS, unpack refusal, ...) stores
 *   nothing: running downloads and helpers are stopped and the layers this
 *   pull unpacked are removed again unless another image uses them.
 * - When the last waiter cancels, the job stops: downloads end, helpers are
 *   killed and their trees removed (layers/tmp ends up empty); temp files
 *   are anonymous, so nothing is left even after a crash. Layers completely
 *   unpacked before the cancel stay (the next pull finds them cached; the
 *   store's start-up GC removes them if no image ever uses them).
 *
 * The network side runs in warren-fetch, one confined helper process per
 * pull job (src/image/fetch.h, fetch-main.c): it fetches, authenticates,
 * parses manifests, indexes and configs (src/image/manifest.h) and writes
 * blobs into the temp files this module opens; it answers with the fixed
 * messages of fetch-proto.h. This module decides (platform, cache, the
 * download schedule, the commit) and recomputes each blob's sha256 (thread
 * pool) before unpacking it. A helper that dies or breaks the protocol
 * fails its pull (UNAVAILABLE / INTERNAL, naming its pid). Nothing blocks
 * the loop. Threads: the loop thread only. */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <uv.h>

#include "basic/err.h"
#include "image/image.h"

struct img_pull;

/* Per-layer progress, bottom layer first. state is one of "waiting",
 * "downloading", "verifying", "extracting", "done", "cached". */
struct img_pull_layer {
        char digest[72]; /* the blob digest (compressed) from the manifest */
        uint64_t total_bytes;
        uint64_t done_bytes;
        const char *state;
};

/* Progress, at most every 100 ms and on every state change, from the loop
 * (never from inside curl). layers is valid during the call only; n = 0
 * while the manifest is still being resolved. Calling img_pull_cancel on
 * this pull from here is allowed. */
typedef void (*img_pull_progress_fn)(struct img_pull *p, const struct img_pull_layer *layers,
                                     size_t n, void *userdata);

/* Called once at the end. r = 0: info is the committed image (owned by the
 * pull: copy what you keep). r < 0: e says why, with the gRPC status to
 * answer: INVALID_ARGUMENT (bad reference), NOT_FOUND ("image X not found
 * in registry Y", or no linux/amd64 entry in an index), UNAUTHENTICATED /
 * PERMISSION_DENIED (with the fix), UNAVAILABLE (registry unreachable,
 * naming it and how to configure a mirror), DATA_LOSS (digest mismatch),
 * and the unpack errors of img_layer_unpack. The handle is freed right
 * after the callback returns: do not cancel it afterwards. */
typedef void (*img_pull_done_fn)(struct img_pull *p, int r, const struct img_info *info,
                                 const struct wr_err *e, void *userdata);

/* Configure registries for pulls on store s: the registry config (mirrors,
 * insecure registries; JSON, see registry.h) and a docker-style
 * config.json with credentials. Either may be NULL. Both files are read
 * and validated now (warrend calls this at start-up so a bad file is a
 * start-up error). Call before the first pull; calling again replaces the
 * configuration for later pulls. Errors: -ENOENT/-EACCES/-EINVAL naming
 * the file, -ENOMEM. */
int img_pull_configure(struct img_store *s, const char *registry_config, const char *docker_config,
                       struct wr_err *e);

/* Contact only registries and mirrors on loopback (see
 * img_registry_set_loopback_only): warrend --pull-loopback-only, which the
 * test suites use so that nothing ever leaves the machine. Call before the
 * first pull. Returns 0 or -ENOMEM. */
int img_pull_set_loopback_only(struct img_store *s, bool on, struct wr_err *e);

/* Start pulling ref ("ubuntu", "python:3.12-slim", "127.0.0.1:5000/a:v1",
 * "repo@sha256:<hex>") into s, on loop. The image is stored under its
 * local name (img_pull_local_name). progress may be NULL. Returns 0 (done
 * will be called exactly once, later, from the loop, unless cancelled) or
 * a negative errno with e set when nothing started (-EINVAL: malformed
 * reference; done is not called). *ret is the caller's handle. */
int img_pull_start(struct img_store *s, uv_loop_t *loop, const char *ref,
                   img_pull_progress_fn progress, img_pull_done_fn done, void *userdata,
                   struct img_pull **ret, struct wr_err *e);

/* Stop waiting for a pull: neither callback runs any more and the handle
 * is freed. The shared job continues for other waiters and stops when
 * none is left. Not after done ran; not from inside done. NULL is fine. */
void img_pull_cancel(struct img_pull *p);

/* The local name a pull of ref is stored under: "ubuntu:latest" for
 * "ubuntu" / "docker.io/library/ubuntu", "user/repo:tag",
 * "127.0.0.1:5000/a:v1". -ENOENT for a reference with a digest only
 * (stored without a name; pull again or use the image id), -EINVAL
 * (malformed). out needs >= 512 bytes. Use it to look an image up before
 * pulling: img_store_resolve(s, name, ...). */
int img_pull_local_name(const char *ref, char *out, size_t outsz, struct wr_err *e);

/* Stop every running pull (no callbacks run) and close the registry
 * client's libuv handles. Call while the loop still runs, before the final
 * uv_run/uv_loop_close at shutdown (warrend does); later pulls recreate the
 * client. NULL is fine. */
void img_pull_shutdown(struct img_store *s);

/* Free the pull state of a store (img_store_free calls it). Running pulls
 * must have been cancelled. NULL is fine. */
struct img_pull_ctx;
void img_pull_ctx_free(struct img_pull_ctx *ctx);
