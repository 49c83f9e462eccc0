"""The default network (docs/network.md "The default network"): every
sandbox gets eth0 (a veth made inside its netns) with a /30 of the daemon's
range, NAT out of the host, the upstream resolver in /etc/resolv.conf, and
nothing else: no other sandbox, no address or port of the host, no
link-local/metadata, no IPv6. block_network=True gives a loopback only.

All traffic stays on this machine: the daemon's upstream resolver is the
fake internet's DNS (tests/fakenet), and every destination a sandbox is
sent to is either in the bed's ranges (198.18.<s>.0/24, 2001:db8:…), on the
host (its gateway address, the bed-facing 198.19.<s>.1), another
sandbox, or 169.254.169.254 under the bed's blackhole route."""
import fcntl
import os
import re
import select
import shutil
import signal
import socket
import subprocess
import tarfile
import tempfile
import threading
import time

import pytest

import warren as wr
from conftest import ROOT, WARREN_CLI, Daemon, import_image

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="needs root")


# ---------- fixtures ----------

@pytest.fixture(scope="module")
def bed():
    """A fake internet of this module's own, with the metadata address
    blackholed on the host (a sandbox is sent there)."""
    from fakenet.bed import FakeNet
    b = FakeNet(ssh=False, blackhole_metadata=True)
    b.start()
    try:
        yield b
    finally:
        b.stop()


def daemon_net(d):
    """(range, table) a daemon logged at start."""
    m = re.search(r"sandboxes get /30 blocks of (\S+) \(nftables table inet (\S+)\)", d.read_log())
    assert m, d.read_log()
    return m.group(1), m.group(2)


def wr_links():
    """Names of the host's wr* links."""
    out = subprocess.run(["ip", "-o", "link", "show"], capture_output=True, text=True).stdout
    return sorted(m.group(1) for m in re.finditer(r"^\d+: (wr[0-9a-f]{8})[@:]", out, re.M))


def in_range(link, rng):
    """Is the host end `link` (wr + hex of gateway >> 2) in rng?"""
    base, prefix = rng.split("/")
    b = int.from_bytes(socket.inet_aton(base), "big")
    gw = int(link[2:], 16) << 2 | 1
    mask = (0xffffffff << (32 - int(prefix))) & 0xffffffff
    return gw & mask == b


def links_left(rng, timeout=10):
    """The host ends still in rng once they had time to go: a sandbox's
    veth goes with its network namespace, which the kernel tears down
    asynchronously after the last process left it (a workqueue: slower
    under load). While this runs the range's host-wide lock is taken, so
    that no warrend starting meanwhile (another test run on this host)
    can take the range and make links of its own in it; if one holds it
    already, its links cannot be told from a leak: [] (nothing to judge)."""
    base, prefix = rng.split("/")
    path = "/run/warren/net/%s-%s.lock" % (base, prefix)
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        try:
            fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            return []
        deadline = time.monotonic() + timeout
        while True:
            left = [l for l in wr_links() if in_range(l, rng)]
            if not left or time.monotonic() > deadline:
                return left
            time.sleep(0.1)
    finally:
        os.close(fd)


def nft_table(table):
    p = subprocess.run(["nft", "list", "table", "inet", table], capture_output=True, text=True)
    return p.stdout if p.returncode == 0 else None


@pytest.fixture(scope="module")
def netd(bed):
    """A daemon whose sandboxes resolve with the bed's DNS, with a warm pool
    (its entries have their veth made ahead), busybox imported."""
    d = Daemon(extra_args=["--upstream-dns", bed.dns, "--warm-pool", "2"])
    try:
        import_image(d, "busybox:latest")
        d.range, d.table = daemon_net(d)
        yield d
    finally:
        rng = getattr(d, "range", None)
        table = getattr(d, "table", None)
        d.stop()
        # --terminate-on-exit (the fixtures' default): nothing stays
        if rng:
            assert links_left(rng) == []
            assert nft_table(table) is None


@pytest.fixture
def client(netd):
    c = wr.SandboxClient(netd.unix_addr)
    yield c
    c.close()


