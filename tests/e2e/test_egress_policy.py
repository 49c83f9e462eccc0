"""Egress policies enforced by warrend + warren-egress (docs/network.md "The
policy path"): real sandboxes, the fake internet (tests/fakenet) as the
upstream world. warrend's warren-egress resolves upstream with the bed's
DNS only (--upstream-dns), so every name a sandbox asks for is answered by
the bed or refused; every address a sandbox is sent to is the bed's, the
host's (loopback, its gateway, the bed-facing 198.19.<s>.1), another
sandbox's, or one that nothing routes (the metadata address under the
bed's blackhole route).

Every adversarial case asserts the attempt failed AND that nothing of it
reached the bed (bed.assert_nothing_seen(mark): no DNS query, no
connection, no packet)."""
import json
import os
import re
import signal
import socket
import ssl
import subprocess
import time

import pytest

import warren as wr
from conftest import WARREN_CLI, Daemon, import_image
from warren import NetworkPolicy

Route = NetworkPolicy.Route
IMAGE = "busybox:latest"

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="needs root")


# ---------- fixtures ----------

@pytest.fixture(scope="module")
def bed():
    from fakenet.bed import FakeNet
    b = FakeNet(ssh=False, blackhole_metadata=True)
    b.start()
    try:
        yield b
    finally:
        b.stop()


def daemon_net(d):
    m = re.search(r"sandboxes get /30 blocks of (\S+) \(nftables table inet (\S+)\)", d.read_log())
    assert m, d.read_log()
    return m.group(1), m.group(2)


def egress_ports(d):
    m = re.search(r"warren-egress running \(pid (\d+), \d+ threads; proxy port (\d+), resolver "
                  r"port (\d+)\)", d.read_log())
    assert m, d.read_log()
    return int(m.group(1)), int(m.group(2)), int(m.group(3))


@pytest.fixture(scope="module")
def egd(bed):
    d = Daemon(extra_args=["--upstream-dns", bed.dns])
    try:
        import_image(d, IMAGE)
        d.range, d.table = daemon_net(d)
        yield d
    finally:
        d.stop()


@pytest.fixture
def client(egd):
    c = wr.SandboxClient(egd.unix_addr)
    yield c
    c.close()


@pytest.fixture
def make(client):
    made = []

    def make_(policy=None, **kw):
        kw.setdefault("image", IMAGE)
        kw.setdefault("entrypoint", ["sleep", "infinity"])
        if policy is not None:
            kw["network_policy"] = policy
        sb = client.create(**kw)
        made.append(sb)
        return sb

    yield make_
    for sb in made:
        try:
            sb.terminate(grace_period_seconds=1)
        except wr.WarrenError:
            pass


def sh(sb, cmd, timeout=30):
    return sb.exec("sh", "-c", cmd, timeout_secs=timeout)


def http(sb, ip, host, port=80, path="/", extra=""):
    """A raw HTTP/1.1 request by address with the given Host header; what
    came back (the status line, or "")."""
    req = f"GET {path} HTTP/1.1\\r\\nHost: {host}\\r\\n{extra}Connection: close\\r\\n\\r\\n"
    r = sh(sb, f"printf '{req}' | nc -w 3 {ip} {port} 2>&1 | head -1")
    return r.stdout_text.strip()


def tcp(sb, ip, port, text="ping"):
    r = sh(sb, f"echo {text} | nc -w 3 {ip} {port} 2>/dev/null")
    return r.stdout_text.strip()


def gateway_of(sb):
    out = sh(sb, "ip route 2>/dev/null || route -n").stdout_text
    m = re.search(r"default via (\S+)", out) or re.search(r"^0\.0\.0\.0\s+(\S+)", out, re.M)
    return m.group(1)


def addr_of(sb):
    out = sh(sb, "ip -4 -o addr show dev eth0").stdout_text
    return re.search(r"inet (\S+)/", out).group(1)


def client_hello(sni):
    """A TLS ClientHello naming sni, as bytes (made by Python's ssl)."""
    ctx = ssl.create_default_context()
    inc, out = ssl.MemoryBIO(), ssl.MemoryBIO()
    obj = ctx.wrap_bio(inc, out, server_hostname=sni)
    try:
        obj.do_handshake()
    except ssl.SSLWantReadError:
        pass
    return out.read()


