/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* k8s: the K8S compute class. A sandbox is a Pod on an existing cluster,
 * driven through the Kubernetes API (HTTPS + JSON with libcurl on the
 * loop, curl-uv; a watch stream for Pod status); the host runtime
 * (sandbox/) is the other class. Both record their sandboxes in the same
 * store rows, so Get/List answer the same for both; a K8S row is marked by
 * its cgroup_path "k8s:<namespace>/<pod>" (k8s_row_is_k8s), which the
 * host class's recovery leaves alone.
 *
 * Lifecycle: create inserts the row PENDING, POSTs the Pod (warren-init
 * copied into an emptyDir by an init container, then PID 1 of the main
 * container), and answers when the watch sees the main container running
 * (RUNNING) or the Pod unable to start (FAILED with the Kubernetes reason:
 * ImagePullBackOff, Unschedulable, a quota's refusal ...; the Pod is
 * deleted). A running Pod that ends (its activeDeadlineSeconds, an OOM
 * kill, deleted by someone) ends its row TERMINATED with the reason;
 * warrend's own lifetime timer deletes the Pod too. terminate deletes the
 * Pod with the grace period asked and answers once it is gone.
 * At start (k8s_class_new) live K8S rows are matched with the namespace's
 * Pods by label: a row whose Pod is gone ends, a Pod without a live row
 * (an orphan) is deleted.
 *
 * Exec: every Pod runs warren-relay as a sidecar, which dials warrend's
 * bridge (bridge.h, a TLS listener on --k8s-callback) with the sandbox's
 * token; the bridge hands the sandbox manager a control connection
 * (sbx_remote_attach) and create answers RUNNING once that is there.
 * Not built yet (the API answers UNIMPLEMENTED or INVALID_ARGUMENT): an
 * entrypoint, images built by warren's builder (--k8s-registry).
 * Threads: the loop thread only (the bridge's threads hand over through
 * a uv_async). Module prefix: k8s_. */

#include <stdbool.h>
#include <stdint.h>

#include <uv.h>

#include "basic/err.h"

struct store;
struct store_sandbox;
struct sbx_spec;
struct k8s_class;

struct k8s_config {
        /* a kubeconfig in JSON form (kubectl config view --raw --flatten
         * -o json), or "in-cluster" (the Pod's service account) */
        const char *kubeconfig;
        const char *namespace_; /* NULL: the kubeconfig context's, else "default" */
        const char *init_image; /* the warren-init image; NULL: K8S_INIT_IMAGE_DEFAULT */
        /* warrend's state dir: <state_dir>/k8s-owner holds this warrend's
         * owner label (made on first use), so that warrends sharing a
         * namespace see only their own Pods */
        const char *state_dir;
        /* k8s_class_free deletes every Pod (and env Secret) it tracks and
         * records the sandboxes TERMINATED, like the host class's
         * --terminate-on-exit */
        bool terminate_on_exit;
        /* exec on Pods (docs/k8s.md): where warrend listens for the Pods'
         * warren-relay ("IP:PORT"; NULL: the address of the interface of
         * the default route, port K8S_CALLBACK_PORT), what the Pods are
         * told to dial (NULL: the same) */
        const char *callback;
        const char *callback_advertise;
        /* a relay connected (ctl_fd: the caller's; workdir and env: the
         * sandbox's spec, or NULL after a restart) / the sandbox ended: the sandbox manager's
         * remote side (sbx_remote_attach / sbx_remote_detach) */
        void (*relay_attach)(const char *id, int ctl_fd, const char *workdir, char *const *env,
                             void *userdata);
        void (*relay_end)(const char *id, void *userdata);
        void *relay_userdata;
};

#define K8S_CALLBACK_PORT 7443

/* The default --k8s-callback: "IP:K8S_CALLBACK_PORT" with the IPv4
 * address of the default route's interface. -ENETUNREACH: no route. */
int k8s_callback_default(char *buf, size_t size);

#define K8S_INIT_IMAGE_DEFAULT "warren/warren-init:latest"

/* Load the kubeconfig, check the cluster answers (GET /version, blocking
 * up to 10 s: this runs at start-up), recover the previous warrend's
 * Pods, and start the watch. Errors name the flag or file: -ENOENT,
 * -EINVAL (not a kubeconfig warrend reads), -EHOSTUNREACH (the cluster
 * does not answer). *ret is the caller's (k8s_class_free). */
int k8s_class_new(uv_loop_t *loop, struct store *store, const struct k8s_config *cfg,
                  struct k8s_class **ret, struct wr_err *e);

/* Stop the watch and every request; Pods keep running for the next
 * warrend (unless terminate_on_exit: then each is deleted, blocking up to
 * 10 s per request). Creates in flight are answered UNAVAILABLE. NULL ok. */
void k8s_class_free(struct k8s_class *k);

/* The namespace Pods are made in (borrowed). */
const char *k8s_class_namespace(const struct k8s_class *k);

/* True when row is a K8S sandbox's. */
bool k8s_row_is_k8s(const struct store_sandbox *row);

/* A create ended: r = 0 and *row (status RUNNING; borrowed for the call),
 * or r < 0 and e (the row, if written, says FAILED with the reason). */
typedef void (*k8s_create_fn)(int r, const struct store_sandbox *row, const struct wr_err *e,
                              void *userdata);

/* Create a sandbox as a Pod (spec checked by the caller: api_sandbox_spec
 * refuses what this class does not do). Returns 0 when started (done runs
 * once, later) or an error (done not called): -EEXIST (the name is
 * taken), store errors. */
int k8s_create(struct k8s_class *k, const struct sbx_spec *spec, k8s_create_fn done, void *userdata,
               struct wr_err *e);

typedef void (*k8s_terminate_fn)(int r, const struct wr_err *e, void *userdata);

/* Terminate sandbox id: delete its Pod with grace_ms (rounded up to whole
 * seconds) and answer once the Pod is gone (the row TERMINATED). An ended
 * sandbox answers at once. Returns 0 (done runs once, later) or an error
 * (done not called): -ENOENT. */
int k8s_terminate(struct k8s_class *k, const char *id, uint64_t grace_ms, k8s_terminate_fn done,
                  void *userdata, struct wr_err *e);

/* Sandboxes this class tracks (pending or running). */
size_t k8s_class_live(const struct k8s_class *k);
