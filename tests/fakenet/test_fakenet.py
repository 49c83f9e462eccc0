"""Self-tests of the fake internet: every server used the way a sandbox
would use it, from a client netns with the bed's DNS and test CA."""
import glob
import json
import os
import signal
import subprocess
import sys
import tempfile
import time

import pytest
from dnslib import QTYPE, DNSRecord

from fakenet import layout
from fakenet.bed import LOCK_DIR, FakeNet, SlotLock, cleanup_slot, cleanup_stale, slot_held


def dig(bed, name, qtype="A", tcp=False, v6=False):
    q = DNSRecord.question(name, qtype)
    return DNSRecord.parse(q.send(bed.dns6 if v6 else bed.dns, 53, tcp=tcp, timeout=3, ipv6=v6))


def answers(rec):
    return [str(r.rdata) for r in rec.rr]


def leftovers(slot):
    ns = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    return {
        "netns": [l.split()[0] for l in ns.splitlines() if l.startswith(f"wfn{slot}-")],
        "links": [n for n in os.listdir("/sys/class/net") if n.startswith(f"wfn{slot}")],
        "routes": [l for l in subprocess.run(["ip", "route"], capture_output=True, text=True).stdout.splitlines()
                   if f"198.18.{slot}." in l],
        "blackholes": [l for fam in ("-4", "-6") for l in subprocess.run(
            ["ip", fam, "route", "show", "type", "blackhole"], capture_output=True, text=True).stdout.splitlines()
            if f"metric {layout.BLACKHOLE_METRIC + slot}" in l],
        "etc": glob.glob(f"/etc/netns/wfn{slot}-*"),
        "tmp": glob.glob(os.path.join(tempfile.gettempdir(), f"wfn{slot}-*")),
        "lock": glob.glob(f"{LOCK_DIR}/slot-{slot}.lock"),
    }


# ---- the bed itself --------------------------------------------------------

def test_startup_and_routes(fakenet):
    assert fakenet.startup_seconds < 10
    s = fakenet.slot
    routes = subprocess.run(["ip", "route", "show", "dev", fakenet.layout.host_if],
                            capture_output=True, text=True).stdout
    assert f"198.18.{s}.0/24 via 198.19.{s}.2" in routes
    routes6 = subprocess.run(["ip", "-6", "route", "show", "dev", fakenet.layout.host_if],
                             capture_output=True, text=True).stdout
    assert f"2001:db8:5741:{s:x}::/64 via" in routes6
    assert fakenet.ranges == [f"198.18.{s}.0/24", f"2001:db8:5741:{s:x}::/64"]
    for name in ("dns", "web", "tcp_echo", "udp_echo", "ssh"):
        assert fakenet.procs[name].poll() is None, name


def test_off_bed_answers_are_blackholed_on_the_host(fakenet):
    # a policy bug dialing a private/link-local/NAT64 answer drops the packet on the host
    for dst in ("10.66.0.10", "169.254.10.10", "fd00:ec2::254", "64:ff9b::7f00:1", "2002:7f00:1::1"):
        r = subprocess.run(["ip", "route", "get", dst], capture_output=True, text=True)
        assert r.returncode != 0 or r.stdout.startswith("blackhole"), (dst, r.stdout, r.stderr)
        assert "eth" not in r.stdout and "via" not in r.stdout, r.stdout


def test_client_reaches_only_the_bed(fakenet_client):
    # route lookups send nothing: the uplink, its resolver and the metadata
    # address are unreachable from a client; the bed's ranges are not
    for dst in ("192.0.2.1", "10.255.255.53", "169.254.169.254", "8.8.8.8"):
        r = subprocess.run(["ip", "-n", fakenet_client.ns, "route", "get", dst], capture_output=True, text=True)
        assert r.returncode != 0 and "unreachable" in r.stderr, (dst, r.stdout)
    r = subprocess.run(["ip", "-n", fakenet_client.ns, "-6", "route", "get", "fd00::1"],
                       capture_output=True, text=True)
    assert r.returncode != 0


# ---- DNS -------------------------------------------------------------------

def test_dns_through_client_resolver(fakenet, fakenet_client):
    r = fakenet_client.run(["getent", "ahosts", "api.github.com"], check=True)
    assert fakenet.addr("api.github.com") in r.stdout
    assert fakenet.addr("api.github.com", 6) in r.stdout
    r = fakenet_client.run(["getent", "hosts", "nope.invalid"])
    assert r.returncode == 2


