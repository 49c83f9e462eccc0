"""FILE_OPEN (src/init/ctl-proto.h): warren-init opens a path of its own root
for the daemon (phase 4a of privilege separation, docs/privsep.md). init
runs chrooted into a temp dir here, so that "its root" and "the host's" differ
and an escape would show."""
import errno
import os
import shutil
import stat
import tempfile
import time

import pytest

from initctl import (EXITED, FILE_OPEN_T, FILE_OPENED, FO_CREATE, FO_DIRECTORY, FO_EXCL,
                     FO_NOFOLLOW, FO_OWNER, FO_PATH, FO_RDWR, FO_READ, FO_TRUNC, FO_WRITE, FOPEN,
                     HDR, MAGIC, PING_T, PONG, RESULT, Init, encode_file_open)


@pytest.fixture
def rooted():
    base = tempfile.mkdtemp(prefix="warren-init-files-")
    root = os.path.join(base, "root")
    os.mkdir(root)
    with open(os.path.join(base, "outside"), "w") as f:
        f.write("HOST")
    i = Init("pid1", root=root)
    i.root, i.base = root, base
    yield i
    i.stop()
    shutil.rmtree(base, ignore_errors=True)


def fopen(c, id_, path, flags, mode=0, uid=0, gid=0):
    c.send_raw(encode_file_open(id_, path, flags, mode, uid, gid))
    m = c.wait(FILE_OPENED, id_)
    assert (m.err == 0) == (len(m.fds) == 1), m
    return m.err, (m.fds[0] if m.fds else None)


def same_file(fd, path):
    a, b = os.fstat(fd), os.stat(path)
    return (a.st_dev, a.st_ino) == (b.st_dev, b.st_ino)


def test_root_is_inits_root(rooted):
    c = rooted.connect()
    err, fd = fopen(c, 1, "/", FO_PATH | FO_DIRECTORY)
    assert err == 0 and same_file(fd, rooted.root)
    os.close(fd)


def test_symlinks_and_dotdot_stay_inside(rooted):
    r = rooted.root
    os.symlink("/", os.path.join(r, "abs"))
    os.symlink("../../..", os.path.join(r, "rel"))
    os.symlink(os.path.join(rooted.base, "outside"), os.path.join(r, "hostpath"))
    c = rooted.connect()
    for i, p in enumerate(["/abs", "/rel", "/..", "/../..", "/abs/../rel/.."]):
        err, fd = fopen(c, 10 + i, p, FO_PATH | FO_DIRECTORY)
        assert err == 0 and same_file(fd, r), p
        os.close(fd)
    # the host's file next to the root is not reachable by any spelling
    for i, p in enumerate(["/../outside", "/rel/outside", "/hostpath"]):
        assert fopen(c, 20 + i, p, FO_READ)[0] == errno.ENOENT, p
    # magic links (/proc/<pid>/root, fd links) are refused
    assert fopen(c, 30, "/proc/self/root", FO_PATH)[0] == errno.ELOOP
    assert fopen(c, 31, "/proc/1/root/warren-init", FO_READ)[0] == errno.ELOOP


def test_read_write_through_the_fd(rooted):
    with open(os.path.join(rooted.root, "f"), "w") as f:
        f.write("inside")
    c = rooted.connect()
    err, fd = fopen(c, 1, "/f", FO_READ)
    assert err == 0 and os.read(fd, 100) == b"inside"
    assert os.get_blocking(fd)  # init cleared its O_NONBLOCK
    os.close(fd)
    err, fd = fopen(c, 2, "/f", FO_WRITE | FO_TRUNC)
    assert err == 0 and os.write(fd, b"new") == 3
    os.close(fd)
    assert open(os.path.join(rooted.root, "f")).read() == "new"
    # a directory opens for reading (a listing), as O_PATH too
    err, fd = fopen(c, 3, "/", FO_READ | FO_DIRECTORY)
    assert err == 0 and stat.S_ISDIR(os.fstat(fd).st_mode)
    os.close(fd)
    assert fopen(c, 4, "/f", FO_READ | FO_DIRECTORY)[0] == errno.ENOTDIR
    assert fopen(c, 5, "/missing", FO_READ)[0] == errno.ENOENT


