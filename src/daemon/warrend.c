/* SPDX-License-Identifier: Apache-2.0 */
/* warrend: the Warren daemon. Parses its configuration, checks that it can
 * run (root, usable state dir), opens the store, serves the gRPC API on one
 * libuv loop, and shuts down gracefully on SIGTERM/SIGINT. */
#include <errno.h>
#include <signal.h>
#include <sys/resource.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <uv.h>

#include "api/api.h"
#include "api/wid.h"
#include "basic/err.h"
#include "basic/helperpath.h"
#include "basic/log.h"
#include "daemon/keeper.h"
#include "signer/ca.h"
#include "daemon/admin.h"
#include "daemon/config.h"
#include "daemon/drop.h"
#include "daemon/statedir.h"
#include "image/image.h"
#include "image/fetch.h"
#include "k8s/k8s.h"
#include "image/pull.h"
#include "priv/client.h"
#include "rpc/server.h"
#include "runtime/runtime.h"
#include "sandbox/exec.h"
#include "sandbox/sandbox.h"
#include "store/store.h"
#include "volume/volume.h"

/* In-flight calls get this long to finish after SIGTERM. */
#define SHUTDOWN_GRACE_MS 5000

struct daemon {
        struct daemon_config cfg;
        uv_loop_t loop;
        bool loop_ready;
        uv_signal_t sig_term, sig_int;
        int n_signals_open;
        struct rpc_server *server;
        struct store *store;
        struct keeper *keeper;    /* warren-signer keeping the secrets key; NULL: none */
        struct keeper *id_keeper; /* ... the workload-identity signing key */
        struct priv_client *priv; /* --privsep: warren-priv; NULL: none */
        /* --user: the listeners bound before the drop, one per cfg.listen
         * (-EBADF: taken by the server); NULL without --user */
        int *listen_fd;
        int admin_fd; /* --user: --admin-listen bound before the drop, or -EBADF */
        bool dropped; /* --user: running as that user now */
        struct img_store *images;
        struct api_ctx ctx;
        char *state_dir; /* absolute */
        int lock_fd;
        const char *services[16];
        size_t n_services;
        /* Listeners other machines can reach, served unauthenticated
         * (--insecure-tcp-i-know); the strings are cfg.listen's. */
        const char **insecure;
        size_t n_insecure;
        bool stopping;
        struct admin *admin; /* --admin-listen; NULL when off or closed */
        char *issuer;        /* workload identity iss (--issuer or the admin URL) */
        /* sandbox identity: the directory of the socket mounted into
         * identity=True sandboxes (NULL: identity=True refused) */
        char *identity_api_dir;
        struct admin_sources admin_src;
        /* writes the queued audit records (store_audit_flush) every 250 ms;
         * unref'd: it never keeps the loop alive */
        uv_timer_t audit_timer;
        bool audit_timer_open;
};

static void audit_tick(uv_timer_t *t) {
        struct daemon *d = t->data;
        struct wr_err e = {0};
        if (d->store && store_audit_flush(d->store, &e) < 0)
                log_warn("audit: %s", e.msg);
}

static uint64_t monotonic_usec(void) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t) ts.tv_sec * 1000000u + (uint64_t) ts.tv_nsec / 1000u;
}

/* Every finished RPC, for the admin endpoint's counters. */
static void on_call_status(const char *path, int status, void *userdata) {
        struct daemon *d = userdata;
        if (d->admin)
                admin_rpc_observe(path, status, d->admin);
}

static void signal_closed(uv_handle_t *h) {
        struct daemon *d = h->data;
        d->n_signals_open--;
}

static void shutdown_done(void *userdata) {
        struct daemon *d = userdata;
        log_debug("rpc server stopped");
        if (!uv_is_closing((uv_handle_t *) &d->sig_term))
                uv_close((uv_handle_t *) &d->sig_term, signal_closed);
        if (!uv_is_closing((uv_handle_t *) &d->sig_int))
                uv_close((uv_handle_t *) &d->sig_int, signal_closed);
}

static void on_signal(uv_signal_t *h, int signum) {
        struct daemon *d = h->data;
        if (d->stopping) {
                log_info("received SIG%s again; still shutting down (in-flight calls are "
                         "cancelled after %d ms)",
                         sigabbrev_np(signum), SHUTDOWN_GRACE_MS);
                return;
        }
        d->stopping = true;
        log_info("received SIG%s, shutting down", sigabbrev_np(signum));
        /* Sandboxes outlive the daemon (the next one re-attaches), unless
         * --terminate-on-exit: either way their exec streams end here. */
        struct sbx_manager *m = d->ctx.sandboxes;
        d->ctx.sandboxes = NULL;
        api_admission_stop(&d->ctx); /* waiting creates: UNAVAILABLE */
        sbx_manager_free(m);
        api_sbx_identity_stop(&d->ctx);
        /* Pods keep running too (the next warrend re-attaches them) */
        k8s_class_free(d->ctx.k8s);
        d->ctx.k8s = NULL;
        admin_close(d->admin);
        d->admin = NULL;
        api_health_shutdown(&d->ctx);
        rpc_server_shutdown(d->server, SHUTDOWN_GRACE_MS, shutdown_done, d);
}

