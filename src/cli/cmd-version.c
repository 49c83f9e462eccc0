/* SPDX-License-Identifier: Apache-2.0 */
/* warren version: the client's version, then the server's. */
#include <stdio.h>

#include "cli.h"
#include "warren/v1/system.pb-c.h"

int cli_cmd_version(struct cli_ctx *ctx, int argc, char **argv) {
        bool json;
        int rc0 = cli_getopt_json_only(ctx, "version", argc, argv, &json);
        if (rc0 >= 0)
                return rc0;

        Warren__V1__GetVersionRequest req = WARREN__V1__GET_VERSION_REQUEST__INIT;
        Warren__V1__GetVersionResponse *resp = NULL;
        if (!json)
                printf("Client: warren %s\n", WARREN_VERSION);
        fflush(stdout);
        int rc = cli_call(ctx, "/warren.v1.System/GetVersion", &req.base,
                          &warren__v1__get_version_response__descriptor,
                          (ProtobufCMessage **) &resp);
        if (rc != CLI_EXIT_OK)
                return rc;
        if (json) {
                json_t *o = json_object();
                json_object_set_new(o, "client", json_pack("{s:s}", "version", WARREN_VERSION));
                json_object_set_new(o, "server", cli_json_from_message(&resp->base));
                cli_json_print(o);
        } else {
                printf("Server: warrend %s (api %s%s%s)\n", resp->version, resp->api_version,
                       resp->git_commit[0] ? ", commit " : "", resp->git_commit);
                if (resp->kernel[0] || resp->cgroup_mode[0])
                        printf("Host:   kernel %s, cgroup %s, up %llus\n",
                               resp->kernel[0] ? resp->kernel : "?",
                               resp->cgroup_mode[0] ? resp->cgroup_mode : "?",
                               (unsigned long long) resp->uptime_seconds);
                for (size_t i = 0; i < resp->n_insecure_listeners; i++)
                        printf("WARNING: warrend serves unauthenticated TCP on %s "
                               "(--insecure-tcp-i-know): anyone who can connect controls every "
                               "sandbox and secret\n",
                               resp->insecure_listeners[i]);
        }
        protobuf_c_message_free_unpacked(&resp->base, NULL);
        return CLI_EXIT_OK;
}
