/* SPDX-License-Identifier: Apache-2.0 */
/* The image store: opening and garbage collection, names, canonical
 * configs, resolve/list/delete and committing images over stored layers. */
#include "image/image-internal.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "image/json-internal.h"
#include "image/manifest.h"
#include "store/images.h"

#ifndef WARREN_LIBEXECDIR
#define WARREN_LIBEXECDIR "/usr/libexec/warren"
#endif

#if defined(__x86_64__)
#define IMG_ARCH "amd64"
#elif defined(__aarch64__)
#define IMG_ARCH "arm64"
#else
#define IMG_ARCH "unknown"
#endif

static int open_dir_at(int dfd, const char *name, int *ret) {
        if (mkdirat(dfd, name, 0700) < 0 && errno != EEXIST)
                return -errno;
        int fd = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0)
                return -errno;
        *ret = fd;
        return 0;
}

static void find_helper(struct img_store *s) {
        const char *env = getenv("WARREN_UNPACK_HELPER");
        if (env && *env) {
                s->helper = strdup(env);
                return;
        }
        char exe[PATH_MAX];
        ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
        if (n > 0) {
                exe[n] = '\0';
                char *slash = strrchr(exe, '/');
                if (slash) {
                        *slash = '\0';
                        static const char *const rel[] = {
                                "warren-unpack",
                                "../image/warren-unpack",        /* build/src/daemon */
                                "../../src/image/warren-unpack", /* build/tests/unit */
                                "../src/image/warren-unpack",
                        };
                        for (size_t i = 0; i < ELEMENTSOF(rel); i++) {
                                char cand[PATH_MAX + 64];
                                snprintf(cand, sizeof(cand), "%s/%s", exe, rel[i]);
                                if (access(cand, X_OK) == 0) {
                                        s->helper = realpath(cand, NULL);
                                        if (s->helper)
                                                return;
                                }
                        }
                }
        }
        s->helper = strdup(WARREN_LIBEXECDIR "/warren-unpack");
}

/* Empty dfd (layers/tmp: through img_layer_tmp_remove, s given). */
static int clear_dir(struct img_store *s, int dfd) {
        DIR *d = fdopendir(fcntl(dfd, F_DUPFD_CLOEXEC, 3));
        if (!d)
                return -errno;
        struct dirent *de;
        int r = 0;
        while ((de = readdir(d))) {
                if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
                        continue;
                int q = s ? img_layer_tmp_remove(s, de->d_name) : rm_rf_at(dfd, de->d_name);
                if (q < 0 && r == 0)
                        r = q;
        }
        closedir(d);
        return r;
}

/* ops.remove (when set) of layers/tmp/<name> or layers/sha256/<name>:
 * its answer, or -EOPNOTSUPP when the store does it itself (no ops, or a
 * name the ops do not take: not one the store made). */
static int ops_remove(struct img_store *s, bool tmp, const char *name, struct wr_err *e) {
        if (!s->ops.remove)
                return -EOPNOTSUPP;
        struct wr_err oe = {0};
        int r = s->ops.remove(s->ops.userdata, tmp, name, &oe);
        if (r == -EINVAL)
                return -EOPNOTSUPP;
        if (r < 0 && e)
                *e = oe;
        return r;
}

int img_layer_tmp_remove(struct img_store *s, const char *name) {
        int r = ops_remove(s, true, name, NULL);
        if (r == -EOPNOTSUPP)
                return rm_rf_at(s->layers_tmp_fd, name);
        return r < 0 ? r : 0;
}

/* Remove layers/sha256/<name>: renamed into layers/tmp first (a
 * half-removed layer is never visible), then removed. 0 (also when it
 * was not there) or -errno with e. */
static int layer_dir_remove(struct img_store *s, const char *name, struct wr_err *e) {
        int r = ops_remove(s, false, name, e);
        if (r != -EOPNOTSUPP)
                return r < 0 ? err_prefix(e, r, "remove layer %s", name) : 0;
        char tmp[32] = "del-";
        img_random_name(tmp + 4);
        if (renameat(s->layers_fd, name, s->layers_tmp_fd, tmp) < 0) {
                if (errno == ENOENT)
                        return 0;
                return err_set(e, -errno, "remove layer %s: %m", name);
        }
        r = rm_rf_at(s->layers_tmp_fd, tmp);
        if (r < 0)
                return err_set(e, r, "remove layer %s: %s", name, strerror(-r));
        return 0;
}

