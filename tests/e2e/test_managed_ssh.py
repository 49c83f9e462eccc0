"""Managed SSH (issue 12 item 5; seed: sandbox-networking.md "Managed SSH"):
the key in an ssh-agent beside the sandbox, the sandbox reaching a real
sshd and a git server over ssh in the fake internet by alias, trust on
first use or pinned host keys, and the key nowhere inside the sandbox."""
import os
import re
import subprocess
import sys
import time

import pytest

import warren as wr
from conftest import ROOT, WARREN_CLI, Daemon
from warren import SshDest

sys.path.insert(0, str(ROOT / "tests"))

IMAGE = "sshbase:latest"


@pytest.fixture(scope="module")
def bed():
    from fakenet.bed import FakeNet
    b = FakeNet(ssh=True)
    b.start()
    try:
        if b.ssh is None:
            pytest.skip("no sshd (openssh-server) on this host")
        yield b
    finally:
        b.stop()


def import_base(d):
    p = subprocess.run(["bash", str(ROOT / "scripts/base-image.sh")], capture_output=True,
                       text=True, timeout=900)
    if p.returncode != 0:
        pytest.skip("no Debian base image: " + p.stderr[-300:])
    base = p.stdout.strip().splitlines()[-1]
    r = subprocess.run([WARREN_CLI, "--addr", d.unix_addr, "image", "import", "--env",
                        "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
                        IMAGE, base], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr


@pytest.fixture(scope="module")
def d(bed):
    dd = Daemon(extra_args=["--upstream-dns", bed.dns])
    try:
        import_base(dd)
        with wr.SandboxClient(dd.unix_addr) as c:
            with open(bed.ssh.key) as f:
                c.set_secret("GITHUB_DEPLOY_KEY", f.read())
            c.set_secret("NOT_A_KEY", "hello")
        yield dd
    finally:
        dd.stop()


@pytest.fixture
def make(client):
    made = []

    def make_(**kw):
        kw.setdefault("image", IMAGE)
        kw.setdefault("entrypoint", ["sleep", "infinity"])
        sb = client.create(**kw)
        made.append(sb)
        return sb

    yield make_
    for sb in made:
        try:
            sb.terminate(grace_period_seconds=1)
        except wr.WarrenError:
            pass


def sh(sb, cmd, timeout=60):
    return sb.exec("sh", "-c", cmd, timeout_secs=timeout)


def key_marker(bed):
    """A line of the private key's base64 that appears nowhere else."""
    with open(bed.ssh.key) as f:
        lines = [l.strip() for l in f if l.strip() and not l.startswith("-----")]
    return lines[1]


def agents():
    """pids of ssh-agent processes with our socket name running unprivileged:
    as nobody, or (user namespaces, the default) as the host uid of their
    sandbox's root (docs/security.md: >= 1879048192)."""
    p = subprocess.run(["ps", "-eo", "pid=,uid=,args="], capture_output=True, text=True)
    return {int(l.split()[0]) for l in p.stdout.splitlines()
            if "ssh-agent -D -a agent.sock" in l
            and (int(l.split()[1]) == 65534 or int(l.split()[1]) >= 1879048192)}


def github(**kw):
    return {"github": SshDest("github.com", "GITHUB_DEPLOY_KEY", username="git", **kw)}


def test_seed_example_ssh_and_git_clone(make, bed):
    before = agents()
    sb = make(managed_ssh=github())
    mine = agents() - before
    assert len(mine) == 1
    r = sh(sb, "ssh github true && echo SSH-OK")
    assert "SSH-OK" in r.stdout_text, r.stderr_text
    r = sh(sb, "git clone -q github:example/repo.git /tmp/repo && ls /tmp/repo")
    assert r.exit_code == 0, r.stderr_text
    assert r.stdout_text.strip()
    cfg = sh(sb, "cat /root/.ssh/config").stdout_text
    for line in ("Host github", "HostName github.com", "User git", "Port 22",
                 "IdentityAgent /run/warren/ssh/agent.sock"):
        assert line in cfg, cfg
    e = sh(sb, "echo $SSH_AUTH_SOCK").stdout_text.strip()
    assert e == "/run/warren/ssh/agent.sock"
    r = sh(sb, "ssh-add -l")
    assert r.exit_code == 0 and "ED25519" in r.stdout_text
    sb.terminate()
    deadline = time.monotonic() + 10
    while agents() & mine and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not agents() & mine  # the agent ends with its sandbox


def test_key_is_nowhere_in_the_sandbox(make, bed):
    sb = make(managed_ssh=github())
    assert sh(sb, "ssh github true").exit_code == 0
    marker = key_marker(bed)
    r = sh(sb, f"grep -rsl -F '{marker}' / --exclude-dir=proc --exclude-dir=sys; "
               f"cat /proc/*/environ 2>/dev/null | tr '\\0' '\\n' | grep -c -F '{marker}'; "
               f"env | grep -c 'PRIVATE KEY'; "
               f"grep -rsl 'PRIVATE KEY' /root /etc /tmp /run /workspace", timeout=120)
    out = r.stdout_text.split()
    assert out[:2] == ["0", "0"], r.stdout_text
    assert len(out) == 2, r.stdout_text
    # the agent's directory is read-only and holds only its socket
    assert sh(sb, "ls /run/warren/ssh").stdout_text.split() == ["agent.sock"]
    assert sh(sb, "touch /run/warren/ssh/x").exit_code != 0


def test_trust_on_first_use_then_a_changed_key_is_refused(make, bed, tmp_path):
    sb = make(managed_ssh=github())
    assert sh(sb, "ssh github true").exit_code == 0
    kh = sh(sb, "cat /root/.ssh/known_hosts").stdout_text
    assert re.search(r"^github ssh-ed25519 ", kh, re.M), kh
    # the server's key "changes": the remembered one is another key now
    other = tmp_path / "other"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(other)], check=True)
    pub = " ".join(open(str(other) + ".pub").read().split()[:2])
    sh(sb, f"sed -i 's|^github .*|github {pub}|' /root/.ssh/known_hosts")
    r = sh(sb, "ssh github true")
    assert r.exit_code != 0
    assert "IDENTIFICATION HAS CHANGED" in r.stderr_text or "verification failed" in r.stderr_text


