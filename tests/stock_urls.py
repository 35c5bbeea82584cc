"""Stock servers (workbench/server/stock) on 127.0.0.1 with free ports, and a client's side of them as a user's
machine would hold it: a HOME with a 0600 ~/.netrc, an ssh config named by WORKBENCH_SSH_CONFIG (the server's
client key and known_hosts, StrictHostKeyChecking yes), the servers' certificates trusted via SSL_CERT_FILE.

Used by the integration tests of `workbench run URL` (tests/integration/test_run_url.py) and of secrets on
command lines (tests/integration/test_no_secrets_in_argv.py).
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from tests.helpers import free_port
from workbench.server.daemons.base import ManagedServer, ServerContext
from workbench.server.stock.openssh import StockSshd
from workbench.server.stock.pyftpd import StockFtp, StockFtps
from workbench.server.stock.rsync_daemon import StockRsyncd
from workbench.server.stock.samba import StockSmbd
from workbench.server.stock.webdav import StockWebDav
from workbench.shared.credentials import Credentials, generate

REPO = Path(__file__).resolve().parents[1]
SSH_ALIAS = "stock-ssh"  # the Host alias the test's ssh config gives the stock sshd

# kind: (how to make the server, the service its port is for)
KINDS: dict[str, tuple[Callable[[ServerContext], ManagedServer], str]] = {
    "smb": (StockSmbd, "smb"),
    "ssh": (StockSshd, "ssh"),
    "ftp": (StockFtp, "ftp"),
    "ftps": (StockFtps, "ftp"),
    "rsync": (StockRsyncd, "rsync"),
    "webdav": (StockWebDav, "http"),
    "webdav-digest-https": (lambda ctx: StockWebDav(ctx, auth="digest", tls=True), "http"),
}


@dataclass
class StockSite:
    """Started stock servers sharing one user and password, and the client's HOME that knows them."""

    base: Path
    credentials: Credentials = field(default_factory=generate)
    servers: dict[str, ManagedServer] = field(default_factory=dict)

    @property
    def home(self) -> Path:
        return self.base / "home"

    def start(self, kind: str) -> ManagedServer:
        if kind in self.servers:
            return self.servers[kind]
        make, service = KINDS[kind]
        root = self.base / kind / "root"
        root.mkdir(parents=True)
        ctx = ServerContext(
            root=root,
            bind="127.0.0.1",
            state_dir=self.base / kind / "state",
            credentials=self.credentials,
            ports={service: free_port()},
        )
        server = make(ctx)
        server.start()
        self.servers[kind] = server
        self._write_client_side()
        return server

    def root(self, kind: str) -> Path:
        return self.servers[kind].ctx.root

    def url(self, kind: str) -> str:
        server = self.servers[kind]
        if kind == "ssh":
            # through the alias, so ~/.ssh/config's HostName, Port, User and IdentityFile are what connects
            return f"sftp://{SSH_ALIAS}{Path(server.ctx.root).resolve()}"
        return server.url()  # type: ignore[attr-defined]

    def _write_client_side(self) -> None:
        self.home.mkdir(exist_ok=True)
        netrc = self.home / ".netrc"
        netrc.write_text(f"machine 127.0.0.1 login {self.credentials.user} password {self.credentials.password}\n")
        netrc.chmod(0o600)
        ssh = self.servers.get("ssh")
        if isinstance(ssh, StockSshd):
            (self.home / "ssh_config").write_text(
                f"Host {SSH_ALIAS}\n"
                "  HostName 127.0.0.1\n"
                f"  Port {ssh.ctx.ports['ssh']}\n"
                f"  User {self.credentials.user}\n"
                f"  IdentityFile {ssh.client_key_path}\n"
                "  IdentitiesOnly yes\n"
                f"  UserKnownHostsFile {ssh.known_hosts_path}\n"
                "  StrictHostKeyChecking yes\n"
                "  BatchMode yes\n"
            )
        certs = [p for s in self.servers.values() if (p := getattr(s, "cert_path", None)) and Path(p).exists()]
        (self.home / "ca.pem").write_text("".join(Path(p).read_text() for p in certs))

    def env(self, **extra: str) -> dict[str, str]:
        """The environment of a `workbench` process run as this site's user would (no password in it)."""
        env = {k: v for k, v in os.environ.items() if k not in ("WORKBENCH_PASSWORD", "WORKBENCH_USER", "NETRC")}
        env.pop("COLUMNS", None)
        env.update(
            HOME=str(self.home),
            WORKBENCH_HOME=str(self.base / "workbench-home"),
            WORKBENCH_SSH_CONFIG=str(self.home / "ssh_config"),
            SSL_CERT_FILE=str(self.home / "ca.pem"),  # Python's TLS (aiohttp, ftplib)
            CURL_CA_BUNDLE=str(self.home / "ca.pem"),  # curl's, which it prefers when both are set
            COLUMNS="220",
            PYTHONPATH=os.pathsep.join(x for x in (str(REPO), os.environ.get("PYTHONPATH")) if x),
        )
        env.update(extra)
        return env

    def stop(self) -> None:
        for server in self.servers.values():
            server.stop()
        self.servers.clear()


def stock_site(base: Path, kinds: list[str]) -> Iterator[StockSite]:
    site = StockSite(base)
    try:
        for kind in kinds:
            site.start(kind)
        yield site
    finally:
        site.stop()


def workbench_argv(*args: str) -> list[str]:
    return [sys.executable, "-m", "workbench", *args]


def run_workbench(site: StockSite, *args: str, timeout: float = 300, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        workbench_argv(*args),
        capture_output=True,
        text=True,
        env=site.env(**env),
        timeout=timeout,
        stdin=subprocess.DEVNULL,
    )
