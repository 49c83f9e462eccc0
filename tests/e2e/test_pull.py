"""Registry pulls through warrend against a REAL registry on loopback
(Debian's docker-registry), with images pushed by skopeo from OCI layouts
built here: a multi-layer image with a whiteout and an opaque directory
(OCI and Docker v2 manifests), an image index with linux/amd64 and
linux/arm64, a bigger image to cancel mid-pull, token auth through a
loopback token server. Nothing leaves 127.0.0.1."""
import json
import os
import re
import stat
import subprocess
import sys
import threading
import time

import grpc
import pytest

from conftest import ROOT, WARREN_CLI
from warren._proto.warren.v1 import images_pb2, images_pb2_grpc

sys.path.insert(0, str(ROOT / "tests" / "registry"))
import registry as R  # noqa: E402

pytestmark = pytest.mark.skipif(not R.available(),
                                reason="docker-registry and skopeo are needed (scripts/deps.sh)")

TIMEOUT = 120
CONFIG = {"Env": ["PATH=/usr/bin:/bin", "GREETING=hello"], "WorkingDir": "/work",
          "Entrypoint": ["/bin/entry"], "Cmd": ["--serve", "8080"], "User": "1000:1000"}


def base_layer():
    return R.layer_tar([
        ("etc", "dir", None),
        ("etc/os-release", "file", b"ID=warren-test\n"),
        ("bin", "dir", None),
        ("bin/entry", "file", b"#!/bin/sh\necho entry\n"),
        ("var", "dir", None),
        ("var/cache", "dir", None),
        ("var/cache/old", "file", b"stale"),
        ("tmp", "dir", None),
        ("tmp/remove-me", "file", b"bye"),
    ])


def top_layer():
    return R.layer_tar([
        ("tmp/remove-me", "whiteout", None),  # deletes a lower file
        ("var/cache", "dir", None),
        ("var/cache", "opaque", None),        # hides the lower contents
        ("var/cache/new", "file", b"fresh"),
        ("etc/motd", "file", b"pulled from a registry\n"),
    ])


def third_layer():
    return R.layer_tar([("work", "dir", None), ("work/data.txt", "file", b"x" * 10000)])


@pytest.fixture(scope="module")
def reg(tmp_path_factory):
    """A registry with the test images pushed; .images describes them."""
    r = R.Registry()
    try:
        lay = str(tmp_path_factory.mktemp("layout"))
        L = R.Layout(lay)
        md, multi = L.image([base_layer(), top_layer(), third_layer()], CONFIG)
        L.tag(md, "multi")
        amd, amd_info = L.image([R.layer_tar([("arch", "file", b"amd64\n")])], {"Cmd": ["amd"]})
        arm, arm_info = L.image([R.layer_tar([("arch", "file", b"arm64\n")])], {"Cmd": ["arm"]},
                                arch="arm64")
        L.tag(L.index([arm, amd]), "plat")
        armonly = L.index([arm])
        L.tag(armonly, "armonly")
        # ~48 MB of random data in 4 uncompressed layers: slow enough to cancel
        big = [R.layer_tar([("blob%d" % i, "file", os.urandom(12 << 20))]) for i in range(4)]
        bmd, big_info = L.image(big, {}, compress=False)
        L.tag(bmd, "big")
        # a victim for the corrupted-blob test (its own layers)
        cmd_, corrupt_info = L.image([R.layer_tar([("c", "file", os.urandom(200000))])], {})
        L.tag(cmd_, "corrupt")

        r.push(lay, "multi", "test/multi:v1")
        r.push(lay, "multi", "test/multi-docker:v1", fmt="v2s2")
        r.push(lay, "plat", "test/plat:v1", all_platforms=True)
        r.push(lay, "armonly", "test/armonly:v1", all_platforms=True)
        r.push(lay, "big", "test/big:v1")
        r.push(lay, "corrupt", "test/corrupt:v1")
        r.images = {"multi": multi, "amd": amd_info, "arm": arm_info, "big": big_info,
                    "corrupt": corrupt_info}
        # skopeo compresses uncompressed layers on push: take the blob digests
        # the registry actually serves
        big_info["blobs"] = [l["digest"] for l in r.manifest("test/big", "v1")["layers"]]
    except BaseException:
        r.stop()  # a setup that failed leaves no registry running
        raise
    yield r
    r.stop()


