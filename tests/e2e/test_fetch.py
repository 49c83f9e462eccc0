"""warren-fetch, the confined registry client (docs/images.md "Where a pull
runs"): its confinement seen from /proc while it is in the middle of a
download, what it cannot do once confined, kill -9 of it mid-pull, and
registries that answer with hostile bytes. A scripted registry on
127.0.0.1 (http.server) plays every part; nothing leaves loopback."""
import hashlib
import http.server
import io
import json
import os
import signal
import socket
import subprocess
import sys
import tarfile
import threading
import time

import grpc
import pytest

from conftest import BUILD
from warren._proto.warren.v1 import images_pb2, images_pb2_grpc

TIMEOUT = 60
FETCH = str(BUILD / "src/image/warren-fetch")
MT_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
MT_CONFIG = "application/vnd.oci.image.config.v1+json"
MT_LAYER = "application/vnd.oci.image.layer.v1.tar"


def sha(data):
    return "sha256:" + hashlib.sha256(data).hexdigest()


def layer(files):
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as t:
        for name, data in files:
            ti = tarfile.TarInfo(name)
            ti.size = len(data)
            ti.mode = 0o644
            t.addfile(ti, io.BytesIO(data))
    return buf.getvalue()


class Image:
    def __init__(self, layers, served_layers=None):
        self.layers = layers
        self.config = json.dumps({
            "architecture": "amd64", "os": "linux",
            "config": {"Cmd": ["hostile"], "Env": ["A=b"]},
            "rootfs": {"type": "layers", "diff_ids": [sha(l) for l in layers]},
        }).encode()
        self.manifest = json.dumps({
            "schemaVersion": 2, "mediaType": MT_MANIFEST,
            "config": {"mediaType": MT_CONFIG, "digest": sha(self.config),
                       "size": len(self.config)},
            "layers": [{"mediaType": MT_LAYER, "digest": sha(l), "size": len(l)}
                       for l in layers],
        }).encode()
        # what the registry sends for each blob digest (default: the truth)
        self.blobs = {sha(self.config): self.config}
        for i, l in enumerate(layers):
            self.blobs[sha(l)] = served_layers[i] if served_layers else l


