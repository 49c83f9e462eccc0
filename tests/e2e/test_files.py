"""The Files service (issue 18 item 1): sandbox.files read/write/list/
stat/remove/mkdir/rename/watch on running sandboxes, a 1 GiB round trip,
and hostile paths: every path is resolved inside the sandbox's root, so a
symlink (absolute, relative, in a parent, swapped during the call), "..",
/proc, /sys, devices, FIFOs and sockets never reach anything outside the
sandbox. Each hostile test checks a canary tree on the host (whose paths
the sandbox's symlinks name) is neither read nor written."""
import hashlib
import os
import socket
import stat
import threading
import time
import uuid

import pytest

import warren as wr
from conftest import WARREN_CLI
from warren import FileKind, Status, WarrenError

IMAGE = "busybox:latest"


def status_of(fn):
    try:
        fn()
    except WarrenError as e:
        return e.status
    return Status.OK


def error_of(fn):
    with pytest.raises(WarrenError) as ei:
        fn()
    return ei.value


@pytest.fixture
def sb(client):
    s = client.create(image=IMAGE)
    try:
        yield s
    finally:
        s.terminate()


class Canary:
    """A host directory the sandbox's symlinks point at: its content and
    mtimes must not change and nothing may be read out of it."""

    def __init__(self):
        self.tag = uuid.uuid4().hex[:12]
        self.dir = "/tmp/wr-canary-" + self.tag
        os.makedirs(self.dir + "/sub")
        self.secret = self.dir + "/secret"
        self.content = ("HOST-SECRET-" + self.tag + "\n").encode()
        with open(self.secret, "wb") as f:
            f.write(self.content)
        with open(self.dir + "/sub/inner", "wb") as f:
            f.write(self.content)
        self.before = self.snapshot()

    def snapshot(self):
        out = {}
        for root, dirs, files in os.walk(self.dir):
            for n in dirs + files:
                p = os.path.join(root, n)
                st = os.lstat(p)
                body = open(p, "rb").read() if stat.S_ISREG(st.st_mode) else None
                out[p] = (st.st_mode, st.st_size, st.st_mtime_ns, body)
        return out

    def check(self):
        assert self.snapshot() == self.before, "the host's canary tree changed"
        for p in ("/" + "wr-canary-" + self.tag, "/new-" + self.tag, "/etc/new-" + self.tag):
            assert not os.path.lexists(p), p


@pytest.fixture
def canary():
    c = Canary()
    yield c
    try:
        c.check()
    finally:
        import shutil
        shutil.rmtree(c.dir, ignore_errors=True)


def never_host(data, canary):
    assert canary.content not in data
    assert b"HOST-SECRET" not in data


def sh(sb, script):
    r = sb.exec("sh", "-c", script)
    assert r.exit_code == 0, (script, r.stdout_text, r.stderr_text)
    return r.stdout_text


# ---- the operations ----

def test_write_read_stat_list_round_trip(sb):
    f = sb.files
    st = f.write("/workspace/dir/a.txt", b"hello\n", mode=0o640)
    assert (st.kind, st.size_bytes, st.mode) == (FileKind.FILE, 6, 0o640)
    assert f.read("/workspace/dir/a.txt") == b"hello\n"
    assert f.read_text("/workspace/dir/a.txt") == "hello\n"
    assert f.read("/workspace/dir/a.txt", offset=1, length=3) == b"ell"
    assert f.read("/workspace/dir/a.txt", offset=100) == b""
    # the sandbox sees it as written
    assert sh(sb, "stat -c '%a %s' /workspace/dir/a.txt; cat /workspace/dir/a.txt") == \
        "640 6\nhello\n"
    # relative paths start at the sandbox's working directory
    wd = sh(sb, "pwd").strip()
    f.write("rel.txt", "text")
    assert sh(sb, "cat %s/rel.txt" % wd) == "text"
    names = [e.path for e in f.list("/workspace/dir")]
    assert names == ["/workspace/dir/a.txt"]
    sh(sb, "mkdir -p /workspace/t/b/c && echo x > /workspace/t/b/c/d && echo y > /workspace/t/a "
           "&& ln -s /nowhere /workspace/t/l")
    tree = [(e.path, e.kind) for e in f.list("/workspace/t", recursive=True)]
    assert tree == [("/workspace/t/a", FileKind.FILE), ("/workspace/t/b", FileKind.DIRECTORY),
                    ("/workspace/t/b/c", FileKind.DIRECTORY),
                    ("/workspace/t/b/c/d", FileKind.FILE), ("/workspace/t/l", FileKind.SYMLINK)]
    assert [e.path for e in f.list("/workspace/t", recursive=True, max_depth=1)] == \
        ["/workspace/t/a", "/workspace/t/b", "/workspace/t/l"]
    l = f.stat("/workspace/t/l")
    assert (l.kind, l.symlink_target) == (FileKind.SYMLINK, "/nowhere")
    assert f.stat("/").kind == FileKind.DIRECTORY


