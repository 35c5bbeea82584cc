"""The self-signed certificates of the stock TLS servers (FTPS, https WebDAV), and their private files.

A certificate is made at every start and lives minutes (a test's or a lab's server), so its lifetime only
has to outlast one run. Clients trust it only when told to (SSL_CERT_FILE / CURL_CA_BUNDLE), as with any
private server's certificate.
"""

from __future__ import annotations

import datetime
import ipaddress
import os
from pathlib import Path

CERT_DAYS = 30


def write_private(path: Path, data: bytes) -> None:
    """Write a file that is mode 0600 from its first byte (it holds a password or a private key)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as fh:
        fh.write(data)
    os.chmod(path, 0o600)


def write_self_signed(cert_path: Path, key_path: Path, names: list[str], common_name: str) -> None:
    """A self-signed server certificate valid for `names`, its key mode 0600.

    Each name becomes a subjectAltName: an IP address entry when it parses as one, else a DNS name.
    """
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    public = key.public_key()
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])
    alt: list[x509.GeneralName] = []
    for name in dict.fromkeys(names):
        try:
            alt.append(x509.IPAddress(ipaddress.ip_address(name)))
        except ValueError:
            alt.append(x509.DNSName(name))
    now = datetime.datetime.now(datetime.UTC)
    usage = dict.fromkeys(
        ("content_commitment", "key_encipherment", "data_encipherment", "key_agreement", "key_cert_sign"), False
    )
    cert = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(subject)
        .public_key(public)
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))  # a client clock a little behind still accepts it
        .not_valid_after(now + datetime.timedelta(days=CERT_DAYS))
        .add_extension(x509.SubjectAlternativeName(alt), critical=False)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(digital_signature=True, crl_sign=False, encipher_only=False, decipher_only=False, **usage),
            critical=True,
        )
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(public), critical=False)
        .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(public), critical=False)
        .sign(key, hashes.SHA256())
    )
    pem_key = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    write_private(key_path, pem_key)
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
