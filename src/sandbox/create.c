/* SPDX-License-Identifier: Apache-2.0 */
/* Create a sandbox from a checked spec and a resolved image: the process
 * defaults (env, user, workdir), the row (PENDING, then RUNNING with
 * init's pid and start time), the runtime (a warm-pool entry when there is
 * one, else a plain create), the control connection, the entrypoint.
 * Written like runtime's sandbox_make(): each step records what it made
 * in the create's state, and one undo takes back exactly that. */
#include "sandbox/sandbox-internal.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "basic/log.h"
#include "basic/macro.h"
#include "image/image.h"
#include "runtime/ctl.h"
#include "runtime/runtime.h"
#include "sandbox/egress.h"
#include "sandbox/ssh.h"
#include "sandbox/user.h"
#include "store/store.h"

int sbx_make_id(char *buf, size_t size) {
        uint8_t b[8];
        if (getrandom(b, sizeof(b), 0) != sizeof(b))
                return -errno;
        snprintf(buf, size, "sb-%02x%02x%02x%02x%02x%02x%02x%02x", b[0], b[1], b[2], b[3], b[4],
                 b[5], b[6], b[7]);
        return 0;
}

/* The image's USER (names from /etc/passwd and /etc/group as its layers
 * stack up); a user the image does not have is the image's fault. */
static int image_user(const struct img_info *img, struct sbx_user *ret, struct wr_err *e) {
        _cleanup_free_ int *fds = calloc(img->n_layers + 1, sizeof(int));
        if (!fds)
                return err_set(e, -ENOMEM, "USER: out of memory");
        size_t n = 0;
        int r = 0;
        for (size_t i = 0; i < img->n_layers; i++) {
                fds[n] = open(img->layer_dirs[i], O_PATH | O_DIRECTORY | O_CLOEXEC);
                if (fds[n] < 0) {
                        r = err_set(e, -errno, "layer %s", img->layer_dirs[i]);
                        break;
                }
                n++;
        }
        if (r >= 0)
                r = sbx_user_resolve(fds, n, img->config.user, "USER", ret, e);
        for (size_t i = 0; i < n; i++)
                close(fds[i]);
        if (r < 0 && err_status(e) == WR_STATUS_INVALID_ARGUMENT)
                e->status = WR_STATUS_FAILED_PRECONDITION;
        return r;
}

/* The environment, user and working directory every process of sb gets:
 * PATH, the image's Env, HOSTNAME, then the spec's env (secrets
 * included); the image's USER; HOME from its passwd entry unless set; the
 * spec's workdir, else the image's, else "/". */
static int process_defaults(struct sbx *sb, const struct sbx_spec *spec, const struct img_info *img,
                            const char *hostname, struct wr_err *e) {
        int r = sbx_env_set2(&sb->env, "PATH", DEFAULT_PATH);
        for (size_t i = 0; r >= 0 && i < img->config.n_env; i++)
                r = sbx_env_set(&sb->env, img->config.env[i]);
        if (r >= 0)
                r = sbx_env_set2(&sb->env, "HOSTNAME", hostname);
        for (char **p = spec->env; r >= 0 && p && *p; p++)
                r = sbx_env_set(&sb->env, *p);
        if (r < 0)
                return err_set(e, r, "environment");
        struct sbx_user user = {.home = "/root"};
        if (img->config.user && *img->config.user && (r = image_user(img, &user, e)) < 0)
                return err_prefix(e, r, "image %s", img->id);
        sb->uid = user.uid;
        sb->gid = user.gid;
        if (!sbx_env_find(sb->env, "HOME") &&
            (r = sbx_env_set2(&sb->env, "HOME", user.home[0] ? user.home : "/")) < 0)
                return err_set(e, r, "environment");
        const char *wd = spec->workdir ? spec->workdir
                         : img->config.working_dir && *img->config.working_dir
                                 ? img->config.working_dir
                                 : "/";
        if (!(sb->workdir = strdup(wd)))
                return err_set(e, -ENOMEM, "out of memory");
        sbx_journal_set_all(sb, spec->journal_execs);
        sb->build_step = spec->build_step;
        return 0;
}

/* The main process: the spec's entrypoint, else the image's Entrypoint +
 * Cmd (Docker's rule), as a NULL-terminated heap vector (NULL when there
 * is none). */
