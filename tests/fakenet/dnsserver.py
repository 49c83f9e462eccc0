"""The bed's authoritative DNS server (UDP and TCP), on dnslib.

    python3 -m fakenet.dnsserver CONFIG.json

CONFIG: {"log": path, "zone_file": path, "listen": [[addr, port], ...]}.
The zone file (layout.Layout.zone() as JSON, plus whatever the bed adds
with FakeNet.add_record) is re-read when its mtime changes.
Every query is logged: client, proto, qname, qtype, rcode, answers.
"""
import ipaddress
import json
import os
import socket
import struct
import sys
import threading
import time

from dnslib import (AAAA, CNAME, NS, QTYPE, RCODE, RR, SOA, TXT, A, DNSRecord)

from .srvlog import EventLog, load_config, serve_forever_until_signal

RDATA = {"A": A, "AAAA": lambda v: AAAA(list(ipaddress.IPv6Address(v).packed)), "CNAME": CNAME, "NS": NS,
         "TXT": lambda v: TXT(v if isinstance(v, list) else [v])}
BARRIER_SUFFIX = ".barrier.fakenet.invalid"


class Zone:
    def __init__(self, path):
        self.path = path
        self.mtime = None
        self.data = {}
        self.lock = threading.Lock()
        self.counters = {}

    def current(self):
        try:
            st = os.stat(self.path)
        except FileNotFoundError:
            return self.data
        # the bed replaces the file (rename): a new inode, mtime or size is a change
        m = (st.st_ino, st.st_mtime_ns, st.st_size)
        if m != self.mtime:
            with open(self.path) as f:
                self.data = json.load(f)
            self.mtime = m
        return self.data

    def _count(self, key):
        with self.lock:
            n = self.counters.get(key, 0)
            self.counters[key] = n + 1
            return n

    def resolve(self, name, qtype):
        """-> (rcode, [(owner, type, value, ttl)]) or None to drop."""
        z = self.current()
        if name in z.get("drop", ()):
            return None
        if name in z.get("servfail", ()):
            return "SERVFAIL", []
        for table, mode in (("rebind", "once"), ("flip", "alternate")):
            for suffix, rrs in z.get(table, {}).items():
                if name.endswith("." + suffix):
                    if qtype not in rrs:
                        return "NOERROR", []
                    n = self._count((name, qtype))
                    vals = rrs[qtype]
                    v = vals[0] if (n == 0 if mode == "once" else n % 2 == 0) else vals[1]
                    return "NOERROR", [(name, qtype, v, 0)]
        return self._lookup(z, name, qtype, 0)

    def _lookup(self, z, name, qtype, depth):
        recs = z.get("records", {})
        rrset = recs.get(name)
        if rrset is None:
            for zone_name, wrrs in z.get("wildcards", {}).items():
                if name.endswith("." + zone_name):
                    rrset = wrrs
                    break
        if rrset is None:
            return "NXDOMAIN", []
        out = []
        types = [qtype] if qtype != "ANY" else list(rrset)
        for t in types:
            for v in rrset.get(t, []):
                out.append((name, t, v, 60))
        if not out and "CNAME" in rrset and depth < 8:
            target = rrset["CNAME"][0].rstrip(".").lower()
            rcode, more = self._lookup(z, target, qtype, depth + 1)
            return rcode, [(name, "CNAME", rrset["CNAME"][0], 60)] + more
        return "NOERROR", out


