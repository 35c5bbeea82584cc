"""rsync daemon with a private config: one password-protected module exporting the served root."""

from __future__ import annotations

import os
from pathlib import Path

from workbench.servers.base import ManagedServer

IO_TIMEOUT_SECONDS = 60  # rsyncd's default is no timeout: a vanished client would hold a process forever


class Rsyncd(ManagedServer):
    """`rsync --daemon` on ctx.bind:ctx.ports['rsync'], module ctx.share chrooted to ctx.root."""

    name = "rsyncd"
    services = ("rsync",)
    binary = "rsync"
    install_hint = "apt-get install rsync"

    @property
    def config_path(self) -> Path:
        return self.dir / "rsyncd.conf"

    @property
    def secrets_path(self) -> Path:
        return self.dir / "rsyncd.secrets"

    def prepare(self) -> None:
        creds = self.ctx.credentials
        # 0600 from the first byte: rsyncd's strict modes refuse a secrets file others can read.
        fd = os.open(self.secrets_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as fh:
            fh.write(f"{creds.user}:{creds.password}\n")
        os.chmod(self.secrets_path, 0o600)
        self.config_path.write_text(self._config())

    def command(self) -> list[str]:
        return ["rsync", "--daemon", "--no-detach", f"--config={self.config_path}"]

    def _config(self) -> str:
        lines = [
            f"pid file = {self.dir / 'rsyncd.pid'}",
            f"log file = {self.dir / 'rsyncd.log'}",
            f"lock file = {self.dir / 'rsyncd.lock'}",
            f"address = {self.ctx.bind}",
            f"port = {self.ctx.ports['rsync']}",
            # Started as root, rsyncd would otherwise write files as 'nobody'.
            f"uid = {os.getuid()}",
            f"gid = {os.getgid()}",
            "use chroot = yes",
            "max connections = 16",
            f"timeout = {IO_TIMEOUT_SECONDS}",
            "",
            f"[{self.ctx.share}]",
            f"path = {Path(self.ctx.root).resolve()}",
            "comment = workbench served root",
            "read only = no",
            "list = no",
            f"auth users = {self.ctx.credentials.user}",
            f"secrets file = {self.secrets_path}",
            "strict modes = yes",
        ]
        return "\n".join(lines) + "\n"
