/* SPDX-License-Identifier: Apache-2.0 */
/* Message memory of the gRPC layer: the block allocator with its per-thread
 * cache of large blocks, and growable byte buffers. See h2-mem.h. */
#include "rpc/h2-mem.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#if defined(__SANITIZE_ADDRESS__)
#define MEM_NO_CACHE 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define MEM_NO_CACHE 1
#endif
#endif

/* Every block starts with this header; size 0 = malloc'd. */
#define MEM_HDR 16u
#define MEM_BIG (128u * 1024u)
#define MEM_ROUND (64u * 1024u)
#define MEM_CACHE_SLOTS 8
#define MEM_CACHE_BYTES (16u << 20)

struct mem_cache {
        void *blk[MEM_CACHE_SLOTS];
        size_t size[MEM_CACHE_SLOTS];
        size_t n, bytes;
};
static _Thread_local struct mem_cache mem_cache;

void *h2_mem_alloc(size_t n) {
        if (n > SIZE_MAX - MEM_HDR - MEM_ROUND)
                return NULL;
        size_t total = n + MEM_HDR;
        uint8_t *p;
#ifndef MEM_NO_CACHE
        if (total >= MEM_BIG) {
                /* The smallest block that fits; of equal ones the most
                 * recently freed (still in the CPU cache). */
                struct mem_cache *mc = &mem_cache;
                size_t best = SIZE_MAX;
                for (size_t i = mc->n; i-- > 0;)
                        if (mc->size[i] >= total &&
                            (best == SIZE_MAX || mc->size[i] < mc->size[best]))
                                best = i;
                size_t size;
                if (best != SIZE_MAX) {
                        p = mc->blk[best];
                        size = mc->size[best];
                        mc->bytes -= size;
                        mc->n--;
                        memmove(&mc->blk[best], &mc->blk[best + 1],
                                (mc->n - best) * sizeof(mc->blk[0]));
                        memmove(&mc->size[best], &mc->size[best + 1],
                                (mc->n - best) * sizeof(mc->size[0]));
                } else {
                        size = (total + MEM_ROUND - 1) / MEM_ROUND * MEM_ROUND;
                        p = mmap(NULL, size, PROT_READ | PROT_WRITE,
                                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
                        if (p == MAP_FAILED)
                                return NULL;
                }
                *(size_t *) p = size;
                return p + MEM_HDR;
        }
#endif
        p = malloc(total);
        if (!p)
                return NULL;
        *(size_t *) p = 0;
        return p + MEM_HDR;
}

void h2_mem_free(void *ptr) {
        if (!ptr)
                return;
        uint8_t *p = (uint8_t *) ptr - MEM_HDR;
        size_t size = *(size_t *) p;
        if (size == 0) {
                free(p);
                return;
        }
        struct mem_cache *mc = &mem_cache;
        if (mc->n < MEM_CACHE_SLOTS && mc->bytes + size <= MEM_CACHE_BYTES) {
                mc->blk[mc->n] = p;
                mc->size[mc->n] = size;
                mc->n++;
                mc->bytes += size;
                return;
        }
        munmap(p, size);
}

void h2_mem_trim(void) {
        struct mem_cache *mc = &mem_cache;
        for (size_t i = 0; i < mc->n; i++)
                munmap(mc->blk[i], mc->size[i]);
        mc->n = mc->bytes = 0;
}

size_t h2_mem_cached(void) {
        return mem_cache.bytes;
}

static void *pb_alloc(void *data, size_t n) {
        return h2_mem_alloc(n);
}

static void pb_free(void *data, void *p) {
        h2_mem_free(p);
}

ProtobufCAllocator h2_pb_allocator = {.alloc = pb_alloc, .free = pb_free};

/* Plain malloc with the block's size in the header, so that the free can
 * wipe all of it. */
static void *pb_alloc_wiped(void *data, size_t n) {
        if (n > SIZE_MAX - MEM_HDR)
                return NULL;
        uint8_t *p = malloc(n + MEM_HDR);
        if (!p)
                return NULL;
        *(size_t *) p = n;
        return p + MEM_HDR;
}

static void pb_free_wiped(void *data, void *ptr) {
        if (!ptr)
                return;
        uint8_t *p = (uint8_t *) ptr - MEM_HDR;
        explicit_bzero(p, *(size_t *) p + MEM_HDR);
        free(p);
}

ProtobufCAllocator h2_pb_allocator_wiped = {.alloc = pb_alloc_wiped, .free = pb_free_wiped};

/* --- buffers --- */

uint8_t *h2_buf_reserve(struct h2_buf *b, size_t n) {
        if (b->cap - b->len < n) {
                size_t cap = b->cap ? b->cap : 4096;
                while (cap - b->len < n)
                        cap *= 2;
                uint8_t *p = realloc(b->data, cap);
                if (!p)
                        return NULL;
                b->data = p;
                b->cap = cap;
        }
        return b->data + b->len;
}

int h2_buf_append(struct h2_buf *b, const void *p, size_t n) {
        uint8_t *d = h2_buf_reserve(b, n);
        if (!d)
                return -ENOMEM;
        if (n)
                memcpy(d, p, n);
        b->len += n;
        return 0;
}

void h2_buf_reset(struct h2_buf *b) {
        b->len = 0;
        if (b->cap > 4u * 1024 * 1024) {
                free(b->data);
                b->data = NULL;
                b->cap = 0;
        }
}

void h2_buf_consume(struct h2_buf *b, size_t n) {
        if (n >= b->len) {
                h2_buf_reset(b);
                return;
        }
        memmove(b->data, b->data + n, b->len - n);
        b->len -= n;
}

void h2_buf_free(struct h2_buf *b) {
        free(b->data);
        b->data = NULL;
        b->len = b->cap = 0;
}
