"""The files of a running sandbox: ``sandbox.files`` (the Files service,
docs/files.md).

Paths are paths inside the sandbox ("/workspace/a.txt"; a relative path is
relative to the sandbox's working directory). str paths are sent as UTF-8
(undecodable bytes round-trip through surrogateescape), bytes paths as they
are. warrend resolves every path inside the sandbox's root (volumes
included) and never follows a symlink out of it; /proc, /sys, devices,
FIFOs and sockets are refused."""
from __future__ import annotations

import datetime as _dt
import enum
import io
import queue
import threading
from dataclasses import dataclass
from typing import (Any, BinaryIO, Callable, Iterable, Iterator, List, Optional, Union)

import grpc

from warren._convert import from_timestamp
from warren._errors import NotFound, from_rpc_error
from warren._proto.warren.v1 import files_pb2 as pb
from warren._proto.warren.v1 import files_pb2_grpc
from warren._volume import FileKind, _chunks_of, _path, _path_str

CHUNK = 1 << 20
#: events a Watcher holds for its consumer before the stream is held back
QUEUE_MAX = 1024

PathLike = Union[str, bytes]
Data = Union[bytes, bytearray, memoryview, str, BinaryIO, Iterable[bytes]]


@dataclass(frozen=True)
class FileStat:
    """One path of a sandbox (stat, list, write, mkdir, rename)."""

    path: str
    kind: FileKind = FileKind.UNSPECIFIED
    size_bytes: int = 0
    mode: int = 0
    uid: int = 0
    gid: int = 0
    modified_at: Optional[_dt.datetime] = None
    #: a symlink's target (not followed); "" otherwise
    symlink_target: str = ""

    @property
    def is_dir(self) -> bool:
        return self.kind == FileKind.DIRECTORY

    @property
    def is_file(self) -> bool:
        return self.kind == FileKind.FILE

    @property
    def name(self) -> str:
        return self.path.rstrip("/").rsplit("/", 1)[-1]

    @classmethod
    def _from_proto(cls, f: pb.FileStat) -> "FileStat":
        return cls(path=_path_str(f.path), kind=FileKind(f.kind), size_bytes=f.size_bytes,
                   mode=f.mode, uid=f.uid, gid=f.gid,
                   modified_at=from_timestamp(f.modified_at),
                   symlink_target=_path_str(f.symlink_target))


class WatchEventKind(str, enum.Enum):
    READY = "READY"
    CREATED = "CREATED"
    MODIFIED = "MODIFIED"
    DELETED = "DELETED"
    ATTRIB = "ATTRIB"
    MOVED_FROM = "MOVED_FROM"
    MOVED_TO = "MOVED_TO"
    #: events were lost (the watcher was slower than the changes): rescan
    OVERFLOW = "OVERFLOW"
    CLOSE_WRITE = "CLOSE_WRITE"

    def __str__(self) -> str:
        return self.value


@dataclass(frozen=True)
class WatchEvent:
    kind: WatchEventKind
    path: str = ""
    is_dir: bool = False
    cookie: int = 0

    @classmethod
    def _from_proto(cls, e: pb.WatchEvent) -> "WatchEvent":
        name = pb.WatchEventKind.Name(e.kind).replace("WATCH_EVENT_KIND_", "")
        return cls(kind=WatchEventKind(name), path=_path_str(e.path), is_dir=e.is_dir,
                   cookie=e.cookie)


