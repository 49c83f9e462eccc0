"""warren-signer, the real binary: started with a socketpair and a CA on a
memfd, asked for leaf certificates over its SOCK_SEQPACKET protocol
(src/signer/signer-proto.h), which are checked with `cryptography`; its
confinement is read from /proc/PID/status; it exits when the socket closes.

Needs root (it confines itself). WARREN_BUILD points at the meson build
dir (default: build/)."""
import datetime
import ipaddress
import os
import pathlib
import pwd
import shutil
import socket
import struct
import subprocess
import tempfile
import time

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

ROOT = pathlib.Path(__file__).resolve().parents[2]
BUILD = pathlib.Path(os.environ.get("WARREN_BUILD", ROOT / "build"))
SIGNER = str(BUILD / "src/signer/warren-signer")

MAGIC = 0x57534731
SIGN, CERT, ERROR = 1, 0x81, 0x82
ERR_BADMSG, ERR_HOST, ERR_KEY, ERR_EXPIRED, ERR_INTERNAL = 1, 2, 3, 4, 5

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="warren-signer confines itself: root")


def make_ca(days=3650, not_before_days=1):
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "Warren egress CA test")])
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name)
            .public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(days=not_before_days))
            .not_valid_after(now + datetime.timedelta(days=days))
            .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
            .add_extension(x509.KeyUsage(digital_signature=False, content_commitment=False,
                                         key_encipherment=False, data_encipherment=False,
                                         key_agreement=False, key_cert_sign=True, crl_sign=True,
                                         encipher_only=False, decipher_only=False), critical=True)
            .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()),
                           critical=False)
            .sign(key, hashes.SHA256()))
    pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                            serialization.NoEncryption())
    return key, cert, pem + cert.public_bytes(serialization.Encoding.PEM)


def spki(pub):
    return pub.public_bytes(serialization.Encoding.DER,
                            serialization.PublicFormat.SubjectPublicKeyInfo)


def sign_msg(rid, host, key_der, magic=MAGIC, typ=SIGN, reserved=0):
    h = host.encode() if isinstance(host, str) else host
    payload = struct.pack("=HHI", len(h), len(key_der), reserved) + h + key_der
    return struct.pack("=IIII", magic, typ, rid, len(payload)) + payload


class Signer:
    def __init__(self, ca_pem, extra=()):
        self.root = tempfile.mkdtemp(prefix="wsg-root-")
        os.chmod(self.root, 0o755)
        self.log_path = tempfile.mktemp(prefix="wsg-log-")
        self.sock, child = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        ca_fd = os.memfd_create("ca")
        os.write(ca_fd, ca_pem)
        os.lseek(ca_fd, 0, os.SEEK_SET)
        try:
            with open(self.log_path, "ab") as log:
                self.proc = subprocess.Popen(
                    [SIGNER, "--ca-fd", str(ca_fd), "--sock-fd", str(child.fileno()),
                     "--root", self.root, "--log-level", "debug", "--seccomp-strict", *extra],
                    pass_fds=(ca_fd, child.fileno()), stdout=log, stderr=log)
        except OSError:
            self.proc = None
            self.close()
            raise
        finally:
            os.close(ca_fd)
            child.close()
        self.sock.settimeout(10)

    def log(self):
        try:
            return open(self.log_path, errors="replace").read()[-4000:]
        except OSError:
            return ""

    def wait_ready(self):
        """Wait for its "ready" line; on failure, clean up and raise with its log."""
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            if "ready" in self.log():
                return self
            if self.proc.poll() is not None:
                break
            time.sleep(0.02)
        log = self.log()
        self.close()
        raise AssertionError("warren-signer not ready: " + log)

    def request(self, data):
        self.sock.send(data)
        return self.sock.recv(65536)

    def sign(self, rid, host, key_der):
        return decode_reply(self.request(sign_msg(rid, host, key_der)))

    def close(self):
        self.sock.close()
        if self.proc is None:
            shutil.rmtree(self.root, ignore_errors=True)
            if os.path.exists(self.log_path):
                os.unlink(self.log_path)
            return
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        shutil.rmtree(self.root, ignore_errors=True)
        try:
            os.unlink(self.log_path)
        except OSError:
            pass


def decode_reply(d):
    magic, typ, rid, length = struct.unpack_from("=IIII", d)
    assert magic == MAGIC and length == len(d) - 16
    if typ == CERT:
        n, res = struct.unpack_from("=II", d, 16)
        assert res == 0 and n == length - 8
        return rid, "cert", x509.load_der_x509_certificate(d[24:24 + n])
    assert typ == ERROR, typ
    code, n = struct.unpack_from("=II", d, 16)
    assert n == length - 8
    return rid, "error", (code, d[24:24 + n].decode())


