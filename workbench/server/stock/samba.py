"""Samba's smbd as a NAS runs it: one plain read/write share named "plain", Samba's defaults otherwise.

Unlike workbench's own smbd (daemons/smbd.py) nothing is hardened: symlinks, wide links, masks,
ACLs, dialects and signing stay at Samba's defaults, as on a stranger's server. Only what keeps this
instance from touching the host's Samba is set: every state folder and the user database are private
files under this server's directory, it listens on its own port only, and no printers or NetBIOS.
The user is added with `smbpasswd` reading the password from stdin, never from argv.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

from workbench.server.daemons.base import ManagedServer
from workbench.shared.errors import AuthError, NotFoundError, UsageError
from workbench.shared.target import url_host

SHARE = "plain"


def _line(text: str) -> str:
    """Refuse a value that would end its smb.conf line and start another."""
    if "\n" in text or "\r" in text:
        raise UsageError(f"invalid smb.conf value {text!r}", "paths and names must be one line")
    return text


class StockSmbd(ManagedServer):
    name = "stock-smbd"
    services = ("smb",)
    binary = "/usr/sbin/smbd"
    install_hint = "apt-get install samba"

    @property
    def conf_path(self) -> Path:
        return self.dir / "smb.conf"

    def url(self, host: str | None = None) -> str:
        """What a user would type to reach the share (no password)."""
        where = url_host(host or self.ctx.bind)
        return f"smb://{self.ctx.credentials.user}@{where}:{self.ctx.ports['smb']}/{SHARE}"

    def config_text(self) -> str:
        state = self.dir
        folders = {
            "private dir": state / "private",
            "lock directory": state / "lock",
            "state directory": state / "state",
            "cache directory": state / "cache",
            "pid directory": state / "pid",
            "ncalrpc dir": state / "ncalrpc",
            "usershare path": state / "usershares",
            "binddns dir": state / "bind-dns",
        }
        for folder in folders.values():
            folder.mkdir(parents=True, exist_ok=True, mode=0o700)
        in_netns = self.ctx.netns is not None
        glob = {
            **{key: str(path) for key, path in folders.items()},
            "passdb backend": f"tdbsam:{folders['private dir'] / 'passdb.tdb'}",
            "server role": "standalone server",
            "smb ports": str(self.ctx.ports["smb"]),
            # Samba finds no usable interface on the lab's point-to-point TUN link and panics, so inside the
            # lab's namespace (reachable only over that link) it listens on all of that namespace's addresses.
            "interfaces": "" if in_netns else self.ctx.bind,
            "bind interfaces only": "no" if in_netns else "yes",
            "disable netbios": "yes",
            "load printers": "no",
            "printcap name": "/dev/null",
            "disable spoolss": "yes",
            "log level": "1",
        }
        share = {
            "path": str(self.ctx.root),
            "read only": "no",
            "valid users": self.ctx.credentials.user,
        }
        lines = ["[global]", *(f"    {k} = {_line(v)}" for k, v in glob.items()), "", f"[{SHARE}]"]
        lines += [f"    {k} = {_line(v)}" for k, v in share.items()]
        return "\n".join(lines) + "\n"

    def prepare(self) -> None:
        self.ctx.root.mkdir(parents=True, exist_ok=True)
        self.conf_path.write_text(self.config_text())
        self.conf_path.chmod(0o600)
        self._add_user()

    def _add_user(self) -> None:
        # New password and its retype, both on stdin.
        creds = self.ctx.credentials
        try:
            done = subprocess.run(
                ["smbpasswd", "-c", str(self.conf_path), "-s", "-a", creds.user],
                input=f"{creds.password}\n{creds.password}\n".encode(),
                capture_output=True,
                timeout=30,
            )
        except FileNotFoundError as exc:
            raise NotFoundError("smbpasswd is not installed", "apt-get install samba-common-bin") from exc
        if done.returncode != 0:
            why = done.stderr.decode(errors="replace").strip().splitlines() or ["no message"]
            raise AuthError(
                f"smbpasswd could not add SMB user {creds.user!r}: {why[-1]}",
                f"the user must be a Unix account on this host; see {self.conf_path}",
            )

    def command(self) -> list[str]:
        return [
            self.binary or "/usr/sbin/smbd",
            "--foreground",
            "--no-process-group",
            "--debug-stdout",
            "-s",
            str(self.conf_path),
        ]
