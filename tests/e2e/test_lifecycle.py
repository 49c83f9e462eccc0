"""Lifecycle through a real warrend: sandboxes outlive the daemon (SIGTERM
and kill -9), a restarted daemon re-attaches to them (listing, new execs,
lifetimes), kill -9 at random points of create/terminate cycles leaves
nothing behind once a daemon has started again (counted against the
kernel), lifetimes are enforced with no client connected, names and tags."""
import glob
import os
import random
import shutil
import signal
import socket
import sqlite3
import subprocess
import tempfile
import threading
import time

import pytest

import warren as wr
from conftest import SANITIZED, WARREND, free_port, import_image, started


class Restartable:
    """A warrend whose state dir, socket and port survive restarts, started
    with sandboxes outliving it (WARREN_TERMINATE_ON_EXIT=0)."""

    def __init__(self):
        self.tmp = tempfile.mkdtemp(prefix="warren-life-")
        self.state_dir = os.path.join(self.tmp, "state")
        self.sock = os.path.join(self.tmp, "warren.sock")
        self.unix_addr = "unix:" + self.sock
        self.port = free_port()
        self.log_path = os.path.join(self.tmp, "warrend.log")
        self.proc = None
        self.starts = 0

    def start(self, terminate_on_exit=False, extra=()):
        args = [WARREND, "--state-dir", self.state_dir, "--listen", self.unix_addr,
                "--listen", "tcp:127.0.0.1:%d" % self.port, "--insecure-tcp", "--log-level", "debug"] + list(extra)
        env = dict(os.environ)
        env["WARREN_TERMINATE_ON_EXIT"] = "1" if terminate_on_exit else "0"
        if SANITIZED:
            env.setdefault("ASAN_OPTIONS", "detect_leaks=1")
        log = open(self.log_path, "ab")
        log.write(b"\n=== start %d ===\n" % self.starts)
        log.flush()
        self.starts += 1
        self.proc = started(subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT, env=env))
        log.close()
        # ready: this start's "ready" line (a connect to the port is not
        # enough: after a kill -9, a child the old warrend was cloning may
        # still hold copies of its listening sockets for a moment)
        marker = "=== start %d ===" % (self.starts - 1)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError("warrend exited early:\n" + self.read_log())
            log = self.read_log()
            if " ready (state dir " in log[log.rfind(marker):]:
                try:
                    with socket.create_connection(("127.0.0.1", self.port), timeout=0.2):
                        return
                except OSError:
                    pass
            time.sleep(0.02)
        raise RuntimeError("warrend did not become ready:\n" + self.read_log())

    def read_log(self):
        with open(self.log_path, "rb") as f:
            return f.read().decode(errors="replace")

    def kill9(self):
        self.proc.kill()
        self.proc.wait()

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            self.proc.wait(timeout=60)
        log = self.read_log()
        if SANITIZED and ("ERROR: AddressSanitizer" in log or "runtime error:" in log):
            raise RuntimeError("sanitizer report from warrend:\n" + log)
        return self.proc.returncode

    def rows(self):
        db = sqlite3.connect(os.path.join(self.state_dir, "warren.db"), timeout=10)
        try:
            return db.execute("SELECT id, status, status_message FROM sandboxes").fetchall()
        finally:
            db.close()

    def destroy(self):
        """Stop for good: a daemon that terminates everything on exit."""
        if self.proc and self.proc.poll() is None:
            self.stop()
        self.start(terminate_on_exit=True)
        self.stop()
        shutil.rmtree(self.tmp, ignore_errors=True)


def sandbox_pids(ids):
    """Host processes in the cgroup of any sandbox in ids."""
    out = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open("/proc/%s/cgroup" % pid) as f:
                cg = f.read()
        except OSError:
            continue
        if any("/warren/" + i + "\n" in cg or cg.rstrip().endswith("/warren/" + i) for i in ids):
            out.append(int(pid))
    return out


def leftovers(d, ids, wait=10.0):
    """What is left on the host of the sandboxes ids of daemon d, once the
    host cleanup that follows a terminate's answer had up to `wait`
    seconds (it runs after the answer: cgroups, dir)."""
    deadline = time.monotonic() + wait
    while True:
        left = _leftovers(d, ids)
        if left == NOTHING or time.monotonic() >= deadline:
            return left
        time.sleep(0.1)


