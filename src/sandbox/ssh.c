/* SPDX-License-Identifier: Apache-2.0 */
/* Managed SSH, the agent half (ssh.h): one OpenSSH ssh-agent per sandbox,
 * started beside it (in its cgroups, as "nobody", no capabilities,
 * no_new_privs: runtime.h rt_sandbox_spawn_beside) in <sandbox dir>/ssh,
 * which the sandbox sees read-only at SBX_SSH_DIR. The keys go in through
 * ssh-add reading a pipe; warrend's copies are wiped by the spec. The
 * agent dies with the sandbox (every kill of its cgroups) and is reaped
 * through its pidfd; a sandbox re-attached after a warrend restart keeps
 * its agent (then an orphan of the old warrend, still in the cgroups). */
#include "sandbox/sandbox-internal.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pwd.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "basic/log.h"
#include "basic/macro.h"
#include "priv/client.h"
#include "sandbox/ssh.h"

#define AGENT_USER "nobody"
#define AGENT_READY_MS 3000
#define ADD_TIMEOUT_MS 5000

/* The agent's uid: ssh-agent takes connections from uid 0 and its own
 * uid only (SO_PEERCRED, as the host sees the peer). In a sandbox with a
 * user namespace its root is the first uid of its range on the host: the
 * agent runs as that uid (it sits in the host's pid and user namespaces:
 * nothing in the sandbox can name, signal or trace it). Without one, as
 * nobody (the sandbox's root is uid 0). */
static int agent_user(int32_t uid_slot, uid_t *uid, gid_t *gid, struct wr_err *e) {
        if (uid_slot >= 0) {
                *uid = *gid = sbx_uids_base(uid_slot);
                return 0;
        }
        struct passwd pw, *res = NULL;
        char buf[1024];
        if (getpwnam_r(AGENT_USER, &pw, buf, sizeof(buf), &res) != 0 || !res || pw.pw_uid == 0)
                return err_setx(e, -ENOENT, WR_STATUS_FAILED_PRECONDITION, WR_FAULT_SERVICE,
                                "managed_ssh: the host has no user \"%s\" to run the ssh-agent "
                                "as",
                                AGENT_USER);
        *uid = pw.pw_uid;
        *gid = pw.pw_gid ? pw.pw_gid : pw.pw_uid;
        return 0;
}

static const char *find_prog(const char *name, char *buf, size_t size) {
        static const char *const dirs[] = {"/usr/bin", "/bin", "/usr/local/bin"};
        for (size_t i = 0; i < ELEMENTSOF(dirs); i++) {
                snprintf(buf, size, "%s/%s", dirs[i], name);
                if (access(buf, X_OK) == 0)
                        return buf;
        }
        return NULL;
}

