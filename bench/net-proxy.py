#!/usr/bin/env python3
"""bench/net-proxy.py [BUILD_DIR] [--gib G] [-n N] [--conns C]: what the
egress proxy (warren-egress) costs a sandbox, against the fake internet.

Starts a fakenet bed, a sandbox-like netns redirected to warren-egress
(tests/egress/netsetup.py: the nft rules warrend will use) and a second
netns whose traffic is routed to the bed through plain NAT (forward +
masquerade on the host, IPv4, the bed's range only). Then, from each netns:
  setup latency   connect + HTTP request + first response byte to the bed's
                  example.test:80, N times: p50/p99, proxy vs direct NAT
  download        curl http://example.test/bytes/(G GiB) to /dev/null, MB/s
  concurrent      C connections at once, each 1/C of G GiB: aggregate MB/s
Target (issue): proxy download >= 80% of direct NAT.
"""
import argparse
import json
import os
import pathlib
import statistics
import subprocess
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "tests" / "egress"))

LAT = r"""
import socket, sys, time, json
ip, n = sys.argv[1], int(sys.argv[2])
req = b"GET /echo HTTP/1.1\r\nHost: example.test\r\nConnection: close\r\n\r\n"
out = []
for _ in range(n):
    t = time.perf_counter()
    s = socket.create_connection((ip, 80), timeout=10)
    s.sendall(req)
    s.recv(1)
    out.append((time.perf_counter() - t) * 1e3)
    s.close()
print(json.dumps(out))
"""


class NatNet:
    """netns weg<k>-nat routed to the bed through host NAT (IPv4)."""

    def __init__(self, k, bed):
        self.ns, self.hif, self.nif = f"weg{k}-nat", f"weg{k}n", f"weg{k}m"
        self.host4, self.addr4 = f"198.19.{128 + k}.5", f"198.19.{128 + k}.6"
        self.table = f"warren_egress_bench_{k}"
        self.bed = bed

    def create(self):
        self.destroy()
        run = lambda *a, **kw: subprocess.run(a, check=True, capture_output=True, text=True, **kw)
        run("ip", "netns", "add", self.ns)
        run("ip", "link", "add", self.hif, "type", "veth", "peer", "name", self.nif, "netns", self.ns)
        run("ip", "addr", "add", f"{self.host4}/30", "dev", self.hif)
        run("ip", "link", "set", self.hif, "up")
        run("ip", "-n", self.ns, "link", "set", "lo", "up")
        run("ip", "-n", self.ns, "addr", "add", f"{self.addr4}/30", "dev", self.nif)
        run("ip", "-n", self.ns, "link", "set", self.nif, "up")
        bed4 = self.bed.ranges[0]
        run("ip", "-n", self.ns, "route", "add", bed4, "via", self.host4)
        run("nft", "-f", "-", input=f"""
table ip {self.table} {{
    chain nat_fwd {{ type filter hook forward priority filter - 1; policy accept;
        iifname "{self.hif}" ip daddr != {bed4} drop
    }}
    chain nat_post {{ type nat hook postrouting priority srcnat; policy accept;
        iifname "{self.hif}" oifname "{self.bed.layout.host_if}" masquerade
    }}
}}""")

    def destroy(self):
        for a in (["nft", "delete", "table", "ip", self.table], ["ip", "link", "del", self.hif],
                  ["ip", "netns", "del", self.ns]):
            subprocess.run(a, capture_output=True)

    def argv(self, args):
        return ["ip", "netns", "exec", self.ns, *args]


def pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p / 100 * (len(xs) - 1))))]


def latency(argv, ip, n):
    r = subprocess.run(argv([sys.executable, "-c", LAT, ip, str(n)]), capture_output=True, text=True,
                       timeout=300, check=True)
    xs = json.loads(r.stdout)[5:]   # first few warm caches
    return statistics.median(xs), pct(xs, 99)


def sys_busy():
    f = [int(x) for x in open("/proc/stat").readline().split()[1:]]
    return sum(f) - f[3] - f[4], sum(f)


RESOLVE = []


def download(argv, url):
    b0, t0 = sys_busy()
    r = subprocess.run(argv(["curl", "-sS", "-o", "/dev/null", "-w", "%{size_download} %{time_total}", *RESOLVE, url]),
                       capture_output=True, text=True, timeout=600, check=True)
    size, t = r.stdout.split()
    b1, t1 = sys_busy()
    download.busy = (b1 - b0) / max(1, t1 - t0)
    return int(size) / float(t) / 1e6


