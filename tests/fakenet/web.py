"""The bed's HTTP/HTTPS server: echo, bulk bytes, static trees (PyPI simple
index, apt repository), git smart HTTP (git http-backend as CGI; Basic
auth for pushes and private repositories: gitserver.py).

    python3 -m fakenet.web CONFIG.json

Listens on every address of the internet netns (IPv4 and IPv6) on the
configured plain and TLS ports. TLS picks the certificate by SNI (special
names get a bad, wrong-name or expired certificate); ALPN offers http/1.1
only. Every connection and request is logged (see README.md).
"""
import hashlib
import http.server
import itertools
import json
import os
import posixpath
import re
import socket
import socketserver
import ssl
import subprocess
import sys
import threading
import time
import urllib.parse

from .gitserver import http_auth
from .srvlog import EventLog, load_config, serve_forever_until_signal

CHUNK = os.urandom(1 << 20)
CONN_IDS = itertools.count(1)
GIT_PATH = re.compile(r"^/[^/]+/[^/]+\.git(/.*)?$")
CTYPES = {".html": "text/html; charset=utf-8", ".whl": "application/octet-stream",
          ".deb": "application/vnd.debian.binary-package", ".gz": "application/gzip",
          ".json": "application/json", ".txt": "text/plain"}


class App:
    def __init__(self, cfg):
        self.cfg = cfg
        self.log = EventLog(cfg["log"], "web")
        self.static = {h: [tuple(x) for x in v] for h, v in cfg.get("static", {}).items()}
        self.git_root = cfg.get("git_root")
        self.git_hosts = set(cfg.get("git_hosts", ()))
        # host -> path prefixes answered without echoing the request (the
        # credential tests: a response must never carry a secret back)
        self.quiet = {h: tuple(v) for h, v in cfg.get("quiet", {}).items()}
        self.ctx = {}
        for name, (crt, key) in cfg["certs"].items():
            c = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            c.load_cert_chain(crt, key)
            c.set_alpn_protocols(["http/1.1"])
            self.ctx[name] = c
        self.ctx["default"].sni_callback = self._sni

    def _sni(self, sslsock, server_name, ctx):
        sslsock.fakenet_sni = server_name
        if server_name and server_name.lower() in self.ctx:
            sslsock.context = self.ctx[server_name.lower()]
        return None


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "fakenet"
    sys_version = ""
    timeout = 30

    def __init__(self, request, client_address, server, conn):
        self.conn = conn
        self.app = server.app
        self._out = 0      # bytes sent for the current request (a 100 Continue counts too)
        self._sunk = 0
        super().__init__(request, client_address, server)

    def log_request(self, code="-", size="-"):  # requests are logged by route()
        pass

    def log_message(self, fmt, *args):  # errors go to our log, not stderr
        self.app.log.log("http_error", conn=self.conn["conn"], client=self.conn["client"],
                         message=fmt % args)

    def flush_headers(self):
        self._out += sum(len(b) for b in getattr(self, "_headers_buffer", []))
        super().flush_headers()

    # every method goes through one router
    def do_GET(self):
        self.route()

    do_POST = do_PUT = do_DELETE = do_PATCH = do_HEAD = do_OPTIONS = do_GET
    do_TRACE = do_CONNECT = do_PROPFIND = do_GET

    def read_body(self):
        te = (self.headers.get("Transfer-Encoding") or "").lower()
        if "chunked" in te:
            body = bytearray()
            while True:
                line = self.rfile.readline(65537)
                size = int(line.split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    while self.rfile.readline(65537) not in (b"\r\n", b"\n", b""):
                        pass
                    return bytes(body)
                body += self.rfile.read(size)
                self.rfile.readline(3)
        n = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(n) if n else b""

    def send(self, status, body=b"", ctype="text/plain; charset=utf-8", headers=()):
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        for k, v in headers:
            self.send_header(k, v)
        self.end_headers()
        if self.command != "HEAD" and body:
            self.wfile.write(body)
            self._out += len(body)
        self._status = status

    def route(self):
        t0 = time.time()
        self._status = None
        target = self.path
        host = self.headers.get("Host") or ""
        if target.startswith(("http://", "https://")):   # absolute-form
            u = urllib.parse.urlsplit(target)
            host = host or u.netloc
            target = (u.path or "/") + (("?" + u.query) if u.query else "")
        hostname = host.lower()
        if hostname.startswith("["):
            hostname = hostname[1:hostname.find("]")]
        elif hostname.count(":") == 1:
            hostname = hostname.split(":")[0]
        path, _, query = target.partition("?")
        body = b""
        barrier = path.startswith("/__fakenet/barrier/")
        try:
            if barrier:
                self.send(204)
            else:
                try:
                    if path != "/sink":       # /sink streams its body itself
                        body = self.read_body()
                    self.dispatch(hostname, path, query, body)
                except (OSError, ssl.SSLError):
                    raise
                except Exception as e:  # noqa: BLE001 - a bad request must not kill the connection silently
                    self.app.log.log("server_error", conn=self.conn["conn"], client=self.conn["client"],
                                     error=repr(e))
                    self.close_connection = True     # the body may be partly unread
                    if self._status is None:
                        self.send(500, f"fakenet: {e!r}\n".encode(), headers=[("Connection", "close")])
        finally:
            raw_in = len(self.raw_requestline) + sum(len(k) + len(v) + 4 for k, v in self.headers.items()) + 2
            self.conn["requests"] += 1
            body_len = len(body) + getattr(self, "_sunk", 0)
            self._sunk = 0
            self.conn["bytes_in"] += raw_in + body_len
            self.conn["bytes_out"] += self._out
            self.app.log.log(
                "request", barrier=barrier or None, conn=self.conn["conn"], port=self.conn["port"],
                tls=self.conn["tls"], sni=self.conn.get("sni"), client=self.conn["client"],
                local=self.conn["local"], method=self.command, host=host, hostname=hostname,
                target=self.path, path=path, query=query, status=self._status,
                version=getattr(self, "request_version", None),
                headers=[[k, v] for k, v in self.headers.items()],
                bytes_in=raw_in + body_len, body_bytes=body_len, bytes_out=self._out,
                seconds=round(time.time() - t0, 6))
            self._out = 0

    def dispatch(self, host, path, query, body):
        if path == "/sink":
            q = urllib.parse.parse_qs(query)
            # ?delay_ms=N: wait before reading, so that the client's bytes
            # pile up in every buffer on the way, then drain them at once
            time.sleep(min(int(q.get("delay_ms", ["0"])[0]), 10000) / 1000)
            return self.sink(q.get("sha256") == ["1"])
        if re.fullmatch(r"/delay/[0-9]+", path):
            time.sleep(min(int(path.split("/")[2]), 60000) / 1000)
            return self.echo(host, path, query, body)
        if re.fullmatch(r"/bytes/[0-9]+", path):
            return self.bulk(path, query)
        if re.fullmatch(r"/status/[1-5][0-9][0-9]", path):
            code = int(path.split("/")[2])
            return self.send(code, f"status {code}\n".encode())
        if path == "/redirect":
            to = urllib.parse.parse_qs(query).get("to", ["/"])[0]
            return self.send(302, b"", headers=[("Location", to)])
        if host in self.app.git_hosts and GIT_PATH.match(path):
            return self.git(path, query, body)
        if (host == "api.github.com" and self.command == "POST"
                and re.fullmatch(r"/repos/[^/]+/[^/]+/pulls", path)):
            return self.github_pull(path, body)
        if any(path.startswith(p) for p in self.app.quiet.get(host, ())):
            return self.send(200, b'{"ok": true}\n')
        for prefix, root in self.app.static.get(host, ()):
            if path.startswith(prefix):
                return self.static(root, path[len(prefix):])
        return self.echo(host, path, query, body)

    def github_pull(self, path, body):
        """A fake GitHub "create a pull request": 201 with the PR (its
        html_url at the top level, other html_urls nested), or 422 when the
        title is "fail". ?chunked in the title: a chunked response."""
        try:
            req = json.loads(body or b"{}")
        except ValueError:
            req = {}
        title = str(req.get("title", ""))
        owner, repo = path.split("/")[2:4]
        if title == "fail":
            return self.send(422, json.dumps({"message": "Validation Failed"}).encode(),
                             ctype="application/json")
        self.app.pr_number = getattr(self.app, "pr_number", 0) + 1
        n = self.app.pr_number
        doc = json.dumps({
            "url": f"https://api.github.com/repos/{owner}/{repo}/pulls/{n}", "id": 1000 + n,
            "user": {"login": "octo", "html_url": "https://github.com/octo"},
            "title": title, "number": n,
            "html_url": f"https://github.com/{owner}/{repo}/pull/{n}",
            "head": {"repo": {"html_url": f"https://github.com/{owner}/{repo}"}},
        }).encode()
        if "chunked" not in title:
            return self.send(201, doc, ctype="application/json")
        self.send_response(201)
        self.send_header("Content-Type", "application/json")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        for i in range(0, len(doc), 37):      # chunk boundaries inside keys and values
            part = doc[i:i + 37]
            self.wfile.write(b"%x\r\n%s\r\n" % (len(part), part))
        self.wfile.write(b"0\r\n\r\n")
        self._status = 201
        self._out += len(doc)

    def echo(self, host, path, query, body):
        doc = {
            "method": self.command, "target": self.path, "path": path, "query": query,
            "host": host, "sni": self.conn.get("sni"), "tls": self.conn["tls"],
            "port": self.conn["port"], "client": self.conn["client"], "local": self.conn["local"],
            "headers": [[k, v] for k, v in self.headers.items()],
            "body_bytes": len(body), "body_sha256": hashlib.sha256(body).hexdigest(),
        }
        try:
            doc["body"] = body.decode() if len(body) <= 65536 else None
        except UnicodeDecodeError:
            doc["body"] = None
        self.send(200, (json.dumps(doc, indent=1) + "\n").encode(), "application/json")

    def sink(self, want_hash):
        """Read the request body in chunks and drop it (uploads of any
        size); answers {"bytes": N, "sha256": hex or null (?sha256=1)}."""
        h = hashlib.sha256() if want_hash else None
        n = 0
        te = (self.headers.get("Transfer-Encoding") or "").lower()
        if "chunked" in te:
            data = self.read_body()   # chunked uploads are held (clients rarely chunk big ones)
            if h:
                h.update(data)
            n = len(data)
        else:
            left = int(self.headers.get("Content-Length") or 0)
            while left > 0:
                data = self.rfile.read(min(left, 1 << 20))
                if not data:
                    break
                if h:
                    h.update(data)
                n += len(data)
                left -= len(data)
        self._sunk = n
        self.send(200, json.dumps({"bytes": n, "sha256": h and h.hexdigest()}).encode() + b"\n",
                  "application/json")

    def bulk(self, path, query):
        n = int(path.split("/")[2])
        self.send_response(200)
        self.send_header("Content-Type", "application/octet-stream")
        self.send_header("Content-Length", str(n))
        self.end_headers()
        self._status = 200
        if self.command == "HEAD":
            return
        mv = memoryview(CHUNK)
        left = n
        sock = self.connection
        self.wfile.flush()
        while left > 0:
            k = min(left, len(CHUNK))
            sock.sendall(mv[:k])
            left -= k
            self._out += k

    def static(self, root, rel):
        rel = posixpath.normpath("/" + urllib.parse.unquote(rel)).lstrip("/")
        full = os.path.join(root, rel)
        if os.path.isdir(full):
            full = os.path.join(full, "index.html")
        if not os.path.isfile(full):
            return self.send(404, b"not found\n")
        ext = os.path.splitext(full)[1]
        with open(full, "rb") as f:
            data = f.read()
        self.send(200, data, CTYPES.get(ext, "application/octet-stream"))

    def git(self, path, query, body):
        deny, user = http_auth(self.app.cfg, self.headers.get("Authorization"), path, query)
        if deny:
            return self.send(401, b"fakenet git: authentication required\n",
                             headers=[("WWW-Authenticate", 'Basic realm="fakenet git"')])
        env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": self.app.git_root,
            "GIT_PROJECT_ROOT": self.app.git_root, "GIT_HTTP_EXPORT_ALL": "1",
            "GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_COUNT": "1",
            "GIT_CONFIG_KEY_0": "safe.directory", "GIT_CONFIG_VALUE_0": "*",
            "PATH_INFO": path, "QUERY_STRING": query, "REQUEST_METHOD": self.command,
            "CONTENT_TYPE": self.headers.get("Content-Type", ""),
            "CONTENT_LENGTH": str(len(body)), "REMOTE_ADDR": self.conn["client"],
        }
        if user:
            env.update(REMOTE_USER=user, AUTH_TYPE="Basic")   # enables receive-pack (pushes)
        for h in ("Content-Encoding", "Git-Protocol"):
            if self.headers.get(h):
                env["HTTP_" + h.upper().replace("-", "_")] = self.headers[h]
        p = subprocess.run(["git", "http-backend"], input=body, capture_output=True, env=env, timeout=120)
        out = p.stdout
        sep = out.find(b"\r\n\r\n")
        sep, skip = (sep, 4) if sep >= 0 else (out.find(b"\n\n"), 2)
        head, payload = out[:sep].decode("latin-1"), out[sep + skip:]
        status, headers, ctype = 200, [], "application/octet-stream"
        for line in head.splitlines():
            k, _, v = line.partition(":")
            k, v = k.strip(), v.strip()
            if k.lower() == "status":
                status = int(v.split()[0])
            elif k.lower() == "content-type":
                ctype = v
            elif k and k.lower() != "content-length":
                headers.append((k, v))
        self.send(status, payload, ctype, headers)


