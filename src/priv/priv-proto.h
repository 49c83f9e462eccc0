/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* Wire format of the warren-priv protocol: warrend (the requester) asks
 * warren-priv (the only long-lived part meant to keep root; docs/privsep.md)
 * to do privileged host work. The message set is closed: every type has
 * one fixed-size payload and a fixed number of fds in the table of
 * priv-proto.c; anything else is refused (with nothing done) and its fds
 * are closed.
 *
 * Transport: AF_UNIX SOCK_SEQPACKET (a socketpair made by warrend when it
 * starts warren-priv: fd --sock-fd). Every message is exactly one
 * datagram: a struct priv_hdr followed by hdr.len bytes of payload
 * (hdr.len == datagram size - sizeof(struct priv_hdr) == the table's size
 * for hdr.type); at most PRIV_MSG_MAX bytes. Both ends run on the same
 * host: integers in host byte order. Reserved fields and the bytes of a
 * string field after its terminating NUL must be zero (one encoding per
 * message: what is accepted re-encodes to the same bytes). fds travel as
 * SCM_RIGHTS with the datagram: exactly the table's count (none for every
 * request; one with NET_CONNECTED; phase 3: four with SANDBOX_SPAWN_BESIDE,
 * one with VOLUME_MOUNTED and SPAWNED); a message with fds where none belong, with more
 * than PRIV_FDS_MAX, or whose control data was truncated is refused and
 * every fd it carried is closed.
 *
 * Paths: a path field names a file below warren-priv's state dir
 * (--state-dir), relative to it: no leading '/', no empty, "." or ".."
 * component, no control bytes, and its first component is the one the
 * table names for the field (e.g. "sandboxes"). warren-priv resolves it
 * from its state dir fd with openat2(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS
 * | RESOLVE_NO_MAGICLINKS): a symlink anywhere on the way is refused, not
 * followed.
 *
 * Requests (warrend -> warren-priv) and the answer each one gets (same
 * hdr.id; warren-priv carries requests out concurrently, so answers
 * come in the order they finish: the requester matches them by id):
 *   HELLO             no payload -> HELLO_REPLY (version, pid, counters).
 *   SANDBOX_CLEANUP   struct priv_cleanup -> RESULT. The host side of a
 *                     sandbox's teardown (rt_sandbox_cleanup): SIGKILL
 *                     every process in the cgroup(s) of id (until empty),
 *                     remove them, then remove dir (any depth, never
 *                     following a symlink or crossing a mount). Idempotent.
 *   LINK_DELETE       struct priv_link -> RESULT (value 1: deleted, 0:
 *                     there was none). Delete the host end of a sandbox's
 *                     veth (rt_net_link_delete); only names of warren's own
 *                     links (PRIV_LINK_PREFIX...) are accepted.
 *   SANDBOX_SIGNAL    struct priv_signal -> RESULT. rt_sandbox_attach the
 *                     target (refused unless the pid is the sandbox's init:
 *                     start time and cgroup checked), then
 *                     rt_sandbox_kill(signo): SIGKILL to every process of
 *                     its cgroup, any other signal to init only.
 *   SANDBOX_FREEZE    struct priv_freeze -> RESULT. The same target check,
 *                     then rt_sandbox_freeze(on) (the cgroup freezer).
 *                     The handle attached for a target is kept for its next
 *                     SIGNAL or FREEZE while that init lives.
 * A request that cannot be decoded is answered with RESULT {err = EPROTO
 * or EINVAL or EACCES, msg}, hdr.id echoed when the header could be read,
 * 0 otherwise, and counted as refused. */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "basic/err.h"

#define PRIV_MAGIC 0x57505231u /* "WPR1" */
/* 2: the lifecycle (types 6..11) and network (12..16) messages,
 * HELLO_REPLY.ip_forward
 * 3: the helper starts (HELPER_START 17, UNPACK_START 18, reply
 * HELPER_STARTED 0x91), volumes and spawn-beside (types 19..22: VOLUME_MOUNT, VOLUME_UNMOUNT,
 * SANDBOX_SPAWN_BESIDE, SSH_DIR_PREPARE; replies 0x93, 0x95), phase 4b,
 * the upper-dir reader: UPPER_PACK (23), UPPER_PACKED (0x97), and for
 * phase 5 (warrend's drop) HELLO_REPLY's reserved word is host_check, the
 * result of warren-priv's own rt_prepare, so that warrend need not check
 * the host (nor hold warren-init) itself
 * 4: phase 5's layer storage (LAYER_COMMIT 25, LAYER_REMOVE 26), phase
 * 4b-2, the journal's session with warren-upper: UPPER_SESSION (24) and
 * its reply UPPER_SESSION_STARTED (0x99, 1 fd), HELPER_START kind FETCH
 * (3, warren-fetch), and phase 5's volume files (VOLFILE_OPEN 27,
 * VOLFILE_OP 28, VOLFILE_LIST 29; replies 0x9b..0x9d) */
#define PRIV_VERSION 4u
#define PRIV_MSG_MAX 4096u  /* datagram, header included */
#define PRIV_PATH_MAX 1024u /* a path field, bytes including the NUL */
#define PRIV_ID_MAX 72u     /* a sandbox id field: up to 64 chars + NUL, padded */
#define PRIV_ERRMSG_MAX 256u
#define PRIV_FDS_MAX 65u      /* fds one datagram may carry at all (SANDBOX_CREATE: 1 + 64 binds) */
#define PRIV_SERVED_MAX 32u   /* counters in HELLO_REPLY: types 0..31 */
#define PRIV_LINK_PREFIX "wr" /* = SBX_NET_PEER_PREFIX */
#define PRIV_ROOT_SANDBOXES "sandboxes" /* <state>/sandboxes/<id> */

enum priv_type {
        /* requests */
        PRIV_HELLO = 1,
        PRIV_SANDBOX_CLEANUP = 2,
        PRIV_LINK_DELETE = 3,
        PRIV_SANDBOX_SIGNAL = 4,
        PRIV_SANDBOX_FREEZE = 5,
        /* phase 2: the sandbox lifecycle (priv-cfg.h, docs/privsep.md) */
        PRIV_SANDBOX_CREATE = 6,
        PRIV_SANDBOX_PRESTART = 7,
        PRIV_SANDBOX_START = 8,
        PRIV_SANDBOX_DESTROY = 9,
        PRIV_SANDBOX_ATTACH = 10,
        PRIV_CTL_CONNECT = 11,
        /* phase 3: the network (12..16: enum priv_net_type below) */
        /* reserved for the blocks being built (docs/privsep.md "Next
         * sessions"): 17..18 helper starts (warren-egress, warren-signer,
         * warren-unpack), 19..20 volume mounts, 21..22 spawn beside a
         * sandbox and its ssh dir, 23..24 the upper-dir reader (24: the
         * journal's session, phase 4b-2) */
        PRIV_REQ_TYPES = 32, /* request types are below this (not all used: see the table) */
        /* replies */
        PRIV_RESULT = 0x81,
        PRIV_HELLO_REPLY = 0x82,
        PRIV_SANDBOX_CREATED = 0x86, /* phase 2: + 2 fds (init's pidfd, a ctl socket) */
};

struct priv_hdr {
        uint32_t magic;    /* PRIV_MAGIC */
        uint32_t type;     /* enum priv_type */
        uint32_t len;      /* payload bytes after this header */
        uint32_t reserved; /* 0 */
        uint64_t id;       /* chosen by the requester, echoed */
};

