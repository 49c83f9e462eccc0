from warren._proto.warren.v1 import common_pb2 as _common_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class FileKind(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    FILE_KIND_UNSPECIFIED: _ClassVar[FileKind]
    FILE_KIND_FILE: _ClassVar[FileKind]
    FILE_KIND_DIRECTORY: _ClassVar[FileKind]
    FILE_KIND_SYMLINK: _ClassVar[FileKind]
    FILE_KIND_OTHER: _ClassVar[FileKind]
FILE_KIND_UNSPECIFIED: FileKind
FILE_KIND_FILE: FileKind
FILE_KIND_DIRECTORY: FileKind
FILE_KIND_SYMLINK: FileKind
FILE_KIND_OTHER: FileKind

class Volume(_message.Message):
    __slots__ = ("name", "size_bytes", "created_at", "max_bytes", "files", "max_files")
    NAME_FIELD_NUMBER: _ClassVar[int]
    SIZE_BYTES_FIELD_NUMBER: _ClassVar[int]
    CREATED_AT_FIELD_NUMBER: _ClassVar[int]
    MAX_BYTES_FIELD_NUMBER: _ClassVar[int]
    FILES_FIELD_NUMBER: _ClassVar[int]
    MAX_FILES_FIELD_NUMBER: _ClassVar[int]
    name: str
    size_bytes: int
    created_at: _common_pb2.Timestamp
    max_bytes: int
    files: int
    max_files: int
    def __init__(self, name: _Optional[str] = ..., size_bytes: _Optional[int] = ..., created_at: _Optional[_Union[_common_pb2.Timestamp, _Mapping]] = ..., max_bytes: _Optional[int] = ..., files: _Optional[int] = ..., max_files: _Optional[int] = ...) -> None: ...

class CreateVolumeRequest(_message.Message):
    __slots__ = ("name", "max_bytes", "max_files")
    NAME_FIELD_NUMBER: _ClassVar[int]
    MAX_BYTES_FIELD_NUMBER: _ClassVar[int]
    MAX_FILES_FIELD_NUMBER: _ClassVar[int]
    name: str
    max_bytes: int
    max_files: int
    def __init__(self, name: _Optional[str] = ..., max_bytes: _Optional[int] = ..., max_files: _Optional[int] = ...) -> None: ...

class GetVolumeRequest(_message.Message):
    __slots__ = ("name",)
    NAME_FIELD_NUMBER: _ClassVar[int]
    name: str
    def __init__(self, name: _Optional[str] = ...) -> None: ...

class ListVolumesRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ListVolumesResponse(_message.Message):
    __slots__ = ("volumes",)
    VOLUMES_FIELD_NUMBER: _ClassVar[int]
    volumes: _containers.RepeatedCompositeFieldContainer[Volume]
    def __init__(self, volumes: _Optional[_Iterable[_Union[Volume, _Mapping]]] = ...) -> None: ...

class DeleteVolumeRequest(_message.Message):
    __slots__ = ("name",)
    NAME_FIELD_NUMBER: _ClassVar[int]
    name: str
    def __init__(self, name: _Optional[str] = ...) -> None: ...

class DeleteVolumeResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class PutFileMeta(_message.Message):
    __slots__ = ("volume", "path", "mode")
    VOLUME_FIELD_NUMBER: _ClassVar[int]
    PATH_FIELD_NUMBER: _ClassVar[int]
    MODE_FIELD_NUMBER: _ClassVar[int]
    volume: str
    path: bytes
    mode: int
    def __init__(self, volume: _Optional[str] = ..., path: _Optional[bytes] = ..., mode: _Optional[int] = ...) -> None: ...

class PutFileRequest(_message.Message):
    __slots__ = ("meta", "data")
    META_FIELD_NUMBER: _ClassVar[int]
    DATA_FIELD_NUMBER: _ClassVar[int]
    meta: PutFileMeta
    data: bytes
    def __init__(self, meta: _Optional[_Union[PutFileMeta, _Mapping]] = ..., data: _Optional[bytes] = ...) -> None: ...

class FileInfo(_message.Message):
    __slots__ = ("path", "size_bytes", "mode", "modified_at", "kind")
    PATH_FIELD_NUMBER: _ClassVar[int]
    SIZE_BYTES_FIELD_NUMBER: _ClassVar[int]
    MODE_FIELD_NUMBER: _ClassVar[int]
    MODIFIED_AT_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    path: bytes
    size_bytes: int
    mode: int
    modified_at: _common_pb2.Timestamp
    kind: FileKind
    def __init__(self, path: _Optional[bytes] = ..., size_bytes: _Optional[int] = ..., mode: _Optional[int] = ..., modified_at: _Optional[_Union[_common_pb2.Timestamp, _Mapping]] = ..., kind: _Optional[_Union[FileKind, str]] = ...) -> None: ...

class GetFileRequest(_message.Message):
    __slots__ = ("volume", "path", "offset", "length")
    VOLUME_FIELD_NUMBER: _ClassVar[int]
    PATH_FIELD_NUMBER: _ClassVar[int]
    OFFSET_FIELD_NUMBER: _ClassVar[int]
    LENGTH_FIELD_NUMBER: _ClassVar[int]
    volume: str
    path: bytes
    offset: int
    length: int
    def __init__(self, volume: _Optional[str] = ..., path: _Optional[bytes] = ..., offset: _Optional[int] = ..., length: _Optional[int] = ...) -> None: ...

class FileChunk(_message.Message):
    __slots__ = ("data",)
    DATA_FIELD_NUMBER: _ClassVar[int]
    data: bytes
    def __init__(self, data: _Optional[bytes] = ...) -> None: ...

class ListFilesRequest(_message.Message):
    __slots__ = ("volume", "prefix", "page_size", "page_token")
    VOLUME_FIELD_NUMBER: _ClassVar[int]
    PREFIX_FIELD_NUMBER: _ClassVar[int]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    volume: str
    prefix: bytes
    page_size: int
    page_token: bytes
    def __init__(self, volume: _Optional[str] = ..., prefix: _Optional[bytes] = ..., page_size: _Optional[int] = ..., page_token: _Optional[bytes] = ...) -> None: ...

class ListFilesResponse(_message.Message):
    __slots__ = ("files", "next_page_token")
    FILES_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    files: _containers.RepeatedCompositeFieldContainer[FileInfo]
    next_page_token: bytes
    def __init__(self, files: _Optional[_Iterable[_Union[FileInfo, _Mapping]]] = ..., next_page_token: _Optional[bytes] = ...) -> None: ...

class RemoveFileRequest(_message.Message):
    __slots__ = ("volume", "path")
    VOLUME_FIELD_NUMBER: _ClassVar[int]
    PATH_FIELD_NUMBER: _ClassVar[int]
    volume: str
    path: bytes
    def __init__(self, volume: _Optional[str] = ..., path: _Optional[bytes] = ...) -> None: ...

class RemoveFileResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class StatRequest(_message.Message):
    __slots__ = ("volume", "path")
    VOLUME_FIELD_NUMBER: _ClassVar[int]
    PATH_FIELD_NUMBER: _ClassVar[int]
    volume: str
    path: bytes
    def __init__(self, volume: _Optional[str] = ..., path: _Optional[bytes] = ...) -> None: ...
