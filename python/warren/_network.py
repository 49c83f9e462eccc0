"""Network policy, managed SSH destinations and small enums, each
serializing to its warren.v1 protobuf message."""
from __future__ import annotations

import datetime as _dt
import enum
import ipaddress
from dataclasses import dataclass
from typing import Any, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple, Union

from warren._convert import from_timestamp
from warren._errors import InvalidArgument, Status
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


# --- validation (the daemon checks the same, with the same words) ---

def _bad(where: str, value: object, why: str) -> InvalidArgument:
    return InvalidArgument(Status.INVALID_ARGUMENT, f"{where}: {_quote(value)}: {why}")


def _quote(value: object) -> str:
    """A value as it appears in a message: strings in double quotes."""
    if isinstance(value, str):
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
    return str(value)


def _is_ip(s: str) -> bool:
    try:
        ipaddress.ip_address(s)
        return "%" not in s
    except ValueError:
        return False


def normalize_host(host: object, where: str) -> str:
    """The canonical form of a host pattern (lower case, one trailing dot
    stripped), or InvalidArgument naming `where` and the entry."""
    if not isinstance(host, str):
        raise _bad(where, host, "not a string")
    if host == "":
        raise _bad(where, host, "empty host")
    if not host.isascii():
        raise _bad(where, host, 'not ASCII (write an internationalized name in its "xn--" form)')
    h = host.lower()
    if h.endswith("."):
        h = h[:-1]
    if h == "*":
        return h
    bare = h[1:-1] if h.startswith("[") and h.endswith("]") else h
    labels = h.split(".")
    if _is_ip(bare) or all(c.isdigit() or c == "." for c in h):
        raise _bad(where, host, "an IP address, not a hostname (use allowed_routes with ADDRESS/32 or ADDRESS/128)")
    if len(h) > 253:
        raise _bad(where, host, "longer than 253 characters")
    for i, label in enumerate(labels):
        if label == "":
            raise _bad(where, host, "empty label")
        if label == "*":
            if i != 0:
                raise _bad(where, host, '"*" only as the whole entry or as a leading "*."')
            if len(labels) < 3:
                raise _bad(where, host, 'a wildcard needs at least two labels after "*."')
            continue
        if len(label) > 63:
            raise _bad(where, host, "label longer than 63 characters")
        for c in label:
            if not (c.isalnum() or c in "-_"):
                shown = f"'{c}'" if " " <= c <= "~" else f"0x{ord(c):02x}"
                raise _bad(where, host, f"invalid character {shown} (letters, digits, '-', '_')")
        if label[0] == "-" or label[-1] == "-":
            raise _bad(where, host, "label starts or ends with '-'")
    return h


def check_cidr(cidr: object, where: str) -> str:
    """`cidr` if it is ADDRESS/PREFIX with no host bits set, else
    InvalidArgument naming `where` and the entry."""
    if not isinstance(cidr, str):
        raise _bad(where, cidr, "not a string")
    addr, slash, plen = cidr.partition("/")
    if not slash or not _is_ip(addr) or not plen.isdigit() or not plen.isascii() or len(plen) > 3:
        raise _bad(where, cidr, "not a CIDR (ADDRESS/PREFIX, e.g. 10.0.0.0/8)")
    bits = ipaddress.ip_address(addr).max_prefixlen
    if int(plen) > bits:
        raise _bad(where, cidr, f"prefix length over {bits}")
    net = ipaddress.ip_network(f"{addr}/{int(plen)}", strict=False)
    if str(net.network_address) != str(ipaddress.ip_address(addr)):
        raise _bad(where, cidr, f"host bits set (the network is {net})")
    return cidr


def _port_text(a: object, b: object) -> str:
    return str(a) if a == b else f"{a}-{b}"


def check_ports(ports: Sequence[Tuple[int, int]], where: str, cidr: str) -> None:
    for i, (a, b) in enumerate(ports):
        w = f"ports[{i}] {_port_text(a, b)}"
        for p in (a, b):
            if not 1 <= p <= 65535:
                raise _bad(where, cidr, f"{w}: port out of range (1-65535)")
        if a > b:
            raise _bad(where, cidr, f"{w}: start after end")


