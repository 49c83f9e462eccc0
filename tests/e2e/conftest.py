"""Shared fixtures: start real warrend instances and stop them.

WARREN_BUILD points at the meson build dir (default: build/). Every daemon
gets its own temporary state dir and unix socket; TCP ports are picked free
on 127.0.0.1. Under ASan (WARREN_SANITIZED=1) a daemon that reports an
error or a leak on exit fails the test session.

WARREN_DROP=1 runs every daemon with the drop of privilege separation's
phase 5 (docs/privsep.md): WARREN_PRIVSEP=1 and WARREN_USER=warren (the
user is created by scripts/warren-user.sh when missing), each daemon's
temporary dir searchable (0711) so that the user reaches its state dir.
"""
import os
import pathlib
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
BUILD = pathlib.Path(os.environ.get("WARREN_BUILD", ROOT / "build"))
SANITIZED = os.environ.get("WARREN_SANITIZED") == "1"
DROP = os.environ.get("WARREN_DROP") == "1"
DROP_USER = os.environ.get("WARREN_USER") or "warren"
if DROP:
    subprocess.run([str(ROOT / "scripts" / "warren-user.sh"), DROP_USER], check=True)
    os.environ["WARREN_PRIVSEP"] = "1"
    os.environ["WARREN_USER"] = DROP_USER
    # every test's own warrend dirs (mkdtemp makes them 0700): searchable
    _mkdtemp = tempfile.mkdtemp

    def _mkdtemp_searchable(*a, **kw):
        path = _mkdtemp(*a, **kw)
        os.chmod(path, 0o711)
        return path
    tempfile.mkdtemp = _mkdtemp_searchable


def build_path(rel):
    return str(BUILD / rel)


WARREND = build_path("src/daemon/warrend")
WARREN_CLI = build_path("src/cli/warren")


sys.path.append(str(ROOT / "tests"))
from freeport import free_port  # noqa: E402,F401  (tests/freeport.py: below the ephemeral range)


def make_tls_cert(directory):
    """A self-signed CA and a server certificate for 127.0.0.1/localhost."""
    d = pathlib.Path(directory)
    ca_key, ca_crt = d / "ca.key", d / "ca.crt"
    key, csr, crt = d / "server.key", d / "server.csr", d / "server.crt"
    ext = d / "ext.cnf"
    ext.write_text("subjectAltName=DNS:localhost,IP:127.0.0.1\n")
    run = lambda *a: subprocess.run(a, check=True, capture_output=True)
    run("openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256",
        "-nodes", "-keyout", ca_key, "-out", ca_crt, "-days", "2", "-subj", "/CN=warren-test-ca")
    run("openssl", "req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
        "-keyout", key, "-out", csr, "-subj", "/CN=localhost")
    run("openssl", "x509", "-req", "-in", csr, "-CA", ca_crt, "-CAkey", ca_key,
        "-CAcreateserial", "-out", crt, "-days", "2", "-extfile", ext)
    return str(ca_crt), str(crt), str(key)


# Every warrend a test starts (Daemon, test_lifecycle.Restartable): a
# safety net stops the ones still running when the session ends (a fixture
# whose setup failed after the start never reaches its teardown).
_STARTED = []


def started(proc):
    _STARTED.append(proc)
    return proc


def pytest_sessionfinish(session, exitstatus):
    left = [p for p in _STARTED if p.poll() is None]
    for p in left:
        print("\nwarning: warrend pid %d still running at the end of the session: stopped" % p.pid)
        p.terminate()
    for p in left:
        try:
            p.wait(timeout=30)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()