def test_dns_answers(fakenet):
    s = fakenet.slot
    assert answers(dig(fakenet, "github.com")) == [f"198.18.{s}.11"]
    assert answers(dig(fakenet, "GitHub.COM.", v6=True)) == [f"198.18.{s}.11"]
    assert answers(dig(fakenet, "pypi.org", "AAAA")) == [f"2001:db8:5741:{s:x}::13"]
    assert sorted(answers(dig(fakenet, "multi.example.test"))) == [f"198.18.{s}.{h}" for h in (20, 21, 22)]
    assert len(answers(dig(fakenet, "multi.example.test", "AAAA"))) == 3
    assert answers(dig(fakenet, "private.example.test")) == ["10.66.0.10"]
    assert answers(dig(fakenet, "metadata.example.test")) == ["169.254.169.254"]
    assert answers(dig(fakenet, "loopback.example.test", "AAAA")) == ["::1"]
    assert answers(dig(fakenet, "linklocal.example.test")) == ["169.254.10.10"]
    assert answers(dig(fakenet, "mapped.example.test", "AAAA")) == ["::ffff:7f00:1"]
    assert sorted(answers(dig(fakenet, "mixed.example.test"))) == ["10.66.0.10", f"198.18.{s}.10"]
    # wildcards: any depth, never the apex of the wildcard zone
    assert answers(dig(fakenet, "a.b.c.github.com")) == [f"198.18.{s}.30"]
    assert answers(dig(fakenet, "api.github.com")) == [f"198.18.{s}.12"]   # exact beats wildcard
    assert dig(fakenet, "wild.example.test").header.rcode == 3
    assert answers(dig(fakenet, f"{layout.LONG_LABEL}.example.test")) == [f"198.18.{s}.10"]
    long_name = ".".join(["b" * 60] * 3) + ".wild.example.test"   # 200 chars
    assert answers(dig(fakenet, long_name)) == [f"198.18.{s}.30"]
    # TXT, CNAME, NODATA, NXDOMAIN, SERVFAIL
    assert answers(dig(fakenet, "txt.example.test", "TXT")) == ['"v=fakenet1 hello"']
    r = dig(fakenet, "alias.example.test")
    assert [QTYPE[x.rtype] for x in r.rr] == ["CNAME", "A"] and str(r.rr[1].rdata) == f"198.18.{s}.11"
    r = dig(fakenet, "v4only.example.test", "AAAA")
    assert r.header.rcode == 0 and not r.rr and r.auth
    r = dig(fakenet, "does-not-exist.example.com.invalid")
    assert r.header.rcode == 3 and not r.rr
    assert dig(fakenet, "servfail.example.test").header.rcode == 2


def test_dns_truncation_and_tcp(fakenet):
    r = dig(fakenet, "bigtxt.example.test", "TXT")
    assert r.header.tc == 1 and not r.rr
    r = dig(fakenet, "bigtxt.example.test", "TXT", tcp=True)
    assert r.header.tc == 0 and len(r.rr) == 1 and len(r.pack()) > 512


def test_dns_rebinding(fakenet, fakenet_client):
    s = fakenet.slot
    name = f"t{os.getpid()}-{time.time_ns()}.rebind.example.test"
    assert answers(dig(fakenet, name)) == [f"198.18.{s}.40"]
    assert answers(dig(fakenet, name)) == ["127.0.0.1"]
    assert answers(dig(fakenet, name)) == ["127.0.0.1"]
    assert dig(fakenet, name).rr[0].ttl == 0
    meta = f"t{time.time_ns()}.rebind-meta.example.test"
    assert [answers(dig(fakenet, meta))[0] for _ in range(2)] == [f"198.18.{s}.40", "169.254.169.254"]
    flip = f"t{time.time_ns()}.flip.example.test"
    assert [answers(dig(fakenet, flip))[0] for _ in range(3)] == [f"198.18.{s}.40", "127.0.0.1", f"198.18.{s}.40"]
    # a resolver in the client sees the rebinding too
    name2 = f"c{time.time_ns()}.rebind.example.test"
    first = fakenet_client.run(["getent", "ahostsv4", name2], check=True).stdout.split()[0]
    second = fakenet_client.run(["getent", "ahostsv4", name2], check=True).stdout.split()[0]
    assert (first, second) == (f"198.18.{s}.40", "127.0.0.1")


