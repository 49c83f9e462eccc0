"""The SDK against an in-process grpcio server (tests/fake_server.py):
exec plumbing, decoding, errors, auth metadata, thread hygiene. The
end-to-end tests against warrend are tests/e2e/test_sdk.py."""
import os
import signal
import sys
import threading
import time

import pytest

sys.path.insert(0, os.path.dirname(__file__))
import fake_server  # noqa: E402

import warren as wr  # noqa: E402
from warren import Image, NetworkPolicy, Sandbox, SandboxClient, Secret  # noqa: E402


@pytest.fixture
def server():
    srv, port, sbx, sysv = fake_server.start()
    yield port, sbx, sysv
    srv.stop(0)


@pytest.fixture
def client(server):
    port, _, _ = server
    with SandboxClient(f"127.0.0.1:{port}") as c:
        yield c


def test_exec_collects_output_and_exit_code(client):
    sb = client.create(image="img")
    r = sb.exec("sh", "-c", "echo hello world; echo oops >&2; exit 3")
    assert r.stdout_text == "hello world\n"
    assert r.stdout == ["hello world"]
    assert r.stderr == ["oops"]
    assert r.exit_code == 3


def test_exec_decodes_split_multibyte(client):
    sb = client.create(image="img")
    text = "héllo → wörld ✓ 日本語\n" * 3
    r = sb.exec("printf", "%s", text)
    assert r.stdout_text == text
    r = sb.exec("sh", "-c", r"printf 'a\377b'")
    assert r.stdout_text == "a\ufffdb"


def test_exec_options_travel(client, server):
    _, sbx, _ = server
    sb = client.create(image="img")
    r = sb.exec("sh", "-c", "pwd; echo $FOO", workdir="/tmp", timeout_secs=5, env={"FOO": "bar"})
    assert r.stdout == ["/tmp", "bar"]
    start = sbx.exec_requests[-2].start
    assert start.timeout_secs == 5 and start.workdir == "/tmp" and start.env["FOO"] == "bar"
    # exec() closes stdin right after start
    assert sbx.exec_requests[-1].close_stdin


def test_stream_events(client):
    sb = client.create(image="img")
    evs = list(sb.exec_stream("sh", "-c", "echo a; sleep 0.1; echo b >&2; exit 1"))
    assert "".join(e.stdout or "" for e in evs) == "a\n"
    assert "".join(e.stderr or "" for e in evs) == "b\n"
    assert evs[-1].is_exited and evs[-1].exit_code == 1
    assert not any(e.is_exited for e in evs[:-1])


def test_interactive_stdin(client):
    sb = client.create(image="img")
    p = sb.exec_start("sh")
    assert p.exec_id == "ex-1"
    p.write_stdin("echo hello\n")
    p.write_stdin(b"exit 7\n")
    p.close_stdin()
    out = "".join(e.stdout or "" for e in p.output())
    assert out == "hello\n"
    assert p.wait().exit_code == 7


def test_signal(client):
    sb = client.create(image="img")
    p = sb.exec_start("sleep", "300")
    t0 = time.monotonic()
    p.send_signal(signal.SIGTERM)
    r = p.wait()
    assert r.exit_code == 128 + signal.SIGTERM and r.signal == signal.SIGTERM
    assert time.monotonic() - t0 < 10


def test_no_thread_leak():
    """Every finished, waited or abandoned exec leaves no thread behind
    (the server runs in a subprocess so only client threads count)."""
    import subprocess

    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    srv = subprocess.Popen([sys.executable, fake_server.__file__], stdin=subprocess.PIPE,
                           stdout=subprocess.PIPE, env=env)
    try:
        port = int(srv.stdout.readline())
        with SandboxClient(f"127.0.0.1:{port}") as c:
            sb = c.create(image="img")
            sb.exec("true")
            time.sleep(0.2)
            before = threading.active_count()
            for _ in range(10):
                sb.exec("true")
                p = sb.exec_start("cat")
                p.close_stdin()
                p.wait()
                for ev in sb.exec_stream("sh", "-c", "echo x; sleep 5"):
                    break  # abandon early: the call is cancelled
            deadline = time.monotonic() + 5
            while threading.active_count() > before and time.monotonic() < deadline:
                time.sleep(0.05)
            assert threading.active_count() <= before
    finally:
        srv.stdin.close()
        srv.wait(timeout=10)


