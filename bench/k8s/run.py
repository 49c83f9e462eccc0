#!/usr/bin/env python3
"""bench/k8s: the K8S compute class next to the host class, in one run.

Starts the test cluster of tests/k8s (cluster.py; binaries from
scripts/k8s-build.sh) and one warrend with both classes, then prints:
  k8s   create -> RUNNING (image already on the node; RUNNING = the main
        container runs and its warren-relay is connected), create -> first
        exec, exec round trip (through warren-relay and warrend's bridge),
        terminate -> gone
  host  create -> first exec, exec round trip
  N=10 bench/k8s/run.py      (default N=10; keep it short, the machine is shared)
"""
import os
import pathlib
import statistics
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests/k8s"))
sys.path.insert(0, str(ROOT / "python"))
os.environ.setdefault("WARREN_BUILD", str(ROOT / "build"))

import conftest as k8s_conftest  # noqa: E402  (tests/k8s/conftest.py)
import warren as wr  # noqa: E402

N = int(os.environ.get("N", "10"))


def pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p / 100.0 * (len(xs) - 1))))]


def line(what, xs):
    print("%-40s p50 %8.1f ms   p99 %8.1f ms   (n=%d)" % (what, pct(xs, 50) * 1e3,
                                                          pct(xs, 99) * 1e3, len(xs)))


def main():
    gen = k8s_conftest.cluster.__wrapped__() if hasattr(k8s_conftest.cluster, "__wrapped__") \
        else None
    if gen is None:
        raise SystemExit("tests/k8s/conftest.py: no cluster fixture")
    c = next(gen)
    d = None
    try:
        d = k8s_conftest.Daemon(extra_args=k8s_conftest.k8s_args(c))
        k8s_conftest._E2E.import_image(d, "busybox:latest")
        with wr.SandboxClient(d.unix_addr) as cl:
            k_create, k_first, k_rtt, k_term = [], [], [], []
            for _ in range(N):
                t = time.monotonic()
                sb = cl.create(image=k8s_conftest.BUSYBOX, compute_class=wr.ComputeClass.K8S)
                k_create.append(time.monotonic() - t)
                sb.exec("true")
                k_first.append(time.monotonic() - t)
                for _ in range(20):
                    t = time.monotonic()
                    sb.exec("true")
                    k_rtt.append(time.monotonic() - t)
                t = time.monotonic()
                sb.terminate(grace_period_seconds=1)
                k_term.append(time.monotonic() - t)
            h_first, h_rtt = [], []
            for _ in range(N):
                t = time.monotonic()
                sb = cl.create(image="busybox:latest")
                sb.exec("true")
                h_first.append(time.monotonic() - t)
                for _ in range(20):
                    t = time.monotonic()
                    sb.exec("true")
                    h_rtt.append(time.monotonic() - t)
                sb.terminate()
        print("cluster: apiserver ready %.1f s, node Ready %.1f s" % (c.t_api, c.t_ready))
        line("k8s   create -> RUNNING", k_create)
        line("k8s   create -> first exec", k_first)
        line("k8s   exec round trip", k_rtt)
        line("k8s   terminate -> Pod gone", k_term)
        line("host  create -> first exec", h_first)
        line("host  exec round trip", h_rtt)
    finally:
        if d:
            d.stop()
        try:
            next(gen)
        except StopIteration:
            pass


if __name__ == "__main__":
    main()
