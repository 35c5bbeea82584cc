"""Samba's smbd as a NAS runs it: one plain read/write share named "plain", Samba's defaults otherwise.

Unlike workbench's own smbd (daemons/smbd.py) nothing is hardened: symlinks, wide links, masks,
ACLs, dialects and signing stay at Samba's defaults, as on a stranger's server. Only what keeps this
instance from touching the host's Samba is set: every state folder and the user database are private
files under this server's directory, it listens on its own port only, and no printers or NetBIOS.
The user is added with `smbpasswd` reading the password from stdin, never from argv.
"""

from __future__ import annotations

from workbench.server.daemons.smbd import Smbd
from workbench.shared.errors import UsageError
from workbench.shared.target import url_host

SHARE = "plain"


def _line(text: str) -> str:
    """Refuse a value that would end its smb.conf line and start another."""
    if "\n" in text or "\r" in text:
        raise UsageError(f"invalid smb.conf value {text!r}", "paths and names must be one line")
    return text


class StockSmbd(Smbd):
    """Samba with Samba's defaults: only config_text differs from workbench's own smbd (same private state,
    same user setup through smbpasswd's stdin, same command line)."""

    name = "stock-smbd"

    def url(self, host: str | None = None) -> str:
        """What a user would type to reach the share (no password)."""
        where = url_host(host or self.ctx.bind)
        return f"smb://{self.ctx.credentials.user}@{where}:{self.ctx.ports['smb']}/{SHARE}"

    def config_text(self) -> str:
        folders = self.private_folders()
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
