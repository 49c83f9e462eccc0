/* SPDX-License-Identifier: Apache-2.0 */
/* wr-sandbox: run one command in a fresh Warren sandbox (test tool).
 *
 *   wr-sandbox run --rootfs DIR [--layer DIR]... [--memory N] [--cpu N]
 *                  [--pids N] [--tmp N] [--hostname H] [--env K=V]...
 *                  [--cgroup auto|v1|v2] [--unlimited] [--init PATH]
 *                  [--state DIR] [--id ID] [--keep] [--debug]
 *                  [--repeat N] [--report FILE] -- CMD [ARGS...]
 *
 * Creates a sandbox (state dir: a temp dir, or --state DIR which must not
 * exist), spawns CMD through warren-init's control socket, relays
 * stdin/stdout/stderr through pipes (never hands the caller's terminal to
 * the sandbox) until CMD exits (background processes it left are killed),
 * destroys the sandbox and exits with CMD's exit code (128+N
 * when killed by signal N). Prints nothing of its own except errors
 * ("wr-sandbox: ...", exit 125). --layer dirs stack above --rootfs, the
 * first given is top-most. --keep leaves the sandbox running and prints
 * "<pid> <state dir>" on stdout instead of destroying it (the caller then
 * cleans up with `wr-sandbox destroy --id ID --state DIR`).
 *
 * --repeat N runs the whole create/spawn/destroy cycle N times (stdin is
 * given to the first run only) and --report FILE writes JSON with per-cycle
 * timings (create→first exec, create, destroy, in ms) and the fds, mounts
 * and cgroup dirs of this process/host before and after, and the cgroup's
 * usage counters just before the last destroy: the leak test, the
 * benchmark and the usage test use it. --debug sends warren-init's stderr to ours.
 * SIGINT, SIGTERM or SIGHUP destroy the sandbox and exit 128+N.
 *
 * Mount table entries (struct rt_mount, applied in the order given):
 *   --bind SRC:DST[:ro]     host path SRC bound at DST (RT_MOUNT_BIND;
 *                           idmapped: RT_MOUNT_IDMAP, unless :host-ids)
 *   --bind-fd SRC:DST[:ro]  the same, SRC opened here and passed as an fd
 *   --tmpfs DST[:SIZE]      a tmpfs (default 64Mi)
 *   --file DST:CONTENT      a file holding CONTENT (RT_MOUNT_FILE); a
 *                           CONTENT of @PATH is the content of host file
 *                           PATH (also for --ro-file and --copy)
 *   --ro-file DST:CONTENT   the same, read-only
 *   --copy DST:CONTENT      CONTENT written into the writable layer
 *   --mount-kind N:DST      an entry of raw kind N (tests of the checks)
 * --net PEER:ADDR:GATEWAY/PREFIX gives the sandbox a veth (eth0 with ADDR,
 * default route via GATEWAY; the host end PEER with GATEWAY).
 * --userns BASE[:COUNT] runs it in a user namespace mapping 0.. inside to
 * BASE.. on the host (COUNT ids, default 65536); --userns 0 = none.
 * --prestart MODE creates through the warm pool's two steps instead
 * (rt_sandbox_prestart, then rt_sandbox_start with the full config):
 *   same      the prestart gets the same config (its root is reused)
 *   bare      the prestart gets only the layers (as warrend does)
 *   extra     the prestart also mounts a tmpfs at /prestart-only, which
 *             the claim does not have (its root must be rebuilt)
 *   nolayers  the prestart gets no layers (no root built ahead)
 *
 *   wr-sandbox destroy --id ID --state DIR [--cgroup auto|v1|v2]
 * SIGKILLs everything in the sandbox's cgroup, removes cgroups and DIR. */

#include <dirent.h>
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "runtime/cgroup.h"
#include "runtime/ctl.h"
#include "runtime/runtime.h"

#define streq(a, b) (strcmp((a), (b)) == 0)

#ifndef WR_INIT_PATH
#define WR_INIT_PATH "warren-init"
#endif
#define MAX_LAYERS 64
#define MAX_ENV 128
#define MAX_MOUNTS (RT_MOUNTS_MAX + 8) /* over the limit: tests of the check */

