from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from typing import ClassVar as _ClassVar, Optional as _Optional

DESCRIPTOR: _descriptor.FileDescriptor

class EchoRequest(_message.Message):
    __slots__ = ("payload", "status", "message")
    PAYLOAD_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    payload: bytes
    status: int
    message: str
    def __init__(self, payload: _Optional[bytes] = ..., status: _Optional[int] = ..., message: _Optional[str] = ...) -> None: ...

class EchoResponse(_message.Message):
    __slots__ = ("payload",)
    PAYLOAD_FIELD_NUMBER: _ClassVar[int]
    payload: bytes
    def __init__(self, payload: _Optional[bytes] = ...) -> None: ...

class SourceRequest(_message.Message):
    __slots__ = ("count", "size")
    COUNT_FIELD_NUMBER: _ClassVar[int]
    SIZE_FIELD_NUMBER: _ClassVar[int]
    count: int
    size: int
    def __init__(self, count: _Optional[int] = ..., size: _Optional[int] = ...) -> None: ...

class SinkResponse(_message.Message):
    __slots__ = ("total_bytes", "messages", "fnv1a")
    TOTAL_BYTES_FIELD_NUMBER: _ClassVar[int]
    MESSAGES_FIELD_NUMBER: _ClassVar[int]
    FNV1A_FIELD_NUMBER: _ClassVar[int]
    total_bytes: int
    messages: int
    fnv1a: int
    def __init__(self, total_bytes: _Optional[int] = ..., messages: _Optional[int] = ..., fnv1a: _Optional[int] = ...) -> None: ...

class SleepRequest(_message.Message):
    __slots__ = ("millis",)
    MILLIS_FIELD_NUMBER: _ClassVar[int]
    millis: int
    def __init__(self, millis: _Optional[int] = ...) -> None: ...

class StatsRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class StatsResponse(_message.Message):
    __slots__ = ("calls_in_flight", "cancelled", "finished", "deadline_exceeded", "buffered_bytes")
    CALLS_IN_FLIGHT_FIELD_NUMBER: _ClassVar[int]
    CANCELLED_FIELD_NUMBER: _ClassVar[int]
    FINISHED_FIELD_NUMBER: _ClassVar[int]
    DEADLINE_EXCEEDED_FIELD_NUMBER: _ClassVar[int]
    BUFFERED_BYTES_FIELD_NUMBER: _ClassVar[int]
    calls_in_flight: int
    cancelled: int
    finished: int
    deadline_exceeded: int
    buffered_bytes: int
    def __init__(self, calls_in_flight: _Optional[int] = ..., cancelled: _Optional[int] = ..., finished: _Optional[int] = ..., deadline_exceeded: _Optional[int] = ..., buffered_bytes: _Optional[int] = ...) -> None: ...
