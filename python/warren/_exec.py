"""Processes in a sandbox over the bidirectional Sandboxes/Exec stream.

Requests come from a queue.Queue drained by a generator that grpcio reads
on its own thread: first `start`, then stdin / close_stdin / signal. The
generator ends when the call ends (a done-callback pushes a sentinel), so
no thread outlives the call. Output bytes are decoded to str
incrementally (UTF-8, errors="replace"); a multibyte sequence split across
chunks is kept until its remaining bytes arrive."""
from __future__ import annotations

import codecs
import datetime as _dt
import queue
import signal as _signal
import threading
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any, Dict, Iterator, List, Mapping, Optional, Tuple, Type, Union

import grpc

from warren._channel import Channel
from warren._convert import from_timestamp
from warren._errors import Status, WarrenError, from_rpc_error
from warren._proto.warren.v1 import sandboxes_pb2 as pb

_END = object()

_REASONS: Dict[int, str] = {
    pb.EXIT_REASON_UNSPECIFIED: "unspecified",
    pb.EXIT_REASON_EXITED: "exited",
    pb.EXIT_REASON_SIGNALED: "signaled",
    pb.EXIT_REASON_TIMEOUT: "timeout",
    pb.EXIT_REASON_OOM: "oom",
    pb.EXIT_REASON_SANDBOX_TERMINATED: "sandbox_terminated",
}


@dataclass(frozen=True)
class ExecEvent:
    """One piece of a running process's life: output text, or its exit."""

    stdout: Optional[str] = None
    stderr: Optional[str] = None
    is_exited: bool = False
    exit_code: Optional[int] = None
    # Signal that ended the process (0 when it exited normally).
    signal: int = 0
    # "exited", "signaled", "timeout", "oom", "sandbox_terminated".
    reason: Optional[str] = None
    # Raw output bytes (set instead of stdout/stderr when text=False).
    stdout_bytes: Optional[bytes] = None
    stderr_bytes: Optional[bytes] = None
    # Offset in the exec's output sequence after this event's bytes: attach
    # with it to resume right after what was received.
    offset: int = 0
    # (from, to): output the daemon's bounded log dropped before this
    # client saw it (re-attach from an old offset).
    gap: Optional[Tuple[int, int]] = None


@dataclass(frozen=True)
class ExecResult:
    """The outcome of a finished process."""

    stdout_text: str
    stderr_text: str
    exit_code: int
    signal: int = 0
    reason: str = "exited"
    exec_id: str = ""
    stdout: List[str] = field(init=False)
    stderr: List[str] = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "stdout", self.stdout_text.splitlines())
        object.__setattr__(self, "stderr", self.stderr_text.splitlines())

    @property
    def ok(self) -> bool:
        return self.exit_code == 0


def _reason(code: int) -> str:
    return _REASONS.get(code, "unspecified")


_CHANGE_KINDS = {1: "created", 2: "modified", 3: "deleted", 4: "mode"}


@dataclass(frozen=True)
class FileChange:
    """One change an exec made: kind is "created", "modified", "deleted"
    or "mode" (mode or owner); type is "file", "dir", "symlink" or
    "other"; modes are st_mode values (0 when absent)."""

    path: str
    kind: str
    type: str
    old_mode: int = 0
    new_mode: int = 0

    @classmethod
    def _from_proto(cls, c: Any) -> "FileChange":
        return cls(c.path, _CHANGE_KINDS.get(c.kind, "unspecified"), c.type, c.old_mode,
                   c.new_mode)


@dataclass(frozen=True)
class ExecChanges:
    """What a journaled exec changed. running: it has not exited (the
    changes so far); complete: False when the journal had to leave paths
    out or could not keep bytes a rollback needs."""

    changes: List[FileChange]
    running: bool = False
    complete: bool = True

    def __iter__(self) -> Iterator[FileChange]:
        return iter(self.changes)

    def __len__(self) -> int:
        return len(self.changes)


