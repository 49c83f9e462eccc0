/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* Wire format between warrend (src/image/fetch.c) and warren-fetch
 * (src/image/fetch-main.c), the confined process that talks to registries.
 *
 * Transport: one AF_UNIX SOCK_SEQPACKET socketpair per pull job, made by
 * warrend, the helper's end on its --sock-fd. Every message is exactly one
 * datagram: a fixed struct of the size its type names (no variable part;
 * unused tails are zero), host byte order, reserved fields zero. Messages
 * larger than the datagram a type allows, smaller, with another magic or
 * version, an unknown type, a string without its NUL, a count past its
 * array or a malformed digest are refused by img_fetch_msg_check (pure,
 * fuzzed by tests/fuzz/fuzz-fetch-proto.c) before any field is used.
 *
 * Requests (warrend -> warren-fetch); hdr.id is chosen by warrend and
 * echoed by every answer to it:
 *   REQ_BIND      ref = the reference (registry, repository) every later
 *                 request is about. Exactly once, first: a helper may be
 *                 started ahead of its pull (a warm spare) and serves one
 *                 pull only. -> REP_ERROR only when ref is refused.
 *   REQ_MANIFEST  object = tag or "sha256:<hex>"; digest = the digest the
 *                 manifest bytes must have ("" = none, a tag).
 *                 -> REP_MANIFEST or REP_INDEX or REP_ERROR
 *   REQ_CONFIG    digest = the config blob; max_size = its cap.
 *                 -> REP_CONFIG or REP_ERROR
 *   REQ_BLOB      digest = the layer blob; max_size = its size from the
 *                 manifest (0 = unknown); exactly one SCM_RIGHTS fd: the
 *                 file to write the blob into (warrend's anonymous temp
 *                 file in state_dir/tmp, written from offset 0).
 *                 -> REP_PROGRESS* then REP_BLOB or REP_ERROR
 * Answers (warren-fetch -> warrend) carry no fds. An answer warrend did not
 * ask for (unknown id, a second final answer) is a protocol error: warrend
 * kills the helper and fails the pull.
 *
 * The registry's own bytes never cross this boundary: manifests, indexes,
 * configs, WWW-Authenticate challenges and token responses are parsed in
 * warren-fetch, and only what warrend decides with crosses back, in the
 * fixed structs below. Layer blobs go into the fd warrend passed;
 * warrend recomputes their sha256 (src/image/pull.c) before unpacking. */

#include <stddef.h>
#include <stdint.h>

#include "basic/err.h"

#define IMG_FETCH_MAGIC 0x57464531u /* "WFE1" */
#define IMG_FETCH_VERSION 1

#define IMG_FETCH_DIGEST_MAX 72            /* "sha256:" + 64 hex + NUL, padded */
#define IMG_FETCH_OBJECT_MAX 136           /* a tag (<= 128) or a digest */
#define IMG_FETCH_MAX_LAYERS 512           /* = IMG_MANIFEST_MAX_LAYERS */
#define IMG_FETCH_MAX_PLATFORMS 256        /* index entries reported (with a valid digest) */
#define IMG_FETCH_PLATFORM_FIELD 32        /* os / architecture bytes incl. NUL */
#define IMG_FETCH_STRINGS_MAX (96u * 1024) /* the config's strings, NULs included */
#define IMG_FETCH_REF_MAX 600              /* a formatted reference incl. NUL */

enum img_fetch_type {
        IMG_FETCH_REQ_MANIFEST = 1,
        IMG_FETCH_REQ_CONFIG = 2,
        IMG_FETCH_REQ_BLOB = 3,
        IMG_FETCH_REQ_BIND = 4,
        IMG_FETCH_REP_MANIFEST = 0x81,
        IMG_FETCH_REP_INDEX = 0x82,
        IMG_FETCH_REP_CONFIG = 0x83,
        IMG_FETCH_REP_PROGRESS = 0x84,
        IMG_FETCH_REP_BLOB = 0x85,
        IMG_FETCH_REP_ERROR = 0x86,
};

struct img_fetch_hdr {
        uint32_t magic;   /* IMG_FETCH_MAGIC */
        uint16_t version; /* IMG_FETCH_VERSION */
        uint16_t type;    /* enum img_fetch_type */
        uint32_t size;    /* sizeof the whole message: the struct of type */
        uint32_t id;      /* request id (answers: the request's) */
};

/* REQ_MANIFEST, REQ_CONFIG, REQ_BLOB */
struct img_fetch_req {
        struct img_fetch_hdr hdr;
        char object[IMG_FETCH_OBJECT_MAX]; /* REQ_MANIFEST: tag or digest; else "" */
        char digest[IMG_FETCH_DIGEST_MAX]; /* expected sha256 ("" only for a tag manifest) */
        uint64_t max_size;                 /* REQ_CONFIG / REQ_BLOB: byte cap (0 = none) */
};

