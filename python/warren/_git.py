"""`sandbox.git`: git run through exec inside the sandbox (the image needs
git; the default image, ``Image.sandbox()``, has it).

Every helper is one or a few ``git`` processes started with
``sandbox.exec``. Paths name the repository root and are relative to the
sandbox's working directory (the image's WORKDIR, ``/workspace`` in the
default image, unless ``create(workdir=...)`` chose another); absolute
paths work too. ``timeout_secs`` applies to each git process a helper runs.
A git process that fails (non-zero exit, killed by the timeout) raises
:class:`~warren.GitError` carrying the command, its exit code and stderr.

HTTPS credentials (``username``/``password`` on clone, fetch, pull and
push) reach git through the environment of that one exec and a credential
helper given on its command line (``-c credential.helper=...``), which
prints them on git's ``get`` request. The helper list is reset first, so no
configured helper (``store``, ``cache``, a URL-specific one) is asked to
save them; the remote URL, ``.git/config`` and ``$HOME`` never see them.
"""
from __future__ import annotations

import shlex
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Dict, List, Optional, Sequence, Tuple

from warren._errors import GitError

if TYPE_CHECKING:
    from warren._sandbox import Sandbox

# Answers git's "get" with the credentials of this exec's environment and
# ignores "store" and "erase". printf, not echo: values are printed as given.
_CRED_HELPER = ('!f() { test "$1" = get || exit 0; '
                'printf "username=%s\\npassword=%s\\n" "$WARREN_GIT_USERNAME" "$WARREN_GIT_PASSWORD"; }; f')
_CRED_ENV = ("WARREN_GIT_USERNAME", "WARREN_GIT_PASSWORD")


def _cred_args() -> List[str]:
    """git options for a command given credentials: the helper list
    emptied (no configured helper, URL-specific ones included, is asked to
    store or erase them), then only ours."""
    return ["-c", "credential.helper=", "-c", "credential.helper=" + _CRED_HELPER]


@dataclass(frozen=True)
class GitStatus:
    """``git status`` of a repository. ``current_branch`` is None on a
    detached HEAD; ``ahead``/``behind`` count commits against the upstream
    (0 without one). ``files`` lists every path that differs from HEAD or
    is untracked; ``staged`` those with changes in the index, ``modified``
    those with unstaged changes in the work tree (deletions included),
    ``untracked`` the untracked ones, ``conflicted`` unmerged paths."""

    current_branch: Optional[str]
    ahead: int = 0
    behind: int = 0
    files: List[str] = field(default_factory=list)
    staged: List[str] = field(default_factory=list)
    modified: List[str] = field(default_factory=list)
    untracked: List[str] = field(default_factory=list)
    conflicted: List[str] = field(default_factory=list)

    @property
    def is_clean(self) -> bool:
        return not self.files


def _parse_status(out: str) -> GitStatus:
    """Parse ``git status --porcelain=v2 --branch -z``. The output comes
    from inside the sandbox: anything that is not that format raises
    GitError."""
    try:
        return _parse_status_v2(out)
    except (ValueError, IndexError) as e:
        raise GitError(f"git status: unexpected output ({e}): {out[:200]!r}", 0, "",
                       command=["git", "status", "--porcelain=v2", "--branch", "-z"]) from None


def _parse_status_v2(out: str) -> GitStatus:
    branch: Optional[str] = None
    ahead = behind = 0
    files: List[str] = []
    staged: List[str] = []
    modified: List[str] = []
    untracked: List[str] = []
    conflicted: List[str] = []
    recs = out.split("\0")
    i = 0
    while i < len(recs):
        rec = recs[i]
        i += 1
        if not rec:
            continue
        if rec.startswith("# branch.head "):
            head = rec[len("# branch.head "):]
            branch = None if head == "(detached)" else head
        elif rec.startswith("# branch.ab "):
            a, b = rec[len("# branch.ab "):].split()
            if not (a[:1] == "+" and b[:1] == "-" and a[1:].isdigit() and b[1:].isdigit()):
                raise ValueError(f"branch.ab {a} {b}")
            ahead, behind = int(a[1:]), int(b[1:])
        elif rec.startswith("#"):
            continue
        elif rec.startswith(("? ", "! ")) and len(rec) > 2:
            if rec[0] == "!":
                continue
            untracked.append(rec[2:])
            files.append(rec[2:])
        elif rec[:2] in ("1 ", "2 ", "u "):
            kind, xy = rec[0], rec[2:4]
            nfields = {"1": 8, "2": 9, "u": 10}[kind]
            path = rec.split(" ", nfields)[nfields]
            if len(xy) != 2 or not path:
                raise ValueError(f"record {rec[:80]!r}")
            if kind == "2":
                i += 1  # the original path of a rename or copy
            files.append(path)
            if kind == "u":
                conflicted.append(path)
                continue
            if xy[0] != ".":
                staged.append(path)
            if xy[1] != ".":
                modified.append(path)
    return GitStatus(branch, ahead, behind, files, staged, modified, untracked, conflicted)