@dataclass(frozen=True)
class ProcessInfo:
    """A process of a sandbox, as Sandbox.processes() reports it."""

    exec_id: str
    pid: int
    argv: List[str]
    running: bool
    pty: bool = False
    started_at: Optional[_dt.datetime] = None
    exit_code: Optional[int] = None
    signal: int = 0
    # "exited", "signaled", "timeout", "oom", "sandbox_terminated"; None while running.
    reason: Optional[str] = None

    @classmethod
    def _from_proto(cls, p: pb.Process) -> "ProcessInfo":
        done = p.HasField("exited")
        return cls(p.exec_id, p.pid, list(p.argv), p.running, p.pty,
                   from_timestamp(p.started_at),
                   p.exited.exit_code if done else None, p.exited.signal if done else 0,
                   _reason(p.exited.reason) if done else None)


def signal_number(sig: Union[int, str, _signal.Signals]) -> int:
    """A signal as a number: 15, signal.SIGTERM, "SIGTERM", "TERM", "15"."""
    if isinstance(sig, str):
        name = sig.strip().upper()
        if name.isdigit():
            return int(name)
        if not name.startswith("SIG"):
            name = "SIG" + name
        try:
            return int(_signal.Signals[name])
        except KeyError:
            raise ValueError(f"unknown signal {sig!r}") from None
    n = int(sig)
    if not 1 <= n <= 64:
        raise ValueError(f"signal {n} is out of range (1-64)")
    return n


def exec_start_message(sandbox: str, argv: tuple, workdir: Optional[str],
                       timeout_secs: Optional[float],
                       env: Optional[Mapping[str, str]], pty: bool = False,
                       detach: bool = False,
                       window: Optional[Tuple[int, int]] = None,
                       user: Optional[str] = None, journal: bool = False) -> pb.ExecStart:
    if not argv:
        raise ValueError("exec needs a command")
    args = [str(a) for a in argv]
    start = pb.ExecStart(sandbox=sandbox, argv=args, workdir=workdir or "",
                         timeout_secs=float(timeout_secs or 0), pty=pty, detach=detach,
                         user=str(user) if user is not None else "", journal=bool(journal))
    if window is not None:
        start.window.cols, start.window.rows = int(window[0]), int(window[1])
    for k, v in (env or {}).items():
        if not isinstance(v, str):
            raise TypeError(f"exec env: {k} must be a literal string")
        start.env[k] = v
    return start


