#!/usr/bin/env python3
"""bench/net-intercept.py [BUILD_DIR] [-n N] [--conns C] [--rounds R]: what
TLS interception (docs/network.md "Interception") costs a request, against
the fake internet. Needs root; a companion of bench/net (which measures
the opaque paths).

A server of its own in the bed (see SERVER), a real warrend (--upstream-dns = the bed, --egress-upstream-ca = the bed's
CA) and one sandbox (the Debian base image: python3) with a policy:
  internal-api.example.com  one rule (path starts_with "/", a literal
                            header set): intercepted
  api.github.com            allowed, no rules: an opaque TLS tunnel
From inside the sandbox, per host, one kept-alive HTTPS connection (its
handshake excluded), N requests of GET /bytes/1024 and N/10 of GET
/bytes/1048576: per-request latency p50/p99 and requests/s, R rounds
alternating the two hosts; added = intercepted - opaque. Then C fresh
connections (handshake included) per host, and the leaf cache: how many
of the intercepted handshakes needed a certificate from warren-signer
(warren-egress logs each mint: "leaf certificate for H minted").
Target (issue): interception adds <= 1 ms p50 per request after the
handshake. Prints one JSON document.
"""
import argparse
import json
import os
import pathlib
import re
import shutil
import subprocess
import sys
import tempfile

ROOT = pathlib.Path(__file__).resolve().parents[1]

# The upstream: a keep-alive HTTPS server of its own in the bed's netns on
# port 9443 (every response one write, TCP_NODELAY: the bed's web server
# writes headers and body apart, and Nagle + delayed ACKs then add 40 ms
# to every small response on both paths, which hides what the proxy costs).
SERVER = r"""
import socket, ssl, sys, threading
crt, key = sys.argv[1], sys.argv[2]
ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
ctx.load_cert_chain(crt, key)
ctx.set_alpn_protocols(["http/1.1"])
ls = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
ls.bind(("0.0.0.0", 9443))
ls.listen(128)
BLOB = b"x" * (1 << 20)
def serve(c):
    try:
        c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        s = ctx.wrap_socket(c, server_side=True)
        buf = b""
        while True:
            while b"\r\n\r\n" not in buf:
                d = s.recv(65536)
                if not d:
                    return
                buf += d
            head, buf = buf.split(b"\r\n\r\n", 1)
            path = head.split(b" ")[1].decode()
            n = int(path.rsplit("/", 1)[1]) if path.startswith("/bytes/") else 2
            s.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % n + BLOB[:n])
    except Exception:
        pass
    finally:
        c.close()
print("ready", flush=True)
while True:
    c, _ = ls.accept()
    threading.Thread(target=serve, args=(c,), daemon=True).start()
"""

CLIENT = r"""
import http.client, json, ssl, sys, time
host, n, conns = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
ctx = ssl.create_default_context()
ctx.load_verify_locations("/tmp/bed.pem")   # the opaque host's own CA
out = {}
for size in (1024, 1048576):
    c = http.client.HTTPSConnection(host, 9443, context=ctx, timeout=30)
    c.request("GET", "/bytes/%d" % size)      # handshake + warm-up
    c.getresponse().read()
    lat = []
    for _ in range(n if size == 1024 else max(n // 10, 10)):
        t = time.perf_counter()
        c.request("GET", "/bytes/%d" % size)
        r = c.getresponse()
        body = r.read()
        lat.append((time.perf_counter() - t) * 1e3)
        assert r.status == 200 and len(body) == size, (r.status, len(body))
    c.close()
    out[str(size)] = lat
hs = []
for _ in range(conns):
    t = time.perf_counter()
    c = http.client.HTTPSConnection(host, 9443, context=ctx, timeout=30)
    c.request("GET", "/bytes/16")
    c.getresponse().read()
    hs.append((time.perf_counter() - t) * 1e3)
    c.close()
out["new_conn"] = hs
print(json.dumps(out))
"""


def pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p / 100 * (len(xs) - 1))))]


