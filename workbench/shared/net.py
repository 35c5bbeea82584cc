"""TCP ports: whether something listens on one (from here or from inside a lab namespace), free ones to listen on."""

from __future__ import annotations

import os
import socket
import subprocess
from pathlib import Path

from workbench.shared.safetext import strip_controls

TCP_LISTEN = "0A"  # the state column of /proc/net/tcp


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


def listening(port: int) -> bool:
    """Whether a TCP socket (IPv4 or IPv6) listens on `port` in the network namespace this thread is in, read from
    the kernel's tables: no connection is made (iperf3 takes any connection for a test's control channel and is
    busy until it gives up on it). thread-self: a thread that entered a lab namespace sees that one's tables."""
    return bool(_listening_inodes(port))


def _listening_inodes(port: int) -> set[str]:
    """The socket inodes listening on `port` (IPv4 or IPv6) in this thread's network namespace."""
    found = set()
    for table in ("tcp", "tcp6"):
        try:
            lines = Path("/proc/thread-self/net", table).read_text().splitlines()[1:]
        except OSError:  # no IPv6 here
            continue
        for fields in (line.split() for line in lines):
            if fields[3] == TCP_LISTEN and int(fields[1].rsplit(":", 1)[1], 16) == port:
                found.add(fields[9])
    return found


def listener(port: int) -> str | None:
    """Who listens on `port`, for an error message: "pid N (name)" of a process holding the socket, read from
    /proc; "a process of another user or namespace" when none here can be seen holding it; None: nothing listens."""
    inodes = _listening_inodes(port)
    if not inodes:
        return None
    wanted = {f"socket:[{inode}]" for inode in inodes}
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            for fd in (proc / "fd").iterdir():
                if os.readlink(fd) in wanted:
                    # a process names itself: its words are shown, never obeyed by the terminal
                    return f"pid {proc.name} ({strip_controls((proc / 'comm').read_text().strip())})"
        except OSError:  # ended meanwhile, or not ours to read
            continue
    return "a process of another user or namespace"


def free_ports(bind: str, count: int) -> list[int]:
    """`count` different TCP ports free on `bind` now: each socket stays bound until all are, so none repeats.
    For a server that cannot be asked for port 0 and say which one it got (iperf3), or several at once."""
    family = socket.AF_INET6 if ":" in bind else socket.AF_INET
    holders: list[socket.socket] = []
    try:
        for _ in range(count):
            sock = socket.socket(family, socket.SOCK_STREAM)
            holders.append(sock)
            sock.bind((bind, 0))
        return [int(sock.getsockname()[1]) for sock in holders]
    finally:
        for sock in holders:
            sock.close()
