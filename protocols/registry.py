"""Every protocol client by name, imported lazily (fsspec-style): a missing optional dependency or
binary becomes an 'unavailable: why' line, never an import crash."""

from __future__ import annotations

import importlib
from dataclasses import dataclass

from workbench.protocols.base import Client
from workbench.shared.errors import UsageError


@dataclass(frozen=True)
class Entry:
    label: str  # "protocol/client"
    target: str  # "module:Class"
    install_hint: str  # what to do when the import fails
    reference: bool = False  # a native reference client (curl, OpenSSH sftp, smbclient)


# Order is the order rows appear in: Python client first, its native reference next.
KNOWN_CLIENTS: tuple[Entry, ...] = (
    Entry("http/aiohttp", "workbench.protocols.http:AiohttpClient", "pip install aiohttp"),
    Entry("http/curl", "workbench.protocols.curl:CurlHttpClient", "apt-get install curl", reference=True),
    Entry("ftp/ftplib", "workbench.protocols.ftp:FtplibClient", "ftplib ships with Python"),
    Entry("ftp/curl", "workbench.protocols.curl:CurlFtpClient", "apt-get install curl", reference=True),
    Entry("sftp/paramiko", "workbench.protocols.sftp:ParamikoClient", "pip install paramiko"),
    Entry("sftp/openssh", "workbench.protocols.openssh_sftp:OpenSSHSftpClient", "apt-get install openssh-client", True),
    Entry("scp/openssh", "workbench.protocols.scp:ScpClient", "apt-get install openssh-client", True),
    Entry("scp/legacy", "workbench.protocols.scp:ScpLegacyClient", "apt-get install openssh-client", True),
    Entry("rsync/ssh", "workbench.protocols.rsync:RsyncSshClient", "apt-get install rsync openssh-client", True),
    Entry("rsync/daemon", "workbench.protocols.rsync:RsyncDaemonClient", "apt-get install rsync", True),
    Entry("smb/pysmb", "workbench.protocols.smb:PysmbClient", "pip install pysmb"),
    Entry("smb/smbprotocol", "workbench.protocols.smbprotocol_client:SmbprotocolClient", "pip install smbprotocol"),
    Entry("smb/smbclient", "workbench.protocols.smbclient_cli:SmbclientClient", "apt-get install smbclient", True),
    Entry("sftp/sshfs", "workbench.protocols.mount:SshfsClient", "apt-get install sshfs fuse3"),
    Entry("smb/cifs", "workbench.protocols.mount:CifsClient", "apt-get install cifs-utils"),
    Entry("smb/mount_smbfs", "workbench.protocols.mount:SmbfsClient", "macOS only"),
    Entry("afp/python", "workbench.protocols.afp:AfpPythonClient", "pip install 'cryptography>=41'"),
    Entry("afp/afp_speedtest", "workbench.protocols.afp_speedtest:AfpSpeedtestClient", "scripts/afp_root.sh", True),
    Entry("afp/mount_afp", "workbench.protocols.mount:AfpClient", "macOS only"),
)

_BY_LABEL = {e.label: e for e in KNOWN_CLIENTS}


def protocols() -> list[str]:
    return sorted({e.label.split("/")[0] for e in KNOWN_CLIENTS})


def select(spec: str) -> list[Entry]:
    """Resolve '--protocols http,ftp,smb/pysmb' to registry entries ('all' = every client).

    A bare protocol name selects all of its clients; 'protocol/client' selects one.
    """
    wanted = [w.strip().lower() for w in spec.split(",") if w.strip()]
    if not wanted:
        raise UsageError("no protocols given", f"choose from {', '.join(protocols())}")
    chosen: list[Entry] = []
    for word in wanted:
        if word == "all":
            matches = list(KNOWN_CLIENTS)
        elif "/" in word:
            matches = [_BY_LABEL[word]] if word in _BY_LABEL else []
        else:
            matches = [e for e in KNOWN_CLIENTS if e.label.split("/")[0] == word]
        if not matches:
            known = ", ".join(protocols() + [e.label for e in KNOWN_CLIENTS])
            raise UsageError(f"unknown protocol {word!r}", f"choose from {known}")
        chosen.extend(m for m in matches if m not in chosen)
    return chosen


def load(entry: Entry) -> type[Client] | str:
    """The client class, or a one-line reason it cannot be used here."""
    module_name, _, class_name = entry.target.partition(":")
    try:
        module = importlib.import_module(module_name)
        cls = getattr(module, class_name)
    except ImportError as exc:
        return f"{exc.name or module_name} not importable: {entry.install_hint}"
    except AttributeError:
        return f"{entry.label} is not implemented in this version"
    reason = cls.unavailable_reason()
    return reason if reason else cls
