/* SPDX-License-Identifier: Apache-2.0 */
/* Manifest, index and image config parsing (see manifest.h): pure, no I/O. */
#include "image/manifest.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "image/json-internal.h"

static void strv_free(char **v, size_t n) {
        for (size_t i = 0; v && i < n; i++)
                free(v[i]);
        free(v);
}

/* --- the runtime config --- */

void img_config_clear(struct img_config *cfg) {
        if (!cfg)
                return;
        strv_free(cfg->env, cfg->n_env);
        strv_free(cfg->entrypoint, cfg->n_entrypoint);
        strv_free(cfg->cmd, cfg->n_cmd);
        free(cfg->working_dir);
        free(cfg->user);
        strv_free(cfg->labels, cfg->n_labels);
        strv_free(cfg->exposed_ports, cfg->n_exposed_ports);
        strv_free(cfg->shell, cfg->n_shell);
        free(cfg->stop_signal);
        strv_free(cfg->hc_test, cfg->n_hc_test);
        memset(cfg, 0, sizeof(*cfg));
}

int img_config_decode(const char *json, struct img_config *cfg, struct wr_err *e) {
        memset(cfg, 0, sizeof(*cfg));
        json_error_t jerr;
        _cleanup_json_ json_t *root = json_loads(json ? json : "", 0, &jerr);
        if (!json_is_object(root))
                return err_set(e, -EINVAL, "image config: %s", root ? "not an object" : jerr.text);
        const json_t *c = json_object_get(root, "config");
        if (!json_is_object(c))
                return 0;
        int r = img_config_from_json(c, cfg);
        if (r < 0)
                return err_set(e, r, "image config: malformed");
        return 0;
}

/* --- shared JSON helpers --- */

int img_json_strv(const json_t *a, char ***ret, size_t *n_ret) {
        *ret = NULL;
        *n_ret = 0;
        if (!a || json_is_null(a))
                return 0;
        if (!json_is_array(a))
                return -EINVAL;
        size_t n = json_array_size(a);
        char **v = calloc(n + 1, sizeof(*v));
        if (!v)
                return -ENOMEM;
        for (size_t i = 0; i < n; i++) {
                const char *s = json_string_value(json_array_get(a, i));
                if (!s || !(v[i] = strdup(s))) {
                        strv_free(v, i);
                        return s ? -ENOMEM : -EINVAL;
                }
        }
        *ret = v;
        *n_ret = n;
        return 0;
}

static int cmp_str(const void *a, const void *b) {
        return strcmp(*(char *const *) a, *(char *const *) b);
}

/* An object's keys (with_values: "key=value", values must be strings;
 * else just the keys: ExposedPorts {"80/tcp": {}}), sorted. Absent or
 * null: empty. At most 4096 entries. */
static int obj_keys(const json_t *o, bool with_values, char ***ret, size_t *n_ret) {
        *ret = NULL;
        *n_ret = 0;
        if (!o || json_is_null(o))
                return 0;
        if (!json_is_object(o) || json_object_size(o) > 4096)
                return -EINVAL;
        size_t n = json_object_size(o), i = 0;
        char **v = calloc(n + 1, sizeof(*v));
        if (!v)
                return -ENOMEM;
        const char *k;
        const json_t *val;
        json_object_foreach((json_t *) o, k, val) {
                const char *s = with_values ? json_string_value(val) : "";
                if (!s) {
                        strv_free(v, i);
                        return -EINVAL;
                }
                size_t kl = strlen(k), sl = strlen(s);
                if (!(v[i] = malloc(kl + sl + 2))) {
                        strv_free(v, i);
                        return -ENOMEM;
                }
                memcpy(v[i], k, kl);
                v[i][kl] = '=';
                memcpy(v[i] + kl + 1, s, sl + 1);
                if (!with_values)
                        v[i][kl] = '\0';
                i++;
        }
        qsort(v, i, sizeof(*v), cmp_str);
        *ret = v;
        *n_ret = i;
        return 0;
}

