/* SPDX-License-Identifier: Apache-2.0 */
/* libFuzzer target for both decoders of the warren-init control protocol:
 * init_req_decode (what warren-init parses from the daemon) and
 * rt_ctl_msg_decode (what the daemon parses from init, which a workload may
 * have taken over). The first input byte picks the decoder and, for the
 * daemon side, the passed-fd count (FILE_OPENED and FILE_LISTED carry
 * one). Anything accepted must re-encode or satisfy the documented
 * invariants. */

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "init/init-proto.h"
#include "runtime/ctl.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        if (size < 1)
                return 0;
        uint8_t sel = data[0];
        data++;
        size--;

        /* Copy so that reads past the end are caught by ASan. */
        uint8_t *buf = malloc(size ? size : 1);
        if (!buf)
                return 0;
        memcpy(buf, data, size);

        if (sel & 1) {
                struct init_req r;
                if (init_req_decode(buf, size, &r) == 0 && r.hdr.type == CTL_SPAWN) {
                        /* Invariants: argv non-empty, every string in the buffer. */
                        if (!r.spawn.argv[0] || !r.spawn.argv[0][0] || r.spawn.argv[r.spawn.argc])
                                abort();
                        for (uint32_t i = 0; i < r.spawn.envc; i++)
                                if (!strchr(r.spawn.envp[i], '='))
                                        abort();
                        /* Round trip through the daemon-side encoder. */
                        struct rt_spawn_req q = {.id = r.hdr.id,
                                                 .argv = r.spawn.argv,
                                                 .envp = r.spawn.envp,
                                                 .cwd = r.spawn.cwd,
                                                 .uid = r.spawn.uid,
                                                 .gid = r.spawn.gid,
                                                 .flags = r.spawn.flags,
                                                 .cols = r.spawn.cols,
                                                 .rows = r.spawn.rows};
                        static uint8_t out[CTL_MSG_MAX];
                        if (rt_ctl_spawn_encode(&q, out, sizeof(out)) < 0)
                                abort();
                }
                init_req_done(&r);
        } else {
                struct rt_ctl_msg m;
                int nfds = (sel >> 1) & 7;
                if (rt_ctl_msg_decode(buf, size, nfds, &m) == 0) {
                        if (m.err > 0 || m.err < -4095)
                                abort();
                        bool file_reply = m.type == CTL_FILE_OPENED || m.type == CTL_FILE_LISTED;
                        if (nfds && m.type != CTL_SPAWNED && m.type != CTL_TAKEN && !file_reply)
                                abort();
                        /* FILE_OPENED carries the opened fd, FILE_LISTED the sealed
                         * memfd of entries: exactly one fd on success, none on error. */
                        if (file_reply && (m.err == 0) != (nfds == 1))
                                abort();
                        if (m.type == CTL_FILE_LISTED &&
                            (m.listed.truncated > 1 || m.listed.count > CTL_FILE_LIST_MAX ||
                             (m.err && (m.listed.count || m.listed.truncated))))
                                abort();
                        if (nfds > 1 && m.type != CTL_TAKEN)
                                abort();
                        if (m.type == CTL_TAKEN &&
                            (m.err ? m.fdmask != 0 || nfds : __builtin_popcount(m.fdmask) != nfds))
                                abort();
                        for (size_t i = 0; i < m.n_list; i++)
                                if (m.list[i].pid <= 0)
                                        abort();
                        for (size_t i = 0; i < m.n_holds; i++)
                                if (m.holds[i].pid <= 0 || !(m.holds[i].flags & CTL_SPAWN_HOLD))
                                        abort();
                }
                rt_ctl_msg_done(&m);
        }
        free(buf);
        return 0;
}