class _ExecCall:
    """One Exec stream: the request queue, the response iterator and the
    incremental decoders."""

    def __init__(self, client: Channel, start: Union[pb.ExecStart, pb.ExecAttach],
                 close_stdin: bool, text: bool = True):
        self._q: "queue.Queue[object]" = queue.Queue()
        if isinstance(start, pb.ExecAttach):
            self._q.put(pb.ExecRequest(attach=start))
            self.offset = start.offset
        else:
            self._q.put(pb.ExecRequest(start=start))
            self.offset = 0
        self._text = text
        if close_stdin:
            self._q.put(pb.ExecRequest(close_stdin=True))
        self._lock = threading.Lock()
        self._done = False
        self._stdin_closed = close_stdin
        self.exec_id = ""
        self.pid = 0
        self._dec_out = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._dec_err = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._call = client._sandboxes.Exec(self._requests())
        self._call.add_done_callback(lambda _c: self._finish())
        self._it = iter(self._call)
        self._exited = False

    def _requests(self) -> Iterator[pb.ExecRequest]:
        while True:
            item = self._q.get()
            if item is _END:
                return
            yield item  # type: ignore[misc]

    def _finish(self) -> None:
        with self._lock:
            if self._done:
                return
            self._done = True
        self._q.put(_END)

    def send(self, req: pb.ExecRequest) -> None:
        with self._lock:
            if self._done:
                raise WarrenError(Status.FAILED_PRECONDITION, "the process has finished")
            self._q.put(req)

    def cancel(self) -> None:
        self._call.cancel()
        self._finish()

    def events(self) -> Iterator[ExecEvent]:
        """Events until the exit; raises WarrenError when the call fails."""
        try:
            for resp in self._it:
                kind = resp.WhichOneof("kind")
                if kind == "started":
                    self.exec_id, self.pid = resp.started.exec_id, resp.started.pid
                elif kind in ("stdout", "stderr"):
                    out = resp.stdout if kind == "stdout" else resp.stderr
                    # Read the field once: each access copies the bytes.
                    data = out.data
                    self.offset = out.offset + len(data)
                    if not self._text:
                        if kind == "stdout":
                            yield ExecEvent(stdout_bytes=data, offset=self.offset)
                        else:
                            yield ExecEvent(stderr_bytes=data, offset=self.offset)
                        continue
                    dec = self._dec_out if kind == "stdout" else self._dec_err
                    text = dec.decode(data)
                    if text:
                        yield (ExecEvent(stdout=text, offset=self.offset) if kind == "stdout"
                               else ExecEvent(stderr=text, offset=self.offset))
                elif kind == "gap":
                    self.offset = resp.gap.to_offset
                    yield ExecEvent(gap=(resp.gap.from_offset, resp.gap.to_offset),
                                    offset=self.offset)
                elif kind == "exited":
                    tail_out = self._dec_out.decode(b"", final=True)
                    tail_err = self._dec_err.decode(b"", final=True)
                    if tail_out:
                        yield ExecEvent(stdout=tail_out)
                    if tail_err:
                        yield ExecEvent(stderr=tail_err)
                    self._exited = True
                    ex = resp.exited
                    yield ExecEvent(is_exited=True, exit_code=ex.exit_code, signal=ex.signal,
                                    reason=_reason(ex.reason),
                                    offset=self.offset)
        except grpc.RpcError as err:
            raise from_rpc_error(err, sandbox_call=True) from None
        finally:
            self._finish()
        if not self._exited:
            raise WarrenError(Status.UNKNOWN, "exec stream ended without an exit status")

    def wait_started(self) -> List[ExecEvent]:
        """Read until `started` (returns any events seen before it)."""
        pending: List[ExecEvent] = []
        try:
            for resp in self._it:
                kind = resp.WhichOneof("kind")
                if kind == "started":
                    self.exec_id, self.pid = resp.started.exec_id, resp.started.pid
                    return pending
                raise WarrenError(Status.INTERNAL,
                                  f"exec: expected 'started', got '{kind}'")
        except grpc.RpcError as err:
            self._finish()
            raise from_rpc_error(err, sandbox_call=True) from None
        self._finish()
        raise WarrenError(Status.UNKNOWN, "exec stream ended before the process started")