int img_config_from_json(const json_t *c, struct img_config *cfg) {
        memset(cfg, 0, sizeof(*cfg));
        int r = img_json_strv(json_object_get(c, "Env"), &cfg->env, &cfg->n_env);
        if (r >= 0)
                r = img_json_strv(json_object_get(c, "Entrypoint"), &cfg->entrypoint,
                                  &cfg->n_entrypoint);
        if (r >= 0)
                r = img_json_strv(json_object_get(c, "Cmd"), &cfg->cmd, &cfg->n_cmd);
        const char *wd = json_string_value(json_object_get(c, "WorkingDir"));
        const char *user = json_string_value(json_object_get(c, "User"));
        if (r >= 0 && wd && *wd && !(cfg->working_dir = strdup(wd)))
                r = -ENOMEM;
        if (r >= 0 && user && *user && !(cfg->user = strdup(user)))
                r = -ENOMEM;
        if (r >= 0)
                r = img_json_strv(json_object_get(c, "Shell"), &cfg->shell, &cfg->n_shell);
        const char *sig = json_string_value(json_object_get(c, "StopSignal"));
        if (r >= 0 && sig && *sig && !(cfg->stop_signal = strdup(sig)))
                r = -ENOMEM;
        if (r >= 0)
                r = obj_keys(json_object_get(c, "Labels"), true, &cfg->labels, &cfg->n_labels);
        if (r >= 0)
                r = obj_keys(json_object_get(c, "ExposedPorts"), false, &cfg->exposed_ports,
                             &cfg->n_exposed_ports);
        const json_t *hc = json_object_get(c, "Healthcheck");
        if (r >= 0 && json_is_object(hc)) {
                r = img_json_strv(json_object_get(hc, "Test"), &cfg->hc_test, &cfg->n_hc_test);
                cfg->hc_interval_ns = json_integer_value(json_object_get(hc, "Interval"));
                cfg->hc_timeout_ns = json_integer_value(json_object_get(hc, "Timeout"));
                cfg->hc_start_period_ns = json_integer_value(json_object_get(hc, "StartPeriod"));
                cfg->hc_start_interval_ns =
                        json_integer_value(json_object_get(hc, "StartInterval"));
                json_int_t retries = json_integer_value(json_object_get(hc, "Retries"));
                cfg->hc_retries = retries > 0 && retries < 1000000 ? (int) retries : 0;
        }
        if (r < 0)
                img_config_clear(cfg);
        return r;
}

/* --- manifests and indexes --- */

void img_manifest_free(struct img_manifest *m) {
        if (!m)
                return;
        for (size_t i = 0; m->platforms && i < m->n_platforms; i++) {
                free(m->platforms[i].os);
                free(m->platforms[i].arch);
        }
        free(m->platforms);
        free(m->layers);
        free(m);
}

static bool media_is(const char *mt, const char *want) {
        size_t n = strlen(want);
        return !strncmp(mt, want, n) && (mt[n] == '\0' || mt[n] == ';' || mt[n] == ' ');
}

static bool layer_media_ok(const char *mt) {
        if (!mt)
                return true; /* tolerated: the unpacker detects the compression */
        static const char *const ok[] = {
                "application/vnd.oci.image.layer.v1.tar",
                "application/vnd.oci.image.layer.v1.tar+gzip",
                "application/vnd.oci.image.layer.v1.tar+zstd",
                "application/vnd.docker.image.rootfs.diff.tar.gzip",
                "application/vnd.docker.image.rootfs.diff.tar",
                "application/vnd.oci.image.layer.nondistributable.v1.tar",
                "application/vnd.oci.image.layer.nondistributable.v1.tar+gzip",
                "application/vnd.oci.image.layer.nondistributable.v1.tar+zstd",
                "application/vnd.docker.image.rootfs.foreign.diff.tar.gzip",
        };
        for (size_t i = 0; i < ELEMENTSOF(ok); i++)
                if (!strcmp(mt, ok[i]))
                        return true;
        return false;
}

/* A positive JSON integer, else 0. */
static uint64_t positive_size(const json_t *v) {
        return json_is_integer(v) && json_integer_value(v) > 0 ? (uint64_t) json_integer_value(v)
                                                               : 0;
}