struct priv_cleanup {
        char id[PRIV_ID_MAX];    /* a sandbox id (rt_id_valid) */
        char dir[PRIV_PATH_MAX]; /* "sandboxes/..." below the state dir */
        uint32_t cgroup_mode;    /* enum rt_cgroup_mode: 0..2 */
        uint32_t reserved;
};

/* A running sandbox, named as rt_sandbox_attach() checks it: its id, its
 * init's host pid (> 1) and that pid's start time (field 22 of
 * /proc/<pid>/stat, != 0: a pid that was reused is refused), in the
 * sandbox's cgroup of cgroup_mode. */
struct priv_target {
        char id[PRIV_ID_MAX];
        int32_t pid;
        uint32_t cgroup_mode; /* enum rt_cgroup_mode: 0..2 */
        uint64_t start_time;
};

struct priv_signal {
        struct priv_target t;
        int32_t signo; /* 1..64 */
        uint32_t reserved;
};

struct priv_freeze {
        struct priv_target t;
        uint32_t on; /* 1 pause, 0 resume */
        uint32_t reserved;
};

struct priv_link {
        char name[16]; /* PRIV_LINK_PREFIX then [A-Za-z0-9_.-], at most 15 chars */
        uint32_t reserved[2];
};

struct priv_result {
        int32_t err;   /* positive errno; 0 = done */
        int32_t value; /* LINK_DELETE: 1 deleted, 0 none; else 0 */
        /* warren-priv's own counters after this request: requests of this
         * type it carried out (successfully or not), all it carried out,
         * and all it refused undecoded */
        uint64_t served;
        uint64_t served_total;
        uint64_t refused;
        char msg[PRIV_ERRMSG_MAX]; /* err != 0: what failed */
};

struct priv_hello_reply {
        uint32_t version;                 /* PRIV_VERSION */
        int32_t pid;                      /* warren-priv's pid */
        uint64_t served[PRIV_SERVED_MAX]; /* by type; [0] unused */
        uint64_t served_total;
        uint64_t refused;
        /* net.ipv4.ip_forward as warren-priv left it at its start:
         * PRIV_FORWARD_* */
        uint32_t ip_forward;
        /* phase 5: rt_prepare's (and so rt_host_check's) result at
         * warren-priv's start: 0 sandboxes can start here, else the
         * positive errno it failed with (warren-priv logged the reason);
         * warrend under --privsep runs neither itself */
        uint32_t host_check;
};

/* ---- phase 2: the sandbox lifecycle (types 6..11) ----
 *
 * SANDBOX_CREATE, SANDBOX_PRESTART, SANDBOX_START: struct priv_sandbox_cfg
 * and 1 + cfg.n_bind fds: [0] a sealed memfd (F_SEAL_WRITE | SHRINK |
 * GROW | SEAL, exactly cfg.blob_len bytes) holding the variable part of
 * the config (priv-cfg.h: hostname, resolv.conf, the layers as
 * "layers/..." paths, the mount table with its FILE/COPY data), then one
 * fd per BIND entry of the table, in its order (the sources warrend
 * opened: warren-priv never opens a bind source by path). The variable
 * part always travels in the memfd, never in the datagram: one encoding
 * whatever its size (the layers of a large image alone outgrow a
 * datagram; the FILE/COPY data may be 512 KiB).
 *   CREATE   -> SANDBOX_CREATED (rt_sandbox_create; warren-priv keeps the
 *               handle, keyed by id, and is init's parent)
 *   PRESTART -> SANDBOX_CREATED (rt_sandbox_prestart: pid and start time
 *               of the parked child, which becomes init)
 *   START    -> RESULT (rt_sandbox_start_send + _wait on the prestarted
 *               handle of cfg.id; ESTALE: it is gone, create afresh)
 * SANDBOX_DESTROY  struct priv_destroy -> RESULT: rt_sandbox_destroy of
 *               the handle of id (kill, reap, veth, cgroups, dir); with
 *               none (a restarted warren-priv) the target is attached
 *               first when t.pid is set, and without it the host side is
 *               cleaned up by id (as SANDBOX_CLEANUP, + the link). Idempotent.
 * SANDBOX_ATTACH   struct priv_target -> SANDBOX_CREATED: warren-priv
 *               re-attaches the sandbox (rt_sandbox_attach: pid, start time,
 *               cgroup checked) and keeps the handle (a warrend or
 *               warren-priv restart).
 * CTL_CONNECT      struct priv_target -> SANDBOX_CREATED: another
 *               connection to the sandbox's init (attached first if
 *               warren-priv holds no handle for it).
 * Every one of them answers a failure as RESULT {err}. */
#define PRIV_ROOT_LAYERS "layers"    /* <state>/layers/sha256/<hex> */
#define PRIV_BIND_MAX 64u            /* = RT_MOUNTS_MAX */
#define PRIV_LAYERS_MAX 500u         /* = RT_PARK_MAX_LAYERS */
#define PRIV_CFG_BLOB_MAX (1u << 20) /* the memfd of a config */

/* priv_sandbox_cfg.flags */
#define PRIV_CFG_UNLIMITED (1u << 0)     /* rt_sandbox_config.unlimited */
#define PRIV_CFG_NET (1u << 1)           /* net_* hold the veth (cfg->net) */
#define PRIV_CFG_DISK_TEMPLATE (1u << 2) /* use <state>/disk-templates */
#define PRIV_CFG_RESOLV (1u << 3)        /* the blob holds a resolv.conf */
#define PRIV_CFG_FLAGS                                                                             \
        (PRIV_CFG_UNLIMITED | PRIV_CFG_NET | PRIV_CFG_DISK_TEMPLATE | PRIV_CFG_RESOLV)

struct priv_sandbox_cfg {
        char id[PRIV_ID_MAX]; /* the sandbox dir is sandboxes/<id> */
        uint64_t memory_bytes, tmp_bytes, disk_bytes;
        uint32_t cpu_millicores, pids_max, nofile;
        uint32_t cgroup_mode; /* 0..2 */
        uint32_t flags;       /* PRIV_CFG_* */
        uint32_t uid_base, uid_count;
        char net_peer[16];                          /* PRIV_CFG_NET: a warren link name */
        uint32_t net_addr, net_gateway, net_prefix; /* network byte order; prefix 1..31 */
        uint32_t n_layers, n_mounts, n_bind;
        uint32_t blob_len; /* 1..PRIV_CFG_BLOB_MAX */
        uint32_t reserved[2];
};

struct priv_destroy {
        struct priv_target t; /* t.pid 0: not known (then start_time 0 too) */
        char peer[16];        /* "" or the veth's host end to delete with it */
        uint32_t keep_link;   /* 1: leave the veth (warrend deletes it later) */
        uint32_t reserved;
};

struct priv_created {
        int32_t pid; /* init's host pid (a prestart: the parked child's) */
        uint32_t reserved;
        uint64_t start_time;
        uint64_t served, served_total, refused; /* as in RESULT */
};

