/* SPDX-License-Identifier: Apache-2.0 */
/* warren sandbox ls|create|get|rm, and the CreateSandbox request builder
 * that `warren run` shares. */
#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "cli.h"
#include "warren/v1/secrets.pb-c.h"

#define STATUS_PREFIX "SANDBOX_STATUS_"

/* "sb-" + 16 hex digits is an id; anything else is a name. */
bool cli_is_sandbox_id(const char *s) {
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
        case CLI_OPT_DISK:
                cr->resources.disk = cli_strdup(arg);
                return 1;
        case CLI_OPT_PIDS: {
                char *end;
                unsigned long n = strtoul(arg, &end, 10);
                if (!*arg || *end || n == 0 || n > 4194304)
                        return -cli_usage_error(cmd, usage,
                                                "--pids wants a number of processes "
                                                "(1-4194304), got '%s'",
                                                arg);
                cr->resources.pids = (uint32_t) n;
                return 1;
        }
        case CLI_OPT_SSH: {
                Warren__V1__CreateSandboxRequest__ManagedSshEntry *m;
                if (cli_parse_ssh(arg, &m) < 0)
                        return -cli_usage_error(cmd, usage, "--ssh %s: see above", arg);
                cli_push((void ***) &r->managed_ssh, &r->n_managed_ssh, m);
                return 1;
        }
        case CLI_OPT_CREDENTIAL: {
                /* HOST[,HOST...]=SECRET: the stored secret's placeholder is
                 * substituted in intercepted requests to those hosts */
                if (cli_parse_kv(arg, &k, &v) < 0 || !*k || !*v) {
                        cli_usage_error(cmd, usage,
                                        "--credential wants HOST[,HOST...]=SECRET, got '%s'", arg);
                        return -CLI_EXIT_USAGE;
                }
                Warren__V1__HostCredential *hc = cli_alloc(sizeof(*hc));
                warren__v1__host_credential__init(hc);
                for (char *save = NULL, *h = strtok_r(k, ",", &save); h;
                     h = strtok_r(NULL, ",", &save))
                        push_string(&hc->hosts, &hc->n_hosts, h);
                Warren__V1__SecretRef *s = cli_alloc(sizeof(*s));
                warren__v1__secret_ref__init(s);
                s->source_case = WARREN__V1__SECRET_REF__SOURCE_NAME;
                s->name = v;
                hc->secret = s;
                cli_push((void ***) &r->credentials, &r->n_credentials, hc);
                return 1;
        }
        case CLI_OPT_LIFETIME:
                r->lifetime = cli_strdup(arg);
                return 1;
        case CLI_OPT_HOSTNAME:
                r->hostname = cli_strdup(arg);
                return 1;
        case CLI_OPT_BLOCK_NETWORK: /* loopback only */
                r->block_network = true;
                return 1;
        case CLI_OPT_JOURNAL: /* journal every exec */
                r->journal_execs = true;
                return 1;
        case CLI_OPT_IDENTITY: /* a workload identity token file (docs/security.md) */
                r->identity = true;
                return 1;
        case CLI_OPT_HOST:
        case CLI_OPT_ROUTE:
        case CLI_OPT_DENY_ROUTE: {
                char err[512];
                int rc = c == CLI_OPT_HOST ? cli_policy_add_host(cr, arg, err, sizeof(err))
                                           : cli_policy_add_route(cr, c == CLI_OPT_DENY_ROUTE, arg,
                                                                  err, sizeof(err));
                if (rc < 0) {
                        cli_usage_error(cmd, usage, "%s", err);
                        return -CLI_EXIT_USAGE;
                }
                cr->have_policy = true;
                return 1;
        }
        case CLI_OPT_LEARN_EGRESS:
                cr->policy.learn = true;
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
        if (cr->resources.cpu[0] || cr->resources.memory[0] || cr->resources.disk[0] ||
            cr->resources.pids)
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
        CLI_SET_SANDBOX_KEY(req, WARREN__V1__TERMINATE_SANDBOX_REQUEST, key);
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

enum {
        OPT_JSON = CLI_OPT_FIRST_LOCAL,
        OPT_STATUS,
        OPT_TAG_FILTER,
        OPT_GRACE,
        OPT_NAME_FILTER,
        OPT_FOLLOW,
        OPT_SUGGEST,
        OPT_LIMIT,
        OPT_INTERVAL,
};

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
        if (s->resources && (s->resources->cpu[0] || s->resources->memory[0] ||
                             s->resources->disk[0] || s->resources->pids)) {
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
        printf("Egress:      %s\n", s->egress_enforced
                                            ? "policy enforced (checked at create)"
                                            : "not enforced (no policy, or not checked)");
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
        CLI_SET_SANDBOX_KEY(req, WARREN__V1__GET_SANDBOX_REQUEST, key);
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

/* --- sandbox egress --- */

static int list_events(struct cli_ctx *ctx, const char *key, uint32_t limit, uint64_t after,
                       Warren__V1__ListNetworkEventsResponse **ret) {
        Warren__V1__ListNetworkEventsRequest req = WARREN__V1__LIST_NETWORK_EVENTS_REQUEST__INIT;
        req.sandbox = (char *) key;
        req.limit = limit;
        req.after_seq = after;
        return cli_call(ctx, "/warren.v1.Sandboxes/ListNetworkEvents", &req.base,
                        &warren__v1__list_network_events_response__descriptor,
                        (ProtobufCMessage **) ret);
}

#define EVENT_COLUMNS 9
static const char *const event_headers[EVENT_COLUMNS] = {
        "TIME", "VERDICT", "KIND", "HOST", "DIALED", "RULE", "REASON", "UP", "DOWN"};

/* The cells of one event; bufs holds the formatted ones. */
static void event_row(const Warren__V1__NetworkEvent *e, const char *row[EVENT_COLUMNS],
                      char bufs[3][32]) {
        row[0] = cli_format_time(e->at ? e->at->unix_nanos : 0, bufs[0]);
        row[1] = e->verdict;
        row[2] = e->kind;
        row[3] = e->host[0] ? e->host : e->sni;
        row[4] = e->dialed[0] ? e->dialed : e->original_dst;
        row[5] = e->rule;
        row[6] = e->reason;
        row[7] = cli_format_size(e->bytes_out, bufs[1]);
        row[8] = cli_format_size(e->bytes_in, bufs[2]);
}

static void print_event_line(const Warren__V1__NetworkEvent *e) {
        const char *row[EVENT_COLUMNS];
        char bufs[3][32];
        event_row(e, row, bufs);
        for (size_t i = 0; i < EVENT_COLUMNS; i++)
                if (!row[i] || !row[i][0])
                        row[i] = "-";
        printf("%-19s  %-7s  %-4s  %-30s  %-22s  %-24s  %-24s  %9s  %9s\n", row[0], row[1], row[2],
               row[3], row[4], row[5], row[6], row[7], row[8]);
        fflush(stdout);
}

/* --- the suggested policy (NetworkPolicy.suggest of the SDK) --- */

struct suggest_route {
        int family;
        unsigned char addr[16];
        uint32_t *ports;
        size_t n_ports;
};

struct suggestion {
        char **hosts;
        size_t n_hosts;
        struct suggest_route *routes;
        size_t n_routes;
};

static int cmp_str(const void *a, const void *b) {
        return strcmp(*(char *const *) a, *(char *const *) b);
}

static int cmp_u32(const void *a, const void *b) {
        uint32_t x = *(const uint32_t *) a, y = *(const uint32_t *) b;
        return x < y ? -1 : x > y;
}

static int cmp_route(const void *a, const void *b) {
        const struct suggest_route *x = a, *y = b;
        if (x->family != y->family)
                return x->family == AF_INET ? -1 : 1;
        return memcmp(x->addr, y->addr, x->family == AF_INET ? 4 : 16);
}

static void suggest_add(struct suggestion *sg, const Warren__V1__NetworkEvent *e) {
        if (strcmp(e->verdict, "allow") != 0 || strcmp(e->kind, "dns") == 0)
                return;
        char *host = cli_strdup(e->host[0] ? e->host : e->sni);
        for (char *p = host; *p; p++)
                *p = (char) tolower((unsigned char) *p);
        size_t hl = strlen(host);
        while (hl > 0 && host[hl - 1] == '.')
                host[--hl] = '\0';
        unsigned char buf[16];
        char *bare = cli_strdup(host);
        size_t bl = strlen(bare);
        if (bl >= 2 && bare[0] == '[' && bare[bl - 1] == ']') {
                bare[bl - 1] = '\0';
                bare++;
        }
        if (host[0] && inet_pton(AF_INET, bare, buf) != 1 && inet_pton(AF_INET6, bare, buf) != 1) {
                for (size_t i = 0; i < sg->n_hosts; i++)
                        if (strcmp(sg->hosts[i], host) == 0)
                                return;
                cli_push((void ***) &sg->hosts, &sg->n_hosts, host);
                return;
        }
        /* No hostname: the dialed address and port. */
        char *dst = cli_strdup(e->dialed[0] ? e->dialed : e->original_dst);
        char *colon = strrchr(dst, ':');
        if (!colon || !colon[1])
                return;
        *colon = '\0';
        const char *port_s = colon + 1;
        for (const char *p = port_s; *p; p++)
                if (!isdigit((unsigned char) *p))
                        return;
        unsigned long port = strtoul(port_s, NULL, 10);
        char *addr = dst;
        size_t al = strlen(addr);
        if (al >= 2 && addr[0] == '[' && addr[al - 1] == ']') {
                addr[al - 1] = '\0';
                addr++;
        }
        struct suggest_route r = {0};
        if (inet_pton(AF_INET, addr, r.addr) == 1)
                r.family = AF_INET;
        else if (inet_pton(AF_INET6, addr, r.addr) == 1)
                r.family = AF_INET6;
        else
                return;
        struct suggest_route *found = NULL;
        for (size_t i = 0; i < sg->n_routes && !found; i++)
                if (cmp_route(&sg->routes[i], &r) == 0)
                        found = &sg->routes[i];
        if (!found) {
                struct suggest_route *a = cli_alloc((sg->n_routes + 1) * sizeof(*a));
                if (sg->n_routes)
                        memcpy(a, sg->routes, sg->n_routes * sizeof(*a));
                a[sg->n_routes] = r;
                sg->routes = a;
                found = &a[sg->n_routes++];
        }
        for (size_t i = 0; i < found->n_ports; i++)
                if (found->ports[i] == port)
                        return;
        uint32_t *p = cli_alloc((found->n_ports + 1) * sizeof(*p));
        if (found->n_ports)
                memcpy(p, found->ports, found->n_ports * sizeof(*p));
        p[found->n_ports++] = (uint32_t) port;
        found->ports = p;
}

static void route_cidr(const struct suggest_route *r, char out[64]) {
        char a[INET6_ADDRSTRLEN];
        inet_ntop(r->family, r->addr, a, sizeof(a));
        snprintf(out, 64, "%s/%d", a, r->family == AF_INET ? 32 : 128);
}

/* Python string literal as the SDK's repr writes it. */
static void print_pystr(FILE *f, const char *s) {
        fputc('"', f);
        for (; *s; s++) {
                if (*s == '"' || *s == '\\')
                        fputc('\\', f);
                fputc(*s, f);
        }
        fputc('"', f);
}

static char *suggestion_python(const struct suggestion *sg) {
        char *out = NULL;
        size_t len = 0;
        FILE *f = open_memstream(&out, &len);
        if (!f)
                abort();
        fputs("NetworkPolicy(allowed_hosts=[", f);
        for (size_t i = 0; i < sg->n_hosts; i++) {
                if (i)
                        fputs(", ", f);
                print_pystr(f, sg->hosts[i]);
        }
        fputs("]", f);
        if (sg->n_routes) {
                fputs(", allowed_routes=[", f);
                for (size_t i = 0; i < sg->n_routes; i++) {
                        char cidr[64];
                        route_cidr(&sg->routes[i], cidr);
                        fprintf(f, "%sNetworkPolicy.Route(\"%s\", ports=[", i ? ", " : "", cidr);
                        for (size_t j = 0; j < sg->routes[i].n_ports; j++)
                                fprintf(f, "%s(%u, %u)", j ? ", " : "", sg->routes[i].ports[j],
                                        sg->routes[i].ports[j]);
                        fputs("])", f);
                }
                fputs("]", f);
        }
        fputs(")", f);
        fclose(f);
        char *r = cli_strdup(out);
        free(out);
        return r;
}

/* The flags, as argv words. */
static json_t *suggestion_flags(const struct suggestion *sg) {
        json_t *a = json_array();
        for (size_t i = 0; i < sg->n_hosts; i++) {
                json_array_append_new(a, json_string("--host"));
                json_array_append_new(a, json_string(sg->hosts[i]));
        }
        for (size_t i = 0; i < sg->n_routes; i++) {
                char cidr[64], word[64 + 7 * 64];
                route_cidr(&sg->routes[i], cidr);
                size_t n = (size_t) snprintf(word, sizeof(word), "%s", cidr);
                for (size_t j = 0; j < sg->routes[i].n_ports && n < sizeof(word); j++)
                        n += (size_t) snprintf(word + n, sizeof(word) - n, "%c%u", j ? ',' : ':',
                                               sg->routes[i].ports[j]);
                json_array_append_new(a, json_string("--route"));
                json_array_append_new(a, json_string(word));
        }
        return a;
}

/* A word for a POSIX shell: bare when safe, else single-quoted. */
static void print_shell_word(const char *s) {
        bool safe = s[0] != '\0';
        for (const char *p = s; *p; p++)
                safe &= isalnum((unsigned char) *p) || strchr("-_./:,=@%+", *p);
        if (safe) {
                fputs(s, stdout);
                return;
        }
        putchar('\'');
        for (const char *p = s; *p; p++) {
                if (*p == '\'')
                        fputs("'\\''", stdout);
                else
                        putchar(*p);
        }
        putchar('\'');
}

static int print_suggestion(struct suggestion *sg, bool json) {
        if (sg->n_hosts)
                qsort(sg->hosts, sg->n_hosts, sizeof(*sg->hosts), cmp_str);
        for (size_t i = 0; i < sg->n_routes; i++)
                if (sg->routes[i].n_ports)
                        qsort(sg->routes[i].ports, sg->routes[i].n_ports, sizeof(uint32_t),
                              cmp_u32);
        if (sg->n_routes)
                qsort(sg->routes, sg->n_routes, sizeof(*sg->routes), cmp_route);
        char *python = suggestion_python(sg);
        json_t *flags = suggestion_flags(sg);
        if (json) {
                json_t *hosts = json_array(), *routes = json_array();
                for (size_t i = 0; i < sg->n_hosts; i++)
                        json_array_append_new(hosts, json_string(sg->hosts[i]));
                for (size_t i = 0; i < sg->n_routes; i++) {
                        char cidr[64];
                        route_cidr(&sg->routes[i], cidr);
                        json_t *ports = json_array();
                        for (size_t j = 0; j < sg->routes[i].n_ports; j++)
                                json_array_append_new(
                                        ports, json_pack("{s:I,s:I}", "start",
                                                         (json_int_t) sg->routes[i].ports[j], "end",
                                                         (json_int_t) sg->routes[i].ports[j]));
                        json_array_append_new(routes,
                                              json_pack("{s:s,s:o}", "cidr", cidr, "ports", ports));
                }
                cli_json_print(json_pack("{s:o,s:o,s:s,s:o}", "allowed_hosts", hosts,
                                         "allowed_routes", routes, "python", python, "flags",
                                         flags));
                return CLI_EXIT_OK;
        }
        printf("# Python (warren SDK):\n%s\n", python);
        printf("# CLI flags (warren sandbox create / warren run):\n");
        size_t n = json_array_size(flags);
        for (size_t i = 0; i < n; i++) {
                if (i)
                        putchar(' ');
                print_shell_word(json_string_value(json_array_get(flags, i)));
        }
        if (n == 0)
                printf("# (nothing was allowed: an empty policy, which no flag expresses)");
        putchar('\n');
        json_decref(flags);
        return CLI_EXIT_OK;
}

static int sandbox_egress(struct cli_ctx *ctx, int argc, char **argv) {
        static const struct option longopts[] = {
                {"json", no_argument, NULL, OPT_JSON},
                {"follow", no_argument, NULL, OPT_FOLLOW},
                {"suggest-policy", no_argument, NULL, OPT_SUGGEST},
                {"limit", required_argument, NULL, OPT_LIMIT},
                {"interval", required_argument, NULL, OPT_INTERVAL},
                CLI_COMMON_LONGOPTS,
                {}};
        const char *cmd = "sandbox egress",
                   *usage = "ID|NAME [--follow [--interval S]] [--suggest-policy] [--json] "
                            "[--limit N]";
        bool json = false, follow = false, suggest = false;
        double interval = 0.5;
        uint32_t limit = 0;
        int c;
        while ((c = cli_getopt(ctx, cmd, usage, argc, argv, "hf", longopts)) != -1) {
                switch (c) {
                case OPT_JSON:
                        json = true;
                        break;
                case 'f':
                case OPT_FOLLOW:
                        follow = true;
                        break;
                case OPT_SUGGEST:
                        suggest = true;
                        break;
                case OPT_LIMIT: {
                        char *end = NULL;
                        errno = 0;
                        unsigned long v = strtoul(optarg, &end, 10);
                        if (!isdigit((unsigned char) optarg[0]) || *end || errno || v > UINT32_MAX)
                                return cli_usage_error(cmd, usage,
                                                       "--limit wants a number, got '%s'", optarg);
                        limit = (uint32_t) v;
                        break;
                }
                case OPT_INTERVAL:
                        if (cli_parse_seconds(optarg, &interval) < 0 || interval <= 0)
                                return cli_usage_error(
                                        cmd, usage, "--interval wants seconds, got '%s'", optarg);
                        break;
                case CLI_GETOPT_HELP:
                        return CLI_EXIT_OK;
                default:
                        return CLI_EXIT_USAGE;
                }
        }
        if (argc - optind != 1)
                return cli_usage_error(cmd, usage,
                                       argc == optind ? "missing ID|NAME" : "too many arguments");
        if (follow && suggest)
                return cli_usage_error(cmd, usage,
                                       "--follow and --suggest-policy do not go together");
        const char *key = argv[optind];

        if (!follow) {
                Warren__V1__ListNetworkEventsResponse *resp = NULL;
                int rc = list_events(ctx, key, limit, 0, &resp);
                if (rc != CLI_EXIT_OK)
                        return rc;
                if (suggest) {
                        struct suggestion sg = {0};
                        for (size_t i = 0; i < resp->n_events; i++)
                                suggest_add(&sg, resp->events[i]);
                        protobuf_c_message_free_unpacked(&resp->base, NULL);
                        return print_suggestion(&sg, json);
                }
                if (json) {
                        cli_json_print_list((ProtobufCMessage *const *) resp->events,
                                            resp->n_events);
                } else {
                        struct cli_table *t = cli_table_new(EVENT_COLUMNS, event_headers);
                        for (size_t i = 0; i < resp->n_events; i++) {
                                const char *row[EVENT_COLUMNS];
                                char bufs[3][32];
                                event_row(resp->events[i], row, bufs);
                                cli_table_add(t, row);
                        }
                        cli_table_print(t);
                }
                protobuf_c_message_free_unpacked(&resp->base, NULL);
                return CLI_EXIT_OK;
        }

        /* --follow: poll with after_seq until the sandbox has ended (its
         * last events printed) or Ctrl-C. One line (one JSON object with
         * --json) per event. */
        if (!json)
                printf("%-19s  %-7s  %-4s  %-30s  %-22s  %-24s  %-24s  %9s  %9s\n", "TIME",
                       "VERDICT", "KIND", "HOST", "DIALED", "RULE", "REASON", "UP", "DOWN");
        uint64_t after = 0;
        uint32_t first_limit = limit;
        for (;;) {
                Warren__V1__GetSandboxRequest greq = WARREN__V1__GET_SANDBOX_REQUEST__INIT;
                CLI_SET_SANDBOX_KEY(greq, WARREN__V1__GET_SANDBOX_REQUEST, key);
                Warren__V1__Sandbox *sb = NULL;
                int rc = cli_call(ctx, "/warren.v1.Sandboxes/GetSandbox", &greq.base,
                                  &warren__v1__sandbox__descriptor, (ProtobufCMessage **) &sb);
                if (rc != CLI_EXIT_OK)
                        return rc;
                bool ended = sb->status == WARREN__V1__SANDBOX_STATUS__SANDBOX_STATUS_TERMINATED ||
                             sb->status == WARREN__V1__SANDBOX_STATUS__SANDBOX_STATUS_FAILED;
                protobuf_c_message_free_unpacked(&sb->base, NULL);
                Warren__V1__ListNetworkEventsResponse *resp = NULL;
                rc = list_events(ctx, key, first_limit, after, &resp);
                if (rc != CLI_EXIT_OK)
                        return rc;
                first_limit = 0; /* --limit N: only the newest N of the backlog */
                for (size_t i = 0; i < resp->n_events; i++) {
                        Warren__V1__NetworkEvent *e = resp->events[i];
                        if (e->seq > after)
                                after = e->seq;
                        if (json) {
                                json_t *j = cli_json_from_message(&e->base);
                                char *s = json_dumps(j, JSON_COMPACT);
                                if (s)
                                        printf("%s\n", s);
                                free(s);
                                json_decref(j);
                                fflush(stdout);
                        } else {
                                print_event_line(e);
                        }
                }
                if (resp->last_seq > after)
                        after = resp->last_seq;
                protobuf_c_message_free_unpacked(&resp->base, NULL);
                if (ended)
                        return CLI_EXIT_OK;
                struct timespec ts = {(time_t) interval,
                                      (long) ((interval - (double) (time_t) interval) * 1e9)};
                while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
                        ;
        }
}

int cli_cmd_sandbox(struct cli_ctx *ctx, int argc, char **argv) {
        static const struct cli_cmd cmds[] = {
                {"ls", "[--json] [--status S] [--tag K=V]", "list sandboxes", sandbox_ls},
                {"create", "-i IMAGE [options] [-- ENTRYPOINT...]",
                 "create and start a sandbox, print its id", sandbox_create},
                {"get", "ID|NAME [--json]", "show one sandbox", sandbox_get},
                {"rm", "[--grace S] ID|NAME...", "terminate sandboxes", sandbox_rm},
                {"egress", "ID|NAME [--follow] [--suggest-policy] [--json] [--limit N]",
                 "show a sandbox's egress decisions, or the policy they suggest", sandbox_egress},
                {"pause", "ID|NAME...", "freeze every process of sandboxes", cli_sandbox_pause},
                {"resume", "ID|NAME...", "thaw paused sandboxes", cli_sandbox_resume},
                {"snapshot", "ID|NAME [--name IMAGE] [--json]",
                 "the sandbox's files as a new image, print its id", cli_sandbox_snapshot},
                {"fork", "ID|NAME [-n COUNT] [--json]",
                 "snapshot, then COUNT new sandboxes from it; print their ids", cli_sandbox_fork},
                {"changes", "ID|NAME EXEC_ID [--json]",
                 "what a journaled exec created, modified, deleted or chmod'ed",
                 cli_sandbox_changes},
                {"rollback", "ID|NAME EXEC_ID [--force] [--json]",
                 "put back what a journaled exec changed", cli_sandbox_rollback},
        };
        return cli_dispatch(ctx, "sandbox", cmds, ELEMENTSOF(cmds), argc - 1, argv + 1);
}
