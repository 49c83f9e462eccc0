/* SPDX-License-Identifier: Apache-2.0 */
/* The warren-egress control protocol (egress-proto.h): strict encoders and
 * decoders over byte buffers. No I/O, no global state: the same code runs in
 * warren-egress, in the unit tests and under libFuzzer. */

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "egress/egress-proto.h"

bool egress_sandbox_id_valid(const char *s) {
        size_t n = strnlen(s, EGRESS_SANDBOX_ID_MAX + 1);
        if (n == 0 || n > EGRESS_SANDBOX_ID_MAX)
                return false;
        for (size_t i = 0; i < n; i++) {
                char c = s[i];
                if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                      c == '.' || c == '_' || c == '-'))
                        return false;
        }
        return true;
}

/* A fixed string field: NUL-terminated inside size bytes, zero after. */
static bool field_ok(const char *f, size_t size) {
        const char *nul = memchr(f, '\0', size);
        if (!nul)
                return false;
        for (const char *p = nul; p < f + size; p++)
                if (*p)
                        return false;
        return true;
}

static bool zero(const void *p, size_t n) {
        const uint8_t *b = p;
        for (size_t i = 0; i < n; i++)
                if (b[i])
                        return false;
        return true;
}

void egress_str_set(char *dst, size_t size, const char *s) {
        memset(dst, 0, size);
        if (s)
                strncpy(dst, s, size - 1);
}

void egress_addr_from_net(struct egress_addr *w, const struct net_addr *a) {
        memset(w, 0, sizeof(*w));
        if (!a || a->family == 0)
                return;
        w->family = a->family == AF_INET ? 4 : 6;
        memcpy(w->bytes, a->bytes, a->family == AF_INET ? 4 : 16);
}

int egress_addr_to_net(const struct egress_addr *w, struct net_addr *ret) {
        memset(ret, 0, sizeof(*ret));
        if (!zero(w->reserved, sizeof(w->reserved)))
                return -EBADMSG;
        if (w->family == 4) {
                if (!zero(w->bytes + 4, 12))
                        return -EBADMSG;
                net_addr_from_ipv4(ret, w->bytes);
                return 0;
        }
        if (w->family == 6) {
                net_addr_from_ipv6(ret, w->bytes);
                return 0;
        }
        return -EBADMSG;
}

