"""Metadata recorded with every run: host, kernel, versions and the TCP tunables that bound throughput."""

from __future__ import annotations

import importlib.metadata
import os
import platform
import socket
import subprocess
from pathlib import Path
from typing import Any

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


def route_interface(host: str) -> tuple[str | None, int | None]:
    """The interface used to reach `host` and its MTU (Linux `ip route get`)."""
    try:
        addr = socket.getaddrinfo(host, None)[0][4][0]
        out = subprocess.run(["ip", "route", "get", addr], capture_output=True, text=True, timeout=5).stdout
    except (OSError, subprocess.SubprocessError, socket.gaierror):
        return None, None
    words = out.split()
    if "dev" not in words:
        return None, None
    dev = words[words.index("dev") + 1]
    mtu = _read(f"/sys/class/net/{dev}/mtu")
    return dev, int(mtu) if mtu and mtu.isdigit() else None


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
        dev, mtu = route_interface(peer)
        info["interface"] = dev
        info["mtu"] = mtu
    return info


def process_group_cpu(pgids: set[int]) -> float:
    """CPU seconds (user+system, incl. reaped children) of every process in the given process groups."""
    ticks = os.sysconf("SC_CLK_TCK")
    total = 0
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        stat = _read(f"/proc/{entry.name}/stat")
        if not stat:
            continue
        fields = stat[stat.rindex(")") + 2 :].split()
        # fields[2] is pgrp; utime, stime, cutime, cstime are fields 11..14 here (14..17 in proc(5)).
        if int(fields[2]) in pgids:
            total += sum(int(x) for x in fields[11:15])
    return total / ticks
