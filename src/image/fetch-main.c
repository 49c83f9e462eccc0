/* SPDX-License-Identifier: Apache-2.0 */
/* warren-fetch: the only process that talks to image registries.
 *
 *   warren-fetch --sock-fd N [--ref REFERENCE]
 *                [--registry-config-fd N --registry-config-name PATH]
 *                [--docker-config-fd N --docker-config-name PATH]
 *                [--loopback-only] [--uid USER] [--gid GROUP] [--root DIR]
 *                [--seccomp-strict]
 *
 * Started as root by warrend for one pull job (src/image/fetch.c), or
 * with --privsep by warren-priv (HELPER_START FETCH, src/priv/helpers.c:
 * no --ref, no config names), and gone when the job ends. --sock-fd is its end of a SOCK_SEQPACKET
 * socketpair (fetch-proto.h): warrend asks for a manifest, a config, a blob (passing the fd to
 * write it into); the helper answers with fixed-size reports.
 * --ref is the reference warrend resolved (registry and repository);
 * without it the first request must be REQ_BIND naming it (warrend starts
 * a spare helper ahead of the next pull, before it knows the reference).
 * The registry config and the docker config.json travel as memfds holding
 * the files' bytes (--*-config-fd; the names are for messages only): read,
 * parsed, wiped from memory, the memfd truncated and closed, all before
 * the first byte from a registry arrives.
 *
 * Before it serves a request it: reads the system CA certificates into
 * memory (libcurl verifies against that copy), checks --root (warrend
 * prepared it, fetch-root.h: a root-owned tree, read-only to the helper,
 * holding only etc/hosts, etc/resolv.conf and an etc/nsswitch.conf for
 * name resolution), chroots into it, becomes --uid (default nobody) with no
 * capabilities, no_new_privs, not dumpable, and installs a seccomp
 * allowlist: sockets, the event loop, threads (libcurl's resolver),
 * memory without PROT_EXEC, and open() read-only. It cannot exec, create,
 * write or remove any file: the only things it writes are the blob fds
 * warrend hands it and its socket. Manifests, indexes, configs, auth
 * challenges and token responses are parsed here (src/image/manifest.c,
 * registry-auth.c), never in warrend.
 *
 * Exit status: 0 when warrend closes the socket, 2 usage, configuration or
 * confinement error (a line on stderr, which is warrend's log). */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <locale.h>
#include <sched.h>
#include <seccomp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/ptrace.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <curl/curl.h>
#include <openssl/crypto.h>
#include <openssl/ssl.h>
#include <pthread.h>

#include "basic/confine.h"
#include "image/fetch-proto.h"
#include "image/fetch-root.h"
#include "image/manifest.h"
#include "image/ref.h"
#include "image/registry-internal.h"
#include "image/registry.h"

#define PROGRESS_MS 100
#define CA_MAX (8u << 20)

static struct {
        int sock_fd, regcfg_fd, dockercfg_fd;
        const char *regcfg_name, *dockercfg_name;
        const char *ref;
        const char *user, *group, *root;
        const char *check; /* --confine-check PATH */
        bool loopback_only, strict;
} cfg = {
        .sock_fd = -EBADF,
        .regcfg_fd = -EBADF,
        .dockercfg_fd = -EBADF,
        .user = "nobody",
        .root = "/run/warren/fetch-root",
};

struct req {
        struct req *next;
        uint32_t id;
        uint16_t type;
        struct img_reg_req *rq;
        uint64_t last_sent; /* REQ_BLOB: bytes last reported */
        int fd;             /* REQ_BLOB: where the blob goes */
};

static struct {
        uv_loop_t loop;
        uv_poll_t poll;
        uv_timer_t tick;
        struct img_registry *reg;
        struct img_ref ref;
        struct req *reqs;
        bool closing;
        bool bound; /* S.ref is set (--ref or REQ_BIND) */
} S;

static _noreturn_ void die(const char *what, const char *detail) {
        fprintf(stderr, "warren-fetch: %s%s%s\n", what, detail ? ": " : "", detail ? detail : "");
        exit(2);
}

