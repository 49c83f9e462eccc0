"""`sandbox.git` against the in-process fake server (tests/fake_server.py),
whose Exec runs the argv as a local process: the helpers drive the host's
real git on local repositories (file:// remotes). What travels in each
ExecStart (argv, env, timeout) is checked from the server's record. The
same helpers against warrend and real git servers (smart HTTP with auth,
git daemon) are tests/e2e/test_git.py."""
import inspect
import os
import subprocess
import sys

import pytest

sys.path.insert(0, os.path.dirname(__file__))
import fake_server  # noqa: E402

import warren as wr  # noqa: E402
from warren import SandboxClient  # noqa: E402
from warren._git import _cred_args, _parse_status  # noqa: E402

HELPERS = ["clone", "init", "status", "branches", "create_branch", "checkout_branch", "delete_branch",
           "fetch", "pull", "push", "reset", "restore", "remote_add", "remote_get", "remotes",
           "get_config", "set_config", "configure_user"]


@pytest.fixture
def server():
    srv, port, sbx, sysv = fake_server.start()
    yield port, sbx
    srv.stop(0)


@pytest.fixture
def home(tmp_path, monkeypatch):
    """A git environment of the test's own (the fake server's processes
    inherit os.environ): no system or user config, a fixed identity."""
    h = tmp_path / "home"
    h.mkdir()
    for k, v in {"HOME": str(h), "GIT_CONFIG_NOSYSTEM": "1", "GIT_AUTHOR_NAME": "t",
                 "GIT_AUTHOR_EMAIL": "t@example.test", "GIT_COMMITTER_NAME": "t",
                 "GIT_COMMITTER_EMAIL": "t@example.test", "LC_ALL": "C"}.items():
        monkeypatch.setenv(k, v)
    monkeypatch.delenv("GIT_CONFIG_GLOBAL", raising=False)
    monkeypatch.chdir(tmp_path)
    return h


@pytest.fixture
def sb(server, home):
    port, _ = server
    with SandboxClient(f"127.0.0.1:{port}") as c:
        yield c.create(image="img")


