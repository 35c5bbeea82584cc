"""`workbench serve` as a supervised process (HTTP, FTP, raw-TCP probe, iperf3), for `servers up` and the lab."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import ClassVar

from workbench.server.daemons.base import ManagedServer

_PROJECT_ROOT = str(Path(__file__).resolve().parents[2])


class ServeProcess(ManagedServer):
    name: ClassVar[str] = "serve"
    services: ClassVar[tuple[str, ...]] = ("http", "ftp", "tcp")

    def prepare(self) -> None:
        """Nothing to write: the supervisor created the credentials file this process reads."""

    def command(self) -> list[str]:
        p = self.ctx.ports
        return [
            sys.executable,
            "-m",
            "workbench",
            "serve",
            "--root",
            str(self.ctx.root),
            "--bind",
            self.ctx.bind,
            "--state-dir",
            str(self.ctx.state_dir),
            "--http-port",
            str(p["http"]),
            "--ftp-port",
            str(p["ftp"]),
            "--tcp-port",
            str(p["tcp"]),
            "--iperf3-port",
            str(p["iperf3"]),
            "--no-target-file",  # the supervisor writes target.json with every server's port
        ]

    def env(self) -> dict[str, str]:
        env = dict(os.environ)
        # Run this very checkout even when workbench is not installed (tests, the lab).
        env["PYTHONPATH"] = os.pathsep.join(x for x in (_PROJECT_ROOT, env.get("PYTHONPATH")) if x)
        return env