static int register_services(struct daemon *d, struct wr_err *e) {
        static const struct {
                const char *name;
                int (*reg)(struct rpc_server *s);
        } services[] = {
                {"warren.v1.System", api_system_register},
                {"grpc.health.v1.Health", api_health_register},
                {"warren.v1.Sandboxes", api_sandboxes_register},
                {"warren.v1.Volumes", api_volumes_register},
                {"warren.v1.Files", api_files_register},
                {"warren.v1.Secrets", api_secrets_register},
                {"warren.v1.Identity", api_identity_register},
                {"warren.v1.Images", api_images_register},
        };
        for (size_t i = 0; i < ELEMENTSOF(services); i++) {
                int r = services[i].reg(d->server);
                if (r < 0)
                        return err_set(e, r, "register %s: %s", services[i].name, strerror(-r));
                d->services[d->n_services++] = services[i].name;
        }
        if (d->cfg.enable_diag) {
                int r = api_diag_register(d->server);
                if (r < 0)
                        return err_set(e, r, "register warren.v1.Diag: %s", strerror(-r));
                d->services[d->n_services++] = "warren.v1.Diag";
        }
        d->ctx.services = d->services;
        d->ctx.n_services = d->n_services;
        return 0;
}

/* A listener other machines can reach, allowed by --insecure-tcp-i-know
 * (daemon_config_load refuses it otherwise): say so loudly and let
 * System.GetVersion report it. */
static int note_insecure_listener(struct daemon *d, const char *addr, struct wr_err *e) {
        const char **l = reallocarray(d->insecure, d->n_insecure + 1, sizeof(*l));
        if (!l)
                return err_set(e, -ENOMEM, "out of memory");
        d->insecure = l;
        d->insecure[d->n_insecure++] = addr;
        d->ctx.insecure_listeners = d->insecure;
        d->ctx.n_insecure_listeners = d->n_insecure;
        log_warn("!!! INSECURE: %s is served WITHOUT AUTHENTICATION "
                 "(--insecure-tcp-i-know): anyone who can connect to it can create sandboxes, "
                 "run commands in them and read every secret !!!",
                 addr);
        return 0;
}

static int start_listeners(struct daemon *d, struct wr_err *e) {
        for (size_t i = 0; i < d->cfg.n_listen; i++) {
                const char *addr = d->cfg.listen[i];
                if (!rpc_listen_addr_is_loopback(addr) && strncmp(addr, "tcp:", 4) == 0) {
                        if (!d->cfg.insecure_tcp) /* daemon_config_load refused it already */
                                return err_set(e, -EPERM,
                                               "listen %s: not loopback and no "
                                               "--insecure-tcp-i-know",
                                               addr);
                        int r = note_insecure_listener(d, addr, e);
                        if (r < 0)
                                return r;
                }
                if (strncmp(addr, "unix:", 5) == 0) {
                        int r = daemon_socket_dir_prepare(addr + 5, e);
                        if (r < 0)
                                return err_prefix(e, r, "listen %s", addr);
                }
                int r;
                if (d->listen_fd && d->listen_fd[i] >= 0) {
                        r = rpc_server_listen_fd(d->server, addr, 0, d->listen_fd[i], e);
                        d->listen_fd[i] = -EBADF;
                } else
                        r = rpc_server_listen(d->server, addr, e);
                if (r < 0) {
                        if (!e || !e->code)
                                err_set(e, r, "%s", strerror(-r));
                        return err_prefix(e, r, "listen %s", addr);
                }
                if (strncmp(addr, "unix:", 5) != 0) {
                        /* Show the real port when 0 was asked for. */
                        char shown[300];
                        const char *colon = strrchr(addr, ':');
                        int port = rpc_server_port(d->server);
                        if (colon && strcmp(colon, ":0") == 0 && port > 0) {
                                snprintf(shown, sizeof(shown), "%.*s:%d", (int) (colon - addr),
                                         addr, port);
                                log_info("listening on %s", shown);
                        } else
                                log_info("listening on %s", addr);
                } else
                        log_info("listening on %s", addr);
        }
        if (d->admin)
                log_info("admin listener %s: serving /metrics and /healthz (port %d)",
                         d->cfg.admin_listen, admin_port(d->admin));
        return 0;
}

static void daemon_free(struct daemon *d) {
        struct sbx_manager *m = d->ctx.sandboxes;
        d->ctx.sandboxes = NULL;
        api_admission_stop(&d->ctx);
        if (m)
                sbx_manager_free(m);
        api_sbx_identity_stop(&d->ctx);
        k8s_class_free(d->ctx.k8s);
        d->ctx.k8s = NULL;
        admin_close(d->admin);
        d->admin = NULL;
        rpc_server_free(d->server);
        d->server = NULL;
        api_health_free(&d->ctx);
        /* registry pulls: close the client's poll/timer handles on the loop */
        img_pull_shutdown(d->images);
        if (d->audit_timer_open) {
                uv_close((uv_handle_t *) &d->audit_timer, NULL);
                d->audit_timer_open = false;
        }
        keeper_unwatch(d->keeper);
        keeper_unwatch(d->id_keeper);
        if (d->loop_ready) {
                /* Run until every handle (including the server's) is closed. */
                uv_run(&d->loop, UV_RUN_DEFAULT);
                if (uv_loop_close(&d->loop) == UV_EBUSY)
                        log_warn("event loop still had open handles at exit");
        }
        /* After the loop: no volume call or commit is left; sandboxes that
         * outlive warrend keep their own mounts of their volumes. */
        vol_manager_free(d->ctx.volumes);
        d->ctx.volumes = NULL;
        /* After the server: its import calls are freed by now. */
        img_store_free(d->images);
        d->images = NULL;
        store_close(d->store);
        d->store = NULL;
        keeper_free(d->keeper);
        d->keeper = NULL;
        wid_keys_free(d->ctx.wid);
        d->ctx.wid = NULL;
        keeper_free(d->id_keeper);
        d->id_keeper = NULL;
        /* after the loop: no teardown worker asks it any more */
        priv_client_free(d->priv);
        d->priv = NULL;
        free(d->issuer);
        d->issuer = NULL;
        free(d->identity_api_dir);
        d->identity_api_dir = NULL;
        for (size_t i = 0; d->listen_fd && i < d->cfg.n_listen; i++)
                safe_close(d->listen_fd[i]);
        d->admin_fd = safe_close(d->admin_fd);
        free(d->listen_fd);
        d->listen_fd = NULL;
        d->lock_fd = safe_close(d->lock_fd);
        free(d->state_dir);
        d->state_dir = NULL;
        free(d->insecure);
        d->insecure = NULL;
        d->n_insecure = 0;
        daemon_config_clear(&d->cfg);
}

