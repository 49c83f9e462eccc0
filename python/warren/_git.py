"""Git helpers run through exec inside the sandbox (the image needs git).
Paths are relative to the sandbox's working directory. Failures raise
GitError with the command's stderr."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Dict, List, Optional, Sequence

from warren._errors import GitError

if TYPE_CHECKING:
    from warren._sandbox import Sandbox

_CRED_HELPER = "!f() { echo username=$WARREN_GIT_USERNAME; echo password=$WARREN_GIT_PASSWORD; }; f"


@dataclass(frozen=True)
class GitStatus:
    current_branch: Optional[str]
    ahead: int = 0
    behind: int = 0
    files: List[str] = field(default_factory=list)

    @property
    def is_clean(self) -> bool:
        return not self.files


class Git:
    """`sandbox.git`: clone, status, branches, commits and remotes."""

    def __init__(self, sandbox: "Sandbox"):
        self._sb = sandbox

    def _git(self, args: Sequence[str], path: Optional[str] = ".", *,
             username: Optional[str] = None, password: Optional[str] = None,
             timeout_secs: Optional[float] = None) -> str:
        argv: List[str] = ["git"]
        env: Dict[str, str] = {"GIT_TERMINAL_PROMPT": "0"}
        if username is not None or password is not None:
            argv += ["-c", "credential.helper=", "-c", "credential.helper=" + _CRED_HELPER]
            env["WARREN_GIT_USERNAME"] = username or ""
            env["WARREN_GIT_PASSWORD"] = password or ""
        if path is not None:
            argv += ["-C", path]
        argv += list(args)
        r = self._sb.exec(*argv, env=env, timeout_secs=timeout_secs)
        if r.exit_code != 0:
            raise GitError(f"git {' '.join(args[:1])} failed ({r.exit_code}): {r.stderr_text.strip()}",
                           r.exit_code, r.stderr_text)
        return r.stdout_text

    def clone(self, url: str, path: str, *, branch: Optional[str] = None,
              commit_id: Optional[str] = None, depth: Optional[int] = 1,
              username: Optional[str] = None, password: Optional[str] = None,
              timeout_secs: Optional[float] = None) -> None:
        args = ["clone"]
        if branch:
            args += ["--branch", branch]
        if depth is not None and not commit_id:
            args += ["--depth", str(depth)]
        args += [url, path]
        kw = dict(username=username, password=password, timeout_secs=timeout_secs)
        self._git(args, None, **kw)  # type: ignore[arg-type]
        if commit_id:
            self._git(["fetch", "origin", commit_id] + (["--depth", str(depth)] if depth else []),
                      path, **kw)  # type: ignore[arg-type]
            self._git(["checkout", "--detach", commit_id], path, timeout_secs=timeout_secs)

    def init(self, path: str, *, initial_branch: Optional[str] = None) -> None:
        self._git(["init"] + (["-b", initial_branch] if initial_branch else []) + [path], None)

    def status(self, path: str = ".") -> GitStatus:
        out = self._git(["status", "--porcelain=v1", "--branch"], path)
        lines = out.splitlines()
        branch, ahead, behind = None, 0, 0
        if lines and lines[0].startswith("## "):
            head = lines.pop(0)[3:]
            name = head.split("...")[0].split(" ")[0]
            if not name.startswith("HEAD") and "(no branch)" not in head:
                branch = name.replace("No commits yet on ", "")
            if head.startswith("No commits yet on "):
                branch = head[len("No commits yet on "):]
            if "[" in head:
                for part in head[head.index("[") + 1:head.rindex("]")].split(","):
                    k, _, n = part.strip().partition(" ")
                    if k == "ahead":
                        ahead = int(n)
                    elif k == "behind":
                        behind = int(n)
        return GitStatus(branch, ahead, behind, [ln[3:] for ln in lines if ln.strip()])

    def branches(self, path: str = ".") -> List[str]:
        out = self._git(["branch", "--format=%(refname:short)"], path)
        return [b for b in out.splitlines() if b]

    def create_branch(self, path: str, name: str, *, checkout: bool = True) -> None:
        self._git(["checkout", "-b", name] if checkout else ["branch", name], path)

    def checkout_branch(self, path: str, name: str) -> None:
        self._git(["checkout", name], path)

    def delete_branch(self, path: str, name: str, *, force: bool = False) -> None:
        self._git(["branch", "-D" if force else "-d", name], path)

    def fetch(self, path: str = ".", remote: str = "origin", **kw: object) -> None:
        self._git(["fetch", remote], path, **kw)  # type: ignore[arg-type]

    def pull(self, path: str = ".", remote: str = "origin", branch: Optional[str] = None,
             **kw: object) -> None:
        self._git(["pull", "--ff-only", remote] + ([branch] if branch else []), path, **kw)  # type: ignore[arg-type]

    def push(self, path: str = ".", remote: str = "origin", branch: Optional[str] = None,
             *, set_upstream: bool = False, **kw: object) -> None:
        args = ["push"] + (["-u"] if set_upstream else []) + [remote] + ([branch] if branch else [])
        self._git(args, path, **kw)  # type: ignore[arg-type]

    def reset(self, path: str = ".", target: str = "HEAD", *, hard: bool = False) -> None:
        self._git(["reset", "--hard" if hard else "--mixed", target], path)

    def restore(self, path: str = ".", files: Sequence[str] = (".",), *, staged: bool = False) -> None:
        self._git(["restore"] + (["--staged"] if staged else []) + ["--"] + list(files), path)

    def remote_add(self, path: str, name: str, url: str) -> None:
        self._git(["remote", "add", name, url], path)

    def remote_get(self, path: str, name: str = "origin") -> str:
        return self._git(["remote", "get-url", name], path).strip()

    def remotes(self, path: str = ".") -> List[str]:
        return [r for r in self._git(["remote"], path).splitlines() if r]

    def get_config(self, path: str, key: str) -> Optional[str]:
        try:
            return self._git(["config", "--local", "--get", key], path).strip()
        except GitError as e:
            if e.exit_code == 1:
                return None
            raise

    def set_config(self, path: str, key: str, value: str) -> None:
        self._git(["config", "--local", key, value], path)

    def configure_user(self, path: str, name: str, email: str) -> None:
        self.set_config(path, "user.name", name)
        self.set_config(path, "user.email", email)