static int entry_argv(const struct sbx_spec *spec, const struct img_info *img, char ***ret) {
        *ret = NULL;
        if (spec->entrypoint) {
                if (!spec->entrypoint[0])
                        return 0;
                *ret = sbx_argv_dup((const char *const *) spec->entrypoint, 0);
                return *ret ? 0 : -ENOMEM;
        }
        size_t n = img->config.n_entrypoint + img->config.n_cmd;
        if (n == 0)
                return 0;
        _cleanup_(sbx_argv_freep) char **v = calloc(n + 1, sizeof(char *));
        if (!v)
                return -ENOMEM;
        size_t k = 0;
        for (size_t i = 0; i < img->config.n_entrypoint; i++)
                if (!(v[k++] = strdup(img->config.entrypoint[i])))
                        return -ENOMEM;
        for (size_t i = 0; i < img->config.n_cmd; i++)
                if (!(v[k++] = strdup(img->config.cmd[i])))
                        return -ENOMEM;
        *ret = TAKE_PTR(v);
        return 0;
}

/* Start the sandbox's main process in the background (output to
 * <dir>/entrypoint.log). argv NULL: nothing to start. */
static int start_entrypoint(struct sbx *sb, char *const *argv, struct wr_err *e) {
        if (!argv || !argv[0])
                return 0;
        char path[PATH_MAX];
        snprintf(path, sizeof(path), "%s/entrypoint.log", rt_sandbox_dir(sb->rt));
        _cleanup_close_ int null = open("/dev/null", O_RDONLY | O_CLOEXEC);
        _cleanup_close_ int log = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
        if (null < 0 || log < 0)
                return err_set(e, -errno, "entrypoint: open %s", path);
        struct rt_spawn_req sr = {
                .id = ++sb->next_exec_id,
                .argv = (const char *const *) argv,
                .envp = (const char *const *) sb->env,
                .cwd = sb->workdir,
                .uid = sb->uid,
                .gid = sb->gid,
                .flags = RT_SPAWN_SETSID,
        };
        int stdio[3] = {null, log, log};
        int r = sbx_ctl_send_spawn(sb, &sr, stdio);
        if (r < 0)
                return err_set(e, r, "entrypoint: spawn");
        return 0;
}

/* One commit records init (pid + start time, to re-attach after a
 * restart), the process defaults and RUNNING. */
static int record_started(struct sbx *sb, struct wr_err *e) {
        uint64_t start = 0;
        (void) rt_sandbox_start_time(sb->rt, &start);
        char *proc = NULL;
        size_t proc_len = 0;
        int r = sbx_process_encode(sb, &proc, &proc_len);
        if (r < 0)
                return err_set(e, r, "encode process defaults");
        r = store_sandbox_set_started(sb->m->store, sb->id, rt_sandbox_pid(sb->rt), start, NULL,
                                      proc, proc_len, STORE_SANDBOX_RUNNING, e);
        erase_and_free_n(proc, proc_len);
        return r;
}

/* ---- egress ---- */

int sbx_egress_attach(struct sbx *sb, int mode, const uint8_t *wire, size_t len,
                      const uint8_t *rules, size_t rules_len, struct wr_err *e) {
        struct sbx_manager *m = sb->m;
        struct sbx_egress *g = sbx_network_egress(m->net);
        if (!g || sb->net_slot < 0)
                return 0;
        struct rt_net net;
        sbx_network_slot_net(m->net, sb->net_slot, &net);
        /* policed: out of open4 before anything of it runs (a warm-pool
         * entry's block has its element put in ahead, for a claim without
         * a policy). Credentials without a policy: OPEN for warren-egress,
         * pass4 in the table (its TCP goes to the proxy, which intercepts
         * the TLS to the credentials' hosts; UDP and ICMP as without a
         * policy). */
        int r;
        enum sbx_net_class cls = mode ? SBX_NET_POLICED : rules_len ? SBX_NET_PASS : SBX_NET_OPEN;
        if (cls != SBX_NET_OPEN && (r = sbx_network_set_class(m->net, sb->net_slot, cls, e)) < 0)
                return err_prefix(e, r, "network");
        if ((r = sbx_egress_register(g, sb->id, mode ? mode : EGRESS_MODE_OPEN, net.addr, wire, len,
                                     rules, rules_len, e)) < 0)
                return r;
        sb->egress_registered = true;
        if (cls == SBX_NET_OPEN) {
                /* a warm-pool entry's is there already (no nftables work) */
                if ((r = sbx_network_set_open(m->net, sb->net_slot, true, e)) < 0)
                        return err_prefix(e, r, "network");
                sb->egress_open = true;
        }
        return 0;
}

void sbx_egress_detach(struct sbx *sb) {
        struct sbx_manager *m = sb->m;
        struct sbx_egress *g = sbx_network_egress(m->net);
        if (!g)
                return;
        /* its open4 element goes with the block (sbx_net_retire); a failed
         * create's block remembers it for its next owner */
        sb->egress_open = false;
        if (sb->egress_registered)
                sbx_egress_unregister(g, sb->id);
        sb->egress_registered = false;
}

