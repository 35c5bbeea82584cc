"""rsync daemon with a private config: one password-protected module exporting the served root.

Threat model: the authenticated client is hostile. Started as root, the daemon chroots into the root
and runs every transfer as a numeric uid/gid of its own that no account uses (the first free one from
61000 up; no system file is touched). That uid may read the root and write only beneath incoming/,
through POSIX ACLs (access + default entries, so directories other servers create there later stay
writable for it); nothing is made world-writable. The module refuses devices and specials, strips
setuid/setgid from incoming files and munges stored symlinks so none can lead out of the module for
a server that follows it. Started by another user, the daemon runs transfers as that user.
"""

from __future__ import annotations

import os
import struct
from pathlib import Path

from workbench.server.daemons.base import ManagedServer
from workbench.shared.errors import UnavailableError
from workbench.shared.paths import FILES_DIR, INCOMING_DIR

IO_TIMEOUT_SECONDS = 60  # rsyncd's default is no timeout: a vanished client would hold a process forever
FIRST_TRANSFER_ID = 61000  # above Debian's dynamic user range ends (59999): never a real account
# Options a hostile client could use to plant devices, FIFOs or sockets, or to write into existing devices.
REFUSED_OPTIONS = ("devices", "specials", "D", "copy-devices", "write-devices")

# POSIX ACL xattr format (linux/posix_acl_xattr.h): a u32 version 2 header, then (u16 tag, u16 perm,
# u32 id) entries sorted by tag, then id.
_ACL_VERSION = 2
_USER_OBJ, _USER, _GROUP_OBJ, _MASK, _OTHER = 0x01, 0x02, 0x04, 0x10, 0x20
_UNDEFINED_ID = 0xFFFFFFFF
_RWX, _R_X = 7, 5


def free_transfer_ids(first: int = FIRST_TRANSFER_ID) -> tuple[int, int]:
    """The first uid from `first` up (and the same gid) that /etc/passwd and /etc/group do not list."""
    used_uids = _ids_in("/etc/passwd")
    used_gids = _ids_in("/etc/group")
    for n in range(first, first + 4000):
        if n not in used_uids and n not in used_gids:
            return n, n
    raise UnavailableError(
        f"no free uid/gid between {first} and {first + 3999} for the rsync daemon's transfers",
        "free one in /etc/passwd and /etc/group",
    )


def _ids_in(path: str) -> set[int]:
    ids: set[int] = set()
    try:
        with open(path) as fh:
            for line in fh:
                fields = line.split(":")
                if len(fields) > 2 and fields[2].isdigit():
                    ids.add(int(fields[2]))
    except OSError:
        pass
    return ids


def acl_bytes(mode: int, uid: int, uid_perm: int) -> bytes:
    """An ACL equal to `mode` (other never writable) plus user `uid` with `uid_perm`, in the xattr format."""
    owner, group, other = (mode >> 6) & 7, (mode >> 3) & 7, mode & _R_X
    entries = [
        (_USER_OBJ, owner, _UNDEFINED_ID),
        (_USER, uid_perm, uid),
        (_GROUP_OBJ, group, _UNDEFINED_ID),
        (_MASK, group | uid_perm, _UNDEFINED_ID),  # the mask must let both group entries through
        (_OTHER, other, _UNDEFINED_ID),
    ]
    return struct.pack("<I", _ACL_VERSION) + b"".join(struct.pack("<HHI", *e) for e in entries)


def grant_tree(top: Path, uid: int, perm: int) -> None:
    """Give `uid` `perm` on every directory of `top` and on what is created there later (default ACL).

    fd-based and never following a symlink: a link planted beneath the root must not get an ACL put on
    whatever it points at, since this runs as root.
    """
    for _dirpath, _dirnames, _filenames, dirfd in os.fwalk(top, follow_symlinks=False):
        mode = os.fstat(dirfd).st_mode
        acl = acl_bytes(mode, uid, perm)
        os.setxattr(dirfd, "system.posix_acl_access", acl)
        os.setxattr(dirfd, "system.posix_acl_default", acl)