enum prestart { PRESTART_NONE, PRESTART_SAME, PRESTART_BARE, PRESTART_EXTRA, PRESTART_NOLAYERS };

struct opts {
        const char *layers[MAX_LAYERS + 1];
        size_t n_layers;
        const char *rootfs;
        const char *env[MAX_ENV + 1];
        size_t n_env;
        struct rt_sandbox_config cfg;
        struct rt_mount mounts[MAX_MOUNTS];
        size_t n_mounts;
        enum prestart prestart;
        struct rt_net net;
        const char *state;
        const char *id;
        const char *report;
        unsigned repeat;
        bool keep;
        char **argv;
};

/* The sandbox being run, destroyed by die() so that no error path leaves
 * one behind; and its temp dir. */
static struct rt_sandbox *current;
static char current_tmp[PATH_MAX];

_noreturn_ _printf_(1, 2) static void die(const char *fmt, ...) {
        if (current) {
                struct wr_err e = {0};
                (void) rt_sandbox_destroy(current, &e);
                rt_sandbox_free(current);
                current = NULL;
        }
        if (current_tmp[0])
                (void) rmdir(current_tmp);
        va_list ap;
        fputs("wr-sandbox: ", stderr);
        va_start(ap, fmt);
        vfprintf(stderr, fmt, ap);
        va_end(ap);
        fputc('\n', stderr);
        exit(125);
}

static volatile sig_atomic_t got_signal;
static sigset_t run_mask; /* the mask ppoll() waits with: stop signals open */

static void on_signal(int sig) {
        got_signal = sig;
}

static double now_ms(void) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (double) ts.tv_sec * 1e3 + (double) ts.tv_nsec / 1e6;
}

/* Entries of a directory (only subdirectories starting with prefix when
 * prefix is set: the cgroups of this process's sandboxes). */
static int count_dir(const char *path, const char *prefix) {
        DIR *d = opendir(path);
        if (!d)
                return 0;
        int n = 0;
        struct dirent *de;
        while ((de = readdir(d)))
                if (de->d_name[0] != '.' &&
                    (!prefix ||
                     (de->d_type == DT_DIR && strncmp(de->d_name, prefix, strlen(prefix)) == 0)))
                        n++;
        closedir(d);
        return n;
}

static int count_lines(const char *path) {
        FILE *f = fopen(path, "re");
        if (!f)
                return -1;
        int n = 0, ch;
        while ((ch = fgetc(f)) != EOF)
                if (ch == '\n')
                        n++;
        fclose(f);
        return n;
}

static void write_all(int fd, const char *buf, size_t n) {
        while (n > 0) {
                ssize_t w = write(fd, buf, n);
                if (w < 0 && errno == EINTR)
                        continue;
                if (w <= 0)
                        return; /* reader went away: drop */
                buf += w;
                n -= (size_t) w;
        }
}

/* Spawn argv in the sandbox and relay stdio; returns the wait status.
 * *t_exec gets the time the SPAWNED reply arrived. */
