"""A real `workbench serve` process on 127.0.0.1 with free ports, for the HTTP/FTP/raw-TCP/iperf3 tests.

One server per test session (the `serve_runner` and `served` fixtures in tests/conftest.py: started on first
use, restarted when a test kills it), serving a private temporary root; the credentials are generated into
its private state directory.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import signal
from collections.abc import Callable
from pathlib import Path

from tests.helpers import ensure_running, free_port
from workbench.protocols.base import Client, ClientOptions
from workbench.server.daemons.base import ServerContext
from workbench.server.daemons.serve_process import ServeProcess
from workbench.shared import credentials as creds_mod
from workbench.shared import target as target_mod
from workbench.shared.errors import WorkbenchError
from workbench.shared.target import DEFAULT_PORTS, Target

HOST = "127.0.0.1"


class ServeRunner:
    def __init__(self, base: Path) -> None:
        root = base / "root"
        root.mkdir()
        state = base / "state"
        creds = creds_mod.load_or_create(state / "credentials.json")
        self.ctx = ServerContext(root=root, bind=HOST, state_dir=state, credentials=creds, ports=_free_ports())
        self.server = ServeProcess(self.ctx)

    def ensure(self) -> ServeProcess:
        try:
            ensure_running(self.server)
        except WorkbenchError:
            # Its ports were free when chosen, but after a test stopped or killed it another process may have taken
            # one (a client's ephemeral port, another worker's server): start it again on ports free now.
            self.ctx = dataclasses.replace(self.ctx, ports=_free_ports())
            self.server = ServeProcess(self.ctx)
            ensure_running(self.server)
        # As `servers up` does: a supervised serve leaves target.json to its supervisor.
        target_mod.write(self.ctx.state_dir, HOST, dict(self.ctx.ports), self.ctx.root.resolve(), self.ctx.share)
        return self.server

    def stop(self) -> None:
        self.server.stop()

    def kill(self) -> None:
        """Die abruptly, like a crashed server or a pulled cable (SIGTERM would finish in-flight copies)."""
        if self.server.proc is not None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.server.proc.pid, signal.SIGKILL)
            self.server.proc.wait()
            self.server.proc = None

    def target(self, credentials: creds_mod.Credentials | None = None) -> Target:
        return Target(
            host=HOST,
            credentials=credentials or self.ctx.credentials,
            ports=dict(self.ctx.ports),
            remote_root=str(self.ctx.root),
        )


def _free_ports() -> dict[str, int]:
    return {**DEFAULT_PORTS, **{s: free_port(HOST) for s in ("http", "ftp", "tcp", "iperf3")}}


def factory(cls: type[Client], runner: ServeRunner) -> Callable[..., Client]:
    def make(**overrides: object) -> Client:
        return cls(runner.target(), ClientOptions(**overrides))  # type: ignore[arg-type]

    return make


def bad(cls: type[Client], runner: ServeRunner) -> Client:
    wrong = dataclasses.replace(runner.ctx.credentials, password="not-the-password")
    return cls(runner.target(wrong), ClientOptions(stall_timeout_s=5.0))
