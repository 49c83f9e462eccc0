/* SPDX-License-Identifier: Apache-2.0 */
/* The warren-priv protocol's table, decoders and encoders (priv-proto.h). */
#include "priv/priv-proto.h"

#include <errno.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "basic/relpath.h"
#include "volume/volume.h"

/* The closed message set: each type, its payload size, the fds it
 * carries and which direction it goes. */
struct priv_msg_spec {
        uint32_t type;
        const char *name;
        uint32_t len;
        uint32_t n_fds;
        bool request;
        uint32_t n_fds_max; /* > n_fds: up to this many (the decoder checks the exact count) */
};

static const struct priv_msg_spec table[] = {
        {PRIV_HELLO, "HELLO", 0, 0, true},
        {PRIV_SANDBOX_CLEANUP, "SANDBOX_CLEANUP", sizeof(struct priv_cleanup), 0, true},
        {PRIV_LINK_DELETE, "LINK_DELETE", sizeof(struct priv_link), 0, true},
        {PRIV_SANDBOX_SIGNAL, "SANDBOX_SIGNAL", sizeof(struct priv_signal), 0, true},
        {PRIV_SANDBOX_FREEZE, "SANDBOX_FREEZE", sizeof(struct priv_freeze), 0, true},
        /* phase 2: the sandbox lifecycle */
        {PRIV_SANDBOX_CREATE, "SANDBOX_CREATE", sizeof(struct priv_sandbox_cfg), 1, true,
         1 + PRIV_BIND_MAX},
        {PRIV_SANDBOX_PRESTART, "SANDBOX_PRESTART", sizeof(struct priv_sandbox_cfg), 1, true,
         1 + PRIV_BIND_MAX},
        {PRIV_SANDBOX_START, "SANDBOX_START", sizeof(struct priv_sandbox_cfg), 1, true,
         1 + PRIV_BIND_MAX},
        {PRIV_SANDBOX_DESTROY, "SANDBOX_DESTROY", sizeof(struct priv_destroy), 0, true},
        {PRIV_SANDBOX_ATTACH, "SANDBOX_ATTACH", sizeof(struct priv_target), 0, true},
        {PRIV_CTL_CONNECT, "CTL_CONNECT", sizeof(struct priv_target), 0, true},
        {PRIV_SANDBOX_CREATED, "SANDBOX_CREATED", sizeof(struct priv_created), 2, false},
        {PRIV_RESULT, "RESULT", sizeof(struct priv_result), 0, false},
        {PRIV_HELLO_REPLY, "HELLO_REPLY", sizeof(struct priv_hello_reply), 0, false},
        /* phase 3, the network */
        {PRIV_NFT_TABLE_APPLY, "NFT_TABLE_APPLY", sizeof(struct priv_nft_apply), 0, true},
        {PRIV_NFT_CLASS_SET, "NFT_CLASS_SET", sizeof(struct priv_nft_class), 0, true},
        {PRIV_NFT_TABLES, "NFT_TABLES", 0, 0, true},
        {PRIV_NFT_TABLE_REMOVE, "NFT_TABLE_REMOVE", sizeof(struct priv_nft_table), 0, true},
        {PRIV_NET_CONNECT, "NET_CONNECT", sizeof(struct priv_net_connect), 0, true},
        {PRIV_NFT_NAMES, "NFT_NAMES", sizeof(struct priv_nft_names), 0, false},
        {PRIV_NET_CONNECTED, "NET_CONNECTED", sizeof(struct priv_net_connected), 1, false},
        /* phase 3, volumes and spawn-beside */
        {PRIV_VOLUME_MOUNT, "VOLUME_MOUNT", sizeof(struct priv_volume), 0, true},
        {PRIV_VOLUME_UNMOUNT, "VOLUME_UNMOUNT", sizeof(struct priv_volume), 0, true},
        {PRIV_SANDBOX_SPAWN_BESIDE, "SANDBOX_SPAWN_BESIDE", sizeof(struct priv_spawn_beside),
         PRIV_SPAWN_FDS, true},
        {PRIV_SSH_DIR_PREPARE, "SSH_DIR_PREPARE", sizeof(struct priv_ssh_dir), 0, true},
        {PRIV_VOLUME_MOUNTED, "VOLUME_MOUNTED", sizeof(struct priv_volume_mounted), 1, false},
        {PRIV_SPAWNED, "SPAWNED", sizeof(struct priv_spawned), 1, false},
        /* phase 4b, the upper-dir reader */
        {PRIV_UPPER_PACK, "UPPER_PACK", sizeof(struct priv_upper_pack), 1, true},
        {PRIV_UPPER_PACKED, "UPPER_PACKED", sizeof(struct priv_upper_packed), 0, false},
        /* phase 4b-2, the journal's session */
        {PRIV_UPPER_SESSION, "UPPER_SESSION", sizeof(struct priv_upper_session), 0, true},
        {PRIV_UPPER_SESSION_STARTED, "UPPER_SESSION_STARTED", sizeof(struct priv_upper_started), 1,
         false},
        /* phase 3, the helpers (the exact fd count of a HELPER_START
         * depends on its kind and flags: helper_check) */
        {PRIV_HELPER_START, "HELPER_START", sizeof(struct priv_helper_start), 1, true,
         PRIV_HELPER_FDS_MAX},
        {PRIV_UNPACK_START, "UNPACK_START", sizeof(struct priv_unpack_start), 2, true},
        {PRIV_HELPER_STARTED, "HELPER_STARTED", sizeof(struct priv_helper_started), 1, false},
        /* phase 5, layer storage */
        {PRIV_LAYER_COMMIT, "LAYER_COMMIT", sizeof(struct priv_layer_commit), 0, true},
        {PRIV_LAYER_REMOVE, "LAYER_REMOVE", sizeof(struct priv_layer_remove), 0, true},
        /* phase 5, volume files (each request: the memfd of its paths) */
        {PRIV_VOLFILE_OPEN, "VOLFILE_OPEN", sizeof(struct priv_volfile), 1, true},
        {PRIV_VOLFILE_OP, "VOLFILE_OP", sizeof(struct priv_volfile), 1, true},
        {PRIV_VOLFILE_LIST, "VOLFILE_LIST", sizeof(struct priv_volfile), 1, true},
        {PRIV_VOLFILE_OPENED, "VOLFILE_OPENED", sizeof(struct priv_volfile_opened), 1, false},
        {PRIV_VOLFILE_STATED, "VOLFILE_STATED", sizeof(struct priv_volfile_stated), 0, false},
        {PRIV_VOLFILE_LISTED, "VOLFILE_LISTED", sizeof(struct priv_volfile_listed), 1, false},
};

_Static_assert(sizeof(struct priv_hdr) + sizeof(struct priv_cleanup) <= PRIV_MSG_MAX,
               "a cleanup fits a datagram");
_Static_assert(sizeof(struct priv_hdr) + sizeof(struct priv_result) <= PRIV_MSG_MAX,
               "a result fits a datagram");
_Static_assert(PRIV_REQ_TYPES <= PRIV_SERVED_MAX, "HELLO_REPLY counts every request type");
_Static_assert(sizeof(struct priv_sandbox_cfg) == 176 && sizeof(struct priv_destroy) == 112 &&
                       sizeof(struct priv_created) == 40 && sizeof(struct priv_target) == 88,
               "phase 2: no padding: every byte is checked");
_Static_assert(1 + PRIV_BIND_MAX <= PRIV_FDS_MAX, "a config's fds fit one datagram");
_Static_assert(sizeof(struct priv_signal) == 96 && sizeof(struct priv_freeze) == 96,
               "no padding: every byte is checked");
_Static_assert(sizeof(struct priv_nft_apply) == PRIV_NFT_TABLE_MAX + 16 &&
                       sizeof(struct priv_nft_class) == PRIV_NFT_TABLE_MAX + 16 &&
                       sizeof(struct priv_net_connect) == sizeof(struct priv_target) + 8 &&
                       sizeof(struct priv_net_connected) == 32 &&
                       sizeof(struct priv_nft_names) ==
                               32 + PRIV_NFT_NAMES_MAX * PRIV_NFT_TABLE_MAX &&
                       sizeof(struct priv_hello_reply) == 8 + 8 * PRIV_SERVED_MAX + 24,
               "no padding: every byte is checked");
_Static_assert(sizeof(struct priv_hdr) + sizeof(struct priv_nft_names) <= PRIV_MSG_MAX,
               "NFT_NAMES fits a datagram");
_Static_assert(sizeof(struct priv_helper_start) == 80 &&
                       sizeof(struct priv_unpack_start) == PRIV_PATH_MAX + 8 &&
                       sizeof(struct priv_helper_started) == 40 &&
                       PRIV_HELPER_FDS_MAX <= PRIV_FDS_MAX,
               "phase 3, helpers: no padding: every byte is checked");

_Static_assert(sizeof(struct priv_volume) == PRIV_PATH_MAX + 8 &&
                       sizeof(struct priv_volume_mounted) == 32 &&
                       sizeof(struct priv_spawn_beside) == sizeof(struct priv_target) + 16 &&
                       sizeof(struct priv_spawned) == 32 &&
                       sizeof(struct priv_ssh_dir) == PRIV_ID_MAX + 8,
               "phase 3 (volumes, spawn-beside): no padding: every byte is checked");
_Static_assert(PRIV_SPAWN_FDS <= PRIV_FDS_MAX, "a spawn's fds fit one datagram");
_Static_assert(sizeof(struct priv_upper_pack) == sizeof(struct priv_target) + 8 &&
                       sizeof(struct priv_upper_packed) == 64 &&
                       sizeof(struct priv_upper_msg) == 56 + PRIV_ERRMSG_MAX,
               "phase 4b: no padding: every byte is checked");
_Static_assert(sizeof(struct priv_upper_session) == sizeof(struct priv_target) + 8 &&
                       sizeof(struct priv_upper_started) == 32 &&
                       sizeof(struct priv_upper_op) == 32 + 2 * PRIV_UPPER_PATH_MAX &&
                       sizeof(struct priv_upper_reply) == 32 + PRIV_ERRMSG_MAX,
               "phase 4b-2: no padding: every byte is checked");

_Static_assert(sizeof(struct priv_layer_commit) == 2 * PRIV_LAYER_NAME_MAX + 8 &&
                       sizeof(struct priv_layer_remove) == PRIV_LAYER_NAME_MAX + 8,
               "phase 5, layers: no padding: every byte is checked");

static const struct priv_msg_spec *spec_of(uint32_t type) {
        for (size_t i = 0; i < sizeof(table) / sizeof(table[0]); i++)
                if (table[i].type == type)
                        return &table[i];
        return NULL;
}

const char *priv_type_name(uint32_t type) {
        const struct priv_msg_spec *s = spec_of(type);
        return s ? s->name : NULL;
}

/* A NUL-terminated string in a fixed field, zeros after the NUL. Its
 * length, or -1. */
static long field_str(const char *f, size_t size) {
        const char *nul = memchr(f, 0, size);
        if (!nul)
                return -1;
        for (const char *p = nul; p < f + size; p++)
                if (*p)
                        return -1;
        return nul - f;
}

