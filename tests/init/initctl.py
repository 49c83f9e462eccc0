"""Harness for warren-init without the runtime: a listening SOCK_SEQPACKET
socket handed to build/src/init/warren-init as fd 3, and a small Python
client of the control protocol (src/init/ctl-proto.h).

Modes: "pid1" runs init as PID 1 of fresh pid+mount namespaces
(`unshare -fpm --mount-proc`); "subreaper" runs it as a plain child process
(it then uses PR_SET_CHILD_SUBREAPER)."""
import array
import errno
import os
import pathlib
import select
import shutil
import signal
import socket
import struct
import subprocess
import tempfile
import threading
import time

ROOT = pathlib.Path(__file__).resolve().parents[2]
BUILD = pathlib.Path(os.environ.get("WARREN_BUILD", ROOT / "build")).resolve()
INIT = str(BUILD / "src/init/warren-init")
PROBE = str(BUILD / "tests/probe/warren-probe")

MAGIC = 0x57494E31
HDR = struct.Struct("=IIIIQ")
SPAWN = struct.Struct("=IIIHHIIII")
SPAWN_T, SIGNAL_T, RESIZE_T, KILL_ALL_T, PING_T, LIST_T = 1, 2, 3, 4, 5, 6
HOLDS_T, TAKE_T, RELEASE_T = 7, 8, 9
SPAWNED, EXITED, RESULT, PONG, LIST_REPLY = 0x81, 0x82, 0x83, 0x84, 0x85
HOLDS_REPLY, TAKEN = 0x86, 0x87
FILE_OPEN_T, FILE_OPENED = 10, 0x88
FOPEN = struct.Struct("=IIIIII")
(FO_PATH, FO_READ, FO_WRITE, FO_RDWR, FO_CREATE, FO_EXCL, FO_TRUNC, FO_DIRECTORY,
 FO_NOFOLLOW, FO_OWNER) = (1 << i for i in range(10))
F_SETSID, F_PTY, F_HOLD = 1, 2, 4
HOLD_EXITED, HOLD_STDIN = 1, 2
FD_STDIN, FD_STDOUT, FD_STDERR, FD_PTY = 1, 2, 4, 8
REL_STDIN, REL_ALL = 1, 2
SIG_GROUP = 1


class Msg:
    def __init__(self, type_, id_, payload, fds):
        self.type, self.id, self.payload, self.fds = type_, id_, payload, fds
        if type_ in (SPAWNED, EXITED):
            self.pid, v = struct.unpack("=ii", payload)
            if type_ == SPAWNED:
                self.err = v
            else:
                self.status = v
        elif type_ == RESULT:
            self.err, _ = struct.unpack("=iI", payload)
        elif type_ == PONG:
            self.init_pid, self.nprocs, self.nconns, self.npending = struct.unpack("=iIII", payload)
        elif type_ == LIST_REPLY:
            self.entries = [struct.unpack_from("=QiI", payload, o) for o in range(0, len(payload), 16)]
        elif type_ == HOLDS_REPLY:
            # (id, pid, status, flags, state)
            self.holds = [struct.unpack_from("=QiiII", payload, o) for o in range(0, len(payload), 24)]
        elif type_ == TAKEN:
            self.err, self.fdmask = struct.unpack("=iI", payload)
        elif type_ == FILE_OPENED:
            self.err, _ = struct.unpack("=iI", payload)

    def __repr__(self):
        return f"Msg(type={self.type:#x}, id={self.id}, payload={self.payload!r}, fds={self.fds})"


def encode_spawn(id_, argv, env=(), cwd="/", flags=0, uid=0, gid=0, cols=0, rows=0):
    strings = b"".join(s.encode() + b"\0" for s in [cwd, *argv, *env])
    payload = SPAWN.pack(flags, uid, gid, cols, rows, len(argv), len(env), len(strings), 0) + strings
    return HDR.pack(MAGIC, SPAWN_T, len(payload), 0, id_) + payload


def encode_file_open(id_, path, flags, mode=0, uid=0, gid=0, path_len=None, reserved=0):
    p = path if isinstance(path, bytes) else path.encode() + b"\0"
    payload = FOPEN.pack(flags, mode, uid, gid, len(p) if path_len is None else path_len,
                         reserved) + p
    return HDR.pack(MAGIC, FILE_OPEN_T, len(payload), 0, id_) + payload