def tls(sb, ip, sni, port=443):
    """Send a ClientHello naming sni to ip:port; how many bytes came back."""
    data = "".join("\\%03o" % b for b in client_hello(sni))
    r = sh(sb, f"printf '{data}' | nc -w 3 {ip} {port} 2>/dev/null | wc -c")
    return int(r.stdout_text.strip() or 0)


def wait_events(sb, pred, n=1, timeout=10):
    deadline = time.monotonic() + timeout
    while True:
        evs = [e for e in sb.network_events() if pred(e)]
        if len(evs) >= n or time.monotonic() > deadline:
            return evs
        time.sleep(0.2)


def nft_set(table, name):
    p = subprocess.run(["nft", "list", "set", "inet", table, name], capture_output=True,
                       text=True)
    m = re.search(r"elements = \{([^}]*)\}", p.stdout)
    return sorted(x.strip() for x in m.group(1).split(",")) if m else []


POLICY = NetworkPolicy(allowed_hosts=["example.test"], denied_routes=["169.254.169.254/32"])


# ---------- the seed's examples ----------

def test_allowed_hosts_list(make, bed):
    sb = make(NetworkPolicy(allowed_hosts=["example.test", "pypi.org"]))
    assert sb.info.egress_enforced and sb.refresh().egress_enforced
    r = sh(sb, "timeout 8 wget -q -O - http://example.test/hello")
    assert r.exit_code == 0 and "/hello" in r.stdout_text, r.stderr_text
    r = sh(sb, "timeout 8 wget -q -O - http://pypi.org/simple/ >/dev/null; echo rc=$?")
    assert "rc=0" in r.stdout_text
    m = bed.mark()
    r = sh(sb, "timeout 8 wget -q -O - http://github.com/ 2>&1; echo rc=$?")
    assert "rc=0" not in r.stdout_text
    bed.assert_nothing_seen(m)


def test_cidr_routes_with_ports_and_metadata_deny(make, bed):
    echo = bed.addr("example.test").rsplit(".", 1)[0] + ".77"
    sb = make(NetworkPolicy(allowed_routes=[Route(f"{echo}/32", ports=[9000])],
                            denied_routes=["169.254.169.254/32"]))
    assert tcp(sb, echo, 9000, "hi") == "hi"
    m = bed.mark()
    assert tcp(sb, echo, 7) == ""
    assert tcp(sb, "169.254.169.254", 80) == ""
    bed.assert_nothing_seen(m)


def test_wildcard_vs_apex_case_insensitive_and_empty(make, bed):
    sb = make(NetworkPolicy(allowed_hosts=["*.GitHub.com"]))
    r = sh(sb, "timeout 8 wget -q -O - http://API.github.COM/ >/dev/null; echo rc=$?")
    assert "rc=0" in r.stdout_text
    m = bed.mark()
    r = sh(sb, "timeout 8 wget -q -O - http://github.com/ >/dev/null 2>&1; echo rc=$?")
    assert "rc=0" not in r.stdout_text
    bed.assert_nothing_seen(m)
    empty = make(NetworkPolicy(allowed_hosts=[]))
    m = bed.mark()
    r = sh(empty, "timeout 8 wget -q -O - http://example.test/ >/dev/null 2>&1; echo rc=$?")
    assert "rc=0" not in r.stdout_text
    bed.assert_nothing_seen(m)


# ---------- adversarial: each refused, nothing reaches the bed ----------

def _pypi(bed):
    return bed.addr("pypi.org")


HOST_TRICKS = [
    "pypi.org", "PYPI.ORG", "pypi.org.", "pypi.org:80", "xn--pypi-9sa.org", "example.test@pypi.org",
    "example.test.pypi.org", "pypi.org%00.example.test", "localhost", "0", "127.0.0.1",
    "0x7f000001", "2130706433", "0177.0.0.1", "169.254.169.254", "0xa9fea9fe", "2852039166",
    "0251.0376.0251.0376", "[::ffff:169.254.169.254]", "[::1]",
]


@pytest.mark.parametrize("host", HOST_TRICKS)
def test_host_header_tricks_are_refused(make, bed, host):
    sb = make(POLICY)
    m = bed.mark()
    line = http(sb, _pypi(bed), host)
    assert " 200 " not in line, line
    bed.assert_nothing_seen(m)


def test_absolute_form_target_naming_another_host(make, bed):
    sb = make(POLICY)
    m = bed.mark()
    line = http(sb, bed.addr("example.test"), "example.test", path="http://pypi.org/")
    assert " 200 " not in line, line
    bed.assert_nothing_seen(m)


