/* SPDX-License-Identifier: Apache-2.0 */
/* CreateSandboxRequest → struct sbx_spec: every field of the request
 * validated here, once, with errors that name the field and the fix;
 * secrets resolved to their values (from the store, or inline); the
 * request kept for GetSandbox without inline secret values. The sandbox
 * module checks the rules that are its own again (sbx_spec_check), with
 * the same messages: there is one set of them. */
#include "api/spec.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "basic/macro.h"
#include "egress/egress-proto.h"
#include "net/net.h"
#include "net/rules.h"
#include "runtime/runtime.h"
#include "sandbox/sandbox.h"
#include "sandbox/ssh.h"
#include "store/store.h"
#include "volume/volume.h"

#define INVALID(e, ...)                                                                            \
        err_setx(e, -EINVAL, WR_STATUS_INVALID_ARGUMENT, WR_FAULT_CLIENT, __VA_ARGS__)
#define UNIMPLEMENTED(e, ...)                                                                      \
        err_setx(e, -EOPNOTSUPP, WR_STATUS_UNIMPLEMENTED, WR_FAULT_CLIENT, __VA_ARGS__)

/* Load the stored secret name into *sec (the caller clears it); field
 * names the request field in the errors. */
static int secret_load(struct store *store, const char *env, const char *name, const char *field,
                       struct store_secret *sec, struct wr_err *e) {
        struct wr_err le = {0};
        int r = store_secret_get(store, env, name, sec, &le);
        if (r == -ENOENT)
                return err_setx(e, -ENOENT, WR_STATUS_NOT_FOUND, WR_FAULT_CLIENT,
                                "%s: secret %s not found (store it with `warren secret set %s < "
                                "file`)",
                                field, name, name);
        if (r == -EBADMSG)
                return err_setx(e, r, WR_STATUS_FAILED_PRECONDITION, WR_FAULT_SERVICE,
                                "%s: %s; store it again with `warren secret set %s < file`", field,
                                le.msg, name);
        if (r < 0)
                return err_set(e, r, "%s: read secret %s: %s", field, name, le.msg);
        return 0;
}

/* The entry of sec with key (NULL: none). */
static const struct store_secret_entry *secret_entry(const struct store_secret *sec,
                                                     const char *key) {
        for (size_t i = 0; i < sec->n_entries; i++)
                if (strcmp(sec->entries[i].key, key) == 0)
                        return &sec->entries[i];
        return NULL;
}

static int no_key(const char *field, const char *name, const char *key, struct wr_err *e) {
        return err_setx(e, -ENOENT, WR_STATUS_NOT_FOUND, WR_FAULT_CLIENT,
                        "%s: integration %s has no key %.80s (`warren secret ls` lists its keys)",
                        field, name, key);
}

/* The value of a secret reference, for one env var: a plain stored secret,
 * an inline value, or one key of an integration. *ret is wiped and freed
 * by the caller. */
static int secret_value(struct store *store, const char *env, const Warren__V1__SecretRef *ref,
                        const char *field, char **ret, struct wr_err *e) {
        struct store_secret sec = {0};
        const struct store_secret_entry *en = NULL;
        int r;
        switch (ref->source_case) {
        case WARREN__V1__SECRET_REF__SOURCE_INLINE_VALUE:
                *ret = strndup((const char *) ref->inline_value.data, ref->inline_value.len);
                return *ret ? 0 : -ENOMEM;
        case WARREN__V1__SECRET_REF__SOURCE_NAME:
                if ((r = secret_load(store, env, ref->name, field, &sec, e)) < 0)
                        return r;
                if (sec.n_entries != 1 || sec.entries[0].key[0]) {
                        store_secret_clear(&sec);
                        return INVALID(e,
                                       "%s: secret %s has several keys: use it in `secrets`, or "
                                       "pick one with Secret.from_integration(%s, keys=[KEY])",
                                       field, ref->name, ref->name);
                }
                en = &sec.entries[0];
                break;
        case WARREN__V1__SECRET_REF__SOURCE_INTEGRATION: {
                const Warren__V1__IntegrationRef *in = ref->integration;
                if (in->n_keys != 1)
                        return INVALID(e,
                                       "%s: an integration gives one variable only with exactly "
                                       "one key: Secret.from_integration(%s, keys=[KEY]) (or put "
                                       "it in `secrets` for all its keys)",
                                       field, in->name);
                if ((r = secret_load(store, env, in->name, field, &sec, e)) < 0)
                        return r;
                if (!(en = secret_entry(&sec, in->keys[0]))) {
                        store_secret_clear(&sec);
                        return no_key(field, in->name, in->keys[0], e);
                }
                break;
        }
        default:
                return INVALID(e,
                               "%s: a secret value must name a stored secret or an integration "
                               "key, or carry an inline value",
                               field);
        }
        *ret = strndup((const char *) en->value, en->len);
        store_secret_clear(&sec);
        return *ret ? 0 : -ENOMEM;
}

/* ---- managed SSH ---- */