static int parse_index(const json_t *root, struct img_manifest *m, struct wr_err *e) {
        const json_t *ms = json_object_get(root, "manifests");
        size_t n = json_array_size(ms);
        if (n > IMG_INDEX_MAX_ENTRIES)
                return err_setx(e, -EINVAL, WR_STATUS_INVALID_ARGUMENT, WR_FAULT_WORKLOAD,
                                "image index lists more than %d manifests", IMG_INDEX_MAX_ENTRIES);
        m->platforms = calloc(n + 1, sizeof(*m->platforms));
        if (!m->platforms)
                return err_set(e, -ENOMEM, "out of memory");
        for (size_t i = 0; i < n; i++) {
                const json_t *ent = json_array_get(ms, i);
                const json_t *pl = json_object_get(ent, "platform");
                const char *os = json_string_value(json_object_get(pl, "os"));
                const char *arch = json_string_value(json_object_get(pl, "architecture"));
                const char *digest = json_string_value(json_object_get(ent, "digest"));
                if (!os || !arch)
                        continue;
                struct img_manifest_platform *p = &m->platforms[m->n_platforms++];
                p->os = strdup(os);
                p->arch = strdup(arch);
                if (!p->os || !p->arch)
                        return err_set(e, -ENOMEM, "out of memory");
                if (digest && img_digest_valid(digest))
                        snprintf(p->digest, sizeof(p->digest), "%s", digest);
        }
        return 0;
}

static int parse_image(const json_t *root, struct img_manifest *m, struct wr_err *e) {
        const json_t *config = json_object_get(root, "config");
        const json_t *layers = json_object_get(root, "layers");
        const char *cd = json_string_value(json_object_get(config, "digest"));
        size_t n = json_array_size(layers);
        if (!cd || !img_digest_valid(cd) || !json_is_array(layers) || n == 0 ||
            n > IMG_MANIFEST_MAX_LAYERS)
                return err_setx(e, -EINVAL, WR_STATUS_INVALID_ARGUMENT, WR_FAULT_WORKLOAD,
                                "malformed image manifest (want a sha256 config digest and "
                                "1..%d layers)",
                                IMG_MANIFEST_MAX_LAYERS);
        snprintf(m->config_digest, sizeof(m->config_digest), "%s", cd);
        m->config_size = positive_size(json_object_get(config, "size"));
        m->layers = calloc(n, sizeof(*m->layers));
        if (!m->layers)
                return err_set(e, -ENOMEM, "out of memory");
        for (size_t i = 0; i < n; i++) {
                const json_t *lj = json_array_get(layers, i);
                const char *d = json_string_value(json_object_get(lj, "digest"));
                const char *lmt = json_string_value(json_object_get(lj, "mediaType"));
                bool digest_ok = d && img_digest_valid(d);
                if (!digest_ok || !layer_media_ok(lmt) || json_object_get(lj, "urls"))
                        return err_setx(e, -EINVAL, WR_STATUS_INVALID_ARGUMENT, WR_FAULT_WORKLOAD,
                                        "layer %zu: unsupported (media type %.100s%s)", i + 1,
                                        lmt ? lmt : "none", digest_ok ? "" : ", bad digest");
                snprintf(m->layers[i].digest, sizeof(m->layers[i].digest), "%s", d);
                m->layers[i].size = positive_size(json_object_get(lj, "size"));
                m->n_layers = i + 1;
        }
        return 0;
}

int img_manifest_parse(const char *body, size_t len, const char *content_type,
                       struct img_manifest **ret, struct wr_err *e) {
        const char *ct = content_type ? content_type : "";
        _cleanup_json_ json_t *root =
                len <= IMG_MANIFEST_MAX_BODY ? json_loadb(body ? body : "", len, 0, NULL) : NULL;
        if (!json_is_object(root))
                return err_setx(e, -EINVAL, WR_STATUS_INVALID_ARGUMENT, WR_FAULT_WORKLOAD,
                                "the registry sent a manifest that is not JSON (%.100s)", ct);
        const char *mt = json_string_value(json_object_get(root, "mediaType"));
        if (!mt || !*mt)
                mt = ct;
        json_int_t schema = json_integer_value(json_object_get(root, "schemaVersion"));
        if (schema == 1 || media_is(mt, "application/vnd.docker.distribution.manifest.v1"))
                return err_setx(e, -EPROTONOSUPPORT, WR_STATUS_FAILED_PRECONDITION, WR_FAULT_CLIENT,
                                "Docker schema 1 manifests are not supported (re-push the "
                                "image with a current client)");
        bool is_index = media_is(mt, IMG_MT_OCI_INDEX) || media_is(mt, IMG_MT_DOCKER_LIST) ||
                        (!json_object_get(root, "config") &&
                         json_is_array(json_object_get(root, "manifests")));

        _cleanup_(img_manifest_freep) struct img_manifest *m = calloc(1, sizeof(*m));
        if (!m)
                return err_set(e, -ENOMEM, "out of memory");
        m->kind = is_index ? IMG_MANIFEST_INDEX : IMG_MANIFEST_IMAGE;
        int r = is_index ? parse_index(root, m, e) : parse_image(root, m, e);
        if (r < 0)
                return r;
        *ret = TAKE_PTR(m);
        return 0;
}

