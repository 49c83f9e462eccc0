/* SPDX-License-Identifier: Apache-2.0 */
/* libFuzzer target for both directions of the warren-priv protocol:
 * priv_req_decode (what warren-priv, which keeps root, reads from warrend)
 * and priv_reply_decode (what warrend reads back). The first byte picks the
 * decoder and how many fds the datagram claims to carry (0..PRIV_FDS_MAX).
 * Whatever is accepted carries exactly the fds its type has (none but for
 * phase 2's configs, 1 + n_bind, SANDBOX_CREATED, 2, NET_CONNECTED, 1,
 * phase 3's HELPER_START, 1..6 by kind and flags, UNPACK_START, 2, and
 * HELPER_STARTED, 1; phase 5's LAYER_COMMIT and LAYER_REMOVE none, their
 * names single components of the store's forms), has its paths confined and its table names warren's (re-checked),
 * and re-encodes to the same bytes; every refusal carries a message. (The
 * configs' blob: fuzz-priv-cfg.) A first byte of 0xf0 or more picks phase
 * 4b's priv_upper_msg_decode (what warren-priv reads from warren-upper,
 * which has read a sandbox's files) with its low two bits as the fd count;
 * 0xf4..0xf7 phase 4b-2's priv_upper_op_decode (what warren-upper reads
 * from warrend in a journal session) and 0xf8..0xfb its
 * priv_upper_reply_decode (what warrend reads back), the same way. (The
 * journal's walk on the wire: fuzz-journal-walk.) Phase 5's volume files:
 * VOLFILE_OPEN/OP/LIST carry exactly 1 fd (the paths' memfd), their volume
 * path confined to volumes/, their temp names of the put form; 0xfc..0xfd
 * priv_volfile_paths_decode (the memfd's bytes) and 0xfe..0xff
 * vol_files_decode (a listing warrend reads back). */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "priv/priv-proto.h"
#include "volume/volume.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static uint8_t out[PRIV_MSG_MAX];
static struct priv_req req;
static struct priv_reply rep;

/* ---- phase 3: the network ---- */

static int net_reply_encode(void) {
        if (rep.hdr.type == PRIV_NET_CONNECTED)
                return priv_net_connected_encode(rep.hdr.id, &rep.net_connected, out, sizeof(out));
        if (rep.hdr.type != PRIV_NFT_NAMES || rep.nft_names.n > PRIV_NFT_NAMES_MAX)
                abort();
        for (uint32_t i = 0; i < rep.nft_names.n; i++)
                if (!priv_nft_table_ok(rep.nft_names.names[i]))
                        abort();
        return priv_nft_names_encode(rep.hdr.id, &rep.nft_names, out, sizeof(out));
}

static int net_req_encode(void) {
        struct wr_err ee = {0};
        switch (req.hdr.type) {
        case PRIV_NFT_TABLE_APPLY: {
                const struct priv_nft_apply *a = &req.nft_apply;
                if (!priv_nft_table_ok(a->table) || strncmp(a->table, "warren", 6) != 0 ||
                    a->prefix < 8 || a->prefix > 28 || (a->base >> 24) == 127)
                        abort();
                return priv_nft_apply_encode(req.hdr.id, a->table, a->base, (uint8_t) a->prefix,
                                             a->proxy_port, a->dns_port, out, sizeof(out), &ee);
        }
        case PRIV_NFT_CLASS_SET: {
                const struct priv_nft_class *c = &req.nft_class;
                if (!priv_nft_table_ok(c->table) || c->from > 2 || c->to > 2 || c->addr == 0)
                        abort();
                return priv_nft_class_encode(req.hdr.id, c->table, c->addr, c->from, c->to, out,
                                             sizeof(out), &ee);
        }
        case PRIV_NFT_TABLES:
                return priv_nft_tables_encode(req.hdr.id, out, sizeof(out));
        case PRIV_NFT_TABLE_REMOVE:
                if (!priv_nft_table_ok(req.nft_table.table))
                        abort();
                return priv_nft_remove_encode(req.hdr.id, req.nft_table.table, out, sizeof(out),
                                              &ee);
        case PRIV_NET_CONNECT: {
                const struct priv_net_connect *c = &req.net_connect;
                if (c->port == 0 || c->addr == 0 || c->t.pid <= 1 || c->t.start_time == 0)
                        abort();
                return priv_net_connect_encode(req.hdr.id, &c->t, c->addr, c->port, out,
                                               sizeof(out), &ee);
        }
        }
        abort();
}

