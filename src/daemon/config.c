/* SPDX-License-Identifier: Apache-2.0 */
/* Command line, config file and environment of warrend. */
#include <stdio.h>

#include "daemon/config.h"
#include "rpc/server.h"

#include <ctype.h>
#include <errno.h>
#include <getopt.h>
#include <stdlib.h>
#include <string.h>

void daemon_config_usage(FILE *f) {
        fputs("Usage: warrend [OPTIONS]\n"
              "\n"
              "The Warren sandbox daemon.\n"
              "\n"
              "  --listen ADDR         serve gRPC on ADDR; repeatable. unix:/PATH,\n"
              "                        tcp:HOST:PORT (TLS when --tls-cert/--tls-key are\n"
              "                        given) or tls:HOST:PORT\n"
              "                        (default " DAEMON_DEFAULT_LISTEN ")\n"
              "  --state-dir DIR       state directory (default " DAEMON_DEFAULT_STATE_DIR ";\n"
              "                        env WARREN_STATE_DIR)\n"
              "  --admin-listen H:P    serve Prometheus /metrics and /healthz over HTTP\n"
              "                        (and the workload identity /.well-known documents)\n"
              "  --issuer URL          iss of workload identity tokens (default\n"
              "                        http://ADMIN-LISTEN, the address serving\n"
              "                        /.well-known/jwks.json)\n"
              "  --identity-token-lifetime SECONDS  lifetime of sandboxes' identity\n"
              "                        tokens (identity=True; 10..3600, default 3600);\n"
              "                        rotated at half of it\n"
              "  --identity-role ROLE  role of callers with a sandbox's identity token in\n"
              "                        its environment: user (default) or admin\n"
              "  --default-image NAME  image for sandboxes that name none (sandbox:latest)\n"
              "  --exec-log-size SIZE  output kept per exec for re-attaching clients\n"
              "                        (bytes, or with K/M/G suffix; default 16M)\n"
              "  --build-min-free SIZE stop a build step when the file system of the\n"
              "                        state dir has less than SIZE free (default 2G;\n"
              "                        0: no guard)\n"
              "  --default-disk SIZE   writable layer of a sandbox that asks for no disk\n"
              "                        size: a sparse ext4 image of SIZE (default 10G;\n"
              "                        at least 8M; 0: unbounded, on the state dir's\n"
              "                        file system)\n"
              "  --no-exec-spool       execs do not survive a warrend restart (no output\n"
              "                        spool: ~40% less CPU per streamed byte)\n"
              "  --tls-cert FILE       PEM certificate chain for TCP listeners\n"
              "  --tls-key FILE        PEM private key for TCP listeners\n"
              "  --insecure-tcp        serve plaintext tcp: listeners on loopback\n"
              "                        (127.0.0.0/8, ::1, localhost); callers there without\n"
              "                        a token act as the operator. Refused without it:\n"
              "                        remote clients use tls: and API tokens\n"
              "                        (docs/remote.md)\n"
              "  --insecure-tcp-i-know serve plaintext tcp: listeners on any address, callers\n"
              "                        without a token trusted as the operator: anyone who\n"
              "                        can connect can create sandboxes, run commands in\n"
              "                        them and read every secret\n"
              "  --log-level LEVEL     debug|info|warn|error (default info;\n"
              "                        env WARREN_LOG_LEVEL)\n"
              "  --log-format FORMAT   text|json (default text)\n"
              "  --registry-config FILE  registry mirrors and insecure registries (JSON,\n"
              "                        see docs/images.md)\n"
              "  --docker-config FILE  registry credentials (Docker's config.json format;\n"
              "                        default $DOCKER_CONFIG/config.json when set)\n"
              "  --config FILE         read \"key = value\" lines; keys are the long\n"
              "                        option names; options on the command line win\n"
              "  --enable-diag         serve warren.v1.Diag (tests and benchmarks)\n"
              "  --pull-loopback-only  pull only from registries on loopback (the test\n"
              "                        suites: nothing may leave the machine)\n"
              "  --terminate-on-exit   stop every sandbox when warrend exits (default:\n"
              "                        they keep running and the next warrend re-attaches)\n"
              "  --warm-pool N         keep N sandbox host resources prepared ahead\n"
              "                        (default 0)\n"
              "  --userns on|off       run each sandbox in a user namespace of its own,\n"
              "                        its root an unprivileged host uid (default on;\n"
              "                        off: sandbox root is the host's root;\n"
              "                        docs/security.md)\n"
              "  --sandbox-cidr CIDR   IPv4 range sandboxes get their /30 from (default\n"
              "                        100.96.0.0/16, or the next free /16 up to\n"
              "                        100.111.0.0/16; must not overlap the host's routes;\n"
              "                        \"none\": sandboxes get only a loopback)\n"
              "  --k8s-kubeconfig FILE the compute class K8S: sandboxes as Pods on the\n"
              "                        cluster of FILE (a kubeconfig in JSON form) or\n"
              "                        \"in-cluster\" (docs/k8s.md)\n"
              "  --k8s-namespace NS    the namespace of those Pods (default: the\n"
              "                        kubeconfig context's, else \"default\")\n"
              "  --k8s-init-image REF  the image the Pods get warren-init from\n"
              "                        (default warren/warren-init:latest)\n"
              "  --k8s-callback IP:PORT where warrend listens for the Pods' warren-relay\n"
              "                        (TLS; exec on Pods; default: the address of the\n"
              "                        default route's interface, port 7443)\n"
              "  --k8s-callback-advertise IP:PORT what the Pods dial (default: the\n"
              "                        --k8s-callback address)\n"
              "  --upstream-dns IP     resolver named in sandboxes' /etc/resolv.conf,\n"
              "                        reached through NAT (default: the host's IPv4\n"
              "                        nameservers; none with --pull-loopback-only);\n"
              "                        with warren-egress running, the upstream of its\n"
              "                        resolver (sandboxes then name their gateway)\n"
              "  --no-egress           do not start warren-egress: no network policies,\n"
              "                        sandbox DNS goes to --upstream-dns through NAT\n"
              "  --privsep             privilege separation, phase 1 (docs/privsep.md):\n"
              "                        start warren-priv and have it do the host side of\n"
              "                        sandbox teardown (cgroups, dirs, veths), signals\n"
              "                        and the freezer\n"
              "  --user NAME           with --privsep: after start-up (state dir, lock,\n"
              "                        listeners, warren-priv) drop to user NAME: no\n"
              "                        capabilities, seccomp, read-only mount namespace\n"
              "                        but the state dir (docs/privsep.md, phase 5)\n"
              "  --egress-upstream-ca FILE  CA bundle the upstream certificates of\n"
              "                        intercepted hosts are verified against (default:\n"
              "                        the host's /etc/ssl/certs/ca-certificates.crt)\n"
              "  --rotate-egress-ca    replace the egress CA of --state-dir with a new one\n"
              "                        (the old certificate kept as egress-ca.crt.old)\n"
              "                        and exit; a running warrend signs with the new key\n"
              "                        once it restarts\n"
              "  --help                show this help\n"
              "  --version             show the version\n"
              "\n"
              "Signals: SIGTERM or SIGINT shut down gracefully (exit 0).\n",
              f);
}

