"""The warren CLI against a real warrend: versions, listings (--json
parses), error lines and exit codes (1 failed, 2 usage), address forms,
TLS, secrets and image import; sandbox create/exec/run/rm once the daemon
serves CreateSandbox and Exec (skipped ONLY while it answers
UNIMPLEMENTED)."""
import json
import os
import signal
import subprocess
import tempfile
import time

import pytest

from conftest import ROOT, SANITIZED, WARREN_CLI, free_port

TIMEOUT = 60


def cli(*args, addr=None, env=None, input=None, timeout=TIMEOUT, check=None):
    e = dict(os.environ)
    e.pop("WARREN_TLS_CA", None)
    e.pop("WARREN_TOKEN", None)
    if addr is not None:
        e["WARREN_ADDR"] = addr
    e.update(env or {})
    p = subprocess.run([WARREN_CLI, *args], env=e, capture_output=True, timeout=timeout,
                       input=input if isinstance(input, (bytes, type(None))) else input.encode())
    p.out = p.stdout.decode(errors="replace")
    p.err = p.stderr.decode(errors="replace")
    if check is not None:
        assert p.returncode == check, (p.returncode, p.out, p.err)
    return p


@pytest.fixture(scope="module")
def busybox_tar():
    d = tempfile.mkdtemp(prefix="warren-bb-")
    tar = os.path.join(d, "busybox.tar")
    subprocess.run(["bash", str(ROOT / "tests/images/busybox-rootfs.sh"), os.path.join(d, "rootfs"),
                    "--tar", tar], check=True, capture_output=True)
    yield tar
    subprocess.run(["rm", "-rf", d], check=True)


@pytest.fixture(scope="module")
def sandboxes(warrend, busybox_tar):
    """The session daemon with busybox:latest imported through the CLI."""
    cli("image", "import", "busybox:latest", busybox_tar, addr=warrend.unix_addr, check=0)
    return warrend


# --- served today ---

@pytest.mark.skipif(SANITIZED, reason="the sanitizer runtime brings shared libraries of its own")
def test_cli_loads_libc_alone(warrend):
    """Every CLI start maps as little as it can: libuv, nghttp2, protobuf-c
    and jansson are linked in statically (src/cli/meson.build), and libssl
    is loaded only for a TLS connection (tls-dl.h)."""
    def loaded(*args):
        env = dict(os.environ, LD_DEBUG="files", WARREN_ADDR=warrend.unix_addr)
        p = subprocess.run([WARREN_CLI, *args], env=env, capture_output=True, timeout=TIMEOUT)
        assert p.returncode == 0, p.stderr[-2000:]
        names = set()
        for line in p.stderr.decode(errors="replace").splitlines():
            if "file=" in line and ("needed by" in line or "dynamically loaded" in line):
                names.add(line.split("file=", 1)[1].split()[0])
        return names
    assert loaded("--help") == {"libc.so.6"}
    assert loaded("version") == {"libc.so.6"}


def test_version(warrend):
    p = cli("version", addr=warrend.unix_addr, check=0)
    assert p.out.startswith("Client: warren 0.1.0\n")
    assert "Server: warrend 0.1.0 (api v1" in p.out
    j = json.loads(cli("version", "--json", addr=warrend.unix_addr, check=0).out)
    assert j["client"]["version"] == "0.1.0" and j["server"]["api_version"] == "v1"


@pytest.mark.parametrize("form", ["unix:{sock}", "unix://{sock}", "{tcp}", "tcp:{tcp}"])
def test_address_forms(warrend, form):
    addr = form.format(sock=warrend.sock, tcp=warrend.tcp_addr)
    assert "Server: warrend" in cli("version", addr=addr, check=0).out
    # --addr wins over WARREN_ADDR
    assert "Server: warrend" in cli("--addr", addr, "version", addr="unix:/nonexistent.sock",
                                    check=0).out


def test_sandbox_ls_empty(fresh_warrend):
    d = fresh_warrend()
    p = cli("sandbox", "ls", addr=d.unix_addr, check=0)
    assert p.out.split() == ["ID", "NAME", "STATUS", "IMAGE", "CREATED"]
    assert json.loads(cli("sandbox", "ls", "--json", addr=d.unix_addr, check=0).out) == []
    assert json.loads(cli("sandbox", "ls", "--json", "--status", "running", "--tag", "a=b",
                          addr=d.unix_addr, check=0).out) == []