/* ---- phase 3: the network (request types 12..19, replies 0x8c..0x93) ----
 *
 *   NFT_TABLE_APPLY   struct priv_nft_apply -> RESULT. Replace the inet
 *                     table `table` with warrend's rules for the sandbox
 *                     range base/prefix and the egress ports (nft.h:
 *                     nftab_table_apply; warren-priv builds the commands).
 *   NFT_CLASS_SET     struct priv_nft_class -> RESULT. Move a sandbox's
 *                     address between the open4 / pass4 sets (nftab_class_set).
 *   NFT_TABLES        no payload -> NFT_NAMES (warren's inet tables), or
 *                     RESULT {err} when nft failed.
 *   NFT_TABLE_REMOVE  struct priv_nft_table -> RESULT (nftab_table_remove).
 *   NET_CONNECT       struct priv_net_connect -> NET_CONNECTED + 1 fd: a
 *                     non-blocking TCP socket made in the target
 *                     sandbox's network namespace (the target checked as
 *                     SANDBOX_SIGNAL's), connected (value 1) or connecting
 *                     (0: wait for POLLOUT, then SO_ERROR) to addr:port;
 *                     or RESULT {err} (nothing sent with it).
 * A table name is "warren" or "warren_" and 1..40 of [A-Za-z0-9_]
 * (priv_nft_table_ok): no other table is touched. */

#define PRIV_NFT_TABLE_MAX 48u  /* a table name field, NUL included */
#define PRIV_NFT_NAMES_MAX 64u  /* names in one NFT_NAMES */
#define PRIV_NFT_PREFIX_MIN 8u  /* = SBX_NET_PREFIX_MIN */
#define PRIV_NFT_PREFIX_MAX 28u /* = SBX_NET_PREFIX_MAX */

enum priv_net_type {
        PRIV_NFT_TABLE_APPLY = 12,
        PRIV_NFT_CLASS_SET = 13,
        PRIV_NFT_TABLES = 14,
        PRIV_NFT_TABLE_REMOVE = 15,
        PRIV_NET_CONNECT = 16,
        /* replies */
        PRIV_NFT_NAMES = 0x8e,
        PRIV_NET_CONNECTED = 0x90,
};

/* HELLO_REPLY.ip_forward */
enum priv_forward {
        PRIV_FORWARD_OFF = 0,       /* warren-priv could not turn it on (its log says why) */
        PRIV_FORWARD_WAS_ON = 1,    /* it was on already */
        PRIV_FORWARD_TURNED_ON = 2, /* warren-priv turned it on */
};

struct priv_nft_apply {
        char table[PRIV_NFT_TABLE_MAX]; /* priv_nft_table_ok */
        uint32_t base;                  /* the range's first address, host order, no host bits */
        uint32_t prefix;                /* PRIV_NFT_PREFIX_MIN..MAX */
        uint16_t proxy_port;            /* warren-egress's ports: both 0 (no egress) or both */
        uint16_t dns_port;              /* 1..65535 */
        uint32_t reserved;
};

struct priv_nft_class {
        char table[PRIV_NFT_TABLE_MAX];
        uint32_t addr; /* the sandbox's address, host order: not 0.0.0.0/8, 127/8, 224/3 */
        uint32_t from; /* enum nftab_class: 0 none (policed), 1 open4, 2 pass4 */
        uint32_t to;
        uint32_t reserved;
};

struct priv_nft_table {
        char table[PRIV_NFT_TABLE_MAX];
};

struct priv_net_connect {
        struct priv_target t; /* checked as SANDBOX_SIGNAL's */
        uint32_t addr; /* host order: not 0.0.0.0/8, 224/3 (multicast, reserved, broadcast) */
        uint16_t port; /* 1..65535 */
        uint16_t reserved;
};

struct priv_nft_names {
        uint32_t n;                             /* names[0..n) are set, the rest zeros */
        uint32_t truncated;                     /* 1: there were more than PRIV_NFT_NAMES_MAX */
        uint64_t served, served_total, refused; /* as RESULT's */
        char names[PRIV_NFT_NAMES_MAX][PRIV_NFT_TABLE_MAX];
};

struct priv_net_connected {
        uint64_t served, served_total, refused; /* as RESULT's */
        uint32_t connected;                     /* 1: connected already, 0: in progress */
        uint32_t reserved;
};

/* ---- phase 4b: the upper-dir reader (request types 23..24, reply 0x97) ----
 *
 *   UPPER_PACK   struct priv_upper_pack + 1 fd (the spool: a regular file
 *                open for writing, empty) -> UPPER_PACKED (the pack's
 *                stats), or RESULT {err}. The target is checked as
 *                SANDBOX_SIGNAL's; warren-priv opens the sandbox's upper dir
 *                (sandboxes/<id>, or its disk image's) and starts a
 *                short-lived warren-upper that joins the sandbox's user
 *                namespace (setns through init's pidfd), becomes its root,
 *                chroots into the upper dir and writes it as a layer tar
 *                to the spool (image.h: img_pack_dir). Its only question
 *                back is whether a directory is opaque (the trusted.*
 *                xattr namespace is not readable from a user namespace):
 *                struct priv_upper_msg over its own socket, with the
 *                directory's fd, answered with one byte.
 *   24           UPPER_SESSION: the journal's (below). */
enum priv_upper_type {
        PRIV_UPPER_PACK = 23,
        /* replies */
        PRIV_UPPER_PACKED = 0x97,
};

struct priv_upper_pack {
        struct priv_target t; /* checked as SANDBOX_SIGNAL's */
        uint32_t flags;       /* 0 */
        uint32_t reserved;
};

struct priv_upper_packed {
        uint64_t served, served_total, refused; /* as RESULT's */
        /* image.h: struct img_pack_stats */
        uint64_t entries, bytes, whiteouts, opaque, skipped;
};

/* warren-upper -> warren-priv, over the helper's own SOCK_SEQPACKET
 * socket (not the warrend socket): one datagram of exactly this size.
 * warren-upper has read the sandbox's files: warren-priv decodes what it
 * says with priv_upper_msg_decode and trusts no more than that. */
#define PRIV_UPPER_MAGIC 0x57555031u /* "WUP1" */
enum priv_upper_kind {
        PRIV_UPPER_Q_OPAQUE = 1, /* + 1 fd, a directory: is it opaque? (answer: 1 byte, 0/1) */
        PRIV_UPPER_Q_DONE = 2,   /* no fd: the pack ended (err, stats, msg) */
};
struct priv_upper_msg {
        uint32_t magic; /* PRIV_UPPER_MAGIC */
        uint32_t kind;  /* enum priv_upper_kind */
        int32_t err;    /* DONE: positive errno, 0 = packed; OPAQUE: 0 */
        uint32_t reserved;
        uint64_t entries, bytes, whiteouts, opaque, skipped; /* DONE; OPAQUE: 0 */
        char msg[PRIV_ERRMSG_MAX];                           /* DONE with err; else all zero */
};

int priv_upper_pack_encode(uint64_t id, const struct priv_target *t, void *buf, size_t size,
                           struct wr_err *e);
int priv_upper_packed_encode(uint64_t id, const struct priv_upper_packed *p, void *buf,
                             size_t size);
/* Pure: check one datagram from warren-upper (len bytes, n_fds fds) and
 * copy it into *out. 0, or -EPROTO / -EINVAL with e (framing, kind, fd
 * count, err outside 0..4095, fields that must be zero, msg not one
 * NUL-padded string). */
int priv_upper_msg_decode(const void *buf, size_t len, size_t n_fds, struct priv_upper_msg *out,
                          struct wr_err *e);

/* ---- phase 4b-2: the journal's session (request type 24, reply 0x99) ----
 *
 *   UPPER_SESSION  struct priv_upper_session -> UPPER_SESSION_STARTED + 1
 *                  fd (warrend's end of a SOCK_SEQPACKET socket to a
 *                  warren-upper started for it), or RESULT {err}. The
 *                  target is checked as SANDBOX_SIGNAL's; warren-upper is
 *                  started as for UPPER_PACK (the sandbox's user namespace,
 *                  its root, chrooted into the upper dir, seccomp) and
 *                  also holds the sandbox's root as init sees it
 *                  (/proc/<init>/root, opened by warren-priv) for the
 *                  rollback's writes. warren-priv answers its OPAQUE
 *                  questions on a thread until it exits (when warrend
 *                  closes its end). warrend then speaks the session's own
 *                  closed message set to it: struct priv_upper_op, each
 *                  answered by one struct priv_upper_reply. */