def test_pinned_host_keys(make, bed, tmp_path):
    good = make(managed_ssh=github(host_keys=[bed.ssh.host_pubkey]))
    assert sh(good, "ssh github true").exit_code == 0
    assert "StrictHostKeyChecking yes" in sh(good, "cat /root/.ssh/config").stdout_text
    other = tmp_path / "other"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(other)], check=True)
    bad = make(managed_ssh=github(host_keys=[open(str(other) + ".pub").read().strip()]))
    r = sh(bad, "ssh github true")
    assert r.exit_code != 0 and "verification failed" in r.stderr_text, r.stderr_text


def test_port_and_several_destinations(make, bed):
    sb = make(managed_ssh={
        "gh": SshDest("github.com", "GITHUB_DEPLOY_KEY", username="git", port=22),
        "by-ip": SshDest(bed.addr("github.com"), "GITHUB_DEPLOY_KEY", username="git"),
    })
    assert sh(sb, "ssh gh true && ssh by-ip true && echo OK").stdout_text.strip() == "OK"


@pytest.mark.parametrize("dests,code,words", [
    ({"bad alias!": SshDest("github.com", "GITHUB_DEPLOY_KEY")}, wr.InvalidArgument,
     ["managed_ssh", "alias"]),
    ({"gh": SshDest("foo..bar", "GITHUB_DEPLOY_KEY")}, wr.InvalidArgument, ["managed_ssh.gh"]),
    ({"gh": SshDest("github.com", "GITHUB_DEPLOY_KEY", username="bad user")}, wr.InvalidArgument,
     ["managed_ssh.gh.username"]),
    ({"gh": SshDest("github.com", "GITHUB_DEPLOY_KEY", port=70000)}, wr.InvalidArgument,
     ["managed_ssh.gh.port"]),
    ({"gh": SshDest("github.com", "GITHUB_DEPLOY_KEY", host_keys=["ssh-ed25519 !!!"])},
     wr.InvalidArgument, ["managed_ssh.gh.host_keys[0]"]),
    ({"gh": SshDest("github.com", "GITHUB_DEPLOY_KEY", host_keys=["ssh-foo AAAA"])},
     wr.InvalidArgument, ["managed_ssh.gh.host_keys[0]"]),
    ({"gh": SshDest("github.com", "NO_SUCH_SECRET")}, wr.NotFound,
     ["managed_ssh.gh.private_key_secret", "NO_SUCH_SECRET"]),
    ({"gh": SshDest("github.com", "NOT_A_KEY")}, wr.InvalidArgument,
     ["managed_ssh.gh.private_key_secret", "private key"]),
])
def test_bad_destinations_name_the_field(client, dests, code, words):
    with pytest.raises(code) as ei:
        client.create(image=IMAGE, managed_ssh=dests)
    for w in words:
        assert w in str(ei.value), str(ei.value)
    assert "hello" not in str(ei.value)