static int decode_set(const uint8_t *p, size_t len, struct egress_policy_msg *m, struct wr_err *e) {
        struct egress_policy_set w;
        if (len < sizeof(w))
                return err_set(e, -EBADMSG, "POLICY_SET: %zu bytes, shorter than its header", len);
        memcpy(&w, p, sizeof(w));
        if (!field_ok(w.sandbox, sizeof(w.sandbox)) || !egress_sandbox_id_valid(w.sandbox))
                return err_set(e, -EBADMSG, "POLICY_SET: invalid sandbox id");
        if (w.rules_len && w.mode == EGRESS_MODE_LEARN)
                return err_set(e, -EBADMSG, "POLICY_SET: rules go with ENFORCE or OPEN");
        if (w.rules_len > EGRESS_MSG_MAX)
                return err_set(e, -EMSGSIZE, "POLICY_SET: rules of %u bytes", w.rules_len);
        if (w.mode < EGRESS_MODE_OPEN || w.mode > EGRESS_MODE_LEARN)
                return err_set(e, -EBADMSG, "POLICY_SET: unknown mode %u", w.mode);
        if (w.n_addrs == 0)
                return err_set(e, -EBADMSG, "POLICY_SET: no source address");
        if (w.n_addrs > EGRESS_ADDRS_MAX)
                return err_set(e, -EMSGSIZE, "POLICY_SET: %u source addresses (at most %d)",
                               w.n_addrs, EGRESS_ADDRS_MAX);
        if ((w.mode == EGRESS_MODE_ENFORCE) != (w.policy_len != 0))
                return err_set(e, -EBADMSG,
                               "POLICY_SET: a policy goes with ENFORCE and only there");
        if (w.policy_len > NET_POLICY_WIRE_MAX)
                return err_set(e, -EMSGSIZE, "POLICY_SET: policy of %u bytes", w.policy_len);
        size_t need = sizeof(w) + (size_t) w.n_addrs * sizeof(struct egress_addr) + w.policy_len +
                      w.rules_len;
        if (need != len)
                return err_set(e, -EBADMSG, "POLICY_SET: %zu payload bytes, expected %zu", len,
                               need);
        memset(m, 0, sizeof(*m));
        memcpy(m->sandbox, w.sandbox, sizeof(m->sandbox));
        m->mode = (enum egress_mode) w.mode;
        m->n_addrs = w.n_addrs;
        const uint8_t *a = p + sizeof(w);
        for (size_t i = 0; i < w.n_addrs; i++, a += sizeof(struct egress_addr)) {
                struct egress_addr wa;
                memcpy(&wa, a, sizeof(wa));
                if (egress_addr_to_net(&wa, &m->addrs[i]) < 0)
                        return err_set(e, -EBADMSG, "POLICY_SET: address %zu malformed", i);
                for (size_t j = 0; j < i; j++)
                        if (net_addr_equal(&m->addrs[j], &m->addrs[i]))
                                return err_set(e, -EBADMSG, "POLICY_SET: address %zu repeated", i);
        }
        if (w.policy_len) {
                int r = net_policy_deserialize(a, w.policy_len, &m->policy, e);
                if (r < 0)
                        return err_prefix(e, r, "POLICY_SET");
        }
        if (w.rules_len) {
                if (!(m->rules = calloc(1, sizeof(*m->rules))))
                        return -ENOMEM;
                int r = net_rules_parse(a + w.policy_len, w.rules_len, m->rules, e);
                if (r < 0)
                        return err_prefix(e, r, "POLICY_SET: rules");
        }
        return 0;
}

static void rules_free(struct net_rules **rs) {
        if (*rs) {
                net_rules_clear(*rs);
                free(*rs);
                *rs = NULL;
        }
}

int egress_req_decode(const void *buf, size_t n, struct egress_req *ret, struct wr_err *e) {
        const uint8_t *p = buf;

        memset(ret, 0, sizeof(*ret));
        if (n < sizeof(struct egress_hdr))
                return err_set(e, -EBADMSG, "request of %zu bytes, shorter than a header", n);
        memcpy(&ret->hdr, p, sizeof(ret->hdr));
        if (n > EGRESS_MSG_MAX)
                return err_set(e, -EMSGSIZE, "request of %zu bytes (at most %u)", n,
                               EGRESS_MSG_MAX);
        if (ret->hdr.magic != EGRESS_MAGIC || ret->hdr.reserved != 0 ||
            ret->hdr.len != n - sizeof(struct egress_hdr))
                return err_set(e, -EBADMSG, "bad header (magic, reserved or length)");
        p += sizeof(struct egress_hdr);
        size_t len = ret->hdr.len;

        switch (ret->hdr.type) {
        case EGRESS_POLICY_SET: {
                int r = decode_set(p, len, &ret->set, e);
                if (r < 0) {
                        net_policy_free(ret->set.policy);
                        ret->set.policy = NULL;
                        rules_free(&ret->set.rules);
                }
                return r;
        }
        case EGRESS_POLICY_DEL:
                if (len != sizeof(struct egress_policy_del))
                        return err_set(e, -EBADMSG, "POLICY_DEL: %zu payload bytes", len);
                memcpy(ret->sandbox, p, sizeof(ret->sandbox));
                if (!field_ok(ret->sandbox, sizeof(ret->sandbox)) ||
                    !egress_sandbox_id_valid(ret->sandbox))
                        return err_set(e, -EBADMSG, "POLICY_DEL: invalid sandbox id");
                return 0;
        case EGRESS_PING:
                return len == 0 ? 0 : err_set(e, -EBADMSG, "PING with a payload");
        default:
                return err_set(e, -EOPNOTSUPP, "unknown request type %u", ret->hdr.type);
        }
}