def concurrent(argv, url, conns):
    t0 = time.perf_counter()
    script = (f"for i in $(seq {conns}); do curl -sS -o /dev/null -w '%{{size_download}}\\n' "
              f"{' '.join(RESOLVE)} {url} & done; wait")
    r = subprocess.run(argv(["sh", "-c", script]), capture_output=True, text=True, timeout=900)
    dt = time.perf_counter() - t0
    sizes = [int(x) for x in r.stdout.split()]
    return sum(sizes) / dt / 1e6, len(sizes)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("build", nargs="?", default=str(ROOT / "build"))
    ap.add_argument("--gib", type=float, default=1.0)
    ap.add_argument("-n", type=int, default=200)
    ap.add_argument("--conns", type=int, default=200)
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--repeat", type=int, default=3, help="downloads per path (median reported)")
    a = ap.parse_args()
    os.environ["WARREN_BUILD"] = a.build
    import conftest
    import egressctl
    from fakenet.bed import FakeNet
    import netsetup

    bed = FakeNet(ssh=False, clients=1, blackhole_metadata=True)
    bed.start()
    k = (os.getpid() % 120) + 1
    sb = netsetup.SandboxNet(k, resolver_ip=bed.dns)
    nat = NatNet(k, bed)
    eg = None
    try:
        conftest._deprecate_barrier_src(bed)
        sb.create()
        nat.create()
        eg = conftest.Egress(bed, sb, threads=a.threads)
        sb.install_nft(eg.socks["proxy_port"], eg.socks["dns_port"])
        eg.extra = ["--log-level", "warn"]
        eg.start()
        pol = egressctl.encode_policy(["example.test"])
        eg.ctl.policy_set("bench", [sb.addr4, sb.addr6], egressctl.ENFORCE, pol)
        ip = bed.addr("example.test")
        # both paths use the name with the address given (no sandbox-side DNS
        # in the measurement; the proxy still resolves host-side, cached)
        RESOLVE[:] = ["--resolve", f"example.test:80:{ip}"]
        n_bytes = int(a.gib * (1 << 30))
        url = f"http://{ip}/bytes/{n_bytes}"
        url_named = f"http://example.test/bytes/{n_bytes}"
        per = f"http://example.test/bytes/{n_bytes // a.conns}"
        print(f"warren-egress bench: {a.threads} proxy threads, {os.cpu_count()} CPUs, fakenet slot {bed.slot}")
        d50, d99 = latency(nat.argv, ip, a.n)
        p50, p99 = latency(sb.argv, ip, a.n)
        print(f"setup latency (connect+request+first byte, n={a.n}): direct NAT p50 {d50:.3f} ms "
              f"p99 {d99:.3f} ms; proxy p50 {p50:.3f} ms p99 {p99:.3f} ms; added p50 {p50 - d50:.3f} ms "
              f"p99 {p99 - d99:.3f} ms")
        dds, pds, busy, cpu, wall, sw = [], [], [], 0.0, 0.0, 0
        for _ in range(a.repeat):     # alternate, to spread the machine's noise over both
            dds.append(download(nat.argv, url_named))
            busy.append(download.busy)
            cpu0, t0, sw0 = proc_cpu(eg.proc.pid), time.perf_counter(), proc_switches(eg.proc.pid)
            pds.append(download(sb.argv, url_named))
            cpu += proc_cpu(eg.proc.pid) - cpu0
            sw += proc_switches(eg.proc.pid) - sw0
            wall += time.perf_counter() - t0
        dd, pd, dbusy = statistics.median(dds), statistics.median(pds), statistics.median(busy)
        print("download runs MB/s: direct " + " ".join(f"{x:.0f}" for x in dds) +
              "; proxy " + " ".join(f"{x:.0f}" for x in pds))
        print(f"CPUs busy: direct NAT {100 * dbusy:.0f}%, proxied {100 * download.busy:.0f}% "
              f"(warren-egress itself {100 * cpu / wall:.0f}% of one core, {cpu / a.repeat / a.gib:.3f} CPU s "
              f"and {sw / a.repeat / a.gib:.0f} context switches per GiB)")
        print(f"download {a.gib:g} GiB (median of {a.repeat}): direct NAT {dd:.0f} MB/s; proxy {pd:.0f} MB/s ({100 * pd / dd:.0f}% of direct)")
        cd, nd = concurrent(nat.argv, per, a.conns)
        cp, npx = concurrent(sb.argv, per, a.conns)
        print(f"{a.conns} concurrent connections ({n_bytes // a.conns} B each): direct NAT {cd:.0f} MB/s "
              f"({nd} done); proxy {cp:.0f} MB/s ({npx} done)")
        r = eg.ctl.ping()
        print(f"egress after: {r[3]} open connections, {r[4]} events dropped; "
              f"RSS {conftest_rss(eg.proc.pid)} kB")
    finally:
        if eg:
            eg.close()
        nat.destroy()
        sb.destroy()
        bed.stop()


def proc_cpu(pid):
    f = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(f[11]) + int(f[12])) / os.sysconf("SC_CLK_TCK")


def proc_switches(pid):
    """Context switches (voluntary + not) of all the process's threads."""
    n = 0
    for t in os.listdir(f"/proc/{pid}/task"):
        try:
            for line in open(f"/proc/{pid}/task/{t}/status"):
                if line.startswith(("voluntary_ctxt_switches", "nonvoluntary_ctxt_switches")):
                    n += int(line.split()[1])
        except OSError:
            pass
    return n


def conftest_rss(pid):
    try:
        for line in open(f"/proc/{pid}/status"):
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


if __name__ == "__main__":
    main()
