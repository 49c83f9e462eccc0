"""Identity token handling in the SDK (the seed's "Rotating workload
identity"), against the in-process fake server: the token file is read when
no token is given, cached for min(1 h, half the remaining lifetime), 1 h
without `exp`, a changed path bypasses the cache, the `environment_id`
claim names the environment unless WARREN_ENVIRONMENT(_ID) or
environment= does, and WARREN_API_SERVER is the default address."""
import base64
import json
import os
import sys
import time

import pytest

sys.path.insert(0, os.path.dirname(__file__))
import fake_server  # noqa: E402

import warren as wr  # noqa: E402
from warren import SandboxClient  # noqa: E402
from warren._auth import MAX_CACHE_SECONDS, TokenFile  # noqa: E402


def jwt(**claims):
    enc = lambda d: base64.urlsafe_b64encode(json.dumps(d).encode()).decode().rstrip("=")  # noqa: E731
    return f"{enc({'alg': 'ES256'})}.{enc(claims)}.c2ln"


@pytest.fixture
def server():
    srv, port, sbx, sysv = fake_server.start()
    yield port, sysv
    srv.stop(0)


@pytest.fixture
def ident_env(monkeypatch):
    for k in ("WARREN_ADDR", "WARREN_API_SERVER", "WARREN_TOKEN", "WARREN_ENVIRONMENT",
              "WARREN_ENVIRONMENT_ID", "WARREN_WEB_IDENTITY_TOKEN_FILE",
              "WARREN_IDENTITY_TOKEN_FILE"):
        monkeypatch.delenv(k, raising=False)
    return monkeypatch


def test_cache_is_half_the_remaining_lifetime(tmp_path):
    now = [1000.0]
    f = tmp_path / "tok"
    first = jwt(exp=1100)
    f.write_text(first + "\n")
    tf = TokenFile(str(f), clock=lambda: now[0])
    assert tf.get() == first
    f.write_text("second")
    now[0] = 1049.9
    assert tf.get() == first          # cached for (1100 - 1000) / 2 = 50 s
    now[0] = 1050.0
    assert tf.get() == "second"


def test_cache_is_at_most_an_hour(tmp_path):
    now = [0.0]
    f = tmp_path / "tok"
    f.write_text(jwt(exp=100000))    # half the lifetime would be 50000 s
    tf = TokenFile(str(f), clock=lambda: now[0])
    tf.get()
    f.write_text("next")
    now[0] = MAX_CACHE_SECONDS - 1
    assert tf.get() != "next"
    now[0] = MAX_CACHE_SECONDS
    assert tf.get() == "next"


def test_no_exp_uses_the_hour(tmp_path):
    now = [0.0]
    f = tmp_path / "tok"
    f.write_text(jwt(sub="x"))
    tf = TokenFile(str(f), clock=lambda: now[0])
    tf.get()
    f.write_text("next")
    now[0] = 3599.0
    assert tf.get() != "next"
    now[0] = 3600.0
    assert tf.get() == "next"
    # not a JWT at all: the hour too
    f.write_text("opaque")
    now[0] = 3600.0 + 3599.0
    assert tf.get() == "next"


def test_expired_token_is_read_again_every_time(tmp_path):
    f = tmp_path / "tok"
    f.write_text(jwt(exp=10))
    tf = TokenFile(str(f), clock=lambda: 20.0)
    tf.get()
    f.write_text("fresh")
    assert tf.get() == "fresh"


def test_changed_path_bypasses_the_cache(tmp_path, ident_env):
    a, b = tmp_path / "a", tmp_path / "b"
    a.write_text(jwt(exp=10 ** 10))
    b.write_text("from-b")
    tf = TokenFile(str(a))
    assert tf.get().startswith("ey")
    tf.path = str(b)
    assert tf.get() == "from-b"
    # a path from the environment: re-read from it on each call
    ident_env.setenv("WARREN_WEB_IDENTITY_TOKEN_FILE", str(a))
    tf = TokenFile()
    assert tf.get().startswith("ey")
    ident_env.setenv("WARREN_WEB_IDENTITY_TOKEN_FILE", str(b))
    assert tf.get() == "from-b"


