"""What the `sshd` and `rsyncd` fixtures (tests/conftest.py) hand a test: a real server serving a tmp dir."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from workbench.server.daemons.base import ManagedServer
from workbench.shared.target import Target


@dataclass
class Served:
    """A running server, the target that reaches it, and a wrong-credentials twin."""

    server: ManagedServer
    root: Path
    target: Target
    bad_target: Target

    def stop(self) -> None:
        self.server.stop()

