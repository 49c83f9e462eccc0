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
 * learns from the tree stays in this process. */
#include <errno.h>
#include <grp.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "basic/confine.h"
#include "basic/macro.h"
#include "image/image.h"
#include "priv/priv-proto.h"

#define FD_UPPER 3
#define FD_INIT 4
#define FD_SPOOL 5
#define FD_SOCK 6

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
        int r;
        scmp_filter_ctx ctx =
                confine_seccomp_new(kill_on_miss ? SCMP_ACT_KILL_PROCESS : SCMP_ACT_ERRNO(EPERM),
                                    allow, ELEMENTSOF(allow), &r);
        if (!ctx)
                return r;
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

int main(void) {
        struct wr_err e = {0};
        struct img_pack_stats st = {0};
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
