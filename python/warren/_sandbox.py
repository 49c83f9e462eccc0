"""Sandbox handles and their info.

``Sandbox.__init__`` is the one definition of the sandbox options (the
keywords of ``SandboxClient.create``, which copies its signature with
:func:`sandbox_keywords`) and ``Sandbox._request`` the one place that
turns them into a CreateSandboxRequest."""
from __future__ import annotations

import datetime as _dt
import enum
import inspect
import time as _time
from dataclasses import dataclass, field
from types import TracebackType
from typing import (Any, Callable, Concatenate, Dict, Iterator, List, Mapping, Optional,
                    ParamSpec, Sequence, Tuple, Type, TypeVar, Union, cast)

from warren._channel import Channel
from warren._convert import from_timestamp
from warren._errors import NotFound
from warren._files import Files
from warren._exec import (ExecChanges, ExecEvent, ExecResult, FileChange, Process, ProcessInfo,
                          _ExecCall, collect, exec_start_message)
from warren._git import Git
from warren._image import Image, ImageInfo, build_image, image_spec
from warren._network import ComputeClass, NetworkEvent, NetworkPolicy, ResourceDetector, SshDest
from warren._proto.warren.v1 import sandboxes_pb2 as pb
from warren._secret import Secret

from warren._tunnel import Tunnel, TunnelConnection

GITHUB_API_HOST = "api.github.com"

_P = ParamSpec("_P")
_R = TypeVar("_R")


class SandboxStatus(str, enum.Enum):
    UNSPECIFIED = "UNSPECIFIED"
    PENDING = "PENDING"
    RUNNING = "RUNNING"
    TERMINATING = "TERMINATING"
    TERMINATED = "TERMINATED"
    FAILED = "FAILED"
    #: running, every process frozen (Sandbox.pause())
    PAUSED = "PAUSED"

    def __str__(self) -> str:
        return self.value

    @classmethod
    def _from_proto(cls, v: int) -> "SandboxStatus":
        name = pb.SandboxStatus.Name(v).replace("SANDBOX_STATUS_", "")
        return cls(name)

    def _to_proto(self) -> int:
        return pb.SandboxStatus.Value("SANDBOX_STATUS_" + self.value)


@dataclass(frozen=True)
class DetectedResource:
    """A resource the sandbox created, seen in its intercepted traffic
    (``resource_detectors``): ``kind`` ``"github_pull_request"``, ``id``
    the pull request's URL (its ``html_url``)."""

    kind: str
    id: str


@dataclass(frozen=True)
class SandboxInfo:
    """What the daemon knows about a sandbox."""

    id: str
    name: str
    status: SandboxStatus
    status_message: str = ""
    image_id: str = ""
    image_ref: str = ""
    tags: Dict[str, str] = field(default_factory=dict)
    workdir: str = ""
    entrypoint: List[str] = field(default_factory=list)
    cpu: str = ""
    memory: str = ""
    environment: str = ""
    detected_resources: List[str] = field(default_factory=list)
    created_at: Optional[_dt.datetime] = None
    terminated_at: Optional[_dt.datetime] = None
    expires_at: Optional[_dt.datetime] = None
    volumes: List[Tuple[str, str]] = field(default_factory=list)
    #: The sandbox has a network policy and the daemon checked at create
    #: that it is enforced (a denied probe was refused).
    egress_enforced: bool = False

    @classmethod
    def _from_proto(cls, s: pb.Sandbox) -> "SandboxInfo":
        return cls(id=s.id, name=s.name, status=SandboxStatus._from_proto(s.status),
                   status_message=s.status_message, image_id=s.image_id, image_ref=s.image_ref,
                   tags=dict(s.tags), workdir=s.workdir, entrypoint=list(s.entrypoint),
                   cpu=s.resources.cpu, memory=s.resources.memory, environment=s.environment,
                   detected_resources=list(s.detected_resources),
                   created_at=from_timestamp(s.created_at),
                   terminated_at=from_timestamp(s.terminated_at),
                   expires_at=from_timestamp(s.expires_at),
                   volumes=[(v.volume, v.path) for v in s.volumes],
                   egress_enforced=s.egress_enforced)


