"""Pause / resume (issue 18 item 2): the cgroup freezer stops a sandbox's
processes; it uses no CPU while paused, refuses new execs naming the fix,
keeps its state, survives a warrend restart paused, and terminates."""
import time

import pytest

import warren as wr
from conftest import import_image

IMAGE = "busybox:latest"


def usage(sb):
    ch = sb._conn()
    from warren._proto.warren.v1 import sandboxes_pb2 as pb
    s = ch._sandboxes.GetSandbox(pb.GetSandboxRequest(id=sb.id))
    return s.usage.cpu_seconds, s.status


def test_pause_stops_cpu_and_resume_continues(client):
    sb = client.create(image=IMAGE, entrypoint=["sh", "-c", "while :; do :; done"])
    try:
        time.sleep(0.5)
        c0, _ = usage(sb)
        info = sb.pause()
        assert info.status == wr.SandboxStatus.PAUSED
        p0, st = usage(sb)
        time.sleep(1.0)
        p1, st = usage(sb)
        assert st == 6  # PAUSED
        assert p1 - p0 < 0.02, (p0, p1)  # frozen: no CPU
        assert p0 >= c0
        with pytest.raises(wr.FailedPrecondition) as ei:
            sb.exec("true")
        assert "paused" in str(ei.value) and "resume" in str(ei.value)
        assert sb.pause().status == wr.SandboxStatus.PAUSED  # idempotent
        assert sb.resume().status == wr.SandboxStatus.RUNNING
        time.sleep(1.0)
        r1, st = usage(sb)
        assert st == 2
        assert r1 - p1 > 0.3, (p1, r1)  # burning again
        assert sb.exec("echo", "back").stdout_text == "back\n"
        assert sb.resume().status == wr.SandboxStatus.RUNNING  # idempotent
    finally:
        sb.terminate()


def test_paused_state_is_kept_and_terminate_works(client):
    sb = client.create(image=IMAGE, entrypoint=["sleep", "infinity"])
    sb.exec("sh", "-c", "echo kept > /tmp/f")
    sb.pause()
    listed = {s.id: s for s in client.list()}
    assert listed[sb.id].status == wr.SandboxStatus.PAUSED
    sb.resume()
    assert sb.exec("cat", "/tmp/f").stdout_text == "kept\n"
    sb.pause()
    t = time.monotonic()
    info = sb.terminate(grace_period_seconds=5)
    assert info.status == wr.SandboxStatus.TERMINATED
    assert time.monotonic() - t < 4  # SIGTERM reached init: no grace wait
    with pytest.raises((wr.FailedPrecondition, wr.NotFound)):
        sb.pause()


def test_paused_across_a_warrend_restart():
    from test_lifecycle import Restartable
    life = Restartable()
    try:
        life.start()
        import_image(life, IMAGE)
        with wr.SandboxClient(life.unix_addr) as c:
            sb = c.create(image=IMAGE, entrypoint=["sleep", "infinity"])
            sb.pause()
        life.kill9()
        life.start()
        with wr.SandboxClient(life.unix_addr) as c:
            h = c.get(id=sb.id)
            assert h.info.status == wr.SandboxStatus.PAUSED
            with pytest.raises(wr.FailedPrecondition):
                h.exec("true")
            h.resume()
            assert h.exec("echo", "alive").stdout_text == "alive\n"
            h.terminate()
    finally:
        life.destroy()
