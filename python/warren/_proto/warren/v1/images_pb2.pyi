from warren._proto.warren.v1 import common_pb2 as _common_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class ImageSpec(_message.Message):
    __slots__ = ("ref", "build")
    REF_FIELD_NUMBER: _ClassVar[int]
    BUILD_FIELD_NUMBER: _ClassVar[int]
    ref: str
    build: ImageBuild
    def __init__(self, ref: _Optional[str] = ..., build: _Optional[_Union[ImageBuild, _Mapping]] = ...) -> None: ...

class BuildStep(_message.Message):
    __slots__ = ("pip_install", "apt_install", "run", "add_file", "dockerfile", "workdir", "env", "entrypoint", "cmd")
    PIP_INSTALL_FIELD_NUMBER: _ClassVar[int]
    APT_INSTALL_FIELD_NUMBER: _ClassVar[int]
    RUN_FIELD_NUMBER: _ClassVar[int]
    ADD_FILE_FIELD_NUMBER: _ClassVar[int]
    DOCKERFILE_FIELD_NUMBER: _ClassVar[int]
    WORKDIR_FIELD_NUMBER: _ClassVar[int]
    ENV_FIELD_NUMBER: _ClassVar[int]
    ENTRYPOINT_FIELD_NUMBER: _ClassVar[int]
    CMD_FIELD_NUMBER: _ClassVar[int]
    pip_install: PackageList
    apt_install: PackageList
    run: str
    add_file: FileAdd
    dockerfile: str
    workdir: str
    env: EnvSet
    entrypoint: StringList
    cmd: StringList
    def __init__(self, pip_install: _Optional[_Union[PackageList, _Mapping]] = ..., apt_install: _Optional[_Union[PackageList, _Mapping]] = ..., run: _Optional[str] = ..., add_file: _Optional[_Union[FileAdd, _Mapping]] = ..., dockerfile: _Optional[str] = ..., workdir: _Optional[str] = ..., env: _Optional[_Union[EnvSet, _Mapping]] = ..., entrypoint: _Optional[_Union[StringList, _Mapping]] = ..., cmd: _Optional[_Union[StringList, _Mapping]] = ...) -> None: ...

class PackageList(_message.Message):
    __slots__ = ("packages",)
    PACKAGES_FIELD_NUMBER: _ClassVar[int]
    packages: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, packages: _Optional[_Iterable[str]] = ...) -> None: ...

class StringList(_message.Message):
    __slots__ = ("values",)
    VALUES_FIELD_NUMBER: _ClassVar[int]
    values: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, values: _Optional[_Iterable[str]] = ...) -> None: ...

class EnvSet(_message.Message):
    __slots__ = ("vars",)
    class VarsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    VARS_FIELD_NUMBER: _ClassVar[int]
    vars: _containers.ScalarMap[str, str]
    def __init__(self, vars: _Optional[_Mapping[str, str]] = ...) -> None: ...

class FileAdd(_message.Message):
    __slots__ = ("path", "content", "mode", "digest")
    PATH_FIELD_NUMBER: _ClassVar[int]
    CONTENT_FIELD_NUMBER: _ClassVar[int]
    MODE_FIELD_NUMBER: _ClassVar[int]
    DIGEST_FIELD_NUMBER: _ClassVar[int]
    path: str
    content: bytes
    mode: int
    digest: str
    def __init__(self, path: _Optional[str] = ..., content: _Optional[bytes] = ..., mode: _Optional[int] = ..., digest: _Optional[str] = ...) -> None: ...

class ImageBuild(_message.Message):
    __slots__ = ("base_image", "steps", "dockerfile", "context", "build_args")
    class BuildArgsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    BASE_IMAGE_FIELD_NUMBER: _ClassVar[int]
    STEPS_FIELD_NUMBER: _ClassVar[int]
    DOCKERFILE_FIELD_NUMBER: _ClassVar[int]
    CONTEXT_FIELD_NUMBER: _ClassVar[int]
    BUILD_ARGS_FIELD_NUMBER: _ClassVar[int]
    base_image: str
    steps: _containers.RepeatedCompositeFieldContainer[BuildStep]
    dockerfile: str
    context: _containers.RepeatedCompositeFieldContainer[FileAdd]
    build_args: _containers.ScalarMap[str, str]
    def __init__(self, base_image: _Optional[str] = ..., steps: _Optional[_Iterable[_Union[BuildStep, _Mapping]]] = ..., dockerfile: _Optional[str] = ..., context: _Optional[_Iterable[_Union[FileAdd, _Mapping]]] = ..., build_args: _Optional[_Mapping[str, str]] = ...) -> None: ...

