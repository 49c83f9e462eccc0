/* SPDX-License-Identifier: Apache-2.0 */
/* warren sandbox ls|create|get|rm, and the CreateSandbox request builder
 * that `warren run` shares. */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "cli.h"
#include "warren/v1/secrets.pb-c.h"

#define STATUS_PREFIX "SANDBOX_STATUS_"

/* "sb-" + 16 hex digits is an id; anything else is a name. */
static bool looks_like_id(const char *s) {
        if (strncmp(s, "sb-", 3) != 0 || strlen(s) != 19)
                return false;
        for (const char *p = s + 3; *p; p++)
                if (!isxdigit((unsigned char) *p))
                        return false;
        return true;
}

static const char *status_name(int v) {
        return cli_enum_name(&warren__v1__sandbox_status__descriptor, v, STATUS_PREFIX);
}

/* --- create options --- */

void cli_create_init(struct cli_create *cr) {
        *cr = (struct cli_create){0};
        warren__v1__create_sandbox_request__init(&cr->req);
        warren__v1__image_spec__init(&cr->image);
        warren__v1__resources__init(&cr->resources);
        warren__v1__network_policy__init(&cr->policy);
}

static void push_string(char ***arr, size_t *n, const char *s) {
        cli_push((void ***) arr, n, cli_strdup(s));
}

int cli_create_opt(struct cli_create *cr, int c, const char *arg, const char *cmd,
                   const char *usage) {
        Warren__V1__CreateSandboxRequest *r = &cr->req;
        char *k, *v;
        switch (c) {
        case 'n':
                r->name = cli_strdup(arg);
                return 1;
        case 'w':
                r->workdir = cli_strdup(arg);
                return 1;
        case 'e': {
                if (cli_parse_kv(arg, &k, &v) < 0)
                        goto bad_kv;
                Warren__V1__CreateSandboxRequest__EnvEntry *e = cli_alloc(sizeof(*e));
                warren__v1__create_sandbox_request__env_entry__init(e);
                Warren__V1__EnvValue *ev = cli_alloc(sizeof(*ev));
                warren__v1__env_value__init(ev);
                ev->kind_case = WARREN__V1__ENV_VALUE__KIND_VALUE;
                ev->value = v;
                e->key = k;
                e->value = ev;
                cli_push((void ***) &r->env, &r->n_env, e);
                return 1;
        }
        case CLI_OPT_TAG: {
                if (cli_parse_kv(arg, &k, &v) < 0)
                        goto bad_kv;
                Warren__V1__CreateSandboxRequest__TagsEntry *t = cli_alloc(sizeof(*t));
                warren__v1__create_sandbox_request__tags_entry__init(t);
                t->key = k;
                t->value = v;
                cli_push((void ***) &r->tags, &r->n_tags, t);
                return 1;
        }
        case CLI_OPT_CPU:
                cr->resources.cpu = cli_strdup(arg);
                return 1;
        case CLI_OPT_MEMORY:
                cr->resources.memory = cli_strdup(arg);
                return 1;
        case CLI_OPT_LIFETIME:
                r->lifetime = cli_strdup(arg);
                return 1;
        case CLI_OPT_HOSTNAME:
                r->hostname = cli_strdup(arg);
                return 1;
        case CLI_OPT_BLOCK_NETWORK: /* loopback only */
                r->block_network = true;
                return 1;
        case CLI_OPT_HOST:
                push_string(&cr->policy.allowed_hosts, &cr->policy.n_allowed_hosts, arg);
                cr->have_policy = true;
                return 1;
        case CLI_OPT_DETECT: {
                if (strcmp(arg, "github-pull-requests") != 0) {
                        cli_usage_error(cmd, usage,
                                        "unknown resource detector '%s' (known: "
                                        "github-pull-requests)",
                                        arg);
                        return -CLI_EXIT_USAGE;
                }
                Warren__V1__ResourceDetector *d =
                        cli_alloc((r->n_resource_detectors + 1) * sizeof(*d));
                if (r->n_resource_detectors)
                        memcpy(d, r->resource_detectors, r->n_resource_detectors * sizeof(*d));
                d[r->n_resource_detectors++] =
                        WARREN__V1__RESOURCE_DETECTOR__RESOURCE_DETECTOR_GITHUB_PULL_REQUESTS;
                r->resource_detectors = d;
                return 1;
        }
        case CLI_OPT_ENTRYPOINT:
                push_string(&r->entrypoint, &r->n_entrypoint, arg);
                return 1;
        case CLI_OPT_SECRET: {
                Warren__V1__SecretRef *s = cli_alloc(sizeof(*s));
                warren__v1__secret_ref__init(s);
                s->source_case = WARREN__V1__SECRET_REF__SOURCE_NAME;
                s->name = cli_strdup(arg);
                cli_push((void ***) &r->secrets, &r->n_secrets, s);
                return 1;
        }
        case CLI_OPT_VOLUME: {
                char *spec = cli_strdup(arg);
                char *path = strchr(spec, ':');
                if (!path || path == spec || path[1] != '/') {
                        cli_usage_error(cmd, usage, "--volume wants NAME:/PATH[:ro], got '%s'",
                                        arg);
                        return -CLI_EXIT_USAGE;
                }
                *path++ = '\0';
                Warren__V1__VolumeMount *m = cli_alloc(sizeof(*m));
                warren__v1__volume_mount__init(m);
                char *ro = strrchr(path, ':');
                if (ro && strcmp(ro, ":ro") == 0) {
                        *ro = '\0';
                        m->read_only = true;
                }
                m->volume = spec;
                m->path = path;
                cli_push((void ***) &r->volumes, &r->n_volumes, m);
                return 1;
        }
        default:
                return 0;
        }
bad_kv:
        cli_usage_error(cmd, usage, "expected K=V, got '%s'", arg);
        return -CLI_EXIT_USAGE;
}

