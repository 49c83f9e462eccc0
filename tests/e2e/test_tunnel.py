"""Tunnels (issue 17 item 4): a local port forwarded to a port inside a
sandbox over the gRPC connection; the sandbox needs no network."""
import hashlib
import socket
import threading
import time
import urllib.request

import pytest

import warren as wr
from conftest import Daemon, import_image

IMAGE = "busybox:latest"


@pytest.fixture(scope="module")
def d():
    dd = Daemon()
    try:
        import_image(dd, IMAGE)
        yield dd
    finally:
        dd.stop()


@pytest.fixture
def client(d):
    with wr.SandboxClient(d.unix_addr) as c:
        yield c


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
    c = sb.connect(9001)
    c.send(b"x")
    assert c.recv() == b"x"
    sb.terminate()
    with pytest.raises((wr.WarrenError, ConnectionError)):
        while c.recv():
            pass
        raise ConnectionError("ended")
