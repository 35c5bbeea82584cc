"""netatalk's afpd as a NAS runs it: one read/write volume named "plain", netatalk's defaults otherwise.

Unlike workbench's own afpd (daemons/afpd.py) nothing is hardened: the logins (DHX and DHX2), AFP3 UNIX
privileges, extended attributes (auto-detected), symlinks and permissions stay at netatalk's defaults, as
on a stranger's Time Capsule stand-in. Only what keeps this instance apart from the host is set, the same
way as for workbench's afpd (private mount namespace, private accounts with the password set through
chpasswd's stdin, private state): its own port and address, no Zeroconf or Spotlight (no avahi or D-Bus
to talk to), and the "last" CNID scheme, since cnid_metad cannot start where the open-files limit is low.
"""

from __future__ import annotations

from workbench.server.daemons.afpd import Afpd, conf_value
from workbench.shared.target import url_host

VOLUME = "plain"


class StockAfpd(Afpd):
    """netatalk with netatalk's defaults: only config_text differs from workbench's own afpd."""

    name = "stock-afpd"

    def url(self, host: str | None = None) -> str:
        """What a user would type to reach the volume (no password)."""
        where = url_host(host or self.ctx.bind)
        return f"afp://{self.ctx.credentials.user}@{where}:{self.ctx.ports['afp']}/{VOLUME}"

    def config_text(self) -> str:
        glob = {
            "afp port": str(self.ctx.ports["afp"]),
            "afp listen": self.ctx.bind,
            "zeroconf": "no",
            "spotlight": "no",
            "log file": f"{self.inner_dir}/conf/afpd.log",
            "vol dbpath": f"{self.inner_dir}/cnid/",
        }
        glob.update(self.admin_settings())
        volume = {"path": self.volume_path, "cnid scheme": "last", "valid users": self.ctx.credentials.user}
        lines = ["[Global]", *(f"{k} = {conf_value(v)}" for k, v in glob.items()), "", f"[{VOLUME}]"]
        lines += [f"{k} = {conf_value(v)}" for k, v in volume.items()]
        return "\n".join(lines) + "\n"
