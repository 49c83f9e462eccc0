"""Sandboxes from registry images: CreateSandbox pulls on demand (the SDK's
plain string and Image.base(ref) both resolve through it), the image's
config (Env, WorkingDir, Entrypoint/Cmd) applies, pull errors surface as
clear WarrenErrors, and a second sandbox from the pulled image starts with
the registry gone. Everything on 127.0.0.1."""
import os
import subprocess
import sys
import tempfile
import time

import pytest

import warren as wr
from conftest import ROOT

sys.path.insert(0, str(ROOT / "tests" / "registry"))
import registry as R  # noqa: E402

pytestmark = pytest.mark.skipif(not R.available(),
                                reason="docker-registry and skopeo are needed (scripts/deps.sh)")


def busybox_layer():
    d = tempfile.mkdtemp(prefix="warren-bbl-")
    try:
        tar = os.path.join(d, "rootfs.tar")
        subprocess.run(["bash", str(ROOT / "tests/images/busybox-rootfs.sh"),
                        os.path.join(d, "rootfs"), "--tar", tar], check=True, capture_output=True)
        with open(tar, "rb") as f:
            return f.read()
    finally:
        subprocess.run(["rm", "-rf", d], check=True)


@pytest.fixture(scope="module")
def reg(tmp_path_factory):
    r = R.Registry()
    lay = str(tmp_path_factory.mktemp("layout"))
    L = R.Layout(lay)
    extra = R.layer_tar([("app", "dir", None), ("app/hello.txt", "file", b"from the registry\n")])
    md, _ = L.image([busybox_layer(), extra],
                    {"Env": ["PATH=/usr/bin:/bin", "GREETING=hi from config"],
                     "WorkingDir": "/app",
                     "Entrypoint": ["/bin/sh", "-c"],
                     "Cmd": ["echo started > /tmp/entry-ran; sleep 1000"]})
    L.tag(md, "bb")
    r.push(lay, "bb", "test/bb:1")
    yield r
    r.stop()


@pytest.fixture(scope="module")
def users_reg(tmp_path_factory):
    """Images whose USER is a name (their own registry: `reg` is stopped by
    a test above)."""
    r = R.Registry()
    lay = str(tmp_path_factory.mktemp("users"))
    L = R.Layout(lay)
    # USER by name: the passwd/group of the top layer win over busybox's,
    # a whiteout of /etc/passwd leaves no named users.
    bb = busybox_layer()
    users = R.layer_tar([
        ("etc", "dir", None),
        ("etc/passwd", "file", b"root:x:0:0:root:/root:/bin/sh\n"
                               b"app:x:1234:1235:App:/home/app:/bin/sh\n"),
        ("etc/group", "file", b"root:x:0:\nappgrp:x:777:app\n"),
    ])
    gone = R.layer_tar([("etc/passwd", "whiteout", None)])
    for tag, layers, user in [("app", [bb, users], "app"), ("appgrp", [bb, users], "app:appgrp"),
                              ("ghost", [bb, users], "ghost"), ("gone", [bb, users, gone], "app"),
                              ("num", [bb, users], "1234")]:
        md, _ = L.image(layers, {"Env": ["PATH=/usr/bin:/bin"], "User": user})
        L.tag(md, tag)
        r.push(lay, tag, "test/users:" + tag)
    yield r
    r.stop()


def test_create_pulls_on_demand_then_works_offline(fresh_warrend, reg):
    d = fresh_warrend()
    ref = "%s/test/bb:1" % reg.host
    with wr.SandboxClient(d.unix_addr) as c:
        sb = c.create(image=ref)           # not present: pulled on demand
        try:
            r = sb.exec("sh", "-c", 'echo "$GREETING"; pwd; cat hello.txt')
            assert r.stdout == ["hi from config", "/app", "from the registry"]
            # the image's Entrypoint + Cmd run as the sandbox's main process
            deadline = time.monotonic() + 5
            while sb.exec("cat", "/tmp/entry-ran").exit_code != 0:
                assert time.monotonic() < deadline, "image entrypoint did not run"
                time.sleep(0.05)
        finally:
            sb.terminate()
        reg.stop()                        # the registry is gone
        sb2 = c.create(image=wr.Image.base(ref))
        try:
            assert sb2.exec("cat", "/app/hello.txt").stdout_text == "from the registry\n"
        finally:
            sb2.terminate()


def test_pull_errors_are_clear(fresh_warrend):
    d = fresh_warrend()
    with wr.SandboxClient(d.unix_addr) as c:
        port = R.free_port()   # nothing listens there
        with pytest.raises(wr.WarrenError) as ei:
            c.create(image="127.0.0.1:%d/nothing/here:1" % port)
        assert ei.value.status == wr.Status.UNAVAILABLE
        assert "127.0.0.1:%d" % port in ei.value.message
        with pytest.raises(wr.WarrenError) as ei:
            c.create(image="Bad Reference!")
        assert ei.value.status == wr.Status.INVALID_ARGUMENT


def test_image_user_by_name(fresh_warrend, users_reg):
    reg = users_reg
    d = fresh_warrend()
    with wr.SandboxClient(d.unix_addr) as c:
        for tag, want in [("app", "1234 1235 /home/app"), ("appgrp", "1234 777 /home/app"),
                          ("num", "1234 1235 /home/app")]:
            sb = c.create(image="%s/test/users:%s" % (reg.host, tag))
            try:
                r = sb.exec("sh", "-c", 'echo "$(id -u) $(id -g) $HOME"')
                assert r.stdout_text.strip() == want, (tag, r.stderr)
                # exec as another user still works, and back to root
                assert sb.exec("id", "-u", user="root").stdout_text.strip() == "0"
            finally:
                sb.terminate()
        for tag in ("ghost", "gone"):
            with pytest.raises(wr.WarrenError) as ei:
                c.create(image="%s/test/users:%s" % (reg.host, tag))
            assert ei.value.status == wr.Status.FAILED_PRECONDITION, tag
            assert "USER" in ei.value.message and "no user" in ei.value.message, \
                ei.value.message