class Daemon:
    """One running warrend."""

    def __init__(self, tls=False, extra_args=(), diag=True):
        self.tmp = tempfile.mkdtemp(prefix="warren-e2e-")
        if DROP or "--user" in extra_args:
            os.chmod(self.tmp, 0o711)  # the dropped warrend reaches state/ through it
        self.state_dir = os.path.join(self.tmp, "state")
        self.sock = os.path.join(self.tmp, "warren.sock")
        self.port = free_port()
        self.unix_addr = "unix:" + self.sock
        self.tcp_addr = "127.0.0.1:%d" % self.port
        self.tls = tls
        self.ca_file = None
        args = [WARREND, "--state-dir", self.state_dir, "--listen", self.unix_addr,
                "--listen", "TCP_LISTEN", "--log-level", "debug"]
        if tls:
            self.ca_file, crt, key = make_tls_cert(self.tmp)
            args += ["--tls-cert", crt, "--tls-key", key]
        else:
            # plaintext TCP on loopback: callers without a token are the
            # operator (docs/remote.md)
            args.append("--insecure-tcp")
        if diag:
            args.append("--enable-diag")
        args += list(extra_args)
        self.log_path = os.path.join(self.tmp, "warrend.log")
        self.log = open(self.log_path, "wb")
        env = dict(os.environ)
        # Tests never reach beyond loopback: an image that is not stored is
        # pulled on demand only from loopback registries.
        env["WARREN_PULL_LOOPBACK_ONLY"] = "1"
        # Sandboxes outlive warrend by default (restart recovery); test
        # daemons stop theirs on exit so no test leaks any.
        env.setdefault("WARREN_TERMINATE_ON_EXIT", "1")
        if SANITIZED:
            env.setdefault("ASAN_OPTIONS", "detect_leaks=1")
        # a dropped warrend binds (and listens on) its sockets before the
        # drop, long before it is ready: wait for its "ready" line too
        self.wait_ready_line = DROP or "--user" in extra_args
        self.token = None
        try:
            # free_port() is a guess (below the ephemeral range, so no
            # socket binding port 0 gets it, but another explicit choice
            # may): if it is taken before warrend listens, warrend exits
            # and is started again on another port.
            for attempt in range(3):
                self.proc = started(subprocess.Popen(
                    ["tcp:" + self.tcp_addr if a == "TCP_LISTEN" else a for a in args],
                    stdout=self.log, stderr=subprocess.STDOUT, env=env))
                try:
                    self._wait_ready()
                    break
                except RuntimeError as e:
                    taken = "listen tcp:%s" % self.tcp_addr in str(e) and "address already in use" in str(e)
                    if attempt == 2 or not taken or self.proc.poll() is None:
                        raise
                self.port = free_port()
                self.tcp_addr = "127.0.0.1:%d" % self.port
                self.log.write(b"\n=== its port was taken meanwhile: started again on %d ===\n" % self.port)
                self.log.flush()
            if tls:
                # TLS callers need an API token: an admin of the default
                # environment, minted by root over the unix socket
                self.token = subprocess.run(
                    [WARREN_CLI, "--addr", self.unix_addr, "token", "create", "--env", "default",
                     "--role", "admin", "--description", "e2e"],
                    check=True, capture_output=True, text=True, timeout=30).stdout.strip()
        except BaseException:
            # A daemon that refused to start leaves nothing behind either.
            if self.proc.poll() is None:
                self.proc.kill()
                self.proc.wait()
            self.log.close()
            shutil.rmtree(self.tmp, ignore_errors=True)
            raise

    def _wait_ready(self, timeout=20.0):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError("warrend exited early (%d):\n%s" % (self.proc.returncode, self.read_log()))
            if os.path.exists(self.sock) and (not self.wait_ready_line or
                                               " ready (state dir " in self.read_log()):
                try:
                    with socket.create_connection(("127.0.0.1", self.port), timeout=0.2):
                        return
                except OSError:
                    pass
            time.sleep(0.02)
        raise RuntimeError("warrend did not become ready:\n" + self.read_log())

    def read_log(self):
        if not self.log.closed:
            self.log.flush()
        with open(self.log_path, "rb") as f:
            return f.read().decode(errors="replace")

    def _reap_orphans(self):
        """A daemon that died on its own (a crash) leaves its sandboxes
        running (they outlive warrend by design): a second warrend on the
        same state dir re-attaches them and, told to, terminates them on
        exit, so that no test leaks a sandbox, cgroup, veth or table."""
        sock = os.path.join(self.tmp, "reaper.sock")
        env = dict(os.environ, WARREN_TERMINATE_ON_EXIT="1", WARREN_PULL_LOOPBACK_ONLY="1")
        with open(os.path.join(self.tmp, "reaper.log"), "wb") as log:
            p = subprocess.Popen([WARREND, "--state-dir", self.state_dir, "--listen",
                                  "unix:" + sock, "--log-level", "info"],
                                 stdout=log, stderr=subprocess.STDOUT, env=env)
            try:
                deadline = time.monotonic() + 20
                while time.monotonic() < deadline and p.poll() is None and \
                        not os.path.exists(sock):
                    time.sleep(0.05)
            finally:
                if p.poll() is None:
                    p.send_signal(signal.SIGTERM)
                    try:
                        p.wait(timeout=60)
                    except subprocess.TimeoutExpired:
                        p.kill()
                        p.wait()

    def stop(self, sig=signal.SIGTERM, timeout=30.0):
        crashed = self.proc.poll() is not None and self.proc.returncode not in (0, -signal.SIGTERM)
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
                raise RuntimeError("warrend did not stop on SIGTERM:\n" + self.read_log())
        self.log.close()
        log = self.read_log()
        rc = self.proc.returncode
        if crashed and os.path.isdir(self.state_dir):
            try:
                self._reap_orphans()
            except OSError:
                pass
        shutil.rmtree(self.tmp, ignore_errors=True)
        if SANITIZED and ("ERROR: AddressSanitizer" in log or "ERROR: LeakSanitizer" in log
                          or "runtime error:" in log):
            raise RuntimeError("sanitizer report from warrend:\n" + log)
        if rc not in (0, -signal.SIGTERM) and sig == signal.SIGTERM:
            raise RuntimeError("warrend exited with %d:\n%s" % (rc, log))
        return log


