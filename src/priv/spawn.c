/* SPDX-License-Identifier: Apache-2.0 */
/* warren-priv, phase 3: processes beside a sandbox and the managed SSH dir
 * (SANDBOX_SPAWN_BESIDE, SSH_DIR_PREPARE; docs/privsep.md). warren-priv
 * holds the real handle of each sandbox (lifecycle.c); warrend's adopted
 * handle cannot spawn. What may run is a closed set (enum
 * priv_beside_kind: OpenSSH's ssh-agent and ssh-add with fixed argv and
 * environment), as the one uid the sandbox's root maps to on the host
 * (nobody without a user namespace), in the sandbox's ssh dir. warren-priv
 * is the process's parent and reaps it (a thread per process, waiting on
 * its pidfd); warrend reads the exit status through its own pidfd
 * (PIDFD_INFO_EXIT). */
#include "priv/priv-internal.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <pwd.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

#include "basic/log.h"
#include "sandbox/uids.h"

_Static_assert(PRIV_UID_SLOTS == SBX_UIDS_SLOTS, "the uid slots of uids.h");

static void sfail(struct priv_result *res, int r, const char *fmt, ...)
        __attribute__((format(printf, 3, 4)));
static void sfail(struct priv_result *res, int r, const char *fmt, ...) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(res->msg, sizeof(res->msg), fmt, ap);
        va_end(ap);
        res->err = r < 0 ? -r : r;
}

/* "nobody"'s uid and gid (as ssh.c's agent_user). -ENOENT: none. */
static int nobody(uid_t *uid, gid_t *gid) {
        struct passwd pw, *p = NULL;
        char buf[1024];
        if (getpwnam_r("nobody", &pw, buf, sizeof(buf), &p) != 0 || !p || pw.pw_uid == 0)
                return -ENOENT;
        *uid = pw.pw_uid;
        *gid = pw.pw_gid ? pw.pw_gid : pw.pw_uid;
        return 0;
}

static const char *find_prog(const char *name, char *buf, size_t size) {
        static const char *const dirs[] = {"/usr/bin", "/bin", "/usr/local/bin"};
        for (size_t i = 0; i < sizeof(dirs) / sizeof(dirs[0]); i++) {
                snprintf(buf, size, "%s/%s", dirs[i], name);
                if (access(buf, X_OK) == 0)
                        return buf;
        }
        return NULL;
}

/* The host uid the user namespace of pid maps its root to; 0 when pid
 * has none of its own (the identity map). -errno. */
static int root_of(pid_t pid, uint32_t *ret) {
        char p[64];
        snprintf(p, sizeof(p), "/proc/%d/uid_map", (int) pid);
        FILE *f = fopen(p, "re");
        if (!f)
                return -errno;
        unsigned long in, out, count;
        int r = -ENOENT;
        while (fscanf(f, "%lu %lu %lu", &in, &out, &count) == 3)
                if (in == 0) {
                        *ret = (uint32_t) out;
                        r = 0;
                        break;
                }
        fclose(f);
        return r;
}

/* stdin/stdout/stderr: a pipe, a socket or /dev/null. */
static bool stdio_ok(int fd) {
        struct stat st;
        if (fstat(fd, &st) < 0)
                return false;
        return S_ISFIFO(st.st_mode) || S_ISSOCK(st.st_mode) ||
               (S_ISCHR(st.st_mode) && st.st_rdev == makedev(1, 3));
}

static void *reaper(void *arg) {
        int pidfd = (int) (intptr_t) arg;
        siginfo_t si;
        while (waitid(P_PIDFD, (id_t) pidfd, &si, WEXITED) < 0 && errno == EINTR)
                ;
        close(pidfd);
        return NULL;
}

/* Reap the process of pidfd (a dup, taken) when it exits, on a thread of
 * its own. */
static int reap_later(int pidfd) {
        pthread_attr_t attr;
        pthread_t th;
        if (pthread_attr_init(&attr) != 0)
                return -ENOMEM;
        (void) pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
        (void) pthread_attr_setstacksize(&attr, 64 * 1024);
        int r = pthread_create(&th, &attr, reaper, (void *) (intptr_t) pidfd);
        pthread_attr_destroy(&attr);
        return -r;
}

/* The ids the agent of the sandbox whose init is t->pid runs as: the
 * host id its root maps to, or nobody's without a user namespace. */
