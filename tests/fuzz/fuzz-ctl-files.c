/* SPDX-License-Identifier: Apache-2.0 */
/* libFuzzer target for FILE_OPEN / FILE_OPENED of the warren-init control
 * protocol (phase 4a): the input is the payload behind a well-formed header
 * (so that the fuzzer spends its time in the payload checks, not the
 * magic), the first byte picking the side: init_req_decode of a FILE_OPEN,
 * or rt_ctl_msg_decode of a FILE_OPENED with 0..3 passed fds. What is
 * accepted must keep the documented rules (ctl-proto.h). */

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "init/init-proto.h"
#include "runtime/ctl.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        if (size < 1 || size > CTL_MSG_MAX - sizeof(struct ctl_hdr))
                return 0;
        uint8_t sel = data[0];
        data++;
        size--;
        uint8_t *buf = malloc(sizeof(struct ctl_hdr) + size);
        if (!buf)
                return 0;
        struct ctl_hdr h = {.magic = CTL_MAGIC,
                            .type = (sel & 1) ? CTL_FILE_OPEN : CTL_FILE_OPENED,
                            .len = (uint32_t) size,
                            .id = 3};
        memcpy(buf, &h, sizeof(h));
        memcpy(buf + sizeof(h), data, size);
        size_t n = sizeof(h) + size;

        if (sel & 1) {
                struct init_req r;
                if (init_req_decode(buf, n, &r) == 0) {
                        const struct init_file_open *f = &r.file_open;
                        struct ctl_file_open w;
                        memcpy(&w, buf + sizeof(h), sizeof(w));
                        /* the path is the buffer's, absolute, one NUL at its end */
                        if (f->path != (const char *) buf + sizeof(h) + sizeof(w) ||
                            f->path[0] != '/' || strlen(f->path) + 1 != w.path_len ||
                            w.path_len > CTL_PATH_MAX || sizeof(w) + w.path_len != size)
                                abort();
                        uint32_t acc = f->flags & (CTL_FOPEN_PATH | CTL_FOPEN_READ |
                                                   CTL_FOPEN_WRITE | CTL_FOPEN_RDWR);
                        if ((f->flags & ~(uint32_t) CTL_FOPEN_FLAGS_ALL) || !acc ||
                            (acc & (acc - 1)))
                                abort();
                        if ((f->flags & CTL_FOPEN_CREATE) &&
                            (!(f->flags & CTL_FOPEN_EXCL) || f->mode > 07777 ||
                             !(acc & (CTL_FOPEN_WRITE | CTL_FOPEN_RDWR))))
                                abort();
                        if (!(f->flags & CTL_FOPEN_CREATE) && f->mode)
                                abort();
                        if (!(f->flags & CTL_FOPEN_OWNER) && (f->uid || f->gid))
                                abort();
                        if ((f->flags & CTL_FOPEN_OWNER) &&
                            (f->uid == UINT32_MAX || f->gid == UINT32_MAX))
                                abort();
                }
                init_req_done(&r);
        } else {
                struct rt_ctl_msg m;
                int nfds = (sel >> 1) & 3;
                if (rt_ctl_msg_decode(buf, n, nfds, &m) == 0) {
                        if (m.type != CTL_FILE_OPENED || (m.err == 0) != (nfds == 1) || m.err > 0)
                                abort();
                        rt_ctl_msg_done(&m);
                }
        }
        free(buf);
        return 0;
}
