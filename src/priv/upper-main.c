/* SPDX-License-Identifier: Apache-2.0 */
/* warren-upper: the upper-dir reader (docs/privsep.md "Phase 4, the
 * upper-dir reader"). Started by warren-priv (upper.c) for one UPPER_PACK
 * and gone when it is done; never by hand.
 *
 *   fd 3  the sandbox's overlay upper dir (O_RDONLY | O_DIRECTORY)
 *   fd 4  the sandbox's init (a pidfd): its user namespace is joined
 *   fd 5  the spool the layer tar is written to
 *   fd 6  a SOCK_SEQPACKET socket to warren-priv (struct priv_upper_msg)
 *
 * It joins the sandbox's user namespace and becomes the sandbox's root
 * there: its capabilities then hold over the inodes of the sandbox's id
 * range only (CAP_DAC_READ_SEARCH reads the sandbox's 0600 files, nothing
 * of the host's), and over the host's namespaces none. It chroots into
 * the upper dir, sets no_new_privs and packs the tree (image.h:
 * img_pack_dir, by fd, no symlink followed, no mount crossed) under a
 * seccomp allowlist (install_seccomp). The one
 * thing a user namespace cannot read is the trusted.* xattr that marks an
 * opaque directory: for each directory it hands the fd to warren-priv,
 * which reads that xattr alone and answers one byte. Everything else it
 * learns from the tree stays in this process.
 *
 * `warren-upper session` (phase 4b-2, UPPER_SESSION: the journal): the
 * same confinement, then it serves warrend's session requests
 * (priv-proto.h: struct priv_upper_op; WALK, OPEN, REMOVE, MKDIR, ATTRS,
 * PUT, SYMLINK) until warrend closes its end:
 *
 *   fd 3  the upper dir, fd 4 init's pidfd (as above)
 *   fd 5  the sandbox's root as init sees it (O_PATH, from warren-priv):
 *         the rollback's writes resolve beneath it (RESOLVE_IN_ROOT)
 *   fd 6  the socket to warren-priv (OPAQUE questions)
 *   fd 7  the session's socket to warrend
 *
 * Its writes are the sandbox root's own: ids are the sandbox's (0..65535
 * inside), and its capabilities cover the range's inodes only. */
#include <errno.h>
#include <grp.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "basic/confine.h"
#include "basic/macro.h"
#include "image/image.h"
#include "priv/priv-proto.h"
#include "sandbox/journal-tree.h"

#define FD_UPPER 3
#define FD_INIT 4
#define FD_SPOOL 5
#define FD_SOCK 6
/* session */
#define FD_ROOT 5
#define FD_SESSION 7

static bool session;

static int install_seccomp(bool kill_on_miss);

/* Join the sandbox's user namespace as its root, confined to the upper dir. */
static int enter(struct wr_err *e) {
        if (setns(FD_INIT, CLONE_NEWUSER) < 0)
                return errno == EINVAL
                               ? err_set(e, -EPERM,
                                         "the sandbox has no user namespace of its own "
                                         "(--userns=off): its upper dir is not read as root")
                               : err_set(e, -errno, "join the sandbox's user namespace: %m");
        (void) close(FD_INIT);
        /* supplementary groups: none, where the namespace allows it
         * (setgroups "deny" keeps the host's, which are root's own: the
         * chroot below keeps them from mattering) */
        (void) setgroups(0, NULL);
        if (setresgid(0, 0, 0) < 0 || setresuid(0, 0, 0) < 0)
                return err_set(e, -errno, "become the sandbox's root: %m");
        if (fchdir(FD_UPPER) < 0 || chroot(".") < 0)
                return err_set(e, -errno, "chroot into the upper dir: %m");
        if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
                return err_set(e, -errno, "no_new_privs: %m");
        int r = install_seccomp(getenv("WARREN_UPPER_SECCOMP_KILL") != NULL);
        if (r < 0)
                return err_set(e, r, "seccomp: %s", strerror(-r));
        return 0;
}

/* After enter(): what the pack needs and nothing else (no exec, no open
 * of a socket, no mount, no setns, no xattr: warren-priv reads those);
 * anything else fails with EPERM. WARREN_UPPER_SECCOMP_KILL (tests):
 * kill instead, to prove the list complete. */
