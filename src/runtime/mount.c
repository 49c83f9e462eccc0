/* SPDX-License-Identifier: Apache-2.0 */
/* The mount table's pure parts: checking the caller's entries, and the
 * start message that carries the table (and the rest of the request) from
 * the parent to the child. No side effects; the decoder is also run by the
 * child between clone and exec, so it allocates nothing. Applying the
 * table is child.c's job. */

#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "runtime/runtime-internal.h"

#define KNOWN_FLAGS                                                                                \
        (RT_MOUNT_RO | RT_MOUNT_NOSUID | RT_MOUNT_NODEV | RT_MOUNT_NOEXEC | RT_MOUNT_IDMAP)

/* Is p one of the kernel filesystems the runtime mounts itself, or below? */
static bool under_kernel_fs(const char *p, const char **which) {
        static const char *const roots[] = {"/proc", "/dev", "/sys"};
        for (size_t i = 0; i < ELEMENTSOF(roots); i++) {
                size_t n = strlen(roots[i]);
                if (strncmp(p, roots[i], n) == 0 && (p[n] == 0 || p[n] == '/')) {
                        *which = roots[i];
                        return true;
                }
        }
        return false;
}

static bool kind_known(unsigned kind) {
        switch ((enum rt_mount_kind) kind) {
        case RT_MOUNT_BIND:
        case RT_MOUNT_TMPFS:
        case RT_MOUNT_FILE:
        case RT_MOUNT_COPY:
                return true;
        }
        return false;
}

/* Check one entry; i names it in the message. */
/* An invalid entry: the caller's (the request's) fault. */
#define bad(e, ...) err_setx(e, -EINVAL, WR_STATUS_INVALID_ARGUMENT, WR_FAULT_CLIENT, __VA_ARGS__)

static int entry_check(const struct rt_mount *m, size_t i, struct wr_err *e) {
        const char *t = m->target ? m->target : "(null)";
        const char *which;
        if (!kind_known((unsigned) m->kind))
                return bad(e, "mount %zu (%s): unknown kind %d", i, t, (int) m->kind);
        if (!rt_target_valid(m->target))
                return bad(e,
                           "mount %zu (%s): target must be an absolute path without empty, "
                           "'.' or '..' components",
                           i, t);
        if (under_kernel_fs(m->target, &which))
                return bad(e, "mount %zu (%s): target is under %s", i, t, which);
        if (m->flags & ~KNOWN_FLAGS)
                return bad(e, "mount %zu (%s): unknown flags %#x", i, t, m->flags & ~KNOWN_FLAGS);
        if (m->mode & ~(mode_t) 07777)
                return bad(e, "mount %zu (%s): bad mode %#o", i, t, (unsigned) m->mode);
        switch (m->kind) {
        case RT_MOUNT_BIND:
                if (m->source ? m->source[0] != '/' || strlen(m->source) >= PATH_MAX
                              : m->source_fd <= 2)
                        return bad(e,
                                   "mount %zu (%s): bind source must be an absolute host "
                                   "path or an fd > 2",
                                   i, t);
                break;
        case RT_MOUNT_TMPFS:
                if (m->size == 0)
                        return bad(e, "mount %zu (%s): tmpfs needs a size", i, t);
                break;
        case RT_MOUNT_COPY:
        case RT_MOUNT_FILE:
                if (m->kind == RT_MOUNT_COPY && m->flags)
                        return bad(e, "mount %zu (%s): a copied file takes no mount flags", i, t);
                if (m->len > RT_MOUNT_DATA_MAX)
                        return bad(e, "mount %zu (%s): file content too large (%zu > %u bytes)", i,
                                   t, m->len, RT_MOUNT_DATA_MAX);
                if (m->len && !m->data)
                        return bad(e, "mount %zu (%s): no file content", i, t);
                break;
        }
        return 0;
}

