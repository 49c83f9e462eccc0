"""The sandbox's veth (struct rt_net), made by the child from inside its new
netns with the peer created directly in ours: eth0 with the address and
the default route, no IPv6, the host end with the gateway address and up,
traffic between the two ends, the same through every warm-pool path, a bad
config refused, and no link left behind (also when the create fails).

Addresses: 100.127.254.0/24 (no warrend range: those are 100.96-111/16);
host-end names "wrt<pid>..." (never a warrend's "wr" + 8 hex)."""
import os
import socket
import subprocess
import threading

import pytest

PRESTART = ["none", "same", "bare", "nolayers"]


def peer_name(k):
    return "wrt%d%02d" % (os.getpid() % 10000, k)


def net_opt(k):
    return ["--net", "%s:100.127.254.%d:100.127.254.%d/30" % (peer_name(k), 4 * k + 2, 4 * k + 1)]


def link_exists(name):
    return subprocess.run(["ip", "link", "show", "dev", name], capture_output=True).returncode == 0


@pytest.mark.parametrize("prestart", PRESTART)
def test_veth_inside(sandbox, prestart):
    k = PRESTART.index(prestart) + 1
    opts = net_opt(k) + ([] if prestart == "none" else ["--prestart", prestart])
    r = sandbox.sh("ip -o -4 addr show dev eth0; ip route; cat /proc/net/if_inet6; "
                   "cat /etc/hosts; cat /proc/sys/net/ipv4/ping_group_range; "
                   "cat /sys/class/net/eth0/operstate", opts=opts)
    out = r.stdout.decode()
    assert r.returncode == 0, r.stderr.decode()
    assert "inet 100.127.254.%d/30" % (4 * k + 2) in out, out
    assert "default via 100.127.254.%d dev eth0" % (4 * k + 1) in out, out
    assert "eth0" not in "".join(l for l in out.splitlines() if l.count(" ") >= 5 and
                                 len(l.split()[0]) == 32), out  # no IPv6 address on eth0
    assert "100.127.254.%d\t" % (4 * k + 2) in out, out  # /etc/hosts: own address
    # ICMP ping sockets for every group of its netns (of its range, in a
    # user namespace: seen from inside as 0..65535)
    assert "0\t2147483647" in out or "0\t65535" in out, out
    assert out.strip().endswith("up"), out
    assert not link_exists(peer_name(k))


def test_traffic_between_the_ends(sandbox):
    """The host end answers at the gateway address (a listener of ours)."""
    srv = socket.socket()
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    srv.bind(("0.0.0.0", 0))
    srv.listen(1)
    port = srv.getsockname()[1]
    got = []

    def accept():
        srv.settimeout(20)
        try:
            c, peer = srv.accept()
            got.append((peer[0], c.recv(100)))
            c.close()
        except OSError:
            pass

    t = threading.Thread(target=accept)
    t.start()
    try:
        r = sandbox.sh("echo hello | nc -w 5 100.127.254.41 %d" % port,
                       opts=["--net", "%s:100.127.254.42:100.127.254.41/30" % peer_name(10)])
    finally:
        t.join()
        srv.close()
    assert r.returncode == 0, r.stderr.decode()
    assert got == [("100.127.254.42", b"hello\n")]
    assert not link_exists(peer_name(10))


def test_ipv6_off_on_the_host_end(sandbox, tmp_path):
    """While the sandbox runs, the host end has the gateway address and no
    IPv6 address."""
    flag = tmp_path / "seen"
    name = peer_name(11)
    p = subprocess.Popen(sandbox.argv(["/bin/sh", "-c", "sleep 2"],
                                      opts=["--net", "%s:100.127.254.46:100.127.254.45/30" % name]),
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        for _ in range(100):
            if link_exists(name):
                break
            import time
            time.sleep(0.02)
        out = subprocess.run(["ip", "addr", "show", "dev", name], capture_output=True,
                             text=True).stdout
        assert "inet 100.127.254.45/30" in out, out
        assert "inet6" not in out, out
        assert ",UP" in out or "<UP" in out or "UP," in out, out
        flag.write_text("ok")
    finally:
        p.wait(timeout=30)
    assert not link_exists(name)


def test_bad_net_refused(sandbox):
    for bad in ("wrt-bad:100.127.254.50:100.127.254.49/32",   # prefix
                "wrt-bad:100.127.254.50:100.127.255.49/30",   # not one prefix
                "wrt-bad:100.127.254.50:100.127.254.50/30",   # same address
                "wrt/bad:100.127.254.50:100.127.254.49/30",   # name
                "waytoolongname00:100.127.254.50:100.127.254.49/30"):
        r = sandbox.sh("true", opts=["--net", bad])
        assert r.returncode != 0, bad
    assert not link_exists("wrt-bad")


def test_existing_name_fails_and_leaves_it(sandbox):
    """A host end whose name is taken: the create fails naming the step, and
    the link that was there stays (it is not ours)."""
    name = peer_name(12)
    subprocess.run(["ip", "link", "add", name, "type", "veth", "peer", "name", name + "p"],
                   check=True)
    try:
        r = sandbox.sh("true", opts=["--net", "%s:100.127.254.54:100.127.254.53/30" % name])
        assert r.returncode != 0
        assert b"network: the host end %s exists already" % name.encode() in r.stderr, r.stderr
        assert link_exists(name)
    finally:
        subprocess.run(["ip", "link", "del", name])


def test_cycles_leave_no_link(sandbox):
    for i in range(30):
        r = sandbox.sh("true", opts=net_opt(20 + i % 5) + (["--prestart", "same"] if i % 2 else []))
        assert r.returncode == 0, r.stderr.decode()
    out = subprocess.run(["ip", "-o", "link"], capture_output=True, text=True).stdout
    assert "wrt%d" % (os.getpid() % 10000) not in out
