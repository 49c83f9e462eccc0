"""The secrets key is kept by warren-signer, not by warrend (issue 16 item
4; docs/signer.md "The secrets key"): warrend's memory never holds it, the
keeper's does; a kill -9 of the keeper loses nothing; values an older
warrend sealed directly under the key are rewrapped with data keys at
start-up and still open."""
import json
import os
import re
import signal
import sqlite3
import struct
import subprocess
import time

import pytest
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

import warren as wr
from conftest import DROP, SANITIZED, Daemon, import_image

IMAGE = "busybox:latest"
CANARY = "canary-keeper-3c9e1b"


def keeper_pid(d, what="secrets key"):
    """The pid of the newest warren-signer keeping `what`."""
    pids = re.findall(r"warren-signer: ready \(pid (\d+)\), keeping the " + what, d.read_log())
    assert pids, d.read_log()
    return int(pids[-1])


def readable_memory(pid):
    """Every readable private mapping of pid (heap, stacks, anonymous).
    Under ASan the allocator reserves terabytes of address space: the scan
    is the normal build's to make."""
    if SANITIZED:
        pytest.skip("memory scan: ASan reserves terabytes of address space")
    out = []
    with open("/proc/%d/maps" % pid) as maps, open("/proc/%d/mem" % pid, "rb", 0) as mem:
        for line in maps:
            f = line.split()
            if "r" not in f[1] or (len(f) > 5 and f[5].startswith("[v")):
                continue
            lo, hi = (int(x, 16) for x in f[0].split("-"))
            try:
                mem.seek(lo)
                out.append(mem.read(hi - lo))
            except OSError:
                pass
    return b"".join(out)


def key_of(d):
    with open(os.path.join(d.state_dir, "keys", "secret.key"), "rb") as f:
        key = f.read()
    assert len(key) == 32
    return key


def env_value(c, name):
    sb = c.create(image=IMAGE, secrets=[wr.Secret.from_name(name)])
    try:
        r = sb.exec("sh", "-c", "printf %s \"$" + name + "\"")
        assert r.exit_code == 0, r.stderr_text
        return r.stdout_text
    finally:
        sb.terminate()


@pytest.fixture
def daemon():
    d = Daemon()
    try:
        import_image(d, IMAGE)
        yield d
    finally:
        d.stop()


def test_warrend_never_holds_the_key_its_keeper_does(daemon):
    d = daemon
    with wr.SandboxClient(d.unix_addr) as c:
        c.set_secret("KEEPER_CANARY", CANARY)
        assert env_value(c, "KEEPER_CANARY") == CANARY
    key = key_of(d)
    # the scan can find the key: the keeper holds it
    assert key in readable_memory(keeper_pid(d))
    assert key not in readable_memory(d.proc.pid)
    # the keeper runs unprivileged, like the CA's signer
    with open("/proc/%d/status" % keeper_pid(d)) as f:
        status = f.read()
    assert re.search(r"^CapEff:\s+0+$", status, re.M), status
    assert re.search(r"^Uid:\s+(\d+)", status, re.M).group(1) != "0"


def test_keeper_killed_nothing_lost(daemon):
    d = daemon
    with wr.SandboxClient(d.unix_addr) as c:
        c.set_secret("KEEPER_CANARY", CANARY)
        old = keeper_pid(d)
        os.kill(old, signal.SIGKILL)
        # noticed on the loop (reaped, logged) ...
        deadline = time.monotonic() + 10
        while "secrets key, pid %d) exited" % old not in d.read_log():
            assert time.monotonic() < deadline, d.read_log()
            time.sleep(0.05)
        # ... and the next secret operation starts another: both old and new
        # values open
        assert env_value(c, "KEEPER_CANARY") == CANARY
        c.set_secret("KEEPER_CANARY_2", CANARY + "-2")
        assert env_value(c, "KEEPER_CANARY_2") == CANARY + "-2"
        new = keeper_pid(d)
        assert new != old
        assert not os.path.exists("/proc/%d" % old)  # reaped, not a zombie
        # killed in the middle of nothing: the same holds when it dies
        # between two requests of one create (sandbox + two secrets)
        os.kill(new, signal.SIGKILL)
        sb = c.create(image=IMAGE, secrets=[wr.Secret.from_name("KEEPER_CANARY"),
                                            wr.Secret.from_name("KEEPER_CANARY_2")])
        try:
            r = sb.exec("sh", "-c", 'printf "%s %s" "$KEEPER_CANARY" "$KEEPER_CANARY_2"')
            assert r.stdout_text == "%s %s-2" % (CANARY, CANARY)
        finally:
            sb.terminate()


def _encode(entries):
    out = b""
    for k, v in entries:
        out += struct.pack(">I", len(k)) + k + struct.pack(">I", len(v)) + v
    return out


