"""Sandbox workload identity end to end (issue 17 item 3; docs/security.md
"Sandbox identity"): a sandbox created with identity=True gets a signed,
rotated JWT in a read-only file, WARREN_WEB_IDENTITY_TOKEN_FILE,
WARREN_API_SERVER and WARREN_ENVIRONMENT, and code in it uses the SDK with
no credentials passed in, scoped to its own environment. The token of a
terminated sandbox is refused; the sandbox socket trusts no peer without a
token. Token lifetime here: 10 s (rotated at 5 s)."""
import base64
import json
import os
import pathlib
import shutil
import subprocess
import tarfile
import tempfile
import time

import grpc
import google.protobuf
import pytest

import warren as wr
from conftest import ROOT, WARREN_CLI, Daemon, import_image

LIFETIME = 10


def claims(tok):
    p = tok.split(".")[1]
    return json.loads(base64.urlsafe_b64decode(p + "=" * (-len(p) % 4)))


@pytest.fixture(scope="module")
def d():
    dd = Daemon(extra_args=["--admin-listen", "127.0.0.1:0",
                            "--identity-token-lifetime", str(LIFETIME)])
    try:
        import_image(dd, "busybox:latest")
        yield dd
    finally:
        dd.stop()


@pytest.fixture(scope="module")
def py_image(d):
    """The Debian base image (python3) plus this host's grpcio, protobuf
    (CPython 3.11 builds, as Debian 12's python3), typing_extensions and
    python/warren,
    imported as identpy:latest."""
    p = subprocess.run(["bash", str(ROOT / "scripts/base-image.sh")], capture_output=True,
                       text=True, timeout=900)
    if p.returncode != 0:
        pytest.skip("no Debian base image: " + p.stderr[-300:])
    base = p.stdout.strip().splitlines()[-1]
    site = pathlib.Path(grpc.__file__).parent.parent
    tmp = tempfile.mkdtemp(prefix="warren-identpy-")
    skip = lambda ti: None if "__pycache__" in ti.name else ti  # noqa: E731
    try:
        tar = os.path.join(tmp, "t.tar")
        shutil.copyfile(base, tar)
        with tarfile.open(tar, "a") as t:
            dst = "./usr/lib/python3/dist-packages/"
            t.add(str(site / "grpc"), dst + "grpc", filter=skip)
            t.add(str(pathlib.Path(google.protobuf.__file__).parent), dst + "google/protobuf",
                  filter=skip)
            if (site / "google" / "_upb").is_dir():
                t.add(str(site / "google" / "_upb"), dst + "google/_upb", filter=skip)
            t.add(str(ROOT / "python" / "warren"), dst + "warren", filter=skip)
            import typing_extensions  # grpc.aio's
            t.add(typing_extensions.__file__, dst + "typing_extensions.py")
        r = subprocess.run([WARREN_CLI, "--addr", d.unix_addr, "image", "import",
                            "--env", "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
                            "identpy:latest", tar], capture_output=True, text=True, timeout=300)
        assert r.returncode == 0, r.stderr
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return "identpy:latest"


@pytest.fixture
def ops(d):
    with wr.SandboxClient(d.unix_addr) as c:
        yield c


def env_client(d, env):
    """The operator, acting in environment env."""
    return wr.SandboxClient(d.unix_addr, environment=env)


def test_token_file_env_and_claims(d, ops):
    with env_client(d, "team-a") as a, a.create(image="busybox:latest", identity=True) as sb:
        r = sb.exec("sh", "-c", "env | grep ^WARREN_ | sort; cat $WARREN_WEB_IDENTITY_TOKEN_FILE")
        assert r.exit_code == 0, r.stderr_text
        lines = r.stdout_text.splitlines()
        env = dict(l.split("=", 1) for l in lines[:-1])
        assert env == {"WARREN_API_SERVER": "unix:///run/warren/api/warren.sock",
                       "WARREN_ENVIRONMENT": "team-a",
                       "WARREN_WEB_IDENTITY_TOKEN_FILE": "/run/warren/identity/token"}
        c = claims(lines[-1])
        assert c["sub"] == "sandbox:team-a:" + sb.id
        assert c["environment_id"] == "team-a"
        assert c["aud"] == "warren-api"
        assert c["iss"].startswith("http://127.0.0.1:")
        assert 0 < c["exp"] - c["iat"] <= LIFETIME
        # read-only: neither the file nor the directory can be changed
        r = sb.exec("sh", "-c", "echo x > /run/warren/identity/token || echo refused; "
                    "touch /run/warren/identity/other || echo refused2; "
                    "rm -f /run/warren/identity/token || echo refused3")
        assert r.stdout_text.split() == ["refused", "refused2", "refused3"], r.stdout_text


