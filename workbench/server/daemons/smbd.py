"""Samba's smbd with a private config and state, one share confined to the served root.

Confinement (an authenticated client is hostile): paths are resolved inside the share, symlinks are
neither followed ("follow symlinks = no") nor allowed to lead out ("wide links = no"); without
unix extensions SMB2/3 cannot create symlinks (Samba 4.17 refuses FSCTL_SET_REPARSE_POINT), device
nodes, FIFOs or sockets, nor set mode bits, and the create/directory masks strip setuid/setgid.

Dialects: SMB2_02 (pysmb speaks nothing newer) up to SMB3_11 (smbprotocol, smbclient). Signing stays
at Samba's default ("auto", required only when the client asks) and encryption is offered, never
imposed, so the numbers show the transport, not AES, unless the server host is asked otherwise
(`SmbServerOptions`, the lab's --smb-server: signing or encryption required, a lower highest dialect,
as a NAS configured that way would answer).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import stat
import subprocess
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from workbench.protocols.smb_negotiated import BY_NAME, DIALECT_NAMES, SMB_DIALECTS
from workbench.server.daemons.base import ManagedServer
from workbench.shared.errors import AuthError, NotFoundError, UsageError

MIN_PROTOCOL = SMB_DIALECTS[0].samba  # SMB 2.0.2: pysmb speaks nothing newer

# A unix socket's path holds at most 107 bytes. smbd makes its messaging sockets as
# '<lock directory>/msg.sock/<pid>' and its RPC ones under the ncalrpc dir: this much room is kept for
# what it appends to either.
SOCKET_SUFFIX_ROOM = 40
SOCKET_PATH_MAX = 107


# The first dialect with encryption: a server requiring it refuses every older session
FIRST_ENCRYPTING_DIALECT = next(d.name for d in SMB_DIALECTS if d.encrypts)
# signing: offered (Samba's "auto": on when the client asks) or required ("mandatory", every session signs)
SIGNING = {"offered": "auto", "required": "mandatory"}
# encryption ("server smb encrypt", Samba 4.14 and later): offered (Samba's default "if_required": on when the
# client asks), desired (on for every client that can), required (a client that cannot is refused), off
ENCRYPTION = {"offered": "if_required", "desired": "desired", "required": "required", "off": "off"}
SMB_SERVER_HINT = "e.g. signing=required,encryption=required,max-dialect=2.0.2"


@dataclass(frozen=True)
class SmbServerOptions:
    """How the server host's smbd is asked to treat signing, encryption and the highest dialect, as a NAS would
    be configured: the lab's --smb-server. The defaults are what workbench's smbd does without it."""

    signing: str = "offered"
    encryption: str = "offered"
    max_dialect: str = SMB_DIALECTS[-1].name  # the newest, 3.1.1

    @classmethod
    def parse(cls, text: str, where: str = "--smb-server") -> SmbServerOptions:
        """'signing=required,encryption=required,max-dialect=2.0.2': each key at most once, nothing else."""
        choices = {"signing": tuple(SIGNING), "encryption": tuple(ENCRYPTION), "max-dialect": DIALECT_NAMES}
        found: dict[str, str] = {}
        for part in text.split(","):
            key, sep, value = (p.strip() for p in part.partition("="))
            if not sep or key not in choices:
                raise UsageError(
                    f"{where}: {part.strip()!r} is not KEY=VALUE with a key among {', '.join(choices)}", SMB_SERVER_HINT
                )
            if key in found:
                raise UsageError(f"{where}: {key} is given twice", SMB_SERVER_HINT)
            if value not in choices[key]:
                raise UsageError(f"{where}: {key}={value!r} is unknown", f"{key} takes {', '.join(choices[key])}")
            found[key] = value
        options = cls(**{key.replace("-", "_"): value for key, value in found.items()})
        options.check(where)
        return options

    def check(self, where: str = "--smb-server") -> None:
        if self.encryption == "required" and not BY_NAME[self.max_dialect].encrypts:
            raise UsageError(
                f"{where}: encryption=required with max-dialect={self.max_dialect} refuses every client "
                f"(SMB {self.max_dialect} has no encryption)",
                f"use max-dialect={FIRST_ENCRYPTING_DIALECT} or later, or drop encryption=required",
            )

    @classmethod
    def from_json(cls, found: Mapping[str, str]) -> SmbServerOptions:
        """From to_json()'s form (a ServerContext carries it); an empty one is the defaults."""
        options = cls(**{k: v for k, v in found.items() if k in ("signing", "encryption", "max_dialect")})
        known = (options.signing in SIGNING, options.encryption in ENCRYPTION, options.max_dialect in BY_NAME)
        if not all(known):
            raise UsageError(f"SMB server options {dict(found)!r} are unknown", SMB_SERVER_HINT)
        options.check()
        return options

    def conf(self) -> dict[str, str]:
        """The smb.conf [global] settings that make smbd answer so."""
        return {
            "server signing": SIGNING[self.signing],
            "server smb encrypt": ENCRYPTION[self.encryption],
            "server max protocol": BY_NAME[self.max_dialect].samba,
        }

    def to_json(self) -> dict[str, str]:
        return {"signing": self.signing, "encryption": self.encryption, "max_dialect": self.max_dialect}

    def describe(self) -> str:
        return f"signing {self.signing}, encryption {self.encryption}, SMB {self.max_dialect} at most"


def _short_dir(server_dir: Path) -> Path:
    """The folder in the temporary directory named after `server_dir`: the same one each time."""
    return Path(tempfile.gettempdir()) / f"wb-smbd-{hashlib.sha256(str(server_dir).encode()).hexdigest()[:16]}"