def test_not_found_and_errors(client):
    with pytest.raises(wr.SandboxNotFound) as ei:
        client.get(id="nosuch")
    assert ei.value.status == wr.Status.NOT_FOUND and "nosuch" in ei.value.message
    assert ei.value.code == "NOT_FOUND" and str(ei.value).startswith("NOT_FOUND: ")
    assert isinstance(ei.value, wr.WarrenError)
    with pytest.raises(wr.Unimplemented) as ei:
        client.build_image(Image.debian_slim().pip_install(["x"]))
    assert ei.value.status == wr.Status.UNIMPLEMENTED


def test_create_request_and_handles(client, server):
    _, sbx, _ = server
    sb = client.create(image=Image.base("busybox:latest"), name="n1", cpu=2, memory="1Gi",
                       env={"A": "1", "B": Secret.from_name("S")}, lifetime=60,
                       tags={"k": "v"})
    req = sbx.last_create
    assert req.image.ref == "busybox:latest" and req.name == "n1"
    assert req.resources.cpu == "2" and req.resources.memory == "1Gi"
    assert req.env["B"].secret.name == "S" and req.lifetime == "60s"
    assert sb.status == wr.SandboxStatus.RUNNING and sb.id.startswith("sb-")
    assert [i.id for i in client.list()] == [sb.id]
    assert client.get(name="n1").id == sb.id
    assert sb.terminate().status == "TERMINATED"
    assert sb.refresh().status == wr.SandboxStatus.TERMINATED


def test_token_metadata(server):
    port, _, sysv = server
    with SandboxClient(f"127.0.0.1:{port}", token="tok123") as c:
        assert c.version().version == "0.0.0-fake"
    assert sysv.metadata[-1]["authorization"] == "Bearer tok123"


def test_from_env(server, monkeypatch):
    port, _, sysv = server
    monkeypatch.setenv("WARREN_ADDR", f"127.0.0.1:{port}")
    monkeypatch.setenv("WARREN_TOKEN", "t2")
    with SandboxClient.from_env() as c:
        assert c.address == f"127.0.0.1:{port}"
        c.version()
    assert sysv.metadata[-1]["authorization"] == "Bearer t2"
    assert c.closed


def test_sandbox_run_from_env(server, monkeypatch):
    port, sbx, _ = server
    monkeypatch.setenv("WARREN_ADDR", f"127.0.0.1:{port}")
    sb = Sandbox(image="img", workdir="/w").mount_volume("v", "/data").run()
    assert sbx.last_create.volumes[0].volume == "v" and sbx.last_create.workdir == "/w"
    assert sb.exec("echo", "x").stdout_text == "x\n"
    sb.terminate()


def test_image_builder_is_immutable(tmp_path):
    base = Image.debian_slim().pip_install(["requests"])
    a = base.pip_install(["flask"]).workdir("/api")
    b = base.pip_install(["celery"]).workdir("/worker")
    assert len(base._steps) == 1 and len(a._steps) == 3 and a != b
    assert Image.base("x")._to_spec().ref == "x"
    spec = a._to_spec()
    assert spec.build.base_image == "python:3.14-slim-trixie"
    assert list(spec.build.steps[1].pip_install.packages) == ["flask"]
    df = tmp_path / "Dockerfile"
    df.write_text("FROM alpine:3 AS x\nRUN echo a \\\n  && echo b\nEXPOSE 80\n")
    (tmp_path / "data.txt").write_text("d")
    img = Image.from_dockerfile(df).pip_install(["extra"])
    # the daemon parses the Dockerfile (its FROM is the base); the context travels along
    spec = img._to_spec().build
    assert spec.base_image == "" and spec.dockerfile == df.read_text()
    assert sorted(f.path for f in spec.context) == ["Dockerfile", "data.txt"]
    assert list(spec.steps[0].pip_install.packages) == ["extra"]
    f = tmp_path / "e.sh"
    f.write_text("#!/bin/sh\n")
    img = Image.base("x").add_local_file(f, "/app/e.sh", mode=0o755)
    assert img._steps[0].add_file.mode == 0o755 and img._steps[0].add_file.content == b"#!/bin/sh\n"