void cli_create_finish(struct cli_create *cr, const char *image, char **entrypoint, size_t n) {
        Warren__V1__CreateSandboxRequest *r = &cr->req;
        if (image && image[0]) {
                cr->image.kind_case = WARREN__V1__IMAGE_SPEC__KIND_REF;
                cr->image.ref = cli_strdup(image);
                r->image = &cr->image;
        }
        for (size_t i = 0; i < n; i++)
                push_string(&r->entrypoint, &r->n_entrypoint, entrypoint[i]);
        if (cr->resources.cpu[0] || cr->resources.memory[0])
                r->resources = &cr->resources;
        /* Resource detection watches api.github.com: make sure the policy
         * (when there is one, or creating one) lets it through, as the SDK does. */
        if (r->n_resource_detectors > 0) {
                bool found = false;
                for (size_t i = 0; i < cr->policy.n_allowed_hosts; i++)
                        found |= strcasecmp(cr->policy.allowed_hosts[i], "api.github.com") == 0;
                if (!found)
                        push_string(&cr->policy.allowed_hosts, &cr->policy.n_allowed_hosts,
                                    "api.github.com");
                cr->have_policy = true;
        }
        if (cr->have_policy)
                r->network_policy = &cr->policy;
}

int cli_sandbox_create(struct cli_ctx *ctx, struct cli_create *cr, Warren__V1__Sandbox **ret) {
        return cli_call(ctx, "/warren.v1.Sandboxes/CreateSandbox", &cr->req.base,
                        &warren__v1__sandbox__descriptor, (ProtobufCMessage **) ret);
}

int cli_sandbox_terminate(struct cli_ctx *ctx, const char *key, double grace, bool quiet) {
        Warren__V1__TerminateSandboxRequest req = WARREN__V1__TERMINATE_SANDBOX_REQUEST__INIT;
        if (looks_like_id(key)) {
                req.key_case = WARREN__V1__TERMINATE_SANDBOX_REQUEST__KEY_ID;
                req.id = (char *) key;
        } else {
                req.key_case = WARREN__V1__TERMINATE_SANDBOX_REQUEST__KEY_NAME;
                req.name = (char *) key;
        }
        req.grace_period_seconds = grace;
        Warren__V1__Sandbox *sb = NULL;
        int rc = cli_call(ctx, "/warren.v1.Sandboxes/TerminateSandbox", &req.base,
                          &warren__v1__sandbox__descriptor, (ProtobufCMessage **) &sb);
        if (rc != CLI_EXIT_OK)
                return rc;
        if (!quiet)
                printf("%s\n", sb->id);
        protobuf_c_message_free_unpacked(&sb->base, NULL);
        return CLI_EXIT_OK;
}

/* --- subcommands --- */