static int set_str(char **dst, const char *v) {
        char *p = strdup(v);
        if (!p)
                return -ENOMEM;
        free(*dst);
        *dst = p;
        return 0;
}

/* Normalize one --listen value. */
static int normalize_listen(const char *v, char **ret, struct wr_err *e) {
        if (strncmp(v, "unix:", 5) == 0) {
                const char *path = v + 5;
                if (strncmp(path, "//", 2) == 0)
                        path += 2; /* unix:///path */
                if (path[0] != '/')
                        return err_set(e, -EINVAL,
                                       "--listen %s: the unix socket path must be absolute "
                                       "(unix:/run/warren/warren.sock)",
                                       v);
                return asprintf(ret, "unix:%s", path) < 0 ? -ENOMEM : 0;
        }
        if (strncmp(v, "tcp:", 4) == 0 || strncmp(v, "tls:", 4) == 0) {
                const char *hp = v + 4, *colon = strrchr(hp, ':');
                char *end = NULL;
                long port = colon ? strtol(colon + 1, &end, 10) : -1;
                if (!colon || colon == hp || !end || *end || colon[1] == 0 || port < 0 ||
                    port > 65535)
                        return err_set(e, -EINVAL,
                                       "--listen %s: expected %.3s:HOST:PORT, e.g. "
                                       "%.3s:127.0.0.1:7443",
                                       v, v, v);
                return (*ret = strdup(v)) ? 0 : -ENOMEM;
        }
        return err_set(e, -EINVAL,
                       "--listen %s: expected unix:/PATH, tcp:HOST:PORT or tls:HOST:PORT", v);
}

