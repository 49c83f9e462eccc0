"""Tunnels: local TCP ports forwarded to ports inside a sandbox over the
gRPC connection (``Sandboxes/Tunnel``, one stream per TCP connection).
Nothing listens on the host or in the sandbox's network for it: the daemon
connects to the port on the sandbox's loopback from inside its network
namespace."""
from __future__ import annotations

import queue
import socket
import threading
from typing import Iterator, List, Optional

import grpc

from warren._errors import from_rpc_error
from warren._proto.warren.v1 import sandboxes_pb2 as pb

CHUNK = 256 * 1024


class TunnelConnection:
    """One TCP connection to a port inside a sandbox, as a byte stream:
    ``send`` / ``recv`` / ``close_write`` / ``close``."""

    def __init__(self, channel, sandbox: str, port: int, timeout: Optional[float] = None):
        self._q: "queue.Queue[Optional[pb.TunnelRequest]]" = queue.Queue(maxsize=64)
        self._q.put(pb.TunnelRequest(sandbox=sandbox, port=port))
        self._call = channel._sandboxes.Tunnel(self._requests(), timeout=timeout)
        self._buf = b""
        self._eof = False
        self._closed_write = False
        try:
            first = next(self._call)
        except grpc.RpcError as err:
            raise from_rpc_error(err, sandbox_call=True) from None
        except StopIteration:
            raise ConnectionError("tunnel ended before it was connected") from None
        if not first.connected:
            raise ConnectionError("tunnel: unexpected first message")

    def _requests(self) -> Iterator[pb.TunnelRequest]:
        while True:
            req = self._q.get()
            if req is None:
                return
            yield req

    def send(self, data: bytes) -> None:
        """Queue bytes for the program in the sandbox (blocks while the
        stream's buffers are full)."""
        mv = memoryview(data)
        for i in range(0, len(mv), CHUNK):
            self._q.put(pb.TunnelRequest(data=bytes(mv[i:i + CHUNK])))

    sendall = send

    def recv(self, n: int = 1 << 20) -> bytes:
        """Up to n bytes from the sandbox side; b"" at EOF."""
        while not self._buf and not self._eof:
            try:
                resp = next(self._call)
            except StopIteration:
                self._eof = True
                break
            except grpc.RpcError as err:
                raise from_rpc_error(err, sandbox_call=True) from None
            data = resp.data  # upb copies on every access: once
            if data:
                self._buf = data
            if resp.eof:
                self._eof = True
        if len(self._buf) <= n:
            out, self._buf = self._buf, b""
            return out
        out, self._buf = self._buf[:n], self._buf[n:]
        return out

    def close_write(self) -> None:
        """No more data: the program in the sandbox reads EOF."""
        if not self._closed_write:
            self._closed_write = True
            self._q.put(pb.TunnelRequest(close_write=True))
            self._q.put(None)

    def close(self) -> None:
        self.close_write()
        self._call.cancel()

    def __enter__(self) -> "TunnelConnection":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class Tunnel:
    """A local TCP listener (``local_port`` on ``host``) whose every
    connection is forwarded to ``port`` inside the sandbox. Close it (or use
    it as a context manager) to stop listening; forwarded connections end
    when either side closes."""

    def __init__(self, channel, sandbox: str, port: int, local_port: int = 0,
                 host: str = "127.0.0.1"):
        self._channel, self._sandbox, self.port = channel, sandbox, port
        self._srv = socket.create_server((host, local_port), reuse_port=False)
        self.host, self.local_port = self._srv.getsockname()[:2]
        self._closed = False
        self._threads: List[threading.Thread] = []
        self._accept = threading.Thread(target=self._serve, name="warren-tunnel", daemon=True)
        self._accept.start()

    @property
    def address(self) -> str:
        return f"{self.host}:{self.local_port}"

    def _serve(self) -> None:
        while not self._closed:
            try:
                conn, _ = self._srv.accept()
            except OSError:
                return
            t = threading.Thread(target=self._forward, args=(conn,), daemon=True)
            t.start()
            self._threads.append(t)

    def _forward(self, conn: socket.socket) -> None:
        try:
            tc = TunnelConnection(self._channel, self._sandbox, self.port)
        except Exception:
            conn.close()
            return

        def up() -> None:
            try:
                while True:
                    data = conn.recv(CHUNK)
                    if not data:
                        break
                    tc.send(data)
            except OSError:
                pass
            tc.close_write()

        ut = threading.Thread(target=up, daemon=True)
        ut.start()
        try:
            while True:
                data = tc.recv()
                if not data:
                    break
                conn.sendall(data)
            conn.shutdown(socket.SHUT_WR)
        except Exception:
            pass
        ut.join(timeout=5)
        tc.close()
        conn.close()

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            try:
                self._srv.close()
            except OSError:
                pass

    def __enter__(self) -> "Tunnel":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