@pytest.fixture(scope="module")
def tools_image(netd):
    """The Debian base image (scripts/base-image.sh, cached) plus curl and
    pip copied from this Debian 12 host (the image has neither), imported
    as nettools:latest."""
    p = subprocess.run(["bash", str(ROOT / "scripts/base-image.sh")], capture_output=True,
                       text=True, timeout=900)
    if p.returncode != 0:
        pytest.skip("no Debian base image: " + p.stderr[-300:])
    base = p.stdout.strip().splitlines()[-1]
    import pip
    pipdir = os.path.dirname(pip.__file__)
    tmp = tempfile.mkdtemp(prefix="warren-nettools-")
    try:
        tar = os.path.join(tmp, "nettools.tar")
        shutil.copyfile(base, tar)
        with tarfile.open(tar, "a") as t:
            t.add("/usr/bin/curl", "./usr/bin/curl")
            t.add(os.path.realpath("/lib/x86_64-linux-gnu/libcurl.so.4"),
                  "./usr/lib/x86_64-linux-gnu/libcurl.so.4")
            t.add(pipdir, "./usr/lib/python3/dist-packages/pip",
                  filter=lambda ti: None if "__pycache__" in ti.name else ti)
        r = subprocess.run([WARREN_CLI, "--addr", netd.unix_addr, "image", "import",
                            "--env", "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
                            "nettools:latest", tar], capture_output=True, text=True, timeout=300)
        assert r.returncode == 0, r.stderr
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return "nettools:latest"


def sh(sb, script, timeout=60, env=None):
    return sb.exec("sh", "-c", script, timeout_secs=timeout, env=env)


def addr_of(sb):
    r = sh(sb, "ip -o -4 addr show dev eth0")
    m = re.search(r"inet (\d+\.\d+\.\d+\.\d+)/30", r.stdout_text)
    assert m, r.stdout_text + r.stderr_text
    return m.group(1)


def gateway_of(sb):
    r = sh(sb, "ip route")
    m = re.search(r"default via (\S+)", r.stdout_text)
    assert m, r.stdout_text
    return m.group(1)


def tcp_ok(sb, host, port, tries=1):
    """Can sb open a TCP connection to host:port (busybox nc, 3 s)?"""
    r = sh(sb, "echo hi | nc -w 3 %s %d >/dev/null 2>&1 && echo OPEN || echo CLOSED" % (host, port))
    return "OPEN" in r.stdout_text


class Listener:
    """TCP listeners on the host that count accepted connections."""

    def __init__(self, addrs):
        self.accepted = []
        self.socks = []
        port = None
        for a in addrs:
            s = socket.socket()
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            s.bind((a, port or 0))
            port = s.getsockname()[1]
            s.listen(8)
            s.settimeout(0.2)
            self.socks.append(s)
        self.port = port
        self.stop = False
        self.t = threading.Thread(target=self._run, daemon=True)
        self.t.start()

    def _run(self):
        while not self.stop:
            for s in self.socks:
                try:
                    c, peer = s.accept()
                    self.accepted.append(peer)
                    c.close()
                except (socket.timeout, OSError):
                    pass

    def close(self):
        self.stop = True
        self.t.join()
        for s in self.socks:
            s.close()


# ---------- what a sandbox gets ----------