int sbx_egress_policy_write(const char *dir, int mode, const uint8_t *wire, size_t len,
                            struct wr_err *e) {
        char path[PATH_MAX];
        snprintf(path, sizeof(path), "%s/egress-policy", dir);
        _cleanup_close_ int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
        uint32_t m32 = (uint32_t) mode;
        if (fd < 0 || write(fd, &m32, 4) != 4 || (len && write(fd, wire, len) != (ssize_t) len))
                return err_set(e, -errno, "write %s: %m", path);
        return 0;
}

#define RULES_LABEL "warren-sandbox-egress-rules-v1"

int sbx_egress_rules_write(struct sbx *sb, const uint8_t *wire, size_t len, struct wr_err *e) {
        char path[PATH_MAX];
        snprintf(path, sizeof(path), "%s/egress-rules.sealed", rt_sandbox_dir(sb->rt));
        _cleanup_free_ unsigned char *sealed = NULL;
        size_t sealed_len = 0;
        int r = store_seal(sb->m->store, RULES_LABEL, sb->id, wire, len, &sealed, &sealed_len, e);
        if (r < 0)
                return err_prefix(e, r, "seal the egress rules");
        _cleanup_close_ int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
        if (fd < 0 || write(fd, sealed, sealed_len) != (ssize_t) sealed_len)
                return err_set(e, -errno, "write %s: %m", path);
        return 0;
}

/* The rest of fd (at most cap bytes) into a new buffer (NULL when empty). */
static int read_rest(int fd, size_t cap, uint8_t **ret, size_t *ret_len) {
        size_t n = 0;
        _cleanup_free_ uint8_t *buf = malloc(cap);
        if (!buf)
                return -ENOMEM;
        ssize_t k;
        while (n < cap && (k = read(fd, buf + n, cap - n)) > 0)
                n += (size_t) k;
        *ret_len = n;
        *ret = n ? TAKE_PTR(buf) : NULL;
        return 0;
}

int sbx_egress_rules_read(struct sbx_manager *m, const char *id, const char *dir,
                          uint8_t **ret_wire, size_t *ret_len, struct wr_err *e) {
        char path[PATH_MAX];
        snprintf(path, sizeof(path), "%s/egress-rules.sealed", dir);
        *ret_wire = NULL;
        *ret_len = 0;
        _cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0 && errno == ENOENT) {
                /* an older warrend's: the secret-free part in the clear */
                snprintf(path, sizeof(path), "%s/egress-rules", dir);
                fd = open(path, O_RDONLY | O_CLOEXEC);
                if (fd < 0)
                        return errno == ENOENT ? 0 : err_set(e, -errno, "open %s: %m", path);
                int r = read_rest(fd, 65536, ret_wire, ret_len);
                return r < 0 ? err_set(e, r, "read %s: %s", path, strerror(-r)) : 0;
        }
        if (fd < 0)
                return err_set(e, -errno, "open %s: %m", path);
        _cleanup_free_ uint8_t *sealed = NULL;
        size_t sealed_len = 0;
        int r = read_rest(fd, NET_POLICY_WIRE_MAX + 64, &sealed, &sealed_len);
        if (r < 0)
                return err_set(e, r, "read %s: %s", path, strerror(-r));
        if (!sealed)
                return 0;
        return store_unseal(m->store, RULES_LABEL, id, sealed, sealed_len, ret_wire, ret_len, e);
}

int sbx_egress_policy_read(const char *dir, int *ret_mode, uint8_t **ret_wire, size_t *ret_len) {
        char path[PATH_MAX];
        snprintf(path, sizeof(path), "%s/egress-policy", dir);
        _cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC);
        *ret_mode = 0;
        *ret_wire = NULL;
        *ret_len = 0;
        if (fd < 0)
                return errno == ENOENT ? 0 : -errno;
        uint32_t m32 = 0;
        if (read(fd, &m32, 4) != 4)
                return -EBADMSG;
        *ret_mode = (int) m32;
        return read_rest(fd, NET_POLICY_WIRE_MAX, ret_wire, ret_len);
}

/* Register the new sandbox with warren-egress before its first process
 * runs; with a policy, prove it holds (the self-check). */
static int egress_setup(struct sbx *sb, const struct sbx_spec *spec, bool policy_written,
                        struct wr_err *e) {
        struct sbx_manager *m = sb->m;
        if (!sbx_network_egress(m->net) || sb->net_slot < 0)
                return 0;
        int r = sbx_egress_attach(sb, spec->net_mode, spec->net_policy, spec->net_policy_len,
                                  spec->net_rules, spec->net_rules_len, e);
        if (r < 0 || (!spec->net_mode && !spec->net_rules_len))
                return r;
        /* the rules (secret values inside) sealed with the secrets key,
         * for a restarted warrend to register them again */
        if (spec->net_rules_len &&
            (r = sbx_egress_rules_write(sb, spec->net_rules, spec->net_rules_len, e)) < 0)
                return r;
        if (spec->net_mode && !policy_written &&
            (r = sbx_egress_policy_write(rt_sandbox_dir(sb->rt), spec->net_mode, spec->net_policy,
                                         spec->net_policy_len, e)) < 0)
                return r;
        struct rt_net net;
        sbx_network_slot_net(m->net, sb->net_slot, &net);
        if ((r = sbx_egress_probe(sbx_network_egress(m->net), sb->id, rt_sandbox_pid(sb->rt),
                                  net.gateway, 1000, e)) < 0)
                return r;
        /* a policy proved; credentials alone police TLS, not a policy */
        sb->egress_enforced = spec->net_mode != 0;
        return 0;
}

