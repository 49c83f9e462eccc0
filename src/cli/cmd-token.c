/* SPDX-License-Identifier: Apache-2.0 */
/* warren token create|ls|revoke, warren env whoami|quota|set-quota:
 * API tokens and environments (docs/security.md). A new token is printed
 * once, on stdout, alone on its line: warrend keeps only its hash. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "warren/v1/identity.pb-c.h"

static const char *ts_or(const Warren__V1__Timestamp *t, const char *none, char buf[static 32]) {
        return t && t->unix_nanos ? cli_format_time(t->unix_nanos, buf) : none;
}

static int token_create(struct cli_ctx *ctx, int argc, char **argv) {
        enum { OPT_ENV = CLI_OPT_FIRST_LOCAL, OPT_ROLE, OPT_EXPIRES, OPT_DESC, OPT_JSON };
        static const struct option longopts[] = {{"env", required_argument, NULL, OPT_ENV},
                                                 {"role", required_argument, NULL, OPT_ROLE},
                                                 {"expires", required_argument, NULL, OPT_EXPIRES},
                                                 {"description", required_argument, NULL, OPT_DESC},
                                                 {"json", no_argument, NULL, OPT_JSON},
                                                 CLI_COMMON_LONGOPTS,
                                                 {}};
        const char *cmd = "token create",
                   *usage = "--env NAME [--role admin|user] [--expires D] [--description TEXT] "
                            "[--json]";
        Warren__V1__CreateTokenRequest req = WARREN__V1__CREATE_TOKEN_REQUEST__INIT;
        bool json = false;
        int c;
        while ((c = cli_getopt(ctx, cmd, usage, argc, argv, "h", longopts)) != -1) {
                if (c == OPT_ENV)
                        req.environment = optarg;
                else if (c == OPT_ROLE)
                        req.role = optarg;
                else if (c == OPT_EXPIRES)
                        req.expires = optarg;
                else if (c == OPT_DESC)
                        req.description = optarg;
                else if (c == OPT_JSON)
                        json = true;
                else
                        return c == CLI_GETOPT_HELP ? CLI_EXIT_OK : CLI_EXIT_USAGE;
        }
        if (optind < argc)
                return cli_usage_error(cmd, usage, "unexpected argument %s", argv[optind]);
        Warren__V1__CreateTokenResponse *resp = NULL;
        int rc = cli_call(ctx, "/warren.v1.Identity/CreateToken", &req.base,
                          &warren__v1__create_token_response__descriptor,
                          (ProtobufCMessage **) &resp);
        if (rc != CLI_EXIT_OK)
                return rc;
        if (json) {
                cli_json_print(cli_json_from_message(&resp->base));
        } else {
                char b[32];
                printf("%s\n", resp->token);
                fprintf(stderr,
                        "token %s: environment %s, role %s, expires %s\n"
                        "It is shown only now; send it as WARREN_TOKEN or --token.\n",
                        resp->info->id, resp->info->environment, resp->info->role,
                        ts_or(resp->info->expires_at, "never", b));
        }
        explicit_bzero(resp->token, strlen(resp->token));
        protobuf_c_message_free_unpacked(&resp->base, NULL);
        return CLI_EXIT_OK;
}

static int token_ls(struct cli_ctx *ctx, int argc, char **argv) {
        enum { OPT_ENV = CLI_OPT_FIRST_LOCAL, OPT_JSON };
        static const struct option longopts[] = {{"env", required_argument, NULL, OPT_ENV},
                                                 {"json", no_argument, NULL, OPT_JSON},
                                                 CLI_COMMON_LONGOPTS,
                                                 {}};
        const char *cmd = "token ls", *usage = "[--env NAME|'*'] [--json]";
        Warren__V1__ListTokensRequest req = WARREN__V1__LIST_TOKENS_REQUEST__INIT;
        bool json = false;
        int c;
        while ((c = cli_getopt(ctx, cmd, usage, argc, argv, "h", longopts)) != -1) {
                if (c == OPT_ENV)
                        req.environment = optarg;
                else if (c == OPT_JSON)
                        json = true;
                else
                        return c == CLI_GETOPT_HELP ? CLI_EXIT_OK : CLI_EXIT_USAGE;
        }
        Warren__V1__ListTokensResponse *resp = NULL;
        int rc = cli_call(ctx, "/warren.v1.Identity/ListTokens", &req.base,
                          &warren__v1__list_tokens_response__descriptor,
                          (ProtobufCMessage **) &resp);
        if (rc != CLI_EXIT_OK)
                return rc;
        if (json) {
                cli_json_print_list((ProtobufCMessage *const *) resp->tokens, resp->n_tokens);
        } else {
                static const char *const headers[] = {"ID",         "ENVIRONMENT", "ROLE",
                                                      "CREATED",    "EXPIRES",     "REVOKED",
                                                      "DESCRIPTION"};
                struct cli_table *t = cli_table_new(7, headers);
                for (size_t i = 0; i < resp->n_tokens; i++) {
                        const Warren__V1__TokenInfo *k = resp->tokens[i];
                        char b1[32], b2[32], b3[32];
                        const char *row[] = {k->id,
                                             k->environment,
                                             k->role,
                                             ts_or(k->created_at, "-", b1),
                                             ts_or(k->expires_at, "never", b2),
                                             ts_or(k->revoked_at, "-", b3),
                                             k->description};
                        cli_table_add(t, row);
                }
                cli_table_print(t);
                cli_table_free(t);
        }
        protobuf_c_message_free_unpacked(&resp->base, NULL);
        return CLI_EXIT_OK;
}

static int token_revoke(struct cli_ctx *ctx, int argc, char **argv) {
        static const struct option longopts[] = {CLI_COMMON_LONGOPTS, {}};
        const char *cmd = "token revoke", *usage = "ID...";
        int c;
        while ((c = cli_getopt(ctx, cmd, usage, argc, argv, "h", longopts)) != -1)
                return c == CLI_GETOPT_HELP ? CLI_EXIT_OK : CLI_EXIT_USAGE;
        if (optind >= argc)
                return cli_usage_error(cmd, usage,
                                       "missing token ID (tk-..., see `warren token ls`)");
        return cli_delete_each(ctx, argv + optind, argc - optind, "/warren.v1.Identity/RevokeToken",
                               &warren__v1__revoke_token_request__descriptor, "id",
                               &warren__v1__token_info__descriptor);
}

int cli_cmd_token(struct cli_ctx *ctx, int argc, char **argv) {
        static const struct cli_cmd cmds[] = {
                {"create", "--env NAME [--role admin|user] [--expires D]",
                 "mint a token (printed once)", token_create},
                {"ls", "[--env NAME|'*'] [--json]", "list tokens (never the tokens themselves)",
                 token_ls},
                {"revoke", "ID...", "revoke tokens", token_revoke},
        };
        return cli_dispatch(ctx, "token", cmds, ELEMENTSOF(cmds), argc - 1, argv + 1);
}

/* --- audit --- */