/* A helper binary `name` (basic/helperpath.h: $envvar, next to warrend,
 * the build tree, the libexec dir). 0 with its path in out, or -ENOENT. */
static int find_helper(const char *name, const char *envvar, const char *subdir, char *out,
                       size_t size) {
        return helper_path_find(name, envvar, subdir, out, size);
}

/* The static warren-init binary (WARREN_INIT, see find_helper). */
static int find_init(char *out, size_t size, struct wr_err *e) {
        if (find_helper("warren-init", "WARREN_INIT", "init", out, size) == 0)
                return 0;
        const char *env = getenv("WARREN_INIT");
        if (env && *env)
                return err_set(e, -ENOENT, "WARREN_INIT=%s: not executable", env);
        return err_set(e, -ENOENT,
                       "warren-init not found next to warrend or in /usr/libexec/warren; build "
                       "it (make build) or set WARREN_INIT");
}

/* warren-egress (WARREN_EGRESS, see find_helper). 0 or -ENOENT. */
static int find_egress(char *out, size_t size) {
        return find_helper("warren-egress", "WARREN_EGRESS", "egress", out, size);
}

/* warren-signer (WARREN_SIGNER, see find_helper). 0 or -ENOENT. */
static int find_signer(char *out, size_t size) {
        return find_helper("warren-signer", "WARREN_SIGNER", "signer", out, size);
}

/* warren-priv (WARREN_PRIV, see find_helper). 0 or -ENOENT. */
static int find_priv(char *out, size_t size) {
        return find_helper("warren-priv", "WARREN_PRIV", "priv", out, size);
}

/* --privsep: the image store's warren-unpack through warren-priv
 * (UNPACK_START, docs/privsep.md "Phase 3, helpers"). */
static int unpack_by_priv(void *userdata, const char *dir, int tar_fd, int report_fd, int *ret_pid,
                          int *ret_pidfd, struct wr_err *e) {
        struct daemon *d = userdata;
        struct priv_helper ph;
        int r = priv_unpack_start(d->priv, dir, tar_fd, report_fd, &ph, e);
        if (r < 0)
                return r;
        *ret_pid = (int) ph.pid;
        *ret_pidfd = ph.pidfd;
        return 0;
}

/* --privsep: every pull's warren-fetch through warren-priv (HELPER_START
 * FETCH, docs/privsep.md "warren-fetch started by warren-priv"): it
 * confines itself from root, in a chroot that must stay root's. */
static int fetch_by_priv(void *userdata, int sock, int registry_config_fd, int docker_config_fd,
                         bool loopback_only, pid_t *ret_pid, int *ret_pidfd, struct wr_err *e) {
        struct daemon *d = userdata;
        return priv_fetch_start(d->priv, sock, registry_config_fd, docker_config_fd, loopback_only,
                                ret_pid, ret_pidfd, e);
}

/* --privsep: the unpacked trees carry the tar's owners (the top dir is
 * usually root's), so warren-priv moves and removes them (LAYER_COMMIT,
 * LAYER_REMOVE: docs/privsep.md "Phase 5, layers, as built"); with or
 * without --user, one path. */
static int layer_commit_by_priv(void *userdata, const char *tmp_name, const char *hex,
                                struct wr_err *e) {
        struct daemon *d = userdata;
        return priv_layer_commit(d->priv, tmp_name, hex, e);
}

static int layer_remove_by_priv(void *userdata, bool tmp, const char *name, struct wr_err *e) {
        struct daemon *d = userdata;
        return priv_layer_remove(d->priv, tmp ? PRIV_LAYER_DIR_TMP : PRIV_LAYER_DIR_SHA256, name,
                                 e);
}

/* --privsep: start warren-priv (docs/privsep.md) for the sandbox manager. */
static int start_priv(struct daemon *d, const char *init, struct wr_err *e) {
        char path[PATH_MAX];
        if (find_priv(path, sizeof(path)) < 0)
                return err_set(e, -ENOENT,
                               "--privsep: warren-priv not found next to warrend or in "
                               "/usr/libexec/warren; build it (make build) or set WARREN_PRIV");
        /* it creates the sandboxes: it runs warren-init itself (phase 2) */
        /* --user: the supervisor thread is started after the drop */
        int r = (d->cfg.user ? priv_client_new_held : priv_client_new_init)(path, d->state_dir,
                                                                            init, &d->priv, e);
        if (r < 0)
                return err_prefix(e, r, "--privsep");
        return 0;
}

