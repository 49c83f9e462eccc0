"""Volumes: the seed's "Mounting volumes" example, sharing between
sandboxes, read-only mounts, deletion while mounted, quotas (ENOSPC in the
sandbox, RESOURCE_EXHAUSTED on the API), hostile paths (traversal, symlink
escapes, symlink swaps during put/get, device files, FIFOs, sockets, bad
names), restarts and a kill -9 during 100 concurrent put_file calls. Every
daemon here is checked to leave no mount and no loop device behind."""
import glob
import os
import signal
import socket
import sqlite3
import stat
import subprocess
import threading
import time

import pytest

import warren as wr
from conftest import WARREN_CLI, Daemon, import_image
from test_lifecycle import Restartable
from warren import Image, Sandbox, Status, Volume, WarrenError



def loops_under(path):
    """Loop devices whose backing file is under path."""
    out = []
    for f in glob.glob("/sys/block/loop*/loop/backing_file"):
        try:
            with open(f) as fh:
                if fh.read().strip().startswith(path):
                    out.append(f)
        except OSError:
            pass
    return out


def mounts_under(path):
    with open("/proc/self/mountinfo") as f:
        return [line for line in f if path in line]


def wait_clean(path, timeout=10):
    """No mount and (after the lazy detach) no loop device under path."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not loops_under(path) and not mounts_under(path):
            return
        time.sleep(0.05)
    raise AssertionError("left behind under %s: %s %s" % (path, loops_under(path),
                                                         mounts_under(path)))


def data_dir(state_dir, name):
    """The host path of a mounted volume's files (for planting what a
    sandbox could plant, and for checking the disk)."""
    return os.path.join(state_dir, "volumes", "default", name, "mnt", "data")


@pytest.fixture(scope="module")
def vd():
    """A daemon with busybox:latest, and the same rootfs as
    python:3.12-slim-trixie (what Image.debian_slim("3.12") names), so the
    seed's example runs without a registry; WARREN_ADDR points at it."""
    d = Daemon(extra_args=["--warm-pool", "0"])
    old = os.environ.get("WARREN_ADDR")
    try:
        import_image(d, "busybox:latest")
        import_image(d, "python:3.12-slim-trixie")
        os.environ["WARREN_ADDR"] = d.unix_addr
        yield d
    finally:
        if old is None:
            os.environ.pop("WARREN_ADDR", None)
        else:
            os.environ["WARREN_ADDR"] = old
        tmp = d.tmp
        d.stop()
        wait_clean(tmp)


@pytest.fixture
def client(vd):
    with wr.SandboxClient(vd.unix_addr) as c:
        yield c


_n = [0]


@pytest.fixture
def vol(vd, client):
    """A fresh volume of the test's own, deleted afterwards."""
    _n[0] += 1
    v = Volume("t%d-%d" % (os.getpid(), _n[0]), client)
    v.create()
    yield v
    try:
        v.delete()
    except WarrenError:
        pass


def status_of(fn):
    with pytest.raises(WarrenError) as ei:
        fn()
    return ei.value.status


# ---- the seed ----

def test_seed_mounting_volumes(vd):
    from warren import Image, Sandbox, Volume  # noqa: F811 (as the seed writes it)

    vol = Volume("training-data")
    vol.put_file("inputs/example.txt", b"hello\n")

    sandbox = Sandbox(
        image=Image.debian_slim("3.12"),
        name="volume-reader",
        volumes=[("training-data", "/data")],
    ).run()

    result = sandbox.exec("cat", "/data/inputs/example.txt")
    print(result.stdout_text)  # "hello\n"
    assert result.stdout_text == "hello\n"

    sandbox.terminate()
    vol.delete()
    vol.close()