int sbx_ssh_dir_prepare(const char *dir, int32_t uid_slot, struct wr_err *e) {
        uid_t uid;
        gid_t gid;
        int r = agent_user(uid_slot, &uid, &gid, e);
        if (r < 0)
                return r;
        if (mkdir(dir, 0700) < 0 && errno != EEXIST)
                return err_set(e, -errno, "managed_ssh: mkdir %s: %m", dir);
        _cleanup_close_ int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (dfd < 0)
                return err_set(e, -errno, "managed_ssh: open %s: %m", dir);
        if (mkdirat(dfd, "ssh", 0700) < 0 && errno != EEXIST)
                return err_set(e, -errno, "managed_ssh: mkdir %s/ssh: %m", dir);
        _cleanup_close_ int sfd =
                openat(dfd, "ssh", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (sfd < 0 || fchown(sfd, uid, gid) < 0 || fchmod(sfd, 0700) < 0)
                return err_set(e, -errno, "managed_ssh: prepare %s/ssh: %m", dir);
        return 0;
}

int sbx_ssh_dir_prepare_sb(struct sbx *sb, const char *dir, struct wr_err *e) {
        if (!sb->m->priv)
                return sbx_ssh_dir_prepare(dir, sb->uid_slot, e);
        /* --privsep: warren-priv makes <state>/sandboxes/<id>/ssh */
        char want[PATH_MAX];
        int r = sbx_dir_path(sb->m, sb->id, want, sizeof(want));
        if (r < 0 || strcmp(want, dir) != 0)
                return err_set(e, -EINVAL, "managed_ssh: %s is not the sandbox's dir", dir);
        r = priv_ssh_dir_prepare(sb->m->priv, sb->id, sb->uid_slot, e);
        return r < 0 ? err_prefix(e, r, "managed_ssh") : 0;
}

/* Start b (the program of kind) beside sb: in process, or by warren-priv
 * with --privsep (SANDBOX_SPAWN_BESIDE: warrend's adopted handle cannot
 * spawn; warren-priv runs the same program, argv and environment, named
 * by kind, and is its parent). */
static int spawn(struct sbx *sb, uint32_t kind, const struct rt_beside *b, int *ret_pidfd,
                 struct wr_err *e) {
        if (!sb->m->priv)
                return rt_sandbox_spawn_beside(sb->rt, b, ret_pidfd, NULL, e);
        struct priv_target t;
        if (sbx_priv_target(sb->m, sb->rt, &t) < 0)
                return err_set(e, -ESRCH, "the sandbox is gone");
        _cleanup_close_ int null = open("/dev/null", O_RDWR | O_CLOEXEC);
        if (null < 0)
                return err_set(e, -errno, "open /dev/null: %m");
        int fds[PRIV_SPAWN_FDS] = {b->cwd_fd, b->stdin_fd > 2 ? b->stdin_fd : null,
                                   b->stdout_fd > 2 ? b->stdout_fd : null,
                                   b->stderr_fd > 2 ? b->stderr_fd : null};
        return priv_sandbox_spawn_beside(sb->m->priv, &t, kind, b->uid, b->gid, fds, ret_pidfd,
                                         NULL, e);
}

/* Reap the process of pidfd (SIGKILLed first unless it exited) and close
 * it. Returns its wait status. With --privsep it is warren-priv's child
 * (warren-priv reaps it): its status is read through the pidfd. */
static int reap_status(int *pidfd, bool want_status) {
        siginfo_t si = {0};
        if (*pidfd < 0)
                return 0;
        (void) syscall(SYS_pidfd_send_signal, *pidfd, SIGKILL, NULL, 0);
        if (RETRY_EINTR(waitid(P_PIDFD, (id_t) *pidfd, &si, WEXITED)) < 0 && errno == ECHILD) {
                int st = want_status ? priv_pidfd_status(*pidfd, 2000) : 0;
                closep(pidfd);
                if (st < 0) {
                        log_debug("managed_ssh: exit status of a process beside: %s",
                                  strerror(-st));
                        return 0x7f00; /* unknown: as a failed exec */
                }
                return st;
        }
        closep(pidfd);
        return si.si_code == CLD_EXITED ? si.si_status << 8 : si.si_status;
}

static int reap(int *pidfd) {
        return reap_status(pidfd, false);
}

void sbx_ssh_reap(struct sbx *sb) {
        (void) reap(&sb->ssh_pidfd);
}

/* Wait up to ms for pidfd to be readable (the process exited): 1 when it
 * did, 0 on timeout. */
static int wait_exit(int pidfd, int ms) {
        struct pollfd p = {.fd = pidfd, .events = POLLIN};
        int r = RETRY_EINTR(poll(&p, 1, ms));
        return r > 0;
}

/* Feed one key to the agent with ssh-add; its complaint (if any) in e. */
static int add_key(struct sbx *sb, int dirfd, uid_t uid, gid_t gid, const char *ssh_add,
                   const struct sbx_ssh_dest *d, struct wr_err *e) {
        int in[2] = {-EBADF, -EBADF}, errp[2] = {-EBADF, -EBADF};
        int pidfd = -EBADF, r;
        if (pipe2(in, O_CLOEXEC) < 0 || pipe2(errp, O_CLOEXEC | O_NONBLOCK) < 0) {
                r = err_set(e, -errno, "managed_ssh.%s: pipe: %m", d->alias);
                goto out;
        }
        char *const argv[] = {(char *) "ssh-add", (char *) "-q", (char *) "-", NULL};
        char *const envp[] = {(char *) "SSH_AUTH_SOCK=agent.sock", (char *) "PATH=/usr/bin:/bin",
                              (char *) "LC_ALL=C", NULL};
        struct rt_beside b = {.path = ssh_add,
                              .argv = argv,
                              .envp = envp,
                              .cwd_fd = dirfd,
                              .stdin_fd = in[0],
                              .stderr_fd = errp[1],
                              .uid = uid,
                              .gid = gid};
        if ((r = spawn(sb, PRIV_BESIDE_SSH_ADD, &b, &pidfd, e)) < 0)
                goto out;
        closep(&in[0]);
        closep(&errp[1]);
        /* the key, with the final newline OpenSSH's parser wants */
        size_t off = 0;
        while (off < d->key_len) {
                ssize_t n = RETRY_EINTR(write(in[1], d->key + off, d->key_len - off));
                if (n <= 0)
                        break; /* ssh-add went away: its status says why */
                off += (size_t) n;
        }
        if (d->key_len && d->key[d->key_len - 1] != '\n')
                (void) !write(in[1], "\n", 1);
        closep(&in[1]);
        if (!wait_exit(pidfd, ADD_TIMEOUT_MS)) {
                (void) reap(&pidfd);
                r = err_setx(e, -ETIMEDOUT, WR_STATUS_FAILED_PRECONDITION, WR_FAULT_CLIENT,
                             "managed_ssh.%s: ssh-add did not finish in %d s (is the key "
                             "protected by a passphrase? managed keys must have none)",
                             d->alias, ADD_TIMEOUT_MS / 1000);
                goto out;
        }
        char msg[256] = "";
        ssize_t n = read(errp[0], msg, sizeof(msg) - 1);
        msg[n > 0 ? n : 0] = '\0';
        for (char *p = msg; *p; p++)
                if (*p == '\n' || *p == '\r' || (unsigned char) *p < 0x20)
                        *p = ' ';
        int status = reap_status(&pidfd, true);
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
                r = err_setx(e, -EINVAL, WR_STATUS_FAILED_PRECONDITION, WR_FAULT_CLIENT,
                             "managed_ssh.%s: the key in the secret is not usable: %s (store a "
                             "private key without passphrase: `warren secret set NAME < "
                             "id_ed25519`)",
                             d->alias, msg[0] ? msg : "ssh-add failed");
                goto out;
        }
        r = 0;
out:
        closep(&in[0]);
        closep(&in[1]);
        closep(&errp[0]);
        closep(&errp[1]);
        if (pidfd >= 0)
                (void) reap(&pidfd);
        return r;
}

