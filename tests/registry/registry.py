"""Test helpers for registry pulls: a real registry (Debian's docker-registry,
distribution 2.8) on 127.0.0.1, OCI image layouts written in Python, pushes
with skopeo, and a small token server for the Bearer flow.

Everything listens on loopback only; every process started here is stopped
by its pid in stop().
"""
import base64
import gzip
import hashlib
import http.server
import io
import json
import os
import shutil
import socket
import subprocess
import sys
import tarfile
import tempfile
import threading
import time
import urllib.parse
import urllib.request

REGISTRY_BIN = shutil.which("docker-registry") or "/usr/bin/docker-registry"
SKOPEO = shutil.which("skopeo") or "/usr/bin/skopeo"

MT_OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
MT_OCI_INDEX = "application/vnd.oci.image.index.v1+json"
MT_OCI_CONFIG = "application/vnd.oci.image.config.v1+json"
MT_OCI_LAYER_GZIP = "application/vnd.oci.image.layer.v1.tar+gzip"
MT_OCI_LAYER = "application/vnd.oci.image.layer.v1.tar"


def available():
    return os.path.exists(REGISTRY_BIN) and os.path.exists(SKOPEO)


sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # tests/
from freeport import free_port  # noqa: E402,F401  (below the ephemeral range)


def sha256(data):
    return "sha256:" + hashlib.sha256(data).hexdigest()


# --- layers and layouts ---

