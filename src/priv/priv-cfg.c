/* SPDX-License-Identifier: Apache-2.0 */
/* The variable part of a sandbox config for warren-priv (priv-cfg.h). */
#include "priv/priv-cfg.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

_Static_assert(PRIV_BIND_MAX == RT_MOUNTS_MAX, "one fd per possible BIND entry");
_Static_assert(sizeof(struct priv_mount_rec) == 32, "no padding");

#define HOSTNAME_MAX 64
#define RESOLV_MAX (64u << 10)
#define TARGET_MAX 4096

/* A string at blob[*off..): its NUL within len, at most max bytes. */
static const char *take_str(const char *blob, size_t len, size_t *off, size_t max) {
        if (*off >= len)
                return NULL;
        const char *s = blob + *off;
        const char *nul = memchr(s, 0, len - *off);
        if (!nul || (size_t) (nul - s) > max)
                return NULL;
        *off += (size_t) (nul - s) + 1;
        return s;
}

int priv_cfg_decode(const struct priv_sandbox_cfg *c, const void *blob, size_t len,
                    struct priv_cfg_view *out, struct wr_err *e) {
        const char *b = blob;
        size_t off = 0;
        memset(out, 0, sizeof(*out));
        if (len != c->blob_len)
                return err_set(e, -EINVAL, "config: blob of %zu bytes, the header says %u", len,
                               c->blob_len);
        const char *h = take_str(b, len, &off, HOSTNAME_MAX);
        if (!h)
                return err_set(e, -EINVAL, "config: hostname is not a string of <= %d bytes",
                               HOSTNAME_MAX);
        out->hostname = h[0] ? h : NULL;
        const char *rc = take_str(b, len, &off, RESOLV_MAX);
        if (!rc)
                return err_set(e, -EINVAL, "config: resolv.conf is not a string of <= %u bytes",
                               RESOLV_MAX);
        if (!(c->flags & PRIV_CFG_RESOLV) && rc[0])
                return err_set(e, -EINVAL, "config: resolv.conf without its flag");
        out->resolv_conf = c->flags & PRIV_CFG_RESOLV ? rc : NULL;
        for (uint32_t i = 0; i < c->n_layers; i++) {
                const char *l = take_str(b, len, &off, PRIV_PATH_MAX - 1);
                if (!l)
                        return err_set(e, -EINVAL, "config: layer %u is not a string", i);
                struct wr_err pe = {0};
                int r = priv_path_check(l, PRIV_ROOT_LAYERS, &pe);
                if (r < 0)
                        return err_set(e, r, "config: layer %u: %s", i, pe.msg);
                out->layers[out->n_layers++] = l;
        }
        size_t data_total = 0;
        for (uint32_t i = 0; i < c->n_mounts; i++) {
                struct priv_mount_rec rec;
                if (len - off < sizeof(rec))
                        return err_set(e, -EINVAL, "config: mount %u: short record", i);
                memcpy(&rec, b + off, sizeof(rec));
                off += sizeof(rec);
                if (rec.kind < RT_MOUNT_BIND || rec.kind > RT_MOUNT_COPY)
                        return err_set(e, -EINVAL, "config: mount %u: kind %u", i, rec.kind);
                if (rec.flags & ~(uint32_t) (RT_MOUNT_RO | RT_MOUNT_NOSUID | RT_MOUNT_NODEV |
                                             RT_MOUNT_NOEXEC | RT_MOUNT_IDMAP))
                        return err_set(e, -EINVAL, "config: mount %u: flags 0x%x", i, rec.flags);
                if (rec.mode > 07777 || rec.reserved)
                        return err_set(e, -EINVAL, "config: mount %u: mode %o or reserved set", i,
                                       rec.mode);
                bool has_data = rec.kind == RT_MOUNT_FILE || rec.kind == RT_MOUNT_COPY;
                if ((!has_data && rec.len) || (rec.kind != RT_MOUNT_TMPFS && rec.size))
                        return err_set(e, -EINVAL,
                                       "config: mount %u: data or size where none "
                                       "belongs",
                                       i);
                if (rec.len > RT_MOUNT_DATA_MAX || (data_total += rec.len) > RT_MOUNTS_DATA_MAX)
                        return err_set(e, -EINVAL, "config: mount %u: too much data", i);
                const char *t = take_str(b, len, &off, TARGET_MAX);
                if (!t || t[0] != '/')
                        return err_set(e, -EINVAL,
                                       "config: mount %u: target is not an absolute "
                                       "path of <= %d bytes",
                                       i, TARGET_MAX);
                if (len - off < rec.len)
                        return err_set(e, -EINVAL, "config: mount %u: data past the end", i);
                struct priv_cfg_mount *m = &out->mounts[out->n_mounts++];
                m->kind = rec.kind;
                m->flags = rec.flags;
                m->mode = rec.mode;
                m->size = rec.size;
                m->target = t;
                m->data = has_data ? b + off : NULL;
                m->len = (size_t) rec.len;
                off += (size_t) rec.len;
                out->n_bind += rec.kind == RT_MOUNT_BIND;
        }
        if (out->n_bind != c->n_bind)
                return err_set(e, -EINVAL, "config: %zu BIND entries, the header says %u",
                               out->n_bind, c->n_bind);
        if (off != len)
                return err_set(e, -EINVAL, "config: %zu bytes after the last record", len - off);
        return 0;
}

