/* SPDX-License-Identifier: Apache-2.0 */
/* The K8S compute class on the loop: requests to the Kubernetes API
 * (curl-uv), the Pod watch, create / terminate / lifetimes, recovery.
 * See k8s.h. */
#include "k8s/k8s.h"

#include <arpa/inet.h>
#include <errno.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include <curl/curl.h>

#include "basic/log.h"
#include "basic/macro.h"
#include "image/curl-uv.h"
#include "k8s/bridge.h"
#include "k8s/kubeconfig.h"
#include "k8s/pod.h"
#include "sandbox/sandbox.h"
#include "store/store.h"

#define CREATE_TIMEOUT_MS (300 * 1000)
#define RELAY_TIMEOUT_MS 30000 /* from the main container's start */
#define REQ_TIMEOUT_S 30L
#define WATCH_TIMEOUT_S 240
#define WATCH_RETRY_MS 1000
#define RESP_MAX (64u << 20)

struct k8s_class;

typedef void (*req_fn)(struct k8s_class *k, long http, const char *body, size_t len, CURLcode cc,
                       void *userdata);

struct k8s_req {
        struct k8s_req *next;
        struct k8s_class *k;
        CURL *easy;
        struct curl_slist *hdr;
        char *body; /* request body (a Pod: env values inside; wiped) */
        char *resp;
        size_t resp_len, resp_cap;
        bool watch;
        req_fn fn;
        void *userdata;
};

/* One sandbox this class looks after (PENDING, RUNNING or TERMINATING). */
struct k8s_sbx {
        struct k8s_sbx *next;
        struct k8s_class *k;
        char id[32];
        char pod[64];
        enum store_sandbox_status status;
        int64_t expires_ns;
        uv_timer_t timer;  /* create deadline, lifetime, or terminate's safety net */
        bool posted;       /* the Pod exists (or its POST was accepted) */
        uint64_t post_seq; /* when its POST was sent (k->seq) */
        /* its env lives in a Secret (name "<pod>-env"): the Pod is POSTed
         * once the Secret exists (pod_json waits meanwhile; wiped) */
        bool has_secret, secret_deleted;
        /* the relay's Secret ("<pod>-relay"), POSTed first; the env
         * Secret's JSON waits for it (wiped) */
        bool has_relay_secret, relay_secret_deleted;
        char *env_secret_json;
        /* the main container runs / its relay is connected: RUNNING
         * once both */
        bool pod_running, relay_up, relay_wait;
        char *workdir;
        char **env; /* the spec's (secrets resolved: wiped) */
        char *pod_json;
        bool delete_sent;
        k8s_create_fn create_done;
        void *create_ud;
        k8s_terminate_fn term_done;
        void *term_ud;
};

/* A watch event waiting to be handled: lines arrive inside libcurl's
 * write callback, where no transfer may be started (a Pod's DELETE), so
 * they are handled from a timer on the loop. */
struct k8s_event {
        struct k8s_event *next;
        size_t len;
        char line[];
};

struct k8s_class {
        uv_loop_t *loop;
        struct store *store;
        struct curl_uv *cu;
        struct k8s_conn conn;
        char *ns;
        char *init_image;
        char owner[24]; /* "w-" + 16 hex digits: the warren.dev/owner label */
        uint64_t seq;   /* orders Pod POSTs and list requests */
        uint64_t list_seq;
        struct k8s_req *reqs;
        struct k8s_sbx *sbxs;
        /* the watch */
        struct k8s_req *watch;
        struct k8s_lines lines;
        char rv[32];
        uv_timer_t watch_timer;
        struct k8s_event *events, **events_tail;
        uv_timer_t events_timer;
        bool relisting;
        bool closing;
        bool terminate_on_exit;
        int closed; /* timers closed (k8s_class_free) */
        struct k8s_bridge *bridge;
        void (*relay_attach)(const char *id, int ctl_fd, const char *workdir, char *const *env,
                             void *userdata);
        void (*relay_end)(const char *id, void *userdata);
        void *relay_ud;
};

static void sbx_end(struct k8s_sbx *sb, enum store_sandbox_status st, const char *msg, int r,
                    enum wr_status status);

/* ---- HTTP ---- */

static size_t on_write(char *ptr, size_t size, size_t nmemb, void *userdata);

/* An easy handle for method path (path relative to the server), headers
 * and TLS set from the kubeconfig. */
static CURL *easy_new(struct k8s_class *k, const char *method, const char *path,
                      struct curl_slist **hdr) {
        CURL *c = curl_easy_init();
        if (!c)
                return NULL;
        char url[2048];
        snprintf(url, sizeof(url), "%s%s", k->conn.server, path);
        curl_easy_setopt(c, CURLOPT_URL, url);
        curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method);
        curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
        curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "https");
        curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT, 10L);
        if (k->conn.ca_pem) {
                struct curl_blob b = {k->conn.ca_pem, k->conn.ca_len, CURL_BLOB_COPY};
                curl_easy_setopt(c, CURLOPT_CAINFO_BLOB, &b);
        }
        if (k->conn.insecure) {
                curl_easy_setopt(c, CURLOPT_SSL_VERIFYPEER, 0L);
                curl_easy_setopt(c, CURLOPT_SSL_VERIFYHOST, 0L);
        }
        if (k->conn.cert_pem) {
                struct curl_blob cb = {k->conn.cert_pem, k->conn.cert_len, CURL_BLOB_COPY};
                struct curl_blob kb = {k->conn.key_pem, k->conn.key_len, CURL_BLOB_COPY};
                curl_easy_setopt(c, CURLOPT_SSLCERTTYPE, "PEM");
                curl_easy_setopt(c, CURLOPT_SSLCERT_BLOB, &cb);
                curl_easy_setopt(c, CURLOPT_SSLKEYTYPE, "PEM");
                curl_easy_setopt(c, CURLOPT_SSLKEY_BLOB, &kb);
        }
        struct curl_slist *h = curl_slist_append(NULL, "Accept: application/json");
        h = curl_slist_append(h, strcmp(method, "PATCH") == 0
                                         ? "Content-Type: application/merge-patch+json"
                                         : "Content-Type: application/json");
        h = curl_slist_append(h, "User-Agent: warrend");
        char *tok = NULL;
        if (k->conn.token_file) {
                FILE *f = fopen(k->conn.token_file, "re");
                char buf[8192];
                size_t n = f ? fread(buf, 1, sizeof(buf) - 1, f) : 0;
                if (f)
                        fclose(f);
                buf[n] = 0;
                buf[strcspn(buf, "\r\n")] = 0;
                if (n)
                        tok = strdup(buf);
                explicit_bzero(buf, sizeof(buf));
        } else if (k->conn.token)
                tok = strdup(k->conn.token);
        if (tok) {
                size_t n = strlen(tok) + 32;
                char *line = malloc(n);
                if (line) {
                        snprintf(line, n, "Authorization: Bearer %s", tok);
                        h = curl_slist_append(h, line);
                        explicit_bzero(line, n);
                        free(line);
                }
                explicit_bzero(tok, strlen(tok));
                free(tok);
        }
        curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
        *hdr = h;
        return c;
}

static void req_free(struct k8s_req *q) {
        if (!q)
                return;
        if (q->easy)
                curl_easy_cleanup(q->easy);
        curl_slist_free_all(q->hdr); /* the bearer line: libcurl copied it */
        if (q->body) {
                explicit_bzero(q->body, strlen(q->body));
                free(q->body);
        }
        free(q->resp);
        free(q);
}

static void req_unlink(struct k8s_req *q) {
        for (struct k8s_req **p = &q->k->reqs; *p; p = &(*p)->next)
                if (*p == q) {
                        *p = q->next;
                        return;
                }
}

static void watch_line(const char *line, size_t len, void *userdata);

