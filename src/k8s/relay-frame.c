/* SPDX-License-Identifier: Apache-2.0 */
/* The relay's frame decoder (relay-frame.h): pure, bounded. */
#include "k8s/relay-frame.h"

#include <errno.h>
#include <string.h>

#include "init/ctl-proto.h"

void relay_put32(uint8_t *p, uint32_t v) {
        p[0] = (uint8_t) v;
        p[1] = (uint8_t) (v >> 8);
        p[2] = (uint8_t) (v >> 16);
        p[3] = (uint8_t) (v >> 24);
}

uint32_t relay_get32(const uint8_t *p) {
        return (uint32_t) p[0] | (uint32_t) p[1] << 8 | (uint32_t) p[2] << 16 |
               (uint32_t) p[3] << 24;
}

void relay_hdr_put(uint8_t *buf, uint32_t type, uint32_t stream, uint32_t len) {
        buf[0] = (uint8_t) type;
        buf[1] = 0;
        buf[2] = buf[3] = 0;
        relay_put32(buf + 4, stream);
        relay_put32(buf + 8, len);
}

size_t relay_frame_max(size_t msg_max) {
        size_t m = 4 + RELAY_STREAMS_MAX * 8 + msg_max;
        return RELAY_HDR_LEN + (m > RELAY_DATA_MAX ? m : RELAY_DATA_MAX);
}

static int hex_ok(const uint8_t *p, size_t n) {
        for (size_t i = 0; i < n; i++)
                if (!((p[i] >= '0' && p[i] <= '9') || (p[i] >= 'a' && p[i] <= 'f')))
                        return 0;
        return 1;
}

int relay_frame_parse(const uint8_t *buf, size_t n, size_t msg_max, struct relay_frame *f) {
        memset(f, 0, sizeof(*f));
        if (n < RELAY_HDR_LEN)
                return 0;
        uint32_t type = buf[0], stream = relay_get32(buf + 4), len = relay_get32(buf + 8);
        if (buf[1] != 0 || buf[2] != 0 || buf[3] != 0)
                return -EBADMSG;
        if ((size_t) len > relay_frame_max(msg_max) - RELAY_HDR_LEN)
                return -EBADMSG;
        /* what each type may announce, before waiting for its payload */
        switch (type) {
        case RELAY_HELLO:
                if (stream != 0 || len < 4 || len > RELAY_ID_MAX + 1 + RELAY_TOKEN_LEN)
                        return -EBADMSG;
                break;
        case RELAY_WELCOME:
                if (stream != 0 || len != 0)
                        return -EBADMSG;
                break;
        case RELAY_MSG:
                if (stream != 0 || len < 4 + sizeof(struct ctl_hdr))
                        return -EBADMSG;
                break;
        case RELAY_DATA:
                if (stream == 0 || len == 0 || len > RELAY_DATA_MAX)
                        return -EBADMSG;
                break;
        case RELAY_EOF:
        case RELAY_STOP:
                if (stream == 0 || len != 0)
                        return -EBADMSG;
                break;
        case RELAY_CREDIT:
                if (stream == 0 || len != 4)
                        return -EBADMSG;
                break;
        default:
                return -EBADMSG;
        }
        if (n - RELAY_HDR_LEN < len)
                return 0;
        const uint8_t *p = buf + RELAY_HDR_LEN;
        f->type = type;
        f->stream = stream;
        f->len = len;
        switch (type) {
        case RELAY_HELLO: {
                const uint8_t *nul = memchr(p, 0, len);
                if (!nul || nul == p || (size_t) (nul - p) > RELAY_ID_MAX)
                        return -EBADMSG;
                size_t idl = (size_t) (nul - p), tl = len - idl - 1;
                if (tl != RELAY_TOKEN_LEN || !hex_ok(nul + 1, tl))
                        return -EBADMSG;
                for (size_t i = 0; i < idl; i++)
                        if (!((p[i] >= 'a' && p[i] <= 'z') || (p[i] >= '0' && p[i] <= '9') ||
                              p[i] == '-'))
                                return -EBADMSG;
                memcpy(f->id, p, idl);
                memcpy(f->token, nul + 1, tl);
                break;
        }
        case RELAY_MSG: {
                uint32_t ns = relay_get32(p);
                if (ns > RELAY_STREAMS_MAX ||
                    (size_t) len < 4 + (size_t) ns * 8 + sizeof(struct ctl_hdr))
                        return -EBADMSG;
                for (uint32_t i = 0; i < ns; i++) {
                        uint32_t id = relay_get32(p + 4 + i * 8), kind = relay_get32(p + 8 + i * 8);
                        if (id == 0 || kind < RELAY_KIND_IN || kind > RELAY_KIND_PTY)
                                return -EBADMSG;
                        for (uint32_t j = 0; j < i; j++)
                                if (f->streams[j].id == id)
                                        return -EBADMSG;
                        f->streams[i] = (struct relay_stream_ref){id, kind};
                }
                f->nstreams = ns;
                f->payload = p + 4 + (size_t) ns * 8;
                f->payload_len = len - 4 - (size_t) ns * 8;
                if (f->payload_len > msg_max)
                        return -EBADMSG;
                /* the datagram's own header must say its size; the ctl
                 * decoders check the rest */
                struct ctl_hdr h;
                memcpy(&h, f->payload, sizeof(h));
                if (h.magic != CTL_MAGIC || h.len != f->payload_len - sizeof(h))
                        return -EBADMSG;
                break;
        }
        case RELAY_DATA:
                f->payload = p;
                f->payload_len = len;
                break;
        case RELAY_CREDIT:
                f->credit = relay_get32(p);
                if (f->credit == 0 || f->credit > RELAY_WINDOW)
                        return -EBADMSG;
                break;
        default:
                break;
        }
        return (int) (RELAY_HDR_LEN + len);
}