static bool all_zero(const void *p, size_t n) {
        const unsigned char *c = p;
        for (size_t i = 0; i < n; i++)
                if (c[i])
                        return false;
        return true;
}

/* rt_id_valid's rule: [A-Za-z0-9][A-Za-z0-9_.-]{0,63} */
static bool id_ok(const char *s, long n) {
        if (n < 1 || n > 64)
                return false;
        for (long i = 0; i < n; i++) {
                char c = s[i];
                bool alnum =
                        (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
                if (!alnum && (i == 0 || (c != '_' && c != '.' && c != '-')))
                        return false;
        }
        return true;
}

static bool link_ok(const char *s, long n) {
        size_t pl = strlen(PRIV_LINK_PREFIX);
        if (n <= (long) pl || n > 15 || strncmp(s, PRIV_LINK_PREFIX, pl) != 0)
                return false;
        for (long i = 0; i < n; i++) {
                char c = s[i];
                bool alnum =
                        (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
                if (!alnum && c != '_' && c != '.' && c != '-')
                        return false;
        }
        return true;
}

int priv_path_check(const char *path, const char *root, struct wr_err *e) {
        size_t n = strlen(path);
        if (n == 0)
                return err_set(e, -EACCES, "path is empty");
        if (n >= PRIV_PATH_MAX)
                return err_set(e, -EACCES, "path is longer than %u bytes", PRIV_PATH_MAX - 1);
        if (path[0] == '/')
                return err_set(e, -EACCES,
                               "path %.64s is absolute (must be relative to the state dir)", path);
        for (size_t i = 0; i < n; i++)
                if ((unsigned char) path[i] < 0x20 || path[i] == 0x7f)
                        return err_set(e, -EACCES, "path holds a control byte");
        size_t ncomp = 0;
        for (const char *p = path; *p;) {
                const char *slash = strchr(p, '/');
                size_t cl = slash ? (size_t) (slash - p) : strlen(p);
                if (cl == 0)
                        return err_set(e, -EACCES, "path %.64s has an empty component", path);
                if ((cl == 1 && p[0] == '.') || (cl == 2 && p[0] == '.' && p[1] == '.'))
                        return err_set(e, -EACCES, "path %.64s has a \".\" or \"..\" component",
                                       path);
                if (ncomp == 0 && (cl != strlen(root) || strncmp(p, root, cl) != 0))
                        return err_set(e, -EACCES, "path %.64s is not under %s/", path, root);
                ncomp++;
                if (!slash)
                        break;
                p = slash + 1;
                if (!*p)
                        return err_set(e, -EACCES, "path %.64s ends in '/'", path);
        }
        if (ncomp < 2)
                return err_set(e, -EACCES, "path %.64s names %s/ itself, not a file below it", path,
                               root);
        return 0;
}

/* A priv_target's fields (the decoder's and the encoders' check). */
static int target_check(const struct priv_target *t, const char *what, struct wr_err *e) {
        long n = field_str(t->id, sizeof(t->id));
        if (n < 0 || !id_ok(t->id, n))
                return err_set(e, -EINVAL, "%s: bad sandbox id", what);
        if (t->pid <= 1)
                return err_set(e, -EINVAL, "%s: pid %d (a sandbox's init is > 1)", what, t->pid);
        if (t->start_time == 0)
                return err_set(e, -EINVAL, "%s: no start time (a reused pid would pass)", what);
        if (t->cgroup_mode > 2)
                return err_set(e, -EINVAL, "%s: cgroup mode %u", what, t->cgroup_mode);
        return 0;
}

/* ---- phase 2: the lifecycle's fixed structs ---- */

/* A SANDBOX_CREATE/PRESTART/START config (its fixed part; the blob is
 * priv-cfg.c's) that arrived with n_fds fds. */
static int cfg_check(const struct priv_sandbox_cfg *c, const char *what, size_t n_fds,
                     struct wr_err *e) {
        long n = field_str(c->id, sizeof(c->id));
        if (n < 0 || !id_ok(c->id, n))
                return err_set(e, -EINVAL, "%s: bad sandbox id", what);
        if (c->cgroup_mode > 2)
                return err_set(e, -EINVAL, "%s: cgroup mode %u", what, c->cgroup_mode);
        if (c->flags & ~PRIV_CFG_FLAGS)
                return err_set(e, -EINVAL, "%s: unknown flags 0x%x", what, c->flags);
        if (!all_zero(c->reserved, sizeof(c->reserved)))
                return err_set(e, -EINVAL, "%s: reserved field set", what);
        if (c->flags & PRIV_CFG_NET) {
                long pl = field_str(c->net_peer, sizeof(c->net_peer));
                if (pl < 0 || !link_ok(c->net_peer, pl))
                        return err_set(e, -EINVAL, "%s: the veth is not a warren link name", what);
                if (c->net_prefix < 1 || c->net_prefix > 31)
                        return err_set(e, -EINVAL, "%s: net prefix %u (1..31)", what,
                                       c->net_prefix);
        } else if (!all_zero(c->net_peer, sizeof(c->net_peer)) || c->net_addr || c->net_gateway ||
                   c->net_prefix) {
                return err_set(e, -EINVAL, "%s: net fields without the NET flag", what);
        }
        if (c->uid_count ? c->uid_base == 0 || c->uid_base > UINT32_MAX - c->uid_count
                         : c->uid_base != 0)
                return err_set(e, -EINVAL, "%s: uid range %u+%u", what, c->uid_base, c->uid_count);
        if (c->n_layers > PRIV_LAYERS_MAX || c->n_mounts > PRIV_BIND_MAX || c->n_bind > c->n_mounts)
                return err_set(e, -EINVAL, "%s: %u layers, %u mounts, %u binds", what, c->n_layers,
                               c->n_mounts, c->n_bind);
        if (c->blob_len == 0 || c->blob_len > PRIV_CFG_BLOB_MAX)
                return err_set(e, -EINVAL, "%s: blob of %u bytes (1..%u)", what, c->blob_len,
                               PRIV_CFG_BLOB_MAX);
        if (n_fds != 1 + (size_t) c->n_bind)
                return err_set(e, -EPROTO, "%s: %zu fds (must be 1 + %u binds)", what, n_fds,
                               c->n_bind);
        return 0;
}

static int destroy_check(const struct priv_destroy *d, struct wr_err *e) {
        const struct priv_target *t = &d->t;
        if (t->pid == 0 && t->start_time == 0) {
                /* not known: checked as a target without them */
                struct priv_target c = *t;
                c.pid = 2;
                c.start_time = 1;
                int r = target_check(&c, "SANDBOX_DESTROY", e);
                if (r < 0)
                        return r;
        } else {
                int r = target_check(t, "SANDBOX_DESTROY", e);
                if (r < 0)
                        return r;
        }
        long pl = field_str(d->peer, sizeof(d->peer));
        if (pl < 0 || (pl > 0 && !link_ok(d->peer, pl)))
                return err_set(e, -EINVAL, "SANDBOX_DESTROY: peer is not a warren link name");
        if (d->keep_link > 1)
                return err_set(e, -EINVAL, "SANDBOX_DESTROY: keep_link = %u (0 or 1)",
                               d->keep_link);
        if (d->reserved)
                return err_set(e, -EINVAL, "SANDBOX_DESTROY: reserved field set");
        return 0;
}

/* Header and table checks shared by both directions. */
static int frame_check(const void *buf, size_t len, size_t n_fds, bool request,
                       struct priv_hdr *hdr, const struct priv_msg_spec **ret, struct wr_err *e) {
        memset(hdr, 0, sizeof(*hdr));
        if (len < sizeof(struct priv_hdr))
                return err_set(e, -EPROTO, "short datagram (%zu bytes)", len);
        if (len > PRIV_MSG_MAX)
                return err_set(e, -EPROTO, "datagram of %zu bytes (at most %u)", len, PRIV_MSG_MAX);
        struct priv_hdr h;
        memcpy(&h, buf, sizeof(h));
        if (h.magic != PRIV_MAGIC)
                return err_set(e, -EPROTO, "bad magic 0x%08x", h.magic);
        *hdr = h;
        if (h.reserved)
                return err_set(e, -EPROTO, "reserved header bits set");
        const struct priv_msg_spec *s = spec_of(h.type);
        if (!s || s->request != request)
                return err_set(e, -EPROTO, "unknown %s type 0x%x", request ? "request" : "reply",
                               h.type);
        if (h.len != len - sizeof(h))
                return err_set(e, -EPROTO, "%s: header says %u payload bytes, datagram has %zu",
                               s->name, h.len, len - sizeof(h));
        if (h.len != s->len)
                return err_set(e, -EPROTO, "%s: payload of %u bytes (must be %u)", s->name, h.len,
                               s->len);
        if (n_fds < s->n_fds || n_fds > (s->n_fds_max > s->n_fds ? s->n_fds_max : s->n_fds))
                return err_set(e, -EPROTO, "%s: %zu fds (must be %u)", s->name, n_fds, s->n_fds);
        *ret = s;
        return 0;
}

/* ---- phase 3: the network ---- */

bool priv_nft_table_ok(const char *name) {
        static const char base[] = "warren";
        size_t n = strnlen(name, PRIV_NFT_TABLE_MAX);
        if (n >= PRIV_NFT_TABLE_MAX || strncmp(name, base, sizeof(base) - 1) != 0)
                return false;
        if (n == sizeof(base) - 1)
                return true;
        if (name[sizeof(base) - 1] != '_' || n < sizeof(base) + 1 || n > sizeof(base) + 40)
                return false;
        for (size_t i = sizeof(base); i < n; i++) {
                char c = name[i];
                if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                      c == '_'))
                        return false;
        }
        return true;
}

/* A table name field: one NUL-padded string priv_nft_table_ok accepts. */
static int table_field(const char *f, const char *what, struct wr_err *e) {
        if (field_str(f, PRIV_NFT_TABLE_MAX) < 0 || !priv_nft_table_ok(f))
                return err_set(e, -EINVAL,
                               "%s: not a warren table name (warren or warren_[A-Za-z0-9_]{1,40})",
                               what);
        return 0;
}

/* An address (host order) that names one host: not 0.0.0.0/8 ("this
 * network"), nor 224.0.0.0/3 (multicast, reserved, broadcast). */
static bool host_addr_ok(uint32_t a) {
        return (a >> 24) != 0 && (a >> 29) != 7;
}

int priv_nft_apply_check(const struct priv_nft_apply *a, struct wr_err *e) {
        int r = table_field(a->table, "NFT_TABLE_APPLY", e);
        if (r < 0)
                return r;
        if (a->prefix < PRIV_NFT_PREFIX_MIN || a->prefix > PRIV_NFT_PREFIX_MAX)
                return err_set(e, -EINVAL, "NFT_TABLE_APPLY: prefix /%u (/%u../%u)", a->prefix,
                               PRIV_NFT_PREFIX_MIN, PRIV_NFT_PREFIX_MAX);
        uint32_t mask = ~0u << (32 - a->prefix);
        if (a->base & ~mask)
                return err_set(e, -EINVAL, "NFT_TABLE_APPLY: range base has host bits set");
        if (!host_addr_ok(a->base) || (a->base >> 24) == 127)
                return err_set(e, -EINVAL,
                               "NFT_TABLE_APPLY: range in 0/8, 127/8 or 224/3 (not a sandbox "
                               "range)");
        if ((a->proxy_port == 0) != (a->dns_port == 0))
                return err_set(e, -EINVAL,
                               "NFT_TABLE_APPLY: proxy port %u, dns port %u (both or neither)",
                               a->proxy_port, a->dns_port);
        if (a->reserved)
                return err_set(e, -EINVAL, "NFT_TABLE_APPLY: reserved field set");
        return 0;
}