static size_t on_write(char *ptr, size_t size, size_t nmemb, void *userdata) {
        struct k8s_req *q = userdata;
        size_t n = size * nmemb;
        if (q->watch) {
                int r = k8s_lines_feed(&q->k->lines, ptr, n, watch_line, q->k);
                if (r == -E2BIG)
                        log_warn("k8s: a watch event over %u bytes was skipped", K8S_LINE_MAX);
                return r == -ENOMEM ? 0 : n;
        }
        if (q->resp_len + n + 1 > RESP_MAX)
                return 0;
        if (q->resp_len + n + 1 > q->resp_cap) {
                size_t cap = q->resp_cap ? q->resp_cap : 8192;
                while (cap < q->resp_len + n + 1)
                        cap *= 2;
                char *b = realloc(q->resp, cap);
                if (!b)
                        return 0;
                q->resp = b;
                q->resp_cap = cap;
        }
        memcpy(q->resp + q->resp_len, ptr, n);
        q->resp_len += n;
        q->resp[q->resp_len] = 0;
        return n;
}

/* Start method path (body: JSON, copied; NULL none); fn runs once from
 * the loop with the status and the body. */
static int request(struct k8s_class *k, const char *method, const char *path, const char *body,
                   bool watch, req_fn fn, void *userdata, struct k8s_req **ret) {
        struct k8s_req *q = calloc(1, sizeof(*q));
        if (!q)
                return -ENOMEM;
        q->k = k;
        q->fn = fn;
        q->userdata = userdata;
        q->watch = watch;
        if (!(q->easy = easy_new(k, method, path, &q->hdr)) ||
            (body && !(q->body = strdup(body)))) {
                req_free(q);
                return -ENOMEM;
        }
        if (body)
                curl_easy_setopt(q->easy, CURLOPT_POSTFIELDS, q->body);
        curl_easy_setopt(q->easy, CURLOPT_WRITEFUNCTION, on_write);
        curl_easy_setopt(q->easy, CURLOPT_WRITEDATA, q);
        curl_easy_setopt(q->easy, CURLOPT_PRIVATE, q);
        if (!watch)
                curl_easy_setopt(q->easy, CURLOPT_TIMEOUT, REQ_TIMEOUT_S);
        if (curl_uv_add(k->cu, q->easy) < 0) {
                req_free(q);
                return -EIO;
        }
        q->next = k->reqs;
        k->reqs = q;
        if (ret)
                *ret = q;
        return 0;
}

static void on_done(CURL *easy, CURLcode cc, void *userdata) {
        struct k8s_class *k = userdata;
        struct k8s_req *q = NULL;
        curl_easy_getinfo(easy, CURLINFO_PRIVATE, (char **) &q);
        if (!q)
                return;
        long http = 0;
        curl_easy_getinfo(easy, CURLINFO_RESPONSE_CODE, &http);
        req_unlink(q);
        if (q->fn)
                q->fn(k, http, q->resp ? q->resp : "", q->resp_len, cc, q->userdata);
        req_free(q);
}

/* A blocking request (start-up and --terminate-on-exit only): *ret the
 * body (caller frees). */
static int request_sync_m(struct k8s_class *k, const char *method, const char *path, long *http,
                          char **ret, size_t *len, struct wr_err *e) {
        struct k8s_req q = {.k = k};
        q.easy = easy_new(k, method, path, &q.hdr);
        if (!q.easy)
                return err_set(e, -ENOMEM, "out of memory");
        curl_easy_setopt(q.easy, CURLOPT_WRITEFUNCTION, on_write);
        curl_easy_setopt(q.easy, CURLOPT_WRITEDATA, &q);
        curl_easy_setopt(q.easy, CURLOPT_TIMEOUT, 10L);
        char ebuf[CURL_ERROR_SIZE] = "";
        curl_easy_setopt(q.easy, CURLOPT_ERRORBUFFER, ebuf);
        CURLcode cc = curl_easy_perform(q.easy);
        curl_easy_getinfo(q.easy, CURLINFO_RESPONSE_CODE, http);
        curl_easy_cleanup(q.easy);
        curl_slist_free_all(q.hdr);
        if (cc != CURLE_OK) {
                free(q.resp);
                return err_set(e, -EHOSTUNREACH, "%s%s: %s", k->conn.server, path,
                               ebuf[0] ? ebuf : curl_easy_strerror(cc));
        }
        *ret = q.resp ? q.resp : strdup("");
        *len = q.resp_len;
        return *ret ? 0 : err_set(e, -ENOMEM, "out of memory");
}

static int request_sync(struct k8s_class *k, const char *path, long *http, char **ret, size_t *len,
                        struct wr_err *e) {
        return request_sync_m(k, "GET", path, http, ret, len, e);
}

/* ---- sandboxes ---- */

static struct k8s_sbx *find(struct k8s_class *k, const char *id) {
        for (struct k8s_sbx *s = k->sbxs; s; s = s->next)
                if (!strcmp(s->id, id))
                        return s;
        return NULL;
}

static void sbx_closed(uv_handle_t *h) {
        free(h->data);
}

static void sbx_unlink_free(struct k8s_sbx *sb) {
        erase_and_freep(&sb->env_secret_json);
        free(sb->workdir);
        sb->workdir = NULL;
        sbx_env_free(sb->env);
        sb->env = NULL;
        erase_and_freep(&sb->pod_json);
        for (struct k8s_sbx **p = &sb->k->sbxs; *p; p = &(*p)->next)
                if (*p == sb) {
                        *p = sb->next;
                        break;
                }
        uv_timer_stop(&sb->timer);
        sb->timer.data = sb;
        uv_close((uv_handle_t *) &sb->timer, sbx_closed);
}

/* A request nobody waits for (userdata: "what it was", copied): a
 * failure is logged. */
static void on_delete_done(struct k8s_class *k, long http, const char *body, size_t len,
                           CURLcode cc, void *userdata) {
        (void) k;
        char *what = userdata;
        if (cc != CURLE_OK || (http >= 300 && http != 404)) {
                char m[300];
                k8s_status_message(body, len, m, sizeof(m));
                log_warn("k8s: %s: %s", what,
                         cc != CURLE_OK ? curl_easy_strerror(cc)
                         : m[0]         ? m
                                        : "refused");
        }
        free(what);
}

/* Send method path (body) and only log a failure as "what". */
static int fire(struct k8s_class *k, const char *method, const char *path, const char *body,
                const char *what) {
        char *w = strdup(what);
        if (!w)
                return -ENOMEM;
        int r = request(k, method, path, body, false, on_delete_done, w, NULL);
        if (r < 0)
                free(w);
        return r;
}

static void secret_delete(struct k8s_class *k, const char *name) {
        char path[512], what[160];
        snprintf(path, sizeof(path), "/api/v1/namespaces/%s/secrets/%s", k->ns, name);
        snprintf(what, sizeof(what), "delete Secret %s", name);
        (void) fire(k, "DELETE", path, NULL, what);
}

/* The terminate's answer: the Pod is gone (or the DELETE answered 404). */
static void on_terminate_delete(struct k8s_class *k, long http, const char *body, size_t len,
                                CURLcode cc, void *userdata);

static int pod_delete(struct k8s_class *k, const char *pod, int64_t grace_s, req_fn fn, void *ud) {
        char path[512];
        snprintf(path, sizeof(path), "/api/v1/namespaces/%s/pods/%s?gracePeriodSeconds=%lld", k->ns,
                 pod, (long long) grace_s);
        if (!fn) {
                char what[160];
                snprintf(what, sizeof(what), "delete Pod %s", pod);
                return fire(k, "DELETE", path,
                            "{\"kind\":\"DeleteOptions\",\"apiVersion\":\"v1\","
                            "\"propagationPolicy\":\"Background\"}",
                            what);
        }
        return request(k, "DELETE", path, NULL, false, fn, ud, NULL);
}

/* End sb: its row gets st and msg, whoever waits is answered (a create
 * with r/status and msg, a terminate with OK), its Pod deleted (unless a
 * delete is already on its way), sb freed. */
