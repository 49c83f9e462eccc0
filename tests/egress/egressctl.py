"""A small Python client of the warren-egress control protocol
(src/egress/egress-proto.h) and of the policy wire form
(src/net/policy.h, "WNP1"). Used by the tests and bench/net-proxy.py; it
prototypes what warrend's side will do.

Every message is one SOCK_SEQPACKET datagram: header
  u32 magic 0x57454731, u32 type, u32 len, u32 reserved=0, u64 id
then len payload bytes, integers in host byte order (little-endian here).
"""
import ipaddress
import queue
import socket
import struct
import threading
import time

MAGIC = 0x57454731
HDR = struct.Struct("<IIIIQ")
POLICY_SET, POLICY_DEL, PING = 1, 2, 3
READY, RESULT, PONG, EVENT = 0x81, 0x82, 0x83, 0x84
OPEN, ENFORCE, LEARN = 1, 2, 3
MSG_MAX = (1 << 20) + 4096

ADDR = struct.Struct("<B3x16s")
SET = struct.Struct("<64sIIII")
RESULT_S = struct.Struct("<iI256s")
PONG_S = struct.Struct("<IIQ")
READY_S = struct.Struct("<IIII")
EVENT_S = struct.Struct("<QQQQBBBBHH20s20s64s256s256s320s96s")
assert EVENT_S.size == 1072


def encode_addr(a):
    ip = ipaddress.ip_address(a)
    if ip.version == 4:
        return ADDR.pack(4, ip.packed + bytes(12))
    return ADDR.pack(6, ip.packed)


def decode_addr(b):
    fam, raw = ADDR.unpack(b)
    if fam == 4:
        return str(ipaddress.IPv4Address(raw[:4]))
    if fam == 6:
        return str(ipaddress.IPv6Address(raw))
    return None


def encode_policy(hosts=(), allowed=(), denied=(), learn=False):
    """The policy wire form: hosts are canonical patterns; routes are
    (cidr, [(lo, hi), ...]) or a bare cidr string."""
    out = bytearray(b"WNP1")
    out += struct.pack("<HHHHHH", 1, 1 if learn else 0, len(hosts), len(allowed), len(denied), 0)
    for h in hosts:
        b = h.encode()
        out += struct.pack("<B", len(b)) + b
    for r in list(allowed) + list(denied):
        cidr, ports = (r, []) if isinstance(r, str) else r
        net = ipaddress.ip_network(cidr)
        out += struct.pack("<BBH", net.version, net.prefixlen, len(ports))
        out += net.network_address.packed
        for lo, hi in ports:
            out += struct.pack("<HH", lo, hi)
    return bytes(out)


def _cstr(b):
    return b.split(b"\0", 1)[0].decode("ascii", "replace")


def decode_event(p):
    (t, up, down, dur, kind, verdict, mode, r0, port, r1, dialed, source, sandbox, sni, host,
     rule, reason) = EVENT_S.unpack(p)
    return {
        "time_ns": t, "bytes_up": up, "bytes_down": down, "duration_ns": dur,
        "kind": {1: "tcp", 2: "dns"}.get(kind, kind), "verdict": "allow" if verdict else "deny",
        "mode": mode, "port": port, "dialed": decode_addr(dialed), "source": decode_addr(source),
        "sandbox": _cstr(sandbox), "sni": _cstr(sni), "host": _cstr(host), "rule": _cstr(rule),
        "reason": _cstr(reason), "reserved": (r0, r1),
    }


class Ctl:
    """The warrend end of the control socket. `child` is the end to pass to
    warren-egress (as an inheritable fd); events are collected by a reader
    thread into self.events (a list of dicts)."""

    def __init__(self):
        self.sock, self.child = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4 << 20)
        self.child.set_inheritable(True)
        self.events = []
        self.replies = queue.Queue()
        self.ready = threading.Event()
        self.closed = threading.Event()
        self._id = 0
        self._lock = threading.Lock()
        self._t = threading.Thread(target=self._reader, daemon=True)
        self._t.start()

    def _reader(self):
        while True:
            try:
                m = self.sock.recv(65536)
            except OSError:
                break
            if not m:
                break
            magic, typ, ln, res, mid = HDR.unpack_from(m)
            assert magic == MAGIC and res == 0 and ln == len(m) - HDR.size, m[:24]
            p = m[HDR.size:]
            if typ == EVENT:
                ev = decode_event(p)
                ev["seq"] = mid
                with self._lock:
                    self.events.append(ev)
            elif typ == READY:
                self.ready_info = READY_S.unpack(p)
                self.ready.set()
            elif typ == RESULT:
                err, _, msg = RESULT_S.unpack(p)
                self.replies.put((mid, "result", err, _cstr(msg)))
            elif typ == PONG:
                self.replies.put((mid, "pong") + PONG_S.unpack(p))
        self.closed.set()

    def _next_id(self):
        self._id += 1
        return self._id

    def send_raw(self, data):
        self.sock.send(data)

    def request(self, typ, payload=b"", timeout=10):
        mid = self._next_id()
        self.sock.send(HDR.pack(MAGIC, typ, len(payload), 0, mid) + payload)
        return self.wait_reply(mid, timeout)

    def wait_reply(self, mid, timeout=10):
        deadline = time.time() + timeout
        while True:
            r = self.replies.get(timeout=max(0.01, deadline - time.time()))
            if r[0] == mid:
                return r

    def policy_set(self, sandbox, addrs, mode, policy=None, check=True):
        pol = policy or b""
        payload = SET.pack(sandbox.encode(), mode, len(addrs), len(pol), 0)
        payload += b"".join(encode_addr(a) for a in addrs) + pol
        r = self.request(POLICY_SET, payload)
        if check:
            assert r[2] == 0, r
        return r

    def policy_del(self, sandbox):
        return self.request(POLICY_DEL, struct.pack("<64s", sandbox.encode()))

    def ping(self):
        return self.request(PING)

    def mark(self):
        with self._lock:
            return len(self.events)

    def events_since(self, mark, **match):
        with self._lock:
            evs = list(self.events[mark:])
        return [e for e in evs if all(e.get(k) == v for k, v in match.items())]

    def wait_event(self, mark, timeout=10, **match):
        deadline = time.time() + timeout
        while time.time() < deadline:
            evs = self.events_since(mark, **match)
            if evs:
                return evs[0]
            time.sleep(0.02)
        raise AssertionError(f"no event {match} since {mark}: {self.events_since(mark)}")

    def close(self):
        # shutdown first: the reader thread's blocked recv holds the file,
        # so close() alone would not let the peer see the end
        for s in (self.sock, self.child):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            try:
                s.close()
            except OSError:
                pass
