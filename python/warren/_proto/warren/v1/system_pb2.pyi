from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable
from typing import ClassVar as _ClassVar, Optional as _Optional

DESCRIPTOR: _descriptor.FileDescriptor

class GetVersionRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class GetVersionResponse(_message.Message):
    __slots__ = ("version", "api_version", "git_commit", "uptime_seconds", "cgroup_mode", "kernel", "insecure_listeners")
    VERSION_FIELD_NUMBER: _ClassVar[int]
    API_VERSION_FIELD_NUMBER: _ClassVar[int]
    GIT_COMMIT_FIELD_NUMBER: _ClassVar[int]
    UPTIME_SECONDS_FIELD_NUMBER: _ClassVar[int]
    CGROUP_MODE_FIELD_NUMBER: _ClassVar[int]
    KERNEL_FIELD_NUMBER: _ClassVar[int]
    INSECURE_LISTENERS_FIELD_NUMBER: _ClassVar[int]
    version: str
    api_version: str
    git_commit: str
    uptime_seconds: int
    cgroup_mode: str
    kernel: str
    insecure_listeners: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, version: _Optional[str] = ..., api_version: _Optional[str] = ..., git_commit: _Optional[str] = ..., uptime_seconds: _Optional[int] = ..., cgroup_mode: _Optional[str] = ..., kernel: _Optional[str] = ..., insecure_listeners: _Optional[_Iterable[str]] = ...) -> None: ...
