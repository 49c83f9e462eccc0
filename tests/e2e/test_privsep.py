"""Privilege separation, phases 1 and 2 (issue 16 items 1+2,
docs/privsep.md): with --privsep warrend starts warren-priv (root, its
child), which creates, prestarts, starts and destroys every sandbox (it is
each init's parent) and does the host side of every teardown, counted by
warren-priv itself; kill -9 of warren-priv ends no sandbox, warrend starts
another, which re-attaches them and teardowns go on through it. Without
the flag nothing of this runs."""
import glob
import os
import signal
import socket
import subprocess
import time
import urllib.request

import pytest

import warren as wr
from conftest import DROP, free_port, import_image


def metrics(port):
    out = {}
    with urllib.request.urlopen("http://127.0.0.1:%d/metrics" % port, timeout=10) as r:
        for line in r.read().decode().splitlines():
            if line and not line.startswith("#"):
                k, v = line.rsplit(" ", 1)
                out[k] = float(v)
    return out


def children(pid):
    """(pid, comm, uid) of the processes whose parent is pid."""
    out = []
    for p in os.listdir("/proc"):
        if not p.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % p) as f:
                st = f.read()
            with open("/proc/%s/status" % p) as f:
                uid = [l for l in f if l.startswith("Uid:")][0].split()[1]
        except OSError:
            continue
        comm = st[st.index("(") + 1:st.rindex(")")]
        ppid = int(st[st.rindex(")") + 2:].split()[1])
        if ppid == pid:
            out.append((int(p), comm, int(uid)))
    return out


def priv_children(d):
    return [c for c in children(d.proc.pid) if c[1] == "warren-priv"]


def cgroups_of(sid):
    return (glob.glob("/sys/fs/cgroup/*/warren/" + sid) + glob.glob("/sys/fs/cgroup/warren/" + sid)
            + glob.glob("/sys/fs/cgroup/unified/warren/" + sid))


