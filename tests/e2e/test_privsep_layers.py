"""Privilege separation, phase 5, layers (docs/privsep.md "Phase 5, layers,
as built"): a warrend dropped to its user (--privsep --user warren) stores
image layers. warren-unpack (started by warren-priv) writes each layer
with the tar's owners, so the tree is root's; warren-priv moves it from
layers/tmp into layers/sha256 (LAYER_COMMIT) and removes failed, duplicate
and deleted layers (LAYER_REMOVE). Here: an image imported and one pulled
from a registry on loopback by the dropped warrend, a sandbox made of
each, the layers' files with their tar owners (root's, 1000:2000, a 0700
/root) and not the warren user's, hostile and /root/.ssh imports refused
with nothing left behind, and `warren image rm` / prune removing the
layer dirs, leftovers of an interrupted start collected; every move and
removal counted by warren-priv."""
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile

import grpc
import pytest

import warren as wr
from conftest import ROOT, WARREN_CLI
from test_images import HOSTILE, hostile_tar, import_bytes, member
from test_privsep import metrics
from test_privsep_drop import USER, assert_dropped, user  # noqa: F401 (fixture)
from warren._proto.warren.v1 import images_pb2, images_pb2_grpc

sys.path.insert(0, str(ROOT / "tests" / "registry"))
import registry as R  # noqa: E402

LAYER_COMMIT, LAYER_REMOVE = "LAYER_COMMIT", "LAYER_REMOVE"
TIMEOUT = 120


def priv_served(d, name):
    """warren-priv's count of requests of type name (its own, in metrics)."""
    return int(metrics(d.admin_port).get('warren_priv_requests_total{type="%s"}' % name, 0))


@pytest.fixture(scope="module")
def dropped(user):  # noqa: F811
    from conftest import free_port
    from test_lifecycle import Restartable

    d = Restartable()
    os.chmod(d.tmp, 0o711)
    d.admin_port = free_port()
    try:
        d.start(extra=["--privsep", "--user", USER, "--admin-listen",
                       "127.0.0.1:%d" % d.admin_port], terminate_on_exit=True)
        assert_dropped(d.proc.pid, user)
        yield d
    finally:
        d.destroy()


def stub(d):
    return images_pb2_grpc.ImagesStub(grpc.insecure_channel(d.unix_addr))


def layers(d, sub="sha256"):
    return sorted(os.listdir(os.path.join(d.state_dir, "layers", sub)))


def owner(path):
    st = os.lstat(path)
    return st.st_uid, st.st_gid


def rootfs_tar(tmp, extra=None):
    """The busybox test rootfs with files of other owners, as a tar that
    keeps them (--numeric-owner): /home/u 1000:1000, /home/u/f 1000:2000,
    /root 0700 root's."""
    rootfs = os.path.join(tmp, "rootfs")
    subprocess.run(["bash", str(ROOT / "tests/images/busybox-rootfs.sh"), rootfs], check=True,
                   capture_output=True)
    os.chmod(rootfs, 0o755)
    os.makedirs(os.path.join(rootfs, "home/u"), exist_ok=True)
    with open(os.path.join(rootfs, "home/u/f"), "w") as f:
        f.write("owned\n")
    os.chown(os.path.join(rootfs, "home/u"), 1000, 1000)
    os.chown(os.path.join(rootfs, "home/u/f"), 1000, 2000)
    os.makedirs(os.path.join(rootfs, "root"), exist_ok=True)
    os.chmod(os.path.join(rootfs, "root"), 0o700)
    for path, data in (extra or {}).items():
        p = os.path.join(rootfs, path)
        os.makedirs(os.path.dirname(p), exist_ok=True)
        with open(p, "w") as f:
            f.write(data)
    tar = os.path.join(tmp, "rootfs.tar")
    subprocess.run(["tar", "--numeric-owner", "-C", rootfs, "-cf", tar, "."], check=True)
    return tar


def cli(d, *args, check=True):
    return subprocess.run([WARREN_CLI, "--addr", d.unix_addr, *args], capture_output=True,
                          text=True, timeout=TIMEOUT, check=check)