/* Start-up garbage collection (see img_store_open). */
static int gc(struct img_store *s, struct wr_err *e) {
        int r = clear_dir(s, s->layers_tmp_fd);
        if (r >= 0)
                r = clear_dir(NULL, s->tmp_fd);
        if (r < 0)
                return err_set(e, r, "clean temporary directories: %s", strerror(-r));

        struct store_layer *layers = NULL;
        size_t n = 0;
        r = store_layer_list(s->db, &layers, &n, e);
        if (r < 0)
                return err_prefix(e, r, "list layers");
        for (size_t i = 0; i < n; i++) {
                if (store_layer_refcount(s->db, layers[i].diff_id, NULL) == 0)
                        (void) img_layer_remove_unused(s, layers[i].diff_id, NULL);
        }
        /* directories no row knows: an import that crashed between the
         * rename and the transaction */
        DIR *d = fdopendir(fcntl(s->layers_fd, F_DUPFD_CLOEXEC, 3));
        if (d) {
                struct dirent *de;
                while ((de = readdir(d))) {
                        if (de->d_name[0] == '.')
                                continue;
                        char digest[IMG_DIGEST_MAX];
                        snprintf(digest, sizeof(digest), "sha256:%s", de->d_name);
                        bool known = false;
                        for (size_t i = 0; i < n; i++)
                                if (strcmp(layers[i].diff_id, digest) == 0 &&
                                    store_layer_refcount(s->db, digest, NULL) > 0)
                                        known = true;
                        if (!known)
                                (void) layer_dir_remove(s, de->d_name, NULL);
                }
                closedir(d);
        }
        store_layer_list_free(layers, n);
        return 0;
}

int img_store_open(const char *state_dir, struct store *db, struct img_store **ret,
                   struct wr_err *e) {
        return img_store_open_ops(state_dir, db, NULL, ret, e);
}