static int relay(const char *ctl, const struct opts *o, bool use_stdin, double *t_exec) {
        struct wr_err e = {0};
        int fd;
        if (rt_ctl_connect(ctl, &fd, &e) < 0)
                die("%s", e.msg);
        int in[2], out[2], er[2];
        if (pipe2(in, O_CLOEXEC) < 0 || pipe2(out, O_CLOEXEC) < 0 || pipe2(er, O_CLOEXEC) < 0)
                die("pipe: %m");
        const char *envp[MAX_ENV + 3];
        size_t k = 0;
        envp[k++] = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";
        envp[k++] = "HOME=/root";
        for (size_t i = 0; i < o->n_env; i++)
                envp[k++] = o->env[i];
        envp[k] = NULL;
        struct rt_spawn_req req = {
                .id = 1,
                .argv = (const char *const *) o->argv,
                .envp = envp,
                .cwd = "/",
        };
        int stdio[3] = {in[0], out[1], er[1]};
        int r;
        for (;;) {
                r = rt_ctl_send_spawn(fd, &req, stdio);
                if (r != -EAGAIN)
                        break;
                struct pollfd p = {.fd = fd, .events = POLLOUT};
                poll(&p, 1, -1);
        }
        if (r < 0)
                die("send spawn: %s", strerror(-r));
        close(in[0]);
        close(out[1]);
        close(er[1]);
        int infd = use_stdin ? 0 : -1;
        int inw = in[1];
        if (!use_stdin) {
                close(inw);
                inw = -1;
        }
        char buf[65536];
        char ibuf[65536];
        size_t ilen = 0, ioff = 0;
        bool exited = false;
        int status = 0;
        int outr = out[0], errr = er[0];
        if (inw >= 0)
                fcntl(inw, F_SETFL, O_NONBLOCK);
        while (!exited || outr >= 0 || errr >= 0) {
                struct pollfd p[5] = {
                        {.fd = fd, .events = POLLIN},
                        {.fd = outr, .events = POLLIN},
                        {.fd = errr, .events = POLLIN},
                        {.fd = ilen == 0 ? infd : -1, .events = POLLIN},
                        {.fd = ilen > 0 ? inw : -1, .events = POLLOUT},
                };
                if (got_signal)
                        break; /* the caller destroys the sandbox */
                /* stop signals are blocked except inside ppoll: no lost wakeup */
                if (ppoll(p, 5, NULL, &run_mask) < 0) {
                        if (errno != EINTR)
                                die("poll: %m");
                        continue;
                }
                if (p[0].revents) {
                        for (;;) {
                                struct rt_ctl_msg m;
                                int passed;
                                r = rt_ctl_recv(fd, &m, &passed);
                                if (r == -EAGAIN)
                                        break;
                                if (r < 0)
                                        die("control connection: %s", strerror(-r));
                                closep(&passed);
                                if (m.type == CTL_SPAWNED && m.id == req.id) {
                                        if (m.err < 0)
                                                die("spawn %s: %s", o->argv[0], strerror(-m.err));
                                        *t_exec = now_ms();
                                } else if (m.type == CTL_EXITED && m.id == req.id) {
                                        exited = true;
                                        status = m.status;
                                }
                                rt_ctl_msg_done(&m);
                        }
                        if (exited) {
                                /* the command is done: what it wrote is in the
                                 * pipes; background processes that still hold
                                 * them do not keep us waiting */
                                for (int i = 1; i <= 2; i++) {
                                        int *src = i == 1 ? &outr : &errr;
                                        if (*src < 0)
                                                continue;
                                        fcntl(*src, F_SETFL, O_NONBLOCK);
                                        ssize_t n;
                                        while ((n = read(*src, buf, sizeof(buf))) > 0)
                                                write_all(i, buf, (size_t) n);
                                        close(*src);
                                        *src = -1;
                                }
                                break;
                        }
                }
                for (int i = 1; i <= 2; i++) {
                        int *src = i == 1 ? &outr : &errr;
                        if (!p[i].revents)
                                continue;
                        ssize_t n = read(*src, buf, sizeof(buf));
                        if (n < 0 && errno == EINTR)
                                continue;
                        if (n <= 0) {
                                close(*src);
                                *src = -1;
                                continue;
                        }
                        write_all(i, buf, (size_t) n);
                }
                if (p[3].revents) {
                        ssize_t n = read(infd, ibuf, sizeof(ibuf));
                        if (n <= 0) {
                                infd = -1;
                                if (inw >= 0) {
                                        close(inw);
                                        inw = -1;
                                }
                        } else {
                                ilen = (size_t) n;
                                ioff = 0;
                        }
                }
                if (p[4].revents) {
                        ssize_t n = write(inw, ibuf + ioff, ilen - ioff);
                        if (n < 0 && errno != EAGAIN && errno != EINTR) {
                                close(inw); /* EPIPE: the program stopped reading */
                                inw = -1;
                                infd = -1;
                                ilen = 0;
                        } else if (n > 0) {
                                ioff += (size_t) n;
                                if (ioff == ilen)
                                        ilen = ioff = 0;
                        }
                }
                if (infd < 0 && ilen == 0 && inw >= 0) {
                        close(inw);
                        inw = -1;
                }
        }
        if (inw >= 0)
                close(inw);
        close(fd);
        return status;
}

