"""OpenSSH's sshd as a user runs it: its own sftp-server, a shell for scp and rsync, no gate, key login.

Unlike workbench's own sshd (server/daemons/sshd.py) nothing confines the session: SFTP is OpenSSH's
`sftp-server` binary, `scp -O` and rsync over SSH run through the login shell, every session starts in
the user's home directory. What a host needs to run it privately (OpenSSH 9.2 on Debian 12): the
directory /run/sshd, an absolute path to the binary, `UsePAM no` and `StrictModes no` (the keys live
under a temporary tree). prepare() writes a host key, a client key (its public half the only authorized
key) and a known_hosts line for the address, all in this server's directory. With `UsePAM no` a
password login checks /etc/shadow, so passwords work only for accounts that have one; key login is the
tested path.
"""

from __future__ import annotations

import os
from pathlib import Path
from urllib.parse import quote

from workbench.server.daemons.sshd import SFTP_SERVER, Sshd
from workbench.shared.errors import UnavailableError
from workbench.shared.target import url_host


class StockSshd(Sshd):
    """sshd on ctx.bind:ctx.ports['ssh'] for ctx.credentials.user, with OpenSSH's own sftp-server. Keys, paths
    and the command line are workbench's own sshd's; the configuration has no gate and sshd's defaults."""

    name = "stock-sshd"

    @classmethod
    def unavailable_reason(cls) -> str | None:
        reason = super(Sshd, cls).unavailable_reason()  # skips Sshd's Landlock check: nothing is confined here
        if reason is None and not os.path.exists(SFTP_SERVER):
            reason = f"{SFTP_SERVER} not installed: apt-get install openssh-sftp-server"
        return reason

    def host_key_line(self, names: list[str]) -> str:
        """A known_hosts line for this server's key under `names` (e.g. an alias a test config uses)."""
        kind, blob = self.host_key_path.with_suffix(".pub").read_text().split()[:2]
        return f"{','.join(names)} {kind} {blob}\n"

    def url(self, host: str | None = None) -> str:
        """What a user would type: the served root as an absolute path (no password).

        The root, not the home directory (`sftp://host/`), so runs against this server stay inside
        ctx.root as they do against every other stock server.
        """
        where = url_host(host or self.ctx.bind)
        path = quote(str(Path(self.ctx.root).resolve()))
        return f"sftp://{self.ctx.credentials.user}@{where}:{self.ctx.ports['ssh']}{path}"

    def prepare(self) -> None:
        reason = self.unavailable_reason()
        if reason:
            raise UnavailableError(f"cannot run sshd: {reason}", "see 'workbench doctor'")
        self.ctx.root.mkdir(parents=True, exist_ok=True)
        self._write_keys()
        port = self.ctx.ports["ssh"]
        hosts = ["127.0.0.1", "localhost", "::1"] if self.ctx.bind in ("", "0.0.0.0", "::") else [self.ctx.bind]
        self.known_hosts_path.write_text(self.host_key_line([f"[{h}]:{port}" for h in hosts]))
        self.config_path.write_text(self._config())

    def _config(self) -> str:
        # sshd's defaults otherwise: password and keyboard-interactive allowed, root by key only, a shell
        # for commands (scp -O, rsync), forwarding allowed. Only what a private instance needs is set.
        lines = [
            f"ListenAddress {self.ctx.bind}",
            f"Port {self.ctx.ports['ssh']}",
            f"HostKey {self.host_key_path}",
            f"PidFile {self.dir / 'sshd.pid'}",
            f"AuthorizedKeysFile {self.dir / 'authorized_keys'}",
            f"AllowUsers {self.ctx.credentials.user}",
            "UsePAM no",
            # Keys live in a private dir that may sit under world-writable /tmp.
            "StrictModes no",
            "PrintMotd no",
            "UseDNS no",
            "LogLevel INFO",
            f"Subsystem sftp {SFTP_SERVER}",
        ]
        return "\n".join(lines) + "\n"