def test_write_replaces_atomically_and_keeps_mode_and_owner(sb):
    f = sb.files
    sh(sb, "echo old > /workspace/k && chmod 751 /workspace/k && chown 1000:1001 /workspace/k")
    st = f.write("/workspace/k", b"new")
    assert (st.mode, st.uid, st.gid) == (0o751, 1000, 1001)
    st = f.write("/workspace/k", b"newer", mode=0o600, user="123:456")
    assert (st.mode, st.uid, st.gid) == (0o600, 123, 456)
    assert sh(sb, "stat -c '%a %u %g' /workspace/k; cat /workspace/k") == "600 123 456\nnewer"
    # a user by name from the sandbox's /etc/passwd
    uid = sh(sb, "id -u nobody").strip()
    assert str(f.write("/workspace/n", b"", user="nobody").uid) == uid
    assert status_of(lambda: f.write("/workspace/n", b"", user="no-such-user")) == \
        Status.INVALID_ARGUMENT
    # no temp file is left beside it
    assert [e.path for e in f.list("/workspace") if ".warren-write" in e.path] == []


def test_streaming_file_objects(sb):
    f = sb.files
    with f.open("/workspace/s.bin", "wb") as w:
        for i in range(50):
            w.write(bytes([i]) * 100_000)
        # not there until closed
        assert not f.exists("/workspace/s.bin")
    assert w.result.size_bytes == 5_000_000
    with f.open("/workspace/s.bin", "rb") as r:
        assert r.read(100_000) == bytes([0]) * 100_000
        assert len(r.read()) == 4_900_000
    with pytest.raises(RuntimeError):
        with f.open("/workspace/s2.bin", "wb") as w:
            w.write(b"x" * 3_000_000)
            raise RuntimeError("abort")
    time.sleep(0.2)
    assert not f.exists("/workspace/s2.bin")
    # no temp file is left by the aborted write
    assert [e.path for e in f.list("/workspace") if ".warren-write" in e.path] == []
    # text
    with f.open("/workspace/t.txt", "w") as w:
        w.write("h\u00e9llo\n" * 3)
    assert w.result.size_bytes == 21
    with f.open("/workspace/t.txt") as r:
        assert r.readline() == "h\u00e9llo\n"
        assert r.read() == "h\u00e9llo\n" * 2


def test_mkdir_rename_remove(sb):
    f = sb.files
    st = f.mkdir("/workspace/m", mode=0o700)
    assert (st.kind, st.mode) == (FileKind.DIRECTORY, 0o700)
    assert status_of(lambda: f.mkdir("/workspace/m")) == Status.ALREADY_EXISTS
    f.mkdir("/workspace/m", parents=True)  # exists: fine with parents
    assert status_of(lambda: f.mkdir("/workspace/x/y")) == Status.NOT_FOUND
    f.mkdir("/workspace/x/y", parents=True, user="7:8")
    assert sh(sb, "stat -c '%u %g %a' /workspace/x /workspace/x/y") == "7 8 755\n7 8 755\n"
    f.write("/workspace/m/a", b"1")
    f.write("/workspace/m/b", b"2")
    assert f.rename("/workspace/m/a", "/workspace/x/a").path == "/workspace/x/a"
    assert status_of(lambda: f.rename("/workspace/m/b", "/workspace/x/a", overwrite=False)) == \
        Status.ALREADY_EXISTS
    f.rename("/workspace/m/b", "/workspace/x/a")
    assert f.read("/workspace/x/a") == b"2"
    # /tmp is another mount (a tmpfs): a rename across is refused
    e = error_of(lambda: f.rename("/workspace/x/a", "/tmp/a"))
    assert e.status == Status.FAILED_PRECONDITION and "another mount" in e.message
    assert status_of(lambda: f.remove("/workspace/x")) == Status.FAILED_PRECONDITION
    f.remove("/workspace/x", recursive=True)
    assert not f.exists("/workspace/x")
    assert status_of(lambda: f.remove("/workspace/x")) == Status.NOT_FOUND
    f.remove("/workspace/m")
    assert sh(sb, "ls /workspace") == ""


def test_errors_name_the_problem(sb, client):
    f = sb.files
    e = error_of(lambda: f.read("/workspace"))
    assert e.status == Status.FAILED_PRECONDITION and "directory" in e.message
    assert status_of(lambda: f.read("/nope")) == Status.NOT_FOUND
    assert status_of(lambda: f.write("/workspace", b"x")) == Status.FAILED_PRECONDITION
    assert status_of(lambda: f.write("/", b"x")) == Status.INVALID_ARGUMENT
    assert status_of(lambda: f.write("/workspace/..", b"x")) == Status.INVALID_ARGUMENT
    assert status_of(lambda: f.write("", b"x")) == Status.INVALID_ARGUMENT
    assert status_of(lambda: f.mkdir("/workspace", mode=0o10000)) == Status.INVALID_ARGUMENT
    other = wr.Files(lambda: client, "sb-0000000000000000")
    assert status_of(lambda: other.read("/etc/hostname")) == Status.NOT_FOUND