def sh(cwd, *cmd):
    p = subprocess.run(["git", "-C", str(cwd), *cmd], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    return p.stdout.strip()


def commit(cwd, name, text, msg=None):
    (cwd / name).write_text(text)
    sh(cwd, "add", name)
    sh(cwd, "commit", "-q", "-m", msg or f"{name}={text}")
    return sh(cwd, "rev-parse", "HEAD")


@pytest.fixture
def upstream(tmp_path, home):
    """A bare repository (file:// URL) with main: c1..c3, feature: c3+f1."""
    work = tmp_path / "up-work"
    work.mkdir()
    sh(work, "init", "-q", "-b", "main")
    c = [commit(work, "a.txt", str(i)) for i in (1, 2, 3)]
    sh(work, "checkout", "-q", "-b", "feature")
    f1 = commit(work, "b.txt", "f")
    sh(work, "checkout", "-q", "main")
    bare = tmp_path / "up.git"
    subprocess.run(["git", "clone", "-q", "--bare", str(work), str(bare)], check=True)
    return {"url": "file://" + str(bare), "bare": bare, "work": work, "c": c, "f1": f1}


def execs(server, since):
    _, sbx = server
    return [r.start for r in sbx.exec_requests[since:] if r.WhichOneof("kind") == "start"]


def test_every_helper_has_timeout_secs_and_the_seed_signatures():
    for name in HELPERS:
        sig = inspect.signature(getattr(wr.Git, name))
        p = sig.parameters.get("timeout_secs")
        assert p is not None and p.kind == p.KEYWORD_ONLY and p.default is None, name
    params = list(inspect.signature(wr.Git.clone).parameters)
    assert params[:3] == ["self", "url", "path"]
    assert inspect.signature(wr.Git.clone).parameters["depth"].default == 1
    assert list(inspect.signature(wr.Git.status).parameters)[:2] == ["self", "path"]
    assert list(inspect.signature(wr.Git.branches).parameters)[:2] == ["self", "path"]
    assert inspect.signature(wr.Git.delete_branch).parameters["force"].default is False
    for name in ("clone", "fetch", "pull", "push"):
        ps = inspect.signature(getattr(wr.Git, name)).parameters
        assert ps["username"].kind == ps["password"].kind == inspect.Parameter.KEYWORD_ONLY, name


def test_timeout_travels_with_every_command_of_every_helper(sb, server, upstream, tmp_path):
    _, sbx = server
    t = dict(timeout_secs=7.5)
    n0 = len(sbx.exec_requests)
    g = sb.git
    g.clone(upstream["url"], "r", commit_id=upstream["c"][1], **t)      # 3 commands
    g.clone(upstream["url"], "full", depth=None, **t)
    g.init("fresh", **t)
    g.status("r", **t)
    g.branches("full", **t)
    g.create_branch("full", "topic", **t)
    g.checkout_branch("full", "main", **t)
    g.delete_branch("full", "topic", **t)
    g.fetch("full", **t)
    g.pull("full", **t)
    g.create_branch("full", "pushed", **t)
    g.push("full", "origin", "pushed", **t)
    g.reset("full", "HEAD", **t)
    g.restore("full", ["a.txt"], **t)
    g.remote_add("full", "mirror", upstream["url"], **t)
    assert g.remote_get("full", "mirror", **t) == upstream["url"]
    assert g.remotes("full", **t) == ["mirror", "origin"]
    assert g.get_config("full", "remote.mirror.url", **t) == upstream["url"]
    g.set_config("full", "x.y", "z", **t)
    g.configure_user("full", "N", "n@example.test", **t)              # 2 commands
    starts = execs(server, n0)
    assert len(starts) == 23
    assert all(s.timeout_secs == 7.5 for s in starts), [(list(s.argv), s.timeout_secs) for s in starts]
    assert all(s.argv[0] == "git" and s.env["GIT_TERMINAL_PROMPT"] == "0" for s in starts)
    # without timeout_secs: none (0) travels
    n1 = len(sbx.exec_requests)
    g.status("r")
    assert execs(server, n1)[0].timeout_secs == 0
    with pytest.raises(ValueError, match="timeout_secs"):
        g.status("r", timeout_secs=0)
    with pytest.raises(ValueError, match="timeout_secs"):
        g.status("r", timeout_secs=True)


def test_paths_are_relative_to_the_working_directory(sb, upstream, tmp_path):
    sb.git.init("sub/dir/repo", initial_branch="trunk")
    assert (tmp_path / "sub/dir/repo/.git").is_dir()
    assert sb.git.status("sub/dir/repo").current_branch == "trunk"
    sb.git.clone(upstream["url"], "-dash")          # a path starting with '-' is a path
    assert (tmp_path / "-dash/a.txt").read_text() == "3"
    assert sb.git.status("-dash").current_branch == "main"
    sb.git.init(str(tmp_path / "abs"))
    assert (tmp_path / "abs/.git").is_dir()


def test_clone_depth_branch_and_commit(sb, upstream, tmp_path):
    g = sb.git
    c1, c2, c3 = upstream["c"]
    g.clone(upstream["url"], "d1")                        # depth=1, remote default branch
    assert sh(tmp_path / "d1", "rev-list", "--count", "HEAD") == "1"
    assert (tmp_path / "d1/.git/shallow").exists()
    assert g.status("d1").current_branch == "main" and g.branches("d1") == ["main"]
    assert sh(tmp_path / "d1", "rev-parse", "HEAD") == c3
    g.clone(upstream["url"], "full", depth=None)
    assert sh(tmp_path / "full", "rev-list", "--count", "HEAD") == "3"
    assert not (tmp_path / "full/.git/shallow").exists()
    assert g.branches("full", remote=True) == ["origin/feature", "origin/main"]
    g.clone(upstream["url"], "feat", branch="feature")
    assert g.status("feat").current_branch == "feature"
    assert sh(tmp_path / "feat", "rev-parse", "HEAD") == upstream["f1"]
    g.clone(upstream["url"], "at", commit_id=c2)         # full id: fetched at depth 1
    st = g.status("at")
    assert st.current_branch is None and st.is_clean
    assert sh(tmp_path / "at", "rev-parse", "HEAD") == c2
    assert sh(tmp_path / "at", "rev-list", "--count", "HEAD") == "1"
    g.clone(upstream["url"], "short", commit_id=c1[:10])  # abbreviated: full history
    assert sh(tmp_path / "short", "rev-parse", "HEAD") == c1
    g.clone(upstream["url"], "fb", branch="feature", commit_id=c2, depth=2)
    assert sh(tmp_path / "fb", "rev-parse", "HEAD") == c2
    assert sh(tmp_path / "fb", "rev-list", "--count", "HEAD") == "2"
    with pytest.raises(wr.GitError) as ei:
        g.clone(upstream["url"], "nope", commit_id="0" * 40)
    assert ei.value.command[:2] == ["git", "-C"] and "fetch" in ei.value.command
    assert not (tmp_path / "nope").exists()              # nothing half-made stays
    with pytest.raises(wr.GitError) as ei:
        g.clone(upstream["url"], "nope", commit_id="0" * 12)   # abbreviated: the checkout fails
    assert "checkout" in ei.value.command and not (tmp_path / "nope").exists()
    g.clone(upstream["url"], "nope", commit_id=c3)
    with pytest.raises(wr.GitError) as ei:
        g.clone(upstream["url"], "nob", branch="no-such-branch")
    assert ei.value.exit_code == 128 and "no-such-branch" in ei.value.stderr
    for bad in (0, -1, True, 1.5, "1"):
        with pytest.raises(ValueError, match="depth"):
            g.clone(upstream["url"], "x", depth=bad)


def test_status_reports_staged_modified_untracked_renamed_conflicted(sb, upstream, tmp_path):
    g = sb.git
    g.clone(upstream["url"], "r", depth=None)
    r = tmp_path / "r"
    assert g.status("r") == wr.GitStatus("main", 0, 0)
    commit(r, "big.txt", "line\n" * 50)
    (r / "a.txt").write_text("changed")
    (r / "new dir").mkdir()
    (r / "new dir" / "n ew.txt").write_text("u")
    (r / "ünï.txt").write_text("x")
    st = g.status("r")
    assert st.current_branch == "main" and not st.is_clean
    assert st.modified == ["a.txt"] and st.staged == []
    assert st.untracked == ["new dir/n ew.txt", "ünï.txt"]
    assert sorted(st.files) == sorted(["a.txt", "new dir/n ew.txt", "ünï.txt"])
    sh(r, "add", "a.txt")
    sh(r, "mv", "big.txt", "moved.txt")
    (r / "moved.txt").write_text("line\n" * 50 + "more\n")
    st = g.status("r")
    assert st.staged == ["a.txt", "moved.txt"] and st.modified == ["moved.txt"]
    assert "big.txt" not in st.files                      # a rename: its new name only
    sh(r, "add", "-A")
    sh(r, "commit", "-q", "-m", "local")
    st = g.status("r")
    assert (st.ahead, st.behind, st.files) == (2, 0, [])
    sh(upstream["work"], "checkout", "-q", "main")
    commit(upstream["work"], "a.txt", "upstream side")
    sh(upstream["work"], "push", "-q", str(upstream["bare"]), "main")
    g.fetch("r")
    st = g.status("r")
    assert (st.ahead, st.behind) == (2, 1)
    sh(tmp_path / "r", "checkout", "-q", "--detach")
    assert g.status("r").current_branch is None
    # a conflict: both sides changed a file
    g.checkout_branch("r", "main")
    subprocess.run(["git", "-C", str(r), "merge", "-q", "origin/main"], capture_output=True)
    st = g.status("r")
    assert st.conflicted == ["a.txt"] and st.files == ["a.txt"] and st.staged == [], st


def test_parse_status_v2_records():
    out = ("# branch.oid (initial)\0# branch.head dev\0"
           "1 .M N... 100644 100644 100644 1111111111111111111111111111111111111111 "
           "1111111111111111111111111111111111111111 path with spaces\0"
           "2 R. N... 100644 100644 100644 1111111111111111111111111111111111111111 "
           "1111111111111111111111111111111111111111 R100 new name\0old name\0"
           "u UU N... 100644 100644 100644 100644 1111111111111111111111111111111111111111 "
           "1111111111111111111111111111111111111111 1111111111111111111111111111111111111111 c.txt\0"
           "? dir/u.txt\0")
    st = _parse_status(out)
    assert st == wr.GitStatus("dev", 0, 0, ["path with spaces", "new name", "c.txt", "dir/u.txt"],
                              staged=["new name"], modified=["path with spaces"],
                              untracked=["dir/u.txt"], conflicted=["c.txt"])
    st = _parse_status("# branch.oid 1234\0# branch.head (detached)\0")
    assert st.current_branch is None and st.is_clean
    st = _parse_status("# branch.head main\0# branch.upstream origin/main\0# branch.ab +3 -12\0")
    assert (st.current_branch, st.ahead, st.behind) == ("main", 3, 12)


def test_branches_create_checkout_delete(sb, upstream, tmp_path):
    g = sb.git
    g.clone(upstream["url"], "r", depth=None)
    assert g.branches("r") == ["main"]
    g.checkout_branch("r", "feature")                   # from origin/feature: tracking
    assert g.status("r").current_branch == "feature"
    assert g.branches("r") == ["feature", "main"]
    g.create_branch("r", "topic")
    assert g.status("r").current_branch == "topic"
    g.create_branch("r", "later", checkout=False, start_point="main")
    assert g.status("r").current_branch == "topic"
    assert sh(tmp_path / "r", "rev-parse", "later") == upstream["c"][2]
    commit(tmp_path / "r", "t.txt", "unmerged work")
    g.checkout_branch("r", "main")
    with pytest.raises(wr.GitError) as ei:
        g.delete_branch("r", "topic")
    e = ei.value
    assert e.exit_code == 1 and "not fully merged" in e.stderr
    assert e.command == ["git", "-C", "r", "branch", "-d", "topic"]
    assert "git -C r branch -d topic" in str(e) and "exit code 1" in str(e) and "not fully merged" in str(e)
    assert "topic" in g.branches("r")
    g.delete_branch("r", "topic", force=True)
    g.delete_branch("r", "later")
    assert g.branches("r") == ["feature", "main"]
    with pytest.raises(wr.GitError):
        g.checkout_branch("r", "no-such")
    for bad in ("-f", "--orphan", "", "a\nb"):
        with pytest.raises(ValueError):
            g.checkout_branch("r", bad)
        with pytest.raises(ValueError):
            g.create_branch("r", bad)


def test_pull_fast_forwards_and_refuses_a_diverged_branch(sb, upstream, tmp_path):
    g = sb.git
    g.clone(upstream["url"], "r")
    r = tmp_path / "r"
    w = upstream["work"]
    sh(w, "checkout", "-q", "main")
    c4 = commit(w, "a.txt", "4")
    sh(w, "push", "-q", str(upstream["bare"]), "main")
    g.pull("r")
    assert sh(r, "rev-parse", "HEAD") == c4
    local = commit(r, "local.txt", "mine")
    c5 = commit(w, "a.txt", "5")
    sh(w, "push", "-q", str(upstream["bare"]), "main")
    with pytest.raises(wr.GitError) as ei:
        g.pull("r")
    e = ei.value
    assert e.exit_code == 128 and "Not possible to fast-forward" in e.stderr
    assert e.command == ["git", "-C", "r", "pull", "--quiet", "--ff-only", "origin"]
    assert sh(r, "rev-parse", "HEAD") == local            # left as it was
    assert g.status("r").is_clean
    assert sh(r, "rev-parse", "origin/main") == c5


def test_push_remotes_config_reset_restore(sb, upstream, tmp_path, home):
    g = sb.git
    g.clone(upstream["url"], "r", depth=None)
    r = tmp_path / "r"
    assert g.remotes("r") == ["origin"] and g.remote_get("r") == upstream["url"]
    g.configure_user("r", "Repo User", "repo@example.test")
    assert g.get_config("r", "user.name") == "Repo User"
    assert g.get_config("r", "user.email") == "repo@example.test"
    assert not (home / ".gitconfig").exists()             # the repository's config only
    assert g.get_config("r", "no.such") is None
    g.set_config("r", "weird.value", "-starts with dash\tand tab")
    assert g.get_config("r", "weird.value") == "-starts with dash\tand tab"
    with pytest.raises(wr.GitError):
        g.get_config(str(tmp_path / "not-a-repo"), "user.name")
    g.create_branch("r", "pushed")
    c = commit(r, "p.txt", "pushed")
    with pytest.raises(wr.GitError) as ei:
        g.push("r")                                       # no upstream yet
    assert "no upstream" in ei.value.stderr
    g.push("r", "origin", "pushed", set_upstream=True)
    assert sh(upstream["bare"], "rev-parse", "pushed") == c
    assert g.get_config("r", "branch.pushed.remote") == "origin"
    g.create_branch("r", "second-push")
    g.push("r", set_upstream=True)                          # the current branch, as itself
    assert sh(upstream["bare"], "rev-parse", "second-push") == c
    assert g.get_config("r", "branch.second-push.merge") == "refs/heads/second-push"
    g.remote_add("r", "second", upstream["url"])
    assert g.remotes("r") == ["origin", "second"]
    with pytest.raises(wr.GitError):
        g.remote_add("r", "second", upstream["url"])
    with pytest.raises(wr.GitError):
        g.remote_get("r", "third")
    # restore and reset
    (r / "p.txt").write_text("scribble")
    (r / "a.txt").write_text("scribble")
    g.restore("r", ["p.txt"])
    assert (r / "p.txt").read_text() == "pushed" and g.status("r").modified == ["a.txt"]
    sh(r, "add", "a.txt")
    g.restore("r", "a.txt", staged=True)
    st = g.status("r")
    assert st.staged == [] and st.modified == ["a.txt"]
    g.reset("r", "HEAD~1")
    assert sh(r, "rev-parse", "HEAD") == upstream["c"][2]
    assert set(g.status("r").untracked) == {"p.txt"}
    g.reset("r", c, hard=True)
    assert g.status("r").is_clean and (r / "a.txt").read_text() == "3"
    with pytest.raises(ValueError):
        g.restore("r", [])
    with pytest.raises(ValueError):
        g.reset("r", "--hard")


def test_credentials_travel_in_env_only(sb, server, upstream, tmp_path):
    _, sbx = server
    secret = "p@ss w*rd $HOME %s \\n 'q\""
    n0 = len(sbx.exec_requests)
    sb.git.clone(upstream["url"], "r", username="me", password=secret, commit_id=upstream["c"][1])
    sb.git.fetch("r", username="me", password=secret)
    sb.git.status("r")
    starts = execs(server, n0)
    assert len(starts) == 5
    for s in starts:
        assert not any(secret in a or "me" == a for a in s.argv), list(s.argv)
    with_creds = [s for s in starts if "WARREN_GIT_PASSWORD" in s.env]
    sub = [next(a for a in s.argv[1:] if a in ("clone", "fetch", "checkout", "status")) for s in starts]
    assert sub == ["clone", "fetch", "checkout", "fetch", "status"]
    assert [s for s, x in zip(sub, starts) if "WARREN_GIT_PASSWORD" in x.env] == \
        ["clone", "fetch", "fetch"]                       # checkout and status carry none
    assert all(s.env["WARREN_GIT_PASSWORD"] == secret and s.env["WARREN_GIT_USERNAME"] == "me"
               for s in with_creds)
    assert sb.git.remote_get("r") == upstream["url"]
    assert secret not in (tmp_path / "r/.git/config").read_text()
    for bad in ("a\nb", "a\0b"):
        with pytest.raises(ValueError, match="password"):
            sb.git.fetch("r", username="me", password=bad)
    with pytest.raises(TypeError):
        sb.git.fetch("r", username="me", password=b"bytes")


def test_credential_helper_answers_get_and_no_helper_stores(sb, home):
    """The one-shot helper prints exactly the exec's values (shell
    metacharacters included), answers nothing to store/erase, and the
    emptied helper list keeps a configured `store` helper (global and
    URL-specific) from saving them; the control shows that helper works."""
    (home / ".gitconfig").write_text('[credential]\n\thelper = store\n'
                                     '[credential "https://example.test"]\n\thelper = store\n')
    secret = "p@ss w*rd $HOME %s \\ 'q\" `id`"
    env = {"WARREN_GIT_USERNAME": "user name", "WARREN_GIT_PASSWORD": secret}
    req = "protocol=https\nhost=example.test\n\n"
    cred = ["git"] + _cred_args()
    p = subprocess.run(cred + ["credential", "fill"], input=req, capture_output=True, text=True,
                       env=dict(os.environ, **env))
    assert p.returncode == 0, p.stderr
    assert p.stdout == f"protocol=https\nhost=example.test\nusername=user name\npassword={secret}\n"
    p = subprocess.run(cred + ["credential", "approve"], input=p.stdout, capture_output=True,
                       text=True, env=dict(os.environ, **env))
    assert p.returncode == 0, p.stderr
    assert not (home / ".git-credentials").exists()
    # control: the same approve without the emptied list stores it
    p = subprocess.run(["git", "credential", "approve"],
                       input=f"protocol=https\nhost=example.test\nusername=u\npassword={secret}\n",
                       capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    assert "example.test" in (home / ".git-credentials").read_text()


def test_git_errors_name_command_exit_code_and_stderr(sb, tmp_path):
    with pytest.raises(wr.GitError) as ei:
        sb.git.status("nothere")
    e = ei.value
    assert e.status == wr.Status.UNKNOWN and e.exit_code == 128
    assert e.command == ["git", "-C", "nothere", "status", "--porcelain=v2", "--branch", "-z",
                         "--untracked-files=all"]
    assert "nothere" in e.stderr
    assert str(e).startswith("git -C nothere status ") and "exit code 128: fatal:" in str(e)
    assert isinstance(e, wr.WarrenError)


def test_parse_status_of_hostile_output_is_a_status_or_a_git_error():
    """The output comes from inside the sandbox: malformed records raise
    GitError, random input never anything else."""
    import random
    for bad in ("# branch.ab 1 2\0", "# branch.ab +1\0", "# branch.ab +x -1\0", "1 .M\0",
                "2 R. N... 1 2 3 4 5 R100\0", "u UU\0", "# branch.ab +² -1\0"):
        with pytest.raises(wr.GitError, match="unexpected output"):
            _parse_status(bad)
    rnd = random.Random(14)
    alphabet = ["\0", " ", "#", "?", "!", "1", "2", "u", ".", "M", "+", "-", "a", "branch.ab",
                "branch.head", "# branch.ab ", "R100", "é"]
    for _ in range(3000):
        s = "".join(rnd.choice(alphabet) for _ in range(rnd.randint(0, 30)))
        try:
            st = _parse_status(s)
        except wr.GitError:
            continue
        assert isinstance(st, wr.GitStatus) and st.ahead >= 0 and st.behind >= 0