@pytest.fixture
def daemon(fresh_warrend):
    return fresh_warrend()


def stub(d):
    return images_pb2_grpc.ImagesStub(grpc.insecure_channel(d.unix_addr))


def pull(d, ref, timeout=TIMEOUT):
    """Pull; returns (progress messages, final image)."""
    msgs = list(stub(d).PullImage(images_pb2.PullImageRequest(ref=ref), timeout=timeout))
    assert msgs and msgs[-1].HasField("image"), msgs
    return msgs, msgs[-1].image


def pull_error(d, ref):
    with pytest.raises(grpc.RpcError) as ei:
        list(stub(d).PullImage(images_pb2.PullImageRequest(ref=ref), timeout=TIMEOUT))
    return ei.value


def entries(d, sub):
    p = os.path.join(d.state_dir, sub)
    return sorted(os.listdir(p)) if os.path.isdir(p) else []


def layer_dir(d, diff_id):
    return os.path.join(d.state_dir, "layers", "sha256", diff_id[7:])


def final_states(msgs):
    """The last state seen per layer digest."""
    states = {}
    for m in msgs:
        for l in m.layers:
            states[l.digest] = l.state
    return states


def test_pull_multilayer_image(daemon, reg):
    info = reg.images["multi"]
    ref = "%s/test/multi:v1" % reg.host
    msgs, img = pull(daemon, ref)
    assert list(img.layers) == info["diff_ids"]
    assert list(img.names) == [ref]
    assert img.source == "pull"
    assert list(img.config.env) == CONFIG["Env"]
    assert img.config.working_dir == "/work"
    assert list(img.config.entrypoint) == ["/bin/entry"]
    assert list(img.config.cmd) == ["--serve", "8080"]
    assert img.config.user == "1000:1000"
    # progress: every layer went through downloading/extracting and ended done
    seen = {s for m in msgs for l in m.layers for s in [l.state]}
    assert {"done"} <= seen
    assert set(final_states(msgs).values()) == {"done"}
    assert set(final_states(msgs)) == set(info["blobs"])
    totals = {l.digest: l.total_bytes for m in msgs for l in m.layers}
    assert all(totals[b] > 0 for b in info["blobs"])
    # the layers on disk, sandbox-free
    base, top, third = (layer_dir(daemon, x) for x in info["diff_ids"])
    with open(os.path.join(base, "etc/os-release"), "rb") as f:
        assert f.read() == b"ID=warren-test\n"
    wh = os.lstat(os.path.join(top, "tmp/remove-me"))
    assert stat.S_ISCHR(wh.st_mode) and wh.st_rdev == 0  # overlay whiteout
    assert os.getxattr(os.path.join(top, "var/cache"), "trusted.overlay.opaque") == b"y"
    assert not os.path.exists(os.path.join(top, "var/cache/.wh..wh..opq"))
    with open(os.path.join(top, "var/cache/new"), "rb") as f:
        assert f.read() == b"fresh"
    assert os.path.getsize(os.path.join(third, "work/data.txt")) == 10000
    # the image store answers for it like for an import
    got = stub(daemon).GetImage(images_pb2.GetImageRequest(image=ref), timeout=TIMEOUT)
    assert got.id == img.id and list(got.layers) == info["diff_ids"]
    assert entries(daemon, "layers/tmp") == [] and entries(daemon, "tmp") == []