enum priv_upper_session_type {
        PRIV_UPPER_SESSION = 24,
        /* replies */
        PRIV_UPPER_SESSION_STARTED = 0x99,
};

struct priv_upper_session {
        struct priv_target t; /* checked as SANDBOX_SIGNAL's */
        uint32_t flags;       /* 0 */
        uint32_t reserved;
};

struct priv_upper_started {
        uint64_t served, served_total, refused; /* as RESULT's */
        int32_t pid;                            /* warren-upper's, > 1 */
        uint32_t reserved;
};

int priv_upper_session_encode(uint64_t id, const struct priv_target *t, void *buf, size_t size,
                              struct wr_err *e);
int priv_upper_started_encode(uint64_t id, const struct priv_upper_started *s, void *buf,
                              size_t size);

/* The session: warrend -> warren-upper, one datagram of exactly
 * sizeof(struct priv_upper_op) per request, answered in order by one
 * struct priv_upper_reply. Paths are relative to the sandbox's root (the
 * upper dir for OPEN): no leading '/', no empty, "." or ".." component,
 * 1..4095 bytes (any other byte: names come from the sandbox). Ids are
 * the sandbox's own (inside its user namespace: 0..65535).
 *   WALK     + 1 fd (a regular file open for writing, empty) -> WALKED
 *            {len, n, truncated}: journal-tree.h's jt_walk of the upper
 *            dir, encoded by jt_tree_encode into the fd (len bytes).
 *   OPEN     path -> OPENED + 1 fd: the regular file path of the upper dir
 *            opened read-only (openat2 BENEATH, no symlink, no mount
 *            crossed, O_NONBLOCK): its bytes for the journal's store.
 *   REMOVE   path -> DONE: path removed from the sandbox's root, with
 *            everything below it (a missing parent: done).
 *   MKDIR    path, mode, uid, gid -> DONE: made (0700) when missing, then
 *            owner and mode set.
 *   ATTRS    path, mode, uid, gid -> DONE: owner and mode set.
 *   PUT      path, mode, uid, gid, mtime_ns + 1 fd (the bytes: a regular
 *            file open for reading) -> DONE: a new file with those bytes
 *            and attributes renamed over path.
 *   SYMLINK  path, link, uid, gid -> DONE: a new symlink to link renamed
 *            over path.
 * A failed request is DONE {err, msg}; a request that cannot be decoded
 * ends the session (warren-upper answers DONE {EPROTO} and exits). */
#define PRIV_UPPER_OP_MAGIC 0x57555331u /* "WUS1" */
#define PRIV_UPPER_PATH_MAX 4096u       /* a path or link field, with its NUL */
#define PRIV_UPPER_IDS 65536u           /* ids inside: 0..PRIV_UPPER_IDS-1 */
enum priv_upper_op_kind {
        PRIV_UPPER_OP_WALK = 1,
        PRIV_UPPER_OP_OPEN = 2,
        PRIV_UPPER_OP_REMOVE = 3,
        PRIV_UPPER_OP_MKDIR = 4,
        PRIV_UPPER_OP_ATTRS = 5,
        PRIV_UPPER_OP_PUT = 6,
        PRIV_UPPER_OP_SYMLINK = 7,
};
struct priv_upper_op {
        uint32_t magic;    /* PRIV_UPPER_OP_MAGIC */
        uint32_t op;       /* enum priv_upper_op_kind */
        uint32_t mode;     /* MKDIR, ATTRS, PUT: 0..07777; else 0 */
        uint32_t uid, gid; /* MKDIR, ATTRS, PUT, SYMLINK: < PRIV_UPPER_IDS; else 0 */
        uint32_t reserved;
        int64_t mtime_ns;               /* PUT: >= 0; else 0 */
        char path[PRIV_UPPER_PATH_MAX]; /* WALK: empty; else a path as above */
        char link[PRIV_UPPER_PATH_MAX]; /* SYMLINK: the target (may be empty); else empty */
};

/* warren-upper -> warrend: the answer to one priv_upper_op. */
#define PRIV_UPPER_REPLY_MAGIC 0x57555232u /* "WUR2" */
#define PRIV_UPPER_WALK_MAX (1ull << 31)   /* WALKED.len at most */
enum priv_upper_reply_kind {
        PRIV_UPPER_R_DONE = 1,   /* no fd: err 0 done, else failed (msg) */
        PRIV_UPPER_R_WALKED = 2, /* no fd: len, n, truncated */
        PRIV_UPPER_R_OPENED = 3, /* 1 fd */
};
struct priv_upper_reply {
        uint32_t magic;     /* PRIV_UPPER_REPLY_MAGIC */
        uint32_t kind;      /* enum priv_upper_reply_kind */
        int32_t err;        /* DONE: positive errno or 0; else 0 */
        uint32_t truncated; /* WALKED: 0/1; else 0 */
        uint64_t len, n;    /* WALKED: bytes written (<= PRIV_UPPER_WALK_MAX), entries; else 0 */
        char msg[PRIV_ERRMSG_MAX]; /* DONE with err: what failed; else all zero */
};

/* The datagram of a session request into *buf (exactly its size); 0, or
 * -EINVAL with e (a field priv_upper_op_decode would refuse). */
int priv_upper_op_encode(const struct priv_upper_op *op, struct priv_upper_op *buf,
                         struct wr_err *e);
/* Pure (warren-upper's side): check one session request (len bytes, n_fds
 * fds) and copy it into *out. 0, or -EPROTO (size, magic, kind, fd count)
 * / -EINVAL (a field: a path as above, padding, mode, ids, fields its
 * kind does not use) with e. */
int priv_upper_op_decode(const void *buf, size_t len, size_t n_fds, struct priv_upper_op *out,
                         struct wr_err *e);
/* Pure (warrend's side): check one answer from warren-upper (len bytes,
 * n_fds fds) and copy it into *out. 0, or -EPROTO / -EINVAL with e
 * (framing, kind, fd count, errno outside 0..4095, fields its kind does
 * not use, msg not one NUL-padded string or set without an error). */
int priv_upper_reply_decode(const void *buf, size_t len, size_t n_fds, struct priv_upper_reply *out,
                            struct wr_err *e);

