/* SPDX-License-Identifier: Apache-2.0 */
/* warren.v1.Images: ImportImage (client stream: meta, then data chunks),
 * GetImage, ListImages, DeleteImage on the image store (src/image).
 * PullImage streams per-layer progress of a registry pull (src/image/pull.h)
 * and ends with the Image; cancelling the call stops the pull unless another
 * caller waits for the same reference. BuildImage answers UNIMPLEMENTED
 * until its issue lands.
 *
 * ImportImage spools chunks with plain writes (page cache, bounded by
 * disk), then on half-close runs the unpack helper and commits the image.
 * The handler state lives until on_free; freeing it cancels a running
 * helper, so a cancelled call never leaves a layer or a temp tree. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/api-internal.h"
#include "basic/log.h"
#include "image/image.h"
#include "image/pull.h"
#include "warren/v1/images.pb-c.h"

static struct img_store *store_of(struct rpc_call *call) {
        struct api_ctx *ctx = rpc_call_server_ctx(call);
        return ctx ? ctx->images : NULL;
}

static bool require_store(struct rpc_call *call) {
        if (store_of(call))
                return true;
        rpc_call_finish(call, WR_STATUS_UNAVAILABLE, "the image store is not available");
        return false;
}

static void finish_err(struct rpc_call *call, const char *what, const struct wr_err *e) {
        int status = err_status(e);
        const char *path = rpc_call_method(call)->path + 1;
        if (e->fault == WR_FAULT_SERVICE && status != WR_STATUS_NOT_FOUND)
                log_error("rpc %s: %s: %s", path, what, e->msg);
        else
                log_info("rpc %s: %s refused (%s): %s", path, what, err_status_name(status),
                         e->msg);
        rpc_call_finish_err(call, e);
}

/* Fill msg (and its sub-messages, caller storage) from info; pointers
 * borrow from info. */
void api_image_to_proto(const struct img_info *info, Warren__V1__Image *msg,
                        Warren__V1__ImageConfig *cfg, Warren__V1__Timestamp *ts) {
        warren__v1__image__init(msg);
        warren__v1__image_config__init(cfg);
        warren__v1__timestamp__init(ts);
        msg->id = info->id;
        msg->n_names = info->n_names;
        msg->names = info->names;
        msg->n_layers = info->n_layers;
        msg->layers = info->diff_ids;
        msg->size_bytes = info->size;
        msg->source = info->source;
        ts->unix_nanos = info->created_ns;
        msg->created_at = ts;
        cfg->n_env = info->config.n_env;
        cfg->env = info->config.env;
        cfg->n_entrypoint = info->config.n_entrypoint;
        cfg->entrypoint = info->config.entrypoint;
        cfg->n_cmd = info->config.n_cmd;
        cfg->cmd = info->config.cmd;
        if (info->config.working_dir)
                cfg->working_dir = info->config.working_dir;
        if (info->config.user)
                cfg->user = info->config.user;
        const struct img_config *c = &info->config;
        cfg->n_labels = c->n_labels;
        cfg->labels = c->labels;
        cfg->n_exposed_ports = c->n_exposed_ports;
        cfg->exposed_ports = c->exposed_ports;
        cfg->n_shell = c->n_shell;
        cfg->shell = c->shell;
        if (c->stop_signal)
                cfg->stop_signal = c->stop_signal;
        cfg->n_healthcheck = c->n_hc_test;
        cfg->healthcheck = c->hc_test;
        cfg->healthcheck_interval_ns = c->hc_interval_ns;
        cfg->healthcheck_timeout_ns = c->hc_timeout_ns;
        cfg->healthcheck_start_period_ns = c->hc_start_period_ns;
        cfg->healthcheck_start_interval_ns = c->hc_start_interval_ns;
        cfg->healthcheck_retries = c->hc_retries;
        msg->config = cfg;
}

/* --- ImportImage --- */

struct import_call {
        struct img_import *imp;
        bool started; /* the helper runs */
};

static void import_free(struct rpc_call *call) {
        struct import_call *ic = rpc_call_get_data(call);
        if (!ic)
                return;
        img_import_free(ic->imp); /* kills a running helper; done is not called */
        free(ic);
        rpc_call_set_data(call, NULL);
}