static int ssh_dest_build(struct store *store, const char *envname, const char *alias,
                          const Warren__V1__SshDest *d, struct sbx_ssh_dest *out,
                          struct wr_err *e) {
        char field[SBX_SSH_ALIAS_MAX + 64];
        snprintf(field, sizeof(field), "managed_ssh.%.*s", SBX_SSH_ALIAS_MAX + 1, alias);
        int r = sbx_ssh_alias_check("managed_ssh", alias, e);
        if (r < 0)
                return r;
        if (!d)
                return INVALID(e, "%s: empty: give host and private_key_secret", field);
        if ((r = sbx_ssh_host_check(field, d->host, e)) < 0)
                return r;
        const char *user = d->username && *d->username ? d->username : "root";
        char ufield[sizeof(field) + 16];
        snprintf(ufield, sizeof(ufield), "%s.username", field);
        if ((r = sbx_ssh_user_check(ufield, user, e)) < 0)
                return r;
        if (d->port > 65535)
                return INVALID(e, "%s.port: %u is not a TCP port (1-65535; 0 = 22)", field,
                               d->port);
        if (d->n_host_keys > SBX_SSH_HOST_KEYS_MAX)
                return INVALID(e, "%s.host_keys: more than %d keys", field, SBX_SSH_HOST_KEYS_MAX);
        if (!(out->alias = strdup(alias)) || !(out->host = strdup(d->host)) ||
            !(out->user = strdup(user)))
                return -ENOMEM;
        out->port = d->port ? (uint16_t) d->port : 22;
        if (d->n_host_keys && !(out->host_keys = calloc(d->n_host_keys, sizeof(char *))))
                return -ENOMEM;
        for (size_t k = 0; k < d->n_host_keys; k++, out->n_host_keys++) {
                char kfield[sizeof(field) + 32];
                snprintf(kfield, sizeof(kfield), "%s.host_keys[%zu]", field, k);
                if ((r = sbx_ssh_host_key_parse(kfield, d->host_keys[k], strlen(d->host_keys[k]),
                                                &out->host_keys[k], e)) < 0)
                        return r;
        }
        char sfield[sizeof(field) + 32];
        snprintf(sfield, sizeof(sfield), "%s.private_key_secret", field);
        if (!d->private_key_secret || !*d->private_key_secret)
                return INVALID(e,
                               "%s: missing: name the secret that holds the private key "
                               "(`warren secret set NAME < id_ed25519`)",
                               sfield);
        struct store_secret sec = {0};
        if ((r = secret_load(store, envname, d->private_key_secret, sfield, &sec, e)) < 0)
                return r;
        if (sec.n_entries != 1 || sec.entries[0].key[0]) {
                store_secret_clear(&sec);
                return INVALID(e, "%s: secret %s has several keys; store the private key alone",
                               sfield, d->private_key_secret);
        }
        r = sbx_ssh_key_check(sfield, sec.entries[0].value, sec.entries[0].len, e);
        if (r >= 0) {
                out->key = malloc(sec.entries[0].len ? sec.entries[0].len : 1);
                if (!out->key)
                        r = -ENOMEM;
                else {
                        memcpy(out->key, sec.entries[0].value, sec.entries[0].len);
                        out->key_len = sec.entries[0].len;
                }
        }
        store_secret_clear(&sec);
        return r;
}

/* managed_ssh → s->ssh (keys included), the /root/.ssh files as mounts and
 * SSH_AUTH_SOCK (unless env sets it). */
static int ssh_build(struct store *store, const char *envname,
                     const Warren__V1__CreateSandboxRequest *req, struct sbx_spec *s,
                     struct wr_err *e) {
        if (!req->n_managed_ssh)
                return 0;
        if (req->n_managed_ssh > SBX_SSH_DESTS_MAX)
                return INVALID(e, "managed_ssh: more than %d destinations", SBX_SSH_DESTS_MAX);
        if (req->block_network)
                return INVALID(e, "managed_ssh: a sandbox with block_network cannot reach an SSH "
                                  "server: give one or the other");
        if (!(s->ssh = calloc(req->n_managed_ssh, sizeof(*s->ssh))))
                return -ENOMEM;
        int r;
        for (size_t i = 0; i < req->n_managed_ssh; i++) {
                s->n_ssh++; /* counted first: a half-built entry is freed with the spec */
                if ((r = ssh_dest_build(store, envname, req->managed_ssh[i]->key,
                                        req->managed_ssh[i]->value, &s->ssh[i], e)) < 0)
                        return r;
        }
        _cleanup_free_ char *config = NULL, *known = NULL;
        if ((r = sbx_ssh_render(s->ssh, s->n_ssh, &config, &known)) < 0)
                return r;
        struct rt_mount files[] = {
                {.kind = RT_MOUNT_COPY,
                 .target = SBX_SSH_CONFIG,
                 .data = config,
                 .len = strlen(config),
                 .mode = 0600},
                {.kind = RT_MOUNT_COPY,
                 .target = SBX_SSH_KNOWN_HOSTS,
                 .data = known,
                 .len = strlen(known),
                 .mode = 0600},
        };
        for (size_t i = 0; i < ELEMENTSOF(files); i++)
                if ((r = sbx_spec_mount_add(s, &files[i])) < 0)
                        return r == -E2BIG ? INVALID(e, "volumes: too many mounts") : r;
        if (!sbx_env_find(s->env, "SSH_AUTH_SOCK") &&
            (r = sbx_env_set2(&s->env, "SSH_AUTH_SOCK", SBX_SSH_SOCK)) < 0)
                return r;
        return 0;
}

/* Set k to the n bytes at v (a secret: the copy is wiped). */
static int env_set_bytes(char ***env, const char *k, const void *v, size_t n) {
        _cleanup_erase_free_ char *s = strndup(v, n);
        return s ? sbx_env_set2(env, k, s) : -ENOMEM;
}

/* Whole secrets as environment variables (secrets=[...]). */
static int secrets_to_env(struct store *store, const char *envname,
                          const Warren__V1__SecretRef *ref, char ***env, struct wr_err *e) {
        int r;
        switch (ref->source_case) {
        case WARREN__V1__SECRET_REF__SOURCE_NAME:
        case WARREN__V1__SECRET_REF__SOURCE_INTEGRATION: {
                const char *name = ref->source_case == WARREN__V1__SECRET_REF__SOURCE_NAME
                                           ? ref->name
                                           : ref->integration->name;
                struct store_secret sec = {0};
                if ((r = secret_load(store, envname, name, "secrets", &sec, e)) < 0)
                        return r;
                if (ref->source_case == WARREN__V1__SECRET_REF__SOURCE_INTEGRATION)
                        for (size_t k = 0; k < ref->integration->n_keys; k++)
                                if (!secret_entry(&sec, ref->integration->keys[k])) {
                                        store_secret_clear(&sec);
                                        return no_key("secrets", name, ref->integration->keys[k],
                                                      e);
                                }
                for (size_t i = 0; r >= 0 && i < sec.n_entries; i++) {
                        const struct store_secret_entry *en = &sec.entries[i];
                        const char *key = en->key[0]                        ? en->key
                                          : ref->env_name && *ref->env_name ? ref->env_name
                                                                            : name;
                        if (ref->source_case == WARREN__V1__SECRET_REF__SOURCE_INTEGRATION &&
                            ref->integration->n_keys > 0) {
                                bool want = false;
                                for (size_t k = 0; k < ref->integration->n_keys; k++)
                                        want |= strcmp(ref->integration->keys[k], key) == 0;
                                if (!want)
                                        continue;
                        }
                        r = env_set_bytes(env, key, en->value, en->len);
                }
                store_secret_clear(&sec);
                return r < 0 ? err_set(e, r, "secrets: %s", name) : 0;
        }
        case WARREN__V1__SECRET_REF__SOURCE_INLINE_VALUE:
                if (!ref->env_name || !sbx_env_name_valid(ref->env_name))
                        return INVALID(e, "secrets: an inline secret needs env_name");
                r = env_set_bytes(env, ref->env_name, ref->inline_value.data,
                                  ref->inline_value.len);
                return r < 0 ? err_set(e, r, "secrets: out of memory") : 0;
        case WARREN__V1__SECRET_REF__SOURCE_INLINE_VALUES:
                for (size_t i = 0; i < ref->inline_values->n_values; i++) {
                        Warren__V1__InlineSecrets__ValuesEntry *kv = ref->inline_values->values[i];
                        if (!sbx_env_name_valid(kv->key))
                                return INVALID(e, "secrets: %s is not a valid variable name",
                                               kv->key);
                        if ((r = env_set_bytes(env, kv->key, kv->value.data, kv->value.len)) < 0)
                                return err_set(e, r, "secrets: out of memory");
                }
                return 0;
        default:
                return INVALID(e, "secrets: an entry names no secret");
        }
}

