"""The Python SDK (python/warren) against a real warrend: connecting
(from_env, address forms, TLS), listing, errors, context manager; and the
seed README's examples (Quick start, run and wait, streaming, interactive
stdin, signals, options) on busybox imported with `warren image import`.
"""
import os
import signal
import subprocess
import sys
import tempfile

import pytest

import warren as wr
from conftest import ROOT, WARREN_CLI
from warren import (Image, NetworkPolicy, Sandbox, SandboxClient, Secret, SshDest,  # noqa: F401
                    Volume)

IMAGE = "busybox:latest"


@pytest.fixture
def env(monkeypatch):
    for k in ("WARREN_ADDR", "WARREN_TOKEN", "WARREN_TLS_CA", "WARREN_IDENTITY_TOKEN_FILE"):
        monkeypatch.delenv(k, raising=False)
    return monkeypatch


@pytest.mark.parametrize("form", ["unix:{sock}", "unix://{sock}", "{tcp}"])
def test_from_env_list_empty(fresh_warrend, env, form):
    d = fresh_warrend()
    env.setenv("WARREN_ADDR", form.format(sock=d.sock, tcp=d.tcp_addr))
    with SandboxClient.from_env() as client:
        assert client.list() == []
        assert client.list(status="RUNNING", tags={"a": "b"}) == []
        v = client.version()
        assert v.version == "0.1.0" and v.api_version == "v1"


def test_get_nosuch_raises(warrend):
    with SandboxClient(warrend.unix_addr) as client:
        with pytest.raises(wr.SandboxNotFound) as ei:
            client.get(id="nosuch")
        e = ei.value
        assert isinstance(e, wr.WarrenError) and isinstance(e, wr.NotFound)
        assert e.status == wr.Status.NOT_FOUND and "nosuch" in e.message
        assert str(e).startswith("NOT_FOUND: ")
        with pytest.raises(wr.SandboxNotFound):
            client.get(name="nosuch")
        with pytest.raises(ValueError):
            client.get()


def test_context_manager_closes(warrend):
    with SandboxClient(warrend.unix_addr) as client:
        client.list()
    assert client.closed
    with pytest.raises(ValueError):  # grpcio: RPC on a closed channel
        client.list()


def test_unavailable_when_not_running(tmp_path):
    with SandboxClient("unix:" + str(tmp_path / "no.sock")) as client:
        with pytest.raises(wr.Unavailable):
            client.list()


def test_tls(warrend_tls, env):
    d = warrend_tls
    with SandboxClient(d.tcp_addr, use_tls=True, ca_file=d.ca_file, token=d.token) as client:
        assert client.version().api_version == "v1"
        assert isinstance(client.list(), list)
    # without a token: the version only
    with SandboxClient(d.tcp_addr, use_tls=True, ca_file=d.ca_file) as client:
        assert client.version().api_version == "v1"
        with pytest.raises(wr.Unauthenticated):
            client.list()
    env.setenv("WARREN_ADDR", d.tcp_addr)
    env.setenv("WARREN_TLS_CA", d.ca_file)
    env.setenv("WARREN_TOKEN", d.token)
    with SandboxClient.from_env() as client:
        assert client.use_tls and client.version().version
        assert client.whoami().token_id.startswith("tk-")
    # plaintext against the TLS listener fails
    with SandboxClient(d.tcp_addr) as client:
        with pytest.raises(wr.Unavailable):
            client.version()


def test_secrets_roundtrip(fresh_warrend):
    d = fresh_warrend()
    with SandboxClient(d.unix_addr) as client:
        assert client.set_secret("MY_TOKEN", "v1").name == "MY_TOKEN"
        assert [s.name for s in client.list_secrets()] == ["MY_TOKEN"]
        client.delete_secret("MY_TOKEN")
        assert client.list_secrets() == []
        with pytest.raises(wr.InvalidArgument):
            client.set_secret("not valid!", "x")


def test_unimplemented_maps_to_exception(warrend):
    with SandboxClient(warrend.unix_addr) as client:
        try:
            client.list_volumes()
        except wr.Unimplemented as e:
            assert e.status == wr.Status.UNIMPLEMENTED and e.message
        with pytest.raises(wr.WarrenError):
            client.build_image(Image.debian_slim().pip_install(["x"]))


# --- the seed examples (need CreateSandbox + Exec) ---

