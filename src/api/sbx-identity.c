/* SPDX-License-Identifier: Apache-2.0 */
/* Sandbox workload identity (identity=True; docs/security.md "Sandbox
 * identity"). Each such sandbox has a directory of its own,
 * <state_dir>/identity/<id>/, mounted read-only at /run/warren/identity,
 * holding "token": an ES256 JWT signed by the federation keys (wid.h) with
 * iss = the daemon's issuer, sub = "sandbox:<env>:<id>", aud =
 * WID_API_AUDIENCE, environment_id = <env> and a lifetime of
 * ctx->identity_lifetime seconds (at most one hour). A timer re-mints it
 * once half its lifetime has passed (a new file renamed over the old, so a
 * reader sees one or the other whole) and removes the directories of
 * sandboxes that ended. At start the directories of sandboxes still live
 * get a fresh token (the old one may have expired while warrend was down);
 * the others are removed. Everything runs on the loop. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "api/api-internal.h"
#include "api/wid.h"
#include "basic/log.h"
#include "basic/macro.h"
#include "basic/rmrf.h"
#include "store/store.h"

struct idn {
        struct idn *next;
        char id[32];
        char env[64];
        int64_t issued; /* Unix seconds of the token on disk */
};

struct api_sbx_identity {
        struct api_ctx *ctx;
        char dir[4096]; /* <state_dir>/identity */
        struct idn *list;
        uv_timer_t timer;
};

static int64_t now_sec(void) {
        return store_now_ns() / 1000000000;
}

/* Mint a token for n and write it to <dir>/<id>/token (0444). */
static int write_token(struct api_sbx_identity *s, struct idn *n, struct wr_err *e) {
        struct api_ctx *ctx = s->ctx;
        char sub[160], path[4200], tmp[4200];
        snprintf(sub, sizeof(sub), "sandbox:%s:%s", n->env, n->id);
        int64_t now = now_sec();
        char *tok = NULL;
        int r = wid_mint(ctx->wid, ctx->issuer, sub, WID_API_AUDIENCE, n->env, now,
                         ctx->identity_lifetime, &tok, e);
        if (r < 0)
                return r;
        snprintf(path, sizeof(path), "%s/%s/token", s->dir, n->id);
        snprintf(tmp, sizeof(tmp), "%s/%s/.token.tmp", s->dir, n->id);
        size_t len = strlen(tok);
        int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0444);
        r = fd < 0 ? -errno : 0;
        for (size_t off = 0; r == 0 && off < len;) {
                ssize_t w = write(fd, tok + off, len - off);
                if (w < 0 && errno == EINTR)
                        continue;
                if (w <= 0)
                        r = w < 0 ? -errno : -EIO;
                else
                        off += (size_t) w;
        }
        if (fd >= 0 && fchmod(fd, 0444) < 0 && r == 0)
                r = -errno;
        if (fd >= 0 && close(fd) < 0 && r == 0)
                r = -errno;
        if (r == 0 && rename(tmp, path) < 0)
                r = -errno;
        explicit_bzero(tok, len);
        free(tok);
        if (r < 0) {
                (void) unlink(tmp);
                return err_set(e, r, "write %s: %s", path, strerror(-r));
        }
        n->issued = now;
        return 0;
}

