"""The bed's git servers beyond read-only smart HTTP, and repositories
made at run time.

* Smart HTTP with Basic auth (web.py asks http_auth() before it runs
  `git http-backend`): a request that carries credentials must carry a
  known user's (else 401); pushes (git-receive-pack) and every request for
  a repository of the owner `private` (https://github.com/private/...)
  need them. The authenticated user reaches git http-backend as
  REMOTE_USER, which is what enables receive-pack there.
* `git daemon` (git://, port 9418, every bed address, IPv4 and IPv6,
  read-only, every repository below the git root exported).
* new_repo() / commit() / rev(): bare repositories below the git root and
  commits pushed into them from the host, for tests that need branches,
  history or a remote that moves.
"""
import base64
import binascii
import hmac
import os
import secrets
import shutil
import subprocess
import tempfile
import time

GIT_DAEMON_PORT = 9418
PRIVATE_OWNER = "private"
USER = "warren-bot"


def setup(bed):
    """Credentials and URLs into bed.git (called once the content exists)."""
    g = bed.git
    g["user"] = USER
    g["password"] = "pw-" + secrets.token_urlsafe(12)
    g["users"] = {USER: g["password"]}
    g["git_url"] = f"git://github.com/{g['repo']}"
    g["private_owner"] = PRIVATE_OWNER
    g["daemon_port"] = GIT_DAEMON_PORT


def web_config(bed):
    """The web server's configuration keys for http_auth()."""
    return {"git_users": bed.git["users"], "git_private_owners": [PRIVATE_OWNER]}


def http_auth(cfg, authorization, path, query):
    """(deny, user) for one git smart-HTTP request: deny is True when the
    server must answer 401 (credentials missing where needed, or wrong);
    user the authenticated user or None. Pure."""
    users = cfg.get("git_users") or {}
    user = None
    scheme, _, token = (authorization or "").strip().partition(" ")
    # another scheme (a Bearer token a credential rule added for the API on
    # the same host) is no git credential: the request is anonymous
    if scheme.lower() == "basic":
        try:
            name, sep, password = base64.b64decode(token.strip(), validate=True).decode().partition(":")
        except (binascii.Error, UnicodeDecodeError):
            return True, None
        want = users.get(name)
        if not sep or want is None or not hmac.compare_digest(want.encode(), password.encode()):
            return True, None
        user = name
    owner = path.split("/")[1] if path.count("/") >= 2 else ""
    push = path.endswith("/git-receive-pack") or "service=git-receive-pack" in query.split("&")
    if user is None and (push or owner in (cfg.get("git_private_owners") or ())):
        return True, None
    return False, user


def _git_env(home):
    return {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": home, "GIT_CONFIG_NOSYSTEM": "1",
            "GIT_CONFIG_COUNT": "1", "GIT_CONFIG_KEY_0": "safe.directory", "GIT_CONFIG_VALUE_0": "*"}


def start_daemon(bed):
    """Spawn `git daemon` in the internet netns (bed.procs["git_daemon"],
    output in logs/git_daemon.out)."""
    root = bed.git["root"]
    argv = ["env", "-i"] + [f"{k}={v}" for k, v in _git_env(root).items()] + [
        "git", "daemon", "--export-all", f"--base-path={root}", "--reuseaddr", "--informative-errors",
        "--verbose", f"--port={GIT_DAEMON_PORT}", "--log-destination=stderr"]
    return bed._spawn("git_daemon", argv)


def wait_daemon(bed, deadline):
    while f":{GIT_DAEMON_PORT}" not in bed.nsexec(["ss", "-Hltn", "sport", "=", f":{GIT_DAEMON_PORT}"]).stdout:
        bed._check_alive("git_daemon")
        if time.time() > deadline:
            raise RuntimeError("fakenet: git daemon not listening after 15 s")
        time.sleep(0.01)


