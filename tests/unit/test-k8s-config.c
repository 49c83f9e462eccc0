/* SPDX-License-Identifier: Apache-2.0 */
/* Reading a kubeconfig (src/k8s/kubeconfig.c): the current context's
 * cluster, user and namespace, data inline (base64) or in files relative
 * to the kubeconfig, and each refusal named. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "k8s/kubeconfig.h"

static char dir[64];

static const char *write_file(const char *name, const char *text) {
        static char path[128];
        snprintf(path, sizeof(path), "%s/%s", dir, name);
        FILE *f = fopen(path, "w");
        assert_non_null(f);
        fputs(text, f);
        fclose(f);
        return path;
}

static int setup(void **state) {
        (void) state;
        snprintf(dir, sizeof(dir), "/tmp/warren-kc-XXXXXX");
        return mkdtemp(dir) ? 0 : -1;
}

static int teardown(void **state) {
        (void) state;
        char cmd[128];
        snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
        return system(cmd);
}

static void test_inline_and_files(void **state) {
        (void) state;
        write_file("ca.pem", "CA-PEM");
        const char *p = write_file(
                "kc",
                "{\"current-context\":\"c\",\"contexts\":[{\"name\":\"other\",\"context\":{}},"
                "{\"name\":\"c\",\"context\":{\"cluster\":\"k\",\"user\":\"u\",\"namespace\":"
                "\"ns1\"}}],\"clusters\":[{\"name\":\"k\",\"cluster\":{\"server\":"
                "\"https://127.0.0.1:6443/\",\"certificate-authority\":\"ca.pem\"}}],"
                "\"users\":[{\"name\":\"u\",\"user\":{\"client-certificate-data\":"
                "\"Q0VSVA==\",\"client-key-data\":\"S0VZ\",\"token\":\"t0k\"}}]}");
        struct k8s_conn c;
        struct wr_err e = {0};
        assert_int_equal(k8s_conn_load(p, &c, &e), 0);
        assert_string_equal(c.server, "https://127.0.0.1:6443");
        assert_string_equal(c.namespace_, "ns1");
        assert_string_equal(c.ca_pem, "CA-PEM");
        assert_int_equal(c.cert_len, 4);
        assert_memory_equal(c.cert_pem, "CERT", 4);
        assert_int_equal(c.key_len, 3);
        assert_memory_equal(c.key_pem, "KEY", 3);
        assert_string_equal(c.token, "t0k");
        assert_false(c.insecure);
        k8s_conn_clear(&c);
}

static void test_refusals(void **state) {
        (void) state;
        static const struct {
                const char *text, *msg;
        } cases[] = {
                {"apiVersion: v1\n", "no current-context"},
                {"[1, 2]\n", "its top level is not a mapping"},
                {"a: [1\n", "YAML line"},
                {"a: &x 1\nb: *x\n", "anchors"},
                {"current-context: c\ncurrent-context: d\n", "a key appears twice"},
                {"---\ncurrent-context: c\n---\nx: 1\n", "a second document"},
                {"{}", "no current-context"},
                {"{\"current-context\":\"x\"}", "current-context names no context"},
                {"{\"current-context\":\"c\",\"contexts\":[{\"name\":\"c\",\"context\":{"
                 "\"cluster\":"
                 "\"k\"}}]}",
                 "the context's cluster is not in clusters"},
                {"{\"current-context\":\"c\",\"contexts\":[{\"name\":\"c\",\"context\":{"
                 "\"cluster\":"
                 "\"k\"}}],\"clusters\":[{\"name\":\"k\",\"cluster\":{\"server\":\"http://x\"}}]}",
                 "must be an https:// URL"},
                {"{\"current-context\":\"c\",\"contexts\":[{\"name\":\"c\",\"context\":{"
                 "\"cluster\":"
                 "\"k\",\"user\":\"u\"}}],\"clusters\":[{\"name\":\"k\",\"cluster\":{\"server\":"
                 "\"https://x\"}}],\"users\":[{\"name\":\"u\",\"user\":{\"exec\":{}}}]}",
                 "exec and auth-provider credentials are not supported"},
                {"{\"current-context\":\"c\",\"contexts\":[{\"name\":\"c\",\"context\":{"
                 "\"cluster\":"
                 "\"k\",\"user\":\"u\"}}],\"clusters\":[{\"name\":\"k\",\"cluster\":{\"server\":"
                 "\"https://x\"}}],\"users\":[{\"name\":\"u\",\"user\":{\"client-key-data\":"
                 "\"S0VZ\"}}]}",
                 "a client certificate needs its key"},
                {"{\"current-context\":\"c\",\"contexts\":[{\"name\":\"c\",\"context\":{"
                 "\"cluster\":"
                 "\"k\"}}],\"clusters\":[{\"name\":\"k\",\"cluster\":{\"server\":\"https://x\","
                 "\"certificate-authority\":\"missing.pem\"}}]}",
                 "certificate-authority"},
        };
        for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
                const char *p = write_file("bad", cases[i].text);
                struct k8s_conn c;
                struct wr_err e = {0};
                int r = k8s_conn_load(p, &c, &e);
                if (r >= 0)
                        fail_msg("case %zu accepted", i);
                if (!strstr(e.msg, cases[i].msg))
                        fail_msg("case %zu: \"%s\", want \"%s\"", i, e.msg, cases[i].msg);
                assert_true(strstr(e.msg, "--k8s-kubeconfig") != NULL);
        }
        struct k8s_conn c;
        struct wr_err e = {0};
        assert_int_equal(k8s_conn_load("/nonexistent/kc", &c, &e), -ENOENT);
        unsetenv("KUBERNETES_SERVICE_HOST");
        assert_int_equal(k8s_conn_load("in-cluster", &c, &e), -EINVAL);
        assert_non_null(strstr(e.msg, "KUBERNETES_SERVICE_HOST"));
}

/* The YAML that kubeadm, kind and `kubectl config` write: the same
 * connection as the JSON form; booleans and nulls typed as kubectl reads
 * them, quoted scalars kept as strings. */
