"""The default base image of `make run`: scripts/base-image.sh builds a
minimal Debian 12 from Debian packages (mmdebstrap, the host's Debian
mirror, no registry), caches it, and `warren image import --workdir
/workspace --env ...` makes it `sandbox:latest`, which an omitted image
resolves to. The tarball is built here when it is not cached yet (a few
minutes, once per machine: ~/.cache/warren/base-image/, or
WARREN_BASE_CACHE); slow, so skipped under ASan.

Checks: the image config, python3 / git / ssh / CA certificates, /workspace
as the working directory, the seed README's "Git inside a sandbox" flow
against a local repository (no network), and the SDK with the image
omitted."""
import json
import os
import subprocess
import tarfile

import pytest

from conftest import ROOT, WARREN_CLI, Daemon

pytestmark = pytest.mark.slow

SCRIPT = str(ROOT / "scripts/base-image.sh")
ENV = ["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "LANG=C.UTF-8"]


def cache_args():
    c = os.environ.get("WARREN_BASE_CACHE")
    return ["--cache", c] if c else []


@pytest.fixture(scope="module")
def base_tar():
    """The cached base-image tarball (built now if missing)."""
    try:
        p = subprocess.run(["bash", SCRIPT] + cache_args(), capture_output=True, text=True,
                           timeout=600)
    except subprocess.TimeoutExpired as ex:
        pytest.fail("scripts/base-image.sh took more than 600 s:\n%s" % (ex.stderr or ""))
    assert p.returncode == 0, "scripts/base-image.sh failed:\n" + p.stderr
    path = p.stdout.strip().splitlines()[-1]
    assert os.path.isfile(path) and os.path.getsize(path) > 20 << 20, path
    return path


@pytest.fixture(scope="module")
def base_daemon(base_tar):
    """A daemon whose sandbox:latest is the Debian base image, imported the
    way scripts/run.sh does it."""
    d = Daemon()
    try:
        args = [WARREN_CLI, "--addr", d.unix_addr, "image", "import", "--json",
                "--workdir", "/workspace"]
        for kv in ENV:
            args += ["--env", kv]
        p = subprocess.run(args + ["sandbox:latest", base_tar], capture_output=True, text=True,
                           timeout=300)
        assert p.returncode == 0, p.stderr
        d.imported = json.loads(p.stdout)
        yield d
    finally:
        d.stop()


def cli(d, *args, timeout=120):
    return subprocess.run([WARREN_CLI, "--addr", d.unix_addr] + list(args), capture_output=True,
                          text=True, timeout=timeout)


def test_cached_second_run_is_instant(base_tar):
    p = subprocess.run(["bash", SCRIPT] + cache_args(), capture_output=True, text=True,
                       timeout=60)
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip() == base_tar
    assert "cached:" in p.stderr and "mmdebstrap" not in p.stderr


def test_tarball_contents(base_tar):
    """No device nodes, no /root/.ssh, no apt lists; /workspace present."""
    names = set()
    with tarfile.open(base_tar) as t:
        for m in t:
            n = m.name[2:] if m.name.startswith("./") else m.name
            names.add(n.rstrip("/"))
            assert not (m.ischr() or m.isblk() or m.isfifo()), m.name
            assert not n.startswith("root/.ssh"), m.name
            assert not (n.startswith("var/lib/apt/lists/") and n.endswith("_Packages")), m.name
            assert not n.startswith("usr/share/man/man"), m.name
    for want in ("workspace", "usr/bin/python3", "usr/bin/git", "usr/bin/ssh",
                 "etc/ssl/certs/ca-certificates.crt", "usr/bin/bash", "usr/bin/ps"):
        assert want in names, want


def test_import_config(base_daemon):
    img = base_daemon.imported
    assert "sandbox:latest" in img["names"]
    assert img["config"]["working_dir"] == "/workspace"
    assert img["config"]["env"] == ENV
    p = cli(base_daemon, "image", "get", "sandbox:latest")
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout)["config"]["working_dir"] == "/workspace"


def test_import_flag_errors(base_daemon, base_tar):
    p = cli(base_daemon, "image", "import", "--env", "NOEQUALS", "x:1", base_tar)
    assert p.returncode == 2 and "--env takes K=V" in p.stderr
    p = cli(base_daemon, "image", "import", "--env", "=v", "x:1", base_tar)
    assert p.returncode == 2


def test_tools_via_cli(base_daemon):
    script = ("pwd; python3 -c 'print(1)'; git --version; ssh -V 2>&1; echo LANG=$LANG; "
              "test -s /etc/ssl/certs/ca-certificates.crt && echo certs-ok; "
              "python3 -c 'import ssl; print(ssl.get_default_verify_paths().cafile or \"\")'")
    p = cli(base_daemon, "run", "sandbox:latest", "--", "bash", "-c", script)
    assert p.returncode == 0, p.stderr
    lines = p.stdout.splitlines()
    assert lines[0] == "/workspace"
    assert lines[1] == "1"
    assert lines[2].startswith("git version 2.")
    assert lines[3].startswith("OpenSSH_9")
    assert lines[4] == "LANG=C.UTF-8"
    assert lines[5] == "certs-ok"


@pytest.fixture
def client(base_daemon):
    import warren as wr
    with wr.SandboxClient(base_daemon.unix_addr) as c:
        yield c


@pytest.fixture
def sandbox(client):
    sb = client.create()  # no image: the daemon's default, sandbox:latest
    yield sb
    sb.terminate(grace_period_seconds=1)


def test_sdk_image_omitted(sandbox):
    r = sandbox.exec("python3", "-c", "import sys, os; print(sys.version_info[0], os.getcwd())")
    assert r.exit_code == 0, r.stderr_text
    assert r.stdout_text == "3 /workspace\n"
    r = sandbox.exec("sh", "-c", "cat /etc/debian_version; id -u")
    assert r.exit_code == 0 and r.stdout[0].startswith("12.") and r.stdout[1] == "0"


def test_git_inside_a_sandbox_local(sandbox):
    """The seed README's "Git inside a sandbox" flow against a local
    repository: init + commit, shallow clone over file://, status/branch."""
    def sh(cmd):
        r = sandbox.exec("bash", "-c", "set -e; " + cmd)
        assert r.exit_code == 0, (cmd, r.stdout_text, r.stderr_text)
        return r.stdout_text

    sh("git config --global user.email t@example.invalid && git config --global user.name T"
       " && git config --global init.defaultBranch main")
    sh("mkdir -p /srv/upstream && cd /srv/upstream && git init -q"
       " && echo one > README && git add README && git commit -qm first"
       " && echo two >> README && git commit -qam second")
    sh("git clone -q --depth 1 file:///srv/upstream /workspace/repo")
    assert sh("cd /workspace/repo && git log --oneline | wc -l").strip() == "1"
    assert sh("cd /workspace/repo && git branch --show-current").strip() == "main"
    assert "nothing to commit, working tree clean" in sh("cd /workspace/repo && git status")
    sh("cd /workspace/repo && git checkout -q -b feature && echo three >> README"
       " && git commit -qam third")
    assert sh("cd /workspace/repo && git status --short --branch").startswith("## feature")
    assert sh("cat /workspace/repo/README") == "one\ntwo\nthree\n"
