"""warren-init against a real kernel, driven over its control socket the way
the daemon drives it (see conftest.py for the harness)."""
import errno
import os
import socket
import signal
import struct
import time

import pytest

from initctl import (EXITED, F_PTY, F_SETSID, HDR, KILL_ALL_T, LIST_REPLY, LIST_T, MAGIC, PING_T,
                      PONG, RESIZE_T, RESULT, SPAWN_T, SPAWNED, encode_spawn)
from initctl import (F_HOLD, FD_PTY, FD_STDERR, FD_STDIN, FD_STDOUT, HOLD_EXITED, HOLD_STDIN,
                     HOLDS_T, REL_ALL, REL_STDIN, RELEASE_T, TAKE_T)

PATH_ENV = ["PATH=/usr/local/bin:/usr/bin:/bin"]


@pytest.mark.parametrize("code", [0, 1, 255])
def test_exit_code_and_output(ctl, code):
    st, out, err = ctl.run(1, ["sh", "-c", f"echo out; echo err >&2; exit {code}"], env=PATH_ENV)
    assert os.WIFEXITED(st) and os.WEXITSTATUS(st) == code
    assert out == b"out\n" and err == b"err\n"


def test_death_by_signal(ctl):
    st, _, _ = ctl.run(1, ["sh", "-c", "kill -TERM $$; sleep 5"])
    assert os.WIFSIGNALED(st) and os.WTERMSIG(st) == signal.SIGTERM


def test_stdin_delivered_then_eof(ctl):
    data = os.urandom(200_000)
    st, out, _ = ctl.run(1, ["cat"], stdin=data)
    assert st == 0 and out == data
    st, out, _ = ctl.run(2, ["wc", "-c"])  # no stdin at all: EOF at once
    assert st == 0 and out.strip() == b"0"


def test_exec_errors_reported_in_spawned(init, ctl):
    def spawn_err(id_, argv, **kw):
        fds = [os.open("/dev/null", os.O_RDWR) for _ in range(3)]
        try:
            return ctl.spawn(id_, argv, stdio=fds, **kw).err
        finally:
            for fd in fds:
                os.close(fd)

    assert spawn_err(1, ["/no/such/binary"]) == errno.ENOENT
    assert spawn_err(2, ["no-such-command-xyz"]) == errno.ENOENT
    assert spawn_err(3, ["/etc/passwd"]) == errno.EACCES
    assert spawn_err(4, ["true"], cwd="/no/such/dir") == errno.ENOENT
    # Failed spawns leave no process, no zombie and no EXITED event.
    assert init.wait_no_children()
    ok = spawn_err(5, ["true"])
    assert ok == 0
    ex = ctl.wait(EXITED, 5)
    assert ex.status == 0
    assert all(m.type != EXITED or m.id == 5 for m in ctl.backlog)


def test_cwd_uid_env_and_default_path(ctl):
    st, out, err = ctl.run(1, ["sh", "-c", 'id -u; id -g; pwd; echo "$FOO"'],
                           env=["FOO=bar baz"], cwd="tmp", uid=65534, gid=65534)
    assert st == 0, err
    assert out.decode().split("\n")[:4] == ["65534", "65534", "/tmp", "bar baz"]
    # The environment is exactly the request's: `env` found via the default PATH.
    st, out, _ = ctl.run(2, ["env"], env=["A=1", "B=two words"])
    assert st == 0 and out == b"A=1\nB=two words\n"
    # PATH from the request env is the one searched.
    with pytest.raises(OSError) as ei:
        ctl.run(4, ["ls"], env=["PATH=/nonexistent:/also/not"])
    assert ei.value.errno == errno.ENOENT


def test_only_stdio_fds_inherited(ctl):
    st, out, _ = ctl.run(1, ["sh", "-c", "ls /proc/$$/fd"])
    assert st == 0
    assert sorted(int(x) for x in out.split()) == [0, 1, 2]


def test_100_concurrent_spawns(ctl):
    n = 100
    pipes = []
    for i in range(n):
        r, w = os.pipe()
        ctl.send_raw(encode_spawn(1000 + i, ["sh", "-c", 'sleep 0.2; echo "$0"', str(i)]),
                     [os.open("/dev/null", os.O_RDONLY), w, w])
        pipes.append(r)
        os.close(w)
    # The fds sent were duplicated into init; our copies of /dev/null leak only
    # until the test ends, which is fine.
    pids = set()
    for i in range(n):
        m = ctl.wait(SPAWNED, 1000 + i)
        assert m.err == 0 and m.pid > 0
        pids.add(m.pid)
    assert len(pids) == n
    for i in range(n):
        assert ctl.wait(EXITED, 1000 + i).status == 0
        out = b""
        while True:
            b = os.read(pipes[i], 100)
            if not b:
                break
            out += b
        os.close(pipes[i])
        assert out == f"{i}\n".encode()


