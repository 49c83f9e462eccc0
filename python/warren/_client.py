"""SandboxClient: the public methods on a connection to warrend."""
from __future__ import annotations

import io
import os
from dataclasses import dataclass
from typing import IO, Any, Callable, Iterator, List, Mapping, Optional, Sequence, Union

import grpc

from warren._channel import Channel
from warren._errors import ImageBuildError, InvalidArgument, SandboxNotFound, Status, from_rpc_error
from warren._exec import ProcessInfo
from warren._image import Image, ImageConfig, ImageInfo, build_image
from warren._proto.warren.v1 import identity_pb2, images_pb2
from warren._proto.warren.v1 import sandboxes_pb2 as pb
from warren._proto.warren.v1 import secrets_pb2, system_pb2, volumes_pb2
from warren._sandbox import Sandbox, SandboxInfo, SandboxStatus, list_processes, sandbox_keywords
from warren._secret import SecretInfo
from warren._volume import VolumeInfo, create_volume, delete_volume

CHUNK = 1 << 20


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


@dataclass(frozen=True)
class WhoAmI:
    """The caller as warrend authenticated it (SandboxClient.whoami())."""

    subject: str
    environment: str
    role: str
    token_id: str = ""


@dataclass(frozen=True)
class TokenInfo:
    """An API token's public facts (never the token)."""

    id: str
    environment: str
    role: str
    description: str = ""
    created_unix_nanos: int = 0
    expires_unix_nanos: int = 0  # 0: never
    revoked_unix_nanos: int = 0  # 0: not revoked

    @classmethod
    def _from_proto(cls, t: identity_pb2.TokenInfo) -> "TokenInfo":
        return cls(id=t.id, environment=t.environment, role=t.role, description=t.description,
                   created_unix_nanos=t.created_at.unix_nanos,
                   expires_unix_nanos=t.expires_at.unix_nanos,
                   revoked_unix_nanos=t.revoked_at.unix_nanos)


@dataclass(frozen=True)
class NewToken:
    """A token just minted: ``token`` is shown only this once."""

    token: str
    info: TokenInfo