/* Drop a secret reference's value from a decoded copy: wipe inline
 * bytes, free what the oneof held (protobuf-c frees a oneof member only
 * while its case is set) and unset it. A stored secret's name stays when
 * keep_names. */
static void secret_ref_strip(Warren__V1__SecretRef *ref, bool keep_names) {
        switch (ref->source_case) {
        case WARREN__V1__SECRET_REF__SOURCE_NAME:
                if (keep_names)
                        return;
                free(ref->name);
                ref->name = NULL;
                break;
        case WARREN__V1__SECRET_REF__SOURCE_INLINE_VALUE:
                ref->inline_value.data =
                        erase_and_free_n(ref->inline_value.data, ref->inline_value.len);
                ref->inline_value.len = 0;
                break;
        case WARREN__V1__SECRET_REF__SOURCE_INLINE_VALUES:
                for (size_t i = 0; i < ref->inline_values->n_values; i++) {
                        ProtobufCBinaryData *v = &ref->inline_values->values[i]->value;
                        if (v->data)
                                explicit_bzero(v->data, v->len);
                }
                warren__v1__inline_secrets__free_unpacked(ref->inline_values, NULL);
                ref->inline_values = NULL;
                break;
        case WARREN__V1__SECRET_REF__SOURCE_INTEGRATION:
                if (keep_names)
                        return;
                warren__v1__integration_ref__free_unpacked(ref->integration, NULL);
                ref->integration = NULL;
                break;
        default:
                break;
        }
        ref->source_case = WARREN__V1__SECRET_REF__SOURCE__NOT_SET;
}

/* Serialize req for the store, without inline secret values (an env
 * value keeps only a stored secret's name; secrets keep names and
 * integrations). Every buffer that held a value is wiped. */
static int spec_pack(const Warren__V1__CreateSandboxRequest *req, uint8_t **ret, size_t *n) {
        size_t len = protobuf_c_message_get_packed_size(&req->base);
        uint8_t *buf = malloc(len ? len : 1);
        if (!buf)
                return -ENOMEM;
        protobuf_c_message_pack(&req->base, buf);
        Warren__V1__CreateSandboxRequest *copy =
                warren__v1__create_sandbox_request__unpack(NULL, len, buf);
        erase_and_free_n(buf, len);
        if (!copy)
                return -ENOMEM;
        for (size_t i = 0; i < copy->n_env; i++) {
                Warren__V1__EnvValue *v = copy->env[i]->value;
                if (v && v->kind_case == WARREN__V1__ENV_VALUE__KIND_SECRET && v->secret)
                        secret_ref_strip(v->secret, true);
        }
        for (size_t i = 0; i < copy->n_secrets; i++)
                secret_ref_strip(copy->secrets[i], true);
        /* credentials: Secret.from_local_env values arrive inline */
        for (size_t i = 0; i < copy->n_credentials; i++)
                if (copy->credentials[i]->secret)
                        secret_ref_strip(copy->credentials[i]->secret, true);
        *n = warren__v1__create_sandbox_request__get_packed_size(copy);
        *ret = malloc(*n ? *n : 1);
        if (*ret)
                warren__v1__create_sandbox_request__pack(copy, *ret);
        warren__v1__create_sandbox_request__free_unpacked(copy, NULL);
        return *ret ? 0 : -ENOMEM;
}

/* resources → limits. */
static int limits_parse(const Warren__V1__Resources *rs, struct rt_limits *l, struct wr_err *e) {
        if (!rs)
                return 0;
        if (rs->cpu && *rs->cpu && rt_cpu_parse(rs->cpu, &l->cpu_millicores) < 0)
                return INVALID(e,
                               "resources.cpu: %s is not valid: use cores (\"2\", \"0.5\") or "
                               "millicores (\"500m\")",
                               rs->cpu);
        if (rs->memory && *rs->memory && rt_memory_parse(rs->memory, &l->memory_bytes) < 0)
                return INVALID(e,
                               "resources.memory: %s is not valid: use bytes or a size like "
                               "\"512Mi\" or \"4Gi\"",
                               rs->memory);
        if (rs->disk && *rs->disk && rt_memory_parse(rs->disk, &l->disk_bytes) < 0)
                return INVALID(e,
                               "resources.disk: %s is not valid: use bytes or a size like "
                               "\"512Mi\" or \"10Gi\"",
                               rs->disk);
        if (l->disk_bytes && l->disk_bytes < RT_DISK_MIN)
                return INVALID(e,
                               "resources.disk: %s is too small for a writable layer: give at "
                               "least 8Mi, or leave it out for the daemon's default",
                               rs->disk);
        if (l->disk_bytes > RT_DISK_MAX)
                return INVALID(e, "resources.disk: %s is too large: give at most 8Ti", rs->disk);
        l->pids_max = rs->pids;
        return 0;
}

/* What the K8S compute class does not do (docs/k8s.md): refused naming
 * the feature and the class. The seed's host-only features (network
 * policies, managed SSH, resource detectors and the credentials that
 * need warrend's egress proxy, volumes on this host) are INVALID_ARGUMENT;
 * what the class could do but does not yet is UNIMPLEMENTED. */