/* warrend's own TCP ports (listeners, admin), for warren-egress's
 * --deny-port. */
static size_t own_ports(const struct daemon *d, uint16_t *ports, size_t max) {
        size_t n = 0;
        for (size_t i = 0; i < d->cfg.n_listen && n < max; i++) {
                const char *c = strrchr(d->cfg.listen[i], ':');
                if (strncmp(d->cfg.listen[i], "unix:", 5) != 0 && c && atoi(c + 1) > 0)
                        ports[n++] = (uint16_t) atoi(c + 1);
        }
        const char *a = d->cfg.admin_listen ? strrchr(d->cfg.admin_listen, ':') : NULL;
        if (a && atoi(a + 1) > 0 && n < max)
                ports[n++] = (uint16_t) atoi(a + 1);
        return n;
}

/* Each live sandbox holds a control connection, pidfds and cgroup fds in
 * warrend: lift the soft fd limit to the hard one (at least 65536 when
 * root may raise it). */
static void raise_nofile(void) {
        struct rlimit rl;
        if (getrlimit(RLIMIT_NOFILE, &rl) < 0)
                return;
        if (rl.rlim_max < 65536) {
                struct rlimit want = {65536, 65536};
                if (setrlimit(RLIMIT_NOFILE, &want) == 0)
                        return;
        }
        rl.rlim_cur = rl.rlim_max;
        (void) setrlimit(RLIMIT_NOFILE, &rl);
}

/* The K8S class's relays (src/k8s/bridge.c) give the sandbox manager a
 * control connection per Pod: exec there works as on the host class. */
static void k8s_relay_attach(const char *id, int ctl_fd, const char *workdir, char *const *env,
                             void *userdata) {
        struct wr_err e = {0};
        if (sbx_remote_attach(userdata, id, ctl_fd, workdir, env, &e) < 0)
                log_warn("sandbox %s: attaching its relay: %s", id, e.msg);
}

static void k8s_relay_end(const char *id, void *userdata) {
        sbx_remote_detach(userdata, id, true);
}

static int start_sandboxes(struct daemon *d, struct wr_err *e) {
        char init[PATH_MAX];
        int r = find_init(init, sizeof(init), e);
        if (r < 0)
                return r;
        struct wr_err he = {0};
        /* with --privsep warren-priv checks the host and holds warren-init
         * (its rt_prepare at start, HELLO_REPLY.host_check): not warrend */
        if (!d->cfg.privsep && rt_prepare(init, RT_CGROUP_AUTO, &he) < 0)
                log_warn("sandboxes will not start on this host: %s", he.msg);
        char egress[PATH_MAX];
        bool have_egress = !d->cfg.no_egress && find_egress(egress, sizeof(egress)) == 0;
        if (!have_egress && !d->cfg.no_egress)
                log_warn("warren-egress not found next to warrend or in /usr/libexec/warren (or "
                         "WARREN_EGRESS): network policies are refused");
        char signer[PATH_MAX];
        bool have_signer = have_egress && find_signer(signer, sizeof(signer)) == 0;
        if (have_egress && !have_signer)
                log_warn("warren-signer not found next to warrend or in /usr/libexec/warren (or "
                         "WARREN_SIGNER): no TLS interception (per-host rules and credentials "
                         "are refused)");
        if (d->cfg.privsep && !d->priv && (r = start_priv(d, init, e)) < 0)
                return r;
        if (d->priv) {
                struct priv_hello_reply h;
                if (priv_hello(d->priv, &h, &he) < 0)
                        log_warn("warren-priv: HELLO: %s", he.msg);
                else if (h.host_check)
                        log_warn("sandboxes will not start on this host: warren-priv's host "
                                 "check failed (%s; its log says why)",
                                 strerror((int) h.host_check));
        }
        uint16_t ports[16];
        size_t n_ports = own_ports(d, ports, ELEMENTSOF(ports));
        struct sbx_manager_config mc = {
                .egress_path = have_egress ? egress : NULL,
                .signer_path = have_signer ? signer : NULL,
                .egress_upstream_ca = d->cfg.egress_upstream_ca,
                .deny_ports = ports,
                .n_deny_ports = n_ports,
                .loop = &d->loop,
                .store = d->store,
                .images = d->images,
                .state_dir = d->state_dir,
                .init_path = init,
                .default_image = d->cfg.default_image,
                .terminate_on_exit = d->cfg.terminate_on_exit,
                .warm_pool = d->cfg.warm_pool,
                .default_disk = d->cfg.default_disk_set ? d->cfg.default_disk : SBX_DEFAULT_DISK,
                .userns_off = d->cfg.userns_off,
                .build_min_free = d->cfg.build_min_free_set ? d->cfg.build_min_free
                                                            : SBX_BUILD_MIN_FREE_DEFAULT,
                .sandbox_cidr = d->cfg.sandbox_cidr,
                .priv = d->priv,
                /* the test suites: no sandbox is pointed at the host's
                 * resolver unless asked (--upstream-dns) */
                .upstream_dns = d->cfg.upstream_dns         ? d->cfg.upstream_dns
                                : d->cfg.pull_loopback_only ? ""
                                                            : NULL,
        };
        r = sbx_manager_new(&mc, &d->ctx.sandboxes, e);
        if (r < 0)
                return err_prefix(e, r, "sandboxes");
        if (d->cfg.no_exec_spool)
                sbx_exec_set_spool(d->ctx.sandboxes, false);
        if (d->cfg.exec_log_size &&
            (r = sbx_exec_set_log_size(d->ctx.sandboxes, d->cfg.exec_log_size)) < 0)
                return err_set(e, r, "sandboxes: exec log size: out of memory");
        if (d->images)
                img_store_set_in_use(d->images, sbx_manager_image_in_use, d->ctx.sandboxes);
        log_debug("warren-init: %s", init);
        if (d->cfg.k8s_kubeconfig) {
                struct k8s_config kc = {
                        .kubeconfig = d->cfg.k8s_kubeconfig,
                        .namespace_ = d->cfg.k8s_namespace,
                        .init_image = d->cfg.k8s_init_image,
                        .state_dir = d->state_dir,
                        .terminate_on_exit = d->cfg.terminate_on_exit,
                        .callback = d->cfg.k8s_callback,
                        .callback_advertise = d->cfg.k8s_callback_advertise,
                        .relay_attach = k8s_relay_attach,
                        .relay_end = k8s_relay_end,
                        .relay_userdata = d->ctx.sandboxes,
                };
                if ((r = k8s_class_new(&d->loop, d->store, &kc, &d->ctx.k8s, e)) < 0)
                        return err_prefix(e, r, "compute class K8S");
        }
        return 0;
}