class Watcher:
    """An open Watch: iterate it for WatchEvents (READY first, once the
    watches are in place); ``close()`` (or leaving a ``with`` block) ends
    it. ``next_event(timeout)`` waits at most timeout seconds."""

    def __init__(self, call: Any):
        self._call = call
        # bounded: a consumer that falls behind stops the stream (gRPC flow
        # control), warrend stops reading the kernel's queue, and OVERFLOW
        # tells it events were lost, instead of memory growing without end
        self._q: "queue.Queue[Any]" = queue.Queue(maxsize=QUEUE_MAX)
        self._closed = False
        self._t = threading.Thread(target=self._pump, daemon=True)
        self._t.start()
        first = self.next_event(timeout=None)
        if first is None or first.kind != WatchEventKind.READY:
            raise RuntimeError(f"watch: expected READY first, got {first!r}")

    def _put(self, item: Any) -> bool:
        while not self._closed:
            try:
                self._q.put(item, timeout=0.2)
                return True
            except queue.Full:
                continue
        return False

    def _pump(self) -> None:
        try:
            for e in self._call:
                if not self._put(WatchEvent._from_proto(e)):
                    return
        except grpc.RpcError as err:
            if err.code() != grpc.StatusCode.CANCELLED:  # type: ignore[attr-defined]
                self._put(from_rpc_error(err))
        self._put(None)

    def next_event(self, timeout: Optional[float] = None) -> Optional[WatchEvent]:
        """The next event; None when the watch ended (or on timeout)."""
        if getattr(self, "_ended", False):
            return None
        try:
            item = self._q.get(timeout=timeout)
        except queue.Empty:
            return None
        if isinstance(item, Exception):
            raise item
        if item is None:
            self._ended = True
        return item

    def __iter__(self) -> Iterator[WatchEvent]:
        while True:
            e = self.next_event()
            if e is None:
                return
            yield e

    def close(self) -> None:
        self._closed = True
        self._call.cancel()

    def __enter__(self) -> "Watcher":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class FileReader(io.RawIOBase):
    """A sandbox file open for reading (``files.open(path, "rb")``): chunks
    are fetched as they are read."""

    def __init__(self, chunks: Iterator[bytes]):
        super().__init__()
        self._chunks = chunks
        self._buf = memoryview(b"")

    def readable(self) -> bool:
        return True

    def readinto(self, b: Any) -> int:
        while not self._buf:
            try:
                self._buf = memoryview(next(self._chunks))
            except StopIteration:
                return 0
        n = min(len(b), len(self._buf))
        b[:n] = self._buf[:n]
        self._buf = self._buf[n:]
        return n

    def close(self) -> None:
        close = getattr(self._chunks, "close", None)
        if close is not None:
            close()
        super().close()


class FileWriter(io.RawIOBase):
    """A sandbox file open for writing (``files.open(path, "wb")``): bytes
    written are streamed; the file replaces path atomically on ``close()``
    (which raises when the write failed). ``abort()`` drops it."""

    def __init__(self, files: "Files", path: PathLike, mode: int, user: Optional[str]):
        super().__init__()
        self._q: "queue.Queue[Optional[bytes]]" = queue.Queue(maxsize=8)
        meta = pb.WriteFileRequest(meta=pb.WriteFileMeta(
            sandbox=files._sandbox, path=_path(path), mode=mode, user=user or ""))

        def reqs() -> Iterator[pb.WriteFileRequest]:
            yield meta
            while True:
                b = self._q.get()
                if b is None:
                    return
                yield pb.WriteFileRequest(data=b)

        self._future = files._stub().WriteFile.future(reqs())
        self._buf = bytearray()
        self.result: Optional[FileStat] = None

    def writable(self) -> bool:
        return True

    def _put(self, b: Optional[bytes]) -> None:
        while True:
            if self._future.done() and b is not None:
                self._raise()
            try:
                self._q.put(b, timeout=0.2)
                return
            except queue.Full:
                continue

    def _raise(self) -> None:
        try:
            self._future.result()
        except grpc.RpcError as err:
            raise from_rpc_error(err) from None
        raise ValueError("the write ended early")

    def write(self, b: Any) -> int:
        if self.closed:
            raise ValueError("write to a closed file")
        self._buf += b
        while len(self._buf) >= CHUNK:
            self._put(bytes(self._buf[:CHUNK]))
            del self._buf[:CHUNK]
        return len(b)

    def close(self) -> None:
        if self.closed:
            return
        try:
            if self._buf:
                self._put(bytes(self._buf))
                self._buf = bytearray()
            self._put(None)
            try:
                self.result = FileStat._from_proto(self._future.result())
            except grpc.RpcError as err:
                raise from_rpc_error(err) from None
        finally:
            super().close()

    def abort(self) -> None:
        """Cancel the write: path is left as it was."""
        self._future.cancel()
        super().close()

    def __exit__(self, exc_type: Any, *rest: Any) -> None:
        if exc_type is not None:
            self.abort()
        else:
            self.close()