def test_second_pull_is_cached(daemon, reg):
    ref = "%s/test/multi:v1" % reg.host
    _, first = pull(daemon, ref)
    mtimes = [os.stat(layer_dir(daemon, x)).st_mtime_ns for x in first.layers]
    msgs, second = pull(daemon, ref)
    assert second.id == first.id
    assert set(final_states(msgs).values()) == {"cached"}
    assert [os.stat(layer_dir(daemon, x)).st_mtime_ns for x in first.layers] == mtimes
    # the registry client's libuv handles are closed before the loop ends
    assert "open handles" not in daemon.stop()


def test_docker_v2_manifest_same_layers(daemon, reg):
    msgs, img = pull(daemon, "%s/test/multi-docker:v1" % reg.host)
    assert list(img.layers) == reg.images["multi"]["diff_ids"]
    assert list(img.config.cmd) == ["--serve", "8080"]


def test_index_resolves_linux_amd64(daemon, reg):
    _, img = pull(daemon, "%s/test/plat:v1" % reg.host)
    assert list(img.layers) == reg.images["amd"]["diff_ids"]
    assert list(img.config.cmd) == ["amd"]
    with open(os.path.join(layer_dir(daemon, img.layers[0]), "arch"), "rb") as f:
        assert f.read() == b"amd64\n"


def test_index_without_amd64_is_not_found(daemon, reg):
    err = pull_error(daemon, "%s/test/armonly:v1" % reg.host)
    assert err.code() == grpc.StatusCode.NOT_FOUND
    assert "no linux/amd64 variant" in err.details() and "linux/arm64" in err.details()


def test_pull_by_digest(daemon, reg):
    info = reg.images["multi"]
    _, img = pull(daemon, "%s/test/multi@%s" % (reg.host, info["manifest"]))
    assert list(img.layers) == info["diff_ids"]
    assert list(img.names) == []  # digest-only references store no name
    _, img2 = pull(daemon, "%s/test/multi:v1@%s" % (reg.host, info["manifest"]))
    assert img2.id == img.id and list(img2.names) == ["%s/test/multi:v1" % reg.host]


def test_digest_reference_mismatch_is_data_loss(daemon, reg):
    wrong = "sha256:" + "ab" * 32
    err = pull_error(daemon, "%s/test/multi@%s" % (reg.host, wrong))
    # the registry does not know that manifest
    assert err.code() == grpc.StatusCode.NOT_FOUND


def test_unknown_image_not_found(daemon, reg):
    err = pull_error(daemon, "%s/test/nope:v1" % reg.host)
    assert err.code() == grpc.StatusCode.NOT_FOUND
    assert "not found in registry" in err.details()
    assert "test/nope:v1" in err.details()
    err = pull_error(daemon, "%s/test/multi:no-such-tag" % reg.host)
    assert err.code() == grpc.StatusCode.NOT_FOUND
    assert stub(daemon).ListImages(images_pb2.ListImagesRequest(), timeout=TIMEOUT).images == []


def test_bad_reference_invalid_argument(daemon):
    for ref in ["Ubuntu", "a//b", "repo:", "repo@sha256:123", "-x", "a:b:c"]:
        err = pull_error(daemon, ref)
        assert err.code() == grpc.StatusCode.INVALID_ARGUMENT, ref
        assert "invalid reference" in err.details(), ref


def test_registry_unreachable(daemon):
    port = R.free_port()  # nothing listens there
    err = pull_error(daemon, "127.0.0.1:%d/x/y:1" % port)
    assert err.code() == grpc.StatusCode.UNAVAILABLE
    assert "127.0.0.1:%d" % port in err.details()
    assert "unreachable" in err.details() and "mirror" in err.details()