def test_duplicate_host_headers(make, bed):
    sb = make(POLICY)
    m = bed.mark()
    line = http(sb, _pypi(bed), "example.test", extra="Host: pypi.org\\r\\n")
    assert " 200 " not in line, line
    bed.assert_nothing_seen(m)


@pytest.mark.parametrize("sni", ["pypi.org", "PyPI.org.", "xn--e1afmkfd.org", ""])
def test_sni_not_allowed_is_reset(make, bed, sni):
    sb = make(POLICY)
    m = bed.mark()
    assert tls(sb, _pypi(bed), sni or None) == 0
    bed.assert_nothing_seen(m)


def test_allowed_sni_is_dialed_at_its_own_address(make, bed):
    """SNI example.test sent to pypi.org's address: the proxy dials
    example.test's address, never the one the sandbox named."""
    sb = make(POLICY)
    m = bed.mark()
    assert tls(sb, _pypi(bed), "example.test") > 0
    bed.settle()
    conns = bed.connections("web", since=m)
    assert conns and all(c["local"].split(":")[0] == bed.addr("example.test") for c in conns
                         if "local" in c), conns


def test_dns_rebinding_is_refused(make, bed):
    sb = make(NetworkPolicy(allowed_hosts=["*.rebind.example.test"]))
    name = "r%d.rebind.example.test" % int(time.time() * 1000)
    # first answer: the bed (allowed); the proxy's own resolution then gets 127.0.0.1
    sh(sb, f"nslookup {name} >/dev/null 2>&1")
    m = bed.mark()
    line = http(sb, bed.addr("example.test").rsplit(".", 1)[0] + ".40", name)
    assert " 200 " not in line, line
    assert not bed.http_requests(since=m, host=name)


def test_raw_tcp_to_resolved_but_unasked_ip(make, bed):
    sb = make(POLICY)
    m = bed.mark()
    assert tcp(sb, _pypi(bed), 9000) == ""
    bed.assert_nothing_seen(m)


def udp_send(sb, ip, port, tag="probe"):
    """UDP datagrams to ip:port (busybox's nc has no -u: a TFTP read
    request naming tag, repeated until tftp gives up; the bed's udp_echo
    logs each and echoes it back)."""
    return sh(sb, f"tftp -g -r {tag} -l /tmp/tftp-{tag} {ip} {port} 2>&1; rm -f /tmp/tftp-{tag}")


def test_udp_passes_without_policy(make, bed):
    """The control for the drops below: the same probe from a sandbox
    without a policy reaches the bed. (ICMP: busybox's ping needs a raw
    socket, which a sandbox cannot open; test_credentials.py proves ICMP
    with ping sockets, with and without a policy.)"""
    sb = make()
    tag = "ctl" + os.urandom(4).hex()
    m = bed.mark()
    udp_send(sb, bed.addr("example.test"), 9000, tag)
    bed.settle()
    got = [e["head"] for e in bed.connections("udp_echo", m)]
    assert got and all(tag in h for h in got), got  # tftp retries: one or more


def test_udp_is_dropped(make, bed):
    sb = make(POLICY)
    m = bed.mark()
    udp_send(sb, bed.addr("example.test"), 9000)
    bed.assert_nothing_seen(m)


def test_icmp_is_dropped(make, bed):
    sb = make(POLICY)
    m = bed.mark()
    r = sh(sb, f"ping -c 1 -W 1 {bed.addr('example.test')} 2>&1; echo rc=$?")
    assert "rc=0" not in r.stdout_text
    bed.assert_nothing_seen(m)


def test_quic_udp_443_is_dropped(make, bed):
    sb = make(POLICY)
    m = bed.mark()
    udp_send(sb, bed.addr("example.test"), 443)
    bed.assert_nothing_seen(m)


def test_dns_exfiltration_long_label_and_txt(make, bed):
    sb = make(POLICY)
    m = bed.mark()
    label = "a" * 63
    r = sh(sb, f"nslookup {label}.{label}.pypi.org 2>&1; nslookup -type=TXT secret.pypi.org 2>&1;"
               f" nslookup -type=TXT {label}.example.tes 2>&1")
    assert "Address" not in r.stdout_text.split("\n", 2)[-1] or "NXDOMAIN" in r.stdout_text
    bed.assert_nothing_seen(m)


