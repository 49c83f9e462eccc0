/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* Users as Docker's --user and an image's USER give them: "name", "uid",
 * "name:group", "uid:gid" (names or numbers on either side). Names are
 * looked up in the sandbox's own /etc/passwd and /etc/group (or an image's
 * layers), which the sandbox controls: read with RESOLVE_IN_ROOT,
 * only as regular files of at most SBX_USER_FILE_MAX bytes, and parsed
 * defensively (fuzzed: tests/fuzz/fuzz-user.c). */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "basic/err.h"

#define SBX_USER_FILE_MAX (1024 * 1024)

struct sbx_user {
        uint32_t uid, gid;
        char home[256]; /* from /etc/passwd; "" when unknown */
};

/* Find a passwd entry (name:pw:uid:gid:gecos:home:shell) by name, or by
 * uid when name is NULL, in buf (len bytes, not NUL-terminated). Returns 1
 * and fills *ret when found, 0 when not (malformed lines are skipped). */
int sbx_passwd_find(const char *buf, size_t len, const char *name, uint32_t uid,
                    struct sbx_user *ret);

/* Find a group entry (name:pw:gid:members) by name. Returns 1 and sets
 * *gid, or 0. */
int sbx_group_find(const char *buf, size_t len, const char *name, uint32_t *gid);

/* Resolve spec against a root file system: roots[0..n_roots) are
 * directory fds searched in order the way overlayfs stacks them (a
 * sandbox's merged root alone, or an image's layers top-most first: a
 * whiteout or an opaque etc/ ends the search). A number without a passwd
 * entry gets gid = uid; a user without a group part gets its passwd
 * group; "root" needs no entry. Errors: -EINVAL (malformed spec), -ENOENT
 * (no such user or group), INVALID_ARGUMENT in e, naming what (e.g.
 * "start.user"); I/O errors as they are. */
int sbx_user_resolve(const int *roots, size_t n_roots, const char *spec, const char *what,
                     struct sbx_user *ret, struct wr_err *e);

/* A sandbox's /etc/passwd and /etc/group as read already (from fds
 * warren-init opened: sbx_etc_read): each a heap buffer of _len bytes,
 * or NULL with _len a negative errno (-ENOENT: no such file). */
struct sbx_etc {
        char *passwd;
        ssize_t passwd_len;
        char *group;
        ssize_t group_len;
};

/* Read a regular file's fd (at most SBX_USER_FILE_MAX bytes) into *ret
 * (heap). Returns the length, -EBADFD (not a regular file), -EFBIG,
 * -ENOMEM. */
ssize_t sbx_etc_read(int fd, char **ret);

/* sbx_user_resolve on files read already (a running sandbox's, opened by
 * its init). Same rules and errors. */
int sbx_user_resolve_etc(const struct sbx_etc *etc, const char *spec, const char *what,
                         struct sbx_user *ret, struct wr_err *e);
