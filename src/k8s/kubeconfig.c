/* SPDX-License-Identifier: Apache-2.0 */
/* Reading a kubeconfig (YAML or JSON) or the in-cluster configuration. */
#include "k8s/kubeconfig.h"
#include "k8s/kubeyaml.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <jansson.h>
#include <openssl/evp.h>

#include "basic/macro.h"

#define SA_DIR "/var/run/secrets/kubernetes.io/serviceaccount"
#define FILE_MAX (1u << 20)

/* Read a whole (small) file: *ret NUL-terminated. */
static int read_file(const char *path, char **ret, size_t *len) {
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
                return -errno;
        struct stat st;
        if (fstat(fd, &st) < 0 || st.st_size > FILE_MAX) {
                int r = errno ? -errno : -EFBIG;
                close(fd);
                return r;
        }
        char *b = malloc((size_t) st.st_size + 1);
        if (!b) {
                close(fd);
                return -ENOMEM;
        }
        size_t n = 0;
        while (n < (size_t) st.st_size) {
                ssize_t k = read(fd, b + n, (size_t) st.st_size - n);
                if (k < 0 && errno == EINTR)
                        continue;
                if (k <= 0)
                        break;
                n += (size_t) k;
        }
        close(fd);
        b[n] = 0;
        *ret = b;
        if (len)
                *len = n;
        return 0;
}

static int b64_decode(const char *in, char **ret, size_t *len) {
        size_t n = strlen(in);
        char *out = malloc(n / 4 * 3 + 4);
        if (!out)
                return -ENOMEM;
        int k = EVP_DecodeBlock((unsigned char *) out, (const unsigned char *) in, (int) n);
        if (k < 0) {
                free(out);
                return -EINVAL;
        }
        /* EVP_DecodeBlock counts the padding's zero bytes */
        while (n > 0 && in[n - 1] == '=' && k > 0) {
                n--;
                k--;
        }
        out[k] = 0;
        *ret = out;
        *len = (size_t) k;
        return 0;
}

static json_t *named(json_t *list, const char *name, const char *inner) {
        size_t i;
        json_t *it;
        if (!json_is_array(list))
                return NULL;
        json_array_foreach(list, i, it) {
                json_t *n = json_object_get(it, "name");
                if (json_is_string(n) && !strcmp(json_string_value(n), name)) {
                        json_t *o = json_object_get(it, inner);
                        return json_is_object(o) ? o : NULL;
                }
        }
        return NULL;
}

static const char *str(json_t *o, const char *k) {
        json_t *v = json_object_get(o, k);
        return json_is_string(v) && *json_string_value(v) ? json_string_value(v) : NULL;
}

/* field "X-data" (base64) or "X" (a file, relative to dir). */
static int data_or_file(json_t *o, const char *data_key, const char *file_key, const char *dir,
                        const char *what, char **ret, size_t *len, struct wr_err *e) {
        const char *d = str(o, data_key), *f = str(o, file_key);
        int r;
        if (d) {
                if ((r = b64_decode(d, ret, len)) < 0)
                        return err_set(e, r, "%s: %s is not valid base64", what, data_key);
                return 0;
        }
        if (!f)
                return 0;
        char path[PATH_MAX];
        if (f[0] == '/')
                snprintf(path, sizeof(path), "%s", f);
        else
                snprintf(path, sizeof(path), "%s/%s", dir, f);
        if ((r = read_file(path, ret, len)) < 0)
                return err_set(e, r, "%s: %s %s: %s", what, file_key, path, strerror(-r));
        return 0;
}

static int in_cluster(struct k8s_conn *c, struct wr_err *e) {
        const char *host = getenv("KUBERNETES_SERVICE_HOST"),
                   *port = getenv("KUBERNETES_SERVICE_PORT");
        if (!host || !*host || !port || !*port)
                return err_set(e, -EINVAL,
                               "--k8s-kubeconfig in-cluster: KUBERNETES_SERVICE_HOST/PORT are "
                               "not set (warrend is not running in a Pod); give a kubeconfig "
                               "file");
        char url[300];
        snprintf(url, sizeof(url), strchr(host, ':') ? "https://[%s]:%s" : "https://%s:%s", host,
                 port);
        int r;
        if (!(c->server = strdup(url)) || !(c->token_file = strdup(SA_DIR "/token")))
                return err_set(e, -ENOMEM, "out of memory");
        if ((r = read_file(SA_DIR "/ca.crt", &c->ca_pem, &c->ca_len)) < 0)
                return err_set(e, r, "--k8s-kubeconfig in-cluster: " SA_DIR "/ca.crt: %s",
                               strerror(-r));
        char *ns = NULL;
        if (read_file(SA_DIR "/namespace", &ns, NULL) == 0) {
                ns[strcspn(ns, "\r\n")] = 0;
                c->namespace_ = ns;
        }
        return 0;
}

/* Clear every string value of a parsed kubeconfig before it is dropped:
 * they hold the client key and tokens (jansson frees without clearing).
 * The tree is this file's own (nothing else holds its nodes). */
static void json_wipe(json_t *j) {
        size_t i;
        const char *k;
        json_t *v;
        if (json_is_string(j)) {
                explicit_bzero((char *) json_string_value(j), json_string_length(j));
        } else if (json_is_array(j)) {
                json_array_foreach(j, i, v) {
                        json_wipe(v);
                }
        } else if (json_is_object(j)) {
                json_object_foreach(j, k, v) {
                        json_wipe(v);
                }
        }
}

