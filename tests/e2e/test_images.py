"""warren.v1.Images against a real warrend: import the busybox rootfs
through grpcio, get/list, layer reuse, hostile tars refused with the entry
named and nothing left behind, DeleteImage, UNIMPLEMENTED pull/build."""
import hashlib
import io
import os
import subprocess
import tarfile
import tempfile

import grpc
import pytest

from conftest import ROOT
from warren._proto.warren.v1 import images_pb2, images_pb2_grpc

TIMEOUT = 60
CHUNK = 256 * 1024


@pytest.fixture(scope="module")
def busybox_tar():
    d = tempfile.mkdtemp(prefix="warren-bb-")
    tar = os.path.join(d, "busybox.tar")
    subprocess.run(["bash", str(ROOT / "tests/images/busybox-rootfs.sh"), os.path.join(d, "rootfs"),
                    "--tar", tar], check=True, capture_output=True)
    yield tar
    subprocess.run(["rm", "-rf", d], check=True)


@pytest.fixture
def daemon(fresh_warrend):
    return fresh_warrend()


def stub(d):
    return images_pb2_grpc.ImagesStub(grpc.insecure_channel(d.unix_addr))


def requests(name, data, config=None, chunk=CHUNK):
    yield images_pb2.ImportImageRequest(meta=images_pb2.ImportImageMeta(name=name, config=config))
    for i in range(0, len(data), chunk):
        yield images_pb2.ImportImageRequest(data=data[i:i + chunk])


def import_bytes(s, name, data, config=None):
    return s.ImportImage(requests(name, data, config), timeout=TIMEOUT)


def entries(d, sub):
    p = os.path.join(d.state_dir, sub)
    return sorted(os.listdir(p)) if os.path.isdir(p) else []