/* Create phases, timed for the debug log (where a create's time goes). */
enum { T_START, T_IMAGE, T_RECORD, T_RUNTIME, T_CONNECT, T_STARTED, T_N };

/* What a create made so far (undone in create_undo). */
enum {
        MADE_ROW = 1 << 0,     /* the row is inserted (PENDING) */
        MADE_LOADED = 1 << 1,  /* *ret is loaded */
        MADE_ARMED = 1 << 2,   /* sb belongs to the manager: its end is sbx_finalize's */
        MADE_SSH_DIR = 1 << 3, /* <dir>/ssh (managed SSH), before the runtime had the dir */
};

struct create_state {
        struct sbx_manager *m;
        const struct sbx_spec *spec;
        const struct img_info *img;
        struct sbx *sb;            /* ours until armed */
        struct rt_sandbox *pooled; /* a warm-pool entry not handed to sb yet */
        struct priv_start *start;  /* --privsep: its SANDBOX_START in flight */
        bool was_pooled;
        unsigned made;
        uint64_t tp[T_N];
        char dir[PATH_MAX]; /* the sandbox's dir */
        char ssh_src[PATH_MAX + 8];
        char ca_bundle[PATH_MAX];    /* intercepted: the CA bundle mounted over the image's */
        char identity_dir[PATH_MAX]; /* identity: the token directory (host) */
        struct rt_mount *mounts;     /* spec->mounts + the agent's dir + the CA bundle */
};

/* Take back what st made: the runtime's sandbox, the row (FAILED with
 * e's message), *ret. An armed sandbox is the manager's: it has been
 * finalized, which records its end. */
static void create_undo(struct create_state *st, struct store_sandbox *ret,
                        const struct wr_err *e) {
        struct wr_err de = {0};
        if (st->made & MADE_LOADED)
                store_sandbox_clear(ret);
        if (st->pooled) {
                sbx_rt_destroy(st->m, st->pooled, &de);
                rt_sandbox_free(TAKE_PTR(st->pooled));
        }
        if (st->sb)
                sbx_egress_detach(st->sb);
        if (st->start) /* answered before it goes */
                (void) sbx_rt_start_wait(st->m, st->sb ? st->sb->rt : NULL, &st->start, &de);
        if (st->sb && st->sb->rt)
                sbx_rt_destroy(st->m, st->sb->rt, &de);
        if (st->sb)
                sbx_ssh_reap(st->sb);
        if ((st->made & MADE_SSH_DIR) && !(st->sb && st->sb->rt)) {
                /* the runtime never took the dir: take back what we made */
                char ssh[PATH_MAX + 8];
                snprintf(ssh, sizeof(ssh), "%s/ssh", st->dir);
                (void) rmdir(ssh);
                (void) rmdir(st->dir);
        }
        free(st->mounts);
        st->mounts = NULL;
        if ((st->made & MADE_ROW) && !(st->made & MADE_ARMED))
                store_sandbox_update_status(st->m->store, st->sb ? st->sb->id : "",
                                            STORE_SANDBOX_FAILED,
                                            e && e->msg[0] ? e->msg : "failed", NULL);
        sbx_free(TAKE_PTR(st->sb));
}

/* The row, PENDING, before the kernel is touched (a warm-pool entry is
 * the exception: it starts mounting first, see create_steps). */
static int record_pending(struct create_state *st, const char *ref, struct wr_err *e) {
        const struct sbx_spec *spec = st->spec;
        _cleanup_free_ struct store_tag *tags = calloc(spec->n_tags + 1, sizeof(*tags));
        if (!tags)
                return err_set(e, -ENOMEM, "out of memory");
        for (size_t i = 0; i < spec->n_tags; i++)
                tags[i] = (struct store_tag){spec->tags[i].key, spec->tags[i].value};
        struct store_sandbox row = {
                .id = st->sb->id,
                .environment = spec->environment ? spec->environment : (char *) STORE_ENV_DEFAULT,
                .name = st->sb->name,
                .status = STORE_SANDBOX_PENDING,
                .image_id = st->img->id,
                .image_ref = (char *) ref,
                .spec = spec->record,
                .spec_len = spec->record_len,
                .tags = tags,
                .n_tags = spec->n_tags,
                .created_ns = store_now_ns(),
                .expires_ns = st->sb->expires_ns,
                .uid_base = st->sb->uid_slot >= 0 ? sbx_uids_base(st->sb->uid_slot) : 0,
        };
        int r = store_sandbox_insert(st->m->store, &row, e);
        if (r == -EEXIST)
                return err_setx(e, -EEXIST, WR_STATUS_ALREADY_EXISTS, WR_FAULT_CLIENT,
                                "name: a running sandbox is already called %s (terminate it or "
                                "pick another name)",
                                st->sb->name);
        if (r < 0)
                return err_prefix(e, r, "record");
        st->made |= MADE_ROW;
        return 0;
}

