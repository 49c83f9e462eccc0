/* SPDX-License-Identifier: Apache-2.0 */
/* warren secret set|ls|rm. Values go in (stdin, an env file, or an
 * integration's KEY=VALUE arguments) and never come back. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "warren/v1/secrets.pb-c.h"

#define SECRET_MAX (1024 * 1024)

#define SECRET_KEYS_MAX 256

/* The KEY=VALUE lines of a dotenv file (blank lines and '#' comments
 * skipped, an "export " prefix and one pair of matching quotes around the
 * value removed) as entries pointing into buf, which is edited in place. */
static int parse_env_file(char *buf, size_t len, Warren__V1__SetSecretRequest__ValuesEntry *out,
                          Warren__V1__SetSecretRequest__ValuesEntry **ptrs, size_t *n,
                          const char *path) {
        size_t lineno = 0;
        for (char *line = buf, *next; line && line < buf + len; line = next) {
                lineno++;
                next = memchr(line, '\n', (size_t) (buf + len - line));
                if (next)
                        *next++ = '\0';
                line += strspn(line, " \t");
                size_t l = strlen(line);
                while (l && (line[l - 1] == '\r' || line[l - 1] == ' ' || line[l - 1] == '\t'))
                        line[--l] = '\0';
                if (!*line || *line == '#')
                        continue;
                if (strncmp(line, "export ", 7) == 0)
                        line += 7 + strspn(line + 7, " \t");
                char *eq = strchr(line, '=');
                if (!eq || eq == line) {
                        fprintf(stderr, "warren: %s:%zu: not KEY=VALUE\n", path, lineno);
                        return -EINVAL;
                }
                *eq = '\0';
                char *v = eq + 1;
                size_t vl = strlen(v);
                if (vl >= 2 && v[0] == v[vl - 1] && (v[0] == '"' || v[0] == '\'')) {
                        v[vl - 1] = '\0';
                        v++;
                        vl -= 2;
                }
                if (*n == SECRET_KEYS_MAX) {
                        fprintf(stderr, "warren: %s: more than %d keys\n", path, SECRET_KEYS_MAX);
                        return -E2BIG;
                }
                Warren__V1__SetSecretRequest__ValuesEntry *en = &out[*n];
                warren__v1__set_secret_request__values_entry__init(en);
                en->key = line;
                en->value.data = (uint8_t *) v;
                en->value.len = vl;
                ptrs[(*n)++] = en;
        }
        return 0;
}

static int secret_set(struct cli_ctx *ctx, int argc, char **argv) {
        enum { OPT_INTEGRATION = CLI_OPT_FIRST_LOCAL, OPT_ENV_FILE };
        static const struct option longopts[] = {
                {"integration", no_argument, NULL, OPT_INTEGRATION},
                {"from-env-file", required_argument, NULL, OPT_ENV_FILE},
                CLI_COMMON_LONGOPTS,
                {}};
        const char *cmd = "secret set",
                   *usage = "NAME < FILE | NAME --integration KEY=VALUE... | NAME "
                            "--from-env-file PATH";
        bool integration = false;
        const char *env_file = NULL;
        int c;
        while ((c = cli_getopt(ctx, cmd, usage, argc, argv, "h", longopts)) != -1) {
                if (c == OPT_INTEGRATION)
                        integration = true;
                else if (c == OPT_ENV_FILE)
                        env_file = optarg;
                else
                        return c == CLI_GETOPT_HELP ? CLI_EXIT_OK : CLI_EXIT_USAGE;
        }
        if (optind >= argc)
                return cli_usage_error(cmd, usage, "missing NAME");
        if (integration && env_file)
                return cli_usage_error(cmd, usage,
                                       "give --integration KEY=VALUE... or --from-env-file, not "
                                       "both");
        if (integration ? argc - optind < 2 : argc - optind != 1)
                return cli_usage_error(cmd, usage,
                                       integration ? "--integration wants at least one KEY=VALUE"
                                                   : "want exactly one NAME");
        Warren__V1__SetSecretRequest req = WARREN__V1__SET_SECRET_REQUEST__INIT;
        req.name = argv[optind];
        Warren__V1__SetSecretRequest__ValuesEntry entries[SECRET_KEYS_MAX];
        Warren__V1__SetSecretRequest__ValuesEntry *ptrs[SECRET_KEYS_MAX];
        size_t n = 0;
        uint8_t *value = NULL;
        ssize_t len = 0;
        int rc = CLI_EXIT_OK;
        if (integration) {
                for (int i = optind + 1; i < argc; i++) {
                        char *eq = strchr(argv[i], '=');
                        if (!eq || eq == argv[i])
                                return cli_usage_error(cmd, usage, "%s: not KEY=VALUE", argv[i]);
                        if (n == SECRET_KEYS_MAX)
                                return cli_usage_error(cmd, usage, "more than %d keys",
                                                       SECRET_KEYS_MAX);
                        *eq = '\0';
                        warren__v1__set_secret_request__values_entry__init(&entries[n]);
                        entries[n].key = argv[i];
                        entries[n].value.data = (uint8_t *) eq + 1;
                        entries[n].value.len = strlen(eq + 1);
                        ptrs[n] = &entries[n];
                        n++;
                }
        } else {
                int fd = STDIN_FILENO;
                if (env_file && (fd = open(env_file, O_RDONLY | O_CLOEXEC | O_NOCTTY)) < 0) {
                        fprintf(stderr, "warren: cannot open %s: %s\n", env_file, strerror(errno));
                        return CLI_EXIT_FAIL;
                }
                if (!env_file && isatty(fd))
                        return cli_usage_error(
                                cmd, usage,
                                "the value is read from stdin: redirect a file or pipe it");
                len = cli_read_all(fd, SECRET_MAX, &value);
                if (env_file)
                        close(fd);
                if (len < 0) {
                        fprintf(stderr, "warren: reading the secret from %s: %s\n",
                                env_file ? env_file : "stdin",
                                len == -EFBIG ? "larger than 1 MiB" : strerror((int) -len));
                        return CLI_EXIT_FAIL;
                }
                if (!env_file) {
                        req.value.data = value;
                        req.value.len = (size_t) len;
                } else if (parse_env_file((char *) value, (size_t) len, entries, ptrs, &n,
                                          env_file) < 0) {
                        rc = CLI_EXIT_USAGE;
                } else if (n == 0) {
                        fprintf(stderr, "warren: %s has no KEY=VALUE line\n", env_file);
                        rc = CLI_EXIT_USAGE;
                }
        }
        req.n_values = n;
        req.values = ptrs;
        Warren__V1__SecretInfo *info = NULL;
        if (rc == CLI_EXIT_OK)
                rc = cli_call(ctx, "/warren.v1.Secrets/SetSecret", &req.base,
                              &warren__v1__secret_info__descriptor, (ProtobufCMessage **) &info);
        if (value) /* the arena's: wiped here, freed at exit */
                explicit_bzero(value, (size_t) len);
        for (int i = optind + 1; integration && i < argc; i++)
                explicit_bzero(argv[i], strlen(argv[i]));
        if (rc != CLI_EXIT_OK)
                return rc;
        printf("%s\n", info->name);
        protobuf_c_message_free_unpacked(&info->base, NULL);
        return CLI_EXIT_OK;
}