static void sbx_end(struct k8s_sbx *sb, enum store_sandbox_status st, const char *msg, int r,
                    enum wr_status status) {
        struct k8s_class *k = sb->k;
        struct wr_err se = {0};
        if (store_sandbox_update_status(k->store, sb->id, st, msg, &se) < 0)
                log_warn("k8s: sandbox %s: record %s: %s", sb->id, msg, se.msg);
        log_info("sandbox %s (Pod %s): %s", sb->id, sb->pod, msg);
        if (sb->posted && !sb->delete_sent) {
                sb->delete_sent = true;
                (void) pod_delete(k, sb->pod, 0, NULL, NULL);
        }
        /* the garbage collector deletes it with its Pod too; this also
         * covers a Secret whose Pod never came */
        if (sb->has_secret && !sb->secret_deleted) {
                char name[80];
                snprintf(name, sizeof(name), "%s-env", sb->pod);
                sb->secret_deleted = true;
                secret_delete(k, name);
        }
        if (sb->has_relay_secret && !sb->relay_secret_deleted) {
                char name[80];
                snprintf(name, sizeof(name), "%s-relay", sb->pod);
                sb->relay_secret_deleted = true;
                secret_delete(k, name);
        }
        if (k->relay_end)
                k->relay_end(sb->id, k->relay_ud);
        if (sb->create_done) {
                struct wr_err e = {0};
                err_setx(&e, r < 0 ? r : -ESRCH, status ? status : WR_STATUS_FAILED_PRECONDITION,
                         WR_FAULT_WORKLOAD, "create sandbox: %s", msg);
                k8s_create_fn fn = sb->create_done;
                sb->create_done = NULL;
                fn(e.code, NULL, &e, sb->create_ud);
        }
        if (sb->term_done) {
                k8s_terminate_fn fn = sb->term_done;
                sb->term_done = NULL;
                fn(0, NULL, sb->term_ud);
        }
        sbx_unlink_free(sb);
}

static void on_lifetime(uv_timer_t *t) {
        struct k8s_sbx *sb = t->data;
        if (sb->status == STORE_SANDBOX_RUNNING)
                sbx_end(sb, STORE_SANDBOX_TERMINATED, "lifetime expired", 0, 0);
}

static void on_create_timeout(uv_timer_t *t) {
        struct k8s_sbx *sb = t->data;
        if (sb->status == STORE_SANDBOX_PENDING)
                sbx_end(sb, STORE_SANDBOX_FAILED,
                        "the Pod did not start within 300 s (see the cluster's events)", -ETIMEDOUT,
                        WR_STATUS_DEADLINE_EXCEEDED);
}

static void on_relay_timeout(uv_timer_t *t) {
        struct k8s_sbx *sb = t->data;
        char msg[300];
        snprintf(msg, sizeof(msg),
                 "the Pod runs but its warren-relay did not reach warrend at %s within %d s "
                 "(--k8s-callback: an address the Pods can reach; docs/k8s.md)",
                 sb->k->bridge ? k8s_bridge_addr(sb->k->bridge) : "?", RELAY_TIMEOUT_MS / 1000);
        if (sb->status == STORE_SANDBOX_PENDING)
                sbx_end(sb, STORE_SANDBOX_FAILED, msg, -ETIMEDOUT, WR_STATUS_UNAVAILABLE);
}

static void on_terminate_timeout(uv_timer_t *t) {
        struct k8s_sbx *sb = t->data;
        sbx_end(sb, STORE_SANDBOX_TERMINATED, "terminated (its Pod was still being deleted)", 0, 0);
}

static void arm_lifetime(struct k8s_sbx *sb) {
        uv_timer_stop(&sb->timer);
        if (sb->expires_ns <= 0)
                return;
        int64_t left = sb->expires_ns - store_now_ns();
        uv_timer_start(&sb->timer, on_lifetime, left > 0 ? (uint64_t) (left / 1000000) : 0, 0);
}

/* The main container runs: RUNNING. */
static void sbx_running(struct k8s_sbx *sb) {
        struct k8s_class *k = sb->k;
        struct wr_err e = {0};
        if (store_sandbox_update_status(k->store, sb->id, STORE_SANDBOX_RUNNING, "", &e) < 0) {
                sbx_end(sb, STORE_SANDBOX_FAILED, e.msg, -EIO, WR_STATUS_INTERNAL);
                return;
        }
        sb->status = STORE_SANDBOX_RUNNING;
        arm_lifetime(sb);
        log_info("sandbox %s running (Pod %s/%s)", sb->id, k->ns, sb->pod);
        if (sb->create_done) {
                struct store_sandbox row = {0};
                k8s_create_fn fn = sb->create_done;
                sb->create_done = NULL;
                if (store_sandbox_load(k->store, sb->id, &row, &e) < 0)
                        fn(e.code, NULL, &e, sb->create_ud);
                else
                        fn(0, &row, NULL, sb->create_ud);
                store_sandbox_clear(&row);
        }
}

/* What an ended Pod's reason means for the sandbox's row. */
static void ended_message(const struct k8s_pod_state *st, char *buf, size_t size) {
        if (!strcmp(st->reason, "DeadlineExceeded"))
                snprintf(buf, size, "lifetime expired (DeadlineExceeded: %s)", st->message);
        else if (!strcmp(st->reason, "OOMKilled"))
                snprintf(buf, size, "oom: the sandbox's memory limit was reached (OOMKilled)");
        else if (st->exit_code >= 0)
                snprintf(buf, size, "its Pod ended: %s (exit code %d) %s", st->reason,
                         st->exit_code, st->message);
        else
                snprintf(buf, size, "its Pod ended: %s %s", st->reason, st->message);
}

static void orphan_check(struct k8s_class *k, const struct k8s_pod_state *st) {
        if (st->deleting || !st->sandbox_id[0] || !st->name[0])
                return;
        struct store_sandbox row = {0};
        bool live = store_sandbox_load(k->store, st->sandbox_id, &row, NULL) == 0 &&
                    (row.status == STORE_SANDBOX_PENDING || row.status == STORE_SANDBOX_RUNNING ||
                     row.status == STORE_SANDBOX_TERMINATING);
        store_sandbox_clear(&row);
        if (live)
                return; /* a live row another path tracks (recovery adds it) */
        log_info("k8s: Pod %s/%s has no live sandbox (%s): deleting it", k->ns, st->name,
                 st->sandbox_id);
        (void) pod_delete(k, st->name, 0, NULL, NULL);
}

/* What the API says about one Pod (a watch event or a list item). */
static void pod_state(struct k8s_class *k, const struct k8s_pod_state *st, bool deleted) {
        struct k8s_sbx *sb = st->sandbox_id[0] ? find(k, st->sandbox_id) : NULL;
        if (!sb) {
                if (!deleted)
                        orphan_check(k, st);
                return;
        }
        if (strcmp(sb->pod, st->name) != 0)
                return;
        sb->posted = true;
        char msg[K8S_REASON_MAX + K8S_MESSAGE_MAX + 64];
        if (deleted) {
                sb->delete_sent = true; /* gone: nothing left to delete */
                if (sb->status == STORE_SANDBOX_TERMINATING)
                        sbx_end(sb, STORE_SANDBOX_TERMINATED, "terminated", 0, 0);
                else if (sb->status == STORE_SANDBOX_PENDING)
                        sbx_end(sb, STORE_SANDBOX_FAILED, "its Pod was deleted before it started",
                                -ESRCH, 0);
                else {
                        if (st->stage == K8S_POD_ENDED)
                                ended_message(st, msg, sizeof(msg));
                        else
                                snprintf(msg, sizeof(msg), "its Pod was deleted");
                        sbx_end(sb, STORE_SANDBOX_TERMINATED, msg, 0, 0);
                }
                return;
        }
        switch (st->stage) {
        case K8S_POD_RUNNING:
                sb->pod_running = !st->deleting;
                /* and once its relay is connected: a create answers when
                 * exec works */
                if (sb->status == STORE_SANDBOX_PENDING && !st->deleting &&
                    (sb->relay_up || !k->bridge))
                        sbx_running(sb);
                else if (sb->status == STORE_SANDBOX_PENDING && !st->deleting && !sb->relay_wait) {
                        /* the relay starts before the main container: it
                         * has RELAY_TIMEOUT_MS more to dial warrend */
                        sb->relay_wait = true;
                        uv_timer_start(&sb->timer, on_relay_timeout, RELAY_TIMEOUT_MS, 0);
                }
                break;
        case K8S_POD_START_FAILED:
                if (sb->status == STORE_SANDBOX_TERMINATING)
                        break;
                snprintf(msg, sizeof(msg), "the Pod did not start: %s: %s", st->reason,
                         st->message[0] ? st->message : "(no message)");
                sbx_end(sb,
                        sb->status == STORE_SANDBOX_PENDING ? STORE_SANDBOX_FAILED
                                                            : STORE_SANDBOX_TERMINATED,
                        msg, -ESRCH, WR_STATUS_FAILED_PRECONDITION);
                break;
        case K8S_POD_ENDED:
                if (sb->status == STORE_SANDBOX_TERMINATING)
                        break; /* its DELETED event ends it */
                ended_message(st, msg, sizeof(msg));
                sbx_end(sb,
                        sb->status == STORE_SANDBOX_PENDING ? STORE_SANDBOX_FAILED
                                                            : STORE_SANDBOX_TERMINATED,
                        msg, -ESRCH, WR_STATUS_FAILED_PRECONDITION);
                break;
        default:
                break;
        }
}