def test_client_reads_the_token_file_and_api_server(server, tmp_path, ident_env):
    port, sysv = server
    f = tmp_path / "token"
    tok = jwt(exp=int(time.time()) + 3600, environment_id="team-a")
    f.write_text(tok)
    ident_env.setenv("WARREN_WEB_IDENTITY_TOKEN_FILE", str(f))
    ident_env.setenv("WARREN_API_SERVER", f"127.0.0.1:{port}")
    with SandboxClient() as c:       # no address, no credentials
        assert c.address == f"127.0.0.1:{port}"
        c.version()
    md = sysv.metadata[-1]
    assert md["authorization"] == "Bearer " + tok
    assert md["x-warren-environment"] == "team-a"


def test_explicit_environment_wins_over_the_claim(server, tmp_path, ident_env):
    port, sysv = server
    f = tmp_path / "token"
    f.write_text(jwt(exp=int(time.time()) + 3600, environment_id="team-a"))
    ident_env.setenv("WARREN_WEB_IDENTITY_TOKEN_FILE", str(f))
    ident_env.setenv("WARREN_ENVIRONMENT_ID", "team-b")
    with SandboxClient(f"127.0.0.1:{port}") as c:
        c.version()
    assert sysv.metadata[-1]["x-warren-environment"] == "team-b"
    ident_env.setenv("WARREN_ENVIRONMENT", "team-c")
    with SandboxClient(f"127.0.0.1:{port}") as c:
        c.version()
    assert sysv.metadata[-1]["x-warren-environment"] == "team-c"
    with SandboxClient(f"127.0.0.1:{port}", environment="team-d") as c:
        c.version()
    assert sysv.metadata[-1]["x-warren-environment"] == "team-d"


def test_explicit_token_wins_over_the_file(server, tmp_path, ident_env):
    port, sysv = server
    f = tmp_path / "token"
    f.write_text(jwt(environment_id="team-a"))
    ident_env.setenv("WARREN_WEB_IDENTITY_TOKEN_FILE", str(f))
    with SandboxClient(f"127.0.0.1:{port}", token="wt_explicit") as c:
        c.version()
    md = sysv.metadata[-1]
    assert md["authorization"] == "Bearer wt_explicit" and "x-warren-environment" not in md


def test_client_follows_rotation_per_the_cache_rule(server, tmp_path, ident_env):
    port, sysv = server
    f = tmp_path / "token"
    # a long-lived token is cached: a rewrite is not seen yet
    f.write_text(jwt(exp=int(time.time()) + 3600, n=1))
    ident_env.setenv("WARREN_WEB_IDENTITY_TOKEN_FILE", str(f))
    with SandboxClient(f"127.0.0.1:{port}") as c:
        c.version()
        first = sysv.metadata[-1]["authorization"]
        f.write_text(jwt(exp=int(time.time()) + 3600, n=2))
        c.version()
        assert sysv.metadata[-1]["authorization"] == first
        # the configured path changes: read at once
        g = tmp_path / "token2"
        g.write_text(jwt(exp=int(time.time()) + 3600, n=3))
        ident_env.setenv("WARREN_WEB_IDENTITY_TOKEN_FILE", str(g))
        c.version()
        assert sysv.metadata[-1]["authorization"] == "Bearer " + g.read_text()
        # an expired token is cached for 0 s: the next call re-reads
        g.write_text(jwt(exp=int(time.time()) - 5, n=4))
        ident_env.setenv("WARREN_WEB_IDENTITY_TOKEN_FILE", str(f))
        c.version()
        ident_env.setenv("WARREN_WEB_IDENTITY_TOKEN_FILE", str(g))
        c.version()
        g.write_text(jwt(exp=int(time.time()) + 3600, n=5))
        c.version()
        assert sysv.metadata[-1]["authorization"] == "Bearer " + g.read_text()


def test_https_api_server():
    assert wr.grpc_target("https://api.example.com") == "api.example.com:443"
    assert wr.grpc_target("https://api.example.com:8443/") == "api.example.com:8443"
    assert wr.grpc_target("http://[::1]") == "[::1]:80"
