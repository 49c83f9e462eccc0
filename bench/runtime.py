#!/usr/bin/env python3
"""Sandbox start-up benchmark: Warren's runtime next to its peers.

    bench/runtime.py [BUILD_DIR] [-n 200]      (root; default build/)

Measures, on the same busybox rootfs:
  warren lib   create -> first exec (in one process: rt_sandbox_create, connect
               to init, SPAWNED reply), from wr-sandbox --repeat --report
  warren tool  wall time of `wr-sandbox run -- /bin/true` (process start,
               create, spawn, relay, destroy)
  unshare      `unshare -fmpiun --mount-proc /bin/true` (kernel baseline)
  bwrap        `bwrap --ro-bind ROOTFS / --proc /proc --dev /dev
               --unshare-all /bin/true` (if installed)
  crun         `crun run` of an OCI bundle (if installed; inside a private
               mount namespace with /sys/fs/cgroup/unified unmounted on a
               hybrid host, see PEERS.md)
Prints p50/p99 in ms and the ratio to warren tool.
"""
import argparse
import json
import os
import pathlib
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]


def pct(v, p):
    s = sorted(v)
    return s[min(len(s) - 1, int(len(s) * p / 100))]


def timed(argv, n, **kw):
    out = []
    for _ in range(n):
        t = time.perf_counter()
        r = subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, **kw)
        out.append((time.perf_counter() - t) * 1e3)
        if r.returncode != 0:
            raise RuntimeError(f"{argv[0]} failed: {r.stderr.decode()[:300]}")
    return out


def crun_inner(bundle, n):
    """Runs inside `unshare -m --propagation private`."""
    if os.path.ismount("/sys/fs/cgroup/unified"):
        subprocess.run(["umount", "/sys/fs/cgroup/unified"], check=True)
    v = timed(["crun", "run", "--bundle", bundle, f"wr-bench-{os.getpid()}"], n)
    print(json.dumps(v))


def crun_bundle(tmp, rootfs):
    b = tmp / "bundle"
    b.mkdir()
    subprocess.run(["crun", "spec"], cwd=b, check=True)
    spec = json.loads((b / "config.json").read_text())
    spec["root"] = {"path": str(rootfs), "readonly": True}
    spec["process"]["terminal"] = False
    spec["process"]["args"] = ["/bin/true"]
    (b / "config.json").write_text(json.dumps(spec))
    return b


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("build", nargs="?", default="build")
    ap.add_argument("-n", type=int, default=200)
    ap.add_argument("--crun-inner", nargs=2, help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.crun_inner:
        crun_inner(a.crun_inner[0], int(a.crun_inner[1]))
        return
    build = pathlib.Path(a.build)
    if not build.is_absolute():
        build = ROOT / build
    tool = build / "tests/tools/wr-sandbox"
    tmp = pathlib.Path(tempfile.mkdtemp(prefix="warren-bench-sb-"))
    try:
        rootfs = tmp / "rootfs"
        subprocess.run([str(ROOT / "tests/images/busybox-rootfs.sh"), str(rootfs)], check=True)
        res = {}
        rep = tmp / "rep.json"
        subprocess.run([str(tool), "run", "--rootfs", str(rootfs), "--repeat", str(a.n),
                        "--report", str(rep), "--", "/bin/true"], check=True)
        r = json.loads(rep.read_text())
        res["warren lib: create->first exec"] = r["create_to_first_exec_ms"]["all"]
        res["warren lib: create"] = r["create_ms"]["all"]
        res["warren lib: destroy"] = r["destroy_ms"]["all"]
        res["warren tool: run /bin/true"] = timed(
            [str(tool), "run", "--rootfs", str(rootfs), "--", "/bin/true"], a.n)
        res["unshare -fmpiun --mount-proc"] = timed(
            ["unshare", "-fmpiun", "--mount-proc", "/bin/true"], a.n)
        if shutil.which("bwrap"):
            res["bwrap --unshare-all"] = timed(
                ["bwrap", "--ro-bind", str(rootfs), "/", "--proc", "/proc", "--dev", "/dev",
                 "--unshare-all", "/bin/true"], a.n)
        if shutil.which("crun"):
            b = crun_bundle(tmp, rootfs)
            out = subprocess.run(["unshare", "-m", "--propagation", "private", sys.executable,
                                  __file__, "--crun-inner", str(b), str(a.n)],
                                 capture_output=True, check=True)
            res["crun run"] = json.loads(out.stdout)
        base = statistics.median(res["warren tool: run /bin/true"])
        print(f"n={a.n} per line; ms")
        print(f"{'work':38} {'p50':>8} {'p99':>8} {'p50/warren tool':>16}")
        for k, v in res.items():
            print(f"{k:38} {statistics.median(v):8.2f} {pct(v, 99):8.2f} "
                  f"{statistics.median(v) / base:16.2f}")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