class ImageConfig(_message.Message):
    __slots__ = ("env", "working_dir", "entrypoint", "cmd", "user", "labels", "exposed_ports", "shell", "stop_signal", "healthcheck", "healthcheck_interval_ns", "healthcheck_timeout_ns", "healthcheck_start_period_ns", "healthcheck_start_interval_ns", "healthcheck_retries")
    ENV_FIELD_NUMBER: _ClassVar[int]
    WORKING_DIR_FIELD_NUMBER: _ClassVar[int]
    ENTRYPOINT_FIELD_NUMBER: _ClassVar[int]
    CMD_FIELD_NUMBER: _ClassVar[int]
    USER_FIELD_NUMBER: _ClassVar[int]
    LABELS_FIELD_NUMBER: _ClassVar[int]
    EXPOSED_PORTS_FIELD_NUMBER: _ClassVar[int]
    SHELL_FIELD_NUMBER: _ClassVar[int]
    STOP_SIGNAL_FIELD_NUMBER: _ClassVar[int]
    HEALTHCHECK_FIELD_NUMBER: _ClassVar[int]
    HEALTHCHECK_INTERVAL_NS_FIELD_NUMBER: _ClassVar[int]
    HEALTHCHECK_TIMEOUT_NS_FIELD_NUMBER: _ClassVar[int]
    HEALTHCHECK_START_PERIOD_NS_FIELD_NUMBER: _ClassVar[int]
    HEALTHCHECK_START_INTERVAL_NS_FIELD_NUMBER: _ClassVar[int]
    HEALTHCHECK_RETRIES_FIELD_NUMBER: _ClassVar[int]
    env: _containers.RepeatedScalarFieldContainer[str]
    working_dir: str
    entrypoint: _containers.RepeatedScalarFieldContainer[str]
    cmd: _containers.RepeatedScalarFieldContainer[str]
    user: str
    labels: _containers.RepeatedScalarFieldContainer[str]
    exposed_ports: _containers.RepeatedScalarFieldContainer[str]
    shell: _containers.RepeatedScalarFieldContainer[str]
    stop_signal: str
    healthcheck: _containers.RepeatedScalarFieldContainer[str]
    healthcheck_interval_ns: int
    healthcheck_timeout_ns: int
    healthcheck_start_period_ns: int
    healthcheck_start_interval_ns: int
    healthcheck_retries: int
    def __init__(self, env: _Optional[_Iterable[str]] = ..., working_dir: _Optional[str] = ..., entrypoint: _Optional[_Iterable[str]] = ..., cmd: _Optional[_Iterable[str]] = ..., user: _Optional[str] = ..., labels: _Optional[_Iterable[str]] = ..., exposed_ports: _Optional[_Iterable[str]] = ..., shell: _Optional[_Iterable[str]] = ..., stop_signal: _Optional[str] = ..., healthcheck: _Optional[_Iterable[str]] = ..., healthcheck_interval_ns: _Optional[int] = ..., healthcheck_timeout_ns: _Optional[int] = ..., healthcheck_start_period_ns: _Optional[int] = ..., healthcheck_start_interval_ns: _Optional[int] = ..., healthcheck_retries: _Optional[int] = ...) -> None: ...

class Image(_message.Message):
    __slots__ = ("id", "names", "layers", "size_bytes", "config", "created_at", "source")
    ID_FIELD_NUMBER: _ClassVar[int]
    NAMES_FIELD_NUMBER: _ClassVar[int]
    LAYERS_FIELD_NUMBER: _ClassVar[int]
    SIZE_BYTES_FIELD_NUMBER: _ClassVar[int]
    CONFIG_FIELD_NUMBER: _ClassVar[int]
    CREATED_AT_FIELD_NUMBER: _ClassVar[int]
    SOURCE_FIELD_NUMBER: _ClassVar[int]
    id: str
    names: _containers.RepeatedScalarFieldContainer[str]
    layers: _containers.RepeatedScalarFieldContainer[str]
    size_bytes: int
    config: ImageConfig
    created_at: _common_pb2.Timestamp
    source: str
    def __init__(self, id: _Optional[str] = ..., names: _Optional[_Iterable[str]] = ..., layers: _Optional[_Iterable[str]] = ..., size_bytes: _Optional[int] = ..., config: _Optional[_Union[ImageConfig, _Mapping]] = ..., created_at: _Optional[_Union[_common_pb2.Timestamp, _Mapping]] = ..., source: _Optional[str] = ...) -> None: ...

class ImportImageMeta(_message.Message):
    __slots__ = ("name", "config")
    NAME_FIELD_NUMBER: _ClassVar[int]
    CONFIG_FIELD_NUMBER: _ClassVar[int]
    name: str
    config: ImageConfig
    def __init__(self, name: _Optional[str] = ..., config: _Optional[_Union[ImageConfig, _Mapping]] = ...) -> None: ...

class ImportImageRequest(_message.Message):
    __slots__ = ("meta", "data")
    META_FIELD_NUMBER: _ClassVar[int]
    DATA_FIELD_NUMBER: _ClassVar[int]
    meta: ImportImageMeta
    data: bytes
    def __init__(self, meta: _Optional[_Union[ImportImageMeta, _Mapping]] = ..., data: _Optional[bytes] = ...) -> None: ...

