/* SPDX-License-Identifier: Apache-2.0 */
/* libFuzzer target: managed SSH destinations from a client (sandbox/ssh.h):
 * the field checks, pinned host keys, the private key's armour check and
 * the rendered ssh_config/known_hosts. Input: fields separated by NUL:
 * alias, host, user, host key, private key. Every accepted field must come
 * out of the rendered files on lines of its own (no newline smuggling). */
#include <stdlib.h>
#include <string.h>

#include "sandbox/ssh.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char *field(const uint8_t **p, const uint8_t *end, char *buf, size_t cap) {
        const uint8_t *nul = memchr(*p, 0, (size_t) (end - *p));
        size_t n = nul ? (size_t) (nul - *p) : (size_t) (end - *p);
        if (n >= cap)
                n = cap - 1;
        memcpy(buf, *p, n);
        buf[n] = '\0';
        *p = nul ? nul + 1 : end;
        return buf;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        const uint8_t *p = data, *end = data + size;
        char alias[128], host[300], user[64], hk[SBX_SSH_HOST_KEY_MAX + 16];
        field(&p, end, alias, sizeof(alias));
        field(&p, end, host, sizeof(host));
        field(&p, end, user, sizeof(user));
        field(&p, end, hk, sizeof(hk));
        (void) sbx_ssh_key_check("k", p, (size_t) (end - p), NULL);

        char *key = NULL;
        int kr = sbx_ssh_host_key_parse("hk", hk, strlen(hk), &key, NULL);
        if (kr == 0 && (!key || strchr(key, '\n') || strchr(key, '\r')))
                abort();
        if (sbx_ssh_alias_check("a", alias, NULL) < 0 || sbx_ssh_host_check("h", host, NULL) < 0 ||
            sbx_ssh_user_check("u", user, NULL) < 0) {
                free(key);
                return 0;
        }
        if (strpbrk(alias, " \t\r\n*?!") || strpbrk(host, " \t\r\n") || strpbrk(user, " \t\r\n"))
                abort();
        char *keys[1] = {key};
        struct sbx_ssh_dest d = {.alias = alias,
                                 .host = host,
                                 .user = user,
                                 .port = 22,
                                 .host_keys = key ? keys : NULL,
                                 .n_host_keys = key ? 1 : 0};
        char *config = NULL, *known = NULL;
        if (sbx_ssh_render(&d, 1, &config, &known) == 0) {
                /* exactly one Host line, naming the alias */
                const char *h = strstr(config, "\nHost ");
                if (!h || strstr(h + 1, "\nHost ") || strncmp(h + 6, alias, strlen(alias)) != 0)
                        abort();
                free(config);
                free(known);
        }
        free(key);
        return 0;
}