@pytest.fixture(scope="module")
def daemon(warrend):
    d = tempfile.mkdtemp(prefix="warren-bb-")
    tar = os.path.join(d, "busybox.tar")
    subprocess.run(["bash", str(ROOT / "tests/images/busybox-rootfs.sh"), os.path.join(d, "rootfs"),
                    "--tar", tar], check=True, capture_output=True)
    subprocess.run([WARREN_CLI, "--addr", warrend.unix_addr, "image", "import", IMAGE, tar],
                   check=True, capture_output=True, timeout=120)
    subprocess.run(["rm", "-rf", d], check=True)
    return warrend


@pytest.fixture
def client(daemon, env):
    env.setenv("WARREN_ADDR", daemon.unix_addr)
    with SandboxClient.from_env() as c:
        yield c


@pytest.fixture
def sandbox(client):
    sb = client.create(image=IMAGE)
    yield sb
    sb.terminate(grace_period_seconds=1)


def test_quick_start(client):
    sandbox = client.create(image=IMAGE)
    result = sandbox.exec("echo", "hello world")
    assert result.stdout_text == "hello world\n"
    assert result.exit_code == 0
    sandbox.terminate()
    assert sandbox.refresh().status == "TERMINATED"


def test_run_and_wait(sandbox):
    result = sandbox.exec("ls", "-la", "/tmp")
    assert result.exit_code == 0 and result.stdout and result.stdout[0].startswith("total")
    result = sandbox.exec("sh", "-c", "echo one; echo two; echo bad >&2; exit 4")
    assert result.stdout == ["one", "two"] and result.stderr == ["bad"]
    assert result.stdout_text == "one\ntwo\n" and result.stderr_text == "bad\n"
    assert result.exit_code == 4
    # multibyte output survives chunking
    text = "héllo → wörld ✓\n" * 5000
    r = sandbox.exec("sh", "-c", "cat", env={}, workdir="/")
    assert r.stdout_text == ""
    r = sandbox.exec("printf", "%s", text)
    assert r.stdout_text == text


def test_stream_output(sandbox):
    events = list(sandbox.exec_stream(
        "sh", "-c", "echo building; sleep 0.2; echo warning >&2; echo done", workdir="/workspace"))
    assert "".join(e.stdout or "" for e in events) == "building\ndone\n"
    assert "".join(e.stderr or "" for e in events) == "warning\n"
    assert events[-1].is_exited and events[-1].exit_code == 0
    assert sum(e.is_exited for e in events) == 1


def test_interactive(sandbox):
    process = sandbox.exec_start("bash")
    assert process.exec_id
    process.write_stdin("echo hello\n")
    process.write_stdin("exit\n")
    process.close_stdin()
    out = "".join(ev.stdout or "" for ev in process.output())
    assert out == "hello\n"
    assert process.wait().exit_code == 0


def test_signals(sandbox):
    process = sandbox.exec_start("sleep", "300")
    process.send_signal(signal.SIGTERM)
    result = process.wait()
    assert result.exit_code == 128 + signal.SIGTERM


def test_options(sandbox):
    result = sandbox.exec(
        "sh", "-c", "pwd; echo $CUDA_VISIBLE_DEVICES",
        workdir="/workspace",
        timeout_secs=3600,
        env={"CUDA_VISIBLE_DEVICES": "0"},
    )
    assert result.stdout == ["/workspace", "0"]
    r = sandbox.exec("sleep", "30", timeout_secs=1)
    assert r.exit_code >= 128 and r.reason == "timeout"


def test_managing_sandboxes(client):
    sb = Sandbox(image=IMAGE, name="sdk-e2e-managed", tags={"suite": "sdk"})
    client.run(sb)
    try:
        infos = {i.id: i for i in client.list()}
        assert sb.id in infos and infos[sb.id].name == "sdk-e2e-managed"
        assert infos[sb.id].status == "RUNNING"
        existing = client.get(id=sb.id)
        assert existing.refresh().status == wr.SandboxStatus.RUNNING
        assert client.get(name="sdk-e2e-managed").id == sb.id
        assert [i.id for i in client.list(tags={"suite": "sdk"})] == [sb.id]
    finally:
        existing = client.get(id=sb.id)
        existing.terminate(grace_period_seconds=30)
    with pytest.raises(wr.WarrenError):
        sb.exec("true")


def test_sandbox_run_from_env(client):
    sb = Sandbox(image=IMAGE, env={"GREETING": "hi"}).run()
    try:
        assert sb.exec("sh", "-c", "echo $GREETING").stdout_text == "hi\n"
    finally:
        sb.terminate()