int sbx_ssh_start(struct sbx *sb, const struct sbx_ssh_dest *d, size_t n, struct wr_err *e) {
        if (n == 0)
                return 0;
        uid_t uid;
        gid_t gid;
        int r = agent_user(sb->uid_slot, &uid, &gid, e);
        if (r < 0)
                return r;
        char agent[64], add[64];
        if (!find_prog("ssh-agent", agent, sizeof(agent)) ||
            !find_prog("ssh-add", add, sizeof(add)))
                return err_setx(e, -ENOENT, WR_STATUS_FAILED_PRECONDITION, WR_FAULT_SERVICE,
                                "managed_ssh: the host has no OpenSSH ssh-agent/ssh-add "
                                "(apt-get install openssh-client)");
        char path[PATH_MAX];
        snprintf(path, sizeof(path), "%s/ssh", rt_sandbox_dir(sb->rt));
        /* O_PATH: a dropped warrend (phase 5) may only search the dir
         * (warren-priv gives it 0710 to warrend's group) */
        _cleanup_close_ int dirfd = open(path, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (dirfd < 0)
                return err_set(e, -errno, "managed_ssh: open %s: %m", path);
        char *const argv[] = {(char *) "ssh-agent", (char *) "-D", (char *) "-a",
                              (char *) "agent.sock", NULL};
        char *const envp[] = {(char *) "PATH=/usr/bin:/bin", (char *) "LC_ALL=C", NULL};
        struct rt_beside b = {
                .path = agent, .argv = argv, .envp = envp, .cwd_fd = dirfd, .uid = uid, .gid = gid};
        struct timespec t0;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        if ((r = spawn(sb, PRIV_BESIDE_SSH_AGENT, &b, &sb->ssh_pidfd, e)) < 0)
                return err_prefix(e, r, "managed_ssh");
        /* ready once its socket is there */
        for (int i = 0;; i++) {
                struct stat st;
                if (fstatat(dirfd, "agent.sock", &st, AT_SYMLINK_NOFOLLOW) == 0 &&
                    S_ISSOCK(st.st_mode))
                        break;
                if (wait_exit(sb->ssh_pidfd, 1) || i >= AGENT_READY_MS) {
                        sbx_ssh_reap(sb);
                        return err_set(e, -EIO, "managed_ssh: ssh-agent did not start");
                }
        }
        for (size_t i = 0; i < n; i++)
                if ((r = add_key(sb, dirfd, uid, gid, add, &d[i], e)) < 0)
                        return r; /* the caller's undo reaps the agent */
        struct timespec t1;
        clock_gettime(CLOCK_MONOTONIC, &t1);
        log_debug("sandbox %s: ssh-agent with %zu key%s in %.3f ms", sb->id, n, n == 1 ? "" : "s",
                  (double) (t1.tv_sec - t0.tv_sec) * 1e3 +
                          (double) (t1.tv_nsec - t0.tv_nsec) / 1e6);
        return 0;
}
