/* SPDX-License-Identifier: Apache-2.0 */
/* The Pod a sandbox becomes, and what the Kubernetes API says about it
 * (pure: see pod.h). */
#include "k8s/pod.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>
#include <openssl/evp.h>

#include "basic/macro.h"

static bool label_char(char c) {
        return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
               c == '-' || c == '_' || c == '.';
}

static bool alnum(char c) {
        return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
}

bool k8s_label_value_valid(const char *s) {
        size_t n = strlen(s);
        if (n == 0)
                return true;
        if (n > 63 || !alnum(s[0]) || !alnum(s[n - 1]))
                return false;
        for (size_t i = 0; i < n; i++)
                if (!label_char(s[i]))
                        return false;
        return true;
}

/* A label key "tag.warren.dev/NAME": NAME must be a valid label name
 * (same rules as a value, not empty). */
static bool tag_label_ok(const char *k, const char *v) {
        return *k && k8s_label_value_valid(k) && k8s_label_value_valid(v);
}

static int set_str(json_t *o, const char *k, const char *v) {
        return json_object_set_new(o, k, json_string(v));
}

/* "1500m"-style quantities: millicores as "Nm", bytes as a plain number. */
static json_t *resources(const struct k8s_pod_params *p) {
        json_t *r = json_object(), *req = json_object(), *lim = json_object();
        if (!r || !req || !lim) {
                json_decref(r);
                json_decref(req);
                json_decref(lim);
                return NULL;
        }
        char b[32];
        if (p->cpu_millicores) {
                snprintf(b, sizeof(b), "%llum", (unsigned long long) p->cpu_millicores);
                set_str(req, "cpu", b);
                set_str(lim, "cpu", b);
        }
        if (p->memory_bytes) {
                snprintf(b, sizeof(b), "%llu", (unsigned long long) p->memory_bytes);
                set_str(req, "memory", b);
                set_str(lim, "memory", b);
        }
        if (p->disk_bytes) {
                snprintf(b, sizeof(b), "%llu", (unsigned long long) p->disk_bytes);
                set_str(req, "ephemeral-storage", b);
                set_str(lim, "ephemeral-storage", b);
        }
        json_object_set_new(r, "requests", req);
        json_object_set_new(r, "limits", lim);
        return r;
}