def test_mount_volume_before_run_and_cli_volume_flag(vd, client, vol):
    vol.put_file("x.txt", b"from the api\n")
    sb = Sandbox(image="busybox:latest")
    sb.mount_volume(vol.name, "/cache")
    client.run(sb)
    try:
        assert sb.exec("cat", "/cache/x.txt").stdout_text == "from the api\n"
    finally:
        sb.terminate()
    cli = [WARREN_CLI, "--addr", vd.unix_addr]
    sid = subprocess.run(cli + ["sandbox", "create", "-i", "busybox:latest", "--volume",
                                vol.name + ":/v:ro", "--", "sleep", "600"],
                         check=True, capture_output=True, text=True).stdout.strip()
    try:
        r = subprocess.run(cli + ["exec", "-i", sid, "--", "sh", "-c",
                                  "cat /v/x.txt; echo no > /v/y"], capture_output=True, text=True)
        assert r.stdout == "from the api\n"
        assert "Read-only file system" in r.stderr
    finally:
        subprocess.run(cli + ["sandbox", "rm", sid], check=True, capture_output=True)


# ---- sharing, read-only, deletion ----

def test_two_sandboxes_share_writes(client, vol):
    a = client.create(image="busybox:latest", volumes=[(vol.name, "/shared")])
    b = client.create(image="busybox:latest", volumes=[(vol.name, "/mnt/other")])
    try:
        assert a.exec("sh", "-c", "echo from-a > /shared/a.txt").exit_code == 0
        assert b.exec("cat", "/mnt/other/a.txt").stdout_text == "from-a\n"
        assert b.exec("sh", "-c", "mkdir -p /mnt/other/d && echo from-b > /mnt/other/d/b").exit_code == 0
        assert a.exec("cat", "/shared/d/b").stdout_text == "from-b\n"
        # and the API sees both at once
        assert vol.get_file("d/b") == b"from-b\n"
        assert sorted(f.path for f in vol.list_files()) == ["a.txt", "d/b"]
    finally:
        a.terminate()
        b.terminate()


def test_read_only_mount_is_erofs(client, vol):
    vol.put_file("keep.txt", b"keep\n")
    sb = client.create(image="busybox:latest", volumes=[(vol.name, "/ro", True)])
    try:
        r = sb.exec("sh", "-c", "echo x > /ro/new; echo rc=$?")
        assert "Read-only file system" in r.stderr_text
        assert "rc=1" in r.stdout_text
        r = sb.exec("rm", "/ro/keep.txt")
        assert r.exit_code != 0 and "Read-only file system" in r.stderr_text
        assert sb.exec("cat", "/ro/keep.txt").stdout_text == "keep\n"
    finally:
        sb.terminate()
    assert vol.get_file("keep.txt") == b"keep\n"


def test_delete_mounted_volume_is_refused_naming_the_sandbox(client, vol):
    sb = client.create(image="busybox:latest", name="holds-" + vol.name,
                       volumes=[(vol.name, "/data")])
    try:
        with pytest.raises(WarrenError) as ei:
            vol.delete()
        assert ei.value.status == Status.FAILED_PRECONDITION
        assert "holds-" + vol.name in ei.value.message
    finally:
        sb.terminate()
    vol.put_file("after.txt", b"still here")  # survives its sandbox
    assert vol.get_file("after.txt") == b"still here"
    vol.delete()
    assert status_of(lambda: vol.stat("")) == Status.NOT_FOUND


def test_mount_of_unknown_volume_and_bad_mount_path(client):
    assert status_of(lambda: client.create(image="busybox:latest",
                                           volumes=[("no-such-volume", "/data")])) == Status.NOT_FOUND
    for bad in ("relative", "/proc/x", "/a/../b", "/"):
        with pytest.raises(WarrenError) as ei:
            client.create(image="busybox:latest", volumes=[("whatever", bad)])
        assert ei.value.status == Status.INVALID_ARGUMENT
        assert "volumes[0].path" in ei.value.message


# ---- the file API ----