static int install_seccomp(bool kill_on_miss) {
        static const int allow[] = {
                SCMP_SYS(read),
                SCMP_SYS(readv),
                SCMP_SYS(pread64),
                SCMP_SYS(write),
                SCMP_SYS(writev),
                SCMP_SYS(pwrite64),
                SCMP_SYS(lseek),
                SCMP_SYS(close),
                SCMP_SYS(openat),
                SCMP_SYS(fstat),
                SCMP_SYS(newfstatat),
                SCMP_SYS(statx),
                SCMP_SYS(readlinkat),
                SCMP_SYS(getdents64),
                SCMP_SYS(fcntl),
                SCMP_SYS(dup),
                SCMP_SYS(brk),
                SCMP_SYS(munmap),
                SCMP_SYS(mremap),
                SCMP_SYS(madvise),
                SCMP_SYS(sendmsg),
                SCMP_SYS(recvfrom),
                SCMP_SYS(recvmsg),
                SCMP_SYS(exit),
                SCMP_SYS(exit_group),
                SCMP_SYS(rt_sigreturn),
                SCMP_SYS(rt_sigprocmask),
                SCMP_SYS(futex),
                SCMP_SYS(getrandom),
                SCMP_SYS(clock_gettime),
                SCMP_SYS(gettimeofday),
                SCMP_SYS(getpid),
                SCMP_SYS(gettid),
                SCMP_SYS(restart_syscall),
        };
        /* the journal's session (phase 4b-2), on top: the rollback's
         * writes through the sandbox's root, and the memory of a large
         * walk (mmap without PROT_EXEC) */
        static const int allow_session[] = {
                SCMP_SYS(openat2),   SCMP_SYS(mkdirat),         SCMP_SYS(unlinkat),
                SCMP_SYS(renameat),  SCMP_SYS(renameat2),       SCMP_SYS(symlinkat),
                SCMP_SYS(fchownat),  SCMP_SYS(fchown),          SCMP_SYS(fchmod),
                SCMP_SYS(utimensat), SCMP_SYS(copy_file_range),
        };
        int r;
        uint32_t def = kill_on_miss ? SCMP_ACT_KILL_PROCESS : SCMP_ACT_ERRNO(EPERM);
        scmp_filter_ctx ctx = confine_seccomp_new(def, allow, ELEMENTSOF(allow), &r);
        if (!ctx)
                return r;
        for (size_t i = 0; session && i < ELEMENTSOF(allow_session); i++)
                if ((r = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, allow_session[i], 0)) < 0) {
                        seccomp_release(ctx);
                        return r;
                }
        if (session && (r = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(mmap), 1,
                                             SCMP_A2(SCMP_CMP_MASKED_EQ, PROT_EXEC, 0))) < 0) {
                seccomp_release(ctx);
                return r;
        }
        r = seccomp_load(ctx);
        seccomp_release(ctx);
        return r;
}

/* img_pack_opaque_fn: warren-priv reads the xattr of dir_fd. */
static int ask_opaque(int dir_fd, void *ud) {
        (void) ud;
        struct priv_upper_msg q = {.magic = PRIV_UPPER_MAGIC, .kind = PRIV_UPPER_Q_OPAQUE};
        int r = priv_send(FD_SOCK, &q, sizeof(q), &dir_fd, 1, MSG_NOSIGNAL);
        if (r < 0)
                return r;
        unsigned char a;
        ssize_t n;
        do
                n = recv(FD_SOCK, &a, 1, 0);
        while (n < 0 && errno == EINTR);
        if (n != 1 || a > 1)
                return n < 0 ? -errno : -EPROTO;
        return a;
}

/* --- the journal's session (phase 4b-2) --- */

static int ask_opaque_walk(int dir_fd, void *ud) {
        return ask_opaque(dir_fd, ud);
}

static int answer(const struct priv_upper_reply *a, int fd) {
        return priv_send(FD_SESSION, a, sizeof(*a), fd >= 0 ? &fd : NULL, fd >= 0 ? 1 : 0,
                         MSG_NOSIGNAL);
}

static int write_all(int fd, const uint8_t *p, size_t n) {
        while (n) {
                ssize_t w = write(fd, p, n);
                if (w < 0 && errno == EINTR)
                        continue;
                if (w <= 0)
                        return w < 0 ? -errno : -EIO;
                p += w;
                n -= (size_t) w;
        }
        return 0;
}

/* One request: its answer in *a (and an fd to send with it in *out_fd). */
static void serve(const struct priv_upper_op *op, int in_fd, struct priv_upper_reply *a,
                  int *out_fd) {
        struct wr_err e = {0};
        int r = 0;
        struct jt_attrs at = {
                .mode = op->mode, .uid = op->uid, .gid = op->gid, .mtime_ns = op->mtime_ns};
        switch (op->op) {
        case PRIV_UPPER_OP_WALK: {
                /* owners as stat shows them here: ids inside */
                struct jt_tree t = {0};
                uint8_t *buf = NULL;
                size_t len = 0;
                r = jt_walk_opaque(FD_UPPER, JT_WALK_MAX, ask_opaque_walk, NULL, &t, &e);
                if (r == 0 && (r = jt_tree_encode(&t, &buf, &len)) < 0)
                        err_set(&e, r, "encode the walk: %s", strerror(-r));
                if (r == 0 && len > PRIV_UPPER_WALK_MAX)
                        r = err_set(&e, -EFBIG, "the walk is %zu bytes", len);
                if (r == 0 && (r = write_all(in_fd, buf, len)) < 0)
                        err_set(&e, r, "write the walk: %s", strerror(-r));
                if (r == 0) {
                        a->kind = PRIV_UPPER_R_WALKED;
                        a->len = len;
                        a->n = t.n;
                        a->truncated = t.truncated;
                }
                free(buf);
                jt_tree_free(&t);
                break;
        }
        case PRIV_UPPER_OP_OPEN:
                if ((r = jt_open_file(FD_UPPER, op->path)) >= 0) {
                        a->kind = PRIV_UPPER_R_OPENED;
                        *out_fd = r;
                        r = 0;
                } else
                        err_set(&e, r, "open %s: %s", op->path, strerror(-r));
                break;
        case PRIV_UPPER_OP_REMOVE:
                r = jt_op_remove(FD_ROOT, op->path);
                break;
        case PRIV_UPPER_OP_MKDIR:
                r = jt_op_mkdir(FD_ROOT, op->path, &at);
                break;
        case PRIV_UPPER_OP_ATTRS:
                r = jt_op_attrs(FD_ROOT, op->path, &at);
                break;
        case PRIV_UPPER_OP_PUT:
                r = jt_op_put(FD_ROOT, op->path, in_fd, &at);
                break;
        case PRIV_UPPER_OP_SYMLINK:
                r = jt_op_symlink(FD_ROOT, op->path, op->link, &at);
                break;
        }
        if (r < 0) {
                a->kind = PRIV_UPPER_R_DONE;
                a->err = -r > 4095 ? EIO : -r;
                snprintf(a->msg, sizeof(a->msg), "%s", e.msg[0] ? e.msg : strerror(-r));
        }
}