/* Registry configuration for pulls (src/image/pull.h): --registry-config,
 * --docker-config (default $DOCKER_CONFIG/config.json when that exists). */
static int daemon_pull_configure(struct daemon *d, struct wr_err *e) {
        _cleanup_free_ char *dflt = NULL;
        const char *docker = d->cfg.docker_config;
        const char *env = getenv("DOCKER_CONFIG");
        if (!docker && env && *env && asprintf(&dflt, "%s/config.json", env) >= 0 &&
            access(dflt, R_OK) == 0)
                docker = dflt;
        int r = img_pull_configure(d->images, d->cfg.registry_config, docker, e);
        if (r < 0)
                return err_prefix(e, r, "registry configuration");
        if (d->cfg.pull_loopback_only) {
                if ((r = img_pull_set_loopback_only(d->images, true, e)) < 0)
                        return r;
                log_info("pulls limited to registries on loopback");
        }
        if (d->cfg.registry_config || docker)
                log_info("registries: config %s, credentials %s",
                         d->cfg.registry_config ? d->cfg.registry_config : "(none)",
                         docker ? docker : "(none)");
        return 0;
}

/* SIGTERM and SIGINT start a graceful shutdown. On failure the handles
 * that were initialised are counted in n_signals_open (main closes them). */
static int start_signals(struct daemon *d, struct wr_err *e) {
        uv_signal_t *h[] = {&d->sig_term, &d->sig_int};
        const int signum[] = {SIGTERM, SIGINT};
        for (size_t i = 0; i < ELEMENTSOF(h); i++) {
                int r = uv_signal_init(&d->loop, h[i]);
                if (r < 0)
                        return err_set(e, r, "signal handler: %s", uv_strerror(r));
                h[i]->data = d;
                d->n_signals_open++;
                r = uv_signal_start(h[i], on_signal, signum[i]);
                if (r < 0)
                        return err_set(e, r, "signal handler: %s", uv_strerror(r));
        }
        return 0;
}

/* The secrets key goes to warren-signer (docs/signer.md "The secrets
 * key"): values sealed directly under it by an older warrend are rewrapped
 * with data keys first (the only time warrend reads the key itself), then
 * the signer keeps it. Without warren-signer warrend keeps it, and says so. */
static int start_keeper(struct daemon *d, struct wr_err *e) {
        char signer[PATH_MAX];
        if (find_signer(signer, sizeof(signer)) < 0) {
                log_warn("warren-signer not found next to warrend or in /usr/libexec/warren (or "
                         "WARREN_SIGNER): warrend keeps the secrets key in its own memory");
                return 0;
        }
        size_t n = 0;
        int r = store_secrets_rewrap(d->store, &n, e);
        if (r < 0)
                return err_prefix(e, r, "rewrap secrets with data keys");
        if (n)
                log_info("secrets: %zu values sealed directly under the secrets key rewrapped "
                         "with data keys",
                         n);
        return keeper_start(&d->loop, d->store, signer, &d->keeper, e);
}

/* Sandbox identity (identity=True; docs/security.md): the token
 * directories and their rotation, and the socket sandboxes reach the API
 * on: <state_dir>/identity-api/warren.sock, mounted (its directory,
 * read-only) into each such sandbox, serving the same API but trusting no
 * peer credentials (a token is required). Without keys, an issuer or the
 * socket, identity=True is refused and the rest of warrend works. */