def test_file_api_round_trip_ranges_listing_stat(vol):
    data = os.urandom(3 * 1024 * 1024 + 17)
    info = vol.put_file("big/blob.bin", data, mode=0o600)
    assert info.size_bytes == len(data) and info.mode == 0o600 and info.path == "big/blob.bin"
    assert vol.get_file("big/blob.bin") == data
    assert vol.get_file("big/blob.bin", offset=1000, length=5000) == data[1000:6000]
    assert vol.get_file("big/blob.bin", offset=len(data) - 3) == data[-3:]
    assert vol.get_file("big/blob.bin", offset=len(data) + 10) == b""
    for i in range(25):
        vol.put_file("many/f%02d" % i, b"%d" % i)
    names = [f.path for f in vol.iter_files(page_size=7)]
    assert names == ["big/blob.bin"] + ["many/f%02d" % i for i in range(25)]
    assert [f.path for f in vol.list_files("many")][:2] == ["many/f00", "many/f01"]
    st = vol.stat("many")
    assert st.kind == wr.FileKind.DIRECTORY
    assert vol.stat("many/f03").size_bytes == 1
    vol.remove_file("many/f03")
    assert status_of(lambda: vol.get_file("many/f03")) == Status.NOT_FOUND
    assert status_of(lambda: vol.remove_file("many")) == Status.FAILED_PRECONDITION
    # streaming variants: a generator in, chunks out
    vol.put_file_stream("gen.bin", (bytes([i]) * 100000 for i in range(50)))
    got = b"".join(vol.get_file_stream("gen.bin"))
    assert got == b"".join(bytes([i]) * 100000 for i in range(50))
    # overwrite is atomic replacement
    vol.put_file("gen.bin", b"short")
    assert vol.get_file("gen.bin") == b"short"
    # a non-UTF-8 name round-trips
    vol.put_file(b"raw-\xff\xfe", b"x")
    assert vol.get_file(b"raw-\xff\xfe") == b"x"
    assert "raw-\udcff\udcfe" in [f.path for f in vol.list_files()]


def test_cli_volume_commands(vd, tmp_path):
    cli = [WARREN_CLI, "--addr", vd.unix_addr]
    run = lambda *a, **kw: subprocess.run(cli + list(a), capture_output=True, **kw)  # noqa: E731
    assert run("volume", "create", "--max-bytes", "64Mi", "cli-vol").returncode == 0
    src = tmp_path / "in.bin"
    src.write_bytes(os.urandom(300000))
    assert run("volume", "put", "cli-vol", "dir/in.bin", str(src)).returncode == 0
    assert run("volume", "put", "cli-vol", "stdin.txt", input=b"piped\n").returncode == 0
    out = tmp_path / "out.bin"
    assert run("volume", "get", "cli-vol", "dir/in.bin", str(out)).returncode == 0
    assert out.read_bytes() == src.read_bytes()
    assert run("volume", "get", "cli-vol", "stdin.txt").stdout == b"piped\n"
    files = run("volume", "files", "cli-vol").stdout.decode()
    assert "dir/in.bin" in files and "stdin.txt" in files
    import json
    listed = json.loads(run("volume", "files", "--json", "cli-vol").stdout)
    assert sorted(f["path"] for f in listed) == ["dir/in.bin", "stdin.txt"]
    assert "cli-vol" in run("volume", "ls").stdout.decode()
    r = run("volume", "put", "cli-vol", "../escape", input=b"x")
    assert r.returncode != 0 and b"INVALID_ARGUMENT" in r.stderr and b"meta.path" in r.stderr
    assert run("volume", "rm", "cli-vol").returncode == 0
    assert "cli-vol" not in run("volume", "ls").stdout.decode()


# ---- hostile paths: refused names ----

BAD_PATHS = [
    ("dotdot", "../x"),
    ("dotdot-deep", "a/b/../../../x"),
    ("dotdot-only", ".."),
    ("absolute", "/etc/passwd"),
    ("nul", "a\x00b"),
    ("newline", "a\nb"),
    ("long-component", "x" * 256),
    ("long-component-inner", "a/" + "y" * 300 + "/b"),
    ("long-path", "/".join(["d" * 200] * 25)),
    ("empty", ""),
]


@pytest.mark.parametrize("why,path", BAD_PATHS, ids=[b[0] for b in BAD_PATHS])
def test_put_refuses_bad_path(vol, why, path):
    with pytest.raises(WarrenError) as ei:
        vol.put_file(path, b"x")
    assert ei.value.status == Status.INVALID_ARGUMENT
    assert "meta.path" in ei.value.message


