/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* libcurl's multi interface driven by a libuv loop: the standard
 * integration (curl_multi_socket_action; one uv_poll per socket curl wants
 * watched, one uv_timer for curl's timeout), written once for every HTTP
 * client in the daemon (the registry client; the image builder and the
 * egress proxy's upstream side next). Nothing blocks the loop; no threads.
 *
 * The caller owns its easy handles: it creates and configures them (its
 * own CURLOPT_PRIVATE, write and header callbacks), hands them in with
 * curl_uv_add, and gets each one back exactly once through the done
 * callback when the transfer ends, or takes it back early with
 * curl_uv_remove. done runs from the loop after curl_multi_socket_action
 * returned, never from inside a curl callback, so it may add, remove and
 * clean up easy handles (its own included).
 *
 * Threads: the loop thread only. Module prefix: curl_uv_. */

#include <curl/curl.h>
#include <uv.h>

struct curl_uv;

/* A transfer ended: result is its CURLcode (CURLE_OK when the exchange
 * completed, whatever the HTTP status). easy is no longer in the multi
 * handle; the caller cleans it up or re-adds it. userdata is the one given
 * to curl_uv_new. */
typedef void (*curl_uv_done_fn)(CURL *easy, CURLcode result, void *userdata);

/* Make a multi handle on loop (curl_global_init is done on the first call;
 * not thread-safe, like it). Errors: -ENOMEM, -EIO (libcurl or libuv
 * refused; nothing is left on the loop). *ret owned by the caller:
 * curl_uv_free. */
int curl_uv_new(uv_loop_t *loop, curl_uv_done_fn done, void *userdata, struct curl_uv **ret);

/* The multi handle, for curl_multi_setopt (limits such as
 * CURLMOPT_MAX_HOST_CONNECTIONS). Do not replace the socket or timer
 * functions, and do not clean it up. */
CURLM *curl_uv_multi(struct curl_uv *cu);

/* Start a transfer on easy (still the caller's). Returns 0 (done will be
 * called for it, later, from the loop) or -EIO (curl_multi_add_handle
 * failed; done is not called). */
int curl_uv_add(struct curl_uv *cu, CURL *easy);

/* Stop a transfer: easy leaves the multi handle, done is not called for
 * it. Not an error when easy is not in it. */
void curl_uv_remove(struct curl_uv *cu, CURL *easy);

/* Free the multi handle. Every easy handle must have been removed (or
 * have ended) first. The poll and timer handles are closed on the loop;
 * their memory goes once the loop has run their close callbacks. Not from
 * inside done. NULL is fine. */
void curl_uv_free(struct curl_uv *cu);
