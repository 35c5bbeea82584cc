"""Whether something listens on a TCP port, from here or from inside a lab namespace."""

from __future__ import annotations

import socket
import subprocess


def port_open(host: str, port: int, netns: str | None = None) -> bool:
    """True when something accepts TCP connections on host:port (optionally inside a namespace)."""
    if netns:
        probe = subprocess.run(
            ["ip", "netns", "exec", netns, "bash", "-c", f"exec 3<>/dev/tcp/{host}/{port}"],
            capture_output=True,
            timeout=5,
        )
        return probe.returncode == 0
    try:
        with socket.create_connection((host, port), timeout=0.5):
            return True
    except OSError:
        return False