class Process:
    """A process started with Sandbox.exec_start (or re-attached with
    Sandbox.attach). With text=False, output events carry bytes
    (stdout_bytes / stderr_bytes) and wait() returns them decoded."""

    def __init__(self, call: _ExecCall, sandbox: Any = None):
        self._call = call
        self._sandbox = sandbox
        self._lock = threading.Lock()
        self._events = call.events()
        self._out: List[str] = []
        self._err: List[str] = []
        self._exit: Optional[ExecEvent] = None

    @property
    def exec_id(self) -> str:
        return self._call.exec_id

    @property
    def pid(self) -> int:
        return self._call.pid

    def changes(self) -> "ExecChanges":
        """What this process changed in the sandbox's writable layer
        (started with journal=True, or in a sandbox with journal_execs):
        created, modified, deleted, mode/owner changed. While it runs,
        the changes so far."""
        if self._sandbox is None:
            raise RuntimeError("changes(): this Process was not started from a Sandbox")
        return self._sandbox.changes(self.exec_id)

    def rollback(self, force: bool = False) -> List["FileChange"]:
        """Put back what this (finished, journaled) process changed; see
        Sandbox.rollback."""
        if self._sandbox is None:
            raise RuntimeError("rollback(): this Process was not started from a Sandbox")
        return self._sandbox.rollback(self.exec_id, force=force)

    @property
    def offset(self) -> int:
        """Offset in the exec's output after the bytes received so far:
        Sandbox.attach(exec_id, offset) resumes from there."""
        return self._call.offset

    def resize(self, cols: int, rows: int) -> None:
        """Set the PTY's window size (pty=True processes)."""
        self._call.send(pb.ExecRequest(resize=pb.WindowSize(cols=int(cols), rows=int(rows))))

    def detach(self) -> None:
        """Leave the process: end this stream. A process started with
        detach=True runs on (re-attach with Sandbox.attach); any other
        is killed."""
        self._call.cancel()

    def write_stdin(self, data: Union[str, bytes]) -> None:
        """Send bytes (str is UTF-8 encoded) to the process's stdin."""
        if isinstance(data, str):
            data = data.encode()
        self._call.send(pb.ExecRequest(stdin=bytes(data)))

    def close_stdin(self) -> None:
        """Close the process's stdin (it reads EOF)."""
        self._call.send(pb.ExecRequest(close_stdin=True))

    def send_signal(self, sig: Union[int, str, _signal.Signals], group: bool = False) -> None:
        """Deliver a signal to the process, or to its whole process group
        with group=True. sig: a number (15), signal.SIGTERM, or a name
        ("SIGTERM" or "TERM")."""
        n = signal_number(sig)
        self._call.send(pb.ExecRequest(signal=pb.ExecSignal(signal=n, group=group)))

    def output(self) -> Iterator[ExecEvent]:
        """Events as they arrive, ending with the exit event. (text=False:
        the bytes yielded here are not kept for wait(): stream them.)"""
        return self._output(keep=self._call._text)

    def _output(self, keep: bool) -> Iterator[ExecEvent]:
        out_b: List[bytes] = []
        err_b: List[bytes] = []
        while True:
            with self._lock:
                try:
                    ev = next(self._events)
                except StopIteration:
                    return
                if ev.stdout:
                    self._out.append(ev.stdout)
                if ev.stderr:
                    self._err.append(ev.stderr)
                if keep and ev.stdout_bytes:
                    out_b.append(ev.stdout_bytes)
                if keep and ev.stderr_bytes:
                    err_b.append(ev.stderr_bytes)
                if ev.is_exited:
                    self._exit = ev
                    if out_b:
                        self._out.append(b"".join(out_b).decode(errors="replace"))
                    if err_b:
                        self._err.append(b"".join(err_b).decode(errors="replace"))
            yield ev

    def wait(self) -> ExecResult:
        """Wait for the exit; returns everything the process printed
        (with text=True including what output() already yielded)."""
        for _ in self._output(keep=True):
            pass
        ex = self._exit
        assert ex is not None and ex.exit_code is not None
        return ExecResult("".join(self._out), "".join(self._err), ex.exit_code,
                          ex.signal, ex.reason or "exited", self.exec_id)

    @property
    def returncode(self) -> Optional[int]:
        return None if self._exit is None else self._exit.exit_code

    def cancel(self) -> None:
        """Abandon the stream (the process is killed unless detached)."""
        self._call.cancel()

    # --- context manager ---
    def __enter__(self) -> "Process":
        return self

    def __exit__(self, exc_type: Optional[Type[BaseException]],
                 exc: Optional[BaseException], tb: Optional[TracebackType]) -> None:
        """Leaving the block kills the process if it is still running
        (SIGKILL to its process group, also when started with
        detach=True), waits for its exit and ends the stream."""
        try:
            if self._exit is None:
                try:
                    self.send_signal(_signal.SIGKILL, group=True)
                    for _ in self._output(keep=False):
                        pass
                except WarrenError:
                    pass  # already gone: the stream has ended
        finally:
            self._call.cancel()

    def __del__(self) -> None:
        try:
            if self._exit is None:
                self._call.cancel()
        except Exception:
            pass


def collect(events: Iterator[ExecEvent], exec_id: Union[str, Any] = "") -> ExecResult:
    """The result of events; exec_id may be a callable, read once the
    events are consumed (the id arrives with the first response)."""
    out: List[str] = []
    err: List[str] = []
    last: Optional[ExecEvent] = None
    for ev in events:
        if ev.stdout:
            out.append(ev.stdout)
        if ev.stderr:
            err.append(ev.stderr)
        if ev.is_exited:
            last = ev
    assert last is not None and last.exit_code is not None
    return ExecResult("".join(out), "".join(err), last.exit_code, last.signal,
                      last.reason or "exited", exec_id() if callable(exec_id) else exec_id)

