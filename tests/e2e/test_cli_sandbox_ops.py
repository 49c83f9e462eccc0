"""warren sandbox pause|resume|snapshot|fork, create --disk/--pids/--ssh."""
import json
import subprocess

import pytest

from conftest import WARREN_CLI

IMAGE = "busybox:latest"


def cli(d, *args, check=0):
    p = subprocess.run([WARREN_CLI, "--addr", d.unix_addr] + list(args), capture_output=True,
                       text=True, timeout=120)
    if check is not None:
        assert p.returncode == check, (args, p.stdout, p.stderr)
    return p


def test_pause_resume_snapshot_fork(d):
    sid = cli(d, "sandbox", "create", "-i", IMAGE, "--", "sleep", "infinity").stdout.strip()
    try:
        assert cli(d, "sandbox", "pause", sid).stdout.strip() == sid
        assert "PAUSED" in cli(d, "sandbox", "get", sid).stdout
        p = cli(d, "exec", sid, "--", "true", check=None)
        assert p.returncode != 0 and "paused" in p.stderr
        assert cli(d, "sandbox", "resume", sid).stdout.strip() == sid
        cli(d, "exec", sid, "--", "sh", "-c", "echo hi > /greeting")
        img = cli(d, "sandbox", "snapshot", sid, "--name", "cli-snap:1").stdout.strip()
        assert img.startswith("sha256:")
        j = json.loads(cli(d, "sandbox", "snapshot", sid, "--json").stdout)
        assert j["id"] == img  # unchanged: the same image
        forks = cli(d, "sandbox", "fork", sid, "-n", "2").stdout.split()
        assert len(forks) == 2
        for f in forks:
            assert cli(d, "exec", f, "--", "cat", "/greeting").stdout == "hi\n"
        cli(d, "sandbox", "rm", *forks)
        p = cli(d, "sandbox", "fork", sid, "-n", "99", check=2)
        assert "-n wants 1-16" in p.stderr
    finally:
        cli(d, "sandbox", "rm", sid)


def test_create_disk_and_pids(d):
    sid = cli(d, "sandbox", "create", "-i", IMAGE, "--disk", "32Mi", "--pids", "40", "--",
              "sleep", "infinity").stdout.strip()
    try:
        out = cli(d, "sandbox", "get", sid).stdout
        assert "pids 40" in out and "disk 32Mi" in out
        p = cli(d, "exec", sid, "--", "sh", "-c",
                "dd if=/dev/zero of=/big bs=1M count=64 2>&1; echo rc=$?", check=None)
        assert "rc=0" not in p.stdout, p.stdout
    finally:
        cli(d, "sandbox", "rm", sid)
    p = cli(d, "sandbox", "create", "-i", IMAGE, "--pids", "zero", check=2)
    assert "--pids wants" in p.stderr


@pytest.mark.parametrize("arg,words", [
    ("github", "ALIAS="),
    ("gh=git@github.com", "missing secret=NAME"),
    ("gh=git@github.com:99999,secret=K", "bad port"),
    ("gh=git@github.com,secret=K,colour=blue", "unknown part"),
])
def test_ssh_option_errors(d, arg, words):
    p = cli(d, "sandbox", "create", "-i", IMAGE, "--ssh", arg, check=2)
    assert words in p.stderr, p.stderr


def test_ssh_option_reaches_the_daemon(d):
    # parsed and sent: the daemon names the missing secret
    p = cli(d, "sandbox", "create", "-i", IMAGE, "--ssh",
            "gh=git@github.com:2222,secret=NO_SUCH_KEY,host-key=ssh-ed25519 AAAA", check=None)
    assert p.returncode != 0
    assert "managed_ssh.gh" in p.stderr, p.stderr
