/* SPDX-License-Identifier: Apache-2.0 */
/* The CA bundle of a sandbox whose TLS warren-egress intercepts
 * (SECURITY.md egress decision 7; docs/network.md "Interception"): the
 * image's own system bundle followed by the egress CA's certificate (and
 * the previous one, kept for a rotation), written once per image under
 * <state_dir>/egress-bundles/ and bind-mounted read-only over the image's
 * bundle paths. The image's files are not modified. */

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "basic/macro.h"
#include "image/image.h"
#include "sandbox/sandbox-internal.h"
#include "signer/ca.h"

#define BUNDLE_MAX (8u << 20)

const char *const sbx_ca_bundle_paths[SBX_CA_BUNDLE_PATHS] = {
        "/etc/ssl/certs/ca-certificates.crt", /* Debian, Ubuntu, Alpine, Arch */
        "/etc/pki/tls/certs/ca-bundle.crt",   /* Fedora, RHEL */
        "/etc/ssl/cert.pem",                  /* Alpine, macOS-style */
};

/* path in the image: 1 present (file or symlink), 0 absent (or whited
 * out), with the topmost layer holding it in *layer. */
static int image_has(const struct img_info *img, const char *path, size_t *layer) {
        char p[PATH_MAX];
        for (size_t i = 0; i < img->n_layers; i++) {
                snprintf(p, sizeof(p), "%s%s", img->layer_dirs[i], path);
                struct stat st;
                if (lstat(p, &st) < 0)
                        continue;
                if (S_ISCHR(st.st_mode) && st.st_rdev == makedev(0, 0))
                        return 0; /* an overlay whiteout */
                *layer = i;
                return 1;
        }
        return 0;
}

static int append_file(const char *path, char **buf, size_t *len, size_t *cap) {
        int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
        if (fd < 0)
                return -errno;
        for (;;) {
                if (*cap - *len < 65536) {
                        size_t nc = *cap ? *cap * 2 : 262144;
                        char *nb = nc <= BUNDLE_MAX ? realloc(*buf, nc) : NULL;
                        if (!nb) {
                                close(fd);
                                return -ENOMEM;
                        }
                        *buf = nb;
                        *cap = nc;
                }
                ssize_t n = read(fd, *buf + *len, *cap - *len);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n <= 0) {
                        int r = n < 0 ? -errno : 0;
                        close(fd);
                        if (r == 0 && *len && (*buf)[*len - 1] != '\n')
                                (*buf)[(*len)++] = '\n';
                        return r;
                }
                *len += (size_t) n;
        }
}

int sbx_ca_bundle(const char *state_dir, const struct img_info *img, char *path, size_t size,
                  bool present[SBX_CA_BUNDLE_PATHS], struct wr_err *e) {
        char *buf = NULL;
        size_t len = 0, cap = 0;
        bool have_own = false;
        int r;
        for (size_t i = 0; i < SBX_CA_BUNDLE_PATHS; i++) {
                size_t layer = 0;
                present[i] = image_has(img, sbx_ca_bundle_paths[i], &layer) == 1;
                if (!present[i] || have_own)
                        continue;
                char p[PATH_MAX];
                snprintf(p, sizeof(p), "%s%s", img->layer_dirs[layer], sbx_ca_bundle_paths[i]);
                struct stat st;
                if (lstat(p, &st) == 0 && S_ISREG(st.st_mode) &&
                    append_file(p, &buf, &len, &cap) == 0)
                        have_own = true;
        }
        char ca[PATH_MAX];
        snprintf(ca, sizeof(ca), "%s/%s", state_dir, SIGNER_CA_CERT_FILE);
        if ((r = append_file(ca, &buf, &len, &cap)) < 0) {
                free(buf);
                return err_set(e, r, "egress CA certificate %s: %s", ca, strerror(-r));
        }
        snprintf(ca, sizeof(ca), "%s/%s", state_dir, SIGNER_CA_OLD_CERT_FILE);
        (void) append_file(ca, &buf, &len, &cap); /* kept for one rotation, when there */
        char dir[PATH_MAX];
        snprintf(dir, sizeof(dir), "%s/egress-bundles", state_dir);
        if (mkdir(dir, 0755) < 0 && errno != EEXIST) {
                r = -errno;
                free(buf);
                return err_set(e, r, "mkdir %s: %s", dir, strerror(-r));
        }
        char name[128];
        snprintf(name, sizeof(name), "%s", img->id);
        for (char *c = name; *c; c++)
                if (!((*c >= 'a' && *c <= 'z') || (*c >= '0' && *c <= '9')))
                        *c = '-';
        char tmp[PATH_MAX + 64];
        snprintf(path, size, "%s/%s.crt", dir, name);
        snprintf(tmp, sizeof(tmp), "%s.%d.tmp", path, (int) getpid());
        int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0644);
        r = fd < 0 ? -errno : 0;
        for (size_t off = 0; r == 0 && off < len;) {
                ssize_t n = write(fd, buf + off, len - off);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n <= 0)
                        r = n < 0 ? -errno : -EIO;
                else
                        off += (size_t) n;
        }
        if (fd >= 0 && close(fd) < 0 && r == 0)
                r = -errno;
        /* replaced whole: a sandbox holding the previous file keeps it */
        if (r == 0 && rename(tmp, path) < 0)
                r = -errno;
        free(buf);
        if (r < 0) {
                (void) unlink(tmp);
                return err_set(e, r, "write %s: %s", path, strerror(-r));
        }
        return 0;
}
