/* SPDX-License-Identifier: Apache-2.0 */
/* warren-unpack: the only process that parses layer tars.
 *
 *   warren-unpack            (spawned by warrend's image store)
 *     fd 0  the tar stream (uncompressed, gzip or zstd)
 *     fd 3  the empty layer directory to fill (O_DIRECTORY)
 *     fd 4  the report pipe: one struct img_unpack_report, one write()
 *
 * Before it reads a byte of the stream it chroots into the layer directory,
 * keeps only the capabilities that unpacking needs (CHOWN, DAC_OVERRIDE,
 * FOWNER, FSETID, MKNOD for whiteouts, SYS_ADMIN for trusted.overlay.*
 * xattrs), sets no_new_privs and installs a seccomp allowlist (file system
 * calls on fds, memory without PROT_EXEC, nothing else: no exec, no
 * sockets, no mount, no ptrace). Exit status 0 = success, 1 = refused or
 * failed (details in the report), 2 = usage or confinement error. */
#include <errno.h>
#include <fcntl.h>
#include <locale.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <seccomp.h>
#include <stdio.h>
#include <string.h>
#include <sys/capability.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "basic/confine.h"
#include "image/image-internal.h"

static int drop_caps(void) {
        static const cap_value_t keep[] = {
                CAP_CHOWN, CAP_DAC_OVERRIDE, CAP_FOWNER, CAP_FSETID, CAP_MKNOD, CAP_SYS_ADMIN,
        };
        cap_t caps = cap_init();
        if (!caps)
                return -errno;
        int r = 0;
        if (cap_set_flag(caps, CAP_PERMITTED, (int) ELEMENTSOF(keep), keep, CAP_SET) < 0 ||
            cap_set_flag(caps, CAP_EFFECTIVE, (int) ELEMENTSOF(keep), keep, CAP_SET) < 0 ||
            cap_set_proc(caps) < 0)
                r = -errno;
        cap_free(caps);
        return r;
}

static int install_seccomp(void) {
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
                SCMP_SYS(fstatfs),
                SCMP_SYS(mkdirat),
                SCMP_SYS(mknodat),
                SCMP_SYS(symlinkat),
                SCMP_SYS(linkat),
                SCMP_SYS(unlinkat),
                SCMP_SYS(fchown),
                SCMP_SYS(fchownat),
                SCMP_SYS(fchmod),
                SCMP_SYS(fchmodat),
                SCMP_SYS(utimensat),
                SCMP_SYS(fsetxattr),
                SCMP_SYS(fcntl),
                SCMP_SYS(dup),
                SCMP_SYS(getdents64),
                SCMP_SYS(ftruncate),
                SCMP_SYS(brk),
                SCMP_SYS(munmap),
                SCMP_SYS(mremap),
                SCMP_SYS(madvise),
                SCMP_SYS(exit),
                SCMP_SYS(exit_group),
                SCMP_SYS(rt_sigreturn),
                SCMP_SYS(rt_sigprocmask),
                SCMP_SYS(futex),
                SCMP_SYS(syncfs),
                SCMP_SYS(fsync),
                SCMP_SYS(fdatasync),
                SCMP_SYS(getrandom),
                SCMP_SYS(clock_gettime),
                SCMP_SYS(gettimeofday),
                SCMP_SYS(getpid),
                SCMP_SYS(gettid),
                SCMP_SYS(sched_yield),
                SCMP_SYS(restart_syscall),
                SCMP_SYS(sigaltstack),
        };
        int r;
        scmp_filter_ctx ctx =
                confine_seccomp_new(SCMP_ACT_ERRNO(EPERM), allow, ELEMENTSOF(allow), &r);
        if (!ctx)
                return r;
        r = seccomp_load(ctx);
        seccomp_release(ctx);
        return r;
}

static void report(int fd, int code, const struct img_unpack_stats *st, const struct wr_err *e) {
        struct img_unpack_report rep;
        memset(&rep, 0, sizeof(rep));
        rep.magic = IMG_REPORT_MAGIC;
        rep.size = sizeof(rep);
        rep.code = code;
        if (st)
                rep.stats = *st;
        if (e)
                rep.err = *e;
        (void) !write(fd, &rep, sizeof(rep));
}

static int fail_setup(int report_fd, int code, const char *what) {
        struct wr_err e = {0};
        err_set(&e, code, "unpack helper: %s: %s", what, strerror(-code));
        report(report_fd, code, NULL, &e);
        return 2;
}

int main(int argc, char **argv) {
        struct stat st;
        if (argc != 1 || fstat(3, &st) < 0 || !S_ISDIR(st.st_mode) || fstat(4, &st) < 0) {
                fprintf(stderr,
                        "usage: warren-unpack <tar on stdin, layer dir on fd 3, report fd 4>\n");
                return 2;
        }
        int report_fd = 4;
        (void) fcntl(report_fd, F_SETFD, FD_CLOEXEC);
        (void) fcntl(3, F_SETFD, FD_CLOEXEC);

        /* Everything that loads files happens before the chroot. */
        if (!setlocale(LC_ALL, "C.UTF-8"))
                setlocale(LC_ALL, "C");
        OPENSSL_init_crypto(OPENSSL_INIT_LOAD_CONFIG, NULL);
        EVP_MD_CTX *warm = EVP_MD_CTX_new();
        if (!warm || EVP_DigestInit_ex(warm, EVP_sha256(), NULL) != 1)
                return fail_setup(report_fd, -EIO, "sha256 init");
        EVP_MD_CTX_free(warm);

        bool root = geteuid() == 0;
        if (root) {
                if (fchdir(3) < 0)
                        return fail_setup(report_fd, -errno, "fchdir");
                if (chroot(".") < 0)
                        return fail_setup(report_fd, -errno, "chroot");
                if (chdir("/") < 0)
                        return fail_setup(report_fd, -errno, "chdir");
                int r = drop_caps();
                if (r < 0)
                        return fail_setup(report_fd, r, "drop capabilities");
        }
        if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
                return fail_setup(report_fd, -errno, "no_new_privs");
        (void) prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
        int r = install_seccomp();
        if (r < 0)
                return fail_setup(report_fd, r, "seccomp");

        struct img_unpack_stats stats;
        struct wr_err e = {0};
        r = img_unpack_stream(0, 3, root, &stats, &e);
        if (r >= 0 && syncfs(3) < 0) {
                r = -errno;
                err_set(&e, r, "unpack: syncfs: %s", strerror(errno));
        }
        report(report_fd, r < 0 ? r : 0, r < 0 ? NULL : &stats, &e);
        /* _exit: no atexit work under the seccomp filter (LeakSanitizer's
         * exit-time check needs ptrace/clone, which the filter refuses) */
        _exit(r < 0 ? 1 : 0);
}