void egress_req_done(struct egress_req *req) {
        if (req && req->hdr.type == EGRESS_POLICY_SET) {
                req->set.policy = net_policy_free(req->set.policy);
                rules_free(&req->set.rules);
        }
}

static void hdr_fill(struct egress_hdr *h, uint32_t type, uint64_t id, size_t len) {
        *h = (struct egress_hdr){
                .magic = EGRESS_MAGIC, .type = type, .len = (uint32_t) len, .id = id};
}

int egress_msg_encode(uint32_t type, uint64_t id, const void *payload, size_t len, uint8_t *out,
                      size_t size) {
        struct egress_hdr h;
        if (size < sizeof(h) || len > size - sizeof(h))
                return -ENOBUFS;
        hdr_fill(&h, type, id, len);
        memcpy(out, &h, sizeof(h));
        if (len)
                memcpy(out + sizeof(h), payload, len);
        return (int) (sizeof(h) + len);
}

int egress_policy_set_encode(uint64_t id, const struct egress_policy_msg *m, uint8_t **ret,
                             size_t *ret_len) {
        if (!egress_sandbox_id_valid(m->sandbox) || m->n_addrs == 0 ||
            m->n_addrs > EGRESS_ADDRS_MAX || m->mode < EGRESS_MODE_OPEN ||
            m->mode > EGRESS_MODE_LEARN || (m->mode == EGRESS_MODE_ENFORCE) != !!m->policy ||
            (m->rules_wire_len && m->mode == EGRESS_MODE_LEARN) ||
            m->rules_wire_len > EGRESS_MSG_MAX)
                return -EINVAL;
        uint8_t *pol = NULL;
        size_t pol_len = 0;
        if (m->policy) {
                int r = net_policy_serialize(m->policy, &pol, &pol_len);
                if (r < 0)
                        return r;
        }
        struct egress_policy_set w;
        memset(&w, 0, sizeof(w));
        egress_str_set(w.sandbox, sizeof(w.sandbox), m->sandbox);
        w.mode = m->mode;
        w.n_addrs = (uint32_t) m->n_addrs;
        w.policy_len = (uint32_t) pol_len;
        w.rules_len = (uint32_t) m->rules_wire_len;
        size_t len =
                sizeof(w) + m->n_addrs * sizeof(struct egress_addr) + pol_len + m->rules_wire_len;
        uint8_t *out = malloc(sizeof(struct egress_hdr) + len);
        if (!out) {
                free(pol);
                return -ENOMEM;
        }
        struct egress_hdr h;
        hdr_fill(&h, EGRESS_POLICY_SET, id, len);
        uint8_t *q = out;
        memcpy(q, &h, sizeof(h));
        q += sizeof(h);
        memcpy(q, &w, sizeof(w));
        q += sizeof(w);
        for (size_t i = 0; i < m->n_addrs; i++) {
                struct egress_addr wa;
                egress_addr_from_net(&wa, &m->addrs[i]);
                memcpy(q, &wa, sizeof(wa));
                q += sizeof(wa);
        }
        if (pol_len)
                memcpy(q, pol, pol_len);
        if (m->rules_wire_len)
                memcpy(q + pol_len, m->rules_wire, m->rules_wire_len);
        free(pol);
        *ret = out;
        *ret_len = sizeof(h) + len;
        return 0;
}

int egress_policy_del_encode(uint64_t id, const char *sandbox, uint8_t *out, size_t size) {
        if (!egress_sandbox_id_valid(sandbox))
                return -EINVAL;
        struct egress_policy_del d;
        egress_str_set(d.sandbox, sizeof(d.sandbox), sandbox);
        return egress_msg_encode(EGRESS_POLICY_DEL, id, &d, sizeof(d), out, size);
}

int egress_ping_encode(uint64_t id, uint8_t *out, size_t size) {
        return egress_msg_encode(EGRESS_PING, id, NULL, 0, out, size);
}

