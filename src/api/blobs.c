/* SPDX-License-Identifier: Apache-2.0 */
/* warren.v1.Images: uploads by digest and pruning (the builder's store).
 *
 *   MissingBlobs{digests}   which of the files the client is about to build
 *                           with the daemon lacks;
 *   UploadBlob(stream)      one file: `digest` first, then `data` chunks,
 *                           spooled to an anonymous file, sha256 checked at
 *                           half-close (DATA_LOSS on a mismatch), then linked
 *                           in as <state>/blobs/sha256/<hex>;
 *   FileAdd.digest          a build step (or context file) naming a blob
 *                           instead of carrying the bytes (api_blob_read);
 *   PruneImages             unnamed images no sandbox uses (with the layers
 *                           only they used), the build cache and the blobs.
 *
 * Blobs are content-addressed, so a half-written one is never visible
 * (O_TMPFILE + linkat) and two uploads of the same file are harmless; a
 * blob is not fsync'ed (that would block the loop), its digest is checked
 * again whenever it is read, and a torn one is dropped. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "api/api-internal.h"
#include "basic/log.h"
#include "basic/macro.h"
#include "image/image.h"
#include "warren/v1/images.pb-c.h"

#define BLOB_MAX (1ull << 30)
#define DIGESTS_MAX 100000

static void finish_errf(struct rpc_call *call, enum wr_status status, const char *fmt, ...)
        _printf_(3, 4);
static void finish_errf(struct rpc_call *call, enum wr_status status, const char *fmt, ...) {
        struct wr_err e = {0};
        char msg[WR_ERR_MSG_MAX];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(msg, sizeof(msg), fmt, ap);
        va_end(ap);
        err_setx(&e, -EINVAL, status, WR_FAULT_CLIENT, "%s", msg);
        rpc_call_finish_err(call, &e);
}

/* "sha256:<64 lower hex>" → the hex part, or NULL. */
static const char *digest_hex(const char *d) {
        return img_digest_valid(d) ? d + 7 : NULL;
}

static void blob_path(struct api_ctx *ctx, const char *hex, char *out, size_t n) {
        snprintf(out, n, "%s/blobs/sha256/%s", ctx->state_dir, hex ? hex : "");
}

int api_blob_read(struct api_ctx *ctx, const char *digest, void **ret, size_t *len,
                  struct wr_err *e) {
        const char *hex = digest_hex(digest);
        if (!hex)
                return err_setx(e, -EINVAL, WR_STATUS_INVALID_ARGUMENT, WR_FAULT_CLIENT,
                                "digest \"%.80s\" is not sha256:<64 hex digits>", digest);
        char path[PATH_MAX];
        blob_path(ctx, hex, path, sizeof(path));
        _cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
        struct stat sb;
        if (fd < 0 || fstat(fd, &sb) < 0)
                return err_setx(e, -ENOENT, WR_STATUS_FAILED_PRECONDITION, WR_FAULT_CLIENT,
                                "blob %.80s was not uploaded (ask MissingBlobs, then UploadBlob "
                                "the missing ones)",
                                digest);
        if (!S_ISREG(sb.st_mode) || (uint64_t) sb.st_size > BLOB_MAX)
                return err_set(e, -EIO, "blob %.80s: not a regular file", digest);
        size_t n = (size_t) sb.st_size;
        uint8_t *buf = malloc(n ? n : 1);
        if (!buf)
                return err_set(e, -ENOMEM, "out of memory");
        size_t got = 0;
        while (got < n) {
                ssize_t k = read(fd, buf + got, n - got);
                if (k <= 0) {
                        free(buf);
                        return err_set(e, -EIO, "blob %.80s: read: %m", digest);
                }
                got += (size_t) k;
        }
        unsigned char d[32];
        char hex2[65];
        if (EVP_Digest(buf, n, d, NULL, EVP_sha256(), NULL) != 1) {
                free(buf);
                return err_set(e, -EIO, "sha256 failed");
        }
        for (int i = 0; i < 32; i++)
                snprintf(hex2 + 2 * i, 3, "%02x", d[i]);
        if (strcmp(hex, hex2)) {
                /* torn by a crash, or changed on disk: gone, upload again */
                free(buf);
                (void) unlink(path);
                return err_setx(e, -ENOENT, WR_STATUS_FAILED_PRECONDITION, WR_FAULT_CLIENT,
                                "blob %.80s was not uploaded (ask MissingBlobs, then UploadBlob "
                                "the missing ones)",
                                digest);
        }
        *ret = buf;
        *len = n;
        return 0;
}

