/* SPDX-License-Identifier: Apache-2.0 */
/* libFuzzer target: what the Kubernetes API says about Pods
 * (src/k8s/pod.c): the same bytes as a watch stream (framed into lines,
 * in two pieces), a watch event, a Pod and a PodList. Checks: no crash or
 * leak; every string read is NUL-terminated within its buffer; a stage is
 * one of the enum's; an event type is one of the enum's or -EINVAL.
 *   build-fuzz/tests/fuzz/fuzz-k8s-pod -max_total_time=60 tests/fuzz/corpus/k8s-pod
 */
#include <assert.h>
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "k8s/pod.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(const struct k8s_pod_state *st) {
        assert(memchr(st->sandbox_id, 0, sizeof(st->sandbox_id)));
        assert(memchr(st->name, 0, sizeof(st->name)));
        assert(memchr(st->resource_version, 0, sizeof(st->resource_version)));
        assert(memchr(st->reason, 0, sizeof(st->reason)));
        assert(memchr(st->message, 0, sizeof(st->message)));
        assert(st->stage >= K8S_POD_UNKNOWN && st->stage <= K8S_POD_ENDED);
}

static void on_line(const char *line, size_t len, void *userdata) {
        size_t *n = userdata;
        assert(len > 0 && !memchr(line, '\n', len) && line[len] == 0);
        (*n)++;
        struct k8s_pod_state st;
        int t = k8s_watch_event_parse(line, len, &st);
        assert(t == -EINVAL || (t >= K8S_EVENT_ADDED && t <= K8S_EVENT_ERROR));
        check(&st);
}

static void on_item(const struct k8s_pod_state *st, void *userdata) {
        (void) userdata;
        check(st);
}

static void on_object(const char *name, const char *sandbox_id, void *userdata) {
        (void) userdata;
        assert(name && sandbox_id);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        const char *s = (const char *) data;
        struct k8s_lines l = {0};
        size_t n = 0, half = size / 2;
        int r = k8s_lines_feed(&l, s, half, on_line, &n);
        assert(r == 0 || r == -E2BIG || r == -ENOMEM);
        r = k8s_lines_feed(&l, s + half, size - half, on_line, &n);
        assert(r == 0 || r == -E2BIG || r == -ENOMEM);
        k8s_lines_clear(&l);

        struct k8s_pod_state st;
        if (k8s_pod_parse(s, size, &st) == 0)
                check(&st);
        char rv[32];
        (void) k8s_pod_list_parse(s, size, on_item, NULL, rv, sizeof(rv));
        assert(memchr(rv, 0, sizeof(rv)));
        (void) k8s_object_list_parse(s, size, "SecretList", on_object, NULL);
        char uid[64];
        k8s_object_uid(s, size, uid, sizeof(uid));
        assert(memchr(uid, 0, sizeof(uid)));
        char m[128];
        k8s_status_message(s, size, m, sizeof(m));
        assert(memchr(m, 0, sizeof(m)));
        return 0;
}