static void import_done(struct img_import *imp, int r, const struct img_info *info,
                        const struct wr_err *e, void *userdata) {
        struct rpc_call *call = userdata;
        struct import_call *ic = rpc_call_get_data(call);
        if (ic)
                ic->started = false;
        if (rpc_call_is_done(call))
                return;
        if (r < 0) {
                finish_err(call, "import image", e);
                return;
        }
        api_image_record(call, info->id);
        log_info("imported image %s%s%s (%zu layer(s), %llu bytes)", info->id,
                 info->n_names ? " as " : "", info->n_names ? info->names[0] : "", info->n_layers,
                 (unsigned long long) info->size);
        Warren__V1__Image msg;
        Warren__V1__ImageConfig cfg;
        Warren__V1__Timestamp ts;
        api_image_to_proto(info, &msg, &cfg, &ts);
        rpc_call_reply(call, &msg.base);
}

static void import_message(struct rpc_call *call, const ProtobufCMessage *m) {
        const Warren__V1__ImportImageRequest *req = (const void *) m;
        struct import_call *ic = rpc_call_get_data(call);
        struct wr_err e = {0};
        if (rpc_call_is_done(call))
                return;
        if (!require_store(call))
                return;
        if (!ic) {
                if (req->kind_case != WARREN__V1__IMPORT_IMAGE_REQUEST__KIND_META) {
                        rpc_call_finish(call, WR_STATUS_INVALID_ARGUMENT,
                                        "meta: the first ImportImage message must carry meta "
                                        "(name, config), then data chunks");
                        return;
                }
                const Warren__V1__ImportImageMeta *meta = req->meta;
                const Warren__V1__ImageConfig *pc = meta->config;
                struct img_config cfg = {0};
                if (pc) {
                        cfg = (struct img_config){
                                .env = pc->env,
                                .n_env = pc->n_env,
                                .working_dir = pc->working_dir,
                                .entrypoint = pc->entrypoint,
                                .n_entrypoint = pc->n_entrypoint,
                                .cmd = pc->cmd,
                                .n_cmd = pc->n_cmd,
                                .user = pc->user,
                        };
                }
                ic = calloc(1, sizeof(*ic));
                if (!ic) {
                        rpc_call_finish(call, WR_STATUS_RESOURCE_EXHAUSTED, "out of memory");
                        return;
                }
                struct api_ctx *ctx = rpc_call_server_ctx(call);
                if (api_image_name_check(call, meta->name, &e) < 0) {
                        free(ic);
                        finish_err(call, "import image", &e);
                        return;
                }
                api_audit_object(call, meta->name);
                int r = img_import_new(ctx->images, rpc_call_loop(call), meta->name,
                                       pc ? &cfg : NULL, &ic->imp, &e);
                if (r < 0) {
                        free(ic);
                        finish_err(call, "import image", &e);
                        return;
                }
                rpc_call_set_data(call, ic);
                return;
        }
        if (req->kind_case != WARREN__V1__IMPORT_IMAGE_REQUEST__KIND_DATA) {
                rpc_call_finish(call, WR_STATUS_INVALID_ARGUMENT,
                                "meta: only the first ImportImage message may carry meta");
                return;
        }
        if (img_import_write(ic->imp, req->data.data, req->data.len, &e) < 0)
                finish_err(call, "import image", &e);
}

static void import_half_close(struct rpc_call *call) {
        struct import_call *ic = rpc_call_get_data(call);
        struct wr_err e = {0};
        if (rpc_call_is_done(call))
                return;
        if (!ic) {
                rpc_call_finish(call, WR_STATUS_INVALID_ARGUMENT,
                                "meta: ImportImage needs a meta message, then data chunks");
                return;
        }
        if (img_import_finish(ic->imp, import_done, call, &e) < 0) {
                finish_err(call, "import image", &e);
                return;
        }
        ic->started = true;
}

static void import_cancel(struct rpc_call *call, int status) {
        struct import_call *ic = rpc_call_get_data(call);
        if (ic && ic->started)
                log_info("rpc warren.v1.Images/ImportImage: %s; stopping the unpack",
                         err_status_name(status));
        import_free(call);
}

/* --- GetImage, ListImages, DeleteImage --- */

static void get_image(struct rpc_call *call, const ProtobufCMessage *m) {
        const Warren__V1__GetImageRequest *req = (const void *) m;
        if (!require_store(call))
                return;
        struct img_info *info = NULL;
        struct wr_err e = {0};
        if (api_own_image(call, req->image, false, &info, &e) < 0) {
                finish_err(call, "get image", &e);
                return;
        }
        Warren__V1__Image msg;
        Warren__V1__ImageConfig cfg;
        Warren__V1__Timestamp ts;
        api_image_to_proto(info, &msg, &cfg, &ts);
        rpc_call_reply(call, &msg.base);
        img_info_free(info);
}