def _leftovers(d, ids):
    cg = [p for p in glob.glob("/sys/fs/cgroup/*/warren/sb-*") + glob.glob("/sys/fs/cgroup/warren/sb-*")
          + glob.glob("/sys/fs/cgroup/unified/warren/sb-*") if os.path.basename(p) in ids]
    mounts = [line for line in open("/proc/self/mountinfo")
              if d.state_dir in line or any(i in line for i in ids)]
    sdir = os.path.join(d.state_dir, "sandboxes")
    dirs = os.listdir(sdir) if os.path.isdir(sdir) else []  # dirs and entrypoint logs
    live = [r for r in d.rows() if r[1] in (1, 2, 3)]
    return dict(cgroups=cg, mounts=mounts, dirs=dirs, procs=sandbox_pids(ids), live_rows=live,
                loops=loop_devices(d.state_dir))


NOTHING = dict(cgroups=[], mounts=[], dirs=[], procs=[], live_rows=[], loops=[])


def loop_devices(under):
    """Loop devices backed by a file under the dir `under` (the writable
    layers' images: state_dir/sandboxes/<id>/disk.img)."""
    out = []
    for f in glob.glob("/sys/block/loop*/loop/backing_file"):
        try:
            with open(f) as fh:
                backing = fh.read().strip()
        except OSError:
            continue  # cleared meanwhile
        if backing.startswith(under.rstrip("/") + "/"):
            out.append((f.split("/")[3], backing))
    return out


def wait_for(pred, timeout, what):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        v = pred()
        if v:
            return v
        time.sleep(0.1)
    raise AssertionError("timed out waiting for " + what)


def status_of(c, sid):
    return {s.id: s.status for s in c.list()}.get(sid)


@pytest.fixture
def life():
    d = Restartable()
    try:
        d.start()
        import_image(d, "busybox:latest")
    except BaseException:
        d.destroy()
        raise
    yield d
    d.destroy()


def test_sandboxes_survive_sigterm_and_are_reattached(life):
    with wr.SandboxClient(life.unix_addr) as c:
        a = c.create(image="busybox:latest", name="keep-a", env={"SECRETISH": "s3cr3t"},
                     workdir="/tmp", tags={"suite": "life"}, entrypoint=["sleep", "1000"])
        b = c.create(image="busybox:latest", lifetime="6s")
        a.exec("sh", "-c", "echo hello > /tmp/mark")
        ids = {a.id, b.id}
    assert life.stop() == 0
    # warrend is gone, the sandboxes are not
    assert len(sandbox_pids(ids)) >= 2
    life.start()
    with wr.SandboxClient(life.unix_addr) as c:
        listed = {s.id: s for s in c.list(status="running")}
        assert set(listed) >= ids
        a2 = c.get(name="keep-a")
        assert a2.id == a.id
        r = a2.exec("sh", "-c", 'echo "$SECRETISH $(pwd) $(cat /tmp/mark)"')
        assert r.stdout_text == "s3cr3t /tmp hello\n"
        assert [s.id for s in c.list(tags={"suite": "life"})] == [a.id]
        # the lifetime set before the restart still fires
        wait_for(lambda: status_of(c, b.id) == "TERMINATED", 15, "lifetime after restart")
        assert not sandbox_pids({b.id})
        a2.terminate(grace_period_seconds=1)
    assert leftovers(life, ids) == NOTHING


def test_dead_sandbox_marked_terminated_on_restart(life):
    with wr.SandboxClient(life.unix_addr) as c:
        sb = c.create(image="busybox:latest")
    life.kill9()
    # the sandbox dies while no warrend watches it
    for pid in sandbox_pids({sb.id}):
        os.kill(pid, signal.SIGKILL)
    wait_for(lambda: not sandbox_pids({sb.id}), 10, "sandbox processes to die")
    life.start()
    with wr.SandboxClient(life.unix_addr) as c:
        info = [s for s in c.list() if s.id == sb.id][0]
        assert info.status == "TERMINATED"
        assert "warrend was down" in info.status_message
    assert leftovers(life, {sb.id}) == NOTHING