/* ---- phase 3: volumes and spawn-beside (types 19..22) ---- */

static bool volssh_req(uint32_t t) {
        return t >= PRIV_VOLUME_MOUNT && t <= PRIV_SSH_DIR_PREPARE;
}

static int volssh_req_encode(void) {
        struct wr_err ee = {0};
        switch (req.hdr.type) {
        case PRIV_VOLUME_MOUNT:
        case PRIV_VOLUME_UNMOUNT: {
                const char *p = req.volume.path;
                /* volumes/<env>/<name>: three components, no . or .., no
                 * leading dot, no symlink-free guarantee needed here */
                int slashes = 0;
                for (const char *c = p; *c; c++)
                        slashes += *c == '/';
                if (strncmp(p, "volumes/", 8) != 0 || slashes != 2 || strstr(p, "/.") ||
                    strstr(p, "//") || (req.hdr.type == PRIV_VOLUME_UNMOUNT && req.volume.flags) ||
                    (req.volume.flags & ~PRIV_VOLUME_FLAGS))
                        abort();
                return priv_volume_encode(req.hdr.id, req.hdr.type, p, req.volume.flags, out,
                                          sizeof(out), &ee);
        }
        case PRIV_SANDBOX_SPAWN_BESIDE: {
                const struct priv_spawn_beside *s = &req.spawn;
                if (s->uid == 0 || s->gid == 0 || s->t.pid <= 1 || s->t.start_time == 0 ||
                    (s->kind != PRIV_BESIDE_SSH_AGENT && s->kind != PRIV_BESIDE_SSH_ADD))
                        abort();
                return priv_spawn_beside_encode(req.hdr.id, &s->t, s->kind, s->uid, s->gid, out,
                                                sizeof(out), &ee);
        }
        case PRIV_SSH_DIR_PREPARE:
                if (req.ssh_dir.uid_slot < -1 || req.ssh_dir.uid_slot >= (int32_t) PRIV_UID_SLOTS ||
                    strchr(req.ssh_dir.id, '/') || req.ssh_dir.id[0] == '.')
                        abort();
                return priv_ssh_dir_encode(req.hdr.id, req.ssh_dir.id, req.ssh_dir.uid_slot, out,
                                           sizeof(out), &ee);
        }
        abort();
}

static int volssh_reply_encode(void) {
        if (rep.hdr.type == PRIV_VOLUME_MOUNTED)
                return priv_volume_mounted_encode(rep.hdr.id, &rep.volume_mounted, out,
                                                  sizeof(out));
        if (rep.hdr.type == PRIV_SPAWNED && rep.spawned.pid > 1)
                return priv_spawned_encode(rep.hdr.id, &rep.spawned, out, sizeof(out));
        abort();
}

/* ---- phase 4b: the upper-dir reader ---- */

static int upper_reply_encode(void) {
        return priv_upper_packed_encode(rep.hdr.id, &rep.upper_packed, out, sizeof(out));
}

static int upper_req_encode(void) {
        struct wr_err ee = {0};
        const struct priv_upper_pack *u = &req.upper_pack;
        if (u->t.pid <= 1 || u->t.start_time == 0 || u->flags || u->reserved)
                abort();
        return priv_upper_pack_encode(req.hdr.id, &u->t, out, sizeof(out), &ee);
}

/* warren-upper's datagrams: accepted => the fds its kind has, the fields
 * that must be zero zero, a message only with an error. */
static void upper_msg_one(const uint8_t *data, size_t size, size_t n_fds) {
        static struct priv_upper_msg m;
        struct wr_err e = {0};
        int r = priv_upper_msg_decode(data, size, n_fds, &m, &e);
        if (r < 0) {
                if (e.msg[0] == '\0')
                        abort();
                return;
        }
        if (size != sizeof(m) || memcmp(&m, data, size) != 0 || m.magic != PRIV_UPPER_MAGIC ||
            m.err < 0 || m.err > 4095 || m.reserved || m.msg[sizeof(m.msg) - 1])
                abort();
        if (m.kind == PRIV_UPPER_Q_OPAQUE
                    ? n_fds != 1 || m.err || m.entries || m.msg[0]
                    : m.kind != PRIV_UPPER_Q_DONE || n_fds != 0 || (!m.err && m.msg[0]))
                abort();
}