/* ---- the watch ---- */

static void watch_start(struct k8s_class *k);

static void handle_line(struct k8s_class *k, const char *line, size_t len);

static void on_events(uv_timer_t *t) {
        struct k8s_class *k = t->data;
        while (k->events && !k->closing) {
                struct k8s_event *ev = k->events;
                k->events = ev->next;
                if (!k->events)
                        k->events_tail = &k->events;
                handle_line(k, ev->line, ev->len);
                free(ev);
        }
}

static void events_clear(struct k8s_class *k) {
        while (k->events) {
                struct k8s_event *ev = k->events;
                k->events = ev->next;
                free(ev);
        }
        k->events_tail = &k->events;
}

static void watch_line(const char *line, size_t len, void *userdata) {
        struct k8s_class *k = userdata;
        struct k8s_event *ev = malloc(sizeof(*ev) + len + 1);
        if (!ev) {
                k->rv[0] = 0; /* lost an event: list again when the watch ends */
                return;
        }
        ev->next = NULL;
        ev->len = len;
        memcpy(ev->line, line, len);
        ev->line[len] = 0;
        *k->events_tail = ev;
        k->events_tail = &ev->next;
        uv_timer_start(&k->events_timer, on_events, 0, 0);
}

static void handle_line(struct k8s_class *k, const char *line, size_t len) {
        struct k8s_pod_state st;
        int t = k8s_watch_event_parse(line, len, &st);
        if (t < 0)
                return;
        if (t == K8S_EVENT_ERROR) {
                log_debug("k8s: watch: %s", st.message);
                k->rv[0] = 0; /* relist */
                return;
        }
        if (st.resource_version[0])
                snprintf(k->rv, sizeof(k->rv), "%s", st.resource_version);
        if (t != K8S_EVENT_BOOKMARK)
                pod_state(k, &st, t == K8S_EVENT_DELETED);
}

static void on_watch_retry(uv_timer_t *t) {
        watch_start(t->data);
}

static void watch_again(struct k8s_class *k, uint64_t ms) {
        if (!k->closing)
                uv_timer_start(&k->watch_timer, on_watch_retry, ms, 0);
}

static void on_watch_done(struct k8s_class *k, long http, const char *body, size_t len, CURLcode cc,
                          void *userdata) {
        (void) body;
        (void) len;
        (void) userdata;
        k->watch = NULL;
        k8s_lines_clear(&k->lines);
        if (cc != CURLE_OK || http != 200) {
                log_debug("k8s: watch ended: %s (HTTP %ld)", curl_easy_strerror(cc), http);
                k->rv[0] = 0;
                watch_again(k, WATCH_RETRY_MS);
                return;
        }
        watch_again(k, 0);
}

/* A list: every Pod's state, and tracked sandboxes whose Pod is missing
 * end. */
struct list_seen {
        struct k8s_class *k;
        char **ids;
        size_t n;
};

static void list_item(const struct k8s_pod_state *st, void *userdata) {
        struct list_seen *ls = userdata;
        if (st->sandbox_id[0]) {
                char **v = realloc(ls->ids, (ls->n + 1) * sizeof(*v));
                if (v) {
                        ls->ids = v;
                        v[ls->n] = strdup(st->sandbox_id);
                        if (v[ls->n])
                                ls->n++;
                }
        }
        pod_state(ls->k, st, false);
}

static void list_apply(struct k8s_class *k, const char *body, size_t len, bool recovery) {
        struct list_seen ls = {.k = k};
        char rv[32];
        if (k8s_pod_list_parse(body, len, list_item, &ls, rv, sizeof(rv)) < 0) {
                log_warn("k8s: the Pod list did not parse");
                return;
        }
        snprintf(k->rv, sizeof(k->rv), "%s", rv);
        for (struct k8s_sbx *sb = k->sbxs, *next; sb; sb = next) {
                next = sb->next;
                bool seen = false;
                for (size_t i = 0; i < ls.n && !seen; i++)
                        seen = !strcmp(ls.ids[i], sb->id);
                /* a Pod POSTed after the list was asked for is not in it */
                if (seen || (!recovery && (!sb->posted || sb->post_seq > k->list_seq)))
                        continue;
                sb->delete_sent = true;
                if (sb->status == STORE_SANDBOX_TERMINATING)
                        sbx_end(sb, STORE_SANDBOX_TERMINATED, "terminated", 0, 0);
                else if (sb->status == STORE_SANDBOX_PENDING)
                        sbx_end(sb, STORE_SANDBOX_FAILED,
                                recovery ? "warrend stopped while creating it and its Pod is gone"
                                         : "its Pod was deleted before it started",
                                -ESRCH, 0);
                else
                        sbx_end(sb, STORE_SANDBOX_TERMINATED,
                                recovery ? "lost while warrend was down: its Pod is gone"
                                         : "its Pod was deleted",
                                0, 0);
        }
        for (size_t i = 0; i < ls.n; i++)
                free(ls.ids[i]);
        free(ls.ids);
}

static void pods_path(struct k8s_class *k, char *buf, size_t size, const char *extra) {
        snprintf(buf, size,
                 "/api/v1/namespaces/%s/pods?labelSelector=" K8S_LABEL_MANAGED
                 "%%3Dtrue%%2C" K8S_LABEL_OWNER "%%3D%s%s",
                 k->ns, k->owner, extra);
}

static void on_relist(struct k8s_class *k, long http, const char *body, size_t len, CURLcode cc,
                      void *userdata) {
        (void) userdata;
        k->relisting = false;
        if (cc != CURLE_OK || http != 200) {
                log_warn("k8s: list Pods: %s (HTTP %ld)", curl_easy_strerror(cc), http);
                watch_again(k, WATCH_RETRY_MS);
                return;
        }
        list_apply(k, body, len, false);
        watch_again(k, 0);
}

static void watch_start(struct k8s_class *k) {
        if (k->closing || k->watch || k->relisting)
                return;
        char path[1024];
        if (!k->rv[0]) {
                pods_path(k, path, sizeof(path), "");
                k->relisting = true;
                k->list_seq = ++k->seq;
                if (request(k, "GET", path, NULL, false, on_relist, NULL, NULL) < 0) {
                        k->relisting = false;
                        watch_again(k, WATCH_RETRY_MS);
                }
                return;
        }
        char extra[128];
        snprintf(extra, sizeof(extra),
                 "&watch=true&allowWatchBookmarks=true&timeoutSeconds=%d&resourceVersion=%s",
                 WATCH_TIMEOUT_S, k->rv);
        pods_path(k, path, sizeof(path), extra);
        if (request(k, "GET", path, NULL, true, on_watch_done, NULL, &k->watch) < 0)
                watch_again(k, WATCH_RETRY_MS);
}

