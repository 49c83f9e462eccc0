"""A sandbox-like network namespace wired to the host the way warrend will
wire a sandbox (prototype for the sandbox-side engineer): a veth pair, a
private test address inside 198.18.0.0/15 that no fakenet bed uses
(198.19.128+k.0/30 and 2001:db8:5744:k::/64), a default route to the host
side, and nftables rules on the host (SANDBOX_NFT below) that redirect
the sandbox's TCP to the egress proxy and its port 53 to the egress
resolver and drop everything else it sends.
"""
import ipaddress
import os
import shutil
import socket
import subprocess

# The host-side rules for one sandbox interface. One table per sandbox
# keeps add/remove atomic. prerouting: port 53 (UDP and TCP) to the
# resolver, every other TCP connection to the proxy (`redirect` keeps the
# original destination in conntrack: the proxy reads it with
# SO_ORIGINAL_DST / IP6T_SO_ORIGINAL_DST). input: only the redirected
# flows (ct status dnat) and IPv6 neighbour discovery reach the host;
# forward: nothing from the sandbox is routed anywhere. UDP other than 53,
# ICMP, and any other protocol are dropped.
SANDBOX_NFT = """
table inet {table} {{
    chain sb_pre {{
        type nat hook prerouting priority dstnat; policy accept;
        iifname "{ifname}" meta l4proto {{ tcp, udp }} th dport 53 redirect to :{dns_port}
        iifname "{ifname}" meta l4proto tcp redirect to :{proxy_port}
    }}
    chain sb_in {{
        type filter hook input priority filter; policy accept;
        iifname "{ifname}" ct state established,related accept
        iifname "{ifname}" icmpv6 type {{ nd-neighbor-solicit, nd-neighbor-advert, nd-router-solicit }} accept
        iifname "{ifname}" meta l4proto tcp th dport {{ {proxy_port}, {dns_port} }} ct status dnat accept
        iifname "{ifname}" udp dport {dns_port} ct status dnat accept
        iifname "{ifname}" counter drop
    }}
    chain sb_fwd {{
        type filter hook forward priority filter; policy accept;
        iifname "{ifname}" counter drop
        oifname "{ifname}" counter drop
    }}
}}
"""


def sandbox_nft(table, ifname, proxy_port, dns_port):
    return SANDBOX_NFT.format(table=table, ifname=ifname, proxy_port=proxy_port, dns_port=dns_port)


def run(*args, check=True, **kw):
    return subprocess.run(args, check=check, capture_output=True, text=True, **kw)


class SandboxNet:
    """netns weg<k>-sb; host veth weg<k>h (198.19.<128+k>.1, 2001:db8:5744:<k>::1),
    sandbox side weg<k>s (.2 / ::2)."""

    def __init__(self, k, resolver_ip):
        assert 1 <= k <= 120
        self.k = k
        self.ns = f"weg{k}-sb"
        self.host_if, self.sb_if = f"weg{k}h", f"weg{k}s"
        self.host4, self.addr4 = f"198.19.{128 + k}.1", f"198.19.{128 + k}.2"
        self.host6, self.addr6 = f"2001:db8:5744:{k:x}::1", f"2001:db8:5744:{k:x}::2"
        self.table = f"warren_egress_test_{k}"
        self.resolver_ip = resolver_ip
        self.created = []

    def create(self):
        self.destroy(quiet=True)
        run("ip", "netns", "add", self.ns)
        self.created.append("ns")
        run("ip", "link", "add", self.host_if, "type", "veth", "peer", "name", self.sb_if, "netns", self.ns)
        self.created.append("veth")
        run("ip", "addr", "add", f"{self.host4}/30", "dev", self.host_if)
        run("ip", "-6", "addr", "add", f"{self.host6}/64", "dev", self.host_if, "nodad")
        run("ip", "link", "set", self.host_if, "up")
        n = ["ip", "-n", self.ns]
        run(*n, "link", "set", "lo", "up")
        run(*n, "addr", "add", f"{self.addr4}/30", "dev", self.sb_if)
        run(*n, "-6", "addr", "add", f"{self.addr6}/64", "dev", self.sb_if, "nodad")
        run(*n, "link", "set", self.sb_if, "up")
        run(*n, "route", "add", "default", "via", self.host4)
        run(*n, "-6", "route", "add", "default", "via", self.host6)
        etc = f"/etc/netns/{self.ns}"
        os.makedirs(etc, exist_ok=True)
        with open(f"{etc}/resolv.conf", "w") as f:
            f.write(f"nameserver {self.resolver_ip}\noptions timeout:2 attempts:1\n")
        with open(f"{etc}/hosts", "w") as f:
            f.write("127.0.0.1 localhost\n::1 localhost\n")

    def install_nft(self, proxy_port, dns_port):
        rules = sandbox_nft(self.table, self.host_if, proxy_port, dns_port)
        run("nft", "-f", "-", input=rules)
        self.created.append("nft")

    def argv(self, args):
        return ["ip", "netns", "exec", self.ns, *args]

    def run(self, args, env=None, timeout=60, input=None):
        return subprocess.run(self.argv(args), env=env, timeout=timeout, capture_output=True,
                              text=True, input=input)

    def popen(self, args, env=None, **kw):
        return subprocess.Popen(self.argv(args), env=env, **kw)

    def drops(self):
        """Packets the input/forward drop rules counted."""
        out = run("nft", "-j", "list", "table", "inet", self.table).stdout
        import json
        total = 0
        for item in json.loads(out)["nftables"]:
            rule = item.get("rule")
            if not rule:
                continue
            for ex in rule["expr"]:
                if "counter" in ex:
                    total += ex["counter"]["packets"]
        return total

    def destroy(self, quiet=False):
        run("nft", "delete", "table", "inet", self.table, check=False)
        run("ip", "link", "del", self.host_if, check=False)
        run("ip", "netns", "del", self.ns, check=False)
        shutil.rmtree(f"/etc/netns/{self.ns}", ignore_errors=True)
        try:
            os.rmdir("/etc/netns")
        except OSError:
            pass
        self.created = []


def bind_sockets(net):
    """Listening TCP sockets for the proxy (v4 and v6, one port) and
    UDP+TCP sockets for the resolver (v4 and v6, one port), bound to the
    host side of the sandbox's veth: the redirect targets."""
    for _ in range(20):
        socks = []
        try:
            l4 = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            socks.append(l4)
            l4.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            l4.bind((net.host4, 0))
            port = l4.getsockname()[1]
            l6 = socket.socket(socket.AF_INET6, socket.SOCK_STREAM)
            socks.append(l6)
            l6.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
            l6.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            l6.bind((net.host6, port))
            u4 = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            socks.append(u4)
            u4.bind((net.host4, 0))
            dport = u4.getsockname()[1]
            u6 = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)
            socks.append(u6)
            u6.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
            u6.bind((net.host6, dport))
            t4 = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            socks.append(t4)
            t4.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            t4.bind((net.host4, dport))
            t6 = socket.socket(socket.AF_INET6, socket.SOCK_STREAM)
            socks.append(t6)
            t6.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
            t6.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            t6.bind((net.host6, dport))
        except OSError:
            for s in socks:
                s.close()
            continue
        for s in (l4, l6, t4, t6):
            s.listen(1024)
        for s in socks:
            s.set_inheritable(True)
        return {"proxy": [l4, l6], "dns": [u4, u6, t4, t6], "proxy_port": port, "dns_port": dport}
    raise RuntimeError("no free ports")