enum { OPT_JSON = CLI_OPT_FIRST_LOCAL, OPT_STATUS, OPT_TAG_FILTER, OPT_GRACE, OPT_NAME_FILTER };

static int parse_status(const char *s, Warren__V1__SandboxStatus *ret) {
        char name[64];
        snprintf(name, sizeof(name), "%s%s", STATUS_PREFIX, s);
        for (char *p = name; *p; p++)
                *p = (char) toupper((unsigned char) *p);
        const ProtobufCEnumValue *v = protobuf_c_enum_descriptor_get_value_by_name(
                &warren__v1__sandbox_status__descriptor, name);
        if (!v || v->value == 0)
                return -EINVAL;
        *ret = (Warren__V1__SandboxStatus) v->value;
        return 0;
}

static int sandbox_ls(struct cli_ctx *ctx, int argc, char **argv) {
        static const struct option longopts[] = {{"json", no_argument, NULL, OPT_JSON},
                                                 {"status", required_argument, NULL, OPT_STATUS},
                                                 {"tag", required_argument, NULL, OPT_TAG_FILTER},
                                                 {"name", required_argument, NULL, OPT_NAME_FILTER},
                                                 CLI_COMMON_LONGOPTS,
                                                 {}};
        const char *cmd = "sandbox ls",
                   *usage = "[--json] [--status S]... [--tag K=V]... [--name NAME]";
        Warren__V1__ListSandboxesRequest req = WARREN__V1__LIST_SANDBOXES_REQUEST__INIT;
        bool json = false;
        int c;
        while ((c = cli_getopt(ctx, cmd, usage, argc, argv, "h", longopts)) != -1) {
                char *k, *v;
                switch (c) {
                case OPT_JSON:
                        json = true;
                        break;
                case OPT_NAME_FILTER:
                        req.name = optarg;
                        break;
                case OPT_STATUS: {
                        /* Repeatable and comma-separated. */
                        char *list = cli_strdup(optarg), *save = NULL;
                        for (char *s = strtok_r(list, ",", &save); s;
                             s = strtok_r(NULL, ",", &save)) {
                                Warren__V1__SandboxStatus st;
                                if (parse_status(s, &st) < 0)
                                        return cli_usage_error(
                                                cmd, usage,
                                                "unknown status '%s' (pending, running, "
                                                "terminating, terminated, failed)",
                                                s);
                                Warren__V1__SandboxStatus *a =
                                        cli_alloc((req.n_statuses + 1) * sizeof(*a));
                                if (req.n_statuses)
                                        memcpy(a, req.statuses, req.n_statuses * sizeof(*a));
                                a[req.n_statuses++] = st;
                                req.statuses = a;
                        }
                        break;
                }
                case OPT_TAG_FILTER: {
                        if (cli_parse_kv(optarg, &k, &v) < 0)
                                return cli_usage_error(cmd, usage, "expected K=V, got '%s'",
                                                       optarg);
                        Warren__V1__ListSandboxesRequest__TagsEntry *t = cli_alloc(sizeof(*t));
                        warren__v1__list_sandboxes_request__tags_entry__init(t);
                        t->key = k;
                        t->value = v;
                        cli_push((void ***) &req.tags, &req.n_tags, t);
                        break;
                }
                case CLI_GETOPT_HELP:
                        return CLI_EXIT_OK;
                default:
                        return CLI_EXIT_USAGE;
                }
        }
        if (optind < argc)
                return cli_usage_error(cmd, usage, "unexpected argument '%s'", argv[optind]);

        json_t *all = json ? json_array() : NULL;
        static const char *const headers[] = {"ID", "NAME", "STATUS", "IMAGE", "CREATED"};
        struct cli_table *t = json ? NULL : cli_table_new(5, headers);
        for (;;) {
                Warren__V1__ListSandboxesResponse *resp = NULL;
                int rc = cli_call(ctx, "/warren.v1.Sandboxes/ListSandboxes", &req.base,
                                  &warren__v1__list_sandboxes_response__descriptor,
                                  (ProtobufCMessage **) &resp);
                if (rc != CLI_EXIT_OK) {
                        json_decref(all);
                        return rc;
                }
                for (size_t i = 0; i < resp->n_sandboxes; i++) {
                        Warren__V1__Sandbox *s = resp->sandboxes[i];
                        if (json) {
                                json_array_append_new(all, cli_json_from_message(&s->base));
                                continue;
                        }
                        char tb[32];
                        const char *row[] = {
                                s->id, s->name, status_name(s->status),
                                s->image_ref[0] ? s->image_ref : s->image_id,
                                cli_format_time(s->created_at ? s->created_at->unix_nanos : 0, tb)};
                        cli_table_add(t, row);
                }
                bool more = resp->next_page_token[0] != '\0';
                if (more)
                        req.page_token = cli_strdup(resp->next_page_token);
                protobuf_c_message_free_unpacked(&resp->base, NULL);
                if (!more)
                        break;
        }
        if (json)
                cli_json_print(all);
        else
                cli_table_print(t);
        return CLI_EXIT_OK;
}

