from warren._proto.warren.v1 import common_pb2 as _common_pb2
from warren._proto.warren.v1 import images_pb2 as _images_pb2
from warren._proto.warren.v1 import secrets_pb2 as _secrets_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class ExecFileChangeKind(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    EXEC_FILE_CHANGE_KIND_UNSPECIFIED: _ClassVar[ExecFileChangeKind]
    EXEC_FILE_CHANGE_KIND_CREATED: _ClassVar[ExecFileChangeKind]
    EXEC_FILE_CHANGE_KIND_MODIFIED: _ClassVar[ExecFileChangeKind]
    EXEC_FILE_CHANGE_KIND_DELETED: _ClassVar[ExecFileChangeKind]
    EXEC_FILE_CHANGE_KIND_MODE: _ClassVar[ExecFileChangeKind]

class SandboxStatus(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    SANDBOX_STATUS_UNSPECIFIED: _ClassVar[SandboxStatus]
    SANDBOX_STATUS_PENDING: _ClassVar[SandboxStatus]
    SANDBOX_STATUS_RUNNING: _ClassVar[SandboxStatus]
    SANDBOX_STATUS_TERMINATING: _ClassVar[SandboxStatus]
    SANDBOX_STATUS_TERMINATED: _ClassVar[SandboxStatus]
    SANDBOX_STATUS_FAILED: _ClassVar[SandboxStatus]
    SANDBOX_STATUS_PAUSED: _ClassVar[SandboxStatus]

class ComputeClass(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    COMPUTE_CLASS_UNSPECIFIED: _ClassVar[ComputeClass]
    COMPUTE_CLASS_HOST: _ClassVar[ComputeClass]
    COMPUTE_CLASS_K8S: _ClassVar[ComputeClass]

class ResourceDetector(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    RESOURCE_DETECTOR_UNSPECIFIED: _ClassVar[ResourceDetector]
    RESOURCE_DETECTOR_GITHUB_PULL_REQUESTS: _ClassVar[ResourceDetector]

class ExitReason(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    EXIT_REASON_UNSPECIFIED: _ClassVar[ExitReason]
    EXIT_REASON_EXITED: _ClassVar[ExitReason]
    EXIT_REASON_SIGNALED: _ClassVar[ExitReason]
    EXIT_REASON_TIMEOUT: _ClassVar[ExitReason]
    EXIT_REASON_OOM: _ClassVar[ExitReason]
    EXIT_REASON_SANDBOX_TERMINATED: _ClassVar[ExitReason]
EXEC_FILE_CHANGE_KIND_UNSPECIFIED: ExecFileChangeKind
EXEC_FILE_CHANGE_KIND_CREATED: ExecFileChangeKind
EXEC_FILE_CHANGE_KIND_MODIFIED: ExecFileChangeKind
EXEC_FILE_CHANGE_KIND_DELETED: ExecFileChangeKind
EXEC_FILE_CHANGE_KIND_MODE: ExecFileChangeKind
SANDBOX_STATUS_UNSPECIFIED: SandboxStatus
SANDBOX_STATUS_PENDING: SandboxStatus
SANDBOX_STATUS_RUNNING: SandboxStatus
SANDBOX_STATUS_TERMINATING: SandboxStatus
SANDBOX_STATUS_TERMINATED: SandboxStatus
SANDBOX_STATUS_FAILED: SandboxStatus
SANDBOX_STATUS_PAUSED: SandboxStatus
COMPUTE_CLASS_UNSPECIFIED: ComputeClass
COMPUTE_CLASS_HOST: ComputeClass
COMPUTE_CLASS_K8S: ComputeClass
RESOURCE_DETECTOR_UNSPECIFIED: ResourceDetector
RESOURCE_DETECTOR_GITHUB_PULL_REQUESTS: ResourceDetector
EXIT_REASON_UNSPECIFIED: ExitReason
EXIT_REASON_EXITED: ExitReason
EXIT_REASON_SIGNALED: ExitReason
EXIT_REASON_TIMEOUT: ExitReason
EXIT_REASON_OOM: ExitReason
EXIT_REASON_SANDBOX_TERMINATED: ExitReason

class GetExecChangesRequest(_message.Message):
    __slots__ = ("sandbox", "exec_id")
    SANDBOX_FIELD_NUMBER: _ClassVar[int]
    EXEC_ID_FIELD_NUMBER: _ClassVar[int]
    sandbox: str
    exec_id: str
    def __init__(self, sandbox: _Optional[str] = ..., exec_id: _Optional[str] = ...) -> None: ...

class ExecFileChange(_message.Message):
    __slots__ = ("path", "kind", "type", "old_mode", "new_mode")
    PATH_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    TYPE_FIELD_NUMBER: _ClassVar[int]
    OLD_MODE_FIELD_NUMBER: _ClassVar[int]
    NEW_MODE_FIELD_NUMBER: _ClassVar[int]
    path: str
    kind: ExecFileChangeKind
    type: str
    old_mode: int
    new_mode: int
    def __init__(self, path: _Optional[str] = ..., kind: _Optional[_Union[ExecFileChangeKind, str]] = ..., type: _Optional[str] = ..., old_mode: _Optional[int] = ..., new_mode: _Optional[int] = ...) -> None: ...

class GetExecChangesResponse(_message.Message):
    __slots__ = ("changes", "running", "complete")
    CHANGES_FIELD_NUMBER: _ClassVar[int]
    RUNNING_FIELD_NUMBER: _ClassVar[int]
    COMPLETE_FIELD_NUMBER: _ClassVar[int]
    changes: _containers.RepeatedCompositeFieldContainer[ExecFileChange]
    running: bool
    complete: bool
    def __init__(self, changes: _Optional[_Iterable[_Union[ExecFileChange, _Mapping]]] = ..., running: _Optional[bool] = ..., complete: _Optional[bool] = ...) -> None: ...

class RollbackExecRequest(_message.Message):
    __slots__ = ("sandbox", "exec_id", "force")
    SANDBOX_FIELD_NUMBER: _ClassVar[int]
    EXEC_ID_FIELD_NUMBER: _ClassVar[int]
    FORCE_FIELD_NUMBER: _ClassVar[int]
    sandbox: str
    exec_id: str
    force: bool
    def __init__(self, sandbox: _Optional[str] = ..., exec_id: _Optional[str] = ..., force: _Optional[bool] = ...) -> None: ...

class RollbackExecResponse(_message.Message):
    __slots__ = ("restored",)
    RESTORED_FIELD_NUMBER: _ClassVar[int]
    restored: _containers.RepeatedCompositeFieldContainer[ExecFileChange]
    def __init__(self, restored: _Optional[_Iterable[_Union[ExecFileChange, _Mapping]]] = ...) -> None: ...

class TunnelRequest(_message.Message):
    __slots__ = ("sandbox", "port", "data", "close_write")
    SANDBOX_FIELD_NUMBER: _ClassVar[int]
    PORT_FIELD_NUMBER: _ClassVar[int]
    DATA_FIELD_NUMBER: _ClassVar[int]
    CLOSE_WRITE_FIELD_NUMBER: _ClassVar[int]
    sandbox: str
    port: int
    data: bytes
    close_write: bool
    def __init__(self, sandbox: _Optional[str] = ..., port: _Optional[int] = ..., data: _Optional[bytes] = ..., close_write: _Optional[bool] = ...) -> None: ...

class TunnelResponse(_message.Message):
    __slots__ = ("data", "connected", "eof")
    DATA_FIELD_NUMBER: _ClassVar[int]
    CONNECTED_FIELD_NUMBER: _ClassVar[int]
    EOF_FIELD_NUMBER: _ClassVar[int]
    data: bytes
    connected: bool
    eof: bool
    def __init__(self, data: _Optional[bytes] = ..., connected: _Optional[bool] = ..., eof: _Optional[bool] = ...) -> None: ...

class VolumeMount(_message.Message):
    __slots__ = ("volume", "path", "read_only")
    VOLUME_FIELD_NUMBER: _ClassVar[int]
    PATH_FIELD_NUMBER: _ClassVar[int]
    READ_ONLY_FIELD_NUMBER: _ClassVar[int]
    volume: str
    path: str
    read_only: bool
    def __init__(self, volume: _Optional[str] = ..., path: _Optional[str] = ..., read_only: _Optional[bool] = ...) -> None: ...

class Route(_message.Message):
    __slots__ = ("cidr", "ports")
    CIDR_FIELD_NUMBER: _ClassVar[int]
    PORTS_FIELD_NUMBER: _ClassVar[int]
    cidr: str
    ports: _containers.RepeatedCompositeFieldContainer[PortRange]
    def __init__(self, cidr: _Optional[str] = ..., ports: _Optional[_Iterable[_Union[PortRange, _Mapping]]] = ...) -> None: ...

class PortRange(_message.Message):
    __slots__ = ("start", "end")
    START_FIELD_NUMBER: _ClassVar[int]
    END_FIELD_NUMBER: _ClassVar[int]
    start: int
    end: int
    def __init__(self, start: _Optional[int] = ..., end: _Optional[int] = ...) -> None: ...

class Matcher(_message.Message):
    __slots__ = ("exact", "starts_with", "regex")
    EXACT_FIELD_NUMBER: _ClassVar[int]
    STARTS_WITH_FIELD_NUMBER: _ClassVar[int]
    REGEX_FIELD_NUMBER: _ClassVar[int]
    exact: str
    starts_with: str
    regex: str
    def __init__(self, exact: _Optional[str] = ..., starts_with: _Optional[str] = ..., regex: _Optional[str] = ...) -> None: ...

class RequestMatch(_message.Message):
    __slots__ = ("path", "method", "query", "headers")
    class QueryEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: Matcher
        def __init__(self, key: _Optional[str] = ..., value: _Optional[_Union[Matcher, _Mapping]] = ...) -> None: ...
    class HeadersEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: Matcher
        def __init__(self, key: _Optional[str] = ..., value: _Optional[_Union[Matcher, _Mapping]] = ...) -> None: ...
    PATH_FIELD_NUMBER: _ClassVar[int]
    METHOD_FIELD_NUMBER: _ClassVar[int]
    QUERY_FIELD_NUMBER: _ClassVar[int]
    HEADERS_FIELD_NUMBER: _ClassVar[int]
    path: Matcher
    method: str
    query: _containers.MessageMap[str, Matcher]
    headers: _containers.MessageMap[str, Matcher]
    def __init__(self, path: _Optional[_Union[Matcher, _Mapping]] = ..., method: _Optional[str] = ..., query: _Optional[_Mapping[str, Matcher]] = ..., headers: _Optional[_Mapping[str, Matcher]] = ...) -> None: ...

class Transformer(_message.Message):
    __slots__ = ("headers", "headers_secrets")
    class HeadersEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    class HeadersSecretsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    HEADERS_FIELD_NUMBER: _ClassVar[int]
    HEADERS_SECRETS_FIELD_NUMBER: _ClassVar[int]
    headers: _containers.ScalarMap[str, str]
    headers_secrets: _containers.ScalarMap[str, str]
    def __init__(self, headers: _Optional[_Mapping[str, str]] = ..., headers_secrets: _Optional[_Mapping[str, str]] = ...) -> None: ...

class Rule(_message.Message):
    __slots__ = ("match", "transforms", "forward_url")
    MATCH_FIELD_NUMBER: _ClassVar[int]
    TRANSFORMS_FIELD_NUMBER: _ClassVar[int]
    FORWARD_URL_FIELD_NUMBER: _ClassVar[int]
    match: RequestMatch
    transforms: _containers.RepeatedCompositeFieldContainer[Transformer]
    forward_url: str
    def __init__(self, match: _Optional[_Union[RequestMatch, _Mapping]] = ..., transforms: _Optional[_Iterable[_Union[Transformer, _Mapping]]] = ..., forward_url: _Optional[str] = ...) -> None: ...

class HostRules(_message.Message):
    __slots__ = ("rules",)
    RULES_FIELD_NUMBER: _ClassVar[int]
    rules: _containers.RepeatedCompositeFieldContainer[Rule]
    def __init__(self, rules: _Optional[_Iterable[_Union[Rule, _Mapping]]] = ...) -> None: ...

class NetworkPolicy(_message.Message):
    __slots__ = ("allowed_hosts", "host_rules", "allowed_routes", "denied_routes", "learn")
    class HostRulesEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: HostRules
        def __init__(self, key: _Optional[str] = ..., value: _Optional[_Union[HostRules, _Mapping]] = ...) -> None: ...
    ALLOWED_HOSTS_FIELD_NUMBER: _ClassVar[int]
    HOST_RULES_FIELD_NUMBER: _ClassVar[int]
    ALLOWED_ROUTES_FIELD_NUMBER: _ClassVar[int]
    DENIED_ROUTES_FIELD_NUMBER: _ClassVar[int]
    LEARN_FIELD_NUMBER: _ClassVar[int]
    allowed_hosts: _containers.RepeatedScalarFieldContainer[str]
    host_rules: _containers.MessageMap[str, HostRules]
    allowed_routes: _containers.RepeatedCompositeFieldContainer[Route]
    denied_routes: _containers.RepeatedCompositeFieldContainer[Route]
    learn: bool
    def __init__(self, allowed_hosts: _Optional[_Iterable[str]] = ..., host_rules: _Optional[_Mapping[str, HostRules]] = ..., allowed_routes: _Optional[_Iterable[_Union[Route, _Mapping]]] = ..., denied_routes: _Optional[_Iterable[_Union[Route, _Mapping]]] = ..., learn: _Optional[bool] = ...) -> None: ...

class HostCredential(_message.Message):
    __slots__ = ("hosts", "secret")
    HOSTS_FIELD_NUMBER: _ClassVar[int]
    SECRET_FIELD_NUMBER: _ClassVar[int]
    hosts: _containers.RepeatedScalarFieldContainer[str]
    secret: _secrets_pb2.SecretRef
    def __init__(self, hosts: _Optional[_Iterable[str]] = ..., secret: _Optional[_Union[_secrets_pb2.SecretRef, _Mapping]] = ...) -> None: ...

class SshDest(_message.Message):
    __slots__ = ("host", "private_key_secret", "username", "port", "host_keys")
    HOST_FIELD_NUMBER: _ClassVar[int]
    PRIVATE_KEY_SECRET_FIELD_NUMBER: _ClassVar[int]
    USERNAME_FIELD_NUMBER: _ClassVar[int]
    PORT_FIELD_NUMBER: _ClassVar[int]
    HOST_KEYS_FIELD_NUMBER: _ClassVar[int]
    host: str
    private_key_secret: str
    username: str
    port: int
    host_keys: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, host: _Optional[str] = ..., private_key_secret: _Optional[str] = ..., username: _Optional[str] = ..., port: _Optional[int] = ..., host_keys: _Optional[_Iterable[str]] = ...) -> None: ...

class Resources(_message.Message):
    __slots__ = ("cpu", "memory", "pids", "disk")
    CPU_FIELD_NUMBER: _ClassVar[int]
    MEMORY_FIELD_NUMBER: _ClassVar[int]
    PIDS_FIELD_NUMBER: _ClassVar[int]
    DISK_FIELD_NUMBER: _ClassVar[int]
    cpu: str
    memory: str
    pids: int
    disk: str
    def __init__(self, cpu: _Optional[str] = ..., memory: _Optional[str] = ..., pids: _Optional[int] = ..., disk: _Optional[str] = ...) -> None: ...

class EnvValue(_message.Message):
    __slots__ = ("value", "secret")
    VALUE_FIELD_NUMBER: _ClassVar[int]
    SECRET_FIELD_NUMBER: _ClassVar[int]
    value: str
    secret: _secrets_pb2.SecretRef
    def __init__(self, value: _Optional[str] = ..., secret: _Optional[_Union[_secrets_pb2.SecretRef, _Mapping]] = ...) -> None: ...

class CreateSandboxRequest(_message.Message):
    __slots__ = ("image", "name", "env", "secrets", "workdir", "entrypoint", "tags", "resources", "volumes", "network_policy", "credentials", "managed_ssh", "resource_detectors", "identity", "lifetime", "compute_class", "hostname", "block_network", "journal_execs")
    class EnvEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: EnvValue
        def __init__(self, key: _Optional[str] = ..., value: _Optional[_Union[EnvValue, _Mapping]] = ...) -> None: ...
    class TagsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    class ManagedSshEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: SshDest
        def __init__(self, key: _Optional[str] = ..., value: _Optional[_Union[SshDest, _Mapping]] = ...) -> None: ...
    IMAGE_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    ENV_FIELD_NUMBER: _ClassVar[int]
    SECRETS_FIELD_NUMBER: _ClassVar[int]
    WORKDIR_FIELD_NUMBER: _ClassVar[int]
    ENTRYPOINT_FIELD_NUMBER: _ClassVar[int]
    TAGS_FIELD_NUMBER: _ClassVar[int]
    RESOURCES_FIELD_NUMBER: _ClassVar[int]
    VOLUMES_FIELD_NUMBER: _ClassVar[int]
    NETWORK_POLICY_FIELD_NUMBER: _ClassVar[int]
    CREDENTIALS_FIELD_NUMBER: _ClassVar[int]
    MANAGED_SSH_FIELD_NUMBER: _ClassVar[int]
    RESOURCE_DETECTORS_FIELD_NUMBER: _ClassVar[int]
    IDENTITY_FIELD_NUMBER: _ClassVar[int]
    LIFETIME_FIELD_NUMBER: _ClassVar[int]
    COMPUTE_CLASS_FIELD_NUMBER: _ClassVar[int]
    HOSTNAME_FIELD_NUMBER: _ClassVar[int]
    BLOCK_NETWORK_FIELD_NUMBER: _ClassVar[int]
    JOURNAL_EXECS_FIELD_NUMBER: _ClassVar[int]
    image: _images_pb2.ImageSpec
    name: str
    env: _containers.MessageMap[str, EnvValue]
    secrets: _containers.RepeatedCompositeFieldContainer[_secrets_pb2.SecretRef]
    workdir: str
    entrypoint: _containers.RepeatedScalarFieldContainer[str]
    tags: _containers.ScalarMap[str, str]
    resources: Resources
    volumes: _containers.RepeatedCompositeFieldContainer[VolumeMount]
    network_policy: NetworkPolicy
    credentials: _containers.RepeatedCompositeFieldContainer[HostCredential]
    managed_ssh: _containers.MessageMap[str, SshDest]
    resource_detectors: _containers.RepeatedScalarFieldContainer[ResourceDetector]
    identity: bool
    lifetime: str
    compute_class: ComputeClass
    hostname: str
    block_network: bool
    journal_execs: bool
    def __init__(self, image: _Optional[_Union[_images_pb2.ImageSpec, _Mapping]] = ..., name: _Optional[str] = ..., env: _Optional[_Mapping[str, EnvValue]] = ..., secrets: _Optional[_Iterable[_Union[_secrets_pb2.SecretRef, _Mapping]]] = ..., workdir: _Optional[str] = ..., entrypoint: _Optional[_Iterable[str]] = ..., tags: _Optional[_Mapping[str, str]] = ..., resources: _Optional[_Union[Resources, _Mapping]] = ..., volumes: _Optional[_Iterable[_Union[VolumeMount, _Mapping]]] = ..., network_policy: _Optional[_Union[NetworkPolicy, _Mapping]] = ..., credentials: _Optional[_Iterable[_Union[HostCredential, _Mapping]]] = ..., managed_ssh: _Optional[_Mapping[str, SshDest]] = ..., resource_detectors: _Optional[_Iterable[_Union[ResourceDetector, str]]] = ..., identity: _Optional[bool] = ..., lifetime: _Optional[str] = ..., compute_class: _Optional[_Union[ComputeClass, str]] = ..., hostname: _Optional[str] = ..., block_network: _Optional[bool] = ..., journal_execs: _Optional[bool] = ...) -> None: ...

class ResourceUsage(_message.Message):
    __slots__ = ("cpu_seconds", "memory_bytes", "memory_peak_bytes", "pids")
    CPU_SECONDS_FIELD_NUMBER: _ClassVar[int]
    MEMORY_BYTES_FIELD_NUMBER: _ClassVar[int]
    MEMORY_PEAK_BYTES_FIELD_NUMBER: _ClassVar[int]
    PIDS_FIELD_NUMBER: _ClassVar[int]
    cpu_seconds: float
    memory_bytes: int
    memory_peak_bytes: int
    pids: int
    def __init__(self, cpu_seconds: _Optional[float] = ..., memory_bytes: _Optional[int] = ..., memory_peak_bytes: _Optional[int] = ..., pids: _Optional[int] = ...) -> None: ...

class Sandbox(_message.Message):
    __slots__ = ("id", "name", "status", "status_message", "image_id", "image_ref", "tags", "resources", "usage", "created_at", "terminated_at", "expires_at", "workdir", "entrypoint", "compute_class", "volumes", "environment", "detected_resources", "egress_enforced")
    class TagsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    ID_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    STATUS_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    IMAGE_ID_FIELD_NUMBER: _ClassVar[int]
    IMAGE_REF_FIELD_NUMBER: _ClassVar[int]
    TAGS_FIELD_NUMBER: _ClassVar[int]
    RESOURCES_FIELD_NUMBER: _ClassVar[int]
    USAGE_FIELD_NUMBER: _ClassVar[int]
    CREATED_AT_FIELD_NUMBER: _ClassVar[int]
    TERMINATED_AT_FIELD_NUMBER: _ClassVar[int]
    EXPIRES_AT_FIELD_NUMBER: _ClassVar[int]
    WORKDIR_FIELD_NUMBER: _ClassVar[int]
    ENTRYPOINT_FIELD_NUMBER: _ClassVar[int]
    COMPUTE_CLASS_FIELD_NUMBER: _ClassVar[int]
    VOLUMES_FIELD_NUMBER: _ClassVar[int]
    ENVIRONMENT_FIELD_NUMBER: _ClassVar[int]
    DETECTED_RESOURCES_FIELD_NUMBER: _ClassVar[int]
    EGRESS_ENFORCED_FIELD_NUMBER: _ClassVar[int]
    id: str
    name: str
    status: SandboxStatus
    status_message: str
    image_id: str
    image_ref: str
    tags: _containers.ScalarMap[str, str]
    resources: Resources
    usage: ResourceUsage
    created_at: _common_pb2.Timestamp
    terminated_at: _common_pb2.Timestamp
    expires_at: _common_pb2.Timestamp
    workdir: str
    entrypoint: _containers.RepeatedScalarFieldContainer[str]
    compute_class: ComputeClass
    volumes: _containers.RepeatedCompositeFieldContainer[VolumeMount]
    environment: str
    detected_resources: _containers.RepeatedScalarFieldContainer[str]
    egress_enforced: bool
    def __init__(self, id: _Optional[str] = ..., name: _Optional[str] = ..., status: _Optional[_Union[SandboxStatus, str]] = ..., status_message: _Optional[str] = ..., image_id: _Optional[str] = ..., image_ref: _Optional[str] = ..., tags: _Optional[_Mapping[str, str]] = ..., resources: _Optional[_Union[Resources, _Mapping]] = ..., usage: _Optional[_Union[ResourceUsage, _Mapping]] = ..., created_at: _Optional[_Union[_common_pb2.Timestamp, _Mapping]] = ..., terminated_at: _Optional[_Union[_common_pb2.Timestamp, _Mapping]] = ..., expires_at: _Optional[_Union[_common_pb2.Timestamp, _Mapping]] = ..., workdir: _Optional[str] = ..., entrypoint: _Optional[_Iterable[str]] = ..., compute_class: _Optional[_Union[ComputeClass, str]] = ..., volumes: _Optional[_Iterable[_Union[VolumeMount, _Mapping]]] = ..., environment: _Optional[str] = ..., detected_resources: _Optional[_Iterable[str]] = ..., egress_enforced: _Optional[bool] = ...) -> None: ...

class GetSandboxRequest(_message.Message):
    __slots__ = ("id", "name")
    ID_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    id: str
    name: str
    def __init__(self, id: _Optional[str] = ..., name: _Optional[str] = ...) -> None: ...

class ListSandboxesRequest(_message.Message):
    __slots__ = ("statuses", "name", "tags", "page_size", "page_token")
    class TagsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    STATUSES_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    TAGS_FIELD_NUMBER: _ClassVar[int]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    statuses: _containers.RepeatedScalarFieldContainer[SandboxStatus]
    name: str
    tags: _containers.ScalarMap[str, str]
    page_size: int
    page_token: str
    def __init__(self, statuses: _Optional[_Iterable[_Union[SandboxStatus, str]]] = ..., name: _Optional[str] = ..., tags: _Optional[_Mapping[str, str]] = ..., page_size: _Optional[int] = ..., page_token: _Optional[str] = ...) -> None: ...

class ListSandboxesResponse(_message.Message):
    __slots__ = ("sandboxes", "next_page_token")
    SANDBOXES_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    sandboxes: _containers.RepeatedCompositeFieldContainer[Sandbox]
    next_page_token: str
    def __init__(self, sandboxes: _Optional[_Iterable[_Union[Sandbox, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class PauseSandboxRequest(_message.Message):
    __slots__ = ("id", "name")
    ID_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    id: str
    name: str
    def __init__(self, id: _Optional[str] = ..., name: _Optional[str] = ...) -> None: ...

class ResumeSandboxRequest(_message.Message):
    __slots__ = ("id", "name")
    ID_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    id: str
    name: str
    def __init__(self, id: _Optional[str] = ..., name: _Optional[str] = ...) -> None: ...

class SnapshotSandboxRequest(_message.Message):
    __slots__ = ("id", "name", "image_name")
    ID_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    IMAGE_NAME_FIELD_NUMBER: _ClassVar[int]
    id: str
    name: str
    image_name: str
    def __init__(self, id: _Optional[str] = ..., name: _Optional[str] = ..., image_name: _Optional[str] = ...) -> None: ...

class ForkSandboxRequest(_message.Message):
    __slots__ = ("id", "name", "count")
    ID_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    COUNT_FIELD_NUMBER: _ClassVar[int]
    id: str
    name: str
    count: int
    def __init__(self, id: _Optional[str] = ..., name: _Optional[str] = ..., count: _Optional[int] = ...) -> None: ...

class ForkSandboxResponse(_message.Message):
    __slots__ = ("image", "sandboxes")
    IMAGE_FIELD_NUMBER: _ClassVar[int]
    SANDBOXES_FIELD_NUMBER: _ClassVar[int]
    image: _images_pb2.Image
    sandboxes: _containers.RepeatedCompositeFieldContainer[Sandbox]
    def __init__(self, image: _Optional[_Union[_images_pb2.Image, _Mapping]] = ..., sandboxes: _Optional[_Iterable[_Union[Sandbox, _Mapping]]] = ...) -> None: ...

class TerminateSandboxRequest(_message.Message):
    __slots__ = ("id", "name", "grace_period_seconds")
    ID_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    GRACE_PERIOD_SECONDS_FIELD_NUMBER: _ClassVar[int]
    id: str
    name: str
    grace_period_seconds: float
    def __init__(self, id: _Optional[str] = ..., name: _Optional[str] = ..., grace_period_seconds: _Optional[float] = ...) -> None: ...

class WindowSize(_message.Message):
    __slots__ = ("cols", "rows")
    COLS_FIELD_NUMBER: _ClassVar[int]
    ROWS_FIELD_NUMBER: _ClassVar[int]
    cols: int
    rows: int
    def __init__(self, cols: _Optional[int] = ..., rows: _Optional[int] = ...) -> None: ...

class ExecStart(_message.Message):
    __slots__ = ("sandbox", "argv", "env", "workdir", "timeout_secs", "pty", "window", "detach", "user", "journal")
    class EnvEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    SANDBOX_FIELD_NUMBER: _ClassVar[int]
    ARGV_FIELD_NUMBER: _ClassVar[int]
    ENV_FIELD_NUMBER: _ClassVar[int]
    WORKDIR_FIELD_NUMBER: _ClassVar[int]
    TIMEOUT_SECS_FIELD_NUMBER: _ClassVar[int]
    PTY_FIELD_NUMBER: _ClassVar[int]
    WINDOW_FIELD_NUMBER: _ClassVar[int]
    DETACH_FIELD_NUMBER: _ClassVar[int]
    USER_FIELD_NUMBER: _ClassVar[int]
    JOURNAL_FIELD_NUMBER: _ClassVar[int]
    sandbox: str
    argv: _containers.RepeatedScalarFieldContainer[str]
    env: _containers.ScalarMap[str, str]
    workdir: str
    timeout_secs: float
    pty: bool
    window: WindowSize
    detach: bool
    user: str
    journal: bool
    def __init__(self, sandbox: _Optional[str] = ..., argv: _Optional[_Iterable[str]] = ..., env: _Optional[_Mapping[str, str]] = ..., workdir: _Optional[str] = ..., timeout_secs: _Optional[float] = ..., pty: _Optional[bool] = ..., window: _Optional[_Union[WindowSize, _Mapping]] = ..., detach: _Optional[bool] = ..., user: _Optional[str] = ..., journal: _Optional[bool] = ...) -> None: ...

class ExecAttach(_message.Message):
    __slots__ = ("sandbox", "exec_id", "offset")
    SANDBOX_FIELD_NUMBER: _ClassVar[int]
    EXEC_ID_FIELD_NUMBER: _ClassVar[int]
    OFFSET_FIELD_NUMBER: _ClassVar[int]
    sandbox: str
    exec_id: str
    offset: int
    def __init__(self, sandbox: _Optional[str] = ..., exec_id: _Optional[str] = ..., offset: _Optional[int] = ...) -> None: ...

class ExecSignal(_message.Message):
    __slots__ = ("signal", "group")
    SIGNAL_FIELD_NUMBER: _ClassVar[int]
    GROUP_FIELD_NUMBER: _ClassVar[int]
    signal: int
    group: bool
    def __init__(self, signal: _Optional[int] = ..., group: _Optional[bool] = ...) -> None: ...

class ExecRequest(_message.Message):
    __slots__ = ("start", "attach", "stdin", "close_stdin", "signal", "resize")
    START_FIELD_NUMBER: _ClassVar[int]
    ATTACH_FIELD_NUMBER: _ClassVar[int]
    STDIN_FIELD_NUMBER: _ClassVar[int]
    CLOSE_STDIN_FIELD_NUMBER: _ClassVar[int]
    SIGNAL_FIELD_NUMBER: _ClassVar[int]
    RESIZE_FIELD_NUMBER: _ClassVar[int]
    start: ExecStart
    attach: ExecAttach
    stdin: bytes
    close_stdin: bool
    signal: ExecSignal
    resize: WindowSize
    def __init__(self, start: _Optional[_Union[ExecStart, _Mapping]] = ..., attach: _Optional[_Union[ExecAttach, _Mapping]] = ..., stdin: _Optional[bytes] = ..., close_stdin: _Optional[bool] = ..., signal: _Optional[_Union[ExecSignal, _Mapping]] = ..., resize: _Optional[_Union[WindowSize, _Mapping]] = ...) -> None: ...

class ExecStarted(_message.Message):
    __slots__ = ("pid", "exec_id")
    PID_FIELD_NUMBER: _ClassVar[int]
    EXEC_ID_FIELD_NUMBER: _ClassVar[int]
    pid: int
    exec_id: str
    def __init__(self, pid: _Optional[int] = ..., exec_id: _Optional[str] = ...) -> None: ...

class ExecExited(_message.Message):
    __slots__ = ("exit_code", "signal", "reason")
    EXIT_CODE_FIELD_NUMBER: _ClassVar[int]
    SIGNAL_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    exit_code: int
    signal: int
    reason: ExitReason
    def __init__(self, exit_code: _Optional[int] = ..., signal: _Optional[int] = ..., reason: _Optional[_Union[ExitReason, str]] = ...) -> None: ...

class ExecOutput(_message.Message):
    __slots__ = ("data", "offset")
    DATA_FIELD_NUMBER: _ClassVar[int]
    OFFSET_FIELD_NUMBER: _ClassVar[int]
    data: bytes
    offset: int
    def __init__(self, data: _Optional[bytes] = ..., offset: _Optional[int] = ...) -> None: ...

class ExecResponse(_message.Message):
    __slots__ = ("started", "stdout", "stderr", "exited", "gap")
    STARTED_FIELD_NUMBER: _ClassVar[int]
    STDOUT_FIELD_NUMBER: _ClassVar[int]
    STDERR_FIELD_NUMBER: _ClassVar[int]
    EXITED_FIELD_NUMBER: _ClassVar[int]
    GAP_FIELD_NUMBER: _ClassVar[int]
    started: ExecStarted
    stdout: ExecOutput
    stderr: ExecOutput
    exited: ExecExited
    gap: ExecGap
    def __init__(self, started: _Optional[_Union[ExecStarted, _Mapping]] = ..., stdout: _Optional[_Union[ExecOutput, _Mapping]] = ..., stderr: _Optional[_Union[ExecOutput, _Mapping]] = ..., exited: _Optional[_Union[ExecExited, _Mapping]] = ..., gap: _Optional[_Union[ExecGap, _Mapping]] = ...) -> None: ...

class ExecGap(_message.Message):
    __slots__ = ("from_offset", "to_offset")
    FROM_OFFSET_FIELD_NUMBER: _ClassVar[int]
    TO_OFFSET_FIELD_NUMBER: _ClassVar[int]
    from_offset: int
    to_offset: int
    def __init__(self, from_offset: _Optional[int] = ..., to_offset: _Optional[int] = ...) -> None: ...

class ListProcessesRequest(_message.Message):
    __slots__ = ("sandbox",)
    SANDBOX_FIELD_NUMBER: _ClassVar[int]
    sandbox: str
    def __init__(self, sandbox: _Optional[str] = ...) -> None: ...

class Process(_message.Message):
    __slots__ = ("exec_id", "pid", "argv", "running", "exited", "started_at", "pty")
    EXEC_ID_FIELD_NUMBER: _ClassVar[int]
    PID_FIELD_NUMBER: _ClassVar[int]
    ARGV_FIELD_NUMBER: _ClassVar[int]
    RUNNING_FIELD_NUMBER: _ClassVar[int]
    EXITED_FIELD_NUMBER: _ClassVar[int]
    STARTED_AT_FIELD_NUMBER: _ClassVar[int]
    PTY_FIELD_NUMBER: _ClassVar[int]
    exec_id: str
    pid: int
    argv: _containers.RepeatedScalarFieldContainer[str]
    running: bool
    exited: ExecExited
    started_at: _common_pb2.Timestamp
    pty: bool
    def __init__(self, exec_id: _Optional[str] = ..., pid: _Optional[int] = ..., argv: _Optional[_Iterable[str]] = ..., running: _Optional[bool] = ..., exited: _Optional[_Union[ExecExited, _Mapping]] = ..., started_at: _Optional[_Union[_common_pb2.Timestamp, _Mapping]] = ..., pty: _Optional[bool] = ...) -> None: ...

class ListProcessesResponse(_message.Message):
    __slots__ = ("processes",)
    PROCESSES_FIELD_NUMBER: _ClassVar[int]
    processes: _containers.RepeatedCompositeFieldContainer[Process]
    def __init__(self, processes: _Optional[_Iterable[_Union[Process, _Mapping]]] = ...) -> None: ...

class ListNetworkEventsRequest(_message.Message):
    __slots__ = ("sandbox", "limit", "after_seq")
    SANDBOX_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    AFTER_SEQ_FIELD_NUMBER: _ClassVar[int]
    sandbox: str
    limit: int
    after_seq: int
    def __init__(self, sandbox: _Optional[str] = ..., limit: _Optional[int] = ..., after_seq: _Optional[int] = ...) -> None: ...

class NetworkEvent(_message.Message):
    __slots__ = ("at", "host", "sni", "dialed", "rule", "verdict", "bytes_out", "bytes_in", "reason", "kind", "seq", "original_dst")
    AT_FIELD_NUMBER: _ClassVar[int]
    HOST_FIELD_NUMBER: _ClassVar[int]
    SNI_FIELD_NUMBER: _ClassVar[int]
    DIALED_FIELD_NUMBER: _ClassVar[int]
    RULE_FIELD_NUMBER: _ClassVar[int]
    VERDICT_FIELD_NUMBER: _ClassVar[int]
    BYTES_OUT_FIELD_NUMBER: _ClassVar[int]
    BYTES_IN_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    SEQ_FIELD_NUMBER: _ClassVar[int]
    ORIGINAL_DST_FIELD_NUMBER: _ClassVar[int]
    at: _common_pb2.Timestamp
    host: str
    sni: str
    dialed: str
    rule: str
    verdict: str
    bytes_out: int
    bytes_in: int
    reason: str
    kind: str
    seq: int
    original_dst: str
    def __init__(self, at: _Optional[_Union[_common_pb2.Timestamp, _Mapping]] = ..., host: _Optional[str] = ..., sni: _Optional[str] = ..., dialed: _Optional[str] = ..., rule: _Optional[str] = ..., verdict: _Optional[str] = ..., bytes_out: _Optional[int] = ..., bytes_in: _Optional[int] = ..., reason: _Optional[str] = ..., kind: _Optional[str] = ..., seq: _Optional[int] = ..., original_dst: _Optional[str] = ...) -> None: ...

class ListNetworkEventsResponse(_message.Message):
    __slots__ = ("events", "last_seq")
    EVENTS_FIELD_NUMBER: _ClassVar[int]
    LAST_SEQ_FIELD_NUMBER: _ClassVar[int]
    events: _containers.RepeatedCompositeFieldContainer[NetworkEvent]
    last_seq: int
    def __init__(self, events: _Optional[_Iterable[_Union[NetworkEvent, _Mapping]]] = ..., last_seq: _Optional[int] = ...) -> None: ...
