/* SPDX-License-Identifier: Apache-2.0 */
/* The admin HTTP endpoint: /metrics (Prometheus text) and /healthz. */
#include "daemon/admin.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "basic/err.h"
#include "basic/log.h"
#include "basic/macro.h"
#include "priv/client.h"
#include "sandbox/sandbox.h"
#include "store/store.h"

#define REQ_MAX 8192
#define IDLE_MS 10000
#define RPC_SLOTS 128 /* distinct (method, code) pairs counted */

struct rpc_count {
        char *path;
        int code;
        uint64_t n;
};

struct admin {
        uv_loop_t *loop;
        uv_tcp_t listener;
        const struct admin_sources *src;
        struct rpc_count rpc[RPC_SLOTS];
        size_t n_rpc;
        uint64_t rpc_dropped;
        int port;
        int open; /* handles not yet closed: listener + connections */
        bool closing;
        struct conn *conns;
};

struct conn {
        struct admin *a;
        struct conn *next;
        uv_tcp_t tcp;
        uv_timer_t timer;
        int handles;
        char buf[REQ_MAX];
        size_t len;
        bool answered;
        uv_write_t wr;
        char *resp;
};

static void admin_maybe_free(struct admin *a) {
        if (!a->closing || a->open > 0)
                return;
        for (size_t i = 0; i < a->n_rpc; i++)
                free(a->rpc[i].path);
        free(a);
}

/* --- metrics text --- */

struct text {
        char *p;
        size_t len, cap;
        bool oom;
};

_printf_(2, 3) static void put(struct text *t, const char *fmt, ...) {
        if (t->oom)
                return;
        for (;;) {
                va_list ap;
                va_start(ap, fmt);
                int n = vsnprintf(t->p ? t->p + t->len : NULL, t->p ? t->cap - t->len : 0, fmt, ap);
                va_end(ap);
                if (n < 0) {
                        t->oom = true;
                        return;
                }
                if (t->p && t->len + (size_t) n < t->cap) {
                        t->len += (size_t) n;
                        return;
                }
                size_t cap = MAX(t->cap * 2, t->len + (size_t) n + 4096);
                char *np = realloc(t->p, cap);
                if (!np) {
                        t->oom = true;
                        return;
                }
                t->p = np;
                t->cap = cap;
        }
}

static void put_histogram(struct text *t, const char *name, const char *help,
                          const struct sbx_histogram *h) {
        put(t, "# HELP %s %s\n# TYPE %s histogram\n", name, help, name);
        uint64_t cum = 0;
        for (size_t i = 0; i < SBX_HIST_BUCKETS; i++) {
                cum += h->counts[i];
                if (i < SBX_HIST_BUCKETS - 1)
                        put(t, "%s_bucket{le=\"%g\"} %llu\n", name, sbx_histogram_bounds[i],
                            (unsigned long long) cum);
                else
                        put(t, "%s_bucket{le=\"+Inf\"} %llu\n", name, (unsigned long long) cum);
        }
        put(t, "%s_sum %.6f\n%s_count %llu\n", name, h->sum, name, (unsigned long long) h->count);
}

/* Label values are method paths: escape backslash, quote, newline. */
static void put_label(struct text *t, const char *v) {
        for (; *v; v++) {
                if (*v == '\\' || *v == '"')
                        put(t, "\\%c", *v);
                else if (*v == '\n')
                        put(t, "\\n");
                else
                        put(t, "%c", *v);
        }
}