def test_daemon_not_running(tmp_path):
    sock = tmp_path / "none.sock"
    p = cli("sandbox", "ls", addr=f"unix:{sock}", check=1)
    assert p.err == (f"warren: cannot connect to unix:{sock}: No such file or directory — is "
                     "warrend running? start it with `make run` or set WARREN_ADDR\n")
    assert p.out == ""
    # default address when WARREN_ADDR is unset
    e = {k: v for k, v in os.environ.items() if k != "WARREN_ADDR"}
    q = subprocess.run([WARREN_CLI, "sandbox", "ls"], env=e, capture_output=True, timeout=TIMEOUT)
    if not os.path.exists("/run/warren/warren.sock"):
        assert q.returncode == 1
        assert b"cannot connect to unix:/run/warren/warren.sock" in q.stderr


def test_connection_refused_tcp(warrend):
    port = free_port()
    p = cli("version", addr=f"127.0.0.1:{port}", check=1)
    assert f"cannot connect to 127.0.0.1:{port}: Connection refused — is warrend running?" in p.err


@pytest.mark.parametrize("args", [
    ["sandbox", "ls", "--bogus"],
    ["--bogus", "version"],
    ["sandbox", "ls", "-x"],
    ["sandbox", "get"],
    ["sandbox", "rm", "--grace"],
    ["sandbox", "rm", "--grace", "soon", "x"],
    ["sandbox", "create"],
    ["sandbox", "create", "-i", "img", "-e", "NOEQUALS"],
    ["sandbox", "create", "-i", "img", "--resource-detection", "nope"],
    ["sandbox", "frob"],
    ["frob"],
    [],
    ["exec", "sb"],
    ["exec"],
    ["run", "img"],
    ["image", "import", "x"],
    ["secret", "set"],
    ["volume", "put", "v"],
])
def test_usage_errors(warrend, args):
    p = cli(*args, addr=warrend.unix_addr, check=2)
    assert "usage: warren" in p.err or "commands:" in p.err
    assert p.out == ""
    if args and args[-1] == "--bogus":
        assert "unknown option '--bogus'" in p.err


@pytest.mark.parametrize("args", [
    [], ["version"], ["sandbox"], ["sandbox", "ls"], ["sandbox", "create"], ["sandbox", "get"],
    ["sandbox", "rm"], ["exec"], ["run"], ["image"], ["image", "import"], ["image", "ls"],
    ["secret"], ["secret", "set"], ["volume"], ["volume", "ls"],
])
def test_help(args):
    p = cli(*args, "--help", addr="unix:/nonexistent.sock", check=0)
    assert p.out.startswith("usage: warren")
    p = cli(*args, "-h", addr="unix:/nonexistent.sock", check=0)
    assert p.out.startswith("usage: warren")


def test_server_error_format(warrend):
    p = cli("sandbox", "get", "nosuch", addr=warrend.unix_addr, check=1)
    assert p.err.startswith("warren: NOT_FOUND: ") and "nosuch" in p.err
    assert p.err.count("\n") == 1 and p.out == ""
    p = cli("sandbox", "get", "sb-0123456789abcdef", "--json", addr=warrend.unix_addr, check=1)
    assert p.err.startswith("warren: NOT_FOUND: ")
    p = cli("image", "rm", "nosuch:1", addr=warrend.unix_addr, check=1)
    assert p.err.startswith("warren: NOT_FOUND: ")


def test_tls(warrend_tls):
    d = warrend_tls
    assert "Server: warrend" in cli("--ca", d.ca_file, "version", addr=d.tcp_addr, check=0).out
    assert "Server: warrend" in cli("version", addr=d.tcp_addr,
                                    env={"WARREN_TLS_CA": d.ca_file}, check=0).out
    assert isinstance(json.loads(cli("--ca", d.ca_file, "--token", d.token, "sandbox", "ls",
                                     "--json", addr=d.tcp_addr, check=0).out), list)
    assert isinstance(json.loads(cli("--ca", d.ca_file, "sandbox", "ls", "--json",
                                     env={"WARREN_TOKEN": d.token}, addr=d.tcp_addr,
                                     check=0).out), list)
    # without a token: UNAUTHENTICATED, naming the fix
    p = cli("--ca", d.ca_file, "sandbox", "ls", addr=d.tcp_addr, check=1)
    assert "UNAUTHENTICATED" in p.err and "WARREN_TOKEN" in p.err
    # the system trust store does not know the test CA
    p = cli("--tls", "version", addr=d.tcp_addr, check=1)
    assert "certificate verify failed" in p.err and "--ca" in p.err
    # plaintext against a TLS listener fails with a hint
    p = cli("version", addr=d.tcp_addr, check=1)
    assert "TLS" in p.err


