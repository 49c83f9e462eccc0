/* SPDX-License-Identifier: Apache-2.0 */
/* The secrets key's keeper process, seen from warrend (keeper.h). */
#include "daemon/keeper.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <openssl/crypto.h>

#include "basic/log.h"
#include "basic/macro.h"
#include "signer/signer-proto.h"
#include "priv/client.h"
#include "signer/spawn.h"
#include "api/wid.h"
#include "store/store.h"

struct keeper {
        uv_loop_t *loop; /* NULL after keeper_unwatch */
        /* the role: the key's option, what it keeps (for the log), and
         * where the key comes from at each start */
        const char *flag, *what;
        int (*key_memfd)(void *ctx, int *fd, struct wr_err *e);
        void *key_ctx;
        char *path;
        pid_t pid; /* 0: none running */
        int pidfd; /* -EBADF with pid 0 */
        int sock;  /* our end; -EBADF with pid 0 */
        uv_poll_t *pid_poll;
        uint32_t next_id;
        unsigned starts; /* signers started, for the log */
        bool by_priv;    /* the running signer is warren-priv's child (--privsep) */
};

/* --privsep: warren-priv starts the signers (keeper_set_priv) */
static struct priv_client *keeper_priv;

void keeper_set_priv(struct priv_client *c) {
        keeper_priv = c;
}

static void handle_free(uv_handle_t *h) {
        free(h);
}

/* The current signer is gone or must go: kill, reap, close. */
static void signer_drop(struct keeper *k) {
        if (k->pid_poll) {
                uv_close((uv_handle_t *) k->pid_poll, handle_free);
                k->pid_poll = NULL;
        }
        k->sock = safe_close(k->sock);
        if (k->pid > 0) {
                if (k->pidfd >= 0)
                        (void) syscall(SYS_pidfd_send_signal, k->pidfd, SIGKILL, NULL, 0);
                int status;
                /* warren-priv's child (--privsep): it reaps it */
                while (!k->by_priv && waitpid(k->pid, &status, 0) < 0 && errno == EINTR)
                        ;
        }
        k->pidfd = safe_close(k->pidfd);
        k->pid = 0;
}

static void pid_cb(uv_poll_t *h, int status, int events) {
        (void) status;
        (void) events;
        struct keeper *k = h->data;
        int st = 0;
        pid_t pid = k->pid;
        if (k->by_priv) {
                /* warren-priv's child: the pidfd is readable once it exited
                 * (warren-priv reaps it and logs how it ended) */
                k->pid = 0;
                log_warn("warren-signer (%s, pid %d) exited (warren-priv's log says how); the "
                         "next request starts a new one",
                         k->what, (int) pid);
                signer_drop(k);
                return;
        }
        if (waitpid(pid, &st, WNOHANG) != pid)
                return;
        k->pid = 0; /* reaped */
        log_warn("warren-signer (%s, pid %d) exited (%s %d); the next request starts a new one",
                 k->what, (int) pid, WIFSIGNALED(st) ? "signal" : "status",
                 WIFSIGNALED(st) ? WTERMSIG(st) : WEXITSTATUS(st));
        signer_drop(k);
}

static int signer_spawn(struct keeper *k, struct wr_err *e) {
        int memfd = -EBADF;
        int r = k->key_memfd(k->key_ctx, &memfd, e);
        if (r < 0)
                return r;
        pid_t pid;
        k->by_priv = keeper_priv != NULL;
        if (k->by_priv) {
                /* --privsep: HELPER_START {SIGNER, role} (docs/privsep.md) */
                uint32_t role =
                        !strcmp(k->flag, "--jws-key-fd") ? PRIV_SIGNER_JWS : PRIV_SIGNER_SECRETS;
                r = priv_signer_start(keeper_priv, role, memfd, &pid, &k->pidfd, &k->sock, e);
                if (r < 0)
                        return r;
        } else {
                r = signer_start(k->path, k->flag, memfd, &pid, &k->sock, e);
                if (r < 0)
                        return r;
                k->pidfd = (int) syscall(SYS_pidfd_open, pid, 0);
        }
        k->pid = pid;
        k->starts++;
        log_info("warren-signer keeps the %s (pid %d)", k->what, (int) pid);
        if (!k->loop) /* stopping: reaped by signer_drop */
                return 0;
        k->pid_poll = calloc(1, sizeof(*k->pid_poll));
        if (k->pidfd < 0 || !k->pid_poll || uv_poll_init(k->loop, k->pid_poll, k->pidfd) < 0) {
                free(k->pid_poll);
                k->pid_poll = NULL;
                if (k->pidfd < 0)
                        kill(pid, SIGKILL);
                signer_drop(k);
                return err_set(e, -EIO, "cannot watch warren-signer");
        }
        k->pid_poll->data = k;
        uv_poll_start(k->pid_poll, UV_READABLE, pid_cb);
        /* it never keeps the loop alive: warrend stops when its work is done */
        uv_unref((uv_handle_t *) k->pid_poll);
        return 0;
}

