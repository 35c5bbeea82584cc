"""pyftpdlib as its own program, configured as a user would: one read/write user, optionally explicit TLS.

Nothing of workbench runs on the far side: prepare() writes a small pyftpdlib script and its settings
(user, password, root, address) into this server's directory, the settings file mode 0600 so the
password never reaches argv; the script runs under this Python. Passive ports are pyftpdlib's default
(any free port). `StockFtps` serves explicit TLS (AUTH TLS, PROT P) with TLS_FTPHandler and a
self-signed certificate made here with `cryptography`; TLS is required on the control and the data
connections. Clients trust it through `cert_path` (e.g. SSL_CERT_FILE=cert_path).

`offer_mlsd=False` drops MLSD/MLST, as servers such as vsftpd do, so clients' LIST fallbacks get tested.
"""

from __future__ import annotations

import datetime
import ipaddress
import json
import os
import sys
from importlib.util import find_spec
from pathlib import Path
from typing import ClassVar

from workbench.server.daemons.base import ManagedServer, ServerContext
from workbench.shared.target import url_host

CERT_DAYS = 30  # the certificate is remade at every start, so its lifetime only has to outlast one run

# The program the server runs: plain pyftpdlib, no workbench import (its settings come from a 0600 file).
SCRIPT = '''\
"""A plain pyftpdlib server: one read/write user, settings from the JSON file named on the command line."""
import json
import sys

from pyftpdlib.authorizers import DummyAuthorizer
from pyftpdlib.servers import FTPServer

with open(sys.argv[1]) as fh:
    conf = json.load(fh)
authorizer = DummyAuthorizer()
authorizer.add_user(conf["user"], conf["password"], conf["root"], perm="elradfmwMT")
if conf["tls"]:
    from pyftpdlib.handlers import TLS_FTPHandler as Handler

    Handler.certfile = conf["certfile"]
    Handler.keyfile = conf["keyfile"]
    Handler.tls_control_required = True
    Handler.tls_data_required = True
else:
    from pyftpdlib.handlers import FTPHandler as Handler
if not conf["mlsd"]:
    Handler.proto_cmds = {k: v for k, v in Handler.proto_cmds.items() if k not in ("MLSD", "MLST")}
Handler.authorizer = authorizer
Handler.banner = "pyftpdlib ready."
server = FTPServer((conf["bind"], conf["port"]), Handler)
server.serve_forever()
'''


def _write_private(path: Path, data: bytes) -> None:
    """Write `data` to a file that is mode 0600 from its first byte."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as fh:
        fh.write(data)
    os.chmod(path, 0o600)


def _san_entries(bind: str) -> list[str]:
    """Names the certificate is valid for: the bound address, and loopback when bound to every address."""
    names = [bind, "localhost"]
    if bind in ("0.0.0.0", "::"):
        names += ["127.0.0.1", "::1"]
    return names


def make_self_signed(cert_path: Path, key_path: Path, names: list[str]) -> None:
    """A self-signed server certificate for `names` (IP addresses or DNS names), key mode 0600."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, f"stock-ftps {names[0]}")])
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
        .public_key(key.public_key())
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
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(key.public_key()), critical=False)
        .sign(key, hashes.SHA256())
    )
    pem_key = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    _write_private(key_path, pem_key)
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))


class StockFtp(ManagedServer):
    """pyftpdlib on ctx.bind:ctx.ports['ftp'] serving ctx.root read/write for ctx.credentials' user."""

    name = "stock-ftp"
    services = ("ftp",)
    tls: ClassVar[bool] = False
    scheme: ClassVar[str] = "ftp"

    def __init__(self, ctx: ServerContext, *, offer_mlsd: bool = True) -> None:
        super().__init__(ctx)
        self.offer_mlsd = offer_mlsd

    @classmethod
    def unavailable_reason(cls) -> str | None:
        if find_spec("pyftpdlib") is None:
            return "pyftpdlib not installed: pip install pyftpdlib"
        if cls.tls and find_spec("OpenSSL") is None:
            return "pyOpenSSL not installed (pyftpdlib's TLS needs it): pip install 'filecopy-workbench[stock]'"
        return None

    @property
    def script_path(self) -> Path:
        return self.dir / "ftpd.py"

    @property
    def settings_path(self) -> Path:
        return self.dir / "ftpd.json"

    @property
    def cert_path(self) -> Path:
        """The server's self-signed certificate (TLS only): what a client must trust."""
        return self.dir / "cert.pem"

    @property
    def key_path(self) -> Path:
        return self.dir / "key.pem"

    def url(self, host: str | None = None) -> str:
        """What a user would type to reach the login directory (no password)."""
        where = url_host(host or self.ctx.bind)
        return f"{self.scheme}://{self.ctx.credentials.user}@{where}:{self.ctx.ports['ftp']}/"

    def prepare(self) -> None:
        self.ctx.root.mkdir(parents=True, exist_ok=True)
        creds = self.ctx.credentials
        settings = {
            "user": creds.user,
            "password": creds.password,
            "root": str(Path(self.ctx.root).resolve()),
            "bind": self.ctx.bind,
            "port": self.ctx.ports["ftp"],
            "tls": self.tls,
            "mlsd": self.offer_mlsd,
            "certfile": str(self.cert_path),
            "keyfile": str(self.key_path),
        }
        if self.tls:
            make_self_signed(self.cert_path, self.key_path, _san_entries(self.ctx.bind))
        _write_private(self.settings_path, json.dumps(settings).encode())
        self.script_path.write_text(SCRIPT)

    def command(self) -> list[str]:
        # -I: the script sees neither PYTHONPATH nor the user's site-packages, only this Python's own.
        return [sys.executable, "-I", str(self.script_path), str(self.settings_path)]


class StockFtps(StockFtp):
    """The same server with explicit TLS required on the control and data connections (ftps://)."""

    name = "stock-ftps"
    tls = True
    scheme = "ftps"
