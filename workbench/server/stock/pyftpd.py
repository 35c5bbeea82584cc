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

import json
import sys
from importlib.util import find_spec
from pathlib import Path
from typing import ClassVar

from workbench.server.daemons.base import ManagedServer, ServerContext
from workbench.server.stock.tls import write_private, write_self_signed
from workbench.shared.target import url_host

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


def _san_entries(bind: str) -> list[str]:
    """Names the certificate is valid for: the bound address, and loopback when bound to every address."""
    names = [bind, "localhost"]
    if bind in ("0.0.0.0", "::"):
        names += ["127.0.0.1", "::1"]
    return names


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
            write_self_signed(self.cert_path, self.key_path, _san_entries(self.ctx.bind), f"stock-ftps {self.ctx.bind}")
        write_private(self.settings_path, json.dumps(settings).encode())
        self.script_path.write_text(SCRIPT)

    def command(self) -> list[str]:
        # -I: the script sees neither PYTHONPATH nor the user's site-packages, only this Python's own.
        return [sys.executable, "-I", str(self.script_path), str(self.settings_path)]


class StockFtps(StockFtp):
    """The same server with explicit TLS required on the control and data connections (ftps://)."""

    name = "stock-ftps"
    tls = True
    scheme = "ftps"
