"""Test CA, server certificates and SSH keys of the bed (python `cryptography`)."""
import datetime
import ipaddress
import os

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed25519
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

NOW = lambda: datetime.datetime.now(datetime.timezone.utc)  # noqa: E731


def _write(path, data, mode=0o644):
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    with os.fdopen(fd, "wb") as f:
        f.write(data)


def _key_pem(key):
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption())


def make_ca(directory, cn):
    """A CA valid 2 days; returns (cert, key, cert_path)."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn),
                      x509.NameAttribute(NameOID.ORGANIZATION_NAME, "Warren fakenet (test only)")])
    ski = x509.SubjectKeyIdentifier.from_public_key(key.public_key())
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name)
            .public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(NOW() - datetime.timedelta(hours=1))
            .not_valid_after(NOW() + datetime.timedelta(days=2))
            .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
            .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                                         content_commitment=False, key_encipherment=False,
                                         data_encipherment=False, key_agreement=False,
                                         encipher_only=False, decipher_only=False), critical=True)
            .add_extension(ski, critical=False)
            .add_extension(x509.AuthorityKeyIdentifier.from_issuer_subject_key_identifier(ski), critical=False)
            .sign(key, hashes.SHA256()))
    path = os.path.join(directory, f"{cn}.crt")
    _write(path, cert.public_bytes(serialization.Encoding.PEM))
    _write(os.path.join(directory, f"{cn}.key"), _key_pem(key), 0o600)
    return cert, key, path


def make_leaf(directory, stem, ca_cert, ca_key, names, ips=(), expired=False):
    """A server certificate for `names` (DNS SANs, wildcards allowed) and
    `ips`; returns (crt_path, key_path)."""
    key = ec.generate_private_key(ec.SECP256R1())
    sans = [x509.DNSName(n) for n in names] + [x509.IPAddress(ipaddress.ip_address(i)) for i in ips]
    if expired:
        nb, na = NOW() - datetime.timedelta(days=10), NOW() - datetime.timedelta(days=3)
    else:
        nb, na = NOW() - datetime.timedelta(hours=1), NOW() + datetime.timedelta(days=2)
    cert = (x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, names[0])]))
            .issuer_name(ca_cert.subject).public_key(key.public_key())
            .serial_number(x509.random_serial_number()).not_valid_before(nb).not_valid_after(na)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=False, crl_sign=False,
                                         content_commitment=False, key_encipherment=False,
                                         data_encipherment=False, key_agreement=False,
                                         encipher_only=False, decipher_only=False), critical=True)
            .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
            .add_extension(x509.SubjectAlternativeName(sans), critical=False)
            .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
            .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()),
                           critical=False)
            .sign(ca_key, hashes.SHA256()))
    crt, kp = os.path.join(directory, f"{stem}.crt"), os.path.join(directory, f"{stem}.key")
    _write(crt, cert.public_bytes(serialization.Encoding.PEM))
    _write(kp, _key_pem(key), 0o600)
    return crt, kp


def make_ssh_key(path, comment):
    """An ed25519 key pair in OpenSSH format at path / path.pub; returns
    the public key line."""
    key = ed25519.Ed25519PrivateKey.generate()
    _write(path, key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.OpenSSH,
                                   serialization.NoEncryption()), 0o600)
    pub = key.public_key().public_bytes(serialization.Encoding.OpenSSH,
                                        serialization.PublicFormat.OpenSSH).decode() + " " + comment
    _write(path + ".pub", (pub + "\n").encode())
    return pub
