"""The lab's server host with stock servers only: plainly configured daemons and a plain `iperf3 -s`.

`workbench lab --servers stock` replays `workbench run URL` in the lab: nothing of workbench runs on the
server host, the client reaches each daemon by the URL a user would type. This module starts those
daemons inside the server namespace (workbench.server.stock's classes, each with ctx.netns set), gives
their URLs, and prepares the client side as a user's machine would be: a ~/.netrc-style file holding
the password (0600, named by $NETRC, so no secret is in any environment or on any argv) and an ssh
config naming the client key and the known_hosts that holds the stock sshd's host key (named by
$WORKBENCH_SSH_CONFIG, with StrictHostKeyChecking yes: host keys are verified as on a real network).
"""

from __future__ import annotations

import contextlib
import importlib
import os
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

from workbench.lab import netns
from workbench.server.daemons.base import ManagedServer, ServerContext
from workbench.shared import net
from workbench.shared.credentials import Credentials, generate
from workbench.shared.errors import NetworkError, NotFoundError, UnavailableError, WorkbenchError
from workbench.shared.sshconfig import ENV_CONFIG
from workbench.shared.target import DEFAULT_PORTS

ENV_NETRC = "NETRC"  # read by workbench.shared.login (as curl's --netrc-file and Python's netrc do)

# (module in workbench.server.stock, class, the service its URL names): one stock server per protocol
# workbench's own servers cover, so a stock lab and a served lab measure the same clients. FTPS and https
# have no served counterpart.
STOCK_SERVERS: tuple[tuple[str, str, str], ...] = (
    ("webdav", "StockWebDav", "http"),
    ("pyftpd", "StockFtp", "ftp"),
    ("openssh", "StockSshd", "ssh"),
    ("rsync_daemon", "StockRsyncd", "rsync"),
    ("samba", "StockSmbd", "smb"),
    ("netatalk", "StockAfpd", "afp"),
)
STOCK_SERVICES = tuple(service for _module, _cls, service in STOCK_SERVERS)


class PlainIperf3(ManagedServer):
    """`iperf3 -s` as a NAS user runs it (no authentication): the raw-TCP baseline of a stock run."""

    name: ClassVar[str] = "stock-iperf3"
    services: ClassVar[tuple[str, ...]] = ("iperf3",)
    binary: ClassVar[str | None] = "iperf3"
    install_hint: ClassVar[str] = "apt-get install iperf3"

    def prepare(self) -> None:
        pass  # nothing to write: a plain iperf3 server has no configuration

    def command(self) -> list[str]:
        return ["iperf3", "-s", "-B", self.ctx.bind, "-p", str(self.ctx.ports["iperf3"])]

    def wait_ready(self, port: int, timeout: float) -> None:
        # Not by connecting, as the other servers are checked: iperf3 -s takes a connection that closes at once
        # for a failed test and re-opens its listener, and a baseline started in that gap was refused. It is
        # ready once its socket listens, which the namespace's /proc/net/tcp shows without touching it.
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc is not None and self.proc.poll() is not None:
                raise NotFoundError(
                    f"{self.name} exited with status {self.proc.returncode} at start", f"see its log {self.log_path}"
                )
            if _listening(port, self.ctx.netns):
                return
            time.sleep(0.05)
        raise NetworkError(
            f"{self.name} did not listen on port {port} within {timeout:.0f} s", f"see its log {self.log_path}"
        )


def _listening(port: int, ns: str | None) -> bool:
    """Whether a TCP socket listens on `port` in namespace `ns` (None: this one)."""
    with netns.entered(ns) if ns else contextlib.nullcontext():
        return net.listening(port)


@dataclass(frozen=True)
class DaemonStatus:
    """One stock daemon the lab started (or could not), and the URL a user would type for it."""

    name: str
    url: str | None = None  # None for the plain iperf3, which is no file server
    address: str | None = None  # HOST:PORT it listens on
    unavailable: str | None = None
    pid: int | None = None

    def line(self) -> str:
        if self.unavailable:
            return f"{self.name:13} unavailable: {self.unavailable}"
        return f"{self.name:13} pid {self.pid:>7}  {self.url or self.address}"


def _server_class(module: str, cls: str) -> type[ManagedServer] | str:
    """The stock server class, or why it cannot be imported."""
    try:
        found = getattr(importlib.import_module(f"workbench.server.stock.{module}"), cls)
    except (ImportError, AttributeError) as exc:
        return f"workbench.server.stock.{module}.{cls} is not available: {exc}"
    return found


