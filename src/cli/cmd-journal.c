/* SPDX-License-Identifier: Apache-2.0 */
/* warren sandbox changes|rollback, and what `warren exec --changes` prints
 * after the process: the change journal (docs/journal.md). */
#include <stdio.h>
#include <string.h>

#include "cli.h"

static const char *kind_name(Warren__V1__ExecFileChangeKind k) {
        switch (k) {
        case WARREN__V1__EXEC_FILE_CHANGE_KIND__EXEC_FILE_CHANGE_KIND_CREATED:
                return "created";
        case WARREN__V1__EXEC_FILE_CHANGE_KIND__EXEC_FILE_CHANGE_KIND_MODIFIED:
                return "modified";
        case WARREN__V1__EXEC_FILE_CHANGE_KIND__EXEC_FILE_CHANGE_KIND_DELETED:
                return "deleted";
        case WARREN__V1__EXEC_FILE_CHANGE_KIND__EXEC_FILE_CHANGE_KIND_MODE:
                return "mode";
        default:
                return "?";
        }
}

static void cli_print_changes(FILE *f, Warren__V1__ExecFileChange *const *v, size_t n) {
        for (size_t i = 0; i < n; i++) {
                const Warren__V1__ExecFileChange *c = v[i];
                if (c->kind == WARREN__V1__EXEC_FILE_CHANGE_KIND__EXEC_FILE_CHANGE_KIND_MODE)
                        fprintf(f, "%-8s %-7s %s (%04o -> %04o)\n", kind_name(c->kind), c->type,
                                c->path, c->old_mode & 07777, c->new_mode & 07777);
                else
                        fprintf(f, "%-8s %-7s %s\n", kind_name(c->kind), c->type, c->path);
        }
}

int cli_exec_changes(struct cli_ctx *ctx, const char *sandbox, const char *exec_id, FILE *f,
                     bool json) {
        Warren__V1__GetExecChangesRequest req = WARREN__V1__GET_EXEC_CHANGES_REQUEST__INIT;
        req.sandbox = (char *) sandbox;
        req.exec_id = (char *) exec_id;
        Warren__V1__GetExecChangesResponse *resp = NULL;
        int rc = cli_call(ctx, "/warren.v1.Sandboxes/GetExecChanges", &req.base,
                          &warren__v1__get_exec_changes_response__descriptor,
                          (ProtobufCMessage **) &resp);
        if (rc != CLI_EXIT_OK)
                return rc;
        if (json)
                cli_json_print(cli_json_from_message(&resp->base));
        else {
                cli_print_changes(f, resp->changes, resp->n_changes);
                if (!resp->complete)
                        fprintf(f,
                                "warren: the journal of %s is incomplete (paths left out, or "
                                "bytes a rollback needs were not kept)\n",
                                exec_id);
        }
        protobuf_c_message_free_unpacked(&resp->base, NULL);
        return CLI_EXIT_OK;
}

int cli_sandbox_changes(struct cli_ctx *ctx, int argc, char **argv) {
        enum { OPT_JSON = CLI_OPT_FIRST_LOCAL };
        static const struct option longopts[] = {
                {"json", no_argument, NULL, OPT_JSON}, CLI_COMMON_LONGOPTS, {}};
        const char *cmd = "sandbox changes", *usage = "ID|NAME EXEC_ID [--json]";
        bool json = false;
        int c;
        while ((c = cli_getopt(ctx, cmd, usage, argc, argv, "h", longopts)) != -1) {
                if (c == OPT_JSON)
                        json = true;
                else
                        return c == CLI_GETOPT_HELP ? CLI_EXIT_OK : CLI_EXIT_USAGE;
        }
        if (argc - optind != 2)
                return cli_usage_error(cmd, usage, "give the sandbox and the exec id");
        return cli_exec_changes(ctx, argv[optind], argv[optind + 1], stdout, json);
}

int cli_sandbox_rollback(struct cli_ctx *ctx, int argc, char **argv) {
        enum { OPT_JSON = CLI_OPT_FIRST_LOCAL, OPT_FORCE };
        static const struct option longopts[] = {{"json", no_argument, NULL, OPT_JSON},
                                                 {"force", no_argument, NULL, OPT_FORCE},
                                                 CLI_COMMON_LONGOPTS,
                                                 {}};
        const char *cmd = "sandbox rollback", *usage = "ID|NAME EXEC_ID [--force] [--json]";
        bool json = false, force = false;
        int c;
        while ((c = cli_getopt(ctx, cmd, usage, argc, argv, "h", longopts)) != -1) {
                if (c == OPT_JSON)
                        json = true;
                else if (c == OPT_FORCE)
                        force = true;
                else
                        return c == CLI_GETOPT_HELP ? CLI_EXIT_OK : CLI_EXIT_USAGE;
        }
        if (argc - optind != 2)
                return cli_usage_error(cmd, usage, "give the sandbox and the exec id");
        Warren__V1__RollbackExecRequest req = WARREN__V1__ROLLBACK_EXEC_REQUEST__INIT;
        req.sandbox = argv[optind];
        req.exec_id = argv[optind + 1];
        req.force = force;
        Warren__V1__RollbackExecResponse *resp = NULL;
        int rc = cli_call(ctx, "/warren.v1.Sandboxes/RollbackExec", &req.base,
                          &warren__v1__rollback_exec_response__descriptor,
                          (ProtobufCMessage **) &resp);
        if (rc != CLI_EXIT_OK)
                return rc;
        if (json)
                cli_json_print(cli_json_from_message(&resp->base));
        else
                cli_print_changes(stdout, resp->restored, resp->n_restored);
        protobuf_c_message_free_unpacked(&resp->base, NULL);
        return CLI_EXIT_OK;
}