static int nft_class_check(const struct priv_nft_class *c, struct wr_err *e) {
        int r = table_field(c->table, "NFT_CLASS_SET", e);
        if (r < 0)
                return r;
        if (!host_addr_ok(c->addr) || (c->addr >> 24) == 127)
                return err_set(e, -EINVAL, "NFT_CLASS_SET: address 0x%08x is not a sandbox's",
                               c->addr);
        if (c->from > 2 || c->to > 2)
                return err_set(e, -EINVAL, "NFT_CLASS_SET: class %u -> %u (0..2)", c->from, c->to);
        if (c->reserved)
                return err_set(e, -EINVAL, "NFT_CLASS_SET: reserved field set");
        return 0;
}

static int net_connect_check(const struct priv_net_connect *c, struct wr_err *e) {
        int r = target_check(&c->t, "NET_CONNECT", e);
        if (r < 0)
                return r;
        if (!host_addr_ok(c->addr))
                return err_set(e, -EINVAL, "NET_CONNECT: address 0x%08x is not one host's",
                               c->addr);
        if (c->port == 0)
                return err_set(e, -EINVAL, "NET_CONNECT: port 0");
        if (c->reserved)
                return err_set(e, -EINVAL, "NET_CONNECT: reserved field set");
        return 0;
}

static int net_req_decode(const char *p, struct priv_req *out, struct wr_err *e) {
        switch (out->hdr.type) {
        case PRIV_NFT_TABLE_APPLY:
                memcpy(&out->nft_apply, p, sizeof(out->nft_apply));
                return priv_nft_apply_check(&out->nft_apply, e);
        case PRIV_NFT_CLASS_SET:
                memcpy(&out->nft_class, p, sizeof(out->nft_class));
                return nft_class_check(&out->nft_class, e);
        case PRIV_NFT_TABLES:
                return 0;
        case PRIV_NFT_TABLE_REMOVE:
                memcpy(&out->nft_table, p, sizeof(out->nft_table));
                return table_field(out->nft_table.table, "NFT_TABLE_REMOVE", e);
        case PRIV_NET_CONNECT:
                memcpy(&out->net_connect, p, sizeof(out->net_connect));
                return net_connect_check(&out->net_connect, e);
        }
        return err_set(e, -EPROTO, "unknown request type 0x%x", out->hdr.type); /* not reached */
}

static int net_reply_decode(const char *p, struct priv_reply *out, struct wr_err *e) {
        if (out->hdr.type == PRIV_NET_CONNECTED) {
                struct priv_net_connected *c = &out->net_connected;
                memcpy(c, p, sizeof(*c));
                if (c->connected > 1 || c->reserved)
                        return err_set(e, -EINVAL, "NET_CONNECTED: connected %u, reserved %u",
                                       c->connected, c->reserved);
                return 0;
        }
        struct priv_nft_names *nn = &out->nft_names;
        memcpy(nn, p, sizeof(*nn));
        if (nn->n > PRIV_NFT_NAMES_MAX || nn->truncated > 1)
                return err_set(e, -EINVAL, "NFT_NAMES: %u names, truncated %u", nn->n,
                               nn->truncated);
        for (uint32_t i = 0; i < PRIV_NFT_NAMES_MAX; i++) {
                if (i < nn->n ? table_field(nn->names[i], "NFT_NAMES", e) < 0
                              : !all_zero(nn->names[i], PRIV_NFT_TABLE_MAX))
                        return err_set(e, -EINVAL, "NFT_NAMES: name %u is not a warren table's", i);
        }
        return 0;
}

/* ---- phase 3: volumes and spawn-beside ---- */

/* A volume name component: [A-Za-z0-9][A-Za-z0-9._-]{0,62} (vol_name_valid) */
static bool vol_comp_ok(const char *s, size_t n) {
        return n >= 1 && n <= 63 && id_ok(s, (long) n);
}

int priv_volume_path_check(const char *path, struct wr_err *e) {
        int r = priv_path_check(path, PRIV_ROOT_VOLUMES, e);
        if (r < 0)
                return r;
        const char *env = path + strlen(PRIV_ROOT_VOLUMES) + 1;
        const char *slash = strchr(env, '/');
        if (!slash || strchr(slash + 1, '/'))
                return err_set(e, -EACCES, "path %.64s is not " PRIV_ROOT_VOLUMES "/<env>/<name>",
                               path);
        if (!vol_comp_ok(env, (size_t) (slash - env)) || !vol_comp_ok(slash + 1, strlen(slash + 1)))
                return err_set(e, -EACCES, "path %.64s: <env> and <name> must be volume names",
                               path);
        return 0;
}

static int volume_check(const struct priv_volume *v, uint32_t type, struct wr_err *e) {
        const char *what = priv_type_name(type);
        if (field_str(v->path, sizeof(v->path)) < 0)
                return err_set(e, -EINVAL, "%s: path is not one NUL-padded string", what);
        struct wr_err pe = {0};
        int r = priv_volume_path_check(v->path, &pe);
        if (r < 0)
                return err_set(e, r, "%s: %s", what, pe.msg);
        if (v->flags & ~(type == PRIV_VOLUME_MOUNT ? PRIV_VOLUME_FLAGS : 0u))
                return err_set(e, -EINVAL, "%s: unknown flags 0x%x", what, v->flags);
        if (v->reserved)
                return err_set(e, -EINVAL, "%s: reserved field set", what);
        return 0;
}

static int spawn_check(const struct priv_spawn_beside *s, struct wr_err *e) {
        int r = target_check(&s->t, "SANDBOX_SPAWN_BESIDE", e);
        if (r < 0)
                return r;
        if (s->kind != PRIV_BESIDE_SSH_AGENT && s->kind != PRIV_BESIDE_SSH_ADD)
                return err_set(e, -EINVAL, "SANDBOX_SPAWN_BESIDE: unknown kind %u", s->kind);
        if (s->uid == 0 || s->gid == 0 || s->uid == UINT32_MAX || s->gid == UINT32_MAX)
                return err_set(e, -EINVAL, "SANDBOX_SPAWN_BESIDE: uid %u gid %u (never root)",
                               s->uid, s->gid);
        if (s->reserved)
                return err_set(e, -EINVAL, "SANDBOX_SPAWN_BESIDE: reserved field set");
        return 0;
}

static int ssh_dir_check(const struct priv_ssh_dir *d, struct wr_err *e) {
        long n = field_str(d->id, sizeof(d->id));
        if (n < 0 || !id_ok(d->id, n))
                return err_set(e, -EINVAL, "SSH_DIR_PREPARE: bad sandbox id");
        if (d->uid_slot < -1 || d->uid_slot >= (int32_t) PRIV_UID_SLOTS)
                return err_set(e, -EINVAL, "SSH_DIR_PREPARE: uid slot %d (-1..%u)", d->uid_slot,
                               PRIV_UID_SLOTS - 1);
        if (d->reserved)
                return err_set(e, -EINVAL, "SSH_DIR_PREPARE: reserved field set");
        return 0;
}

static int volssh_req_decode(const char *p, struct priv_req *out, struct wr_err *e) {
        switch (out->hdr.type) {
        case PRIV_VOLUME_MOUNT:
        case PRIV_VOLUME_UNMOUNT:
                memcpy(&out->volume, p, sizeof(out->volume));
                return volume_check(&out->volume, out->hdr.type, e);
        case PRIV_SANDBOX_SPAWN_BESIDE:
                memcpy(&out->spawn, p, sizeof(out->spawn));
                return spawn_check(&out->spawn, e);
        case PRIV_SSH_DIR_PREPARE:
                memcpy(&out->ssh_dir, p, sizeof(out->ssh_dir));
                return ssh_dir_check(&out->ssh_dir, e);
        }
        return err_set(e, -EPROTO, "not a volume or spawn request");
}

static int volssh_reply_decode(const char *p, struct priv_reply *out, struct wr_err *e) {
        if (out->hdr.type == PRIV_VOLUME_MOUNTED) {
                memcpy(&out->volume_mounted, p, sizeof(out->volume_mounted));
                if (!all_zero(out->volume_mounted.reserved, sizeof(out->volume_mounted.reserved)))
                        return err_set(e, -EINVAL, "VOLUME_MOUNTED: reserved field set");
                return 0;
        }
        memcpy(&out->spawned, p, sizeof(out->spawned));
        if (out->spawned.pid <= 1 || out->spawned.reserved)
                return err_set(e, -EINVAL, "SPAWNED: pid %d, reserved %u", out->spawned.pid,
                               out->spawned.reserved);
        return 0;
}

/* ---- phase 4b: the upper-dir reader ---- */

static int put(uint64_t id, uint32_t type, const void *payload, size_t plen, void *buf,
               size_t size);
static int target_copy(const struct priv_target *t, struct priv_target *out, const char *what,
                       struct wr_err *e);

static int upper_req_decode(const char *p, struct priv_req *out, struct wr_err *e) {
        struct priv_upper_pack *u = &out->upper_pack;
        memcpy(u, p, sizeof(*u));
        int r = target_check(&u->t, "UPPER_PACK", e);
        if (r < 0)
                return r;
        if (u->flags || u->reserved)
                return err_set(e, -EINVAL, "UPPER_PACK: flags 0x%x, reserved %u (both 0)", u->flags,
                               u->reserved);
        return 0;
}

int priv_upper_msg_decode(const void *buf, size_t len, size_t n_fds, struct priv_upper_msg *out,
                          struct wr_err *e) {
        memset(out, 0, sizeof(*out));
        if (len != sizeof(*out))
                return err_set(e, -EPROTO, "warren-upper: datagram of %zu bytes (must be %zu)", len,
                               sizeof(*out));
        struct priv_upper_msg m;
        memcpy(&m, buf, sizeof(m));
        if (m.magic != PRIV_UPPER_MAGIC)
                return err_set(e, -EPROTO, "warren-upper: bad magic 0x%08x", m.magic);
        if (m.kind != PRIV_UPPER_Q_OPAQUE && m.kind != PRIV_UPPER_Q_DONE)
                return err_set(e, -EPROTO, "warren-upper: unknown kind %u", m.kind);
        size_t want = m.kind == PRIV_UPPER_Q_OPAQUE ? 1 : 0;
        if (n_fds != want)
                return err_set(e, -EPROTO, "warren-upper: %zu fds (must be %zu)", n_fds, want);
        if (m.reserved)
                return err_set(e, -EINVAL, "warren-upper: reserved field set");
        if (m.err < 0 || m.err > 4095)
                return err_set(e, -EINVAL, "warren-upper: errno %d", m.err);
        long n = field_str(m.msg, sizeof(m.msg));
        if (n < 0)
                return err_set(e, -EINVAL, "warren-upper: msg is not one NUL-padded string");
        if (m.kind == PRIV_UPPER_Q_OPAQUE &&
            (m.err || n || m.entries || m.bytes || m.whiteouts || m.opaque || m.skipped))
                return err_set(e, -EINVAL, "warren-upper: OPAQUE with fields set");
        if (m.kind == PRIV_UPPER_Q_DONE && !m.err && n)
                return err_set(e, -EINVAL, "warren-upper: a message without an error");
        *out = m;
        return 0;
}