static int session_run(void) {
        for (;;) {
                static uint8_t buf[sizeof(struct priv_upper_op) + 1];
                static struct priv_upper_op op;
                int fds[PRIV_FDS_MAX];
                size_t n_fds = 0;
                long n = priv_recv(FD_SESSION, buf, sizeof(buf), fds, &n_fds, 0);
                if (n == 0)
                        return 0; /* warrend closed its end */
                struct priv_upper_reply a = {.magic = PRIV_UPPER_REPLY_MAGIC,
                                             .kind = PRIV_UPPER_R_DONE};
                struct wr_err e = {0};
                int r = n < 0 ? err_set(&e, (int) n, "session: %s", strerror((int) -n))
                              : priv_upper_op_decode(buf, (size_t) n, n_fds, &op, &e);
                if (r < 0) {
                        priv_close_fds(fds, n_fds);
                        a.err = EPROTO;
                        snprintf(a.msg, sizeof(a.msg), "refused: %s", e.msg);
                        (void) answer(&a, -1);
                        return r;
                }
                int out_fd = -1;
                serve(&op, n_fds ? fds[0] : -1, &a, &out_fd);
                priv_close_fds(fds, n_fds);
                r = answer(&a, out_fd);
                if (out_fd >= 0)
                        close(out_fd);
                if (r < 0)
                        return r;
        }
}

int main(int argc, char **argv) {
        struct wr_err e = {0};
        struct img_pack_stats st = {0};
        session = argc > 1 && !strcmp(argv[1], "session");
        if (session) {
                int r = enter(&e);
                if (r < 0) {
                        struct priv_upper_reply a = {.magic = PRIV_UPPER_REPLY_MAGIC,
                                                     .kind = PRIV_UPPER_R_DONE,
                                                     .err = -r > 4095 ? EIO : -r};
                        snprintf(a.msg, sizeof(a.msg), "%s", e.msg);
                        /* the first request is answered with why there is
                         * no session */
                        uint8_t buf[sizeof(struct priv_upper_op) + 1];
                        int fds[PRIV_FDS_MAX];
                        size_t n_fds = 0;
                        if (priv_recv(FD_SESSION, buf, sizeof(buf), fds, &n_fds, 0) > 0) {
                                priv_close_fds(fds, n_fds);
                                (void) answer(&a, -1);
                        }
                }
                if (r == 0)
                        r = session_run();
                syscall(SYS_exit_group, r < 0 ? 1 : 0);
                return 1;
        }
        int r = enter(&e);
        if (r == 0)
                r = img_pack_dir_opaque(FD_UPPER, FD_SPOOL, 0, 0, ask_opaque, NULL, &st, &e);
        struct priv_upper_msg done = {.magic = PRIV_UPPER_MAGIC,
                                      .kind = PRIV_UPPER_Q_DONE,
                                      .entries = st.entries,
                                      .bytes = st.bytes,
                                      .whiteouts = st.whiteouts,
                                      .opaque = st.opaque,
                                      .skipped = st.skipped};
        if (r < 0) {
                done.err = -r > 4095 ? EIO : -r;
                snprintf(done.msg, sizeof(done.msg), "%s", e.msg[0] ? e.msg : strerror(-r));
        }
        (void) priv_send(FD_SOCK, &done, sizeof(done), NULL, 0, MSG_NOSIGNAL);
        /* exit_group directly: no atexit work under the seccomp filter
         * (LeakSanitizer's leak check at exit, which sanitizers run from
         * their _exit interceptor too, stops threads with ptrace and
         * clone, which the filter denies) */
        syscall(SYS_exit_group, r < 0 ? 1 : 0);
        return 1;
}