static char *metrics_text(struct admin *a, size_t *len) {
        struct text t = {0};
        static const char *const states[] = {"",           "pending", "running", "terminating",
                                             "terminated", "failed"};
        int64_t counts[6] = {0};
        struct wr_err e = {0};
        bool have_counts = store_sandbox_count_by_status(a->src->store, counts, &e) >= 0;
        put(&t, "# HELP warren_sandboxes Sandboxes recorded, by state.\n"
                "# TYPE warren_sandboxes gauge\n");
        for (int i = 1; have_counts && i < 6; i++)
                put(&t, "warren_sandboxes{state=\"%s\"} %lld\n", states[i], (long long) counts[i]);
        struct sbx_manager *m = *a->src->sandboxes;
        put(&t,
            "# HELP warren_sandboxes_live Sandboxes this warrend holds (running or "
            "terminating).\n# TYPE warren_sandboxes_live gauge\nwarren_sandboxes_live %zu\n",
            m ? sbx_manager_running(m) : (size_t) 0);
        put(&t,
            "# HELP warren_warm_pool_size Sandbox host resources prepared ahead and idle.\n"
            "# TYPE warren_warm_pool_size gauge\nwarren_warm_pool_size %zu\n",
            m ? sbx_manager_pool_size(m) : (size_t) 0);
        if (m) {
                const struct sbx_metrics *sm = sbx_manager_metrics(m);
                put_histogram(&t, "warren_sandbox_create_seconds",
                              "CreateSandbox latency, request to RUNNING.", &sm->create);
                put_histogram(&t, "warren_exec_start_seconds",
                              "Exec start latency, spawn request to the process running.",
                              &sm->exec_start);
                put(&t,
                    "# HELP warren_sandboxes_created_total Sandboxes created.\n"
                    "# TYPE warren_sandboxes_created_total counter\n"
                    "warren_sandboxes_created_total %llu\n"
                    "# HELP warren_sandbox_create_failures_total Failed creates.\n"
                    "# TYPE warren_sandbox_create_failures_total counter\n"
                    "warren_sandbox_create_failures_total %llu\n"
                    "# HELP warren_sandboxes_recovered_total Sandboxes re-attached at start.\n"
                    "# TYPE warren_sandboxes_recovered_total counter\n"
                    "warren_sandboxes_recovered_total %llu\n"
                    "# HELP warren_sandbox_teardown_failures_total Teardowns whose host cleanup "
                    "had to be retried.\n"
                    "# TYPE warren_sandbox_teardown_failures_total counter\n"
                    "warren_sandbox_teardown_failures_total %llu\n"
                    "# HELP warren_sandbox_cleanup_pending Ended sandboxes whose host cleanup is "
                    "still being retried.\n"
                    "# TYPE warren_sandbox_cleanup_pending gauge\n"
                    "warren_sandbox_cleanup_pending %zu\n",
                    (unsigned long long) sm->created, (unsigned long long) sm->create_failed,
                    (unsigned long long) sm->recovered, (unsigned long long) sm->teardown_failed,
                    sbx_manager_cleanup_pending(m));
        }
        struct priv_client *priv = a->src->priv ? *a->src->priv : NULL;
        if (priv) {
                struct priv_client_stats ps;
                priv_client_stats(priv, &ps);
                put(&t,
                    "# HELP warren_priv_pid The running warren-priv's pid (0: none).\n"
                    "# TYPE warren_priv_pid gauge\nwarren_priv_pid %d\n"
                    "# HELP warren_priv_starts_total warren-priv processes started.\n"
                    "# TYPE warren_priv_starts_total counter\nwarren_priv_starts_total %llu\n"
                    "# HELP warren_priv_refused_total Requests the running warren-priv "
                    "refused.\n"
                    "# TYPE warren_priv_refused_total counter\nwarren_priv_refused_total %llu\n"
                    "# HELP warren_priv_lost_total Requests that failed because warren-priv "
                    "died.\n"
                    "# TYPE warren_priv_lost_total counter\nwarren_priv_lost_total %llu\n"
                    "# HELP warren_priv_requests_total Requests the running warren-priv carried "
                    "out, by type (its own count).\n"
                    "# TYPE warren_priv_requests_total counter\n",
                    (int) ps.pid, (unsigned long long) ps.starts, (unsigned long long) ps.refused,
                    (unsigned long long) ps.lost);
                for (uint32_t ty = 1; ty < PRIV_REQ_TYPES; ty++)
                        if (priv_type_name(ty)) /* the table has gaps */
                                put(&t, "warren_priv_requests_total{type=\"%s\"} %llu\n",
                                    priv_type_name(ty), (unsigned long long) ps.served[ty]);
        }
        put(&t, "# HELP warren_rpc_requests_total Finished RPCs by method and status code.\n"
                "# TYPE warren_rpc_requests_total counter\n");
        for (size_t i = 0; i < a->n_rpc; i++) {
                put(&t, "warren_rpc_requests_total{method=\"");
                put_label(&t, a->rpc[i].path);
                put(&t, "\",code=\"%s\"} %llu\n", err_status_name(a->rpc[i].code),
                    (unsigned long long) a->rpc[i].n);
        }
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        uint64_t now = (uint64_t) ts.tv_sec * 1000000u + (uint64_t) ts.tv_nsec / 1000u;
        put(&t,
            "# HELP warren_uptime_seconds Seconds since warrend started.\n"
            "# TYPE warren_uptime_seconds gauge\nwarren_uptime_seconds %.3f\n",
            (double) (now - a->src->started_usec) / 1e6);
        if (t.oom) {
                free(t.p);
                return NULL;
        }
        *len = t.len;
        return t.p;
}