int cli_cmd_audit(struct cli_ctx *ctx, int argc, char **argv) {
        enum { OPT_ENV = CLI_OPT_FIRST_LOCAL, OPT_LIMIT, OPT_JSON };
        static const struct option longopts[] = {{"env", required_argument, NULL, OPT_ENV},
                                                 {"limit", required_argument, NULL, OPT_LIMIT},
                                                 {"json", no_argument, NULL, OPT_JSON},
                                                 CLI_COMMON_LONGOPTS,
                                                 {}};
        const char *cmd = "audit", *usage = "[--env NAME|'*'] [--limit N] [--json]";
        Warren__V1__ListAuditEventsRequest req = WARREN__V1__LIST_AUDIT_EVENTS_REQUEST__INIT;
        bool json = false;
        int c;
        while ((c = cli_getopt(ctx, cmd, usage, argc, argv, "h", longopts)) != -1) {
                if (c == OPT_ENV)
                        req.environment = optarg;
                else if (c == OPT_LIMIT) {
                        char *end;
                        long v = strtol(optarg, &end, 10);
                        if (*end || v < 1 || v > 1000)
                                return cli_usage_error(cmd, usage,
                                                       "--limit %s: give a number 1..1000", optarg);
                        req.limit = (int32_t) v;
                } else if (c == OPT_JSON)
                        json = true;
                else
                        return c == CLI_GETOPT_HELP ? CLI_EXIT_OK : CLI_EXIT_USAGE;
        }
        if (optind < argc)
                return cli_usage_error(cmd, usage, "unexpected argument %s", argv[optind]);
        Warren__V1__ListAuditEventsResponse *resp = NULL;
        int rc = cli_call(ctx, "/warren.v1.Identity/ListAuditEvents", &req.base,
                          &warren__v1__list_audit_events_response__descriptor,
                          (ProtobufCMessage **) &resp);
        if (rc != CLI_EXIT_OK)
                return rc;
        if (json) {
                cli_json_print_list((ProtobufCMessage *const *) resp->events, resp->n_events);
        } else {
                static const char *const headers[] = {"TIME",   "ENVIRONMENT", "WHO",   "PEER",
                                                      "METHOD", "OBJECT",      "RESULT"};
                struct cli_table *t = cli_table_new(7, headers);
                for (size_t i = 0; i < resp->n_events; i++) {
                        const Warren__V1__AuditEvent *a = resp->events[i];
                        char b[32];
                        const char *m = strrchr(a->method, '/');
                        const char *row[] = {
                                ts_or(a->time, "-", b),
                                a->environment,
                                a->subject,
                                a->peer,
                                m ? m + 1 : a->method,
                                a->object,
                                a->code == 0 ? "OK" : cli_strdup(err_status_name(a->code)),
                        };
                        cli_table_add(t, row);
                }
                cli_table_print(t);
                cli_table_free(t);
        }
        protobuf_c_message_free_unpacked(&resp->base, NULL);
        return CLI_EXIT_OK;
}

