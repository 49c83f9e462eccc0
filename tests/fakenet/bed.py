"""FakeNet: Warren's fake internet for network-facing tests.

See README.md beside this file for the API. Everything a bed creates is
named after its slot (prefix wfn<slot>): netns wfn<s>-inet and wfn<s>-c<k>,
host veth wfn<s>h, temp dir $TMPDIR/wfn<s>-*, /etc/netns/wfn<s>-*. A slot
is held with a lock file in /run/warren-fakenet for the bed's lifetime;
what a crashed run left in a slot is removed by the next bed that takes it
(or `python3 -m fakenet cleanup`), never anything of a slot that is held.
"""
import fcntl
import glob
import json
import os
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import time
import uuid

from . import artifacts, gitserver, layout, pki
from .srvlog import read_events

LOCK_DIR = "/run/warren-fakenet"
PKG_PARENT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SERVERS = ("dns", "web", "tcp_echo", "udp_echo", "ssh")
SSH_UID = 60999
SSHD = "/usr/sbin/sshd"
# environment variables a client process must not inherit: proxies would
# send traffic elsewhere, CA and pip settings would trust or fetch elsewhere
SCRUB_PREFIXES = ("PIP_",)
SCRUB = {"http_proxy", "https_proxy", "all_proxy", "no_proxy", "ftp_proxy",
         "SSL_CERT_FILE", "SSL_CERT_DIR", "CURL_CA_BUNDLE", "REQUESTS_CA_BUNDLE", "GIT_SSL_CAINFO",
         "NODE_EXTRA_CA_CERTS", "AWS_CA_BUNDLE", "HTTPLIB2_CA_CERTS", "NIX_SSL_CERT_FILE",
         "GRPC_DEFAULT_SSL_ROOTS_FILE_PATH", "CLOUDSDK_CORE_CUSTOM_CA_CERTS_FILE", "GIT_SSH_COMMAND"}


def ip(*args, check=True):
    r = subprocess.run(["ip", *args], capture_output=True, text=True)
    if check and r.returncode != 0:
        raise RuntimeError(f"ip {' '.join(args)}: {r.stderr.strip()}")
    return r


def _netns_list():
    out = ip("netns", "list", check=False).stdout
    return [line.split()[0] for line in out.splitlines() if line.strip()]


def _kill_netns_pids(ns):
    r = ip("netns", "pids", ns, check=False)
    for p in r.stdout.split():
        try:
            os.kill(int(p), signal.SIGKILL)
        except (ProcessLookupError, ValueError):
            pass


def _blackholes(slot, add, metadata=False):
    metric = str(layout.BLACKHOLE_METRIC + slot)
    for net in layout.BLACKHOLES + ([layout.METADATA_BLACKHOLE] if metadata or not add else []):
        fam = "-6" if ":" in net else "-4"
        ip(fam, "route", "add" if add else "del", "blackhole", net, "metric", metric, check=add)


def cleanup_slot(slot):
    """Remove everything a bed in `slot` may have left. Call only while
    holding that slot's lock (or for a slot nobody holds)."""
    prefix = f"wfn{slot}-"
    _blackholes(slot, add=False)
    for ns in _netns_list():
        if ns.startswith(prefix):
            _kill_netns_pids(ns)
            ip("netns", "del", ns, check=False)
    if os.path.exists(f"/sys/class/net/wfn{slot}h"):
        ip("link", "del", f"wfn{slot}h", check=False)
    for d in glob.glob(f"/etc/netns/{prefix}*"):
        shutil.rmtree(d, ignore_errors=True)
    try:
        os.rmdir("/etc/netns")
    except OSError:
        pass
    for d in glob.glob(os.path.join(tempfile.gettempdir(), f"{prefix}*")):
        shutil.rmtree(d, ignore_errors=True)


class SlotLock:
    """An exclusive lock on one slot (flock on /run/warren-fakenet/slot-N.lock)."""

    def __init__(self):
        self.slot = self.fd = None

    def acquire(self, slots=None):
        """Take the first free slot of `slots` (default: all, starting at
        one derived from the pid, so that concurrent runs rarely reuse a
        slot just freed by another)."""
        if slots is None:
            n = layout.MAX_SLOT
            start = os.getpid() % n
            slots = [(start + i) % n + 1 for i in range(n)]
        slots = list(slots)
        os.makedirs(LOCK_DIR, mode=0o755, exist_ok=True)
        routes = ip("-4", "route", "show", "table", "all", check=False).stdout
        for s in slots:
            # a range someone else routes (not one of our stale beds) is not ours to take
            if any(line.startswith(f"198.18.{s}.0/24") and f"dev wfn{s}h" not in line
                   for line in routes.splitlines()):
                continue
            path = f"{LOCK_DIR}/slot-{s}.lock"
            try:
                fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
            except FileNotFoundError:      # the last bed's release removed the empty dir meanwhile
                os.makedirs(LOCK_DIR, mode=0o755, exist_ok=True)
                fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                os.close(fd)
                continue
            try:
                same = os.stat(path).st_ino == os.fstat(fd).st_ino
            except FileNotFoundError:
                same = False
            if not same:       # unlinked by its previous holder meanwhile
                os.close(fd)
                continue
            self.slot, self.fd = s, fd
            return s
        raise RuntimeError(f"fakenet: no free slot (all of {slots} are held)")

    def write_state(self, state):
        os.ftruncate(self.fd, 0)
        os.pwrite(self.fd, json.dumps(state).encode(), 0)

    def release(self):
        if self.fd is not None:
            try:
                os.unlink(f"{LOCK_DIR}/slot-{self.slot}.lock")
            except FileNotFoundError:
                pass
            os.close(self.fd)
            self.fd = None
            try:
                os.rmdir(LOCK_DIR)         # only when no other bed has a lock file in it
            except OSError:
                pass