int priv_upper_pack_encode(uint64_t id, const struct priv_target *t, void *buf, size_t size,
                           struct wr_err *e) {
        struct priv_upper_pack u = {0};
        int r = target_copy(t, &u.t, "UPPER_PACK", e);
        if (r < 0)
                return r;
        return put(id, PRIV_UPPER_PACK, &u, sizeof(u), buf, size);
}

int priv_upper_packed_encode(uint64_t id, const struct priv_upper_packed *p, void *buf,
                             size_t size) {
        return put(id, PRIV_UPPER_PACKED, p, sizeof(*p), buf, size);
}

/* ---- phase 4b-2: the journal's session ---- */

static int upper_session_decode(const char *p, struct priv_req *out, struct wr_err *e) {
        struct priv_upper_session *u = &out->upper_session;
        memcpy(u, p, sizeof(*u));
        int r = target_check(&u->t, "UPPER_SESSION", e);
        if (r < 0)
                return r;
        if (u->flags || u->reserved)
                return err_set(e, -EINVAL, "UPPER_SESSION: flags 0x%x, reserved %u (both 0)",
                               u->flags, u->reserved);
        return 0;
}

static int upper_started_decode(const char *p, struct priv_reply *out, struct wr_err *e) {
        struct priv_upper_started *s = &out->upper_started;
        memcpy(s, p, sizeof(*s));
        if (s->pid <= 1 || s->reserved)
                return err_set(e, -EINVAL, "UPPER_SESSION_STARTED: pid %d, reserved %u", s->pid,
                               s->reserved);
        return 0;
}

int priv_upper_session_encode(uint64_t id, const struct priv_target *t, void *buf, size_t size,
                              struct wr_err *e) {
        struct priv_upper_session u = {0};
        int r = target_copy(t, &u.t, "UPPER_SESSION", e);
        if (r < 0)
                return r;
        return put(id, PRIV_UPPER_SESSION, &u, sizeof(u), buf, size);
}

int priv_upper_started_encode(uint64_t id, const struct priv_upper_started *s, void *buf,
                              size_t size) {
        return put(id, PRIV_UPPER_SESSION_STARTED, s, sizeof(*s), buf, size);
}

int priv_upper_op_decode(const void *buf, size_t len, size_t n_fds, struct priv_upper_op *out,
                         struct wr_err *e) {
        memset(out, 0, sizeof(*out));
        if (len != sizeof(*out))
                return err_set(e, -EPROTO, "session: datagram of %zu bytes (must be %zu)", len,
                               sizeof(*out));
        struct priv_upper_op *m = out;
        memcpy(m, buf, sizeof(*m));
        int r = -EPROTO;
        if (m->magic != PRIV_UPPER_OP_MAGIC) {
                err_set(e, r, "session: bad magic 0x%08x", m->magic);
                goto fail;
        }
        if (m->op < PRIV_UPPER_OP_WALK || m->op > PRIV_UPPER_OP_SYMLINK) {
                err_set(e, r, "session: unknown request %u", m->op);
                goto fail;
        }
        size_t want = m->op == PRIV_UPPER_OP_WALK || m->op == PRIV_UPPER_OP_PUT;
        if (n_fds != want) {
                err_set(e, r, "session: request %u with %zu fds (must be %zu)", m->op, n_fds, want);
                goto fail;
        }
        r = -EINVAL;
        long np = field_str(m->path, sizeof(m->path)), nl = field_str(m->link, sizeof(m->link));
        if (np < 0 || nl < 0) {
                err_set(e, r, "session: a path is not one NUL-padded string");
                goto fail;
        }
        bool attrs = m->op == PRIV_UPPER_OP_MKDIR || m->op == PRIV_UPPER_OP_ATTRS ||
                     m->op == PRIV_UPPER_OP_PUT;
        bool ids = attrs || m->op == PRIV_UPPER_OP_SYMLINK;
        if (m->op == PRIV_UPPER_OP_WALK
                    ? np != 0
                    : !wr_relpath_ok(m->path, (size_t) np, PRIV_UPPER_PATH_MAX - 1)) {
                err_set(e, r, "session: path not confined (relative, no empty, . or .. component)");
                goto fail;
        }
        if ((m->op != PRIV_UPPER_OP_SYMLINK && nl) || m->reserved || (!attrs && m->mode) ||
            m->mode > 07777 || (!ids && (m->uid || m->gid)) || m->uid >= PRIV_UPPER_IDS ||
            m->gid >= PRIV_UPPER_IDS || (m->op != PRIV_UPPER_OP_PUT && m->mtime_ns) ||
            m->mtime_ns < 0) {
                err_set(e, r, "session: request %u: a field out of range or not its kind's", m->op);
                goto fail;
        }
        return 0;
fail:
        memset(out, 0, sizeof(*out));
        return r;
}

int priv_upper_op_encode(const struct priv_upper_op *op, struct priv_upper_op *buf,
                         struct wr_err *e) {
        struct priv_upper_op m = {0};
        m.magic = PRIV_UPPER_OP_MAGIC;
        m.op = op->op;
        m.mode = op->mode;
        m.uid = op->uid;
        m.gid = op->gid;
        m.mtime_ns = op->mtime_ns;
        size_t np = strnlen(op->path, sizeof(op->path)), nl = strnlen(op->link, sizeof(op->link));
        if (np == sizeof(op->path) || nl == sizeof(op->link))
                return err_set(e, -EINVAL, "session: a path of %zu bytes or more",
                               sizeof(op->path));
        memcpy(m.path, op->path, np);
        memcpy(m.link, op->link, nl);
        struct priv_upper_op check;
        int r = priv_upper_op_decode(&m, sizeof(m),
                                     op->op == PRIV_UPPER_OP_WALK || op->op == PRIV_UPPER_OP_PUT,
                                     &check, e);
        if (r < 0)
                return r;
        *buf = m;
        return 0;
}

int priv_upper_reply_decode(const void *buf, size_t len, size_t n_fds, struct priv_upper_reply *out,
                            struct wr_err *e) {
        memset(out, 0, sizeof(*out));
        if (len != sizeof(*out))
                return err_set(e, -EPROTO, "warren-upper: answer of %zu bytes (must be %zu)", len,
                               sizeof(*out));
        struct priv_upper_reply m;
        memcpy(&m, buf, sizeof(m));
        if (m.magic != PRIV_UPPER_REPLY_MAGIC)
                return err_set(e, -EPROTO, "warren-upper: bad answer magic 0x%08x", m.magic);
        if (m.kind < PRIV_UPPER_R_DONE || m.kind > PRIV_UPPER_R_OPENED)
                return err_set(e, -EPROTO, "warren-upper: unknown answer %u", m.kind);
        size_t want = m.kind == PRIV_UPPER_R_OPENED;
        if (n_fds != want)
                return err_set(e, -EPROTO, "warren-upper: answer %u with %zu fds (must be %zu)",
                               m.kind, n_fds, want);
        if (m.err < 0 || m.err > 4095 || (m.err && m.kind != PRIV_UPPER_R_DONE))
                return err_set(e, -EINVAL, "warren-upper: errno %d in answer %u", m.err, m.kind);
        long n = field_str(m.msg, sizeof(m.msg));
        if (n < 0 || (n && !m.err))
                return err_set(e, -EINVAL,
                               "warren-upper: answer's msg is not one NUL-padded "
                               "string after an error");
        if (m.kind != PRIV_UPPER_R_WALKED
                    ? (m.truncated || m.len || m.n)
                    : (m.truncated > 1 || m.len > PRIV_UPPER_WALK_MAX || m.n > m.len))
                return err_set(e, -EINVAL,
                               "warren-upper: answer %u: len %llu, n %llu, truncated %u", m.kind,
                               (unsigned long long) m.len, (unsigned long long) m.n, m.truncated);
        *out = m;
        return 0;
}

static int put(uint64_t id, uint32_t type, const void *payload, size_t plen, void *buf,
               size_t size);
/* ---- phase 3: the helpers ---- */

unsigned priv_helper_fds(uint32_t kind, uint32_t flags) {
        if (kind == PRIV_HELPER_SIGNER)
                return (flags & ~PRIV_HELPER_F_JSON_LOG) ? 0 : 2;
        if (kind == PRIV_HELPER_EGRESS) {
                if (flags & ~(PRIV_HELPER_F_SIGNER | PRIV_HELPER_F_UPSTREAM_CA))
                        return 0;
                return 4 + !!(flags & PRIV_HELPER_F_SIGNER) + !!(flags & PRIV_HELPER_F_UPSTREAM_CA);
        }
        if (kind == PRIV_HELPER_FETCH) {
                if (flags & ~(PRIV_HELPER_F_REGISTRY_CONFIG | PRIV_HELPER_F_DOCKER_CONFIG |
                              PRIV_HELPER_F_LOOPBACK_ONLY))
                        return 0;
                return 1 + !!(flags & PRIV_HELPER_F_REGISTRY_CONFIG) +
                       !!(flags & PRIV_HELPER_F_DOCKER_CONFIG);
        }
        return 0;
}

static bool egress_fields_zero(const struct priv_helper_start *h) {
        return !h->n_deny_ports && all_zero(h->deny_ports, sizeof(h->deny_ports)) &&
               !h->upstream_family && !h->upstream_port &&
               all_zero(h->upstream_addr, sizeof(h->upstream_addr));
}

