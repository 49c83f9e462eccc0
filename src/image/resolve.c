/* SPDX-License-Identifier: Apache-2.0 */
/* Image sources: stored, else pulled (img_resolve). */
#include "image/resolve.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "basic/macro.h"
#include "image/pull.h"

struct img_resolve {
        struct img_store *s;
        struct img_pull *pull;
        img_resolve_done_fn done;
        void *userdata;
        char *ref;
};

/* ref as given, then under its local name. -ENOENT with e set to the
 * store's answer for ref as given. */
static int resolve_stored(struct img_store *s, const char *ref, struct img_info **ret,
                          struct wr_err *e) {
        struct wr_err le = {0};
        int r = img_store_resolve(s, ref, ret, &le);
        if (r != -ENOENT) {
                if (r < 0 && e)
                        *e = le;
                return r;
        }
        char local[512];
        if (img_pull_local_name(ref, local, sizeof(local), NULL) >= 0 && strcmp(local, ref) != 0 &&
            img_store_resolve(s, local, ret, NULL) >= 0)
                return 0;
        if (e)
                *e = le;
        return -ENOENT;
}

static void op_free(struct img_resolve *op) {
        if (!op)
                return;
        free(op->ref);
        free(op);
}

static void pull_done(struct img_pull *p, int r, const struct img_info *pulled,
                      const struct wr_err *e, void *userdata) {
        struct img_resolve *op = userdata;
        struct img_info *info = NULL;
        struct wr_err le = {0};
        if (r >= 0) {
                /* the committed image, as the store has it now */
                r = img_store_resolve(op->s, pulled->id, &info, &le);
                e = &le;
        }
        op->done(r, r >= 0 ? info : NULL, r < 0 ? e : NULL, op->userdata);
        op_free(op);
}

int img_resolve(struct img_store *s, uv_loop_t *loop, const char *ref, unsigned flags,
                img_resolve_done_fn done, void *userdata, struct img_info **ret_info,
                struct img_resolve **ret_op, struct wr_err *e) {
        int r = resolve_stored(s, ref, ret_info, e);
        if (r >= 0)
                return 1;
        if (r != -ENOENT)
                return r;
        if (flags & IMG_RESOLVE_NO_PULL)
                return err_setx(e, -ENOENT, WR_STATUS_NOT_FOUND, WR_FAULT_CLIENT,
                                "image %s not found: import it with `warren image import %s "
                                "FILE` (or pull it)",
                                ref, ref);
        _cleanup_free_ struct img_resolve *op = calloc(1, sizeof(*op));
        if (!op || !(op->ref = strdup(ref))) {
                if (op)
                        free(op->ref);
                return err_set(e, -ENOMEM, "image %s: out of memory", ref);
        }
        op->s = s;
        op->done = done;
        op->userdata = userdata;
        if ((r = img_pull_start(s, loop, ref, NULL, pull_done, op, &op->pull, e)) < 0) {
                free(op->ref);
                return err_prefix(e, r, "image %s", ref);
        }
        if (ret_op)
                *ret_op = op;
        TAKE_PTR(op);
        return 0;
}

void img_resolve_cancel(struct img_resolve *op) {
        if (!op)
                return;
        img_pull_cancel(op->pull);
        op_free(op);
}