def test_sdk_in_sandbox_sees_only_its_environment(d, py_image):
    with env_client(d, "team-a") as a, env_client(d, "team-b") as b:
        other_a = a.create(image="busybox:latest")
        other_b = b.create(image="busybox:latest")
        try:
            with a.create(image=py_image, identity=True) as sb:
                prog = ("import json, warren as wr\n"
                        "c = wr.SandboxClient()\n"
                        "w = c.whoami()\n"
                        "print(json.dumps({'env': w.environment, 'role': w.role, "
                        "'subject': w.subject, 'ids': sorted(s.id for s in c.list())}))\n")
                r = sb.exec("python3", "-c", prog, timeout_secs=60)
                assert r.exit_code == 0, r.stderr_text
                out = json.loads(r.stdout_text)
                assert out["env"] == "team-a" and out["role"] == "user"
                assert out["subject"] == "sandbox:" + sb.id
                # exactly what the operator lists for team-a (earlier
                # tests' sandboxes included), none of team-b's
                assert out["ids"] == sorted(s.id for s in a.list())
                assert sb.id in out["ids"] and other_a.id in out["ids"]
                assert other_b.id not in out["ids"]
                # another environment's sandbox is not found, even by id
                prog = ("import warren as wr\n"
                        "try:\n"
                        "    wr.SandboxClient().get(id=%r)\n"
                        "except wr.SandboxNotFound:\n"
                        "    print('not found')\n" % other_b.id)
                r = sb.exec("python3", "-c", prog, timeout_secs=60)
                assert r.stdout_text.strip() == "not found", r.stderr_text
                # the socket trusts no peer credentials: root in the
                # sandbox without the token is refused
                prog = ("import os, warren as wr\n"
                        "os.environ.pop('WARREN_WEB_IDENTITY_TOKEN_FILE')\n"
                        "try:\n"
                        "    wr.SandboxClient().list()\n"
                        "except wr.WarrenError as e:\n"
                        "    print(e.status.name)\n")
                r = sb.exec("python3", "-c", prog, timeout_secs=60)
                assert r.stdout_text.strip() == "UNAUTHENTICATED", (r.stdout_text,
                                                                   r.stderr_text)
        finally:
            other_a.terminate()
            other_b.terminate()


ROTATION_PROG = r"""
import json, time, warren as wr
c = wr.SandboxClient()
tf = c._token_file
path = "/run/warren/identity/token"
log, end = [], time.time() + %(secs)d
while time.time() < end:
    now = time.time()
    used = tf.get()
    with open(path) as f:
        on_disk = f.read().strip()
    err = ""
    try:
        c.list()
    except wr.WarrenError as e:
        err = e.status.name
    log.append({"t": now, "used": used, "disk": on_disk, "err": err})
    time.sleep(0.25)
print(json.dumps(log))
"""


def test_rotation_is_picked_up_per_the_cache_rule(d, py_image):
    with env_client(d, "team-r") as a, a.create(image=py_image, identity=True) as sb:
        secs = int(LIFETIME * 1.8)
        r = sb.exec("python3", "-c", ROTATION_PROG % {"secs": secs}, timeout_secs=secs + 60)
        assert r.exit_code == 0, r.stderr_text
        log = json.loads(r.stdout_text)
        assert len(log) > 20
        # every call succeeded, well past the first token's expiry
        assert [e for e in log if e["err"]] == []
        first = claims(log[0]["used"])
        assert log[-1]["t"] > first["exp"] + 2
        used = []
        for e in log:
            if not used or used[-1] != e["used"]:
                used.append(e["used"])
        assert len(used) >= 2, "never rotated"
        for e in log:
            assert claims(e["used"])["exp"] > e["t"], "an expired token was sent"
            assert claims(e["disk"])["exp"] - claims(e["disk"])["iat"] <= LIFETIME
        # the caching rule: once a new token is on disk (from time s), the
        # client switches by the old one's cache deadline at the latest:
        # read at r <= s, it is cached until r + (exp - r) / 2 <= s + (exp - s) / 2
        for i, e in enumerate(log):
            if i == 0 or e["disk"] == log[i - 1]["disk"]:
                continue
            s, old = e["t"], log[i - 1]["disk"]
            exp = claims(old)["exp"]
            deadline = s + min(3600, (exp - s) / 2)
            later = [x for x in log[i:] if x["t"] > deadline + 0.6]
            if later:
                assert later[0]["used"] != old, "the old token was used past its cache time"


def test_terminated_sandbox_token_is_refused(d):
    with env_client(d, "team-a") as a:
        sb = a.create(image="busybox:latest", identity=True)
        tok = sb.exec("cat", "/run/warren/identity/token").stdout_text.strip()
        with wr.SandboxClient(d.unix_addr, token=tok) as c:
            assert c.whoami().subject == "sandbox:" + sb.id
            assert sb.id in [s.id for s in c.list()]
        sb.terminate()
        with wr.SandboxClient(d.unix_addr, token=tok) as c:
            with pytest.raises(wr.WarrenError) as ei:
                c.list()
            assert ei.value.status == wr.Status.UNAUTHENTICATED
            assert "not running" in ei.value.message


