/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* The warren CLI: shared context, argument helpers and output helpers.
 * One file per noun (cmd-*.c) registers a `cli_cmd_<noun>` entry point;
 * main.c parses the global options and dispatches. Exit codes: 0 ok, 1 the
 * command failed, 2 usage error; exec/run return the process's own code. */

#include <getopt.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>
#include <protobuf-c/protobuf-c.h>
#include <uv.h>

#include "basic/macro.h"
#include "rpc/client.h"

#define CLI_EXIT_OK 0
#define CLI_EXIT_FAIL 1
#define CLI_EXIT_USAGE 2

#define CLI_DEFAULT_ADDR "unix:/run/warren/warren.sock"
#define CLI_CHUNK (1024 * 1024)

struct cli_ctx {
        const char *addr;
        bool tls;
        const char *ca_file;
        const char *token;       /* --token, WARREN_TOKEN */
        const char *environment; /* WARREN_ENVIRONMENT */
        uv_loop_t *loop;
        struct rpc_client *client; /* connected lazily by cli_connect */
};

/* Long option ids of the options every command accepts. */
enum {
        CLI_OPT_ADDR = 0x1000,
        CLI_OPT_TLS,
        CLI_OPT_CA,
        CLI_OPT_TOKEN,
        CLI_OPT_FIRST_LOCAL, /* commands number their own long options from here */
};

#define CLI_COMMON_LONGOPTS                                                                        \
        {"addr", required_argument, NULL, CLI_OPT_ADDR}, {"tls", no_argument, NULL, CLI_OPT_TLS},  \
                {"ca", required_argument, NULL, CLI_OPT_CA},                                       \
                {"token", required_argument, NULL, CLI_OPT_TOKEN}, {                               \
                "help", no_argument, NULL, 'h'                                                     \
        }

/* A subcommand: name, one-line synopsis and help, entry point. */
struct cli_cmd {
        const char *name;
        const char *usage; /* "[--json] [--status S]" */
        const char *help;  /* one line */
        int (*run)(struct cli_ctx *ctx, int argc, char **argv);
};

/* Dispatch argv[0] among cmds of `noun` (NULL for top level); prints the
 * noun's usage for -h/--help/no subcommand. Returns the exit code. */
int cli_dispatch(struct cli_ctx *ctx, const char *noun, const struct cli_cmd *cmds, size_t n,
                 int argc, char **argv);

/* Entry points of each noun (argv[0] is the noun). */
int cli_cmd_version(struct cli_ctx *ctx, int argc, char **argv);
int cli_cmd_sandbox(struct cli_ctx *ctx, int argc, char **argv);
int cli_cmd_exec(struct cli_ctx *ctx, int argc, char **argv);
int cli_cmd_run(struct cli_ctx *ctx, int argc, char **argv);
int cli_cmd_port_forward(struct cli_ctx *ctx, int argc, char **argv);
int cli_cmd_image(struct cli_ctx *ctx, int argc, char **argv);
/* warren image build, warren image prune (cmd-image-build.c) */
extern const struct cli_cmd cli_image_build_cmds[2];
int cli_cmd_secret(struct cli_ctx *ctx, int argc, char **argv);
int cli_cmd_volume(struct cli_ctx *ctx, int argc, char **argv);
int cli_cmd_files(struct cli_ctx *ctx, int argc, char **argv);
int cli_cmd_cp(struct cli_ctx *ctx, int argc, char **argv);
int cli_cmd_ps(struct cli_ctx *ctx, int argc, char **argv);
int cli_cmd_shell(struct cli_ctx *ctx, int argc, char **argv);
int cli_cmd_token(struct cli_ctx *ctx, int argc, char **argv);
int cli_cmd_audit(struct cli_ctx *ctx, int argc, char **argv);
int cli_cmd_env(struct cli_ctx *ctx, int argc, char **argv);

/* --- argument parsing --- */

/* Run getopt_long over argv with the given options (the common ones are
 * appended by the caller via CLI_COMMON_LONGOPTS). Handles the common
 * options itself. Returns the option character for the caller, -1 at the
 * end, or a negative exit code encoded as -(100+code) for help / usage
 * errors (the usage line was printed). */
#define CLI_GETOPT_HELP (-100)
#define CLI_GETOPT_USAGE (-102)
int cli_getopt(struct cli_ctx *ctx, const char *cmd, const char *usage, int argc, char **argv,
               const char *shortopts, const struct option *longopts);

/* Parse the options of a command that takes only [--json]. Returns -1
 * to go on (*json set), else the exit code to return (help printed, usage
 * error). */
int cli_getopt_json_only(struct cli_ctx *ctx, const char *cmd, int argc, char **argv, bool *json);

/* Print "usage: warren CMD USAGE" (to stdout with help=true, else to
 * stderr) and return the matching exit code (0 or 2). */