static int secret_ls(struct cli_ctx *ctx, int argc, char **argv) {
        bool json;
        int rc0 = cli_getopt_json_only(ctx, "secret ls", argc, argv, &json);
        if (rc0 >= 0)
                return rc0;
        Warren__V1__ListSecretsRequest req = WARREN__V1__LIST_SECRETS_REQUEST__INIT;
        Warren__V1__ListSecretsResponse *resp = NULL;
        int rc = cli_call(ctx, "/warren.v1.Secrets/ListSecrets", &req.base,
                          &warren__v1__list_secrets_response__descriptor,
                          (ProtobufCMessage **) &resp);
        if (rc != CLI_EXIT_OK)
                return rc;
        if (json) {
                cli_json_print_list((ProtobufCMessage *const *) resp->secrets, resp->n_secrets);
        } else {
                static const char *const headers[] = {"NAME", "KEYS", "VERSION", "UPDATED"};
                struct cli_table *t = cli_table_new(4, headers);
                for (size_t i = 0; i < resp->n_secrets; i++) {
                        Warren__V1__SecretInfo *s = resp->secrets[i];
                        char *keys = cli_strdup("");
                        for (size_t k = 0; k < s->n_keys; k++) {
                                char *n = cli_alloc(strlen(keys) + strlen(s->keys[k]) + 2);
                                sprintf(n, "%s%s%s", keys, k ? "," : "", s->keys[k]);
                                keys = n;
                        }
                        char tb[32], vb[24];
                        snprintf(vb, sizeof(vb), "%lld", (long long) s->version);
                        const char *row[] = {
                                s->name, keys, vb,
                                cli_format_time(s->updated_at_unix * 1000000000LL, tb)};
                        cli_table_add(t, row);
                }
                cli_table_print(t);
        }
        protobuf_c_message_free_unpacked(&resp->base, NULL);
        return CLI_EXIT_OK;
}

static int secret_rm(struct cli_ctx *ctx, int argc, char **argv) {
        static const struct option longopts[] = {CLI_COMMON_LONGOPTS, {}};
        const char *cmd = "secret rm", *usage = "NAME...";
        int c;
        while ((c = cli_getopt(ctx, cmd, usage, argc, argv, "h", longopts)) != -1)
                return c == CLI_GETOPT_HELP ? CLI_EXIT_OK : CLI_EXIT_USAGE;
        if (optind >= argc)
                return cli_usage_error(cmd, usage, "missing NAME");
        return cli_delete_each(ctx, argv + optind, argc - optind, "/warren.v1.Secrets/DeleteSecret",
                               &warren__v1__delete_secret_request__descriptor, "name",
                               &warren__v1__delete_secret_response__descriptor);
}

int cli_cmd_secret(struct cli_ctx *ctx, int argc, char **argv) {
        static const struct cli_cmd cmds[] = {
                {"set", "NAME < FILE | NAME --integration KEY=VALUE... | NAME --from-env-file PATH",
                 "create or replace a secret (a value from stdin, or an integration's keys)",
                 secret_set},
                {"ls", "[--json]", "list secret names", secret_ls},
                {"rm", "NAME...", "delete secrets", secret_rm},
        };
        return cli_dispatch(ctx, "secret", cmds, ELEMENTSOF(cmds), argc - 1, argv + 1);
}