def layer_tar(entries):
    """entries: list of (path, kind, value) with kind "file" (bytes), "dir",
    "symlink" (target), "whiteout" (the path of the deleted name) or
    "opaque" (a directory whose lower contents are hidden). Returns the
    uncompressed tar bytes (deterministic)."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as t:
        for path, kind, value in entries:
            if kind == "whiteout":
                d, base = os.path.split(path)
                path, kind, value = os.path.join(d, ".wh." + base), "file", b""
            elif kind == "opaque":
                path, kind, value = os.path.join(path, ".wh..wh..opq"), "file", b""
            info = tarfile.TarInfo(path)
            info.mtime = 1700000000
            info.uid = info.gid = 0
            if kind == "file":
                info.size = len(value)
                info.mode = 0o644
                t.addfile(info, io.BytesIO(value))
            elif kind == "dir":
                info.type = tarfile.DIRTYPE
                info.mode = 0o755
                t.addfile(info)
            elif kind == "symlink":
                info.type = tarfile.SYMTYPE
                info.linkname = value
                info.mode = 0o777
                t.addfile(info)
            else:
                raise ValueError(kind)
    return buf.getvalue()


def gz(data):
    return gzip.compress(data, compresslevel=1, mtime=0)


class Layout:
    """An OCI image layout directory being written."""

    def __init__(self, path):
        self.path = path
        os.makedirs(os.path.join(path, "blobs", "sha256"), exist_ok=True)
        with open(os.path.join(path, "oci-layout"), "w") as f:
            json.dump({"imageLayoutVersion": "1.0.0"}, f)
        self.refs = []

    def blob(self, data):
        d = sha256(data)
        with open(os.path.join(self.path, "blobs", "sha256", d[7:]), "wb") as f:
            f.write(data)
        return {"digest": d, "size": len(data)}

    def image(self, layers, config=None, arch="amd64", compress=True):
        """layers: list of uncompressed tar bytes, bottom first. Returns
        (manifest descriptor, info dict with diff_ids, blob digests, config)."""
        diff_ids, descs = [], []
        for tar in layers:
            diff_ids.append(sha256(tar))
            data = gz(tar) if compress else tar
            d = self.blob(data)
            d["mediaType"] = MT_OCI_LAYER_GZIP if compress else MT_OCI_LAYER
            descs.append(d)
        cfg = {
            "architecture": arch,
            "os": "linux",
            "config": config or {},
            "rootfs": {"type": "layers", "diff_ids": diff_ids},
            "history": [{"created_by": "warren test"} for _ in layers],
        }
        cfg_bytes = json.dumps(cfg, sort_keys=True).encode()
        cd = self.blob(cfg_bytes)
        cd["mediaType"] = MT_OCI_CONFIG
        manifest = {"schemaVersion": 2, "mediaType": MT_OCI_MANIFEST, "config": cd,
                    "layers": descs}
        md = self.blob(json.dumps(manifest).encode())
        md["mediaType"] = MT_OCI_MANIFEST
        md["platform"] = {"architecture": arch, "os": "linux"}
        return md, {"diff_ids": diff_ids, "blobs": [d["digest"] for d in descs],
                    "config": cfg, "manifest": md["digest"]}

    def index(self, manifests):
        idx = {"schemaVersion": 2, "mediaType": MT_OCI_INDEX, "manifests": manifests}
        d = self.blob(json.dumps(idx).encode())
        d["mediaType"] = MT_OCI_INDEX
        return d

    def tag(self, desc, tag):
        d = dict(desc)
        d.pop("platform", None)
        d["annotations"] = {"org.opencontainers.image.ref.name": tag}
        self.refs.append(d)
        with open(os.path.join(self.path, "index.json"), "w") as f:
            json.dump({"schemaVersion": 2, "manifests": self.refs}, f)


# --- the token server (Bearer flow) ---

def _b64url(data):
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


class TokenServer:
    """An http.server on 127.0.0.1 issuing RS256 JWTs in the shape
    distribution's token auth verifies (x5c chain to rootcertbundle, iss,
    aud, exp, access). Requires basic auth user:password when users is set.
    Logs every request in self.requests."""

    def __init__(self, tmp, issuer="warren-test-issuer", service="warren-test-registry",
                 users=None):
        self.tmp = tmp
        self.issuer, self.service, self.users = issuer, service, users or {}
        self.key = os.path.join(tmp, "token.key")
        self.cert = os.path.join(tmp, "token.crt")
        subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes",
                        "-keyout", self.key, "-out", self.cert, "-days", "2",
                        "-subj", "/CN=warren-test-token-issuer"],
                       check=True, capture_output=True)
        der = subprocess.run(["openssl", "x509", "-in", self.cert, "-outform", "DER"],
                             check=True, capture_output=True).stdout
        self.x5c = base64.b64encode(der).decode()
        self.requests = []
        self.port = free_port()
        self.realm = "http://127.0.0.1:%d/token" % self.port
        server = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, *a):
                pass

            def do_GET(self):
                u = urllib.parse.urlparse(self.path)
                q = urllib.parse.parse_qs(u.query)
                auth = self.headers.get("Authorization", "")
                user = None
                if auth.startswith("Basic "):
                    user, _, pw = base64.b64decode(auth[6:]).decode().partition(":")
                    if server.users.get(user) != pw:
                        user = "!bad"
                server.requests.append({"path": u.path, "query": q, "user": user})
                if u.path != "/token" or user == "!bad" or (server.users and not user):
                    self.send_response(401)
                    self.end_headers()
                    return
                access = []
                for scope in q.get("scope", []):
                    parts = scope.split(":")
                    if len(parts) >= 3 and parts[0] == "repository":
                        access.append({"type": "repository", "name": ":".join(parts[1:-1]),
                                       "actions": ["pull", "push"]})
                tok = server.issue(user or "anonymous", access)
                body = json.dumps({"token": tok, "access_token": tok, "expires_in": 300}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def issue(self, sub, access):
        now = int(time.time())
        header = {"typ": "JWT", "alg": "RS256", "x5c": [self.x5c]}
        claims = {"iss": self.issuer, "sub": sub, "aud": self.service, "exp": now + 300,
                  "nbf": now - 10, "iat": now, "jti": os.urandom(8).hex(), "access": access}
        signing_input = (_b64url(json.dumps(header).encode()) + "." +
                         _b64url(json.dumps(claims).encode())).encode()
        sig = subprocess.run(["openssl", "dgst", "-sha256", "-sign", self.key],
                             input=signing_input, check=True, capture_output=True).stdout
        return signing_input.decode() + "." + _b64url(sig)

    def stop(self):
        self.httpd.shutdown()
        self.httpd.server_close()


# --- the registry ---

class Registry:
    """docker-registry serving http on 127.0.0.1:<free port> with filesystem
    storage in a temp dir. token: a TokenServer to require Bearer tokens."""

    def __init__(self, token=None):
        self.tmp = tempfile.mkdtemp(prefix="warren-registry-")
        self.storage = os.path.join(self.tmp, "storage")
        os.makedirs(self.storage)
        self.port = free_port()
        self.host = "127.0.0.1:%d" % self.port
        cfg = [
            "version: 0.1",
            "log:",
            "  level: warn",
            "storage:",
            "  filesystem:",
            "    rootdirectory: %s" % self.storage,
            "  delete:",
            "    enabled: true",
            "http:",
            "  addr: 127.0.0.1:%d" % self.port,
            "  secret: warren-test",
        ]
        if token:
            cfg += [
                "auth:",
                "  token:",
                "    realm: %s" % token.realm,
                "    service: %s" % token.service,
                "    issuer: %s" % token.issuer,
                "    rootcertbundle: %s" % token.cert,
            ]
        self.config = os.path.join(self.tmp, "config.yml")
        with open(self.config, "w") as f:
            f.write("\n".join(cfg) + "\n")
        self.log_path = os.path.join(self.tmp, "registry.log")
        self.log = open(self.log_path, "wb")
        self.proc = subprocess.Popen([REGISTRY_BIN, "serve", self.config], stdout=self.log,
                                     stderr=subprocess.STDOUT)
        self._wait_ready()

    def _wait_ready(self, timeout=20.0):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError("docker-registry exited:\n" + self.read_log())
            try:
                urllib.request.urlopen("http://%s/v2/" % self.host, timeout=1)
                return
            except urllib.error.HTTPError:
                return  # 401 with token auth: up
            except OSError:
                time.sleep(0.05)
        raise RuntimeError("docker-registry did not start:\n" + self.read_log())

    def read_log(self):
        self.log.flush()
        with open(self.log_path, "rb") as f:
            return f.read().decode(errors="replace")

    def push(self, layout, tag, dest, all_platforms=False, fmt=None, creds=None):
        """skopeo copy oci:<layout>:<tag> docker://<host>/<dest>."""
        args = [SKOPEO, "copy", "--quiet", "--dest-tls-verify=false", "--insecure-policy"]
        if all_platforms:
            args.append("--all")
        if fmt:
            args += ["--format", fmt]
        if creds:
            args += ["--dest-creds", creds]
        args += ["oci:%s:%s" % (layout, tag), "docker://%s/%s" % (self.host, dest)]
        # a loaded machine (the ASan suite) once made skopeo's upload time
        # out against the local registry: the push is the fixture, not
        # what is tested, so it is tried up to three times
        for attempt in range(3):
            r = subprocess.run(args, capture_output=True, text=True, timeout=300,
                               env=dict(os.environ, HOME=self.tmp))
            if r.returncode == 0 or "timeout" not in r.stderr:
                break
            time.sleep(1)
        if r.returncode != 0:
            raise RuntimeError("skopeo copy failed: %s\n%s" % (r.stderr, self.read_log()))

    def manifest(self, name, ref, accept=MT_OCI_MANIFEST):
        """The manifest the registry serves (skopeo may have recompressed
        layers on push, so blob digests come from here)."""
        req = urllib.request.Request("http://%s/v2/%s/manifests/%s" % (self.host, name, ref),
                                     headers={"Accept": accept})
        with urllib.request.urlopen(req, timeout=10) as r:
            return json.loads(r.read())

    def blob_path(self, digest):
        h = digest[7:]
        return os.path.join(self.storage, "docker", "registry", "v2", "blobs", "sha256", h[:2],
                            h, "data")

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()
        shutil.rmtree(self.tmp, ignore_errors=True)


