"""Privilege separation, phase 5 (issue 16, docs/privsep.md "Phase 5, as
built"): warrend --privsep --user warren starts as root, takes the state
dir and its lock, starts warren-priv, binds its listeners, then drops to
the user for good: its uid and gid are the user's, every capability set is
empty, no_new_privs is set, a seccomp filter runs, and it lives in a mount
namespace of its own where only the state dir (and /dev, /proc, the
host-wide lock dirs) are writable. Only warren-priv stays root in its
process tree; create, exec, the warm pool, pause/resume, terminate and the
recovery of a running sandbox after a restart work as before."""
import os
import pwd
import shutil
import signal
import socket
import subprocess
import tempfile

import pytest

import warren as wr
from conftest import ROOT, WARREND, free_port, import_image
from test_privsep import CREATE, DESTROY, PRESTART, START, cgroups_of, frozen, init_pid, \
    metrics, ppid_of, wait_for

USER = "warren"


@pytest.fixture(scope="module")
def user():
    subprocess.run([str(ROOT / "scripts" / "warren-user.sh"), USER], check=True)
    return pwd.getpwnam(USER)


def status(pid, task=None):
    path = "/proc/%d/status" % pid if task is None else "/proc/%d/task/%d/status" % (pid, task)
    out = {}
    with open(path) as f:
        for line in f:
            k, _, v = line.partition(":")
            out[k] = v.strip()
    return out


def assert_dropped(pid, pw):
    """Every thread of pid: the user's ids, no capabilities, no_new_privs,
    a seccomp filter."""
    tasks = [int(t) for t in os.listdir("/proc/%d/task" % pid)]
    assert len(tasks) >= 2  # the main thread and warren-priv's supervisor at least
    for t in tasks:
        st = status(pid, t)
        assert st["Uid"].split() == [str(pw.pw_uid)] * 4, (t, st["Uid"])
        assert st["Gid"].split() == [str(pw.pw_gid)] * 4, (t, st["Gid"])
        assert st["Groups"] == "", (t, st["Groups"])
        for cap in ("CapInh", "CapPrm", "CapEff", "CapAmb"):
            assert int(st[cap], 16) == 0, (t, cap, st[cap])
        assert st["NoNewPrivs"] == "1", t
        assert st["Seccomp"] == "2", t
        # every thread: an empty bounding set and warrend's own mount
        # namespace (warren-priv's supervisor is started after the drop)
        assert int(st["CapBnd"], 16) == 0, (t, st["CapBnd"])
        assert os.readlink("/proc/%d/task/%d/ns/mnt" % (pid, t)) != \
            os.readlink("/proc/self/ns/mnt"), t


def process_tree(root):
    """[(pid, ppid, user, comm)] of root and every descendant, from ps."""
    out = subprocess.run(["ps", "-e", "-o", "pid=,ppid=,user:32=,comm="], capture_output=True,
                         text=True, check=True).stdout
    rows = []
    for line in out.splitlines():
        pid, ppid, usr, comm = line.split(None, 3)
        rows.append((int(pid), int(ppid), usr, comm.strip()))
    keep, todo = [], {root}
    while todo:
        nxt = set()
        for r in rows:
            if r[0] in todo:
                keep.append(r)
            if r[1] in todo:
                nxt.add(r[0])
        todo = nxt - {r[0] for r in keep}
    return keep


def root_in_tree(d):
    return sorted((comm, pid, ppid) for pid, ppid, usr, comm in process_tree(d.proc.pid)
                  if usr == "root")


def mounts(pid):
    """{mount point: options} of pid's mount namespace."""
    out = {}
    with open("/proc/%d/mountinfo" % pid) as f:
        for line in f:
            parts = line.split()
            out[parts[4]] = parts[5].split(",")
    return out


def drop_args(port, pool):
    return ["--privsep", "--user", USER, "--admin-listen", "127.0.0.1:%d" % port,
            "--warm-pool", str(pool)]


def started_dropped(life, port, pool, terminate_on_exit=False):
    """Start life dropped and import busybox:latest into it: the dropped
    warrend stores layers itself (warren-priv moves and removes the
    trees: docs/privsep.md "Phase 5, layers, as built")."""
    life.start(extra=drop_args(port, pool), terminate_on_exit=terminate_on_exit)
    import_image(life, "busybox:latest")


@pytest.mark.parametrize("pool", [0, 1])
def test_drop_confines_warrend(user, pool):
    from test_lifecycle import Restartable

    d = Restartable()
    os.chmod(d.tmp, 0o711)
    try:
        port = free_port()
        started_dropped(d, port, pool, terminate_on_exit=True)
        confines(d, user, port, pool)
    finally:
        d.destroy()