static _noreturn_ void usage(void) {
        fprintf(stderr, "usage: warren-fetch --sock-fd N [--ref REFERENCE]\n"
                        "         [--registry-config-fd N --registry-config-name PATH]\n"
                        "         [--docker-config-fd N --docker-config-name PATH]\n"
                        "         [--loopback-only] [--uid USER] [--gid GROUP] [--root DIR]\n"
                        "         [--seccomp-strict] [--confine-check PATH]\n");
        exit(2);
}

static int parse_fd(const char *s) {
        char *end;
        long v = strtol(s, &end, 10);
        if (!*s || *end || v < 3 || v > 65535 || fcntl((int) v, F_GETFD) < 0)
                usage();
        (void) fcntl((int) v, F_SETFD, FD_CLOEXEC);
        return (int) v;
}

/* --- set-up (root, before confinement) --- */

/* Parse one config memfd into c, then wipe every copy: our buffer, and the
 * memfd's pages (truncated) before it is closed. */
static int load_config(struct img_reg_config *c, int *fd, const char *name, bool docker,
                       struct wr_err *e) {
        size_t cap = IMG_REG_CONFIG_MAX_BYTES + 1, len = 0;
        char *buf = malloc(cap);
        if (!buf)
                return err_set(e, -ENOMEM, "out of memory");
        int r = 0;
        while (len < cap) {
                ssize_t n = RETRY_EINTR(read(*fd, buf + len, cap - len));
                if (n < 0) {
                        r = err_set(e, -errno, "%s: read: %m", name);
                        break;
                }
                if (n == 0)
                        break;
                len += (size_t) n;
        }
        if (r >= 0)
                r = docker ? img_reg_config_parse_docker(c, buf, len, name, e)
                           : img_reg_config_parse_registries(c, buf, len, name, e);
        erase_and_free_n(buf, cap);
        (void) !ftruncate(*fd, 0); /* frees the memfd's pages (warrend seals writes, not shrinks) */
        closep(fd);
        return r;
}

/* The system CA bundle, read now (the chroot has none). Missing is fine
 * (plain-http registries work; https ones then fail verification). */
static void load_ca(struct img_registry *reg) {
        const curl_version_info_data *v = curl_version_info(CURLVERSION_NOW);
        const char *paths[] = {
                getenv("SSL_CERT_FILE"),
                v && v->cainfo ? v->cainfo : NULL,
                "/etc/ssl/certs/ca-certificates.crt",
        };
        for (size_t i = 0; i < ELEMENTSOF(paths); i++) {
                if (!paths[i] || !*paths[i])
                        continue;
                _cleanup_close_ int fd = open(paths[i], O_RDONLY | O_CLOEXEC);
                struct stat st;
                if (fd < 0 || fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_size <= 0 ||
                    (uint64_t) st.st_size > CA_MAX)
                        continue;
                _cleanup_free_ char *pem = malloc((size_t) st.st_size);
                size_t len = 0;
                while (pem && len < (size_t) st.st_size) {
                        ssize_t n = RETRY_EINTR(read(fd, pem + len, (size_t) st.st_size - len));
                        if (n <= 0)
                                break;
                        len += (size_t) n;
                }
                /* a short read: the next path, not a truncated bundle */
                if (pem && len == (size_t) st.st_size && img_registry_set_ca(reg, pem, len) == 0)
                        return;
        }
}

/* What libcurl, libuv, OpenSSL and glibc's resolver need; everything else
 * fails with EPERM (--seccomp-strict: kills, which the tests use to prove
 * the list is enough). */
