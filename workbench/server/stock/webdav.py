"""WsgiDAV (on cheroot) as a plain WebDAV server: ctx.root read/write for one user, Basic or Digest auth.

A stranger's WebDAV share as `workbench run http(s)://...` meets it: WsgiDAV's defaults (directory
browser, locks, no symlinks followed), started as its own program with a JSON config. The password lives
only in that config, a 0600 file in this server's directory, never on argv. With `tls=True` it serves
https with a self-signed certificate made here (`cert_path`), which clients trust only when told to
(SSL_CERT_FILE / CURL_CA_BUNDLE), as with any private server's certificate.
"""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from typing import Any, ClassVar
from urllib.parse import quote

from workbench.server.daemons.base import ManagedServer, ServerContext
from workbench.server.stock.tls import write_private, write_self_signed
from workbench.shared.errors import UsageError
from workbench.shared.target import url_host

AUTH_SCHEMES = ("basic", "digest")
# WsgiDAV's verbose 3 logs one line per request: on a 40-file set it is noise and CPU the copy would pay for.
LOG_VERBOSITY = 2


class StockWebDav(ManagedServer):
    """WsgiDAV serving ctx.root at "/" on ctx.bind:ctx.ports['http'] (http, or https with tls=True)."""

    name: ClassVar[str] = "stock-webdav"
    services: ClassVar[tuple[str, ...]] = ("http",)
    install_hint: ClassVar[str] = "pip install 'filecopy-workbench[stock]' (WsgiDAV and cheroot)"

    def __init__(self, ctx: ServerContext, auth: str = "basic", tls: bool = False) -> None:
        if auth not in AUTH_SCHEMES:
            raise UsageError(f"unknown WebDAV auth scheme {auth!r}", f"choose from {', '.join(AUTH_SCHEMES)}")
        super().__init__(ctx)
        self.auth = auth
        self.tls = tls

    @classmethod
    def unavailable_reason(cls) -> str | None:
        missing = [m for m in ("wsgidav", "cheroot") if importlib.util.find_spec(m) is None]
        return f"{' and '.join(missing)} not installed: {cls.install_hint}" if missing else None

    @property
    def config_path(self) -> Path:
        return self.dir / "wsgidav.json"  # WsgiDAV picks the parser by the file's extension

    @property
    def cert_path(self) -> Path:
        """The server's self-signed certificate (PEM): what a client must trust to verify it."""
        return self.dir / "cert.pem"

    @property
    def key_path(self) -> Path:
        return self.dir / "key.pem"

    def url(self, host: str | None = None) -> str:
        """What a user would type to reach the share (no password)."""
        scheme = "https" if self.tls else "http"
        user = quote(self.ctx.credentials.user, safe="")
        return f"{scheme}://{user}@{url_host(host or self.ctx.bind)}:{self.ctx.ports['http']}/"

    def prepare(self) -> None:
        if self.tls:
            names = [self.ctx.bind, "localhost", "127.0.0.1", "::1"]
            write_self_signed(self.cert_path, self.key_path, names, common_name=self.ctx.bind)
        write_private(self.config_path, json.dumps(self.config(), indent=2).encode())

    def config(self) -> dict[str, Any]:
        """WsgiDAV's configuration; it holds the password, so it is only ever written to a 0600 file."""
        creds = self.ctx.credentials
        digest = self.auth == "digest"
        conf: dict[str, Any] = {
            "host": self.ctx.bind,
            "port": self.ctx.ports["http"],
            "provider_mapping": {"/": {"root": str(Path(self.ctx.root).resolve()), "readonly": False}},
            "http_authenticator": {
                "domain_controller": None,  # WsgiDAV's SimpleDomainController, reading simple_dc below
                "accept_basic": not digest,
                "accept_digest": digest,
                "default_to_digest": digest,
            },
            "simple_dc": {"user_mapping": {"*": {creds.user: {"password": creds.password}}}},
            "verbose": LOG_VERBOSITY,
        }
        if self.tls:
            conf["ssl_certificate"] = str(self.cert_path)
            conf["ssl_private_key"] = str(self.key_path)
        return conf

    def command(self) -> list[str]:
        return [sys.executable, "-m", "wsgidav.server.server_cli", "--config", str(self.config_path)]
