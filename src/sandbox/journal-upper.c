/* SPDX-License-Identifier: Apache-2.0 */
/* The journal's session with warren-upper: see journal-upper.h. */
#include "sandbox/journal-upper.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "basic/macro.h"
#include "priv/client.h"
#include "sandbox/sandbox-internal.h"

/* how long one answer may take: a walk of a large tree, or one write */
#define WALK_MS (300 * 1000)
#define OP_MS (60 * 1000)

int jup_open(struct sbx_manager *m, const struct sbx_upper_ref *ref, struct wr_err *e) {
        struct priv_target t = {
                .pid = ref->pid, .cgroup_mode = ref->cgroup_mode, .start_time = ref->start_time};
        memcpy(t.id, ref->id, sizeof(t.id));
        int sock = -EBADF;
        int r = priv_upper_session(m->priv, &t, &sock, NULL, e);
        return r < 0 ? r : sock;
}

int jup_walk(int sock, struct jt_tree *out, struct wr_err *e) {
        _cleanup_close_ int fd = memfd_create("warren-journal-walk", MFD_CLOEXEC);
        if (fd < 0)
                return err_set(e, -errno, "journal: memfd: %m");
        struct priv_upper_op op = {.op = PRIV_UPPER_OP_WALK};
        struct priv_upper_reply rep;
        int r = priv_upper_call(sock, &op, fd, WALK_MS, &rep, NULL, e);
        if (r < 0)
                return err_prefix(e, r, "journal: walk by warren-upper");
        struct stat st;
        if (fstat(fd, &st) < 0 || (uint64_t) st.st_size != rep.len)
                return err_set(e, -EPROTO, "journal: warren-upper's walk is not %llu bytes",
                               (unsigned long long) rep.len);
        uint8_t *buf = malloc(rep.len ? rep.len : 1);
        if (!buf)
                return err_set(e, -ENOMEM, "journal: out of memory");
        for (size_t off = 0; off < rep.len;) {
                ssize_t n = pread(fd, buf + off, rep.len - off, (off_t) off);
                if (n <= 0) {
                        free(buf);
                        return err_set(e, n < 0 ? -errno : -EIO, "journal: read the walk: %m");
                }
                off += (size_t) n;
        }
        r = jt_tree_decode(buf, rep.len, JT_WALK_MAX, out, e);
        free(buf);
        if (r < 0)
                return err_prefix(e, r, "journal: refused from warren-upper");
        if (out->n != rep.n || out->truncated != !!rep.truncated) {
                jt_tree_free(out);
                return err_set(e, -EPROTO,
                               "journal: warren-upper's walk disagrees with its answer");
        }
        return 0;
}

int jup_open_file(int sock, const char *path, struct wr_err *e) {
        struct priv_upper_op op = {.op = PRIV_UPPER_OP_OPEN};
        if (strlen(path) >= sizeof(op.path))
                return -ENAMETOOLONG;
        snprintf(op.path, sizeof(op.path), "%s", path);
        struct priv_upper_reply rep;
        int fd = -EBADF;
        int r = priv_upper_call(sock, &op, -1, OP_MS, &rep, &fd, e);
        return r < 0 ? r : fd;
}

static uint32_t id_inside(uint32_t id) {
        return id < PRIV_UPPER_IDS ? id : WR_ID_OVERFLOW;
}

int jup_op(int sock, uint32_t op, const char *path, const struct jt_attrs *a, const char *link,
           int src_fd, struct wr_err *e) {
        static _Thread_local struct priv_upper_op m;
        memset(&m, 0, sizeof(m));
        m.op = op;
        if (strlen(path) >= sizeof(m.path) || (link && strlen(link) >= sizeof(m.link)))
                return err_set(e, -ENAMETOOLONG, "/%s: name too long", path);
        snprintf(m.path, sizeof(m.path), "%s", path);
        if (op == PRIV_UPPER_OP_MKDIR || op == PRIV_UPPER_OP_ATTRS || op == PRIV_UPPER_OP_PUT)
                m.mode = a->mode & 07777;
        if (op != PRIV_UPPER_OP_REMOVE) {
                m.uid = id_inside(a->uid);
                m.gid = id_inside(a->gid);
        }
        if (op == PRIV_UPPER_OP_PUT)
                m.mtime_ns = a->mtime_ns > 0 ? a->mtime_ns : 0;
        if (op == PRIV_UPPER_OP_SYMLINK && link)
                snprintf(m.link, sizeof(m.link), "%s", link);
        struct priv_upper_reply rep;
        return priv_upper_call(sock, &m, op == PRIV_UPPER_OP_PUT ? src_fd : -1, OP_MS, &rep, NULL,
                               e);
}