def test_expired_while_down_terminated_at_once(life):
    with wr.SandboxClient(life.unix_addr) as c:
        sb = c.create(image="busybox:latest", lifetime="1s")
    life.kill9()
    time.sleep(1.5)
    life.start()
    with wr.SandboxClient(life.unix_addr) as c:
        wait_for(lambda: status_of(c, sb.id) == "TERMINATED", 15, "expired sandbox to end")
    assert leftovers(life, {sb.id}) == NOTHING


def test_lifetime_enforced_without_client(life):
    with wr.SandboxClient(life.unix_addr) as c:
        sb = c.create(image="busybox:latest", lifetime="2s")
        sb.exec_start("sleep", "300")
    # no client connected while it expires
    time.sleep(3.5)
    with wr.SandboxClient(life.unix_addr) as c:
        info = [s for s in c.list() if s.id == sb.id][0]
        assert info.status == "TERMINATED", info
        assert "lifetime" in info.status_message
    assert leftovers(life, {sb.id}) == NOTHING


def test_names_unique_and_tag_filters(life):
    with wr.SandboxClient(life.unix_addr) as c:
        a = c.create(image="busybox:latest", name="dup", tags={"team": "x", "tier": "1"})
        with pytest.raises(wr.AlreadyExists) as ei:
            c.create(image="busybox:latest", name="dup")
        assert "already" in str(ei.value)
        b = c.create(image="busybox:latest", tags={"team": "x", "tier": "2"})
        assert {s.id for s in c.list(tags={"team": "x"})} == {a.id, b.id}
        assert [s.id for s in c.list(tags={"team": "x", "tier": "2"})] == [b.id]
        assert c.list(tags={"team": "nobody"}) == []
        assert [s.id for s in c.list(name="dup")] == [a.id]
        a.terminate(grace_period_seconds=0)
        # the name is free again once the sandbox ended
        a2 = c.create(image="busybox:latest", name="dup")
        assert a2.id != a.id
        assert {s.id for s in c.list(status="running", tags={"team": "x"})} == {b.id}
        assert {s.id for s in c.list(status="terminated")} >= {a.id}
        a2.terminate(grace_period_seconds=0)
        b.terminate(grace_period_seconds=0)


@pytest.mark.slow
def test_kill9_with_20_running_and_5_streaming(life):
    ids = []
    with wr.SandboxClient(life.unix_addr) as c:
        sbs = [c.create(image="busybox:latest", lifetime="40s" if i < 5 else None) for i in range(20)]
        ids = [s.id for s in sbs]
        seen = [threading.Event() for _ in range(5)]
        ended = [threading.Event() for _ in range(5)]

        def stream(k):
            try:
                for ev in sbs[5 + k].exec_stream("sh", "-c",
                                                 "while true; do echo tick; sleep 0.05; done"):
                    if ev.stdout:
                        seen[k].set()
            except Exception:
                pass
            ended[k].set()

        threads = [threading.Thread(target=stream, args=(k,), daemon=True) for k in range(5)]
        for t in threads:
            t.start()
        for ev in seen:
            assert ev.wait(20)  # 5 execs streaming
        t0 = time.monotonic()
        life.kill9()
        for ev in ended:
            assert ev.wait(20)  # their streams end with the daemon
    life.start()
    with wr.SandboxClient(life.unix_addr) as c:
        listed = {s.id: s.status for s in c.list()}
        assert all(listed[i] == "RUNNING" for i in ids), listed
        for i, sid in enumerate(ids):
            r = c.get(id=sid).exec("echo", "again%d" % i)
            assert r.exit_code == 0 and r.stdout_text == "again%d\n" % i
        # lifetimes (40 s from create) still fire after the restart
        left = 40 - (time.monotonic() - t0)
        wait_for(lambda: all(status_of(c, s) == "TERMINATED" for s in ids[:5]),
                 left + 20, "lifetimes after kill -9")
        assert all(status_of(c, s) == "RUNNING" for s in ids[5:])
        for sid in ids[5:]:
            c.get(id=sid).terminate(grace_period_seconds=0)
    assert leftovers(life, set(ids)) == NOTHING