void admin_rpc_observe(const char *path, int status, void *userdata) {
        struct admin *a = userdata;
        if (!a || status < 0 || status > 16)
                return;
        for (size_t i = 0; i < a->n_rpc; i++)
                if (a->rpc[i].code == status && strcmp(a->rpc[i].path, path) == 0) {
                        a->rpc[i].n++;
                        return;
                }
        if (a->n_rpc == RPC_SLOTS) {
                a->rpc_dropped++;
                return;
        }
        char *p = strdup(path);
        if (!p)
                return;
        a->rpc[a->n_rpc++] = (struct rpc_count){.path = p, .code = status, .n = 1};
}

/* --- connections --- */

static void conn_handle_closed(uv_handle_t *h) {
        struct conn *c = h->data;
        if (--c->handles > 0)
                return;
        struct admin *a = c->a;
        for (struct conn **pp = &a->conns; *pp; pp = &(*pp)->next)
                if (*pp == c) {
                        *pp = c->next;
                        break;
                }
        free(c->resp);
        free(c);
        a->open--;
        admin_maybe_free(a);
}

static void conn_close(struct conn *c) {
        if (uv_is_closing((uv_handle_t *) &c->tcp))
                return;
        uv_timer_stop(&c->timer);
        uv_close((uv_handle_t *) &c->tcp, conn_handle_closed);
        uv_close((uv_handle_t *) &c->timer, conn_handle_closed);
}

static void on_written(uv_write_t *w, int status) {
        conn_close(w->data);
}

static void respond(struct conn *c, const char *status, const char *ctype, const char *body,
                    size_t len) {
        c->answered = true;
        uv_read_stop((uv_stream_t *) &c->tcp);
        char head[256];
        int hl = snprintf(head, sizeof(head),
                          "HTTP/1.1 %s\r\nContent-Type: %s\r\nContent-Length: %zu\r\n"
                          "Connection: close\r\n\r\n",
                          status, ctype, len);
        c->resp = malloc((size_t) hl + len);
        if (!c->resp) {
                conn_close(c);
                return;
        }
        memcpy(c->resp, head, (size_t) hl);
        memcpy(c->resp + hl, body, len);
        uv_buf_t b = uv_buf_init(c->resp, (unsigned) ((size_t) hl + len));
        c->wr.data = c;
        if (uv_write(&c->wr, (uv_stream_t *) &c->tcp, &b, 1, on_written) < 0)
                conn_close(c);
}

static void respond_text(struct conn *c, const char *status, const char *body) {
        respond(c, status, "text/plain; charset=utf-8", body, strlen(body));
}