/* ---- the class ---- */

static struct k8s_sbx *track(struct k8s_class *k, const char *id, const char *pod,
                             enum store_sandbox_status status, int64_t expires_ns) {
        struct k8s_sbx *sb = calloc(1, sizeof(*sb));
        if (!sb)
                return NULL;
        if (uv_timer_init(k->loop, &sb->timer) < 0) {
                free(sb);
                return NULL;
        }
        sb->timer.data = sb;
        sb->k = k;
        snprintf(sb->id, sizeof(sb->id), "%s", id);
        snprintf(sb->pod, sizeof(sb->pod), "%s", pod);
        sb->status = status;
        sb->expires_ns = expires_ns;
        sb->next = k->sbxs;
        k->sbxs = sb;
        return sb;
}

bool k8s_row_is_k8s(const struct store_sandbox *row) {
        return row && row->cgroup_path && !strncmp(row->cgroup_path, "k8s:", 4);
}

/* Live K8S rows of this namespace are tracked again; the first list
 * (list_apply with recovery) ends those whose Pod is gone and deletes
 * Pods without a row. */
static void recover_rows(struct k8s_class *k) {
        static const int live[] = {STORE_SANDBOX_PENDING, STORE_SANDBOX_RUNNING,
                                   STORE_SANDBOX_TERMINATING};
        struct store_sandbox_filter f = {
                .all_environments = true, .statuses = live, .n_statuses = ELEMENTSOF(live)};
        struct store_sandbox *rows = NULL;
        size_t n = 0;
        struct wr_err e = {0};
        if (store_sandbox_list(k->store, &f, &rows, &n, &e) < 0) {
                log_warn("k8s: recovery: list sandboxes: %s", e.msg);
                return;
        }
        size_t nslen = strlen(k->ns);
        for (size_t i = 0; i < n; i++) {
                const struct store_sandbox *row = &rows[i];
                if (!k8s_row_is_k8s(row))
                        continue;
                const char *p = row->cgroup_path + 4;
                if (strncmp(p, k->ns, nslen) != 0 || p[nslen] != '/') {
                        log_warn("k8s: sandbox %s is a Pod in another namespace (%s); left alone",
                                 row->id, row->cgroup_path + 4);
                        continue;
                }
                struct k8s_sbx *sb = track(k, row->id, p + nslen + 1, row->status, row->expires_ns);
                if (!sb)
                        continue;
                sb->posted = true;
                if (row->status == STORE_SANDBOX_RUNNING)
                        arm_lifetime(sb);
                else if (row->status == STORE_SANDBOX_PENDING)
                        uv_timer_start(&sb->timer, on_create_timeout, CREATE_TIMEOUT_MS, 0);
                else { /* TERMINATING: delete again */
                        sb->delete_sent = true;
                        (void) pod_delete(k, sb->pod, 0, NULL, NULL);
                        uv_timer_start(&sb->timer, on_terminate_timeout, 60 * 1000, 0);
                }
        }
        store_sandbox_list_free(rows, n);
}

/* This warrend's owner label: <state_dir>/k8s-owner, made on first use. */
static int owner_load(const char *state_dir, char *owner, size_t size, struct wr_err *e) {
        char path[4096];
        snprintf(path, sizeof(path), "%s/k8s-owner", state_dir ? state_dir : ".");
        FILE *f = fopen(path, "re");
        if (f) {
                char buf[64] = "";
                bool ok = fgets(buf, sizeof(buf), f) != NULL;
                fclose(f);
                buf[strcspn(buf, "\r\n")] = 0;
                if (ok && strlen(buf) == 18 && !strncmp(buf, "w-", 2) &&
                    k8s_label_value_valid(buf)) {
                        snprintf(owner, size, "%s", buf);
                        return 0;
                }
                return err_set(e, -EINVAL, "%s: not an owner label (w- and 16 hex digits)", path);
        }
        if (errno != ENOENT)
                return err_set(e, -errno, "%s: %s", path, strerror(errno));
        unsigned char b[8] = {0};
        if (getrandom(b, sizeof(b), 0) != sizeof(b))
                return err_set(e, -EIO, "getrandom failed");
        snprintf(owner, size, "w-%02x%02x%02x%02x%02x%02x%02x%02x", b[0], b[1], b[2], b[3], b[4],
                 b[5], b[6], b[7]);
        char tmp[4200];
        snprintf(tmp, sizeof(tmp), "%s.tmp", path);
        f = fopen(tmp, "we");
        if (!f || fprintf(f, "%s\n", owner) < 0 || fflush(f) != 0 || fsync(fileno(f)) < 0) {
                int r = -errno;
                if (f)
                        fclose(f);
                unlink(tmp);
                return err_set(e, r ? r : -EIO, "%s: %s", tmp, strerror(r ? -r : EIO));
        }
        fclose(f);
        if (rename(tmp, path) < 0) {
                int r = -errno;
                unlink(tmp);
                return err_set(e, r, "%s: %s", path, strerror(-r));
        }
        return 0;
}

static void secret_item(const char *name, const char *sandbox_id, void *userdata) {
        struct k8s_class *k = userdata;
        if (sandbox_id[0] && find(k, sandbox_id))
                return;
        log_info("k8s: Secret %s/%s has no live sandbox (%s): deleting it", k->ns, name,
                 sandbox_id);
        secret_delete(k, name);
}

/* Env Secrets of this warrend whose sandbox is not live (a crash between
 * the Secret and its Pod): deleted. At start, after recovery. */
static void secrets_sweep(struct k8s_class *k) {
        char path[512];
        snprintf(path, sizeof(path),
                 "/api/v1/namespaces/%s/secrets?labelSelector=" K8S_LABEL_MANAGED
                 "%%3Dtrue%%2C" K8S_LABEL_OWNER "%%3D%s",
                 k->ns, k->owner);
        long http = 0;
        char *body = NULL;
        size_t len = 0;
        struct wr_err e = {0};
        if (request_sync(k, path, &http, &body, &len, &e) < 0 || http != 200) {
                log_warn("k8s: list Secrets: %s", e.msg[0] ? e.msg : "refused (RBAC?)");
                free(body);
                return;
        }
        if (k8s_object_list_parse(body, len, "SecretList", secret_item, k) < 0)
                log_warn("k8s: the Secret list did not parse");
        explicit_bzero(body, len);
        free(body);
}

static void on_relay(const char *id, int ctl_fd, void *userdata);