@pytest.mark.slow
def test_kill9_at_random_points_leaves_nothing(life):
    rnd = random.Random(int(os.environ.get("WARREN_SEED", "6")))
    cycles = int(os.environ.get("WARREN_KILL_CYCLES", "100"))
    for n in range(cycles):
        stop = threading.Event()

        def churn():
            try:
                with wr.SandboxClient(life.unix_addr) as c:
                    while not stop.is_set():
                        sb = c.create(image="busybox:latest")
                        sb.exec("true")
                        if rnd.random() < 0.7:
                            sb.terminate(grace_period_seconds=0)
            except Exception:
                pass  # the daemon was killed under us

        t = threading.Thread(target=churn)
        t.start()
        time.sleep(rnd.uniform(0.0, 0.4))
        life.kill9()
        stop.set()
        t.join(30)
        life.start()
    ids = {r[0] for r in life.rows()}
    assert len(ids) >= cycles // 2
    with wr.SandboxClient(life.unix_addr) as c:
        running = [s.id for s in c.list(status="running")]
        for sid in running:  # re-attached ones must work
            assert c.get(id=sid).exec("true").exit_code == 0
            c.get(id=sid).terminate(grace_period_seconds=0)
    assert leftovers(life, ids) == NOTHING


def test_admin_metrics_and_healthz(fresh_warrend):
    import urllib.error
    import urllib.request
    port = free_port()
    d = fresh_warrend(extra_args=["--admin-listen", "127.0.0.1:%d" % port])
    import_image(d, "busybox:latest")
    base = "http://127.0.0.1:%d" % port
    with urllib.request.urlopen(base + "/healthz", timeout=10) as r:
        assert r.status == 200 and r.read() == b"ok\n"
    with wr.SandboxClient(d.unix_addr) as c:
        sb = c.create(image="busybox:latest")
        sb.exec("true")
        with pytest.raises(wr.SandboxNotFound):
            c.get(id="sb-0000000000000000")
        with urllib.request.urlopen(base + "/metrics", timeout=10) as r:
            assert r.status == 200
            assert r.headers["Content-Type"].startswith("text/plain; version=0.0.4")
            text = r.read().decode()
        sb.terminate(grace_period_seconds=0)
    lines = text.splitlines()
    assert 'warren_sandboxes{state="running"} 1' in lines
    assert "warren_sandboxes_live 1" in lines
    assert "warren_warm_pool_size 0" in lines
    assert "warren_sandbox_create_seconds_count 1" in lines
    assert 'warren_sandbox_create_seconds_bucket{le="+Inf"} 1' in lines
    assert "warren_exec_start_seconds_count 1" in lines
    assert any(l.startswith('warren_rpc_requests_total{method="/warren.v1.Sandboxes/CreateSandbox",'
                            'code="OK"} ') for l in lines), text
    assert any(l.startswith('warren_rpc_requests_total{method="/warren.v1.Sandboxes/GetSandbox",'
                            'code="NOT_FOUND"} 1') for l in lines), text
    # every sample line parses as NAME{labels} VALUE
    for l in lines:
        if l and not l.startswith("#"):
            float(l.rsplit(" ", 1)[1])
    with pytest.raises(urllib.error.HTTPError) as ei:
        urllib.request.urlopen(base + "/nope", timeout=10)
    assert ei.value.code == 404
    req = urllib.request.Request(base + "/metrics", method="POST", data=b"x")
    with pytest.raises(urllib.error.HTTPError) as ei:
        urllib.request.urlopen(req, timeout=10)
    assert ei.value.code == 405
    # a header flood is cut off, and the endpoint keeps answering
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        s.sendall(b"GET /metrics HTTP/1.1\r\n" + b"X-A: " + b"a" * 9000 + b"\r\n\r\n")
        assert s.recv(100).startswith(b"HTTP/1.1 431")
    with urllib.request.urlopen(base + "/healthz", timeout=10) as r:
        assert r.status == 200


def pool_ids(d):
    """Sandbox dirs of d that no row names: warm-pool entries."""
    rows = {r[0] for r in d.rows()}
    sdir = os.path.join(d.state_dir, "sandboxes")
    return {n for n in os.listdir(sdir) if n.startswith("sb-") and n not in rows
            and os.path.isdir(os.path.join(sdir, n))}