class Ctl:
    """One daemon connection."""

    def __init__(self, path):
        self.s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.s.connect(path)
        self.backlog = []

    def close(self):
        self.s.close()

    def send_raw(self, data, fds=()):
        anc = [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", fds))] if fds else []
        self.s.sendmsg([data], anc)

    def send(self, type_, id_, payload=b"", fds=()):
        self.send_raw(HDR.pack(MAGIC, type_, len(payload), 0, id_) + payload, fds)

    def recv(self, timeout=10):
        r, _, _ = select.select([self.s], [], [], timeout)
        if not r:
            raise TimeoutError("no message from init")
        data, anc, flags, _ = self.s.recvmsg(65537, socket.CMSG_SPACE(4 * 8))
        if not data:
            raise ConnectionResetError("init closed the connection")
        fds = []
        for level, typ, cdata in anc:
            if level == socket.SOL_SOCKET and typ == socket.SCM_RIGHTS:
                a = array.array("i")
                a.frombytes(cdata[: len(cdata) - len(cdata) % 4])
                fds.extend(a)
        magic, type_, ln, res, id_ = HDR.unpack_from(data)
        assert magic == MAGIC and res == 0 and ln == len(data) - HDR.size, data
        return Msg(type_, id_, data[HDR.size:], fds)

    def wait(self, type_, id_, timeout=10):
        for i, m in enumerate(self.backlog):
            if m.type == type_ and m.id == id_:
                return self.backlog.pop(i)
        deadline = time.monotonic() + timeout
        while True:
            m = self.recv(max(0.0, deadline - time.monotonic()))
            if m.type == type_ and m.id == id_:
                return m
            self.backlog.append(m)

    def spawn(self, id_, argv, stdio=None, **kw):
        self.send_raw(encode_spawn(id_, argv, **kw), stdio or ())
        return self.wait(SPAWNED, id_)

    def holds(self, id_):
        self.send(HOLDS_T, id_)
        return self.wait(HOLDS_REPLY, id_).holds

    def take(self, exec_id):
        self.send(TAKE_T, exec_id)
        return self.wait(TAKEN, exec_id)

    def release(self, exec_id, what):
        self.send(RELEASE_T, exec_id, struct.pack("=II", what, 0))
        return self.wait(RESULT, exec_id).err

    def signal(self, id_, signo, target_id=0, pid=0, group=False):
        self.send(SIGNAL_T, id_, struct.pack("=QiiII", target_id, pid, signo, SIG_GROUP if group else 0, 0))
        return self.wait(RESULT, id_).err

    def run(self, id_, argv, stdin=b"", timeout=20, **kw):
        """Spawn with pipes, feed stdin, return (status, stdout, stderr)."""
        ir, iw = os.pipe()
        or_, ow = os.pipe()
        er, ew = os.pipe()
        try:
            m = self.spawn(id_, argv, stdio=(ir, ow, ew), **kw)
        finally:
            for fd in (ir, ow, ew):
                os.close(fd)
        if m.err:
            for fd in (iw, or_, er):
                os.close(fd)
            raise OSError(m.err, os.strerror(m.err))
        out, err = [], []
        threads = [threading.Thread(target=_drain, args=(or_, out)),
                   threading.Thread(target=_drain, args=(er, err))]
        for t in threads:
            t.start()
        try:
            if stdin:
                os.write(iw, stdin)
        finally:
            os.close(iw)
        ex = self.wait(EXITED, id_, timeout)
        for t in threads:
            t.join(timeout)
        assert ex.pid == m.pid
        return ex.status, b"".join(out), b"".join(err)


def _drain(fd, sink):
    try:
        while True:
            b = os.read(fd, 65536)
            if not b:
                break
            sink.append(b)
    finally:
        os.close(fd)


# A seccomp filter shaped like the sandbox's where it matters to init:
# clone3 -> ENOSYS (glibc must fall back), clone with any CLONE_NEW* flag,
# unshare, mount and setns -> EPERM. x86_64 only.
def _seccomp_prog():
    LD, JEQ, JSET, RET = 0x20, 0x15, 0x45, 0x06
    ALLOW, KILL = 0x7FFF0000, 0x80000000
    ERRNO = lambda e: 0x00050000 | e
    ins = [
        (LD, 0, 0, 4), (JEQ, 1, 0, 0xC000003E), (RET, 0, 0, KILL),
        (LD, 0, 0, 0),
        (JEQ, 0, 1, 435), (RET, 0, 0, ERRNO(errno.ENOSYS)),          # clone3
        (JEQ, 2, 0, 272), (JEQ, 1, 0, 165), (JEQ, 0, 1, 308),      # unshare mount setns
        (RET, 0, 0, ERRNO(errno.EPERM)),
        (JEQ, 0, 3, 56), (LD, 0, 0, 16), (JSET, 0, 1, 0x7E020080),  # clone + CLONE_NEW*
        (RET, 0, 0, ERRNO(errno.EPERM)),
        (RET, 0, 0, ALLOW),
    ]
    return b"".join(struct.pack("=HBBI", *i) for i in ins), len(ins)


def install_seccomp():
    """Run in the child before exec: no_new_privs, then the filter."""
    import ctypes
    libc = ctypes.CDLL(None, use_errno=True)
    code, n = _seccomp_prog()
    buf = ctypes.create_string_buffer(code, len(code))

    class Fprog(ctypes.Structure):
        _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]

    prog = Fprog(n, ctypes.addressof(buf))
    if libc.prctl(38, 1, 0, 0, 0) != 0:  # PR_SET_NO_NEW_PRIVS
        os._exit(121)
    if libc.prctl(22, 2, ctypes.byref(prog), 0, 0) != 0:  # PR_SET_SECCOMP, FILTER
        os._exit(122)