static const char *cgroup_root(enum rt_cgroup_mode m) {
        static char path[PATH_MAX];
        struct wr_err e = {0};
        char root[PATH_MAX];
        int mode = rt_cgroup_detect(m, root, sizeof(root), &e);
        if (mode == RT_CGROUP_V2)
                snprintf(path, sizeof(path), "%s/warren", root);
        else
                snprintf(path, sizeof(path), "%s/pids/warren", root);
        return path;
}

static void usage(void) {
        fputs("usage: wr-sandbox run --rootfs DIR [--layer DIR]... [--memory N] [--cpu N] "
              "[--pids N] [--tmp N] [--hostname H] [--env K=V]... [--cgroup auto|v1|v2] "
              "[--unlimited] [--init PATH] [--state DIR] [--id ID] [--keep] [--debug] "
              "[--repeat N] [--report FILE] [--bind SRC:DST[:ro]] [--bind-fd SRC:DST[:ro]] "
              "[--tmpfs DST[:SIZE]] [--file DST:CONTENT] [--ro-file DST:CONTENT] "
              "[--copy DST:CONTENT] [--prestart same|bare|extra|nolayers] -- CMD [ARGS...]\n"
              "       wr-sandbox destroy --id ID --state DIR [--cgroup auto|v1|v2]\n",
              stderr);
        exit(125);
}

/* Split "A:B" at its first ':' (B may hold more). NULL when there is none. */
static char *split_at_colon(char *s) {
        char *c = strchr(s, ':');
        if (!c)
                return NULL;
        *c = 0;
        return c + 1;
}

static struct rt_mount *mount_add(struct opts *o) {
        if (o->n_mounts >= MAX_MOUNTS)
                die("too many mounts");
        struct rt_mount *m = &o->mounts[o->n_mounts++];
        memset(m, 0, sizeof(*m));
        m->source_fd = -1;
        return m;
}

/* --bind / --bind-fd SRC:DST[:ro[,host-ids]] (idmapped in a user
 * namespace unless host-ids) */
static void parse_bind(struct opts *o, char *arg, bool by_fd) {
        struct rt_mount *m = mount_add(o);
        char *dst = split_at_colon(arg);
        if (!dst)
                die("bad bind %s (SRC:DST[:ro])", arg);
        char *opt = split_at_colon(dst);
        m->kind = RT_MOUNT_BIND;
        m->target = dst;
        m->flags = RT_MOUNT_NOSUID | RT_MOUNT_NODEV | RT_MOUNT_IDMAP;
        for (char *o2 = opt; o2;) {
                char *next = strchr(o2, ',');
                if (next)
                        *next++ = 0;
                if (streq(o2, "ro"))
                        m->flags |= RT_MOUNT_RO;
                else if (streq(o2, "host-ids"))
                        m->flags &= ~RT_MOUNT_IDMAP;
                else
                        die("bad bind option %s", o2);
                o2 = next;
        }
        if (!by_fd) {
                m->source = arg;
                return;
        }
        m->source_fd = open(arg, O_PATH | O_CLOEXEC);
        if (m->source_fd < 0)
                die("open %s: %m", arg);
}

/* --file / --ro-file / --copy DST:CONTENT */
static void parse_file(struct opts *o, char *arg, enum rt_mount_kind kind, unsigned flags) {
        struct rt_mount *m = mount_add(o);
        char *content = split_at_colon(arg);
        if (!content)
                die("bad file %s (DST:CONTENT)", arg);
        m->kind = kind;
        m->target = arg;
        m->flags = flags;
        m->data = content;
        m->len = strlen(content);
        if (content[0] != '@')
                return;
        /* @PATH: the content of a host file (binary, or past argv's limits) */
        FILE *f = fopen(content + 1, "re");
        if (!f)
                die("open %s: %m", content + 1);
        size_t cap = 1 << 20;
        char *buf = malloc(cap); /* lives as long as the process */
        m->len = fread(buf, 1, cap, f);
        if (ferror(f) || !feof(f))
                die("read %s (at most %zu bytes)", content + 1, cap);
        fclose(f);
        m->data = buf;
}