def test_with_block_network_or_policy(client):
    with pytest.raises(wr.InvalidArgument):
        client.create(image=IMAGE, managed_ssh=github(), block_network=True)
    # with a policy the destination is exempt from it (tests/e2e/
    # test_egress_ssh_exemption.py): the create is accepted
    sb = client.create(image=IMAGE, managed_ssh=github(), entrypoint=["sleep", "infinity"],
                       network_policy=wr.NetworkPolicy(allowed_hosts=["example.test"]))
    sb.terminate(grace_period_seconds=0)


def test_a_broken_key_fails_the_create_and_leaves_nothing(client, d, tmp_path):
    before = agents()
    k = tmp_path / "k"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(k)], check=True)
    text = open(k).read()
    broken = text.replace(text.splitlines()[2], "A" * len(text.splitlines()[2]))
    client.set_secret("BROKEN_KEY", broken)
    with pytest.raises(wr.FailedPrecondition) as ei:
        client.create(image=IMAGE, managed_ssh={"x": SshDest("github.com", "BROKEN_KEY")})
    assert "managed_ssh.x" in str(ei.value)
    # nothing new may run; agents of earlier tests' sandboxes may still be
    # going away in the background, so compare additions only
    assert not agents() - before
    sdir = os.path.join(d.state_dir, "sandboxes")
    live = {r.id for r in client.list()}
    assert {n for n in os.listdir(sdir) if n.startswith("sb-")} <= live


def test_restart_keeps_the_agent(bed):
    from test_lifecycle import Restartable
    life = Restartable()
    try:
        life.start(extra=["--upstream-dns", bed.dns])
        import_base(life)
        with wr.SandboxClient(life.unix_addr) as c:
            with open(bed.ssh.key) as f:
                c.set_secret("GITHUB_DEPLOY_KEY", f.read())
            before = agents()
            sb = c.create(image=IMAGE, entrypoint=["sleep", "infinity"], managed_ssh=github())
            mine = agents() - before
            assert sh(sb, "ssh github true").exit_code == 0
        life.kill9()
        life.start(extra=["--upstream-dns", bed.dns])
        with wr.SandboxClient(life.unix_addr) as c:
            h = c.get(id=sb.id)
            assert sh(h, "ssh github true && echo again").stdout_text.strip() == "again"
            h.terminate()
        deadline = time.monotonic() + 10
        while agents() & mine and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not agents() & mine
    finally:
        life.destroy()


def test_cli_ssh_option(d, bed):
    p = subprocess.run([WARREN_CLI, "--addr", d.unix_addr, "sandbox", "create", "-i", IMAGE,
                        "--ssh", "github=git@github.com,secret=GITHUB_DEPLOY_KEY,host-key="
                        + bed.ssh.host_pubkey, "--", "sleep", "infinity"],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    sid = p.stdout.strip()
    try:
        r = subprocess.run([WARREN_CLI, "--addr", d.unix_addr, "exec", sid, "--", "ssh", "github",
                            "true"], capture_output=True, text=True, timeout=60)
        assert r.returncode == 0, r.stderr
    finally:
        subprocess.run([WARREN_CLI, "--addr", d.unix_addr, "sandbox", "rm", sid], timeout=60)