@pytest.mark.parametrize("why,path", BAD_PATHS[:-1], ids=[b[0] for b in BAD_PATHS[:-1]])
def test_get_stat_remove_list_refuse_bad_path(vol, why, path):
    for call, field in ((lambda: vol.get_file(path), "path"),
                        (lambda: vol.remove_file(path), "path"),
                        (lambda: vol.stat(path), "path"),
                        (lambda: vol.list_files(path), "prefix")):
        with pytest.raises(WarrenError) as ei:
            call()
        assert ei.value.status == Status.INVALID_ARGUMENT, why
        assert field in ei.value.message


def test_bad_volume_names_refused(client):
    for bad in ("", "-x", ".hidden", "a/b", "x" * 64, "a b"):
        with pytest.raises(WarrenError) as ei:
            Volume(bad, client).put_file("f", b"x")
        assert ei.value.status == Status.INVALID_ARGUMENT
        assert "name" in ei.value.message


# ---- hostile paths: what a sandbox plants ----

@pytest.fixture
def victim(tmp_path):
    """A host dir outside every volume, with a file a volume must never
    reach."""
    d = tmp_path / "victim"
    d.mkdir()
    (d / "secret.txt").write_bytes(b"HOST SECRET\n")
    return d


def plant(vd, vol, name, target):
    os.symlink(target, os.path.join(data_dir(vd.state_dir, vol.name), name))


def test_planted_by_a_sandbox_symlinks_do_not_escape(client, vol, victim):
    """A sandbox plants symlinks to the host's victim dir (absolute and
    relative, climbing out of the volume's host path); the API stays in."""
    sb = client.create(image="busybox:latest", volumes=[(vol.name, "/data")])
    try:
        r = sb.exec("sh", "-c", "ln -s %s /data/abs && ln -s ../../../../../../../../../..%s /data/rel"
                    " && ln -s / /data/root && ln -s /proc/self/root /data/magic" % (victim, victim))
        assert r.exit_code == 0, r.stderr_text
    finally:
        sb.terminate()
    for p in ("abs/secret.txt", "rel/secret.txt", "root" + str(victim) + "/secret.txt",
              "magic" + str(victim) + "/secret.txt"):
        with pytest.raises(WarrenError) as ei:
            vol.get_file(p)
        assert ei.value.status in (Status.NOT_FOUND, Status.FAILED_PRECONDITION), p
        assert b"HOST SECRET" not in ei.value.message.encode()
        with pytest.raises(WarrenError):
            vol.remove_file(p)
        assert (victim / "secret.txt").read_bytes() == b"HOST SECRET\n"
        # a write through the link lands inside the volume or is refused
        try:
            vol.put_file(p.replace("secret.txt", "planted.txt"), b"x")
        except WarrenError:
            pass
        assert not (victim / "planted.txt").exists()
    assert os.listdir(victim) == ["secret.txt"]


def test_symlink_to_host_file_is_not_followed_out(vd, vol, victim):
    plant(vd, vol, "pw", str(victim / "secret.txt"))
    assert status_of(lambda: vol.get_file("pw")) == Status.NOT_FOUND
    assert vol.stat("pw").kind == wr.FileKind.SYMLINK


def test_put_over_a_symlink_replaces_the_link(vd, vol, victim):
    plant(vd, vol, "link", str(victim / "secret.txt"))
    vol.put_file("link", b"inside\n")
    assert (victim / "secret.txt").read_bytes() == b"HOST SECRET\n"
    assert vol.stat("link").kind == wr.FileKind.FILE
    assert vol.get_file("link") == b"inside\n"


def test_absolute_symlink_resolves_inside_the_volume(vd, vol):
    vol.put_file("real/file.txt", b"in the volume\n")
    plant(vd, vol, "abs", "/real/file.txt")
    assert vol.get_file("abs") == b"in the volume\n"