static void handle_request(struct conn *c) {
        /* Request line: METHOD SP TARGET SP VERSION */
        char method[8], target[256];
        if (sscanf(c->buf, "%7s %255s HTTP/1.", method, target) != 2) {
                respond_text(c, "400 Bad Request", "bad request\n");
                return;
        }
        bool head = strcmp(method, "HEAD") == 0;
        if (strcmp(method, "GET") != 0 && !head) {
                respond_text(c, "405 Method Not Allowed", "use GET\n");
                return;
        }
        char *q = strchr(target, '?');
        if (q)
                *q = 0;
        if (strcmp(target, "/healthz") == 0) {
                bool up = *c->a->src->sandboxes != NULL;
                respond_text(c, up ? "200 OK" : "503 Service Unavailable",
                             up ? "ok\n" : "shutting down\n");
                return;
        }
        if (strcmp(target, "/metrics") == 0) {
                size_t len = 0;
                char *body = metrics_text(c->a, &len);
                if (!body) {
                        respond_text(c, "500 Internal Server Error", "out of memory\n");
                        return;
                }
                respond(c, "200 OK", "text/plain; version=0.0.4; charset=utf-8", body,
                        head ? 0 : len);
                free(body);
                return;
        }
        if (strncmp(target, "/.well-known/", 13) == 0 && c->a->src->well_known) {
                char *body = c->a->src->well_known(target, c->a->src->well_known_userdata);
                if (body) {
                        respond(c, "200 OK", "application/json", body, head ? 0 : strlen(body));
                        free(body);
                        return;
                }
        }
        respond_text(c, "404 Not Found", "not found: try /metrics or /healthz\n");
}

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf) {
        struct conn *c = h->data;
        *buf = uv_buf_init(c->buf + c->len, (unsigned) (sizeof(c->buf) - 1 - c->len));
}

static void on_read(uv_stream_t *s, ssize_t n, const uv_buf_t *buf) {
        struct conn *c = s->data;
        if (n < 0) {
                conn_close(c);
                return;
        }
        if (c->answered)
                return;
        c->len += (size_t) n;
        c->buf[c->len] = 0;
        if (strstr(c->buf, "\r\n\r\n") || strstr(c->buf, "\n\n")) {
                handle_request(c);
                return;
        }
        if (c->len >= sizeof(c->buf) - 1)
                respond_text(c, "431 Request Header Fields Too Large", "request too large\n");
}

static void on_idle(uv_timer_t *t) {
        conn_close(t->data);
}

static void on_connection(uv_stream_t *server, int status) {
        struct admin *a = server->data;
        if (status < 0 || a->closing)
                return;
        struct conn *c = calloc(1, sizeof(*c));
        if (!c)
                return;
        c->a = a;
        if (uv_tcp_init(a->loop, &c->tcp) < 0) {
                free(c);
                return;
        }
        c->tcp.data = c;
        c->handles = 1;
        a->open++;
        c->next = a->conns;
        a->conns = c;
        if (uv_timer_init(a->loop, &c->timer) < 0) {
                /* Only the socket is open: conn_handle_closed frees c. */
                uv_close((uv_handle_t *) &c->tcp, conn_handle_closed);
                return;
        }
        c->timer.data = c;
        c->handles = 2;
        if (uv_accept(server, (uv_stream_t *) &c->tcp) < 0) {
                conn_close(c);
                return;
        }
        uv_timer_start(&c->timer, on_idle, IDLE_MS, 0);
        uv_read_start((uv_stream_t *) &c->tcp, on_alloc, on_read);
}

/* --- start / stop --- */