/* A HELPER_START that arrived with n_fds fds. */
static int helper_check(const struct priv_helper_start *h, size_t n_fds, struct wr_err *e) {
        if (h->kind != PRIV_HELPER_EGRESS && h->kind != PRIV_HELPER_SIGNER &&
            h->kind != PRIV_HELPER_FETCH)
                return err_set(e, -EINVAL,
                               "HELPER_START: unknown kind %u (1 egress, 2 signer, 3 fetch)",
                               h->kind);
        unsigned want = priv_helper_fds(h->kind, h->flags);
        if (want == 0)
                return err_set(e, -EINVAL, "HELPER_START: flags 0x%x not for kind %u", h->flags,
                               h->kind);
        if (h->reserved16 || !all_zero(h->reserved, sizeof(h->reserved)))
                return err_set(e, -EINVAL, "HELPER_START: reserved field set");
        if (h->kind == PRIV_HELPER_FETCH) {
                if (h->role)
                        return err_set(e, -EINVAL, "HELPER_START: a role for warren-fetch");
                if (!egress_fields_zero(h))
                        return err_set(e, -EINVAL, "HELPER_START: egress fields for warren-fetch");
        } else if (h->kind == PRIV_HELPER_SIGNER) {
                if (h->role < PRIV_SIGNER_SECRETS || h->role > PRIV_SIGNER_CA)
                        return err_set(e, -EINVAL, "HELPER_START: signer role %u (1..3)", h->role);
                if (!egress_fields_zero(h))
                        return err_set(e, -EINVAL, "HELPER_START: egress fields for a signer");
        } else {
                if (h->role)
                        return err_set(e, -EINVAL, "HELPER_START: a role for warren-egress");
                if (h->n_deny_ports > PRIV_HELPER_DENY_PORTS_MAX)
                        return err_set(e, -EINVAL, "HELPER_START: %u deny ports (at most %u)",
                                       h->n_deny_ports, PRIV_HELPER_DENY_PORTS_MAX);
                for (uint32_t i = 0; i < PRIV_HELPER_DENY_PORTS_MAX; i++)
                        if ((i < h->n_deny_ports) != (h->deny_ports[i] != 0))
                                return err_set(e, -EINVAL,
                                               "HELPER_START: deny port %u is %u (1..65535 "
                                               "below n_deny_ports, 0 after)",
                                               i, h->deny_ports[i]);
                if (h->upstream_family != 4 && h->upstream_family != 6)
                        return err_set(e, -EINVAL, "HELPER_START: upstream family %u (4 or 6)",
                                       h->upstream_family);
                if (h->upstream_port == 0)
                        return err_set(e, -EINVAL, "HELPER_START: upstream port 0");
                if (h->upstream_family == 4 && !all_zero(h->upstream_addr + 4, 12))
                        return err_set(e, -EINVAL,
                                       "HELPER_START: an IPv4 upstream with bytes "
                                       "after its address");
                if (all_zero(h->upstream_addr, sizeof(h->upstream_addr)))
                        return err_set(e, -EINVAL, "HELPER_START: upstream address unset");
        }
        if (n_fds != want)
                return err_set(e, -EPROTO, "HELPER_START: %zu fds (kind %u with flags 0x%x: %u)",
                               n_fds, h->kind, h->flags, want);
        return 0;
}

/* UNPACK_START's dir: layers/tmp/<one component>. */
static int unpack_dir_check(const char *dir, struct wr_err *e) {
        struct wr_err pe = {0};
        int r = priv_path_check(dir, PRIV_ROOT_LAYERS, &pe);
        if (r < 0)
                return err_set(e, r, "UNPACK_START: %s", pe.msg);
        const char *second = dir + strlen(PRIV_ROOT_LAYERS) + 1;
        size_t tl = strlen(PRIV_ROOT_LAYERS_TMP);
        if (strncmp(second, PRIV_ROOT_LAYERS_TMP, tl) != 0 || second[tl] != '/' ||
            strchr(second + tl + 1, '/'))
                return err_set(e, -EACCES, "UNPACK_START: dir %.64s is not layers/tmp/<name>", dir);
        return 0;
}

static int helper_req_decode(const char *p, size_t n_fds, struct priv_req *out, struct wr_err *e) {
        if (out->hdr.type == PRIV_HELPER_START) {
                memcpy(&out->helper, p, sizeof(out->helper));
                return helper_check(&out->helper, n_fds, e);
        }
        struct priv_unpack_start *u = &out->unpack;
        memcpy(u, p, sizeof(*u));
        if (field_str(u->dir, sizeof(u->dir)) < 0)
                return err_set(e, -EINVAL, "UNPACK_START: dir is not one NUL-padded string");
        if (u->flags || u->reserved)
                return err_set(e, -EINVAL, "UNPACK_START: flags 0x%x, reserved %u (both 0)",
                               u->flags, u->reserved);
        return unpack_dir_check(u->dir, e);
}

static int helper_reply_decode(const char *p, struct priv_reply *out, struct wr_err *e) {
        struct priv_helper_started *h = &out->helper_started;
        memcpy(h, p, sizeof(*h));
        if (h->pid <= 1 || h->reserved || h->start_time == 0)
                return err_set(e, -EINVAL, "HELPER_STARTED: pid %d, reserved %u, start time %llu",
                               h->pid, h->reserved, (unsigned long long) h->start_time);
        return 0;
}

int priv_helper_start_encode(uint64_t id, const struct priv_helper_start *h, void *buf, size_t size,
                             struct wr_err *e) {
        int r = helper_check(h, priv_helper_fds(h->kind, h->flags), e);
        if (r < 0)
                return r;
        return put(id, PRIV_HELPER_START, h, sizeof(*h), buf, size);
}

int priv_unpack_start_encode(uint64_t id, const char *dir, void *buf, size_t size,
                             struct wr_err *e) {
        struct priv_unpack_start u;
        memset(&u, 0, sizeof(u));
        size_t n = strlen(dir);
        if (n >= sizeof(u.dir))
                return err_set(e, -EINVAL, "UNPACK_START: dir too long");
        memcpy(u.dir, dir, n);
        int r = unpack_dir_check(u.dir, e);
        if (r < 0)
                return r;
        return put(id, PRIV_UNPACK_START, &u, sizeof(u), buf, size);
}

int priv_helper_started_encode(uint64_t id, const struct priv_helper_started *h, void *buf,
                               size_t size) {
        struct priv_helper_started k = *h;
        k.reserved = 0;
        return put(id, PRIV_HELPER_STARTED, &k, sizeof(k), buf, size);
}

unsigned priv_type_fds(uint32_t type) {
        const struct priv_msg_spec *s = spec_of(type);
        return s ? s->n_fds : 0;
}

static int layer_req_decode(const char *p, struct priv_req *out, struct wr_err *e);
static int volfile_check(uint32_t type, const struct priv_volfile *v, struct wr_err *e);
static int volfile_reply_decode(const char *p, struct priv_reply *out, struct wr_err *e);

int priv_req_decode(const void *buf, size_t len, size_t n_fds, struct priv_req *out,
                    struct wr_err *e) {
        const struct priv_msg_spec *s;
        memset(out, 0, sizeof(*out));
        int r = frame_check(buf, len, n_fds, true, &out->hdr, &s, e);
        if (r < 0)
                return r;
        const char *p = (const char *) buf + sizeof(struct priv_hdr);
        switch (out->hdr.type) {
        case PRIV_HELLO:
                return 0;
        case PRIV_SANDBOX_CLEANUP: {
                struct priv_cleanup *c = &out->cleanup;
                memcpy(c, p, sizeof(*c));
                long n = field_str(c->id, sizeof(c->id));
                if (n < 0 || !id_ok(c->id, n))
                        return err_set(e, -EINVAL, "SANDBOX_CLEANUP: bad sandbox id");
                if (field_str(c->dir, sizeof(c->dir)) < 0)
                        return err_set(e, -EINVAL,
                                       "SANDBOX_CLEANUP: dir is not one NUL-padded string");
                if (c->cgroup_mode > 2)
                        return err_set(e, -EINVAL, "SANDBOX_CLEANUP: cgroup mode %u",
                                       c->cgroup_mode);
                if (c->reserved)
                        return err_set(e, -EINVAL, "SANDBOX_CLEANUP: reserved field set");
                struct wr_err pe = {0};
                if ((r = priv_path_check(c->dir, PRIV_ROOT_SANDBOXES, &pe)) < 0)
                        return err_set(e, r, "SANDBOX_CLEANUP: %s", pe.msg);
                return 0;
        }
        case PRIV_SANDBOX_SIGNAL: {
                struct priv_signal *sg = &out->signal;
                memcpy(sg, p, sizeof(*sg));
                if ((r = target_check(&sg->t, "SANDBOX_SIGNAL", e)) < 0)
                        return r;
                if (sg->signo < 1 || sg->signo > 64)
                        return err_set(e, -EINVAL, "SANDBOX_SIGNAL: signal %d", sg->signo);
                if (sg->reserved)
                        return err_set(e, -EINVAL, "SANDBOX_SIGNAL: reserved field set");
                return 0;
        }
        case PRIV_SANDBOX_FREEZE: {
                struct priv_freeze *f = &out->freeze;
                memcpy(f, p, sizeof(*f));
                if ((r = target_check(&f->t, "SANDBOX_FREEZE", e)) < 0)
                        return r;
                if (f->on > 1)
                        return err_set(e, -EINVAL, "SANDBOX_FREEZE: on = %u (0 or 1)", f->on);
                if (f->reserved)
                        return err_set(e, -EINVAL, "SANDBOX_FREEZE: reserved field set");
                return 0;
        }
        case PRIV_SANDBOX_CREATE:
        case PRIV_SANDBOX_PRESTART:
        case PRIV_SANDBOX_START:
                memcpy(&out->cfg, p, sizeof(out->cfg));
                return cfg_check(&out->cfg, priv_type_name(out->hdr.type), n_fds, e);
        case PRIV_SANDBOX_DESTROY:
                memcpy(&out->destroy, p, sizeof(out->destroy));
                return destroy_check(&out->destroy, e);
        case PRIV_SANDBOX_ATTACH:
        case PRIV_CTL_CONNECT:
                memcpy(&out->target, p, sizeof(out->target));
                return target_check(&out->target, priv_type_name(out->hdr.type), e);
        case PRIV_LINK_DELETE: {
                struct priv_link *l = &out->link;
                memcpy(l, p, sizeof(*l));
                long n = field_str(l->name, sizeof(l->name));
                if (n < 0 || !link_ok(l->name, n))
                        return err_set(e, -EINVAL,
                                       "LINK_DELETE: not a warren link name (" PRIV_LINK_PREFIX
                                       "..., [A-Za-z0-9_.-], at most 15)");
                if (!all_zero(l->reserved, sizeof(l->reserved)))
                        return err_set(e, -EINVAL, "LINK_DELETE: reserved field set");
                return 0;
        }
        case PRIV_NFT_TABLE_APPLY:
        case PRIV_NFT_CLASS_SET:
        case PRIV_NFT_TABLES:
        case PRIV_NFT_TABLE_REMOVE:
        case PRIV_NET_CONNECT:
                return net_req_decode(p, out, e);
        case PRIV_VOLUME_MOUNT:
        case PRIV_VOLUME_UNMOUNT:
        case PRIV_SANDBOX_SPAWN_BESIDE:
        case PRIV_SSH_DIR_PREPARE:
                return volssh_req_decode(p, out, e);
        case PRIV_UPPER_PACK:
                return upper_req_decode(p, out, e);
        case PRIV_UPPER_SESSION:
                return upper_session_decode(p, out, e);
        case PRIV_HELPER_START:
        case PRIV_UNPACK_START:
                return helper_req_decode(p, n_fds, out, e);
        case PRIV_LAYER_COMMIT:
        case PRIV_LAYER_REMOVE:
                return layer_req_decode(p, out, e);
        case PRIV_VOLFILE_OPEN:
        case PRIV_VOLFILE_OP:
        case PRIV_VOLFILE_LIST:
                memcpy(&out->volfile, p, sizeof(out->volfile));
                return volfile_check(out->hdr.type, &out->volfile, e);
        }
        return err_set(e, -EPROTO, "unknown request type 0x%x", out->hdr.type); /* not reached */
}