static void list_images(struct rpc_call *call, const ProtobufCMessage *m) {
        struct api_ctx *ctx = rpc_call_server_ctx(call);
        if (!require_store(call))
                return;
        struct img_info **list = NULL;
        size_t n = 0;
        struct wr_err e = {0};
        if (img_store_list(store_of(call), &list, &n, &e) < 0) {
                finish_err(call, "list images", &e);
                return;
        }
        Warren__V1__Image *msgs = calloc(n + 1, sizeof(*msgs));
        Warren__V1__Image **ptrs = calloc(n + 1, sizeof(*ptrs));
        Warren__V1__ImageConfig *cfgs = calloc(n + 1, sizeof(*cfgs));
        Warren__V1__Timestamp *tss = calloc(n + 1, sizeof(*tss));
        if (!msgs || !ptrs || !cfgs || !tss) {
                rpc_call_finish(call, WR_STATUS_RESOURCE_EXHAUSTED, "out of memory");
        } else {
                /* the caller's environment's images and the shared catalog
                 * (a tenant is not shown unnamed catalog entries: build
                 * steps, pulls by digest) */
                bool tenant = strcmp(api_caller_env(call), STORE_ENV_DEFAULT) != 0;
                size_t shown = 0;
                for (size_t i = 0; i < n; i++) {
                        if (!api_image_visible(call, list[i]->id))
                                continue;
                        if (tenant && list[i]->n_names == 0 &&
                            store_image_env_access(ctx->store, api_caller_env(call), list[i]->id,
                                                   true, NULL) <= 0)
                                continue;
                        api_image_to_proto(list[i], &msgs[shown], &cfgs[shown], &tss[shown]);
                        ptrs[shown] = &msgs[shown];
                        shown++;
                }
                Warren__V1__ListImagesResponse resp = WARREN__V1__LIST_IMAGES_RESPONSE__INIT;
                resp.n_images = shown;
                resp.images = ptrs;
                rpc_call_reply(call, &resp.base);
        }
        free(msgs);
        free(ptrs);
        free(cfgs);
        free(tss);
        img_info_list_free(list, n);
}

static void delete_image(struct rpc_call *call, const ProtobufCMessage *m) {
        const Warren__V1__DeleteImageRequest *req = (const void *) m;
        if (!require_store(call))
                return;
        struct wr_err e = {0};
        struct img_info *info = NULL;
        if (api_own_image(call, req->image, true, &info, &e) < 0) {
                finish_err(call, "delete image", &e);
                return;
        }
        img_info_free(info);
        if (img_store_delete(store_of(call), req->image, &e) < 0) {
                finish_err(call, "delete image", &e);
                return;
        }
        log_info("deleted image %s", req->image);
        Warren__V1__DeleteImageResponse resp = WARREN__V1__DELETE_IMAGE_RESPONSE__INIT;
        rpc_call_reply(call, &resp.base);
}

/* --- PullImage: server-streamed per-layer progress, then the Image --- */

struct pull_call {
        struct img_pull *pull; /* NULL once done ran */
        uint64_t started_ms;
};

static void layers_to_proto(const struct img_pull_layer *layers, size_t n,
                            Warren__V1__LayerProgress *lp, Warren__V1__LayerProgress **ptrs) {
        for (size_t i = 0; i < n; i++) {
                warren__v1__layer_progress__init(&lp[i]);
                lp[i].digest = (char *) layers[i].digest;
                lp[i].total_bytes = layers[i].total_bytes;
                lp[i].done_bytes = layers[i].done_bytes;
                lp[i].state = (char *) layers[i].state;
                ptrs[i] = &lp[i];
        }
}

static void pull_progress(struct img_pull *p, const struct img_pull_layer *layers, size_t n,
                          void *userdata) {
        struct rpc_call *call = userdata;
        if (rpc_call_is_done(call))
                return;
        Warren__V1__LayerProgress *lp = calloc(n + 1, sizeof(*lp));
        Warren__V1__LayerProgress **ptrs = calloc(n + 1, sizeof(*ptrs));
        if (lp && ptrs) {
                layers_to_proto(layers, n, lp, ptrs);
                Warren__V1__PullImageProgress msg = WARREN__V1__PULL_IMAGE_PROGRESS__INIT;
                msg.n_layers = n;
                msg.layers = ptrs;
                (void) rpc_call_send(call, &msg.base); /* small and throttled (100 ms) */
        }
        free(lp);
        free(ptrs);
}