def test_paused_sandbox_files_still_work(sb):
    from conftest import DROP
    sb.pause()
    if DROP:
        # its init is frozen and a dropped warrend cannot open
        # /proc/<init>/root: refused, naming the fix (docs/privsep.md)
        try:
            for op in (lambda: sb.files.write("/workspace/p", b"x"),
                       lambda: sb.files.read("/etc/hostname"),
                       lambda: sb.files.list("/")):
                e = error_of(op)
                assert e.status == Status.FAILED_PRECONDITION, e
                assert "paused" in e.message and "resume" in e.message, e.message
        finally:
            sb.resume()
        sb.files.write("/workspace/p", b"after")
        assert sh(sb, "cat /workspace/p") == "after"
        return
    try:
        sb.files.write("/workspace/p", b"while paused")
        assert sb.files.read("/workspace/p") == b"while paused"
    finally:
        sb.resume()
    assert sh(sb, "cat /workspace/p") == "while paused"


def test_concurrent_file_calls_are_bounded(sb):
    """A file call in progress holds one of the sandbox's warren-init
    connections (16 in all, which exec sessions need too): the 9th at
    once is RESOURCE_EXHAUSTED naming the fix; once they end, calls and
    execs work as before."""
    ws = []
    try:
        for i in range(8):
            w = sb.files.open("/workspace/c%d" % i, "wb")  # its meta is sent now
            w.write(b"x")
            ws.append(w)
        deadline = time.monotonic() + 10
        while True:  # the eight metas reach warrend
            e = status_of(lambda: sb.files.stat("/workspace"))
            if e == Status.RESOURCE_EXHAUSTED or time.monotonic() > deadline:
                break
            time.sleep(0.05)
        e = error_of(lambda: sb.files.write("/workspace/ninth", b"y"))
        assert e.status == Status.RESOURCE_EXHAUSTED, e
        assert "file calls in progress" in e.message and "retry" in e.message, e.message
        assert sh(sb, "echo exec-ok").strip() == "exec-ok"  # init still serves execs
    finally:
        for w in ws:
            w.close()
    sb.files.write("/workspace/ninth", b"y")
    assert sb.files.read("/workspace/ninth") == b"y"
    assert sh(sb, "cat /workspace/c0 /workspace/c7").strip() == "xx"


def test_terminated_sandbox_refused(client):
    s = client.create(image=IMAGE)
    s.terminate()
    assert status_of(lambda: s.files.read("/etc/hostname")) == Status.FAILED_PRECONDITION


def test_read_only_volume_write_is_refused_naming_it(client):
    vol = wr.Volume("files-ro-" + uuid.uuid4().hex[:6], client)
    vol.put_file("in.txt", b"data")
    s = wr.Sandbox(image=IMAGE).mount_volume(vol.name, "/data", read_only=True)
    s = client.run(s)
    try:
        assert s.files.read("/data/in.txt") == b"data"
        for op in (lambda: s.files.write("/data/new.txt", b"x"),
                   lambda: s.files.write("/data/in.txt", b"x"),
                   lambda: s.files.mkdir("/data/d"),
                   lambda: s.files.remove("/data/in.txt"),
                   lambda: s.files.rename("/data/in.txt", "/data/b")):
            e = error_of(op)
            assert e.status == Status.FAILED_PRECONDITION, e
            assert "volume %s" % vol.name in e.message and "read-only" in e.message, e.message
        assert vol.get_file("in.txt") == b"data"
        assert [x.path for x in vol.list_files()] == ["in.txt"]
    finally:
        s.terminate()
        vol.delete()


def test_write_to_a_read_write_volume_lands_in_it(client):
    vol = wr.Volume("files-rw-" + uuid.uuid4().hex[:6], client)
    vol.create()
    s = client.run(wr.Sandbox(image=IMAGE).mount_volume(vol.name, "/data"))
    try:
        with s.files.watch("/data", recursive=True) as w:
            s.files.write("/data/sub/out.txt", b"through the sandbox's mount")
            evs = collect(w, lambda e: e.kind == wr.WatchEventKind.MOVED_TO)
        assert vol.get_file("sub/out.txt") == b"through the sandbox's mount"
        assert ("MOVED_TO", "/data/sub/out.txt") in [(e.kind.value, e.path) for e in evs]
        # the volume's own file API sees no temp file left behind
        assert [f.path for f in vol.list_files()] == ["sub/out.txt"]
    finally:
        s.terminate()
        vol.delete()


def sha_blocks(n_mib, seed):
    """n_mib distinct 1 MiB blocks and their running sha256."""
    h = hashlib.sha256()
    base = hashlib.sha256(seed).digest() * (1 << 15)  # 1 MiB

    def gen():
        for i in range(n_mib):
            b = i.to_bytes(8, "little") + base[8:]
            h.update(b)
            yield b
    return gen, h


@pytest.mark.slow
def test_one_gib_round_trip_checksummed(sb):
    n = 1024
    gen, h = sha_blocks(n, b"gib")
    t0 = time.monotonic()
    st = sb.files.write("/workspace/big.bin", gen())
    t1 = time.monotonic()
    assert st.size_bytes == n << 20
    back = hashlib.sha256()
    got = 0
    for chunk in sb.files.read_stream("/workspace/big.bin"):
        back.update(chunk)
        got += len(chunk)
    t2 = time.monotonic()
    assert got == n << 20
    assert back.hexdigest() == h.hexdigest()
    # and the sandbox reads the same bytes
    assert sh(sb, "sha256sum /workspace/big.bin").split()[0] == h.hexdigest()
    print("1 GiB write %.0f MB/s, read %.0f MB/s" % ((n << 20) / (t1 - t0) / 1e6,
                                                     (n << 20) / (t2 - t1) / 1e6))


