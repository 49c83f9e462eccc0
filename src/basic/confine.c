/* SPDX-License-Identifier: Apache-2.0 */
/* The privilege drop of the confined helpers (see confine.h). */
#include "basic/confine.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/capability.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "basic/macro.h"

/* The root: an empty directory owned by root, not writable by others
 * (created, mode 0755, when missing). */
int confine_root_check(const char *dir, struct wr_err *e) {
        if (dir[0] != '/')
                return err_set(e, -EINVAL, "--root %s: must be an absolute path", dir);
        char path[PATH_MAX];
        snprintf(path, sizeof(path), "%s", dir);
        for (char *p = path + 1; *p; p++)
                if (*p == '/') {
                        *p = '\0';
                        (void) mkdir(path, 0755);
                        *p = '/';
                }
        (void) mkdir(path, 0755);
        _cleanup_close_ int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
        if (fd < 0)
                return err_set(e, -errno, "--root %s: %m", dir);
        struct stat st;
        if (fstat(fd, &st) < 0 || st.st_uid != 0 || (st.st_mode & 0022))
                return err_set(e, -EPERM,
                               "--root %s: must be owned by root, not group/other writable", dir);
        char ents[4096];
        long n;
        while ((n = syscall(SYS_getdents64, fd, ents, sizeof(ents))) > 0)
                for (long off = 0; off < n;) {
                        unsigned short reclen;
                        memcpy(&reclen, ents + off + 16, sizeof(reclen));
                        const char *name = ents + off + 19;
                        if (strcmp(name, ".") && strcmp(name, ".."))
                                return err_set(e, -ENOTEMPTY, "--root %s: not empty", dir);
                        off += reclen;
                }
        if (n < 0)
                return err_set(e, -errno, "--root %s: %m", dir);
        return 0;
}

int confine_ids(const char *user, const char *group, uid_t *uid, gid_t *gid, struct wr_err *e) {
        char *end;
        unsigned long v = strtoul(user, &end, 10);
        struct passwd *pw = NULL;
        if (*user && !*end) {
                *uid = (uid_t) v;
                pw = getpwuid(*uid);
        } else {
                pw = getpwnam(user);
                if (!pw)
                        return err_set(e, -ENOENT, "--uid %s: no such user", user);
                *uid = pw->pw_uid;
        }
        if (!group) {
                if (!pw)
                        return err_set(e, -ENOENT, "--uid %s: no passwd entry: give --gid", user);
                *gid = pw->pw_gid;
        } else {
                v = strtoul(group, &end, 10);
                if (*group && !*end) {
                        *gid = (gid_t) v;
                } else {
                        struct group *gr = getgrnam(group);
                        if (!gr)
                                return err_set(e, -ENOENT, "--gid %s: no such group", group);
                        *gid = gr->gr_gid;
                }
        }
        if (*uid == 0 || *gid == 0)
                return err_set(e, -EPERM, "refusing to run as uid/gid 0");
        return 0;
}

int confine_drop(const char *root, uid_t uid, gid_t gid, struct wr_err *e) {
        if (chroot(root) < 0 || chdir("/") < 0)
                return err_set(e, -errno, "chroot %s: %m", root);
        /* the bounding set, while CAP_SETPCAP is still held */
        for (int c = 0; c <= CAP_LAST_CAP; c++)
                if (prctl(PR_CAPBSET_DROP, c, 0, 0, 0) < 0 && errno != EINVAL)
                        return err_set(e, -errno, "drop bounding capability %d: %m", c);
        (void) prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0);
        if (setgroups(0, NULL) < 0 || setresgid(gid, gid, gid) < 0 || setresuid(uid, uid, uid) < 0)
                return err_set(e, -errno, "drop to uid %u gid %u: %m", (unsigned) uid,
                               (unsigned) gid);
        if (setuid(0) == 0)
                return err_set(e, -EPERM, "could regain uid 0");
        cap_t caps = cap_init(); /* all clear */
        if (!caps || cap_set_proc(caps) < 0) {
                int r = -errno;
                if (caps)
                        cap_free(caps);
                return err_set(e, r, "clear capabilities: %s", strerror(-r));
        }
        cap_free(caps);
        if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
                return err_set(e, -errno, "no_new_privs: %m");
        /* no ptrace, no /proc/PID/mem for other processes of the same user
         * (a signer's key, an egress's injected credentials) */
        if (prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) < 0)
                return err_set(e, -errno, "not dumpable: %m");
        return 0;
}

scmp_filter_ctx confine_seccomp_new(uint32_t def, const int *allow, size_t n, int *r) {
        scmp_filter_ctx ctx = seccomp_init(def);
        if (!ctx) {
                *r = -ENOMEM;
                return NULL;
        }
        *r = 0;
        for (size_t i = 0; i < n && *r == 0; i++)
                *r = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, allow[i], 0);
        if (*r == 0)
                *r = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(mmap), 1,
                                      SCMP_A2(SCMP_CMP_MASKED_EQ, PROT_EXEC, 0));
        if (*r == 0)
                *r = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(mprotect), 1,
                                      SCMP_A2(SCMP_CMP_MASKED_EQ, PROT_EXEC, 0));
        if (*r < 0) {
                seccomp_release(ctx);
                return NULL;
        }
        return ctx;
}