def _run(argv, cwd, home):
    # safe.directory also for the upload-pack of a local clone (git clears
    # GIT_CONFIG_COUNT for it): a global config in a scratch HOME
    cfg = os.path.join(home, ".gitconfig")
    if not os.path.exists(cfg):
        with open(cfg, "w") as f:
            f.write("[safe]\n\tdirectory = *\n")
    env = _git_env(home)
    env.update(GIT_AUTHOR_NAME="fakenet", GIT_AUTHOR_EMAIL="fakenet@example.test",
               GIT_COMMITTER_NAME="fakenet", GIT_COMMITTER_EMAIL="fakenet@example.test")
    p = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True)
    if p.returncode != 0:
        raise RuntimeError(f"fakenet git: {' '.join(argv)}: {p.stderr.strip()}")
    return p.stdout


def _owner(bed, path):
    uid = getattr(bed, "ssh", None) and 60999
    if uid:
        for dirpath, _, filenames in os.walk(path):
            os.chown(dirpath, uid, uid)
            for fn in filenames:
                os.chown(os.path.join(dirpath, fn), uid, uid)


def new_repo(bed, name, files=None, branch="main"):
    """A bare repository `name` ("owner/repo.git") below the git root with
    one commit of `files` ({path: text}, default a README) on `branch`.
    Returns {"path", "https_url", "git_url", "head"}; owner "private" makes
    a repository that needs credentials over HTTPS."""
    if not name.endswith(".git") or name.count("/") != 1 or ".." in name:
        raise ValueError(f"fakenet git: repository name {name!r} is not owner/name.git")
    bare = os.path.join(bed.git["root"], name)
    if os.path.exists(bare):
        raise FileExistsError(bare)
    os.makedirs(os.path.dirname(bare), exist_ok=True)
    tmp = tempfile.mkdtemp(prefix="fakenet-git-")
    try:
        _run(["git", "init", "-q", "--bare", "-b", branch, bare], None, tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    head = commit(bed, name, files or {"README.md": f"# {name}\n"}, "initial commit", branch=branch)
    return {"path": bare, "https_url": f"https://github.com/{name}", "git_url": f"git://github.com/{name}",
            "head": head}


def commit(bed, name, files, message, branch="main", parent=None, remove=()):
    """Commit `files` ({path: text}) and the removal of `remove` onto
    `branch` of repository `name` (a new branch starts at `parent`, default
    `branch` itself or nothing), pushed from a scratch clone on the host.
    Returns the new commit id."""
    bare = os.path.join(bed.git["root"], name)
    tmp = tempfile.mkdtemp(prefix="fakenet-git-")
    try:
        work = os.path.join(tmp, "w")
        _run(["git", "clone", "-q", bare, work], None, tmp)
        remote = _run(["git", "branch", "-r", "--format=%(refname:short)"], work, tmp).split()
        if f"origin/{branch}" in remote:
            _run(["git", "checkout", "-q", "-B", branch, f"origin/{branch}"], work, tmp)
        elif parent is not None:
            _run(["git", "checkout", "-q", "-b", branch, f"origin/{parent}"], work, tmp)
        else:
            _run(["git", "checkout", "-q", "--orphan", branch], work, tmp)
        for rel, text in files.items():
            p = os.path.join(work, rel)
            os.makedirs(os.path.dirname(p), exist_ok=True)
            with open(p, "w") as f:
                f.write(text)
        for rel in remove:
            _run(["git", "rm", "-q", "--", rel], work, tmp)
        _run(["git", "add", "-A"], work, tmp)
        _run(["git", "commit", "-q", "--allow-empty", "-m", message], work, tmp)
        _run(["git", "push", "-q", "origin", f"HEAD:refs/heads/{branch}"], work, tmp)
        sha = _run(["git", "rev-parse", "HEAD"], work, tmp).strip()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    _owner(bed, bare)
    return sha


def rev(bed, name, ref="main"):
    """The commit `ref` names in repository `name` (None when it does not exist)."""
    bare = os.path.join(bed.git["root"], name)
    p = subprocess.run(["git", "-C", bare, "rev-parse", "--verify", "-q", f"{ref}^{{commit}}"],
                       env=_git_env(bed.git["root"]), capture_output=True, text=True)
    return p.stdout.strip() or None