/* --- MissingBlobs --- */

static void missing_blobs(struct rpc_call *call, const ProtobufCMessage *m) {
        const Warren__V1__MissingBlobsRequest *req = (const void *) m;
        struct api_ctx *ctx = rpc_call_server_ctx(call);
        if (req->n_digests > DIGESTS_MAX) {
                rpc_call_finish(call, WR_STATUS_INVALID_ARGUMENT,
                                "digests: more than 100000 in one request");
                return;
        }
        char **missing = calloc(req->n_digests + 1, sizeof(char *));
        if (!missing) {
                rpc_call_finish(call, WR_STATUS_RESOURCE_EXHAUSTED, "out of memory");
                return;
        }
        size_t n = 0;
        for (size_t i = 0; i < req->n_digests; i++) {
                const char *hex = digest_hex(req->digests[i]);
                if (!hex) {
                        free(missing);
                        finish_errf(call, WR_STATUS_INVALID_ARGUMENT,
                                    "digests[%zu]: \"%.80s\" is not sha256:<64 lower-case "
                                    "hex digits>",
                                    i, req->digests[i]);
                        return;
                }
                char path[PATH_MAX];
                blob_path(ctx, hex, path, sizeof(path));
                if (access(path, F_OK) < 0)
                        missing[n++] = req->digests[i];
        }
        Warren__V1__MissingBlobsResponse resp = WARREN__V1__MISSING_BLOBS_RESPONSE__INIT;
        resp.n_missing = n;
        resp.missing = missing;
        rpc_call_reply(call, &resp.base);
        free(missing);
}

/* --- UploadBlob --- */

struct upload {
        int fd;
        EVP_MD_CTX *md;
        char hex[65];
        uint64_t size;
};

static void upload_free(struct rpc_call *call) {
        struct upload *u = rpc_call_get_data(call);
        if (!u)
                return;
        if (u->fd >= 0)
                close(u->fd);
        EVP_MD_CTX_free(u->md);
        free(u);
        rpc_call_set_data(call, NULL);
}

static int mkdirs(struct api_ctx *ctx) {
        char p[PATH_MAX];
        snprintf(p, sizeof(p), "%s/blobs", ctx->state_dir);
        if (mkdir(p, 0700) < 0 && errno != EEXIST)
                return -errno;
        snprintf(p, sizeof(p), "%s/blobs/sha256", ctx->state_dir);
        if (mkdir(p, 0700) < 0 && errno != EEXIST)
                return -errno;
        return 0;
}