def test_orphaned_grandchildren_reaped(init, ctl):
    # The shell exits at once; its two children are orphaned to init, which
    # must reap them (no zombies) without reporting them as execs.
    st, out, _ = ctl.run(1, ["sh", "-c", "(sleep 1; exit 3) >/dev/null 2>&1 &"
                                   " sleep 1 >/dev/null 2>&1 & echo started"])
    assert st == 0 and out == b"started\n"
    assert len(init.children()) == 2  # the orphans, now children of init
    assert init.wait_no_children(5), "orphans not reaped"
    for pid in init.children():
        with open(f"/proc/{pid}/stat") as f:
            assert f.read().split(")")[1].split()[0] != "Z"
    with pytest.raises(TimeoutError):
        ctl.recv(timeout=0.3)  # no EXITED for processes init did not spawn


def test_group_signal_kills_tree(init, ctl):
    fds = [os.open("/dev/null", os.O_RDWR) for _ in range(3)]
    m = ctl.spawn(1, ["sh", "-c", "sleep 100 & sleep 100"], stdio=fds)
    for fd in fds:
        os.close(fd)
    assert m.err == 0
    time.sleep(0.2)
    assert len(init.children()) == 1  # the shell; the sleeps are below it
    assert ctl.signal(50, signal.SIGKILL, target_id=1, group=True) == 0
    ex = ctl.wait(EXITED, 1)
    assert os.WIFSIGNALED(ex.status) and os.WTERMSIG(ex.status) == signal.SIGKILL
    assert init.wait_no_children(5), "background sleep survived the group signal"


def test_signal_errors(ctl):
    assert ctl.signal(1, signal.SIGTERM, target_id=12345) == errno.ESRCH
    ctl.send(2, 2, struct.pack("=QiiII", 0, 0, 99, 0, 0))  # bad signal number
    assert ctl.wait(RESULT, 2).err == errno.EINVAL


def test_kill_all(init, ctl):
    fds = [os.open("/dev/null", os.O_RDWR) for _ in range(3)]
    ctl.spawn(1, ["sh", "-c", "sleep 100 & sleep 100 & wait"], stdio=fds)
    ctl.spawn(2, ["sleep", "100"], stdio=fds, flags=F_SETSID)
    for fd in fds:
        os.close(fd)
    time.sleep(0.2)
    ctl.send(KILL_ALL_T, 7, struct.pack("=iI", signal.SIGKILL, 0))
    assert ctl.wait(RESULT, 7).err == 0
    for i in (1, 2):
        assert os.WTERMSIG(ctl.wait(EXITED, i).status) == signal.SIGKILL
    assert init.wait_no_children(5)
    assert init.proc.poll() is None  # init itself survives


def read_pty(fd, until=None, timeout=5):
    import select
    out = b""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        r, _, _ = select.select([fd], [], [], 0.1)
        if not r:
            continue
        try:
            b = os.read(fd, 4096)
        except OSError as e:
            if e.errno == errno.EIO:  # every slave fd closed
                break
            raise
        if not b:
            break
        out += b
        if until and until in out:
            break
    return out


def test_pty_spawn(ctl):
    m = ctl.spawn(1, ["sh", "-c", "tty; stty size; [ -t 0 ] && echo interactive"], flags=F_PTY,
                  cols=123, rows=45, env=PATH_ENV)
    assert m.err == 0 and len(m.fds) == 1
    master = m.fds[0]
    out = read_pty(master).decode()
    os.close(master)
    assert "/dev/pts/" in out
    assert "45 123" in out
    assert "interactive" in out
    assert ctl.wait(EXITED, 1).status == 0


def test_pty_as_other_user_owns_its_tty(ctl):
    m = ctl.spawn(1, ["sh", "-c", 'id -u; stat -c %u "$(tty)"'], flags=F_PTY, uid=65534,
                  gid=65534, env=PATH_ENV)
    assert m.err == 0
    out = read_pty(m.fds[0]).decode().split()
    os.close(m.fds[0])
    assert out == ["65534", "65534"]
    assert ctl.wait(EXITED, 1).status == 0


