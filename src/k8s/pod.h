/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* k8s/pod: the pure half of the K8S compute class. It builds the Pod a
 * sandbox becomes (JSON for POST /api/v1/namespaces/NS/pods) and reads
 * what the Kubernetes API says back (a Pod, a PodList, one line of a watch
 * stream) into a small struct: which sandbox, and whether its Pod is
 * still starting, running, failed to start (with the Kubernetes reason)
 * or ended. No I/O, no loop: unit tested and fuzzed (tests/fuzz/fuzz-k8s-pod.c).
 *
 * What the API answers is not trusted to be well formed: every field is
 * type-checked, strings are bounded, and anything unexpected reads as
 * "unknown" rather than failing. */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Labels every Pod of warrend carries. */
#define K8S_LABEL_MANAGED "warren.dev/managed"
#define K8S_LABEL_SANDBOX "warren.dev/sandbox"
#define K8S_LABEL_ENV "warren.dev/environment"
/* which warrend (its state dir) made the Pod: several may share a namespace */
#define K8S_LABEL_OWNER "warren.dev/owner"
#define K8S_LABEL_TAG_PREFIX "tag.warren.dev/"
/* The main container's name (warren-init is its PID 1) and the init
 * container that puts warren-init into the shared emptyDir. */
#define K8S_MAIN_CONTAINER "sandbox"
#define K8S_INIT_CONTAINER "warren-init"
#define K8S_INIT_DIR "/.warren"
#define K8S_RELAY_CONTAINER "warren-relay"
#define K8S_RELAY_DIR "/var/run/warren-relay"

struct k8s_pod_tag {
        const char *key, *value;
};

/* What a Pod is made of; every pointer borrowed. */
struct k8s_pod_params {
        const char *pod_name;     /* "warren-" + the sandbox id */
        const char *sandbox_id;   /* "sb-..." */
        const char *owner;        /* the warren.dev/owner label value (NULL: none) */
        const char *environment;  /* the sandbox's environment */
        const char *sandbox_name; /* NULL: unnamed (an annotation) */
        const char *image;        /* the image reference as given: the cluster pulls */
        const char *init_image;   /* the warren-init image (--k8s-init-image) */
        const char *hostname;     /* NULL: Kubernetes' default (the Pod name) */
        const char *workdir;      /* NULL: the image's */
        char *const *env;         /* "K=V", NULL-terminated, or NULL */
        /* non-NULL: the env is in this Secret (k8s_env_secret_json) and
         * the Pod takes it with envFrom; env is then not written */
        const char *env_secret;
        /* non-NULL: the relay's Secret (k8s_relay_secret_json): the Pod
         * gets warren-relay as a sidecar (an init container with
         * restartPolicy Always, from init_image) that mounts it */
        const char *relay_secret;
        uint64_t cpu_millicores; /* 0: none asked (no request, no limit) */
        uint64_t memory_bytes;   /* 0: none asked */
        uint64_t disk_bytes;     /* 0: none asked (else ephemeral-storage) */
        int64_t lifetime_s;      /* > 0: activeDeadlineSeconds */
        const struct k8s_pod_tag *tags;
        size_t n_tags;
};

/* The Pod as JSON (malloc'd, NUL-terminated; it holds the env values, so
 * the caller wipes it before freeing), or NULL on ENOMEM / an invalid
 * parameter (a NULL pod_name, sandbox_id, image or init_image).
 * Tags become labels "tag.warren.dev/KEY" when key and value are valid
 * label parts (and annotations always). */
char *k8s_pod_json(const struct k8s_pod_params *p);

/* The Secret holding a sandbox's env ("K=V" each; values base64) named
 * name, labelled like its Pod (malloc'd JSON; the caller wipes it), or NULL
 * on ENOMEM. */
char *k8s_env_secret_json(const char *name, const char *sandbox_id, const char *owner,
                          char *const *env);

/* A merge patch making the Pod (name, uid) the owner of an object, so
 * that the cluster's garbage collector deletes it with the Pod. */
/* The Secret warren-relay reads (name "<pod>-relay"): addr (where warrend
 * listens for relays), id, token (the sandbox's), ca.crt (warrend's
 * certificate). NULL: out of memory. */
char *k8s_relay_secret_json(const char *name, const char *sandbox_id, const char *owner,
                            const char *addr, const char *token, const char *ca_pem);

