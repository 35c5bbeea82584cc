"""The far side of `run --via-ssh`: `workbench servers over-ssh` starts the servers in a fresh private temp
directory, says where they listen and how to log in as one JSON line on stdout (workbench.shared.servers_hello),
then waits on stdin. When stdin ends (the local side finished, failed, was Ctrl-C'd, SIGTERM'd or even
SIGKILLed, or the network dropped: sshd closes the session's pipes either way) it stops every server and removes
the temp directory, so cleanup never depends on the local process still being alive.

The servers bind to the address the SSH connection arrived at (SSH_CONNECTION): reachable from the client by
construction. The local side is workbench.core.far_servers.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import sys
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from workbench.shared.net import free_ports
from workbench.shared.servers_hello import PROTOCOL, served_hello
from workbench.shared.target import DEFAULT_PORTS


def _bind_address() -> str:
    """The far host's address the SSH connection arrived at: reachable from the client by construction."""
    parts = os.environ.get("SSH_CONNECTION", "").split()
    return parts[2] if len(parts) == 4 else "127.0.0.1"


def _free_ports(bind: str) -> dict[str, int]:
    """A free port per service: the far host may already run `servers up` on the default ports."""
    return dict(zip(DEFAULT_PORTS, free_ports(bind, len(DEFAULT_PORTS)), strict=True))


def _emit(data: Mapping[str, Any]) -> None:
    with contextlib.suppress(OSError, ValueError):
        sys.stdout.write(json.dumps(data) + "\n")
        sys.stdout.flush()


def serve_over_ssh(bind: str | None = None, only: list[str] | None = None) -> None:
    """The far side: servers up in a private temp dir, their target and login as one JSON line on stdout, wait for
    stdin to end (or say "down"), then everything down and the temp dir removed, whatever ended the wait."""
    from workbench.server.daemons import supervisor

    bind = bind or _bind_address()
    base = Path(tempfile.mkdtemp(prefix="workbench-over-ssh-"))  # 0700: the credentials live beneath it
    root, state_dir = base / "root", base / "state"
    root.mkdir()
    # sshd closes the session without a signal; a hangup or SIGTERM unwinds the same way (workbench's main
    # turns both into exceptions: workbench/shared/signals.py), through the `finally:` below
    try:
        state = supervisor.up(root, bind, state_dir, only=only, ports=_free_ports(bind))
        _emit({"protocol": PROTOCOL, "state_dir": str(base), **served_hello(state_dir), "servers": state.lines()})
        with contextlib.suppress(OSError, ValueError):
            for line in sys.stdin:
                if line.strip() == "down":
                    break
    finally:
        with contextlib.suppress(Exception):
            supervisor.down(state_dir)
        shutil.rmtree(base, ignore_errors=True)
        _emit({"protocol": PROTOCOL, "down": True})
