from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class SecretRef(_message.Message):
    __slots__ = ("name", "inline_value", "inline_values", "integration", "env_name")
    NAME_FIELD_NUMBER: _ClassVar[int]
    INLINE_VALUE_FIELD_NUMBER: _ClassVar[int]
    INLINE_VALUES_FIELD_NUMBER: _ClassVar[int]
    INTEGRATION_FIELD_NUMBER: _ClassVar[int]
    ENV_NAME_FIELD_NUMBER: _ClassVar[int]
    name: str
    inline_value: bytes
    inline_values: InlineSecrets
    integration: IntegrationRef
    env_name: str
    def __init__(self, name: _Optional[str] = ..., inline_value: _Optional[bytes] = ..., inline_values: _Optional[_Union[InlineSecrets, _Mapping]] = ..., integration: _Optional[_Union[IntegrationRef, _Mapping]] = ..., env_name: _Optional[str] = ...) -> None: ...

class InlineSecrets(_message.Message):
    __slots__ = ("values",)
    class ValuesEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: bytes
        def __init__(self, key: _Optional[str] = ..., value: _Optional[bytes] = ...) -> None: ...
    VALUES_FIELD_NUMBER: _ClassVar[int]
    values: _containers.ScalarMap[str, bytes]
    def __init__(self, values: _Optional[_Mapping[str, bytes]] = ...) -> None: ...

class IntegrationRef(_message.Message):
    __slots__ = ("name", "keys")
    NAME_FIELD_NUMBER: _ClassVar[int]
    KEYS_FIELD_NUMBER: _ClassVar[int]
    name: str
    keys: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, name: _Optional[str] = ..., keys: _Optional[_Iterable[str]] = ...) -> None: ...

class SetSecretRequest(_message.Message):
    __slots__ = ("name", "value", "values")
    class ValuesEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: bytes
        def __init__(self, key: _Optional[str] = ..., value: _Optional[bytes] = ...) -> None: ...
    NAME_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    VALUES_FIELD_NUMBER: _ClassVar[int]
    name: str
    value: bytes
    values: _containers.ScalarMap[str, bytes]
    def __init__(self, name: _Optional[str] = ..., value: _Optional[bytes] = ..., values: _Optional[_Mapping[str, bytes]] = ...) -> None: ...

class SecretInfo(_message.Message):
    __slots__ = ("name", "keys", "updated_at_unix", "version")
    NAME_FIELD_NUMBER: _ClassVar[int]
    KEYS_FIELD_NUMBER: _ClassVar[int]
    UPDATED_AT_UNIX_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    name: str
    keys: _containers.RepeatedScalarFieldContainer[str]
    updated_at_unix: int
    version: int
    def __init__(self, name: _Optional[str] = ..., keys: _Optional[_Iterable[str]] = ..., updated_at_unix: _Optional[int] = ..., version: _Optional[int] = ...) -> None: ...

class ListSecretsRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ListSecretsResponse(_message.Message):
    __slots__ = ("secrets",)
    SECRETS_FIELD_NUMBER: _ClassVar[int]
    secrets: _containers.RepeatedCompositeFieldContainer[SecretInfo]
    def __init__(self, secrets: _Optional[_Iterable[_Union[SecretInfo, _Mapping]]] = ...) -> None: ...

class DeleteSecretRequest(_message.Message):
    __slots__ = ("name",)
    NAME_FIELD_NUMBER: _ClassVar[int]
    name: str
    def __init__(self, name: _Optional[str] = ...) -> None: ...

class DeleteSecretResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...
