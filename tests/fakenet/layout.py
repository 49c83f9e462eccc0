"""Addresses and the DNS zone of one fake-internet bed.

Every bed owns a *slot* s (1..63, one bed per slot on a machine, held by a
lock file) and uses only documentation/benchmark ranges:

  198.18.s.0/24          the "internet": every address in it is local to
                         the internet netns (AnyIP), servers listen on all
  2001:db8:5741:s::/64   the same, IPv6
  198.19.s.0/30          host <-> internet link (host .1, internet .2)
  2001:db8:5742:s::/64   same, IPv6 (host ::1, internet ::2)
  198.19.s.4k/30         client k <-> internet link (internet .4k+1, client .4k+2)
  2001:db8:5743:s:k::/80 same, IPv6 (internet ::1, client ::2)

Names in the zone point at addresses in the bed, or (on purpose, for policy
tests) at private/loopback/link-local/metadata addresses that nothing in the
bed routes.
"""
import ipaddress

MAX_SLOT = 63

# host index (last octet / last hextet digits) of the named servers
HOSTS = {
    "example.test": 10,
    "github.com": 11,
    "api.github.com": 12,
    "pypi.org": 13,
    "files.pythonhosted.org": 14,
    "deb.debian.org": 15,
    "api.openai.com": 16,
    "internal-api.example.com": 17,
    "example.com": 18,
    "api.slack.com": 19,
    "www.example.com": 18,
    "badcert.example.test": 24,   # served with a cert from an untrusted CA
    "wrongname.example.test": 25,  # served with a test-CA cert for another name
    "expired.example.test": 26,   # served with an expired test-CA cert
    "ns.fakenet.test": 53,
}
WILDCARD_HOST = 30          # every *.zone wildcard answer
MULTI_HOSTS = (20, 21, 22)  # multi.example.test: three A and AAAA records
REBIND_PUBLIC = 40          # first answer of the rebinding names
DNS_HOST = 53
# a wildcard matches any depth of subdomain (never the apex)
WILDCARDS = ("github.com", "example.com", "openai.com", "slack.com", "wild.example.test",
             "pythonhosted.org", "githubusercontent.com")

PRIVATE_V4 = "10.66.0.10"
PORTS = {"http": 80, "https": 443, "https_alt": 8443, "dns": 53, "ssh": 22,
         "tcp_echo": [7, 9000], "udp_echo": [7, 9000]}

LONG_LABEL = "a" * 63

# Answers outside the bed that the host would otherwise route out of the
# machine (default route): while a bed runs, the host gets a blackhole
# route for each (metric BLACKHOLE_METRIC + slot), so a policy bug that
# dials one drops the packet locally instead of sending it anywhere.
# Loopback, 0.0.0.0 and multicast answers need none. The metadata address
# is only blackholed on request (FakeNet(blackhole_metadata=True)): the VM
# itself may use it.
BLACKHOLES = ["10.66.0.10/32", "172.16.0.10/32", "192.168.0.10/32", "169.254.10.10/32",
              "fd00:ec2::254/128", "64:ff9b::7f00:1/128", "2002:7f00:1::1/128"]
METADATA_BLACKHOLE = "169.254.169.254/32"
BLACKHOLE_METRIC = 3000


def v4(slot, host):
    return f"198.18.{slot}.{host}"


def v6(slot, host):
    return f"2001:db8:5741:{slot:x}::{host}"