static int seccomp_install(struct wr_err *e) {
        static const int allow[] = {
                SCMP_SYS(read),
                SCMP_SYS(readv),
                SCMP_SYS(pread64),
                SCMP_SYS(write),
                SCMP_SYS(writev),
                SCMP_SYS(pwrite64),
                SCMP_SYS(lseek),
                SCMP_SYS(close),
                SCMP_SYS(fstat),
                SCMP_SYS(newfstatat),
                SCMP_SYS(statx),
                SCMP_SYS(fcntl),
                SCMP_SYS(ioctl),
                SCMP_SYS(dup),
                SCMP_SYS(dup3),
                SCMP_SYS(pipe2),
                SCMP_SYS(eventfd2),
                SCMP_SYS(socket),
                SCMP_SYS(socketpair),
                SCMP_SYS(connect),
                SCMP_SYS(getsockopt),
                SCMP_SYS(setsockopt),
                SCMP_SYS(getsockname),
                SCMP_SYS(getpeername),
                SCMP_SYS(sendto),
                SCMP_SYS(recvfrom),
                SCMP_SYS(sendmsg),
                SCMP_SYS(recvmsg),
                SCMP_SYS(sendmmsg),
                SCMP_SYS(recvmmsg),
                SCMP_SYS(shutdown),
                SCMP_SYS(bind),
                SCMP_SYS(poll),
                SCMP_SYS(ppoll),
                SCMP_SYS(epoll_create1),
                SCMP_SYS(epoll_ctl),
                SCMP_SYS(epoll_wait),
                SCMP_SYS(epoll_pwait),
                SCMP_SYS(brk),
                SCMP_SYS(munmap),
                SCMP_SYS(mremap),
                SCMP_SYS(madvise),
                SCMP_SYS(futex),
                SCMP_SYS(set_robust_list),
                SCMP_SYS(rseq),
                SCMP_SYS(getrandom),
                SCMP_SYS(clock_gettime),
                SCMP_SYS(clock_getres),
                SCMP_SYS(gettimeofday),
                SCMP_SYS(nanosleep),
                SCMP_SYS(clock_nanosleep),
                SCMP_SYS(getpid),
                SCMP_SYS(gettid),
                SCMP_SYS(getuid),
                SCMP_SYS(geteuid),
                SCMP_SYS(getgid),
                SCMP_SYS(getegid),
                SCMP_SYS(uname),
                SCMP_SYS(sched_yield),
                SCMP_SYS(sched_getaffinity),
                SCMP_SYS(rt_sigaction),
                SCMP_SYS(rt_sigprocmask),
                SCMP_SYS(rt_sigreturn),
                SCMP_SYS(sigaltstack),
                SCMP_SYS(restart_syscall),
                SCMP_SYS(exit),
                SCMP_SYS(exit_group),
                SCMP_SYS(prctl),
                SCMP_SYS(sysinfo),
                SCMP_SYS(ftruncate), /* the blob fds warrend passes (a retry from scratch) */
        };
        int r;
        scmp_filter_ctx ctx =
                confine_seccomp_new(cfg.strict ? SCMP_ACT_KILL_PROCESS : SCMP_ACT_ERRNO(EPERM),
                                    allow, ELEMENTSOF(allow), &r);
        if (!ctx)
                return err_set(e, r, "seccomp: %s", strerror(-r));
        /* open read-only (resolv.conf, hosts): no O_WRONLY, O_RDWR, O_CREAT,
         * O_TRUNC, O_TMPFILE */
        const uint64_t wmask = O_WRONLY | O_RDWR | O_CREAT | O_TRUNC | __O_TMPFILE;
        if (r >= 0)
                r = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(openat), 1,
                                     SCMP_A2(SCMP_CMP_MASKED_EQ, wmask, 0));
        /* threads only (libcurl's resolver), never a new process */
        if (r >= 0)
                r = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(clone), 1,
                                     SCMP_A0(SCMP_CMP_MASKED_EQ, CLONE_THREAD, CLONE_THREAD));
        /* clone3's flags are behind a pointer: make glibc fall back to clone */
        if (r >= 0)
                r = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(ENOSYS), SCMP_SYS(clone3), 0);
        if (r >= 0)
                r = seccomp_load(ctx);
        seccomp_release(ctx);
        return r < 0 ? err_set(e, r, "seccomp: %s", strerror(-r)) : 0;
}

static int confine(struct wr_err *e) {
        if (geteuid() != 0)
                return err_set(e, -EPERM,
                               "warren-fetch must be started as root (it confines "
                               "itself)");
        uid_t uid = 0;
        gid_t gid = 0;
        int r = confine_ids(cfg.user, cfg.group, &uid, &gid, e);
        if (r < 0)
                return r;
        /* the chroot warrend prepared (fetch-root.c); the helper never writes it */
        r = img_fetch_root_check(cfg.root, e);
        if (r < 0)
                return r;
        struct rlimit zero = {0, 0}, files = {256, 256};
        if (setrlimit(RLIMIT_CORE, &zero) < 0 || setrlimit(RLIMIT_MEMLOCK, &zero) < 0 ||
            setrlimit(RLIMIT_MSGQUEUE, &zero) < 0 || setrlimit(RLIMIT_NOFILE, &files) < 0)
                return err_set(e, -errno, "setrlimit: %m");
        r = confine_drop(cfg.root, uid, gid, e);
        if (r < 0)
                return r;
        return seccomp_install(e);
}

