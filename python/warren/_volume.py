"""Named durable volumes: a file tree kept by warrend, mountable into
sandboxes with volumes=[("name", "/path")]."""
from __future__ import annotations

import datetime as _dt
from dataclasses import dataclass
from typing import Iterator, List, Optional, Union

import grpc

from warren._channel import Channel
from warren._convert import from_timestamp
from warren._errors import from_rpc_error
from warren._proto.warren.v1 import volumes_pb2 as pb

CHUNK = 1 << 20


@dataclass(frozen=True)
class VolumeInfo:
    """A volume as warrend reports it (create_volume, list_volumes)."""

    name: str
    size_bytes: int = 0
    created_at: Optional[_dt.datetime] = None

    @classmethod
    def _from_proto(cls, v: pb.Volume) -> "VolumeInfo":
        return cls(name=v.name, size_bytes=v.size_bytes, created_at=from_timestamp(v.created_at))


@dataclass(frozen=True)
class FileInfo:
    """A file in a volume (put_file, list_files)."""

    path: str
    size_bytes: int = 0
    mode: int = 0
    modified_at: Optional[_dt.datetime] = None

    @classmethod
    def _from_proto(cls, f: pb.FileInfo) -> "FileInfo":
        return cls(path=f.path, size_bytes=f.size_bytes, mode=f.mode,
                   modified_at=from_timestamp(f.modified_at))


def create_volume(channel: Channel, name: str) -> VolumeInfo:
    return VolumeInfo._from_proto(
        channel._unary(channel._volumes.CreateVolume, pb.CreateVolumeRequest(name=name)))


def delete_volume(channel: Channel, name: str) -> None:
    channel._unary(channel._volumes.DeleteVolume, pb.DeleteVolumeRequest(name=name))


class Volume:
    """A volume by name; created on first write (CreateVolume is
    idempotent). Uses `client` (a SandboxClient) or one from the
    environment, closed by close()."""

    def __init__(self, name: str, client: Optional[Channel] = None):
        self.name = name
        self._channel = client
        self._own = False
        self._created = False

    def _conn(self) -> Channel:
        if self._channel is None:
            self._channel = Channel.from_env()
            self._own = True
        return self._channel

    def create(self) -> "Volume":
        create_volume(self._conn(), self.name)
        self._created = True
        return self

    def put_file(self, path: str, data: Union[bytes, str], mode: int = 0o644) -> FileInfo:
        """Write a file (relative path) with the given content."""
        if not self._created:
            self.create()
        raw = data.encode() if isinstance(data, str) else bytes(data)

        def reqs() -> Iterator[pb.PutFileRequest]:
            yield pb.PutFileRequest(meta=pb.PutFileMeta(volume=self.name, path=path, mode=mode))
            for i in range(0, len(raw), CHUNK):
                yield pb.PutFileRequest(data=raw[i:i + CHUNK])

        ch = self._conn()
        return FileInfo._from_proto(ch._unary(ch._volumes.PutFile, reqs()))

    def get_file(self, path: str) -> bytes:
        """A file's content."""
        try:
            return b"".join(c.data for c in self._conn()._volumes.GetFile(
                pb.GetFileRequest(volume=self.name, path=path)))
        except grpc.RpcError as err:
            raise from_rpc_error(err) from None

    def list_files(self, prefix: str = "") -> List[FileInfo]:
        ch = self._conn()
        resp = ch._unary(ch._volumes.ListFiles, pb.ListFilesRequest(volume=self.name, prefix=prefix))
        return [FileInfo._from_proto(f) for f in resp.files]

    def remove_file(self, path: str) -> None:
        ch = self._conn()
        ch._unary(ch._volumes.RemoveFile, pb.RemoveFileRequest(volume=self.name, path=path))

    def delete(self) -> None:
        """Delete the volume and everything in it."""
        delete_volume(self._conn(), self.name)
        self._created = False

    def close(self) -> None:
        if self._own and self._channel is not None:
            self._channel.close()
            self._channel, self._own = None, False

    def __repr__(self) -> str:
        return f"Volume({self.name!r})"