static int create_steps(struct create_state *st, const char *ref, struct store_sandbox *ret,
                        struct wr_err *e) {
        struct sbx_manager *m = st->m;
        const struct sbx_spec *spec = st->spec;
        const struct img_info *img = st->img;
        int r = sbx_spec_check(spec, e);
        if (r < 0)
                return r;
        if ((spec->net_mode || spec->net_rules_len) && !sbx_network_egress(m->net))
                return err_setx(e, -EOPNOTSUPP, WR_STATUS_FAILED_PRECONDITION, WR_FAULT_CLIENT,
                                "network_policy: this warrend runs no egress enforcer "
                                "(warren-egress needs root, the default network and an "
                                "upstream resolver: --upstream-dns)");
        if (spec->net_intercept && !sbx_egress_intercepts(sbx_network_egress(m->net)))
                return err_setx(e, -EOPNOTSUPP, WR_STATUS_FAILED_PRECONDITION, WR_FAULT_CLIENT,
                                "per-host rules and credentials need TLS interception, which "
                                "this warrend cannot do now (warren-signer missing, the egress "
                                "CA unusable, or warren-egress restarting: see its log)");
        int64_t expires_ns = spec->lifetime_ns ? store_now_ns() + spec->lifetime_ns : 0;
        st->tp[T_IMAGE] = sbx_mono_ns();
        /* the writable layer: the daemon's default size unless the spec
         * gives one (more or less than the default, both fine) */
        struct rt_limits limits = spec->limits;
        if (!limits.disk_bytes)
                limits.disk_bytes = m->default_disk;
        /* the pool's entries have a layer of the default size: the pool
         * builds its next roots for this image, and an entry is taken,
         * only for a sandbox of that size */
        bool poolable = limits.disk_bytes == m->default_disk;
        if (poolable)
                sbx_pool_expect(m, (const char *const *) img->layer_dirs, img->n_layers);
        _cleanup_(sbx_argv_freep) char **entry = NULL;
        if (entry_argv(spec, img, &entry) < 0)
                return err_set(e, -ENOMEM, "out of memory");

        /* a warm-pool sandbox: its id, dir, cgroups and namespaces are
         * there already */
        char id[32];
        int32_t net_slot = -1, uid_slot = -1;
        /* a blocked network is a plain create: pool entries have a veth */
        st->pooled = spec->block_network || !poolable
                             ? NULL
                             : sbx_pool_take(m, id, sizeof(id), &net_slot, &uid_slot);
        st->was_pooled = st->pooled != NULL;
        if (!st->pooled && (r = sbx_make_id(id, sizeof(id))) < 0)
                return err_set(e, r, "getrandom failed");
        if ((r = sbx_new(m, id, expires_ns, &st->sb)) < 0) {
                sbx_network_release(m->net, net_slot);
                sbx_uid_slot_release(m, uid_slot);
                return err_set(e, r, "out of memory");
        }
        struct sbx *sb = st->sb;
        sb->net_slot = net_slot; /* released with sb, after its veth is gone */
        /* its user namespace range: a pool entry's, or a new one
         * (released with sb, once its teardown finished) */
        sb->uid_slot = uid_slot;
        if (!st->pooled && (r = sbx_uid_slot_alloc(m, &sb->uid_slot, e)) < 0)
                return r;
        struct rt_net net = {0};
        if (sb->net_slot >= 0) /* a pool entry's: made already, unless it broke */
                sbx_network_slot_net(m->net, sb->net_slot, &net);
        else if (m->net && !spec->block_network &&
                 (r = sbx_network_alloc(m->net, &sb->net_slot, &net)) < 0)
                return err_setx(e, r, WR_STATUS_RESOURCE_EXHAUSTED, WR_FAULT_SERVICE,
                                "network: the sandbox range %s is full", sbx_network_range(m->net));
        if (spec->name && !(sb->name = strdup(spec->name)))
                return err_set(e, -ENOMEM, "out of memory");
        if (!(sb->image_id = strdup(img->id)))
                return err_set(e, -ENOMEM, "out of memory");
        const char *hostname = spec->hostname ? spec->hostname : sb->name ? sb->name : sb->id;
        if ((r = process_defaults(sb, spec, img, hostname, e)) < 0)
                return r;

        char resolv[256];
        char *dir = st->dir;
        if ((r = sbx_dir_path(m, sb->id, dir, sizeof(st->dir))) < 0)
                return err_set(e, r, "sandbox dir");
        /* managed SSH: the agent's dir, mounted read-only (the agent starts
         * once the sandbox's cgroups exist, below); interception: the CA
         * bundle over the image's bundle paths */
        const struct rt_mount *mounts = spec->mounts;
        size_t n_mounts = spec->n_mounts;
        bool ca_present[SBX_CA_BUNDLE_PATHS] = {false};
        size_t n_ca = 0;
        if (spec->net_intercept) {
                if ((r = sbx_ca_bundle(m->state_dir, img, st->ca_bundle, sizeof(st->ca_bundle),
                                       ca_present, e)) < 0)
                        return err_prefix(e, r, "CA bundle");
                for (size_t i = 0; i < SBX_CA_BUNDLE_PATHS; i++)
                        n_ca += ca_present[i];
                if (!n_ca) {
                        ca_present[0] = true;
                        n_ca = 1;
                }
                const char *first = NULL;
                for (size_t i = 0; i < SBX_CA_BUNDLE_PATHS && !first; i++)
                        if (ca_present[i])
                                first = sbx_ca_bundle_paths[i];
                static const char *const vars[] = {"SSL_CERT_FILE",  "REQUESTS_CA_BUNDLE",
                                                   "CURL_CA_BUNDLE", "NODE_EXTRA_CA_CERTS",
                                                   "GIT_SSL_CAINFO", "PIP_CERT"};
                for (size_t i = 0; i < ELEMENTSOF(vars); i++)
                        if (!sbx_env_find(spec->env, vars[i]) &&
                            (r = sbx_env_set2(&sb->env, vars[i], first)) < 0)
                                return err_set(e, r, "environment");
        }
        if (spec->identity) {
                if (!m->identity_issue)
                        return err_setx(e, -EOPNOTSUPP, WR_STATUS_FAILED_PRECONDITION,
                                        WR_FAULT_CLIENT,
                                        "identity: this warrend gives sandboxes no identity "
                                        "(it needs workload identity keys and an issuer: "
                                        "--admin-listen or --issuer; see its log)");
                const char *env = spec->environment ? spec->environment : STORE_ENV_DEFAULT;
                if ((r = m->identity_issue(m->identity_userdata, sb->id, env, st->identity_dir,
                                           sizeof(st->identity_dir), e)) < 0)
                        return err_prefix(e, r, "identity");
                char api[PATH_MAX];
                snprintf(api, sizeof(api), "unix://%s/%s", SBX_IDENTITY_API_DIR,
                         SBX_IDENTITY_API_SOCK);
                const char *const kv[][2] = {
                        {"WARREN_WEB_IDENTITY_TOKEN_FILE", SBX_IDENTITY_TOKEN_FILE},
                        {"WARREN_API_SERVER", api},
                        {"WARREN_ENVIRONMENT", env},
                };
                for (size_t i = 0; i < ELEMENTSOF(kv); i++)
                        if (!sbx_env_find(spec->env, kv[i][0]) &&
                            (r = sbx_env_set2(&sb->env, kv[i][0], kv[i][1])) < 0)
                                return err_set(e, r, "environment");
        }
        size_t n_identity = spec->identity ? 2 : 0;
        if (spec->n_ssh || n_ca || n_identity) {
                if (n_mounts + n_ca + n_identity + (spec->n_ssh ? 1 : 0) > RT_MOUNTS_MAX)
                        return err_setx(e, -E2BIG, WR_STATUS_INVALID_ARGUMENT, WR_FAULT_CLIENT,
                                        "volumes: too many mounts (at most %d with managed_ssh, "
                                        "identity and the CA bundle)",
                                        RT_MOUNTS_MAX - 6);
                if (!(st->mounts = calloc(n_mounts + n_ca + n_identity + 1, sizeof(*st->mounts))))
                        return err_set(e, -ENOMEM, "out of memory");
                if (n_mounts)
                        memcpy(st->mounts, spec->mounts, n_mounts * sizeof(*st->mounts));
                for (size_t i = 0; i < SBX_CA_BUNDLE_PATHS; i++)
                        if (ca_present[i])
                                st->mounts[n_mounts++] = (struct rt_mount){
                                        .kind = RT_MOUNT_BIND,
                                        .target = sbx_ca_bundle_paths[i],
                                        .source = st->ca_bundle,
                                        /* idmapped: root's file inside too
                                         * (read-only, so writes fail EROFS) */
                                        .flags = RT_MOUNT_RO | RT_MOUNT_NOSUID | RT_MOUNT_NODEV |
                                                 RT_MOUNT_NOEXEC | RT_MOUNT_IDMAP,
                                };
                /* identity: directories, so that a rotated token (a new
                 * file renamed over the old) and a restarted warrend's
                 * new socket are seen inside */
                if (n_identity) {
                        st->mounts[n_mounts++] = (struct rt_mount){
                                .kind = RT_MOUNT_BIND,
                                .target = SBX_IDENTITY_DIR,
                                .source = st->identity_dir,
                                .flags = RT_MOUNT_RO | RT_MOUNT_NOSUID | RT_MOUNT_NODEV |
                                         RT_MOUNT_NOEXEC,
                        };
                        st->mounts[n_mounts++] = (struct rt_mount){
                                .kind = RT_MOUNT_BIND,
                                .target = SBX_IDENTITY_API_DIR,
                                .source = m->identity_api_dir,
                                .flags = RT_MOUNT_RO | RT_MOUNT_NOSUID | RT_MOUNT_NODEV |
                                         RT_MOUNT_NOEXEC,
                        };
                }
                mounts = st->mounts;
        }
        if (spec->n_ssh) {
                struct stat dst;
                bool had_dir = stat(dir, &dst) == 0;
                if ((r = sbx_ssh_dir_prepare_sb(sb, dir, e)) < 0)
                        return r;
                if (!had_dir)
                        st->made |= MADE_SSH_DIR;
                snprintf(st->ssh_src, sizeof(st->ssh_src), "%s/ssh", dir);
                st->mounts[n_mounts++] = (struct rt_mount){
                        .kind = RT_MOUNT_BIND,
                        .target = SBX_SSH_DIR,
                        .source = st->ssh_src,
                        .flags = RT_MOUNT_RO | RT_MOUNT_NOSUID | RT_MOUNT_NODEV | RT_MOUNT_NOEXEC,
                };
                mounts = st->mounts;
        }
        struct rt_sandbox_config cfg = {
                .id = sb->id,
                .dir = dir,
                /* one template: the default size's (any other size is a
                 * mkfs of its own, so no client fills the dir with them) */
                .disk_template_dir =
                        limits.disk_bytes == m->default_disk ? m->disk_templates : NULL,
                .layers = (const char *const *) img->layer_dirs,
                .n_layers = img->n_layers,
                .hostname = hostname,
                .init_path = m->init_path,
                .limits = limits,
                .log_fd = -1,
                .mounts = mounts,
                .n_mounts = n_mounts,
                .resolv_conf = m->net && !spec->block_network
                                       ? sbx_network_resolv_conf_slot(m->net, sb->net_slot, resolv,
                                                                      sizeof(resolv))
                                       : NULL,
                .net = sb->net_slot >= 0 ? &net : NULL, /* a pool entry's veth is made */
        };
        sbx_uid_slot_config(sb->uid_slot, &cfg);
        /* A warm-pool entry starts mounting its root now and the row is
         * written meanwhile. Its dir and cgroups existed without a row
         * already; a crash before the insert leaves just that, which a
         * restart removes like any dir without a row. */
        if (st->pooled) {
                sb->rt = TAKE_PTR(st->pooled);
                struct wr_err pe = {0};
                r = sbx_rt_start_send(m, sb->rt, &cfg, &st->start, &pe);
                if (r < 0) {
                        /* -ESTALE: the entry broke while parked; create
                         * afresh below (same id) */
                        log_debug("warm pool: %s", pe.msg);
                        struct wr_err de = {0};
                        sbx_rt_destroy(m, sb->rt, &de);
                        rt_sandbox_free(TAKE_PTR(sb->rt));
                        if (r != -ESTALE) {
                                if (e)
                                        *e = pe;
                                return r;
                        }
                }
        }
        /* A claimed entry is recorded RUNNING before it is registered with
         * warren-egress: its policy is on disk first, so that a restart in
         * between re-registers it policed (never OPEN). Until registered,
         * its address is in no set: everything it sends is dropped. */
        bool policy_written = false;
        if (sb->rt && spec->net_mode && sbx_network_egress(m->net)) {
                if ((r = sbx_egress_policy_write(rt_sandbox_dir(sb->rt), spec->net_mode,
                                                 spec->net_policy, spec->net_policy_len, e)) < 0)
                        return r;
                policy_written = true;
        }
        if ((r = record_pending(st, ref, e)) < 0)
                return r;
        st->tp[T_RECORD] = sbx_mono_ns();
        if (sb->rt) {
                /* While the child mounts: connect (init accepts on the
                 * socket the prestart bound once it runs), record RUNNING
                 * with init's pid and start time (both known since the
                 * prestart: a restart in between finds either init or
                 * nothing, see recovery) and load the reply. */
                if ((r = sbx_rt_ctl_connect(m, sb->rt, &sb->ctl_fd, e)) < 0)
                        return err_prefix(e, r, "connect to warren-init");
                if ((r = record_started(sb, e)) < 0 ||
                    (r = store_sandbox_load(m->store, sb->id, ret, e)) < 0)
                        return r;
                st->made |= MADE_LOADED;
                if ((r = sbx_rt_start_wait(m, sb->rt, &st->start, e)) < 0)
                        return r;
        } else {
                if ((r = sbx_rt_create(m, &cfg, false, &sb->rt, e)) < 0)
                        return r;
                if ((r = sbx_rt_ctl_connect(m, sb->rt, &sb->ctl_fd, e)) < 0)
                        return err_prefix(e, r, "connect to warren-init");
        }
        if (spec->n_ssh && (r = sbx_ssh_start(sb, spec->ssh, spec->n_ssh, e)) < 0)
                return r;
        uint64_t te = sbx_mono_ns();
        if ((r = egress_setup(sb, spec, policy_written, e)) < 0)
                return r;
        if (sb->egress_registered)
                log_debug("sandbox %s: egress %s %.3f ms", sb->id,
                          spec->net_mode ? "registration + self-check" : "registration (open)",
                          (double) (sbx_mono_ns() - te) / 1e6);
        st->tp[T_RUNTIME] = sbx_mono_ns();

        /* From here on the manager owns sb; a failure ends it like any
         * sandbox (sbx_finalize records FAILED with the reason). */
        st->made |= MADE_ARMED;
        if ((r = sbx_arm(TAKE_PTR(st->sb), e)) < 0) {
                st->made &= ~(unsigned) MADE_ARMED; /* destroyed and freed: the row is ours */
                store_sandbox_update_status(m->store, id, STORE_SANDBOX_FAILED,
                                            e ? e->msg : "failed", NULL);
                st->made &= ~(unsigned) MADE_ROW;
                return r;
        }
        st->tp[T_CONNECT] = sbx_mono_ns();
        if ((r = start_entrypoint(sb, entry, e)) < 0) {
                sb->term_reason = "entrypoint failed to start";
                sb->final_status = STORE_SANDBOX_FAILED;
                sbx_finalize(sb);
                return r;
        }
        if (!(st->made & MADE_LOADED)) {
                if ((r = record_started(sb, e)) < 0 ||
                    (r = store_sandbox_load(m->store, sb->id, ret, e)) < 0) {
                        sb->term_reason = "recording failed";
                        sb->final_status = STORE_SANDBOX_FAILED;
                        sbx_finalize(sb);
                        return r;
                }
                st->made |= MADE_LOADED;
        }
        st->tp[T_STARTED] = sbx_mono_ns();
        log_info("sandbox %s created (image %s)", sb->id, sb->image_id);
        return 0;
}

