"""Network policy, managed SSH destinations and small enums, each
serializing to its warren.v1 protobuf message."""
from __future__ import annotations

import datetime as _dt
import enum
import ipaddress
import socket
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


# --- validation: a port of src/net (host.c, addr.c, policy.c, quote.c), so
# that a bad entry is refused here, before any call, with the very words
# warrend uses (docs/network.md, "Refused at create time") ---

_QUOTE_MAX = 100  # NET_QUOTE_MAX
_HOST_INPUT_MAX = 300
_HOST_MAX = 253
_CIDR_STR_MAX = 52


def _quote(value: Union[str, bytes]) -> str:
    """net_quote: printable ASCII as is, '"' and backslash escaped, other
    bytes as \\xNN, cut with "..." past NET_QUOTE_MAX."""
    b = value.encode("utf-8", "surrogateescape") if isinstance(value, str) else value
    out = ['"']
    o = 1
    for c in b:
        if c in (0x22, 0x5C):
            t = "\\" + chr(c)
        elif 0x20 <= c < 0x7F:
            t = chr(c)
        else:
            t = "\\x%02x" % c
        if o + len(t) + 5 > _QUOTE_MAX:
            out.append("...")
            break
        out.append(t)
        o += len(t)
    out.append('"')
    return "".join(out)


def _pyquote(s: str) -> str:
    """A Python string literal in double quotes (for repr), uncut."""
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _invalid(message: str) -> InvalidArgument:
    return InvalidArgument(Status.INVALID_ARGUMENT, message)


def _inet_pton(family: int, s: str) -> Optional[bytes]:
    try:
        return socket.inet_pton(family, s)
    except (OSError, ValueError, UnicodeError):
        return None


def _ipv4_aton(s: str) -> bool:
    """net_ipv4_aton: does s denote an IPv4 address the way inet_aton
    reads one (1-4 parts, decimal, octal 0..., hex 0x...)?"""
    parts = s.split(".")
    if not 1 <= len(parts) <= 4:
        return False
    vals = []
    for p in parts:
        if p[:2] in ("0x", "0X"):
            digits, base = p[2:], 16
            ok = digits != "" and all(c in "0123456789abcdefABCDEF" for c in digits)
        elif p.startswith("0"):
            digits, base = p[1:] or "0", 8
            ok = all(c in "01234567" for c in p[1:])
        else:
            digits, base = p, 10
            ok = p != "" and all(c in "0123456789" for c in p)
        if not ok:
            return False
        v = int(digits, base)
        if v > 0xFFFFFFFF:
            return False
        vals.append(v)
    if any(v > 0xFF for v in vals[:-1]):
        return False
    return vals[-1] <= (0xFFFFFFFF, 0xFFFFFF, 0xFFFF, 0xFF)[len(vals) - 1]


def _parse_ipv6(s: str, bracketed: bool) -> bool:
    addr, pct, zone = s.partition("%")
    if pct:
        if bracketed and zone.startswith("25"):
            zone = zone[2:]
        if zone == "" or len(zone) > 64 or not all(c.isascii() and (c.isalnum() or c in "._~-")
                                                      for c in zone):
            return False
    if addr == "" or len(addr) >= 46:
        return False
    return _inet_pton(socket.AF_INET6, addr) is not None


def _host_canon(s: str) -> Tuple[bool, str]:
    """net_host_canon: (is_ip, canonical name), or InvalidArgument
    'host "...": why'."""
    b = s.encode("utf-8", "surrogateescape")

    def bad(why: str) -> InvalidArgument:
        return _invalid(f"host {_quote(b)}: {why}")

    if not b:
        raise _invalid('host "": empty host')
    if len(b) > _HOST_INPUT_MAX:
        raise bad("longer than 253 characters")
    for c in b:
        if c >= 0x80:
            raise bad("non-ASCII byte (IDN must be given in punycode, xn--...)")
        if c == 0:
            raise bad("NUL byte")
        if c in (0x0D, 0x0A):
            raise bad("CR or LF")
        if c == 0x20:
            raise bad("space")
        if c < 0x20 or c == 0x7F:
            raise bad("control character")
    if s[0] == "[":
        if len(s) < 3 or s[-1] != "]" or not _parse_ipv6(s[1:-1], True):
            raise bad("malformed bracketed IPv6 address")
        return True, s
    if ":" in s:
        if not _parse_ipv6(s, False):
            raise bad("':' in a name (neither a hostname nor an IPv6 address)")
        return True, s
    h = s.lower()
    if len(h) > 1 and h.endswith("."):
        h = h[:-1]
    if _ipv4_aton(h):
        return True, h
    for ch in h:
        if ch == "%":
            raise bad("'%' (percent-encoding is not a hostname)")
        if ch == "@":
            raise bad("'@' (userinfo is not a hostname)")
        if not (ch.isalnum() or ch in "-."):
            raise bad("character outside letters, digits, '-' and '.'")
    if len(h) > _HOST_MAX:
        raise bad("longer than 253 characters")
    labels = h.split(".")
    for label in labels:
        if label == "":
            raise bad("empty label")
        if len(label) > 63:
            raise bad("label longer than 63 characters")
        if label[0] == "-" or label[-1] == "-":
            raise bad("label starts or ends with '-'")
    last = labels[-1]
    if (last.startswith("0x") and all(c in "0123456789abcdef" for c in last[2:])) or last.isdigit():
        raise bad("numeric last label but not a valid IPv4 address")
    return False, h