/* REQ_BIND */
struct img_fetch_req_bind {
        struct img_fetch_hdr hdr;
        char ref[IMG_FETCH_REF_MAX]; /* non-empty */
};

/* REP_MANIFEST: an image manifest, parsed. */
struct img_fetch_layer {
        char digest[IMG_FETCH_DIGEST_MAX]; /* valid sha256 */
        uint64_t size;                     /* 0 = not given */
};
struct img_fetch_rep_manifest {
        struct img_fetch_hdr hdr;
        char config_digest[IMG_FETCH_DIGEST_MAX]; /* valid sha256 */
        uint64_t config_size;
        uint32_t n_layers; /* 1..IMG_FETCH_MAX_LAYERS */
        uint32_t reserved;
        struct img_fetch_layer layers[IMG_FETCH_MAX_LAYERS];
};

/* REP_INDEX: an image index / manifest list; warrend picks the platform. */
struct img_fetch_platform {
        char os[IMG_FETCH_PLATFORM_FIELD];   /* truncated to fit (then never "linux") */
        char arch[IMG_FETCH_PLATFORM_FIELD]; /* likewise */
        char digest[IMG_FETCH_DIGEST_MAX];   /* valid sha256 */
};
struct img_fetch_rep_index {
        struct img_fetch_hdr hdr;
        uint32_t n_platforms; /* 0..IMG_FETCH_MAX_PLATFORMS */
        uint32_t reserved;
        struct img_fetch_platform platforms[IMG_FETCH_MAX_PLATFORMS];
};

/* REP_CONFIG: an image config, parsed. strings holds, NUL-terminated and in
 * this order, the counts[] strings of each field of enum img_fetch_field;
 * strings_len is the exact number of bytes used (the rest is zero). */
enum img_fetch_field {
        IMG_FETCH_F_DIFF_IDS = 0, /* n_layers of the manifest, each a valid sha256 */
        IMG_FETCH_F_ENV,
        IMG_FETCH_F_ENTRYPOINT,
        IMG_FETCH_F_CMD,
        IMG_FETCH_F_WORKING_DIR, /* 0 or 1 */
        IMG_FETCH_F_USER,        /* 0 or 1 */
        IMG_FETCH_F_SHELL,
        IMG_FETCH_F_STOP_SIGNAL, /* 0 or 1 */
        IMG_FETCH_F_LABELS,
        IMG_FETCH_F_EXPOSED_PORTS,
        IMG_FETCH_F_HC_TEST,
        IMG_FETCH_F_COUNT,
};
struct img_fetch_rep_config {
        struct img_fetch_hdr hdr;
        uint32_t counts[IMG_FETCH_F_COUNT];
        uint32_t strings_len;
        int64_t hc_interval_ns, hc_timeout_ns, hc_start_period_ns, hc_start_interval_ns;
        int32_t hc_retries;
        uint32_t reserved;
        char strings[IMG_FETCH_STRINGS_MAX];
};

/* REP_PROGRESS / REP_BLOB: bytes of the blob received so far / in all.
 * REP_BLOB also says the helper's digest check passed (warrend checks
 * again). */
struct img_fetch_rep_blob {
        struct img_fetch_hdr hdr;
        uint64_t received;
};

/* REP_ERROR: why the request failed, with the gRPC status to answer. */
struct img_fetch_rep_error {
        struct img_fetch_hdr hdr;
        struct wr_err err; /* code < 0, msg NUL-terminated */
};

/* The largest message of either direction (a receive buffer's size). */
#define IMG_FETCH_MSG_MAX sizeof(struct img_fetch_rep_config)

/* Which end a message is checked for. */
enum img_fetch_dir {
        IMG_FETCH_TO_HELPER = 0, /* requests */
        IMG_FETCH_TO_DAEMON,     /* answers */
};

/* Check one received datagram of len bytes against the message set for
 * direction dir (pure; no allocation). Returns the type (> 0) when buf is a
 * complete, well-formed message: magic, version, size equal to len and to
 * the type's struct, known type for dir, reserved fields zero, every
 * string NUL-terminated within its field, every digest a valid sha256 (or
 * "" where allowed), counts within their arrays, a config's strings exactly
 * as its counts say, an error's code negative. -EBADMSG otherwise. buf must
 * be suitably aligned for the structs (the receive buffers are). */
int img_fetch_msg_check(const void *buf, size_t len, enum img_fetch_dir dir);

/* Fill hdr for a message of type with id (size from the type). */
void img_fetch_hdr_init(struct img_fetch_hdr *hdr, enum img_fetch_type type, uint32_t id);

/* The size of the struct of type, 0 for an unknown type. */
size_t img_fetch_msg_size(enum img_fetch_type type);

/* Cursor over the strings of a checked REP_CONFIG: the next string of the
 * walk (fields in enum order), or NULL at the end. *pos starts at 0. */
const char *img_fetch_strings_next(const struct img_fetch_rep_config *c, size_t *pos);
