/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

#include <stddef.h>

/* Where a Warren helper binary `name` is: $envvar when set (it must be
 * executable), else next to the running executable (installed side by
 * side), else in the build tree (../<subdir>/name), else
 * ../libexec/warren/name, else /usr/libexec/warren/name. 0 with its path
 * in out, or -ENOENT (out then holds the last path tried, or the
 * variable's value). Used by warrend and warren-priv alike. */
int helper_path_find(const char *name, const char *envvar, const char *subdir, char *out,
                     size_t size);
