#!/usr/bin/env python3
"""bench/run-vs-bwrap.py [BUILD_DIR] [-n N] [--warm-pool N] [--root] [--warrend-arg ARG]...:
whole-process time of `warren run busybox:latest -- /bin/true` (CLI start-up,
CreateSandbox, the exec, TerminateSandbox, exit) next to
`bwrap --ro-bind ROOTFS / --proc /proc --dev /dev --unshare-all /bin/true`
on the same busybox rootfs, measured alternately in the same minutes.

Starts its own warrend as `make run` does (temp state dir, unix socket,
--warm-pool 4 by default, --privsep --user warren when that user exists,
else --privsep; plus --pull-loopback-only, no resolver named); --root runs
it as root without warren-priv instead (the pool's children are then
clones of warrend itself, whose larger address space the claim's exec of
warren-init tears down: ~0.5 ms slower here). Imports the busybox
test image. Also times `warren run --block-network` (a plain create: no
pool entry) and, for reference, bwrap without --unshare-net's cost
(--unshare-all includes a new netns with only a loopback). Prints p50/p99
in ms and the ratios of the p50s."""
import argparse
import os
import pwd
import shutil
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p / 100.0 * (len(xs) - 1))))]


def once(argv):
    t = time.perf_counter()
    subprocess.run(argv, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - t


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("build", nargs="?", default=os.path.join(ROOT, "build"))
    ap.add_argument("-n", type=int, default=100)
    ap.add_argument("--warm-pool", type=int, default=4)
    ap.add_argument("--pause-ms", type=int, default=20, help="between rounds (pool refill)")
    ap.add_argument("--root", action="store_true",
                    help="warrend as root, no warren-priv (not make run's default)")
    ap.add_argument("--warrend-arg", action="append", default=[])
    a = ap.parse_args()
    sep = []
    if not a.root:
        try:
            pwd.getpwnam("warren")
            sep = ["--privsep", "--user", "warren"]
        except KeyError:
            sep = ["--privsep"]
    build = os.path.abspath(a.build)
    if not shutil.which("bwrap"):
        sys.exit("bwrap is not installed")
    tmp = tempfile.mkdtemp(prefix="warren-bench-run-")
    os.chmod(tmp, 0o711)  # a --user warrend (`make run`: --privsep --user warren) reaches its state
    sock = os.path.join(tmp, "warren.sock")
    cli = [os.path.join(build, "src/cli/warren"), "--addr", "unix:" + sock]
    proc = subprocess.Popen([os.path.join(build, "src/daemon/warrend"), "--state-dir",
                             os.path.join(tmp, "state"), "--listen", "unix:" + sock,
                             "--log-level", "warn", "--pull-loopback-only",
                             "--warm-pool", str(a.warm_pool)] + sep + a.warrend_arg,
                            env=dict(os.environ, WARREN_TERMINATE_ON_EXIT="1"))
    try:
        for _ in range(250):
            if os.path.exists(sock):
                break
            time.sleep(0.02)
        rootfs = os.path.join(tmp, "rootfs")
        tar = os.path.join(tmp, "rootfs.tar")
        subprocess.run([os.path.join(ROOT, "tests/images/busybox-rootfs.sh"), rootfs, "--tar",
                        tar], check=True, stdout=subprocess.DEVNULL)
        subprocess.run(cli + ["image", "import", "busybox:latest", tar], check=True,
                       stdout=subprocess.DEVNULL)
        runs = {
            "warren run -- /bin/true": cli + ["run", "busybox:latest", "--", "/bin/true"],
            "warren run --block-network": cli + ["run", "--block-network", "busybox:latest",
                                                 "--", "/bin/true"],
            "bwrap --unshare-all /bin/true": ["bwrap", "--ro-bind", rootfs, "/", "--proc",
                                              "/proc", "--dev", "/dev", "--unshare-all",
                                              "/bin/true"],
            "warren --help (CLI start-up)": cli[:1] + ["--help"],
        }
        for argv in runs.values():  # warm caches
            once(argv)
        load0 = os.getloadavg()[0]
        res = {k: [] for k in runs}
        for _ in range(a.n):
            for k, argv in runs.items():
                res[k].append(once(argv))
                time.sleep(a.pause_ms / 1000.0)
        # the ratio depends on how busy the host is (warren's path crosses
        # more processes and threads than bwrap's): say how busy it was
        extra = sep + a.warrend_arg
        print("n=%d each, alternating, warm pool %d, %s, load average %.2f -> %.2f (%d CPUs)" % (
            a.n, a.warm_pool, " ".join(extra) if extra else "root warrend without warren-priv", load0,
            os.getloadavg()[0], os.cpu_count() or 0))
        for k, xs in res.items():
            print("%-32s p50 %7.2f ms   p99 %7.2f ms" % (k, pct(xs, 50) * 1e3, pct(xs, 99) * 1e3))
        b = pct(res["bwrap --unshare-all /bin/true"], 50)
        for k in ("warren run -- /bin/true", "warren run --block-network"):
            print("%s / bwrap (p50): %.2fx" % (k, pct(res[k], 50) / b))
    finally:
        proc.terminate()
        proc.wait(timeout=60)
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
