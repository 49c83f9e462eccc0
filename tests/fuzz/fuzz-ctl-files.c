/* SPDX-License-Identifier: Apache-2.0 */
/* libFuzzer target for the files messages of the warren-init control
 * protocol (phases 4a and 4a-2): the input is the payload behind a
 * well-formed header (so that the fuzzer spends its time in the payload
 * checks, not the magic), the first byte picking the side and the type:
 *   bit 0 set: init_req_decode of a request, bits 1-3 its type (0, 6, 7:
 *     FILE_OPEN; 1..5: FILE_MKDIR .. FILE_LIST);
 *   bit 0 clear: bit 4 set: rt_ctl_file_entry_next over the bytes (a
 *     FILE_LISTED memfd's content); else rt_ctl_msg_decode of FILE_OPENED
 *     (bit 3 clear) or FILE_LISTED (bit 3 set) with bits 1-2 passed fds.
 * What is accepted must keep the documented rules (ctl-proto.h). */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "init/init-proto.h"
#include "runtime/ctl.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* The flags each of FILE_MKDIR .. FILE_LIST may carry (ctl-proto.h). */
static uint32_t op_flags(uint32_t type) {
        switch (type) {
        case CTL_FILE_MKDIR:
                return CTL_FOP_OWNER | CTL_FOP_PARENTS;
        case CTL_FILE_REMOVE:
                return CTL_FOP_RECURSIVE;
        case CTL_FILE_RENAME:
                return CTL_FOP_NOREPLACE | CTL_FOP_EXPECT | CTL_FOP_CHMOD;
        case CTL_FILE_SYMLINK:
                return CTL_FOP_OWNER;
        default:
                return CTL_FOP_NOFOLLOW;
        }
}

static void check_op(uint32_t type, const uint8_t *payload, size_t size,
                     const struct init_file_op *f) {
        struct ctl_file_op w;
        memcpy(&w, payload, sizeof(w));
        const char *p = (const char *) payload + sizeof(w);
        /* both strings the buffer's, NUL-terminated where the lengths say,
         * the lengths adding up to the payload */
        if (f->path != p || sizeof(w) + (size_t) w.path_len + w.path2_len != size ||
            w.path_len > CTL_PATH_MAX || w.path2_len > CTL_PATH_MAX || f->path[0] != '/' ||
            strlen(f->path) + 1 != w.path_len)
                abort();
        bool two = type == CTL_FILE_RENAME || type == CTL_FILE_SYMLINK;
        if (two != (f->path2 != NULL) || (!two && w.path2_len))
                abort();
        if (two && (f->path2 != p + w.path_len || strlen(f->path2) + 1 != w.path2_len ||
                    !f->path2[0] || (type == CTL_FILE_RENAME && f->path2[0] != '/')))
                abort();
        if (f->flags & ~op_flags(type))
                abort();
        bool has_mode = type == CTL_FILE_MKDIR || (f->flags & CTL_FOP_CHMOD);
        if (has_mode ? f->mode > 07777 : f->mode != 0)
                abort();
        if (!(f->flags & CTL_FOP_OWNER) && (f->uid || f->gid))
                abort();
        if ((f->flags & CTL_FOP_OWNER) && (f->uid == UINT32_MAX || f->gid == UINT32_MAX))
                abort();
        if (!(f->flags & CTL_FOP_EXPECT) && (f->dev || f->ino))
                abort();
}

/* Walk the entries of a listing's bytes: each accepted one inside them,
 * its name a real name, a link only on a symlink. */
static void check_entries(const uint8_t *data, size_t size) {
        size_t pos = 0;
        struct rt_ctl_file_entry x;
        int r;
        while ((r = rt_ctl_file_entry_next(data, size, &pos, &x)) == 1) {
                size_t nl = x.e.name_len, ll = x.e.link_len;
                if (pos > size || x.name < (const char *) data ||
                    x.link + ll != (const char *) data + pos || x.name + nl != x.link)
                        abort();
                if (!nl || nl > CTL_FILE_NAME_MAX || memchr(x.name, '/', nl) ||
                    memchr(x.name, 0, nl) || (nl == 1 && x.name[0] == '.') ||
                    (nl == 2 && x.name[0] == '.' && x.name[1] == '.'))
                        abort();
                if (ll && (!S_ISLNK(x.e.mode) || memchr(x.link, 0, ll) || ll >= CTL_PATH_MAX))
                        abort();
        }
        if (r == 0 && pos != size)
                abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        if (size < 1 || size > CTL_MSG_MAX - sizeof(struct ctl_hdr))
                return 0;
        uint8_t sel = data[0];
        data++;
        size--;
        if (!(sel & 1) && (sel & 0x10)) {
                check_entries(data, size);
                return 0;
        }
        uint32_t req_type = CTL_FILE_OPEN;
        if (((sel >> 1) & 7) >= 1 && ((sel >> 1) & 7) <= 5)
                req_type = CTL_FILE_MKDIR + ((sel >> 1) & 7) - 1;
        uint8_t *buf = malloc(sizeof(struct ctl_hdr) + size);
        if (!buf)
                return 0;
        struct ctl_hdr h = {.magic = CTL_MAGIC,
                            .type = (sel & 1)   ? req_type
                                    : (sel & 8) ? CTL_FILE_LISTED
                                                : CTL_FILE_OPENED,
                            .len = (uint32_t) size,
                            .id = 3};
        memcpy(buf, &h, sizeof(h));
        memcpy(buf + sizeof(h), data, size);
        size_t n = sizeof(h) + size;

        if ((sel & 1) && req_type != CTL_FILE_OPEN) {
                struct init_req r;
                if (init_req_decode(buf, n, &r) == 0)
                        check_op(req_type, buf + sizeof(h), size, &r.file_op);
                init_req_done(&r);
        } else if (sel & 1) {
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
                        if (m.type != h.type || (m.err == 0) != (nfds == 1) || m.err > 0)
                                abort();
                        if (m.type == CTL_FILE_LISTED &&
                            (m.listed.count > CTL_FILE_LIST_MAX || m.listed.truncated > 1 ||
                             (m.err && (m.listed.count || m.listed.fs_type))))
                                abort();
                        rt_ctl_msg_done(&m);
                }
        }
        free(buf);
        return 0;
}