/* ---- phase 4b-2: the journal's session ---- */

static int session_req_encode(void) {
        struct wr_err ee = {0};
        const struct priv_upper_session *u = &req.upper_session;
        if (u->t.pid <= 1 || u->t.start_time == 0 || u->flags || u->reserved)
                abort();
        return priv_upper_session_encode(req.hdr.id, &u->t, out, sizeof(out), &ee);
}

static int session_reply_encode(void) {
        if (rep.upper_started.pid <= 1 || rep.upper_started.reserved)
                abort();
        return priv_upper_started_encode(rep.hdr.id, &rep.upper_started, out, sizeof(out));
}

/* A confined session path (any byte but NUL and '/'), re-checked. */
static bool session_path_ok(const char *p) {
        size_t n = strlen(p);
        if (n == 0 || p[0] == '/' || p[n - 1] == '/' || strstr(p, "//"))
                return false;
        char buf[PRIV_UPPER_PATH_MAX + 2];
        snprintf(buf, sizeof(buf), "/%s/", p);
        return !strstr(buf, "/../") && !strstr(buf, "/./");
}

/* A session request: accepted => its kind's fds, a confined path (none
 * for WALK), ids inside, only its kind's fields, the same bytes again. */
static void session_op_one(const uint8_t *data, size_t size, size_t n_fds) {
        static struct priv_upper_op m, again;
        struct wr_err e = {0};
        int r = priv_upper_op_decode(data, size, n_fds, &m, &e);
        if (r < 0) {
                if (e.msg[0] == '\0')
                        abort();
                return;
        }
        bool walk = m.op == PRIV_UPPER_OP_WALK, put = m.op == PRIV_UPPER_OP_PUT;
        if (size != sizeof(m) || memcmp(&m, data, size) != 0 || n_fds != (size_t) (walk || put) ||
            (walk ? m.path[0] != 0 : !session_path_ok(m.path)) || m.uid >= PRIV_UPPER_IDS ||
            m.gid >= PRIV_UPPER_IDS || m.mode > 07777 || (!put && m.mtime_ns) ||
            (m.op != PRIV_UPPER_OP_SYMLINK && m.link[0]))
                abort();
        if (priv_upper_op_encode(&m, &again, &e) < 0 || memcmp(&again, data, size) != 0)
                abort();
}

/* An answer of warren-upper: accepted => OPENED alone carries an fd, an
 * error only on DONE, WALKED's fields only on WALKED. */
static void session_reply_one(const uint8_t *data, size_t size, size_t n_fds) {
        static struct priv_upper_reply m;
        struct wr_err e = {0};
        int r = priv_upper_reply_decode(data, size, n_fds, &m, &e);
        if (r < 0) {
                if (e.msg[0] == '\0')
                        abort();
                return;
        }
        if (size != sizeof(m) || memcmp(&m, data, size) != 0 ||
            n_fds != (size_t) (m.kind == PRIV_UPPER_R_OPENED) || m.err < 0 || m.err > 4095 ||
            (m.err && m.kind != PRIV_UPPER_R_DONE) || (!m.err && m.msg[0]) ||
            m.msg[sizeof(m.msg) - 1] ||
            (m.kind != PRIV_UPPER_R_WALKED && (m.len || m.n || m.truncated)) ||
            m.len > PRIV_UPPER_WALK_MAX)
                abort();
}

/* ---- phase 3: the helpers ---- */

/* The fds an accepted HELPER_START / UNPACK_START must carry; -1 for the
 * other types. */