class Hostile:
    """/v2/<repo>/manifests/<tag> and /blobs/<digest> per repo:
    repos[repo] = (manifest bytes, {digest: blob bytes}). stall: a blob
    digest whose body stops half-way until .release is set."""

    def __init__(self):
        self.repos, self.stall, self.release = {}, set(), threading.Event()
        self.stalled = threading.Event()
        server = self

        class H(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a):
                pass

            def do_GET(self):
                parts = self.path.split("/")
                if self.path == "/v2/":
                    return self.reply(200, b"{}", "application/json")
                # /v2/<a>/<b>/<kind>/<obj>
                if len(parts) != 6:
                    return self.reply(404, b"{}", "application/json")
                repo, kind, obj = parts[2] + "/" + parts[3], parts[4], parts[5]
                if repo not in server.repos:
                    return self.reply(404, b"{}", "application/json")
                manifest, blobs = server.repos[repo]
                if kind == "manifests":
                    return self.reply(200, manifest, MT_MANIFEST)
                data = blobs.get(obj)
                if data is None:
                    return self.reply(404, b"{}", "application/json")
                if obj in server.stall:
                    self.send_response(200)
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data[:len(data) // 2])
                    self.wfile.flush()
                    server.stalled.set()
                    server.release.wait(TIMEOUT)
                    self.close_connection = True
                    return
                return self.reply(200, data, "application/octet-stream")

            def reply(self, code, data, mt):
                self.send_response(code)
                self.send_header("Content-Type", mt)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
        self.httpd.daemon_threads = True
        self.host = "127.0.0.1:%d" % self.httpd.server_address[1]
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def add(self, repo, image, manifest=None):
        self.repos[repo] = (image.manifest if manifest is None else manifest, image.blobs)
        return "%s/%s:v1" % (self.host, repo)

    def stop(self):
        self.release.set()
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def hostile():
    h = Hostile()
    yield h
    h.stop()


@pytest.fixture
def daemon(fresh_warrend):
    return fresh_warrend()


def stub(d):
    return images_pb2_grpc.ImagesStub(grpc.insecure_channel(d.unix_addr))


def pull(d, ref):
    msgs = list(stub(d).PullImage(images_pb2.PullImageRequest(ref=ref), timeout=TIMEOUT))
    assert msgs and msgs[-1].HasField("image"), msgs
    return msgs[-1].image


def pull_error(d, ref):
    with pytest.raises(grpc.RpcError) as ei:
        list(stub(d).PullImage(images_pb2.PullImageRequest(ref=ref), timeout=TIMEOUT))
    return ei.value


def entries(d, rel):
    p = os.path.join(d.state_dir, rel)
    return sorted(os.listdir(p)) if os.path.isdir(p) else []


def assert_nothing_stored(d):
    assert stub(d).ListImages(images_pb2.ListImagesRequest(), timeout=TIMEOUT).images == []
    assert entries(d, "layers/sha256") == []
    assert entries(d, "layers/tmp") == [] and entries(d, "tmp") == []


def children(pid, comm):
    out = []
    for p in os.listdir("/proc"):
        if not p.isdigit():
            continue
        try:
            with open("/proc/%s/status" % p) as f:
                st = f.read()
        except OSError:
            continue
        fields = dict(l.split(":", 1) for l in st.splitlines() if ":" in l)
        if fields["PPid"].strip() == str(pid) and fields["Name"].strip() == comm:
            out.append(int(p))
    return out


def fetch_parent(d):
    """Who starts warren-fetch: with --privsep warren-priv (warrend's child,
    HELPER_START FETCH), else warrend itself."""
    privs = children(d.proc.pid, "warren-priv")
    return privs[0] if privs else d.proc.pid


def fetchers(d):
    """The running warren-fetch helpers of d."""
    return children(fetch_parent(d), "warren-fetch")


def stalled_pull(d, hostile):
    """Start a pull whose only layer stalls half-way; returns (call, the
    warren-fetch pid) once the helper is mid-download."""
    img = Image([layer([("f", os.urandom(400000))])])
    hostile.stall.add(sha(img.layers[0]))
    ref = hostile.add("stall/img", img)
    call = stub(d).PullImage(images_pb2.PullImageRequest(ref=ref), timeout=TIMEOUT)
    msgs = []
    threading.Thread(target=lambda: msgs.extend(_drain(call)), daemon=True).start()
    assert hostile.stalled.wait(20), d.read_log()
    # the pull's helper holds the blob file; a spare waits for the next pull
    pids = [p for p in fetchers(d) if blob_fds(d, p)]
    assert len(pids) == 1, (pids, fetchers(d))
    return call, pids[0], img, ref, msgs


def blob_fds(d, pid):
    """The fds of pid open on files in d's state_dir/tmp."""
    out = []
    for fd in os.listdir("/proc/%d/fd" % pid):
        try:
            target = os.readlink("/proc/%d/fd/%s" % (pid, fd))
        except OSError:
            continue
        if target.startswith(os.path.join(d.state_dir, "tmp") + "/"):
            out.append(target)
    return out


def _drain(call):
    try:
        for m in call:
            yield m
    except grpc.RpcError as e:
        yield e


# --- confinement -----------------------------------------------------------

def test_spare_helper_confined_and_replaced(daemon, hostile):
    """After a pull, a spare helper waits for the next one: confined already
    (it has read its config and holds no blob); killing it costs nothing."""
    img = Image([layer([("a", b"spare")])])
    ref = hostile.add("spare/img", img)
    pull(daemon, ref)
    # the pull's own helper is killed when the pull ends; the spare stays
    deadline = time.monotonic() + 10
    while len(fetchers(daemon)) != 1:
        assert time.monotonic() < deadline, fetchers(daemon)
        time.sleep(0.05)
    spares = fetchers(daemon)
    with open("/proc/%d/status" % spares[0]) as f:
        st = f.read()
    assert "Seccomp:\t2" in st and "CapEff:\t0000000000000000" in st and "\nUid:\t0" not in st
    assert blob_fds(daemon, spares[0]) == []
    os.kill(spares[0], signal.SIGKILL)
    # its death is logged, not silent
    deadline = time.monotonic() + 10
    while "the spare registry helper died" not in daemon.read_log():
        assert time.monotonic() < deadline, daemon.read_log()[-2000:]
        time.sleep(0.05)
    img2 = Image([layer([("b", b"after the spare died")])])
    image = pull(daemon, hostile.add("spare/img2", img2))
    assert list(image.layers) == [sha(img2.layers[0])]


def test_helper_confined_mid_pull(daemon, hostile):
    call, pid, _, _, _ = stalled_pull(daemon, hostile)
    with open("/proc/%d/status" % pid) as f:
        status = f.read()
    fields = dict(l.split(":", 1) for l in status.splitlines() if ":" in l)
    uids = [int(x) for x in fields["Uid"].split()]
    assert uids[0] != 0 and len(set(uids)) == 1, uids
    assert all(int(x) != 0 for x in fields["Gid"].split())
    assert int(fields["CapEff"].strip(), 16) == 0
    assert int(fields["CapPrm"].strip(), 16) == 0
    assert int(fields["CapBnd"].strip(), 16) == 0
    assert fields["NoNewPrivs"].strip() == "1"
    assert fields["Seccomp"].strip() == "2"
    # every thread (libcurl's resolver) too
    for tid in os.listdir("/proc/%d/task" % pid):
        with open("/proc/%d/task/%s/status" % (pid, tid)) as f:
            st = f.read()
        assert "Seccomp:\t2" in st and "CapEff:\t0000000000000000" in st
    # its root: a root-owned tree it cannot write to, holding only etc/
    root = os.readlink("/proc/%d/root" % pid)
    assert root == os.path.join(daemon.state_dir, "fetch-root")
    st = os.stat(root)
    assert st.st_uid == 0 and not st.st_mode & 0o022
    assert sorted(os.listdir(root)) == ["etc"]
    assert sorted(os.listdir(os.path.join(root, "etc"))) == ["hosts", "nsswitch.conf",
                                                             "resolv.conf"]
    # the only writable files it holds are the blob files warrend gave it:
    # anonymous (O_TMPFILE) files in the state dir's tmp/ (and stderr:
    # warrend's log)
    for fd in os.listdir("/proc/%d/fd" % pid):
        if int(fd) <= 2:
            continue
        try:
            target = os.readlink("/proc/%d/fd/%s" % (pid, fd))
            flags = int(open("/proc/%d/fdinfo/%s" % (pid, fd)).read().split("flags:")[1]
                        .split()[0], 8)
        except OSError:
            continue
        if flags & 0o3 and target.startswith("/"):
            assert target.startswith(os.path.join(daemon.state_dir, "tmp") + "/"), target
            assert "(deleted)" in target or "#" in target, target
    call.cancel()


def test_helper_cannot_write_exec_or_regain_root(tmp_path):
    """--confine-check: confine exactly as for a pull, then try what a
    compromised parser would; report each attempt's errno."""
    a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    target = tmp_path / "outside"
    # the root warrend would prepare: root-owned, read-only to the helper
    root = tmp_path / "root"
    (root / "etc").mkdir(parents=True)
    for d in (root, root / "etc"):
        d.chmod(0o755)
    (root / "etc" / "hosts").write_text("127.0.0.1 localhost\n")
    p = subprocess.run([FETCH, "--sock-fd", str(b.fileno()), "--ref", "127.0.0.1:1/x/y:z",
                        "--root", str(root), "--confine-check", str(target)],
                       pass_fds=[b.fileno()], capture_output=True, text=True, timeout=30)
    a.close()
    b.close()
    assert p.returncode == 0, p.stderr
    res = json.loads(p.stdout)
    assert res["uid"] != 0 and res["euid"] != 0
    for attempt in ("create_outside", "create_in_root", "write_etc_hosts", "mkdir", "exec",
                    "setuid0", "ptrace", "mount"):
        assert res[attempt] != 0, (attempt, res)
    assert not target.exists()
    assert sorted(os.listdir(root)) == ["etc"] and os.listdir(root / "etc") == ["hosts"]
    # what a pull needs still works under the filter
    assert res["socket_inet"] == 0 and res["thread"] == 0, res


# --- kill -9 of the helper ---------------------------------------------------

def test_kill9_helper_mid_pull_fails_cleanly_next_pull_works(daemon, hostile):
    kill9_mid_pull(daemon, hostile)


def test_kill9_helper_mid_pull_privsep(fresh_warrend, hostile):
    """The same with --privsep: warren-fetch is warren-priv's child
    (HELPER_START FETCH); warrend sees its death through its pidfd."""
    d = fresh_warrend(extra_args=["--privsep"])
    pid = kill9_mid_pull(d, hostile)
    assert fetch_parent(d) != d.proc.pid
    assert "warren-priv: started warren-fetch (pid %d)" % pid in d.read_log()


def kill9_mid_pull(daemon, hostile):
    call, pid, img, ref, msgs = stalled_pull(daemon, hostile)
    os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + 20
    while not any(isinstance(m, grpc.RpcError) for m in msgs):
        assert time.monotonic() < deadline, (msgs, daemon.read_log())
        time.sleep(0.05)
    err = [m for m in msgs if isinstance(m, grpc.RpcError)][0]
    assert err.code() == grpc.StatusCode.UNAVAILABLE, err.details()
    if fetch_parent(daemon) == daemon.proc.pid:
        assert "warren-fetch (pid %d) was killed by signal 9" % pid in err.details()
    else:  # warren-priv's child: warrend sees its pidfd, warren-priv logs the signal
        assert "warren-fetch (pid %d) ended during the pull" % pid in err.details()
        wait = time.monotonic() + 10
        while "warren-fetch (pid %d) killed by signal 9" % pid not in daemon.read_log():
            assert time.monotonic() < wait, daemon.read_log()[-3000:]
            time.sleep(0.05)
    assert "nothing was stored" in err.details()
    assert_nothing_stored(daemon)
    assert pid not in fetchers(daemon)
    assert not any(blob_fds(daemon, p) for p in fetchers(daemon))
    # the registry recovers; the next pull gets a new helper and completes
    hostile.stall.clear()
    hostile.release.set()
    image = pull(daemon, ref)
    assert list(image.layers) == [sha(img.layers[0])]
    assert entries(daemon, "layers/tmp") == [] and entries(daemon, "tmp") == []
    assert daemon.proc.poll() is None
    return pid


# --- hostile registry responses -----------------------------------------------

def test_oversized_manifest(daemon, hostile):
    img = Image([layer([("a", b"x")])])
    big = img.manifest[:-1] + b', "pad": "' + b"x" * (5 << 20) + b'"}'
    err = pull_error(daemon, hostile.add("big/manifest", img, manifest=big))
    assert err.code() == grpc.StatusCode.INVALID_ARGUMENT, err.details()
    assert "manifest" in err.details() and "bytes" in err.details(), err.details()
    assert_nothing_stored(daemon)


def test_manifest_not_json(daemon, hostile):
    img = Image([layer([("a", b"x")])])
    err = pull_error(daemon, hostile.add("bad/json", img, manifest=b'{"schemaVersion": 2, "lay'))
    assert err.code() == grpc.StatusCode.INVALID_ARGUMENT, err.details()
    assert "JSON" in err.details() or "json" in err.details(), err.details()
    assert_nothing_stored(daemon)


def test_layer_with_wrong_digest(daemon, hostile):
    real = layer([("a", os.urandom(5000))])
    img = Image([real], served_layers=[layer([("a", os.urandom(5000))])])
    err = pull_error(daemon, hostile.add("wrong/digest", img))
    assert err.code() == grpc.StatusCode.DATA_LOSS, err.details()
    assert "digest" in err.details(), err.details()
    assert_nothing_stored(daemon)


def test_config_with_wrong_digest(daemon, hostile):
    img = Image([layer([("a", b"x")])])
    img.blobs[sha(img.config)] = img.config.replace(b"hostile", b"evil!!!")
    err = pull_error(daemon, hostile.add("wrong/config", img))
    assert err.code() == grpc.StatusCode.DATA_LOSS, err.details()
    assert "image config" in err.details(), err.details()
    assert_nothing_stored(daemon)


def test_config_not_json(daemon, hostile):
    img = Image([layer([("a", b"x")])])
    bad = b'{"rootfs": '
    img.blobs = {sha(bad): bad, sha(img.layers[0]): img.layers[0]}
    m = json.loads(img.manifest)
    m["config"] = {"mediaType": MT_CONFIG, "digest": sha(bad), "size": len(bad)}
    err = pull_error(daemon, hostile.add("bad/config", img, manifest=json.dumps(m).encode()))
    assert err.code() == grpc.StatusCode.INVALID_ARGUMENT, err.details()
    assert_nothing_stored(daemon)


# --- a helper that lies: warrend does not take its word ----------------------

LYING = os.path.join(os.path.dirname(os.path.abspath(__file__)), "helpers", "lying-fetch.py")


def lying_daemon(fresh_warrend, monkeypatch, tmp_path, mode):
    real = layer([("claimed", b"what the manifest names")])
    other = layer([("swapped", b"what the helper wrote instead")])
    spec = tmp_path / "layers.json"
    spec.write_text(json.dumps({"claimed": sha(real), "tar": other.hex()}))
    # warrend gives its helper a bare environment: a wrapper carries ours
    wrapper = tmp_path / "lying-fetch"
    wrapper.write_text("#!/bin/sh\nLYING_FETCH_MODE=%s LYING_FETCH_LAYERS=%s exec %s %s \"$@\"\n"
                       % (mode, spec, sys.executable, LYING))
    wrapper.chmod(0o755)
    monkeypatch.setenv("WARREN_FETCH_HELPER", str(wrapper))
    return fresh_warrend()


def test_helper_lying_about_a_blob_is_caught(fresh_warrend, monkeypatch, tmp_path):
    d = lying_daemon(fresh_warrend, monkeypatch, tmp_path, "swap")
    err = pull_error(d, "127.0.0.1:9/lie/img:v1")
    assert err.code() == grpc.StatusCode.DATA_LOSS, err.details()
    assert "blob digest mismatch" in err.details() and "bytes received hash to" in err.details()
    assert_nothing_stored(d)


@pytest.mark.parametrize("mode,words", [("garbage", "malformed message"),
                                        ("unasked", "nobody asked for")])
def test_helper_breaking_the_protocol_is_killed(fresh_warrend, monkeypatch, tmp_path, mode,
                                                words):
    d = lying_daemon(fresh_warrend, monkeypatch, tmp_path, mode)
    err = pull_error(d, "127.0.0.1:9/lie/img:v1")
    assert err.code() == grpc.StatusCode.INTERNAL, err.details()
    assert words in err.details(), err.details()
    assert_nothing_stored(d)
    # the helper that broke the protocol is gone (a spare may wait)
    liars = [int(x) for x in (tmp_path / "layers.json.liars").read_text().split()]
    assert liars
    deadline = time.monotonic() + 10
    while [p for p in liars if p in children(fetch_parent(d), os.path.basename(sys.executable)[:15])]:
        assert time.monotonic() < deadline, liars
        time.sleep(0.05)
