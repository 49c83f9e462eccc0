/* SPDX-License-Identifier: Apache-2.0 */
/* Managed SSH, the pure half (ssh.h): checks of a destination's fields,
 * pinned host keys, and the text of the sandbox's ssh_config and
 * known_hosts. Everything here takes client input: no I/O, fuzzed
 * (fuzz-ssh-config). */
#include "sandbox/ssh.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>

#include "basic/macro.h"
#include "net/host.h"

#define INVALID(e, ...)                                                                            \
        err_setx(e, -EINVAL, WR_STATUS_INVALID_ARGUMENT, WR_FAULT_CLIENT, __VA_ARGS__)

void sbx_ssh_dest_clear(struct sbx_ssh_dest *d) {
        if (!d)
                return;
        free(d->alias);
        free(d->host);
        free(d->user);
        for (size_t i = 0; i < d->n_host_keys; i++)
                free(d->host_keys[i]);
        free(d->host_keys);
        if (d->key)
                explicit_bzero(d->key, d->key_len);
        free(d->key);
        *d = (struct sbx_ssh_dest){0};
}

static bool is_alnum(char c) {
        return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
}

/* 1..max of [A-Za-z0-9._-], the first in first_ok. */
static bool word_ok(const char *s, size_t max, bool underscore_first) {
        size_t n = s ? strlen(s) : 0;
        if (n == 0 || n > max)
                return false;
        if (!is_alnum(s[0]) && !(underscore_first && s[0] == '_'))
                return false;
        for (size_t i = 0; i < n; i++)
                if (!is_alnum(s[i]) && s[i] != '.' && s[i] != '_' && s[i] != '-')
                        return false;
        return true;
}

int sbx_ssh_alias_check(const char *field, const char *s, struct wr_err *e) {
        if (!word_ok(s, SBX_SSH_ALIAS_MAX, false))
                return INVALID(e,
                               "%s: \"%.80s\" is not a valid alias: use 1-64 letters, digits, "
                               "'.', '_' or '-', starting with a letter or digit",
                               field, s ? s : "");
        return 0;
}

int sbx_ssh_user_check(const char *field, const char *s, struct wr_err *e) {
        if (!word_ok(s, SBX_SSH_USER_MAX, true))
                return INVALID(e,
                               "%s: \"%.80s\" is not a valid user name: use 1-32 letters, digits, "
                               "'.', '_' or '-'",
                               field, s ? s : "");
        return 0;
}

int sbx_ssh_host_check(const char *field, const char *s, struct wr_err *e) {
        struct net_host h;
        struct wr_err he = {0};
        if (!s || !*s)
                return INVALID(e, "%s: missing: name the server (a hostname or an IP address)",
                               field);
        if (net_host_canon_str(s, &h, &he) < 0)
                return INVALID(e, "%s: %s", field, he.msg);
        return 0;
}

/* ---- host keys ---- */

static const char *const key_types[] = {
        "ssh-ed25519",
        "ecdsa-sha2-nistp256",
        "ecdsa-sha2-nistp384",
        "ecdsa-sha2-nistp521",
        "ssh-rsa",
        "rsa-sha2-256",
        "rsa-sha2-512",
        "sk-ssh-ed25519@openssh.com",
        "sk-ecdsa-sha2-nistp256@openssh.com",
        "ssh-ed25519-cert-v01@openssh.com",
        "ecdsa-sha2-nistp256-cert-v01@openssh.com",
        "ecdsa-sha2-nistp384-cert-v01@openssh.com",
        "ecdsa-sha2-nistp521-cert-v01@openssh.com",
        "ssh-rsa-cert-v01@openssh.com",
};

static int b64_val(unsigned char c) {
        if (c >= 'A' && c <= 'Z')
                return c - 'A';
        if (c >= 'a' && c <= 'z')
                return c - 'a' + 26;
        if (c >= '0' && c <= '9')
                return c - '0' + 52;
        if (c == '+')
                return 62;
        if (c == '/')
                return 63;
        return -1;
}