@pytest.fixture(autouse=DROP)
def _drop_tmp_path_searchable(request):
    """WARREN_DROP=1: a test's tmp_path (and the dirs pytest makes above
    it, 0700) searchable, for a state dir a test puts there."""
    if "tmp_path" in request.fixturenames:
        p = request.getfixturevalue("tmp_path")
        while str(p).startswith(tempfile.gettempdir() + "/") and p != pathlib.Path(tempfile.gettempdir()):
            os.chmod(p, os.stat(p).st_mode | 0o011)
            p = p.parent
    yield


@pytest.fixture(scope="session")
def warrend():
    """A session-wide daemon with unix and plaintext TCP listeners and Diag."""
    d = Daemon()
    yield d
    d.stop()


@pytest.fixture(scope="session")
def warrend_tls():
    """A session-wide daemon whose TCP listener speaks TLS (ALPN h2)."""
    d = Daemon(tls=True)
    yield d
    d.stop()


@pytest.fixture
def fresh_warrend():
    """A daemon of the test's own, for tests that stop or restart it."""
    daemons = []

    def start(**kw):
        d = Daemon(**kw)
        daemons.append(d)
        return d

    yield start
    for d in daemons:
        try:
            d.stop()
        except Exception:
            pass


def import_image(d, name, rootfs_extra=None):
    """Import the busybox test rootfs (plus files: {path_in_image: host_path})
    into daemon d as image `name`."""
    tmp = tempfile.mkdtemp(prefix="warren-img-")
    try:
        rootfs = os.path.join(tmp, "rootfs")
        tar = os.path.join(tmp, "rootfs.tar")
        subprocess.run(["bash", str(ROOT / "tests/images/busybox-rootfs.sh"), rootfs],
                       check=True, capture_output=True)
        for dest, src in (rootfs_extra or {}).items():
            target = os.path.join(rootfs, dest.lstrip("/"))
            os.makedirs(os.path.dirname(target), exist_ok=True)
            shutil.copy2(src, target)
        subprocess.run(["tar", "--numeric-owner", "--owner=0", "--group=0", "-C", rootfs,
                        "-cf", tar, "."], check=True)
        subprocess.run([WARREN_CLI, "--addr", d.unix_addr, "image", "import", name, tar],
                       check=True, capture_output=True, timeout=120)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


PROBE = build_path("tests/probe/warren-probe")


# The default daemon of a test module: its own, with busybox:latest. A
# module that needs another (extra flags, other images) defines its own `d`;
# `client` then connects to that one.
@pytest.fixture(scope="module")
def d():
    dd = Daemon()
    try:
        import_image(dd, "busybox:latest")
        yield dd
    finally:
        dd.stop()


@pytest.fixture
def client(d):
    import warren as wr
    with wr.SandboxClient(d.unix_addr) as c:
        yield c


@pytest.fixture(scope="session")
def sandbox_daemon():
    """A session-wide daemon with images busybox:latest, sandbox:latest (the
    default) and probe:latest (busybox + /usr/bin/warren-probe)."""
    d = Daemon()
    import_image(d, "busybox:latest")
    import_image(d, "sandbox:latest")
    import_image(d, "probe:latest", {"/usr/bin/warren-probe": PROBE})
    yield d
    d.stop()


# The fake internet for network-facing tests (tests/fakenet/README.md):
# fixtures fakenet (session), fakenet_client, fakenet_mark. Appended, so
# nothing under tests/ shadows an installed module (tests/ is on sys.path
# from the top of this file: freeport).
from fakenet.fixtures import fakenet, fakenet_client, fakenet_mark  # noqa: E402,F401
