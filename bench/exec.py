#!/usr/bin/env python3
"""bench/exec.py [BUILD_DIR] [-n N] [--gb G]: exec latency and throughput.

Starts its own warrend (temp state dir, unix socket), imports the busybox
test image, creates one sandbox and measures on it:
  exec round trip     Exec(/bin/true) start to exit, C client
                      (BUILD/bench/sandbox-c), p50/p99
  stdout, CLI         `warren exec ID -- dd if=/dev/zero bs=1M count=N | wc -c`
                      over the unix socket, MB/s (process start included;
                      dd, because busybox `head -c` alone does ~190 MB/s)
  stdout, Python SDK  the same through Sandbox.exec_start(text=False)
  stdout, grpcio raw  the Exec stream read with grpcio directly (no SDK)
  warrend RSS         before, and peak (VmHWM) while streaming
Targets (issue 5): round trip p50 <= 1 ms; CLI >= 1 GB/s.
"""
import argparse
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "python"))

import grpc  # noqa: E402

import warren as wr  # noqa: E402
from warren._proto.warren.v1 import sandboxes_pb2 as pb  # noqa: E402
from warren._proto.warren.v1 import sandboxes_pb2_grpc  # noqa: E402


def status_kb(pid, field):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    return 0


class RssSampler:
    """Peak VmRSS of pid while running (VmHWM cannot be reset per phase)."""

    def __init__(self, pid):
        self.pid, self.peak, self._stop = pid, 0, threading.Event()
        self._t = threading.Thread(target=self._run, daemon=True)

    def _run(self):
        while not self._stop.is_set():
            self.peak = max(self.peak, status_kb(self.pid, "VmRSS"))
            time.sleep(0.01)

    def __enter__(self):
        self._t.start()
        return self

    def __exit__(self, *a):
        self._stop.set()
        self._t.join()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("build", nargs="?", default=os.path.join(ROOT, "build"))
    ap.add_argument("-n", type=int, default=500, help="exec round trips")
    ap.add_argument("--gb", type=float, default=4, help="GiB streamed through the CLI")
    ap.add_argument("--sdk-gb", type=float, default=1, help="GiB streamed through the SDK")
    a = ap.parse_args()
    build = os.path.abspath(a.build)
    cli = os.path.join(build, "src/cli/warren")
    tmp = tempfile.mkdtemp(prefix="warren-bench-exec-")
    sock = os.path.join(tmp, "warren.sock")
    addr = "unix:" + sock
    env = dict(os.environ, WARREN_TERMINATE_ON_EXIT="1")
    proc = subprocess.Popen([os.path.join(build, "src/daemon/warrend"), "--state-dir",
                             os.path.join(tmp, "state"), "--listen", addr,
                             "--log-level", "warn", "--terminate-on-exit"], env=env)
    try:
        for _ in range(500):
            if os.path.exists(sock):
                break
            time.sleep(0.02)
        tar = os.path.join(tmp, "rootfs.tar")
        subprocess.run([os.path.join(ROOT, "tests/images/busybox-rootfs.sh"),
                        os.path.join(tmp, "rootfs"), "--tar", tar], check=True)
        subprocess.run([cli, "--addr", addr, "image", "import", "busybox:latest", tar],
                       check=True, stdout=subprocess.DEVNULL)

        # 1. Round trip (C client; its own sandbox per round for create, then
        # N execs on one running sandbox: we print only the exec lines).
        out = subprocess.run([os.path.join(build, "bench/sandbox-c"), "--addr", addr,
                              "--seconds", str(a.n), "busybox:latest"], check=True,
                             capture_output=True, text=True).stdout
        for line in out.splitlines():
            if "exec on running" in line:
                print("exec round trip, C client: " + line.strip()[2:])

        with wr.SandboxClient(addr) as c:
            sb = c.create(image="busybox:latest")
            base = status_kb(proc.pid, "VmRSS")
            print("warrend RSS before streaming: %.1f MB" % (base / 1024.0))

            # 2. CLI throughput.
            n = int(a.gb * (1 << 30))
            with RssSampler(proc.pid) as rss:
                t = time.perf_counter()
                r = subprocess.run("%s --addr %s exec %s -- dd if=/dev/zero bs=1M count=%d "
                                   "2>/dev/null | wc -c" % (cli, addr, sb.id, n >> 20),
                                   shell=True, check=True,
                                   capture_output=True, text=True)
                dt = time.perf_counter() - t
            assert int(r.stdout.strip()) == n, r.stdout
            print("stdout via CLI (unix socket):  %.2f GiB in %.2f s = %7.0f MB/s   "
                  "warrend peak RSS %.1f MB" % (a.gb, dt, n / dt / 1e6, rss.peak / 1024.0))

            # 3. Python SDK throughput (bytes, no decoding).
            n = int(a.sdk_gb * (1 << 30))
            with RssSampler(proc.pid) as rss:
                t = time.perf_counter()
                p = sb.exec_start("dd", "if=/dev/zero", "bs=1M", "count=%d" % (n >> 20),
                                  text=False)
                got = 0
                for ev in p.output():
                    if ev.stdout_bytes:
                        got += len(ev.stdout_bytes)
                dt = time.perf_counter() - t
            assert got == n
            print("stdout via Python SDK:         %.2f GiB in %.2f s = %7.0f MB/s   "
                  "warrend peak RSS %.1f MB" % (a.sdk_gb, dt, n / dt / 1e6, rss.peak / 1024.0))

            # 4. grpcio without the SDK (its own default channel options).
            ch = grpc.insecure_channel(addr, options=[
                ("grpc.max_receive_message_length", 64 << 20)])
            stub = sandboxes_pb2_grpc.SandboxesStub(ch)
            t = time.perf_counter()
            got = 0
            req = pb.ExecRequest(start=pb.ExecStart(
                sandbox=sb.id, argv=["dd", "if=/dev/zero", "bs=1M", "count=%d" % (n >> 20)]))
            for resp in stub.Exec(iter([req])):
                if resp.WhichOneof("kind") == "stdout":
                    got += len(resp.stdout.data)
            dt = time.perf_counter() - t
            assert got == n
            print("stdout via grpcio (no SDK):    %.2f GiB in %.2f s = %7.0f MB/s"
                  % (a.sdk_gb, dt, n / dt / 1e6))
            ch.close()
            print("warrend RSS after: %.1f MB (VmHWM over the whole run %.1f MB)"
                  % (status_kb(proc.pid, "VmRSS") / 1024.0, status_kb(proc.pid, "VmHWM") / 1024.0))
            sb.terminate(grace_period_seconds=1)
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=60)
        subprocess.run(["rm", "-rf", tmp])


if __name__ == "__main__":
    main()
