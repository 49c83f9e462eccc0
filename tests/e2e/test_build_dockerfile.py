"""The builder, second part (issue 14): Dockerfiles through the daemon's
parser (COPY from a build context, ARG substitution, heredocs, the config
LABEL/EXPOSE/HEALTHCHECK/SHELL/STOPSIGNAL record), hostile inputs (10,000
instructions, COPY ../../etc/shadow, a symlink out of an added dir, a step
that never exits, a build cancelled mid-step) leaving nothing behind,
add_local_dir as one cached layer, identical concurrent builds run once,
uploads by digest, and pruning."""
import glob
import os
import threading
import time

import grpc
import pytest

import warren as wr
from warren import Image
from warren._proto.warren.v1 import images_pb2 as pb

from test_build import IMAGE, sh
from test_build import live_sandboxes as live


def layer_dirs(d):
    return set(os.listdir(os.path.join(d.state_dir, "layers", "sha256")))


def nothing_left(d, client, layers_before, n_images_before, ids=(), wait=15.0):
    """No build sandbox, mount, cgroup, sandbox dir, layer or image left
    by a failed build (the host cleanup after a terminate may take a
    moment)."""
    deadline = time.monotonic() + wait
    while True:
        left = dict(
            live=live(client),
            mounts=[l for l in open("/proc/self/mountinfo") if d.state_dir in l],
            dirs=os.listdir(os.path.join(d.state_dir, "sandboxes"))
            if os.path.isdir(os.path.join(d.state_dir, "sandboxes")) else [],
            cgroups=[p for i in ids for p in glob.glob("/sys/fs/cgroup/warren/" + i)
                     + glob.glob("/sys/fs/cgroup/*/warren/" + i)],
            layers=layer_dirs(d) - layers_before,
            tmp=os.listdir(os.path.join(d.state_dir, "layers", "tmp")),
            images=len(client.list_images()) - n_images_before)
        if not any(left.values()) or time.monotonic() > deadline:
            return left
        time.sleep(0.2)


