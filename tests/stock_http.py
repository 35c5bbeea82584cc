"""A stock WebDAV server (WsgiDAV, workbench/server/stock/webdav.py) on 127.0.0.1 for the HTTP client tests.

One server per test class (started on first use, restarted when a test killed it), serving a private root
in which the clients' prefix directory, with a space in its name, already exists; targets point at it as
a URL given to `workbench run` would.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import signal
from collections.abc import Callable
from pathlib import Path

from tests.helpers import ensure_running, loopback_context
from workbench.protocols.base import Client, ClientOptions
from workbench.server.stock.webdav import StockWebDav
from workbench.shared.credentials import Credentials
from workbench.shared.target import Target

HOST = "127.0.0.1"
PREFIX = "data/sub dir"  # beneath the URL's root, with a space: every path the clients send is quoted


class StockDav:
    def __init__(self, base: Path, auth: str, tls: bool) -> None:
        self.ctx = loopback_context(base, "http")
        self.server = StockWebDav(self.ctx, auth=auth, tls=tls)
        self.tls = tls
        (self.ctx.root / PREFIX).mkdir(parents=True)

    @property
    def served_root(self) -> Path:
        """The directory the clients' remote paths are relative to (the prefix)."""
        return self.ctx.root / PREFIX

    def ensure(self) -> StockWebDav:
        ensure_running(self.server)
        return self.server

    def stop(self) -> None:
        self.server.stop()

    def restart_with_password(self, password: str) -> None:
        """Start again (same port, same root) with the user's password changed, as an admin might mid-run."""
        self.stop()
        self.ctx = dataclasses.replace(
            self.ctx, credentials=dataclasses.replace(self.ctx.credentials, password=password)
        )
        self.server = StockWebDav(self.ctx, auth=self.server.auth, tls=self.tls)
        self.ensure()

    def kill(self) -> None:
        """Die abruptly, like a crashed server or a pulled cable."""
        if self.server.proc is not None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.server.proc.pid, signal.SIGKILL)
            self.server.proc.wait()
            self.server.proc = None

    def target(self, credentials: Credentials | None = None, prefix: str = PREFIX) -> Target:
        return Target(
            host=HOST,
            credentials=credentials or self.ctx.credentials,
            ports={"http": self.ctx.ports["http"]},
            stock=True,
            prefix=prefix,
            tls=self.tls,
        )

    def factory(self, cls: type[Client]) -> Callable[..., Client]:
        def make(**overrides: object) -> Client:
            return cls(self.target(), ClientOptions(**overrides))  # type: ignore[arg-type]

        return make

    def bad(self, cls: type[Client]) -> Client:
        wrong = dataclasses.replace(self.ctx.credentials, password="not-the-password")
        return cls(self.target(wrong), ClientOptions(stall_timeout_s=5.0))