/* Strict base64 (padding required to a multiple of 4, no whitespace):
 * decode up to out_max bytes of s[0..len) into out. Returns the decoded
 * length (the whole input is checked even when out fills), -EINVAL. */
static ssize_t b64_decode(const char *s, size_t len, uint8_t *out, size_t out_max) {
        if (len == 0 || len % 4)
                return -EINVAL;
        size_t o = 0;
        for (size_t i = 0; i < len; i += 4) {
                int v[4];
                size_t pad = 0;
                for (size_t k = 0; k < 4; k++) {
                        unsigned char c = (unsigned char) s[i + k];
                        if (c == '=' && i + 4 == len && k >= 2) {
                                v[k] = 0;
                                pad++;
                                continue;
                        }
                        if (pad || (v[k] = b64_val(c)) < 0)
                                return -EINVAL;
                }
                uint32_t w = (uint32_t) v[0] << 18 | (uint32_t) v[1] << 12 | (uint32_t) v[2] << 6 |
                             (uint32_t) v[3];
                uint8_t b[3] = {(uint8_t) (w >> 16), (uint8_t) (w >> 8), (uint8_t) w};
                for (size_t k = 0; k < 3 - pad; k++, o++)
                        if (o < out_max)
                                out[o] = b[k];
        }
        return (ssize_t) o;
}

int sbx_ssh_host_key_parse(const char *field, const char *s, size_t len, char **ret,
                           struct wr_err *e) {
        *ret = NULL;
        if (len > SBX_SSH_HOST_KEY_MAX)
                return INVALID(e, "%s: longer than %d bytes", field, SBX_SSH_HOST_KEY_MAX);
        size_t i = 0;
        while (i < len && (s[i] == ' ' || s[i] == '\t'))
                i++;
        size_t t0 = i;
        while (i < len && s[i] != ' ' && s[i] != '\t')
                i++;
        size_t tlen = i - t0;
        while (i < len && (s[i] == ' ' || s[i] == '\t'))
                i++;
        size_t b0 = i;
        while (i < len && s[i] != ' ' && s[i] != '\t')
                i++;
        size_t blen = i - b0;
        /* the rest is a comment: printable ASCII only */
        for (size_t k = i; k < len; k++)
                if ((unsigned char) s[k] < 0x20 || (unsigned char) s[k] > 0x7e)
                        return INVALID(e,
                                       "%s: control or non-ASCII characters: give one key as "
                                       "\"TYPE BASE64 [COMMENT]\" (a line of ssh-keyscan or "
                                       "a .pub file)",
                                       field);
        const char *type = NULL;
        for (size_t k = 0; k < ELEMENTSOF(key_types); k++)
                if (strlen(key_types[k]) == tlen && memcmp(key_types[k], s + t0, tlen) == 0)
                        type = key_types[k];
        if (!type)
                return INVALID(e,
                               "%s: \"%.*s\" is not an SSH host key type: give one key as "
                               "\"TYPE BASE64\", e.g. \"ssh-ed25519 AAAA...\"",
                               field, (int) MIN(tlen, (size_t) 64), s + t0);
        uint8_t head[4 + 64];
        ssize_t n = blen ? b64_decode(s + b0, blen, head, sizeof(head)) : -EINVAL;
        if (n < 0)
                return INVALID(e, "%s: the key of type %s is not valid base64", field, type);
        /* the blob starts with string(type) */
        uint32_t l = n >= 4 ? (uint32_t) head[0] << 24 | (uint32_t) head[1] << 16 |
                                      (uint32_t) head[2] << 8 | head[3]
                            : 0;
        if (n < 4 || l != tlen || (size_t) n < 4 + tlen || memcmp(head + 4, type, tlen) != 0)
                return INVALID(e, "%s: the base64 does not hold a %s key", field, type);
        char *out = malloc(tlen + 1 + blen + 1);
        if (!out)
                return -ENOMEM;
        memcpy(out, type, tlen);
        out[tlen] = ' ';
        memcpy(out + tlen + 1, s + b0, blen);
        out[tlen + 1 + blen] = '\0';
        *ret = out;
        return 0;
}