static void remove_dir(struct api_sbx_identity *s, const char *id) {
        int dfd = open(s->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (dfd < 0)
                return;
        int r = rm_rf_at(dfd, id);
        if (r < 0)
                log_warn("identity: remove %s/%s: %s", s->dir, id, strerror(-r));
        close(dfd);
}

/* Is sandbox id of environment env still PENDING or RUNNING? -errno when
 * the store cannot say. */
static int sandbox_live(struct api_ctx *ctx, const char *id, char *env, size_t env_size) {
        struct store_sandbox sb = {0};
        int r = store_sandbox_load(ctx->store, id, &sb, NULL);
        if (r == -ENOENT)
                return 0;
        if (r < 0)
                return r;
        bool live = sb.status == STORE_SANDBOX_PENDING || sb.status == STORE_SANDBOX_RUNNING;
        if (env)
                snprintf(env, env_size, "%s", sb.environment);
        store_sandbox_clear(&sb);
        return live;
}

static void tick(uv_timer_t *t) {
        struct api_sbx_identity *s = t->data;
        int64_t now = now_sec();
        int64_t half = s->ctx->identity_lifetime / 2;
        for (struct idn **pp = &s->list; *pp;) {
                struct idn *n = *pp;
                int live = sandbox_live(s->ctx, n->id, NULL, 0);
                if (live == 0) {
                        remove_dir(s, n->id);
                        *pp = n->next;
                        free(n);
                        continue;
                }
                if (live > 0 && now - n->issued >= half) {
                        struct wr_err e = {0};
                        if (write_token(s, n, &e) < 0)
                                log_warn("identity: sandbox %s: rotate: %s", n->id, e.msg);
                        else
                                log_debug("identity: sandbox %s: token rotated", n->id);
                }
                pp = &n->next;
        }
}

static struct idn *track(struct api_sbx_identity *s, const char *id, const char *env) {
        struct idn *n = calloc(1, sizeof(*n));
        if (!n)
                return NULL;
        snprintf(n->id, sizeof(n->id), "%s", id);
        snprintf(n->env, sizeof(n->env), "%s", env);
        n->next = s->list;
        s->list = n;
        return n;
}

static void untrack(struct api_sbx_identity *s, struct idn *gone) {
        for (struct idn **pp = &s->list; *pp; pp = &(*pp)->next)
                if (*pp == gone) {
                        *pp = gone->next;
                        free(gone);
                        return;
                }
}

int api_sbx_identity_issue(void *userdata, const char *id, const char *environment, char *dir,
                           size_t size, struct wr_err *e) {
        struct api_ctx *ctx = userdata;
        struct api_sbx_identity *s = ctx->sbx_identity;
        if (!s || !ctx->wid || !ctx->issuer)
                return err_setx(e, -EOPNOTSUPP, WR_STATUS_FAILED_PRECONDITION, WR_FAULT_CLIENT,
                                "this warrend gives sandboxes no identity (it needs workload "
                                "identity keys and an issuer: --admin-listen or --issuer)");
        if (strlen(id) >= sizeof(((struct idn *) 0)->id) ||
            strlen(environment) >= sizeof(((struct idn *) 0)->env))
                return err_set(e, -EINVAL, "sandbox id or environment too long");
        int n = snprintf(dir, size, "%s/%s", s->dir, id);
        if (n < 0 || (size_t) n >= size)
                return err_set(e, -ENAMETOOLONG, "%s/%s: path too long", s->dir, id);
        if (mkdir(dir, 0755) < 0 && errno != EEXIST)
                return err_set(e, -errno, "mkdir %s: %s", dir, strerror(errno));
        struct idn *t = track(s, id, environment);
        if (!t)
                return err_set(e, -ENOMEM, "out of memory");
        int r = write_token(s, t, e);
        if (r < 0) {
                untrack(s, t);
                remove_dir(s, id);
        }
        return r;
}

int api_sbx_identity_start(struct api_ctx *ctx, struct wr_err *e) {
        struct api_sbx_identity *s = calloc(1, sizeof(*s));
        if (!s)
                return err_set(e, -ENOMEM, "out of memory");
        s->ctx = ctx;
        snprintf(s->dir, sizeof(s->dir), "%s/identity", ctx->state_dir);
        if (mkdir(s->dir, 0755) < 0 && errno != EEXIST) {
                int r = err_set(e, -errno, "mkdir %s: %s", s->dir, strerror(errno));
                free(s);
                return r;
        }
        (void) chmod(s->dir, 0755);
        int r = uv_timer_init(ctx->loop, &s->timer);
        if (r < 0) {
                free(s);
                return err_set(e, r, "identity timer: %s", uv_strerror(r));
        }
        s->timer.data = s;
        ctx->sbx_identity = s;
        /* a previous warrend's sandboxes */
        DIR *d = opendir(s->dir);
        struct dirent *de;
        while (d && (de = readdir(d))) {
                if (strncmp(de->d_name, "sb-", 3) != 0)
                        continue;
                char env[64] = "";
                int live = sandbox_live(ctx, de->d_name, env, sizeof(env));
                if (live == 0) {
                        remove_dir(s, de->d_name);
                        continue;
                }
                struct idn *n = live > 0 ? track(s, de->d_name, env) : NULL;
                struct wr_err we = {0};
                if (n && write_token(s, n, &we) < 0)
                        log_warn("identity: sandbox %s: %s", n->id, we.msg);
        }
        if (d)
                closedir(d);
        /* rotate at half the lifetime: tick at a quarter (at most every
         * minute, which also bounds how long an ended sandbox's directory
         * stays) */
        uint64_t every = (uint64_t) ctx->identity_lifetime * 1000 / 4;
        if (every < 500)
                every = 500;
        if (every > 60000)
                every = 60000;
        uv_timer_start(&s->timer, tick, every, every);
        uv_unref((uv_handle_t *) &s->timer);
        return 0;
}

static void timer_closed(uv_handle_t *h) {
        struct api_sbx_identity *s = h->data;
        while (s->list) {
                struct idn *n = s->list;
                s->list = n->next;
                free(n);
        }
        free(s);
}

void api_sbx_identity_stop(struct api_ctx *ctx) {
        struct api_sbx_identity *s = ctx->sbx_identity;
        if (!s)
                return;
        ctx->sbx_identity = NULL;
        uv_close((uv_handle_t *) &s->timer, timer_closed);
}