def test_secrets_and_policy(tmp_path, monkeypatch):
    monkeypatch.setenv("LOCAL_TOK", "v1")
    assert Secret.from_local_env("LOCAL_TOK")._to_proto().inline_value == b"v1"
    envf = tmp_path / ".env"
    envf.write_text("# c\nA=1\nexport B='two'\n")
    ref = Secret.from_local_env_file(envf)._to_proto()
    assert dict(ref.inline_values.values) == {"A": b"1", "B": b"two"}
    assert list(Secret.from_integration("pg", keys=["PASSWORD"])._to_proto().integration.keys) == ["PASSWORD"]
    p = NetworkPolicy(allowed_routes=[NetworkPolicy.Route("10.0.0.0/8", ports=[(5432, 5432)])],
                      denied_routes=["169.254.169.254/32"])._to_proto()
    assert p.allowed_routes[0].ports[0].start == 5432 and p.denied_routes[0].cidr.startswith("169")
    with pytest.raises(ValueError):
        NetworkPolicy.Matcher(exact="a", regex="b")
    sb = Sandbox(resource_detectors=[wr.ResourceDetector.GITHUB_PULL_REQUESTS])
    assert list(sb._request().network_policy.allowed_hosts) == ["api.github.com"]


def test_token_file_cache(tmp_path):
    from warren._auth import TokenFile
    import base64, json
    now = [1000.0]
    claims = base64.urlsafe_b64encode(json.dumps({"exp": 1100}).encode()).decode().rstrip("=")
    f = tmp_path / "tok"
    f.write_text(f"h.{claims}.s")
    tf = TokenFile(str(f), clock=lambda: now[0])
    assert tf.get() == f"h.{claims}.s"
    f.write_text("new")
    now[0] = 1049.0
    assert tf.get() != "new"  # cached for half the remaining 100 s
    now[0] = 1051.0
    assert tf.get() == "new"


def test_addresses():
    assert wr.grpc_target("unix:/run/w.sock") == "unix:///run/w.sock"
    assert wr.grpc_target("unix:///run/w.sock") == "unix:///run/w.sock"
    assert wr.grpc_target("tcp:127.0.0.1:5") == "127.0.0.1:5"
    assert wr.grpc_target("localhost:50051") == "localhost:50051"


def test_unavailable_when_nothing_listens(tmp_path):
    with SandboxClient("unix:" + str(tmp_path / "none.sock")) as c:
        with pytest.raises(wr.Unavailable):
            c.list()


def test_status_is_a_warren_enum():
    import grpc

    assert [s.name for s in wr.Status] == [c.name for c in grpc.StatusCode]
    assert [int(s) for s in wr.Status] == [c.value[0] for c in grpc.StatusCode]
    e = wr.NotFound(wr.Status.NOT_FOUND, "x")
    assert e.status is wr.Status.NOT_FOUND and str(e) == "NOT_FOUND: x"
    assert wr.GitError("bad").status == wr.Status.UNKNOWN


# --- plain dataclasses, not protobuf messages ---

def _frozen(obj):
    import dataclasses
    assert dataclasses.is_dataclass(obj) and type(obj).__dataclass_params__.frozen, obj
    with pytest.raises(dataclasses.FrozenInstanceError):
        setattr(obj, dataclasses.fields(obj)[0].name, None)
    return obj