/* --- --confine-check (the tests): what a compromised parser would try --- */

static int attempt(int r) {
        return r < 0 ? errno : 0;
}

static void *thread_main(void *arg) {
        return arg;
}

static _noreturn_ void confine_check(void) {
        int r_out = attempt(open(cfg.check, O_WRONLY | O_CREAT | O_CLOEXEC, 0644));
        int r_root = attempt(open("/x", O_WRONLY | O_CREAT | O_CLOEXEC, 0644));
        int r_hosts = attempt(open("/etc/hosts", O_WRONLY | O_CLOEXEC));
        int r_mkdir = attempt(mkdir("/d", 0755));
        char *const argv[] = {"/bin/sh", NULL};
        int r_exec = attempt(execve("/bin/sh", argv, argv + 1));
        int r_setuid = attempt(setuid(0));
        int r_ptrace = attempt((int) ptrace(PTRACE_TRACEME, 0, NULL, NULL));
        int r_mount = attempt(chroot("/etc"));
        int sfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        int r_sock = attempt(sfd);
        if (sfd >= 0)
                close(sfd);
        pthread_t t;
        int r_thread = pthread_create(&t, NULL, thread_main, NULL);
        if (!r_thread)
                pthread_join(t, NULL);
        printf("{\"uid\": %u, \"euid\": %u, \"create_outside\": %d, \"create_in_root\": %d, "
               "\"write_etc_hosts\": %d, \"mkdir\": %d, \"exec\": %d, \"setuid0\": %d, "
               "\"ptrace\": %d, \"mount\": %d, \"socket_inet\": %d, \"thread\": %d}\n",
               (unsigned) getuid(), (unsigned) geteuid(), r_out, r_root, r_hosts, r_mkdir, r_exec,
               r_setuid, r_ptrace, r_mount, r_sock, r_thread);
        fflush(stdout);
        _exit(0);
}

/* --- answers --- */

static void send_msg(const void *msg, size_t len) {
        if (S.closing)
                return;
        if (send(cfg.sock_fd, msg, len, MSG_NOSIGNAL) != (ssize_t) len) {
                fprintf(stderr, "warren-fetch: send: %s\n", strerror(errno));
                exit(0); /* warrend is gone */
        }
}

static void send_error(uint32_t id, const struct wr_err *e) {
        struct img_fetch_rep_error x;
        memset(&x, 0, sizeof(x));
        img_fetch_hdr_init(&x.hdr, IMG_FETCH_REP_ERROR, id);
        x.err = *e;
        if (x.err.code >= 0 || x.err.code < -4095)
                x.err.code = -EIO;
        if ((unsigned) x.err.status > WR_STATUS_UNAUTHENTICATED)
                x.err.status = WR_STATUS_INTERNAL;
        if ((unsigned) x.err.fault > WR_FAULT_WORKLOAD)
                x.err.fault = WR_FAULT_SERVICE;
        x.err.msg[sizeof(x.err.msg) - 1] = '\0';
        send_msg(&x, sizeof(x));
}

static void send_blob(enum img_fetch_type type, uint32_t id, uint64_t received) {
        struct img_fetch_rep_blob b;
        memset(&b, 0, sizeof(b));
        img_fetch_hdr_init(&b.hdr, type, id);
        b.received = received;
        send_msg(&b, sizeof(b));
}

static void req_unlink(struct req *q) {
        for (struct req **pp = &S.reqs; *pp; pp = &(*pp)->next)
                if (*pp == q) {
                        *pp = q->next;
                        break;
                }
        closep(&q->fd);
        free(q);
}

static void fail_req(struct req *q, int r, const struct wr_err *e) {
        struct wr_err x = e ? *e : (struct wr_err){0};
        if (!x.code)
                err_set(&x, r < 0 ? r : -EIO, "registry request failed");
        send_error(q->id, &x);
}