static void upload_message(struct rpc_call *call, const ProtobufCMessage *m) {
        const Warren__V1__UploadBlobRequest *req = (const void *) m;
        struct api_ctx *ctx = rpc_call_server_ctx(call);
        struct upload *u = rpc_call_get_data(call);
        if (rpc_call_is_done(call))
                return;
        if (!u) {
                const char *hex = req->kind_case == WARREN__V1__UPLOAD_BLOB_REQUEST__KIND_DIGEST
                                          ? digest_hex(req->digest)
                                          : NULL;
                if (!hex) {
                        rpc_call_finish(call, WR_STATUS_INVALID_ARGUMENT,
                                        "digest: the first UploadBlob message must carry the "
                                        "file's digest (sha256:<64 lower-case hex digits>), then "
                                        "data chunks");
                        return;
                }
                char tmp[PATH_MAX];
                snprintf(tmp, sizeof(tmp), "%s/tmp", ctx->state_dir);
                if (!(u = calloc(1, sizeof(*u)))) {
                        rpc_call_finish(call, WR_STATUS_RESOURCE_EXHAUSTED, "out of memory");
                        return;
                }
                u->fd = open(tmp, O_RDWR | O_TMPFILE | O_CLOEXEC, 0600);
                u->md = EVP_MD_CTX_new();
                snprintf(u->hex, sizeof(u->hex), "%s", hex);
                rpc_call_set_data(call, u);
                if (u->fd < 0 || !u->md || EVP_DigestInit_ex(u->md, EVP_sha256(), NULL) != 1 ||
                    mkdirs(ctx) < 0)
                        rpc_call_finish(call, WR_STATUS_INTERNAL, "upload: cannot spool the blob");
                return;
        }
        if (req->kind_case != WARREN__V1__UPLOAD_BLOB_REQUEST__KIND_DATA) {
                rpc_call_finish(call, WR_STATUS_INVALID_ARGUMENT,
                                "digest: only the first UploadBlob message may carry it");
                return;
        }
        if (u->size + req->data.len > BLOB_MAX) {
                rpc_call_finish(call, WR_STATUS_RESOURCE_EXHAUSTED,
                                "data: a blob may hold at most 1 GiB");
                return;
        }
        const uint8_t *p = req->data.data;
        size_t left = req->data.len;
        while (left) {
                ssize_t k = write(u->fd, p, left);
                if (k < 0 && errno == EINTR)
                        continue;
                if (k <= 0) {
                        rpc_call_finish(call,
                                        errno == ENOSPC ? WR_STATUS_RESOURCE_EXHAUSTED
                                                        : WR_STATUS_INTERNAL,
                                        "upload: write failed (disk full?)");
                        return;
                }
                p += k;
                left -= (size_t) k;
        }
        EVP_DigestUpdate(u->md, req->data.data, req->data.len);
        u->size += req->data.len;
}

static void upload_half_close(struct rpc_call *call) {
        struct api_ctx *ctx = rpc_call_server_ctx(call);
        struct upload *u = rpc_call_get_data(call);
        if (rpc_call_is_done(call))
                return;
        if (!u) {
                rpc_call_finish(call, WR_STATUS_INVALID_ARGUMENT,
                                "digest: UploadBlob needs a digest message, then data chunks");
                return;
        }
        unsigned char d[32];
        char hex[65];
        if (EVP_DigestFinal_ex(u->md, d, NULL) != 1) {
                rpc_call_finish(call, WR_STATUS_INTERNAL, "upload: sha256 failed");
                return;
        }
        for (int i = 0; i < 32; i++)
                snprintf(hex + 2 * i, 3, "%02x", d[i]);
        if (strcmp(hex, u->hex)) {
                finish_errf(call, WR_STATUS_DATA_LOSS,
                            "data: the upload's sha256 is %s, not the announced %s "
                            "(nothing was stored)",
                            hex, u->hex);
                return;
        }
        char fdpath[64], path[PATH_MAX];
        snprintf(fdpath, sizeof(fdpath), "/proc/self/fd/%d", u->fd);
        blob_path(ctx, hex, path, sizeof(path));
        /* no fsync on the loop: a blob torn by a crash is caught when it is
         * read (api_blob_read checks the digest) */
        if (linkat(AT_FDCWD, fdpath, AT_FDCWD, path, AT_SYMLINK_FOLLOW) < 0 && errno != EEXIST) {
                rpc_call_finish(call, WR_STATUS_INTERNAL, "upload: cannot store the blob");
                return;
        }
        Warren__V1__UploadBlobResponse resp = WARREN__V1__UPLOAD_BLOB_RESPONSE__INIT;
        char digest[80];
        snprintf(digest, sizeof(digest), "sha256:%s", hex);
        resp.digest = digest;
        resp.size = u->size;
        rpc_call_reply(call, &resp.base);
}

static void upload_cancel(struct rpc_call *call, int status) {
        upload_free(call);
}

/* --- PruneImages --- */

/* The entries of dir (files only), removed when remove; the count. */
static unsigned dir_entries(const char *dir, bool remove) {
        DIR *d = opendir(dir);
        if (!d)
                return 0;
        unsigned n = 0;
        struct dirent *de;
        while ((de = readdir(d)))
                if (de->d_name[0] != '.' && (!remove || unlinkat(dirfd(d), de->d_name, 0) == 0))
                        n++;
        closedir(d);
        return n;
}