/* ---- warrend's side ---- */

struct buf {
        uint8_t *p;
        size_t n, cap;
};

static int put(struct buf *b, const void *d, size_t n) {
        if (b->n + n > PRIV_CFG_BLOB_MAX)
                return -E2BIG;
        if (b->n + n > b->cap) {
                size_t cap = b->cap ? b->cap : 4096;
                while (cap < b->n + n)
                        cap *= 2;
                uint8_t *p = realloc(b->p, cap);
                if (!p)
                        return -ENOMEM;
                b->p = p;
                b->cap = cap;
        }
        if (n)
                memcpy(b->p + b->n, d, n);
        b->n += n;
        return 0;
}

static int put_str(struct buf *b, const char *s) {
        return put(b, s ? s : "", s ? strlen(s) + 1 : 1);
}

/* path below <state_dir>/: its relative rest, or NULL */
static const char *below(const char *path, const char *state_dir) {
        size_t sl = strlen(state_dir);
        if (!path || strncmp(path, state_dir, sl) != 0 || path[sl] != '/')
                return NULL;
        return path + sl + 1;
}

int priv_cfg_encode(const struct rt_sandbox_config *cfg, const char *state_dir,
                    struct priv_sandbox_cfg *out, uint8_t **ret_blob, size_t *ret_len,
                    struct wr_err *e) {
        memset(out, 0, sizeof(*out));
        *ret_blob = NULL;
        *ret_len = 0;
        if (!cfg->id || strlen(cfg->id) >= sizeof(out->id))
                return err_set(e, -EINVAL, "warren-priv config: bad sandbox id");
        char want[PRIV_PATH_MAX];
        snprintf(want, sizeof(want), "%s/%s", PRIV_ROOT_SANDBOXES, cfg->id);
        const char *rel = below(cfg->dir, state_dir);
        if (!rel || strcmp(rel, want) != 0)
                return err_set(e, -EINVAL, "warren-priv config: dir %s is not %s/%s", cfg->dir,
                               state_dir, want);
        memcpy(out->id, cfg->id, strlen(cfg->id));
        out->memory_bytes = cfg->limits.memory_bytes;
        out->tmp_bytes = cfg->limits.tmp_bytes;
        out->disk_bytes = cfg->limits.disk_bytes;
        out->cpu_millicores = cfg->limits.cpu_millicores;
        out->pids_max = cfg->limits.pids_max;
        out->nofile = cfg->limits.nofile;
        out->cgroup_mode = (uint32_t) cfg->cgroup_mode;
        out->uid_base = cfg->uid_base;
        out->uid_count = cfg->uid_count;
        if (cfg->unlimited)
                out->flags |= PRIV_CFG_UNLIMITED;
        if (cfg->disk_template_dir) {
                const char *t = below(cfg->disk_template_dir, state_dir);
                if (!t || strcmp(t, "disk-templates") != 0)
                        return err_set(e, -EINVAL,
                                       "warren-priv config: disk templates %s are not "
                                       "%s/disk-templates",
                                       cfg->disk_template_dir, state_dir);
                out->flags |= PRIV_CFG_DISK_TEMPLATE;
        }
        if (cfg->net) {
                out->flags |= PRIV_CFG_NET;
                snprintf(out->net_peer, sizeof(out->net_peer), "%s", cfg->net->peer);
                out->net_addr = cfg->net->addr;
                out->net_gateway = cfg->net->gateway;
                out->net_prefix = cfg->net->prefix;
        }
        if (cfg->resolv_conf)
                out->flags |= PRIV_CFG_RESOLV;
        if (cfg->n_layers > PRIV_LAYERS_MAX || cfg->n_mounts > PRIV_BIND_MAX)
                return err_set(e, -E2BIG, "warren-priv config: %zu layers, %zu mounts",
                               cfg->n_layers, cfg->n_mounts);
        out->n_layers = (uint32_t) cfg->n_layers;
        out->n_mounts = (uint32_t) cfg->n_mounts;
        struct buf b = {0};
        int r = put_str(&b, cfg->hostname);
        if (r >= 0)
                r = put_str(&b, cfg->resolv_conf);
        for (size_t i = 0; r >= 0 && i < cfg->n_layers; i++) {
                const char *l = below(cfg->layers[i], state_dir);
                if (!l || strncmp(l, PRIV_ROOT_LAYERS "/", strlen(PRIV_ROOT_LAYERS) + 1) != 0) {
                        free(b.p);
                        return err_set(
                                e, -EINVAL,
                                "warren-priv config: layer %s is not below %s/" PRIV_ROOT_LAYERS,
                                cfg->layers[i], state_dir);
                }
                r = put_str(&b, l);
        }
        for (size_t i = 0; r >= 0 && i < cfg->n_mounts; i++) {
                const struct rt_mount *m = &cfg->mounts[i];
                struct priv_mount_rec rec = {
                        .kind = (uint32_t) m->kind,
                        .flags = m->flags,
                        .mode = (uint32_t) m->mode,
                        .size = m->kind == RT_MOUNT_TMPFS ? m->size : 0,
                        .len = m->kind == RT_MOUNT_FILE || m->kind == RT_MOUNT_COPY ? m->len : 0,
                };
                out->n_bind += m->kind == RT_MOUNT_BIND;
                if ((r = put(&b, &rec, sizeof(rec))) >= 0 && (r = put_str(&b, m->target)) >= 0)
                        r = put(&b, m->data, (size_t) rec.len);
        }
        if (r < 0) {
                free(b.p);
                return err_set(e, r, "warren-priv config: %s", strerror(-r));
        }
        out->blob_len = (uint32_t) b.n;
        *ret_blob = b.p;
        *ret_len = b.n;
        return 0;
}

int priv_cfg_bind_open(const struct rt_sandbox_config *cfg, int *fds, size_t *ret_n,
                       struct wr_err *e) {
        size_t n = 0;
        for (size_t i = 0; i < cfg->n_mounts; i++) {
                const struct rt_mount *m = &cfg->mounts[i];
                if (m->kind != RT_MOUNT_BIND)
                        continue;
                int fd = m->source ? open(m->source, O_PATH | O_NOFOLLOW | O_CLOEXEC)
                                   : fcntl(m->source_fd, F_DUPFD_CLOEXEC, 3);
                if (fd < 0) {
                        int r = -errno;
                        for (size_t k = 0; k < n; k++)
                                close(fds[k]);
                        return err_set(e, r, "mount %zu (%s): bind source %s: %s", i, m->target,
                                       m->source ? m->source : "fd", strerror(-r));
                }
                fds[n++] = fd;
        }
        *ret_n = n;
        return 0;
}