def socket_dir_for(server_dir: Path) -> Path | None:
    """Where the sockets of the smbd kept in `server_dir` live when that directory is too deep for them: a
    folder in the temporary directory named after it (the same one each time, so whoever stops the server
    finds it again); None when they fit beneath `server_dir` itself."""
    if len(str(server_dir)) + SOCKET_SUFFIX_ROOM <= SOCKET_PATH_MAX:
        return None
    return _short_dir(server_dir)


def _own_private_folder(folder: Path) -> bool:
    found = os.lstat(folder)  # lstat: a symlink planted in its place is refused, never followed
    return stat.S_ISDIR(found.st_mode) and found.st_uid == os.getuid() and stat.S_IMODE(found.st_mode) == 0o700


def remove_socket_dir(server_dir: Path) -> None:
    """Remove the socket folder of the smbd kept in `server_dir`, if it has one (after the server stopped)."""
    folder = socket_dir_for(server_dir)
    with contextlib.suppress(FileNotFoundError):
        if folder is not None and _own_private_folder(folder):
            shutil.rmtree(folder, ignore_errors=True)


def _conf_value(text: str) -> str:
    """Refuse values that would break out of one smb.conf line."""
    if "\n" in text or "\r" in text:
        raise NotFoundError(f"invalid smb.conf value {text!r}", "paths and names must be one line")
    return text


class Smbd(ManagedServer):
    name = "smbd"
    services = ("smb",)
    binary = "/usr/sbin/smbd"
    install_hint = "apt-get install samba"

    @property
    def conf_path(self) -> Path:
        return self.dir / "smb.conf"

    def private_folders(self) -> dict[str, Path]:
        """Every folder smbd keeps state in, made private under this server's directory (smb.conf keys).

        The two that hold sockets move to a short private folder of their own when this server's directory
        is too deep for a socket's path (smbd would exit at start with "File name too long").
        """
        state = self.dir
        sockets = self.short_socket_dir() if socket_dir_for(state) is not None else state
        folders = {
            "private dir": state / "private",
            "lock directory": sockets / "lock",
            "state directory": state / "state",
            "cache directory": state / "cache",
            "pid directory": state / "pid",
            "ncalrpc dir": sockets / "ncalrpc",
            "usershare path": state / "usershares",
            "binddns dir": state / "bind-dns",
        }
        for folder in folders.values():
            folder.mkdir(parents=True, exist_ok=True, mode=0o700)
        return folders

    def short_socket_dir(self) -> Path:
        """The short folder of socket_dir_for(), made if missing, refused when it is not this user's own 0700
        folder."""
        folder = _short_dir(self.dir)
        with contextlib.suppress(FileExistsError):
            folder.mkdir(mode=0o700)
        if not _own_private_folder(folder):
            raise UsageError(
                f"{folder} is not a private folder of this user", f"remove it, or use a shorter path than {self.dir}"
            )
        return folder

    def stop(self) -> None:
        super().stop()
        remove_socket_dir(self.dir)

    def config_text(self) -> str:
        """The whole smb.conf: every state folder private, one writable share, no guests."""
        folders = self.private_folders()
        glob = {
            **{k: str(v) for k, v in folders.items()},
            "smb ports": str(self.ctx.ports["smb"]),
            # Samba finds no usable interface on the lab's point-to-point TUN link and panics, so inside
            # the lab's own namespace (reachable only over that link) it listens on all addresses.
            "interfaces": self.ctx.bind if not self.ctx.netns else "",
            "bind interfaces only": "yes" if not self.ctx.netns else "no",
            "disable netbios": "yes",
            "passdb backend": f"tdbsam:{folders['private dir'] / 'passdb.tdb'}",
            "load printers": "no",
            "printcap name": "/dev/null",
            "disable spoolss": "yes",
            "server role": "standalone server",
            "server min protocol": MIN_PROTOCOL,
            # what the server host is asked for (signing, encryption, highest dialect), else these defaults
            **SmbServerOptions.from_json(self.ctx.smb_server).conf(),
            "map to guest": "Never",
            "restrict anonymous": "2",
            "usershare max shares": "0",
            "registry shares": "no",
            "log level": "1",
            # SMB1 unix extensions would let a client create symlinks that point anywhere, device nodes,
            # FIFOs and setuid files (UNIX_BASIC chmod/mknod). SMB3 POSIX extensions would too; Samba 4.17
            # has none (it ignores the key with a log line), later versions read it.
            "smb1 unix extensions": "no",
            "smb3 unix extensions": "no",
            "allow insecure wide links": "no",
        }
        share = {
            "path": str(self.ctx.root),
            "read only": "no",
            "browseable": "yes",
            "guest ok": "no",
            "valid users": self.ctx.credentials.user,
            "wide links": "no",
            "follow symlinks": "no",
            # tmpfs on older kernels has no user xattrs; DOS attributes there would fail every create.
            "store dos attributes": "no",
            "ea support": "no",
            "map archive": "no",
            # Masks on the mode a create asks for: never setuid, setgid or sticky, never group/other-writable.
            "create mask": "0644",
            "directory mask": "0755",
            # A security descriptor a client sets is ignored (Samba answers OK): no ACL can open the root wider.
            "nt acl support": "no",
        }
        lines = ["[global]"]
        lines += [f"    {k} = {_conf_value(v)}" for k, v in glob.items()]
        lines += ["", f"[{_conf_value(self.ctx.share)}]"]
        lines += [f"    {k} = {_conf_value(v)}" for k, v in share.items()]
        return "\n".join(lines) + "\n"

    def prepare(self) -> None:
        self.ctx.root.mkdir(parents=True, exist_ok=True)
        self.conf_path.write_text(self.config_text())
        self.conf_path.chmod(0o600)
        self._add_user()

    def _add_user(self) -> None:
        # The password goes twice through stdin (new + retype); never on argv.
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