int priv_reply_decode(const void *buf, size_t len, size_t n_fds, struct priv_reply *out,
                      struct wr_err *e) {
        const struct priv_msg_spec *s;
        memset(out, 0, sizeof(*out));
        int r = frame_check(buf, len, n_fds, false, &out->hdr, &s, e);
        if (r < 0)
                return r;
        const char *p = (const char *) buf + sizeof(struct priv_hdr);
        if (out->hdr.type == PRIV_NFT_NAMES || out->hdr.type == PRIV_NET_CONNECTED)
                return net_reply_decode(p, out, e);
        if (out->hdr.type == PRIV_VOLUME_MOUNTED || out->hdr.type == PRIV_SPAWNED)
                return volssh_reply_decode(p, out, e);
        if (out->hdr.type == PRIV_UPPER_PACKED) {
                memcpy(&out->upper_packed, p, sizeof(out->upper_packed));
                return 0; /* counters and stats: any value */
        }
        if (out->hdr.type == PRIV_HELPER_STARTED)
                return helper_reply_decode(p, out, e);
        if (out->hdr.type == PRIV_UPPER_SESSION_STARTED)
                return upper_started_decode(p, out, e);
        if (out->hdr.type >= PRIV_VOLFILE_OPENED && out->hdr.type <= PRIV_VOLFILE_LISTED)
                return volfile_reply_decode(p, out, e);
        if (out->hdr.type == PRIV_RESULT) {
                struct priv_result *res = &out->result;
                memcpy(res, p, sizeof(*res));
                if (res->err < 0 || res->err > 4095)
                        return err_set(e, -EINVAL, "RESULT: errno %d", res->err);
                if (field_str(res->msg, sizeof(res->msg)) < 0)
                        return err_set(e, -EINVAL, "RESULT: msg is not one NUL-padded string");
                return 0;
        }
        if (out->hdr.type == PRIV_SANDBOX_CREATED) {
                struct priv_created *c = &out->created;
                memcpy(c, p, sizeof(*c));
                if (c->pid <= 0 || c->reserved)
                        return err_set(e, -EINVAL, "SANDBOX_CREATED: pid %d, reserved %u", c->pid,
                                       c->reserved);
                return 0;
        }
        struct priv_hello_reply *h = &out->hello;
        memcpy(h, p, sizeof(*h));
        if (h->version != PRIV_VERSION)
                return err_set(e, -EPROTO, "HELLO_REPLY: version %u (this warrend speaks %u)",
                               h->version, PRIV_VERSION);
        if (h->pid <= 0)
                return err_set(e, -EINVAL, "HELLO_REPLY: pid %d", h->pid);
        if (h->ip_forward > PRIV_FORWARD_TURNED_ON || h->host_check > 4095)
                return err_set(e, -EINVAL, "HELLO_REPLY: ip_forward %u, host_check %u",
                               h->ip_forward, h->host_check);
        return 0;
}

/* ---- encoders ---- */

static int put(uint64_t id, uint32_t type, const void *payload, size_t plen, void *buf,
               size_t size) {
        if (size < sizeof(struct priv_hdr) + plen)
                return -ENOBUFS;
        struct priv_hdr h = {.magic = PRIV_MAGIC, .type = type, .len = (uint32_t) plen, .id = id};
        memcpy(buf, &h, sizeof(h));
        if (plen)
                memcpy((char *) buf + sizeof(h), payload, plen);
        return (int) (sizeof(h) + plen);
}

int priv_hello_encode(uint64_t id, void *buf, size_t size) {
        return put(id, PRIV_HELLO, NULL, 0, buf, size);
}

int priv_cleanup_encode(uint64_t id, const char *sandbox_id, const char *dir, uint32_t cgroup_mode,
                        void *buf, size_t size, struct wr_err *e) {
        struct priv_cleanup c;
        memset(&c, 0, sizeof(c));
        size_t n = strlen(sandbox_id);
        if (!id_ok(sandbox_id, (long) n))
                return err_set(e, -EINVAL, "sandbox id %.80s is not valid", sandbox_id);
        memcpy(c.id, sandbox_id, n);
        int r = priv_path_check(dir, PRIV_ROOT_SANDBOXES, e);
        if (r < 0)
                return r;
        memcpy(c.dir, dir, strlen(dir));
        if (cgroup_mode > 2)
                return err_set(e, -EINVAL, "cgroup mode %u", cgroup_mode);
        c.cgroup_mode = cgroup_mode;
        return put(id, PRIV_SANDBOX_CLEANUP, &c, sizeof(c), buf, size);
}

int priv_link_delete_encode(uint64_t id, const char *name, void *buf, size_t size,
                            struct wr_err *e) {
        struct priv_link l;
        memset(&l, 0, sizeof(l));
        size_t n = strlen(name);
        if (!link_ok(name, (long) n))
                return err_set(e, -EINVAL, "link %.32s is not a warren link name", name);
        memcpy(l.name, name, n);
        return put(id, PRIV_LINK_DELETE, &l, sizeof(l), buf, size);
}

/* t copied canonically (the id NUL-padded) into out, checked. */
static int target_copy(const struct priv_target *t, struct priv_target *out, const char *what,
                       struct wr_err *e) {
        memset(out, 0, sizeof(*out));
        size_t n = strnlen(t->id, sizeof(t->id));
        if (n >= sizeof(t->id))
                return err_set(e, -EINVAL, "%s: bad sandbox id", what);
        memcpy(out->id, t->id, n);
        out->pid = t->pid;
        out->cgroup_mode = t->cgroup_mode;
        out->start_time = t->start_time;
        return target_check(out, what, e);
}

int priv_signal_encode(uint64_t id, const struct priv_target *t, int signo, void *buf, size_t size,
                       struct wr_err *e) {
        struct priv_signal sg;
        memset(&sg, 0, sizeof(sg));
        int r = target_copy(t, &sg.t, "SANDBOX_SIGNAL", e);
        if (r < 0)
                return r;
        if (signo < 1 || signo > 64)
                return err_set(e, -EINVAL, "SANDBOX_SIGNAL: signal %d", signo);
        sg.signo = signo;
        return put(id, PRIV_SANDBOX_SIGNAL, &sg, sizeof(sg), buf, size);
}

int priv_freeze_encode(uint64_t id, const struct priv_target *t, bool on, void *buf, size_t size,
                       struct wr_err *e) {
        struct priv_freeze f;
        memset(&f, 0, sizeof(f));
        int r = target_copy(t, &f.t, "SANDBOX_FREEZE", e);
        if (r < 0)
                return r;
        f.on = on ? 1 : 0;
        return put(id, PRIV_SANDBOX_FREEZE, &f, sizeof(f), buf, size);
}

int priv_result_encode(uint64_t id, const struct priv_result *res, void *buf, size_t size) {
        struct priv_result c = *res;
        /* canonical: the message NUL-padded */
        size_t n = strnlen(res->msg, sizeof(c.msg) - 1);
        memset(c.msg, 0, sizeof(c.msg));
        memcpy(c.msg, res->msg, n);
        return put(id, PRIV_RESULT, &c, sizeof(c), buf, size);
}

int priv_hello_reply_encode(uint64_t id, const struct priv_hello_reply *rep, void *buf,
                            size_t size) {
        return put(id, PRIV_HELLO_REPLY, rep, sizeof(*rep), buf, size);
}

/* ---- phase 3 encoders ---- */

/* name into a table field, checked */
static int table_copy(char *f, const char *name, const char *what, struct wr_err *e) {
        memset(f, 0, PRIV_NFT_TABLE_MAX);
        if (!priv_nft_table_ok(name))
                return err_set(e, -EINVAL, "%s: %.64s is not a warren table name", what, name);
        memcpy(f, name, strlen(name));
        return 0;
}

int priv_nft_apply_encode(uint64_t id, const char *tname, uint32_t base, uint8_t prefix,
                          uint16_t proxy_port, uint16_t dns_port, void *buf, size_t size,
                          struct wr_err *e) {
        struct priv_nft_apply a;
        memset(&a, 0, sizeof(a));
        int r = table_copy(a.table, tname, "NFT_TABLE_APPLY", e);
        if (r < 0)
                return r;
        a.base = base;
        a.prefix = prefix;
        a.proxy_port = proxy_port;
        a.dns_port = dns_port;
        if ((r = priv_nft_apply_check(&a, e)) < 0)
                return r;
        return put(id, PRIV_NFT_TABLE_APPLY, &a, sizeof(a), buf, size);
}

int priv_nft_class_encode(uint64_t id, const char *tname, uint32_t addr, uint32_t from, uint32_t to,
                          void *buf, size_t size, struct wr_err *e) {
        struct priv_nft_class c;
        memset(&c, 0, sizeof(c));
        int r = table_copy(c.table, tname, "NFT_CLASS_SET", e);
        if (r < 0)
                return r;
        c.addr = addr;
        c.from = from;
        c.to = to;
        if ((r = nft_class_check(&c, e)) < 0)
                return r;
        return put(id, PRIV_NFT_CLASS_SET, &c, sizeof(c), buf, size);
}

int priv_nft_tables_encode(uint64_t id, void *buf, size_t size) {
        return put(id, PRIV_NFT_TABLES, NULL, 0, buf, size);
}

int priv_nft_remove_encode(uint64_t id, const char *tname, void *buf, size_t size,
                           struct wr_err *e) {
        struct priv_nft_table t;
        int r = table_copy(t.table, tname, "NFT_TABLE_REMOVE", e);
        if (r < 0)
                return r;
        return put(id, PRIV_NFT_TABLE_REMOVE, &t, sizeof(t), buf, size);
}

int priv_net_connect_encode(uint64_t id, const struct priv_target *t, uint32_t addr, uint16_t port,
                            void *buf, size_t size, struct wr_err *e) {
        struct priv_net_connect c;
        memset(&c, 0, sizeof(c));
        int r = target_copy(t, &c.t, "NET_CONNECT", e);
        if (r < 0)
                return r;
        c.addr = addr;
        c.port = port;
        if ((r = net_connect_check(&c, e)) < 0)
                return r;
        return put(id, PRIV_NET_CONNECT, &c, sizeof(c), buf, size);
}

int priv_nft_names_encode(uint64_t id, const struct priv_nft_names *names, void *buf, size_t size) {
        /* canonical: each name NUL-padded, nothing after the n-th */
        static _Thread_local struct priv_nft_names c;
        memset(&c, 0, sizeof(c));
        c.n = names->n < PRIV_NFT_NAMES_MAX ? names->n : PRIV_NFT_NAMES_MAX;
        c.truncated = names->truncated ? 1 : 0;
        c.served = names->served;
        c.served_total = names->served_total;
        c.refused = names->refused;
        for (uint32_t i = 0; i < c.n; i++)
                memcpy(c.names[i], names->names[i],
                       strnlen(names->names[i], PRIV_NFT_TABLE_MAX - 1));
        return put(id, PRIV_NFT_NAMES, &c, sizeof(c), buf, size);
}

int priv_net_connected_encode(uint64_t id, const struct priv_net_connected *c, void *buf,
                              size_t size) {
        struct priv_net_connected x = *c;
        x.connected = c->connected ? 1 : 0;
        x.reserved = 0;
        return put(id, PRIV_NET_CONNECTED, &x, sizeof(x), buf, size);
}

/* ---- phase 2 encoders ---- */