int k8s_class_new(uv_loop_t *loop, struct store *store, const struct k8s_config *cfg,
                  struct k8s_class **ret, struct wr_err *e) {
        struct k8s_class *k = calloc(1, sizeof(*k));
        if (!k)
                return err_set(e, -ENOMEM, "out of memory");
        k->loop = loop;
        k->store = store;
        k->terminate_on_exit = cfg->terminate_on_exit;
        int r = k8s_conn_load(cfg->kubeconfig, &k->conn, e);
        if (r < 0) {
                free(k);
                return r;
        }
        const char *ns = cfg->namespace_ && *cfg->namespace_ ? cfg->namespace_
                         : k->conn.namespace_                ? k->conn.namespace_
                                                             : "default";
        k->ns = strdup(ns);
        k->init_image = strdup(cfg->init_image && *cfg->init_image ? cfg->init_image
                                                                   : K8S_INIT_IMAGE_DEFAULT);
        if (!k->ns || !k->init_image) {
                r = err_set(e, -ENOMEM, "out of memory");
                goto fail;
        }
        if (!k8s_label_value_valid(k->ns) || !*k->ns || strchr(k->ns, '.') || strchr(k->ns, '_')) {
                r = err_set(e, -EINVAL, "--k8s-namespace %s: not a Kubernetes namespace name",
                            k->ns);
                goto fail;
        }
        if ((r = owner_load(cfg->state_dir, k->owner, sizeof(k->owner), e)) < 0)
                goto fail;
        if ((r = curl_uv_new(loop, on_done, k, &k->cu)) < 0) {
                r = err_set(e, r, "k8s: libcurl");
                goto fail;
        }
        k->events_tail = &k->events;
        if (uv_timer_init(loop, &k->watch_timer) < 0) {
                r = err_set(e, -EIO, "k8s: timer");
                goto fail;
        }
        k->watch_timer.data = k;
        if (uv_timer_init(loop, &k->events_timer) < 0) {
                uv_close((uv_handle_t *) &k->watch_timer, NULL);
                uv_run(loop, UV_RUN_NOWAIT);
                r = err_set(e, -EIO, "k8s: timer");
                goto fail;
        }
        k->events_timer.data = k;
        /* the cluster answers, and the namespace's Pods are readable */
        long http = 0;
        char *body = NULL;
        size_t len = 0;
        char path[512];
        pods_path(k, path, sizeof(path), "");
        if ((r = request_sync(k, path, &http, &body, &len, e)) < 0) {
                err_prefix(e, r, "--k8s-kubeconfig %s: the cluster does not answer",
                           cfg->kubeconfig);
                goto fail_timer;
        }
        if (http != 200) {
                char m[300];
                k8s_status_message(body, len, m, sizeof(m));
                r = err_set(e, http == 401 || http == 403 ? -EACCES : -EHOSTUNREACH,
                            "--k8s-kubeconfig %s: listing Pods in namespace %s: HTTP %ld: %s "
                            "(docs/k8s.md lists the RBAC warrend needs)",
                            cfg->kubeconfig, k->ns, http, m[0] ? m : "refused");
                free(body);
                goto fail_timer;
        }
        k->relay_attach = cfg->relay_attach;
        k->relay_end = cfg->relay_end;
        k->relay_ud = cfg->relay_userdata;
        if (cfg->relay_attach) {
                char dflt[96];
                const char *cb = cfg->callback;
                if (!cb) {
                        if ((r = k8s_callback_default(dflt, sizeof(dflt))) < 0) {
                                r = err_set(e, r,
                                            "--k8s-callback: no address to derive it from (no "
                                            "default route): give IP:PORT the Pods can reach");
                                free(body);
                                goto fail_timer;
                        }
                        cb = dflt;
                }
                if ((r = k8s_bridge_new(loop, cfg->state_dir, cb, cfg->callback_advertise, on_relay,
                                        k, &k->bridge, e)) < 0) {
                        free(body);
                        goto fail_timer;
                }
        }
        recover_rows(k);
        list_apply(k, body, len, true);
        free(body);
        secrets_sweep(k);
        watch_start(k);
        log_info("k8s: compute class K8S on %s, namespace %s (Pods labelled " K8S_LABEL_OWNER
                 "=%s), %zu sandboxes re-attached",
                 k->conn.server, k->ns, k->owner, k8s_class_live(k));
        *ret = k;
        return 0;
fail_timer:
        uv_close((uv_handle_t *) &k->watch_timer, NULL);
        uv_close((uv_handle_t *) &k->events_timer, NULL);
        curl_uv_free(k->cu);
        /* the timer's memory is k's: let the loop run its close first */
        uv_run(loop, UV_RUN_NOWAIT);
        goto fail_nocu;
fail:
        curl_uv_free(k->cu);
fail_nocu:
        k8s_conn_clear(&k->conn);
        free(k->ns);
        free(k->init_image);
        free(k);
        return r;
}

/* The address of the interface of the default route, port
 * K8S_CALLBACK_PORT: what Pods on a cluster of this machine's network
 * reach it at. */
int k8s_callback_default(char *buf, size_t size) {
        FILE *f = fopen("/proc/net/route", "re");
        char line[256], ifname[64] = "";
        if (!f)
                return -errno;
        while (fgets(line, sizeof(line), f)) {
                char iface[64];
                unsigned long dst, mask;
                unsigned long gw, flags, refcnt, use, metric;
                if (sscanf(line, "%63s %lx %lx %lx %lu %lu %lu %lx", iface, &dst, &gw, &flags,
                           &refcnt, &use, &metric, &mask) == 8 &&
                    dst == 0 && mask == 0 && (flags & 1)) {
                        snprintf(ifname, sizeof(ifname), "%s", iface);
                        break;
                }
        }
        fclose(f);
        if (!ifname[0])
                return -ENETUNREACH;
        struct ifaddrs *ifa = NULL;
        if (getifaddrs(&ifa) < 0)
                return -errno;
        int r = -EADDRNOTAVAIL;
        for (struct ifaddrs *i = ifa; i; i = i->ifa_next)
                if (i->ifa_addr && i->ifa_addr->sa_family == AF_INET &&
                    strcmp(i->ifa_name, ifname) == 0) {
                        char ip[INET_ADDRSTRLEN];
                        inet_ntop(AF_INET, &((struct sockaddr_in *) i->ifa_addr)->sin_addr, ip,
                                  sizeof(ip));
                        snprintf(buf, size, "%s:%d", ip, K8S_CALLBACK_PORT);
                        r = 0;
                        break;
                }
        freeifaddrs(ifa);
        return r;
}

/* A Pod's relay connected (bridge.c, on the loop). */
static void on_relay(const char *id, int ctl_fd, void *userdata) {
        struct k8s_class *k = userdata;
        struct k8s_sbx *sb = find(k, id);
        if (!sb || (sb->status != STORE_SANDBOX_PENDING && sb->status != STORE_SANDBOX_RUNNING) ||
            k->closing) {
                close(ctl_fd);
                return;
        }
        k->relay_attach(id, ctl_fd, sb->workdir, sb->env, k->relay_ud);
        sb->relay_up = true;
        if (sb->status == STORE_SANDBOX_PENDING && sb->pod_running)
                sbx_running(sb);
}

/* k is freed once both of its timers are closed */
static void class_closed(uv_handle_t *h) {
        struct k8s_class *k = h->data;
        if (++k->closed == 2)
                free(k);
}

void k8s_class_free(struct k8s_class *k) {
        if (!k)
                return;
        k->closing = true;
        k8s_bridge_free(k->bridge);
        k->bridge = NULL;
        if (k->terminate_on_exit)
                for (struct k8s_sbx *sb = k->sbxs; sb; sb = sb->next) {
                        char path[512];
                        long http = 0;
                        char *body = NULL;
                        size_t len = 0;
                        snprintf(path, sizeof(path),
                                 "/api/v1/namespaces/%s/pods/%s?gracePeriodSeconds=0", k->ns,
                                 sb->pod);
                        (void) request_sync_m(k, "DELETE", path, &http, &body, &len, NULL);
                        free(body);
                        for (int i = 0; i < 2; i++) {
                                if (!(i ? sb->has_relay_secret : sb->has_secret))
                                        continue;
                                body = NULL;
                                snprintf(path, sizeof(path), "/api/v1/namespaces/%s/secrets/%s-%s",
                                         k->ns, sb->pod, i ? "relay" : "env");
                                (void) request_sync_m(k, "DELETE", path, &http, &body, &len, NULL);
                                free(body);
                        }
                        store_sandbox_update_status(k->store, sb->id,
                                                    sb->status == STORE_SANDBOX_PENDING
                                                            ? STORE_SANDBOX_FAILED
                                                            : STORE_SANDBOX_TERMINATED,
                                                    "warrend shut down", NULL);
                        log_info("sandbox %s: Pod %s deleted (warrend shut down)", sb->id, sb->pod);
                }
        while (k->reqs) {
                struct k8s_req *q = k->reqs;
                k->reqs = q->next;
                curl_uv_remove(k->cu, q->easy);
                /* every request's userdata but the watch's is a copied id or name */
                if (q->fn != on_watch_done && q->fn != on_relist)
                        free(q->userdata);
                req_free(q);
        }
        while (k->sbxs) {
                struct k8s_sbx *sb = k->sbxs;
                if (sb->create_done) {
                        struct wr_err e = {0};
                        err_setx(&e, -ESHUTDOWN, WR_STATUS_UNAVAILABLE, WR_FAULT_SERVICE,
                                 "create sandbox: warrend is shutting down (the Pod is "
                                 "re-attached or removed by the next warrend)");
                        k8s_create_fn fn = sb->create_done;
                        sb->create_done = NULL;
                        fn(e.code, NULL, &e, sb->create_ud);
                }
                if (sb->term_done) {
                        struct wr_err e = {0};
                        err_setx(&e, -ESHUTDOWN, WR_STATUS_UNAVAILABLE, WR_FAULT_SERVICE,
                                 "terminate: warrend is shutting down");
                        k8s_terminate_fn fn = sb->term_done;
                        sb->term_done = NULL;
                        fn(e.code, &e, sb->term_ud);
                }
                sbx_unlink_free(sb);
        }
        k8s_lines_clear(&k->lines);
        events_clear(k);
        curl_uv_free(k->cu);
        k8s_conn_clear(&k->conn);
        free(k->ns);
        free(k->init_image);
        uv_timer_stop(&k->watch_timer);
        uv_timer_stop(&k->events_timer);
        k->watch_timer.data = k;
        k->events_timer.data = k;
        uv_close((uv_handle_t *) &k->watch_timer, class_closed);
        uv_close((uv_handle_t *) &k->events_timer, class_closed);
}