def test_large_file_round_trip_checksummed(sb):
    gen, h = sha_blocks(64, b"small")
    sb.files.write("/workspace/m.bin", gen())
    assert hashlib.sha256(sb.files.read("/workspace/m.bin")).hexdigest() == h.hexdigest()
    assert sh(sb, "sha256sum /workspace/m.bin").split()[0] == h.hexdigest()


def test_loop_stays_responsive_during_big_io(sb, client):
    """Reads and writes run on worker threads: other calls are answered
    while 256 MiB stream."""
    gen, _ = sha_blocks(256, b"busy")
    done = threading.Event()
    lat = []

    def ping():
        while not done.is_set():
            t = time.monotonic()
            sb.files.stat("/etc")
            lat.append(time.monotonic() - t)
    th = threading.Thread(target=ping)
    th.start()
    try:
        sb.files.write("/workspace/busy.bin", gen())
        for _ in sb.files.read_stream("/workspace/busy.bin"):
            pass
    finally:
        done.set()
        th.join()
    assert lat and max(lat) < 2.0, max(lat)


# ---- watch ----

def collect(w, pred, timeout=10):
    """Events until pred(the newest event) or timeout."""
    out = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        e = w.next_event(timeout=deadline - time.monotonic())
        if e is None:
            break
        out.append(e)
        if pred(e):
            break
    return out


def test_watch_reports_create_modify_delete(sb):
    sh(sb, "mkdir -p /workspace/w")
    with sb.files.watch("/workspace/w", recursive=True) as w:
        sh(sb, "echo a > /workspace/w/f; echo b >> /workspace/w/f; mkdir /workspace/w/d")
        # a new directory is watched by the time it is reported
        evs = collect(w, lambda e: e.kind == wr.WatchEventKind.CREATED and
                      e.path == "/workspace/w/d")
        sh(sb, "echo c > /workspace/w/d/g; mv /workspace/w/f /workspace/w/f2; "
               "rm /workspace/w/f2 /workspace/w/d/g")
        evs += collect(w, lambda e: e.kind == wr.WatchEventKind.DELETED and
                       e.path == "/workspace/w/d/g")
    kinds = [(e.kind.value, e.path) for e in evs]
    for want in [("CREATED", "/workspace/w/f"), ("MODIFIED", "/workspace/w/f"),
                 ("CREATED", "/workspace/w/d"), ("CREATED", "/workspace/w/d/g"),
                 ("MOVED_FROM", "/workspace/w/f"), ("MOVED_TO", "/workspace/w/f2"),
                 ("DELETED", "/workspace/w/f2"), ("DELETED", "/workspace/w/d/g")]:
        assert want in kinds, (want, kinds)
    mf = [e for e in evs if e.kind == wr.WatchEventKind.MOVED_FROM][0]
    mt = [e for e in evs if e.kind == wr.WatchEventKind.MOVED_TO][0]
    assert mf.cookie == mt.cookie != 0


def test_watch_reports_writes_made_through_the_api_and_ends_with_the_dir(sb):
    sh(sb, "mkdir -p /workspace/w2")
    w = sb.files.watch("/workspace/w2")
    sb.files.write("/workspace/w2/api.txt", b"x")
    evs = collect(w, lambda e: e.kind == wr.WatchEventKind.MOVED_TO)
    assert ("MOVED_TO", "/workspace/w2/api.txt") in [(e.kind.value, e.path) for e in evs]
    sh(sb, "rm -rf /workspace/w2")
    rest = collect(w, lambda e: False, timeout=10)
    assert w.next_event(timeout=1) is None  # the stream ended
    assert ("DELETED", "/workspace/w2/api.txt") in [(e.kind.value, e.path) for e in rest]


def test_watch_overflow_is_reported(sb):
    """A watcher that does not read: the SDK's queue fills, the stream's
    flow control holds warrend back, warrend stops reading inotify once
    its send queue is full, the kernel's queue overflows, and OVERFLOW
    arrives in order."""
    sh(sb, "mkdir -p /workspace/of")
    w = sb.files.watch("/workspace/of")
    # 30000 files made and removed (90000 events with long names) while
    # nobody reads
    long = "x" * 120
    names = " ".join("%s$i-%d" % (c, k) for c in "abcdefghij" for k in range(10))
    sh(sb, "cd /workspace/of && i=0; while [ $i -lt 300 ]; do "
           "for n in %s; do : > $n-%s; done; rm -f *; i=$((i+1)); done" % (names, long))
    time.sleep(0.5)
    evs = collect(w, lambda e: e.kind == wr.WatchEventKind.OVERFLOW, timeout=60)
    w.close()
    assert any(e.kind == wr.WatchEventKind.OVERFLOW for e in evs), len(evs)
    # and the watch goes on after it
    assert all(e.path.startswith("/workspace/of/") for e in evs
               if e.kind != wr.WatchEventKind.OVERFLOW)


def test_watch_ends_with_the_sandbox(client):
    s = client.create(image=IMAGE)
    w = s.files.watch("/tmp", recursive=True)
    s.terminate()
    t0 = time.monotonic()
    while w.next_event(timeout=20) is not None:  # None: ended (or 20 s passed)
        pass
    assert time.monotonic() - t0 < 15