int sbx_ssh_key_check(const char *field, const uint8_t *key, size_t len, struct wr_err *e) {
        if (len > SBX_SSH_KEY_MAX)
                return INVALID(e, "%s: the private key is longer than %u bytes", field,
                               SBX_SSH_KEY_MAX);
        static const char begin[] = "-----BEGIN ";
        static const char end[] = "PRIVATE KEY-----";
        size_t i = 0;
        while (i < len && (key[i] == ' ' || key[i] == '\t' || key[i] == '\r' || key[i] == '\n'))
                i++;
        bool ok = len - i >= sizeof(begin) - 1 && memcmp(key + i, begin, sizeof(begin) - 1) == 0;
        if (ok) {
                /* the armour line ends with "PRIVATE KEY-----" */
                const uint8_t *nl = memchr(key + i, '\n', len - i);
                size_t ll = (nl ? (size_t) (nl - (key + i)) : len - i);
                while (ll && key[i + ll - 1] == '\r')
                        ll--;
                ok = ll >= sizeof(begin) - 1 + sizeof(end) - 1 &&
                     memcmp(key + i + ll - (sizeof(end) - 1), end, sizeof(end) - 1) == 0;
        }
        if (!ok)
                return INVALID(e,
                               "%s: the secret does not hold an SSH private key (want the text "
                               "of a key file, \"-----BEGIN OPENSSH PRIVATE KEY-----\" ...)",
                               field);
        return 0;
}

/* ---- the files ---- */

struct sbuf {
        char *p;
        size_t len, cap;
        bool oom;
};

_printf_(2, 3) static void put(struct sbuf *b, const char *fmt, ...) {
        if (b->oom)
                return;
        va_list ap;
        for (;;) {
                va_start(ap, fmt);
                int n = vsnprintf(b->p ? b->p + b->len : NULL, b->p ? b->cap - b->len : 0, fmt, ap);
                va_end(ap);
                if (n < 0) {
                        b->oom = true;
                        return;
                }
                if (b->p && b->len + (size_t) n < b->cap) {
                        b->len += (size_t) n;
                        return;
                }
                size_t nc = MAX(b->cap * 2, b->len + (size_t) n + 256);
                char *np = realloc(b->p, nc);
                if (!np) {
                        b->oom = true;
                        return;
                }
                b->p = np;
                b->cap = nc;
        }
}

int sbx_ssh_render(const struct sbx_ssh_dest *dests, size_t n, char **ret_config,
                   char **ret_known_hosts) {
        struct sbuf c = {0}, k = {0};
        put(&c,
            "# Written by warrend: managed SSH destinations of this sandbox.\n"
            "# The keys are in an agent outside the sandbox (%s).\n",
            SBX_SSH_SOCK);
        put(&k, "# Written by warrend: pinned host keys of managed SSH destinations;\n"
                "# the others are trusted on first use and recorded here.\n");
        for (size_t i = 0; i < n; i++) {
                const struct sbx_ssh_dest *d = &dests[i];
                put(&c,
                    "\nHost %s\n"
                    "  HostName %s\n"
                    "  User %s\n"
                    "  Port %u\n"
                    "  IdentityAgent %s\n"
                    "  HostKeyAlias %s\n"
                    "  UserKnownHostsFile %s\n"
                    "  HashKnownHosts no\n"
                    "  StrictHostKeyChecking %s\n",
                    d->alias, d->host, d->user ? d->user : "root", (unsigned) d->port, SBX_SSH_SOCK,
                    d->alias, SBX_SSH_KNOWN_HOSTS, d->n_host_keys ? "yes" : "accept-new");
                if (d->n_host_keys)
                        put(&c, "  UpdateHostKeys no\n");
                for (size_t h = 0; h < d->n_host_keys; h++)
                        put(&k, "%s %s\n", d->alias, d->host_keys[h]);
        }
        if (c.oom || k.oom) {
                free(c.p);
                free(k.p);
                return -ENOMEM;
        }
        *ret_config = c.p;
        *ret_known_hosts = k.p;
        return 0;
}
