"""Self-tests of the bed's git servers (gitserver.py): smart HTTP with
Basic auth for pushes and private repositories, git daemon, repositories
made at run time. Clients are the host's git in a client netns."""
import base64
import subprocess

import pytest

from fakenet import gitserver


def basic(user, password):
    return "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()


CFG = {"git_users": {"bot": "s3cret"}, "git_private_owners": ["private"]}


@pytest.mark.parametrize("auth, path, query, want", [
    (None, "/example/repo.git/info/refs", "service=git-upload-pack", (False, None)),
    (None, "/example/repo.git/git-upload-pack", "", (False, None)),
    (None, "/example/repo.git/info/refs", "service=git-receive-pack", (True, None)),
    (None, "/example/repo.git/git-receive-pack", "", (True, None)),
    (None, "/private/x.git/info/refs", "service=git-upload-pack", (True, None)),
    (basic("bot", "s3cret"), "/private/x.git/info/refs", "service=git-upload-pack", (False, "bot")),
    (basic("bot", "s3cret"), "/example/repo.git/git-receive-pack", "", (False, "bot")),
    (basic("bot", "wrong"), "/example/repo.git/info/refs", "service=git-upload-pack", (True, None)),
    (basic("bot", "s3cret" + "x"), "/example/repo.git/info/refs", "", (True, None)),
    (basic("nobody", "s3cret"), "/example/repo.git/info/refs", "", (True, None)),
    ("Basic !!!", "/example/repo.git/info/refs", "", (True, None)),
    ("Basic " + base64.b64encode(b"bot").decode(), "/example/repo.git/info/refs", "", (True, None)),
    ("Bearer s3cret", "/example/repo.git/info/refs", "", (False, None)),
    ("Bearer s3cret", "/private/repo.git/info/refs", "", (True, None)),
])
def test_http_auth(auth, path, query, want):
    assert gitserver.http_auth(CFG, auth, path, query) == want


def git(client, *args, env=None):
    return client.run(["git", *args], env=env, timeout=60)


def test_git_daemon_clone_v4_and_v6(fakenet, fakenet_client, tmp_path):
    for fam in ("--ipv4", "--ipv6"):
        dst = tmp_path / fam
        r = git(fakenet_client, "clone", "-q", fam, fakenet.git["git_url"], str(dst))
        assert r.returncode == 0, r.stderr
        head = subprocess.run(["git", "-C", str(dst), "rev-parse", "HEAD"], capture_output=True,
                              text=True, env=fakenet.client_env()).stdout.strip()
        assert head == fakenet.git["head"]
    r = git(fakenet_client, "ls-remote", "git://github.com/example/nothere.git")
    assert r.returncode == 128 and "no such repository" in r.stderr, r.stderr
    r = git(fakenet_client, "-C", str(tmp_path / "--ipv4"), "push", "origin", "HEAD:refs/heads/x")
    assert r.returncode != 0 and "service not enabled" in r.stderr, r.stderr


def test_push_and_private_clone_need_credentials(fakenet, fakenet_client, tmp_path):
    info = gitserver.new_repo(fakenet, "private/auth-selftest.git", {"a.txt": "a\n"})
    user, pw = fakenet.git["user"], fakenet.git["password"]
    m = fakenet.mark()
    r = git(fakenet_client, "clone", "-q", info["https_url"], str(tmp_path / "anon"))
    assert r.returncode == 128 and "could not read Username" in r.stderr, r.stderr
    authed = info["https_url"].replace("https://", f"https://{user}:{pw}@")
    r = git(fakenet_client, "clone", "-q", authed, str(tmp_path / "w"))
    assert r.returncode == 0, r.stderr
    w = str(tmp_path / "w")
    r = git(fakenet_client, "-C", w, "-c", "user.name=t", "-c", "user.email=t@example.test",
            "commit", "-q", "--allow-empty", "-m", "pushed")
    assert r.returncode == 0, r.stderr
    wrong = info["https_url"].replace("https://", f"https://{user}:nope@")
    r = git(fakenet_client, "-C", w, "push", "-q", wrong, "HEAD:main")
    assert r.returncode == 128 and "Authentication failed" in r.stderr, r.stderr
    assert gitserver.rev(fakenet, "private/auth-selftest.git") == info["head"]
    r = git(fakenet_client, "-C", w, "push", "-q", "origin", "HEAD:main")
    assert r.returncode == 0, r.stderr
    local = subprocess.run(["git", "-C", w, "rev-parse", "HEAD"], capture_output=True, text=True,
                           env=fakenet.client_env()).stdout.strip()
    assert gitserver.rev(fakenet, "private/auth-selftest.git") == local != info["head"]
    fakenet.settle()
    reqs = fakenet.http_requests(since=m, host="github.com")
    by = [(r["path"].rsplit("/", 1)[-1], r["status"],
           dict((k.lower(), v) for k, v in r["headers"]).get("authorization")) for r in reqs]
    assert ("refs", 401, None) in by
    assert ("git-receive-pack", 200, basic(user, pw)) in by
    assert ("refs", 401, basic(user, "nope")) in by


def test_new_repo_commit_rev(fakenet):
    info = gitserver.new_repo(fakenet, "example/selftest-branches.git")
    a = gitserver.commit(fakenet, "example/selftest-branches.git", {"x": "1"}, "two")
    b = gitserver.commit(fakenet, "example/selftest-branches.git", {"y": "2"}, "feat",
                         branch="feature", parent="main")
    assert gitserver.rev(fakenet, "example/selftest-branches.git", "main") == a
    assert gitserver.rev(fakenet, "example/selftest-branches.git", "feature") == b
    assert gitserver.rev(fakenet, "example/selftest-branches.git", f"{b}~1") == a
    assert gitserver.rev(fakenet, "example/selftest-branches.git", f"{a}~1") == info["head"]
    assert gitserver.rev(fakenet, "example/selftest-branches.git", "nope") is None
    with pytest.raises(FileExistsError):
        gitserver.new_repo(fakenet, "example/selftest-branches.git")
    with pytest.raises(ValueError):
        gitserver.new_repo(fakenet, "../escape.git")
