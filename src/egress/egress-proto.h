/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* Wire format of the warren-egress control protocol, shared by the egress
 * process (src/egress) and warrend (its client), and spoken by the tests'
 * Python client (tests/egress/egressctl.py).
 *
 * Transport: AF_UNIX SOCK_SEQPACKET, one socket handed to warren-egress as
 * an fd (--ctl-fd). Every message is exactly one datagram: a struct
 * egress_hdr followed by hdr.len payload bytes (hdr.len == datagram size -
 * sizeof(struct egress_hdr)); at most EGRESS_MSG_MAX bytes in all. Both
 * ends run on the same host: integers in host byte order. Reserved fields
 * and the padding after every NUL-terminated string must be zero; unknown
 * types are refused.
 *
 * warrend -> egress (requests), each answered in order:
 *   POLICY_SET  struct egress_policy_set, n_addrs struct egress_addr, then
 *               policy_len bytes of net_policy_serialize() output (ENFORCE
 *               only; 0 otherwise), then rules_len bytes of
 *               net_rules_serialize() output (hosts whose TLS is
 *               intercepted; holds secret values: both ends wipe it).
 *               Replaces the sandbox's entry if the id exists.
 *               -> RESULT {err} (same hdr.id)
 *   POLICY_DEL  struct egress_policy_del -> RESULT {err}
 *   PING        no payload -> PONG (same hdr.id)
 * egress -> warrend:
 *   READY       struct egress_ready, once, when it is confined and serving
 *   RESULT      struct egress_result: err = positive errno (0 = done) and a
 *               NUL-terminated message
 *   PONG        struct egress_pong
 *   EVENT       struct egress_event, unsolicited: one per TCP connection at
 *               its end (allowed or refused) and one per DNS query refused
 *               or forwarded. hdr.id = a per-process event sequence number.
 * A request that cannot be decoded is answered RESULT {err} with hdr.id
 * echoed when the header could be read (0 otherwise); nothing is applied. */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "net/net.h"
#include "net/rules.h"

#define EGRESS_MAGIC 0x57454731u            /* "WEG1" read as a big-endian word */
#define EGRESS_MSG_MAX ((1u << 20) + 4096u) /* one datagram, header included */
#define EGRESS_SANDBOX_ID_MAX 63            /* bytes, without the NUL */
#define EGRESS_ADDRS_MAX 16                 /* source addresses per sandbox */
#define EGRESS_MSG_TEXT_MAX 256             /* RESULT message, with the NUL */
#define EGRESS_SNI_MAX 256                  /* event strings, with the NUL */
#define EGRESS_HOST_MAX 256
#define EGRESS_RULE_MAX 320
#define EGRESS_REASON_MAX 96

enum egress_type {
        EGRESS_POLICY_SET = 1,
        EGRESS_POLICY_DEL = 2,
        EGRESS_PING = 3,
        EGRESS_READY = 0x81,
        EGRESS_RESULT = 0x82,
        EGRESS_PONG = 0x83,
        EGRESS_EVENT = 0x84,
};

struct egress_hdr {
        uint32_t magic;    /* EGRESS_MAGIC */
        uint32_t type;     /* enum egress_type */
        uint32_t len;      /* payload bytes after this header */
        uint32_t reserved; /* 0 */
        uint64_t id;       /* request id (echoed) or event sequence number */
};

enum egress_mode {
        EGRESS_MODE_OPEN = 1,    /* no policy: all but the built-in deny list (logged) */
        EGRESS_MODE_ENFORCE = 2, /* the policy that follows decides */
        EGRESS_MODE_LEARN = 3,   /* allow all, record everything (events with learn verdicts) */
};

/* A sandbox id: 1..63 bytes of [A-Za-z0-9._-], NUL-terminated, the rest of
 * the 64 bytes zero. */
struct egress_addr {
        uint8_t family;      /* 4 or 6 */
        uint8_t reserved[3]; /* 0 */
        uint8_t bytes[16];   /* network order; IPv4: the first 4, the rest 0 */
};

struct egress_policy_set {
        char sandbox[EGRESS_SANDBOX_ID_MAX + 1];
        uint32_t mode;       /* enum egress_mode */
        uint32_t n_addrs;    /* 1..EGRESS_ADDRS_MAX */
        uint32_t policy_len; /* ENFORCE: 1..NET_POLICY_WIRE_MAX; otherwise 0 */
        uint32_t rules_len;  /* bytes of net_rules_serialize() output after the
                              * policy (per-host rules and credentials, secret
                              * values inside); 0 = none. ENFORCE or OPEN. */
};

struct egress_policy_del {
        char sandbox[EGRESS_SANDBOX_ID_MAX + 1];
};

struct egress_ready {
        uint32_t version; /* 1 */
        uint32_t threads; /* proxy threads */
        uint32_t n_listen;
        uint32_t n_dns;
};

struct egress_result {
        int32_t err; /* positive errno; 0 = applied */
        uint32_t reserved;
        char msg[EGRESS_MSG_TEXT_MAX];
};

struct egress_pong {
        uint32_t n_sandboxes;
        uint32_t n_conns;        /* TCP connections open now */
        uint64_t events_dropped; /* events not sent: control socket full */
};

enum egress_event_kind {
        EGRESS_EVENT_TCP = 1,
        EGRESS_EVENT_DNS = 2,
        /* a resource detected in intercepted traffic: reason = its kind
         * (EGRESS_RESOURCE_*), rule = its id (a URL), host = the host */
        EGRESS_EVENT_RESOURCE = 3,
};
#define EGRESS_RESOURCE_GITHUB_PR "github_pull_request"