char *k8s_pod_json(const struct k8s_pod_params *p) {
        if (!p || !p->pod_name || !p->sandbox_id || !p->image || !p->init_image)
                return NULL;
        json_t *pod = json_object(), *meta = json_object(), *labels = json_object(),
               *ann = json_object(), *spec = json_object();
        json_t *main_c = json_object(), *init_c = json_object(), *env = json_array();
        if (!pod || !meta || !labels || !ann || !spec || !main_c || !init_c || !env) {
                json_decref(pod);
                json_decref(meta);
                json_decref(labels);
                json_decref(ann);
                json_decref(spec);
                json_decref(main_c);
                json_decref(init_c);
                json_decref(env);
                return NULL;
        }
        set_str(pod, "apiVersion", "v1");
        set_str(pod, "kind", "Pod");
        set_str(meta, "name", p->pod_name);
        set_str(labels, K8S_LABEL_MANAGED, "true");
        set_str(labels, K8S_LABEL_SANDBOX, p->sandbox_id);
        if (p->owner)
                set_str(labels, K8S_LABEL_OWNER, p->owner);
        if (p->environment && k8s_label_value_valid(p->environment))
                set_str(labels, K8S_LABEL_ENV, p->environment);
        if (p->environment)
                set_str(ann, K8S_LABEL_ENV, p->environment);
        if (p->sandbox_name)
                set_str(ann, "warren.dev/name", p->sandbox_name);
        for (size_t i = 0; i < p->n_tags; i++) {
                char k[300];
                snprintf(k, sizeof(k), K8S_LABEL_TAG_PREFIX "%s", p->tags[i].key);
                if (tag_label_ok(p->tags[i].key, p->tags[i].value))
                        set_str(labels, k, p->tags[i].value);
                set_str(ann, k, p->tags[i].value);
        }
        json_object_set_new(meta, "labels", labels);
        json_object_set_new(meta, "annotations", ann);
        json_object_set_new(pod, "metadata", meta);

        set_str(spec, "restartPolicy", "Never");
        json_object_set_new(spec, "automountServiceAccountToken", json_false());
        json_object_set_new(spec, "enableServiceLinks", json_false());
        json_object_set_new(spec, "terminationGracePeriodSeconds", json_integer(10));
        if (p->lifetime_s > 0)
                json_object_set_new(spec, "activeDeadlineSeconds", json_integer(p->lifetime_s));
        if (p->hostname && *p->hostname)
                set_str(spec, "hostname", p->hostname);
        json_object_set_new(spec, "volumes",
                            json_pack("[{s:s, s:{}}]", "name", "warren", "emptyDir"));
        if (p->relay_secret)
                json_array_append_new(json_object_get(spec, "volumes"),
                                      json_pack("{s:s, s:{s:s, s:i}}", "name", "warren-relay",
                                                "secret", "secretName", p->relay_secret,
                                                "defaultMode", 0400));

        /* warren-init copies itself into the emptyDir */
        set_str(init_c, "name", K8S_INIT_CONTAINER);
        set_str(init_c, "image", p->init_image);
        set_str(init_c, "imagePullPolicy", "IfNotPresent");
        json_object_set_new(
                init_c, "command",
                json_pack("[s,s,s]", "/warren-init", "--install", K8S_INIT_DIR "/warren-init"));
        json_object_set_new(init_c, "volumeMounts",
                            json_pack("[{s:s, s:s}]", "name", "warren", "mountPath", K8S_INIT_DIR));
        /* the same resources as the sandbox: with cpu and memory given,
         * every container's limits equal its requests and the Pod's QoS
         * class is Guaranteed (limits on the Pod's cgroup too) */
        json_t *ires = resources(p);
        if (ires)
                json_object_set_new(init_c, "resources", ires);
        json_object_set_new(spec, "initContainers", json_pack("[o]", init_c));
        if (p->relay_secret) {
                /* warren-relay: a sidecar (it runs beside the sandbox for
                 * the Pod's life; its own pid namespace and the Secret's
                 * token out of the sandbox's reach). Fixed small resources,
                 * requests = limits (the Pod's QoS class is unchanged) */
                json_t *rc = json_pack(
                        "{s:s, s:s, s:s, s:s, s:[s,s,s,s,s], s:[{s:s, s:s}, {s:s, s:s, s:b}], "
                        "s:{s:{s:s, s:s}, s:{s:s, s:s}}}",
                        "name", K8S_RELAY_CONTAINER, "image", p->init_image, "imagePullPolicy",
                        "IfNotPresent", "restartPolicy", "Always", "command", "/warren-relay",
                        "--ctl", K8S_INIT_DIR "/ctl.sock", "--config", K8S_RELAY_DIR,
                        "volumeMounts", "name", "warren", "mountPath", K8S_INIT_DIR, "name",
                        "warren-relay", "mountPath", K8S_RELAY_DIR, "readOnly", 1, "resources",
                        "requests", "cpu", "100m", "memory", "64Mi", "limits", "cpu", "100m",
                        "memory", "64Mi");
                if (rc)
                        json_array_append_new(json_object_get(spec, "initContainers"), rc);
        }

        /* the sandbox: its image, warren-init as PID 1 */
        set_str(main_c, "name", K8S_MAIN_CONTAINER);
        set_str(main_c, "image", p->image);
        json_object_set_new(main_c, "command",
                            json_pack("[s,s,s]", K8S_INIT_DIR "/warren-init", "--listen",
                                      K8S_INIT_DIR "/ctl.sock"));
        if (p->workdir && *p->workdir)
                set_str(main_c, "workingDir", p->workdir);
        json_array_append_new(
                env, json_pack("{s:s, s:s}", "name", "WARREN_SANDBOX_ID", "value", p->sandbox_id));
        if (p->env_secret)
                json_object_set_new(main_c, "envFrom",
                                    json_pack("[{s:{s:s}}]", "secretRef", "name", p->env_secret));
        for (char *const *kv = p->env_secret ? NULL : p->env; kv && *kv; kv++) {
                const char *eq = strchr(*kv, '=');
                if (!eq)
                        continue;
                json_t *n = json_stringn(*kv, (size_t) (eq - *kv));
                json_array_append_new(env, json_pack("{s:o, s:s}", "name", n, "value", eq + 1));
        }
        json_object_set_new(main_c, "env", env);
        json_t *res = resources(p);
        if (res)
                json_object_set_new(main_c, "resources", res);
        json_object_set_new(main_c, "volumeMounts",
                            json_pack("[{s:s, s:s, s:b}]", "name", "warren", "mountPath",
                                      K8S_INIT_DIR, "readOnly", 0));
        json_object_set_new(spec, "containers", json_pack("[o]", main_c));
        json_object_set_new(pod, "spec", spec);

        char *out = json_dumps(pod, JSON_COMPACT);
        json_decref(pod);
        return out;
}

