"""Suite-wide test settings: the strict switch CI sets, the markers, and the fixtures more than one group uses.

The suite is grouped; each group's conftest.py says what belongs in it:

- tests/unit: pure logic and CLI input checks; no server process, no root needed;
- tests/contract: one client against one real server (tests/contract/suite.py is the shared ClientContract);
- tests/integration: several parts together (run, serve, servers up/down, confinement, faults, lifecycle);
- tests/lab: the emulated two-host lab; needs root, network namespaces and TUN.

Run one group with `python -m pytest tests/unit` (or contract, integration, lab). Fixtures used by one group
only live in that group's conftest.py; the ones here start the far host's real servers on 127.0.0.1 with
free ports. The classes behind them (ServeRunner, Served, SmbdRunner, FarHost) and plain helper functions
are imported from tests/serve_fixtures.py, ssh_fixtures.py, smb_fixtures.py, far_host.py and helpers.py.

WORKBENCH_TESTS_STRICT=1 (set by .ci/run) turns a skipped test into a failed one. CI's setup installs
every server, runs as root and has FUSE, TUN and namespaces, so a test that skips there for a missing
binary or privilege is a broken setup hiding behind a green run. Only tests that cannot run on this
platform at all may still skip: those marked `macos`, or `skip_elsewhere` (a check of what one kind of
host says, e.g. "CIFS is unavailable here", that has nothing to check on another).
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import tempfile
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from tests.far_host import HOST, FarHost, servers_up
from tests.helpers import XDIST_WORKER_ENV, loopback_context
from tests.serve_fixtures import ServeRunner
from tests.smb_fixtures import SmbdRunner
from tests.ssh_fixtures import Served
from workbench.server.daemons.rsyncd import Rsyncd
from workbench.server.daemons.smbd import Smbd
from workbench.server.daemons.sshd import Sshd
from workbench.shared.credentials import generate
from workbench.shared.target import Target

STRICT_ENV = "WORKBENCH_TESTS_STRICT"


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "skip_elsewhere: the test checks one kind of host and may skip on others even when "
        f"{STRICT_ENV}=1 (give the reason in the skipif)",
    )
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        # A shell starting the tests in the background (`pytest &` without job control) hands them Ctrl-C ignored,
        # and every workbench they start would inherit that: the tests that stop a run with Ctrl-C need it as a
        # terminal gives it.
        signal.signal(signal.SIGINT, signal.default_int_handler)
    if os.environ.get(XDIST_WORKER_ENV) and not os.environ.get("WORKBENCH_HOME"):
        # Side by side (pytest -n), each worker keeps its own default results database and test files: two
        # workers making the same test files in one ~/.local/share/workbench would write over each other.
        home = tempfile.mkdtemp(prefix=f"workbench-home-{os.environ[XDIST_WORKER_ENV]}-")
        os.environ["WORKBENCH_HOME"] = home
        config.add_cleanup(lambda: shutil.rmtree(home, ignore_errors=True))


def strict() -> bool:
    return os.environ.get(STRICT_ENV, "") not in ("", "0")


def _skip_reason(report: pytest.TestReport) -> str:
    longrepr = report.longrepr
    if isinstance(longrepr, tuple) and len(longrepr) == 3:
        return str(longrepr[2]).removeprefix("Skipped: ")
    return str(longrepr)


def _may_skip(item: pytest.Item) -> bool:
    # Markers only, never the reason's wording: a general skip("... {why}") must not pass because `why`
    # happened to mention macOS.
    return bool(item.get_closest_marker("macos") or item.get_closest_marker("skip_elsewhere"))


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo) -> Iterator[None]:
    outcome = yield
    report: pytest.TestReport = outcome.get_result()
    if not strict() or not report.skipped or hasattr(report, "wasxfail"):
        return
    if _may_skip(item):
        return
    reason = _skip_reason(report)
    report.outcome = "failed"
    report.longrepr = (
        f"skipped under {STRICT_ENV}=1, where every server, root, FUSE, TUN and namespaces are expected: "
        f"{reason}"
    )


# -- the far host's servers, for the contract and integration groups -------------------------------------------


@pytest.fixture(scope="session")
def serve_runner(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServeRunner]:
    """One `workbench serve` process for the session (HTTP, FTP, the raw-TCP probe, iperf3)."""
    runner = ServeRunner(tmp_path_factory.mktemp("serve"))
    try:
        yield runner
    finally:
        runner.stop()


@pytest.fixture
def served(serve_runner: ServeRunner) -> ServeRunner:
    """The session's serve, restarted first if an earlier test stopped or killed it."""
    serve_runner.ensure()
    return serve_runner


@pytest.fixture
def far_host(tmp_path: Path) -> Iterator[FarHost]:
    """A far host as users start it: `servers up` (serve + sshd) with a private root and state."""
    if reason := Sshd.unavailable_reason():
        pytest.skip(reason)
    with servers_up(tmp_path, only=["serve", "sshd"]) as far:
        assert set(far.pids) == {"serve", "sshd"}, far.pids
        yield far


@pytest.fixture
def sshd(tmp_path: Path) -> Iterator[Served]:
    """A private sshd serving tmp_path's root; its bad_target logs in with a key the server does not know."""
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
    """A private rsync daemon serving tmp_path's root; its bad_target has the wrong password."""
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


@pytest.fixture(scope="session")
def smbd_runner(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SmbdRunner]:
    """One private smbd shared by the session's SMB tests; `smbd` restarts it when a test stopped it."""
    if reason := Smbd.unavailable_reason():
        pytest.skip(reason)
    runner = SmbdRunner(tmp_path_factory.mktemp("smbd"))
    try:
        yield runner
    finally:
        runner.stop()
        shutil.rmtree(runner.ctx.state_dir, ignore_errors=True)


@pytest.fixture
def smbd(smbd_runner: SmbdRunner) -> Smbd:
    """The session's smbd, restarted first if an earlier test stopped it."""
    return smbd_runner.ensure()
