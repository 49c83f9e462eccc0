/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests for src/image: the tar entry checks, the unpacker against
 * hostile tars (built here with libarchive's writer), and the image store
 * end to end through the real warren-unpack helper, a real SQLite store and
 * a libuv loop. Needs root for ownership, whiteouts and chroot. */
#include <archive.h>
#include <archive_entry.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <openssl/evp.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <cmocka.h>

#include "image/fetch-proto.h"
#include "image/image-internal.h"
#include "image/image.h"
#include "image/manifest.h"
#include "image/registry-internal.h"
#include "store/images.h"
#include "store/store.h"

/* --- tar building --- */

struct tent {
        const char *path;
        mode_t type; /* S_IFREG... */
        mode_t perm;
        const char *data; /* file content */
        const char *link; /* symlink target, or hardlink target when hard */
        bool hard;
        int64_t uid, gid;
        dev_t rdev;
        int64_t mtime;
};

enum { TAR_PLAIN, TAR_GZIP, TAR_ZSTD };

static void write_tar(const char *file, const struct tent *ents, size_t n, int filter) {
        struct archive *a = archive_write_new();
        assert_non_null(a);
        assert_int_equal(archive_write_set_format_pax_restricted(a), ARCHIVE_OK);
        if (filter == TAR_GZIP)
                assert_int_equal(archive_write_add_filter_gzip(a), ARCHIVE_OK);
        if (filter == TAR_ZSTD)
                assert_int_equal(archive_write_add_filter_zstd(a), ARCHIVE_OK);
        assert_int_equal(archive_write_open_filename(a, file), ARCHIVE_OK);
        for (size_t i = 0; i < n; i++) {
                const struct tent *t = &ents[i];
                struct archive_entry *e = archive_entry_new();
                archive_entry_copy_pathname(e, t->path);
                archive_entry_set_uid(e, t->uid);
                archive_entry_set_gid(e, t->gid);
                archive_entry_set_mtime(e, t->mtime ? t->mtime : 1700000000, 0);
                if (t->hard) {
                        archive_entry_set_filetype(e, AE_IFREG);
                        archive_entry_copy_hardlink(e, t->link);
                        archive_entry_set_size(e, 0);
                } else {
                        archive_entry_set_filetype(e, t->type);
                        archive_entry_set_perm(e, t->perm ? t->perm : 0644);
                        if (t->type == S_IFLNK)
                                archive_entry_copy_symlink(e, t->link);
                        if (t->type == S_IFCHR || t->type == S_IFBLK)
                                archive_entry_set_rdev(e, t->rdev);
                        archive_entry_set_size(e, t->type == S_IFREG && t->data
                                                          ? (la_int64_t) strlen(t->data)
                                                          : 0);
                }
                assert_int_equal(archive_write_header(a, e), ARCHIVE_OK);
                if (!t->hard && t->type == S_IFREG && t->data)
                        assert_int_equal(archive_write_data(a, t->data, strlen(t->data)),
                                         (la_ssize_t) strlen(t->data));
                archive_entry_free(e);
        }
        assert_int_equal(archive_write_close(a), ARCHIVE_OK);
        archive_write_free(a);
}

static char tmpdir[256];

static void path_at(char *buf, size_t n, const char *rel) {
        snprintf(buf, n, "%s/%s", tmpdir, rel);
}

static int setup_tmp(void **state) {
        snprintf(tmpdir, sizeof(tmpdir), "/tmp/test-image-XXXXXX");
        assert_non_null(mkdtemp(tmpdir));
        return 0;
}

static int teardown_tmp(void **state) {
        int fd = open("/tmp", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        assert_int_equal(rm_rf_at(fd, tmpdir + 5), 0);
        close(fd);
        return 0;
}

/* Unpack tar file into a fresh dir "<tmpdir>/<layer>" in-process. */
static int unpack_file(const char *tar, const char *layer, struct img_unpack_stats *st,
                       struct wr_err *e) {
        char dir[512];
        path_at(dir, sizeof(dir), layer);
        assert_int_equal(mkdir(dir, 0755), 0);
        int root = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        int in = open(tar, O_RDONLY | O_CLOEXEC);
        assert_true(root >= 0 && in >= 0);
        int r = img_unpack_stream(in, root, geteuid() == 0, st, e);
        close(in);
        close(root);
        return r;
}

static bool dir_empty(const char *dir) {
        DIR *d = opendir(dir);
        assert_non_null(d);
        struct dirent *de;
        int n = 0;
        while ((de = readdir(d)))
                if (strcmp(de->d_name, ".") && strcmp(de->d_name, ".."))
                        n++;
        closedir(d);
        return n == 0;
}

static void sha256_file(const char *file, char *out) {
        FILE *f = fopen(file, "rb");
        assert_non_null(f);
        EVP_MD_CTX *c = EVP_MD_CTX_new();
        EVP_DigestInit_ex(c, EVP_sha256(), NULL);
        char buf[65536];
        size_t n;
        while ((n = fread(buf, 1, sizeof(buf), f)) > 0)
                EVP_DigestUpdate(c, buf, n);
        fclose(f);
        unsigned char md[32];
        unsigned len;
        EVP_DigestFinal_ex(c, md, &len);
        EVP_MD_CTX_free(c);
        strcpy(out, "sha256:");
        for (int i = 0; i < 32; i++)
                sprintf(out + 7 + 2 * i, "%02x", md[i]);
}

/* --- pure checks --- */

static void test_path_clean(void **state) {
        char out[4096];
        const char *why;
        assert_int_equal(img_path_clean("./a//b/./c/", out, sizeof(out), &why), 0);
        assert_string_equal(out, "a/b/c");
        assert_int_equal(img_path_clean("./", out, sizeof(out), &why), 0);
        assert_string_equal(out, "");
        assert_int_equal(img_path_clean("././x", out, sizeof(out), &why), 0);
        assert_string_equal(out, "x");
        assert_int_equal(img_path_clean("..", out, sizeof(out), &why), -EINVAL);
        assert_int_equal(img_path_clean("../x", out, sizeof(out), &why), -EINVAL);
        assert_int_equal(img_path_clean("a/../../x", out, sizeof(out), &why), -EINVAL);
        assert_int_equal(img_path_clean("a/..", out, sizeof(out), &why), -EINVAL);
        assert_int_equal(img_path_clean("/etc/passwd", out, sizeof(out), &why), -EINVAL);
        assert_string_equal(why, "absolute path");
        assert_int_equal(img_path_clean("", out, sizeof(out), &why), -EINVAL);
        assert_int_equal(img_path_clean("a/...b/..c", out, sizeof(out), &why), 0);
        assert_string_equal(out, "a/...b/..c");
        char small[4];
        assert_int_equal(img_path_clean("abcd", small, sizeof(small), &why), -EINVAL);
        char longname[300];
        memset(longname, 'a', 299);
        longname[299] = '\0';
        assert_int_equal(img_path_clean(longname, out, sizeof(out), &why), -EINVAL);
}

static void test_entry_plan(void **state) {
        struct img_entry_plan p;
        const char *why;
        assert_int_equal(img_entry_plan("bin/su", S_IFREG, 04755, NULL, &p, &why), 0);
        assert_int_equal(p.kind, IMG_ENTRY_FILE);
        assert_int_equal(p.mode, 0755);
        assert_int_equal(img_entry_plan("d", S_IFDIR, 02775, NULL, &p, &why), 0);
        assert_int_equal(p.mode, 02775); /* setgid kept on directories */
        assert_int_equal(img_entry_plan("dev/sda", S_IFBLK, 0600, NULL, &p, &why), -EINVAL);
        assert_string_equal(why, "block device");
        assert_int_equal(img_entry_plan("dev/null", S_IFCHR, 0666, NULL, &p, &why), -EINVAL);
        assert_int_equal(img_entry_plan("s", S_IFSOCK, 0666, NULL, &p, &why), -EINVAL);
        assert_int_equal(img_entry_plan("h", S_IFREG, 0644, "../../etc/passwd", &p, &why), -EINVAL);
        assert_int_equal(img_entry_plan("h", S_IFREG, 0644, "/etc/passwd", &p, &why), -EINVAL);
        assert_int_equal(img_entry_plan("h", S_IFREG, 0644, "./h", &p, &why), -EINVAL);
        assert_int_equal(img_entry_plan("h", S_IFREG, 0644, "./a/b", &p, &why), 0);
        assert_int_equal(p.kind, IMG_ENTRY_HARDLINK);
        assert_string_equal(p.link, "a/b");
        assert_int_equal(img_entry_plan("a/.wh.x", S_IFREG, 0, NULL, &p, &why), 0);
        assert_int_equal(p.kind, IMG_ENTRY_WHITEOUT);
        assert_string_equal(p.path, "a/x");
        assert_int_equal(img_entry_plan("a/b/.wh..wh..opq", S_IFREG, 0, NULL, &p, &why), 0);
        assert_int_equal(p.kind, IMG_ENTRY_OPAQUE);
        assert_string_equal(p.path, "a/b");
        assert_int_equal(img_entry_plan(".wh..wh.plnk/1", S_IFREG, 0, NULL, &p, &why), 0);
        assert_int_equal(img_entry_plan("a/.wh.", S_IFREG, 0, NULL, &p, &why), -EINVAL);
        assert_int_equal(img_entry_plan("./", S_IFREG, 0, NULL, &p, &why), -EINVAL);
        assert_int_equal(img_entry_plan("root/.ssh/authorized_keys", S_IFREG, 0600, NULL, &p, &why),
                         0);
        assert_true(p.root_ssh);
        assert_int_equal(img_entry_plan("root/.sshx", S_IFREG, 0600, NULL, &p, &why), 0);
        assert_false(p.root_ssh);
        assert_true(img_xattr_allowed("user.foo"));
        assert_true(img_xattr_allowed("trusted.overlay.opaque"));
        assert_false(img_xattr_allowed("security.capability"));
        assert_false(img_xattr_allowed("trusted.overlay.redirect"));
        assert_false(img_xattr_allowed("user."));
}

static void test_name_normalize(void **state) {
        char out[400];
        assert_int_equal(img_name_normalize("busybox", out, sizeof(out), NULL), 0);
        assert_string_equal(out, "busybox:latest");
        assert_int_equal(img_name_normalize("my/img:1.0", out, sizeof(out), NULL), 0);
        assert_string_equal(out, "my/img:1.0");
        assert_int_equal(img_name_normalize("localhost:5000/a/b", out, sizeof(out), NULL), 0);
        assert_string_equal(out, "localhost:5000/a/b:latest");
        assert_int_equal(img_name_normalize("Upper", out, sizeof(out), NULL), -EINVAL);
        assert_int_equal(img_name_normalize("a:", out, sizeof(out), NULL), -EINVAL);
        assert_int_equal(img_name_normalize("a:-x", out, sizeof(out), NULL), -EINVAL);
        assert_int_equal(img_name_normalize("a b", out, sizeof(out), NULL), -EINVAL);
        assert_int_equal(img_name_normalize("a@sha256:00", out, sizeof(out), NULL), -EINVAL);
        assert_int_equal(img_name_normalize("../x", out, sizeof(out), NULL), -EINVAL);
        assert_int_equal(img_name_normalize("", out, sizeof(out), NULL), -EINVAL);
}

static void test_config_encode(void **state) {
        char *env[] = {"A=1", "PATH=/bin"}, *cmd[] = {"sh", "-c", "echo"};
        struct img_config c = {.env = env, .n_env = 2, .cmd = cmd, .n_cmd = 3, .user = "1000"};
        char *ids[] = {"sha256:"
                       "0000000000000000000000000000000000000000000000000000000000000000"};
        char *j1 = NULL, *j2 = NULL, id1[IMG_DIGEST_MAX], id2[IMG_DIGEST_MAX];
        assert_int_equal(img_config_encode(&c, ids, 1, &j1, id1, NULL), 0);
        assert_int_equal(img_config_encode(&c, ids, 1, &j2, id2, NULL), 0);
        assert_string_equal(j1, j2);
        assert_string_equal(id1, id2);
        assert_true(img_digest_valid(id1));
        assert_non_null(strstr(j1, "\"diff_ids\":[\"sha256:0000"));
        struct img_config back;
        assert_int_equal(img_config_decode(j1, &back, NULL), 0);
        assert_int_equal(back.n_env, 2);
        assert_string_equal(back.env[1], "PATH=/bin");
        assert_int_equal(back.n_cmd, 3);
        assert_string_equal(back.user, "1000");
        assert_null(back.working_dir);
        img_config_clear(&back);
        c.user = NULL;
        free(j2);
        assert_int_equal(img_config_encode(&c, ids, 1, &j2, id2, NULL), 0);
        assert_string_not_equal(id1, id2);
        char *bad[] = {"\xff\xfe"};
        c.env = bad;
        c.n_env = 1;
        struct wr_err e = {0};
        free(j2);
        j2 = NULL;
        assert_int_equal(img_config_encode(&c, ids, 1, &j2, id2, &e), -EINVAL);
        assert_int_equal(err_status(&e), WR_STATUS_INVALID_ARGUMENT);
        free(j1);
}

/* --- manifests, indexes, image configs (pure parsers) --- */

#define D0 "sha256:0000000000000000000000000000000000000000000000000000000000000000"
#define D1 "sha256:1111111111111111111111111111111111111111111111111111111111111111"
#define D2 "sha256:2222222222222222222222222222222222222222222222222222222222222222"
#define D3 "sha256:3333333333333333333333333333333333333333333333333333333333333333"

/* A string built with printf, freed by the caller. */
static char *fmt(const char *f, ...) _printf_(1, 2);
static char *fmt(const char *f, ...) {
        va_list ap;
        va_start(ap, f);
        char *s = NULL;
        assert_true(vasprintf(&s, f, ap) >= 0);
        va_end(ap);
        return s;
}

/* n layer objects, joined by commas. */
static char *layers_json(size_t n) {
        size_t one = strlen("{\"digest\":\"" D1 "\",\"size\":1},");
        char *s = calloc(1, n * one + 1);
        assert_non_null(s);
        for (size_t i = 0; i < n; i++)
                strcat(s, i ? ",{\"digest\":\"" D1 "\",\"size\":1}"
                            : "{\"digest\":\"" D1 "\",\"size\":1}");
        return s;
}

static int manifest_err(const char *json, const char *ct, struct wr_err *e) {
        struct img_manifest *m = NULL;
        memset(e, 0, sizeof(*e));
        int r = img_manifest_parse(json, strlen(json), ct, &m, e);
        assert_null(m);
        if (r < 0)
                assert_true(e->msg[0]);
        return r;
}

static void test_manifest_image(void **state) {
        const char *j =
                "{\"schemaVersion\":2,\"mediaType\":\"" IMG_MT_OCI_MANIFEST "\","
                "\"config\":{\"digest\":\"" D0 "\",\"size\":1234},"
                "\"layers\":[{\"mediaType\":\"application/vnd.oci.image.layer.v1.tar+gzip\","
                "\"digest\":\"" D1 "\",\"size\":42},"
                "{\"digest\":\"" D2 "\",\"size\":-3}]}";
        _cleanup_(img_manifest_freep) struct img_manifest *m = NULL;
        assert_int_equal(img_manifest_parse(j, strlen(j), NULL, &m, NULL), 0);
        assert_int_equal(m->kind, IMG_MANIFEST_IMAGE);
        assert_string_equal(m->config_digest, D0);
        assert_int_equal(m->config_size, 1234);
        assert_int_equal(m->n_layers, 2);
        assert_string_equal(m->layers[0].digest, D1);
        assert_int_equal(m->layers[0].size, 42);
        assert_string_equal(m->layers[1].digest, D2);
        assert_int_equal(m->layers[1].size, 0); /* not positive: unknown */
        assert_int_equal(m->n_platforms, 0);
        /* not NUL-terminated: only len bytes count */
        img_manifest_free(TAKE_PTR(m));
        char *copy = strdup(j);
        assert_non_null(copy);
        size_t len = strlen(copy);
        copy = realloc(copy, len + 8);
        memcpy(copy + len, "garbage!", 8);
        assert_int_equal(img_manifest_parse(copy, len, NULL, &m, NULL), 0);
        free(copy);
}

static void test_manifest_index(void **state) {
        const char *j = "{\"schemaVersion\":2,\"manifests\":["
                        "{\"digest\":\"" D1
                        "\",\"platform\":{\"os\":\"linux\",\"architecture\":\"arm64\"}},"
                        "{\"digest\":\"nope\",\"platform\":{\"os\":\"linux\",\"architecture\":"
                        "\"riscv64\"}},"
                        "{\"digest\":\"" D3 "\"},"
                        "{\"digest\":\"" D2
                        "\",\"platform\":{\"os\":\"linux\",\"architecture\":\"amd64\"}}]}";
        _cleanup_(img_manifest_freep) struct img_manifest *m = NULL;
        /* no media type: an index by its shape (manifests, no config) */
        assert_int_equal(img_manifest_parse(j, strlen(j), "", &m, NULL), 0);
        assert_int_equal(m->kind, IMG_MANIFEST_INDEX);
        assert_int_equal(m->n_platforms, 3); /* the entry without a platform is left out */
        assert_string_equal(m->platforms[1].digest, ""); /* invalid digest: kept, unusable */
        char seen[300];
        const struct img_manifest_platform *p =
                img_manifest_select(m, "linux", "amd64", seen, sizeof(seen));
        assert_non_null(p);
        assert_string_equal(p->digest, D2);
        p = img_manifest_select(m, "linux", "riscv64", seen, sizeof(seen));
        assert_null(p);
        p = img_manifest_select(m, "windows", "amd64", seen, sizeof(seen));
        assert_null(p);
        assert_string_equal(seen, "linux/arm64, linux/riscv64, linux/amd64");
        char tiny[12];
        assert_null(img_manifest_select(m, "windows", "amd64", tiny, sizeof(tiny)));
        assert_string_equal(tiny, ""); /* nothing fits: nothing half-written */
        img_manifest_free(TAKE_PTR(m));

        /* the Content-Type decides when the body has no mediaType */
        const char *lst = "{\"schemaVersion\":2,\"config\":{},\"manifests\":[]}";
        assert_int_equal(img_manifest_parse(lst, strlen(lst), IMG_MT_DOCKER_LIST "; charset=utf-8",
                                            &m, NULL),
                         0);
        assert_int_equal(m->kind, IMG_MANIFEST_INDEX);
        assert_int_equal(m->n_platforms, 0);
        assert_null(img_manifest_select(m, "linux", "amd64", seen, sizeof(seen)));
        assert_string_equal(seen, "");
}

static void test_manifest_invalid(void **state) {
        struct wr_err e;
        assert_int_equal(manifest_err("", NULL, &e), -EINVAL);
        assert_int_equal(manifest_err("[1,2]", "text/html", &e), -EINVAL);
        assert_non_null(strstr(e.msg, "not JSON (text/html)"));
        assert_int_equal(err_status(&e), WR_STATUS_INVALID_ARGUMENT);
        assert_int_equal(e.fault, WR_FAULT_WORKLOAD);
        assert_int_equal(manifest_err("{\"schemaVersion\":1}", NULL, &e), -EPROTONOSUPPORT);
        assert_int_equal(err_status(&e), WR_STATUS_FAILED_PRECONDITION);
        assert_int_equal(manifest_err("{}", "application/vnd.docker.distribution.manifest.v1", &e),
                         -EPROTONOSUPPORT);
        /* config digest missing, malformed, upper case */
        assert_int_equal(manifest_err("{\"layers\":[{\"digest\":\"" D1 "\"}]}", NULL, &e), -EINVAL);
        assert_non_null(strstr(e.msg, "malformed image manifest"));
        assert_int_equal(
                manifest_err("{\"config\":{\"digest\":\"sha256:00\"},\"layers\":[{\"digest\":"
                             "\"" D1 "\"}]}",
                             NULL, &e),
                -EINVAL);
        assert_int_equal(
                manifest_err("{\"config\":{\"digest\":\"sha256:AAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"
                             "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA\"},\"layers\":[{\"digest\":"
                             "\"" D1 "\"}]}",
                             NULL, &e),
                -EINVAL);
        /* layers: none, not an array, bad digest, unknown media type, foreign urls */
        assert_int_equal(
                manifest_err("{\"config\":{\"digest\":\"" D0 "\"},\"layers\":[]}", NULL, &e),
                -EINVAL);
        assert_int_equal(
                manifest_err("{\"config\":{\"digest\":\"" D0 "\"},\"layers\":{}}", NULL, &e),
                -EINVAL);
        assert_int_equal(manifest_err("{\"config\":{\"digest\":\"" D0 "\"},\"layers\":[{\"digest\":"
                                      "\"md5:00\"}]}",
                                      NULL, &e),
                         -EINVAL);
        assert_non_null(strstr(e.msg, "layer 1: unsupported (media type none, bad digest)"));
        assert_int_equal(manifest_err("{\"config\":{\"digest\":\"" D0 "\"},\"layers\":[{\"digest\":"
                                      "\"" D1 "\"},{\"digest\":\"" D2 "\",\"mediaType\":\"x/y\"}]}",
                                      NULL, &e),
                         -EINVAL);
        assert_non_null(strstr(e.msg, "layer 2: unsupported (media type x/y)"));
        assert_int_equal(manifest_err("{\"config\":{\"digest\":\"" D0 "\"},\"layers\":[{\"digest\":"
                                      "\"" D1 "\",\"urls\":[\"http://x\"]}]}",
                                      NULL, &e),
                         -EINVAL);
}

static void test_manifest_limits(void **state) {
        struct wr_err e;
        _cleanup_(img_manifest_freep) struct img_manifest *m = NULL;
        /* exactly the layer limit, then one more */
        char *ls = layers_json(IMG_MANIFEST_MAX_LAYERS);
        char *j = fmt("{\"config\":{\"digest\":\"" D0 "\"},\"layers\":[%s]}", ls);
        assert_int_equal(img_manifest_parse(j, strlen(j), NULL, &m, NULL), 0);
        assert_int_equal(m->n_layers, IMG_MANIFEST_MAX_LAYERS);
        free(ls);
        free(j);
        ls = layers_json(IMG_MANIFEST_MAX_LAYERS + 1);
        j = fmt("{\"config\":{\"digest\":\"" D0 "\"},\"layers\":[%s]}", ls);
        assert_int_equal(manifest_err(j, NULL, &e), -EINVAL);
        free(ls);
        free(j);
        /* index entries */
        size_t one = strlen("{},");
        char *ents = calloc(IMG_INDEX_MAX_ENTRIES + 1, one);
        assert_non_null(ents);
        for (size_t i = 0; i <= IMG_INDEX_MAX_ENTRIES; i++)
                strcat(ents, i ? ",{}" : "{}");
        j = fmt("{\"mediaType\":\"" IMG_MT_OCI_INDEX "\",\"manifests\":[%s]}", ents);
        assert_int_equal(manifest_err(j, NULL, &e), -EINVAL);
        assert_non_null(strstr(e.msg, "more than"));
        free(j);
        free(ents);
        /* the body size: a valid manifest padded past the limit */
        size_t big = IMG_MANIFEST_MAX_BODY + 1;
        char *b = malloc(big + 1);
        assert_non_null(b);
        const char *v = "{\"config\":{\"digest\":\"" D0 "\"},\"layers\":[{\"digest\":\"" D1 "\"}]}";
        memset(b, ' ', big);
        memcpy(b, v, strlen(v));
        b[big] = '\0';
        img_manifest_free(TAKE_PTR(m));
        assert_int_equal(img_manifest_parse(b, big, NULL, &m, &e), -EINVAL);
        assert_null(m);
        assert_int_equal(img_manifest_parse(b, big - 1, NULL, &m, NULL), 0);
        free(b);
}

static int config_err(const char *json, size_t expect, struct wr_err *e) {
        struct img_image_config *c = NULL;
        memset(e, 0, sizeof(*e));
        int r = img_config_parse(json, strlen(json), expect, &c, e);
        assert_null(c);
        if (r < 0)
                assert_true(e->msg[0]);
        return r;
}

static void test_image_config_parse(void **state) {
        const char *j = "{\"architecture\":\"amd64\",\"rootfs\":{\"type\":\"layers\",\"diff_ids\":"
                        "[\"" D1 "\",\"" D2 "\"]},\"config\":{\"Env\":[\"A=1\",\"PATH=/bin\"],"
                        "\"Entrypoint\":null,\"Cmd\":[\"sh\"],\"WorkingDir\":\"/srv\","
                        "\"User\":\"\",\"Labels\":{\"x\":\"y\"}}}";
        _cleanup_(img_image_config_freep) struct img_image_config *c = NULL;
        assert_int_equal(img_config_parse(j, strlen(j), 2, &c, NULL), 0);
        assert_int_equal(c->n_diff_ids, 2);
        assert_string_equal(c->diff_ids[1], D2);
        assert_null(c->diff_ids[2]);
        assert_int_equal(c->config.n_env, 2);
        assert_string_equal(c->config.env[0], "A=1");
        assert_null(c->config.env[2]);
        assert_int_equal(c->config.n_entrypoint, 0); /* null = absent */
        assert_null(c->config.entrypoint);
        assert_int_equal(c->config.n_cmd, 1);
        assert_string_equal(c->config.working_dir, "/srv");
        assert_null(c->config.user); /* "" = unset */
        img_image_config_free(TAKE_PTR(c));
        /* expect_layers = 0: any count; no config object at all */
        const char *bare = "{\"rootfs\":{\"diff_ids\":[]},\"config\":null}";
        assert_int_equal(img_config_parse(bare, strlen(bare), 0, &c, NULL), 0);
        assert_int_equal(c->n_diff_ids, 0);
        assert_int_equal(c->config.n_env, 0);
}

static void test_image_config_invalid(void **state) {
        struct wr_err e;
        assert_int_equal(config_err("nope", 1, &e), -EINVAL);
        assert_non_null(strstr(e.msg, "not a JSON object"));
        assert_int_equal(e.fault, WR_FAULT_WORKLOAD);
        assert_int_equal(config_err("[]", 1, &e), -EINVAL);
        assert_int_equal(config_err("{\"config\":{}}", 1, &e), -EINVAL); /* no rootfs */
        assert_int_equal(config_err("{\"rootfs\":{\"diff_ids\":[\"" D1 "\"]}}", 2, &e), -EINVAL);
        assert_non_null(strstr(e.msg, "lists 1 diff ids for 2 layers"));
        assert_int_equal(config_err("{\"rootfs\":{\"diff_ids\":[\"" D1 "\",\"sha256:1\"]}}", 2, &e),
                         -EINVAL);
        assert_non_null(strstr(e.msg, "malformed diff id 1"));
        assert_int_equal(config_err("{\"rootfs\":{\"diff_ids\":[7]}}", 1, &e), -EINVAL);
        assert_int_equal(
                config_err("{\"rootfs\":{\"diff_ids\":[\"" D1 "\"]},\"config\":[]}", 1, &e),
                -EINVAL);
        assert_non_null(strstr(e.msg, "\"config\" is not an object"));
        assert_int_equal(config_err("{\"rootfs\":{\"diff_ids\":[\"" D1
                                    "\"]},\"config\":{\"Cmd\":\"ls\"}}",
                                    1, &e),
                         -EINVAL);
        assert_non_null(strstr(e.msg, "string arrays"));
        assert_int_equal(config_err("{\"rootfs\":{\"diff_ids\":[\"" D1
                                    "\"]},\"config\":{\"Env\":[\"A\",1]}}",
                                    1, &e),
                         -EINVAL);
        assert_int_equal(config_err("{\"rootfs\":{\"diff_ids\":[\"" D1
                                    "\"]},\"config\":{\"Entrypoint\":{}}}",
                                    1, &e),
                         -EINVAL);
        /* limits: more diff ids than an image may have; an oversized blob */
        size_t n = IMG_MANIFEST_MAX_LAYERS + 1, one = strlen(",\"" D1 "\"");
        char *ids = calloc(n, one + 1);
        assert_non_null(ids);
        for (size_t i = 0; i < n; i++)
                strcat(ids, i ? ",\"" D1 "\"" : "\"" D1 "\"");
        char *j = fmt("{\"rootfs\":{\"diff_ids\":[%s]}}", ids);
        assert_int_equal(config_err(j, 0, &e), -EINVAL);
        free(j);
        free(ids);
        size_t big = IMG_CONFIG_MAX_BODY + 1;
        char *b = malloc(big);
        assert_non_null(b);
        const char *v = "{\"rootfs\":{\"diff_ids\":[]}}";
        memset(b, ' ', big);
        memcpy(b, v, strlen(v));
        struct img_image_config *c = NULL;
        assert_int_equal(img_config_parse(b, big, 0, &c, &e), -EINVAL);
        assert_null(c);
        assert_int_equal(img_config_parse(b, big - 1, 0, &c, NULL), 0);
        img_image_config_free(c);
        free(b);
}

/* --- registry config and docker credentials (pure parsers) --- */

static int regcfg(const char *json, struct img_reg_config **ret, struct wr_err *e) {
        *ret = calloc(1, sizeof(**ret));
        assert_non_null(*ret);
        memset(e, 0, sizeof(*e));
        int r = img_reg_config_parse_registries(*ret, json, strlen(json), "/etc/r.json", e);
        if (r < 0)
                assert_non_null(strstr(e->msg, "--registry-config /etc/r.json"));
        return r;
}

static int dockercfg(const char *json, struct img_reg_config **ret, struct wr_err *e) {
        *ret = calloc(1, sizeof(**ret));
        assert_non_null(*ret);
        memset(e, 0, sizeof(*e));
        int r = img_reg_config_parse_docker(*ret, json, strlen(json), "/etc/d.json", e);
        if (r < 0)
                assert_non_null(strstr(e->msg, "--docker-config /etc/d.json"));
        return r;
}

static void test_registry_config_parse(void **state) {
        struct wr_err e;
        _cleanup_(img_reg_config_freep) struct img_reg_config *c = NULL;
        assert_int_equal(regcfg("{\"registries\":{\"docker.io\":{\"mirrors\":["
                                "\"https://m.example/v2/\",\"http://10.0.0.5:5000//\"]},"
                                "\"lan:5000\":{\"insecure\":true},"
                                "\"localhost:5000\":{\"insecure\":false}}}",
                                &c, &e),
                         0);
        const struct img_reg_host *h = img_reg_config_host(c, "docker.io");
        assert_non_null(h);
        assert_int_equal(h->n_mirrors, 2);
        assert_string_equal(h->mirrors[0], "https://m.example");
        assert_string_equal(h->mirrors[1], "http://10.0.0.5:5000");
        assert_int_equal(h->transport, IMG_REG_TRANSPORT_DEFAULT);
        assert_int_equal(img_reg_config_host(c, "lan:5000")->transport, IMG_REG_TRANSPORT_HTTP);
        assert_int_equal(img_reg_config_host(c, "localhost:5000")->transport,
                         IMG_REG_TRANSPORT_HTTPS);
        assert_null(img_reg_config_host(c, "quay.io"));
        img_reg_config_free(TAKE_PTR(c));
        assert_int_equal(regcfg("{}", &c, &e), 0); /* nothing configured */
        assert_null(c->hosts);
}

static void test_registry_config_invalid(void **state) {
        static const char *const bad[] = {
                "",
                "{",
                "[]",
                "{\"registries\":[]}",
                "{\"registries\":{\"a\":[]}}",
                "{\"registries\":{\"a\":{\"mirrors\":\"https://m\"}}}",
                "{\"registries\":{\"a\":{\"insecure\":\"yes\"}}}",
                "{\"registries\":{\"a\":{\"mirrors\":[\"ftp://m\"]}}}",
                "{\"registries\":{\"a\":{\"mirrors\":[\"m.example\"]}}}",
                "{\"registries\":{\"a\":{\"mirrors\":[\"https://m example\"]}}}",
                "{\"registries\":{\"a\":{\"mirrors\":[\"https://m\\r\\nX: y\"]}}}",
                "{\"registries\":{\"a\":{\"mirrors\":[1]}}}",
                "{\"registries\":{\"a\":{\"mirrors\":[\"https:///v2\"]}}}",
                "{\"registries\":{\"a\":{\"mirrors\":[\"http:///\"]}}}",
        };
        for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
                struct wr_err e;
                struct img_reg_config *c = NULL;
                int r = regcfg(bad[i], &c, &e);
                if (r != -EINVAL)
                        fail_msg("accepted registry config #%zu: %s", i, bad[i]);
                img_reg_config_free(c); /* half-built: freed whole */
        }
        /* limits: mirrors per registry, URL length, file size */
        struct wr_err e;
        struct img_reg_config *c = NULL;
        char m[1024] = "";
        for (int i = 0; i < IMG_REG_MAX_MIRRORS; i++)
                strcat(m, i ? ",\"https://m\"" : "\"https://m\"");
        char *j = fmt("{\"registries\":{\"a\":{\"mirrors\":[%s]}}}", m);
        assert_int_equal(regcfg(j, &c, &e), 0);
        assert_int_equal(img_reg_config_host(c, "a")->n_mirrors, IMG_REG_MAX_MIRRORS);
        img_reg_config_free(c);
        free(j);
        j = fmt("{\"registries\":{\"a\":{\"mirrors\":[%s,\"https://m\"]}}}", m);
        assert_int_equal(regcfg(j, &c, &e), -EINVAL);
        assert_non_null(strstr(e.msg, "at most 8 mirrors"));
        img_reg_config_free(c);
        free(j);
        char url[IMG_REG_MIRROR_URL_MAX + 2];
        memset(url, 'a', sizeof(url) - 1);
        memcpy(url, "https://", 8);
        url[sizeof(url) - 1] = '\0';
        j = fmt("{\"registries\":{\"a\":{\"mirrors\":[\"%s\"]}}}", url);
        assert_int_equal(regcfg(j, &c, &e), -EINVAL);
        img_reg_config_free(c);
        free(j);
        url[sizeof(url) - 2] = '\0'; /* exactly the limit */
        j = fmt("{\"registries\":{\"a\":{\"mirrors\":[\"%s\"]}}}", url);
        assert_int_equal(regcfg(j, &c, &e), 0);
        img_reg_config_free(c);
        free(j);
        size_t big = IMG_REG_CONFIG_MAX_BYTES + 1;
        char *b = malloc(big);
        assert_non_null(b);
        memset(b, ' ', big);
        memcpy(b, "{}", 2);
        c = calloc(1, sizeof(*c));
        assert_int_equal(img_reg_config_parse_registries(c, b, big, "big", &e), -EINVAL);
        assert_int_equal(img_reg_config_parse_registries(c, b, big - 1, "big", NULL), 0);
        img_reg_config_free(c);
        free(b);
}

static void test_docker_config_parse(void **state) {
        struct wr_err e;
        _cleanup_(img_reg_config_freep) struct img_reg_config *c = NULL;
        assert_int_equal(dockercfg("{\"auths\":{"
                                   "\"https://index.docker.io/v1/\":{\"auth\":\"dXNlcjpwYXNz\"},"
                                   "\"127.0.0.1:5000\":{\"username\":\"u\",\"password\":\"p\"},"
                                   "\"helper.example\":{\"identitytoken\":\"t\"}},"
                                   "\"credsStore\":\"desktop\"}",
                                   &c, &e),
                         0);
        const struct img_reg_cred *cr = img_reg_config_cred(c, "registry-1.docker.io");
        assert_non_null(cr);
        assert_string_equal(cr->host, "docker.io");
        assert_string_equal(cr->basic, "dXNlcjpwYXNz");
        assert_string_equal(cr->source, "/etc/d.json");
        cr = img_reg_config_cred(c, "127.0.0.1:5000");
        assert_non_null(cr);
        assert_string_equal(cr->basic, "dTpw");                /* base64("u:p") */
        assert_null(img_reg_config_cred(c, "helper.example")); /* identity tokens: skipped */
        char h[IMG_REG_AUTH_MAX];
        assert_int_equal(img_reg_auth_basic_header(cr, h, sizeof(h)), 0);
        assert_string_equal(h, "Authorization: Basic dTpw");
        assert_int_equal(img_reg_auth_basic_header(cr, h, 10), -ENOBUFS);
        img_reg_config_free(TAKE_PTR(c));

        static const char *const bad[] = {
                "",
                "[]",
                "{\"auths\":[]}",
                "{\"auths\":{\"r\":{\"auth\":\"!!!!\"}}}",
                "{\"auths\":{\"r\":{\"auth\":\"dXNlcnBhc3M=\"}}}", /* "userpass": no colon */
        };
        for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
                int r = dockercfg(bad[i], &c, &e);
                if (r != -EINVAL)
                        fail_msg("accepted docker config #%zu: %s", i, bad[i]);
                img_reg_config_free(TAKE_PTR(c));
        }
        char pw[IMG_REG_CRED_MAX];
        memset(pw, 'p', sizeof(pw) - 1);
        pw[sizeof(pw) - 1] = '\0';
        char *j = fmt("{\"auths\":{\"r\":{\"username\":\"u\",\"password\":\"%s\"}}}", pw);
        assert_int_equal(dockercfg(j, &c, &e), -EINVAL);
        assert_non_null(strstr(e.msg, "too long"));
        img_reg_config_free(TAKE_PTR(c));
        free(j);
        pw[sizeof(pw) - 3] = '\0'; /* "u:" + this = the limit - 1 */
        j = fmt("{\"auths\":{\"r\":{\"username\":\"u\",\"password\":\"%s\"}}}", pw);
        assert_int_equal(dockercfg(j, &c, &e), 0);
        assert_non_null(img_reg_config_cred(c, "r"));
        free(j);
}

