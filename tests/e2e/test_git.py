"""`sandbox.git` (issue 14 item 6; seed: sdk-readme.md "Git inside a
sandbox") against a real warrend and real git servers in the fake
internet (tests/fakenet): smart HTTP through `git http-backend` behind the
bed's HTTPS server (test CA, Basic auth for pushes and for the `private/`
repositories) and `git daemon` (git://). Sandboxes run the default image
(scripts/base-image.sh imported as sandbox:latest, working in /workspace,
with git) plus the bed's CA, trusted for git through the image's
environment. Credentials are checked to be nowhere in the sandbox afterwards."""
import base64
import os
import secrets
import shutil
import subprocess
import sys
import tarfile
import time

import pytest

import warren as wr
from conftest import ROOT, WARREN_CLI, Daemon, import_image
from warren import SshDest

sys.path.insert(0, str(ROOT / "tests"))

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="needs root")

CA_PATH = "/usr/local/share/ca-certificates/fakenet-test-ca.crt"
ENV = ["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "LANG=C.UTF-8"]


@pytest.fixture(scope="module")
def bed():
    from fakenet.bed import FakeNet
    b = FakeNet(ssh=True)        # sshd only when openssh-server is installed (b.ssh)
    b.start()
    try:
        yield b
    finally:
        b.stop()


@pytest.fixture(scope="module")
def d(bed, tmp_path_factory):
    """A daemon resolving with the bed's DNS. sandbox:latest (the image an
    omitted image means) is the Debian base image as scripts/run.sh imports
    it, plus the bed's CA for git (GIT_SSL_CAINFO in the image's env): the
    way an image trusts a private CA, so the seed's code runs unchanged.
    busybox:latest has no git."""
    p = subprocess.run(["bash", str(ROOT / "scripts/base-image.sh")], capture_output=True,
                       text=True, timeout=900)
    if p.returncode != 0:
        pytest.skip("no Debian base image: " + p.stderr[-300:])
    tar = str(tmp_path_factory.mktemp("img") / "sandbox.tar")
    shutil.copyfile(p.stdout.strip().splitlines()[-1], tar)
    with tarfile.open(tar, "a") as t:
        ti = t.gettarinfo(bed.ca_pem, CA_PATH.lstrip("/"))
        ti.uid = ti.gid = 0
        ti.uname = ti.gname = "root"
        ti.mode = 0o644
        with open(bed.ca_pem, "rb") as f:
            t.addfile(ti, f)
    dd = Daemon(extra_args=["--upstream-dns", bed.dns])
    try:
        args = [WARREN_CLI, "--addr", dd.unix_addr, "image", "import", "--workdir", "/workspace"]
        for kv in ENV + ["GIT_SSL_CAINFO=" + CA_PATH]:
            args += ["--env", kv]
        r = subprocess.run(args + ["sandbox:latest", tar], capture_output=True, text=True, timeout=300)
        assert r.returncode == 0, r.stderr
        os.unlink(tar)
        import_image(dd, "busybox:latest")
        yield dd
    finally:
        dd.stop()


@pytest.fixture
def client(d):
    with wr.SandboxClient(d.unix_addr) as c:
        yield c


@pytest.fixture
def sandbox(client):
    """A sandbox of the default image."""
    sb = client.create()
    try:
        yield sb
    finally:
        sb.terminate(grace_period_seconds=1)


def sh(sb, script, timeout=60):
    r = sb.exec("sh", "-c", script, timeout_secs=timeout)
    assert r.exit_code == 0, f"{script}: {r.exit_code} {r.stderr_text}"
    return r.stdout_text.strip()


def git_in(sb, repo, *args):
    return sh(sb, "git -C %s %s" % (repo, " ".join(args)))


def gs():
    from fakenet import gitserver
    return gitserver


def unique(owner="example"):
    return f"{owner}/t-{secrets.token_hex(4)}.git"


@pytest.fixture(scope="module")
def work(bed):
    """example/work.git: main c1..c3, feature = c3 + f1."""
    g = gs()
    name = "example/work.git"
    info = g.new_repo(bed, name, {"README.md": "c1\n"})
    c2 = g.commit(bed, name, {"README.md": "c2\n"}, "c2")
    c3 = g.commit(bed, name, {"README.md": "c3\n"}, "c3")
    f1 = g.commit(bed, name, {"feature.txt": "f1\n"}, "f1", branch="feature", parent="main")
    return dict(info, name=name, c=[info["head"], c2, c3], f1=f1)


SEED = """
from warren import SandboxClient

with SandboxClient.from_env() as client:
    sandbox = client.create()
    try:
        # Uses the remote's default branch with depth=1.
        sandbox.git.clone("https://github.com/octocat/Hello-World.git", "repo")
        print(sandbox.git.status("repo").current_branch)
        print(sandbox.git.branches("repo"))
    finally:
        sandbox.terminate()
"""


def test_seed_example(d, bed):
    """The seed README's "Git inside a sandbox" example, verbatim but for
    the package name (SDK.md), in a client process of its own; the bed
    serves octocat/Hello-World (default branch master, two commits)."""
    name = "octocat/Hello-World.git"
    if gs().rev(bed, name) is None:
        gs().new_repo(bed, name, {"README": "Hello World!\n"}, branch="master")
        gs().commit(bed, name, {"README": "Hello World!\n\nagain\n"}, "second", branch="master")
    m = bed.mark()
    env = dict(os.environ, WARREN_ADDR=d.unix_addr, PYTHONPATH=str(ROOT / "python"))
    p = subprocess.run([sys.executable, "-c", SEED], capture_output=True, text=True, env=env,
                       timeout=120)
    assert p.returncode == 0, p.stderr
    assert p.stdout == "master\n['master']\n"
    bed.settle()
    paths = [r["path"] for r in bed.http_requests(since=m, host="github.com") if r["status"] == 200]
    assert "/octocat/Hello-World.git/git-upload-pack" in paths


def test_paths_are_relative_to_the_image_workdir(sandbox, bed):
    sandbox.git.clone(bed.git["https_url"], "repo")
    assert sh(sandbox, "cat /workspace/repo/README.md").startswith("# example/repo")
    assert git_in(sandbox, "/workspace/repo", "rev-parse HEAD") == bed.git["head"]
    assert git_in(sandbox, "/workspace/repo", "rev-list --count HEAD") == "1"
    assert sandbox.git.status("/workspace/repo").current_branch == "main"


def test_clone_depth_branch_and_commit_over_https(sandbox, bed, work):
    g = sandbox.git
    c1, c2, c3 = work["c"]
    m = bed.mark()
    g.clone(work["https_url"], "d1")
    assert git_in(sandbox, "d1", "rev-list --count HEAD") == "1"
    assert git_in(sandbox, "d1", "rev-parse HEAD") == c3
    assert g.branches("d1") == ["main"] and g.branches("d1", remote=True) == ["origin/main"]
    g.clone(work["https_url"], "full", depth=None)
    assert git_in(sandbox, "full", "rev-list --count HEAD") == "3"
    assert g.branches("full", remote=True) == ["origin/feature", "origin/main"]
    g.clone(work["https_url"], "feat", branch="feature")
    assert g.status("feat").current_branch == "feature"
    assert git_in(sandbox, "feat", "rev-parse HEAD") == work["f1"]
    assert git_in(sandbox, "feat", "rev-list --count HEAD") == "1"
    g.clone(work["https_url"], "at", commit_id=c2)
    st = g.status("at")
    assert st.current_branch is None and st.is_clean
    assert git_in(sandbox, "at", "rev-parse HEAD") == c2
    assert git_in(sandbox, "at", "rev-list --count HEAD") == "1"      # depth=1 at the commit
    assert sh(sandbox, "cat at/README.md") == "c2"
    g.clone(work["https_url"], "at2", commit_id=c1, depth=None)
    assert git_in(sandbox, "at2", "rev-parse HEAD") == c1
    assert git_in(sandbox, "at2", "rev-list --count origin/main") == "3"
    with pytest.raises(wr.GitError) as ei:
        g.clone(work["https_url"], "bad", branch="no-such-branch")
    assert ei.value.exit_code == 128 and "no-such-branch" in ei.value.stderr
    assert ei.value.command[:2] == ["git", "clone"]
    bed.settle()
    reqs = bed.http_requests(since=m, host="github.com")
    assert {r["path"] for r in reqs} >= {"/example/work.git/info/refs", "/example/work.git/git-upload-pack"}
    assert all(r["tls"] for r in reqs)


def test_clone_and_fetch_over_git_daemon(sandbox, bed, work):
    g = sandbox.git
    name = unique()
    info = gs().new_repo(bed, name)
    g.clone(info["git_url"], "d", depth=None)
    assert git_in(sandbox, "d", "rev-parse HEAD") == info["head"]
    assert g.remote_get("d") == info["git_url"]
    new = gs().commit(bed, name, {"x.txt": "x\n"}, "second")
    g.fetch("d")
    st = g.status("d")
    assert (st.current_branch, st.ahead, st.behind) == ("main", 0, 1)
    g.pull("d")
    assert git_in(sandbox, "d", "rev-parse HEAD") == new
    g.clone(work["git_url"], "w", branch="feature")
    assert git_in(sandbox, "w", "rev-parse HEAD") == work["f1"]
    sh(sandbox, "cd d && git -c user.name=t -c user.email=t@e commit -q --allow-empty -m local")
    with pytest.raises(wr.GitError) as ei:
        g.push("d")                                 # git:// is read-only
    assert "service not enabled" in ei.value.stderr


def test_status_reports_modified_untracked_and_staged(sandbox, work):
    g = sandbox.git
    g.clone(work["https_url"], "r")
    assert g.status("r") == wr.GitStatus("main")
    sh(sandbox, "cd r && echo changed > README.md && mkdir -p new && echo u > new/file.txt && "
                "echo s > staged.txt && git add staged.txt")
    st = g.status("r")
    assert st.current_branch == "main" and not st.is_clean
    assert st.modified == ["README.md"]
    assert st.untracked == ["new/file.txt"]
    assert st.staged == ["staged.txt"]
    assert sorted(st.files) == ["README.md", "new/file.txt", "staged.txt"]
    g.restore("r", ["README.md"])
    g.restore("r", ["staged.txt"], staged=True)
    st = g.status("r")
    assert st.modified == [] and st.staged == [] and st.untracked == ["new/file.txt", "staged.txt"]


def test_credentials_push_and_private_clone_leave_no_trace(sandbox, bed):
    """Private repository over HTTPS: no credentials → GitError; a wrong
    password → GitError and the server unchanged; the right ones clone,
    fetch, pull and push. The server saw them (Basic auth); afterwards the
    remote URL is plain, and no file under the repository, $HOME, /tmp,
    /etc, /var or /run holds the password, though `store` helpers were
    configured globally and for the host (the same scan finds a planted
    token, so it would find the password)."""
    g = sandbox.git
    name = unique("private")
    info = gs().new_repo(bed, name, {"README.md": "private\n"})
    user, pw = bed.git["user"], bed.git["password"]
    home = sh(sandbox, "echo $HOME")
    sh(sandbox, "git config --global credential.helper store && "
                "git config --global credential.https://github.com.helper store")
    with pytest.raises(wr.GitError) as ei:
        g.clone(info["https_url"], "p")
    assert ei.value.exit_code == 128 and "could not read Username" in ei.value.stderr
    with pytest.raises(wr.GitError) as ei:
        g.clone(info["https_url"], "p", username=user, password=pw + "-wrong")
    assert "Authentication failed" in ei.value.stderr
    assert pw not in str(ei.value) and pw not in " ".join(ei.value.command)
    m = bed.mark()
    g.clone(info["https_url"], "p", username=user, password=pw, timeout_secs=60)
    assert g.remote_get("p") == info["https_url"]
    g.configure_user("p", "Sandbox User", "sandbox@example.test")
    sh(sandbox, "cd p && echo pushed > pushed.txt && git add pushed.txt && git commit -q -m pushed")
    local = git_in(sandbox, "p", "rev-parse HEAD")
    with pytest.raises(wr.GitError) as ei:
        g.push("p")
    assert ei.value.exit_code == 128
    with pytest.raises(wr.GitError) as ei:
        g.push("p", username=user, password="nope")
    assert "Authentication failed" in ei.value.stderr
    assert gs().rev(bed, name) == info["head"]
    g.push("p", username=user, password=pw)
    assert gs().rev(bed, name) == local
    later = gs().commit(bed, name, {"later.txt": "l\n"}, "later")
    g.fetch("p", username=user, password=pw)
    assert g.status("p").behind == 1
    g.pull("p", username=user, password=pw)
    assert git_in(sandbox, "p", "rev-parse HEAD") == later
    bed.settle()
    auth = "Basic " + base64.b64encode(f"{user}:{pw}".encode()).decode()
    seen = [(r["path"].rsplit("/", 1)[-1], dict((k.lower(), v) for k, v in r["headers"]).get("authorization"))
            for r in bed.http_requests(since=m, host="github.com") if r["status"] == 200]
    assert ("git-receive-pack", auth) in seen and ("git-upload-pack", auth) in seen
    # nothing kept them
    token = "planted-" + secrets.token_hex(8)
    g.set_config("p", "warren.planted", token)
    scan = ("grep -rlsF -e %s /workspace %s /tmp /etc /var /run; test ! -e %s/.git-credentials"
            % ("{}", home, home))
    r = sandbox.exec("sh", "-c", scan.format(token), timeout_secs=120)
    assert r.stdout_text.strip() == "/workspace/p/.git/config", r.stdout_text + r.stderr_text
    r = sandbox.exec("sh", "-c", scan.format(pw), timeout_secs=120)
    assert r.stdout_text == "" and r.exit_code == 0, r.stdout_text + r.stderr_text
    assert pw not in sh(sandbox, "cat /workspace/p/.git/config /workspace/p/.git/FETCH_HEAD")
    assert [p.argv for p in sandbox.processes() if p.running and p.argv[0] == "git"] == []


def test_pull_is_fast_forward_only(sandbox, bed):
    g = sandbox.git
    name = unique()
    info = gs().new_repo(bed, name)
    g.clone(info["https_url"], "r", depth=None)
    g.configure_user("r", "T", "t@example.test")
    c2 = gs().commit(bed, name, {"a.txt": "2\n"}, "c2")
    g.pull("r")
    assert git_in(sandbox, "r", "rev-parse HEAD") == c2
    sh(sandbox, "cd r && echo local > local.txt && git add local.txt && git commit -q -m local")
    local = git_in(sandbox, "r", "rev-parse HEAD")
    c3 = gs().commit(bed, name, {"a.txt": "3\n"}, "c3")
    with pytest.raises(wr.GitError) as ei:
        g.pull("r")
    e = ei.value
    assert e.exit_code == 128 and "Not possible to fast-forward" in e.stderr
    assert e.command == ["git", "-C", "r", "pull", "--quiet", "--ff-only", "origin"]
    assert str(e).startswith("git -C r pull --quiet --ff-only origin: exit code 128: ")
    assert git_in(sandbox, "r", "rev-parse HEAD") == local
    st = g.status("r")
    assert (st.ahead, st.behind, st.is_clean) == (1, 1, True)
    assert git_in(sandbox, "r", "rev-parse origin/main") == c3
    # pushing the diverged branch is refused too; reset to the remote and pull works
    with pytest.raises(wr.GitError) as ei:
        g.push("r", username=bed.git["user"], password=bed.git["password"])
    assert "rejected" in ei.value.stderr
    g.reset("r", "origin/main", hard=True)
    g.pull("r")
    assert git_in(sandbox, "r", "rev-parse HEAD") == c3 and g.status("r").is_clean


def test_branches_remotes_config_reset(sandbox, work):
    g = sandbox.git
    g.clone(work["https_url"], "r", depth=None)
    g.configure_user("r", "Repo User", "repo@example.test")
    assert g.get_config("r", "user.name") == "Repo User"
    assert g.get_config("r", "no.such") is None
    r = sandbox.exec("git", "config", "--global", "--get", "user.name")
    assert r.exit_code == 1                         # the repository's config only
    g.checkout_branch("r", "feature")
    assert g.branches("r") == ["feature", "main"]
    g.create_branch("r", "topic")
    sh(sandbox, "cd r && echo t > t.txt && git add t.txt && git commit -q -m topic")
    g.checkout_branch("r", "main")
    with pytest.raises(wr.GitError) as ei:
        g.delete_branch("r", "topic")
    assert "not fully merged" in ei.value.stderr and ei.value.exit_code == 1
    g.delete_branch("r", "topic", force=True)
    assert g.branches("r") == ["feature", "main"]
    g.remote_add("r", "mirror", work["git_url"])
    assert g.remotes("r") == ["mirror", "origin"]
    assert g.remote_get("r", "mirror") == work["git_url"]
    g.fetch("r", "mirror")
    assert "mirror/feature" in g.branches("r", remote=True)
    g.set_config("r", "core.abbrev", "12")
    assert g.get_config("r", "core.abbrev") == "12"
    g.reset("r", work["c"][0], hard=True)
    assert sh(sandbox, "cat r/README.md") == "c1"
    assert g.status("r").behind == 2


def test_timeout_applies_to_each_command(sandbox, work):
    """A git process that outlives timeout_secs is killed and raises
    GitError naming the timeout; the hook it ran is gone too."""
    g = sandbox.git
    g.clone(work["https_url"], "r", depth=None, timeout_secs=60)
    sh(sandbox, "printf '#!/bin/sh\\nsleep 30\\n' > r/.git/hooks/post-checkout && "
                "chmod +x r/.git/hooks/post-checkout")
    t0 = time.monotonic()
    with pytest.raises(wr.GitError) as ei:
        g.checkout_branch("r", "feature", timeout_secs=2)
    took = time.monotonic() - t0
    assert "timed out after 2 s" in str(ei.value) and ei.value.command[-2] == "feature"
    assert 1.5 < took < 15, took
    assert "sleep 30" not in sh(sandbox, "ps -eo args")
    sh(sandbox, "rm r/.git/hooks/post-checkout")
    g.checkout_branch("r", "main", timeout_secs=30)
    assert g.status("r", timeout_secs=30).current_branch == "main"


def test_image_without_git_raises_git_error(client):
    with client.create(image="busybox:latest") as sb:
        with pytest.raises(wr.GitError) as ei:
            sb.git.status()
    assert ei.value.command[0] == "git" and ei.value.exit_code == 127
    assert "the image needs git" in str(ei.value)


def test_ssh_remote_uses_the_sandbox_ssh_configuration(client, bed):
    """"SSH remotes use the sandbox's existing SSH configuration": a
    managed-SSH alias (key in warrend's agent, never in the sandbox) clones
    and pushes through the helpers."""
    if bed.ssh is None:
        pytest.skip("no sshd (openssh-server) on this host")
    with open(bed.ssh.key) as f:
        client.set_secret("GIT_TEST_DEPLOY_KEY", f.read())
    name = unique()
    info = gs().new_repo(bed, name)
    dest = {"github": SshDest("github.com", "GIT_TEST_DEPLOY_KEY", username="git",
                              host_keys=[bed.ssh.host_pubkey])}
    with client.create(managed_ssh=dest) as sb:
        sb.git.clone(f"github:{name}", "s", depth=None, timeout_secs=60)
        assert git_in(sb, "s", "rev-parse HEAD") == info["head"]
        sb.git.configure_user("s", "T", "t@example.test")
        sh(sb, "cd s && echo via-ssh > ssh.txt && git add ssh.txt && git commit -q -m ssh")
        sb.git.push("s", timeout_secs=60)
        assert gs().rev(bed, name) == git_in(sb, "s", "rev-parse HEAD")