static void prune_images(struct rpc_call *call, const ProtobufCMessage *m) {
        struct api_ctx *ctx = rpc_call_server_ctx(call);
        /* the store is every environment's: an image one tenant built and
         * uses by id is unnamed too */
        if (api_caller(call)->role != API_ROLE_OPERATOR) {
                rpc_call_finish(call, WR_STATUS_PERMISSION_DENIED,
                                "PruneImages removes every environment's unused images: the "
                                "operator's (root on the unix socket) to run");
                return;
        }
        if (!ctx->images) {
                rpc_call_finish(call, WR_STATUS_UNAVAILABLE, "the image store is not available");
                return;
        }
        if (api_builds_running() > 0) {
                rpc_call_finish(call, WR_STATUS_FAILED_PRECONDITION,
                                "a build is running: prune when it has ended");
                return;
        }
        struct img_info **list = NULL;
        size_t n = 0;
        struct wr_err e = {0};
        if (img_store_list(ctx->images, &list, &n, &e) < 0) {
                rpc_call_finish_err(call, &e);
                return;
        }
        char layers[PATH_MAX], dir[PATH_MAX];
        snprintf(layers, sizeof(layers), "%s/layers/sha256", ctx->state_dir);
        unsigned layers_before = dir_entries(layers, false);
        char **deleted = calloc(n + 1, sizeof(char *));
        size_t n_deleted = 0;
        /* newest first: an image built on top of another goes before it */
        for (size_t i = 0; deleted && i < n; i++) {
                if (list[i]->n_names)
                        continue;
                struct wr_err de = {0};
                if (img_store_delete(ctx->images, list[i]->id, &de) == 0)
                        deleted[n_deleted++] = list[i]->id;
        }
        snprintf(dir, sizeof(dir), "%s/build-cache", ctx->state_dir);
        unsigned cache = dir_entries(dir, true);
        snprintf(dir, sizeof(dir), "%s/blobs/sha256", ctx->state_dir);
        unsigned blobs = dir_entries(dir, true);
        unsigned layers_after = dir_entries(layers, false);
        Warren__V1__PruneImagesResponse resp = WARREN__V1__PRUNE_IMAGES_RESPONSE__INIT;
        resp.n_deleted_images = n_deleted;
        resp.deleted_images = deleted;
        resp.deleted_layers = layers_before > layers_after ? layers_before - layers_after : 0;
        resp.deleted_cache_entries = cache;
        resp.deleted_blobs = blobs;
        log_info("prune: %zu image(s), %u layer(s), %u cache entries, %u blob(s) removed",
                 n_deleted, resp.deleted_layers, cache, blobs);
        if (deleted)
                rpc_call_reply(call, &resp.base);
        else
                rpc_call_finish(call, WR_STATUS_RESOURCE_EXHAUSTED, "out of memory");
        free(deleted);
        img_info_list_free(list, n);
}

const struct rpc_method api_blob_methods[3] = {
        {
                .path = "/warren.v1.Images/MissingBlobs",
                .kind = RPC_UNARY,
                .input = &warren__v1__missing_blobs_request__descriptor,
                .output = &warren__v1__missing_blobs_response__descriptor,
                .on_message = missing_blobs,
        },
        {
                .path = "/warren.v1.Images/UploadBlob",
                .kind = RPC_CLIENT_STREAM,
                .input = &warren__v1__upload_blob_request__descriptor,
                .output = &warren__v1__upload_blob_response__descriptor,
                .on_message = upload_message,
                .on_half_close = upload_half_close,
                .on_cancel = upload_cancel,
                .on_free = upload_free,
        },
        {
                .path = "/warren.v1.Images/PruneImages",
                .kind = RPC_UNARY,
                .input = &warren__v1__prune_images_request__descriptor,
                .output = &warren__v1__prune_images_response__descriptor,
                .on_message = prune_images,
        },
};