const struct img_manifest_platform *img_manifest_select(const struct img_manifest *m,
                                                        const char *os, const char *arch,
                                                        char *seen, size_t seensz) {
        if (seen && seensz)
                seen[0] = '\0';
        for (size_t i = 0; i < m->n_platforms; i++) {
                const struct img_manifest_platform *p = &m->platforms[i];
                if (!strcmp(p->os, os) && !strcmp(p->arch, arch) && p->digest[0])
                        return p;
                if (!seen || !seensz)
                        continue;
                size_t sl = strlen(seen);
                if (sl + strlen(p->os) + strlen(p->arch) + 4 < seensz)
                        snprintf(seen + sl, seensz - sl, "%s%s/%s", sl ? ", " : "", p->os, p->arch);
        }
        return NULL;
}

/* --- image configs --- */

void img_image_config_free(struct img_image_config *c) {
        if (!c)
                return;
        strv_free(c->diff_ids, c->n_diff_ids);
        img_config_clear(&c->config);
        free(c);
}

int img_config_parse(const char *body, size_t len, size_t expect_layers,
                     struct img_image_config **ret, struct wr_err *e) {
        _cleanup_json_ json_t *root =
                len <= IMG_CONFIG_MAX_BODY ? json_loadb(body ? body : "", len, 0, NULL) : NULL;
        if (!json_is_object(root))
                return err_setx(e, -EINVAL, WR_STATUS_INVALID_ARGUMENT, WR_FAULT_WORKLOAD,
                                "image config is not a JSON object");
        const json_t *ids = json_object_get(json_object_get(root, "rootfs"), "diff_ids");
        size_t n = json_array_size(ids);
        if (!json_is_array(ids) || (expect_layers && n != expect_layers))
                return err_setx(e, -EINVAL, WR_STATUS_INVALID_ARGUMENT, WR_FAULT_WORKLOAD,
                                "image config lists %zu diff ids for %zu layers", n, expect_layers);
        if (n > IMG_MANIFEST_MAX_LAYERS)
                return err_setx(e, -EINVAL, WR_STATUS_INVALID_ARGUMENT, WR_FAULT_WORKLOAD,
                                "image config lists more than %d diff ids",
                                IMG_MANIFEST_MAX_LAYERS);

        _cleanup_(img_image_config_freep) struct img_image_config *c = calloc(1, sizeof(*c));
        if (!c || !(c->diff_ids = calloc(n + 1, sizeof(char *))))
                return err_set(e, -ENOMEM, "out of memory");
        for (size_t i = 0; i < n; i++) {
                const char *d = json_string_value(json_array_get(ids, i));
                if (!d || !img_digest_valid(d))
                        return err_setx(e, -EINVAL, WR_STATUS_INVALID_ARGUMENT, WR_FAULT_WORKLOAD,
                                        "image config: malformed diff id %zu", i);
                if (!(c->diff_ids[i] = strdup(d)))
                        return err_set(e, -ENOMEM, "out of memory");
                c->n_diff_ids = i + 1;
        }
        const json_t *cj = json_object_get(root, "config");
        if (cj && !json_is_null(cj)) {
                if (!json_is_object(cj))
                        return err_setx(e, -EINVAL, WR_STATUS_INVALID_ARGUMENT, WR_FAULT_WORKLOAD,
                                        "image config: \"config\" is not an object");
                int r = img_config_from_json(cj, &c->config);
                if (r == -ENOMEM)
                        return err_set(e, r, "out of memory");
                if (r < 0)
                        return err_setx(e, r, WR_STATUS_INVALID_ARGUMENT, WR_FAULT_WORKLOAD,
                                        "image config: Env, Entrypoint and Cmd must be string "
                                        "arrays");
        }
        *ret = TAKE_PTR(c);
        return 0;
}