class Init:
    """A running warren-init with its listening socket. mode: "pid1" (fresh
    pid+mount namespaces), "subreaper" (plain child), "seccomp" (plain child
    under install_seccomp's filter)."""

    def __init__(self, mode, nofile=None, root=None):
        self.mode = mode
        self.tmp = tempfile.mkdtemp(prefix="warren-init-")
        self.path = os.path.join(self.tmp, "ctl.sock")
        self.lsock = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.lsock.bind(self.path)
        self.lsock.listen(16)
        lfd = self.lsock.fileno()
        argv = ["unshare", "-fpm", "--mount-proc", INIT] if mode == "pid1" else [INIT]
        if root:
            # init chrooted into root (a copy of it inside): its "/" is root
            assert mode == "pid1"
            shutil.copy(INIT, os.path.join(root, "warren-init"))
            os.makedirs(os.path.join(root, "proc"), exist_ok=True)
            argv = ["unshare", "-fpm", "--mount-proc", "--root=" + root, "/warren-init"]
        self.stderr = open(os.path.join(self.tmp, "stderr"), "w+")

        def pre():
            os.dup2(lfd, 3)
            if nofile:
                import resource
                resource.setrlimit(resource.RLIMIT_NOFILE, (nofile, nofile))
            if mode == "seccomp":
                install_seccomp()

        self.proc = subprocess.Popen(
            argv, pass_fds=(3,), preexec_fn=pre,
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=self.stderr,
            env={"WARREN_SANDBOX_ID": "test"})
        self.conns = []
        self.pid = self._find_init_pid()

    def _find_init_pid(self):
        if self.mode != "pid1":
            return self.proc.pid
        for _ in range(200):
            kids = children(self.proc.pid)
            if kids:
                return kids[0]
            time.sleep(0.01)
        raise RuntimeError("unshare did not start init")

    def connect(self):
        c = Ctl(self.path)
        self.conns.append(c)
        return c

    def children(self):
        return children(self.pid)

    def wait_no_children(self, timeout=5):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if not self.children():
                return True
            time.sleep(0.02)
        return False

    def stop(self):
        for c in self.conns:
            c.close()
        if self.proc.poll() is None:
            try:
                os.kill(self.pid, signal.SIGKILL)  # PID 1 death takes the namespace along
            except ProcessLookupError:
                pass
            if self.mode != "pid1":
                # Descendants survive a subreaper's death: kill what is left.
                for p in descendants(self.pid):
                    try:
                        os.kill(p, signal.SIGKILL)
                    except ProcessLookupError:
                        pass
            self.proc.wait(10)
        self.lsock.close()
        self.stderr.close()
        shutil.rmtree(self.tmp, ignore_errors=True)


def children(pid):
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as f:
            return [int(x) for x in f.read().split()]
    except FileNotFoundError:
        return []


def descendants(pid):
    out, todo = [], [pid]
    while todo:
        for c in children(todo.pop()):
            out.append(c)
            todo.append(c)
    return out


