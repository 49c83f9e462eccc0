"""Bearer tokens: a fixed token (WARREN_TOKEN) or a rotating identity
token file (WARREN_WEB_IDENTITY_TOKEN_FILE, which warrend gives sandboxes
created with identity=True), attached to every call by a client
interceptor (works on plaintext channels too, unlike call credentials)."""
from __future__ import annotations

import base64
import json
import os
import threading
import time
from typing import Any, Callable, Dict, Iterator, List, Optional, Tuple, Union

import grpc

MAX_CACHE_SECONDS = 3600.0
TOKEN_FILE_ENV = "WARREN_WEB_IDENTITY_TOKEN_FILE"
# the name older SDKs read; still honoured when the new one is unset
TOKEN_FILE_ENV_OLD = "WARREN_IDENTITY_TOKEN_FILE"


def _jwt_claims(token: str) -> Dict[str, Any]:
    """The JWT's claims ({} when it is not a JWT); not verified: warrend
    verifies, the SDK only reads `exp` and `environment_id`."""
    parts = token.split(".")
    if len(parts) != 3:
        return {}
    try:
        pad = "=" * (-len(parts[1]) % 4)
        claims = json.loads(base64.urlsafe_b64decode(parts[1] + pad))
        return claims if isinstance(claims, dict) else {}
    except Exception:
        return {}


def _jwt_exp(token: str) -> Optional[float]:
    exp = _jwt_claims(token).get("exp")
    if isinstance(exp, bool) or not isinstance(exp, (int, float)):
        return None
    return float(exp)


def token_file_from_env() -> Optional[str]:
    """The configured identity token file: WARREN_WEB_IDENTITY_TOKEN_FILE
    (or the older WARREN_IDENTITY_TOKEN_FILE), None when neither is set."""
    return os.environ.get(TOKEN_FILE_ENV) or os.environ.get(TOKEN_FILE_ENV_OLD) or None


class TokenFile:
    """A token re-read from a file. Each read is cached for the shorter of
    one hour and half the token's remaining lifetime (its JWT `exp` claim;
    a token without `exp` uses the hour); the file is read again on the
    first call after that. Changing the configured path (``path``, or the
    environment variable when ``path`` is None) bypasses the cache."""

    def __init__(self, path: Optional[str] = None, clock: Callable[[], float] = time.time):
        self.path = path
        self._clock = clock
        self._lock = threading.Lock()
        self._token: Optional[str] = None
        self._read_path: Optional[str] = None
        self._until = 0.0

    def current_path(self) -> str:
        p = self.path if self.path is not None else token_file_from_env()
        if not p:
            raise FileNotFoundError(f"no identity token file: {TOKEN_FILE_ENV} is not set")
        return p

    def get(self) -> str:
        with self._lock:
            now = self._clock()
            path = self.current_path()
            if self._token is None or now >= self._until or path != self._read_path:
                with open(path, encoding="utf-8") as f:
                    tok = f.read().strip()
                ttl = MAX_CACHE_SECONDS
                exp = _jwt_exp(tok)
                if exp is not None:
                    ttl = min(ttl, max(0.0, (exp - now) / 2))
                self._token, self._read_path, self._until = tok, path, now + ttl
            return self._token

    def environment(self) -> Optional[str]:
        """The `environment_id` claim of the current token (None without)."""
        env = _jwt_claims(self.get()).get("environment_id")
        return env if isinstance(env, str) and env else None


class _Details(grpc.ClientCallDetails):
    def __init__(self, d: grpc.ClientCallDetails, metadata: List[Tuple[str, str]]):
        self.method = d.method
        self.timeout = d.timeout
        self.metadata = metadata
        self.credentials = d.credentials
        self.wait_for_ready = getattr(d, "wait_for_ready", None)
        self.compression = getattr(d, "compression", None)


class AuthInterceptor(grpc.UnaryUnaryClientInterceptor, grpc.UnaryStreamClientInterceptor,
                      grpc.StreamUnaryClientInterceptor, grpc.StreamStreamClientInterceptor):
    """Adds "authorization: Bearer <token>" from a token getter (when
    given) and "x-warren-environment: <environment>" (when given: the
    environment to act in; a token may name only its own)."""

    def __init__(self, token: Optional[Callable[[], str]],
                 environment: Union[None, str, Callable[[], Optional[str]]] = None):
        self._token = token
        self._environment = environment

    def _details(self, d: grpc.ClientCallDetails) -> grpc.ClientCallDetails:
        md = list(d.metadata or [])
        if self._token is not None:
            md.append(("authorization", "Bearer " + self._token()))
        env = self._environment() if callable(self._environment) else self._environment
        if env:
            md.append(("x-warren-environment", env))
        return _Details(d, md)

    def intercept_unary_unary(self, cont: Any, d: Any, req: Any) -> Any:
        return cont(self._details(d), req)

    def intercept_unary_stream(self, cont: Any, d: Any, req: Any) -> Any:
        return cont(self._details(d), req)

    def intercept_stream_unary(self, cont: Any, d: Any, it: Iterator[Any]) -> Any:
        return cont(self._details(d), it)

    def intercept_stream_stream(self, cont: Any, d: Any, it: Iterator[Any]) -> Any:
        return cont(self._details(d), it)
