/* SPDX-License-Identifier: Apache-2.0 */
/* warren image build|prune.
 *
 *   warren image build -f Dockerfile [-t NAME] [--build-arg K=V]...
 *                      [--step-timeout SECS] [CONTEXT]
 *   warren image build --spec spec.json [-t NAME]
 *   warren image prune
 *
 * The Dockerfile goes to the daemon as text (its parser decides); the
 * files below CONTEXT (default ".") travel as the build context, by
 * digest: MissingBlobs first, then UploadBlob for only what the daemon
 * lacks. .dockerignore patterns and .git are left out; a symlink whose
 * target leaves CONTEXT is refused. --spec reads an ImageBuild as JSON
 * (the protobuf JSON mapping: proto or lowerCamel field names, bytes as
 * base64; what the SDK's Image.to_json() writes). The build log streams
 * to stderr, the image id goes to stdout. */
#include <errno.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <ftw.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"
#include "warren/v1/images.pb-c.h"

enum { OPT_FILE = CLI_OPT_FIRST_LOCAL, OPT_TAG, OPT_SPEC, OPT_BUILD_ARG, OPT_STEP_TIMEOUT };

#define CONTEXT_FILES_MAX 100000
#define BUILD_ARGS_MAX 64

/* ---- the build context ---- */

struct ctx_file {
        char *rel, *abs;
        uint32_t mode;
        char digest[7 + 64 + 1];
};

static struct {
        const char *root;
        char real_root[PATH_MAX];
        char **ignore;
        size_t n_ignore;
        struct ctx_file *v;
        size_t n, cap;
        int err;
        char errmsg[PATH_MAX + 256];
} walk;

static bool ignored(const char *rel) {
        bool out = false;
        for (size_t i = 0; i < walk.n_ignore; i++) {
                const char *p = walk.ignore[i];
                bool neg = p[0] == '!';
                if (neg)
                        p++;
                size_t pl = strlen(p);
                if (fnmatch(p, rel, FNM_PATHNAME) == 0 || (!strncmp(rel, p, pl) && rel[pl] == '/'))
                        out = !neg;
        }
        return out;
}

/* SHA-256 (FIPS 180-4), here because the CLI does not link libcrypto
 * (tls-dl.h: it is loaded only for TLS connections). */
struct sha256 {
        uint32_t h[8];
        uint8_t buf[64];
        uint64_t len;
};

static const uint32_t K[64] = {
        0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4,
        0xab1c5ed5, 0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe,
        0x9bdc06a7, 0xc19bf174, 0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f,
        0x4a7484aa, 0x5cb0a9dc, 0x76f988da, 0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7,
        0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967, 0x27b70a85, 0x2e1b2138, 0x4d2c6dfc,
        0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85, 0xa2bfe8a1, 0xa81a664b,
        0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070, 0x19a4c116,
        0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
        0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7,
        0xc67178f2};

#define ROR(x, n) (((x) >> (n)) | ((x) << (32 - (n))))

static void sha256_block(struct sha256 *c, const uint8_t *p) {
        uint32_t w[64], a, b, cc, d, e, f, g, h;
        for (int i = 0; i < 16; i++)
                w[i] = (uint32_t) p[4 * i] << 24 | (uint32_t) p[4 * i + 1] << 16 |
                       (uint32_t) p[4 * i + 2] << 8 | p[4 * i + 3];
        for (int i = 16; i < 64; i++) {
                uint32_t s0 = ROR(w[i - 15], 7) ^ ROR(w[i - 15], 18) ^ (w[i - 15] >> 3);
                uint32_t s1 = ROR(w[i - 2], 17) ^ ROR(w[i - 2], 19) ^ (w[i - 2] >> 10);
                w[i] = w[i - 16] + s0 + w[i - 7] + s1;
        }
        a = c->h[0], b = c->h[1], cc = c->h[2], d = c->h[3];
        e = c->h[4], f = c->h[5], g = c->h[6], h = c->h[7];
        for (int i = 0; i < 64; i++) {
                uint32_t t1 = h + (ROR(e, 6) ^ ROR(e, 11) ^ ROR(e, 25)) + ((e & f) ^ (~e & g)) +
                              K[i] + w[i];
                uint32_t t2 =
                        (ROR(a, 2) ^ ROR(a, 13) ^ ROR(a, 22)) + ((a & b) ^ (a & cc) ^ (b & cc));
                h = g, g = f, f = e, e = d + t1, d = cc, cc = b, b = a, a = t1 + t2;
        }
        c->h[0] += a, c->h[1] += b, c->h[2] += cc, c->h[3] += d;
        c->h[4] += e, c->h[5] += f, c->h[6] += g, c->h[7] += h;
}