def slot_held(slot):
    path = f"{LOCK_DIR}/slot-{slot}.lock"
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except FileNotFoundError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        return False
    except BlockingIOError:
        return True
    finally:
        os.close(fd)


def running_beds():
    """{slot: state} of the beds running on this machine (from lock files)."""
    out = {}
    for path in glob.glob(f"{LOCK_DIR}/slot-*.lock"):
        s = int(path.rsplit("-", 1)[1].split(".")[0])
        if slot_held(s):
            try:
                out[s] = json.load(open(path))
            except (OSError, ValueError):
                out[s] = {}
    return out


def cleanup_stale():
    """Clean every slot that nobody holds; returns the slots cleaned."""
    cleaned = []
    names = set(_netns_list()) | set(os.listdir("/sys/class/net"))
    for s in range(1, layout.MAX_SLOT + 1):
        if any(n.startswith((f"wfn{s}-", f"wfn{s}h")) for n in names) or \
                glob.glob(os.path.join(tempfile.gettempdir(), f"wfn{s}-*")):
            lk = SlotLock()
            try:
                lk.acquire([s])
            except RuntimeError:
                continue
            try:
                cleanup_slot(s)
                cleaned.append(s)
            finally:
                lk.release()
    return cleaned


class Mark:
    """A point in every server log (and the packet counters): events after
    it are "since" it."""

    def __init__(self, offsets, t, packets=None):
        self.offsets, self.t, self.packets = offsets, t, packets

    def __repr__(self):
        return f"Mark(t={self.t:.3f})"


class Client:
    """A client netns wired to the internet netns, resolving with the
    bed's DNS (ip netns exec bind-mounts /etc/netns/<ns>/{resolv.conf,hosts})
    and trusting only the bed's test CA (through the environment)."""

    def __init__(self, bed, k):
        self.bed, self.k = bed, k
        info = bed.layout.client(k)
        self.ns = info["ns"]
        self.addr4, self.addr6 = info["client4"], info["client6"]
        self.gw4, self.gw6 = info["inet4"], info["inet6"]
        self._info = info

    def _create(self):
        L, i, ns = self.bed.layout, self._info, self.ns
        ip("netns", "add", ns)
        self.bed._created_ns.append(ns)
        ip("-n", ns, "link", "set", "lo", "up")
        ip("-n", L.inet_ns, "link", "add", i["if_inet"], "type", "veth", "peer", "name", i["if_client"],
           "netns", ns)
        ip("-n", L.inet_ns, "addr", "add", f"{i['inet4']}/30", "dev", i["if_inet"])
        ip("-n", L.inet_ns, "-6", "addr", "add", f"{i['inet6']}/80", "dev", i["if_inet"], "nodad")
        ip("-n", L.inet_ns, "link", "set", i["if_inet"], "up")
        ip("-n", ns, "addr", "add", f"{i['client4']}/30", "dev", i["if_client"])
        ip("-n", ns, "-6", "addr", "add", f"{i['client6']}/80", "dev", i["if_client"], "nodad")
        ip("-n", ns, "link", "set", i["if_client"], "up")
        ip("-n", ns, "route", "add", str(L.net4), "via", i["inet4"])
        ip("-n", ns, "-6", "route", "add", str(L.net6), "via", i["inet6"])
        etc = f"/etc/netns/{ns}"
        for _ in range(3):   # another bed may rmdir an empty /etc/netns meanwhile
            try:
                os.makedirs(etc, exist_ok=True)
                break
            except FileNotFoundError:
                continue
        with open(f"{etc}/resolv.conf", "w") as f:
            f.write(self.bed.resolv_conf_text)
        with open(f"{etc}/hosts", "w") as f:
            f.write("127.0.0.1 localhost\n::1 localhost\n")

    @property
    def env(self):
        return self.bed.client_env()

    def argv(self, args):
        return ["ip", "netns", "exec", self.ns, *args]

    def run(self, args, *, env=None, timeout=120, check=False, text=True, input=None, cwd=None):
        """Run argv in this netns; returns subprocess.CompletedProcess
        (stdout/stderr captured)."""
        e = self.bed.client_env()
        e.update(env or {})
        r = subprocess.run(self.argv(args), env=e, timeout=timeout, capture_output=True, text=text,
                           input=input, cwd=cwd)
        if check and r.returncode != 0:
            raise AssertionError(f"{args} exited {r.returncode}\nstdout: {r.stdout}\nstderr: {r.stderr}")
        return r

    def popen(self, args, *, env=None, **kw):
        e = self.bed.client_env()
        e.update(env or {})
        return subprocess.Popen(self.argv(args), env=e, **kw)


