"""Small helpers shared by the tests (not fixtures: plain functions)."""

from __future__ import annotations

import os
import socket
from pathlib import Path

from workbench.credentials import Credentials, generate
from workbench.servers.base import ManagedServer, ServerContext


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port free right now on host (for servers that must be told their port up front)."""
    with socket.socket() as sock:
        sock.bind((host, 0))
        return sock.getsockname()[1]


def write_random(path: Path, size: int) -> bytes:
    """Write `size` random bytes to path and return them."""
    data = os.urandom(size)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return data


def ensure_running(server: ManagedServer) -> ManagedServer:
    """(Re)start a session-scoped server that an earlier test stopped or killed."""
    if server.proc is None or server.proc.poll() is not None:
        server.stop()
        server.start()
    return server


def loopback_context(base: Path, service: str, creds: Credentials | None = None) -> ServerContext:
    """Private root and state under `base`, one free loopback port for `service`."""
    root = base / "root"
    root.mkdir(parents=True, exist_ok=True)
    return ServerContext(
        root=root,
        bind="127.0.0.1",
        state_dir=base / "state",
        credentials=creds or generate(),
        ports={service: free_port("127.0.0.1")},
    )