static void sha256_init(struct sha256 *c) {
        static const uint32_t iv[8] = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
                                       0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};
        memcpy(c->h, iv, sizeof(iv));
        c->len = 0;
}

static void sha256_update(struct sha256 *c, const uint8_t *p, size_t n) {
        while (n) {
                size_t have = c->len % 64, take = 64 - have < n ? 64 - have : n;
                memcpy(c->buf + have, p, take);
                c->len += take;
                p += take;
                n -= take;
                if (c->len % 64 == 0)
                        sha256_block(c, c->buf);
        }
}

static void sha256_final(struct sha256 *c, uint8_t out[32]) {
        uint64_t bits = c->len * 8;
        uint8_t pad = 0x80, zero = 0;
        sha256_update(c, &pad, 1);
        while (c->len % 64 != 56)
                sha256_update(c, &zero, 1);
        uint8_t l[8];
        for (int i = 0; i < 8; i++)
                l[i] = (uint8_t) (bits >> (56 - 8 * i));
        sha256_update(c, l, 8);
        for (int i = 0; i < 8; i++)
                for (int k = 0; k < 4; k++)
                        out[4 * i + k] = (uint8_t) (c->h[i] >> (24 - 8 * k));
}

static int file_digest(const char *path, char out[static 72]) {
        _cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
                return -errno;
        struct sha256 c;
        sha256_init(&c);
        uint8_t buf[65536];
        ssize_t k;
        while ((k = read(fd, buf, sizeof(buf))) > 0)
                sha256_update(&c, buf, (size_t) k);
        if (k < 0)
                return -errno;
        unsigned char d[32];
        sha256_final(&c, d);
        strcpy(out, "sha256:");
        for (int i = 0; i < 32; i++)
                snprintf(out + 7 + 2 * i, 3, "%02x", d[i]);
        return 0;
}

static int visit(const char *path, const struct stat *sb, int type, struct FTW *ftw) {
        const char *rel = path + strlen(walk.root);
        while (*rel == '/')
                rel++;
        if (!*rel)
                return FTW_CONTINUE;
        if (!strcmp(rel, ".git") && type == FTW_D)
                return FTW_SKIP_SUBTREE;
        if (ignored(rel))
                return type == FTW_D ? FTW_SKIP_SUBTREE : FTW_CONTINUE;
        struct stat tsb = *sb;
        if (type == FTW_SL || type == FTW_SLN) {
                char real[PATH_MAX];
                size_t rl = strlen(walk.real_root);
                if (!realpath(path, real) ||
                    (strcmp(real, walk.real_root) &&
                     (strncmp(real, walk.real_root, rl) || real[rl] != '/'))) {
                        char target[PATH_MAX] = "";
                        ssize_t tl = readlink(path, target, sizeof(target) - 1);
                        target[tl > 0 ? tl : 0] = '\0';
                        snprintf(walk.errmsg, sizeof(walk.errmsg),
                                 "%s is a symlink to %s, which is outside the build context %s: "
                                 "refusing to send it",
                                 path, target, walk.root);
                        walk.err = -EPERM;
                        return FTW_STOP;
                }
                if (stat(path, &tsb) < 0 || !S_ISREG(tsb.st_mode))
                        return FTW_CONTINUE; /* a link to a directory inside: its files come anyway
                                              */
        } else if (type != FTW_F || !S_ISREG(sb->st_mode))
                return FTW_CONTINUE;
        if (walk.n >= CONTEXT_FILES_MAX) {
                snprintf(walk.errmsg, sizeof(walk.errmsg),
                         "more than %d files in the build context (add a .dockerignore)",
                         CONTEXT_FILES_MAX);
                walk.err = -E2BIG;
                return FTW_STOP;
        }
        if (walk.n == walk.cap) {
                size_t nc = walk.cap ? walk.cap * 2 : 64;
                struct ctx_file *nv = cli_alloc(nc * sizeof(*nv));
                if (walk.n)
                        memcpy(nv, walk.v, walk.n * sizeof(*nv));
                walk.v = nv;
                walk.cap = nc;
        }
        struct ctx_file *f = &walk.v[walk.n];
        f->rel = cli_strdup(rel);
        f->abs = cli_strdup(path);
        f->mode = tsb.st_mode & 07777;
        int r = file_digest(path, f->digest);
        if (r < 0) {
                snprintf(walk.errmsg, sizeof(walk.errmsg), "cannot read %s: %s", path,
                         strerror(-r));
                walk.err = r;
                return FTW_STOP;
        }
        walk.n++;
        return FTW_CONTINUE;
}

