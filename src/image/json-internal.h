/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* jansson ownership helpers for src/image: hold a json_t in
 * `_cleanup_json_ json_t *root = json_loadb(...);` and it is released on
 * every path out of the scope (json_decref accepts NULL). */

#include <jansson.h>
#include <string.h>

#include "basic/macro.h"

/* jansson >= 2.9 defines json_decrefp (for its json_auto_t) with GCC and
 * clang; older ones get the house DEFINE_TRIVIAL_CLEANUP_FUNC. */
#ifndef json_auto_t
DEFINE_TRIVIAL_CLEANUP_FUNC(json_t *, json_decref);
#endif
#define _cleanup_json_ _cleanup_(json_decrefp)

/* Wipe the bytes of a JSON string value in place (a password or token that
 * jansson would otherwise free unwiped). Not a string or NULL: nothing. */
static inline void img_json_string_wipe(json_t *s) {
        const char *v = json_string_value(s);
        if (v)
                explicit_bzero((char *) v, json_string_length(s));
}