class PullImageRequest(_message.Message):
    __slots__ = ("ref",)
    REF_FIELD_NUMBER: _ClassVar[int]
    ref: str
    def __init__(self, ref: _Optional[str] = ...) -> None: ...

class LayerProgress(_message.Message):
    __slots__ = ("digest", "total_bytes", "done_bytes", "state")
    DIGEST_FIELD_NUMBER: _ClassVar[int]
    TOTAL_BYTES_FIELD_NUMBER: _ClassVar[int]
    DONE_BYTES_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    digest: str
    total_bytes: int
    done_bytes: int
    state: str
    def __init__(self, digest: _Optional[str] = ..., total_bytes: _Optional[int] = ..., done_bytes: _Optional[int] = ..., state: _Optional[str] = ...) -> None: ...

class PullImageProgress(_message.Message):
    __slots__ = ("layers", "image")
    LAYERS_FIELD_NUMBER: _ClassVar[int]
    IMAGE_FIELD_NUMBER: _ClassVar[int]
    layers: _containers.RepeatedCompositeFieldContainer[LayerProgress]
    image: Image
    def __init__(self, layers: _Optional[_Iterable[_Union[LayerProgress, _Mapping]]] = ..., image: _Optional[_Union[Image, _Mapping]] = ...) -> None: ...

class BuildImageRequest(_message.Message):
    __slots__ = ("build", "step_timeout_secs", "name")
    BUILD_FIELD_NUMBER: _ClassVar[int]
    STEP_TIMEOUT_SECS_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    build: ImageBuild
    step_timeout_secs: float
    name: str
    def __init__(self, build: _Optional[_Union[ImageBuild, _Mapping]] = ..., step_timeout_secs: _Optional[float] = ..., name: _Optional[str] = ...) -> None: ...

class BuildImageProgress(_message.Message):
    __slots__ = ("log", "image")
    LOG_FIELD_NUMBER: _ClassVar[int]
    IMAGE_FIELD_NUMBER: _ClassVar[int]
    log: str
    image: Image
    def __init__(self, log: _Optional[str] = ..., image: _Optional[_Union[Image, _Mapping]] = ...) -> None: ...

class GetImageRequest(_message.Message):
    __slots__ = ("image",)
    IMAGE_FIELD_NUMBER: _ClassVar[int]
    image: str
    def __init__(self, image: _Optional[str] = ...) -> None: ...

class ListImagesRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ListImagesResponse(_message.Message):
    __slots__ = ("images",)
    IMAGES_FIELD_NUMBER: _ClassVar[int]
    images: _containers.RepeatedCompositeFieldContainer[Image]
    def __init__(self, images: _Optional[_Iterable[_Union[Image, _Mapping]]] = ...) -> None: ...

class DeleteImageRequest(_message.Message):
    __slots__ = ("image",)
    IMAGE_FIELD_NUMBER: _ClassVar[int]
    image: str
    def __init__(self, image: _Optional[str] = ...) -> None: ...

class DeleteImageResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class MissingBlobsRequest(_message.Message):
    __slots__ = ("digests",)
    DIGESTS_FIELD_NUMBER: _ClassVar[int]
    digests: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, digests: _Optional[_Iterable[str]] = ...) -> None: ...

class MissingBlobsResponse(_message.Message):
    __slots__ = ("missing",)
    MISSING_FIELD_NUMBER: _ClassVar[int]
    missing: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, missing: _Optional[_Iterable[str]] = ...) -> None: ...

class UploadBlobRequest(_message.Message):
    __slots__ = ("digest", "data")
    DIGEST_FIELD_NUMBER: _ClassVar[int]
    DATA_FIELD_NUMBER: _ClassVar[int]
    digest: str
    data: bytes
    def __init__(self, digest: _Optional[str] = ..., data: _Optional[bytes] = ...) -> None: ...

class UploadBlobResponse(_message.Message):
    __slots__ = ("digest", "size")
    DIGEST_FIELD_NUMBER: _ClassVar[int]
    SIZE_FIELD_NUMBER: _ClassVar[int]
    digest: str
    size: int
    def __init__(self, digest: _Optional[str] = ..., size: _Optional[int] = ...) -> None: ...

class PruneImagesRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class PruneImagesResponse(_message.Message):
    __slots__ = ("deleted_images", "deleted_layers", "deleted_cache_entries", "deleted_blobs")
    DELETED_IMAGES_FIELD_NUMBER: _ClassVar[int]
    DELETED_LAYERS_FIELD_NUMBER: _ClassVar[int]
    DELETED_CACHE_ENTRIES_FIELD_NUMBER: _ClassVar[int]
    DELETED_BLOBS_FIELD_NUMBER: _ClassVar[int]
    deleted_images: _containers.RepeatedScalarFieldContainer[str]
    deleted_layers: int
    deleted_cache_entries: int
    deleted_blobs: int
    def __init__(self, deleted_images: _Optional[_Iterable[str]] = ..., deleted_layers: _Optional[int] = ..., deleted_cache_entries: _Optional[int] = ..., deleted_blobs: _Optional[int] = ...) -> None: ...
