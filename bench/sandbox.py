#!/usr/bin/env python3
"""bench/sandbox.py [BUILD_DIR] [-n N] [--warm-pool N] [--pause-ms MS] [--idle N]
[--no-peers] [--c-only] [--repeat K] [--log FILE] [--warrend-arg ARG]...: sandbox start and exec latency,
idle sandboxes held.

Starts its own warrend on a temp state dir (unix socket), imports the
busybox test image, then measures:
  with the C client (BUILD/bench/sandbox-c, negligible client overhead):
    create->first exec   CreateSandbox + Exec(/bin/true) to its exit
    exec (running)       Exec(/bin/true) round trip on one running sandbox
    terminate            TerminateSandbox of an idle sandbox
  with grpcio (what the Python SDK pays): the same create->first exec and exec
and, when installed, the same kind of work through peers on the same rootfs:
  bwrap                bwrap --ro-bind ROOTFS / --proc /proc --dev /dev --unshare-all /bin/true
  crun run / exec      a busybox bundle (run inside a private mount ns with
                       the hybrid cgroup2 mount hidden, see PEERS.md)
Prints p50/p99 in milliseconds, and warrend's RSS per idle sandbox.
--log FILE runs warrend at debug level into FILE: each create logs where its
time went and each exec its spawn latency.
"""
import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "python"))

import grpc  # noqa: E402

from warren._proto.warren.v1 import images_pb2  # noqa: E402
from warren._proto.warren.v1 import sandboxes_pb2 as pb  # noqa: E402
from warren._proto.warren.v1 import sandboxes_pb2_grpc  # noqa: E402


def pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p / 100.0 * (len(xs) - 1))))]


def show(name, xs):
    print("%-30s n=%-4d p50 %7.2f ms   p99 %7.2f ms" % (name, len(xs), pct(xs, 50) * 1e3,
                                                       pct(xs, 99) * 1e3))