static void start_identity(struct daemon *d) {
        if (!d->ctx.wid || !d->issuer || !d->ctx.sandboxes) {
                log_info("sandbox identity: off (needs workload identity keys and an issuer: "
                         "--admin-listen or --issuer)");
                return;
        }
        _cleanup_free_ char *dir = NULL, *addr = NULL;
        struct wr_err ie = {0};
        int r = 0;
        if (asprintf(&dir, "%s/identity-api", d->state_dir) < 0 ||
            asprintf(&addr, "unix:%s/warren.sock", dir) < 0)
                r = err_set(&ie, -ENOMEM, "out of memory");
        if (r == 0 && mkdir(dir, 0755) < 0 && errno != EEXIST)
                r = err_set(&ie, -errno, "mkdir %s: %s", dir, strerror(errno));
        if (r == 0)
                (void) chmod(dir, 0755);
        if (r == 0)
                r = rpc_server_listen_flags(d->server, addr, RPC_LISTEN_SANDBOX, &ie);
        if (r == 0)
                r = api_sbx_identity_start(&d->ctx, &ie);
        if (r == 0 &&
            sbx_manager_set_identity(d->ctx.sandboxes, api_sbx_identity_issue, &d->ctx, dir) < 0)
                r = err_set(&ie, -ENOMEM, "out of memory");
        if (r < 0) {
                log_error("sandbox identity: off: %s", ie.msg);
                return;
        }
        d->identity_api_dir = TAKE_PTR(dir);
        log_info("sandbox identity: tokens for %d s (role %s), API for sandboxes on %s",
                 d->ctx.identity_lifetime, d->ctx.identity_admin ? "admin" : "user", addr + 5);
}

/* --user: warren-priv died and this warrend, no longer root, cannot
 * start another. Exit at once (as a kill -9 would end it): the service
 * manager starts warrend again, as root, and the sandboxes, which run on,
 * are recovered. */
static void priv_lost(void *userdata) {
        const struct daemon *d = userdata;
        /* stopping already (a signal to the whole group reached warren-priv
         * too): the shutdown goes on without it */
        if (__atomic_load_n(&d->stopping, __ATOMIC_RELAXED))
                return;
        log_error("warren-priv died and warrend, dropped to its user (--user), cannot start "
                  "another: exiting; start warrend again (running sandboxes are recovered)");
        _exit(3);
}

/* --user (docs/privsep.md, phase 5): what needs root happens here, as
 * root: the state dir given to the user, warren-priv started (in the
 * host's mount namespace, as root), the listeners bound; then the drop.
 * Everything after runs as the user. */
static int daemon_drop(struct daemon *d, struct wr_err *e) {
        struct drop_user u;
        int r = drop_user_lookup(d->cfg.user, &u, e);
        if (r < 0)
                return r;
        /* the workload identity key, when missing or due, made now (root:
         * `warren-signer --jws-key-make`, as without --user) and given to
         * u with keys/ below: the dropped warrend execs nothing itself and
         * its signer is warren-priv's child (docs/privsep.md "The identity
         * key under --user") */
        char signer[PATH_MAX];
        _cleanup_free_ char *kdir = NULL;
        struct wr_err we = {0};
        if (find_signer(signer, sizeof(signer)) == 0 &&
            asprintf(&kdir, "%s/keys", d->state_dir) >= 0 &&
            wid_keys_make_due(kdir, time(NULL), signer, &we) < 0)
                log_warn("workload identity: %s", we.msg);
        r = drop_state_dir_own(d->state_dir, &u, e);
        if (r < 0)
                return err_prefix(e, r, "--user %s", u.name);
        char init[PATH_MAX];
        if ((r = find_init(init, sizeof(init), e)) < 0 || (r = start_priv(d, init, e)) < 0)
                return r;
        d->listen_fd = malloc(sizeof(int) * (d->cfg.n_listen ? d->cfg.n_listen : 1));
        if (!d->listen_fd)
                return err_set(e, -ENOMEM, "out of memory");
        for (size_t i = 0; i < d->cfg.n_listen; i++)
                d->listen_fd[i] = -EBADF;
        for (size_t i = 0; i < d->cfg.n_listen; i++) {
                const char *addr = d->cfg.listen[i];
                if (strncmp(addr, "unix:", 5) == 0 &&
                    (r = daemon_socket_dir_prepare(addr + 5, e)) < 0)
                        return err_prefix(e, r, "listen %s", addr);
                if ((r = rpc_listen_prebind(addr, 0, &d->listen_fd[i], e)) < 0)
                        return r;
        }
        /* the metrics listener too (a port below 1024 needs root); a port
         * in use is logged, not fatal, as without --user */
        if (d->cfg.admin_listen) {
                struct wr_err ae = {0};
                if (admin_prebind(d->cfg.admin_listen, &d->admin_fd, &ae) < 0)
                        log_error("admin listener %s: not served: %s", d->cfg.admin_listen, ae.msg);
        }
        r = drop_apply(d->state_dir, &u, e);
        if (r < 0)
                return r;
        d->dropped = true;
        priv_client_on_lost(d->priv, priv_lost, d);
        if ((r = priv_client_supervise(d->priv, e)) < 0)
                return r;
        return 0;
}

/* The event loop (once) and the RPC server on it (its TLS certificate
 * and key read now: with --user before the drop, so that they may stay
 * root's). */
static int server_new(struct daemon *d, struct wr_err *e) {
        int r;
        if (!d->loop_ready) {
                if ((r = uv_loop_init(&d->loop)) < 0)
                        return err_set(e, r, "event loop: %s", uv_strerror(r));
                d->loop_ready = true;
        }
        struct rpc_server_config rc = {
                .tls_cert = d->cfg.tls_cert,
                .tls_key = d->cfg.tls_key,
                .ctx = &d->ctx,
                .on_call_status = on_call_status,
                .on_call_status_userdata = d,
                /* every call: who is calling (tokens, environments), and
                 * the audit record of the mutating ones */
                .authorize = api_server_authorize,
                .on_call_end = api_server_call_end,
        };
        r = rpc_server_new(&d->loop, &rc, &d->server, e);
        if (r < 0)
                return err_prefix(e, r, "rpc server");
        return 0;
}