def test_dns_log_and_runtime_records(fakenet, fakenet_client):
    m = fakenet.mark()
    fakenet.add_record("added.example.test", "A", f"198.18.{fakenet.slot}.99")
    r = fakenet_client.run(["getent", "ahostsv4", "added.example.test"], check=True)
    assert r.stdout.split()[0] == f"198.18.{fakenet.slot}.99"
    fakenet.remove_record("added.example.test")
    assert dig(fakenet, "added.example.test").header.rcode == 3
    q = fakenet.dns_queries(since=m, name="added.example.test", qtype="A")
    assert q[0]["client"] == fakenet_client.addr4 or q[0]["client"] == fakenet_client.addr6
    assert q[0]["answers"] == [f"A 198.18.{fakenet.slot}.99"] and q[0]["rcode"] == "NOERROR"
    assert q[-1]["rcode"] == "NXDOMAIN"


# ---- HTTP / HTTPS ----------------------------------------------------------

def curl(client, *args, check=True):
    r = client.run(["curl", "-sS", "--max-time", "30", *args])
    if check:
        assert r.returncode == 0, r.stderr
    return r


def test_http_https_echo_and_log(fakenet, fakenet_client):
    m = fakenet.mark()
    doc = json.loads(curl(fakenet_client, "-H", "Authorization: Bearer placeholder", "-H", "X-A: 1",
                          "-H", "X-A: 2", "https://internal-api.example.com/v1/things?q=1").stdout)
    assert doc["sni"] == "internal-api.example.com" and doc["tls"] and doc["port"] == 443
    assert doc["path"] == "/v1/things" and doc["query"] == "q=1"
    assert ["Authorization", "Bearer placeholder"] in doc["headers"]
    assert [h for h in doc["headers"] if h[0] == "X-A"] == [["X-A", "1"], ["X-A", "2"]]
    doc = json.loads(curl(fakenet_client, "http://example.test/echo", "--data-binary", "hello").stdout)
    assert doc["method"] == "POST" and doc["body"] == "hello" and not doc["tls"]
    doc = json.loads(curl(fakenet_client, "-4", "https://api.openai.com:8443/v1/models").stdout)
    assert doc["port"] == 8443 and doc["local"] == fakenet.addr("api.openai.com")
    doc = json.loads(curl(fakenet_client, "-6", "https://github.com/").stdout)
    assert doc["local"] == fakenet.addr("github.com", 6) and doc["client"] == fakenet_client.addr6
    fakenet.settle()
    reqs = fakenet.http_requests(since=m)
    assert [(r["hostname"], r["path"], r["sni"], r["port"]) for r in reqs] == [
        ("internal-api.example.com", "/v1/things", "internal-api.example.com", 443),
        ("example.test", "/echo", None, 80),
        ("api.openai.com", "/v1/models", "api.openai.com", 8443),
        ("github.com", "/", "github.com", 443)]
    assert reqs[1]["body_bytes"] == 5 and reqs[1]["bytes_out"] > 0 and reqs[1]["status"] == 200
    conns = fakenet.connections("web", since=m)
    assert len([c for c in conns if c["event"] == "conn"]) == 4
    assert {c.get("tls_version") for c in conns if c["tls"]} <= {"TLSv1.3", "TLSv1.2"}


KEEPALIVE = r"""
import socket, sys
c = socket.create_connection((sys.argv[1], 80), timeout=10)
c.sendall(sys.stdin.read().encode())
out = b""
while True:
    d = c.recv(65536)
    if not d:
        break
    out += d
print(out.decode())
"""