int cli_usage(const char *cmd, const char *usage, bool help);

/* Print "warren CMD: MESSAGE" and the usage line to stderr; returns 2. */
int cli_usage_error(const char *cmd, const char *usage, const char *fmt, ...) _printf_(3, 4);

/* Split "K=V" into key and value (both point into a strdup'd copy owned by
 * the arena). Returns 0 or -EINVAL when there is no '=' or the key is empty. */
int cli_parse_kv(const char *s, char **ret_key, char **ret_value);

/* Parse a non-negative number of seconds ("10", "1.5"). 0 or -EINVAL. */
int cli_parse_seconds(const char *s, double *ret);

/* --- memory: a process-lifetime arena freed at exit by cli_arena_free --- */

/* Zeroed memory owned by the arena; aborts on OOM (the CLI cannot go on). */
void *cli_alloc(size_t size);
/* strdup into the arena. */
char *cli_strdup(const char *s);
/* Grow an arena-owned array of pointers by one: (*arr)[(*n)++] = p. */
void cli_push(void ***arr, size_t *n, void *p);
/* Free everything the arena holds. */
void cli_arena_free(void);

/* --- connection and calls --- */

/* Connect ctx->client if not yet connected. On failure prints one line
 * naming the cause and the fix and returns -errno. */
int cli_connect(struct cli_ctx *ctx);

/* Blocking unary call to "/warren.v1.Service/Method". On OK returns 0 and
 * *ret (free with protobuf_c_message_free_unpacked); otherwise prints
 * "warren: STATUS: message" (or the transport error) and returns 1. */
int cli_call(struct cli_ctx *ctx, const char *path, const ProtobufCMessage *req,
             const ProtobufCMessageDescriptor *resp_desc, ProtobufCMessage **ret);

/* `rm`-style commands: for each of names[0..n), send a request of type
 * req_desc whose string field `field` is that name to path, print the name
 * when it succeeded (the error otherwise). Returns CLI_EXIT_OK when all
 * succeeded, else CLI_EXIT_FAIL. */
int cli_delete_each(struct cli_ctx *ctx, char **names, int n, const char *path,
                    const ProtobufCMessageDescriptor *req_desc, const char *field,
                    const ProtobufCMessageDescriptor *resp_desc);

/* Print a non-OK call status the one standard way. */
void cli_print_status(int status, const char *message);

/* Build a request message for one upload chunk (data points into a buffer
 * valid only during the call). */
typedef ProtobufCMessage *(*cli_chunk_fn)(const uint8_t *data, size_t len, void *userdata);

/* Client-streaming upload: send `first`, then the contents of fd in
 * CLI_CHUNK pieces (each wrapped by chunk_fn) honouring the stream's
 * back-pressure, then half-close and wait for the single response. label
 * names the upload for progress lines (shown on a TTY stderr). Returns 0
 * with *ret, or 1 after printing the error. */
int cli_upload(struct cli_ctx *ctx, const char *path, const ProtobufCMessage *first, int fd,
               cli_chunk_fn chunk_fn, void *userdata, const ProtobufCMessageDescriptor *resp_desc,
               const char *label, ProtobufCMessage **ret);

/* --- output --- */

/* A protobuf-c message as a JSON object (proto field names; enums by
 * name; bytes base64; maps as objects). New reference. */
json_t *cli_json_from_message(const ProtobufCMessage *m);

/* Print a JSON value (indented) and a newline to stdout; steals j. */
void cli_json_print(json_t *j);

/* Print a repeated message field as a JSON array of objects. */
void cli_json_print_list(ProtobufCMessage *const *items, size_t n);

/* A table: add rows of ncols strings, then print aligned to stdout. */
struct cli_table;
/* A table of ncols columns whose first row is headers (copied). Arena-owned;
 * never NULL (aborts on OOM). */
struct cli_table *cli_table_new(size_t ncols, const char *const *headers);
/* Append a row of ncols cells (copied; NULL or "" prints "-"). */
void cli_table_add(struct cli_table *t, const char *const *cells);
/* Print every row, columns padded to their widest cell (at most 16
 * columns are printed). */
void cli_table_print(struct cli_table *t);
/* Nothing to free before exit (arena-owned); kept for symmetry. */
void cli_table_free(struct cli_table *t);

/* "2024-05-01 12:00:00" (local time) for Unix nanoseconds; "-" for 0.
 * buf must hold 32 bytes. */
const char *cli_format_time(int64_t unix_nanos, char buf[static 32]);

/* "1.5 MiB" for a byte count. buf must hold 32 bytes. */
const char *cli_format_size(uint64_t bytes, char buf[static 32]);

/* The short name of an enum value: "RUNNING" for
 * SANDBOX_STATUS_RUNNING given prefix "SANDBOX_STATUS_". */
