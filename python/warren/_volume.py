"""Named durable volumes: a file tree kept by warrend, mountable into
sandboxes with volumes=[("name", "/path")] or sandbox.mount_volume(...).

Paths inside a volume are relative ("inputs/example.txt"); str paths are
sent as UTF-8 (undecodable bytes round-trip through surrogateescape) and
bytes paths as they are. See docs/volumes.md."""
from __future__ import annotations

import datetime as _dt
import enum
from dataclasses import dataclass
from typing import BinaryIO, Iterable, Iterator, List, Optional, Union

import grpc

from warren._channel import Channel
from warren._convert import from_timestamp
from warren._errors import from_rpc_error
from warren._proto.warren.v1 import volumes_pb2 as pb

CHUNK = 1 << 20

PathLike = Union[str, bytes]


def _path(p: PathLike) -> bytes:
    if isinstance(p, bytes):
        return p
    if isinstance(p, str):
        return p.encode("utf-8", "surrogateescape")
    raise TypeError(f"a volume path is a str or bytes, not {type(p).__name__}")


def _path_str(b: bytes) -> str:
    return b.decode("utf-8", "surrogateescape")


class FileKind(enum.IntEnum):
    UNSPECIFIED = 0
    FILE = 1
    DIRECTORY = 2
    SYMLINK = 3
    OTHER = 4


@dataclass(frozen=True)
class VolumeInfo:
    """A volume as warrend reports it: bytes and files (inodes) in use and
    their quotas."""

    name: str
    size_bytes: int = 0
    created_at: Optional[_dt.datetime] = None
    max_bytes: int = 0
    files: int = 0
    max_files: int = 0

    @classmethod
    def _from_proto(cls, v: pb.Volume) -> "VolumeInfo":
        return cls(name=v.name, size_bytes=v.size_bytes, created_at=from_timestamp(v.created_at),
                   max_bytes=v.max_bytes, files=v.files, max_files=v.max_files)


@dataclass(frozen=True)
class FileInfo:
    """A file in a volume (put_file, list_files, stat)."""

    path: str
    size_bytes: int = 0
    mode: int = 0
    modified_at: Optional[_dt.datetime] = None
    kind: FileKind = FileKind.UNSPECIFIED

    @classmethod
    def _from_proto(cls, f: pb.FileInfo) -> "FileInfo":
        return cls(path=_path_str(f.path), size_bytes=f.size_bytes, mode=f.mode,
                   modified_at=from_timestamp(f.modified_at), kind=FileKind(f.kind))


def create_volume(channel: Channel, name: str, max_bytes: int = 0,
                  max_files: int = 0) -> VolumeInfo:
    return VolumeInfo._from_proto(channel._unary(
        channel._volumes.CreateVolume,
        pb.CreateVolumeRequest(name=name, max_bytes=max_bytes, max_files=max_files)))


def delete_volume(channel: Channel, name: str) -> None:
    channel._unary(channel._volumes.DeleteVolume, pb.DeleteVolumeRequest(name=name))


def _chunks_of(data: Union[bytes, bytearray, memoryview, str, BinaryIO, Iterable[bytes]]
               ) -> Iterator[bytes]:
    if isinstance(data, str):
        data = data.encode()
    if isinstance(data, (bytes, bytearray, memoryview)):
        mv = memoryview(data)
        for i in range(0, len(mv), CHUNK):
            yield bytes(mv[i:i + CHUNK])
        return
    read = getattr(data, "readinto", None)
    if read is not None:
        buf = bytearray(CHUNK)
        view = memoryview(buf)
        while True:
            n = read(view)
            if not n:
                return
            yield bytes(view[:n])
    read = getattr(data, "read", None)
    if read is not None:
        while True:
            b = read(CHUNK)
            if not b:
                return
            yield bytes(b)
    for b in data:  # an iterable of chunks
        yield bytes(b)


