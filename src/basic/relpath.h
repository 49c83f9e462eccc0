/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* A relative path as a sandbox names its files (the journal's walk and
 * the rollback's writes, docs/privsep.md "Phase 4b-2"): p[0..n), 1..max
 * bytes, no NUL, not absolute, not ending in '/', no empty, "." or ".."
 * component; any other byte (the names are the sandbox's). Pure. */

#include <stdbool.h>
#include <stddef.h>
#include <string.h>

static inline bool wr_relpath_ok(const char *p, size_t n, size_t max) {
        if (n == 0 || n > max || p[0] == '/' || p[n - 1] == '/' || memchr(p, 0, n))
                return false;
        for (const char *c = p; c < p + n;) {
                const char *end = memchr(c, '/', (size_t) (p + n - c));
                size_t l = end ? (size_t) (end - c) : (size_t) (p + n - c);
                if (l == 0 || (l == 1 && c[0] == '.') || (l == 2 && c[0] == '.' && c[1] == '.'))
                        return false;
                c += l + 1;
        }
        return true;
}