/* A manifest or an index, parsed, as REP_MANIFEST / REP_INDEX. */
static int answer_manifest(struct req *q, struct img_reg_req *rq, struct wr_err *e) {
        size_t len = 0;
        const char *body = img_reg_req_body(rq, &len);
        _cleanup_(img_manifest_freep) struct img_manifest *m = NULL;
        int r = img_manifest_parse(body, len, img_reg_req_content_type(rq), &m, e);
        if (r < 0)
                return r;
        if (m->kind == IMG_MANIFEST_INDEX) {
                _cleanup_free_ struct img_fetch_rep_index *x = calloc(1, sizeof(*x));
                if (!x)
                        return err_set(e, -ENOMEM, "out of memory");
                img_fetch_hdr_init(&x->hdr, IMG_FETCH_REP_INDEX, q->id);
                for (size_t i = 0; i < m->n_platforms; i++) {
                        const struct img_manifest_platform *p = &m->platforms[i];
                        if (!p->digest[0])
                                continue;
                        if (x->n_platforms == IMG_FETCH_MAX_PLATFORMS)
                                return err_setx(e, -EINVAL, WR_STATUS_INVALID_ARGUMENT,
                                                WR_FAULT_WORKLOAD,
                                                "image index lists more than %d platforms",
                                                IMG_FETCH_MAX_PLATFORMS);
                        struct img_fetch_platform *o = &x->platforms[x->n_platforms++];
                        snprintf(o->os, sizeof(o->os), "%s", p->os);
                        snprintf(o->arch, sizeof(o->arch), "%s", p->arch);
                        snprintf(o->digest, sizeof(o->digest), "%s", p->digest);
                }
                send_msg(x, sizeof(*x));
                return 0;
        }
        _cleanup_free_ struct img_fetch_rep_manifest *x = calloc(1, sizeof(*x));
        if (!x)
                return err_set(e, -ENOMEM, "out of memory");
        img_fetch_hdr_init(&x->hdr, IMG_FETCH_REP_MANIFEST, q->id);
        snprintf(x->config_digest, sizeof(x->config_digest), "%s", m->config_digest);
        x->config_size = m->config_size;
        x->n_layers = (uint32_t) m->n_layers;
        for (size_t i = 0; i < m->n_layers; i++) {
                snprintf(x->layers[i].digest, sizeof(x->layers[i].digest), "%s",
                         m->layers[i].digest);
                x->layers[i].size = m->layers[i].size;
        }
        send_msg(x, sizeof(*x));
        return 0;
}

/* Append n strings to the config report; -E2BIG when they do not fit. */
static int put_strings(struct img_fetch_rep_config *x, enum img_fetch_field f, char *const *v,
                       size_t n) {
        for (size_t i = 0; i < n; i++) {
                size_t l = strlen(v[i]) + 1;
                if (l > sizeof(x->strings) - x->strings_len)
                        return -E2BIG;
                memcpy(x->strings + x->strings_len, v[i], l);
                x->strings_len += (uint32_t) l;
        }
        x->counts[f] = (uint32_t) n;
        return 0;
}