int priv_sandbox_cfg_encode(uint64_t id, uint32_t type, const struct priv_sandbox_cfg *c, void *buf,
                            size_t size, struct wr_err *e) {
        if (type != PRIV_SANDBOX_CREATE && type != PRIV_SANDBOX_PRESTART &&
            type != PRIV_SANDBOX_START)
                return err_set(e, -EINVAL, "not a config message: 0x%x", type);
        struct priv_sandbox_cfg k = *c;
        /* canonical: the strings NUL-padded */
        size_t n = strnlen(c->id, sizeof(k.id) - 1);
        memset(k.id, 0, sizeof(k.id));
        memcpy(k.id, c->id, n);
        n = strnlen(c->net_peer, sizeof(k.net_peer) - 1);
        memset(k.net_peer, 0, sizeof(k.net_peer));
        memcpy(k.net_peer, c->net_peer, n);
        int r = cfg_check(&k, priv_type_name(type), 1 + (size_t) k.n_bind, e);
        if (r < 0)
                return r;
        return put(id, type, &k, sizeof(k), buf, size);
}

int priv_destroy_encode(uint64_t id, const struct priv_destroy *d, void *buf, size_t size,
                        struct wr_err *e) {
        struct priv_destroy k;
        memset(&k, 0, sizeof(k));
        size_t n = strnlen(d->t.id, sizeof(k.t.id) - 1);
        memcpy(k.t.id, d->t.id, n);
        k.t.pid = d->t.pid;
        k.t.cgroup_mode = d->t.cgroup_mode;
        k.t.start_time = d->t.start_time;
        n = strnlen(d->peer, sizeof(k.peer) - 1);
        memcpy(k.peer, d->peer, n);
        k.keep_link = d->keep_link;
        int r = destroy_check(&k, e);
        if (r < 0)
                return r;
        return put(id, PRIV_SANDBOX_DESTROY, &k, sizeof(k), buf, size);
}

int priv_target_encode(uint64_t id, uint32_t type, const struct priv_target *t, void *buf,
                       size_t size, struct wr_err *e) {
        if (type != PRIV_SANDBOX_ATTACH && type != PRIV_CTL_CONNECT)
                return err_set(e, -EINVAL, "not a target message: 0x%x", type);
        struct priv_target k;
        int r = target_copy(t, &k, priv_type_name(type), e);
        if (r < 0)
                return r;
        return put(id, type, &k, sizeof(k), buf, size);
}

int priv_created_encode(uint64_t id, const struct priv_created *c, void *buf, size_t size) {
        struct priv_created k = *c;
        k.reserved = 0;
        return put(id, PRIV_SANDBOX_CREATED, &k, sizeof(k), buf, size);
}

/* ---- phase 3 encoders: volumes and spawn-beside ---- */

int priv_volume_encode(uint64_t id, uint32_t type, const char *path, uint32_t flags, void *buf,
                       size_t size, struct wr_err *e) {
        if (type != PRIV_VOLUME_MOUNT && type != PRIV_VOLUME_UNMOUNT)
                return err_set(e, -EINVAL, "not a volume message: 0x%x", type);
        struct priv_volume v;
        memset(&v, 0, sizeof(v));
        size_t n = strnlen(path, sizeof(v.path));
        if (n >= sizeof(v.path))
                return err_set(e, -EACCES, "%s: path too long", priv_type_name(type));
        memcpy(v.path, path, n);
        v.flags = flags;
        int r = volume_check(&v, type, e);
        if (r < 0)
                return r;
        return put(id, type, &v, sizeof(v), buf, size);
}

int priv_spawn_beside_encode(uint64_t id, const struct priv_target *t, uint32_t kind, uint32_t uid,
                             uint32_t gid, void *buf, size_t size, struct wr_err *e) {
        struct priv_spawn_beside s;
        memset(&s, 0, sizeof(s));
        int r = target_copy(t, &s.t, "SANDBOX_SPAWN_BESIDE", e);
        if (r < 0)
                return r;
        s.kind = kind;
        s.uid = uid;
        s.gid = gid;
        if ((r = spawn_check(&s, e)) < 0)
                return r;
        return put(id, PRIV_SANDBOX_SPAWN_BESIDE, &s, sizeof(s), buf, size);
}

int priv_ssh_dir_encode(uint64_t id, const char *sandbox_id, int32_t uid_slot, void *buf,
                        size_t size, struct wr_err *e) {
        struct priv_ssh_dir d;
        memset(&d, 0, sizeof(d));
        size_t n = strnlen(sandbox_id, sizeof(d.id));
        if (n >= sizeof(d.id))
                return err_set(e, -EINVAL, "SSH_DIR_PREPARE: bad sandbox id");
        memcpy(d.id, sandbox_id, n);
        d.uid_slot = uid_slot;
        int r = ssh_dir_check(&d, e);
        if (r < 0)
                return r;
        return put(id, PRIV_SSH_DIR_PREPARE, &d, sizeof(d), buf, size);
}

int priv_volume_mounted_encode(uint64_t id, const struct priv_volume_mounted *m, void *buf,
                               size_t size) {
        struct priv_volume_mounted k = *m;
        memset(k.reserved, 0, sizeof(k.reserved));
        return put(id, PRIV_VOLUME_MOUNTED, &k, sizeof(k), buf, size);
}

int priv_spawned_encode(uint64_t id, const struct priv_spawned *s, void *buf, size_t size) {
        struct priv_spawned k = *s;
        k.reserved = 0;
        return put(id, PRIV_SPAWNED, &k, sizeof(k), buf, size);
}

int priv_send(int fd, const void *buf, size_t len, const int *fds, size_t n_fds, int flags) {
        if (n_fds > PRIV_FDS_MAX)
                return -EINVAL;
        union {
                struct cmsghdr align;
                char buf[CMSG_SPACE(sizeof(int) * PRIV_FDS_MAX)];
        } cbuf;
        memset(&cbuf, 0, sizeof(cbuf));
        struct iovec iov = {.iov_base = (void *) buf, .iov_len = len};
        struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1};
        if (n_fds) {
                mh.msg_control = cbuf.buf;
                mh.msg_controllen = CMSG_SPACE(sizeof(int) * n_fds);
                struct cmsghdr *cm = CMSG_FIRSTHDR(&mh);
                cm->cmsg_level = SOL_SOCKET;
                cm->cmsg_type = SCM_RIGHTS;
                cm->cmsg_len = CMSG_LEN(sizeof(int) * n_fds);
                memcpy(CMSG_DATA(cm), fds, sizeof(int) * n_fds);
        }
        ssize_t n;
        do
                n = sendmsg(fd, &mh, flags | MSG_NOSIGNAL);
        while (n < 0 && errno == EINTR);
        if (n < 0)
                return -errno;
        return n == (ssize_t) len ? 0 : -EMSGSIZE;
}

/* ---- the socket ---- */

void priv_close_fds(int *fds, size_t n) {
        for (size_t i = 0; i < n; i++)
                if (fds[i] >= 0) {
                        close(fds[i]);
                        fds[i] = -1;
                }
}