static long helper_req_fds(void) {
        if (req.hdr.type == PRIV_UNPACK_START)
                return 2;
        if (req.hdr.type != PRIV_HELPER_START)
                return -1;
        const struct priv_helper_start *h = &req.helper;
        long want =
                h->kind == PRIV_HELPER_SIGNER   ? 2
                : h->kind == PRIV_HELPER_EGRESS ? 4 + !!(h->flags & PRIV_HELPER_F_SIGNER) +
                                                          !!(h->flags & PRIV_HELPER_F_UPSTREAM_CA)
                : h->kind == PRIV_HELPER_FETCH ? 1 + !!(h->flags & PRIV_HELPER_F_REGISTRY_CONFIG) +
                                                         !!(h->flags & PRIV_HELPER_F_DOCKER_CONFIG)
                                               : -2;
        if (want < 0 || (long) priv_helper_fds(h->kind, h->flags) != want)
                abort();
        return want;
}

/* An accepted helper request re-checked and re-encoded. */
static int helper_req_encode(void) {
        struct wr_err ee = {0};
        if (req.hdr.type == PRIV_UNPACK_START) {
                const char *d = req.unpack.dir;
                if (priv_path_check(d, PRIV_ROOT_LAYERS, &ee) < 0 ||
                    strncmp(d, "layers/tmp/", 11) != 0 || strchr(d + 11, '/') ||
                    !strcmp(d + 11, "..") || !strcmp(d + 11, ".") || req.unpack.flags)
                        abort();
                return priv_unpack_start_encode(req.hdr.id, d, out, sizeof(out), &ee);
        }
        const struct priv_helper_start *h = &req.helper;
        if (h->kind == PRIV_HELPER_SIGNER &&
            (h->role < 1 || h->role > 3 || h->n_deny_ports || h->upstream_port))
                abort();
        /* warren-fetch: flags only, no role, no egress field */
        if (h->kind == PRIV_HELPER_FETCH &&
            (h->role || h->n_deny_ports || h->upstream_family || h->upstream_port ||
             h->deny_ports[0] || h->upstream_addr[0] ||
             (h->flags & ~(PRIV_HELPER_F_REGISTRY_CONFIG | PRIV_HELPER_F_DOCKER_CONFIG |
                           PRIV_HELPER_F_LOOPBACK_ONLY))))
                abort();
        if (h->kind == PRIV_HELPER_EGRESS &&
            (h->role || h->n_deny_ports > PRIV_HELPER_DENY_PORTS_MAX || h->upstream_port == 0 ||
             (h->upstream_family != 4 && h->upstream_family != 6)))
                abort();
        for (uint32_t i = 0; i < PRIV_HELPER_DENY_PORTS_MAX; i++)
                if ((i < h->n_deny_ports) != (h->deny_ports[i] != 0))
                        abort();
        return priv_helper_start_encode(req.hdr.id, h, out, sizeof(out), &ee);
}

/* ---- phase 5: layer storage ---- */

/* A name the decoder let through: one component, no "..", its form
 * (re-checked by hand, not by the function the decoder used). */
static void layer_name_check(const char *name, bool tmp) {
        size_t n = strlen(name);
        if (strchr(name, '/') || strstr(name, "..") || n == 0)
                abort();
        if (tmp ? !((n == 23 && !strncmp(name, "unpack-", 7)) || (n == 20 && !strncmp(name, "del-", 4)))
                : n != PRIV_LAYER_HEX)
                abort();
        for (const char *c = tmp ? strchr(name, '-') + 1 : name; *c; c++)
                if (!((*c >= '0' && *c <= '9') || (*c >= 'a' && *c <= 'f')))
                        abort();
}

/* An accepted LAYER_COMMIT / LAYER_REMOVE re-checked and re-encoded. */
static int layer_req_encode(void) {
        struct wr_err ee = {0};
        if (req.hdr.type == PRIV_LAYER_COMMIT) {
                if (req.layer_commit.flags || req.layer_commit.reserved)
                        abort();
                layer_name_check(req.layer_commit.tmp, true);
                layer_name_check(req.layer_commit.hex, false);
                return priv_layer_commit_encode(req.hdr.id, req.layer_commit.tmp,
                                                req.layer_commit.hex, out, sizeof(out), &ee);
        }
        const struct priv_layer_remove *m = &req.layer_remove;
        if ((m->dir != PRIV_LAYER_DIR_TMP && m->dir != PRIV_LAYER_DIR_SHA256) || m->reserved)
                abort();
        layer_name_check(m->name, m->dir == PRIV_LAYER_DIR_TMP);
        return priv_layer_remove_encode(req.hdr.id, m->dir, m->name, out, sizeof(out), &ee);
}

