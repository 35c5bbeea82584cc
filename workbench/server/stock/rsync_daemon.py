"""An rsync daemon as a NAS runs one: a module named "plain" exporting ctx.root, password-protected.

rsyncd.conf's defaults otherwise (chroot when started as root, no refused options, rsync's own symlink
handling), unlike workbench's hardened daemon (daemons/rsyncd.py). What is set and why: `auth users`
and a secrets file (0600 from its first byte; the password is never on argv); `read only = no`;
started as root, transfers run as the owner of ctx.root, as an admin gives a module to the user whose
directory it is (rsync's default, nobody, could not write there); an I/O `timeout`, since the daemon
has none by default and a vanished client would hold a process forever. Config, pid, lock, log and
secrets stay in this server's private directory.
"""

from __future__ import annotations

import os
from pathlib import Path

from workbench.server.daemons.base import ManagedServer
from workbench.shared.errors import UsageError
from workbench.shared.target import url_host

MODULE = "plain"
IO_TIMEOUT_SECONDS = 60


def _line(text: str) -> str:
    """Refuse a value that would end its rsyncd.conf line and start another."""
    if "\n" in text or "\r" in text:
        raise UsageError(f"invalid rsyncd.conf value {text!r}", "paths and names must be one line")
    return text


class StockRsyncd(ManagedServer):
    """`rsync --daemon` on ctx.bind:ctx.ports['rsync'] with module "plain" at ctx.root."""

    name = "stock-rsyncd"
    services = ("rsync",)
    binary = "rsync"
    install_hint = "apt-get install rsync"

    @property
    def config_path(self) -> Path:
        return self.dir / "rsyncd.conf"

    @property
    def secrets_path(self) -> Path:
        return self.dir / "rsyncd.secrets"

    def url(self, host: str | None = None) -> str:
        """What a user would type to reach the module (no password)."""
        where = url_host(host or self.ctx.bind)
        return f"rsync://{self.ctx.credentials.user}@{where}:{self.ctx.ports['rsync']}/{MODULE}"

    def prepare(self) -> None:
        self.ctx.root.mkdir(parents=True, exist_ok=True)
        creds = self.ctx.credentials
        self.secrets_path.unlink(missing_ok=True)
        # 0600 from the first byte: rsyncd's strict modes refuse a secrets file others can read.
        fd = os.open(self.secrets_path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as fh:
            fh.write(f"{_line(creds.user)}:{_line(creds.password)}\n")
        self.config_path.write_text(self.config_text())
        self.config_path.chmod(0o600)

    def config_text(self) -> str:
        root = Path(self.ctx.root).resolve()
        lines = [
            f"pid file = {self.dir / 'rsyncd.pid'}",
            f"lock file = {self.dir / 'rsyncd.lock'}",
            f"log file = {self.dir / 'rsyncd.log'}",
            f"address = {self.ctx.bind}",
            f"port = {self.ctx.ports['rsync']}",
            f"timeout = {IO_TIMEOUT_SECONDS}",
        ]
        if os.geteuid() != 0:
            lines.append("use chroot = no")  # chroot needs root; rsync then keeps paths inside the module itself
        lines += ["", f"[{MODULE}]", f"path = {_line(str(root))}", "read only = no"]
        if os.geteuid() == 0:
            owner = root.stat()
            lines += [f"uid = {owner.st_uid}", f"gid = {owner.st_gid}"]
        lines += [f"auth users = {_line(self.ctx.credentials.user)}", f"secrets file = {self.secrets_path}"]
        return "\n".join(lines) + "\n"

    def command(self) -> list[str]:
        return ["rsync", "--daemon", "--no-detach", f"--config={self.config_path}"]
