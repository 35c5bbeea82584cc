"""AFP through macOS's `mount_afp`, the way Finder users copy to an old Time Capsule or NAS.

Keeping the password secret: mount_afp takes it only in the URL (afp://user:password@host/share),
which puts it in argv and so in `ps` for every local user, or interactively with `-i`, where it reads
the password from its controlling terminal. The keychain would work too but is shared user state we
must not write. So: `-i`, no password in the URL, and the command runs on a pseudo-terminal where the
password is typed at its prompt (once: a second prompt means it was refused). `-s` asks for a soft
mount, so a dead server fails calls instead of hanging them; unmounting is `umount`, then
`diskutil unmount force`. AFP listens on 548 unless Target.ports has an "afp" entry.
"""

from __future__ import annotations

import sys
from pathlib import Path
from urllib.parse import quote

from workbench.protocols.mounts.base import MountClient, classify, which
from workbench.protocols.mounts.commands import Outcome
from workbench.shared.errors import AuthError, NetworkError, NotFoundError, WorkbenchError
from workbench.shared.target import url_host

AFP_PORT = 548

# mount_afp reports "AFPMountURL returned error <afp code>, errno is <n>"; AFP result codes (AppleShare).
_AFP_FAILURES: tuple[tuple[str, type[WorkbenchError]], ...] = (
    ("error -5023", AuthError),  # kFPUserNotAuth
    ("error -5000", AuthError),  # kFPAccessDenied
    ("error -5002", AuthError),  # kFPBadUAM
    ("error -5016", NetworkError),  # kFPNoServer
    ("error -5018", NotFoundError),  # kFPObjectNotFound: no such volume
    ("errno is 60", NetworkError),  # ETIMEDOUT on macOS
    ("errno is 61", NetworkError),  # ECONNREFUSED on macOS
    ("errno is 64", NetworkError),  # EHOSTDOWN on macOS
    ("errno is 65", NetworkError),  # EHOSTUNREACH on macOS
)


def afp_url(user: str, host: str, port: int, share: str) -> str:
    """afp://user@host:port/share, user and share percent-encoded (';', ':', '@', '/' all have meanings)."""
    return f"afp://{quote(user, safe='')}@{url_host(host)}:{port}/{quote(share, safe='')}"


class AfpClient(MountClient):
    """macOS's AFP client (mount_afp -i), password typed at its prompt."""

    protocol = "afp"
    name = "mount_afp"
    page_cache = "F_NOCACHE on each file (macOS unified buffer cache bypassed)"

    @classmethod
    def unavailable_reason(cls) -> str | None:
        if sys.platform != "darwin":
            return "mount_afp is macOS only"
        if not which("mount_afp"):
            return "mount_afp not found: this macOS no longer ships the AFP client"
        return None

    def url(self) -> str:
        port = int(self.target.ports.get("afp", AFP_PORT))
        return afp_url(self.target.credentials.user, self.target.host, port, self.target.share)

    def mount_argv(self, mountpoint: Path) -> list[str]:
        return ["mount_afp", "-i", "-s", "-o", "nobrowse", self.url(), str(mountpoint)]

    def _mount(self, mountpoint: Path) -> Outcome:
        return self.runner.run_with_prompt(
            self.mount_argv(mountpoint), timeout=self.mount_timeout, answer=self.target.credentials.password
        )

    def _failure(self, outcome: Outcome) -> WorkbenchError:
        return classify(self.label, outcome, self.mount_timeout, _AFP_FAILURES)

    def _unmount_commands(self, mountpoint: Path) -> list[list[str]]:
        # unmount even on failure: a stale AFP mount blocks the next run
        return [["umount", str(mountpoint)], ["diskutil", "unmount", "force", str(mountpoint)]]
