"""`warren shell` driven like a user would, in a tmux pane: the prompt
shows, commands run, the window size follows the pane (at start and on
resize), Ctrl-C interrupts a foreground `sleep` but not the shell, `exit`
ends the CLI with the shell's code and the local terminal settings are
restored. Also `warren exec -t` (PTY) output and exit code, and the
seed's "detached tmux session through plain exec" example in an image made
of the busybox rootfs plus the host's tmux, its libraries, terminfo and the
C.UTF-8 locale."""
import os
import re
import shutil
import subprocess
import time

import pytest

import warren as wr
from conftest import WARREN_CLI

pytestmark = pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux not installed")


@pytest.fixture(scope="module")
def client(sandbox_daemon):
    with wr.SandboxClient(sandbox_daemon.unix_addr) as c:
        yield c


@pytest.fixture
def sandbox(client):
    sb = client.create(image="busybox:latest")
    yield sb
    sb.terminate(grace_period_seconds=1)


class Tmux:
    """A private tmux server (own socket) with one window."""

    def __init__(self, tmp, cols, rows):
        self.sock = os.path.join(tmp, "tmux.sock")
        conf = os.path.join(tmp, "tmux.conf")
        with open(conf, "w") as f:
            f.write("set -g status off\nset -g default-terminal xterm-256color\n")
        self.base = ["tmux", "-S", self.sock, "-f", conf]
        self.cols, self.rows = cols, rows

    def run(self, *args, check=True):
        return subprocess.run(self.base + list(args), capture_output=True, text=True,
                              check=check, timeout=10)

    def start(self, command):
        self.run("new-session", "-d", "-s", "t", "-x", str(self.cols), "-y", str(self.rows),
                 command)

    def screen(self):
        return self.run("capture-pane", "-p", "-t", "t").stdout

    def keys(self, *keys):
        self.run("send-keys", "-t", "t", *keys)

    def type(self, line):
        self.run("send-keys", "-t", "t", "-l", line)
        self.keys("Enter")

    def wait(self, pattern, timeout=10.0):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            s = self.screen()
            m = re.search(pattern, s, re.M)
            if m:
                return m
            time.sleep(0.05)
        raise AssertionError("screen never matched %r:\n%s" % (pattern, self.screen()))

    def kill(self):
        self.run("kill-server", check=False)


@pytest.fixture
def tmux(tmp_path):
    t = Tmux(str(tmp_path), 100, 30)
    yield t
    t.kill()


def cli_command(daemon, tmp_path, args):
    out = tmp_path / "out"
    return ("sh -c 'stty -g > %s/before; WARREN_ADDR=%s %s %s; echo CLI-EXIT=$?; "
            "stty -g > %s/after; sleep 600'" % (tmp_path, daemon.unix_addr,
                                                os.path.abspath(WARREN_CLI), args,
                                                tmp_path)), out


def test_shell_in_tmux(sandbox, sandbox_daemon, tmux, tmp_path):
    cmd, _ = cli_command(sandbox_daemon, tmp_path, "shell %s" % sandbox.id)
    tmux.start(cmd)
    tmux.wait(r"^/ [#$]\s*$")  # the prompt

    tmux.type("echo hello-$((6*7)) $TERM")
    tmux.wait(r"^hello-42 xterm-256color$")

    # The window size at start, then after resizing the pane.
    tmux.type("stty size")
    tmux.wait(r"^30 100$")
    tmux.run("resize-window", "-t", "t", "-x", "80", "-y", "20")
    time.sleep(0.3)
    tmux.type("stty size")
    tmux.wait(r"^20 80$")

    # Ctrl-C interrupts the foreground sleep, not the shell.
    t0 = time.monotonic()
    tmux.type("sleep 100; echo slept-$?")
    time.sleep(0.5)
    tmux.keys("C-c")
    tmux.type("echo still-here")
    tmux.wait(r"^still-here$", timeout=5)
    assert time.monotonic() - t0 < 10
    assert "slept-0" not in tmux.screen()

    # The shell's exit code passes through; the terminal is restored.
    tmux.type("exit 3")
    tmux.wait(r"^CLI-EXIT=3$")
    before = open(tmp_path / "before").read()
    tmux.wait(r"CLI-EXIT=3")
    deadline = time.monotonic() + 5
    while not os.path.exists(tmp_path / "after") and time.monotonic() < deadline:
        time.sleep(0.05)
    assert open(tmp_path / "after").read() == before