static int check_event(const struct egress_event *ev, struct wr_err *e) {
        if (ev->reserved0 || ev->reserved1)
                return err_set(e, -EBADMSG, "EVENT: reserved field not zero");
        if (ev->kind != EGRESS_EVENT_TCP && ev->kind != EGRESS_EVENT_DNS &&
            ev->kind != EGRESS_EVENT_RESOURCE)
                return err_set(e, -EBADMSG, "EVENT: unknown kind %u", ev->kind);
        if (ev->verdict > NET_VERDICT_ALLOW || ev->mode > EGRESS_MODE_LEARN)
                return err_set(e, -EBADMSG, "EVENT: bad verdict or mode");
        struct net_addr a;
        if ((ev->dialed.family && egress_addr_to_net(&ev->dialed, &a) < 0) ||
            (!ev->dialed.family && !zero(&ev->dialed, sizeof(ev->dialed))) ||
            (ev->source.family && egress_addr_to_net(&ev->source, &a) < 0) ||
            (!ev->source.family && !zero(&ev->source, sizeof(ev->source))))
                return err_set(e, -EBADMSG, "EVENT: malformed address");
        if (!field_ok(ev->sandbox, sizeof(ev->sandbox)) || !field_ok(ev->sni, sizeof(ev->sni)) ||
            !field_ok(ev->host, sizeof(ev->host)) || !field_ok(ev->rule, sizeof(ev->rule)) ||
            !field_ok(ev->reason, sizeof(ev->reason)))
                return err_set(e, -EBADMSG,
                               "EVENT: string field not terminated or not zero-padded");
        if (ev->sandbox[0] && !egress_sandbox_id_valid(ev->sandbox))
                return err_set(e, -EBADMSG, "EVENT: invalid sandbox id");
        return 0;
}

int egress_msg_decode(const void *buf, size_t n, struct egress_msg *ret, struct wr_err *e) {
        const uint8_t *p = buf;

        memset(ret, 0, sizeof(*ret));
        if (n < sizeof(struct egress_hdr))
                return err_set(e, -EBADMSG, "message of %zu bytes, shorter than a header", n);
        memcpy(&ret->hdr, p, sizeof(ret->hdr));
        if (n > sizeof(struct egress_hdr) + sizeof(struct egress_event))
                return err_set(e, -EMSGSIZE, "message of %zu bytes", n);
        if (ret->hdr.magic != EGRESS_MAGIC || ret->hdr.reserved != 0 ||
            ret->hdr.len != n - sizeof(struct egress_hdr))
                return err_set(e, -EBADMSG, "bad header (magic, reserved or length)");
        p += sizeof(struct egress_hdr);
        size_t len = ret->hdr.len;
        switch (ret->hdr.type) {
        case EGRESS_READY:
                if (len != sizeof(ret->ready))
                        return err_set(e, -EBADMSG, "READY: %zu bytes", len);
                memcpy(&ret->ready, p, len);
                if (ret->ready.version != 1)
                        return err_set(e, -EBADMSG, "READY: version %u", ret->ready.version);
                return 0;
        case EGRESS_RESULT:
                if (len != sizeof(ret->result))
                        return err_set(e, -EBADMSG, "RESULT: %zu bytes", len);
                memcpy(&ret->result, p, len);
                if (ret->result.reserved || ret->result.err < 0 ||
                    !field_ok(ret->result.msg, sizeof(ret->result.msg)))
                        return err_set(e, -EBADMSG, "RESULT: malformed");
                return 0;
        case EGRESS_PONG:
                if (len != sizeof(ret->pong))
                        return err_set(e, -EBADMSG, "PONG: %zu bytes", len);
                memcpy(&ret->pong, p, len);
                return 0;
        case EGRESS_EVENT:
                if (len != sizeof(ret->event))
                        return err_set(e, -EBADMSG, "EVENT: %zu bytes", len);
                memcpy(&ret->event, p, len);
                return check_event(&ret->event, e);
        default:
                return err_set(e, -EOPNOTSUPP, "unknown message type %u", ret->hdr.type);
        }
}