def test_results_are_frozen_dataclasses(client, tmp_path):
    import datetime as dt

    v = _frozen(client.version())
    assert isinstance(v, wr.VersionInfo)
    assert (v.version, v.api_version, v.uptime_seconds, v.cgroup_mode) == ("0.0.0-fake", "v1", 7, "v2")
    img = _frozen(client.get_image("busybox:latest"))
    assert isinstance(img, wr.ImageInfo) and img.names == ["busybox:latest"]
    assert img.size_bytes == 1024 and img.source == "import" and img.layers == ["sha256:l1"]
    assert img.created_at == dt.datetime(2023, 11, 14, 22, 13, 20, tzinfo=dt.timezone.utc)
    cfg = _frozen(img.config)
    assert cfg == wr.ImageConfig(env={"PATH": "/bin", "A": "b=c"}, workdir="/w", cmd=["sh"])
    assert client.list_images() == [img]
    with pytest.raises(wr.NotFound):
        client.get_image("nosuch")
    imported = client.import_image("mine:1", b"tar bytes",
                                   config=wr.ImageConfig(env={"K": "v"}, entrypoint=["/e"]))
    assert imported.names == ["mine:1"]
    assert imported.config == wr.ImageConfig(env={"K": "v"}, entrypoint=["/e"])
    sec = _frozen(client.set_secret("PG", values={"USER": "u", "PASSWORD": "p"}))
    assert sec == wr.SecretInfo(name="PG", keys=["PASSWORD", "USER"],
                                updated_at=dt.datetime.fromtimestamp(1_700_000_000, dt.timezone.utc))
    assert client.list_secrets() == [sec]
    vol = _frozen(client.create_volume("v"))
    assert isinstance(vol, wr.VolumeInfo) and vol.name == "v" and vol.created_at is not None
    assert [x.name for x in client.list_volumes()] == ["v"]
    f = _frozen(wr.Volume("v", client=client).put_file("a/b.txt", "hello", mode=0o600))
    assert f == wr.FileInfo(path="a/b.txt", size_bytes=5, mode=0o600, modified_at=vol.created_at)
    assert [x.path for x in wr.Volume("v", client=client).list_files("a/")] == ["a/b.txt"]
    sb = client.create(image="img")
    r = _frozen(sb.exec("echo", "x"))
    assert r.stdout == ["x"]
    _frozen(sb.refresh())
    for x in (v, img, cfg, sec, vol, f, r):
        assert not type(x).__module__.endswith("_pb2")


def test_git_status_is_a_frozen_dataclass(client, tmp_path):
    sb = client.create(image="img")
    repo = str(tmp_path / "r")
    sb.git.init(repo, initial_branch="main")
    (tmp_path / "r" / "f").write_text("x")
    st = _frozen(sb.git.status(repo))
    assert st == wr.GitStatus("main", 0, 0, ["f"], untracked=["f"]) and not st.is_clean
    with pytest.raises(wr.GitError) as ei:
        sb.git.status(str(tmp_path / "nothere"))
    assert ei.value.status == wr.Status.UNKNOWN and ei.value.exit_code


def test_processes_are_process_infos(client):
    sb = client.create(image="img")
    p = sb.exec_start("sleep", "300")
    try:
        procs = client.processes(sb)
        assert procs == sb.processes() == client.processes(sb.id)
        running = [_frozen(x) for x in procs if x.running]
        assert [x.pid for x in running] == [p.pid] and running[0].argv == ["sleep", "300"]
        assert running[0].exit_code is None and running[0].reason is None
        done = [x for x in procs if not x.running]
        assert isinstance(done[0], wr.ProcessInfo) and done[0].exit_code == 0
        assert done[0].reason == "exited"
    finally:
        p.send_signal(signal.SIGKILL)
        p.wait()


# --- one definition of the create options ---

def test_create_takes_exactly_the_sandbox_keywords(client, server):
    import inspect

    _, sbx, _ = server
    create = inspect.signature(client.create)
    ctor = inspect.signature(Sandbox)
    assert list(create.parameters.values()) == list(ctor.parameters.values())
    assert len([p for p in ctor.parameters.values() if p.kind is p.KEYWORD_ONLY]) == 20
    with pytest.raises(TypeError):
        client.create(image="img", nme="typo")
    client.create("img", hostname="h1", compute_class=wr.ComputeClass.HOST, identity=True)
    req = sbx.last_create
    assert req.image.ref == "img" and req.hostname == "h1" and req.identity
    assert req.compute_class == int(wr.ComputeClass.HOST)
    assert not req.block_network
    client.create("img", block_network=True)
    assert sbx.last_create.block_network
    client.create("img", journal_execs=True)
    assert sbx.last_create.journal_execs