static int add_listen(struct daemon_config *c, enum daemon_config_source src, const char *v,
                      struct wr_err *e) {
        if (src > c->listen_source) {
                for (size_t i = 0; i < c->n_listen; i++)
                        free(c->listen[i]);
                c->n_listen = 0;
                c->listen_source = src;
        }
        char *n = NULL;
        int r = normalize_listen(v, &n, e);
        if (r < 0)
                return r == -ENOMEM ? err_set(e, r, "out of memory") : r;
        char **l = reallocarray(c->listen, c->n_listen + 1, sizeof(*l));
        if (!l) {
                free(n);
                return err_set(e, -ENOMEM, "out of memory");
        }
        c->listen = l;
        c->listen[c->n_listen++] = n;
        return 0;
}

/* "123", "8M", "2Gi", "16KiB": bytes. */
static int parse_size(const char *v, uint64_t *ret) {
        char *end;
        errno = 0;
        unsigned long long n = strtoull(v, &end, 10);
        unsigned shift = *end == 'K'   ? 10
                         : *end == 'M' ? 20
                         : *end == 'G' ? 30
                         : *end == 'T' ? 40
                                       : 0;
        if (shift)
                end += strspn(end + 1, "iB") + 1;
        if (errno || end == v || *end || v[0] == '-' || n > (1ull << (50 - shift)))
                return -EINVAL;
        *ret = (uint64_t) n << shift;
        return 0;
}

static int parse_bool(const char *v, bool *ret) {
        if (!strcmp(v, "true") || !strcmp(v, "yes") || !strcmp(v, "on") || !strcmp(v, "1"))
                *ret = true;
        else if (!strcmp(v, "false") || !strcmp(v, "no") || !strcmp(v, "off") || !strcmp(v, "0"))
                *ret = false;
        else
                return -EINVAL;
        return 0;
}

