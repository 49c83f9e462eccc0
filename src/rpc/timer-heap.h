/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* A timer heap: any number of deadlines on one uv_timer_t. Each deadline is
 * a struct timer_heap_entry the owner embeds in its own object (a call, a
 * stream, a proxied connection) and arms, re-arms or disarms in O(log n);
 * the uv timer always runs for the earliest one. Used by the gRPC server
 * and client (call deadlines, connect timeouts, grace periods) and meant
 * for any other event-loop module with many timeouts (the egress proxy).
 *
 * Contract:
 *  - single-threaded: every function runs on the loop's thread;
 *  - times are uv_now() milliseconds of the heap's loop (absolute, not
 *    relative: arm with uv_now(loop) + delay);
 *  - the heap does not own entries: an entry must stay valid while armed,
 *    and its owner disarms it before freeing it;
 *  - an entry is disarmed before its cb runs, so cb may re-arm it, disarm or
 *    arm others, or free the object holding it. Entries due at the same
 *    time fire in no particular order;
 *  - nothing allocates except timer_heap_arm growing the heap. */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <uv.h>

struct timer_heap_entry {
        uint64_t when; /* uv_now() milliseconds; valid while armed */
        size_t idx;    /* the heap's: slot + 1, 0 = not armed */
        /* Called once each time the entry comes due (set before arming). */
        void (*cb)(struct timer_heap_entry *t);
};

struct timer_heap {
        uv_timer_t handle; /* handle.data is free for the owner */
        struct timer_heap_entry **heap;
        size_t n, cap;
};

/* Initialise an empty heap on loop (th may hold garbage). Returns 0 or the
 * negative errno of uv_timer_init; on failure nothing is left to close. On
 * success the owner must eventually call timer_heap_close. */
int timer_heap_init(struct timer_heap *th, uv_loop_t *loop);

/* Arm t to fire at when (uv_now() milliseconds; a time in the past fires on
 * the next loop iteration), or move it there when it is already armed.
 * Returns 0 or -ENOMEM (growing the heap; t is then left as it was). */
int timer_heap_arm(struct timer_heap *th, struct timer_heap_entry *t, uint64_t when);

/* Disarm t; a no-op when it is not armed. Never fails. */
void timer_heap_disarm(struct timer_heap *th, struct timer_heap_entry *t);

/* Whether t is armed. */
static inline bool timer_heap_entry_armed(const struct timer_heap_entry *t) {
        return t->idx != 0;
}

/* Disarm every entry (none fires any more), free the heap and uv_close the
 * handle with cb (which may be NULL; the struct must stay valid until cb
 * ran). After this only the memory is the owner's. */
void timer_heap_close(struct timer_heap *th, uv_close_cb cb);