def test_modules_import_without_a_cycle():
    """The SDK's modules import one another in one direction only: the
    graph of module-level imports between warren modules has no cycle, and
    no function imports a warren module late to dodge one."""
    import ast

    pkg = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "warren")
    graph = {}
    for f in sorted(os.listdir(pkg)):
        if not f.endswith(".py"):
            continue
        mod = f[:-3]
        tree = ast.parse(open(os.path.join(pkg, f)).read())
        deps = set()
        for node in tree.body:
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("warren._"):
                name = node.module.split(".")[1]
                if name != "_proto":
                    deps.add(name)
        graph[mod] = deps
        for fn in ast.walk(tree):
            if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
                for node in ast.walk(fn):
                    if isinstance(node, (ast.Import, ast.ImportFrom)):
                        names = [node.module or ""] if isinstance(node, ast.ImportFrom) else \
                            [a.name for a in node.names]
                        assert not any(n.startswith("warren") for n in names), \
                            f"{mod}.{fn.name} imports {names} inside a function"
    assert "_sandbox" in graph["_client"] and "_client" not in graph["_sandbox"]

    state = {}

    def visit(m, path):
        assert state.get(m) != "open", "import cycle: " + " -> ".join(path + [m])
        if state.get(m) == "done":
            return
        state[m] = "open"
        for d in graph.get(m, ()):
            visit(d, path + [m])
        state[m] = "done"

    for m in graph:
        visit(m, [])


# --- context managers ---

def test_process_context_manager_kills_a_running_process(client, server):
    _, sbx, _ = server
    sb = client.create(image="img")
    t0 = time.monotonic()
    with sb.exec_start("sleep", "300") as p:
        assert p.returncode is None
    assert time.monotonic() - t0 < 10
    assert p.returncode == 128 + signal.SIGKILL
    kills = [r.signal for r in sbx.exec_requests if r.WhichOneof("kind") == "signal"]
    assert kills and kills[-1].signal == signal.SIGKILL and kills[-1].group
    assert sbx.running == {}


def test_process_context_manager_leaves_a_finished_process_alone(client, server):
    _, sbx, _ = server
    sb = client.create(image="img")
    with sb.exec_start("sh", "-c", "echo hi") as p:
        assert p.wait().stdout_text == "hi\n"
    assert p.returncode == 0
    assert not any(r.WhichOneof("kind") == "signal" for r in sbx.exec_requests)


def test_process_context_manager_kills_on_error(client, server):
    sb = client.create(image="img")
    with pytest.raises(KeyError):
        with sb.exec_start("sleep", "300") as p:
            raise KeyError("boom")
    assert p.returncode == 128 + signal.SIGKILL


def test_sandbox_context_manager_terminates(client, server):
    _, sbx, _ = server
    with client.create(image="img") as sb:
        assert sb.exec("true").exit_code == 0
    assert sbx.boxes[sb.id].status == fake_server.pb.SANDBOX_STATUS_TERMINATED
    assert sb.status == wr.SandboxStatus.TERMINATED
    with pytest.raises(ValueError):
        with client.create(image="img") as sb2:
            raise ValueError("the block's error is not hidden")
    assert sbx.boxes[sb2.id].status == fake_server.pb.SANDBOX_STATUS_TERMINATED
    # terminating inside the block is fine too
    with client.create(image="img") as sb3:
        sb3.terminate()
    assert sb3.status == wr.SandboxStatus.TERMINATED


def test_sandbox_context_manager_runs_from_env(server, monkeypatch):
    port, sbx, _ = server
    monkeypatch.setenv("WARREN_ADDR", f"127.0.0.1:{port}")
    with Sandbox(image="img", name="ctx") as sb:
        assert sb.id and sbx.last_create.name == "ctx"
        assert sb.exec("echo", "x").stdout_text == "x\n"
    assert sbx.boxes[sb.id].status == fake_server.pb.SANDBOX_STATUS_TERMINATED
    assert sb._channel is not None and sb._channel.closed  # its own client is closed