static int read_context(const char *root) {
        walk.root = root;
        if (!realpath(root, walk.real_root)) {
                fprintf(stderr, "warren: build context %s: %s\n", root, strerror(errno));
                return -errno;
        }
        char p[PATH_MAX];
        snprintf(p, sizeof(p), "%s/.dockerignore", root);
        FILE *f = fopen(p, "re");
        if (f) {
                char line[1024];
                while (fgets(line, sizeof(line), f)) {
                        line[strcspn(line, "\r\n")] = '\0';
                        char *s = line + strspn(line, " \t");
                        size_t l = strlen(s);
                        while (l && (s[l - 1] == ' ' || s[l - 1] == '/'))
                                s[--l] = '\0';
                        while (*s == '/' || (s[0] == '.' && s[1] == '/'))
                                s += *s == '/' ? 1 : 2;
                        if (*s && *s != '#')
                                cli_push((void ***) &walk.ignore, &walk.n_ignore, cli_strdup(s));
                }
                fclose(f);
        }
        if (nftw(root, visit, 64, FTW_PHYS | FTW_ACTIONRETVAL) < 0 && !walk.err) {
                fprintf(stderr, "warren: build context %s: %s\n", root, strerror(errno));
                return -errno;
        }
        if (walk.err) {
                fprintf(stderr, "warren: %s\n", walk.errmsg);
                return walk.err;
        }
        return 0;
}

/* ---- uploads by digest ---- */

static ProtobufCMessage *blob_chunk(const uint8_t *data, size_t len, void *userdata) {
        Warren__V1__UploadBlobRequest *m = userdata;
        warren__v1__upload_blob_request__init(m);
        m->kind_case = WARREN__V1__UPLOAD_BLOB_REQUEST__KIND_DATA;
        m->data.data = (uint8_t *) data;
        m->data.len = len;
        return &m->base;
}

static int upload_missing(struct cli_ctx *ctx) {
        if (!walk.n)
                return CLI_EXIT_OK;
        Warren__V1__MissingBlobsRequest req = WARREN__V1__MISSING_BLOBS_REQUEST__INIT;
        req.digests = cli_alloc(walk.n * sizeof(char *));
        for (size_t i = 0; i < walk.n; i++)
                req.digests[req.n_digests++] = walk.v[i].digest;
        Warren__V1__MissingBlobsResponse *resp = NULL;
        int rc = cli_call(ctx, "/warren.v1.Images/MissingBlobs", &req.base,
                          &warren__v1__missing_blobs_response__descriptor,
                          (ProtobufCMessage **) &resp);
        if (rc != CLI_EXIT_OK)
                return rc;
        size_t uploaded = 0;
        for (size_t m = 0; rc == CLI_EXIT_OK && m < resp->n_missing; m++) {
                const struct ctx_file *f = NULL;
                for (size_t i = 0; i < walk.n && !f; i++)
                        if (!strcmp(walk.v[i].digest, resp->missing[m]))
                                f = &walk.v[i];
                if (!f)
                        continue;
                _cleanup_close_ int fd = open(f->abs, O_RDONLY | O_CLOEXEC);
                if (fd < 0) {
                        fprintf(stderr, "warren: cannot open %s: %s\n", f->abs, strerror(errno));
                        rc = CLI_EXIT_FAIL;
                        break;
                }
                Warren__V1__UploadBlobRequest first = WARREN__V1__UPLOAD_BLOB_REQUEST__INIT, chunk;
                first.kind_case = WARREN__V1__UPLOAD_BLOB_REQUEST__KIND_DIGEST;
                first.digest = (char *) f->digest;
                Warren__V1__UploadBlobResponse *ur = NULL;
                rc = cli_upload(ctx, "/warren.v1.Images/UploadBlob", &first.base, fd, blob_chunk,
                                &chunk, &warren__v1__upload_blob_response__descriptor, f->rel,
                                (ProtobufCMessage **) &ur);
                if (rc == CLI_EXIT_OK) {
                        protobuf_c_message_free_unpacked(&ur->base, NULL);
                        uploaded++;
                }
        }
        fprintf(stderr, "Context: %zu file%s, %zu uploaded\n", walk.n, walk.n == 1 ? "" : "s",
                uploaded);
        protobuf_c_message_free_unpacked(&resp->base, NULL);
        return rc;
}