class Volume:
    """A volume by name; created on first write (CreateVolume is
    idempotent) with max_bytes / max_files as its quotas (0 = warrend's
    defaults: 1 GiB, one file per 16 KiB). Uses `client` (a SandboxClient)
    or one from the environment (WARREN_ADDR), closed by close()."""

    def __init__(self, name: str, client: Optional[Channel] = None, *, max_bytes: int = 0,
                 max_files: int = 0):
        self.name = name
        self.max_bytes = max_bytes
        self.max_files = max_files
        self._channel = client
        self._own = False
        self._created = False

    def _conn(self) -> Channel:
        if self._channel is None:
            self._channel = Channel.from_env()
            self._own = True
        return self._channel

    def create(self) -> VolumeInfo:
        """Create the volume (or report the existing one)."""
        info = create_volume(self._conn(), self.name, self.max_bytes, self.max_files)
        self._created = True
        return info

    def info(self) -> VolumeInfo:
        ch = self._conn()
        return VolumeInfo._from_proto(
            ch._unary(ch._volumes.GetVolume, pb.GetVolumeRequest(name=self.name)))

    # --- writing ---
    def put_file(self, path: PathLike, data: Union[bytes, bytearray, memoryview, str, BinaryIO,
                                                   Iterable[bytes]],
                 mode: int = 0o644) -> FileInfo:
        """Write a file (relative path; parent dirs are made) with the given
        content: bytes, str (UTF-8), a binary file object or an iterable
        of chunks (streamed: any size). The file appears whole when this
        returns, or not at all."""
        if not self._created:
            self.create()
        meta = pb.PutFileRequest(meta=pb.PutFileMeta(volume=self.name, path=_path(path),
                                                     mode=mode))

        def reqs() -> Iterator[pb.PutFileRequest]:
            yield meta
            for chunk in _chunks_of(data):
                if chunk:
                    yield pb.PutFileRequest(data=chunk)

        ch = self._conn()
        return FileInfo._from_proto(ch._unary(ch._volumes.PutFile, reqs()))

    def put_file_stream(self, path: PathLike, chunks: Union[BinaryIO, Iterable[bytes]],
                        mode: int = 0o644) -> FileInfo:
        """put_file for a large content: a binary file object or an iterable
        of byte chunks, streamed without holding it all in memory."""
        return self.put_file(path, chunks, mode)

    def put_local_file(self, path: PathLike, local_path: str, mode: Optional[int] = None
                       ) -> FileInfo:
        """Upload the local file local_path (streamed) as path."""
        import os
        with open(local_path, "rb") as f:
            m = mode if mode is not None else os.fstat(f.fileno()).st_mode & 0o7777
            return self.put_file(path, f, m)

    # --- reading ---
    def get_file_stream(self, path: PathLike, offset: int = 0,
                        length: Optional[int] = None) -> Iterator[bytes]:
        """A file's content (or length bytes from offset) as chunks."""
        req = pb.GetFileRequest(volume=self.name, path=_path(path), offset=offset,
                                length=length or 0)
        if length == 0:
            return
        try:
            for c in self._conn()._volumes.GetFile(req):
                yield c.data
        except grpc.RpcError as err:
            raise from_rpc_error(err) from None

    def get_file(self, path: PathLike, offset: int = 0, length: Optional[int] = None) -> bytes:
        """A file's content (or length bytes from offset)."""
        return b"".join(self.get_file_stream(path, offset, length))

    def get_local_file(self, path: PathLike, local_path: str) -> int:
        """Download path into the local file local_path; returns its size."""
        n = 0
        with open(local_path, "wb") as f:
            for chunk in self.get_file_stream(path):
                f.write(chunk)
                n += len(chunk)
        return n

    def iter_files(self, prefix: PathLike = "", page_size: int = 0) -> Iterator[FileInfo]:
        """Every file (non-directory) under prefix, recursively, in path
        order, fetched page by page."""
        ch = self._conn()
        token = b""
        while True:
            resp = ch._unary(ch._volumes.ListFiles, pb.ListFilesRequest(
                volume=self.name, prefix=_path(prefix), page_size=page_size, page_token=token))
            for f in resp.files:
                yield FileInfo._from_proto(f)
            if not resp.next_page_token:
                return
            token = resp.next_page_token

    def list_files(self, prefix: PathLike = "") -> List[FileInfo]:
        """Every file (non-directory) under prefix, recursively."""
        return list(self.iter_files(prefix))

    def stat(self, path: PathLike = "") -> FileInfo:
        """Describe path ("" = the root); a final symlink is not followed."""
        ch = self._conn()
        return FileInfo._from_proto(ch._unary(
            ch._volumes.Stat, pb.StatRequest(volume=self.name, path=_path(path))))

    def remove_file(self, path: PathLike) -> None:
        """Remove a file, a symlink or an empty directory."""
        ch = self._conn()
        ch._unary(ch._volumes.RemoveFile, pb.RemoveFileRequest(volume=self.name, path=_path(path)))

    def delete(self) -> None:
        """Delete the volume and everything in it (refused while a live
        sandbox mounts it)."""
        delete_volume(self._conn(), self.name)
        self._created = False

    def close(self) -> None:
        if self._own and self._channel is not None:
            self._channel.close()
            self._channel, self._own = None, False

    def __enter__(self) -> "Volume":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"Volume({self.name!r})"