static int answer_config(struct req *q, struct img_reg_req *rq, struct wr_err *e) {
        size_t len = 0;
        const char *body = img_reg_req_body(rq, &len);
        _cleanup_(img_image_config_freep) struct img_image_config *c = NULL;
        int r = img_config_parse(body, len, 0, &c, e);
        if (r < 0)
                return r;
        _cleanup_free_ struct img_fetch_rep_config *x = calloc(1, sizeof(*x));
        if (!x)
                return err_set(e, -ENOMEM, "out of memory");
        img_fetch_hdr_init(&x->hdr, IMG_FETCH_REP_CONFIG, q->id);
        const struct img_config *k = &c->config;
        char *one[1];
        r = put_strings(x, IMG_FETCH_F_DIFF_IDS, c->diff_ids, c->n_diff_ids);
        if (r >= 0)
                r = put_strings(x, IMG_FETCH_F_ENV, k->env, k->n_env);
        if (r >= 0)
                r = put_strings(x, IMG_FETCH_F_ENTRYPOINT, k->entrypoint, k->n_entrypoint);
        if (r >= 0)
                r = put_strings(x, IMG_FETCH_F_CMD, k->cmd, k->n_cmd);
        one[0] = k->working_dir;
        if (r >= 0)
                r = put_strings(x, IMG_FETCH_F_WORKING_DIR, one, k->working_dir ? 1 : 0);
        one[0] = k->user;
        if (r >= 0)
                r = put_strings(x, IMG_FETCH_F_USER, one, k->user ? 1 : 0);
        if (r >= 0)
                r = put_strings(x, IMG_FETCH_F_SHELL, k->shell, k->n_shell);
        one[0] = k->stop_signal;
        if (r >= 0)
                r = put_strings(x, IMG_FETCH_F_STOP_SIGNAL, one, k->stop_signal ? 1 : 0);
        if (r >= 0)
                r = put_strings(x, IMG_FETCH_F_LABELS, k->labels, k->n_labels);
        if (r >= 0)
                r = put_strings(x, IMG_FETCH_F_EXPOSED_PORTS, k->exposed_ports, k->n_exposed_ports);
        if (r >= 0)
                r = put_strings(x, IMG_FETCH_F_HC_TEST, k->hc_test, k->n_hc_test);
        if (r < 0)
                return err_setx(e, -EINVAL, WR_STATUS_INVALID_ARGUMENT, WR_FAULT_WORKLOAD,
                                "image config: its strings (Env, Cmd, Labels, ...) exceed %u "
                                "bytes",
                                IMG_FETCH_STRINGS_MAX);
        x->hc_interval_ns = k->hc_interval_ns;
        x->hc_timeout_ns = k->hc_timeout_ns;
        x->hc_start_period_ns = k->hc_start_period_ns;
        x->hc_start_interval_ns = k->hc_start_interval_ns;
        x->hc_retries = k->hc_retries;
        send_msg(x, sizeof(*x));
        return 0;
}

static void on_fetched(struct img_reg_req *rq, int r, const struct wr_err *e, void *userdata) {
        struct req *q = userdata;
        q->rq = NULL;
        if (r < 0) {
                fail_req(q, r, e);
        } else if (q->type == IMG_FETCH_REQ_BLOB) {
                send_blob(IMG_FETCH_REP_BLOB, q->id, img_reg_req_received(rq));
        } else {
                struct wr_err pe = {0};
                r = q->type == IMG_FETCH_REQ_MANIFEST ? answer_manifest(q, rq, &pe)
                                                      : answer_config(q, rq, &pe);
                if (r < 0)
                        fail_req(q, r, &pe);
        }
        req_unlink(q);
}

static void on_tick(uv_timer_t *t) {
        (void) t;
        for (struct req *q = S.reqs; q; q = q->next)
                if (q->rq && q->type == IMG_FETCH_REQ_BLOB) {
                        uint64_t n = img_reg_req_received(q->rq);
                        if (n != q->last_sent) {
                                q->last_sent = n;
                                send_blob(IMG_FETCH_REP_PROGRESS, q->id, n);
                        }
                }
}

/* --- requests --- */

static void start(const struct img_fetch_req *m, int fd) {
        struct req *q = calloc(1, sizeof(*q));
        if (!q) {
                struct wr_err e = {0};
                err_set(&e, -ENOMEM, "warren-fetch: out of memory");
                send_error(m->hdr.id, &e);
                closep(&fd);
                return;
        }
        q->id = m->hdr.id;
        q->type = m->hdr.type;
        q->fd = fd;
        q->next = S.reqs;
        S.reqs = q;
        struct img_reg_fetch f = {.ref = &S.ref, .fd = -1, .retry = true};
        switch (m->hdr.type) {
        case IMG_FETCH_REQ_MANIFEST:
                f.kind = "manifests";
                f.object = m->object;
                f.accept = IMG_ACCEPT_MANIFESTS;
                f.max_body = IMG_MANIFEST_MAX_BODY;
                f.expect_digest = m->digest[0] ? m->digest : NULL;
                break;
        case IMG_FETCH_REQ_CONFIG:
                f.kind = "blobs";
                f.object = m->digest;
                f.max_body = m->max_size && m->max_size < IMG_CONFIG_MAX_BODY ? (size_t) m->max_size
                                                                              : IMG_CONFIG_MAX_BODY;
                f.expect_digest = m->digest;
                break;
        default: /* BLOB */
                f.kind = "blobs";
                f.object = m->digest;
                f.fd = fd;
                f.max_size = m->max_size;
                f.expect_digest = m->digest;
                break;
        }
        struct wr_err e = {0};
        int r = img_reg_fetch_start(S.reg, &f, on_fetched, q, &q->rq, &e);
        if (r < 0) {
                fail_req(q, r, &e);
                req_unlink(q);
        }
}

