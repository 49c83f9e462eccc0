"""The image builder (issue 14, first part): declarative steps run in build
sandboxes, each step a content-addressed layer, a step cache, streamed
build logs, config steps, Dockerfile instructions, failures that leave
nothing behind."""
import os
import time

import pytest

import warren as wr
from warren import Image

IMAGE = "busybox:latest"


def sh(sb, cmd):
    r = sb.exec("sh", "-c", cmd)
    assert r.exit_code == 0, r.stderr_text
    return r.stdout_text


def live_sandboxes(client):
    return [s for s in client.list() if s.status in (wr.SandboxStatus.RUNNING,
                                                      wr.SandboxStatus.PAUSED)]


def test_build_steps_cache_and_logs(client, tmp_path):
    f = tmp_path / "conf.txt"
    f.write_text("from-the-client\n")
    img = (Image.base(IMAGE)
           .run_commands("echo built > /hello", "rm /bin/true")
           .env({"GREETING": "hi", "N": "1"})
           .workdir("/work")
           .add_local_file(str(f), "/etc/app/conf.txt")
           .dockerfile_commands(["RUN mkdir -p /work && echo df > /work/df", "ENV FROM_DF=yes",
                                 'CMD ["sh", "-c", "echo default-cmd"]', "LABEL a=b"])
           .entrypoint([]))
    logs = []
    t = time.perf_counter()
    info = client.build_image(img, on_log=logs.append)
    cold = time.perf_counter() - t
    text = "\n".join(logs)
    assert "Step 1/" in text and "RUN echo built > /hello" in text
    assert info.id.startswith("sha256:")
    base = client.get_image(IMAGE)
    assert info.layers[:len(base.layers)] == base.layers
    # two RUN, the WORKDIR dir, the file, the Dockerfile RUN: five layers
    assert len(info.layers) == len(base.layers) + 5
    assert info.config.env["GREETING"] == "hi" and info.config.env["FROM_DF"] == "yes"
    assert info.config.workdir == "/work"
    assert info.config.cmd == ["sh", "-c", "echo default-cmd"]
    sb = client.create(image=info.id, entrypoint=["sleep", "infinity"])
    try:
        assert sh(sb, "cat /hello /etc/app/conf.txt /work/df; echo $GREETING $FROM_DF; pwd") == \
            "built\nfrom-the-client\ndf\nhi yes\n/work\n"
        assert sh(sb, "test -e /bin/true && echo yes || echo no") == "no\n"  # a whiteout
    finally:
        sb.terminate()
    # the second build runs nothing
    logs2 = []
    t = time.perf_counter()
    again = client.build_image(img, on_log=logs2.append)
    warm = time.perf_counter() - t
    assert again.id == info.id
    assert all("cached" in l for l in logs2 if l.startswith("Step ")), logs2
    assert warm < cold
    print(f"\nbuild: cold {cold:.2f} s, cached {warm * 1000:.0f} ms")
    assert live_sandboxes(client) == []


def test_shared_prefix_shares_layers(client):
    common = Image.base(IMAGE).run_commands("echo common > /common")
    a = client.build_image(common.run_commands("echo a > /a"))
    b = client.build_image(common.run_commands("echo b > /b"))
    assert a.layers[:-1] == b.layers[:-1] and a.layers[-1] != b.layers[-1]


def test_create_builds_first(client):
    sb = client.create(image=Image.base(IMAGE).run_commands("echo via-create > /v"),
                       entrypoint=["sleep", "infinity"])
    try:
        assert sh(sb, "cat /v") == "via-create\n"
    finally:
        sb.terminate()


def test_failed_step_keeps_nothing(client, d):
    before = set(os.listdir(os.path.join(d.state_dir, "layers", "sha256")))
    n_images = len(client.list_images())
    with pytest.raises(wr.WarrenError) as ei:
        client.build_image(Image.base(IMAGE).run_commands("echo partial > /p; echo oops; exit 3"))
    msg = str(ei.value)
    assert "exit code 3" in msg and "oops" in msg
    assert set(os.listdir(os.path.join(d.state_dir, "layers", "sha256"))) == before
    assert len(client.list_images()) == n_images
    assert live_sandboxes(client) == []


@pytest.mark.parametrize("img,err,words", [
    (lambda: Image.base(IMAGE).dockerfile_commands(["VOLUME /data"]), wr.Unimplemented,
     ["VOLUME"]),
    (lambda: Image.base(IMAGE).pip_install(["--index-url=http://evil"]), wr.InvalidArgument,
     ["pip_install"]),
    (lambda: Image.base(IMAGE).apt_install(["tmux; rm -rf /"]), wr.InvalidArgument,
     ["apt_install"]),
    (lambda: Image.base(IMAGE).workdir("relative"), wr.InvalidArgument, ["workdir"]),
    (lambda: Image.base("no-such-image:1").run_commands("true"), wr.NotFound, ["no-such-image"]),
])
def test_bad_specs_name_the_step(client, img, err, words):
    with pytest.raises(err) as ei:
        client.build_image(img())
    for w in words:
        assert w in str(ei.value), str(ei.value)


def test_apt_install_needs_a_root_build_user(client):
    img = Image.base(IMAGE).dockerfile_commands(["USER 1000"]).apt_install(["tmux"])
    with pytest.raises(wr.WarrenError) as ei:
        client.build_image(img)
    msg = str(ei.value)
    assert "FAILED_PRECONDITION" in msg and "apt_install tmux" in msg and "needs the build user to be root" in msg and "1000" in msg
    assert live_sandboxes(client) == []