int img_store_open_ops(const char *state_dir, struct store *db, const struct img_layer_ops *ops,
                       struct img_store **ret, struct wr_err *e) {
        if (!state_dir || state_dir[0] != '/' || !db)
                return err_set(e, -EINVAL, "open image store: absolute state dir and db required");
        _cleanup_(img_store_freep) struct img_store *s = calloc(1, sizeof(*s));
        if (!s)
                return err_set(e, -ENOMEM, "open image store: out of memory");
        s->layers_fd = s->layers_tmp_fd = s->tmp_fd = -EBADF;
        s->db = db;
        if (ops)
                s->ops = *ops;
        s->state_dir = strdup(state_dir);
        int r = s->state_dir ? 0 : -ENOMEM;
        _cleanup_close_ int state_fd = -EBADF, layers_root = -EBADF;
        if (r == 0)
                r = img_mkdir_p(state_dir, 0700);
        if (r == 0) {
                state_fd = open(state_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
                if (state_fd < 0)
                        r = -errno;
        }
        if (r == 0)
                r = open_dir_at(state_fd, "layers", &layers_root);
        if (r == 0)
                r = open_dir_at(layers_root, "sha256", &s->layers_fd);
        if (r == 0)
                r = open_dir_at(layers_root, "tmp", &s->layers_tmp_fd);
        if (r == 0)
                r = open_dir_at(state_fd, "tmp", &s->tmp_fd);
        if (r < 0)
                return err_set(e, r, "open image store in %s: %s", state_dir, strerror(-r));
        find_helper(s);
        if (!s->helper)
                return err_set(e, -ENOMEM, "open image store: out of memory");
        r = gc(s, e);
        if (r < 0)
                return err_prefix(e, r, "open image store");
        *ret = TAKE_PTR(s);
        return 0;
}

void img_store_free(struct img_store *s) {
        if (!s)
                return;
        closep(&s->layers_fd);
        closep(&s->layers_tmp_fd);
        closep(&s->tmp_fd);
        if (s->pull && s->pull_free)
                s->pull_free(s->pull);
        free(s->state_dir);
        free(s->helper);
        free(s);
}

int img_store_set_helper(struct img_store *s, const char *path) {
        char *p = strdup(path);
        if (!p)
                return -ENOMEM;
        free(s->helper);
        s->helper = p;
        return 0;
}

const char *img_store_helper(struct img_store *s) {
        return s->helper;
}

void img_store_set_unpack_start(struct img_store *s, img_unpack_start_fn fn, void *userdata) {
        s->unpack_start = fn;
        s->unpack_start_ud = userdata;
}

void img_store_set_in_use(struct img_store *s, img_in_use_fn fn, void *userdata) {
        s->in_use = fn;
        s->in_use_ud = userdata;
}

/* --- names --- */

static bool repo_char(char c, bool host) {
        if ((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '-')
                return true;
        return host && ((c >= 'A' && c <= 'Z') || c == ':');
}

static bool is_sep(char c) {
        return c == '.' || c == '_' || c == '-';
}

int img_name_normalize(const char *name, char *out, size_t outsz, struct wr_err *e) {
        if (!name || !*name)
                return err_setx(e, -EINVAL, WR_STATUS_INVALID_ARGUMENT, WR_FAULT_CLIENT,
                                "image name is empty");
        size_t len = strlen(name);
        if (len > 255 + 129)
                return err_setx(e, -EINVAL, WR_STATUS_INVALID_ARGUMENT, WR_FAULT_CLIENT,
                                "image name is too long");
        if (strchr(name, '@'))
                return err_setx(e, -EINVAL, WR_STATUS_INVALID_ARGUMENT, WR_FAULT_CLIENT,
                                "image name \"%.64s\": digest references cannot name an image",
                                name);
        const char *last_slash = strrchr(name, '/');
        const char *colon = strrchr(last_slash ? last_slash : name, ':');
        size_t repo_len = colon ? (size_t) (colon - name) : len;
        const char *tag = colon ? colon + 1 : "latest";
        size_t tag_len = strlen(tag);

        bool ok = repo_len > 0 && repo_len <= 255 && tag_len > 0 && tag_len <= 128;
        /* repo: components split by '/', each starting and ending with an
         * alphanumeric; the first may be a registry host[:port] */
        size_t start = 0;
        bool first = true;
        for (size_t i = 0; ok && i <= repo_len; i++) {
                if (i == repo_len || name[i] == '/') {
                        size_t clen = i - start;
                        bool host = first && i < repo_len; /* only when more follows */
                        if (clen == 0 || is_sep(name[start]) || is_sep(name[i - 1]))
                                ok = false;
                        for (size_t j = start; ok && j < i; j++)
                                if (!repo_char(name[j], host))
                                        ok = false;
                        start = i + 1;
                        first = false;
                }
        }
        for (size_t i = 0; ok && i < tag_len; i++) {
                char c = tag[i];
                if (!(isalnum((unsigned char) c) || c == '_' || c == '.' || c == '-') ||
                    (i == 0 && (c == '.' || c == '-')))
                        ok = false;
        }
        if (!ok)
                return err_setx(e, -EINVAL, WR_STATUS_INVALID_ARGUMENT, WR_FAULT_CLIENT,
                                "invalid image name \"%.64s\" (want repo[:tag], lower-case "
                                "[a-z0-9._/-], tag [A-Za-z0-9_.-])",
                                name);
        if (repo_len + 1 + tag_len + 1 > outsz)
                return err_setx(e, -EINVAL, WR_STATUS_INVALID_ARGUMENT, WR_FAULT_CLIENT,
                                "image name is too long");
        snprintf(out, outsz, "%.*s:%s", (int) repo_len, name, tag);
        return 0;
}

/* --- configs --- */

static json_t *strv_json(char *const *v, size_t n) {
        _cleanup_json_ json_t *a = json_array();
        for (size_t i = 0; a && i < n; i++)
                if (json_array_append_new(a, json_string(v[i] ? v[i] : "")) < 0)
                        return NULL; /* json_array_append_new takes (and frees) the string */
        return TAKE_PTR(a);
}

int img_config_encode(const struct img_config *cfg, char *const *diff_ids, size_t n_layers,
                      char **ret_json, char *ret_id, struct wr_err *e) {
        static const struct img_config empty = {0};
        if (!cfg)
                cfg = &empty;
        _cleanup_json_ json_t *root = json_object(), *c = json_object(), *rootfs = json_object();
        _cleanup_json_ json_t *ids = strv_json(diff_ids, n_layers);
        bool bad = !root || !c || !rootfs || !ids;
        if (!bad && cfg->n_env) {
                json_t *v = strv_json(cfg->env, cfg->n_env);
                bad = !v || json_object_set_new(c, "Env", v) < 0;
        }
        if (!bad && cfg->n_entrypoint) {
                json_t *v = strv_json(cfg->entrypoint, cfg->n_entrypoint);
                bad = !v || json_object_set_new(c, "Entrypoint", v) < 0;
        }
        if (!bad && cfg->n_cmd) {
                json_t *v = strv_json(cfg->cmd, cfg->n_cmd);
                bad = !v || json_object_set_new(c, "Cmd", v) < 0;
        }
        if (!bad && cfg->working_dir && *cfg->working_dir) {
                json_t *v = json_string(cfg->working_dir);
                bad = !v || json_object_set_new(c, "WorkingDir", v) < 0;
        }
        if (!bad && cfg->user && *cfg->user) {
                json_t *v = json_string(cfg->user);
                bad = !v || json_object_set_new(c, "User", v) < 0;
        }
        if (!bad && cfg->n_shell) {
                json_t *v = strv_json(cfg->shell, cfg->n_shell);
                bad = !v || json_object_set_new(c, "Shell", v) < 0;
        }
        if (!bad && cfg->stop_signal && *cfg->stop_signal) {
                json_t *v = json_string(cfg->stop_signal);
                bad = !v || json_object_set_new(c, "StopSignal", v) < 0;
        }
        if (!bad && (cfg->n_labels || cfg->n_exposed_ports)) {
                json_t *labels = cfg->n_labels ? json_object() : NULL;
                json_t *ports = cfg->n_exposed_ports ? json_object() : NULL;
                for (size_t i = 0; !bad && labels && i < cfg->n_labels; i++) {
                        const char *eq = strchr(cfg->labels[i], '=');
                        _cleanup_free_ char *k =
                                strndup(cfg->labels[i], eq ? (size_t) (eq - cfg->labels[i])
                                                           : strlen(cfg->labels[i]));
                        bad = !k ||
                              json_object_set_new(labels, k, json_string(eq ? eq + 1 : "")) < 0;
                }
                for (size_t i = 0; !bad && ports && i < cfg->n_exposed_ports; i++)
                        bad = json_object_set_new(ports, cfg->exposed_ports[i], json_object()) < 0;
                if (!bad && labels)
                        bad = json_object_set(c, "Labels", labels) < 0;
                if (!bad && ports)
                        bad = json_object_set(c, "ExposedPorts", ports) < 0;
                json_decref(labels);
                json_decref(ports);
                bad = bad || (cfg->n_labels && !labels) || (cfg->n_exposed_ports && !ports);
        }
        if (!bad && cfg->n_hc_test) {
                json_t *hc = json_object(), *t = strv_json(cfg->hc_test, cfg->n_hc_test);
                bad = !hc || !t || json_object_set_new(hc, "Test", t) < 0;
                if (!hc && t)
                        json_decref(t);
                struct {
                        const char *k;
                        int64_t v;
                } nums[] = {{"Interval", cfg->hc_interval_ns},
                            {"Timeout", cfg->hc_timeout_ns},
                            {"StartPeriod", cfg->hc_start_period_ns},
                            {"StartInterval", cfg->hc_start_interval_ns},
                            {"Retries", cfg->hc_retries}};
                for (size_t i = 0; !bad && i < ELEMENTSOF(nums); i++)
                        if (nums[i].v)
                                bad = json_object_set_new(hc, nums[i].k, json_integer(nums[i].v)) <
                                      0;
                if (!bad)
                        bad = json_object_set(c, "Healthcheck", hc) < 0;
                json_decref(hc);
        }
        if (!bad)
                bad = json_object_set_new(rootfs, "type", json_string("layers")) < 0 ||
                      json_object_set(rootfs, "diff_ids", ids) < 0 ||
                      json_object_set(root, "rootfs", rootfs) < 0 ||
                      json_object_set(root, "config", c) < 0 ||
                      json_object_set_new(root, "architecture", json_string(IMG_ARCH)) < 0 ||
                      json_object_set_new(root, "os", json_string("linux")) < 0;
        _cleanup_free_ char *out = bad ? NULL : json_dumps(root, JSON_COMPACT | JSON_SORT_KEYS);
        if (!out)
                /* jansson refuses strings that are not valid UTF-8 */
                return err_setx(e, -EINVAL, WR_STATUS_INVALID_ARGUMENT, WR_FAULT_CLIENT,
                                "image config: strings must be valid UTF-8");
        unsigned char md[32];
        unsigned mdlen = 0;
        if (EVP_Digest(out, strlen(out), md, &mdlen, EVP_sha256(), NULL) != 1)
                return err_set(e, -EIO, "image config: sha256 failed");
        strcpy(ret_id, "sha256:");
        for (int i = 0; i < 32; i++)
                snprintf(ret_id + 7 + 2 * i, 3, "%02x", md[i]);
        *ret_json = TAKE_PTR(out);
        return 0;
}

/* --- info --- */

void img_info_free(struct img_info *info) {
        if (!info)
                return;
        free(info->id);
        for (size_t i = 0; i < info->n_names; i++)
                free(info->names[i]);
        free(info->names);
        for (size_t i = 0; i < info->n_layers; i++) {
                free(info->diff_ids ? info->diff_ids[i] : NULL);
                free(info->layer_dirs ? info->layer_dirs[i] : NULL);
        }
        free(info->diff_ids);
        free(info->layer_dirs);
        free(info->source);
        img_config_clear(&info->config);
        free(info);
}

void img_info_list_free(struct img_info **list, size_t n) {
        for (size_t i = 0; list && i < n; i++)
                img_info_free(list[i]);
        free(list);
}

/* Build an img_info from a store row, taking its strings. */
static int info_from_row(struct img_store *s, struct store_image *row, struct img_info **ret,
                         struct wr_err *e) {
        _cleanup_(img_info_freep) struct img_info *info = calloc(1, sizeof(*info));
        if (!info)
                return err_set(e, -ENOMEM, "out of memory");
        info->id = TAKE_PTR(row->id);
        info->names = TAKE_PTR(row->names);
        info->n_names = row->n_names;
        row->n_names = 0;
        info->diff_ids = TAKE_PTR(row->diff_ids);
        info->n_layers = row->n_layers;
        row->n_layers = 0;
        info->size = row->size;
        info->created_ns = row->created_ns;
        info->source = TAKE_PTR(row->source);
        int r = img_config_decode(row->config, &info->config, e);
        info->layer_dirs = calloc(info->n_layers + 1, sizeof(char *));
        if (r >= 0 && !info->layer_dirs)
                r = err_set(e, -ENOMEM, "out of memory");
        for (size_t i = 0; r >= 0 && i < info->n_layers; i++) {
                const char *d = info->diff_ids[info->n_layers - 1 - i]; /* top first */
                if (asprintf(&info->layer_dirs[i], "%s/layers/sha256/%s", s->state_dir,
                             strncmp(d, "sha256:", 7) == 0 ? d + 7 : d) < 0) {
                        info->layer_dirs[i] = NULL;
                        r = err_set(e, -ENOMEM, "out of memory");
                }
        }
        if (r < 0)
                return r;
        *ret = TAKE_PTR(info);
        return 0;
}

static bool all_hex(const char *s) {
        if (!*s)
                return false;
        for (; *s; s++)
                if (!((*s >= '0' && *s <= '9') || (*s >= 'a' && *s <= 'f')))
                        return false;
        return true;
}

/* Resolve to an id. *by_name tells whether a name matched. */
static int resolve_id(struct img_store *s, const char *ref, char **ret, bool *by_name,
                      struct wr_err *e) {
        *by_name = false;
        if (!ref || !*ref)
                return err_setx(e, -EINVAL, WR_STATUS_INVALID_ARGUMENT, WR_FAULT_CLIENT,
                                "image name or id required");
        const char *hex = strncmp(ref, "sha256:", 7) == 0 ? ref + 7 : NULL;
        if (!hex) {
                char norm[400];
                struct wr_err ne = {0};
                if (img_name_normalize(ref, norm, sizeof(norm), &ne) >= 0) {
                        int r = store_image_name_lookup(s->db, norm, ret, NULL);
                        if (r >= 0) {
                                *by_name = true;
                                return 0;
                        }
                        if (r != -ENOENT)
                                return err_set(e, r, "look up image \"%s\"", norm);
                }
                if (!all_hex(ref) || strlen(ref) < 12) {
                        if (ne.code)
                                return err_setx(e, -EINVAL, WR_STATUS_INVALID_ARGUMENT,
                                                WR_FAULT_CLIENT, "%s", ne.msg);
                        return err_setx(e, -ENOENT, WR_STATUS_NOT_FOUND, WR_FAULT_CLIENT,
                                        "image \"%.200s\" not found", ref);
                }
                hex = ref;
        }
        if (!all_hex(hex) || strlen(hex) > 64 || strlen(hex) < 12)
                return err_setx(e, -EINVAL, WR_STATUS_INVALID_ARGUMENT, WR_FAULT_CLIENT,
                                "malformed image id \"%.80s\"", ref);
        char prefix[IMG_DIGEST_MAX];
        snprintf(prefix, sizeof(prefix), "sha256:%s", hex);
        int n = store_image_id_prefix(s->db, prefix, ret, e);
        if (n < 0)
                return n;
        if (n == 0)
                return err_setx(e, -ENOENT, WR_STATUS_NOT_FOUND, WR_FAULT_CLIENT,
                                "image \"%.80s\" not found", ref);
        if (n > 1)
                return err_setx(e, -EINVAL, WR_STATUS_INVALID_ARGUMENT, WR_FAULT_CLIENT,
                                "image id prefix \"%.80s\" is ambiguous", ref);
        return 0;
}

/* Resolve name_or_id and load its row into *row (zeroed first; the
 * caller clears it). *by_name tells whether a name matched. */
static int load_row(struct img_store *s, const char *name_or_id, struct store_image *row,
                    bool *by_name, struct wr_err *e) {
        memset(row, 0, sizeof(*row));
        _cleanup_free_ char *id = NULL;
        int r = resolve_id(s, name_or_id, &id, by_name, e);
        if (r < 0)
                return r;
        r = store_image_load(s->db, id, row, e);
        if (r == -ENOENT)
                return err_setx(e, r, WR_STATUS_NOT_FOUND, WR_FAULT_CLIENT, "image %s not found",
                                id);
        return r;
}

int img_store_resolve(struct img_store *s, const char *name_or_id, struct img_info **ret,
                      struct wr_err *e) {
        _cleanup_(store_image_clear) struct store_image row = {0};
        bool by_name;
        int r = load_row(s, name_or_id, &row, &by_name, e);
        if (r < 0)
                return r;
        return info_from_row(s, &row, ret, e);
}

int img_store_list(struct img_store *s, struct img_info ***ret, size_t *n_ret, struct wr_err *e) {
        *ret = NULL;
        *n_ret = 0;
        struct store_image *rows = NULL;
        size_t n = 0;
        int r = store_image_list(s->db, &rows, &n, e);
        if (r < 0)
                return r;
        struct img_info **v = calloc(n + 1, sizeof(*v));
        if (!v) {
                store_image_list_free(rows, n);
                return err_set(e, -ENOMEM, "list images: out of memory");
        }
        for (size_t i = 0; i < n; i++) {
                r = info_from_row(s, &rows[i], &v[i], e);
                if (r < 0) {
                        img_info_list_free(v, i);
                        store_image_list_free(rows, n);
                        return r;
                }
        }
        store_image_list_free(rows, n);
        *ret = v;
        *n_ret = n;
        return (int) n;
}

int img_layer_remove_unused(struct img_store *s, const char *diff_id, struct wr_err *e) {
        if (!img_digest_valid(diff_id))
                return err_set(e, -EINVAL, "malformed layer digest");
        int r = store_layer_delete(s->db, diff_id, e);
        if (r < 0 && r != -ENOENT)
                return r;
        return layer_dir_remove(s, diff_id + 7, e);
}

int img_store_delete(struct img_store *s, const char *name_or_id, struct wr_err *e) {
        _cleanup_(store_image_clear) struct store_image row = {0};
        bool by_name;
        int r = load_row(s, name_or_id, &row, &by_name, e);
        if (r < 0)
                return r;
        if (by_name && row.n_names > 1) {
                char norm[400];
                r = img_name_normalize(name_or_id, norm, sizeof(norm), e);
                return r < 0 ? r : store_image_name_delete(s->db, norm, e);
        }
        if (s->in_use && s->in_use(row.id, s->in_use_ud))
                return err_setx(e, -EBUSY, WR_STATUS_FAILED_PRECONDITION, WR_FAULT_CLIENT,
                                "image %s is used by a sandbox", row.id);
        r = store_tx_begin(s->db, e);
        if (r >= 0)
                r = store_image_delete(s->db, row.id, e);
        if (r >= 0)
                r = store_tx_commit(s->db, e);
        if (r < 0) {
                store_tx_rollback(s->db);
                return err_prefix(e, r, "delete image");
        }
        /* layers nobody else uses go too; failures here leave an orphan
         * that the next start-up collects */
        for (size_t i = 0; i < row.n_layers; i++)
                if (store_layer_refcount(s->db, row.diff_ids[i], NULL) == 0)
                        (void) img_layer_remove_unused(s, row.diff_ids[i], NULL);
        return 0;
}

int img_layer_path(struct img_store *s, const char *diff_id, char *out, size_t outsz,
                   struct wr_err *e) {
        if (!img_digest_valid(diff_id))
                return err_set(e, -EINVAL, "malformed layer digest");
        struct store_layer l;
        int r = store_layer_load(s->db, diff_id, &l, e);
        if (r < 0)
                return r;
        store_layer_clear(&l);
        if ((size_t) snprintf(out, outsz, "%s/layers/sha256/%s", s->state_dir, diff_id + 7) >=
            outsz)
                return err_set(e, -ENAMETOOLONG, "layer path too long");
        return 0;
}

int img_store_commit_image(struct img_store *s, const char *name, const struct img_config *cfg,
                           char *const *diff_ids, size_t n_layers, const char *source,
                           struct img_info **ret, struct wr_err *e) {
        char norm[400] = "";
        int r;
        if (name && *name && (r = img_name_normalize(name, norm, sizeof(norm), e)) < 0)
                return r;
        if (n_layers == 0)
                return err_setx(e, -EINVAL, WR_STATUS_INVALID_ARGUMENT, WR_FAULT_CLIENT,
                                "an image needs at least one layer");
        uint64_t size = 0;
        for (size_t i = 0; i < n_layers; i++) {
                if (!img_digest_valid(diff_ids[i]))
                        return err_set(e, -EINVAL, "malformed layer digest");
                struct store_layer l;
                r = store_layer_load(s->db, diff_ids[i], &l, e);
                if (r < 0)
                        return r;
                size += l.size;
                store_layer_clear(&l);
                /* O_PATH: the layer's top dir has the tar's mode and owner */
                int fd = openat(s->layers_fd, diff_ids[i] + 7,
                                O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                if (fd < 0)
                        return err_set(e, -errno, "open layer %s: %m", diff_ids[i]);
                int ssh = img_rootfs_root_ssh(fd);
                fd = safe_close(fd);
                /* a tree this process cannot look into (a dropped warrend):
                 * ops.commit checked it as it stored the layer */
                if (ssh == -EACCES && s->ops.commit)
                        ssh = 0;
                if (ssh)
                        return err_setx(e, -EPERM, WR_STATUS_FAILED_PRECONDITION, WR_FAULT_CLIENT,
                                        "the image contains /root/.ssh (layer %.19s...): "
                                        "images containing /root/.ssh are refused",
                                        diff_ids[i]);
        }
        _cleanup_free_ char *json = NULL;
        char id[IMG_DIGEST_MAX];
        r = img_config_encode(cfg, diff_ids, n_layers, &json, id, e);
        if (r < 0)
                return r;

        r = store_tx_begin(s->db, e);
        if (r < 0)
                return r;
        struct store_image row = {
                .id = id,
                .config = json,
                .size = size,
                .created_ns = store_now_ns(),
                .source = (char *) (source ? source : "import"),
                .diff_ids = (char **) diff_ids,
                .n_layers = n_layers,
        };
        r = store_image_insert(s->db, &row, e);
        if (r == -EEXIST) {
                err_clear(e);
                r = 0; /* identical content and config: the same image */
        }
        if (r >= 0 && norm[0])
                r = store_image_name_set(s->db, norm, id, e);
        if (r >= 0)
                r = store_tx_commit(s->db, e);
        if (r < 0) {
                store_tx_rollback(s->db);
                return err_prefix(e, r, "commit image");
        }
        if (ret)
                return img_store_resolve(s, id, ret, e);
        return 0;
}

int img_store_commit_on(struct img_store *s, const char *name, const struct img_info *base,
                        const struct img_config *cfg, const char *diff_id, const char *source,
                        struct img_info **ret, struct wr_err *e) {
        char **ids = calloc(base->n_layers + 1, sizeof(*ids));
        if (!ids)
                return err_set(e, -ENOMEM, "out of memory");
        for (size_t i = 0; i < base->n_layers; i++)
                ids[i] = base->diff_ids[i];
        ids[base->n_layers] = (char *) diff_id;
        int r = img_store_commit_image(s, name, cfg ? cfg : &base->config, ids, base->n_layers + 1,
                                       source, ret, e);
        free(ids);
        return r;
}