@pytest.fixture
def ca():
    return make_ca()


@pytest.fixture
def signer(ca):
    s = Signer(ca[2]).wait_ready()
    yield s
    s.close()


def check_leaf(cert, ca, host, leaf_pub):
    ca_key, ca_cert, _ = ca
    assert cert.issuer == ca_cert.subject
    ca_key.public_key().verify(cert.signature, cert.tbs_certificate_bytes,
                               ec.ECDSA(cert.signature_hash_algorithm))
    assert isinstance(cert.signature_hash_algorithm, hashes.SHA256)
    assert cert.public_key().public_bytes(
        serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo) == spki(leaf_pub)
    san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    try:
        ip = ipaddress.ip_address(host)
        assert san.get_values_for_type(x509.IPAddress) == [ip]
        assert san.get_values_for_type(x509.DNSName) == []
    except ValueError:
        assert san.get_values_for_type(x509.DNSName) == [host]
    if len(host) <= 64:
        assert cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)[0].value == host
    bc = cert.extensions.get_extension_for_class(x509.BasicConstraints)
    assert bc.critical and not bc.value.ca
    ku = cert.extensions.get_extension_for_class(x509.KeyUsage)
    assert ku.critical and ku.value.digital_signature and not ku.value.key_cert_sign
    eku = cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    assert list(eku) == [ExtendedKeyUsageOID.SERVER_AUTH]
    assert cert.serial_number > 0 and cert.serial_number < 2**128
    now = datetime.datetime.now(datetime.timezone.utc)
    nb, na = cert.not_valid_before_utc, cert.not_valid_after_utc
    assert abs((now - nb).total_seconds() - 3600) < 120
    assert abs((na - now).total_seconds() - 7 * 86400) < 120


def test_mints_certificates_for_names_and_addresses(signer, ca):
    leaf = ec.generate_private_key(ec.SECP256R1())
    serials = set()
    for i, host in enumerate(["example.com", "api.github.com", "127.0.0.1", "2001:db8::1",
                              "a" * 63 + "." + "b" * 63 + ".example.org"]):
        rid, kind, cert = signer.sign(100 + i, host, spki(leaf.public_key()))
        assert (rid, kind) == (100 + i, "cert"), cert
        check_leaf(cert, ca, host, leaf.public_key())
        serials.add(cert.serial_number)
    assert len(serials) == 5
    # RSA and P-384 leaf keys too
    for k in (rsa.generate_private_key(65537, 2048), ec.generate_private_key(ec.SECP384R1())):
        rid, kind, cert = signer.sign(7, "example.net", spki(k.public_key()))
        assert kind == "cert", cert
        check_leaf(cert, ca, "example.net", k.public_key())


def test_chain_verifies_with_cryptography(signer, ca):
    from cryptography.x509.verification import PolicyBuilder, Store, VerificationError
    leaf = ec.generate_private_key(ec.SECP256R1())
    _, _, cert = signer.sign(1, "svc.example.com", spki(leaf.public_key()))
    store = Store([ca[1]])
    verifier = PolicyBuilder().store(store).build_server_verifier(x509.DNSName("svc.example.com"))
    verifier.verify(cert, [])
    other = PolicyBuilder().store(store).build_server_verifier(x509.DNSName("evil.example.com"))
    with pytest.raises(VerificationError):
        other.verify(cert, [])


def test_refusals_answer_errors_and_keep_serving(signer, ca):
    pub = spki(ec.generate_private_key(ec.SECP256R1()).public_key())
    for host in ["Example.com", "example.com.", "[::1]", "127.1", "0x7f.0.0.1", "a..b",
                 "foo_bar.com", "xn--é.com".encode(), "a b"]:
        rid, kind, (code, msg) = signer.sign(5, host, pub)
        assert (rid, kind) == (5, "error"), host
        assert code in (ERR_HOST, ERR_BADMSG) and msg, (host, code, msg)
    # keys: garbage in a SEQUENCE, Ed25519, RSA 1024, trailing bytes
    bad_keys = [bytes([0x30, 3, 1, 2, 3]),
                spki(ed25519.Ed25519PrivateKey.generate().public_key()),
                spki(rsa.generate_private_key(65537, 1024).public_key())]
    for k in bad_keys:
        rid, kind, (code, msg) = signer.sign(6, "example.com", k)
        assert (kind, code) == ("error", ERR_KEY), msg
    # malformed datagrams: bad magic, request type, truncated, reserved bits
    good = sign_msg(9, "example.com", pub)
    for d in [sign_msg(9, "example.com", pub, magic=1), sign_msg(9, "example.com", pub, typ=CERT),
              good[:-1], good[:20], sign_msg(9, "example.com", pub, reserved=1), good + b"\0"]:
        rid, kind, (code, msg) = decode_reply(signer.request(d))
        assert kind == "error" and code == ERR_BADMSG, msg
        assert rid in (9, 0)
    # above the datagram limit: cut, refused, its id still echoed
    rid, kind, (code, _) = decode_reply(signer.request(struct.pack("=IIII", MAGIC, SIGN, 77, 20000 - 16) + bytes(20000 - 16)))
    assert (rid, kind, code) == (77, "error", ERR_BADMSG)
    rid, kind, (code, _) = decode_reply(signer.request(b"xx"))
    assert (rid, kind, code) == (0, "error", ERR_BADMSG)
    # still serving
    rid, kind, cert = signer.sign(10, "example.com", pub)
    assert kind == "cert"


