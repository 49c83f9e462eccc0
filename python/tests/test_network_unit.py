"""The SDK's egress policy surface against the in-process fake server
(tests/fake_server.py): client-side validation (no call is made for a bad
policy), the CreateSandboxRequest built for each policy form, network
events, following them and suggesting a policy from a learn run."""
import datetime as dt
import os
import sys
import threading

import pytest

sys.path.insert(0, os.path.dirname(__file__))
import fake_server  # noqa: E402

import warren as wr  # noqa: E402
from warren import NetworkEvent, NetworkPolicy, Sandbox, SandboxClient  # noqa: E402
from warren._proto.warren.v1 import common_pb2  # noqa: E402
from warren._proto.warren.v1 import sandboxes_pb2 as pb  # noqa: E402

Route = NetworkPolicy.Route


@pytest.fixture
def server():
    srv, port, sbx, sysv = fake_server.start()
    yield port, sbx
    srv.stop(0)


@pytest.fixture
def client(server):
    port, _ = server
    with SandboxClient(f"127.0.0.1:{port}") as c:
        yield c


# --- validation: (policy keywords, the exact message) ---

IPMSG = "an IP address is not a hostname pattern (use allowed_routes for addresses)"
BAD = [
    (dict(allowed_hosts=["github.com", "*.com"]),
     'allowed_hosts[1]: "*.com": a wildcard needs at least two labels after "*." '
     '("*.example.com", not "*.com")'),
    (dict(allowed_hosts=["foo..bar"]), 'allowed_hosts[0]: host "foo..bar": empty label'),
    (dict(allowed_hosts=[".foo.bar"]), 'allowed_hosts[0]: host ".foo.bar": empty label'),
    (dict(allowed_hosts=["*.foo..bar"]), 'allowed_hosts[0]: host "foo..bar": empty label'),
    (dict(allowed_hosts=["10.1.2.3"]), f'allowed_hosts[0]: "10.1.2.3": {IPMSG}'),
    (dict(allowed_hosts=["ok.example", "fd00::1"]), f'allowed_hosts[1]: "fd00::1": {IPMSG}'),
    (dict(allowed_hosts=["[::1]"]), f'allowed_hosts[0]: "[::1]": {IPMSG}'),
    (dict(allowed_hosts=["0x7f.1"]), f'allowed_hosts[0]: "0x7f.1": {IPMSG}'),
    (dict(allowed_hosts=["2130706433"]), f'allowed_hosts[0]: "2130706433": {IPMSG}'),
    (dict(allowed_hosts=["*.10.0.0.1"]), f'allowed_hosts[0]: "*.10.0.0.1": {IPMSG}'),
    (dict(allowed_hosts=["1.2.3.256"]),
     'allowed_hosts[0]: host "1.2.3.256": numeric last label but not a valid IPv4 address'),
    (dict(allowed_hosts=[""]), 'allowed_hosts[0]: "": empty entry (use "*" for every host)'),
    (dict(allowed_hosts=["bücher.de"]),
     'allowed_hosts[0]: host "b\\xc3\\xbccher.de": non-ASCII byte (IDN must be given in '
     'punycode, xn--...)'),
    (dict(allowed_hosts=["a.*.com"]),
     'allowed_hosts[0]: "a.*.com": \'*\' is allowed only as the whole entry or as a leading '
     '"*." ("*.example.com")'),
    (dict(allowed_hosts=["*x.com"]),
     'allowed_hosts[0]: "*x.com": \'*\' is allowed only as the whole entry or as a leading '
     '"*." ("*.example.com")'),
    (dict(allowed_hosts=["*."]),
     'allowed_hosts[0]: "*.": "*." needs a domain after it ("*.example.com")'),
    (dict(allowed_hosts=["a b.com"]), 'allowed_hosts[0]: host "a b.com": space'),
    (dict(allowed_hosts=["a\tb.com"]), 'allowed_hosts[0]: host "a\\x09b.com": control character'),
    (dict(allowed_hosts=["a_b.com"]),
     'allowed_hosts[0]: host "a_b.com": character outside letters, digits, \'-\' and \'.\''),
    (dict(allowed_hosts=["user@github.com"]),
     'allowed_hosts[0]: host "user@github.com": \'@\' (userinfo is not a hostname)'),
    (dict(allowed_hosts=["github.com:443"]),
     'allowed_hosts[0]: host "github.com:443": \':\' in a name (neither a hostname nor an IPv6 '
     'address)'),
    (dict(allowed_hosts=["-a.com"]), 'allowed_hosts[0]: host "-a.com": label starts or ends with \'-\''),
    (dict(allowed_hosts=["a" * 64 + ".com"]),
     'allowed_hosts[0]: host "' + "a" * 64 + '.com": label longer than 63 characters'),
    (dict(allowed_hosts=["a" * 120]),
     'allowed_hosts[0]: host "' + "a" * 94 + '...": label longer than 63 characters'),
    (dict(allowed_hosts={"ok.example": [], "*.com": []}),
     'allowed_hosts[1]: "*.com": a wildcard needs at least two labels after "*." '
     '("*.example.com", not "*.com")'),
    (dict(allowed_hosts=["h%d.example" % i for i in range(1025)]),
     "allowed_hosts: more than 1024 entries"),
    (dict(allowed_routes=["10.0.0.0/33"]),
     'allowed_routes[0]: route "10.0.0.0/33": prefix length must be 0..32'),
    (dict(allowed_routes=["fd00::/129"]),
     'allowed_routes[0]: route "fd00::/129": prefix length must be 0..128'),
    (dict(allowed_routes=["10.0.0.0/08"]),
     'allowed_routes[0]: route "10.0.0.0/08": prefix length must be 0..32'),
    (dict(allowed_routes=["10.0.0.0/8", "example.com"]),
     'allowed_routes[1]: route "example.com": not an IPv4 or IPv6 address (expect e.g. '
     '10.0.0.0/8 or 2001:db8::/32)'),
    (dict(allowed_routes=["10/8"]),
     'allowed_routes[0]: route "10/8": not an IPv4 or IPv6 address (expect e.g. '
     '10.0.0.0/8 or 2001:db8::/32)'),
    (dict(allowed_routes=[""]), 'allowed_routes[0]: route "": empty CIDR'),
    (dict(allowed_routes=["10.0.0.1/8"]),
     'allowed_routes[0]: route "10.0.0.1/8": host bits set (did you mean 10.0.0.0/8?)'),
    (dict(allowed_routes=["fd00::1/8"]),
     'allowed_routes[0]: route "fd00::1/8": host bits set (did you mean fd00::/8?)'),
    (dict(allowed_routes=[Route("10.0.0.0/8", ports=[(5, 1)])]),
     "allowed_routes[0] ports[0]: port range (5, 1): start above end"),
    (dict(allowed_routes=[Route("10.0.0.0/8", ports=[443, 65536])]),
     "allowed_routes[0] ports[1]: port range (65536, 65536): ports must be 1..65535"),
    (dict(allowed_routes=[Route("10.0.0.0/8", ports=[(0, 10)])]),
     "allowed_routes[0] ports[0]: port range (0, 10): ports must be 1..65535"),
    (dict(allowed_routes=[Route("10.0.0.0/8", ports=[0])]),
     "allowed_routes[0] ports[0]: port range (0, 0): ports must be 1..65535"),
    (dict(allowed_routes=[Route("10.0.0.0/8", ports=list(range(1, 66)))]),
     "allowed_routes[0]: more than 64 port ranges"),
    (dict(denied_routes=["169.254.169.254/32", "10.0.0.0/33"]),
     'denied_routes[1]: route "10.0.0.0/33": prefix length must be 0..32'),
    (dict(denied_routes=[Route("10.0.0.0/8", ports=[(9000, 8000)])]),
     "denied_routes[0] ports[0]: port range (9000, 8000): start above end"),
]