def test_forged_and_federation_tokens_are_refused(d, ops):
    with env_client(d, "team-a") as a, a.create(image="busybox:latest", identity=True) as sb:
        tok = sb.exec("cat", "/run/warren/identity/token").stdout_text.strip()
        h, p, s = tok.split(".")
        c = claims(tok)
        c["environment_id"] = "default"
        c["sub"] = "sandbox:default:" + sb.id
        forged = h + "." + base64.urlsafe_b64encode(
            json.dumps(c).encode()).decode().rstrip("=") + "." + s
        with wr.SandboxClient(d.unix_addr, token=forged) as fc:
            with pytest.raises(wr.WarrenError) as ei:
                fc.list()
            assert ei.value.status == wr.Status.UNAUTHENTICATED
        # a federation token (GetWorkloadIdentityToken) is not an API
        # credential, and the API's audience cannot be minted
        fed = a.get_workload_identity_token("sts.example.com")
        with wr.SandboxClient(d.unix_addr, token=fed) as fc:
            with pytest.raises(wr.WarrenError) as ei:
                fc.list()
            assert ei.value.status == wr.Status.UNAUTHENTICATED
        with pytest.raises(wr.InvalidArgument):
            a.get_workload_identity_token("warren-api")


def test_identity_needs_an_issuer(fresh_warrend):
    dd = fresh_warrend()
    import_image(dd, "busybox:latest")
    with wr.SandboxClient(dd.unix_addr) as c:
        with pytest.raises(wr.WarrenError) as ei:
            c.create(image="busybox:latest", identity=True)
        assert ei.value.status == wr.Status.FAILED_PRECONDITION
        assert "identity" in ei.value.message


def test_token_dir_of_an_ended_sandbox_is_removed(d):
    with env_client(d, "team-a") as a:
        sb = a.create(image="busybox:latest", identity=True)
        path = os.path.join(d.state_dir, "identity", sb.id)
        assert os.path.exists(os.path.join(path, "token"))
        assert oct(os.stat(os.path.join(path, "token")).st_mode & 0o777) == "0o444"
        sb.terminate()
        deadline = time.monotonic() + 30   # the rotation timer: every LIFETIME/4 s
        while os.path.exists(path):
            assert time.monotonic() < deadline, "token directory left behind"
            time.sleep(0.1)


def test_restart_remints_and_the_new_socket_is_seen(tmp_path):
    from test_lifecycle import Restartable
    life = Restartable()
    extra = ["--issuer", "http://warren.test", "--identity-token-lifetime", str(LIFETIME)]
    life.start(extra=extra)
    try:
        import_image(life, "busybox:latest")
        with wr.SandboxClient(life.unix_addr) as c:
            sb = c.create(image="busybox:latest", identity=True)
            t1 = sb.exec("cat", "/run/warren/identity/token").stdout_text.strip()
        assert life.stop() == 0
        time.sleep(1.1)                   # the next token has another iat
        life.start(extra=extra)
        with wr.SandboxClient(life.unix_addr) as c:
            sb = c.get(id=sb.id)
            t2 = sb.exec("cat", "/run/warren/identity/token").stdout_text.strip()
            assert t2 != t1 and claims(t2)["iat"] > claims(t1)["iat"]
            host_sock = os.path.join(life.state_dir, "identity-api", "warren.sock")
            r = sb.exec("stat", "-c", "%i", "/run/warren/api/warren.sock")
            assert int(r.stdout_text) == os.stat(host_sock).st_ino   # the new socket
        with wr.SandboxClient("unix:" + host_sock, token=t2) as sc:
            assert sc.whoami().subject == "sandbox:" + sb.id
    finally:
        life.destroy()
        shutil.rmtree(life.tmp, ignore_errors=True)


def test_cli_identity_flag(d):
    p = subprocess.run([WARREN_CLI, "--addr", d.unix_addr, "run", "--identity", "busybox:latest",
                        "--", "sh", "-c", "cat $WARREN_WEB_IDENTITY_TOKEN_FILE"],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    c = claims(p.stdout.strip())
    assert c["aud"] == "warren-api" and c["sub"].startswith("sandbox:default:sb-")


def test_forks_get_identities_of_their_own(d):
    with env_client(d, "team-f") as a, a.create(image="busybox:latest", identity=True) as sb:
        copies = sb.fork(count=2)
        try:
            for cp in copies:
                tok = cp.exec("cat", "/run/warren/identity/token").stdout_text.strip()
                c = claims(tok)
                assert c["sub"] == "sandbox:team-f:" + cp.id and c["environment_id"] == "team-f"
                with wr.SandboxClient(d.unix_addr, token=tok) as cc:
                    assert cc.whoami().subject == "sandbox:" + cp.id
        finally:
            for cp in copies:
                cp.terminate()
