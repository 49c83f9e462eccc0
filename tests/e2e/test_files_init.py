"""The files API takes the sandbox's root from warren-init (FILE_OPEN, phase
4a of privilege separation, docs/privsep.md "Phase 4, files, as built"),
not from /proc/<pid>/root: with init stopped the call fails UNAVAILABLE
within its bound (it would succeed through /proc), and works again once
init runs; a paused sandbox (init frozen on purpose) is still served."""
import os
import signal
import time

import pytest

from warren import Status, WarrenError

IMAGE = "busybox:latest"


def status_of(fn):
    try:
        fn()
    except WarrenError as e:
        return e.status
    return Status.OK


def init_pid_of(sandbox_id):
    """Host pid of the sandbox's init: the process of its cgroup whose
    parent is outside it (as test_privsep.init_pid)."""
    from test_lifecycle import sandbox_pids
    pids = sandbox_pids({sandbox_id})
    for p in pids:
        with open("/proc/%d/stat" % p) as f:
            ppid = int(f.read().rsplit(")", 1)[1].split()[1])
        if ppid not in pids:
            return p
    raise AssertionError("no init for " + sandbox_id)


@pytest.fixture
def sb(client):
    s = client.create(image=IMAGE)
    yield s
    s.terminate()


def test_root_comes_from_init(sb):
    sb.files.write("/workspace/a", b"1")
    pid = init_pid_of(sb.id)
    os.kill(pid, signal.SIGSTOP)
    try:
        t = time.monotonic()
        assert status_of(lambda: sb.files.read("/workspace/a")) == Status.UNAVAILABLE
        took = time.monotonic() - t
        assert 4 <= took < 15, took
    finally:
        os.kill(pid, signal.SIGCONT)
    assert sb.files.read("/workspace/a") == b"1"
    # the daemon's own connection still works: an exec runs
    assert sb.exec("cat", "/workspace/a").stdout_text == "1"


def test_paused_sandbox_served_without_init(sb):
    from conftest import DROP
    sb.files.write("/workspace/p", b"x")
    sb.pause()
    if DROP:
        # served by warrend on /proc/<init>/root only while it is root
        try:
            assert status_of(lambda: sb.files.read("/workspace/p")) == \
                Status.FAILED_PRECONDITION
        finally:
            sb.resume()
        assert sb.files.read("/workspace/p") == b"x"
        return
    try:
        assert sb.files.read("/workspace/p") == b"x"
        assert [e.path for e in sb.files.list("/workspace")] == ["/workspace/p"]
    finally:
        sb.resume()