class Server(socketserver.ThreadingMixIn, socketserver.TCPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 256

    def __init__(self, app, family, addr, port, tls):
        self.address_family = family
        self.app, self.port, self.tls = app, port, tls
        super().__init__((addr, port), None, bind_and_activate=False)
        if family == socket.AF_INET6:
            self.socket.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
        self.server_bind()
        self.server_activate()

    def finish_request(self, request, client_address):
        local = request.getsockname()
        conn = {"conn": next(CONN_IDS), "port": self.port, "tls": self.tls,
                "client": client_address[0], "client_port": client_address[1],
                "local": local[0], "requests": 0, "bytes_in": 0, "bytes_out": 0}
        t0 = time.time()
        if self.tls:
            request.settimeout(15)
            request = self.app.ctx["default"].wrap_socket(
                request, server_side=True, do_handshake_on_connect=False)
            try:
                request.do_handshake()
            except (ssl.SSLError, OSError) as e:
                self.app.log.log("tls_error", conn=conn["conn"], port=self.port, client=conn["client"],
                                 local=conn["local"], sni=getattr(request, "fakenet_sni", None),
                                 error=str(e))
                return
            conn["sni"] = getattr(request, "fakenet_sni", None)
            conn["tls_version"] = request.version()
            conn["alpn"] = request.selected_alpn_protocol()
        self.app.log.log("conn", **{k: v for k, v in conn.items()
                                    if k not in ("requests", "bytes_in", "bytes_out")})
        try:
            Handler(request, client_address, self, conn)
        except (OSError, ssl.SSLError):
            pass
        finally:
            self.app.log.log("close", conn=conn["conn"], port=self.port, client=conn["client"],
                             sni=conn.get("sni"), requests=conn["requests"], bytes_in=conn["bytes_in"],
                             bytes_out=conn["bytes_out"], seconds=round(time.time() - t0, 6))


def main(argv):
    cfg = load_config(argv)
    app = App(cfg)
    for addr in cfg.get("bind", ["0.0.0.0", "::"]):
        fam = socket.AF_INET6 if ":" in addr else socket.AF_INET
        for port in cfg["ports"].get("http", []):
            s = Server(app, fam, addr, port, False)
            threading.Thread(target=s.serve_forever, daemon=True).start()
        for port in cfg["ports"].get("https", []):
            s = Server(app, fam, addr, port, True)
            threading.Thread(target=s.serve_forever, daemon=True).start()
    serve_forever_until_signal(app.log)


if __name__ == "__main__":
    main(sys.argv)