def test_dockerfile_with_context(client, tmp_path):
    (tmp_path / "app").mkdir()
    (tmp_path / "app" / "main.sh").write_text("echo main\n")
    (tmp_path / "app" / "lib").mkdir()
    (tmp_path / "app" / "lib" / "util.txt").write_text("util\n")
    (tmp_path / "top.txt").write_text("top\n")
    (tmp_path / "secret.key").write_text("never sent\n")
    (tmp_path / ".dockerignore").write_text("*.key\n")
    df = tmp_path / "Dockerfile"
    df.write_text(
        "# syntax=docker/dockerfile:1\n"
        "ARG BASE=busybox\n"
        "FROM ${BASE}:latest\n"
        "ARG DEST=/opt/app\n"
        "ARG GREETING\n"
        "ENV APP_HOME=$DEST \\\n"
        "    MODE=\"two words\"\n"
        "COPY --chmod=755 app/ ${APP_HOME}/\n"
        "COPY top.txt /etc/\n"
        "COPY <<EOF /etc/motd\n"
        "hello from a heredoc\n"
        "EOF\n"
        "WORKDIR $APP_HOME\n"
        "WORKDIR sub\n"
        "RUN <<EOS\n"
        "echo \"greeting=$GREETING\" > /etc/greeting\n"
        "pwd > /etc/where\n"
        "EOS\n"
        "RUN [\"sh\", \"-c\", \"echo exec-form > /etc/exec\"]\n"
        "LABEL org.example.name=\"demo app\" version=1\n"
        "EXPOSE 8080 53/udp\n"
        "HEALTHCHECK --interval=30s --retries=3 CMD wget -q -O- http://localhost:8080/\n"
        "SHELL [\"/bin/sh\", \"-ec\"]\n"
        "STOPSIGNAL SIGINT\n"
        "USER 0\n"
        "CMD [\"sh\", \"-c\", \"echo default\"]\n")
    img = Image.from_dockerfile(df, build_args={"GREETING": "hi"}).env({"EXTRA": "chained"})
    assert all(f.path != "secret.key" for f in img._context)
    logs = []
    info = client.build_image(img, on_log=logs.append)
    c = info.config
    assert c.workdir == "/opt/app/sub"
    assert c.env["APP_HOME"] == "/opt/app" and c.env["MODE"] == "two words"
    assert c.env["EXTRA"] == "chained" and "GREETING" not in c.env  # ARGs are not ENV
    assert c.cmd == ["sh", "-c", "echo default"] and c.user == "0"
    raw = client._images.GetImage(pb.GetImageRequest(image=info.id)).config
    assert list(raw.labels) == ["org.example.name=demo app", "version=1"]
    assert list(raw.exposed_ports) == ["53/udp", "8080/tcp"]
    assert list(raw.healthcheck) == ["CMD-SHELL", "wget -q -O- http://localhost:8080/"]
    assert raw.healthcheck_interval_ns == 30 * 10**9 and raw.healthcheck_retries == 3
    assert list(raw.shell) == ["/bin/sh", "-ec"] and raw.stop_signal == "SIGINT"
    assert c.labels == {"org.example.name": "demo app", "version": "1"}
    assert c.exposed_ports == ["53/udp", "8080/tcp"] and c.stop_signal == "SIGINT"
    assert c.healthcheck[0] == "CMD-SHELL" and c.shell == ["/bin/sh", "-ec"]
    sb = client.create(image=info.id, entrypoint=["sleep", "infinity"])
    try:
        out = sh(sb, "cat /opt/app/main.sh /opt/app/lib/util.txt /etc/top.txt /etc/motd "
                     "/etc/greeting /etc/where /etc/exec; stat -c %a /opt/app/main.sh; "
                     "ls /opt/app")
        assert out == ("echo main\nutil\ntop\nhello from a heredoc\ngreeting=hi\n"
                       "/opt/app/sub\nexec-form\n755\nlib\nmain.sh\nsub\n"), out
    finally:
        sb.terminate()
    # everything cached the second time, even across a fresh Image object
    logs2 = []
    again = client.build_image(Image.from_dockerfile(df, build_args={"GREETING": "hi"})
                               .env({"EXTRA": "chained"}), on_log=logs2.append)
    assert again.id == info.id
    steps = [l for l in logs2 if l.startswith("Step ")]
    assert steps and all("cached" in l for l in steps), logs2
    # another build arg: the RUN that sees it runs again
    other = client.build_image(Image.from_dockerfile(df, build_args={"GREETING": "yo"}))
    assert other.id != info.id


@pytest.mark.parametrize("text,err,words", [
    ("FROM busybox\nCOPY ../../etc/shadow /x\n", wr.InvalidArgument,
     ["line 2, column 1", "outside the build context"]),
    ("FROM busybox\nCOPY missing.txt /x\n", wr.InvalidArgument,
     ["line 2", "no such file", "missing.txt"]),
    ("FROM busybox\nRUN true\n  BOGUS thing\n", wr.InvalidArgument,
     ["line 3, column 3", "unknown instruction BOGUS"]),
    ("FROM busybox\nADD https://example.com/x.tar.gz /x\n", wr.Unimplemented,
     ["line 2", "remote"]),
    ("FROM busybox\nFROM busybox\n", wr.Unimplemented, ["multi-stage"]),
    ("FROM busybox\nRUN <<EOF\necho never closed\n", wr.InvalidArgument,
     ["line 2", "not terminated"]),
    ("FROM busybox\nWORKDIR ${NEEDED:?set NEEDED}\n", wr.InvalidArgument,
     ["line 2", "set NEEDED"]),
    ("RUN true\n", wr.InvalidArgument, ["before FROM"]),
])
def test_dockerfile_errors_name_the_line(client, d, tmp_path, text, err, words):
    df = tmp_path / "Dockerfile"
    df.write_text(text)
    layers, n_images = layer_dirs(d), len(client.list_images())
    with pytest.raises(err) as ei:
        client.build_image(Image.from_dockerfile(df))
    for w in words:
        assert w in str(ei.value), str(ei.value)
    assert not any(nothing_left(d, client, layers, n_images, wait=2).values())