/* --- env --- */

static int env_whoami(struct cli_ctx *ctx, int argc, char **argv) {
        bool json;
        int rc0 = cli_getopt_json_only(ctx, "env whoami", argc, argv, &json);
        if (rc0 >= 0)
                return rc0;
        Warren__V1__WhoAmIRequest req = WARREN__V1__WHO_AM_IREQUEST__INIT;
        Warren__V1__WhoAmIResponse *resp = NULL;
        int rc = cli_call(ctx, "/warren.v1.Identity/WhoAmI", &req.base,
                          &warren__v1__who_am_iresponse__descriptor, (ProtobufCMessage **) &resp);
        if (rc != CLI_EXIT_OK)
                return rc;
        if (json)
                cli_json_print(cli_json_from_message(&resp->base));
        else
                printf("subject %s\nenvironment %s\nrole %s\n", resp->subject, resp->environment,
                       resp->role);
        protobuf_c_message_free_unpacked(&resp->base, NULL);
        return CLI_EXIT_OK;
}

static void print_quota(const Warren__V1__Quota *q, bool json) {
        if (json) {
                cli_json_print(cli_json_from_message(&q->base));
                return;
        }
        char b[32];
        printf("environment %s\n", q->environment);
        printf("sandboxes   %s\n",
               q->max_sandboxes ? (snprintf(b, sizeof(b), "%lld", (long long) q->max_sandboxes), b)
                                : "unlimited");
        printf("cpu         %s\n",
               q->max_cpu > 0 ? (snprintf(b, sizeof(b), "%g", q->max_cpu), b) : "unlimited");
        printf("memory      %s\n", q->max_memory_bytes
                                           ? cli_format_size((uint64_t) q->max_memory_bytes, b)
                                           : "unlimited");
        printf("volumes     %s\n", q->max_volume_bytes
                                           ? cli_format_size((uint64_t) q->max_volume_bytes, b)
                                           : "unlimited");
}

static int env_quota(struct cli_ctx *ctx, int argc, char **argv) {
        enum { OPT_JSON = CLI_OPT_FIRST_LOCAL };
        static const struct option longopts[] = {
                {"json", no_argument, NULL, OPT_JSON}, CLI_COMMON_LONGOPTS, {}};
        const char *cmd = "env quota", *usage = "[NAME] [--json]";
        bool json = false;
        int c;
        while ((c = cli_getopt(ctx, cmd, usage, argc, argv, "h", longopts)) != -1) {
                if (c == OPT_JSON)
                        json = true;
                else
                        return c == CLI_GETOPT_HELP ? CLI_EXIT_OK : CLI_EXIT_USAGE;
        }
        Warren__V1__GetQuotaRequest req = WARREN__V1__GET_QUOTA_REQUEST__INIT;
        if (optind < argc)
                req.environment = argv[optind];
        Warren__V1__Quota *resp = NULL;
        int rc = cli_call(ctx, "/warren.v1.Identity/GetQuota", &req.base,
                          &warren__v1__quota__descriptor, (ProtobufCMessage **) &resp);
        if (rc != CLI_EXIT_OK)
                return rc;
        print_quota(resp, json);
        protobuf_c_message_free_unpacked(&resp->base, NULL);
        return CLI_EXIT_OK;
}

