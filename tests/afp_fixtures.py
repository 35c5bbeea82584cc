"""One real netatalk afpd on 127.0.0.1 for the AFP tests: a user with a generated password, a volume at a
private root.

A test module makes its fixtures from these helpers (a fixture defined here and imported would shadow the
test's argument of the same name):

    @pytest.fixture(scope="module")
    def afpd_runner(tmp_path_factory: pytest.TempPathFactory) -> Iterator[AfpdRunner]:
        yield from afp_fixtures.running(tmp_path_factory)

    @pytest.fixture
    def afpd(afpd_runner: AfpdRunner) -> AfpServed:
        return afp_fixtures.served(afpd_runner)

`served` restarts the server when a test stopped it and empties its root, so every test starts from an
empty volume.
netatalk 4 comes from the host or from the root filesystem setup prepares (scripts/afp_root.sh); without
it the fixtures skip, which WORKBENCH_TESTS_STRICT=1 turns into a failure.
"""

from __future__ import annotations

import dataclasses
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.helpers import ensure_running, loopback_context
from workbench.server.daemons.afpd import Afpd
from workbench.shared.credentials import Credentials
from workbench.shared.target import Target

HOST = "127.0.0.1"


class GuestAfpd(Afpd):
    """afpd that also takes a guest login and a password-less one of an unprivileged account, for netatalk's
    own test clients."""

    name = "afpd-guest"
    guest = True


class AfpdRunner:
    """Owns one Afpd (or, with guest=True, one that also takes guest logins); `ensure()` (re)starts it."""

    def __init__(self, base: Path, guest: bool = False) -> None:
        cls = GuestAfpd if guest else Afpd
        if reason := cls.unavailable_reason():
            pytest.skip(f"no AFP server: {reason}")
        self.ctx = loopback_context(base, "afp")
        self.server: Afpd = cls(self.ctx)

    @property
    def root(self) -> Path:
        return self.ctx.root

    @property
    def port(self) -> int:
        return self.ctx.ports["afp"]

    def ensure(self) -> Afpd:
        ensure_running(self.server)
        return self.server

    def stop(self) -> None:
        self.server.stop()

    def target(self, credentials: Credentials | None = None) -> Target:
        return Target(
            host=HOST,
            credentials=credentials or self.ctx.credentials,
            ports={"afp": self.port},
            remote_root=str(self.ctx.root),
            share=self.ctx.share,
        )

    def bad_target(self) -> Target:
        wrong = dataclasses.replace(self.ctx.credentials, password=self.ctx.credentials.password + "x")
        return self.target(wrong)

    def empty_root(self) -> None:
        """Remove everything in the served root (never following a link out of it)."""
        for entry in self.root.iterdir():
            if entry.is_dir() and not entry.is_symlink():
                shutil.rmtree(entry)
            else:
                entry.unlink()


@dataclass
class AfpServed:
    """What a test gets: the running server's root, a target that logs in, one whose password is wrong."""

    runner: AfpdRunner
    root: Path
    target: Target
    bad_target: Target

    def stop(self) -> None:
        self.runner.stop()


def served(runner: AfpdRunner) -> AfpServed:
    runner.ensure()
    runner.empty_root()
    return AfpServed(runner, runner.root, runner.target(), runner.bad_target())


def running(factory: pytest.TempPathFactory, guest: bool = False) -> Iterator[AfpdRunner]:
    """A started AfpdRunner for a module- or session-scoped fixture; stopped and its state removed after."""
    runner = AfpdRunner(factory.mktemp("afpd"), guest=guest)
    try:
        runner.ensure()
        yield runner
    finally:
        runner.stop()
        shutil.rmtree(runner.ctx.state_dir, ignore_errors=True)
