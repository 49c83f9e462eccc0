from warren._proto.warren.v1 import common_pb2 as _common_pb2
from warren._proto.warren.v1 import volumes_pb2 as _volumes_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class WatchEventKind(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    WATCH_EVENT_KIND_UNSPECIFIED: _ClassVar[WatchEventKind]
    WATCH_EVENT_KIND_READY: _ClassVar[WatchEventKind]
    WATCH_EVENT_KIND_CREATED: _ClassVar[WatchEventKind]
    WATCH_EVENT_KIND_MODIFIED: _ClassVar[WatchEventKind]
    WATCH_EVENT_KIND_DELETED: _ClassVar[WatchEventKind]
    WATCH_EVENT_KIND_ATTRIB: _ClassVar[WatchEventKind]
    WATCH_EVENT_KIND_MOVED_FROM: _ClassVar[WatchEventKind]
    WATCH_EVENT_KIND_MOVED_TO: _ClassVar[WatchEventKind]
    WATCH_EVENT_KIND_OVERFLOW: _ClassVar[WatchEventKind]
    WATCH_EVENT_KIND_CLOSE_WRITE: _ClassVar[WatchEventKind]
WATCH_EVENT_KIND_UNSPECIFIED: WatchEventKind
WATCH_EVENT_KIND_READY: WatchEventKind
WATCH_EVENT_KIND_CREATED: WatchEventKind
WATCH_EVENT_KIND_MODIFIED: WatchEventKind
WATCH_EVENT_KIND_DELETED: WatchEventKind
WATCH_EVENT_KIND_ATTRIB: WatchEventKind
WATCH_EVENT_KIND_MOVED_FROM: WatchEventKind
WATCH_EVENT_KIND_MOVED_TO: WatchEventKind
WATCH_EVENT_KIND_OVERFLOW: WatchEventKind
WATCH_EVENT_KIND_CLOSE_WRITE: WatchEventKind

class FileStat(_message.Message):
    __slots__ = ("path", "kind", "size_bytes", "mode", "uid", "gid", "modified_at", "symlink_target")
    PATH_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    SIZE_BYTES_FIELD_NUMBER: _ClassVar[int]
    MODE_FIELD_NUMBER: _ClassVar[int]
    UID_FIELD_NUMBER: _ClassVar[int]
    GID_FIELD_NUMBER: _ClassVar[int]
    MODIFIED_AT_FIELD_NUMBER: _ClassVar[int]
    SYMLINK_TARGET_FIELD_NUMBER: _ClassVar[int]
    path: bytes
    kind: _volumes_pb2.FileKind
    size_bytes: int
    mode: int
    uid: int
    gid: int
    modified_at: _common_pb2.Timestamp
    symlink_target: bytes
    def __init__(self, path: _Optional[bytes] = ..., kind: _Optional[_Union[_volumes_pb2.FileKind, str]] = ..., size_bytes: _Optional[int] = ..., mode: _Optional[int] = ..., uid: _Optional[int] = ..., gid: _Optional[int] = ..., modified_at: _Optional[_Union[_common_pb2.Timestamp, _Mapping]] = ..., symlink_target: _Optional[bytes] = ...) -> None: ...

class ReadFileRequest(_message.Message):
    __slots__ = ("sandbox", "path", "offset", "length")
    SANDBOX_FIELD_NUMBER: _ClassVar[int]
    PATH_FIELD_NUMBER: _ClassVar[int]
    OFFSET_FIELD_NUMBER: _ClassVar[int]
    LENGTH_FIELD_NUMBER: _ClassVar[int]
    sandbox: str
    path: bytes
    offset: int
    length: int
    def __init__(self, sandbox: _Optional[str] = ..., path: _Optional[bytes] = ..., offset: _Optional[int] = ..., length: _Optional[int] = ...) -> None: ...

class WriteFileMeta(_message.Message):
    __slots__ = ("sandbox", "path", "mode", "user", "symlink_target")
    SANDBOX_FIELD_NUMBER: _ClassVar[int]
    PATH_FIELD_NUMBER: _ClassVar[int]
    MODE_FIELD_NUMBER: _ClassVar[int]
    USER_FIELD_NUMBER: _ClassVar[int]
    SYMLINK_TARGET_FIELD_NUMBER: _ClassVar[int]
    sandbox: str
    path: bytes
    mode: int
    user: str
    symlink_target: bytes
    def __init__(self, sandbox: _Optional[str] = ..., path: _Optional[bytes] = ..., mode: _Optional[int] = ..., user: _Optional[str] = ..., symlink_target: _Optional[bytes] = ...) -> None: ...

class WriteFileRequest(_message.Message):
    __slots__ = ("meta", "data")
    META_FIELD_NUMBER: _ClassVar[int]
    DATA_FIELD_NUMBER: _ClassVar[int]
    meta: WriteFileMeta
    data: bytes
    def __init__(self, meta: _Optional[_Union[WriteFileMeta, _Mapping]] = ..., data: _Optional[bytes] = ...) -> None: ...

class ListDirRequest(_message.Message):
    __slots__ = ("sandbox", "path", "recursive", "max_depth")
    SANDBOX_FIELD_NUMBER: _ClassVar[int]
    PATH_FIELD_NUMBER: _ClassVar[int]
    RECURSIVE_FIELD_NUMBER: _ClassVar[int]
    MAX_DEPTH_FIELD_NUMBER: _ClassVar[int]
    sandbox: str
    path: bytes
    recursive: bool
    max_depth: int
    def __init__(self, sandbox: _Optional[str] = ..., path: _Optional[bytes] = ..., recursive: _Optional[bool] = ..., max_depth: _Optional[int] = ...) -> None: ...

class ListDirResponse(_message.Message):
    __slots__ = ("entries",)
    ENTRIES_FIELD_NUMBER: _ClassVar[int]
    entries: _containers.RepeatedCompositeFieldContainer[FileStat]
    def __init__(self, entries: _Optional[_Iterable[_Union[FileStat, _Mapping]]] = ...) -> None: ...

class StatFileRequest(_message.Message):
    __slots__ = ("sandbox", "path")
    SANDBOX_FIELD_NUMBER: _ClassVar[int]
    PATH_FIELD_NUMBER: _ClassVar[int]
    sandbox: str
    path: bytes
    def __init__(self, sandbox: _Optional[str] = ..., path: _Optional[bytes] = ...) -> None: ...

class RemovePathRequest(_message.Message):
    __slots__ = ("sandbox", "path", "recursive")
    SANDBOX_FIELD_NUMBER: _ClassVar[int]
    PATH_FIELD_NUMBER: _ClassVar[int]
    RECURSIVE_FIELD_NUMBER: _ClassVar[int]
    sandbox: str
    path: bytes
    recursive: bool
    def __init__(self, sandbox: _Optional[str] = ..., path: _Optional[bytes] = ..., recursive: _Optional[bool] = ...) -> None: ...

class RemovePathResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class MakeDirRequest(_message.Message):
    __slots__ = ("sandbox", "path", "mode", "user", "parents")
    SANDBOX_FIELD_NUMBER: _ClassVar[int]
    PATH_FIELD_NUMBER: _ClassVar[int]
    MODE_FIELD_NUMBER: _ClassVar[int]
    USER_FIELD_NUMBER: _ClassVar[int]
    PARENTS_FIELD_NUMBER: _ClassVar[int]
    sandbox: str
    path: bytes
    mode: int
    user: str
    parents: bool
    def __init__(self, sandbox: _Optional[str] = ..., path: _Optional[bytes] = ..., mode: _Optional[int] = ..., user: _Optional[str] = ..., parents: _Optional[bool] = ...) -> None: ...

class RenamePathRequest(_message.Message):
    __slots__ = ("sandbox", "to", "no_replace")
    SANDBOX_FIELD_NUMBER: _ClassVar[int]
    FROM_FIELD_NUMBER: _ClassVar[int]
    TO_FIELD_NUMBER: _ClassVar[int]
    NO_REPLACE_FIELD_NUMBER: _ClassVar[int]
    sandbox: str
    to: bytes
    no_replace: bool
    def __init__(self, sandbox: _Optional[str] = ..., to: _Optional[bytes] = ..., no_replace: _Optional[bool] = ..., **kwargs) -> None: ...

class WatchRequest(_message.Message):
    __slots__ = ("sandbox", "path", "recursive")
    SANDBOX_FIELD_NUMBER: _ClassVar[int]
    PATH_FIELD_NUMBER: _ClassVar[int]
    RECURSIVE_FIELD_NUMBER: _ClassVar[int]
    sandbox: str
    path: bytes
    recursive: bool
    def __init__(self, sandbox: _Optional[str] = ..., path: _Optional[bytes] = ..., recursive: _Optional[bool] = ...) -> None: ...

class WatchEvent(_message.Message):
    __slots__ = ("kind", "path", "is_dir", "cookie")
    KIND_FIELD_NUMBER: _ClassVar[int]
    PATH_FIELD_NUMBER: _ClassVar[int]
    IS_DIR_FIELD_NUMBER: _ClassVar[int]
    COOKIE_FIELD_NUMBER: _ClassVar[int]
    kind: WatchEventKind
    path: bytes
    is_dir: bool
    cookie: int
    def __init__(self, kind: _Optional[_Union[WatchEventKind, str]] = ..., path: _Optional[bytes] = ..., is_dir: _Optional[bool] = ..., cookie: _Optional[int] = ...) -> None: ...
