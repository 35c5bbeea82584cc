"""Mounted SMB: `mount -t cifs` on Linux and `mount_smbfs` on macOS.

Passwords never touch argv. CIFS reads them from a `credentials=FILE` option pointing at a 0600 file
in a private 0700 directory, deleted as soon as the mount command returns. mount_smbfs has no such
option (its -N flag reads ~/Library/Preferences/nsmb.conf or the keychain, both shared user state we
must not write), so it runs on a pseudo-terminal and the password is typed at its prompt.
"""

from __future__ import annotations

import os
import platform
import shutil
import sys
import tempfile
from pathlib import Path
from urllib.parse import quote

from workbench.protocols.base import ClientOptions
from workbench.protocols.mounts.base import MountClient, classify, which
from workbench.protocols.mounts.commands import CommandRunner, Outcome
from workbench.protocols.mounts.stale import owned_prefix
from workbench.shared.errors import AuthError, NetworkError, NotFoundError, UnavailableError, WorkbenchError
from workbench.shared.target import Target, url_host

# mount.cifs prints "mount error(N): <strerror>"; N is the kernel's errno.
_CIFS_FAILURES: tuple[tuple[str, type[WorkbenchError]], ...] = (
    ("mount error(13)", AuthError),
    ("mount error(2)", NotFoundError),
    ("mount error(19)", UnavailableError),  # ENODEV: no cifs filesystem in the kernel
    ("mount error(110)", NetworkError),
    ("mount error(111)", NetworkError),
    ("mount error(112)", NetworkError),
    ("mount error(113)", NetworkError),
    ("mount error(115)", NetworkError),
)
_SMBFS_FAILURES: tuple[tuple[str, type[WorkbenchError]], ...] = (
    ("authentication error", AuthError),
    ("server rejected the connection", AuthError),
    ("share does not exist", NotFoundError),
    ("server connection failed", NetworkError),
)


def _kernel_has_cifs() -> bool:
    """cifs is built in (listed in /proc/filesystems) or available as a module to load."""
    try:
        if any(line.split()[-1] in ("cifs", "smb3") for line in Path("/proc/filesystems").read_text().splitlines()):
            return True
    except OSError:
        pass
    modules = Path("/lib/modules") / platform.release() / "kernel" / "fs"
    return any(modules.glob("cifs/cifs.ko*")) or any(modules.glob("smb/client/cifs.ko*"))


class CifsClient(MountClient):
    """The Linux kernel's SMB client (mount -t cifs), uncached."""

    protocol = "smb"
    name = "cifs"
    page_cache = "cifs cache=none (reads and writes go to the server) + fadvise DONTNEED"

    def __init__(
        self, target: Target, options: ClientOptions | None = None, *, runner: CommandRunner | None = None
    ) -> None:
        super().__init__(target, options, runner=runner)
        self._secret_dir: Path | None = None

    @classmethod
    def unavailable_reason(cls) -> str | None:
        if sys.platform != "linux":
            return "mount -t cifs is Linux only (on macOS use smb/mount_smbfs)"
        if not _kernel_has_cifs():
            return f"the kernel ({platform.release()}) has no CIFS support: no cifs in /proc/filesystems, no module"
        if not which("mount.cifs"):
            return "mount.cifs not installed: apt-get install cifs-utils"
        if os.geteuid() != 0:
            return "mounting CIFS needs root (use smb/smbclient or smb/pysmb instead)"
        return None

    def mount_argv(self, mountpoint: Path, credentials_file: Path) -> list[str]:
        """`mount -t cifs`; the password is only in credentials_file."""
        timeout = max(1, int(self.options.stall_timeout_s))
        opts = [
            f"credentials={credentials_file}",
            f"port={self.target.port('smb')}",
            f"ip={self.target.host}",
            "cache=none",  # no page cache: every read and write crosses the network
            "soft",  # fail calls when the server is gone instead of retrying forever
            f"echo_interval={max(1, timeout // 3)}",  # declare a silent server dead after about `timeout`
            f"uid={os.getuid()}",
            f"gid={os.getgid()}",
        ]
        unc = f"//{url_host(self.target.host)}/{self.target.share}"
        return ["mount", "-t", "cifs", unc, str(mountpoint), "-o", ",".join(opts)]

    def _mount(self, mountpoint: Path) -> Outcome:
        self._secret_dir = Path(tempfile.mkdtemp(prefix=owned_prefix("cifs-cred")))  # owner pid: see stale.py
        creds_file = self._secret_dir / "credentials"
        fd = os.open(creds_file, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as fh:
            fh.write(f"username={self.target.credentials.user}\npassword={self.target.credentials.password}\n")
        try:
            return self.runner.run(self.mount_argv(mountpoint, creds_file), timeout=self.mount_timeout)
        finally:
            self._cleanup()  # the kernel keeps its own copy once mounted

    def _failure(self, outcome: Outcome) -> WorkbenchError:
        return classify(self.label, outcome, self.mount_timeout, _CIFS_FAILURES)

    def _unmount_commands(self, mountpoint: Path) -> list[list[str]]:
        return [["umount", str(mountpoint)], ["umount", "-f", "-l", str(mountpoint)]]

    def _cleanup(self) -> None:
        if self._secret_dir is not None:
            shutil.rmtree(self._secret_dir, ignore_errors=True)
            self._secret_dir = None


class SmbfsClient(MountClient):
    """macOS's SMB client (mount_smbfs), password typed at its prompt."""

    protocol = "smb"
    name = "mount_smbfs"
    page_cache = "smbfs nodatacache + F_NOCACHE on each file"

    @classmethod
    def unavailable_reason(cls) -> str | None:
        if sys.platform != "darwin":
            return "mount_smbfs is macOS only (on Linux use smb/cifs)"
        if not which("mount_smbfs"):
            return "mount_smbfs not found in /sbin"
        return None

    def smb_url(self) -> str:
        """//user@host:port/share with user and share percent-encoded (no password: it is typed)."""
        user = quote(self.target.credentials.user, safe="")
        share = quote(self.target.share, safe="")
        return f"//{user}@{url_host(self.target.host)}:{self.target.port('smb')}/{share}"

    def mount_argv(self, mountpoint: Path) -> list[str]:
        return ["mount_smbfs", "-o", "nobrowse,soft,nodatacache", self.smb_url(), str(mountpoint)]

    def _mount(self, mountpoint: Path) -> Outcome:
        return self.runner.run_with_prompt(
            self.mount_argv(mountpoint), timeout=self.mount_timeout, answer=self.target.credentials.password
        )

    def _failure(self, outcome: Outcome) -> WorkbenchError:
        return classify(self.label, outcome, self.mount_timeout, _SMBFS_FAILURES)

    def _unmount_commands(self, mountpoint: Path) -> list[list[str]]:
        return [["umount", str(mountpoint)], ["diskutil", "unmount", "force", str(mountpoint)]]