def wait_for(pred, timeout=10.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        v = pred()
        if v:
            return v
        time.sleep(0.05)
    return pred()


def wr_links():
    out = subprocess.run(["ip", "-o", "link", "show"], capture_output=True, text=True,
                         check=True).stdout
    return {l.split(":")[1].strip().split("@")[0] for l in out.splitlines()
            if l.split(":")[1].strip().startswith("wr")}


CLEANUP = 'warren_priv_requests_total{type="SANDBOX_CLEANUP"}'
SIGNAL = 'warren_priv_requests_total{type="SANDBOX_SIGNAL"}'
FREEZE = 'warren_priv_requests_total{type="SANDBOX_FREEZE"}'


def frozen(sid):
    """Is the sandbox's cgroup frozen (v1 freezer.state or v2 cgroup.freeze)?"""
    for p in glob.glob("/sys/fs/cgroup/freezer/warren/" + sid + "/freezer.state"):
        with open(p) as f:
            return f.read().strip() == "FROZEN"
    for p in (glob.glob("/sys/fs/cgroup/warren/" + sid + "/cgroup.freeze")
              + glob.glob("/sys/fs/cgroup/unified/warren/" + sid + "/cgroup.freeze")):
        with open(p) as f:
            return f.read().strip() == "1"
    raise AssertionError("no freezer for " + sid)
LINK = 'warren_priv_requests_total{type="LINK_DELETE"}'
CREATE = 'warren_priv_requests_total{type="SANDBOX_CREATE"}'
PRESTART = 'warren_priv_requests_total{type="SANDBOX_PRESTART"}'
START = 'warren_priv_requests_total{type="SANDBOX_START"}'
DESTROY = 'warren_priv_requests_total{type="SANDBOX_DESTROY"}'
ATTACH = 'warren_priv_requests_total{type="SANDBOX_ATTACH"}'

# what warren-priv keeps (main.c keep_caps): phase 1's DAC_OVERRIDE,
# DAC_READ_SEARCH, FOWNER, KILL, NET_ADMIN and, for the lifecycle, CHOWN,
# FSETID, SETGID, SETUID, SETPCAP, NET_BIND_SERVICE, SYS_CHROOT,
# SYS_PTRACE, SYS_ADMIN, MKNOD
PRIV_CAPS = sum(1 << b for b in (1, 2, 3, 5, 12, 0, 4, 6, 7, 8, 10, 18, 19, 21, 27))


def ppid_of(pid):
    with open("/proc/%d/stat" % pid) as f:
        st = f.read()
    return int(st[st.rindex(")") + 2:].split()[1])


def init_pid(d, sid):
    """The host pid of sandbox sid's init (its cgroup's first process
    whose parent is not in the cgroup)."""
    from test_lifecycle import sandbox_pids
    pids = sandbox_pids({sid})
    for p in pids:
        try:
            if ppid_of(p) not in pids:
                return p
        except OSError:
            pass
    return None


@pytest.mark.parametrize("pool", [0, 1])
def test_privsep_teardown_by_warren_priv(fresh_warrend, pool):
    port = free_port()
    d = fresh_warrend(extra_args=["--privsep", "--admin-listen", "127.0.0.1:%d" % port,
                                  "--warm-pool", str(pool)])
    import_image(d, "busybox:latest")
    privs = priv_children(d)
    assert len(privs) == 1, children(d.proc.pid)
    ppid, _, uid = privs[0]
    assert uid == 0
    # root, but with only the capabilities its message set needs
    # (PRIV_CAPS), no way to more (bounding set, no_new_privs)
    with open("/proc/%d/status" % ppid) as f:
        st = dict(l.split(":", 1) for l in f.read().splitlines() if ":" in l)
    want = PRIV_CAPS
    assert int(st["CapEff"], 16) == want, st["CapEff"]
    assert int(st["CapPrm"], 16) == want and int(st["CapBnd"], 16) == want
    assert int(st["CapInh"], 16) == 0 and int(st["CapAmb"], 16) == 0
    assert st["NoNewPrivs"].strip() == "1"
    # its own seccomp denylist (src/priv/deny.h; tests/unit/test-priv-deny.c
    # proves what it denies), inherited by the sandboxes under their own
    assert st["Seccomp"].strip() == "2" and st["Seccomp_filters"].strip() == "1", st
    # nothing of warrend's leaks into it: stdio, its socket, the state
    # dir, and its own sealed copy of warren-init (phase 2: it runs it)
    fds = {int(f): os.readlink("/proc/%d/fd/%s" % (ppid, f)) for f in os.listdir("/proc/%d/fd" % ppid)}
    # (and what it holds of the pool's prestarted entry: its cgroups,
    # writable layer, pidfd, park and error pipes, control socket)
    sbx = os.path.join(os.path.realpath(d.state_dir), "sandboxes", "sb-")

    def held(v):
        return ("/warren/sb-" in v and v.startswith("/sys/fs/cgroup/")) or v.startswith(sbx) or \
            v in ("anon_inode:[pidfd]", "anon_inode:[eventpoll]") or v.startswith("pipe:")
    extra = sorted(v for k, v in fds.items() if k > 2 and not held(v))
    socks = [v for v in extra if v.startswith("socket:")]
    assert extra[:2] == ["/memfd:warren-init (deleted)", os.path.realpath(d.state_dir)] \
        and len(socks) == len(extra) - 2 and 1 <= len(socks) <= 1 + pool, fds
    m = metrics(port)
    assert m["warren_priv_pid"] == ppid
    assert m["warren_priv_starts_total"] == 1
    assert m[CLEANUP] == 0 and m["warren_priv_refused_total"] == 0
    if pool:
        # the pool's entry was prestarted by warren-priv
        assert wait_for(lambda: metrics(port)[PRESTART] >= 1)
    with wr.SandboxClient(d.unix_addr) as c:
        before = wr_links()
        sb = c.create(image="busybox:latest", entrypoint=["sleep", "infinity"])
        # this daemon's (other warrends of the host make theirs meanwhile)
        from test_egress_policy import daemon_net
        from test_network import in_range
        rng = daemon_net(d)[0]
        new_links = {l for l in wr_links() - before if in_range(l, rng)}
        r = sb.exec("echo", "hello")
        assert r.stdout_text == "hello\n"
        # phase 2: warren-priv made it (a claim of the pool's entry: its
        # START) and is its init's parent
        m = metrics(port)
        assert (m[START] == 1) if pool else (m[CREATE] == 1), m
        ipid = init_pid(d, sb.id)
        assert ipid and ppid_of(ipid) == ppid, (ipid, ppid)
        sdir = os.path.join(d.state_dir, "sandboxes", sb.id)
        assert os.path.isdir(sdir) and cgroups_of(sb.id)
        # pause and resume: the freezer, by warren-priv
        sb.pause()
        assert frozen(sb.id)
        sb.resume()
        assert not frozen(sb.id)
        assert metrics(port)[FREEZE] == 2
        # a graceful terminate: SIGTERM to init by warren-priv, then the
        # teardown (sleep ignores nothing: it ends at SIGTERM)
        sb.terminate(grace_period_seconds=5)
        # SIGTERM, then (phase 1 of the teardown) the SIGKILL before the
        # end is recorded
        assert metrics(port)[SIGNAL] >= 1
        assert wait_for(lambda: not os.path.exists(sdir)), "sandbox dir left behind"
        assert not cgroups_of(sb.id)
        # warren-priv did it (its own count, reported with each answer)
        assert wait_for(lambda: metrics(port)[DESTROY] == 1)
        assert metrics(port)[CLEANUP] == 0
        # a fresh sandbox brings its veth (a pooled one had it before
        # `before`): without one the LINK_DELETE path would go unchecked
        assert new_links or pool, "no new veth for a fresh sandbox"
        if new_links:
            assert wait_for(lambda: metrics(port)[LINK] >= len(new_links))
            assert wait_for(lambda: not (new_links & wr_links())), "veth host end left"
        m = metrics(port)
        assert m["warren_priv_pid"] == ppid  # the same process all along
        assert m["warren_priv_lost_total"] == 0
        assert "pending" not in c.get(id=sb.id).info.status_message
    log = d.read_log()
    assert "warren-priv started (pid %d" % ppid in log
    # the warm pool's entry (prestarted, never claimed) goes through
    # warren-priv too when warrend stops: nothing of it is left
    sbx_root = os.path.join(d.state_dir, "sandboxes")
    pooled = [n for n in os.listdir(sbx_root) if n.startswith("sb-")]
    assert len(pooled) == pool
    log = d.stop()
    for n in pooled:
        assert not cgroups_of(n), n
    # warren-priv logs each request it carried out at debug level
    assert log.count("warren-priv: SANDBOX_DESTROY: done") == 1 + pool, log


@pytest.mark.skipif(DROP, reason="a dropped warrend exits (status 3) when warren-priv dies: "
                    "test_privsep_drop.py::test_drop_warren_priv_killed")
@pytest.mark.parametrize("pool", [0, 1])
def test_privsep_survives_kill_of_warren_priv(fresh_warrend, pool):
    port = free_port()
    d = fresh_warrend(extra_args=["--privsep", "--admin-listen", "127.0.0.1:%d" % port,
                                  "--warm-pool", str(pool)])
    import_image(d, "busybox:latest")
    first = int(metrics(port)["warren_priv_pid"])
    with wr.SandboxClient(d.unix_addr) as c:
        sb = c.create(image="busybox:latest", entrypoint=["sleep", "infinity"])
        ipid = init_pid(d, sb.id)
        assert ppid_of(ipid) == first  # phase 2: warren-priv is init's parent
        os.kill(first, signal.SIGKILL)
        second = wait_for(lambda: [p for p, _, _ in priv_children(d) if p != first])
        assert second, "warren-priv was not started again"
        assert wait_for(lambda: metrics(port)["warren_priv_pid"] == second[0])
        assert metrics(port)["warren_priv_starts_total"] == 2, d.read_log()[-6000:]
        # warrend named its running sandbox to the new one (SANDBOX_ATTACH:
        # it holds the handle from now on)
        assert wait_for(lambda: metrics(port)[ATTACH] == 1)
        assert wait_for(lambda: "1 of 1 running sandboxes re-attached" in d.read_log())
        # the sandbox did not notice: its init runs on (an orphan now)
        assert c.get(id=sb.id).info.status == wr.SandboxStatus.RUNNING
        assert sb.exec("echo", "still").stdout_text == "still\n"
        assert init_pid(d, sb.id) == ipid
        # the new warren-priv serves creates (a pool entry of the dead
        # one is gone with it: the claim creates afresh) and pause
        sb2 = c.create(image="busybox:latest", entrypoint=["sleep", "infinity"])
        assert ppid_of(init_pid(d, sb2.id)) == second[0]
        assert sb2.exec("echo", "new").stdout_text == "new\n"
        sb.pause()
        assert frozen(sb.id)
        sb.resume()
        assert not frozen(sb.id)
        sdir = os.path.join(d.state_dir, "sandboxes", sb.id)
        sb.terminate()
        sb2.terminate()
        assert wait_for(lambda: not os.path.exists(sdir))
        # (the second's teardown finishes after its answer, meanwhile)
        assert wait_for(lambda: not cgroups_of(sb.id) and not cgroups_of(sb2.id))
        # the new one's count: it re-attached the first one to destroy it
        m = metrics(port)
        if not pool:
            assert wait_for(lambda: metrics(port)[DESTROY] == 2), \
                {k: v for k, v in metrics(port).items() if "priv" in k}
            assert m["warren_priv_lost_total"] == 0
        else:
            # the pool's refill may have been in flight when warren-priv
            # died (lost, then destroyed by id by the new one), and a dead
            # entry, claimed, is destroyed before the create starts afresh
            assert wait_for(lambda: metrics(port)[DESTROY] >= 2)
            assert m["warren_priv_lost_total"] <= 1
        # nothing is left but the pool's current entry
        sbx_root = os.path.join(d.state_dir, "sandboxes")
        assert wait_for(lambda: len([n for n in os.listdir(sbx_root)
                                     if n.startswith("sb-")]) == pool), os.listdir(sbx_root)
    assert "warren-priv (pid %d) exited (signal 9); starting another" % first in d.read_log()


@pytest.mark.skipif(os.environ.get("WARREN_PRIVSEP") not in (None, "", "0", "false"),
                    reason="the suite runs with WARREN_PRIVSEP set")
def test_no_privsep_by_default(fresh_warrend):
    port = free_port()
    d = fresh_warrend(extra_args=["--admin-listen", "127.0.0.1:%d" % port])
    import_image(d, "busybox:latest")
    with wr.SandboxClient(d.unix_addr) as c:
        sb = c.create(image="busybox:latest", entrypoint=["true"])
        sb.terminate()
    assert not priv_children(d)
    assert not any(k.startswith("warren_priv_") for k in metrics(port))


def test_privsep_recovery_cleanup(fresh_warrend):
    """A sandbox that died while no warrend ran is cleaned up at the next
    start by warren-priv; warren-priv itself ends with the warrend that
    started it (kill -9 of warrend: its end of the socket closes)."""
    from test_lifecycle import NOTHING, Restartable, leftovers, sandbox_pids

    life = Restartable()
    port = free_port()
    try:
        life.start(extra=["--privsep", "--admin-listen", "127.0.0.1:%d" % port])
        import_image(life, "busybox:latest")
        first = int(metrics(port)["warren_priv_pid"])
        with wr.SandboxClient(life.unix_addr) as c:
            sb = c.create(image="busybox:latest", entrypoint=["sleep", "infinity"])
        life.kill9()

        def gone(pid):
            try:
                with open("/proc/%d/stat" % pid) as f:
                    return f.read().split(") ")[1].split()[0] == "Z"
            except OSError:
                return True
        assert wait_for(lambda: gone(first)), "warren-priv outlived its warrend"
        assert sandbox_pids({sb.id}), "the sandbox did not outlive warrend"
        for pid in sandbox_pids({sb.id}):
            os.kill(pid, signal.SIGKILL)
        assert wait_for(lambda: not sandbox_pids({sb.id}))
        port = free_port()
        life.start(extra=["--privsep", "--admin-listen", "127.0.0.1:%d" % port])
        assert metrics(port)[CLEANUP] == 1  # recovery, before the API served
        with wr.SandboxClient(life.unix_addr) as c:
            info = [s for s in c.list() if s.id == sb.id][0]
            assert info.status == "TERMINATED"
        assert leftovers(life, {sb.id}) == NOTHING
    finally:
        life.destroy()


def test_privsep_removes_a_hostile_tree(fresh_warrend):
    """The writable layer on the host's file system (--default-disk 0): a
    tree the sandbox made (owned by its range, modes 000, deep, a symlink
    out) is removed by warren-priv with the capabilities it keeps, and
    nothing outside the sandbox's dir goes with it."""
    port = free_port()
    d = fresh_warrend(extra_args=["--privsep", "--admin-listen", "127.0.0.1:%d" % port,
                                  "--default-disk", "0"])
    import_image(d, "busybox:latest")
    outside = os.path.join(d.tmp, "outside")
    os.makedirs(outside)
    with open(os.path.join(outside, "keep"), "w") as f:
        f.write("x")
    with wr.SandboxClient(d.unix_addr) as c:
        sb = c.create(image="busybox:latest", entrypoint=["sleep", "infinity"])
        r = sb.exec("sh", "-c",
                    "set -e; mkdir -p /data/a/b; echo s > /data/a/b/f; ln -s %s /data/out; "
                    "cd /data; i=0; while [ $i -lt 300 ]; do mkdir d; cd d; i=$((i+1)); done; "
                    "echo deep > f; chown -R 1000:1000 /data; chmod 000 /data/a/b/f /data/a/b "
                    "/data/a; echo ok" % outside, timeout_secs=60)
        assert r.stdout_text.strip() == "ok", r.stderr_text
        sdir = os.path.join(d.state_dir, "sandboxes", sb.id)
        upper = [p for p in glob.glob(os.path.join(sdir, "upper*", "data"))]
        assert upper, os.listdir(sdir)
        assert os.stat(upper[0]).st_uid != 0  # the sandbox's range, on the host
        sb.terminate()
        assert wait_for(lambda: not os.path.exists(sdir)), "sandbox dir left behind"
        assert wait_for(lambda: metrics(port)[DESTROY] == 1)
        assert "pending" not in c.get(id=sb.id).info.status_message
    assert os.path.exists(os.path.join(outside, "keep"))


# ---- phase 3: the network through warren-priv ----

NFT = {t: 'warren_priv_requests_total{type="%s"}' % t
       for t in ("NFT_TABLE_APPLY", "NFT_CLASS_SET", "NFT_TABLES", "NFT_TABLE_REMOVE",
                 "NET_CONNECT")}


from test_network import bed  # noqa: E402,F401  (the fake internet, this module's own)


def nft_table(name):
    return subprocess.run(["nft", "list", "table", "inet", name], capture_output=True,
                          text=True).returncode == 0


def test_privsep_network_by_warren_priv(fresh_warrend, bed):
    """--privsep with the default network and warren-egress: warren-priv
    applies warrend's table at start, lists the tables, moves a sandbox's
    address between the sets, makes the egress self-check's connection
    from inside a sandbox with a policy, a tunnel's connection, and
    removes the table at the end; its own counters say so. A sandbox with
    a policy still enforces it: an allowed host answers, a denied one is
    refused with nothing reaching the fake internet."""
    from test_egress_policy import daemon_net
    from test_tunnel import wait_port
    port = free_port()
    d = fresh_warrend(extra_args=["--privsep", "--admin-listen", "127.0.0.1:%d" % port,
                                  "--upstream-dns", bed.dns, "--terminate-on-exit"])
    import_image(d, "busybox:latest")
    _, table = daemon_net(d)
    assert nft_table(table)
    m = metrics(port)
    assert m[NFT["NFT_TABLE_APPLY"]] == 1 and m[NFT["NFT_TABLES"]] == 1
    assert m[NFT["NET_CONNECT"]] == 0
    with wr.SandboxClient(d.unix_addr) as c:
        # a policy: proved by the self-check (a NET_CONNECT from inside),
        # then enforced
        sb = c.create(image="busybox:latest", entrypoint=["sleep", "infinity"],
                      network_policy=wr.NetworkPolicy(allowed_hosts=["example.test"]))
        assert sb.info.egress_enforced
        assert metrics(port)[NFT["NET_CONNECT"]] == 1
        r = sb.exec("sh", "-c", "timeout 8 wget -q -O - http://example.test/hello",
                    timeout_secs=30)
        assert r.exit_code == 0 and "/hello" in r.stdout_text, r.stderr_text
        mark = bed.mark()
        r = sb.exec("sh", "-c", "timeout 8 wget -q -O - http://github.com/ 2>&1; echo rc=$?",
                    timeout_secs=30)
        assert "rc=0" not in r.stdout_text, r.stdout_text
        r = sb.exec("sh", "-c", "echo x | nc -w 3 203.0.113.9 80", timeout_secs=30)
        assert r.stdout_text == "", r.stdout_text
        bed.assert_nothing_seen(mark)
        denied = [e for e in sb.network_events() if e.verdict == "deny"]
        assert any(e.host == "github.com" for e in denied), denied  # by its resolver
        assert any(e.kind == "tcp" and e.original_dst == "203.0.113.9:80" for e in denied), denied
        # no policy: its address goes into open4 (an NFT_CLASS_SET), and
        # a tunnel into it is a NET_CONNECT
        before = metrics(port)[NFT["NFT_CLASS_SET"]]
        open_sb = c.create(image="busybox:latest",
                           entrypoint=["nc", "-ll", "-p", "9000", "-e", "echo", "hi"])
        wait_port(open_sb, 9000)
        assert metrics(port)[NFT["NFT_CLASS_SET"]] > before
        with open_sb.connect(9000) as conn:
            got = b""
            while not got.endswith(b"\n"):
                chunk = conn.recv()
                if not chunk:
                    break
                got += chunk
        assert got == b"hi\n"
        assert metrics(port)[NFT["NET_CONNECT"]] == 2
        r = open_sb.exec("sh", "-c", "timeout 8 wget -q -O - http://example.test/hello",
                         timeout_secs=30)
        assert r.exit_code == 0, r.stderr_text  # NAT'ed straight out
        sb.terminate()
        open_sb.terminate()
    m = metrics(port)
    assert m["warren_priv_refused_total"] == 0 and m["warren_priv_lost_total"] == 0
    log = d.stop()
    for t in ("NFT_TABLE_APPLY", "NFT_TABLES", "NFT_CLASS_SET", "NET_CONNECT",
              "NFT_TABLE_REMOVE"):
        assert "warren-priv: %s: done" % t in log, t
    assert not nft_table(table)  # removed by warren-priv (--terminate-on-exit)


def test_privsep_sweep_by_warren_priv(fresh_warrend):
    """A stray host end in warrend's range (no sandbox holds its block) is
    deleted at start by warren-priv (LINK_DELETE from the sweep), before
    the API serves."""
    rng, gw = "100.121.7.0/24", "100.121.7.9"
    peer = "wr%08x" % (int.from_bytes(socket.inet_aton(gw), "big") >> 2)
    subprocess.run(["ip", "link", "add", peer, "type", "veth", "peer", "name",
                    "xpriv%d" % (os.getpid() % 100000)], check=True)
    try:
        port = free_port()
        d = fresh_warrend(extra_args=["--privsep", "--admin-listen", "127.0.0.1:%d" % port,
                                      "--sandbox-cidr", rng, "--warm-pool", "0"])
        assert peer not in wr_links()
        assert metrics(port)[LINK] == 1
        assert "removed 1 stale sandbox links" in d.read_log()
    finally:
        subprocess.run(["ip", "link", "del", peer], capture_output=True)