def test_warm_pool_used_refilled_and_never_leaked(life):
    port = free_port()
    life.stop()
    life.start(extra=["--warm-pool", "3", "--admin-listen", "127.0.0.1:%d" % port])
    import urllib.request

    def pool_size():
        with urllib.request.urlopen("http://127.0.0.1:%d/metrics" % port, timeout=10) as r:
            for line in r.read().decode().splitlines():
                if line.startswith("warren_warm_pool_size "):
                    return int(line.split()[1])

    wait_for(lambda: pool_size() == 3, 20, "pool to fill")
    pooled = pool_ids(life)
    assert len(pooled) == 3
    assert len(sandbox_pids(pooled)) == 3  # one parked child each
    seen = set()
    with wr.SandboxClient(life.unix_addr) as c:
        sb = c.create(image="busybox:latest", name="from-pool", memory="128Mi", cpu="0.5",
                      env={"K": "v"}, hostname="pooled")
        assert sb.id in pooled  # it took a pool entry
        r = sb.exec("sh", "-c", 'echo "$K $(hostname)"')
        assert r.stdout == ["v pooled"], r
        # the request's limits replaced the pool's defaults
        limit = [p for p in ("/sys/fs/cgroup/memory/warren/%s/memory.limit_in_bytes" % sb.id,
                             "/sys/fs/cgroup/warren/%s/memory.max" % sb.id) if os.path.exists(p)]
        assert limit and open(limit[0]).read().strip() == str(128 << 20)
        s = [x for x in c.list() if x.id == sb.id][0]
        assert s.memory == "128Mi"
        seen |= pooled
        wait_for(lambda: pool_size() == 3, 20, "pool to refill")
        # more creates than the pool holds: they fall back to a plain create
        more = [c.create(image="busybox:latest") for _ in range(5)]
        for m in more:
            assert m.exec("echo", "ok").stdout_text == "ok\n"
            m.terminate(grace_period_seconds=0)
        sb.terminate(grace_period_seconds=0)
        seen |= {m.id for m in more}
        wait_for(lambda: pool_size() == 3, 20, "pool to refill again")
        seen |= pool_ids(life)
    # kill -9 with a full pool: the parked children go, the next start
    # removes their dirs and cgroups
    before = pool_ids(life)
    life.kill9()
    wait_for(lambda: not sandbox_pids(before), 10, "parked children to exit")
    life.start(terminate_on_exit=True)
    assert not (pool_ids(life) & before)
    life.stop()
    assert leftovers(life, seen | before) == NOTHING


def _sandbox_view(sb):
    """(root mount line, number of mounts, the device over /proc/keys, hostname,
    /etc/hosts last line) as seen inside sb."""
    r = sb.exec("sh", "-c", "cat /proc/self/mountinfo; echo ==; stat -c %t:%T /proc/keys; "
                "echo ==; hostname; echo ==; tail -n1 /etc/hosts")
    assert r.exit_code == 0, r
    mounts, keys, host, hosts = r.stdout_text.split("==\n")
    lines = mounts.splitlines()
    root = [x for x in lines if x.split()[4] == "/"]
    return root[0], len(lines), keys.strip(), host.strip(), hosts.rstrip("\n")