def _name(what: str, value: object) -> str:
    """A ref, remote, config key or commit given as one argv word: a
    non-empty string that git cannot take for an option."""
    if not isinstance(value, str) or not value:
        raise ValueError(f"git: {what} must be a non-empty string, got {value!r}")
    if value.startswith("-"):
        raise ValueError(f"git: {what} {value!r} starts with '-' (git would read it as an option)")
    if "\0" in value or "\n" in value:
        raise ValueError(f"git: {what} {value!r} contains a NUL or newline")
    return value


def _path(value: object, what: str = "path") -> str:
    """A path argument; one starting with '-' is made './-...'."""
    if not isinstance(value, str) or not value:
        raise ValueError(f"git: {what} must be a non-empty string, got {value!r}")
    if "\0" in value:
        raise ValueError(f"git: {what} {value!r} contains a NUL")
    return "./" + value if value.startswith("-") else value


def _secret(what: str, value: Optional[str]) -> str:
    if value is None:
        return ""
    if not isinstance(value, str):
        raise TypeError(f"git: {what} must be a string")
    if "\n" in value or "\0" in value:
        raise ValueError(f"git: {what} contains a newline or NUL (git's credential protocol cannot carry it)")
    return value


def _timeout(value: Optional[float]) -> Optional[float]:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
        raise ValueError(f"git: timeout_secs must be a positive number of seconds, got {value!r}")
    return float(value)


