/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* warrend's configuration: defaults, then the config file (--config FILE,
 * lines "key = value" with the long flag names as keys), then the
 * environment (WARREN_STATE_DIR, WARREN_LOG_LEVEL), then the command line.
 * A --listen on the command line replaces the config file's listen list. */

#include <stdbool.h>
#include <stdint.h>
#include <stddef.h>
#include <stdio.h>

#include "basic/err.h"
#include "basic/log.h"

#define DAEMON_DEFAULT_LISTEN "unix:/run/warren/warren.sock"
#define DAEMON_DEFAULT_STATE_DIR "/var/lib/warren"

/* Where a setting came from; a higher source overrides a lower one. */
enum daemon_config_source {
        DAEMON_CONFIG_DEFAULT = 0,
        DAEMON_CONFIG_FILE = 1,
        DAEMON_CONFIG_ENV = 2,
        DAEMON_CONFIG_FLAG = 3,
};

struct daemon_config {
        char **listen; /* normalized: "unix:/path", "tcp:H:P" or "tls:H:P" */
        size_t n_listen;
        enum daemon_config_source listen_source; /* where the list came from */
        char *state_dir;
        char *admin_listen;          /* HOST:PORT or NULL */
        char *issuer;                /* --issuer: workload identity issuer URL, or NULL */
        int identity_token_lifetime; /* seconds; 0 = 3600 */
        bool identity_admin;         /* --identity-role admin */
        char *default_image;         /* NULL = "sandbox:latest" */
        char *tls_cert;
        char *tls_key;
        char *config_file;
        char *registry_config; /* registry mirrors/insecure (JSON) or NULL */
        char *docker_config;   /* docker-style config.json (credentials) or NULL */
        size_t exec_log_size;  /* bytes of output kept per exec; 0 = default */
        /* stop build steps below this much free space in the state dir's
         * file system (docs/images.md); unset: the default */
        uint64_t build_min_free;
        bool build_min_free_set;
        uint64_t default_disk; /* --default-disk: 0 = unbounded (when set) */
        bool default_disk_set;
        enum log_level log_level;
        enum log_format log_format;
        bool enable_diag;
        bool pull_loopback_only;
        bool terminate_on_exit; /* stop sandboxes when warrend exits */
        /* --insecure-tcp-i-know: serve plaintext tcp: listeners that are
         * not on loopback, callers trusted without a token */
        bool insecure_tcp;
        /* --insecure-tcp: serve plaintext tcp: listeners on loopback, callers
         * without a token trusted as the operator (tests, local tools) */
        bool insecure_tcp_loopback;
        unsigned warm_pool; /* sandboxes' host resources prepared ahead */
        bool userns_off;    /* --userns=off: sandboxes without user namespaces */
        /* the default network: the sandbox range (NULL = the default,
         * "none" = loopback only) and the resolver sandboxes are told
         * about (NULL = the host's) */
        char *sandbox_cidr;
        char *upstream_dns;
        char *egress_upstream_ca; /* --egress-upstream-ca (NULL: the host's bundle) */
        bool rotate_egress_ca;    /* --rotate-egress-ca: rotate and exit */
        bool no_egress;           /* --no-egress: warren-egress is not started */
        bool privsep;             /* --privsep: teardown, signals, freezer by warren-priv */
        char *user;         /* --user NAME (with --privsep): drop to it after start-up (phase 5) */
        bool no_exec_spool; /* --no-exec-spool: execs do not survive a restart */
        /* the K8S compute class (docs/k8s.md): a kubeconfig (JSON) or
         * "in-cluster"; NULL = no cluster. Its namespace and the
         * warren-init image (NULL = defaults) */
        char *k8s_kubeconfig;
        char *k8s_namespace;
        char *k8s_init_image;
        char *k8s_callback;           /* --k8s-callback IP:PORT */
        char *k8s_callback_advertise; /* --k8s-callback-advertise IP:PORT */
        bool help;
        bool version;
};

/* Fill c from defaults, the config file, the environment and argv. On
 * error returns -EINVAL (bad flag or value), -ENOENT/-EACCES (config file)
 * with a one-line message in e; c is then still safe to clear. A TLS
 * listener ("tls:" or "tcp:" with --tls-cert/--tls-key) is validated here:
 * cert and key must be given together; TLS listeners may be on any address
 * (their callers need an API token). A plaintext tcp: listener trusts its
 * callers without a token, so it is refused with -EINVAL naming the
 * listener unless --insecure-tcp is given and it is on loopback
 * (rpc_listen_addr_is_loopback), or --insecure-tcp-i-know (any address). */
int daemon_config_load(struct daemon_config *c, int argc, char **argv, struct wr_err *e);

/* Free everything c holds. */
void daemon_config_clear(struct daemon_config *c);

/* The --help text. */
void daemon_config_usage(FILE *f);