def test_http_helpers(fakenet, fakenet_client):
    r = curl(fakenet_client, "-o", "/dev/null", "-w", "%{http_code}", "http://example.test/status/418")
    assert r.stdout == "418"
    r = curl(fakenet_client, "-o", "/dev/null", "-w", "%{http_code} %{redirect_url}",
             "https://example.com/redirect?to=https://pypi.org/x")
    assert r.stdout == "302 https://pypi.org/x"
    r = curl(fakenet_client, "-sSI", "http://example.test/bytes/12345")
    assert "Content-Length: 12345" in r.stdout
    # keep-alive: two requests, one connection
    m = fakenet.mark()
    two = ("GET /a HTTP/1.1\r\nHost: example.test\r\n\r\n"
           "GET /b HTTP/1.1\r\nHost: example.test\r\nConnection: close\r\n\r\n")
    r = fakenet_client.run([sys.executable, "-c", KEEPALIVE, fakenet.addr("example.test")], input=two, check=True)
    assert r.stdout.count("HTTP/1.1 200 OK") == 2
    fakenet.settle()
    reqs = fakenet.http_requests(since=m)
    assert [q["path"] for q in reqs] == ["/a", "/b"] and reqs[0]["conn"] == reqs[1]["conn"]
    # uploads: /sink streams and drops the body
    m = fakenet.mark()
    r = fakenet_client.run(["sh", "-c", "head -c 100000000 /dev/zero | curl -sS -T - -H 'Transfer-Encoding:' "
                            "-H 'Content-Length: 100000000' https://example.test/sink"], check=True)
    assert json.loads(r.stdout)["bytes"] == 100_000_000
    doc = json.loads(curl(fakenet_client, "--data-binary", "abc", "http://example.test/sink?sha256=1").stdout)
    assert doc == {"bytes": 3, "sha256": "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"}
    fakenet.settle()
    assert [r["body_bytes"] for r in fakenet.http_requests(since=m)] == [100_000_000, 3]
    t0 = time.time()
    curl(fakenet_client, "http://example.test/delay/300")
    assert time.time() - t0 >= 0.3
    # chunked request body
    doc = json.loads(curl(fakenet_client, "-H", "Transfer-Encoding: chunked", "--data-binary", "x" * 1000,
                          "http://example.test/echo").stdout)
    assert doc["body_bytes"] == 1000


def test_tls_failures(fakenet, fakenet_client):
    m = fakenet.mark()
    for name in ("badcert.example.test", "wrongname.example.test", "expired.example.test"):
        r = curl(fakenet_client, f"https://{name}/", check=False)
        assert r.returncode == 60, (name, r.returncode, r.stderr)    # peer certificate not verified
    fakenet.settle()
    conns = fakenet.connections("web", since=m)
    # refused in the handshake (unknown CA, expired) or right after it (curl checks the name then)
    assert {e["sni"] for e in conns if e["event"] == "tls_error"} >= {"badcert.example.test",
                                                                      "expired.example.test"}
    assert {e["sni"] for e in conns} == {"badcert.example.test", "wrongname.example.test",
                                         "expired.example.test"}
    assert not fakenet.http_requests(since=m)