/* ---- --spec: JSON to protobuf wire bytes, by the descriptors ---- */

struct wbuf {
        uint8_t *p;
        size_t len, cap;
};

static void wput(struct wbuf *b, const void *d, size_t n) {
        if (b->len + n > b->cap) {
                size_t nc = b->cap * 2 > b->len + n ? b->cap * 2 : b->len + n + 64;
                uint8_t *np = realloc(b->p, nc);
                if (!np)
                        abort();
                b->p = np;
                b->cap = nc;
        }
        memcpy(b->p + b->len, d, n);
        b->len += n;
}

static void wvarint(struct wbuf *b, uint64_t v) {
        uint8_t t[10];
        size_t n = 0;
        do {
                t[n] = (uint8_t) (v & 0x7f);
                v >>= 7;
                if (v)
                        t[n] |= 0x80;
                n++;
        } while (v);
        wput(b, t, n);
}

static void wbytes(struct wbuf *b, unsigned id, const void *d, size_t n) {
        wvarint(b, (uint64_t) id << 3 | 2);
        wvarint(b, n);
        wput(b, d, n);
}

static int b64dec(const char *s, struct wbuf *out) {
        uint32_t acc = 0;
        int bits = 0;
        for (; *s && *s != '='; s++) {
                const char *tab =
                        "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
                char c = *s == '-' ? '+' : *s == '_' ? '/' : *s;
                const char *p = strchr(tab, c);
                if (!p || !c)
                        return -EINVAL;
                acc = acc << 6 | (uint32_t) (p - tab);
                bits += 6;
                if (bits >= 8) {
                        bits -= 8;
                        uint8_t byte = (uint8_t) (acc >> bits);
                        wput(out, &byte, 1);
                }
        }
        return 0;
}

static int encode_msg(const ProtobufCMessageDescriptor *d, json_t *o, struct wbuf *out,
                      const char *where);

static bool name_is(const char *key, const char *field) {
        /* proto name or lowerCamelCase */
        if (!strcmp(key, field))
                return true;
        for (; *key && *field; key++, field++) {
                if (*field == '_' && field[1]) {
                        field++;
                        if (*key != *field && *key != *field - 32)
                                return false;
                        continue;
                }
                if (*key != *field)
                        return false;
        }
        return !*key && !*field;
}

static int encode_value(const ProtobufCFieldDescriptor *f, json_t *v, struct wbuf *out,
                        const char *where) {
        switch (f->type) {
        case PROTOBUF_C_TYPE_STRING:
                if (!json_is_string(v))
                        goto bad;
                wbytes(out, f->id, json_string_value(v), json_string_length(v));
                return 0;
        case PROTOBUF_C_TYPE_BYTES: {
                struct wbuf b = {0};
                if (!json_is_string(v) || b64dec(json_string_value(v), &b) < 0) {
                        free(b.p);
                        goto bad;
                }
                wbytes(out, f->id, b.p ? b.p : (uint8_t *) "", b.len);
                free(b.p);
                return 0;
        }
        case PROTOBUF_C_TYPE_BOOL:
                if (!json_is_boolean(v))
                        goto bad;
                wvarint(out, (uint64_t) f->id << 3);
                wvarint(out, json_is_true(v));
                return 0;
        case PROTOBUF_C_TYPE_INT32:
        case PROTOBUF_C_TYPE_INT64:
        case PROTOBUF_C_TYPE_UINT32:
        case PROTOBUF_C_TYPE_UINT64:
        case PROTOBUF_C_TYPE_ENUM: {
                json_int_t x;
                if (json_is_integer(v))
                        x = json_integer_value(v);
                else if (json_is_string(v) && f->type != PROTOBUF_C_TYPE_ENUM)
                        x = strtoll(json_string_value(v), NULL, 10);
                else if (json_is_string(v)) {
                        const ProtobufCEnumValue *ev = protobuf_c_enum_descriptor_get_value_by_name(
                                f->descriptor, json_string_value(v));
                        if (!ev)
                                goto bad;
                        x = ev->value;
                } else
                        goto bad;
                wvarint(out, (uint64_t) f->id << 3);
                wvarint(out, (uint64_t) x);
                return 0;
        }
        case PROTOBUF_C_TYPE_DOUBLE: {
                if (!json_is_number(v))
                        goto bad;
                double x = json_number_value(v);
                wvarint(out, (uint64_t) f->id << 3 | 1);
                wput(out, &x, 8);
                return 0;
        }
        case PROTOBUF_C_TYPE_MESSAGE: {
                struct wbuf sub = {0};
                char w[256];
                snprintf(w, sizeof(w), "%s.%s", where, f->name);
                int r = encode_msg(f->descriptor, v, &sub, w);
                if (r >= 0)
                        wbytes(out, f->id, sub.p ? sub.p : (uint8_t *) "", sub.len);
                free(sub.p);
                return r;
        }
        default:
                fprintf(stderr, "warren: --spec: %s.%s: this field type is not supported\n", where,
                        f->name);
                return -EINVAL;
        }
bad:
        fprintf(stderr, "warren: --spec: %s.%s: wrong type of value\n", where, f->name);
        return -EINVAL;
}

