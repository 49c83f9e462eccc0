"""The connection to warrend: one gRPC channel, its service stubs and the
call helper that turns grpc errors into WarrenErrors.

SandboxClient (warren._client) is a Channel with the public methods;
Sandbox and Volume (warren._sandbox, warren._volume) only need a Channel,
so they import this module and not warren._client."""
from __future__ import annotations

import os
from typing import Any, Callable, List, Optional, Tuple, Type, TypeVar, Union

import grpc

from warren._auth import AuthInterceptor, TokenFile, token_file_from_env
from warren._errors import from_rpc_error
from warren._proto.warren.v1 import (identity_pb2_grpc, images_pb2_grpc, sandboxes_pb2_grpc,
                                     secrets_pb2_grpc, system_pb2_grpc, volumes_pb2_grpc)

DEFAULT_ADDR = "unix:///run/warren/warren.sock"
_MAX_MSG = 64 << 20

_C = TypeVar("_C", bound="Channel")


def grpc_target(address: str) -> str:
    """A gRPC target for a Warren address: "unix:/p", "unix:///p",
    "HOST:PORT" or "tcp:HOST:PORT"."""
    a = address.strip()
    if not a:
        raise ValueError("empty address")
    for scheme, port in (("https://", 443), ("http://", 80)):
        if a.startswith(scheme):
            a = a[len(scheme):].rstrip("/")
            if not a.startswith("[") and ":" not in a or a.endswith("]"):
                a = f"{a}:{port}"
            return a
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


class Channel:
    """A connection to warrend (see SandboxClient for the arguments)."""

    def __init__(self, address: Optional[str] = None, *, use_tls: bool = False,
                 token: Optional[str] = None, ca_file: Optional[str] = None,
                 token_file: Optional[str] = None, environment: Optional[str] = None):
        # WARREN_API_SERVER: the address warrend gives sandboxes created
        # with identity=True (and the seed's CHALK_API_SERVER)
        self.address = (address or os.environ.get("WARREN_API_SERVER")
                        or os.environ.get("WARREN_ADDR") or DEFAULT_ADDR)
        self.environment = environment
        self.use_tls = use_tls or ca_file is not None
        if self.address.startswith("https://"):
            self.use_tls = True
        target = grpc_target(self.address)
        options: List[Tuple[str, Any]] = [
            ("grpc.max_receive_message_length", _MAX_MSG),
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
        env: Union[None, str, Callable[[], Optional[str]]] = environment
        self._token_file: Optional[TokenFile] = None
        if token:
            getter = lambda: token  # noqa: E731
        elif token_file or token_file_from_env():
            # an identity token file (WARREN_WEB_IDENTITY_TOKEN_FILE when
            # none is given: re-read from the environment on each call, so
            # that a changed path is followed); its environment_id claim
            # names the environment unless one is set explicitly
            self._token_file = TokenFile(token_file)
            getter = self._token_file.get
            if not env:
                env = (os.environ.get("WARREN_ENVIRONMENT")
                       or os.environ.get("WARREN_ENVIRONMENT_ID")
                       or self._token_file.environment)
        if getter is not None or env:
            channel = grpc.intercept_channel(channel, AuthInterceptor(getter, env))
        self._channel = channel
        self._identity = identity_pb2_grpc.IdentityStub(channel)
        self._sandboxes = sandboxes_pb2_grpc.SandboxesStub(channel)
        self._images = images_pb2_grpc.ImagesStub(channel)
        self._secrets = secrets_pb2_grpc.SecretsStub(channel)
        self._volumes = volumes_pb2_grpc.VolumesStub(channel)
        self._system = system_pb2_grpc.SystemStub(channel)
        self._closed = False

    @classmethod
    def from_env(cls: Type[_C]) -> _C:
        """A connection from WARREN_ADDR (else WARREN_API_SERVER),
        WARREN_TOKEN, WARREN_ENVIRONMENT (or WARREN_ENVIRONMENT_ID),
        WARREN_TLS_CA and WARREN_WEB_IDENTITY_TOKEN_FILE (TLS when
        WARREN_TLS_CA or WARREN_TLS=1 is set)."""
        env = os.environ
        ca = env.get("WARREN_TLS_CA") or None
        tls = ca is not None or env.get("WARREN_TLS", "") in ("1", "true", "yes")
        return cls(env.get("WARREN_ADDR") or env.get("WARREN_API_SERVER") or DEFAULT_ADDR,
                   use_tls=tls, token=env.get("WARREN_TOKEN") or None, ca_file=ca,
                   environment=env.get("WARREN_ENVIRONMENT")
                   or env.get("WARREN_ENVIRONMENT_ID") or None)

    # --- lifetime ---
    def close(self) -> None:
        """Close the channel; calls in flight are cancelled."""
        if not self._closed:
            self._closed = True
            self._raw_channel.close()

    @property
    def closed(self) -> bool:
        return self._closed

    def __enter__(self: _C) -> _C:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- calls ---
    def _unary(self, method: Any, req: Any, *, sandbox_call: bool = False,
               build_call: bool = False, timeout: Optional[float] = None) -> Any:
        """Call a unary (or client-streaming) method; grpc errors become
        WarrenErrors."""
        try:
            return method(req, timeout=timeout)
        except grpc.RpcError as err:
            raise from_rpc_error(err, sandbox_call=sandbox_call, build_call=build_call) from None
