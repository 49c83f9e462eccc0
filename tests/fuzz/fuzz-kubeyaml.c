/* SPDX-License-Identifier: Apache-2.0 */
/* libFuzzer target: the kubeconfig YAML reader (src/k8s/kubeyaml.c). Checks:
 * no crash or leak; either a tree or an error with a message, never both;
 * a tree re-encodes as JSON and nests no deeper than K8S_YAML_DEPTH_MAX.
 *   build-fuzz/tests/fuzz/fuzz-kubeyaml -max_total_time=60 tests/fuzz/corpus/kubeyaml
 */
#include <assert.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "k8s/kubeyaml.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static size_t depth(json_t *j) {
        size_t d = 0, i;
        const char *k;
        json_t *v;
        if (json_is_object(j)) {
                json_object_foreach(j, k, v) {
                        size_t c = depth(v);
                        d = c > d ? c : d;
                }
                return d + 1;
        }
        if (json_is_array(j)) {
                json_array_foreach(j, i, v) {
                        size_t c = depth(v);
                        d = c > d ? c : d;
                }
                return d + 1;
        }
        return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        struct wr_err e = {0};
        json_t *j = k8s_yaml_load((const char *) data, size, &e);
        if (!j) {
                assert(e.code < 0 && e.msg[0]);
                return 0;
        }
        assert(e.code == 0);
        assert(depth(j) <= K8S_YAML_DEPTH_MAX);
        char *s = json_dumps(j, JSON_ENCODE_ANY | JSON_COMPACT);
        assert(s);
        free(s);
        json_decref(j);
        return 0;
}