def test_values_sealed_under_the_key_itself_are_rewrapped(tmp_path):
    """A state dir from before the keeper: a value sealed directly under the
    secrets key (a 12-byte nonce) opens after the upgrade and is stored
    with a data key of its own from then on."""
    d = Daemon()
    try:
        import_image(d, IMAGE)
        with wr.SandboxClient(d.unix_addr) as c:
            c.set_secret("OLD_STYLE", "placeholder")
        key = key_of(d)
        d.proc.send_signal(signal.SIGTERM)
        d.proc.wait(timeout=30)
        # seal the way the old warrend did: AES-256-GCM under the key itself
        db = sqlite3.connect(os.path.join(d.state_dir, "warren.db"))
        env, = db.execute("SELECT environment FROM secrets WHERE name = 'OLD_STYLE'").fetchone()
        nonce = os.urandom(12)
        aad = b"warren-secret-v1\0" + env.encode() + b"\0" + b"OLD_STYLE"
        ct = AESGCM(key).encrypt(nonce, _encode([(b"", CANARY.encode())]), aad)
        db.execute("UPDATE secrets SET ciphertext = ?, nonce = ? WHERE name = 'OLD_STYLE'",
                   (ct, nonce))
        db.commit()
        db.close()
        # restart on the same state dir
        d.log = open(d.log_path, "ab")
        d.proc = subprocess.Popen(d.proc.args, stdout=d.log, stderr=subprocess.STDOUT,
                                  env=dict(os.environ, WARREN_PULL_LOOPBACK_ONLY="1",
                                           WARREN_TERMINATE_ON_EXIT="1"))
        d._wait_ready()
        # dropped (WARREN_DROP=1), the socket answers before start-up ends
        # and the log holds the first start's "ready": wait for the line
        deadline = time.monotonic() + 30
        while "1 values sealed directly under the secrets key rewrapped" not in d.read_log():
            assert time.monotonic() < deadline, d.read_log()[-3000:]
            time.sleep(0.05)
        db = sqlite3.connect(os.path.join(d.state_dir, "warren.db"))
        n, = db.execute("SELECT length(nonce) FROM secrets WHERE name = 'OLD_STYLE'").fetchone()
        db.close()
        assert n == 12 + 60
        with wr.SandboxClient(d.unix_addr) as c:
            assert env_value(c, "OLD_STYLE") == CANARY
        if not SANITIZED:
            assert key not in readable_memory(d.proc.pid)
    finally:
        d.stop()


def test_a_tampered_wrapping_does_not_open(daemon):
    d = daemon
    with wr.SandboxClient(d.unix_addr) as c:
        c.set_secret("TAMPERED", CANARY)
        db = sqlite3.connect(os.path.join(d.state_dir, "warren.db"))
        nonce, = db.execute("SELECT nonce FROM secrets WHERE name = 'TAMPERED'").fetchone()
        bad = bytearray(nonce)
        bad[20] ^= 1  # inside the data key's wrapping
        db.execute("UPDATE secrets SET nonce = ? WHERE name = 'TAMPERED'", (bytes(bad),))
        db.commit()
        db.close()
        with pytest.raises(Exception) as ei:
            c.create(image=IMAGE, secrets=[wr.Secret.from_name("TAMPERED")])
        assert "does not decrypt" in str(ei.value)
        assert CANARY not in d.read_log()


# --- the workload-identity signing key (docs/signer.md "Identity tokens") ---

def identity_scalar(d):
    """The private scalar of the newest identity key, 32 bytes."""
    from cryptography.hazmat.primitives.serialization import load_pem_private_key
    kdir = os.path.join(d.state_dir, "keys")
    newest = sorted(f for f in os.listdir(kdir) if f.startswith("identity-") and f.endswith(".pem"))[-1]
    with open(os.path.join(kdir, newest), "rb") as f:
        key = load_pem_private_key(f.read(), None)
    return key.private_numbers().private_value.to_bytes(32, "big")


def key_fds(pid):
    """pid's fds on an identity key: its memfd, or a key file."""
    out = []
    for fd in os.listdir("/proc/%d/fd" % pid):
        try:
            t = os.readlink("/proc/%d/fd/%s" % (pid, fd))
        except OSError:
            continue
        if "identity-key" in t or re.search(r"/keys/identity-\d+\.pem", t):
            out.append(t)
    return out


def test_identity_key_kept_by_its_signer_and_tokens_verify_after_a_kill():
    jwt = pytest.importorskip("jwt")
    import urllib.request
    from conftest import free_port
    port = free_port()
    issuer = "http://127.0.0.1:%d" % port
    d = Daemon(extra_args=["--admin-listen", "127.0.0.1:%d" % port])
    try:
        with urllib.request.urlopen(issuer + "/.well-known/jwks.json", timeout=10) as r:
            jwks = jwt.PyJWKSet.from_dict(json.loads(r.read()))

        def verified(c):
            tok = c.get_workload_identity_token("sts.example.com")
            kid = jwt.get_unverified_header(tok)["kid"]
            key = [k for k in jwks.keys if k.key_id == kid][0]
            return jwt.decode(tok, key.key, algorithms=["ES256"], audience="sts.example.com",
                              issuer=issuer)

        with wr.SandboxClient(d.unix_addr) as c:
            assert verified(c)["aud"] == "sts.example.com"
            scalar = identity_scalar(d)
            if not SANITIZED:
                assert scalar in readable_memory(keeper_pid(d, "identity key"))
                assert scalar not in readable_memory(d.proc.pid)
            # nor do its fds: no key memfd, no key file open
            assert not key_fds(d.proc.pid), key_fds(d.proc.pid)
            if DROP:  # --user: made before the drop, kept by warren-priv's child
                assert "in its own memory" not in d.read_log()
                with open("/proc/%d/stat" % keeper_pid(d, "identity key")) as f:
                    st = f.read()
                ppid = int(st[st.rindex(")") + 2:].split()[1])
                assert ppid != d.proc.pid
                with open("/proc/%d/comm" % ppid) as f:
                    assert f.read().strip() == "warren-priv"
                kdir = os.path.join(d.state_dir, "keys")
                assert {os.stat(os.path.join(kdir, f)).st_uid for f in os.listdir(kdir)} != {0}
            old = keeper_pid(d, "identity key")
            os.kill(old, signal.SIGKILL)
            deadline = time.monotonic() + 10
            while "identity key, pid %d) exited" % old not in d.read_log():
                assert time.monotonic() < deadline, d.read_log()
                time.sleep(0.05)
            # the next token is signed by a new signer, with the same key
            assert verified(c)["iss"] == issuer
            assert keeper_pid(d, "identity key") != old
            assert not os.path.exists("/proc/%d" % old)
    finally:
        d.stop()
