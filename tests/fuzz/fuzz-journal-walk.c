/* SPDX-License-Identifier: Apache-2.0 */
/* libFuzzer target for the journal's walk on the wire (journal-tree.h:
 * jt_tree_decode), what warrend reads from a warren-upper session
 * (docs/privsep.md "Phase 4b-2"): warren-upper has walked a sandbox's
 * files, so every byte is hostile. Whatever is accepted has at most the
 * entries allowed, known types whose modes agree, confined paths in
 * strictly increasing order, links only on symlinks, ids inside, and
 * re-encodes to the same bytes; every refusal carries a message and
 * leaves nothing allocated. */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "sandbox/journal-tree.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static bool path_ok(const char *p) {
        size_t n = strlen(p);
        if (n == 0 || n > 4095 || p[0] == '/' || p[n - 1] == '/' || strstr(p, "//"))
                return false;
        char buf[4100];
        snprintf(buf, sizeof(buf), "/%s/", p);
        return !strstr(buf, "/../") && !strstr(buf, "/./");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        struct jt_tree t = {0};
        struct wr_err e = {0};
        int r = jt_tree_decode(data, size, 4096, &t, &e);
        if (r < 0) {
                if (e.msg[0] == '\0' || t.v || t.n)
                        abort();
                return 0;
        }
        if (t.n > 4096)
                abort();
        for (size_t i = 0; i < t.n; i++) {
                const struct jt_ent *x = &t.v[i];
                if (x->type < JT_FILE || x->type > JT_WHITEOUT || !path_ok(x->path) ||
                    (x->link && x->type != JT_LINK) || (x->opaque && x->type != JT_DIR) ||
                    x->uid > 65535 || x->gid > 65535 ||
                    (i && strcmp(t.v[i - 1].path, x->path) >= 0) ||
                    (x->type == JT_DIR && !S_ISDIR(x->mode)) ||
                    (x->type == JT_FILE && !S_ISREG(x->mode)))
                        abort();
        }
        uint8_t *b = NULL;
        size_t len = 0;
        if (jt_tree_encode(&t, &b, &len) < 0 || len != size || memcmp(b, data, size) != 0)
                abort();
        free(b);
        jt_tree_free(&t);
        return 0;
}