def test_eth0_address_route_resolver(client, netd, bed):
    with client.create(image="busybox:latest", name="net-basic") as sb:
        a = addr_of(sb)
        gw = gateway_of(sb)
        assert in_range("wr%08x" % (int.from_bytes(socket.inet_aton(gw), "big") >> 2), netd.range)
        assert int.from_bytes(socket.inet_aton(a), "big") == \
            int.from_bytes(socket.inet_aton(gw), "big") + 1
        # no IPv6 address at all but the loopback's
        v6 = sh(sb, "cat /proc/net/if_inet6").stdout_text
        assert all(line.split()[-1] == "lo" for line in v6.splitlines()), v6
        resolv = sh(sb, "cat /etc/resolv.conf").stdout_text
        # the resolver is warren-egress's, reached at the gateway (its port
        # 53 is redirected there); the bed's DNS is its upstream
        assert re.search(r"^nameserver %s$" % re.escape(gw), resolv, re.M), resolv
        hosts = sh(sb, "cat /etc/hosts").stdout_text
        assert re.search(r"^%s\s+net-basic$" % re.escape(a), hosts, re.M), hosts
        assert "localhost" in hosts
        # the host end exists, named after the gateway, with the gateway address
        peer = "wr%08x" % (int.from_bytes(socket.inet_aton(gw), "big") >> 2)
        out = subprocess.run(["ip", "-o", "-4", "addr", "show", "dev", peer], capture_output=True,
                             text=True).stdout
        assert gw + "/30" in out, out
    # terminated: the host end goes right after the answer (deleted on a
    # worker thread once TerminateSandbox is answered, see docs/network.md)
    deadline = time.monotonic() + 5
    while peer in wr_links() and time.monotonic() < deadline:
        time.sleep(0.02)
    assert peer not in wr_links()


def test_busybox_reaches_the_bed_by_name(client, bed):
    m = bed.mark()
    with client.create(image="busybox:latest") as sb:
        r = sh(sb, "wget -q -O - http://example.test/hello")
        assert r.exit_code == 0, r.stderr_text
        assert '"path": "/hello"' in r.stdout_text or '"/hello"' in r.stdout_text
    bed.settle()
    assert bed.dns_queries(since=m, name="example.test")
    reqs = bed.http_requests(since=m, host="example.test")
    assert reqs and reqs[0]["path"] == "/hello"
    # masqueraded: the bed sees the host's bed-facing address
    assert reqs[0]["client"].split(":")[0].strip("[]") == bed.layout.host_link4[0]


def test_real_tools_reach_the_fake_internet(client, bed, tools_image):
    """curl over https with the bed's CA, git clone over https, pip download
    from the bed's index, apt-get from its repository."""
    ca = open(bed.ca_pem).read()
    env = {"SSL_CERT_FILE": "/tmp/ca.pem", "CURL_CA_BUNDLE": "/tmp/ca.pem",
           "GIT_SSL_CAINFO": "/tmp/ca.pem", "PIP_CERT": "/tmp/ca.pem",
           "REQUESTS_CA_BUNDLE": "/tmp/ca.pem", "PIP_CONFIG_FILE": "/dev/null",
           "PIP_DISABLE_PIP_VERSION_CHECK": "1", "HOME": "/tmp"}
    m = bed.mark()
    with client.create(image=tools_image) as sb:
        r = sb.exec("sh", "-c", 'printf %s "$1" > /tmp/ca.pem', "sh", ca)
        assert r.exit_code == 0, r.stderr_text
        r = sh(sb, "curl -sS https://api.github.com/echo", env=env)
        assert r.exit_code == 0, r.stderr_text
        assert '"sni": "api.github.com"' in r.stdout_text, r.stdout_text
        r = sh(sb, "git clone -q %s /tmp/repo && cat /tmp/repo/README.md && "
               "git -C /tmp/repo rev-parse HEAD" % bed.git["https_url"], env=env, timeout=120)
        assert r.exit_code == 0, r.stderr_text
        assert bed.git["head"] in r.stdout_text
        r = sh(sb, "python3 -m pip download -q fakenet-extra --index-url %s -d /tmp/wheels && "
               "ls /tmp/wheels" % bed.pypi["index_url"], env=env, timeout=180)
        assert r.exit_code == 0, r.stdout_text + r.stderr_text
        assert "fakenet_extra" in r.stdout_text and "fakenet_hello" in r.stdout_text
        r = sh(sb, "rm -f /etc/apt/sources.list /etc/apt/sources.list.d/*; "
               "echo '%s' > /etc/apt/sources.list.d/fakenet.list; "
               "apt-get -q -o APT::Sandbox::User=root update >/tmp/apt.log 2>&1 && "
               "apt-get -q -y -o APT::Sandbox::User=root install fakenet-hello >>/tmp/apt.log 2>&1 "
               "&& fakenet-hello; rc=$?; [ $rc = 0 ] || cat /tmp/apt.log; exit $rc"
               % bed.apt["sources_line"], env=env, timeout=300)
        assert r.exit_code == 0, r.stdout_text + r.stderr_text
    bed.settle()
    hosts = {q["host"] for q in bed.http_requests(since=m)}
    assert {"api.github.com", "github.com", "pypi.org", "files.pythonhosted.org",
            "deb.debian.org"} <= hosts, hosts