# --- a scripted registry for what the real one will not do on demand ---

class FakeRegistry:
    """A minimal distribution API over an OCI layout (http.server on
    127.0.0.1): GET /v2/<name>/manifests/<tag|digest> and blobs, with
    switches the real registry has no knob for:
      cut_blobs: the first GET of each blob sends only half of it, then
                 drops the connection (the client must resume with Range)
      basic:     (user, password) required with a "Basic" challenge
      manifest_type: override the Content-Type of manifests (e.g. the
                 Docker manifest list type for an index)
      pad_blobs: append this many bytes to every blob over 1000 bytes (a
                 registry sending more than the manifest lists)
    Every request is logged in .requests as (method, path, headers)."""

    def __init__(self, layout, name, cut_blobs=False, basic=None, manifest_type=None,
                 pad_blobs=0):
        self.layout, self.name, self.pad_blobs = layout, name, pad_blobs
        self.cut_blobs, self.basic, self.manifest_type = cut_blobs, basic, manifest_type
        self.requests, self.cut_done = [], set()
        self.port = free_port()
        self.host = "127.0.0.1:%d" % self.port
        with open(os.path.join(layout, "index.json")) as f:
            self.tags = {m["annotations"]["org.opencontainers.image.ref.name"]: m
                         for m in json.load(f)["manifests"]}
        server = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a):
                pass

            def do_GET(self):
                server.requests.append(("GET", self.path, dict(self.headers)))
                if server.basic:
                    want = "Basic " + base64.b64encode(("%s:%s" % server.basic).encode()).decode()
                    if self.headers.get("Authorization") != want:
                        self.send_response(401)
                        self.send_header("WWW-Authenticate", 'Basic realm="fake"')
                        self.send_header("Content-Length", "0")
                        self.end_headers()
                        return
                prefix = "/v2/%s/" % server.name
                if not self.path.startswith(prefix):
                    return self.missing()
                kind, _, obj = self.path[len(prefix):].partition("/")
                if kind == "manifests":
                    desc = server.tags.get(obj)
                    digest = desc["digest"] if desc else obj
                    data = server.read_blob(digest)
                    if data is None:
                        return self.missing()
                    mt = server.manifest_type or json.loads(data).get("mediaType",
                                                                      MT_OCI_MANIFEST)
                    return self.send(data, mt, digest)
                if kind == "blobs":
                    data = server.read_blob(obj)
                    if data is None:
                        return self.missing()
                    rng = self.headers.get("Range")
                    if rng and rng.startswith("bytes="):
                        start = int(rng[6:].split("-")[0])
                        body = data[start:]
                        self.send_response(206)
                        self.send_header("Content-Range", "bytes %d-%d/%d" % (
                            start, len(data) - 1, len(data)))
                        self.send_header("Content-Length", str(len(body)))
                        self.end_headers()
                        self.wfile.write(body)
                        return
                    if server.cut_blobs and obj not in server.cut_done and len(data) > 1000:
                        server.cut_done.add(obj)
                        self.send_response(200)
                        self.send_header("Content-Length", str(len(data)))
                        self.end_headers()
                        self.wfile.write(data[:len(data) // 2])
                        self.wfile.flush()
                        self.close_connection = True
                        self.connection.shutdown(socket.SHUT_RDWR)
                        return
                    pad = server.pad_blobs if len(data) > 1000 else 0  # layers, not configs
                    return self.send(data + b"\0" * pad,
                                     "application/octet-stream", obj)
                return self.missing()

            def send(self, data, mt, digest):
                self.send_response(200)
                self.send_header("Content-Type", mt)
                self.send_header("Docker-Content-Digest", digest)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def missing(self):
                body = b'{"errors":[{"code":"MANIFEST_UNKNOWN","message":"unknown"}]}'
                self.send_response(404)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def read_blob(self, digest):
        if not digest.startswith("sha256:") or not all(c in "0123456789abcdef"
                                                       for c in digest[7:]):
            return None
        p = os.path.join(self.layout, "blobs", "sha256", digest[7:])
        if not os.path.exists(p):
            return None
        with open(p, "rb") as f:
            return f.read()

    def stop(self):
        self.httpd.shutdown()
        self.httpd.server_close()