class SSHInfo:
    def __init__(self, d, user, host_pub, user_pub):
        self.user = user
        self.port = 22
        self.key = os.path.join(d, "user_ed25519")        # private key of the test user
        self.pubkey = user_pub                               # its public key line
        self.host_pubkey = host_pub                          # "ssh-ed25519 AAAA... fakenet-host"
        self.known_hosts = os.path.join(d, "known_hosts")
        self.log = os.path.join(d, "sshd.log")

    def args(self):
        """ssh options for the test key and the bed's known_hosts."""
        return ["-F", "/dev/null", "-i", self.key, "-o", f"UserKnownHostsFile={self.known_hosts}",
                "-o", "StrictHostKeyChecking=yes", "-o", "BatchMode=yes", "-o", "IdentitiesOnly=yes",
                "-o", "ConnectTimeout=10"]

    @property
    def git_ssh_command(self):
        return "ssh " + " ".join(self.args())


class FakeNet:
    def __init__(self, ssh=True, clients=1, blackhole_metadata=False):
        self.want_ssh = ssh and os.path.exists(SSHD)
        self.blackhole_metadata = blackhole_metadata
        self.n_clients = clients
        self.procs = {}
        self.slot = None
        self.dir = None
        self._created_ns = []
        self._lock = SlotLock()
        self.clients = []
        self.ssh = None
        self.barrier_src = None
        self.nft = False
        self.started = False

    # ---- lifecycle -------------------------------------------------------
    def __enter__(self):
        self.start()
        return self

    def __exit__(self, *exc):
        self.stop()

    def start(self):
        t0 = time.time()
        try:
            self._start()
        except BaseException:
            self.stop()
            raise
        self.started = True
        self.startup_seconds = time.time() - t0
        return self

    def _start(self):
        s = self._lock.acquire()
        self.layout = L = layout.Layout(s)
        self.slot = s
        cleanup_slot(s)
        self.netns = L.inet_ns
        self.dir = tempfile.mkdtemp(prefix=f"wfn{s}-")
        os.chmod(self.dir, 0o755)      # the ssh test user reads its keys and repo below
        self._lock.write_state({"pid": os.getpid(), "dir": self.dir, "slot": s, "netns": L.inet_ns})
        self.logdir = os.path.join(self.dir, "logs")
        os.makedirs(self.logdir)
        self.log_paths = {n: os.path.join(self.logdir, f"{n}.log") for n in SERVERS}
        self.dns, self.dns6 = L.dns4, L.dns6
        self.resolv_conf_text = (f"nameserver {L.dns4}\nnameserver {L.dns6}\n"
                                 "options timeout:2 attempts:2\n")
        self.resolv_conf = os.path.join(self.dir, "resolv.conf")
        with open(self.resolv_conf, "w") as f:
            f.write(self.resolv_conf_text)
        self._make_pki()
        self._make_content()
        self._make_netns()
        self._start_servers()

    def stop(self):
        """Stop servers, remove netns/veth/files, release the slot. Safe to
        call twice and after a failed start."""
        for name, p in list(self.procs.items()):
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        deadline = time.time() + 3
        for name, p in list(self.procs.items()):
            try:
                p.wait(max(0.05, deadline - time.time()))
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        self.procs.clear()
        if self.slot is not None:
            for ns in reversed(self._created_ns):
                _kill_netns_pids(ns)
            if getattr(self, "_blackholed", False):
                _blackholes(self.slot, add=False)
                self._blackholed = False
            if os.path.exists(f"/sys/class/net/{self.layout.host_if}"):
                ip("link", "del", self.layout.host_if, check=False)
            for ns in reversed(self._created_ns):
                ip("netns", "del", ns, check=False)
                shutil.rmtree(f"/etc/netns/{ns}", ignore_errors=True)
            self._created_ns.clear()
            self.clients.clear()
            try:
                os.rmdir("/etc/netns")
            except OSError:
                pass
        if self.dir:
            shutil.rmtree(self.dir, ignore_errors=True)
            self.dir = None
        self._lock.release()
        self.started = False

    # ---- setup -----------------------------------------------------------
    def _make_pki(self):
        d = os.path.join(self.dir, "pki")
        os.makedirs(d)
        L = self.layout
        ca, ca_key, self.ca_pem = pki.make_ca(d, f"fakenet-test-ca-{self.slot}")
        self.ca_key_pem = self.ca_pem[:-4] + ".key"
        self._ca = (ca, ca_key, d)
        names = sorted(set(layout.HOSTS) - {"badcert.example.test", "wrongname.example.test",
                                            "expired.example.test"})
        names += [f"*.{z}" for z in layout.WILDCARDS] + ["multi.example.test", "mixed.example.test",
                                                         "v6only.example.test", "v4only.example.test",
                                                         "alias.example.test"]
        ips = [L.addr(n, 4) for n in layout.HOSTS] + [L.addr(n, 6) for n in layout.HOSTS]
        default = pki.make_leaf(d, "default", ca, ca_key, names, ips)
        bad_ca, bad_key, self.untrusted_ca_pem = pki.make_ca(d, "fakenet-untrusted-ca")
        self.certs = {
            "default": default,
            "badcert.example.test": pki.make_leaf(d, "badcert", bad_ca, bad_key, ["badcert.example.test"]),
            "wrongname.example.test": pki.make_leaf(d, "wrongname", ca, ca_key, ["other.invalid"]),
            "expired.example.test": pki.make_leaf(d, "expired", ca, ca_key, ["expired.example.test"],
                                                  expired=True),
        }
        self.certdir_empty = os.path.join(d, "empty-certdir")
        os.makedirs(self.certdir_empty)

    def issue_cert(self, names, ips=(), expired=False):
        """A new server certificate signed by the test CA for `names`
        (DNS SANs) and `ips`; returns (crt_path, key_path)."""
        ca, ca_key, d = self._ca
        stem = f"issued-{len(os.listdir(d))}"
        return pki.make_leaf(d, stem, ca, ca_key, list(names), ips, expired=expired)

    def _make_content(self):
        d = os.path.join(self.dir, "content")
        os.makedirs(d)
        self.pypi = artifacts.build_pypi(d, "files.pythonhosted.org")
        self.pypi["index_url"] = "https://pypi.org/simple"
        self.apt = artifacts.build_apt(d)
        self.apt["sources_line"] = f"deb [trusted=yes] http://deb.debian.org/debian {self.apt['suite']} main"
        self.git = artifacts.build_git(d, uid=SSH_UID if self.want_ssh else None)
        self.git["https_url"] = "https://github.com/example/repo.git"
        self.git["ssh_url"] = "git@github.com:example/repo.git"
        gitserver.setup(self)
        # the same repository as https://internal-api.example.com/v1/repo.git
        # (a path the credential tests' rules match)
        os.makedirs(os.path.join(self.git["root"], "v1"), exist_ok=True)
        os.symlink(os.path.join(self.git["root"], "example/repo.git"),
                   os.path.join(self.git["root"], "v1/repo.git"), target_is_directory=True)
        self.git["v1_url"] = "https://internal-api.example.com/v1/repo.git"
        self.zone_file = os.path.join(self.dir, "zone.json")
        self._zone = self.layout.zone()
        self._write_zone()

    def _make_netns(self):
        L = self.layout
        h4, i4, p4 = L.host_link4
        h6, i6, p6 = L.host_link6
        ip("netns", "add", L.inet_ns)
        self._created_ns.append(L.inet_ns)
        ip("-n", L.inet_ns, "link", "set", "lo", "up")
        self.nsexec(["sysctl", "-qw", "net.ipv4.ip_forward=0", "net.ipv6.conf.all.forwarding=0"])
        ip("link", "add", L.host_if, "type", "veth", "peer", "name", L.inet_if, "netns", L.inet_ns)
        ip("addr", "add", f"{h4}/{p4}", "dev", L.host_if)
        ip("-6", "addr", "add", f"{h6}/{p6}", "dev", L.host_if, "nodad")
        # a second host address, the source of settle()'s probes (filtered from the logs)
        self.barrier_src = f"{h6.rsplit('::', 1)[0]}::b"
        ip("-6", "addr", "add", f"{self.barrier_src}/{p6}", "dev", L.host_if, "nodad")
        ip("link", "set", L.host_if, "up")
        ip("-n", L.inet_ns, "addr", "add", f"{i4}/{p4}", "dev", L.inet_if)
        ip("-n", L.inet_ns, "-6", "addr", "add", f"{i6}/{p6}", "dev", L.inet_if, "nodad")
        ip("-n", L.inet_ns, "link", "set", L.inet_if, "up")
        # AnyIP: every address of the bed's ranges is local to the internet netns
        ip("-n", L.inet_ns, "route", "add", "local", str(L.net4), "dev", "lo")
        ip("-n", L.inet_ns, "-6", "route", "add", "local", str(L.net6), "dev", "lo")
        ip("-n", L.inet_ns, "-6", "addr", "add", f"{L.dns6}/128", "dev", "lo", "nodad")  # v6 bind needs it
        # the host reaches exactly the bed's ranges through the veth
        ip("route", "add", str(L.net4), "via", i4, "dev", L.host_if)
        ip("-6", "route", "add", str(L.net6), "via", i6, "dev", L.host_if)
        self._blackholed = True
        _blackholes(self.slot, add=True, metadata=self.blackhole_metadata)
        self._load_nft()
        for k in range(1, self.n_clients + 1):
            self.add_client()

    def _load_nft(self):
        """Packet counters at the internet netns' door (nftables, prerouting):
        TCP connection attempts (SYN without ACK: late segments of older
        connections don't count), every UDP, ICMP, ICMPv6 (less neighbour
        discovery and MLD) and other IP packet, except settle()'s probes;
        so a test can see that nothing at all arrived, also at ports no
        server listens on. Without nft the counters are None."""
        self.nft = False
        if not shutil.which("nft"):
            return
        rules = f"""table inet fakenet {{
    counter c_tcp {{ }}
    counter c_udp {{ }}
    counter c_icmp {{ }}
    counter c_icmpv6 {{ }}
    counter c_other {{ }}
    chain pre {{
        type filter hook prerouting priority -300; policy accept;
        iifname "lo" return
        ip6 saddr {self.barrier_src} return
        tcp flags & (syn | ack) == syn counter name "c_tcp" return
        meta l4proto tcp return
        meta l4proto udp counter name "c_udp" return
        meta l4proto icmp counter name "c_icmp" return
        icmpv6 type {{ nd-router-solicit, nd-router-advert, nd-neighbor-solicit, nd-neighbor-advert, nd-redirect, mld-listener-query, mld-listener-report, mld2-listener-report }} return
        meta l4proto ipv6-icmp counter name "c_icmpv6" return
        counter name "c_other"
    }}
}}
"""
        path = os.path.join(self.dir, "fakenet.nft")
        with open(path, "w") as f:
            f.write(rules)
        self.nsexec(["nft", "-f", path])
        self.nft = True

    def packet_counts(self):
        """{"tcp" (SYNs), "udp", "icmp", "icmpv6", "other": packets that
        reached the bed so far}, or None without nftables."""
        if not self.nft:
            return None
        out = json.loads(self.nsexec(["nft", "-j", "list", "counters", "table", "inet", "fakenet"]).stdout)
        return {o["counter"]["name"][2:]: o["counter"]["packets"] for o in out["nftables"] if "counter" in o}

    def packets_since(self, mark):
        """Packets per protocol that reached the bed since `mark` (a Mark)."""
        now = self.packet_counts()
        if now is None or mark.packets is None:
            return None
        return {k: now[k] - mark.packets.get(k, 0) for k in now}

    def add_client(self):
        """Create one more client netns (cleaned up by stop())."""
        c = Client(self, len(self.clients) + 1)
        c._create()
        self.clients.append(c)
        return c

    @property
    def client(self):
        return self.clients[0]

    def nsexec(self, args, **kw):
        """Run argv in the internet netns (network only, host mounts)."""
        return subprocess.run(["nsenter", f"--net=/run/netns/{self.netns}", "--", *args],
                              capture_output=True, text=True, check=True, **kw)

    def _spawn(self, name, argv):
        out = open(os.path.join(self.logdir, f"{name}.out"), "wb")
        env = dict(os.environ, PYTHONPATH=PKG_PARENT, PYTHONDONTWRITEBYTECODE="1")
        p = subprocess.Popen(["setpriv", "--pdeathsig", "KILL", "nsenter", f"--net=/run/netns/{self.netns}",
                              "--", *argv], stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                             env=env, close_fds=True)
        out.close()
        self.procs[name] = p
        return p

    def _py_server(self, name, module, cfg):
        path = os.path.join(self.dir, f"{name}.json")
        with open(path, "w") as f:
            json.dump(cfg, f)
        return self._spawn(name, [sys.executable, "-m", f"fakenet.{module}", path])

    def _start_servers(self):
        L = self.layout
        P = layout.PORTS
        self._py_server("dns", "dnsserver", {"log": self.log_paths["dns"], "zone_file": self.zone_file,
                                             "listen": [[L.dns4, P["dns"]], [L.dns6, P["dns"]]]})
        c = os.path.join(self.dir, "content")
        self._py_server("web", "web", {
            "log": self.log_paths["web"],
            "ports": {"http": [P["http"]], "https": [P["https"], P["https_alt"]]},
            "certs": self.certs,
            "static": {"pypi.org": [["/simple/", self.pypi["simple"]]],
                       "files.pythonhosted.org": [["/packages/", self.pypi["files"]]],
                       "deb.debian.org": [["/debian/", self.apt["root"]]]},
            "git_root": self.git["root"], "git_hosts": ["github.com", "internal-api.example.com"],
            "quiet": {"internal-api.example.com": ["/v1/private/"]}, **gitserver.web_config(self),
        })
        del c
        self._py_server("tcp_echo", "echo", {"mode": "tcp", "log": self.log_paths["tcp_echo"],
                                             "ports": P["tcp_echo"]})
        self._py_server("udp_echo", "echo", {"mode": "udp", "log": self.log_paths["udp_echo"],
                                             "ports": P["udp_echo"]})
        if self.want_ssh:
            self._start_sshd()
        gitserver.start_daemon(self)
        deadline = time.time() + 15
        gitserver.wait_daemon(self, deadline)
        for name in ("dns", "web", "tcp_echo", "udp_echo"):
            while not any(e["event"] == "ready" for e in read_events(self.log_paths[name])[0]):
                self._check_alive(name)
                if time.time() > deadline:
                    raise RuntimeError(f"fakenet: {name} not ready after 15 s")
                time.sleep(0.01)
        if self.want_ssh:
            while "LISTEN" not in self.nsexec(["ss", "-Hltn", "sport", "=", ":22"]).stdout and \
                    not self.nsexec(["ss", "-Hltn", "sport", "=", ":22"]).stdout.strip():
                self._check_alive("ssh")
                if time.time() > deadline:
                    raise RuntimeError("fakenet: sshd not listening after 15 s")
                time.sleep(0.01)

    def _check_alive(self, name):
        p = self.procs[name]
        if p.poll() is not None:
            out = open(os.path.join(self.logdir, f"{name}.out"), errors="replace").read()
            raise RuntimeError(f"fakenet: {name} exited {p.returncode}:\n{out[-3000:]}")

    def _start_sshd(self):
        d = os.path.join(self.dir, "ssh")
        os.makedirs(d)
        host_pub = pki.make_ssh_key(os.path.join(d, "host_ed25519"), "fakenet-host")
        user_pub = pki.make_ssh_key(os.path.join(d, "user_ed25519"), "fakenet-user")
        ak = os.path.join(d, "authorized_keys")
        with open(ak, "w") as f:
            f.write(user_pub + "\n")
        names = []
        for n in layout.HOSTS:
            names += [n, self.layout.addr(n, 4), self.layout.addr(n, 6)]
        with open(os.path.join(d, "known_hosts"), "w") as f:
            f.write(",".join(names) + " " + host_pub + "\n")
        passwd = open("/etc/passwd").read()
        group = open("/etc/group").read()
        if not any(line.startswith("sshd:") for line in passwd.splitlines()):
            passwd += "sshd:x:60998:65534::/run/sshd:/usr/sbin/nologin\n"
        passwd += f"git:x:{SSH_UID}:{SSH_UID}:fakenet git:{self.git['root']}:/bin/sh\n"
        group += f"git:x:{SSH_UID}:\n"
        for n, text in (("passwd", passwd), ("group", group)):
            with open(os.path.join(d, n), "w") as f:
                f.write(text)
        cfg = os.path.join(d, "sshd_config")
        with open(cfg, "w") as f:
            f.write(f"""Port 22
ListenAddress 0.0.0.0
ListenAddress ::
HostKey {d}/host_ed25519
AuthorizedKeysFile {ak}
AuthorizedKeysCommand none
StrictModes no
PubkeyAuthentication yes
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
PermitRootLogin no
AllowUsers git
PidFile none
LogLevel VERBOSE
PrintMotd no
X11Forwarding no
AllowTcpForwarding no
MaxStartups 100:30:200
SetEnv GIT_CONFIG_NOSYSTEM=1 GIT_CONFIG_COUNT=1 GIT_CONFIG_KEY_0=safe.directory GIT_CONFIG_VALUE_0=*
""")
        script = (f"mount -t tmpfs -o mode=755 fakenet-run /run && mkdir -m 755 /run/sshd && "
                  f"mount --bind {d}/passwd /etc/passwd && mount --bind {d}/group /etc/group && "
                  f"exec {SSHD} -D -e -f {cfg}")
        self._spawn("ssh", ["unshare", "-m", "--propagation", "private", "--", "sh", "-c", script])
        self.ssh = SSHInfo(d, "git", host_pub, user_pub)
        self.ssh.log = os.path.join(self.logdir, "ssh.out")
        self.log_paths["ssh"] = self.ssh.log

    # ---- addresses and environment ---------------------------------------
    def addr(self, name, family=4):
        """The bed address of a named server (layout.HOSTS), v4 or v6."""
        return self.layout.addr(name, family)

    @property
    def ranges(self):
        """The CIDRs the host routes into the bed."""
        return [str(self.layout.net4), str(self.layout.net6)]

    def client_env(self, base=None):
        """An environment for client processes: proxies and the host's CA
        and pip settings removed, the test CA set for OpenSSL, curl, git,
        pip, requests and node."""
        base = dict(os.environ if base is None else base)
        env = {k: v for k, v in base.items()
               if k not in SCRUB and k.lower() not in SCRUB and not k.startswith(SCRUB_PREFIXES)}
        ca = self.ca_pem
        env.update(SSL_CERT_FILE=ca, SSL_CERT_DIR=self.certdir_empty, CURL_CA_BUNDLE=ca,
                   REQUESTS_CA_BUNDLE=ca, GIT_SSL_CAINFO=ca, NODE_EXTRA_CA_CERTS=ca, PIP_CERT=ca,
                   PIP_CONFIG_FILE=os.devnull, PIP_DISABLE_PIP_VERSION_CHECK="1", PIP_NO_INPUT="1",
                   PIP_NO_CACHE_DIR="1", GIT_CONFIG_NOSYSTEM="1", GIT_CONFIG_GLOBAL=os.devnull,
                   GIT_TERMINAL_PROMPT="0")
        return env

    def apt_argv(self, root, *args):
        """apt-get confined to `root` (a temp dir): its own sources.list
        naming the bed's repository ([trusted=yes]: unsigned), own state,
        cache, dpkg database and install root; the host's apt and dpkg
        configuration are neither read nor written. Returns (argv, env)."""
        for sub in ("etc/apt/apt.conf.d", "etc/apt/preferences.d", "etc/apt/sources.list.d",
                    "var/lib/apt/lists/partial", "var/cache/apt/archives/partial", "var/lib/dpkg/info",
                    "var/lib/dpkg/updates", "var/lib/dpkg/triggers", "var/log/apt"):
            os.makedirs(os.path.join(root, sub), exist_ok=True)
        for f in ("var/lib/dpkg/status", "var/lib/dpkg/available"):
            open(os.path.join(root, f), "a").close()
        with open(os.path.join(root, "etc/apt/sources.list"), "w") as f:
            f.write(self.apt["sources_line"] + "\n")
        conf = os.path.join(root, "etc/apt/apt.conf")
        with open(conf, "w") as f:
            f.write(f'''Dir::Etc::Main "/dev/null";
Dir::Etc::Parts "{root}/etc/apt/apt.conf.d";
Dir::Etc::SourceList "{root}/etc/apt/sources.list";
Dir::Etc::SourceParts "{root}/etc/apt/sources.list.d";
Dir::Etc::Preferences "{root}/etc/apt/preferences";
Dir::Etc::PreferencesParts "{root}/etc/apt/preferences.d";
Dir::State "{root}/var/lib/apt";
Dir::State::status "{root}/var/lib/dpkg/status";
Dir::Cache "{root}/var/cache/apt";
Dir::Log "{root}/var/log/apt";
Debug::NoLocking "true";
APT::Sandbox::User "root";
APT::Install-Recommends "false";
Acquire::Languages "none";
Acquire::Retries "0";
DPkg::Options {{ "--root={root}"; "--admindir={root}/var/lib/dpkg"; "--force-not-root"; "--force-script-chrootless"; "--log={root}/var/log/dpkg.log"; }};
DPkg::Pre-Install-Pkgs "";
DPkg::Post-Invoke "";
DPkg::Pre-Invoke "";
''')
        env = {"APT_CONFIG": conf, "DEBIAN_FRONTEND": "noninteractive"}
        return ["apt-get", "-q", "-y", *args], env

    # ---- DNS zone --------------------------------------------------------
    def _write_zone(self):
        tmp = self.zone_file + ".tmp"
        with open(tmp, "w") as f:
            json.dump(self._zone, f)
        os.replace(tmp, self.zone_file)

    def add_record(self, name, rtype, *values):
        """Add (or replace) the RRset name/rtype, e.g. add_record("evil.test",
        "A", "198.18.1.99"). The DNS server picks the change up at once."""
        self._zone["records"].setdefault(name.lower().rstrip("."), {})[rtype] = list(values)
        self._write_zone()

    def remove_record(self, name, rtype=None):
        key = name.lower().rstrip(".")
        rrs = self._zone["records"].get(key, {})
        if rtype is not None:
            rrs.pop(rtype, None)
        if rtype is None or not rrs:
            self._zone["records"].pop(key, None)
        self._write_zone()

    # ---- logs ------------------------------------------------------------
    def mark(self):
        """A Mark: pass it as since= to the log readers. Settles first, so
        that what reached a server before the call (a request whose close
        event is still being written) is not counted after the mark."""
        self.settle()
        return Mark({n: os.path.getsize(p) if os.path.exists(p) else 0 for n, p in self.log_paths.items()},
                    time.time(), self.packet_counts())

    def events(self, server, since=None, barrier=False):
        """Events of one server ("dns", "web", "tcp_echo", "udp_echo",
        "ssh") after `since` (a Mark, a unix time, or None for all)."""
        path = self.log_paths[server]
        off = since.offsets.get(server, 0) if isinstance(since, Mark) else 0
        if server == "ssh":
            evs = self._ssh_events(path, off)
        else:
            evs = read_events(path, off)[0]
        if isinstance(since, (int, float)):
            evs = [e for e in evs if e.get("t", 0) >= since]
        if isinstance(since, Mark):
            # A request (or a connection's close) is logged when it ends,
            # by its own server thread: one that began before the mark can
            # be written after it (mark()'s barrier ran on another thread;
            # seen under load: a GET answered before the mark, logged
            # after). Such an event is not traffic since the mark.
            evs = [e for e in evs if not (e["event"] in ("request", "close") and "seconds" in e
                                          and e.get("t", 0) - e["seconds"] < since.t)]
        if not barrier:
            evs = [e for e in evs if not e.get("barrier") and e["event"] not in ("ready", "stopped")
                   and e.get("client") != self.barrier_src]
        return evs

    @staticmethod
    def _ssh_events(path, off):
        try:
            with open(path, "rb") as f:
                f.seek(off)
                data = f.read()
        except FileNotFoundError:
            return []
        out = []
        for line in data.decode(errors="replace").splitlines():
            w = line.split()
            if line.startswith("Connection from ") and len(w) >= 9:
                out.append({"event": "conn", "client": w[2], "client_port": int(w[4]), "local": w[6],
                            "line": line})
            elif line.startswith("Accepted publickey for ") and len(w) >= 6:
                out.append({"event": "auth", "user": w[3], "client": w[5], "line": line})
            elif line:
                out.append({"event": "log", "line": line})
        return out

    def dns_queries(self, since=None, name=None, qtype=None):
        q = [e for e in self.events("dns", since) if e["event"] == "query"]
        if name is not None:
            q = [e for e in q if e["qname"] == name.lower().rstrip(".")]
        if qtype is not None:
            q = [e for e in q if e["qtype"] == qtype]
        return q

    def http_requests(self, since=None, host=None, path=None):
        r = [e for e in self.events("web", since) if e["event"] == "request"]
        if host is not None:
            r = [e for e in r if e["hostname"] == host.lower()]
        if path is not None:
            r = [e for e in r if e["path"] == path]
        return r

    def connections(self, server, since=None):
        """Connection-level events: web "conn"/"tls_error", tcp_echo "conn",
        udp_echo "packet", ssh "conn"."""
        kinds = {"web": ("conn", "tls_error"), "tcp_echo": ("conn",), "udp_echo": ("packet",),
                 "ssh": ("conn",), "dns": ("query", "bad_query")}[server]
        return [e for e in self.events(server, since) if e["event"] in kinds]

    def seen(self, since, servers=None):
        """Everything any server saw after `since` (barriers excluded)."""
        out = []
        for s in servers or self.log_paths:
            out += self.events(s, since)
        return out

    @staticmethod
    def _barrier_conn(addr, port, src, timeout, deadline):
        """A barrier probe's TCP connection. A connect whose SYNs all went
        unanswered (seen once under a full CI run's load) is tried again
        until the deadline; any other error, or the deadline, raises."""
        while True:
            try:
                return socket.create_connection((addr, port), timeout=timeout, source_address=src)
            except TimeoutError:
                if time.time() + timeout > deadline:
                    raise

    def settle(self, timeout=5.0):
        """Barrier: probe dns/web/tcp_echo/udp_echo from the host and wait
        until each probe is in its log, so events of traffic that reached
        a server before this call are logged when it returns."""
        tok = uuid.uuid4().hex
        L = self.layout
        start = {n: os.path.getsize(self.log_paths[n]) for n in ("dns", "web", "tcp_echo", "udp_echo")}
        addr = L.addr("example.test", 6)
        src = (self.barrier_src, 0)
        # dns: a query for <tok>.barrier.fakenet.invalid
        qname = f"{tok}.barrier.fakenet.invalid"
        pkt = struct.pack("!HHHHHH", 0x4242, 0x0100, 1, 0, 0, 0) + b"".join(
            bytes([len(p)]) + p.encode() for p in qname.split(".")) + b"\0" + struct.pack("!HH", 1, 1)
        with socket.socket(socket.AF_INET6, socket.SOCK_DGRAM) as u:
            u.bind(src)
            u.settimeout(timeout)
            u.sendto(pkt, (self.dns6, 53))
            u.recv(512)
            u.sendto(b"FAKENET-BARRIER " + tok.encode(), (addr, 7))
            u.recv(512)
        probes_deadline = time.time() + 3 * timeout
        with self._barrier_conn(addr, 80, src, timeout, probes_deadline) as c:
            c.sendall(f"GET /__fakenet/barrier/{tok} HTTP/1.1\r\nHost: barrier\r\nConnection: close\r\n\r\n"
                      .encode())
            while c.recv(4096):
                pass
        with self._barrier_conn(addr, 7, src, timeout, probes_deadline) as c:
            c.sendall(b"FAKENET-BARRIER " + tok.encode())
            c.recv(512)
        deadline = time.time() + timeout
        for n, off in start.items():
            while not any(tok in json.dumps(e) and e["event"] in ("query", "request", "close", "packet")
                          for e in read_events(self.log_paths[n], off)[0]):
                if time.time() > deadline:
                    raise TimeoutError(f"fakenet: barrier not seen by {n}")
                time.sleep(0.005)

    def assert_nothing_seen(self, since, servers=None):
        """settle(), then fail if any server saw anything after `since`,
        or (since a Mark, all servers) any packet reached the bed."""
        self.settle()
        seen = self.seen(since, servers)
        assert not seen, f"the fake internet saw traffic: {json.dumps(seen, indent=1)[:4000]}"
        if isinstance(since, Mark) and servers is None:
            pk = self.packets_since(since)
            assert not pk or not any(pk.values()), f"packets reached the fake internet: {pk}"