# ---------- isolation ----------

def test_sandboxes_cannot_reach_each_other(client, bed):
    listen = ["nc", "-ll", "-p", "8080", "-e", "echo", "pong"]
    with client.create(image="busybox:latest", entrypoint=listen) as a, \
            client.create(image="busybox:latest", entrypoint=listen) as b:
        a_addr, b_gw = addr_of(a), gateway_of(b)
        # wait until it listens (from inside a itself)
        for _ in range(50):
            if tcp_ok(a, "127.0.0.1", 8080):
                break
            time.sleep(0.1)
        assert tcp_ok(a, a_addr, 8080), "control: a reaches its own listener"
        assert tcp_ok(b, bed.addr("example.test"), 80), "control: b reaches the bed"
        assert not tcp_ok(b, a_addr, 8080)
        r = sh(b, "ping -c 1 -W 2 %s" % a_addr)
        assert r.exit_code != 0
        # nor a's gateway (the host)
        assert not tcp_ok(a, b_gw, 8080)


def test_host_addresses_and_ports_unreachable(client, bed):
    with client.create(image="busybox:latest") as sb:
        gw = gateway_of(sb)
        lst = Listener(["0.0.0.0"])
        lst2 = Listener([gw])
        try:
            host_bed_side = bed.layout.host_link4[0]
            assert tcp_ok(sb, bed.addr("example.test"), 80), "control: the bed is reachable"
            # (gw, 53) is warren-egress's resolver now (UDP and TCP port 53 of
            # any address are redirected to it): not a host port
            for target, port in ((gw, lst.port), (gw, lst2.port), (host_bed_side, lst.port),
                                 (gw, 22)):
                assert not tcp_ok(sb, target, port), (target, port)
            # port 53 of the gateway is warren-egress's resolver (redirected),
            # not the host's
            r = sh(sb, "nslookup example.test %s" % gw, timeout=30)
            assert bed.addr("example.test") in r.stdout_text
            # control: the same listeners take a connection from the host itself
            with socket.create_connection(("127.0.0.1", lst.port), timeout=2):
                pass
            time.sleep(0.5)
        finally:
            lst.close()
            lst2.close()
        assert [p for p in lst.accepted if p[0] != "127.0.0.1"] == []
        assert lst2.accepted == []


def test_metadata_and_link_local_blocked(client, bed, netd):
    m = bed.mark()
    with client.create(image="busybox:latest") as sb:
        for target in ("169.254.169.254", "169.254.10.10", "224.0.0.1"):
            assert not tcp_ok(sb, target, 80), target
        r = sh(sb, "wget -q -T 3 -O - http://metadata.example.test/ 2>&1; echo rc=$?")
        assert "rc=0" not in r.stdout_text
    table = nft_table(netd.table)
    assert "169.254.0.0/16" in table and "224.0.0.0/4" in table
    bed.settle()
    assert bed.http_requests(since=m) == []


def test_no_ipv6_path(client, bed):
    with client.create(image="busybox:latest") as sb:
        m = bed.mark()
        v6 = bed.addr("example.test", family=6)
        r = sh(sb, "echo x | nc -w 3 %s 80 2>&1; echo rc=$?" % v6)
        assert "rc=0" not in r.stdout_text, r.stdout_text
        r = sh(sb, "wget -q -T 3 -O - 'http://[%s]/' 2>&1; echo rc=$?" % v6)
        assert "rc=0" not in r.stdout_text, r.stdout_text
        bed.settle()
        assert bed.http_requests(since=m) == []
        counts = bed.packets_since(m)
        if counts is not None:
            assert counts.get("tcp", 0) == 0, counts