static json_t *own_labels(const char *sandbox_id, const char *owner) {
        json_t *l = json_object();
        if (!l)
                return NULL;
        set_str(l, K8S_LABEL_MANAGED, "true");
        set_str(l, K8S_LABEL_SANDBOX, sandbox_id);
        if (owner)
                set_str(l, K8S_LABEL_OWNER, owner);
        return l;
}

/* Sets data[key] to the base64 of val[0..vlen); the plain copy is wiped. */
static int set_b64(json_t *data, const char *key, const char *val, size_t vlen) {
        size_t blen = 4 * ((vlen + 2) / 3) + 1;
        unsigned char *b = malloc(blen);
        if (!b)
                return -ENOMEM;
        EVP_EncodeBlock(b, (const unsigned char *) val, (int) vlen);
        json_object_set_new(data, key, json_string((const char *) b));
        explicit_bzero(b, blen);
        free(b);
        return 0;
}

/* An Opaque Secret of ours holding data (stolen). */
static char *secret_json(const char *name, const char *sandbox_id, const char *owner,
                         json_t *data) {
        json_t *s = json_pack("{s:s, s:s, s:{s:s, s:o}, s:s, s:o}", "apiVersion", "v1", "kind",
                              "Secret", "metadata", "name", name, "labels",
                              own_labels(sandbox_id, owner), "type", "Opaque", "data", data);
        if (!s)
                return NULL;
        char *out = json_dumps(s, JSON_COMPACT);
        json_decref(s);
        return out;
}

char *k8s_env_secret_json(const char *name, const char *sandbox_id, const char *owner,
                          char *const *env) {
        json_t *data = json_object();
        if (!data)
                return NULL;
        for (char *const *kv = env; kv && *kv; kv++) {
                const char *eq = strchr(*kv, '=');
                if (!eq || eq == *kv)
                        continue;
                char key[256];
                snprintf(key, sizeof(key), "%.*s", (int) (eq - *kv), *kv);
                if (set_b64(data, key, eq + 1, strlen(eq + 1)) < 0) {
                        json_decref(data);
                        return NULL;
                }
        }
        return secret_json(name, sandbox_id, owner, data);
}

char *k8s_relay_secret_json(const char *name, const char *sandbox_id, const char *owner,
                            const char *addr, const char *token, const char *ca_pem) {
        const char *keys[] = {"addr", "id", "token", "ca.crt"};
        const char *vals[] = {addr, sandbox_id, token, ca_pem};
        json_t *data = json_object();
        if (!data)
                return NULL;
        for (size_t i = 0; i < 4; i++)
                if (set_b64(data, keys[i], vals[i], strlen(vals[i])) < 0) {
                        json_decref(data);
                        return NULL;
                }
        return secret_json(name, sandbox_id, owner, data);
}

char *k8s_owner_patch_json(const char *pod_name, const char *pod_uid) {
        json_t *p = json_pack("{s:{s:[{s:s, s:s, s:s, s:s, s:b}]}}", "metadata", "ownerReferences",
                              "apiVersion", "v1", "kind", "Pod", "name", pod_name, "uid", pod_uid,
                              "blockOwnerDeletion", 0);
        if (!p)
                return NULL;
        char *out = json_dumps(p, JSON_COMPACT);
        json_decref(p);
        return out;
}

