/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* Internal to src/rpc: memory for messages. A block allocator for message
 * buffers (with a per-thread cache of large blocks, so that streams of big
 * messages neither page-fault on every message nor need process-wide
 * malloc tuning), the protobuf-c allocator on it, and a growable byte
 * buffer. Not thread-safe across threads for one buffer; the block cache
 * is per thread (a block may be freed on another thread than the one that
 * allocated it: it then joins that thread's cache). */

#include <stddef.h>
#include <stdint.h>

#include <protobuf-c/protobuf-c.h>

/* Message buffers (queued messages, decoded request bodies, unpacked bytes
 * fields). Blocks of 128 KiB and more are mmap'd and, when freed, kept in
 * a small per-thread cache (at most 8 blocks, 16 MiB) so that streams of
 * large messages neither page-fault on every message nor need
 * process-wide malloc tuning; smaller ones come from malloc. With
 * AddressSanitizer everything comes from malloc. Returns NULL on
 * allocation failure. */
void *h2_mem_alloc(size_t n);
/* Free what h2_mem_alloc returned. NULL ok. */
void h2_mem_free(void *p);
/* Return every cached block to the kernel (owners call this when idle). */
void h2_mem_trim(void);
/* Bytes held by this thread's cache. */
size_t h2_mem_cached(void);
/* A protobuf-c allocator on h2_mem_alloc/h2_mem_free: messages unpacked
 * with it must be freed with it. */
extern ProtobufCAllocator h2_pb_allocator;
/* The same for messages that may hold plaintext secrets (the requests of
 * methods marked `sensitive`): every block is wiped before it is freed.
 * Messages unpacked with it must be freed with it. */
extern ProtobufCAllocator h2_pb_allocator_wiped;

/* A growable byte buffer (malloc'd). A zeroed struct is an empty buffer;
 * h2_buf_free releases it. */
struct h2_buf {
        uint8_t *data;
        size_t len, cap;
};

/* Append n bytes; returns 0 or -ENOMEM. */
int h2_buf_append(struct h2_buf *b, const void *p, size_t n);
/* Make room for n more bytes and return a pointer to them (len unchanged),
 * or NULL on allocation failure. */
uint8_t *h2_buf_reserve(struct h2_buf *b, size_t n);
/* Drop the first n bytes (all of them: as h2_buf_reset). */
void h2_buf_consume(struct h2_buf *b, size_t n);
/* Empty the buffer, keeping its storage for the next burst unless it is
 * above 4 MiB. */
void h2_buf_reset(struct h2_buf *b);
/* Free the storage; the buffer is then empty and reusable. */
void h2_buf_free(struct h2_buf *b);