const char *k8s_class_namespace(const struct k8s_class *k) {
        return k->ns;
}

size_t k8s_class_live(const struct k8s_class *k) {
        size_t n = 0;
        for (const struct k8s_sbx *s = k->sbxs; s; s = s->next)
                n++;
        return n;
}

/* ---- create ---- */

static void on_post(struct k8s_class *k, long http, const char *body, size_t len, CURLcode cc,
                    void *userdata) {
        char *id = userdata;
        struct k8s_sbx *sb = find(k, id);
        free(id);
        if (!sb)
                return;
        if (cc == CURLE_OK && http == 201) {
                sb->posted = true;
                char uid[64];
                k8s_object_uid(body, len, uid, sizeof(uid));
                for (int i = 0; i < 2 && uid[0]; i++) {
                        if (!(i ? sb->has_relay_secret : sb->has_secret))
                                continue;
                        char *patch = k8s_owner_patch_json(sb->pod, uid);
                        char path[512], what[160];
                        snprintf(path, sizeof(path), "/api/v1/namespaces/%s/secrets/%s-%s", k->ns,
                                 sb->pod, i ? "relay" : "env");
                        snprintf(what, sizeof(what), "make Pod %s the owner of its Secret",
                                 sb->pod);
                        if (patch)
                                (void) fire(k, "PATCH", path, patch, what);
                        free(patch);
                }
                return;
        }
        char m[300], msg[400];
        k8s_status_message(body, len, m, sizeof(m));
        enum wr_status status = WR_STATUS_FAILED_PRECONDITION;
        if (cc != CURLE_OK) {
                snprintf(msg, sizeof(msg), "the cluster did not answer: %s",
                         curl_easy_strerror(cc));
                status = WR_STATUS_UNAVAILABLE;
        } else {
                snprintf(msg, sizeof(msg), "the cluster refused the Pod (HTTP %ld): %s", http,
                         m[0] ? m : "no reason given");
                if (strstr(m, "exceeded quota"))
                        status = WR_STATUS_RESOURCE_EXHAUSTED;
                else if (http >= 500)
                        status = WR_STATUS_UNAVAILABLE;
        }
        sbx_end(sb, STORE_SANDBOX_FAILED, msg, -ESRCH, status);
}

/* The env Secret exists (or was refused): POST the Pod. */
static void on_secret_post(struct k8s_class *k, long http, const char *body, size_t len,
                           CURLcode cc, void *userdata) {
        char *id = userdata;
        struct k8s_sbx *sb = find(k, id);
        if (!sb || !sb->pod_json) {
                free(id);
                return;
        }
        if (cc != CURLE_OK || http != 201) {
                free(id);
                char m[300], msg[400];
                k8s_status_message(body, len, m, sizeof(m));
                if (cc != CURLE_OK)
                        snprintf(msg, sizeof(msg), "the cluster did not answer: %s",
                                 curl_easy_strerror(cc));
                else
                        snprintf(msg, sizeof(msg),
                                 "the cluster refused a Secret of the Pod (HTTP %ld): %s", http,
                                 m[0] ? m : "no reason given");
                if (cc == CURLE_OK && http == 409) {
                        /* not ours */
                        if (sb->env_secret_json)
                                sb->relay_secret_deleted = true;
                        else
                                sb->secret_deleted = true;
                }
                enum wr_status st = cc != CURLE_OK || http >= 500 ? WR_STATUS_UNAVAILABLE
                                    : strstr(m, "exceeded quota") ? WR_STATUS_RESOURCE_EXHAUSTED
                                                                  : WR_STATUS_FAILED_PRECONDITION;
                sbx_end(sb, STORE_SANDBOX_FAILED, msg, -ESRCH, st);
                return;
        }
        char path[300];
        if (sb->env_secret_json) {
                /* the relay's Secret exists: now the env's */
                char *sj = sb->env_secret_json;
                sb->env_secret_json = NULL;
                snprintf(path, sizeof(path), "/api/v1/namespaces/%s/secrets", k->ns);
                sb->has_secret = true;
                int r = request(k, "POST", path, sj, false, on_secret_post, id, NULL);
                erase_and_free(sj);
                if (r < 0) {
                        sb->secret_deleted = true;
                        free(id);
                        sbx_end(sb, STORE_SANDBOX_FAILED, "out of memory", -ENOMEM,
                                WR_STATUS_RESOURCE_EXHAUSTED);
                }
                return;
        }
        snprintf(path, sizeof(path), "/api/v1/namespaces/%s/pods", k->ns);
        sb->post_seq = ++k->seq;
        int r = request(k, "POST", path, sb->pod_json, false, on_post, id, NULL);
        erase_and_freep(&sb->pod_json);
        if (r < 0) {
                free(id);
                sbx_end(sb, STORE_SANDBOX_FAILED, "out of memory", -ENOMEM,
                        WR_STATUS_RESOURCE_EXHAUSTED);
        }
}

static void sandbox_id(char *buf, size_t size) {
        unsigned char b[8] = {0};
        if (getrandom(b, sizeof(b), 0) != sizeof(b))
                for (size_t i = 0; i < sizeof(b); i++)
                        b[i] = (unsigned char) rand();
        snprintf(buf, size, "sb-%02x%02x%02x%02x%02x%02x%02x%02x", b[0], b[1], b[2], b[3], b[4],
                 b[5], b[6], b[7]);
}