def test_issue_cert(fakenet):
    crt, key = fakenet.issue_cert(["extra.example.test"], ["198.18.%d.99" % fakenet.slot])
    r = subprocess.run(["openssl", "verify", "-CAfile", fakenet.ca_pem, "-verify_hostname", "extra.example.test",
                        crt], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    assert os.path.exists(key) and os.path.exists(fakenet.ca_key_pem)


def test_bulk_download_1gib(fakenet, fakenet_client):
    n = 1 << 30
    t0 = time.time()
    r = curl(fakenet_client, "-o", "/dev/null", "-w", "%{size_download} %{speed_download}",
             f"http://example.test/bytes/{n}")
    size, speed = r.stdout.split()
    assert int(size) == n
    r = curl(fakenet_client, "-o", "/dev/null", "-w", "%{size_download}",
             f"https://files.pythonhosted.org/bytes/{64 << 20}")
    assert int(r.stdout) == 64 << 20
    # the server streams: its resident memory stays far below the size
    rss_kb = int([l for l in open(f"/proc/{fakenet.procs['web'].pid}/status")
                  if l.startswith("VmRSS")][0].split()[1])
    assert rss_kb < 200_000
    print(f"1 GiB over http in {time.time() - t0:.2f}s ({float(speed) / 1e6:.0f} MB/s), web RSS {rss_kb} kB")


# ---- content: git, PyPI, apt -----------------------------------------------

def test_git_clone_https(fakenet, fakenet_client, tmp_path):
    m = fakenet.mark()
    dst = tmp_path / "repo"
    fakenet_client.run(["git", "clone", "-q", "https://github.com/example/repo.git", str(dst)], check=True)
    assert (dst / "README.md").read_text().startswith("# example/repo")
    head = subprocess.run(["git", "-C", str(dst), "rev-parse", "HEAD"], capture_output=True, text=True,
                          env=fakenet.client_env()).stdout.strip()
    assert head == fakenet.git["head"]
    fakenet.settle()
    paths = [r["path"] for r in fakenet.http_requests(since=m, host="github.com")]
    assert "/example/repo.git/info/refs" in paths and "/example/repo.git/git-upload-pack" in paths


def test_pip_download(fakenet, fakenet_client, tmp_path):
    m = fakenet.mark()
    r = fakenet_client.run([sys.executable, "-m", "pip", "download", "-q", "fakenet-extra",
                            "--index-url", "https://pypi.org/simple", "-d", str(tmp_path)])
    assert r.returncode == 0, r.stderr
    assert sorted(os.listdir(tmp_path)) == ["fakenet_extra-0.2.0-py3-none-any.whl",
                                            "fakenet_hello-1.0.0-py3-none-any.whl"]
    fakenet.settle()
    hosts = {r["hostname"] for r in fakenet.http_requests(since=m)}
    assert hosts == {"pypi.org", "files.pythonhosted.org"}


def test_apt_get_install(fakenet, fakenet_client, tmp_path):
    status = "/var/lib/dpkg/status"
    before = os.stat(status).st_mtime_ns if os.path.exists(status) else None
    root = str(tmp_path / "root")
    argv, env = fakenet.apt_argv(root, "update")
    r = fakenet_client.run(argv, env=env)
    assert r.returncode == 0, r.stdout + r.stderr
    argv, env = fakenet.apt_argv(root, "install", fakenet.apt["package"])
    r = fakenet_client.run(argv, env=env)
    assert r.returncode == 0, r.stdout + r.stderr
    assert open(f"{root}/usr/share/fakenet-hello/hello.txt").read().startswith("hello")
    assert os.access(f"{root}/usr/bin/fakenet-hello", os.X_OK)
    assert "Package: fakenet-hello\nStatus: install ok installed" in open(f"{root}/var/lib/dpkg/status").read()
    assert (os.stat(status).st_mtime_ns if os.path.exists(status) else None) == before
    assert not os.path.exists("/usr/bin/fakenet-hello")


# ---- echo servers, ssh -----------------------------------------------------

ECHO = r"""
import socket, sys
fam = socket.AF_INET6 if ":" in sys.argv[1] else socket.AF_INET
kind = socket.SOCK_STREAM if sys.argv[3] == "tcp" else socket.SOCK_DGRAM
s = socket.socket(fam, kind); s.settimeout(5)
s.connect((sys.argv[1], int(sys.argv[2])))
s.sendall(b"ping " + sys.argv[3].encode())
print(s.recv(100).decode())
"""


@pytest.mark.parametrize("proto", ["tcp", "udp"])
def test_echo(fakenet, fakenet_client, proto):
    m = fakenet.mark()
    for addr, port in ((fakenet.addr("example.test"), 7), (fakenet.addr("example.test", 6), 9000),
                       (f"198.18.{fakenet.slot}.77", 7)):
        r = fakenet_client.run([sys.executable, "-c", ECHO, addr, str(port), proto], check=True)
        assert r.stdout.strip() == f"ping {proto}"
    fakenet.settle()
    evs = fakenet.connections(f"{proto}_echo", since=m)
    assert [(e["local"], e["port"]) for e in evs] == [
        (fakenet.addr("example.test"), 7), (fakenet.addr("example.test", 6), 9000),
        (f"198.18.{fakenet.slot}.77", 7)]
    if proto == "tcp":
        closes = [e for e in fakenet.events("tcp_echo", since=m) if e["event"] == "close"]
        assert [c["bytes_in"] for c in closes] == [8, 8, 8]


def test_ssh_and_git_over_ssh(fakenet, fakenet_client, tmp_path):
    if fakenet.ssh is None:
        pytest.skip("sshd is not installed")
    m = fakenet.mark()
    r = fakenet_client.run(["ssh", *fakenet.ssh.args(), "git@github.com", "echo", "hello-from-ssh"])
    assert r.returncode == 0 and r.stdout.strip() == "hello-from-ssh", r.stderr
    dst = tmp_path / "repo"
    fakenet_client.run(["git", "clone", "-q", fakenet.git["ssh_url"], str(dst)], check=True,
                       env={"GIT_SSH_COMMAND": fakenet.ssh.git_ssh_command})
    assert (dst / "README.md").exists()
    # a wrong key is refused
    other = tmp_path / "k"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(other)], check=True)
    args = fakenet.ssh.args()
    args[args.index("-i") + 1] = str(other)
    r = fakenet_client.run(["ssh", *args, "git@github.com", "true"])
    assert r.returncode == 255
    time.sleep(0.2)
    evs = fakenet.events("ssh", since=m)
    assert len([e for e in evs if e["event"] == "conn"]) == 3
    assert [e["user"] for e in evs if e["event"] == "auth"] == ["git", "git"]


# ---- log helpers, lifecycle --------------------------------------------------

