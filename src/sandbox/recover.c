/* SPDX-License-Identifier: Apache-2.0 */
/* Restart recovery: re-attach to the sandboxes a previous warrend left
 * running (same init pid, start time and cgroup as recorded), clean up
 * everything else a live row or a leftover dir holds. */
#include "sandbox/sandbox-internal.h"

#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "basic/log.h"
#include "basic/macro.h"
#include "runtime/ctl.h"
#include "runtime/runtime.h"

/* The range of a dir without a row (a warm-pool entry, or a crash before
 * the row): its upper dir is owned by the range's first uid. */
static uint32_t dir_uid_base(const char *dir) {
        char path[PATH_MAX];
        struct stat st;
        snprintf(path, sizeof(path), "%s/upper", dir);
        return stat(path, &st) == 0 && st.st_uid >= SBX_UIDS_BASE ? (uint32_t) st.st_uid : 0;
}

/* Re-attach to the sandbox of row (RUNNING): its init must still be the
 * process recorded, its control socket must answer, and its process
 * defaults must decrypt. */
static int recover_one(struct sbx_manager *m, const struct store_sandbox *row, const char *dir,
                       struct wr_err *e) {
        if (row->status != STORE_SANDBOX_RUNNING || row->init_pid <= 0)
                return err_set(e, -ESRCH, "it had not finished starting");
        _cleanup_(sbx_freep) struct sbx *sb = NULL;
        int r = sbx_new(m, row->id, row->expires_ns, &sb);
        if (r < 0)
                return err_set(e, r, "out of memory");
        /* exec ids of this daemon must not collide with ids the previous
         * one used (init may still report their exits) */
        sb->next_exec_id = (uint64_t) store_now_ns();
        if ((r = sbx_rt_attach(m, row->id, dir, (pid_t) row->init_pid, row->init_start, &sb->rt,
                               e)) < 0)
                return r;
        /* its uid range, taken again (released with sb) */
        sb->uid_slot = sbx_uid_slot_adopt(m, row->uid_base, row->id);
        /* paused before the restart: still paused (the freezer says so) */
        sb->paused = rt_sandbox_frozen(sb->rt) == 1;
        /* its /30, known again from its own default route */
        if (m->net)
                sb->net_slot = sbx_network_adopt(m->net, (pid_t) row->init_pid);
        _cleanup_free_ unsigned char *proc = NULL;
        size_t proc_len = 0;
        if ((r = store_sandbox_get_process(m->store, row->id, &proc, &proc_len, e)) < 0)
                return r;
        r = sbx_process_decode(sb, (const char *) proc, proc_len);
        if (proc)
                explicit_bzero(proc, proc_len);
        if (r < 0)
                return err_set(e, r, "process defaults");
        sb->name = row->name ? strdup(row->name) : NULL;
        sb->image_id = strdup(row->image_id);
        if (!sb->image_id || (row->name && !sb->name))
                return err_set(e, -ENOMEM, "out of memory");
        if ((r = sbx_rt_ctl_connect(m, sb->rt, &sb->ctl_fd, e)) < 0)
                return r;
        /* warren-egress knows it again (a policy: as stored; none: OPEN)
         * with its rules and credentials (sealed: their secret values as
         * the create resolved them); a policed sandbox that cannot be
         * registered stays cut off (its address is in no set). Rules that
         * cannot be opened: registered without them (its placeholders go
         * out verbatim; no secret is lost either way). */
        if (sbx_network_egress(m->net) && sb->net_slot >= 0) {
                int mode = 0;
                _cleanup_free_ uint8_t *wire = NULL;
                size_t len = 0;
                struct wr_err pe = {0};
                uint8_t *rules = NULL;
                size_t rules_len = 0;
                if ((r = sbx_egress_policy_read(dir, &mode, &wire, &len)) < 0)
                        log_warn("sandbox %s: its egress policy: %s", row->id, strerror(-r));
                else {
                        if (sbx_egress_rules_read(m, row->id, dir, &rules, &rules_len, &pe) < 0) {
                                log_warn("sandbox %s: its egress rules: %s", row->id, pe.msg);
                                pe = (struct wr_err){0};
                        }
                        if (sbx_egress_attach(sb, mode, wire, len, rules, rules_len, &pe) < 0)
                                log_warn("sandbox %s: %s", row->id, pe.msg);
                        else
                                sb->egress_enforced = mode != 0;
                        erase_and_free_n(rules, rules_len);
                }
        }
        struct sbx *armed = sb;
        if ((r = sbx_arm(TAKE_PTR(sb), e)) < 0)
                return r;
        /* its exec sessions: init kept their pipes and exits */
        sbx_exec_recover(armed);
        return 0;
}

