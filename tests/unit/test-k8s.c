/* SPDX-License-Identifier: Apache-2.0 */
/* The pure half of the K8S compute class (src/k8s/pod.c): the Pod a
 * sandbox becomes (labels, warren-init's init container, resources,
 * deadline, env) and how Pod states read (Unschedulable, image pulls,
 * running, OOM, deadline, deleted), watch events and their framing. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "k8s/pod.h"

static void test_pod_json(void **state) {
        (void) state;
        char *env[] = {"A=1", "B=x=y", NULL};
        struct k8s_pod_tag tags[] = {{"team", "ml"}, {"note", "has spaces"}};
        struct k8s_pod_params p = {
                .pod_name = "warren-sb-0011223344556677",
                .sandbox_id = "sb-0011223344556677",
                .environment = "default",
                .sandbox_name = "demo",
                .image = "localhost/warren/busybox:1",
                .init_image = "localhost/warren/init:1",
                .workdir = "/tmp",
                .env = env,
                .cpu_millicores = 500,
                .memory_bytes = 64 << 20,
                .lifetime_s = 90,
                .tags = tags,
                .n_tags = 2,
        };
        char *s = k8s_pod_json(&p);
        assert_non_null(s);
        json_t *j = json_loads(s, 0, NULL);
        assert_non_null(j);
        json_t *labels = json_object_get(json_object_get(j, "metadata"), "labels");
        assert_string_equal(json_string_value(json_object_get(labels, K8S_LABEL_SANDBOX)),
                            "sb-0011223344556677");
        assert_string_equal(json_string_value(json_object_get(labels, K8S_LABEL_MANAGED)), "true");
        assert_string_equal(json_string_value(json_object_get(labels, "tag.warren.dev/team")),
                            "ml");
        /* not a valid label value: an annotation only */
        assert_null(json_object_get(labels, "tag.warren.dev/note"));
        json_t *spec = json_object_get(j, "spec");
        assert_int_equal(json_integer_value(json_object_get(spec, "activeDeadlineSeconds")), 90);
        assert_string_equal(json_string_value(json_object_get(spec, "restartPolicy")), "Never");
        json_t *init = json_array_get(json_object_get(spec, "initContainers"), 0);
        assert_string_equal(json_string_value(json_object_get(init, "image")),
                            "localhost/warren/init:1");
        json_t *c = json_array_get(json_object_get(spec, "containers"), 0);
        assert_string_equal(json_string_value(json_array_get(json_object_get(c, "command"), 0)),
                            K8S_INIT_DIR "/warren-init");
        json_t *lim = json_object_get(json_object_get(c, "resources"), "limits");
        assert_string_equal(json_string_value(json_object_get(lim, "cpu")), "500m");
        assert_string_equal(json_string_value(json_object_get(lim, "memory")), "67108864");
        json_t *ev = json_object_get(c, "env");
        assert_int_equal(json_array_size(ev), 3); /* WARREN_SANDBOX_ID, A, B */
        assert_string_equal(json_string_value(json_object_get(json_array_get(ev, 2), "value")),
                            "x=y");
        json_decref(j);
        free(s);
        p.image = NULL;
        assert_null(k8s_pod_json(&p));
}

static const char *pod_with(const char *status) {
        static char buf[4096];
        snprintf(buf, sizeof(buf),
                 "{\"kind\":\"Pod\",\"metadata\":{\"name\":\"warren-sb-1\",\"resourceVersion\":"
                 "\"5\",\"labels\":{\"warren.dev/sandbox\":\"sb-1\"}},\"status\":%s}",
                 status);
        return buf;
}