int rt_mounts_check(const struct rt_mount *mounts, size_t n, struct wr_err *e) {
        if (n > RT_MOUNTS_MAX)
                return bad(e, "too many mounts (%zu > %d)", n, RT_MOUNTS_MAX);
        if (n && !mounts)
                return bad(e, "no mount table");
        size_t data = 0;
        for (size_t i = 0; i < n; i++) {
                int r = entry_check(&mounts[i], i, e);
                if (r < 0)
                        return r;
                if (mounts[i].kind == RT_MOUNT_FILE || mounts[i].kind == RT_MOUNT_COPY)
                        data += mounts[i].len;
        }
        if (data > RT_MOUNTS_DATA_MAX)
                return bad(e, "mount table: file contents too large (%zu > %u bytes)", data,
                           RT_MOUNTS_DATA_MAX);
        return 0;
}

unsigned rt_mount_attrs(unsigned flags) {
        return ((flags & RT_MOUNT_RO) ? MOUNT_ATTR_RDONLY : 0) |
               ((flags & RT_MOUNT_NOSUID) ? MOUNT_ATTR_NOSUID : 0) |
               ((flags & RT_MOUNT_NODEV) ? MOUNT_ATTR_NODEV : 0) |
               ((flags & RT_MOUNT_NOEXEC) ? MOUNT_ATTR_NOEXEC : 0);
}

bool rt_entry_same(const struct rt_entry *a, const struct rt_entry *b) {
        const struct rt_mount *x = &a->m, *y = &b->m;
        if (x->kind != y->kind || x->flags != y->flags || x->mode != y->mode ||
            x->size != y->size || x->len != y->len || !streq(x->target, y->target))
                return false;
        if (x->len && memcmp(x->data, y->data, x->len) != 0)
                return false;
        return x->kind != RT_MOUNT_BIND ||
               (a->dev == b->dev && a->ino == b->ino && a->type == b->type);
}

/* ---- encoding ---- */

struct buf {
        char *p;
        size_t len, cap;
};

static int put(struct buf *b, const void *s, size_t n) {
        if (n > RT_PARK_MAX || b->len + n > RT_PARK_MAX)
                return -E2BIG;
        if (b->len + n > b->cap) {
                size_t c = MAX(b->cap * 2, b->len + n + 4096);
                char *q = realloc(b->p, c);
                if (!q)
                        return -ENOMEM;
                b->p = q;
                b->cap = c;
        }
        if (n)
                memcpy(b->p + b->len, s, n);
        b->len += n;
        return 0;
}

static int put_str(struct buf *b, const char *s) {
        return put(b, s ? s : "", strlen(s ? s : "") + 1);
}

int rt_start_encode(const struct rt_start *s, char **ret, size_t *ret_len) {
        if (s->n_layers > RT_PARK_MAX_LAYERS || s->n_mounts > RT_TABLE_MAX ||
            s->n_fds > RT_START_FDS_MAX)
                return -E2BIG;
        if (s->scratch_fd >= 0 && (!s->scratch || (size_t) s->scratch_fd >= s->n_fds))
                return -EINVAL;
        struct rt_start_hdr h = {
                .magic = RT_START_MAGIC,
                .n_layers = (uint32_t) s->n_layers,
                .n_mounts = (uint32_t) s->n_mounts,
                .n_fds = (uint32_t) s->n_fds,
                .nofile = s->nofile,
                .scratch_fd = s->scratch_fd >= 0 ? (uint64_t) s->scratch_fd + 1 : 0,
        };
        struct buf b = {0};
        int r = put(&b, &h, sizeof(h));
        const char *strs[] = {s->hostname, s->upper, s->work, s->scratch, s->lowerdir};
        for (size_t i = 0; r >= 0 && i < ELEMENTSOF(strs); i++)
                r = put_str(&b, strs[i]);
        for (size_t i = 0; r >= 0 && i < s->n_layers; i++)
                r = put_str(&b, s->layers[i]);
        for (size_t i = 0; r >= 0 && i < s->n_mounts; i++) {
                const struct rt_entry *en = &s->mounts[i];
                const struct rt_mount *m = &en->m;
                struct rt_start_rec rec = {
                        .kind = (uint32_t) m->kind,
                        .flags = m->flags,
                        .mode = (uint32_t) m->mode,
                        .size = m->size,
                        .len = m->len,
                };
                if (m->kind == RT_MOUNT_BIND) {
                        if (m->source_fd < 0 || (size_t) m->source_fd >= s->n_fds) {
                                r = -EINVAL;
                                break;
                        }
                        rec.fd = (uint32_t) m->source_fd;
                        rec.dev = en->dev;
                        rec.ino = en->ino;
                        rec.type = en->type;
                }
                r = put(&b, &rec, sizeof(rec));
                if (r >= 0)
                        r = put_str(&b, m->target);
                if (r >= 0)
                        r = put(&b, m->data, m->len);
        }
        if (r < 0) {
                free(b.p);
                return r;
        }
        *ret = b.p;
        *ret_len = b.len;
        return 0;
}