@pytest.mark.parametrize("kw,message", BAD, ids=[m[:60] for _, m in BAD])
def test_invalid_policy_raises_before_any_call(client, server, kw, message):
    _, sbx = server
    with pytest.raises(wr.InvalidArgument) as ei:
        client.create(image="img", network_policy=NetworkPolicy(**kw))
    assert ei.value.message == message
    assert ei.value.status == wr.Status.INVALID_ARGUMENT
    assert sbx.creates == []  # nothing reached the server


def test_bad_port_spec_and_string_hosts():
    with pytest.raises(wr.InvalidArgument, match=r'route "10.0.0.0/8": ports\[0\]: .*not a port'):
        Route("10.0.0.0/8", ports=["https"])
    with pytest.raises(wr.InvalidArgument, match="a list of hosts, not one string"):
        NetworkPolicy(allowed_hosts="github.com")


def test_hosts_canonicalized():
    p = NetworkPolicy(allowed_hosts=["GitHub.COM.", "*.PyPI.org.", "*", "xn--bcher-kva.de", "a-b.io"])
    assert p.allowed_hosts == ["github.com", "*.pypi.org", "*", "xn--bcher-kva.de", "a-b.io"]


def test_routes_accepted():
    p = NetworkPolicy(allowed_routes=["10.1.2.3", "::ffff:10.0.0.0/104", "0.0.0.0/0", "::/0",
                                      Route("2001:db8::/32", ports=[(1, 65535)])])
    assert [r.cidr for r in p.allowed_routes][:2] == ["10.1.2.3", "::ffff:10.0.0.0/104"]