def test_nothing_seen(fakenet, fakenet_client):
    m = fakenet.mark()
    fakenet.assert_nothing_seen(m)   # barrier probes are not "seen"
    r = fakenet_client.run(["getent", "hosts", "example.test"], check=True)
    assert r.stdout
    with pytest.raises(AssertionError):
        fakenet.assert_nothing_seen(m)
    assert {e["server"] for e in fakenet.seen(m)} == {"dns"}


PING = r"""
import socket, struct, sys
s = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP)
s.settimeout(5)
body = struct.pack("!BBHHH", 8, 0, 0, 0x77, 1) + b"fakenet!"
c = sum(struct.unpack("!8H", body))
c = (c >> 16) + (c & 0xFFFF); c = ~(c + (c >> 16)) & 0xFFFF
s.sendto(body[:2] + struct.pack("!H", c) + body[4:], (sys.argv[1], 0))
print(s.recv(100)[20])   # ICMP type of the reply: 0
"""

CONNECT = r"""
import socket, sys
try:
    socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=5)
except ConnectionRefusedError:
    print("refused")
"""


def test_packet_counters(fakenet, fakenet_client):
    if not fakenet.nft:
        pytest.skip("nft is not installed")
    m = fakenet.mark()
    fakenet.settle()
    assert set(fakenet.packets_since(m).values()) == {0}     # barrier probes are not counted
    r = fakenet_client.run([sys.executable, "-c", PING, fakenet.addr("example.test")], check=True)
    assert r.stdout.strip() == "0"
    r = fakenet_client.run([sys.executable, "-c", CONNECT, fakenet.addr("example.test", 6), "5432"], check=True)
    assert r.stdout.strip() == "refused"
    pk = fakenet.packets_since(m)
    assert pk["icmp"] == 1 and pk["tcp"] == 1 and pk["udp"] == 0, pk
    assert not fakenet.seen(m)                     # no server saw them: only the counters did
    with pytest.raises(AssertionError, match="packets reached"):
        fakenet.assert_nothing_seen(m)


def test_second_bed_and_stop_leaves_nothing(fakenet):
    bed = FakeNet(ssh=False, blackhole_metadata=True)
    bed.start()
    try:
        assert bed.slot != fakenet.slot
        r = subprocess.run(["ip", "route", "show", "type", "blackhole", "169.254.169.254/32"],
                           capture_output=True, text=True)
        assert f"metric {layout.BLACKHOLE_METRIC + bed.slot}" in r.stdout
        assert bed.client.run(["getent", "hosts", "github.com"], check=True).stdout.startswith(
            f"2001:db8:5741:{bed.slot:x}::11")
        pids = [p.pid for p in bed.procs.values()]
    finally:
        bed.stop()
    left = leftovers(bed.slot)
    if not slot_held(bed.slot):       # (another test run may take the slot at once)
        assert left == {k: [] for k in left}
    for pid in pids:
        assert not os.path.exists(f"/proc/{pid}"), pid
    bed.stop()   # twice is fine


CRASH = r"""
import os, sys
sys.path.insert(0, sys.argv[1])
from fakenet.bed import FakeNet
bed = FakeNet(ssh=False)
bed.start()
print(bed.slot, " ".join(str(p.pid) for p in bed.procs.values()), flush=True)
os.kill(os.getpid(), 9)
"""


def test_crashed_run_is_cleaned(fakenet):
    tests_dir = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    r = subprocess.run([sys.executable, "-c", CRASH, tests_dir], capture_output=True, text=True, timeout=60)
    assert r.returncode == -signal.SIGKILL, r.stderr
    slot, *pids = (int(x) for x in r.stdout.split())
    left = leftovers(slot)
    assert left["netns"] and left["links"]         # what the crash left
    deadline = time.time() + 5                     # servers die with their parent (PDEATHSIG)
    while any(os.path.exists(f"/proc/{p}") for p in pids) and time.time() < deadline:
        time.sleep(0.05)
    assert not any(os.path.exists(f"/proc/{p}") for p in pids)
    lk = SlotLock()
    try:
        lk.acquire([slot])                         # what the next bed in that slot does first
    except RuntimeError:                           # another test run's bed took the slot (and cleaned it)
        return
    try:
        cleanup_slot(slot)
        assert leftovers(slot) == {k: [] for k in left} | {"lock": [f"{LOCK_DIR}/slot-{slot}.lock"]}
    finally:
        lk.release()
    assert fakenet.slot not in cleanup_stale()     # a held slot is never touched
    assert fakenet.client.run(["getent", "hosts", "github.com"]).returncode == 0
