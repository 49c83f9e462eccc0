"""Bearer tokens: a fixed token (WARREN_TOKEN) or a rotating token file
(WARREN_IDENTITY_TOKEN_FILE), attached to every call by a client
interceptor (works on plaintext channels too, unlike call credentials)."""
from __future__ import annotations

import base64
import json
import threading
import time
from typing import Any, Callable, Iterator, List, Optional, Tuple

import grpc

MAX_CACHE_SECONDS = 3600.0


def _jwt_exp(token: str) -> Optional[float]:
    parts = token.split(".")
    if len(parts) != 3:
        return None
    try:
        pad = "=" * (-len(parts[1]) % 4)
        claims = json.loads(base64.urlsafe_b64decode(parts[1] + pad))
        exp = claims.get("exp")
        return float(exp) if exp is not None else None
    except Exception:
        return None


class TokenFile:
    """A token re-read from a file: cached for the shorter of one hour and
    half the token's remaining lifetime (its JWT `exp` claim)."""

    def __init__(self, path: str, clock: Callable[[], float] = time.time):
        self.path = path
        self._clock = clock
        self._lock = threading.Lock()
        self._token: Optional[str] = None
        self._until = 0.0

    def get(self) -> str:
        with self._lock:
            now = self._clock()
            if self._token is None or now >= self._until:
                with open(self.path, encoding="utf-8") as f:
                    tok = f.read().strip()
                ttl = MAX_CACHE_SECONDS
                exp = _jwt_exp(tok)
                if exp is not None:
                    ttl = min(ttl, max(0.0, (exp - now) / 2))
                self._token, self._until = tok, now + ttl
            return self._token


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

    def __init__(self, token: Optional[Callable[[], str]], environment: Optional[str] = None):
        self._token = token
        self._environment = environment

    def _details(self, d: grpc.ClientCallDetails) -> grpc.ClientCallDetails:
        md = list(d.metadata or [])
        if self._token is not None:
            md.append(("authorization", "Bearer " + self._token()))
        if self._environment:
            md.append(("x-warren-environment", self._environment))
        return _Details(d, md)

    def intercept_unary_unary(self, cont: Any, d: Any, req: Any) -> Any:
        return cont(self._details(d), req)

    def intercept_unary_stream(self, cont: Any, d: Any, req: Any) -> Any:
        return cont(self._details(d), req)

    def intercept_stream_unary(self, cont: Any, d: Any, it: Iterator[Any]) -> Any:
        return cont(self._details(d), it)

    def intercept_stream_stream(self, cont: Any, d: Any, it: Iterator[Any]) -> Any:
        return cont(self._details(d), it)