static int agent_ids(const struct priv_target *t, uid_t *uid, gid_t *gid, struct priv_result *res) {
        uint32_t root = 0;
        int r = root_of((pid_t) t->pid, &root);
        if (r >= 0 && root == 0)
                r = nobody(uid, gid);
        else if (r >= 0)
                *uid = *gid = root;
        if (r < 0)
                sfail(res, r, "spawn beside %s: its root's host uid: %s", t->id, strerror(-r));
        return r;
}

static int uid_match(const struct priv_spawn_beside *s, const struct priv_target *t, uid_t uid,
                     gid_t gid, struct priv_result *res) {
        if (s->uid == uid && s->gid == gid)
                return 0;
        sfail(res, -EPERM, "spawn beside %s: uid %u gid %u (the sandbox's agent runs as %u:%u)",
              t->id, s->uid, s->gid, (unsigned) uid, (unsigned) gid);
        return -EPERM;
}

void priv_spawn_beside_run(const struct priv_spawn_beside *s, const int *fds, size_t n_fds,
                           struct priv_result *res, struct priv_volssh_out *o) {
        const struct priv_target *t = &s->t;
        if (n_fds != PRIV_SPAWN_FDS)
                return sfail(res, -EPROTO, "spawn beside %s: %zu fds", t->id, n_fds);
        /* the program: a closed set */
        static char *const agent_argv[] = {(char *) "ssh-agent", (char *) "-D", (char *) "-a",
                                           (char *) "agent.sock", NULL};
        static char *const agent_env[] = {(char *) "PATH=/usr/bin:/bin", (char *) "LC_ALL=C", NULL};
        static char *const add_argv[] = {(char *) "ssh-add", (char *) "-q", (char *) "-", NULL};
        static char *const add_env[] = {(char *) "SSH_AUTH_SOCK=agent.sock",
                                        (char *) "PATH=/usr/bin:/bin", (char *) "LC_ALL=C", NULL};
        bool agent = s->kind == PRIV_BESIDE_SSH_AGENT;
        char prog[64];
        if (!find_prog(agent ? "ssh-agent" : "ssh-add", prog, sizeof(prog)))
                return sfail(res, -ENOENT,
                             "managed_ssh: the host has no OpenSSH %s (apt-get install "
                             "openssh-client)",
                             agent ? "ssh-agent" : "ssh-add");
        /* the cwd: the sandbox's own ssh dir, nothing else */
        char dir[PRIV_PATH_MAX];
        snprintf(dir, sizeof(dir), "%s/%s/ssh", PRIV_ROOT_SANDBOXES, t->id);
        int want = priv_open_beneath(dir, O_PATH);
        struct stat a, b;
        bool same = want >= 0 && fstat(want, &a) == 0 && fstat(fds[0], &b) == 0 &&
                    S_ISDIR(b.st_mode) && a.st_dev == b.st_dev && a.st_ino == b.st_ino;
        if (want >= 0)
                close(want);
        if (!same)
                return sfail(res, -EACCES, "spawn beside %s: the cwd fd is not %s", t->id, dir);
        for (size_t i = 1; i < PRIV_SPAWN_FDS; i++)
                if (!stdio_ok(fds[i]))
                        return sfail(res, -EACCES,
                                     "spawn beside %s: fd %zu is not a pipe, socket or /dev/null",
                                     t->id, i);
        /* the uid: the one the sandbox's root is on the host, or nobody
         * (read before the target is attached, and again after: the
         * attach proves the pid is the sandbox's init) */
        uid_t uid = 0;
        gid_t gid = 0;
        int r = agent_ids(t, &uid, &gid, res);
        if (r < 0 || (r = uid_match(s, t, uid, gid, res)) < 0)
                return;
        /* the sandbox, as SANDBOX_SIGNAL names it */
        struct rt_sandbox *sb = priv_owned_get(t);
        bool owned = sb != NULL;
        struct wr_err e = {0};
        if (!sb) {
                char adir[PRIV_PATH_MAX];
                snprintf(adir, sizeof(adir), "/-/%s/%s", PRIV_ROOT_SANDBOXES, t->id);
                r = rt_sandbox_attach(t->id, adir, (pid_t) t->pid, t->start_time,
                                      (enum rt_cgroup_mode) t->cgroup_mode, &sb, &e);
                if (r < 0)
                        return sfail(res, r, "%s", e.msg);
        }
        if (agent_ids(t, &uid, &gid, res) >= 0 && uid_match(s, t, uid, gid, res) >= 0) {
                struct rt_beside be = {.path = prog,
                                       .argv = agent ? agent_argv : add_argv,
                                       .envp = agent ? agent_env : add_env,
                                       .cwd_fd = fds[0],
                                       .stdin_fd = fds[1],
                                       .stdout_fd = fds[2],
                                       .stderr_fd = fds[3],
                                       .uid = uid,
                                       .gid = gid};
                int pidfd = -EBADF;
                pid_t pid = 0;
                r = rt_sandbox_spawn_beside(sb, &be, &pidfd, &pid, &e);
                if (r < 0) {
                        sfail(res, r, "%s", e.msg);
                } else {
                        int keep = fcntl(pidfd, F_DUPFD_CLOEXEC, 3);
                        if (keep < 0 || reap_later(keep) < 0) {
                                /* it cannot be reaped: it does not run */
                                (void) syscall(SYS_pidfd_send_signal, pidfd, SIGKILL, NULL, 0);
                                siginfo_t si;
                                (void) waitid(P_PIDFD, (id_t) pidfd, &si, WEXITED);
                                if (keep >= 0)
                                        close(keep);
                                close(pidfd);
                                sfail(res, -ENOMEM, "spawn beside %s: no reaper thread", t->id);
                        } else {
                                o->fd = pidfd;
                                o->pid = (int32_t) pid;
                        }
                }
        }
        if (owned)
                priv_owned_put(sb);
        else
                rt_sandbox_free(sb);
}