char *k8s_owner_patch_json(const char *pod_name, const char *pod_uid);

/* The items of a list of kind list_kind ("SecretList"): fn gets each
 * item's metadata.name and its warren.dev/sandbox label ("" when none).
 * Returns the number of items, or -EINVAL when the text is not one. */
int k8s_object_list_parse(const char *json, size_t len, const char *list_kind,
                          void (*fn)(const char *name, const char *sandbox_id, void *userdata),
                          void *userdata);

/* metadata.uid of an object (JSON text) into buf, or "" (buf[0] == 0). */
void k8s_object_uid(const char *json, size_t len, char *buf, size_t size);

/* True when s is a valid Kubernetes label value ("" or 1-63 of
 * [A-Za-z0-9-_.], alphanumeric at both ends). */
bool k8s_label_value_valid(const char *s);

enum k8s_pod_stage {
        K8S_POD_UNKNOWN = 0,
        K8S_POD_STARTING,     /* scheduled or not yet, pulling, init container running */
        K8S_POD_RUNNING,      /* the main container runs */
        K8S_POD_START_FAILED, /* will not start: reason says why (ImagePullBackOff ...) */
        K8S_POD_ENDED,        /* ran and ended (Succeeded/Failed, main container exited) */
};

#define K8S_REASON_MAX 64
#define K8S_MESSAGE_MAX 256

/* A Pod as warrend reads it. */
struct k8s_pod_state {
        char sandbox_id[32]; /* its warren.dev/sandbox label; "" when not ours */
        char name[64];
        char resource_version[32];
        bool deleting; /* metadata.deletionTimestamp set */
        enum k8s_pod_stage stage;
        char reason[K8S_REASON_MAX]; /* Kubernetes' word for it: ImagePullBackOff, Unschedulable,
                                        OOMKilled, DeadlineExceeded ... */
        char message[K8S_MESSAGE_MAX];
        int exit_code; /* of the main container when it ended, else -1 */
};

/* Read one Pod object (JSON text of len bytes). Returns 0, or -EINVAL
 * when it is not a JSON object of kind Pod (or without kind: a watch
 * event's object). */
int k8s_pod_parse(const char *json, size_t len, struct k8s_pod_state *st);

enum k8s_event_type {
        K8S_EVENT_ADDED = 1,
        K8S_EVENT_MODIFIED,
        K8S_EVENT_DELETED,
        K8S_EVENT_BOOKMARK, /* st->resource_version only */
        K8S_EVENT_ERROR,    /* the watch must be restarted (410 Gone ...): st->message */
};

/* Read one line of a watch stream ({"type": ..., "object": ...}).
 * Returns the event type (> 0), or -EINVAL when the line is not one. */
int k8s_watch_event_parse(const char *line, size_t len, struct k8s_pod_state *st);

/* Read a PodList: calls fn for each Pod item (items that do not parse are
 * skipped) and copies metadata.resourceVersion into rv (rv_size bytes,
 * NUL-terminated). Returns the number of items passed to fn, or -EINVAL
 * when the text is not a PodList. */
int k8s_pod_list_parse(const char *json, size_t len,
                       void (*fn)(const struct k8s_pod_state *st, void *userdata), void *userdata,
                       char *rv, size_t rv_size);

/* The message of a Kubernetes Status object (an error reply: {"kind":
 * "Status", "message": ..., "reason": ...}) into buf, or "" when the text
 * is not one. */
void k8s_status_message(const char *json, size_t len, char *buf, size_t size);

/* A watch stream's framing: bytes arrive in pieces; whole lines come out.
 * The buffer is bounded: a line longer than K8S_LINE_MAX is dropped (and
 * reported once by k8s_lines_feed returning -E2BIG). */
#define K8S_LINE_MAX (4u << 20)
struct k8s_lines {
        char *buf;
        size_t len, cap;
        bool skipping; /* inside a line that was too long */
};

/* Append len bytes and call fn for each complete line (without its '\n';
 * empty lines skipped). Returns 0, -ENOMEM, or -E2BIG (a line was too
 * long and skipped). fn may not feed the same struct. */
int k8s_lines_feed(struct k8s_lines *l, const char *data, size_t len,
                   void (*fn)(const char *line, size_t len, void *userdata), void *userdata);
/* Forget what is buffered and free it. */
void k8s_lines_clear(struct k8s_lines *l);