def test_dns_to_another_resolver_goes_to_warrens(make, bed):
    sb = make(POLICY)
    m = bed.mark()
    r = sh(sb, f"nslookup pypi.org {bed.dns} 2>&1; echo rc=$?")
    assert bed.addr("pypi.org") not in r.stdout_text, r.stdout_text
    bed.assert_nothing_seen(m)


def test_ipv6_is_unreachable(make, bed):
    sb = make(POLICY)
    m = bed.mark()
    v6 = bed.addr("example.test", family=6)
    assert tcp(sb, v6, 9000) == ""
    bed.assert_nothing_seen(m)


def test_proxy_env_pointing_elsewhere(make, bed):
    sb = make(POLICY)
    m = bed.mark()
    r = sh(sb, f"http_proxy=http://{_pypi(bed)}:9000 timeout 8 wget -q -O - http://pypi.org/ 2>&1;"
               " echo rc=$?")
    assert "rc=0" not in r.stdout_text
    bed.assert_nothing_seen(m)


def test_proxy_env_unset_still_policed(make, bed):
    sb = make(POLICY)
    m = bed.mark()
    r = sh(sb, "unset http_proxy https_proxy HTTP_PROXY HTTPS_PROXY; "
               "timeout 8 wget -q -O - http://pypi.org/ 2>&1; echo rc=$?")
    assert "rc=0" not in r.stdout_text
    bed.assert_nothing_seen(m)


def test_proxy_and_resolver_ports_directly(make, bed, egd):
    _, pport, dport = egress_ports(egd)
    sb = make(POLICY)
    gw = gateway_of(sb)
    m = bed.mark()
    assert http(sb, gw, "pypi.org", port=pport) in ("", ) or " 200 " not in http(
        sb, gw, "pypi.org", port=pport)
    assert tcp(sb, gw, dport) == ""
    r = sh(sb, f"nslookup -port={dport} pypi.org {gw} 2>&1; echo rc=$?")
    assert bed.addr("pypi.org") not in r.stdout_text
    bed.assert_nothing_seen(m)


def test_another_sandbox_and_the_host(make, bed):
    other = make()
    sb = make(POLICY)
    m = bed.mark()
    assert tcp(sb, addr_of(other), 9000) == ""
    assert tcp(sb, bed.layout.host_link4[0], 22) == ""
    assert tcp(sb, "127.0.0.1", 22) == ""
    bed.assert_nothing_seen(m)


def test_denied_routes_beat_allowed_hosts(make, bed):
    sb = make(NetworkPolicy(allowed_hosts=["example.test"],
                            denied_routes=[bed.addr("example.test") + "/32"]))
    m = bed.mark()
    r = sh(sb, "timeout 8 wget -q -O - http://example.test/ 2>&1; echo rc=$?")
    assert "rc=0" not in r.stdout_text
    assert not bed.http_requests(since=m, host="example.test")
    evs = wait_events(sb, lambda e: e.kind == "tcp" and e.verdict == "deny")
    assert evs and evs[0].rule.startswith("denied_routes[0]"), evs


# ---------- events, learn ----------

def test_events_fields(make, bed):
    sb = make(POLICY)
    sh(sb, "timeout 8 wget -q -O - http://example.test/hello >/dev/null")
    http(sb, _pypi(bed), "pypi.org")
    evs = wait_events(sb, lambda e: e.kind == "tcp", n=2)
    ok = [e for e in evs if e.verdict == "allow"]
    no = [e for e in evs if e.verdict == "deny"]
    assert ok and ok[0].host == "example.test" and ok[0].dialed == bed.addr("example.test") + ":80"
    assert ok[0].bytes_up > 0 and ok[0].bytes_down > 0 and ok[0].rule.startswith("allowed_hosts")
    assert no and no[0].host == "pypi.org" and no[0].dialed == "" and no[0].reason
    assert any(e.kind == "dns" and e.host == "example.test" for e in sb.network_events())
    probe = [e for e in sb.network_events() if e.kind == "probe"]
    assert len(probe) == 1 and probe[0].verdict == "deny" and probe[0].seq == 1


def test_unknown_sandbox_events_not_found(client):
    with pytest.raises(wr.NotFound):
        client._unary(client._sandboxes.ListNetworkEvents,
                      __import__("warren._proto.warren.v1.sandboxes_pb2", fromlist=["x"])
                      .ListNetworkEventsRequest(sandbox="sb-0000000000000000"))


