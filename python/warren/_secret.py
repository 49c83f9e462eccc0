"""Secret references: resolved by warrend (from_name, from_integration) or
read on this machine when the sandbox is created (from_local_env,
from_local_env_file)."""
from __future__ import annotations

import datetime as _dt
import os
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Sequence

from warren._convert import from_unix
from warren._proto.warren.v1 import secrets_pb2


class Secret:
    """A reference to a secret value. Construct with one of the class
    methods; ``Secret("NAME")`` is ``Secret.from_name("NAME")``."""

    def __init__(self, name: Optional[str] = None, *, env_name: Optional[str] = None,
                 _kind: str = "name", _arg: object = None,
                 _keys: Optional[Sequence[str]] = None):
        self._kind = _kind
        self._arg = name if _arg is None else _arg
        self._keys = list(_keys or [])
        self.env_name = env_name
        if self._kind == "name" and not self._arg:
            raise ValueError("Secret needs a name")

    @classmethod
    def from_name(cls, name: str, *, env_name: Optional[str] = None) -> "Secret":
        """A secret stored in warrend (``warren secret set NAME``)."""
        return cls(name, env_name=env_name)

    @classmethod
    def from_local_env(cls, var: str, *, env_name: Optional[str] = None) -> "Secret":
        """The value of the local environment variable ``var``, read when
        the sandbox is created and sent inline."""
        return cls(env_name=env_name, _kind="local_env", _arg=var)

    @classmethod
    def from_local_env_file(cls, path: str) -> "Secret":
        """Every KEY=VALUE of a local dotenv file, read at creation time."""
        return cls(_kind="local_env_file", _arg=os.fspath(path))

    @classmethod
    def from_integration(cls, name: str, keys: Optional[Sequence[str]] = None) -> "Secret":
        """An integration secret stored in warrend (several keys); ``keys``
        selects a subset."""
        return cls(_kind="integration", _arg=name, _keys=keys)

    @property
    def name(self) -> str:
        return str(self._arg)

    def __repr__(self) -> str:
        return f"Secret.{'from_' + self._kind}({self._arg!r})"

    def _to_proto(self, env_name: Optional[str] = None) -> secrets_pb2.SecretRef:
        """The SecretRef; local values are read now. ``env_name`` overrides
        the variable the secret is exposed as."""
        ref = secrets_pb2.SecretRef()
        name = env_name or self.env_name
        if self._kind == "name":
            ref.name = self.name
        elif self._kind == "local_env":
            value = os.environ.get(self.name)
            if value is None:
                raise ValueError(f"Secret.from_local_env: ${self.name} is not set")
            ref.inline_value = value.encode()
            name = name or self.name
        elif self._kind == "local_env_file":
            for k, v in _parse_env_file(self.name).items():
                ref.inline_values.values[k] = v.encode()
        elif self._kind == "integration":
            ref.integration.name = self.name
            ref.integration.keys.extend(self._keys)
        if name:
            ref.env_name = name
        return ref


def _parse_env_file(path: str) -> Dict[str, str]:
    out: Dict[str, str] = {}
    with open(path, encoding="utf-8") as f:
        for raw in f:
            line = raw.strip()
            if not line or line.startswith("#"):
                continue
            if line.startswith("export "):
                line = line[len("export "):].lstrip()
            if "=" not in line:
                raise ValueError(f"{path}: not KEY=VALUE: {raw.rstrip()}")
            k, v = line.split("=", 1)
            k, v = k.strip(), v.strip()
            if len(v) >= 2 and v[0] == v[-1] and v[0] in "'\"":
                v = v[1:-1]
            out[k] = v
    return out



@dataclass(frozen=True)
class SecretInfo:
    """A secret stored in warrend (its value never comes back)."""

    name: str
    # Keys of an integration secret; empty for a single value.
    keys: List[str] = field(default_factory=list)
    updated_at: Optional[_dt.datetime] = None
    # 1 when created, +1 every time set_secret replaces it.
    version: int = 0

    @classmethod
    def _from_proto(cls, s: secrets_pb2.SecretInfo) -> "SecretInfo":
        return cls(name=s.name, keys=list(s.keys), updated_at=from_unix(s.updated_at_unix),
                   version=s.version)
