/* SPDX-License-Identifier: Apache-2.0 */
/* warren sandbox pause|resume|snapshot|fork, and the --ssh value of
 * sandbox creation. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "warren/v1/images.pb-c.h"

static int pause_or_resume(struct cli_ctx *ctx, int argc, char **argv, bool on) {
        static const struct option longopts[] = {CLI_COMMON_LONGOPTS, {}};
        const char *cmd = on ? "sandbox pause" : "sandbox resume", *usage = "ID|NAME...";
        int c;
        while ((c = cli_getopt(ctx, cmd, usage, argc, argv, "h", longopts)) != -1)
                return c == CLI_GETOPT_HELP ? CLI_EXIT_OK : CLI_EXIT_USAGE;
        if (optind >= argc)
                return cli_usage_error(cmd, usage, "missing ID|NAME");
        int rc = CLI_EXIT_OK;
        for (int i = optind; i < argc; i++) {
                Warren__V1__Sandbox *sb = NULL;
                int r;
                if (on) {
                        Warren__V1__PauseSandboxRequest req =
                                WARREN__V1__PAUSE_SANDBOX_REQUEST__INIT;
                        CLI_SET_SANDBOX_KEY(req, WARREN__V1__PAUSE_SANDBOX_REQUEST, argv[i]);
                        r = cli_call(ctx, "/warren.v1.Sandboxes/PauseSandbox", &req.base,
                                     &warren__v1__sandbox__descriptor, (ProtobufCMessage **) &sb);
                } else {
                        Warren__V1__ResumeSandboxRequest req =
                                WARREN__V1__RESUME_SANDBOX_REQUEST__INIT;
                        CLI_SET_SANDBOX_KEY(req, WARREN__V1__RESUME_SANDBOX_REQUEST, argv[i]);
                        r = cli_call(ctx, "/warren.v1.Sandboxes/ResumeSandbox", &req.base,
                                     &warren__v1__sandbox__descriptor, (ProtobufCMessage **) &sb);
                }
                if (r != CLI_EXIT_OK) {
                        rc = r;
                        continue;
                }
                printf("%s\n", sb->id);
                protobuf_c_message_free_unpacked(&sb->base, NULL);
        }
        return rc;
}

int cli_sandbox_pause(struct cli_ctx *ctx, int argc, char **argv) {
        return pause_or_resume(ctx, argc, argv, true);
}

int cli_sandbox_resume(struct cli_ctx *ctx, int argc, char **argv) {
        return pause_or_resume(ctx, argc, argv, false);
}

int cli_sandbox_snapshot(struct cli_ctx *ctx, int argc, char **argv) {
        enum { OPT_NAME = CLI_OPT_FIRST_LOCAL, OPT_JSON };
        static const struct option longopts[] = {{"name", required_argument, NULL, OPT_NAME},
                                                 {"json", no_argument, NULL, OPT_JSON},
                                                 CLI_COMMON_LONGOPTS,
                                                 {}};
        const char *cmd = "sandbox snapshot", *usage = "ID|NAME [--name IMAGE] [--json]";
        const char *name = NULL;
        bool json = false;
        int c;
        while ((c = cli_getopt(ctx, cmd, usage, argc, argv, "h", longopts)) != -1) {
                if (c == OPT_NAME)
                        name = optarg;
                else if (c == OPT_JSON)
                        json = true;
                else
                        return c == CLI_GETOPT_HELP ? CLI_EXIT_OK : CLI_EXIT_USAGE;
        }
        if (argc - optind != 1)
                return cli_usage_error(cmd, usage,
                                       argc == optind ? "missing ID|NAME" : "too many arguments");
        Warren__V1__SnapshotSandboxRequest req = WARREN__V1__SNAPSHOT_SANDBOX_REQUEST__INIT;
        CLI_SET_SANDBOX_KEY(req, WARREN__V1__SNAPSHOT_SANDBOX_REQUEST, argv[optind]);
        if (name)
                req.image_name = (char *) name;
        Warren__V1__Image *img = NULL;
        int rc = cli_call(ctx, "/warren.v1.Sandboxes/SnapshotSandbox", &req.base,
                          &warren__v1__image__descriptor, (ProtobufCMessage **) &img);
        if (rc != CLI_EXIT_OK)
                return rc;
        if (json)
                cli_json_print(cli_json_from_message(&img->base));
        else
                printf("%s\n", img->id);
        protobuf_c_message_free_unpacked(&img->base, NULL);
        return CLI_EXIT_OK;
}

int cli_sandbox_fork(struct cli_ctx *ctx, int argc, char **argv) {
        enum { OPT_JSON = CLI_OPT_FIRST_LOCAL };
        static const struct option longopts[] = {{"count", required_argument, NULL, 'n'},
                                                 {"json", no_argument, NULL, OPT_JSON},
                                                 CLI_COMMON_LONGOPTS,
                                                 {}};
        const char *cmd = "sandbox fork", *usage = "ID|NAME [-n COUNT] [--json]";
        unsigned long count = 1;
        bool json = false;
        int c;
        while ((c = cli_getopt(ctx, cmd, usage, argc, argv, "hn:", longopts)) != -1) {
                if (c == 'n') {
                        char *end;
                        count = strtoul(optarg, &end, 10);
                        if (!*optarg || *end || count < 1 || count > 16)
                                return cli_usage_error(cmd, usage, "-n wants 1-16, got '%s'",
                                                       optarg);
                } else if (c == OPT_JSON) {
                        json = true;
                } else {
                        return c == CLI_GETOPT_HELP ? CLI_EXIT_OK : CLI_EXIT_USAGE;
                }
        }
        if (argc - optind != 1)
                return cli_usage_error(cmd, usage,
                                       argc == optind ? "missing ID|NAME" : "too many arguments");
        Warren__V1__ForkSandboxRequest req = WARREN__V1__FORK_SANDBOX_REQUEST__INIT;
        CLI_SET_SANDBOX_KEY(req, WARREN__V1__FORK_SANDBOX_REQUEST, argv[optind]);
        req.count = (uint32_t) count;
        Warren__V1__ForkSandboxResponse *resp = NULL;
        int rc = cli_call(ctx, "/warren.v1.Sandboxes/ForkSandbox", &req.base,
                          &warren__v1__fork_sandbox_response__descriptor,
                          (ProtobufCMessage **) &resp);
        if (rc != CLI_EXIT_OK)
                return rc;
        if (json)
                cli_json_print(cli_json_from_message(&resp->base));
        else
                for (size_t i = 0; i < resp->n_sandboxes; i++)
                        printf("%s\n", resp->sandboxes[i]->id);
        protobuf_c_message_free_unpacked(&resp->base, NULL);
        return CLI_EXIT_OK;
}

/* --- --ssh ALIAS=[USER@]HOST[:PORT],secret=NAME[,host-key=KEY]... --- */