static int check_k8s(const Warren__V1__CreateSandboxRequest *req, struct wr_err *e) {
        static const char why[] = "is a HOST class feature; a sandbox on compute_class K8S has "
                                  "the network access of the cluster it runs on";
        /* the SDK sends a policy with detectors, SSH and credentials: those
         * are named first */
        if (req->n_resource_detectors)
                return INVALID(e, "resource_detectors: %s (use compute_class HOST)", why);
        if (req->n_managed_ssh)
                return INVALID(e, "managed_ssh: %s (use compute_class HOST)", why);
        if (req->n_credentials)
                return INVALID(e, "credentials: %s (use compute_class HOST)", why);
        if (req->network_policy)
                return INVALID(e, "network_policy: %s (use compute_class HOST)", why);
        if (req->block_network)
                return INVALID(e, "block_network: is a HOST class feature; on compute_class K8S "
                                  "use the cluster's NetworkPolicy objects");
        if (req->n_volumes)
                return INVALID(e, "volumes: warren volumes live on the daemon's host and are "
                                  "not available on compute_class K8S");
        if (req->journal_execs)
                return INVALID(e, "journal_execs: the change journal reads the sandbox's "
                                  "writable layer on the host; not available on compute_class "
                                  "K8S");
        if (req->resources && req->resources->pids)
                return INVALID(e, "resources.pids: a Pod has no per-Pod process limit on "
                                  "compute_class K8S (the cluster's kubelet sets podPidsLimit)");
        if (req->identity)
                return UNIMPLEMENTED(e, "identity: compute_class K8S does not give Pods a "
                                        "warren identity token yet (the token file and the API "
                                        "socket are mounted from warrend's host)");
        if (req->n_entrypoint)
                return UNIMPLEMENTED(e, "entrypoint: compute_class K8S does not run an "
                                        "entrypoint yet (its output has no home that outlives "
                                        "warrend's connection to the Pod); start it with a "
                                        "detached exec");
        if (!req->image || req->image->kind_case != WARREN__V1__IMAGE_SPEC__KIND_REF ||
            !req->image->ref || !*req->image->ref)
                return INVALID(e, "image: compute_class K8S needs an image reference the "
                                  "cluster can pull (the daemon's default image and images "
                                  "built by warrend are local to its host; --k8s-registry is "
                                  "not built yet)");
        return 0;
}

/* What this warrend cannot do yet: UNIMPLEMENTED naming the field and
 * the issue that brings it. */
static int check_unimplemented(const Warren__V1__CreateSandboxRequest *req, struct wr_err *e) {
        if (req->compute_class == WARREN__V1__COMPUTE_CLASS__COMPUTE_CLASS_K8S) {
                int r = check_k8s(req, e);
                if (r < 0)
                        return r;
        }
        if (req->image && req->image->kind_case == WARREN__V1__IMAGE_SPEC__KIND_BUILD)
                return UNIMPLEMENTED(e, "image.build: CreateSandbox does not build; build the "
                                        "image with Images/BuildImage (the SDK's client.create "
                                        "does that first) and create from its id");
        return 0;
}

/* net's own -EINVAL, answered INVALID_ARGUMENT with its message. */
static int net_invalid(int r, struct wr_err *e, const char *what) {
        if (r != -EINVAL)
                return r;
        char m[WR_ERR_MSG_MAX];
        snprintf(m, sizeof(m), "%s", e && e->msg[0] ? e->msg : what);
        return INVALID(e, "%s", m);
}

/* A string of the policy as the proto gave it: printable ASCII, bounded
 * (net's own checks then name what is wrong with it). */
static int policy_text_check(const char *field, size_t i, const char *v, struct wr_err *e) {
        size_t n = 0;
        for (const char *c = v; *c; c++, n++)
                if ((unsigned char) *c < 0x21 || (unsigned char) *c > 0x7e || n > 300)
                        return INVALID(e,
                                       "%s[%zu]: \"%.80s\" is not valid: use ASCII without "
                                       "spaces or control characters, at most 300 bytes",
                                       field, i, v);
        return 0;
}

static int policy_routes(struct net_policy *p, enum net_route_list list, const char *field,
                         Warren__V1__Route **routes, size_t n, struct wr_err *e) {
        for (size_t i = 0; i < n; i++) {
                const Warren__V1__Route *rt = routes[i];
                const char *cidr = rt->cidr ? rt->cidr : "";
                int r = policy_text_check(field, i, cidr, e);
                if (r < 0)
                        return r;
                if (rt->n_ports > NET_ROUTE_PORTS_MAX)
                        return INVALID(e, "%s[%zu]: at most %d port ranges", field, i,
                                       NET_ROUTE_PORTS_MAX);
                struct net_port_range ports[NET_ROUTE_PORTS_MAX];
                for (size_t k = 0; k < rt->n_ports; k++) {
                        uint32_t lo = rt->ports[k]->start,
                                 hi = rt->ports[k]->end ? rt->ports[k]->end : rt->ports[k]->start;
                        struct wr_err pe = {0};
                        if (net_port_range_check(lo, hi, &ports[k], &pe) < 0)
                                return INVALID(e, "%s[%zu]: ports[%zu]: %s", field, i, k, pe.msg);
                }
                if ((r = net_policy_add_route(p, list, cidr, ports, rt->n_ports, e)) < 0)
                        return net_invalid(r, e, "invalid route");
        }
        return 0;
}

/* ---- per-host request rules and credentials (TLS interception) ---- */

static int matcher_from(const Warren__V1__Matcher *pm, struct net_matcher *m, const char *field,
                        struct wr_err *e) {
        if (!pm || pm->kind_case == WARREN__V1__MATCHER__KIND__NOT_SET)
                return 0;
        const char *s = pm->kind_case == WARREN__V1__MATCHER__KIND_EXACT         ? pm->exact
                        : pm->kind_case == WARREN__V1__MATCHER__KIND_STARTS_WITH ? pm->starts_with
                                                                                 : pm->regex;
        enum net_matcher_kind k = pm->kind_case == WARREN__V1__MATCHER__KIND_EXACT ? NET_MATCH_EXACT
                                  : pm->kind_case == WARREN__V1__MATCHER__KIND_STARTS_WITH
                                          ? NET_MATCH_PREFIX
                                          : NET_MATCH_REGEX;
        s = s ? s : "";
        int r = net_matcher_set(m, k, s, strlen(s), field, e);
        return r < 0 ? net_invalid(r, e, "invalid matcher") : 0;
}