static void stop_all(void) {
        S.closing = true;
        while (S.reqs) {
                if (S.reqs->rq)
                        img_reg_req_cancel(S.reqs->rq);
                req_unlink(S.reqs);
        }
        uv_poll_stop(&S.poll);
        uv_timer_stop(&S.tick);
        uv_stop(&S.loop);
}

static void on_readable(uv_poll_t *p, int status, int events) {
        (void) p;
        (void) events;
        if (status < 0) {
                stop_all();
                return;
        }
        for (;;) {
                union {
                        struct img_fetch_req q;
                        struct img_fetch_req_bind b;
                        char raw[sizeof(struct img_fetch_req_bind) + 1];
                } buf;
                union {
                        struct cmsghdr align;
                        char buf[CMSG_SPACE(sizeof(int) * 4)];
                } cbuf;
                struct iovec iov = {.iov_base = &buf, .iov_len = sizeof(buf)};
                struct msghdr mh = {
                        .msg_iov = &iov,
                        .msg_iovlen = 1,
                        .msg_control = cbuf.buf,
                        .msg_controllen = sizeof(cbuf.buf),
                };
                ssize_t n = recvmsg(cfg.sock_fd, &mh, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
                if (n < 0 && (errno == EAGAIN || errno == EINTR))
                        return;
                if (n <= 0) { /* warrend closed its end: the job is over */
                        stop_all();
                        return;
                }
                int fds[4], nfds = 0;
                for (struct cmsghdr *c = CMSG_FIRSTHDR(&mh); c; c = CMSG_NXTHDR(&mh, c))
                        if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS) {
                                size_t k = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
                                for (size_t i = 0; i < k && nfds < 4; i++)
                                        memcpy(&fds[nfds++], CMSG_DATA(c) + i * sizeof(int),
                                               sizeof(int));
                        }
                int type = (mh.msg_flags & (MSG_TRUNC | MSG_CTRUNC))
                                   ? -EBADMSG
                                   : img_fetch_msg_check(&buf, (size_t) n, IMG_FETCH_TO_HELPER);
                int want_fds = type == IMG_FETCH_REQ_BLOB ? 1 : 0;
                /* bound exactly once, before anything else */
                if (type > 0 && (type == IMG_FETCH_REQ_BIND) == S.bound)
                        type = -EBADMSG;
                if (type < 0 || nfds != want_fds) {
                        /* warrend never sends these: it is not warrend */
                        for (int i = 0; i < nfds; i++)
                                close(fds[i]);
                        fprintf(stderr, "warren-fetch: malformed request refused\n");
                        stop_all();
                        return;
                }
                if (type == IMG_FETCH_REQ_BIND) {
                        struct wr_err e = {0};
                        if (img_ref_parse(buf.b.ref, &S.ref, &e) < 0)
                                send_error(buf.b.hdr.id, &e);
                        else
                                S.bound = true;
                        continue;
                }
                start(&buf.q, want_fds ? fds[0] : -EBADF);
        }
}