static void test_pod_states(void **state) {
        (void) state;
        struct k8s_pod_state st;
        const char *s = pod_with("{\"phase\":\"Pending\"}");
        assert_int_equal(k8s_pod_parse(s, strlen(s), &st), 0);
        assert_string_equal(st.sandbox_id, "sb-1");
        assert_string_equal(st.resource_version, "5");
        assert_int_equal(st.stage, K8S_POD_STARTING);

        s = pod_with("{\"phase\":\"Pending\",\"conditions\":[{\"type\":\"PodScheduled\",\"status\":"
                     "\"False\",\"reason\":\"Unschedulable\",\"message\":\"0/1 nodes\"}]}");
        assert_int_equal(k8s_pod_parse(s, strlen(s), &st), 0);
        assert_int_equal(st.stage, K8S_POD_START_FAILED);
        assert_string_equal(st.reason, "Unschedulable");
        assert_string_equal(st.message, "0/1 nodes");

        s = pod_with(
                "{\"phase\":\"Pending\",\"containerStatuses\":[{\"name\":\"sandbox\",\"state\":"
                "{\"waiting\":{\"reason\":\"ImagePullBackOff\",\"message\":\"m\"}}}]}");
        assert_int_equal(k8s_pod_parse(s, strlen(s), &st), 0);
        assert_int_equal(st.stage, K8S_POD_START_FAILED);
        assert_string_equal(st.reason, "ImagePullBackOff");

        s = pod_with(
                "{\"phase\":\"Pending\",\"containerStatuses\":[{\"name\":\"sandbox\",\"state\":"
                "{\"waiting\":{\"reason\":\"ContainerCreating\"}}}]}");
        assert_int_equal(k8s_pod_parse(s, strlen(s), &st), 0);
        assert_int_equal(st.stage, K8S_POD_STARTING);

        s = pod_with(
                "{\"phase\":\"Running\",\"containerStatuses\":[{\"name\":\"sandbox\",\"state\":"
                "{\"running\":{}}}]}");
        assert_int_equal(k8s_pod_parse(s, strlen(s), &st), 0);
        assert_int_equal(st.stage, K8S_POD_RUNNING);

        s = pod_with("{\"phase\":\"Failed\",\"containerStatuses\":[{\"name\":\"sandbox\",\"state\":"
                     "{\"terminated\":{\"exitCode\":137,\"reason\":\"OOMKilled\"}}}]}");
        assert_int_equal(k8s_pod_parse(s, strlen(s), &st), 0);
        assert_int_equal(st.stage, K8S_POD_ENDED);
        assert_string_equal(st.reason, "OOMKilled");
        assert_int_equal(st.exit_code, 137);

        s = pod_with("{\"phase\":\"Failed\",\"reason\":\"DeadlineExceeded\",\"message\":\"late\"}");
        assert_int_equal(k8s_pod_parse(s, strlen(s), &st), 0);
        assert_int_equal(st.stage, K8S_POD_ENDED);
        assert_string_equal(st.reason, "DeadlineExceeded");

        s = pod_with("{\"phase\":\"Pending\",\"initContainerStatuses\":[{\"name\":\"warren-init\","
                     "\"state\":{\"terminated\":{\"exitCode\":1,\"reason\":\"Error\"}}}]}");
        assert_int_equal(k8s_pod_parse(s, strlen(s), &st), 0);
        assert_int_equal(st.stage, K8S_POD_START_FAILED);
        assert_string_equal(st.reason, "InitContainerFailed");

        assert_int_equal(k8s_pod_parse("[]", 2, &st), -EINVAL);
        assert_int_equal(k8s_pod_parse("{\"kind\":\"Node\",\"metadata\":{}}", 29, &st), -EINVAL);
}

static int lines_seen;
static void on_line(const char *line, size_t len, void *userdata) {
        (void) userdata;
        struct k8s_pod_state st;
        int t = k8s_watch_event_parse(line, len, &st);
        if (lines_seen == 0) {
                assert_int_equal(t, K8S_EVENT_MODIFIED);
                assert_string_equal(st.sandbox_id, "sb-1");
        } else if (lines_seen == 1) {
                assert_int_equal(t, K8S_EVENT_BOOKMARK);
                assert_string_equal(st.resource_version, "9");
        } else {
                assert_int_equal(t, K8S_EVENT_ERROR);
                assert_string_equal(st.message, "gone");
        }
        lines_seen++;
}