static int kv_from(size_t n, Warren__V1__RequestMatch__QueryEntry **q,
                   Warren__V1__RequestMatch__HeadersEntry **h, struct net_kv_matcher **ret,
                   size_t *ret_n, const char *field, struct wr_err *e) {
        if (!n)
                return 0;
        if (n > NET_RULE_KV_MAX)
                return INVALID(e, "%s: at most %d entries", field, NET_RULE_KV_MAX);
        if (!(*ret = calloc(n, sizeof(**ret))))
                return -ENOMEM;
        for (size_t i = 0; i < n; i++) {
                (*ret_n)++; /* counted first: a half-made entry is freed too */
                const char *k = q ? q[i]->key : h[i]->key;
                const Warren__V1__Matcher *m = q ? q[i]->value : h[i]->value;
                char f[200];
                snprintf(f, sizeof(f), "%s[\"%.60s\"]", field, k ? k : "");
                if (!k || !*k)
                        return INVALID(e, "%s: an empty name", f);
                if (!((*ret)[i].name = strdup(k)))
                        return -ENOMEM;
                int r = matcher_from(m, &(*ret)[i].m, f, e);
                if (r < 0)
                        return r;
        }
        return 0;
}

/* A secret's value for a placeholder (stored secret of one key). *ret
 * wiped and freed by the caller. */
static int ph_secret(struct store *store, const char *envname, const char *name, const char *field,
                     char **ret, struct wr_err *e) {
        Warren__V1__SecretRef ref = WARREN__V1__SECRET_REF__INIT;
        ref.source_case = WARREN__V1__SECRET_REF__SOURCE_NAME;
        ref.name = (char *) name;
        return secret_value(store, envname, &ref, field, ret, e);
}

static int ph_set(struct net_placeholder *ph, const char *token, char *value, const char *field,
                  struct wr_err *e) {
        size_t len = strlen(value);
        int r = net_placeholder_check(token, (const uint8_t *) value, len, field, e);
        if (r < 0)
                return net_invalid(r, e, "invalid placeholder");
        if (!(ph->token = strdup(token)))
                return -ENOMEM;
        ph->token_len = strlen(token);
        ph->value = (uint8_t *) value; /* taken */
        ph->len = len;
        return 0;
}

static int transform_from(struct store *store, const char *envname,
                          const Warren__V1__Transformer *t, struct net_transform *tf,
                          const char *field, struct wr_err *e) {
        char f[240];
        int r;
        if (t->n_headers > NET_RULE_SET_MAX || t->n_headers_secrets > NET_PLACEHOLDERS_MAX)
                return INVALID(e, "%s: at most %d headers and %d headers_secrets", field,
                               NET_RULE_SET_MAX, NET_PLACEHOLDERS_MAX);
        if (t->n_headers && !(tf->set = calloc(t->n_headers, sizeof(*tf->set))))
                return -ENOMEM;
        for (size_t i = 0; i < t->n_headers; i++) {
                tf->n_set++; /* counted first: a half-made entry is freed too */
                const char *k = t->headers[i]->key ? t->headers[i]->key : "";
                const char *v = t->headers[i]->value ? t->headers[i]->value : "";
                snprintf(f, sizeof(f), "%s.headers[\"%.60s\"]", field, k);
                if ((r = net_header_set_check(k, v, f, e)) < 0)
                        return net_invalid(r, e, "invalid header");
                if (!(tf->set[i].name = strdup(k)) || !(tf->set[i].value = strdup(v)))
                        return -ENOMEM;
        }
        if (t->n_headers_secrets && !(tf->ph = calloc(t->n_headers_secrets, sizeof(*tf->ph))))
                return -ENOMEM;
        for (size_t i = 0; i < t->n_headers_secrets; i++) {
                const char *tok = t->headers_secrets[i]->key ? t->headers_secrets[i]->key : "";
                const char *sec = t->headers_secrets[i]->value ? t->headers_secrets[i]->value : "";
                snprintf(f, sizeof(f), "%s.headers_secrets[\"%.60s\"]", field, tok);
                if (!*tok)
                        return INVALID(e, "%s: an empty placeholder token is not allowed", f);
                if (!*sec)
                        return INVALID(e, "%s: name the secret that replaces the placeholder", f);
                char *v = NULL;
                if ((r = ph_secret(store, envname, sec, f, &v, e)) < 0)
                        return r;
                if ((r = ph_set(&tf->ph[tf->n_ph], tok, v, f, e)) < 0) {
                        erase_and_free(v);
                        return r;
                }
                tf->n_ph++;
        }
        return 0;
}

static int rule_from(struct store *store, const char *envname, const Warren__V1__Rule *pr,
                     struct net_rule *rule, const char *field, struct wr_err *e) {
        char f[200];
        int r;
        const Warren__V1__RequestMatch *m = pr->match;
        if (m) {
                snprintf(f, sizeof(f), "%s.match.path", field);
                if ((r = matcher_from(m->path, &rule->path, f, e)) < 0)
                        return r;
                if (m->method && *m->method) {
                        for (const char *c = m->method; *c; c++)
                                if (!((*c >= 'A' && *c <= 'Z') || *c == '-' || *c == '_') ||
                                    c - m->method >= NET_HTTP_METHOD_MAX)
                                        return INVALID(e,
                                                       "%s.match.method: \"%.40s\" is not valid: "
                                                       "use an upper-case method like GET",
                                                       field, m->method);
                        if (!(rule->method = strdup(m->method)))
                                return -ENOMEM;
                }
                snprintf(f, sizeof(f), "%s.match.query", field);
                if ((r = kv_from(m->n_query, m->query, NULL, &rule->query, &rule->n_query, f, e)) <
                    0)
                        return r;
                snprintf(f, sizeof(f), "%s.match.headers", field);
                if ((r = kv_from(m->n_headers, NULL, m->headers, &rule->headers, &rule->n_headers,
                                 f, e)) < 0)
                        return r;
        }
        if (pr->n_transforms > NET_RULE_TRANSFORMS_MAX)
                return INVALID(e, "%s.transforms: at most %d", field, NET_RULE_TRANSFORMS_MAX);
        if (pr->n_transforms && !(rule->tf = calloc(pr->n_transforms, sizeof(*rule->tf))))
                return -ENOMEM;
        for (size_t t = 0; t < pr->n_transforms; t++) {
                rule->n_tf++; /* counted first: a half-made entry is freed too */
                snprintf(f, sizeof(f), "%s.transforms[%zu]", field, t);
                if ((r = transform_from(store, envname, pr->transforms[t], &rule->tf[t], f, e)) < 0)
                        return r;
        }
        if (pr->forward_url && *pr->forward_url) {
                snprintf(f, sizeof(f), "%s.forward_url", field);
                if ((r = net_forward_parse(pr->forward_url, &rule->fwd, f, e)) < 0)
                        return net_invalid(r, e, "invalid forward_url");
                rule->has_forward = true;
        }
        return 0;
}