int k8s_object_list_parse(const char *json, size_t len, const char *list_kind,
                          void (*fn)(const char *name, const char *sandbox_id, void *userdata),
                          void *userdata) {
        json_t *j = json_loadb(json, len, JSON_REJECT_DUPLICATES, NULL);
        json_t *kind = json_is_object(j) ? json_object_get(j, "kind") : NULL;
        json_t *items = json_is_object(j) ? json_object_get(j, "items") : NULL;
        if (!json_is_string(kind) || strcmp(json_string_value(kind), list_kind) != 0 ||
            !(json_is_array(items) || json_is_null(items))) {
                json_decref(j);
                return -EINVAL;
        }
        int n = 0;
        size_t i;
        json_t *it;
        if (json_is_array(items))
                json_array_foreach(items, i, it) {
                        json_t *m = json_is_object(it) ? json_object_get(it, "metadata") : NULL;
                        json_t *name = json_is_object(m) ? json_object_get(m, "name") : NULL;
                        json_t *l = json_is_object(m) ? json_object_get(m, "labels") : NULL;
                        json_t *sid =
                                json_is_object(l) ? json_object_get(l, K8S_LABEL_SANDBOX) : NULL;
                        if (!json_is_string(name))
                                continue;
                        fn(json_string_value(name),
                           json_is_string(sid) ? json_string_value(sid) : "", userdata);
                        n++;
                }
        json_decref(j);
        return n;
}

void k8s_object_uid(const char *json, size_t len, char *buf, size_t size) {
        if (size)
                buf[0] = 0;
        json_t *j = json_loadb(json, len, 0, NULL);
        json_t *m = json_is_object(j) ? json_object_get(j, "metadata") : NULL;
        json_t *u = json_is_object(m) ? json_object_get(m, "uid") : NULL;
        if (json_is_string(u) && size)
                snprintf(buf, size, "%s", json_string_value(u));
        json_decref(j);
}

/* ---- reading ---- */

static const char *str_at(json_t *o, const char *k) {
        json_t *v = json_is_object(o) ? json_object_get(o, k) : NULL;
        return json_is_string(v) ? json_string_value(v) : NULL;
}

static void copy(char *dst, size_t size, const char *src) {
        if (!src)
                src = "";
        snprintf(dst, size, "%s", src);
}

/* Container waiting reasons after which the Pod will not start by itself. */
static bool fatal_waiting(const char *r) {
        static const char *const fatal[] = {
                "ErrImagePull",        "ImagePullBackOff",           "InvalidImageName",
                "ErrImageNeverPull",   "CreateContainerConfigError", "CreateContainerError",
                "RunContainerError",   "CrashLoopBackOff",           "ImageInspectError",
                "RegistryUnavailable", "PreCreateHookError",         "PreStartHookError",
        };
        for (size_t i = 0; i < ELEMENTSOF(fatal); i++)
                if (!strcmp(r, fatal[i]))
                        return true;
        return false;
}

/* A container status: waiting with a fatal reason → START_FAILED;
 * terminated → the reason and exit code. Returns the stage it implies, or
 * UNKNOWN. */
static enum k8s_pod_stage container(json_t *cs, bool is_init, struct k8s_pod_state *st) {
        json_t *state = json_object_get(cs, "state");
        if (!json_is_object(state))
                return K8S_POD_UNKNOWN;
        json_t *w = json_object_get(state, "waiting"), *t = json_object_get(state, "terminated"),
               *r = json_object_get(state, "running");
        if (json_is_object(w)) {
                const char *reason = str_at(w, "reason");
                if (reason && fatal_waiting(reason)) {
                        copy(st->reason, sizeof(st->reason), reason);
                        copy(st->message, sizeof(st->message), str_at(w, "message"));
                        return K8S_POD_START_FAILED;
                }
                return K8S_POD_STARTING;
        }
        if (json_is_object(t)) {
                json_t *code = json_object_get(t, "exitCode");
                int c = json_is_integer(code) ? (int) json_integer_value(code) : -1;
                if (is_init) {
                        if (c == 0)
                                return K8S_POD_STARTING;
                        snprintf(st->reason, sizeof(st->reason), "%s", "InitContainerFailed");
                        snprintf(st->message, sizeof(st->message),
                                 "the warren-init container ended: %.60s (exit code %d) %.120s",
                                 str_at(t, "reason") ? str_at(t, "reason") : "?", c,
                                 str_at(t, "message") ? str_at(t, "message") : "");
                        return K8S_POD_START_FAILED;
                }
                st->exit_code = c;
                copy(st->reason, sizeof(st->reason), str_at(t, "reason"));
                copy(st->message, sizeof(st->message), str_at(t, "message"));
                return K8S_POD_ENDED;
        }
        if (json_is_object(r))
                return is_init ? K8S_POD_STARTING : K8S_POD_RUNNING;
        return K8S_POD_UNKNOWN;
}