class SandboxClient(Channel):
    """A connection to warrend.

    ``address``: "unix:///p", "unix:/p", "HOST:PORT" or "https://HOST"
    (default WARREN_API_SERVER, else WARREN_ADDR, else
    unix:///run/warren/warren.sock). ``use_tls`` with ``ca_file`` (PEM;
    default the system roots) for TCP. ``token`` is sent as a bearer token
    (an API token from ``warren token create``; remote TLS listeners
    require one); without it, ``token_file`` or
    WARREN_WEB_IDENTITY_TOKEN_FILE names a rotating identity token file
    (what an ``identity=True`` sandbox gets), cached for min(1 h, half its
    remaining lifetime), whose ``environment_id`` claim is the environment
    unless ``environment``, WARREN_ENVIRONMENT or WARREN_ENVIRONMENT_ID
    says otherwise; ``environment`` names the environment to act in (a
    token may name only its own). ``SandboxClient.from_env()`` reads
    WARREN_ADDR, WARREN_TOKEN, WARREN_ENVIRONMENT, WARREN_TLS_CA and
    WARREN_WEB_IDENTITY_TOKEN_FILE. A context manager: leaving the block
    closes the channel."""

    # --- identity: who am I, API tokens, audit, quotas ---
    def whoami(self) -> "WhoAmI":
        """The caller as warrend authenticated it: subject, environment,
        role ("operator", "admin", "user") and token id."""
        r = self._unary(self._identity.WhoAmI, identity_pb2.WhoAmIRequest(), timeout=30)
        return WhoAmI(subject=r.subject, environment=r.environment, role=r.role,
                      token_id=r.token_id)

    def create_token(self, environment: str = "", *, role: str = "user",
                     expires: Optional[str] = None, description: str = "") -> "NewToken":
        """Mint an API token for ``environment`` (admins of it, or the
        operator). The token is returned once; warrend keeps its hash."""
        r = self._unary(self._identity.CreateToken,
                        identity_pb2.CreateTokenRequest(environment=environment, role=role,
                                                        expires=expires or "",
                                                        description=description),
                        timeout=30)
        return NewToken(token=r.token, info=TokenInfo._from_proto(r.info))

    def list_tokens(self, environment: str = "") -> List["TokenInfo"]:
        """Tokens of an environment (never the tokens themselves)."""
        r = self._unary(self._identity.ListTokens,
                        identity_pb2.ListTokensRequest(environment=environment), timeout=30)
        return [TokenInfo._from_proto(t) for t in r.tokens]

    def revoke_token(self, token_id: str) -> "TokenInfo":
        """Revoke a token by id ("tk-..."): its next call is UNAUTHENTICATED."""
        return TokenInfo._from_proto(self._unary(
            self._identity.RevokeToken, identity_pb2.RevokeTokenRequest(id=token_id),
            timeout=30))

    def get_workload_identity_token(self, audience: str) -> str:
        """A short-lived OIDC token (JWT, ES256, at most 1 h) for
        ``audience``, naming the caller's environment (claim
        ``environment_id``); a third party verifies it against warrend's
        /.well-known/jwks.json (workload identity federation)."""
        r = self._unary(self._identity.GetWorkloadIdentityToken,
                        identity_pb2.GetWorkloadIdentityTokenRequest(audience=audience),
                        timeout=30)
        return str(r.token)

    def audit_events(self, environment: str = "", limit: int = 100) -> List[Any]:
        """The newest audit records (warren.v1.AuditEvent messages)."""
        r = self._unary(self._identity.ListAuditEvents,
                        identity_pb2.ListAuditEventsRequest(environment=environment, limit=limit),
                        timeout=30)
        return list(r.events)

    # --- system ---
    def version(self) -> VersionInfo:
        """The daemon's version, API version and build facts."""
        return VersionInfo._from_proto(
            self._unary(self._system.GetVersion, system_pb2.GetVersionRequest(), timeout=30))

    # --- sandboxes ---
    def run(self, sandbox: Sandbox) -> Sandbox:
        """Create and start a configured Sandbox; returns it, bound to this
        client."""
        return sandbox._create(self)

    @sandbox_keywords(Sandbox)
    def create(self, *args: Any, **options: Any) -> Sandbox:
        """Create and start a sandbox: the keywords of ``Sandbox(...)``.
        image=None uses the daemon's default sandbox image."""
        return self.run(Sandbox(*args, **options))

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
        return Sandbox._attach(self, s)

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
        return list_processes(self, sid or "")

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

    def build_image(self, image: Image, on_log: Optional[Callable[[str], None]] = None,
                    step_timeout: Optional[float] = None) -> ImageInfo:
        """Build a declarative image (cached step by step); `on_log` gets
        each build output line; `step_timeout` (seconds) bounds each RUN
        step."""
        return build_image(self, image, on_log, step_timeout)

    def prune_images(self) -> images_pb2.PruneImagesResponse:
        """Remove unnamed images no sandbox uses (and the layers only they
        use), the build cache and uploaded build files."""
        return self._unary(self._images.PruneImages, images_pb2.PruneImagesRequest())

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
    def create_volume(self, name: str, max_bytes: int = 0, max_files: int = 0) -> VolumeInfo:
        """Create a volume (idempotent) with quotas of bytes and files (0 =
        the defaults: 1 GiB, one file per 16 KiB)."""
        return create_volume(self, name, max_bytes, max_files)

    def list_volumes(self) -> List[VolumeInfo]:
        resp = self._unary(self._volumes.ListVolumes, volumes_pb2.ListVolumesRequest())
        return [VolumeInfo._from_proto(v) for v in resp.volumes]

    def delete_volume(self, name: str) -> None:
        delete_volume(self, name)
