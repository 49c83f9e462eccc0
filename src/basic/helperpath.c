/* SPDX-License-Identifier: Apache-2.0 */
#include "basic/helperpath.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int helper_path_find(const char *name, const char *envvar, const char *subdir, char *out,
                     size_t size) {
        const char *env = getenv(envvar);
        if (env && *env) {
                snprintf(out, size, "%s", env);
                return access(out, X_OK) == 0 ? 0 : -ENOENT;
        }
        char exe[PATH_MAX];
        ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
        if (n > 0) {
                exe[n] = 0;
                char *slash = strrchr(exe, '/');
                if (slash)
                        *slash = 0;
                for (int i = 0; i < 3; i++) {
                        if (i == 0)
                                snprintf(out, size, "%s/%s", exe, name);
                        else if (i == 1)
                                snprintf(out, size, "%s/../%s/%s", exe, subdir, name);
                        else
                                snprintf(out, size, "%s/../libexec/warren/%s", exe, name);
                        if (access(out, X_OK) == 0)
                                return 0;
                }
        }
        snprintf(out, size, "/usr/libexec/warren/%s", name);
        return access(out, X_OK) == 0 ? 0 : -ENOENT;
}
