"""`warren shell` driven like a user would, in a tmux pane: the prompt
shows, commands run, the window size follows the pane (at start and on
resize), Ctrl-C interrupts a foreground `sleep` but not the shell, `exit`
ends the CLI with the shell's code and the local terminal settings are
restored. Also `warren exec -t` (PTY) output and exit code.

The seed's "detached tmux session through plain exec" example needs tmux
inside the sandbox; the busybox test image has none, so it is not run
here."""
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