def test_create_owned_exact_mode(rooted):
    c = rooted.connect()
    flags = FO_WRITE | FO_CREATE | FO_EXCL | FO_OWNER
    err, fd = fopen(c, 1, "/new", flags, 0o640, 1234, 5678)
    assert err == 0
    os.write(fd, b"x")
    os.close(fd)
    st = os.stat(os.path.join(rooted.root, "new"))
    assert (st.st_uid, st.st_gid, stat.S_IMODE(st.st_mode)) == (1234, 5678, 0o640)
    # exact mode, no umask; without OWNER init's own ids
    err, fd = fopen(c, 2, "/new2", FO_RDWR | FO_CREATE | FO_EXCL, 0o666)
    assert err == 0
    os.close(fd)
    st = os.stat(os.path.join(rooted.root, "new2"))
    assert (st.st_uid, stat.S_IMODE(st.st_mode)) == (0, 0o666)
    assert fopen(c, 3, "/new", flags, 0o640, 1, 1)[0] == errno.EEXIST
    # a dangling symlink is not followed out to create a file
    os.symlink("/../made-outside", os.path.join(rooted.root, "dangle"))
    err, fd = fopen(c, 4, "/dangle", FO_WRITE | FO_CREATE | FO_EXCL, 0o600)
    assert err == errno.EEXIST
    assert not os.path.exists(os.path.join(rooted.base, "made-outside"))


def test_fifo_and_devices_refused_without_blocking(rooted):
    os.mkfifo(os.path.join(rooted.root, "fifo"))
    c = rooted.connect()
    t = time.monotonic()
    assert fopen(c, 1, "/fifo", FO_READ)[0] == errno.EINVAL
    assert fopen(c, 2, "/fifo", FO_WRITE)[0] in (errno.EINVAL, errno.ENXIO)
    assert time.monotonic() - t < 2
    # O_PATH opens have no effect: allowed (the daemon checks the type)
    err, fd = fopen(c, 3, "/fifo", FO_PATH)
    assert err == 0 and stat.S_ISFIFO(os.fstat(fd).st_mode)
    os.close(fd)
    # init still serves
    c.send(PING_T, 4)
    assert c.wait(PONG, 4)
    os.symlink("/fifo", os.path.join(rooted.root, "lnk"))
    assert fopen(c, 5, "/lnk", FO_PATH | FO_NOFOLLOW)[0] == 0


def raw(c, id_, flags, mode=0, uid=0, gid=0, path=b"/x\0", path_len=None, reserved=0, fds=()):
    c.send_raw(encode_file_open(id_, path, flags, mode, uid, gid, path_len, reserved), fds)
    return c.wait(RESULT, id_).err


@pytest.mark.parametrize("case", [
    dict(flags=0),
    dict(flags=FO_READ | FO_WRITE),
    dict(flags=FO_PATH | FO_READ),
    dict(flags=1 << 10 | FO_READ),
    dict(flags=FO_PATH | FO_TRUNC),
    dict(flags=FO_PATH | FO_CREATE | FO_EXCL),
    dict(flags=FO_READ | FO_CREATE | FO_EXCL),
    dict(flags=FO_WRITE | FO_CREATE),
    dict(flags=FO_WRITE | FO_EXCL),
    dict(flags=FO_READ | FO_TRUNC),
    dict(flags=FO_WRITE | FO_OWNER),
    dict(flags=FO_WRITE | FO_CREATE | FO_EXCL | FO_DIRECTORY),
    dict(flags=FO_WRITE | FO_CREATE | FO_EXCL, mode=0o10000),
    dict(flags=FO_READ, mode=0o644),
    dict(flags=FO_READ, uid=1),
    dict(flags=FO_WRITE | FO_CREATE | FO_EXCL | FO_OWNER, uid=0xFFFFFFFF),
    dict(flags=FO_WRITE | FO_CREATE | FO_EXCL | FO_OWNER, gid=0xFFFFFFFF),
    dict(flags=FO_READ, path=b"x\0"),
    dict(flags=FO_READ, path=b"\0"),
    dict(flags=FO_READ, path=b"/x"),
    dict(flags=FO_READ, path=b"/a\0b\0"),
    dict(flags=FO_READ, path_len=2),
    dict(flags=FO_READ, path_len=4),
    dict(flags=FO_READ, reserved=1),
    dict(flags=FO_READ, path=b"/" + b"a" * 4095 + b"\0"),
])
def test_malformed_file_open_refused(rooted, case):
    c = rooted.connect()
    assert raw(c, 7, **case) == errno.EINVAL
    assert not os.path.exists(os.path.join(rooted.root, "x"))