def test_secrets(fresh_warrend):
    d = fresh_warrend()
    a = d.unix_addr
    assert cli("secret", "set", "API_TOKEN", addr=a, input=b"s3cr3t\n", check=0).out == "API_TOKEN\n"
    p = cli("secret", "ls", addr=a, check=0)
    assert "API_TOKEN" in p.out and "s3cr3t" not in p.out
    j = json.loads(cli("secret", "ls", "--json", addr=a, check=0).out)
    assert [s["name"] for s in j] == ["API_TOKEN"]
    assert "s3cr3t" not in json.dumps(j)
    cli("secret", "rm", "API_TOKEN", addr=a, check=0)
    assert json.loads(cli("secret", "ls", "--json", addr=a, check=0).out) == []
    p = cli("secret", "set", "bad name!", addr=a, input=b"x", check=1)
    assert p.err.startswith("warren: INVALID_ARGUMENT: ")


def test_image_import_ls_rm(fresh_warrend, busybox_tar):
    d = fresh_warrend()
    a = d.unix_addr
    p = cli("image", "import", "bb:1", busybox_tar, addr=a, check=0)
    image_id = p.out.strip()
    assert image_id.startswith("sha256:") and len(image_id) == 71
    with open(busybox_tar, "rb") as f:
        p = cli("image", "import", "bb:2", "-", addr=a, input=f.read(), check=0)
    assert p.out.strip() == image_id  # same content, same image
    imgs = json.loads(cli("image", "ls", "--json", addr=a, check=0).out)
    assert [i["id"] for i in imgs] == [image_id]
    assert sorted(imgs[0]["names"]) == ["bb:1", "bb:2"]
    assert "bb:1" in cli("image", "ls", addr=a, check=0).out
    cli("image", "rm", "bb:2", addr=a, check=0)
    assert json.loads(cli("image", "get", "bb:1", addr=a, check=0).out)["names"] == ["bb:1"]
    p = cli("image", "import", "bb:3", "/nonexistent.tar", addr=a, check=1)
    assert "cannot open /nonexistent.tar" in p.err
    p = cli("image", "import", "bad", "-", addr=a, input=b"this is not a tar" * 100, check=1)
    assert p.err.startswith("warren: ")


def test_image_import_large_with_backpressure(fresh_warrend, tmp_path):
    """A 64 MiB layer goes through in 1 MiB chunks without stalling."""
    import tarfile
    d = fresh_warrend()
    big = tmp_path / "big"
    with open(big, "wb") as f:
        f.write(os.urandom(64 << 20))
    tar = tmp_path / "big.tar"
    with tarfile.open(tar, "w") as t:
        t.add(big, arcname="big.bin")
    t0 = time.monotonic()
    p = cli("image", "import", "big:1", str(tar), addr=d.unix_addr, check=0)
    assert p.out.startswith("sha256:")
    assert time.monotonic() - t0 < TIMEOUT
    j = json.loads(cli("image", "get", "big:1", addr=d.unix_addr, check=0).out)
    assert j["size_bytes"] >= 64 << 20


def test_volume_ls(warrend):
    p = cli("volume", "ls", "--json", addr=warrend.unix_addr)
    if p.returncode == 1:
        assert p.err.startswith("warren: UNIMPLEMENTED: "), p.err
    else:
        assert p.returncode == 0 and isinstance(json.loads(p.out), list)


# --- sandboxes (need CreateSandbox and Exec) ---

