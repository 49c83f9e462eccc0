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
    """Host pid of the warren-init whose WARREN_SANDBOX_ID is sandbox_id."""
    want = b"WARREN_SANDBOX_ID=" + sandbox_id.encode()
    for p in os.listdir("/proc"):
        if not p.isdigit():
            continue
        try:
            with open("/proc/%s/environ" % p, "rb") as f:
                env = f.read().split(b"\0")
            with open("/proc/%s/comm" % p) as f:
                comm = f.read().strip()
        except OSError:
            continue
        if want in env and comm == "warren-init":
            return int(p)
    raise AssertionError("no warren-init for " + sandbox_id)


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
    sb.files.write("/workspace/p", b"x")
    sb.pause()
    try:
        assert sb.files.read("/workspace/p") == b"x"
        assert [e.path for e in sb.files.list("/workspace")] == ["/workspace/p"]
    finally:
        sb.resume()