/* Apply one setting. key is the long option name ("state-dir"). */
static int apply(struct daemon_config *c, enum daemon_config_source src, const char *key,
                 const char *v, struct wr_err *e) {
        int r = 0;
        if (!strcmp(key, "listen"))
                return add_listen(c, src, v, e);
        if (!strcmp(key, "state-dir")) {
                if (!*v)
                        return err_set(e, -EINVAL, "--state-dir: empty path");
                r = set_str(&c->state_dir, v);
        } else if (!strcmp(key, "exec-log-size")) {
                uint64_t n;
                if (parse_size(v, &n) < 0 || n == 0)
                        return err_set(e, -EINVAL, "--exec-log-size %s: expected a size like 8M",
                                       v);
                c->exec_log_size = (size_t) n;
        } else if (!strcmp(key, "build-min-free")) {
                uint64_t n;
                if (parse_size(v, &n) < 0)
                        return err_set(e, -EINVAL,
                                       "--build-min-free %s: expected a size like 2G (0: no guard)",
                                       v);
                c->build_min_free = n;
                c->build_min_free_set = true;
        } else if (!strcmp(key, "default-disk")) {
                uint64_t n;
                if (parse_size(v, &n) < 0 || (n && n < (8ull << 20)))
                        return err_set(e, -EINVAL,
                                       "--default-disk %s: expected a size of at least 8M like "
                                       "10G (0: unbounded)",
                                       v);
                c->default_disk = n;
                c->default_disk_set = true;
        } else if (!strcmp(key, "admin-listen"))
                r = set_str(&c->admin_listen, v);
        else if (!strcmp(key, "issuer"))
                r = set_str(&c->issuer, v);
        else if (!strcmp(key, "identity-token-lifetime")) {
                char *end;
                errno = 0;
                long n = strtol(v, &end, 10);
                if (errno || end == v || *end || n < 10 || n > 3600)
                        return err_set(e, -EINVAL,
                                       "--identity-token-lifetime %s: expected seconds, 10..3600",
                                       v);
                c->identity_token_lifetime = (int) n;
        } else if (!strcmp(key, "identity-role")) {
                if (strcmp(v, "user") != 0 && strcmp(v, "admin") != 0)
                        return err_set(e, -EINVAL, "--identity-role %s: expected user or admin", v);
                c->identity_admin = strcmp(v, "admin") == 0;
        } else if (!strcmp(key, "default-image")) {
                if (!*v)
                        return err_set(e, -EINVAL, "--default-image: empty image name");
                r = set_str(&c->default_image, v);
        } else if (!strcmp(key, "tls-cert"))
                r = set_str(&c->tls_cert, v);
        else if (!strcmp(key, "tls-key"))
                r = set_str(&c->tls_key, v);
        else if (!strcmp(key, "registry-config"))
                r = set_str(&c->registry_config, v);
        else if (!strcmp(key, "docker-config"))
                r = set_str(&c->docker_config, v);
        else if (!strcmp(key, "log-level")) {
                if (log_level_from_string(v, &c->log_level) < 0)
                        return err_set(e, -EINVAL,
                                       "--log-level %s: expected debug, info, warn or error", v);
        } else if (!strcmp(key, "log-format")) {
                if (log_format_from_string(v, &c->log_format) < 0)
                        return err_set(e, -EINVAL, "--log-format %s: expected text or json", v);
        } else if (!strcmp(key, "pull-loopback-only")) {
                if (parse_bool(v, &c->pull_loopback_only) < 0)
                        return err_set(e, -EINVAL,
                                       "pull-loopback-only = %s: expected true or false", v);
        } else if (!strcmp(key, "terminate-on-exit")) {
                if (parse_bool(v, &c->terminate_on_exit) < 0)
                        return err_set(e, -EINVAL, "terminate-on-exit = %s: expected true or false",
                                       v);
        } else if (!strcmp(key, "warm-pool")) {
                char *end;
                errno = 0;
                unsigned long n = strtoul(v, &end, 10);
                if (errno || end == v || *end || n > 4096)
                        return err_set(e, -EINVAL, "--warm-pool %s: expected 0..4096", v);
                c->warm_pool = (unsigned) n;
        } else if (!strcmp(key, "userns")) {
                if (!strcmp(v, "on") || !strcmp(v, "true"))
                        c->userns_off = false;
                else if (!strcmp(v, "off") || !strcmp(v, "false"))
                        c->userns_off = true;
                else
                        return err_set(e, -EINVAL, "--userns %s: expected on or off", v);
        } else if (!strcmp(key, "sandbox-cidr")) {
                if (!*v)
                        return err_set(e, -EINVAL, "--sandbox-cidr: empty (a range or none)");
                r = set_str(&c->sandbox_cidr, v);
        } else if (!strcmp(key, "k8s-kubeconfig")) {
                if (!*v)
                        return err_set(e, -EINVAL,
                                       "--k8s-kubeconfig: empty (a file or in-cluster)");
                r = set_str(&c->k8s_kubeconfig, v);
        } else if (!strcmp(key, "k8s-namespace")) {
                r = set_str(&c->k8s_namespace, v);
        } else if (!strcmp(key, "k8s-init-image")) {
                r = set_str(&c->k8s_init_image, v);
        } else if (!strcmp(key, "k8s-callback")) {
                r = set_str(&c->k8s_callback, v);
        } else if (!strcmp(key, "k8s-callback-advertise")) {
                r = set_str(&c->k8s_callback_advertise, v);
        } else if (!strcmp(key, "upstream-dns")) {
                r = set_str(&c->upstream_dns, v);
        } else if (!strcmp(key, "no-exec-spool")) {
                if (parse_bool(v, &c->no_exec_spool) < 0)
                        return err_set(e, -EINVAL, "no-exec-spool = %s: expected true or false", v);
        } else if (!strcmp(key, "rotate-egress-ca")) {
                if (parse_bool(v, &c->rotate_egress_ca) < 0)
                        return err_set(e, -EINVAL, "rotate-egress-ca = %s: expected true or false",
                                       v);
        } else if (!strcmp(key, "egress-upstream-ca")) {
                r = set_str(&c->egress_upstream_ca, v);
        } else if (!strcmp(key, "user")) {
                if (!*v)
                        return err_set(e, -EINVAL,
                                       "user: empty; name the account to drop to "
                                       "(e.g. warren)");
                r = set_str(&c->user, v);
        } else if (!strcmp(key, "privsep")) {
                if (parse_bool(v, &c->privsep) < 0)
                        return err_set(e, -EINVAL, "privsep = %s: expected true or false", v);
        } else if (!strcmp(key, "no-egress")) {
                if (parse_bool(v, &c->no_egress) < 0)
                        return err_set(e, -EINVAL, "no-egress = %s: expected true or false", v);
        } else if (!strcmp(key, "insecure-tcp")) {
                if (parse_bool(v, &c->insecure_tcp_loopback) < 0)
                        return err_set(e, -EINVAL, "insecure-tcp = %s: expected true or false", v);
        } else if (!strcmp(key, "insecure-tcp-i-know")) {
                if (parse_bool(v, &c->insecure_tcp) < 0)
                        return err_set(e, -EINVAL,
                                       "insecure-tcp-i-know = %s: expected true or false", v);
        } else if (!strcmp(key, "enable-diag")) {
                if (parse_bool(v, &c->enable_diag) < 0)
                        return err_set(e, -EINVAL, "enable-diag = %s: expected true or false", v);
        } else
                return err_set(e, -EINVAL, "unknown setting \"%s\"", key);
        return r < 0 ? err_set(e, r, "out of memory") : 0;
}