struct egress_event {
        uint64_t time_ns;    /* CLOCK_REALTIME when the connection ended / query was decided */
        uint64_t bytes_up;   /* sandbox -> upstream */
        uint64_t bytes_down; /* upstream -> sandbox */
        uint64_t duration_ns;
        uint8_t kind;    /* enum egress_event_kind */
        uint8_t verdict; /* enum net_verdict: 1 allow, 0 deny */
        uint8_t mode;    /* enum egress_mode of the sandbox (0 = unknown source) */
        uint8_t reserved0;
        uint16_t port; /* dialed (or original) port; DNS: the query type */
        uint16_t reserved1;
        struct egress_addr dialed;               /* family 0 = none dialed */
        struct egress_addr source;               /* the sandbox address the connection came from */
        char sandbox[EGRESS_SANDBOX_ID_MAX + 1]; /* "" = unknown source */
        char sni[EGRESS_SNI_MAX];                /* TLS SNI as canonicalised; "" none */
        char host[EGRESS_HOST_MAX];              /* HTTP Host / DNS qname; "" none */
        char rule[EGRESS_RULE_MAX];              /* the entry that decided */
        char reason[EGRESS_REASON_MAX];          /* a short phrase */
};

_Static_assert(sizeof(struct egress_hdr) == 24, "egress_hdr layout");
_Static_assert(sizeof(struct egress_addr) == 20, "egress_addr layout");
_Static_assert(sizeof(struct egress_policy_set) == 80, "egress_policy_set layout");
_Static_assert(sizeof(struct egress_result) == 264, "egress_result layout");
_Static_assert(sizeof(struct egress_event) == 1072, "egress_event layout");

/* --- decoded forms (egress-proto.c: pure, no I/O; fuzzed by
 * tests/fuzz/fuzz-egress-proto.c) --- */

struct egress_policy_msg {
        char sandbox[EGRESS_SANDBOX_ID_MAX + 1];
        enum egress_mode mode;
        size_t n_addrs;
        struct net_addr addrs[EGRESS_ADDRS_MAX];
        struct net_policy *policy; /* ENFORCE only; owned by the message */
        struct net_rules *rules;   /* decoded: NULL = none; owned by the message */
        const uint8_t *rules_wire; /* encoding: the serialized rules (not owned) */
        size_t rules_wire_len;
};

struct egress_req {
        struct egress_hdr hdr; /* as far as it could be read, else zeroed */
        union {
                struct egress_policy_msg set;            /* POLICY_SET */
                char sandbox[EGRESS_SANDBOX_ID_MAX + 1]; /* POLICY_DEL */
        };
};

/* True when s is a valid sandbox id (1..63 of [A-Za-z0-9._-]). */
bool egress_sandbox_id_valid(const char *s);

/* Decode one request datagram buf[0..n) (warrend -> egress) into *ret.
 * Returns 0, or a negative errno with a message in e (nothing to release):
 *   -EBADMSG  short, bad magic, reserved non-zero, len mismatch, bad id,
 *             bad mode/address/string padding, a policy that
 *             net_policy_deserialize refuses (its message kept)
 *   -EMSGSIZE datagram above EGRESS_MSG_MAX, too many addresses
 *   -EOPNOTSUPP unknown or non-request type
 *   -EPROTONOSUPPORT another policy wire version
 *   -ENOMEM
 * ret->hdr is filled whenever 24 header bytes were present. On success a
 * POLICY_SET owns ret->set.policy: release with egress_req_done(). */
int egress_req_decode(const void *buf, size_t n, struct egress_req *ret, struct wr_err *e);

/* Release what egress_req_decode allocated (accepts a zeroed/failed req). */
void egress_req_done(struct egress_req *req);

/* Encode a POLICY_SET for m (m->policy serialised when mode is ENFORCE)
 * into a new buffer *ret (*ret_len bytes; caller frees). -EINVAL for an
 * invalid id/mode/address count, -E2BIG, -ENOMEM. */
int egress_policy_set_encode(uint64_t id, const struct egress_policy_msg *m, uint8_t **ret,
                             size_t *ret_len);

/* Encode a POLICY_DEL or PING into out (at least sizeof(struct egress_hdr)
 * + 64 bytes). Returns the datagram size, or -EINVAL (bad id). */
int egress_policy_del_encode(uint64_t id, const char *sandbox, uint8_t *out, size_t size);
int egress_ping_encode(uint64_t id, uint8_t *out, size_t size);

/* Encode a reply/event (egress -> warrend) of type with the given payload
 * into out (size bytes): returns the datagram size or -ENOBUFS. */
int egress_msg_encode(uint32_t type, uint64_t id, const void *payload, size_t len, uint8_t *out,
                      size_t size);

/* Decoded egress -> warrend message. */
struct egress_msg {
        struct egress_hdr hdr;
        union {
                struct egress_ready ready;
                struct egress_result result;
                struct egress_pong pong;
                struct egress_event event;
        };
};

/* Decode one egress -> warrend datagram (what warrend reads from the
 * confined process, which a compromised proxy may forge: checked as
 * strictly as the requests). 0, or -EBADMSG / -EMSGSIZE / -EOPNOTSUPP
 * with a message. */
int egress_msg_decode(const void *buf, size_t n, struct egress_msg *ret, struct wr_err *e);

/* Fill a wire address from a net_addr (family 0 -> all zero) and back.
 * egress_addr_to_net returns -EBADMSG for a malformed wire address. */
void egress_addr_from_net(struct egress_addr *w, const struct net_addr *a);
int egress_addr_to_net(const struct egress_addr *w, struct net_addr *ret);

/* Copy the string s (truncated to size-1 bytes) into the fixed field
 * dst[size], zero-padding the rest. */
void egress_str_set(char *dst, size_t size, const char *s);
