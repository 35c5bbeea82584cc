"""Unit tests: pure logic and the CLI's input checks, each in one process with no server behind it.

What belongs here: parsing, maths, result documents, config and credential files, the refusals the CLI makes
before it starts anything, and code that needs at most a local socket, a child process or a pseudo-terminal
of its own. `python -m pytest tests/unit` needs no root and no installed server: a test that needs root
(e.g. to mount a small tmpfs) skips without it, a macOS-only one is marked `macos`.

A test that needs a real server belongs in tests/contract (one client, one server) or tests/integration
(several parts together); asking for one of the server fixtures of tests/conftest.py here fails.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.fakes import FakeClient, Script

# The fixtures in tests/conftest.py that start a real server (serve, sshd, rsyncd, smbd, `servers up`).
SERVER_FIXTURES = frozenset({"serve_runner", "served", "far_host", "sshd", "rsyncd", "smbd_runner", "smbd"})


def pytest_runtest_setup(item: pytest.Item) -> None:
    asked = sorted(SERVER_FIXTURES.intersection(getattr(item, "fixturenames", ())))
    if asked:
        pytest.fail(
            f"a unit test starts no server, but this one asks for {', '.join(asked)}: "
            "move it to tests/contract or tests/integration",
            pytrace=False,
        )


@pytest.fixture
def script(tmp_path: Path) -> Iterator[Script]:
    """The scripted fake client's script (tests/fakes.py), with a far root of its own, for tests of the runner."""
    far_root = tmp_path / "far"
    far_root.mkdir()
    FakeClient.script = Script(far_root=far_root)
    yield FakeClient.script
    del FakeClient.script