/* ---- phase 5: volume files ---- */

/* A path the file API accepts: relative, no ".." component, no NUL or
 * newline (re-checked by hand). */
static void vol_path_recheck(const char *p, size_t n) {
        if ((n && p[0] == '/') || memchr(p, 0, n) || memchr(p, '\n', n))
                abort();
        for (size_t i = 0; i + 1 < n + 1;) {
                const char *sl = memchr(p + i, '/', n - i);
                size_t k = sl ? (size_t) (sl - (p + i)) : n - i;
                if (k == 2 && p[i] == '.' && p[i + 1] == '.')
                        abort();
                i += k + 1;
        }
}

/* An accepted VOLFILE request re-checked and re-encoded. */
static int volfile_req_encode(void) {
        struct wr_err ee = {0};
        const struct priv_volfile *v = &req.volfile;
        const char *env = v->vol + 8, *sl = strchr(env, '/');
        if (strncmp(v->vol, "volumes/", 8) != 0 || !sl || sl == env || !sl[1] ||
            strchr(sl + 1, '/') || env[0] == '.' || sl[1] == '.' ||
            v->path_len > PRIV_VOLFILE_PATH_MAX || v->after_len > PRIV_VOLFILE_PATH_MAX)
                abort();
        bool tmp = v->op == PRIV_VOLFILE_COMMIT || v->op == PRIV_VOLFILE_ABORT;
        if (tmp != (v->tmp[0] != 0) || (tmp && (strncmp(v->tmp, "put-", 4) || strlen(v->tmp) != 20)))
                abort();
        return priv_volfile_encode(req.hdr.id, req.hdr.type, v, out, sizeof(out), &ee);
}

static int volfile_reply_encode(void) {
        switch (rep.hdr.type) {
        case PRIV_VOLFILE_OPENED:
                return priv_volfile_opened_encode(rep.hdr.id, &rep.volfile_opened, out,
                                                  sizeof(out));
        case PRIV_VOLFILE_STATED:
                return priv_volfile_stated_encode(rep.hdr.id, &rep.volfile_stated, out,
                                                  sizeof(out));
        default:
                return priv_volfile_listed_encode(rep.hdr.id, &rep.volfile_listed, out,
                                                  sizeof(out));
        }
}

/* 0xfc, 0xfd: a VOLFILE request's memfd (priv_volfile_paths_decode): a
 * struct priv_volfile, then the memfd's bytes. Accepted: exactly
 * path_len + after_len, both paths the file API's. */
static void volfile_paths_one(const uint8_t *d, size_t n) {
        static struct priv_volfile v;
        static char path[PRIV_VOLFILE_PATH_MAX + 1], after[PRIV_VOLFILE_PATH_MAX + 1];
        if (n < sizeof(v))
                return;
        memcpy(&v, d, sizeof(v));
        struct wr_err e = {0};
        if (priv_volfile_paths_decode(&v, d + sizeof(v), n - sizeof(v), path, after, &e) < 0) {
                if (!e.msg[0])
                        abort();
                return;
        }
        if (n - sizeof(v) != (size_t) v.path_len + v.after_len)
                abort();
        vol_path_recheck(path, strlen(path));
        vol_path_recheck(after, strlen(after));
        if (strlen(path) != v.path_len || strlen(after) != v.after_len)
                abort();
}

/* 0xfe, 0xff: a listing (vol_files_decode, what warrend reads from
 * VOLFILE_LISTED's memfd): 2 bytes of n, then the bytes. Accepted:
 * ordered, confined paths, never a directory, re-encodes to the same
 * bytes. */