int sbx_manager_set_identity(struct sbx_manager *m, sbx_identity_issue_fn issue, void *userdata,
                             const char *api_dir) {
        char *d = api_dir ? strdup(api_dir) : NULL;
        if (api_dir && !d)
                return -ENOMEM;
        free(m->identity_api_dir);
        m->identity_api_dir = d;
        m->identity_issue = d ? issue : NULL;
        m->identity_userdata = userdata;
        return 0;
}

int sbx_create(struct sbx_manager *m, const struct sbx_spec *spec, const struct img_info *img,
               struct store_sandbox *ret, struct wr_err *e) {
        struct create_state st = {.m = m, .spec = spec, .img = img, .tp = {sbx_mono_ns()}};
        const char *ref = sbx_image_ref(m, spec);
        int r = create_steps(&st, ref, ret, e);
        if (r >= 0)
                free(st.mounts);
        if (r < 0) {
                create_undo(&st, ret, e);
                m->metrics.create_failed++;
                return err_prefix(e, r, "create sandbox");
        }
        uint64_t end = sbx_mono_ns();
        m->metrics.created++;
        sbx_histogram_observe(&m->metrics.create, (double) (end - st.tp[T_START]) / 1e9);
        log_debug("sandbox %s: create %.3f ms: checks+image %.3f, record %.3f, runtime%s %.3f, "
                  "connect %.3f, started %.3f",
                  ret->id, (double) (end - st.tp[T_START]) / 1e6,
                  (double) (st.tp[T_IMAGE] - st.tp[T_START]) / 1e6,
                  (double) (st.tp[T_RECORD] - st.tp[T_IMAGE]) / 1e6, st.was_pooled ? " (pool)" : "",
                  (double) (st.tp[T_RUNTIME] - st.tp[T_RECORD]) / 1e6,
                  (double) (st.tp[T_CONNECT] - st.tp[T_RUNTIME]) / 1e6,
                  (double) (st.tp[T_STARTED] - st.tp[T_CONNECT]) / 1e6);
        return 0;
}