static char *trim(char *s) {
        while (isspace((unsigned char) *s))
                s++;
        size_t n = strlen(s);
        while (n > 0 && isspace((unsigned char) s[n - 1]))
                s[--n] = 0;
        return s;
}

static int read_config_file(struct daemon_config *c, const char *path, struct wr_err *e) {
        FILE *f = fopen(path, "re");
        if (!f)
                return err_set(e, -errno, "--config %s: %m", path);
        char *line = NULL;
        size_t cap = 0;
        unsigned lineno = 0;
        int r = 0;
        while (getline(&line, &cap, f) >= 0) {
                lineno++;
                char *s = trim(line);
                if (!*s || *s == '#')
                        continue;
                char *eq = strchr(s, '=');
                if (!eq) {
                        r = err_set(e, -EINVAL, "%s:%u: expected \"key = value\"", path, lineno);
                        break;
                }
                *eq = 0;
                char *key = trim(s), *val = trim(eq + 1);
                size_t vl = strlen(val);
                if (vl >= 2 && val[0] == '"' && val[vl - 1] == '"') {
                        val[vl - 1] = 0;
                        val++;
                }
                for (char *p = key; *p; p++)
                        if (*p == '_')
                                *p = '-';
                if (!strcmp(key, "config")) {
                        r = err_set(e, -EINVAL, "%s:%u: config files cannot include others", path,
                                    lineno);
                        break;
                }
                r = apply(c, DAEMON_CONFIG_FILE, key, val, e);
                if (r < 0) {
                        err_prefix(e, r, "%s:%u", path, lineno);
                        break;
                }
        }
        free(line);
        fclose(f);
        return r;
}

