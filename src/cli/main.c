/* SPDX-License-Identifier: Apache-2.0 */
/* warren: the command-line client of warrend. Global options, then a noun
 * (sandbox, image, secret, volume) or a verb (version, exec, run). */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

static const struct cli_cmd top[] = {
        {"version", "", "client and server versions", cli_cmd_version},
        {"sandbox", "ls|create|get|rm ...", "manage sandboxes", cli_cmd_sandbox},
        {"exec",
         "[-i] [-t] [-d] [-w DIR] [-u USER] [-e K=V]... [--timeout S] ID|NAME -- CMD... | "
         "--attach EXEC_ID [--offset N] [-i] [-t] ID|NAME",
         "run a command in a sandbox, or re-attach to one", cli_cmd_exec},
        {"shell", "[-w DIR] [-u USER] [-e K=V]... ID|NAME", "interactive shell (PTY) in a sandbox",
         cli_cmd_shell},
        {"ps", "[--json] ID|NAME", "list a sandbox's processes (exec ids)", cli_cmd_ps},
        {"run", "[create options] IMAGE -- CMD...",
         "create a sandbox, run a command in it, terminate it", cli_cmd_run},
        {"port-forward", "[--address IP] ID|NAME [LOCAL:]REMOTE",
         "forward a local TCP port to a port inside a sandbox (until Ctrl-C)",
         cli_cmd_port_forward},
        {"image", "import|pull|ls|get|rm ...", "manage images", cli_cmd_image},
        {"secret", "set|ls|rm ...", "manage secrets", cli_cmd_secret},
        {"volume", "create|ls|info|rm|put|get|files|rm-file ...", "manage volumes", cli_cmd_volume},
        {"files", "ls|cat|rm|stat|mkdir ID:/PATH", "files of a running sandbox", cli_cmd_files},
        {"cp", "SRC DST", "copy files or trees into or out of a sandbox (ID:/PATH on one side)",
         cli_cmd_cp},
        {"token", "create|ls|revoke ...", "manage API tokens (admins)", cli_cmd_token},
        {"audit", "[--env NAME|*] [--limit N] [--json]", "read the audit log (admins)",
         cli_cmd_audit},
        {"env", "whoami|quota|set-quota ...", "who am I; environment quotas", cli_cmd_env},
};

static void print_cmds(FILE *f, const char *noun, const struct cli_cmd *cmds, size_t n) {
        fprintf(f, "commands:\n");
        for (size_t i = 0; i < n; i++)
                fprintf(f, "  warren %s%s%-8s %s\n      %s\n", noun ? noun : "", noun ? " " : "",
                        cmds[i].name, cmds[i].usage, cmds[i].help);
}

static void print_env(FILE *f) {
        fprintf(f,
                "environment: WARREN_ADDR (default %s), WARREN_TOKEN (or --token), "
                "WARREN_ENVIRONMENT, WARREN_TLS_CA\n",
                CLI_DEFAULT_ADDR);
}

int cli_dispatch(struct cli_ctx *ctx, const char *noun, const struct cli_cmd *cmds, size_t n,
                 int argc, char **argv) {
        const char *name = argc > 0 ? argv[0] : NULL;
        bool help = name && (strcmp(name, "-h") == 0 || strcmp(name, "--help") == 0 ||
                             strcmp(name, "help") == 0);
        if (!name || help) {
                FILE *f = help ? stdout : stderr;
                fprintf(f, "usage: warren %s%s<command> [options]\n", noun ? noun : "",
                        noun ? " " : "[--addr A] [--tls] [--ca FILE] [--token T] ");
                print_cmds(f, noun, cmds, n);
                if (!noun)
                        print_env(f);
                return help ? CLI_EXIT_OK : CLI_EXIT_USAGE;
        }
        for (size_t i = 0; i < n; i++)
                if (strcmp(cmds[i].name, name) == 0) {
                        optind = 0; /* full getopt reset for the subcommand */
                        return cmds[i].run(ctx, argc, argv);
                }
        fprintf(stderr, "warren%s%s: unknown command '%s'\n", noun ? " " : "", noun ? noun : "",
                name);
        print_cmds(stderr, noun, cmds, n);
        return CLI_EXIT_USAGE;
}

int main(int argc, char **argv) {
        static const struct option longopts[] = {CLI_COMMON_LONGOPTS, {}};
        struct cli_ctx ctx = {
                .addr = getenv("WARREN_ADDR"),
                .ca_file = getenv("WARREN_TLS_CA"),
                .token = getenv("WARREN_TOKEN"),
                .environment = getenv("WARREN_ENVIRONMENT"),
        };
        if (!ctx.addr || !ctx.addr[0])
                ctx.addr = CLI_DEFAULT_ADDR;
        if (ctx.ca_file && !ctx.ca_file[0])
                ctx.ca_file = NULL;
        if (ctx.token && !ctx.token[0])
                ctx.token = NULL;
        const char *tls_env = getenv("WARREN_TLS");
        ctx.tls = ctx.ca_file || (tls_env && (strcmp(tls_env, "1") == 0));

        /* A closed pipe on stdout must not kill us mid-write silently. */
        signal(SIGPIPE, SIG_IGN);

        int c = cli_getopt(&ctx, "", "[--addr A] [--tls] [--ca FILE] [--token T] <command> ...",
                           argc, argv, "+h", longopts);
        if (c == CLI_GETOPT_HELP) {
                /* cli_getopt printed the usage line: add the commands. */
                print_cmds(stdout, NULL, top, ELEMENTSOF(top));
                print_env(stdout);
                return CLI_EXIT_OK;
        }
        if (c == CLI_GETOPT_USAGE)
                return CLI_EXIT_USAGE;

        uv_loop_t loop;
        if (uv_loop_init(&loop) < 0) {
                fprintf(stderr, "warren: cannot initialise the event loop\n");
                return CLI_EXIT_FAIL;
        }
        ctx.loop = &loop;
        int rc = cli_dispatch(&ctx, NULL, top, ELEMENTSOF(top), argc - optind, argv + optind);
        fflush(stdout);
        rpc_client_free(ctx.client);
        ctx.client = NULL;
        /* Let handles closed above finish, then close the loop. */
        uv_run(&loop, UV_RUN_NOWAIT);
        (void) uv_loop_close(&loop);
        cli_arena_free();
        return rc;
}