static int encode_msg(const ProtobufCMessageDescriptor *d, json_t *o, struct wbuf *out,
                      const char *where) {
        if (!json_is_object(o)) {
                fprintf(stderr, "warren: --spec: %s: want a JSON object\n", where);
                return -EINVAL;
        }
        const char *key;
        json_t *v;
        json_object_foreach(o, key, v) {
                const ProtobufCFieldDescriptor *f = NULL;
                for (unsigned i = 0; i < d->n_fields && !f; i++)
                        if (name_is(key, d->fields[i].name))
                                f = &d->fields[i];
                if (!f) {
                        fprintf(stderr, "warren: --spec: %s: unknown field \"%s\"\n", where, key);
                        return -EINVAL;
                }
                int r = 0;
                const ProtobufCMessageDescriptor *md =
                        f->type == PROTOBUF_C_TYPE_MESSAGE ? f->descriptor : NULL;
                bool is_map = md && md->n_fields == 2 && f->label == PROTOBUF_C_LABEL_REPEATED &&
                              strstr(md->name, "Entry") && json_is_object(v);
                if (is_map) {
                        const char *mk;
                        json_t *mv;
                        json_object_foreach(v, mk, mv) {
                                struct wbuf e = {0};
                                wbytes(&e, 1, mk, strlen(mk));
                                r = encode_value(&md->fields[1], mv, &e, where);
                                if (r >= 0)
                                        wbytes(out, f->id, e.p, e.len);
                                free(e.p);
                                if (r < 0)
                                        return r;
                        }
                } else if (f->label == PROTOBUF_C_LABEL_REPEATED) {
                        if (!json_is_array(v)) {
                                fprintf(stderr, "warren: --spec: %s.%s: want an array\n", where,
                                        key);
                                return -EINVAL;
                        }
                        size_t i;
                        json_t *x;
                        json_array_foreach(v, i, x) if ((r = encode_value(f, x, out, where)) <
                                                        0) return r;
                } else if ((r = encode_value(f, v, out, where)) < 0)
                        return r;
        }
        return 0;
}

static Warren__V1__ImageBuild *read_spec(const char *path) {
        json_error_t je;
        json_t *j = json_load_file(path, JSON_REJECT_DUPLICATES, &je);
        if (!j) {
                fprintf(stderr, "warren: --spec %s: line %d, column %d: %s\n", path, je.line,
                        je.column, je.text);
                return NULL;
        }
        /* a whole ImageSpec ({"build": {...}}) or the ImageBuild itself */
        json_t *b = json_object_get(j, "build");
        struct wbuf w = {0};
        int r = encode_msg(&warren__v1__image_build__descriptor, b ? b : j, &w, "build");
        json_decref(j);
        Warren__V1__ImageBuild *out = NULL;
        if (r >= 0) {
                out = warren__v1__image_build__unpack(NULL, w.len, w.p ? w.p : (uint8_t *) "");
                if (!out)
                        fprintf(stderr, "warren: --spec %s: not an ImageBuild\n", path);
        }
        free(w.p);
        return out;
}

