/* SPDX-License-Identifier: Apache-2.0 */
/* libFuzzer target for the warrend <-> warren-fetch message set
 * (src/image/fetch-proto.h): img_fetch_msg_check in both directions, the
 * decoder warrend runs on every answer of the helper (which talks to
 * registries) and the one warren-fetch runs on every request.
 *
 * Input: byte 0 selects the mode. Bit 0: the direction. Bit 1 clear: the
 * rest is the whole datagram (headers, sizes, magic). Bit 1 set: byte 1
 * names a type; the harness builds a datagram of that type's exact size
 * with a valid header and lays the rest of the input over its body (so the
 * deep checks - digests, counts, the config's strings - are reached
 * without 100 KB seeds). Whatever is accepted is walked the way warrend
 * walks it: the config's strings must come out exactly as its counts say. */

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "image/fetch-proto.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static _Alignas(16) uint8_t buf[IMG_FETCH_MSG_MAX + 64];

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        if (size < 2)
                return 0;
        enum img_fetch_dir dir = (data[0] & 1) ? IMG_FETCH_TO_DAEMON : IMG_FETCH_TO_HELPER;
        size_t len;
        if (data[0] & 2) {
                enum img_fetch_type type = data[1];
                len = img_fetch_msg_size(type);
                if (!len)
                        return 0;
                memset(buf, 0, len);
                img_fetch_hdr_init((struct img_fetch_hdr *) buf, type, 7);
                size_t body = size - 2;
                if (body > len - sizeof(struct img_fetch_hdr))
                        body = len - sizeof(struct img_fetch_hdr);
                memcpy(buf + sizeof(struct img_fetch_hdr), data + 2, body);
        } else {
                len = size - 1;
                if (len > sizeof(buf))
                        return 0;
                memcpy(buf, data + 1, len);
        }
        int type = img_fetch_msg_check(buf, len, dir);
        if (type < 0)
                return 0;
        if (type == IMG_FETCH_REP_CONFIG) {
                const struct img_fetch_rep_config *c = (const void *) buf;
                uint64_t want = 0;
                for (int f = 0; f < IMG_FETCH_F_COUNT; f++)
                        want += c->counts[f];
                size_t pos = 0, n = 0;
                while (img_fetch_strings_next(c, &pos))
                        n++;
                if (n != want || pos != c->strings_len)
                        abort();
        }
        if (type == IMG_FETCH_REP_MANIFEST) {
                const struct img_fetch_rep_manifest *m = (const void *) buf;
                if (m->n_layers < 1 || m->n_layers > IMG_FETCH_MAX_LAYERS)
                        abort();
        }
        return 0;
}