def test_ended_sandbox_events_stay_readable(make, client):
    sb = make(POLICY)
    sh(sb, "nslookup example.test >/dev/null 2>&1")
    wait_events(sb, lambda e: e.kind == "dns")
    sb.terminate(grace_period_seconds=1)
    assert any(e.kind == "dns" for e in client.get(id=sb.id).network_events())


def test_learn_and_suggest(make, bed, egd):
    echo = bed.addr("example.test").rsplit(".", 1)[0] + ".79"
    sb = make(NetworkPolicy(learn=True))
    assert tcp(sb, echo, 9000) == "ping"
    wait_events(sb, lambda e: e.kind == "tcp" and e.verdict == "allow")
    p = subprocess.run([str(WARREN_CLI), "--addr", egd.unix_addr, "sandbox", "egress", sb.id,
                        "--suggest-policy", "--json"], capture_output=True, text=True, timeout=30)
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout)["flags"] == ["--route", f"{echo}/32:9000"]


def test_no_policy_dns_through_the_resolver_open(make, bed):
    sb = make()
    assert not sb.info.egress_enforced
    r = sh(sb, "timeout 8 wget -q -O - http://example.test/hello")
    assert r.exit_code == 0, r.stderr_text
    evs = wait_events(sb, lambda e: e.kind == "dns" and e.host == "example.test")
    assert evs and evs[0].verdict == "allow"


# ---------- warren-egress killed, nft elements ----------

def test_kill_egress_mid_transfer(make, bed, egd):
    pid, _, _ = egress_ports(egd)
    sb = make(POLICY)
    sb2 = make(POLICY)
    m0 = bed.mark()
    t = sb.exec_start("sh", "-c", "timeout 20 wget -q -O /dev/null "
                      "http://example.test/bytes/50000000000; echo rc=$?")
    assert t.pid  # started
    time.sleep(1.5)  # mid-transfer (50 GB take far longer)
    os.kill(pid, signal.SIGKILL)
    # meanwhile: nothing unfiltered
    m = bed.mark()
    assert tcp(sb2, _pypi(bed), 9000) == ""
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        logs = egd.read_log()
        if len(re.findall(r"warren-egress running \(pid", logs)) >= 2:
            break
        time.sleep(0.1)
    assert len(re.findall(r"warren-egress running \(pid", egd.read_log())) >= 2
    # (the web server logs the cut transfer's request when it ends: the
    # other servers and the bed's DNS only)
    bed.assert_nothing_seen(m, servers=["tcp_echo", "udp_echo", "dns"])
    # back: new connections decided correctly
    r = sh(sb2, "timeout 8 wget -q -O - http://example.test/hello")
    assert r.exit_code == 0 and "/hello" in r.stdout_text
    m = bed.mark()
    assert " 200 " not in http(sb2, _pypi(bed), "pypi.org")
    bed.assert_nothing_seen(m)
    out = t.wait()
    assert "rc=0" not in out.stdout_text, out.stdout_text  # the transfer failed


def test_open4_after_cycles(client, egd):
    """open4 holds the sandboxes without a policy (and warm-pool entries,
    put in ahead): a policed sandbox's address is never in it while it runs,
    and nothing is left after the cycles."""
    import ipaddress
    for i in range(10):
        with client.create(image=IMAGE, entrypoint=["sleep", "infinity"]) as op:
            open_addr = addr_of(op)
            # put in over nfnetlink (sbx_nft_class_set), as nft sees it
            assert open_addr in nft_set(egd.table, "open4"), (open_addr, i)
        with client.create(image=IMAGE, entrypoint=["sleep", "infinity"],
                           network_policy=POLICY) as po:
            assert po.info.egress_enforced
            a = addr_of(po)
            assert a not in nft_set(egd.table, "open4"), (a, i)
    time.sleep(0.5)
    elements = nft_set(egd.table, "open4")
    net = ipaddress.ip_network(egd.range)
    assert all(ipaddress.ip_address(x) in net for x in elements), elements
    assert len(elements) == 0, elements  # egd has no warm pool
    assert open_addr


# ---------- a warrend restart ----------