static void test_registry_config_load(void **state) {
        struct wr_err e = {0};
        struct img_reg_config *c = NULL;
        assert_int_equal(img_reg_config_load("/nonexistent/r.json", NULL, &c, &e), -ENOENT);
        assert_null(c);
        assert_non_null(strstr(e.msg, "--registry-config /nonexistent/r.json"));
        assert_int_equal(img_reg_config_load(NULL, "", &c, NULL), 0);
        assert_null(c->hosts);
        assert_null(c->creds);
        img_reg_config_free(c);
        char path[] = "/tmp/wt-test-image-dockercfg-XXXXXX";
        int fd = mkstemp(path);
        assert_true(fd >= 0);
        const char *j = "{\"auths\":{\"r:1\":{\"auth\":\"dXNlcjpwYXNz\"}}}";
        assert_int_equal(write(fd, j, strlen(j)), (ssize_t) strlen(j));
        close(fd);
        assert_int_equal(img_reg_config_load(NULL, path, &c, NULL), 0);
        assert_non_null(img_reg_config_cred(c, "r:1"));
        assert_string_equal(c->docker_config, path);
        img_reg_config_free(c);
        unlink(path);
}

static void test_registry_token_parse(void **state) {
        char h[IMG_REG_AUTH_MAX];
        const char *t = "{\"token\":\"abc.def\",\"access_token\":\"zzz\"}";
        assert_int_equal(img_reg_auth_token_parse(t, strlen(t), h, sizeof(h)), 0);
        assert_string_equal(h, "Authorization: Bearer abc.def");
        t = "{\"token\":\"\",\"access_token\":\"zzz\"}";
        assert_int_equal(img_reg_auth_token_parse(t, strlen(t), h, sizeof(h)), 0);
        assert_string_equal(h, "Authorization: Bearer zzz");
        static const char *const bad[] = {"",
                                          "{}",
                                          "{\"token\":1}",
                                          "{\"token\":\"a b\"}",
                                          "{\"token\":\"a\\r\\nX: y\"}",
                                          "[\"token\"]"};
        for (size_t i = 0; i < ELEMENTSOF(bad); i++)
                assert_int_equal(img_reg_auth_token_parse(bad[i], strlen(bad[i]), h, sizeof(h)),
                                 -EPROTO);
        assert_int_equal(img_reg_auth_token_parse("{\"token\":\"abc\"}", 15, h, 20), -EPROTO);
}