static void pull_done(struct img_pull *p, int r, const struct img_info *info,
                      const struct wr_err *e, void *userdata) {
        struct rpc_call *call = userdata;
        struct pull_call *pc = rpc_call_get_data(call);
        if (pc)
                pc->pull = NULL; /* freed by the image module after this returns */
        if (rpc_call_is_done(call))
                return;
        if (r < 0) {
                finish_err(call, "pull image", e);
                return;
        }
        api_image_record(call, info->id);
        log_info("pulled image %s%s%s (%zu layer(s), %llu bytes) in %llu ms", info->id,
                 info->n_names ? " as " : "", info->n_names ? info->names[0] : "", info->n_layers,
                 (unsigned long long) info->size,
                 (unsigned long long) (uv_now(rpc_call_loop(call)) - (pc ? pc->started_ms : 0)));
        Warren__V1__Image img;
        Warren__V1__ImageConfig cfg;
        Warren__V1__Timestamp ts;
        api_image_to_proto(info, &img, &cfg, &ts);
        Warren__V1__PullImageProgress msg = WARREN__V1__PULL_IMAGE_PROGRESS__INIT;
        msg.image = &img;
        if (rpc_call_send(call, &msg.base) < 0)
                return;
        rpc_call_finish(call, WR_STATUS_OK, NULL);
}

static void pull_free(struct rpc_call *call) {
        struct pull_call *pc = rpc_call_get_data(call);
        if (!pc)
                return;
        img_pull_cancel(pc->pull); /* stops the shared job when nobody else waits */
        free(pc);
        rpc_call_set_data(call, NULL);
}

static void pull_cancel(struct rpc_call *call, int status) {
        struct pull_call *pc = rpc_call_get_data(call);
        if (pc && pc->pull)
                log_info("rpc warren.v1.Images/PullImage: %s; stopping the pull",
                         err_status_name(status));
        pull_free(call);
}

static void pull_image(struct rpc_call *call, const ProtobufCMessage *m) {
        const Warren__V1__PullImageRequest *req = (const void *) m;
        if (!require_store(call))
                return;
        if (!req->ref || !*req->ref) {
                rpc_call_finish(call, WR_STATUS_INVALID_ARGUMENT,
                                "ref: name the image to pull (\"ubuntu:latest\", "
                                "\"registry:5000/repo:tag\", \"repo@sha256:...\")");
                return;
        }
        struct pull_call *pc = calloc(1, sizeof(*pc));
        if (!pc) {
                rpc_call_finish(call, WR_STATUS_RESOURCE_EXHAUSTED, "out of memory");
                return;
        }
        pc->started_ms = uv_now(rpc_call_loop(call));
        rpc_call_set_data(call, pc);
        struct wr_err e = {0};
        char local[512];
        if (img_pull_local_name(req->ref, local, sizeof(local), NULL) >= 0 &&
            api_image_name_check(call, local, &e) < 0) {
                finish_err(call, "pull image", &e);
                return;
        }
        log_info("pulling %s", req->ref);
        if (img_pull_start(store_of(call), rpc_call_loop(call), req->ref, pull_progress, pull_done,
                           call, &pc->pull, &e) < 0) {
                pc->pull = NULL;
                finish_err(call, "pull image", &e);
        }
}

#define METHOD(name, k, in, out, fn)                                                               \
        {                                                                                          \
                .path = "/warren.v1.Images/" name, .kind = k,                                      \
                .input = &warren__v1__##in##__descriptor,                                          \
                .output = &warren__v1__##out##__descriptor, .on_message = fn,                      \
        }

static const struct rpc_method methods[] = {
        {
                .path = "/warren.v1.Images/ImportImage",
                .kind = RPC_CLIENT_STREAM,
                .input = &warren__v1__import_image_request__descriptor,
                .output = &warren__v1__image__descriptor,
                .on_message = import_message,
                .on_half_close = import_half_close,
                .on_cancel = import_cancel,
                .on_free = import_free,
        },
        {
                .path = "/warren.v1.Images/PullImage",
                .kind = RPC_SERVER_STREAM,
                .input = &warren__v1__pull_image_request__descriptor,
                .output = &warren__v1__pull_image_progress__descriptor,
                .on_message = pull_image,
                .on_cancel = pull_cancel,
                .on_free = pull_free,
        },
        METHOD("GetImage", RPC_UNARY, get_image_request, image, get_image),
        METHOD("ListImages", RPC_UNARY, list_images_request, list_images_response, list_images),
        METHOD("DeleteImage", RPC_UNARY, delete_image_request, delete_image_response, delete_image),
};

int api_images_register(struct rpc_server *s) {
        int r = rpc_server_add_methods(s, methods, ELEMENTSOF(methods));
        if (r >= 0)
                r = rpc_server_add_methods(s, api_blob_methods, ELEMENTSOF(api_blob_methods));
        return r < 0 ? r : rpc_server_add_methods(s, &api_build_image_method, 1);
}