def grant_search(directory: Path, uid: int) -> None:
    """Let `uid` enter and list `directory` itself when its mode does not already let everyone."""
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    try:
        mode = os.fstat(fd).st_mode
        if mode & _R_X != _R_X:
            os.setxattr(fd, "system.posix_acl_access", acl_bytes(mode, uid, _R_X))
    finally:
        os.close(fd)


class Rsyncd(ManagedServer):
    """`rsync --daemon` on ctx.bind:ctx.ports['rsync'], module ctx.share chrooted to ctx.root."""

    name = "rsyncd"
    services = ("rsync",)
    binary = "rsync"
    install_hint = "apt-get install rsync"

    transfer_ids: tuple[int, int] | None = None  # (uid, gid) transfers run as; None: the invoking user

    @property
    def config_path(self) -> Path:
        return self.dir / "rsyncd.conf"

    @property
    def secrets_path(self) -> Path:
        return self.dir / "rsyncd.secrets"

    def prepare(self) -> None:
        creds = self.ctx.credentials
        if os.geteuid() == 0:
            self.transfer_ids = free_transfer_ids()
            self._grant_root(self.transfer_ids[0])
        # 0600 from the first byte: rsyncd's strict modes refuse a secrets file others can read.
        fd = os.open(self.secrets_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as fh:
            fh.write(f"{creds.user}:{creds.password}\n")
        os.chmod(self.secrets_path, 0o600)
        self.config_path.write_text(self._config())

    def _grant_root(self, uid: int) -> None:
        root = Path(self.ctx.root).resolve()
        incoming = root / INCOMING_DIR
        if incoming.is_symlink():
            raise UnavailableError(f"{incoming} is a symlink", "make it a plain directory inside the root")
        incoming.mkdir(exist_ok=True)
        try:
            grant_search(root, uid)
            if (root / FILES_DIR).is_dir() and not (root / FILES_DIR).is_symlink():
                grant_tree(root / FILES_DIR, uid, _R_X)
            grant_tree(incoming, uid, _RWX)
        except OSError as exc:
            # Never fall back to world-writable directories: say why the daemon cannot serve instead.
            raise UnavailableError(
                f"the rsync daemon needs POSIX ACLs on {root} to let its unprivileged uid {uid} write "
                f"incoming/ ({exc.strerror})",
                "serve a root on a file system with ACLs (ext4, xfs, btrfs, tmpfs)",
            ) from exc

    def command(self) -> list[str]:
        return ["rsync", "--daemon", "--no-detach", f"--config={self.config_path}"]

    def _config(self) -> str:
        lines = [
            f"pid file = {self.dir / 'rsyncd.pid'}",
            f"log file = {self.dir / 'rsyncd.log'}",
            f"lock file = {self.dir / 'rsyncd.lock'}",
            f"address = {self.ctx.bind}",
            f"port = {self.ctx.ports['rsync']}",
            "max connections = 16",
            f"timeout = {IO_TIMEOUT_SECONDS}",
        ]
        if self.transfer_ids is not None:
            # Transfers never run as root: a bug or a trick in the receiver cannot reach past this uid.
            lines += [f"uid = {self.transfer_ids[0]}", f"gid = {self.transfer_ids[1]}", "use chroot = yes"]
        else:
            # chroot needs root; rsync then sanitizes paths and resolves them without leaving the module.
            lines.append("use chroot = no")
        lines += [
            "",
            f"[{self.ctx.share}]",
            f"path = {Path(self.ctx.root).resolve()}",
            "comment = workbench served root",
            "read only = no",
            "list = no",
            f"auth users = {self.ctx.credentials.user}",
            f"secrets file = {self.secrets_path}",
            "strict modes = yes",
            f"refuse options = {' '.join(REFUSED_OPTIONS)}",
            # After every other permission rule, whatever the client sends (-p or not).
            "incoming chmod = ug-s",
            # Stored symlinks get a /rsyncd-munged/ prefix, so no server that follows them leaves the root;
            # the prefix itself may never be created inside the module.
            "munge symlinks = yes",
            "exclude = /rsyncd-munged/",
        ]
        return "\n".join(lines) + "\n"