def summary(xs):
    return {"p50_ms": round(pct(xs, 50), 3), "p99_ms": round(pct(xs, 99), 3),
            "req_per_s": round(1000 / (sum(xs) / len(xs)), 1), "n": len(xs)}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("build", nargs="?", default=str(ROOT / "build"))
    ap.add_argument("-n", type=int, default=300, help="1 KiB requests per round and host")
    ap.add_argument("--conns", type=int, default=30, help="fresh connections per round and host")
    ap.add_argument("--rounds", type=int, default=3)
    a = ap.parse_args()
    os.environ["WARREN_BUILD"] = a.build
    sys.path.insert(0, str(ROOT / "tests"))
    sys.path.insert(0, str(ROOT / "tests" / "e2e"))
    sys.path.insert(0, str(ROOT / "python"))
    from conftest import WARREN_CLI, Daemon  # noqa: E402
    from fakenet.bed import FakeNet  # noqa: E402
    import warren as wr  # noqa: E402
    from warren import NetworkPolicy as M  # noqa: E402

    p = subprocess.run(["bash", str(ROOT / "scripts/base-image.sh")], capture_output=True,
                       text=True, timeout=900, check=True)
    base = p.stdout.strip().splitlines()[-1]
    bed = FakeNet(ssh=False)
    bed.start()
    d = srv = None
    try:
        crt, key = bed.issue_cert(["internal-api.example.com", "api.github.com"])
        srv = subprocess.Popen(["nsenter", f"--net=/run/netns/{bed.netns}", "--", sys.executable,
                                "-c", SERVER, crt, key], stdout=subprocess.PIPE, text=True)
        assert srv.stdout.readline().strip() == "ready"
        d = Daemon(extra_args=["--upstream-dns", bed.dns, "--egress-upstream-ca", bed.ca_pem])
        tmp = tempfile.mkdtemp(prefix="warren-bench-")
        try:
            tar = os.path.join(tmp, "b.tar")
            shutil.copyfile(base, tar)
            subprocess.run([WARREN_CLI, "--addr", d.unix_addr, "image", "import", "--env",
                            "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
                            "benchnet:latest", tar], check=True, capture_output=True, timeout=300)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        c = wr.SandboxClient(d.unix_addr)
        pol = M(allowed_hosts={
            "internal-api.example.com": [M.Rule(match=M.Match(path=M.Matcher(starts_with="/")),
                                                transforms=[M.Transformer(headers={"X-Bench": "1"})])],
            "api.github.com": []})
        got = {"intercepted": {}, "opaque": {}}
        minted = handshakes = 0
        with c.create(image="benchnet:latest", network_policy=pol) as sb:
            sb.exec("sh", "-c", 'printf %s "$1" > /tmp/bed.pem', "sh", open(bed.ca_pem).read())
            for _ in range(a.rounds):
                for label, host in (("intercepted", "internal-api.example.com"),
                                    ("opaque", "api.github.com")):
                    before = len(d.read_log())
                    r = sb.exec("python3", "-c", CLIENT, host, str(a.n), str(a.conns),
                                timeout_secs=900)
                    assert r.exit_code == 0, r.stderr_text
                    for k, v in json.loads(r.stdout_text).items():
                        got[label].setdefault(k, []).extend(v)
                    if label == "intercepted":
                        minted += len(re.findall(r"leaf certificate for \S+ minted",
                                                 d.read_log()[before:]))
                        handshakes += a.conns + 2
        c.close()
        res = {}
        for label in got:
            res[label] = {"1KiB": summary(got[label]["1024"]),
                          "1MiB": summary(got[label]["1048576"]),
                          "new_connection": summary(got[label]["new_conn"])}
        res["added_ms"] = {size: {k: round(res["intercepted"][size][k] - res["opaque"][size][k], 3)
                                  for k in ("p50_ms", "p99_ms")}
                           for size in ("1KiB", "1MiB", "new_connection")}
        res["leaf_cache"] = {"handshakes": handshakes, "minted": minted,
                             "hit_rate": round(1 - minted / handshakes, 4)}
        print(json.dumps(res, indent=1))
    finally:
        if d:
            d.stop()
        if srv:
            srv.kill()
            srv.wait()
        bed.stop()


if __name__ == "__main__":
    main()