/* credentials: the placeholder an add_credentials entry's variable holds */
static int cred_token(char *out, size_t size) {
        uint8_t rnd[12];
        if (getrandom(rnd, sizeof(rnd), 0) != sizeof(rnd))
                return -EIO;
        int n = snprintf(out, size, "__warren_secret_");
        for (size_t i = 0; i < sizeof(rnd); i++)
                n += snprintf(out + n, size - (size_t) n, "%02x", rnd[i]);
        return 0;
}

static int creds_from(struct store *store, const char *envname,
                      const Warren__V1__CreateSandboxRequest *req, struct net_rules *rs,
                      struct net_policy *p, struct sbx_spec *s, struct wr_err *e) {
        if (!req->n_credentials)
                return 0;
        if (req->n_credentials > NET_CREDENTIALS_MAX)
                return INVALID(e, "credentials: at most %d", NET_CREDENTIALS_MAX);
        if (!(rs->creds = calloc(req->n_credentials, sizeof(*rs->creds))))
                return -ENOMEM;
        int r;
        for (size_t i = 0; i < req->n_credentials; i++) {
                rs->n_creds++; /* counted first: a half-made entry is freed too */
                const Warren__V1__HostCredential *hc = req->credentials[i];
                struct net_credential *c = &rs->creds[i];
                char f[80];
                snprintf(f, sizeof(f), "credentials[%zu]", i);
                if (!hc->n_hosts)
                        return INVALID(e, "%s.hosts: name at least one host", f);
                if (hc->n_hosts > 64)
                        return INVALID(e, "%s.hosts: at most 64", f);
                if (!(c->hosts = calloc(hc->n_hosts, sizeof(*c->hosts))))
                        return -ENOMEM;
                for (size_t k = 0; k < hc->n_hosts; k++, c->n_hosts++) {
                        if ((r = policy_text_check("credentials.hosts", k, hc->hosts[k], e)) < 0)
                                return r;
                        if (strcmp(hc->hosts[k], "*") == 0)
                                return INVALID(e,
                                               "%s.hosts[%zu]: \"*\" would send the secret "
                                               "anywhere: name its hosts",
                                               f, k);
                        if ((r = net_host_pattern_parse(hc->hosts[k], &c->hosts[k], e)) < 0)
                                return net_invalid(r, e, "invalid host");
                        if (p && (r = net_policy_add_host(p, hc->hosts[k], e)) < 0)
                                return net_invalid(r, e, "invalid host");
                }
                const Warren__V1__SecretRef *ref = hc->secret;
                if (!ref)
                        return INVALID(e, "%s.secret: missing", f);
                /* the variable: the stored secret's name, or env_name */
                const char *var = ref->env_name && *ref->env_name ? ref->env_name
                                  : ref->source_case == WARREN__V1__SECRET_REF__SOURCE_NAME
                                          ? ref->name
                                          : NULL;
                if (!var || !sbx_env_name_valid(var))
                        return INVALID(e,
                                       "%s.secret: needs a variable name (env_name, or a stored "
                                       "secret's name that is a valid variable name)",
                                       f);
                char *v = NULL;
                char sf[120];
                snprintf(sf, sizeof(sf), "%s.secret", f);
                if ((r = secret_value(store, envname, ref, sf, &v, e)) < 0)
                        return r;
                char tok[64];
                if ((r = cred_token(tok, sizeof(tok))) < 0 ||
                    (r = ph_set(&c->ph, tok, v, sf, e)) < 0) {
                        erase_and_free(v);
                        return r;
                }
                if ((r = sbx_env_set2(&s->env, var, tok)) < 0)
                        return r;
        }
        return 0;
}

/* host_rules with rules and credentials -> the spec's rules wire form
 * (secret values inside; wiped with the spec). Hosts of credentials join
 * the policy p when there is one. */
static int rules_build(struct store *store, const char *envname,
                       const Warren__V1__CreateSandboxRequest *req, struct net_policy *p,
                       uint32_t detectors, struct sbx_spec *s, struct wr_err *e) {
        struct net_rules rs = {.detectors = detectors};
        const Warren__V1__NetworkPolicy *np = req->network_policy;
        size_t nh = 0;
        int r = 0;
        for (size_t i = 0; np && i < np->n_host_rules; i++)
                if (np->host_rules[i]->value && np->host_rules[i]->value->n_rules)
                        nh++;
        if (nh > NET_RULES_HOSTS_MAX)
                return INVALID(e, "network_policy.host_rules: at most %d hosts with rules",
                               NET_RULES_HOSTS_MAX);
        if (nh && !(rs.hosts = calloc(nh, sizeof(*rs.hosts))))
                return -ENOMEM;
        for (size_t i = 0; np && i < np->n_host_rules && r >= 0; i++) {
                const Warren__V1__NetworkPolicy__HostRulesEntry *he = np->host_rules[i];
                if (!he->value || !he->value->n_rules)
                        continue;
                struct net_host_rules *hr = &rs.hosts[rs.n_hosts++];
                char f[160];
                snprintf(f, sizeof(f), "network_policy.host_rules[\"%.80s\"]", he->key);
                if (strcmp(he->key, "*") == 0) {
                        r = INVALID(e, "%s: rules need a host or *.domain, not \"*\"", f);
                        break;
                }
                if ((r = net_host_pattern_parse(he->key, &hr->host, e)) < 0) {
                        r = net_invalid(r, e, "invalid host");
                        break;
                }
                if (he->value->n_rules > NET_RULES_PER_HOST_MAX) {
                        r = INVALID(e, "%s: at most %d rules", f, NET_RULES_PER_HOST_MAX);
                        break;
                }
                if (!(hr->rules = calloc(he->value->n_rules, sizeof(*hr->rules)))) {
                        r = -ENOMEM;
                        break;
                }
                for (size_t k = 0; k < he->value->n_rules && r >= 0; k++) {
                        hr->n_rules++; /* counted first: a half-made rule is freed too */
                        char rf[200];
                        snprintf(rf, sizeof(rf), "%s.rules[%zu]", f, k);
                        r = rule_from(store, envname, he->value->rules[k], &hr->rules[k], rf, e);
                }
        }
        if (r >= 0)
                r = creds_from(store, envname, req, &rs, p, s, e);
        s->net_intercept = rs.n_hosts || rs.n_creds || rs.detectors;
        /* managed SSH under a policy: its destinations are exempt (their
         * names are checked again, with their messages, by ssh_build) */
        for (size_t i = 0; r >= 0 && p && i < req->n_managed_ssh && rs.n_ssh < NET_SSH_DESTS_MAX;
             i++) {
                const Warren__V1__SshDest *d = req->managed_ssh[i]->value;
                if (!d || !d->host || net_host_canon_str(d->host, &rs.ssh[rs.n_ssh].host, NULL) < 0)
                        continue;
                rs.ssh[rs.n_ssh++].port = d->port ? (uint16_t) d->port : 22;
        }
        if (r >= 0 && (s->net_intercept || rs.n_ssh))
                r = net_rules_serialize(&rs, &s->net_rules, &s->net_rules_len);
        net_rules_clear(&rs);
        return r;
}