def test_sandbox_create_get_rm(sandboxes):
    a = sandboxes.unix_addr
    sid = cli("sandbox", "create", "-i", "busybox:latest", "-n", "cli-e2e-1", "-e", "A=1",
              "--tag", "suite=cli", addr=a, check=0).out.strip()
    try:
        assert sid.startswith("sb-")
        j = json.loads(cli("sandbox", "get", sid, "--json", addr=a, check=0).out)
        assert j["id"] == sid and j["name"] == "cli-e2e-1"
        assert j["status"] == "SANDBOX_STATUS_RUNNING" and j["tags"] == {"suite": "cli"}
        assert "Status:      RUNNING" in cli("sandbox", "get", "cli-e2e-1", addr=a, check=0).out
        ls = json.loads(cli("sandbox", "ls", "--json", "--tag", "suite=cli", addr=a, check=0).out)
        assert [s["id"] for s in ls] == [sid]
        assert sid in cli("sandbox", "ls", "--status", "running", addr=a, check=0).out
        p = cli("exec", sid, "--", "sh", "-c", "echo $A; exit 3", addr=a)
        assert (p.returncode, p.out) == (3, "1\n")
    finally:
        assert cli("sandbox", "rm", "--grace", "1", sid, addr=a, check=0).out.strip() == sid
    j = json.loads(cli("sandbox", "get", sid, "--json", addr=a, check=0).out)
    assert j["status"] == "SANDBOX_STATUS_TERMINATED"


@pytest.fixture
def sandbox_id(sandboxes):
    a = sandboxes.unix_addr
    sid = cli("sandbox", "create", "-i", "busybox:latest", addr=a, check=0).out.strip()
    yield sid
    cli("sandbox", "rm", "--grace", "1", sid, addr=a)


def test_exec_io_and_exit_codes(sandboxes, sandbox_id):
    a = sandboxes.unix_addr
    p = cli("exec", sandbox_id, "--", "sh", "-c", "echo out; echo err >&2; exit 42", addr=a)
    assert (p.returncode, p.out, p.err) == (42, "out\n", "err\n")
    p = cli("exec", "-w", "/tmp", "-e", "X=y z", sandbox_id, "sh", "-c", "pwd; echo \"$X\"",
            addr=a, check=0)
    assert p.out == "/tmp\ny z\n"
    # without -i stdin is empty
    assert cli("exec", sandbox_id, "--", "cat", addr=a, input=b"ignored", check=0).out == ""
    # with -i stdin is forwarded, EOF closes it
    data = os.urandom(3 << 20)
    p = cli("exec", "-i", sandbox_id, "--", "sh", "-c", "cat | md5sum", addr=a, input=data,
            check=0)
    import hashlib
    assert p.out.split()[0] == hashlib.md5(data).hexdigest()
    # killed by a signal: 128+signal
    p = cli("exec", sandbox_id, "--", "sh", "-c", "kill -9 $$", addr=a)
    assert p.returncode == 128 + 9
    p = cli("exec", "--timeout", "1", sandbox_id, "--", "sleep", "30", addr=a)
    assert p.returncode >= 128 and "timed out" in p.err
    p = cli("exec", "warren-e2e-nosuch", "--", "true", addr=a, check=1)
    assert p.err.startswith("warren: NOT_FOUND: ")


def test_exec_forwards_sigint(sandboxes, sandbox_id):
    p = subprocess.Popen([WARREN_CLI, "--addr", sandboxes.unix_addr, "exec", sandbox_id, "--",
                          "sh", "-c", "trap 'echo got-int; exit 7' INT; echo ready; "
                          "while :; do sleep 0.1; done"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert p.stdout.readline() == b"ready\n"
    p.send_signal(signal.SIGINT)
    out, err = p.communicate(timeout=TIMEOUT)
    assert b"got-int" in out and p.returncode == 7, (out, err)
    p = subprocess.Popen([WARREN_CLI, "--addr", sandboxes.unix_addr, "exec", sandbox_id, "--",
                          "sh", "-c", "echo ready; exec sleep 300"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert p.stdout.readline() == b"ready\n"
    p.send_signal(signal.SIGTERM)
    p.communicate(timeout=TIMEOUT)
    assert p.returncode == 128 + signal.SIGTERM


def test_run(sandboxes):
    a = sandboxes.unix_addr
    p = cli("run", "-n", "cli-run-1", "-e", "GREETING=hi", "busybox:latest", "--", "sh", "-c",
            "echo $GREETING; exit 5", addr=a)
    assert (p.returncode, p.out) == (5, "hi\n")
    j = json.loads(cli("sandbox", "get", "cli-run-1", "--json", addr=a, check=0).out)
    assert j["status"] in ("SANDBOX_STATUS_TERMINATED", "SANDBOX_STATUS_TERMINATING")
    p = cli("run", "-i", "busybox:latest", "--", "tr", "a-z", "A-Z", addr=a, input=b"abc\n")
    assert (p.returncode, p.out) == (0, "ABC\n")
    p = cli("run", "warren-e2e-no-such-image:0", "--", "true", addr=a, check=1)
    assert p.err.startswith("warren: ")
