"""SandboxClient: one gRPC channel to warrend and the service stubs."""
from __future__ import annotations

import io
import os
from dataclasses import dataclass
from typing import IO, Any, Callable, Iterator, List, Mapping, Optional, Sequence, Union

import grpc

from warren._auth import AuthInterceptor, TokenFile
from warren._errors import ImageBuildError, InvalidArgument, SandboxNotFound, Status, from_rpc_error
from warren._image import Image, ImageConfig, ImageInfo
from warren._network import ComputeClass, NetworkPolicy, ResourceDetector, SshDest
from warren._proto.warren.v1 import images_pb2, images_pb2_grpc
from warren._proto.warren.v1 import sandboxes_pb2 as pb
from warren._proto.warren.v1 import sandboxes_pb2_grpc
from warren._proto.warren.v1 import secrets_pb2, secrets_pb2_grpc
from warren._proto.warren.v1 import system_pb2, system_pb2_grpc
from warren._proto.warren.v1 import volumes_pb2, volumes_pb2_grpc
from warren._sandbox import ProcessInfo, Sandbox, SandboxInfo, SandboxStatus
from warren._secret import Secret, SecretInfo
from warren._volume import VolumeInfo

DEFAULT_ADDR = "unix:///run/warren/warren.sock"
CHUNK = 1 << 20
_MAX_MSG = 64 << 20


def grpc_target(address: str) -> str:
    """A gRPC target for a Warren address: "unix:/p", "unix:///p",
    "HOST:PORT" or "tcp:HOST:PORT"."""
    a = address.strip()
    if not a:
        raise ValueError("empty address")
    if a.startswith("tcp:"):
        a = a[4:]
    if a.startswith("unix:"):
        path = a[5:]
        if path.startswith("//"):
            path = path[2:]
        if not path.startswith("/"):
            raise ValueError(f"unix address needs an absolute path: {address!r}")
        return "unix://" + path
    if a.startswith("/"):
        return "unix://" + a
    return a


@dataclass(frozen=True)
class VersionInfo:
    """The daemon's version and build facts (SandboxClient.version())."""

    version: str
    api_version: str = ""
    git_commit: str = ""
    uptime_seconds: int = 0
    # Cgroup layout of the host: "v1", "v2" or "hybrid".
    cgroup_mode: str = ""
    kernel: str = ""

    @classmethod
    def _from_proto(cls, v: system_pb2.GetVersionResponse) -> "VersionInfo":
        return cls(version=v.version, api_version=v.api_version, git_commit=v.git_commit,
                   uptime_seconds=v.uptime_seconds, cgroup_mode=v.cgroup_mode,
                   kernel=v.kernel)