# --- the request built ---

def test_list_form_request(client, server):
    _, sbx = server
    policy = NetworkPolicy(
        allowed_hosts=["api.openai.com", "github.com", "pypi.org"],
        allowed_routes=[Route("10.0.0.0/8", ports=[(5432, 5432)]),
                        Route("fd00::/8", ports=[443, (8000, 9000)])],
        denied_routes=["169.254.169.254/32"])
    sb = client.create(image="img", network_policy=policy)
    np = sbx.last_create.network_policy
    assert list(np.allowed_hosts) == ["api.openai.com", "github.com", "pypi.org"]
    assert [(r.cidr, [(p.start, p.end) for p in r.ports]) for r in np.allowed_routes] == [
        ("10.0.0.0/8", [(5432, 5432)]), ("fd00::/8", [(443, 443), (8000, 9000)])]
    assert [(r.cidr, list(r.ports)) for r in np.denied_routes] == [("169.254.169.254/32", [])]
    assert not np.learn and not np.host_rules
    assert sb.info.egress_enforced


def test_empty_policy_is_sent(client, server):
    _, sbx = server
    client.create(image="img", network_policy=NetworkPolicy(allowed_hosts=[]))
    assert sbx.last_create.HasField("network_policy")
    assert list(sbx.last_create.network_policy.allowed_hosts) == []
    client.create(image="img")
    assert not sbx.last_create.HasField("network_policy")


def test_learn_request(server):
    port, sbx = server
    os.environ["WARREN_ADDR"] = f"127.0.0.1:{port}"
    try:
        sb = Sandbox(image="img", network_policy=NetworkPolicy(learn=True)).run()
    finally:
        del os.environ["WARREN_ADDR"]
    assert sbx.last_create.network_policy.learn
    sb.terminate()


def test_mapping_form_without_rules_is_the_list_form(client, server):
    _, sbx = server
    client.create(image="img", network_policy=NetworkPolicy(
        allowed_hosts={"GitHub.com": [], "pypi.org": []}))
    np = sbx.last_create.network_policy
    assert list(np.allowed_hosts) == ["github.com", "pypi.org"] and not np.host_rules


