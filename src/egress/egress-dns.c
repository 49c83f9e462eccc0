/* SPDX-License-Identifier: Apache-2.0 */
/* Strict DNS query parsing for the sandbox resolver (egress-dns.h). */

#include <errno.h>
#include <string.h>

#include "egress/egress-dns.h"

static uint16_t rd16(const uint8_t *p) {
        return (uint16_t) ((p[0] << 8) | p[1]);
}

/* Read an uncompressed name at buf[*pos..len): text (lower-cased, labels
 * joined with '.') into out (256 bytes) unless NULL. */
static int read_name(const uint8_t *buf, size_t len, size_t *pos, char *out, size_t *out_len,
                     struct wr_err *e) {
        size_t p = *pos, wire = 0, o = 0;
        for (;;) {
                if (p >= len)
                        return err_setx(e, -EBADMSG, 0, WR_FAULT_WORKLOAD, "dns: name truncated");
                uint8_t l = buf[p++];
                wire++;
                if (l == 0)
                        break;
                if (l & 0xc0)
                        return err_setx(e, -EBADMSG, 0, WR_FAULT_WORKLOAD,
                                        "dns: compressed or extended label in a query");
                if (l > 63 || len - p < l)
                        return err_setx(e, -EBADMSG, 0, WR_FAULT_WORKLOAD, "dns: bad label length");
                wire += l;
                if (wire > EGRESS_DNS_NAME_WIRE_MAX)
                        return err_setx(e, -EBADMSG, 0, WR_FAULT_WORKLOAD,
                                        "dns: name longer than 255 bytes");
                if (out) {
                        if (o)
                                out[o++] = '.';
                        for (size_t i = 0; i < l; i++) {
                                uint8_t c = buf[p + i];
                                out[o++] = (char) (c >= 'A' && c <= 'Z' ? c + 32 : c);
                        }
                }
                p += l;
        }
        if (out) {
                out[o] = '\0';
                *out_len = o;
        }
        *pos = p;
        return 0;
}

int egress_dns_query_parse(const uint8_t *buf, size_t len, struct egress_dns_query *ret,
                           struct wr_err *e) {
        memset(ret, 0, sizeof(*ret));
        if (len < 12)
                return err_setx(e, -EBADMSG, 0, WR_FAULT_WORKLOAD, "dns: %zu bytes, no header",
                                len);
        if (len > EGRESS_DNS_MSG_MAX)
                return err_setx(e, -EBADMSG, 0, WR_FAULT_WORKLOAD, "dns: message too long");
        ret->id = rd16(buf);
        ret->flags = rd16(buf + 2);
        ret->len = len;
        if (ret->flags & 0x8000)
                return err_setx(e, -EBADMSG, 0, WR_FAULT_WORKLOAD, "dns: not a query (QR set)");
        if ((ret->flags >> 11) & 0xf)
                return err_setx(e, -EBADMSG, 0, WR_FAULT_WORKLOAD, "dns: opcode %u refused",
                                (ret->flags >> 11) & 0xf);
        if (ret->flags & 0x0200)
                return err_setx(e, -EBADMSG, 0, WR_FAULT_WORKLOAD, "dns: TC set in a query");
        if (rd16(buf + 4) != 1)
                return err_setx(e, -EBADMSG, 0, WR_FAULT_WORKLOAD, "dns: QDCOUNT must be 1");
        if (rd16(buf + 6) != 0 || rd16(buf + 8) != 0)
                return err_setx(e, -EBADMSG, 0, WR_FAULT_WORKLOAD,
                                "dns: answer or authority records in a query");
        uint16_t ar = rd16(buf + 10);
        if (ar > 1)
                return err_setx(e, -EBADMSG, 0, WR_FAULT_WORKLOAD,
                                "dns: more than one additional record");
        size_t pos = 12;
        int r = read_name(buf, len, &pos, ret->name, &ret->name_len, e);
        if (r < 0)
                return r;
        if (len - pos < 4)
                return err_setx(e, -EBADMSG, 0, WR_FAULT_WORKLOAD, "dns: question truncated");
        ret->qtype = rd16(buf + pos);
        ret->qclass = rd16(buf + pos + 2);
        pos += 4;
        ret->question_end = pos;
        if (ret->qclass != 1)
                return err_setx(e, -EBADMSG, 0, WR_FAULT_WORKLOAD, "dns: class %u refused",
                                ret->qclass);
        if (ar == 1) {
                /* OPT: root name, type 41, class, ttl, rdlen, rdata */
                if (len - pos < 11 || buf[pos] != 0 || rd16(buf + pos + 1) != 41)
                        return err_setx(e, -EBADMSG, 0, WR_FAULT_WORKLOAD,
                                        "dns: the additional record is not an OPT record");
                uint16_t rdlen = rd16(buf + pos + 9);
                pos += 11;
                if (len - pos < rdlen)
                        return err_setx(e, -EBADMSG, 0, WR_FAULT_WORKLOAD, "dns: OPT truncated");
                pos += rdlen;
                ret->has_opt = true;
        }
        if (pos != len)
                return err_setx(e, -EBADMSG, 0, WR_FAULT_WORKLOAD, "dns: %zu trailing bytes",
                                len - pos);
        if (ret->name_len > 0 && memchr(ret->name, '\0', ret->name_len) == NULL &&
            net_host_canon(ret->name, ret->name_len, WR_FAULT_WORKLOAD, &ret->canon, NULL) == 0)
                ret->canon_ok = true;
        return 0;
}

