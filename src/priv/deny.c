/* SPDX-License-Identifier: Apache-2.0 */
/* warren-priv's seccomp denylist (deny.h). */
#include "priv/deny.h"

#include "basic/macro.h"

#include <errno.h>
#include <seccomp.h>
#include <string.h>

/* AddressSanitizer builds keep ptrace (basic/macro.h WR_ASAN). */

const char *const priv_deny_names[] = {
        /* kernel code */
        "init_module",
        "finit_module",
        "delete_module",
        "create_module",
        "kexec_load",
        "kexec_file_load",
        "bpf",
        /* opens by handle: past every mount and chroot */
        "open_by_handle_at",
        "name_to_handle_at",
        /* keyrings, perf, accounting, swap, reboot, quota, the clock, the
         * kernel log, raw ports */
        "keyctl",
        "add_key",
        "request_key",
        "perf_event_open",
        "acct",
        "swapon",
        "swapoff",
        "reboot",
        "quotactl",
        "quotactl_fd",
        "settimeofday",
        "clock_settime",
        "stime",
        "syslog",
        "iopl",
        "ioperm",
        "lookup_dcookie",
        "uselib",
        "vhangup",
        "nfsservctl",
        "_sysctl",
/* other processes' memory, userfaultfd, io_uring, fanotify */
#if !WR_ASAN
        "ptrace",
#endif
        "process_vm_readv",
        "process_vm_writev",
        "userfaultfd",
        "io_uring_setup",
        "io_uring_enter",
        "io_uring_register",
        "fanotify_init",
        NULL,
};

int priv_deny_load(struct wr_err *e) {
        scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_ALLOW);
        if (!ctx)
                return err_set(e, -ENOMEM, "warren-priv seccomp: seccomp_init failed");
        int r = seccomp_attr_set(ctx, SCMP_FLTATR_CTL_TSYNC, 1);
        if (r >= 0) /* another ABI (int 0x80, x32) would bypass the list */
                r = seccomp_attr_set(ctx, SCMP_FLTATR_ACT_BADARCH, SCMP_ACT_KILL_PROCESS);
        if (r < 0) {
                seccomp_release(ctx);
                return err_set(e, r, "warren-priv seccomp: TSYNC: %s", strerror(-r));
        }
        for (size_t i = 0; priv_deny_names[i]; i++) {
                int nr = seccomp_syscall_resolve_name(priv_deny_names[i]);
                if (nr == __NR_SCMP_ERROR || nr < 0)
                        continue; /* not on this architecture */
                r = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), nr, 0);
                if (r < 0) {
                        seccomp_release(ctx);
                        return err_set(e, r, "warren-priv seccomp: rule for %s: %s",
                                       priv_deny_names[i], strerror(-r));
                }
        }
        r = seccomp_load(ctx);
        seccomp_release(ctx);
        if (r < 0)
                return err_set(e, r, "warren-priv seccomp: load: %s", strerror(-r));
        return 0;
}