def test_watch_refuses_proc(sb):
    assert status_of(lambda: sb.files.watch("/proc")) == Status.FAILED_PRECONDITION
    assert status_of(lambda: sb.files.watch("/workspace/none")) == Status.NOT_FOUND


# ---- hostile paths: nothing outside the sandbox is read or written ----

def test_hostile_dotdot_read(sb, canary):
    for p in ("/../../../../.." + canary.secret, "/workspace/../../../.." + canary.secret,
              "../../../../../../.." + canary.secret):
        assert status_of(lambda: sb.files.read(p)) == Status.NOT_FOUND


def test_hostile_dotdot_write(sb, canary):
    sb.files.write("/../../../.." + canary.dir + "/new", b"x")
    # it landed inside the sandbox, at the path as the sandbox sees it
    assert sh(sb, "cat %s/new" % canary.dir) == "x"


def test_hostile_absolute_symlink_read(sb, canary):
    sh(sb, "ln -s %s /workspace/out" % canary.secret)
    assert status_of(lambda: sb.files.read("/workspace/out")) == Status.NOT_FOUND


def test_hostile_relative_symlink_read(sb, canary):
    sh(sb, "ln -s ../../../../../../../..%s /workspace/rel" % canary.secret)
    assert status_of(lambda: sb.files.read("/workspace/rel")) == Status.NOT_FOUND


def test_hostile_symlink_to_etc_reads_the_sandboxs_own(sb, canary):
    sh(sb, "ln -s /etc/hostname /workspace/h")
    data = sb.files.read("/workspace/h")
    assert data == sb.files.read("/etc/hostname")
    assert data.strip() != open("/etc/hostname", "rb").read().strip()


def test_hostile_symlinked_parent_dir_read(sb, canary):
    sh(sb, "ln -s / /workspace/root && ln -s %s /workspace/cdir" % canary.dir)
    assert status_of(lambda: sb.files.read("/workspace/root" + canary.secret)) == \
        Status.NOT_FOUND
    assert status_of(lambda: sb.files.read("/workspace/cdir/secret")) == Status.NOT_FOUND


def test_hostile_symlinked_parent_dir_write(sb, canary):
    sh(sb, "mkdir -p %s && ln -s %s /workspace/cdir" % (canary.dir, canary.dir))
    sb.files.write("/workspace/cdir/new-file", b"inside")
    assert sh(sb, "cat %s/new-file" % canary.dir) == "inside"


def test_hostile_symlink_leaf_write_replaces_the_link(sb, canary):
    sh(sb, "ln -s %s /workspace/wl" % canary.secret)
    st = sb.files.write("/workspace/wl", b"replaced")
    assert st.kind == FileKind.FILE
    assert sh(sb, "cat /workspace/wl; [ -L /workspace/wl ] || echo notlink") == "replacednotlink\n"


def test_hostile_remove_through_symlinked_parent(sb, canary):
    sh(sb, "ln -s %s /workspace/rp" % canary.dir)
    assert status_of(lambda: sb.files.remove("/workspace/rp/secret")) == Status.NOT_FOUND
    assert status_of(lambda: sb.files.remove("/workspace/rp/sub", recursive=True)) == \
        Status.NOT_FOUND


def test_hostile_remove_recursive_does_not_follow_links(sb, canary):
    sh(sb, "mkdir -p /workspace/tree/d %s && echo s > %s/keep && "
           "ln -s %s /workspace/tree/hostlink && ln -s / /workspace/tree/d/rootlink"
           % (canary.dir, canary.dir, canary.dir))
    sb.files.remove("/workspace/tree", recursive=True)
    assert sh(sb, "cat %s/keep; ls /bin/sh" % canary.dir) == "s\n/bin/sh\n"


def test_hostile_rename_through_symlinks(sb, canary):
    sh(sb, "echo v > /workspace/v && ln -s %s /workspace/rl" % canary.dir)
    assert status_of(lambda: sb.files.rename("/workspace/v", "/workspace/rl/v")) == \
        Status.NOT_FOUND
    assert status_of(lambda: sb.files.rename("/workspace/rl/secret", "/workspace/got")) == \
        Status.NOT_FOUND


def test_hostile_mkdir_through_symlink(sb, canary):
    sh(sb, "ln -s %s /workspace/ml" % canary.dir)
    assert status_of(lambda: sb.files.mkdir("/workspace/ml/newdir")) == Status.NOT_FOUND
    assert status_of(lambda: sb.files.mkdir("/workspace/ml/newdir", parents=True)) == \
        Status.NOT_FOUND
    sh(sb, "mkdir -p %s" % canary.dir)
    sb.files.mkdir("/workspace/ml/newdir", parents=True)
    assert sh(sb, "[ -d %s/newdir ] && echo yes" % canary.dir) == "yes\n"


def test_hostile_list_symlink_to_root_lists_the_sandbox(sb, canary):
    sh(sb, "touch /only-in-sandbox-%s && ln -s / /workspace/lr" % canary.tag)
    names = [e.path for e in sb.files.list("/workspace/lr")]
    assert "/workspace/lr/only-in-sandbox-" + canary.tag in names
    assert "/workspace/lr/" + os.path.basename(canary.dir) not in names
    assert status_of(lambda: sb.files.list(canary.dir)) == Status.NOT_FOUND