static void parse(int argc, char **argv, struct opts *o) {
        static const struct option lo[] = {
                {"rootfs", required_argument, NULL, 'r'},
                {"layer", required_argument, NULL, 'l'},
                {"memory", required_argument, NULL, 'm'},
                {"cpu", required_argument, NULL, 'c'},
                {"pids", required_argument, NULL, 'p'},
                {"tmp", required_argument, NULL, 't'},
                {"hostname", required_argument, NULL, 'h'},
                {"env", required_argument, NULL, 'e'},
                {"cgroup", required_argument, NULL, 'g'},
                {"unlimited", no_argument, NULL, 'u'},
                {"init", required_argument, NULL, 'i'},
                {"state", required_argument, NULL, 's'},
                {"id", required_argument, NULL, 'I'},
                {"keep", no_argument, NULL, 'k'},
                {"debug", no_argument, NULL, 'd'},
                {"repeat", required_argument, NULL, 'n'},
                {"report", required_argument, NULL, 'R'},
                {"bind", required_argument, NULL, 'B'},
                {"bind-fd", required_argument, NULL, 'F'},
                {"tmpfs", required_argument, NULL, 'T'},
                {"file", required_argument, NULL, 'f'},
                {"ro-file", required_argument, NULL, 'o'},
                {"copy", required_argument, NULL, 'C'},
                {"mount-kind", required_argument, NULL, 'K'},
                {"prestart", required_argument, NULL, 'P'},
                {"net", required_argument, NULL, 'N'},
                {"userns", required_argument, NULL, 'U'},
                {NULL, 0, NULL, 0},
        };
        int ch;
        o->repeat = 1;
        o->cfg.init_path = WR_INIT_PATH;
        while ((ch = getopt_long(argc, argv, "+", lo, NULL)) != -1) {
                switch (ch) {
                case 'r':
                        o->rootfs = optarg;
                        break;
                case 'l':
                        if (o->n_layers >= MAX_LAYERS)
                                die("too many layers");
                        o->layers[o->n_layers++] = optarg;
                        break;
                case 'm':
                        if (rt_memory_parse(optarg, &o->cfg.limits.memory_bytes) < 0)
                                die("bad --memory %s", optarg);
                        break;
                case 'c':
                        if (rt_cpu_parse(optarg, &o->cfg.limits.cpu_millicores) < 0)
                                die("bad --cpu %s", optarg);
                        break;
                case 'p':
                        o->cfg.limits.pids_max = (uint32_t) strtoul(optarg, NULL, 10);
                        break;
                case 't':
                        if (rt_memory_parse(optarg, &o->cfg.limits.tmp_bytes) < 0)
                                die("bad --tmp %s", optarg);
                        break;
                case 'h':
                        o->cfg.hostname = optarg;
                        break;
                case 'e':
                        if (o->n_env >= MAX_ENV)
                                die("too many --env");
                        o->env[o->n_env++] = optarg;
                        break;
                case 'g':
                        if (streq(optarg, "v1"))
                                o->cfg.cgroup_mode = RT_CGROUP_V1;
                        else if (streq(optarg, "v2"))
                                o->cfg.cgroup_mode = RT_CGROUP_V2;
                        else if (streq(optarg, "auto"))
                                o->cfg.cgroup_mode = RT_CGROUP_AUTO;
                        else
                                die("bad --cgroup %s", optarg);
                        break;
                case 'u':
                        o->cfg.unlimited = true;
                        break;
                case 'i':
                        o->cfg.init_path = optarg;
                        break;
                case 's':
                        o->state = optarg;
                        break;
                case 'I':
                        o->id = optarg;
                        break;
                case 'k':
                        o->keep = true;
                        break;
                case 'd':
                        o->cfg.log_fd = 2;
                        break;
                case 'n':
                        o->repeat = (unsigned) strtoul(optarg, NULL, 10);
                        if (o->repeat == 0)
                                die("bad --repeat");
                        break;
                case 'R':
                        o->report = optarg;
                        break;
                case 'B':
                case 'F':
                        parse_bind(o, optarg, ch == 'F');
                        break;
                case 'T': {
                        struct rt_mount *m = mount_add(o);
                        char *size = split_at_colon(optarg);
                        m->kind = RT_MOUNT_TMPFS;
                        m->target = optarg;
                        m->flags = RT_MOUNT_NOSUID | RT_MOUNT_NODEV;
                        m->size = 64ULL << 20;
                        if (size && rt_memory_parse(size, &m->size) < 0)
                                die("bad --tmpfs size %s", size);
                        break;
                }
                case 'f':
                        parse_file(o, optarg, RT_MOUNT_FILE, RT_MOUNT_NOSUID | RT_MOUNT_NODEV);
                        break;
                case 'o':
                        parse_file(o, optarg, RT_MOUNT_FILE,
                                   RT_MOUNT_RO | RT_MOUNT_NOSUID | RT_MOUNT_NODEV);
                        break;
                case 'C':
                        parse_file(o, optarg, RT_MOUNT_COPY, 0);
                        break;
                case 'K': {
                        struct rt_mount *m = mount_add(o);
                        char *dst = split_at_colon(optarg);
                        m->kind = (enum rt_mount_kind) atoi(optarg);
                        m->target = dst ? dst : "/x";
                        m->size = 4096;
                        break;
                }
                case 'P':
                        if (streq(optarg, "same"))
                                o->prestart = PRESTART_SAME;
                        else if (streq(optarg, "bare"))
                                o->prestart = PRESTART_BARE;
                        else if (streq(optarg, "extra"))
                                o->prestart = PRESTART_EXTRA;
                        else if (streq(optarg, "nolayers"))
                                o->prestart = PRESTART_NOLAYERS;
                        else
                                die("bad --prestart %s", optarg);
                        break;
                case 'N': { /* PEER:ADDR:GATEWAY/PREFIX */
                        char peer[16], a[32], g[32];
                        unsigned p = 0;
                        if (sscanf(optarg, "%15[^:]:%31[^:]:%31[^/]/%u", peer, a, g, &p) != 4 ||
                            inet_pton(AF_INET, a, &o->net.addr) != 1 ||
                            inet_pton(AF_INET, g, &o->net.gateway) != 1)
                                die("bad --net %s (PEER:ADDR:GATEWAY/PREFIX)", optarg);
                        snprintf(o->net.peer, sizeof(o->net.peer), "%s", peer);
                        o->net.prefix = (uint8_t) p;
                        o->cfg.net = &o->net;
                        break;
                }
                case 'U': {
                        unsigned base = 0, count = 65536;
                        if (sscanf(optarg, "%u:%u", &base, &count) < 1)
                                die("bad --userns %s (BASE[:COUNT])", optarg);
                        o->cfg.uid_base = base;
                        o->cfg.uid_count = base ? count : 0;
                        break;
                }
                default:
                        usage();
                }
        }
        o->argv = argv + optind;
        o->cfg.mounts = o->mounts;
        o->cfg.n_mounts = o->n_mounts;
}