/* Bring everything up; on failure e says why. */
static int daemon_start(struct daemon *d, struct wr_err *e) {
        int r = daemon_state_dir_prepare(d->cfg.state_dir, &d->state_dir, &d->lock_fd, e);
        if (r < 0)
                return r;
        /* --user: the RPC server (its TLS key) before the drop */
        if (d->cfg.user && ((r = server_new(d, e)) < 0 || (r = daemon_drop(d, e)) < 0))
                return r;

        _cleanup_free_ char *db = NULL, *key = NULL;
        if (asprintf(&db, "%s/warren.db", d->state_dir) < 0 ||
            asprintf(&key, "%s/keys/secret.key", d->state_dir) < 0)
                return err_set(e, -ENOMEM, "out of memory");
        r = store_open(db, &d->store, e);
        if (r < 0)
                return r;
        r = store_set_secret_key_path(d->store, key);
        if (r < 0)
                return err_set(e, r, "out of memory");
        log_debug("store %s at schema version %d", db, store_schema_version(d->store));

        if (d->cfg.privsep) {
                /* phase 3, helpers: warren-priv runs before the keepers and
                 * the image store, whose unpacks it starts and (phase 5)
                 * whose layer trees it moves and removes, from the store's
                 * start-up collection on (docs/privsep.md "Phase 3,
                 * helpers", "Phase 5, layers"); with --user it was started
                 * before the drop (daemon_drop) */
                char init[PATH_MAX];
                if (!d->priv && ((r = find_init(init, sizeof(init), e)) < 0 ||
                                 (r = start_priv(d, init, e)) < 0))
                        return r;
                keeper_set_priv(d->priv);
        }
        const struct img_layer_ops layer_ops = {
                .commit = layer_commit_by_priv,
                .remove = layer_remove_by_priv,
                .userdata = d,
        };
        r = img_store_open_ops(d->state_dir, d->store, d->priv ? &layer_ops : NULL, &d->images, e);
        if (r < 0)
                return err_prefix(e, r, "image store");
        if (d->priv) {
                img_store_set_unpack_start(d->images, unpack_by_priv, d);
                img_fetcher_set_start(fetch_by_priv, d);
        }
        r = daemon_pull_configure(d, e);
        if (r < 0)
                return r;

        if (!d->loop_ready) {
                r = uv_loop_init(&d->loop);
                if (r < 0)
                        return err_set(e, r, "event loop: %s", uv_strerror(r));
                d->loop_ready = true;
        }
        r = start_keeper(d, e);
        if (r < 0)
                return r;

        d->ctx = (struct api_ctx){
                .loop = &d->loop,
                .store = d->store,
                .images = d->images,
                .state_dir = d->state_dir,
                .started_usec = monotonic_usec(),
                .diag_enabled = d->cfg.enable_diag,
        };
        r = start_sandboxes(d, e);
        if (r < 0)
                return r;
        /* after warren-priv started (--privsep: it mounts the volumes) */
        r = vol_manager_new_priv(d->state_dir, d->store, d->priv, &d->ctx.volumes, e);
        if (r < 0)
                return err_prefix(e, r, "volumes");
        if (d->cfg.admin_listen) {
                d->admin_src = (struct admin_sources){
                        .store = d->store,
                        .sandboxes = &d->ctx.sandboxes,
                        .priv = &d->priv,
                        .started_usec = d->ctx.started_usec,
                        .well_known = api_well_known,
                        .well_known_userdata = &d->ctx,
                };
                /* Metrics are auxiliary: a port in use is logged, not fatal. */
                struct wr_err ae = {0};
                int afd = TAKE_FD(d->admin_fd);
                /* dropped, a failed bind before the drop was logged then */
                if ((!d->dropped || afd >= 0) && admin_start(&d->loop, d->cfg.admin_listen, afd,
                                                             &d->admin_src, &d->admin, &ae) < 0)
                        log_error("admin listener %s: not served: %s", d->cfg.admin_listen, ae.msg);
        }
        /* Workload identity federation: keys in state_dir/keys, iss the
         * URL serving /.well-known/jwks.json (docs/security.md). Without
         * keys the rest of warrend works; the RPC answers UNAVAILABLE. */
        {
                _cleanup_free_ char *kdir = NULL;
                struct wr_err we = {0};
                /* with warren-signer the signing key is made and kept by
                 * it (docs/signer.md "Identity tokens"): warrend loads
                 * the public halves only */
                char signer[PATH_MAX];
                bool have_signer = find_signer(signer, sizeof(signer)) == 0;
                /* dropped: the key was made before the drop (daemon_drop),
                 * and its signer is started through warren-priv */
                const char *maker = d->dropped ? NULL : signer;
                if (asprintf(&kdir, "%s/keys", d->state_dir) >= 0 &&
                    (have_signer ? wid_keys_load_public(kdir, time(NULL), maker, &d->ctx.wid, &we)
                                 : wid_keys_load(kdir, time(NULL), &d->ctx.wid, &we)) < 0)
                        log_warn("workload identity: %s", we.msg);
                if (d->ctx.wid && have_signer &&
                    keeper_start_identity(&d->loop, d->ctx.wid, signer, &d->id_keeper, &we) < 0)
                        return err_set(e, -EIO, "workload identity: %s", we.msg);
                if (d->cfg.issuer)
                        d->issuer = strdup(d->cfg.issuer);
                else if (d->admin && strrchr(d->cfg.admin_listen, ':') &&
                         asprintf(&d->issuer, "http://%.*s:%d",
                                  (int) (strrchr(d->cfg.admin_listen, ':') - d->cfg.admin_listen),
                                  d->cfg.admin_listen, admin_port(d->admin)) < 0)
                        d->issuer = NULL;
                d->ctx.issuer = d->issuer;
                if (d->ctx.wid)
                        log_info("workload identity: issuer %s, key %s",
                                 d->issuer ? d->issuer : "(none: set --issuer or --admin-listen)",
                                 wid_keys_kid(d->ctx.wid));
        }
        d->ctx.identity_lifetime = d->cfg.identity_token_lifetime ? d->cfg.identity_token_lifetime
                                                                  : WID_MAX_LIFETIME_SEC;
        d->ctx.identity_admin = d->cfg.identity_admin;
        if ((r = api_admission_start(&d->ctx, e)) < 0)
                return r;
        if (!d->server && (r = server_new(d, e)) < 0)
                return r;
        d->ctx.server = d->server;
        r = register_services(d, e);
        if (r < 0)
                return r;

        r = start_signals(d, e);
        if (r < 0)
                return r;
        if (d->cfg.user) {
                sigset_t term;
                sigemptyset(&term);
                sigaddset(&term, SIGTERM);
                sigaddset(&term, SIGINT);
                (void) sigprocmask(SIG_UNBLOCK, &term, NULL);
        }

        r = start_listeners(d, e);
        if (r < 0)
                return r;
        start_identity(d);
        return 0;
}