static int parse_hostport(const char *hp, struct sockaddr_storage *ss, struct wr_err *e) {
        char host[256];
        const char *port;
        if (hp[0] == '[') {
                const char *end = strchr(hp, ']');
                if (!end || end[1] != ':' || (size_t) (end - hp - 1) >= sizeof(host))
                        return err_set(e, -EINVAL, "--admin-listen %s: expected [IPv6]:PORT", hp);
                memcpy(host, hp + 1, (size_t) (end - hp - 1));
                host[end - hp - 1] = 0;
                port = end + 2;
        } else {
                const char *colon = strrchr(hp, ':');
                if (!colon || (size_t) (colon - hp) >= sizeof(host))
                        return err_set(e, -EINVAL, "--admin-listen %s: expected HOST:PORT", hp);
                memcpy(host, hp, (size_t) (colon - hp));
                host[colon - hp] = 0;
                port = colon + 1;
        }
        char *end;
        long p = strtol(port, &end, 10);
        if (!*port || *end || p < 0 || p > 65535)
                return err_set(e, -EINVAL, "--admin-listen %s: bad port", hp);
        if (!*host)
                snprintf(host, sizeof(host), "0.0.0.0");
        if (uv_ip4_addr(host, (int) p, (struct sockaddr_in *) ss) == 0 ||
            uv_ip6_addr(host, (int) p, (struct sockaddr_in6 *) ss) == 0)
                return 0;
        return err_set(e, -EINVAL, "--admin-listen %s: %s is not an IP address", hp, host);
}

static void listener_closed(uv_handle_t *h) {
        struct admin *a = h->data;
        a->open--;
        admin_maybe_free(a);
}

int admin_prebind(const char *hostport, int *ret_fd, struct wr_err *e) {
        struct sockaddr_storage ss = {0};
        int r = parse_hostport(hostport, &ss, e);
        if (r < 0)
                return r;
        _cleanup_close_ int fd =
                socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        if (fd < 0)
                return err_set(e, -errno, "admin listener %s: socket: %m", hostport);
        int one = 1;
        (void) setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
        socklen_t len =
                ss.ss_family == AF_INET6 ? sizeof(struct sockaddr_in6) : sizeof(struct sockaddr_in);
        if (bind(fd, (struct sockaddr *) &ss, len) < 0 || listen(fd, 64) < 0)
                return err_set(e, -errno, "admin listener %s: %m", hostport);
        *ret_fd = TAKE_FD(fd);
        return 0;
}

int admin_start(uv_loop_t *loop, const char *hostport, int fd, const struct admin_sources *src,
                struct admin **ret, struct wr_err *e) {
        struct sockaddr_storage ss = {0};
        int r = fd >= 0 ? 0 : parse_hostport(hostport, &ss, e);
        if (r < 0)
                return r;
        struct admin *a = calloc(1, sizeof(*a));
        if (!a) {
                safe_close(fd);
                return err_set(e, -ENOMEM, "admin: out of memory");
        }
        a->loop = loop;
        a->src = src;
        r = uv_tcp_init(loop, &a->listener);
        if (r < 0) {
                free(a);
                safe_close(fd);
                return err_set(e, r, "admin listener %s: %s", hostport, uv_strerror(r));
        }
        a->listener.data = a;
        a->open = 1;
        if (fd >= 0) {
                /* a socket bound before the drop (admin_prebind), taken over */
                r = uv_tcp_open(&a->listener, fd);
                if (r < 0)
                        safe_close(fd);
        } else
                r = uv_tcp_bind(&a->listener, (const struct sockaddr *) &ss, 0);
        if (r == 0)
                r = uv_listen((uv_stream_t *) &a->listener, 64, on_connection);
        if (r < 0) {
                err_set(e, r, "admin listener %s: %s", hostport, uv_strerror(r));
                a->closing = true;
                uv_close((uv_handle_t *) &a->listener, listener_closed);
                return r;
        }
        struct sockaddr_storage bound;
        int len = sizeof(bound);
        if (uv_tcp_getsockname(&a->listener, (struct sockaddr *) &bound, &len) == 0)
                a->port = ntohs(bound.ss_family == AF_INET6
                                        ? ((struct sockaddr_in6 *) &bound)->sin6_port
                                        : ((struct sockaddr_in *) &bound)->sin_port);
        *ret = a;
        return 0;
}

int admin_port(const struct admin *a) {
        return a->port;
}

void admin_close(struct admin *a) {
        if (!a || a->closing)
                return;
        a->closing = true;
        for (struct conn *c = a->conns; c; c = c->next)
                conn_close(c);
        uv_close((uv_handle_t *) &a->listener, listener_closed);
}
