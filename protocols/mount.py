"""Copies through mounted shares (the registry's entry point for the mount family; see protocols/mounts/).

Users copy through a mounted share (Finder, `cp`, a NAS share on the desktop), so these clients
mount the far host's share at a private 0700 mount point, copy with 1 MiB reads and writes through
the filesystem, and always unmount.
"""

from __future__ import annotations

from workbench.protocols.mounts.afp_mount import AfpClient
from workbench.protocols.mounts.base import MountClient
from workbench.protocols.mounts.commands import CommandRunner, Outcome
from workbench.protocols.mounts.smb_mount import CifsClient, SmbfsClient
from workbench.protocols.mounts.sshfs import SshfsClient

__all__ = ["AfpClient", "CifsClient", "CommandRunner", "MountClient", "Outcome", "SmbfsClient", "SshfsClient"]