/* --- hostile tars, unpacked in-process --- */

static void expect_refused(const struct tent *ents, size_t n, const char *name_in_msg, int status) {
        char tar[512];
        path_at(tar, sizeof(tar), "evil.tar");
        write_tar(tar, ents, n, TAR_PLAIN);
        struct img_unpack_stats st;
        struct wr_err e = {0};
        int r = unpack_file(tar, "layer", &st, &e);
        if (r >= 0)
                fail_msg("tar with \"%s\" was accepted", name_in_msg);
        assert_int_equal(err_status(&e), status);
        if (!strstr(e.msg, name_in_msg))
                fail_msg("message \"%s\" does not name \"%s\"", e.msg, name_in_msg);
}

static void test_refuse_dotdot(void **state) {
        struct tent t[] = {{.path = "ok", .type = S_IFREG, .data = "x"},
                           {.path = "../x", .type = S_IFREG, .data = "pwned"}};
        expect_refused(t, 2, "../x", WR_STATUS_INVALID_ARGUMENT);
        char p[512];
        path_at(p, sizeof(p), "x");
        assert_int_equal(access(p, F_OK), -1);
}

static void test_refuse_dotdot_nested(void **state) {
        struct tent t[] = {{.path = "a/", .type = S_IFDIR, .perm = 0755},
                           {.path = "a/../../x", .type = S_IFREG, .data = "pwned"}};
        expect_refused(t, 2, "a/../../x", WR_STATUS_INVALID_ARGUMENT);
}