def confines(d, user, port, pool):
    pid = d.proc.pid
    assert_dropped(pid, user)
    assert "dropped to user %s (uid %d gid %d)" % (USER, user.pw_uid, user.pw_gid) in d.read_log()
    # a mount namespace of its own: / read-only, the state dir writable
    assert os.readlink("/proc/%d/ns/mnt" % pid) != os.readlink("/proc/self/ns/mnt")
    m = mounts(pid)
    assert "ro" in m["/"], m["/"]
    assert "rw" in m[os.path.realpath(d.state_dir)], m.get(d.state_dir)
    # the state dir is the user's; sandboxes/ stays warren-priv's (root)
    assert os.stat(d.state_dir).st_uid == user.pw_uid
    assert os.stat(os.path.join(d.state_dir, "warren.db")).st_uid == user.pw_uid
    st = os.stat(os.path.join(d.state_dir, "sandboxes"))
    assert (st.st_uid, st.st_gid, st.st_mode & 0o777) == (0, user.pw_gid, 0o751)
    # warren-priv is root, in the host's mount namespace
    priv = int(metrics(port)["warren_priv_pid"])
    assert ppid_of(priv) == pid
    assert status(priv)["Uid"].split()[0] == "0"
    assert os.readlink("/proc/%d/ns/mnt" % priv) == os.readlink("/proc/self/ns/mnt")
    # layers stored dropped: the tree keeps the tar's owners (root's), the
    # store's levels are the user's, nothing is left in staging
    layers = os.path.join(d.state_dir, "layers", "sha256")
    assert os.stat(layers).st_uid == user.pw_uid
    assert {os.stat(os.path.join(layers, x)).st_uid for x in os.listdir(layers)} == {0}
    assert os.listdir(os.path.join(d.state_dir, "layers", "tmp")) == []

    with wr.SandboxClient(d.unix_addr) as c:
        sb = c.create(image="busybox:latest", entrypoint=["sleep", "infinity"])
        assert ppid_of(init_pid(d, sb.id)) == priv
        assert sb.exec("echo", "dropped").stdout_text == "dropped\n"
        # the exec spool is warrend's (a sandbox dir warren-priv gave it)
        assert "no spool" not in d.read_log()
        sdir = os.path.join(d.state_dir, "sandboxes", sb.id)
        assert os.stat(sdir).st_uid == user.pw_uid
        assert os.stat(os.path.join(sdir, "execs")).st_uid == user.pw_uid
        assert os.stat(os.path.join(sdir, "rootfs")).st_uid == 0
        # only warren-priv is root in warrend's tree (the sandboxes run in
        # their own uid ranges; a parked pool entry is warren-priv's child)
        roots = root_in_tree(d)
        assert [comm for comm, _, _ in roots if comm != "warren-priv"] == [], \
            process_tree(d.proc.pid)
        # warren-priv itself and, with a pool, the parked child of its
        # prestart (not yet in its user namespace: it becomes the init)
        assert [p for _, p, pp in roots if pp == pid] == [priv], roots
        assert len([p for _, p, pp in roots if pp == priv]) <= pool, roots
        sb.pause()
        assert wait_for(lambda: frozen(sb.id))
        sb.resume()
        assert not frozen(sb.id)
        assert sb.exec("echo", "resumed").stdout_text == "resumed\n"
        sb.terminate()
        assert wait_for(lambda: not os.path.exists(sdir))
        assert wait_for(lambda: not cgroups_of(sb.id))
    mt = metrics(port)
    if pool:
        assert mt[PRESTART] >= 1 and mt[START] >= 1, mt
    else:
        assert mt[CREATE] == 1, mt
    assert wait_for(lambda: metrics(port)[DESTROY] >= 1)
    assert_dropped(pid, user)  # still: no thread got anything back


def test_drop_recovery_after_restart(user):
    """A sandbox outlives a dropped warrend (SIGTERM, sandboxes kept) and
    is recovered by the next one, which also drops: exec works, and its
    spool, written by the first, is read by the second."""
    from test_lifecycle import NOTHING, Restartable, leftovers

    life = Restartable()
    os.chmod(life.tmp, 0o711)
    port = free_port()
    try:
        started_dropped(life, port, 1)
        assert_dropped(life.proc.pid, user)
        with wr.SandboxClient(life.unix_addr) as c:
            sb = c.create(image="busybox:latest", entrypoint=["sleep", "infinity"])
            assert sb.exec("echo", "before").stdout_text == "before\n"
        assert life.stop() in (0, -signal.SIGTERM)
        port = free_port()
        life.start(extra=drop_args(port, 1), terminate_on_exit=True)
        assert_dropped(life.proc.pid, user)
        with wr.SandboxClient(life.unix_addr) as c:
            info = [s for s in c.list() if s.id == sb.id][0]
            assert info.status == "RUNNING", info
            sb = c.get(id=sb.id)
            assert sb.exec("echo", "after").stdout_text == "after\n"
            sb.pause()
            assert wait_for(lambda: frozen(sb.id))
            sb.resume()
            sb.terminate()
        life.stop()  # terminate_on_exit: the pool's entry goes too
        assert leftovers(life, {sb.id}) == NOTHING
    finally:
        life.destroy()