static int sandbox_create(struct cli_ctx *ctx, int argc, char **argv) {
        static const struct option longopts[] = {{"image", required_argument, NULL, 'i'},
                                                 {"json", no_argument, NULL, OPT_JSON},
                                                 CLI_CREATE_LONGOPTS,
                                                 CLI_COMMON_LONGOPTS,
                                                 {}};
        const char *cmd = "sandbox create",
                   *usage = "-i IMAGE [--json] " CLI_CREATE_USAGE " [-- ENTRYPOINT...]";
        struct cli_create cr;
        cli_create_init(&cr);
        const char *image = NULL;
        bool json = false;
        int c;
        while ((c = cli_getopt(ctx, cmd, usage, argc, argv, "hi:n:e:w:", longopts)) != -1) {
                if (c == 'i') {
                        image = optarg;
                        continue;
                }
                if (c == OPT_JSON) {
                        json = true;
                        continue;
                }
                if (c == CLI_GETOPT_HELP)
                        return CLI_EXIT_OK;
                if (c < 0)
                        return CLI_EXIT_USAGE;
                int r = cli_create_opt(&cr, c, optarg, cmd, usage);
                if (r < 0)
                        return -r;
                if (r == 0)
                        return CLI_EXIT_USAGE;
        }
        /* Everything after the options (after `--`) is the entrypoint. */
        if (!image)
                return cli_usage_error(cmd, usage, "missing -i IMAGE");
        cli_create_finish(&cr, image, argv + optind, (size_t) (argc - optind));
        Warren__V1__Sandbox *sb = NULL;
        int rc = cli_sandbox_create(ctx, &cr, &sb);
        if (rc != CLI_EXIT_OK)
                return rc;
        if (json)
                cli_json_print(cli_json_from_message(&sb->base));
        else
                printf("%s\n", sb->id);
        protobuf_c_message_free_unpacked(&sb->base, NULL);
        return CLI_EXIT_OK;
}

static void print_sandbox(const Warren__V1__Sandbox *s) {
        char tb[32];
        printf("ID:          %s\n", s->id);
        printf("Name:        %s\n", s->name[0] ? s->name : "-");
        printf("Status:      %s%s%s\n", status_name(s->status), s->status_message[0] ? " — " : "",
               s->status_message);
        printf("Image:       %s%s%s%s\n", s->image_ref[0] ? s->image_ref : "-",
               s->image_id[0] ? " (" : "", s->image_id, s->image_id[0] ? ")" : "");
        printf("Created:     %s\n",
               cli_format_time(s->created_at ? s->created_at->unix_nanos : 0, tb));
        if (s->expires_at && s->expires_at->unix_nanos)
                printf("Expires:     %s\n", cli_format_time(s->expires_at->unix_nanos, tb));
        if (s->terminated_at && s->terminated_at->unix_nanos)
                printf("Terminated:  %s\n", cli_format_time(s->terminated_at->unix_nanos, tb));
        if (s->workdir[0])
                printf("Workdir:     %s\n", s->workdir);
        if (s->resources && (s->resources->cpu[0] || s->resources->memory[0])) {
                printf("Resources:   cpu %s, memory %s",
                       s->resources->cpu[0] ? s->resources->cpu : "default",
                       s->resources->memory[0] ? s->resources->memory : "default");
                if (s->resources->pids)
                        printf(", pids %u", s->resources->pids);
                if (s->resources->disk[0])
                        printf(", disk %s", s->resources->disk);
                printf("\n");
        }
        if (s->usage)
                printf("Usage:       cpu %.2fs, memory %.1f MiB (peak %.1f MiB), pids %u\n",
                       s->usage->cpu_seconds, (double) s->usage->memory_bytes / (1 << 20),
                       (double) s->usage->memory_peak_bytes / (1 << 20), s->usage->pids);
        for (size_t i = 0; i < s->n_tags; i++)
                printf("Tag:         %s=%s\n", s->tags[i]->key, s->tags[i]->value);
        for (size_t i = 0; i < s->n_volumes; i++)
                printf("Volume:      %s at %s%s\n", s->volumes[i]->volume, s->volumes[i]->path,
                       s->volumes[i]->read_only ? " (read-only)" : "");
        for (size_t i = 0; i < s->n_detected_resources; i++)
                printf("Detected:    %s\n", s->detected_resources[i]);
}