/* When the last sandbox_make's claim (rt_sandbox_start) began; 0: not a
 * prestart. */
static double claim_start_ms;

/* Create the sandbox as o says: at once, or through the warm pool's two
 * steps with a prestart config of o->prestart's kind. */
static int sandbox_make(const struct opts *o, struct rt_sandbox **ret, struct wr_err *e) {
        if (o->prestart == PRESTART_NONE)
                return rt_sandbox_create(&o->cfg, ret, e);
        struct rt_sandbox_config pre = o->cfg;
        struct rt_mount extra[MAX_MOUNTS + 1];
        switch (o->prestart) {
        case PRESTART_BARE:
                pre.mounts = NULL;
                pre.n_mounts = 0;
                pre.hostname = NULL;
                pre.limits = (struct rt_limits){0};
                break;
        case PRESTART_EXTRA:
                memcpy(extra, o->mounts, o->n_mounts * sizeof(extra[0]));
                extra[o->n_mounts] = (struct rt_mount){
                        .kind = RT_MOUNT_TMPFS, .target = "/prestart-only", .size = 1 << 20};
                pre.mounts = extra;
                pre.n_mounts = o->n_mounts + 1;
                break;
        case PRESTART_NOLAYERS:
                pre.layers = NULL;
                pre.n_layers = 0;
                break;
        case PRESTART_SAME:
        case PRESTART_NONE:
                break;
        }
        struct rt_sandbox *sb = NULL;
        int r = rt_sandbox_prestart(&pre, &sb, e);
        if (r < 0)
                return r;
        claim_start_ms = now_ms();
        r = rt_sandbox_start(sb, &o->cfg, e);
        if (r < 0) {
                struct wr_err ignored = {0};
                (void) rt_sandbox_destroy(sb, &ignored);
                rt_sandbox_free(sb);
                return r;
        }
        *ret = sb;
        return 0;
}