def test_ten_thousand_instructions(client, d, tmp_path):
    df = tmp_path / "Dockerfile"
    df.write_text("FROM busybox\n" + "".join(f"RUN echo {i}\n" for i in range(10000)))
    layers, n_images = layer_dirs(d), len(client.list_images())
    t = time.perf_counter()
    with pytest.raises(wr.InvalidArgument) as ei:
        client.build_image(Image.from_dockerfile(df))
    assert time.perf_counter() - t < 5
    assert "more than 1000 instructions" in str(ei.value)
    # dockerfile_commands go through the same limits
    with pytest.raises(wr.InvalidArgument) as ei:
        client.build_image(Image.base(IMAGE).dockerfile_commands(
            ["\n".join(f"RUN echo {i}" for i in range(10000))]))
    assert "more than" in str(ei.value)
    assert not any(nothing_left(d, client, layers, n_images, wait=2).values())


def test_symlink_out_of_an_added_dir_is_refused(tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    (src / "ok.txt").write_text("ok")
    (src / "inside").symlink_to("ok.txt")
    (src / "shadow").symlink_to("/etc/shadow")
    with pytest.raises(ValueError) as ei:
        Image.base(IMAGE).add_local_dir(src, "/app")
    assert "shadow" in str(ei.value) and "outside" in str(ei.value)
    df = tmp_path / "Dockerfile"
    df.write_text("FROM busybox\nCOPY . /app\n")
    with pytest.raises(ValueError):
        Image.from_dockerfile(df, context_dir=src)
    (src / "shadow").unlink()
    img = Image.base(IMAGE).add_local_dir(src, "/app")  # the inside link is fine
    assert sorted(f.path.split("/", 2)[2] for f in img._context) == ["inside", "ok.txt"]


def test_add_local_dir_one_layer_rerun_from_changed_step(client, tmp_path):
    src = tmp_path / "src"
    (src / "pkg").mkdir(parents=True)
    for i in range(20):
        (src / "pkg" / f"m{i}.py").write_text(f"x = {i}\n")
    (src / "run.sh").write_text("#!/bin/sh\necho run\n")
    os.chmod(src / "run.sh", 0o755)

    def image():
        return (Image.base(IMAGE)
                .run_commands("echo before > /before")
                .add_local_dir(src, "/app")
                .run_commands("ls /app/pkg | wc -l > /count"))
    base = client.get_image(IMAGE)
    first = client.build_image(image())
    assert len(first.layers) == len(base.layers) + 3  # RUN, the dir (one layer), RUN
    (src / "pkg" / "m7.py").write_text("x = 'changed'\n")
    logs = []
    second = client.build_image(image(), on_log=logs.append)
    steps = [l for l in logs if l.startswith("Step ")]
    assert len(steps) == 3
    assert "cached" in steps[0] and "cached" not in steps[1] and "cached" not in steps[2], steps
    assert second.layers[:-2] == first.layers[:-2] and second.layers[-2] != first.layers[-2]
    sb = client.create(image=second.id, entrypoint=["sleep", "infinity"])
    try:
        assert sh(sb, "cat /app/pkg/m7.py /count; /app/run.sh") == "x = 'changed'\n20\nrun\n"
    finally:
        sb.terminate()


def test_step_that_never_exits_times_out(client, d):
    layers, n_images = layer_dirs(d), len(client.list_images())
    t = time.perf_counter()
    with pytest.raises(wr.WarrenError) as ei:
        client.build_image(Image.base(IMAGE).run_commands("echo started; sleep 100000"),
                           step_timeout=2)
    assert time.perf_counter() - t < 30
    msg = str(ei.value)
    assert "timed out" in msg and "started" in msg, msg
    assert not any(nothing_left(d, client, layers, n_images).values())


def test_cancel_mid_step_leaves_nothing(client, d):
    layers, n_images = layer_dirs(d), len(client.list_images())
    seen = set()
    req = pb.BuildImageRequest(build=Image.base(IMAGE).run_commands(
        "echo cancel-me > /partial; echo running; sleep 100000")._to_build())
    call = client._images.BuildImage(req)
    lines = []

    def read():
        try:
            for p in call:
                lines.append(p.log)
        except grpc.RpcError:
            pass
    t = threading.Thread(target=read)
    t.start()
    deadline = time.monotonic() + 30
    while "running" not in lines and time.monotonic() < deadline:
        seen.update(s.id for s in live(client))
        time.sleep(0.05)
    assert "running" in lines, lines
    seen.update(s.id for s in live(client))
    assert seen  # the build sandbox ran
    call.cancel()
    t.join(10)
    left = nothing_left(d, client, layers, n_images, ids=seen)
    assert not any(left.values()), left


def test_identical_concurrent_builds_run_once(client, d):
    marker = f"/tmp/warren-build-once-{os.getpid()}-{time.monotonic_ns()}"
    img = Image.base(IMAGE).run_commands(f"sleep 1; echo {marker} > /once")
    results, logs = [None, None], [[], []]

    def build(i):
        with wr.SandboxClient(d.unix_addr) as c:
            results[i] = c.build_image(img, on_log=logs[i].append)
    ts = [threading.Thread(target=build, args=(i,)) for i in range(2)]
    for t in ts:
        t.start()
        time.sleep(0.2)
    for t in ts:
        t.join(60)
    assert results[0] and results[1] and results[0].id == results[1].id
    # one of them (whichever reached the daemon second) waited for the other
    # and then ran nothing: its one step was a cache hit
    waited = [lg for lg in logs if any("Waiting for an identical build" in l for l in lg)]
    assert len(waited) == 1, logs
    steps = [l for l in waited[0] if l.startswith("Step ")]
    assert len(steps) == 1 and "cached" in steps[0], waited[0]
    ran = logs[1 - logs.index(waited[0])]
    assert not any("cached" in l for l in ran if l.startswith("Step ")), ran


def test_uploads_by_digest(client, d, tmp_path):
    big = tmp_path / "big.bin"
    big.write_bytes(os.urandom(3 << 20))  # three chunks
    img = Image.base(IMAGE).add_local_file(big, "/data/big.bin")
    import hashlib
    digest = "sha256:" + hashlib.sha256(big.read_bytes()).hexdigest()
    assert list(client._images.MissingBlobs(pb.MissingBlobsRequest(digests=[digest])).missing) \
        == [digest]
    info = client.build_image(img)
    assert os.path.exists(os.path.join(d.state_dir, "blobs", "sha256", digest[7:]))
    assert list(client._images.MissingBlobs(pb.MissingBlobsRequest(digests=[digest])).missing) == []
    sb = client.create(image=info.id, entrypoint=["sleep", "infinity"])
    try:
        assert sh(sb, "sha256sum /data/big.bin").split()[0] == digest[7:]
    finally:
        sb.terminate()
    # a blob whose bytes do not match its digest is refused, nothing stored
    wrong = "sha256:" + "0" * 64

    def chunks():
        yield pb.UploadBlobRequest(digest=wrong)
        yield pb.UploadBlobRequest(data=b"not that")
    with pytest.raises(grpc.RpcError) as ei:
        client._images.UploadBlob(chunks())
    assert ei.value.code() == grpc.StatusCode.DATA_LOSS
    assert not os.path.exists(os.path.join(d.state_dir, "blobs", "sha256", "0" * 64))
    # a spec naming a blob that was never uploaded
    bad = pb.ImageBuild(base_image=IMAGE, steps=[pb.BuildStep(add_file=pb.FileAdd(
        path="/x", digest="sha256:" + "1" * 64))])
    with pytest.raises(grpc.RpcError) as ei:
        list(client._images.BuildImage(pb.BuildImageRequest(build=bad)))
    assert ei.value.code() == grpc.StatusCode.FAILED_PRECONDITION
    assert "was not uploaded" in ei.value.details()


def test_prune(client, d):
    info = client.build_image(Image.base(IMAGE).run_commands("echo prune-me > /p"))
    assert info.id in [i.id for i in client.list_images()]
    r = client.prune_images()
    assert info.id in r.deleted_images and r.deleted_layers >= 1 and r.deleted_cache_entries >= 1
    ids = [i.id for i in client.list_images()]
    assert info.id not in ids and client.get_image(IMAGE).id in ids  # named images stay
    assert os.listdir(os.path.join(d.state_dir, "build-cache")) == []
    # the next build runs again from scratch, and works
    logs = []
    client.build_image(Image.base(IMAGE).run_commands("echo prune-me > /p"), on_log=logs.append)
    assert not any("cached" in l for l in logs if l.startswith("Step "))


def test_base_pulled_on_demand(client, tmp_path):
    """A base that is not stored is pulled first (here from a registry on
    127.0.0.1), by Image.base and by a Dockerfile's FROM."""
    import subprocess
    import sys
    from conftest import ROOT
    sys.path.insert(0, str(ROOT / "tests" / "registry"))
    import registry as R
    if not R.available():
        pytest.skip("docker-registry and skopeo are needed (scripts/deps.sh)")
    d = tmp_path / "bb"
    subprocess.run(["bash", str(ROOT / "tests/images/busybox-rootfs.sh"), str(d / "rootfs"),
                    "--tar", str(d / "rootfs.tar")], check=True, capture_output=True)
    reg = R.Registry()
    try:
        lay = str(tmp_path / "layout")
        L = R.Layout(lay)
        md, _ = L.image([(d / "rootfs.tar").read_bytes()], {"Env": ["PATH=/usr/bin:/bin"]})
        L.tag(md, "bb")
        reg.push(lay, "bb", "test/buildbase:1")
        ref = f"{reg.host}/test/buildbase:1"
        logs = []
        info = client.build_image(Image.base(ref).run_commands("echo on-pulled > /p"),
                                  on_log=logs.append)
        assert "Pulling the base image first" in logs
        df = tmp_path / "Dockerfile"
        df.write_text(f"FROM {ref}\nRUN cat /p 2>/dev/null || echo fresh > /q\n")
        info2 = client.build_image(Image.from_dockerfile(df))  # stored now: no pull
        assert info.layers[0] == info2.layers[0]
        with pytest.raises(wr.WarrenError) as ei:
            client.build_image(Image.base(f"{reg.host}/test/missing:1").run_commands("true"))
        assert "missing" in str(ei.value)
    finally:
        reg.stop()


def test_add_local_dir_empty_dir(client, tmp_path):
    (tmp_path / "empty").mkdir()
    info = client.build_image(Image.base(IMAGE).add_local_dir(tmp_path / "empty", "/srv/empty"))
    sb = client.create(image=info.id, entrypoint=["sleep", "infinity"])
    try:
        assert sh(sb, "test -d /srv/empty && ls -A /srv/empty | wc -l") == "0\n"
    finally:
        sb.terminate()


def test_base_env_visible_to_substitution(client, tmp_path):
    """ENV PATH=/x:$PATH sees the base image's PATH (and SDK env steps are
    visible to later dockerfile_commands), as in Docker."""
    base = client.build_image(Image.base(IMAGE).env({"PATH": "/usr/bin:/bin",
                                                     "BASEVAR": "from-base"}))
    df = tmp_path / "Dockerfile"
    df.write_text(f"FROM {base.id}\nENV PATH=/opt/tools:$PATH BV=${{BASEVAR}}-df\n")
    info = client.build_image(Image.from_dockerfile(df))
    assert info.config.env["PATH"] == "/opt/tools:/usr/bin:/bin"
    assert info.config.env["BV"] == "from-base-df"
    chained = client.build_image(Image.base(base.id).env({"SDKVAR": "sdk"})
                                 .dockerfile_commands(["ENV C=${BASEVAR}+${SDKVAR}"]))
    assert chained.config.env["C"] == "from-base+sdk"
