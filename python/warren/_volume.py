"""Named durable volumes: a file tree kept by warrend, mountable into
sandboxes with volumes=[("name", "/path")]."""
from __future__ import annotations

import datetime as _dt
from dataclasses import dataclass
from typing import TYPE_CHECKING, Iterator, List, Optional, Union

import grpc

from warren._convert import from_timestamp
from warren._errors import from_rpc_error
from warren._proto.warren.v1 import volumes_pb2 as pb

if TYPE_CHECKING:
    from warren._client import SandboxClient

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


class Volume:
    """A volume by name; created on first write (CreateVolume is
    idempotent). Uses `client` or one from the environment."""

    def __init__(self, name: str, client: Optional["SandboxClient"] = None):
        self.name = name
        self._client = client
        self._own = False
        self._created = False

    @property
    def client(self) -> "SandboxClient":
        if self._client is None:
            from warren._client import SandboxClient

            self._client = SandboxClient.from_env()
            self._own = True
        return self._client

    def create(self) -> "Volume":
        self.client.create_volume(self.name)
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

        return FileInfo._from_proto(self.client._unary(self.client._volumes.PutFile, reqs()))

    def get_file(self, path: str) -> bytes:
        """A file's content."""
        try:
            return b"".join(c.data for c in self.client._volumes.GetFile(
                pb.GetFileRequest(volume=self.name, path=path)))
        except grpc.RpcError as err:
            raise from_rpc_error(err) from None

    def list_files(self, prefix: str = "") -> List[FileInfo]:
        resp = self.client._unary(self.client._volumes.ListFiles,
                                  pb.ListFilesRequest(volume=self.name, prefix=prefix))
        return [FileInfo._from_proto(f) for f in resp.files]

    def remove_file(self, path: str) -> None:
        self.client._unary(self.client._volumes.RemoveFile,
                           pb.RemoveFileRequest(volume=self.name, path=path))

    def delete(self) -> None:
        """Delete the volume and everything in it."""
        self.client.delete_volume(self.name)
        self._created = False

    def close(self) -> None:
        if self._own and self._client is not None:
            self._client.close()
            self._client, self._own = None, False

    def __repr__(self) -> str:
        return f"Volume({self.name!r})"