def hostile_tar(*members):
    """members: (TarInfo, bytes or None)."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as t:
        for info, data in members:
            if data is not None:
                info.size = len(data)
                t.addfile(info, io.BytesIO(data))
            else:
                t.addfile(info)
    return buf.getvalue()


def member(name, type_=tarfile.REGTYPE, **kw):
    ti = tarfile.TarInfo(name)
    ti.type = type_
    ti.mode = kw.pop("mode", 0o644)
    for k, v in kw.items():
        setattr(ti, k, v)
    return ti


def test_import_busybox_get_list_reuse_delete(daemon, busybox_tar):
    s = stub(daemon)
    data = open(busybox_tar, "rb").read()
    diff_id = "sha256:" + hashlib.sha256(data).hexdigest()
    cfg = images_pb2.ImageConfig(env=["PATH=/bin:/usr/bin"], working_dir="/workspace",
                                 cmd=["/bin/sh"])
    img = import_bytes(s, "busybox", data, cfg)
    assert img.id.startswith("sha256:") and len(img.id) == 71
    assert list(img.names) == ["busybox:latest"]
    assert list(img.layers) == [diff_id]
    assert img.size_bytes == len(data)
    assert img.source == "import"
    assert img.created_at.unix_nanos > 0
    assert list(img.config.env) == ["PATH=/bin:/usr/bin"]
    assert img.config.working_dir == "/workspace"
    assert list(img.config.cmd) == ["/bin/sh"]

    layer_dir = os.path.join(daemon.state_dir, "layers", "sha256", diff_id[7:])
    assert os.path.isfile(os.path.join(layer_dir, "bin", "busybox"))
    assert os.readlink(os.path.join(layer_dir, "bin", "ls")) == "busybox"
    assert os.stat(os.path.join(layer_dir, "tmp")).st_mode & 0o7777 == 0o1777
    assert entries(daemon, "layers/tmp") == []
    assert entries(daemon, "tmp") == []

    got = s.GetImage(images_pb2.GetImageRequest(image="busybox:latest"), timeout=TIMEOUT)
    assert got.id == img.id and list(got.layers) == [diff_id]
    assert s.GetImage(images_pb2.GetImageRequest(image=img.id), timeout=TIMEOUT).id == img.id
    assert s.GetImage(images_pb2.GetImageRequest(image=img.id[7:19]), timeout=TIMEOUT).id == img.id

    # same tar and config under another name: same image, same layer
    again = import_bytes(s, "bb:v2", data, cfg)
    assert again.id == img.id
    assert sorted(again.names) == ["bb:v2", "busybox:latest"]
    # another config: a new image over the same layer
    other = import_bytes(s, "bb-noconf", data)
    assert other.id != img.id and list(other.layers) == [diff_id]
    assert entries(daemon, "layers/sha256") == [diff_id[7:]]

    listed = s.ListImages(images_pb2.ListImagesRequest(), timeout=TIMEOUT).images
    assert sorted(i.id for i in listed) == sorted([img.id, other.id])

    # delete: a name of a multi-name image only untags; then the image goes
    s.DeleteImage(images_pb2.DeleteImageRequest(image="bb:v2"), timeout=TIMEOUT)
    assert list(s.GetImage(images_pb2.GetImageRequest(image=img.id), timeout=TIMEOUT).names) == [
        "busybox:latest"]
    s.DeleteImage(images_pb2.DeleteImageRequest(image="busybox"), timeout=TIMEOUT)
    with pytest.raises(grpc.RpcError) as ei:
        s.GetImage(images_pb2.GetImageRequest(image="busybox"), timeout=TIMEOUT)
    assert ei.value.code() == grpc.StatusCode.NOT_FOUND
    assert os.path.isdir(layer_dir)  # bb-noconf still uses it
    s.DeleteImage(images_pb2.DeleteImageRequest(image=other.id), timeout=TIMEOUT)
    assert entries(daemon, "layers/sha256") == []
    assert entries(daemon, "layers/tmp") == []
    with pytest.raises(grpc.RpcError) as ei:
        s.DeleteImage(images_pb2.DeleteImageRequest(image=other.id), timeout=TIMEOUT)
    assert ei.value.code() == grpc.StatusCode.NOT_FOUND


def test_images_survive_restart(fresh_warrend, busybox_tar):
    """Images, names and layers persist; start-up keeps what is referenced."""
    import socket
    import time
    from conftest import WARREND
    d = fresh_warrend()
    img = import_bytes(stub(d), "keep", open(busybox_tar, "rb").read())
    d.proc.terminate()
    d.proc.wait(timeout=30)
    sock = os.path.join(d.tmp, "second.sock")
    with open(os.path.join(d.tmp, "second.log"), "wb") as log:
        p = subprocess.Popen([WARREND, "--state-dir", d.state_dir, "--listen", "unix:" + sock,
                              "--log-level", "debug"], stdout=log, stderr=subprocess.STDOUT)
        try:
            deadline = time.monotonic() + 20
            while not os.path.exists(sock) and time.monotonic() < deadline:
                assert p.poll() is None
                time.sleep(0.02)
            s2 = images_pb2_grpc.ImagesStub(grpc.insecure_channel("unix:" + sock))
            got = s2.GetImage(images_pb2.GetImageRequest(image="keep"), timeout=TIMEOUT)
            assert got.id == img.id and list(got.layers) == list(img.layers)
            assert os.path.isdir(os.path.join(d.state_dir, "layers", "sha256",
                                              img.layers[0][7:]))
        finally:
            p.terminate()
            p.wait(timeout=30)


HOSTILE = [
    ("dotdot", [(member("ok"), b"x"), (member("../escape"), b"pwned")], "../escape",
     grpc.StatusCode.INVALID_ARGUMENT),
    ("nested-dotdot", [(member("a", tarfile.DIRTYPE, mode=0o755), None),
                       (member("a/../../escape"), b"pwned")], "a/../../escape",
     grpc.StatusCode.INVALID_ARGUMENT),
    ("absolute", [(member("/etc/passwd"), b"root::0:0::/:/bin/sh\n")], "/etc/passwd",
     grpc.StatusCode.INVALID_ARGUMENT),
    ("through-symlink", [(member("l", tarfile.SYMTYPE, linkname="/etc"), None),
                         (member("l/passwd"), b"pwned")], "l/passwd",
     grpc.StatusCode.INVALID_ARGUMENT),
    ("hardlink-escape", [(member("h", tarfile.LNKTYPE, linkname="../../etc/passwd"), None)],
     "\"h\"", grpc.StatusCode.INVALID_ARGUMENT),
    ("hardlink-missing", [(member("h", tarfile.LNKTYPE, linkname="nothere"), None)],
     "\"h\"", grpc.StatusCode.INVALID_ARGUMENT),
    ("chardev", [(member("dev/mem", tarfile.CHRTYPE, devmajor=1, devminor=1), None)], "dev/mem",
     grpc.StatusCode.INVALID_ARGUMENT),
    ("blockdev", [(member("dev/vda", tarfile.BLKTYPE, devmajor=254, devminor=0), None)],
     "dev/vda", grpc.StatusCode.INVALID_ARGUMENT),
    ("root-ssh", [(member("root", tarfile.DIRTYPE, mode=0o700), None),
                  (member("root/.ssh/authorized_keys"), b"ssh-ed25519 AAAA")], "/root/.ssh",
     grpc.StatusCode.FAILED_PRECONDITION),
    ("root-ssh-via-symlink", [(member("home/x/.ssh/authorized_keys"), b"k"),
                              (member("root", tarfile.SYMTYPE, linkname="/home/x"), None)],
     "/root/.ssh", grpc.StatusCode.FAILED_PRECONDITION),
]


@pytest.mark.parametrize("case,members,named,code", HOSTILE, ids=[h[0] for h in HOSTILE])
def test_hostile_tar_refused(warrend, case, members, named, code):
    s = stub(warrend)
    # big enough to span several chunks
    members = [(member("filler"), os.urandom(300 * 1024))] + members
    data = hostile_tar(*members)
    before = entries(warrend, "layers/sha256")
    with pytest.raises(grpc.RpcError) as ei:
        import_bytes(s, "evil-" + case, data)
    assert ei.value.code() == code, ei.value.details()
    assert named in ei.value.details()
    assert entries(warrend, "layers/sha256") == before
    assert entries(warrend, "layers/tmp") == []
    assert entries(warrend, "tmp") == []
    with pytest.raises(grpc.RpcError) as ei:
        s.GetImage(images_pb2.GetImageRequest(image="evil-" + case), timeout=TIMEOUT)
    assert ei.value.code() == grpc.StatusCode.NOT_FOUND
    assert not os.path.exists("/escape")


def test_import_protocol_errors(warrend):
    s = stub(warrend)
    # data before meta
    with pytest.raises(grpc.RpcError) as ei:
        s.ImportImage(iter([images_pb2.ImportImageRequest(data=b"x")]), timeout=TIMEOUT)
    assert ei.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "meta" in ei.value.details()
    # bad name
    with pytest.raises(grpc.RpcError) as ei:
        import_bytes(s, "Bad Name", b"x")
    assert ei.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    # meta only: no data
    with pytest.raises(grpc.RpcError) as ei:
        import_bytes(s, "empty", b"")
    assert ei.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    # not a tar
    with pytest.raises(grpc.RpcError) as ei:
        import_bytes(s, "junk", b"hello world\n" * 1000)
    assert ei.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert entries(warrend, "layers/tmp") == []


def test_import_gzip(warrend, busybox_tar):
    import gzip
    s = stub(warrend)
    raw = open(busybox_tar, "rb").read()
    img = import_bytes(s, "bb-gz", gzip.compress(raw, 1))
    assert list(img.layers) == ["sha256:" + hashlib.sha256(raw).hexdigest()]
    s.DeleteImage(images_pb2.DeleteImageRequest(image="bb-gz"), timeout=TIMEOUT)


def test_cancelled_import_leaves_nothing(warrend, busybox_tar):
    s = stub(warrend)
    data = open(busybox_tar, "rb").read()

    def gen():
        yield images_pb2.ImportImageRequest(meta=images_pb2.ImportImageMeta(name="cancelled"))
        yield images_pb2.ImportImageRequest(data=data[:CHUNK])
        raise RuntimeError("client gives up")  # grpcio cancels the call

    with pytest.raises(grpc.RpcError):
        s.ImportImage(gen(), timeout=TIMEOUT)
    import time
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and entries(warrend, "tmp"):
        time.sleep(0.05)
    assert entries(warrend, "tmp") == []
    assert entries(warrend, "layers/tmp") == []


def test_pull_and_build_bad_requests(warrend):
    # PullImage is implemented (tests/e2e/test_pull.py, against a loopback
    # registry); here only a malformed reference, which needs no network.
    s = stub(warrend)
    with pytest.raises(grpc.RpcError) as ei:
        list(s.PullImage(images_pb2.PullImageRequest(ref="Alpine:3"), timeout=TIMEOUT))
    assert ei.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "must be lowercase" in ei.value.details()
    # BuildImage is implemented (tests/e2e/test_build.py); a request
    # without a build names the field
    with pytest.raises(grpc.RpcError) as ei:
        list(s.BuildImage(images_pb2.BuildImageRequest(), timeout=TIMEOUT))
    assert ei.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert ei.value.details().startswith("build:")
