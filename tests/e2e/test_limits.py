"""Resource limits through a real warrend: limits and usage visible in
GetSandbox/ListSandboxes and `warren sandbox get`, a memory hog is
OOM-killed while the sandbox survives, a fork bomb stops at the pids limit
while warrend and other sandboxes stay responsive, cpu="0.5" gets half a
core, a disk filler stops at the writable-layer limit."""
import subprocess
import threading
import time

import grpc
import pytest

import warren as wr
from conftest import WARREN_CLI
from warren._proto.warren.v1 import images_pb2
from warren._proto.warren.v1 import sandboxes_pb2 as pb
from warren._proto.warren.v1 import sandboxes_pb2_grpc


@pytest.fixture(scope="module")
def stub(sandbox_daemon):
    ch = grpc.insecure_channel(sandbox_daemon.unix_addr)
    yield sandboxes_pb2_grpc.SandboxesStub(ch)
    ch.close()


@pytest.fixture(scope="module")
def client(sandbox_daemon):
    with wr.SandboxClient(sandbox_daemon.unix_addr) as c:
        yield c


def create(stub, client, **resources):
    req = pb.CreateSandboxRequest(image=images_pb2.ImageSpec(ref="busybox:latest"),
                                  resources=pb.Resources(**resources))
    s = stub.CreateSandbox(req, timeout=60)
    return client.get(id=s.id)


def get(stub, sid):
    return stub.GetSandbox(pb.GetSandboxRequest(id=sid), timeout=30)


def test_limits_and_usage_visible(stub, client, sandbox_daemon):
    sb = create(stub, client, cpu="500m", memory="64Mi", pids=77)
    try:
        s = get(stub, sb.id)
        assert (s.resources.cpu, s.resources.memory, s.resources.pids) == ("500m", "64Mi", 77)
        sb.exec("sh", "-c", "i=0; while [ $i -lt 20000 ]; do i=$((i+1)); done")
        s = get(stub, sb.id)
        assert s.usage.cpu_seconds > 0
        assert s.usage.memory_bytes > 0 and s.usage.pids >= 1
        listed = [x for x in stub.ListSandboxes(pb.ListSandboxesRequest(), timeout=30).sandboxes
                  if x.id == sb.id][0]
        assert listed.resources.pids == 77 and listed.usage.pids >= 1
        out = subprocess.run([WARREN_CLI, "--addr", sandbox_daemon.unix_addr, "sandbox", "get", sb.id],
                             capture_output=True, text=True, timeout=30)
        assert out.returncode == 0, out.stderr
        assert "cpu 500m, memory 64Mi, pids 77" in out.stdout
        assert "Usage:" in out.stdout
    finally:
        sb.terminate(grace_period_seconds=0)
    # defaults filled in for a sandbox that named none
    sb = client.create(image="busybox:latest")
    try:
        s = get(stub, sb.id)
        assert s.resources.cpu == "1" and s.resources.memory == "1024Mi"
        assert s.resources.pids == 1024
    finally:
        sb.terminate(grace_period_seconds=0)
    # a terminated sandbox reports no usage
    assert not get(stub, sb.id).HasField("usage")


def test_memory_hog_oom_killed_sandbox_survives(stub, client):
    sb = create(stub, client, memory="64Mi")
    try:
        r = sb.exec("dd", "if=/dev/zero", "of=/dev/null", "bs=256M", "count=1")
        assert r.signal == 9 and r.exit_code == 128 + 9, r
        # the sandbox lives on and works
        assert sb.exec("echo", "alive").stdout_text == "alive\n"
        s = get(stub, sb.id)
        assert s.status == pb.SANDBOX_STATUS_RUNNING
        assert s.usage.memory_peak_bytes == 0 or s.usage.memory_peak_bytes <= 64 << 20
    finally:
        sb.terminate(grace_period_seconds=0)


def test_fork_bomb_stops_at_pids_limit(stub, client):
    bomb = create(stub, client, pids=64)
    other = client.create(image="busybox:latest")
    try:
        done = threading.Event()

        def run():
            try:
                bomb.exec("sh", "-c", "b() { b | b & }; b; sleep 5", timeout_secs=8)
            except Exception:
                pass
            done.set()

        t = threading.Thread(target=run, daemon=True)
        t.start()
        time.sleep(2)
        s = get(stub, bomb.id)
        assert s.usage.pids <= 64, s.usage
        # warrend and another sandbox stay responsive
        t0 = time.monotonic()
        assert other.exec("echo", "fine").stdout_text == "fine\n"
        client.list()
        assert time.monotonic() - t0 < 5
    finally:
        t1 = time.monotonic()
        bomb.terminate(grace_period_seconds=0)
        assert time.monotonic() - t1 < 10
        other.terminate(grace_period_seconds=0)
    assert get(stub, bomb.id).status == pb.SANDBOX_STATUS_TERMINATED


def test_cpu_half_core(stub, client):
    """cpu="0.5": one busy loop gets half a core over 5 s (+-15%). Other
    test runs share this machine, so an unlimited busy loop in a control
    sandbox measures what a full core gives right now; the limited one must
    get min(0.5, that) within 15%, and never more than 0.5 + 15%."""
    sb = create(stub, client, cpu="0.5")
    ctl = create(stub, client, cpu="2")
    try:
        ps = [x.exec_start("sh", "-c", "while :; do :; done") for x in (sb, ctl)]
        time.sleep(0.5)
        c0, k0, t0 = get(stub, sb.id).usage.cpu_seconds, get(stub, ctl.id).usage.cpu_seconds, \
            time.monotonic()
        time.sleep(5)
        c1, k1, t1 = get(stub, sb.id).usage.cpu_seconds, get(stub, ctl.id).usage.cpu_seconds, \
            time.monotonic()
        share, full = (c1 - c0) / (t1 - t0), (k1 - k0) / (t1 - t0)
        assert share <= 0.5 * 1.15, (share, full)
        assert share >= 0.85 * min(0.5, full), (share, full)
        assert full > 0.2, "machine too busy to measure (control got %.2f of a core)" % full
        for p in ps:
            p.cancel()
    finally:
        sb.terminate(grace_period_seconds=0)
        ctl.terminate(grace_period_seconds=0)


def test_disk_filler_stops_at_limit(stub, client):
    sb = create(stub, client, disk="32Mi", memory="256Mi")
    try:
        r = sb.exec("sh", "-c", "dd if=/dev/zero of=/big bs=1M count=100; echo rc=$?; "
                    "ls -l /big | awk '{print $5}'")
        assert "No space left" in r.stderr_text, r
        lines = r.stdout_text.split()
        assert lines[0] != "rc=0"
        assert int(lines[-1]) <= 32 << 20
        # the sandbox still works and can free space again
        assert sb.exec("sh", "-c", "rm /big && echo ok > /small && cat /small").stdout_text == "ok\n"
        s = get(stub, sb.id)
        assert s.resources.disk == "32Mi"
    finally:
        sb.terminate(grace_period_seconds=0)


def test_bad_disk_value_rejected(stub):
    with pytest.raises(grpc.RpcError) as ei:
        stub.CreateSandbox(pb.CreateSandboxRequest(image=images_pb2.ImageSpec(ref="busybox:latest"),
                                                   resources=pb.Resources(disk="lots")), timeout=30)
    assert ei.value.code() == grpc.StatusCode.INVALID_ARGUMENT
