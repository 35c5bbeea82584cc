"""Integration tests: several real parts together, as users run them.

What belongs here: `workbench run` end to end (its JSON, database, report and exit codes), `serve` and
`servers up/status/down` and the lifecycle of the processes they start, the servers' confinement of a
hostile authenticated client, and the fault matrix (servers stopped, killed, out of disk, or on the wrong
port mid-copy). Everything runs on 127.0.0.1 with free ports; the servers come from the fixtures in
tests/conftest.py or are started by the test itself. Some tests need root (private server state, mounts)
and skip without it.

Tests that need network namespaces (the emulated lab) belong in tests/lab.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.ssh_login import (
    login_host,  # noqa: F401 -- a fixture for test_via_ssh and test_fleet_cli
    sshds_without_login_rc,
)
from tests.stock_urls import StockSite


@pytest.fixture(scope="package", autouse=True)
def _sshd_sessions_without_login_rc() -> Iterator[None]:
    """Every sshd these tests start skips the login shell's ~/.bashrc in its sessions (tests/ssh_login.py)."""
    with sshds_without_login_rc():
        yield


@pytest.fixture
def site(tmp_path: Path) -> Iterator[StockSite]:
    """Stock servers on 127.0.0.1 (started by the test with site.start(kind)), stopped afterwards."""
    stock = StockSite(tmp_path / "site")
    try:
        yield stock
    finally:
        stock.stop()