static int pod_read(json_t *pod, struct k8s_pod_state *st) {
        memset(st, 0, sizeof(*st));
        st->exit_code = -1;
        if (!json_is_object(pod))
                return -EINVAL;
        const char *kind = str_at(pod, "kind");
        if (kind && strcmp(kind, "Pod") != 0)
                return -EINVAL;
        json_t *meta = json_object_get(pod, "metadata");
        if (!json_is_object(meta))
                return -EINVAL;
        copy(st->name, sizeof(st->name), str_at(meta, "name"));
        copy(st->resource_version, sizeof(st->resource_version), str_at(meta, "resourceVersion"));
        json_t *labels = json_object_get(meta, "labels");
        const char *sid = str_at(labels, K8S_LABEL_SANDBOX);
        if (sid && strlen(sid) < sizeof(st->sandbox_id))
                copy(st->sandbox_id, sizeof(st->sandbox_id), sid);
        st->deleting = json_is_string(json_object_get(meta, "deletionTimestamp"));

        json_t *status = json_object_get(pod, "status");
        const char *phase = str_at(status, "phase");
        st->stage = K8S_POD_STARTING;
        if (!json_is_object(status))
                return 0;
        /* not schedulable */
        json_t *conds = json_object_get(status, "conditions");
        size_t i;
        json_t *c;
        if (json_is_array(conds))
                json_array_foreach(conds, i, c) {
                        const char *type = str_at(c, "type"), *s = str_at(c, "status"),
                                   *reason = str_at(c, "reason");
                        if (type && s && reason && !strcmp(type, "PodScheduled") &&
                            !strcmp(s, "False") && !strcmp(reason, "Unschedulable")) {
                                st->stage = K8S_POD_START_FAILED;
                                copy(st->reason, sizeof(st->reason), reason);
                                copy(st->message, sizeof(st->message), str_at(c, "message"));
                                return 0;
                        }
                }
        json_t *ics = json_object_get(status, "initContainerStatuses");
        if (json_is_array(ics))
                json_array_foreach(ics, i, c) {
                        if (container(c, true, st) == K8S_POD_START_FAILED) {
                                st->stage = K8S_POD_START_FAILED;
                                return 0;
                        }
                }
        enum k8s_pod_stage main_stage = K8S_POD_UNKNOWN;
        json_t *cs = json_object_get(status, "containerStatuses");
        if (json_is_array(cs))
                json_array_foreach(cs, i, c) {
                        const char *n = str_at(c, "name");
                        if (n && !strcmp(n, K8S_MAIN_CONTAINER))
                                main_stage = container(c, false, st);
                }
        if (phase && (!strcmp(phase, "Succeeded") || !strcmp(phase, "Failed"))) {
                if (main_stage == K8S_POD_START_FAILED) {
                        st->stage = K8S_POD_START_FAILED;
                        return 0;
                }
                st->stage = K8S_POD_ENDED;
                /* the Pod's own reason (DeadlineExceeded, Evicted) wins */
                const char *pr = str_at(status, "reason");
                if (pr) {
                        copy(st->reason, sizeof(st->reason), pr);
                        copy(st->message, sizeof(st->message), str_at(status, "message"));
                } else if (!st->reason[0])
                        copy(st->reason, sizeof(st->reason), phase);
                return 0;
        }
        if (main_stage == K8S_POD_START_FAILED || main_stage == K8S_POD_ENDED ||
            (main_stage == K8S_POD_RUNNING && phase && !strcmp(phase, "Running")))
                st->stage = main_stage;
        return 0;
}

int k8s_pod_parse(const char *json, size_t len, struct k8s_pod_state *st) {
        json_t *j = json_loadb(json, len, JSON_REJECT_DUPLICATES, NULL);
        int r = pod_read(j, st);
        json_decref(j);
        return r;
}