int egress_dns_error_answer(const uint8_t *buf, const struct egress_dns_query *q, int rcode,
                            uint8_t *out, size_t size) {
        if (size < q->question_end)
                return -ENOBUFS;
        memcpy(out, buf, q->question_end);
        uint16_t fl = (uint16_t) (0x8000 | (q->flags & 0x0100) | 0x0080 | (rcode & 0xf));
        out[2] = (uint8_t) (fl >> 8);
        out[3] = (uint8_t) fl;
        out[4] = 0, out[5] = 1;
        memset(out + 6, 0, 6);
        return (int) q->question_end;
}

int egress_dns_formerr(const uint8_t *buf, size_t len, uint8_t *out, size_t size) {
        if (size < 12)
                return -ENOBUFS;
        memset(out, 0, 12);
        if (len >= 2)
                memcpy(out, buf, 2);
        out[2] = 0x80;
        out[3] = 0x80 | EGRESS_DNS_RCODE_FORMERR;
        return 12;
}

int egress_dns_answer_check(const uint8_t *ans, size_t len, uint16_t id, const uint8_t *qbuf,
                            const struct egress_dns_query *q) {
        if (len < 12 || rd16(ans) != id)
                return -EBADMSG;
        uint16_t fl = rd16(ans + 2);
        if (!(fl & 0x8000) || ((fl >> 11) & 0xf) != 0)
                return -EBADMSG;
        /* a truncated answer may come without its question (dnslib, some
         * servers): then nothing but the header */
        if ((fl & 0x0200) && rd16(ans + 4) == 0)
                return len == 12 && rd16(ans + 6) == 0 && rd16(ans + 8) == 0 && rd16(ans + 10) == 0
                               ? 0
                               : -EBADMSG;
        if (len < q->question_end || rd16(ans + 4) != 1)
                return -EBADMSG;
        /* the question: same length (no compression in it), same bytes but
         * for the case of letters */
        size_t name_end = q->question_end - 4;
        for (size_t i = 12; i < q->question_end; i++) {
                uint8_t a = ans[i], b = qbuf[i];
                if (i < name_end) {
                        if (a >= 'A' && a <= 'Z')
                                a += 32;
                        if (b >= 'A' && b <= 'Z')
                                b += 32;
                }
                if (a != b)
                        return -EBADMSG;
        }
        return 0;
}