class _Route:
    """A destination CIDR with optional inclusive port ranges: ``ports``
    holds (start, end) pairs or single ports; none = every port."""

    def __init__(self, route: str, *, ports: Optional[Sequence[PortSpec]] = None):
        self.cidr = route
        self.ports: List[Tuple[int, int]] = []
        for i, p in enumerate(ports or []):
            if isinstance(p, int) and not isinstance(p, bool):
                self.ports.append((p, p))
                continue
            try:
                a, b = p  # type: ignore[misc]
                if isinstance(a, bool) or isinstance(b, bool):
                    raise TypeError
                self.ports.append((int(a), int(b)))
            except (TypeError, ValueError):
                raise InvalidArgument(Status.INVALID_ARGUMENT,
                                      f"{_quote(route)}: ports[{i}] {p!r}: not a port or "
                                      "(start, end) pair") from None

    def _check(self, where: str) -> None:
        check_cidr(self.cidr, where)
        check_ports(self.ports, where, self.cidr)

    def _to_proto(self) -> pb.Route:
        return pb.Route(cidr=self.cidr,
                        ports=[pb.PortRange(start=a, end=b) for a, b in self.ports])

    def __repr__(self) -> str:
        if not self.ports:
            return f"NetworkPolicy.Route({_quote(self.cidr)})"
        ports = ", ".join(f"({a}, {b})" for a, b in self.ports)
        return f"NetworkPolicy.Route({_quote(self.cidr)}, ports=[{ports}])"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Route) and (self.cidr, self.ports) == (other.cidr, other.ports)

    def __hash__(self) -> int:
        return hash((self.cidr, tuple(self.ports)))


RouteLike = Union[_Route, str]


def _as_route(r: RouteLike) -> _Route:
    return _Route(r) if isinstance(r, str) else r


def _route(r: RouteLike) -> pb.Route:
    return _as_route(r)._to_proto()


class NetworkPolicy:
    """Egress policy: only what it lists is reachable.

    ``allowed_hosts`` is a list of host patterns (exact, ``*.example.com``
    for subdomains only, or ``*``) or a mapping host → list of
    :class:`NetworkPolicy.Rule` (a host mapped to ``[]`` is the same as
    listing it). ``allowed_routes``/``denied_routes`` are CIDRs (strings
    or :class:`NetworkPolicy.Route` with ports); ``denied_routes`` wins
    over everything. ``learn=True`` allows everything and records every
    connection (see :meth:`suggest`).

    Entries are checked here, before any call: a bad one raises
    :class:`warren.InvalidArgument` naming it
    (``allowed_hosts[1]: "*.com": ...``). Hosts are lower-cased and one
    trailing dot is stripped."""

    Matcher = _Matcher
    Match = _Match
    Transformer = _Transformer
    Rule = _Rule
    Route = _Route

    def __init__(self, allowed_hosts: Union[Sequence[str], Mapping[str, Sequence[_Rule]], None] = None,
                 allowed_routes: Optional[Sequence[RouteLike]] = None,
                 denied_routes: Optional[Sequence[RouteLike]] = None,
                 learn: bool = False):
        self.allowed_hosts: List[str] = []
        self.host_rules: Dict[str, List[_Rule]] = {}
        if isinstance(allowed_hosts, str):
            raise InvalidArgument(Status.INVALID_ARGUMENT,
                                  f"allowed_hosts: {_quote(allowed_hosts)}: a list of hosts, "
                                  "not one string")
        if isinstance(allowed_hosts, Mapping):
            for i, (h, rules) in enumerate(allowed_hosts.items()):
                host = normalize_host(h, f"allowed_hosts[{i}]")
                rules = list(rules or [])
                if rules:
                    self.host_rules.setdefault(host, []).extend(rules)
                elif host not in self.allowed_hosts:
                    self.allowed_hosts.append(host)
        else:
            for i, h in enumerate(allowed_hosts or []):
                host = normalize_host(h, f"allowed_hosts[{i}]")
                if host not in self.allowed_hosts:
                    self.allowed_hosts.append(host)
        self.allowed_routes: List[_Route] = [_as_route(r) for r in allowed_routes or []]
        self.denied_routes: List[_Route] = [_as_route(r) for r in denied_routes or []]
        for i, r in enumerate(self.allowed_routes):
            r._check(f"allowed_routes[{i}]")
        for i, r in enumerate(self.denied_routes):
            r._check(f"denied_routes[{i}]")
        self.learn = bool(learn)

    def with_host(self, host: str) -> "NetworkPolicy":
        """A copy that also allows ``host`` (no-op when already listed)."""
        p = NetworkPolicy(list(self.allowed_hosts), self.allowed_routes, self.denied_routes,
                          learn=self.learn)
        p.host_rules = {h: list(r) for h, r in self.host_rules.items()}
        host = normalize_host(host, f"allowed_hosts[{len(p.allowed_hosts)}]")
        if host not in p.allowed_hosts and host not in p.host_rules:
            p.allowed_hosts.append(host)
        return p

    def _to_proto(self) -> pb.NetworkPolicy:
        p = pb.NetworkPolicy(allowed_hosts=self.allowed_hosts,
                             allowed_routes=[r._to_proto() for r in self.allowed_routes],
                             denied_routes=[r._to_proto() for r in self.denied_routes],
                             learn=self.learn)
        for host, rules in self.host_rules.items():
            p.host_rules[host].rules.extend(r._to_proto() for r in rules)
        return p

    def __repr__(self) -> str:
        """The Python expression that builds this policy (rules elided as
        ``...`` when there are per-host rules)."""
        hosts = ", ".join(_quote(h) for h in self.allowed_hosts)
        if self.host_rules:
            rules = ", ".join(f"{_quote(h)}: [...]" for h in self.host_rules)
            plain = ", ".join(f"{_quote(h)}: []" for h in self.allowed_hosts)
            parts = ["allowed_hosts={" + ", ".join(x for x in (plain, rules) if x) + "}"]
        else:
            parts = [f"allowed_hosts=[{hosts}]"]
        if self.allowed_routes:
            parts.append("allowed_routes=[" + ", ".join(map(repr, self.allowed_routes)) + "]")
        if self.denied_routes:
            parts.append("denied_routes=[" + ", ".join(map(repr, self.denied_routes)) + "]")
        if self.learn:
            parts.append("learn=True")
        return "NetworkPolicy(" + ", ".join(parts) + ")"

    def __eq__(self, other: object) -> bool:
        return (isinstance(other, NetworkPolicy) and not self.host_rules and not other.host_rules
                and (self.allowed_hosts, self.allowed_routes, self.denied_routes, self.learn)
                == (other.allowed_hosts, other.allowed_routes, other.denied_routes, other.learn))

    __hash__ = None  # type: ignore[assignment]

    def cli_flags(self) -> List[str]:
        """The ``warren sandbox create``/``warren run`` flags for this
        policy (per-host rules have no flags: ValueError)."""
        if self.host_rules:
            raise ValueError("per-host rules have no CLI flags")
        flags: List[str] = []
        for h in self.allowed_hosts:
            flags += ["--host", h]
        for opt, routes in (("--route", self.allowed_routes), ("--deny-route", self.denied_routes)):
            for r in routes:
                ports = ",".join(_port_text(a, b) for a, b in r.ports)
                flags += [opt, f"{r.cidr}:{ports}" if ports else r.cidr]
        if self.learn:
            flags.append("--learn-egress")
        return flags

    @staticmethod
    def suggest(events: Iterable["NetworkEvent"]) -> "NetworkPolicy":
        """The smallest policy that would have admitted every allowed
        connection among ``events`` (typically a ``learn=True`` run's
        :meth:`Sandbox.network_events`): the exact hostnames seen, sorted,
        as allowed_hosts, and for connections without a hostname the /32
        (/128) of each dialed address with the ports seen, as
        allowed_routes. DNS events and denied connections are ignored."""
        hosts = set()
        routes: Dict[Any, set] = {}
        for e in events:
            if e.verdict != "allow" or e.kind == "dns":
                continue
            host = (e.host or e.sni or "").lower().rstrip(".")
            if host and not _is_ip(host.strip("[]")):
                hosts.add(host)
                continue
            dst = e.dialed or e.original_dst
            addr, _, port = dst.rpartition(":")
            addr = addr.strip("[]")
            if not _is_ip(addr) or not port.isdigit():
                continue
            routes.setdefault(ipaddress.ip_address(addr), set()).add(int(port))
        allowed_routes = [
            _Route(f"{ip}/{ip.max_prefixlen}", ports=[(p, p) for p in sorted(ports)])
            for ip, ports in sorted(routes.items(), key=lambda kv: (kv[0].version, kv[0]))]
        return NetworkPolicy(allowed_hosts=sorted(hosts), allowed_routes=allowed_routes)