static int cmp_double(const void *a, const void *b) {
        double x = *(const double *) a, y = *(const double *) b;
        return x < y ? -1 : x > y;
}

static void print_series(FILE *f, const char *name, double *v, unsigned n) {
        double *s = malloc(n * sizeof(double));
        memcpy(s, v, n * sizeof(double));
        qsort(s, n, sizeof(double), cmp_double);
        fprintf(f, "\"%s\":{\"p50\":%.3f,\"p99\":%.3f,\"min\":%.3f,\"max\":%.3f,\"all\":[", name,
                s[n / 2], s[(n * 99) / 100 < n ? (n * 99) / 100 : n - 1], s[0], s[n - 1]);
        for (unsigned i = 0; i < n; i++)
                fprintf(f, "%s%.3f", i ? "," : "", v[i]);
        fputs("]}", f);
        free(s);
}

int main(int argc, char **argv) {
        if (argc < 2)
                usage();
        const char *cmd = argv[1];
        static struct opts o; /* static: what it points to stays reachable */
        parse(argc - 1, argv + 1, &o);
        signal(SIGPIPE, SIG_IGN);
        /* SIGINT/SIGTERM/SIGHUP: stop relaying, destroy the sandbox, exit */
        struct sigaction sa = {.sa_handler = on_signal}; /* no SA_RESTART */
        sigaction(SIGINT, &sa, NULL);
        sigaction(SIGTERM, &sa, NULL);
        sigaction(SIGHUP, &sa, NULL);
        sigset_t stop;
        sigemptyset(&stop);
        sigaddset(&stop, SIGINT);
        sigaddset(&stop, SIGTERM);
        sigaddset(&stop, SIGHUP);
        sigprocmask(SIG_BLOCK, &stop, &run_mask);

        if (streq(cmd, "destroy")) {
                struct wr_err e = {0};
                if (!o.id || !o.state)
                        usage();
                if (rt_sandbox_cleanup(o.id, o.state, o.cfg.cgroup_mode, &e) < 0)
                        die("%s", e.msg);
                return 0;
        }
        if (!streq(cmd, "run") || !o.rootfs || !o.argv[0])
                usage();
        o.layers[o.n_layers++] = o.rootfs;
        o.cfg.layers = o.layers;
        o.cfg.n_layers = o.n_layers;

        const char *cgroot = cgroup_root(o.cfg.cgroup_mode);
        char prefix[32];
        snprintf(prefix, sizeof(prefix), "wrs-%d-", (int) getpid());
        int fds0 = count_dir("/proc/self/fd", NULL);
        int mounts0 = count_lines("/proc/self/mountinfo");
        int cgs0 = count_dir(cgroot, prefix);
        double *t_first = calloc(o.repeat, sizeof(double));
        double *t_create = calloc(o.repeat, sizeof(double));
        double *t_destroy = calloc(o.repeat, sizeof(double));
        double *t_claim = calloc(o.repeat, sizeof(double));
        int status = 0;
        struct rt_usage usage = {0}; /* of the last cycle, before destroy */

        for (unsigned i = 0; i < o.repeat; i++) {
                char tmp[PATH_MAX], dir[PATH_MAX], id[65];
                tmp[0] = 0;
                if (o.state && o.repeat == 1) {
                        snprintf(dir, sizeof(dir), "%s", o.state);
                } else {
                        snprintf(tmp, sizeof(tmp), "%s/wr-sandbox.XXXXXX",
                                 o.state ? o.state : "/tmp");
                        if (!mkdtemp(tmp))
                                die("mkdtemp: %m");
                        snprintf(dir, sizeof(dir), "%s/sb", tmp);
                }
                if (o.id && o.repeat == 1)
                        snprintf(id, sizeof(id), "%s", o.id);
                else
                        snprintf(id, sizeof(id), "wrs-%d-%u", (int) getpid(), i);
                o.cfg.id = id;
                o.cfg.dir = dir;

                struct rt_sandbox *sb = NULL;
                struct wr_err e = {0};
                double t0 = now_ms();
                claim_start_ms = 0;
                if (sandbox_make(&o, &sb, &e) < 0) {
                        if (tmp[0])
                                rmdir(tmp);
                        die("%s", e.msg);
                }
                current = sb;
                snprintf(current_tmp, sizeof(current_tmp), "%s", tmp);
                double t1 = now_ms(), t2 = t1;
                if (o.keep) {
                        printf("%d %s\n", (int) rt_sandbox_pid(sb), dir);
                        fflush(stdout);
                        current = NULL;
                        rt_sandbox_free(sb);
                        free(t_first);
                        free(t_create);
                        free(t_destroy);
                        free(t_claim);
                        return 0;
                }
                status = relay(rt_sandbox_ctl_path(sb), &o, i == 0, &t2);
                double t3 = now_ms();
                if (rt_sandbox_usage(sb, &usage) < 0)
                        memset(&usage, 0, sizeof(usage));
                if (rt_sandbox_destroy(sb, &e) < 0) {
                        current = NULL; /* do not retry in die() */
                        die("%s", e.msg);
                }
                double t4 = now_ms();
                rt_sandbox_free(sb);
                current = NULL;
                current_tmp[0] = 0;
                if (tmp[0] && rmdir(tmp) < 0)
                        die("rmdir %s: %m", tmp);
                t_create[i] = t1 - t0;
                t_first[i] = t2 - t0;
                t_destroy[i] = t4 - t3;
                t_claim[i] = t2 - (claim_start_ms ? claim_start_ms : t0);
                if (got_signal)
                        break;
        }

        if (o.report) {
                int fds1 = count_dir("/proc/self/fd", NULL);
                FILE *f = fopen(o.report, "we");
                if (!f)
                        die("open %s: %m", o.report);
                /* fds_after includes the library's cached init memfd (one fd
                 * per process, by design) */
                fprintf(f, "{\"n\":%u,\"fds_before\":%d,\"fds_after\":%d,", o.repeat, fds0, fds1);
                fprintf(f, "\"mounts_before\":%d,\"mounts_after\":%d,", mounts0,
                        count_lines("/proc/self/mountinfo"));
                fprintf(f, "\"cgroups_before\":%d,\"cgroups_after\":%d,\"cgroup_dir\":\"%s\",",
                        cgs0, count_dir(cgroot, prefix), cgroot);
                fprintf(f,
                        "\"usage\":{\"cpu_seconds\":%.6f,\"memory_bytes\":%llu,"
                        "\"memory_peak_bytes\":%llu,\"pids\":%u},",
                        usage.cpu_seconds, (unsigned long long) usage.memory_bytes,
                        (unsigned long long) usage.memory_peak_bytes, usage.pids);
                print_series(f, "create_to_first_exec_ms", t_first, o.repeat);
                fputc(',', f);
                print_series(f, "create_ms", t_create, o.repeat);
                fputc(',', f);
                print_series(f, "destroy_ms", t_destroy, o.repeat);
                fputc(',', f);
                /* --prestart: from the claim on (the warm pool's path) */
                print_series(f, "claim_to_first_exec_ms", t_claim, o.repeat);
                fputs("}\n", f);
                fclose(f);
        }
        free(t_first);
        free(t_create);
        free(t_destroy);
        free(t_claim);
        if (got_signal)
                return 128 + got_signal;
        if (WIFEXITED(status))
                return WEXITSTATUS(status);
        if (WIFSIGNALED(status))
                return 128 + WTERMSIG(status);
        return 125;
}