class Server:
    def __init__(self, cfg):
        self.log = EventLog(cfg["log"], "dns")
        self.zone = Zone(cfg["zone_file"])
        self.listen = [tuple(x) for x in cfg["listen"]]

    def answer(self, data, proto, client, local):
        """The reply to one query (None: send nothing). Never raises: a bug
        here answers SERVFAIL and is logged, the server keeps serving."""
        try:
            return self._answer(data, proto, client, local)
        except Exception as e:  # noqa: BLE001
            self.log.log("server_error", proto=proto, client=client[0], error=repr(e))
            try:
                reply = DNSRecord.parse(data).reply()
                reply.header.rcode = RCODE.SERVFAIL
                return reply
            except Exception:  # noqa: BLE001
                return None

    def _answer(self, data, proto, client, local):
        try:
            req = DNSRecord.parse(data)
        except Exception as e:  # noqa: BLE001 - any garbage is logged and dropped
            self.log.log("bad_query", proto=proto, client=client[0], error=str(e), bytes=len(data))
            return None
        reply = req.reply(ra=1, aa=1)
        opt = [r for r in req.ar if r.rtype == QTYPE.OPT]
        reply.udp_limit = max(512, opt[0].rclass) if opt else 512
        if not req.questions:
            reply.header.rcode = RCODE.FORMERR
            return reply
        q = req.questions[0]
        qname = str(q.qname).rstrip(".").lower()
        qtype = QTYPE.get(q.qtype, str(q.qtype))
        if qname.endswith(BARRIER_SUFFIX):
            self.log.log("query", barrier=True, proto=proto, client=client[0], qname=qname, qtype=qtype)
            reply.header.rcode = RCODE.NXDOMAIN
            return reply
        res = self.zone.resolve(qname, qtype)
        entry = dict(proto=proto, client=client[0], client_port=client[1], local=local,
                     qname=qname, qtype=qtype, id=req.header.id)
        if res is None:
            self.log.log("query", rcode="DROPPED", answers=[], **entry)
            return None
        rcode, answers = res
        for owner, t, v, ttl in answers:
            reply.add_answer(RR(owner, getattr(QTYPE, t), rdata=RDATA[t](v), ttl=ttl))
        reply.header.rcode = getattr(RCODE, rcode)
        if rcode in ("NXDOMAIN", "NOERROR") and not answers:
            reply.add_auth(RR(".", QTYPE.SOA, ttl=0, rdata=SOA(
                "ns.fakenet.test", "hostmaster.fakenet.test", (1, 3600, 600, 86400, 0))))
        self.log.log("query", rcode=rcode, answers=[f"{t} {v}" for _, t, v, _ in answers], **entry)
        return reply

    def delay(self, reply):
        """Seconds to hold reply back: the zone's "slow" suffixes
        (<anything>.<suffix> answered after that many ms)."""
        try:
            qname = str(reply.q.qname).rstrip(".").lower()
        except Exception:  # noqa: BLE001
            return 0
        for suffix, ms in self.zone.current().get("slow", {}).items():
            if qname.endswith("." + suffix):
                return ms / 1000
        return 0

    def udp_loop(self, sock, local):
        def send(out, client):
            try:
                sock.sendto(out, client)
            except OSError:
                pass

        while True:
            data, client = sock.recvfrom(65535)
            reply = self.answer(data, "udp", client, local)
            if reply is None:
                continue
            out = reply.pack()
            if len(out) > getattr(reply, "udp_limit", 512):
                reply = reply.truncate()
                out = reply.pack()
            d = self.delay(reply)
            if d:
                t = threading.Timer(d, send, args=(out, client))
                t.daemon = True
                t.start()
            else:
                send(out, client)

    def tcp_conn(self, conn, client, local):
        conn.settimeout(10)
        try:
            while True:
                hdr = self._recv_exact(conn, 2)
                if not hdr:
                    return
                (n,) = struct.unpack("!H", hdr)
                data = self._recv_exact(conn, n)
                if data is None:
                    return
                reply = self.answer(data, "tcp", client, local)
                if reply is None:
                    continue
                time.sleep(self.delay(reply))
                out = reply.pack()
                conn.sendall(struct.pack("!H", len(out)) + out)
        except OSError:
            pass
        finally:
            conn.close()

    @staticmethod
    def _recv_exact(conn, n):
        buf = b""
        while len(buf) < n:
            chunk = conn.recv(n - len(buf))
            if not chunk:
                return None
            buf += chunk
        return buf

    def tcp_loop(self, sock, local):
        while True:
            conn, client = sock.accept()
            threading.Thread(target=self.tcp_conn, args=(conn, client, local), daemon=True).start()

    def start(self):
        for addr, port in self.listen:
            fam = socket.AF_INET6 if ":" in addr else socket.AF_INET
            u = socket.socket(fam, socket.SOCK_DGRAM)
            u.bind((addr, port))
            t = socket.socket(fam, socket.SOCK_STREAM)
            t.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            t.bind((addr, port))
            t.listen(128)
            local = f"{addr}:{port}"
            threading.Thread(target=self.udp_loop, args=(u, local), daemon=True).start()
            threading.Thread(target=self.tcp_loop, args=(t, local), daemon=True).start()


def main(argv):
    cfg = load_config(argv)
    srv = Server(cfg)
    srv.start()
    serve_forever_until_signal(srv.log)


if __name__ == "__main__":
    main(sys.argv)