class Git:
    """`sandbox.git`: clone, status, branches, fetch/pull/push, remotes and
    repository config, each run as git inside the sandbox."""

    def __init__(self, sandbox: "Sandbox"):
        self._sb = sandbox

    # --- plumbing ---
    def _git(self, args: Sequence[str], path: Optional[str] = ".", *,
             creds: Optional[Tuple[str, str]] = None,
             timeout_secs: Optional[float] = None, ok: Sequence[int] = (0,)) -> Tuple[int, str]:
        """Run one git process; returns (exit code, stdout). An exit code
        not in `ok`, or a kill, raises GitError."""
        argv: List[str] = ["git"]
        env: Dict[str, str] = {"GIT_TERMINAL_PROMPT": "0"}
        if creds is not None:
            argv += _cred_args()
            env[_CRED_ENV[0]], env[_CRED_ENV[1]] = creds
        if path is not None:
            argv += ["-C", path]
        argv += list(args)
        shown = ["git"] + (["-C", path] if path is not None else []) + list(args)
        r = self._sb.exec(*argv, env=env, timeout_secs=timeout_secs)
        if r.reason == "exited" and r.exit_code in ok:
            return r.exit_code, r.stdout_text
        cmd = " ".join(shlex.quote(a) for a in shown)
        err = r.stderr_text.strip()
        if r.reason == "timeout":
            msg = f"{cmd}: timed out after {timeout_secs:g} s"
        elif r.reason == "exited":
            msg = f"{cmd}: exit code {r.exit_code}"
        else:
            msg = f"{cmd}: {r.reason} (exit code {r.exit_code}, signal {r.signal})"
        if err:
            msg += ": " + err
        if r.exit_code == 127 and err.startswith("warren: cannot run"):
            msg += " (the image needs git; Image.sandbox() has it)"
        raise GitError(msg, r.exit_code, r.stderr_text, command=shown)

    def _run(self, args: Sequence[str], path: Optional[str] = ".", *,
             timeout_secs: Optional[float] = None,
             creds: Optional[Tuple[str, str]] = None) -> str:
        return self._git(args, path, creds=creds, timeout_secs=timeout_secs)[1]

    @staticmethod
    def _creds(username: Optional[str], password: Optional[str]) -> Optional[Tuple[str, str]]:
        if username is None and password is None:
            return None
        return _secret("username", username), _secret("password", password)

    # --- repositories ---
    def clone(self, url: str, path: str, *, branch: Optional[str] = None,
              commit_id: Optional[str] = None, depth: Optional[int] = 1,
              username: Optional[str] = None, password: Optional[str] = None,
              timeout_secs: Optional[float] = None) -> None:
        """Clone `url` into `path`. branch: check out that branch (default:
        the remote's default branch); commit_id: end on that commit,
        detached (a full hex id is fetched at `depth`; an abbreviated one
        needs full history, so depth is ignored for it); depth: history
        depth, 1 by default, None for full history (with a depth, only the
        selected branch is cloned, as ``git clone --depth`` does). A clone
        that fails leaves nothing at `path`."""
        url = _name("url", url)
        path = _path(path)
        if depth is not None and (isinstance(depth, bool) or not isinstance(depth, int) or depth < 1):
            raise ValueError(f"git: depth must be a positive integer or None, got {depth!r}")
        if commit_id is not None:
            _name("commit_id", commit_id)
            full = len(commit_id) in (40, 64) and all(c in "0123456789abcdefABCDEF" for c in commit_id)
            if not full:
                depth = None
        creds = self._creds(username, password)
        t = _timeout(timeout_secs)
        args = ["clone"]
        if branch is not None:
            args += ["--branch", _name("branch", branch)]
        if depth is not None:
            args += ["--depth", str(depth)]
        if commit_id is not None:
            args += ["--no-checkout"]
        self._run(args + ["--", url, path], None, creds=creds, timeout_secs=t)
        if commit_id is None:
            return
        try:
            if depth is not None:
                self._run(["fetch", "--depth", str(depth), "origin", commit_id], path,
                          creds=creds, timeout_secs=t)
            self._run(["checkout", "--quiet", "--detach", commit_id], path, timeout_secs=t)
        except GitError:
            # like a failed `git clone`: no half-made repository stays behind
            self._sb.exec("rm", "-rf", "--", path, timeout_secs=t)
            raise

    def init(self, path: str = ".", *, initial_branch: Optional[str] = None,
             timeout_secs: Optional[float] = None) -> None:
        """Create an empty repository at `path` (made if missing)."""
        args = ["init", "--quiet"]
        if initial_branch is not None:
            args += ["--initial-branch", _name("initial_branch", initial_branch)]
        self._run(args + ["--", _path(path)], None, timeout_secs=_timeout(timeout_secs))

    def status(self, path: str = ".", *, timeout_secs: Optional[float] = None) -> GitStatus:
        """Branch, ahead/behind its upstream and changed files."""
        out = self._run(["status", "--porcelain=v2", "--branch", "-z", "--untracked-files=all"],
                        _path(path), timeout_secs=_timeout(timeout_secs))
        return _parse_status(out)

    # --- branches ---
    def branches(self, path: str = ".", *, remote: bool = False,
                 timeout_secs: Optional[float] = None) -> List[str]:
        """Local branch names, sorted (remote=True: remote-tracking ones,
        "origin/main", ...)."""
        prefix = "refs/remotes/" if remote else "refs/heads/"
        out = self._run(["for-each-ref", "--format=%(refname)", prefix], _path(path),
                        timeout_secs=_timeout(timeout_secs))
        names = [r[len(prefix):] for r in out.splitlines() if r.startswith(prefix)]
        return [n for n in names if not (remote and n.endswith("/HEAD"))]

    def create_branch(self, path: str, name: str, *, start_point: Optional[str] = None,
                      checkout: bool = True, timeout_secs: Optional[float] = None) -> None:
        """Create branch `name` at `start_point` (default HEAD) and, unless
        checkout=False, switch to it."""
        args = ["checkout", "--quiet", "-b", _name("branch", name)] if checkout else ["branch", _name("branch", name)]
        if start_point is not None:
            args.append(_name("start_point", start_point))
        self._run(args, _path(path), timeout_secs=_timeout(timeout_secs))

    def checkout_branch(self, path: str, name: str, *, timeout_secs: Optional[float] = None) -> None:
        """Switch to branch `name` (a remote's branch of that name makes a
        local tracking branch)."""
        self._run(["checkout", "--quiet", _name("branch", name), "--"], _path(path),
                  timeout_secs=_timeout(timeout_secs))

    def delete_branch(self, path: str, name: str, *, force: bool = False,
                      timeout_secs: Optional[float] = None) -> None:
        """Delete branch `name`; unmerged work needs force=True."""
        self._run(["branch", "-D" if force else "-d", _name("branch", name)], _path(path),
                  timeout_secs=_timeout(timeout_secs))

    # --- remotes ---
    def fetch(self, path: str = ".", remote: str = "origin", branch: Optional[str] = None, *,
              username: Optional[str] = None, password: Optional[str] = None,
              timeout_secs: Optional[float] = None) -> None:
        """Fetch from `remote` (only `branch` when given)."""
        args = ["fetch", "--quiet", _name("remote", remote)]
        if branch is not None:
            args.append(_name("branch", branch))
        self._run(args, _path(path), creds=self._creds(username, password),
                  timeout_secs=_timeout(timeout_secs))

    def pull(self, path: str = ".", remote: str = "origin", branch: Optional[str] = None, *,
             username: Optional[str] = None, password: Optional[str] = None,
             timeout_secs: Optional[float] = None) -> None:
        """Fetch and fast-forward the current branch; a branch that has
        diverged from the remote's raises GitError and is left as it was."""
        args = ["pull", "--quiet", "--ff-only", _name("remote", remote)]
        if branch is not None:
            args.append(_name("branch", branch))
        self._run(args, _path(path), creds=self._creds(username, password),
                  timeout_secs=_timeout(timeout_secs))

    def push(self, path: str = ".", remote: str = "origin", branch: Optional[str] = None, *,
             set_upstream: bool = False, username: Optional[str] = None,
             password: Optional[str] = None, timeout_secs: Optional[float] = None) -> None:
        """Push `branch` (default: the current branch to its upstream) to
        `remote`; set_upstream=True records the remote branch as upstream
        (without `branch`: the current branch, under its own name)."""
        args = ["push", "--quiet"] + (["--set-upstream"] if set_upstream else []) + [_name("remote", remote)]
        if branch is not None:
            args.append(_name("branch", branch))
        elif set_upstream:
            args.append("HEAD")
        self._run(args, _path(path), creds=self._creds(username, password),
                  timeout_secs=_timeout(timeout_secs))

    def remote_add(self, path: str, name: str, url: str, *,
                   timeout_secs: Optional[float] = None) -> None:
        self._run(["remote", "add", _name("remote", name), _name("url", url)], _path(path),
                  timeout_secs=_timeout(timeout_secs))

    def remote_get(self, path: str = ".", name: str = "origin", *,
                   timeout_secs: Optional[float] = None) -> str:
        """The URL of remote `name`."""
        return self._run(["remote", "get-url", _name("remote", name)], _path(path),
                         timeout_secs=_timeout(timeout_secs)).strip()

    def remotes(self, path: str = ".", *, timeout_secs: Optional[float] = None) -> List[str]:
        """Remote names."""
        return [r for r in self._run(["remote"], _path(path), timeout_secs=_timeout(timeout_secs)).splitlines() if r]

    # --- work tree ---
    def reset(self, path: str = ".", target: str = "HEAD", *, hard: bool = False,
              timeout_secs: Optional[float] = None) -> None:
        """Move the current branch to `target` and reset the index
        (hard=True: the work tree too)."""
        self._run(["reset", "--quiet", "--hard" if hard else "--mixed", _name("target", target), "--"],
                  _path(path), timeout_secs=_timeout(timeout_secs))

    def restore(self, path: str = ".", files: Sequence[str] = (".",), *, staged: bool = False,
                timeout_secs: Optional[float] = None) -> None:
        """Discard work-tree changes to `files` (paths inside the
        repository); staged=True unstages them instead."""
        if isinstance(files, str):
            files = [files]
        names = [_path(f, "file") for f in files]
        if not names:
            raise ValueError("git: restore needs at least one file")
        self._run(["restore"] + (["--staged"] if staged else []) + ["--"] + names, _path(path),
                  timeout_secs=_timeout(timeout_secs))

    # --- config (the repository's own, .git/config) ---
    def get_config(self, path: str, key: str, *, timeout_secs: Optional[float] = None) -> Optional[str]:
        """The repository's value of `key`, None when unset."""
        rc, out = self._git(["config", "--local", "--get", _name("key", key)], _path(path),
                            timeout_secs=_timeout(timeout_secs), ok=(0, 1))
        return out.rstrip("\n") if rc == 0 else None

    def set_config(self, path: str, key: str, value: str, *,
                   timeout_secs: Optional[float] = None) -> None:
        if not isinstance(value, str):
            raise TypeError("git: config value must be a string")
        self._run(["config", "--local", "--", _name("key", key), value], _path(path),
                  timeout_secs=_timeout(timeout_secs))

    def configure_user(self, path: str, name: str, email: str, *,
                       timeout_secs: Optional[float] = None) -> None:
        """Set user.name and user.email for this repository only."""
        self.set_config(path, "user.name", name, timeout_secs=timeout_secs)
        self.set_config(path, "user.email", email, timeout_secs=timeout_secs)
