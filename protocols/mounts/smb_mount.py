"""Mounted SMB: `mount -t cifs` on Linux and `mount_smbfs` on macOS.

Passwords never touch argv. CIFS reads them from a `credentials=FILE` option pointing at a 0600 file
in a private 0700 directory, deleted as soon as the mount command returns. mount_smbfs has no such
option (its -N flag reads ~/Library/Preferences/nsmb.conf or the keychain, both shared user state we
must not write), so it runs on a pseudo-terminal and the password is typed at its prompt.
"""

from __future__ import annotations

import dataclasses
import os
import platform
import shutil
import sys
import tempfile
from pathlib import Path
from urllib.parse import quote

from workbench.protocols.base import ClientOptions
from workbench.protocols.details import ClientDetails
from workbench.protocols.mounts.base import MountClient, classify, which
from workbench.protocols.mounts.commands import CommandRunner, Outcome
from workbench.protocols.mounts.stale import owned_prefix
from workbench.protocols.smb_negotiated import (
    BY_NAME,
    from_cifs_debugdata,
    from_smbutil_json,
    max_in_flight_from_cifs_stats,
    merge,
    sizes_from_cifs_mount_options,
)
from workbench.protocols.smb_options import cannot
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


CIFS_PROC = Path("/proc/fs/cifs")  # the kernel SMB client's own account of its sessions


def _cifs_protection(options: ClientOptions) -> list[str]:
    """Mount options for the user's signing, encryption and dialect. The kernel signs only what it requires, so
    "on" is `sign` like "required" (the row's negotiated figures say required); "off" adds nothing, the
    kernel's default (it signs when the server requires it)."""
    said = []
    if options.smb_signing in ("on", "required"):
        said.append("sign")
    if options.smb_encryption == "required":
        said.append("seal")
    if options.smb_max_dialect is not None:
        said.append(f"vers={BY_NAME[options.smb_max_dialect].cifs_vers}")  # offers exactly that dialect
    return said


def _read_text(path: Path) -> str | None:
    try:
        return path.read_text(errors="replace")
    except OSError:
        return None


def _mount_options(mountpoint: Path) -> str | None:
    """The options /proc/mounts lists for the cifs mount at `mountpoint` (octal escapes as the kernel writes)."""
    where = str(mountpoint).replace(" ", "\\040")
    for line in (_read_text(Path("/proc/mounts")) or "").splitlines():
        fields = line.split()
        if len(fields) >= 4 and fields[1] == where and fields[2] in ("cifs", "smb3"):
            return fields[3]
    return None


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
            *_cifs_protection(self.options),
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

    def details(self) -> ClientDetails:
        """The kernel's own account of the mounted session: DebugData for the dialect, signing and encryption,
        the mount's options for rsize/wsize, Stats for the most requests it kept in flight."""
        info = super().details()
        debugdata = _read_text(CIFS_PROC / "DebugData")
        if self.mountpoint is None or debugdata is None:
            return info
        negotiated = from_cifs_debugdata(debugdata, self.target.host)
        sizes = sizes_from_cifs_mount_options(_mount_options(self.mountpoint) or "")
        in_flight = max_in_flight_from_cifs_stats(_read_text(CIFS_PROC / "Stats") or "")
        if in_flight is not None:
            negotiated = dataclasses.replace(negotiated, credits=in_flight)
        return merge(merge(info, sizes), negotiated)

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

    def details(self) -> ClientDetails:
        """What macOS negotiated for this mount, as `smbutil statshares` reports it."""
        info = super().details()
        if self.mountpoint is None:
            return info
        shown = self.runner.run(["smbutil", "statshares", "-m", str(self.mountpoint), "-f", "json"], timeout=15.0)
        return merge(info, from_smbutil_json(shown.output, self.target.share)) if shown.ok else info

    def _mount(self, mountpoint: Path) -> Outcome:
        # signing, encryption and the dialects of a macOS mount come from nsmb.conf, shared user state that
        # workbench does not write: asked for any of them, the row says it cannot rather than ignore it
        if any((self.options.smb_signing, self.options.smb_encryption, self.options.smb_max_dialect)):
            raise cannot(
                "mount_smbfs",
                "set SMB signing, encryption or the dialect per mount (they come from nsmb.conf)",
                "set them in /etc/nsmb.conf, or use smb/smbclient, smb/smbprotocol",
            )
        return self.runner.run_with_prompt(
            self.mount_argv(mountpoint), timeout=self.mount_timeout, answer=self.target.credentials.password
        )

    def _failure(self, outcome: Outcome) -> WorkbenchError:
        return classify(self.label, outcome, self.mount_timeout, _SMBFS_FAILURES)

    def _unmount_commands(self, mountpoint: Path) -> list[list[str]]:
        return [["umount", str(mountpoint)], ["diskutil", "unmount", "force", str(mountpoint)]]