static void test_watch(void **state) {
        (void) state;
        char buf[8192];
        snprintf(buf, sizeof(buf),
                 "{\"type\":\"MODIFIED\",\"object\":%s}\n\n{\"type\":\"BOOKMARK\",\"object\":{"
                 "\"metadata\":{\"resourceVersion\":\"9\"}}}\n{\"type\":\"ERROR\",\"object\":{"
                 "\"message\":\"gone\"}}\n",
                 pod_with("{\"phase\":\"Running\"}"));
        struct k8s_lines l = {0};
        /* in pieces of 7 bytes */
        size_t n = strlen(buf);
        for (size_t off = 0; off < n; off += 7)
                assert_int_equal(
                        k8s_lines_feed(&l, buf + off, n - off < 7 ? n - off : 7, on_line, NULL), 0);
        assert_int_equal(lines_seen, 3);
        k8s_lines_clear(&l);
        char m[64];
        const char *st = "{\"kind\":\"Status\",\"message\":\"exceeded quota: q\"}";
        k8s_status_message(st, strlen(st), m, sizeof(m));
        assert_string_equal(m, "exceeded quota: q");
}

static void on_secret(const char *name, const char *sandbox_id, void *userdata) {
        int *n = userdata;
        assert_string_equal(name, "warren-sb-1-env");
        assert_string_equal(sandbox_id, "sb-1");
        (*n)++;
}

static void test_secret(void **state) {
        (void) state;
        char *env[] = {"A=hello", "B=", NULL};
        char *s = k8s_env_secret_json("warren-sb-1-env", "sb-1", "w-00", env);
        assert_non_null(s);
        json_t *j = json_loads(s, 0, NULL);
        json_t *data = json_object_get(j, "data");
        assert_string_equal(json_string_value(json_object_get(data, "A")), "aGVsbG8=");
        assert_string_equal(json_string_value(json_object_get(data, "B")), "");
        json_t *labels = json_object_get(json_object_get(j, "metadata"), "labels");
        assert_string_equal(json_string_value(json_object_get(labels, K8S_LABEL_OWNER)), "w-00");
        json_decref(j);
        free(s);
        s = k8s_owner_patch_json("warren-sb-1", "u-1");
        assert_non_null(strstr(s, "\"uid\":\"u-1\""));
        free(s);
        const char *list = "{\"kind\":\"SecretList\",\"items\":[{\"metadata\":{\"name\":"
                           "\"warren-sb-1-env\",\"labels\":{\"warren.dev/sandbox\":\"sb-1\"}}},"
                           "{\"metadata\":{}}]}";
        int n = 0;
        assert_int_equal(k8s_object_list_parse(list, strlen(list), "SecretList", on_secret, &n), 1);
        assert_int_equal(n, 1);
        assert_int_equal(k8s_object_list_parse(list, strlen(list), "PodList", on_secret, &n),
                         -EINVAL);
        char uid[16];
        const char *obj = "{\"metadata\":{\"uid\":\"abc\"}}";
        k8s_object_uid(obj, strlen(obj), uid, sizeof(uid));
        assert_string_equal(uid, "abc");
}

static void test_labels(void **state) {
        (void) state;
        assert_true(k8s_label_value_valid(""));
        assert_true(k8s_label_value_valid("sb-0011"));
        assert_false(k8s_label_value_valid("-x"));
        assert_false(k8s_label_value_valid("a b"));
        char longv[70];
        memset(longv, 'a', 64);
        longv[64] = 0;
        assert_false(k8s_label_value_valid(longv));
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_pod_json), cmocka_unit_test(test_pod_states),
                cmocka_unit_test(test_watch),    cmocka_unit_test(test_secret),
                cmocka_unit_test(test_labels),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