def test_hostile_recursive_list_does_not_follow_symlinks(sb, canary):
    sh(sb, "mkdir -p /workspace/lt && ln -s / /workspace/lt/up && ln -s %s /workspace/lt/c"
       % canary.dir)
    tree = sb.files.list("/workspace/lt", recursive=True)
    assert [(e.path, e.kind) for e in tree] == [("/workspace/lt/c", FileKind.SYMLINK),
                                                ("/workspace/lt/up", FileKind.SYMLINK)]


def test_hostile_stat_symlink_is_not_followed(sb, canary):
    sh(sb, "ln -s %s /workspace/sl" % canary.secret)
    st = sb.files.stat("/workspace/sl")
    assert st.kind == FileKind.SYMLINK and st.symlink_target == canary.secret
    assert st.size_bytes == len(canary.secret)


def test_hostile_symlink_loop(sb, canary):
    sh(sb, "ln -s /workspace/b /workspace/a && ln -s /workspace/a /workspace/b")
    e = error_of(lambda: sb.files.read("/workspace/a"))
    assert e.status == Status.FAILED_PRECONDITION and "symlinks" in e.message


def test_hostile_proc_paths_refused(sb, canary):
    for p in ("/proc/1/environ", "/proc/self/environ", "/proc/1/root/etc/hostname",
              "/proc/1/cwd/x", "/proc/kcore", "/proc/1/mem", "/proc/sys/kernel/hostname"):
        e = error_of(lambda: sb.files.read(p))
        assert e.status in (Status.FAILED_PRECONDITION, Status.NOT_FOUND), (p, e)
    e = error_of(lambda: sb.files.write("/proc/sys/kernel/hostname", b"pwned"))
    assert e.status == Status.FAILED_PRECONDITION and "proc" in e.message
    assert status_of(lambda: sb.files.list("/proc")) == Status.FAILED_PRECONDITION
    assert status_of(lambda: sb.files.stat("/proc/1/environ")) == Status.FAILED_PRECONDITION
    assert status_of(lambda: sb.files.mkdir("/proc/x")) == Status.FAILED_PRECONDITION
    assert status_of(lambda: sb.files.remove("/proc/1/environ")) == Status.FAILED_PRECONDITION


def test_hostile_symlink_into_proc_refused(sb, canary):
    sh(sb, "ln -s /proc/1/environ /workspace/pe && ln -s /proc/self/root /workspace/pr")
    assert status_of(lambda: sb.files.read("/workspace/pe")) == Status.FAILED_PRECONDITION
    e = error_of(lambda: sb.files.read("/workspace/pr" + canary.secret))
    assert e.status in (Status.FAILED_PRECONDITION, Status.NOT_FOUND)


def test_hostile_sys_paths_refused(sb, canary):
    for p in ("/sys/kernel/hostname", "/sys/fs/cgroup/cgroup.procs"):
        e = error_of(lambda: sb.files.read(p))
        assert e.status in (Status.FAILED_PRECONDITION, Status.NOT_FOUND), (p, e)
    assert status_of(lambda: sb.files.list("/sys")) == Status.FAILED_PRECONDITION
    assert status_of(lambda: sb.files.write("/sys/kernel/x", b"1")) == \
        Status.FAILED_PRECONDITION
    # a recursive listing of / lists /proc and /sys but does not enter them
    paths = [e.path for e in sb.files.list("/", recursive=True, max_depth=3)]
    assert "/proc" in paths and "/sys" in paths
    assert not [p for p in paths if p.startswith(("/proc/", "/sys/"))]


def test_hostile_device_files_refused(sb, canary):
    for p in ("/dev/zero", "/dev/null", "/dev/urandom", "/dev/tty", "/dev/ptmx", "/dev/pts/ptmx"):
        t0 = time.monotonic()
        e = error_of(lambda: sb.files.read(p))
        assert e.status in (Status.FAILED_PRECONDITION, Status.NOT_FOUND), (p, e)
        assert time.monotonic() - t0 < 5
    e = error_of(lambda: sb.files.write("/dev/null", b"x"))
    assert e.status == Status.FAILED_PRECONDITION
    # nodes planted in the sandbox's layer (as an image or a mount could
    # bring them): a block device and a char device, never opened
    upper = planted_dir(sb)
    os.mknod(os.path.join(upper, "blk"), 0o600 | stat.S_IFBLK, os.makedev(7, 0))
    os.mknod(os.path.join(upper, "chr"), 0o666 | stat.S_IFCHR, os.makedev(1, 5))
    for name in ("blk", "chr"):
        e = error_of(lambda: sb.files.read("/workspace/" + name))
        assert e.status == Status.FAILED_PRECONDITION and "not a regular file" in e.message
        assert sb.files.stat("/workspace/" + name).kind == FileKind.OTHER
        assert status_of(lambda: sb.files.write("/workspace/" + name, b"x")) == \
            Status.FAILED_PRECONDITION