def test_exec_t_in_tmux(sandbox, sandbox_daemon, tmux, tmp_path):
    cmd, _ = cli_command(sandbox_daemon, tmp_path,
                         "exec -t %s -- sh -c \"stty size; tty; exit 7\"" % sandbox.id)
    tmux.start(cmd)
    tmux.wait(r"^CLI-EXIT=7$")
    s = tmux.screen()
    assert re.search(r"^30 100$", s, re.M), s
    assert re.search(r"^/dev/pts/\d+$", s, re.M), s


def test_shell_job_control_ctrl_z(sandbox, sandbox_daemon, tmux, tmp_path):
    cmd, _ = cli_command(sandbox_daemon, tmp_path, "shell %s" % sandbox.id)
    tmux.start(cmd)
    tmux.wait(r"^/ [#$]\s*$")
    tmux.type("sleep 100")
    time.sleep(0.5)
    tmux.keys("C-z")
    tmux.wait(r"(?i)stopped")
    tmux.type("fg")  # back in the foreground, then interrupted
    time.sleep(0.5)
    tmux.keys("C-c")
    tmux.type("echo jobs-$(jobs | wc -l)")
    tmux.wait(r"^jobs-0$")
    tmux.type("exit")
    tmux.wait(r"^CLI-EXIT=0$")


def tmux_files():
    """The host's tmux, its shared libraries and a few terminfo entries,
    as {path in image: host path} (the busybox image has no libc)."""
    files = {"/usr/bin/tmux": shutil.which("tmux")}
    out = subprocess.run(["ldd", files["/usr/bin/tmux"]], capture_output=True, text=True,
                         check=True).stdout
    for line in out.splitlines():
        m = re.search(r"(/\S+)", line.split("=>")[-1])
        if m and os.path.exists(m.group(1)):
            files[m.group(1)] = os.path.realpath(m.group(1))
    loc = "/usr/lib/locale/C.utf8"  # tmux wants a UTF-8 locale (it falls back to C.UTF-8)
    if os.path.isdir(loc):
        for f in os.listdir(loc):
            if os.path.isfile(os.path.join(loc, f)):
                files[os.path.join(loc, f)] = os.path.join(loc, f)
    for t in ("x/xterm-256color", "s/screen", "s/screen-256color", "t/tmux-256color"):
        for d in ("/lib/terminfo", "/usr/share/terminfo"):
            if os.path.exists(os.path.join(d, t)):
                files[os.path.join(d, t)] = os.path.realpath(os.path.join(d, t))
    return files


@pytest.fixture(scope="module")
def tmux_image(sandbox_daemon):
    from conftest import import_image
    import_image(sandbox_daemon, "tmux-test:latest", tmux_files())
    return "tmux-test:latest"


def test_seed_tmux_example_detached_session_through_exec(client, tmux_image):
    """The SDK README's "Add tmux to a sandbox image" example, with an
    image that has tmux (host binary + libraries copied in)."""
    sb = client.create(image=tmux_image)
    try:
        r = sb.exec("tmux", "new-session", "-d", "-s", "work", timeout_secs=20)
        assert r.exit_code == 0, r.stderr_text
        sb.exec("tmux", "send-keys", "-t", "work", "echo hello", "Enter")
        sessions = sb.exec("tmux", "list-sessions").stdout_text
        assert sessions.startswith("work:"), sessions
        deadline = time.monotonic() + 10
        while True:
            screen = sb.exec("tmux", "capture-pane", "-p", "-t", "work").stdout_text
            if re.search(r"^hello$", screen, re.M) or time.monotonic() > deadline:
                break
            time.sleep(0.1)
        assert re.search(r"^hello$", screen, re.M), screen
        assert sb.exec("tmux", "kill-session", "-t", "work").exit_code == 0
    finally:
        sb.terminate(grace_period_seconds=1)