/* A size like "4Gi", "512Mi", "1000000" (bytes). */
static int parse_size(const char *s, int64_t *ret) {
        char *end;
        errno = 0;
        double v = strtod(s, &end);
        if (errno || end == s || v < 0)
                return -EINVAL;
        double mul = 1;
        if (!*end)
                mul = 1;
        else if (!strcmp(end, "K") || !strcmp(end, "Ki"))
                mul = 1024.0;
        else if (!strcmp(end, "M") || !strcmp(end, "Mi"))
                mul = 1024.0 * 1024;
        else if (!strcmp(end, "G") || !strcmp(end, "Gi"))
                mul = 1024.0 * 1024 * 1024;
        else if (!strcmp(end, "T") || !strcmp(end, "Ti"))
                mul = 1024.0 * 1024 * 1024 * 1024;
        else
                return -EINVAL;
        *ret = (int64_t) (v * mul);
        return 0;
}

static int env_set_quota(struct cli_ctx *ctx, int argc, char **argv) {
        enum {
                OPT_SANDBOXES = CLI_OPT_FIRST_LOCAL,
                OPT_CPU,
                OPT_MEMORY,
                OPT_VOLUME_BYTES,
                OPT_JSON,
        };
        static const struct option longopts[] = {
                {"sandboxes", required_argument, NULL, OPT_SANDBOXES},
                {"cpu", required_argument, NULL, OPT_CPU},
                {"memory", required_argument, NULL, OPT_MEMORY},
                {"volume-bytes", required_argument, NULL, OPT_VOLUME_BYTES},
                {"json", no_argument, NULL, OPT_JSON},
                CLI_COMMON_LONGOPTS,
                {}};
        const char *cmd = "env set-quota",
                   *usage = "NAME [--sandboxes N] [--cpu CORES] [--memory SIZE] "
                            "[--volume-bytes SIZE] [--json]  (0 = no limit; unset flags "
                            "become 0)";
        Warren__V1__Quota q = WARREN__V1__QUOTA__INIT;
        bool json = false;
        int c;
        while ((c = cli_getopt(ctx, cmd, usage, argc, argv, "h", longopts)) != -1) {
                char *end;
                switch (c) {
                case OPT_SANDBOXES:
                        q.max_sandboxes = strtoll(optarg, &end, 10);
                        if (*end || q.max_sandboxes < 0)
                                return cli_usage_error(cmd, usage, "--sandboxes %s: give a count",
                                                       optarg);
                        break;
                case OPT_CPU:
                        q.max_cpu = strtod(optarg, &end);
                        if (*end || q.max_cpu < 0)
                                return cli_usage_error(cmd, usage,
                                                       "--cpu %s: give cores (\"4\", \"0.5\")",
                                                       optarg);
                        break;
                case OPT_MEMORY:
                        if (parse_size(optarg, &q.max_memory_bytes) < 0)
                                return cli_usage_error(
                                        cmd, usage, "--memory %s: give bytes or e.g. 8Gi", optarg);
                        break;
                case OPT_VOLUME_BYTES:
                        if (parse_size(optarg, &q.max_volume_bytes) < 0)
                                return cli_usage_error(cmd, usage,
                                                       "--volume-bytes %s: give bytes or e.g. "
                                                       "100Gi",
                                                       optarg);
                        break;
                case OPT_JSON:
                        json = true;
                        break;
                default:
                        return c == CLI_GETOPT_HELP ? CLI_EXIT_OK : CLI_EXIT_USAGE;
                }
        }
        if (argc - optind != 1)
                return cli_usage_error(cmd, usage, "want exactly one environment NAME");
        q.environment = argv[optind];
        Warren__V1__SetQuotaRequest req = WARREN__V1__SET_QUOTA_REQUEST__INIT;
        req.quota = &q;
        Warren__V1__Quota *resp = NULL;
        int rc = cli_call(ctx, "/warren.v1.Identity/SetQuota", &req.base,
                          &warren__v1__quota__descriptor, (ProtobufCMessage **) &resp);
        if (rc != CLI_EXIT_OK)
                return rc;
        print_quota(resp, json);
        protobuf_c_message_free_unpacked(&resp->base, NULL);
        return CLI_EXIT_OK;
}

int cli_cmd_env(struct cli_ctx *ctx, int argc, char **argv) {
        static const struct cli_cmd cmds[] = {
                {"whoami", "[--json]", "the caller's subject, environment and role", env_whoami},
                {"quota", "[NAME] [--json]", "an environment's quotas", env_quota},
                {"set-quota",
                 "NAME [--sandboxes N] [--cpu C] [--memory SIZE] [--volume-bytes SIZE]",
                 "set an environment's quotas (operator only)", env_set_quota},
        };
        return cli_dispatch(ctx, "env", cmds, ELEMENTSOF(cmds), argc - 1, argv + 1);
}