def canonical_host_pattern(s: object, where: str) -> str:
    """net_host_pattern_parse behind net_policy_add_host: the canonical text
    of an allowed_hosts entry ("*", "*.example.com", "example.com"), or
    InvalidArgument "where: ..."."""
    if not isinstance(s, str):
        raise _invalid(f"{where}: {type(s).__name__} {s!r}: not a string")
    try:
        if s == "":
            raise _invalid('"": empty entry (use "*" for every host)')
        if s == "*":
            return "*"
        wildcard = s.startswith("*.")
        rest = s[2:] if wildcard else s
        if "*" in rest:
            raise _invalid(f"{_quote(s)}: '*' is allowed only as the whole entry or as a "
                           'leading "*." ("*.example.com")')
        if wildcard and rest in ("", "."):
            raise _invalid(f'{_quote(s)}: "*." needs a domain after it ("*.example.com")')
        is_ip, name = _host_canon(rest)
        if is_ip:
            raise _invalid(f"{_quote(s)}: an IP address is not a hostname pattern (use "
                           "allowed_routes for addresses)")
        if wildcard and "." not in name:
            raise _invalid(f'{_quote(s)}: a wildcard needs at least two labels after "*." '
                           '("*.example.com", not "*.com")')
        return "*." + name if wildcard else name
    except InvalidArgument as e:
        raise _invalid(f"{where}: {e.message}") from None


def _is_ip(s: str) -> bool:
    """A plain IPv4/IPv6 address (as events carry them)."""
    try:
        ipaddress.ip_address(s)
        return "%" not in s
    except ValueError:
        return False


def _parse_dec(s: str, maximum: int) -> Optional[int]:
    if not 1 <= len(s) <= 10 or (len(s) > 1 and s[0] == "0") or not all(c in "0123456789" for c in s):
        return None
    v = int(s)
    return v if v <= maximum else None


def check_cidr(s: object, where: str) -> str:
    """net_cidr_parse behind net_policy_add_route: s if it is a CIDR (or a
    bare address), else InvalidArgument "where: route ...: why"."""
    if not isinstance(s, str):
        raise _invalid(f"{where}: {type(s).__name__} {s!r}: not a string")
    if s == "":
        raise _invalid(f'{where}: route "": empty CIDR')
    q = _quote(s)
    if len(s.encode("utf-8", "surrogateescape")) >= _CIDR_STR_MAX:
        raise _invalid(f"{where}: route {q}: too long for a CIDR")
    addr, slash, plen = s.partition("/")
    family = socket.AF_INET6 if ":" in addr else socket.AF_INET
    packed = _inet_pton(family, addr)
    if packed is None:
        raise _invalid(f"{where}: route {q}: not an IPv4 or IPv6 address (expect e.g. "
                       "10.0.0.0/8 or 2001:db8::/32)")
    bits = len(packed) * 8
    prefix = bits
    if slash:
        p = _parse_dec(plen, bits)
        if p is None:
            raise _invalid(f"{where}: route {q}: prefix length must be 0..{bits}")
        prefix = p
    value = int.from_bytes(packed, "big")
    netmask = ((1 << bits) - 1) ^ ((1 << (bits - prefix)) - 1)
    if value & ~netmask:
        masked = socket.inet_ntop(family, (value & netmask).to_bytes(len(packed), "big"))
        raise _invalid(f"{where}: route {q}: host bits set (did you mean {masked}/{prefix}?)")
    return s