class Layout:
    """All addresses and interface names of the bed in slot `slot`."""

    def __init__(self, slot):
        if not 1 <= slot <= MAX_SLOT:
            raise ValueError(f"slot {slot} out of 1..{MAX_SLOT}")
        self.slot = s = slot
        self.prefix = f"wfn{s}"
        self.inet_ns = f"wfn{s}-inet"
        self.host_if = f"wfn{s}h"        # in the root netns
        self.inet_if = f"wfn{s}i"        # its peer, in the internet netns
        self.net4 = ipaddress.ip_network(f"198.18.{s}.0/24")
        self.net6 = ipaddress.ip_network(f"2001:db8:5741:{s:x}::/64")
        self.host_link4 = (f"198.19.{s}.1", f"198.19.{s}.2", 30)
        self.host_link6 = (f"2001:db8:5742:{s:x}::1", f"2001:db8:5742:{s:x}::2", 64)
        self.dns4 = v4(s, DNS_HOST)
        self.dns6 = v6(s, DNS_HOST)

    def client(self, k):
        """Names and link addresses of client netns k (1..62)."""
        if not 1 <= k <= 62:
            raise ValueError("client index out of 1..62")
        s = self.slot
        return {
            "ns": f"wfn{s}-c{k}",
            "if_inet": f"wfn{s}c{k}i",   # in the internet netns
            "if_client": f"wfn{s}c{k}",  # in the client netns
            "inet4": f"198.19.{s}.{4 * k + 1}", "client4": f"198.19.{s}.{4 * k + 2}",
            "inet6": f"2001:db8:5743:{s:x}:{k:x}::1", "client6": f"2001:db8:5743:{s:x}:{k:x}::2",
        }

    def addr(self, name, family=4):
        """The (first) bed address of a name in HOSTS."""
        h = HOSTS[name.lower().rstrip(".")]
        return v4(self.slot, h) if family == 4 else v6(self.slot, h)

    def zone(self):
        """The static zone as {name: {type: [values]}} plus wildcard and
        special-behaviour tables; the DNS server takes it as JSON."""
        s = self.slot
        recs = {}

        def add(name, rtype, value):
            recs.setdefault(name, {}).setdefault(rtype, []).append(value)

        for name, h in HOSTS.items():
            add(name, "A", v4(s, h))
            add(name, "AAAA", v6(s, h))
        add("fakenet.test", "NS", "ns.fakenet.test")
        for h in MULTI_HOSTS:
            add("multi.example.test", "A", v4(s, h))
            add("multi.example.test", "AAAA", v6(s, h))
        # one public and one private answer in the same RRset
        add("mixed.example.test", "A", v4(s, HOSTS["example.test"]))
        add("mixed.example.test", "A", PRIVATE_V4)
        # answers a policy must refuse (nothing in the bed routes them)
        add("private.example.test", "A", PRIVATE_V4)
        add("private172.example.test", "A", "172.16.0.10")
        add("private192.example.test", "A", "192.168.0.10")
        add("loopback.example.test", "A", "127.0.0.1")
        add("loopback.example.test", "AAAA", "::1")
        add("loopback2.example.test", "A", "127.1.2.3")
        add("linklocal.example.test", "A", "169.254.10.10")
        add("linklocal.example.test", "AAAA", "fe80::1")
        add("metadata.example.test", "A", "169.254.169.254")
        add("metadata.example.test", "AAAA", "fd00:ec2::254")
        add("zero.example.test", "A", "0.0.0.0")
        add("zero.example.test", "AAAA", "::")
        add("multicast.example.test", "A", "224.0.0.1")
        add("mapped.example.test", "AAAA", "::ffff:127.0.0.1")
        add("mapped-meta.example.test", "AAAA", "::ffff:169.254.169.254")
        add("nat64.example.test", "AAAA", "64:ff9b::7f00:1")
        add("sixtofour.example.test", "AAAA", "2002:7f00:1::1")
        add("v6only.example.test", "AAAA", v6(s, HOSTS["example.test"]))
        add("v4only.example.test", "A", v4(s, HOSTS["example.test"]))
        add("alias.example.test", "CNAME", "github.com")
        add("txt.example.test", "TXT", ["v=fakenet1 hello"])
        add("bigtxt.example.test", "TXT", [("%03d" % i) * 66 for i in range(12)])  # > 512 B: TC over UDP
        add(f"{LONG_LABEL}.example.test", "A", v4(s, HOSTS["example.test"]))
        return {
            "records": recs,
            "soa_zone": "fakenet.test",
            "wildcards": {z: {"A": [v4(s, WILDCARD_HOST)], "AAAA": [v6(s, WILDCARD_HOST)]}
                          for z in WILDCARDS},
            # <anything>.<suffix>: first answer public, every later one the target
            "rebind": {
                "rebind.example.test": {"A": [v4(s, REBIND_PUBLIC), "127.0.0.1"],
                                        "AAAA": [v6(s, REBIND_PUBLIC), "::1"]},
                "rebind-meta.example.test": {"A": [v4(s, REBIND_PUBLIC), "169.254.169.254"],
                                             "AAAA": [v6(s, REBIND_PUBLIC), "fd00:ec2::254"]},
                "rebind-private.example.test": {"A": [v4(s, REBIND_PUBLIC), PRIVATE_V4]},
            },
            # <anything>.flip.example.test alternates public, loopback, public, ...
            "flip": {"flip.example.test": {"A": [v4(s, REBIND_PUBLIC), "127.0.0.1"],
                                           "AAAA": [v6(s, REBIND_PUBLIC), "::1"]}},
            # <anything>.slow.wild.example.test: the wildcard answer, 300 ms late
            "slow": {"slow.wild.example.test": 300},
            "servfail": ["servfail.example.test"],
            "drop": ["timeout.example.test"],
        }