def planted_dir(sb):
    """The host dir behind the sandbox's /workspace in its writable layer
    (made by the sandbox first, so the overlay shows what is planted)."""
    sh(sb, "mkdir -p /workspace && touch /workspace/.marker")
    import glob
    for p in glob.glob("/tmp/warren-e2e-*/state/sandboxes/%s/upper*/workspace/.marker" % sb.id) + \
            glob.glob("/tmp/warren-e2e-*/state/sandboxes/%s/upper/u/workspace/.marker" % sb.id):
        return os.path.dirname(p)
    pytest.skip("the sandbox's upper dir is not on the host's file system")


def test_hostile_fifo_never_blocks(sb, canary):
    sh(sb, "mkfifo /workspace/pipe")
    t0 = time.monotonic()
    e = error_of(lambda: sb.files.read("/workspace/pipe"))
    assert e.status == Status.FAILED_PRECONDITION
    e = error_of(lambda: sb.files.write("/workspace/pipe", b"x"))
    assert e.status == Status.FAILED_PRECONDITION
    assert time.monotonic() - t0 < 5
    # a symlink to the FIFO, too
    sh(sb, "ln -s /workspace/pipe /workspace/pl")
    assert status_of(lambda: sb.files.read("/workspace/pl")) == Status.FAILED_PRECONDITION
    assert sb.files.stat("/workspace/pipe").kind == FileKind.OTHER


def test_hostile_socket_refused(sb, canary):
    upper = planted_dir(sb)
    s = socket.socket(socket.AF_UNIX)
    try:
        s.bind(os.path.join(upper, "sock"))
        s.listen(1)
        s.settimeout(0.5)
        e = error_of(lambda: sb.files.read("/workspace/sock"))
        assert e.status == Status.FAILED_PRECONDITION
        with pytest.raises(socket.timeout):
            s.accept()  # nobody connected
    finally:
        s.close()


def test_hostile_long_paths(sb, canary):
    assert status_of(lambda: sb.files.read("/" + "a" * 5000)) == Status.INVALID_ARGUMENT
    assert status_of(lambda: sb.files.read("/workspace/" + "b" * 256)) == Status.INVALID_ARGUMENT
    deep = "/workspace" + "/d" * 1000 + "/f"
    assert len(deep) < 4096
    sb.files.write(deep, b"deep")
    assert sb.files.read(deep) == b"deep"
    # a relative path that is too long once joined
    assert status_of(lambda: sb.files.read("x" * 200 + "/y" * 1947)) == \
        Status.INVALID_ARGUMENT


def test_hostile_symlink_growing_path_past_limits(sb, canary):
    sh(sb, "cd /workspace && ln -s %s l1 && ln -s l1/%s l2" % ("a" * 200, "b" * 200))
    assert status_of(lambda: sb.files.read("/workspace/l2/x")) in (Status.NOT_FOUND,
                                                                   Status.INVALID_ARGUMENT)


def test_hostile_nul_bytes(sb, canary):
    for p in (b"/workspace/a\x00b", b"\x00", b"/etc/hostname\x00" + canary.secret.encode()):
        assert status_of(lambda: sb.files.read(p)) == Status.INVALID_ARGUMENT
        assert status_of(lambda: sb.files.write(p, b"x")) == Status.INVALID_ARGUMENT


def test_hostile_non_utf8_names(sb, canary):
    name = b"/workspace/\xff\xfe-\xc3(.bin"
    sb.files.write(name, b"bytes")
    assert sb.files.read(name) == b"bytes"
    listed = [e.path for e in sb.files.list("/workspace")]
    assert name.decode("utf-8", "surrogateescape") in listed
    assert sb.exec("sh", "-c", "cat /workspace/*.bin").stdout_text == "bytes"


def race(sb, script, seconds=3.0):
    """Run script in a loop in the sandbox while the caller hammers it."""
    p = sb.exec_start("sh", "-c", "while :; do %s; done" % script)
    time.sleep(0.2)
    return p


def test_hostile_symlink_swap_race_during_read(sb, canary):
    sh(sb, "echo SANDBOX > /workspace/f0")
    p = race(sb, "rm -f /workspace/race; cp /workspace/f0 /workspace/race; usleep 2000; "
                 "ln -sfn %s /workspace/race; ln -sfn / /workspace/race"
             % canary.secret)
    seen = set()
    try:
        deadline = time.monotonic() + 4
        while time.monotonic() < deadline:
            try:
                data = sb.files.read("/workspace/race")
                never_host(data, canary)
                seen.add(data)
            except WarrenError as e:
                seen.add(e.status)
    finally:
        p.send_signal("SIGKILL")
    assert b"SANDBOX\n" in seen


def test_hostile_parent_swap_race_during_read_and_write(sb, canary):
    sh(sb, "mkdir -p /workspace/real && echo SANDBOX > /workspace/real/secret && "
           "mkdir -p %s" % canary.dir)
    p = race(sb, "ln -sfn %s /workspace/pd; ln -sfn /workspace/real /workspace/pd; usleep 1000; "
                 "ln -sfn / /workspace/pd" % canary.dir)
    ok = 0
    try:
        deadline = time.monotonic() + 4
        i = 0
        while time.monotonic() < deadline:
            i += 1
            try:
                data = sb.files.read("/workspace/pd/secret")
                never_host(data, canary)
                ok += 1
            except WarrenError:
                pass
            try:
                sb.files.write("/workspace/pd/w%d" % i, b"W")
            except WarrenError:
                pass
    finally:
        p.send_signal("SIGKILL")
    assert ok > 0