/* ---- phase 3: the helpers (request types 17..18, reply 0x91) ----
 *
 *   HELPER_START   struct priv_helper_start + its kind's fds ->
 *                  HELPER_STARTED + 1 fd (the helper's pidfd), or RESULT
 *                  {err} (nothing started, nothing sent with it).
 *                  warren-priv finds the binary itself (at its start:
 *                  $WARREN_EGRESS / $WARREN_SIGNER, next to itself, the
 *                  build tree, /usr/libexec/warren), builds its argv from
 *                  the fixed fields (never a string from warrend), gives
 *                  it exactly the fds below as 3, 4, ... (nothing else
 *                  but 0-2) and is its parent (it reaps it).
 *     EGRESS  fds: ctl socket (SOCK_SEQPACKET), the proxy's listening
 *             socket, the resolver's UDP and TCP sockets, then the
 *             signer's socket when PRIV_HELPER_F_SIGNER, then the
 *             upstream CA bundle (a regular file opened read-only) when
 *             PRIV_HELPER_F_UPSTREAM_CA: 4..6. Fields: the upstream
 *             resolver (family 4/6, address, port), deny ports (the
 *             host's own addresses, --deny-addr, warren-priv lists itself).
 *     SIGNER  fds: the key memfd, one end of a SOCK_SEQPACKET pair
 *             (warrend keeps the other): exactly 2. Fields: role (which
 *             key option), PRIV_HELPER_F_JSON_LOG.
 *     FETCH   (PRIV_VERSION 4) fds: one end of a SOCK_SEQPACKET pair
 *             (warrend keeps the other), then the registry config's
 *             sealed memfd when PRIV_HELPER_F_REGISTRY_CONFIG, then the
 *             docker config's when PRIV_HELPER_F_DOCKER_CONFIG: 1..3.
 *             Fields: flags only (PRIV_HELPER_F_LOOPBACK_ONLY); every
 *             other field 0. warren-fetch is started without --ref (it
 *             is bound by REQ_BIND on its socket), its configs named by
 *             warrend's options, its chroot warren-priv's own
 *             ($WARREN_FETCH_ROOT of its start, else
 *             <state>/fetch-root, prepared by warren-priv before each
 *             start), --uid and --seccomp-strict from warren-priv's
 *             environment at its start ($WARREN_FETCH_USER,
 *             $WARREN_FETCH_SECCOMP_STRICT=1).
 *   UNPACK_START   struct priv_unpack_start + 2 fds (the tar stream, the
 *                  write end of the report pipe) -> HELPER_STARTED + its
 *                  pidfd: warren-unpack with stdin the stream, fd 3 the
 *                  layer staging dir (opened by warren-priv from dir,
 *                  "layers/tmp/<name>", beneath the state dir, no
 *                  symlinks), fd 4 the report pipe.
 * warrend watches a helper through its pidfd (it is not its parent):
 * warren-priv's death does not end its helpers (they are reparented to
 * the host's init and serve on; docs/privsep.md "Phase 3, helpers"). */
enum priv_helper_type {
        PRIV_HELPER_START = 17,
        PRIV_UNPACK_START = 18,
        /* reply */
        PRIV_HELPER_STARTED = 0x91,
};

enum priv_helper_kind {
        PRIV_HELPER_EGRESS = 1,
        PRIV_HELPER_SIGNER = 2,
        PRIV_HELPER_FETCH = 3, /* warren-fetch (PRIV_VERSION 4) */
};

/* a signer's role: the key option it is started with */
enum priv_signer_role {
        PRIV_SIGNER_SECRETS = 1, /* --secrets-key-fd (keeper.c) */
        PRIV_SIGNER_JWS = 2,     /* --jws-key-fd (the identity key) */
        PRIV_SIGNER_CA = 3,      /* --ca-fd (warren-egress's interception CA) */
};

#define PRIV_HELPER_F_SIGNER (1u << 0)      /* EGRESS: + the signer's socket */
#define PRIV_HELPER_F_UPSTREAM_CA (1u << 1) /* EGRESS: + the upstream CA bundle's fd */
#define PRIV_HELPER_F_JSON_LOG (1u << 2)    /* SIGNER: --log-format json */
#define PRIV_HELPER_F_REGISTRY_CONFIG (1u << 3) /* FETCH: + the registry config's memfd */
#define PRIV_HELPER_F_DOCKER_CONFIG (1u << 4)   /* FETCH: + the docker config's memfd */
#define PRIV_HELPER_F_LOOPBACK_ONLY (1u << 5)   /* FETCH: --loopback-only */
#define PRIV_HELPER_DENY_PORTS_MAX 16u
#define PRIV_HELPER_FDS_MAX 6u     /* EGRESS with both flags */
#define PRIV_ROOT_LAYERS_TMP "tmp" /* layers/tmp/<name> */

struct priv_helper_start {
        uint32_t kind;         /* enum priv_helper_kind */
        uint32_t role;         /* SIGNER: enum priv_signer_role; EGRESS, FETCH: 0 */
        uint32_t flags;        /* PRIV_HELPER_F_* (EGRESS: SIGNER, UPSTREAM_CA; SIGNER: JSON_LOG;
                                * FETCH: REGISTRY_CONFIG, DOCKER_CONFIG, LOOPBACK_ONLY) */
        uint32_t n_deny_ports; /* EGRESS: 0..16; SIGNER, FETCH: 0 (and every egress field) */
        uint16_t deny_ports[PRIV_HELPER_DENY_PORTS_MAX]; /* [0..n) 1..65535, the rest 0 */
        uint32_t upstream_family;                        /* EGRESS: 4 or 6; SIGNER: 0 */
        uint16_t upstream_port;                          /* EGRESS: 1..65535 */
        uint16_t reserved16;
        uint8_t upstream_addr[16]; /* 4: the first 4 bytes (network order), the rest 0 */
        uint32_t reserved[2];
};

struct priv_unpack_start {
        char dir[PRIV_PATH_MAX]; /* "layers/tmp/<name>": priv_path_check, 3 components */
        uint32_t flags;          /* 0 */
        uint32_t reserved;
};

struct priv_helper_started {
        int32_t pid; /* the helper's pid (warren-priv's child) */
        uint32_t reserved;
        uint64_t start_time;                    /* field 22 of /proc/<pid>/stat */
        uint64_t served, served_total, refused; /* as RESULT's */
};

/* How many fds a HELPER_START of this kind and flags carries (0: a kind
 * or flag the decoder refuses). */
unsigned priv_helper_fds(uint32_t kind, uint32_t flags);

int priv_helper_start_encode(uint64_t id, const struct priv_helper_start *h, void *buf, size_t size,
                             struct wr_err *e);
int priv_unpack_start_encode(uint64_t id, const char *dir, void *buf, size_t size,
                             struct wr_err *e);
int priv_helper_started_encode(uint64_t id, const struct priv_helper_started *h, void *buf,
                               size_t size);

/* "warren" or "warren_" then 1..40 of [A-Za-z0-9_]. */
bool priv_nft_table_ok(const char *name);

/* The checks the decoder makes on an NFT_TABLE_APPLY payload (nft.c makes
 * them too, for warrend in process). 0 or -EINVAL with e. */
int priv_nft_apply_check(const struct priv_nft_apply *a, struct wr_err *e);

/* Encoders (as the ones above). from/to: 0..2. */
int priv_nft_apply_encode(uint64_t id, const char *table, uint32_t base, uint8_t prefix,
                          uint16_t proxy_port, uint16_t dns_port, void *buf, size_t size,
                          struct wr_err *e);
int priv_nft_class_encode(uint64_t id, const char *table, uint32_t addr, uint32_t from, uint32_t to,
                          void *buf, size_t size, struct wr_err *e);
int priv_nft_tables_encode(uint64_t id, void *buf, size_t size);
int priv_nft_remove_encode(uint64_t id, const char *table, void *buf, size_t size,
                           struct wr_err *e);
int priv_net_connect_encode(uint64_t id, const struct priv_target *t, uint32_t addr, uint16_t port,
                            void *buf, size_t size, struct wr_err *e);
int priv_nft_names_encode(uint64_t id, const struct priv_nft_names *names, void *buf, size_t size);
int priv_net_connected_encode(uint64_t id, const struct priv_net_connected *c, void *buf,
                              size_t size);