/* ---- the build ---- */

struct build {
        bool closed;
        int status;
        char *message;
        char *image_id;
};

static void build_on_message(struct rpc_stream *s, const ProtobufCMessage *msg, void *userdata) {
        struct build *b = userdata;
        const Warren__V1__BuildImageProgress *m = (const void *) msg;
        if (m->log && *m->log)
                fprintf(stderr, "%s\n", m->log);
        if (m->image)
                b->image_id = cli_strdup(m->image->id);
}

static void build_on_close(struct rpc_stream *s, int status, const char *message, void *userdata) {
        struct build *b = userdata;
        b->closed = true;
        b->status = status;
        b->message = cli_strdup(message ? message : "");
}

static int image_build(struct cli_ctx *ctx, int argc, char **argv) {
        static const struct option longopts[] = {
                {"file", required_argument, NULL, 'f'},
                {"tag", required_argument, NULL, 't'},
                {"spec", required_argument, NULL, OPT_SPEC},
                {"build-arg", required_argument, NULL, OPT_BUILD_ARG},
                {"step-timeout", required_argument, NULL, OPT_STEP_TIMEOUT},
                CLI_COMMON_LONGOPTS,
                {}};
        static const struct rpc_stream_callbacks cb = {.on_message = build_on_message,
                                                       .on_close = build_on_close};
        const char *cmd = "image build",
                   *usage = "(-f Dockerfile [CONTEXT] | --spec spec.json) [-t NAME] "
                            "[--build-arg K=V]... [--step-timeout SECS]";
        const char *file = NULL, *tag = NULL, *spec = NULL;
        double step_timeout = 0;
        Warren__V1__ImageBuild__BuildArgsEntry *args[BUILD_ARGS_MAX];
        size_t n_args = 0;
        int c;
        while ((c = cli_getopt(ctx, cmd, usage, argc, argv, "hf:t:", longopts)) != -1) {
                if (c == 'f')
                        file = optarg;
                else if (c == 't')
                        tag = optarg;
                else if (c == OPT_SPEC)
                        spec = optarg;
                else if (c == OPT_BUILD_ARG) {
                        char *k, *v;
                        if (cli_parse_kv(optarg, &k, &v) < 0)
                                return cli_usage_error(cmd, usage, "--build-arg takes K=V");
                        if (n_args == BUILD_ARGS_MAX)
                                return cli_usage_error(cmd, usage, "too many --build-arg");
                        Warren__V1__ImageBuild__BuildArgsEntry *e = cli_alloc(sizeof(*e));
                        warren__v1__image_build__build_args_entry__init(e);
                        e->key = k;
                        e->value = v;
                        args[n_args++] = e;
                } else if (c == OPT_STEP_TIMEOUT) {
                        if (cli_parse_seconds(optarg, &step_timeout) < 0)
                                return cli_usage_error(cmd, usage, "--step-timeout takes seconds");
                } else
                        return c == CLI_GETOPT_HELP ? CLI_EXIT_OK : CLI_EXIT_USAGE;
        }
        if (!file == !spec)
                return cli_usage_error(cmd, usage, "give -f Dockerfile or --spec spec.json");
        if (argc - optind > (spec ? 0 : 1))
                return cli_usage_error(cmd, usage, "too many arguments");
        Warren__V1__ImageBuild local = WARREN__V1__IMAGE_BUILD__INIT, *build = &local,
                               *from_spec = NULL;
        if (spec) {
                if (!(build = from_spec = read_spec(spec)))
                        return CLI_EXIT_FAIL;
        } else {
                const char *root = optind < argc ? argv[optind] : ".";
                uint8_t *text = NULL;
                _cleanup_close_ int fd =
                        strcmp(file, "-") ? open(file, O_RDONLY | O_CLOEXEC) : dup(STDIN_FILENO);
                ssize_t n = fd >= 0 ? cli_read_all(fd, 4u << 20, &text) : -errno;
                if (n < 0) {
                        fprintf(stderr, "warren: cannot read %s: %s\n", file, strerror((int) -n));
                        return CLI_EXIT_FAIL;
                }
                char *t = cli_alloc((size_t) n + 1); /* NUL-terminated (text is arena-owned) */
                memcpy(t, text, (size_t) n);
                local.dockerfile = t;
                if (read_context(root) < 0)
                        return CLI_EXIT_FAIL;
                if (cli_connect(ctx) < 0)
                        return CLI_EXIT_FAIL;
                int rc = upload_missing(ctx);
                if (rc != CLI_EXIT_OK)
                        return rc;
                local.context = cli_alloc((walk.n + 1) * sizeof(*local.context));
                for (size_t i = 0; i < walk.n; i++) {
                        Warren__V1__FileAdd *fa = cli_alloc(sizeof(*fa));
                        warren__v1__file_add__init(fa);
                        fa->path = walk.v[i].rel;
                        fa->mode = walk.v[i].mode;
                        fa->digest = walk.v[i].digest;
                        local.context[local.n_context++] = fa;
                }
        }
        if (n_args) {
                build->build_args = args; /* the spec's own build args give way */
                build->n_build_args = n_args;
        }
        if (cli_connect(ctx) < 0)
                return CLI_EXIT_FAIL;
        Warren__V1__BuildImageRequest req = WARREN__V1__BUILD_IMAGE_REQUEST__INIT;
        req.build = build;
        req.step_timeout_secs = step_timeout;
        req.name = (char *) (tag ? tag : "");
        struct build b = {0};
        struct rpc_stream *s = NULL;
        int r = rpc_stream_open(ctx->client, "/warren.v1.Images/BuildImage",
                                &warren__v1__build_image_progress__descriptor, 0, &cb, &b, &s);
        if (r < 0) {
                fprintf(stderr, "warren: build: %s\n", strerror(-r));
                return CLI_EXIT_FAIL;
        }
        rpc_stream_send(s, &req.base);
        rpc_stream_close_send(s);
        if (n_args && from_spec) {
                from_spec->build_args = NULL;
                from_spec->n_build_args = 0;
        }
        if (from_spec)
                protobuf_c_message_free_unpacked(&from_spec->base, NULL);
        r = rpc_client_run(ctx->client);
        rpc_stream_free(s);
        if (!b.closed) {
                fprintf(stderr, "warren: build: connection lost: %s\n",
                        strerror(r < 0 ? -r : EPIPE));
                return CLI_EXIT_FAIL;
        }
        if (b.status != 0) {
                cli_print_status(b.status, b.message);
                return CLI_EXIT_FAIL;
        }
        if (b.image_id)
                printf("%s\n", b.image_id);
        return CLI_EXIT_OK;
}

