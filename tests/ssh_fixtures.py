"""Fixtures that run the real sshd and rsync daemon on 127.0.0.1 with free ports, serving tmp dirs."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path

import pytest

from tests.helpers import loopback_context
from workbench.server.daemons.base import ManagedServer
from workbench.server.daemons.rsyncd import Rsyncd
from workbench.server.daemons.sshd import Sshd
from workbench.shared.credentials import generate
from workbench.shared.target import Target

HOST = "127.0.0.1"


@dataclass
class Served:
    """A running server, the target that reaches it, and a wrong-credentials twin."""

    server: ManagedServer
    root: Path
    target: Target
    bad_target: Target

    def stop(self) -> None:
        self.server.stop()


@pytest.fixture
def sshd(tmp_path: Path) -> Iterator[Served]:
    if reason := Sshd.unavailable_reason():
        pytest.skip(reason)
    ctx = loopback_context(tmp_path, "ssh", generate())
    server = Sshd(ctx)
    server.start()
    try:
        creds = replace(ctx.credentials, ssh_key=server.client_key_path, known_hosts=server.known_hosts_path)
        target = Target(HOST, creds, ports=dict(ctx.ports), remote_root=str(ctx.root))
        wrong_key = tmp_path / "wrong_ed25519"
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(wrong_key)], check=True)
        bad = replace(target, credentials=replace(creds, ssh_key=wrong_key))
        yield Served(server, ctx.root, target, bad)
    finally:
        server.stop()


@pytest.fixture
def rsyncd(tmp_path: Path) -> Iterator[Served]:
    if reason := Rsyncd.unavailable_reason():
        pytest.skip(reason)
    ctx = loopback_context(tmp_path, "rsync", generate())
    server = Rsyncd(ctx)
    server.start()
    try:
        target = Target(HOST, ctx.credentials, ports=dict(ctx.ports), share=ctx.share)
        bad = replace(target, credentials=replace(ctx.credentials, password="wrong-" + ctx.credentials.password))
        yield Served(server, ctx.root, target, bad)
    finally:
        server.stop()