/* ---- phase 3: volumes and spawn-beside (request types 19..22) ----
 *
 *   VOLUME_MOUNT      struct priv_volume + no fd -> VOLUME_MOUNTED + 1 fd:
 *                     the volume's image <path>/disk.img attached to a
 *                     loop device (or the one it has) and mounted (ext4,
 *                     nosuid, nodev, noatime; the new mount API: fsopen,
 *                     fsmount, move_mount onto <path>/mnt by fd, no path
 *                     followed), data/ and .staging/ made, .staging/
 *                     emptied; the fd is an O_PATH directory fd of the
 *                     mount's root. Whatever was mounted at <path>/mnt
 *                     before is detached first.
 *   VOLUME_UNMOUNT    struct priv_volume (flags 0) -> RESULT: detach every
 *                     mount at <path>/mnt (lazily; a sandbox keeps its own
 *                     clone). value 1: something was mounted, 0: nothing.
 *   SANDBOX_SPAWN_BESIDE struct priv_spawn_beside + 4 fds (cwd, stdin,
 *                     stdout, stderr) -> SPAWNED + 1 fd (the process's
 *                     pidfd; warren-priv is its parent and reaps it: the
 *                     exit status is read through the pidfd,
 *                     PIDFD_GET_INFO / PIDFD_INFO_EXIT). rt_sandbox_spawn_beside
 *                     of the target (checked as SANDBOX_SIGNAL's) with
 *                     the program, argv and environment of kind (a closed
 *                     set: no free argv), as uid:gid, which must be the
 *                     host id the sandbox's root maps to (its init's
 *                     uid_map), or "nobody" in a sandbox without a user
 *                     namespace; the cwd fd must be the directory
 *                     sandboxes/<id>/ssh, stdin/stdout/stderr pipes,
 *                     sockets or /dev/null.
 *   SSH_DIR_PREPARE   struct priv_ssh_dir -> RESULT: make
 *                     sandboxes/<id>/ssh (and sandboxes/<id>) mode 0700,
 *                     owned by the agent's uid of uid_slot (uids.h: the
 *                     slot's first host id; -1: "nobody"). */
#define PRIV_ROOT_VOLUMES "volumes"  /* <state>/volumes/<env>/<name> */
#define PRIV_VOLUME_RDONLY (1u << 0) /* VOLUME_MOUNT: the ext4 mount read-only */
#define PRIV_VOLUME_FLAGS PRIV_VOLUME_RDONLY
#define PRIV_SPAWN_FDS 4u    /* cwd, stdin, stdout, stderr */
#define PRIV_UID_SLOTS 4094u /* = SBX_UIDS_SLOTS */

enum priv_volssh_type {
        PRIV_VOLUME_MOUNT = 19,
        PRIV_VOLUME_UNMOUNT = 20,
        PRIV_SANDBOX_SPAWN_BESIDE = 21,
        PRIV_SSH_DIR_PREPARE = 22,
        /* replies */
        PRIV_VOLUME_MOUNTED = 0x93,
        PRIV_SPAWNED = 0x95,
};

/* What SANDBOX_SPAWN_BESIDE may run (managed SSH, src/sandbox/ssh.c):
 * each a fixed program found in /usr/bin, /bin or /usr/local/bin, fixed
 * argv and environment. */
enum priv_beside_kind {
        PRIV_BESIDE_SSH_AGENT = 1, /* ssh-agent -D -a agent.sock */
        PRIV_BESIDE_SSH_ADD = 2,   /* SSH_AUTH_SOCK=agent.sock ssh-add -q - */
};

struct priv_volume {
        /* "volumes/<env>/<name>": exactly three components, the last two
         * volume names ([A-Za-z0-9][A-Za-z0-9._-]{0,62}) */
        char path[PRIV_PATH_MAX];
        uint32_t flags; /* VOLUME_MOUNT: PRIV_VOLUME_FLAGS; VOLUME_UNMOUNT: 0 */
        uint32_t reserved;
};

struct priv_volume_mounted {
        uint64_t served, served_total, refused; /* as RESULT's */
        uint32_t reserved[2];
};

struct priv_spawn_beside {
        struct priv_target t; /* checked as SANDBOX_SIGNAL's */
        uint32_t kind;        /* enum priv_beside_kind */
        uint32_t uid, gid;    /* not 0, not (uint32_t) -1 */
        uint32_t reserved;
};

struct priv_spawned {
        uint64_t served, served_total, refused; /* as RESULT's */
        int32_t pid;                            /* > 1 */
        uint32_t reserved;
};

struct priv_ssh_dir {
        char id[PRIV_ID_MAX]; /* the sandbox: sandboxes/<id>/ssh */
        int32_t uid_slot;     /* -1 ("nobody") or 0..PRIV_UID_SLOTS-1 */
        uint32_t reserved;
};

/* The volume path rule of VOLUME_MOUNT/UNMOUNT: 0 or -EACCES with e. */
int priv_volume_path_check(const char *path, struct wr_err *e);

int priv_volume_encode(uint64_t id, uint32_t type, const char *path, uint32_t flags, void *buf,
                       size_t size, struct wr_err *e);
int priv_spawn_beside_encode(uint64_t id, const struct priv_target *t, uint32_t kind, uint32_t uid,
                             uint32_t gid, void *buf, size_t size, struct wr_err *e);
int priv_ssh_dir_encode(uint64_t id, const char *sandbox_id, int32_t uid_slot, void *buf,
                        size_t size, struct wr_err *e);
int priv_volume_mounted_encode(uint64_t id, const struct priv_volume_mounted *m, void *buf,
                               size_t size);
int priv_spawned_encode(uint64_t id, const struct priv_spawned *s, void *buf, size_t size);

/* ---- phase 5: layer storage (request types 25..26, PRIV_VERSION 4;
 * docs/privsep.md "Phase 5, layers, as built") ----
 *
 * warren-unpack writes a layer with the tar's owners (its top directory is
 * usually root's), so a warrend running as --user cannot move it into
 * place or remove it. Both work on <state>/layers, opened beneath the
 * state dir (RESOLVE_BENEATH | NO_SYMLINKS | NO_MAGICLINKS); names are
 * single components, checked strictly.
 *   LAYER_COMMIT  struct priv_layer_commit -> RESULT. renameat2(
 *                 layers/tmp/<tmp>, layers/sha256/<hex>, RENAME_NOREPLACE)
 *                 of a directory (not a symlink) whose tree holds no
 *                 /root/.ssh (resolved inside it, as the store checks).
 *                 value 0: moved; 1: layers/sha256/<hex> was there already
 *                 (the tmp tree is left for a LAYER_REMOVE); 2: refused,
 *                 the tree holds /root/.ssh (nothing moved).
 *   LAYER_REMOVE  struct priv_layer_remove -> RESULT. Remove
 *                 layers/tmp/<name> (rm_rf_at), or layers/sha256/<hex>
 *                 (renamed to layers/tmp/del-<random> first, so that a
 *                 half-removed layer is never visible). value 1: removed,
 *                 0: there was none. */
enum priv_layer_type {
        PRIV_LAYER_COMMIT = 25,
        PRIV_LAYER_REMOVE = 26,
};

#define PRIV_LAYER_HEX 64u      /* hex digits of a sha256 */
#define PRIV_LAYER_NAME_MAX 72u /* a name field, NUL included, zero padded */

/* LAYER_REMOVE.dir */
enum priv_layer_dir {
        PRIV_LAYER_DIR_TMP = 1,    /* layers/tmp/<name>: priv_layer_tmp_name_ok */
        PRIV_LAYER_DIR_SHA256 = 2, /* layers/sha256/<hex>: priv_layer_hex_ok */
};