@pytest.mark.parametrize("pool", [0, 2])
def test_restart_registers_policies_again(bed, pool):
    """kill -9 of warrend (its warren-egress exits with it): the new one
    rewrites the table (every sandbox policed until recovery), registers the
    policed sandbox from its stored policy and the open one as OPEN. With a
    warm pool both are claimed entries (recorded RUNNING before they are
    registered: the policy is on disk first)."""
    from test_lifecycle import Restartable
    life = Restartable()
    try:
        life.start(extra=["--upstream-dns", bed.dns, "--warm-pool", str(pool)])
        import_image(life, IMAGE)
        from test_lifecycle import pool_ids, wait_for
        pooled = wait_for(lambda: len(pool_ids(life)) == pool and pool_ids(life), 20,
                          "the pool to fill") if pool else set()
        with wr.SandboxClient(life.unix_addr) as c:
            sb = c.create(image=IMAGE, entrypoint=["sleep", "infinity"], network_policy=POLICY)
            op = c.create(image=IMAGE, entrypoint=["sleep", "infinity"])
            assert sb.info.egress_enforced
            if pool:
                assert sb.id in pooled  # a claimed entry, policed
        life.kill9()
        life.start(extra=["--upstream-dns", bed.dns])
        with wr.SandboxClient(life.unix_addr) as c:
            h = c.get(id=sb.id)
            assert h.info.egress_enforced
            m = bed.mark()
            assert " 200 " not in http(h, _pypi(bed), "pypi.org")
            assert tcp(h, _pypi(bed), 9000) == ""
            bed.assert_nothing_seen(m)
            r = sh(h, "timeout 8 wget -q -O - http://example.test/hello")
            assert r.exit_code == 0 and "/hello" in r.stdout_text
            o = c.get(id=op.id)
            assert not o.info.egress_enforced
            assert tcp(o, bed.addr("example.test").rsplit(".", 1)[0] + ".90", 9000) == "ping"
            h.terminate()
            o.terminate()
    finally:
        life.destroy()


def test_create_fails_closed_when_egress_does_not_answer(client, egd, bed):
    """warren-egress stopped (SIGSTOP): a create with a policy cannot be
    registered or verified and fails; nothing of it runs; once the process
    runs again creates succeed and are enforced."""
    # the newest warren-egress (an earlier test may have killed the previous
    # one; wait until its replacement is up and logged)
    deadline = time.monotonic() + 10
    while True:
        pid = int(re.findall(r"warren-egress running \(pid (\d+)", egd.read_log())[-1])
        try:
            os.kill(pid, 0)
            break
        except ProcessLookupError:
            assert time.monotonic() < deadline, "no live warren-egress"
            time.sleep(0.05)
    os.kill(pid, signal.SIGSTOP)
    try:
        with pytest.raises((wr.Unavailable, wr.FailedPrecondition)) as ei:
            client.create(image=IMAGE, entrypoint=["sleep", "infinity"], network_policy=POLICY)
        assert "egress" in ei.value.message, ei.value.message
    finally:
        os.kill(pid, signal.SIGCONT)
    with client.create(image=IMAGE, entrypoint=["sleep", "infinity"], network_policy=POLICY) as sb:
        assert sb.info.egress_enforced
        m = bed.mark()
        assert tcp(sb, _pypi(bed), 9000) == ""
        bed.assert_nothing_seen(m)


def test_self_check_fails_without_the_redirect(client, egd, bed):
    """The table's redirect taken away (chain egress_nat flushed): the probe
    from a new policed sandbox reaches nothing, no EVENT comes, and the
    create fails FAILED_PRECONDITION; put back, creates succeed again."""
    saved = subprocess.run(["nft", "list", "chain", "inet", egd.table, "egress_nat"],
                           capture_output=True, text=True, check=True).stdout
    subprocess.run(["nft", "flush", "chain", "inet", egd.table, "egress_nat"], check=True)
    try:
        with pytest.raises(wr.FailedPrecondition) as ei:
            client.create(image=IMAGE, entrypoint=["sleep", "infinity"], network_policy=POLICY)
        assert "egress enforcement could not be verified" in ei.value.message
    finally:
        subprocess.run(["nft", "flush", "chain", "inet", egd.table, "egress_nat"], check=True)
        subprocess.run(["nft", "-f", "-"], input=saved, text=True, check=True)
    with client.create(image=IMAGE, entrypoint=["sleep", "infinity"], network_policy=POLICY) as sb:
        assert sb.info.egress_enforced
        m = bed.mark()
        assert tcp(sb, _pypi(bed), 9000) == ""
        bed.assert_nothing_seen(m)