def test_pty_resize_and_input(ctl):
    m = ctl.spawn(1, ["sh", "-c", "read line; echo got=$line; stty size"], flags=F_PTY,
                  cols=80, rows=24, env=PATH_ENV)
    assert m.err == 0
    master = m.fds[0]
    ctl.send(RESIZE_T, 1, struct.pack("=HHI", 200, 60, 0))
    assert ctl.wait(RESULT, 1).err == 0
    os.write(master, b"hello\n")
    out = read_pty(master, until=b"60 200").decode()
    os.close(master)
    assert "got=hello" in out and "60 200" in out
    assert ctl.wait(EXITED, 1).status == 0
    ctl.send(RESIZE_T, 1, struct.pack("=HHI", 10, 10, 0))  # gone now
    assert ctl.wait(RESULT, 1).err == errno.ESRCH


def test_pty_signal_to_foreground(ctl):
    m = ctl.spawn(1, ["sleep", "100"], flags=F_PTY)
    master = m.fds[0]
    os.write(master, b"\x03")  # ^C from the terminal: SIGINT to the session's group
    ex = ctl.wait(EXITED, 1)
    os.close(master)
    assert os.WIFSIGNALED(ex.status) and os.WTERMSIG(ex.status) == signal.SIGINT


def test_reconnect_and_pending_exits(init):
    c1 = init.connect()
    fds = [os.open("/dev/null", os.O_RDWR) for _ in range(3)]
    assert c1.spawn(1, ["sleep", "0.3"], stdio=fds).err == 0
    assert c1.spawn(2, ["sleep", "100"], stdio=fds).err == 0
    c1.close()
    time.sleep(0.8)  # exec 1 exits while nobody is connected
    c2 = init.connect()
    ex = c2.wait(EXITED, 1)
    assert ex.status == 0
    c2.send(LIST_T, 9)
    lst = c2.wait(LIST_REPLY, 9)
    assert [e[0] for e in lst.entries] == [2]
    # The new connection can spawn and signal what the old one started.
    assert c2.signal(3, signal.SIGTERM, target_id=2) == 0
    assert os.WTERMSIG(c2.wait(EXITED, 2).status) == signal.SIGTERM
    st, out, _ = c2.run(4, ["echo", "again"], stdin=b"")
    assert out == b"again\n"
    for fd in fds:
        os.close(fd)


def test_exit_goes_to_live_connection_when_owner_gone(init):
    c1, c2 = init.connect(), init.connect()
    fds = [os.open("/dev/null", os.O_RDWR) for _ in range(3)]
    assert c1.spawn(1, ["sleep", "0.3"], stdio=fds).err == 0
    for fd in fds:
        os.close(fd)
    c1.close()
    assert c2.wait(EXITED, 1, timeout=5).status == 0


def test_ping(init, ctl):
    ctl.send(PING_T, 77)
    p = ctl.wait(PONG, 77)
    assert p.nconns == 1 and p.nprocs == 0
    assert p.init_pid == (1 if init.mode == "pid1" else init.pid)