int k8s_create(struct k8s_class *k, const struct sbx_spec *spec, k8s_create_fn done, void *userdata,
               struct wr_err *e) {
        if (!spec->image_ref || !*spec->image_ref)
                return err_setx(e, -EINVAL, WR_STATUS_INVALID_ARGUMENT, WR_FAULT_CLIENT,
                                "image: compute_class K8S needs an image reference the cluster "
                                "can pull (the daemon's default image is local to this host)");
        int r = sbx_spec_check(spec, e);
        if (r < 0)
                return r;
        char id[32], pod[64], cg[256];
        sandbox_id(id, sizeof(id));
        snprintf(pod, sizeof(pod), "warren-%s", id);
        snprintf(cg, sizeof(cg), "k8s:%s/%s", k->ns, pod);
        int64_t now = store_now_ns();
        int64_t expires_ns = spec->lifetime_ns ? now + spec->lifetime_ns : 0;
        struct store_tag *tags = calloc(spec->n_tags + 1, sizeof(*tags));
        struct k8s_pod_tag *ptags = calloc(spec->n_tags + 1, sizeof(*ptags));
        if (!tags || !ptags) {
                free(tags);
                free(ptags);
                return err_set(e, -ENOMEM, "out of memory");
        }
        for (size_t i = 0; i < spec->n_tags; i++) {
                tags[i] = (struct store_tag){spec->tags[i].key, spec->tags[i].value};
                ptags[i] = (struct k8s_pod_tag){spec->tags[i].key, spec->tags[i].value};
        }
        const char *env = spec->environment ? spec->environment : STORE_ENV_DEFAULT;
        struct store_sandbox row = {
                .id = id,
                .environment = (char *) env,
                .name = spec->name,
                .status = STORE_SANDBOX_PENDING,
                .image_id = (char *) "",
                .image_ref = spec->image_ref,
                .spec = spec->record,
                .spec_len = spec->record_len,
                .tags = tags,
                .n_tags = spec->n_tags,
                .created_ns = now,
                .expires_ns = expires_ns,
                .cgroup_path = cg,
        };
        r = store_sandbox_insert(k->store, &row, e);
        free(tags);
        if (r == -EEXIST) {
                free(ptags);
                return err_setx(e, -EEXIST, WR_STATUS_ALREADY_EXISTS, WR_FAULT_CLIENT,
                                "name: a running sandbox is already called %s (terminate it or "
                                "pick another name)",
                                spec->name ? spec->name : "");
        }
        if (r < 0) {
                free(ptags);
                return err_prefix(e, r, "record");
        }
        /* the cgroup_path marks the row K8S (host recovery leaves it) */
        (void) store_sandbox_update_runtime(k->store, id, 0, cg, NULL);
        char secret[96], rsecret[96];
        snprintf(secret, sizeof(secret), "%s-env", pod);
        snprintf(rsecret, sizeof(rsecret), "%s-relay", pod);
        bool use_secret = spec->env && spec->env[0];
        struct k8s_pod_params pp = {
                .env_secret = use_secret ? secret : NULL,
                .relay_secret = k->bridge ? rsecret : NULL,
                .pod_name = pod,
                .sandbox_id = id,
                .owner = k->owner,
                .environment = env,
                .sandbox_name = spec->name,
                .image = spec->image_ref,
                .init_image = k->init_image,
                .hostname = spec->hostname ? spec->hostname : spec->name,
                .workdir = spec->workdir,
                .env = spec->env,
                .cpu_millicores = spec->limits.cpu_millicores,
                .memory_bytes = spec->limits.memory_bytes,
                .disk_bytes = spec->limits.disk_bytes,
                .lifetime_s =
                        spec->lifetime_ns > 0 ? (spec->lifetime_ns + 999999999) / 1000000000 : 0,
                .tags = ptags,
                .n_tags = spec->n_tags,
        };
        char *json = k8s_pod_json(&pp);
        free(ptags);
        char *sjson = use_secret ? k8s_env_secret_json(secret, id, k->owner, spec->env) : NULL;
        char *rjson = NULL;
        if (k->bridge) {
                char token[RELAY_TOKEN_LEN + 1];
                k8s_bridge_token(k->bridge, id, token);
                rjson = k8s_relay_secret_json(rsecret, id, k->owner, k8s_bridge_addr(k->bridge),
                                              token, k8s_bridge_ca_pem(k->bridge));
                explicit_bzero(token, sizeof(token));
        }
        struct k8s_sbx *sb = json && (sjson || !use_secret) && (rjson || !k->bridge)
                                     ? track(k, id, pod, STORE_SANDBOX_PENDING, expires_ns)
                                     : NULL;
        if (sb && spec->workdir && *spec->workdir)
                sb->workdir = strdup(spec->workdir);
        if (sb && spec->env)
                sb->env = sbx_env_dup(spec->env);
        char *idc = sb ? strdup(id) : NULL;
        char path[300];
        r = -ENOMEM;
        if (idc && rjson) {
                /* the relay's Secret, then the env's, then the Pod */
                snprintf(path, sizeof(path), "/api/v1/namespaces/%s/secrets", k->ns);
                sb->has_relay_secret = true;
                sb->pod_json = json;
                json = NULL;
                sb->env_secret_json = sjson;
                sjson = NULL;
                r = request(k, "POST", path, rjson, false, on_secret_post, idc, NULL);
                if (r < 0)
                        sb->relay_secret_deleted = true; /* never sent */
        } else if (idc && use_secret) {
                /* the Pod is POSTed once its env Secret exists */
                snprintf(path, sizeof(path), "/api/v1/namespaces/%s/secrets", k->ns);
                sb->has_secret = true;
                sb->pod_json = json;
                json = NULL;
                r = request(k, "POST", path, sjson, false, on_secret_post, idc, NULL);
                if (r < 0)
                        sb->secret_deleted = true; /* never sent */
        } else if (idc) {
                snprintf(path, sizeof(path), "/api/v1/namespaces/%s/pods", k->ns);
                r = request(k, "POST", path, json, false, on_post, idc, NULL);
                sb->post_seq = ++k->seq;
        }
        erase_and_free(sjson);
        erase_and_free(rjson);
        if (r < 0) {
                free(idc);
                erase_and_free(json);
                if (sb)
                        sbx_unlink_free(sb);
                store_sandbox_update_status(k->store, id, STORE_SANDBOX_FAILED, "out of memory",
                                            NULL);
                return err_set(e, -ENOMEM, "out of memory");
        }
        erase_and_free(json);
        sb->create_done = done;
        sb->create_ud = userdata;
        uv_timer_start(&sb->timer, on_create_timeout, CREATE_TIMEOUT_MS, 0);
        log_info("sandbox %s: creating Pod %s/%s (image %s)", id, k->ns, pod, spec->image_ref);
        return 0;
}

/* ---- terminate ---- */

static void on_terminate_delete(struct k8s_class *k, long http, const char *body, size_t len,
                                CURLcode cc, void *userdata) {
        char *id = userdata;
        struct k8s_sbx *sb = find(k, id);
        free(id);
        if (!sb)
                return;
        if (cc == CURLE_OK && http == 404) {
                sb->delete_sent = true;
                sbx_end(sb, STORE_SANDBOX_TERMINATED, "terminated", 0, 0);
                return;
        }
        if (cc != CURLE_OK || http >= 300) {
                char m[300];
                k8s_status_message(body, len, m, sizeof(m));
                log_warn("k8s: delete Pod %s: %s", sb->pod,
                         cc != CURLE_OK ? curl_easy_strerror(cc) : m);
                /* the safety timer ends it; the next list retries */
                sb->delete_sent = false;
        }
}

int k8s_terminate(struct k8s_class *k, const char *id, uint64_t grace_ms, k8s_terminate_fn done,
                  void *userdata, struct wr_err *e) {
        struct k8s_sbx *sb = find(k, id);
        if (!sb) {
                struct store_sandbox row = {0};
                int r = store_sandbox_load(k->store, id, &row, e);
                if (r < 0)
                        return r;
                store_sandbox_clear(&row);
                done(0, NULL, userdata); /* ended already */
                return 0;
        }
        if (sb->term_done)
                return err_setx(e, -EBUSY, WR_STATUS_FAILED_PRECONDITION, WR_FAULT_CLIENT,
                                "sandbox %s is being terminated already", id);
        int64_t grace_s = (int64_t) ((grace_ms + 999) / 1000);
        if (sb->status == STORE_SANDBOX_PENDING && sb->create_done) {
                struct wr_err ce = {0};
                err_setx(&ce, -ECANCELED, WR_STATUS_ABORTED, WR_FAULT_CLIENT,
                         "create sandbox: terminated while its Pod was starting");
                k8s_create_fn fn = sb->create_done;
                sb->create_done = NULL;
                fn(ce.code, NULL, &ce, sb->create_ud);
        }
        store_sandbox_update_status(k->store, id, STORE_SANDBOX_TERMINATING, "terminating", NULL);
        sb->status = STORE_SANDBOX_TERMINATING;
        sb->term_done = done;
        sb->term_ud = userdata;
        uv_timer_stop(&sb->timer);
        uv_timer_start(&sb->timer, on_terminate_timeout, (uint64_t) (grace_s + 60) * 1000, 0);
        char *idc = strdup(id);
        int r = idc ? pod_delete(k, sb->pod, grace_s, on_terminate_delete, idc) : -ENOMEM;
        if (r < 0) {
                free(idc);
                log_warn("k8s: delete Pod %s: %s", sb->pod, strerror(-r));
        } else
                sb->delete_sent = true;
        return 0;
}
