/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* The sandbox resolver's view of DNS messages (RFC 1035): a strict parser
 * for the queries a sandbox sends, the error answers built from them, and
 * the check that an upstream answer belongs to a query. Pure code: no I/O,
 * no allocation. Fuzzed by tests/fuzz/fuzz-egress-dns.c. Never reads
 * outside [buf, buf + len). */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "basic/err.h"
#include "net/host.h"

#define EGRESS_DNS_MSG_MAX 65535u /* over TCP; UDP queries are far smaller */
#define EGRESS_DNS_NAME_WIRE_MAX 255

enum {
        EGRESS_DNS_RCODE_NOERROR = 0,
        EGRESS_DNS_RCODE_FORMERR = 1,
        EGRESS_DNS_RCODE_SERVFAIL = 2,
        EGRESS_DNS_RCODE_NXDOMAIN = 3,
        EGRESS_DNS_RCODE_REFUSED = 5,
};

struct egress_dns_query {
        uint16_t id;
        uint16_t flags; /* the header's second word, as sent */
        uint16_t qtype;
        uint16_t qclass;
        size_t question_end; /* offset just past the question (header + qname + 4) */
        size_t len;          /* the whole message */
        bool has_opt;        /* one EDNS OPT record in the additional section */
        /* The name as text, lower-cased, without the trailing dot ("" for the
         * root): every label 1..63 bytes; the bytes themselves are not
         * judged here (an '_' or a NUL is kept for the caller to refuse). */
        char name[EGRESS_DNS_NAME_WIRE_MAX + 1];
        size_t name_len;
        /* The name canonicalised (net_host_canon): valid when canon_ok. */
        bool canon_ok;
        struct net_host canon;
};

/* Parse a query at buf (len bytes). Accepted: QR = 0, opcode QUERY (0),
 * no TC, QDCOUNT = 1, ANCOUNT = NSCOUNT = 0, ARCOUNT 0 or 1 (then exactly one
 * OPT record with the root name, RR type 41); the name in uncompressed
 * labels (compression pointers and the extended label types 0x40/0x80 are
 * refused), each label 1..63 bytes, at most 255 bytes on the wire; QCLASS
 * IN (1); nothing after the records. Returns 0, or -EBADMSG (workload's
 * fault) with a message. The name is also run through net_host_canon:
 * canon_ok says whether it is a hostname the policy can judge. */
int egress_dns_query_parse(const uint8_t *buf, size_t len, struct egress_dns_query *ret,
                           struct wr_err *e);

/* Build the answer with rcode (NXDOMAIN, REFUSED, SERVFAIL, FORMERR) to the
 * parsed query q from its bytes buf: the header (QR, RD copied, RA set, AA
 * clear) and the question, no records. Writes into out (size bytes);
 * returns the length or -ENOBUFS. */
int egress_dns_error_answer(const uint8_t *buf, const struct egress_dns_query *q, int rcode,
                            uint8_t *out, size_t size);

/* Build a FORMERR answer to an unparsable query (just the header, with the
 * id when at least 2 bytes were present). Returns 12, or -ENOBUFS. */
int egress_dns_formerr(const uint8_t *buf, size_t len, uint8_t *out, size_t size);

/* Does ans (len bytes, from upstream) answer the query whose question is
 * qbuf[12..q->question_end) under id? Checks QR = 1, opcode 0, QDCOUNT 1, the
 * same question (name compared case-insensitively, same type and class);
 * a truncated (TC) answer may instead carry no question and no records at
 * all. Returns 0, or -EBADMSG. */
int egress_dns_answer_check(const uint8_t *ans, size_t len, uint16_t id, const uint8_t *qbuf,
                            const struct egress_dns_query *q);