@dataclass(frozen=True)
class NetworkEvent:
    """One egress decision of a sandbox (see ``Sandbox.network_events``).

    ``host`` is the hostname the decision was about (SNI, Host header or
    DNS name), ``sni`` the TLS SNI as sent, ``dialed`` the address:port
    the enforcer dialed ("" when refused before dialing), ``rule`` the
    policy entry that decided, ``verdict`` "allow" or "deny", ``reason``
    why in words, ``bytes_up``/``bytes_down`` sent/received by the
    sandbox, ``kind`` "tcp" or "dns", ``seq`` increasing per sandbox and
    ``original_dst`` the address:port the sandbox connected to."""

    time: Optional[_dt.datetime]
    host: str
    sni: str
    dialed: str
    rule: str
    verdict: str
    reason: str
    bytes_up: int
    bytes_down: int
    kind: str
    seq: int
    original_dst: str

    @classmethod
    def _from_proto(cls, e: pb.NetworkEvent) -> "NetworkEvent":
        return cls(time=from_timestamp(e.at), host=e.host, sni=e.sni, dialed=e.dialed,
                   rule=e.rule, verdict=e.verdict, reason=e.reason, bytes_up=e.bytes_out,
                   bytes_down=e.bytes_in, kind=e.kind, seq=e.seq, original_dst=e.original_dst)


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
