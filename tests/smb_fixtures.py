"""One real smbd on 127.0.0.1 for the SMB tests, and the clients they make for it.

The session shares one SmbdRunner (the `smbd_runner` and `smbd` fixtures in tests/conftest.py); `smbd`
restarts it when a test stopped it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path

from tests.helpers import ensure_running, loopback_context
from workbench.protocols.base import Client, ClientOptions
from workbench.server.daemons.smbd import Smbd
from workbench.shared.credentials import Credentials
from workbench.shared.target import Target

HOST = "127.0.0.1"


class SmbdRunner:
    """Owns one Smbd; `ensure()` (re)starts it so a test that killed it does not break the next one."""

    def __init__(self, base: Path) -> None:
        self.ctx = loopback_context(base, "smb")
        self.server = Smbd(self.ctx)

    def ensure(self) -> Smbd:
        ensure_running(self.server)
        return self.server

    def stop(self) -> None:
        self.server.stop()

    def target(self, credentials: Credentials | None = None) -> Target:
        return Target(
            host=HOST,
            credentials=credentials or self.ctx.credentials,
            ports={"smb": self.ctx.ports["smb"]},
            remote_root=str(self.ctx.root),
            share=self.ctx.share,
        )


def client_factory(cls: type[Client], runner: SmbdRunner) -> Callable[..., Client]:
    """make_client for a client class: callable(**ClientOptions overrides) -> unconnected client."""

    def make(**overrides: object) -> Client:
        return cls(runner.target(), ClientOptions(**overrides))  # type: ignore[arg-type]

    return make


def bad_client_for(cls: type[Client], runner: SmbdRunner) -> Client:
    wrong = dataclasses.replace(runner.ctx.credentials, password=runner.ctx.credentials.password + "x")
    return cls(runner.target(wrong), ClientOptions(stall_timeout_s=10.0))