const char *cli_enum_name(const ProtobufCEnumDescriptor *d, int value, const char *prefix);

/* Write all of buf to fd (retrying on EINTR/EAGAIN). 0 or -errno. */
int cli_write_all(int fd, const void *buf, size_t len);

/* Read all of fd into an arena buffer (up to max bytes). Returns the
 * length or -errno (-EFBIG past max). */
ssize_t cli_read_all(int fd, size_t max, uint8_t **ret);

/* --- sandbox creation (shared by `sandbox create` and `run`) --- */

#include "warren/v1/sandboxes.pb-c.h"

enum {
        CLI_OPT_CPU = CLI_OPT_FIRST_LOCAL + 0x100,
        CLI_OPT_MEMORY,
        CLI_OPT_LIFETIME,
        CLI_OPT_TAG,
        CLI_OPT_HOST,
        CLI_OPT_DETECT,
        CLI_OPT_ENTRYPOINT,
        CLI_OPT_SECRET,
        CLI_OPT_VOLUME,
        CLI_OPT_HOSTNAME,
        CLI_OPT_BLOCK_NETWORK,
        CLI_OPT_ROUTE,
        CLI_OPT_DENY_ROUTE,
        CLI_OPT_LEARN_EGRESS,
        CLI_OPT_DISK,
        CLI_OPT_PIDS,
        CLI_OPT_SSH,
        CLI_OPT_JOURNAL,
        CLI_OPT_CREDENTIAL,
        CLI_OPT_IDENTITY,
};

/* Long options of sandbox creation; short ones are n: e: w: (and i: for
 * the image in `sandbox create`). */
#define CLI_CREATE_LONGOPTS                                                                        \
        {"name", required_argument, NULL, 'n'}, {"env", required_argument, NULL, 'e'},             \
                {"workdir", required_argument, NULL, 'w'},                                         \
                {"cpu", required_argument, NULL, CLI_OPT_CPU},                                     \
                {"memory", required_argument, NULL, CLI_OPT_MEMORY},                               \
                {"lifetime", required_argument, NULL, CLI_OPT_LIFETIME},                           \
                {"tag", required_argument, NULL, CLI_OPT_TAG},                                     \
                {"host", required_argument, NULL, CLI_OPT_HOST},                                   \
                {"resource-detection", required_argument, NULL, CLI_OPT_DETECT},                   \
                {"entrypoint", required_argument, NULL, CLI_OPT_ENTRYPOINT},                       \
                {"secret", required_argument, NULL, CLI_OPT_SECRET},                               \
                {"volume", required_argument, NULL, CLI_OPT_VOLUME},                               \
                {"hostname", required_argument, NULL, CLI_OPT_HOSTNAME},                           \
                {"block-network", no_argument, NULL, CLI_OPT_BLOCK_NETWORK},                       \
                {"route", required_argument, NULL, CLI_OPT_ROUTE},                                 \
                {"deny-route", required_argument, NULL, CLI_OPT_DENY_ROUTE},                       \
                {"learn-egress", no_argument, NULL, CLI_OPT_LEARN_EGRESS},                         \
                {"disk", required_argument, NULL, CLI_OPT_DISK},                                   \
                {"pids", required_argument, NULL, CLI_OPT_PIDS},                                   \
                {"ssh", required_argument, NULL, CLI_OPT_SSH},                                     \
                {"journal", no_argument, NULL, CLI_OPT_JOURNAL},                                   \
                {"credential", required_argument, NULL, CLI_OPT_CREDENTIAL}, {                     \
                "identity", no_argument, NULL, CLI_OPT_IDENTITY                                    \
        }

#define CLI_CREATE_USAGE                                                                           \
        "[-n NAME] [-e K=V]... [-w DIR] [--cpu C] [--memory M] [--lifetime D] [--tag K=V]... "     \
        "[--host H]... [--resource-detection github-pull-requests] [--secret NAME]... "            \
        "[--volume NAME:/PATH[:ro]]... [--hostname H] [--block-network] "                          \
        "[--route CIDR[:PORTS]]... [--deny-route CIDR[:PORTS]]... [--learn-egress] "               \
        "[--disk SIZE] [--pids N] [--ssh ALIAS=[USER@]HOST[:PORT],secret=NAME[,host-key=KEY]]... " \
        "[--journal] [--credential HOST[,HOST...]=SECRET]... [--identity]"

/* True when s is a sandbox id ("sb-" + 16 hex digits), not a name. */
bool cli_is_sandbox_id(const char *s);

/* An id or a name into a request's sandbox key oneof (fields id and name;
 * PREFIX: the request's generated name, e.g.
 * WARREN__V1__GET_SANDBOX_REQUEST). */