/* network_policy → the spec's mode and the policy's wire form; host_rules
 * with rules and credentials → the rules' wire form (rules_build). */
static int policy_build(struct store *store, const char *envname,
                        const Warren__V1__CreateSandboxRequest *req, struct sbx_spec *s,
                        struct wr_err *e) {
        const Warren__V1__NetworkPolicy *np = req->network_policy;
        uint32_t detectors = 0;
        for (size_t i = 0; i < req->n_resource_detectors; i++) {
                if (req->resource_detectors[i] !=
                    WARREN__V1__RESOURCE_DETECTOR__RESOURCE_DETECTOR_GITHUB_PULL_REQUESTS)
                        return INVALID(e,
                                       "resource_detectors[%zu]: unknown detector %d (known: "
                                       "GITHUB_PULL_REQUESTS)",
                                       i, (int) req->resource_detectors[i]);
                detectors |= NET_DETECT_GITHUB_PULLS;
        }
        /* no policy: outbound allowed; a detector then makes one that
         * allows only its host (seed rule) */
        static const Warren__V1__NetworkPolicy empty = WARREN__V1__NETWORK_POLICY__INIT;
        if (!np && !detectors)
                return rules_build(store, envname, req, NULL, 0, s, e);
        if (!np)
                np = &empty;
        if (np->learn) {
                if (detectors)
                        return INVALID(e, "resource_detectors: learn mode intercepts nothing: "
                                          "give resource_detectors without learn");
                if (np->n_allowed_hosts || np->n_host_rules || np->n_allowed_routes ||
                    np->n_denied_routes)
                        return INVALID(e, "network_policy: learn allows everything and records "
                                          "it: give it without allowed_hosts, host_rules or "
                                          "routes");
                if (req->n_credentials)
                        return INVALID(e, "credentials: learn mode records connections and "
                                          "intercepts nothing: give credentials without learn");
                s->net_mode = EGRESS_MODE_LEARN;
                return 0;
        }
        _cleanup_net_policy_ struct net_policy *p = NULL;
        int r = net_policy_new(&p);
        if (r < 0)
                return r;
        for (size_t i = 0; i < np->n_allowed_hosts; i++) {
                if ((r = policy_text_check("allowed_hosts", i, np->allowed_hosts[i], e)) < 0)
                        return r;
                if ((r = net_policy_add_host(p, np->allowed_hosts[i], e)) < 0)
                        return net_invalid(r, e, "invalid host");
        }
        /* every host_rules key is allowed (an empty rule list: the list form) */
        for (size_t i = 0; i < np->n_host_rules; i++) {
                const char *h = np->host_rules[i]->key ? np->host_rules[i]->key : "";
                if ((r = policy_text_check("host_rules", i, h, e)) < 0)
                        return r;
                if ((r = net_policy_add_host(p, h, e)) < 0)
                        return net_invalid(r, e, "invalid host");
        }
        if ((r = policy_routes(p, NET_ROUTES_ALLOWED, "allowed_routes", np->allowed_routes,
                               np->n_allowed_routes, e)) < 0 ||
            (r = policy_routes(p, NET_ROUTES_DENIED, "denied_routes", np->denied_routes,
                               np->n_denied_routes, e)) < 0)
                return r;
        if (detectors && (r = net_policy_add_host(p, NET_GITHUB_API_HOST, e)) < 0)
                return r;
        if ((r = rules_build(store, envname, req, p, detectors, s, e)) < 0)
                return r;
        if ((r = net_policy_serialize(p, &s->net_policy, &s->net_policy_len)) < 0)
                return r == -E2BIG ? INVALID(e, "network_policy: too large") : r;
        s->net_mode = EGRESS_MODE_ENFORCE;
        return 0;
}

/* An absolute path of components other than "", "." and "..", not "/"
 * and not /proc, /dev, /sys or under them (the runtime's own). */
static bool mount_path_valid(const char *p) {
        if (p[0] != '/' || !p[1] || strlen(p) >= 4096)
                return false;
        static const char *const kernel[] = {"/proc", "/dev", "/sys"};
        for (size_t i = 0; i < ELEMENTSOF(kernel); i++) {
                size_t n = strlen(kernel[i]);
                if (strncmp(p, kernel[i], n) == 0 && (p[n] == 0 || p[n] == '/'))
                        return false;
        }
        for (const char *c = p + 1;;) {
                size_t n = strcspn(c, "/");
                if (n == 0 || (n == 1 && c[0] == '.') || (n == 2 && c[0] == '.' && c[1] == '.'))
                        return false;
                if (!c[n])
                        return true;
                c += n + 1;
        }
}

/* volumes → bind mounts of each volume's data dir (mounted on the host
 * first), nosuid and nodev, read-only when asked. */