def test_mapping_form_with_rules_goes_in_host_rules(client, server):
    _, sbx = server
    M = NetworkPolicy
    policy = NetworkPolicy(allowed_hosts={
        "pypi.org": [],
        "internal-api.example.com": [M.Rule(
            match=M.Match(path=M.Matcher(starts_with="/v1/")),
            transforms=[M.Transformer(
                headers={"Authorization": "Bearer __chalk_secret_API_TOKEN"},
                headers_secrets={"__chalk_secret_API_TOKEN": "INTERNAL_API_TOKEN"})],
            forward_url="https://internal-api.example.com")],
    })
    # The server (like warrend until per-host rules land) answers UNIMPLEMENTED.
    with pytest.raises(wr.Unimplemented, match="per-host"):
        client.create(image="img", network_policy=policy)
    np = sbx.last_create.network_policy
    assert list(np.allowed_hosts) == ["pypi.org"]
    rule = np.host_rules["internal-api.example.com"].rules[0]
    assert rule.match.path.starts_with == "/v1/"
    assert rule.transforms[0].headers_secrets["__chalk_secret_API_TOKEN"] == "INTERNAL_API_TOKEN"
    assert rule.forward_url == "https://internal-api.example.com"


def test_resource_detector_adds_github_api_to_policy(client, server):
    _, sbx = server
    client.create(image="img", network_policy=NetworkPolicy(allowed_hosts=["pypi.org"]),
                  resource_detectors=[wr.ResourceDetector.GITHUB_PULL_REQUESTS])
    assert list(sbx.last_create.network_policy.allowed_hosts) == ["pypi.org", "api.github.com"]


def test_repr_and_cli_flags():
    p = NetworkPolicy(allowed_hosts=["github.com"],
                      allowed_routes=[Route("10.0.0.0/8", ports=[(5432, 5432), (8000, 9000)])],
                      denied_routes=["169.254.169.254/32"])
    assert repr(p) == ('NetworkPolicy(allowed_hosts=["github.com"], allowed_routes=['
                       'NetworkPolicy.Route("10.0.0.0/8", ports=[(5432, 5432), (8000, 9000)])], '
                       'denied_routes=[NetworkPolicy.Route("169.254.169.254/32")])')
    assert eval(repr(p), {"NetworkPolicy": NetworkPolicy}) == p
    assert p.cli_flags() == ["--host", "github.com", "--route", "10.0.0.0/8:5432,8000-9000",
                             "--deny-route", "169.254.169.254/32"]
    assert NetworkPolicy(learn=True).cli_flags() == ["--learn-egress"]
    assert repr(NetworkPolicy()) == "NetworkPolicy(allowed_hosts=[])"


# --- events ---

def ev(seq, host="", dialed="", verdict="allow", kind="tcp", sni="", rule="", reason="",
       up=0, down=0, original_dst=""):
    return pb.NetworkEvent(at=common_pb2.Timestamp(unix_nanos=(1_700_000_000 + seq) * 10**9),
                           host=host, sni=sni, dialed=dialed, rule=rule, verdict=verdict,
                           bytes_out=up, bytes_in=down, reason=reason, kind=kind, seq=seq,
                           original_dst=original_dst or dialed)


def test_network_events_decoded(client, server):
    _, sbx = server
    sb = client.create(image="img", network_policy=NetworkPolicy(allowed_hosts=["pypi.org"]))
    sbx.events[sb.id] = [
        ev(1, host="pypi.org", sni="pypi.org", dialed="151.101.0.223:443",
           rule='allowed_hosts[0] pypi.org', up=517, down=4096),
        ev(2, host="evil.example", verdict="deny", reason="not in allowed_hosts", kind="dns"),
    ]
    events = sb.network_events()
    assert events[0] == NetworkEvent(
        time=dt.datetime(2023, 11, 14, 22, 13, 21, tzinfo=dt.timezone.utc), host="pypi.org",
        sni="pypi.org", dialed="151.101.0.223:443", rule="allowed_hosts[0] pypi.org",
        verdict="allow", reason="", bytes_up=517, bytes_down=4096, kind="tcp", seq=1,
        original_dst="151.101.0.223:443")
    assert (events[1].verdict, events[1].reason, events[1].kind) == ("deny", "not in allowed_hosts", "dns")
    with pytest.raises(dataclasses_frozen()):
        events[0].host = "x"  # type: ignore[misc]
    assert [e.seq for e in sb.network_events(limit=1)] == [2]
    assert [e.seq for e in sb.network_events(after_seq=1)] == [2]
    req = sbx.event_requests[-1]
    assert (req.sandbox, req.after_seq, req.limit) == (sb.id, 1, 0)