#define CLI_SET_SANDBOX_KEY(req, PREFIX, key)                                                      \
        do {                                                                                       \
                if (cli_is_sandbox_id(key)) {                                                      \
                        (req).key_case = PREFIX##__KEY_ID;                                         \
                        (req).id = (char *) (key);                                                 \
                } else {                                                                           \
                        (req).key_case = PREFIX##__KEY_NAME;                                       \
                        (req).name = (char *) (key);                                               \
                }                                                                                  \
        } while (0)

/* Parse a --ssh value: ALIAS=[USER@]HOST[:PORT],secret=NAME[,host-key=TYPE
 * BASE64]... into an arena-owned map entry. -EINVAL with a message printed
 * naming the part. */
int cli_parse_ssh(const char *arg, Warren__V1__CreateSandboxRequest__ManagedSshEntry **ret);

/* warren sandbox pause|resume|snapshot|fork (cmd-sandbox-ops.c). */
int cli_sandbox_pause(struct cli_ctx *ctx, int argc, char **argv);
int cli_sandbox_resume(struct cli_ctx *ctx, int argc, char **argv);
int cli_sandbox_snapshot(struct cli_ctx *ctx, int argc, char **argv);
/* warren sandbox changes|rollback (cmd-journal.c) */
int cli_sandbox_changes(struct cli_ctx *ctx, int argc, char **argv);
int cli_sandbox_rollback(struct cli_ctx *ctx, int argc, char **argv);
/* Print what exec_id changed (GetExecChanges) to f, or JSON to stdout. */
int cli_exec_changes(struct cli_ctx *ctx, const char *sandbox, const char *exec_id, FILE *f,
                     bool json);
int cli_sandbox_fork(struct cli_ctx *ctx, int argc, char **argv);

/* A CreateSandboxRequest under construction (arena-owned parts). */
struct cli_create {
        Warren__V1__CreateSandboxRequest req;
        Warren__V1__ImageSpec image;
        Warren__V1__Resources resources;
        Warren__V1__NetworkPolicy policy;
        bool have_policy;
};

/* --- network policy flags (cli-netpolicy.c): checked with warrend's own
 * code (src/net: net_host_pattern_parse, net_cidr_parse,
 * net_port_range_parse), so errors carry its words:
 * `allowed_hosts[1]: "*.com": ...` --- */

/* Add --host arg (canonicalised) to the request's policy. 0, or -EINVAL
 * with the message in err. */
int cli_policy_add_host(struct cli_create *cr, const char *arg, char *err, size_t errlen);

/* Add --route / --deny-route CIDR[:PORTS] (PORTS: "443", "8000-9000",
 * comma-separated). 0, or -EINVAL with the message in err. */
int cli_policy_add_route(struct cli_create *cr, bool deny, const char *arg, char *err,
                         size_t errlen);

/* Start an empty request. */
void cli_create_init(struct cli_create *cr);

/* Apply option c with argument arg. Returns 1 when c is a create option
 * (applied), 0 when it is not, or -CLI_EXIT_USAGE after printing a usage
 * error for a bad value. */
int cli_create_opt(struct cli_create *cr, int c, const char *arg, const char *cmd,
                   const char *usage);

/* Set the image reference; finish the request (policy, resources). */
void cli_create_finish(struct cli_create *cr, const char *image, char **entrypoint, size_t n);

/* CreateSandbox; prints errors. 0 with *ret or 1. */
int cli_sandbox_create(struct cli_ctx *ctx, struct cli_create *cr, Warren__V1__Sandbox **ret);

/* TerminateSandbox by id or name; prints errors. 0 or 1. */
int cli_sandbox_terminate(struct cli_ctx *ctx, const char *key, double grace, bool quiet);

/* --- exec (shared by `exec` and `run`) --- */

struct cli_exec_opts {
        bool interactive; /* forward stdin */
        bool tty;         /* allocate a PTY, raw local terminal */
        const char *workdir;
        const char *user; /* NAME, UID, NAME:GROUP or UID:GID; NULL = the sandbox's */
        double timeout;
        char **env_keys, **env_values;
        size_t n_env;
        bool detach;           /* start detached: print the exec id and leave */
        const char *attach_id; /* re-attach to this exec instead of starting */
        uint64_t offset;       /* ... from this output offset */
        bool journal;          /* journal the exec (docs/journal.md) */
        bool changes;          /* ... and print its changes to stderr after it */
};

/* Run argv in sandbox (id or name) over the Exec stream: output to fd
 * 1/2, stdin forwarded with -i, SIGINT/SIGTERM/SIGHUP/SIGQUIT forwarded.
 * Returns the process's exit code (128+signal when signalled), or 1 after
 * printing the error when the call failed. */
int cli_exec_run(struct cli_ctx *ctx, const char *sandbox, int argc, char **argv,
                 const struct cli_exec_opts *o);
