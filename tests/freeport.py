"""free_port(): a TCP port on 127.0.0.1 that nothing holds, for a server a
test is about to start (warrend, a registry, etcd, a kubelet ...).

It is picked below the kernel's ephemeral range
(net.ipv4.ip_local_port_range) and checked with a bind. The old way, bind
to port 0 and close, handed out a port from that range, which any socket
that binds port 0 or connects before the server listens can be given: it
happened about once in 2,500 daemon starts (an ASan CI run, where the
warren-egress started by one warrend took, for its resolver, the port the
next warrend was about to listen on). Below the range only another
explicit choice can take it, and a port is not handed out twice by one
process (two calls before either server listens, e.g. `free_port(),
free_port()`, got the same port from bind-and-close too)."""
import random
import socket

_rng = random.SystemRandom()
_given = set()  # ports this process has handed out


def _ephemeral_low():
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            return int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def _bindable(port):
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def free_port():
    lo = _ephemeral_low()
    first = 10000 if lo > 12000 else 1024
    for _ in range(200):
        port = _rng.randrange(first, lo)
        if port not in _given and _bindable(port):
            _given.add(port)
            return port
    # a host whose ports below the range are all taken: the old way
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]