def test_listing_does_not_follow_symlinked_dirs(vd, vol, victim):
    vol.put_file("a.txt", b"a")
    plant(vd, vol, "out", str(victim))
    files = {f.path: f.kind for f in vol.list_files()}
    assert files == {"a.txt": wr.FileKind.FILE, "out": wr.FileKind.SYMLINK}
    assert status_of(lambda: vol.list_files("out")) == Status.NOT_FOUND


def test_char_and_block_devices_refused(vd, vol):
    d = data_dir(vd.state_dir, vol.name)
    os.mknod(os.path.join(d, "null"), 0o666 | stat.S_IFCHR, os.makedev(1, 3))
    os.mknod(os.path.join(d, "disk"), 0o600 | stat.S_IFBLK, os.makedev(7, 0))
    for name in ("null", "disk"):
        with pytest.raises(WarrenError) as ei:
            vol.get_file(name)
        assert ei.value.status == Status.FAILED_PRECONDITION
        assert "not a regular file" in ei.value.message
        assert vol.stat(name).kind == wr.FileKind.OTHER


def test_fifo_refused_without_blocking(vd, client, vol):
    sb = client.create(image="busybox:latest", volumes=[(vol.name, "/data")])
    try:
        assert sb.exec("mkfifo", "/data/pipe").exit_code == 0
    finally:
        sb.terminate()
    t0 = time.monotonic()
    with pytest.raises(WarrenError) as ei:
        vol.get_file("pipe")
    assert ei.value.status == Status.FAILED_PRECONDITION
    assert time.monotonic() - t0 < 5
    # a put onto the FIFO's name replaces it (rename), never opens it
    vol.put_file("pipe", b"now a file")
    assert vol.get_file("pipe") == b"now a file"


def test_socket_refused(vd, vol):
    s = socket.socket(socket.AF_UNIX)
    try:
        s.bind(os.path.join(data_dir(vd.state_dir, vol.name), "sock"))
        with pytest.raises(WarrenError) as ei:
            vol.get_file("sock")
        assert ei.value.status == Status.FAILED_PRECONDITION
    finally:
        s.close()


def test_dir_and_file_confusions(vol):
    vol.put_file("f", b"x")
    vol.put_file("d/g", b"y")
    assert status_of(lambda: vol.put_file("f/child", b"z")) == Status.FAILED_PRECONDITION
    assert status_of(lambda: vol.put_file("d", b"z")) == Status.FAILED_PRECONDITION
    assert status_of(lambda: vol.get_file("d")) == Status.FAILED_PRECONDITION
    assert status_of(lambda: vol.put_file(".", b"z")) == Status.INVALID_ARGUMENT


def test_symlink_loop_refused(vd, vol):
    plant(vd, vol, "loop1", "loop2")
    plant(vd, vol, "loop2", "loop1")
    assert status_of(lambda: vol.get_file("loop1")) == Status.FAILED_PRECONDITION
    assert status_of(lambda: vol.put_file("loop1/x", b"x")) in (Status.FAILED_PRECONDITION,
                                                               Status.NOT_FOUND)


def _swapper(d, name, target, stop):
    """Swap data/<name> between a real dir and a symlink to target as fast
    as possible (what a hostile sandbox would do)."""
    real = os.path.join(d, name + ".real")
    link = os.path.join(d, name + ".link")
    path = os.path.join(d, name)
    while not stop.is_set():
        try:
            os.rename(real, path)       # the dir in place
            os.rename(path, real)
            os.symlink(target, link)
            os.rename(link, path)       # the link in place
            os.unlink(path)
        except OSError:
            pass


def test_symlink_swap_race_during_put(vd, vol, victim):
    d = data_dir(vd.state_dir, vol.name)
    os.mkdir(os.path.join(d, "sw.real"))
    stop = threading.Event()
    t = threading.Thread(target=_swapper, args=(d, "sw", str(victim), stop))
    t.start()
    ok = 0
    try:
        deadline = time.monotonic() + 6
        i = 0
        while time.monotonic() < deadline:
            try:
                vol.put_file("sw/put-%d.txt" % i, b"%d" % i)
                ok += 1
            except WarrenError:
                pass
            i += 1
    finally:
        stop.set()
        t.join()
    assert os.listdir(victim) == ["secret.txt"], "a put escaped the volume"
    assert i > 50