void priv_ssh_dir_run(const struct priv_ssh_dir *d, struct priv_result *res) {
        uid_t uid;
        gid_t gid;
        if (d->uid_slot >= 0) {
                uid = gid = sbx_uids_base(d->uid_slot);
        } else if (nobody(&uid, &gid) < 0) {
                return sfail(
                        res, -ENOENT,
                        "managed_ssh: the host has no user \"nobody\" to run the ssh-agent as");
        }
        char p[PRIV_PATH_MAX];
        snprintf(p, sizeof(p), "%s/%s", PRIV_ROOT_SANDBOXES, d->id);
        int dfd = priv_open_beneath(p, O_RDONLY);
        if (dfd == -ENOENT) {
                /* the sandbox's dir: made here as sbx_ssh_dir_prepare makes it */
                int root = priv_open_beneath(PRIV_ROOT_SANDBOXES, O_RDONLY);
                if (root < 0)
                        return sfail(res, root, "managed_ssh: open %s: %s", PRIV_ROOT_SANDBOXES,
                                     strerror(-root));
                if (mkdirat(root, d->id, 0700) < 0 && errno != EEXIST) {
                        int err = errno;
                        close(root);
                        return sfail(res, -err, "managed_ssh: mkdir %s: %s", p, strerror(err));
                }
                close(root);
                /* made here, before the create: the dropped warrend must
                 * reach sandboxes/<id>/ssh through it (the bind source) */
                priv_sandbox_dir_give(d->id);
                dfd = priv_open_beneath(p, O_RDONLY);
        }
        if (dfd < 0)
                return sfail(res, dfd, "managed_ssh: open %s: %s", p, strerror(-dfd));
        if (mkdirat(dfd, "ssh", 0700) < 0 && errno != EEXIST) {
                int err = errno;
                close(dfd);
                return sfail(res, -err, "managed_ssh: mkdir %s/ssh: %s", p, strerror(err));
        }
        close(dfd);
        snprintf(p, sizeof(p), "%s/%s/ssh", PRIV_ROOT_SANDBOXES, d->id);
        int sshfd = priv_open_beneath(p, O_RDONLY);
        if (sshfd < 0)
                return sfail(res, sshfd, "managed_ssh: open %s: %s", p, strerror(-sshfd));
        /* a dropped warrend (phase 5) gets search access through its group
         * (the agent's readiness: agent.sock appearing in it) */
        gid_t wgid;
        bool dropped = priv_drop_gid(&wgid);
        if (fchown(sshfd, uid, dropped ? wgid : gid) < 0 || fchmod(sshfd, dropped ? 0710 : 0700) < 0)
                sfail(res, -errno, "managed_ssh: prepare %s: %m", p);
        close(sshfd);
}