class SandboxClient:
    """A connection to warrend.

    ``address``: "unix:///p", "unix:/p" or "HOST:PORT" (default
    WARREN_ADDR or unix:///run/warren/warren.sock). ``use_tls`` with
    ``ca_file`` (PEM; default the system roots) for TCP. ``token`` is sent
    as a bearer token."""

    def __init__(self, address: Optional[str] = None, *, use_tls: bool = False,
                 token: Optional[str] = None, ca_file: Optional[str] = None,
                 token_file: Optional[str] = None):
        self.address = address or os.environ.get("WARREN_ADDR") or DEFAULT_ADDR
        self.use_tls = use_tls or ca_file is not None
        target = grpc_target(self.address)
        options = [("grpc.max_receive_message_length", _MAX_MSG),
                   ("grpc.max_send_message_length", _MAX_MSG),
                   # A fixed receive window: without it grpcio grows its
                   # buffers to tens of MB per stream, more than the daemon
                   # keeps for an exec re-attach after this process dies.
                   # 4 MiB (warrend's own window) rather than grpcio's 64 KiB
                   # default: output arrives in 1 MiB messages.
                   ("grpc.http2.bdp_probe", 0),
                   ("grpc.http2.lookahead_bytes", 4 << 20)]
        if self.use_tls:
            if target.startswith("unix:"):
                raise ValueError("TLS is for TCP addresses")
            roots = None
            if ca_file:
                with open(ca_file, "rb") as f:
                    roots = f.read()
            creds = grpc.ssl_channel_credentials(root_certificates=roots)
            channel = grpc.secure_channel(target, creds, options=options)
        else:
            channel = grpc.insecure_channel(target, options=options)
        self._raw_channel = channel
        getter: Optional[Callable[[], str]] = None
        if token:
            getter = lambda: token  # noqa: E731
        elif token_file:
            getter = TokenFile(token_file).get
        if getter is not None:
            channel = grpc.intercept_channel(channel, AuthInterceptor(getter))
        self._channel = channel
        self._sandboxes = sandboxes_pb2_grpc.SandboxesStub(channel)
        self._images = images_pb2_grpc.ImagesStub(channel)
        self._secrets = secrets_pb2_grpc.SecretsStub(channel)
        self._volumes = volumes_pb2_grpc.VolumesStub(channel)
        self._system = system_pb2_grpc.SystemStub(channel)
        self._closed = False

    @classmethod
    def from_env(cls) -> "SandboxClient":
        """A client from WARREN_ADDR, WARREN_TOKEN, WARREN_TLS_CA and
        WARREN_IDENTITY_TOKEN_FILE (TLS when WARREN_TLS_CA or
        WARREN_TLS=1 is set)."""
        env = os.environ
        ca = env.get("WARREN_TLS_CA") or None
        tls = ca is not None or env.get("WARREN_TLS", "") in ("1", "true", "yes")
        return cls(env.get("WARREN_ADDR") or DEFAULT_ADDR, use_tls=tls,
                   token=env.get("WARREN_TOKEN") or None, ca_file=ca,
                   token_file=env.get("WARREN_IDENTITY_TOKEN_FILE") or None)

    # --- lifetime ---
    def close(self) -> None:
        """Close the channel; calls in flight are cancelled."""
        if not self._closed:
            self._closed = True
            self._raw_channel.close()

    @property
    def closed(self) -> bool:
        return self._closed

    def __enter__(self) -> "SandboxClient":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    # --- helpers ---
    def _unary(self, method: Any, req: Any, *, sandbox_call: bool = False,
               build_call: bool = False, timeout: Optional[float] = None) -> Any:
        try:
            return method(req, timeout=timeout)
        except grpc.RpcError as err:
            raise from_rpc_error(err, sandbox_call=sandbox_call, build_call=build_call) from None

    # --- system ---
    def version(self) -> VersionInfo:
        """The daemon's version, API version and build facts."""
        return VersionInfo._from_proto(
            self._unary(self._system.GetVersion, system_pb2.GetVersionRequest(), timeout=30))

    # --- sandboxes ---
    def run(self, sandbox: Sandbox) -> Sandbox:
        """Create and start a configured Sandbox; returns it, bound to this
        client."""
        if sandbox.id is not None:
            raise RuntimeError(f"sandbox {sandbox.id} is already running")
        s = self._unary(self._sandboxes.CreateSandbox, sandbox._request())
        sandbox._bind(self, s)
        return sandbox

    def create(self, image: Union[Image, str, None] = None, *, name: Optional[str] = None,
               cpu: Union[str, int, float, None] = None, memory: Union[str, int, None] = None,
               env: Optional[Mapping[str, Union[str, Secret]]] = None,
               secrets: Optional[Sequence[Secret]] = None,
               volumes: Optional[Sequence[Any]] = None,
               network_policy: Optional[NetworkPolicy] = None,
               managed_ssh: Optional[Mapping[str, SshDest]] = None,
               resource_detectors: Optional[Sequence[ResourceDetector]] = None,
               identity: bool = False, lifetime: Any = None,
               entrypoint: Optional[Sequence[str]] = None, workdir: Optional[str] = None,
               tags: Optional[Mapping[str, str]] = None,
               compute_class: Optional[ComputeClass] = None,
               hostname: Optional[str] = None) -> Sandbox:
        """Create and start a sandbox. image=None uses the daemon's default
        sandbox image."""
        sb = Sandbox(image, name=name, cpu=cpu, memory=memory, env=env, secrets=secrets,
                     volumes=volumes, network_policy=network_policy, managed_ssh=managed_ssh,
                     resource_detectors=resource_detectors, identity=identity,
                     lifetime=lifetime, entrypoint=entrypoint, workdir=workdir, tags=tags,
                     compute_class=compute_class, hostname=hostname)
        return self.run(sb)

    def get(self, id: Optional[str] = None, name: Optional[str] = None) -> Sandbox:
        """A handle on an existing sandbox by id or name; raises
        SandboxNotFound."""
        if (id is None) == (name is None):
            raise ValueError("get() takes exactly one of id= or name=")
        req = pb.GetSandboxRequest(id=id) if id is not None else pb.GetSandboxRequest(name=name)
        try:
            s = self._unary(self._sandboxes.GetSandbox, req, sandbox_call=True)
        except InvalidArgument as e:
            if id is None:
                raise
            # A malformed id names no sandbox: report it as not found,
            # keeping the daemon's explanation.
            raise SandboxNotFound(Status.NOT_FOUND,
                                  f"no sandbox with id {id!r}: {e.message}") from None
        sb = Sandbox(name=s.name or None)
        sb._bind(self, s)
        return sb

    def list(self, *, status: Union[SandboxStatus, str, Sequence[Union[SandboxStatus, str]], None] = None,
             name: Optional[str] = None,
             tags: Optional[Mapping[str, str]] = None) -> List[SandboxInfo]:
        """Sandboxes of the environment, newest first (all pages)."""
        statuses: List[SandboxStatus] = []
        if status is not None:
            for st in ([status] if isinstance(status, str) else list(status)):
                statuses.append(SandboxStatus(str(st).upper()))
        out: List[SandboxInfo] = []
        token = ""
        while True:
            req = pb.ListSandboxesRequest(name=name or "", tags=dict(tags or {}),
                                          page_token=token)
            req.statuses.extend(s._to_proto() for s in statuses)
            resp = self._unary(self._sandboxes.ListSandboxes, req, timeout=60)
            out.extend(SandboxInfo._from_proto(s) for s in resp.sandboxes)
            token = resp.next_page_token
            if not token:
                return out

    def processes(self, sandbox: Union[Sandbox, str]) -> List[ProcessInfo]:
        """Running and recent processes of a sandbox (a Sandbox or an id)."""
        sid = sandbox.id if isinstance(sandbox, Sandbox) else sandbox
        resp = self._unary(self._sandboxes.ListProcesses,
                           pb.ListProcessesRequest(sandbox=sid or ""), sandbox_call=True)
        return [ProcessInfo._from_proto(p) for p in resp.processes]

    # --- images ---
    def import_image(self, name: str, source: Union[str, os.PathLike, IO[bytes], bytes],
                     config: Optional[ImageConfig] = None) -> ImageInfo:
        """Import a rootfs tarball (path, file object or bytes) as `name`,
        optionally with its run configuration."""
        def chunks(f: IO[bytes]) -> Iterator[images_pb2.ImportImageRequest]:
            meta = images_pb2.ImportImageMeta(name=name)
            if config is not None:
                meta.config.CopyFrom(config._to_proto())
            yield images_pb2.ImportImageRequest(meta=meta)
            while True:
                b = f.read(CHUNK)
                if not b:
                    return
                yield images_pb2.ImportImageRequest(data=b)

        def send(f: IO[bytes]) -> ImageInfo:
            return ImageInfo._from_proto(
                self._unary(self._images.ImportImage, chunks(f), build_call=True))

        if isinstance(source, (bytes, bytearray)):
            return send(io.BytesIO(bytes(source)))
        if isinstance(source, (str, os.PathLike)):
            with open(source, "rb") as fh:
                return send(fh)
        return send(source)

    def build_image(self, image: Image, on_log: Optional[Callable[[str], None]] = None) -> ImageInfo:
        """Build a declarative image (cached by spec); `on_log` gets each
        build output line."""
        try:
            final = None
            for p in self._images.BuildImage(images_pb2.BuildImageRequest(build=image._to_build())):
                if p.log and on_log is not None:
                    on_log(p.log)
                if p.HasField("image"):
                    final = p.image
        except grpc.RpcError as err:
            raise from_rpc_error(err, build_call=True) from None
        if final is None:
            raise ImageBuildError(Status.UNKNOWN, "build ended without an image")
        return ImageInfo._from_proto(final)

    def list_images(self) -> List[ImageInfo]:
        resp = self._unary(self._images.ListImages, images_pb2.ListImagesRequest())
        return [ImageInfo._from_proto(i) for i in resp.images]

    def get_image(self, image: str) -> ImageInfo:
        """An image by name or id; raises NotFound."""
        return ImageInfo._from_proto(
            self._unary(self._images.GetImage, images_pb2.GetImageRequest(image=image)))

    def delete_image(self, image: str) -> None:
        self._unary(self._images.DeleteImage, images_pb2.DeleteImageRequest(image=image))

    # --- secrets ---
    def set_secret(self, name: str, value: Union[str, bytes, None] = None, *,
                   values: Optional[Mapping[str, Union[str, bytes]]] = None) -> SecretInfo:
        """Create or replace a stored secret (value, or key→value for an
        integration secret)."""
        def b(v: Union[str, bytes]) -> bytes:
            return v.encode() if isinstance(v, str) else bytes(v)
        req = secrets_pb2.SetSecretRequest(name=name, value=b(value) if value is not None else b"")
        for k, v in (values or {}).items():
            req.values[k] = b(v)
        return SecretInfo._from_proto(self._unary(self._secrets.SetSecret, req))

    def list_secrets(self) -> List[SecretInfo]:
        resp = self._unary(self._secrets.ListSecrets, secrets_pb2.ListSecretsRequest())
        return [SecretInfo._from_proto(s) for s in resp.secrets]

    def delete_secret(self, name: str) -> None:
        self._unary(self._secrets.DeleteSecret, secrets_pb2.DeleteSecretRequest(name=name))

    # --- volumes ---
    def create_volume(self, name: str) -> VolumeInfo:
        """Create a volume (idempotent)."""
        return VolumeInfo._from_proto(
            self._unary(self._volumes.CreateVolume, volumes_pb2.CreateVolumeRequest(name=name)))

    def list_volumes(self) -> List[VolumeInfo]:
        resp = self._unary(self._volumes.ListVolumes, volumes_pb2.ListVolumesRequest())
        return [VolumeInfo._from_proto(v) for v in resp.volumes]

    def delete_volume(self, name: str) -> None:
        self._unary(self._volumes.DeleteVolume, volumes_pb2.DeleteVolumeRequest(name=name))