def test_symlink_swap_race_during_get(vd, vol, victim):
    d = data_dir(vd.state_dir, vol.name)
    os.mkdir(os.path.join(d, "sw.real"))
    with open(os.path.join(d, "sw.real", "secret.txt"), "wb") as f:
        f.write(b"volume content\n")
    stop = threading.Event()
    t = threading.Thread(target=_swapper, args=(d, "sw", str(victim), stop))
    t.start()
    seen = set()
    try:
        deadline = time.monotonic() + 6
        while time.monotonic() < deadline:
            try:
                seen.add(vol.get_file("sw/secret.txt"))
            except WarrenError as e:
                assert e.status in (Status.NOT_FOUND, Status.FAILED_PRECONDITION), e
    finally:
        stop.set()
        t.join()
    assert b"HOST SECRET\n" not in seen
    assert seen <= {b"volume content\n"}


def test_swap_race_from_inside_a_sandbox(client, vol, victim):
    """The sandbox itself swaps a dir for a symlink climbing out of the
    volume while the API writes and reads through it."""
    vol.put_file("x/secret.txt", b"volume content\n")
    sb = client.create(image="busybox:latest", volumes=[(vol.name, "/data")])
    try:
        sb.exec("sh", "-c", "ln -s ../../../../../../../../..%s /data/evil; "
                "(end=$(($(date +%%s)+6)); while [ $(date +%%s) -lt $end ]; do "
                "mv /data/x /data/x.d; mv /data/evil /data/x; mv /data/x /data/evil; "
                "mv /data/x.d /data/x; done) >/dev/null 2>&1 &" % victim)
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            for call in (lambda: vol.put_file("x/new.txt", b"n"),
                         lambda: vol.get_file("x/secret.txt")):
                try:
                    r = call()
                    if isinstance(r, bytes):
                        assert r == b"volume content\n"
                except WarrenError:
                    pass
    finally:
        sb.terminate()
    assert sorted(os.listdir(victim)) == ["secret.txt"]


# ---- quotas ----

def test_quota_bytes_enospc_in_sandbox_and_resource_exhausted(client, vd):
    small = Volume("quota-bytes", client, max_bytes=16 << 20)
    other = Volume("quota-other", client, max_bytes=16 << 20)
    try:
        info = small.create()
        assert 12 << 20 < info.max_bytes <= 16 << 20
        with pytest.raises(WarrenError) as ei:
            small.put_file("too-big", b"\0" * (20 << 20))
        assert ei.value.status == Status.RESOURCE_EXHAUSTED
        assert "full" in ei.value.message
        # the failed put left nothing (no partial file, space returned)
        assert small.list_files() == []
        sb = client.create(image="busybox:latest", volumes=[("quota-bytes", "/q")])
        try:
            r = sb.exec("sh", "-c", "dd if=/dev/zero of=/q/fill bs=1M count=40")
            assert r.exit_code != 0 and "No space left on device" in r.stderr_text
        finally:
            sb.terminate()
        # full: the API says so, the other volume and the host are unaffected
        with pytest.raises(WarrenError) as ei:
            small.put_file("one-more", b"x" * (1 << 20))
        assert ei.value.status == Status.RESOURCE_EXHAUSTED
        other.put_file("fine", b"y" * (4 << 20))
        assert other.get_file("fine") == b"y" * (4 << 20)
        small.remove_file("fill")
        small.put_file("after", b"room again")
    finally:
        for v in (small, other):
            try:
                v.delete()
            except WarrenError:
                pass


def test_quota_inodes(client):
    v = Volume("quota-inodes", client, max_bytes=16 << 20, max_files=64)
    try:
        info = v.create()
        assert 64 <= info.max_files < 256
        with pytest.raises(WarrenError) as ei:
            for i in range(info.max_files + 1):
                v.put_file("f%d" % i, b"")
        assert ei.value.status == Status.RESOURCE_EXHAUSTED
        sb = client.create(image="busybox:latest", volumes=[("quota-inodes", "/q")])
        try:
            r = sb.exec("sh", "-c", "touch /q/extra-1 /q/extra-2")
            assert r.exit_code != 0 and "No space left on device" in r.stderr_text
        finally:
            sb.terminate()
    finally:
        v.delete()


