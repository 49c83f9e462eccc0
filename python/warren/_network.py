"""Network policy, managed SSH destinations and small enums, each
serializing to its warren.v1 protobuf message."""
from __future__ import annotations

import enum
from typing import Dict, List, Mapping, Optional, Sequence, Tuple, Union

from warren._proto.warren.v1 import sandboxes_pb2 as pb


class ResourceDetector(enum.IntEnum):
    UNSPECIFIED = pb.RESOURCE_DETECTOR_UNSPECIFIED
    GITHUB_PULL_REQUESTS = pb.RESOURCE_DETECTOR_GITHUB_PULL_REQUESTS


class ComputeClass(enum.IntEnum):
    UNSPECIFIED = pb.COMPUTE_CLASS_UNSPECIFIED
    HOST = pb.COMPUTE_CLASS_HOST
    K8S = pb.COMPUTE_CLASS_K8S


class _Matcher:
    """Matches a string exactly, by prefix or by regular expression."""

    def __init__(self, *, exact: Optional[str] = None, starts_with: Optional[str] = None,
                 regex: Optional[str] = None):
        given = [x for x in (exact, starts_with, regex) if x is not None]
        if len(given) != 1:
            raise ValueError("Matcher takes exactly one of exact=, starts_with=, regex=")
        self.exact, self.starts_with, self.regex = exact, starts_with, regex

    def _to_proto(self) -> pb.Matcher:
        if self.exact is not None:
            return pb.Matcher(exact=self.exact)
        if self.starts_with is not None:
            return pb.Matcher(starts_with=self.starts_with)
        return pb.Matcher(regex=self.regex)


MatcherLike = Union[_Matcher, str]


def _matcher(m: MatcherLike) -> pb.Matcher:
    return (_Matcher(exact=m) if isinstance(m, str) else m)._to_proto()


class _Match:
    """Request dimensions a rule matches; every set one must match."""

    def __init__(self, *, path: Optional[MatcherLike] = None, method: Optional[str] = None,
                 query: Optional[Mapping[str, MatcherLike]] = None,
                 headers: Optional[Mapping[str, MatcherLike]] = None):
        self.path, self.method = path, method
        self.query, self.headers = dict(query or {}), dict(headers or {})

    def _to_proto(self) -> pb.RequestMatch:
        m = pb.RequestMatch()
        if self.path is not None:
            m.path.CopyFrom(_matcher(self.path))
        if self.method:
            m.method = self.method.upper()
        for k, v in self.query.items():
            m.query[k].CopyFrom(_matcher(v))
        for k, v in self.headers.items():
            m.headers[k].CopyFrom(_matcher(v))
        return m


class _Transformer:
    """Header rewrites; headers_secrets maps placeholder → secret name."""

    def __init__(self, *, headers: Optional[Mapping[str, str]] = None,
                 headers_secrets: Optional[Mapping[str, str]] = None):
        self.headers = dict(headers or {})
        self.headers_secrets = dict(headers_secrets or {})

    def _to_proto(self) -> pb.Transformer:
        return pb.Transformer(headers=self.headers, headers_secrets=self.headers_secrets)


class _Rule:
    def __init__(self, *, match: Optional[_Match] = None,
                 transforms: Optional[Sequence[_Transformer]] = None,
                 forward_url: Optional[str] = None):
        self.match, self.transforms, self.forward_url = match, list(transforms or []), forward_url

    def _to_proto(self) -> pb.Rule:
        r = pb.Rule(transforms=[t._to_proto() for t in self.transforms],
                    forward_url=self.forward_url or "")
        if self.match is not None:
            r.match.CopyFrom(self.match._to_proto())
        return r


PortSpec = Union[int, Tuple[int, int]]


class _Route:
    """A destination CIDR with optional inclusive port ranges."""

    def __init__(self, route: str, *, ports: Optional[Sequence[PortSpec]] = None):
        self.cidr = route
        self.ports: List[Tuple[int, int]] = []
        for p in ports or []:
            if isinstance(p, int):
                self.ports.append((p, p))
            else:
                a, b = p
                self.ports.append((int(a), int(b)))

    def _to_proto(self) -> pb.Route:
        return pb.Route(cidr=self.cidr,
                        ports=[pb.PortRange(start=a, end=b) for a, b in self.ports])


RouteLike = Union[_Route, str]


def _route(r: RouteLike) -> pb.Route:
    return (_Route(r) if isinstance(r, str) else r)._to_proto()


class NetworkPolicy:
    """Egress policy: only what it lists is reachable.

    ``allowed_hosts`` is a list of host patterns or a mapping host → list of
    :class:`NetworkPolicy.Rule`."""

    Matcher = _Matcher
    Match = _Match
    Transformer = _Transformer
    Rule = _Rule
    Route = _Route

    def __init__(self, allowed_hosts: Union[Sequence[str], Mapping[str, Sequence[_Rule]], None] = None,
                 allowed_routes: Optional[Sequence[RouteLike]] = None,
                 denied_routes: Optional[Sequence[RouteLike]] = None):
        if isinstance(allowed_hosts, Mapping):
            self.host_rules: Dict[str, List[_Rule]] = {h: list(r or []) for h, r in allowed_hosts.items()}
            self.allowed_hosts: List[str] = []
        else:
            self.host_rules = {}
            self.allowed_hosts = list(allowed_hosts or [])
        self.allowed_routes = list(allowed_routes or [])
        self.denied_routes = list(denied_routes or [])

    def with_host(self, host: str) -> "NetworkPolicy":
        """A copy that also allows ``host`` (no-op when already listed)."""
        p = NetworkPolicy(list(self.allowed_hosts), self.allowed_routes, self.denied_routes)
        p.host_rules = dict(self.host_rules)
        if host not in p.allowed_hosts and host not in p.host_rules:
            p.allowed_hosts.append(host)
        return p

    def _to_proto(self) -> pb.NetworkPolicy:
        p = pb.NetworkPolicy(allowed_hosts=self.allowed_hosts,
                             allowed_routes=[_route(r) for r in self.allowed_routes],
                             denied_routes=[_route(r) for r in self.denied_routes])
        for host, rules in self.host_rules.items():
            p.host_rules[host].rules.extend(r._to_proto() for r in rules)
        return p


class SshDest:
    """A managed SSH destination; the key stays in the daemon's agent."""

    def __init__(self, host: str, private_key_secret: str, username: Optional[str] = None,
                 port: int = 22, host_keys: Optional[Sequence[str]] = None):
        self.host, self.private_key_secret = host, private_key_secret
        self.username, self.port = username, port
        self.host_keys = list(host_keys or [])

    def _to_proto(self) -> pb.SshDest:
        return pb.SshDest(host=self.host, private_key_secret=self.private_key_secret,
                          username=self.username or "", port=self.port,
                          host_keys=self.host_keys)
