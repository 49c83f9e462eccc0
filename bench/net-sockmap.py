#!/usr/bin/env python3
"""bench/net-sockmap.py [--gib G] [--repeat K]: one download relayed on
127.0.0.1 three ways, alternating: direct, through a splice relay (what
warren-egress does) and through a sockmap SK_SKB redirect
(bench/net-sockmap.c, compiled here with cc). Needs root (BPF). Prints MB/s
per run and the medians. See docs/network.md "Sockmap (measured, not used)"."""
import argparse
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def server(ls, n):
    buf = memoryview(b"x" * (1 << 20))
    while True:
        c, _ = ls.accept()
        try:
            for _ in range(n >> 20):
                c.sendall(buf)
        except OSError:
            pass
        c.close()


def fetch(port):
    buf = bytearray(1 << 20)
    t = time.perf_counter()
    s = socket.create_connection(("127.0.0.1", port))
    got = 0
    while True:
        k = s.recv_into(buf)
        if not k:
            break
        got += k
    s.close()
    return got, got / (time.perf_counter() - t) / 1e6


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--gib", type=float, default=1.0)
    ap.add_argument("--repeat", type=int, default=3)
    a = ap.parse_args()
    n = int(a.gib * (1 << 30)) >> 20 << 20
    tmp = tempfile.mkdtemp(prefix="warren-sockmap-")
    exe = os.path.join(tmp, "relay")
    subprocess.run(["cc", "-O2", "-o", exe, os.path.join(HERE, "net-sockmap.c")], check=True)
    ls = socket.socket()
    ls.bind(("127.0.0.1", 0))
    ls.listen(8)
    up = ls.getsockname()[1]
    threading.Thread(target=server, args=(ls, n), daemon=True).start()
    procs, ports = [], {}
    try:
        for name, mode in (("splice", "0"), ("sockmap", "1")):
            s = socket.socket()
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
            s.close()
            p = subprocess.Popen([exe, mode, str(port), str(up)], stdout=subprocess.PIPE,
                                 stderr=subprocess.DEVNULL, text=True)
            procs.append(p)
            if p.stdout.readline().strip() != "ready":
                sys.exit("relay %s did not start" % name)
            ports[name] = port
        print("load average %.2f %.2f %.2f, %d CPUs" % (*os.getloadavg(), os.cpu_count()))
        res = {"direct": [], "splice": [], "sockmap": []}
        for _ in range(a.repeat):
            for name in res:
                got, mbs = fetch(up if name == "direct" else ports[name])
                if got != n:
                    sys.exit("%s: %d of %d bytes" % (name, got, n))
                res[name].append(mbs)
        for name, xs in res.items():
            print("%-8s %s MB/s; median %.0f" % (name, " ".join("%.0f" % x for x in xs), statistics.median(xs)))
    finally:
        for p in procs:
            p.kill()
            p.wait()
        subprocess.run(["rm", "-rf", tmp])


if __name__ == "__main__":
    main()