long priv_recv(int fd, void *buf, size_t size, int fds[PRIV_FDS_MAX], size_t *n_fds, int flags) {
        union {
                struct cmsghdr align;
                char buf[CMSG_SPACE(sizeof(int) * PRIV_FDS_MAX)];
        } cbuf;
        struct iovec iov = {.iov_base = buf, .iov_len = size};
        struct msghdr mh = {
                .msg_iov = &iov,
                .msg_iovlen = 1,
                .msg_control = cbuf.buf,
                .msg_controllen = sizeof(cbuf.buf),
        };
        *n_fds = 0;
        ssize_t n;
        do
                n = recvmsg(fd, &mh, flags | MSG_CMSG_CLOEXEC);
        while (n < 0 && errno == EINTR);
        if (n < 0)
                return -errno;
        for (struct cmsghdr *c = CMSG_FIRSTHDR(&mh); c; c = CMSG_NXTHDR(&mh, c)) {
                if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
                        continue;
                size_t k = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
                for (size_t i = 0; i < k; i++) {
                        int f;
                        memcpy(&f, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
                        if (*n_fds < PRIV_FDS_MAX)
                                fds[(*n_fds)++] = f;
                        else
                                close(f);
                }
        }
        if (mh.msg_flags & MSG_CTRUNC) {
                priv_close_fds(fds, *n_fds);
                *n_fds = 0;
                return -EPROTO;
        }
        if (mh.msg_flags & MSG_TRUNC) {
                priv_close_fds(fds, *n_fds);
                *n_fds = 0;
                return -EMSGSIZE;
        }
        return (long) n;
}

/* ---- phase 5: layer storage ---- */

static bool lower_hex(const char *s, size_t n) {
        for (size_t i = 0; i < n; i++)
                if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
                        return false;
        return true;
}

bool priv_layer_hex_ok(const char *name) {
        return strlen(name) == PRIV_LAYER_HEX && lower_hex(name, PRIV_LAYER_HEX);
}

bool priv_layer_tmp_name_ok(const char *name) {
        static const char *const prefixes[] = {"unpack-", "del-"};
        for (size_t i = 0; i < sizeof(prefixes) / sizeof(prefixes[0]); i++) {
                size_t pl = strlen(prefixes[i]);
                if (!strncmp(name, prefixes[i], pl) && strlen(name + pl) == 16 &&
                    lower_hex(name + pl, 16))
                        return true;
        }
        return false;
}

/* The fields of a LAYER_COMMIT or LAYER_REMOVE (encoders and decoder). */
static int layer_check(uint32_t type, const struct priv_req *r, struct wr_err *e) {
        if (type == PRIV_LAYER_COMMIT) {
                const struct priv_layer_commit *c = &r->layer_commit;
                if (field_str(c->tmp, sizeof(c->tmp)) < 0 || field_str(c->hex, sizeof(c->hex)) < 0)
                        return err_set(e, -EINVAL,
                                       "LAYER_COMMIT: a name is not one NUL-padded string");
                if (c->flags || c->reserved)
                        return err_set(e, -EINVAL, "LAYER_COMMIT: flags 0x%x, reserved %u (both 0)",
                                       c->flags, c->reserved);
                if (!priv_layer_tmp_name_ok(c->tmp))
                        return err_set(e, -EACCES,
                                       "LAYER_COMMIT: %.40s is not a staging name "
                                       "(unpack-|del- and 16 hex digits)",
                                       c->tmp);
                if (!priv_layer_hex_ok(c->hex))
                        return err_set(e, -EACCES,
                                       "LAYER_COMMIT: %.72s is not 64 lower-case hex digits",
                                       c->hex);
                return 0;
        }
        const struct priv_layer_remove *m = &r->layer_remove;
        if (field_str(m->name, sizeof(m->name)) < 0)
                return err_set(e, -EINVAL, "LAYER_REMOVE: name is not one NUL-padded string");
        if (m->reserved)
                return err_set(e, -EINVAL, "LAYER_REMOVE: reserved %u (0)", m->reserved);
        if (m->dir == PRIV_LAYER_DIR_TMP && !priv_layer_tmp_name_ok(m->name))
                return err_set(e, -EACCES,
                               "LAYER_REMOVE: %.40s is not a staging name "
                               "(unpack-|del- and 16 hex digits)",
                               m->name);
        if (m->dir == PRIV_LAYER_DIR_SHA256 && !priv_layer_hex_ok(m->name))
                return err_set(e, -EACCES, "LAYER_REMOVE: %.72s is not 64 lower-case hex digits",
                               m->name);
        if (m->dir != PRIV_LAYER_DIR_TMP && m->dir != PRIV_LAYER_DIR_SHA256)
                return err_set(e, -EINVAL, "LAYER_REMOVE: dir %u (1 tmp, 2 sha256)", m->dir);
        return 0;
}

static int layer_req_decode(const char *p, struct priv_req *out, struct wr_err *e) {
        if (out->hdr.type == PRIV_LAYER_COMMIT)
                memcpy(&out->layer_commit, p, sizeof(out->layer_commit));
        else
                memcpy(&out->layer_remove, p, sizeof(out->layer_remove));
        return layer_check(out->hdr.type, out, e);
}

/* name into a zeroed field of PRIV_LAYER_NAME_MAX: false when too long */
static bool layer_name_put(char *field, const char *name) {
        size_t n = strlen(name);
        if (n >= PRIV_LAYER_NAME_MAX)
                return false;
        memcpy(field, name, n);
        return true;
}

int priv_layer_commit_encode(uint64_t id, const char *tmp, const char *hex, void *buf, size_t size,
                             struct wr_err *e) {
        static _Thread_local struct priv_req r;
        memset(&r, 0, sizeof(r));
        if (!layer_name_put(r.layer_commit.tmp, tmp) || !layer_name_put(r.layer_commit.hex, hex))
                return err_set(e, -EINVAL, "LAYER_COMMIT: a name is too long");
        int k = layer_check(PRIV_LAYER_COMMIT, &r, e);
        if (k < 0)
                return -EINVAL;
        return put(id, PRIV_LAYER_COMMIT, &r.layer_commit, sizeof(r.layer_commit), buf, size);
}

int priv_layer_remove_encode(uint64_t id, uint32_t dir, const char *name, void *buf, size_t size,
                             struct wr_err *e) {
        static _Thread_local struct priv_req r;
        memset(&r, 0, sizeof(r));
        r.layer_remove.dir = dir;
        if (!layer_name_put(r.layer_remove.name, name))
                return err_set(e, -EINVAL, "LAYER_REMOVE: name too long");
        int k = layer_check(PRIV_LAYER_REMOVE, &r, e);
        if (k < 0)
                return -EINVAL;
        return put(id, PRIV_LAYER_REMOVE, &r.layer_remove, sizeof(r.layer_remove), buf, size);
}

/* ---- phase 5: volume files ---- */

_Static_assert(sizeof(struct priv_volfile) == PRIV_VOLFILE_VOL_MAX + 24 + PRIV_VOLFILE_TMP_MAX &&
                       sizeof(struct priv_volfile_opened) == 24 + PRIV_VOLFILE_TMP_MAX &&
                       sizeof(struct priv_volfile_stated) == 48 &&
                       sizeof(struct priv_volfile_listed) == 40,
               "phase 5, volume files: no padding: every byte is checked");
_Static_assert(PRIV_VOLFILE_TMP_MAX == VOL_PUT_TMP_MAX && PRIV_VOLFILE_PATH_MAX == VOL_PATH_MAX &&
                       PRIV_VOLFILE_LIST_MAX == VOL_LIST_MAX && VOL_WIRE_ENTRY == 32,
               "phase 5, volume files: the protocol's limits are the file API's");

/* The type each op belongs to. */
static uint32_t volfile_type_of(uint32_t op) {
        switch (op) {
        case PRIV_VOLFILE_READ:
        case PRIV_VOLFILE_PUT:
                return PRIV_VOLFILE_OPEN;
        case PRIV_VOLFILE_STAT:
        case PRIV_VOLFILE_REMOVE:
        case PRIV_VOLFILE_COMMIT:
        case PRIV_VOLFILE_ABORT:
                return PRIV_VOLFILE_OP;
        case PRIV_VOLFILE_LS:
                return PRIV_VOLFILE_LIST;
        }
        return 0;
}

static int volfile_check(uint32_t type, const struct priv_volfile *v, struct wr_err *e) {
        const char *what = priv_type_name(type);
        if (field_str(v->vol, sizeof(v->vol)) < 0 || field_str(v->tmp, sizeof(v->tmp)) < 0)
                return err_set(e, -EINVAL, "%s: vol or tmp is not one NUL-padded string", what);
        struct wr_err pe = {0};
        int r = priv_volume_path_check(v->vol, &pe);
        if (r < 0)
                return err_set(e, r, "%s: %s", what, pe.msg);
        if (volfile_type_of(v->op) != type)
                return err_set(e, -EINVAL, "%s: op %u is not one of this type's", what, v->op);
        bool has_mode = v->op == PRIV_VOLFILE_PUT || v->op == PRIV_VOLFILE_COMMIT;
        if (v->mode > (has_mode ? 07777u : 0u))
                return err_set(e, -EINVAL, "%s: mode 0%o", what, v->mode);
        bool root_ok = v->op == PRIV_VOLFILE_STAT || v->op == PRIV_VOLFILE_LS ||
                       v->op == PRIV_VOLFILE_ABORT;
        if (v->path_len > PRIV_VOLFILE_PATH_MAX || (!root_ok && v->path_len == 0) ||
            (v->op == PRIV_VOLFILE_ABORT && v->path_len != 0))
                return err_set(e, -EINVAL, "%s: path_len %u", what, v->path_len);
        bool ls = v->op == PRIV_VOLFILE_LS;
        if (v->after_len > (ls ? PRIV_VOLFILE_PATH_MAX : 0u))
                return err_set(e, -EINVAL, "%s: after_len %u", what, v->after_len);
        if (ls ? (v->limit < 1 || v->limit > PRIV_VOLFILE_LIST_MAX) : v->limit != 0)
                return err_set(e, -EINVAL, "%s: limit %u", what, v->limit);
        if (v->reserved)
                return err_set(e, -EINVAL, "%s: reserved field set", what);
        bool has_tmp = v->op == PRIV_VOLFILE_COMMIT || v->op == PRIV_VOLFILE_ABORT;
        if (has_tmp ? !vol_put_tmp_ok(v->tmp) : v->tmp[0] != 0)
                return err_set(e, -EACCES,
                               "%s: tmp %.24s is not a temp file's name (put- and "
                               "16 hex digits) where one belongs",
                               what, v->tmp);
        return 0;
}

int priv_volfile_paths_decode(const struct priv_volfile *v, const void *buf, size_t len,
                              char path[PRIV_VOLFILE_PATH_MAX + 1],
                              char after[PRIV_VOLFILE_PATH_MAX + 1], struct wr_err *e) {
        if (v->path_len > PRIV_VOLFILE_PATH_MAX || v->after_len > PRIV_VOLFILE_PATH_MAX ||
            len != (size_t) v->path_len + v->after_len)
                return err_set(e, -EPROTO, "the paths' memfd holds %zu bytes, not %u + %u", len,
                               v->path_len, v->after_len);
        bool root_ok = v->op == PRIV_VOLFILE_STAT || v->op == PRIV_VOLFILE_LS ||
                       v->op == PRIV_VOLFILE_ABORT;
        const char *b = buf;
        int r = vol_path_check(v->op == PRIV_VOLFILE_LS ? "prefix" : "path", b, v->path_len,
                               root_ok, e);
        if (r < 0 || (r = vol_path_check("page_token", b + v->path_len, v->after_len, true, e)) < 0)
                return r;
        memcpy(path, b, v->path_len);
        path[v->path_len] = 0;
        memcpy(after, b + v->path_len, v->after_len);
        after[v->after_len] = 0;
        return 0;
}

int priv_volfile_encode(uint64_t id, uint32_t type, const struct priv_volfile *v, void *buf,
                        size_t size, struct wr_err *e) {
        struct priv_volfile k;
        memset(&k, 0, sizeof(k));
        size_t n = strnlen(v->vol, sizeof(v->vol)), t = strnlen(v->tmp, sizeof(v->tmp));
        if (n >= sizeof(k.vol) || t >= sizeof(k.tmp))
                return err_set(e, -EINVAL, "%s: vol or tmp too long", priv_type_name(type));
        memcpy(k.vol, v->vol, n);
        memcpy(k.tmp, v->tmp, t);
        k.op = v->op;
        k.mode = v->mode;
        k.path_len = v->path_len;
        k.after_len = v->after_len;
        k.limit = v->limit;
        if (!priv_type_name(type) || volfile_check(type, &k, e) < 0)
                return -EINVAL;
        return put(id, type, &k, sizeof(k), buf, size);
}

int priv_volfile_opened_encode(uint64_t id, const struct priv_volfile_opened *o, void *buf,
                               size_t size) {
        struct priv_volfile_opened k;
        memset(&k, 0, sizeof(k));
        k.served = o->served;
        k.served_total = o->served_total;
        k.refused = o->refused;
        memcpy(k.tmp, o->tmp, strnlen(o->tmp, sizeof(k.tmp) - 1));
        return put(id, PRIV_VOLFILE_OPENED, &k, sizeof(k), buf, size);
}

int priv_volfile_stated_encode(uint64_t id, const struct priv_volfile_stated *s, void *buf,
                               size_t size) {
        return put(id, PRIV_VOLFILE_STATED, s, sizeof(*s), buf, size);
}

int priv_volfile_listed_encode(uint64_t id, const struct priv_volfile_listed *l, void *buf,
                               size_t size) {
        struct priv_volfile_listed k = *l;
        k.reserved = 0;
        return put(id, PRIV_VOLFILE_LISTED, &k, sizeof(k), buf, size);
}

static int volfile_reply_decode(const char *p, struct priv_reply *out, struct wr_err *e) {
        switch (out->hdr.type) {
        case PRIV_VOLFILE_OPENED: {
                struct priv_volfile_opened *o = &out->volfile_opened;
                memcpy(o, p, sizeof(*o));
                if (field_str(o->tmp, sizeof(o->tmp)) < 0 || (o->tmp[0] && !vol_put_tmp_ok(o->tmp)))
                        return err_set(e, -EINVAL, "VOLFILE_OPENED: tmp is not a temp file's name");
                return 0;
        }
        case PRIV_VOLFILE_STATED: {
                struct priv_volfile_stated *st = &out->volfile_stated;
                memcpy(st, p, sizeof(*st));
                if (st->kind < VOL_FILE_REGULAR || st->kind > VOL_FILE_OTHER || st->mode > 07777)
                        return err_set(e, -EINVAL, "VOLFILE_STATED: kind %u, mode 0%o", st->kind,
                                       st->mode);
                return 0;
        }
        default: {
                struct priv_volfile_listed *l = &out->volfile_listed;
                memcpy(l, p, sizeof(*l));
                if (l->n > PRIV_VOLFILE_LIST_MAX || l->more > 1 ||
                    l->len > PRIV_VOLFILE_LISTING_MAX || l->reserved ||
                    (size_t) l->len < (size_t) l->n * VOL_WIRE_ENTRY)
                        return err_set(e, -EINVAL, "VOLFILE_LISTED: n %u, more %u, len %u", l->n,
                                       l->more, l->len);
                return 0;
        }
        }
}
