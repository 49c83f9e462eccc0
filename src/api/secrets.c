/* SPDX-License-Identifier: Apache-2.0 */
/* warren.v1.Secrets on the store: values are encrypted at rest there and
 * never leave the daemon through this API. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/api-internal.h"
#include "basic/log.h"
#include "store/store.h"
#include "warren/v1/secrets.pb-c.h"

#define NAME_RULE "[A-Za-z_][A-Za-z0-9_]{0,127}"
#define VALUE_MAX (64u * 1024u)
#define KEYS_MAX 256u

/* [A-Za-z_][A-Za-z0-9_]{0,127} */
static bool name_valid(const char *s) {
        size_t n = strlen(s);
        if (n == 0 || n > 128)
                return false;
        for (size_t i = 0; i < n; i++) {
                char c = s[i];
                bool ok = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || c == '_' ||
                          (i > 0 && c >= '0' && c <= '9');
                if (!ok)
                        return false;
        }
        return true;
}

static int check_name(struct rpc_call *call, const char *field, const char *name) {
        if (name_valid(name))
                return 0;
        char msg[320];
        if (!*name)
                snprintf(msg, sizeof(msg), "%s: empty; give a name matching %s", field, NAME_RULE);
        else
                snprintf(msg, sizeof(msg),
                         "%s: \"%.80s\" is not a valid secret name; use letters, digits and "
                         "'_', not starting with a digit, at most 128 (%s)",
                         field, name, NAME_RULE);
        rpc_call_finish(call, WR_STATUS_INVALID_ARGUMENT, msg);
        return -EINVAL;
}

static void finish_store_err(struct rpc_call *call, struct wr_err *e) {
        int status = err_status(e);
        if (status != WR_STATUS_NOT_FOUND && status != WR_STATUS_INVALID_ARGUMENT &&
            status != WR_STATUS_ALREADY_EXISTS) {
                const struct rpc_method *m = rpc_call_method(call);
                log_error("rpc %s: %s", m ? m->path : "?", e->msg);
                /* Keep store and key-file details in the log, not on the wire. */
                if (status == WR_STATUS_UNKNOWN || e->code == -EIO || e->code == -EPERM ||
                    e->code == -EBADMSG) {
                        rpc_call_finish(call, WR_STATUS_INTERNAL,
                                        "secret store error; see the warrend log");
                        return;
                }
        }
        rpc_call_finish_err(call, e);
}

static int cmp_str(const void *a, const void *b) {
        return strcmp(*(char *const *) a, *(char *const *) b);
}

/* Reply a SecretInfo for name with the given keys (any order). */
static void reply_info(struct rpc_call *call, const char *name, char **keys, size_t n_keys,
                       int64_t updated_ns, int64_t version) {
        if (n_keys > 1)
                qsort(keys, n_keys, sizeof(*keys), cmp_str);
        Warren__V1__SecretInfo info = WARREN__V1__SECRET_INFO__INIT;
        info.name = (char *) name;
        info.n_keys = n_keys;
        info.keys = keys;
        info.updated_at_unix = updated_ns / 1000000000LL;
        info.version = version;
        rpc_call_reply(call, &info.base);
}

static void set_secret(struct rpc_call *call, const ProtobufCMessage *msg) {
        const Warren__V1__SetSecretRequest *req = (const void *) msg;
        struct api_ctx *ctx = rpc_call_server_ctx(call);
        if (check_name(call, "name", req->name) < 0)
                return;
        if (req->n_values > 0 && req->value.len > 0) {
                rpc_call_finish(call, WR_STATUS_INVALID_ARGUMENT,
                                "value: must be empty when values is set; send either one value "
                                "or a map of values (integration secret)");
                return;
        }
        if (req->n_values > KEYS_MAX) {
                rpc_call_finish(call, WR_STATUS_INVALID_ARGUMENT,
                                "values: more than 256 keys; split the secret");
                return;
        }
        if (req->value.len > VALUE_MAX) {
                rpc_call_finish(call, WR_STATUS_INVALID_ARGUMENT,
                                "value: larger than 64 KiB; store a smaller value");
                return;
        }
        size_t n = req->n_values > 0 ? req->n_values : 1;
        _cleanup_free_ struct store_secret_entry *entries = calloc(n, sizeof(*entries));
        _cleanup_free_ char **keys = calloc(n, sizeof(*keys));
        if (!entries || !keys) {
                rpc_call_finish(call, WR_STATUS_RESOURCE_EXHAUSTED, "out of memory");
                return;
        }
        size_t n_keys = 0;
        if (req->n_values == 0) {
                entries[0].key = (char *) "";
                entries[0].value = req->value.data;
                entries[0].len = req->value.len;
        } else
                for (size_t i = 0; i < req->n_values; i++) {
                        const Warren__V1__SetSecretRequest__ValuesEntry *v = req->values[i];
                        char field[64];
                        snprintf(field, sizeof(field), "values[%zu].key", i);
                        if (check_name(call, field, v->key) < 0)
                                return;
                        if (v->value.len > VALUE_MAX) {
                                char m[128];
                                snprintf(m, sizeof(m),
                                         "values[\"%s\"]: larger than 64 KiB; store a smaller "
                                         "value",
                                         v->key);
                                rpc_call_finish(call, WR_STATUS_INVALID_ARGUMENT, m);
                                return;
                        }
                        for (size_t j = 0; j < i; j++)
                                if (strcmp(req->values[j]->key, v->key) == 0) {
                                        char m[256];
                                        snprintf(m, sizeof(m),
                                                 "values: key \"%s\" given twice; give each key "
                                                 "once",
                                                 v->key);
                                        rpc_call_finish(call, WR_STATUS_INVALID_ARGUMENT, m);
                                        return;
                                }
                        entries[i].key = v->key;
                        entries[i].value = v->value.data;
                        entries[i].len = v->value.len;
                        keys[n_keys++] = v->key;
                }

        struct wr_err e = {0};
        int r = store_secret_set(ctx->store, api_caller_env(call), req->name, entries, n, &e);
        if (r < 0) {
                finish_store_err(call, &e);
                return;
        }
        int64_t version = 0;
        (void) store_secret_version(ctx->store, api_caller_env(call), req->name, &version, NULL);
        log_info("secret %s set (%zu key%s, version %lld)", req->name, n_keys,
                 n_keys == 1 ? "" : "s", (long long) version);
        reply_info(call, req->name, keys, n_keys, store_now_ns(), version);
}

