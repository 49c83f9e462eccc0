/* SPDX-License-Identifier: Apache-2.0 */
/* The warrend <-> warren-fetch message set (fetch-proto.h): pure checks. */
#include "image/fetch-proto.h"

#include <errno.h>
#include <string.h>

#include "image/image.h"

size_t img_fetch_msg_size(enum img_fetch_type type) {
        switch (type) {
        case IMG_FETCH_REQ_MANIFEST:
        case IMG_FETCH_REQ_CONFIG:
        case IMG_FETCH_REQ_BLOB:
                return sizeof(struct img_fetch_req);
        case IMG_FETCH_REQ_BIND:
                return sizeof(struct img_fetch_req_bind);
        case IMG_FETCH_REP_MANIFEST:
                return sizeof(struct img_fetch_rep_manifest);
        case IMG_FETCH_REP_INDEX:
                return sizeof(struct img_fetch_rep_index);
        case IMG_FETCH_REP_CONFIG:
                return sizeof(struct img_fetch_rep_config);
        case IMG_FETCH_REP_PROGRESS:
        case IMG_FETCH_REP_BLOB:
                return sizeof(struct img_fetch_rep_blob);
        case IMG_FETCH_REP_ERROR:
                return sizeof(struct img_fetch_rep_error);
        }
        return 0;
}

void img_fetch_hdr_init(struct img_fetch_hdr *hdr, enum img_fetch_type type, uint32_t id) {
        hdr->magic = IMG_FETCH_MAGIC;
        hdr->version = IMG_FETCH_VERSION;
        hdr->type = (uint16_t) type;
        hdr->size = (uint32_t) img_fetch_msg_size(type);
        hdr->id = id;
}

/* A NUL within the field's n bytes. */
static bool terminated(const char *s, size_t n) {
        return memchr(s, '\0', n) != NULL;
}

/* A valid sha256 digest (or "" when empty_ok), terminated within the field. */
static bool digest_ok(const char *s, bool empty_ok) {
        if (!terminated(s, IMG_FETCH_DIGEST_MAX))
                return false;
        return (empty_ok && !s[0]) || img_digest_valid(s);
}

static int check_req(const struct img_fetch_req *q) {
        if (!terminated(q->object, sizeof(q->object)))
                return -EBADMSG;
        switch (q->hdr.type) {
        case IMG_FETCH_REQ_MANIFEST:
                if (!q->object[0] || !digest_ok(q->digest, true) || q->max_size)
                        return -EBADMSG;
                /* a digest object must be what is expected */
                if (!strncmp(q->object, "sha256:", 7) && strcmp(q->object, q->digest))
                        return -EBADMSG;
                return 0;
        default: /* CONFIG, BLOB */
                return q->object[0] || !digest_ok(q->digest, false) ? -EBADMSG : 0;
        }
}

static int check_manifest(const struct img_fetch_rep_manifest *m) {
        if (m->reserved || !digest_ok(m->config_digest, false) || m->n_layers < 1 ||
            m->n_layers > IMG_FETCH_MAX_LAYERS)
                return -EBADMSG;
        for (uint32_t i = 0; i < m->n_layers; i++)
                if (!digest_ok(m->layers[i].digest, false))
                        return -EBADMSG;
        return 0;
}

static int check_index(const struct img_fetch_rep_index *x) {
        if (x->reserved || x->n_platforms > IMG_FETCH_MAX_PLATFORMS)
                return -EBADMSG;
        for (uint32_t i = 0; i < x->n_platforms; i++) {
                const struct img_fetch_platform *p = &x->platforms[i];
                if (!terminated(p->os, sizeof(p->os)) || !terminated(p->arch, sizeof(p->arch)) ||
                    !digest_ok(p->digest, false))
                        return -EBADMSG;
        }
        return 0;
}

static int check_config(const struct img_fetch_rep_config *c) {
        if (c->reserved || c->strings_len > sizeof(c->strings) || c->hc_retries < 0)
                return -EBADMSG;
        uint64_t want = 0;
        for (int f = 0; f < IMG_FETCH_F_COUNT; f++)
                want += c->counts[f];
        if (c->counts[IMG_FETCH_F_DIFF_IDS] > IMG_FETCH_MAX_LAYERS ||
            c->counts[IMG_FETCH_F_WORKING_DIR] > 1 || c->counts[IMG_FETCH_F_USER] > 1 ||
            c->counts[IMG_FETCH_F_STOP_SIGNAL] > 1 || want > c->strings_len)
                return -EBADMSG;
        /* exactly `want` strings fill exactly strings_len bytes */
        uint64_t seen = 0;
        size_t pos = 0;
        while (pos < c->strings_len) {
                const char *s = c->strings + pos;
                const char *nul = memchr(s, '\0', c->strings_len - pos);
                if (!nul)
                        return -EBADMSG;
                if (seen < c->counts[IMG_FETCH_F_DIFF_IDS] && !img_digest_valid(s))
                        return -EBADMSG;
                seen++;
                pos = (size_t) (nul - c->strings) + 1;
        }
        if (seen != want)
                return -EBADMSG;
        for (size_t i = c->strings_len; i < sizeof(c->strings); i++)
                if (c->strings[i])
                        return -EBADMSG;
        return 0;
}

int img_fetch_msg_check(const void *buf, size_t len, enum img_fetch_dir dir) {
        if (!buf || len < sizeof(struct img_fetch_hdr))
                return -EBADMSG;
        const struct img_fetch_hdr *h = buf;
        if (h->magic != IMG_FETCH_MAGIC || h->version != IMG_FETCH_VERSION)
                return -EBADMSG;
        size_t want = img_fetch_msg_size((enum img_fetch_type) h->type);
        if (!want || h->size != want || len != want)
                return -EBADMSG;
        bool request = h->type < 0x80;
        if (request != (dir == IMG_FETCH_TO_HELPER))
                return -EBADMSG;
        int r = 0;
        switch (h->type) {
        case IMG_FETCH_REQ_MANIFEST:
        case IMG_FETCH_REQ_CONFIG:
        case IMG_FETCH_REQ_BLOB:
                r = check_req(buf);
                break;
        case IMG_FETCH_REQ_BIND: {
                const struct img_fetch_req_bind *b = buf;
                if (!b->ref[0] || !terminated(b->ref, sizeof(b->ref)))
                        r = -EBADMSG;
                break;
        }
        case IMG_FETCH_REP_MANIFEST:
                r = check_manifest(buf);
                break;
        case IMG_FETCH_REP_INDEX:
                r = check_index(buf);
                break;
        case IMG_FETCH_REP_CONFIG:
                r = check_config(buf);
                break;
        case IMG_FETCH_REP_PROGRESS:
        case IMG_FETCH_REP_BLOB:
                break;
        case IMG_FETCH_REP_ERROR: {
                const struct img_fetch_rep_error *x = buf;
                if (x->err.code >= 0 || x->err.code < -4095 ||
                    (unsigned) x->err.status > WR_STATUS_UNAUTHENTICATED ||
                    (unsigned) x->err.fault > WR_FAULT_WORKLOAD ||
                    !terminated(x->err.msg, sizeof(x->err.msg)))
                        r = -EBADMSG;
                break;
        }
        default:
                r = -EBADMSG;
        }
        return r < 0 ? r : h->type;
}

const char *img_fetch_strings_next(const struct img_fetch_rep_config *c, size_t *pos) {
        if (*pos >= c->strings_len)
                return NULL;
        const char *s = c->strings + *pos;
        *pos += strlen(s) + 1;
        return s;
}