static int image_prune(struct cli_ctx *ctx, int argc, char **argv) {
        bool json;
        int rc0 = cli_getopt_json_only(ctx, "image prune", argc, argv, &json);
        if (rc0 >= 0)
                return rc0;
        Warren__V1__PruneImagesRequest req = WARREN__V1__PRUNE_IMAGES_REQUEST__INIT;
        Warren__V1__PruneImagesResponse *resp = NULL;
        int rc = cli_call(ctx, "/warren.v1.Images/PruneImages", &req.base,
                          &warren__v1__prune_images_response__descriptor,
                          (ProtobufCMessage **) &resp);
        if (rc != CLI_EXIT_OK)
                return rc;
        if (json)
                cli_json_print(cli_json_from_message(&resp->base));
        else {
                for (size_t i = 0; i < resp->n_deleted_images; i++)
                        printf("deleted %s\n", resp->deleted_images[i]);
                printf("%zu image%s, %u layer%s, %u build-cache entr%s, %u uploaded file%s "
                       "removed\n",
                       resp->n_deleted_images, resp->n_deleted_images == 1 ? "" : "s",
                       resp->deleted_layers, resp->deleted_layers == 1 ? "" : "s",
                       resp->deleted_cache_entries, resp->deleted_cache_entries == 1 ? "y" : "ies",
                       resp->deleted_blobs, resp->deleted_blobs == 1 ? "" : "s");
        }
        protobuf_c_message_free_unpacked(&resp->base, NULL);
        return CLI_EXIT_OK;
}

const struct cli_cmd cli_image_build_cmds[2] = {
        {"build", "-f Dockerfile [-t NAME] [CONTEXT] | --spec spec.json",
         "build an image (log on stderr, id on stdout)", image_build},
        {"prune", "[--json]", "remove unnamed unused images, the build cache, uploads",
         image_prune},
};