def test_concurrent_first_use_makes_one_volume(vd, client):
    """20 threads put into a volume that does not exist yet: each call
    creates it on first use; one volume results, holding every file, and
    no half-made image is left."""
    errors = []

    def put(i):
        try:
            Volume("racy-create", client).put_file("f%02d" % i, b"%d" % i)
        except Exception as e:  # noqa: BLE001
            errors.append(e)

    threads = [threading.Thread(target=put, args=(i,)) for i in range(20)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    try:
        assert errors == []
        assert [v.name for v in client.list_volumes()].count("racy-create") == 1
        assert len(Volume("racy-create", client).list_files()) == 20
        envdir = os.path.join(vd.state_dir, "volumes", "default")
        assert [n for n in os.listdir(envdir) if n.startswith(".new-")] == []
    finally:
        Volume("racy-create", client).delete()


def test_quota_limits_checked(client):
    for kw, field in (({"max_bytes": 1024}, "max_bytes"), ({"max_bytes": 1 << 60}, "max_bytes"),
                      ({"max_bytes": 16 << 20, "max_files": 10}, "max_files")):
        with pytest.raises(WarrenError) as ei:
            Volume("quota-bad", client, **kw).create()
        assert ei.value.status in (Status.INVALID_ARGUMENT, Status.RESOURCE_EXHAUSTED)
        assert field in ei.value.message


# ---- restarts ----

def store_volumes(state_dir):
    db = sqlite3.connect(os.path.join(state_dir, "warren.db"), timeout=10)
    try:
        return sorted(r[0] for r in db.execute("SELECT name FROM volumes"))
    finally:
        db.close()


def disk_volumes(state_dir):
    d = os.path.join(state_dir, "volumes", "default")
    return sorted(os.listdir(d)) if os.path.isdir(d) else []


def test_restart_keeps_volumes():
    d = Restartable()
    try:
        d.start()
        with wr.SandboxClient(d.unix_addr) as c:
            Volume("keep", c).put_file("a/b.txt", b"survives\n")
            Volume("keep2", c, max_bytes=32 << 20).put_file("x", b"y")
        d.stop()
        wait_clean(d.tmp)
        d.start()
        with wr.SandboxClient(d.unix_addr) as c:
            assert sorted(v.name for v in c.list_volumes()) == ["keep", "keep2"]
            assert Volume("keep", c).get_file("a/b.txt") == b"survives\n"
            assert 24 << 20 < Volume("keep2", c).info().max_bytes <= 32 << 20
        d.kill9()
        d.start()  # a mount left by a killed warrend is taken over
        with wr.SandboxClient(d.unix_addr) as c:
            assert Volume("keep", c).get_file("a/b.txt") == b"survives\n"
            Volume("keep", c).delete()
        assert store_volumes(d.state_dir) == disk_volumes(d.state_dir) == ["keep2"]
    finally:
        d.destroy()
        wait_clean(d.tmp)


def test_kill9_during_100_concurrent_puts():
    d = Restartable()
    try:
        d.start()
        acked = {}
        errors = []
        lock = threading.Lock()
        with wr.SandboxClient(d.unix_addr) as c:
            Volume("crash", c).create()

            def content(i):
                return (b"%04d:" % i) * ((64 << 10) + i * 997)

            def put(i):
                try:
                    Volume("crash", c).put_file("dir%d/file-%03d.bin" % (i % 7, i), content(i))
                    with lock:
                        acked[i] = True
                except Exception as e:  # noqa: BLE001 (the kill cuts calls)
                    with lock:
                        errors.append(e)

            threads = [threading.Thread(target=put, args=(i,)) for i in range(100)]
            for t in threads:
                t.start()
            deadline = time.monotonic() + 30
            while len(acked) < 10 and time.monotonic() < deadline:
                time.sleep(0.005)
            d.kill9()
            for t in threads:
                t.join(timeout=60)
        n_acked = len(acked)
        print("kill -9 after %d of 100 puts were acknowledged (%d cut)" % (n_acked, len(errors)))
        assert n_acked >= 10
        assert n_acked + len(errors) == 100
        d.start()
        with wr.SandboxClient(d.unix_addr) as c:
            v = Volume("crash", c)
            listed = {f.path: f.size_bytes for f in v.list_files()}
            for i in acked:
                want = content(i)
                assert v.get_file("dir%d/file-%03d.bin" % (i % 7, i)) == want
            for path, size in listed.items():
                i = int(path.rsplit("-", 1)[1].split(".")[0])
                assert size == len(content(i)), "partial file %s" % path
                assert v.get_file(path) == content(i)
            assert all(p.startswith("dir") for p in listed), listed
        # nothing half-written anywhere on the volume (the temp files lived
        # in .staging, which the mount emptied), and the store agrees
        root = os.path.join(d.state_dir, "volumes", "default", "crash", "mnt")
        assert os.listdir(os.path.join(root, ".staging")) == []
        on_disk = []
        for dp, dn, fn in os.walk(os.path.join(root, "data")):
            on_disk += [os.path.relpath(os.path.join(dp, f), os.path.join(root, "data")) for f in fn]
        assert sorted(on_disk) == sorted(listed)
        assert store_volumes(d.state_dir) == disk_volumes(d.state_dir) == ["crash"]
    finally:
        d.destroy()
        wait_clean(d.tmp)


def test_sandbox_outliving_warrend_shares_the_remounted_volume():
    """A sandbox keeps its mount across a warrend restart; the new warrend
    mounts the same loop device (one superblock: writes on either side are
    seen on the other), never a second one on the same image."""
    d = Restartable()
    try:
        d.start()
        import_image(d, "busybox:latest")
        with wr.SandboxClient(d.unix_addr) as c:
            Volume("live", c).put_file("before.txt", b"1\n")
            sid = c.create(image="busybox:latest", volumes=[("live", "/data")]).id
        d.stop()  # the sandbox outlives it
        # the volume's (the sandbox's writable layer has one of its own)
        assert len(loops_under(os.path.join(d.state_dir, "volumes"))) == 1
        d.start()
        with wr.SandboxClient(d.unix_addr) as c:
            Volume("live", c).put_file("after.txt", b"2\n")
            sb = c.get(id=sid)
            assert sb.exec("cat", "/data/before.txt", "/data/after.txt").stdout_text == "1\n2\n"
            assert sb.exec("sh", "-c", "echo 3 > /data/from-sb").exit_code == 0
            assert Volume("live", c).get_file("from-sb") == b"3\n"
            assert len(loops_under(os.path.join(d.state_dir, "volumes"))) == 1
            with pytest.raises(WarrenError) as ei:
                Volume("live", c).delete()
            assert ei.value.status == Status.FAILED_PRECONDITION and sid in ei.value.message
            sb.terminate()
            Volume("live", c).delete()
    finally:
        d.destroy()
        wait_clean(d.tmp)


def test_fork_mounts_the_same_volume(client, vol):
    """A fork is created as its original was: with the same volumes (shared,
    not copied: the snapshot holds the writable layer only)."""
    sb = client.create(image="busybox:latest", volumes=[(vol.name, "/data")])
    forks = []
    try:
        assert sb.exec("sh", "-c", "echo orig > /data/o; echo layer > /root-file").exit_code == 0
        forks = sb.fork(1)
        f = forks[0]
        assert f.exec("cat", "/data/o", "/root-file").stdout_text == "orig\nlayer\n"
        assert f.exec("sh", "-c", "echo from-fork > /data/f").exit_code == 0
        assert sb.exec("cat", "/data/f").stdout_text == "from-fork\n"
        with pytest.raises(WarrenError) as ei:
            vol.delete()
        assert ei.value.status == Status.FAILED_PRECONDITION
        assert f.id in ei.value.message and sb.id in ei.value.message
    finally:
        for s in forks + [sb]:
            s.terminate()