def test_user_needs_privsep(tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in ("WARREN_PRIVSEP", "WARREN_USER")}
    p = subprocess.run([WARREND, "--state-dir", str(tmp_path / "s"), "--listen",
                        "unix:%s/w.sock" % tmp_path, "--user", USER], env=env,
                       capture_output=True, text=True, timeout=30)
    assert p.returncode == 2
    assert "--user warren needs --privsep" in p.stderr, p.stderr
    assert not os.path.exists(tmp_path / "s")


def test_user_unknown(tmp_path):
    os.chmod(tmp_path, 0o711)
    p = subprocess.run([WARREND, "--state-dir", str(tmp_path / "s"), "--listen",
                        "unix:%s/w.sock" % tmp_path, "--privsep", "--user",
                        "warren-no-such-user"], capture_output=True, text=True, timeout=30)
    assert p.returncode == 1
    assert "no such user" in p.stdout + p.stderr and "warren-user.sh" in p.stdout + p.stderr


def test_user_state_dir_unreachable(user):
    """A state dir the user cannot reach is refused before anything starts,
    naming the directory in the way."""
    top = tempfile.mkdtemp(prefix="warren-drop-")
    try:
        os.chmod(top, 0o711)
        closed = os.path.join(top, "closed")
        os.mkdir(closed, 0o700)
        p = subprocess.run([WARREND, "--state-dir", os.path.join(closed, "s"), "--listen",
                            "unix:%s/w.sock" % top, "--privsep", "--user", USER],
                           capture_output=True, text=True, timeout=30)
        assert p.returncode == 1
        out = p.stdout + p.stderr
        assert "cannot reach it: %s is mode 0700" % closed in out, out
        assert not [pp for pp in os.listdir("/proc") if pp.isdigit() and
                    _cmdline(pp).startswith("%s/closed" % top)]
    finally:
        shutil.rmtree(top, ignore_errors=True)


def _free_low_port():
    """A free TCP port of 127.0.0.1 below 1024 (only root may bind it)."""
    for port in range(1023, 900, -1):
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    pytest.skip("no free port below 1024 on 127.0.0.1")


def test_drop_admin_listen_below_1024(user):
    """--admin-listen below 1024 under --user: bound as root before the
    drop, served by the dropped warrend."""
    from test_lifecycle import Restartable

    d = Restartable()
    os.chmod(d.tmp, 0o711)
    try:
        port = _free_low_port()
        d.start(extra=["--privsep", "--user", USER, "--admin-listen", "127.0.0.1:%d" % port],
                terminate_on_exit=True)
        assert_dropped(d.proc.pid, user)
        assert int(metrics(port)["warren_priv_pid"]) > 0
        assert "not served" not in d.read_log()
        assert "admin listener 127.0.0.1:%d: serving" % port in d.read_log()
    finally:
        d.destroy()


def _cmdline(pid):
    try:
        with open("/proc/%s/cmdline" % pid, "rb") as f:
            return f.read().decode(errors="replace")
    except OSError:
        return ""


def test_drop_warren_priv_killed(user):
    """A dropped warrend cannot start a root warren-priv again: when it
    dies, warrend exits (status 3) instead of retrying forever; the
    sandbox runs on and the next warrend (root again, then dropped)
    recovers it."""
    from test_lifecycle import NOTHING, Restartable, leftovers, sandbox_pids

    life = Restartable()
    os.chmod(life.tmp, 0o711)
    port = free_port()
    try:
        started_dropped(life, port, 0)
        with wr.SandboxClient(life.unix_addr) as c:
            sb = c.create(image="busybox:latest", entrypoint=["sleep", "infinity"])
        priv = int(metrics(port)["warren_priv_pid"])
        os.kill(priv, signal.SIGKILL)
        assert life.proc.wait(timeout=30) == 3
        assert "cannot start another: exiting" in life.read_log()
        assert sandbox_pids({sb.id}), "the sandbox did not outlive warrend"
        port = free_port()
        life.start(extra=drop_args(port, 0), terminate_on_exit=True)
        with wr.SandboxClient(life.unix_addr) as c:
            sb = c.get(id=sb.id)
            assert sb.exec("echo", "recovered").stdout_text == "recovered\n"
            sb.terminate()
        life.stop()
        assert leftovers(life, {sb.id}) == NOTHING
    finally:
        life.destroy()