/* ---- decoding (async-signal-safe) ---- */

/* The NUL-terminated string at *p, which must end before end. */
static const char *take_str(const char **p, const char *end) {
        const char *s = *p;
        const char *nul = s < end ? memchr(s, 0, (size_t) (end - s)) : NULL;
        if (!nul)
                return NULL;
        *p = nul + 1;
        return s;
}

int rt_start_decode(const char *buf, size_t len, const int *fds, size_t n_fds,
                    struct rt_start *out) {
        struct rt_start_hdr h;
        if (len < sizeof(h) || len > RT_PARK_MAX)
                return -EBADMSG;
        memcpy(&h, buf, sizeof(h));
        if (h.magic != RT_START_MAGIC || h.reserved || h.n_layers > RT_PARK_MAX_LAYERS ||
            h.n_mounts > RT_TABLE_MAX || h.n_fds != n_fds || n_fds > RT_START_FDS_MAX)
                return -EBADMSG;
        const char *p = buf + sizeof(h), *end = buf + len;
        out->nofile = h.nofile;
        out->scratch_fd = -EBADF;
        const char **strs[] = {&out->hostname, &out->upper, &out->work, &out->scratch,
                               &out->lowerdir};
        for (size_t i = 0; i < ELEMENTSOF(strs); i++)
                if (!(*strs[i] = take_str(&p, end)))
                        return -EBADMSG;
        if (!out->scratch[0])
                out->scratch = NULL;
        if (h.scratch_fd) {
                if (!out->scratch || h.scratch_fd > n_fds)
                        return -EBADMSG;
                out->scratch_fd = fds[h.scratch_fd - 1];
        }
        out->n_layers = h.n_layers;
        for (size_t i = 0; i < h.n_layers; i++)
                if (!(out->layers[i] = take_str(&p, end)))
                        return -EBADMSG;
        out->n_mounts = h.n_mounts;
        out->n_fds = n_fds;
        for (size_t i = 0; i < h.n_mounts; i++) {
                struct rt_start_rec rec;
                if ((size_t) (end - p) < sizeof(rec))
                        return -EBADMSG;
                memcpy(&rec, p, sizeof(rec));
                p += sizeof(rec);
                if (!kind_known(rec.kind) || rec.reserved)
                        return -EBADMSG;
                struct rt_entry *en = &out->mounts[i];
                memset(en, 0, sizeof(*en));
                en->m.kind = (enum rt_mount_kind) rec.kind;
                en->m.flags = rec.flags;
                en->m.mode = (mode_t) rec.mode;
                en->m.size = rec.size;
                en->m.source_fd = -EBADF;
                if (!(en->m.target = take_str(&p, end)) || en->m.target[0] != '/')
                        return -EBADMSG;
                if (rec.len > (uint64_t) (end - p))
                        return -EBADMSG;
                en->m.data = p;
                en->m.len = (size_t) rec.len;
                p += rec.len;
                if (en->m.kind == RT_MOUNT_BIND) {
                        if (rec.fd >= n_fds)
                                return -EBADMSG;
                        en->m.source_fd = fds[rec.fd];
                        en->dev = rec.dev;
                        en->ino = rec.ino;
                        en->type = rec.type;
                }
        }
        return p == end ? 0 : -EBADMSG;
}