static void parse_args(int argc, char **argv) {
        enum {
                OPT_SOCK = 256,
                OPT_REF,
                OPT_RC_FD,
                OPT_RC_NAME,
                OPT_DC_FD,
                OPT_DC_NAME,
                OPT_LOOP,
                OPT_UID,
                OPT_GID,
                OPT_ROOT,
                OPT_STRICT,
                OPT_CHECK,
        };
        static const struct option opts[] = {
                {"sock-fd", required_argument, NULL, OPT_SOCK},
                {"ref", required_argument, NULL, OPT_REF},
                {"registry-config-fd", required_argument, NULL, OPT_RC_FD},
                {"registry-config-name", required_argument, NULL, OPT_RC_NAME},
                {"docker-config-fd", required_argument, NULL, OPT_DC_FD},
                {"docker-config-name", required_argument, NULL, OPT_DC_NAME},
                {"loopback-only", no_argument, NULL, OPT_LOOP},
                {"uid", required_argument, NULL, OPT_UID},
                {"gid", required_argument, NULL, OPT_GID},
                {"root", required_argument, NULL, OPT_ROOT},
                {"seccomp-strict", no_argument, NULL, OPT_STRICT},
                {"confine-check", required_argument, NULL, OPT_CHECK},
                {0},
        };
        int c;
        while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1)
                switch (c) {
                case OPT_SOCK:
                        cfg.sock_fd = parse_fd(optarg);
                        break;
                case OPT_REF:
                        cfg.ref = optarg;
                        break;
                case OPT_RC_FD:
                        cfg.regcfg_fd = parse_fd(optarg);
                        break;
                case OPT_RC_NAME:
                        cfg.regcfg_name = optarg;
                        break;
                case OPT_DC_FD:
                        cfg.dockercfg_fd = parse_fd(optarg);
                        break;
                case OPT_DC_NAME:
                        cfg.dockercfg_name = optarg;
                        break;
                case OPT_LOOP:
                        cfg.loopback_only = true;
                        break;
                case OPT_UID:
                        cfg.user = optarg;
                        break;
                case OPT_GID:
                        cfg.group = optarg;
                        break;
                case OPT_ROOT:
                        cfg.root = optarg;
                        break;
                case OPT_STRICT:
                        cfg.strict = true;
                        break;
                case OPT_CHECK:
                        cfg.check = optarg;
                        break;
                default:
                        usage();
                }
        if (optind != argc || cfg.sock_fd < 0)
                usage();
}

int main(int argc, char **argv) {
        parse_args(argc, argv);
        struct wr_err e = {0};
        if (cfg.ref && img_ref_parse(cfg.ref, &S.ref, &e) < 0)
                die("--ref", e.msg);
        S.bound = cfg.ref != NULL;

        /* everything that loads files or libraries happens before the chroot */
        if (!setlocale(LC_ALL, "C.UTF-8"))
                setlocale(LC_ALL, "C");
        signal(SIGPIPE, SIG_IGN);
        OPENSSL_init_ssl(OPENSSL_INIT_LOAD_CONFIG, NULL);
        if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK)
                die("libcurl initialisation failed", NULL);

        struct img_reg_config *rc = calloc(1, sizeof(*rc));
        if (!rc)
                die("out of memory", NULL);
        if (cfg.regcfg_fd >= 0) {
                const char *name = cfg.regcfg_name ? cfg.regcfg_name : "--registry-config";
                snprintf(rc->registry_config, sizeof(rc->registry_config), "%s", name);
                if (load_config(rc, &cfg.regcfg_fd, name, false, &e) < 0)
                        die("registry config", e.msg);
        }
        if (cfg.dockercfg_fd >= 0) {
                const char *name = cfg.dockercfg_name ? cfg.dockercfg_name : "--docker-config";
                snprintf(rc->docker_config, sizeof(rc->docker_config), "%s", name);
                if (load_config(rc, &cfg.dockercfg_fd, name, true, &e) < 0)
                        die("docker config", e.msg);
        }
        if (uv_loop_init(&S.loop) < 0)
                die("event loop", NULL);
        if (img_registry_new_config(&S.loop, rc, &S.reg, &e) < 0)
                die("registry client", e.msg);
        img_registry_set_loopback_only(S.reg, cfg.loopback_only);
        load_ca(S.reg);
        /* a throwaway handle: loads what libcurl loads lazily (TLS backend,
         * its config) while files can still be opened */
        CURL *warm = curl_easy_init();
        if (warm)
                curl_easy_cleanup(warm);

        if (confine(&e) < 0)
                die("confinement", e.msg);
        if (cfg.check)
                confine_check();

        if (uv_poll_init(&S.loop, &S.poll, cfg.sock_fd) < 0 ||
            uv_poll_start(&S.poll, UV_READABLE | UV_DISCONNECT, on_readable) < 0 ||
            uv_timer_init(&S.loop, &S.tick) < 0 ||
            uv_timer_start(&S.tick, on_tick, PROGRESS_MS, PROGRESS_MS) < 0)
                die("event loop", NULL);
        uv_run(&S.loop, UV_RUN_DEFAULT);
        /* _exit: no atexit work under the seccomp filter */
        _exit(0);
}