/* LAYER_COMMIT's answers (RESULT.value) */
enum priv_layer_committed {
        PRIV_LAYER_MOVED = 0,
        PRIV_LAYER_EXISTED = 1,
        PRIV_LAYER_ROOT_SSH = 2,
};

struct priv_layer_commit {
        char tmp[PRIV_LAYER_NAME_MAX]; /* layers/tmp/<tmp>: priv_layer_tmp_name_ok */
        char hex[PRIV_LAYER_NAME_MAX]; /* layers/sha256/<hex>: priv_layer_hex_ok */
        uint32_t flags;                /* 0 */
        uint32_t reserved;
};

struct priv_layer_remove {
        uint32_t dir; /* enum priv_layer_dir */
        uint32_t reserved;
        char name[PRIV_LAYER_NAME_MAX];
};

/* The staging names the image store makes (src/image/layer.c, image.c):
 * "unpack-" or "del-" and 16 lower-case hex digits. */
bool priv_layer_tmp_name_ok(const char *name);
/* A layer dir's name: 64 lower-case hex digits. */
bool priv_layer_hex_ok(const char *name);

int priv_layer_commit_encode(uint64_t id, const char *tmp, const char *hex, void *buf, size_t size,
                             struct wr_err *e);
int priv_layer_remove_encode(uint64_t id, uint32_t dir, const char *name, void *buf, size_t size,
                             struct wr_err *e);

/* ---- phase 5: the volume files API (request types 27..29, replies
 * 0x9b..0x9d, PRIV_VERSION 4; docs/privsep.md "Phase 5, volume files, as
 * built") ----
 *
 * A volume's data/ and .staging/ are root's and its files belong to root
 * or to the ids sandboxes wrote with, so a warrend running as --user can
 * neither read nor write them. warren-priv opens <state>/<vol> (as
 * VOLUME_MOUNT's path, beneath the state dir, no symlink), its mnt (which
 * must be a mount point: the volume mounted) and mnt/data, mnt/.staging
 * (O_NOFOLLOW), and resolves every user path inside data/ with the file
 * API of src/volume/file.c (openat2 RESOLVE_IN_ROOT | NO_MAGICLINKS |
 * NO_XDEV; the last step by an *at() call that does not follow). Every
 * request carries exactly 1 fd: a sealed memfd (F_SEAL_WRITE | SHRINK |
 * GROW | SEAL) of exactly path_len + after_len bytes: the user path, then
 * (LIST) the path to list after; each passes vol_path_check (relative, no
 * "..", no NUL or newline, components <= 255, <= 4096 bytes): paths of
 * up to 4096 bytes do not fit a datagram, so they never travel in one.
 *   VOLFILE_OPEN  op READ  -> VOLFILE_OPENED + 1 fd: the regular file
 *                          opened O_RDONLY (tmp "")
 *                 op PUT   -> VOLFILE_OPENED + 1 fd: a new temp file in
 *                          .staging/ open for writing (its name in tmp),
 *                          the path's parent dirs made (0755)
 *   VOLFILE_OP    op STAT  -> VOLFILE_STATED (a final symlink not
 *                          followed; path "" = data/ itself)
 *                 op REMOVE -> RESULT (a file, symlink or empty dir)
 *                 op COMMIT -> VOLFILE_STATED: tmp (a regular file in
 *                          .staging/) chmod'ed to mode, fsync'ed, renamed
 *                          over path (parent dirs made again), the dir
 *                          fsync'ed; on failure tmp is removed
 *                 op ABORT -> RESULT: tmp removed
 *   VOLFILE_LIST  op LIST  -> VOLFILE_LISTED + 1 fd: a sealed memfd of
 *                          len bytes, n entries (volume.h: vol_files_encode,
 *                          decoded by vol_files_decode), more: 1 when
 *                          entries remain after the limit
 * A failure is RESULT {err, value = the wr_status the file API chose
 * (NOT_FOUND, FAILED_PRECONDITION, INVALID_ARGUMENT, RESOURCE_EXHAUSTED,
 * ...; 0: derive it from err), msg}. */
enum priv_volfile_type {
        PRIV_VOLFILE_OPEN = 27,
        PRIV_VOLFILE_OP = 28,
        PRIV_VOLFILE_LIST = 29,
        /* replies */
        PRIV_VOLFILE_OPENED = 0x9b, /* + 1 fd */
        PRIV_VOLFILE_STATED = 0x9c,
        PRIV_VOLFILE_LISTED = 0x9d, /* + 1 fd */
};

enum priv_volfile_op {
        PRIV_VOLFILE_READ = 1,   /* VOLFILE_OPEN */
        PRIV_VOLFILE_PUT = 2,    /* VOLFILE_OPEN */
        PRIV_VOLFILE_STAT = 3,   /* VOLFILE_OP */
        PRIV_VOLFILE_REMOVE = 4, /* VOLFILE_OP */
        PRIV_VOLFILE_COMMIT = 5, /* VOLFILE_OP */
        PRIV_VOLFILE_ABORT = 6,  /* VOLFILE_OP */
        PRIV_VOLFILE_LS = 7,     /* VOLFILE_LIST */
};

#define PRIV_VOLFILE_VOL_MAX 136u  /* "volumes/<env>/<name>" + NUL: 8 + 63 + 1 + 63 + 1 */
#define PRIV_VOLFILE_TMP_MAX 24u   /* = VOL_PUT_TMP_MAX: "put-" + 16 hex + NUL, padded */
#define PRIV_VOLFILE_PATH_MAX 4096u /* = VOL_PATH_MAX: path_len, after_len at most */
#define PRIV_VOLFILE_LIST_MAX 1000u /* = VOL_LIST_MAX: LIST's limit at most */
/* a listing's memfd at most: every entry a header and a longest path */
#define PRIV_VOLFILE_LISTING_MAX (PRIV_VOLFILE_LIST_MAX * (32u + PRIV_VOLFILE_PATH_MAX))

struct priv_volfile {
        char vol[PRIV_VOLFILE_VOL_MAX]; /* priv_volume_path_check */
        uint32_t op;                    /* enum priv_volfile_op, of the type's */
        uint32_t mode;                  /* PUT, COMMIT: 0..07777 (0 = 0644); else 0 */
        uint32_t path_len;  /* the path's bytes in the memfd: READ, PUT, REMOVE, COMMIT
                             * 1..4096; STAT, LIST 0..4096; ABORT 0 */
        uint32_t after_len; /* LIST: 0..4096; else 0 */
        uint32_t limit;     /* LIST: 1..PRIV_VOLFILE_LIST_MAX; else 0 */
        uint32_t reserved;
        char tmp[PRIV_VOLFILE_TMP_MAX]; /* COMMIT, ABORT: vol_put_tmp_ok; else "" */
};

struct priv_volfile_opened {
        uint64_t served, served_total, refused; /* as RESULT's */
        char tmp[PRIV_VOLFILE_TMP_MAX];         /* READ: ""; PUT: vol_put_tmp_ok */
};

struct priv_volfile_stated {
        uint64_t served, served_total, refused; /* as RESULT's */
        uint32_t kind;                          /* enum vol_file_kind: 1..4 */
        uint32_t mode;                          /* 0..07777 */
        uint64_t size;
        int64_t mtime_ns;
};

struct priv_volfile_listed {
        uint64_t served, served_total, refused; /* as RESULT's */
        uint32_t n;    /* entries: 0..PRIV_VOLFILE_LIST_MAX */
        uint32_t more; /* 0 or 1 */
        uint32_t len;  /* the memfd's bytes: 0..PRIV_VOLFILE_LISTING_MAX */
        uint32_t reserved;
};