static void test_refuse_absolute(void **state) {
        struct tent t[] = {
                {.path = "/etc/passwd", .type = S_IFREG, .data = "root::0:0::/:/bin/sh\n"}};
        expect_refused(t, 1, "/etc/passwd", WR_STATUS_INVALID_ARGUMENT);
}

static void test_refuse_through_symlink(void **state) {
        char outside[512], target[512];
        path_at(outside, sizeof(outside), "outside");
        assert_int_equal(mkdir(outside, 0755), 0);
        struct tent t[] = {{.path = "l", .type = S_IFLNK, .link = outside},
                           {.path = "l/passwd", .type = S_IFREG, .data = "pwned"}};
        expect_refused(t, 2, "l/passwd", WR_STATUS_INVALID_ARGUMENT);
        assert_true(dir_empty(outside));
        /* and the classic "l -> /etc" with l/passwd */
        struct tent t2[] = {{.path = "l", .type = S_IFLNK, .link = "/etc"},
                            {.path = "l/passwd", .type = S_IFREG, .data = "pwned"}};
        path_at(target, sizeof(target), "layer");
        int fd = open("/tmp", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        char rel[512];
        snprintf(rel, sizeof(rel), "%s/layer", tmpdir + 5);
        assert_int_equal(rm_rf_at(fd, rel), 0);
        close(fd);
        struct stat before, after;
        assert_int_equal(stat("/etc/passwd", &before), 0);
        expect_refused(t2, 2, "l/passwd", WR_STATUS_INVALID_ARGUMENT);
        assert_int_equal(stat("/etc/passwd", &after), 0);
        assert_int_equal(before.st_mtim.tv_nsec, after.st_mtim.tv_nsec);
        assert_int_equal(before.st_size, after.st_size);
}

static void test_refuse_hardlink_escape(void **state) {
        struct tent t[] = {{.path = "h", .hard = true, .link = "../../etc/passwd"}};
        expect_refused(t, 1, "\"h\"", WR_STATUS_INVALID_ARGUMENT);
}

static void test_refuse_hardlink_missing(void **state) {
        struct tent t[] = {{.path = "a", .type = S_IFREG, .data = "x"},
                           {.path = "h", .hard = true, .link = "missing"}};
        expect_refused(t, 2, "does not exist", WR_STATUS_INVALID_ARGUMENT);
}

static void test_refuse_hardlink_through_symlink(void **state) {
        /* the target path may not pass through a symlink either */
        struct tent t[] = {{.path = "l", .type = S_IFLNK, .link = "/etc"},
                           {.path = "h", .hard = true, .link = "l/passwd"}};
        expect_refused(t, 2, "\"h\"", WR_STATUS_INVALID_ARGUMENT);
}

static void test_refuse_chardev(void **state) {
        struct tent t[] = {
                {.path = "dev/mem", .type = S_IFCHR, .perm = 0666, .rdev = makedev(1, 1)}};
        expect_refused(t, 1, "dev/mem", WR_STATUS_INVALID_ARGUMENT);
}

static void test_refuse_blockdev(void **state) {
        struct tent t[] = {
                {.path = "dev/vda", .type = S_IFBLK, .perm = 0660, .rdev = makedev(254, 0)}};
        expect_refused(t, 1, "dev/vda", WR_STATUS_INVALID_ARGUMENT);
}

static void test_refuse_root_ssh(void **state) {
        struct tent t[] = {
                {.path = "root/", .type = S_IFDIR, .perm = 0700},
                {.path = "root/.ssh/authorized_keys", .type = S_IFREG, .data = "ssh-ed25519 AAAA"}};
        expect_refused(t, 2, "root/.ssh", WR_STATUS_FAILED_PRECONDITION);
}

static void test_refuse_garbage(void **state) {
        char tar[512];
        path_at(tar, sizeof(tar), "garbage.tar");
        FILE *f = fopen(tar, "w");
        for (int i = 0; i < 1000; i++)
                fputs("this is not a tar archive\n", f);
        fclose(f);
        struct img_unpack_stats st;
        struct wr_err e = {0};
        assert_true(unpack_file(tar, "layer", &st, &e) < 0);
        assert_int_equal(err_status(&e), WR_STATUS_INVALID_ARGUMENT);
}

/* --- good tars --- */

static const struct tent good[] = {
        {.path = "./", .type = S_IFDIR, .perm = 0755},
        {.path = "./bin/", .type = S_IFDIR, .perm = 0755},
        {.path = "./bin/tool",
         .type = S_IFREG,
         .perm = 04755,
         .data = "#!/bin/sh\necho hi\n",
         .uid = 1234,
         .gid = 5678,
         .mtime = 1600000000},
        {.path = "./bin/sgid", .type = S_IFREG, .perm = 02711, .data = "x"},
        {.path = "./bin/alias", .type = S_IFLNK, .link = "tool", .uid = 7, .gid = 8},
        {.path = "./bin/abs", .type = S_IFLNK, .link = "/etc/passwd"},
        {.path = "./bin/hard", .hard = true, .link = "./bin/tool"},
        {.path = "./tmp/", .type = S_IFDIR, .perm = 01777, .mtime = 1500000000},
        {.path = "./tmp/fifo", .type = S_IFIFO, .perm = 0640},
        {.path = "implicit/parent/file", .type = S_IFREG, .perm = 0600, .data = "deep"},
        {.path = "./etc/.wh.gone", .type = S_IFREG},
        {.path = "./var/.wh..wh..opq", .type = S_IFREG},
        {.path = "./replace", .type = S_IFREG, .data = "first"},
        {.path = "./replace", .type = S_IFREG, .data = "second"},
};

static void test_unpack_good(void **state) {
        char tar[512], p[512];
        path_at(tar, sizeof(tar), "good.tar");
        write_tar(tar, good, ELEMENTSOF(good), TAR_PLAIN);
        struct img_unpack_stats st;
        struct wr_err e = {0};
        int r = unpack_file(tar, "layer", &st, &e);
        if (r < 0)
                fail_msg("unpack failed: %s", e.msg);
        char sum[IMG_DIGEST_MAX];
        sha256_file(tar, sum);
        assert_string_equal(st.diff_id, sum);
        struct stat s;
        assert_int_equal(stat(tar, &s), 0);
        assert_int_equal(st.tar_bytes, (uint64_t) s.st_size);

        struct stat tool, hard, lnk;
        path_at(p, sizeof(p), "layer/bin/tool");
        assert_int_equal(lstat(p, &tool), 0);
        assert_true(S_ISREG(tool.st_mode));
        assert_int_equal(tool.st_mode & 07777, 0755); /* setuid stripped */
        assert_int_equal(tool.st_mtim.tv_sec, 1600000000);
        if (geteuid() == 0) {
                assert_int_equal(tool.st_uid, 1234);
                assert_int_equal(tool.st_gid, 5678);
        }
        path_at(p, sizeof(p), "layer/bin/sgid");
        assert_int_equal(lstat(p, &s), 0);
        assert_int_equal(s.st_mode & 07777, 0711); /* setgid stripped */
        path_at(p, sizeof(p), "layer/bin/hard");
        assert_int_equal(lstat(p, &hard), 0);
        assert_int_equal(hard.st_ino, tool.st_ino);
        path_at(p, sizeof(p), "layer/bin/alias");
        assert_int_equal(lstat(p, &lnk), 0);
        assert_true(S_ISLNK(lnk.st_mode));
        if (geteuid() == 0)
                assert_int_equal(lnk.st_uid, 7);
        char target[64] = "";
        path_at(p, sizeof(p), "layer/bin/abs");
        assert_int_equal(readlink(p, target, sizeof(target) - 1), 11);
        assert_string_equal(target, "/etc/passwd");
        path_at(p, sizeof(p), "layer/tmp");
        assert_int_equal(lstat(p, &s), 0);
        assert_int_equal(s.st_mode & 07777, 01777);
        assert_int_equal(s.st_mtim.tv_sec, 1500000000); /* stamped after its children */
        path_at(p, sizeof(p), "layer/tmp/fifo");
        assert_int_equal(lstat(p, &s), 0);
        assert_true(S_ISFIFO(s.st_mode));
        assert_int_equal(s.st_mode & 07777, 0640);
        path_at(p, sizeof(p), "layer/implicit/parent/file");
        assert_int_equal(lstat(p, &s), 0);
        assert_int_equal(s.st_size, 4);
        path_at(p, sizeof(p), "layer/replace");
        assert_int_equal(lstat(p, &s), 0);
        assert_int_equal(s.st_size, 6);
        if (geteuid() == 0) {
                path_at(p, sizeof(p), "layer/etc/gone");
                assert_int_equal(lstat(p, &s), 0);
                assert_true(S_ISCHR(s.st_mode));
                assert_int_equal(s.st_rdev, makedev(0, 0));
                char v[4] = "";
                path_at(p, sizeof(p), "layer/var");
                assert_int_equal(getxattr(p, "trusted.overlay.opaque", v, sizeof(v)), 1);
                assert_int_equal(v[0], 'y');
        }
}

static void test_unpack_compressed_same_diff_id(void **state) {
        char plain[512], gz[512], zst[512];
        path_at(plain, sizeof(plain), "good.tar");
        path_at(gz, sizeof(gz), "good.tar.gz");
        path_at(zst, sizeof(zst), "good.tar.zst");
        write_tar(plain, good, ELEMENTSOF(good), TAR_PLAIN);
        write_tar(gz, good, ELEMENTSOF(good), TAR_GZIP);
        write_tar(zst, good, ELEMENTSOF(good), TAR_ZSTD);
        struct img_unpack_stats a, b, c;
        struct wr_err e = {0};
        assert_int_equal(unpack_file(plain, "l1", &a, &e), 0);
        assert_int_equal(unpack_file(gz, "l2", &b, &e), 0);
        assert_int_equal(unpack_file(zst, "l3", &c, &e), 0);
        assert_string_equal(a.diff_id, b.diff_id);
        assert_string_equal(a.diff_id, c.diff_id);
        char sum[IMG_DIGEST_MAX];
        sha256_file(gz, sum);
        assert_string_not_equal(sum, b.diff_id);
}

/* --- the store, through the real helper --- */

struct fixture {
        uv_loop_t loop;
        struct store *db;
        struct img_store *s;
        char state[512];
};

struct result {
        bool called;
        int r;
        struct wr_err e;
        char id[IMG_DIGEST_MAX];
        char layer[IMG_DIGEST_MAX];
};

static void import_done(struct img_import *imp, int r, const struct img_info *info,
                        const struct wr_err *e, void *ud) {
        struct result *res = ud;
        res->called = true;
        res->r = r;
        if (e)
                res->e = *e;
        if (info) {
                snprintf(res->id, sizeof(res->id), "%s", info->id);
                snprintf(res->layer, sizeof(res->layer), "%s", info->diff_ids[0]);
        }
}

static int import_file(struct fixture *f, const char *tar, const char *name,
                       const struct img_config *cfg, struct result *res) {
        memset(res, 0, sizeof(*res));
        struct img_import *imp = NULL;
        int r = img_import_new(f->s, &f->loop, name, cfg, &imp, &res->e);
        if (r < 0)
                return r;
        int fd = open(tar, O_RDONLY | O_CLOEXEC);
        assert_true(fd >= 0);
        char buf[7000]; /* odd chunk size on purpose */
        ssize_t n;
        while ((n = read(fd, buf, sizeof(buf))) > 0)
                assert_int_equal(img_import_write(imp, buf, (size_t) n, &res->e), 0);
        close(fd);
        r = img_import_finish(imp, import_done, res, &res->e);
        if (r < 0) {
                img_import_free(imp);
                return r;
        }
        while (!res->called)
                uv_run(&f->loop, UV_RUN_ONCE);
        img_import_free(imp);
        return res->r;
}

static int setup_store(void **state) {
        setup_tmp(state);
        struct fixture *f = calloc(1, sizeof(*f));
        assert_int_equal(uv_loop_init(&f->loop), 0);
        path_at(f->state, sizeof(f->state), "state");
        assert_int_equal(mkdir(f->state, 0700), 0);
        char db[600];
        snprintf(db, sizeof(db), "%s/warren.db", f->state);
        struct wr_err e = {0};
        if (store_open(db, &f->db, &e) < 0)
                fail_msg("store_open: %s", e.msg);
        if (img_store_open(f->state, f->db, &f->s, &e) < 0)
                fail_msg("img_store_open: %s", e.msg);
        if (access(img_store_helper(f->s), X_OK) != 0)
                fail_msg("helper %s not found", img_store_helper(f->s));
        *state = f;
        return 0;
}

static int teardown_store(void **state) {
        struct fixture *f = *state;
        img_store_free(f->s);
        store_close(f->db);
        uv_run(&f->loop, UV_RUN_NOWAIT);
        assert_int_equal(uv_loop_close(&f->loop), 0);
        free(f);
        return teardown_tmp(state);
}

static int count_entries(struct fixture *f, const char *sub) {
        char p[700];
        snprintf(p, sizeof(p), "%s/%s", f->state, sub);
        DIR *d = opendir(p);
        assert_non_null(d);
        int n = 0;
        struct dirent *de;
        while ((de = readdir(d)))
                if (strcmp(de->d_name, ".") && strcmp(de->d_name, ".."))
                        n++;
        closedir(d);
        return n;
}

static void test_store_import(void **state) {
        struct fixture *f = *state;
        char tar[512];
        path_at(tar, sizeof(tar), "good.tar");
        write_tar(tar, good, ELEMENTSOF(good), TAR_PLAIN);
        char sum[IMG_DIGEST_MAX];
        sha256_file(tar, sum);

        char *env[] = {"PATH=/bin"};
        struct img_config cfg = {.env = env, .n_env = 1, .working_dir = "/tmp"};
        struct result a, b, c;
        if (import_file(f, tar, "test/good", &cfg, &a) < 0)
                fail_msg("import: %s", a.e.msg);
        assert_string_equal(a.layer, sum);
        assert_int_equal(count_entries(f, "layers/sha256"), 1);
        assert_int_equal(count_entries(f, "layers/tmp"), 0);
        assert_int_equal(count_entries(f, "tmp"), 0);

        struct img_info *info = NULL;
        struct wr_err e = {0};
        assert_int_equal(img_store_resolve(f->s, "test/good", &info, &e), 0);
        assert_string_equal(info->id, a.id);
        assert_int_equal(info->n_names, 1);
        assert_string_equal(info->names[0], "test/good:latest");
        assert_int_equal(info->n_layers, 1);
        char dir[700];
        snprintf(dir, sizeof(dir), "%s/layers/sha256/%s", f->state, sum + 7);
        assert_string_equal(info->layer_dirs[0], dir);
        assert_string_equal(info->config.working_dir, "/tmp");
        assert_string_equal(info->config.env[0], "PATH=/bin");
        assert_string_equal(info->source, "import");
        assert_true(info->size > 0);
        img_info_free(info);
        /* the tree went through the helper: setuid stripped, owners kept */
        char p[800];
        struct stat s;
        snprintf(p, sizeof(p), "%s/bin/tool", dir);
        assert_int_equal(lstat(p, &s), 0);
        assert_int_equal(s.st_mode & 07777, 0755);
        assert_int_equal(s.st_uid, 1234);

        /* same content, other name: same image, same layer */
        assert_int_equal(import_file(f, tar, "test/other:v1", &cfg, &b), 0);
        assert_string_equal(b.id, a.id);
        assert_int_equal(count_entries(f, "layers/sha256"), 1);
        assert_int_equal(count_entries(f, "layers/tmp"), 0);
        /* same content, other config: other image, the layer reused */
        assert_int_equal(import_file(f, tar, "test/third", NULL, &c), 0);
        assert_string_not_equal(c.id, a.id);
        assert_string_equal(c.layer, a.layer);
        assert_int_equal(count_entries(f, "layers/sha256"), 1);

        /* by id, by prefix */
        assert_int_equal(img_store_resolve(f->s, a.id, &info, &e), 0);
        assert_int_equal(info->n_names, 2);
        img_info_free(info);
        char prefix[20];
        snprintf(prefix, sizeof(prefix), "%.14s", a.id + 7);
        assert_int_equal(img_store_resolve(f->s, prefix, &info, &e), 0);
        assert_string_equal(info->id, a.id);
        img_info_free(info);
        assert_int_equal(img_store_resolve(f->s, "nope", &info, &e), -ENOENT);
        assert_int_equal(err_status(&e), WR_STATUS_NOT_FOUND);

        struct img_info **list = NULL;
        size_t n = 0;
        assert_int_equal(img_store_list(f->s, &list, &n, &e), 2);
        img_info_list_free(list, n);

        /* delete: one of two names only untags */
        assert_int_equal(img_store_delete(f->s, "test/other:v1", &e), 0);
        assert_int_equal(img_store_resolve(f->s, a.id, &info, &e), 0);
        assert_int_equal(info->n_names, 1);
        img_info_free(info);
        assert_int_equal(img_store_delete(f->s, "test/good", &e), 0);
        assert_int_equal(img_store_resolve(f->s, a.id, &info, &e), -ENOENT);
        assert_int_equal(count_entries(f, "layers/sha256"), 1); /* test/third uses it */
        assert_int_equal(img_store_delete(f->s, "test/third", &e), 0);
        assert_int_equal(count_entries(f, "layers/sha256"), 0);
        assert_int_equal(count_entries(f, "layers/tmp"), 0);
}

/* --privsep's layer ops (docs/privsep.md "Phase 5, layers"), faked here:
 * they do what warren-priv does, in process, and count what was asked. */
struct fake_ops {
        int tmp_fd, sha_fd;
        int commits, existed, removes_tmp, removes_sha, refused_names;
        bool root_ssh; /* answer 2: the tree holds /root/.ssh */
};

static bool store_name(const char *n, bool tmp) {
        size_t l = strlen(n);
        if (tmp)
                return (l == 23 && !strncmp(n, "unpack-", 7)) || (l == 20 && !strncmp(n, "del-", 4));
        return l == 64 && strspn(n, "0123456789abcdef") == 64;
}

static int fake_commit(void *ud, const char *tmp_name, const char *hex, struct wr_err *e) {
        struct fake_ops *o = ud;
        (void) e;
        assert_true(store_name(tmp_name, true) && store_name(hex, false));
        o->commits++;
        if (o->root_ssh)
                return 2;
        if (renameat2(o->tmp_fd, tmp_name, o->sha_fd, hex, RENAME_NOREPLACE) == 0)
                return 0;
        assert_int_equal(errno, EEXIST);
        o->existed++;
        return 1;
}

static int fake_remove(void *ud, bool tmp, const char *name, struct wr_err *e) {
        struct fake_ops *o = ud;
        (void) e;
        if (!store_name(name, tmp)) {
                o->refused_names++;
                return -EINVAL; /* the encoder's answer: the store does it */
        }
        *(tmp ? &o->removes_tmp : &o->removes_sha) += 1;
        int fd = tmp ? o->tmp_fd : o->sha_fd;
        if (faccessat(fd, name, F_OK, AT_SYMLINK_NOFOLLOW) < 0)
                return 0;
        assert_int_equal(rm_rf_at(fd, name), 0);
        return 1;
}

static void test_store_layer_ops(void **state) {
        struct fixture *f = *state;
        char p[800];
        /* leftovers: a staging tree, junk, a layer dir no row knows */
        snprintf(p, sizeof(p), "mkdir -p %s/layers/tmp/unpack-0123456789abcdef/a "
                 "%s/layers/tmp/junk %s/layers/sha256/%064d",
                 f->state, f->state, f->state, 7);
        assert_int_equal(system(p), 0);
        struct fake_ops o = {0};
        snprintf(p, sizeof(p), "%s/layers/tmp", f->state);
        o.tmp_fd = open(p, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        snprintf(p, sizeof(p), "%s/layers/sha256", f->state);
        o.sha_fd = open(p, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        assert_true(o.tmp_fd >= 0 && o.sha_fd >= 0);
        const struct img_layer_ops ops = {.commit = fake_commit, .remove = fake_remove, .userdata = &o};
        img_store_free(f->s);
        struct wr_err e = {0};
        if (img_store_open_ops(f->state, f->db, &ops, &f->s, &e) < 0)
                fail_msg("img_store_open_ops: %s", e.msg);
        /* the start-up collection went through the ops; junk in process */
        assert_int_equal(o.removes_tmp, 1);
        assert_int_equal(o.removes_sha, 1);
        assert_int_equal(o.refused_names, 1);
        assert_int_equal(count_entries(f, "layers/tmp"), 0);
        assert_int_equal(count_entries(f, "layers/sha256"), 0);

        char tar[512];
        path_at(tar, sizeof(tar), "good.tar");
        write_tar(tar, good, ELEMENTSOF(good), TAR_PLAIN);
        struct result a, b;
        if (import_file(f, tar, "ops/a", NULL, &a) < 0)
                fail_msg("import: %s", a.e.msg);
        assert_int_equal(o.commits, 1);
        assert_int_equal(count_entries(f, "layers/sha256"), 1);
        /* the same layer again: there already, the copy removed by the ops */
        assert_int_equal(import_file(f, tar, "ops/b", NULL, &b), 0);
        assert_int_equal(o.commits, 2);
        assert_int_equal(o.existed, 1);
        assert_int_equal(o.removes_tmp, 2);
        assert_int_equal(count_entries(f, "layers/tmp"), 0);
        /* the ops find /root/.ssh: FAILED_PRECONDITION, nothing kept */
        static const struct tent other[] = {
                {.path = "./", .type = S_IFDIR, .perm = 0755},
                {.path = "./f", .type = S_IFREG, .data = "other"},
        };
        path_at(tar, sizeof(tar), "other.tar");
        write_tar(tar, other, ELEMENTSOF(other), TAR_PLAIN);
        o.root_ssh = true;
        assert_true(import_file(f, tar, "ops/c", NULL, &b) < 0);
        assert_int_equal(err_status(&b.e), WR_STATUS_FAILED_PRECONDITION);
        assert_non_null(strstr(b.e.msg, "/root/.ssh"));
        assert_int_equal(o.removes_tmp, 3);
        assert_int_equal(count_entries(f, "layers/tmp"), 0);
        assert_int_equal(count_entries(f, "layers/sha256"), 1);
        /* delete: the last image using the layer removes it through the ops */
        assert_int_equal(img_store_delete(f->s, a.id, &e), 0);
        assert_int_equal(o.removes_sha, 2);
        assert_int_equal(count_entries(f, "layers/sha256"), 0);
        assert_int_equal(count_entries(f, "layers/tmp"), 0);
        img_store_free(f->s);
        f->s = NULL;
        close(o.tmp_fd);
        close(o.sha_fd);
}

static bool always_used(const char *id, void *ud) {
        *(int *) ud += 1;
        return true;
}

static void test_store_delete_in_use(void **state) {
        struct fixture *f = *state;
        char tar[512];
        path_at(tar, sizeof(tar), "good.tar");
        write_tar(tar, good, ELEMENTSOF(good), TAR_PLAIN);
        struct result a;
        assert_int_equal(import_file(f, tar, "busy", NULL, &a), 0);
        int calls = 0;
        img_store_set_in_use(f->s, always_used, &calls);
        struct wr_err e = {0};
        assert_int_equal(img_store_delete(f->s, "busy", &e), -EBUSY);
        assert_int_equal(err_status(&e), WR_STATUS_FAILED_PRECONDITION);
        assert_int_equal(calls, 1);
        assert_int_equal(count_entries(f, "layers/sha256"), 1);
        img_store_set_in_use(f->s, NULL, NULL);
        assert_int_equal(img_store_delete(f->s, "busy", &e), 0);
}

static void test_store_import_hostile(void **state) {
        struct fixture *f = *state;
        char tar[512];
        path_at(tar, sizeof(tar), "evil.tar");
        struct tent t[] = {{.path = "a/", .type = S_IFDIR, .perm = 0755},
                           {.path = "a/f", .type = S_IFREG, .data = "x"},
                           {.path = "a/../../escape", .type = S_IFREG, .data = "pwned"}};
        write_tar(tar, t, ELEMENTSOF(t), TAR_PLAIN);
        struct result r;
        assert_true(import_file(f, tar, "evil", NULL, &r) < 0);
        assert_int_equal(err_status(&r.e), WR_STATUS_INVALID_ARGUMENT);
        assert_non_null(strstr(r.e.msg, "a/../../escape"));
        assert_int_equal(count_entries(f, "layers/sha256"), 0);
        assert_int_equal(count_entries(f, "layers/tmp"), 0);
        assert_int_equal(count_entries(f, "tmp"), 0);
        struct img_info *info;
        assert_int_equal(img_store_resolve(f->s, "evil", &info, NULL), -ENOENT);

        /* /root/.ssh reached through a symlink: the entry check cannot see
         * it, the rootfs check at commit does */
        struct tent t2[] = {{.path = "home/x/.ssh/authorized_keys", .type = S_IFREG, .data = "k"},
                            {.path = "root", .type = S_IFLNK, .link = "/home/x"}};
        write_tar(tar, t2, ELEMENTSOF(t2), TAR_PLAIN);
        assert_true(import_file(f, tar, "sneaky", NULL, &r) < 0);
        assert_int_equal(err_status(&r.e), WR_STATUS_FAILED_PRECONDITION);
        assert_non_null(strstr(r.e.msg, "/root/.ssh"));
        assert_int_equal(count_entries(f, "layers/sha256"), 0);
        assert_int_equal(count_entries(f, "layers/tmp"), 0);

        /* not a tar at all */
        FILE *fp = fopen(tar, "w");
        fputs("hello\n", fp);
        fclose(fp);
        assert_true(import_file(f, tar, "junk", NULL, &r) < 0);
        assert_int_equal(err_status(&r.e), WR_STATUS_INVALID_ARGUMENT);
        assert_int_equal(count_entries(f, "layers/tmp"), 0);
}

static void layer_done(int r, const char *diff_id, const struct wr_err *e, void *ud) {
        struct result *res = ud;
        res->called = true;
        res->r = r;
        res->e = *e;
        if (diff_id)
                snprintf(res->layer, sizeof(res->layer), "%s", diff_id);
}

static void test_layer_expected_digest(void **state) {
        struct fixture *f = *state;
        char tar[512];
        path_at(tar, sizeof(tar), "good.tar.gz");
        write_tar(tar, good, ELEMENTSOF(good), TAR_GZIP);
        int fd = open(tar, O_RDONLY | O_CLOEXEC);
        struct result res = {0};
        const char *wrong =
                "sha256:1111111111111111111111111111111111111111111111111111111111111111";
        assert_int_equal(img_layer_unpack(f->s, &f->loop, fd, wrong, layer_done, &res, NULL, NULL),
                         0);
        while (!res.called)
                uv_run(&f->loop, UV_RUN_ONCE);
        close(fd);
        assert_int_equal(err_status(&res.e), WR_STATUS_DATA_LOSS);
        assert_int_equal(count_entries(f, "layers/sha256"), 0);
        assert_int_equal(count_entries(f, "layers/tmp"), 0);
}

static void test_import_cancel(void **state) {
        struct fixture *f = *state;
        char tar[512];
        path_at(tar, sizeof(tar), "good.tar");
        write_tar(tar, good, ELEMENTSOF(good), TAR_PLAIN);
        struct img_import *imp = NULL;
        struct result res = {0};
        assert_int_equal(img_import_new(f->s, &f->loop, "x", NULL, &imp, NULL), 0);
        int fd = open(tar, O_RDONLY | O_CLOEXEC);
        char buf[4096];
        ssize_t n;
        while ((n = read(fd, buf, sizeof(buf))) > 0)
                assert_int_equal(img_import_write(imp, buf, (size_t) n, NULL), 0);
        close(fd);
        assert_int_equal(img_import_finish(imp, import_done, &res, NULL), 0);
        img_import_free(imp); /* helper killed or finished; done never called */
        uv_run(&f->loop, UV_RUN_DEFAULT);
        assert_false(res.called);
        assert_int_equal(count_entries(f, "layers/tmp"), 0);
        assert_int_equal(count_entries(f, "layers/sha256"), 0);
}

/* img_pack_files (COPY, add_local_dir): parents once, path order, a
 * later duplicate wins, owners and modes kept, deterministic; bad paths
 * refused. */
static void test_pack_files(void **state) {
        (void) state;
        struct img_pack_entry v[] = {
                {.path = "/srv/b/two", .data = "2", .len = 1, .mode = 0600, .uid = 7, .gid = 8},
                {.path = "/srv/a", .data = "old", .len = 3},
                {.path = "/srv/c", .mode = S_IFDIR | 0700},
                {.path = "/srv/a", .data = "new!", .len = 4, .mode = 0755},
        };
        char out[2][4096];
        size_t outlen[2];
        for (int round = 0; round < 2; round++) {
                int fd = memfd_create("pack", MFD_CLOEXEC);
                assert_true(fd >= 0);
                struct wr_err e = {0};
                assert_int_equal(img_pack_files(fd, v, 4, &e), 0);
                lseek(fd, 0, SEEK_SET);
                struct archive *a = archive_read_new();
                archive_read_support_format_tar(a);
                assert_int_equal(archive_read_open_fd(a, fd, 4096), ARCHIVE_OK);
                struct archive_entry *en;
                size_t o = 0;
                while (archive_read_next_header(a, &en) == ARCHIVE_OK) {
                        char data[16] = "";
                        la_ssize_t n = archive_read_data(a, data, sizeof(data) - 1);
                        o += (size_t) snprintf(
                                out[round] + o, sizeof(out[round]) - o, "%s %o %lld:%lld %s\n",
                                archive_entry_pathname(en), (unsigned) archive_entry_mode(en),
                                (long long) archive_entry_uid(en),
                                (long long) archive_entry_gid(en), n > 0 ? data : "-");
                }
                archive_read_free(a);
                close(fd);
                outlen[round] = o;
        }
        /* (libarchive's reader shows directories with a trailing '/') */
        assert_string_equal(out[0], "srv/ 40755 0:0 -\n"
                                    "srv/b/ 40755 0:0 -\n"
                                    "srv/a 100755 0:0 new!\n"
                                    "srv/b/two 100600 7:8 2\n"
                                    "srv/c/ 40700 0:0 -\n");
        assert_int_equal(outlen[0], outlen[1]);
        assert_memory_equal(out[0], out[1], outlen[0]);
        const char *bad[] = {"relative", "/a/../b", "/a//b", "/", "/a/."};
        for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
                struct img_pack_entry x = {.path = bad[i]};
                struct wr_err e = {0};
                int fd = memfd_create("pack", MFD_CLOEXEC);
                assert_int_equal(img_pack_files(fd, &x, 1, &e), -EINVAL);
                assert_int_equal(e.status, WR_STATUS_INVALID_ARGUMENT);
                close(fd);
        }
}

/* --- the warrend <-> warren-fetch message set --- */

#define DG "sha256:abababababababababababababababababababababababababababababababab"

static void test_fetch_proto_requests(void **state) {
        (void) state;
        struct img_fetch_req q;
        memset(&q, 0, sizeof(q));
        img_fetch_hdr_init(&q.hdr, IMG_FETCH_REQ_MANIFEST, 1);
        strcpy(q.object, "v1");
        assert_int_equal(img_fetch_msg_check(&q, sizeof(q), IMG_FETCH_TO_HELPER),
                         IMG_FETCH_REQ_MANIFEST);
        /* a request never goes to warrend; a datagram of another size is refused */
        assert_int_equal(img_fetch_msg_check(&q, sizeof(q), IMG_FETCH_TO_DAEMON), -EBADMSG);
        assert_int_equal(img_fetch_msg_check(&q, sizeof(q) - 1, IMG_FETCH_TO_HELPER), -EBADMSG);
        /* a digest object must be the expected digest */
        strcpy(q.object, DG);
        assert_int_equal(img_fetch_msg_check(&q, sizeof(q), IMG_FETCH_TO_HELPER), -EBADMSG);
        strcpy(q.digest, DG);
        assert_int_equal(img_fetch_msg_check(&q, sizeof(q), IMG_FETCH_TO_HELPER),
                         IMG_FETCH_REQ_MANIFEST);
        /* a blob needs a valid digest and no object */
        memset(&q, 0, sizeof(q));
        img_fetch_hdr_init(&q.hdr, IMG_FETCH_REQ_BLOB, 2);
        strcpy(q.digest, "sha256:xyz");
        assert_int_equal(img_fetch_msg_check(&q, sizeof(q), IMG_FETCH_TO_HELPER), -EBADMSG);
        strcpy(q.digest, DG);
        assert_int_equal(img_fetch_msg_check(&q, sizeof(q), IMG_FETCH_TO_HELPER),
                         IMG_FETCH_REQ_BLOB);
        memset(q.object, 'a', sizeof(q.object)); /* unterminated */
        assert_int_equal(img_fetch_msg_check(&q, sizeof(q), IMG_FETCH_TO_HELPER), -EBADMSG);
        memset(q.object, 0, sizeof(q.object));
        q.hdr.magic ^= 1;
        assert_int_equal(img_fetch_msg_check(&q, sizeof(q), IMG_FETCH_TO_HELPER), -EBADMSG);
        q.hdr.magic ^= 1;
        q.hdr.type = 0x7f;
        assert_int_equal(img_fetch_msg_check(&q, sizeof(q), IMG_FETCH_TO_HELPER), -EBADMSG);

        struct img_fetch_req_bind b;
        memset(&b, 0, sizeof(b));
        img_fetch_hdr_init(&b.hdr, IMG_FETCH_REQ_BIND, 0);
        assert_int_equal(img_fetch_msg_check(&b, sizeof(b), IMG_FETCH_TO_HELPER), -EBADMSG);
        strcpy(b.ref, "127.0.0.1:5000/a/b:v1");
        assert_int_equal(img_fetch_msg_check(&b, sizeof(b), IMG_FETCH_TO_HELPER),
                         IMG_FETCH_REQ_BIND);
        /* a bind's size is its own: a request-sized one is refused */
        b.hdr.size = sizeof(struct img_fetch_req);
        assert_int_equal(img_fetch_msg_check(&b, sizeof(struct img_fetch_req), IMG_FETCH_TO_HELPER),
                         -EBADMSG);
}

static void test_fetch_proto_answers(void **state) {
        (void) state;
        struct img_fetch_rep_manifest *m = calloc(1, sizeof(*m));
        assert_non_null(m);
        img_fetch_hdr_init(&m->hdr, IMG_FETCH_REP_MANIFEST, 3);
        strcpy(m->config_digest, DG);
        m->n_layers = 1;
        strcpy(m->layers[0].digest, DG);
        assert_int_equal(img_fetch_msg_check(m, sizeof(*m), IMG_FETCH_TO_DAEMON),
                         IMG_FETCH_REP_MANIFEST);
        m->n_layers = IMG_FETCH_MAX_LAYERS + 1;
        assert_int_equal(img_fetch_msg_check(m, sizeof(*m), IMG_FETCH_TO_DAEMON), -EBADMSG);
        m->n_layers = 2; /* the second layer's digest is empty */
        assert_int_equal(img_fetch_msg_check(m, sizeof(*m), IMG_FETCH_TO_DAEMON), -EBADMSG);
        m->n_layers = 1;
        m->reserved = 1;
        assert_int_equal(img_fetch_msg_check(m, sizeof(*m), IMG_FETCH_TO_DAEMON), -EBADMSG);
        free(m);

        struct img_fetch_rep_config *c = calloc(1, sizeof(*c));
        assert_non_null(c);
        img_fetch_hdr_init(&c->hdr, IMG_FETCH_REP_CONFIG, 4);
        static const char strs[] = DG "\0A=b\0/bin/sh";
        memcpy(c->strings, strs, sizeof(strs));
        c->strings_len = sizeof(strs);
        c->counts[IMG_FETCH_F_DIFF_IDS] = 1;
        c->counts[IMG_FETCH_F_ENV] = 1;
        c->counts[IMG_FETCH_F_CMD] = 1;
        assert_int_equal(img_fetch_msg_check(c, sizeof(*c), IMG_FETCH_TO_DAEMON),
                         IMG_FETCH_REP_CONFIG);
        size_t pos = 0;
        assert_string_equal(img_fetch_strings_next(c, &pos), DG);
        assert_string_equal(img_fetch_strings_next(c, &pos), "A=b");
        assert_string_equal(img_fetch_strings_next(c, &pos), "/bin/sh");
        assert_null(img_fetch_strings_next(c, &pos));
        c->counts[IMG_FETCH_F_CMD] = 2; /* more strings claimed than sent */
        assert_int_equal(img_fetch_msg_check(c, sizeof(*c), IMG_FETCH_TO_DAEMON), -EBADMSG);
        c->counts[IMG_FETCH_F_CMD] = 0; /* fewer */
        assert_int_equal(img_fetch_msg_check(c, sizeof(*c), IMG_FETCH_TO_DAEMON), -EBADMSG);
        c->counts[IMG_FETCH_F_CMD] = 1;
        c->strings[sizeof(strs) + 3] = 'x'; /* bytes past strings_len */
        assert_int_equal(img_fetch_msg_check(c, sizeof(*c), IMG_FETCH_TO_DAEMON), -EBADMSG);
        c->strings[sizeof(strs) + 3] = 0;
        c->strings[8] = 'Z'; /* a diff id that is not a digest */
        assert_int_equal(img_fetch_msg_check(c, sizeof(*c), IMG_FETCH_TO_DAEMON), -EBADMSG);
        free(c);

        struct img_fetch_rep_error x;
        memset(&x, 0, sizeof(x));
        img_fetch_hdr_init(&x.hdr, IMG_FETCH_REP_ERROR, 5);
        x.err.code = -ENOENT;
        x.err.status = WR_STATUS_NOT_FOUND;
        assert_int_equal(img_fetch_msg_check(&x, sizeof(x), IMG_FETCH_TO_DAEMON),
                         IMG_FETCH_REP_ERROR);
        x.err.code = 0; /* an error without a code */
        assert_int_equal(img_fetch_msg_check(&x, sizeof(x), IMG_FETCH_TO_DAEMON), -EBADMSG);
        x.err.code = -ENOENT;
        x.err.status = (enum wr_status) 99;
        assert_int_equal(img_fetch_msg_check(&x, sizeof(x), IMG_FETCH_TO_DAEMON), -EBADMSG);
        x.err.status = WR_STATUS_NOT_FOUND;
        memset(x.err.msg, 'a', sizeof(x.err.msg));
        assert_int_equal(img_fetch_msg_check(&x, sizeof(x), IMG_FETCH_TO_DAEMON), -EBADMSG);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_path_clean),
                cmocka_unit_test(test_entry_plan),
                cmocka_unit_test(test_name_normalize),
                cmocka_unit_test(test_config_encode),
                cmocka_unit_test(test_manifest_image),
                cmocka_unit_test(test_manifest_index),
                cmocka_unit_test(test_manifest_invalid),
                cmocka_unit_test(test_manifest_limits),
                cmocka_unit_test(test_image_config_parse),
                cmocka_unit_test(test_image_config_invalid),
                cmocka_unit_test(test_registry_config_parse),
                cmocka_unit_test(test_registry_config_invalid),
                cmocka_unit_test(test_docker_config_parse),
                cmocka_unit_test(test_registry_config_load),
                cmocka_unit_test(test_registry_token_parse),
                cmocka_unit_test_setup_teardown(test_refuse_dotdot, setup_tmp, teardown_tmp),
                cmocka_unit_test_setup_teardown(test_refuse_dotdot_nested, setup_tmp, teardown_tmp),
                cmocka_unit_test_setup_teardown(test_refuse_absolute, setup_tmp, teardown_tmp),
                cmocka_unit_test_setup_teardown(test_refuse_through_symlink, setup_tmp,
                                                teardown_tmp),
                cmocka_unit_test_setup_teardown(test_refuse_hardlink_escape, setup_tmp,
                                                teardown_tmp),
                cmocka_unit_test_setup_teardown(test_refuse_hardlink_missing, setup_tmp,
                                                teardown_tmp),
                cmocka_unit_test_setup_teardown(test_refuse_hardlink_through_symlink, setup_tmp,
                                                teardown_tmp),
                cmocka_unit_test_setup_teardown(test_refuse_chardev, setup_tmp, teardown_tmp),
                cmocka_unit_test_setup_teardown(test_refuse_blockdev, setup_tmp, teardown_tmp),
                cmocka_unit_test_setup_teardown(test_refuse_root_ssh, setup_tmp, teardown_tmp),
                cmocka_unit_test_setup_teardown(test_refuse_garbage, setup_tmp, teardown_tmp),
                cmocka_unit_test_setup_teardown(test_unpack_good, setup_tmp, teardown_tmp),
                cmocka_unit_test_setup_teardown(test_unpack_compressed_same_diff_id, setup_tmp,
                                                teardown_tmp),
                cmocka_unit_test_setup_teardown(test_store_import, setup_store, teardown_store),
                cmocka_unit_test_setup_teardown(test_store_layer_ops, setup_store,
                                                teardown_store),
                cmocka_unit_test_setup_teardown(test_store_delete_in_use, setup_store,
                                                teardown_store),
                cmocka_unit_test_setup_teardown(test_store_import_hostile, setup_store,
                                                teardown_store),
                cmocka_unit_test_setup_teardown(test_layer_expected_digest, setup_store,
                                                teardown_store),
                cmocka_unit_test_setup_teardown(test_import_cancel, setup_store, teardown_store),
                cmocka_unit_test(test_pack_files),
                cmocka_unit_test(test_fetch_proto_requests),
                cmocka_unit_test(test_fetch_proto_answers),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