def test_warm_pool_prepared_roots(life, tmp_path):
    """Pool entries build the root of the expected image ahead (the default
    image at start, then the last one used); taking one for that image or
    for another image gives the same sandbox as a plain create; a disk size
    other than the default is a plain create. Every writable layer is on
    the sandbox's image (the default --default-disk), attached at upper/."""
    import grpc
    from warren._proto.warren.v1 import images_pb2
    from warren._proto.warren.v1 import sandboxes_pb2 as pb
    from warren._proto.warren.v1 import sandboxes_pb2_grpc

    marker = tmp_path / "marker"
    marker.write_text("other\n")
    import_image(life, "other:1", {"/etc/marker": str(marker)})
    seen = set()
    with wr.SandboxClient(life.unix_addr) as c:  # no pool: the reference
        plain = c.create(image="busybox:latest")
        seen.add(plain.id)
        ref_root, ref_n, ref_kcore, _, _ = _sandbox_view(plain)
        assert ref_kcore == "1:3"  # /dev/null over /proc/keys
        assert "/sandboxes/%s/upper/u," % plain.id in ref_root
        plain.terminate(grace_period_seconds=0)
    life.stop()
    port = free_port()
    life.start(extra=["--warm-pool", "2", "--default-image", "busybox:latest",
                      "--admin-listen", "127.0.0.1:%d" % port])
    import urllib.request

    def pool_full():
        with urllib.request.urlopen("http://127.0.0.1:%d/metrics" % port, timeout=10) as r:
            return "warren_warm_pool_size 2" in r.read().decode().splitlines()

    ch = grpc.insecure_channel(life.unix_addr)
    stub = sandboxes_pb2_grpc.SandboxesStub(ch)
    roots = []
    with wr.SandboxClient(life.unix_addr) as c:
        # entries built for busybox: the same image (twice: the hostname
        # from the id, then from a name), another image (a new root on top),
        # then whatever the pool holds
        for kw in (dict(image="busybox:latest"), dict(image="busybox:latest", name="named-1"),
                   dict(image="other:1"), dict(image="busybox:latest", hostname="h-2")):
            wait_for(pool_full, 20, "pool to fill")
            pooled = pool_ids(life)
            sb = c.create(**kw)
            seen.add(sb.id)
            assert sb.id in pooled, kw
            root, n, kcore, host, hosts = _sandbox_view(sb)
            want = kw.get("hostname") or kw.get("name") or sb.id
            # /etc/hosts names the sandbox's own address (the default
            # network: eth0's, given to the entry at the prestart)
            addr = sb.exec("sh", "-c", "ip -o -4 addr show dev eth0").stdout_text.split()[3]
            assert (host, hosts) == (want, addr.split("/")[0] + "\t" + want), kw
            assert n == ref_n and kcore == "1:3", (kw, n)
            assert root.split()[-3] == "overlay" and "/sandboxes/%s/" % sb.id in root, root
            r = sb.exec("cat", "/etc/marker")
            assert (r.exit_code == 0) == (kw["image"] == "other:1"), (kw, r)
            roots.append(root)
            sb.terminate(grace_period_seconds=0)
        assert "/upper/u," in roots[0] and "/upper/u," in roots[1], roots
        # the entry built for busybox, taken for other:1: a root on top
        # with upper and work dirs of its own, on the same image
        assert "/upper/u.1," in roots[2], roots[2]
        # another disk size: a plain create (its own image), and it holds
        wait_for(pool_full, 20, "pool to fill")
        pooled = pool_ids(life)
        sid = stub.CreateSandbox(pb.CreateSandboxRequest(
            image=images_pb2.ImageSpec(ref="other:1"),
            resources=pb.Resources(disk="16Mi", memory="256Mi")), timeout=60).id
        seen.add(sid)
        assert sid not in pooled
        sb = c.get(id=sid)
        root, n, kcore, _, _ = _sandbox_view(sb)
        assert "/upper/u," in root and n == ref_n and kcore == "1:3", root
        r = sb.exec("sh", "-c", "dd if=/dev/zero of=/big bs=1M count=40; cat /etc/marker")
        assert "No space left" in r.stderr_text and r.stdout_text == "other\n", r
        sb.terminate(grace_period_seconds=0)
        seen |= pool_ids(life)
    ch.close()
    life.stop()
    assert leftovers(life, seen) == NOTHING


def _rss_kb(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])


@pytest.mark.slow
def test_1000_cycles_back_to_baseline(life):
    """1,000 create/exec/terminate cycles (a warm pool of 2 in play): fds,
    warrend's RSS and the kernel objects of its sandboxes return to
    baseline."""
    life.stop()
    life.start(extra=["--warm-pool", "2"])
    ids = set()
    with wr.SandboxClient(life.unix_addr) as c:
        for i in range(20):  # warm up lazily allocated things
            sb = c.create(image="busybox:latest")
            sb.exec("true")
            sb.terminate(grace_period_seconds=0)
            ids.add(sb.id)
        time.sleep(0.5)
        fds0 = len(os.listdir("/proc/%d/fd" % life.proc.pid))
        rss0 = _rss_kb(life.proc.pid)
        for i in range(1000):
            sb = c.create(image="busybox:latest")
            ids.add(sb.id)
            assert sb.exec("echo", str(i)).stdout_text == "%d\n" % i
            sb.terminate(grace_period_seconds=0)
        time.sleep(0.5)
        fds1 = len(os.listdir("/proc/%d/fd" % life.proc.pid))
        rss1 = _rss_kb(life.proc.pid)
    assert fds1 <= fds0, (fds0, fds1)
    if not SANITIZED:
        assert rss1 - rss0 < 4096, (rss0, rss1)
    pool = pool_ids(life)
    assert len(pool) == 2
    life.stop()  # sandboxes outlive warrend, the pool does not
    left = leftovers(life, ids | pool)
    assert left == NOTHING, left