enum {
        OPT_LISTEN = 256,
        OPT_STATE_DIR,
        OPT_EXEC_LOG_SIZE,
        OPT_ADMIN_LISTEN,
        OPT_ISSUER,
        OPT_DEFAULT_IMAGE,
        OPT_TLS_CERT,
        OPT_TLS_KEY,
        OPT_LOG_LEVEL,
        OPT_LOG_FORMAT,
        OPT_CONFIG,
        OPT_ENABLE_DIAG,
        OPT_VERSION,
        OPT_REGISTRY_CONFIG,
        OPT_DOCKER_CONFIG,
        OPT_TERMINATE_ON_EXIT,
        OPT_PULL_LOOPBACK_ONLY,
        OPT_WARM_POOL,
        OPT_INSECURE_TCP,
        OPT_SANDBOX_CIDR,
        OPT_UPSTREAM_DNS,
        OPT_NO_EGRESS,
        OPT_PRIVSEP,
        OPT_USER,
        OPT_BUILD_MIN_FREE,
        OPT_DEFAULT_DISK,
        OPT_INSECURE_TCP_LOOPBACK,
        OPT_NO_EXEC_SPOOL,
        OPT_EGRESS_UPSTREAM_CA,
        OPT_ROTATE_EGRESS_CA,
        OPT_IDENTITY_TOKEN_LIFETIME,
        OPT_IDENTITY_ROLE,
        OPT_K8S_KUBECONFIG,
        OPT_K8S_NAMESPACE,
        OPT_K8S_INIT_IMAGE,
        OPT_K8S_CALLBACK,
        OPT_K8S_CALLBACK_ADVERTISE,
        OPT_USERNS,
};

static const struct option options[] = {
        {"listen", required_argument, NULL, OPT_LISTEN},
        {"state-dir", required_argument, NULL, OPT_STATE_DIR},
        {"exec-log-size", required_argument, NULL, OPT_EXEC_LOG_SIZE},
        {"build-min-free", required_argument, NULL, OPT_BUILD_MIN_FREE},
        {"default-disk", required_argument, NULL, OPT_DEFAULT_DISK},
        {"admin-listen", required_argument, NULL, OPT_ADMIN_LISTEN},
        {"issuer", required_argument, NULL, OPT_ISSUER},
        {"identity-token-lifetime", required_argument, NULL, OPT_IDENTITY_TOKEN_LIFETIME},
        {"identity-role", required_argument, NULL, OPT_IDENTITY_ROLE},
        {"default-image", required_argument, NULL, OPT_DEFAULT_IMAGE},
        {"tls-cert", required_argument, NULL, OPT_TLS_CERT},
        {"tls-key", required_argument, NULL, OPT_TLS_KEY},
        {"log-level", required_argument, NULL, OPT_LOG_LEVEL},
        {"log-format", required_argument, NULL, OPT_LOG_FORMAT},
        {"config", required_argument, NULL, OPT_CONFIG},
        {"enable-diag", no_argument, NULL, OPT_ENABLE_DIAG},
        {"registry-config", required_argument, NULL, OPT_REGISTRY_CONFIG},
        {"docker-config", required_argument, NULL, OPT_DOCKER_CONFIG},
        {"terminate-on-exit", no_argument, NULL, OPT_TERMINATE_ON_EXIT},
        {"pull-loopback-only", no_argument, NULL, OPT_PULL_LOOPBACK_ONLY},
        {"warm-pool", required_argument, NULL, OPT_WARM_POOL},
        {"insecure-tcp-i-know", no_argument, NULL, OPT_INSECURE_TCP},
        {"insecure-tcp", no_argument, NULL, OPT_INSECURE_TCP_LOOPBACK},
        {"sandbox-cidr", required_argument, NULL, OPT_SANDBOX_CIDR},
        {"upstream-dns", required_argument, NULL, OPT_UPSTREAM_DNS},
        {"no-egress", no_argument, NULL, OPT_NO_EGRESS},
        {"privsep", no_argument, NULL, OPT_PRIVSEP},
        {"user", required_argument, NULL, OPT_USER},
        {"no-exec-spool", no_argument, NULL, OPT_NO_EXEC_SPOOL},
        {"egress-upstream-ca", required_argument, NULL, OPT_EGRESS_UPSTREAM_CA},
        {"rotate-egress-ca", no_argument, NULL, OPT_ROTATE_EGRESS_CA},
        {"k8s-kubeconfig", required_argument, NULL, OPT_K8S_KUBECONFIG},
        {"k8s-namespace", required_argument, NULL, OPT_K8S_NAMESPACE},
        {"k8s-init-image", required_argument, NULL, OPT_K8S_INIT_IMAGE},
        {"k8s-callback", required_argument, NULL, OPT_K8S_CALLBACK},
        {"k8s-callback-advertise", required_argument, NULL, OPT_K8S_CALLBACK_ADVERTISE},
        {"userns", required_argument, NULL, OPT_USERNS},
        {"help", no_argument, NULL, 'h'},
        {"version", no_argument, NULL, OPT_VERSION},
        {},
};