static void json_wipe_decref(json_t *j) {
        json_wipe(j);
        json_decref(j);
}

int k8s_conn_load(const char *path, struct k8s_conn *c, struct wr_err *e) {
        *c = (struct k8s_conn){0};
        if (!strcmp(path, "in-cluster")) {
                int r = in_cluster(c, e);
                if (r < 0)
                        k8s_conn_clear(c);
                return r;
        }
        char *text = NULL;
        size_t len = 0;
        int r = read_file(path, &text, &len);
        if (r < 0)
                return err_set(e, r, "--k8s-kubeconfig %s: %s", path, strerror(-r));
        /* JSON (what `kubectl config view -o json` writes) or YAML (what
         * kubeadm, kind and `kubectl config` write) */
        json_t *j = json_loadb(text, len, 0, NULL);
        struct wr_err ye = {0};
        if (!j)
                j = k8s_yaml_load(text, len, &ye);
        explicit_bzero(text, len);
        free(text);
        if (!json_is_object(j)) {
                json_wipe_decref(j);
                if (ye.code == -ENOMEM)
                        return err_set(e, -ENOMEM, "--k8s-kubeconfig %s: out of memory", path);
                return err_set(e, -EINVAL,
                               "--k8s-kubeconfig %s: not a kubeconfig (%s); expected a "
                               "mapping with current-context, contexts, clusters and users, as "
                               "`kubectl config view --raw --flatten` writes it",
                               path, ye.msg[0] ? ye.msg : "its top level is not a mapping");
        }
        char dirbuf[PATH_MAX];
        snprintf(dirbuf, sizeof(dirbuf), "%s", path);
        const char *dir = dirname(dirbuf);
        const char *cur = str(j, "current-context");
        json_t *ctx = cur ? named(json_object_get(j, "contexts"), cur, "context") : NULL;
        const char *cname = ctx ? str(ctx, "cluster") : NULL,
                   *uname = ctx ? str(ctx, "user") : NULL;
        json_t *cl = cname ? named(json_object_get(j, "clusters"), cname, "cluster") : NULL;
        json_t *us = uname ? named(json_object_get(j, "users"), uname, "user") : NULL;
        if (!ctx || !cl) {
                json_wipe_decref(j);
                return err_set(e, -EINVAL, "--k8s-kubeconfig %s: %s", path,
                               !cur   ? "no current-context"
                               : !ctx ? "current-context names no context"
                                      : "the context's cluster is not in clusters");
        }
        const char *server = str(cl, "server");
        if (!server || strncmp(server, "https://", 8) != 0) {
                /* cname lives in j: the message first */
                r = err_set(e, -EINVAL,
                            "--k8s-kubeconfig %s: clusters[%s].server must be an https:// "
                            "URL",
                            path, cname);
                json_wipe_decref(j);
                return r;
        }
        if (!(c->server = strdup(server)))
                goto oom;
        size_t sl = strlen(c->server);
        while (sl > 8 && c->server[sl - 1] == '/')
                c->server[--sl] = 0;
        if (str(ctx, "namespace") && !(c->namespace_ = strdup(str(ctx, "namespace"))))
                goto oom;
        json_t *insecure = json_object_get(cl, "insecure-skip-tls-verify");
        c->insecure = json_is_true(insecure);
        char what[160];
        snprintf(what, sizeof(what), "--k8s-kubeconfig %s: clusters[%s]", path, cname);
        if ((r = data_or_file(cl, "certificate-authority-data", "certificate-authority", dir, what,
                              &c->ca_pem, &c->ca_len, e)) < 0)
                goto fail;
        if (us) {
                snprintf(what, sizeof(what), "--k8s-kubeconfig %s: users[%s]", path, uname);
                if ((r = data_or_file(us, "client-certificate-data", "client-certificate", dir,
                                      what, &c->cert_pem, &c->cert_len, e)) < 0 ||
                    (r = data_or_file(us, "client-key-data", "client-key", dir, what, &c->key_pem,
                                      &c->key_len, e)) < 0)
                        goto fail;
                if (!!c->cert_pem != !!c->key_pem) {
                        r = err_set(e, -EINVAL,
                                    "%s: a client certificate needs its key (and "
                                    "the key its certificate)",
                                    what);
                        goto fail;
                }
                if (str(us, "token") && !(c->token = strdup(str(us, "token"))))
                        goto oom;
                if (str(us, "tokenFile") && !(c->token_file = strdup(str(us, "tokenFile"))))
                        goto oom;
                if (json_object_get(us, "exec") || json_object_get(us, "auth-provider")) {
                        r = err_set(e, -EINVAL,
                                    "%s: exec and auth-provider credentials are not supported; "
                                    "use a client certificate or a (service account) token",
                                    what);
                        goto fail;
                }
        }
        json_wipe_decref(j);
        return 0;
oom:
        r = err_set(e, -ENOMEM, "out of memory");
fail:
        json_wipe_decref(j);
        k8s_conn_clear(c);
        return r;
}

static void wipe_free(char *p, size_t n) {
        if (p) {
                explicit_bzero(p, n ? n : strlen(p));
                free(p);
        }
}

void k8s_conn_clear(struct k8s_conn *c) {
        free(c->server);
        free(c->namespace_);
        free(c->ca_pem);
        free(c->cert_pem);
        wipe_free(c->key_pem, c->key_len);
        wipe_free(c->token, 0);
        free(c->token_file);
        *c = (struct k8s_conn){0};
}
