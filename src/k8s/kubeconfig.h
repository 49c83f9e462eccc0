/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* k8s/kubeconfig: how warrend reaches a cluster. A kubeconfig, YAML or JSON
 * (k8s/kubeyaml.h; the current context's cluster, user and namespace; data inline or in
 * files relative to the kubeconfig), or the in-cluster configuration of a
 * Pod (KUBERNETES_SERVICE_HOST/PORT and the service account's files).
 * The operator's own file: trusted like the command line, but every field
 * is still type-checked and errors name the field. */

#include <stdbool.h>
#include <stddef.h>

#include "basic/err.h"

struct k8s_conn {
        char *server;     /* "https://host:port", no trailing '/' */
        char *namespace_; /* the context's namespace, or NULL */
        char *ca_pem;     /* NULL: the system's trust store */
        size_t ca_len;
        char *cert_pem, *key_pem; /* client certificate (both or neither); key wiped when freed */
        size_t cert_len, key_len;
        char *token;      /* bearer token (wiped when freed) or NULL */
        char *token_file; /* read again on every request when set (bound tokens rotate) */
        bool insecure;    /* insecure-skip-tls-verify */
};

/* Load path ("in-cluster": the Pod's service account). -ENOENT, -EACCES,
 * -EINVAL (neither JSON nor YAML, no current context, a field of the wrong type, no
 * server) with e naming the field and the fix, -ENOMEM. */
int k8s_conn_load(const char *path, struct k8s_conn *c, struct wr_err *e);

/* Free what c holds (secrets wiped) and zero it. */
void k8s_conn_clear(struct k8s_conn *c);
