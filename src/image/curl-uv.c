/* SPDX-License-Identifier: Apache-2.0 */
/* libcurl multi on libuv (see curl-uv.h).
 *
 * CURLMOPT_SOCKETFUNCTION keeps one uv_poll per socket curl wants watched,
 * CURLMOPT_TIMERFUNCTION arms one uv_timer; both call
 * curl_multi_socket_action and then drain curl_multi_info_read, where
 * finished transfers are handed to done. The poll contexts are kept in a
 * list so that curl_uv_free can close any curl did not release. */
#include "image/curl-uv.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>

#include "basic/macro.h"

struct sock_ctx {
        uv_poll_t poll;
        curl_socket_t fd;
        struct curl_uv *cu;
        struct sock_ctx *prev, *next;
};

struct curl_uv {
        uv_loop_t *loop;
        CURLM *multi;
        uv_timer_t *timer; /* NULL until initialised */
        struct sock_ctx *socks;
        curl_uv_done_fn done;
        void *userdata;
};

static void drain(struct curl_uv *cu) {
        CURLMsg *m;
        int left = 0;
        while ((m = curl_multi_info_read(cu->multi, &left))) {
                if (m->msg != CURLMSG_DONE)
                        continue;
                CURL *easy = m->easy_handle;
                CURLcode cc = m->data.result;
                curl_multi_remove_handle(cu->multi, easy);
                cu->done(easy, cc, cu->userdata);
        }
}

static void on_poll_close(uv_handle_t *h) {
        free(h->data);
}

static void sock_close(struct sock_ctx *c) {
        if (c->prev)
                c->prev->next = c->next;
        else
                c->cu->socks = c->next;
        if (c->next)
                c->next->prev = c->prev;
        c->prev = c->next = NULL;
        uv_poll_stop(&c->poll);
        uv_close((uv_handle_t *) &c->poll, on_poll_close);
}

static void on_poll(uv_poll_t *p, int status, int events) {
        struct sock_ctx *c = p->data;
        struct curl_uv *cu = c->cu;
        int flags = 0;
        if (status < 0)
                flags = CURL_CSELECT_ERR;
        else {
                if (events & UV_READABLE)
                        flags |= CURL_CSELECT_IN;
                if (events & UV_WRITABLE)
                        flags |= CURL_CSELECT_OUT;
        }
        int running = 0;
        curl_multi_socket_action(cu->multi, c->fd, flags, &running);
        drain(cu);
}

static int socket_cb(CURL *easy, curl_socket_t s, int action, void *userp, void *socketp) {
        struct curl_uv *cu = userp;
        struct sock_ctx *c = socketp;
        if (action == CURL_POLL_REMOVE) {
                if (c) {
                        curl_multi_assign(cu->multi, s, NULL);
                        sock_close(c);
                }
                return 0;
        }
        if (!c) {
                c = calloc(1, sizeof(*c));
                if (!c)
                        return -1;
                c->fd = s;
                c->cu = cu;
                if (uv_poll_init_socket(cu->loop, &c->poll, s) < 0) {
                        free(c); /* never initialised: freed, not closed */
                        return -1;
                }
                c->poll.data = c;
                c->next = cu->socks;
                if (cu->socks)
                        cu->socks->prev = c;
                cu->socks = c;
                curl_multi_assign(cu->multi, s, c);
        }
        int ev = 0;
        if (action == CURL_POLL_IN || action == CURL_POLL_INOUT)
                ev |= UV_READABLE;
        if (action == CURL_POLL_OUT || action == CURL_POLL_INOUT)
                ev |= UV_WRITABLE;
        return uv_poll_start(&c->poll, ev, on_poll) < 0 ? -1 : 0;
}

static void on_timeout(uv_timer_t *t) {
        struct curl_uv *cu = t->data;
        int running = 0;
        curl_multi_socket_action(cu->multi, CURL_SOCKET_TIMEOUT, 0, &running);
        drain(cu);
}

static int timer_cb(CURLM *multi, long timeout_ms, void *userp) {
        struct curl_uv *cu = userp;
        if (timeout_ms < 0)
                return uv_timer_stop(cu->timer) < 0 ? -1 : 0;
        return uv_timer_start(cu->timer, on_timeout, (uint64_t) timeout_ms, 0) < 0 ? -1 : 0;
}

static void on_timer_close(uv_handle_t *h) {
        free(h);
}

DEFINE_TRIVIAL_CLEANUP_FUNC(struct curl_uv *, curl_uv_free);

int curl_uv_new(uv_loop_t *loop, curl_uv_done_fn done, void *userdata, struct curl_uv **ret) {
        static bool curl_ready;
        if (!curl_ready) {
                if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK)
                        return -EIO;
                curl_ready = true;
        }
        _cleanup_(curl_uv_freep) struct curl_uv *cu = calloc(1, sizeof(*cu));
        if (!cu)
                return -ENOMEM;
        cu->loop = loop;
        cu->done = done;
        cu->userdata = userdata;
        cu->multi = curl_multi_init();
        if (!cu->multi)
                return -ENOMEM;
        _cleanup_free_ uv_timer_t *t = calloc(1, sizeof(*t));
        if (!t)
                return -ENOMEM;
        if (uv_timer_init(loop, t) < 0)
                return -EIO; /* never initialised: freed, not closed */
        cu->timer = TAKE_PTR(t);
        cu->timer->data = cu;
        if (curl_multi_setopt(cu->multi, CURLMOPT_SOCKETFUNCTION, socket_cb) != CURLM_OK ||
            curl_multi_setopt(cu->multi, CURLMOPT_SOCKETDATA, cu) != CURLM_OK ||
            curl_multi_setopt(cu->multi, CURLMOPT_TIMERFUNCTION, timer_cb) != CURLM_OK ||
            curl_multi_setopt(cu->multi, CURLMOPT_TIMERDATA, cu) != CURLM_OK)
                return -EIO;
        *ret = TAKE_PTR(cu);
        return 0;
}

CURLM *curl_uv_multi(struct curl_uv *cu) {
        return cu->multi;
}

int curl_uv_add(struct curl_uv *cu, CURL *easy) {
        return curl_multi_add_handle(cu->multi, easy) == CURLM_OK ? 0 : -EIO;
}

void curl_uv_remove(struct curl_uv *cu, CURL *easy) {
        if (cu && easy)
                curl_multi_remove_handle(cu->multi, easy);
}

void curl_uv_free(struct curl_uv *cu) {
        if (!cu)
                return;
        if (cu->multi)
                curl_multi_cleanup(cu->multi); /* may still report sockets as removed */
        while (cu->socks)
                sock_close(cu->socks); /* the ones curl kept for its connection cache */
        if (cu->timer) {
                uv_timer_stop(cu->timer);
                uv_close((uv_handle_t *) cu->timer, on_timer_close);
        }
        free(cu);
}