static int64_t now_ms(void) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (int64_t) ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* One exchange with the running signer. -EPIPE: it is gone (start another
 * and retry); other negatives are answers (or a broken signer). */
static int exchange(struct keeper *k, const uint8_t *req, size_t req_len, struct signer_reply *rep,
                    struct wr_err *e) {
        uint32_t id;
        memcpy(&id, req + offsetof(struct signer_hdr, id), sizeof(id));
        if (send(k->sock, req, req_len, MSG_NOSIGNAL) != (ssize_t) req_len)
                return errno == EPIPE || errno == ECONNRESET || errno == ENOTCONN
                               ? -EPIPE
                               : err_set(e, -errno, "warren-signer: send: %m");
        uint8_t in[SIGNER_MSG_MAX + 1];
        int64_t deadline = now_ms() + KEEPER_TIMEOUT_MS;
        for (;;) {
                int64_t left = deadline - now_ms();
                struct pollfd p = {.fd = k->sock, .events = POLLIN};
                int n = left > 0 ? poll(&p, 1, (int) left) : 0;
                if (n < 0 && errno == EINTR)
                        continue;
                if (n == 0) {
                        log_warn("warren-signer (%s, pid %d): no answer in %d ms; "
                                 "starting another",
                                 k->what, (int) k->pid, KEEPER_TIMEOUT_MS);
                        return -EPIPE;
                }
                ssize_t got = recv(k->sock, in, sizeof(in), MSG_TRUNC);
                if (got < 0 && errno == EINTR)
                        continue;
                if (got <= 0)
                        return -EPIPE;
                struct wr_err de = {0};
                int r = signer_reply_decode(in, (size_t) got, rep, &de);
                OPENSSL_cleanse(in, sizeof(in));
                if (r < 0)
                        return err_set(e, -EPROTO, "warren-signer: bad reply: %s", de.msg);
                if (rep->hdr.id != id) /* an answer to a request that timed out */
                        continue;
                if (rep->hdr.type == SIGNER_ERROR)
                        return err_set(e, rep->error.code == SIGNER_ERR_UNWRAP ? -EBADMSG : -EIO,
                                       "warren-signer: %s: %s",
                                       signer_errcode_name(rep->error.code), rep->error.msg);
                return 0;
        }
}

/* One request (n bytes in req) and its answer of type want, on a new
 * signer when the running one is gone. The caller wipes *rep. */
static int call(struct keeper *k, const uint8_t *req, size_t n, uint32_t want,
                struct signer_reply *rep, struct wr_err *e) {
        int r = -EPIPE;
        for (int attempt = 0; attempt < 2 && r == -EPIPE; attempt++) {
                if (k->pid == 0 && (r = signer_spawn(k, e)) < 0)
                        break;
                r = exchange(k, req, n, rep, e);
                if (r == -EPIPE)
                        signer_drop(k);
        }
        if (r == -EPIPE)
                return err_set(e, -EIO, "warren-signer (%s) died twice in a row; see its log",
                               k->what);
        if (r >= 0 && rep->hdr.type != want)
                return err_set(e, -EPROTO, "warren-signer: unexpected reply type 0x%x",
                               rep->hdr.type);
        return r;
}

/* A DATAKEY_NEW (wrapped_in NULL) or DATAKEY_OPEN round trip. */
static int request(struct keeper *k, const void *label, size_t label_len, const uint8_t *wrapped_in,
                   uint8_t *dek, uint8_t *wrapped_out, struct wr_err *e) {
        uint8_t req[SIGNER_MSG_MAX];
        int n = signer_datakey_req_encode(++k->next_id, label, label_len, wrapped_in, req,
                                          sizeof(req), e);
        if (n < 0)
                return n;
        static struct signer_reply rep;
        int r = call(k, req, (size_t) n, SIGNER_DATAKEY, &rep, e);
        OPENSSL_cleanse(req, (size_t) n); /* the label only, but cheap */
        if (r >= 0) {
                memcpy(dek, rep.datakey.dek, SIGNER_DEK_LEN);
                if (wrapped_out)
                        memcpy(wrapped_out, rep.datakey.wrapped, SIGNER_WRAPPED_LEN);
        }
        OPENSSL_cleanse(&rep, sizeof(rep));
        return r;
}