def test_import_sandbox_owners_and_rm(dropped, user):  # noqa: F811
    d = dropped
    commits, removes = priv_served(d, LAYER_COMMIT), priv_served(d, LAYER_REMOVE)
    tmp = tempfile.mkdtemp(prefix="warren-layers-")
    try:
        tar = rootfs_tar(tmp)
        cli(d, "image", "import", "owned:v1", tar)
        with open(tar, "rb") as f:
            data = f.read()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    img = stub(d).GetImage(images_pb2.GetImageRequest(image="owned:v1"), timeout=TIMEOUT)
    (diff,) = img.layers
    top = os.path.join(d.state_dir, "layers", "sha256", diff[7:])
    # the tree keeps the tar's owners: not the warren user's
    assert owner(top) == (0, 0)
    assert owner(os.path.join(top, "bin/busybox")) == (0, 0)
    assert owner(os.path.join(top, "home/u")) == (1000, 1000)
    assert owner(os.path.join(top, "home/u/f")) == (1000, 2000)
    assert owner(os.path.join(top, "root")) == (0, 0)
    assert os.lstat(os.path.join(top, "root")).st_mode & 0o777 == 0o700
    # the store's levels are the user's; nothing left in staging
    assert owner(os.path.join(d.state_dir, "layers", "sha256"))[0] == user.pw_uid
    assert layers(d, "tmp") == []
    assert priv_served(d, LAYER_COMMIT) == commits + 1

    # a sandbox of it: the layer's owners as the sandbox sees them
    with wr.SandboxClient(d.unix_addr) as c:
        sb = c.create(image="owned:v1", entrypoint=["sleep", "infinity"])
        try:
            r = sb.exec("/bin/sh", "-c", "stat -c '%u:%g' /home/u/f /home/u /root /bin/busybox; "
                                         "cat /home/u/f; stat -c '%a' /root")
            assert r.exit_code == 0, r.stderr_text
            assert r.stdout_text.split() == ["1000:2000", "1000:1000", "0:0", "0:0", "owned",
                                             "700"]
        finally:
            sb.terminate()
    # the same layer imported again: there already, the copy removed
    assert import_bytes(stub(d), "owned:v2", data).id == img.id
    assert layers(d, "tmp") == []
    assert priv_served(d, LAYER_COMMIT) == commits + 2
    assert priv_served(d, LAYER_REMOVE) == removes + 1
    # rm: the first name only unnames; the last one removes the layer
    cli(d, "image", "rm", "owned:v1")
    assert os.path.isdir(top)
    cli(d, "image", "rm", "owned:v2")
    assert not os.path.exists(top)
    assert layers(d, "tmp") == []
    assert priv_served(d, LAYER_REMOVE) == removes + 2


def test_refused_imports_leave_nothing(dropped):
    """The import tests' hostile tars, dropped: refused with the same codes,
    no layer dir and no staging tree left (the partial trees are root's:
    removed by warren-priv)."""
    d = dropped
    before = layers(d)
    s = stub(d)
    for case, members, named, code in HOSTILE:
        data = hostile_tar(*([(member("filler"), os.urandom(300 * 1024))] + members))
        with pytest.raises(grpc.RpcError) as ei:
            import_bytes(s, "evil-" + case, data)
        assert ei.value.code() == code, (case, ei.value.details())
        assert named in ei.value.details(), (case, ei.value.details())
        assert layers(d) == before, case
        assert layers(d, "tmp") == [], case


def test_prune_removes_layers(dropped):
    d = dropped
    data = hostile_tar((member("etc", tarfile.DIRTYPE, mode=0o700), None),
                       (member("etc/secret", uid=1000, gid=1000), b"p" * 1000))
    img = import_bytes(stub(d), "", data)  # unnamed: prune's
    top = os.path.join(d.state_dir, "layers", "sha256", img.layers[0][7:])
    assert owner(os.path.join(top, "etc/secret")) == (1000, 1000)
    cli(d, "image", "prune")
    assert not os.path.exists(top)
    assert layers(d, "tmp") == []


def test_store_gc_at_start_removes_root_owned_leftovers(dropped):
    """Leftovers of interrupted work (a staging tree of the tar's owners,
    a layer dir no row knows) are removed at the next start, dropped."""
    d = dropped
    stage = os.path.join(d.state_dir, "layers", "tmp", "unpack-00000000deadbeef")
    orphan = os.path.join(d.state_dir, "layers", "sha256", "ab" * 32)
    for p in (stage, orphan):
        os.makedirs(os.path.join(p, "etc/deep"))
        os.chmod(os.path.join(p, "etc"), 0o700)  # root's: the user cannot enter
    assert d.stop() in (0, -15)
    d.start(extra=["--privsep", "--user", USER, "--admin-listen",
                   "127.0.0.1:%d" % d.admin_port], terminate_on_exit=True)
    assert not os.path.exists(stage) and not os.path.exists(orphan)


FETCH_BY_PRIV = "PRIV_HELPER_FETCH" in (ROOT / "src/priv/priv-proto.h").read_text()


@pytest.mark.skipif(not R.available(), reason="docker-registry and skopeo are needed")
@pytest.mark.skipif(not FETCH_BY_PRIV, reason="a dropped warrend starts warren-fetch through "
                    "warren-priv (HELPER_START kind FETCH) only once that is built")
def test_pull_sandbox_and_prune(dropped, tmp_path):
    d = dropped
    reg = R.Registry()
    try:
        L = R.Layout(str(tmp_path / "layout"))
        md, info = L.image([R.layer_tar([("etc", "dir", None),
                                         ("etc/pulled", "file", b"from a registry\n")]),
                            R.layer_tar([("srv", "dir", None),
                                         ("srv/data", "file", b"y" * 5000)])],
                           {"Cmd": ["/bin/sh"]})
        L.tag(md, "small")
        reg.push(str(tmp_path / "layout"), "small", "test/small:v1")
        ref = "%s/test/small:v1" % reg.host
        msgs = list(stub(d).PullImage(images_pb2.PullImageRequest(ref=ref), timeout=TIMEOUT))
        img = msgs[-1].image
        assert list(img.layers) == info["diff_ids"]
        dirs = [os.path.join(d.state_dir, "layers", "sha256", x[7:]) for x in img.layers]
        assert owner(os.path.join(dirs[0], "etc/pulled")) == (0, 0)
        assert owner(os.path.join(dirs[1], "srv/data")) == (0, 0)
        assert layers(d, "tmp") == []
        cli(d, "image", "rm", ref)
        assert not any(os.path.exists(x) for x in dirs)
    finally:
        reg.stop()