def test_file_open_refuses_fds_and_short_payload(rooted):
    c = rooted.connect()
    r, w = os.pipe()
    assert raw(c, 1, FO_READ, fds=[r]) == errno.EBADF
    os.close(r)
    os.close(w)
    c.send_raw(HDR.pack(MAGIC, FILE_OPEN_T, 8, 0, 2) + b"\0" * 8)
    assert c.wait(RESULT, 2).err == errno.EINVAL
    c.send_raw(HDR.pack(MAGIC, FILE_OPEN_T, FOPEN.size, 0, 3) + FOPEN.pack(FO_READ, 0, 0, 0, 0, 0))
    assert c.wait(RESULT, 3).err == errno.EINVAL


def spawner_and_talker(rooted):
    """A connection that spawned a short sleep (closed by the caller to
    orphan its exit) and a later one that talked (PING)."""
    shutil.copy("/bin/busybox", os.path.join(rooted.root, "busybox"))  # static
    c1 = rooted.connect()
    fds = [os.open("/dev/null", os.O_RDWR) for _ in range(3)]
    assert c1.spawn(1, ["/busybox", "sleep", "0.5"], stdio=fds).err == 0
    for fd in fds:
        os.close(fd)
    talker = rooted.connect()
    talker.send(PING_T, 1)
    talker.wait(PONG, 1)
    return c1, talker


def test_files_connection_gets_no_events(rooted):
    """An exit whose spawner is gone goes to a connection that talked, never
    to one that only sent FILE_OPEN, even a later one."""
    c1, talker = spawner_and_talker(rooted)
    files = rooted.connect()
    assert fopen(files, 1, "/", FO_PATH)[0] == 0
    c1.close()
    assert talker.wait(EXITED, 1, timeout=5).status == 0
    files.s.setblocking(False)
    with pytest.raises(BlockingIOError):
        files.s.recv(65536)


def encode_file_op(id_, type_, path, path2=None, flags=0, mode=0, uid=0, gid=0):
    """FILE_MKDIR .. FILE_LIST (types 11..15): struct ctl_file_op + strings."""
    import struct
    p = path.encode() + b"\0"
    p2 = path2.encode() + b"\0" if path2 is not None else b""
    payload = struct.pack("=IIIIIIQQ", flags, mode, uid, gid, len(p), len(p2), 0, 0) + p + p2
    return HDR.pack(MAGIC, type_, len(payload), 0, id_) + payload


FILE_MKDIR_T, FILE_REMOVE_T, FILE_LIST_T, FILE_LISTED = 11, 12, 15, 0x89


def test_file_ops_connection_gets_no_events(rooted):
    """A connection whose requests were all file requests (here FILE_MKDIR,
    FILE_LIST, FILE_REMOVE: phase 4a-2) is a files connection: an exit
    whose spawner is gone goes to one that talked, never to it."""
    c1, talker = spawner_and_talker(rooted)
    files = rooted.connect()
    files.send_raw(encode_file_op(2, FILE_MKDIR_T, "/made", mode=0o750))
    assert files.wait(RESULT, 2).err == 0
    assert stat.S_IMODE(os.lstat(os.path.join(rooted.root, "made")).st_mode) == 0o750
    files.send_raw(encode_file_op(3, FILE_LIST_T, "/"))
    m = files.wait(FILE_LISTED, 3)
    assert len(m.fds) == 1
    for fd in m.fds:
        os.close(fd)
    files.send_raw(encode_file_op(4, FILE_REMOVE_T, "/made"))
    assert files.wait(RESULT, 4).err == 0
    assert not os.path.exists(os.path.join(rooted.root, "made"))
    c1.close()
    assert talker.wait(EXITED, 1, timeout=5).status == 0
    files.s.setblocking(False)
    with pytest.raises(BlockingIOError):
        files.s.recv(65536)