def test_hostile_swap_race_during_streaming_write(sb, canary):
    """The target dir is swapped for a symlink to the host path while a
    big write streams: the temp file and the rename stay in the directory
    opened at the start."""
    sh(sb, "mkdir -p /workspace/sw %s" % canary.dir)
    p = race(sb, "mv -fT /workspace/sw /workspace/sw.d; ln -sfn %s /workspace/sw; "
                 "rm -f /workspace/sw; mv -fT /workspace/sw.d /workspace/sw" % canary.dir)
    try:
        gen, _ = sha_blocks(32, b"race")
        for i in range(5):
            try:
                sb.files.write("/workspace/sw/big%d" % i, gen())
            except WarrenError:
                pass
    finally:
        p.send_signal("SIGKILL")


def test_hostile_cli_cp_and_files(sb, d, canary, tmp_path):
    sh(sb, "ln -s %s /workspace/cl" % canary.secret)
    r = cli(d, "files", "cat", sb.id + ":/workspace/cl")
    assert r.returncode != 0 and b"HOST-SECRET" not in r.stdout
    out = tmp_path / "o"
    # a symlink is copied as a symlink (its target as text), never read
    r = cli(d, "cp", sb.id + ":/workspace/cl", str(out))
    assert r.returncode == 0 and os.path.islink(out)
    assert os.readlink(out) == canary.secret
    r = cli(d, "cp", sb.id + ":/workspace/cl", "-")
    assert r.returncode != 0 and b"HOST-SECRET" not in r.stdout


# ---- CLI ----

def cli(d, *args, input=None):
    import subprocess
    return subprocess.run([WARREN_CLI, "--addr", d.unix_addr, *args], input=input,
                          capture_output=True, timeout=120)


def test_cli_files_ls_cat_rm(sb, d):
    sb.files.write("/workspace/c/a.txt", b"alpha\n")
    sb.files.write("/workspace/c/b.txt", b"beta\n")
    r = cli(d, "files", "cat", sb.id + ":/workspace/c/a.txt")
    assert r.returncode == 0 and r.stdout == b"alpha\n"
    r = cli(d, "files", "ls", sb.id + ":/workspace/c")
    assert r.returncode == 0, r.stderr
    assert b"a.txt" in r.stdout and b"b.txt" in r.stdout
    r = cli(d, "files", "rm", sb.id + ":/workspace/c/a.txt")
    assert r.returncode == 0, r.stderr
    assert not sb.files.exists("/workspace/c/a.txt")
    r = cli(d, "files", "cat", sb.id + ":/workspace/c/a.txt")
    assert r.returncode == 1 and b"NOT_FOUND" in r.stderr
    r = cli(d, "files", "rm", "-r", sb.id + ":/workspace/c")
    assert r.returncode == 0 and not sb.files.exists("/workspace/c")


def test_cli_cp_both_directions_files_and_trees(sb, d, tmp_path):
    src = tmp_path / "src"
    (src / "sub" / "deep").mkdir(parents=True)
    (src / "a.txt").write_bytes(b"A" * 1000)
    (src / "sub" / "b.bin").write_bytes(os.urandom(300_000))
    (src / "sub" / "deep" / "c").write_bytes(b"")
    os.chmod(src / "a.txt", 0o751)
    os.symlink("a.txt", src / "link")
    r = cli(d, "cp", str(src / "a.txt"), sb.id + ":/workspace/one.txt")
    assert r.returncode == 0, r.stderr
    assert sb.files.read("/workspace/one.txt") == b"A" * 1000
    assert sb.files.stat("/workspace/one.txt").mode == 0o751
    r = cli(d, "cp", str(src), sb.id + ":/workspace/tree")
    assert r.returncode == 0, r.stderr
    assert sb.files.read("/workspace/tree/sub/b.bin") == (src / "sub" / "b.bin").read_bytes()
    assert sb.files.stat("/workspace/tree/link").symlink_target == "a.txt"
    assert sb.files.stat("/workspace/tree/sub/deep/c").size_bytes == 0
    back = tmp_path / "back"
    r = cli(d, "cp", sb.id + ":/workspace/tree", str(back))
    assert r.returncode == 0, r.stderr
    for rel in ("a.txt", "sub/b.bin", "sub/deep/c"):
        assert (back / rel).read_bytes() == (src / rel).read_bytes()
    assert os.readlink(back / "link") == "a.txt"
    assert (os.stat(back / "a.txt").st_mode & 0o777) == 0o751
    r = cli(d, "cp", sb.id + ":/workspace/one.txt", "-")
    assert r.returncode == 0 and r.stdout == b"A" * 1000
    r = cli(d, "cp", "-", sb.id + ":/workspace/stdin.txt", input=b"from stdin")
    assert r.returncode == 0 and sb.files.read("/workspace/stdin.txt") == b"from stdin"
    r = cli(d, "cp", str(src), str(back))
    assert r.returncode == 2  # neither side in a sandbox
