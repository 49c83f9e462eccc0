"""TCP and UDP echo servers of the bed (one process each).

    python3 -m fakenet.echo CONFIG.json     CONFIG: {"mode": "tcp"|"udp", "log": path, "ports": [...]}

Both listen on every address of the internet netns (IPv4 and IPv6). UDP
replies leave from the address the datagram was sent to (IP_PKTINFO), so
every address of the bed's AnyIP ranges echoes correctly.
TCP logs "conn" and "close" (bytes each way); UDP logs every "packet".
A payload starting with b"FAKENET-BARRIER" is logged with "barrier": true.
"""
import itertools
import socket
import struct
import sys
import threading
import time

from .srvlog import EventLog, load_config, serve_forever_until_signal

IP_PKTINFO = getattr(socket, "IP_PKTINFO", 8)
IPV6_RECVPKTINFO = getattr(socket, "IPV6_RECVPKTINFO", 49)
IPV6_PKTINFO = getattr(socket, "IPV6_PKTINFO", 50)
IPV6_FREEBIND = 78
BARRIER = b"FAKENET-BARRIER"
IDS = itertools.count(1)


def tcp_conn(log, conn, client, port):
    cid = next(IDS)
    local = conn.getsockname()[0]
    log.log("conn", conn=cid, port=port, client=client[0], client_port=client[1], local=local)
    n = 0
    t0 = time.time()
    first = b""
    conn.settimeout(60)
    try:
        while True:
            data = conn.recv(65536)
            if not data:
                break
            if not first:
                first = data[:64]
            conn.sendall(data)
            n += len(data)
    except OSError:
        pass
    finally:
        conn.close()
        log.log("close", conn=cid, port=port, client=client[0], local=local, bytes_in=n, bytes_out=n,
                barrier=first.startswith(BARRIER) or None, head=first.decode("latin-1"),
                seconds=round(time.time() - t0, 6))


def tcp_serve(log, fam, addr, port):
    s = socket.socket(fam, socket.SOCK_STREAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    if fam == socket.AF_INET6:
        s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
    s.bind((addr, port))
    s.listen(128)

    def loop():
        while True:
            c, a = s.accept()
            threading.Thread(target=tcp_conn, args=(log, c, a, port), daemon=True).start()
    threading.Thread(target=loop, daemon=True).start()


def udp_serve(log, fam, addr, port):
    s = socket.socket(fam, socket.SOCK_DGRAM)
    if fam == socket.AF_INET6:
        s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
        s.setsockopt(socket.IPPROTO_IPV6, IPV6_RECVPKTINFO, 1)
        # replying from an AnyIP (route-local, unassigned) v6 address needs freebind
        s.setsockopt(socket.IPPROTO_IPV6, IPV6_FREEBIND, 1)
    else:
        s.setsockopt(socket.IPPROTO_IP, IP_PKTINFO, 1)
    s.bind((addr, port))

    def loop():
        while True:
            data, anc, _flags, client = s.recvmsg(65535, 256)
            local, cmsgs = None, []
            for level, typ, cdata in anc:
                if fam == socket.AF_INET and level == socket.IPPROTO_IP and typ == IP_PKTINFO:
                    # struct in_pktinfo { int ifindex; in_addr spec_dst; in_addr addr; }
                    local = socket.inet_ntop(socket.AF_INET, cdata[8:12])
                    cmsgs = [(socket.IPPROTO_IP, IP_PKTINFO,
                              struct.pack("i4s4s", 0, cdata[8:12], b"\0" * 4))]
                elif fam == socket.AF_INET6 and level == socket.IPPROTO_IPV6 and typ == IPV6_PKTINFO:
                    # struct in6_pktinfo { in6_addr addr; int ifindex; }
                    local = socket.inet_ntop(socket.AF_INET6, cdata[:16])
                    cmsgs = [(socket.IPPROTO_IPV6, IPV6_PKTINFO, cdata[:16] + struct.pack("i", 0))]
            log.log("packet", port=port, client=client[0], client_port=client[1], local=local,
                    bytes=len(data), barrier=data.startswith(BARRIER) or None,
                    head=data[:64].decode("latin-1"))
            try:
                s.sendmsg([data], cmsgs, 0, client)
            except OSError:
                pass
    threading.Thread(target=loop, daemon=True).start()


def main(argv):
    cfg = load_config(argv)
    mode = cfg["mode"]
    log = EventLog(cfg["log"], f"{mode}_echo")
    for addr in ("0.0.0.0", "::"):
        fam = socket.AF_INET6 if ":" in addr else socket.AF_INET
        for port in cfg["ports"]:
            (tcp_serve if mode == "tcp" else udp_serve)(log, fam, addr, port)
    serve_forever_until_signal(log)


if __name__ == "__main__":
    main(sys.argv)