def test_malformed_requests_rejected(init, ctl):
    # bad magic
    ctl.send_raw(HDR.pack(0xdeadbeef, PING_T, 0, 0, 5))
    assert ctl.wait(RESULT, 5).err == errno.EBADMSG
    # length field lies
    ctl.send_raw(HDR.pack(MAGIC, PING_T, 4, 0, 6))
    assert ctl.wait(RESULT, 6).err == errno.EBADMSG
    # reserved header field set
    ctl.send_raw(HDR.pack(MAGIC, PING_T, 0, 1, 7))
    assert ctl.wait(RESULT, 7).err == errno.EBADMSG
    # unknown type, and a reply type sent as a request
    ctl.send(0x77, 8)
    assert ctl.wait(RESULT, 8).err == errno.EOPNOTSUPP
    ctl.send(EXITED, 9, b"\0" * 8)
    assert ctl.wait(RESULT, 9).err == errno.EOPNOTSUPP
    # oversized datagram (the daemon side forces its send buffer the same way)
    ctl.s.setsockopt(socket.SOL_SOCKET, 32, 8 << 20)  # SO_SNDBUFFORCE
    big = encode_spawn(10, ["echo", "x" * ((2 << 20) + 10)])
    ctl.send_raw(big)
    assert ctl.wait(SPAWNED, 10).err == errno.EMSGSIZE
    # too short to hold a header
    ctl.send_raw(b"\x01\x02")
    assert ctl.wait(RESULT, 0).err == errno.EBADMSG

    fds = [os.open("/dev/null", os.O_RDWR) for _ in range(3)]

    def spawn_raw(id_, data, f=fds):
        ctl.send_raw(data, f)
        return ctl.wait(SPAWNED, id_).err

    # env entry without NAME=
    assert spawn_raw(11, encode_spawn(11, ["true"], env=["NOEQUALS"])) == errno.EINVAL
    assert spawn_raw(12, encode_spawn(12, ["true"], env=["=x"])) == errno.EINVAL
    # empty argv[0], argc 0
    assert spawn_raw(13, encode_spawn(13, [""])) == errno.EINVAL
    assert spawn_raw(14, encode_spawn(14, [])) == errno.EINVAL
    # strings not NUL-terminated / trailing garbage
    good = encode_spawn(15, ["true"])
    assert spawn_raw(15, _patch_len(good, good[HDR.size + 32:] + b"junk\0")) == errno.EINVAL
    assert spawn_raw(23, _patch_len(encode_spawn(23, ["true"]), b"/\0true")) == errno.EINVAL
    # unknown flags
    assert spawn_raw(16, encode_spawn(16, ["true"], flags=0x80)) == errno.EINVAL
    # wrong number of fds: none, or too many
    assert spawn_raw(17, encode_spawn(17, ["true"]), f=[]) == errno.EBADF
    assert spawn_raw(18, encode_spawn(18, ["true"]), f=fds + fds[:1]) == errno.EBADF
    # PTY spawn must not carry fds
    assert spawn_raw(19, encode_spawn(19, ["true"], flags=F_PTY)) == errno.EBADF
    # fds on a non-SPAWN request
    ctl.send(PING_T, 20, b"", fds)
    assert ctl.wait(RESULT, 20).err == errno.EBADF
    # duplicate exec id while the first is running
    assert spawn_raw(21, encode_spawn(21, ["sleep", "100"])) == 0
    assert spawn_raw(21, encode_spawn(21, ["true"])) == errno.EEXIST
    # uid -1
    assert spawn_raw(22, encode_spawn(22, ["true"], uid=0xFFFFFFFF)) == errno.EINVAL
    for fd in fds:
        os.close(fd)
    # init is alive and well; it did not leak the refused fds into itself
    ctl.send(PING_T, 30)
    assert ctl.wait(PONG, 30).nprocs == 1
    nfds = len(os.listdir(f"/proc/{init.pid}/fd"))
    assert nfds <= 7, os.listdir(f"/proc/{init.pid}/fd")


def _patch_len(msg, strings):
    """Rebuild a SPAWN message with a different strings region, keeping the
    declared counts (so the region no longer matches them)."""
    hdr = HDR.unpack_from(msg)
    sp = list(struct.unpack_from("=IIIHHIIII", msg, HDR.size))
    sp[7] = len(strings)
    payload = struct.pack("=IIIHHIIII", *sp) + strings
    return HDR.pack(hdr[0], hdr[1], len(payload), 0, hdr[4]) + payload


def test_sigterm_forwarded_then_init_exits(init, ctl):
    fds = [os.open("/dev/null", os.O_RDWR) for _ in range(3)]
    ctl.spawn(1, ["sleep", "100"], stdio=fds)
    ctl.spawn(2, ["sh", "-c", "trap 'exit 7' TERM; while :; do sleep 0.05; done"], stdio=fds)
    for fd in fds:
        os.close(fd)
    time.sleep(0.3)
    os.kill(init.pid, signal.SIGTERM)
    assert os.WTERMSIG(ctl.wait(EXITED, 1).status) == signal.SIGTERM
    st2 = ctl.wait(EXITED, 2).status
    assert os.WIFEXITED(st2) and os.WEXITSTATUS(st2) == 7
    assert init.proc.wait(5) == 0


def test_signal_from_inside_cannot_stop_init(init, ctl):
    if init.mode != "pid1":
        pytest.skip("only PID 1 tells inside from outside")
    st, _, _ = ctl.run(1, ["sh", "-c", "kill -TERM 1; kill -INT 1; kill -KILL 1; sleep 0.2"])
    assert st == 0
    ctl.send(PING_T, 2)
    assert ctl.wait(PONG, 2).init_pid == 1