/* Pure: the paths of a decoded VOLFILE request from its memfd's bytes
 * buf[0..len): exactly path_len + after_len bytes, each part passing
 * vol_path_check ("path", "after"); copied NUL-terminated into path and
 * after (PRIV_VOLFILE_PATH_MAX + 1 bytes each). 0, or -EINVAL /
 * -EPROTO with e (the status of vol_path_check's refusal kept). */
int priv_volfile_paths_decode(const struct priv_volfile *v, const void *buf, size_t len,
                              char path[PRIV_VOLFILE_PATH_MAX + 1],
                              char after[PRIV_VOLFILE_PATH_MAX + 1], struct wr_err *e);

/* Encoders. The request: v's fields checked as the decoder does (the
 * memfd is the caller's to send along). */
int priv_volfile_encode(uint64_t id, uint32_t type, const struct priv_volfile *v, void *buf,
                        size_t size, struct wr_err *e);
int priv_volfile_opened_encode(uint64_t id, const struct priv_volfile_opened *o, void *buf,
                               size_t size);
int priv_volfile_stated_encode(uint64_t id, const struct priv_volfile_stated *s, void *buf,
                               size_t size);
int priv_volfile_listed_encode(uint64_t id, const struct priv_volfile_listed *l, void *buf,
                               size_t size);

/* How many fds a message of type carries (the table's count; for the
 * config messages the least, 1: they carry 1 + n_bind; 0 for an unknown
 * type). */
unsigned priv_type_fds(uint32_t type);

/* One decoded request. */
struct priv_req {
        struct priv_hdr hdr;
        union {
                struct priv_cleanup cleanup;
                struct priv_link link;
                struct priv_signal signal;
                struct priv_freeze freeze;
                /* phase 3, the network */
                struct priv_nft_apply nft_apply;
                struct priv_nft_class nft_class;
                struct priv_nft_table nft_table;
                struct priv_net_connect net_connect;
                struct priv_sandbox_cfg cfg; /* CREATE, PRESTART, START */
                struct priv_destroy destroy; /* DESTROY */
                struct priv_target target;   /* ATTACH, CTL_CONNECT */
                /* phase 3, volumes and spawn-beside */
                struct priv_volume volume; /* VOLUME_MOUNT, VOLUME_UNMOUNT */
                struct priv_spawn_beside spawn;
                struct priv_ssh_dir ssh_dir;
                /* phase 4b, the upper-dir reader */
                struct priv_upper_pack upper_pack;
                struct priv_upper_session upper_session; /* 4b-2, the journal */
                /* phase 3, the helpers */
                struct priv_helper_start helper;
                struct priv_unpack_start unpack;
                /* phase 5, layer storage */
                struct priv_layer_commit layer_commit;
                struct priv_layer_remove layer_remove;
                /* phase 5, volume files */
                struct priv_volfile volfile;
        };
};

/* One decoded reply. */
struct priv_reply {
        struct priv_hdr hdr;
        union {
                struct priv_result result;
                struct priv_hello_reply hello;
                /* phase 3, the network */
                struct priv_nft_names nft_names;
                struct priv_net_connected net_connected;
                struct priv_created created;
                /* phase 3, volumes and spawn-beside */
                struct priv_volume_mounted volume_mounted;
                struct priv_spawned spawned;
                /* phase 4b, the upper-dir reader */
                struct priv_upper_packed upper_packed;
                struct priv_upper_started upper_started; /* 4b-2, the journal */
                /* phase 3, the helpers */
                struct priv_helper_started helper_started;
                /* phase 5, volume files */
                struct priv_volfile_opened volfile_opened;
                struct priv_volfile_stated volfile_stated;
                struct priv_volfile_listed volfile_listed;
        };
};

/* The name of a message type ("SANDBOX_CLEANUP"), or NULL when the table
 * has no such type. */
const char *priv_type_name(uint32_t type);

/* Pure: check a request datagram buf[0..len) that arrived with n_fds fds
 * against the table and copy it into *out. 0, or a refusal with a message
 * in e: -EPROTO (framing: size, magic, unknown or reply type, reserved
 * bits, fd count), -EINVAL (a field: id, link name, mode, string
 * padding), -EACCES (a path not confined to the state dir as the table
 * says). On a refusal *out holds the header when it could be read
 * (out->hdr.id for the answer), else zeros. */
int priv_req_decode(const void *buf, size_t len, size_t n_fds, struct priv_req *out,
                    struct wr_err *e);

/* Pure: the same for a reply (warrend's side). -EPROTO or -EINVAL. */
int priv_reply_decode(const void *buf, size_t len, size_t n_fds, struct priv_reply *out,
                      struct wr_err *e);

/* Pure: 0 when path is a confined path whose first component is root
 * (see "Paths" above), else -EACCES with the reason in e. */
int priv_path_check(const char *path, const char *root, struct wr_err *e);

/* Encoders: the datagram into buf (size bytes, at least PRIV_MSG_MAX is
 * always enough); its length, or -EINVAL (a field the decoder would
 * refuse; e says which) / -ENOBUFS. */
int priv_hello_encode(uint64_t id, void *buf, size_t size);
int priv_cleanup_encode(uint64_t id, const char *sandbox_id, const char *dir, uint32_t cgroup_mode,
                        void *buf, size_t size, struct wr_err *e);
int priv_link_delete_encode(uint64_t id, const char *name, void *buf, size_t size,
                            struct wr_err *e);
int priv_signal_encode(uint64_t id, const struct priv_target *t, int signo, void *buf, size_t size,
                       struct wr_err *e);
int priv_freeze_encode(uint64_t id, const struct priv_target *t, bool on, void *buf, size_t size,
                       struct wr_err *e);
int priv_result_encode(uint64_t id, const struct priv_result *res, void *buf, size_t size);
int priv_hello_reply_encode(uint64_t id, const struct priv_hello_reply *rep, void *buf,
                            size_t size);

/* Phase 2 encoders (the config's blob and fds: priv-cfg.h). */
int priv_sandbox_cfg_encode(uint64_t id, uint32_t type, const struct priv_sandbox_cfg *c, void *buf,
                            size_t size, struct wr_err *e);
int priv_destroy_encode(uint64_t id, const struct priv_destroy *d, void *buf, size_t size,
                        struct wr_err *e);
int priv_target_encode(uint64_t id, uint32_t type, const struct priv_target *t, void *buf,
                       size_t size, struct wr_err *e);
int priv_created_encode(uint64_t id, const struct priv_created *c, void *buf, size_t size);

/* Send one datagram buf[0..len) with fds[0..n_fds) (SCM_RIGHTS; not
 * closed). 0 or a negative errno. */
int priv_send(int fd, const void *buf, size_t len, const int *fds, size_t n_fds, int flags);

/* Receive one datagram from fd into buf (size bytes) with at most
 * PRIV_FDS_MAX fds into fds[]; *n_fds = how many came; flags for
 * recvmsg(2) (MSG_DONTWAIT; MSG_CMSG_CLOEXEC is always added). Returns the
 * datagram's length, 0 at EOF, or a negative errno. A datagram larger
 * than size or with truncated control data is -EMSGSIZE / -EPROTO with
 * every fd it carried already closed. */
long priv_recv(int fd, void *buf, size_t size, int fds[PRIV_FDS_MAX], size_t *n_fds, int flags);

/* Close fds[0..n). */
void priv_close_fds(int *fds, size_t n);