/* A previous warrend's sandboxes: re-attach to those whose init still
 * runs; everything else a live row or a leftover dir holds is freed and
 * the row ends TERMINATED (or FAILED when it was still being created). */
void sbx_recover(struct sbx_manager *m) {
        static const int live[] = {STORE_SANDBOX_PENDING, STORE_SANDBOX_RUNNING,
                                   STORE_SANDBOX_TERMINATING};
        struct store_sandbox_filter f = {
                .all_environments = true,
                .statuses = live,
                .n_statuses = ELEMENTSOF(live),
        };
        struct store_sandbox *rows = NULL;
        size_t n = 0, attached = 0, ended = 0;
        struct wr_err le = {0};
        if (store_sandbox_list(m->store, &f, &rows, &n, &le) < 0)
                log_warn("recovery: list sandboxes: %s", le.msg);
        for (size_t i = 0; i < n; i++) {
                const struct store_sandbox *row = &rows[i];
                /* a Pod of the K8S compute class: k8s/ recovers it */
                if (row->cgroup_path && !strncmp(row->cgroup_path, "k8s:", 4))
                        continue;
                char dir[PATH_MAX];
                snprintf(dir, sizeof(dir), "%s/sandboxes/%s", m->state_dir, row->id);
                struct wr_err e = {0};
                int r = row->status == STORE_SANDBOX_RUNNING ? recover_one(m, row, dir, &e)
                                                             : -ESRCH;
                if (r >= 0) {
                        attached++;
                        m->metrics.recovered++;
                        log_info("sandbox %s re-attached (pid %lld)", row->id,
                                 (long long) row->init_pid);
                        continue;
                }
                char reason[300];
                int st = STORE_SANDBOX_TERMINATED;
                if (row->status == STORE_SANDBOX_PENDING) {
                        st = STORE_SANDBOX_FAILED;
                        snprintf(reason, sizeof(reason), "warrend stopped while creating it");
                } else if (row->status == STORE_SANDBOX_TERMINATING) {
                        snprintf(reason, sizeof(reason),
                                 "terminated (finished after a warrend "
                                 "restart)");
                } else {
                        snprintf(reason, sizeof(reason), "lost while warrend was down: %s",
                                 e.msg[0] ? e.msg : strerror(-r));
                }
                struct wr_err ce = {0};
                if (sbx_host_cleanup(m, row->id, dir, &ce) < 0) {
                        /* keep the row live so the next start tries again,
                         * and its uid range taken */
                        log_warn("recovery: sandbox %s: %s", row->id, ce.msg);
                        (void) sbx_uid_slot_adopt(m, row->uid_base, row->id);
                        continue;
                }
                sbx_entrypoint_log_remove(m, row->id);
                store_sandbox_update_status(m->store, row->id, st, reason, NULL);
                ended++;
                m->metrics.recovery_ended++;
                log_info("sandbox %s: %s", row->id, reason);
        }
        store_sandbox_list_free(rows, n);

        /* Dirs without a live sandbox (a crash between teardown steps). */
        char path[PATH_MAX];
        snprintf(path, sizeof(path), "%s/sandboxes", m->state_dir);
        DIR *d = opendir(path);
        struct dirent *de;
        while (d && (de = readdir(d))) {
                if (strncmp(de->d_name, "sb-", 3) != 0 || de->d_type != DT_DIR ||
                    sbx_find_live(m, de->d_name))
                        continue;
                char dir[PATH_MAX];
                snprintf(dir, sizeof(dir), "%s/%s", path, de->d_name);
                struct wr_err ce = {0};
                uint32_t base = dir_uid_base(dir);
                if (sbx_host_cleanup(m, de->d_name, dir, &ce) < 0) {
                        log_warn("recovery: leftover %s: %s", dir, ce.msg);
                        (void) sbx_uid_slot_adopt(m, base, de->d_name);
                } else
                        log_info("recovery: removed leftover %s", dir);
        }
        if (d)
                closedir(d);
        /* the writable layers' templates: made again on first use (a
         * crash may have left a half-made one) */
        if (m->disk_templates) {
                rt_disk_sweep(m->disk_templates);
                if (mkdir(m->disk_templates, 0700) < 0 && errno != EEXIST)
                        log_warn("recovery: mkdir %s: %s", m->disk_templates, strerror(errno));
        }
        /* host ends of veths whose sandbox is gone (their netns may not
         * have been taken down yet, or a teardown was cut short) */
        if (m->net)
                (void) sbx_network_sweep(m->net);
        if (attached || ended)
                log_info("recovery: %zu sandboxes re-attached, %zu ended", attached, ended);
}