def test_corrupted_blob_is_data_loss_and_stores_nothing(daemon, reg):
    info = reg.images["corrupt"]
    path = reg.blob_path(info["blobs"][0])
    with open(path, "r+b") as f:
        data = bytearray(f.read())
        data[len(data) // 2] ^= 0xFF
        f.seek(0)
        f.write(data)
    err = pull_error(daemon, "%s/test/corrupt:v1" % reg.host)
    assert err.code() == grpc.StatusCode.DATA_LOSS
    assert "digest mismatch" in err.details() and info["blobs"][0] in err.details()
    assert stub(daemon).ListImages(images_pb2.ListImagesRequest(), timeout=TIMEOUT).images == []
    assert entries(daemon, "layers/sha256") == []
    assert entries(daemon, "layers/tmp") == [] and entries(daemon, "tmp") == []


def wait_empty(d, sub, timeout=10):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if entries(d, sub) == []:
            return True
        time.sleep(0.05)
    return False


def test_cancel_mid_pull_then_pull_again(daemon, reg):
    ref = "%s/test/big:v1" % reg.host
    call = stub(daemon).PullImage(images_pb2.PullImageRequest(ref=ref), timeout=TIMEOUT)
    states = set()
    for m in call:
        states |= {l.state for l in m.layers}
        if any(l.state in ("downloading", "extracting") and l.done_bytes > 0 for l in m.layers):
            call.cancel()
            break
    else:
        pytest.fail("the pull finished before it could be cancelled")
    assert wait_empty(daemon, "layers/tmp"), (entries(daemon, "layers/tmp"), daemon.read_log())
    assert stub(daemon).ListImages(images_pb2.ListImagesRequest(), timeout=TIMEOUT).images == []
    assert "stopping the pull" in daemon.read_log()
    msgs, img = pull(daemon, ref)
    assert list(img.layers) == reg.images["big"]["diff_ids"]
    for x in img.layers:
        assert os.path.getsize(os.path.join(layer_dir(daemon, x), os.listdir(layer_dir(daemon, x))[0])) == 12 << 20
    assert entries(daemon, "layers/tmp") == [] and entries(daemon, "tmp") == []


def blob_gets(reg, digest):
    return len(re.findall(r'"GET /v2/test/big/blobs/%s ' % re.escape(digest), reg.read_log()))


def test_concurrent_pulls_share_one_download(daemon, reg):
    ref = "%s/test/big:v1" % reg.host
    before = [blob_gets(reg, b) for b in reg.images["big"]["blobs"]]
    results = [None, None]

    def run(i):
        results[i] = pull(daemon, ref)

    ts = [threading.Thread(target=run, args=(i,)) for i in range(2)]
    for t in ts:
        t.start()
    for t in ts:
        t.join(TIMEOUT)
    assert results[0] and results[1]
    assert results[0][1].id == results[1][1].id
    # both waited for the download (neither found the layers cached)...
    for msgs, _ in results:
        assert set(final_states(msgs).values()) == {"done"}
    after = [blob_gets(reg, b) for b in reg.images["big"]["blobs"]]
    # each layer blob fetched once by the two pulls together
    assert [a - b for a, b in zip(after, before)] == [1, 1, 1, 1], (before, after)


def test_mirror_from_registry_config(fresh_warrend, reg, tmp_path):
    cfg = tmp_path / "registries.json"
    cfg.write_text(json.dumps({"registries": {
        "mirror-only.invalid": {"mirrors": ["http://%s" % reg.host]}}}))
    d = fresh_warrend(extra_args=["--registry-config", str(cfg)])
    _, img = pull(d, "mirror-only.invalid/test/multi:v1")
    assert list(img.layers) == reg.images["multi"]["diff_ids"]
    assert list(img.names) == ["mirror-only.invalid/test/multi:v1"]


def test_bad_registry_config_fails_start(tmp_path):
    from conftest import Daemon
    cfg = tmp_path / "bad.json"
    cfg.write_text('{"registries": {"x": {"mirrors": ["ftp://nope"]}}}')
    with pytest.raises(RuntimeError) as ei:
        Daemon(extra_args=["--registry-config", str(cfg)])
    assert "want an http:// or https:// URL" in str(ei.value)


def test_cli_pull_plain_lines(daemon, reg):
    ref = "%s/test/multi:v1" % reg.host
    r = subprocess.run([WARREN_CLI, "--addr", daemon.unix_addr, "image", "pull", ref],
                       capture_output=True, text=True, timeout=TIMEOUT)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip().startswith("sha256:")
    for b in reg.images["multi"]["blobs"]:
        assert re.search(r"%s: done" % re.escape(b[7:19]), r.stderr), r.stderr
    r = subprocess.run([WARREN_CLI, "--addr", daemon.unix_addr, "image", "pull",
                        "%s/test/nope:v1" % reg.host], capture_output=True, text=True,
                       timeout=TIMEOUT)
    assert r.returncode != 0 and "not found in registry" in r.stderr


# --- token auth: the real registry verifying JWTs from a loopback token server ---

@pytest.fixture(scope="module")
def token_reg(tmp_path_factory):
    tmp = str(tmp_path_factory.mktemp("token"))
    ts = R.TokenServer(tmp, users={"alice": "s3cret", "pusher": "push"})
    r = R.Registry(token=ts)
    lay = os.path.join(tmp, "layout")
    L = R.Layout(lay)
    md, info = L.image([base_layer()], {"Cmd": ["tok"]})
    L.tag(md, "t")
    r.push(lay, "t", "private/app:1", creds="pusher:push")
    r.token, r.info = ts, info
    yield r
    r.stop()
    ts.stop()


def docker_config(tmp_path, host, user, pw):
    import base64
    p = tmp_path / "config.json"
    p.write_text(json.dumps({"auths": {host: {
        "auth": base64.b64encode(("%s:%s" % (user, pw)).encode()).decode()}}}))
    return str(p)


def test_token_auth_with_credentials(fresh_warrend, token_reg, tmp_path):
    cfg = docker_config(tmp_path, token_reg.host, "alice", "s3cret")
    d = fresh_warrend(extra_args=["--docker-config", cfg])
    n = len(token_reg.token.requests)
    _, img = pull(d, "%s/private/app:1" % token_reg.host)
    assert list(img.layers) == token_reg.info["diff_ids"]
    reqs = token_reg.token.requests[n:]
    assert reqs and all(q["user"] == "alice" for q in reqs)
    assert reqs[0]["query"]["service"] == ["warren-test-registry"]
    assert reqs[0]["query"]["scope"] == ["repository:private/app:pull"]
    # tokens are cached: one token request for manifest, config and layer
    assert len(reqs) == 1


def test_token_auth_without_credentials_unauthenticated(daemon, token_reg):
    err = pull_error(daemon, "%s/private/app:1" % token_reg.host)
    assert err.code() == grpc.StatusCode.UNAUTHENTICATED
    assert "--docker-config" in err.details()


def test_token_auth_wrong_password(fresh_warrend, token_reg, tmp_path):
    cfg = docker_config(tmp_path, token_reg.host, "alice", "wrong")
    d = fresh_warrend(extra_args=["--docker-config", cfg])
    err = pull_error(d, "%s/private/app:1" % token_reg.host)
    assert err.code() == grpc.StatusCode.UNAUTHENTICATED
    assert "check the credentials" in err.details()


# --- behaviour the real registry cannot be made to show: a scripted one ---

@pytest.fixture(scope="module")
def layout(tmp_path_factory):
    lay = str(tmp_path_factory.mktemp("fake-layout"))
    L = R.Layout(lay)
    md, info = L.image([base_layer(), R.layer_tar([("big", "file", os.urandom(3 << 20))])],
                       {"Cmd": ["fake"]})
    L.tag(md, "v1")
    amd, amd_info = L.image([R.layer_tar([("arch", "file", b"amd64\n")])], {})
    arm, _ = L.image([R.layer_tar([("arch", "file", b"arm64\n")])], {}, arch="arm64")
    L.tag(L.index([arm, amd]), "multi")
    return lay, info, amd_info


def test_interrupted_blob_resumes_with_range(daemon, layout):
    lay, info, _ = layout
    fake = R.FakeRegistry(lay, "r/app", cut_blobs=True)
    try:
        _, img = pull(daemon, "%s/r/app:v1" % fake.host)
        assert list(img.layers) == info["diff_ids"]
        blob = info["blobs"][1]
        gets = [h for m, p, h in fake.requests if p.endswith(blob)]
        assert len(gets) == 2, gets
        assert "Range" not in gets[0] and gets[1]["Range"].startswith("bytes=")
        assert int(gets[1]["Range"][6:].rstrip("-")) > 0
    finally:
        fake.stop()


def test_basic_auth_with_docker_config(fresh_warrend, layout, tmp_path):
    lay, info, _ = layout
    fake = R.FakeRegistry(lay, "r/app", basic=("bob", "pw"))
    try:
        d = fresh_warrend(extra_args=["--docker-config",
                                      docker_config(tmp_path, fake.host, "bob", "pw")])
        _, img = pull(d, "%s/r/app:v1" % fake.host)
        assert list(img.layers) == info["diff_ids"]
        err = pull_error(fresh_warrend(), "%s/r/app:v1" % fake.host)
        assert err.code() == grpc.StatusCode.UNAUTHENTICATED
        assert "user name and password" in err.details() and "--docker-config" in err.details()
    finally:
        fake.stop()


def test_docker_manifest_list_resolves_amd64(daemon, layout):
    lay, _, amd_info = layout
    fake = R.FakeRegistry(lay, "r/app",
                          manifest_type="application/vnd.docker.distribution.manifest.list.v2+json")
    try:
        _, img = pull(daemon, "%s/r/app:multi" % fake.host)
        assert list(img.layers) == amd_info["diff_ids"]
    finally:
        fake.stop()


def test_blob_larger_than_manifest_says(daemon, layout):
    lay, info, _ = layout
    fake = R.FakeRegistry(lay, "r/app", pad_blobs=1 << 20)
    try:
        err = pull_error(daemon, "%s/r/app:v1" % fake.host)
        assert err.code() == grpc.StatusCode.DATA_LOSS
        assert "larger than the" in err.details() and "manifest lists" in err.details()
        assert stub(daemon).ListImages(images_pb2.ListImagesRequest(), timeout=TIMEOUT).images == []
        assert entries(daemon, "layers/sha256") == [] and entries(daemon, "layers/tmp") == []
    finally:
        fake.stop()


def test_kill9_mid_pull_then_pull_completes(reg):
    """warrend killed (-9) in the middle of a pull: the next warrend on the
    same state dir has no partial layer, and pulling again completes."""
    from test_lifecycle import Restartable
    d = Restartable()
    d.start(terminate_on_exit=True)
    try:
        ref = "%s/test/big:v1" % reg.host
        call = stub(d).PullImage(images_pb2.PullImageRequest(ref=ref), timeout=TIMEOUT)
        for m in call:
            if any(l.state in ("downloading", "extracting") and l.done_bytes > 0
                   for l in m.layers):
                d.kill9()
                break
        else:
            pytest.fail("the pull finished before warrend could be killed")
        with pytest.raises(grpc.RpcError):
            for _ in call:
                pass
        d.start(terminate_on_exit=True)
        assert entries(d, "layers/tmp") == [] and entries(d, "tmp") == []
        assert stub(d).ListImages(images_pb2.ListImagesRequest(), timeout=TIMEOUT).images == []
        msgs, img = pull(d, ref)
        assert list(img.layers) == reg.images["big"]["diff_ids"]
        assert entries(d, "layers/tmp") == [] and entries(d, "tmp") == []
        assert sorted(entries(d, "layers/sha256")) == sorted(x[7:] for x in img.layers)
    finally:
        d.destroy()