static void volfile_list_one(const uint8_t *d, size_t n) {
        if (n < 2)
                return;
        size_t cnt = (size_t) d[0] | ((size_t) d[1] << 8);
        struct vol_file *files = NULL;
        struct wr_err e = {0};
        if (vol_files_decode(d + 2, n - 2, cnt, "", &files, &e) < 0) {
                if (!e.msg[0])
                        abort();
                return;
        }
        for (size_t i = 0; i < cnt; i++) {
                vol_path_recheck(files[i].path, strlen(files[i].path));
                if (files[i].kind == VOL_FILE_DIRECTORY ||
                    (i && vol_path_cmp(files[i - 1].path, files[i].path) >= 0))
                        abort();
        }
        void *buf = NULL;
        size_t len = 0;
        if (vol_files_encode(files, cnt, &buf, &len) == 0 &&
            (len != n - 2 || memcmp(buf, d + 2, len) != 0))
                abort();
        free(buf);
        vol_files_free(files, cnt);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        if (size < 1)
                return 0;
        uint8_t sel = data[0];
        if (sel >= 0xf0) {
                if (sel < 0xf4)
                        upper_msg_one(data + 1, size - 1, sel & 3);
                else if (sel < 0xf8)
                        session_op_one(data + 1, size - 1, sel & 3);
                else if (sel < 0xfc)
                        session_reply_one(data + 1, size - 1, sel & 3);
                else if (sel < 0xfe) /* phase 5, volume files */
                        volfile_paths_one(data + 1, size - 1);
                else
                        volfile_list_one(data + 1, size - 1);
                return 0;
        }
        size_t n_fds = (size_t) ((sel >> 1) % (PRIV_FDS_MAX + 1));
        data++;
        size--;
        uint8_t *buf = malloc(size ? size : 1);
        if (!buf)
                return 0;
        memcpy(buf, data, size);
        struct wr_err e = {0};
        if (sel & 1) {
                int r = priv_reply_decode(buf, size, n_fds, &rep, &e);
                if (r == 0) {
                        if (n_fds != priv_type_fds(rep.hdr.type))
                                abort();
                        bool created = rep.hdr.type == PRIV_SANDBOX_CREATED;
                        int n = created ? priv_created_encode(rep.hdr.id, &rep.created, out,
                                                              sizeof(out))
                                : rep.hdr.type == PRIV_RESULT
                                        ? priv_result_encode(rep.hdr.id, &rep.result, out,
                                                             sizeof(out))
                                : rep.hdr.type == PRIV_HELLO_REPLY
                                        ? priv_hello_reply_encode(rep.hdr.id, &rep.hello, out,
                                                                  sizeof(out))
                                : rep.hdr.type == PRIV_VOLUME_MOUNTED ||
                                                rep.hdr.type == PRIV_SPAWNED
                                        ? volssh_reply_encode()
                                : rep.hdr.type >= PRIV_VOLFILE_OPENED &&
                                                rep.hdr.type <= PRIV_VOLFILE_LISTED
                                        ? volfile_reply_encode() /* phase 5 */
                                : rep.hdr.type == PRIV_UPPER_PACKED ? upper_reply_encode()
                                : rep.hdr.type == PRIV_UPPER_SESSION_STARTED
                                        ? session_reply_encode()
                                : rep.hdr.type == PRIV_HELPER_STARTED /* phase 3 */
                                        ? (rep.helper_started.pid <= 1 ||
                                                           rep.helper_started.start_time == 0
                                                   ? (abort(), 0)
                                                   : priv_helper_started_encode(rep.hdr.id,
                                                                                &rep.helper_started,
                                                                                out, sizeof(out)))
                                        : net_reply_encode();
                        if (n != (int) size || memcmp(out, buf, size) != 0)
                                abort();
                } else if (e.msg[0] == '\0') {
                        abort();
                }
        } else {
                int r = priv_req_decode(buf, size, n_fds, &req, &e);
                if (r == 0) {
                        struct wr_err ee = {0};
                        int n = -1;
                        uint32_t ty = req.hdr.type;
                        bool cfg = ty == PRIV_SANDBOX_CREATE || ty == PRIV_SANDBOX_PRESTART ||
                                   ty == PRIV_SANDBOX_START;
                        long hfds = helper_req_fds(); /* phase 3, the helpers */
                        if (n_fds != (cfg         ? 1 + (size_t) req.cfg.n_bind
                                      : hfds >= 0 ? (size_t) hfds
                                                  : priv_type_fds(ty)))
                                abort();
                        if (volssh_req(ty) && n_fds != (ty == PRIV_SANDBOX_SPAWN_BESIDE ? 4 : 0))
                                abort();
                        switch (req.hdr.type) {
                        /* phase 2 */
                        case PRIV_SANDBOX_CREATE:
                        case PRIV_SANDBOX_PRESTART:
                        case PRIV_SANDBOX_START:
                                if (req.cfg.n_bind > req.cfg.n_mounts ||
                                    req.cfg.n_mounts > PRIV_BIND_MAX || req.cfg.blob_len == 0)
                                        abort();
                                n = priv_sandbox_cfg_encode(req.hdr.id, ty, &req.cfg, out,
                                                            sizeof(out), &ee);
                                break;
                        case PRIV_SANDBOX_DESTROY:
                                if ((req.destroy.t.pid == 0) != (req.destroy.t.start_time == 0) ||
                                    req.destroy.t.pid == 1 || req.destroy.t.pid < 0)
                                        abort();
                                if (req.destroy.peer[0] &&
                                    strncmp(req.destroy.peer, PRIV_LINK_PREFIX,
                                            strlen(PRIV_LINK_PREFIX)) != 0)
                                        abort();
                                n = priv_destroy_encode(req.hdr.id, &req.destroy, out, sizeof(out),
                                                        &ee);
                                break;
                        case PRIV_SANDBOX_ATTACH:
                        case PRIV_CTL_CONNECT:
                                if (req.target.pid <= 1 || req.target.start_time == 0)
                                        abort();
                                n = priv_target_encode(req.hdr.id, ty, &req.target, out,
                                                       sizeof(out), &ee);
                                break;
                        case PRIV_HELLO:
                                n = priv_hello_encode(req.hdr.id, out, sizeof(out));
                                break;
                        case PRIV_SANDBOX_CLEANUP:
                                if (priv_path_check(req.cleanup.dir, PRIV_ROOT_SANDBOXES, &ee) <
                                            0 ||
                                    req.cleanup.dir[0] == '/' || strstr(req.cleanup.dir, "/../") ||
                                    strstr(req.cleanup.dir, "/./") ||
                                    strstr(req.cleanup.dir, "//") ||
                                    strncmp(req.cleanup.dir, "sandboxes/", 10) != 0)
                                        abort();
                                n = priv_cleanup_encode(req.hdr.id, req.cleanup.id, req.cleanup.dir,
                                                        req.cleanup.cgroup_mode, out, sizeof(out),
                                                        &ee);
                                break;
                        case PRIV_LINK_DELETE:
                                if (strncmp(req.link.name, PRIV_LINK_PREFIX,
                                            strlen(PRIV_LINK_PREFIX)) != 0)
                                        abort();
                                n = priv_link_delete_encode(req.hdr.id, req.link.name, out,
                                                            sizeof(out), &ee);
                                break;
                        case PRIV_SANDBOX_SIGNAL:
                                if (req.signal.t.pid <= 1 || req.signal.t.start_time == 0)
                                        abort();
                                n = priv_signal_encode(req.hdr.id, &req.signal.t, req.signal.signo,
                                                       out, sizeof(out), &ee);
                                break;
                        case PRIV_SANDBOX_FREEZE:
                                if (req.freeze.t.pid <= 1 || req.freeze.t.start_time == 0)
                                        abort();
                                n = priv_freeze_encode(req.hdr.id, &req.freeze.t,
                                                       req.freeze.on != 0, out, sizeof(out), &ee);
                                break;
                        case PRIV_UPPER_PACK:
                                n = upper_req_encode();
                                break;
                        case PRIV_UPPER_SESSION: /* phase 4b-2 */
                                n = session_req_encode();
                                break;
                        case PRIV_HELPER_START:
                        case PRIV_UNPACK_START:
                                n = helper_req_encode();
                                break;
                        case PRIV_LAYER_COMMIT: /* phase 5 */
                        case PRIV_LAYER_REMOVE:
                                n = layer_req_encode();
                                break;
                        case PRIV_VOLFILE_OPEN: /* phase 5, volume files */
                        case PRIV_VOLFILE_OP:
                        case PRIV_VOLFILE_LIST:
                                n = volfile_req_encode();
                                break;
                        default:
                                n = volssh_req(ty) ? volssh_req_encode() : net_req_encode();
                        }
                        if (n != (int) size || memcmp(out, buf, size) != 0)
                                abort();
                } else if (e.msg[0] == '\0') {
                        abort();
                }
        }
        free(buf);
        return 0;
}
