"""Contract tests: one protocol client against one real server on 127.0.0.1, nothing else in between.

What belongs here: each client family's ClientContract class (tests/contract/suite.py: download, upload,
overwrite, file sets, missing file, bad credentials, server stopped mid-copy) and that client's own
checks (its details, options, refusals, the secrets it keeps off argv). The servers come from the fixtures
in tests/conftest.py (`served`, `sshd`, `rsyncd`, `smbd`), shared with tests/integration; a test module
maps them onto the contract's `served_root`, `make_client`, `bad_client` and `stop_server`.

Tests of `workbench run`, `servers up`, confinement or faults across several parts belong in
tests/integration.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.ssh_login import sshds_without_login_rc


@pytest.fixture(scope="package", autouse=True)
def _sshd_sessions_without_login_rc() -> Iterator[None]:
    """Every sshd these tests start skips the login shell's ~/.bashrc in its sessions (tests/ssh_login.py)."""
    with sshds_without_login_rc():
        yield