static void test_yaml(void **state) {
        (void) state;
        write_file("ca2.pem", "CA2");
        const char *p = write_file("kc.yaml", "apiVersion: v1\n"
                                              "kind: Config\n"
                                              "preferences: {}\n"
                                              "current-context: kind-warren\n"
                                              "clusters:\n"
                                              "- name: other\n"
                                              "  cluster: {server: \"https://10.0.0.1\"}\n"
                                              "- cluster:\n"
                                              "    certificate-authority: ca2.pem\n"
                                              "    server: https://127.0.0.1:6443//\n"
                                              "    insecure-skip-tls-verify: true\n"
                                              "  name: kind-warren\n"
                                              "contexts:\n"
                                              "- context:\n"
                                              "    cluster: kind-warren\n"
                                              "    user: kind-warren\n"
                                              "    namespace: \"007\"\n"
                                              "  name: kind-warren\n"
                                              "users:\n"
                                              "- name: kind-warren\n"
                                              "  user:\n"
                                              "    client-certificate-data: Q0VSVA==\n"
                                              "    client-key-data: S0VZ\n");
        struct k8s_conn c;
        struct wr_err e = {0};
        if (k8s_conn_load(p, &c, &e) < 0)
                fail_msg("%s", e.msg);
        assert_string_equal(c.server, "https://127.0.0.1:6443");
        assert_string_equal(c.namespace_, "007");
        assert_string_equal(c.ca_pem, "CA2");
        assert_memory_equal(c.cert_pem, "CERT", 4);
        assert_memory_equal(c.key_pem, "KEY", 3);
        assert_null(c.token);
        assert_true(c.insecure);
        k8s_conn_clear(&c);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_inline_and_files),
                cmocka_unit_test(test_refusals),
                cmocka_unit_test(test_yaml),
        };
        return cmocka_run_group_tests(tests, setup, teardown);
}
