/* SPDX-License-Identifier: Apache-2.0 */
/* A binary min-heap of deadlines on one uv timer. See timer-heap.h. */
#include "rpc/timer-heap.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

static void heap_swap(struct timer_heap *th, size_t a, size_t b) {
        struct timer_heap_entry *t = th->heap[a];
        th->heap[a] = th->heap[b];
        th->heap[b] = t;
        th->heap[a]->idx = a + 1;
        th->heap[b]->idx = b + 1;
}

static void heap_up(struct timer_heap *th, size_t i) {
        while (i > 0) {
                size_t p = (i - 1) / 2;
                if (th->heap[p]->when <= th->heap[i]->when)
                        break;
                heap_swap(th, p, i);
                i = p;
        }
}

static void heap_down(struct timer_heap *th, size_t i) {
        for (;;) {
                size_t l = 2 * i + 1, r = l + 1, m = i;
                if (l < th->n && th->heap[l]->when < th->heap[m]->when)
                        m = l;
                if (r < th->n && th->heap[r]->when < th->heap[m]->when)
                        m = r;
                if (m == i)
                        return;
                heap_swap(th, i, m);
                i = m;
        }
}

static void heap_fire(uv_timer_t *h);

/* Point the uv timer at the earliest entry (or stop it). */
static void heap_schedule(struct timer_heap *th) {
        if (th->n == 0) {
                uv_timer_stop(&th->handle);
                return;
        }
        uint64_t now = uv_now(th->handle.loop);
        uint64_t when = th->heap[0]->when;
        /* Cannot fail: the handle is initialised and the callback set. */
        (void) uv_timer_start(&th->handle, heap_fire, when > now ? when - now : 0, 0);
}

static void heap_fire(uv_timer_t *h) {
        struct timer_heap *th = (struct timer_heap *) h;
        uint64_t now = uv_now(h->loop);
        while (th->n > 0 && th->heap[0]->when <= now) {
                struct timer_heap_entry *t = th->heap[0];
                timer_heap_disarm(th, t);
                t->cb(t);
        }
        heap_schedule(th);
}

int timer_heap_init(struct timer_heap *th, uv_loop_t *loop) {
        memset(th, 0, sizeof(*th));
        return uv_timer_init(loop, &th->handle);
}

int timer_heap_arm(struct timer_heap *th, struct timer_heap_entry *t, uint64_t when) {
        if (t->idx) {
                t->when = when;
                heap_up(th, t->idx - 1);
                heap_down(th, t->idx - 1);
                heap_schedule(th);
                return 0;
        }
        if (th->n == th->cap) {
                size_t cap = th->cap ? th->cap * 2 : 16;
                struct timer_heap_entry **h = reallocarray(th->heap, cap, sizeof(*h));
                if (!h)
                        return -ENOMEM;
                th->heap = h;
                th->cap = cap;
        }
        t->when = when;
        th->heap[th->n] = t;
        t->idx = ++th->n;
        heap_up(th, th->n - 1);
        heap_schedule(th);
        return 0;
}

void timer_heap_disarm(struct timer_heap *th, struct timer_heap_entry *t) {
        if (!t->idx)
                return;
        size_t i = t->idx - 1;
        t->idx = 0;
        th->n--;
        if (i != th->n) {
                th->heap[i] = th->heap[th->n];
                th->heap[i]->idx = i + 1;
                heap_up(th, i);
                heap_down(th, i);
        }
}

void timer_heap_close(struct timer_heap *th, uv_close_cb cb) {
        for (size_t i = 0; i < th->n; i++)
                th->heap[i]->idx = 0;
        free(th->heap);
        th->heap = NULL;
        th->n = th->cap = 0;
        uv_close((uv_handle_t *) &th->handle, cb);
}