def test_sandbox_context_manager(client):
    with client.create(image=IMAGE) as sb:
        assert sb.exec("echo", "in").stdout_text == "in\n"
    assert sb.status == wr.SandboxStatus.TERMINATED
    assert client.get(id=sb.id).refresh().status == wr.SandboxStatus.TERMINATED
    # Sandbox(...) runs on entry with a client from the environment
    with Sandbox(image=IMAGE, name="sdk-e2e-with") as sb2:
        assert client.get(name="sdk-e2e-with").id == sb2.id
        assert sb2.exec("true").exit_code == 0
    assert client.get(id=sb2.id).refresh().status == wr.SandboxStatus.TERMINATED
    # the block's exception is the one that propagates; the sandbox still goes
    with pytest.raises(KeyError):
        with client.create(image=IMAGE) as sb3:
            raise KeyError("boom")
    assert client.get(id=sb3.id).refresh().status == wr.SandboxStatus.TERMINATED


@pytest.mark.parametrize("detach", [False, True])
def test_process_context_manager_kills(sandbox, detach):
    with sandbox.exec_start("sh", "-c", "sleep 300 & sleep 300", detach=detach) as p:
        assert p.returncode is None
        running = [i for i in sandbox.processes() if i.exec_id == p.exec_id]
        assert running and running[0].running
    assert p.returncode == 128 + signal.SIGKILL
    # gone from the running ones (a finished detached process is kept for
    # a late attach, with how it ended)
    info = [i for i in sandbox.processes() if i.exec_id == p.exec_id]
    assert not any(i.running for i in info)
    assert all(i.reason == "signaled" for i in info) and len(info) == int(detach)
    # the whole group went: nothing but init is left
    ps = sandbox.exec("sh", "-c", "ps -o comm | grep -c sleep || true").stdout_text.strip()
    assert ps == "0"
    # a process that finished inside the block is left as it was
    with sandbox.exec_start("sh", "-c", "exit 3") as q:
        assert q.wait().exit_code == 3
    assert q.returncode == 3


def test_results_are_dataclasses(client, sandbox):
    import dataclasses
    import datetime as dt

    def frozen(x):
        assert dataclasses.is_dataclass(x) and type(x).__dataclass_params__.frozen, x
        assert not type(x).__module__.endswith("_pb2")
        return x

    v = frozen(client.version())
    assert isinstance(v, wr.VersionInfo) and v.api_version == "v1" and v.cgroup_mode
    img = frozen(client.get_image(IMAGE))
    assert isinstance(img, wr.ImageInfo) and IMAGE in img.names
    assert img.id.startswith("sha256:") and img.size_bytes > 0 and img.layers
    assert isinstance(img.config, wr.ImageConfig) and isinstance(img.config.env, dict)
    assert isinstance(img.created_at, dt.datetime)
    assert img.id in {i.id for i in client.list_images()}
    with pytest.raises(wr.NotFound):
        client.get_image("warren-e2e-no-such-image:0")
    sec = frozen(client.set_secret("SDK_E2E_DC", "v"))
    try:
        assert isinstance(sec, wr.SecretInfo) and sec.name == "SDK_E2E_DC" and sec.keys == []
        assert isinstance(sec.updated_at, dt.datetime)
        assert sec in client.list_secrets()
    finally:
        client.delete_secret("SDK_E2E_DC")
    try:
        vol = frozen(client.create_volume("sdk-e2e"))
        assert isinstance(vol, wr.VolumeInfo) and vol.name == "sdk-e2e"
    except wr.Unimplemented:
        pass  # volumes are declared in the API, not served yet
    p = sandbox.exec_start("sleep", "300")
    try:
        procs = [frozen(i) for i in client.processes(sandbox)]
        assert procs == sandbox.processes()
        mine = [i for i in procs if i.exec_id == p.exec_id]
        assert isinstance(mine[0], wr.ProcessInfo) and mine[0].argv == ["sleep", "300"]
        assert mine[0].running and mine[0].exit_code is None
    finally:
        p.send_signal("KILL")
        p.wait()


def test_create_errors(client):
    with pytest.raises(wr.WarrenError) as ei:
        client.create(image="warren-e2e-no-such-image:0")
    assert ei.value.status in (wr.Status.NOT_FOUND, wr.Status.UNIMPLEMENTED,
                               wr.Status.INVALID_ARGUMENT)
    with pytest.raises(wr.SandboxNotFound):
        client.get(id="sb-0000000000000000").exec("true")
