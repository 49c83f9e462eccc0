from warren._proto.warren.v1 import common_pb2 as _common_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class WhoAmIRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class WhoAmIResponse(_message.Message):
    __slots__ = ("subject", "environment", "role", "token_id")
    SUBJECT_FIELD_NUMBER: _ClassVar[int]
    ENVIRONMENT_FIELD_NUMBER: _ClassVar[int]
    ROLE_FIELD_NUMBER: _ClassVar[int]
    TOKEN_ID_FIELD_NUMBER: _ClassVar[int]
    subject: str
    environment: str
    role: str
    token_id: str
    def __init__(self, subject: _Optional[str] = ..., environment: _Optional[str] = ..., role: _Optional[str] = ..., token_id: _Optional[str] = ...) -> None: ...

class GetWorkloadIdentityTokenRequest(_message.Message):
    __slots__ = ("audience",)
    AUDIENCE_FIELD_NUMBER: _ClassVar[int]
    audience: str
    def __init__(self, audience: _Optional[str] = ...) -> None: ...

class GetWorkloadIdentityTokenResponse(_message.Message):
    __slots__ = ("token", "expires_at_unix")
    TOKEN_FIELD_NUMBER: _ClassVar[int]
    EXPIRES_AT_UNIX_FIELD_NUMBER: _ClassVar[int]
    token: str
    expires_at_unix: int
    def __init__(self, token: _Optional[str] = ..., expires_at_unix: _Optional[int] = ...) -> None: ...

class CreateTokenRequest(_message.Message):
    __slots__ = ("environment", "role", "expires", "description")
    ENVIRONMENT_FIELD_NUMBER: _ClassVar[int]
    ROLE_FIELD_NUMBER: _ClassVar[int]
    EXPIRES_FIELD_NUMBER: _ClassVar[int]
    DESCRIPTION_FIELD_NUMBER: _ClassVar[int]
    environment: str
    role: str
    expires: str
    description: str
    def __init__(self, environment: _Optional[str] = ..., role: _Optional[str] = ..., expires: _Optional[str] = ..., description: _Optional[str] = ...) -> None: ...