def test_probe_through_init(init, ctl):
    import json
    from initctl import PROBE
    if not os.path.exists(PROBE):
        pytest.skip("warren-probe not built")
    st, out, err = ctl.run(1, [PROBE])
    assert st == 0, err
    rep = json.loads(out)
    # init hands the child exactly stdin/stdout/stderr: no leaked fds
    assert [f["fd"] for f in rep["fds"]] == [0, 1, 2]
    assert all(f["target"].startswith("pipe:") for f in rep["fds"])
    if init.mode == "pid1":
        assert rep["pids"] == sorted([1, rep["pid"]])
        assert rep["ppid"] == 1
    if init.mode == "seccomp":
        assert rep["no_new_privs"] == 1 and rep["seccomp"] == 2
        sc = rep["syscalls"]
        assert sc["clone3"]["error"] == "ENOSYS"
        for k in ("unshare_newns", "unshare_newuser", "clone_newns", "clone_newpid",
                  "mount_tmpfs", "setns_net"):
            assert sc[k]["error"] == "EPERM", (k, sc[k])


# --- holds: exec sessions that outlive their daemon (CTL_SPAWN_HOLD) ---

def _pipes_for_hold():
    """The child's ends and the daemon's ends of three pipes."""
    ir, iw = os.pipe()
    or_, ow = os.pipe()
    er, ew = os.pipe()
    return (ir, ow, ew), (iw, or_, er)


def test_hold_keeps_pipes_and_exit_across_daemons(init):
    c1 = init.connect()
    child, ours = _pipes_for_hold()
    m = c1.spawn(1, ["sh", "-c", "read l; echo got:$l; echo err >&2; exit 4"],
                 stdio=child + ours, flags=F_HOLD)
    assert m.err == 0
    for fd in child + ours:
        os.close(fd)  # the "daemon" dies: only init has the pipes now
    c1.close()
    c2 = init.connect()
    hs = c2.holds(10)
    assert [(h[0], h[1], h[3], h[4]) for h in hs] == [(1, m.pid, F_HOLD, HOLD_STDIN)]
    t = c2.take(1)
    assert t.err == 0 and t.fdmask == FD_STDIN | FD_STDOUT | FD_STDERR and len(t.fds) == 3
    iw, or_, er = t.fds
    os.write(iw, b"x\n")
    os.close(iw)
    ex = c2.wait(EXITED, 1)
    assert os.WEXITSTATUS(ex.status) == 4
    assert os.read(or_, 100) == b"got:x\n"
    assert os.read(er, 100) == b"err\n"
    # exited, still held (with its exit) until RELEASE ALL
    hs = c2.holds(11)
    assert len(hs) == 1 and hs[0][4] & HOLD_EXITED and os.WEXITSTATUS(hs[0][2]) == 4
    c2.send(LIST_T, 12)
    assert c2.wait(LIST_REPLY, 12).entries == []
    c2.send(PING_T, 13)
    assert c2.wait(PONG, 13).nprocs == 0
    # init still holds the write ends' readers: EOF needs nothing from it
    assert c2.release(1, REL_ALL) == 0
    assert c2.holds(14) == []
    assert c2.release(1, REL_ALL) == errno.ESRCH
    assert c2.take(1).err == errno.ESRCH
    for fd in (or_, er):
        os.close(fd)


def test_hold_output_written_while_no_daemon(init):
    """A process that writes (within the pipe's capacity) and exits while no
    daemon is connected: the bytes wait in the pipe init holds."""
    c1 = init.connect()
    child, ours = _pipes_for_hold()
    data_len = 50000
    m = c1.spawn(2, ["sh", "-c", "sleep 0.3; head -c %d /dev/zero; exit 0" % data_len],
                 stdio=child + ours, flags=F_HOLD)
    assert m.err == 0
    for fd in child + ours:
        os.close(fd)
    c1.close()
    time.sleep(1.0)
    c2 = init.connect()
    hs = c2.holds(20)
    assert len(hs) == 1 and hs[0][4] & HOLD_EXITED
    t = c2.take(2)
    iw, or_, er = t.fds
    got = b""
    while True:
        b = os.read(or_, 65536)
        if not b:
            break
        got += b
    assert got == b"\0" * data_len
    assert c2.release(2, REL_ALL) == 0
    for fd in t.fds:
        os.close(fd)