EnvMap = Mapping[str, Union[str, Secret]]
VolumeSpec = Union[Tuple[str, str], Tuple[str, str, bool]]


def _lifetime(v: Union[str, int, float, _dt.timedelta, None]) -> str:
    if v is None:
        return ""
    if isinstance(v, _dt.timedelta):
        v = v.total_seconds()
    if isinstance(v, (int, float)):
        return f"{int(v)}s"
    return str(v)


def list_processes(channel: Channel, sandbox_id: str) -> List[ProcessInfo]:
    """ListProcesses of a sandbox, as ProcessInfos."""
    resp = channel._unary(channel._sandboxes.ListProcesses,
                          pb.ListProcessesRequest(sandbox=sandbox_id), sandbox_call=True)
    return [ProcessInfo._from_proto(p) for p in resp.processes]


class Sandbox:
    """A sandbox: a spec until run, then a handle on a live sandbox.

    ``Sandbox(image, name=..., ...)`` takes the same keywords as
    ``SandboxClient.create``; ``.run()`` creates it with a client from the
    environment. As a context manager (``with Sandbox(...) as sb:`` or
    ``with client.create(...) as sb:``) it runs on entry if it is not
    running yet and is terminated on exit."""

    def __init__(self, image: Union[Image, str, None] = None, *, name: Optional[str] = None,
                 cpu: Union[str, int, float, None] = None, memory: Union[str, int, None] = None,
                 env: Optional[EnvMap] = None, secrets: Optional[Sequence[Secret]] = None,
                 volumes: Optional[Sequence[VolumeSpec]] = None,
                 network_policy: Optional[NetworkPolicy] = None,
                 managed_ssh: Optional[Mapping[str, SshDest]] = None,
                 resource_detectors: Optional[Sequence[ResourceDetector]] = None,
                 identity: bool = False,
                 lifetime: Union[str, int, float, _dt.timedelta, None] = None,
                 entrypoint: Optional[Sequence[str]] = None, workdir: Optional[str] = None,
                 tags: Optional[Mapping[str, str]] = None,
                 compute_class: Optional[ComputeClass] = None,
                 hostname: Optional[str] = None,
                 block_network: bool = False,
                 disk: Union[str, int, None] = None, pids: Optional[int] = None,
                 journal_execs: bool = False):
        self.image = image
        #: journal every exec (Sandbox.changes / rollback)
        self.journal_execs = bool(journal_execs)
        #: size of the writable layer ("10Gi", at least "8Mi"; default: the
        #: daemon's --default-disk, 10Gi); pids: most processes
        self.disk = None if disk is None else str(disk)
        self.pids = pids
        self.name = name
        self.cpu = None if cpu is None else str(cpu)
        self.memory = None if memory is None else str(memory)
        self.env: Dict[str, Union[str, Secret]] = dict(env or {})
        self.secrets: List[Secret] = list(secrets or [])
        self.volumes: List[VolumeSpec] = list(volumes or [])
        self.network_policy = network_policy
        self.managed_ssh: Dict[str, SshDest] = dict(managed_ssh or {})
        self.resource_detectors = list(resource_detectors or [])
        self.identity = identity
        self.lifetime = lifetime
        self.entrypoint = list(entrypoint) if entrypoint else None
        self.workdir = workdir
        self.tags: Dict[str, str] = dict(tags or {})
        self.compute_class = compute_class
        self.hostname = hostname
        # True: loopback only (no veth, address or resolver)
        self.block_network = bool(block_network)
        self._credentials: List[Tuple[List[str], Secret]] = []
        self.id: Optional[str] = None
        self._info: Optional[SandboxInfo] = None
        self._channel: Optional[Channel] = None
        self._owns_channel = False

    # --- configuration before run ---
    def mount_volume(self, name: str, path: str, read_only: bool = False) -> "Sandbox":
        """Mount volume `name` at `path` (before run). Returns self."""
        self._require_unstarted("mount_volume")
        self.volumes.append((name, path, read_only))
        return self

    def add_credentials(self, hosts: Union[str, Sequence[str]], secret: Union[str, Secret]) -> "Sandbox":
        """Make a secret usable only in requests to `hosts` (before run): a
        string names a stored secret. Returns self."""
        self._require_unstarted("add_credentials")
        hs = [hosts] if isinstance(hosts, str) else list(hosts)
        sec = Secret.from_name(secret) if isinstance(secret, str) else secret
        self._credentials.append((hs, sec))
        return self

    def _require_unstarted(self, what: str) -> None:
        if self.id is not None:
            raise RuntimeError(f"Sandbox.{what} must be called before the sandbox runs")

    def _request(self) -> pb.CreateSandboxRequest:
        """The CreateSandboxRequest for this spec (local secrets read now)."""
        r = pb.CreateSandboxRequest(name=self.name or "", workdir=self.workdir or "",
                                    entrypoint=self.entrypoint or [], tags=self.tags,
                                    identity=bool(self.identity),
                                    lifetime=_lifetime(self.lifetime),
                                    hostname=self.hostname or "",
                                    block_network=self.block_network,
                                    journal_execs=self.journal_execs)
        spec = image_spec(self.image)
        if spec is not None:
            r.image.CopyFrom(spec)
        for k, v in self.env.items():
            if isinstance(v, Secret):
                r.env[k].secret.CopyFrom(v._to_proto(env_name=k))
            elif isinstance(v, str):
                r.env[k].value = v
            else:
                raise TypeError(f"env[{k!r}] must be a str or Secret")
        r.secrets.extend(s._to_proto() for s in self.secrets)
        if self.cpu or self.memory or self.disk or self.pids:
            r.resources.cpu = self.cpu or ""
            r.resources.memory = self.memory or ""
            r.resources.disk = self.disk or ""
            r.resources.pids = int(self.pids or 0)
        for vol in self.volumes:
            ro = bool(vol[2]) if len(vol) > 2 else False
            r.volumes.append(pb.VolumeMount(volume=vol[0], path=vol[1], read_only=ro))
        policy = self.network_policy
        if ResourceDetector.GITHUB_PULL_REQUESTS in self.resource_detectors:
            policy = (policy or NetworkPolicy(allowed_hosts=[])).with_host(GITHUB_API_HOST)
        if policy is not None:
            r.network_policy.CopyFrom(policy._to_proto())
        for hosts, sec in self._credentials:
            r.credentials.append(pb.HostCredential(hosts=hosts, secret=sec._to_proto()))
        for alias, dest in self.managed_ssh.items():
            r.managed_ssh[alias].CopyFrom(dest._to_proto())
        r.resource_detectors.extend(int(d) for d in self.resource_detectors)
        if self.compute_class is not None:
            r.compute_class = cast("pb.ComputeClass", int(self.compute_class))
        return r

    # --- lifecycle ---
    def _create(self, channel: Channel) -> "Sandbox":
        """Create and start the sandbox over `channel` and bind to it."""
        if self.id is not None:
            raise RuntimeError(f"sandbox {self.id} is already running")
        req = self._request()
        if isinstance(self.image, Image) and self.image._needs_build():
            # a declarative image: built (or found in the build cache) first
            built = build_image(channel, self.image)
            req.image.Clear()
            req.image.ref = built.id
        s = channel._unary(channel._sandboxes.CreateSandbox, req)
        self._channel = channel
        self.id = s.id
        self.name = s.name or self.name
        self._info = SandboxInfo._from_proto(s)
        return self

    @classmethod
    def _attach(cls, channel: Channel, s: pb.Sandbox) -> "Sandbox":
        """A handle on the existing sandbox `s`."""
        sb = cls(name=s.name or None)
        sb._channel, sb.id, sb._info = channel, s.id, SandboxInfo._from_proto(s)
        return sb

    def run(self) -> "Sandbox":
        """Create and start the sandbox with a client from the environment
        (closed when the sandbox is terminated)."""
        channel = Channel.from_env()
        try:
            self._create(channel)
        except BaseException:
            channel.close()
            raise
        self._owns_channel = True
        return self

    def _conn(self) -> Channel:
        if self._channel is None:
            raise RuntimeError("the sandbox is not running: call .run() or client.run(sandbox)")
        return self._channel

    @property
    def status(self) -> Optional[SandboxStatus]:
        """Last known status (see refresh())."""
        return None if self._info is None else self._info.status

    @property
    def info(self) -> Optional[SandboxInfo]:
        return self._info

    def _key(self) -> pb.GetSandboxRequest:
        if self.id:
            return pb.GetSandboxRequest(id=self.id)
        raise RuntimeError("the sandbox is not running")

    def refresh(self) -> SandboxInfo:
        """Fetch the sandbox's current info from the daemon."""
        ch = self._conn()
        s = ch._unary(ch._sandboxes.GetSandbox, self._key(), sandbox_call=True)
        self._info = SandboxInfo._from_proto(s)
        return self._info

    def pause(self) -> SandboxInfo:
        """Freeze every process (no CPU used until resume(); memory, files
        and connections stay; new execs are refused; the lifetime keeps
        counting). Idempotent."""
        ch = self._conn()
        s = ch._unary(ch._sandboxes.PauseSandbox, pb.PauseSandboxRequest(id=self._key().id),
                      sandbox_call=True)
        self._info = SandboxInfo._from_proto(s)
        return self._info

    def resume(self) -> SandboxInfo:
        """Thaw a paused sandbox. Idempotent."""
        ch = self._conn()
        s = ch._unary(ch._sandboxes.ResumeSandbox, pb.ResumeSandboxRequest(id=self._key().id),
                      sandbox_call=True)
        self._info = SandboxInfo._from_proto(s)
        return self._info

    def snapshot(self, name: Optional[str] = None) -> ImageInfo:
        """The sandbox's writable layer as a new image (its image's layers +
        one), usable as ``client.create(image=snap.id)`` (or by ``name``).
        The sandbox is frozen while the layer is read, then runs on. Not
        included: /tmp and /run (memory), volumes, processes."""
        ch = self._conn()
        img = ch._unary(ch._sandboxes.SnapshotSandbox,
                        pb.SnapshotSandboxRequest(id=self._key().id, image_name=name or ""),
                        sandbox_call=True)
        return ImageInfo._from_proto(img)

    def fork(self, count: int = 1) -> List["Sandbox"]:
        """A snapshot, then ``count`` new sandboxes from it, created as this
        one was (no name). Each sees this sandbox's files as they were and
        is independent from then on; this one keeps running."""
        ch = self._conn()
        resp = ch._unary(ch._sandboxes.ForkSandbox,
                         pb.ForkSandboxRequest(id=self._key().id, count=count),
                         sandbox_call=True)
        return [Sandbox._attach(ch, s) for s in resp.sandboxes]

    def terminate(self, grace_period_seconds: Optional[float] = None) -> SandboxInfo:
        """Stop every process (SIGTERM, grace, SIGKILL) and free the
        sandbox. Idempotent."""
        req = pb.TerminateSandboxRequest(id=self._key().id,
                                         grace_period_seconds=float(grace_period_seconds or 0))
        ch = self._conn()
        try:
            s = ch._unary(ch._sandboxes.TerminateSandbox, req, sandbox_call=True)
            self._info = SandboxInfo._from_proto(s)
            return self._info
        finally:
            if self._owns_channel:
                ch.close()
                self._owns_channel = False

    # --- context manager ---
    def __enter__(self) -> "Sandbox":
        if self.id is None:
            self.run()
        return self

    def __exit__(self, exc_type: Optional[Type[BaseException]],
                 exc: Optional[BaseException], tb: Optional[TracebackType]) -> None:
        """Terminate the sandbox. When the block raised, a failure to
        terminate does not hide the block's exception."""
        ch = self._channel
        if self.id is None or ch is None or ch.closed:
            return  # never ran, or already terminated by .run()'s own client
        try:
            if self.status != SandboxStatus.TERMINATED:
                self.terminate()
        except Exception:
            if exc is None:
                raise
        finally:
            if self._owns_channel:
                ch.close()
                self._owns_channel = False

    # --- exec ---
    def _start(self, argv: Tuple[str, ...], workdir: Optional[str],
               timeout_secs: Optional[float], env: Optional[Mapping[str, str]],
               close_stdin: bool, user: Optional[str] = None,
               journal: bool = False) -> _ExecCall:
        start = exec_start_message(self._key().id, argv, workdir, timeout_secs, env, user=user,
                                   journal=journal)
        return _ExecCall(self._conn(), start, close_stdin)

    def exec(self, *argv: str, workdir: Optional[str] = None,
             timeout_secs: Optional[float] = None,
             env: Optional[Mapping[str, str]] = None,
             user: Optional[str] = None, journal: bool = False) -> ExecResult:
        """Run a command to completion (stdin is empty) and return its
        output and exit code. A non-zero exit is not an error. user: run
        as "name", "uid", "name:group" or "uid:gid" (default: the image's
        user). journal=True records what it changes in the writable layer
        (Sandbox.changes / Sandbox.rollback with the result's exec_id)."""
        call = self._start(argv, workdir, timeout_secs, env, close_stdin=True, user=user,
                           journal=journal)
        return collect(call.events(), lambda: call.exec_id)

    def exec_stream(self, *argv: str, workdir: Optional[str] = None,
                    timeout_secs: Optional[float] = None,
                    env: Optional[Mapping[str, str]] = None,
                    user: Optional[str] = None, journal: bool = False) -> Iterator[ExecEvent]:
        """Run a command, yielding output events as they arrive and the
        exit event last. Leaving the loop early cancels the process."""
        call = self._start(argv, workdir, timeout_secs, env, close_stdin=True, user=user,
                           journal=journal)
        try:
            yield from call.events()
        finally:
            call.cancel()

    def exec_start(self, *argv: str, workdir: Optional[str] = None,
                   timeout_secs: Optional[float] = None,
                   env: Optional[Mapping[str, str]] = None, pty: bool = False,
                   window: Optional[Tuple[int, int]] = None, detach: bool = False,
                   text: bool = True, user: Optional[str] = None,
                   journal: bool = False) -> Process:
        """Start a process with stdin open; returns once it runs.
        pty=True gives it a terminal (window=(cols, rows)); detach=True
        keeps it running when this client goes away (re-attach with
        attach(process.exec_id, offset)); text=False yields raw bytes.
        ``with sandbox.exec_start(...) as p:`` kills the process on exit
        from the block if it is still running."""
        start = exec_start_message(self._key().id, argv, workdir, timeout_secs, env, pty=pty,
                                   detach=detach, window=window, user=user, journal=journal)
        call = _ExecCall(self._conn(), start, close_stdin=False, text=text)
        call.wait_started()
        return Process(call, self)

    def attach(self, exec_id: str, offset: int = 0, text: bool = True) -> Process:
        """Re-attach to a running (or recently finished) process: its
        output from offset on (a gap event when the daemon's bounded log
        no longer holds it), then live output, stdin and signals. Another
        client attached to it is detached (its stream ends ABORTED)."""
        att = pb.ExecAttach(sandbox=self._key().id, exec_id=exec_id, offset=int(offset))
        call = _ExecCall(self._conn(), att, close_stdin=False, text=text)
        call.wait_started()
        return Process(call, self)

    # --- change journal ---
    def changes(self, exec_id: str) -> ExecChanges:
        """What the journaled exec exec_id (exec(..., journal=True), or any
        exec of a sandbox created with journal_execs=True) created,
        modified, deleted or changed the mode/owner of in the sandbox's
        writable layer (not /tmp, /run or volumes). While it runs: the
        changes so far."""
        ch = self._conn()
        r = ch._unary(ch._sandboxes.GetExecChanges,
                      pb.GetExecChangesRequest(sandbox=self._key().id, exec_id=exec_id),
                      sandbox_call=True)
        return ExecChanges([FileChange._from_proto(c) for c in r.changes], r.running, r.complete)

    def rollback(self, exec_id: str, force: bool = False) -> List[FileChange]:
        """Put every path the finished, journaled exec exec_id changed back
        to its state before it ran (the sandbox is frozen meanwhile).
        Refused (FailedPrecondition) when a path changed again since,
        unless force=True. Returns the changes undone."""
        ch = self._conn()
        r = ch._unary(ch._sandboxes.RollbackExec,
                      pb.RollbackExecRequest(sandbox=self._key().id, exec_id=exec_id,
                                             force=bool(force)),
                      sandbox_call=True)
        return [FileChange._from_proto(c) for c in r.restored]

    def processes(self) -> List[ProcessInfo]:
        """The sandbox's processes: running ones, and finished ones the
        daemon still keeps for a late attach."""
        return list_processes(self._conn(), self._key().id)

    # --- egress ---
    def _events_page(self, limit: Optional[int], after_seq: int) -> pb.ListNetworkEventsResponse:
        if limit is not None and limit < 0:
            raise ValueError("limit must be >= 0")
        ch = self._conn()
        req = pb.ListNetworkEventsRequest(sandbox=self._key().id, limit=int(limit or 0),
                                          after_seq=int(after_seq))
        return ch._unary(ch._sandboxes.ListNetworkEvents, req, sandbox_call=True)

    def resources(self) -> List[DetectedResource]:
        """The resources detected so far (``resource_detectors``), in the
        order they were created: pull requests the sandbox opened through
        api.github.com (``POST /repos/{owner}/{repo}/pulls`` answered 201)."""
        return [DetectedResource("github_pull_request", u)
                for u in self.refresh().detected_resources]

    def network_events(self, limit: Optional[int] = None, after_seq: int = 0) -> List[NetworkEvent]:
        """The sandbox's egress decisions the daemon keeps, oldest first:
        only those with ``seq > after_seq``, and at most the newest
        ``limit`` of them."""
        resp = self._events_page(limit, after_seq)
        return [NetworkEvent._from_proto(e) for e in resp.events]

    def follow_network_events(self, poll_interval: float = 0.5,
                              after_seq: int = 0) -> Iterator[NetworkEvent]:
        """Yield egress events as they happen (polling every
        ``poll_interval`` seconds with after_seq) until the sandbox has
        ended (TERMINATED or FAILED, or removed while followed) and its
        last events were yielded. SandboxNotFound when there is no such
        sandbox."""
        last = int(after_seq)
        first = True
        while True:
            try:
                ended = self.refresh().status in (SandboxStatus.TERMINATED, SandboxStatus.FAILED)
                resp = self._events_page(None, last)
            except NotFound:
                if first:
                    raise  # no such sandbox
                return  # removed while followed
            first = False
            for e in resp.events:
                last = max(last, e.seq)
                yield NetworkEvent._from_proto(e)
            last = max(last, resp.last_seq)
            if ended:
                return
            _time.sleep(poll_interval)

    def tunnel(self, port: int, local_port: int = 0, host: str = "127.0.0.1") -> Tunnel:
        """Forward a local TCP port (``local_port`` on ``host``; 0 picks one,
        see ``.local_port``) to ``port`` inside the sandbox, over the gRPC
        connection: the sandbox listens on no host interface for it."""
        return Tunnel(self._conn(), self.id, port, local_port=local_port, host=host)

    def connect(self, port: int, timeout: Optional[float] = None) -> TunnelConnection:
        """One TCP connection to ``port`` inside the sandbox as a byte
        stream (send / recv / close_write / close), without a local port."""
        return TunnelConnection(self._conn(), self.id, port, timeout=timeout)

    @property
    def git(self) -> Git:
        return Git(self)

    @property
    def files(self) -> Files:
        """The sandbox's files: read, write, list, stat, remove, mkdir,
        rename, watch (docs/files.md)."""
        f = getattr(self, "_files", None)
        if f is None or f._sandbox != self.id:
            f = self._files = Files(self._conn, self.id)
        return f

    def __repr__(self) -> str:
        return f"Sandbox(id={self.id!r}, name={self.name!r}, status={self.status})"


def sandbox_keywords(
        source: Callable[_P, Any]) -> Callable[[Callable[..., _R]], Callable[Concatenate[Any, _P], _R]]:
    """Give a method (self, *args, **kwargs) the parameters of `source`
    (Sandbox): for type checkers through the ParamSpec, for help() and
    inspect through __signature__. The options are written once, in
    Sandbox.__init__."""
    params = list(inspect.signature(source).parameters.values())

    def decorate(method: Callable[..., _R]) -> Callable[Concatenate[Any, _P], _R]:
        own = inspect.signature(method)
        self_param = next(iter(own.parameters.values()))
        method.__signature__ = own.replace(  # type: ignore[attr-defined]
            parameters=[self_param] + params)
        return method

    return decorate
