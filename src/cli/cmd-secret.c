/* SPDX-License-Identifier: Apache-2.0 */
/* warren secret set|ls|rm. Values go in on stdin and never come back. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "warren/v1/secrets.pb-c.h"

#define SECRET_MAX (1024 * 1024)

static int secret_set(struct cli_ctx *ctx, int argc, char **argv) {
        static const struct option longopts[] = {CLI_COMMON_LONGOPTS, {}};
        const char *cmd = "secret set", *usage = "NAME < FILE";
        int c;
        while ((c = cli_getopt(ctx, cmd, usage, argc, argv, "h", longopts)) != -1)
                return c == CLI_GETOPT_HELP ? CLI_EXIT_OK : CLI_EXIT_USAGE;
        if (argc - optind != 1)
                return cli_usage_error(cmd, usage, "want exactly one NAME");
        if (isatty(STDIN_FILENO))
                return cli_usage_error(cmd, usage,
                                       "the value is read from stdin: redirect a file or pipe it");
        uint8_t *value = NULL;
        ssize_t n = cli_read_all(STDIN_FILENO, SECRET_MAX, &value);
        if (n < 0) {
                fprintf(stderr, "warren: reading the secret from stdin: %s\n",
                        n == -EFBIG ? "larger than 1 MiB" : strerror((int) -n));
                return CLI_EXIT_FAIL;
        }
        Warren__V1__SetSecretRequest req = WARREN__V1__SET_SECRET_REQUEST__INIT;
        req.name = argv[optind];
        req.value.data = value;
        req.value.len = (size_t) n;
        Warren__V1__SecretInfo *info = NULL;
        int rc = cli_call(ctx, "/warren.v1.Secrets/SetSecret", &req.base,
                          &warren__v1__secret_info__descriptor, (ProtobufCMessage **) &info);
        explicit_bzero(value, (size_t) n);
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
                static const char *const headers[] = {"NAME", "KEYS", "UPDATED"};
                struct cli_table *t = cli_table_new(3, headers);
                for (size_t i = 0; i < resp->n_secrets; i++) {
                        Warren__V1__SecretInfo *s = resp->secrets[i];
                        char *keys = cli_strdup("");
                        for (size_t k = 0; k < s->n_keys; k++) {
                                char *n = cli_alloc(strlen(keys) + strlen(s->keys[k]) + 2);
                                sprintf(n, "%s%s%s", keys, k ? "," : "", s->keys[k]);
                                keys = n;
                        }
                        char tb[32];
                        const char *row[] = {
                                s->name, keys,
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
                {"set", "NAME < FILE", "create or replace a secret from stdin", secret_set},
                {"ls", "[--json]", "list secret names", secret_ls},
                {"rm", "NAME...", "delete secrets", secret_rm},
        };
        return cli_dispatch(ctx, "secret", cmds, ELEMENTSOF(cmds), argc - 1, argv + 1);
}