int cli_parse_ssh(const char *arg, Warren__V1__CreateSandboxRequest__ManagedSshEntry **ret) {
        char *s = cli_strdup(arg);
        char *eq = strchr(s, '=');
        if (!eq || eq == s) {
                fprintf(stderr, "warren: --ssh: want ALIAS=[USER@]HOST[:PORT],secret=NAME\n");
                return -EINVAL;
        }
        *eq = '\0';
        Warren__V1__CreateSandboxRequest__ManagedSshEntry *m = cli_alloc(sizeof(*m));
        warren__v1__create_sandbox_request__managed_ssh_entry__init(m);
        Warren__V1__SshDest *d = cli_alloc(sizeof(*d));
        warren__v1__ssh_dest__init(d);
        m->key = s;
        m->value = d;
        char *rest = eq + 1;
        char *comma = strchr(rest, ',');
        if (comma)
                *comma = '\0';
        /* [USER@]HOST[:PORT] ([v6]:port for IPv6) */
        char *at = strchr(rest, '@');
        if (at) {
                *at = '\0';
                d->username = rest;
                rest = at + 1;
        }
        char *port = NULL;
        if (*rest == '[') {
                char *rb = strchr(rest, ']');
                if (!rb) {
                        fprintf(stderr, "warren: --ssh %s: unclosed '['\n", m->key);
                        return -EINVAL;
                }
                *rb = '\0';
                port = rb[1] == ':' ? rb + 2 : NULL;
                rest++;
        } else if ((port = strrchr(rest, ':'))) {
                *port++ = '\0';
        }
        d->host = rest;
        if (port) {
                char *end;
                unsigned long p = strtoul(port, &end, 10);
                if (!*port || *end || p == 0 || p > 65535) {
                        fprintf(stderr, "warren: --ssh %s: bad port '%s'\n", m->key, port);
                        return -EINVAL;
                }
                d->port = (uint32_t) p;
        }
        while (comma) {
                char *opt = comma + 1;
                comma = strchr(opt, ',');
                if (comma)
                        *comma = '\0';
                if (strncmp(opt, "secret=", 7) == 0) {
                        d->private_key_secret = opt + 7;
                } else if (strncmp(opt, "host-key=", 9) == 0) {
                        cli_push((void ***) &d->host_keys, &d->n_host_keys, opt + 9);
                } else {
                        fprintf(stderr,
                                "warren: --ssh %s: unknown part '%s' (want secret=NAME or "
                                "host-key=KEY)\n",
                                m->key, opt);
                        return -EINVAL;
                }
        }
        if (!d->private_key_secret[0]) {
                fprintf(stderr, "warren: --ssh %s: missing secret=NAME (the stored private key)\n",
                        m->key);
                return -EINVAL;
        }
        *ret = m;
        return 0;
}