static int volumes_to_mounts(struct vol_manager *vm, const char *envname,
                             const Warren__V1__CreateSandboxRequest *req, struct sbx_spec *s,
                             struct wr_err *e) {
        if (!req->n_volumes)
                return 0;
        if (!vm)
                return UNIMPLEMENTED(e, "volumes are not implemented without a volume manager");
        if (req->n_volumes > RT_MOUNTS_MAX)
                return INVALID(e, "volumes: at most %d", RT_MOUNTS_MAX);
        for (size_t i = 0; i < req->n_volumes; i++) {
                const Warren__V1__VolumeMount *vmnt = req->volumes[i];
                const char *name = vmnt->volume ? vmnt->volume : "";
                const char *path = vmnt->path ? vmnt->path : "";
                if (!vol_name_valid(name))
                        return INVALID(e,
                                       "volumes[%zu].volume: \"%.80s\" is not a valid volume "
                                       "name; use 1-63 letters, digits, '.', '_' or '-'",
                                       i, name);
                if (!mount_path_valid(path))
                        return INVALID(e,
                                       "volumes[%zu].path: \"%.80s\" must be an absolute path "
                                       "without empty, '.' or '..' components, not / and not "
                                       "under /proc, /dev or /sys",
                                       i, path);
                for (size_t k = 0; k < i; k++)
                        if (strcmp(req->volumes[k]->path ? req->volumes[k]->path : "", path) == 0)
                                return INVALID(e,
                                               "volumes[%zu].path: %.80s is already the mount "
                                               "point of volumes[%zu]; give each its own path",
                                               i, path, k);
                _cleanup_free_ char *source = NULL;
                int r = vol_source_path(vm, envname, name, &source, e);
                if (r < 0)
                        return err_prefix(e, r, "volumes[%zu]", i);
                struct rt_mount m = {
                        .kind = RT_MOUNT_BIND,
                        .target = path,
                        .source = source,
                        /* idmapped in a user namespace: the volume keeps
                         * the ids the sandbox sees, whatever its range */
                        .flags = RT_MOUNT_NOSUID | RT_MOUNT_NODEV | RT_MOUNT_IDMAP |
                                 (vmnt->read_only ? RT_MOUNT_RO : 0),
                };
                if ((r = sbx_spec_mount_add(s, &m)) < 0)
                        return r == -E2BIG ? INVALID(e, "volumes: too many mounts (at most %d)",
                                                     RT_MOUNTS_MAX)
                                           : r;
        }
        return 0;
}

static int strdup_nonempty(const char *s, char **ret) {
        if (!s || !*s)
                return 0;
        *ret = strdup(s);
        return *ret ? 0 : -ENOMEM;
}

static int build(struct store *store, struct vol_manager *vm, const char *envname,
                 const Warren__V1__CreateSandboxRequest *req, struct sbx_spec *s,
                 struct wr_err *e) {
        int r = check_unimplemented(req, e);
        if (r < 0)
                return r;
        if (envname && !(s->environment = strdup(envname)))
                return -ENOMEM;
        if ((r = volumes_to_mounts(vm, envname, req, s, e)) < 0)
                return r;
        if (req->image && req->image->kind_case == WARREN__V1__IMAGE_SPEC__KIND_REF &&
            (r = strdup_nonempty(req->image->ref, &s->image_ref)) < 0)
                return r;
        if ((r = strdup_nonempty(req->name, &s->name)) < 0 ||
            (r = strdup_nonempty(req->hostname, &s->hostname)) < 0 ||
            (r = strdup_nonempty(req->workdir, &s->workdir)) < 0)
                return r;
        if (req->n_entrypoint &&
            !(s->entrypoint =
                      sbx_argv_dup((const char *const *) req->entrypoint, req->n_entrypoint)))
                return -ENOMEM;
        if ((r = limits_parse(req->resources, &s->limits, e)) < 0)
                return r;
        s->block_network = req->block_network;
        s->journal_execs = req->journal_execs;
        s->identity = req->identity;
        if (req->network_policy && req->block_network)
                return INVALID(e, "network_policy: a sandbox with block_network has no network "
                                  "to police: give one or the other");
        if ((r = policy_build(store, envname, req, s, e)) < 0)
                return r;
        if (req->lifetime && *req->lifetime &&
            sbx_duration_parse(req->lifetime, &s->lifetime_ns) < 0)
                return INVALID(e,
                               "lifetime: %s is not valid: use a duration like \"3600s\", "
                               "\"90m\" or \"2h\"",
                               req->lifetime);
        /* whole secrets first (in order), then env: a variable env names
         * explicitly wins over one a secret group brings */
        for (size_t i = 0; i < req->n_secrets; i++)
                if ((r = secrets_to_env(store, envname, req->secrets[i], &s->env, e)) < 0)
                        return r;
        for (size_t i = 0; i < req->n_env; i++) {
                const Warren__V1__CreateSandboxRequest__EnvEntry *en = req->env[i];
                if (!sbx_env_name_valid(en->key))
                        return INVALID(e,
                                       "env: %.80s is not a valid variable name (letters, "
                                       "digits, '_', '.', '-', not starting with a digit)",
                                       en->key);
                if (!en->value || en->value->kind_case != WARREN__V1__ENV_VALUE__KIND_SECRET) {
                        const char *v = en->value && en->value->kind_case ==
                                                                WARREN__V1__ENV_VALUE__KIND_VALUE
                                                ? en->value->value
                                                : "";
                        if ((r = sbx_env_set2(&s->env, en->key, v)) < 0)
                                return r;
                        continue;
                }
                _cleanup_erase_free_ char *v = NULL;
                char field[160];
                snprintf(field, sizeof(field), "env.%.80s", en->key);
                if ((r = secret_value(store, envname, en->value->secret, field, &v, e)) < 0 ||
                    (r = sbx_env_set2(&s->env, en->key, v)) < 0)
                        return r;
        }
        if ((r = ssh_build(store, envname, req, s, e)) < 0)
                return r;
        if (req->n_tags && !(s->tags = calloc(req->n_tags, sizeof(*s->tags))))
                return -ENOMEM;
        for (size_t i = 0; i < req->n_tags; i++, s->n_tags++)
                if (!(s->tags[i].key = strdup(req->tags[i]->key)) ||
                    !(s->tags[i].value = strdup(req->tags[i]->value)))
                        return -ENOMEM;
        if ((r = spec_pack(req, &s->record, &s->record_len)) < 0)
                return r;
        return sbx_spec_check(s, e);
}

int api_sandbox_spec(struct store *store, struct vol_manager *volumes, const char *envname,
                     const Warren__V1__CreateSandboxRequest *req, struct sbx_spec **ret,
                     struct wr_err *e) {
        _cleanup_(sbx_spec_freep) struct sbx_spec *s = NULL;
        int r = sbx_spec_new(&s);
        if (r >= 0)
                r = build(store, volumes, envname, req, s, e);
        if (r == -ENOMEM && (!e || !e->code))
                return err_setx(e, -ENOMEM, WR_STATUS_RESOURCE_EXHAUSTED, WR_FAULT_SERVICE,
                                "create sandbox: out of memory");
        if (r < 0)
                return r;
        *ret = TAKE_PTR(s);
        return 0;
}