def rss_kb(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def exec_true(stub, sid):
    req = pb.ExecRequest(start=pb.ExecStart(sandbox=sid, argv=["/bin/true"]))
    for resp in stub.Exec(iter([req])):
        if resp.WhichOneof("kind") == "exited":
            assert resp.exited.exit_code == 0
            return


def time_cmd(argv, n):
    out = []
    for _ in range(n):
        t = time.perf_counter()
        subprocess.run(argv, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        out.append(time.perf_counter() - t)
    return out


CRUN_SCRIPT = r"""
set -e
umount /sys/fs/cgroup/unified 2>/dev/null || true
cd "$1"
python3 - "$2" <<'PY'
import json, subprocess, sys, time
n = int(sys.argv[1])
run = []
for i in range(n):
    t = time.perf_counter()
    subprocess.run(["crun", "run", "b%d" % i], check=True, stdout=subprocess.DEVNULL)
    run.append(time.perf_counter() - t)
cfg = json.load(open("config.json"))
cfg["process"]["args"] = ["/bin/sleep", "300"]
json.dump(cfg, open("config.json", "w"))
subprocess.run(["crun", "run", "-d", "long"], check=True, stdout=subprocess.DEVNULL)
ex = []
for i in range(n):
    t = time.perf_counter()
    subprocess.run(["crun", "exec", "long", "/bin/true"], check=True)
    ex.append(time.perf_counter() - t)
subprocess.run(["crun", "kill", "long", "KILL"], check=False)
time.sleep(0.2)
subprocess.run(["crun", "delete", "-f", "long"], check=False)
print(json.dumps({"run": run, "exec": ex}))
PY
"""


def crun_bench(rootfs, tmp, n):
    """crun run and crun exec on a bundle whose rootfs is the busybox tree."""
    bundle = os.path.join(tmp, "bundle")
    os.makedirs(bundle)
    os.symlink(rootfs, os.path.join(bundle, "rootfs"))
    subprocess.run(["crun", "spec"], cwd=bundle, check=True)
    with open(os.path.join(bundle, "config.json")) as f:
        cfg = json.load(f)
    cfg["process"]["terminal"] = False
    cfg["process"]["args"] = ["/bin/true"]
    cfg["root"]["readonly"] = True
    with open(os.path.join(bundle, "config.json"), "w") as f:
        json.dump(cfg, f)
    # crun 1.8 refuses the hybrid layout while cgroup2 is mounted at
    # /sys/fs/cgroup/unified: hide it in a private mount namespace.
    out = subprocess.run(["unshare", "-m", "--propagation", "private", "bash", "-c", CRUN_SCRIPT,
                          "x", bundle, str(n)], check=True, capture_output=True, text=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("build", nargs="?", default=os.path.join(ROOT, "build"))
    ap.add_argument("-n", type=int, default=200)
    ap.add_argument("--idle", type=int, default=100, help="idle sandboxes for the RSS figure")
    ap.add_argument("--warm-pool", type=int, default=0, help="warrend --warm-pool N")
    ap.add_argument("--pause-ms", type=int, default=0,
                    help="idle time between C-client rounds (lets the pool refill)")
    ap.add_argument("--no-peers", action="store_true", help="skip bwrap/crun")
    ap.add_argument("--warrend-arg", action="append", default=[],
                    help="extra warrend argument (e.g. --warrend-arg=--sandbox-cidr=none)")
    ap.add_argument("--log", help="warrend's debug log goes to this file (create/exec timings)")
    ap.add_argument("--c-only", action="store_true",
                    help="only the C-client figures (no grpcio, idle or peer runs)")
    ap.add_argument("--repeat", type=int, default=1,
                    help="run the C-client rounds this many times (this VM is noisy)")
    ap.add_argument("--policy", action="store_true",
                    help="grpcio rounds create with a network policy (allowed_hosts "
                         "example.test): warren-egress's registration and self-check; needs "
                         "--warrend-arg=--upstream-dns=IP")
    ap.add_argument("--py-only", action="store_true", help="skip the C-client rounds")
    a = ap.parse_args()
    build = os.path.abspath(a.build)
    tmp = tempfile.mkdtemp(prefix="warren-bench-sb-")
    os.chmod(tmp, 0o711)  # a warrend --user reaches its state dir through it
    sock = os.path.join(tmp, "warren.sock")
    proc = subprocess.Popen([os.path.join(build, "src/daemon/warrend"), "--state-dir",
                             os.path.join(tmp, "state"), "--listen", "unix:" + sock,
                             "--log-level", "debug" if a.log else "warn",
                             "--warm-pool", str(a.warm_pool)] + a.warrend_arg,
                            env=dict(os.environ, WARREN_TERMINATE_ON_EXIT="1"),
                            stderr=open(a.log, "w") if a.log else None)
    try:
        for _ in range(200):
            if os.path.exists(sock):
                break
            time.sleep(0.02)
        rootfs = os.path.join(tmp, "rootfs")
        tar = os.path.join(tmp, "rootfs.tar")
        subprocess.run([os.path.join(ROOT, "tests/images/busybox-rootfs.sh"), rootfs, "--tar",
                        tar], check=True)
        subprocess.run([os.path.join(build, "src/cli/warren"), "--addr", "unix:" + sock,
                        "image", "import", "busybox:latest", tar], check=True,
                       stdout=subprocess.DEVNULL)

        for k in range(0 if a.py_only else a.repeat):
            print("warren, C client (bench/sandbox-c), unix socket, warm pool %d, %d ms between "
                  "rounds%s:" % (a.warm_pool, a.pause_ms,
                                 ", run %d/%d" % (k + 1, a.repeat) if a.repeat > 1 else ""))
            sys.stdout.flush()
            subprocess.run([os.path.join(build, "bench/sandbox-c"), "--addr", "unix:" + sock,
                            "--seconds", str(a.n), "busybox:latest"], check=True,
                           env=dict(os.environ, WARREN_BENCH_PAUSE_MS=str(a.pause_ms)))
        if a.c_only:
            return

        ch = grpc.insecure_channel("unix:" + sock)
        stub = sandboxes_pb2_grpc.SandboxesStub(ch)
        image = images_pb2.ImageSpec(ref="busybox:latest")
        create = []
        pol = pb.NetworkPolicy(allowed_hosts=["example.test"]) if a.policy else None
        for _ in range(a.n):
            t = time.perf_counter()
            sb = stub.CreateSandbox(pb.CreateSandboxRequest(image=image, network_policy=pol))
            exec_true(stub, sb.id)
            create.append(time.perf_counter() - t)
            stub.TerminateSandbox(pb.TerminateSandboxRequest(id=sb.id, grace_period_seconds=1))
        sb = stub.CreateSandbox(pb.CreateSandboxRequest(image=image))
        execs = []
        for _ in range(a.n):
            t = time.perf_counter()
            exec_true(stub, sb.id)
            execs.append(time.perf_counter() - t)
        stub.TerminateSandbox(pb.TerminateSandboxRequest(id=sb.id))
        print("warren, grpcio client (what the Python SDK pays)%s:" %
              (", with a network policy" if a.policy else ""))
        show("create->first exec", create)
        show("exec on running sandbox", execs)

        base = rss_kb(proc.pid)
        fds0 = len(os.listdir("/proc/%d/fd" % proc.pid))
        ids, create_t = [], []
        for k in range(a.idle):
            t = time.perf_counter()
            ids.append(stub.CreateSandbox(pb.CreateSandboxRequest(image=image), timeout=120).id)
            create_t.append(time.perf_counter() - t)
        per = (rss_kb(proc.pid) - base) / float(a.idle)
        fds = len(os.listdir("/proc/%d/fd" % proc.pid)) - fds0
        print("idle sandboxes held: %d (all RUNNING); warrend RSS %d kB before, %.1f kB more "
              "per idle sandbox, %.1f fds per sandbox" % (a.idle, base, per, fds / float(a.idle)))
        q = max(1, a.idle // 10)
        for k in range(0, a.idle, q):
            show("  create #%d-%d" % (k + 1, min(a.idle, k + q)), create_t[k:k + q])
        # does anything degrade with that many held?
        ex = []
        for k in range(50):
            t = time.perf_counter()
            exec_true(stub, ids[(k * 7919) % len(ids)])
            ex.append(time.perf_counter() - t)
        show("  exec with all held", ex)
        t = time.perf_counter()
        n = len(stub.ListSandboxes(pb.ListSandboxesRequest(page_size=1000), timeout=120).sandboxes)
        print("  ListSandboxes of %d (with usage): %.1f ms" % (n, (time.perf_counter() - t) * 1e3))
        t = time.perf_counter()
        for i in ids:
            stub.TerminateSandbox(pb.TerminateSandboxRequest(id=i, grace_period_seconds=1),
                                  timeout=120)
        print("  terminating all: %.1f s" % (time.perf_counter() - t))

        if a.no_peers:
            return
        print("peers (same busybox rootfs, process start included):")
        show("/bin/true (host)", time_cmd(["/bin/true"], a.n))
        if shutil.which("bwrap"):
            show("bwrap --unshare-all true", time_cmd(
                ["bwrap", "--ro-bind", rootfs, "/", "--proc", "/proc", "--dev", "/dev",
                 "--unshare-all", "/bin/true"], a.n))
        else:
            print("bwrap: not installed")
        if shutil.which("crun"):
            try:
                r = crun_bench(rootfs, tmp, a.n)
                show("crun run true", r["run"])
                show("crun exec true (running)", r["exec"])
            except subprocess.CalledProcessError as e:
                print("crun: failed: %s" % (e.stderr or "").strip()[-300:])
        else:
            print("crun: not installed")
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=60)
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