int k8s_watch_event_parse(const char *line, size_t len, struct k8s_pod_state *st) {
        memset(st, 0, sizeof(*st));
        st->exit_code = -1;
        json_t *j = json_loadb(line, len, JSON_REJECT_DUPLICATES, NULL);
        const char *type = str_at(j, "type");
        json_t *obj = json_is_object(j) ? json_object_get(j, "object") : NULL;
        int r = -EINVAL;
        if (!type || !json_is_object(obj))
                goto out;
        if (!strcmp(type, "ERROR")) {
                copy(st->message, sizeof(st->message), str_at(obj, "message"));
                r = K8S_EVENT_ERROR;
                goto out;
        }
        if (!strcmp(type, "BOOKMARK")) {
                copy(st->resource_version, sizeof(st->resource_version),
                     str_at(json_object_get(obj, "metadata"), "resourceVersion"));
                r = K8S_EVENT_BOOKMARK;
                goto out;
        }
        int t = !strcmp(type, "ADDED")      ? K8S_EVENT_ADDED
                : !strcmp(type, "MODIFIED") ? K8S_EVENT_MODIFIED
                : !strcmp(type, "DELETED")  ? K8S_EVENT_DELETED
                                            : 0;
        if (t && pod_read(obj, st) == 0)
                r = t;
out:
        json_decref(j);
        return r;
}

int k8s_pod_list_parse(const char *json, size_t len,
                       void (*fn)(const struct k8s_pod_state *st, void *userdata), void *userdata,
                       char *rv, size_t rv_size) {
        if (rv_size)
                rv[0] = 0;
        json_t *j = json_loadb(json, len, JSON_REJECT_DUPLICATES, NULL);
        const char *kind = str_at(j, "kind");
        json_t *items = json_is_object(j) ? json_object_get(j, "items") : NULL;
        if (!kind || strcmp(kind, "PodList") != 0 ||
            !(json_is_array(items) || json_is_null(items))) {
                json_decref(j);
                return -EINVAL;
        }
        if (rv_size)
                copy(rv, rv_size, str_at(json_object_get(j, "metadata"), "resourceVersion"));
        int n = 0;
        size_t i;
        json_t *it;
        struct k8s_pod_state st;
        if (json_is_array(items))
                json_array_foreach(items, i, it) {
                        if (pod_read(it, &st) == 0) {
                                fn(&st, userdata);
                                n++;
                        }
                }
        json_decref(j);
        return n;
}

void k8s_status_message(const char *json, size_t len, char *buf, size_t size) {
        if (size)
                buf[0] = 0;
        json_t *j = json_loadb(json, len, 0, NULL);
        const char *kind = str_at(j, "kind"), *m = str_at(j, "message");
        if (kind && !strcmp(kind, "Status") && m && size)
                snprintf(buf, size, "%s", m);
        json_decref(j);
}

int k8s_lines_feed(struct k8s_lines *l, const char *data, size_t len,
                   void (*fn)(const char *line, size_t len, void *userdata), void *userdata) {
        int r = 0;
        while (len > 0) {
                const char *nl = memchr(data, '\n', len);
                size_t take = nl ? (size_t) (nl - data) : len;
                if (l->skipping) {
                        if (nl)
                                l->skipping = false;
                } else if (l->len + take > K8S_LINE_MAX) {
                        l->len = 0;
                        l->skipping = !nl;
                        r = -E2BIG;
                } else {
                        if (l->len + take + 1 > l->cap) {
                                size_t cap = l->cap ? l->cap : 4096;
                                while (cap < l->len + take + 1)
                                        cap *= 2;
                                char *b = realloc(l->buf, cap);
                                if (!b)
                                        return -ENOMEM;
                                l->buf = b;
                                l->cap = cap;
                        }
                        memcpy(l->buf + l->len, data, take);
                        l->len += take;
                        if (nl) {
                                l->buf[l->len] = 0;
                                if (l->len)
                                        fn(l->buf, l->len, userdata);
                                l->len = 0;
                        }
                }
                if (!nl)
                        break;
                data = nl + 1;
                len -= take + 1;
        }
        return r;
}

void k8s_lines_clear(struct k8s_lines *l) {
        free(l->buf);
        *l = (struct k8s_lines){0};
}
