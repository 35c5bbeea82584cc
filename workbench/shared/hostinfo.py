"""Metadata recorded with every run: host, kernel, versions and the TCP tunables that bound throughput."""

from __future__ import annotations

import importlib.metadata
import os
import platform
import socket
from pathlib import Path
from typing import Any

from workbench.shared import offloads

_SYSCTLS = {
    "tcp_rmem": "net/ipv4/tcp_rmem",
    "tcp_wmem": "net/ipv4/tcp_wmem",
    "rmem_max": "net/core/rmem_max",
    "wmem_max": "net/core/wmem_max",
    "congestion_control": "net/ipv4/tcp_congestion_control",
    "window_scaling": "net/ipv4/tcp_window_scaling",
}
_PACKAGES = ("aiohttp", "pyftpdlib", "paramiko", "pysmb", "smbprotocol", "xxhash", "cryptography")


def _read(path: str) -> str | None:
    try:
        return Path(path).read_text().strip()
    except OSError:
        return None


def tcp_settings() -> dict[str, str | None]:
    """The kernel's TCP tunables (Linux); on other systems the values are None."""
    return {name: _read(f"/proc/sys/{rel}") for name, rel in _SYSCTLS.items()}


def versions() -> dict[str, str]:
    from workbench import __version__

    found = {"workbench": __version__, "python": platform.python_version()}
    for name in _PACKAGES:
        try:
            found[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            continue
    return found


def describe(peer: str | None = None) -> dict[str, Any]:
    """This host as seen from inside: name, OS, kernel, CPUs, TCP settings, route to `peer`."""
    info: dict[str, Any] = {
        "hostname": socket.gethostname(),
        "system": platform.system(),
        "kernel": platform.release(),
        "machine": platform.machine(),
        "cpus": os.cpu_count(),
        "versions": versions(),
        "tcp": tcp_settings(),
    }
    if peer:
        # the send path's state on the interface toward the peer: offloads, size limits, qdisc, queue length;
        # its interface and MTU are also kept at the top, where older documents have them
        record = offloads.path_record(peer)
        info["interface"] = record.get("interface") or None
        info["mtu"] = record.get("mtu_bytes")
        info["offloads"] = record
    return info
