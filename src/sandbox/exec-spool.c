/* SPDX-License-Identifier: Apache-2.0 */
/* Encoder and strict decoder of an exec's .meta spool file (exec-spool.h).
 * Pure: no I/O, no global state. */
#include "sandbox/exec-spool.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

int sbx_spool_meta_encode(const struct sbx_spool_hdr *hdr, char *const *argv, uint8_t **ret) {
        size_t argc = 0, len = 0;
        if (!argv || !argv[0])
                return -EINVAL;
        for (; argv[argc]; argc++) {
                len += strlen(argv[argc]) + 1;
                if (len > SBX_SPOOL_ARGV_MAX)
                        return -EMSGSIZE;
        }
        uint8_t *b = malloc(sizeof(*hdr) + len);
        if (!b)
                return -ENOMEM;
        struct sbx_spool_hdr h = *hdr;
        memcpy(h.magic, SBX_SPOOL_MAGIC, sizeof(h.magic));
        h.argc = (uint32_t) argc;
        h.argv_len = (uint32_t) len;
        h.reserved = 0;
        memcpy(b, &h, sizeof(h));
        size_t pos = sizeof(h);
        for (size_t i = 0; i < argc; i++) {
                size_t l = strlen(argv[i]) + 1;
                memcpy(b + pos, argv[i], l);
                pos += l;
        }
        *ret = b;
        return (int) pos;
}

void sbx_spool_meta_done(struct sbx_spool_meta *m) {
        if (!m)
                return;
        if (m->argv)
                for (char **p = m->argv; *p; p++)
                        free(*p);
        free(m->argv);
        free(m->runs);
        m->argv = NULL;
        m->runs = NULL;
        m->n_runs = 0;
}

int sbx_spool_meta_decode(const void *buf, size_t n, struct sbx_spool_meta *ret) {
        const uint8_t *p = buf;
        struct sbx_spool_meta m = {0};

        memset(ret, 0, sizeof(*ret));
        if (n < sizeof(m.hdr))
                return -EBADMSG;
        memcpy(&m.hdr, p, sizeof(m.hdr));
        const struct sbx_spool_hdr *h = &m.hdr;
        if (memcmp(h->magic, SBX_SPOOL_MAGIC, sizeof(h->magic)) != 0 || h->reserved ||
            (h->flags & ~(uint32_t) SBX_SPOOL_FLAGS_ALL) || h->done > 1 || h->argc == 0 ||
            h->argv_len > SBX_SPOOL_ARGV_MAX || h->argc > h->argv_len ||
            n - sizeof(m.hdr) < h->argv_len || h->started_ns < 0 || h->deadline_ns < 0 ||
            h->exit_reason < 0 || h->exit_reason > 16 || h->log_size > SBX_SPOOL_LOG_SIZE_MAX)
                return -EBADMSG;

        /* argv: exactly argc NUL-terminated strings, argv[0] non-empty */
        const char *s = (const char *) p + sizeof(m.hdr);
        size_t end = h->argv_len, pos = 0;
        m.argv = calloc((size_t) h->argc + 1, sizeof(char *));
        if (!m.argv)
                return -ENOMEM;
        for (uint32_t i = 0; i < h->argc; i++) {
                const char *nul = pos < end ? memchr(s + pos, '\0', end - pos) : NULL;
                if (!nul || (i == 0 && nul == s))
                        goto bad;
                size_t l = (size_t) (nul - (s + pos));
                m.argv[i] = malloc(l + 1);
                if (!m.argv[i]) {
                        sbx_spool_meta_done(&m);
                        return -ENOMEM;
                }
                memcpy(m.argv[i], s + pos, l + 1);
                pos += l + 1;
        }
        if (pos != end)
                goto bad;

        /* run records; a torn last one is ignored */
        size_t rest = n - sizeof(m.hdr) - h->argv_len, k = rest / sizeof(struct sbx_spool_run);
        /* records punched out (all zero: they only described bytes
         * punched out of .out) come first, before every whole one */
        static const struct sbx_spool_run zero;
        const uint8_t *r0 = p + sizeof(m.hdr) + h->argv_len;
        while (k > 0 && memcmp(r0, &zero, sizeof(zero)) == 0) {
                r0 += sizeof(zero);
                k--;
        }
        if (k) {
                m.runs = calloc(k, sizeof(*m.runs));
                if (!m.runs) {
                        sbx_spool_meta_done(&m);
                        return -ENOMEM;
                }
                memcpy(m.runs, r0, k * sizeof(*m.runs));
                for (size_t i = 0; i < k; i++)
                        if (m.runs[i].magic != SBX_SPOOL_RUN_MAGIC ||
                            (m.runs[i].stream != 1 && m.runs[i].stream != 2) ||
                            (i > 0 && m.runs[i].offset < m.runs[i - 1].offset))
                                goto bad;
                m.n_runs = k;
        }
        *ret = m;
        return 0;
bad:
        sbx_spool_meta_done(&m);
        return -EBADMSG;
}