def check_port_range(lo: int, hi: int, where: str) -> None:
    """net_port_range_check."""
    if not (1 <= lo <= 65535 and 1 <= hi <= 65535):
        raise _invalid(f"{where}: port range ({lo}, {hi}): ports must be 1..65535")
    if lo > hi:
        raise _invalid(f"{where}: port range ({lo}, {hi}): start above end")


_ROUTE_PORTS_MAX = 64
_HOSTS_MAX = 1024
_ROUTES_MAX = 1024


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
                raise _invalid(f"route {_quote(str(route))}: ports[{i}]: {p!r} is not a port "
                               "or a (start, end) pair") from None

    def _check(self, where: str) -> None:
        """net_policy_add_route's checks, in its order."""
        if len(self.ports) > _ROUTE_PORTS_MAX:
            raise _invalid(f"{where}: more than {_ROUTE_PORTS_MAX} port ranges")
        check_cidr(self.cidr, where)
        for i, (a, b) in enumerate(self.ports):
            check_port_range(a, b, f"{where} ports[{i}]")

    def _to_proto(self) -> pb.Route:
        return pb.Route(cidr=self.cidr,
                        ports=[pb.PortRange(start=a, end=b) for a, b in self.ports])

    def __repr__(self) -> str:
        if not self.ports:
            return f"NetworkPolicy.Route({_pyquote(self.cidr)})"
        ports = ", ".join(f"({a}, {b})" for a, b in self.ports)
        return f"NetworkPolicy.Route({_pyquote(self.cidr)}, ports=[{ports}])"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Route) and (self.cidr, self.ports) == (other.cidr, other.ports)

    def __hash__(self) -> int:
        return hash((self.cidr, tuple(self.ports)))


RouteLike = Union[_Route, str]


def _as_route(r: RouteLike) -> _Route:
    return _Route(r) if isinstance(r, str) else r


def _port_text(a: int, b: int) -> str:
    return str(a) if a == b else f"{a}-{b}"


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
        if isinstance(allowed_hosts, (str, bytes)):
            raise _invalid(f"allowed_hosts: {_quote(allowed_hosts)}: a list of hosts, not one "
                           "string")
        items = (list(allowed_hosts.items()) if isinstance(allowed_hosts, Mapping)
                 else [(h, None) for h in allowed_hosts or []])
        if len(items) > _HOSTS_MAX:
            raise _invalid(f"allowed_hosts: more than {_HOSTS_MAX} entries")
        for i, (h, rules) in enumerate(items):
            host = canonical_host_pattern(h, f"allowed_hosts[{i}]")
            if rules:
                self.host_rules.setdefault(host, []).extend(rules)
            else:
                self.allowed_hosts.append(host)
        self.allowed_routes: List[_Route] = [_as_route(r) for r in allowed_routes or []]
        self.denied_routes: List[_Route] = [_as_route(r) for r in denied_routes or []]
        for name, routes in (("allowed_routes", self.allowed_routes),
                             ("denied_routes", self.denied_routes)):
            if len(routes) > _ROUTES_MAX:
                raise _invalid(f"{name}: more than {_ROUTES_MAX} entries")
            for i, r in enumerate(routes):
                r._check(f"{name}[{i}]")
        self.learn = bool(learn)

    def with_host(self, host: str) -> "NetworkPolicy":
        """A copy that also allows ``host`` (no-op when already listed)."""
        p = NetworkPolicy(list(self.allowed_hosts), self.allowed_routes, self.denied_routes,
                          learn=self.learn)
        p.host_rules = {h: list(r) for h, r in self.host_rules.items()}
        host = canonical_host_pattern(host, f"allowed_hosts[{len(p.allowed_hosts)}]")
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
        hosts = ", ".join(_pyquote(h) for h in self.allowed_hosts)
        if self.host_rules:
            rules = ", ".join(f"{_pyquote(h)}: [...]" for h in self.host_rules)
            plain = ", ".join(f"{_pyquote(h)}: []" for h in self.allowed_hosts)
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
                cidr = r.cidr
                if ports and ":" in cidr and "/" not in cidr:
                    cidr += "/128"  # a bare IPv6 address takes :PORTS only with a prefix
                flags += [opt, f"{cidr}:{ports}" if ports else cidr]
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