class StockDaemons:
    """The stock daemons on the lab's server host, and the client-side files a user would have for them.

    `up()` starts them (an unavailable one is listed with its reason, the others still serve), `down()`
    stops every one it started. The namespace's removal would kill them anyway; down() is for tidiness
    and for a StockDaemons used outside a lab.
    """

    def __init__(self, work: Path, bind: str, netns: str | None, credentials: Credentials | None = None) -> None:
        self.work = work
        self.root = work / "root"
        self.client_dir = work / "client"  # what a user's machine would hold: netrc, ssh config
        self.credentials = credentials or generate()
        self.ctx = ServerContext(
            root=self.root,
            bind=bind,
            state_dir=work / "state",
            credentials=self.credentials,
            # the server namespace is the lab's own: nothing else listens there, so the usual ports are free
            ports=dict(DEFAULT_PORTS),
            share="plain",
            netns=netns,
        )
        self.servers: list[DaemonStatus] = []
        self.iperf3: str | None = None  # HOST:PORT of the plain iperf3 once it listens
        self._started: list[ManagedServer] = []

    def up(self) -> list[DaemonStatus]:
        """Start every stock daemon and the plain iperf3; on failure or Ctrl-C, stop the ones started."""
        self.root.mkdir(parents=True, exist_ok=True)
        self.client_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        try:
            for module, cls_name, service in STOCK_SERVERS:
                found = _server_class(module, cls_name)
                if isinstance(found, str):
                    self.servers.append(DaemonStatus(f"stock-{service}", unavailable=found))
                    continue
                self.servers.append(self._start(found))
            iperf = self._start(PlainIperf3)
            self.iperf3 = iperf.address
            self.servers.append(iperf)
            self._write_netrc()
            self._write_ssh_config()
        except BaseException:
            self.down()
            raise
        return self.servers

    def _start(self, cls: type[ManagedServer]) -> DaemonStatus:
        reason = cls.unavailable_reason()
        if reason:
            return DaemonStatus(cls.name, unavailable=reason)
        server = cls(self.ctx)
        try:
            pid = server.start()
        except UnavailableError as exc:  # found only once it prepares
            return DaemonStatus(cls.name, unavailable=exc.one_line())
        self._started.append(server)
        url = server.url(self.ctx.bind) if hasattr(server, "url") else None
        address = f"{self.ctx.bind}:{self.ctx.ports[cls.services[0]]}"
        return DaemonStatus(cls.name, url=url, address=address, pid=pid)

    def urls(self) -> list[str]:
        """The URLs of the daemons that serve, in STOCK_SERVERS order."""
        return [s.url for s in self.servers if s.url]

    def iperf3_check(self) -> str | None:
        """The plain iperf3 started again if it has exited since (what its log said last), else None.

        One iperf3 serves every URL's baseline in turn; should it die in between, the next run would have no
        baseline and say only 'connection refused'."""
        server = self.server(PlainIperf3.name)
        if server is None or server.proc is None or server.proc.poll() is None:
            return None
        status = server.proc.returncode
        try:
            last = server.log_path.read_text(errors="replace").strip().splitlines()[-1:]
        except OSError:
            last = []
        self._started.remove(server)
        server.stop()
        restarted = self._start(PlainIperf3)
        again = "started again" if restarted.unavailable is None else f"could not start again: {restarted.unavailable}"
        return f"{PlainIperf3.name} had exited (status {status}{': ' + last[0] if last else ''}); {again}"

    def server(self, name: str) -> ManagedServer | None:
        return next((s for s in self._started if s.name == name), None)

    @property
    def netrc_path(self) -> Path:
        return self.client_dir / "netrc"

    @property
    def ssh_config_path(self) -> Path:
        return self.client_dir / "ssh_config"

    def _write_netrc(self) -> None:
        # One machine line: every stock daemon here logs in the same user with the same password.
        creds = self.credentials
        text = f"machine {self.ctx.bind} login {creds.user} password {creds.password}\n"
        fd = os.open(self.netrc_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as fh:
            fh.write(text)

    def _write_ssh_config(self) -> None:
        from workbench.server.daemons.sshd import Sshd

        sshd = self.server("stock-sshd")
        if not isinstance(sshd, Sshd):  # not started (None)
            return
        # What a user's ~/.ssh/config would say for this host. The client key is named here, not by the
        # URL or the credentials: OpenSSH programs and paramiko (through `ssh -G`) both read it from this file.
        lines = [
            f"Host {self.ctx.bind}",
            f"    IdentityFile {sshd.client_key_path}",
            "    IdentitiesOnly yes",
            f"    UserKnownHostsFile {sshd.known_hosts_path}",
            "    GlobalKnownHostsFile /dev/null",
            "    StrictHostKeyChecking yes",
            "    BatchMode yes",
            "",
        ]
        self.ssh_config_path.write_text("\n".join(lines))
        self.ssh_config_path.chmod(0o600)

    @contextlib.contextmanager
    def client_environment(self) -> Iterator[None]:
        """$NETRC and $WORKBENCH_SSH_CONFIG point at this lab's files for the block, then back as they were.

        Both hold paths, never a secret; WORKBENCH_PASSWORD and WORKBENCH_USER are hidden for the block, so
        the login is what the netrc and the URLs say, not what the calling shell happens to export.
        """
        wanted: dict[str, str | None] = {
            ENV_NETRC: str(self.netrc_path),
            ENV_CONFIG: str(self.ssh_config_path) if self.ssh_config_path.exists() else None,
            "WORKBENCH_PASSWORD": None,
            "WORKBENCH_USER": None,
        }
        before = {key: os.environ.get(key) for key in wanted}
        try:
            for key, value in wanted.items():
                _set_env(key, value)
            yield
        finally:
            for key, value in before.items():
                _set_env(key, value)

    def down(self) -> list[str]:
        """Stop every daemon started here (newest first); what was stopped, for the status lines."""
        lines = []
        while self._started:
            server = self._started.pop()
            with contextlib.suppress(WorkbenchError, OSError):
                server.stop()
            lines.append(f"{server.name:13} stopped")
        return lines


def _set_env(key: str, value: str | None) -> None:
    if value is None:
        os.environ.pop(key, None)
    else:
        os.environ[key] = value