static int sandbox_get(struct cli_ctx *ctx, int argc, char **argv) {
        static const struct option longopts[] = {
                {"json", no_argument, NULL, OPT_JSON}, CLI_COMMON_LONGOPTS, {}};
        const char *cmd = "sandbox get", *usage = "ID|NAME [--json]";
        bool json = false;
        int c;
        while ((c = cli_getopt(ctx, cmd, usage, argc, argv, "h", longopts)) != -1) {
                if (c == OPT_JSON)
                        json = true;
                else
                        return c == CLI_GETOPT_HELP ? CLI_EXIT_OK : CLI_EXIT_USAGE;
        }
        if (argc - optind != 1)
                return cli_usage_error(cmd, usage,
                                       argc == optind ? "missing ID|NAME" : "too many arguments");
        const char *key = argv[optind];
        Warren__V1__GetSandboxRequest req = WARREN__V1__GET_SANDBOX_REQUEST__INIT;
        if (looks_like_id(key)) {
                req.key_case = WARREN__V1__GET_SANDBOX_REQUEST__KEY_ID;
                req.id = (char *) key;
        } else {
                req.key_case = WARREN__V1__GET_SANDBOX_REQUEST__KEY_NAME;
                req.name = (char *) key;
        }
        Warren__V1__Sandbox *sb = NULL;
        int rc = cli_call(ctx, "/warren.v1.Sandboxes/GetSandbox", &req.base,
                          &warren__v1__sandbox__descriptor, (ProtobufCMessage **) &sb);
        if (rc != CLI_EXIT_OK)
                return rc;
        if (json)
                cli_json_print(cli_json_from_message(&sb->base));
        else
                print_sandbox(sb);
        protobuf_c_message_free_unpacked(&sb->base, NULL);
        return CLI_EXIT_OK;
}

static int sandbox_rm(struct cli_ctx *ctx, int argc, char **argv) {
        static const struct option longopts[] = {
                {"grace", required_argument, NULL, OPT_GRACE}, CLI_COMMON_LONGOPTS, {}};
        const char *cmd = "sandbox rm", *usage = "[--grace SECONDS] ID|NAME...";
        double grace = 0;
        int c;
        while ((c = cli_getopt(ctx, cmd, usage, argc, argv, "h", longopts)) != -1) {
                if (c == OPT_GRACE) {
                        if (cli_parse_seconds(optarg, &grace) < 0)
                                return cli_usage_error(cmd, usage,
                                                       "--grace wants seconds, got '%s'", optarg);
                } else {
                        return c == CLI_GETOPT_HELP ? CLI_EXIT_OK : CLI_EXIT_USAGE;
                }
        }
        if (optind >= argc)
                return cli_usage_error(cmd, usage, "missing ID|NAME");
        int rc = CLI_EXIT_OK;
        for (int i = optind; i < argc; i++)
                if (cli_sandbox_terminate(ctx, argv[i], grace, false) != CLI_EXIT_OK)
                        rc = CLI_EXIT_FAIL;
        return rc;
}

int cli_cmd_sandbox(struct cli_ctx *ctx, int argc, char **argv) {
        static const struct cli_cmd cmds[] = {
                {"ls", "[--json] [--status S] [--tag K=V]", "list sandboxes", sandbox_ls},
                {"create", "-i IMAGE [options] [-- ENTRYPOINT...]",
                 "create and start a sandbox, print its id", sandbox_create},
                {"get", "ID|NAME [--json]", "show one sandbox", sandbox_get},
                {"rm", "[--grace S] ID|NAME...", "terminate sandboxes", sandbox_rm},
        };
        return cli_dispatch(ctx, "sandbox", cmds, ELEMENTSOF(cmds), argc - 1, argv + 1);
}