static void list_secrets(struct rpc_call *call, const ProtobufCMessage *msg) {
        struct api_ctx *ctx = rpc_call_server_ctx(call);
        struct wr_err e = {0};
        struct store_secret *list = NULL;
        size_t n = 0;
        int r = store_secret_list(ctx->store, api_caller_env(call), &list, &n, &e);
        if (r < 0) {
                finish_store_err(call, &e);
                return;
        }
        Warren__V1__SecretInfo *infos = n ? calloc(n, sizeof(*infos)) : NULL;
        Warren__V1__SecretInfo **ptrs = n ? calloc(n, sizeof(*ptrs)) : NULL;
        char ***keys = n ? calloc(n, sizeof(*keys)) : NULL;
        if (n && (!infos || !ptrs || !keys)) {
                rpc_call_finish(call, WR_STATUS_RESOURCE_EXHAUSTED, "out of memory");
                goto out;
        }
        for (size_t i = 0; i < n; i++) {
                warren__v1__secret_info__init(&infos[i]);
                infos[i].name = list[i].name;
                infos[i].updated_at_unix = list[i].updated_ns / 1000000000LL;
                infos[i].version = list[i].version;
                if (list[i].n_entries > 0) {
                        keys[i] = calloc(list[i].n_entries, sizeof(**keys));
                        if (!keys[i]) {
                                rpc_call_finish(call, WR_STATUS_RESOURCE_EXHAUSTED,
                                                "out of memory");
                                goto out;
                        }
                        for (size_t k = 0; k < list[i].n_entries; k++)
                                keys[i][k] = list[i].entries[k].key;
                        infos[i].n_keys = list[i].n_entries;
                        infos[i].keys = keys[i];
                }
                ptrs[i] = &infos[i];
        }
        Warren__V1__ListSecretsResponse resp = WARREN__V1__LIST_SECRETS_RESPONSE__INIT;
        resp.n_secrets = n;
        resp.secrets = ptrs;
        rpc_call_reply(call, &resp.base);
out:
        for (size_t i = 0; keys && i < n; i++)
                free(keys[i]);
        free(keys);
        free(ptrs);
        free(infos);
        store_secret_list_free(list, n);
}

static void delete_secret(struct rpc_call *call, const ProtobufCMessage *msg) {
        const Warren__V1__DeleteSecretRequest *req = (const void *) msg;
        struct api_ctx *ctx = rpc_call_server_ctx(call);
        if (check_name(call, "name", req->name) < 0)
                return;
        struct wr_err e = {0};
        int r = store_secret_delete(ctx->store, api_caller_env(call), req->name, &e);
        if (r < 0) {
                finish_store_err(call, &e);
                return;
        }
        log_info("secret %s deleted", req->name);
        Warren__V1__DeleteSecretResponse resp = WARREN__V1__DELETE_SECRET_RESPONSE__INIT;
        rpc_call_reply(call, &resp.base);
}

static const struct rpc_method methods[] = {
        {
                .path = "/warren.v1.Secrets/SetSecret",
                .kind = RPC_UNARY,
                .input = &warren__v1__set_secret_request__descriptor,
                .output = &warren__v1__secret_info__descriptor,
                .on_message = set_secret,
                .sensitive = true, /* the values: wiped with the request */
        },
        {
                .path = "/warren.v1.Secrets/ListSecrets",
                .kind = RPC_UNARY,
                .input = &warren__v1__list_secrets_request__descriptor,
                .output = &warren__v1__list_secrets_response__descriptor,
                .on_message = list_secrets,
        },
        {
                .path = "/warren.v1.Secrets/DeleteSecret",
                .kind = RPC_UNARY,
                .input = &warren__v1__delete_secret_request__descriptor,
                .output = &warren__v1__delete_secret_response__descriptor,
                .on_message = delete_secret,
        },
};

int api_secrets_register(struct rpc_server *s) {
        return rpc_server_add_methods(s, methods, ELEMENTSOF(methods));
}