def test_block_network_is_loopback_only(client, bed):
    m = bed.mark()
    with client.create(image="busybox:latest", block_network=True) as sb:
        links = sh(sb, "ip -o link").stdout_text
        assert [l.split(":")[1].strip() for l in links.splitlines()] == ["lo"], links
        assert "nameserver" not in sh(sb, "cat /etc/resolv.conf").stdout_text
        assert not tcp_ok(sb, bed.addr("example.test"), 80)
        assert tcp_ok(sb, "127.0.0.1", 9) is False  # nothing listens; no crash
    bed.assert_nothing_seen(m)


def test_block_network_cli(netd):
    p = subprocess.run([WARREN_CLI, "--addr", netd.unix_addr, "run", "--block-network",
                        "busybox:latest", "--", "sh", "-c", "ip -o link | wc -l"],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip() == "1"


# ---------- start-up checks ----------

@pytest.mark.parametrize("which", ["uplink", "bed"])
def test_range_collision_refuses_to_start(bed, which):
    cidr = "192.0.2.0/24" if which == "uplink" else "198.18.%d.0/24" % bed.slot
    with pytest.raises(RuntimeError) as ex:
        Daemon(extra_args=["--sandbox-cidr", cidr, "--upstream-dns", bed.dns])
    msg = str(ex.value)
    assert "sandbox range %s" % cidr in msg and "overlaps the host's" in msg, msg
    assert "--sandbox-cidr" in msg


def test_bad_cidr_refused(bed):
    with pytest.raises(RuntimeError) as ex:
        Daemon(extra_args=["--sandbox-cidr", "100.96.0.1/16"])
    assert "host bits set (did you mean 100.96.0.0/16?)" in str(ex.value)


# ---------- leaks ----------

def test_1000_cycles_leave_nothing(client, netd):
    n = int(os.environ.get("WARREN_NET_CYCLES", "1000"))
    before_table = nft_table(netd.table)
    before = [l for l in wr_links() if in_range(l, netd.range)]
    ended = set()
    for i in range(n):
        sb = client.create(image="busybox:latest")
        if i % 100 == 0:
            assert sh(sb, "ip -o -4 addr show dev eth0").exit_code == 0
        gw = sh(sb, "ip route").stdout_text if i % 100 == 0 else None
        sb.terminate()
        if gw:
            ended.add("wr%08x" % (int.from_bytes(
                socket.inet_aton(re.search(r"default via (\S+)", gw).group(1)), "big") >> 2))
    time.sleep(0.5)
    after = [l for l in wr_links() if in_range(l, netd.range)]
    # what is left is the warm pool's entries (2), nothing of the ended ones
    assert len(after) <= 2, after
    assert not (ended & set(after)), ended & set(after)
    # the table is the same but for open4, which holds the pool entries'
    # blocks (put in ahead, for a claim without nftables work)
    def without_open4(t):
        return re.sub(r"(set open4 \{[^}]*?)elements = \{[^}]*\}", r"\1", t, flags=re.S)
    table = nft_table(netd.table)
    assert without_open4(table) == without_open4(before_table)
    m = re.search(r"set open4 \{[^}]*?elements = \{([^}]*)\}", table, re.S)
    open4 = [x.strip() for x in m.group(1).split(",")] if m else []
    assert len(open4) <= 2, open4
    assert len(before) <= 2


def test_kill9_restart_keeps_live_and_sweeps_the_rest(bed):
    from test_lifecycle import Restartable
    life = Restartable()
    args = ["--upstream-dns", bed.dns, "--warm-pool", "2"]
    try:
        life.start(extra=args)
        import_image(life, "busybox:latest")
        with wr.SandboxClient(life.unix_addr) as c:
            keep = [c.create(image="busybox:latest") for _ in range(3)]
            gone = c.create(image="busybox:latest")
            keep_addr = [addr_of(s) for s in keep]
            gone_gw = gateway_of(gone)
        m = re.search(r"sandboxes get /30 blocks of (\S+)", life.read_log())
        rng = m.group(1)
        life.kill9()
        # one sandbox dies while warrend is down (its netns goes, its host
        # end with it, maybe not at once); the others keep theirs
        import sqlite3
        db = sqlite3.connect(os.path.join(life.state_dir, "warren.db"), timeout=10)
        pid = db.execute("SELECT init_pid FROM sandboxes WHERE id = ?", (gone.id,)).fetchone()[0]
        db.close()
        # dead before the restart: a SIGKILL is delivered asynchronously, and
        # an init the new warrend still finds running (connectable) would be
        # re-attached and end later through the normal path instead
        pfd = os.pidfd_open(pid)
        try:
            os.kill(pid, signal.SIGKILL)
            assert select.select([pfd], [], [], 10)[0], "init did not exit"
        finally:
            os.close(pfd)
        # restart without a pool (nothing may take a block while we look)
        life.start(extra=["--upstream-dns", bed.dns])
        gone_peer = "wr%08x" % (int.from_bytes(socket.inet_aton(gone_gw), "big") >> 2)
        assert gone_peer not in wr_links()  # swept before serving
        with wr.SandboxClient(life.unix_addr) as c:
            for s, a in zip(keep, keep_addr):
                h = c.get(id=s.id)
                assert addr_of(h) == a
                assert tcp_ok(h, bed.addr("example.test"), 80)
            # a new sandbox gets a block none of the kept ones has
            new = c.create(image="busybox:latest")
            assert addr_of(new) not in keep_addr
            new.terminate()
            for s in keep:
                c.get(id=s.id).terminate()
        deadline = time.monotonic() + 5
        while [l for l in wr_links() if in_range(l, rng)] and time.monotonic() < deadline:
            time.sleep(0.1)
        assert [l for l in wr_links() if in_range(l, rng)] == []
        # kill -9 with the pool full: the restart sweeps the parked entries' links
        life.stop()
        life.start(extra=args)
        time.sleep(1.0)
        life.kill9()
        life.start(extra=args)
        time.sleep(1.0)
        left = [l for l in wr_links() if in_range(l, rng)]
        assert len(left) <= 2, left
    finally:
        life.destroy()
    left = links_left(rng)
    assert left == [], left


def test_stale_table_of_a_killed_warrend_collected(bed):
    """A warrend killed with no sandbox left keeps its table; the next
    warrend to start (any range) removes it. One whose range still has a
    live sandbox keeps it."""
    from test_lifecycle import Restartable
    a, b = Restartable(), Restartable()
    try:
        a.start(extra=["--sandbox-cidr", "100.120.0.0/24", "--upstream-dns", bed.dns])
        import_image(a, "busybox:latest")
        with wr.SandboxClient(a.unix_addr) as c:
            sb = c.create(image="busybox:latest")
        a.kill9()
        assert nft_table("warren_100_120_0_0_24") is not None
        b.start(extra=["--upstream-dns", bed.dns])
        assert nft_table("warren_100_120_0_0_24") is not None  # its sandbox lives
        b.stop()
        a.start(extra=["--sandbox-cidr", "100.120.0.0/24", "--upstream-dns", bed.dns])
        with wr.SandboxClient(a.unix_addr) as c:
            c.get(id=sb.id).terminate()
        deadline = time.monotonic() + 5
        while [l for l in wr_links() if in_range(l, "100.120.0.0/24")] and \
                time.monotonic() < deadline:
            time.sleep(0.1)
        a.kill9()
        b.start(extra=["--upstream-dns", bed.dns])
        assert nft_table("warren_100_120_0_0_24") is None
        assert "removed the table inet warren_100_120_0_0_24" in b.read_log()
    finally:
        for d in (a, b):
            if d.proc and d.proc.poll() is None:
                d.kill9()
        a.destroy()
        b.destroy()
    assert nft_table("warren_100_120_0_0_24") is None
