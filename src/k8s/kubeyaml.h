/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* k8s/kubeyaml: the YAML that kubeconfigs are written in, read into the JSON
 * tree the kubeconfig reader walks (kubeconfig.c). Pure: bytes in, a
 * jansson tree or an error out; fuzzed (tests/fuzz/fuzz-kubeyaml.c).
 *
 * What is read: one document of block or flow mappings, sequences and
 * scalars (libyaml's YAML 1.1 parser). Mapping keys must be scalars. A
 * plain (unquoted) scalar `true`/`false` becomes a JSON boolean, `null`,
 * `~` or nothing becomes null, a decimal integer a JSON integer; every
 * other scalar, and every quoted one, is a string. Refused, with the line
 * named: anchors and aliases, tags other than the core ones, a second
 * document, nesting deeper than K8S_YAML_DEPTH_MAX, input larger than
 * K8S_YAML_BYTES_MAX, and whatever libyaml rejects. */

#include <jansson.h>
#include <stddef.h>

#include "basic/err.h"

#define K8S_YAML_BYTES_MAX (4u << 20)
#define K8S_YAML_DEPTH_MAX 64

/* A new reference (an object, array or scalar: the document's root), or
 * NULL with e set (-EINVAL: what and which line; -ENOMEM). */
json_t *k8s_yaml_load(const char *text, size_t len, struct wr_err *e);