int main(int argc, char **argv) {
        struct daemon d = {.lock_fd = -EBADF, .admin_fd = -EBADF};
        struct wr_err e = {0};

        if (daemon_config_load(&d.cfg, argc, argv, &e) < 0) {
                fprintf(stderr, "warrend: %s\n", e.msg);
                daemon_config_clear(&d.cfg);
                return 2;
        }
        if (d.cfg.help) {
                daemon_config_usage(stdout);
                daemon_config_clear(&d.cfg);
                return 0;
        }
        if (d.cfg.version) {
                printf("warrend %s\n", WARREN_VERSION);
                daemon_config_clear(&d.cfg);
                return 0;
        }
        int r;
        log_set_level(d.cfg.log_level);
        /* --user: the sockets exist (bound before the drop) before the
         * handlers of SIGTERM/SIGINT do: held until start_signals */
        sigset_t term;
        sigemptyset(&term);
        sigaddset(&term, SIGTERM);
        sigaddset(&term, SIGINT);
        if (d.cfg.user)
                (void) sigprocmask(SIG_BLOCK, &term, NULL);
        log_set_format(d.cfg.log_format);

        if (geteuid() != 0) {
                log_error("warrend must run as root (effective uid is %u): it creates "
                          "namespaces, cgroups and mounts; start it with sudo or as a system "
                          "service",
                          (unsigned) geteuid());
                daemon_config_clear(&d.cfg);
                return 1;
        }
        if (d.cfg.rotate_egress_ca) {
                /* one-shot: atomic file operations, safe beside a running
                 * warrend (docs/signer.md "Rotation") */
                r = signer_ca_rotate(d.cfg.state_dir, &e);
                if (r < 0)
                        fprintf(stderr, "warrend: rotate the egress CA: %s\n", e.msg);
                else
                        printf("egress CA rotated: %s/%s (the previous one is %s); sandboxes "
                               "created from now on trust both; restart warrend to sign with "
                               "the new key\n",
                               d.cfg.state_dir, SIGNER_CA_CERT_FILE, SIGNER_CA_OLD_CERT_FILE);
                daemon_config_clear(&d.cfg);
                return r < 0 ? 1 : 0;
        }
        signal(SIGPIPE, SIG_IGN);
        umask(022);
        raise_nofile();

        r = daemon_start(&d, &e);
        if (r < 0) {
                log_error("cannot start: %s", e.msg);
                if (d.server)
                        rpc_server_shutdown(d.server, 0, NULL, NULL);
                /* start_signals initialises sig_term, then sig_int. */
                int n = d.n_signals_open;
                if (n > 0)
                        uv_close((uv_handle_t *) &d.sig_term, signal_closed);
                if (n > 1)
                        uv_close((uv_handle_t *) &d.sig_int, signal_closed);
                daemon_free(&d);
                return 1;
        }
        log_info("warrend %s ready (state dir %s, %zu services%s)", WARREN_VERSION, d.state_dir,
                 d.n_services, d.cfg.enable_diag ? ", diag enabled" : "");
        if (uv_timer_init(&d.loop, &d.audit_timer) == 0) {
                d.audit_timer.data = &d;
                d.audit_timer_open = true;
                uv_timer_start(&d.audit_timer, audit_tick, 250, 250);
                uv_unref((uv_handle_t *) &d.audit_timer);
        }

        uv_run(&d.loop, UV_RUN_DEFAULT);

        log_info("warrend stopped");
        daemon_free(&d);
        return 0;
}