def dataclasses_frozen():
    import dataclasses
    return dataclasses.FrozenInstanceError


def test_network_events_of_unknown_sandbox(client, server):
    sb = client.create(image="img")
    _, sbx = server
    del sbx.boxes[sb.id]
    with pytest.raises(wr.SandboxNotFound):
        sb.network_events()
    with pytest.raises(wr.SandboxNotFound):
        next(sb.follow_network_events())


def test_follow_ends_when_the_sandbox_is_removed(client, server):
    _, sbx = server
    sb = client.create(image="img")
    sbx.events[sb.id] = [ev(1, host="a.example")]
    sbx.on_list_events = lambda s: sbx.boxes.pop(s.id)
    assert [e.seq for e in sb.follow_network_events(poll_interval=0.01)] == [1]


def test_follow_polls_with_after_seq_until_the_sandbox_ends(client, server):
    _, sbx = server
    sb = client.create(image="img", network_policy=NetworkPolicy(allowed_hosts=["a.example"]))
    sbx.events[sb.id] = [ev(1, host="a.example", dialed="127.0.0.1:443")]
    polls = []

    def on_list(s):
        polls.append(1)
        if len(polls) == 2:
            sbx.events[s.id].append(ev(2, host="b.example", verdict="deny"))
        if len(polls) == 3:
            sbx.events[s.id].append(ev(3, host="a.example", dialed="127.0.0.1:443"))
            s.status = pb.SANDBOX_STATUS_TERMINATED  # ends before the next poll

    sbx.on_list_events = on_list
    seen = []
    done = threading.Event()

    def run():
        for e in sb.follow_network_events(poll_interval=0.01):
            seen.append(e.seq)
        done.set()

    threading.Thread(target=run, daemon=True).start()
    assert done.wait(10)
    assert seen == [1, 2, 3]
    assert [r.after_seq for r in sbx.event_requests] == [0, 1, 1, 2]


def test_suggest_from_learn_events():
    events = [NetworkEvent._from_proto(e) for e in [
        ev(1, host="PyPI.org.", dialed="151.101.0.223:443"),
        ev(2, host="files.pythonhosted.org", dialed="151.101.1.63:443"),
        ev(3, host="pypi.org", dialed="151.101.0.223:443"),
        ev(4, dialed="10.1.2.3:5432"),
        ev(5, dialed="10.1.2.3:443"),
        ev(6, dialed="[fd00::5]:8080"),
        ev(7, host="ignored-dns.example", kind="dns"),
        ev(8, host="denied.example", verdict="deny"),
        ev(9, original_dst="192.0.2.1:80"),
        ev(10, host="10.9.9.9", dialed="10.9.9.9:22"),
    ]]
    p = NetworkPolicy.suggest(events)
    assert p.allowed_hosts == ["files.pythonhosted.org", "pypi.org"]
    assert p.allowed_routes == [Route("10.1.2.3/32", ports=[(443, 443), (5432, 5432)]),
                                Route("10.9.9.9/32", ports=[(22, 22)]),
                                Route("192.0.2.1/32", ports=[(80, 80)]),
                                Route("fd00::5/128", ports=[(8080, 8080)])]
    assert not p.learn and not p.denied_routes
    assert NetworkPolicy.suggest([]) == NetworkPolicy(allowed_hosts=[])


def test_suggest_from_sandbox_events(client, server):
    _, sbx = server
    sb = client.create(image="img", network_policy=NetworkPolicy(learn=True))
    sbx.events[sb.id] = [ev(1, host="github.com", dialed="140.82.112.3:443")]
    assert repr(NetworkPolicy.suggest(sb.network_events())) == \
        'NetworkPolicy(allowed_hosts=["github.com"])'


def test_sandbox_info_egress_enforced(client):
    assert client.create(image="img", network_policy=NetworkPolicy(allowed_hosts=[])).refresh().egress_enforced
    assert not client.create(image="img").refresh().egress_enforced