def test_pipelined_requests_answered_in_order(signer, ca):
    leaf = ec.generate_private_key(ec.SECP256R1())
    hosts = [f"h{i}.example.com" for i in range(32)]
    for i, h in enumerate(hosts):
        signer.sock.send(sign_msg(1000 + i, h if i % 5 else h.upper(), spki(leaf.public_key())))
    for i, h in enumerate(hosts):
        rid, kind, val = decode_reply(signer.sock.recv(65536))
        assert rid == 1000 + i
        if i % 5:
            assert kind == "cert"
            check_leaf(val, ca, h, leaf.public_key())
        else:
            assert kind == "error" and val[0] == ERR_HOST


def test_confined(signer):
    status = dict(l.split(":", 1) for l in open(f"/proc/{signer.proc.pid}/status").read().splitlines())
    nobody = pwd.getpwnam("nobody")
    assert status["Uid"].split() == [str(nobody.pw_uid)] * 4
    assert status["Gid"].split() == [str(nobody.pw_gid)] * 4
    assert status["CapEff"].strip() == "0000000000000000"
    assert status["CapPrm"].strip() == "0000000000000000"
    assert status["CapBnd"].strip() == "0000000000000000"
    assert status["NoNewPrivs"].strip() == "1"
    assert status["Seccomp"].strip() == "2"
    # its root is the empty dir; only stdio and the socket are open
    assert os.readlink(f"/proc/{signer.proc.pid}/root") == signer.root
    fds = sorted(int(f) for f in os.listdir(f"/proc/{signer.proc.pid}/fd"))
    assert len(fds) == 4, fds
    # and it still signs
    _, kind, _ = signer.sign(1, "example.com", spki(ec.generate_private_key(ec.SECP256R1()).public_key()))
    assert kind == "cert"


def test_exits_when_socket_closes(ca):
    s = Signer(ca[2]).wait_ready()
    s.sock.close()
    assert s.proc.wait(10) == 0
    assert "socket closed" in s.log()
    s.close()


def test_exits_when_socket_closes_mid_request(ca):
    s = Signer(ca[2]).wait_ready()
    s.sock.send(sign_msg(1, "example.com", spki(ec.generate_private_key(ec.SECP256R1()).public_key())))
    s.sock.close()
    assert s.proc.wait(10) == 0
    s.close()


def test_leaf_never_outlives_the_ca():
    ca = make_ca(days=2)
    s = Signer(ca[2]).wait_ready()
    try:
        leaf = ec.generate_private_key(ec.SECP256R1())
        _, kind, cert = s.sign(1, "example.com", spki(leaf.public_key()))
        assert kind == "cert"
        assert cert.not_valid_after_utc == ca[1].not_valid_after_utc
    finally:
        s.close()


@pytest.mark.parametrize("pem,why", [
    (b"", "CA: empty input"),
    (b"garbage", "no PEM private key"),
])
def test_bad_ca_refused(pem, why):
    # the CA is read (and refused) before anything else happens
    s = Signer(pem)
    try:
        assert s.proc.wait(10) == 2
        assert why in s.log()
    finally:
        s.close()


def test_mismatched_ca_refused():
    a, b = make_ca(), make_ca()
    pem = a[0].private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption()) + b[1].public_bytes(serialization.Encoding.PEM)
    s = Signer(pem)
    try:
        assert s.proc.wait(10) == 2
        assert "does not match" in s.log()
    finally:
        s.close()


def test_refuses_non_empty_root(ca):
    root = tempfile.mkdtemp(prefix="wsg-root-")
    os.chmod(root, 0o755)
    open(os.path.join(root, "x"), "w").close()
    try:
        s = Signer(ca[2], extra=("--root", root))
        assert s.proc.wait(10) == 2
        assert "not empty" in s.log()
        s.close()
    finally:
        shutil.rmtree(root)