class TokenInfo(_message.Message):
    __slots__ = ("id", "environment", "role", "description", "created_at", "expires_at", "revoked_at")
    ID_FIELD_NUMBER: _ClassVar[int]
    ENVIRONMENT_FIELD_NUMBER: _ClassVar[int]
    ROLE_FIELD_NUMBER: _ClassVar[int]
    DESCRIPTION_FIELD_NUMBER: _ClassVar[int]
    CREATED_AT_FIELD_NUMBER: _ClassVar[int]
    EXPIRES_AT_FIELD_NUMBER: _ClassVar[int]
    REVOKED_AT_FIELD_NUMBER: _ClassVar[int]
    id: str
    environment: str
    role: str
    description: str
    created_at: _common_pb2.Timestamp
    expires_at: _common_pb2.Timestamp
    revoked_at: _common_pb2.Timestamp
    def __init__(self, id: _Optional[str] = ..., environment: _Optional[str] = ..., role: _Optional[str] = ..., description: _Optional[str] = ..., created_at: _Optional[_Union[_common_pb2.Timestamp, _Mapping]] = ..., expires_at: _Optional[_Union[_common_pb2.Timestamp, _Mapping]] = ..., revoked_at: _Optional[_Union[_common_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class CreateTokenResponse(_message.Message):
    __slots__ = ("token", "info")
    TOKEN_FIELD_NUMBER: _ClassVar[int]
    INFO_FIELD_NUMBER: _ClassVar[int]
    token: str
    info: TokenInfo
    def __init__(self, token: _Optional[str] = ..., info: _Optional[_Union[TokenInfo, _Mapping]] = ...) -> None: ...

class ListTokensRequest(_message.Message):
    __slots__ = ("environment",)
    ENVIRONMENT_FIELD_NUMBER: _ClassVar[int]
    environment: str
    def __init__(self, environment: _Optional[str] = ...) -> None: ...

class ListTokensResponse(_message.Message):
    __slots__ = ("tokens",)
    TOKENS_FIELD_NUMBER: _ClassVar[int]
    tokens: _containers.RepeatedCompositeFieldContainer[TokenInfo]
    def __init__(self, tokens: _Optional[_Iterable[_Union[TokenInfo, _Mapping]]] = ...) -> None: ...

class RevokeTokenRequest(_message.Message):
    __slots__ = ("id",)
    ID_FIELD_NUMBER: _ClassVar[int]
    id: str
    def __init__(self, id: _Optional[str] = ...) -> None: ...

class AuditEvent(_message.Message):
    __slots__ = ("seq", "time", "environment", "token_id", "subject", "peer", "method", "object", "code", "message")
    SEQ_FIELD_NUMBER: _ClassVar[int]
    TIME_FIELD_NUMBER: _ClassVar[int]
    ENVIRONMENT_FIELD_NUMBER: _ClassVar[int]
    TOKEN_ID_FIELD_NUMBER: _ClassVar[int]
    SUBJECT_FIELD_NUMBER: _ClassVar[int]
    PEER_FIELD_NUMBER: _ClassVar[int]
    METHOD_FIELD_NUMBER: _ClassVar[int]
    OBJECT_FIELD_NUMBER: _ClassVar[int]
    CODE_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    seq: int
    time: _common_pb2.Timestamp
    environment: str
    token_id: str
    subject: str
    peer: str
    method: str
    object: str
    code: int
    message: str
    def __init__(self, seq: _Optional[int] = ..., time: _Optional[_Union[_common_pb2.Timestamp, _Mapping]] = ..., environment: _Optional[str] = ..., token_id: _Optional[str] = ..., subject: _Optional[str] = ..., peer: _Optional[str] = ..., method: _Optional[str] = ..., object: _Optional[str] = ..., code: _Optional[int] = ..., message: _Optional[str] = ...) -> None: ...

class ListAuditEventsRequest(_message.Message):
    __slots__ = ("environment", "limit", "before_seq")
    ENVIRONMENT_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    BEFORE_SEQ_FIELD_NUMBER: _ClassVar[int]
    environment: str
    limit: int
    before_seq: int
    def __init__(self, environment: _Optional[str] = ..., limit: _Optional[int] = ..., before_seq: _Optional[int] = ...) -> None: ...

class ListAuditEventsResponse(_message.Message):
    __slots__ = ("events",)
    EVENTS_FIELD_NUMBER: _ClassVar[int]
    events: _containers.RepeatedCompositeFieldContainer[AuditEvent]
    def __init__(self, events: _Optional[_Iterable[_Union[AuditEvent, _Mapping]]] = ...) -> None: ...

class Quota(_message.Message):
    __slots__ = ("environment", "max_sandboxes", "max_cpu", "max_memory_bytes", "max_volume_bytes")
    ENVIRONMENT_FIELD_NUMBER: _ClassVar[int]
    MAX_SANDBOXES_FIELD_NUMBER: _ClassVar[int]
    MAX_CPU_FIELD_NUMBER: _ClassVar[int]
    MAX_MEMORY_BYTES_FIELD_NUMBER: _ClassVar[int]
    MAX_VOLUME_BYTES_FIELD_NUMBER: _ClassVar[int]
    environment: str
    max_sandboxes: int
    max_cpu: float
    max_memory_bytes: int
    max_volume_bytes: int
    def __init__(self, environment: _Optional[str] = ..., max_sandboxes: _Optional[int] = ..., max_cpu: _Optional[float] = ..., max_memory_bytes: _Optional[int] = ..., max_volume_bytes: _Optional[int] = ...) -> None: ...

class SetQuotaRequest(_message.Message):
    __slots__ = ("quota",)
    QUOTA_FIELD_NUMBER: _ClassVar[int]
    quota: Quota
    def __init__(self, quota: _Optional[_Union[Quota, _Mapping]] = ...) -> None: ...

class GetQuotaRequest(_message.Message):
    __slots__ = ("environment",)
    ENVIRONMENT_FIELD_NUMBER: _ClassVar[int]
    environment: str
    def __init__(self, environment: _Optional[str] = ...) -> None: ...