class _TextWriter(io.TextIOWrapper):
    """A text writer over a FileWriter whose close() (or a with block's end
    without an exception) commits the file, and an exception aborts it."""

    def __init__(self, raw: FileWriter, encoding: str):
        super().__init__(io.BufferedWriter(raw, CHUNK), encoding=encoding)  # type: ignore[arg-type]
        self._raw = raw

    @property
    def result(self) -> Optional[FileStat]:
        return self._raw.result

    def __exit__(self, exc_type: Any, *rest: Any) -> None:
        if exc_type is not None:
            self._raw.abort()
        else:
            self.close()


class Files:
    """``sandbox.files``: read, write, list, stat, remove, mkdir, rename and
    watch the files of a running (or paused) sandbox."""

    def __init__(self, conn: Callable[[], Any], sandbox: str):
        self._conn = conn
        self._sandbox = sandbox
        self._stubs: Optional[files_pb2_grpc.FilesStub] = None
        self._stub_channel: Any = None

    def _stub(self) -> files_pb2_grpc.FilesStub:
        ch = self._conn()
        if self._stubs is None or self._stub_channel is not ch:
            self._stubs = files_pb2_grpc.FilesStub(ch._channel)
            self._stub_channel = ch
        return self._stubs

    def _unary(self, name: str, req: Any) -> Any:
        try:
            return getattr(self._stub(), name)(req)
        except grpc.RpcError as err:
            raise from_rpc_error(err) from None

    # --- reading ---
    def read_stream(self, path: PathLike, offset: int = 0,
                    length: Optional[int] = None) -> Iterator[bytes]:
        """A file's content (or length bytes from offset) as chunks."""
        if length == 0:
            return
        req = pb.ReadFileRequest(sandbox=self._sandbox, path=_path(path), offset=offset,
                                 length=length or 0)
        call = self._stub().ReadFile(req)
        try:
            for c in call:
                yield c.data
        except grpc.RpcError as err:
            raise from_rpc_error(err) from None
        finally:
            call.cancel()

    def read(self, path: PathLike, offset: int = 0, length: Optional[int] = None) -> bytes:
        """A file's content (or length bytes from offset) as bytes."""
        return b"".join(self.read_stream(path, offset, length))

    def read_text(self, path: PathLike, encoding: str = "utf-8", errors: str = "strict") -> str:
        """A file's content decoded as text."""
        return self.read(path).decode(encoding, errors)

    def download(self, path: PathLike, local_path: str) -> int:
        """Copy path into the local file local_path; returns its size."""
        n = 0
        with open(local_path, "wb") as f:
            for chunk in self.read_stream(path):
                f.write(chunk)
                n += len(chunk)
        return n

    # --- writing ---
    def write(self, path: PathLike, data: Data, *, mode: int = 0,
              user: Optional[str] = None) -> FileStat:
        """Write a file with data: bytes, str (UTF-8), a binary file object
        or an iterable of chunks (streamed: any size). Parent directories
        are made. It replaces path atomically when this returns. mode 0 =
        the replaced file's mode, else 0644; user ("NAME", "UID",
        "NAME:GROUP", "UID:GID") None = the replaced file's owner, else
        the sandbox's user."""
        meta = pb.WriteFileRequest(meta=pb.WriteFileMeta(
            sandbox=self._sandbox, path=_path(path), mode=mode, user=user or ""))

        def reqs() -> Iterator[pb.WriteFileRequest]:
            yield meta
            for chunk in _chunks_of(data):
                if chunk:
                    yield pb.WriteFileRequest(data=chunk)

        return FileStat._from_proto(self._unary("WriteFile", reqs()))

    def symlink(self, path: PathLike, target: PathLike, *, user: Optional[str] = None
                ) -> FileStat:
        """Make path a symlink to target (stored as given, never followed),
        replacing a file or symlink there."""
        meta = pb.WriteFileRequest(meta=pb.WriteFileMeta(
            sandbox=self._sandbox, path=_path(path), user=user or "",
            symlink_target=_path(target)))
        return FileStat._from_proto(self._unary("WriteFile", iter([meta])))

    def write_text(self, path: PathLike, text: str, encoding: str = "utf-8", *, mode: int = 0,
                   user: Optional[str] = None) -> FileStat:
        return self.write(path, text.encode(encoding), mode=mode, user=user)

    def upload(self, local_path: str, path: PathLike, *, mode: Optional[int] = None,
               user: Optional[str] = None) -> FileStat:
        """Copy the local file local_path to path (streamed; its mode kept
        unless mode is given)."""
        import os
        with open(local_path, "rb") as f:
            m = mode if mode is not None else os.fstat(f.fileno()).st_mode & 0o7777
            return self.write(path, f, mode=m, user=user)

    def open(self, path: PathLike, mode: str = "r", *, file_mode: int = 0,
             user: Optional[str] = None, encoding: str = "utf-8") -> Any:
        """A file-like object: "rb" reads (streamed), "wb" writes (streamed;
        the file appears whole on close); "r" (the default, as for the
        built-in open) and "w" are the same as text (encoding)."""
        if mode == "rb":
            return io.BufferedReader(FileReader(self.read_stream(path)), CHUNK)
        if mode == "wb":
            return FileWriter(self, path, file_mode, user)
        if mode == "r":
            return io.TextIOWrapper(self.open(path, "rb"), encoding=encoding)
        if mode == "w":
            return _TextWriter(FileWriter(self, path, file_mode, user), encoding)
        raise ValueError(f"mode: {mode!r}; use 'rb', 'wb', 'r' or 'w'")

    # --- the tree ---
    def iter_dir(self, path: PathLike, *, recursive: bool = False,
                 max_depth: int = 0) -> Iterator[FileStat]:
        """The entries of directory path (with recursive: of the tree
        under it, depth-first in path order), streamed."""
        req = pb.ListDirRequest(sandbox=self._sandbox, path=_path(path), recursive=recursive,
                                max_depth=max_depth)
        call = self._stub().ListDir(req)
        try:
            for resp in call:
                for e in resp.entries:
                    yield FileStat._from_proto(e)
        except grpc.RpcError as err:
            raise from_rpc_error(err) from None
        finally:
            call.cancel()

    def list(self, path: PathLike, *, recursive: bool = False,
             max_depth: int = 0) -> List[FileStat]:
        return list(self.iter_dir(path, recursive=recursive, max_depth=max_depth))

    def stat(self, path: PathLike) -> FileStat:
        """Describe path (a final symlink is not followed)."""
        return FileStat._from_proto(
            self._unary("Stat", pb.StatFileRequest(sandbox=self._sandbox, path=_path(path))))

    def exists(self, path: PathLike) -> bool:
        try:
            self.stat(path)
            return True
        except NotFound:
            return False

    def remove(self, path: PathLike, *, recursive: bool = False) -> None:
        """Remove a file, a symlink, an empty directory, or with recursive
        a whole tree (never following symlinks or entering mounts)."""
        self._unary("Remove", pb.RemovePathRequest(sandbox=self._sandbox, path=_path(path),
                                                   recursive=recursive))

    def mkdir(self, path: PathLike, *, mode: int = 0, user: Optional[str] = None,
              parents: bool = False) -> FileStat:
        """Make a directory (mode 0 = 0755); parents: missing parents too,
        and an existing directory is fine."""
        return FileStat._from_proto(self._unary("MakeDir", pb.MakeDirRequest(
            sandbox=self._sandbox, path=_path(path), mode=mode, user=user or "",
            parents=parents)))

    def rename(self, src: PathLike, dst: PathLike, *, overwrite: bool = True) -> FileStat:
        """Rename (move) src to dst within one mount of the sandbox."""
        return FileStat._from_proto(self._unary("Rename", pb.RenamePathRequest(
            sandbox=self._sandbox, **{"from": _path(src)}, to=_path(dst),
            no_replace=not overwrite)))

    def watch(self, path: PathLike, *, recursive: bool = False,
              timeout: Optional[float] = None) -> Watcher:
        """Watch directory path (recursive: the tree under it) for changes;
        returns once the watch is in place."""
        req = pb.WatchRequest(sandbox=self._sandbox, path=_path(path), recursive=recursive)
        try:
            return Watcher(self._stub().Watch(req, timeout=timeout))
        except grpc.RpcError as err:
            raise from_rpc_error(err) from None