static int keeper_new_cb(void *ctx, const void *label, size_t label_len, uint8_t *dek,
                         uint8_t *wrapped, struct wr_err *e) {
        return request(ctx, label, label_len, NULL, dek, wrapped, e);
}

static int keeper_open_cb(void *ctx, const void *label, size_t label_len, const uint8_t *wrapped,
                          uint8_t *dek, struct wr_err *e) {
        return request(ctx, label, label_len, wrapped, dek, NULL, e);
}

static struct keeper *keeper_new(uv_loop_t *loop, const char *signer_path, const char *flag,
                                 const char *what,
                                 int (*key_memfd)(void *ctx, int *fd, struct wr_err *e),
                                 void *key_ctx) {
        struct keeper *k = calloc(1, sizeof(*k));
        if (!k || !(k->path = strdup(signer_path))) {
                free(k);
                return NULL;
        }
        k->loop = loop;
        k->flag = flag;
        k->what = what;
        k->key_memfd = key_memfd;
        k->key_ctx = key_ctx;
        k->pidfd = k->sock = -EBADF;
        return k;
}

static int secrets_memfd(void *ctx, int *fd, struct wr_err *e) {
        return store_secret_key_memfd(ctx, fd, e);
}

int keeper_start(uv_loop_t *loop, struct store *store, const char *signer_path, struct keeper **ret,
                 struct wr_err *e) {
        struct keeper *k = keeper_new(loop, signer_path, "--secrets-key-fd", "secrets key",
                                      secrets_memfd, store);
        if (!k)
                return err_set(e, -ENOMEM, "out of memory");
        /* one round trip now: a signer that cannot start fails warrend's
         * start, not the first secret */
        uint8_t dek[SIGNER_DEK_LEN], wrapped[SIGNER_WRAPPED_LEN];
        static const char label[] = "warrend start-up check";
        int r = request(k, label, sizeof(label), NULL, dek, wrapped, e);
        if (r >= 0)
                r = request(k, label, sizeof(label), wrapped, dek, NULL, e);
        OPENSSL_cleanse(dek, sizeof(dek));
        if (r < 0) {
                keeper_free(k);
                return err_prefix(e, r, "the secrets key's keeper");
        }
        store_set_keeper(store, &(struct store_keeper){
                                        .datakey_new = keeper_new_cb,
                                        .datakey_open = keeper_open_cb,
                                        .ctx = k,
                                });
        *ret = k;
        return 0;
}

/* --- the identity key --- */

static int identity_memfd(void *ctx, int *fd, struct wr_err *e) {
        return wid_signing_key_memfd(ctx, fd, e);
}

static int identity_sign_cb(void *ctx, const void *in, size_t len, uint8_t rs[64],
                            struct wr_err *e) {
        struct keeper *k = ctx;
        uint8_t req[SIGNER_MSG_MAX];
        int n = signer_jws_sign_encode(++k->next_id, in, len, req, sizeof(req), e);
        if (n < 0)
                return n;
        static struct signer_reply rep;
        int r = call(k, req, (size_t) n, SIGNER_JWS_SIG, &rep, e);
        if (r >= 0)
                memcpy(rs, rep.jws_sig, SIGNER_JWS_SIG_LEN);
        return r;
}

int keeper_start_identity(uv_loop_t *loop, struct wid_keys *keys, const char *signer_path,
                          struct keeper **ret, struct wr_err *e) {
        struct keeper *k =
                keeper_new(loop, signer_path, "--jws-key-fd", "identity key", identity_memfd, keys);
        if (!k)
                return err_set(e, -ENOMEM, "out of memory");
        uint8_t rs[SIGNER_JWS_SIG_LEN];
        int r = identity_sign_cb(k, "warrend start-up check", 22, rs, e);
        if (r >= 0)
                r = wid_keys_set_signer(
                        keys, &(struct wid_signer){.sign = identity_sign_cb, .ctx = k}, e);
        if (r < 0) {
                keeper_free(k);
                return err_prefix(e, r, "the identity key's signer");
        }
        *ret = k;
        return 0;
}

int keeper_pid(const struct keeper *k) {
        return k ? (int) k->pid : 0;
}

void keeper_unwatch(struct keeper *k) {
        if (!k)
                return;
        if (k->pid_poll) {
                uv_close((uv_handle_t *) k->pid_poll, handle_free);
                k->pid_poll = NULL;
        }
        k->loop = NULL;
}

void keeper_free(struct keeper *k) {
        if (!k)
                return;
        signer_drop(k);
        free(k->path);
        free(k);
}