def test_hold_release_stdin_gives_eof(init, ctl):
    child, ours = _pipes_for_hold()
    m = ctl.spawn(3, ["sh", "-c", "cat; echo eof"], stdio=child + ours, flags=F_HOLD)
    assert m.err == 0
    for fd in child:
        os.close(fd)
    iw, or_, er = ours
    os.write(iw, b"abc")
    os.close(iw)  # our copy is gone, init's keeps stdin open
    time.sleep(0.2)
    assert ctl.holds(30)[0][4] == HOLD_STDIN
    assert ctl.release(3, REL_STDIN) == 0
    assert ctl.holds(31)[0][4] & HOLD_STDIN == 0
    assert ctl.wait(EXITED, 3).status == 0
    assert os.read(or_, 100) == b"abceof\n"
    assert ctl.take(3).fdmask == FD_STDOUT | FD_STDERR
    assert ctl.release(3, REL_ALL) == 0
    for fd in (or_, er):
        os.close(fd)


def test_hold_pty_master_kept(init):
    c1 = init.connect()
    m = c1.spawn(4, ["sh", "-c", "sleep 0.3; echo hello-tty"], flags=F_PTY | F_HOLD)
    assert m.err == 0 and len(m.fds) == 1
    os.close(m.fds[0])
    c1.close()
    time.sleep(1.0)
    c2 = init.connect()
    hs = c2.holds(40)
    assert len(hs) == 1 and hs[0][3] == F_PTY | F_HOLD and hs[0][4] & HOLD_EXITED
    t = c2.take(4)
    assert t.err == 0 and t.fdmask == FD_PTY and len(t.fds) == 1
    out = b""
    try:
        while True:
            b = os.read(t.fds[0], 1000)
            if not b:
                break
            out += b
    except OSError:  # EIO once the slave side is gone and the buffer read
        pass
    assert b"hello-tty" in out
    assert c2.release(4, REL_ALL) == 0
    os.close(t.fds[0])


def test_hold_malformed(init, ctl):
    child, ours = _pipes_for_hold()
    # HOLD without the daemon's ends: EBADF
    assert ctl.spawn(5, ["true"], stdio=child, flags=F_HOLD).err == errno.EBADF
    # the daemon's ends without HOLD: too many fds
    assert ctl.spawn(6, ["true"], stdio=child + ours).err == errno.EBADF
    for fd in child + ours:
        os.close(fd)
    # RELEASE: what 0, unknown bits, reserved, wrong size
    for payload in (struct.pack("=II", 0, 0), struct.pack("=II", 4, 0),
                    struct.pack("=II", 1, 1), struct.pack("=I", 1)):
        ctl.send(RELEASE_T, 7, payload)
        assert ctl.wait(RESULT, 7).err == errno.EINVAL
    # HOLDS / TAKE take no payload
    ctl.send(HOLDS_T, 8, b"x")
    assert ctl.wait(RESULT, 8).err == errno.EINVAL
    ctl.send(TAKE_T, 9, b"x")
    assert ctl.wait(RESULT, 9).err == errno.EINVAL
    # TAKE / RELEASE of something that is not held
    fds = [os.open("/dev/null", os.O_RDWR) for _ in range(3)]
    assert ctl.spawn(10, ["sleep", "5"], stdio=fds).err == 0
    for fd in fds:
        os.close(fd)
    assert ctl.take(10).err == errno.ESRCH
    assert ctl.release(10, REL_ALL) == errno.ESRCH
    assert ctl.signal(11, signal.SIGKILL, target_id=10) == 0
    ctl.wait(EXITED, 10)


def test_hold_budget_runs_unheld_beyond_it():
    """init spends at most RLIMIT_NOFILE - 128 fds on holds: further HOLD
    spawns still run, unheld (they would not outlive their daemon)."""
    from initctl import INIT, Init
    if not os.path.exists(INIT):
        pytest.skip(f"{INIT} not built")
    i = Init("subreaper", nofile=128 + 12)  # room for 4 holds of 3 fds
    try:
        c = i.connect()
        for k in range(6):
            child, ours = _pipes_for_hold()
            assert c.spawn(100 + k, ["sleep", "30"], stdio=child + ours, flags=F_HOLD).err == 0
            for fd in child + ours:
                os.close(fd)
        assert sorted(h[0] for h in c.holds(1)) == [100, 101, 102, 103]
        c.send(LIST_T, 2)
        assert len(c.wait(LIST_REPLY, 2).entries) == 6
        for k in range(6):
            assert c.signal(200 + k, signal.SIGKILL, target_id=100 + k) == 0
    finally:
        i.stop()