int daemon_config_load(struct daemon_config *c, int argc, char **argv, struct wr_err *e) {
        *c = (struct daemon_config){.log_level = LOG_LEVEL_INFO, .log_format = LOG_FORMAT_TEXT};

        /* Pass 1: find --config, --help, --version; reject unknown flags. */
        opterr = 0;
        optind = 1;
        for (;;) {
                int o = getopt_long(argc, argv, "h", options, NULL);
                if (o == -1)
                        break;
                if (o == '?' || o == ':') {
                        const char *bad = optind > 0 && optind <= argc ? argv[optind - 1] : "?";
                        if (optopt && optopt < 256 && optopt != '?')
                                return err_set(e, -EINVAL, "unknown option -%c (see --help)",
                                               optopt);
                        return err_set(e, -EINVAL,
                                       "%s: unknown option or missing value (see --help)", bad);
                }
                if (o == 'h')
                        c->help = true;
                else if (o == OPT_VERSION)
                        c->version = true;
                else if (o == OPT_CONFIG && set_str(&c->config_file, optarg) < 0)
                        return err_set(e, -ENOMEM, "out of memory");
        }
        if (optind < argc)
                return err_set(e, -EINVAL, "unexpected argument \"%s\" (see --help)", argv[optind]);
        if (c->help || c->version)
                return 0;

        int r;
        if (c->config_file) {
                r = read_config_file(c, c->config_file, e);
                if (r < 0)
                        return r;
        }
        const char *env = getenv("WARREN_STATE_DIR");
        if (env && *env && (r = apply(c, DAEMON_CONFIG_ENV, "state-dir", env, e)) < 0)
                return err_prefix(e, r, "WARREN_STATE_DIR");
        env = getenv("WARREN_TERMINATE_ON_EXIT");
        if (env && *env && (r = apply(c, DAEMON_CONFIG_ENV, "terminate-on-exit", env, e)) < 0)
                return err_prefix(e, r, "WARREN_TERMINATE_ON_EXIT");
        env = getenv("WARREN_PULL_LOOPBACK_ONLY");
        if (env && *env && (r = apply(c, DAEMON_CONFIG_ENV, "pull-loopback-only", env, e)) < 0)
                return err_prefix(e, r, "WARREN_PULL_LOOPBACK_ONLY");
        env = getenv("WARREN_PRIVSEP");
        if (env && *env && (r = apply(c, DAEMON_CONFIG_ENV, "privsep", env, e)) < 0)
                return err_prefix(e, r, "WARREN_PRIVSEP");
        env = getenv("WARREN_USER");
        if (env && *env && (r = apply(c, DAEMON_CONFIG_ENV, "user", env, e)) < 0)
                return err_prefix(e, r, "WARREN_USER");
        env = getenv("WARREN_LOG_LEVEL");
        if (env && *env && (r = apply(c, DAEMON_CONFIG_ENV, "log-level", env, e)) < 0)
                return err_prefix(e, r, "WARREN_LOG_LEVEL");

        /* Pass 2: the flags themselves, which win. */
        optind = 1;
        for (;;) {
                int idx = -1;
                int o = getopt_long(argc, argv, "h", options, &idx);
                if (o == -1)
                        break;
                if (o == 'h' || o == OPT_VERSION || o == OPT_CONFIG)
                        continue;
                /* A switch (--enable-diag, --insecure-tcp-i-know, ...) is
                 * its config key set to true. */
                const char *v = options[idx].has_arg == no_argument ? "true" : optarg;
                r = apply(c, DAEMON_CONFIG_FLAG, options[idx].name, v, e);
                if (r < 0)
                        return r;
        }

        if (!c->state_dir && set_str(&c->state_dir, DAEMON_DEFAULT_STATE_DIR) < 0)
                return err_set(e, -ENOMEM, "out of memory");
        if (c->n_listen == 0 &&
            (r = add_listen(c, DAEMON_CONFIG_DEFAULT, DAEMON_DEFAULT_LISTEN, e)) < 0)
                return r;
        if (c->user && !c->privsep)
                return err_set(e, -EINVAL,
                               "--user %s needs --privsep: without warren-priv nothing would "
                               "do the privileged work after the drop; add --privsep (or "
                               "WARREN_PRIVSEP=1), or leave out --user",
                               c->user);
        if (!!c->tls_cert != !!c->tls_key)
                return err_set(e, -EINVAL, "--tls-cert and --tls-key must be given together");
        /* tcp: becomes tls: when the daemon has a certificate. */
        for (size_t i = 0; i < c->n_listen; i++) {
                if (c->tls_cert && strncmp(c->listen[i], "tcp:", 4) == 0)
                        memcpy(c->listen[i], "tls:", 4);
                else if (!c->tls_cert && strncmp(c->listen[i], "tls:", 4) == 0)
                        return err_set(e, -EINVAL,
                                       "--listen %s needs --tls-cert and --tls-key (or use tcp:)",
                                       c->listen[i]);
        }
        /* A plaintext tcp: listener trusts its callers without a token
         * (a TLS listener asks every caller for one). */
        for (size_t i = 0; i < c->n_listen && !c->insecure_tcp; i++) {
                if (strncmp(c->listen[i], "tcp:", 4) != 0)
                        continue;
                if (!c->insecure_tcp_loopback)
                        return err_set(e, -EINVAL,
                                       "refusing to serve plaintext %s: its callers would be "
                                       "trusted without a token; serve remote clients over "
                                       "TLS (--tls-cert and --tls-key, callers send an API "
                                       "token, docs/remote.md), or pass --insecure-tcp to "
                                       "serve it on loopback anyway",
                                       c->listen[i]);
                if (!rpc_listen_addr_is_loopback(c->listen[i]))
                        return err_set(e, -EINVAL,
                                       "refusing to listen on %s: it is not a loopback address "
                                       "and plaintext callers are trusted without a token "
                                       "(anyone who can connect could create sandboxes, run "
                                       "commands and read secrets); --insecure-tcp serves "
                                       "127.0.0.1, ::1 or localhost only; use TLS "
                                       "(--tls-cert, --tls-key) with API tokens, or pass "
                                       "--insecure-tcp-i-know to serve it unauthenticated "
                                       "anyway",
                                       c->listen[i]);
        }
        return 0;
}

void daemon_config_clear(struct daemon_config *c) {
        if (!c)
                return;
        for (size_t i = 0; i < c->n_listen; i++)
                free(c->listen[i]);
        free(c->listen);
        free(c->state_dir);
        free(c->admin_listen);
        free(c->issuer);
        free(c->default_image);
        free(c->tls_cert);
        free(c->tls_key);
        free(c->config_file);
        free(c->sandbox_cidr);
        free(c->k8s_kubeconfig);
        free(c->k8s_namespace);
        free(c->k8s_init_image);
        free(c->k8s_callback);
        free(c->k8s_callback_advertise);
        free(c->upstream_dns);
        free(c->egress_upstream_ca);
        free(c->registry_config);
        free(c->docker_config);
        free(c->user);
        *c = (struct daemon_config){0};
}
