"""Which clients each platform must run, stated here instead of read from the clients themselves.

A client that wrongly reports itself unavailable (`unavailable_reason()`) becomes an 'unavailable:' row,
which a run does not count as a failure: an end-to-end test that kept only the rows that loaded would pass
with it. Tests compare against `expected_clients()` instead, so a client that should run here and does
not fails them.

- Linux: every client but the macOS-only mounts (setup.sh installs every library, program, FUSE and the
  servers); the kernel CIFS mount only where the kernel has CIFS and we are root (this file reads
  /proc/filesystems and the module tree itself, it does not ask the client);
- elsewhere (macOS; no setup script installs the native clients there): the pure-Python clients.
"""

from __future__ import annotations

import os
import platform
import sys
from pathlib import Path

from workbench.protocols import registry

MACOS_ONLY = frozenset({"smb/mount_smbfs", "afp/mount_afp"})
# Runs only against a server workbench started in the lab (its password-less login and volume): against a URL its
# rows say unavailable, by design.
SERVED_ONLY = frozenset({"afp/afp_speedtest"})
KERNEL_CIFS = "smb/cifs"
PURE_PYTHON = frozenset({"http/aiohttp", "ftp/ftplib", "sftp/paramiko", "smb/pysmb", "smb/smbprotocol"})


def kernel_has_cifs() -> bool:
    """The running kernel lists cifs (or smb3) in /proc/filesystems, or ships the cifs module."""
    try:
        names = {line.split()[-1] for line in Path("/proc/filesystems").read_text().splitlines() if line.split()}
    except OSError:
        names = set()
    if names & {"cifs", "smb3"}:
        return True
    modules = Path("/lib/modules") / platform.release() / "kernel" / "fs"
    return any(modules.glob("cifs/cifs.ko*")) or any(modules.glob("smb/client/cifs.ko*"))


def expected_clients() -> frozenset[str]:
    """The labels of the clients that must load and copy on this platform."""
    every = frozenset(e.label for e in registry.KNOWN_CLIENTS)
    assert PURE_PYTHON | MACOS_ONLY | {KERNEL_CIFS} <= every, "a client named here left the registry"
    if sys.platform != "linux":
        return PURE_PYTHON
    expected = every - MACOS_ONLY
    if not (kernel_has_cifs() and os.geteuid() == 0):
        expected -= {KERNEL_CIFS}
    return expected
