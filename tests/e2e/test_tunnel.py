"""Tunnels (issue 17 item 4): a local port forwarded to a port inside a
sandbox over the gRPC connection; the sandbox needs no network."""
import hashlib
import socket
import threading
import time
import urllib.request

import pytest

import warren as wr

IMAGE = "busybox:latest"


def wait_port(sb, port):
    for _ in range(100):
        r = sb.exec("sh", "-c", f"netstat -ltn | grep -q ':{port} ' && echo up")
        if r.stdout_text.strip() == "up":
            return
        time.sleep(0.05)
    raise AssertionError("nothing listens on %d" % port)


def test_http_server_through_a_tunnel_without_network(client):
    sb = client.create(image=IMAGE, block_network=True,
                       entrypoint=["sh", "-c", "mkdir -p /www && echo hello-from-inside > "
                                   "/www/index.html && exec httpd -f -p 127.0.0.1:8080 -h /www"])
    try:
        wait_port(sb, 8080)
        with sb.tunnel(8080) as t:
            for _ in range(3):
                with urllib.request.urlopen(f"http://{t.address}/index.html", timeout=10) as r:
                    assert r.read() == b"hello-from-inside\n"
            # concurrent connections
            out = []

            def get():
                with urllib.request.urlopen(f"http://{t.address}/index.html", timeout=20) as r:
                    out.append(r.read())
            ts = [threading.Thread(target=get) for _ in range(20)]
            for th in ts:
                th.start()
            for th in ts:
                th.join()
            assert out == [b"hello-from-inside\n"] * 20
    finally:
        sb.terminate()


def test_connect_echo_both_half_closes(client):
    sb = client.create(image=IMAGE, block_network=True,
                       entrypoint=["nc", "-ll", "-p", "9000", "-e", "sh", "-c",
                                   "cat; echo done-reading"])
    try:
        wait_port(sb, 9000)
        with sb.connect(9000) as c:
            payload = bytes(range(256)) * 4096  # 1 MiB
            c.send(payload)
            c.close_write()
            got = b""
            while True:
                chunk = c.recv()
                if not chunk:
                    break
                got += chunk
        assert got == payload + b"done-reading\n"
    finally:
        sb.terminate()


def test_errors(client):
    sb = client.create(image=IMAGE, entrypoint=["sleep", "infinity"])
    try:
        with pytest.raises(wr.Unavailable) as ei:
            sb.connect(9999)
        assert "nothing accepts connections" in str(ei.value)
        with pytest.raises(wr.InvalidArgument):
            sb.connect(0)
    finally:
        sb.terminate()
    with pytest.raises((wr.FailedPrecondition, wr.NotFound)):
        sb.connect(80)
    ghost = wr.Sandbox()
    ghost._channel, ghost.id = client, "sb-doesnotexist"
    with pytest.raises(wr.NotFound):
        ghost.connect(80)


def test_terminate_ends_the_tunnel(client):
    sb = client.create(image=IMAGE, block_network=True,
                       entrypoint=["nc", "-ll", "-p", "9001", "-e", "cat"])
    wait_port(sb, 9001)
    # the deadline only turns a tunnel that outlives its sandbox into a
    # failure instead of a hang
    c = sb.connect(9001, timeout=60)
    c.send(b"x")
    assert c.recv() == b"x"
    sb.terminate()
    try:
        while c.recv():
            pass
    except wr.DeadlineExceeded:
        pytest.fail("the tunnel outlived its sandbox")
    except wr.WarrenError:
        pass  # ended with an error: fine, it ended


def start_port_forward(d, sid, spec):
    import subprocess
    from conftest import WARREN_CLI
    p = subprocess.Popen([WARREN_CLI, "--addr", d.unix_addr, "port-forward", sid, spec],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    line = p.stdout.readline()
    assert line.startswith("Forwarding from 127.0.0.1:"), (line, p.stderr.read())
    port = int(line.split()[2].rsplit(":", 1)[1])
    return p, port


def test_cli_port_forward(d, client):
    import signal
    sb = client.create(image=IMAGE, block_network=True,
                       entrypoint=["sh", "-c", "mkdir -p /www && echo via-cli > /www/index.html "
                                   "&& exec httpd -f -p 8080 -h /www"])
    try:
        wait_port(sb, 8080)
        p, port = start_port_forward(d, sb.id, "0:8080")
        try:
            for _ in range(5):
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/index.html",
                                            timeout=10) as r:
                    assert r.read() == b"via-cli\n"
        finally:
            p.send_signal(signal.SIGINT)
            assert p.wait(timeout=10) == 0
    finally:
        sb.terminate()


def test_cli_port_forward_1gib(d, client):
    """1 GiB from a program in the sandbox through `warren port-forward`,
    checksummed (throughput printed; bench/tunnel has the figure)."""
    import signal
    sb = client.create(image=IMAGE, block_network=True,
                       entrypoint=["nc", "-ll", "-p", "9003", "-e", "sh", "-c",
                                   "dd if=/dev/zero bs=1M count=1024 2>/dev/null"])
    try:
        wait_port(sb, 9003)
        p, port = start_port_forward(d, sb.id, "0:9003")
        try:
            s = socket.create_connection(("127.0.0.1", port), timeout=30)
            h = hashlib.sha256()
            ref = hashlib.sha256()
            n = 0
            t = time.perf_counter()
            while True:
                b = s.recv(1 << 20)
                if not b:
                    break
                h.update(b)
                ref.update(b"\0" * len(b))
                if any(b[:1]) or any(b[-1:]):
                    raise AssertionError("non-zero byte")
                n += len(b)
            dt = time.perf_counter() - t
            s.close()
            assert n == 1 << 30
            assert h.hexdigest() == ref.hexdigest()
            print(f"\nport-forward: 1 GiB in {dt:.2f} s = {n / dt / 1e6:.0f} MB/s")
        finally:
            p.send_signal(signal.SIGINT)
            p.wait(timeout=10)
    finally:
        sb.terminate()


def test_cli_port_forward_errors(d, client):
    import subprocess
    from conftest import WARREN_CLI
    p = subprocess.run([WARREN_CLI, "--addr", d.unix_addr, "port-forward", "nosuch", "80"],
                       capture_output=True, text=True, timeout=30)
    assert p.returncode != 0 and "nosuch" in p.stderr
    p = subprocess.run([WARREN_CLI, "--addr", d.unix_addr, "port-forward", "x", "99999"],
                       capture_output=True, text=True, timeout=30)
    assert p.returncode == 2 and "bad port" in p.stderr
